//! FLUSHDB and FLUSHALL: a flushed database gets a fresh stored number; the keys under the
//! old one are freed in the background.
//!
//! Redis empties a database by putting an empty table in its place: every client sees it
//! empty at once, however many keys it held. tailstore does the same with the map of
//! databases ([`super::databases`]): one small transaction stores the flushed database
//! under a fresh stored number ([`DatabaseMap::fresh`]) with counts of zero, and records
//! the old number as flushed (a row under [`FLUSHED_OWNER`] in `kv_parts`, field: the
//! number, four bytes big-endian). FLUSHALL does this for every database in one
//! transaction. A crash leaves that transaction whole or absent, so a flush is never seen
//! half done, before or after a restart; and it costs the same with ten keys or ten
//! million (FLUSHDB ASYNC and SYNC alike).
//!
//! The housekeeping task then removes the old number's keys a batch per transaction
//! ([`Keyspace::free_flushed`]), through the same removal as a DEL (their elements go to
//! the lazy free, their deadlines and counts with them), naming the old number by a hidden
//! logical number no client can select ([`HIDDEN`]). The transaction that finds no key
//! left deletes the number's counts row and its flushed row; from then on a later flush
//! may take the number. Until then none does ([`super::databases::Taken`]), and a restart
//! reads the flushed rows and goes on freeing.
//!
//! WATCH sees a flush as Redis does: a watched key that existed is gone (EXEC finds no row
//! under the new number), one that did not exist still does not (EXEC runs).
//!
//! [`DatabaseMap::fresh`]: super::databases::DatabaseMap::fresh

use std::collections::BTreeSet;

use tailstore_engine::{EngineError, PendingCommit, Transaction};
use tailstore_storage::ScanDirection;

use super::databases::{DatabaseMap, FRESH, HIDDEN};
use super::{Freed, Keyspace};
use crate::command::Fault;

/// The owner of the flushed rows in `kv_parts` (-1: function libraries; -2: the map).
const FLUSHED_OWNER: i64 = -3;
/// Keys of a flushed database removed per transaction.
const BATCH: usize = 64;

/// A database a flush empties: its logical number, its fresh stored one, its old one.
struct Flushed {
    db: u32,
    fresh: u32,
    old: u32,
}

impl Keyspace {
    /// FLUSHDB (`Some(db)`) / FLUSHALL (`None`): empties the databases for every client at
    /// once; the commit to wait for before answering. `db` is a valid database number.
    pub fn flush(&self, db: Option<u32>) -> Result<PendingCommit<'_>, Fault> {
        let databases = self.flushed_by(db);
        let write = |txn: &mut Transaction<'_>| self.store_flushes(txn, &databases, true);
        self.change_map("FLUSHDB", write, apply)
    }

    /// FLUSHDB (`Some(db)`) / FLUSHALL (`None`) in a client's transaction (an EXEC block, a
    /// script), under the map's exclusive hold (see [`Keyspace::change_map_in`]): the
    /// commands after it find the databases empty.
    pub(super) fn flush_in_transaction(
        &self,
        txn: &mut Transaction<'_>,
        db: Option<u32>,
    ) -> Result<(), Fault> {
        // Every database, empty or not: the block's own writes are not in the counts yet.
        let flushed = self.store_flushes(txn, &self.flushed_by(db), false)?;
        self.map.assert_held_exclusively();
        apply(&self.map, flushed);
        Ok(())
    }

    /// The databases FLUSHDB (`Some(db)`) / FLUSHALL (`None`) empties.
    fn flushed_by(&self, db: Option<u32>) -> Vec<u32> {
        let databases: Vec<u32> = match db {
            Some(db) => vec![db],
            None => (0..self.databases).collect(),
        };
        assert!(
            databases.iter().all(|&db| db < self.databases),
            "checked by the caller"
        );
        databases
    }

    /// Writes the rows that empty `databases` (with `skip_empty`, those whose counts say
    /// they hold no key stay as they are).
    fn store_flushes(
        &self,
        txn: &mut Transaction<'_>,
        databases: &[u32],
        skip_empty: bool,
    ) -> Result<Vec<Flushed>, Fault> {
        let mut flushed: Vec<Flushed> = Vec::new();
        // The map changes after every number is taken: each is sought past the last.
        let mut next = FRESH;
        for &db in databases {
            let old = self.map.stored(db);
            if skip_empty && self.stored_keys(txn, old)? == 0 {
                continue;
            }
            let Some(fresh) = self.map.fresh(next) else {
                return Err(Fault::err(
                    "ERR tailstore: every database number is taken by flushed databases not \
                     freed yet; retry once they are",
                ));
            };
            self.store_mapping(txn, db, fresh)?;
            self.zero_counts(txn, fresh)?;
            let field = old.to_be_bytes();
            if self.value_len(txn, FLUSHED_OWNER, &field)?.is_some() {
                return Err(Fault::corrupt(format!(
                    "database {db} is stored as database {old}, which is being freed as flushed"
                )));
            }
            self.write_value(txn, FLUSHED_OWNER, &field, &[], None)?;
            next = fresh + 1;
            flushed.push(Flushed { db, fresh, old });
        }
        Ok(flushed)
    }
}

