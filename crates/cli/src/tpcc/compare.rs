//! `tailstore tpcc compare`: the same TPC-C workload in each commit configuration, the
//! reference experiments' comparison (docs: reference-experiments.md, 1–3).
//!
//! # Why one load per kind of log, then a copy per run
//!
//! Every run must start from the same loaded database. A log records its commit mode in its
//! header (and `buffer` ties its log file to a PMEM file), and the engine opens a data file
//! only with the log that belongs to it: it refuses a data file whose log is missing unless
//! the database is brand new, and a new log would start again at the first LSN, below the data file's page
//! LSNs. So a database loaded in one mode cannot be run in another; each kind of log needs
//! its own load. The four kinds (fsync, buffer, pmem-log, async) are loaded once each with the
//! same seed, which gives the same rows, and closed cleanly. `fsync` serves two
//! configurations: its log file is copied next to the data file, or to tmpfs.
//!
//! Each run then copies the loaded database (data file, log file, PMEM file: the log of a
//! cleanly closed database is needed whole, since its end must lie past the checkpoint) to
//! fresh paths and opens it there. Measured on the 2-core development VM with 4 warehouses
//! (a 400 MiB data file and a 1.1 GiB log, which is not truncated at checkpoints yet):
//! loading takes 3–5 s per kind of log, copying data file and log and syncing them 1.0 s,
//! opening the copy 0.1–0.3 s. Copying is about five times faster than loading afresh for
//! every run, and the four loads are paid once however many runs follow.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use tailstore_engine::{doublewrite_path, Database};
use tailstore_log::CommitMode;
use tailstore_tpcc::LoadConfig;

use super::driver::{drive, DriverOptions};
use super::load::{cores, load_instance};
use super::run::{build_report, workers_phrase, RunReport, RunSetup};
use super::{describe_open, load_pool_bytes, run_pool_bytes, ExecutionArgs, Instance, TuningArgs};
use crate::args::ByteSize;
use crate::report::{
    self, default_scratch_parent, filesystem_of, group, log_medium, median_run, settle_disk,
    write_json,
};
use crate::CliResult;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Warehouses of the database (loaded once per kind of log).
    #[arg(long, value_name = "W", default_value_t = 4)]
    pub warehouses: u32,
    /// Virtual users.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub users: usize,
    /// Seconds of each run's timed window. The default keeps the whole comparison under
    /// three minutes on a 2-core machine; the reference run is 60.
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 18.0)]
    pub duration: f64,
    /// Seconds of ramp-up before each timed window.
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 3.0)]
    pub rampup: f64,
    /// Runs of every configuration (interleaved); the median run (by NOPM) is reported. The
    /// reference experiments use 3.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub runs: usize,
    #[command(flatten)]
    pub execution: ExecutionArgs,

    /// Configurations to run, comma-separated: fsync-disk, fsync-tmpfs, buffer, pmem-log,
    /// async.
    #[arg(
        long,
        value_name = "NAME",
        value_delimiter = ',',
        default_value = "fsync-disk,fsync-tmpfs,buffer,pmem-log,async"
    )]
    pub configs: Vec<String>,
    /// Directory for the databases (a fresh subdirectory, removed at the end). Must be on a
    /// disk for fsync to mean anything. Default: /var/tmp, else the temporary directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Directory of the PMEM files and of the tmpfs log of fsync-tmpfs. Default: /dev/shm
    /// (emulated PMEM).
    #[arg(long, value_name = "DIR")]
    pub pmem_dir: Option<PathBuf>,
    /// Write every run's report (run-<config>-<n>.json) and the summary (compare.json) here.
    #[arg(long, value_name = "DIR")]
    pub json_dir: Option<PathBuf>,
    /// Write the summary as a Markdown table to FILE.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Buffer pool per database. Default: enough to hold the data.
    #[arg(long, value_name = "SIZE")]
    pub buffer_pool: Option<ByteSize>,
    /// Loading threads. Default: the number of cores.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Seconds between progress lines within a run (0: one line per run).
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 0.0)]
    pub progress: f64,
    /// Seed of the load and of the users. Default: fixed (42), so that every configuration
    /// and every invocation runs the same database.
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
    /// Checkpoint once this much log was written since the last checkpoint. A small interval,
    /// such as serve's 256MiB, would checkpoint a 4-warehouse run several times a
    /// second, and in fsync and async modes each checkpoint makes the next change of every
    /// page log a full image of the page (5x the log volume): the runs would compare
    /// checkpointers rather than commit paths. The default here checkpoints about once per
    /// run, by time or volume.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub checkpoint_log: ByteSize,
    /// Checkpoint at least every S seconds (0: only by log volume).
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 30.0)]
    pub checkpoint_every: f64,
    /// Size of pmem-log's PMEM region (which only a checkpoint frees): room for
    /// --checkpoint-log of log with a margin.
    #[arg(long, value_name = "SIZE", default_value = "2GiB")]
    pub pmem_log_size: ByteSize,
}

