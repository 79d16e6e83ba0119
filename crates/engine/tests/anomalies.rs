//! Deterministic interleavings of two transactions in one thread: the anomalies serializable
//! isolation must prevent (lost update, write skew, phantoms, stale reads in read-only
//! transactions), read-your-own-writes, and the abort counters.
//!
//! Each scenario opens two transactions with `Database::begin`, interleaves their reads and
//! writes by hand, commits one and then the other. In one thread a commit runs from start to
//! end before the next one starts, so the second committer always finds the first one's
//! writes applied: the expected cause is `read-changed` for rows and `phantom` for ranges.

mod support;

use std::ops::Bound;

use tailstore_engine::{AbortCause, Database, EngineError, EngineStats, KeyRange, Table};
use tailstore_storage::{ScanDirection, Value};

use support::{assert_aborted, items_database, key, Item};

fn item(id: i64, grp: i64, val: i64) -> Item {
    Item::new(id, grp, val, 8)
}

fn get(db: &Database, table: &Table, id: i64) -> Option<Item> {
    let mut txn = db.begin();
    let row = txn.get(table, &key(id)).expect("get");
    txn.commit().expect("read-only commit");
    row.map(|r| Item::from_values(&r))
}

fn all(db: &Database, table: &Table) -> Vec<Item> {
    let mut txn = db.begin();
    let rows = txn
        .scan(
            table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan");
    txn.commit().expect("read-only commit");
    rows.iter().map(|r| Item::from_values(r)).collect()
}

fn aborts(stats: &EngineStats, cause: AbortCause) -> u64 {
    stats
        .aborts_by_cause()
        .find(|&(c, _)| c == cause)
        .map(|(_, n)| n)
        .expect("every cause is counted")
}

fn rows_in(values: &[Vec<Value>]) -> Vec<i64> {
    values.iter().map(|r| Item::from_values(r).id).collect()
}

#[test]
fn lost_update_is_prevented() {
    let (_s, db, table) = items_database(&[item(1, 0, 100)]);
    let mut t1 = db.begin();
    let mut t2 = db.begin();
    let mut x1 = Item::from_values(&t1.get(&table, &key(1)).unwrap().unwrap());
    let mut x2 = Item::from_values(&t2.get(&table, &key(1)).unwrap().unwrap());
    assert_eq!((x1.val, x2.val), (100, 100));
    x1.val += 10;
    x2.val += 20;
    t1.update(&table, &x1.values()).unwrap();
    t2.update(&table, &x2.values()).unwrap();
    t1.commit().expect("the first committer wins");
    assert_aborted(t2.commit(), AbortCause::ReadChanged);
    assert_eq!(get(&db, &table, 1).unwrap().val, 110, "only T1's increment");

    // Retried, T2 sees T1's value and both increments count.
    db.run(3, |txn| {
        let mut x = Item::from_values(&txn.get(&table, &key(1))?.unwrap());
        x.val += 20;
        txn.update(&table, &x.values())
    })
    .unwrap();
    assert_eq!(get(&db, &table, 1).unwrap().val, 130);
}

#[test]
fn deleting_a_changed_row_or_inserting_a_taken_key_aborts() {
    // A delete reads the row it deletes: deleting a row another transaction updated aborts.
    let (_s, db, table) = items_database(&[item(1, 0, 100), item(2, 0, 200)]);
    let mut t1 = db.begin();
    let mut t2 = db.begin();
    assert!(t1.delete(&table, &key(1)).unwrap());
    let mut x = Item::from_values(&t2.get(&table, &key(1)).unwrap().unwrap());
    x.val = 101;
    t2.update(&table, &x.values()).unwrap();
    t2.commit().unwrap();
    assert_aborted(t1.commit(), AbortCause::ReadChanged);
    assert_eq!(get(&db, &table, 1).unwrap().val, 101);

    // Two inserts of the same key: the second one's "absent" read changed.
    let mut t1 = db.begin();
    let mut t2 = db.begin();
    t1.insert(&table, &item(7, 1, 700).values()).unwrap();
    t2.insert(&table, &item(7, 2, 701).values()).unwrap();
    t1.commit().unwrap();
    assert_aborted(t2.commit(), AbortCause::ReadChanged);
    assert_eq!(get(&db, &table, 7).unwrap().grp, 1);
}

#[test]
fn write_skew_is_prevented() {
    // Doctors on call: x and y are on call (val 1); each may go off call if the other stays.
    let (_s, db, table) = items_database(&[item(1, 0, 1), item(2, 0, 2)]);
    let on_call = |txn: &mut tailstore_engine::Transaction<'_>, id: i64| -> bool {
        Item::from_values(&txn.get(&table, &key(id)).unwrap().unwrap()).grp == 0
    };
    let mut t1 = db.begin();
    let mut t2 = db.begin();
    assert!(on_call(&mut t1, 1) && on_call(&mut t1, 2));
    assert!(on_call(&mut t2, 1) && on_call(&mut t2, 2));
    // Both see two doctors on call, so each takes itself off.
    let mut x = item(1, 0, 1);
    x.grp = 1;
    t1.update(&table, &x.values()).unwrap();
    let mut y = item(2, 0, 2);
    y.grp = 1;
    t2.update(&table, &y.values()).unwrap();
    t1.commit().unwrap();
    assert_aborted(t2.commit(), AbortCause::ReadChanged);
    let on_call_now = all(&db, &table).iter().filter(|i| i.grp == 0).count();
    assert_eq!(on_call_now, 1, "the invariant (someone on call) holds");
}

