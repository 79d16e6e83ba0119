//! Model-based property test: random single-threaded sequences of transactions (inserts,
//! updates, deletes, point reads, primary-key scans in both directions with limits, rows at
//! positions of a range, counts of a range or an index prefix, index entries after a skip,
//! index scans; commit or roll back), compared step by step with a `BTreeMap` model, with
//! checkpoints, clean reopens and simulated crashes (process crash or power cut) in between.
//! After a reopen or a crash the database must hold exactly the committed state of the model
//! (every acknowledged commit, nothing of the transaction that was open), in every index too.
//!
//! The database runs on `SimStorage` with a 16-page buffer pool, so that pages are evicted and
//! read back throughout. `TAILSTORE_MODEL_CASES` sets the number of cases (default 48).

mod support;

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tailstore_engine::{EngineError, KeyRange, Table, Transaction};
use tailstore_log::CommitMode;
use tailstore_media::sim::SimStorage;
use tailstore_storage::{ScanDirection, Value};

use support::{
    crash_and_drop, items_schema, key, model_scan, open_sim, sim_config, try_verify, Crash, Item,
    Model,
};

const IDS: i64 = 48;
const GROUPS: i64 = 4;
const VALS: i64 = 96;
const POOL_PAGES: usize = 16;

#[derive(Clone, Debug)]
enum Op {
    Insert(Item),
    Update(Item),
    Delete(i64),
    Get(i64),
    Scan {
        lo: i64,
        hi: i64,
        desc: bool,
        limit: usize,
    },
    /// `Transaction::rows_at`: the rows at these positions (strictly increasing) of `lo..hi`.
    RowsAt {
        lo: i64,
        hi: i64,
        positions: Vec<usize>,
    },
    /// `Transaction::count` of `lo..hi`.
    Count {
        lo: i64,
        hi: i64,
    },
    /// `Transaction::count_index` of a group.
    CountGroup(i64),
    /// `Transaction::index_entries` of `by_val` from `from` on, after `skip`.
    ValEntries {
        from: i64,
        desc: bool,
        skip: usize,
        limit: usize,
    },
    ScanGroup {
        grp: i64,
        desc: bool,
        limit: usize,
    },
    ScanVal {
        from: i64,
        desc: bool,
        limit: usize,
    },
    Commit,
    Rollback,
    Checkpoint,
    Reopen,
    Crash {
        power: bool,
        seed: u64,
    },
}

fn item() -> impl Strategy<Value = Item> {
    let note = prop_oneof![
        6 => 0usize..40,
        3 => 100usize..400,
        1 => 400usize..=support::MAX_NOTE,
    ];
    (0..IDS, 0..GROUPS, 0..VALS, note)
        .prop_map(|(id, grp, val, note)| Item::new(id, grp, val, note))
}

fn limit() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..6, Just(usize::MAX)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => item().prop_map(Op::Insert),
        6 => item().prop_map(Op::Update),
        5 => (0..IDS).prop_map(Op::Delete),
        4 => (0..IDS + 2).prop_map(|id| Op::Get(id - 1)),
        4 => (0..IDS, 0..IDS, any::<bool>(), limit())
            .prop_map(|(a, b, desc, limit)| Op::Scan { lo: a.min(b), hi: a.max(b) + 1, desc, limit }),
        2 => (0..IDS, 0..IDS, prop::collection::btree_set(0..IDS as usize + 2, 0..6))
            .prop_map(|(a, b, positions)| Op::RowsAt {
                lo: a.min(b),
                hi: a.max(b) + 1,
                positions: positions.into_iter().collect(),
            }),
        1 => (0..IDS, 0..IDS)
            .prop_map(|(a, b)| Op::Count { lo: a.min(b), hi: a.max(b) + 1 }),
        1 => (0..GROUPS).prop_map(Op::CountGroup),
        2 => (0..VALS, any::<bool>(), prop_oneof![Just(0usize), 0..IDS as usize + 2], limit())
            .prop_map(|(from, desc, skip, limit)| Op::ValEntries { from, desc, skip, limit }),
        2 => (0..GROUPS, any::<bool>(), limit())
            .prop_map(|(grp, desc, limit)| Op::ScanGroup { grp, desc, limit }),
        1 => (0..VALS, any::<bool>(), limit())
            .prop_map(|(from, desc, limit)| Op::ScanVal { from, desc, limit }),
        6 => Just(Op::Commit),
        2 => Just(Op::Rollback),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
        1 => (any::<bool>(), any::<u64>()).prop_map(|(power, seed)| Op::Crash { power, seed }),
    ]
}

/// `fsync` is the cheapest to reopen on the simulator (the PMEM modes wipe their ring at
/// every open, which the simulator makes slow), so it gets more cases.
fn mode() -> impl Strategy<Value = CommitMode> {
    prop_oneof![
        2 => Just(CommitMode::Fsync),
        1 => Just(CommitMode::Buffer),
        1 => Just(CommitMode::PmemLog),
        1 => Just(CommitMode::Async),
    ]
}

/// The committed model and the open transaction's writes (`None`: deleted).
struct State {
    committed: Model,
    pending: BTreeMap<i64, Option<Item>>,
}

