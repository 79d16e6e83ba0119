//! Fail-stop: after a failed write, `fdatasync` or fence the log accepts nothing more.
//!
//! For each injected fault (`fail_nth_write`, `fail_nth_sync` in the modes that write a log
//! file; `fail_region_fences_after` in the modes with a PMEM ring):
//!
//! * the commit that meets the fault (or, when the background writer meets it, the first
//!   commit after it) returns `LogError::Stopped` whose message names the fault;
//! * every later commit, append, `wait_durable`, `release` and `close` returns `Stopped` with
//!   the same cause, also after the fault is disarmed;
//! * after a process crash (and after power cuts) every commit acknowledged before the fault
//!   is recovered, every recovered record is one that was appended, and the reopened log
//!   accepts commits again.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tailstore_log::{CommitMode, LogConfig, LogError, LogManager, Record, KIB, LOG_START_LSN};
use tailstore_media::sim::SimStorage;

use tailstore_media::scaled_growth::ScaledGrowth;

const WRITE: &str = "injected fault: write";
const SYNC: &str = "injected fault: sync";
const FENCE: &str = "injected fault: fence";

fn config(mode: CommitMode, harden_age: Duration) -> LogConfig {
    let mut config = LogConfig::new(mode, "/db", Some(PathBuf::from("/pmem/log.pmem")));
    config.block_bytes = 4 * KIB;
    config.ring_bytes = 16 * KIB;
    config.pmem_log_bytes = 16 * KIB;
    config.harden_age = harden_age;
    config
}

/// Opens the log on `storage`. Unless `real_growth`, the log file is preallocated in small
/// steps: the log manager's 64 MiB steps make every simulated sync copy 64 MiB (see
/// `tailstore_media::scaled_growth`).
fn open_recover(
    storage: &SimStorage,
    config: &LogConfig,
    real_growth: bool,
) -> tailstore_log::Result<(LogManager, tailstore_log::Recovery)> {
    if real_growth {
        LogManager::open(Arc::new(storage.clone()), config)
    } else {
        LogManager::open(Arc::new(ScaledGrowth(storage.clone())), config)
    }
}

fn open(storage: &SimStorage, config: &LogConfig) -> LogManager {
    open_recover(storage, config, false)
        .expect("open the log")
        .0
}

/// A unique, recognisable payload: its identity, then 0..190 bytes of filler.
fn payload(thread: usize, seq: usize) -> Vec<u8> {
    let mut p = format!("thread {thread} commit {seq};").into_bytes();
    let filler = (thread * 37 + seq * 53) % 190;
    p.resize(p.len() + filler, b'a' + (seq % 26) as u8);
    p
}

/// What the appenders did: acknowledged commits (payload → end LSN) and every payload tried.
#[derive(Clone, Default)]
struct Ledger {
    acked: HashMap<Vec<u8>, u64>,
    attempted: HashSet<Vec<u8>>,
}

impl Ledger {
    fn commit(&mut self, log: &LogManager, payload: Vec<u8>) -> Result<u64, LogError> {
        self.attempted.insert(payload.clone());
        let result = log.commit(&payload);
        if let Ok(end) = result {
            self.acked.insert(payload, end);
        }
        result
    }

    fn merge(&mut self, other: Ledger) {
        self.acked.extend(other.acked);
        self.attempted.extend(other.attempted);
    }
}

/// Asserts that `result` is `LogError::Stopped` naming `cause`, in its field and its message.
#[track_caller]
fn assert_stopped<T: std::fmt::Debug>(result: Result<T, LogError>, cause: &str, what: &str) {
    match result {
        Err(LogError::Stopped { cause: found }) => {
            assert!(
                found.contains(cause),
                "{what}: stopped, but the cause {found:?} does not name {cause:?}"
            );
        }
        other => panic!("{what}: expected LogError::Stopped naming {cause:?}, got {other:?}"),
    }
}

