//! The five transactions (clause 2), one module each, and how they are run.
//!
//! Each module has an input type generated from a random number generator (clause 2.x.1),
//! separately from the transaction so that the inputs can be tested on their own, and a
//! function that takes `&mut Transaction` and the input, does the transaction's reads and
//! writes (clause 2.x.2) and returns a [`Decision`]: commit with the output the terminal
//! would display, or roll back (New-Order's 1% of unused item ids). [`execute`] runs such a
//! function to completion: it commits or rolls back, and runs it again while the engine
//! aborts it (optimistic concurrency control), counting the aborts by cause.
//!
//! # Stale reads
//!
//! Under optimistic concurrency control a transaction reads without locks and learns only
//! at commit whether what it read still holds. Until then it may act on a stale read: a
//! New-Order that read `d_next_o_id` just before another New-Order of the district
//! committed inserts an order id that now exists, and the engine reports
//! `DuplicateKey`, not an abort, although validation would abort it. [`execute`] therefore
//! also runs a transaction again after `DuplicateKey`, `RowNotFound` or a missing row,
//! counting it as a stale read ([`Retries::stale_reads`]); only if the error persists to
//! the last attempt is it returned. Unless the transaction's reads no longer hold
//! ([`Transaction::reads_still_hold`]), though, the error is what the database stores (a row
//! missing, a key taken: damage, not a race) and is returned at once: retried, one Delivery
//! of a district whose oldest order was missing took 1,000 attempts and about a second.

pub mod delivery;
pub mod new_order;
pub mod order_status;
pub mod payment;
pub mod stock_level;

use std::time::Duration;

use rand::Rng;
use tailstore_engine::{AbortCause, Database, EngineError, KeyRange, Table, Transaction};
use tailstore_storage::{ScanDirection, Value};

use crate::error::{Result, TpccError};
use crate::random::{random_customer_id, random_last_name, NuRandConstants};
use crate::row::{id, Fields};
use crate::schema::{customer, Tables, CUSTOMER_BY_NAME};
use crate::workers::Workers;

/// What a transaction body decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision<T> {
    /// Commit; `T` is the output.
    Commit(T),
    /// Roll back: the business logic refused the transaction.
    Rollback,
}

/// How a transaction ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOutcome<T> {
    Committed(T),
    /// Rolled back on purpose (New-Order with an unused item id).
    RolledBack,
    /// Still aborted by the engine after the last attempt the policy allows.
    Aborted(AbortCause),
}

impl<T> TxnOutcome<T> {
    /// The outcome without its output.
    pub fn kind(&self) -> Outcome {
        match self {
            TxnOutcome::Committed(_) => Outcome::Committed,
            TxnOutcome::RolledBack => Outcome::RolledBack,
            TxnOutcome::Aborted(cause) => Outcome::Aborted(*cause),
        }
    }
}

/// How a transaction ended, without its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    Committed,
    RolledBack,
    Aborted(AbortCause),
}

/// Engine aborts, by cause, and attempts that failed on a stale read (each one was followed
/// by another attempt, except for the last one of a transaction that ended
/// [`Outcome::Aborted`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retries {
    counts: [u64; 3],
    stale: u64,
}

impl Retries {
    fn position(cause: AbortCause) -> usize {
        AbortCause::ALL
            .iter()
            .position(|&c| c == cause)
            .unwrap_or(0)
    }

    pub fn record(&mut self, cause: AbortCause) {
        self.counts[Self::position(cause)] += 1;
    }

    pub fn get(&self, cause: AbortCause) -> u64 {
        self.counts[Self::position(cause)]
    }

    /// Attempts that failed on a stale read (see the [module documentation](self)).
    pub fn stale_reads(&self) -> u64 {
        self.stale
    }

    /// Engine aborts and stale reads.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.stale
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Retries) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
        self.stale += other.stale;
    }

    /// (cause, count) in [`AbortCause::ALL`] order.
    pub fn by_cause(&self) -> impl Iterator<Item = (AbortCause, u64)> + '_ {
        AbortCause::ALL.into_iter().zip(self.counts)
    }
}

