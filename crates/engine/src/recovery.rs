//! Crash recovery: redo from the last checkpoint, then rebuild the free-page list.
//!
//! # Protocol
//!
//! 1. The meta page names the checkpoint LSN `c`: every change logged below `c` is in the
//!    data file (see `Shared::checkpoint_if`). `c` is where the last completed checkpoint
//!    began or, if it left the pages of recent epochs dirty, where the oldest of those began.
//! 2. Redo walks the durable log from `c` in LSN order, to the end of its valid prefix: this
//!    walk is the log's only one at a restart, and where it ends the log goes on
//!    (`tailstore_log::LogReplay`; a walk that cannot start at `c` safely starts at the
//!    log's first record and verifies the records before `c` without redoing them, and a
//!    `c` that is not a record boundary of the valid prefix is an error). For each page op
//!    of the record that ends at `e`: an op followed by an image of the same page in the same record is skipped
//!    (the image supersedes it); an `Image` is always applied (it rebuilds the page, even one
//!    whose last write was torn) and sets the page LSN to `e`; any other op is applied if the
//!    page LSN is below `e`, or if an earlier op of the same record was applied to the page.
//!    A page that fails its checksum and has no image in the log is reported as corrupt.
//!    Trees are opened (their roots read) only after redo, which may rebuild a root.
//! 3. Pages reachable from the catalog's roots are in use; every other page below the
//!    high-water mark (the data file's end, or the highest page redo wrote) is free.
//!
//! *Torn pages.* A page is written without a sync by evictions, and by a checkpoint before
//! its sync, so a power cut may tear it. Two ways make such a page whole again:
//! * in the commit modes with PMEM (`buffer`, `pmem-log`), every page is copied into the
//!   double-write area in PMEM before it is written in place, and the database's open
//!   restores every torn page from its latest copy *before* redo reads any page
//!   (`tailstore_storage::doublewrite`); redo then starts from whole pages, which are never
//!   older than the checkpoint (it synced them);
//! * in the other modes, the first change of a page after each checkpoint's start ends its
//!   record with a full image of the page (`txn.rs`, "full-page images"), so redo rebuilds a
//!   page torn since the checkpoint from the log and never reads it; a page written after
//!   the checkpoint's sync was dirty since a position at or after `c`, and its first change
//!   after that position was imaged.
//!
//! Why this restores exactly the committed transactions: each writing transaction is one log
//! record (`wal.rs`), present whole or not at all, so a transaction is redone entirely or not
//! at all. Pages never hold changes of a transaction whose record is not durable: changes are
//! applied only while committing, the record is appended before the pages can be written
//! (they are "unlogged" until stamped), and the write-ahead hook forces the log up to a
//! page's LSN before the page is written. The page LSN test makes redo idempotent: a page on
//! disk with LSN `>= e` already holds the record's change (changes of one page are logged in
//! the order they were made, because the tree's write latch is held from the change to the
//! stamp).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tailstore_log::{LogReplay, Walked};
use tailstore_storage::btree::redo::decode as decode_ops;
use tailstore_storage::{BufferPool, PageId, PageIdMap, PageIdSet, PageOp};

use crate::catalog::{decode_def, Catalog, TableDef};
use crate::error::{EngineError, Result};
use crate::meta::FIRST_DATA_PAGE;
use crate::wal::{self, WalRecord};

