//! `tailstore bench engine`: point-lookup throughput of the storage engine's existing layers —
//! the B+tree over the bounded buffer pool over a real data file. There are no transactions or
//! logging yet, so nothing here commits; `commit` is reported as "none".
//!
//! Cases (interleaved, median of several runs, like `bench log`):
//! * `lookup` — random point lookups with a pool that holds the whole data file, at each
//!   thread count;
//! * `pool-sweep` — one thread, pools of 1/8, 1/4, 1/2 and 1/1 of the data file: the shape of
//!   the memory-limit sweep of the reference experiments (a database larger than the pool).

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use tailstore_media::real::{filesystem_type, RealStorage};
use tailstore_media::{File, OpenMode, Storage};
use tailstore_storage::{
    BTree, BufferPool, PageId, PoolStats, ScanDirection, MAX_ENTRY, PAGE_SIZE,
};

use crate::report::{case_progress, write_json};
use crate::CliResult;

/// What this benchmark measures, printed in every report.
const SCOPE: &str = "no transactions or logging yet: B+tree + buffer pool only";

/// Key length: the row id, 8 bytes big-endian (memcmp order = numeric order).
const KEY_BYTES: usize = 8;

/// Pool sizes of the sweep, as (numerator, denominator) of the data file's pages.
const SWEEP: [(u64, u64); 4] = [(1, 8), (1, 4), (1, 2), (1, 1)];

/// Frames of the pool used while loading: sequential keys touch only the rightmost path, so a
/// modest pool suffices; full pages are written back as they are evicted.
const LOAD_POOL_FRAMES: usize = 8192;

/// Smallest pool a case runs with (a lookup holds one page at a time per thread).
const MIN_POOL_FRAMES: usize = 4;

#[derive(Args, Debug)]
pub struct BenchEngineArgs {
    /// Case to run: lookup (random point lookups, pool holds all data, at each --threads
    /// count), pool-sweep (1 thread, pools of 1/8, 1/4, 1/2, 1/1 of the data), or all.
    #[arg(long = "case", value_name = "CASE", default_value = "all")]
    case: String,
    /// Rows in the table (loaded once): key = 8-byte big-endian row id.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    rows: u64,
    /// Bytes of each row's value.
    #[arg(long, value_name = "B", default_value_t = 100)]
    value_bytes: usize,
    /// Looking-up threads of the lookup case; a comma-separated list runs each count.
    #[arg(long, value_name = "N", value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Measured seconds per case (after a warm-up of a fifth of this, not measured).
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    seconds: f64,
    /// Runs of every case; the run with the median lookups/s is reported.
    #[arg(long, value_name = "N", default_value_t = 3)]
    runs: usize,
    /// Directory for the data file (a fresh subdirectory, removed afterwards).
    /// Default: a temporary directory under /var/tmp (on disk, not tmpfs).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Write a JSON array with one object per measured case to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Which cases to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CaseSet {
    lookup: bool,
    sweep: bool,
}

/// One measured case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// Random lookups with a pool holding all data, at this many threads.
    Lookup { threads: usize },
    /// One thread, pool of `num/den` of the data pages.
    Sweep { num: u64, den: u64 },
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Lookup { .. } => "lookup",
            Case::Sweep { .. } => "pool-sweep",
        }
    }

    fn threads(self) -> usize {
        match self {
            Case::Lookup { threads } => threads,
            Case::Sweep { .. } => 1,
        }
    }

    fn label(self) -> String {
        match self {
            Case::Lookup { threads } => format!("lookup x{threads}"),
            Case::Sweep { num, den } => format!("pool-sweep {num}/{den}"),
        }
    }

    /// Frames for a data file of `data_pages` pages.
    fn pool_frames(self, data_pages: u64) -> usize {
        let frames = match self {
            // A little slack over the file's pages: nothing is ever evicted.
            Case::Lookup { .. } => data_pages + 16,
            Case::Sweep { num, den } => data_pages * num / den,
        };
        (frames as usize).max(MIN_POOL_FRAMES)
    }
}

