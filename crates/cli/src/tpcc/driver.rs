//! The TPC-C driver shared by `tpcc run` and `tpcc compare`: virtual users on open
//! databases, a ramp-up and a timed window, and what was measured in the window.
//!
//! * Users: `users` per database, each with a home warehouse, assigned round-robin (user `u`
//!   gets warehouse `u mod W + 1` and Stock-Level district `(u div W) mod 10 + 1`), as
//!   HammerDB does. With `all_warehouses`, user `u` owns the warehouses `w` with
//!   `(w - 1) mod users = u` (or one, round-robin, when there are more users than warehouses)
//!   and picks one at random for every transaction (HammerDB's "use all warehouses").
//! * Each user deals transaction types from its own deck ([`Deck::standard`]), and with
//!   `keying_thinking` waits the keying time before and a think time after each
//!   (clause 5.2.5.7: keying 18/3/2/2/2 s; think times negative-exponential with means
//!   12/12/10/5/5 s, truncated at ten times the mean, for New-Order, Payment, Order-Status,
//!   Delivery, Stock-Level).
//! * The window: after `rampup`, the engine's counters, Σ `d_next_o_id` and the process's CPU
//!   time are read; after `duration` again. TPM is the engine's commits and rollbacks between
//!   the two reads (less the driver's own reads of `d_next_o_id`) per minute; NOPM the growth
//!   of Σ `d_next_o_id` per minute. Transactions that end inside the window are counted in
//!   the per-type figures (counts, latency percentiles, retries).
//! * With an [`AckLog`], every New-Order a user saw committed (ramp-up and window alike) is
//!   appended to it as one line once its commit has returned: the orders a crash test may
//!   require to survive.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use tailstore_engine::{AbortCause, Database, EngineStats};
use tailstore_log::LogCounters;
use tailstore_storage::Value;
use tailstore_tpcc::random::{derive_seed, seeded};
use tailstore_tpcc::schema::{district, DISTRICTS_PER_WAREHOUSE};
use tailstore_tpcc::{
    Deck, EnteredOrder, Isolation, Outcome, Retries, Terminal, TpccError, TxnKind, TxnReport,
    Workers, Workload,
};

use crate::latency::LatencyRecorder;
use crate::report::group;
use crate::CliResult;

/// Keying times (clause 5.2.5.7), in [`TxnKind::ALL`] order, in seconds.
const KEYING_S: [f64; 5] = [18.0, 3.0, 2.0, 2.0, 2.0];
/// Means of the think times (clause 5.2.5.7), in [`TxnKind::ALL`] order, in seconds.
const THINK_MEAN_S: [f64; 5] = [12.0, 12.0, 10.0, 5.0, 5.0];

/// Users per core from which a run without `--workers` is told about the bound: on 2 cores
/// and 1 warehouse, 64 users made 11% more NOPM with it and 256 users 36% (decision 92).
const OVERSUBSCRIBED: usize = 32;

/// How to drive the databases.
#[derive(Clone, Debug)]
pub struct DriverOptions {
    /// Virtual users per database.
    pub users: usize,
    pub rampup: Duration,
    pub duration: Duration,
    pub keying_thinking: bool,
    pub all_warehouses: bool,
    pub stock_level_isolation: Isolation,
    /// Transactions that run at once, all databases together (`None`: no bound; see
    /// [`Workers`]).
    pub workers: Option<usize>,
    /// Print a progress line this often (`None`: quiet).
    pub progress_every: Option<Duration>,
    pub seed: u64,
    /// Where to acknowledge committed New-Orders (`None`: nowhere).
    pub ack_log: Option<Arc<AckLog>>,
}

/// The acknowledgement log of `tpcc run --ack-log`: one line per committed New-Order,
///
/// ```text
/// NO <instance> <w_id> <d_id> <o_id> <c_id> <o_ol_cnt> <o_entry_d>
/// ```
///
/// (instance 1-based, `o_entry_d` in µs since the epoch), appended after the transaction's
/// commit returned, so in a durable commit mode only orders that are durable are listed.
/// Each line goes to the file in a single `write` on a descriptor opened with `O_APPEND`:
/// users' lines never interleave, nothing waits in a user-space buffer (a SIGKILL loses no
/// line written), and no lock is taken. A reader must ignore a last line without its
/// newline.
#[derive(Debug)]
pub struct AckLog {
    file: File,
}

