//! Redis's ziplist (before 7.0: small hashes, sorted sets and list nodes), read into its
//! elements; integers come back as their decimal text.
//!
//! ```text
//! ziplist  = bytes:u32le  tail:u32le  count:u16le (65535: not kept)  entry*  0xff
//! entry    = prevlen  encoding [data]      prevlen: 1 byte below 254, else 0xfe u32le
//! 00llllll data                   string of up to 63 bytes
//! 01llllll llllllll data          string of up to 16383 bytes (length big-endian)
//! 10000000 len:u32be data         longer string
//! 11000000 / 11010000 / 11100000  16, 32, 64-bit signed integer, little-endian
//! 11110000 / 11111110             24, 8-bit signed integer
//! 1111xxxx (xxxx 0001..1101)      the integer xxxx - 1 (0..12), no data
//! ```

use super::listpack::{int_text, little_endian_int};
use super::{bad, Budget, RdbError};

const HEADER: usize = 10;

/// The elements of the ziplist `blob`.
pub fn elements(blob: &[u8], budget: &mut Budget) -> Result<Vec<Vec<u8>>, RdbError> {
    super::packed_elements(blob, HEADER, entry, budget)
}

/// The entry at the start of `rest` and its whole size.
fn entry(rest: &[u8]) -> Result<(Vec<u8>, usize), RdbError> {
    let take = |from: usize, len: usize| {
        rest.get(from..from + len)
            .ok_or(bad("ziplist entry runs past its end"))
    };
    let at = if rest[0] < 0xfe { 1 } else { 5 };
    let first = take(at, 1)?[0];
    let (element, body) = match first >> 6 {
        0 => {
            let len = usize::from(first & 0x3f);
            (take(at + 1, len)?.to_vec(), 1 + len)
        }
        1 => {
            let len = usize::from(first & 0x3f) << 8 | usize::from(take(at + 1, 1)?[0]);
            (take(at + 2, len)?.to_vec(), 2 + len)
        }
        2 if first == 0x80 => {
            let raw = take(at + 1, 4)?;
            let len = u32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
            (take(at + 5, len)?.to_vec(), 5 + len)
        }
        3 => {
            let width = match first {
                0xc0 => 2,
                0xd0 => 4,
                0xe0 => 8,
                0xf0 => 3,
                0xfe => 1,
                0xf1..=0xfd => return Ok((int_text(i64::from(first & 0x0f) - 1), at + 1)),
                _ => return Err(bad("ziplist entry of an unknown encoding")),
            };
            (int_text(little_endian_int(take(at + 1, width)?)), 1 + width)
        }
        _ => return Err(bad("ziplist entry of an unknown encoding")),
    };
    Ok((element, at + body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::END;

    fn ziplist(count: u16, entries: &[&[u8]]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let total = (HEADER + body.len() + 1) as u32;
        let mut blob = total.to_le_bytes().to_vec();
        blob.extend_from_slice(&0u32.to_le_bytes()); // the tail's offset: not read
        blob.extend_from_slice(&count.to_le_bytes());
        blob.extend_from_slice(&body);
        blob.push(END);
        blob
    }

    #[test]
    fn every_encoding_reads() {
        let mut long_prev = vec![0xfe, 0, 1, 0, 0, 0x02];
        long_prev.extend_from_slice(b"ab");
        let blob = ziplist(
            9,
            &[
                &[0x00, 0x02, b'h', b'i'],          // "hi"
                &[0x04, 0x40, 0x02, b'o', b'k'],    // 14-bit length "ok"
                &[0x05, 0x80, 0, 0, 0, 0x01, b'z'], // 32-bit length "z"
                &[0x07, 0xc0, 0x18, 0xfc],          // -1000
                &[0x04, 0xf0, 0x00, 0x00, 0x80],    // -2^23
                &[0x05, 0xfe, 0x80],                // -128
                &[0x03, 0xf1],                      // 0
                &[0x02, 0xfd],                      // 12
                &long_prev,                         // "ab", after a long entry
            ],
        );
        let expected: Vec<Vec<u8>> = [
            "hi", "ok", "z", "-1000", "-8388608", "-128", "0", "12", "ab",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        assert_eq!(elements(&blob, &mut Budget::unlimited()).unwrap(), expected);
    }

    #[test]
    fn damaged_ziplists_are_refused() {
        let good = ziplist(1, &[&[0x00, 0x02, b'h', b'i']]);
        assert!(elements(&good, &mut Budget::unlimited()).is_ok());
        let mut wrong_count = good.clone();
        wrong_count[8] = 3;
        let mut past_end = good.clone();
        past_end[HEADER + 1] = 0x09;
        let mut unknown = good.clone();
        unknown[HEADER + 1] = 0xc1;
        for (blob, what) in [
            (wrong_count, "count"),
            (past_end, "past the end"),
            (unknown, "unknown encoding"),
            (good[..good.len() - 1].to_vec(), "no end marker"),
        ] {
            assert!(elements(&blob, &mut Budget::unlimited()).is_err(), "{what}");
        }
    }
}
