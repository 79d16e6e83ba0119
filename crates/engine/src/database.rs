//! Opening, creating, checkpointing and closing a database.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tailstore_log::{
    record_size, CommitMode, LogConfig, LogCounters, LogError, LogManager, LogReplay, ThreadSetup,
    LOG_START_LSN,
};
use tailstore_media::real::RealStorage;
use tailstore_media::{File, OpenMode, Storage};
use tailstore_storage::doublewrite;
use tailstore_storage::{
    BufferPool, DoubleWrite, PoolStats, ReadContention, Restored, Schema, StorageError, PAGE_SIZE,
};

use crate::catalog::{encode_def, Catalog, TableDef, TableState, MAX_INDEXES};
use crate::cpus::CpuList;
use crate::error::{AbortCause, EngineError, Result};
use crate::interleave::{self, Point};
use crate::meta::{Meta, FIRST_DATA_PAGE, MAX_CATALOG};
use crate::pending_redo::{self, PendingPages};
use crate::recovery::{self, RecoveryReport};
use crate::replay_weight::ReplayWeight;
use crate::txn::{Table, Transaction};
use crate::wal;

/// Name of the data file inside the data directory.
pub const DATA_FILE_NAME: &str = "tailstore.db";

/// A `pmem-log` transaction whose writes exceed this share (1/N) of the region first waits
/// for three quarters of the region to be free ([`Shared::wait_for_checkpoint_room`]).
const LARGE_WRITES_SHARE: u64 = 64;

/// Where [`Shared::place_and_stamp`] put a commit's record.
pub(crate) enum Placed<'a> {
    /// Written and published already (a commit in parts); the end of its last part.
    Written(u64),
    /// Reserved, to be written by [`Shared::write_placed`].
    Reserved(tailstore_log::Reservation<'a>),
}

impl Placed<'_> {
    /// The LSN just past the record (its last part): what the touched pages are stamped with.
    fn end(&self) -> u64 {
        match self {
            Placed::Written(end) => *end,
            Placed::Reserved(place) => place.end(),
        }
    }
}

/// The log gate, held by an append ([`Shared::append_gate`]); released when dropped.
#[allow(dead_code)] // the guards are held, not read
pub(crate) enum AppendGate<'a> {
    /// Beside other appends: every commit but a `pmem-log` commit in parts.
    Shared(RwLockReadGuard<'a, ()>),
    /// Alone: a `pmem-log` commit in parts, which must find room for all its parts.
    Alone(RwLockWriteGuard<'a, ()>),
}

/// Everything needed to open (or create) a database.
#[derive(Clone, Debug)]
pub struct DbConfig {
    /// Directory of the data file (`tailstore.db`); must exist.
    pub data_dir: PathBuf,
    /// The log: commit mode, log directory, PMEM file, buffer sizes.
    pub log: LogConfig,
    /// Memory for cached pages (rounded down to whole 16 KiB pages, at least 16).
    pub buffer_pool_bytes: usize,
    /// A checkpoint runs at least this often (`None`: only by log volume and at close).
    pub checkpoint_interval: Option<Duration>,
    /// A checkpoint runs once this many log bytes were written since the last one began.
    pub checkpoint_log_bytes: u64,
    /// A checkpoint run by the checkpointer leaves dirty the pages first changed in about the
    /// last this many bytes of log (whole stretches between checkpoints' starts), for a later
    /// checkpoint to write; redo then starts that much further back. 0: every checkpoint
    /// writes every dirty page. A page changed again and again is written once per this
    /// much log plus an interval instead of once per interval, for the same bound on what a
    /// restart replays ([`Shared::checkpoint_if`]). Checkpoints asked for ([`Database::checkpoint`],
    /// the one at close) write every dirty page.
    pub checkpoint_keep_bytes: u64,
    /// The most log a restart replays: once this many bytes were written since the last
    /// completed checkpoint (a checkpoint that cannot keep up with the writes), writers wait
    /// for one before they change anything (see [`Shared::wait_for_checkpoint_room`]). `None`: no
    /// bound but the log's own (`pmem-log`'s region).
    pub max_replay_bytes: Option<u64>,
    /// In the checkpoint policy (`checkpoint_log_bytes`, `checkpoint_keep_bytes`,
    /// `max_replay_bytes` and `pmem-log`'s region bound), each log record counts as at least
    /// this many bytes: a restart's time follows the number of records it replays as well as
    /// their bytes (see `replay_weight.rs`). 0: bytes only.
    pub record_replay_floor: u64,
    /// Slots of the double-write area (`PMEM_FILE.pages`, next to the log's PMEM file) in the
    /// commit modes that have PMEM; fixed when the area is created. Each holds a page; the
    /// data file is synced each time half of them fill (see `doublewrite.rs`).
    pub doublewrite_slots: usize,
    /// After a crash, open as soon as the log is read, and redo each page the log changed
    /// when it is first loaded; the first checkpoint, run at once in the background, redoes
    /// the rest (`pending_redo.rs`). A restart's first reply then waits for the log, not for
    /// every page it changed. `false`: the open redoes every such page before it returns,
    /// so that a page the log cannot rebuild is the open's error.
    pub redo_at_first_load: bool,
    /// Processors for the database's background threads (the checkpointer and the log's
    /// writer), which must all be among those the process may run on; `None`: wherever the
    /// scheduler puts them (see [`crate::cpus`]).
    pub background_cpus: Option<CpuList>,
    /// Bugs a test plants in the buffer pool (`tailstore_storage::Plant`; the log's are
    /// `log.plants`); without effect in a build without debug assertions.
    pub pool_plants: Vec<tailstore_storage::Plant>,
    /// Bugs this crate's unit tests plant in the database ([`crate::plant`]).
    #[cfg(test)]
    pub(crate) plants: Vec<crate::plant::Plant>,
}

impl DbConfig {
    /// Defaults: the log in `data_dir`, a 64 MiB pool, a checkpoint every 30 s or 1 GiB of
    /// log (in `pmem-log`: a quarter of the region, which only a checkpoint frees). In the
    /// modes without PMEM, each checkpoint makes the next change of every page log a full
    /// image of it, so frequent checkpoints multiply the log volume (measured with TPC-C:
    /// ~34 KiB per transaction at one checkpoint per 64 MiB, 7 KiB at one per GiB); recovery
    /// replays at most this much.
    pub fn new(data_dir: impl Into<PathBuf>, mode: CommitMode, pmem_path: Option<PathBuf>) -> Self {
        let data_dir = data_dir.into();
        let log = LogConfig::new(mode, data_dir.clone(), pmem_path);
        let checkpoint_log_bytes = match mode {
            CommitMode::PmemLog => log.pmem_log_bytes as u64 / 4,
            _ => 1 << 30,
        };
        DbConfig {
            data_dir,
            log,
            buffer_pool_bytes: 64 << 20,
            checkpoint_interval: Some(Duration::from_secs(30)),
            checkpoint_log_bytes,
            checkpoint_keep_bytes: 0,
            max_replay_bytes: None,
            record_replay_floor: 0,
            doublewrite_slots: DEFAULT_DOUBLEWRITE_SLOTS,
            redo_at_first_load: false,
            background_cpus: None,
            pool_plants: Vec::new(),
            #[cfg(test)]
            plants: Vec::new(),
        }
    }

    /// Whether this crate's unit tests planted `plant` in the database; never outside them.
    pub(crate) fn planted(&self, plant: crate::plant::Plant) -> bool {
        #[cfg(test)]
        return self.plants.contains(&plant);
        #[cfg(not(test))]
        {
            let _ = plant;
            false
        }
    }

    /// The double-write area's file: in the commit modes that keep log bytes in PMEM, the
    /// PMEM file's path with `.pages` appended. `None` in the other modes, whose log holds
    /// full images of pages instead.
    pub fn doublewrite_file(&self) -> Option<PathBuf> {
        let pmem = self.log.pmem_path.as_deref()?;
        self.log.mode.uses_pmem().then(|| doublewrite_path(pmem))
    }

    /// The data file's path.
    pub fn data_file(&self) -> PathBuf {
        self.data_dir.join(DATA_FILE_NAME)
    }
}

/// Default slots of the double-write area: 64 MiB of PMEM (16 KiB pages), a data-file sync
/// every 2,048 page writes (32 MiB) at most. A checkpoint that writes more than that syncs
/// more often than once, a small part of its time; a workload that evicts dirty pages all
/// the time pays more (see ARCHITECTURE.md, decisions 61 and 98, and `--doublewrite-size`).
pub const DEFAULT_DOUBLEWRITE_SLOTS: usize = 4096;

/// The double-write area's file for the PMEM file `pmem`: `pmem` with `.pages` appended.
/// Keep it with the PMEM file: it may hold the only whole copy of a page a power cut tore.
pub fn doublewrite_path(pmem: &std::path::Path) -> PathBuf {
    let mut name = pmem.as_os_str().to_os_string();
    name.push(".pages");
    PathBuf::from(name)
}

/// Removes the PMEM file `pmem` and its double-write area, where they exist (scratch
/// databases of tests and benchmarks).
pub fn remove_pmem_files(pmem: &std::path::Path) {
    let _ = std::fs::remove_file(pmem);
    let _ = std::fs::remove_file(doublewrite_path(pmem));
}

/// What opening found and did.
#[derive(Clone, Debug)]
pub struct OpenReport {
    /// The database was created by this open.
    pub created: bool,
    pub recovery: RecoveryReport,
}

/// Counters of a running database.
#[derive(Clone, Debug, Default)]
pub struct EngineStats {
    pub pool: PoolStats,
    pub log: LogCounters,
    /// Frames in the pool and pages in the data file (in use or free).
    pub pool_pages: u64,
    pub data_pages: u64,
    pub commits: u64,
    pub rollbacks: u64,
    /// Aborts, by cause (in [`AbortCause::ALL`] order).
    pub aborts: [u64; 3],
    /// Commits whose record was longer than the log takes, logged in parts (`wal.rs`).
    pub commits_in_parts: u64,
    pub checkpoints: u64,
    pub checkpoint_time: Duration,
    /// Log past the last completed checkpoint: what a restart would replay now, in bytes and
    /// in replay weight ([`DbConfig::record_replay_floor`]).
    pub log_since_checkpoint: u64,
    pub weight_since_checkpoint: u64,
    /// The most replay weight past the last checkpoint before writers wait
    /// ([`DbConfig::max_replay_bytes`], or `pmem-log`'s region), if there is a limit.
    pub log_since_checkpoint_limit: Option<u64>,
    /// Writers that waited for a checkpoint at that limit, and their time waiting: when
    /// checkpoints fall behind the writes, this is where the writes slow to their pace.
    pub checkpoint_room_waits: u64,
    pub checkpoint_room_wait_time: Duration,
    /// Point reads that found a writer in their way, over every tree: where reads and writes
    /// of one table run side by side, how often a read had to try again or wait.
    pub read_contention: ReadContention,
    /// Where the redo a restart left to first use stands ([`DbConfig::redo_at_first_load`]).
    pub restart_redo: RestartRedo,
}

/// The redo a restart left to the background, as the first checkpoint after it finished it:
/// the pages no command had needed by then, and the time their redo took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BackgroundRedo {
    pub pages: u64,
    pub time: Duration,
}

