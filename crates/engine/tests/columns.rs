//! Column-granular reads and writes: `Transaction::get_columns`, `update_columns` and `add`.
//!
//! What is covered:
//! - conflicts follow columns: a reader of some columns is not aborted by a committed change
//!   to other columns of its row, is aborted by one to a column it read (or by a whole-row
//!   change that alters it, or a delete), and a change that leaves the read values as they
//!   were still validates (validation compares values once the version moved);
//! - patches apply to the row as it is at commit: concurrent additions to one counter all
//!   count, concurrent sets of different columns all survive;
//! - read-your-own-writes through `get`, `get_columns`, `scan` and `scan_index`, and how a
//!   patch combines with the transaction's own `insert`, `update` and `delete`;
//! - the errors: a missing row, a key, index, text or missing column, a wrong value type,
//!   and additions that overflow a column at commit (the commit fails, nothing changes, and
//!   the database goes on);
//! - durability of patched rows across a clean close and a power cut;
//! - a small bank-style invariant under concurrency: transfers made of `add`s (and some of
//!   `get_columns` + `Set`) between counter columns of two rows, audited by read-only
//!   transactions that read only those columns.
//!
//! The deterministic scenarios interleave two transactions in one thread, as
//! `anomalies.rs` does: a commit runs to its end before the next one starts, so the second
//! committer always finds the first one's writes applied (and its locks released).

mod support;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use tailstore_engine::{
    pause_before_retry, AbortCause, ColumnChange, Database, EngineError, KeyRange, Table,
    Transaction,
};
use tailstore_log::CommitMode;
use tailstore_media::sim::SimStorage;
use tailstore_storage::{Column, ColumnType, IndexDef, ScanDirection, Schema, Value};

use support::{assert_aborted, crash_and_drop, key, open_sim, sim_config, Crash, TempDb};

// ---------------------------------------------------------------------------------------------
// The `counters` table.

/// Columns of `counters(id INT64 PRIMARY KEY, grp INT64 (indexed), a INT64, b INT64,
/// bal DECIMAL(6, 2), name VARCHAR(20), small INT32, opt INT64 NULL)`.
const ID: usize = 0;
const GRP: usize = 1;
const A: usize = 2;
const B: usize = 3;
const BAL: usize = 4;
const NAME: usize = 5;
const SMALL: usize = 6;
const OPT: usize = 7;
const COLUMNS: usize = 8;

/// The largest value of `bal` (DECIMAL(6, 2): 9999.99 in scaled units).
const BAL_MAX: i64 = 999_999;

/// A row no scenario reads: transactions write it so that they have writes to commit (and
/// so are validated), without touching what the scenario is about.
const SCRATCH: i64 = 99;

fn schema() -> Schema {
    Schema::new(
        vec![
            Column::new("id", ColumnType::Int64),
            Column::new("grp", ColumnType::Int64),
            Column::new("a", ColumnType::Int64),
            Column::new("b", ColumnType::Int64),
            Column::new(
                "bal",
                ColumnType::Decimal {
                    precision: 6,
                    scale: 2,
                },
            ),
            Column::new("name", ColumnType::Varchar(20)),
            Column::new("small", ColumnType::Int32),
            Column::nullable("opt", ColumnType::Int64),
        ],
        vec![ID],
        vec![IndexDef::new("by_grp", vec![GRP], false)],
    )
    .expect("valid schema")
}

/// A row with counters `a` and `b`; the other columns follow from `id`.
fn row(id: i64, a: i64, b: i64) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Int(id % 3),
        Value::Int(a),
        Value::Int(b),
        Value::Decimal(0),
        Value::Text(format!("row {id}")),
        Value::Int(0),
        Value::Null,
    ]
}

fn int(value: &Value) -> i64 {
    match value {
        Value::Int(v) | Value::Decimal(v) => *v,
        other => panic!("expected a number, found {other:?}"),
    }
}

/// A database on the simulated storage with `counters` holding `rows` and [`SCRATCH`].
fn setup(rows: &[Vec<Value>]) -> (SimStorage, Database, Table) {
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &sim_config(CommitMode::Fsync, 256)).expect("open");
    let table = db.create_table("counters", &schema()).expect("create");
    let mut txn = db.begin();
    for r in rows.iter().chain([&row(SCRATCH, 0, 0)]) {
        txn.insert(&table, r).expect("insert");
    }
    txn.commit().expect("setup commit");
    (storage, db, table)
}

/// The committed row `id`, read in a transaction of its own.
fn committed(db: &Database, table: &Table, id: i64) -> Option<Vec<Value>> {
    let mut txn = db.begin();
    let row = txn.get(table, &key(id)).expect("get");
    txn.commit().expect("read-only commit");
    row
}

