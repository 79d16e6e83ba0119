//! B+tree: model-based property tests against `BTreeMap`, a deep tree, errors, persistence.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tailstore_media::sim::SimStorage;
use tailstore_media::{OpenMode, Storage};
use tailstore_storage::btree::MAX_ENTRY;
use tailstore_storage::page::HEADER_SIZE;
use tailstore_storage::{
    BTree, BufferPool, Page, PageId, PageKind, ReadContention, Redo, ScanDirection, StorageError,
    TreeWriter, PAGE_SIZE,
};

const DATA: &str = "/db/data";

/// Key and value sizes here were chosen for 8 KiB pages and are multiplied by this, so that
/// the trees keep the shapes (heights, entries per node) the tests expect at any page size.
const SCALE: usize = PAGE_SIZE / 8192;

fn pool(storage: &SimStorage, capacity: usize) -> Arc<BufferPool> {
    let file = storage
        .open_file(Path::new(DATA), OpenMode::CreateIfMissing)
        .expect("open");
    Arc::new(BufferPool::new(file, capacity, Box::new(|_| Ok(()))).expect("pool"))
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn model_range(
    model: &Model,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    direction: ScanDirection,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let lower = lower.map(|k| k.to_vec());
    let upper = upper.map(|k| k.to_vec());
    // BTreeMap::range panics on an inverted range; the tree returns nothing.
    let inverted = match (&lower, &upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) => {
            l >= u
        }
        _ => false,
    };
    if inverted {
        return Vec::new();
    }
    let range = model
        .range((lower, upper))
        .map(|(k, v)| (k.clone(), v.clone()));
    match direction {
        ScanDirection::Ascending => range.take(limit).collect(),
        ScanDirection::Descending => range.rev().take(limit).collect(),
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, usize),
    Update(Vec<u8>, usize),
    Delete(Vec<u8>),
    Get(Vec<u8>),
    GetMany(Vec<Vec<u8>>),
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>, bool, usize),
}

/// A short prefix from a small alphabet (so that operations collide), padded to one of a few
/// lengths up to 1200 bytes: long keys make long separators, so inner nodes split too and
/// trees reach height 3 within a few hundred operations.
fn key() -> impl Strategy<Value = Vec<u8>> + Clone {
    padded_key(vec![0, 1, 40, 400, 1200], 0u8..2)
}

/// A prefix of up to four bytes from `0..4`, then one of `pads` bytes of `fill`.
fn padded_key(
    pads: Vec<usize>,
    fill: impl Strategy<Value = u8> + Clone,
) -> impl Strategy<Value = Vec<u8>> + Clone {
    (
        prop::collection::vec(0u8..4, 0..5),
        prop::sample::select(pads),
        fill,
    )
        .prop_map(|(mut key, pad, fill)| {
            key.resize(key.len() + pad, fill);
            key
        })
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        Just(Bound::Unbounded),
        key().prop_map(Bound::Included),
        key().prop_map(Bound::Excluded),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    // Values up to 900 bytes make leaves split after a handful of entries.
    op_of(key(), 0usize..900)
}

/// Keys of up to nearly the largest entry (separators that fill a third of an inner node)
/// and values that, with them, reach `MAX_ENTRY` (`value_for` trims them): nodes of three
/// entries, the fewest a node must hold, which split on the fourth.
fn large_op() -> impl Strategy<Value = Op> {
    let key = padded_key(vec![0, 40, MAX_ENTRY / 2, MAX_ENTRY - 8], Just(0xee));
    op_of(key, MAX_ENTRY / 4..=MAX_ENTRY)
}

fn op_of(
    key: impl Strategy<Value = Vec<u8>> + Clone,
    len: impl Strategy<Value = usize> + Clone,
) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key.clone(), len.clone()).prop_map(|(k, n)| Op::Insert(k, n)),
        2 => (key.clone(), len).prop_map(|(k, n)| Op::Update(k, n)),
        4 => key.clone().prop_map(Op::Delete),
        2 => key.clone().prop_map(Op::Get),
        2 => prop::collection::vec(key, 0..6).prop_map(|mut keys| {
            keys.sort(); // mostly ascending, as the parts of a value are; not always
            let third = keys.len() / 3;
            keys.rotate_left(third);
            Op::GetMany(keys)
        }),
        2 => (bound(), bound(), any::<bool>(), 0usize..50)
            .prop_map(|(l, u, desc, limit)| Op::Range(l, u, desc, limit)),
    ]
}

fn value_for(key: &[u8], len: usize, salt: usize) -> Vec<u8> {
    let len = len.min(MAX_ENTRY - key.len());
    (0..len).map(|i| (i + salt + key.len()) as u8).collect()
}

fn as_bound(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    bound.as_ref().map(|k| k.as_slice())
}