/// A configuration of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Config {
    FsyncDisk,
    FsyncTmpfs,
    Buffer,
    PmemLog,
    Async,
}

impl Config {
    const ALL: [Config; 5] = [
        Config::FsyncDisk,
        Config::FsyncTmpfs,
        Config::Buffer,
        Config::PmemLog,
        Config::Async,
    ];

    fn name(self) -> &'static str {
        match self {
            Config::FsyncDisk => "fsync-disk",
            Config::FsyncTmpfs => "fsync-tmpfs",
            Config::Buffer => "buffer",
            Config::PmemLog => "pmem-log",
            Config::Async => "async",
        }
    }

    fn mode(self) -> CommitMode {
        match self {
            Config::FsyncDisk | Config::FsyncTmpfs => CommitMode::Fsync,
            Config::Buffer => CommitMode::Buffer,
            Config::PmemLog => CommitMode::PmemLog,
            Config::Async => CommitMode::Async,
        }
    }

    /// What the configuration stands for in the reference experiments.
    fn meaning(self) -> &'static str {
        match self {
            Config::FsyncDisk => "log on disk, commit waits for fdatasync (baseline)",
            Config::FsyncTmpfs => "log file on tmpfs: the log on block-mode PMEM",
            Config::Buffer => "persisted log buffer: tail of the log in PMEM",
            Config::PmemLog => "whole log in byte-addressable PMEM",
            Config::Async => "commit acknowledged before durable (upper bound)",
        }
    }

    fn parse(name: &str) -> CliResult<Config> {
        Config::ALL
            .into_iter()
            .find(|c| c.name() == name.trim())
            .ok_or_else(|| {
                format!(
                    "unknown configuration '{name}' (expected fsync-disk, fsync-tmpfs, buffer, pmem-log or async)"
                )
                .into()
            })
    }
}

/// A loaded database, closed, that runs copy.
struct Golden {
    mode: CommitMode,
    instance: Instance,
    /// Its PMEM file (the rest is in the scratch directory).
    _files: RunFiles,
}

/// Files of one run, removed when dropped.
struct RunFiles {
    paths: Vec<PathBuf>,
}

impl Drop for RunFiles {
    fn drop(&mut self) {
        for path in &self.paths {
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(path)
            } else {
                std::fs::remove_file(path)
            };
        }
    }
}

/// What the summary says about one configuration: its median run.
#[derive(Clone, Debug, Serialize)]
struct ConfigSummary {
    config: String,
    commit: String,
    meaning: String,
    medium: String,
    durable: bool,
    tpm: f64,
    nopm: f64,
    /// Median against fsync-disk's median, in percent.
    tpm_vs_fsync_disk_pct: Option<f64>,
    nopm_vs_fsync_disk_pct: Option<f64>,
    /// NOPM of every run, in run order.
    runs_nopm: Vec<f64>,
    runs_tpm: Vec<f64>,
    new_order_p95_ms: f64,
    payment_p95_ms: f64,
    flushes_per_s: f64,
    avg_write_kib: f64,
    flush_waits_per_s: f64,
    flush_wait_ms: f64,
    avg_flush_wait_us: f64,
    log_mb_per_s: f64,
    log_kib_per_commit: f64,
    aborts_per_s: f64,
    checkpoints: u64,
    cpu_util: f64,
}

