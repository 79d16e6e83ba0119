//! Redis's listpack (7.0+: small hashes, sorted sets, sets and list nodes), read into its
//! elements; integers come back as their decimal text, as Redis answers them.
//!
//! ```text
//! listpack = total:u32le  count:u16le (65535: not kept)  entry*  0xff
//! entry    = encoding [data]  backlen          backlen: encoding + data's size, 1-5 bytes
//! 0xxxxxxx                    7-bit unsigned integer
//! 10llllll data               string of up to 63 bytes
//! 110iiiii iiiiiiii           13-bit signed integer
//! 1110llll llllllll data      string of up to 4095 bytes (length big-endian)
//! 11110000 len:u32le data     longer string
//! 11110001 .. 11110100        16, 24, 32, 64-bit signed integer, little-endian
//! ```

use super::{bad, sign_extend, Budget, RdbError, COUNT_NOT_KEPT};

const HEADER: usize = 6;

/// The elements of the listpack `blob`.
pub fn elements(blob: &[u8], budget: &mut Budget) -> Result<Vec<Vec<u8>>, RdbError> {
    super::packed_elements(blob, HEADER, entry, budget)
}

/// The entry at the start of `rest` and its whole size (with its back length).
fn entry(rest: &[u8]) -> Result<(Vec<u8>, usize), RdbError> {
    let take = |from: usize, len: usize| {
        rest.get(from..from + len)
            .ok_or(bad("listpack entry runs past its end"))
    };
    let first = rest[0];
    let (element, body) = if first & 0x80 == 0 {
        (int_text(i64::from(first)), 1)
    } else if first & 0xc0 == 0x80 {
        let len = usize::from(first & 0x3f);
        (take(1, len)?.to_vec(), 1 + len)
    } else if first & 0xe0 == 0xc0 {
        let raw = u64::from(first & 0x1f) << 8 | u64::from(take(1, 1)?[0]);
        (int_text(sign_extend(raw, 13)), 2)
    } else if first & 0xf0 == 0xe0 {
        let len = usize::from(first & 0x0f) << 8 | usize::from(take(1, 1)?[0]);
        (take(2, len)?.to_vec(), 2 + len)
    } else {
        match first {
            0xf0 => {
                let raw = take(1, 4)?;
                let len = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
                (take(5, len)?.to_vec(), 5 + len)
            }
            0xf1..=0xf4 => {
                let width = [2, 3, 4, 8][usize::from(first - 0xf1)];
                (int_text(little_endian_int(take(1, width)?)), 1 + width)
            }
            _ => return Err(bad("listpack entry of an unknown encoding")),
        }
    };
    let back = back_len_size(body);
    take(body, back)?;
    Ok((element, body + back))
}