impl AckLog {
    /// Opens `path` for appending, creating it if it does not exist.
    pub fn open(path: &Path) -> CliResult<AckLog> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open the ack log {}: {e}", path.display()))?;
        Ok(AckLog { file })
    }

    /// Appends the line of `order`, entered in database `instance` (1-based).
    pub fn acknowledge(&self, instance: usize, order: &EnteredOrder) -> std::io::Result<()> {
        let line = format!(
            "NO {instance} {} {} {} {} {} {}\n",
            order.w_id, order.d_id, order.o_id, order.c_id, order.ol_cnt, order.entry_d
        );
        (&self.file).write_all(line.as_bytes())
    }
}

/// One transaction type's figures in the window.
pub struct TypeTally {
    pub committed: u64,
    pub rolled_back: u64,
    /// Still aborted after the retry policy's last attempt.
    pub aborted: u64,
    /// Committed and rolled-back transactions, retries included.
    pub latency: LatencyRecorder,
    /// Attempts run again (engine aborts and stale reads), of every outcome: where an
    /// optimistic engine spends the work that a locking one spends waiting.
    pub retries: u64,
}

impl TypeTally {
    fn new() -> Self {
        TypeTally {
            committed: 0,
            rolled_back: 0,
            aborted: 0,
            latency: LatencyRecorder::new(),
            retries: 0,
        }
    }

    pub fn completed(&self) -> u64 {
        self.committed + self.rolled_back
    }
}

/// What the users of one database saw in the window.
pub struct Tally {
    /// In [`TxnKind::ALL`] order.
    pub per_type: Vec<TypeTally>,
    /// Engine aborts and stale reads that were retried (or ended a transaction).
    pub retries: Retries,
}

impl Tally {
    pub fn new() -> Self {
        Tally {
            per_type: TxnKind::ALL.iter().map(|_| TypeTally::new()).collect(),
            retries: Retries::default(),
        }
    }

    fn record(&mut self, report: &TxnReport) {
        let t = &mut self.per_type[report.kind.index()];
        match report.outcome {
            Outcome::Committed => t.committed += 1,
            Outcome::RolledBack => t.rolled_back += 1,
            Outcome::Aborted(_) => t.aborted += 1,
        }
        if !matches!(report.outcome, Outcome::Aborted(_)) {
            t.latency.record_ns(report.latency.as_nanos() as u64);
        }
        t.retries += report.retries.total();
        self.retries.add(&report.retries);
    }

    pub fn merge(&mut self, other: &Tally) {
        for (mine, theirs) in self.per_type.iter_mut().zip(&other.per_type) {
            mine.committed += theirs.committed;
            mine.rolled_back += theirs.rolled_back;
            mine.aborted += theirs.aborted;
            mine.latency.merge(&theirs.latency);
            mine.retries += theirs.retries;
        }
        self.retries.add(&other.retries);
    }

    pub fn completed(&self) -> u64 {
        self.per_type.iter().map(TypeTally::completed).sum()
    }
}

/// One database's figures over the window.
pub struct InstanceMeasure {
    pub warehouses: u32,
    pub users: usize,
    /// Engine commits and rollbacks in the window, the driver's own reads taken out.
    pub transactions: u64,
    pub commits: u64,
    pub rollbacks: u64,
    /// Engine aborts, by cause ([`AbortCause::ALL`] order).
    pub aborts: [u64; 3],
    pub checkpoints: u64,
    pub checkpoint_time: Duration,
    pub log: LogCounters,
    /// Growth of Σ d_next_o_id: New-Order transactions committed.
    pub new_orders: u64,
    pub tally: Tally,
}

impl InstanceMeasure {
    pub fn tpm(&self, elapsed: Duration) -> f64 {
        per_minute(self.transactions, elapsed)
    }

    pub fn nopm(&self, elapsed: Duration) -> f64 {
        per_minute(self.new_orders, elapsed)
    }
}

/// Everything measured in one run.
pub struct Measured {
    /// The timed window's length.
    pub elapsed: Duration,
    pub instances: Vec<InstanceMeasure>,
    /// The process's CPU time in the window, and as a share of all cores' time.
    pub cpu_seconds: f64,
    pub cpu_util: f64,
    pub cores: usize,
}

impl Measured {
    pub fn tpm(&self) -> f64 {
        self.instances.iter().map(|i| i.tpm(self.elapsed)).sum()
    }

    pub fn nopm(&self) -> f64 {
        self.instances.iter().map(|i| i.nopm(self.elapsed)).sum()
    }
}

pub fn per_minute(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        0.0
    } else {
        count as f64 * 60.0 / secs
    }
}