/// How often to run a transaction again after the engine aborts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (at least 1).
    pub max_attempts: u32,
    /// Sleep before the third and later attempts (doubling from `backoff`, at most 1 ms),
    /// so that transactions that keep colliding on a hot row (a warehouse's `w_ytd`) stop
    /// doing so; the first retry only yields.
    pub backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 1000,
            backoff: Duration::from_micros(10),
        }
    }
}

impl RetryPolicy {
    fn wait_before(&self, attempt: u32) {
        if attempt <= 2 || self.backoff.is_zero() {
            std::thread::yield_now();
            return;
        }
        let doublings = (attempt - 3).min(10);
        let wait = self.backoff.saturating_mul(1 << doublings);
        std::thread::sleep(wait.min(Duration::from_millis(1)));
    }
}

/// A finished transaction: its outcome, the aborts it went through, its attempts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executed<T> {
    pub outcome: TxnOutcome<T>,
    pub retries: Retries,
    pub attempts: u32,
}

/// How a transaction is isolated from the others (clause 3.4.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// Level 3, which clause 3.4.1 asks of New-Order, Payment, Delivery and Order-Status
    /// among themselves.
    #[default]
    Serializable,
    /// Level 1 (no dirty reads), all that clause 3.4.1 asks of Stock-Level: it reads only
    /// committed data and is never aborted for what changed after it read it.
    ReadCommitted,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Serializable => "serializable",
            Isolation::ReadCommitted => "read-committed",
        }
    }
}

