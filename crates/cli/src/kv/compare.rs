//! `tailstore kv compare`: tailstore's server in each commit mode against Redis 7, measured by
//! the same load generator in the same run — the third reference study's comparison (a
//! PMEM-aware Redis against stock Redis syncing every write: 2.4x the throughput, 12x lower
//! latency, instant restart).
//!
//! Each server gets its own temporary directory (on disk, so that fsync means something) and
//! a free port on loopback, and is started, waited for (first reply to PING), driven through
//! every workload and stopped. Workloads run in order of their SET share, 0% first; the key
//! space is filled once before the first workload that reads, so GETs hit. The restart is
//! measured on a fresh directory per server: write the data at full speed, SIGKILL, start
//! again, time from the spawn to the first reply to PING (connecting every millisecond).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use super::address::ServerAddress;
use super::bench::{run_bench, BenchConfig, BenchReport, Stop};
use super::server::{
    free_port, interrupted, on_path, reply_text, stop_servers_on_signals, ServerProcess,
};
use super::workload::{KeyPattern, Ratio};
use crate::report::{self, default_scratch_parent, filesystem_of, group, settle_disk, write_json};
use crate::CliResult;

/// The throughput settings: pipeline, connections per thread, threads.
const THROUGHPUT: Settings = Settings {
    name: "throughput",
    pipeline: 4,
    clients: 50,
    threads: 2,
};
/// The latency settings: one request at a time on one connection.
const LATENCY: Settings = Settings {
    name: "latency",
    pipeline: 1,
    clients: 1,
    threads: 1,
};
/// How the key space and the restart data are written: as fast as the server takes it.
const FILL: Settings = Settings {
    name: "fill",
    pipeline: 16,
    clients: 25,
    threads: 2,
};
/// How long a server may take to answer its first PING after a normal start.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// … and after a SIGKILL (it may replay a log or an AOF).
const RESTART_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Measured seconds of each workload run (after --warmup). The defaults make the whole
    /// comparison take about three minutes.
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 2.0)]
    pub test_time: f64,
    /// Seconds of each run whose requests are not counted.
    #[arg(long, value_name = "S", value_parser = crate::args::seconds, default_value_t = 0.2)]
    pub warmup: f64,
    /// Distinct keys of the workloads (filled before the first run that reads).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub key_space: u64,
    /// Bytes of each value (4096, 4KiB, 1MiB).
    #[arg(long, value_name = "BYTES", default_value_t = 4096, value_parser = crate::args::byte_count)]
    pub data_size: usize,
    /// SET shares of the workloads, in percent, comma-separated (the rest are GETs).
    #[arg(
        long,
        value_name = "PCT",
        value_delimiter = ',',
        default_value = "0,20,50,80,100"
    )]
    pub ratios: Vec<u32>,
    /// Servers to compare, comma-separated: tailstore-fsync, tailstore-buffer,
    /// tailstore-pmem-log, tailstore-async, redis-always, redis-everysec, redis-none.
    #[arg(
        long,
        value_name = "NAME",
        value_delimiter = ',',
        default_value = "tailstore-fsync,tailstore-buffer,tailstore-pmem-log,tailstore-async,redis-always,redis-everysec,redis-none"
    )]
    pub servers: Vec<String>,
    /// Restart measurement: MiB of values written before the SIGKILL (0: no restart
    /// measurement).
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub restart_data_mb: u64,
    /// Directory for the servers' directories (a fresh subdirectory each, removed at the
    /// end). Default: /var/tmp (on disk), else the temporary directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Directory of the PMEM files of tailstore's buffer and pmem-log modes. Default:
    /// /dev/shm (emulated PMEM: survives a process crash, not a power cut) when it has 2GiB
    /// free, else the server directories' parent.
    #[arg(long, value_name = "DIR")]
    pub pmem_dir: Option<PathBuf>,
    /// Write every run's report, the restarts and the ratios as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the tables as Markdown to FILE.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// An option for every `tailstore serve` this starts, after its own (repeat for more:
    /// `--serve-arg=--checkpoint-keep --serve-arg=0`).
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    pub serve_arg: Vec<String>,
}

