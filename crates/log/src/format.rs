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
const _: () = assert!(crc_offset(2) == std::mem::offset_of!(LogFileHeader, crc));

/// `buffer` mode: how far past the hardened LSN an append may write into the ring, at most.
/// A ring larger than this keeps, below the hardened LSN, the records of its last lap, which a
/// restart reads from PMEM instead of from the disk (decision 109); and recovery clears only
/// the slots from the end of the valid prefix to the hardened LSN plus this window, where a
/// crashed process can have left records beyond that end (a whole 1 GiB ring took 200 ms to
/// clear). Part of the format: that clearing relies on every process that wrote the ring
/// having kept to the same window, so it follows from the ring's size alone.
pub const BUFFER_APPEND_WINDOW: u64 = 64 << 20;

/// The bytes past its floor an append may write into a ring of `capacity` bytes in `mode`
/// (see [`BUFFER_APPEND_WINDOW`]); the whole ring in the other modes.
pub fn append_window(mode: CommitMode, capacity: u64) -> u64 {
    match mode {
        CommitMode::Buffer => capacity.min(BUFFER_APPEND_WINDOW),
        _ => capacity,
    }
}

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
const _: () = assert!(crc_offset(3) == std::mem::offset_of!(PmemHeader, crc));
const _: () = assert!(std::mem::size_of::<PmemHeader>() <= PMEM_START_WORD);
const _: () = assert!(PMEM_START_WORD.is_multiple_of(64) && HEADER_BYTES as u64 == LOG_START_LSN);

/// Why a header was rejected; turned into a user-facing error by the caller, who knows the path.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderProblem {
    Magic,
    Version(u32),
    Checksum,
    Mode(u32),
    /// Sizes no log is made with (`LogConfig::validate`), though the checksum matches.
    Sizes(String),
}

/// Whether a log could have been made with blocks of `block_bytes` (`LogConfig::validate`:
/// a power of two of at least 4 KiB). A header's sizes are checked, not only its checksum:
/// a block size of 0 divided by zero in the writer, a ring of 4 bytes failed an assertion.
fn plausible_block(block_bytes: u64) -> bool {
    block_bytes >= 4096 && block_bytes.is_power_of_two()
}

impl std::fmt::Display for HeaderProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderProblem::Magic => write!(f, "not a tailstore file (bad magic number)"),
            HeaderProblem::Version(v) => write!(f, "unsupported format version {v}"),
            HeaderProblem::Checksum => write!(f, "header checksum mismatch (corrupt header)"),
            HeaderProblem::Mode(m) => write!(f, "unknown commit mode code {m}"),
            HeaderProblem::Sizes(what) => write!(f, "impossible sizes in the header: {what}"),
        }
    }
}

/// Both headers are laid out the same way: magic (8), version (4), mode (4), db_id (8), then
/// `N` little-endian u64 fields, then a CRC32C of every byte before it.
const IDENTITY_BYTES: usize = 24;

const fn crc_offset(fields: usize) -> usize {
    IDENTITY_BYTES + 8 * fields
}

fn encode_fields<const N: usize>(
    magic: [u8; 8],
    mode: u32,
    db_id: u64,
    fields: [u64; N],
    out: &mut [u8],
) -> u32 {
    out[0..8].copy_from_slice(&magic);
    out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&mode.to_le_bytes());
    out[16..24].copy_from_slice(&db_id.to_le_bytes());
    for (i, field) in fields.iter().enumerate() {
        let at = IDENTITY_BYTES + 8 * i;
        out[at..at + 8].copy_from_slice(&field.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out[..crc_offset(N)]);
    out[crc_offset(N)..crc_offset(N) + 4].copy_from_slice(&crc.to_le_bytes());
    crc
}

/// Decoded identity and fields: `(mode, db_id, fields, crc)`.
type Decoded<const N: usize> = (u32, u64, [u64; N], u32);

fn decode_fields<const N: usize>(b: &[u8], want: [u8; 8]) -> Result<Decoded<N>, HeaderProblem> {
    if b[0..8] != want {
        return Err(HeaderProblem::Magic);
    }
    let version = le_u32(b, 8);
    if version != FORMAT_VERSION {
        return Err(HeaderProblem::Version(version));
    }
    let mode = le_u32(b, 12);
    if CommitMode::from_code(mode).is_none() {
        return Err(HeaderProblem::Mode(mode));
    }
    let crc = le_u32(b, crc_offset(N));
    if crc32c::crc32c(&b[..crc_offset(N)]) != crc {
        return Err(HeaderProblem::Checksum);
    }
    let fields = std::array::from_fn(|i| le_u64(b, IDENTITY_BYTES + 8 * i));
    Ok((mode, le_u64(b, 16), fields, crc))
}

impl LogFileHeader {
    pub fn new(mode: CommitMode, db_id: u64, block_bytes: usize) -> Self {
        Self::starting_at(mode, db_id, block_bytes, LOG_START_LSN)
    }

    /// The header of a log whose live part starts at `start_lsn` (the file below it is
    /// discarded once this header is durable).
    pub fn starting_at(mode: CommitMode, db_id: u64, block_bytes: usize, start_lsn: u64) -> Self {
        let mut bytes = [0u8; 48];
        let crc = encode_fields(
            LOG_MAGIC,
            mode.code(),
            db_id,
            [start_lsn, block_bytes as u64],
            &mut bytes,
        );
        Self {
            magic: LOG_MAGIC,
            version: FORMAT_VERSION,
            mode: mode.code(),
            db_id,
            start_lsn,
            block_bytes: block_bytes as u64,
            crc,
            reserved: 0,
        }
    }

