//! Power cuts while several clients write at once, on the simulated storage: every write a
//! client had been answered for when the power went is there after the restart, each
//! client's writes survive as a prefix of the order it sent them in, and an EXEC block
//! survives whole or not at all.
//!
//! One connection's writes never wait behind another thread's record, so a test with one
//! client (the differential test's power cuts) cannot tell a reply sent before its record
//! was durable from one sent after. Here four clients write, a fifth asks for checkpoints,
//! and syncs take 300 µs (`SimStorage::set_sync_latency`), so a log lags its commits as on a
//! disk. The cuts are taken while they run (`SimStorage::power_cut`), each after reading how
//! many writes each client had been answered for.
//!
//! `TAILSTORE_CUT_RUNS=N` runs each mode N times (default: 2 for `fsync`, 1 for the others).
//!
//! `planted_early_reply_is_caught` plants in its server the bug of answers sent before
//! their commits are durable (`Plant::EarlyReply`, in builds with debug assertions): its
//! `fsync` runs must fail.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use support::{Options, TestServer};
use tailstore_kv::server::Plant;
use tailstore_log::CommitMode;
use tailstore_media::sim::SimStorage;

const CLIENTS: usize = 4;
/// Power cuts taken during one run.
const CUTS: usize = 6;
const SYNC_LATENCY: Duration = Duration::from_micros(300);

/// What a client's `i`-th write does: the writes cycle through these kinds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// `SET s:{c}:{i} v{i}`.
    Set,
    /// `INCR n:{c}`.
    Incr,
    /// `RPUSH l:{c} {i}`.
    Push,
    /// `HSET h:{c} f{i} {i}`.
    Field,
    /// `MULTI; SET m:{c}:{i} {i}; RPUSH l:{c} {i}; EXEC`: both or neither.
    Block,
}

const KINDS: [Kind; 5] = [Kind::Set, Kind::Incr, Kind::Push, Kind::Field, Kind::Block];

fn kind(i: usize) -> Kind {
    KINDS[i % KINDS.len()]
}

/// Whether write `i` appends `i` to the client's list.
fn pushes(i: usize) -> bool {
    matches!(kind(i), Kind::Push | Kind::Block)
}

fn write(con: &mut redis::Connection, c: usize, i: usize) -> redis::RedisResult<()> {
    let mut pipe = redis::pipe();
    match kind(i) {
        Kind::Set => pipe
            .cmd("SET")
            .arg(format!("s:{c}:{i}"))
            .arg(format!("v{i}")),
        Kind::Incr => pipe.cmd("INCR").arg(format!("n:{c}")),
        Kind::Push => pipe.cmd("RPUSH").arg(format!("l:{c}")).arg(i),
        Kind::Field => pipe
            .cmd("HSET")
            .arg(format!("h:{c}"))
            .arg(format!("f{i}"))
            .arg(i),
        Kind::Block => pipe
            .atomic()
            .cmd("SET")
            .arg(format!("m:{c}:{i}"))
            .arg(i)
            .cmd("RPUSH")
            .arg(format!("l:{c}"))
            .arg(i),
    };
    pipe.query::<redis::Value>(con).map(|_| ())
}

/// What a restarted server holds of client `c`'s writes.
struct Survivors {
    sets: BTreeSet<usize>,
    count: usize,
    list: Vec<usize>,
    fields: BTreeSet<usize>,
    blocks: BTreeSet<usize>,
}

impl Survivors {
    fn read(con: &mut redis::Connection, c: usize) -> Survivors {
        let numbered = |keys: Vec<String>, prefix: &str| -> BTreeSet<usize> {
            keys.iter()
                .map(|k| k[prefix.len()..].parse().expect("a write's number"))
                .collect()
        };
        let (sets, blocks) = (format!("s:{c}:"), format!("m:{c}:"));
        let set_keys: Vec<String> = support::q(con, &["KEYS", &format!("{sets}*")]);
        let block_keys: Vec<String> = support::q(con, &["KEYS", &format!("{blocks}*")]);
        let count: Option<usize> = support::q(con, &["GET", &format!("n:{c}")]);
        let list: Vec<usize> = support::q(con, &["LRANGE", &format!("l:{c}"), "0", "-1"]);
        let fields: Vec<String> = support::q(con, &["HKEYS", &format!("h:{c}")]);
        Survivors {
            sets: numbered(set_keys, &sets),
            count: count.unwrap_or(0),
            list,
            fields: numbered(fields, "f"),
            blocks: numbered(block_keys, &blocks),
        }
    }

    /// The highest-numbered write seen, if any (an INCR shows only as a count).
    fn latest(&self) -> Option<usize> {
        [
            self.sets.last(),
            self.list.last(),
            self.fields.last(),
            self.blocks.last(),
        ]
        .into_iter()
        .flatten()
        .max()
        .copied()
    }

