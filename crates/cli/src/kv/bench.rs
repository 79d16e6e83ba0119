//! `tailstore bench kv`: a memtier-like load generator for any RESP server (tailstore's own or
//! Redis), so that both are measured by the same client.
//!
//! T threads each own N connections, all non-blocking, multiplexed with one poller (mio) per
//! thread. Each connection is a closed loop keeping P requests in flight: whenever replies
//! come back, it sends as many new requests as were answered, in one write. The mix of SETs
//! and GETs follows the ratio exactly over every cycle of `set + get` requests of a
//! connection; keys are `PREFIX<number>` over the key space, picked at random or in order.
//!
//! A run ends after `--requests` per connection or after `--test-time` seconds (then no new
//! request is sent, and the replies still awaited are collected). With `--warmup`, requests
//! sent during the first seconds are not counted. Rates are over the measured window: from
//! its start to the last reply.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use mio::{Events, Interest, Poll, Token};
use rustls::{ClientConnection, StreamOwned};
use serde::Serialize;
use tailstore_kv::server::Secret;
use tailstore_resp::Limits;

use super::address::{ServerAddress, Stream};
use super::connection::{Connection, ThreadContext, ThreadStats};
use super::link::Link;
use super::tls::{TlsClient, TlsClientArgs};
use super::workload::{value_bytes, KeyGen, KeyPattern, Ratio};
use crate::latency::LatencyRecorder;
use crate::report::{group, write_json};
use crate::CliResult;

/// Without a reply for this long while requests are in flight, the run fails.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// After a timed run's end, how long the replies still awaited are waited for.
const DRAIN_GRACE: Duration = Duration::from_secs(5);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Args, Debug, Clone)]
pub struct BenchKvArgs {
    /// The server: HOST:PORT, or the path of a Unix socket (one with a '/', e.g.
    /// /run/redis.sock).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6379")]
    pub server: String,
    /// Connections per thread.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub clients: usize,
    /// Threads, each with its own connections and poller.
    #[arg(long, value_name = "T", default_value_t = 2)]
    pub threads: usize,
    /// Requests each connection keeps in flight.
    #[arg(long, value_name = "P", default_value_t = 1)]
    pub pipeline: usize,
    /// SETs to GETs: 1:10 is one SET for every ten GETs, 1:0 only SETs, 0:1 only GETs.
    #[arg(long, value_name = "SET:GET", default_value = "1:10")]
    pub ratio: Ratio,
    /// Bytes of each SET's value (4096, 4KiB, 1MiB).
    #[arg(long, value_name = "BYTES", default_value_t = 32, value_parser = crate::args::byte_count)]
    pub data_size: usize,
    /// Number of distinct keys: PREFIX0 … PREFIX(N-1).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub key_space: u64,
    /// How keys are picked: random (uniform) or sequential (each thread walks its own slice
    /// of the key space in order, so that `--requests K/(T·N)` writes every key once).
    #[arg(long, value_name = "PATTERN", value_enum, default_value_t = KeyPattern::Random)]
    pub key_pattern: KeyPattern,
    /// Prefix of every key.
    #[arg(long, value_name = "TEXT", default_value = "key:")]
    pub key_prefix: String,
    /// Requests per connection (default: 10000 when --test-time is not given).
    #[arg(long, value_name = "N", conflicts_with = "test_time")]
    pub requests: Option<u64>,
    /// Run for this many seconds instead of a number of requests.
    #[arg(long, value_name = "SECONDS", value_parser = crate::args::seconds)]
    pub test_time: Option<f64>,
    /// Seconds at the start of a timed run whose requests are not counted.
    #[arg(
        long,
        value_name = "SECONDS",
        value_parser = crate::args::seconds,
        default_value_t = 0.0,
        requires = "test_time"
    )]
    pub warmup: f64,
    /// Seed of the random keys.
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u64,
    /// Write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The server's password (its `requirepass`): each connection sends AUTH with it first.
    #[arg(long, value_name = "PASSWORD")]
    pub password: Option<Secret>,
    /// The ACL user to log in as with --password (AUTH user password); by default the
    /// server's `default` user.
    #[arg(long, value_name = "NAME", requires = "password")]
    pub user: Option<String>,
    #[command(flatten)]
    pub tls: TlsClientArgs,
}

