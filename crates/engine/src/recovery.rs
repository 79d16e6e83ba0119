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
//!    `c` that is not a record boundary of the valid prefix is an error). The walk lists,
//!    per page, the records that change it; each page is redone when it is first loaded
//!    (`pending_redo.rs`, which argues that this is redo in LSN order, page by page). For
//!    each page op of the record that ends at `e`: an op followed by an image of the same
//!    page in the same record is skipped (the image supersedes it); an `Image` is always
//!    applied (it rebuilds the page, even one whose last write was torn) and sets the page
//!    LSN to `e`; any other op is applied if the page LSN is below `e`, or if an earlier op
//!    of the same record was applied to the page. A page that fails its checksum and has no
//!    image in the log is reported as corrupt (by the open, or, with
//!    `DbConfig::redo_at_first_load`, by the first load of the page, which stops the
//!    database). Trees are opened (their roots read) only once the redo is set up to
//!    rebuild each page it reads.
//! 3. Pages reachable from the catalog's roots are in use; every other page below the
//!    high-water mark (the data file's end, or the highest page the log changes) is free.
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
//! at all. A commit too long for one record is logged in parts, which the walk holds until
//! it meets the last one and drops if it never does (`wal.rs`, "Commits in parts", argues
//! that this redoes the same as one record would). Pages never hold changes of a
//! transaction whose record is not durable: changes are applied only while committing, the
//! record is appended before the pages can be written (they are "unlogged" until stamped),
//! and the write-ahead hook forces the log up to a page's LSN before the page is written. The page LSN test makes redo idempotent: a page on
//! disk with LSN `>= e` already holds the record's change (changes of one page are logged in
//! the order they were made, because the tree's write latch is held from the change to the
//! stamp).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tailstore_log::{LogReplay, RecordRef, Walked};
use tailstore_storage::btree::redo::decode_spans;
use tailstore_storage::{BufferPool, PageId, PageIdSet, StorageError};

use crate::catalog::{decode_def, Catalog, TableDef};
use crate::error::{EngineError, Result};
use crate::meta::FIRST_DATA_PAGE;
use crate::pending_redo::PageChanges;
use crate::wal::{self, Part, WalRecord};

/// What recovery did.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// Where redo started (the last checkpoint) and ended.
    pub from_lsn: u64,
    pub to_lsn: u64,
    /// Log records and bytes replayed.
    pub records: u64,
    pub bytes: u64,
    /// Pages the replayed records change: each is redone at its first load
    /// ([`crate::pending_redo`]).
    pub pages_to_redo: u64,
    /// The meta slot the open passed over as unreadable, and why ([`crate::meta::Latest`]).
    pub meta_slot_passed_over: Option<String>,
    /// Pages torn by the crash and restored from the double-write area before redo.
    pub torn_pages_restored: usize,
    /// Pages checked in place against their latest copy in the double-write area: those
    /// written since its last sync (see `doublewrite.rs`, the synced mark).
    pub pages_checked_against_copies: usize,
    /// Parts of commits too long for one record whose last part is not in the log (a crash
    /// came between their appends): dropped, as a commit that never finished.
    pub unfinished_commit_parts: u64,
    /// Bytes at the log's end that were only in the PMEM log buffer (`buffer` mode), which
    /// recovery wrote to the log file.
    pub pmem_tail_bytes: u64,
    pub elapsed: Duration,
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "recovery: replayed {} log records ({} bytes, LSN {}..{}) that change {} pages, in {:.1} ms",
            self.records,
            self.bytes,
            self.from_lsn,
            self.to_lsn,
            self.pages_to_redo,
            self.elapsed.as_secs_f64() * 1e3
        )?;
        if self.pmem_tail_bytes > 0 {
            write!(
                f,
                "; moved the last {} bytes of log from PMEM to the log file",
                self.pmem_tail_bytes
            )?;
        }
        if self.unfinished_commit_parts > 0 {
            write!(
                f,
                "; dropped {} parts of a commit that never finished",
                self.unfinished_commit_parts
            )?;
        }
        if self.torn_pages_restored > 0 {
            write!(
                f,
                "; restored {} torn pages from the double-write area",
                self.torn_pages_restored
            )?;
        }
        if let Some(why) = &self.meta_slot_passed_over {
            write!(
                f,
                "; opened at the checkpoint recorded in the other meta slot, {why}"
            )?;
        }
        Ok(())
    }
}

