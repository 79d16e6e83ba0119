//! Commits whose record is longer than the log takes, logged in parts (`wal.rs`, "Commits
//! in parts"): a transaction that writes a few dozen kilobytes but empties a hundred leaves
//! (each merge logs three page images) or, without a double-write area, changes a hundred
//! leaves first since the checkpoint (each logs a full image), committed and survived every
//! crash; a crash between its parts loses all of it, and a later commit in parts does not
//! complete what that crash left.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use parking_lot::Mutex;
use tailstore_log::CommitMode;
use tailstore_media::scaled_growth::ScaledGrowth;
use tailstore_media::sim::SimStorage;
use tailstore_storage::{Column, ColumnType, ScanDirection, Value, PAGE_SIZE};

use super::interleavings::{database_in, sim_config};
use crate::interleave::{self, Point};
use crate::recovery::RecoveryReport;
use crate::{Database, DbConfig, KeyRange, Table};

/// Rows of [`VALUE`] bytes: about fifteen fit a leaf.
const ROWS: i64 = 3_200;
const VALUE: usize = 1_000;

type Model = BTreeMap<i64, u8>;

/// `pmem-log`'s region, whose records of up to 320 KiB are shorter than [`large_commit`]'s
/// over [`first_range`] (~680 KB, ~375 KB in parts once the split drops the ops that later
/// page images cover); the commit over all rows, as in the other modes, would need more
/// room than this region has.
const PMEM_LOG_BYTES: usize = 640 * 1024;

/// The rows the first large commit spans: in `pmem-log`, the lower half.
fn first_range(mode: CommitMode) -> Range<i64> {
    match mode {
        CommitMode::PmemLog => 0..ROWS / 2,
        _ => 0..ROWS,
    }
}

fn config(mode: CommitMode) -> DbConfig {
    let mut config = sim_config(mode);
    // Every page a commit changes stays in the pool until it is logged: room for all leaves.
    config.buffer_pool_bytes = 2048 * PAGE_SIZE;
    if mode == CommitMode::PmemLog {
        config.log.pmem_log_bytes = PMEM_LOG_BYTES;
        config.checkpoint_log_bytes = PMEM_LOG_BYTES as u64 / 4;
    }
    config
}

fn row(id: i64, generation: u8) -> Vec<Value> {
    vec![Value::Int(id), Value::Bytes(vec![generation; VALUE])]
}

/// `ROWS` rows of generation 0 thinned out to four in sixteen (about four to a leaf, just
/// over a quarter full: none merges until one more row goes), checkpointed, so that without
/// a double-write area each page's next change is imaged.
fn loaded(mode: CommitMode) -> (SimStorage, Database, Table, Model) {
    let columns = vec![
        Column::new("id", ColumnType::Int64),
        Column::new("val", ColumnType::Bytes(VALUE as u32)),
    ];
    let (storage, db, table) = database_in(&config(mode), columns, &[]);
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(40) {
        let mut txn = db.begin();
        for &id in chunk {
            txn.insert(&table, &row(id, 0)).expect("insert");
        }
        txn.commit().expect("load");
    }
    let ids: Vec<i64> = (0..ROWS).filter(|id| id % 16 >= 4).collect();
    for chunk in ids.chunks(400) {
        let mut txn = db.begin();
        for &id in chunk {
            txn.delete(&table, &[Value::Int(id)]).expect("delete");
        }
        txn.commit().expect("thin out");
    }
    db.checkpoint().expect("checkpoint");
    (
        storage,
        db,
        table,
        (0..ROWS)
            .filter(|id| id % 16 < 4)
            .map(|id| (id, 0))
            .collect(),
    )
}

/// One transaction of a few dozen kilobytes of writes whose record is hundreds (the log
/// takes 256 KiB): among `ids`, it deletes one row of the four [`loaded`] left in each
/// sixteen (leaves just under a quarter full merge in pairs, each merge logging images of
/// the merged leaf, the freed one and their parent; without a double-write area every leaf
/// changed logs a full image too) and updates one row in 64. (Where a row is missing it
/// inserts it instead.)
fn large_commit(db: &Database, table: &Table, model: &mut Model, generation: u8, ids: Range<i64>) {
    let mut txn = db.begin();
    for id in ids.clone().filter(|id| id % 16 == 3) {
        if model.remove(&id).is_some() {
            assert!(txn.delete(table, &[Value::Int(id)]).expect("delete"));
        } else {
            txn.insert(table, &row(id, generation)).expect("insert");
            model.insert(id, generation);
        }
    }
    for id in ids.step_by(64) {
        txn.update(table, &row(id, generation)).expect("update");
        model.insert(id, generation);
    }
    let parts_before = db.stats().commits_in_parts;
    txn.commit().expect("a commit longer than a record");
    assert_eq!(
        db.stats().commits_in_parts,
        parts_before + 1,
        "not logged in parts"
    );
}

