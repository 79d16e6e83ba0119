//! The simulated power-failure harness of the log manager.
//!
//! Every *crash point* is one run on a fresh [`SimStorage`]:
//!
//! 1. `crash_after(k)` is armed *before* the log is opened, so that `k` covers the creation of
//!    the log as well as the run; `k` is drawn over the operations a run without a crash does
//!    (calibrated per configuration, and lowered when runs turn out shorter), a little beyond,
//!    so that some points cut the power at the very end instead;
//! 2. 1–3 appender threads commit records with recognisable payloads (thread id, sequence
//!    number, then 0..300 bytes of filler, one in twenty 1,000..3,500 bytes) and stop at their
//!    first error. They commit with `commit`, with `append` + `wait_durable`, or in batches of
//!    2..24 appends with one `wait_durable` at the end (this is what fills an `fsync` ring);
//!    someone (the single appender itself, or a releaser thread) releases the durable prefix
//!    now and then: in `pmem-log` mode so that the ring is reused, in the others so that the
//!    log file's head is given back (in 4 KiB steps);
//! 3. the storage's image after a power cut (or a process crash) is reopened — on a quarter of
//!    the points after a *second* crash that interrupts the first recovery — and the records
//!    are checked: (a) every acknowledged commit beyond the recovered start (a released
//!    prefix) is there, with its payload and its LSN; (b) every record is one that some
//!    thread appended, byte for byte, at the LSN `append` returned, at most once, in its
//!    thread's order; (c) records are contiguous from the recovered start to the recovered
//!    end, and the start is one the user released; (d) a new commit works after the reopen,
//!    and after a power cut (whatever the first crash was) the log holds exactly the same
//!    records plus the new one.
//!    The new record is sized to end where a record the crash lost had started, so that a
//!    stale record left behind by recovery would show up right after it.
//!
//! A point is fully described by its [`Point`], printed on failure together with a command
//! that replays it (`TAILSTORE_REPRO`). Single-threaded `fsync` and `pmem-log` points are fully
//! deterministic; `buffer` points and multi-threaded points depend on thread timing, so a
//! replay may take a different path (the replay tries 20 times).
//!
//! The log manager preallocates its file in 64 MiB steps, and the simulator copies whole files
//! on every sync: the sweeps scale that growth down (`tailstore_media::scaled_growth`), and a few
//! points keep it (`fsync_and_buffer_with_real_preallocation`).
//!
//! Environment: `TAILSTORE_CRASH_POINTS=N` multiplies the number of points of every random
//! sweep (long runs); `TAILSTORE_CRASH_SEED=S` changes their base seeds;
//! `TAILSTORE_REAL_GROWTH=1` makes them use the real preallocation (slow).
//!
//! `planted_missing_fence_is_caught` plants a bug in the logs it opens ([`Plant::MissingFence`]:
//! no fence after an appended record is flushed, so a commit is acknowledged before it is
//! persistent) and asserts that the harness reports lost acknowledged commits.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tailstore_log::{
    record_size, CommitMode, LogConfig, LogManager, Plant, Record, Recovery, KIB, LOG_START_LSN,
};
use tailstore_media::sim::SimStorage;

use tailstore_media::scaled_growth::ScaledGrowth;

const LOG_DIR: &str = "/db";
const PMEM_PATH: &str = "/pmem/log.pmem";
/// Payload bytes that identify a record: the thread id and the sequence number.
const KEY_BYTES: usize = 5;
/// Bytes of a record's header.
const RECORD_HEADER: usize = 16;
/// The thread id of the record committed after the reopen (never used by an appender).
const MARKER_THREAD: u8 = 0xff;
/// `buffer` mode's choices of `harden_age` (µs): 0 makes the writer harden every partial
/// block at once, 1000 lets records accumulate in the ring.
const HARDEN_AGES_US: [u64; 3] = [0, 250, 1000];
/// Commits per run: a single thread writes about 1.6 laps of a 16 KiB ring.
const SINGLE_COMMITS: usize = 150;
const MULTI_COMMITS: usize = 60;

// Crash points per sweep in CI (multiplied by TAILSTORE_CRASH_POINTS). The power-cut sweeps
// total 3 modes x (RANDOM_SINGLE + RANDOM_MULTI) = 3,000 random points, plus the exhaustive
// early-crash sweeps (about 400 double-crash points), the real-preallocation points and the
// 3 x (PROCESS_SINGLE + PROCESS_MULTI) = 600 process-crash points.
const RANDOM_SINGLE: usize = 500;
const RANDOM_MULTI: usize = 500;
const PROCESS_SINGLE: usize = 100;
const PROCESS_MULTI: usize = 100;
/// Points per configuration with the log manager's real 64 MiB file preallocation.
const REAL_GROWTH_POINTS: usize = 6;
/// The exhaustive sweep crashes at every one of the first EARLY_OPS operations (creation and
/// the first commits), and for each, at every operation of the recovery that follows.
const EARLY_OPS: u64 = 24;
/// Share of random points whose first recovery is itself interrupted by a crash.
const NESTED_SHARE: f64 = 0.25;

/// Small sizes, so that the ring wraps around and fills up within a run: `fsync` hardens
/// every commit at once, so its DRAM ring only fills when it is as small as allowed. `buffer`
/// appends within 16 KiB of a 32 KiB ring, whose other half keeps the last lap below the
/// hardened LSN that recovery reads from the ring (decision 109), and only that window past
/// the end is cleared at recovery.
fn config(mode: CommitMode, harden_age: Duration) -> LogConfig {
    let mut config = LogConfig::new(mode, LOG_DIR, Some(PathBuf::from(PMEM_PATH)));
    config.block_bytes = 4 * KIB;
    config.ring_bytes = match mode {
        CommitMode::Fsync => 8 * KIB,
        CommitMode::Buffer => 32 * KIB,
        _ => 16 * KIB,
    };
    if mode == CommitMode::Buffer {
        config.append_window_bytes = Some(16 * KIB);
    }
    config.pmem_log_bytes = 16 * KIB;
    config.harden_age = harden_age;
    // The log file's head is released (its header rewritten, its space discarded) whenever
    // a release passes 4 KiB beyond the last, so that crashes strike releases in every mode.
    config.release_step_bytes = 4 * KIB as u64;
    config
}

/// How the log file's preallocation behaves (see `tailstore_media::scaled_growth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Growth {
    /// Growth beyond 1 MiB scaled down to 64 KiB steps: fast.
    Scaled,
    /// The log manager's own 64 MiB steps: every simulated sync copies 64 MiB.
    Real,
}

/// The growth the random sweeps use: scaled, unless `TAILSTORE_REAL_GROWTH=1`.
fn sweep_growth() -> Growth {
    match std::env::var("TAILSTORE_REAL_GROWTH").as_deref() {
        Ok("1") => Growth::Real,
        _ => Growth::Scaled,
    }
}

/// Bytes of the ring the mode uses.
fn ring_capacity(config: &LogConfig) -> u64 {
    match config.mode {
        CommitMode::PmemLog => config.pmem_log_bytes as u64,
        _ => config.ring_bytes as u64,
    }
}

