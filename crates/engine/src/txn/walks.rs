//! Counts and walks that pass over rows ([`Transaction::count`],
//! [`Transaction::index_entries`] with a skip) are validated by the stamps of the leaves
//! they read, not by the rows: a commit that changes the rows they passed over must abort
//! them, and one that changes only leaves they did not read must not.
//!
//! [`Transaction::count`]: crate::Transaction::count
//! [`Transaction::index_entries`]: crate::Transaction::index_entries

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use tailstore_log::CommitMode;
use tailstore_media::sim::SimStorage;
use tailstore_storage::{Column, ColumnType, IndexDef, ScanDirection, Schema, Value};

use super::interleavings::{integer_columns, open_sim, sim_config};
use crate::{AbortCause, Database, EngineError, KeyRange, Table, Transaction};

/// Rows in the table: enough, with their padding, for dozens of leaves.
const ROWS: i64 = 1000;

/// A table of rows `0..ROWS` (id, group = id / 100, pad), each padded to 200 bytes so that
/// the tree has many leaves, with an index on the group.
fn padded_rows() -> (Database, Table) {
    let storage = SimStorage::new();
    let db = open_sim(&storage, &sim_config(CommitMode::Fsync));
    let mut columns = integer_columns(&["id", "group"]);
    columns.push(Column::new("pad", ColumnType::Varchar(200)));
    let indexes = vec![IndexDef::new("by_group", vec![1], false)];
    let schema = Schema::new(columns, vec![0], indexes).expect("schema");
    let table = db.create_table("rows", &schema).expect("create");
    for batch in 0..ROWS / 100 {
        let mut txn = db.begin();
        for id in batch * 100..(batch + 1) * 100 {
            txn.insert(&table, &row(id)).expect("insert");
        }
        txn.commit().expect("setup"); // within the configuration's commit limit
    }
    (db, table)
}

fn row(id: i64) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Int(id / 100),
        Value::Text("p".repeat(200)),
    ]
}

fn ids(lo: i64, hi: i64) -> KeyRange {
    KeyRange::new(
        Bound::Included(vec![Value::Int(lo)]),
        Bound::Excluded(vec![Value::Int(hi)]),
    )
}

/// A commit of its own that deletes row `id`.
fn delete(db: &Database, table: &Table, id: i64) {
    db.run(1, |txn| txn.delete(table, &[Value::Int(id)]).map(drop))
        .expect("the delete");
}

/// Commits `t`, with a write of its own unless `read_only`.
fn commit(mut t: Transaction<'_>, table: &Table, read_only: bool) -> crate::Result<()> {
    if !read_only {
        t.put(table, &row(ROWS + 1))?;
    }
    t.commit()
}

fn assert_phantom(outcome: crate::Result<()>, what: &str) {
    match outcome {
        Err(EngineError::Aborted {
            cause: AbortCause::Phantom,
        }) => {}
        Ok(()) => panic!("{what}: committed, though a row it passed over had changed"),
        Err(other) => panic!("{what}: {other}"),
    }
}

#[test]
fn a_count_aborts_when_a_row_it_counted_changes() {
    for read_only in [false, true] {
        for changed in [100, 517, 899] {
            let (db, table) = padded_rows();
            let mut t = db.begin();
            assert_eq!(t.count(&table, &ids(100, 900)).expect("count"), 800);
            delete(&db, &table, changed);
            let what = format!("count, row {changed} deleted, read-only {read_only}");
            assert_phantom(commit(t, &table, read_only), &what);
        }
    }
}

#[test]
fn a_count_aborts_when_a_row_enters_its_range() {
    let (db, table) = padded_rows();
    delete(&db, &table, 517);
    let mut t = db.begin();
    assert_eq!(t.count(&table, &ids(100, 900)).expect("count"), 799);
    db.run(1, |txn| txn.insert(&table, &row(517)))
        .expect("the insert");
    assert_phantom(commit(t, &table, false), "count, row 517 inserted");
}

#[test]
fn a_count_stands_when_only_leaves_it_did_not_read_change() {
    let (db, table) = padded_rows();
    let mut t = db.begin();
    assert_eq!(t.count(&table, &ids(100, 300)).expect("count"), 200);
    delete(&db, &table, 700);
    commit(t, &table, false).expect("a change far from the range does not abort the count");
    let mut t = db.begin();
    assert_eq!(t.count(&table, &ids(100, 300)).expect("count"), 200);
}

