//! Redo at a page's first load: the pages recovery's walk found changed since the checkpoint,
//! each brought up to date when the buffer pool first loads it (`buffer_pool.rs`, "Redo at
//! first load"), or by [`PendingPages::finish`].
//!
//! # Why this restores the same pages as redo in log order
//!
//! Every page op names one page and reads or writes nothing else (`btree/redo.rs`), so the
//! state redo leaves a page in depends only on the page as the data file holds it and the
//! ops on it, in LSN order. [`PendingPages::load`] applies exactly those, with the rules of
//! the walk (`recovery.rs`, step 2): per record ending at `e`, an op before an image of its
//! page in the same record is skipped; the first op applied to a page that was not read yet
//! decides whether it is read (an image rebuilds it without reading what may be torn); an
//! image is always applied, any other op when the page LSN is below `e` or an earlier op of
//! the record was applied. The records are read back by their LSN from the log
//! (`LogManager::read_record`), or, for a page's small changes, from copies the walk made
//! of the ops (`PageChanges::note_record`), which are the record's own bytes. The log
//! records were verified by recovery's walk and made durable, and
//! which stays there: the log below a checkpoint's position is released only by a
//! checkpoint, and every checkpoint first finishes the redo.
//!
//! *Ordering with new changes.* A pending page is not in the pool, so no transaction can
//! have changed it: its first load, by whichever thread, redoes it under the frame's write
//! latch before the frame is visible, and takes it off the list in the same step. Changes
//! after the restart are logged past the walk's end, so they come after every redone one.
//!
//! *Checkpoints.* A pending page's changes are only in the log between the checkpoint and
//! the walk's end. A checkpoint therefore runs [`PendingPages::finish`] before it picks its
//! position; the pool marks every redone page dirty since epoch 0, the recovery's (changes
//! logged from the checkpoint on), so a checkpoint writes it whatever epoch it starts.
//!
//! *Allocation.* A page that is free once every record is redone (recovery rebuilds the free
//! list from the trees, whose inner nodes it loads, and so redoes) may still be pending; an
//! allocation formats it afresh and [`PendingPages::forget`] drops its ops, as redo in log
//! order would have redone a page that is then reformatted.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tailstore_log::LogManager;
use tailstore_storage::btree::redo::decode as decode_ops;
use tailstore_storage::{BufferPool, Page, PageId, PageIdMap, PageOp, PendingRedo, StorageError};

use crate::error::{EngineError, Result};
use crate::wal::{self, WalRecord};

/// Records kept after they were read: the pages one record changes are often loaded close
/// together (a transaction loads the leaves it reads one after another), and each is redone
/// from that record.
const RECENT_RECORDS: usize = 64;

/// Threads that load pending pages when the open finishes the redo itself: after a power cut
/// nothing is cached, and one page at a time waits for each read.
pub const OPEN_LOADERS: usize = 16;

/// A page's ops in one record, at most this many bytes of them, are copied by the walk
/// rather than read back with their record: a meta row's change, a link in an inner node.
/// An inner node high in a tree is changed by hundreds of records (~5 µs each to read back
/// and check); a leaf of 4 KiB values by a few records of a few KiB each.
const COPY_LIMIT: usize = 512;

/// One record's changes to one page, as recovery's walk found them.
#[derive(Clone, Copy, Debug)]
pub enum Change {
    /// Read back from the log, the record at `lsn`, when the page is redone.
    Logged { lsn: u64 },
    /// The page's ops in the record `[lsn, end)`, copied by the walk: the bytes `at..at + len`
    /// of [`PageChanges`]'s copies.
    Copied {
        lsn: u64,
        end: u64,
        at: usize,
        len: usize,
    },
}

/// What recovery's walk hands to redo: per page changed since the checkpoint, its changes in
/// LSN order, and the bytes of the copied ones.
#[derive(Default)]
pub struct PageChanges {
    pages: PageIdMap<Vec<Change>>,
    copies: Vec<u8>,
}