/// Where the redo a restart left to first use stands ([`Database::restart_redo`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum RestartRedo {
    /// The open redid every page itself (or had nothing to redo).
    #[default]
    AtOpen,
    /// Pages the log changed wait for their first load or the first checkpoint.
    Pending { pages_left: u64 },
    /// The first checkpoint redid the pages still pending.
    Finished(BackgroundRedo),
}

impl RestartRedo {
    /// Pages that no command has needed yet and the first checkpoint has yet to redo.
    pub fn pages_left(&self) -> u64 {
        match self {
            RestartRedo::Pending { pages_left } => *pages_left,
            RestartRedo::AtOpen | RestartRedo::Finished(_) => 0,
        }
    }
}

impl EngineStats {
    pub fn aborts_by_cause(&self) -> impl Iterator<Item = (AbortCause, u64)> + '_ {
        AbortCause::ALL.into_iter().zip(self.aborts)
    }

    pub fn total_aborts(&self) -> u64 {
        self.aborts.iter().sum()
    }
}

/// A counter bumped by many threads at once (every transaction): one atomic per stripe, each
/// on its own cache lines, a thread always adding to the same stripe. A single shared
/// atomic was a cache line written by every read-only transaction, which kept two threads
/// doing lookups from scaling.
#[derive(Default)]
pub(crate) struct StripedCounter {
    stripes: [Stripe; STRIPES],
}

const STRIPES: usize = 16;

#[derive(Default)]
#[repr(align(128))]
struct Stripe(AtomicU64);

/// Stripes are handed out to threads in turn.
static NEXT_STRIPE: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) as usize % STRIPES;
}

impl StripedCounter {
    pub fn add(&self, n: u64) {
        let stripe = STRIPE.with(|&stripe| stripe);
        self.stripes[stripe].0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum()
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub commits: StripedCounter,
    pub rollbacks: StripedCounter,
    pub aborts: [AtomicU64; 3],
    pub commits_in_parts: AtomicU64,
    pub checkpoints: AtomicU64,
    pub checkpoint_ns: AtomicU64,
    pub checkpoint_room_waits: AtomicU64,
    pub checkpoint_room_wait_ns: AtomicU64,
}

/// Tables with an id below this are borrowed by transactions from [`Shared::registered`];
/// others are reference-counted.
pub(crate) const REGISTERED_TABLES: usize = 1024;

/// The most epochs a checkpoint keeps dirty pages of (see [`Shared::checkpoint_if`]).
const MAX_KEPT_EPOCHS: usize = 64;

/// Where the last checkpoint is.
struct CheckpointState {
    seq: u64,
    /// The replay weight where the last checkpoint began (the next one is due
    /// `checkpoint_log_bytes` of weight later).
    began: u64,
    at: Instant,
    /// The pool's epochs that pages may still be dirty since, oldest first. The first is
    /// where redo starts.
    epochs: VecDeque<Epoch>,
}

/// An epoch of the pool (see [`BufferPool::begin_epoch`]) and where in the log it began.
#[derive(Clone, Copy)]
struct Epoch {
    number: u64,
    lsn: u64,
    /// The replay weight at `lsn`.
    weight: u64,
}

/// The state shared by the database handle, its transactions and the checkpointer.
pub(crate) struct Shared {
    pub config: DbConfig,
    pub file: Arc<dyn File>,
    pub pool: Arc<BufferPool>,
    pub log: Arc<LogManager>,
    pub catalog: RwLock<Catalog>,
    /// Every table of the catalog with an id below [`REGISTERED_TABLES`], by id, set once
    /// (tables are never dropped): a transaction borrows a table from here for the life of the
    /// database instead of cloning its `Arc`, whose count is a cache line every transaction
    /// on the table would write.
    pub registered: Box<[OnceLock<Arc<TableState>>]>,
    /// Row versions: unique and increasing over the life of the database (see `txn.rs`).
    pub next_version: AtomicU64,
    pub next_txn: AtomicU64,
    pub counters: Counters,
    /// Where the latest checkpoint began, which is where its epoch of the pool began (see
    /// [`Shared::checkpoint_if`]): redo starts there or, if checkpoints keep recent pages
    /// dirty or this one has not finished, at an earlier such position. Without a
    /// double-write area, a page's first change since then gets a full image in the
    /// change's record (`txn.rs`), so that redo never needs a page that a crash may have
    /// torn.
    pub redo_lsn: AtomicU64,
    /// Held (shared) by every log append, from reading `redo_lsn` to the end of the append;
    /// a checkpoint takes it exclusively to pick its LSN. So no append is in flight when the
    /// checkpoint LSN is chosen, and every record at or after it saw the new `redo_lsn`.
    pub log_gate: RwLock<()>,
    /// The LSN of the latest completed checkpoint: the log is released up to here (the only
    /// way `pmem-log` gets room back; see [`Shared::wait_for_checkpoint_room`]).
    pub released_lsn: AtomicU64,
    /// The replay weight at `released_lsn`.
    released_weight: AtomicU64,
    /// The measure of log the checkpoint policy counts in (see `replay_weight.rs`).
    replay_weight: ReplayWeight,
    /// Set after a recovery that replayed records: the checkpointer runs one at once.
    checkpoint_requested: AtomicBool,
    /// The pages recovery left to redo at their first load (`DbConfig::redo_at_first_load`),
    /// until a checkpoint redoes the rest.
    pending_redo: Mutex<Option<Arc<PendingPages>>>,
    /// Set by the checkpoint that finishes `pending_redo`, before it clears it.
    background_redo: Mutex<Option<BackgroundRedo>>,
    failure: Mutex<Option<String>>,
    checkpoint: Mutex<CheckpointState>,
    shutdown: Mutex<bool>,
    wake: Condvar,
}

/// An open database. See the [crate documentation](crate) for an example.
pub struct Database {
    shared: Arc<Shared>,
    checkpointer: Option<JoinHandle<()>>,
}

impl Database {
    /// Opens the database in `config.data_dir`, creating it if neither its data file nor its
    /// log exists, and recovers it after a crash.
    pub fn open(config: DbConfig) -> Result<(Database, OpenReport)> {
        Self::open_with(Arc::new(RealStorage), config)
    }