#[derive(Clone, Copy, Debug, Serialize)]
struct Settings {
    name: &'static str,
    pipeline: usize,
    clients: usize,
    threads: usize,
}

/// A server of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    Tailstore(&'static str),
    Redis(&'static str),
}

const ALL_SERVERS: [(&str, Server); 7] = [
    ("tailstore-fsync", Server::Tailstore("fsync")),
    ("tailstore-buffer", Server::Tailstore("buffer")),
    ("tailstore-pmem-log", Server::Tailstore("pmem-log")),
    ("tailstore-async", Server::Tailstore("async")),
    ("redis-always", Server::Redis("always")),
    ("redis-everysec", Server::Redis("everysec")),
    ("redis-none", Server::Redis("none")),
];

/// The baseline every ratio is against.
const BASELINE: &str = "redis-always";

impl Server {
    fn parse(name: &str) -> CliResult<(&'static str, Server)> {
        ALL_SERVERS
            .into_iter()
            .find(|(n, _)| *n == name.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = ALL_SERVERS.iter().map(|(n, _)| *n).collect();
                format!("unknown server '{name}' (expected {})", names.join(", ")).into()
            })
    }

    fn meaning(self) -> &'static str {
        match self {
            Server::Tailstore("fsync") => "tailstore; the reply waits for fdatasync of the log",
            Server::Tailstore("buffer") => {
                "tailstore; the reply waits for the tail of the log in PMEM"
            }
            Server::Tailstore("pmem-log") => "tailstore; the whole log in PMEM",
            Server::Tailstore(_) => "tailstore; replies before the write is durable",
            Server::Redis("always") => "Redis 7, AOF with appendfsync always (the baseline)",
            Server::Redis("everysec") => {
                "Redis 7, AOF with appendfsync everysec: up to a second of writes lost"
            }
            Server::Redis(_) => "Redis 7, no persistence",
        }
    }

    /// Whether an acknowledged write survives a crash of the process.
    fn durable(self) -> bool {
        matches!(
            self,
            Server::Tailstore("fsync" | "buffer" | "pmem-log") | Server::Redis("always")
        )
    }
}

/// One workload run of one server.
#[derive(Debug, Serialize)]
struct RunResult {
    settings: &'static str,
    set_pct: u32,
    report: Option<BenchReport>,
    error: Option<String>,
    /// ops/s against redis-always's in the same workload.
    ops_vs_baseline: Option<f64>,
    /// p50 latency against redis-always's in the same workload.
    p50_vs_baseline: Option<f64>,
}

