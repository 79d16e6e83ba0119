//! The meta pages: where a checkpoint is recorded.
//!
//! # Layout
//!
//! Pages `0..8` of the data file hold two *slots* of [`SLOT_PAGES`] pages each (slot 0: pages
//! 0–3, slot 1: pages 4–7). Checkpoint number `seq` writes slot `seq % 2`, so the previous
//! checkpoint's slot is never touched while the new one is written: a crash in the middle
//! leaves one slot torn (its page checksums fail) and the other intact. Opening takes the
//! valid slot with the highest `seq`.
//!
//! Each page of a slot is an ordinary checksummed page (kind `Meta`). The payloads, joined,
//! hold (little-endian):
//!
//! ```text
//! offset size field
//!      0    8 magic           "TSDBMETA"
//!      8    4 format          FORMAT (2; 1 in files written before `db_id` was recorded)
//!     12    4 page_size       PAGE_SIZE of the build that wrote it (zero in files written
//!                             before it was recorded, all of 8,192-byte pages)
//!     16    8 seq             checkpoint number, from 1
//!     24    8 checkpoint_lsn  redo starts here: every change logged below it is in the file
//!     32    8 page_count      pages in use or free below this page number (a record of
//!                             the checkpoint; an open bounds pages by the data file's
//!                             length, `recovery::rebuild_free_pages`)
//!     40    4 catalog_len     bytes of catalog that follow
//!     44    4 catalog_crc     CRC32C of the catalog bytes
//!     48    8 db_id           the database's id, which its log's headers (and the PMEM
//!                             files') carry too; 0 until the database's log exists
//!     56    … catalog         JSON (see `catalog.rs`)
//! ```
//!
//! Format 1 has no `db_id`: its catalog starts at 48. Such a file is read as one whose
//! `db_id` is not recorded yet, and the open that finds it records it (`Meta::db_id`).
//!
//! **Why the data file names its log.** Before it did, a data file would open with any log
//! of the right shape: one of another database (after a mistyped `--log-dir`) replayed its
//! records onto these pages whenever the LSNs happened to line up, and a database that had
//! not checkpointed yet, whose log was missing, looked like a creation cut short and was
//! opened empty over a new log. A data file whose `db_id` is recorded is opened only with
//! the log of that id, and never without one.

use tailstore_media::File;
use tailstore_storage::page::HEADER_SIZE;
use tailstore_storage::{Page, PageId, PageKind, PAGE_SIZE};

use crate::error::{EngineError, Result};

/// Pages per meta slot.
pub const SLOT_PAGES: u64 = 4;
/// The first page that holds data (after both meta slots).
pub const FIRST_DATA_PAGE: u64 = 2 * SLOT_PAGES;

const MAGIC: &[u8; 8] = b"TSDBMETA";
const FORMAT: u32 = 2;
/// The fixed part of a record, before its catalog.
const FIXED: usize = 56;
/// The same in format 1 (no `db_id`).
const FIXED_FORMAT_1: usize = 48;
/// The page size of files whose meta record has zero at `page_size`.
const UNRECORDED_PAGE_SIZE: usize = 8192;
/// Page sizes a meta record is believed to name; anything else is damage.
const PLAUSIBLE_PAGE_SIZES: std::ops::RangeInclusive<usize> = 4096..=(1 << 20);
const PAYLOAD: usize = PAGE_SIZE - HEADER_SIZE;
/// Largest catalog a slot holds.
pub const MAX_CATALOG: usize = SLOT_PAGES as usize * PAYLOAD - FIXED;

/// A checkpoint record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub seq: u64,
    pub checkpoint_lsn: u64,
    pub page_count: u64,
    /// The id of the database's log, once it has one (see the module documentation).
    pub db_id: Option<u64>,
    pub catalog: Vec<u8>,
}

impl Meta {
    fn encode(&self) -> Result<Vec<u8>> {
        if self.catalog.len() > MAX_CATALOG {
            return Err(EngineError::Open(format!(
                "the catalog ({} bytes) exceeds the {MAX_CATALOG} bytes a meta slot holds",
                self.catalog.len()
            )));
        }
        let mut out = Vec::with_capacity(FIXED + self.catalog.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&(PAGE_SIZE as u32).to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.checkpoint_lsn.to_le_bytes());
        out.extend_from_slice(&self.page_count.to_le_bytes());
        out.extend_from_slice(&(self.catalog.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&self.catalog).to_le_bytes());
        out.extend_from_slice(&self.db_id.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&self.catalog);
        Ok(out)
    }