/// What recovery did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// Where redo started (the last checkpoint) and ended.
    pub from_lsn: u64,
    pub to_lsn: u64,
    /// Log records and bytes replayed.
    pub records: u64,
    pub bytes: u64,
    /// Page ops applied (not skipped by the page-LSN test).
    pub ops_applied: u64,
    /// Pages torn by the crash and restored from the double-write area before redo.
    pub torn_pages_restored: usize,
    /// Bytes at the log's end that were only in the PMEM log buffer (`buffer` mode), which
    /// recovery wrote to the log file.
    pub pmem_tail_bytes: u64,
    pub elapsed: Duration,
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "recovery: replayed {} log records ({} bytes, LSN {}..{}), applied {} page changes, in {:.1} ms",
            self.records,
            self.bytes,
            self.from_lsn,
            self.to_lsn,
            self.ops_applied,
            self.elapsed.as_secs_f64() * 1e3
        )?;
        if self.pmem_tail_bytes > 0 {
            write!(
                f,
                "; moved the last {} bytes of log from PMEM to the log file",
                self.pmem_tail_bytes
            )?;
        }
        if self.torn_pages_restored > 0 {
            write!(
                f,
                "; restored {} torn pages from the double-write area",
                self.torn_pages_restored
            )?;
        }
        Ok(())
    }
}

/// Step 2 of the protocol; adds the tables created after the checkpoint to `tables` (the
/// catalog's definitions: no tree is opened before redo, since opening reads the root page,
/// which may be torn until redo rebuilds it).
///
/// The log is read once (see [`LogReplay`]), by a reader thread that walks it to the end of
/// its valid prefix, at most [`READ_AHEAD_BYTES`] ahead of redo: it hands each record to
/// redo, on this thread, and the pages redo will read to [`PREFETCH_THREADS`] loaders. What
/// it returns besides the report is what the log needs to go on from the walk's end.
pub fn redo(
    pool: &Arc<BufferPool>,
    log: &LogReplay,
    tables: &mut Vec<TableDef>,
    from: u64,
) -> Result<(RecoveryReport, Walked)> {
    let began = Instant::now();
    let (pages, to_load) = std::sync::mpsc::sync_channel::<Vec<PageId>>(LOAD_QUEUE);
    let to_load = std::sync::Mutex::new(to_load);
    let (batches, to_apply) = std::sync::mpsc::channel::<Result<Vec<ReadRecord>>>();
    let (spares, spare) = std::sync::mpsc::channel::<Vec<ReadRecord>>();
    let (report, walked) = std::thread::scope(|scope| {
        for _ in 0..PREFETCH_THREADS {
            // A page that cannot be read is left to redo, which reports it.
            scope.spawn(|| loop {
                let next = to_load.lock().map(|r| r.recv());
                let Ok(Ok(ids)) = next else { return };
                for id in ids {
                    let _ = pool.read(id);
                }
            });
        }
        let reader = scope.spawn(|| {
            let ahead = ReadAhead {
                batches,
                spare,
                pages,
                page_limit: pool.capacity() / 2,
            };
            ahead.walk(log, from)
        });
        // Returns (and drops its channels, which stops the reader) at the first error.
        let report = apply_records(pool, tables, from, to_apply, spares);
        let walked = reader.join().unwrap_or_else(|_| {
            Err(EngineError::Corrupt(
                "the log's reader thread panicked".into(),
            ))
        });
        (report, walked)
    });
    let (mut report, walked) = (report?, walked?);
    if !walked.reached_from() {
        return Err(EngineError::Open(format!(
            "the data file's checkpoint (LSN {from}) is not a record boundary of the log, \
             which ends at LSN {}: the log does not belong to this data file or lost its tail",
            walked.end()
        )));
    }
    report.elapsed = began.elapsed();
    Ok((report, walked))
}

/// A record read ahead of redo, with its payload in a buffer that redo gives back.
struct ReadRecord {
    lsn: u64,
    end: u64,
    payload: Vec<u8>,
}

/// Payload bytes the reader may have handed to redo and not had back: enough that the
/// loaders stay well ahead (16 MiB is ~4,000 4 KiB SETs, and up to three times as many
/// pages), little enough that a log of large records does not pile up in memory.
const READ_AHEAD_BYTES: usize = 16 << 20;

/// Records go to redo, and page ids to the loaders, in batches: one message per record and
/// per page made the threads spend more time waking each other through the channels than
/// reading pages.
const RECORD_BATCH: usize = 64;
const RECORD_BATCH_BYTES: usize = 1 << 20;
const PAGE_BATCH: usize = 32;
/// Page batches waiting for a loader, at most.
const LOAD_QUEUE: usize = 256;

