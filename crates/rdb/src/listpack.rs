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

use super::{sign_extend, RdbError};

const HEADER: usize = 6;

fn bad(what: &'static str) -> RdbError {
    RdbError::BadFormat(what)
}

/// The elements of the listpack `blob`.
pub fn elements(blob: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    super::packed_elements(blob, HEADER, entry)
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

/// The bytes of an entry's back length, which stores `body` 7 bits a byte.
fn back_len_size(body: usize) -> usize {
    match body {
        0..=127 => 1,
        128..=16_383 => 2,
        16_384..=2_097_151 => 3,
        2_097_152..=268_435_455 => 4,
        _ => 5,
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
        assert_eq!(elements(&blob).unwrap(), expected);
    }

    #[test]
    fn damaged_listpacks_are_refused() {
        let good = listpack(1, &[&[0x82, b'h', b'i', 0x03]]);
        assert!(elements(&good).is_ok());
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
            assert!(elements(&blob).is_err(), "{what}");
        }
    }
}