    fn decode(bytes: &[u8]) -> std::result::Result<Meta, String> {
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
        if &bytes[..8] != MAGIC {
            return Err("bad magic".into());
        }
        let fixed = fixed_len(bytes)?;
        let page_size = recorded_page_size(bytes);
        if page_size != PAGE_SIZE {
            return Err(format!("records {page_size}-byte pages"));
        }
        let len = u32_at(40) as usize;
        let catalog = bytes
            .get(fixed..fixed + len)
            .ok_or_else(|| format!("catalog length {len} runs past the slot"))?;
        if crc32c::crc32c(catalog) != u32_at(44) {
            return Err("catalog checksum mismatch".into());
        }
        Ok(Meta {
            seq: u64_at(16),
            checkpoint_lsn: u64_at(24),
            page_count: u64_at(32),
            db_id: Some(u64_at(48)).filter(|&id| fixed == FIXED && id != 0),
            catalog: catalog.to_vec(),
        })
    }

    /// Writes this record into slot `seq % 2` and syncs the file.
    pub fn write(&self, file: &dyn File) -> Result<()> {
        for page in self.pages()? {
            file.write_at(page.page_id().offset(), page.bytes())?;
        }
        file.sync_data()?;
        Ok(())
    }

    /// The sealed pages of this record, in its slot.
    pub fn pages(&self) -> Result<Vec<Page>> {
        let bytes = self.encode()?;
        let first = (self.seq % 2) * SLOT_PAGES;
        let pages = bytes.chunks(PAYLOAD).enumerate().map(|(i, chunk)| {
            let mut page = Page::zeroed();
            page.format(PageId(first + i as u64), PageKind::Meta);
            page.payload_mut()[..chunk.len()].copy_from_slice(chunk);
            page.seal();
            page
        });
        Ok(pages.collect())
    }

    /// The valid slot with the highest `seq`, or an error saying why neither is valid.
    pub fn read_latest(file: &dyn File) -> Result<Latest> {
        check_page_size(file)?;
        let slots = [Self::read_slot(file, 0), Self::read_slot(file, 1)];
        let Some(meta) = slots
            .iter()
            .filter_map(|s| s.as_ref().ok())
            .max_by_key(|m| m.seq)
            .cloned()
        else {
            let why: Vec<String> = slots
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.as_ref().err().map(|e| format!("slot {i}: {e}")))
                .collect();
            return Err(EngineError::Corrupt(format!(
                "{}: no valid meta page ({})",
                file.path(),
                why.join("; ")
            )));
        };
        let mut passed_over = None;
        for (slot, read) in (0..).zip(&slots) {
            if let Err(why) = read {
                if !Self::slot_is_blank(file, slot) {
                    passed_over = Some(format!("meta slot {slot}: {why}"));
                }
            }
        }
        Ok(Latest { meta, passed_over })
    }

    /// Whether `slot` was never written: a database's first checkpoints fill one slot
    /// before the other is used, so an unwritten slot is no damage to report.
    fn slot_is_blank(file: &dyn File, slot: u64) -> bool {
        let mut first = vec![0u8; PAGE_SIZE];
        match file.read_exact_at(PageId(slot * SLOT_PAGES).offset(), &mut first) {
            Ok(true) => first.iter().all(|&b| b == 0),
            Ok(false) => true,
            Err(_) => false,
        }
    }

    fn read_slot(file: &dyn File, slot: u64) -> std::result::Result<Meta, String> {
        let mut bytes = Vec::new();
        let mut page = Page::zeroed();
        let mut needed = FIXED;
        let mut i = 0;
        while bytes.len() < needed {
            if i == SLOT_PAGES {
                return Err("catalog runs past the slot".into());
            }
            let id = PageId(slot * SLOT_PAGES + i);
            let complete = file
                .read_exact_at(id.offset(), page.bytes_mut_for_read())
                .map_err(|e| e.to_string())?;
            if !complete {
                return Err(format!("page {id} is missing"));
            }
            page.verify(id).map_err(|e| e.to_string())?;
            if page.kind() != Some(PageKind::Meta) {
                return Err(format!("page {id} is not a meta page"));
            }
            bytes.extend_from_slice(page.payload());
            if i == 0 {
                if &bytes[..8] != MAGIC {
                    return Err("bad magic".into());
                }
                let catalog_len = u32::from_le_bytes(bytes[40..44].try_into().unwrap_or([0; 4]));
                needed = fixed_len(&bytes)? + catalog_len as usize;
            }
            i += 1;
        }
        Self::decode(&bytes)
    }
}