/// Column `column` of the committed row `id`, which must exist.
fn committed_int(db: &Database, table: &Table, id: i64, column: usize) -> i64 {
    let row = committed(db, table, id).unwrap_or_else(|| panic!("row {id} exists"));
    int(&row[column])
}

/// Gives `txn` a write no scenario reads, so that its commit validates its reads.
fn write_elsewhere(txn: &mut Transaction<'_>, table: &Table) {
    txn.add(table, &key(SCRATCH), A, 1)
        .expect("add to the scratch row");
}

#[track_caller]
fn assert_column_error<T: std::fmt::Debug>(result: tailstore_engine::Result<T>, what: &str) {
    match result {
        Err(EngineError::Column(_)) => {}
        other => panic!("{what}: expected a column error, got {other:?}"),
    }
}

#[track_caller]
fn assert_row_not_found<T: std::fmt::Debug>(result: tailstore_engine::Result<T>, what: &str) {
    match result {
        Err(EngineError::RowNotFound(table)) => assert_eq!(table, "counters", "{what}"),
        other => panic!("{what}: expected RowNotFound, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Conflicts follow columns.

#[test]
fn disjoint_columns_do_not_conflict() {
    let (_s, db, table) = setup(&[row(1, 10, 20), row(2, 30, 40)]);

    // T1 reads `a` of row 1; T2 adds to `b` of row 1 and commits first.
    let mut t1 = db.begin();
    let read = t1.get_columns(&table, &key(1), &[A]).expect("get_columns");
    assert_eq!(read, Some(vec![Value::Int(10)]));
    write_elsewhere(&mut t1, &table);
    let mut t2 = db.begin();
    t2.add(&table, &key(1), B, 5).expect("add");
    t2.commit().expect("T2 commits");
    t1.commit()
        .expect("a change to a column T1 did not read does not abort it");
    assert_eq!(committed_int(&db, &table, 1, B), 25);

    // The same when T1 is read-only (two reads, so its commit validates them).
    let mut t1 = db.begin();
    t1.get_columns(&table, &key(1), &[A, NAME]).expect("read 1");
    t1.get_columns(&table, &key(2), &[A]).expect("read 2");
    let mut t2 = db.begin();
    t2.update_columns(
        &table,
        &key(1),
        &[
            (B, ColumnChange::Add(5)),
            (BAL, ColumnChange::Set(Value::Decimal(123))),
        ],
    )
    .expect("update_columns");
    t2.commit().expect("T2 commits");
    t1.commit()
        .expect("a read-only reader of other columns commits");

    // Contrast: a whole-row `get` depends on every column, so the same change aborts it.
    let mut t1 = db.begin();
    assert!(t1.get(&table, &key(1)).expect("get").is_some());
    write_elsewhere(&mut t1, &table);
    let mut t2 = db.begin();
    t2.add(&table, &key(1), B, 5).expect("add");
    t2.commit().expect("T2 commits");
    assert_aborted(t1.commit(), AbortCause::ReadChanged);
    assert_eq!(committed_int(&db, &table, 1, B), 35);
    assert_eq!(
        committed_int(&db, &table, SCRATCH, A),
        1,
        "only the first T1 committed its write to the scratch row"
    );
}

#[test]
fn overlapping_columns_abort() {
    let (_s, db, table) = setup(&[row(1, 10, 20), row(2, 30, 40)]);

    // T1 reads `b`; T2 adds to `b` and commits first.
    let mut t1 = db.begin();
    t1.get_columns(&table, &key(1), &[A, B])
        .expect("get_columns");
    write_elsewhere(&mut t1, &table);
    let mut t2 = db.begin();
    t2.add(&table, &key(1), B, 5).expect("add");
    t2.commit().expect("T2 commits");
    assert_aborted(t1.commit(), AbortCause::ReadChanged);

    // A read-only T1 with two column reads, one of them changed.
    let mut t1 = db.begin();
    t1.get_columns(&table, &key(1), &[B]).expect("read 1");
    t1.get_columns(&table, &key(2), &[B]).expect("read 2");
    let mut t2 = db.begin();
    t2.update_columns(&table, &key(2), &[(B, ColumnChange::Set(Value::Int(41)))])
        .expect("update_columns");
    t2.commit().expect("T2 commits");
    assert_aborted(t1.commit(), AbortCause::ReadChanged);

    // A whole-row update that changes a column T1 read.
    let mut t1 = db.begin();
    t1.get_columns(&table, &key(1), &[B]).expect("get_columns");
    write_elsewhere(&mut t1, &table);
    let mut t2 = db.begin();
    t2.update(&table, &row(1, 10, 99)).expect("update");
    t2.commit().expect("T2 commits");
    assert_aborted(t1.commit(), AbortCause::ReadChanged);

    // A delete of the row: a column read depends on the row existing.
    let mut t1 = db.begin();
    t1.get_columns(&table, &key(2), &[A]).expect("get_columns");
    write_elsewhere(&mut t1, &table);
    let mut t2 = db.begin();
    assert!(t2.delete(&table, &key(2)).expect("delete"));
    t2.commit().expect("T2 commits");
    assert_aborted(t1.commit(), AbortCause::ReadChanged);

    // And a column read of a missing row is aborted by its insert.
    let mut t1 = db.begin();
    assert_eq!(
        t1.get_columns(&table, &key(2), &[A]).expect("get_columns"),
        None
    );
    write_elsewhere(&mut t1, &table);
    let mut t2 = db.begin();
    t2.insert(&table, &row(2, 30, 40)).expect("insert");
    t2.commit().expect("T2 commits");
    assert_aborted(t1.commit(), AbortCause::ReadChanged);

    assert_eq!(committed_int(&db, &table, 1, B), 99);
    assert_eq!(
        committed_int(&db, &table, SCRATCH, A),
        0,
        "every T1 aborted"
    );
}

#[test]
fn a_changed_row_with_the_same_values_still_validates() {
    let (_s, db, table) = setup(&[row(1, 10, 20)]);

    // T2 sets `a` to the value it already has: a new version, the same value.
    let mut t1 = db.begin();
    t1.get_columns(&table, &key(1), &[A]).expect("get_columns");
    write_elsewhere(&mut t1, &table);
    let mut whole = db.begin();
    whole.get(&table, &key(1)).expect("get");
    write_elsewhere(&mut whole, &table);
    let mut t2 = db.begin();
    t2.update_columns(&table, &key(1), &[(A, ColumnChange::Set(Value::Int(10)))])
        .expect("update_columns");
    t2.commit().expect("T2 commits");
    t1.commit()
        .expect("the column T1 read holds the value it read");
    // The version did move: a whole-row reader of the same row aborts.
    assert_aborted(whole.commit(), AbortCause::ReadChanged);

    // A value changed and changed back (A-B-A) before T1 commits.
    let mut t1 = db.begin();
    t1.get_columns(&table, &key(1), &[A]).expect("get_columns");
    write_elsewhere(&mut t1, &table);
    for delta in [7, -7] {
        let mut t = db.begin();
        t.add(&table, &key(1), A, delta).expect("add");
        t.commit().expect("commit");
    }
    t1.commit().expect("`a` is back to what T1 read");

    // A whole-row update that leaves the columns T1 read as they were.
    let mut t1 = db.begin();
    t1.get_columns(&table, &key(1), &[A, NAME])
        .expect("get_columns");
    write_elsewhere(&mut t1, &table);
    let mut t2 = db.begin();
    t2.update(&table, &row(1, 10, 21)).expect("update");
    t2.commit().expect("T2 commits");
    t1.commit()
        .expect("a whole-row update that kept `a` and `name` does not abort T1");
    assert_eq!(committed_int(&db, &table, SCRATCH, A), 3);
}

// ---------------------------------------------------------------------------------------------
// Patches apply to the row as it is at commit.

#[test]
fn concurrent_adds_and_sets_are_not_lost() {
    let (_s, db, table) = setup(&[row(1, 10, 100), row(2, 0, 0)]);

    // Two additions to one counter, both begun before either commits.
    let mut t1 = db.begin();
    let mut t2 = db.begin();
    t1.add(&table, &key(1), B, 10).expect("add 10");
    t2.add(&table, &key(1), B, 32).expect("add 32");
    t1.commit().expect("T1 commits");
    t2.commit()
        .expect("T2 commits: an addition does not read the counter");
    assert_eq!(committed_int(&db, &table, 1, B), 142);

    // Sets of different columns (and an addition) by two transactions: all survive.
    let mut t1 = db.begin();
    let mut t2 = db.begin();
    t1.update_columns(
        &table,
        &key(1),
        &[
            (A, ColumnChange::Set(Value::Int(7))),
            (BAL, ColumnChange::Add(250)),
        ],
    )
    .expect("T1 update_columns");
    t2.update_columns(
        &table,
        &key(1),
        &[
            (NAME, ColumnChange::Set(Value::Text("renamed".into()))),
            (BAL, ColumnChange::Add(-50)),
            (OPT, ColumnChange::Set(Value::Int(5))),
        ],
    )
    .expect("T2 update_columns");
    t2.commit().expect("T2 commits");
    t1.commit().expect("T1 commits");
    let got = committed(&db, &table, 1).expect("row 1");
    assert_eq!(
        got,
        vec![
            Value::Int(1),
            Value::Int(1),
            Value::Int(7),
            Value::Int(142),
            Value::Decimal(200),
            Value::Text("renamed".into()),
            Value::Int(0),
            Value::Int(5),
        ],
        "T1's `a`, T2's `name` and `opt`, both additions to `bal`"
    );

    // A patch after a whole-row update committed in between applies to the new row.
    let mut t1 = db.begin();
    t1.add(&table, &key(2), A, 1).expect("add");
    let mut t2 = db.begin();
    t2.update(&table, &row(2, 100, 200)).expect("update");
    t2.commit().expect("T2 commits");
    t1.commit()
        .expect("a patch depends only on the row existing");
    assert_eq!(committed(&db, &table, 2), Some(row(2, 101, 200)));

    // But not to a row deleted in between.
    let mut t1 = db.begin();
    t1.add(&table, &key(2), A, 1).expect("add");
    let mut t2 = db.begin();
    assert!(t2.delete(&table, &key(2)).expect("delete"));
    t2.commit().expect("T2 commits");
    assert_aborted(t1.commit(), AbortCause::ReadChanged);
    assert_eq!(committed(&db, &table, 2), None);

    // A read of the counter followed by an addition to it is a read-modify-write: it
    // conflicts with a concurrent addition to the same counter.
    let mut t1 = db.begin();
    let b = t1.get_columns(&table, &key(1), &[B]).expect("get_columns");
    assert_eq!(b, Some(vec![Value::Int(142)]));
    t1.add(&table, &key(1), B, 1).expect("add");
    let mut t2 = db.begin();
    t2.add(&table, &key(1), B, 1).expect("add");
    t2.commit().expect("T2 commits");
    assert_aborted(t1.commit(), AbortCause::ReadChanged);
    assert_eq!(committed_int(&db, &table, 1, B), 143);
    db.check().expect("trees are sound");
}

// ---------------------------------------------------------------------------------------------
// Read-your-own-writes.

#[test]
fn a_transaction_sees_its_own_patches() {
    let (_s, db, table) = setup(&[row(1, 10, 20), row(2, 30, 40), row(3, 50, 60)]);
    let mut txn = db.begin();
    txn.add(&table, &key(1), A, 5).expect("add");
    txn.update_columns(
        &table,
        &key(1),
        &[
            (A, ColumnChange::Add(1)),
            (NAME, ColumnChange::Set(Value::Text("patched".into()))),
        ],
    )
    .expect("update_columns");
    let mut want = row(1, 16, 20);
    want[NAME] = Value::Text("patched".into());
    assert_eq!(
        txn.get(&table, &key(1)).expect("get"),
        Some(want.clone()),
        "get"
    );
    assert_eq!(
        txn.get_columns(&table, &key(1), &[NAME, A, B])
            .expect("get_columns"),
        Some(vec![
            Value::Text("patched".into()),
            Value::Int(16),
            Value::Int(20)
        ]),
        "get_columns"
    );
    let scanned = txn
        .scan(
            &table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan");
    assert_eq!(scanned.len(), 4);
    assert_eq!(scanned[0], want, "the scan shows the patched row");
    let by_grp = txn
        .scan_index(
            &table,
            "by_grp",
            &KeyRange::prefix(vec![Value::Int(1)]),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan_index");
    assert_eq!(by_grp, vec![want.clone()], "the index scan too");

    // Nothing is visible to others before the commit.
    assert_eq!(committed(&db, &table, 1), Some(row(1, 10, 20)));

    // An `update` after a patch replaces the row; a patch after it applies to the new row.
    txn.update(&table, &row(2, 0, 0)).expect("update");
    txn.add(&table, &key(2), A, 3).expect("add after update");
    assert_eq!(txn.get(&table, &key(2)).expect("get"), Some(row(2, 3, 0)));
    txn.add(&table, &key(3), A, 1).expect("add");
    txn.update(&table, &row(3, 500, 600))
        .expect("update after add");
    assert_eq!(
        txn.get(&table, &key(3)).expect("get"),
        Some(row(3, 500, 600)),
        "the update replaced the patched row"
    );

    // A patch of a row the transaction inserted.
    txn.insert(&table, &row(10, 0, 0)).expect("insert");
    txn.add(&table, &key(10), B, 9).expect("add after insert");
    assert_eq!(
        txn.get_columns(&table, &key(10), &[B])
            .expect("get_columns"),
        Some(vec![Value::Int(9)])
    );

    // A patch of a row the transaction deleted.
    txn.add(&table, &key(SCRATCH), A, 1).expect("add");
    assert!(txn.delete(&table, &key(SCRATCH)).expect("delete after add"));
    assert_row_not_found(
        txn.update_columns(&table, &key(SCRATCH), &[(A, ColumnChange::Add(1))]),
        "update_columns after delete",
    );
    assert_row_not_found(txn.add(&table, &key(SCRATCH), A, 1), "add after delete");
    assert_eq!(
        txn.get_columns(&table, &key(SCRATCH), &[A])
            .expect("get_columns"),
        None
    );
    txn.commit().expect("commit");

    assert_eq!(committed(&db, &table, 1), Some(want));
    assert_eq!(committed(&db, &table, 2), Some(row(2, 3, 0)));
    assert_eq!(committed(&db, &table, 3), Some(row(3, 500, 600)));
    assert_eq!(committed(&db, &table, 10), Some(row(10, 0, 9)));
    assert_eq!(committed(&db, &table, SCRATCH), None);
    // Rows and `by_grp` entries of rows 1, 2, 3 and 10.
    assert_eq!(db.check().expect("check"), 8);
}

// ---------------------------------------------------------------------------------------------
// Errors.

#[test]
fn column_requests_the_table_does_not_allow_are_refused() {
    let (_s, db, table) = setup(&[row(1, 10, 20)]);
    let mut txn = db.begin();
    assert_row_not_found(txn.add(&table, &key(2), A, 1), "add to a missing row");
    assert_row_not_found(
        txn.update_columns(&table, &key(2), &[(A, ColumnChange::Set(Value::Int(1)))]),
        "update_columns of a missing row",
    );
    assert_column_error(txn.add(&table, &key(1), ID, 1), "add to the primary key");
    assert_column_error(
        txn.update_columns(&table, &key(1), &[(ID, ColumnChange::Set(Value::Int(5)))]),
        "set the primary key",
    );
    assert_column_error(txn.add(&table, &key(1), GRP, 1), "add to an indexed column");
    assert_column_error(
        txn.update_columns(&table, &key(1), &[(GRP, ColumnChange::Set(Value::Int(2)))]),
        "set an indexed column",
    );
    assert_column_error(txn.add(&table, &key(1), NAME, 1), "add to a text column");
    assert_column_error(txn.add(&table, &key(1), COLUMNS, 1), "add to no column");
    assert_column_error(
        txn.get_columns(&table, &key(1), &[A, COLUMNS]),
        "get_columns of no column",
    );
    assert_column_error(
        txn.update_columns(
            &table,
            &key(1),
            &[
                (A, ColumnChange::Add(1)),
                (COLUMNS + 3, ColumnChange::Add(1)),
            ],
        ),
        "update_columns of no column",
    );
    match txn.update_columns(
        &table,
        &key(1),
        &[(A, ColumnChange::Set(Value::Text("ten".into())))],
    ) {
        Err(EngineError::Row(_)) => {}
        other => {
            panic!("set a text value in an integer column: expected a row error, got {other:?}")
        }
    }
    match txn.update_columns(
        &table,
        &key(1),
        &[(SMALL, ColumnChange::Set(Value::Int(1 << 40)))],
    ) {
        Err(EngineError::Row(_)) => {}
        other => panic!("set an INT32 out of range: expected a row error, got {other:?}"),
    }
    // None of the refused requests was buffered: the transaction commits nothing.
    txn.commit().expect("commit");
    assert_eq!(committed(&db, &table, 1), Some(row(1, 10, 20)));
}

/// An addition that takes a column beyond its type fails the commit (not retryable) and
/// changes nothing, in the same transaction or any other; the database goes on.
#[test]
fn an_addition_that_overflows_fails_the_commit_and_changes_nothing() {
    let (_s, db, table) = setup(&[row(1, 10, 20), row(2, 30, 40)]);
    let mut txn = db.begin();
    txn.update_columns(
        &table,
        &key(1),
        &[(BAL, ColumnChange::Set(Value::Decimal(BAL_MAX - 100)))],
    )
    .expect("update_columns");
    txn.commit().expect("commit");
    let before = committed(&db, &table, 1).expect("row 1");
    let scratch = committed(&db, &table, SCRATCH).expect("scratch row");

    let overflows: [(&str, usize, i64); 4] = [
        ("DECIMAL(6, 2) precision", BAL, 101),
        ("INT32 range", SMALL, i64::from(i32::MAX) + 1),
        ("INT64 range", A, i64::MAX),
        ("NULL column", OPT, 1),
    ];
    for (what, column, delta) in overflows {
        let mut txn = db.begin();
        // Other rows change in the same transaction: none of the changes may apply.
        txn.add(&table, &key(2), A, 1).expect("add to row 2");
        txn.add(&table, &key(SCRATCH), B, 1)
            .expect("add to the scratch row");
        txn.add(&table, &key(1), column, delta)
            .unwrap_or_else(|e| panic!("{what}: the addition is checked at commit: {e}"));
        let err = match txn.commit() {
            Err(err) => err,
            Ok(()) => panic!("{what}: the commit must fail"),
        };
        assert!(!err.is_retryable(), "{what}: not retryable: {err}");
        assert!(
            matches!(err, EngineError::Row(_) | EngineError::Column(_)),
            "{what}: a row or column error, got {err:?}"
        );
        assert_eq!(committed(&db, &table, 1).as_ref(), Some(&before), "{what}");
        assert_eq!(committed(&db, &table, 2), Some(row(2, 30, 40)), "{what}");
        assert_eq!(
            committed(&db, &table, SCRATCH).as_ref(),
            Some(&scratch),
            "{what}"
        );
    }

    // The failed commits left no lock behind and the database accepts writes: up to the
    // largest value `bal` holds, and concurrent additions again.
    let mut t1 = db.begin();
    let mut t2 = db.begin();
    t1.add(&table, &key(1), BAL, 60).expect("add");
    t2.add(&table, &key(1), BAL, 40).expect("add");
    t1.commit().expect("T1 commits");
    t2.commit().expect("T2 commits");
    assert_eq!(committed_int(&db, &table, 1, BAL), BAL_MAX);
    let mut txn = db.begin();
    txn.update(&table, &row(2, 31, 41)).expect("update");
    txn.commit().expect("a whole-row commit");
    assert_eq!(committed(&db, &table, 2), Some(row(2, 31, 41)));
    assert_eq!(db.check().expect("check"), 6);
}

// ---------------------------------------------------------------------------------------------
// Durability.

#[test]
fn patched_rows_survive_a_clean_close_and_a_power_cut() {
    let config = sim_config(CommitMode::Fsync, 256);
    let (storage, db, table) = setup(&[row(1, 10, 20), row(2, 30, 40)]);
    let patch_round = |db: &Database, table: &Table, round: i64| {
        let mut txn = db.begin();
        txn.add(table, &key(1), A, round).expect("add");
        txn.update_columns(
            table,
            &key(2),
            &[
                (B, ColumnChange::Add(-round)),
                (
                    NAME,
                    ColumnChange::Set(Value::Text(format!("round {round}"))),
                ),
                (BAL, ColumnChange::Add(100 * round)),
            ],
        )
        .expect("update_columns");
        txn.commit().expect("commit");
    };
    let expect_after = |db: &Database, table: &Table, rounds: i64, what: &str| {
        let sum: i64 = (1..=rounds).sum();
        let one = row(1, 10 + sum, 20);
        let mut two = row(2, 30, 40 - sum);
        two[NAME] = Value::Text(format!("round {rounds}"));
        two[BAL] = Value::Decimal(100 * sum);
        assert_eq!(committed(db, table, 1), Some(one), "{what}: row 1");
        assert_eq!(committed(db, table, 2), Some(two), "{what}: row 2");
        assert_eq!(db.check().expect("check"), 6, "{what}: entries");
    };

    for round in 1..=5 {
        patch_round(&db, &table, round);
    }
    db.checkpoint().expect("checkpoint");
    for round in 6..=10 {
        patch_round(&db, &table, round);
    }
    expect_after(&db, &table, 10, "before close");
    db.close().expect("close");

    let (db, report) = open_sim(&storage, &config).expect("reopen");
    assert!(!report.created);
    let table = db.table("counters").expect("table");
    expect_after(&db, &table, 10, "after a clean close");

    // Acknowledged patches after the last checkpoint are redone from the log.
    for round in 11..=15 {
        patch_round(&db, &table, round);
    }
    let after = crash_and_drop(&storage, db, Crash::PowerCut(7));
    let (db, _) = open_sim(&after, &config).expect("recover");
    let table = db.table("counters").expect("table");
    expect_after(&db, &table, 15, "after a power cut");
    patch_round(&db, &table, 16);
    expect_after(&db, &table, 16, "a patch after recovery");
    db.close().expect("close");
}

// ---------------------------------------------------------------------------------------------
// An invariant under concurrency.

/// Rows of the transfers: money moves from `a` of row [`FROM`] to `b` of row [`TO`].
const FROM: i64 = 1;
const TO: i64 = 2;
const START: i64 = 1_000_000;
/// Threads moving money with `add`, with `get_columns` + `Set` (read-modify-write), and
/// changing the columns the auditors do not read; auditors.
const ADDERS: usize = 3;
const RMW_MOVERS: usize = 1;
const NOISE: usize = 1;
const AUDITORS: usize = 2;
const RUN_FOR: Duration = Duration::from_millis(1_500);
/// Attempts per transaction (`Database::run`): effectively "until it commits".
const ATTEMPTS: usize = 100_000;

/// What the threads did, to compare with the database and its counters.
#[derive(Default)]
struct Tally {
    /// Sum of the amounts moved by committed transfers, and how many there were.
    moved: AtomicI64,
    transfers: AtomicU64,
    /// Sum of the additions to the columns the auditors do not read.
    noise: AtomicI64,
    audits: AtomicU64,
    failed_audits: AtomicU64,
    /// Transaction attempts (bodies run, audits begun) and committed attempts.
    attempts: AtomicU64,
    commits: AtomicU64,
}

/// Moves `amount` from `FROM.a` to `TO.b` with two additions.
fn transfer_by_add(
    txn: &mut Transaction<'_>,
    table: &Table,
    amount: i64,
) -> tailstore_engine::Result<()> {
    txn.add(table, &key(FROM), A, -amount)?;
    txn.add(table, &key(TO), B, amount)
}

/// Moves `amount` by reading both counters and setting them.
fn transfer_by_set(
    txn: &mut Transaction<'_>,
    table: &Table,
    amount: i64,
) -> tailstore_engine::Result<()> {
    let from = txn
        .get_columns(table, &key(FROM), &[A])?
        .expect("FROM exists");
    let to = txn.get_columns(table, &key(TO), &[B])?.expect("TO exists");
    txn.update_columns(
        table,
        &key(FROM),
        &[(A, ColumnChange::Set(Value::Int(int(&from[0]) - amount)))],
    )?;
    txn.update_columns(
        table,
        &key(TO),
        &[(B, ColumnChange::Set(Value::Int(int(&to[0]) + amount)))],
    )
}

/// Changes the columns next to the audited ones: `FROM.b`, `TO.a`, `TO.name`.
fn noise(txn: &mut Transaction<'_>, table: &Table, n: i64) -> tailstore_engine::Result<()> {
    txn.add(table, &key(FROM), B, n)?;
    txn.update_columns(
        table,
        &key(TO),
        &[
            (A, ColumnChange::Add(n)),
            (NAME, ColumnChange::Set(Value::Text(format!("noise {n}")))),
        ],
    )
}

/// `FROM.a + TO.b`, by column reads or (every other audit) whole-row reads.
fn audit(
    txn: &mut Transaction<'_>,
    table: &Table,
    by_columns: bool,
) -> tailstore_engine::Result<i64> {
    let (from, to) = if by_columns {
        let from = txn
            .get_columns(table, &key(FROM), &[A])?
            .expect("FROM exists");
        let to = txn.get_columns(table, &key(TO), &[B])?.expect("TO exists");
        (int(&from[0]), int(&to[0]))
    } else {
        let from = txn.get(table, &key(FROM))?.expect("FROM exists");
        let to = txn.get(table, &key(TO))?.expect("TO exists");
        (int(&from[A]), int(&to[B]))
    };
    Ok(from + to)
}

#[test]
fn transfers_by_column_changes_keep_the_total() {
    let dir = TempDb::new("columns");
    let config = dir.config(CommitMode::Buffer);
    let (db, _) = Database::open(config.clone()).expect("open");
    let table = db.create_table("counters", &schema()).expect("create");
    let mut txn = db.begin();
    txn.insert(&table, &row(FROM, START, 0)).expect("insert");
    txn.insert(&table, &row(TO, 0, 0)).expect("insert");
    txn.commit().expect("setup commit");
    let start = db.stats();

    let tally = Tally::default();
    let stop = AtomicBool::new(false);
    let writers = ADDERS + RMW_MOVERS + NOISE;
    let barrier = Barrier::new(writers + AUDITORS);
    let began = Instant::now();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..writers)
            .map(|t| {
                let (db, table, tally, barrier) = (&db, &table, &tally, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let mut i = 0i64;
                    while began.elapsed() < RUN_FOR {
                        i += 1;
                        let amount = 1 + (i * (t as i64 + 3)) % 17;
                        db.run(ATTEMPTS, |txn| {
                            tally.attempts.fetch_add(1, Ordering::Relaxed);
                            match t {
                                t if t < ADDERS => transfer_by_add(txn, table, amount),
                                t if t < ADDERS + RMW_MOVERS => transfer_by_set(txn, table, amount),
                                _ => noise(txn, table, amount),
                            }
                        })
                        .expect("a transaction commits within its attempts");
                        tally.commits.fetch_add(1, Ordering::Relaxed);
                        if t < ADDERS + RMW_MOVERS {
                            tally.moved.fetch_add(amount, Ordering::Relaxed);
                            tally.transfers.fetch_add(1, Ordering::Relaxed);
                        } else {
                            tally.noise.fetch_add(amount, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        let auditors: Vec<_> = (0..AUDITORS)
            .map(|t| {
                let (db, table, tally, barrier, stop) = (&db, &table, &tally, &barrier, &stop);
                s.spawn(move || {
                    barrier.wait();
                    // Audits alternate between column reads and whole-row reads.
                    let mut by_columns = t == 0;
                    // Aborts in a row: an aborted audit pauses as a retried transaction does.
                    let mut failed = 0;
                    while !stop.load(Ordering::Relaxed) {
                        by_columns = !by_columns;
                        tally.attempts.fetch_add(1, Ordering::Relaxed);
                        let mut txn = db.begin();
                        let sum = audit(&mut txn, table, by_columns).expect("audit reads");
                        match txn.commit() {
                            Ok(()) => {
                                assert_eq!(
                                    sum, START,
                                    "a committed audit (by columns: {by_columns}) saw money \
                                     appear or vanish"
                                );
                                tally.audits.fetch_add(1, Ordering::Relaxed);
                                tally.commits.fetch_add(1, Ordering::Relaxed);
                                failed = 0;
                            }
                            Err(err @ EngineError::Aborted { .. }) => {
                                assert!(err.is_retryable());
                                tally.failed_audits.fetch_add(1, Ordering::Relaxed);
                                failed += 1;
                                pause_before_retry(failed);
                            }
                            Err(other) => panic!("audit failed: {other}"),
                        }
                    }
                })
            })
            .collect();
        // Every worker is joined before the auditors are stopped, even if one panicked.
        let joined: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        stop.store(true, Ordering::Relaxed);
        for auditor in auditors {
            auditor.join().expect("auditor");
        }
        for outcome in joined {
            outcome.expect("writer thread");
        }
    });

    let end = db.stats();
    let moved = tally.moved.load(Ordering::Relaxed);
    let transfers = tally.transfers.load(Ordering::Relaxed);
    let noise_sum = tally.noise.load(Ordering::Relaxed);
    let audits = tally.audits.load(Ordering::Relaxed);
    let attempts = tally.attempts.load(Ordering::Relaxed);
    let commits = tally.commits.load(Ordering::Relaxed);
    let aborts = end.total_aborts() - start.total_aborts();
    eprintln!(
        "{transfers} transfers (moving {moved}) and {audits} audits committed in {:?}; \
         {aborts} aborts ({:?}), {} failed audits",
        began.elapsed(),
        end.aborts_by_cause()
            .zip(start.aborts)
            .map(|((cause, n), before)| (cause.name(), n - before))
            .collect::<Vec<_>>(),
        tally.failed_audits.load(Ordering::Relaxed),
    );
    assert!(audits > 0, "no audit committed");
    assert!(
        transfers >= (ADDERS + RMW_MOVERS) as u64,
        "too few transfers"
    );
    assert_eq!(end.commits - start.commits, commits, "commit counter");
    assert_eq!(aborts, attempts - commits, "abort counter");

    let check = |db: &Database, table: &Table, what: &str| {
        let from = committed(db, table, FROM).expect("FROM");
        let to = committed(db, table, TO).expect("TO");
        assert_eq!(int(&from[A]), START - moved, "{what}: FROM.a");
        assert_eq!(int(&to[B]), moved, "{what}: TO.b");
        assert_eq!(int(&from[B]), noise_sum, "{what}: FROM.b");
        assert_eq!(int(&to[A]), noise_sum, "{what}: TO.a");
        assert_eq!(db.check().expect("check"), 4, "{what}: entries");
    };
    check(&db, &table, "at the end");
    db.close().expect("close");
    let (db, _) = Database::open(config).expect("reopen");
    let table = db.table("counters").expect("table");
    check(&db, &table, "after reopen");
    db.close().expect("close");
}
