//! `tailstore bench log`: commit throughput and latency of the log manager, every commit mode
//! measured in the same run (cases interleaved, median of several runs) so that ratios between
//! modes are meaningful on a noisy machine.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use tailstore_log::{CommitMode, LogConfig, LogCounters, LogManager};
use tailstore_media::real::RealStorage;

use crate::args::ByteSize;
use crate::latency::{LatencyRecorder, LatencySummary};
use crate::report::{
    default_scratch_parent, log_medium, median_run, run_interleaved, settle_disk, write_json,
    Window,
};
use crate::CliResult;

#[derive(Args, Debug)]
pub struct BenchLogArgs {
    /// Commit mode to measure: fsync, buffer, pmem-log, async, or all. Repeatable.
    #[arg(long = "commit", value_name = "MODE", default_value = "all")]
    commit: Vec<String>,
    /// Committing threads; a comma-separated list runs each count.
    #[arg(long, value_name = "N", value_delimiter = ',', default_value = "1,8")]
    threads: Vec<usize>,
    /// Payload bytes of each commit record.
    #[arg(long, value_name = "B", default_value_t = 128)]
    record_bytes: usize,
    /// Measured seconds per case (after a short warm-up).
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 1.5)]
    seconds: f64,
    /// Runs of every case; the run with the median commits/s is reported.
    #[arg(long, value_name = "N", default_value_t = 3)]
    runs: usize,
    /// Directory for the log files (a fresh subdirectory per case, removed afterwards).
    /// Default: a temporary directory under /var/tmp (on disk, not tmpfs).
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// PMEM file for the buffer and pmem-log modes; created per case and removed afterwards,
    /// so it must not exist. Default: /dev/shm/tailstore-bench-<pid>.pmem (emulated PMEM).
    #[arg(long, value_name = "PATH")]
    pmem: Option<PathBuf>,
    /// Log block size: the unit the buffer mode writes to disk.
    #[arg(long, value_name = "SIZE", default_value = "64KiB")]
    block_size: ByteSize,
    /// Ring size: the PMEM log buffer (buffer) or the DRAM staging buffer (fsync, async).
    #[arg(long, value_name = "SIZE", default_value = "20MiB")]
    ring_size: ByteSize,
    /// Size of the whole log in PMEM (pmem-log); the benchmark releases what it has committed.
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    pmem_log_size: ByteSize,
    /// buffer mode: pending log bytes older than this many milliseconds are hardened anyway.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    harden_age: u64,
    /// buffer mode: the writer hardens once this much is pending. Default: an eighth of the
    /// ring (at least one block).
    #[arg(long, value_name = "SIZE")]
    harden_batch: Option<ByteSize>,
    /// Interval of the async mode's background flush, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    async_interval: u64,
    /// Write a JSON array with one object per case to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// One reported case: the median run of a (mode, threads) pair.
#[derive(Clone, Debug, Serialize)]
struct CaseReport {
    mode: String,
    threads: usize,
    record_bytes: usize,
    seconds: f64,
    commits: u64,
    commits_per_sec: f64,
    /// commits/s of every run, in run order; the report is the median one.
    runs_commits_per_sec: Vec<f64>,
    latency_us: LatencySummary,
    log_mb_per_sec: f64,
    disk_writes: u64,
    avg_write_bytes: f64,
    flushes: u64,
    commits_per_flush: f64,
    commits_waited: u64,
    flush_wait_ms: f64,
    avg_flush_wait_us: f64,
    ring_full_waits: u64,
    ring_full_wait_ms: f64,
    medium: String,
    durable: bool,
}

struct Plan {
    modes: Vec<CommitMode>,
    log_parent: PathBuf,
    _log_tmp: Option<tempfile::TempDir>,
    pmem_path: PathBuf,
}

pub fn run(args: &BenchLogArgs) -> CliResult<()> {
    let plan = plan(args)?;
    let cases: Vec<(CommitMode, usize)> = crate::report::distinct(&args.threads)
        .into_iter()
        .flat_map(|t| plan.modes.iter().map(move |&m| (m, t)))
        .collect();
    print_header(args, &plan);
    // Logs are deleted only at the end: deleting a large file keeps the file system busy and
    // would slow whichever case came next.
    let mut finished_logs = Vec::new();
    let runs = run_interleaved(
        &cases,
        args.runs,
        |(mode, threads)| format!("{mode} x{threads}"),
        |&(mode, threads)| {
            let (result, log_dir) = run_case(args, &plan, mode, threads)?;
            finished_logs.push(log_dir);
            Ok(result)
        },
    )?;
    drop(finished_logs);
    let reports: Vec<CaseReport> = cases
        .iter()
        .zip(runs)
        .map(|(&(mode, threads), results)| report(args, mode, threads, results))
        .collect();
    print_table(&reports);
    if let Some(path) = &args.json {
        write_json(path, &reports)?;
    }
    Ok(())
}