fn small_commit(db: &Database, table: &Table, model: &mut Model) {
    let mut txn = db.begin();
    txn.insert(table, &row(ROWS, 9)).expect("insert");
    txn.commit().expect("the database goes on");
    model.insert(ROWS, 9);
}

fn reopen(storage: &SimStorage, mode: CommitMode) -> (Database, Table, RecoveryReport) {
    let (db, report) = Database::open_with(Arc::new(ScaledGrowth(storage.clone())), config(mode))
        .expect("recovery");
    let table = db.table("rows").expect("table");
    (db, table, report.recovery)
}

fn assert_holds(db: &Database, table: &Table, model: &Model, what: &str) {
    db.check().unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut txn = db.begin();
    let rows = txn
        .scan(
            table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan");
    let found: Model = rows
        .iter()
        .map(|row| match (&row[0], &row[1]) {
            (Value::Int(id), Value::Bytes(val)) => {
                assert!(
                    val.len() == VALUE && val.iter().all(|&b| b == val[0]),
                    "{what}"
                );
                (*id, val[0])
            }
            other => panic!("{what}: unexpected row {other:?}"),
        })
        .collect();
    assert!(
        found == *model,
        "{what}: {} rows, expected {}",
        found.len(),
        model.len()
    );
}

const MODES: [CommitMode; 3] = [CommitMode::Fsync, CommitMode::Buffer, CommitMode::PmemLog];

#[test]
fn a_commit_longer_than_a_record_is_logged_in_parts_and_survives_crashes() {
    for mode in MODES {
        let (storage, db, table, mut model) = loaded(mode);
        large_commit(&db, &table, &mut model, 1, first_range(mode));
        small_commit(&db, &table, &mut model);
        assert_holds(&db, &table, &model, &format!("{mode}, running"));
        for (crash, image) in [
            ("process crash", storage.process_crash()),
            ("power cut", storage.power_cut(7)),
        ] {
            let what = format!("{mode}, after a {crash}");
            let (db, table, report) = reopen(&image, mode);
            assert_eq!(report.unfinished_commit_parts, 0, "{what}");
            assert_holds(&db, &table, &model, &what);
        }
    }
}

#[test]
fn a_crash_between_commit_parts_loses_the_whole_commit() {
    for mode in MODES {
        let (storage, db, table, before) = loaded(mode);
        // Taken once the first part is durable, before the second is appended.
        let images = Arc::new(Mutex::new(Vec::new()));
        let (log, sim, taken) = (db.shared_log(), storage.clone(), images.clone());
        interleave::at(Point::BetweenCommitParts, move || {
            log.force_durable(log.appended_lsn()).expect("durable");
            taken
                .lock()
                .extend([sim.process_crash(), sim.power_cut(11)]);
        });
        let mut after = before.clone();
        large_commit(&db, &table, &mut after, 1, first_range(mode));
        let images = std::mem::take(&mut *images.lock());
        assert_eq!(images.len(), 2, "{mode}: the hook did not run");
        for (n, image) in images.iter().enumerate() {
            let what = format!("{mode}, image {n} between the parts");
            let (db, table, report) = reopen(image, mode);
            assert!(report.unfinished_commit_parts >= 1, "{what}: {report}");
            assert_holds(&db, &table, &before, &what);
            // A commit in parts after those the crash left in the log (on the upper half of
            // the keys, so that it rewrites none of the pages of the first part left): its
            // parts name their own first part, and the dropped ones stay dropped.
            let mut again = before.clone();
            large_commit(&db, &table, &mut again, 2, ROWS / 2..ROWS);
            let (db, table, _) = reopen(&image.process_crash(), mode);
            assert_holds(
                &db,
                &table,
                &again,
                &format!("{what}, then committed again"),
            );
        }
    }
}
