//! Two commits interleaved step by step (see `crate::interleave`): a writer W stopped between
//! its validation and its apply, and a transaction T stopped halfway through validating a
//! read, let W apply and release its locks exactly between T's two checks of that read.
//!
//! The schedule is write skew through a read of something absent: W reads row x (absent)
//! and inserts row k; T reads k (absent, by a point read or by a scan of a range around it)
//! and inserts x. Neither saw the other's write, so at most one of them may commit. W holds
//! its lock on k from before T's validation until after its row is in the tree, so T's
//! validation catches it only if it checks the lock first and the tree second: checked the
//! other way round, the tree is read before W applies and the lock after W released it.
//!
//! The net for the orders nobody thought to stop at is in `histories`.

use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use tailstore_log::CommitMode;
use tailstore_media::scaled_growth::ScaledGrowth;
use tailstore_media::sim::SimStorage;
use tailstore_storage::{Column, ColumnType, IndexDef, ScanDirection, Schema, Value, PAGE_SIZE};

use crate::interleave::{self, Point};
use crate::plant::Plant;
use crate::{AbortCause, Database, DbConfig, EngineError, KeyRange, Table};

const X: i64 = 1;
const K: i64 = 15;

/// The configuration of the databases here: simulated storage, a small pool, no checkpoint
/// unless a test takes one, and a small log ring (a power cut copies all of it).
pub(super) fn sim_config(mode: CommitMode) -> DbConfig {
    let mut config = DbConfig::new("/db", mode, Some(PathBuf::from("/pmem")));
    config.buffer_pool_bytes = 64 * PAGE_SIZE;
    config.checkpoint_interval = None;
    config.log.block_bytes = 4 * 1024;
    config.log.ring_bytes = 512 * 1024;
    config
}

/// Opens a database on `storage`, as it is, with `config`.
pub(super) fn open_sim(storage: &SimStorage, config: &DbConfig) -> Database {
    let (db, _) =
        Database::open_with(Arc::new(ScaledGrowth(storage.clone())), config.clone()).expect("open");
    db
}

/// A database configured by `config` on simulated storage, with one table, "rows", of
/// `columns` (the first is the primary key), holding `rows`; and the storage it is on.
pub(super) fn database_in(
    config: &DbConfig,
    columns: Vec<Column>,
    rows: &[Vec<Value>],
) -> (SimStorage, Database, Table) {
    let storage = SimStorage::new();
    let db = open_sim(&storage, config);
    let schema = Schema::new(columns, vec![0], vec![]).expect("schema");
    let table = db.create_table("rows", &schema).expect("create");
    let mut txn = db.begin();
    for row in rows {
        txn.insert(&table, row).expect("insert");
    }
    txn.commit().expect("setup");
    (storage, db, table)
}

pub(super) fn integer_columns(names: &[&str]) -> Vec<Column> {
    names
        .iter()
        .map(|&name| Column::new(name, ColumnType::Int64))
        .collect()
}

/// Rows 10 and 20, in a database with `plants` planted in it ([`crate::plant`]).
fn planted_database(plants: &[Plant]) -> (Database, Table) {
    let rows = [10, 20].map(|id| vec![Value::Int(id), Value::Int(0)]);
    let mut config = sim_config(CommitMode::Fsync);
    config.plants = plants.to_vec();
    let (_, db, table) = database_in(&config, integer_columns(&["id", "val"]), &rows);
    (db, table)
}

/// How T reads k.
#[derive(Clone, Copy, Debug)]
enum Read {
    Point,
    Scan,
    /// A count of the range, validated by its leaves' stamps.
    Count,
}

/// Runs the schedule; returns W's and T's commit outcomes.
fn write_skew_between_the_checks(
    read: Read,
    plants: &[Plant],
) -> (crate::Result<()>, crate::Result<()>) {
    let (db, table) = planted_database(plants);
    let [w_validated, w_may_apply, w_applied] = [(); 3].map(|()| Arc::new(Barrier::new(2)));
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let mut w = db.begin();
            assert!(w.get(&table, &[Value::Int(X)]).expect("get x").is_none());
            w.insert(&table, &[Value::Int(K), Value::Int(1)])
                .expect("insert k");
            let (validated, may_apply) = (w_validated.clone(), w_may_apply.clone());
            interleave::at(Point::Validated, move || {
                validated.wait();
                may_apply.wait();
            });
            let outcome = w.commit();
            w_applied.wait();
            outcome
        });
        let mut t = db.begin();
        let around_k = KeyRange::new(
            Bound::Excluded(vec![Value::Int(10)]),
            Bound::Excluded(vec![Value::Int(20)]),
        );
        match read {
            Read::Point => assert!(t.get(&table, &[Value::Int(K)]).expect("get k").is_none()),
            Read::Scan => {
                let rows = t
                    .scan(&table, &around_k, ScanDirection::Ascending, usize::MAX)
                    .expect("scan");
                assert!(rows.is_empty());
            }
            Read::Count => assert_eq!(t.count(&table, &around_k).expect("count"), 0),
        }
        t.insert(&table, &[Value::Int(X), Value::Int(1)])
            .expect("insert x");
        // T locks x only now, after W validated its read of x.
        w_validated.wait();
        let stopped = Arc::new(AtomicBool::new(false));
        let (may_apply, applied, flag) = (w_may_apply.clone(), w_applied.clone(), stopped.clone());
        let between_the_checks = match read {
            Read::Point => Point::BetweenTheChecksOfAPointRead,
            Read::Scan | Read::Count => Point::BetweenTheChecksOfAScan,
        };
        interleave::at(between_the_checks, move || {
            flag.store(true, Ordering::Relaxed);
            may_apply.wait();
            applied.wait();
        });
        let t_outcome = t.commit();
        if !stopped.load(Ordering::Relaxed) {
            // T's first check already failed: let W finish.
            w_may_apply.wait();
            w_applied.wait();
        }
        (w.join().expect("W"), t_outcome)
    })
}

