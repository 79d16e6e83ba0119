//! The engine's log records (the payloads it hands to the log manager).
//!
//! ```text
//! Commit       1u8  page ops                                  one per writing transaction
//! CreateTable  2u8  def_len u32  table definition (JSON)  page ops
//! ```
//!
//! "page ops" is a sequence of B+tree page changes (`tailstore_storage::btree::redo`). A
//! transaction's whole effect is one record, so the log's own atomicity (a record is present
//! whole or not at all) makes every transaction atomic in recovery: there is no undo.

use tailstore_storage::Redo;

use crate::error::{EngineError, Result};

const COMMIT: u8 = 1;
const CREATE_TABLE: u8 = 2;

/// A decoded record.
pub enum WalRecord<'a> {
    Commit { ops: &'a [u8] },
    CreateTable { def: &'a [u8], ops: &'a [u8] },
}

/// The redo buffer of a writing transaction: its bytes, once the transaction's changes are
/// recorded, are the payload of its commit record (the ops follow the record's tag, so the
/// payload is never copied out of the buffer: for a 4 KiB Redis SET with its page images it
/// is tens of kilobytes).
///
/// The buffer is the calling thread's spare one when it has one (see [`recycle_redo`]): a
/// fresh multi-kilobyte buffer per commit costs an allocation, its growth and, for the
/// allocator's larger blocks, page faults on memory handed back to the kernel meanwhile.
pub fn commit_redo() -> Redo {
    match SPARE_REDO.take() {
        Some(mut redo) => {
            redo.restart(&[COMMIT]);
            redo
        }
        None => Redo::with_header(&[COMMIT]),
    }
}

/// Keeps a committed transaction's redo buffer as this thread's spare, unless a very large
/// commit grew it past what is worth holding on to.
pub fn recycle_redo(redo: Redo) {
    if redo.capacity() <= KEPT_REDO_BYTES {
        SPARE_REDO.set(Some(redo));
    }
}

/// The largest redo buffer a thread keeps between commits.
const KEPT_REDO_BYTES: usize = 1 << 20;

thread_local! {
    static SPARE_REDO: std::cell::Cell<Option<Redo>> = const { std::cell::Cell::new(None) };
}

pub fn create_table_record(def: &[u8], ops: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + def.len() + ops.len());
    out.push(CREATE_TABLE);
    out.extend_from_slice(&(def.len() as u32).to_le_bytes());
    out.extend_from_slice(def);
    out.extend_from_slice(ops);
    out
}

/// Decodes the payload of the record at `lsn` (for error messages).
pub fn decode(payload: &[u8], lsn: u64) -> Result<WalRecord<'_>> {
    let bad = |what: &str| EngineError::Corrupt(format!("log record at LSN {lsn}: {what}"));
    match payload.first() {
        Some(&COMMIT) => Ok(WalRecord::Commit { ops: &payload[1..] }),
        Some(&CREATE_TABLE) => {
            let len = payload
                .get(1..5)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                .ok_or_else(|| bad("truncated table definition"))?;
            let def = payload
                .get(5..5 + len)
                .ok_or_else(|| bad("truncated table definition"))?;
            Ok(WalRecord::CreateTable {
                def,
                ops: &payload[5 + len..],
            })
        }
        Some(other) => Err(bad(&format!("unknown record type {other}"))),
        None => Err(bad("empty record")),
    }
}