/// When a run ends.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// After this many requests per connection.
    Requests(u64),
    /// After a warm-up (not counted) and a measured time.
    Time { warmup: Duration, measure: Duration },
}

/// One run of the load generator, as the command line or `kv compare` sets it up.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// What the report calls the server (as given).
    pub server: String,
    pub addr: ServerAddress,
    pub clients: usize,
    pub threads: usize,
    pub pipeline: usize,
    pub ratio: Ratio,
    pub data_size: usize,
    pub key_space: u64,
    pub key_pattern: KeyPattern,
    pub key_prefix: String,
    pub stop: Stop,
    pub seed: u64,
    /// Sent with AUTH on each connection before the load.
    pub password: Option<Secret>,
    /// The ACL user the password is for (`None`: `default`).
    pub user: Option<String>,
    /// TLS on each connection (`--tls`).
    pub tls: Option<TlsClient>,
}

/// Latencies in milliseconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LatencyMs {
    pub avg: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// What one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub server: String,
    pub clients: usize,
    pub threads: usize,
    pub pipeline: usize,
    pub ratio: String,
    pub data_size: usize,
    pub key_space: u64,
    pub key_pattern: String,
    pub requests_per_client: Option<u64>,
    pub test_time_s: Option<f64>,
    pub warmup_s: f64,
    /// Length of the measured window.
    pub seconds: f64,
    /// Replies received to requests sent in the measured window, error replies not
    /// included (they are `errors`).
    pub ops: u64,
    pub sets: u64,
    pub gets: u64,
    pub ops_per_sec: f64,
    pub set_ops_per_sec: f64,
    pub get_ops_per_sec: f64,
    /// GETs answered with a value, and with nil.
    pub hits: u64,
    pub misses: u64,
    /// Bytes sent and received together, in KiB per second.
    pub kb_per_sec: f64,
    pub latency_ms: LatencyMs,
    /// Error replies (and replies of an unexpected type).
    pub errors: u64,
    pub first_error: Option<String>,
}

impl BenchKvArgs {
    /// Checks the options and resolves the server's address.
    pub fn config(&self) -> CliResult<BenchConfig> {
        if self.warmup > 0.0 && self.test_time.is_none() {
            // A run of a number of requests counts them all; a warm-up would be ignored.
            return Err("--warmup needs --test-time".into());
        }
        let stop = match (self.requests, self.test_time) {
            (Some(_), Some(_)) => {
                return Err("give either --requests or --test-time, not both".into())
            }
            (Some(0), None) => return Err("--requests must be at least 1".into()),
            (Some(n), None) => Stop::Requests(n),
            (None, Some(s)) => {
                if !(s > 0.0 && s.is_finite()) {
                    return Err("--test-time must be a positive number of seconds".into());
                }
                if !(self.warmup >= 0.0 && self.warmup.is_finite()) {
                    return Err("--warmup must be zero or more seconds".into());
                }
                Stop::Time {
                    warmup: Duration::from_secs_f64(self.warmup),
                    measure: Duration::from_secs_f64(s),
                }
            }
            (None, None) => Stop::Requests(10_000),
        };
        let config = BenchConfig {
            server: self.server.clone(),
            addr: ServerAddress::parse(&self.server, "--server")?,
            clients: self.clients,
            threads: self.threads,
            pipeline: self.pipeline,
            ratio: self.ratio,
            data_size: self.data_size,
            key_space: self.key_space,
            key_pattern: self.key_pattern,
            key_prefix: self.key_prefix.clone(),
            stop,
            seed: self.seed,
            password: self.password.clone(),
            user: self.user.clone(),
            tls: TlsClient::new(&self.tls, &self.server, "")?,
        };
        config.validate()?;
        Ok(config)
    }
}

impl BenchConfig {
    pub fn validate(&self) -> CliResult<()> {
        if self.clients == 0 || self.threads == 0 || self.pipeline == 0 {
            return Err("--clients, --threads and --pipeline must be at least 1".into());
        }
        if self.clients > 100_000 || self.threads > 1024 || self.pipeline > 1_000_000 {
            return Err("--clients (at most 100000), --threads (at most 1024) or --pipeline (at most 1000000) is too large".into());
        }
        if self.key_space == 0 {
            return Err("--key-space must be at least 1".into());
        }
        if self.data_size > 512 << 20 {
            return Err("--data-size must be at most 512 MiB (Redis's largest value)".into());
        }
        Ok(())
    }

