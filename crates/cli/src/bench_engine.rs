//! `tailstore bench engine`: the embedded database measured through its public transactional
//! API (`Database::begin`, `Transaction::get` / `insert` / `commit`).
//!
//! Cases (all interleaved, each run rotating the order, median of several runs, like
//! `bench log`):
//! * `lookup`: random point lookups by primary key, one `get` per read-only transaction, in
//!   a table of `--rows` rows whose data fits in the buffer pool, at each `--threads` count;
//! * `lookup-batch`: the same with `--batch` gets per transaction, which separates the cost
//!   of a transaction (begin, validation, commit) from that of a lookup;
//! * `insert`: one row per transaction, in a fresh database per run, in each `--commit` mode
//!   at each thread count; `buffer` is compared with `async` measured in the same runs;
//! * `sweep`: one thread of `lookup` with the pool at 1/8, 1/4, 1/2 and all of the data's
//!   size, with the pages read per lookup.
//!
//! The lookup and sweep table is loaded once ([`workload::LOAD_BATCH`] rows per transaction,
//! in `--load-commit` mode), closed, and reopened for every case with that case's pool size
//! (`DbConfig::buffer_pool_bytes`): reopening a checkpointed database takes a fraction of a
//! second, loading it several seconds, so reopening is the faster way to each sweep point.

mod workload;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::Serialize;
use tailstore_engine::{Database, DbConfig};
use tailstore_log::{CommitMode, LogCounters};
use tailstore_media::real::filesystem_type;
use tailstore_storage::{PoolStats, PAGE_SIZE};

use crate::args::ByteSize;
use crate::latency::LatencySummary;
use crate::report::{
    self, default_scratch_parent, filesystem_of, group, log_medium, median_run, run_interleaved,
    settle_disk, write_json,
};
use crate::CliResult;
use workload::{Rows, Timed, ID_BYTES, LOAD_BATCH, TABLE};

/// Pool sizes of the sweep, as (numerator, denominator) of the data's size.
const SWEEP: [(u64, u64); 4] = [(1, 8), (1, 4), (1, 2), (1, 1)];

/// Pages of slack in a pool meant to hold all data.
const POOL_SLACK_PAGES: u64 = 16;

/// Largest `--row-bytes`: far below the B+tree's largest entry.
const MAX_ROW_BYTES: usize = 1_000;

/// The bars of the issue: lookups per thread in a table of `LOOKUP_BAR_ROWS` rows that the
/// pool holds, and the insert case.
const LOOKUP_BAR: f64 = 1_000_000.0;
const LOOKUP_BAR_ROWS: u64 = 1_000_000;
const BUFFER_TX_BAR: f64 = 200_000.0;
const BUFFER_TX_BAR_THREADS: usize = 2;
const BUFFER_VS_ASYNC_BAR: f64 = 0.8;

#[derive(Args, Debug)]
pub struct BenchEngineArgs {
    /// Cases to run, comma-separated: lookup (one get per read-only transaction, pool holds
    /// all data), lookup-batch (--batch gets per transaction), insert (one row per
    /// transaction, each --commit mode, fresh database per run), sweep (1 thread, pools of
    /// 1/8, 1/4, 1/2, 1/1 of the data), or all.
    #[arg(
        long,
        value_name = "CASE",
        value_delimiter = ',',
        default_value = "all"
    )]
    cases: Vec<CaseName>,
    /// Rows in the table of the lookup and sweep cases (loaded once).
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    rows: u64,
    /// Bytes of column data per row: the id (INT64 primary key, 8 bytes) and a VARCHAR
    /// payload of the rest.
    #[arg(long, value_name = "B", default_value_t = 100)]
    row_bytes: usize,
    /// Threads of the lookup, lookup-batch and insert cases; a comma-separated list runs each
    /// count.
    #[arg(long, value_name = "N", value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Commit modes of the insert case, comma-separated: fsync, buffer, pmem-log, async.
    #[arg(
        long,
        value_name = "MODE",
        value_delimiter = ',',
        default_value = "buffer,async,fsync"
    )]
    commit: Vec<CommitMode>,
    /// Commit mode of the database the lookup table is loaded into (and read in).
    #[arg(long, value_name = "MODE", default_value = "async")]
    load_commit: CommitMode,
    /// Gets per read-only transaction in lookup-batch.
    #[arg(long, value_name = "N", default_value_t = 10)]
    batch: usize,
    /// Buffer pool of each insert database: large enough that a run evicts nothing.
    #[arg(long, value_name = "SIZE", default_value = "512MiB")]
    insert_pool: ByteSize,
    /// Measured seconds per case (after a warm-up of a fifth of this, at most 0.5 s).
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 2.0)]
    seconds: f64,
    /// Runs of every case; the run with the median ops/s is reported.
    #[arg(long, value_name = "N", default_value_t = 3)]
    runs: usize,
    /// Directory for the databases (a fresh subdirectory, removed afterwards). It must be on
    /// a real disk for fsync and buffer to be compared. Default: /var/tmp, else the system's
    /// temporary directory.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Directory of the PMEM files of the buffer and pmem-log modes (created per database,
    /// removed afterwards). Default: /dev/shm (emulated PMEM) when it exists, else the directory
    /// of the databases.
    #[arg(long, value_name = "DIR")]
    pmem_dir: Option<PathBuf>,
    /// Write a JSON array with one object per measured case to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// A `--cases` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CaseName {
    Lookup,
    LookupBatch,
    Insert,
    Sweep,
    All,
}

