//! Crash recovery on the simulated storage (`SimStorage`), plus a larger-than-memory run, fault
//! injection (fail-stop), torn and corrupt pages, and bad inputs.
//!
//! The crash tests run a random workload of transactions (inserts, updates and deletes, which
//! change both secondary indexes) with a 16-page buffer pool, so that pages are evicted all
//! the time, and checkpoints at chosen points only (`checkpoint_interval = None`). They take
//! restart images of the storage — a process crash (everything written survives) or a power
//! cut (only what was synced or persisted survives, plus a random subset of the rest) — at many
//! points, reopen each image and check that the database holds exactly the acknowledged
//! commits: rows, both indexes, tree structure. Other points kill the medium in the middle of
//! an operation (`SimStorage::crash_after`): a commit, an eviction, a checkpoint.

mod support;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tailstore_engine::{Database, EngineError, KeyRange, RestartRedo, Table, DATA_FILE_NAME};
use tailstore_log::{CommitMode, Plant as LogPlant};
use tailstore_media::sim::SimStorage;
use tailstore_storage::page::HEADER_SIZE;
use tailstore_storage::{Plant, ScanDirection, StorageError, PAGE_SIZE};

use support::{
    crash_and_drop, image, items_schema, key, mix, open_sim, sim_config, try_verify, verify, Crash,
    Item, Model, TempDb, SIM_DATA_FILE, SIM_PMEM,
};

/// Frames of the pool in the crash tests: small, so that pages are evicted constantly, yet
/// enough for the pages one transaction changes (they stay in the pool until the commit
/// record is appended: see
/// `transaction_changing_more_pages_than_the_pool_holds_is_refused_without_a_change`).
/// Sized in bytes (256 KiB) because the workloads are: rows of the same sizes fill half as
/// many pages twice as large.
/// The log file of the simulated databases (in `fsync` mode, the whole log).
const SIM_LOG_FILE: &str = "/db/tailstore.log";

const SMALL_POOL: usize = (256 << 10) / PAGE_SIZE;

// ---------------------------------------------------------------------------------------------
// The workload.

/// A random workload of transactions on `items` and its model.
struct Workload {
    rng: StdRng,
    /// The committed state.
    model: Model,
    next_val: i64,
    /// Transactions committed.
    commits: u64,
    /// The log's end at the last checkpoint taken by `support::checkpoint_if_log_grew`.
    checkpointed_at: u64,
}

/// A transaction that failed: the error and the state had it committed.
#[derive(Debug)]
struct Failed {
    error: EngineError,
    would_be: Model,
}

impl Workload {
    fn new(seed: u64) -> Workload {
        Workload {
            rng: StdRng::seed_from_u64(seed),
            model: Model::new(),
            next_val: 0,
            commits: 0,
            checkpointed_at: 0,
        }
    }

    fn note_len(&mut self) -> usize {
        match self.rng.gen_range(0..10) {
            0 => 0,
            1..=3 => self.rng.gen_range(400..=support::MAX_NOTE),
            _ => self.rng.gen_range(100..400),
        }
    }

    fn new_val(&mut self) -> i64 {
        self.next_val += 1;
        self.next_val
    }

    fn random_id(&mut self, rows: &Model) -> Option<i64> {
        if rows.is_empty() {
            return None;
        }
        let n = self.rng.gen_range(0..rows.len());
        rows.keys().nth(n).copied()
    }

    /// Runs one transaction: 1–4 random changes, or (one in ten, one in two while the table
    /// is small) 8–16 rows with adjacent ids in one group. Returns whether it committed (one in fifteen rolls back).
    fn step(&mut self, db: &Database, table: &Table) -> Result<bool, Box<Failed>> {
        let mut next = self.model.clone();
        let mut txn = db.begin();
        let fail = |error: EngineError, next: &Model| {
            Box::new(Failed {
                error,
                would_be: next.clone(),
            })
        };
        // Mostly bulk while the table is small, so that it soon outgrows the pool.
        let bulk_odds = if next.len() < 1_200 { 2 } else { 10 };
        let (bulk, changes) = if self.rng.gen_ratio(1, bulk_odds) {
            (true, self.rng.gen_range(8..=16))
        } else {
            (false, self.rng.gen_range(1..=4))
        };
        if bulk {
            let (base, grp) = (self.rng.gen_range(0..4_000), self.rng.gen_range(0..8));
            for id in base..base + changes {
                let item = Item::new(id, grp, self.new_val(), self.note_len());
                let result = if next.contains_key(&id) {
                    txn.update(table, &item.values())
                } else {
                    txn.insert(table, &item.values())
                };
                result.map_err(|e| fail(e, &next))?;
                next.insert(id, item);
            }
        }
        for _ in 0..if bulk { 0 } else { changes } {
            let dice = self.rng.gen_range(0..100);
            let existing = self.random_id(&next);
            if dice < 65 || next.len() < 30 {
                let id = self.rng.gen_range(0..4_000);
                let (grp, val, note) = (self.rng.gen_range(0..8), self.new_val(), self.note_len());
                let item = Item::new(id, grp, val, note);
                let result = if next.contains_key(&id) {
                    txn.update(table, &item.values())
                } else {
                    txn.insert(table, &item.values())
                };
                result.map_err(|e| fail(e, &next))?;
                next.insert(id, item);
            } else if dice < 80 {
                let old = next[&existing.expect("rows exist")].clone();
                let val = if self.rng.gen_bool(0.5) {
                    self.new_val()
                } else {
                    old.val
                };
                let item = Item::new(old.id, self.rng.gen_range(0..8), val, self.note_len());
                txn.update(table, &item.values())
                    .map_err(|e| fail(e, &next))?;
                next.insert(old.id, item);
            } else {
                let id = existing.expect("rows exist");
                let found = txn.delete(table, &key(id)).map_err(|e| fail(e, &next))?;
                assert!(found, "row {id} of the model is missing");
                next.remove(&id);
            }
        }
        if self.rng.gen_ratio(1, 15) {
            txn.rollback();
            return Ok(false);
        }
        txn.commit().map_err(|e| fail(e, &next))?;
        self.model = next;
        self.commits += 1;
        support::checkpoint_if_log_grew(db, &mut self.checkpointed_at)
            .map_err(|e| fail(e, &self.model))?;
        Ok(true)
    }
}

fn create_items(db: &Database) -> Table {
    db.create_table("items", &items_schema())
        .expect("create table")
}

/// Opens `storage` after a crash and checks it holds `model`; returns the open database.
fn recover(storage: &SimStorage, mode: CommitMode, model: &Model, what: &str) -> (Database, Table) {
    let (db, _report) = open_sim(storage, &sim_config(mode, SMALL_POOL))
        .unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
    let table = db.table("items").unwrap_or_else(|e| panic!("{what}: {e}"));
    verify(&db, &table, model, what);
    (db, table)
}

// ---------------------------------------------------------------------------------------------
// Restart images taken while the database runs.

/// Transactions of a run, and a restart image every `IMAGE_EVERY` of them and right after
/// every checkpoint.
const TXNS: usize = 240;
const IMAGE_EVERY: usize = 10;
/// `pmem-log` takes fewer: every open wipes the free part of the simulated PMEM region,
/// which the simulator makes slow.
const PMEM_LOG_IMAGE_EVERY: usize = 20;
/// Checkpoints after these transactions (so that images come from before the first one,
/// right after one, and long after one).
const CHECKPOINTS_AT: [usize; 4] = [40, 41, 125, 202];

/// Checkpoints of the runs that keep recent pages dirty ([`crash_images_with`]):
/// every this many transactions, keeping about this much log.
const KEEPING_EVERY: usize = 15;
const KEEP_BYTES: u64 = 160 << 10;

/// What a run's checkpoints did, for the runs that keep recent pages dirty: how many left
/// log for redo (kept an epoch), and how many moved redo's start on.
#[derive(Default)]
struct Kept {
    kept: usize,
    advanced: usize,
}

impl Kept {
    fn checkpoint(&mut self, db: &Database) {
        let before = db.stats().log_since_checkpoint;
        db.checkpoint_keeping_recent().expect("checkpoint");
        let after = db.stats().log_since_checkpoint;
        self.kept += usize::from(after > 0);
        self.advanced += usize::from(after < before);
    }

    /// Checks the run had both kinds, so that recovery was tested from a redo start that
    /// lags the last checkpoint.
    fn check(&self, what: &str) {
        assert!(
            self.kept >= 3 && self.advanced >= 3,
            "{what}: of the checkpoints, {} kept log to replay and {} moved redo's start on",
            self.kept,
            self.advanced
        );
    }
}

fn crash_images(mode: CommitMode, seed: u64) {
    crash_images_with(mode, seed, 0);
}

/// Like [`crash_images`], with checkpoints that write only the pages dirty since more than
/// `keep` bytes of log ago (every [`KEEPING_EVERY`] transactions) when `keep` is not 0.
fn crash_images_with(mode: CommitMode, seed: u64, keep: u64) {
    let mut config = sim_config(mode, SMALL_POOL);
    config.checkpoint_keep_bytes = keep;
    let mut kept = Kept::default();
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &config).expect("create");
    let table = create_items(&db);
    let mut workload = Workload::new(seed);
    let mut images = Vec::new();
    let every = match mode {
        CommitMode::PmemLog => PMEM_LOG_IMAGE_EVERY,
        _ => IMAGE_EVERY,
    };
    for i in 0..TXNS {
        if let Err(failed) = workload.step(&db, &table) {
            panic!("{mode}: transaction {i} failed: {}", failed.error);
        }
        let checkpoint_now = if keep == 0 {
            CHECKPOINTS_AT.contains(&i)
        } else {
            i % KEEPING_EVERY == KEEPING_EVERY - 1
        };
        if checkpoint_now && keep == 0 {
            db.checkpoint().expect("checkpoint");
        } else if checkpoint_now {
            kept.checkpoint(&db);
        }
        if i % every == every - 1 || checkpoint_now {
            let crash = if images.len() % 4 == 0 {
                Crash::Process
            } else {
                Crash::PowerCut(mix(seed, i as u64))
            };
            images.push((i, crash, image(&storage, crash), workload.model.clone()));
        }
    }
    let stats = db.stats();
    assert!(
        stats.pool.evictions > 100,
        "{mode}: the pool should evict constantly ({:?})",
        stats.pool
    );
    assert!(stats.data_pages > 2 * SMALL_POOL as u64);
    if keep > 0 {
        kept.check(&format!("{mode}, seed {seed}"));
    }
    db.close().expect("close");
    let final_model = workload.model.clone();
    images.push((TXNS, Crash::Process, storage, final_model));

    for (n, (i, crash, storage, model)) in images.into_iter().enumerate() {
        let what = format!("{mode}, seed {seed}: {crash:?} after transaction {i}");
        let (db, table) = recover(&storage, mode, &model, &what);
        // Every fourth image: the recovered database keeps working, and survives a second
        // crash right away (what recovery wrote, and its checkpoint, must hold up).
        if n % 4 == 1 {
            let mut more = Workload {
                rng: StdRng::seed_from_u64(mix(seed, 1_000 + n as u64)),
                model,
                next_val: 1_000_000,
                commits: 0,
                checkpointed_at: 0,
            };
            for _ in 0..5 {
                if let Err(f) = more.step(&db, &table) {
                    panic!("{what}: a transaction after recovery failed: {}", f.error);
                }
            }
            let again = crash_and_drop(&storage, db, Crash::PowerCut(mix(seed, 2_000 + n as u64)));
            let (db, _) = recover(
                &again,
                mode,
                &more.model,
                &format!("{what}, then a power cut"),
            );
            db.close().expect("close");
        } else {
            db.close().expect("close");
        }
    }
}