/// Runs `ops` against a tree and a model. Changes and point reads go through one
/// [`tailstore_storage::btree::TreeWriter`] for up to `per_writer` operations at a time (a range scan ends
/// the writer's turn: it needs the latch the writer holds), so a writer's later changes start
/// at the leaf an earlier one reached.
fn run_against_model(ops: &[Op], capacity: usize, per_writer: usize) -> Result<(), TestCaseError> {
    let storage = SimStorage::new();
    let pool = pool(&storage, capacity);
    let tree = BTree::create(Arc::clone(&pool)).expect("create");
    let mut model = Model::new();
    let mut redo = Redo::disabled();
    let mut writer = None;
    let mut turn = 0;
    for (step, op) in ops.iter().enumerate() {
        let without_writer = matches!(op, Op::Range(..) | Op::GetMany(..));
        if without_writer || turn == per_writer {
            writer = None;
            turn = 0;
        }
        if !without_writer && writer.is_none() {
            // Every other writer finds its first key's leaf before it takes the latch.
            writer = Some(
                match op {
                    Op::Insert(key, _) | Op::Update(key, _) if step % 2 == 0 => {
                        tree.writer_for(key)
                    }
                    _ => tree.writer(),
                }
                .expect("writer"),
            );
        }
        turn += 1;
        match (op, &writer) {
            (Op::Insert(key, len), Some(w)) => {
                let value = value_for(key, *len, step);
                let result = w.insert(key, &value, &mut redo);
                if model.contains_key(key) {
                    prop_assert!(matches!(result, Err(StorageError::DuplicateKey)));
                } else {
                    prop_assert!(result.is_ok(), "insert: {result:?}");
                    model.insert(key.clone(), value);
                }
            }
            (Op::Update(key, len), Some(w)) => {
                let value = value_for(key, *len, step);
                let result = w.update(key, &value, &mut redo);
                if let Some(slot) = model.get_mut(key) {
                    prop_assert!(result.is_ok(), "update: {result:?}");
                    *slot = value;
                } else {
                    prop_assert!(matches!(result, Err(StorageError::KeyNotFound)));
                }
            }
            (Op::Delete(key), Some(w)) => {
                let found = w.delete(key, &mut redo).expect("delete");
                prop_assert_eq!(found, model.remove(key).is_some());
            }
            (Op::Get(key), Some(w)) => {
                prop_assert_eq!(w.get(key).expect("get"), model.get(key).cloned());
            }
            (Op::GetMany(keys), None) => {
                let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let mut got = vec![None; keys.len()];
                let stamps = tree
                    .get_many_with(&keys, |i, value| got[i] = Some(value.map(<[u8]>::to_vec)))
                    .expect("get many");
                for (i, key) in keys.iter().enumerate() {
                    prop_assert_eq!(&got[i], &Some(model.get(*key).cloned()), "key {}", i);
                    // The stamp names the leaf a single read finds the key in (or would).
                    let ((), alone) = tree.get_with(key, |_| ()).expect("get");
                    prop_assert_eq!((stamps[i].leaf, stamps[i].lsn), (alone.leaf, alone.lsn));
                }
            }
            (Op::Range(lower, upper, descending, limit), None) => {
                let direction = if *descending {
                    ScanDirection::Descending
                } else {
                    ScanDirection::Ascending
                };
                let (lower, upper) = (as_bound(lower), as_bound(upper));
                let got = tree.range(lower, upper, direction, *limit).expect("range");
                let want = model_range(&model, lower, upper, direction, *limit);
                prop_assert_eq!(got, want);
            }
            (op, _) => unreachable!("{op:?} without its writer state"),
        }
    }
    drop(writer);
    let shape = tree.check().expect("invariants hold");
    prop_assert_eq!(shape.entries, model.len());
    let all = tree
        .range(
            Bound::Unbounded,
            Bound::Unbounded,
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("full scan");
    let want: Vec<_> = model.into_iter().collect();
    prop_assert_eq!(all, want);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random operation sequences agree with `BTreeMap`, in a pool of 4–10 frames (so pages
    /// are evicted and read back all the time; the tree pins at most 3 pages at once).
    #[test]
    fn btree_matches_a_btreemap(
        ops in prop::collection::vec(op(), 1..500),
        capacity in 4usize..10,
    ) {
        run_against_model(&ops, capacity, 1)?;
    }

    /// The same with entries of up to the largest size, so that nodes hold three entries
    /// and split on the fourth (the fewest `MAX_ENTRY` allows; see `BTree::split`).
    #[test]
    fn btree_matches_a_btreemap_with_entries_up_to_the_largest(
        ops in prop::collection::vec(large_op(), 1..300),
        capacity in 4usize..10,
        per_writer in 1usize..20,
    ) {
        run_against_model(&ops, capacity, per_writer)?;
    }

    /// The same with one writer for up to 40 operations: a change whose key lies in the
    /// range of the leaf the writer's last change reached starts there (and must still split,
    /// fail with the right error, or go through the root when it does not fit).
    #[test]
    fn btree_matches_a_btreemap_through_long_lived_writers(
        ops in prop::collection::vec(op(), 1..500),
        capacity in 4usize..10,
        per_writer in 2usize..40,
    ) {
        run_against_model(&ops, capacity, per_writer)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Bulk load a few hundred long keys (height 3 with long separators), then drain them in a
    /// random order, checking the invariants and the contents as inner nodes merge.
    #[test]
    fn btree_bulk_load_then_drain(
        keys in prop::collection::btree_set(
            (prop::collection::vec(any::<u8>(), 1..8), 0usize..1500 * SCALE),
            150..400,
        ),
        seed in any::<u64>(),
        capacity in 4usize..12,
    ) {
        let storage = SimStorage::new();
        let tree = BTree::create(pool(&storage, capacity)).expect("create");
        let mut model = Model::new();
        for (prefix, pad) in keys {
            let mut key = prefix;
            key.resize(key.len() + pad, 0xee);
            if model.contains_key(&key) {
                continue;
            }
            let value = value_for(&key, 300 * SCALE, key.len());
            tree.insert(&key, &value).expect("insert");
            model.insert(key, value);
        }
        let shape = tree.check().expect("check");
        prop_assert!(shape.height >= 3, "{:?}", shape);
        let mut order: Vec<Vec<u8>> = model.keys().cloned().collect();
        order.shuffle(&mut StdRng::seed_from_u64(seed));
        for (i, key) in order.iter().enumerate() {
            prop_assert!(tree.delete(key).expect("delete"));
            model.remove(key);
            if i % 25 == 0 {
                prop_assert_eq!(tree.check().expect("check").entries, model.len());
                let got = tree
                    .range(Bound::Unbounded, Bound::Unbounded, ScanDirection::Descending, 7)
                    .expect("range");
                let want = model_range(
                    &model, Bound::Unbounded, Bound::Unbounded, ScanDirection::Descending, 7,
                );
                prop_assert_eq!(got, want);
            }
        }
        let empty = tree.check().expect("check");
        prop_assert_eq!((empty.height, empty.leaves, empty.entries), (1, 1, 0));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// `keys_at` finds the keys at random positions of random ranges of a tree of many
    /// leaves, as the range's keys in order would have them; positions past the range's end
    /// find none. (Its pairs passed over between positions cross leaves.)
    #[test]
    fn keys_at_positions_are_the_ranges_keys_at_them(
        keys in prop::collection::btree_set(key(), 50..600),
        lower in bound(),
        upper in bound(),
        picks in prop::collection::btree_set(0usize..700, 0..40),
    ) {
        let (_storage, tree, model) = tree_of(keys);
        prop_assert!(tree.check().expect("check").leaves > 1);
        let (lower, upper) = (as_bound(&lower), as_bound(&upper));
        let in_range: Vec<Vec<u8>> =
            model_range(&model, lower, upper, ScanDirection::Ascending, usize::MAX)
                .into_iter()
                .map(|(key, _)| key)
                .collect();
        let positions: Vec<usize> = picks.into_iter().collect();
        let want: Vec<Vec<u8>> = positions
            .iter()
            .filter_map(|&at| in_range.get(at).cloned())
            .collect();
        prop_assert_eq!(tree.keys_at(lower, upper, &positions).expect("keys_at"), want);
    }

    /// `walk_stamped` passes over the first `skip` pairs of a random range in a random
    /// direction, visits the `limit` after them, and stamps each leaf it read once, in
    /// order; `skip` of `usize::MAX` counts the range.
    #[test]
    fn walks_pass_visit_and_stamp_the_ranges_pairs(
        keys in prop::collection::btree_set(key(), 50..600),
        lower in bound(),
        upper in bound(),
        descending in any::<bool>(),
        skip in prop_oneof![0usize..700, Just(usize::MAX)],
        limit in 1usize..60,
    ) {
        let (_storage, tree, model) = tree_of(keys);
        let leaves = tree.check().expect("check").leaves;
        prop_assert!(leaves > 1);
        let (lower, upper) = (as_bound(&lower), as_bound(&upper));
        let direction = if descending {
            ScanDirection::Descending
        } else {
            ScanDirection::Ascending
        };
        let in_range = model_range(&model, lower, upper, direction, usize::MAX);
        let mut stamps = Vec::new();
        let mut visited = Vec::new();
        let walked = tree
            .walk_stamped(lower, upper, direction, skip, limit, &mut stamps, |key, value| {
                visited.push((key.to_vec(), value.to_vec()));
                true
            })
            .expect("walk");
        let want: Vec<_> = in_range.iter().skip(skip).take(limit).cloned().collect();
        prop_assert_eq!(walked.passed, skip.min(in_range.len()));
        prop_assert_eq!(walked.visited, want.len());
        prop_assert_eq!(visited, want);
        prop_assert!(!stamps.is_empty() && stamps.len() <= leaves, "{} stamps", stamps.len());
        let mut pages: Vec<_> = stamps.iter().map(|stamp| stamp.leaf).collect();
        pages.sort();
        pages.dedup();
        prop_assert_eq!(pages.len(), stamps.len(), "a leaf stamped twice");
        for stamp in stamps {
            prop_assert!(tree.leaf_unchanged(stamp).expect("stamp"));
        }
    }
}

/// `position_estimate` rises with the key and stays near the key's true share of the keys
/// before it, whether the tree grew in order (full left leaves) or at random (leaves two
/// thirds full on average): what a rank relies on to count from the nearer end.
#[test]
fn position_estimates_rise_with_the_key_and_stay_near_its_share() {
    for shuffled in [false, true] {
        let storage = SimStorage::new();
        let tree = BTree::create(pool(&storage, 4096)).expect("create");
        let n = 30_000u32;
        let mut order: Vec<u32> = (0..n).collect();
        if shuffled {
            order.shuffle(&mut StdRng::seed_from_u64(3));
        }
        for k in order {
            tree.insert(&k.to_be_bytes(), &vec![0u8; 500 * SCALE])
                .expect("insert");
        }
        assert!(
            tree.check().expect("check").height >= 3,
            "the test wants inner levels"
        );
        let mut last = 0.0;
        for k in (0..n).step_by(97) {
            let estimate = tree.position_estimate(&k.to_be_bytes()).expect("estimate");
            let share = f64::from(k) / f64::from(n);
            assert!(
                estimate >= last,
                "estimate fell at key {k}: {estimate} after {last}"
            );
            assert!(
                (estimate - share).abs() < 0.08,
                "key {k} (share {share:.3}) estimated at {estimate:.3} (shuffled: {shuffled})"
            );
            last = estimate;
        }
        let end = tree.position_estimate(&[0xff; 5]).expect("estimate");
        assert!(end > 0.99 && end <= 1.0, "past the last key: {end}");
        assert_eq!(tree.position_estimate(&[]).expect("estimate"), 0.0);
    }
}

/// A tree of `keys` (each with a value of about 200 bytes, so that a few hundred take many
/// leaves) in a 16-page pool, its model, and the storage it is on.
fn tree_of(keys: BTreeSet<Vec<u8>>) -> (SimStorage, BTree, Model) {
    let storage = SimStorage::new();
    let tree = BTree::create(pool(&storage, 16)).expect("create");
    let mut model = Model::new();
    for key in keys {
        let value = value_for(&key, 200, key.len());
        tree.insert(&key, &value).expect("insert");
        model.insert(key, value);
    }
    (storage, tree, model)
}

/// A writer makes memory ready for the pool's fresh frames before it takes the tree's latch
/// (`BufferPool::prepare_fresh_frames`), and its splits' new pages take it.
#[test]
fn writers_ready_fresh_memory_before_the_latch_and_new_pages_take_it() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 256);
    let tree = BTree::create(Arc::clone(&pool)).expect("create");
    let before = pool.stats();
    let writer = tree.writer().expect("writer");
    let ready = pool.stats();
    assert!(
        ready.fresh_pages_ready > before.fresh_pages_ready,
        "no memory made ready before the latch: {ready:?}"
    );
    let value = vec![7u8; 1000 * SCALE];
    let mut redo = Redo::disabled();
    for i in 0..40u32 {
        writer
            .insert(format!("key{i:04}").as_bytes(), &value, &mut redo)
            .expect("insert");
    }
    let after = pool.stats();
    let new_frames = ready.frames_without_memory - after.frames_without_memory;
    assert!(new_frames > 1, "the inserts split no page: {after:?}");
    assert_eq!(
        ready.fresh_pages_ready - after.fresh_pages_ready,
        new_frames,
        "every new page took ready memory"
    );
}

#[test]
fn concurrent_writers_and_scanners_share_one_tree() {
    let storage = SimStorage::new();
    let tree = BTree::create(pool(&storage, 16)).expect("create");
    std::thread::scope(|s| {
        for t in 0..3u32 {
            let tree = &tree;
            s.spawn(move || {
                for i in 0..400u32 {
                    let key = (i * 3 + t).to_be_bytes();
                    tree.insert(&key, &[t as u8; 150]).expect("insert");
                    if i % 4 == 0 {
                        assert!(tree.delete(&key).expect("delete"));
                    }
                }
            });
        }
        let tree = &tree;
        s.spawn(move || {
            for _ in 0..100 {
                let mut last: Option<Vec<u8>> = None;
                tree.scan(
                    Bound::Unbounded,
                    Bound::Unbounded,
                    ScanDirection::Ascending,
                    200,
                    |k, _| {
                        assert!(last.as_deref() < Some(k), "scan out of order");
                        last = Some(k.to_vec());
                        true
                    },
                )
                .expect("scan");
            }
        });
    });
    let shape = tree.check().expect("check");
    assert_eq!(shape.entries, 3 * 300);
}

/// One change through a writer of `tree`, as the engine makes its changes: with `redo`
/// enabled, every page the change touched is stamped with the next LSN of `lsn` before the
/// writer lets go of the tree (with `redo` disabled nothing is touched, nothing stamped).
fn change_stamped<R>(
    pool: &BufferPool,
    tree: &BTree,
    mut redo: Redo,
    lsn: &AtomicU64,
    change: impl FnOnce(&TreeWriter<'_>, &mut Redo) -> R,
) -> R {
    let writer = tree.writer().expect("writer");
    let result = change(&writer, &mut redo);
    let at = lsn.fetch_add(1, Ordering::Relaxed);
    for &id in redo.touched() {
        pool.stamp(id, at).expect("stamp");
    }
    result
}

/// A writer from `writer_for` finds its first key's leaf before it takes the tree latch, and
/// uses that leaf only if no inner node on the way changed meanwhile. Here several threads
/// write through `writer_for` at once, so a thread's path is often read while another writer
/// holds the latch and splits or merges the nodes on it: a stale path used as current would
/// put a key into a leaf whose range no longer holds it (the invariant check fails or a
/// lookup misses), or change a page that is no longer a leaf (the writer's assertion fails).
#[test]
fn writers_that_find_their_leaf_before_the_latch_keep_the_tree_exact() {
    const THREADS: u32 = 4;
    const KEYS: u32 = 3000;
    let storage = SimStorage::new();
    let tree = BTree::create(pool(&storage, 32)).expect("create");
    let key = |k: u32| {
        let mut key = k.to_be_bytes().to_vec();
        key.resize(60, b'k'); // long keys: small fan-out, many splits
        key
    };
    let value = |k: u32, round: u32| (k ^ round).to_le_bytes().repeat(25);
    let mut redo = Redo::disabled();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (tree, key, value) = (&tree, &key, &value);
            s.spawn(move || {
                let mut redo = Redo::disabled();
                let mut rng = StdRng::seed_from_u64(u64::from(t));
                let mut mine: Vec<u32> = (0..KEYS).filter(|k| k % THREADS == t).collect();
                for round in 0..3 {
                    mine.shuffle(&mut rng);
                    for &k in &mine {
                        let key = key(k);
                        let writer = tree.writer_for(&key).expect("writer");
                        writer.put(&key, &value(k, round), &mut redo).expect("put");
                    }
                    // Deletes merge leaves and inner nodes, so paths go stale that way too.
                    for &k in mine.iter().filter(|&&k| k % 2 == round % 2) {
                        let key = key(k);
                        let writer = tree.writer_for(&key).expect("writer");
                        assert!(writer.delete(&key, &mut redo).expect("delete"));
                    }
                }
            });
        }
    });
    // The last round (2) deleted the even keys, after writing every key with value(k, 2).
    let shape = tree.check().expect("invariants hold");
    assert_eq!(shape.entries, (KEYS / 2) as usize);
    for k in 0..KEYS {
        let want = (k % 2 == 1).then(|| value(k, 2));
        assert_eq!(tree.get(&key(k)).expect("get"), want, "key {k}");
    }
    // Writers that start at a key the tree does not hold, and at its ends, still land right.
    let writer = tree.writer_for(&key(KEYS + 1)).expect("writer");
    writer
        .put(&key(KEYS + 1), b"past the end", &mut redo)
        .expect("put");
    writer
        .put(&[0], b"before the start", &mut redo)
        .expect("put");
    drop(writer);
    assert_eq!(
        tree.check().expect("check").entries,
        (KEYS / 2) as usize + 2
    );
}