#[derive(Debug, Default, Serialize)]
struct RestartResult {
    data_mb: u64,
    keys_written: u64,
    load_ops_per_sec: f64,
    keys_before_kill: Option<i64>,
    /// From spawning the server again to its first reply to PING.
    restart_ms: Option<f64>,
    keys_after_restart: Option<i64>,
    /// What the server printed about recovery, if anything.
    recovery: Option<String>,
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct ServerResult {
    server: &'static str,
    meaning: &'static str,
    durable: bool,
    /// Not installed: left out of the tables.
    skipped: bool,
    /// Why the server was not measured (not started, not installed), or stopped early.
    error: Option<String>,
    start_ms: Option<f64>,
    /// What a tailstore server says of its durability once started (INFO's
    /// `tailstore_durability`: the commit mode and the medium under its PMEM file).
    durability: Option<String>,
    runs: Vec<RunResult>,
    restart: Option<RestartResult>,
}

#[derive(Debug, Serialize)]
struct CompareReport {
    test_time_s: f64,
    warmup_s: f64,
    key_space: u64,
    data_size: usize,
    ratios: Vec<u32>,
    throughput_settings: Settings,
    latency_settings: Settings,
    baseline: &'static str,
    data_medium: String,
    pmem_dir: String,
    restart_data_mb: u64,
    servers: Vec<ServerResult>,
}

/// Everything a server's runs need.
struct Plan {
    servers: Vec<(&'static str, Server)>,
    parent: PathBuf,
    pmem_dir: PathBuf,
    tailstore: PathBuf,
    /// Options added to every `tailstore serve` (`--serve-arg`).
    serve_args: Vec<String>,
    redis: Option<PathBuf>,
    ratios: Vec<u32>,
}

pub fn run(args: &CompareArgs) -> CliResult<()> {
    let plan = plan(args)?;
    stop_servers_on_signals()?;
    let data_medium = filesystem_of(&plan.parent);
    println!(
        "tailstore kv compare: {} server(s); SET {}% with {}-byte values over {} keys; {} s per run after {} s warm-up",
        plan.servers.len(),
        plan.ratios.iter().map(u32::to_string).collect::<Vec<_>>().join("/"),
        args.data_size,
        group(args.key_space),
        args.test_time,
        args.warmup
    );
    println!(
        "throughput settings: pipeline {}, {} threads x {} connections; latency settings: pipeline {}, {} thread x {} connection",
        THROUGHPUT.pipeline, THROUGHPUT.threads, THROUGHPUT.clients, LATENCY.pipeline, LATENCY.threads, LATENCY.clients
    );
    println!(
        "server directories in {} ({data_medium}); PMEM files in {} ({})",
        plan.parent.display(),
        plan.pmem_dir.display(),
        filesystem_of(&plan.pmem_dir)
    );
    if data_medium.starts_with("tmpfs") {
        println!("warning: the server directories are on tmpfs, where fsync is a no-op (use --dir on a disk)");
    }
    if plan.redis.is_none()
        && plan
            .servers
            .iter()
            .any(|(_, s)| matches!(s, Server::Redis(_)))
    {
        println!("redis-server not found: Redis baselines skipped");
    }
    let mut results = Vec::new();
    for &(name, server) in &plan.servers {
        let result = match (server, &plan.redis) {
            (Server::Redis(_), None) => ServerResult {
                server: name,
                meaning: server.meaning(),
                durable: server.durable(),
                skipped: true,
                error: Some("redis-server not found".into()),
                start_ms: None,
                durability: None,
                runs: Vec::new(),
                restart: None,
            },
            _ => measure_server(args, &plan, name, server),
        };
        if let Some(signal) = interrupted() {
            return Err(format!(
                "interrupted by {signal} while measuring {name}: its server was killed and the scratch directories removed"
            )
            .into());
        }
        results.push(result);
    }
    add_ratios(&mut results);
    let report = CompareReport {
        test_time_s: args.test_time,
        warmup_s: args.warmup,
        key_space: args.key_space,
        data_size: args.data_size,
        ratios: plan.ratios.clone(),
        throughput_settings: THROUGHPUT,
        latency_settings: LATENCY,
        baseline: BASELINE,
        data_medium,
        pmem_dir: plan.pmem_dir.display().to_string(),
        restart_data_mb: args.restart_data_mb,
        servers: results,
    };
    println!();
    print!("{}", text_tables(&report));
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    if let Some(path) = &args.markdown {
        report::write_whole(path, markdown(&report).as_bytes())?;
        println!("Markdown written to {}", path.display());
    }
    Ok(())
}

fn plan(args: &CompareArgs) -> CliResult<Plan> {
    if !(args.test_time > 0.0 && args.test_time.is_finite()) {
        return Err("--test-time must be a positive number of seconds".into());
    }
    if !(args.warmup >= 0.0 && args.warmup.is_finite()) {
        return Err("--warmup must be zero or more seconds".into());
    }
    if args.key_space == 0 {
        return Err("--key-space must be at least 1".into());
    }
    if args.data_size == 0 || args.data_size > 512 << 20 {
        return Err("--data-size must be between 1 byte and 512 MiB".into());
    }
    let mut ratios: Vec<u32> = Vec::new();
    for &pct in &args.ratios {
        if pct > 100 {
            return Err(format!("--ratios: {pct} is not a percentage (0 to 100)").into());
        }
        if !ratios.contains(&pct) {
            ratios.push(pct);
        }
    }
    if ratios.is_empty() {
        return Err("--ratios needs at least one SET percentage".into());
    }
    ratios.sort_unstable();
    let mut servers = Vec::new();
    for name in &args.servers {
        let server = Server::parse(name)?;
        if !servers.contains(&server) {
            servers.push(server);
        }
    }
    if servers.is_empty() {
        return Err("--servers needs at least one server".into());
    }
    if let Some(dir) = args.dir.as_ref().filter(|d| !d.is_dir()) {
        return Err(format!("--dir: directory does not exist: {}", dir.display()).into());
    }
    report::check_output("--json", args.json.as_deref())?;
    report::check_output("--markdown", args.markdown.as_deref())?;
    let parent = args.dir.clone().unwrap_or_else(default_scratch_parent);
    // A server's 1 GiB log buffer (buffer) or 768 MiB log region (pmem-log) and its 64 MiB
    // double-write area, one server at a time, and as much to spare.
    let pmem_dir = report::pmem_dir(args.pmem_dir.as_ref(), &parent, 2 << 30)?;
    let tailstore = std::env::current_exe()
        .map_err(|e| format!("cannot find the tailstore executable: {e}"))?;
    Ok(Plan {
        servers,
        parent,
        pmem_dir,
        tailstore,
        serve_args: args.serve_arg.clone(),
        redis: on_path("redis-server"),
        ratios,
    })
}

/// A server's directory and PMEM file, removed when dropped.
struct Scratch {
    dir: tempfile::TempDir,
    pmem: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        tailstore_engine::remove_pmem_files(&self.pmem);
    }
}

impl Scratch {
    fn new(plan: &Plan, name: &str, purpose: &str) -> CliResult<Scratch> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("tailstore-kv-{name}-{purpose}-"))
            .tempdir_in(&plan.parent)
            .map_err(|e| {
                format!(
                    "cannot create a directory in {}: {e}",
                    plan.parent.display()
                )
            })?;
        let pmem = plan.pmem_dir.join(format!(
            "tailstore-kv-compare-{}-{name}-{purpose}.pmem",
            std::process::id()
        ));
        tailstore_engine::remove_pmem_files(&pmem);
        Ok(Scratch { dir, pmem })
    }

    /// The command line that starts `server` on `port` with its data here.
    fn command(&self, plan: &Plan, server: Server, port: u16) -> CliResult<(PathBuf, Vec<String>)> {
        let dir = self.dir.path();
        match server {
            Server::Tailstore(mode) => {
                let db = dir.join("db");
                std::fs::create_dir_all(&db)
                    .map_err(|e| format!("cannot create {}: {e}", db.display()))?;
                let mut args: Vec<String> = vec![
                    "serve".into(),
                    "--listen".into(),
                    format!("127.0.0.1:{port}"),
                    "--db".into(),
                    db.display().to_string(),
                    "--commit".into(),
                    mode.into(),
                ];
                if matches!(mode, "buffer" | "pmem-log") {
                    args.push("--pmem".into());
                    args.push(self.pmem.display().to_string());
                }
                args.extend(plan.serve_args.iter().cloned());
                Ok((plan.tailstore.clone(), args))
            }
            Server::Redis(fsync) => {
                let program = plan.redis.clone().ok_or("redis-server not found")?;
                let mut args: Vec<String> = [
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    &dir.display().to_string(),
                    "--save",
                    "",
                    "--daemonize",
                    "no",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                match fsync {
                    "none" => args.extend(["--appendonly".into(), "no".into()]),
                    policy => args.extend([
                        "--appendonly".into(),
                        "yes".into(),
                        "--appendfsync".into(),
                        policy.into(),
                    ]),
                }
                Ok((program, args))
            }
        }
    }

    /// Starts `server` here and waits for its first reply to PING.
    fn start(
        &self,
        plan: &Plan,
        server: Server,
        log_name: &str,
        timeout: Duration,
    ) -> CliResult<(ServerProcess, Duration)> {
        let port = free_port()?;
        let (program, args) = self.command(plan, server, port)?;
        let mut process =
            ServerProcess::spawn(&program, &args, port, &self.dir.path().join(log_name))?;
        let ready = process.wait_ready(timeout)?;
        Ok((process, ready))
    }
}