    /// [`Database::open`] over any storage (the simulated one in tests).
    pub fn open_with(
        storage: Arc<dyn Storage>,
        mut config: DbConfig,
    ) -> Result<(Database, OpenReport)> {
        let began = Instant::now();
        if let Some(cpus) = config.background_cpus.clone() {
            let allowed = CpuList::allowed().map_err(|e| EngineError::Open(e.to_string()))?;
            cpus.check_within(&allowed)
                .map_err(|e| EngineError::Open(e.to_string()))?;
            let keep = move || cpus.keep_current_thread();
            config.log.writer_setup = Some(ThreadSetup(Arc::new(keep)));
        }
        if !storage.is_dir(&config.data_dir) {
            return Err(EngineError::Open(format!(
                "data directory {} does not exist",
                config.data_dir.display()
            )));
        }
        check_files_are_distinct(&config)?;
        check_pool_fits_memory(&config)?;
        let created = prepare_data_file(storage.as_ref(), &config)?;
        // Before anything reads or repairs the log: a second process opening the database
        // while the first still runs (or still closes) would recover from half-written
        // state and could write over it.
        let file = storage.open_file(&config.data_file(), OpenMode::Existing)?;
        file.lock_exclusive()?;
        // What a crashed process wrote and did not sync is read as if it were durable: a
        // checkpoint's meta page (its sync cut short) says where redo starts, and this open
        // releases the log below that; a power cut that then took the page back would leave
        // an older checkpoint whose log is gone. (The log's part: `LogReplay::open`.)
        file.sync_data()?;
        // The log's headers only: redo's walk finds the end of its valid prefix (`LogReplay`).
        let replay = LogReplay::open(storage.clone(), &config.log)?;
        let latest = Meta::read_latest(file.as_ref())?;
        let meta = tie_to_log(file.as_ref(), latest.meta, replay.db_id(), &config)?;
        // Torn pages are restored before anything reads a page.
        let doublewrite = open_doublewrite(storage.as_ref(), &config, replay.db_id(), created)?;
        let restored = match &doublewrite {
            Some(area) => {
                let file_pages = file.len()? / PAGE_SIZE as u64;
                let pages =
                    FIRST_DATA_PAGE..file_pages.saturating_add(recovery::PAGES_PAST_THE_FILE);
                area.restore(file.as_ref(), pages)?
            }
            None => Restored::default(),
        };
        let started_log = Arc::new(OnceLock::new());
        let mut pool = open_pool(file.clone(), &config, started_log.clone())?;
        if let Some(area) = doublewrite {
            pool = pool.with_doublewrite(area);
        }
        let pool = Arc::new(pool);
        let mut tables = Catalog::decode_defs(&meta.catalog)?;
        let scanned = recovery::scan(&pool, &replay, &mut tables, meta.checkpoint_lsn)
            .map_err(|err| name_the_slot_passed_over(err, latest.passed_over.as_deref()))?;
        let mut report = scanned.report;
        report.meta_slot_passed_over = latest.passed_over;
        report.torn_pages_restored = restored.pages;
        report.pages_checked_against_copies = restored.copies;
        let (log, log_recovery) = replay.finish(scanned.walked)?;
        report.pmem_tail_bytes = log_recovery.pmem_bytes;
        let log = Arc::new(log);
        let first_start = started_log.set(log.clone()).is_ok();
        assert!(first_start, "the log is started once, here");
        // Redo is set up before the trees are opened: opening reads each root, which redo
        // may rebuild.
        let pending = Arc::new(PendingPages::new(log.clone(), scanned.pages));
        pool.set_pending_redo(pending.clone());
        pool.bound_page_lsns(log.appended_lsn());
        // A crash between a checkpoint's meta page and its release left the log longer than
        // it needs to be: finish the release (`wait_for_checkpoint_room` counts from the checkpoint).
        log.release(meta.checkpoint_lsn)?;
        let catalog = Catalog::open(tables, &pool)?;
        recovery::rebuild_free_pages(&pool, &catalog, meta.page_count)?;
        // With nothing left (a clean shutdown, or every page the log changed was needed to
        // open the trees), no load need ask.
        let pending = if config.redo_at_first_load && pending.remaining() > 0 {
            Some(pending)
        } else {
            pending.finish(&pool, pending_redo::OPEN_LOADERS)?;
            None
        };
        report.elapsed = began.elapsed();

        let shared = Arc::new(Shared {
            file,
            pool,
            next_version: AtomicU64::new(log.appended_lsn()),
            redo_lsn: AtomicU64::new(meta.checkpoint_lsn),
            log_gate: RwLock::new(()),
            released_lsn: AtomicU64::new(meta.checkpoint_lsn),
            released_weight: AtomicU64::new(meta.checkpoint_lsn),
            replay_weight: ReplayWeight::new(config.record_replay_floor),
            log,
            catalog: RwLock::new(catalog),
            registered: (0..REGISTERED_TABLES).map(|_| OnceLock::new()).collect(),
            next_txn: AtomicU64::new(1),
            counters: Counters::default(),
            failure: Mutex::new(None),
            checkpoint: Mutex::new(CheckpointState {
                seq: meta.seq,
                began: meta.checkpoint_lsn,
                at: Instant::now(),
                // Redo dirtied pages in the pool's first epoch, with changes logged from the
                // checkpoint on.
                epochs: VecDeque::from([Epoch {
                    number: 0,
                    lsn: meta.checkpoint_lsn,
                    weight: meta.checkpoint_lsn,
                }]),
            }),
            checkpoint_requested: AtomicBool::new(false),
            pending_redo: Mutex::new(pending),
            background_redo: Mutex::new(None),
            shutdown: Mutex::new(false),
            wake: Condvar::new(),
            config,
        });
        for table in shared.catalog.read().tables() {
            shared.register(table);
        }
        if report.records > 0 {
            // Recovery's work goes to the data file with the next checkpoint, soon, in the
            // background: a restart answers its first request without waiting for every
            // page redo touched to be written and synced. Until then the state is exactly
            // that of a database that has been running since the checkpoint it started from.
            shared.checkpoint_requested.store(true, Ordering::Release);
        }
        let checkpointer = spawn_checkpointer(&shared)?;
        Ok((
            Database {
                shared,
                checkpointer: Some(checkpointer),
            },
            OpenReport {
                created,
                recovery: report,
            },
        ))
    }