/// What [`Meta::read_latest`] found: the checkpoint to open at, and the slot it passed over
/// as unreadable, if any.
#[derive(Debug)]
pub struct Latest {
    pub meta: Meta,
    /// Why the other slot, written once, does not read back: a crash while a checkpoint
    /// wrote it (the checkpoint before it is then the one to open at, and its log is still
    /// there), or damage since. Said when the database opens, never silently.
    pub passed_over: Option<String>,
}

/// The length of a record's fixed part by its format, which must be one this build reads.
fn fixed_len(record: &[u8]) -> std::result::Result<usize, String> {
    match u32::from_le_bytes([record[8], record[9], record[10], record[11]]) {
        FORMAT => Ok(FIXED),
        1 => Ok(FIXED_FORMAT_1),
        other => Err(format!("unsupported meta format {other}")),
    }
}

/// The page size a meta record (the joined payloads, from `magic`) names.
fn recorded_page_size(record: &[u8]) -> usize {
    match u32::from_le_bytes([record[12], record[13], record[14], record[15]]) {
        0 => UNRECORDED_PAGE_SIZE,
        size => size as usize,
    }
}

/// Refuses a data file written with another page size, naming both sizes (see the module
/// documentation). Anything short of proof (no magic, an implausible size, a checksum that
/// fails at the recorded size) is left to the slots' own checks.
fn check_page_size(file: &dyn File) -> Result<()> {
    let mut head = [0u8; HEADER_SIZE + FIXED];
    if !file.read_exact_at(0, &mut head)? || &head[HEADER_SIZE..HEADER_SIZE + 8] != MAGIC {
        return Ok(());
    }
    let recorded = recorded_page_size(&head[HEADER_SIZE..]);
    if recorded == PAGE_SIZE || !PLAUSIBLE_PAGE_SIZES.contains(&recorded) {
        return Ok(());
    }
    let mut image = vec![0u8; recorded];
    if !file.read_exact_at(0, &mut image)? || !Page::checksum_holds(&image) {
        return Ok(());
    }
    Err(EngineError::Open(format!(
        "{} was written with {recorded}-byte pages and this build of tailstore uses \
         {PAGE_SIZE}-byte pages; open it with a build of the same page size",
        file.path()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Meta {
        Meta {
            seq: 7,
            checkpoint_lsn: 4096,
            page_count: 12,
            db_id: Some(0x5eed),
            catalog: br#"{"tables":[]}"#.to_vec(),
        }
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let meta = record();
        assert_eq!(Meta::decode(&meta.encode().unwrap()), Ok(meta.clone()));
        let unnamed = Meta {
            db_id: None,
            ..meta
        };
        assert_eq!(Meta::decode(&unnamed.encode().unwrap()), Ok(unnamed));
    }

    #[test]
    fn a_format_1_record_reads_without_a_db_id() {
        let meta = record();
        let mut old = meta.encode().unwrap();
        old[8..12].copy_from_slice(&1u32.to_le_bytes());
        old.drain(FIXED_FORMAT_1..FIXED);
        assert_eq!(
            Meta::decode(&old),
            Ok(Meta {
                db_id: None,
                ..meta
            })
        );
    }

    #[test]
    fn an_unknown_format_is_refused() {
        let mut bytes = record().encode().unwrap();
        bytes[8..12].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(
            Meta::decode(&bytes),
            Err("unsupported meta format 3".into())
        );
    }
}