fn plan(args: &BenchLogArgs) -> CliResult<Plan> {
    crate::report::check_output("--json", args.json.as_deref())?;
    crate::report::check_run_options(&args.threads, args.seconds, args.runs)?;
    let mut modes = Vec::new();
    for name in &args.commit {
        if name == "all" {
            modes.extend(CommitMode::ALL);
        } else {
            modes.push(name.parse::<CommitMode>()?);
        }
    }
    let modes = crate::report::distinct(&modes);
    let (log_parent, log_tmp) = match &args.log_dir {
        Some(dir) if !dir.is_dir() => {
            return Err(format!("log directory does not exist: {}", dir.display()).into())
        }
        Some(dir) => (dir.clone(), None),
        None => {
            let tmp = tempfile::Builder::new()
                .prefix("tailstore-bench-")
                .tempdir_in(default_scratch_parent())?;
            (tmp.path().to_path_buf(), Some(tmp))
        }
    };
    let pmem_path = args.pmem.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "/dev/shm/tailstore-bench-{}.pmem",
            std::process::id()
        ))
    });
    if pmem_path.exists() {
        return Err(format!(
            "PMEM file {} already exists; the benchmark creates and removes its own, so name a new path",
            pmem_path.display()
        )
        .into());
    }
    if let Some(dir) = pmem_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(format!("PMEM directory does not exist: {}", dir.display()).into());
        }
    }
    crate::interrupt::clean_up_on_signals("tailstore bench log")?;
    if let Some(tmp) = &log_tmp {
        crate::interrupt::remove_dir_on_interrupt(tmp.path());
    }
    if let (Some(dir), Some(name)) = (pmem_path.parent(), pmem_path.file_name()) {
        crate::interrupt::remove_named_on_interrupt(dir, &name.to_string_lossy());
    }
    Ok(Plan {
        modes,
        log_parent,
        _log_tmp: log_tmp,
        pmem_path,
    })
}

#[derive(Clone)]
struct RunResult {
    elapsed: Duration,
    counters: LogCounters,
    latency: Arc<LatencyRecorder>,
    medium: String,
}

fn log_config(args: &BenchLogArgs, mode: CommitMode, dir: &Path, pmem: &Path) -> LogConfig {
    let mut config = LogConfig::new(mode, dir, Some(pmem.to_path_buf()));
    config.block_bytes = args.block_size.0;
    config.ring_bytes = args.ring_size.0;
    config.pmem_log_bytes = args.pmem_log_size.0;
    config.async_interval = Duration::from_millis(args.async_interval);
    config.harden_age = Duration::from_millis(args.harden_age);
    config.harden_batch_bytes = args.harden_batch.map(|b| b.0);
    config
}

fn run_case(
    args: &BenchLogArgs,
    plan: &Plan,
    mode: CommitMode,
    threads: usize,
) -> CliResult<(RunResult, tempfile::TempDir)> {
    settle_disk();
    let dir = tempfile::Builder::new()
        .prefix(mode.name())
        .tempdir_in(&plan.log_parent)?;
    let config = log_config(args, mode, dir.path(), &plan.pmem_path);
    let result = measure(args, &config, threads);
    if mode.uses_pmem() {
        let _ = std::fs::remove_file(&plan.pmem_path);
    }
    Ok((result?, dir))
}

fn measure(args: &BenchLogArgs, config: &LogConfig, threads: usize) -> CliResult<RunResult> {
    let (log, _) = LogManager::open(Arc::new(RealStorage), config)?;
    let log = Arc::new(log);
    let medium = log_medium(&log, config);
    let window = Arc::new(Window::default());
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (log, window) = (log.clone(), window.clone());
            let payload = vec![t as u8; args.record_bytes];
            thread::spawn(move || commit_loop(&log, &payload, &window))
        })
        .collect();
    let releaser = (config.mode == CommitMode::PmemLog).then(|| {
        let (log, window) = (log.clone(), window.clone());
        thread::spawn(move || release_loop(&log, &window))
    });
    let warmup = Duration::from_secs_f64((args.seconds / 5.0).min(0.2));
    let (before, after, elapsed) = window.measure(warmup, args.seconds, || log.counters());
    let counters = after.since(&before);
    let mut latency = LatencyRecorder::new();
    for worker in workers {
        let recorded = worker
            .join()
            .map_err(|_| "a committing thread panicked")??;
        latency.merge(&recorded);
    }
    if let Some(releaser) = releaser {
        releaser
            .join()
            .map_err(|_| "the releasing thread panicked")??;
    }
    log.close()?;
    Ok(RunResult {
        elapsed,
        counters,
        latency: Arc::new(latency),
        medium,
    })
}