/// A bench run against `process` with `settings`: random keys `key:<n>` unless changed.
fn bench_config(
    process: &ServerProcess,
    settings: Settings,
    ratio: Ratio,
    data_size: usize,
    key_space: u64,
    stop: Stop,
) -> BenchConfig {
    BenchConfig {
        server: process.addr.to_string(),
        addr: ServerAddress::Tcp(process.addr),
        clients: settings.clients,
        threads: settings.threads,
        pipeline: settings.pipeline,
        ratio,
        data_size,
        key_space,
        key_pattern: KeyPattern::Random,
        key_prefix: "key:".to_string(),
        stop,
        seed: 42,
        password: None,
        user: None,
        tls: None,
    }
}

/// Writes keys `prefix0 … prefix(keys-1)` once each, as fast as the server takes them.
fn fill(
    process: &ServerProcess,
    prefix: &str,
    keys: u64,
    data_size: usize,
) -> CliResult<BenchReport> {
    let connections = (FILL.clients * FILL.threads) as u64;
    let config = BenchConfig {
        key_pattern: KeyPattern::Sequential,
        key_prefix: prefix.to_string(),
        ..bench_config(
            process,
            FILL,
            Ratio { set: 1, get: 0 },
            data_size,
            keys,
            Stop::Requests(keys.div_ceil(connections)),
        )
    };
    run_bench(&config)?.without_errors()
}

