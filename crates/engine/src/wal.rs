//! The engine's log records (the payloads it hands to the log manager).
//!
//! ```text
//! Commit       1u8  page ops                           one per writing transaction
//! CreateTable  2u8  def_len u32  table definition (JSON)  page ops
//! CommitFirst  3u8  page ops                           a commit too large for one record:
//! CommitNext   4u8  first_end u64  page ops            its first part, the parts between,
//! CommitLast   5u8  first_end u64  page ops            and its last (integers little-endian)
//! ```
//!
//! "page ops" is a sequence of B+tree page changes (`tailstore_storage::btree::redo`). A
//! transaction's whole effect is one record, so the log's own atomicity (a record is present
//! whole or not at all) makes every transaction atomic in recovery: there is no undo.
//!
//! # Commits in parts
//!
//! A commit's record is known only once its changes are applied: the page images of its
//! splits and merges, and without a double-write area a full image of every page it changes
//! first since the checkpoint (`txn.rs`), can make it many times the bytes the transaction
//! wrote: 60 small updates in 60 leaves log 60 images of 16 KiB. A record longer than the
//! log takes ([`tailstore_log::LogManager::max_payload_bytes`]) cannot be refused then (the
//! pages have changed, and the log is redo only), so it is logged in parts
//! ([`split_commit`]), the last naming the first by its end LSN (unique over the life of the
//! database, unlike anything the transaction could carry). Why recovery restores such a
//! commit whole or not at all:
//!
//! * *Whole:* each page's ops are in one part, in their order, and the parts together hold
//!   every op of the record that redo would apply: redo skips a page's ops before an image
//!   of it in the same record (`recovery.rs`, step 2), and the parts leave out exactly those
//!   (a parent that took a hundred merges would otherwise log a hundred images of itself,
//!   more than a part holds). So per page redo applies the same ops as from one record.
//!   The pages are stamped with the last part's end, so the write-ahead rule keeps them off
//!   the disk until every part is durable.
//! * *Or not at all:* recovery's walk keeps the parts aside and redoes them only when it
//!   meets the last; parts whose last never reached the log (a crash or a failed append
//!   between them) are dropped, and a later commit cannot complete them, since its parts
//!   name another first part.
//! * *Checkpoints:* the parts are appended under one hold of the log gate
//!   (`Shared::log_gate`), so a checkpoint's position is never between them, and a walk that
//!   starts at it meets every part of a commit or none.
//! * *Between parts:* other transactions (on other trees) may append records; they change
//!   other pages (the commit holds its trees' latches, and frees its emptied pages only once
//!   logged), so the per-page order of changes is the LSN order still.
//!
//! In `pmem-log` the region gets room back only from checkpoints, which wait for the gate
//! that a commit in parts holds: one that waited for room between its parts would never
//! get it. There a commit in parts holds the gate alone, so no other append takes room
//! meanwhile, and appends its parts only if the region holds them all
//! (`Shared::append_commit`); else the database stops.
//!
//! # Reserve under the latches, write after them
//!
//! A commit of one record takes its place in the log
//! ([`tailstore_log::LogManager::reserve`]) and stamps its pages with the place's end while
//! it holds its trees' latches, and writes the record ([`tailstore_log::LogManager::fill`]:
//! the checksum, the copy, in a PMEM ring the fence) after releasing them
//! (`Transaction::apply_and_log`, `Shared::place_and_stamp`). The write was most of the
//! time the latches were held, so another writer of the tree waits less for them. Why
//! nothing changes for recovery or for what is acknowledged:
//!
//! * *Order:* the place is taken under the latches, so per page the records' LSN order is
//!   the order of the changes, as when the whole append ran under them: a later writer of
//!   the page gets the latch, and then its place, after this one.
//! * *Durability of what others read:* once the latches are released, the change is
//!   readable while its record is not yet written. A read-only commit waits for every
//!   place handed out (`reserved_lsn`), a writing commit for its own record's end, which
//!   lies after every place handed out before it read; the filled prefix that durability
//!   follows passes a place only once its record is written. So nothing that read the
//!   change is acknowledged before the change is durable
//!   (`txn/interleavings.rs`, `a_change_read_before_its_record_is_written_waits_for_that_record`).
//! * *Write-ahead:* a page stamped with the place's end may be chosen for writing at once;
//!   the pool's write-ahead wait (`force_durable` of the page's LSN) waits for the record,
//!   which its writer is about to write and which waits for nothing (its room in the ring
//!   was found at the reservation).
//! * *Checkpoints:* the commit holds the log gate from before its place to after its
//!   write, so a checkpoint's position is never inside a record not yet written.
//! * *Failures:* a write that fails stops the log and the database; a place abandoned
//!   unwritten (an error between the two steps) stops the log when it is dropped. Either
//!   way every later wait ends in an error instead of waiting behind the hole, and a
//!   restart replays only the prefix before it.
//!
//! A commit in parts appends each part whole under the latches, as before: a part's wait
//! for room in the ring must not sit behind the commit's own unwritten part.