#[test]
fn crash_images_fsync() {
    crash_images(CommitMode::Fsync, 1);
}

#[test]
fn crash_images_buffer() {
    crash_images(CommitMode::Buffer, 2);
}

#[test]
fn crash_images_pmem_log() {
    crash_images(CommitMode::PmemLog, 3);
}

#[test]
fn crash_images_keeping_recent_pages_fsync() {
    crash_images_with(CommitMode::Fsync, 4, KEEP_BYTES);
}

#[test]
fn crash_images_keeping_recent_pages_buffer() {
    crash_images_with(CommitMode::Buffer, 5, KEEP_BYTES);
}

#[test]
fn crash_images_keeping_recent_pages_pmem_log() {
    crash_images_with(CommitMode::PmemLog, 6, KEEP_BYTES);
}

// ---------------------------------------------------------------------------------------------
// The medium dies in the middle of an operation.

/// When a run of [`die_at`] checkpoints.
#[derive(Clone, Copy, Debug)]
enum Checkpoints {
    /// Every 30 transactions, writing every dirty page.
    Every30,
    /// Every [`KEEPING_EVERY`] transactions, keeping this many bytes of log's pages dirty.
    KeepingRecent(u64),
    /// Once, after this transaction.
    OnceAfter(usize),
}

impl Checkpoints {
    /// Runs the checkpoint due after transaction `i`, if any.
    fn after(self, db: &Database, i: usize) -> Option<tailstore_engine::Result<()>> {
        match self {
            Checkpoints::Every30 if i % 30 == 29 => Some(db.checkpoint()),
            Checkpoints::KeepingRecent(_) if i % KEEPING_EVERY == KEEPING_EVERY - 1 => {
                Some(db.checkpoint_keeping_recent())
            }
            Checkpoints::OnceAfter(at) if i == at => Some(db.checkpoint()),
            _ => None,
        }
    }
}

/// Runs `txns` transactions of the workload with the medium dying at its `crash_at`-th
/// mutating operation (counted from after the table was created); returns the restart
/// image and the two admissible outcomes (the acknowledged commits, and those plus the
/// transaction that was committing).
fn die_at(
    mode: CommitMode,
    seed: u64,
    crash_at: Option<u64>,
    crash: Crash,
    checkpoints: Checkpoints,
    txns: usize,
) -> (SimStorage, Model, Model, u64) {
    let mut config = sim_config(mode, SMALL_POOL);
    if let Checkpoints::KeepingRecent(keep) = checkpoints {
        config.checkpoint_keep_bytes = keep;
    }
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &config).expect("create");
    let table = create_items(&db);
    let started = storage.ops_done();
    if let Some(k) = crash_at {
        storage.crash_after(k);
    }
    let mut workload = Workload::new(seed);
    let mut would_be = None;
    for i in 0..txns {
        if let Err(failed) = workload.step(&db, &table) {
            would_be = Some(failed.would_be);
            break;
        }
        if let Some(Err(e)) = checkpoints.after(&db, i) {
            assert!(crash_at.is_some(), "{mode}: checkpoint failed: {e}");
            break;
        }
    }
    let ops = storage.ops_done() - started;
    let acknowledged = workload.model.clone();
    let after = crash_and_drop(&storage, db, crash);
    let would_be = would_be.unwrap_or_else(|| acknowledged.clone());
    (after, acknowledged, would_be, ops)
}

/// Checks that `db` holds `acknowledged`, or `would_be` (the acknowledged commits and the
/// one in flight at the crash).
fn verify_either(db: &Database, acknowledged: &Model, would_be: &Model, what: &str) {
    let table = db.table("items").unwrap_or_else(|e| panic!("{what}: {e}"));
    if let Err(without) = try_verify(db, &table, acknowledged) {
        if let Err(with) = try_verify(db, &table, would_be) {
            panic!(
                "{what}: neither the acknowledged commits ({without}) nor those plus the \
                 one in flight ({with})"
            );
        }
    }
}

/// The medium dies at `points` operations of a run checkpointing by `checkpoints` (a
/// process crash or a power cut); each restart must hold the acknowledged commits, or those
/// and the one in flight.
fn crash_points(mode: CommitMode, points: u64, checkpoints: Checkpoints) {
    // A run without a crash tells how many operations there are to crash at.
    let (_, _, _, ops) = die_at(mode, 7, None, Crash::Process, checkpoints, 120);
    for p in 0..points {
        let seed = mix(mode as u64, p);
        let at = 1 + seed % (ops + ops / 10);
        let crash = if p % 3 == 0 {
            Crash::Process
        } else {
            Crash::PowerCut(seed)
        };
        let what = format!("{mode}: medium dies at operation {at} of ~{ops}, {crash:?}");
        let (storage, acknowledged, would_be, _) =
            die_at(mode, 7, Some(at), crash, checkpoints, 120);
        let (db, _) = open_sim(&storage, &sim_config(mode, SMALL_POOL))
            .unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
        verify_either(&db, &acknowledged, &would_be, &what);
        db.close().expect("close");
    }
}

#[test]
fn crash_points_fsync() {
    crash_points(CommitMode::Fsync, 12, Checkpoints::Every30);
}

#[test]
fn crash_points_buffer() {
    crash_points(CommitMode::Buffer, 12, Checkpoints::Every30);
}

#[test]
fn crash_points_pmem_log() {
    crash_points(CommitMode::PmemLog, 12, Checkpoints::Every30);
}

#[test]
fn crash_points_keeping_recent_pages_fsync() {
    crash_points(
        CommitMode::Fsync,
        12,
        Checkpoints::KeepingRecent(KEEP_BYTES),
    );
}

#[test]
fn crash_points_keeping_recent_pages_buffer() {
    crash_points(
        CommitMode::Buffer,
        12,
        Checkpoints::KeepingRecent(KEEP_BYTES),
    );
}

// ---------------------------------------------------------------------------------------------
// The medium dies in the middle of a recovery.

/// Transactions of a [`crash_during_recovery`] run, and the one after which it checkpoints:
/// redo then changes more pages than the pool holds, so recovery evicts (writes) pages too.
const RECOVERED_RUN: usize = 190;
const RECOVERED_RUN_CHECKPOINT: usize = 39;

/// Crash number `n` of `seed`'s run: one in two a process crash (a log written and not yet
/// synced survives it, for the recovery to replay), else a power cut.
fn crash_kind(seed: u64, n: u64) -> Crash {
    if n.is_multiple_of(2) {
        Crash::Process
    } else {
        Crash::PowerCut(mix(seed, 100 + n))
    }
}

/// Recovery itself is cut short. A run dies in its last third (at a random operation: in
/// the middle of a commit, a sync, an eviction), then its recovery dies at a random one of
/// its operations (the double-write area's restores, the log's repair of its tail, redo's
/// evictions), by a process crash or a power cut, and so does the recovery after that; the
/// next recovery must still find the acknowledged commits (and perhaps the one in flight),
/// however much the ones before it had done.
fn crash_during_recovery(mode: CommitMode, seed: u64, points: u64) {
    let config = sim_config(mode, SMALL_POOL);
    let checkpoints = Checkpoints::OnceAfter(RECOVERED_RUN_CHECKPOINT);
    let (_, _, _, run_ops) = die_at(mode, seed, None, Crash::Process, checkpoints, RECOVERED_RUN);
    let (mut torn, mut evicting) = (0, 0);
    for p in 0..points {
        let at = run_ops - mix(seed, p) % (run_ops / 3);
        let crash = crash_kind(seed, p);
        let mut what = format!("{mode}, seed {seed}: the run dies at operation {at} ({crash:?})");
        let (cut, acknowledged, would_be, _) =
            die_at(mode, seed, Some(at), crash, checkpoints, RECOVERED_RUN);
        // A clean recovery tells how many operations there are to die at.
        let probe = cut.process_crash();
        let (db, report) =
            open_sim(&probe, &config).unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
        let ops = probe.ops_done();
        torn += report.recovery.torn_pages_restored;
        evicting += usize::from(db.stats().pool.evictions > 0);
        drop(db);
        let mut storage = cut;
        for depth in 1..=2 {
            let at = 1 + mix(seed, 1_000 + p * 2 + depth) % ops;
            let crash = crash_kind(seed, 1_000 + p * 2 + depth);
            what = format!("{what}, recovery dies at operation {at} of {ops} ({crash:?})");
            storage = recovery_dies_at(&storage, &config, at, crash, &what);
        }
        let (db, _) =
            open_sim(&storage, &config).unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
        verify_either(&db, &acknowledged, &would_be, &what);
        db.close().expect("close");
    }
    assert!(
        evicting as u64 > points / 2,
        "{mode}: only {evicting} recoveries of {points} evicted pages"
    );
    if mode != CommitMode::Fsync {
        // Some images tore pages that the double-write area restored (`fsync` rebuilds them
        // from the log's images instead, and does not count them).
        assert!(torn > 0, "{mode}: no recovery restored a torn page");
    }
}

/// Opens `storage` (recovering it) with the medium dying at its `at`-th operation from now,
/// and returns what `crash` leaves of it. A recovery may fail only once the medium is dead.
fn recovery_dies_at(
    storage: &SimStorage,
    config: &tailstore_engine::DbConfig,
    at: u64,
    crash: Crash,
    what: &str,
) -> SimStorage {
    storage.crash_after(at);
    match open_sim(storage, config) {
        Ok((db, _)) => crash_and_drop(storage, db, crash),
        Err(e) => {
            assert!(
                storage.is_dead(),
                "{what}: recovery failed on a live medium: {e}"
            );
            image(storage, crash)
        }
    }
}

#[test]
fn crash_during_recovery_fsync() {
    crash_during_recovery(CommitMode::Fsync, 11, 24);
}

#[test]
fn crash_during_recovery_buffer() {
    crash_during_recovery(CommitMode::Buffer, 12, 24);
}

#[test]
fn crash_during_recovery_pmem_log() {
    crash_during_recovery(CommitMode::PmemLog, 13, 24);
}

/// After a process crash, the media may hold what was never durable: the log's valid prefix
/// ending in records written and not yet synced (`fsync`) or stored and not yet flushed
/// (`pmem-log`, `buffer`), a commit in flight; a PMEM start word stored and not flushed; a
/// checkpoint's meta page written and not synced. A recovery that builds on them must make
/// them durable first, or a power cut after the restart takes them back: the valid prefix
/// ending at the hole, before every commit acknowledged since the restart; or a checkpoint
/// older than the log's start, whose records the restart released. The run (`txns`
/// transactions, checkpointing by `checkpoints`) dies at operation `at` by a process crash;
/// a clean recovery, `more` acknowledged transactions, then `cuts` different power cuts of
/// that state; each recovery must hold every one of them.
fn commits_after_a_restart_survive_a_power_cut(
    mode: CommitMode,
    seed: u64,
    checkpoints: Checkpoints,
    txns: usize,
    at: u64,
    (more, cuts): (u64, u64),
) {
    let config = sim_config(mode, SMALL_POOL);
    let what = format!("{mode}, seed {seed}: the run dies at operation {at} (process)");
    let (storage, acknowledged, would_be, _) =
        die_at(mode, seed, Some(at), Crash::Process, checkpoints, txns);
    let (db, _) =
        open_sim(&storage, &config).unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
    let table = db.table("items").unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut workload = Workload::new(mix(seed, at));
    workload.model = match try_verify(&db, &table, &acknowledged) {
        Ok(()) => acknowledged,
        Err(_) => would_be,
    };
    verify(&db, &table, &workload.model, &what);
    workload.checkpointed_at = db.log().appended_lsn();
    workload.next_val = 1 << 40; // `by_val` is unique: past every value of the run
    while workload.commits < more {
        workload
            .step(&db, &table)
            .unwrap_or_else(|f| panic!("{what}: after the restart: {}", f.error));
    }
    for cut in 0..cuts {
        let seed = mix(seed, 900 + at * cuts + cut);
        let what = format!("{what}, {more} commits, then power cut {seed}");
        let (db, _) = recover(
            &image(&storage, Crash::PowerCut(seed)),
            mode,
            &workload.model,
            &what,
        );
        db.close().expect("close");
    }
    storage.crash_after(0);
    drop(db);
}

