//! `tailstore tpcc run`: virtual users against one or more loaded databases; the report
//! (printed, and as JSON) is shared with `tpcc compare`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use tailstore_engine::Database;
use tailstore_log::{CommitMode, LogCounters};
use tailstore_tpcc::TxnKind;

use super::driver::{
    abort_names, drive, per_minute, AckLog, DriverOptions, InstanceMeasure, Measured,
};
use super::{describe_open, open_existing, DbArgs, ExecutionArgs};
use crate::report::{filesystem_of, group, log_medium, write_json};
use crate::CliResult;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Virtual users per database (each with a home warehouse, round-robin).
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub users: usize,
    /// Seconds of ramp-up: users run, nothing is counted.
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 10.0)]
    pub rampup: f64,
    /// Seconds of the timed window every figure comes from.
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 60.0)]
    pub duration: f64,
    /// Wait the specification's keying time before and a think time after each transaction
    /// (clause 5.2.5.7; a user then runs about one transaction every 20 s).
    #[arg(long)]
    pub keying_thinking: bool,
    /// Each user picks a warehouse for every transaction from its share of all warehouses
    /// (HammerDB's "use all warehouses"), instead of always using its home warehouse.
    #[arg(long)]
    pub all_warehouses: bool,
    #[command(flatten)]
    pub execution: ExecutionArgs,
    /// Seconds between progress lines (0: none).
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 5.0)]
    pub progress: f64,
    /// Seed of the users' random choices. Default: from the clock.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Acknowledge every committed New-Order (ramp-up included) in FILE, appended to (created
    /// if missing): one line `NO <instance> <w_id> <d_id> <o_id> <c_id> <o_ol_cnt>
    /// <o_entry_d>` (instance 1-based, o_entry_d in µs since the epoch) written once the
    /// commit has returned, in one write(2), unbuffered. In a durable commit mode every order
    /// listed must survive a crash (async acknowledges commits before they are durable). A
    /// last line without its newline was cut by a crash: ignore it. Rolled-back orders are
    /// not listed.
    #[arg(long, value_name = "FILE")]
    pub ack_log: Option<PathBuf>,
}

/// One transaction type's figures.
#[derive(Clone, Debug, Serialize)]
pub struct TypeReport {
    /// Committed and rolled back.
    pub count: u64,
    pub committed: u64,
    pub rolled_back: u64,
    /// Still aborted after the retry policy's last attempt (not in `count`).
    pub aborted: u64,
    /// Attempts run again after an engine abort or a stale read.
    pub retries: u64,
    /// Share of `count` among all types.
    pub mix: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

/// The log's counters over the window, with rates.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LogReport {
    pub commits: u64,
    pub log_bytes: u64,
    pub log_mb_per_s: f64,
    /// Log bytes per logged commit (writing transactions): records, full-page images and
    /// headers.
    pub log_bytes_per_commit: f64,
    /// `write` calls to the log file and their average size.
    pub disk_writes: u64,
    pub avg_write_bytes: f64,
    /// `fdatasync` calls on the log file.
    pub flushes: u64,
    pub flushes_per_s: f64,
    pub commits_per_flush: f64,
    /// Commits that waited for a flush, and for how long in all.
    pub flush_waits: u64,
    pub flush_waits_per_s: f64,
    pub flush_wait_ms: f64,
    pub avg_flush_wait_us: f64,
    pub ring_full_waits: u64,
    pub ring_full_wait_ms: f64,
}