use tailstore_storage::btree::redo::decode_spans;
use tailstore_storage::Redo;

use crate::error::{EngineError, Result};

const COMMIT: u8 = 1;
const CREATE_TABLE: u8 = 2;
const COMMIT_FIRST: u8 = 3;
const COMMIT_NEXT: u8 = 4;
const COMMIT_LAST: u8 = 5;

/// Bytes before the page ops of a commit's part: its tag and, after the first part, the
/// first part's end LSN.
pub const PART_HEADER: usize = 9;

/// A decoded record.
pub enum WalRecord<'a> {
    Commit { ops: &'a [u8], part: Part },
    CreateTable { def: &'a [u8], ops: &'a [u8] },
}

/// Which part of its transaction's commit a commit record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The whole commit, in one record.
    Whole,
    /// The first of several parts.
    First,
    /// A part after the first (whose record ends at `first_end`) and before the last.
    Next { first_end: u64 },
    /// The last part, which completes the commit whose first part ends at `first_end`.
    Last { first_end: u64 },
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

/// Whether `payload` is a whole commit's record (which [`split_commit`] may split).
pub fn is_commit(payload: &[u8]) -> bool {
    payload.first() == Some(&COMMIT)
}

/// The parts of a commit record too long for one record: payloads of at most `max_payload`
/// bytes, every page's ops in one part in their order, from its last image on (see
/// "Commits in parts"); the parts after the first name it with [`name_first_part`] once its
/// end is known. Without the ops redo skips, the record may fit after all: then the one
/// part is a whole commit record. Fails if one page's ops alone do not fit a part (a
/// commit's writes are limited to a quarter of a record and a page's image is one page, so
/// only a log shorter than a few pages would do it).
pub fn split_commit(payload: &[u8], max_payload: usize) -> Result<Vec<Vec<u8>>> {
    assert!(is_commit(payload), "only a commit record is split");
    let ops = &payload[1..];
    let spans = decode_spans(ops)
        .map_err(|e| EngineError::Corrupt(format!("a commit's own page ops do not decode: {e}")))?;
    let room = max_payload.saturating_sub(PART_HEADER);
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| (spans[i].0.page(), i));
    let new_part = || {
        let mut part = Vec::with_capacity(max_payload.min(PART_HEADER + ops.len()));
        part.push(COMMIT_NEXT);
        part.extend_from_slice(&[0; PART_HEADER - 1]);
        part
    };
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut part = new_part();
    for group in order.chunk_by(|&x, &y| spans[x].0.page() == spans[y].0.page()) {
        // Redo skips a page's ops before its last image in the record (`recovery.rs`): left
        // out, a parent that took a hundred merges logs one image, not a hundred.
        let last_image = group.iter().rposition(|&i| spans[i].0.is_image());
        let group = &group[last_image.unwrap_or(0)..];
        let len: usize = group.iter().map(|&i| spans[i].1.len()).sum();
        if len > room {
            return Err(EngineError::Log(tailstore_log::LogError::RecordTooLarge {
                len: PART_HEADER + len,
                max: max_payload,
            }));
        }
        if part.len() + len > PART_HEADER + room {
            parts.push(std::mem::replace(&mut part, new_part()));
        }
        for &i in group {
            part.extend_from_slice(&ops[spans[i].1.clone()]);
        }
    }
    parts.push(part);
    let last = parts.len() - 1;
    if last == 0 {
        // The ops redo would skip were the excess: one whole record after all.
        parts[0][0] = COMMIT;
    } else {
        parts[0][0] = COMMIT_FIRST;
        parts[last][0] = COMMIT_LAST;
    }
    parts[0].drain(1..PART_HEADER);
    Ok(parts)
}

/// Writes the first part's end LSN into a later part of [`split_commit`].
pub fn name_first_part(part: &mut [u8], first_end: u64) {
    assert!(matches!(part.first(), Some(&COMMIT_NEXT | &COMMIT_LAST)));
    part[1..PART_HEADER].copy_from_slice(&first_end.to_le_bytes());
}