#[derive(Debug, Serialize)]
struct Summary {
    warehouses: u32,
    users: usize,
    rampup_s: f64,
    duration_s: f64,
    runs: usize,
    load_s: f64,
    data_medium: String,
    checkpoint_log_bytes: u64,
    checkpoint_every_s: f64,
    pmem_log_bytes: u64,
    configs: Vec<ConfigSummary>,
}

struct Plan {
    configs: Vec<Config>,
    tuning: TuningArgs,
    scratch: tempfile::TempDir,
    pmem_dir: PathBuf,
    pool: Option<usize>,
    options: DriverOptions,
}

impl Plan {
    /// A path in the PMEM directory for `name`, unique to this process.
    fn pmem_path(&self, name: &str) -> PathBuf {
        self.pmem_dir
            .join(format!("tailstore-tpcc-{}-{name}", std::process::id()))
    }
}

pub fn run(args: &CompareArgs) -> CliResult<()> {
    let plan = plan(args)?;
    let data_medium = filesystem_of(plan.scratch.path());
    println!(
        "tailstore tpcc compare: {} warehouse(s), {} user(s), ramp-up {} s + timed {} s, {} run(s) of {} configuration(s), interleaved; Stock-Level {}, {}",
        args.warehouses,
        args.users,
        args.rampup,
        args.duration,
        args.runs,
        plan.configs.len(),
        plan.options.stock_level_isolation.name(),
        workers_phrase(plan.options.workers)
    );
    println!(
        "databases in {} ({data_medium}); PMEM and tmpfs log in {} ({})",
        plan.scratch.path().display(),
        plan.pmem_dir.display(),
        filesystem_of(&plan.pmem_dir)
    );
    println!(
        "checkpoints every {} of log or {} s; pmem-log region {}",
        args.checkpoint_log, args.checkpoint_every, args.pmem_log_size
    );
    if data_medium.starts_with("tmpfs") {
        println!("warning: the databases are on tmpfs, where fdatasync is a no-op: fsync-disk is not a disk (use --dir on a disk)");
    }
    let load_began = Instant::now();
    let goldens = load_goldens(args, &plan)?;
    let load_s = load_began.elapsed().as_secs_f64();
    let mut results: Vec<Vec<RunReport>> = plan.configs.iter().map(|_| Vec::new()).collect();
    let n = plan.configs.len();
    let mut seq = 0;
    for run in 0..args.runs {
        for k in 0..n {
            let i = (k + run) % n;
            let config = plan.configs[i];
            seq += 1;
            let golden = goldens
                .iter()
                .find(|g| g.mode == config.mode())
                .ok_or("internal: no loaded database for a configuration")?;
            let mut report = run_config(&plan, golden, config, seq)?;
            report.config = Some(config.name().to_string());
            report.run = Some(run + 1);
            println!(
                "run {}/{} {:<12} {:>9} NOPM {:>10} TPM  {:>6.0} flushes/s  cpu {:>3.0}%",
                run + 1,
                args.runs,
                config.name(),
                group(report.nopm as u64),
                group(report.tpm as u64),
                report.log.flushes_per_s,
                report.cpu_util * 100.0
            );
            if let Some(dir) = &args.json_dir {
                let path = dir.join(format!("run-{}-{}.json", config.name(), run + 1));
                write_json_quiet(&path, &report)?;
            }
            results[i].push(report);
        }
    }
    let summary = summarize(args, &plan, results, load_s, data_medium);
    print_summary(&summary);
    if let Some(dir) = &args.json_dir {
        write_json(&dir.join("compare.json"), &summary)?;
    }
    if let Some(path) = &args.markdown {
        crate::report::write_whole(path, markdown(&summary).as_bytes())?;
        println!("Markdown written to {}", path.display());
    }
    Ok(())
}