impl LogReport {
    pub fn new(c: &LogCounters, elapsed: Duration) -> LogReport {
        let secs = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
        LogReport {
            commits: c.commits,
            log_bytes: c.log_bytes,
            log_mb_per_s: c.log_bytes as f64 / secs / 1e6,
            log_bytes_per_commit: if c.commits == 0 {
                0.0
            } else {
                c.log_bytes as f64 / c.commits as f64
            },
            disk_writes: c.disk_writes,
            avg_write_bytes: c.avg_write_bytes(),
            flushes: c.flushes,
            flushes_per_s: c.flushes as f64 / secs,
            commits_per_flush: c.commits_per_flush(),
            flush_waits: c.commits_waited,
            flush_waits_per_s: c.commits_waited as f64 / secs,
            flush_wait_ms: c.flush_wait_ns as f64 / 1e6,
            avg_flush_wait_us: c.avg_flush_wait_us(),
            ring_full_waits: c.ring_full_waits,
            ring_full_wait_ms: c.ring_full_wait_ns as f64 / 1e6,
        }
    }
}

/// One database's share of a run.
#[derive(Clone, Debug, Serialize)]
pub struct InstanceReport {
    pub instance: usize,
    pub data_dir: String,
    pub warehouses: u32,
    pub users: usize,
    pub tpm: f64,
    pub nopm: f64,
    pub transactions: u64,
    pub new_orders: u64,
    pub aborts: BTreeMap<String, u64>,
    pub checkpoints: u64,
    pub medium: String,
    pub log: LogReport,
}

/// A run's report (the JSON of `tpcc run`, and of every run of `tpcc compare`).
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// `tpcc compare`'s configuration name and run number (absent for `tpcc run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<usize>,
    /// All databases together.
    pub tpm: f64,
    pub nopm: f64,
    /// Users per database, and in all.
    pub users: usize,
    pub total_users: usize,
    /// Warehouses per database.
    pub warehouses: u32,
    pub instances: usize,
    pub commit: String,
    /// Where the log is (PMEM medium and flush instruction, file system of the log file).
    pub medium: String,
    /// File system of the data files.
    pub data_medium: String,
    pub durable: bool,
    pub rampup_s: f64,
    pub duration_s: f64,
    pub keying_thinking: bool,
    pub all_warehouses: bool,
    /// Isolation of Stock-Level (`read-committed` or `serializable`).
    pub stock_level_isolation: String,
    /// Transactions that ran at once at most, all databases together (`--workers`; absent:
    /// no bound). Latencies include the wait for a worker, as a client's include a server's
    /// queue.
    pub workers: Option<usize>,
    /// The users' own count of committed and rolled-back transactions, per minute (TPM comes
    /// from the engine's counters; the two differ by the rollbacks of stale reads).
    pub driver_tpm: f64,
    /// The engine's commits and rollbacks in the window (TPM's numerator, before the
    /// driver's own reads of d_next_o_id are taken out).
    pub engine_commits: u64,
    pub engine_rollbacks: u64,
    pub per_type: BTreeMap<String, TypeReport>,
    /// Engine aborts in the window by cause.
    pub aborts: BTreeMap<String, u64>,
    /// Attempts the users ran again, by cause (engine aborts and stale reads).
    pub retries: BTreeMap<String, u64>,
    /// Transactions given up after the retry policy's last attempt.
    pub aborted_transactions: u64,
    pub log: LogReport,
    pub checkpoints: u64,
    pub checkpoint_s: f64,
    /// The checkpoint policy: after this many log bytes, or seconds (0: by volume only).
    pub checkpoint_log_bytes: u64,
    pub checkpoint_every_s: f64,
    /// The process's CPU time over the window as a share of all cores (0..1).
    pub cpu_util: f64,
    pub cpu_seconds: f64,
    pub cores: usize,
    pub per_instance: Vec<InstanceReport>,
}

/// What the report says about the run besides the measurement.
pub struct RunSetup<'a> {
    pub commit: CommitMode,
    pub options: &'a DriverOptions,
    /// Per database: data directory and log medium.
    pub dbs: Vec<(String, String)>,
    pub data_medium: String,
    /// The checkpoint policy: log bytes, and seconds (`None`: by volume only).
    pub checkpoint_log_bytes: u64,
    pub checkpoint_every: Option<Duration>,
}