#[test]
fn an_index_walk_aborts_when_an_entry_it_passed_over_changes() {
    let (db, table) = padded_rows();
    let group_three = KeyRange::prefix(vec![Value::Int(3)]);
    let mut t = db.begin();
    let entries = t
        .index_entries(
            &table,
            "by_group",
            &group_three,
            ScanDirection::Descending,
            90,
            2,
        )
        .expect("entries");
    // Group 3 is ids 300..400: descending, the 91st and 92nd are 309 and 308.
    let want = [309, 308].map(|id| vec![Value::Int(3), Value::Int(id)]);
    assert_eq!(entries, want);
    assert_eq!(
        t.count_index(&table, "by_group", &group_three)
            .expect("count"),
        100
    );
    delete(&db, &table, 350);
    assert_phantom(commit(t, &table, false), "index walk, entry 350 deleted");
}

#[test]
fn counts_and_walks_see_the_transactions_own_writes() {
    let (db, table) = padded_rows();
    let mut t = db.begin();
    t.delete(&table, &[Value::Int(150)]).expect("delete");
    t.insert(&table, &row(ROWS + 5)).expect("insert");
    assert_eq!(t.count(&table, &ids(100, ROWS + 10)).expect("count"), 900);
    let group_one = KeyRange::prefix(vec![Value::Int(1)]);
    assert_eq!(
        t.count_index(&table, "by_group", &group_one)
            .expect("count"),
        99
    );
    let entries = t
        .index_entries(
            &table,
            "by_group",
            &group_one,
            ScanDirection::Ascending,
            50,
            1,
        )
        .expect("entries");
    assert_eq!(entries, [vec![Value::Int(1), Value::Int(151)]]);
    t.commit().expect("commit");
}

/// Writers delete and insert rows of a range while readers count it, walk its index past a
/// skip, and scan both, in one transaction each: every reader that commits must have counted
/// what it scanned, and found past its skip the entry its scan has there.
#[test]
fn concurrent_counts_and_walks_agree_with_scans_that_commit_with_them() {
    let (db, table) = padded_rows();
    let (db, table) = (&db, &table);
    let (writing, agreed) = (&AtomicBool::new(true), &AtomicUsize::new(0));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(move || {
                while writing.load(Ordering::Relaxed) {
                    if counts_agree_with_scans(db, table) {
                        agreed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        let writers: Vec<_> = (0..2u64)
            .map(|seed| s.spawn(move || toggle_rows(db, table, seed)))
            .collect();
        for writer in writers {
            writer.join().expect("writer");
        }
        writing.store(false, Ordering::Relaxed);
    });
    assert!(
        agreed.load(Ordering::Relaxed) > 0,
        "no reader ever committed"
    );
}

/// Deletes or inserts 1,500 random rows of `200..800`, a commit each.
fn toggle_rows(db: &Database, table: &Table, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..1500 {
        let id = rng.gen_range(200..800);
        db.run(50, |txn| {
            if !txn.delete(table, &[Value::Int(id)])? {
                txn.insert(table, &row(id))?;
            }
            Ok(())
        })
        .expect("a toggle");
    }
}

/// One reader's transaction; whether it committed (and so agreed).
fn counts_agree_with_scans(db: &Database, table: &Table) -> bool {
    let (range, group_five) = (ids(200, 800), KeyRange::prefix(vec![Value::Int(5)]));
    let ascending = ScanDirection::Ascending;
    let mut t = db.begin();
    let mut read = || -> crate::Result<_> {
        let counted = t.count(table, &range)?;
        let sixth = t.index_entries(table, "by_group", &group_five, ascending, 5, 1)?;
        let rows = t.scan(table, &range, ascending, usize::MAX)?;
        let group = t.scan_index(table, "by_group", &group_five, ascending, 6)?;
        Ok((counted, sixth, rows, group))
    };
    let (counted, sixth, rows, group) = match read() {
        Ok(read) => read,
        // A row deleted under the index scan: an abort, as a commit's.
        Err(err) if err.is_retryable() => return false,
        Err(err) => panic!("{err}"),
    };
    if t.commit().is_err() {
        return false;
    }
    assert_eq!(counted, rows.len(), "a committed count missed a change");
    let want: Vec<Vec<Value>> = group
        .get(5)
        .map(|r| vec![r[1].clone(), r[0].clone()])
        .into_iter()
        .collect();
    assert_eq!(sixth, want, "a committed walk missed a change");
    true
}