fn measure_server(
    args: &CompareArgs,
    plan: &Plan,
    name: &'static str,
    server: Server,
) -> ServerResult {
    let mut result = ServerResult {
        server: name,
        meaning: server.meaning(),
        durable: server.durable(),
        skipped: false,
        error: None,
        start_ms: None,
        durability: None,
        runs: Vec::new(),
        restart: None,
    };
    settle_disk();
    if let Err(e) = run_workloads(args, plan, name, server, &mut result) {
        println!("{name}: {e}");
        result.error = Some(e.to_string());
    }
    if args.restart_data_mb > 0 && result.start_ms.is_some() && interrupted().is_none() {
        settle_disk();
        let restart = measure_restart(args, plan, name, server);
        match (&restart.restart_ms, &restart.error) {
            (Some(ms), _) => println!(
                "{name:<19} restart after SIGKILL with {} MiB: first PONG {ms:.1} ms after spawn; keys {} before the kill, {} after{}",
                restart.data_mb,
                count(restart.keys_before_kill),
                count(restart.keys_after_restart),
                restart
                    .recovery
                    .as_deref()
                    .map_or(String::new(), |line| format!("; it printed: {line}"))
            ),
            (None, Some(e)) => println!("{name:<19} restart: {e}"),
            (None, None) => {}
        }
        result.restart = Some(restart);
    }
    result
}

/// The `tailstore_durability` line of a tailstore server's INFO, if it answers one.
fn reported_durability(process: &ServerProcess) -> Option<String> {
    let info = reply_text(&process.command(&["INFO", "persistence"]).ok()?);
    info.lines()
        .find_map(|line| line.strip_prefix("tailstore_durability:"))
        .map(|line| line.trim_end().to_string())
}

/// How the report describes a server: what it is, what it said of its durability, and
/// whether an acknowledged write can be lost.
fn description(result: &ServerResult, not_durable: &str) -> String {
    let reported = result
        .durability
        .as_deref()
        .map_or(String::new(), |line| format!(" (it reports: {line})"));
    let lossy = if result.durable { "" } else { not_durable };
    format!("{}{reported}{lossy}", result.meaning)
}

fn count(n: Option<i64>) -> String {
    n.map_or("?".into(), |n| group(n.max(0) as u64))
}