fn open_with(
    storage: &SimStorage,
    config: &LogConfig,
    growth: Growth,
) -> tailstore_log::Result<(LogManager, Recovery)> {
    match growth {
        Growth::Scaled => LogManager::open(Arc::new(ScaledGrowth(storage.clone())), config),
        Growth::Real => LogManager::open(Arc::new(storage.clone()), config),
    }
}

fn multiplier() -> usize {
    std::env::var("TAILSTORE_CRASH_POINTS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

fn base_seed(default: u64) -> u64 {
    std::env::var("TAILSTORE_CRASH_SEED")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(default, |s| s ^ default)
}

/// SplitMix64: derives independent seeds from a base seed and an index.
fn mix(seed: u64, index: u64) -> u64 {
    let mut z = seed
        .wrapping_add(index.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

// ---------------------------------------------------------------------------------------------
// Crash points
// ---------------------------------------------------------------------------------------------

/// What survives the crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Crash {
    /// `SimStorage::power_cut`: unpersisted words and unsynced sectors kept or dropped.
    PowerCut,
    /// `SimStorage::process_crash`: every completed store and write is kept.
    Process,
}

/// One crash point; everything a run depends on, except thread timing.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Point {
    mode: CommitMode,
    /// Appender threads. In `pmem-log` mode with more than one, a separate thread releases.
    threads: usize,
    /// Commits each appender attempts.
    commits: usize,
    /// Seeds the payloads and the release cadence.
    seed: u64,
    /// `crash_after(k)`, armed before the log is opened; `None`: no crash point, the power is
    /// cut once the appenders are done.
    crash_at: Option<u64>,
    /// Seeds the choices of `power_cut` (the second cut uses derived seeds).
    cut_seed: u64,
    crash: Crash,
    harden_age_us: u64,
    /// A crash during the first recovery, at its operation `1 + nested % ops`.
    nested: Option<u64>,
    growth: Growth,
    /// The log's fence after an append planted away ([`Plant::MissingFence`]).
    missing_fence: bool,
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |v: Option<u64>| v.map_or_else(|| "none".to_string(), |v| v.to_string());
        write!(
            f,
            "mode={} threads={} commits={} seed={} crash_at={} cut_seed={} crash={} harden_us={} nested={} growth={}",
            self.mode,
            self.threads,
            self.commits,
            self.seed,
            opt(self.crash_at),
            self.cut_seed,
            match self.crash {
                Crash::PowerCut => "power",
                Crash::Process => "process",
            },
            self.harden_age_us,
            opt(self.nested),
            match self.growth {
                Growth::Scaled => "scaled",
                Growth::Real => "real",
            },
        )?;
        if self.missing_fence {
            write!(f, " fence=missing")?;
        }
        Ok(())
    }
}

impl FromStr for Point {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let fields: HashMap<&str, &str> = s
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let get = |k: &str| fields.get(k).copied().ok_or(format!("missing {k}="));
        let num =
            |k: &str| -> Result<u64, String> { get(k)?.parse().map_err(|e| format!("{k}: {e}")) };
        let opt = |k: &str| -> Result<Option<u64>, String> {
            match get(k)? {
                "none" => Ok(None),
                v => v.parse().map(Some).map_err(|e| format!("{k}: {e}")),
            }
        };
        Ok(Point {
            mode: get("mode")?.parse()?,
            threads: num("threads")? as usize,
            commits: num("commits")? as usize,
            seed: num("seed")?,
            crash_at: opt("crash_at")?,
            cut_seed: num("cut_seed")?,
            crash: match get("crash")? {
                "power" => Crash::PowerCut,
                "process" => Crash::Process,
                other => return Err(format!("crash={other}: expected power or process")),
            },
            harden_age_us: num("harden_us")?,
            nested: opt("nested")?,
            growth: match fields.get("growth").copied().unwrap_or("scaled") {
                "scaled" => Growth::Scaled,
                "real" => Growth::Real,
                other => return Err(format!("growth={other}: expected scaled or real")),
            },
            missing_fence: match fields.get("fence").copied().unwrap_or("kept") {
                "kept" => false,
                "missing" => true,
                other => return Err(format!("fence={other}: expected kept or missing")),
            },
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// An acknowledged commit beyond the released prefix is missing (or was moved).
    LostAck,
    /// A record that no thread appended, or not with these bytes.
    Garbage,
    /// Records not contiguous, not in each thread's order, or recovery's summary disagrees.
    Order,
    /// Opening the log after the crash failed, or after the power cut that follows the
    /// reopen's commit (check (d)): that commit may be the acknowledged one it lost.
    ReopenFailed,
    /// After the reopen, a commit went wrong, or the second reopen holds other records.
    NotRepeatable,
    /// Anything else: an error on a live medium, a failed open of a fresh log.
    Unexpected,
}

#[derive(Debug)]
struct Violation {
    kind: Kind,
    detail: String,
    /// Found by check (d), after the reopen, rather than by the checks of the crash itself.
    after_reopen: bool,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = if self.after_reopen {
            " (after the reopen)"
        } else {
            ""
        };
        write!(f, "{:?}{stage}: {}", self.kind, self.detail)
    }
}

fn violation(kind: Kind, detail: impl Into<String>) -> Violation {
    Violation {
        kind,
        detail: detail.into(),
        after_reopen: false,
    }
}

/// What one crash point did, for the sweep's statistics.
#[derive(Clone, Copy, Debug, Default)]
struct Outcome {
    /// Mutating operations when the appenders stopped (a full run's, for a calibration).
    ops: u64,
    /// Whether the crash point was reached.
    died: bool,
    acked: usize,
    recovered: usize,
    /// Operations of the first recovery (counted on a copy; 0 unless `nested` was asked).
    recovery_ops: u64,
    /// Appends that found the ring full, and whether the run went once around the ring.
    ring_full_waits: u64,
    wrapped: bool,
}

// ---------------------------------------------------------------------------------------------
// The workload
// ---------------------------------------------------------------------------------------------

type Key = (u8, u32);

fn key_of(payload: &[u8]) -> Option<Key> {
    let bytes = payload.get(..KEY_BYTES)?;
    Some((
        bytes[0],
        u32::from_le_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]),
    ))
}

/// A recognisable payload: thread id, sequence number, then 0..300 bytes (one in twenty:
/// 1,000..3,500, to fill rings up) of random bytes, zeros or a repeated byte (zeros look like
/// wiped media, which recovery must not confuse).
fn make_payload(thread: u8, seq: u32, rng: &mut StdRng) -> Vec<u8> {
    let filler = if rng.gen_bool(0.05) {
        rng.gen_range(1000..3500usize)
    } else {
        rng.gen_range(0..300usize)
    };
    let mut payload = Vec::with_capacity(KEY_BYTES + filler);
    payload.push(thread);
    payload.extend_from_slice(&seq.to_le_bytes());
    match rng.gen_range(0..4) {
        0 => payload.resize(KEY_BYTES + filler, 0),
        1 => payload.resize(KEY_BYTES + filler, rng.gen()),
        _ => {
            payload.resize(KEY_BYTES + filler, 0);
            rng.fill(&mut payload[KEY_BYTES..]);
        }
    }
    payload
}