#[test]
fn phantom_in_a_primary_key_range_is_prevented() {
    let items: Vec<Item> = (10..20).step_by(2).map(|i| item(i, 0, i)).collect();
    let (_s, db, table) = items_database(&items);
    let range = KeyRange::new(
        Bound::Included(vec![Value::Int(10)]),
        Bound::Excluded(vec![Value::Int(20)]),
    );

    // T1 counts the rows in [10, 20) and records the count elsewhere; T2 inserts 15 first.
    let mut t1 = db.begin();
    let seen = t1
        .scan(&table, &range, ScanDirection::Ascending, usize::MAX)
        .unwrap();
    assert_eq!(rows_in(&seen), vec![10, 12, 14, 16, 18]);
    t1.insert(&table, &item(1000, 9, seen.len() as i64).values())
        .unwrap();
    let mut t2 = db.begin();
    t2.insert(&table, &item(15, 0, 15).values()).unwrap();
    t2.commit().unwrap();
    assert_aborted(t1.commit(), AbortCause::Phantom);
    assert!(get(&db, &table, 1000).is_none(), "T1 left nothing behind");

    // The same with a delete in the range.
    let mut t1 = db.begin();
    let seen = t1
        .scan(&table, &range, ScanDirection::Descending, usize::MAX)
        .unwrap();
    assert_eq!(rows_in(&seen), vec![18, 16, 15, 14, 12, 10]);
    t1.insert(&table, &item(1000, 9, 6).values()).unwrap();
    let mut t2 = db.begin();
    assert!(t2.delete(&table, &key(12)).unwrap());
    t2.commit().unwrap();
    assert_aborted(t1.commit(), AbortCause::Phantom);

    // A change outside the range does not abort T1.
    let mut t1 = db.begin();
    let seen = t1
        .scan(&table, &range, ScanDirection::Ascending, usize::MAX)
        .unwrap();
    t1.insert(&table, &item(1000, 9, seen.len() as i64).values())
        .unwrap();
    let mut t2 = db.begin();
    t2.insert(&table, &item(20, 0, 20).values()).unwrap();
    t2.insert(&table, &item(9, 0, 9).values()).unwrap();
    t2.commit().unwrap();
    t1.commit()
        .expect("inserts next to the range are not phantoms");
    assert_eq!(get(&db, &table, 1000).unwrap().val, 5);
}