/// One measured case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// Random lookups, `per_txn` per read-only transaction, pool holding all data.
    Lookup { threads: usize, per_txn: usize },
    /// One row per transaction in a fresh database.
    Insert { threads: usize, mode: CommitMode },
    /// One thread of lookups, pool of `num/den` of the data.
    Sweep { num: u64, den: u64 },
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Lookup { per_txn: 1, .. } => "lookup",
            Case::Lookup { .. } => "lookup-batch",
            Case::Insert { .. } => "insert",
            Case::Sweep { .. } => "sweep",
        }
    }

    fn threads(self) -> usize {
        match self {
            Case::Lookup { threads, .. } | Case::Insert { threads, .. } => threads,
            Case::Sweep { .. } => 1,
        }
    }

    fn per_txn(self) -> usize {
        match self {
            Case::Lookup { per_txn, .. } => per_txn,
            Case::Insert { .. } | Case::Sweep { .. } => 1,
        }
    }

    fn reads_table(self) -> bool {
        !matches!(self, Case::Insert { .. })
    }

    fn pool_fraction(self) -> String {
        match self {
            Case::Lookup { .. } => "all".into(),
            Case::Insert { .. } => "fixed".into(),
            Case::Sweep { num, den } => format!("{num}/{den}"),
        }
    }

    fn label(self) -> String {
        match self {
            Case::Insert { mode, .. } => format!("insert {mode} x{}", self.threads()),
            Case::Sweep { num, den } => format!("sweep {num}/{den}"),
            Case::Lookup { .. } => format!("{} x{}", self.name(), self.threads()),
        }
    }

    /// Pool bytes of a read case over `data_bytes` of data.
    fn pool_bytes(self, data_bytes: u64) -> usize {
        let all = data_bytes + POOL_SLACK_PAGES * PAGE_SIZE as u64;
        let bytes = match self {
            Case::Sweep { num, den } => data_bytes * num / den,
            _ => all,
        };
        bytes as usize
    }
}

/// A PMEM file of one database, removed when dropped.
struct PmemFile(PathBuf);

impl Drop for PmemFile {
    fn drop(&mut self) {
        tailstore_engine::remove_pmem_files(&self.0);
    }
}

/// What the command line asked for, checked.
struct Plan {
    cases: Vec<Case>,
    rows: Rows,
    /// A fresh directory for the databases, removed (with them) at the end.
    scratch: tempfile::TempDir,
    pmem_dir: PathBuf,
    insert_pool: usize,
}

impl Plan {
    /// A PMEM file named for `name` that does not exist yet.
    fn pmem_file(&self, name: &str) -> CliResult<PmemFile> {
        let file = format!("tailstore-bench-engine-{}-{name}.pmem", std::process::id());
        let path = self.pmem_dir.join(file);
        if path.exists() {
            return Err(format!("PMEM file {} already exists", path.display()).into());
        }
        Ok(PmemFile(path))
    }

    fn config(
        &self,
        dir: &Path,
        mode: CommitMode,
        pmem: Option<&PmemFile>,
        pool: usize,
    ) -> DbConfig {
        let mut config = DbConfig::new(dir, mode, pmem.map(|p| p.0.clone()));
        config.buffer_pool_bytes = pool;
        config
    }
}