/// Threads that read pages into the pool ahead of redo. Redo reads one page at a time;
/// after a power cut nothing is cached, and a restart that replays a few hundred MB of 4 KiB
/// SETs waited 0.5 s for those reads one by one.
const PREFETCH_THREADS: usize = 16;

/// The reader's side of redo (see [`redo`]).
struct ReadAhead {
    batches: std::sync::mpsc::Sender<Result<Vec<ReadRecord>>>,
    /// Batches redo is done with: their payload buffers, and their bytes back to the budget.
    spare: std::sync::mpsc::Receiver<Vec<ReadRecord>>,
    pages: std::sync::mpsc::SyncSender<Vec<PageId>>,
    /// Pages to prefetch at most (half the pool, so that they are still there when redo
    /// gets to them).
    page_limit: usize,
}

/// The reader's state during its walk.
#[derive(Default)]
struct Reading {
    batch: Vec<ReadRecord>,
    batch_bytes: usize,
    /// Bytes of the batches handed to redo and not given back.
    in_flight: usize,
    buffers: Vec<Vec<u8>>,
    seen: PageIdSet,
    page_batch: Vec<PageId>,
}

impl ReadAhead {
    /// Walks the log from `from` to the end of its valid prefix; stops early when redo has
    /// stopped (a closed channel). Errors go to redo first, which reports them.
    fn walk(self, log: &LogReplay, from: u64) -> Result<Walked> {
        let mut walk = match log.records_from(from) {
            Ok(walk) => walk,
            Err(err) => return self.fail(err.into()),
        };
        let mut state = Reading::default();
        loop {
            // Read straight into a buffer that goes to redo: no copy of the payload.
            let mut payload = state.buffers.pop().unwrap_or_default();
            let (lsn, end) = match walk.next_into(&mut payload) {
                None => break,
                Some(Ok(at)) => at,
                Some(Err(err)) => return self.fail(err.into()),
            };
            self.prefetch(&payload, lsn, &mut state);
            self.wait_for_budget(&mut state, payload.len())?;
            state.batch_bytes += payload.len();
            state.batch.push(ReadRecord { lsn, end, payload });
            if state.batch.len() >= RECORD_BATCH || state.batch_bytes >= RECORD_BATCH_BYTES {
                self.send_batch(&mut state)?;
            }
        }
        self.send_batch(&mut state)?;
        self.send_pages(&mut state);
        walk.walked().ok_or_else(|| {
            EngineError::Corrupt("the log's walk stopped before the end of its valid prefix".into())
        })
    }

    /// Waits until a record of `len` bytes fits the read-ahead budget (or nothing is in
    /// flight), taking back what redo has finished.
    fn wait_for_budget(&self, state: &mut Reading, len: usize) -> Result<()> {
        loop {
            while let Ok(done) = self.spare.try_recv() {
                take_back(state, done);
            }
            if state.in_flight == 0 || state.in_flight + state.batch_bytes + len <= READ_AHEAD_BYTES
            {
                return Ok(());
            }
            // Redo holds `in_flight` bytes and gives them back as it applies them.
            let Ok(done) = self.spare.recv() else {
                return Err(stopped());
            };
            take_back(state, done);
        }
    }