/// The flags every user watches.
#[derive(Default)]
struct Flags {
    stop: AtomicBool,
    measuring: AtomicBool,
    failed: AtomicBool,
}

impl Flags {
    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }
}

/// A database's counters at one moment.
#[derive(Clone)]
struct Snapshot {
    stats: EngineStats,
    /// Transactions the driver itself committed so far (reads of `d_next_o_id`).
    probe_commits: u64,
    next_o_ids: u64,
}

/// Reads Σ d_next_o_id, one district per read-only transaction (a single-row read commits
/// without validation, so it never aborts however busy the district is).
struct Probe<'a> {
    workload: &'a Workload<'a>,
    commits: u64,
}

impl Probe<'_> {
    fn next_o_ids(&mut self) -> CliResult<u64> {
        let db = self.workload.db();
        let table = &self.workload.tables().district;
        let mut sum = 0u64;
        for w in 1..=self.workload.warehouses() {
            for d in 1..=DISTRICTS_PER_WAREHOUSE {
                let key = [Value::Int(i64::from(w)), Value::Int(i64::from(d))];
                let row = db.run(100, |txn| txn.get(table, &key))?;
                self.commits += 1;
                let next = match row.as_ref().map(|r| &r[district::D_NEXT_O_ID]) {
                    Some(Value::Int(v)) => *v,
                    _ => return Err(format!("district ({w}, {d}) is missing or malformed").into()),
                };
                sum += u64::try_from(next).unwrap_or(0);
            }
        }
        Ok(sum)
    }

    fn snapshot(&mut self) -> CliResult<Snapshot> {
        let stats = self.workload.db().stats();
        let probe_commits = self.commits;
        let next_o_ids = self.next_o_ids()?;
        Ok(Snapshot {
            stats,
            probe_commits,
            next_o_ids,
        })
    }
}

/// Engine transactions (commits + rollbacks) between two snapshots, the probe's taken out.
fn transactions(a: &Snapshot, b: &Snapshot) -> u64 {
    let engine = (b.stats.commits + b.stats.rollbacks) - (a.stats.commits + a.stats.rollbacks);
    engine.saturating_sub(b.probe_commits - a.probe_commits)
}

/// The process's user + system CPU time, all threads together (`CLOCK_PROCESS_CPUTIME_ID`).
pub fn process_cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// What each user runs against: its warehouses and its Stock-Level district.
fn user_plan(u: usize, users: usize, warehouses: u32, all: bool) -> (Vec<u32>, u32) {
    let w_count = warehouses as usize;
    let d_id = ((u / w_count) as u32 % DISTRICTS_PER_WAREHOUSE) + 1;
    if all && w_count >= users {
        let owned: Vec<u32> = (1..=warehouses)
            .filter(|w| (*w as usize - 1) % users == u)
            .collect();
        return (owned, d_id);
    }
    (vec![(u % w_count) as u32 + 1], d_id)
}

/// Sleeps `seconds` in short steps, returning early once the run stops.
fn pause(flags: &Flags, seconds: f64) {
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    while flags.running() {
        let now = Instant::now();
        if now >= until {
            return;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(100)));
    }
}

fn think_time<R: Rng>(kind: TxnKind, rng: &mut R) -> f64 {
    let mean = THINK_MEAN_S[kind.index()];
    let r: f64 = 1.0 - rng.gen::<f64>(); // in (0, 1]
    (-r.ln() * mean).min(10.0 * mean)
}