#[test]
fn point_reads_count_the_writers_in_their_way() {
    let storage = SimStorage::new();
    let tree = BTree::create(pool(&storage, 32)).expect("create");
    let mut redo = Redo::disabled();
    tree.writer()
        .expect("writer")
        .put(b"k", b"v", &mut redo)
        .expect("put");
    // No writer active: every read validates at once.
    for _ in 0..100 {
        assert_eq!(tree.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    }
    assert_eq!(tree.read_contention(), ReadContention::default());
    // A writer holds the tree: the read retries, then waits on the latch until it is gone.
    let writer = tree.writer().expect("writer");
    std::thread::scope(|s| {
        let reader = s.spawn(|| tree.get(b"k").expect("get"));
        let began = std::time::Instant::now();
        while tree.read_contention().latched == 0 {
            assert!(
                began.elapsed().as_secs() < 10,
                "the waiting read is not counted"
            );
            std::thread::yield_now();
        }
        assert!(!reader.is_finished(), "the read waits for the writer");
        writer.put(b"k", b"w", &mut redo).expect("put");
        drop(writer);
        assert_eq!(reader.join().expect("reader").as_deref(), Some(&b"w"[..]));
    });
    let contention = tree.read_contention();
    assert_eq!(contention.latched, 1);
    assert!(contention.retries >= 1, "{contention:?}");
}

/// A tree of two leaves or more, every change logged and stamped, as the engine's are; the
/// pool, and the keys `key(0..keys)`.
fn logged_tree(storage: &SimStorage, keys: u32) -> (Arc<BufferPool>, BTree) {
    let pool = pool(storage, 64);
    let tree = BTree::create(pool.clone()).expect("create");
    let lsn = AtomicU64::new(1);
    for k in 0..keys {
        change_stamped(&pool, &tree, Redo::new(), &lsn, |writer, redo| {
            writer.put(&long_key(k), b"old", redo).expect("put")
        });
    }
    assert!(tree.check().expect("check").leaves >= 2);
    (pool, tree)
}

fn long_key(k: u32) -> Vec<u8> {
    let mut key = k.to_be_bytes().to_vec();
    key.resize(200, b'k');
    key
}

/// Beside a logged writer that has not finished, a point read of a leaf the writer has not
/// touched is served at once, and one of a leaf it has changed waits for it: the change is
/// not in the log yet, so a read that saw it could see it lost in a crash.
#[test]
fn reads_beside_a_logged_writer_wait_only_for_its_unfinished_change() {
    let storage = SimStorage::new();
    let (pool, tree) = logged_tree(&storage, 200);
    std::thread::scope(|s| {
        // Taken in here, so that a failed assertion drops it before the readers are joined.
        let mut redo = Redo::new();
        let writer = tree.writer().expect("writer");
        writer.put(&long_key(0), b"new", &mut redo).expect("put");
        // The last key lives in another leaf than the first.
        let untouched = s.spawn(|| tree.get(&long_key(199)).expect("get"));
        let began = std::time::Instant::now();
        while !untouched.is_finished() && began.elapsed().as_secs() < 5 {
            std::thread::yield_now();
        }
        assert!(
            untouched.is_finished(),
            "a read of an untouched leaf waited for the writer"
        );
        assert_eq!(
            untouched.join().expect("reader").as_deref(),
            Some(&b"old"[..])
        );
        assert_eq!(tree.read_contention().latched, 0);
        let changed = s.spawn(|| tree.get(&long_key(0)).expect("get"));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!changed.is_finished(), "a change not yet logged was read");
        for &id in redo.touched() {
            pool.stamp(id, 1_000).expect("stamp");
        }
        drop(writer);
        assert_eq!(
            changed.join().expect("reader").as_deref(),
            Some(&b"new"[..])
        );
    });
}