fn sum_counters(instances: &[InstanceMeasure]) -> LogCounters {
    let mut total = LogCounters::default();
    for i in instances {
        let c = &i.log;
        total.commits += c.commits;
        total.log_bytes += c.log_bytes;
        total.disk_writes += c.disk_writes;
        total.disk_write_bytes += c.disk_write_bytes;
        total.flushes += c.flushes;
        total.commits_waited += c.commits_waited;
        total.flush_wait_ns += c.flush_wait_ns;
        total.ring_full_waits += c.ring_full_waits;
        total.ring_full_wait_ns += c.ring_full_wait_ns;
        total.gather_wait_ns += c.gather_wait_ns;
    }
    total
}

fn abort_map(aborts: &[u64; 3]) -> BTreeMap<String, u64> {
    abort_names(aborts)
        .into_iter()
        .map(|(name, n)| (name.to_string(), n))
        .collect()
}

pub fn build_report(m: &Measured, setup: &RunSetup) -> RunReport {
    let elapsed = m.elapsed;
    let mut aborts = [0u64; 3];
    let mut tally = super::driver::Tally::new();
    for i in &m.instances {
        for (k, n) in i.aborts.iter().enumerate() {
            aborts[k] += n;
        }
        tally.merge(&i.tally);
    }
    let completed = tally.completed().max(1);
    let per_type = TxnKind::ALL
        .iter()
        .zip(&tally.per_type)
        .map(|(kind, t)| {
            let l = t.latency.summary_us();
            let report = TypeReport {
                count: t.completed(),
                committed: t.committed,
                rolled_back: t.rolled_back,
                aborted: t.aborted,
                retries: t.retries,
                mix: t.completed() as f64 / completed as f64,
                p50_ms: l.p50 / 1e3,
                p95_ms: l.p95 / 1e3,
                p99_ms: l.p99 / 1e3,
                max_ms: l.max / 1e3,
                mean_ms: l.mean / 1e3,
            };
            (kind.name().to_string(), report)
        })
        .collect();
    let mut retries: BTreeMap<String, u64> = tally
        .retries
        .by_cause()
        .map(|(c, n)| (c.name().to_string(), n))
        .collect();
    retries.insert("stale-read".into(), tally.retries.stale_reads());
    let per_instance = m
        .instances
        .iter()
        .enumerate()
        .map(|(k, i)| InstanceReport {
            instance: k + 1,
            data_dir: setup.dbs.get(k).map(|d| d.0.clone()).unwrap_or_default(),
            warehouses: i.warehouses,
            users: i.users,
            tpm: i.tpm(elapsed),
            nopm: i.nopm(elapsed),
            transactions: i.transactions,
            new_orders: i.new_orders,
            aborts: abort_map(&i.aborts),
            checkpoints: i.checkpoints,
            medium: setup.dbs.get(k).map(|d| d.1.clone()).unwrap_or_default(),
            log: LogReport::new(&i.log, elapsed),
        })
        .collect();
    let options = setup.options;
    RunReport {
        config: None,
        run: None,
        tpm: m.tpm(),
        nopm: m.nopm(),
        users: options.users,
        total_users: options.users * m.instances.len(),
        warehouses: m.instances.first().map_or(0, |i| i.warehouses),
        instances: m.instances.len(),
        commit: setup.commit.name().to_string(),
        medium: setup.dbs.first().map(|d| d.1.clone()).unwrap_or_default(),
        data_medium: setup.data_medium.clone(),
        durable: setup.commit.is_durable(),
        rampup_s: options.rampup.as_secs_f64(),
        duration_s: elapsed.as_secs_f64(),
        keying_thinking: options.keying_thinking,
        all_warehouses: options.all_warehouses,
        stock_level_isolation: options.stock_level_isolation.name().to_string(),
        workers: options.workers,
        driver_tpm: per_minute(tally.completed(), elapsed),
        engine_commits: m.instances.iter().map(|i| i.commits).sum(),
        engine_rollbacks: m.instances.iter().map(|i| i.rollbacks).sum(),
        per_type,
        aborts: abort_map(&aborts),
        retries,
        aborted_transactions: tally.per_type.iter().map(|t| t.aborted).sum(),
        log: LogReport::new(&sum_counters(&m.instances), elapsed),
        checkpoints: m.instances.iter().map(|i| i.checkpoints).sum(),
        checkpoint_s: m
            .instances
            .iter()
            .map(|i| i.checkpoint_time.as_secs_f64())
            .sum(),
        checkpoint_log_bytes: setup.checkpoint_log_bytes,
        checkpoint_every_s: setup.checkpoint_every.map_or(0.0, |d| d.as_secs_f64()),
        cpu_util: m.cpu_util,
        cpu_seconds: m.cpu_seconds,
        cores: m.cores,
        per_instance,
    }
}