fn assert_one_commits(read: Read, cause: AbortCause, plants: &[Plant]) {
    let (w, t) = write_skew_between_the_checks(read, plants);
    w.expect("W validated before T locked x, so W commits");
    match t {
        Err(EngineError::Aborted { cause: c }) => assert_eq!(c, cause, "{read:?}"),
        Ok(()) => panic!("{read:?}: T committed too: write skew (W applied between T's checks)"),
        Err(other) => panic!("{read:?}: {other}"),
    }
}

#[test]
fn a_writer_between_the_checks_of_a_point_read_is_caught() {
    assert_one_commits(Read::Point, AbortCause::ReadChanged, &[]);
}

#[test]
fn a_writer_between_the_checks_of_a_scan_is_caught() {
    assert_one_commits(Read::Scan, AbortCause::Phantom, &[]);
}

/// The test above, with the scan validated in the old order: it must fail.
#[test]
#[should_panic(expected = "Scan: T committed too")]
fn planted_rescan_before_lock_check_is_caught() {
    assert_one_commits(
        Read::Scan,
        AbortCause::Phantom,
        &[Plant::RescanBeforeLockCheck],
    );
}

#[test]
fn a_writer_between_the_checks_of_a_count_is_caught() {
    assert_one_commits(Read::Count, AbortCause::Phantom, &[]);
}

/// The count's leaves checked before its range's locks: it must fail.
#[test]
#[should_panic(expected = "Count: T committed too")]
fn planted_rescan_before_lock_check_is_caught_in_a_count() {
    assert_one_commits(
        Read::Count,
        AbortCause::Phantom,
        &[Plant::RescanBeforeLockCheck],
    );
}

/// A commit that deletes a row, and its index entry, between a secondary-index scan's read
/// of the index and its reads of the rows the index named: the scan's transaction aborts,
/// retryably (the range it scanned changed). It reported the database corrupt, which no
/// runner retries (a sorted-set range read beside a ZREM answered "database is corrupt").
#[test]
fn a_row_deleted_under_an_index_scan_is_a_retryable_abort() {
    let storage = SimStorage::new();
    let db = Arc::new(open_sim(&storage, &sim_config(CommitMode::Fsync)));
    let indexes = vec![IndexDef::new("by_group", vec![1], false)];
    let schema = Schema::new(integer_columns(&["id", "group"]), vec![0], indexes).expect("schema");
    let table = db.create_table("rows", &schema).expect("create");
    db.run(1, |txn| txn.insert(&table, &[Value::Int(1), Value::Int(7)]))
        .expect("the row");
    let (deleter, rows) = (db.clone(), table.clone());
    interleave::at(Point::IndexScanned, move || {
        deleter
            .run(1, |txn| txn.delete(&rows, &[Value::Int(1)]).map(drop))
            .expect("the delete");
    });
    let mut txn = db.begin();
    let all = KeyRange::all();
    match txn.scan_index(&table, "by_group", &all, ScanDirection::Ascending, 10) {
        Err(err) => assert!(err.is_retryable(), "not retryable: {err:?}"),
        Ok(rows) => panic!("the scan read {rows:?} from under a delete"),
    }
}

/// A commit writes its record after releasing the trees' latches (`wal.rs`, "Reserve under
/// the latches, write after them"): between the two, its change is in the tree and its
/// record is not in the log. A read of that change, stopped exactly there, must not be
/// acknowledged before the record is durable: its read-only commit waits at least for the
/// end of the writer's record, which at that moment is not yet written.
#[test]
fn a_change_read_before_its_record_is_written_waits_for_that_record() {
    let rows = [vec![Value::Int(10), Value::Int(0)]];
    let config = sim_config(CommitMode::Buffer);
    let (_storage, db, table) = database_in(&config, integer_columns(&["id", "val"]), &rows);
    let db = Arc::new(db);
    let seen = Arc::new(parking_lot::Mutex::new(None));
    let (reader_db, reader_table, saw) = (db.clone(), table.clone(), seen.clone());
    interleave::at(Point::PlacedNotWritten, move || {
        // On the writer's thread: its latches released, its record unwritten (waiting for
        // the read's commit here would wait for this very thread).
        let mut reader = reader_db.begin();
        let row = reader
            .get(&reader_table, &[Value::Int(10)])
            .expect("read beside the unwritten record");
        let pending = reader.commit_pending().expect("the read-only commit");
        *saw.lock() = Some((row, pending.lsn(), reader_db.log().appended_lsn()));
    });
    let mut w = db.begin();
    w.update(&table, &[Value::Int(10), Value::Int(1)])
        .expect("update");
    let written = w.commit_pending().expect("the writer's commit");
    let end = written.lsn();
    written.wait().expect("durable");
    let (row, read_lsn, appended) = seen.lock().take().expect("the hook ran");
    assert_eq!(
        row,
        Some(vec![Value::Int(10), Value::Int(1)]),
        "the change is readable once the latches are released"
    );
    assert!(
        appended < end,
        "the record ending at {end} was already written when the reader ran ({appended})"
    );
    assert!(
        read_lsn >= end,
        "the read of a change whose record ends at {end} waits only for {read_lsn}"
    );
}