/// Step 2 of the protocol, its walk: reads the log once from `from` to the end of its valid
/// prefix (see [`LogReplay`]), adds the tables created after the checkpoint to `tables` (no
/// tree is opened before redo, since opening reads the root page, which may be torn until
/// redo rebuilds it), and lists, per page, the records that change it. The redo itself
/// happens when each page is first loaded ([`crate::pending_redo`]): a restart reads the
/// log, not every page the log changed, before it serves.
pub fn scan(
    pool: &BufferPool,
    log: &LogReplay,
    tables: &mut Vec<TableDef>,
    from: u64,
) -> Result<Scanned> {
    let began = Instant::now();
    let mut report = RecoveryReport {
        from_lsn: from,
        to_lsn: from,
        ..RecoveryReport::default()
    };
    let mut noted = NotedChanges {
        bounds: RedoPages {
            file_pages: pool.page_count(),
            ops_seen: 0,
        },
        pages: PageChanges::default(),
        highest: None,
    };
    let mut open_commits = OpenCommits::default();
    let mut walk = log.records_from(from)?;
    while let Some(next) = walk.next_in_place() {
        let RecordRef { lsn, end, payload } = next?;
        let (ops, part) = match wal::decode(payload, lsn)? {
            WalRecord::Commit { ops, part } => (ops, part),
            WalRecord::CreateTable { def, ops } => {
                let def = decode_def(def)?;
                if !tables.iter().any(|t| t.name == def.name) {
                    tables.push(def);
                }
                (ops, Part::Whole)
            }
        };
        let held = |ops: &[u8]| HeldPart {
            lsn,
            end,
            ops: ops.to_vec(),
        };
        match part {
            Part::Whole => noted.record(lsn, end, ops)?,
            Part::First => open_commits.begin(end, held(ops)),
            Part::Next { first_end } => open_commits.add(first_end, held(ops))?,
            Part::Last { first_end } => {
                for earlier in open_commits.finish(first_end, lsn)? {
                    noted.record(earlier.lsn, earlier.end, &earlier.ops)?;
                }
                noted.record(lsn, end, ops)?;
            }
        }
        report.records += 1;
        report.bytes += end - lsn;
        report.to_lsn = end;
    }
    report.unfinished_commit_parts = open_commits.parts();
    let NotedChanges { pages, highest, .. } = noted;
    let walked = walk.walked().ok_or_else(|| {
        EngineError::Corrupt("the log's walk stopped before the end of its valid prefix".into())
    })?;
    if !walked.reached_from() {
        let end = walked.end();
        return Err(EngineError::Open(if end < from {
            format!(
                "the log's valid records end at LSN {end}, before the data file's checkpoint \
                 (LSN {from}): the log is damaged at LSN {end}, or lost its tail"
            )
        } else {
            format!(
                "the data file's checkpoint (LSN {from}) is not a record boundary of the log, \
                 which ends at LSN {end}: the log does not belong to this data file"
            )
        }));
    }
    if let Some(id) = highest {
        // Allocated before the crash, whether or not it reached the data file.
        pool.note_page_in_use(id);
    }
    report.pages_to_redo = pages.len() as u64;
    report.elapsed = began.elapsed();
    Ok(Scanned {
        report,
        walked,
        pages,
    })
}

/// What recovery's walk found.
pub struct Scanned {
    pub report: RecoveryReport,
    /// Where the walk ended: what the log needs to go on from there.
    pub walked: Walked,
    /// Per page changed since the checkpoint, its changes.
    pub pages: PageChanges,
}

/// The changes recovery's walk noted for redo, and what bounds them.
struct NotedChanges {
    bounds: RedoPages,
    pages: PageChanges,
    highest: Option<PageId>,
}