pub fn run(args: &RunArgs) -> CliResult<()> {
    crate::report::check_output("--json", args.json.as_deref())?;
    args.db.validate()?;
    let mut options = driver_options(args)?;
    let instances = args.db.instances();
    let k = instances.len();
    println!(
        "tailstore tpcc run: {k} database(s), {} user(s) each, commit {}, ramp-up {} s, timed {} s, keying/thinking {}{}",
        args.users,
        args.db.commit,
        args.rampup,
        args.duration,
        if args.keying_thinking { "on" } else { "off" },
        if args.all_warehouses { ", all warehouses" } else { "" }
    );
    let mut dbs: Vec<Database> = Vec::with_capacity(k);
    let mut described = Vec::with_capacity(k);
    let mut policy = (0, None);
    for instance in &instances {
        let (db, open, config) = open_existing(instance, &args.db)?;
        let medium = log_medium(db.log(), &config.log);
        println!(
            "{}{}: {}",
            instance.label(k),
            instance.data_dir.display(),
            describe_open(&open)
        );
        println!("{}log: {medium}", instance.label(k));
        policy = (config.checkpoint_log_bytes, config.checkpoint_interval);
        described.push((instance.data_dir.display().to_string(), medium));
        dbs.push(db);
    }
    let data_medium = filesystem_of(&instances[0].data_dir);
    println!(
        "data files on {data_medium}; checkpoints every {} of log{}",
        super::bytes(policy.0),
        policy.1.map_or(String::new(), |d: Duration| format!(
            " or {} s",
            d.as_secs_f64()
        ))
    );
    if let Some(path) = &args.ack_log {
        options.ack_log = Some(Arc::new(AckLog::open(path)?));
    }
    let refs: Vec<&Database> = dbs.iter().collect();
    let measured = drive(&refs, &options)?;
    let setup = RunSetup {
        commit: args.db.commit,
        options: &options,
        dbs: described,
        data_medium,
        checkpoint_log_bytes: policy.0,
        checkpoint_every: policy.1,
    };
    let report = build_report(&measured, &setup);
    for db in dbs {
        db.close()?;
    }
    print_report(&report);
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    Ok(())
}

fn driver_options(args: &RunArgs) -> CliResult<DriverOptions> {
    let seconds = |value: f64, name: &str, zero_ok: bool| -> CliResult<Duration> {
        let ok = value.is_finite() && (value > 0.0 || (zero_ok && value == 0.0));
        if !ok {
            let what = if zero_ok { "zero or more" } else { "positive" };
            return Err(format!("--{name} must be a {what} number of seconds").into());
        }
        Ok(Duration::from_secs_f64(value))
    };
    if args.users == 0 {
        return Err("--users must be at least 1".into());
    }
    let progress = seconds(args.progress, "progress", true)?;
    Ok(DriverOptions {
        users: args.users,
        rampup: seconds(args.rampup, "rampup", true)?,
        duration: seconds(args.duration, "duration", false)?,
        keying_thinking: args.keying_thinking,
        all_warehouses: args.all_warehouses,
        stock_level_isolation: args.execution.stock_level_isolation.into(),
        workers: args.execution.workers(),
        progress_every: (!progress.is_zero()).then_some(progress),
        seed: args.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(7, |d| d.as_nanos() as u64)
        }),
        ack_log: None, // opened once the databases are
    })
}