/// Asserts that every operation of a stopped log fails with `Stopped` naming `cause`.
#[track_caller]
fn assert_everything_stopped(log: &LogManager, cause: &str, when: &str) {
    for i in 0..3 {
        assert_stopped(
            log.commit(&payload(99, i)),
            cause,
            &format!("{when}: commit"),
        );
        assert_stopped(
            log.append(&payload(98, i)),
            cause,
            &format!("{when}: append"),
        );
    }
    let durable = log.durable_lsn();
    assert_stopped(
        log.wait_durable(durable),
        cause,
        &format!("{when}: wait_durable"),
    );
    assert_stopped(
        log.wait_durable(durable + 8),
        cause,
        &format!("{when}: wait_durable"),
    );
    assert_stopped(log.release(durable), cause, &format!("{when}: release"));
    let message = log
        .commit(b"after the failure")
        .expect_err("a stopped log accepts nothing")
        .to_string();
    assert!(
        message.contains(cause) && message.contains("reopen"),
        "{when}: the message should name the cause and say what to do: {message}"
    );
}

/// Reopens `image` and checks the recovered records against the ledger; then a new commit
/// must work. Returns the records.
#[track_caller]
fn assert_recovers(
    image: &SimStorage,
    config: &LogConfig,
    real_growth: bool,
    ledger: &Ledger,
    what: &str,
) -> usize {
    let (log, recovery) = open_recover(image, config, real_growth)
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let records: Vec<Record> = log
        .records()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{what}: reading the records: {e}"));
    let mut at = LOG_START_LSN;
    let mut found = HashSet::new();
    for r in &records {
        assert_eq!(r.lsn, at, "{what}: records are not contiguous");
        at = r.end;
        assert!(
            ledger.attempted.contains(&r.payload),
            "{what}: record [{}, {}) was never appended: {:?}",
            r.lsn,
            r.end,
            String::from_utf8_lossy(&r.payload)
        );
        assert!(found.insert(r.payload.clone()), "{what}: a record twice");
        if let Some(&end) = ledger.acked.get(&r.payload) {
            assert_eq!(r.end, end, "{what}: an acknowledged commit moved");
        }
    }
    assert_eq!(at, recovery.end_lsn, "{what}: recovery's end");
    let lost = ledger.acked.keys().filter(|p| !found.contains(*p)).count();
    assert_eq!(
        lost,
        0,
        "{what}: {lost} of {} acknowledged commits lost ({} records recovered)",
        ledger.acked.len(),
        records.len()
    );
    log.commit(b"a commit after the reopen")
        .unwrap_or_else(|e| panic!("{what}: commit after the reopen: {e}"));
    records.len()
}

/// Process crash, then power cuts with a few seeds: nothing acknowledged may be lost.
#[track_caller]
fn assert_nothing_acked_lost(
    storage: &SimStorage,
    config: &LogConfig,
    real_growth: bool,
    ledger: &Ledger,
) {
    let crashed = storage.process_crash();
    assert_recovers(
        &crashed,
        config,
        real_growth,
        ledger,
        "after a process crash",
    );
    // Each reopen with the real preallocation copies 64 MiB several times: fewer seeds.
    let seeds = if real_growth { 2 } else { 8 };
    for seed in 0..seeds {
        assert_recovers(
            &storage.power_cut(seed),
            config,
            real_growth,
            ledger,
            &format!("after a power cut (seed {seed})"),
        );
    }
    reopened_logs_commits_survive_power_cuts(
        &storage.process_crash(),
        config,
        real_growth,
        ledger,
        seeds,
    );
}