impl State {
    /// What the open transaction sees.
    fn view(&self) -> Model {
        let mut view = self.committed.clone();
        for (&id, item) in &self.pending {
            match item {
                Some(item) => view.insert(id, item.clone()),
                None => view.remove(&id),
            };
        }
        view
    }
}

fn fail(what: String) -> TestCaseError {
    TestCaseError::fail(what)
}

fn items(
    rows: tailstore_engine::Result<Vec<Vec<Value>>>,
    what: &str,
) -> Result<Vec<Item>, TestCaseError> {
    let rows = rows.map_err(|e| fail(format!("{what}: {e}")))?;
    Ok(rows.iter().map(|r| Item::from_values(r)).collect())
}

fn take(rows: impl DoubleEndedIterator<Item = Item>, desc: bool, limit: usize) -> Vec<Item> {
    if desc {
        rows.rev().take(limit).collect()
    } else {
        rows.take(limit).collect()
    }
}

fn direction(desc: bool) -> ScanDirection {
    if desc {
        ScanDirection::Descending
    } else {
        ScanDirection::Ascending
    }
}

/// Runs one op inside the open transaction; `Ok(())` if the engine agreed with the model.
fn step(
    txn: &mut Transaction<'_>,
    table: &Table,
    state: &mut State,
    op: &Op,
) -> Result<(), TestCaseError> {
    let view = state.view();
    let val_taken = |item: &Item| {
        view.values()
            .any(|other| other.id != item.id && other.val == item.val)
    };
    match op {
        Op::Insert(item) => {
            let result = txn.insert(table, &item.values());
            let duplicate = view.contains_key(&item.id) || val_taken(item);
            match result {
                Err(EngineError::DuplicateKey(_)) if duplicate => {}
                Ok(()) if !duplicate => {
                    state.pending.insert(item.id, Some(item.clone()));
                }
                other => return Err(fail(format!("{op:?}: {other:?}, duplicate={duplicate}"))),
            }
        }
        Op::Update(item) => {
            let result = txn.update(table, &item.values());
            let old = view.get(&item.id);
            match (result, old) {
                (Err(EngineError::RowNotFound(_)), None) => {}
                (Err(EngineError::DuplicateKey(_)), Some(old))
                    if old.val != item.val && val_taken(item) => {}
                (Ok(()), Some(old)) if old.val == item.val || !val_taken(item) => {
                    state.pending.insert(item.id, Some(item.clone()));
                }
                (other, old) => return Err(fail(format!("{op:?}: {other:?}, old={old:?}"))),
            }
        }
        Op::Delete(id) => {
            let found = txn
                .delete(table, &key(*id))
                .map_err(|e| fail(format!("{op:?}: {e}")))?;
            prop_assert_eq!(found, view.contains_key(id), "{:?}", op);
            if found {
                state.pending.insert(*id, None);
            }
        }
        Op::Get(id) => {
            let got = txn
                .get(table, &key(*id))
                .map_err(|e| fail(format!("{op:?}: {e}")))?;
            let got = got.map(|r| Item::from_values(&r));
            prop_assert_eq!(got.as_ref(), view.get(id), "{:?}", op);
        }
        Op::Scan {
            lo,
            hi,
            desc,
            limit,
        } => {
            let range = KeyRange::new(
                Bound::Included(vec![Value::Int(*lo)]),
                Bound::Excluded(vec![Value::Int(*hi)]),
            );
            let got = items(txn.scan(table, &range, direction(*desc), *limit), "scan")?;
            let want = model_scan(
                &view,
                Bound::Included(*lo),
                Bound::Excluded(*hi),
                direction(*desc),
                *limit,
            );
            prop_assert_eq!(got, want, "{:?}", op);
        }
        Op::RowsAt { lo, hi, positions } => {
            let range = KeyRange::new(
                Bound::Included(vec![Value::Int(*lo)]),
                Bound::Excluded(vec![Value::Int(*hi)]),
            );
            let got = items(txn.rows_at(table, &range, positions), "rows_at")?;
            let in_range: Vec<Item> = view.range(*lo..*hi).map(|(_, item)| item.clone()).collect();
            let want: Vec<Item> = positions
                .iter()
                .filter_map(|&at| in_range.get(at).cloned())
                .collect();
            prop_assert_eq!(got, want, "{:?}", op);
        }
        Op::Count { lo, hi } => {
            let range = KeyRange::new(
                Bound::Included(vec![Value::Int(*lo)]),
                Bound::Excluded(vec![Value::Int(*hi)]),
            );
            let got = txn
                .count(table, &range)
                .map_err(|e| fail(format!("{op:?}: {e}")))?;
            prop_assert_eq!(got, view.range(*lo..*hi).count(), "{:?}", op);
        }
        Op::CountGroup(grp) => {
            let range = KeyRange::prefix(vec![Value::Int(*grp)]);
            let got = txn
                .count_index(table, "by_grp", &range)
                .map_err(|e| fail(format!("{op:?}: {e}")))?;
            let want = view.values().filter(|i| i.grp == *grp).count();
            prop_assert_eq!(got, want, "{:?}", op);
        }
        Op::ValEntries {
            from,
            desc,
            skip,
            limit,
        } => {
            let range = KeyRange::new(Bound::Included(vec![Value::Int(*from)]), Bound::Unbounded);
            let got = txn
                .index_entries(table, "by_val", &range, direction(*desc), *skip, *limit)
                .map_err(|e| fail(format!("{op:?}: {e}")))?;
            let mut matching: Vec<&Item> = view.values().filter(|i| i.val >= *from).collect();
            matching.sort_by_key(|i| i.val);
            let mut entries: Vec<Vec<Value>> = matching
                .into_iter()
                .map(|i| vec![Value::Int(i.val), Value::Int(i.id)])
                .collect();
            if *desc {
                entries.reverse();
            }
            let want: Vec<Vec<Value>> = entries.into_iter().skip(*skip).take(*limit).collect();
            prop_assert_eq!(got, want, "{:?}", op);
        }
        Op::ScanGroup { grp, desc, limit } => {
            let range = KeyRange::prefix(vec![Value::Int(*grp)]);
            let got = items(
                txn.scan_index(table, "by_grp", &range, direction(*desc), *limit),
                "scan by_grp",
            )?;
            let want = take(
                view.values().filter(|i| i.grp == *grp).cloned(),
                *desc,
                *limit,
            );
            prop_assert_eq!(got, want, "{:?}", op);
        }
        Op::ScanVal { from, desc, limit } => {
            let range = KeyRange::new(Bound::Included(vec![Value::Int(*from)]), Bound::Unbounded);
            let got = items(
                txn.scan_index(table, "by_val", &range, direction(*desc), *limit),
                "scan by_val",
            )?;
            let mut rows: Vec<Item> = view.values().filter(|i| i.val >= *from).cloned().collect();
            rows.sort_by_key(|i| i.val);
            let want = take(rows.into_iter(), *desc, *limit);
            prop_assert_eq!(got, want, "{:?}", op);
        }
        _ => unreachable!("not a transaction op: {op:?}"),
    }
    Ok(())
}