/// "2 workers", or "no worker bound".
pub fn workers_phrase(workers: Option<usize>) -> String {
    match workers {
        Some(1) => "1 worker".to_string(),
        Some(n) => format!("{n} workers"),
        None => "no worker bound".to_string(),
    }
}

/// The human-readable report, ending with HammerDB's result line.
pub fn print_report(r: &RunReport) {
    println!();
    println!(
        "timed window {:.1} s: {} user(s) x {} database(s), {} warehouse(s) each, commit {}, Stock-Level {}, {}",
        r.duration_s,
        r.users,
        r.instances,
        r.warehouses,
        r.commit,
        r.stock_level_isolation,
        workers_phrase(r.workers)
    );
    println!(
        "{:<13} {:>9} {:>6} {:>9} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "type",
        "count",
        "mix",
        "rolled-bk",
        "aborted",
        "retries",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "mean ms"
    );
    for kind in TxnKind::ALL {
        if let Some(t) = r.per_type.get(kind.name()) {
            println!(
                "{:<13} {:>9} {:>5.1}% {:>9} {:>8} {:>9} {:>8.2} {:>8.2} {:>8.2} {:>8.1} {:>8.2}",
                kind.name(),
                group(t.count),
                t.mix * 100.0,
                t.rolled_back,
                t.aborted,
                group(t.retries),
                t.p50_ms,
                t.p95_ms,
                t.p99_ms,
                t.max_ms,
                t.mean_ms
            );
        }
    }
    let list = |m: &BTreeMap<String, u64>| {
        let parts: Vec<String> = m
            .iter()
            .map(|(k, v)| format!("{k} {}", group(*v)))
            .collect();
        parts.join(", ")
    };
    println!("engine aborts    {}", list(&r.aborts));
    println!(
        "retries          {} (transactions given up: {})",
        list(&r.retries),
        r.aborted_transactions
    );
    let l = &r.log;
    println!(
        "log              {:.1} MB/s ({:.1} KiB per writing commit); {:.0} flushes/s ({:.1} commits/flush); {} disk writes, avg {:.1} KiB; flush waits {:.0}/s, {:.0} ms in all, avg {:.0} us; ring-full waits {}",
        l.log_mb_per_s,
        l.log_bytes_per_commit / 1024.0,
        l.flushes_per_s,
        l.commits_per_flush,
        group(l.disk_writes),
        l.avg_write_bytes / 1024.0,
        l.flush_waits_per_s,
        l.flush_wait_ms,
        l.avg_flush_wait_us,
        l.ring_full_waits
    );
    println!(
        "checkpoints      {} ({:.2} s)",
        r.checkpoints, r.checkpoint_s
    );
    println!(
        "cpu              {:.0}% of {} cores ({:.1} CPU-seconds)",
        r.cpu_util * 100.0,
        r.cores,
        r.cpu_seconds
    );
    println!(
        "medium           log: {}; data: {}",
        r.medium, r.data_medium
    );
    if !r.durable {
        println!("note             async acknowledges commits before they are durable");
    }
    if r.instances > 1 {
        for i in &r.per_instance {
            println!(
                "instance {:<7} {} NOPM, {} TPM, {:.0} flushes/s, {} aborts",
                i.instance,
                group(i.nopm as u64),
                group(i.tpm as u64),
                i.log.flushes_per_s,
                i.aborts.values().sum::<u64>()
            );
        }
    }
    println!(
        "TEST RESULT : System achieved {} NOPM from {} tailstore TPM",
        group(r.nopm.round() as u64),
        group(r.tpm.round() as u64)
    );
}
