//! SWAPDB: which stored database each numbered database is.
//!
//! Rows name their database (`kv_keys`, `kv_expiry`, `kv_counts`) by a *stored* number;
//! clients name a *logical* one (SELECT, MOVE, FLUSHDB, INFO's keyspace). The two are the
//! same until a SWAPDB exchanges two logical databases' stored numbers: one small
//! transaction, however many keys either holds, as Redis's swap of two pointers. The
//! rows translate a logical number when they are built (`Keyspace::stored_db`) and a
//! stored one back when they are read (`Keyspace::logical_db`, for the deadline queue),
//! so every layer above them speaks logical numbers only.
//!
//! The map is stored in `kv_parts` under a reserved owner ([`MAP_OWNER`]), a row per
//! logical database that is not its own stored one (field: its number, value: the stored
//! number, four bytes each, big-endian), written in SWAPDB's transaction and read at
//! open, so a swap is durable before its reply and survives a crash whole or not at all.
//!
//! # Why every transaction holds the map
//!
//! A command reads the map wherever it builds a row, and its reply may say where it wrote
//! ("OK" to SET in database 0). If a swap came between its first row and its commit, one
//! command could read two maps; if it came between its apply and its commit, a SET applied
//! to stored database 0 would commit after the swap, and its client, answered OK for
//! database 0, would find the key in database 1. So every keyspace transaction holds the
//! map shared from its start to its commit ([`DatabaseMap::hold`]), and SWAPDB holds it
//! exclusively while it commits its rows and exchanges the numbers. The shared hold is
//! one of several locks, chosen per thread, so two event loops' commands never touch the
//! same lock word; SWAPDB takes them all, in order. Holds are recursive (a command that
//! writes a long string runs transactions inside its own), so a waiting SWAPDB never
//! stops a thread that already holds its share.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tailstore_engine::{PendingCommit, Transaction};
use tailstore_storage::ScanDirection;

use super::{Keyspace, KvError};
use crate::command::Fault;

/// The owner of the map's rows in `kv_parts` (key ids are never negative; -1 holds the
/// function libraries).
const MAP_OWNER: i64 = -2;
/// Locks the shared hold is spread over.
const SHARDS: usize = 8;

/// Logical database → stored database, and back.
pub(crate) struct DatabaseMap {
    stored: Vec<AtomicU32>,
    logical: Vec<AtomicU32>,
    shards: [RwLock<()>; SHARDS],
}

/// A shared hold of the map: no SWAPDB changes it while this lives.
pub(crate) type MapHold<'a> = RwLockReadGuard<'a, ()>;

impl DatabaseMap {
    /// Each database its own (a store never swapped).
    pub(crate) fn identity(databases: u32) -> DatabaseMap {
        let numbers = || (0..databases).map(AtomicU32::new).collect();
        DatabaseMap {
            stored: numbers(),
            logical: numbers(),
            shards: Default::default(),
        }
    }

    /// The shared hold of this thread's lock.
    pub(crate) fn hold(&self) -> MapHold<'_> {
        self.shards[shard()].read_recursive()
    }

    /// The stored number of logical database `db` (a number past the map names itself:
    /// callers check database numbers before they reach the rows).
    pub(crate) fn stored(&self, db: u32) -> u32 {
        self.stored
            .get(db as usize)
            .map_or(db, |s| s.load(Ordering::Acquire))
    }

    /// The logical number of stored database `stored`.
    pub(crate) fn logical(&self, stored: u32) -> u32 {
        self.logical
            .get(stored as usize)
            .map_or(stored, |l| l.load(Ordering::Acquire))
    }

    /// Every shard's lock, exclusively, in order.
    fn hold_exclusively(&self) -> Vec<RwLockWriteGuard<'_, ()>> {
        self.shards.iter().map(RwLock::write).collect()
    }

    /// Exchanges two logical databases' stored numbers (under the exclusive hold).
    fn exchange(&self, a: u32, b: u32) {
        let (stored_a, stored_b) = (self.stored(a), self.stored(b));
        self.stored[a as usize].store(stored_b, Ordering::Release);
        self.stored[b as usize].store(stored_a, Ordering::Release);
        self.logical[stored_b as usize].store(a, Ordering::Release);
        self.logical[stored_a as usize].store(b, Ordering::Release);
    }
}

/// This thread's shard: threads are dealt shards in turn as they first hold the map.
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|shard| *shard)
}

