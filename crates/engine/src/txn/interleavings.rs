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
//! Below them, a net for the orders nobody thought to stop at: random concurrent histories,
//! every commit pausing at random at each of those points, checked for serializability.

use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tailstore_history::DependencyGraph;
use tailstore_log::CommitMode;
use tailstore_media::scaled_growth::ScaledGrowth;
use tailstore_media::sim::SimStorage;
use tailstore_storage::{Column, ColumnType, ScanDirection, Schema, Value, PAGE_SIZE};

use crate::interleave::{self, Point};
use crate::{AbortCause, ColumnChange, Database, DbConfig, EngineError, KeyRange, Table};

const X: i64 = 1;
const K: i64 = 15;

/// A database on simulated storage with one table, "rows", of `columns` (the first is the
/// primary key), holding `rows`.
fn database_with(columns: Vec<Column>, rows: &[Vec<Value>]) -> (Database, Table) {
    let mut config = DbConfig::new("/db", CommitMode::Fsync, Some(PathBuf::from("/pmem")));
    config.buffer_pool_bytes = 64 * PAGE_SIZE;
    config.checkpoint_interval = None;
    let storage = Arc::new(ScaledGrowth(SimStorage::new()));
    let (db, _) = Database::open_with(storage, config).expect("open");
    let schema = Schema::new(columns, vec![0], vec![]).expect("schema");
    let table = db.create_table("rows", &schema).expect("create");
    let mut txn = db.begin();
    for row in rows {
        txn.insert(&table, row).expect("insert");
    }
    txn.commit().expect("setup");
    (db, table)
}

fn integer_columns(names: &[&str]) -> Vec<Column> {
    names
        .iter()
        .map(|&name| Column::new(name, ColumnType::Int64))
        .collect()
}