/// Changes the map once the flushes' rows are written.
fn apply(map: &DatabaseMap, flushed: Vec<Flushed>) {
    for Flushed { db, fresh, old } in flushed {
        map.taken.lock().flushed.insert(old);
        map.assign(db, fresh);
    }
}

impl Keyspace {
    /// The housekeeping's share of a flush: removes a batch of the keys of one flushed
    /// database, or, when none is left, forgets the database. Returns how many keys it
    /// removed, at least 1 when it did any work (0: nothing flushed is left to free).
    pub fn free_flushed(&self) -> Result<usize, EngineError> {
        let freed = self.run_internal(0, |ctx| {
            // Read under the transaction's hold of the map: an EXEC block's flush, applied
            // to the map before its commit, is seen only once committed (a block undone
            // sets the number back to its live database).
            let Some(stored) = ctx.ks.map.taken.lock().flushed.first().copied() else {
                return Ok(None);
            };
            ctx.db = HIDDEN + stored;
            let batch = ctx.ks.keys_from(ctx.txn, ctx.db, 0, BATCH)?;
            for (key, meta) in &batch {
                // A key whose elements were queued counts once they are freed.
                if ctx.remove(key, meta)? == Freed::Now {
                    ctx.stats.lazyfreed += 1;
                }
            }
            if batch.is_empty() {
                ctx.ks.drop_counts(ctx.txn, stored)?;
                ctx.ks
                    .delete_value(ctx.txn, FLUSHED_OWNER, &stored.to_be_bytes())?;
            }
            Ok(Some((stored, batch.len())))
        })?;
        match freed {
            None => Ok(0),
            Some((stored, 0)) => {
                // Under the hold, so that no EXEC block takes the map as it was before
                // (and sets it back to that) in between.
                let _map = self.hold_databases();
                self.map.taken.lock().flushed.remove(&stored);
                Ok(1)
            }
            Some((_, removed)) => Ok(removed),
        }
    }

    /// Keys of flushed databases not freed yet (for INFO's `lazyfree_pending_objects`).
    pub(crate) fn flushed_keys(&self, txn: &mut Transaction<'_>) -> Result<i64, Fault> {
        let flushed = self.map.taken.lock().flushed.clone();
        let mut keys = 0i64;
        for stored in flushed {
            keys = keys.saturating_add(self.stored_keys(txn, stored)?);
        }
        Ok(keys)
    }

    /// The stored numbers of the flushed databases not freed yet (read at open).
    pub(super) fn flushed_databases(
        &self,
        txn: &mut Transaction<'_>,
    ) -> Result<BTreeSet<u32>, Fault> {
        let rows = self.fields(txn, FLUSHED_OWNER, ScanDirection::Ascending, usize::MAX)?;
        rows.iter()
            .map(|(field, _)| {
                <[u8; 4]>::try_from(&field[..])
                    .map(u32::from_be_bytes)
                    .ok()
                    .filter(|&stored| stored < HIDDEN)
                    .ok_or_else(|| {
                        Fault::corrupt("a flushed database's row names no database".into())
                    })
            })
            .collect()
    }
}