impl PageChanges {
    /// Notes the changes of the record `[lsn, end)`, whose page ops are `bytes`, decoded as
    /// `ops` (with their spans in `bytes`): per page, one change.
    pub fn note_record(
        &mut self,
        lsn: u64,
        end: u64,
        bytes: &[u8],
        ops: &[(PageOp<'_>, Range<usize>)],
    ) {
        let mut order: Vec<usize> = (0..ops.len()).collect();
        order.sort_by_key(|&i| (ops[i].0.page(), i));
        for group in order.chunk_by(|&x, &y| ops[x].0.page() == ops[y].0.page()) {
            let len: usize = group.iter().map(|&i| ops[i].1.len()).sum();
            let change = if len <= COPY_LIMIT {
                let at = self.copies.len();
                for &i in group {
                    self.copies.extend_from_slice(&bytes[ops[i].1.clone()]);
                }
                Change::Copied { lsn, end, at, len }
            } else {
                Change::Logged { lsn }
            };
            self.pages
                .entry(ops[group[0]].0.page())
                .or_default()
                .push(change);
        }
    }

    /// Pages with changes.
    pub fn len(&self) -> usize {
        self.pages.len()
    }
}

/// See the module documentation.
pub struct PendingPages {
    log: Arc<LogManager>,
    /// Per page still to redo, its changes from the checkpoint on, in LSN order.
    pages: Mutex<PageIdMap<Vec<Change>>>,
    /// The copied changes' bytes.
    copies: Vec<u8>,
    recent: Mutex<RecentRecords>,
}

impl PendingPages {
    pub fn new(log: Arc<LogManager>, changes: PageChanges) -> Self {
        PendingPages {
            log,
            pages: Mutex::new(changes.pages),
            copies: changes.copies,
            recent: Mutex::new(RecentRecords::default()),
        }
    }

    /// Pages still to redo.
    pub fn remaining(&self) -> usize {
        self.pages.lock().len()
    }

    /// Loads every pending page into `pool`, which redoes it, on `threads` threads, in page
    /// order; then the pool stops asking. The first failure is returned (the page stays
    /// pending).
    pub fn finish(&self, pool: &BufferPool, threads: usize) -> Result<()> {
        let mut ids: Vec<PageId> = self.pages.lock().keys().copied().collect();
        ids.sort_unstable();
        let next = AtomicU64::new(0);
        let failure: Mutex<Option<EngineError>> = Mutex::new(None);
        std::thread::scope(|scope| {
            for _ in 0..threads.max(1) {
                scope.spawn(|| loop {
                    let at = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(&id) = ids.get(at) else { return };
                    if failure.lock().is_some() {
                        return;
                    }
                    if let Err(err) = pool.read(id) {
                        failure.lock().get_or_insert(err.into());
                        return;
                    }
                });
            }
        });
        if let Some(err) = failure.into_inner() {
            return Err(err);
        }
        // A load that failed meanwhile, on another thread, left its page pending.
        if let left @ 1.. = self.remaining() {
            return Err(EngineError::Corrupt(format!(
                "{left} pages are still to redo after every pending page was loaded"
            )));
        }
        pool.end_pending_redo();
        Ok(())
    }

    /// Redoes page `id` into `page` from its `changes` (see the module documentation).
    fn redo(
        &self,
        id: PageId,
        page: &mut Page,
        changes: &[Change],
        read: &mut dyn FnMut(&mut Page) -> tailstore_storage::Result<()>,
    ) -> std::result::Result<(), String> {
        let mut filled = false;
        for change in changes {
            let payload;
            let (lsn, end, bytes) = match *change {
                Change::Logged { lsn } => {
                    let end;
                    (end, payload) = self.record(lsn)?;
                    (lsn, end, record_ops(&payload, lsn)?)
                }
                Change::Copied { lsn, end, at, len } => (lsn, end, &self.copies[at..at + len]),
            };
            let ops = decode_ops(bytes).map_err(|e| format!("log record at LSN {lsn}: {e}"))?;
            let mine: Vec<&PageOp<'_>> = ops.iter().filter(|op| op.page() == id).collect();
            let last_image = mine.iter().rposition(|op| op.is_image());
            let mut redone_here = false;
            for (i, op) in mine.into_iter().enumerate() {
                if last_image.is_some_and(|last| i < last) {
                    continue;
                }
                if !filled {
                    fill(id, page, op.is_image(), read)?;
                    filled = true;
                }
                if op.is_image() || redone_here || page.lsn() < end {
                    op.apply(page).map_err(|e| e.to_string())?;
                    page.reset_lsn(end);
                    redone_here = true;
                }
            }
        }
        if !filled {
            return Err("the log records listed for it do not change it".into());
        }
        Ok(())
    }

    /// The record at `lsn`: its end and payload, from the recent ones or the log.
    fn record(&self, lsn: u64) -> std::result::Result<(u64, Arc<Vec<u8>>), String> {
        if let Some(hit) = self.recent.lock().get(lsn) {
            return Ok(hit);
        }
        let mut payload = Vec::new();
        let end = self
            .log
            .read_record(lsn, &mut payload)
            .map_err(|e| format!("reading the log record at LSN {lsn}: {e}"))?
            .ok_or_else(|| {
                format!(
                    "the log record at LSN {lsn}, verified at the restart, no longer reads back"
                )
            })?;
        let payload = Arc::new(payload);
        self.recent.lock().put(lsn, end, payload.clone());
        Ok((end, payload))
    }
}

/// The page ops of a record's payload.
fn record_ops(payload: &[u8], lsn: u64) -> std::result::Result<&[u8], String> {
    match wal::decode(payload, lsn).map_err(|e| e.to_string())? {
        WalRecord::Commit { ops, .. } | WalRecord::CreateTable { ops, .. } => Ok(ops),
    }
}

/// The page as redo starts from it: read from the data file, or, when its first op is an
/// image, formatted without reading what may be a torn page.
fn fill(
    id: PageId,
    page: &mut Page,
    image: bool,
    read: &mut dyn FnMut(&mut Page) -> tailstore_storage::Result<()>,
) -> std::result::Result<(), String> {
    if image {
        page.format(id, tailstore_storage::PageKind::Free);
        return Ok(());
    }
    read(page).map_err(|e| e.to_string())
}

impl PendingRedo for PendingPages {
    fn load(
        &self,
        id: PageId,
        page: &mut Page,
        read: &mut dyn FnMut(&mut Page) -> tailstore_storage::Result<()>,
    ) -> tailstore_storage::Result<bool> {
        let Some(changes) = self.pages.lock().remove(&id) else {
            read(page)?;
            return Ok(false);
        };
        match self.redo(id, page, &changes, read) {
            Ok(()) => Ok(true),
            Err(reason) => {
                // Still pending: a later load tries again, and the first checkpoint fails.
                self.pages.lock().insert(id, changes);
                Err(StorageError::Redo {
                    page_id: id,
                    reason,
                })
            }
        }
    }

    fn forget(&self, id: PageId) {
        self.pages.lock().remove(&id);
    }
}

/// The last [`RECENT_RECORDS`] records read, oldest overwritten first.
#[derive(Default)]
struct RecentRecords {
    slots: Vec<(u64, u64, Arc<Vec<u8>>)>,
    next: usize,
}

impl RecentRecords {
    fn get(&self, lsn: u64) -> Option<(u64, Arc<Vec<u8>>)> {
        self.slots
            .iter()
            .find(|(at, _, _)| *at == lsn)
            .map(|(_, end, payload)| (*end, payload.clone()))
    }

    fn put(&mut self, lsn: u64, end: u64, payload: Arc<Vec<u8>>) {
        if self.slots.len() < RECENT_RECORDS {
            self.slots.push((lsn, end, payload));
        } else {
            self.slots[self.next] = (lsn, end, payload);
            self.next = (self.next + 1) % RECENT_RECORDS;
        }
    }
}