/// [`commits_after_a_restart_survive_a_power_cut`] at `points` operations of the last third
/// of a run (most often in the middle of a commit).
fn restarts_after_commits_in_flight(mode: CommitMode, seed: u64, points: u64) {
    let checkpoints = Checkpoints::OnceAfter(RECOVERED_RUN_CHECKPOINT);
    let (_, _, _, run_ops) = die_at(mode, seed, None, Crash::Process, checkpoints, RECOVERED_RUN);
    for p in 0..points {
        let at = run_ops - mix(seed, p) % (run_ops / 3);
        commits_after_a_restart_survive_a_power_cut(
            mode,
            seed,
            checkpoints,
            RECOVERED_RUN,
            at,
            (20, 1),
        );
    }
}

/// Redo at first load (`DbConfig::redo_at_first_load`, `pending_redo.rs`): a restart opens
/// with the pages the log changed not yet redone, serves reads and commits among them (a
/// 32-frame pool: redone pages are evicted and read back, new pages allocated), and then
/// survives a power cut and a process crash taken while pages may still be pending, and a
/// checkpoint taken while they are. Every recovery must hold exactly the acknowledged
/// commits.
fn redo_at_first_load(mode: CommitMode, seed: u64) {
    let checkpoints = Checkpoints::OnceAfter(RECOVERED_RUN_CHECKPOINT);
    let (storage, acknowledged, _, _) =
        die_at(mode, seed, None, Crash::Process, checkpoints, RECOVERED_RUN);
    let mut config = sim_config(mode, SMALL_POOL);
    config.redo_at_first_load = true;
    let what = format!("{mode}, seed {seed}, redo at first load");
    let (db, report) =
        open_sim(&storage, &config).unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
    assert!(
        report.recovery.pages_to_redo > 0,
        "{what}: {:?}",
        report.recovery
    );
    // The checkpointer redoes the rest only after its first 50 ms wait.
    let left_at_open = db.stats().restart_redo.pages_left();
    assert!(left_at_open > 0, "{what}: nothing left pending at the open");
    let table = db.table("items").unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut workload = Workload::new(mix(seed, 7));
    workload.model = acknowledged;
    workload.checkpointed_at = db.log().appended_lsn();
    workload.next_val = 1 << 40; // `by_val` is unique: past every value of the run
    while workload.commits < 20 {
        workload
            .step(&db, &table)
            .unwrap_or_else(|f| panic!("{what}: after the restart: {}", f.error));
    }
    let cut = image(&storage, Crash::PowerCut(mix(seed, 11)));
    let crashed = image(&storage, Crash::Process);
    // A checkpoint moves redo's start past records only the pending pages' redo applies.
    db.checkpoint()
        .unwrap_or_else(|e| panic!("{what}: checkpoint: {e}"));
    let left = db.stats().restart_redo.pages_left();
    match db.restart_redo() {
        RestartRedo::Finished(done) => assert!(
            done.pages <= left_at_open,
            "{what}: the checkpoint redid {done:?} of {left_at_open} pages left at the open"
        ),
        other => panic!("{what}: after a checkpoint, the restart's redo is {other:?}"),
    }
    assert_eq!(left, 0, "{what}: after a checkpoint");
    let checkpointed = image(&storage, Crash::Process);
    verify(&db, &table, &workload.model, &what);
    storage.crash_after(0);
    drop(db);
    let images = [
        ("power cut", cut),
        ("process crash", crashed),
        ("checkpoint and a process crash", checkpointed),
    ];
    for (kind, after) in images {
        let what = format!("{what}, 20 commits, then a {kind}");
        let (db, _) =
            open_sim(&after, &config).unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
        let table = db.table("items").unwrap_or_else(|e| panic!("{what}: {e}"));
        verify(&db, &table, &workload.model, &what);
        db.close().unwrap_or_else(|e| panic!("{what}: close: {e}"));
    }
}

#[test]
fn redo_at_first_load_fsync() {
    redo_at_first_load(CommitMode::Fsync, 41);
}

#[test]
fn redo_at_first_load_buffer() {
    redo_at_first_load(CommitMode::Buffer, 42);
}

#[test]
fn redo_at_first_load_pmem_log() {
    redo_at_first_load(CommitMode::PmemLog, 43);
}

/// Transactions of the runs of [`restarts_after_a_checkpoint_in_flight`], the last followed
/// by a checkpoint. (Not 60: with 16 KiB pages, one of `pmem-log`'s own checkpoints, taken
/// when its region runs low, fell just before that one and left it nothing to write.)
const CHECKPOINTED_RUN: usize = 50;

/// [`commits_after_a_restart_survive_a_power_cut`] at operations of a checkpoint that ends
/// the run: its last 16 (the meta page's write and sync, the log's release) and 8 others.
fn restarts_after_a_checkpoint_in_flight(mode: CommitMode, seed: u64) {
    let never = Checkpoints::OnceAfter(usize::MAX);
    let last = Checkpoints::OnceAfter(CHECKPOINTED_RUN - 1);
    let (_, _, _, before) = die_at(mode, seed, None, Crash::Process, never, CHECKPOINTED_RUN);
    let (_, _, _, after) = die_at(mode, seed, None, Crash::Process, last, CHECKPOINTED_RUN);
    assert!(
        after > before + 16,
        "{mode}: the checkpoint did {} operations",
        after - before
    );
    let earlier = (0..8).map(|p| before + 1 + mix(seed, p) % (after - before - 16));
    for at in earlier.chain(after - 15..=after) {
        // Two transactions only: with more, pages they push out through the double-write
        // area sync the data file, and with it whatever the crash had left unsynced there.
        // Four cuts: a meta page left unsynced survives one whole in four.
        commits_after_a_restart_survive_a_power_cut(mode, seed, last, CHECKPOINTED_RUN, at, (2, 4));
    }
}

#[test]
fn commits_after_a_restart_survive_a_power_cut_fsync() {
    restarts_after_commits_in_flight(CommitMode::Fsync, 21, 16);
}

#[test]
fn commits_after_a_restart_survive_a_power_cut_buffer() {
    restarts_after_commits_in_flight(CommitMode::Buffer, 22, 16);
}

#[test]
fn commits_after_a_restart_survive_a_power_cut_pmem_log() {
    restarts_after_commits_in_flight(CommitMode::PmemLog, 23, 16);
}

#[test]
fn commits_after_a_restart_from_a_checkpoint_in_flight_survive_a_power_cut_fsync() {
    restarts_after_a_checkpoint_in_flight(CommitMode::Fsync, 24);
}

#[test]
fn commits_after_a_restart_from_a_checkpoint_in_flight_survive_a_power_cut_buffer() {
    restarts_after_a_checkpoint_in_flight(CommitMode::Buffer, 25);
}

#[test]
fn commits_after_a_restart_from_a_checkpoint_in_flight_survive_a_power_cut_pmem_log() {
    restarts_after_a_checkpoint_in_flight(CommitMode::PmemLog, 26);
}

/// The creation of a database (data file, log, PMEM headers, double-write area, the first
/// table) dies by a process crash at each of its operations in turn; a recovery, the table
/// created if it is missing, 10 acknowledged transactions and a checkpoint, then a power
/// cut: the database
/// must open with every one of them. A crash in the middle of creation can leave headers
/// stored and not flushed (or written and not synced) that the next open reads as valid,
/// then builds on: they must be made durable before, or the power cut takes them back
/// ("header missing") under data written since.
fn creation_cut_short_then_a_power_cut(mode: CommitMode) {
    let config = sim_config(mode, SMALL_POOL);
    let probe = SimStorage::new();
    let (db, _) = open_sim(&probe, &config).expect("create");
    create_items(&db);
    let ops = probe.ops_done();
    db.close().expect("close");
    for at in 1..=ops {
        let what = format!("{mode}: creation dies at operation {at} of {ops} (process)");
        let storage = SimStorage::new();
        storage.crash_after(at);
        let crashed = match open_sim(&storage, &config) {
            Ok((db, _)) => {
                let _ = db.create_table("items", &items_schema());
                crash_and_drop(&storage, db, Crash::Process)
            }
            Err(_) => image(&storage, Crash::Process),
        };
        let (db, _) =
            open_sim(&crashed, &config).unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
        let table = match db.table("items") {
            Ok(table) => table,
            Err(_) => create_items(&db),
        };
        let mut workload = Workload::new(mix(mode as u64, at));
        while workload.commits < 10 {
            workload
                .step(&db, &table)
                .unwrap_or_else(|f| panic!("{what}: after the restart: {}", f.error));
        }
        // Writes pages through the double-write area's slots: its header must be durable.
        db.checkpoint()
            .unwrap_or_else(|e| panic!("{what}: checkpoint: {e}"));
        let cut = crash_and_drop(&crashed, db, Crash::PowerCut(mix(mode as u64, at)));
        let (db, _) = recover(
            &cut,
            mode,
            &workload.model,
            &format!("{what}, then a power cut"),
        );
        db.close().expect("close");
    }
}

#[test]
fn creation_cut_short_then_a_power_cut_fsync() {
    creation_cut_short_then_a_power_cut(CommitMode::Fsync);
}

#[test]
fn creation_cut_short_then_a_power_cut_buffer() {
    creation_cut_short_then_a_power_cut(CommitMode::Buffer);
}

#[test]
fn creation_cut_short_then_a_power_cut_pmem_log() {
    creation_cut_short_then_a_power_cut(CommitMode::PmemLog);
}

// ---------------------------------------------------------------------------------------------
// `async`: a crash loses a suffix of the commits, never a transaction in part.

#[test]
fn async_crash_recovers_a_prefix_of_the_commits() {
    let mode = CommitMode::Async;
    let config = sim_config(mode, SMALL_POOL);
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &config).expect("create");
    let table = create_items(&db);
    db.checkpoint().unwrap(); // `async`: makes the table durable
    let mut workload = Workload::new(11);
    let mut history = vec![Model::new()];
    let mut images = Vec::new();
    for i in 0..150 {
        let committed = workload
            .step(&db, &table)
            .unwrap_or_else(|f| panic!("async: {}", f.error));
        if committed {
            history.push(workload.model.clone());
        }
        if i == 60 {
            db.checkpoint().unwrap();
        }
        if i % 10 == 9 {
            let crash = if i % 20 == 9 {
                Crash::Process
            } else {
                Crash::PowerCut(i)
            };
            images.push((i, crash, image(&storage, crash), history.len()));
        }
    }
    drop(db);
    for (i, crash, storage, committed) in images {
        let what = format!("async: {crash:?} after transaction {i}");
        let (db, _) = open_sim(&storage, &config).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_prefix(&db, &history[..committed], &what);
        db.close().unwrap();
    }
}