    /// Checks that these are exactly writes `0..n` for some `n` no lower than `answered` (the
    /// writes answered before the cut, and every write before one that survived: a client
    /// sends its next write only once the last one is answered). Returns `n`.
    fn check_prefix(&self, answered: usize, sent: usize, what: &str) -> usize {
        let n = answered.max(self.latest().map_or(0, |i| i + 1));
        assert!(n <= sent, "{what}: write {n} was never sent ({sent} were)");
        let below = |k: Kind| (0..n).filter(|&i| kind(i) == k).collect::<BTreeSet<_>>();
        let expected_list: Vec<usize> = (0..n).filter(|&i| pushes(i)).collect();
        let incrs = below(Kind::Incr).len();
        assert_eq!(self.sets, below(Kind::Set), "{what}: SETs below {n}");
        assert_eq!(self.fields, below(Kind::Field), "{what}: HSETs below {n}");
        assert_eq!(
            self.blocks,
            below(Kind::Block),
            "{what}: EXEC blocks below {n}"
        );
        assert_eq!(self.list, expected_list, "{what}: RPUSHes below {n}");
        // The INCR at `n` (if that is one) may have survived unanswered.
        let unanswered = usize::from(n < sent && kind(n) == Kind::Incr);
        assert!(
            (incrs..=incrs + unanswered).contains(&self.count),
            "{what}: the counter is {}, with {incrs} INCRs below {n}",
            self.count
        );
        n
    }
}

/// Four clients write and a fifth checkpoints while the power is cut `CUTS` times; each
/// cut's image is then restarted and checked. Returns the writes answered in all. `plants`:
/// the bugs planted in the server under the cuts (not in the restarted ones).
fn writes_survive_concurrent_power_cuts(mode: CommitMode, seed: u64, plants: &[Plant]) -> usize {
    let began = std::time::Instant::now();
    let storage = SimStorage::new();
    storage.set_sync_latency(SYNC_LATENCY);
    let server = TestServer::on_sim(
        Options {
            mode,
            plants: plants.to_vec(),
            ..Options::default()
        },
        &storage,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let answered: Arc<Vec<AtomicUsize>> = Arc::new((0..CLIENTS).map(|_| 0.into()).collect());
    let writers: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (mut con, stop, answered) = (server.client(), stop.clone(), answered.clone());
            thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    write(&mut con, c, i).unwrap_or_else(|e| panic!("client {c}, write {i}: {e}"));
                    i += 1;
                    answered[c].store(i, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let checkpoints = {
        let (mut con, stop) = (server.client(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _: () = support::q(&mut con, &["SAVE"]);
                thread::sleep(Duration::from_millis(15));
            }
        })
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cuts = Vec::new();
    for _ in 0..CUTS {
        thread::sleep(Duration::from_millis(rng.gen_range(5..60)));
        let before: Vec<usize> = answered.iter().map(|a| a.load(Ordering::SeqCst)).collect();
        cuts.push((before, storage.power_cut(rng.gen())));
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().expect("a writer");
    }
    checkpoints.join().expect("the checkpoints");
    // A writer stops only once its last write is answered, so every write an image may
    // hold, the one in flight at its cut included, is counted here.
    let sent: Vec<usize> = answered.iter().map(|a| a.load(Ordering::SeqCst)).collect();
    drop(server);
    for (cut, (before, image)) in cuts.iter().enumerate() {
        let restarted = TestServer::on_sim(
            Options {
                mode,
                ..Options::default()
            },
            image,
        );
        let mut con = restarted.client();
        for c in 0..CLIENTS {
            let what = format!(
                "{mode}, seed {seed}, cut {cut}, client {c} ({} answered before the cut)",
                before[c]
            );
            Survivors::read(&mut con, c).check_prefix(before[c], sent[c], &what);
        }
        let _: () = support::q(&mut con, &["SET", "after", "the restart"]);
    }
    let total: usize = sent.iter().sum();
    eprintln!(
        "{mode}, seed {seed}: {CUTS} cuts among {total} answered writes, checked in {:.1?}",
        began.elapsed()
    );
    assert!(
        total >= CLIENTS * 10,
        "{mode}: only {total} writes answered: the cuts tested little"
    );
    total
}

/// Runs per test: `TAILSTORE_CUT_RUNS`, else `default` (each run takes six cuts).
fn runs(default: u64) -> u64 {
    std::env::var("TAILSTORE_CUT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn fsync_writes_survive_concurrent_power_cuts() {
    for seed in 0..runs(2) {
        writes_survive_concurrent_power_cuts(CommitMode::Fsync, seed, &[]);
    }
}

#[test]
fn buffer_writes_survive_concurrent_power_cuts() {
    for seed in 0..runs(1) {
        writes_survive_concurrent_power_cuts(CommitMode::Buffer, seed, &[]);
    }
}

#[test]
fn pmem_log_writes_survive_concurrent_power_cuts() {
    for seed in 0..runs(1) {
        writes_survive_concurrent_power_cuts(CommitMode::PmemLog, seed, &[]);
    }
}

/// With replies sent before durability, an `fsync` cut loses answered writes: the syncs
/// take 300 µs, and a cut keeps only some of what was written and not synced.
#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
#[should_panic(expected = "below")]
fn planted_early_reply_is_caught() {
    for seed in 0..3 {
        writes_survive_concurrent_power_cuts(CommitMode::Fsync, seed, &[Plant::EarlyReply]);
    }
}