#[derive(Debug)]
struct Attempt {
    payload: Vec<u8>,
    /// The end LSN the record was appended at, if `append` (or `commit`) told.
    appended: Option<u64>,
    /// The end LSN, if the commit was acknowledged (`commit`, or `append` then
    /// `wait_durable`, returned `Ok`).
    acked: Option<u64>,
}

#[derive(Default)]
struct Releases {
    /// Every LSN passed to `release` (a failed release may still have reached the medium).
    attempted: BTreeSet<u64>,
    /// The highest LSN whose release returned `Ok`.
    ok: u64,
}

/// Everything the appenders did.
#[derive(Default)]
struct History {
    attempts: HashMap<Key, Attempt>,
    releases: Releases,
}

/// Releases the durable prefix; `false` once the log failed.
fn release_durable(log: &LogManager, releases: &Mutex<Releases>) -> Result<bool, String> {
    let lsn = log.durable_lsn();
    releases.lock().expect("lock").attempted.insert(lsn);
    match log.release(lsn) {
        Ok(()) => {
            let mut r = releases.lock().expect("lock");
            r.ok = r.ok.max(lsn);
            Ok(true)
        }
        Err(e) => Err(format!("release({lsn}): {e}")),
    }
}

struct Appender<'a> {
    log: &'a LogManager,
    storage: &'a SimStorage,
    releases: &'a Mutex<Releases>,
    thread: u8,
    commits: usize,
    seed: u64,
    /// `pmem-log` with one appender: it releases the log itself once this many bytes were
    /// committed since its last release (at most 8 KiB, so the 16 KiB ring never fills).
    release_budget: Option<u64>,
}

/// Result of one appender: its attempts and, if it failed while the medium was alive, why.
type AppenderResult = (Vec<(Key, Attempt)>, Option<String>);

impl Appender<'_> {
    fn run(self) -> AppenderResult {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut attempts: Vec<(Key, Attempt)> = Vec::with_capacity(self.commits);
        // Records appended but not waited for yet (indices into `attempts`).
        let mut pending: Vec<usize> = Vec::new();
        // Records left in the current batch of appends with one wait at its end.
        let mut batch = 0usize;
        let mut unreleased = 0;
        for seq in 0..self.commits as u32 {
            let payload = make_payload(self.thread, seq, &mut rng);
            // Three ways to commit: `commit`; `append` then `wait_durable`; or a batch of 2..24
            // appends with one `wait_durable` at its end (a transaction's records, then its
            // commit: this fills the ring between two hardenings). `append` tells where a
            // record is before it is durable.
            if batch == 0 && rng.gen_bool(0.1) {
                batch = rng.gen_range(2..=24);
            }
            let how = if batch > 0 { 2 } else { rng.gen_range(0..2) };
            batch = batch.saturating_sub(1);
            let defer = how == 2 && batch > 0 && seq as usize + 1 < self.commits;
            let (mut appended, mut durable, mut error) = (None, false, None);
            if how == 0 {
                match self.log.commit(&payload) {
                    Ok(end) => (appended, durable) = (Some(end), true),
                    Err(e) => error = Some(format!("commit: {e}")),
                }
            } else {
                match self.log.append(&payload) {
                    Ok(end) => {
                        appended = Some(end);
                        if !defer {
                            match self.log.wait_durable(end) {
                                Ok(()) => durable = true,
                                Err(e) => error = Some(format!("wait_durable({end}): {e}")),
                            }
                        }
                    }
                    Err(e) => error = Some(format!("append: {e}")),
                }
            }
            unreleased += record_size(payload.len());
            attempts.push((
                (self.thread, seq),
                Attempt {
                    payload,
                    appended,
                    acked: appended.filter(|_| durable),
                },
            ));
            if durable {
                // Records become durable in LSN order: the earlier appends are acknowledged too.
                for i in pending.drain(..) {
                    attempts[i].1.acked = attempts[i].1.appended;
                }
            } else if error.is_none() {
                pending.push(attempts.len() - 1);
            }
            let failed = error.or_else(|| match self.release_budget {
                Some(budget) if unreleased >= budget => {
                    unreleased = 0;
                    release_durable(self.log, self.releases).err()
                }
                _ => None,
            });
            if let Some(e) = failed {
                let unexpected = (!self.storage.is_dead())
                    .then(|| format!("thread {} on a live medium: {e}", self.thread));
                return (attempts, unexpected);
            }
        }
        (attempts, None)
    }
}

/// Runs the appenders (and the releaser) until they are done or the medium died.
fn run_workload(log: &LogManager, storage: &SimStorage, p: &Point) -> Result<History, Violation> {
    let releases = Mutex::new(Releases::default());
    let stop = AtomicBool::new(false);
    let mut rng = StdRng::seed_from_u64(p.seed);
    let release_budget = (p.threads == 1).then(|| rng.gen_range(1..=8 * 1024));
    let releaser_seed: u64 = rng.gen();
    let mut unexpected = Vec::new();
    let mut history = History::default();
    std::thread::scope(|s| {
        let (releases, stop) = (&releases, &stop);
        let appenders: Vec<_> = (0..p.threads)
            .map(|t| {
                let appender = Appender {
                    log,
                    storage,
                    releases,
                    thread: t as u8,
                    commits: p.commits,
                    seed: mix(p.seed, t as u64 + 1),
                    release_budget,
                };
                s.spawn(move || appender.run())
            })
            .collect();
        let releaser = (p.threads > 1).then(|| {
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(releaser_seed);
                while !stop.load(Ordering::Acquire) {
                    if let Err(e) = release_durable(log, releases) {
                        return (!storage.is_dead()).then(|| format!("releaser: {e}"));
                    }
                    // Sometimes let the ring fill up, so that appenders wait for space.
                    if rng.gen_bool(0.2) {
                        std::thread::sleep(Duration::from_micros(rng.gen_range(50..400)));
                    } else {
                        std::thread::yield_now();
                    }
                }
                None
            })
        });
        for handle in appenders {
            let (attempts, error) = handle.join().expect("appender thread panicked");
            history.attempts.extend(attempts);
            unexpected.extend(error);
        }
        stop.store(true, Ordering::Release);
        if let Some(handle) = releaser {
            unexpected.extend(handle.join().expect("releaser thread panicked"));
        }
    });
    history.releases = releases.into_inner().expect("lock");
    match unexpected.first() {
        Some(e) => Err(violation(Kind::Unexpected, e.clone())),
        None => Ok(history),
    }
}

// ---------------------------------------------------------------------------------------------
// Running and checking one crash point
// ---------------------------------------------------------------------------------------------

/// What a restart finds on `storage`: a new storage.
fn restart(storage: &SimStorage, crash: Crash, seed: u64) -> SimStorage {
    match crash {
        Crash::PowerCut => storage.power_cut(seed),
        Crash::Process => storage.process_crash(),
    }
}

/// Takes the restart image of `storage`, then kills the medium and drops `log` (whose close
/// would otherwise keep working on the old storage).
fn crash_and_drop(storage: &SimStorage, log: LogManager, crash: Crash, seed: u64) -> SimStorage {
    let image = restart(storage, crash, seed);
    storage.crash_after(0);
    drop(log);
    image
}