/// A key of 400 bytes, in numeric order: about 19 entries per node, so that a few hundred
/// keys make a tree of height 3.
fn wide_key(k: u32) -> Vec<u8> {
    let mut key = k.to_be_bytes().to_vec();
    key.resize(400 * SCALE, b'k');
    key
}

fn small_value(k: u32) -> Vec<u8> {
    k.to_le_bytes().to_vec()
}

/// A tree (in a pool of 256 frames) holding [`wide_key`]s `keys`, each put as the engine puts
/// it (see [`change_stamped`]); the pool, the tree, and the LSNs its changes are stamped with.
fn tree_of_wide_keys(
    storage: &SimStorage,
    keys: impl IntoIterator<Item = u32>,
) -> (Arc<BufferPool>, BTree, AtomicU64) {
    let pool = pool(storage, 256);
    let tree = BTree::create(pool.clone()).expect("create");
    let lsn = AtomicU64::new(1);
    for k in keys {
        change_stamped(&pool, &tree, Redo::new(), &lsn, |writer, redo| {
            writer
                .put(&wide_key(k), &small_value(k), redo)
                .expect("put")
        });
    }
    (pool, tree, lsn)
}

/// One reader thread per key of `keys`: each reads its key once (which warms its copies of
/// the inner nodes on the way), waits at `ready`, and once `go` opens reads it again and
/// returns (key, answer).
fn spawn_warm_readers<'scope, 'env, K: Fn(u32) -> Vec<u8> + Sync>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    tree: &'env BTree,
    key: &'env K,
    keys: &[u32],
    ready: &'env std::sync::Barrier,
    go: &'env std::sync::Barrier,
) -> Vec<std::thread::ScopedJoinHandle<'scope, (u32, Option<Vec<u8>>)>> {
    keys.iter()
        .map(|&r| {
            s.spawn(move || {
                tree.get(&key(r)).expect("warm-up read");
                ready.wait();
                go.wait();
                (r, tree.get(&key(r)).expect("get"))
            })
        })
        .collect()
}