/// The loaded table of the lookup and sweep cases, closed.
struct Loaded {
    dir: PathBuf,
    mode: CommitMode,
    pmem: Option<PmemFile>,
    rows: u64,
    data_bytes: u64,
}

/// One run of one case.
struct RunResult {
    elapsed: Duration,
    ops: u64,
    txns: u64,
    aborts: u64,
    latency: LatencySummary,
    pool: PoolStats,
    log: LogCounters,
    checkpoints: u64,
    checkpoint_time: Duration,
    pool_bytes: u64,
    data_bytes: u64,
    table_rows: u64,
    medium: String,
}

impl RunResult {
    fn new(timed: &Timed, data_bytes: u64, table_rows: u64, medium: String) -> RunResult {
        let (b, a) = (&timed.before, &timed.after);
        RunResult {
            elapsed: timed.elapsed,
            ops: timed.tally.ops,
            txns: timed.tally.txns,
            aborts: timed.tally.aborts,
            latency: timed.tally.latency.summary_us(),
            pool: pool_delta(&b.pool, &a.pool),
            log: a.log.since(&b.log),
            checkpoints: a.checkpoints - b.checkpoints,
            checkpoint_time: a.checkpoint_time.saturating_sub(b.checkpoint_time),
            pool_bytes: a.pool_pages * PAGE_SIZE as u64,
            data_bytes,
            table_rows,
            medium,
        }
    }

    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
}

fn pool_delta(before: &PoolStats, after: &PoolStats) -> PoolStats {
    PoolStats {
        hits: after.hits - before.hits,
        misses: after.misses - before.misses,
        pages_read: after.pages_read - before.pages_read,
        pages_written: after.pages_written - before.pages_written,
        evictions: after.evictions - before.evictions,
        ..*after
    }
}

/// One reported case: the median run.
#[derive(Clone, Debug, Serialize)]
struct CaseReport {
    case: String,
    threads: usize,
    /// The database's commit mode (for lookups: the mode the table was loaded in).
    commit: String,
    /// Pool size as a fraction of the data ("1/8" … "1/1", "all"; "fixed" for insert).
    pool_fraction: String,
    /// Lookups, or inserted rows (one per transaction).
    ops: u64,
    ops_per_sec: f64,
    ops_per_sec_per_thread: f64,
    /// ops/s of every run, in run order; the report is the median one.
    runs_ops_per_sec: Vec<f64>,
    /// insert: the median over the runs of this mode's ops/s over async's in the same run.
    vs_async: Option<f64>,
    /// insert: the same ratio within each run, in run order.
    vs_async_runs: Vec<f64>,
    ops_per_txn: usize,
    txns: u64,
    txns_per_sec: f64,
    aborts: u64,
    /// Per committed transaction, begin to end of commit.
    latency_us: LatencySummary,
    buffer_pool_bytes: u64,
    data_bytes: u64,
    pages_read: u64,
    pages_read_per_op: f64,
    hits: u64,
    misses: u64,
    evictions: u64,
    pages_written: u64,
    /// Log bytes appended per op (records of the measured transactions).
    log_bytes_per_op: f64,
    /// Log-file writes and fdatasyncs in the measured interval.
    log_disk_writes: u64,
    log_flushes: u64,
    /// Checkpoints that ran in the measured interval, and the time they took (on the
    /// checkpointer thread, which shares the cores with the workers).
    checkpoints: u64,
    checkpoint_seconds: f64,
    seconds: f64,
    /// Rows in the table: loaded (lookups), or inserted by the end of the run (insert).
    table_rows: u64,
    row_bytes: usize,
    /// Where the log is.
    medium: String,
    /// File system of the data files.
    data_medium: String,
}

pub fn run(args: &BenchEngineArgs) -> CliResult<()> {
    let plan = plan(args)?;
    print_header(args, &plan);
    let loaded = match plan.cases.iter().any(|c| c.reads_table()) {
        true => Some(load_table(args, &plan)?),
        false => None,
    };
    let mut seq = 0;
    let runs = run_interleaved(
        &plan.cases,
        args.runs,
        |c| c.label(),
        |&case| {
            seq += 1;
            measure(args, &plan, loaded.as_ref(), case, seq)
        },
    )?;
    let data_medium = filesystem_of(plan.scratch.path());
    let mut reports: Vec<CaseReport> = plan
        .cases
        .iter()
        .zip(runs)
        .map(|(&case, results)| report(args, case, results, &data_medium))
        .collect();
    compare_with_async(&mut reports);
    print_table(&reports);
    print_notes(&reports);
    print_bars(&reports);
    if let Some(path) = &args.json {
        write_json(path, &reports)?;
    }
    Ok(())
}