/// Runs one crash point. The outcome is filled in as far as the run got.
fn run_point(p: &Point) -> (Outcome, Result<(), Violation>) {
    let mut outcome = Outcome::default();
    let result = run_point_into(p, &mut outcome);
    (outcome, result)
}

fn run_point_into(p: &Point, outcome: &mut Outcome) -> Result<(), Violation> {
    let mut config = config(p.mode, Duration::from_micros(p.harden_age_us));
    if p.missing_fence {
        config.plants.push(Plant::MissingFence);
    }
    let storage = SimStorage::new();
    if let Some(k) = p.crash_at {
        storage.crash_after(k);
    }
    let (history, image) = match open_with(&storage, &config, p.growth) {
        Ok((log, _)) => {
            let history = run_workload(&log, &storage, p);
            outcome.ops = storage.ops_done();
            let counters = log.counters();
            outcome.ring_full_waits = counters.ring_full_waits;
            outcome.wrapped = counters.log_bytes > ring_capacity(&config);
            let image = crash_and_drop(&storage, log, p.crash, p.cut_seed);
            (history?, image)
        }
        Err(_) if storage.is_dead() => {
            outcome.ops = storage.ops_done();
            (History::default(), restart(&storage, p.crash, p.cut_seed))
        }
        Err(e) => {
            return Err(violation(
                Kind::Unexpected,
                format!("creating the log on a live medium failed: {e}"),
            ))
        }
    };
    outcome.died = storage.is_dead() && p.crash_at.is_some_and(|k| k <= outcome.ops + 1);
    outcome.acked = history
        .attempts
        .values()
        .filter(|a| a.acked.is_some())
        .count();

    // A crash during the first recovery, then the restart after it.
    let image = match p.nested {
        None => image,
        Some(selector) => {
            let copy = image.process_crash();
            let ops = match open_with(&copy, &config, p.growth) {
                Ok((log, _)) => {
                    let ops = copy.ops_done();
                    copy.crash_after(0);
                    drop(log);
                    ops
                }
                Err(e) => {
                    return Err(violation(
                        Kind::ReopenFailed,
                        format!("recovery after the first crash failed: {e}"),
                    ))
                }
            };
            outcome.recovery_ops = ops;
            if ops == 0 {
                image
            } else {
                image.crash_after(1 + selector % ops);
                let second_seed = mix(p.cut_seed, 1);
                match open_with(&image, &config, p.growth) {
                    Ok((log, _)) => crash_and_drop(&image, log, p.crash, second_seed),
                    Err(_) => restart(&image, p.crash, second_seed),
                }
            }
        }
    };

    // The reopen and the checks (a), (b), (c).
    let (log, recovery) = open_with(&image, &config, p.growth)
        .map_err(|e| violation(Kind::ReopenFailed, format!("reopen after the crash: {e}")))?;
    let records = collect(&log).map_err(|e| violation(Kind::ReopenFailed, e))?;
    check(p, &history, &recovery, &records)?;
    outcome.recovered = records.len();

    after_reopen(p, &config, &image, log, &recovery, records, &history).map_err(|mut v| {
        v.after_reopen = true;
        v
    })
}

/// (d) A new commit after the reopen, another power cut, and everything is still there.
fn after_reopen(
    p: &Point,
    config: &LogConfig,
    image: &SimStorage,
    log: LogManager,
    recovery: &Recovery,
    records: Vec<Record>,
    history: &History,
) -> Result<(), Violation> {
    let mut floor = recovery.start_lsn;
    let marker = marker_payload(p, history, recovery.end_lsn);
    let size = record_size(marker.len());
    if p.mode == CommitMode::PmemLog
        && recovery.end_lsn + size > floor + config.pmem_log_bytes as u64
    {
        // The recovered log fills the ring: release the fewest records that make room.
        let needed = recovery.end_lsn + size - config.pmem_log_bytes as u64;
        floor = records
            .iter()
            .map(|r| r.end)
            .find(|&end| end >= needed)
            .unwrap_or(recovery.end_lsn);
        log.release(floor).map_err(|e| {
            violation(
                Kind::NotRepeatable,
                format!("release({floor}) after the reopen: {e}"),
            )
        })?;
    }
    let end = log
        .commit(&marker)
        .map_err(|e| violation(Kind::NotRepeatable, format!("commit after the reopen: {e}")))?;
    if end != recovery.end_lsn + size {
        return Err(violation(
            Kind::NotRepeatable,
            format!(
                "the first commit after the reopen ends at {end}, expected {}",
                recovery.end_lsn + size
            ),
        ));
    }
    // Always a power cut, also after a process crash: that crash may have left records in
    // the recovered prefix that were never durable (written and not synced, stored and not
    // flushed), and only a power cut after the reopen shows whether recovery made them so.
    let again = crash_and_drop(image, log, Crash::PowerCut, mix(p.cut_seed, 2));
    let (log, second) = open_with(&again, config, p.growth)
        .map_err(|e| violation(Kind::ReopenFailed, format!("second reopen: {e}")))?;
    let after = collect(&log).map_err(|e| violation(Kind::NotRepeatable, e))?;
    let mut expected: Vec<Record> = records.into_iter().filter(|r| r.lsn >= floor).collect();
    expected.push(Record {
        lsn: end - size,
        end,
        payload: marker,
    });
    if after != expected || second.start_lsn != floor || second.end_lsn != end {
        // Losing the commit acknowledged after the reopen is a lost commit like any other.
        let marker = expected.last();
        let kind = if after.iter().any(|r| Some(r) == marker) {
            Kind::NotRepeatable
        } else {
            Kind::LostAck
        };
        return Err(violation(
            kind,
            format!(
                "second reopen found {} records in [{}, {}), expected {} in [{floor}, {end}){}",
                after.len(),
                second.start_lsn,
                second.end_lsn,
                expected.len(),
                first_difference(&after, &expected)
            ),
        ));
    }
    again.crash_after(0);
    drop(log);
    Ok(())
}

/// The record committed after the reopen. Where a record was appended beyond the recovered
/// end (and not recovered), the marker is sized to end exactly where that record started: if
/// recovery left its bytes behind, the next scan would find it right after the marker.
fn marker_payload(p: &Point, history: &History, end: u64) -> Vec<u8> {
    let targets: Vec<u64> = history
        .attempts
        .values()
        .filter_map(|a| a.appended.map(|e| e - record_size(a.payload.len())))
        .filter(|&start| start >= end + 24 && start <= end + 4096)
        .collect();
    let len = if targets.is_empty() {
        KEY_BYTES + 26
    } else {
        let mut rng = StdRng::seed_from_u64(mix(p.cut_seed, 3));
        (targets[rng.gen_range(0..targets.len())] - end) as usize - RECORD_HEADER
    };
    let mut payload = vec![MARKER_THREAD];
    payload.extend_from_slice(&(p.seed as u32).to_le_bytes());
    payload.extend(
        b"committed after the reopen "
            .iter()
            .cycle()
            .take(len - KEY_BYTES),
    );
    payload
}

fn collect(log: &LogManager) -> Result<Vec<Record>, String> {
    log.records()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("reading the records back: {e}"))
}