/// The loaded table: a data file holding one B+tree.
struct Table {
    path: PathBuf,
    root: PageId,
    rows: u64,
    value_bytes: usize,
    data_bytes: u64,
    load_seconds: f64,
    height: usize,
    leaves: usize,
}

/// One run of one case.
#[derive(Clone, Copy, Debug)]
struct RunResult {
    elapsed: Duration,
    ops: u64,
    stats: PoolStats,
    pool_frames: usize,
}

impl RunResult {
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
}

/// One reported case: the median run.
#[derive(Clone, Debug, Serialize)]
struct CaseReport {
    case: String,
    threads: usize,
    /// Commit mode: "none" — the engine has no log yet.
    commit: String,
    /// Pool size as a fraction of the data file ("1/8" … "1/1"; "all" for lookup).
    pool_fraction: String,
    ops: u64,
    ops_per_sec: f64,
    ops_per_sec_per_thread: f64,
    /// lookups/s of every run, in run order; the report is the median one.
    runs_ops_per_sec: Vec<f64>,
    buffer_pool_bytes: u64,
    buffer_pool_pages: usize,
    data_bytes: u64,
    data_pages: u64,
    pages_read: u64,
    pages_read_per_op: f64,
    hits: u64,
    misses: u64,
    hit_ratio: f64,
    seconds: f64,
    rows: u64,
    value_bytes: usize,
    load_seconds: f64,
    medium: String,
    scope: String,
}

pub fn run(args: &BenchEngineArgs) -> CliResult<()> {
    let cases = plan_cases(args)?;
    let (parent, _tmp) = data_dir(args)?;
    let medium = describe_medium(&parent);
    println!(
        "tailstore bench engine ({SCOPE}): {} rows, {}-byte keys, {}-byte values, {} s per case, median of {} run(s), cases interleaved",
        group(args.rows), KEY_BYTES, args.value_bytes, args.seconds, args.runs
    );
    println!("data directory: {} ({medium})", parent.display());

    let table = load(&parent, args.rows, args.value_bytes, true)?;
    println!(
        "loaded {} rows in {:.2} s ({:.0} rows/s): data file {:.1} MiB, {} pages, tree height {}, {} leaves",
        group(table.rows),
        table.load_seconds,
        table.rows as f64 / table.load_seconds,
        table.data_bytes as f64 / (1 << 20) as f64,
        table.data_bytes / PAGE_SIZE as u64,
        table.height,
        table.leaves
    );

    let progress = case_progress((cases.len() * args.runs) as u64);
    let mut runs: Vec<Vec<RunResult>> = vec![Vec::new(); cases.len()];
    for run in 0..args.runs {
        // Each run starts one case later, so that no case always follows the same neighbour.
        for k in 0..cases.len() {
            let i = (k + run) % cases.len();
            progress.set_message(format!(
                "run {}/{}: {}",
                run + 1,
                args.runs,
                cases[i].label()
            ));
            let result = measure(&table, cases[i], args.seconds, run as u64)?;
            runs[i].push(result);
            progress.inc(1);
        }
    }
    progress.finish_and_clear();

    let reports: Vec<CaseReport> = cases
        .iter()
        .zip(runs)
        .map(|(&case, results)| report(&table, case, results, &medium))
        .collect();
    print_table(&reports);
    println!();
    println!("scope   {SCOPE}");
    println!("medium  data file on {medium}; pool misses are served by the OS page cache when the file is cached there, not necessarily by the device");
    if let Some(path) = &args.json {
        write_json(path, &reports)?;
    }
    Ok(())
}