/// The write-ahead rule on its own. In `async` mode with a log that nothing flushes on its own
/// (a background flush every hour, a ring far larger than the run's log), only a page write makes
/// the log durable: the pool forces the log up to a page's LSN before it writes the page. The
/// table outgrows the pool, so evictions write pages that unflushed commits changed; after a
/// process crash (the log's buffer lost, the data file's writes kept) the restart must find a
/// prefix of the commits. A page written ahead of its log leaves changes whose records are
/// gone: rows of no prefix, or a tree that does not open.
#[test]
fn pages_evicted_before_the_log_is_flushed_recover_a_prefix() {
    pages_evicted_before_the_log_is_flushed(&[]);
}

/// The write-ahead rule broken (`Plant::PageBeforeItsLog`): the test above must fail.
#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
#[should_panic(expected = "ahead of its log")]
fn planted_page_before_its_log_is_caught() {
    pages_evicted_before_the_log_is_flushed(&[Plant::PageBeforeItsLog]);
}

fn pages_evicted_before_the_log_is_flushed(plants: &[Plant]) {
    let mut config = sim_config(CommitMode::Async, SMALL_POOL);
    config.pool_plants = plants.to_vec();
    config.log.async_interval = std::time::Duration::from_secs(3600);
    config.log.ring_bytes = 64 << 20;
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &config).expect("create");
    let table = create_items(&db);
    // `async`: makes the table durable.
    db.checkpoint().unwrap();
    // The log's writer thread flushes whatever is appended when it first runs; started late
    // on a busy machine, it flushed some of the commits below (1 run in 60), and the pages
    // evicted then held only durable changes. Let it reach its first sleep.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut workload = Workload::new(23);
    let mut history = vec![Model::new()];
    let mut images = Vec::new();
    for i in 1..=150 {
        let committed = workload
            .step(&db, &table)
            .unwrap_or_else(|f| panic!("async: {}", f.error));
        if committed {
            history.push(workload.model.clone());
        }
        if i % 25 == 0 {
            images.push((i, image(&storage, Crash::Process), history.len()));
        }
    }
    // The log's writer flushes on its own once a quarter of the ring is full.
    let stats = db.stats();
    assert!(
        stats.pool.evictions > 50 && stats.log.log_bytes < config.log.ring_bytes as u64 / 4,
        "the run must evict pages while the log is not flushed on its own: {} evictions, {} \
         bytes of log",
        stats.pool.evictions,
        stats.log.log_bytes
    );
    drop(db);
    for (i, image, committed) in images {
        let what = format!("a page reached the data file ahead of its log? after transaction {i}");
        let (db, _) =
            open_sim(&image, &config).unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
        assert_prefix(&db, &history[..committed], &what);
    }
}