fn plan(args: &BenchEngineArgs) -> CliResult<Plan> {
    crate::report::check_output("--json", args.json.as_deref())?;
    check_numbers(args)?;
    let cases = plan_cases(args)?;
    let parent = match &args.dir {
        Some(dir) if !dir.is_dir() => {
            return Err(format!("--dir: directory does not exist: {}", dir.display()).into())
        }
        Some(dir) => dir.clone(),
        None => default_scratch_parent(),
    };
    let scratch = tempfile::Builder::new()
        .prefix("tailstore-bench-engine-")
        .tempdir_in(&parent)
        .map_err(|e| format!("cannot create a directory in {}: {e}", parent.display()))?;
    let pmem_dir = report::pmem_dir(args.pmem_dir.as_ref(), scratch.path(), 0)?;
    crate::interrupt::clean_up_on_signals("tailstore bench engine")?;
    crate::interrupt::remove_dir_on_interrupt(scratch.path());
    let own_files = format!("tailstore-bench-engine-{}-", std::process::id());
    crate::interrupt::remove_named_on_interrupt(&pmem_dir, &own_files);
    Ok(Plan {
        cases,
        rows: Rows {
            row_bytes: args.row_bytes,
        },
        scratch,
        pmem_dir,
        insert_pool: args.insert_pool.0,
    })
}

fn check_numbers(args: &BenchEngineArgs) -> CliResult<()> {
    crate::report::check_run_options(&args.threads, args.seconds, args.runs)?;
    if args.rows == 0 {
        return Err("--rows must be at least 1".into());
    }
    if !(ID_BYTES + 1..=MAX_ROW_BYTES).contains(&args.row_bytes) {
        return Err(format!(
            "--row-bytes must be between {} (the 8-byte id and a 1-byte payload) and {MAX_ROW_BYTES}",
            ID_BYTES + 1
        )
        .into());
    }
    // One transaction holds a batch's reads, and the time window is looked at between
    // transactions: a batch of billions never ended.
    if !(1..=MAX_BATCH).contains(&args.batch) {
        return Err(format!("--batch must be between 1 and {MAX_BATCH}").into());
    }
    if args.insert_pool.0 < 1 << 20 {
        return Err("--insert-pool must be at least 1MiB".into());
    }
    Ok(())
}

/// The most gets `lookup-batch` puts in one transaction.
const MAX_BATCH: usize = 100_000;

fn plan_cases(args: &BenchEngineArgs) -> CliResult<Vec<Case>> {
    let wants = |name| args.cases.contains(&name) || args.cases.contains(&CaseName::All);
    let mut threads = args.threads.clone();
    threads.sort_unstable();
    threads.dedup();
    let modes = crate::report::distinct(&args.commit);
    if wants(CaseName::Insert) && modes.is_empty() {
        return Err("--commit needs at least one mode for the insert case".into());
    }
    let mut cases = Vec::new();
    for &t in &threads {
        if wants(CaseName::Lookup) {
            cases.push(Case::Lookup {
                threads: t,
                per_txn: 1,
            });
        }
        if wants(CaseName::LookupBatch) {
            cases.push(Case::Lookup {
                threads: t,
                per_txn: args.batch,
            });
        }
    }
    if wants(CaseName::Insert) {
        for &t in &threads {
            cases.extend(modes.iter().map(|&mode| Case::Insert { threads: t, mode }));
        }
    }
    if wants(CaseName::Sweep) {
        cases.extend(SWEEP.iter().map(|&(num, den)| Case::Sweep { num, den }));
    }
    Ok(cases)
}