fn plan_cases(args: &BenchEngineArgs) -> CliResult<Vec<Case>> {
    let set = match args.case.as_str() {
        "all" => CaseSet {
            lookup: true,
            sweep: true,
        },
        "lookup" => CaseSet {
            lookup: true,
            sweep: false,
        },
        "pool-sweep" => CaseSet {
            lookup: false,
            sweep: true,
        },
        other => {
            return Err(format!("unknown case '{other}' (use lookup, pool-sweep or all)").into())
        }
    };
    if set.lookup && (args.threads.is_empty() || args.threads.contains(&0)) {
        return Err("--threads needs counts of at least 1".into());
    }
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        return Err("--seconds must be a positive number".into());
    }
    if args.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if args.rows == 0 {
        return Err("--rows must be at least 1".into());
    }
    if KEY_BYTES + args.value_bytes > MAX_ENTRY {
        return Err(format!(
            "--value-bytes must be at most {} (key + value may take at most {MAX_ENTRY} bytes)",
            MAX_ENTRY - KEY_BYTES
        )
        .into());
    }
    let mut cases = Vec::new();
    if set.lookup {
        let mut threads = args.threads.clone();
        threads.dedup();
        cases.extend(threads.into_iter().map(|threads| Case::Lookup { threads }));
    }
    if set.sweep {
        cases.extend(SWEEP.iter().map(|&(num, den)| Case::Sweep { num, den }));
    }
    Ok(cases)
}

fn data_dir(args: &BenchEngineArgs) -> CliResult<(PathBuf, Option<tempfile::TempDir>)> {
    let parent = match &args.dir {
        Some(dir) if !dir.is_dir() => {
            return Err(format!("data directory does not exist: {}", dir.display()).into())
        }
        Some(dir) => dir.clone(),
        None => {
            let var_tmp = Path::new("/var/tmp");
            if var_tmp.is_dir() {
                var_tmp.to_path_buf()
            } else {
                std::env::temp_dir()
            }
        }
    };
    let tmp = tempfile::Builder::new()
        .prefix("tailstore-bench-engine-")
        .tempdir_in(&parent)
        .map_err(|e| format!("cannot create a directory in {}: {e}", parent.display()))?;
    Ok((tmp.path().to_path_buf(), Some(tmp)))
}

fn describe_medium(dir: &Path) -> String {
    let fs = filesystem_type(dir).unwrap_or_else(|| "unknown fs".into());
    if fs == "tmpfs" {
        format!("{fs} (memory)")
    } else {
        fs
    }
}

/// The value stored under row `id`: the id (big-endian) then its low byte repeated, cut to
/// `len` bytes. Lookups check the first bytes.
fn fill_value(id: u64, buf: &mut [u8]) {
    let key = id.to_be_bytes();
    let n = buf.len().min(KEY_BYTES);
    buf[..n].copy_from_slice(&key[..n]);
    buf[n..].fill(id as u8);
}

fn no_log() -> tailstore_storage::WriteAheadHook {
    // No log yet: nothing to wait for before a page is written.
    Box::new(|_| Ok(()))
}

fn open_pool(path: &Path, frames: usize, mode: OpenMode) -> CliResult<Arc<BufferPool>> {
    let file: Arc<dyn File> = RealStorage.open_file(path, mode)?;
    Ok(Arc::new(BufferPool::new(file, frames, no_log())?))
}

