//! Crash recovery: redo from the last checkpoint, then rebuild the free-page list.
//!
//! # Protocol
//!
//! 1. The meta page names the checkpoint LSN `c`: every change logged below `c` is in the
//!    data file (see `Shared::checkpoint_if`). `c` is where the last completed checkpoint
//!    began or, if it left the pages of recent epochs dirty, where the oldest of those began.
//! 2. Redo walks the durable log from `c` in LSN order. For each page op of the record that
//!    ends at `e`: an op followed by an image of the same page in the same record is skipped
//!    (the image supersedes it); an `Image` is always applied (it rebuilds the page, even one
//!    whose last write was torn) and sets the page LSN to `e`; any other op is applied if the
//!    page LSN is below `e`, or if an earlier op of the same record was applied to the page.
//!    A page that fails its checksum and has no image in the log is reported as corrupt.
//!    Trees are opened (their roots read) only after redo, which may rebuild a root.
//! 3. Pages reachable from the catalog's roots are in use; every other page below the
//!    high-water mark is free.
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

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tailstore_log::LogManager;
use tailstore_storage::btree::redo::decode as decode_ops;
use tailstore_storage::{BufferPool, PageId, PageOp};

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
pub fn redo(
    pool: &Arc<BufferPool>,
    log: &LogManager,
    tables: &mut Vec<TableDef>,
    from: u64,
) -> Result<RecoveryReport> {
    let began = Instant::now();
    let redo_done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        // Prefetch errors are not ours to report: redo reads the same records and pages
        // and reports whatever fails.
        scope.spawn(|| prefetch_pages(pool, log, from, &redo_done));
        let report = replay(pool, log, tables, from);
        redo_done.store(true, Ordering::Relaxed);
        report
    })
    .map(|mut report| {
        report.elapsed = began.elapsed();
        report
    })
}

/// The redo walk itself (see [`redo`]).
fn replay(
    pool: &BufferPool,
    log: &LogManager,
    tables: &mut Vec<TableDef>,
    from: u64,
) -> Result<RecoveryReport> {
    let mut report = RecoveryReport {
        from_lsn: from,
        to_lsn: from,
        ..RecoveryReport::default()
    };
    let mut records = log.records_from(from);
    while let Some(record) = records.next_in_place() {
        let record = record?;
        match wal::decode(record.payload, record.lsn)? {
            WalRecord::Commit { ops } => {
                report.ops_applied += redo_ops(pool, ops, record.end, record.lsn)?;
            }
            WalRecord::CreateTable { def, ops } => {
                report.ops_applied += redo_ops(pool, ops, record.end, record.lsn)?;
                let def = decode_def(def)?;
                if !tables.iter().any(|t| t.name == def.name) {
                    tables.push(def);
                }
            }
        }
        report.records += 1;
        report.bytes += record.end - record.lsn;
        report.to_lsn = record.end;
    }
    Ok(report)
}

/// Threads that read pages into the pool ahead of redo.
const PREFETCH_THREADS: usize = 16;

/// Reads into the pool, on [`PREFETCH_THREADS`] threads, the pages redo will read from the data
/// file: those whose first op in the log from `from` on is not an image (at most half the
/// pool, so that they are still there when redo gets to them). Redo reads one page at a time;
/// after a power cut nothing is cached, and a restart that replays a few hundred MB of 4 KiB
/// SETs waited 0.5 s for those reads one by one. A page that cannot be read is left to redo,
/// which reports it.
///
/// The walk runs beside redo's own walk, not before it: it reads no page itself and so runs
/// ahead of redo, and a walk that must finish before redo starts costs a restart its whole
/// length (a read and a checksum of every record) even when every page is cached. A page
/// redo reached first is in the pool, and reading it again is a hit. It stops when redo
/// has finished.
fn prefetch_pages(
    pool: &Arc<BufferPool>,
    log: &LogManager,
    from: u64,
    redo_done: &AtomicBool,
) -> Result<()> {
    let (send, receive) = std::sync::mpsc::sync_channel::<PageId>(4096);
    let receive = std::sync::Mutex::new(receive);
    std::thread::scope(|scope| {
        for _ in 0..PREFETCH_THREADS {
            scope.spawn(|| loop {
                let next = receive.lock().map(|r| r.recv());
                let Ok(Ok(id)) = next else { return };
                let _ = pool.read(id);
            });
        }
        let result = send_pages_to_read(log, from, pool.capacity() / 2, &send, redo_done);
        drop(send);
        result
    })
}

/// Sends each page redo will read (see [`prefetch_pages`]) once, at most `limit` of them.
fn send_pages_to_read(
    log: &LogManager,
    from: u64,
    limit: usize,
    send: &std::sync::mpsc::SyncSender<PageId>,
    redo_done: &AtomicBool,
) -> Result<()> {
    let mut seen = HashSet::new();
    let mut records = log.records_from(from);
    while let Some(record) = records.next_in_place() {
        if redo_done.load(Ordering::Relaxed) {
            return Ok(());
        }
        let record = record?;
        let ops = match wal::decode(record.payload, record.lsn)? {
            WalRecord::Commit { ops } | WalRecord::CreateTable { ops, .. } => ops,
        };
        for op in page_ops(ops, record.lsn)? {
            if seen.len() >= limit {
                return Ok(());
            }
            if seen.insert(op.page()) && !op.is_image() && send.send(op.page()).is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The page ops of the log record at `lsn`, decoded.
fn page_ops(ops: &[u8], lsn: u64) -> Result<Vec<PageOp<'_>>> {
    decode_ops(ops).map_err(|e| EngineError::Corrupt(format!("log record at LSN {lsn}: {e}")))
}

fn redo_ops(pool: &BufferPool, ops: &[u8], end: u64, lsn: u64) -> Result<u64> {
    let ops = page_ops(ops, lsn)?;
    // An op followed by an image of its page in the same record is superseded by it: skip
    // it, so that a page whose first change since the checkpoint ends with a full-page image
    // (`txn.rs`) is rebuilt without reading what may be a torn page.
    let mut last_image: HashMap<PageId, usize> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        if op.is_image() {
            last_image.insert(op.page(), i);
        }
    }
    let mut redone: Vec<PageId> = Vec::new();
    let mut applied = 0;
    for (i, op) in ops.iter().enumerate() {
        let id = op.page();
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

/// Step 3 of the protocol.
pub fn rebuild_free_pages(pool: &BufferPool, catalog: &Catalog, page_count: u64) -> Result<()> {
    let mut used = HashSet::new();
    for table in catalog.tables() {
        for tree in &table.trees {
            used.extend(tree.btree.page_ids()?);
        }
    }
    let highest = used.iter().map(|p: &PageId| p.0 + 1).max().unwrap_or(0);
    let next = page_count
        .max(pool.page_count())
        .max(highest)
        .max(FIRST_DATA_PAGE);
    let free = (FIRST_DATA_PAGE..next)
        .map(PageId)
        .filter(|p| !used.contains(p))
        .collect();
    pool.set_allocation(next, free);
    Ok(())
}
