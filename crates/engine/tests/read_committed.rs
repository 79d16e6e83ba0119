//! Read-committed transactions (`Database::begin_read_committed`, "Read-committed
//! transactions" in `txn.rs`): they see committed changes only, are never aborted by what
//! changed after they read it, wait for the log as far as what they saw, and refuse writes.

mod support;

use tailstore_engine::{EngineError, KeyRange, Table};
use tailstore_storage::ScanDirection;

use support::{items_database, key, Item};

fn item(id: i64, val: i64) -> Item {
    Item::new(id, 0, val, 8)
}

fn value_of(txn: &mut tailstore_engine::Transaction<'_>, table: &Table, id: i64) -> Option<i64> {
    txn.get(table, &key(id))
        .expect("get")
        .map(|row| Item::from_values(&row).val)
}

fn sum_of_all(txn: &mut tailstore_engine::Transaction<'_>, table: &Table) -> i64 {
    txn.scan(
        table,
        &KeyRange::all(),
        ScanDirection::Ascending,
        usize::MAX,
    )
    .expect("scan")
    .iter()
    .map(|row| Item::from_values(row).val)
    .sum()
}

/// The three read sets that abort a serializable read-only transaction
/// (`anomalies.rs`, `read_only_transaction_that_read_a_changed_row_aborts`) commit at
/// level 1, and what they read is what was committed when they read it.
#[test]
fn reads_commit_although_what_they_read_changed() {
    let (_s, db, table) = items_database(&[item(1, 100), item(2, 200)]);
    let mut reader = db.begin_read_committed();
    let mut writer = db.begin();
    writer.update(&table, &item(1, 101).values()).unwrap();
    // Buffered, not committed: invisible (no dirty read).
    assert_eq!(value_of(&mut reader, &table, 1), Some(100));
    assert_eq!(value_of(&mut reader, &table, 3), None);
    assert_eq!(sum_of_all(&mut reader, &table), 300);
    writer.insert(&table, &item(3, 300).values()).unwrap();
    writer.commit().unwrap();
    // Committed since: seen by the next read (a non-repeatable read, which level 1 allows).
    assert_eq!(value_of(&mut reader, &table, 1), Some(101));
    assert_eq!(sum_of_all(&mut reader, &table), 601);
    reader
        .commit()
        .expect("a read-committed transaction is not validated");
    assert_eq!(db.stats().total_aborts(), 0);

    // The same reads in a serializable transaction abort: the test's reads did change.
    let mut serializable = db.begin();
    value_of(&mut serializable, &table, 1);
    sum_of_all(&mut serializable, &table);
    let mut writer = db.begin();
    writer.update(&table, &item(2, 201).values()).unwrap();
    writer.commit().unwrap();
    let err = serializable.commit().unwrap_err();
    assert!(err.is_retryable(), "{err}");
}

/// A write is refused, whatever its kind, and leaves the transaction's reads committable; the
/// refused writes change nothing.
#[test]
fn writes_are_refused() {
    let (_s, db, table) = items_database(&[item(1, 100)]);
    let mut reader = db.begin_read_committed();
    assert_eq!(value_of(&mut reader, &table, 1), Some(100));
    let refused = [
        reader.insert(&table, &item(2, 1).values()),
        reader.update(&table, &item(1, 1).values()),
        reader.put(&table, &item(3, 1).values()),
        reader.remove(&table, &key(1)),
    ];
    for (n, outcome) in refused.into_iter().enumerate() {
        assert!(
            matches!(outcome, Err(EngineError::ReadCommittedWrite)),
            "write {n}: {outcome:?}"
        );
    }
    let deleted = reader.delete(&table, &key(1));
    assert!(
        matches!(deleted, Err(EngineError::ReadCommittedWrite)),
        "delete: {deleted:?}"
    );
    reader.commit().expect("reads only");
    let mut check = db.begin();
    assert_eq!(value_of(&mut check, &table, 1), Some(100));
    assert_eq!(value_of(&mut check, &table, 2), None);
    assert_eq!(value_of(&mut check, &table, 3), None);
    check.commit().unwrap();
}

/// What a reader saw must be durable before its commit is acknowledged: its commit waits for
/// the log at least as far as the record of the writer whose change it read.
#[test]
fn the_commit_waits_for_what_was_read() {
    let (_s, db, table) = items_database(&[item(1, 100)]);
    let mut writer = db.begin();
    writer.update(&table, &item(1, 101).values()).unwrap();
    let written = writer.commit_pending().unwrap();
    let writer_lsn = written.lsn();
    let mut reader = db.begin_read_committed();
    assert_eq!(value_of(&mut reader, &table, 1), Some(101));
    let read = reader.commit_pending().unwrap();
    assert!(
        read.lsn() >= writer_lsn,
        "the reader waits for {} only, the change it saw is at {writer_lsn}",
        read.lsn()
    );
    written.wait().unwrap();
    read.wait().unwrap();
}