fn commit_loop(
    log: &LogManager,
    payload: &[u8],
    window: &Window,
) -> Result<LatencyRecorder, tailstore_log::LogError> {
    let mut latency = LatencyRecorder::new();
    while window.running() {
        let began = Instant::now();
        log.commit(payload)?;
        if window.measuring() {
            latency.record_ns(began.elapsed().as_nanos() as u64);
        }
    }
    Ok(latency)
}

/// Stands in for the storage engine's checkpoint in `pmem-log` mode: everything committed is
/// declared no longer needed, so the ring's space is reused.
fn release_loop(log: &LogManager, window: &Window) -> Result<(), tailstore_log::LogError> {
    while window.running() {
        log.release(log.durable_lsn())?;
        thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

fn report(
    args: &BenchLogArgs,
    mode: CommitMode,
    threads: usize,
    runs: Vec<RunResult>,
) -> CaseReport {
    let rate = |r: &RunResult| r.counters.commits as f64 / r.elapsed.as_secs_f64();
    let (median, runs_commits_per_sec) = median_run(runs, rate);
    let c = median.counters;
    let secs = median.elapsed.as_secs_f64();
    CaseReport {
        mode: mode.name().to_string(),
        threads,
        record_bytes: args.record_bytes,
        seconds: secs,
        commits: c.commits,
        commits_per_sec: rate(&median),
        runs_commits_per_sec,
        latency_us: median.latency.summary_us(),
        log_mb_per_sec: c.log_bytes as f64 / secs / 1e6,
        disk_writes: c.disk_writes,
        avg_write_bytes: c.avg_write_bytes(),
        flushes: c.flushes,
        commits_per_flush: c.commits_per_flush(),
        commits_waited: c.commits_waited,
        flush_wait_ms: c.flush_wait_ns as f64 / 1e6,
        avg_flush_wait_us: c.avg_flush_wait_us(),
        ring_full_waits: c.ring_full_waits,
        ring_full_wait_ms: c.ring_full_wait_ns as f64 / 1e6,
        medium: median.medium,
        durable: mode.is_durable(),
    }
}

fn print_header(args: &BenchLogArgs, plan: &Plan) {
    println!(
        "tailstore bench log: {}-byte records, {} s per case, median of {} run(s), cases interleaved",
        args.record_bytes, args.seconds, args.runs
    );
    println!("log directory: {}", plan.log_parent.display());
    if plan.modes.iter().any(|m| m.uses_pmem()) {
        println!("PMEM file:     {}", plan.pmem_path.display());
    }
}

fn print_table(reports: &[CaseReport]) {
    println!();
    println!(
        "{:<8} {:>3} {:>11} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8} {:>9} {:>8} {:>9} {:>8} {:>10} {:>9}",
        "mode", "thr", "commits/s", "vs fsync", "p50 us", "p95 us", "p99 us", "p99.9 us", "max us",
        "log MB/s", "writes", "avg KiB", "flushes", "c/flush", "wait avg us", "ring-full"
    );
    for r in reports {
        let fsync = reports
            .iter()
            .find(|o| o.mode == "fsync" && o.threads == r.threads)
            .map(|o| o.commits_per_sec);
        let versus = fsync.map_or("-".to_string(), |f| {
            format!("{:.1}x", r.commits_per_sec / f)
        });
        let l = r.latency_us;
        println!(
            "{:<8} {:>3} {:>11.0} {:>7} {:>7.2} {:>7.2} {:>7.2} {:>8.1} {:>8.0} {:>8.1} {:>9} {:>8.1} {:>9} {:>8.1} {:>10.1} {:>9}",
            r.mode, r.threads, r.commits_per_sec, versus, l.p50, l.p95, l.p99, l.p999, l.max,
            r.log_mb_per_sec, r.disk_writes, r.avg_write_bytes / 1024.0, r.flushes,
            r.commits_per_flush, r.avg_flush_wait_us, r.ring_full_waits
        );
    }
    println!();
    let mut media: Vec<(&str, &str)> = Vec::new();
    for r in reports {
        if !media.iter().any(|(mode, _)| *mode == r.mode) {
            media.push((&r.mode, &r.medium));
        }
    }
    for (mode, medium) in media {
        println!("medium  {mode:<8} {medium}");
    }
    if reports.iter().any(|r| !r.durable) {
        println!("note    async acknowledges before anything is durable: commits from the last flush interval can be lost in a crash");
    }
}