fn first_difference(found: &[Record], expected: &[Record]) -> String {
    let describe = |r: Option<&Record>| match r {
        Some(r) => format!("[{}, {}) key {:?}", r.lsn, r.end, key_of(&r.payload)),
        None => "nothing".to_string(),
    };
    (0..found.len().max(expected.len()))
        .find(|&i| found.get(i) != expected.get(i))
        .map(|i| {
            format!(
                "; first difference at #{i}: found {}, expected {}",
                describe(found.get(i)),
                describe(expected.get(i))
            )
        })
        .unwrap_or_default()
}

/// Invariants (a), (b) and (c) of the records found by the first reopen.
fn check(
    p: &Point,
    history: &History,
    recovery: &Recovery,
    records: &[Record],
) -> Result<(), Violation> {
    // Where the log starts: the beginning, or a prefix someone tried to release (in
    // `pmem-log` at least the last one that was released for sure).
    let releases = &history.releases;
    // (A release of the log file moves its start only in steps, and only over what is on
    // disk: one that returned `Ok` may have changed nothing.)
    let attempted =
        recovery.start_lsn == LOG_START_LSN || releases.attempted.contains(&recovery.start_lsn);
    let start_ok = match p.mode {
        CommitMode::PmemLog => attempted && recovery.start_lsn >= releases.ok,
        _ => attempted,
    };
    if !start_ok {
        return Err(violation(
            Kind::Order,
            format!(
                "the recovered log starts at {}; released for sure up to {}, attempted {:?}",
                recovery.start_lsn,
                releases.ok,
                releases
                    .attempted
                    .range(releases.ok..)
                    .take(4)
                    .collect::<Vec<_>>()
            ),
        ));
    }

    // (c) Contiguous, in LSN order, and as recovery summarised it.
    let mut at = recovery.start_lsn;
    for (i, r) in records.iter().enumerate() {
        if r.lsn != at || r.end != r.lsn + record_size(r.payload.len()) {
            return Err(violation(
                Kind::Order,
                format!(
                    "record #{i} spans [{}, {}) with {} payload bytes, expected to start at {at}",
                    r.lsn,
                    r.end,
                    r.payload.len()
                ),
            ));
        }
        at = r.end;
    }
    if at != recovery.end_lsn || recovery.records != records.len() as u64 {
        return Err(violation(
            Kind::Order,
            format!(
                "records end at {at} ({} of them), recovery reported end {} and {} records",
                records.len(),
                recovery.end_lsn,
                recovery.records
            ),
        ));
    }

    // (b) Every record was appended, with these bytes, once, in its thread's order.
    let mut found: HashMap<Key, u64> = HashMap::new();
    let mut last_seq: HashMap<u8, u32> = HashMap::new();
    for r in records {
        let key = key_of(&r.payload).ok_or_else(|| {
            violation(
                Kind::Garbage,
                format!(
                    "record [{}, {}) of {} bytes has no key",
                    r.lsn,
                    r.end,
                    r.payload.len()
                ),
            )
        })?;
        let attempt = history.attempts.get(&key).ok_or_else(|| {
            violation(
                Kind::Garbage,
                format!(
                    "record [{}, {}) has key {key:?}, which no thread appended",
                    r.lsn, r.end
                ),
            )
        })?;
        if attempt.payload != r.payload {
            return Err(violation(
                Kind::Garbage,
                format!(
                    "record [{}, {}) key {key:?}: payload differs from the one appended ({} bytes found, {} appended)",
                    r.lsn,
                    r.end,
                    r.payload.len(),
                    attempt.payload.len()
                ),
            ));
        }
        if let Some(appended) = attempt.appended.filter(|&e| e != r.end) {
            return Err(violation(
                Kind::Garbage,
                format!(
                    "key {key:?} was appended ending at {appended}, found ending at {}",
                    r.end
                ),
            ));
        }
        if found.insert(key, r.end).is_some() {
            return Err(violation(
                Kind::Garbage,
                format!("key {key:?} found twice (again at [{}, {}))", r.lsn, r.end),
            ));
        }
        if let Some(&prev) = last_seq.get(&key.0).filter(|&&prev| prev >= key.1) {
            return Err(violation(
                Kind::Order,
                format!(
                    "thread {}'s record {} follows its record {prev}",
                    key.0, key.1
                ),
            ));
        }
        last_seq.insert(key.0, key.1);
    }

    // (a) Every acknowledged commit beyond the recovered start is there.
    let mut lost: Vec<(Key, u64)> = history
        .attempts
        .iter()
        .filter_map(|(&key, a)| a.acked.map(|end| (key, end)))
        .filter(|&(key, end)| end > recovery.start_lsn && !found.contains_key(&key))
        .collect();
    if !lost.is_empty() {
        lost.sort_by_key(|&(_, end)| end);
        return Err(violation(
            Kind::LostAck,
            format!(
                "{} acknowledged commits lost; the first {:?} ended at {}; recovered [{}, {}) with {} records",
                lost.len(),
                lost[0].0,
                lost[0].1,
                recovery.start_lsn,
                recovery.end_lsn,
                records.len()
            ),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Sweeps
// ---------------------------------------------------------------------------------------------

/// A family of random crash points over one configuration.
#[derive(Clone, Copy, Debug)]
struct Sweep {
    mode: CommitMode,
    /// Appenders; 0 picks 2 or 3 per point.
    threads: usize,
    crash: Crash,
    points: usize,
    seed: u64,
    nested_share: f64,
    /// Appenders' commits per run; 0: the default for the thread count.
    commits: usize,
    growth: Growth,
    /// `buffer` mode's harden age; `None`: one of `HARDEN_AGES_US` per point.
    harden_age_us: Option<u64>,
    /// Every point with the fence planted away ([`Point::missing_fence`]).
    missing_fence: bool,
}

#[derive(Debug, Default)]
struct Stats {
    points: usize,
    died: usize,
    nested: usize,
    acked: usize,
    recovered: usize,
    /// Points whose run went around the ring, and whose appends waited for ring space.
    wrapped: usize,
    ring_full: usize,
}

impl Sweep {
    fn commits(&self, threads: usize) -> usize {
        match (self.commits, threads) {
            (0, 1) => SINGLE_COMMITS,
            (0, _) => MULTI_COMMITS,
            (n, _) => n,
        }
    }

    fn harden_ages(&self) -> &[u64] {
        match (self.mode, &self.harden_age_us) {
            (_, Some(age)) => std::slice::from_ref(age),
            (CommitMode::Buffer, None) => &HARDEN_AGES_US,
            _ => &HARDEN_AGES_US[2..],
        }
    }

    /// A run without a crash point (the power is cut once the appenders are done). Its
    /// operations are the range the crash points of this configuration are drawn from.
    fn calibration_point(&self, threads: usize, harden_age_us: u64) -> Point {
        Point {
            mode: self.mode,
            threads,
            commits: self.commits(threads),
            seed: mix(self.seed, u64::MAX - threads as u64 - harden_age_us),
            crash_at: None,
            cut_seed: mix(self.seed, 0xca1),
            crash: self.crash,
            harden_age_us,
            nested: None,
            growth: self.growth,
            missing_fence: self.missing_fence,
        }
    }

    /// Runs the sweep's points — each configuration's calibration run first — and hands each
    /// to `visit` until it returns `false`.
    fn visit(
        &self,
        mut visit: impl FnMut(&Point, &Outcome, Result<(), Violation>) -> bool,
    ) -> Stats {
        let mut calibration: HashMap<(usize, u64), u64> = HashMap::new();
        let mut stats = Stats::default();
        let open_ops = open_ops(self.mode);
        let mut run = |point: &Point, stats: &mut Stats| {
            set_current(point);
            let (outcome, result) = run_point(point);
            stats.add(point, &outcome);
            let go_on = visit(point, &outcome, result);
            (outcome, go_on)
        };
        let mut i = 0;
        while stats.points < self.points {
            let seed = mix(self.seed, i);
            i += 1;
            let mut rng = StdRng::seed_from_u64(seed);
            let threads = match self.threads {
                0 => rng.gen_range(2..=3),
                n => n,
            };
            let ages = self.harden_ages();
            let harden_age_us = ages[rng.gen_range(0..ages.len())];
            let total = match calibration.get(&(threads, harden_age_us)) {
                Some(&total) => total,
                None => {
                    let point = self.calibration_point(threads, harden_age_us);
                    let (outcome, go_on) = run(&point, &mut stats);
                    calibration.insert((threads, harden_age_us), outcome.ops.max(1));
                    if !go_on {
                        break;
                    }
                    continue;
                }
            };
            let crash_at = rng.gen_range(1..=total + total / 16);
            let cut_seed = rng.gen();
            // Crashes while the log is created are followed by a second crash only in the
            // exhaustive early sweeps.
            let nested = rng.gen_bool(self.nested_share).then(|| rng.gen());
            let point = Point {
                mode: self.mode,
                threads,
                commits: self.commits(threads),
                seed,
                crash_at: Some(crash_at),
                cut_seed,
                crash: self.crash,
                harden_age_us,
                nested: nested.filter(|_| crash_at > open_ops),
                growth: self.growth,
                missing_fence: self.missing_fence,
            };
            let (outcome, go_on) = run(&point, &mut stats);
            if !outcome.died {
                // Runs vary with thread timing (group commit, the writer): a run that ended
                // before its crash point shows the range is shorter than calibrated.
                calibration.insert((threads, harden_age_us), outcome.ops.clamp(1, total));
            }
            if !go_on {
                break;
            }
        }
        stats
    }

    /// Runs every point; panics with a reproduction on the first violation.
    fn run(&self, name: &str) -> Stats {
        let began = Instant::now();
        let stats = self.visit(|point, _, result| match result {
            Ok(()) => true,
            Err(v) => fail(name, point, &v),
        });
        eprintln!(
            "{name}: {} crash points ({} hit, {} with a crash during recovery; {} runs wrapped \
             around the ring, {} waited for ring space), {} acked commits checked, {} records \
             recovered, {:.1?}",
            stats.points,
            stats.died,
            stats.nested,
            stats.wrapped,
            stats.ring_full,
            stats.acked,
            stats.recovered,
            began.elapsed()
        );
        assert!(
            stats.points < 50 || stats.died * 5 >= stats.points * 3,
            "{name}: only {} of {} crash points were hit: the calibration is off",
            stats.died,
            stats.points
        );
        stats
    }
}

impl Stats {
    fn add(&mut self, point: &Point, outcome: &Outcome) {
        self.points += 1;
        self.died += usize::from(outcome.died);
        self.nested += usize::from(point.nested.is_some());
        self.acked += outcome.acked;
        self.recovered += outcome.recovered;
        self.wrapped += usize::from(outcome.wrapped);
        self.ring_full += usize::from(outcome.ring_full_waits > 0);
    }
}

fn fail(name: &str, point: &Point, v: &Violation) -> ! {
    panic!(
        "{name}: violation\n  {v}\n  point: {point}\n  reproduce: \
         TAILSTORE_REPRO='{point}' cargo test -p tailstore-log --test power_cut repro -- --ignored --nocapture"
    )
}

// A hung run (a deadlock in the log) must fail the test with the point that hangs instead of
// hanging the suite: the sweeps run under a watchdog that knows the current point and since
// when it runs.
/// The point a sweep runs now, and since when.
type Slot = Arc<Mutex<(String, Instant)>>;

thread_local! {
    static CURRENT: RefCell<Option<Slot>> = const { RefCell::new(None) };
}

/// Tells this thread's watchdog (if any) which point runs now.
fn set_current(point: &Point) {
    CURRENT.with(|current| {
        if let Some(slot) = current.borrow().as_ref() {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = (point.to_string(), Instant::now());
        }
    });
}

/// Runs `body` on its own thread; fails when one point runs longer than `stall` (a hang).
fn with_watchdog<T: Send + 'static>(
    stall: Duration,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let slot: Slot = Arc::new(Mutex::new((String::from("none yet"), Instant::now())));
    let (done, wait) = mpsc::channel();
    let body_slot = Arc::clone(&slot);
    let handle = std::thread::spawn(move || {
        CURRENT.with(|current| *current.borrow_mut() = Some(body_slot));
        let result = body();
        let _ = done.send(());
        result
    });
    loop {
        match wait.recv_timeout(Duration::from_secs(1)) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                return match handle.join() {
                    Ok(result) => result,
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let (point, since) = slot.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if since.elapsed() > stall {
                    panic!("a crash point has run for {stall:?}: it hangs\n  point: {point}");
                }
            }
        }
    }
}

/// A point that runs this long hangs (points take milliseconds, seconds with real growth).
const WATCHDOG: Duration = Duration::from_secs(120);

fn sweep(mode: CommitMode, threads: usize, crash: Crash, points: usize, seed: u64) -> Sweep {
    Sweep {
        mode,
        threads,
        crash,
        points: points * multiplier(),
        seed: base_seed(seed),
        nested_share: NESTED_SHARE,
        commits: 0,
        growth: sweep_growth(),
        harden_age_us: None,
        missing_fence: false,
    }
}

/// Mutating operations of opening (creating) a log on a fresh storage.
fn open_ops(mode: CommitMode) -> u64 {
    let storage = SimStorage::new();
    let (log, _) = open_with(
        &storage,
        &config(mode, Duration::from_secs(1)),
        Growth::Scaled,
    )
    .expect("create a log");
    let ops = storage.ops_done();
    storage.crash_after(0);
    drop(log);
    ops
}

/// Crashes at every one of the first `EARLY_OPS` operations of a single-threaded run
/// (creating the log, the first commits), and for each at every operation of the recovery
/// that follows (a power cut after each crash). With `nest_during_creation` false, a crash
/// while the log is being created is followed by plain restarts (8 cut seeds) instead.
fn early_crashes(
    name: &str,
    mode: CommitMode,
    ks: std::ops::RangeInclusive<u64>,
    nest_during_creation: bool,
) -> usize {
    let began = Instant::now();
    let open_ops = open_ops(mode);
    let mut points = 0;
    for k in ks {
        let nest = nest_during_creation || k > open_ops;
        for selector in 0u64.. {
            let point = Point {
                mode,
                threads: 1,
                commits: 8,
                seed: mix(0xea51, k),
                crash_at: Some(k),
                cut_seed: mix(0xc07, k * 1000 + selector),
                crash: Crash::PowerCut,
                harden_age_us: 1000,
                nested: nest.then_some(selector),
                growth: sweep_growth(),
                missing_fence: false,
            };
            set_current(&point);
            points += 1;
            let (outcome, result) = run_point(&point);
            if let Err(v) = result {
                fail(name, &point, &v);
            }
            let done = if nest {
                selector + 1 >= outcome.recovery_ops
            } else {
                selector + 1 >= 8
            };
            if done {
                break;
            }
        }
    }
    eprintln!(
        "{name}: {points} double-crash points (the log is created in {open_ops} operations), {:.1?}",
        began.elapsed()
    );
    points
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

mod durable {
    use super::*;

    fn random(mode: CommitMode, threads: usize, crash: Crash, points: usize, seed: u64) {
        let name = format!(
            "{mode} {} {:?}",
            if threads == 1 {
                "single-threaded"
            } else {
                "multi-threaded"
            },
            crash
        );
        let s = sweep(mode, threads, crash, points, seed);
        with_watchdog(WATCHDOG, move || s.run(&name));
    }

    #[test]
    fn fsync_power_cut_single_thread() {
        random(
            CommitMode::Fsync,
            1,
            Crash::PowerCut,
            RANDOM_SINGLE,
            0xf5_0001,
        );
    }

    #[test]
    fn fsync_power_cut_multi_thread() {
        random(
            CommitMode::Fsync,
            0,
            Crash::PowerCut,
            RANDOM_MULTI,
            0xf5_0002,
        );
    }

    #[test]
    fn buffer_power_cut_single_thread() {
        random(
            CommitMode::Buffer,
            1,
            Crash::PowerCut,
            RANDOM_SINGLE,
            0xb0_0001,
        );
    }

    #[test]
    fn buffer_power_cut_multi_thread() {
        random(
            CommitMode::Buffer,
            0,
            Crash::PowerCut,
            RANDOM_MULTI,
            0xb0_0002,
        );
    }

    #[test]
    fn pmem_log_power_cut_single_thread() {
        random(
            CommitMode::PmemLog,
            1,
            Crash::PowerCut,
            RANDOM_SINGLE,
            0x9e_0001,
        );
    }

    #[test]
    fn pmem_log_power_cut_multi_thread() {
        random(
            CommitMode::PmemLog,
            0,
            Crash::PowerCut,
            RANDOM_MULTI,
            0x9e_0002,
        );
    }

    #[test]
    fn fsync_process_crash() {
        random(
            CommitMode::Fsync,
            1,
            Crash::Process,
            PROCESS_SINGLE,
            0xf5_0003,
        );
        random(
            CommitMode::Fsync,
            0,
            Crash::Process,
            PROCESS_MULTI,
            0xf5_0004,
        );
    }

    #[test]
    fn buffer_process_crash() {
        random(
            CommitMode::Buffer,
            1,
            Crash::Process,
            PROCESS_SINGLE,
            0xb0_0003,
        );
        random(
            CommitMode::Buffer,
            0,
            Crash::Process,
            PROCESS_MULTI,
            0xb0_0004,
        );
    }

    #[test]
    fn pmem_log_process_crash() {
        random(
            CommitMode::PmemLog,
            1,
            Crash::Process,
            PROCESS_SINGLE,
            0x9e_0003,
        );
        random(
            CommitMode::PmemLog,
            0,
            Crash::Process,
            PROCESS_MULTI,
            0x9e_0004,
        );
    }

    #[test]
    fn fsync_early_crashes_and_crashes_during_recovery() {
        with_watchdog(WATCHDOG, || {
            early_crashes("fsync early", CommitMode::Fsync, 1..=EARLY_OPS, true)
        });
    }

    /// Crashes during creation are followed by a second crash in
    /// `buffer_crash_during_creation_then_during_recreation` (ignored: a known bug).
    #[test]
    fn buffer_early_crashes_and_crashes_during_recovery() {
        with_watchdog(WATCHDOG, || {
            early_crashes("buffer early", CommitMode::Buffer, 1..=EARLY_OPS, false)
        });
    }

    #[test]
    fn pmem_log_early_crashes_and_crashes_during_recovery() {
        with_watchdog(WATCHDOG, || {
            early_crashes("pmem-log early", CommitMode::PmemLog, 1..=EARLY_OPS, true)
        });
    }

    /// Regression (was a bug, fixed by clearing the magic before the rewrite): a crash while a
    /// `buffer` log is created, after its PMEM header is persistent but before the log file's
    /// header is, makes the next open create the log again, rewriting the PMEM header in place
    /// under the old, valid magic number. A second crash before that rewrite was persistent
    /// left a header mixing old and new words: every later open failed with "header checksum
    /// mismatch (corrupt header)". Found by this sweep, e.g. at `mode=buffer threads=1 commits=8 crash_at=10 nested=3
    /// cut_seed=11771709478905799174` (operation numbers shift as the code changes).
    #[test]
    fn buffer_crash_during_creation_then_during_recreation() {
        let ops = open_ops(CommitMode::Buffer);
        with_watchdog(WATCHDOG, move || {
            early_crashes("buffer creation", CommitMode::Buffer, 1..=ops, true)
        });
    }

    /// The same (fixed) bug, reproduced directly and deterministically: a PMEM file whose header and
    /// empty ring survived, and no log file (the state a crash during creation leaves behind);
    /// a crash at any operation of the re-creation must leave a log that opens.
    #[test]
    fn buffer_recreation_over_a_surviving_pmem_header_survives_a_crash() {
        let config = config(CommitMode::Buffer, Duration::from_millis(1));
        let first = SimStorage::new();
        let (log, _) = open_with(&first, &config, Growth::Scaled).expect("create");
        drop(log);
        let pmem = first.region_bytes(PMEM_PATH).expect("the PMEM file");
        let half_created = || {
            let storage = SimStorage::new();
            storage.set_region_bytes(PMEM_PATH, pmem.clone());
            storage
        };
        let probe = half_created();
        let (log, recovery) = open_with(&probe, &config, Growth::Scaled).expect("re-create");
        assert!(
            recovery.created,
            "a PMEM file without a log file is created again"
        );
        let ops = probe.ops_done();
        drop(log);
        let mut failures = Vec::new();
        for crash_at in 1..=ops {
            for seed in 0..16 {
                let storage = half_created();
                storage.crash_after(crash_at);
                if let Ok((log, _)) = open_with(&storage, &config, Growth::Scaled) {
                    drop(log);
                }
                let image = storage.power_cut(seed);
                if let Err(e) = open_with(&image, &config, Growth::Scaled) {
                    failures.push(format!(
                        "crash at re-creation op {crash_at}, cut seed {seed}: {e}"
                    ));
                }
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} crash points leave a log that cannot be opened, e.g.\n  {}",
            failures.len(),
            ops * 16,
            failures[..failures.len().min(4)].join("\n  ")
        );
    }

    /// The sweeps scale the log file's 64 MiB preallocation down (`tailstore_media::scaled_growth`);
    /// these few short runs keep it, at about half a second per point.
    #[test]
    fn fsync_and_buffer_with_real_preallocation() {
        for (mode, threads, commits, seed) in [
            (CommitMode::Fsync, 1, 12, 0xf5_0005),
            (CommitMode::Buffer, 1, 40, 0xb0_0005),
            (CommitMode::Buffer, 2, 20, 0xb0_0006),
        ] {
            let s = Sweep {
                commits,
                growth: Growth::Real,
                harden_age_us: Some(250),
                missing_fence: false,
                ..sweep(mode, threads, Crash::PowerCut, REAL_GROWTH_POINTS, seed)
            };
            let name = format!("{mode} threads={threads} real preallocation");
            with_watchdog(WATCHDOG, move || s.run(&name));
        }
    }

    /// The harness itself: a run without a crash point keeps everything, and points are
    /// reproducible from their printed form.
    #[test]
    fn harness_sanity() {
        for mode in [CommitMode::Fsync, CommitMode::Buffer, CommitMode::PmemLog] {
            let point = Point {
                mode,
                threads: 2,
                commits: 40,
                seed: 7,
                crash_at: None,
                cut_seed: 3,
                crash: Crash::PowerCut,
                harden_age_us: 250,
                nested: Some(5),
                growth: Growth::Scaled,
                missing_fence: false,
            };
            assert_eq!(point.to_string().parse::<Point>(), Ok(point.clone()));
            let (outcome, result) = run_point(&point);
            if let Err(v) = result {
                panic!("{v}\n  point: {point}");
            }
            assert_eq!(
                outcome.acked, 80,
                "{mode}: every commit of a run without a crash"
            );
            assert!(!outcome.died, "{mode}");
            // How many records recovery finds is not asserted: since the releaser thread
            // releases in every mode (47fe034), it may have released every record, in `fsync`
            // mode too (3–6% of runs failed a `recovered > 0` check there). What was
            // recovered is checked against the acknowledgements by `run_point` (checks a–d).
        }
        // Single-threaded fsync and pmem-log points replay exactly.
        for mode in [CommitMode::Fsync, CommitMode::PmemLog] {
            let full = Point {
                mode,
                threads: 1,
                commits: SINGLE_COMMITS,
                seed: 11,
                crash_at: None,
                cut_seed: 5,
                crash: Crash::PowerCut,
                harden_age_us: 1000,
                nested: None,
                growth: Growth::Scaled,
                missing_fence: false,
            };
            let ops = run_point(&full).0.ops;
            for crash_at in [ops / 9, ops / 2, ops - 3] {
                let point = Point {
                    mode,
                    threads: 1,
                    commits: SINGLE_COMMITS,
                    seed: 11,
                    crash_at: Some(crash_at),
                    cut_seed: 5,
                    crash: Crash::PowerCut,
                    harden_age_us: 1000,
                    nested: Some(9),
                    growth: Growth::Scaled,
                    missing_fence: false,
                };
                let (a, ra) = run_point(&point);
                let (b, rb) = run_point(&point);
                assert!(ra.is_ok() && rb.is_ok(), "{point}");
                assert!(a.died, "{point}");
                assert_eq!(
                    (a.ops, a.acked, a.recovered, a.recovery_ops),
                    (b.ops, b.acked, b.recovered, b.recovery_ops),
                    "{point} is not deterministic"
                );
            }
        }
    }
}

/// Replays one crash point printed by a failing sweep: `TAILSTORE_REPRO='mode=… …'`.
#[test]
#[ignore = "replays the crash point in TAILSTORE_REPRO"]
fn repro() {
    let text = std::env::var("TAILSTORE_REPRO").expect("set TAILSTORE_REPRO to a printed point");
    let point: Point = text.parse().expect("a point as printed by a failing sweep");
    let tries = if point.threads == 1 && point.mode != CommitMode::Buffer {
        1 // deterministic
    } else {
        20
    };
    for attempt in 1..=tries {
        if let (_, Err(v)) = run_point(&point) {
            panic!("reproduced on attempt {attempt}: {v}\n  point: {point}");
        }
    }
    eprintln!("not reproduced in {tries} attempts: {point}");
}

/// The planted bug (no fence after an appended record is flushed to the PMEM ring) must be
/// caught: at some crash point a power cut loses an acknowledged commit. Every point of each
/// sweep runs, to report how often the bug is caught, not only whether. A reopen that fails
/// (in `buffer` mode a record straddling the hardened boundary loses its unfenced half in
/// the ring, and recovery calls the log corrupt) loses every acknowledged commit, so it
/// counts too; but at least one point must show a plain lost commit. The failing reopen
/// may be the second one, after the power cut that follows the commit check (d) makes
/// once the log is reopened: that commit's record goes unfenced too. Which points show
/// which depends on timing (records harden by age), so the test accepts either.
#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
fn planted_missing_fence_is_caught() {
    const POINTS: usize = 200;
    let mut lost_total = 0;
    for (mode, threads, seed) in [
        (CommitMode::Buffer, 1, 0xb0_0001),
        (CommitMode::PmemLog, 1, 0x9e_0001),
        (CommitMode::Buffer, 0, 0xb0_0002),
        (CommitMode::PmemLog, 0, 0x9e_0002),
    ] {
        let s = Sweep {
            mode,
            threads,
            crash: Crash::PowerCut,
            points: POINTS * multiplier(),
            seed: base_seed(seed),
            nested_share: NESTED_SHARE,
            commits: 0,
            growth: sweep_growth(),
            harden_age_us: None,
            missing_fence: true,
        };
        let (stats, first, kinds) = with_watchdog(WATCHDOG, move || {
            let mut first: Option<(usize, String, Point)> = None;
            let mut kinds: HashMap<String, usize> = HashMap::new();
            let mut index = 0;
            let stats = s.visit(|point, _, result| {
                index += 1;
                if let Err(v) = result {
                    assert!(
                        matches!(v.kind, Kind::LostAck | Kind::ReopenFailed),
                        "{mode}: expected lost acknowledged commits, found {v}\n  point: {point}"
                    );
                    let stage = if v.after_reopen { " after reopen" } else { "" };
                    *kinds.entry(format!("{:?}{stage}", v.kind)).or_default() += 1;
                    if first.is_none() {
                        first = Some((index, v.to_string(), point.clone()));
                    }
                }
                true
            });
            (stats, first, kinds)
        });
        let name = format!(
            "{mode} {}",
            if threads == 1 {
                "single-threaded"
            } else {
                "multi-threaded"
            }
        );
        let (index, v, point) = first.unwrap_or_else(|| {
            panic!(
                "{name}: the planted missing fence went unnoticed in {} crash points",
                stats.points
            )
        });
        lost_total += kinds.get("LostAck").copied().unwrap_or(0);
        eprintln!(
            "{name}: planted bug first caught at crash point #{index}; violations at {} of {} \
             points {kinds:?}\n  first: {v}\n  point: {point}",
            kinds.values().sum::<usize>(),
            stats.points
        );
    }
    assert!(lost_total > 0, "no point showed a lost acknowledged commit");
}