/// Creates the data file in `dir` and inserts `rows` rows in key order; flushes and syncs it.
fn load(dir: &Path, rows: u64, value_bytes: usize, show_progress: bool) -> CliResult<Table> {
    let path = dir.join("table.data");
    let began = Instant::now();
    let pool = open_pool(&path, LOAD_POOL_FRAMES, OpenMode::CreateIfMissing)?;
    let tree = BTree::create(pool.clone())?;
    let bar = if show_progress {
        let bar = ProgressBar::new(rows);
        let style = ProgressStyle::with_template("loading {bar:30} {pos}/{len} rows  {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut value = vec![0u8; value_bytes];
    const STEP: u64 = 10_000;
    for id in 0..rows {
        fill_value(id, &mut value);
        tree.insert(&id.to_be_bytes(), &value)
            .map_err(|e| format!("loading row {id}: {e}"))?;
        if id % STEP == STEP - 1 {
            bar.inc(STEP);
        }
    }
    bar.finish_and_clear();
    pool.flush_all()?;
    let load_seconds = began.elapsed().as_secs_f64();
    let shape = tree.check()?;
    if shape.entries as u64 != rows {
        return Err(format!("loaded {rows} rows but the tree holds {}", shape.entries).into());
    }
    let root = tree.root();
    drop(tree);
    drop(pool);
    let data_bytes = std::fs::metadata(&path)
        .map_err(|e| format!("cannot stat {}: {e}", path.display()))?
        .len();
    Ok(Table {
        path,
        root,
        rows,
        value_bytes,
        data_bytes,
        load_seconds,
        height: shape.height,
        leaves: shape.leaves,
    })
}

/// SplitMix64: a small, fast generator; each thread gets its own stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (multiply-shift; the bias is negligible for n ≪ 2^64).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// Looks up one random row and checks its value; `Err` names what went wrong.
fn lookup_one(tree: &BTree, rng: &mut Rng, rows: u64, expect: &mut [u8]) -> Result<(), String> {
    let id = rng.below(rows);
    let value = tree
        .get(&id.to_be_bytes())
        .map_err(|e| format!("looking up row {id}: {e}"))?
        .ok_or_else(|| format!("row {id} is missing from the table"))?;
    fill_value(id, expect);
    let n = expect.len().min(KEY_BYTES + 1);
    if value.len() != expect.len() || value[..n] != expect[..n] {
        return Err(format!("row {id} has a wrong value"));
    }
    Ok(())
}

/// Reopens the data file with the case's pool, warms it, and runs random lookups for
/// `seconds`. Counters are the pool's deltas over the measured interval.
fn measure(table: &Table, case: Case, seconds: f64, run: u64) -> CliResult<RunResult> {
    let data_pages = table.data_bytes / PAGE_SIZE as u64;
    let frames = case.pool_frames(data_pages);
    let pool = open_pool(&table.path, frames, OpenMode::Existing)?;
    let tree = Arc::new(BTree::open(pool.clone(), table.root)?);
    // Warm-up, not measured: one ordered pass over the table brings the data into the pool
    // (all of it when the pool holds it), then random lookups below settle the CLOCK state.
    tree.scan(
        Bound::Unbounded,
        Bound::Unbounded,
        ScanDirection::Ascending,
        usize::MAX,
        |_, _| true,
    )?;
    let threads = case.threads();
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (tree, stop, measuring) = (tree.clone(), stop.clone(), measuring.clone());
            let (rows, value_bytes) = (table.rows, table.value_bytes);
            let seed = (run << 32) ^ (t as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D);
            thread::spawn(move || {
                let mut rng = Rng(seed);
                let mut expect = vec![0u8; value_bytes];
                let mut ops = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    lookup_one(&tree, &mut rng, rows, &mut expect)?;
                    if measuring.load(Ordering::Relaxed) {
                        ops += 1;
                    }
                }
                Ok::<u64, String>(ops)
            })
        })
        .collect();
    thread::sleep(Duration::from_secs_f64(seconds / 5.0));
    let before = pool.stats();
    let began = Instant::now();
    measuring.store(true, Ordering::Release);
    thread::sleep(Duration::from_secs_f64(seconds));
    measuring.store(false, Ordering::Release);
    let elapsed = began.elapsed();
    let after = pool.stats();
    stop.store(true, Ordering::Release);
    let mut ops = 0;
    for worker in workers {
        ops += worker
            .join()
            .map_err(|_| "a looking-up thread panicked")??;
    }
    Ok(RunResult {
        elapsed,
        ops,
        stats: PoolStats {
            hits: after.hits - before.hits,
            misses: after.misses - before.misses,
            pages_read: after.pages_read - before.pages_read,
            pages_written: after.pages_written - before.pages_written,
            evictions: after.evictions - before.evictions,
        },
        pool_frames: frames,
    })
}