/// Reopens `crashed`, commits once, then cuts the power: that commit and the ones before the
/// crash must survive. A sync that failed before the crash lost its write-back while the
/// page cache still reads the records (as on Linux); the reopened log's commits follow those
/// records, so the reopen must put them on the disk again.
#[track_caller]
fn reopened_logs_commits_survive_power_cuts(
    crashed: &SimStorage,
    config: &LogConfig,
    real_growth: bool,
    ledger: &Ledger,
    seeds: u64,
) {
    let (log, _) = open_recover(crashed, config, real_growth).expect("reopen after the crash");
    let mut ledger = ledger.clone();
    ledger
        .commit(&log, b"acknowledged by the reopened log".to_vec())
        .expect("a commit after the reopen");
    for seed in 0..seeds {
        assert_recovers(
            &crashed.power_cut(seed),
            config,
            real_growth,
            &ledger,
            &format!("after the reopened log's commit and a power cut (seed {seed})"),
        );
    }
}

/// Fails the test instead of hanging it when `body` does not finish in time.
fn with_timeout<T: Send + 'static>(what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, wait) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let result = body();
        let _ = done.send(());
        result
    });
    match wait.recv_timeout(Duration::from_secs(120)) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hangs after the fault"),
    }
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// `fail_nth_write(n)`
    Write(u64),
    /// `fail_nth_sync(n)`
    Sync(u64),
    /// `fail_region_fences_after(n)`
    Fence(u64),
}

impl Fault {
    fn cause(self) -> &'static str {
        match self {
            Fault::Write(_) => WRITE,
            Fault::Sync(_) => SYNC,
            Fault::Fence(_) => FENCE,
        }
    }

    fn arm(self, storage: &SimStorage) {
        match self {
            Fault::Write(n) => storage.fail_nth_write(n),
            Fault::Sync(n) => storage.fail_nth_sync(n),
            Fault::Fence(n) => storage.fail_region_fences_after(n),
        }
    }

    fn disarm(self, storage: &SimStorage) {
        match self {
            Fault::Write(_) => storage.fail_nth_write(0),
            Fault::Sync(_) => storage.fail_nth_sync(0),
            Fault::Fence(_) => storage.fail_region_fences_after(0),
        }
    }
}

/// One thread: `before` commits, then the fault is armed and commits go on until one fails
/// (the background writer of `buffer` may meet the fault first; give it up to 10 s). Returns
/// how many commits were acknowledged after the fault was armed.
fn single_thread(mode: CommitMode, fault: Fault, before: usize, harden_age: Duration) -> usize {
    single_thread_with(mode, fault, before, harden_age, false)
}

fn single_thread_with(
    mode: CommitMode,
    fault: Fault,
    before: usize,
    harden_age: Duration,
    real_growth: bool,
) -> usize {
    let config = config(mode, harden_age);
    let storage = SimStorage::new();
    let log = open_recover(&storage, &config, real_growth)
        .expect("open the log")
        .0;
    let mut ledger = Ledger::default();
    for seq in 0..before {
        ledger
            .commit(&log, payload(0, seq))
            .unwrap_or_else(|e| panic!("commit {seq} before the fault: {e}"));
    }
    fault.arm(&storage);
    let began = Instant::now();
    let mut seq = before;
    let error = loop {
        match ledger.commit(&log, payload(0, seq)) {
            Ok(_) => {}
            Err(e) => break e,
        }
        seq += 1;
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{mode} {fault:?}: no commit failed in 10 s ({} commits)",
            seq - before
        );
        if mode == CommitMode::Buffer {
            // Give the writer (which meets write and sync faults) a chance to run.
            std::thread::sleep(Duration::from_micros(200));
        }
    };
    let what = format!("{mode} {fault:?}");
    assert_stopped(
        Err::<(), _>(error),
        fault.cause(),
        &format!("{what}: the failing commit"),
    );
    assert_everything_stopped(&log, fault.cause(), &format!("{what}, fault armed"));
    fault.disarm(&storage);
    assert_everything_stopped(&log, fault.cause(), &format!("{what}, fault disarmed"));
    assert_stopped(log.close(), fault.cause(), &format!("{what}: close"));
    assert_nothing_acked_lost(&storage, &config, real_growth, &ledger);
    seq - before
}