fn print_header(args: &BenchEngineArgs, plan: &Plan) {
    let rows = plan.rows;
    println!(
        "tailstore bench engine: {}-byte rows (id INT64 primary key + VARCHAR({}) payload), {} s per case, median of {} run(s), cases interleaved",
        rows.row_bytes, rows.payload_len(), args.seconds, args.runs
    );
    let dir = plan.scratch.path();
    println!("directory:  {} ({})", dir.display(), filesystem_of(dir));
    let pmem_used = args
        .commit
        .iter()
        .chain([&args.load_commit])
        .any(|m| m.uses_pmem());
    if pmem_used {
        let pmem = &plan.pmem_dir;
        let fs = filesystem_type(pmem).unwrap_or_else(|| "unknown fs".into());
        println!(
            "PMEM files: {} ({fs}; the medium lines below say what it is)",
            pmem.display()
        );
    }
    let on_memory = filesystem_of(dir).starts_with("tmpfs");
    if on_memory && plan.cases.iter().any(|c| matches!(c, Case::Insert { .. })) {
        println!("warning:    the directory is on tmpfs: fsync is a no-op there, so the commit modes are not compared against a disk (use --dir on a disk)");
    }
}

/// Creates the table, loads it ([`LOAD_BATCH`] rows per transaction), checks it and closes
/// it (a checkpoint: every page is in the data file).
fn load_table(args: &BenchEngineArgs, plan: &Plan) -> CliResult<Loaded> {
    let dir = plan.scratch.path().join("table");
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mode = args.load_commit;
    let pmem = mode
        .uses_pmem()
        .then(|| plan.pmem_file("table"))
        .transpose()?;
    // Roughly twice the rows' bytes (half-full leaves after splits), so nothing is evicted.
    let estimate = args.rows as usize * (args.row_bytes + 32) * 5 / 2 + (16 << 20);
    let config = plan.config(&dir, mode, pmem.as_ref(), estimate);
    let began = Instant::now();
    let (db, _) = Database::open(config)?;
    let table = db.create_table(TABLE, &plan.rows.schema()?)?;
    workload::load(&db, &table, plan.rows, args.rows)?;
    let seconds = began.elapsed().as_secs_f64();
    let entries = db.check()?;
    if entries != args.rows {
        return Err(format!("loaded {} rows but the table holds {entries}", args.rows).into());
    }
    let data_bytes = db.data_bytes();
    db.close()?;
    println!(
        "loaded {} rows in {seconds:.2} s ({:.0} rows/s, {LOAD_BATCH} per transaction, commit {mode}); data {:.1} MiB ({} pages); closed in {:.2} s",
        group(args.rows),
        args.rows as f64 / seconds,
        data_bytes as f64 / (1 << 20) as f64,
        data_bytes / PAGE_SIZE as u64,
        began.elapsed().as_secs_f64() - seconds
    );
    Ok(Loaded {
        dir,
        mode,
        pmem,
        rows: args.rows,
        data_bytes,
    })
}

fn measure(
    args: &BenchEngineArgs,
    plan: &Plan,
    loaded: Option<&Loaded>,
    case: Case,
    seq: u64,
) -> CliResult<RunResult> {
    settle_disk();
    match (case, loaded) {
        (Case::Insert { threads, mode }, _) => measure_insert(args, plan, mode, threads, seq),
        (_, Some(loaded)) => measure_lookups(args, plan, loaded, case, seq),
        (_, None) => Err("internal: a lookup case without a loaded table".into()),
    }
}

/// Reopens the loaded table with the case's pool, reads it all once, then runs lookups.
fn measure_lookups(
    args: &BenchEngineArgs,
    plan: &Plan,
    loaded: &Loaded,
    case: Case,
    seq: u64,
) -> CliResult<RunResult> {
    let pool = case.pool_bytes(loaded.data_bytes);
    let config = plan.config(&loaded.dir, loaded.mode, loaded.pmem.as_ref(), pool);
    let (db, _) = Database::open(config.clone())?;
    let table = db.table(TABLE)?;
    workload::warm(&db, &table, loaded.rows)?;
    let (rows, count, per_txn) = (plan.rows, loaded.rows, case.per_txn());
    let timed = workload::drive(&db, case.threads(), args.seconds, seq, |rng| {
        workload::lookup_step(&db, &table, rows, count, per_txn, rng)
    })?;
    let medium = log_medium(db.log(), &config.log);
    let result = RunResult::new(&timed, loaded.data_bytes, count, medium);
    db.close()?;
    Ok(result)
}