#[test]
fn phantom_in_a_secondary_index_range_is_prevented() {
    // Rows of group 7 are spread over the primary key; T2 adds one far from the others.
    let items = vec![
        item(1, 7, 1),
        item(2, 3, 2),
        item(50, 7, 50),
        item(60, 8, 60),
    ];
    let (_s, db, table) = items_database(&items);
    let group7 = KeyRange::prefix(vec![Value::Int(7)]);

    let mut t1 = db.begin();
    let seen = t1
        .scan_index(
            &table,
            "by_grp",
            &group7,
            ScanDirection::Ascending,
            usize::MAX,
        )
        .unwrap();
    assert_eq!(rows_in(&seen), vec![1, 50]);
    t1.insert(&table, &item(1000, 9, 1002).values()).unwrap();
    let mut t2 = db.begin();
    t2.insert(&table, &item(99, 7, 99).values()).unwrap();
    t2.commit().unwrap();
    assert_aborted(t1.commit(), AbortCause::Phantom);

    // Moving a row into the group (an update of its index column) is a phantom too.
    let mut t1 = db.begin();
    let seen = t1
        .scan_index(
            &table,
            "by_grp",
            &group7,
            ScanDirection::Descending,
            usize::MAX,
        )
        .unwrap();
    assert_eq!(rows_in(&seen), vec![99, 50, 1]);
    t1.insert(&table, &item(1000, 9, 1003).values()).unwrap();
    let mut t2 = db.begin();
    t2.update(&table, &item(60, 7, 60).values()).unwrap();
    t2.commit().unwrap();
    assert_aborted(t1.commit(), AbortCause::Phantom);

    // A unique index: two transactions claiming the same value for different rows.
    let mut t1 = db.begin();
    let mut t2 = db.begin();
    t1.insert(&table, &item(200, 0, 777).values()).unwrap();
    t2.insert(&table, &item(201, 0, 777).values()).unwrap();
    t1.commit().unwrap();
    assert_aborted(t2.commit(), AbortCause::Phantom);
    let mut t3 = db.begin();
    assert!(matches!(
        t3.insert(&table, &item(202, 0, 777).values()),
        Err(EngineError::DuplicateKey(_))
    ));
}

#[test]
fn phantom_in_a_descending_scan_with_a_limit_covers_only_what_it_saw() {
    let items: Vec<Item> = (20..=40).step_by(2).map(|i| item(i, 0, i)).collect();
    let (_s, db, table) = items_database(&items);
    let top3 = |txn: &mut tailstore_engine::Transaction<'_>| {
        rows_in(
            &txn.scan(&table, &KeyRange::all(), ScanDirection::Descending, 3)
                .unwrap(),
        )
    };

    // An insert below the part the scan covered ([36, +inf)) is not a phantom.
    let mut t1 = db.begin();
    assert_eq!(top3(&mut t1), vec![40, 38, 36]);
    t1.insert(&table, &item(1000, 9, 1000).values()).unwrap();
    let mut t2 = db.begin();
    t2.insert(&table, &item(21, 0, 21).values()).unwrap();
    t2.commit().unwrap();
    t1.commit()
        .expect("an insert beyond the limit is not a phantom");

    // Inside the covered part ([38, +inf) now that 1000 is the top row), or above the rows
    // it saw, it is.
    for (id, seen) in [(39, vec![1000, 40, 38]), (41, vec![1000, 40, 38])] {
        let mut t1 = db.begin();
        assert_eq!(top3(&mut t1), seen);
        t1.insert(&table, &item(2000 + id, 9, 2000 + id).values())
            .unwrap();
        let mut t2 = db.begin();
        t2.insert(&table, &item(id, 0, id).values()).unwrap();
        t2.commit().unwrap();
        assert_aborted(t1.commit(), AbortCause::Phantom);
        let mut cleanup = db.begin();
        cleanup.delete(&table, &key(id)).unwrap();
        cleanup.commit().unwrap();
    }
    let mut t1 = db.begin();
    assert_eq!(top3(&mut t1), vec![1000, 40, 38]);
    t1.insert(&table, &item(3000, 9, 3000).values()).unwrap();
    let mut t2 = db.begin();
    t2.insert(&table, &item(1001, 0, 1001).values()).unwrap();
    t2.commit().unwrap();
    assert_aborted(t1.commit(), AbortCause::Phantom);
}