/// Checks that `db` holds the state after one of the commits of `history` (its first entry
/// being the state before any).
fn assert_prefix(db: &Database, history: &[Model], what: &str) {
    let table = db.table("items").unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut txn = db.begin();
    let rows: BTreeMap<i64, Item> = txn
        .scan(
            &table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .iter()
        .map(|r| {
            let item = Item::from_values(r);
            (item.id, item)
        })
        .collect();
    txn.commit().unwrap_or_else(|e| panic!("{what}: {e}"));
    let prefix = history
        .iter()
        .rposition(|m| *m == rows)
        .unwrap_or_else(|| panic!("{what}: the recovered rows are no prefix of the commits"));
    verify(db, &table, &history[prefix], what);
}

// ---------------------------------------------------------------------------------------------
// Recovery cut short while the log it replays is written and not yet synced.

/// A run of [`RECOVERED_RUN`] transactions whose last log write is not made durable: in
/// `fsync`, `buffer` and `pmem-log`, a transaction changing the note of a row in each of 24
/// leaves spread over the table, whose commit's sync (or fence, after its record's stores)
/// fails; in `async` (a background flush every hour, so only the ring's quarter-full
/// wake-ups and this test flush), the flush of the records since the last of those, whose
/// sync fails. Returns the process crash's image and the history of the commits (states),
/// the last of them the one not made durable.
fn unsynced_tail(mode: CommitMode, seed: u64) -> (SimStorage, Vec<Model>) {
    // Room for the last transaction's pages, which recovery's 16 frames lack.
    let config = unsynced_tail_config(mode, 4 * SMALL_POOL);
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &config).expect("create");
    let table = create_items(&db);
    let mut workload = Workload::new(seed);
    let mut history = vec![Model::new()];
    // The unsynced records follow a checkpoint, so that they hold the first change of each
    // page since it, as a full-page image in `fsync` mode: redo rebuilds a page from the
    // last image the log holds, which would hide a page written with a lost record's change
    // if an older image of it survived.
    let unsynced_from = match mode {
        CommitMode::Async => RECOVERED_RUN - 25,
        _ => RECOVERED_RUN,
    };
    for i in 0..RECOVERED_RUN {
        if i == unsynced_from {
            db.checkpoint().expect("checkpoint");
        }
        if workload
            .step(&db, &table)
            .unwrap_or_else(|f| panic!("{mode}: {}", f.error))
        {
            history.push(workload.model.clone());
        }
        if i == 0 || i == RECOVERED_RUN_CHECKPOINT {
            db.checkpoint().expect("checkpoint"); // the first makes the table durable (`async`)
        }
    }
    if unsynced_from == RECOVERED_RUN {
        db.checkpoint().expect("checkpoint");
    }
    match mode {
        CommitMode::Async => {
            storage.fail_nth_sync(1);
            let failed = db.log().force_durable(db.log().appended_lsn());
            assert!(failed.is_err(), "async: the flush's sync did not fail");
        }
        _ => {
            if mode == CommitMode::Buffer {
                // The log writer hardens aged records in the background, each round ending
                // with a fence on the ring's start word: were that the first fence from now,
                // it would fail instead of the commit's, stop the log, and the commit would
                // fail before appending its record (once in a CI run under load: "redo
                // evicted no page"). Let the writer finish first.
                while db.log().hardened_lsn() < db.log().appended_lsn() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            match mode {
                CommitMode::Fsync => storage.fail_nth_sync(1),
                _ => storage.fail_region_fences_after(1),
            }
            let mut wide = workload.model.clone();
            let ids: Vec<i64> = wide.keys().copied().collect();
            let mut txn = db.begin();
            // Rows spread over the table: more leaves than recovery's pool holds.
            for id in ids.iter().step_by(ids.len() / 32).take(32) {
                let old = &wide[id];
                let note = old.note.as_ref().map_or(0, String::len);
                let item = Item::new(old.id, old.grp, old.val, (note + 50) % support::MAX_NOTE);
                txn.update(&table, &item.values()).expect("update");
                wide.insert(*id, item);
            }
            assert!(txn.commit().is_err(), "{mode}: the commit did not fail");
            history.push(wide);
        }
    }
    (crash_and_drop(&storage, db, Crash::Process), history)
}

/// The configuration of [`unsynced_tail`]'s runs and their recoveries: in `async`, a ring of
/// 4 MiB, so that flushes (at a quarter of it) leave up to 1 MiB unsynced, and no timed flush;
/// in the other modes a ring of 128 pages.
fn unsynced_tail_config(mode: CommitMode, pool_pages: usize) -> tailstore_engine::DbConfig {
    let mut config = sim_config(mode, pool_pages);
    if mode == CommitMode::Async {
        config.log.ring_bytes = 4 << 20;
        config.log.async_interval = std::time::Duration::from_secs(3_600);
    } else {
        // The last transaction's record holds a full-page image of each of its ~30 pages
        // (`fsync`), more than half of `sim_config`'s ring: records may fill half a ring.
        config.log.ring_bytes = 128 * PAGE_SIZE;
    }
    config
}

/// Redo applies the records a process crash left written and not synced (or not flushed),
/// and writes pages it changed to the data file once they outgrow the pool (here half the
/// run's). A power cut during that recovery may drop the records and keep the pages, unless
/// recovery made the log durable first: the next recovery would then find parts of
/// transactions its log no longer holds. The recovery of the image dies at each of its
/// operations in turn (or at 48 spread over them) by a power cut; the next recovery must
/// find the state before or after the transaction not made durable, or in `async`, which may
/// lose any suffix of the commits, the state after one of them.
fn power_cut_while_redoing_unsynced_records(mode: CommitMode, seed: u64) {
    power_cut_while_redoing_unsynced_records_planted(mode, seed, &[]);
}

fn power_cut_while_redoing_unsynced_records_planted(
    mode: CommitMode,
    seed: u64,
    plants: &[LogPlant],
) {
    // Fewer frames than the unsynced transactions change: redo evicts some of their pages.
    let mut config = unsynced_tail_config(mode, 16);
    config.log.plants = plants.to_vec();
    let (crashed, history) = unsynced_tail(mode, seed);
    let probe = crashed.process_crash();
    let (db, _) = open_sim(&probe, &config).expect("recovery");
    let ops = probe.ops_done();
    assert!(
        db.stats().pool.evictions > 0,
        "{mode}: redo evicted no page"
    );
    let table = db.table("items").expect("table");
    let last = history.last().expect("a history");
    try_verify(&db, &table, last).unwrap_or_else(|e| {
        panic!("{mode}: the process crash's image does not hold the unsynced commit: {e}")
    });
    drop(db);
    // At most 48 points, spread over the whole recovery (the `buffer` and `pmem-log`
    // recoveries take ~140 operations: each eviction goes through the double-write area).
    for at in (1..=ops).step_by((ops as usize).div_ceil(48)) {
        let what = format!("{mode}: recovery dies at operation {at} of {ops} (power cut)");
        let cut = recovery_dies_at(
            &crashed.process_crash(),
            &config,
            at,
            Crash::PowerCut(mix(seed, at)),
            &what,
        );
        let (db, _) =
            open_sim(&cut, &config).unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
        let from = if mode == CommitMode::Async {
            0
        } else {
            history.len() - 2
        };
        assert_prefix(&db, &history[from..], &what);
        db.close().expect("close");
    }
}

#[test]
fn power_cut_while_redoing_unsynced_records_fsync() {
    power_cut_while_redoing_unsynced_records(CommitMode::Fsync, 41);
}

#[test]
fn power_cut_while_redoing_unsynced_records_buffer() {
    power_cut_while_redoing_unsynced_records(CommitMode::Buffer, 43);
}

// Since redo runs after the log's repair (decision 95), the repair syncs the log file before
// redo writes a page in `buffer` (`sync_data`) and in `fsync` (`set_len` syncs the file): the
// planted bug shows in `pmem-log`, whose repair flushes nothing below the end. It shows as
// rows that are no prefix of the commits or, since decision 221, as a page newer than the
// log's end the power cut left: either way a recovery cut short that the test reports.
#[test]
fn power_cut_while_redoing_unsynced_records_pmem_log() {
    power_cut_while_redoing_unsynced_records(CommitMode::PmemLog, 44);
}

/// The log's open trusting what the crash left (`Plant::RecoveryTrustsTheCrash`): the test
/// above must fail.
#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
#[should_panic(expected = "pmem-log: recovery dies at operation")]
fn planted_recovery_trusts_the_crash_is_caught() {
    power_cut_while_redoing_unsynced_records_planted(
        CommitMode::PmemLog,
        44,
        &[LogPlant::RecoveryTrustsTheCrash],
    );
}

#[test]
fn power_cut_while_redoing_unsynced_records_async() {
    power_cut_while_redoing_unsynced_records(CommitMode::Async, 42);
}

// ---------------------------------------------------------------------------------------------
// Concurrent commits in two tables: one merges (freeing pages), the other splits (allocating).

#[test]
fn concurrent_merges_and_splits_in_two_tables_recover() {
    // A page emptied by a merge in one table must not be reused by a split in another table
    // before the record that frees it is in the log: redo replays in LSN order, and would
    // otherwise leave the page free (or stale) under the second table.
    let mode = CommitMode::Async;
    let config = sim_config(mode, 4_096);
    for round in 0..6 {
        let storage = SimStorage::new();
        let (db, _) = open_sim(&storage, &config).expect("create");
        let x = db.create_table("x", &items_schema()).unwrap();
        let y = db.create_table("y", &items_schema()).unwrap();
        std::thread::scope(|s| {
            // x: 60 rows inserted in one transaction, deleted in the next (merges), and so on.
            s.spawn(|| {
                for r in 0..60 {
                    let mut txn = db.begin();
                    for id in 0..60 {
                        if r % 2 == 0 {
                            let item = Item::new(id, id % 3, r * 1_000 + id, 500);
                            txn.insert(&x, &item.values()).unwrap();
                        } else {
                            txn.delete(&x, &key(id)).unwrap();
                        }
                    }
                    txn.commit().unwrap();
                }
            });
            // y: one large row per transaction (splits), 40 inserts then 40 deletes, ...
            s.spawn(|| {
                for r in 0..3_000 {
                    let id = r % 40;
                    let mut txn = db.begin();
                    if (r / 40) % 2 == 0 {
                        let item = Item::new(id, id % 3, r, 550);
                        txn.insert(&y, &item.values()).unwrap();
                    } else {
                        txn.delete(&y, &key(id)).unwrap();
                    }
                    txn.commit().unwrap();
                }
            });
        });
        // The whole history is in the log (and the data file has only what evictions wrote):
        // recovery replays all of it.
        db.log().force_durable(db.log().appended_lsn()).unwrap();
        let after = crash_and_drop(&storage, db, Crash::Process);
        let what = format!("round {round}");
        let (db, _) = open_sim(&after, &config).unwrap_or_else(|e| panic!("{what}: {e}"));
        verify(&db, &db.table("x").unwrap(), &Model::new(), &what);
        let y_model: Model = (0..40)
            .map(|id| (id, Item::new(id, id % 3, 2_960 + id, 550)))
            .collect();
        verify(&db, &db.table("y").unwrap(), &y_model, &what);
        assert_eq!(db.check().unwrap(), 3 * 40, "{what}");
        db.close().unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Larger than memory.

#[test]
fn data_larger_than_the_buffer_pool() {
    const POOL: usize = (512 << 10) / PAGE_SIZE;
    let dir = TempDb::new("larger");
    let mut config = dir.config(CommitMode::Buffer);
    config.buffer_pool_bytes = POOL * PAGE_SIZE;
    let (db, _) = Database::open(config.clone()).expect("open");
    let table = create_items(&db);
    let mut rng = StdRng::seed_from_u64(5);
    let mut model = Model::new();
    // About 16,000 rows of ~300 bytes: some 600 leaves of rows, plus the indexes. (A
    // transaction may change at most seven eighths of the pages the pool holds: see
    // `transaction_changing_more_pages_than_the_pool_holds_is_refused_without_a_change`.)
    let mut id = 0;
    for _ in 0..800 {
        let mut txn = db.begin();
        for _ in 0..20 {
            id += 1 + rng.gen_range(0..3);
            let item = Item::new(id, rng.gen_range(0..50), id * 7, rng.gen_range(250..350));
            txn.insert(&table, &item.values()).unwrap();
            model.insert(id, item);
        }
        txn.commit().unwrap();
    }
    let stats = db.stats();
    assert!(
        stats.data_pages >= 8 * POOL as u64,
        "{} data pages for a pool of {POOL}",
        stats.data_pages
    );
    let check_random = |db: &Database, rng: &mut StdRng, model: &Model, n: usize| {
        let keys: Vec<i64> = model.keys().copied().collect();
        let mut txn = db.begin();
        for _ in 0..n {
            let k = keys[rng.gen_range(0..keys.len())] + rng.gen_range(0..2);
            let got = txn.get(&table_of(db), &key(k)).unwrap();
            assert_eq!(
                got.map(|r| Item::from_values(&r)).as_ref(),
                model.get(&k),
                "get({k})"
            );
        }
        for _ in 0..20 {
            let from = keys[rng.gen_range(0..keys.len())];
            let desc = rng.gen_bool(0.5);
            let dir = if desc {
                ScanDirection::Descending
            } else {
                ScanDirection::Ascending
            };
            let range = if desc {
                KeyRange::new(
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Included(key(from)),
                )
            } else {
                KeyRange::new(
                    std::ops::Bound::Included(key(from)),
                    std::ops::Bound::Unbounded,
                )
            };
            let got: Vec<Item> = txn
                .scan(&table_of(db), &range, dir, 50)
                .unwrap()
                .iter()
                .map(|r| Item::from_values(r))
                .collect();
            let want: Vec<Item> = if desc {
                model
                    .range(..=from)
                    .rev()
                    .take(50)
                    .map(|(_, v)| v.clone())
                    .collect()
            } else {
                model
                    .range(from..)
                    .take(50)
                    .map(|(_, v)| v.clone())
                    .collect()
            };
            assert_eq!(got, want, "scan from {from} {dir:?}");
        }
        txn.commit().unwrap();
    };
    // Random reads, then random updates (dirty pages evicted), then reads again.
    check_random(&db, &mut rng, &model, 3_000);
    let keys: Vec<i64> = model.keys().copied().collect();
    for _ in 0..60 {
        let mut txn = db.begin();
        for _ in 0..8 {
            let k = keys[rng.gen_range(0..keys.len())];
            let item = Item::new(
                k,
                rng.gen_range(0..50),
                model[&k].val,
                rng.gen_range(10..400),
            );
            txn.update(&table, &item.values()).unwrap();
            model.insert(k, item);
        }
        txn.commit().unwrap();
    }
    check_random(&db, &mut rng, &model, 2_000);
    let stats = db.stats();
    assert!(stats.pool.evictions > 1_000, "{:?}", stats.pool);
    assert!(stats.pool.pages_read > 1_000, "{:?}", stats.pool);
    verify_rows(&db, &table, &model);
    db.close().unwrap();

    let (db, report) = Database::open(config).expect("reopen");
    assert_eq!(
        report.recovery.records, 0,
        "a clean close leaves nothing to redo"
    );
    let table = db.table("items").unwrap();
    check_random(&db, &mut rng, &model, 2_000);
    verify_rows(&db, &table, &model);
    db.close().unwrap();
}

fn table_of(db: &Database) -> Table {
    db.table("items").unwrap()
}

/// Full scans of the rows and both indexes against the model (no per-row point reads:
/// cheaper than `verify` for large tables).
fn verify_rows(db: &Database, table: &Table, model: &Model) {
    let mut txn = db.begin();
    let items = |rows: Vec<Vec<tailstore_storage::Value>>| -> Vec<Item> {
        rows.iter().map(|r| Item::from_values(r)).collect()
    };
    let all = KeyRange::all();
    let rows = items(
        txn.scan(table, &all, ScanDirection::Ascending, usize::MAX)
            .unwrap(),
    );
    assert!(rows.iter().eq(model.values()), "rows differ from the model");
    let mut by_grp: Vec<Item> = model.values().cloned().collect();
    by_grp.sort_by_key(|i| (i.grp, i.id));
    let got = items(
        txn.scan_index(table, "by_grp", &all, ScanDirection::Ascending, usize::MAX)
            .unwrap(),
    );
    assert!(got == by_grp, "index by_grp differs from the model");
    let got = items(
        txn.scan_index(table, "by_val", &all, ScanDirection::Descending, usize::MAX)
            .unwrap(),
    );
    assert!(
        got.iter().eq(model.values().rev()),
        "index by_val differs (vals grow with ids)"
    );
    txn.commit().unwrap();
    assert_eq!(db.check().unwrap(), 3 * model.len() as u64);
}

// ---------------------------------------------------------------------------------------------
// Fault injection: a failed write or sync of the data file stops the database.

/// A database with `txns` committed transactions on fresh simulated storage.
fn loaded(mode: CommitMode, pool: usize, txns: usize) -> (SimStorage, Database, Table, Workload) {
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &sim_config(mode, pool)).expect("create");
    let table = create_items(&db);
    db.create_table("spare", &items_schema()).unwrap();
    let mut workload = Workload::new(42);
    for _ in 0..txns {
        if let Err(f) = workload.step(&db, &table) {
            panic!("{mode}: {}", f.error);
        }
    }
    (storage, db, table, workload)
}

/// Asserts that the database refuses changes with `Stopped`, naming `cause`: a commit (to
/// the table `spare`: a failure in the middle of a B+tree split leaves that tree refusing
/// even reads), a checkpoint, a new table.
#[track_caller]
fn assert_stopped(db: &Database, cause: &str) {
    let stopped = |result: tailstore_engine::Result<()>, what: &str| match result {
        Err(EngineError::Stopped(why)) => assert!(
            why.contains(cause),
            "{what}: the reason ({why}) should name the cause ({cause})"
        ),
        other => panic!("{what}: expected Stopped ({cause}), got {other:?}"),
    };
    let spare = db.table("spare").expect("the spare table");
    let mut txn = db.begin();
    match txn.insert(&spare, &Item::new(-1, 0, -1, 10).values()) {
        Ok(()) => stopped(txn.commit(), "commit"),
        // Pages changed by the transaction that failed stay pinned in the pool as unlogged:
        // a small pool may have no frame left even to read.
        Err(err) => assert!(!err.is_retryable(), "{err}"),
    }
    // A reader too: what it read may include a change that never becomes durable.
    stopped(db.begin().commit_pending().map(|_| ()), "read-only commit");
    stopped(db.checkpoint(), "checkpoint");
    stopped(
        db.create_table("other", &items_schema()).map(|_| ()),
        "create_table",
    );
}

/// Reopens after a fail-stop, on the same storage and on a power-cut image of it.
fn reopen_after_failure(
    storage: &SimStorage,
    db: Database,
    mode: CommitMode,
    model: &Model,
    what: &str,
) {
    let cut = storage.power_cut(99);
    // Closing writes no checkpoint, and says why.
    let err = db
        .close()
        .expect_err("closing a stopped database reports the stop");
    assert!(matches!(err, EngineError::Stopped(_)), "{what}: {err}");
    for (storage, how) in [(storage, "reopened"), (&cut, "after a power cut")] {
        let (db, _) = recover(storage, mode, model, &format!("{what}: {how}"));
        // It accepts commits again, durable ones: a sync that failed before the stop lost
        // its write-back while reads still see what it wrote (the meta page, the log's last
        // round), and the reopened database must not build on that.
        let item = Item::new(-5, 0, -5, 1);
        let mut txn = db.begin();
        txn.insert(&db.table("items").unwrap(), &item.values())
            .unwrap();
        txn.commit().unwrap();
        let mut with_it = model.clone();
        with_it.insert(-5, item);
        for seed in 0..4 {
            let what = format!("{what}: {how}, a commit, then a power cut (seed {seed})");
            let (again, _) = recover(&storage.power_cut(seed), mode, &with_it, &what);
            again.close().unwrap();
        }
        db.close().unwrap();
    }
}

#[test]
fn failed_write_during_checkpoint_stops_the_database() {
    for mode in [CommitMode::Fsync, CommitMode::PmemLog] {
        for nth in [1, 3] {
            let (storage, db, _table, workload) = loaded(mode, 256, 40);
            storage.fail_nth_write(nth);
            let err = db.checkpoint().expect_err("the checkpoint must fail");
            assert!(err.to_string().contains("injected fault: write"), "{err}");
            assert_stopped(&db, "injected fault: write");
            reopen_after_failure(
                &storage,
                db,
                mode,
                &workload.model,
                &format!("{mode}, write {nth}"),
            );
        }
    }
}

#[test]
fn failed_sync_during_checkpoint_stops_the_database() {
    for mode in [CommitMode::Fsync, CommitMode::PmemLog] {
        // The first sync is flush_all's, the second the meta page's.
        for nth in [1, 2] {
            let (storage, db, _table, workload) = loaded(mode, 256, 40);
            storage.fail_nth_sync(nth);
            let err = db.checkpoint().expect_err("the checkpoint must fail");
            assert!(err.to_string().contains("injected fault: sync"), "{err}");
            assert_stopped(&db, "injected fault: sync");
            reopen_after_failure(
                &storage,
                db,
                mode,
                &workload.model,
                &format!("{mode}, sync {nth}"),
            );
        }
    }
}

#[test]
fn failed_write_during_eviction_stops_the_database() {
    // `pmem-log` has no log file: every file write is a data page (an eviction here).
    let mode = CommitMode::PmemLog;
    for nth in [1, 2, 5, 9] {
        let (storage, db, table, mut workload) = loaded(mode, SMALL_POOL, 30);
        storage.fail_nth_write(nth);
        let mut failed = None;
        for _ in 0..200 {
            if let Err(f) = workload.step(&db, &table) {
                failed = Some(f);
                break;
            }
        }
        let failed = failed.expect("an eviction write failed");
        assert!(
            failed.error.to_string().contains("injected fault: write"),
            "the failure names its cause: {}",
            failed.error
        );
        assert_stopped(&db, "injected fault: write");
        reopen_after_failure(
            &storage,
            db,
            mode,
            &workload.model,
            &format!("eviction write {nth}"),
        );
    }
}

#[test]
fn failed_write_during_a_read_stops_the_database() {
    // A scan that evicts a dirty page whose write fails: the read fails, and so must every
    // later change, with `Stopped` (not with a storage error the caller might retry).
    let mode = CommitMode::PmemLog;
    let (storage, db, table, workload) = loaded(mode, SMALL_POOL, 200);
    assert!(db.stats().data_pages > 2 * SMALL_POOL as u64);
    storage.fail_nth_write(1);
    let mut txn = db.begin();
    let err = txn
        .scan(
            &table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect_err("a full scan evicts dirty pages");
    assert!(err.to_string().contains("injected fault: write"), "{err}");
    assert!(!err.is_retryable());
    drop(txn);
    assert_stopped(&db, "injected fault: write");
    reopen_after_failure(&storage, db, mode, &workload.model, "write during a read");
}

#[test]
fn transaction_changing_more_pages_than_the_pool_holds_is_refused_without_a_change() {
    // Changed pages stay in the pool until the commit record is appended (no steal): a
    // transaction that changes more pages than there are frames could not be applied, and
    // once it had changed some it could neither finish nor undo them, so it stopped the
    // database (as this test required until decision 135). Its writes' leaves are now
    // counted before anything changes: refused, the database goes on and nothing of the
    // transaction is visible. (Small rows: more bytes than `max_commit_bytes` would be
    // refused by their size; see below.)
    let mode = CommitMode::Fsync;
    let (storage, db, table, workload) = loaded(mode, SMALL_POOL, 100);
    let mut txn = db.begin();
    for i in 0..150 {
        // Spread over the whole key space and every group: many leaves of every tree.
        let item = Item::new(i * 397 % 4_000, i % 8, 5_000_000 + i, 10);
        if txn.insert(&table, &item.values()).is_err() {
            txn.update(&table, &item.values()).unwrap();
        }
    }
    match txn.commit() {
        Err(EngineError::TooManyPages { pages, limit }) => {
            assert!(
                pages > limit && limit == db.max_commit_pages(),
                "{pages} {limit}"
            );
        }
        other => panic!("expected TooManyPages, got {other:?}"),
    }
    verify(&db, &table, &workload.model, "after the refused commit");
    let mut model = workload.model.clone();
    let mut txn = db.begin();
    let item = Item::new(99_999, 0, 7_000_000, 10);
    txn.insert(&table, &item.values()).unwrap();
    txn.commit().expect("a normal commit after the refused one");
    model.insert(item.id, item);
    let (db, table) = recover(
        &crash_and_drop(&storage, db, Crash::PowerCut(5)),
        mode,
        &model,
        "after a power cut",
    );
    drop((db, table));
}

#[test]
fn transaction_writing_more_than_a_commit_may_is_refused_without_a_change() {
    // More bytes than the log or the pool can take in one commit: refused before any page
    // changes, so the database goes on and nothing of the transaction is visible.
    let mode = CommitMode::Buffer;
    let (_storage, db, table, workload) = loaded(mode, SMALL_POOL, 100);
    let limit = db.max_commit_bytes();
    let mut txn = db.begin();
    let mut written = 0;
    let mut id = 100_000;
    // The insert that crosses the limit is refused at once; the commit refuses too.
    let crossing = loop {
        let item = Item::new(id, 0, 6_000_000 + id, support::MAX_NOTE);
        match txn.insert(&table, &item.values()) {
            Ok(()) => written += support::MAX_NOTE,
            Err(err) => break err,
        }
        assert!(written <= limit, "an insert past the limit was taken");
        id += 1;
    };
    match crossing {
        EngineError::TooLarge { bytes, limit: l } => assert!(bytes > l && l == limit),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    match txn.commit() {
        Err(EngineError::TooLarge { bytes, limit: l }) => assert!(bytes > l && l == limit),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let mut txn = db.begin();
    assert!(
        txn.get(&table, &key(100_000)).unwrap().is_none(),
        "nothing was applied"
    );
    txn.commit().unwrap();
    assert_eq!(db.check().unwrap(), 3 * workload.model.len() as u64);
    // And the database still takes commits.
    let mut txn = db.begin();
    txn.insert(&table, &Item::new(99_999, 0, 7_000_000, 10).values())
        .unwrap();
    txn.commit().expect("a normal commit after the refused one");
}

// ---------------------------------------------------------------------------------------------
// Torn and corrupt pages.

/// Flips bytes in the middle of page `page` of the data file of `storage`.
fn corrupt_page(storage: &SimStorage, page: u64) {
    let mut bytes = storage.file_bytes(SIM_DATA_FILE).expect("data file");
    let at = page as usize * PAGE_SIZE + PAGE_SIZE / 2;
    assert!(bytes.len() >= at + 16, "page {page} is in the file");
    for b in &mut bytes[at..at + 16] {
        *b ^= 0x5a;
    }
    storage.set_file_bytes(SIM_DATA_FILE, bytes);
}

/// The kind byte of every page of the data file from page 8 on.
fn page_kinds(storage: &SimStorage) -> Vec<(u64, u8)> {
    let bytes = storage.file_bytes(SIM_DATA_FILE).expect("data file");
    (8..(bytes.len() / PAGE_SIZE) as u64)
        .map(|p| (p, bytes[p as usize * PAGE_SIZE + 4]))
        .collect()
}

const LEAF: u8 = 4;

/// Whether `err` reports page `page` as corrupt.
fn names_corrupt_page(err: &EngineError, page: u64) -> bool {
    match err {
        EngineError::Storage(StorageError::Corrupt { page_id, .. }) => page_id.0 == page,
        EngineError::Corrupt(why) => why.contains(&format!("page {page}")),
        _ => false,
    }
}

/// The first table's row tree is rooted at the first data page.
const ROOT: u64 = 8;

#[test]
fn corrupt_page_without_an_image_in_the_log_is_reported() {
    // The root of `items` is not changed after the checkpoint (only another table is), so
    // the log holds no image of it: a corrupt copy on disk must stop the open, naming it.
    let mode = CommitMode::Fsync;
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &sim_config(mode, 256)).unwrap();
    let table = create_items(&db);
    let other = db.create_table("other", &items_schema()).unwrap();
    let mut txn = db.begin();
    for id in 0..5 {
        txn.insert(&table, &Item::new(id, 0, id, 10).values())
            .unwrap();
    }
    txn.commit().unwrap();
    db.checkpoint().unwrap();
    let mut txn = db.begin();
    txn.insert(&other, &Item::new(1, 0, 1, 20).values())
        .unwrap();
    txn.commit().unwrap();
    let after = crash_and_drop(&storage, db, Crash::Process);
    corrupt_page(&after, ROOT);
    match open_sim(&after, &sim_config(mode, 256)) {
        Err(err) => {
            assert!(
                names_corrupt_page(&err, ROOT),
                "the error should name page {ROOT}: {err}"
            );
            assert!(err.to_string().contains(&format!("page {ROOT}")), "{err}");
        }
        Ok(_) => panic!("opening must not succeed with a corrupt root page"),
    }
}

/// A log copied back from an older state of the database (or one whose tail the media
/// dropped) beside a data file that already holds pages written after it: such a page is
/// reported as corrupt, naming why, and never used. Used, it would hide commits: redo skips a
/// record whose LSN is at or below the page's, and the commits logged next take those LSNs.
#[test]
fn pages_newer_than_an_older_copy_of_the_log_are_refused() {
    let mode = CommitMode::Fsync;
    let (storage, db, table, mut workload) = loaded(mode, SMALL_POOL, 20);
    db.checkpoint().unwrap();
    let mut step = |db: &Database| {
        if let Err(f) = workload.step(db, &table) {
            panic!("{mode}: {}", f.error);
        }
    };
    (0..10).for_each(|_| step(&db));
    let older_log = storage.file_bytes(SIM_LOG_FILE).expect("the log file");
    let evicted = db.stats().pool.evictions;
    (0..150).for_each(|_| step(&db));
    assert!(
        db.stats().pool.evictions > evicted + 50,
        "pages changed after the copy must reach the data file"
    );
    let after = crash_and_drop(&storage, db, Crash::Process);
    after.set_file_bytes(SIM_LOG_FILE, older_log);
    let opened_and_read = open_sim(&after, &sim_config(mode, SMALL_POOL)).and_then(|(db, _)| {
        db.check()?;
        db.close()
    });
    match opened_and_read {
        Err(EngineError::Storage(StorageError::Corrupt { reason, .. })) => {
            assert!(reason.contains("past the log's end"), "{reason}")
        }
        other => panic!("a page newer than the log must be refused: {other:?}"),
    }
}

/// Five rows, a checkpoint, then three updates of one row in the root leaf; the process
/// crashes and the root, written by the checkpoint (or since, as an eviction or a checkpoint
/// cut short by the crash would), is torn on disk. Returns the storage and the committed rows.
fn torn_root_after_three_updates(mode: CommitMode) -> (SimStorage, Model) {
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &sim_config(mode, 256)).unwrap();
    let table = create_items(&db);
    let mut model = Model::new();
    let mut txn = db.begin();
    for id in 0..5 {
        let item = Item::new(id, 0, id, 10);
        txn.insert(&table, &item.values()).unwrap();
        model.insert(id, item);
    }
    txn.commit().unwrap();
    db.checkpoint().unwrap();
    for round in 0..3 {
        let item = Item::new(2, round, 100 + round, 20);
        let mut txn = db.begin();
        txn.update(&table, &item.values()).unwrap();
        txn.commit().unwrap();
        model.insert(2, item);
    }
    let after = crash_and_drop(&storage, db, Crash::Process);
    corrupt_page(&after, ROOT);
    (after, model)
}

#[test]
fn torn_page_changed_after_the_checkpoint_is_rebuilt_from_its_full_page_image() {
    // The first of the small changes after the checkpoint carries a full image of the root
    // (first change since the checkpoint), so the torn copy on disk is rebuilt by redo
    // instead of stopping recovery.
    let mode = CommitMode::Fsync;
    let (after, model) = torn_root_after_three_updates(mode);
    let (db, report) = open_sim(&after, &sim_config(mode, 256))
        .expect("the full-page image in the log rebuilds the page");
    assert_eq!(report.recovery.records, 3);
    let table = db.table("items").unwrap();
    verify(&db, &table, &model, "after rebuilding a torn root");
    db.close().unwrap();
}

/// Puts the double-write area's synced mark back to none, as it was before the first sync:
/// the root torn after the checkpoint's sync stands for a root torn by a write that a crash
/// cut short before its sync (the restore checks only the copies no sync covered).
fn forget_synced_mark(storage: &SimStorage) {
    let area = tailstore_engine::doublewrite_path(std::path::Path::new(SIM_PMEM));
    let mut bytes = storage.region_bytes(&area).expect("double-write area");
    // Both of its records (`doublewrite.rs`).
    for at in [64, 128] {
        bytes[at..at + 12].fill(0);
    }
    storage.set_region_bytes(&area, bytes);
}

#[test]
fn torn_page_is_restored_from_the_double_write_area_in_pmem_modes() {
    // In the PMEM modes a page is copied to the double-write area before every write, and
    // the log holds no full-page images: the three small updates after the checkpoint log
    // well under a page. The root, written by the checkpoint and then torn, comes back from
    // its copy before redo applies the updates to it.
    for mode in [CommitMode::Buffer, CommitMode::PmemLog] {
        let (after, model) = torn_root_after_three_updates(mode);
        forget_synced_mark(&after);
        let (db, report) = open_sim(&after, &sim_config(mode, 256))
            .unwrap_or_else(|e| panic!("{mode}: the copy restores the page: {e}"));
        assert_eq!(report.recovery.torn_pages_restored, 1, "{mode}");
        assert_eq!(report.recovery.records, 3, "{mode}");
        assert!(
            report.recovery.bytes < PAGE_SIZE as u64,
            "{mode}: no full-page image in the log ({} bytes)",
            report.recovery.bytes
        );
        let table = db.table("items").unwrap();
        verify(
            &db,
            &table,
            &model,
            &format!("{mode}: after restoring a torn root"),
        );
        db.close().unwrap();
    }
}

#[test]
fn torn_page_with_an_image_in_the_log_is_rebuilt() {
    // Redo must rebuild the root from the image before anything reads it (opening the
    // table's trees reads their roots).
    let mode = CommitMode::Fsync;
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &sim_config(mode, 256)).unwrap();
    let table = create_items(&db);
    let mut model = Model::new();
    let mut txn = db.begin();
    for id in 0..5 {
        let item = Item::new(id, 0, id, 10);
        txn.insert(&table, &item.values()).unwrap();
        model.insert(id, item);
    }
    txn.commit().unwrap();
    db.checkpoint().unwrap();
    // The first transaction after the checkpoint splits the root leaf (more rows than a
    // page holds), so the log holds images of the root (the split's own, whether or not
    // full-page images are logged); the later ones change the leaves below it.
    for chunk in 0..4 {
        let mut txn = db.begin();
        for id in (5 + chunk * 30)..(5 + (chunk + 1) * 30) {
            let item = Item::new(id, 0, id, 300);
            txn.insert(&table, &item.values()).unwrap();
            model.insert(id, item);
        }
        txn.commit().unwrap();
    }
    let after = crash_and_drop(&storage, db, Crash::Process);
    corrupt_page(&after, ROOT);
    let (db, report) =
        open_sim(&after, &sim_config(mode, 256)).expect("the image in the log rebuilds the page");
    assert!(report.recovery.records >= 4);
    let table = db.table("items").unwrap();
    verify(&db, &table, &model, "after rebuilding a torn root");
    db.close().unwrap();
}

#[test]
fn corrupt_leaf_is_reported_never_read() {
    // A leaf the log does not touch after the checkpoint is corrupted on disk (bit rot).
    let mode = CommitMode::Fsync;
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &sim_config(mode, 256)).unwrap();
    let table = create_items(&db);
    let mut model = Model::new();
    for chunk in 0..4 {
        let mut txn = db.begin();
        for id in chunk * 50..(chunk + 1) * 50 {
            let item = Item::new(id, id % 3, id, 200);
            txn.insert(&table, &item.values()).unwrap();
            model.insert(id, item);
        }
        txn.commit().unwrap();
    }
    db.close().unwrap();
    let leaves: Vec<u64> = page_kinds(&storage)
        .into_iter()
        .filter(|&(_, kind)| kind == LEAF)
        .map(|(p, _)| p)
        .collect();
    assert!(leaves.len() > 4, "the rows span several leaves");
    let victim = leaves[leaves.len() / 2];
    corrupt_page(&storage, victim);
    let db = match open_sim(&storage, &sim_config(mode, 256)) {
        Err(err) => {
            assert!(names_corrupt_page(&err, victim), "{err}");
            return;
        }
        Ok((db, _)) => db,
    };
    let table = db.table("items").unwrap();
    let err = db.check().expect_err("check reads every page");
    assert!(names_corrupt_page(&err, victim), "{err}");
    let mut txn = db.begin();
    let err = txn
        .scan(
            &table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect_err("a full scan reads the corrupt leaf");
    assert!(names_corrupt_page(&err, victim), "{err}");
    // Point reads: the right row or an error naming the page, never a wrong answer.
    let mut errors = 0;
    for id in -1..=200 {
        match txn.get(&table, &key(id)) {
            Ok(row) => assert_eq!(row.map(|r| Item::from_values(&r)).as_ref(), model.get(&id)),
            Err(err) => {
                assert!(names_corrupt_page(&err, victim), "{err}");
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "some keys live in the corrupt leaf");
}

// ---------------------------------------------------------------------------------------------
// Bad input.

#[test]
fn missing_data_directory_is_an_open_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = tailstore_engine::DbConfig::new(dir.path().join("nope"), CommitMode::Fsync, None);
    match Database::open(config) {
        Err(EngineError::Open(why)) => assert!(why.contains("nope"), "{why}"),
        other => panic!("expected an Open error, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn a_database_open_elsewhere_is_refused() {
    // Two processes on one database would each recover and write over the other's log;
    // the second open must fail at once, naming the data file, and change nothing.
    let (_dir, config) = closed_db(CommitMode::Buffer);
    let (db, _) = Database::open(config.clone()).expect("first open");
    match Database::open(config.clone()) {
        Err(EngineError::Media(tailstore_media::MediaError::Locked(path))) => {
            assert!(path.contains(DATA_FILE_NAME), "{path}")
        }
        other => panic!("expected Locked, got {:?}", other.map(|_| ())),
    }
    let table = db.table("items").expect("items");
    let mut txn = db.begin();
    assert!(txn.get(&table, &key(1)).unwrap().is_some());
    txn.commit().unwrap();
    // (A table handle keeps the data file open, so it goes first.)
    drop(table);
    db.close().unwrap();
    // Once closed, it opens again.
    let (db, _) = Database::open(config).expect("open after the first closed");
    db.close().unwrap();
}

/// Regression (was a bug, found by the SIGKILL test in CI): creating the double-write
/// area makes its file, then sizes it; a kill in between left an empty file, and every later
/// open failed with "<area> is 0 bytes, need at least 1". An empty area never held a copy.
#[test]
fn an_empty_double_write_area_left_by_a_cut_creation_is_created_again() {
    for mode in [CommitMode::Buffer, CommitMode::PmemLog] {
        let (_dir, config) = closed_db(mode);
        let area = config.doublewrite_file().expect("a PMEM mode has an area");
        std::fs::write(&area, b"").unwrap();
        let (db, _) = Database::open(config.clone())
            .unwrap_or_else(|e| panic!("{mode}: open over an empty area: {e}"));
        let table = db.table("items").expect("items");
        let mut txn = db.begin();
        assert!(txn.get(&table, &key(1)).unwrap().is_some(), "{mode}");
        txn.commit().unwrap();
        drop(table);
        db.close().unwrap();
        assert!(std::fs::metadata(&area).unwrap().len() > 0, "{mode}");
    }
}

/// A database in a temporary directory with one table and a few rows, closed.
fn closed_db(mode: CommitMode) -> (TempDb, tailstore_engine::DbConfig) {
    let dir = TempDb::new("bad-input");
    let config = dir.config(mode);
    let (db, _) = Database::open(config.clone()).unwrap();
    let table = create_items(&db);
    let mut txn = db.begin();
    txn.insert(&table, &Item::new(1, 1, 1, 1).values()).unwrap();
    txn.commit().unwrap();
    db.close().unwrap();
    (dir, config)
}

#[test]
fn garbage_meta_pages_are_a_corrupt_error() {
    let (dir, config) = closed_db(CommitMode::Fsync);
    let path = dir.dir.path().join(DATA_FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    // One slot garbled: the other one (the previous checkpoint) is used.
    let slot = 4 * PAGE_SIZE;
    let newest_first = bytes[..slot].to_vec();
    for b in &mut bytes[..slot] {
        *b = 0xA5;
    }
    std::fs::write(&path, &bytes).unwrap();
    let opened = Database::open(config.clone());
    // Which slot holds the newest checkpoint depends on how many there were; either way one
    // intact slot is enough to open.
    let (db, _) = opened.expect("one valid meta slot is enough");
    db.close().unwrap();
    // Both garbled.
    let mut bytes = std::fs::read(&path).unwrap();
    for b in &mut bytes[..2 * slot] {
        *b = 0x5A;
    }
    std::fs::write(&path, &bytes).unwrap();
    match Database::open(config.clone()) {
        Err(EngineError::Corrupt(why)) => assert!(why.contains("meta"), "{why}"),
        other => panic!("expected a Corrupt error, got {:?}", other.map(|_| ())),
    }
    // A file too short to hold the meta pages.
    std::fs::write(&path, &newest_first[..100]).unwrap();
    assert!(matches!(
        Database::open(config),
        Err(EngineError::Corrupt(_))
    ));
}

/// A file of another program where the data file goes, with no log, is refused and left as
/// it is. Any such file of up to eight pages used to be taken for a creation cut short and
/// written over with an empty database.
#[test]
fn a_foreign_file_in_the_data_file_s_place_is_left_as_it_is() {
    for mode in [CommitMode::Fsync, CommitMode::Buffer] {
        let dir = TempDb::new("foreign");
        let path = dir.dir.path().join(DATA_FILE_NAME);
        let notes = b"my important notes\n".repeat(100);
        std::fs::write(&path, &notes).unwrap();
        match Database::open(dir.config(mode)) {
            Err(EngineError::Open(why)) => {
                assert!(why.contains("is not a tailstore data file"), "{why}")
            }
            other => panic!(
                "{mode}: expected an Open error, got {:?}",
                other.map(|_| ())
            ),
        }
        assert_eq!(std::fs::read(&path).unwrap(), notes, "{mode}");
    }
}

#[test]
fn a_data_file_of_another_page_size_is_refused_naming_both_sizes() {
    // A data file written by a build of other pages, as the builds of 8 KiB pages wrote it
    // (zero where the meta record now names the size): its slot 0, sealed at 8 KiB.
    let (dir, config) = closed_db(CommitMode::Fsync);
    let path = dir.dir.path().join(DATA_FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    let recorded = HEADER_SIZE + 12;
    assert_eq!(
        bytes[recorded..recorded + 4],
        (PAGE_SIZE as u32).to_le_bytes()
    );
    let other = if PAGE_SIZE == 8192 { 16384 } else { 8192 };
    bytes.resize(bytes.len().max(other), 0);
    let unrecorded: u32 = if other == 8192 { 0 } else { other as u32 };
    bytes[recorded..recorded + 4].copy_from_slice(&unrecorded.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[4..other]);
    bytes[..4].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    match Database::open(config.clone()) {
        Err(EngineError::Open(why)) => assert!(
            why.contains(&format!("{other}-byte pages"))
                && why.contains(&format!("{PAGE_SIZE}-byte pages")),
            "{why}"
        ),
        other => panic!("expected an Open error, got {:?}", other.map(|_| ())),
    }
    // Not proof: the same size named, the checksum broken at it. Slot 0 is then damaged,
    // nothing more (slot 1, if valid, opens the database).
    bytes[100] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    match Database::open(config) {
        Err(EngineError::Open(why)) => panic!("a damaged page taken for another size: {why}"),
        Ok((db, _)) => db.close().unwrap(),
        Err(_) => {}
    }
}

#[test]
fn log_without_data_file_is_an_error() {
    for mode in [CommitMode::Fsync, CommitMode::PmemLog] {
        let (dir, config) = closed_db(mode);
        std::fs::remove_file(dir.dir.path().join(DATA_FILE_NAME)).unwrap();
        match Database::open(config) {
            Err(EngineError::Open(why)) => assert!(why.contains("no data file"), "{mode}: {why}"),
            other => panic!(
                "{mode}: expected an Open error, got {:?}",
                other.map(|_| ())
            ),
        }
    }
}

#[test]
fn data_file_without_its_log_is_an_error() {
    let (dir, config) = closed_db(CommitMode::Fsync);
    std::fs::remove_file(config.log.log_file()).unwrap();
    match Database::open(config) {
        Err(EngineError::Open(why)) => assert!(why.contains("missing"), "{why}"),
        other => panic!("expected an Open error, got {:?}", other.map(|_| ())),
    }
    drop(dir);
}

/// A log that lost its tail (its last record cut short) ends before the checkpoint that
/// the data file names: the open refuses it, never going on from the shorter end.
#[test]
fn a_log_ending_before_the_checkpoint_is_an_error() {
    let dir = TempDb::new("short-log");
    let config = dir.config(CommitMode::Fsync);
    let (db, _) = Database::open(config.clone()).unwrap();
    let table = create_items(&db);
    let mut txn = db.begin();
    txn.insert(&table, &Item::new(1, 1, 1, 1).values()).unwrap();
    txn.commit().unwrap();
    let end = db.log().appended_lsn();
    db.close().unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(config.log.log_file())
        .unwrap();
    file.set_len(end - 8).unwrap();
    drop(file);
    match Database::open(config) {
        Err(EngineError::Open(why)) => {
            assert!(
                why.contains("before the data file's checkpoint") && why.contains("lost its tail"),
                "{why}"
            )
        }
        other => panic!("expected an Open error, got {:?}", other.map(|_| ())),
    }
}

/// A data file cut short (a partial copy, a truncate) past its trees' roots: the open names
/// the page past the end and the page count the checkpoint recorded, rather than only
/// "outside the data pages".
#[test]
fn a_data_file_cut_short_is_named_as_such() {
    let mode = CommitMode::Fsync;
    let (storage, db, _, _) = loaded(mode, SMALL_POOL, 120);
    db.close().unwrap();
    let mut bytes = storage.file_bytes(SIM_DATA_FILE).expect("the data file");
    let roots_end = (ROOT + 2 * support::ITEM_TREES) as usize * PAGE_SIZE;
    assert!(
        bytes.len() > 2 * roots_end,
        "the trees have pages past their roots"
    );
    bytes.truncate(roots_end);
    storage.set_file_bytes(SIM_DATA_FILE, bytes);
    match open_sim(&storage, &sim_config(mode, SMALL_POOL)) {
        Err(EngineError::Corrupt(why)) => {
            assert!(why.contains("past the data file's end"), "{why}");
            assert!(why.contains("cut short"), "{why}");
        }
        other => panic!("expected a corrupt file, got {:?}", other.map(|_| ())),
    }
}

/// A crash at any point while a database is being created (the medium dying at each of the
/// creation's operations in turn, then a process crash or a power cut) leaves a directory
/// that opens as an empty database: nothing was ever committed there.
#[test]
fn a_crash_while_a_database_is_created_leaves_one_that_opens() {
    for mode in [CommitMode::Fsync, CommitMode::Buffer, CommitMode::PmemLog] {
        let config = sim_config(mode, SMALL_POOL);
        let creation_ops = {
            let storage = SimStorage::new();
            let (db, _) = open_sim(&storage, &config).expect("create");
            let ops = storage.ops_done();
            drop(db);
            ops
        };
        for k in 0..=creation_ops {
            for crash in [Crash::Process, Crash::PowerCut(k)] {
                let storage = SimStorage::new();
                storage.crash_after(k);
                if let Ok((db, _)) = open_sim(&storage, &config) {
                    storage.crash_after(0);
                    drop(db);
                }
                let what = format!("{mode}: creation died at operation {k}, {crash:?}");
                let (db, _) = open_sim(&image(&storage, crash), &config)
                    .unwrap_or_else(|e| panic!("{what}: the reopen failed: {e}"));
                assert!(db.table("items").is_err(), "{what}: a table appeared");
            }
        }
    }
}

/// With `record_replay_floor`, `max_replay_bytes` bounds the records a restart replays,
/// not only their bytes: a log of small records (one-row updates without a note) is cut at
/// about `LIMIT / FLOOR` records, where a bound in bytes alone lets many times more through.
#[test]
fn a_record_floor_bounds_the_records_a_restart_replays() {
    const LIMIT: u64 = 64 << 10;
    const FLOOR: u64 = 2 << 10;
    // One writer: at most its own record passes the bound before its checkpoint.
    const MOST_RECORDS: u64 = LIMIT / FLOOR + 1;
    for mode in [CommitMode::Fsync, CommitMode::Buffer] {
        let replayed = |floor: u64| {
            let mut config = sim_config(mode, 4 * SMALL_POOL);
            config.max_replay_bytes = Some(LIMIT);
            config.record_replay_floor = floor;
            let storage = SimStorage::new();
            let (db, _) = open_sim(&storage, &config).expect("create");
            let table = create_items(&db);
            let mut model = Model::new();
            for i in 0..3_000 {
                let item = Item::new(i % 50, 0, i, 0);
                let mut txn = db.begin();
                let result = if model.contains_key(&item.id) {
                    txn.update(&table, &item.values())
                } else {
                    txn.insert(&table, &item.values())
                };
                result.and_then(|_| txn.commit()).expect("commit");
                model.insert(item.id, item);
            }
            let stats = db.stats();
            assert!(
                stats.weight_since_checkpoint <= LIMIT + FLOOR,
                "{mode}: {stats:?}"
            );
            let after = crash_and_drop(&storage, db, Crash::Process);
            let (db, report) = open_sim(&after, &config).expect("reopen");
            let table = db.table("items").expect("items");
            verify(&db, &table, &model, &format!("{mode}, floor {floor}"));
            report.recovery.records
        };
        let with_floor = replayed(FLOOR);
        assert!(
            (1..=MOST_RECORDS).contains(&with_floor),
            "{mode}: {with_floor} records replayed, at most {MOST_RECORDS} expected"
        );
        let bytes_only = replayed(0);
        assert!(
            bytes_only > 4 * MOST_RECORDS,
            "{mode}: the records should be small ({bytes_only} replayed without a floor)"
        );
    }
}

/// With `max_replay_bytes`, a restart after a crash replays at most about that much log,
/// although no checkpoint ever comes due by volume or time here: writers that find that
/// much unreleased run one before they change anything. Without it, the same workload's
/// restart replays all of its log.
#[test]
fn max_replay_bounds_what_a_restart_replays() {
    const LIMIT: u64 = 128 << 10;
    // A transaction already past the wait may add its record (the workload's are under
    // 80 KiB) before the checkpoint that another writer runs releases the log.
    const SLACK: u64 = 96 << 10;
    for mode in [CommitMode::Fsync, CommitMode::Buffer] {
        let replayed = move |bound: Option<u64>, keep: u64| {
            let mut config = sim_config(mode, 4 * SMALL_POOL);
            config.max_replay_bytes = bound;
            config.checkpoint_keep_bytes = keep;
            let storage = SimStorage::new();
            let (db, _) = open_sim(&storage, &config).expect("create");
            let table = create_items(&db);
            let mut workload = Workload::new(23);
            for i in 0..TXNS {
                if let Err(failed) = workload.step(&db, &table) {
                    panic!("{mode}: transaction {i} failed: {}", failed.error);
                }
            }
            let stats = db.stats();
            let after = crash_and_drop(&storage, db, Crash::Process);
            let (db, report) = open_sim(&after, &config).expect("reopen");
            let table = db.table("items").expect("items");
            verify(
                &db,
                &table,
                &workload.model,
                &format!("{mode}, bound {bound:?}"),
            );
            (report.recovery.bytes, stats)
        };
        let (unbounded, stats) = replayed(None, 0);
        assert!(
            unbounded > 4 * (LIMIT + SLACK),
            "{mode}: the workload should write more log ({unbounded} bytes replayed)"
        );
        // The statistics tell what a restart would replay, and that no writer waited.
        assert_eq!(stats.log_since_checkpoint, unbounded, "{mode}");
        assert_eq!(stats.log_since_checkpoint_limit, None, "{mode}");
        assert_eq!(stats.checkpoint_room_waits, 0, "{mode}");
        // The bound holds also when checkpoints would keep more log than it allows: the
        // writers' own checkpoints keep at most half of it.
        for keep in [0, 4 * LIMIT] {
            // On a thread with a deadline: writers whose checkpoints cannot bring the log
            // under the bound would wait for ever.
            let (done, result) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                // The receiver is gone only if it gave up waiting (and panicked).
                let _ = done.send(replayed(Some(LIMIT), keep));
            });
            let (bounded, stats) = result
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("{mode}, keep {keep}: writers stuck at the bound"));
            assert!(
                bounded <= LIMIT + SLACK,
                "{mode}, keep {keep}: {bounded} bytes replayed with a bound of {LIMIT}"
            );
            // … and here that writers waited at the bound, which is where the log stopped.
            assert_eq!(stats.log_since_checkpoint, bounded, "{mode}");
            assert_eq!(stats.log_since_checkpoint_limit, Some(LIMIT), "{mode}");
            assert!(stats.checkpoint_room_waits > 0, "{mode}: {stats:?}");
        }
    }
}