/// A fresh database with an empty table, then single-row insert transactions.
fn measure_insert(
    args: &BenchEngineArgs,
    plan: &Plan,
    mode: CommitMode,
    threads: usize,
    seq: u64,
) -> CliResult<RunResult> {
    // Kept until the end: deleting large files keeps the file system busy during later cases.
    let dir = plan
        .scratch
        .path()
        .join(format!("insert-{seq}-{mode}-x{threads}"));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let pmem = mode
        .uses_pmem()
        .then(|| plan.pmem_file(&format!("insert-{seq}")))
        .transpose()?;
    let config = plan.config(&dir, mode, pmem.as_ref(), plan.insert_pool);
    let (db, _) = Database::open(config.clone())?;
    let table = db.create_table(TABLE, &plan.rows.schema()?)?;
    let next = AtomicU64::new(0);
    let timed = workload::drive(&db, threads, args.seconds, seq, |_| {
        workload::insert_step(&db, &table, plan.rows, &next)
    })?;
    let medium = log_medium(db.log(), &config.log);
    let inserted = next.load(Ordering::Relaxed);
    let result = RunResult::new(&timed, db.data_bytes(), inserted, medium);
    db.close()?;
    Ok(result)
}

fn report(
    args: &BenchEngineArgs,
    case: Case,
    runs: Vec<RunResult>,
    data_medium: &str,
) -> CaseReport {
    let (m, runs_ops_per_sec) = median_run(runs, RunResult::ops_per_sec);
    let secs = m.elapsed.as_secs_f64();
    let per_op = |n: u64| {
        if m.ops == 0 {
            0.0
        } else {
            n as f64 / m.ops as f64
        }
    };
    let commit = match case {
        Case::Insert { mode, .. } => mode,
        _ => args.load_commit,
    };
    CaseReport {
        case: case.name().to_string(),
        threads: case.threads(),
        commit: commit.name().to_string(),
        pool_fraction: case.pool_fraction(),
        ops: m.ops,
        ops_per_sec: m.ops_per_sec(),
        ops_per_sec_per_thread: m.ops_per_sec() / case.threads() as f64,
        runs_ops_per_sec,
        vs_async: None,
        vs_async_runs: Vec::new(),
        ops_per_txn: case.per_txn(),
        txns: m.txns,
        txns_per_sec: m.txns as f64 / secs,
        aborts: m.aborts,
        latency_us: m.latency,
        buffer_pool_bytes: m.pool_bytes,
        data_bytes: m.data_bytes,
        pages_read: m.pool.pages_read,
        pages_read_per_op: per_op(m.pool.pages_read),
        hits: m.pool.hits,
        misses: m.pool.misses,
        evictions: m.pool.evictions,
        pages_written: m.pool.pages_written,
        log_bytes_per_op: per_op(m.log.log_bytes),
        log_disk_writes: m.log.disk_writes,
        log_flushes: m.log.flushes,
        checkpoints: m.checkpoints,
        checkpoint_seconds: m.checkpoint_time.as_secs_f64(),
        seconds: secs,
        table_rows: m.table_rows,
        row_bytes: args.row_bytes,
        medium: m.medium,
        data_medium: data_medium.to_string(),
    }
}

/// The insert case of `mode` at `threads`, if measured.
fn insert_case(reports: &[CaseReport], mode: CommitMode, threads: usize) -> Option<&CaseReport> {
    reports
        .iter()
        .find(|r| r.case == "insert" && r.commit == mode.name() && r.threads == threads)
}

/// Fills in `vs_async_runs` (the ratio within each run: the two cases ran one after the
/// other, so a noisy neighbour hits both) and `vs_async`, their median — the figure the
/// bars use, as ratios of medians taken from different runs would mix unrelated noise.
fn compare_with_async(reports: &mut [CaseReport]) {
    let asyncs: Vec<Option<CaseReport>> = reports
        .iter()
        .map(|r| insert_case(reports, CommitMode::Async, r.threads).cloned())
        .collect();
    for (r, base) in reports.iter_mut().zip(asyncs) {
        if let (Some(base), "insert") = (base, r.case.as_str()) {
            let pairs = r.runs_ops_per_sec.iter().zip(&base.runs_ops_per_sec);
            r.vs_async_runs = pairs.map(|(a, b)| a / b).collect();
            // The same median as every other figure's (the lower of two middle runs).
            r.vs_async = Some(if r.vs_async_runs.is_empty() {
                r.ops_per_sec / base.ops_per_sec
            } else {
                median_run(r.vs_async_runs.clone(), |&ratio| ratio).0
            });
        }
    }
}