    fn requests(&self) -> Option<u64> {
        match self.stop {
            Stop::Requests(n) => Some(n),
            Stop::Time { .. } => None,
        }
    }
}

pub fn run(args: &BenchKvArgs) -> CliResult<()> {
    crate::report::check_output("--json", args.json.as_deref())?;
    let config = args.config()?;
    println!("{}", describe(&config));
    let report = run_bench(&config)?;
    print_report(&report);
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    report.without_errors().map(|_| ())
}

impl BenchReport {
    /// This report, or an error if the server answered any request with an error: the
    /// figures then measure something else than the load asked for, and a comparison
    /// must not use them.
    pub fn without_errors(self) -> CliResult<BenchReport> {
        if self.errors == 0 {
            return Ok(self);
        }
        Err(format!(
            "{} of the measured requests were answered with an error (the first: {}); the \
             figures count only the others",
            group(self.errors),
            self.first_error.as_deref().unwrap_or("not kept")
        )
        .into())
    }
}

/// One line on what a run does.
pub fn describe(c: &BenchConfig) -> String {
    let stop = match c.stop {
        Stop::Requests(n) => format!("{} requests per connection", group(n)),
        Stop::Time { warmup, measure } if warmup.is_zero() => {
            format!("{} s", measure.as_secs_f64())
        }
        Stop::Time { warmup, measure } => format!(
            "{} s warm-up + {} s",
            warmup.as_secs_f64(),
            measure.as_secs_f64()
        ),
    };
    format!(
        "tailstore bench kv: {} ({}), {} thread(s) x {} connection(s), pipeline {}, SET:GET {}, {}-byte values, {} keys ({}), {stop}",
        c.server,
        c.addr,
        c.threads,
        c.clients,
        c.pipeline,
        c.ratio,
        c.data_size,
        group(c.key_space),
        c.key_pattern.name()
    )
}

/// What one thread brings back.
struct ThreadResult {
    stats: ThreadStats,
    measure_from: Instant,
}

/// Runs the load and measures it. Fails when the server cannot be reached, closes a
/// connection, sends what does not parse or stops answering; error replies are counted, not
/// failures (see [`BenchReport::without_errors`]).
pub fn run_bench(config: &BenchConfig) -> CliResult<BenchReport> {
    config.validate()?;
    // One connection first, so that an unreachable server, or one that wants a password,
    // gives one clear error.
    connect(config)?;
    let value = value_bytes(config.data_size);
    let barrier = Barrier::new(config.threads);
    let results: Vec<Result<ThreadResult, String>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..config.threads)
            .map(|t| {
                let (value, barrier) = (&value[..], &barrier);
                thread::Builder::new()
                    .name(format!("bench-kv-{t}"))
                    .spawn_scoped(scope, move || run_thread(config, t, value, barrier))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|_| Err("a load thread panicked".into())),
                Err(e) => Err(format!("cannot start a load thread: {e}")),
            })
            .collect()
    });
    let mut threads = Vec::with_capacity(results.len());
    for result in results {
        threads.push(result.map_err(|e| format!("{}: {e}", config.server))?);
    }
    Ok(build_report(config, threads))
}

/// A connection to the server, with its TLS session (handshake done) if `--tls`, ready
/// for the load: authenticated if a password is given, and answering PING (before the
/// run's clock starts).
fn connect(config: &BenchConfig) -> Result<(Stream, Option<Box<ClientConnection>>), String> {
    let cannot = |e: std::io::Error| format!("cannot connect to {}: {e}", config.server);
    let stream = config.addr.connect(CONNECT_TIMEOUT).map_err(cannot)?;
    stream
        .set_read_timeout(Some(CONNECT_TIMEOUT))
        .map_err(cannot)?;
    // `TlsClient::new` refused TLS over a Unix socket.
    match (&config.tls, stream) {
        (Some(tls), Stream::Tcp(stream)) => {
            let secure = tls.secure(stream).map_err(|e| e.to_string())?;
            let StreamOwned { conn, sock } = ready(secure, config)?;
            Ok((Stream::Tcp(sock), Some(Box::new(conn))))
        }
        (_, stream) => Ok((ready(stream, config)?, None)),
    }
}