/// One virtual user of database `instance` (1-based): runs transactions until told to stop.
fn user_loop(
    workload: &Workload<'_>,
    options: &DriverOptions,
    workers: Option<&Workers>,
    flags: &Flags,
    (instance, u): (usize, usize),
    seed: u64,
) -> Result<Tally, String> {
    let (warehouses, d_id) = user_plan(
        u,
        options.users,
        workload.warehouses(),
        options.all_warehouses,
    );
    let mut terminals = Vec::with_capacity(warehouses.len());
    for (k, &w) in warehouses.iter().enumerate() {
        let rng = seeded(derive_seed(seed, k as u64 + 1));
        let mut terminal = Terminal::new(workload, w, d_id, rng)
            .map_err(|e| e.to_string())?
            .with_stock_level_isolation(options.stock_level_isolation);
        if let Some(workers) = workers {
            terminal = terminal.with_workers(workers);
        }
        terminals.push(terminal);
    }
    let mut rng = seeded(seed);
    let mut deck = Deck::standard();
    let mut tally = Tally::new();
    while flags.running() {
        let kind = deck.deal(&mut rng);
        if options.keying_thinking {
            pause(flags, KEYING_S[kind.index()]);
            if !flags.running() {
                break;
            }
        }
        let t = match terminals.len() {
            1 => 0,
            n => rng.gen_range(0..n),
        };
        let report = terminals[t]
            .run(kind)
            .map_err(|e: TpccError| e.to_string())?;
        if let (Some(log), Some(order)) = (&options.ack_log, &report.entered) {
            log.acknowledge(instance, order)
                .map_err(|e| format!("cannot write to the ack log: {e}"))?;
        }
        if flags.measuring.load(Ordering::Relaxed) {
            tally.record(&report);
        }
        if options.keying_thinking {
            let think = think_time(kind, &mut rng);
            pause(flags, think);
        }
        // Between two transactions a HammerDB user is a client waiting on the network, and
        // the server's worker gives up its processor. Users here call the engine directly,
        // so each hands the processor over at this boundary itself; otherwise, with more
        // users than cores, the kernel's preemptions are the only switches and often land
        // while a user holds a tree latch that the others then wait for (decision 50).
        std::thread::yield_now();
    }
    Ok(tally)
}

/// A progress line's figures since the previous one.
struct Ticker {
    last: Vec<Snapshot>,
    at: Instant,
}

/// Drives `dbs` (each with `options.users` users) through the ramp-up and the timed window.
pub fn drive(dbs: &[&Database], options: &DriverOptions) -> CliResult<Measured> {
    if options.users == 0 {
        return Err("--users must be at least 1".into());
    }
    let mut workloads = Vec::with_capacity(dbs.len());
    for (i, db) in dbs.iter().enumerate() {
        let mut rng = seeded(derive_seed(options.seed, 1_000_000 + i as u64));
        workloads.push(Workload::open(db, &mut rng)?);
    }
    let flags = Flags::default();
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let cores = super::load::cores();
    let users = options.users * dbs.len();
    if options.workers.is_none() && users >= OVERSUBSCRIBED * cores {
        eprintln!(
            "note: {users} users on {cores} cores and no bound on the transactions running at \
             once: the kernel preempts transactions in their commits and they run again and \
             again; --workers {} bounds them (decision 92 in docs/ARCHITECTURE.md)",
            2 * cores
        );
    }
    let workers = options.workers.map(Workers::new);
    let workers = workers.as_ref();
    std::thread::scope(|scope| -> CliResult<Measured> {
        let mut handles = Vec::new();
        let mut spawn_error = None;
        'spawn: for (i, workload) in workloads.iter().enumerate() {
            for u in 0..options.users {
                let seed = derive_seed(options.seed, (i * 100_000 + u) as u64);
                let (flags, failure) = (&flags, &failure);
                let spawned = std::thread::Builder::new()
                    .name(format!("tpcc-user-{}-{}", i + 1, u + 1))
                    .spawn_scoped(scope, move || {
                        let result = user_loop(workload, options, workers, flags, (i + 1, u), seed);
                        if let Err(err) = &result {
                            flags.failed.store(true, Ordering::Relaxed);
                            flags.stop.store(true, Ordering::Relaxed);
                            let mut slot = failure.lock().unwrap_or_else(|e| e.into_inner());
                            slot.get_or_insert_with(|| err.to_string());
                        }
                        result.ok()
                    });
                match spawned {
                    Ok(handle) => handles.push((i, handle)),
                    Err(e) => {
                        spawn_error = Some(format!("cannot start a user thread: {e}"));
                        break 'spawn;
                    }
                }
            }
        }
        let windowed = match &spawn_error {
            None => run_window(&workloads, options, &flags),
            Some(err) => Err(err.clone().into()),
        };
        flags.stop.store(true, Ordering::Relaxed);
        let mut tallies: Vec<Tally> = workloads.iter().map(|_| Tally::new()).collect();
        let mut panicked = false;
        for (i, handle) in handles {
            match handle.join() {
                Ok(Some(tally)) => tallies[i].merge(&tally),
                Ok(None) => {}
                Err(_) => panicked = true,
            }
        }
        if panicked {
            return Err("a virtual user's thread panicked".into());
        }
        if let Some(err) = failure.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(format!("a virtual user stopped: {err}").into());
        }
        let (elapsed, spans, cpu_seconds) = windowed?;
        let instances = spans
            .into_iter()
            .zip(tallies)
            .zip(&workloads)
            .map(|(((a, b), tally), wl)| {
                let (sa, sb) = (&a.stats, &b.stats);
                let mut aborts = [0u64; 3];
                for (k, slot) in aborts.iter_mut().enumerate() {
                    *slot = sb.aborts[k] - sa.aborts[k];
                }
                InstanceMeasure {
                    warehouses: wl.warehouses(),
                    users: options.users,
                    transactions: transactions(&a, &b),
                    commits: sb.commits - sa.commits,
                    rollbacks: sb.rollbacks - sa.rollbacks,
                    aborts,
                    checkpoints: sb.checkpoints - sa.checkpoints,
                    checkpoint_time: sb.checkpoint_time.saturating_sub(sa.checkpoint_time),
                    log: sb.log.since(&sa.log),
                    new_orders: b.next_o_ids.saturating_sub(a.next_o_ids),
                    tally,
                }
            })
            .collect();
        let cpu_util = cpu_seconds / (elapsed.as_secs_f64() * cores as f64);
        Ok(Measured {
            elapsed,
            instances,
            cpu_seconds,
            cpu_util,
            cores,
        })
    })
}