/// Starts the server, fills the key space, runs every workload, stops the server.
fn run_workloads(
    args: &CompareArgs,
    plan: &Plan,
    name: &'static str,
    server: Server,
    result: &mut ServerResult,
) -> CliResult<()> {
    let scratch = Scratch::new(plan, name, "runs")?;
    let (mut process, ready) = scratch
        .start(plan, server, "server.log", START_TIMEOUT)
        .map_err(|e| format!("could not start: {e}"))?;
    result.start_ms = Some(ready.as_secs_f64() * 1000.0);
    if let Server::Tailstore(_) = server {
        result.durability = reported_durability(&process);
    }
    if plan.ratios.iter().any(|&pct| pct < 100) {
        let filled = fill(&process, "key:", args.key_space, args.data_size)
            .map_err(|e| format!("filling the key space: {e}"))?;
        println!(
            "{name:<19} filled {} keys in {:.2} s ({} SET/s)",
            group(args.key_space),
            filled.seconds,
            group(filled.ops_per_sec as u64)
        );
    }
    let stop = Stop::Time {
        warmup: Duration::from_secs_f64(args.warmup),
        measure: Duration::from_secs_f64(args.test_time),
    };
    for &pct in &plan.ratios {
        for settings in [THROUGHPUT, LATENCY] {
            if let Some(signal) = interrupted() {
                return Err(format!("interrupted by {signal}").into());
            }
            let config = bench_config(
                &process,
                settings,
                Ratio::from_set_percent(pct),
                args.data_size,
                args.key_space,
                stop,
            );
            let run = match run_bench(&config).and_then(BenchReport::without_errors) {
                Ok(report) => {
                    println!(
                        "{name:<19} SET {pct:>3}% {:<10} {:>9} ops/s  p50 {:>7.3} ms  p99 {:>7.3} ms  hits {:>8}  misses {:>6}  errors {}",
                        settings.name,
                        group(report.ops_per_sec as u64),
                        report.latency_ms.p50,
                        report.latency_ms.p99,
                        group(report.hits),
                        group(report.misses),
                        report.errors
                    );
                    if let Some(first) = &report.first_error {
                        println!("{name:<19}   first error: {first}");
                    }
                    RunResult {
                        settings: settings.name,
                        set_pct: pct,
                        report: Some(report),
                        error: None,
                        ops_vs_baseline: None,
                        p50_vs_baseline: None,
                    }
                }
                Err(e) => {
                    println!("{name:<19} SET {pct:>3}% {:<10} failed: {e}", settings.name);
                    RunResult {
                        settings: settings.name,
                        set_pct: pct,
                        report: None,
                        error: Some(e.to_string()),
                        ops_vs_baseline: None,
                        p50_vs_baseline: None,
                    }
                }
            };
            let failed = run.error.is_some();
            result.runs.push(run);
            if failed {
                if let Err(e) = process.command(&["PING"]) {
                    let said = process.log_tail(4);
                    process.kill();
                    return Err(format!("stopped answering ({e}): {said}").into());
                }
            }
        }
    }
    process.stop(Duration::from_secs(10));
    Ok(())
}

/// Fresh directory: start, write the data, SIGKILL, start again, time the first PONG.
fn measure_restart(args: &CompareArgs, plan: &Plan, name: &str, server: Server) -> RestartResult {
    let keys = ((args.restart_data_mb << 20) / args.data_size as u64).max(1);
    let mut result = RestartResult {
        data_mb: args.restart_data_mb,
        keys_written: keys,
        ..RestartResult::default()
    };
    let outcome = (|| -> CliResult<()> {
        let scratch = Scratch::new(plan, name, "restart")?;
        let (mut process, _) = scratch
            .start(plan, server, "server.log", START_TIMEOUT)
            .map_err(|e| format!("could not start: {e}"))?;
        let loaded = fill(&process, "restart:", keys, args.data_size)?;
        result.load_ops_per_sec = loaded.ops_per_sec;
        result.keys_before_kill = process.command(&["DBSIZE"]).ok().and_then(|v| match v {
            tailstore_resp::Value::Int(n) => Some(n),
            _ => None,
        });
        process.kill();
        let (mut again, ready) = scratch
            .start(plan, server, "restart.log", RESTART_TIMEOUT)
            .map_err(|e| format!("did not come back after SIGKILL: {e}"))?;
        result.restart_ms = Some(ready.as_secs_f64() * 1000.0);
        match again.command(&["DBSIZE"]) {
            Ok(tailstore_resp::Value::Int(n)) => result.keys_after_restart = Some(n),
            Ok(other) => {
                result.error = Some(format!("DBSIZE after the restart: {}", reply_text(&other)))
            }
            Err(e) => result.error = Some(format!("DBSIZE after the restart: {e}")),
        }
        if let Server::Tailstore(_) = server {
            result.recovery = recovery_line(&again.log);
        }
        again.stop(Duration::from_secs(10));
        Ok(())
    })();
    if let Err(e) = outcome {
        result.error = Some(e.to_string());
    }
    result
}