    /// `Err(Stopped)` once the database stopped after a failure (fail-stop): no commit
    /// becomes durable any more, and its pages may hold changes that never will.
    pub fn check_running(&self) -> Result<()> {
        self.shared.check_running()
    }

    /// Starts a transaction.
    pub fn begin(&self) -> Transaction<'_> {
        Transaction::new(&self.shared)
    }

    /// Starts a read-only transaction at isolation level 1 (read committed): it sees only
    /// committed changes, is never aborted by a conflict, and refuses writes. For reads that
    /// need no serializability, like TPC-C's Stock-Level (see "Read-committed transactions"
    /// in `txn.rs`).
    pub fn begin_read_committed(&self) -> Transaction<'_> {
        Transaction::new_read_committed(&self.shared)
    }

    /// Runs `body` in a transaction and commits it, retrying (up to `attempts` times in all)
    /// while it aborts with a retryable error.
    pub fn run<T>(
        &self,
        attempts: usize,
        mut body: impl FnMut(&mut Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut attempt = 1;
        loop {
            let mut txn = self.begin();
            let outcome = body(&mut txn).and_then(|value| txn.commit().map(|()| value));
            match outcome {
                Err(err) if err.is_retryable() && attempt < attempts => {
                    pause_before_retry(attempt);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// The most bytes of keys and values one transaction may write; a larger one fails its
    /// commit with [`EngineError::TooLarge`] and changes nothing. Its log record holds them
    /// and the images of the pages it changes (about three times the data for rows near the
    /// entry size); a record longer than the log takes is logged in parts (`wal.rs`; in
    /// `pmem-log` only where the region has room for them all, else the database stops:
    /// `Shared::append_commit`). Every page it changes stays in the buffer
    /// pool until the record is logged.
    pub fn max_commit_bytes(&self) -> usize {
        self.shared.max_commit_bytes()
    }

    /// The most pages one commit may change, by an estimate made before it changes anything
    /// (`Transaction::check_pages`); a larger one fails with [`EngineError::TooManyPages`]
    /// and changes nothing. Every page a commit changes stays in the buffer pool until its
    /// record is logged, so a commit that changed more pages than the pool has frames could
    /// neither finish nor undo what it did, and would stop the database.
    pub fn max_commit_pages(&self) -> usize {
        self.shared.max_commit_pages()
    }

    /// The processors of the database's background threads ([`DbConfig::background_cpus`]),
    /// for the threads a server adds beside them.
    pub fn background_cpus(&self) -> Option<&CpuList> {
        self.shared.config.background_cpus.as_ref()
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Result<Table> {
        self.shared
            .catalog
            .read()
            .get(name)
            .map(|state| Table::new(state.clone()))
            .ok_or_else(|| EngineError::NoSuchTable(name.to_string()))
    }

    /// The names of all tables.
    pub fn table_names(&self) -> Vec<String> {
        let catalog = self.shared.catalog.read();
        catalog
            .tables()
            .iter()
            .map(|t| t.name().to_string())
            .collect()
    }

    /// Creates a table. Durable (in the commit mode's sense) when this returns.
    pub fn create_table(&self, name: &str, schema: &Schema) -> Result<Table> {
        self.shared.create_table(name, schema)
    }

    /// Writes every changed page, records a checkpoint and lets the log drop what precedes
    /// it. Runs by itself periodically; call it to bound recovery time now.
    pub fn checkpoint(&self) -> Result<()> {
        self.shared.checkpoint()
    }

    /// A checkpoint of the kind the checkpointer runs by itself: pages first changed in the
    /// last [`DbConfig::checkpoint_keep_bytes`] of log stay dirty, and redo will start where
    /// the oldest of them was first changed.
    pub fn checkpoint_keeping_recent(&self) -> Result<()> {
        self.shared.scheduled_checkpoint()
    }

    pub fn stats(&self) -> EngineStats {
        self.shared.stats()
    }

    /// Where the redo of the last restart stands (see [`DbConfig::redo_at_first_load`]).
    pub fn restart_redo(&self) -> RestartRedo {
        self.shared.restart_redo()
    }

    /// The commit mode of the log.
    pub fn commit_mode(&self) -> CommitMode {
        self.shared.log.mode()
    }

    /// The log (for its counters and media).
    pub fn log(&self) -> &LogManager {
        &self.shared.log
    }

    /// The log, for a test's hook that outlives the borrow of the database.
    #[cfg(test)]
    pub(crate) fn shared_log(&self) -> Arc<LogManager> {
        self.shared.log.clone()
    }

    /// Bytes of data in the data file (pages in use or free, times the page size).
    pub fn data_bytes(&self) -> u64 {
        self.shared.pool.page_count() * PAGE_SIZE as u64
    }

    /// Checks every B+tree's structure; returns the number of rows and index entries.
    pub fn check(&self) -> Result<u64> {
        let catalog = self.shared.catalog.read();
        let mut entries = 0;
        for table in catalog.tables() {
            for tree in &table.trees {
                entries += tree.btree.check()?.entries as u64;
            }
        }
        Ok(entries)
    }

    /// A clean shutdown: a final checkpoint, then the log is closed. Dropping the handle does
    /// the same, ignoring errors. A database that stopped after a failure only closes its
    /// log, and returns `Err(Stopped)`: nothing was checkpointed, and the next open recovers.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        *self.shared.shutdown.lock() = true;
        self.shared.wake.notify_all();
        if let Some(handle) = self.checkpointer.take() {
            let _ = handle.join();
        }
        let result = self
            .shared
            .check_running()
            .and_then(|()| self.shared.checkpoint());
        let closed = self.shared.log.close();
        // Table handles may keep the data file and the double-write area open after this;
        // their locks go now (the log's went with its close).
        let _ = self.shared.file.unlock();
        let _ = self.shared.pool.unlock_doublewrite();
        result?;
        Ok(closed?)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if self.checkpointer.is_some() {
            let _ = self.shutdown();
        }
    }
}

/// What a transaction that aborted `failed` times (1, 2, …) in a row does before it runs
/// again: a yield for the first two, then a sleep doubling from 10 µs to at most 1 ms. A
/// committer waits only briefly for a key lock, and a reader's conflict aborts at once, so
/// without this a retrier spins through its attempts while the holder of the lock it needs
/// is preempted — on a loaded machine, a whole time slice.
pub fn pause_before_retry(failed: usize) {
    match failed {
        0 => {}
        1 | 2 => std::thread::yield_now(),
        _ => {
            let wait = Duration::from_micros(10 << (failed - 3).min(7));
            std::thread::sleep(wait.min(Duration::from_millis(1)));
        }
    }
}

/// Makes sure the data file exists (creating a new database if neither it nor the log
/// exists); returns whether it was created.
fn prepare_data_file(storage: &dyn Storage, config: &DbConfig) -> Result<bool> {
    let data = config.data_file();
    let log_exists = log_exists(storage, &config.log);
    if storage.exists(&data) {
        if !log_exists {
            let file = storage.open_file(&data, OpenMode::Existing)?;
            let meta = match Meta::read_latest(file.as_ref()) {
                // Only a meta page found damaged: another page size is refused, not rewritten.
                Err(EngineError::Corrupt(_)) if holds_only_meta_pages(file.as_ref())? => {
                    write_first_meta(file.as_ref())?;
                    storage.sync_dir(&config.data_dir)?;
                    return Ok(true);
                }
                Err(EngineError::Corrupt(why)) => {
                    return Err(EngineError::Open(format!(
                        "{} is not a tailstore data file, or a damaged one, and there is no \
                         log ({}) beside it: left as it is ({why})",
                        data.display(),
                        describe_log(&config.log)
                    )))
                }
                read => read?.meta,
            };
            // Creation writes the data file first: an empty one may just be missing its log.
            // Once the log exists its id is in the data file, and the data file may hold
            // tables and commits that only the log has (before the first checkpoint).
            if meta.seq != 1 || !meta.catalog.is_empty() || meta.db_id.is_some() {
                let named = meta
                    .db_id
                    .map_or(String::new(), |id| format!(" (database {id:016x})"));
                return Err(EngineError::Open(format!(
                    "{}{named} exists but its log ({}) is missing: opening would lose \
                     committed transactions",
                    data.display(),
                    describe_log(&config.log)
                )));
            }
        }
        // A process that crashed while creating the database may have left the name
        // unsynced: a power cut would take the file away under what is committed from now.
        storage.sync_dir(&config.data_dir)?;
        return Ok(false);
    }
    if log_exists {
        return Err(EngineError::Open(format!(
            "found a log ({}) but no data file {}",
            describe_log(&config.log),
            data.display()
        )));
    }
    let file = storage.open_file(&data, OpenMode::CreateIfMissing)?;
    write_first_meta(file.as_ref())?;
    storage.sync_dir(&config.data_dir)?;
    Ok(true)
}

/// Refuses a table whose definition would make the catalog larger than a meta slot holds:
/// created, it would make every checkpoint fail (and stop the database), at every open
/// again, since recovery rebuilds the same catalog from the log. Measured with the largest
/// root page ids, before any page is allocated.
fn check_catalog_room(catalog: &Catalog, name: &str, schema: &Schema) -> Result<()> {
    let roots = vec![u64::MAX; 1 + schema.indexes().len()];
    let def = TableDef::new(catalog.next_id(), name, schema, roots);
    let bytes = catalog.encode_with(Some(&def)).len();
    if bytes > MAX_CATALOG {
        return Err(EngineError::CatalogFull {
            table: name.to_string(),
            bytes,
            limit: MAX_CATALOG,
        });
    }
    Ok(())
}

/// The meta record of a new, empty database (whose log does not exist yet).
fn first_meta() -> Meta {
    Meta {
        seq: 1,
        checkpoint_lsn: LOG_START_LSN,
        page_count: FIRST_DATA_PAGE,
        db_id: None,
        catalog: Vec::new(),
    }
}

/// The meta record `meta`, read from `file`, once it is known to belong with the log of
/// database `log_db_id`: refused if it names another database; if it names none yet (a
/// new database, or a file of meta format 1), the id is recorded as the next checkpoint
/// number, in the other slot, so that a crash while it is written leaves `meta` as it was.
/// Either way the record is written and synced: the sync before this writes only what the
/// page cache holds dirty, and a meta page whose write-back failed (the crashed process
/// stopped on that error) is clean there and not on the disk, which Linux no longer
/// reports to a new descriptor. Written again, it is durable before the log below it is
/// released.
fn tie_to_log(file: &dyn File, meta: Meta, log_db_id: u64, config: &DbConfig) -> Result<Meta> {
    let meta = match meta.db_id {
        Some(id) if id != log_db_id => {
            return Err(EngineError::Open(format!(
                "{} belongs to database {id:016x} and the log ({}) to database \
                 {log_db_id:016x}: not opened (is the log directory or the PMEM file that \
                 of another database?)",
                file.path(),
                describe_log(&config.log)
            )))
        }
        Some(_) => meta,
        None => Meta {
            seq: meta.seq + 1,
            db_id: Some(log_db_id),
            ..meta
        },
    };
    meta.write(file)?;
    Ok(meta)
}

/// Writes the meta page of a new, empty database (and syncs it).
/// An open that found the log not reaching back to its checkpoint says, when it took that
/// checkpoint from the older meta slot because the newer would not read, that this is why:
/// a newer record damaged after its checkpoint released the log below it.
fn name_the_slot_passed_over(err: EngineError, passed_over: Option<&str>) -> EngineError {
    match (err, passed_over) {
        (EngineError::Open(why), Some(slot)) => EngineError::Open(format!(
            "{why} (the open started from the checkpoint in the older meta slot because the \
             newer one does not read back, {slot}; the log below the newer checkpoint was \
             released when it was written)"
        )),
        (err, _) => err,
    }
}

fn write_first_meta(file: &dyn File) -> Result<()> {
    first_meta().write(file)
}

/// Whether `file` is what a crash while creating a database left: within the meta pages,
/// and each 512-byte sector either zeros (not written yet) or what creation writes there
/// (a torn write of the first meta record keeps whole sectors). Creation writes the meta
/// page before it creates the log, and no data page is ever written before the log
/// exists, so such a file never held a committed transaction. Anything else, a file of
/// another program among them, is not rewritten.
fn holds_only_meta_pages(file: &dyn File) -> Result<bool> {
    const SECTOR: usize = 512;
    let len = file.len()?;
    if len > FIRST_DATA_PAGE * PAGE_SIZE as u64 {
        return Ok(false);
    }
    let mut found = vec![0u8; len as usize];
    if !file.read_exact_at(0, &mut found)? {
        return Ok(false);
    }
    let mut expected = vec![0u8; FIRST_DATA_PAGE as usize * PAGE_SIZE];
    for page in first_meta().pages()? {
        let at = page.page_id().offset() as usize;
        expected[at..at + PAGE_SIZE].copy_from_slice(page.bytes());
    }
    let sectors = found.chunks(SECTOR).zip(expected.chunks(SECTOR));
    Ok(sectors
        .into_iter()
        .all(|(got, written)| got.iter().all(|&b| b == 0) || got == &written[..got.len()]))
}

fn log_exists(storage: &dyn Storage, log: &LogConfig) -> bool {
    match log.mode {
        CommitMode::PmemLog => log.pmem_path.as_deref().is_some_and(|p| storage.exists(p)),
        _ => storage.exists(&log.log_file()),
    }
}

fn describe_log(log: &LogConfig) -> String {
    match (log.mode, &log.pmem_path) {
        (CommitMode::PmemLog, Some(p)) => p.display().to_string(),
        _ => log.log_file().display().to_string(),
    }
}

/// Refuses a buffer pool larger than the machine's memory before anything is created: its
/// frames are allocated as it opens, and a mistyped size (or a default derived from a
/// mistyped warehouse count) would take every byte of memory, or abort the process.
fn check_pool_fits_memory(config: &DbConfig) -> Result<()> {
    let memory = physical_memory_bytes();
    let pool = config.buffer_pool_bytes as u64;
    if memory > 0 && pool > memory {
        return Err(EngineError::Open(format!(
            "a buffer pool of {} MiB is larger than this machine's memory ({} MiB)",
            pool >> 20,
            memory >> 20
        )));
    }
    Ok(())
}

/// This machine's memory in bytes (0 if the kernel does not say).
pub fn physical_memory_bytes() -> u64 {
    let info = rustix::system::sysinfo();
    u64::from(info.mem_unit).saturating_mul(info.totalram)
}

/// Refuses a PMEM file (or its double-write area) that names the data file or the log file:
/// mapped as a ring, either would be written over. Paths compared as given, made absolute.
fn check_files_are_distinct(config: &DbConfig) -> Result<()> {
    let Some(pmem) = config.log.pmem_path.as_deref() else {
        return Ok(());
    };
    let absolute = |path: &std::path::Path| std::path::absolute(path).unwrap_or(path.into());
    let database_files = [
        ("data file", config.data_file()),
        ("log file", config.log.log_file()),
    ];
    let pmem_files = std::iter::once(pmem.to_path_buf()).chain(config.doublewrite_file());
    for pmem_file in pmem_files {
        for (what, file) in &database_files {
            if absolute(&pmem_file) == absolute(file) {
                return Err(EngineError::Open(format!(
                    "the PMEM file {} is the database's {what}: give the PMEM file a path of \
                     its own",
                    pmem_file.display()
                )));
            }
        }
    }
    Ok(())
}

/// The double-write area, in the modes that have one (see [`DbConfig::doublewrite_file`]):
/// created with `config.doublewrite_slots` slots if absent.
fn open_doublewrite(
    storage: &dyn Storage,
    config: &DbConfig,
    db_id: u64,
    new_database: bool,
) -> Result<Option<Arc<DoubleWrite>>> {
    let Some(path) = config.doublewrite_file() else {
        return Ok(None);
    };
    // An existing area keeps its size: its header says how many slots it has.
    let len = doublewrite::area_bytes(config.doublewrite_slots.max(2));
    let region = storage.map_or_create_region(&path, len)?;
    let area = DoubleWrite::open(region, &path.display().to_string(), db_id, new_database)?;
    Ok(Some(Arc::new(area)))
}

/// The pool, with the write-ahead rule in every commit mode (`async` included: see
/// `force_durable`) once `log` is started. Before that only redo changes pages, stamping each
/// with the end of a record its walk has verified, which the walk made durable before it
/// handed it over (`tailstore_log::LogReplay::records_from`: a crashed process may have left
/// it written and not synced): a page that redo's pages push out may be written at once.
fn open_pool(
    file: Arc<dyn File>,
    config: &DbConfig,
    log: Arc<OnceLock<Arc<LogManager>>>,
) -> Result<BufferPool> {
    let frames = (config.buffer_pool_bytes / PAGE_SIZE).max(16);
    let hook = Box::new(move |lsn| match log.get() {
        Some(log) => log.force_durable(lsn).map_err(|e| e.into()),
        None => Ok(()),
    });
    let pool = BufferPool::new(file, frames, hook)?.with_plants(&config.pool_plants);
    if pool.page_count() < FIRST_DATA_PAGE {
        pool.set_allocation(FIRST_DATA_PAGE, Vec::new());
    }
    Ok(pool)
}

fn spawn_checkpointer(shared: &Arc<Shared>) -> Result<JoinHandle<()>> {
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let cpus = shared.config.background_cpus.clone();
    std::thread::Builder::new()
        .name("tailstore-checkpointer".into())
        .spawn(move || {
            if let Some(cpus) = &cpus {
                cpus.keep_current_thread();
            }
            run_checkpointer(weak)
        })
        .map_err(|e| EngineError::Open(format!("cannot start the checkpointer thread: {e}")))
}

fn run_checkpointer(weak: Weak<Shared>) {
    loop {
        let Some(shared) = weak.upgrade() else { return };
        {
            let mut stop = shared.shutdown.lock();
            if *stop {
                return;
            }
            shared.wake.wait_for(&mut stop, Duration::from_millis(50));
            if *stop {
                return;
            }
        }
        if shared.checkpoint_due() {
            if let Err(err) = shared.scheduled_checkpoint() {
                eprintln!("tailstore: checkpoint failed: {err}");
                return;
            }
        }
    }
}

impl Shared {
    /// Adds `table` to [`Shared::registered`] if its id fits.
    fn register(&self, table: &Arc<TableState>) {
        if let Some(slot) = self.registered.get(table.def.id as usize) {
            // Set at most once: a table id is never reused.
            let _ = slot.set(table.clone());
        }
    }

    /// `table` borrowed for the life of the database, if it is this database's and
    /// registered.
    pub fn registered(&self, table: &Arc<TableState>) -> Option<&TableState> {
        let slot = self.registered.get(table.def.id as usize)?.get()?;
        Arc::ptr_eq(slot, table).then_some(&**slot)
    }

    /// `Err(Stopped)` after a failure (fail-stop).
    /// See [`Database::max_commit_bytes`].
    pub fn max_commit_bytes(&self) -> usize {
        let log = self.log.max_record_bytes() as usize / 4;
        let pool = self.pool.capacity() * tailstore_storage::PAGE_SIZE / 8;
        log.min(pool)
    }

    /// See [`Database::max_commit_pages`]: an eighth of the frames, and at least two, is
    /// left to the pages other transactions, readers and the checkpointer hold meanwhile.
    pub fn max_commit_pages(&self) -> usize {
        let frames = self.pool.capacity();
        frames - (frames / 8).max(2)
    }

    pub fn check_running(&self) -> Result<()> {
        if let Some(cause) = self.failure.lock().as_ref() {
            return Err(EngineError::Stopped(cause.clone()));
        }
        // The log may have stopped on its writer thread's failure (`buffer` mode's copy of
        // the PMEM ring to the log file) with no commit waiting to report it.
        self.log.check().map_err(|e| self.fail_stop(e.into()))
    }

    /// Stops all later changes: the in-memory state may differ from what the log says.
    pub fn fail_stop(&self, err: EngineError) -> EngineError {
        // The pool may have stopped first, on a failed write outside any change (a read
        // that evicted a dirty page), or the log, on a failed flush no change waited for:
        // that is this database's fail-stop too, and reported as such, with their cause.
        let err = match err {
            EngineError::Storage(StorageError::Stopped { cause })
            | EngineError::Log(LogError::Stopped { cause }) => EngineError::Stopped(cause),
            other => other,
        };
        let cause = match &err {
            EngineError::Stopped(cause) => cause.clone(),
            other => other.to_string(),
        };
        self.failure.lock().get_or_insert_with(|| cause.clone());
        self.pool.stop(cause);
        err
    }

    fn checkpoint_due(&self) -> bool {
        if self.checkpoint_requested.load(Ordering::Acquire) {
            return true;
        }
        let state = self.checkpoint.lock();
        let by_log =
            self.weight_now().saturating_sub(state.began) >= self.config.checkpoint_log_bytes;
        let by_time = self
            .config
            .checkpoint_interval
            .is_some_and(|every| state.at.elapsed() >= every);
        by_log || by_time
    }

    /// See [`Database::checkpoint`]: writes every dirty page.
    pub fn checkpoint(&self) -> Result<()> {
        self.checkpoint_if(|| true, 0)
    }

    /// See [`Database::checkpoint_keeping_recent`].
    fn scheduled_checkpoint(&self) -> Result<()> {
        self.checkpoint_if(|| true, self.config.checkpoint_keep_bytes)
    }

    /// Runs a checkpoint if `needed` still says so once no other checkpoint runs (writers
    /// that waited for the same one do not each run another), leaving dirty the pages first
    /// changed in the last `keep` bytes of log (in whole epochs).
    ///
    /// The argument: the checkpoint picks its LSN `l` with no append in flight
    /// (`log_gate`), publishes it as `redo_lsn` and starts a new epoch of the pool there.
    /// It keeps the epochs that began at `l - keep` or later (the new one always), and
    /// writes and syncs every page dirty since an older one: then every change logged
    /// before the oldest kept epoch's position `r` is in the data file
    /// ([`BufferPool::begin_epoch`]). Only then does the meta page say that redo may
    /// start at `r`, and only then is the log below `r` released. With `keep` 0 that is
    /// `l` itself and every page dirty at `l` is written. Without a double-write area, a
    /// page's first change in each epoch logs a full image of it (`txn.rs`, against
    /// `redo_lsn`), so every page a crash may have torn since `r` has an image at or
    /// after `r`: a page written after the sync is dirty since a kept epoch, and its first
    /// change in that epoch was imaged.
    fn checkpoint_if(&self, needed: impl Fn() -> bool, keep: u64) -> Result<()> {
        let mut state = self.checkpoint.lock();
        if !needed() {
            return Ok(());
        }
        self.check_running()?;
        self.checkpoint_requested.store(false, Ordering::Release);
        let began = Instant::now();
        // The pages recovery left pending hold changes logged below any position this
        // checkpoint can pick, and only the log has them.
        self.finish_pending_redo().map_err(|e| self.fail_stop(e))?;
        let now = {
            let _appends = self.log_gate.write();
            let lsn = self.log.appended_lsn();
            self.redo_lsn.store(lsn, Ordering::SeqCst);
            let now = Epoch {
                number: self.pool.begin_epoch(),
                lsn,
                weight: self.replay_weight.at(lsn),
            };
            // An epoch that began where the last one did (nothing logged in between, as
            // between the timed checkpoints of an idle database) adds nothing to keep.
            if state.epochs.back().is_none_or(|last| last.lsn < lsn) {
                state.epochs.push_back(now);
            }
            now
        };
        // Dropping an epoch only makes this checkpoint write more, so the list's length
        // may be bounded too. The newest epoch is never dropped: it began now.
        while state.epochs.len() > MAX_KEPT_EPOCHS
            || state.epochs[0].weight < now.weight.saturating_sub(keep)
        {
            state.epochs.pop_front();
        }
        let redo_from = state.epochs[0];
        self.pool
            .flush_dirty_before(redo_from.number)
            .map_err(|e| self.fail_stop(e.into()))?;
        // The meta sends a restart's redo to `redo_from.lsn`, so the log must keep everything
        // below it whatever crashes next. The pages just written waited for the records that
        // last changed them (the write-ahead rule), which covers this in practice; waiting
        // here states it, independently of which pages happened to be dirty.
        self.log
            .force_durable(redo_from.lsn)
            .map_err(|e| self.fail_stop(e.into()))?;
        interleave::reached(Point::CheckpointFlushed);
        // The meta is what makes the log below `redo_from` unneeded: not written once any
        // page write or sync of the pool has failed (see `BufferPool::flush_dirty_before`).
        self.pool
            .check_running()
            .map_err(|e| self.fail_stop(e.into()))?;
        let (catalog, catalog_logged_to) = self.catalog.read().snapshot();
        self.log
            .force_durable(catalog_logged_to)
            .map_err(|e| self.fail_stop(e.into()))?;
        let meta = Meta {
            seq: state.seq + 1,
            checkpoint_lsn: redo_from.lsn,
            page_count: self.pool.page_count(),
            db_id: Some(self.log.db_id()),
            catalog,
        };
        meta.write(self.file.as_ref())
            .map_err(|e| self.fail_stop(e))?;
        state.seq = meta.seq;
        state.began = now.weight;
        state.at = Instant::now();
        self.log
            .release(redo_from.lsn)
            .map_err(|e| self.fail_stop(e.into()))?;
        self.released_lsn.store(redo_from.lsn, Ordering::Release);
        self.released_weight
            .store(redo_from.weight, Ordering::Release);
        let c = &self.counters;
        c.checkpoints.fetch_add(1, Ordering::Relaxed);
        c.checkpoint_ns
            .fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Redoes every page recovery left to its first load, on this thread (the
    /// checkpointer's, for the first checkpoint after a restart).
    fn finish_pending_redo(&self) -> Result<()> {
        // Not under the lock, which `stats` takes: the redo may take a second.
        let Some(pages) = self.pending_redo.lock().clone() else {
            return Ok(());
        };
        let began = Instant::now();
        let left = pages.remaining() as u64;
        pages.finish(&self.pool, 1)?;
        *self.background_redo.lock() = Some(BackgroundRedo {
            pages: left,
            time: began.elapsed(),
        });
        *self.pending_redo.lock() = None;
        Ok(())
    }

    fn restart_redo(&self) -> RestartRedo {
        // Pending first: the redo's result is set before the pending pages are cleared, so
        // once they are, the result is final.
        if let Some(pages) = self.pending_redo.lock().as_ref() {
            return RestartRedo::Pending {
                pages_left: pages.remaining() as u64,
            };
        }
        match *self.background_redo.lock() {
            Some(done) => RestartRedo::Finished(done),
            None => RestartRedo::AtOpen,
        }
    }

    fn create_table(&self, name: &str, schema: &Schema) -> Result<Table> {
        self.check_running()?;
        self.wait_for_checkpoint_room(0)?;
        if schema.indexes().len() > MAX_INDEXES {
            return Err(EngineError::Open(format!(
                "table `{name}` has {} indexes; at most {MAX_INDEXES} are supported",
                schema.indexes().len()
            )));
        }
        let mut catalog = self.catalog.write();
        if catalog.get(name).is_some() {
            return Err(EngineError::TableExists(name.to_string()));
        }
        check_catalog_room(&catalog, name, schema)?;
        let intent = self.log.intend_commit();
        let mut redo = tailstore_storage::Redo::new();
        let mut roots = Vec::new();
        for _ in 0..=schema.indexes().len() {
            let tree = tailstore_storage::BTree::create_logged(self.pool.clone(), &mut redo)
                .map_err(|e| self.fail_stop(e.into()))?;
            roots.push(tree.root().0);
        }
        let def = TableDef::new(catalog.next_id(), name, schema, roots);
        let payload = wal::create_table_record(&encode_def(&def), redo.bytes());
        // Only images (new roots): no full-page image needed, but appends hold the gate.
        let lsn = {
            let append = AppendGate::Shared(self.log_gate.read());
            self.log_and_stamp(&payload, &redo, &append)?
        };
        let state = TableState::open(def, &self.pool)?;
        catalog.add_logged(state, lsn);
        let table = catalog.get(name).map(|t| {
            self.register(t);
            Table::new(t.clone())
        });
        drop(catalog);
        intent.wait(lsn)?;
        table.ok_or_else(|| EngineError::NoSuchTable(name.to_string()))
    }

    /// `pmem-log` keeps the whole log in a fixed region that only a checkpoint frees, and an
    /// append that finds it full waits for room. A writer waiting there holds pages it
    /// changed but has not stamped (and tree latches, and the log gate), which the checkpoint
    /// must write before it can free anything: a deadlock. So every writer calls this first,
    /// holding nothing: while less than a quarter of the region is free, it waits for the
    /// checkpoint that is running, or runs one itself. The quarter left is room for the
    /// records of the writers already past here. The other modes' logs grow, but a restart
    /// replays everything since the last completed checkpoint, so with
    /// [`DbConfig::max_replay_bytes`] writers wait the same way once that much is unreleased:
    /// when checkpoints fall behind the writes, the writes slow to their pace.
    ///
    /// A `pmem-log` transaction of more than [`LARGE_WRITES_SHARE`] of the region in writes
    /// (`write_bytes`) waits until three quarters of the region are free: its record may be
    /// several times its writes (a merge logs page images: one DEL of 150,000 keys, 11 MB of
    /// writes, made a 73 MB record), and a record longer than the log takes is appended in
    /// parts only where the region has room for them all ([`Shared::append_commit`]).
    pub fn wait_for_checkpoint_room(&self, write_bytes: usize) -> Result<()> {
        let Some(mut limit) = self.unreleased_limit() else {
            return Ok(());
        };
        if self.log.mode() == CommitMode::PmemLog {
            let capacity = self.config.log.pmem_log_bytes as u64;
            if write_bytes as u64 > capacity / LARGE_WRITES_SHARE {
                limit = limit.min(capacity / 4);
            }
        }
        if self.weight_since_checkpoint() <= limit {
            return Ok(());
        }
        let began = Instant::now();
        while self.weight_since_checkpoint() > limit {
            // Keeping at most half the bound, one checkpoint brings the log under it
            // unless the writes during the checkpoint fill the other half.
            let keep = self.config.checkpoint_keep_bytes.min(limit / 2);
            self.checkpoint_if(|| self.weight_since_checkpoint() > limit, keep)?;
        }
        let c = &self.counters;
        c.checkpoint_room_waits.fetch_add(1, Ordering::Relaxed);
        c.checkpoint_room_wait_ns
            .fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Log bytes appended past the last completed checkpoint.
    fn log_since_checkpoint(&self) -> u64 {
        let released = self.released_lsn.load(Ordering::Acquire);
        self.log.appended_lsn().saturating_sub(released)
    }

    /// The replay weight of the log appended past the last completed checkpoint.
    fn weight_since_checkpoint(&self) -> u64 {
        let released = self.released_weight.load(Ordering::Acquire);
        self.weight_now().saturating_sub(released)
    }

    /// The replay weight of the log appended so far.
    fn weight_now(&self) -> u64 {
        self.replay_weight.at(self.log.appended_lsn())
    }

    /// The replay weight past the last completed checkpoint beyond which writers wait. A
    /// weight is never less than its bytes, so `pmem-log`'s region bound holds in bytes too.
    fn unreleased_limit(&self) -> Option<u64> {
        let region = (self.log.mode() == CommitMode::PmemLog).then(|| {
            let capacity = self.config.log.pmem_log_bytes as u64;
            capacity - capacity / 4
        });
        match (region, self.config.max_replay_bytes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Appends `payload` (which holds `redo`) and stamps the pages `redo` touched with the
    /// end of the record; the caller holds the log gate (`gate`). Any failure stops the
    /// database: the pages changed in memory are not described by the log.
    pub(crate) fn log_and_stamp(
        &self,
        payload: &[u8],
        redo: &tailstore_storage::Redo,
        gate: &AppendGate<'_>,
    ) -> Result<u64> {
        let placed = self.place_and_stamp(payload, redo, gate)?;
        self.write_placed(placed, payload)
    }

    /// The part of [`Shared::log_and_stamp`] that must happen under the trees' latches:
    /// the record's place in the log, and the touched pages stamped with its end. The
    /// record itself may be written after the latches are released ([`Shared::write_placed`];
    /// `wal.rs`, "Reserve under the latches, write after them").
    pub(crate) fn place_and_stamp<'a>(
        &'a self,
        payload: &[u8],
        redo: &tailstore_storage::Redo,
        gate: &AppendGate<'_>,
    ) -> Result<Placed<'a>> {
        let placed = self.place_commit(payload, gate)?;
        let lsn = placed.end();
        for &id in redo.touched() {
            self.pool
                .stamp(id, lsn)
                .map_err(|e| self.fail_stop(e.into()))?;
        }
        Ok(placed)
    }

    /// Writes a record [`Shared::place_and_stamp`] placed; returns its end.
    pub(crate) fn write_placed(&self, placed: Placed<'_>, payload: &[u8]) -> Result<u64> {
        match placed {
            Placed::Written(end) => Ok(end),
            Placed::Reserved(place) => self
                .log
                .fill(place, payload)
                .map_err(|e| self.fail_stop(e.into())),
        }
    }

    /// A commit of one record is reserved; one in parts is appended whole here, as each
    /// part must be written before the next is reserved (an unwritten part would be a
    /// hole that the next part's wait for ring room could wait behind forever).
    fn place_commit<'a>(&'a self, payload: &[u8], gate: &AppendGate<'_>) -> Result<Placed<'a>> {
        if self.goes_in_parts(payload) {
            return self.append_commit(payload, gate).map(Placed::Written);
        }
        let place = self
            .log
            .reserve(payload.len())
            .map_err(|e| self.fail_stop(e.into()))?;
        self.replay_weight.count(payload.len());
        Ok(Placed::Reserved(place))
    }

    /// The log gate as a commit's append of `payload_len` bytes holds it: shared with the
    /// other appends, or alone for a `pmem-log` commit in parts (see
    /// [`Shared::append_commit`]). Taken after the commit's changes are applied, before
    /// the pages are stamped.
    pub(crate) fn append_gate(&self, payload_len: usize) -> AppendGate<'_> {
        if self.log.mode() == CommitMode::PmemLog && payload_len > self.log.max_payload_bytes() {
            AppendGate::Alone(self.log_gate.write())
        } else {
            AppendGate::Shared(self.log_gate.read())
        }
    }

    /// Appends `payload` as one record or, for a commit longer than the log takes, as parts
    /// (`wal.rs`, "Commits in parts"); returns the end of the last. The caller holds the
    /// log gate, which keeps a checkpoint's position off the parts.
    ///
    /// In `pmem-log` an append that finds the region full waits for a checkpoint, which
    /// cannot finish while this commit's pages are unstamped: between parts, that would be
    /// a deadlock. So there the caller holds the gate alone ([`Shared::append_gate`]): no
    /// other append takes room meanwhile, and the parts are appended only if the region has
    /// room for them all now; else the database stops, as it did for every such commit
    /// before parts. [`Shared::wait_for_checkpoint_room`] makes that room likely.
    fn append_commit(&self, payload: &[u8], gate: &AppendGate<'_>) -> Result<u64> {
        assert!(
            self.goes_in_parts(payload),
            "a commit in parts is longer than a record"
        );
        let max_payload = self.log.max_payload_bytes();
        let mut parts = wal::split_commit(payload, max_payload).map_err(|e| self.fail_stop(e))?;
        if let [whole] = &parts[..] {
            return self.append_record(whole);
        }
        if self.log.mode() == CommitMode::PmemLog {
            let needed = parts.iter().map(|part| record_size(part.len())).sum();
            // Shared, other appends could take the room between the parts.
            let alone = matches!(gate, AppendGate::Alone(_));
            let room = if alone { self.log.room_bytes() } else { 0 };
            if needed > room {
                return Err(self.fail_stop(EngineError::NoRoomForParts { needed, room }));
            }
        }
        let first_end = self.append_record(&parts[0])?;
        let mut end = first_end;
        for part in &mut parts[1..] {
            interleave::reached(Point::BetweenCommitParts);
            wal::name_first_part(part, first_end);
            end = self.append_record(part)?;
        }
        self.counters
            .commits_in_parts
            .fetch_add(1, Ordering::Relaxed);
        Ok(end)
    }

    /// A commit record longer than the log takes is appended in parts (`wal.rs`).
    fn goes_in_parts(&self, payload: &[u8]) -> bool {
        payload.len() > self.log.max_payload_bytes() && wal::is_commit(payload)
    }

    fn append_record(&self, payload: &[u8]) -> Result<u64> {
        let end = self
            .log
            .append(payload)
            .map_err(|e| self.fail_stop(e.into()))?;
        self.replay_weight.count(payload.len());
        Ok(end)
    }

    fn stats(&self) -> EngineStats {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EngineStats {
            pool: self.pool.stats(),
            log: self.log.counters(),
            pool_pages: self.pool.capacity() as u64,
            data_pages: self.pool.page_count(),
            commits: c.commits.get(),
            rollbacks: c.rollbacks.get(),
            aborts: [load(&c.aborts[0]), load(&c.aborts[1]), load(&c.aborts[2])],
            commits_in_parts: load(&c.commits_in_parts),
            checkpoints: load(&c.checkpoints),
            checkpoint_time: Duration::from_nanos(load(&c.checkpoint_ns)),
            log_since_checkpoint: self.log_since_checkpoint(),
            weight_since_checkpoint: self.weight_since_checkpoint(),
            log_since_checkpoint_limit: self.unreleased_limit(),
            checkpoint_room_waits: load(&c.checkpoint_room_waits),
            checkpoint_room_wait_time: Duration::from_nanos(load(&c.checkpoint_room_wait_ns)),
            read_contention: self.read_contention(),
            restart_redo: self.restart_redo(),
        }
    }

    fn read_contention(&self) -> ReadContention {
        let mut sum = ReadContention::default();
        for table in self.catalog.read().tables() {
            for tree in &table.trees {
                sum.add(tree.btree.read_contention());
            }
        }
        sum
    }

    pub fn count_abort(&self, cause: AbortCause) -> EngineError {
        let i = AbortCause::ALL
            .iter()
            .position(|&c| c == cause)
            .unwrap_or(0);
        self.counters.aborts[i].fetch_add(1, Ordering::Relaxed);
        EngineError::Aborted { cause }
    }
}