fn report(table: &Table, case: Case, mut runs: Vec<RunResult>, medium: &str) -> CaseReport {
    let runs_ops_per_sec: Vec<f64> = runs.iter().map(RunResult::ops_per_sec).collect();
    runs.sort_by(|a, b| a.ops_per_sec().total_cmp(&b.ops_per_sec()));
    let m = runs[runs.len() / 2];
    let threads = case.threads();
    let s = m.stats;
    let per_op = |n: u64| {
        if m.ops == 0 {
            0.0
        } else {
            n as f64 / m.ops as f64
        }
    };
    let requests = s.hits + s.misses;
    CaseReport {
        case: case.name().to_string(),
        threads,
        commit: "none".to_string(),
        pool_fraction: match case {
            Case::Lookup { .. } => "all".to_string(),
            Case::Sweep { num, den } => format!("{num}/{den}"),
        },
        ops: m.ops,
        ops_per_sec: m.ops_per_sec(),
        ops_per_sec_per_thread: m.ops_per_sec() / threads as f64,
        runs_ops_per_sec,
        buffer_pool_bytes: (m.pool_frames * PAGE_SIZE) as u64,
        buffer_pool_pages: m.pool_frames,
        data_bytes: table.data_bytes,
        data_pages: table.data_bytes / PAGE_SIZE as u64,
        pages_read: s.pages_read,
        pages_read_per_op: per_op(s.pages_read),
        hits: s.hits,
        misses: s.misses,
        hit_ratio: if requests == 0 {
            0.0
        } else {
            s.hits as f64 / requests as f64
        },
        seconds: m.elapsed.as_secs_f64(),
        rows: table.rows,
        value_bytes: table.value_bytes,
        load_seconds: table.load_seconds,
        medium: medium.to_string(),
        scope: SCOPE.to_string(),
    }
}

fn print_table(reports: &[CaseReport]) {
    println!();
    println!(
        "{:<10} {:>3} {:>6} {:>10} {:>10} {:>12} {:>12} {:>10} {:>12} {:>10} {:>10} {:>7}",
        "case",
        "thr",
        "pool",
        "pool MiB",
        "data MiB",
        "lookups/s",
        "per thread",
        "pages rd",
        "reads/lookup",
        "hits",
        "misses",
        "hit %"
    );
    for r in reports {
        println!(
            "{:<10} {:>3} {:>6} {:>10.1} {:>10.1} {:>12.0} {:>12.0} {:>10} {:>12.3} {:>10} {:>10} {:>7.2}",
            r.case,
            r.threads,
            r.pool_fraction,
            r.buffer_pool_bytes as f64 / (1 << 20) as f64,
            r.data_bytes as f64 / (1 << 20) as f64,
            r.ops_per_sec,
            r.ops_per_sec_per_thread,
            r.pages_read,
            r.pages_read_per_op,
            r.hits,
            r.misses,
            r.hit_ratio * 100.0
        );
    }
}

/// `1234567` as `1,234,567`.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoke_lookup_and_small_pool() {
        let dir = tempfile::tempdir().expect("temp dir");
        let table = load(dir.path(), 2_000, 100, false).expect("load");
        assert_eq!(table.rows, 2_000);
        assert!(table.data_bytes >= 8 * PAGE_SIZE as u64);

        let full = measure(&table, Case::Lookup { threads: 2 }, 0.05, 0).expect("lookup");
        assert!(full.ops > 0);
        assert_eq!(
            full.stats.pages_read, 0,
            "a pool holding all data reads nothing"
        );

        let small = measure(&table, Case::Sweep { num: 1, den: 8 }, 0.05, 1).expect("sweep");
        assert!(small.ops > 0);
        assert!(
            small.stats.pages_read > 0,
            "a pool smaller than the data reads pages"
        );

        let r = report(&table, Case::Sweep { num: 1, den: 8 }, vec![small], "test");
        assert_eq!(r.commit, "none");
        assert!(r.pages_read_per_op > 0.0);
    }

    #[test]
    fn values_and_grouping() {
        let mut buf = [0u8; 10];
        fill_value(0x0102, &mut buf);
        assert_eq!(buf, [0, 0, 0, 0, 0, 0, 1, 2, 2, 2]);
        let mut short = [0u8; 3];
        fill_value(0x0102, &mut short);
        assert_eq!(short, [0, 0, 0]);
        assert_eq!(group(1_000_000), "1,000,000");
        assert_eq!(group(999), "999");
    }
}
