//! The bank-transfer invariant under concurrency: transfer threads move money between accounts
//! (with `Database::run`, retrying aborts) while an auditor sums every balance in read-only
//! transactions. Serializability means every audit that commits sees exactly the initial
//! total, and so does the end state, also after a reopen. Run in the `fsync`, `buffer`,
//! `pmem-log` and `async` commit modes, in a temporary directory (PMEM file in /dev/shm).
//!
//! The counters are checked too: every attempt of a transaction either commits or aborts, so
//! the engine's commit and abort counts must match the attempts the test made.

mod support;

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tailstore_engine::{Database, EngineError, KeyRange, Table, Transaction};
use tailstore_log::CommitMode;
use tailstore_storage::{Column, ColumnType, IndexDef, ScanDirection, Schema, Value};

use support::TempDb;

const ACCOUNTS: i64 = 48;
const INITIAL: i64 = 1_000;
const TOTAL: i64 = ACCOUNTS * INITIAL;
const THREADS: usize = 4;
/// Transfers per thread, unless the time limit comes first; more while no audit has
/// committed yet (the audits must run concurrently with transfers, and in `async` mode
/// 1,500 transfers can be over before the auditor's first attempt has finished).
const TRANSFERS: usize = 1_500;
const TIME_LIMIT: Duration = Duration::from_millis(2_000);
/// Attempts per transaction (`Database::run`): effectively "until it commits".
const ATTEMPTS: usize = 10_000;

/// accounts(id INT64 PRIMARY KEY, branch INT64, balance INT64), indexed by branch.
fn schema() -> Schema {
    Schema::new(
        vec![
            Column::new("id", ColumnType::Int64),
            Column::new("branch", ColumnType::Int64),
            Column::new("balance", ColumnType::Int64),
        ],
        vec![0],
        vec![IndexDef::new("by_branch", vec![1], false)],
    )
    .unwrap()
}

fn balance(row: &[Value]) -> i64 {
    match row[2] {
        Value::Int(b) => b,
        ref other => panic!("balance is not an integer: {other:?}"),
    }
}

fn with_balance(row: &[Value], balance: i64) -> Vec<Value> {
    let mut row = row.to_vec();
    row[2] = Value::Int(balance);
    row
}

/// What the test did, to compare with the engine's counters.
#[derive(Default)]
struct Tally {
    /// Transaction bodies run (attempts) and attempts that committed.
    attempts: AtomicU64,
    commits: AtomicU64,
    audits: AtomicU64,
    failed_audits: AtomicU64,
}

/// Moves `amount` from `from` to `to` if `from` has it.
fn transfer(
    txn: &mut Transaction<'_>,
    table: &Table,
    from: i64,
    to: i64,
    amount: i64,
) -> tailstore_engine::Result<bool> {
    let a = txn
        .get(table, &[Value::Int(from)])?
        .expect("account exists");
    let b = txn.get(table, &[Value::Int(to)])?.expect("account exists");
    if balance(&a) < amount {
        return Ok(false);
    }
    txn.update(table, &with_balance(&a, balance(&a) - amount))?;
    txn.update(table, &with_balance(&b, balance(&b) + amount))?;
    Ok(true)
}

/// Moves half of the richest balance among `ids` (found by a range scan) to `to`.
fn rob_the_richest(
    txn: &mut Transaction<'_>,
    table: &Table,
    ids: (i64, i64),
    to: i64,
) -> tailstore_engine::Result<()> {
    let range = KeyRange::new(
        Bound::Included(vec![Value::Int(ids.0)]),
        Bound::Included(vec![Value::Int(ids.1)]),
    );
    let rows = txn.scan(table, &range, ScanDirection::Descending, usize::MAX)?;
    let richest = rows.iter().max_by_key(|r| balance(r)).expect("non-empty");
    let from = match richest[0] {
        Value::Int(id) => id,
        _ => unreachable!(),
    };
    if from != to {
        transfer(txn, table, from, to, balance(richest) / 2)?;
    }
    Ok(())
}

/// Sums every balance: by a full scan, by a branch index scan, or by point reads.
fn audit(txn: &mut Transaction<'_>, table: &Table, how: u64) -> tailstore_engine::Result<i64> {
    let rows = match how % 3 {
        0 => txn.scan(
            table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )?,
        1 => txn.scan_index(
            table,
            "by_branch",
            &KeyRange::all(),
            ScanDirection::Descending,
            usize::MAX,
        )?,
        _ => {
            let mut rows = Vec::new();
            for id in 0..ACCOUNTS {
                rows.push(txn.get(table, &[Value::Int(id)])?.expect("account exists"));
            }
            rows
        }
    };
    assert_eq!(rows.len() as i64, ACCOUNTS, "every account is seen");
    Ok(rows.iter().map(|r| balance(r)).sum())
}

fn total(db: &Database, table: &Table) -> i64 {
    let mut txn = db.begin();
    let sum = audit(&mut txn, table, 0).unwrap();
    txn.commit().unwrap();
    sum
}