/// Reads caught in the middle of a logged writer's structure change. Holding the root's read
/// latch stops a writer at the one moment a reader must never trust: it has split a child of
/// the root (a leaf in a tree of height 2; an inner node, after a leaf below it, in a tree of
/// height 3) and waits to link the new sibling into the root, whose old routing still sends
/// the moved keys to the child that no longer holds them. Readers that warmed their copy of
/// the root before the writer began then look up every key: each answer that comes back while
/// the writer is stopped must be right (a stale leaf would answer "absent"), and the others
/// must be right once it goes on.
fn reads_caught_in_a_structure_change_are_exact(base_keys: u32, height: usize) {
    let storage = SimStorage::new();
    let mut present: Vec<u32> = (0..base_keys).map(|k| k * 1000).collect();
    let (pool, tree, lsn) = tree_of_wide_keys(&storage, present.iter().copied());
    let (key, value) = (wide_key, small_value);
    let put = |k: u32| {
        change_stamped(&pool, &tree, Redo::new(), &lsn, |writer, redo| {
            writer.put(&key(k), &value(k), redo).expect("put")
        });
    };
    assert_eq!(tree.check().expect("check").height, height);
    let (mut caught, mut early_answers) = (0, 0);
    // Into the middle of the tree, each key below the last: splits into halves, keys move.
    let gap = base_keys / 2 * 1000;
    for k in (gap + 1..gap + 999).rev() {
        if caught == 3 {
            break;
        }
        // The keys a split near the gap can move, thinned out: the added ones, and every
        // third of the first keys for a while around them.
        let near: Vec<u32> = present
            .iter()
            .copied()
            .filter(|&r| r.abs_diff(gap) <= 120_000 && (r % 1000 != 0 || r % 3000 == 0))
            .collect();
        let readers_ready = std::sync::Barrier::new(near.len() + 1);
        let go = std::sync::Barrier::new(near.len() + 1);
        std::thread::scope(|s| {
            let readers = spawn_warm_readers(s, &tree, &key, &near, &readers_ready, &go);
            readers_ready.wait();
            let root = pool.read(tree.root()).expect("root");
            let writer = s.spawn(|| put(k));
            let began = std::time::Instant::now();
            while !writer.is_finished() && began.elapsed().as_millis() < 20 {
                std::thread::yield_now();
            }
            let stopped = !writer.is_finished();
            go.wait();
            let mut waiting = Vec::new();
            if stopped {
                caught += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
                for reader in readers {
                    if reader.is_finished() {
                        let (r, found) = reader.join().expect("reader");
                        assert_eq!(found, Some(value(r)), "key {r} read beside a split");
                        early_answers += 1;
                    } else {
                        waiting.push(reader);
                    }
                }
            } else {
                waiting = readers;
            }
            drop(root);
            writer.join().expect("writer");
            for reader in waiting {
                let (r, found) = reader.join().expect("reader");
                assert_eq!(found, Some(value(r)), "key {r}");
            }
        });
        present.push(k);
    }
    assert_eq!(caught, 3, "the writer was never caught splitting");
    assert!(
        early_answers > 0,
        "no read was served beside the stopped writer"
    );
}

#[test]
fn reads_caught_in_a_leaf_split_are_exact() {
    reads_caught_in_a_structure_change_are_exact(60, 2);
}

#[test]
fn reads_caught_in_an_inner_node_split_are_exact() {
    reads_caught_in_a_structure_change_are_exact(600, 3);
}

/// A structure change a logged writer has made but not yet stamped (its record is not
/// appended): a leaf split below an inner node that is not the root, or a merge of two leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnstampedChange {
    LeafSplitBelowTheRoot,
    LeafMerge,
}

/// Readers beside a writer that has finished a structure change deep in a tree of height 3
/// and not yet stamped its pages (the engine's writer between its changes and its append).
/// Readers whose copies of the inner nodes were warmed before the change look up the keys
/// around it: an answer that comes before the stamp must be the tree as it was before the
/// change (the change may still be lost in a crash), and any answer must be the tree before
/// or after it. A reader that trusted a stale copy of the changed inner node, or a leaf that
/// carries the writer's mark, would answer from the wrong leaf or from the unlogged change.
/// Complements `reads_caught_in_a_structure_change_are_exact` (a writer stopped *during* a
/// split below the root), and covers merges, which it cannot stop. In this window the rules
/// back each other up (the changed parent is both a stale copy and marked, the changed leaf
/// is marked), so breaking one of them alone passes; with the marks ignored on leaves and
/// inner nodes alike, both cases fail.
fn reads_beside_an_unstamped_structure_change_see_the_tree_before_it(change: UnstampedChange) {
    let storage = SimStorage::new();
    let mut present: std::collections::BTreeSet<u32> = (0..600).map(|k| k * 1000).collect();
    let (pool, tree, lsn) = tree_of_wide_keys(&storage, present.iter().copied());
    let (key, value) = (wide_key, small_value);
    assert_eq!(tree.check().expect("check").height, 3);
    let middle = 300_000;
    // Splits: keys added into one gap, each below the last, until its leaf splits (its
    // parent has room: a leaf split links into it). Merges: keys deleted upwards from the
    // middle until a leaf falls underfull and merges with a neighbour.
    let changes: Vec<(u32, bool)> = match change {
        UnstampedChange::LeafSplitBelowTheRoot => (middle + 1..middle + 999)
            .rev()
            .map(|k| (k, true))
            .collect(),
        UnstampedChange::LeafMerge => (300..500).map(|k| (k * 1000, false)).collect(),
    };
    let (mut caught, mut early_answers) = (0, 0);
    for (k, put) in changes {
        if caught == 3 {
            break;
        }
        let before = present.clone();
        if put {
            present.insert(k);
        } else {
            present.remove(&k);
        }
        // The keys around the change, whose paths share its inner node (a reader of one of
        // those waits for the writer), and a sample of the others (a reader of one of those
        // need not).
        let near: Vec<u32> = before
            .union(&present)
            .copied()
            .filter(|&r| r.abs_diff(k) <= 60_000 || r % 20_000 == 0)
            .collect();
        let ready = std::sync::Barrier::new(near.len() + 1);
        let go = std::sync::Barrier::new(near.len() + 1);
        std::thread::scope(|s| {
            let readers = spawn_warm_readers(s, &tree, &key, &near, &ready, &go);
            ready.wait();
            let mut redo = Redo::new();
            let writer = tree.writer().expect("writer");
            if put {
                writer.put(&key(k), &value(k), &mut redo).expect("put");
            } else {
                assert!(writer.delete(&key(k), &mut redo).expect("delete"));
            }
            // One page touched: no structure change, and nothing for this test to look at.
            let structure_changed = redo.touched().len() > 1;
            go.wait();
            let mut waiting = Vec::new();
            if structure_changed {
                caught += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
                for reader in readers {
                    if !reader.is_finished() {
                        waiting.push(reader);
                        continue;
                    }
                    let (r, found) = reader.join().expect("reader");
                    let expected = before.contains(&r).then(|| value(r));
                    assert_eq!(
                        found, expected,
                        "key {r} read beside an unstamped {change:?}"
                    );
                    early_answers += 1;
                }
            } else {
                waiting = readers;
            }
            let at = lsn.fetch_add(1, Ordering::Relaxed);
            for &id in redo.touched() {
                pool.stamp(id, at).expect("stamp");
            }
            drop(writer);
            for reader in waiting {
                let (r, found) = reader.join().expect("reader");
                let (old, new) = (before.contains(&r), present.contains(&r));
                let possible = [old.then(|| value(r)), new.then(|| value(r))];
                assert!(possible.contains(&found), "key {r}: {found:?}");
            }
        });
    }
    assert_eq!(caught, 3, "no {change:?} happened");
    assert!(early_answers > 0, "no read was served beside the writer");
    let shape = tree.check().expect("check");
    assert_eq!(shape.entries, present.len());
    if change == UnstampedChange::LeafSplitBelowTheRoot {
        assert_eq!(shape.height, 3);
    }
}

