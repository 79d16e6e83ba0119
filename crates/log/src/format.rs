//! On-media headers of the log file and of the PMEM region. Byte layouts are documented in
//! docs/design/log.md; the structs here exist to pin their sizes at compile time.

use crate::config::CommitMode;

/// The first LSN of every log. Non-zero so that an all-zero header never names a valid position,
/// and equal to the log file's header size so that a record's file offset is its LSN.
pub const LOG_START_LSN: u64 = 4096;
/// Bytes reserved for the header at the start of the log file and of the PMEM region.
pub const HEADER_BYTES: usize = 4096;
/// Offset in the PMEM region of the 8-byte word holding the ring's start LSN (its own line).
pub const PMEM_START_WORD: usize = 64;

const LOG_MAGIC: [u8; 8] = *b"TSLOGv01";
const PMEM_MAGIC: [u8; 8] = *b"TSPMEM01";
const FORMAT_VERSION: u32 = 1;

/// LSNs stay below 2^56 (64 PiB of log) so that the start word has room for a check byte.
pub const MAX_LSN: u64 = (1 << 56) - 1;

/// The PMEM start word packs an LSN with a CRC-8 of it in one failure-atomic 8-byte store:
/// `lsn << 8 | crc8(lsn)`. A damaged word (any single-bit or odd-count flip, for one) is
/// detected instead of sending recovery to a wrong position.
pub fn encode_start_word(lsn: u64) -> u64 {
    assert!(lsn <= MAX_LSN, "LSN {lsn} beyond the format's 56-bit limit");
    lsn << 8 | u64::from(crc8(&lsn.to_le_bytes()[..7]))
}

/// The LSN in a start word, or `None` if the word is damaged or names an impossible position.
pub fn decode_start_word(word: u64) -> Option<u64> {
    let lsn = word >> 8;
    let valid = crc8(&lsn.to_le_bytes()[..7]) == word as u8
        && lsn >= LOG_START_LSN
        && lsn.is_multiple_of(crate::record::RECORD_ALIGN);
    valid.then_some(lsn)
}

/// Stores `lsn` in the PMEM start word and makes it persistent (one failure-atomic store).
pub fn persist_start_word(
    region: &dyn tailstore_media::Region,
    lsn: u64,
) -> tailstore_media::Result<()> {
    region.store_u64(PMEM_START_WORD, encode_start_word(lsn));
    region.persist(PMEM_START_WORD, 8)
}

/// The start word's raw value and its LSN (`None` if damaged).
pub fn read_start_word(region: &dyn tailstore_media::Region) -> (u64, Option<u64>) {
    let word = region.load_u64(PMEM_START_WORD);
    (word, decode_start_word(word))
}

/// CRC-8 with polynomial x^8 + x^2 + x + 1: tiny, and detects every single-bit error.
fn crc8(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0u8, |mut crc, byte| {
        crc ^= byte;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 {
                crc << 1 ^ 0x07
            } else {
                crc << 1
            };
        }
        crc
    })
}

pub fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

pub fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Header of the log file, at offset 0. Written once, at creation, and made durable before the
/// first record.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogFileHeader {
    pub magic: [u8; 8],
    pub version: u32,
    pub mode: u32,
    pub db_id: u64,
    pub start_lsn: u64,
    pub block_bytes: u64,
    pub crc: u32,
    pub reserved: u32,
}
const _: () = assert!(std::mem::size_of::<LogFileHeader>() == 48);

/// Static header of the PMEM region, at offset 0; the dynamic start-LSN word follows at
/// [`PMEM_START_WORD`], and the ring's bytes at [`HEADER_BYTES`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmemHeader {
    pub magic: [u8; 8],
    pub version: u32,
    pub mode: u32,
    pub db_id: u64,
    pub ring_bytes: u64,
    pub block_bytes: u64,
    pub data_offset: u64,
    pub crc: u32,
    pub reserved: u32,
}
const _: () = assert!(std::mem::size_of::<PmemHeader>() == 56);
const _: () = assert!(std::mem::size_of::<PmemHeader>() <= PMEM_START_WORD);
const _: () = assert!(PMEM_START_WORD.is_multiple_of(64) && HEADER_BYTES as u64 == LOG_START_LSN);

/// Why a header was rejected; turned into a user-facing error by the caller, who knows the path.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderProblem {
    Magic,
    Version(u32),
    Checksum,
    Mode(u32),
}

impl std::fmt::Display for HeaderProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderProblem::Magic => write!(f, "not a tailstore file (bad magic number)"),
            HeaderProblem::Version(v) => write!(f, "unsupported format version {v}"),
            HeaderProblem::Checksum => write!(f, "header checksum mismatch (corrupt header)"),
            HeaderProblem::Mode(m) => write!(f, "unknown commit mode code {m}"),
        }
    }
}

fn check_common(
    magic: [u8; 8],
    want: [u8; 8],
    version: u32,
    mode: u32,
) -> Result<(), HeaderProblem> {
    if magic != want {
        return Err(HeaderProblem::Magic);
    }
    if version != FORMAT_VERSION {
        return Err(HeaderProblem::Version(version));
    }
    if CommitMode::from_code(mode).is_none() {
        return Err(HeaderProblem::Mode(mode));
    }
    Ok(())
}