/// The last line of a server's output that speaks of recovery.
fn recovery_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find(|l| l.to_ascii_lowercase().contains("recover"))
        .map(|l| l.trim().to_string())
}

/// Fills in every run's ratios against the baseline's run of the same workload.
fn add_ratios(results: &mut [ServerResult]) {
    let baseline: Vec<(&'static str, u32, f64, f64)> = results
        .iter()
        .filter(|r| r.server == BASELINE)
        .flat_map(|r| r.runs.iter())
        .filter_map(|run| {
            let report = run.report.as_ref()?;
            Some((
                run.settings,
                run.set_pct,
                report.ops_per_sec,
                report.latency_ms.p50,
            ))
        })
        .collect();
    for result in results.iter_mut() {
        for run in &mut result.runs {
            let Some(report) = &run.report else { continue };
            let Some(&(_, _, ops, p50)) = baseline
                .iter()
                .find(|(s, pct, _, _)| *s == run.settings && *pct == run.set_pct)
            else {
                continue;
            };
            run.ops_vs_baseline = (ops > 0.0).then(|| report.ops_per_sec / ops);
            run.p50_vs_baseline = (p50 > 0.0).then(|| report.latency_ms.p50 / p50);
        }
    }
}

/// A table: a header row and rows of cells.
struct Table {
    title: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Whether the last column is text (left-aligned) rather than figures.
    text_last: bool,
}

impl Table {
    fn left_aligned(&self, column: usize) -> bool {
        column == 0 || (self.text_last && column + 1 == self.header.len())
    }
}

fn find_run<'a>(result: &'a ServerResult, settings: &str, pct: u32) -> Option<&'a RunResult> {
    result
        .runs
        .iter()
        .find(|r| r.settings == settings && r.set_pct == pct)
}

fn ratio_text(ratio: Option<f64>) -> String {
    ratio.map_or(String::new(), |r| format!(" ({r:.2}x)"))
}

/// The cell of one workload of one server: `figure` of its report, "failed" when the run
/// failed, "-" when it never ran.
fn cell(
    result: &ServerResult,
    settings: &str,
    pct: u32,
    figure: impl Fn(&RunResult, &BenchReport) -> String,
) -> String {
    match find_run(result, settings, pct) {
        Some(run) => match &run.report {
            Some(report) => figure(run, report),
            None => "failed".into(),
        },
        None => "-".into(),
    }
}