fn bank(mode: CommitMode) {
    let dir = TempDb::new(mode.name());
    let config = dir.config(mode);
    let (db, _) = Database::open(config.clone()).expect("open");
    let table = db.create_table("accounts", &schema()).expect("create");
    let mut txn = db.begin();
    for id in 0..ACCOUNTS {
        let row = [Value::Int(id), Value::Int(id % 5), Value::Int(INITIAL)];
        txn.insert(&table, &row).unwrap();
    }
    txn.commit().unwrap();
    let start = db.stats();

    let tally = Tally::default();
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(THREADS + 1);
    let began = Instant::now();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (db, table, tally, barrier) = (&db, &table, &tally, &barrier);
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(t as u64 + 1);
                    barrier.wait();
                    for done in 0.. {
                        let audited = tally.audits.load(Ordering::Relaxed) > 0;
                        if began.elapsed() > TIME_LIMIT || (done >= TRANSFERS && audited) {
                            break;
                        }
                        let from = rng.gen_range(0..ACCOUNTS);
                        let to = (from + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                        let amount = rng.gen_range(1..=INITIAL / 4);
                        let rob = rng.gen_ratio(1, 10);
                        let lo = rng.gen_range(0..ACCOUNTS - 8);
                        db.run(ATTEMPTS, |txn| {
                            tally.attempts.fetch_add(1, Ordering::Relaxed);
                            if rob {
                                rob_the_richest(txn, table, (lo, lo + 7), to)
                            } else {
                                transfer(txn, table, from, to, amount).map(|_| ())
                            }
                        })
                        .expect("a transfer commits within its attempts");
                        tally.commits.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let auditor = s.spawn(|| {
            barrier.wait();
            let mut how = 0;
            while !stop.load(Ordering::Relaxed) {
                how += 1;
                tally.attempts.fetch_add(1, Ordering::Relaxed);
                let mut txn = db.begin();
                let sum = audit(&mut txn, &table, how).unwrap();
                match txn.commit() {
                    Ok(()) => {
                        assert_eq!(
                            sum, TOTAL,
                            "{mode}: a committed audit saw money appear or vanish"
                        );
                        tally.audits.fetch_add(1, Ordering::Relaxed);
                        tally.commits.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(err @ EngineError::Aborted { .. }) => {
                        assert!(err.is_retryable());
                        tally.failed_audits.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(other) => panic!("{mode}: audit failed: {other}"),
                }
            }
        });
        // Every worker is joined before the auditor is stopped, even if one panicked:
        // a panic must fail the test, not leave the auditor running forever.
        let joined: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        stop.store(true, Ordering::Relaxed);
        auditor.join().expect("auditor");
        for outcome in joined {
            outcome.expect("transfer thread");
        }
    });
    let elapsed = began.elapsed();

    let end = db.stats();
    let attempts = tally.attempts.load(Ordering::Relaxed);
    let commits = tally.commits.load(Ordering::Relaxed);
    let audits = tally.audits.load(Ordering::Relaxed);
    let aborts = end.total_aborts() - start.total_aborts();
    eprintln!(
        "{mode}: {} transfers and {audits} audits committed in {elapsed:?}; {aborts} aborts \
         ({:?}), {} failed audits",
        commits - audits,
        end.aborts_by_cause()
            .zip(start.aborts)
            .map(|((cause, n), before)| (cause.name(), n - before))
            .collect::<Vec<_>>(),
        tally.failed_audits.load(Ordering::Relaxed),
    );
    assert!(audits > 0, "{mode}: the auditor never committed");
    assert!(
        commits - audits >= THREADS as u64,
        "{mode}: too few transfers"
    );
    assert_eq!(
        end.commits - start.commits,
        commits,
        "{mode}: commit counter"
    );
    assert_eq!(aborts, attempts - commits, "{mode}: abort counter");
    assert_eq!(
        end.rollbacks, start.rollbacks,
        "{mode}: nothing was rolled back"
    );
    assert_eq!(total(&db, &table), TOTAL, "{mode}: final total");
    assert_eq!(db.check().unwrap(), 2 * ACCOUNTS as u64);

    // The same after a clean close and reopen.
    let balances = |db: &Database, table: &Table| {
        let mut txn = db.begin();
        let rows = txn
            .scan(
                table,
                &KeyRange::all(),
                ScanDirection::Ascending,
                usize::MAX,
            )
            .unwrap();
        txn.commit().unwrap();
        rows
    };
    let before_close = balances(&db, &table);
    db.close().expect("close");
    let (db, report) = Database::open(config).expect("reopen");
    assert!(!report.created);
    let table = db.table("accounts").unwrap();
    assert_eq!(
        balances(&db, &table),
        before_close,
        "{mode}: state after reopen"
    );
    assert_eq!(total(&db, &table), TOTAL);
    db.close().unwrap();
}

#[test]
fn bank_fsync() {
    bank(CommitMode::Fsync);
}

#[test]
fn bank_buffer() {
    bank(CommitMode::Buffer);
}

#[test]
fn bank_pmem_log() {
    bank(CommitMode::PmemLog);
}

#[test]
fn bank_async() {
    bank(CommitMode::Async);
}