impl NotedChanges {
    /// Notes the page ops `ops` of the record `[lsn, end)` (a whole commit, or one part of
    /// a commit whose every part the walk has met).
    fn record(&mut self, lsn: u64, end: u64, ops: &[u8]) -> Result<()> {
        let decoded = decode_spans(ops)
            .map_err(|e| EngineError::Corrupt(format!("log record at LSN {lsn}: {e}")))?;
        for (op, _) in &decoded {
            self.bounds.check(op.page(), lsn)?;
            self.highest = self.highest.max(Some(op.page()));
        }
        self.pages.note_record(lsn, end, ops, &decoded);
        Ok(())
    }
}

/// One part of a commit logged in parts, held by the walk until it meets the last part.
struct HeldPart {
    lsn: u64,
    end: u64,
    ops: Vec<u8>,
}

/// The commits in parts whose last part the walk has not met yet, by their first part's end
/// (`wal.rs`, "Commits in parts"). Those still here when the walk ends were never
/// completed: a crash or a failed append came between their parts, and they are dropped.
#[derive(Default)]
struct OpenCommits {
    by_first_end: HashMap<u64, Vec<HeldPart>>,
}

impl OpenCommits {
    fn begin(&mut self, first_end: u64, part: HeldPart) {
        self.by_first_end.insert(first_end, vec![part]);
    }

    fn add(&mut self, first_end: u64, part: HeldPart) -> Result<()> {
        let lsn = part.lsn;
        self.by_first_end
            .get_mut(&first_end)
            .ok_or_else(|| Self::no_first_part(lsn, first_end))?
            .push(part);
        Ok(())
    }

    /// The parts before the last, in log order, of the commit whose last part is at `lsn`.
    fn finish(&mut self, first_end: u64, lsn: u64) -> Result<Vec<HeldPart>> {
        self.by_first_end
            .remove(&first_end)
            .ok_or_else(|| Self::no_first_part(lsn, first_end))
    }

    /// Parts of commits never completed.
    fn parts(&self) -> u64 {
        self.by_first_end.values().map(|p| p.len() as u64).sum()
    }

    /// A checkpoint's position is never between a commit's parts, so a part whose first is
    /// not in the walk is damage (or a log of another data file).
    fn no_first_part(lsn: u64, first_end: u64) -> EngineError {
        EngineError::Corrupt(format!(
            "log record at LSN {lsn} continues a commit whose first part (ending at LSN \
             {first_end}) the log does not hold after the checkpoint"
        ))
    }
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

/// Step 3 of the protocol. The high-water mark is the data file's end, or the highest page
/// redo wrote past it (the pool's count after redo): every page a tree uses lies below it,
/// since the checkpoint wrote each page it had and redo rewrote each one changed since. The
/// checkpoint's own page count (`recorded`) is not needed (it is higher only by free pages
/// never written); it only names the likely cause when a tree's page lies past the file's
/// end, a file cut short. A page past the mark, among the meta pages, or in two trees is damage behind
/// valid checksums, reported here rather than met later (a child id of 2^40 once made this
/// list 2^40 pages long).
pub fn rebuild_free_pages(pool: &BufferPool, catalog: &Catalog, recorded: u64) -> Result<()> {
    let next = pool.page_count().max(FIRST_DATA_PAGE);
    let mut used = PageIdSet::default();
    for table in catalog.tables() {
        for tree in &table.trees {
            let cut_short = |page: PageId| {
                (page.0 >= next && recorded > next).then(|| {
                    EngineError::Corrupt(format!(
                        "table `{}` has page {page}, past the data file's end: the file holds \
                         {next} pages and its checkpoint recorded {recorded} (was it cut \
                         short, or copied in part?)",
                        table.def.name
                    ))
                })
            };
            let pages = tree.btree.page_ids().map_err(|e| match e {
                StorageError::Corrupt { page_id, .. } => {
                    cut_short(page_id).unwrap_or(EngineError::Storage(e))
                }
                other => other.into(),
            })?;
            for page in pages {
                if let Some(err) = cut_short(page) {
                    return Err(err);
                }
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