fn plan(args: &CompareArgs) -> CliResult<Plan> {
    if args.warehouses == 0 || args.users == 0 || args.runs == 0 {
        return Err("--warehouses, --users and --runs must be at least 1".into());
    }
    if !(args.duration > 0.0 && args.duration.is_finite()) {
        return Err("--duration must be a positive number of seconds".into());
    }
    if !(args.rampup >= 0.0 && args.rampup.is_finite()) {
        return Err("--rampup must be zero or more seconds".into());
    }
    if !(args.progress >= 0.0 && args.progress.is_finite()) {
        return Err("--progress must be zero or more seconds".into());
    }
    if args.threads == Some(0) {
        return Err("--threads must be at least 1".into());
    }
    if let Some(pool) = args.buffer_pool {
        if pool.0 < 1 << 20 {
            return Err("--buffer-pool must be at least 1MiB".into());
        }
    }
    let mut configs = Vec::new();
    for name in &args.configs {
        let config = Config::parse(name)?;
        if !configs.contains(&config) {
            configs.push(config);
        }
    }
    if configs.is_empty() {
        return Err("--configs needs at least one configuration".into());
    }
    for (flag, dir) in [("--json-dir", &args.json_dir), ("--dir", &args.dir)] {
        if let Some(dir) = dir.as_ref().filter(|d| !d.is_dir()) {
            return Err(format!("{flag}: directory does not exist: {}", dir.display()).into());
        }
    }
    crate::report::check_output("--markdown", args.markdown.as_deref())?;
    let parent = args.dir.clone().unwrap_or_else(default_scratch_parent);
    let pmem_dir = report::pmem_dir(args.pmem_dir.as_ref(), &parent, 0)?;
    let scratch = tempfile::Builder::new()
        .prefix("tailstore-tpcc-compare-")
        .tempdir_in(&parent)
        .map_err(|e| format!("cannot create a directory in {}: {e}", parent.display()))?;
    crate::interrupt::clean_up_on_signals("tailstore tpcc compare")?;
    crate::interrupt::remove_dir_on_interrupt(scratch.path());
    let own_files = format!("tailstore-tpcc-{}-", std::process::id());
    crate::interrupt::remove_named_on_interrupt(&pmem_dir, &own_files);
    let progress = Duration::from_secs_f64(args.progress);
    let tuning = TuningArgs {
        checkpoint_log: Some(args.checkpoint_log),
        checkpoint_every: Some(args.checkpoint_every),
        pmem_log_size: Some(args.pmem_log_size),
        max_replay: None,
        checkpoint_keep: None,
        doublewrite_size: None,
        log_ring: None,
    };
    tuning.validate()?;
    Ok(Plan {
        configs,
        tuning,
        scratch,
        pmem_dir,
        pool: args.buffer_pool.map(|p| p.0),
        options: DriverOptions {
            users: args.users,
            rampup: Duration::from_secs_f64(args.rampup),
            duration: Duration::from_secs_f64(args.duration),
            keying_thinking: false,
            all_warehouses: false,
            stock_level_isolation: args.execution.stock_level_isolation.into(),
            workers: args.execution.workers(),
            progress_every: (!progress.is_zero()).then_some(progress),
            seed: args.seed,
            ack_log: None,
        },
    })
}