fn print_table(reports: &[CaseReport]) {
    println!();
    println!(
        "{:<12} {:>3} {:<8} {:>5} {:>8} {:>8} {:>11} {:>11} {:>7} {:>7} {:>7} {:>8} {:>8} {:>6} {:>9} {:>8}",
        "case", "thr", "commit", "pool", "pool MiB", "data MiB", "ops/s", "per thread", "p50 us",
        "p99 us", "max us", "reads/op", "log B/op", "aborts", "ckpt n/s", "vs async"
    );
    for r in reports {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let versus = r.vs_async.map_or("-".to_string(), |v| format!("{v:.2}"));
        let l = r.latency_us;
        let checkpoints = format!("{}/{:.2}", r.checkpoints, r.checkpoint_seconds);
        println!(
            "{:<12} {:>3} {:<8} {:>5} {:>8.1} {:>8.1} {:>11.0} {:>11.0} {:>7.2} {:>7.2} {:>7.0} {:>8.3} {:>8.0} {:>6} {:>9} {:>8}",
            r.case, r.threads, r.commit, r.pool_fraction, mib(r.buffer_pool_bytes),
            mib(r.data_bytes), r.ops_per_sec, r.ops_per_sec_per_thread, l.p50, l.p99, l.max,
            r.pages_read_per_op, r.log_bytes_per_op, r.aborts, checkpoints, versus
        );
    }
}

fn print_notes(reports: &[CaseReport]) {
    println!();
    println!("ops     lookups (lookup, lookup-batch, sweep) or rows inserted, one per transaction (insert); latency is per transaction; reads/op: data-file pages read per op; log B/op: log bytes appended per op; ckpt n/s: checkpoints in the measured interval / seconds they took");
    for r in reports {
        let runs: Vec<String> = r
            .runs_ops_per_sec
            .iter()
            .map(|v| group(*v as u64))
            .collect();
        let label = format!("{} x{} {} {}", r.case, r.threads, r.commit, r.pool_fraction);
        println!("runs    {label:<28} {}", runs.join(" / "));
    }
    let mut media: Vec<(&str, &str)> = Vec::new();
    for r in reports {
        if !media.iter().any(|(mode, _)| *mode == r.commit) {
            media.push((&r.commit, &r.medium));
        }
    }
    for (mode, medium) in media {
        println!("medium  {mode:<8} {medium}");
    }
    if let Some(r) = reports.first() {
        println!("medium  data     data files on {}; pool misses are served by the OS page cache when the file is cached there", r.data_medium);
    }
    if reports.iter().any(|r| r.commit == "async") {
        println!("note    async acknowledges before anything is durable: commits from the last flush interval can be lost in a crash");
    }
}

fn print_bars(reports: &[CaseReport]) {
    let mut lines = Vec::new();
    for r in reports
        .iter()
        .filter(|r| r.case == "lookup" && r.table_rows == LOOKUP_BAR_ROWS)
    {
        lines.push(bar_line(
            format!(
                "lookup x{} >= {} /s per thread",
                r.threads,
                group(LOOKUP_BAR as u64)
            ),
            format!(
                "{} /s per thread ({} total)",
                group(r.ops_per_sec_per_thread as u64),
                group(r.ops_per_sec as u64)
            ),
            r.ops_per_sec_per_thread >= LOOKUP_BAR,
        ));
    }
    let buffer = insert_case(reports, CommitMode::Buffer, BUFFER_TX_BAR_THREADS);
    if let Some(rate) = buffer.map(|r| r.ops_per_sec) {
        lines.push(bar_line(
            format!(
                "insert buffer x{BUFFER_TX_BAR_THREADS} >= {} tx/s",
                group(BUFFER_TX_BAR as u64)
            ),
            format!("{} tx/s", group(rate as u64)),
            rate >= BUFFER_TX_BAR,
        ));
    }
    for r in reports
        .iter()
        .filter(|r| r.case == "insert" && r.commit == "buffer")
    {
        if let Some(ratio) = r.vs_async {
            lines.push(bar_line(
                format!(
                    "insert buffer / async x{} >= {BUFFER_VS_ASYNC_BAR}",
                    r.threads
                ),
                format!(
                    "{ratio:.2}, the median of the ratios within each run ({})",
                    ratios(&r.vs_async_runs)
                ),
                ratio >= BUFFER_VS_ASYNC_BAR,
            ));
        }
    }
    if !lines.is_empty() {
        println!();
        lines.iter().for_each(|line| println!("{line}"));
    }
}