/// Runs `body` in a serializable transaction and commits it (or rolls it back if it says
/// so), again and again while the engine aborts it or it fails on a stale read (see the
/// [module documentation](self)), up to `policy.max_attempts`. Other errors end it at once.
pub fn execute<T>(
    db: &Database,
    policy: &RetryPolicy,
    body: impl FnMut(&mut Transaction<'_>) -> Result<Decision<T>>,
) -> Result<Executed<T>> {
    execute_at(db, Isolation::Serializable, policy, None, body)
}

/// [`execute`] at `isolation` (a read-committed body must not write: the engine refuses it),
/// each attempt on one of `workers` if there is a pool: taken before the attempt begins,
/// given back once its commit is applied and appended, before the wait for durability (see
/// [`Workers`]).
pub fn execute_at<T>(
    db: &Database,
    isolation: Isolation,
    policy: &RetryPolicy,
    workers: Option<&Workers>,
    mut body: impl FnMut(&mut Transaction<'_>) -> Result<Decision<T>>,
) -> Result<Executed<T>> {
    let mut retries = Retries::default();
    let mut attempt = 1;
    loop {
        let mut worker = workers.map(Workers::take);
        let mut txn = match isolation {
            Isolation::Serializable => db.begin(),
            Isolation::ReadCommitted => db.begin_read_committed(),
        };
        let result = match body(&mut txn) {
            Ok(Decision::Commit(output)) => txn
                .commit_pending()
                .and_then(|pending| {
                    worker = None;
                    pending.wait()
                })
                .map(|()| TxnOutcome::Committed(output))
                .map_err(TpccError::from),
            Ok(Decision::Rollback) => {
                txn.rollback();
                Ok(TxnOutcome::RolledBack)
            }
            // A stale-looking error whose reads all still hold is what the database stores
            // (a row missing, a key taken), not a race: it is reported at once.
            Err(err) if may_be_stale(&err) => match txn.reads_still_hold() {
                Ok(true) => return Err(err),
                Ok(false) => Err(err),
                Err(engine) => Err(engine.into()),
            },
            Err(err) => Err(err), // dropping `txn` rolls it back
        };
        drop(worker);
        match result {
            Ok(outcome) => {
                return Ok(Executed {
                    outcome,
                    retries,
                    attempts: attempt,
                })
            }
            Err(TpccError::Engine(EngineError::Aborted { cause })) => {
                retries.record(cause);
                if attempt >= policy.max_attempts.max(1) {
                    return Ok(Executed {
                        outcome: TxnOutcome::Aborted(cause),
                        retries,
                        attempts: attempt,
                    });
                }
            }
            Err(err) if may_be_stale(&err) && attempt < policy.max_attempts => retries.stale += 1,
            Err(err) => return Err(err),
        }
        policy.wait_before(attempt + 1);
        attempt += 1;
    }
}

/// Whether `err` may come from acting on a stale read rather than from the database.
fn may_be_stale(err: &TpccError) -> bool {
    matches!(
        err,
        TpccError::MissingRow(_)
            | TpccError::Engine(EngineError::DuplicateKey(_) | EngineError::RowNotFound(_))
    )
}

/// The row under `key`; [`TpccError::MissingRow`] if there is none.
pub(crate) fn must_get(
    txn: &mut Transaction<'_>,
    table: &Table,
    key: &[Value],
) -> Result<Vec<Value>> {
    txn.get(table, key)?.ok_or_else(|| missing_row(table, key))
}

/// The values of `columns` (in that order) of the row under `key`, a read that depends on
/// those columns only ([`Transaction::get_columns`]); [`TpccError::MissingRow`] if there is
/// no row.
pub(crate) fn must_get_columns(
    txn: &mut Transaction<'_>,
    table: &Table,
    key: &[Value],
    columns: &[usize],
) -> Result<Vec<Value>> {
    txn.get_columns(table, key, columns)?
        .ok_or_else(|| missing_row(table, key))
}

fn missing_row(table: &Table, key: &[Value]) -> TpccError {
    TpccError::MissingRow(format!("{} {}", table.name(), show_key(key)))
}

/// A key as `(1, 2, 3)`.
pub(crate) fn show_key(key: &[Value]) -> String {
    let parts: Vec<String> = key
        .iter()
        .map(|v| match v {
            Value::Int(i) => i.to_string(),
            Value::Text(s) => format!("'{s}'"),
            other => format!("{other:?}"),
        })
        .collect();
    format!("({})", parts.join(", "))
}

/// How Payment and Order-Status name their customer (clauses 2.5.1.2, 2.6.1.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustomerSelector {
    /// By `c_id`.
    Id(u32),
    /// By `c_last`: the middle one (position ⌈n/2⌉) of those sorted by `c_first`.
    LastName(String),
}

impl CustomerSelector {
    /// 60% by last name (`NURand(255, 0, 999)`), 40% by id (`NURand(1023, 1, 3000)`).
    pub fn generate<R: Rng + ?Sized>(rng: &mut R, c: &NuRandConstants) -> CustomerSelector {
        if rng.gen_range(1..=100) <= 60 {
            CustomerSelector::LastName(random_last_name(rng, c))
        } else {
            CustomerSelector::Id(random_customer_id(rng, c))
        }
    }

    pub fn by_name(&self) -> bool {
        matches!(self, CustomerSelector::LastName(_))
    }
}

/// The customer of district (`w_id`, `d_id`) that `selector` names.
pub(crate) fn select_customer(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    w_id: u32,
    d_id: u32,
    selector: &CustomerSelector,
) -> Result<Vec<Value>> {
    match selector {
        CustomerSelector::Id(c_id) => {
            must_get(txn, &tables.customer, &[id(w_id), id(d_id), id(*c_id)])
        }
        CustomerSelector::LastName(last) => {
            let prefix = vec![id(w_id), id(d_id), Value::Text(last.clone())];
            let mut rows = txn.scan_index(
                &tables.customer,
                CUSTOMER_BY_NAME,
                &KeyRange::prefix(prefix.clone()),
                ScanDirection::Ascending,
                usize::MAX,
            )?;
            if rows.is_empty() {
                return Err(TpccError::MissingRow(format!(
                    "customer named {}",
                    show_key(&prefix)
                )));
            }
            // Position ⌈n/2⌉ (1-based) of the rows sorted by c_first (the index's order).
            let middle = (rows.len() - 1) / 2;
            Ok(rows.swap_remove(middle))
        }
    }
}

/// `c_id` of a customer row.
pub(crate) fn customer_id(row: &[Value]) -> Result<u32> {
    narrow(row.int(customer::C_ID)?)
}

/// An id or count read from a column, as `u32`.
pub(crate) fn narrow(v: i64) -> Result<u32> {
    u32::try_from(v).map_err(|_| TpccError::OutOfRange(v))
}

/// `cents` as `123.45`.
pub fn format_cents(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailstore_engine::DbConfig;
    use tailstore_log::CommitMode;

    fn with_db(test: impl FnOnce(&Database)) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let config = DbConfig::new(dir.path(), CommitMode::Async, None);
        let (db, _) = Database::open(config).expect("open");
        test(&db);
    }

    fn policy(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            backoff: Duration::ZERO,
        }
    }

    /// A read of meta row "x" that another transaction then changes: the reads of `txn` no
    /// longer hold.
    fn read_then_changed(db: &Database, tables: &Tables, txn: &mut Transaction<'_>, v: i64) {
        let key = [Value::Text("x".into())];
        txn.get(&tables.meta, &key).expect("read");
        let mut other = db.begin();
        other
            .update(&tables.meta, &[key[0].clone(), Value::Int(v)])
            .expect("update");
        other.commit().expect("commit");
    }

    fn with_meta_row(db: &Database) -> Tables {
        let tables = crate::schema::create_tables(db).expect("tables");
        let mut txn = db.begin();
        txn.insert(&tables.meta, &[Value::Text("x".into()), Value::Int(0)])
            .expect("insert");
        txn.commit().expect("commit");
        tables
    }

    #[test]
    fn aborts_and_stale_reads_are_retried_and_counted() {
        with_db(|db| {
            let tables = with_meta_row(db);
            let mut calls = 0;
            let done = execute(db, &policy(10), |txn| {
                calls += 1;
                match calls {
                    1 => Err(EngineError::Aborted {
                        cause: AbortCause::ReadChanged,
                    }
                    .into()),
                    2 => {
                        read_then_changed(db, &tables, txn, 2);
                        Err(TpccError::MissingRow("stale".into()))
                    }
                    3 => {
                        read_then_changed(db, &tables, txn, 3);
                        Err(EngineError::DuplicateKey("orders".into()).into())
                    }
                    _ => Ok(Decision::Commit(calls)),
                }
            })
            .expect("commits");
            assert_eq!(done.outcome, TxnOutcome::Committed(4));
            assert_eq!(done.attempts, 4);
            assert_eq!(done.retries.get(AbortCause::ReadChanged), 1);
            assert_eq!(done.retries.stale_reads(), 2);
            assert_eq!(done.retries.total(), 3);
        });
    }

    /// A read-committed body (Stock-Level's) commits although what it read changed before
    /// its commit, where the same body, serializable, is aborted and run again; and it may
    /// not write.
    #[test]
    fn read_committed_bodies_are_not_aborted_by_what_changed_after_they_read() {
        with_db(|db| {
            let tables = with_meta_row(db);
            for (isolation, attempts) in
                [(Isolation::ReadCommitted, 1), (Isolation::Serializable, 2)]
            {
                let mut calls = 0;
                let done = execute_at(db, isolation, &policy(10), None, |txn| {
                    calls += 1;
                    // A scan: validated at a serializable commit, unlike a single point read.
                    txn.scan(
                        &tables.meta,
                        &KeyRange::all(),
                        ScanDirection::Ascending,
                        usize::MAX,
                    )?;
                    if calls == 1 {
                        read_then_changed(db, &tables, txn, 7);
                    }
                    Ok(Decision::Commit(()))
                })
                .expect("commits");
                assert_eq!(done.attempts, attempts, "{}", isolation.name());
            }
            let written = execute_at(db, Isolation::ReadCommitted, &policy(10), None, |txn| {
                txn.update(&tables.meta, &[Value::Text("x".into()), Value::Int(9)])?;
                Ok(Decision::Commit(()))
            });
            assert!(
                matches!(
                    written,
                    Err(TpccError::Engine(EngineError::ReadCommittedWrite))
                ),
                "{written:?}"
            );
        });
    }

    /// With a pool of workers, every attempt runs on one, and the transaction gives it back
    /// however it ends: committed, rolled back, aborted to the last attempt, or failed.
    #[test]
    fn each_attempt_runs_on_a_worker_that_is_given_back() {
        with_db(|db| {
            let workers = Workers::new(1);
            let mut calls = 0;
            let done = execute_at(
                db,
                Isolation::Serializable,
                &policy(10),
                Some(&workers),
                |_| {
                    calls += 1;
                    assert_eq!(workers.in_use(), 1, "attempt {calls} runs without a worker");
                    match calls {
                        1 => Err(EngineError::Aborted {
                            cause: AbortCause::WriteConflict,
                        }
                        .into()),
                        _ => Ok(Decision::Commit(())),
                    }
                },
            )
            .expect("commits");
            assert_eq!(done.attempts, 2);
            assert_eq!(
                workers.in_use(),
                0,
                "a committed transaction kept its worker"
            );
            let ends: [fn() -> Result<Decision<()>>; 3] = [
                || Ok(Decision::Rollback),
                || {
                    Err(EngineError::Aborted {
                        cause: AbortCause::Phantom,
                    }
                    .into())
                },
                || Err(TpccError::InvalidArgument("bug".into())),
            ];
            for end in ends {
                let _ = execute_at(
                    db,
                    Isolation::Serializable,
                    &policy(3),
                    Some(&workers),
                    |_| {
                        assert_eq!(workers.in_use(), 1);
                        end()
                    },
                );
                assert_eq!(workers.in_use(), 0, "a transaction kept its worker");
            }
        });
    }

    #[test]
    fn retries_end_at_the_last_attempt() {
        with_db(|db| {
            let aborted = execute(db, &policy(3), |_| -> Result<Decision<()>> {
                Err(EngineError::Aborted {
                    cause: AbortCause::Phantom,
                }
                .into())
            })
            .expect("no error");
            assert_eq!(aborted.outcome, TxnOutcome::Aborted(AbortCause::Phantom));
            assert_eq!(aborted.retries.get(AbortCause::Phantom), 3);
            let tables = with_meta_row(db);
            let mut attempts = 0;
            let missing = execute(db, &policy(3), |txn| -> Result<Decision<()>> {
                attempts += 1;
                read_then_changed(db, &tables, txn, attempts);
                Err(TpccError::MissingRow("gone".into()))
            });
            assert!(matches!(missing, Err(TpccError::MissingRow(_))));
            assert_eq!(attempts, 3);
            let rolled_back = execute(db, &policy(3), |_| Ok(Decision::<()>::Rollback));
            assert_eq!(
                rolled_back.expect("rollback").outcome,
                TxnOutcome::RolledBack
            );
            let fatal = execute(db, &policy(3), |_| -> Result<Decision<()>> {
                Err(TpccError::InvalidArgument("bug".into()))
            });
            assert!(matches!(fatal, Err(TpccError::InvalidArgument(_))));
        });
    }

    /// A missing row or a taken key while every read still holds is stored so (damage), not
    /// a race: returned at the first attempt, not after the policy's last.
    #[test]
    fn a_stored_missing_row_is_reported_at_once_not_retried() {
        with_db(|db| {
            let tables = with_meta_row(db);
            for stored in [
                TpccError::MissingRow("orders (1, 2, 2101)".into()),
                EngineError::DuplicateKey("orders".into()).into(),
                EngineError::RowNotFound("orders".into()).into(),
            ] {
                let mut attempts = 0;
                let mut error = Some(stored);
                let result = execute(db, &policy(1000), |txn| -> Result<Decision<()>> {
                    attempts += 1;
                    let key = [Value::Text("x".into())];
                    txn.get(&tables.meta, &key)?;
                    let absent = [Value::Text("y".into())];
                    assert!(txn.get(&tables.meta, &absent)?.is_none());
                    Err(error
                        .take()
                        .unwrap_or_else(|| TpccError::InvalidArgument("retried".into())))
                });
                assert!(result.is_err());
                assert!(!matches!(result, Err(TpccError::InvalidArgument(_))));
                assert_eq!(attempts, 1, "{result:?}");
            }
        });
    }
}