const QUICK: Duration = Duration::from_millis(1);
/// Long enough that the `buffer` writer never hardens a partial block during a test.
const NEVER: Duration = Duration::from_secs(3600);

#[test]
fn fsync_failed_write_stops_the_log() {
    for (before, n) in [(0, 1), (20, 1), (20, 3), (150, 2)] {
        let after = single_thread(CommitMode::Fsync, Fault::Write(n), before, QUICK);
        // Every fsync commit writes once: the n-th commit after arming is the failing one.
        assert_eq!(after as u64, n - 1);
    }
}

#[test]
fn fsync_failed_sync_stops_the_log() {
    for (before, n) in [(0, 1), (20, 1), (20, 4), (150, 2)] {
        let after = single_thread(CommitMode::Fsync, Fault::Sync(n), before, QUICK);
        assert_eq!(after as u64, n - 1);
    }
}

/// With the log manager's real 64 MiB preallocation (slow in the simulator: a few cases).
#[test]
fn failed_write_and_sync_with_real_preallocation() {
    for (mode, fault) in [
        (CommitMode::Fsync, Fault::Write(2)),
        (CommitMode::Fsync, Fault::Sync(1)),
        (CommitMode::Buffer, Fault::Sync(1)),
    ] {
        single_thread_with(mode, fault, 10, QUICK, true);
    }
}

#[test]
fn buffer_failed_write_stops_the_log() {
    for (before, n, age) in [(0, 1, QUICK), (30, 1, QUICK), (30, 2, QUICK), (5, 1, NEVER)] {
        single_thread(CommitMode::Buffer, Fault::Write(n), before, age);
    }
}

#[test]
fn buffer_failed_sync_stops_the_log() {
    for (before, n, age) in [(0, 1, QUICK), (30, 1, QUICK), (30, 2, QUICK), (5, 1, NEVER)] {
        single_thread(CommitMode::Buffer, Fault::Sync(n), before, age);
    }
}

#[test]
fn buffer_failed_fence_stops_the_log() {
    // The writer never runs (records stay in the first block, harden age an hour): the
    // commit's own fence is the n-th one.
    for (before, n) in [(0, 1), (10, 1), (10, 3)] {
        let after = single_thread(CommitMode::Buffer, Fault::Fence(n), before, NEVER);
        assert_eq!(after as u64, n - 1);
    }
    // The writer's fences (persisting the hardened LSN) and the commits' fences interleave.
    for n in 1..=30 {
        single_thread(CommitMode::Buffer, Fault::Fence(n), 20, Duration::ZERO);
    }
}

#[test]
fn pmem_log_failed_fence_stops_the_log() {
    for (before, n) in [(0, 1), (10, 1), (10, 3), (60, 5)] {
        let after = single_thread(CommitMode::PmemLog, Fault::Fence(n), before, QUICK);
        assert_eq!(after as u64, n - 1);
    }
}

/// A failed fence while releasing a prefix (pmem-log) stops the log too.
#[test]
fn pmem_log_failed_fence_in_release_stops_the_log() {
    let config = config(CommitMode::PmemLog, QUICK);
    let storage = SimStorage::new();
    let log = open(&storage, &config);
    let mut ledger = Ledger::default();
    let mut release_at = 0;
    for seq in 0..10 {
        let end = ledger.commit(&log, payload(0, seq)).expect("commit");
        if seq == 4 {
            release_at = end;
        }
    }
    storage.fail_region_fences_after(1);
    assert_stopped(log.release(release_at), FENCE, "the failing release");
    storage.fail_region_fences_after(0);
    assert_everything_stopped(&log, FENCE, "after a failed release");
    // The release failed, so it may or may not have reached the medium: only the commits
    // after it must survive.
    ledger.acked.retain(|_, &mut end| end > release_at);
    let image = storage.process_crash();
    let (reopened, recovery) =
        open_recover(&image, &config, false).expect("reopen after a failed release");
    assert!(recovery.start_lsn == LOG_START_LSN || recovery.start_lsn == release_at);
    let records: Vec<Record> = reopened
        .records()
        .collect::<Result<_, _>>()
        .expect("records");
    for (payload, end) in &ledger.acked {
        assert!(
            records
                .iter()
                .any(|r| &r.payload == payload && r.end == *end),
            "an acknowledged commit after the released prefix was lost"
        );
    }
}