/// `stream` once it is authenticated (if a password is given) and answers PING.
fn ready<S: Read + Write>(stream: S, config: &BenchConfig) -> Result<S, String> {
    let mut link = Link::new(stream);
    let user = config.user.as_deref();
    link.authenticate(&config.server, user, config.password.as_ref(), "--password")
        .map_err(|e| e.to_string())?;
    link.into_stream().map_err(|e| e.to_string())
}

/// One thread: connects its clients, waits for the other threads, then runs the event loop.
fn run_thread(
    config: &BenchConfig,
    t: usize,
    value: &[u8],
    barrier: &Barrier,
) -> Result<ThreadResult, String> {
    let setup = setup_thread(config);
    // Every thread reaches the barrier, even one that failed, so that none waits forever.
    barrier.wait();
    let (mut poll, mut conns) = setup?;
    let start = Instant::now();
    let (measure_from, deadline) = match config.stop {
        Stop::Requests(_) => (start, None),
        Stop::Time { warmup, measure } => (start + warmup, Some(start + warmup + measure)),
    };
    let mut ctx = ThreadContext {
        ratio: config.ratio,
        pipeline: config.pipeline,
        keys: KeyGen::new(
            config.key_pattern,
            config.key_prefix.as_bytes(),
            config.key_space,
            t,
            config.threads,
            config.seed,
        ),
        value,
        limits: Limits::default(),
        measure_from,
        issuing: true,
        stats: ThreadStats::new(),
        last_progress: start,
    };
    let mut events = Events::with_capacity(conns.len().clamp(64, 4096));
    let mut done = vec![false; conns.len()];
    let mut remaining = conns.len();
    let mut warming = measure_from > start;
    let mut drain_until: Option<Instant> = None;
    for (i, conn) in conns.iter_mut().enumerate() {
        conn.fill(&mut ctx)?;
        if conn.is_done(&ctx) {
            done[i] = true;
            remaining -= 1;
        }
    }
    while remaining > 0 {
        let now = Instant::now();
        if warming && now >= measure_from {
            warming = false;
            ctx.stats.tx_bytes = 0;
            ctx.stats.rx_bytes = 0;
        }
        if let Some(deadline) = deadline.filter(|&d| ctx.issuing && now >= d) {
            ctx.issuing = false;
            drain_until = Some(deadline + DRAIN_GRACE);
            for (i, conn) in conns.iter().enumerate() {
                if !done[i] && conn.is_done(&ctx) {
                    done[i] = true;
                    remaining -= 1;
                }
            }
            continue;
        }
        if drain_until.is_some_and(|d| now >= d) {
            break; // replies that never came are not counted
        }
        if now.duration_since(ctx.last_progress) > STALL_TIMEOUT {
            let waiting: usize = conns.iter().map(Connection::in_flight).sum();
            return Err(format!(
                "no reply for {} s with {waiting} request(s) in flight",
                STALL_TIMEOUT.as_secs()
            ));
        }
        let mut timeout = Duration::from_millis(100);
        if warming {
            timeout = timeout.min(measure_from - now);
        }
        if let Some(deadline) = deadline.filter(|_| ctx.issuing) {
            timeout = timeout.min(deadline.saturating_duration_since(now));
        }
        match poll.poll(&mut events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("poll failed: {e}")),
        }
        for event in events.iter() {
            let i = event.token().0;
            let conn = &mut conns[i];
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                conn.on_readable(&mut ctx)?;
            }
            if event.is_writable() {
                conn.flush(&mut ctx)?;
            }
            if !done[i] && conn.is_done(&ctx) {
                done[i] = true;
                remaining -= 1;
            }
        }
    }
    for conn in &mut conns {
        let _ = poll.registry().deregister(&mut conn.stream);
    }
    Ok(ThreadResult {
        stats: ctx.stats,
        measure_from,
    })
}

fn setup_thread(config: &BenchConfig) -> Result<(Poll, Vec<Connection>), String> {
    let poll = Poll::new().map_err(|e| format!("cannot create a poller: {e}"))?;
    let mut conns = Vec::with_capacity(config.clients);
    for i in 0..config.clients {
        let (stream, session) = connect(config)?;
        let mut stream = stream
            .into_polled()
            .map_err(|e| format!("cannot connect to {}: {e}", config.server))?;
        poll.registry()
            .register(
                &mut stream,
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| format!("cannot register a connection with the poller: {e}"))?;
        conns.push(Connection::new(
            stream,
            session,
            config.pipeline,
            config.requests(),
        ));
    }
    Ok((poll, conns))
}

