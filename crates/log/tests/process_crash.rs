//! Real process crashes: a child process commits from several threads and is killed with
//! SIGKILL at a random instant; the parent recovers the log and checks that every commit the
//! child acknowledged is there, byte for byte, and that nothing else is (only whole records the
//! child wrote, in an order its threads could have produced).
//!
//! The test binary is its own child: [`child_entry`] does nothing unless `TAILSTORE_CRASH_CHILD`
//! is set; the parent runs `current_exe() --exact child_entry --nocapture --test-threads=1`
//! with the log's location in the environment. The child opens the log with the real backend
//! (log directory in a temporary directory on disk, PMEM file in /dev/shm), prints `READY`
//! with what its recovery found, then commits from 2–4 threads forever, printing
//! `ACK <end LSN> <thread> <seq>` after each acknowledged commit (one printer thread, flushed
//! per line, fed through a small bounded channel so that printed acks are recent ones).
//!
//! Every kill continues on the same database (the child recovers what the previous kill left
//! and is killed again), so recovery of recovered logs is exercised too; a fresh database is
//! started only once the log exceeds [`LOG_LIMIT`] bytes, to bound the cost of the checks.
//!
//! `TAILSTORE_KILLS=<n>` sets the kills per durable mode (default 50), `TAILSTORE_CRASH_SEED`
//! the seed of the kill schedule.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use tailstore_crash::{child_exit, env_var, CrashChild, Killed};
use tailstore_log::{CommitMode, LogConfig, LogManager, Record, Recovery, KIB, LOG_START_LSN};
use tailstore_media::real::RealStorage;

const MODE_ENV: &str = "TAILSTORE_CRASH_MODE";
const LOG_DIR_ENV: &str = "TAILSTORE_CRASH_LOG_DIR";
const PMEM_ENV: &str = "TAILSTORE_CRASH_PMEM";
const THREADS_ENV: &str = "TAILSTORE_CRASH_THREADS";
const RUN_ENV: &str = "TAILSTORE_CRASH_RUN";

/// Kills per durable mode unless `TAILSTORE_KILLS` says otherwise.
const DEFAULT_KILLS: usize = 50;
/// A new database is started once the log holds this many bytes: every kill's checks read the
/// whole log (three recoveries and two replays), so their cost grows with it. The fast modes
/// (`buffer`) reach it after a dozen kills or so; `fsync` never does in the default run, and
/// `pmem-log` never does (it keeps releasing its prefix).
const LOG_LIMIT: u64 = 24 << 20;
/// The parent's own records use this thread number.
const PARENT_THREAD: u64 = 1000;
/// Ring size of every mode (`pmem-log`: the whole log), small so that it wraps often.
const RING: usize = 256 * KIB;

fn config(mode: CommitMode, log_dir: &Path, pmem: &Path) -> LogConfig {
    let mut c = LogConfig::new(mode, log_dir, Some(pmem.to_path_buf()));
    c.block_bytes = 16 * KIB;
    c.ring_bytes = RING;
    c.pmem_log_bytes = RING;
    c
}

/// Who wrote a record: the run (one child process, or the parent after it), the thread, and
/// the thread's sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Identity {
    run: u64,
    thread: u64,
    seq: u64,
}

/// The payload of a record is a function of its identity: a readable prefix, then seeded bytes
/// (mostly short; some span several KiB, across block boundaries).
fn payload(id: Identity) -> Vec<u8> {
    let mix = id.run.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ id.thread.wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ id.seq.wrapping_mul(0x1656_67B1_9E37_79F9);
    let mut rng = StdRng::seed_from_u64(mix);
    let len = match rng.gen_range(0..100) {
        0..=1 => rng.gen_range(2000..9000),
        2..=9 => rng.gen_range(200..1000),
        _ => rng.gen_range(0..120),
    };
    let mut p = format!("TSC{}:{}:{};", id.run, id.thread, id.seq).into_bytes();
    let prefix = p.len();
    p.resize(prefix + len, 0);
    rng.fill_bytes(&mut p[prefix..]);
    p
}

