//! Point reads and scans beside writers that split and merge, logged (as the engine's, which stamp
//! their pages before they let go of the tree) or not, with every thread pausing at random
//! at the named points of `crate::interleave`: inside a walk, before a read validates,
//! between a child's split and its link into the parent, between a merge's decision and
//! its latches, before a writer's latch, between a change and its stamp, and in the pool's
//! lookups. Without the pauses, such a test meets those windows only now and then.

use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tailstore_history::pauses;
use tailstore_media::sim::SimStorage;
use tailstore_media::{OpenMode, Storage};

use super::redo::Redo;
use super::{BTree, ScanDirection};
use crate::buffer_pool::BufferPool;

const KEYS: u32 = 3000;

fn key(k: u32) -> Vec<u8> {
    let mut key = k.to_be_bytes().to_vec(); // big-endian: memcmp order = numeric order
    key.resize(400, b'k'); // long keys: ~19 per node, a tree of height 3 or 4 whose inner nodes split
    key
}

fn value(k: u32) -> Vec<u8> {
    k.to_le_bytes().repeat(20)
}

/// Keys always present; the others come and go.
fn stable(k: u32) -> bool {
    k.is_multiple_of(3)
}

/// One change through a writer. Logged, as the engine makes it: every touched page stamped
/// with the next LSN before the writer lets go of the tree (with a pause point in between,
/// where the engine appends the record); else without a record, nothing stamped. Returns
/// whether the key was there.
fn change(
    pool: &BufferPool,
    tree: &BTree,
    lsn: &AtomicU64,
    k: u32,
    put: bool,
    logged: bool,
) -> bool {
    // Half of them find their leaf before the latch, as the engine's commits do.
    let writer = if k.is_multiple_of(2) {
        tree.writer_for(&key(k))
    } else {
        tree.writer()
    }
    .expect("writer");
    let mut redo = if logged {
        Redo::new()
    } else {
        Redo::disabled()
    };
    let found = if put {
        writer.insert(&key(k), &value(k), &mut redo).is_ok()
    } else {
        writer.delete(&key(k), &mut redo).expect("delete")
    };
    pauses::reached("test: changed, not yet stamped");
    let at = lsn.fetch_add(1, Ordering::Relaxed);
    for &id in redo.touched() {
        pool.stamp(id, at).expect("stamp");
    }
    found
}