    pub fn encode(&self) -> [u8; 48] {
        let mut bytes = [0u8; 48];
        encode_fields(
            self.magic,
            self.mode,
            self.db_id,
            [self.start_lsn, self.block_bytes],
            &mut bytes,
        );
        bytes
    }

    pub fn decode(b: &[u8; 48]) -> Result<Self, HeaderProblem> {
        let (mode, db_id, [start_lsn, block_bytes], crc) = decode_fields(b, LOG_MAGIC)?;
        if start_lsn < LOG_START_LSN {
            return Err(HeaderProblem::Checksum);
        }
        if !plausible_block(block_bytes) {
            return Err(HeaderProblem::Sizes(format!(
                "blocks of {block_bytes} bytes"
            )));
        }
        Ok(Self {
            magic: LOG_MAGIC,
            version: FORMAT_VERSION,
            mode,
            db_id,
            start_lsn,
            block_bytes,
            crc,
            reserved: 0,
        })
    }

    pub fn commit_mode(&self) -> CommitMode {
        CommitMode::from_code(self.mode).unwrap_or(CommitMode::Fsync)
    }
}

impl PmemHeader {
    pub fn new(mode: CommitMode, db_id: u64, ring_bytes: usize, block_bytes: usize) -> Self {
        let fields = [ring_bytes as u64, block_bytes as u64, HEADER_BYTES as u64];
        let crc = encode_fields(PMEM_MAGIC, mode.code(), db_id, fields, &mut [0u8; 56]);
        Self {
            magic: PMEM_MAGIC,
            version: FORMAT_VERSION,
            mode: mode.code(),
            db_id,
            ring_bytes: fields[0],
            block_bytes: fields[1],
            data_offset: fields[2],
            crc,
            reserved: 0,
        }
    }

    pub fn encode(&self) -> [u8; 56] {
        let mut bytes = [0u8; 56];
        let fields = [self.ring_bytes, self.block_bytes, self.data_offset];
        encode_fields(self.magic, self.mode, self.db_id, fields, &mut bytes);
        bytes
    }

    pub fn decode(b: &[u8; 56]) -> Result<Self, HeaderProblem> {
        let (mode, db_id, [ring_bytes, block_bytes, data_offset], crc) =
            decode_fields(b, PMEM_MAGIC)?;
        if data_offset != HEADER_BYTES as u64 {
            return Err(HeaderProblem::Checksum);
        }
        // As `LogConfig::validate` requires of a new log: whole blocks, at least two.
        let whole_blocks = plausible_block(block_bytes)
            && ring_bytes.is_multiple_of(block_bytes)
            && ring_bytes / block_bytes >= 2;
        if !whole_blocks {
            return Err(HeaderProblem::Sizes(format!(
                "a ring of {ring_bytes} bytes in blocks of {block_bytes}"
            )));
        }
        Ok(Self {
            magic: PMEM_MAGIC,
            version: FORMAT_VERSION,
            mode,
            db_id,
            ring_bytes,
            block_bytes,
            data_offset,
            crc,
            reserved: 0,
        })
    }

    pub fn commit_mode(&self) -> CommitMode {
        CommitMode::from_code(self.mode).unwrap_or(CommitMode::Buffer)
    }

    /// Bytes the region must have to hold this header and its ring.
    pub fn region_bytes(&self) -> u64 {
        self.data_offset.saturating_add(self.ring_bytes)
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

    /// Sizes no log is made with, under a valid checksum, are refused: they reached the
    /// ring's assertions (a capacity of 4 bytes) and the writer's division (blocks of 0).
    #[test]
    fn headers_with_impossible_sizes_are_refused() {
        for block in [0, 1, 3, 4095, 4096 * 3, u64::MAX] {
            let log = LogFileHeader::new(CommitMode::Fsync, 1, block as usize);
            assert!(
                matches!(
                    LogFileHeader::decode(&log.encode()),
                    Err(HeaderProblem::Sizes(_))
                ),
                "log file header, blocks of {block}"
            );
        }
        let cases: [(u64, u64); 8] = [
            (4, 4096),
            (0, 4096),
            (4096, 4096),
            (65536 + 8, 4096),
            (65536, 0),
            (65536, 4096 * 3),
            (u64::MAX, 4096),
            (u64::MAX / 4096 * 4096, 1 << 40),
        ];
        for (ring, block) in cases {
            let pmem = PmemHeader::new(CommitMode::Buffer, 1, ring as usize, block as usize);
            assert!(
                matches!(
                    PmemHeader::decode(&pmem.encode()),
                    Err(HeaderProblem::Sizes(_))
                ),
                "PMEM header, a ring of {ring} in blocks of {block}"
            );
        }
        let largest = PmemHeader::new(CommitMode::Buffer, 1, usize::MAX / 4096 * 4096, 4096);
        let decoded = PmemHeader::decode(&largest.encode()).expect("whole blocks");
        assert_eq!(decoded.region_bytes(), u64::MAX, "saturates");
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