/// Loads one database per kind of log the configurations need, with the same seed.
fn load_goldens(args: &CompareArgs, plan: &Plan) -> CliResult<Vec<Golden>> {
    let mut modes: Vec<CommitMode> = Vec::new();
    for config in &plan.configs {
        if !modes.contains(&config.mode()) {
            modes.push(config.mode());
        }
    }
    let threads = args.threads.unwrap_or_else(cores);
    let pool = plan
        .pool
        .unwrap_or_else(|| load_pool_bytes(args.warehouses));
    let mut goldens = Vec::new();
    for mode in modes {
        let dir = plan.scratch.path().join(format!("loaded-{mode}"));
        let pmem = plan.pmem_path(&format!("loaded-{mode}.pmem"));
        let files = RunFiles {
            paths: vec![pmem.clone(), doublewrite_path(&pmem)],
        };
        let instance = Instance {
            number: 1,
            data_dir: dir.clone(),
            log_dir: dir,
            pmem: Some(pmem),
        };
        let config = LoadConfig {
            progress: true,
            seed: args.seed,
            ..LoadConfig::new(args.warehouses, threads)
        };
        let loaded = load_instance(&instance, mode, pool, &plan.tuning, &config)?;
        println!(
            "loaded for {mode:<8} {} rows in {:.1} s; {}",
            group(loaded.rows),
            loaded.seconds,
            super::describe_sizes(&instance, mode)
        );
        goldens.push(Golden {
            mode,
            instance,
            _files: files,
        });
    }
    Ok(goldens)
}

/// Copies a file with the kernel's copy (`copy_file_range`), saying which on failure.
fn copy(from: &Path, to: &Path) -> CliResult<()> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()).into())
}

/// One run of `config`: a fresh copy of the loaded database, opened, driven, closed, removed.
fn run_config(plan: &Plan, golden: &Golden, config: Config, seq: usize) -> CliResult<RunReport> {
    settle_disk();
    let copy_began = Instant::now();
    let dir = plan
        .scratch
        .path()
        .join(format!("run-{seq}-{}", config.name()));
    let mut files = RunFiles {
        paths: vec![dir.clone()],
    };
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let log_dir = match config {
        Config::FsyncTmpfs => {
            let shm = plan.pmem_path(&format!("run-{seq}-log"));
            files.paths.push(shm.clone());
            std::fs::create_dir(&shm)
                .map_err(|e| format!("cannot create {}: {e}", shm.display()))?;
            shm
        }
        _ => dir.clone(),
    };
    let pmem = plan.pmem_path(&format!("run-{seq}.pmem"));
    let instance = Instance {
        number: 1,
        data_dir: dir,
        log_dir,
        pmem: Some(pmem.clone()),
    };
    let mode = config.mode();
    copy(&golden.instance.data_file(), &instance.data_file())?;
    if mode.uses_log_file() {
        copy(&golden.instance.log_file(), &instance.log_file())?;
    }
    if mode.uses_pmem() {
        files.paths.push(pmem.clone());
        files.paths.push(doublewrite_path(&pmem));
        let from = golden
            .instance
            .pmem
            .as_deref()
            .ok_or("internal: loaded database without its PMEM file")?;
        copy(from, &pmem)?;
    }
    // The copies' write-back must not overlap the run.
    settle_disk();
    let copy_s = copy_began.elapsed().as_secs_f64();
    let pool = plan
        .pool
        .unwrap_or_else(|| run_pool_bytes(super::file_len(&instance.data_file())));
    let db_config = instance.config(mode, pool, &plan.tuning);
    let (db, open) = Database::open(db_config.clone()).map_err(|e| {
        format!(
            "cannot open the copy in {}: {e}",
            instance.data_dir.display()
        )
    })?;
    if plan.options.progress_every.is_some() {
        println!(
            "{} (copied in {copy_s:.1} s): {}",
            config.name(),
            describe_open(&open)
        );
    }
    let medium = log_medium(db.log(), &db_config.log);
    let measured = drive(&[&db], &plan.options);
    let closed = db.close();
    let measured = measured?;
    closed?;
    let setup = RunSetup {
        commit: mode,
        options: &plan.options,
        dbs: vec![(instance.data_dir.display().to_string(), medium)],
        data_medium: filesystem_of(plan.scratch.path()),
        checkpoint_log_bytes: db_config.checkpoint_log_bytes,
        checkpoint_every: db_config.checkpoint_interval,
    };
    let report = build_report(&measured, &setup);
    drop(files);
    Ok(report)
}