/// How many times SWAPDB's transaction is tried (it conflicts with nothing but a page
/// split it shares with a key's row, which a retry passes).
const ATTEMPTS: usize = 16;

impl Keyspace {
    /// The stored number of logical database `db`, as rows name it.
    pub(crate) fn stored_db(&self, db: u32) -> u32 {
        self.map.stored(db)
    }

    /// The logical number of stored database `stored`.
    pub(crate) fn logical_db(&self, stored: u32) -> u32 {
        self.map.logical(stored)
    }

    /// A shared hold of the map, for a transaction's life (see the module's text).
    pub(crate) fn hold_databases(&self) -> MapHold<'_> {
        self.map.hold()
    }

    /// SWAPDB a b: exchanges the two databases' contents for every client at once; the
    /// commit to wait for before answering. `a` and `b` are valid database numbers.
    pub fn swap_databases(&self, a: u32, b: u32) -> Result<PendingCommit<'_>, Fault> {
        assert!(
            a < self.databases && b < self.databases,
            "checked by the caller"
        );
        let _exclusive = self.map.hold_exclusively();
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            tailstore_engine::pause_before_retry(attempt);
            let mut txn = self.database().begin();
            let written = self
                .store_mapping(&mut txn, a, self.map.stored(b))
                .and_then(|()| self.store_mapping(&mut txn, b, self.map.stored(a)));
            if let Err(fault) = written {
                txn.rollback();
                return Err(fault);
            }
            match txn.commit_pending() {
                Ok(pending) => {
                    if a != b {
                        self.map.exchange(a, b);
                    }
                    return Ok(pending);
                }
                Err(err) if err.is_retryable() => last = Some(err),
                Err(err) => return Err(Fault::Engine(err)),
            }
        }
        Err(Fault::Engine(last.unwrap_or_else(|| {
            tailstore_engine::EngineError::Corrupt("kv: SWAPDB retried without an abort".into())
        })))
    }

    /// Stores that logical database `db` is stored database `stored` (no row when it is
    /// its own).
    fn store_mapping(&self, txn: &mut Transaction<'_>, db: u32, stored: u32) -> Result<(), Fault> {
        let field = db.to_be_bytes();
        if db == stored {
            self.delete_value(txn, MAP_OWNER, &field)?;
            return Ok(());
        }
        let old = self.value_len(txn, MAP_OWNER, &field)?;
        self.write_value(txn, MAP_OWNER, &field, &stored.to_be_bytes(), old)
    }

    /// Reads the stored map at open: each row a logical database and its stored one,
    /// together a permutation of the databases.
    pub(super) fn load_database_map(&mut self) -> Result<(), KvError> {
        let mut txn = self.database().begin();
        let rows = self.fields(&mut txn, MAP_OWNER, ScanDirection::Ascending, usize::MAX);
        txn.rollback();
        let rows = rows.map_err(|fault| KvError::Engine(fault.into_engine_error()))?;
        let databases = self.databases;
        let mut stored: Vec<u32> = (0..databases).collect();
        for (field, value) in &rows {
            let (Ok(db), Ok(to)) = (
                <[u8; 4]>::try_from(&field[..]),
                <[u8; 4]>::try_from(&value[..]),
            ) else {
                return Err(damaged_map("a row that is not two database numbers"));
            };
            let (db, to) = (u32::from_be_bytes(db), u32::from_be_bytes(to));
            if db >= databases || to >= databases {
                return Err(KvError::DatabaseMap(format!(
                    "SWAPDB left database {db} stored as database {to}; start the server with \
                     --databases {} or more",
                    db.max(to) + 1
                )));
            }
            stored[db as usize] = to;
        }
        let mut seen = vec![false; databases as usize];
        for &to in &stored {
            if std::mem::replace(&mut seen[to as usize], true) {
                return Err(damaged_map(&format!(
                    "two databases stored as database {to}"
                )));
            }
        }
        let map = DatabaseMap::identity(databases);
        for (db, &to) in stored.iter().enumerate() {
            map.stored[db].store(to, Ordering::Relaxed);
            map.logical[to as usize].store(db as u32, Ordering::Relaxed);
        }
        self.map = map;
        Ok(())
    }
}

fn damaged_map(what: &str) -> KvError {
    KvError::DatabaseMap(format!("the stored SWAPDB map is damaged: {what}"))
}