fn bar_line(bar: String, measured: String, met: bool) -> String {
    let verdict = if met { "met" } else { "NOT met" };
    format!("bar     {bar:<40} {verdict:<8} {measured}")
}

fn ratios(values: &[f64]) -> String {
    let text: Vec<String> = values.iter().map(|v| format!("{v:.2}")).collect();
    text.join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchEngineArgs,
    }

    fn parse(line: &[&str]) -> Result<BenchEngineArgs, clap::Error> {
        let argv = std::iter::once("bench").chain(line.iter().copied());
        Cli::try_parse_from(argv).map(|cli| cli.args)
    }

    #[test]
    fn cases_follow_the_options() {
        let args = parse(&[
            "--cases",
            "lookup,insert",
            "--threads",
            "2,1,2",
            "--commit",
            "buffer,async,buffer",
        ])
        .expect("parses");
        let cases = plan_cases(&args).expect("plan");
        assert_eq!(
            cases,
            vec![
                Case::Lookup {
                    threads: 1,
                    per_txn: 1
                },
                Case::Lookup {
                    threads: 2,
                    per_txn: 1
                },
                Case::Insert {
                    threads: 1,
                    mode: CommitMode::Buffer
                },
                Case::Insert {
                    threads: 1,
                    mode: CommitMode::Async
                },
                Case::Insert {
                    threads: 2,
                    mode: CommitMode::Buffer
                },
                Case::Insert {
                    threads: 2,
                    mode: CommitMode::Async
                },
            ]
        );
        let all = plan_cases(&parse(&[]).expect("defaults")).expect("plan");
        assert_eq!(all.len(), 2 * 2 + 2 * 3 + SWEEP.len());
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(parse(&["--cases", "lookups"]).is_err());
        assert!(parse(&["--commit", "fast"]).is_err());
        assert!(parse(&["--insert-pool", "12XB"]).is_err());
        for bad in [
            &["--threads", "0"][..],
            &["--seconds", "0"],
            &["--runs", "0"],
            &["--rows", "0"],
            &["--row-bytes", "8"],
            &["--batch", "0"],
            &["--insert-pool", "4KiB"],
        ] {
            let args = parse(bad).expect("parses");
            assert!(check_numbers(&args).is_err(), "{bad:?} accepted");
        }
        let args = parse(&["--dir", "/nonexistent/tailstore"]).expect("parses");
        assert!(plan(&args).is_err());
    }

    #[test]
    fn smoke_every_case() {
        let dir = tempfile::tempdir().expect("temp dir");
        let json = dir.path().join("out.json");
        let d = dir.path().to_str().expect("utf-8 path");
        let args = parse(&[
            "--rows",
            "3000",
            "--seconds",
            "0.05",
            "--runs",
            "1",
            "--threads",
            "2",
            "--commit",
            "buffer,async",
            "--insert-pool",
            "8MiB",
            "--dir",
            d,
            "--pmem-dir",
            d,
            "--json",
            json.to_str().expect("utf-8 path"),
        ])
        .expect("parses");
        run(&args).expect("runs");
        let text = std::fs::read_to_string(&json).expect("json written");
        let reports: Vec<serde_json::Value> = serde_json::from_str(&text).expect("json");
        assert_eq!(reports.len(), 2 + 2 + SWEEP.len());
        for r in &reports {
            assert!(r["ops"].as_u64().expect("ops") > 0, "{r}");
            for key in [
                "case",
                "threads",
                "commit",
                "ops_per_sec",
                "buffer_pool_bytes",
                "data_bytes",
                "pages_read",
            ] {
                assert!(!r[key].is_null(), "{key} missing in {r}");
            }
        }
        let small = reports
            .iter()
            .find(|r| r["pool_fraction"] == "1/8")
            .expect("sweep 1/8");
        assert!(small["pages_read"].as_u64().expect("pages_read") > 0);
        let full = reports
            .iter()
            .find(|r| r["case"] == "lookup")
            .expect("lookup");
        assert_eq!(full["pages_read"].as_u64(), Some(0));
        let buffer = reports
            .iter()
            .find(|r| r["commit"] == "buffer")
            .expect("buffer");
        assert!(buffer["vs_async"].as_f64().is_some());
        let leftovers = std::fs::read_dir(dir.path()).expect("dir").count();
        assert_eq!(leftovers, 1, "only the JSON file is left");
    }
}
