//! The log record: a 16-byte header, the payload, padding to 8 bytes.
//!
//! ```text
//! offset size field
//!      0    4 crc      CRC32C over bytes 4..16 of the header and the payload, seeded with the
//!                      database's salt (so a record of another database never verifies)
//!      4    4 len      payload length in bytes
//!      8    8 lsn      LSN of the record's first byte (its position in the log's byte stream)
//!     16  len payload
//!      …      padding  to the next multiple of 8; not covered by the CRC
//! ```
//! All integers little-endian. The LSN inside the record is what makes a stale record (from an
//! earlier lap of the ring, or beyond a truncation) fail verification at a given position.

use crate::format::{le_u32, le_u64};

/// Bytes of a record header.
pub const RECORD_HEADER: usize = 16;
/// Records start at multiples of this.
pub const RECORD_ALIGN: u64 = 8;
/// The largest payload recovery accepts. Appends are limited to it as well as to half the
/// ring (`Shared::max_record`): a record recovery would refuse ends the valid prefix there,
/// and every commit after it with it.
pub const MAX_PAYLOAD: usize = 64 * 1024 * 1024;

/// Bytes a record with `payload_len` bytes of payload occupies in the log.
pub fn record_size(payload_len: usize) -> u64 {
    ((RECORD_HEADER + payload_len) as u64).div_ceil(RECORD_ALIGN) * RECORD_ALIGN
}

/// The checksum seed of a database, derived from its random identity.
pub fn salt(db_id: u64) -> u32 {
    crc32c::crc32c(&db_id.to_le_bytes())
}

fn checksum(salt: u32, len: u32, lsn: u64, payload: &[u8]) -> u32 {
    let mut fields = [0u8; 12];
    fields[..4].copy_from_slice(&len.to_le_bytes());
    fields[4..].copy_from_slice(&lsn.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c_append(salt, &fields), payload)
}

/// Builds the header of a record at `lsn`.
pub fn encode_header(salt: u32, lsn: u64, payload: &[u8]) -> [u8; RECORD_HEADER] {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let mut header = [0u8; RECORD_HEADER];
    header[..4].copy_from_slice(&checksum(salt, len, lsn, payload).to_le_bytes());
    header[4..8].copy_from_slice(&len.to_le_bytes());
    header[8..].copy_from_slice(&lsn.to_le_bytes());
    header
}

/// A header whose LSN and length are plausible for position `lsn`; the CRC is checked later,
/// once the payload has been read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CandidateHeader {
    crc: u32,
    pub len: usize,
    lsn: u64,
}

/// Parses a header found at `lsn`. `None` when it cannot start a valid record there.
pub fn parse_header(bytes: &[u8; RECORD_HEADER], lsn: u64) -> Option<CandidateHeader> {
    let header = CandidateHeader {
        crc: le_u32(bytes, 0),
        len: le_u32(bytes, 4) as usize,
        lsn: le_u64(bytes, 8),
    };
    (header.lsn == lsn && header.len <= MAX_PAYLOAD).then_some(header)
}

impl CandidateHeader {
    /// Whether `payload` completes this header into a valid record.
    pub fn verifies(&self, salt: u32, payload: &[u8]) -> bool {
        payload.len() == self.len && checksum(salt, self.len as u32, self.lsn, payload) == self.crc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode(salt: u32, lsn: u64, bytes: &[u8]) -> Option<Vec<u8>> {
        let header: [u8; RECORD_HEADER] = bytes.get(..RECORD_HEADER)?.try_into().ok()?;
        let h = parse_header(&header, lsn)?;
        let payload = bytes.get(RECORD_HEADER..RECORD_HEADER + h.len)?;
        h.verifies(salt, payload).then(|| payload.to_vec())
    }

    fn encode(salt: u32, lsn: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = encode_header(salt, lsn, payload).to_vec();
        out.extend_from_slice(payload);
        out.resize(record_size(payload.len()) as usize, 0xEE);
        out
    }

    #[test]
    fn sizes_are_aligned() {
        assert_eq!(record_size(0), 16);
        assert_eq!(record_size(1), 24);
        assert_eq!(record_size(8), 24);
        assert_eq!(record_size(128), 144);
    }

    proptest! {
        #[test]
        fn round_trip(db in any::<u64>(), lsn in any::<u64>(), payload in proptest::collection::vec(any::<u8>(), 0..600)) {
            let s = salt(db);
            let bytes = encode(s, lsn, &payload);
            prop_assert_eq!(bytes.len() as u64 % RECORD_ALIGN, 0);
            prop_assert_eq!(decode(s, lsn, &bytes), Some(payload));
        }

        #[test]
        fn any_bit_flip_is_detected(lsn in any::<u64>(), payload in proptest::collection::vec(any::<u8>(), 1..300), bit in any::<prop::sample::Index>()) {
            let s = salt(7);
            let mut bytes = encode(s, lsn, &payload);
            let covered = RECORD_HEADER + payload.len();
            let bit = bit.index(covered * 8);
            bytes[bit / 8] ^= 1 << (bit % 8);
            prop_assert_eq!(decode(s, lsn, &bytes), None);
        }

        #[test]
        fn wrong_position_or_database_is_rejected(lsn in 0u64..u64::MAX / 2, payload in proptest::collection::vec(any::<u8>(), 0..100), shift in 1u64..1_000_000) {
            let bytes = encode(salt(1), lsn, &payload);
            prop_assert_eq!(decode(salt(1), lsn + shift * RECORD_ALIGN, &bytes), None);
            prop_assert_eq!(decode(salt(2), lsn, &bytes), None);
        }
    }
}