#[test]
fn reads_beside_an_unstamped_leaf_split_below_the_root_see_the_tree_before_it() {
    reads_beside_an_unstamped_structure_change_see_the_tree_before_it(
        UnstampedChange::LeafSplitBelowTheRoot,
    );
}

#[test]
fn reads_beside_an_unstamped_leaf_merge_see_the_tree_before_it() {
    reads_beside_an_unstamped_structure_change_see_the_tree_before_it(UnstampedChange::LeafMerge);
}

#[test]
fn deep_tree_grows_to_height_three_and_shrinks_back() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 32);
    let tree = BTree::create(Arc::clone(&pool)).expect("create");
    let mut rng = StdRng::seed_from_u64(7);
    let mut keys: Vec<u32> = (0..6000).collect();
    keys.shuffle(&mut rng);
    let key = |k: u32| {
        let mut key = k.to_be_bytes().to_vec(); // big-endian: memcmp order = numeric order
        key.resize(100 * SCALE, b'k');
        key
    };
    for &k in &keys {
        tree.insert(&key(k), &[k as u8; 100 * SCALE])
            .expect("insert");
    }
    let shape = tree.check().expect("check");
    assert!(shape.height >= 3, "{shape:?}");
    assert_eq!(shape.entries, 6000);

    // Ordered scans, both ways, from the middle, with limits.
    let from = key(2999);
    let up = tree
        .range(
            Bound::Excluded(&from),
            Bound::Unbounded,
            ScanDirection::Ascending,
            5,
        )
        .expect("range");
    let up: Vec<Vec<u8>> = up.into_iter().map(|(k, _)| k).collect();
    assert_eq!(up, (3000..3005).map(key).collect::<Vec<_>>());
    let down = tree
        .range(
            Bound::Unbounded,
            Bound::Included(&from),
            ScanDirection::Descending,
            3,
        )
        .expect("range");
    let down: Vec<Vec<u8>> = down.into_iter().map(|(k, _)| k).collect();
    assert_eq!(down, vec![key(2999), key(2998), key(2997)]);

    // Persistence: flush, then reopen over a fresh pool.
    pool.flush_all().expect("flush");
    let reopened = BTree::open(self::pool(&storage, 16), tree.root()).expect("open");
    assert_eq!(
        reopened.get(&key(4321)).expect("get"),
        Some(vec![4321u32 as u8; 100 * SCALE])
    );
    assert_eq!(reopened.check().expect("check"), shape);

    // Delete everything in another random order: merges shrink the tree back to one leaf.
    keys.shuffle(&mut rng);
    for (i, &k) in keys.iter().enumerate() {
        assert!(tree.delete(&key(k)).expect("delete"));
        if i % 1000 == 0 {
            tree.check().expect("check");
        }
    }
    let empty = tree.check().expect("check");
    assert_eq!(
        (empty.height, empty.leaves, empty.entries),
        (1, 1, 0),
        "{empty:?}"
    );
    assert_eq!(tree.get(&key(1)).expect("get"), None);
}

/// Keys inserted in ascending order fill their leaves (a full leaf keeps its keys and the
/// new one starts a page); keys inserted in descending order just above a full leaf and below
/// its sibling (LPUSH's new heads, below a list whose first element starts a leaf) share
/// leaves too. Before the quick split asked for a sibling at least half full, each of those
/// got a leaf of its own: 1,000 inserts made 1,000 leaves of one entry.
#[test]
fn ascending_loads_fill_leaves_and_descending_inserts_below_them_share_leaves() {
    let storage = SimStorage::new();
    let tree = BTree::create(pool(&storage, 256)).expect("create");
    let key = |k: u64| k.to_be_bytes();
    let value = [7u8; 200 * SCALE];
    let mut k = 0;
    while tree.check().expect("check").leaves < 3 {
        k += 1_000_000;
        tree.insert(&key(k), &value).expect("insert");
    }
    let loaded = tree.check().expect("check");
    let per_leaf = (k / 1_000_000) as usize / 2;
    // The first two leaves are full: the load filled them before moving on.
    assert!(per_leaf >= 30, "{loaded:?}");
    // Below the third leaf's first key (the last one inserted), above all of the second's.
    let below = k;
    for j in 1..=1_000 {
        tree.insert(&key(below - j), &value).expect("insert");
    }
    let shape = tree.check().expect("check");
    assert_eq!(shape.entries, loaded.entries + 1_000);
    assert!(
        shape.leaves <= loaded.leaves + 2 * 1_000 / per_leaf + 2,
        "1,000 descending inserts below a full leaf made {} leaves ({} entries each when full)",
        shape.leaves - loaded.leaves,
        per_leaf
    );
}

/// Once warm, a point read of a tree with about as many inner nodes as a `kv` table of
/// 100,000 4 KiB values (~170) reads only its leaf from the pool: every inner node routes
/// from the thread's copy. With the copies direct-mapped into 256 slots, nodes that shared a
/// slot evicted each other, and about one read in eight read an inner node from the pool
/// again (and copied its 16 KiB).
#[test]
fn warm_point_reads_route_through_copies_of_every_inner_node() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 4096);
    let tree = BTree::create(Arc::clone(&pool)).expect("create");
    let key = |k: u32| {
        let mut key = k.to_be_bytes().to_vec();
        key.resize(500 * SCALE, b'k'); // long keys: many inner nodes from few entries
        key
    };
    let mut rng = StdRng::seed_from_u64(11);
    let mut keys: Vec<u32> = (0..24_000).collect();
    keys.shuffle(&mut rng);
    for &k in &keys {
        tree.insert(&key(k), &[1]).expect("insert");
    }
    let shape = tree.check().expect("check");
    assert!(
        (150..=250).contains(&shape.inner_nodes),
        "the test wants a kv table's ~170 inner nodes: {shape:?}"
    );
    let read_all = |keys: &[u32]| {
        for &k in keys {
            assert!(tree.get(&key(k)).expect("get").is_some());
        }
    };
    read_all(&keys); // warm: every inner node copied once
    keys.shuffle(&mut rng);
    let before = pool.stats().hits;
    read_all(&keys);
    let pool_reads = pool.stats().hits - before;
    let extra = pool_reads - keys.len() as u64; // one leaf per read is the floor
    assert!(
        extra * 100 <= keys.len() as u64,
        "{extra} of {} warm reads read an inner node from the pool ({shape:?})",
        keys.len()
    );
}