fn tables(report: &CompareReport) -> [Table; 3] {
    let pct_header = |what: &str| {
        let mut header = vec!["server".to_string()];
        header.extend(report.ratios.iter().map(|p| format!("SET {p}% {what}")));
        header
    };
    let mut throughput = Table {
        title: format!(
            "Throughput (ops/s; pipeline {}, {} threads x {} connections; in parentheses: x {BASELINE})",
            THROUGHPUT.pipeline, THROUGHPUT.threads, THROUGHPUT.clients
        ),
        header: pct_header("ops/s"),
        rows: Vec::new(),
        text_last: false,
    };
    let mut latency = Table {
        title: format!(
            "Latency (p50 / p99 ms; pipeline {}, {} thread x {} connection; in parentheses: p50 x {BASELINE}, lower is better)",
            LATENCY.pipeline, LATENCY.threads, LATENCY.clients
        ),
        header: pct_header("p50 / p99"),
        rows: Vec::new(),
        text_last: false,
    };
    let mut restart = Table {
        title: format!(
            "Restart after SIGKILL with {} MiB written ({}-byte values): from spawn to the first reply to PING",
            report.restart_data_mb, report.data_size
        ),
        header: [
            "server",
            "restart ms",
            "keys before kill",
            "keys after",
            "load SET/s",
            "server said",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows: Vec::new(),
        text_last: true,
    };
    for result in report.servers.iter().filter(|r| !r.skipped) {
        let mut tp_row = vec![result.server.to_string()];
        let mut lat_row = vec![result.server.to_string()];
        for &pct in &report.ratios {
            tp_row.push(cell(result, THROUGHPUT.name, pct, |run, r| {
                format!(
                    "{}{}",
                    group(r.ops_per_sec as u64),
                    ratio_text(run.ops_vs_baseline)
                )
            }));
            lat_row.push(cell(result, LATENCY.name, pct, |run, r| {
                format!(
                    "{:.3} / {:.3}{}",
                    r.latency_ms.p50,
                    r.latency_ms.p99,
                    ratio_text(run.p50_vs_baseline)
                )
            }));
        }
        throughput.rows.push(tp_row);
        latency.rows.push(lat_row);
        if let Some(r) = &result.restart {
            restart.rows.push(vec![
                result.server.to_string(),
                r.restart_ms.map_or("-".into(), |ms| format!("{ms:.1}")),
                count(r.keys_before_kill),
                count(r.keys_after_restart),
                group(r.load_ops_per_sec as u64),
                r.recovery
                    .as_deref()
                    .or(r.error.as_deref())
                    .map(first_line)
                    .unwrap_or_default(),
            ]);
        }
    }
    [throughput, latency, restart]
}

/// Why servers were not measured, or stopped being: one line each.
fn notes(report: &CompareReport) -> Vec<String> {
    let mut notes: Vec<String> = report
        .servers
        .iter()
        .filter(|r| !r.skipped)
        .filter_map(|r| {
            let error = r.error.as_deref()?;
            let state = if r.runs.is_empty() {
                "not measured"
            } else {
                "stopped early"
            };
            Some(format!("{}: {state}: {}", r.server, first_line(error)))
        })
        .collect();
    if report.servers.iter().any(|r| r.skipped) {
        notes.push("redis-server not found: Redis baselines skipped".into());
    }
    notes
}

/// The first line of `text`, cut at 200 characters.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    match line.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_string(),
    }
}

fn text_tables(report: &CompareReport) -> String {
    let mut out = String::new();
    for table in tables(report) {
        if table.rows.is_empty() {
            continue;
        }
        out.push_str(&table.title);
        out.push('\n');
        let mut widths: Vec<usize> = table.header.iter().map(|h| h.chars().count()).collect();
        for row in &table.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| -> String {
            let parts: Vec<String> = cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, &w))| {
                    if table.left_aligned(i) {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            parts.join("  ").trim_end().to_string()
        };
        out.push_str(&line(&table.header));
        out.push('\n');
        for row in &table.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out.push('\n');
    }
    for result in report.servers.iter().filter(|r| !r.skipped) {
        out.push_str(&format!(
            "{:<19} {}\n",
            result.server,
            description(result, " [not durable]")
        ));
    }
    for note in notes(report) {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}

fn markdown(report: &CompareReport) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "`tailstore kv compare`: {}-byte values, {} keys (filled before the first run that reads), {} s per run after a {} s warm-up; server directories on {}, PMEM files in {} (each server's medium below). Ratios are against `{BASELINE}` in the same workload.\n\n",
        report.data_size,
        group(report.key_space),
        report.test_time_s,
        report.warmup_s,
        report.data_medium,
        report.pmem_dir
    ));
    for table in tables(report) {
        if table.rows.is_empty() {
            continue;
        }
        out.push_str(&format!("**{}**\n\n", table.title));
        out.push_str(&format!("| {} |\n", table.header.join(" | ")));
        let align: Vec<&str> = (0..table.header.len())
            .map(|i| if table.left_aligned(i) { "---" } else { "---:" })
            .collect();
        out.push_str(&format!("|{}|\n", align.join("|")));
        for row in &table.rows {
            let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out.push('\n');
    }
    for result in report.servers.iter().filter(|r| !r.skipped) {
        out.push_str(&format!(
            "- `{}`: {}.\n",
            result.server,
            description(result, "; not durable")
        ));
    }
    for note in notes(report) {
        out.push_str(&format!("\nNote: {note}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_parse() {
        assert_eq!(
            Server::parse("tailstore-pmem-log").ok(),
            Some(("tailstore-pmem-log", Server::Tailstore("pmem-log")))
        );
        assert!(Server::parse("redis").is_err());
        assert!(Server::Redis("always").durable());
        assert!(!Server::Redis("everysec").durable());
        assert!(!Server::Tailstore("async").durable());
    }
}
