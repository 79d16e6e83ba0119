//! How many keys each database holds, and how many of them have a TTL: one `kv_counts` row
//! per database, changed by every write that creates or deletes a `kv_keys` row or gives
//! or takes a row's deadline, in the same transaction (so DBSIZE and INFO's keyspace
//! section cost a few point reads, not a scan of every key; decision 73).
//!
//! The changes are the engine's commutative additions (`ColumnChange::Add`): a transaction
//! does not read the counts it changes, so two writers on different keys never conflict on
//! their database's row.
//!
//! The rows count stored rows, expired or not; what the commands report subtracts the keys
//! whose deadline has passed but that no expiry has removed yet ([`Keyspace::due_rows`]),
//! which the `kv_expiry` queue (ordered by deadline) names.

use std::ops::Bound;

use tailstore_engine::{ColumnChange, Database, KeyRange, Transaction};
use tailstore_storage::{ScanDirection, Value};

use super::meta::{bytes, int, KeyMeta};
use super::{Keyspace, KvError};
use crate::command::Fault;

/// Column numbers in `kv_counts (db) -> keys, expires`.
const KEYS: usize = 1;
const EXPIRES: usize = 2;

/// Rows of `kv_keys` a counting pass reads per transaction when a database has no counts
/// row yet (a database written before `kv_counts` existed).
const COUNT_BATCH: usize = 4096;

/// A change of the number of keys and of keys with a TTL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CountDelta {
    pub keys: i64,
    pub expires: i64,
}

impl CountDelta {
    /// What writing `meta`'s row changes: a new row adds a key; the deadline it had as
    /// stored and the one it is written with decide the TTL count.
    pub fn of_store(meta: &KeyMeta) -> CountDelta {
        CountDelta {
            keys: i64::from(!meta.stored),
            expires: i64::from(meta.expire_at != 0) - i64::from(meta.stored_with_ttl()),
        }
    }

    /// What deleting `meta`'s stored row changes.
    pub fn of_delete(meta: &KeyMeta) -> CountDelta {
        CountDelta {
            keys: -1,
            expires: -i64::from(meta.stored_with_ttl()),
        }
    }

    fn is_zero(self) -> bool {
        self == CountDelta::default()
    }
}

impl Keyspace {
    /// Adds `delta` to database `db`'s counts, at commit.
    pub(crate) fn count(
        &self,
        txn: &mut Transaction<'_>,
        db: u32,
        delta: CountDelta,
    ) -> Result<(), Fault> {
        if delta.is_zero() {
            return Ok(());
        }
        let changes = [
            (KEYS, ColumnChange::Add(delta.keys)),
            (EXPIRES, ColumnChange::Add(delta.expires)),
        ];
        txn.update_columns(&self.counts, &[db_value(self.stored_db(db))], &changes)?;
        Ok(())
    }

    /// (keys, keys with a TTL) of database `db` that have not expired, as `txn` sees them.
    pub(crate) fn live_counts(
        &self,
        txn: &mut Transaction<'_>,
        db: u32,
        now_ms: i64,
    ) -> Result<(u64, u64), Fault> {
        let row = txn
            .get(&self.counts, &[db_value(self.stored_db(db))])?
            .ok_or_else(|| Fault::corrupt(format!("kv_counts has no row for database {db}")))?;
        let (stored, with_ttl) = (int(&row[KEYS])?, int(&row[EXPIRES])?);
        let due = self.due_rows(txn, db, now_ms)? as i64;
        // Checked: the counts are stored data (a damaged count of i64::MIN overflowed here).
        let live = |count: i64| count.checked_sub(due).filter(|&n| n >= 0);
        match (live(stored), live(with_ttl)) {
            (Some(keys), Some(expires)) if expires <= keys => Ok((keys as u64, expires as u64)),
            _ => Err(Fault::corrupt(format!(
                "kv_counts of database {db} is inconsistent: {stored} keys, {with_ttl} with a \
                 TTL, {due} of them expired"
            ))),
        }
    }

    /// How many keys of database `db` are stored with a deadline at or before `now_ms`:
    /// the `kv_expiry` entries that are due and still name their key's deadline (an entry
    /// left behind by a rewrite names another, or no key).
    fn due_rows(&self, txn: &mut Transaction<'_>, db: u32, now_ms: i64) -> Result<usize, Fault> {
        let range = KeyRange::new(Bound::Unbounded, Bound::Included(vec![Value::Int(now_ms)]));
        let due = txn.scan(&self.expiry, &range, ScanDirection::Ascending, usize::MAX)?;
        let mut count = 0;
        for entry in &due {
            if int(&entry[1])? != i64::from(self.stored_db(db)) {
                continue;
            }
            let at = int(&entry[0])?;
            let key = bytes(&entry[2])?;
            if self
                .load_meta(txn, db, key)?
                .is_some_and(|meta| meta.expire_at == at)
            {
                count += 1;
            }
        }
        Ok(count)
    }
}

impl Keyspace {
    /// The rows stored database `stored`'s counts row counts (0 without a row).
    pub(super) fn stored_keys(&self, txn: &mut Transaction<'_>, stored: u32) -> Result<i64, Fault> {
        match txn.get(&self.counts, &[db_value(stored)])? {
            Some(row) => int(&row[KEYS]),
            None => Ok(0),
        }
    }

    /// Gives stored database `stored` counts of zero (a flushed database's fresh number).
    pub(super) fn zero_counts(&self, txn: &mut Transaction<'_>, stored: u32) -> Result<(), Fault> {
        let row = [db_value(stored), Value::Int(0), Value::Int(0)];
        txn.put(&self.counts, &row)?;
        Ok(())
    }

    /// Deletes stored database `stored`'s counts row (a flushed database, freed).
    pub(super) fn drop_counts(&self, txn: &mut Transaction<'_>, stored: u32) -> Result<(), Fault> {
        txn.remove(&self.counts, &[db_value(stored)])?;
        Ok(())
    }
}

/// Gives every database below `databases` its counts row, counting its keys when it has
/// none (a new database has none to count; one written before `kv_counts` existed does).
/// Runs before the server serves anyone.
pub(super) fn ensure_rows(ks: &Keyspace, databases: u32) -> Result<(), KvError> {
    let db = ks.database();
    for n in 0..databases {
        let mut txn = db.begin();
        let present = txn.get(&ks.counts, &[db_value(n)])?.is_some();
        txn.rollback();
        if present {
            continue;
        }
        let (keys, expires) = count_stored(ks, db, n)?;
        let mut txn = db.begin();
        let row = [db_value(n), Value::Int(keys), Value::Int(expires)];
        txn.insert(&ks.counts, &row)?;
        txn.commit()?;
    }
    Ok(())
}

/// (rows, rows with a deadline) of database `n` in `kv_keys`, read a batch at a time.
fn count_stored(ks: &Keyspace, db: &Database, n: u32) -> Result<(i64, i64), KvError> {
    let (mut keys, mut expires, mut from) = (0, 0, 0);
    loop {
        let mut txn = db.begin();
        let batch = ks
            .keys_from(&mut txn, n, from, COUNT_BATCH)
            .map_err(|fault| fault.into_engine_error())?;
        txn.rollback();
        let Some(last) = batch.last() else {
            return Ok((keys, expires));
        };
        from = super::slot_of(&last.0) + 1;
        keys += batch.len() as i64;
        expires += batch.iter().filter(|(_, meta)| meta.expire_at != 0).count() as i64;
    }
}

fn db_value(db: u32) -> Value {
    Value::Int(i64::from(db))
}