    fn send_batch(&self, state: &mut Reading) -> Result<()> {
        if state.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut state.batch);
        state.in_flight += std::mem::take(&mut state.batch_bytes);
        self.batches.send(Ok(batch)).map_err(|_| stopped())
    }

    /// Queues the pages of the record at `lsn` that redo will read from the data file, each
    /// once: those whose first op from the walk's start on is not an image. A record that
    /// does not decode is left to redo, which reports it.
    fn prefetch(&self, payload: &[u8], lsn: u64, state: &mut Reading) {
        if state.seen.len() >= self.page_limit {
            return;
        }
        let ops = match wal::decode(payload, lsn) {
            Ok(WalRecord::Commit { ops } | WalRecord::CreateTable { ops, .. }) => ops,
            Err(_) => return,
        };
        let Ok(ops) = page_ops(ops, lsn) else { return };
        for op in ops {
            if state.seen.len() >= self.page_limit {
                break;
            }
            if state.seen.insert(op.page()) && !op.is_image() {
                state.page_batch.push(op.page());
                if state.page_batch.len() >= PAGE_BATCH {
                    self.send_pages(state);
                }
            }
        }
    }

    fn send_pages(&self, state: &mut Reading) {
        if !state.page_batch.is_empty() {
            // A closed channel only means the loaders are gone: redo reads for itself.
            let _ = self.pages.send(std::mem::take(&mut state.page_batch));
        }
    }

    fn fail(&self, err: EngineError) -> Result<Walked> {
        let why = err.to_string();
        let _ = self.batches.send(Err(err));
        Err(EngineError::Corrupt(format!(
            "the log's walk failed: {why}"
        )))
    }
}

fn take_back(state: &mut Reading, done: Vec<ReadRecord>) {
    for record in done {
        state.in_flight -= record.payload.len();
        state.buffers.push(record.payload);
    }
}

fn stopped() -> EngineError {
    EngineError::Corrupt("redo stopped before the log's end".into())
}

/// Redo itself: applies the records the reader hands over, in LSN order, and gives each
/// batch back.
fn apply_records(
    pool: &BufferPool,
    tables: &mut Vec<TableDef>,
    from: u64,
    batches: std::sync::mpsc::Receiver<Result<Vec<ReadRecord>>>,
    spares: std::sync::mpsc::Sender<Vec<ReadRecord>>,
) -> Result<RecoveryReport> {
    let mut report = RecoveryReport {
        from_lsn: from,
        to_lsn: from,
        ..RecoveryReport::default()
    };
    let mut pages = RedoPages {
        file_pages: pool.page_count(),
        ops_seen: 0,
    };
    for batch in batches {
        let batch = batch?;
        for record in &batch {
            apply_record(pool, tables, record, &mut pages, &mut report)?;
        }
        // The reader may be gone (it has sent everything): the buffers are then just freed.
        let _ = spares.send(batch);
    }
    Ok(report)
}

fn apply_record(
    pool: &BufferPool,
    tables: &mut Vec<TableDef>,
    record: &ReadRecord,
    pages: &mut RedoPages,
    report: &mut RecoveryReport,
) -> Result<()> {
    match wal::decode(&record.payload, record.lsn)? {
        WalRecord::Commit { ops } => {
            report.ops_applied += redo_ops(pool, ops, record, pages)?;
        }
        WalRecord::CreateTable { def, ops } => {
            report.ops_applied += redo_ops(pool, ops, record, pages)?;
            let def = decode_def(def)?;
            if !tables.iter().any(|t| t.name == def.name) {
                tables.push(def);
            }
        }
    }
    report.records += 1;
    report.bytes += record.end - record.lsn;
    report.to_lsn = record.end;
    Ok(())
}

/// The page ops of the log record at `lsn`, decoded.
fn page_ops(ops: &[u8], lsn: u64) -> Result<Vec<PageOp<'_>>> {
    decode_ops(ops).map_err(|e| EngineError::Corrupt(format!("log record at LSN {lsn}: {e}")))
}

/// How far past the data file's end an open may find pages that were written before a crash
/// (by redo, or as copies in the double-write area whose in-place writes a power cut took
/// back): allocation hands out the next page, so only allocations not yet logged or written
/// when the process stopped (transactions in flight allocate in one order and log in
/// another) and pages a checkpoint counted but never wrote lie between. Far more than that,
/// and far less than a damaged id of 2^40.
pub(crate) const PAGES_PAST_THE_FILE: u64 = 1 << 20;