/// Inner nodes that every descent routes through stay in the pool while cold leaves pass
/// through it: a read from the thread's copy counts as a use for the eviction clock. Before,
/// only reads from the pool did, so the copies' nodes looked unused and went first.
#[test]
fn inner_nodes_read_from_copies_stay_in_the_pool() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 64);
    let tree = BTree::create(Arc::clone(&pool)).expect("create");
    let key = |k: u32| k.to_be_bytes();
    for k in 0..6_000u32 {
        tree.insert(&key(k), &[1; 1000]).expect("insert");
    }
    let shape = tree.check().expect("check");
    assert!(
        shape.leaves > 4 * 64,
        "the tree must outgrow the pool: {shape:?}"
    );
    assert!(tree.get(&key(0)).expect("get").is_some()); // copies of the path to it
    let mut cold: Vec<u32> = (0..6_000).collect();
    cold.shuffle(&mut StdRng::seed_from_u64(3));
    let requests = || pool.stats().hits + pool.stats().misses;
    let before = requests();
    for &k in &cold {
        assert!(tree.get(&key(k)).expect("get").is_some());
    }
    // One leaf per read is the floor; each eviction of the root costs one read more.
    let inner_reads = requests() - before - cold.len() as u64;
    assert!(
        inner_reads <= 1,
        "{inner_reads} reads of inner nodes from the pool ({shape:?})"
    );
}

/// An injected write failure (which surfaces during an eviction) at each of the first writes
/// of an insert/delete workload: the failed operation either changed nothing visible, or left
/// the tree fail-stop; never a silently wrong tree.
#[test]
fn injected_write_failures_leave_the_tree_intact_or_fail_stop() {
    let key = |k: u32| {
        let mut key = k.to_be_bytes().to_vec();
        key.resize(300, b'.');
        key
    };
    let (mut intact, mut fail_stop) = (0, 0);
    for nth in 1..=60u64 {
        let storage = SimStorage::new();
        let tree = BTree::create(pool(&storage, 5)).expect("create");
        let mut model = Model::new();
        let mut rng = StdRng::seed_from_u64(nth);
        storage.fail_nth_write(nth);
        let mut failed = None;
        for _ in 0..600 {
            let k = key(rng.gen_range(0..400));
            if rng.gen_bool(0.7) {
                match tree.insert(&k, &[7; 200]) {
                    Ok(()) => assert!(model.insert(k, vec![7; 200]).is_none()),
                    Err(StorageError::DuplicateKey) => assert!(model.contains_key(&k)),
                    Err(err) => {
                        failed = Some((err, k));
                        break;
                    }
                }
            } else {
                match tree.delete(&k) {
                    Ok(found) => assert_eq!(found, model.remove(&k).is_some()),
                    Err(err) => {
                        failed = Some((err, k));
                        break;
                    }
                }
            }
        }
        let (err, k) = failed.expect("the injected failure surfaces");
        match tree.check() {
            Err(StorageError::TreeInconsistent { .. }) => {
                fail_stop += 1;
                assert!(matches!(
                    tree.get(&k),
                    Err(StorageError::TreeInconsistent { .. })
                ));
            }
            Ok(_) => {
                intact += 1;
                // A failed insert changed nothing; a failed delete may have removed the key
                // before merging failed.
                if tree.get(&k).expect("get").is_none() {
                    model.remove(&k);
                }
                let all = tree
                    .range(
                        Bound::Unbounded,
                        Bound::Unbounded,
                        ScanDirection::Ascending,
                        usize::MAX,
                    )
                    .expect("scan");
                let want: Vec<_> = model.clone().into_iter().collect();
                assert!(
                    all == want,
                    "after {err}: the tree holds {} entries, the model {}",
                    all.len(),
                    want.len()
                );
                // A failed data-file write is fail-stop: reads work (above), changes do not.
                assert!(
                    matches!(
                        tree.insert(&key(1000), &[7; 200]),
                        Err(StorageError::Stopped { .. })
                    ),
                    "a change was accepted after {err}"
                );
            }
            Err(other) => panic!("unexpected {other} after {err}"),
        }
    }
    assert!(intact > 0, "no failure left the tree intact");
    eprintln!("injected write failures: {intact} left the tree intact, {fail_stop} fail-stop");
}

/// Operations that change nothing (failed insert or update, delete of an absent key, reads)
/// dirty no page, so they cause no write; a delete that needs no merge dirties one leaf.
#[test]
fn operations_that_change_nothing_write_nothing() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 64);
    let tree = BTree::create(Arc::clone(&pool)).expect("create");
    for i in 0..500u32 {
        tree.insert(&i.to_be_bytes(), &[1; 100]).expect("insert");
    }
    assert!(tree.check().expect("check").height >= 2);
    pool.flush_all().expect("flush");
    let written = pool.stats().pages_written;
    assert!(matches!(
        tree.insert(&7u32.to_be_bytes(), b"x"),
        Err(StorageError::DuplicateKey)
    ));
    assert!(matches!(
        tree.update(&9999u32.to_be_bytes(), b"x"),
        Err(StorageError::KeyNotFound)
    ));
    assert!(!tree.delete(&9999u32.to_be_bytes()).expect("delete"));
    tree.get(&3u32.to_be_bytes()).expect("get");
    tree.range(
        Bound::Unbounded,
        Bound::Unbounded,
        ScanDirection::Descending,
        50,
    )
    .expect("range");
    pool.flush_all().expect("flush");
    assert_eq!(pool.stats().pages_written, written);
    assert!(tree.delete(&250u32.to_be_bytes()).expect("delete"));
    pool.flush_all().expect("flush");
    assert_eq!(pool.stats().pages_written, written + 1);
}

#[test]
fn entry_size_limits_and_key_errors() {
    let storage = SimStorage::new();
    let tree = BTree::create(pool(&storage, 8)).expect("create");
    let big = vec![1u8; MAX_ENTRY];
    tree.insert(&big[..1000], &big[1000..])
        .expect("exactly the maximum fits");
    let err = tree.insert(b"k", &big).expect_err("one byte over");
    assert!(
        matches!(err, StorageError::EntryTooLarge { size, max: MAX_ENTRY } if size == MAX_ENTRY + 1),
        "{err}"
    );
    assert!(matches!(
        tree.update(b"absent", b"v"),
        Err(StorageError::KeyNotFound)
    ));
    tree.insert(b"", b"empty key")
        .expect("the empty key is a key");
    assert!(matches!(
        tree.insert(b"", b"again"),
        Err(StorageError::DuplicateKey)
    ));
    tree.update(b"", b"replaced").expect("update");
    assert_eq!(tree.get(b"").expect("get"), Some(b"replaced".to_vec()));
    // Many maximum-size entries force splits with the largest separators.
    for i in 0..40u8 {
        let mut key = vec![i; 1500];
        key[0] = i;
        tree.insert(&key, &[i; 500]).expect("insert");
    }
    let shape = tree.check().expect("check");
    assert!(shape.height >= 2 && shape.entries == 42, "{shape:?}");
}

/// A tree of keys 0..300 (big-endian u32) with 200-byte values `[7; 200]`, written to the
/// data file of `storage`; its root.
fn three_hundred_keys_on_disk(storage: &SimStorage) -> PageId {
    let pool = pool(storage, 8);
    let tree = BTree::create(Arc::clone(&pool)).expect("create");
    for i in 0..300u32 {
        tree.insert(&i.to_be_bytes(), &[7; 200]).expect("insert");
    }
    pool.flush_all().expect("flush");
    tree.root()
}