fn database() -> (Database, Table) {
    let rows = [10, 20].map(|id| vec![Value::Int(id), Value::Int(0)]);
    database_with(integer_columns(&["id", "val"]), &rows)
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

/// A committed transaction of [`random_history`], as the checker sees it. The objects are
/// registers: each row of the history table holds two (columns `w0, p0` and `w1, p1`), and
/// register `r` of row `key` is object `2 * key + r`. A register holds the id of the
/// transaction that wrote it last and of the one before.
#[derive(Debug)]
struct Committed {
    id: i64,
    /// (object, writer) for every register read that the transaction had not written
    /// itself, with [`ABSENT`] or [`DELETED`] for a row it found missing (by a point read,
    /// or inside a scan's range).
    reads: Vec<(i64, i64)>,
    /// (object, prev): the version that this transaction's write (an update, an insert, or
    /// a delete: the deleter's version of a row is its absence) replaced ([`ABSENT`] for an
    /// insert).
    writes: Vec<(i64, i64)>,
    /// The rows this transaction deleted.
    deleted: Vec<i64>,
}

/// The writer of the rows there at the start.
const INITIAL: i64 = 0;
/// The version of a register whose row is not there yet. The rows missing at the start are
/// inserted at most once and never deleted, and the others deleted at most once and never
/// inserted again, so a missing row has one version: before its insert ([`ABSENT`], written
/// by [`INITIAL`]) or after its delete ([`DELETED`], written by its deleter).
const ABSENT: i64 = -1;
/// The version of a register whose row was deleted, as its readers record it: the checker
/// knows the deleter from the history.
const DELETED: i64 = -2;
/// Registers per row.
const REGISTERS: i64 = 2;
/// The columns of register `r`: its writer and the writer before.
const fn register_columns(r: i64) -> [usize; 2] {
    [1 + 2 * r as usize, 2 + 2 * r as usize]
}

/// Whether `key`'s row is there at the start: the even keys, which may be deleted later;
/// the odd ones may be inserted later.
fn initially_present(key: i64) -> bool {
    key % 2 == 0
}

/// The version a missing row of `key` has.
fn missing(key: i64) -> i64 {
    if initially_present(key) {
        DELETED
    } else {
        ABSENT
    }
}

fn object(key: i64, register: i64) -> i64 {
    REGISTERS * key + register
}

fn history_database(keys: i64) -> (Database, Table) {
    let rows: Vec<Vec<Value>> = (0..keys)
        .filter(|&id| initially_present(id))
        .map(|id| row_of(id, [INITIAL, ABSENT], [INITIAL, ABSENT]))
        .collect();
    let mut columns = integer_columns(&["id", "w0", "p0", "w1", "p1"]);
    columns.push(Column::new("pad", ColumnType::Varchar(PAD as u32)));
    database_with(columns, &rows)
}

/// Bytes of padding in each row of the history table: four rows fill a page, so the table
/// spans several leaves, and inserts and deletes split and merge them.
const PAD: usize = 1500;

/// A row whose registers hold (writer, prev) pairs `r0` and `r1`.
fn row_of(key: i64, r0: [i64; 2], r1: [i64; 2]) -> Vec<Value> {
    let mut row = [key, r0[0], r0[1], r1[0], r1[1]].map(Value::Int).to_vec();
    row.push(Value::Text("p".repeat(PAD)));
    row
}

fn int(value: &Value) -> i64 {
    match value {
        Value::Int(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

/// A row's key and the writers of its registers.
fn writers_of(row: &[Value]) -> (i64, [i64; 2]) {
    (
        int(&row[0]),
        [0, 1].map(|r| int(&row[register_columns(r)[0]])),
    )
}

/// The registers a transaction read, as the checker wants them: (object, writer), leaving
/// out those it had written itself.
struct Reads {
    reader: i64,
    seen: Vec<(i64, i64)>,
}

impl Reads {
    fn register(&mut self, key: i64, register: i64, writer: i64) {
        if writer != self.reader {
            self.seen.push((object(key, register), writer));
        }
    }

    /// Both registers of `key`, from its row or its absence.
    fn row(&mut self, key: i64, row: Option<&Vec<Value>>) {
        let writers = row.map_or([missing(key); 2], |row| writers_of(row).1);
        for register in 0..REGISTERS {
            self.register(key, register, writers[register as usize]);
        }
    }
}

/// One random transaction of `id` against keys `0..keys`: scans (either direction, some with
/// a limit), point reads (one row or a few at once) and reads of one register, writes of one
/// register (a column patch after a column read) or of the whole row (after a read of it),
/// and now and then the insert of a missing row or the delete of one there at the start.
fn random_transaction(
    db: &Database,
    table: &Table,
    keys: i64,
    id: i64,
    rng: &mut StdRng,
) -> crate::Result<Committed> {
    let mut txn = db.begin();
    let mut reads = Reads {
        reader: id,
        seen: Vec::new(),
    };
    let (mut writes, mut deleted) = (Vec::new(), Vec::new());
    for _ in 0..rng.gen_range(1..=4) {
        let key = rng.gen_range(0..keys);
        let register = rng.gen_range(0..REGISTERS);
        match rng.gen_range(0..6) {
            0 => {
                let end = (key + rng.gen_range(1..=4)).min(keys);
                let range = KeyRange::new(
                    Bound::Included(vec![Value::Int(key)]),
                    Bound::Excluded(vec![Value::Int(end)]),
                );
                let direction = if rng.gen_bool(0.5) {
                    ScanDirection::Ascending
                } else {
                    ScanDirection::Descending
                };
                let limit = if rng.gen_bool(0.3) { 2 } else { usize::MAX };
                let rows = txn.scan(table, &range, direction, limit)?;
                let found: std::collections::BTreeMap<i64, &Vec<Value>> =
                    rows.iter().map(|row| (int(&row[0]), row)).collect();
                // A scan cut by its limit read nothing beyond its last row.
                let mut covered = key..end;
                if rows.len() == limit {
                    let last = int(&rows.last().expect("limit > 0")[0]);
                    covered = match direction {
                        ScanDirection::Ascending => key..last + 1,
                        ScanDirection::Descending => last..end,
                    };
                }
                for k in covered {
                    reads.row(k, found.get(&k).copied());
                }
            }
            1 => reads.row(key, txn.get(table, &[Value::Int(key)])?.as_ref()),
            2 => {
                let some: Vec<i64> = (key..keys.min(key + 3)).collect();
                let wanted: Vec<Vec<Value>> = some.iter().map(|&k| vec![Value::Int(k)]).collect();
                for (k, row) in some.into_iter().zip(txn.get_many(table, &wanted)?) {
                    reads.row(k, row.as_ref());
                }
            }
            3 => {
                let columns = register_columns(register);
                match txn.get_columns(table, &[Value::Int(key)], &columns)? {
                    Some(values) => reads.register(key, register, int(&values[0])),
                    None => reads.row(key, None),
                }
            }
            4 => {
                // One register, as a column patch: the other register is neither read nor
                // written, so a concurrent write of it must not conflict (or be lost).
                let [writer_column, prev_column] = register_columns(register);
                let Some(values) = txn.get_columns(table, &[Value::Int(key)], &[writer_column])?
                else {
                    reads.row(key, None);
                    continue;
                };
                let writer = int(&values[0]);
                reads.register(key, register, writer);
                if writer != id {
                    let changes = [
                        (writer_column, ColumnChange::Set(Value::Int(id))),
                        (prev_column, ColumnChange::Set(Value::Int(writer))),
                    ];
                    txn.update_columns(table, &[Value::Int(key)], &changes)?;
                    writes.push((object(key, register), writer));
                }
            }
            _ => {
                let row = txn.get(table, &[Value::Int(key)])?;
                reads.row(key, row.as_ref());
                match row.map(|row| writers_of(&row).1) {
                    Some(writers) if !writers.contains(&id) => {
                        // Rarely, so that most rows stay a while and scans meet the deletes.
                        if initially_present(key) && rng.gen_ratio(1, 100) {
                            assert!(txn.delete(table, &[Value::Int(key)])?);
                            deleted.push(key);
                        } else {
                            let row = row_of(key, [id, writers[0]], [id, writers[1]]);
                            txn.update(table, &row)?;
                        }
                        for register in 0..REGISTERS {
                            writes.push((object(key, register), writers[register as usize]));
                        }
                    }
                    Some(_) => {}
                    // Rarely, so that rows stay missing for a while and scans meet inserts.
                    None if !initially_present(key) && rng.gen_ratio(1, 20) => {
                        txn.insert(table, &row_of(key, [id, ABSENT], [id, ABSENT]))?;
                        for register in 0..REGISTERS {
                            writes.push((object(key, register), ABSENT));
                        }
                    }
                    None => {}
                }
            }
        }
    }
    txn.commit()?;
    Ok(Committed {
        id,
        reads: reads.seen,
        writes,
        deleted,
    })
}

/// `threads` threads each run `per_thread` random transactions, pausing at random between
/// the steps of their commits; returns the committed ones and the rows' final writers.
fn random_history(
    threads: i64,
    per_thread: i64,
    keys: i64,
    seed: u64,
) -> (Vec<Committed>, Vec<(i64, i64)>) {
    let (db, table) = history_database(keys);
    let committed = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let (db, table) = (&db, &table);
                s.spawn(move || {
                    let thread_seed =
                        seed ^ (thread as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    interleave::chaos(thread_seed);
                    let mut rng = StdRng::seed_from_u64(thread_seed);
                    let mut committed = Vec::new();
                    for i in 0..per_thread {
                        let id = 1 + thread * per_thread + i;
                        match random_transaction(db, table, keys, id, &mut rng) {
                            Ok(txn) => committed.push(txn),
                            Err(err) if err.is_retryable() => {}
                            Err(err) => panic!("transaction {id}: {err}"),
                        }
                    }
                    committed
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("worker"))
            .collect::<Vec<_>>()
    });
    let mut txn = db.begin();
    let rows = txn
        .scan(
            &table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("final scan");
    txn.commit().expect("final read");
    let present: std::collections::BTreeMap<i64, [i64; 2]> =
        rows.iter().map(|row| writers_of(row)).collect();
    let finals = (0..keys)
        .flat_map(|k| {
            let writers = present.get(&k).copied().unwrap_or([missing(k); 2]);
            (0..REGISTERS).map(move |r| (object(k, r), writers[r as usize]))
        })
        .collect();
    (committed, finals)
}

/// Checks that `history` is serializable (Adya's direct serialization graph has no cycle)
/// and that `finals` (each object's last writer, or its row's absence) ends each object's
/// chain of versions. Each write names the version it replaced, so the versions of every
/// object form a chain from [`INITIAL`] or [`ABSENT`]; write-write edges follow it,
/// write-read edges go from a version's writer to its readers, and read-write
/// (anti-dependency) edges from a reader to the writer of the next version.
fn assert_serializable(history: &[Committed], finals: &[(i64, i64)]) {
    use std::collections::{BTreeMap, BTreeSet};
    let ids: BTreeSet<i64> = history.iter().map(|t| t.id).collect();
    let mut deleters: BTreeMap<i64, i64> = BTreeMap::new();
    for t in history {
        for &key in &t.deleted {
            if let Some(other) = deleters.insert(key, t.id) {
                panic!("row {key} deleted by both {other} and {}", t.id);
            }
        }
    }
    // A read or final state of "deleted" is the deleter's version.
    let resolve = |object: i64, version: i64| {
        if version != DELETED {
            return version;
        }
        *deleters
            .get(&(object / REGISTERS))
            .unwrap_or_else(|| panic!("object {object} found deleted, but no delete committed"))
    };
    let mut next: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for t in history {
        for &(object, prev) in &t.writes {
            if let Some(other) = next.insert((object, prev), t.id) {
                panic!(
                    "lost update: {other} and {} both replaced object {object}'s version by {prev}",
                    t.id
                );
            }
        }
    }
    for &(object, last) in finals {
        let last = resolve(object, last);
        let mut at = if initially_present(object / REGISTERS) {
            INITIAL
        } else {
            ABSENT
        };
        while let Some(&n) = next.get(&(object, at)) {
            at = n;
        }
        assert_eq!(
            at, last,
            "object {object}'s chain of versions does not end at its row"
        );
    }
    // The transaction that wrote a version: the initial state wrote the missing rows too.
    let writer_of_version = |version: i64| {
        assert!(
            version == INITIAL || version == ABSENT || ids.contains(&version),
            "a version by {version}, which did not commit, was read or overwritten"
        );
        if version == ABSENT {
            INITIAL
        } else {
            version
        }
    };
    let mut graph = DependencyGraph::new();
    for t in history {
        graph.node(t.id);
        for &(_, prev) in &t.writes {
            graph.edge(writer_of_version(prev), t.id);
        }
        for &(object, writer) in &t.reads {
            let writer = resolve(object, writer);
            graph.edge(writer_of_version(writer), t.id);
            if let Some(&overwriter) = next.get(&(object, writer)) {
                graph.edge(t.id, overwriter);
            }
        }
    }
    if let Some(cycle) = graph.cycle() {
        let on_it: Vec<&Committed> = cycle
            .iter()
            .filter_map(|id| history.iter().find(|t| t.id == *id))
            .collect();
        panic!("not serializable: the dependency cycle {cycle:?}, of {on_it:?}");
    }
}

/// Random transactions of several threads over a few rows, with random pauses between the
/// steps of every commit: the committed history must be serializable. It found nothing
/// deterministic tests had not, but it is the net for orders nobody thought to stop at.
#[test]
fn random_histories_with_pauses_between_commit_steps_are_serializable() {
    for seed in 1..=6u64 {
        let (history, finals) = random_history(4, 1500, 12, seed);
        assert!(
            history.len() > 1000,
            "seed {seed}: only {} commits",
            history.len()
        );
        assert_serializable(&history, &finals);
    }
}