type Spans = Vec<(Snapshot, Snapshot)>;

/// The main thread's part: waits out the ramp-up and the window, printing progress, and takes
/// the snapshots. Returns the window's length, the snapshots at its ends and the CPU time.
fn run_window(
    workloads: &[Workload<'_>],
    options: &DriverOptions,
    flags: &Flags,
) -> CliResult<(Duration, Spans, f64)> {
    let mut probes: Vec<Probe> = workloads
        .iter()
        .map(|workload| Probe {
            workload,
            commits: 0,
        })
        .collect();
    let began = Instant::now();
    let mut ticker = match options.progress_every {
        Some(_) => Some(Ticker {
            last: snapshots(&mut probes)?,
            at: Instant::now(),
        }),
        None => None,
    };
    wait(
        flags,
        began + options.rampup,
        options,
        &mut probes,
        &mut ticker,
        "ramp-up",
        began,
    )?;
    let cpu_before = process_cpu_seconds();
    let start = Instant::now();
    let before = snapshots(&mut probes)?;
    flags.measuring.store(true, Ordering::Relaxed);
    if let Some(t) = ticker.as_mut() {
        // Progress lines of the timed phase count from its start.
        t.last = before.clone();
        t.at = start;
    }
    wait(
        flags,
        start + options.duration,
        options,
        &mut probes,
        &mut ticker,
        "timed",
        began,
    )?;
    flags.measuring.store(false, Ordering::Relaxed);
    let stats_after: Vec<(EngineStats, u64)> = probes
        .iter()
        .map(|p| (p.workload.db().stats(), p.commits))
        .collect();
    let elapsed = start.elapsed();
    let cpu_after = process_cpu_seconds();
    flags.stop.store(true, Ordering::Relaxed);
    let mut spans = Vec::new();
    for ((probe, (stats, probe_commits)), before) in probes.iter_mut().zip(stats_after).zip(before)
    {
        let next_o_ids = probe.next_o_ids()?;
        let after = Snapshot {
            stats,
            probe_commits,
            next_o_ids,
        };
        spans.push((before, after));
    }
    let cpu_seconds = cpu_after - cpu_before;
    Ok((elapsed, spans, cpu_seconds))
}

fn snapshots(probes: &mut [Probe]) -> CliResult<Vec<Snapshot>> {
    probes.iter_mut().map(Probe::snapshot).collect()
}

/// Sleeps until `until` (or a user fails), printing progress lines on the way.
fn wait(
    flags: &Flags,
    until: Instant,
    options: &DriverOptions,
    probes: &mut [Probe],
    ticker: &mut Option<Ticker>,
    phase: &str,
    began: Instant,
) -> CliResult<()> {
    loop {
        if flags.failed.load(Ordering::Relaxed) {
            return Ok(()); // the caller reports the user's error
        }
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        let mut next = until;
        if let (Some(every), Some(t)) = (options.progress_every, ticker.as_ref()) {
            next = next.min(t.at + every);
        }
        std::thread::sleep((next - now).min(Duration::from_millis(50)));
        if let (Some(every), Some(t)) = (options.progress_every, ticker.as_mut()) {
            if t.at.elapsed() >= every {
                let current = snapshots(probes)?;
                let span = t.at.elapsed();
                let tx: u64 = t
                    .last
                    .iter()
                    .zip(&current)
                    .map(|(a, b)| transactions(a, b))
                    .sum();
                let no: u64 = t
                    .last
                    .iter()
                    .zip(&current)
                    .map(|(a, b)| b.next_o_ids.saturating_sub(a.next_o_ids))
                    .sum();
                let aborts: u64 = t
                    .last
                    .iter()
                    .zip(&current)
                    .map(|(a, b)| b.stats.total_aborts() - a.stats.total_aborts())
                    .sum();
                println!(
                    "[{:>5.0} s] {phase:<8} TPM {:>10}  NOPM {:>9}  aborts/s {:>7.0}",
                    began.elapsed().as_secs_f64(),
                    group(per_minute(tx, span) as u64),
                    group(per_minute(no, span) as u64),
                    aborts as f64 / span.as_secs_f64()
                );
                t.last = current;
                t.at = Instant::now();
            }
        }
    }
}

/// The engine aborts of a run by cause, as (name, count).
pub fn abort_names(aborts: &[u64; 3]) -> Vec<(&'static str, u64)> {
    AbortCause::ALL
        .iter()
        .zip(aborts)
        .map(|(c, n)| (c.name(), *n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_spread_over_warehouses() {
        let homes: Vec<u32> = (0..8).map(|u| user_plan(u, 8, 4, false).0[0]).collect();
        assert_eq!(homes, vec![1, 2, 3, 4, 1, 2, 3, 4]);
        assert_eq!(user_plan(5, 8, 4, false).1, 2);
        assert_eq!(user_plan(1, 2, 5, true).0, vec![2, 4]);
        assert_eq!(user_plan(3, 8, 4, true).0, vec![4]);
    }

    /// Each type counts the attempts its own transactions ran again, whatever their end, and
    /// merged tallies add them up: the per-type column of the report.
    #[test]
    fn retries_are_counted_per_type() {
        let report = |kind, outcome, causes: &[AbortCause]| {
            let mut retries = Retries::default();
            for &cause in causes {
                retries.record(cause);
            }
            TxnReport {
                kind,
                outcome,
                latency: Duration::from_micros(100),
                retries,
                entered: None,
            }
        };
        let mut a = Tally::new();
        a.record(&report(
            TxnKind::NewOrder,
            Outcome::Committed,
            &[AbortCause::ReadChanged, AbortCause::WriteConflict],
        ));
        a.record(&report(
            TxnKind::NewOrder,
            Outcome::Aborted(AbortCause::WriteConflict),
            &[AbortCause::WriteConflict],
        ));
        a.record(&report(TxnKind::Payment, Outcome::Committed, &[]));
        let mut b = Tally::new();
        b.record(&report(
            TxnKind::Delivery,
            Outcome::RolledBack,
            &[AbortCause::Phantom],
        ));
        b.record(&report(
            TxnKind::NewOrder,
            Outcome::Committed,
            &[AbortCause::ReadChanged],
        ));
        a.merge(&b);
        let retries = |kind: TxnKind| a.per_type[kind.index()].retries;
        assert_eq!(retries(TxnKind::NewOrder), 4);
        assert_eq!(retries(TxnKind::Payment), 0);
        assert_eq!(retries(TxnKind::Delivery), 1);
        assert_eq!(
            a.retries.total(),
            5,
            "the per-type counts add up to the total"
        );
    }

    #[test]
    fn think_times_are_truncated() {
        let mut rng = seeded(3);
        let mut sum = 0.0;
        for _ in 0..10_000 {
            let t = think_time(TxnKind::Delivery, &mut rng);
            assert!((0.0..=50.0).contains(&t));
            sum += t;
        }
        assert!((sum / 10_000.0 - 5.0).abs() < 0.3);
    }

    #[test]
    fn cpu_time_counts_work() {
        // Spins until the clock has counted 50 ms, for at most 10 s: on a loaded machine 50 ms
        // of wall time once counted 28 ms of CPU (a flake), but a clock that does not count
        // this thread's work never gets there.
        let before = process_cpu_seconds();
        let began = Instant::now();
        let mut x = 0u64;
        let mut spent = 0.0;
        while spent < 0.05 && began.elapsed() < std::time::Duration::from_secs(10) {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
            spent = process_cpu_seconds() - before;
        }
        let wall = began.elapsed().as_secs_f64();
        assert!(
            spent >= 0.05 && spent < wall + 1.0,
            "{wall:.3} s of spinning counted as {spent} s of CPU"
        );
    }
}