/// The bytes of an entry's back length, which stores `body` 7 bits a byte (Redis's
/// thresholds, one short of the powers of two past 127).
fn back_len_size(body: usize) -> usize {
    match body {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// A listpack element to write.
pub enum Item<'a> {
    Int(i64),
    Str(&'a [u8]),
}

/// The listpack of `items`, each in its smallest encoding.
pub fn write(items: &[Item]) -> Vec<u8> {
    let mut out = vec![0u8; HEADER];
    for item in items {
        let start = out.len();
        match *item {
            Item::Int(value) => put_int(&mut out, value),
            Item::Str(bytes) => put_str(&mut out, bytes),
        }
        let body = out.len() - start;
        put_back_len(&mut out, body);
    }
    out.push(crate::END);
    // Nodes close at 4 KiB of entries, and one entry is bounded by the commit limit (a
    // quarter of the longest log record): far below the 4 GiB a listpack can say.
    assert!(
        out.len() <= u32::MAX as usize,
        "a listpack of {} bytes",
        out.len()
    );
    let total = out.len() as u32;
    out[..4].copy_from_slice(&total.to_le_bytes());
    let count = items.len().min(COUNT_NOT_KEPT) as u16;
    out[4..HEADER].copy_from_slice(&count.to_le_bytes());
    out
}

fn put_int(out: &mut Vec<u8>, value: i64) {
    if (0..=127).contains(&value) {
        out.push(value as u8);
    } else if (-4096..=4095).contains(&value) {
        let raw = (value as u64) & 0x1fff;
        out.extend_from_slice(&[0xc0 | (raw >> 8) as u8, raw as u8]);
    } else if let Ok(small) = i16::try_from(value) {
        out.push(0xf1);
        out.extend_from_slice(&small.to_le_bytes());
    } else if (-(1 << 23)..1 << 23).contains(&value) {
        out.push(0xf2);
        out.extend_from_slice(&(value as i32).to_le_bytes()[..3]);
    } else if let Ok(word) = i32::try_from(value) {
        out.push(0xf3);
        out.extend_from_slice(&word.to_le_bytes());
    } else {
        out.push(0xf4);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn put_str(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len();
    if len < 64 {
        out.push(0x80 | len as u8);
    } else if len < 4096 {
        out.extend_from_slice(&[0xe0 | (len >> 8) as u8, len as u8]);
    } else {
        out.push(0xf0);
        out.extend_from_slice(&(len as u32).to_le_bytes());
    }
    out.extend_from_slice(bytes);
}

/// The back length of an entry of `body` bytes: its highest 7 bits first, every byte but
/// that one marked with the high bit (it is read from the right).
fn put_back_len(out: &mut Vec<u8>, body: usize) {
    let size = back_len_size(body);
    out.push((body >> (7 * (size - 1))) as u8);
    for shift in (0..size - 1).rev() {
        out.push(((body >> (7 * shift)) & 0x7f) as u8 | 0x80);
    }
}

/// The signed little-endian integer of `bytes` (2 to 8 of them).
pub fn little_endian_int(bytes: &[u8]) -> i64 {
    let raw = bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| acc << 8 | u64::from(b));
    sign_extend(raw, bytes.len() as u32 * 8)
}

pub fn int_text(value: i64) -> Vec<u8> {
    value.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::END;

    /// A listpack of `entries` (each encoding, data and back length already laid out).
    fn listpack(count: u16, entries: &[&[u8]]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let total = (HEADER + body.len() + 1) as u32;
        let mut blob = total.to_le_bytes().to_vec();
        blob.extend_from_slice(&count.to_le_bytes());
        blob.extend_from_slice(&body);
        blob.push(END);
        blob
    }

    #[test]
    fn every_encoding_reads() {
        let mut long = vec![0xf0];
        long.extend_from_slice(&5u32.to_le_bytes());
        long.extend_from_slice(b"fives");
        long.push(10);
        let blob = listpack(
            8,
            &[
                &[0x05, 0x01],                            // 5
                &[0x82, b'h', b'i', 0x03],                // "hi"
                &[0xdf, 0xff, 0x02],                      // 13-bit -1
                &[0xe0, 0x02, b'o', b'k', 0x04],          // 12-bit length "ok"
                &long,                                    // 32-bit length "fives"
                &[0xf1, 0x18, 0xfc, 0x03],                // -1000
                &[0xf2, 0x00, 0x00, 0x80, 0x04],          // -2^23
                &[0xf4, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x09], // i64::MIN
            ],
        );
        let expected: Vec<Vec<u8>> = ["5", "hi", "-1", "ok", "fives", "-1000", "-8388608"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .chain([i64::MIN.to_string().into_bytes()])
            .collect();
        assert_eq!(elements(&blob, &mut Budget::unlimited()).unwrap(), expected);
    }

    /// The entries' sizes read from the right, by their back lengths, as Redis walks a
    /// listpack backwards (XREVRANGE): each must lead exactly to the entry before it.
    fn walk_back(blob: &[u8]) -> usize {
        let mut at = blob.len() - 1; // the end marker
        let mut entries = 0;
        while at > HEADER {
            let (mut body, mut shift, mut back) = (0usize, 0, 0);
            loop {
                let byte = blob[at - 1 - back];
                body |= usize::from(byte & 0x7f) << shift;
                back += 1;
                if byte & 0x80 == 0 {
                    break;
                }
                shift += 7;
            }
            assert_eq!(back, back_len_size(body));
            at -= back + body;
            entries += 1;
        }
        assert_eq!(at, HEADER);
        entries
    }

    fn item() -> impl proptest::strategy::Strategy<Value = (Option<i64>, Vec<u8>)> {
        use proptest::prelude::*;
        prop_oneof![
            any::<i64>().prop_map(|v| (Some(v), Vec::new())),
            (-70_000i64..70_000).prop_map(|v| (Some(v), Vec::new())),
            (-(1i64 << 24)..1 << 24).prop_map(|v| (Some(v), Vec::new())),
            proptest::collection::vec(any::<u8>(), 0..200).prop_map(|s| (None, s)),
            proptest::collection::vec(any::<u8>(), 4000..20_000).prop_map(|s| (None, s)),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn what_write_lays_out_reads_back_both_ways(
            items in proptest::collection::vec(item(), 0..80),
        ) {
            let to_write: Vec<Item> = items
                .iter()
                .map(|(int, text)| int.map_or(Item::Str(text), Item::Int))
                .collect();
            let blob = write(&to_write);
            let expected: Vec<Vec<u8>> = items
                .iter()
                .map(|(int, text)| int.map_or_else(|| text.clone(), int_text))
                .collect();
            proptest::prop_assert_eq!(elements(&blob, &mut Budget::unlimited()).unwrap(), expected);
            proptest::prop_assert_eq!(walk_back(&blob), items.len());
        }
    }

    #[test]
    fn back_lengths_at_their_thresholds_walk_back() {
        for len in [
            0, 58, 59, 60, 61, 62, 63, 64, 125, 126, 127, 128, 16_378, 16_380, 16_381, 16_383,
        ] {
            let text = vec![b'x'; len];
            let blob = write(&[Item::Str(&text), Item::Int(1)]);
            assert_eq!(walk_back(&blob), 2, "{len}");
            assert_eq!(elements(&blob, &mut Budget::unlimited()).unwrap()[0], text);
        }
    }

    #[test]
    fn damaged_listpacks_are_refused() {
        let good = listpack(1, &[&[0x82, b'h', b'i', 0x03]]);
        assert!(elements(&good, &mut Budget::unlimited()).is_ok());
        let mut wrong_total = good.clone();
        wrong_total[0] += 1;
        let mut wrong_count = good.clone();
        wrong_count[4] = 2;
        let mut past_end = good.clone();
        past_end[HEADER] = 0x8a; // a string of 10 bytes in 4
        let mut unknown = good.clone();
        unknown[HEADER] = 0xf9;
        for (blob, what) in [
            (wrong_total, "total"),
            (wrong_count, "count"),
            (past_end, "past the end"),
            (unknown, "unknown encoding"),
            (good[..good.len() - 1].to_vec(), "no end marker"),
        ] {
            assert!(elements(&blob, &mut Budget::unlimited()).is_err(), "{what}");
        }
    }
}