fn write_json_quiet<T: Serialize>(path: &Path, value: &T) -> CliResult<()> {
    let text = serde_json::to_string_pretty(value)?;
    crate::report::write_whole(path, (text + "\n").as_bytes())
}

fn summarize(
    args: &CompareArgs,
    plan: &Plan,
    results: Vec<Vec<RunReport>>,
    load_s: f64,
    data_medium: String,
) -> Summary {
    let mut configs: Vec<ConfigSummary> = plan
        .configs
        .iter()
        .zip(results)
        .map(|(&config, runs)| {
            let runs_tpm: Vec<f64> = runs.iter().map(|r| r.tpm).collect();
            let (m, runs_nopm) = median_run(runs, |r| r.nopm);
            let p95 = |name: &str| m.per_type.get(name).map_or(0.0, |t| t.p95_ms);
            let aborts: u64 = m.aborts.values().sum();
            ConfigSummary {
                config: config.name().to_string(),
                commit: config.mode().name().to_string(),
                meaning: config.meaning().to_string(),
                medium: m.medium.clone(),
                durable: m.durable,
                tpm: m.tpm,
                nopm: m.nopm,
                tpm_vs_fsync_disk_pct: None,
                nopm_vs_fsync_disk_pct: None,
                runs_nopm,
                runs_tpm,
                new_order_p95_ms: p95("new-order"),
                payment_p95_ms: p95("payment"),
                flushes_per_s: m.log.flushes_per_s,
                avg_write_kib: m.log.avg_write_bytes / 1024.0,
                flush_waits_per_s: m.log.flush_waits_per_s,
                flush_wait_ms: m.log.flush_wait_ms,
                avg_flush_wait_us: m.log.avg_flush_wait_us,
                log_mb_per_s: m.log.log_mb_per_s,
                log_kib_per_commit: m.log.log_bytes_per_commit / 1024.0,
                aborts_per_s: aborts as f64 / m.duration_s.max(f64::MIN_POSITIVE),
                checkpoints: m.checkpoints,
                cpu_util: m.cpu_util,
            }
        })
        .collect();
    let base = configs
        .iter()
        .find(|c| c.config == Config::FsyncDisk.name())
        .map(|c| (c.tpm, c.nopm));
    if let Some((tpm, nopm)) = base {
        for c in &mut configs {
            c.tpm_vs_fsync_disk_pct = Some(percent(c.tpm, tpm));
            c.nopm_vs_fsync_disk_pct = Some(percent(c.nopm, nopm));
        }
    }
    Summary {
        warehouses: args.warehouses,
        users: args.users,
        rampup_s: args.rampup,
        duration_s: args.duration,
        runs: args.runs,
        load_s,
        data_medium,
        checkpoint_log_bytes: args.checkpoint_log.0 as u64,
        checkpoint_every_s: args.checkpoint_every,
        pmem_log_bytes: args.pmem_log_size.0 as u64,
        configs,
    }
}

fn percent(value: f64, base: f64) -> f64 {
    if base > 0.0 {
        (value / base - 1.0) * 100.0
    } else {
        0.0
    }
}

fn signed(pct: Option<f64>) -> String {
    pct.map_or("-".into(), |p| format!("{p:+.1}%"))
}