/// What bounds the pages redo may change: the data file's length when redo began, and the
/// page ops met since. A page past the file's end was allocated after the checkpoint, and
/// allocation hands out the next page, so each op can take the end one page further (a
/// damaged page id of 2^40, redone, once made the free list 2^40 pages long).
struct RedoPages {
    file_pages: u64,
    ops_seen: u64,
}

impl RedoPages {
    fn check(&mut self, id: PageId, lsn: u64) -> Result<()> {
        self.ops_seen += 1;
        let limit = self
            .file_pages
            .saturating_add(PAGES_PAST_THE_FILE)
            .saturating_add(self.ops_seen);
        if id.0 < FIRST_DATA_PAGE {
            return Err(EngineError::Corrupt(format!(
                "log record at LSN {lsn} changes page {id}, a meta page"
            )));
        }
        if id.0 >= limit {
            return Err(EngineError::Corrupt(format!(
                "log record at LSN {lsn} changes page {id}, far past the end of the data file ({} pages)",
                self.file_pages
            )));
        }
        Ok(())
    }
}

fn redo_ops(
    pool: &BufferPool,
    ops: &[u8],
    record: &ReadRecord,
    pages: &mut RedoPages,
) -> Result<u64> {
    let (lsn, end) = (record.lsn, record.end);
    let ops = page_ops(ops, lsn)?;
    // An op followed by an image of its page in the same record is superseded by it: skip
    // it, so that a page whose first change since the checkpoint ends with a full-page image
    // (`txn.rs`) is rebuilt without reading what may be a torn page.
    let mut last_image: PageIdMap<usize> = PageIdMap::default();
    for (i, op) in ops.iter().enumerate() {
        if op.is_image() {
            last_image.insert(op.page(), i);
        }
    }
    let mut redone: Vec<PageId> = Vec::new();
    let mut applied = 0;
    for (i, op) in ops.iter().enumerate() {
        let id = op.page();
        pages.check(id, lsn)?;
        if last_image.get(&id).is_some_and(|&last| i < last) {
            continue;
        }
        let mut page = pool.redo_page(id, op.is_image())?;
        if op.is_image() || redone.contains(&id) || page.lsn() < end {
            op.apply(&mut page)?;
            page.reset_lsn(end);
            if !redone.contains(&id) {
                redone.push(id);
            }
            applied += 1;
        }
    }
    Ok(applied)
}

/// Step 3 of the protocol. The high-water mark is the data file's end, or the highest page
/// redo wrote past it (the pool's count after redo): every page a tree uses lies below it,
/// since the checkpoint wrote each page it had and redo rewrote each one changed since. The
/// checkpoint's own page count is not needed (it is higher only by free pages never
/// written). A page past the mark, among the meta pages, or in two trees is damage behind
/// valid checksums, reported here rather than met later (a child id of 2^40 once made this
/// list 2^40 pages long).
pub fn rebuild_free_pages(pool: &BufferPool, catalog: &Catalog) -> Result<()> {
    let next = pool.page_count().max(FIRST_DATA_PAGE);
    let mut used = PageIdSet::default();
    for table in catalog.tables() {
        for tree in &table.trees {
            for page in tree.btree.page_ids()? {
                if !(FIRST_DATA_PAGE..next).contains(&page.0) {
                    return Err(EngineError::Corrupt(format!(
                        "table `{}` has page {page}, outside the data pages {FIRST_DATA_PAGE}..{next}",
                        table.def.name
                    )));
                }
                if !used.insert(page) {
                    return Err(EngineError::Corrupt(format!(
                        "page {page} is in two trees (the second of table `{}`)",
                        table.def.name
                    )));
                }
            }
        }
    }
    let free = (FIRST_DATA_PAGE..next)
        .map(PageId)
        .filter(|p| !used.contains(p))
        .collect();
    pool.set_allocation(next, free);
    Ok(())
}