#[test]
fn read_your_own_writes() {
    let items: Vec<Item> = (1..=10).map(|i| item(i, i % 2, i)).collect();
    let (_s, db, table) = items_database(&items);
    let scan = |txn: &mut tailstore_engine::Transaction<'_>, dir, limit| {
        rows_in(&txn.scan(&table, &KeyRange::all(), dir, limit).unwrap())
    };
    let mut txn = db.begin();
    txn.insert(&table, &item(0, 0, 100).values()).unwrap();
    txn.insert(&table, &item(11, 1, 111).values()).unwrap();
    assert_eq!(
        txn.get(&table, &key(0))
            .unwrap()
            .map(|r| Item::from_values(&r)),
        Some(item(0, 0, 100))
    );
    assert_eq!(scan(&mut txn, ScanDirection::Ascending, 3), vec![0, 1, 2]);
    assert_eq!(scan(&mut txn, ScanDirection::Descending, 2), vec![11, 10]);

    // Deleted rows disappear from gets and scans; limits still count visible rows.
    assert!(txn.delete(&table, &key(1)).unwrap());
    assert!(txn.delete(&table, &key(2)).unwrap());
    assert!(txn.delete(&table, &key(0)).unwrap(), "its own insert");
    assert!(!txn.delete(&table, &key(0)).unwrap(), "already gone");
    assert_eq!(txn.get(&table, &key(1)).unwrap(), None);
    assert_eq!(scan(&mut txn, ScanDirection::Ascending, 3), vec![3, 4, 5]);
    assert!(txn.delete(&table, &key(11)).unwrap());
    assert!(txn.delete(&table, &key(10)).unwrap());
    assert_eq!(scan(&mut txn, ScanDirection::Descending, 2), vec![9, 8]);
    assert_eq!(
        scan(&mut txn, ScanDirection::Ascending, usize::MAX),
        vec![3, 4, 5, 6, 7, 8, 9]
    );

    // Updates, through an index too; a re-insert after a delete.
    txn.update(&table, &item(3, 5, 33).values()).unwrap();
    txn.insert(&table, &item(1, 5, 11).values()).unwrap();
    let group5 = txn
        .scan_index(
            &table,
            "by_grp",
            &KeyRange::prefix(vec![Value::Int(5)]),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .unwrap();
    assert_eq!(
        group5
            .iter()
            .map(|r| Item::from_values(r))
            .collect::<Vec<_>>(),
        vec![item(1, 5, 11), item(3, 5, 33)]
    );
    let odd = txn
        .scan_index(
            &table,
            "by_grp",
            &KeyRange::prefix(vec![Value::Int(1)]),
            ScanDirection::Descending,
            usize::MAX,
        )
        .unwrap();
    assert_eq!(
        rows_in(&odd),
        vec![9, 7, 5],
        "3 moved to group 5, 1 and 11 gone"
    );
    let by_val = txn
        .scan_index(
            &table,
            "by_val",
            &KeyRange::all(),
            ScanDirection::Descending,
            2,
        )
        .unwrap();
    assert_eq!(
        rows_in(&by_val),
        vec![3, 1],
        "vals 33 and 11 are the largest"
    );
    assert!(matches!(
        txn.insert(&table, &item(50, 0, 33).values()),
        Err(EngineError::DuplicateKey(_))
    ));
    assert!(matches!(
        txn.update(&table, &item(2, 0, 2).values()),
        Err(EngineError::RowNotFound(_))
    ));

    // Nothing is visible to others before the commit; everything after it.
    assert_eq!(all(&db, &table).len(), 10);
    txn.commit().unwrap();
    let ids: Vec<i64> = all(&db, &table).iter().map(|i| i.id).collect();
    assert_eq!(ids, vec![1, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(get(&db, &table, 3), Some(item(3, 5, 33)));
    assert_eq!(get(&db, &table, 1), Some(item(1, 5, 11)));

    // A rolled-back transaction (explicitly or by drop) changes nothing.
    let mut txn = db.begin();
    txn.insert(&table, &item(100, 0, 100).values()).unwrap();
    txn.rollback();
    {
        let mut txn = db.begin();
        txn.delete(&table, &key(3)).unwrap();
    }
    assert_eq!(all(&db, &table).len(), 8);
    db.check().unwrap();
}

#[test]
fn single_point_read_needs_no_validation() {
    let (_s, db, table) = items_database(&[item(1, 0, 100)]);
    let mut reader = db.begin();
    assert_eq!(
        Item::from_values(&reader.get(&table, &key(1)).unwrap().unwrap()).val,
        100
    );
    let mut writer = db.begin();
    writer.update(&table, &item(1, 0, 101).values()).unwrap();
    writer.commit().unwrap();
    // The reader serializes before the writer: it saw the value before the update.
    reader.commit().unwrap();
}

#[test]
fn read_only_transaction_that_read_a_changed_row_aborts() {
    let (_s, db, table) = items_database(&[item(1, 0, 100), item(2, 0, 200)]);
    // Point reads, one of a row changed before the reader commits. (A transaction with a
    // single point read and nothing else is serializable at its read and is not validated;
    // see `single_point_read_needs_no_validation`.)
    let mut reader = db.begin();
    assert_eq!(
        Item::from_values(&reader.get(&table, &key(1)).unwrap().unwrap()).val,
        100
    );
    assert!(reader.get(&table, &key(2)).unwrap().is_some());
    let mut writer = db.begin();
    writer.update(&table, &item(1, 0, 101).values()).unwrap();
    writer.commit().unwrap();
    assert_aborted(reader.commit(), AbortCause::ReadChanged);

    // A read of an absent row that is then inserted.
    let mut reader = db.begin();
    assert!(reader.get(&table, &key(3)).unwrap().is_none());
    assert!(reader.get(&table, &key(2)).unwrap().is_some());
    let mut writer = db.begin();
    writer.insert(&table, &item(3, 0, 300).values()).unwrap();
    writer.commit().unwrap();
    assert_aborted(reader.commit(), AbortCause::ReadChanged);

    // A scan whose range gains a row.
    let mut reader = db.begin();
    let sum: i64 = reader
        .scan(
            &table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .unwrap()
        .iter()
        .map(|r| Item::from_values(r).val)
        .sum();
    assert_eq!(sum, 601);
    let mut writer = db.begin();
    writer.insert(&table, &item(4, 0, 400).values()).unwrap();
    writer.commit().unwrap();
    assert_aborted(reader.commit(), AbortCause::Phantom);

    // An unchanged read set commits.
    let mut reader = db.begin();
    reader.get(&table, &key(1)).unwrap();
    let mut writer = db.begin();
    writer.update(&table, &item(2, 0, 201).values()).unwrap();
    writer.commit().unwrap();
    reader.commit().expect("nothing it read changed");
}

/// `get_many` reads in shared descents what `get` reads one at a time, and each row it read
/// is validated: a change to any of them (the last one too, found in the first one's leaf)
/// aborts a read-only transaction.
#[test]
fn get_many_reads_and_validates_every_row() {
    let items: Vec<Item> = (1..=6).map(|id| item(id, 0, id * 100)).collect();
    let (_s, db, table) = items_database(&items);
    let keys: Vec<Vec<Value>> = [1, 2, 3, 9, 4].iter().map(|&id| key(id)).collect();
    let mut reader = db.begin();
    let rows = reader.get_many(&table, &keys).unwrap();
    let ids: Vec<Option<i64>> = rows
        .iter()
        .map(|row| row.as_ref().map(|r| Item::from_values(r).id))
        .collect();
    assert_eq!(ids, [Some(1), Some(2), Some(3), None, Some(4)]);
    reader.commit().expect("nothing changed");

    for changed in [1, 4] {
        let mut reader = db.begin();
        reader.get_many(&table, &keys).unwrap();
        let mut writer = db.begin();
        writer
            .update(&table, &item(changed, 0, changed * 100 + 1).values())
            .unwrap();
        writer.commit().unwrap();
        assert_aborted(reader.commit(), AbortCause::ReadChanged);
    }
    // The absent key, inserted meanwhile.
    let mut reader = db.begin();
    reader.get_many(&table, &keys).unwrap();
    let mut writer = db.begin();
    writer.insert(&table, &item(9, 0, 900).values()).unwrap();
    writer.commit().unwrap();
    assert_aborted(reader.commit(), AbortCause::ReadChanged);

    // Through the transaction's own writes.
    let mut txn = db.begin();
    txn.update(&table, &item(2, 0, 7).values()).unwrap();
    txn.delete(&table, &key(3)).unwrap();
    let rows = txn.get_many(&table, &keys).unwrap();
    let vals: Vec<Option<i64>> = rows
        .iter()
        .map(|row| row.as_ref().map(|r| Item::from_values(r).val))
        .collect();
    assert_eq!(vals, [Some(101), Some(7), None, Some(900), Some(401)]);
    txn.commit().unwrap();
}

#[test]
fn stats_count_commits_rollbacks_and_aborts_by_cause() {
    let (_s, db, table) = items_database(&[item(1, 0, 1000), item(2, 0, 2000)]);
    let before = db.stats();
    assert_eq!(before.total_aborts(), 0);

    // Two read-changed aborts, one phantom, three rollbacks, and the commits around them.
    let mut commits = 0;
    for _ in 0..2 {
        let mut t1 = db.begin();
        let mut t2 = db.begin();
        let x = Item::from_values(&t1.get(&table, &key(1)).unwrap().unwrap());
        t1.update(
            &table,
            &Item {
                val: x.val + 1,
                ..x.clone()
            }
            .values(),
        )
        .unwrap();
        t2.get(&table, &key(1)).unwrap();
        t2.update(
            &table,
            &Item {
                val: x.val + 2,
                ..x
            }
            .values(),
        )
        .unwrap();
        t1.commit().unwrap();
        commits += 1;
        assert_aborted(t2.commit(), AbortCause::ReadChanged);
    }
    let mut t1 = db.begin();
    t1.scan(&table, &KeyRange::all(), ScanDirection::Ascending, 10)
        .unwrap();
    let mut t2 = db.begin();
    t2.insert(&table, &item(5, 0, 5).values()).unwrap();
    t2.commit().unwrap();
    commits += 1;
    assert_aborted(t1.commit(), AbortCause::Phantom);
    db.begin().rollback();
    db.begin().rollback();
    drop(db.begin());
    let mut ro = db.begin();
    ro.get(&table, &key(2)).unwrap();
    ro.commit().unwrap();
    commits += 1;

    let after = db.stats();
    assert_eq!(
        aborts(&after, AbortCause::ReadChanged) - aborts(&before, AbortCause::ReadChanged),
        2
    );
    assert_eq!(
        aborts(&after, AbortCause::Phantom) - aborts(&before, AbortCause::Phantom),
        1
    );
    assert_eq!(
        aborts(&after, AbortCause::WriteConflict) - aborts(&before, AbortCause::WriteConflict),
        0
    );
    assert_eq!(after.total_aborts() - before.total_aborts(), 3);
    assert_eq!(after.commits - before.commits, commits);
    assert_eq!(after.rollbacks - before.rollbacks, 3);
}

/// A New-Order-like transaction reads a counter row, then inserts the id it read. If another
/// transaction advanced the counter and took that id first, the insert's duplicate key is an
/// effect of the stale read: the error must be a retryable abort, not `DuplicateKey`.
#[test]
fn duplicate_caused_by_a_stale_read_is_a_retryable_abort() {
    let (_s, db, table) = items_database(&[item(1, 0, 10)]); // row 1 is the counter: next id 10
    let mut slow = db.begin();
    let next = Item::from_values(&slow.get(&table, &key(1)).unwrap().unwrap()).val;
    let mut fast = db.begin();
    fast.update(&table, &item(1, 0, next + 1).values()).unwrap();
    fast.insert(&table, &item(next, 0, 0).values()).unwrap();
    fast.commit().unwrap();
    let err = slow.insert(&table, &item(next, 0, 0).values()).unwrap_err();
    assert!(err.is_retryable(), "expected an abort, got {err}");
    let before = db.stats();
    drop(slow);
    // Counted once, as an abort: dropping the doomed transaction is not also a rollback.
    assert_eq!(db.stats().rollbacks, before.rollbacks);
    assert_eq!(before.total_aborts(), 1);

    // Without a stale read the duplicate is the caller's error.
    let mut txn = db.begin();
    let err = txn.insert(&table, &item(next, 0, 0).values()).unwrap_err();
    assert!(
        matches!(err, tailstore_engine::EngineError::DuplicateKey(_)),
        "{err}"
    );
}