impl LogFileHeader {
    pub fn new(mode: CommitMode, db_id: u64, block_bytes: usize) -> Self {
        let mut h = Self {
            magic: LOG_MAGIC,
            version: FORMAT_VERSION,
            mode: mode.code(),
            db_id,
            start_lsn: LOG_START_LSN,
            block_bytes: block_bytes as u64,
            crc: 0,
            reserved: 0,
        };
        h.crc = crc32c::crc32c(&h.encode()[..40]);
        h
    }

    pub fn encode(&self) -> [u8; 48] {
        let mut b = [0u8; 48];
        b[0..8].copy_from_slice(&self.magic);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.mode.to_le_bytes());
        b[16..24].copy_from_slice(&self.db_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.start_lsn.to_le_bytes());
        b[32..40].copy_from_slice(&self.block_bytes.to_le_bytes());
        b[40..44].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; 48]) -> Result<Self, HeaderProblem> {
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[0..8]);
        let h = Self {
            magic,
            version: le_u32(b, 8),
            mode: le_u32(b, 12),
            db_id: le_u64(b, 16),
            start_lsn: le_u64(b, 24),
            block_bytes: le_u64(b, 32),
            crc: le_u32(b, 40),
            reserved: 0,
        };
        check_common(magic, LOG_MAGIC, h.version, h.mode)?;
        if crc32c::crc32c(&b[..40]) != h.crc || h.start_lsn < LOG_START_LSN {
            return Err(HeaderProblem::Checksum);
        }
        Ok(h)
    }

    pub fn commit_mode(&self) -> CommitMode {
        CommitMode::from_code(self.mode).unwrap_or(CommitMode::Fsync)
    }
}

impl PmemHeader {
    pub fn new(mode: CommitMode, db_id: u64, ring_bytes: usize, block_bytes: usize) -> Self {
        let mut h = Self {
            magic: PMEM_MAGIC,
            version: FORMAT_VERSION,
            mode: mode.code(),
            db_id,
            ring_bytes: ring_bytes as u64,
            block_bytes: block_bytes as u64,
            data_offset: HEADER_BYTES as u64,
            crc: 0,
            reserved: 0,
        };
        h.crc = crc32c::crc32c(&h.encode()[..48]);
        h
    }

    pub fn encode(&self) -> [u8; 56] {
        let mut b = [0u8; 56];
        b[0..8].copy_from_slice(&self.magic);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.mode.to_le_bytes());
        b[16..24].copy_from_slice(&self.db_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.ring_bytes.to_le_bytes());
        b[32..40].copy_from_slice(&self.block_bytes.to_le_bytes());
        b[40..48].copy_from_slice(&self.data_offset.to_le_bytes());
        b[48..52].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; 56]) -> Result<Self, HeaderProblem> {
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[0..8]);
        let h = Self {
            magic,
            version: le_u32(b, 8),
            mode: le_u32(b, 12),
            db_id: le_u64(b, 16),
            ring_bytes: le_u64(b, 24),
            block_bytes: le_u64(b, 32),
            data_offset: le_u64(b, 40),
            crc: le_u32(b, 48),
            reserved: 0,
        };
        check_common(magic, PMEM_MAGIC, h.version, h.mode)?;
        if crc32c::crc32c(&b[..48]) != h.crc || h.data_offset != HEADER_BYTES as u64 {
            return Err(HeaderProblem::Checksum);
        }
        Ok(h)
    }

    pub fn commit_mode(&self) -> CommitMode {
        CommitMode::from_code(self.mode).unwrap_or(CommitMode::Buffer)
    }

    /// Bytes the region must have to hold this header and its ring.
    pub fn region_bytes(&self) -> u64 {
        self.data_offset + self.ring_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_word_detects_every_single_bit_flip() {
        for lsn in [LOG_START_LSN, 4096 + 8 * 12345, MAX_LSN & !7] {
            let word = encode_start_word(lsn);
            assert_eq!(decode_start_word(word), Some(lsn));
            for bit in 0..64 {
                assert_eq!(
                    decode_start_word(word ^ 1 << bit),
                    None,
                    "lsn {lsn} bit {bit}"
                );
            }
        }
        assert_eq!(decode_start_word(0), None);
        assert_eq!(decode_start_word(u64::MAX), None);
    }

    #[test]
    fn headers_round_trip_and_reject_damage() {
        let log = LogFileHeader::new(CommitMode::Buffer, 99, 65536);
        assert_eq!(LogFileHeader::decode(&log.encode()), Ok(log));
        let mut bad = log.encode();
        bad[20] ^= 1;
        assert_eq!(LogFileHeader::decode(&bad), Err(HeaderProblem::Checksum));
        assert_eq!(LogFileHeader::decode(&[0u8; 48]), Err(HeaderProblem::Magic));

        let pmem = PmemHeader::new(CommitMode::PmemLog, 7, 1 << 20, 65536);
        assert_eq!(PmemHeader::decode(&pmem.encode()), Ok(pmem));
        let mut bad = pmem.encode();
        bad[30] ^= 0x10;
        assert_eq!(PmemHeader::decode(&bad), Err(HeaderProblem::Checksum));
        let mut wrong_version = pmem.encode();
        wrong_version[8] = 9;
        assert_eq!(
            PmemHeader::decode(&wrong_version),
            Err(HeaderProblem::Version(9))
        );
    }
}