fn run_case(mode: CommitMode, ops: &[Op]) -> Result<(), TestCaseError> {
    let config = sim_config(mode, POOL_PAGES);
    let mut storage = SimStorage::new();
    let mut state = State {
        committed: Model::new(),
        pending: BTreeMap::new(),
    };
    let mut created = false;
    let mut ops = ops.iter().peekable();
    loop {
        let (db, _) = open_sim(&storage, &config).map_err(|e| fail(format!("open: {e}")))?;
        let table = if created {
            db.table("items")
                .map_err(|e| fail(format!("reopen: {e}")))?
        } else {
            created = true;
            db.create_table("items", &items_schema())
                .map_err(|e| fail(format!("create: {e}")))?
        };
        try_verify(&db, &table, &state.committed)
            .map_err(|e| fail(format!("after (re)open: {e}")))?;
        let mut checkpointed_at = 0;
        // Runs ops until the database has to go down (or the ops run out).
        let down = {
            let mut txn: Option<Transaction<'_>> = None;
            let mut down = None;
            for op in ops.by_ref() {
                match op {
                    Op::Commit => {
                        if let Some(t) = txn.take() {
                            t.commit().map_err(|e| fail(format!("commit: {e}")))?;
                            state.committed = state.view();
                            state.pending.clear();
                            support::checkpoint_if_log_grew(&db, &mut checkpointed_at)
                                .map_err(|e| fail(format!("checkpoint: {e}")))?;
                        }
                    }
                    Op::Rollback => {
                        if let Some(t) = txn.take() {
                            t.rollback();
                            state.pending.clear();
                        }
                    }
                    Op::Checkpoint => db
                        .checkpoint()
                        .map_err(|e| fail(format!("checkpoint: {e}")))?,
                    Op::Reopen | Op::Crash { .. } => {
                        down = Some(op.clone());
                        break;
                    }
                    _ => {
                        let t = txn.get_or_insert_with(|| db.begin());
                        step(t, &table, &mut state, op)?;
                    }
                }
            }
            // The open transaction dies with the database.
            drop(txn);
            state.pending.clear();
            down
        };
        match down {
            None => {
                try_verify(&db, &table, &state.committed)
                    .map_err(|e| fail(format!("at the end: {e}")))?;
                db.close().map_err(|e| fail(format!("close: {e}")))?;
                return Ok(());
            }
            Some(Op::Crash { power, seed }) if mode.is_durable() => {
                let crash = if power {
                    Crash::PowerCut(seed)
                } else {
                    Crash::Process
                };
                storage = crash_and_drop(&storage, db, crash);
            }
            Some(_) => db.close().map_err(|e| fail(format!("close: {e}")))?,
        }
    }
}

#[test]
fn transactions_match_a_btreemap_model() {
    let cases = std::env::var("TAILSTORE_MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: 2_000,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (mode(), prop::collection::vec(op(), 1..144));
    runner
        .run(&strategy, |(mode, ops)| run_case(mode, &ops))
        .unwrap_or_else(|e| panic!("{e}"));
}
