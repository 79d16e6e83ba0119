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

use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use tailstore_log::CommitMode;
use tailstore_media::scaled_growth::ScaledGrowth;
use tailstore_media::sim::SimStorage;
use tailstore_storage::{Column, ColumnType, ScanDirection, Schema, Value, PAGE_SIZE};

use crate::interleave::{self, Point};
use crate::{AbortCause, Database, DbConfig, EngineError, KeyRange, Table};

const X: i64 = 1;
const K: i64 = 15;

fn database() -> (Database, Table) {
    let mut config = DbConfig::new("/db", CommitMode::Fsync, Some(PathBuf::from("/pmem")));
    config.buffer_pool_bytes = 64 * PAGE_SIZE;
    config.checkpoint_interval = None;
    let storage = Arc::new(ScaledGrowth(SimStorage::new()));
    let (db, _) = Database::open_with(storage, config).expect("open");
    let schema = Schema::new(
        vec![
            Column::new("id", ColumnType::Int64),
            Column::new("val", ColumnType::Int64),
        ],
        vec![0],
        vec![],
    )
    .expect("schema");
    let table = db.create_table("rows", &schema).expect("create");
    let mut txn = db.begin();
    for id in [10, 20] {
        txn.insert(&table, &[Value::Int(id), Value::Int(0)])
            .expect("insert");
    }
    txn.commit().expect("setup");
    (db, table)
}

/// How T reads k.
#[derive(Clone, Copy, Debug)]
enum Read {
    Point,
    Scan,
}

/// Runs the schedule; returns W's and T's commit outcomes.
fn write_skew_between_the_checks(read: Read) -> (crate::Result<()>, crate::Result<()>) {
    let (db, table) = database();
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
        match read {
            Read::Point => assert!(t.get(&table, &[Value::Int(K)]).expect("get k").is_none()),
            Read::Scan => {
                let range = KeyRange::new(
                    Bound::Excluded(vec![Value::Int(10)]),
                    Bound::Excluded(vec![Value::Int(20)]),
                );
                let rows = t
                    .scan(&table, &range, ScanDirection::Ascending, usize::MAX)
                    .expect("scan");
                assert!(rows.is_empty());
            }
        }
        t.insert(&table, &[Value::Int(X), Value::Int(1)])
            .expect("insert x");
        // T locks x only now, after W validated its read of x.
        w_validated.wait();
        let stopped = Arc::new(AtomicBool::new(false));
        let (may_apply, applied, flag) = (w_may_apply.clone(), w_applied.clone(), stopped.clone());
        let between_the_checks = match read {
            Read::Point => Point::BetweenTheChecksOfAPointRead,
            Read::Scan => Point::BetweenTheChecksOfAScan,
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

fn assert_one_commits(read: Read, cause: AbortCause) {
    let (w, t) = write_skew_between_the_checks(read);
    w.expect("W validated before T locked x, so W commits");
    match t {
        Err(EngineError::Aborted { cause: c }) => assert_eq!(c, cause, "{read:?}"),
        Ok(()) => panic!("{read:?}: T committed too: write skew (W applied between T's checks)"),
        Err(other) => panic!("{read:?}: {other}"),
    }
}

#[test]
fn a_writer_between_the_checks_of_a_point_read_is_caught() {
    assert_one_commits(Read::Point, AbortCause::ReadChanged);
}

#[test]
#[cfg_attr(
    feature = "planted-rescan-before-lock-check",
    should_panic(expected = "Scan: T committed too")
)]
fn a_writer_between_the_checks_of_a_scan_is_caught() {
    assert_one_commits(Read::Scan, AbortCause::Phantom);
}