/// Several committers at once: all of them end with `Stopped` naming the fault (none hangs,
/// none succeeds after its first failure), and nothing acknowledged is lost.
fn many_threads(mode: CommitMode, fault: Fault, harden_age: Duration) {
    let config = config(mode, harden_age);
    let storage = SimStorage::new();
    let log = Arc::new(open(&storage, &config));
    // pmem-log: the ring is never released here, so keep well inside its 16 KiB.
    let (threads, per_thread) = if mode == CommitMode::PmemLog {
        (3, 20)
    } else {
        (3, 400)
    };
    let what = format!("{mode} {fault:?} with {threads} threads");
    let armed = {
        let storage = storage.clone();
        move || fault.arm(&storage)
    };
    let ledger = with_timeout(&what, {
        let log = Arc::clone(&log);
        move || {
            let barrier = Arc::new(std::sync::Barrier::new(threads + 1));
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let log = Arc::clone(&log);
                    let barrier = Arc::clone(&barrier);
                    std::thread::spawn(move || {
                        let mut ledger = Ledger::default();
                        let mut first_error = None;
                        for seq in 0..per_thread {
                            if seq == 3 {
                                // Once everyone has committed a little, the fault is armed
                                // between these two waits.
                                barrier.wait();
                                barrier.wait();
                            }
                            match (ledger.commit(&log, payload(t, seq)), &first_error) {
                                (Err(e), None) => first_error = Some(e),
                                (Ok(_), Some(e)) => {
                                    panic!("thread {t}: a commit succeeded after {e}")
                                }
                                _ => {}
                            }
                        }
                        (ledger, first_error)
                    })
                })
                .collect();
            barrier.wait();
            armed();
            barrier.wait();
            let mut all = Ledger::default();
            let mut errors = Vec::new();
            for handle in handles {
                let (ledger, error) = handle.join().expect("committer panicked");
                all.merge(ledger);
                errors.push(error);
            }
            (all, errors)
        }
    });
    let (ledger, errors) = ledger;
    for (t, error) in errors.into_iter().enumerate() {
        let error = error.unwrap_or_else(|| panic!("{what}: thread {t} never saw the fault"));
        assert_stopped(
            Err::<(), _>(error),
            fault.cause(),
            &format!("{what}: thread {t}"),
        );
    }
    fault.disarm(&storage);
    assert_everything_stopped(&log, fault.cause(), &what);
    assert_nothing_acked_lost(&storage, &config, false, &ledger);
}

#[test]
fn fsync_failed_sync_stops_every_committer() {
    many_threads(CommitMode::Fsync, Fault::Sync(5), QUICK);
}

#[test]
fn fsync_failed_write_stops_every_committer() {
    many_threads(CommitMode::Fsync, Fault::Write(5), QUICK);
}

#[test]
fn buffer_failed_write_stops_every_committer() {
    many_threads(CommitMode::Buffer, Fault::Write(2), QUICK);
}

#[test]
fn buffer_failed_sync_stops_every_committer() {
    many_threads(CommitMode::Buffer, Fault::Sync(2), QUICK);
}

#[test]
fn buffer_failed_fence_stops_every_committer() {
    many_threads(CommitMode::Buffer, Fault::Fence(10), QUICK);
}

#[test]
fn pmem_log_failed_fence_stops_every_committer() {
    many_threads(CommitMode::PmemLog, Fault::Fence(3), QUICK);
}