fn build_report(config: &BenchConfig, threads: Vec<ThreadResult>) -> BenchReport {
    let mut latency = LatencyRecorder::new();
    let mut total = ThreadStats::new();
    let mut start: Option<Instant> = None;
    for t in &threads {
        let s = &t.stats;
        latency.merge(&s.latency);
        total.sets += s.sets;
        total.gets += s.gets;
        total.hits += s.hits;
        total.misses += s.misses;
        total.errors += s.errors;
        total.tx_bytes += s.tx_bytes;
        total.rx_bytes += s.rx_bytes;
        if total.first_error.is_none() {
            total.first_error.clone_from(&s.first_error);
        }
        total.last_reply = total.last_reply.max(s.last_reply);
        start = Some(start.map_or(t.measure_from, |s| s.min(t.measure_from)));
    }
    let seconds = match (start, total.last_reply) {
        (Some(start), Some(end)) => end.saturating_duration_since(start).as_secs_f64(),
        _ => 0.0,
    };
    let rate = |n: u64| {
        if seconds > 0.0 {
            n as f64 / seconds
        } else {
            0.0
        }
    };
    let ops = total.sets + total.gets;
    let summary = latency.summary_us();
    let ms = |us: f64| us / 1000.0;
    let (test_time_s, warmup_s) = match config.stop {
        Stop::Requests(_) => (None, 0.0),
        Stop::Time { warmup, measure } => (Some(measure.as_secs_f64()), warmup.as_secs_f64()),
    };
    BenchReport {
        server: config.server.clone(),
        clients: config.clients,
        threads: config.threads,
        pipeline: config.pipeline,
        ratio: config.ratio.to_string(),
        data_size: config.data_size,
        key_space: config.key_space,
        key_pattern: config.key_pattern.name().to_string(),
        requests_per_client: config.requests(),
        test_time_s,
        warmup_s,
        seconds,
        ops,
        sets: total.sets,
        gets: total.gets,
        ops_per_sec: rate(ops),
        set_ops_per_sec: rate(total.sets),
        get_ops_per_sec: rate(total.gets),
        hits: total.hits,
        misses: total.misses,
        kb_per_sec: rate(total.tx_bytes + total.rx_bytes) / 1024.0,
        latency_ms: LatencyMs {
            avg: ms(summary.mean),
            p50: ms(summary.p50),
            p99: ms(summary.p99),
            p999: ms(summary.p999),
            max: ms(summary.max),
        },
        errors: total.errors,
        first_error: total.first_error,
    }
}

pub fn print_report(r: &BenchReport) {
    println!();
    println!(
        "{:<6} {:>12} {:>10} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "type",
        "ops/s",
        "hits/s",
        "misses/s",
        "KB/s",
        "avg ms",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms"
    );
    let l = &r.latency_ms;
    let per_s = |n: u64| {
        if r.seconds > 0.0 {
            n as f64 / r.seconds
        } else {
            0.0
        }
    };
    let rows = [
        ("SETs", r.set_ops_per_sec, None),
        (
            "GETs",
            r.get_ops_per_sec,
            Some((per_s(r.hits), per_s(r.misses))),
        ),
    ];
    for (name, rate, hits) in rows {
        let (h, m) = hits.map_or(("-".to_string(), "-".to_string()), |(h, m)| {
            (format!("{h:.0}"), format!("{m:.0}"))
        });
        println!("{name:<6} {rate:>12.0} {h:>10} {m:>10}");
    }
    println!(
        "{:<6} {:>12.0} {:>10.0} {:>10.0} {:>12.0} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
        "Totals",
        r.ops_per_sec,
        per_s(r.hits),
        per_s(r.misses),
        r.kb_per_sec,
        l.avg,
        l.p50,
        l.p99,
        l.p999,
        l.max
    );
    println!(
        "\n{} ops ({} SET, {} GET; {} hits, {} misses) in {:.2} s; errors: {}",
        group(r.ops),
        group(r.sets),
        group(r.gets),
        group(r.hits),
        group(r.misses),
        r.seconds,
        group(r.errors)
    );
    if let Some(first) = &r.first_error {
        println!("first error: {first}");
    }
}