/// Decodes the payload of the record at `lsn` (for error messages).
pub fn decode(payload: &[u8], lsn: u64) -> Result<WalRecord<'_>> {
    let bad = |what: &str| EngineError::Corrupt(format!("log record at LSN {lsn}: {what}"));
    let named_part = |make: fn(u64) -> Part| {
        let first_end = payload
            .get(1..PART_HEADER)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
            .ok_or_else(|| bad("truncated commit part"))?;
        Ok(WalRecord::Commit {
            ops: &payload[PART_HEADER..],
            part: make(first_end),
        })
    };
    match payload.first() {
        Some(&COMMIT) => Ok(WalRecord::Commit {
            ops: &payload[1..],
            part: Part::Whole,
        }),
        Some(&COMMIT_FIRST) => Ok(WalRecord::Commit {
            ops: &payload[1..],
            part: Part::First,
        }),
        Some(&COMMIT_NEXT) => named_part(|first_end| Part::Next { first_end }),
        Some(&COMMIT_LAST) => named_part(|first_end| Part::Last { first_end }),
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use tailstore_storage::{Page, PageId, PageKind};

    use super::*;

    /// One op on one of a few pages: a put or delete with a key of `len` bytes, or an image.
    #[derive(Clone, Debug)]
    enum Op {
        Put { page: u64, len: usize },
        Delete { page: u64, len: usize },
        Image { page: u64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..12u64, 1..300usize).prop_map(|(page, len)| Op::Put { page, len }),
            (0..12u64, 1..300usize).prop_map(|(page, len)| Op::Delete { page, len }),
            (0..12u64).prop_map(|page| Op::Image { page }),
        ]
    }

    /// A commit record of `ops`, encoded as `btree/redo.rs` documents (images by `Redo`).
    fn record(ops: &[Op]) -> Vec<u8> {
        let mut payload = vec![COMMIT];
        for op in ops {
            match *op {
                Op::Put { page, len } | Op::Delete { page, len } => {
                    let put = matches!(op, Op::Put { .. });
                    payload.push(if put { 1 } else { 2 });
                    payload.extend_from_slice(&page.to_le_bytes());
                    payload.extend_from_slice(&(len as u16).to_le_bytes());
                    if put {
                        payload.extend_from_slice(&8u16.to_le_bytes());
                    }
                    payload.extend(std::iter::repeat_n(page as u8, len));
                    if put {
                        payload.extend_from_slice(&(len as u64).to_le_bytes());
                    }
                }
                Op::Image { page } => {
                    let mut free = Page::zeroed();
                    free.format(PageId(page), PageKind::Free);
                    let mut image = Redo::new();
                    image.image(&free);
                    payload.extend_from_slice(image.bytes());
                }
            }
        }
        payload
    }

    /// Per page, the bytes of its ops from its last image on, in order: what redo applies.
    fn applied_per_page(ops: &[u8]) -> BTreeMap<PageId, Vec<Vec<u8>>> {
        let mut pages: BTreeMap<PageId, Vec<Vec<u8>>> = BTreeMap::new();
        for (op, span) in decode_spans(ops).expect("decodes") {
            let list = pages.entry(op.page()).or_default();
            if op.is_image() {
                list.clear();
            }
            list.push(ops[span].to_vec());
        }
        pages
    }

    proptest! {
        #[test]
        fn parts_hold_what_redo_applies_each_page_in_one_part(
            ops in proptest::collection::vec(op(), 1..200),
            max_payload in 400..4_000usize,
        ) {
            let payload = record(&ops);
            prop_assume!(payload.len() > max_payload);
            let wanted = applied_per_page(&payload[1..]);
            let Ok(mut parts) = split_commit(&payload, max_payload) else {
                // Refused only when one page's ops do not fit a part.
                let page_bytes = |ops: &Vec<Vec<u8>>| ops.iter().map(Vec::len).sum::<usize>();
                let largest = wanted.values().map(page_bytes).max();
                prop_assert!(largest > Some(max_payload - PART_HEADER));
                return Ok(());
            };
            let mut found: BTreeMap<PageId, Vec<Vec<u8>>> = BTreeMap::new();
            let mut part_of: BTreeMap<PageId, usize> = BTreeMap::new();
            let count = parts.len();
            for (i, part) in parts.iter_mut().enumerate() {
                prop_assert!(part.len() <= max_payload);
                if i > 0 {
                    name_first_part(part, 77);
                }
                let WalRecord::Commit { ops, part: kind } = decode(part, 0).expect("decodes") else {
                    panic!("a part is a commit record");
                };
                let expected = match (count, i) {
                    (1, _) => Part::Whole,
                    (_, 0) => Part::First,
                    (n, i) if i == n - 1 => Part::Last { first_end: 77 },
                    _ => Part::Next { first_end: 77 },
                };
                prop_assert_eq!(kind, expected);
                for (op, span) in decode_spans(ops).expect("decodes") {
                    let first_part = *part_of.entry(op.page()).or_insert(i);
                    prop_assert_eq!(first_part, i, "page {} in two parts", op.page());
                    found.entry(op.page()).or_default().push(ops[span].to_vec());
                }
            }
            prop_assert_eq!(found, wanted);
        }
    }
}