/// How a run is set up.
#[derive(Clone, Copy)]
struct Run {
    /// Picks the schedule of pauses and the orders of the changes.
    seed: u64,
    /// The pool's frames: enough for the whole tree, or so few that lookups keep evicting.
    frames: usize,
    /// How many times each writer puts its keys in and takes them out again.
    rounds: usize,
    /// The points where threads pause at random.
    pause_at: fn(&'static str) -> bool,
    /// Whether the writers log their changes (see [`change`]).
    logged: bool,
}

/// Reads runs of one to three keys near the key a writer changed last (where its splits and
/// merges move keys), checking every answer.
fn reader(tree: &BTree, run: Run, seed: u64, recent: &AtomicU32, done: &AtomicBool) {
    pauses::chaos_where(seed, run.pause_at);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut reads = 0u64;
    while !done.load(Ordering::Relaxed) || reads < 1000 {
        // Around it, or as far as an inner node's keys reach (an inner node that split moves
        // the keys of half its subtree).
        let reach = if rng.gen_bool(0.5) { 40 } else { 400 };
        let near = recent.load(Ordering::Relaxed).saturating_sub(reach);
        if rng.gen_bool(0.5) {
            // A scan across several leaves (~19 keys a leaf).
            let first = (near + rng.gen_range(0..2 * reach)).min(KEYS - 1);
            let last = (first + rng.gen_range(1..120)).min(KEYS);
            scan_and_check(tree, first..last, &mut rng);
            reads += 1;
            continue;
        }
        let first = (near + rng.gen_range(0..2 * reach)).min(KEYS - 3);
        let run: Vec<u32> = (first..first + rng.gen_range(1..=3)).collect();
        let keys: Vec<Vec<u8>> = run.iter().map(|&k| key(k)).collect();
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let mut found = vec![None; run.len()];
        tree.get_many_with(&keys, |i, v| found[i] = v.map(<[u8]>::to_vec))
            .expect("get many");
        for (&k, found) in run.iter().zip(found) {
            if stable(k) {
                assert_eq!(found, Some(value(k)), "key {k}, always present");
            } else if let Some(found) = found {
                assert_eq!(found, value(k), "key {k}");
            }
        }
        reads += 1;
    }
}

/// Scans keys `wanted` (in either direction, now and then with a limit) and checks the
/// answer: keys in order, inside the range, each with its value, and every stable key of the
/// part of the range the scan covered (all of it, or up to its last key if the limit cut it).
fn scan_and_check(tree: &BTree, wanted: std::ops::Range<u32>, rng: &mut StdRng) {
    let descending = rng.gen_bool(0.5);
    let direction = if descending {
        ScanDirection::Descending
    } else {
        ScanDirection::Ascending
    };
    let limit = if rng.gen_bool(0.3) {
        rng.gen_range(1..40)
    } else {
        usize::MAX
    };
    let (lower, upper) = (key(wanted.start), key(wanted.end));
    let mut got: Vec<u32> = Vec::new();
    tree.scan(
        Bound::Included(&lower),
        Bound::Excluded(&upper),
        direction,
        limit,
        |k, v| {
            let k = u32::from_be_bytes([k[0], k[1], k[2], k[3]]);
            assert_eq!(v, value(k), "key {k} scanned");
            got.push(k);
            true
        },
    )
    .expect("scan");
    let in_order = got.windows(2).all(|pair| (pair[0] < pair[1]) != descending);
    assert!(in_order, "scan of {wanted:?} out of order: {got:?}");
    assert!(
        got.iter().all(|k| wanted.contains(k)),
        "scan of {wanted:?} left it: {got:?}"
    );
    let covered = match (got.len() == limit, got.last()) {
        (true, Some(&last)) if descending => last..wanted.end,
        (true, Some(&last)) => wanted.start..last + 1,
        _ => wanted.clone(),
    };
    for k in covered.filter(|&k| stable(k)) {
        assert!(got.contains(&k), "key {k}, always present, missing from a scan of {wanted:?} ({direction:?}, limit {limit}): {got:?}");
    }
}

fn outside_the_pool(point: &'static str) -> bool {
    !point.starts_with("pool:")
}

/// The tree's windows: pauses in the tree's code, a pool that holds the whole tree. Point
/// reads route through per-thread copies of inner nodes validated by frame versions, and
/// beside a logged writer accept a leaf that carries no unfinished change (see "Reads beside
/// a writer"): a stale copy used as current, or an unfinished change trusted, sends a read to
/// a leaf that does not hold its key.
#[test]
fn point_reads_stay_exact_beside_logged_writers_that_pause_mid_change() {
    for seed in [1, 1000] {
        readers_beside_writers(Run {
            seed,
            frames: 256,
            rounds: 4,
            pause_at: outside_the_pool,
            logged: true,
        });
    }
}

/// Writers without log records: reads then accept a leaf only by the tree's version.
#[test]
fn point_reads_stay_exact_beside_unlogged_writers_that_pause_mid_change() {
    readers_beside_writers(Run {
        seed: 3,
        frames: 256,
        rounds: 2,
        pause_at: outside_the_pool,
        logged: false,
    });
}

/// The pool's windows as well: a pool of a few dozen frames, so that lookups (pausing
/// between finding a frame and latching it) keep meeting evictions (pausing between
/// claiming a victim and mapping it).
#[test]
fn point_reads_stay_exact_beside_writers_in_a_pool_that_keeps_evicting() {
    readers_beside_writers(Run {
        seed: 7,
        frames: 32,
        rounds: 1,
        pause_at: pauses::everywhere,
        logged: true,
    });
}

/// Two writers churn the keys that are not stable in and out, while two readers check their
/// answers.
fn readers_beside_writers(run: Run) {
    let storage = SimStorage::new();
    let file = storage
        .open_file(Path::new("/db/data"), OpenMode::CreateIfMissing)
        .expect("open");
    let pool = Arc::new(BufferPool::new(file, run.frames, Box::new(|_| Ok(()))).expect("pool"));
    let tree = BTree::create(pool.clone()).expect("create");
    let lsn = AtomicU64::new(1);
    for k in (0..KEYS).filter(|&k| stable(k)) {
        assert!(change(&pool, &tree, &lsn, k, true, run.logged));
    }
    let done = AtomicBool::new(false);
    let recent = AtomicU32::new(0);
    std::thread::scope(|s| {
        let writers: Vec<_> = (1..3u32)
            .map(|w| {
                let (pool, tree, lsn, recent) = (&pool, &tree, &lsn, &recent);
                s.spawn(move || {
                    let seed = run.seed + u64::from(w);
                    pauses::chaos_where(seed, run.pause_at);
                    let mut rng = StdRng::seed_from_u64(seed);
                    let mut churn: Vec<u32> = (0..KEYS).filter(|k| k % 3 == w).collect();
                    for _ in 0..run.rounds {
                        for put in [true, false] {
                            churn.shuffle(&mut rng);
                            for &k in &churn {
                                recent.store(k, Ordering::Relaxed);
                                let found = change(pool, tree, lsn, k, put, run.logged);
                                assert!(found, "put {put} of {k}");
                            }
                        }
                    }
                })
            })
            .collect();
        for r in 0..2u64 {
            let (tree, recent, done) = (&tree, &recent, &done);
            s.spawn(move || reader(tree, run, run.seed + 100 + r, recent, done));
        }
        for writer in writers {
            writer.join().expect("writer");
        }
        done.store(true, Ordering::Relaxed);
    });
    let shape = tree.check().expect("check");
    assert_eq!(shape.entries, KEYS.div_ceil(3) as usize);
}