/// The identity a payload claims to have (not checked against its bytes).
fn claimed_identity(payload_bytes: &[u8]) -> Option<Identity> {
    let rest = payload_bytes.strip_prefix(b"TSC")?;
    let end = rest.iter().take(64).position(|b| *b == b';')?;
    let text = std::str::from_utf8(&rest[..end]).ok()?;
    let mut fields = text.split(':').map(|f| f.parse::<u64>().ok());
    let id = Identity {
        run: fields.next()??,
        thread: fields.next()??,
        seq: fields.next()??,
    };
    fields.next().is_none().then_some(id)
}

/// The identity of a recovered payload, if it is byte for byte one that was generated.
fn identify(payload_bytes: &[u8]) -> Option<Identity> {
    claimed_identity(payload_bytes).filter(|id| payload(*id) == payload_bytes)
}

fn hash_of(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

// ---------------------------------------------------------------------------------------------
// The child.

/// The child process's entry point; an ordinary (empty) test when `TAILSTORE_CRASH_CHILD` is
/// not set.
#[test]
fn child_entry() {
    if tailstore_crash::is_child() {
        child_main();
    }
}

fn child_main() -> ! {
    let mode: CommitMode = env_var(MODE_ENV)
        .parse()
        .unwrap_or_else(|e| child_exit(2, e));
    let log_dir = PathBuf::from(env_var(LOG_DIR_ENV));
    let pmem = PathBuf::from(env_var(PMEM_ENV));
    let threads: u64 = env_var(THREADS_ENV).parse().expect("thread count");
    let run: u64 = env_var(RUN_ENV).parse().expect("run number");
    let cfg = config(mode, &log_dir, &pmem);
    let (log, recovery) = LogManager::open(Arc::new(RealStorage), &cfg)
        .unwrap_or_else(|e| child_exit(3, format!("open failed: {e}")));
    let log = Arc::new(log);

    let tx = tailstore_crash::line_printer();
    tx.send(format!(
        "READY {} {} {}",
        recovery.start_lsn, recovery.end_lsn, recovery.records
    ))
    .expect("printer");
    for thread in 0..threads {
        let (log, tx) = (Arc::clone(&log), tx.clone());
        thread::spawn(move || {
            for seq in 0.. {
                let id = Identity { run, thread, seq };
                match log.commit(&payload(id)) {
                    Ok(end) => tx
                        .send(format!("ACK {end} {thread} {seq}"))
                        .expect("printer"),
                    Err(e) => child_exit(4, format!("commit failed: {e}")),
                }
            }
        });
    }

    // `pmem-log` keeps the log in a ring of RING bytes: release a lagging prefix so that it
    // never fills, keeping about half of it (so that the parent has acks above the released
    // point to check). Every durable LSN seen earlier is a record boundary.
    let half = RING as u64 / 2;
    let mut released = recovery.start_lsn;
    let mut seen = VecDeque::new();
    loop {
        thread::sleep(Duration::from_millis(1));
        if mode != CommitMode::PmemLog {
            continue;
        }
        let durable = log.durable_lsn();
        seen.push_back(durable);
        let mut target = None;
        while seen.front().is_some_and(|&lsn| durable - lsn >= half) {
            target = seen.pop_front();
        }
        if target.is_none() && durable - released > 3 * RING as u64 / 4 {
            target = Some(durable); // a burst filled the ring between two looks
        }
        if let Some(lsn) = target.filter(|&lsn| lsn > released) {
            log.release(lsn)
                .unwrap_or_else(|e| child_exit(5, format!("release {lsn} failed: {e}")));
            released = lsn;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The parent.

/// A database: the log directory in a temporary directory on disk, the PMEM file in /dev/shm
/// (removed on drop).
struct Db {
    mode: CommitMode,
    dir: tempfile::TempDir,
    pmem: PathBuf,
}

impl Db {
    fn new(mode: CommitMode) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = tempfile::tempdir().expect("tempdir");
        let name = format!(
            "tailstore-crash-{}-{}-{}.pmem",
            std::process::id(),
            mode.name(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let pmem = tailstore_crash::pmem_path(dir.path(), &name);
        Self { mode, dir, pmem }
    }

    fn config(&self) -> LogConfig {
        config(self.mode, self.dir.path(), &self.pmem)
    }

    fn open(&self, what: &str) -> (LogManager, Recovery) {
        LogManager::open(Arc::new(RealStorage), &self.config())
            .unwrap_or_else(|e| panic!("{}: {what}: open failed: {e}", self.mode))
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pmem);
    }
}

/// Kills the child if the parent panics while it runs.
/// A record of the expected database content: position, identity (the payload follows from
/// it) and a hash of the payload, to compare records already checked byte for byte cheaply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    lsn: u64,
    end: u64,
    id: Identity,
    hash: u64,
}

/// What the parent knows the database holds between kills.
struct Expected {
    start: u64,
    end: u64,
    entries: Vec<Entry>,
}

impl Expected {
    fn empty() -> Self {
        Self {
            start: LOG_START_LSN,
            end: LOG_START_LSN,
            entries: Vec::new(),
        }
    }
}

/// What one child printed before it died.
struct ChildOutput {
    ready: Option<(u64, u64, u64)>,
    acks: Vec<(u64, Identity)>,
    stderr: String,
}

fn parse_output(lines: &[String], run: u64, stderr: String) -> ChildOutput {
    let mut out = ChildOutput {
        ready: None,
        acks: Vec::new(),
        stderr,
    };
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> u64 {
            fields[i]
                .parse()
                .unwrap_or_else(|_| panic!("bad child line {line:?}"))
        };
        match fields.first() {
            Some(&"READY") => out.ready = Some((num(1), num(2), num(3))),
            Some(&"ACK") => out.acks.push((
                num(1),
                Identity {
                    run,
                    thread: num(2),
                    seq: num(3),
                },
            )),
            _ => {} // the test harness's own lines
        }
    }
    out
}

/// Starts a child on `db` and kills it with SIGKILL: `delay` after it reported that the log
/// is open, or (`early`) `delay` after it started, to catch it while it creates or recovers.
fn crash_child(db: &Db, threads: u64, run: u64, delay: Duration, early: bool) -> ChildOutput {
    let child = CrashChild::spawn(
        "child_entry",
        &[
            (MODE_ENV, db.mode.name().to_string()),
            (LOG_DIR_ENV, db.dir.path().display().to_string()),
            (PMEM_ENV, db.pmem.display().to_string()),
            (THREADS_ENV, threads.to_string()),
            (RUN_ENV, run.to_string()),
        ],
    );
    if early {
        thread::sleep(delay.saturating_sub(child.elapsed()));
    } else {
        if !child.wait_for_line("READY ", Duration::from_secs(60)) {
            let Killed { stderr, .. } = child.kill(db.mode.name());
            panic!(
                "{}: the child never reported READY; stderr:\n{stderr}",
                db.mode
            );
        }
        thread::sleep(delay);
    }
    let Killed { lines, stderr } = child.kill(db.mode.name());
    parse_output(&lines, run, stderr)
}

fn read_all(log: &LogManager, what: &str) -> Vec<Record> {
    log.records()
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{what}: replay failed: {e}"))
}

/// Checks that `records` are contiguous from `recovery.start_lsn` to `recovery.end_lsn` and
/// returns them as entries. Records from `verify_from` on must be, byte for byte, records that
/// were generated; the caller compares the others with entries checked before.
fn entries_of(records: &[Record], recovery: &Recovery, verify_from: u64, what: &str) -> Vec<Entry> {
    let mut at = recovery.start_lsn;
    let entries: Vec<Entry> = records
        .iter()
        .map(|r| {
            assert_eq!(r.lsn, at, "{what}: records are not contiguous");
            at = r.end;
            let id = if r.lsn >= verify_from {
                identify(&r.payload)
            } else {
                claimed_identity(&r.payload)
            };
            let id = id.unwrap_or_else(|| {
                panic!(
                    "{what}: record at LSN {} is not one that was written: {:?}",
                    r.lsn,
                    String::from_utf8_lossy(&r.payload[..r.payload.len().min(40)])
                )
            });
            Entry {
                lsn: r.lsn,
                end: r.end,
                id,
                hash: hash_of(&r.payload),
            }
        })
        .collect();
    assert_eq!(at, recovery.end_lsn, "{what}: recovery's end LSN");
    assert_eq!(
        recovery.records,
        entries.len() as u64,
        "{what}: record count"
    );
    entries
}

/// What the parent checks after one kill; returns the new expected content and how many acks
/// it checked.
fn verify_and_extend(
    db: &Db,
    expected: &Expected,
    out: &ChildOutput,
    run: u64,
    threads: u64,
    what: &str,
) -> (Expected, usize) {
    let mode = db.mode;
    if let Some((start, end, _)) = out.ready {
        assert_eq!(
            (start, end),
            (expected.start, expected.end),
            "{what}: the child's recovery found another log than the parent left"
        );
    }

    // Reopen #1: recover what the crash left.
    let (log, recovery) = db.open(what);
    assert!(
        !recovery.created || expected.entries.is_empty(),
        "{what}: re-created"
    );
    let records = read_all(&log, what);
    let entries = entries_of(&records, &recovery, expected.end, what);
    drop(records);

    // What was there before the child ran is still there, byte for byte.
    assert!(
        recovery.start_lsn >= expected.start,
        "{what}: start went back"
    );
    let kept: Vec<Entry> = expected
        .entries
        .iter()
        .copied()
        .filter(|e| e.lsn >= recovery.start_lsn)
        .collect();
    assert!(
        entries.len() >= kept.len() && entries[..kept.len()] == kept[..],
        "{what}: records recovered before this crash changed"
    );
    if mode != CommitMode::PmemLog {
        assert_eq!(recovery.start_lsn, LOG_START_LSN, "{what}");
        assert!(recovery.end_lsn >= expected.end, "{what}: log got shorter");
    }

    // Everything after it was written by this child, each thread's records in order, without
    // holes: a thread commits its next record only after the previous one was acknowledged,
    // and an acknowledged record lies below every later one.
    let new = &entries[kept.len()..];
    let mut per_thread: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for e in new {
        assert!(
            e.id.run == run && e.id.thread < threads,
            "{what}: record {e:?} was not written by this run"
        );
        per_thread.entry(e.id.thread).or_default().push(e.id.seq);
    }
    for (thread, seqs) in &per_thread {
        let first = seqs[0];
        let contiguous = seqs.iter().enumerate().all(|(i, s)| *s == first + i as u64);
        assert!(contiguous, "{what}: thread {thread} has holes: {seqs:?}");
        if recovery.start_lsn <= expected.end {
            assert_eq!(first, 0, "{what}: thread {thread} lost its first records");
        }
    }

    // Every acknowledged commit (above the released prefix) is there, byte for byte.
    let mut checked = 0;
    if mode.is_durable() {
        let by_end: HashMap<u64, Identity> = entries.iter().map(|e| (e.end, e.id)).collect();
        for &(end, id) in &out.acks {
            if end <= recovery.start_lsn {
                continue; // released by the child
            }
            assert_eq!(
                by_end.get(&end),
                Some(&id),
                "{what}: acknowledged commit {id:?} ending at LSN {end} is lost (recovered up to {})",
                recovery.end_lsn
            );
            checked += 1;
        }
    }

    // Append a few records, reopen, and find the same log plus them.
    let mut released = recovery.start_lsn;
    if mode == CommitMode::PmemLog && recovery.end_lsn - recovery.start_lsn > RING as u64 / 2 {
        let keep_from = recovery.end_lsn - RING as u64 / 4;
        released = entries
            .iter()
            .find(|e| e.lsn >= keep_from)
            .map_or(recovery.end_lsn, |e| e.lsn);
        log.release(released).expect("parent release");
    }
    let mut want: Vec<Entry> = entries
        .iter()
        .copied()
        .filter(|e| e.lsn >= released)
        .collect();
    for seq in 0..3 {
        let id = Identity {
            run,
            thread: PARENT_THREAD,
            seq,
        };
        let bytes = payload(id);
        let end = log.commit(&bytes).expect("parent commit");
        want.push(Entry {
            lsn: end - tailstore_log::record_size(bytes.len()),
            end,
            id,
            hash: hash_of(&bytes),
        });
    }
    drop(log);
    let (log, recovery) = db.open(what);
    let records = read_all(&log, what);
    let again = entries_of(&records, &recovery, u64::MAX, what);
    assert_eq!(
        recovery.start_lsn, released,
        "{what}: second reopen's start"
    );
    assert!(again == want, "{what}: the second reopen differs");
    drop(log);
    let expected = Expected {
        start: recovery.start_lsn,
        end: recovery.end_lsn,
        entries: again,
    };
    (expected, checked)
}

fn kills() -> usize {
    tailstore_crash::kills(DEFAULT_KILLS)
}

fn kill_loop(mode: CommitMode, kills: usize) {
    let seed = std::env::var("TAILSTORE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5157_4b11);
    let mut rng = StdRng::seed_from_u64(seed ^ mode as u64);
    let began = Instant::now();
    let mut db = Db::new(mode);
    let mut expected = Expected::empty();
    let (mut acks, mut early_kills, mut max_records, mut databases) = (0, 0, 0, 1);
    for kill in 0..kills {
        if expected.end - expected.start > LOG_LIMIT {
            db = Db::new(mode);
            expected = Expected::empty();
            databases += 1;
        }
        let run = kill as u64 + 1;
        let threads = rng.gen_range(2..=4u64);
        // Every fifth kill lands early: while the child creates or recovers the log.
        let early = kill % 5 == 4;
        let delay = Duration::from_millis(if early {
            rng.gen_range(0..12)
        } else {
            rng.gen_range(5..=150)
        });
        let what = format!(
            "{mode}, kill {kill} (seed {seed:#x}, {threads} threads, {delay:?}{})",
            if early {
                " after start"
            } else {
                " after READY"
            }
        );
        let out = crash_child(&db, threads, run, delay, early);
        assert!(
            !out.stderr.contains("crash child:") && !out.stderr.contains("panicked"),
            "{what}: the child failed:\n{}",
            out.stderr
        );
        early_kills += usize::from(out.ready.is_none());
        let checked;
        (expected, checked) = verify_and_extend(&db, &expected, &out, run, threads, &what);
        acks += checked;
        max_records = max_records.max(expected.entries.len());
    }
    eprintln!(
        "{mode}: {kills} kills on {databases} database(s) in {:.1?}: {acks} acknowledged \
         commits checked, {early_kills} kills before the log was open, up to {max_records} \
         records recovered",
        began.elapsed()
    );
}

#[test]
fn sigkill_fsync() {
    kill_loop(CommitMode::Fsync, kills());
}

#[test]
fn sigkill_buffer() {
    kill_loop(CommitMode::Buffer, kills());
}

#[test]
fn sigkill_pmem_log() {
    kill_loop(CommitMode::PmemLog, kills());
}

/// `async` promises nothing about acknowledged commits, but what it recovers must still be
/// whole records of the child's, in order, and stable across reopens.
#[test]
fn sigkill_async() {
    kill_loop(CommitMode::Async, (kills() / 5).max(1));
}
