//! LZF decompression (Marc Lehmann's format, which Redis uses for strings in RDB files and
//! DUMP payloads).
//!
//! ```text
//! 000lllll                      a literal run: the next l+1 bytes, as they are
//! lllooooo oooooooo             a copy of l+2 bytes (l: 1..=6) from o+1 bytes back
//! 111ooooo llllllll oooooooo    a copy of 7+l+2 bytes from o+1 bytes back
//! ```
//! A copy may overlap what it produces (a run of one byte repeated), so it goes byte by byte.

use super::RdbError;

/// The most one input byte can stand for: a long copy, three bytes, makes 264.
pub const MOST_OUTPUT_PER_INPUT_BYTE: usize = 88;

/// `input` decompressed, which must make exactly `len` bytes.
pub fn decompress(input: &[u8], len: usize) -> Result<Vec<u8>, RdbError> {
    if len > input.len().saturating_mul(MOST_OUTPUT_PER_INPUT_BYTE) {
        return Err(RdbError::BadFormat(
            "LZF length beyond what its data can make",
        ));
    }
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let mut at = 0;
    let next = |at: &mut usize| -> Result<u8, RdbError> {
        let byte = *input
            .get(*at)
            .ok_or(RdbError::BadFormat("LZF data ends inside a code"))?;
        *at += 1;
        Ok(byte)
    };
    while at < input.len() {
        let control = usize::from(next(&mut at)?);
        if control < 32 {
            let run = control + 1;
            let literal = input
                .get(at..at + run)
                .ok_or(RdbError::BadFormat("LZF literal runs past its data"))?;
            out.extend_from_slice(literal);
            at += run;
        } else {
            let mut count = control >> 5;
            if count == 7 {
                count += usize::from(next(&mut at)?);
            }
            let back = ((control & 0x1f) << 8) + usize::from(next(&mut at)?) + 1;
            let from = out
                .len()
                .checked_sub(back)
                .ok_or(RdbError::BadFormat("LZF copy from before its start"))?;
            for i in from..from + count + 2 {
                out.push(out[i]);
            }
        }
        if out.len() > len {
            return Err(RdbError::BadFormat("LZF data makes more than its length"));
        }
    }
    if out.len() != len {
        return Err(RdbError::BadFormat("LZF data makes less than its length"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_overlapping_copies_decompress() {
        // "ab"; a copy of 7 bytes from 2 back, which overlaps what it makes; "!".
        let input = [0x01, b'a', b'b', 0xa0, 0x01, 0x00, b'!'];
        assert_eq!(decompress(&input, 10).unwrap(), b"ababababa!");
    }

    #[test]
    fn a_long_copy_takes_its_extra_length_byte() {
        // "x", then a copy of 7 + 3 + 2 = 12 bytes from 1 back.
        let input = [0x00, b'x', 0xe0, 0x03, 0x00];
        assert_eq!(decompress(&input, 13).unwrap(), vec![b'x'; 13]);
    }

    #[test]
    fn damaged_input_is_refused() {
        let cases: [(&[u8], usize); 5] = [
            (&[0x05, b'a'], 6),       // a literal past the end
            (&[0x20, 0x05], 3),       // a copy from before the start
            (&[0x00, b'a', 0x20], 3), // a copy without its offset byte
            (&[0x01, b'a', b'b'], 1), // more than the length
            (&[0x01, b'a', b'b'], 3), // less than the length
        ];
        for (input, len) in cases {
            assert!(decompress(input, len).is_err(), "{input:?} as {len} bytes");
        }
        assert!(
            decompress(&[0x00, b'a'], 1000).is_err(),
            "a length no data could make"
        );
    }
}