fn print_summary(s: &Summary) {
    println!();
    println!(
        "median of {} run(s); {} warehouse(s), {} user(s), timed {} s; loads took {:.1} s",
        s.runs, s.warehouses, s.users, s.duration_s, s.load_s
    );
    println!(
        "{:<12} {:>10} {:>8} {:>11} {:>8} {:>8} {:>9} {:>8} {:>9} {:>9} {:>8} {:>7} {:>5} {:>5}",
        "config",
        "NOPM",
        "vs disk",
        "TPM",
        "vs disk",
        "NO p95",
        "flushes/s",
        "avg KiB",
        "waits/s",
        "wait avg",
        "log MB/s",
        "KiB/tx",
        "ckpts",
        "cpu"
    );
    for c in &s.configs {
        let cells = row_cells(c);
        let line: Vec<String> = cells
            .iter()
            .zip(TEXT_WIDTHS)
            .map(|(cell, width)| match width {
                w if w < 0 => format!("{cell:<0$}", (-w) as usize),
                w => format!("{cell:>0$}", w as usize),
            })
            .collect();
        println!("{}", line.join(" "));
    }
    println!();
    for c in &s.configs {
        let runs: Vec<String> = c.runs_nopm.iter().map(|v| group(*v as u64)).collect();
        println!(
            "{:<12} {}; log: {}; NOPM per run: {}",
            c.config,
            c.meaning,
            c.medium,
            runs.join(" / ")
        );
    }
    println!("data files on {}", s.data_medium);
    println!("reference: SQL Server with the persisted log buffer on NVDIMM-N, HammerDB TPC-C: TPM and NOPM +38% (4 instances, +36..42% each); Dell EMC: +42% transactions/s");
}

/// Column widths of the text table, in `row_cells` order (negative: left-aligned).
const TEXT_WIDTHS: [i32; 14] = [-12, 10, 8, 11, 8, 8, 9, 8, 9, 9, 8, 7, 5, 5];

/// One configuration's figures, formatted, for the text and the Markdown table alike.
fn row_cells(c: &ConfigSummary) -> Vec<String> {
    vec![
        c.config.clone(),
        group(c.nopm as u64),
        signed(c.nopm_vs_fsync_disk_pct),
        group(c.tpm as u64),
        signed(c.tpm_vs_fsync_disk_pct),
        format!("{:.2}ms", c.new_order_p95_ms),
        format!("{:.0}", c.flushes_per_s),
        format!("{:.1}", c.avg_write_kib),
        format!("{:.0}", c.flush_waits_per_s),
        format!("{:.0}us", c.avg_flush_wait_us),
        format!("{:.1}", c.log_mb_per_s),
        format!("{:.1}", c.log_kib_per_commit),
        c.checkpoints.to_string(),
        format!("{:.0}%", c.cpu_util * 100.0),
    ]
}

fn markdown(s: &Summary) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "TPC-C, {} warehouse(s), {} virtual user(s), no keying/thinking time, ramp-up {} s, timed {} s, median of {} run(s) (interleaved); data files on {}; checkpoints every {} of log or {} s; pmem-log region {}.\n\n",
        s.warehouses,
        s.users,
        s.rampup_s,
        s.duration_s,
        s.runs,
        s.data_medium,
        ByteSize(s.checkpoint_log_bytes as usize),
        s.checkpoint_every_s,
        ByteSize(s.pmem_log_bytes as usize)
    ));
    out.push_str("| configuration | NOPM | vs fsync-disk | TPM | vs fsync-disk | New-Order p95 | log flushes/s | avg disk write KiB | flush waits/s | avg flush wait | log MB/s | log KiB per writing txn | checkpoints | CPU | log medium |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for c in &s.configs {
        let mut cells = row_cells(c);
        cells.push(c.medium.clone());
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out.push('\n');
    for c in &s.configs {
        out.push_str(&format!("- `{}`: {}.\n", c.config, c.meaning));
    }
    out.push_str("\nReference: SQL Server with the persisted log buffer (tail of the log on NVDIMM-N), HammerDB TPC-C: TPM and NOPM +38% over the log on SSD (+36% to +42% per database); Dell EMC: +42% transactions per second.\n");
    if s.configs.iter().any(|c| !c.durable) {
        out.push_str("`async` acknowledges commits before they are durable: an upper bound, not a durable configuration.\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_parse() {
        assert_eq!(Config::parse("pmem-log").ok(), Some(Config::PmemLog));
        assert!(Config::parse("fsync").is_err());
        assert_eq!(percent(138.0, 100.0).round(), 38.0);
        assert_eq!(signed(Some(38.04)), "+38.0%");
    }
}