/// A leaf that passes its checksum but is malformed (a slot pointing past the page, as a
/// bug's write or a crafted file could leave it) is a corrupt-page error for every read,
/// never a panic on the bad offset.
#[test]
fn a_malformed_leaf_with_a_valid_checksum_is_reported_not_read() {
    let storage = SimStorage::new();
    let root = three_hundred_keys_on_disk(&storage);
    let bytes = storage.file_bytes(DATA).expect("file");
    let leaves: Vec<usize> = (0..bytes.len() / PAGE_SIZE)
        .filter(|&i| bytes[i * PAGE_SIZE..(i + 1) * PAGE_SIZE] != [0; PAGE_SIZE][..])
        .filter(|&i| {
            let mut page = Page::zeroed();
            page.bytes_mut_for_read()
                .copy_from_slice(&bytes[i * PAGE_SIZE..(i + 1) * PAGE_SIZE]);
            page.kind() == Some(PageKind::BTreeLeaf)
        })
        .collect();
    let victim = leaves[leaves.len() / 2];
    rewrite_page(&storage, PageId(victim as u64), |page| {
        // Slot 1's cell offset (payload bytes 16 + 10 .. +2): one byte before the page's end.
        let past_the_end = (PAGE_SIZE - HEADER_SIZE - 1) as u16;
        page.payload_mut()[26..28].copy_from_slice(&past_the_end.to_le_bytes());
    });

    let tree = BTree::open(pool(&storage, 8), root).expect("the root is intact");
    let malformed = |err: StorageError| match err {
        StorageError::Corrupt { page_id, reason } => {
            assert_eq!(page_id, PageId(victim as u64));
            assert!(reason.contains("malformed node"), "{reason}");
        }
        other => panic!("not a corrupt page: {other}"),
    };
    malformed(tree.check().expect_err("check reads every page"));
    let all = tree.range(
        Bound::Unbounded,
        Bound::Unbounded,
        ScanDirection::Ascending,
        usize::MAX,
    );
    malformed(all.expect_err("a full scan reads the leaf"));
    let mut errors = 0;
    for i in 0..300u32 {
        match tree.get(&i.to_be_bytes()) {
            Ok(value) => assert_eq!(value, Some(vec![7; 200])),
            Err(err) => {
                malformed(err);
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "the leaf's keys are not read");
}

/// Rewrites page `id` of the data file with `change`, sealed again: damage that passes the
/// checksum.
fn rewrite_page(storage: &SimStorage, id: PageId, change: impl FnOnce(&mut Page)) {
    let mut bytes = storage.file_bytes(DATA).expect("file");
    let at = id.0 as usize * PAGE_SIZE;
    let mut page = Page::zeroed();
    page.bytes_mut_for_read()
        .copy_from_slice(&bytes[at..at + PAGE_SIZE]);
    change(&mut page);
    page.seal();
    bytes[at..at + PAGE_SIZE].copy_from_slice(page.bytes());
    storage.set_file_bytes(DATA, bytes);
}

/// Runs `f` on another thread; fails the test if it has not returned within 30 s.
fn within_30s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    result
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("finished within 30 s (or panicked)")
}

fn reported_as(err: StorageError, reason: &str) {
    match err {
        StorageError::Corrupt { reason: r, .. } => assert!(r.contains(reason), "{r}"),
        other => panic!("not a corrupt page: {other}"),
    }
}

// An inner node's payload: `count` at byte 0, `upper` (the rightmost child) at byte 8.
const UPPER_AT: usize = 8;

/// An inner node whose rightmost child is itself, as damage behind a valid checksum could
/// leave it: every walk that follows the cycle stops with an error (recursive ones used to
/// overflow the stack), and the walks of the whole tree report it.
#[test]
fn a_root_that_is_its_own_child_is_reported_not_followed() {
    let storage = SimStorage::new();
    let root = three_hundred_keys_on_disk(&storage);
    rewrite_page(&storage, root, |page| {
        assert_eq!(
            page.kind(),
            Some(PageKind::BTreeInner),
            "300 keys need a root node"
        );
        page.payload_mut()[UPPER_AT..UPPER_AT + 8].copy_from_slice(&root.0.to_le_bytes());
    });
    let tree = Arc::new(BTree::open(pool(&storage, 8), root).expect("open"));
    reported_as(tree.page_ids().expect_err("a cycle"), "reached twice");
    reported_as(tree.check().expect_err("a cycle"), "reached twice");
    // The last key lies under the rightmost child.
    let last = 299u32.to_be_bytes();
    reported_as(
        tree.get(&last).expect_err("a cycle"),
        "deeper than any B+tree",
    );
    // A writer's own reads descend under the latch, by another walk.
    let t = Arc::clone(&tree);
    reported_as(
        within_30s(move || t.writer()?.get(&last)).expect_err("a cycle"),
        "deeper than any B+tree",
    );
    let t = Arc::clone(&tree);
    reported_as(
        within_30s(move || t.delete(&last)).expect_err("a cycle"),
        "deeper than any B+tree",
    );
    let t = Arc::clone(&tree);
    let past = 1000u32.to_be_bytes();
    let inserted = within_30s(move || t.insert(&past, &[1; 10]));
    match inserted.expect_err("a cycle") {
        StorageError::TreeInconsistent { .. } => {}
        err => reported_as(err, "deeper than any B+tree"),
    }
}

/// An inner node whose last two children are one page: a merge of the pair would latch the
/// page twice and wait for itself forever; it reports the damage instead.
#[test]
fn a_merge_of_a_page_with_itself_is_reported_not_awaited() {
    let storage = SimStorage::new();
    let root = three_hundred_keys_on_disk(&storage);
    rewrite_page(&storage, root, |page| {
        let p = page.payload_mut();
        let count = u16::from_le_bytes([p[0], p[1]]) as usize;
        // Slot `count - 1`: its cell holds the key, then the child id.
        let slot = 16 + 10 * (count - 1);
        let cell = u16::from_le_bytes([p[slot], p[slot + 1]]) as usize;
        let key_len = u16::from_le_bytes([p[slot + 2], p[slot + 3]]) as usize;
        let child: [u8; 8] = p[cell + key_len..cell + key_len + 8]
            .try_into()
            .expect("8 bytes");
        p[UPPER_AT..UPPER_AT + 8].copy_from_slice(&child);
    });
    let tree = BTree::open(pool(&storage, 8), root).expect("open");
    reported_as(
        tree.page_ids().expect_err("a shared child"),
        "reached twice",
    );
    // Deleting from the top empties the shared leaf until a merge is due.
    let deleted = within_30s(move || {
        (0..300u32)
            .rev()
            .map(|i| tree.delete(&i.to_be_bytes()))
            .find_map(Result::err)
    });
    reported_as(deleted.expect("an error"), "a child reached twice");
}

#[test]
fn a_corrupt_node_is_reported_by_lookups() {
    let storage = SimStorage::new();
    let root = three_hundred_keys_on_disk(&storage);
    let mut bytes = storage.file_bytes(DATA).expect("file");
    let last_page = bytes.len() / tailstore_storage::PAGE_SIZE - 1;
    bytes[last_page * tailstore_storage::PAGE_SIZE + 4000] ^= 0xff;
    storage.set_file_bytes(DATA, bytes);
    let tree = BTree::open(pool(&storage, 8), root).expect("root is intact");
    let err = tree.check().expect_err("corruption found");
    assert!(matches!(err, StorageError::Corrupt { .. }), "{err}");
}
