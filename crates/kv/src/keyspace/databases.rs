//! SWAPDB and flushes: which stored database each numbered database is.
//!
//! Rows name their database (`kv_keys`, `kv_expiry`, `kv_counts`) by a *stored* number;
//! clients name a *logical* one (SELECT, MOVE, FLUSHDB, INFO's keyspace). The two are the
//! same until a SWAPDB exchanges two logical databases' stored numbers, or a flush gives
//! one a fresh stored number (see [`super::flushes`]): one small transaction, however many
//! keys either holds, as Redis's swap of two pointers. The rows translate a logical number
//! when they are built (`Keyspace::stored_db`) and a stored one back when they are read
//! (`Keyspace::logical_db`, for the deadline queue), so every layer above them speaks
//! logical numbers only; a stored number no selectable database has is read back as a
//! hidden logical number ([`HIDDEN`]).
//!
//! The map is stored in `kv_parts` under a reserved owner ([`MAP_OWNER`]), a row per
//! logical database that is not its own stored one (field: its number, value: the stored
//! number, four bytes each, big-endian), written in SWAPDB's or the flush's transaction
//! and read at open, so a change is durable before its reply and survives a crash whole
//! or not at all. No two databases are stored under one number. A row for a database
//! past `--databases` (a store started with fewer databases than it had) is kept and its
//! number left untaken: that database's keys stay stored, unseen, as those of any
//! database past `--databases` do.
//!
//! # Why every transaction holds the map
//!
//! A command reads the map wherever it builds a row, and its reply may say where it wrote
//! ("OK" to SET in database 0). If a swap came between its first row and its commit, one
//! command could read two maps; if it came between its apply and its commit, a SET applied
//! to stored database 0 would commit after the swap, and its client, answered OK for
//! database 0, would find the key in database 1. So every keyspace transaction holds the
//! map shared from its start to its commit ([`DatabaseMap::hold`]), and SWAPDB or a flush
//! holds it exclusively while it commits its rows and changes the numbers
//! ([`Keyspace::change_map`]). The shared hold is one of several locks, chosen per thread,
//! so two event loops' commands never touch the same lock word; the exclusive hold takes
//! them all, in order. Holds are recursive (a command that writes a long string runs
//! transactions inside its own), so a waiting SWAPDB never stops a thread that already
//! holds its share.

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tailstore_engine::{PendingCommit, Transaction};
use tailstore_storage::ScanDirection;

use super::{Keyspace, KvError};
use crate::command::{Fault, MapChange};

/// The owner of the map's rows in `kv_parts` (key ids are never negative; -1 holds the
/// function libraries).
const MAP_OWNER: i64 = -2;
/// Locks the shared hold is spread over.
const SHARDS: usize = 8;
/// Fresh stored numbers (a flushed database's, see [`super::flushes`]) are taken from here
/// up: above every number `--databases` allows, so that a later start with more databases
/// finds its new databases' own numbers unused.
pub(crate) const FRESH: u32 = 1 << 30;
/// The most numbered databases a store may have (the numbers below [`FRESH`]).
pub const MAX_DATABASES: u32 = FRESH;
/// Logical numbers from here up name stored databases no client can select (a flushed
/// database whose keys are being freed): logical `HIDDEN + s` is stored `s`, so that the
/// layers above the rows remove such keys as they remove any other. Stored numbers fit the
/// rows' 32-bit signed column, so `HIDDEN + s` fits a `u32`.
pub(crate) const HIDDEN: u32 = 1 << 31;

/// Logical database → stored database, and back.
pub(crate) struct DatabaseMap {
    /// Logical → stored, for the selectable databases (read by every command).
    stored: Vec<AtomicU32>,
    /// Stored → logical for the selectable databases not stored under their own number
    /// (read by the active expiry only; changed under the exclusive hold).
    moved: RwLock<HashMap<u32, u32>>,
    /// Stored numbers no fresh number may take: those of flushed databases still being
    /// freed (see [`super::flushes`]), and those the stored map names for databases past
    /// `--databases` (their keys stay stored, unseen, as any database past it).
    pub(super) taken: Mutex<Taken>,
    /// Per selectable database, how many times its stored number changed (SWAPDB, a flush,
    /// a block's change set back). WATCH remembers its database's count: a key watched
    /// before such a change was compared, at EXEC, with rows and deletion counts of another
    /// stored database, which could match by chance (a key created and deleted again after
    /// a SWAPDB ran the block, where Redis aborts it).
    epochs: Vec<AtomicU64>,
    shards: [RwLock<()>; SHARDS],
}

/// See [`DatabaseMap::taken`].
#[derive(Clone, Default)]
pub(super) struct Taken {
    pub flushed: BTreeSet<u32>,
    unseen: HashSet<u32>,
}

/// The longest a transaction that keeps conflicting waits for the map's exclusive hold
/// before it goes on without it.
const ALONE_WAIT: Duration = Duration::from_millis(50);

/// A shared hold of the map: no SWAPDB or flush changes it while this lives (`None` on the
/// thread that holds it exclusively).
pub(crate) type MapHold<'a> = Option<RwLockReadGuard<'a, ()>>;

/// Why this thread holds the map exclusively, if it does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    No,
    /// To change it (SWAPDB or a flush in a client's transaction).
    ForChange,
    /// To run a transaction that keeps conflicting while no other runs: it may not change
    /// the map, which only the runner that restores it on failure may let a body do.
    ToRunAlone,
}

thread_local! {
    /// Whether this thread holds the map exclusively: its transactions (an EXEC block that
    /// changes the map, and those a command in it runs inside its own) take no shared hold.
    static HELD_EXCLUSIVELY: Cell<Held> = const { Cell::new(Held::No) };
}

/// The exclusive hold of the map: every shard's lock, in order.
pub(crate) struct ExclusiveHold<'a> {
    _shards: Vec<RwLockWriteGuard<'a, ()>>,
}

impl Drop for ExclusiveHold<'_> {
    fn drop(&mut self) {
        HELD_EXCLUSIVELY.with(|held| held.set(Held::No));
    }
}

/// The map as it was before an EXEC block changed it, to set it back if the block does
/// not commit.
pub(crate) struct MapState {
    stored: Vec<u32>,
    moved: HashMap<u32, u32>,
    taken: Taken,
}

impl DatabaseMap {
    /// Each database its own (a store never swapped nor flushed).
    pub(crate) fn identity(databases: u32) -> DatabaseMap {
        DatabaseMap {
            stored: (0..databases).map(AtomicU32::new).collect(),
            moved: RwLock::default(),
            taken: Mutex::default(),
            epochs: (0..databases).map(|_| AtomicU64::new(0)).collect(),
            shards: Default::default(),
        }
    }

    /// The shared hold of this thread's lock.
    pub(crate) fn hold(&self) -> MapHold<'_> {
        if HELD_EXCLUSIVELY.with(Cell::get) != Held::No {
            return None;
        }
        Some(self.shards[shard()].read_recursive())
    }

    /// The stored number of logical database `db` (a number past the map names itself:
    /// callers check database numbers before they reach the rows; a hidden one names the
    /// stored database it hides).
    pub(crate) fn stored(&self, db: u32) -> u32 {
        match self.stored.get(db as usize) {
            Some(stored) => stored.load(Ordering::Acquire),
            None if db >= HIDDEN => db - HIDDEN,
            None => db,
        }
    }

    /// How many times logical database `db`'s stored number has changed (see
    /// [`DatabaseMap::epochs`]); 0 for a number past the map.
    pub(crate) fn epoch(&self, db: u32) -> u64 {
        self.epochs
            .get(db as usize)
            .map_or(0, |epoch| epoch.load(Ordering::Acquire))
    }

    /// Counts a change of logical database `db`'s stored number.
    fn count_change(&self, db: usize) {
        if let Some(epoch) = self.epochs.get(db) {
            epoch.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The logical number of stored database `stored`: a selectable database's, else a
    /// hidden one.
    pub(crate) fn logical(&self, stored: u32) -> u32 {
        if let Some(&db) = self.moved.read().get(&stored) {
            return db;
        }
        let own = self.stored.get(stored as usize);
        match own.map(|s| s.load(Ordering::Acquire)) {
            Some(s) if s == stored => stored,
            _ => HIDDEN + stored,
        }
    }

    /// Whether this thread holds the map exclusively.
    fn held_exclusively(&self) -> bool {
        HELD_EXCLUSIVELY.with(Cell::get) == Held::ForChange
    }

    /// Asserts that this thread holds the map exclusively (it changes it in a transaction
    /// not committed yet).
    pub(super) fn assert_held_exclusively(&self) {
        assert!(
            self.held_exclusively(),
            "the map changes under its exclusive hold"
        );
    }

    /// Every shard's lock, exclusively, in order.
    pub(super) fn hold_exclusively(&self) -> ExclusiveHold<'_> {
        assert!(
            HELD_EXCLUSIVELY.with(Cell::get) == Held::No,
            "the map is held exclusively once"
        );
        let shards = self.shards.iter().map(RwLock::write).collect();
        HELD_EXCLUSIVELY.with(|held| held.set(Held::ForChange));
        ExclusiveHold { _shards: shards }
    }

    /// Every shard's lock, exclusively, if they are all free before `deadline`; `None` if
    /// this thread holds the map already, or a shard stays held (by a transaction running
    /// long, or by this thread's own shared hold further up its stack, which waiting would
    /// deadlock on).
    fn try_hold_exclusively(&self, deadline: Instant) -> Option<ExclusiveHold<'_>> {
        if HELD_EXCLUSIVELY.with(Cell::get) != Held::No {
            return None;
        }
        let mut shards = Vec::with_capacity(self.shards.len());
        for shard in &self.shards {
            shards.push(shard.try_write_until(deadline)?);
        }
        HELD_EXCLUSIVELY.with(|held| held.set(Held::ToRunAlone));
        Some(ExclusiveHold { _shards: shards })
    }

    /// The map as it is now (under the exclusive hold).
    fn state(&self) -> MapState {
        MapState {
            stored: self
                .stored
                .iter()
                .map(|s| s.load(Ordering::Acquire))
                .collect(),
            moved: self.moved.read().clone(),
            taken: self.taken.lock().clone(),
        }
    }

    /// Sets the map back to `state` (under the exclusive hold).
    fn set_state(&self, state: &MapState) {
        for (db, (slot, &stored)) in self.stored.iter().zip(&state.stored).enumerate() {
            if slot.swap(stored, Ordering::AcqRel) != stored {
                self.count_change(db);
            }
        }
        self.moved.write().clone_from(&state.moved);
        self.taken.lock().clone_from(&state.taken);
    }

    /// Stores logical database `db` as stored database `stored` (under the exclusive hold,
    /// after the change is committed).
    pub(super) fn assign(&self, db: u32, stored: u32) {
        let mut moved = self.moved.write();
        let old = self.stored[db as usize].swap(stored, Ordering::AcqRel);
        if old != stored {
            self.count_change(db as usize);
        }
        if moved.get(&old) == Some(&db) {
            moved.remove(&old);
        }
        if stored != db {
            moved.insert(stored, db);
        }
    }

    /// Exchanges two logical databases' stored numbers (under the exclusive hold).
    fn exchange(&self, a: u32, b: u32) {
        if a == b {
            return;
        }
        let (stored_a, stored_b) = (self.stored(a), self.stored(b));
        self.assign(a, stored_b);
        self.assign(b, stored_a);
    }

    /// The lowest stored number from `from` (at least [`FRESH`]) up that no database
    /// holds, selectable, flushed or unseen (under the exclusive hold); `None` only with
    /// 2^30 of them taken. A caller taking several before the map changes asks for each
    /// from one past the last.
    pub(super) fn fresh(&self, from: u32) -> Option<u32> {
        let moved = self.moved.read();
        let taken = self.taken.lock();
        let free = |n: &u32| {
            !moved.contains_key(n) && !taken.flushed.contains(n) && !taken.unseen.contains(n)
        };
        (from.max(FRESH)..HIDDEN).find(free)
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

    /// How many times logical database `db`'s stored number has changed (SWAPDB, flushes):
    /// what WATCH remembers of the map.
    pub(crate) fn map_epoch(&self, db: u32) -> u64 {
        self.map.epoch(db)
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
        let write = |txn: &mut Transaction<'_>| self.store_swap(txn, a, b);
        self.change_map("SWAPDB", write, |map, ()| map.exchange(a, b))
    }

    /// Writes the rows of SWAPDB a b.
    fn store_swap(&self, txn: &mut Transaction<'_>, a: u32, b: u32) -> Result<(), Fault> {
        assert!(
            a < self.databases && b < self.databases,
            "checked by the caller"
        );
        self.store_mapping(txn, a, self.map.stored(b))?;
        self.store_mapping(txn, b, self.map.stored(a))
    }

    /// SWAPDB, FLUSHDB or FLUSHALL in a client's transaction (an EXEC block, a script):
    /// the map changes at once, so that what the transaction does next sees the change.
    /// Without the map's exclusive hold, [`Fault::MapHoldNeeded`]: the client's runner
    /// runs the transaction again under it (see [`Keyspace::hold_map_for_change`]).
    pub(crate) fn change_map_in(
        &self,
        txn: &mut Transaction<'_>,
        change: MapChange,
    ) -> Result<(), Fault> {
        if !self.map.held_exclusively() {
            return Err(Fault::MapHoldNeeded);
        }
        match change {
            MapChange::Flush(db) => self.flush_in_transaction(txn, db),
            MapChange::Swap(a, b) => self.swap_in_transaction(txn, a, b),
        }
    }

    /// SWAPDB in a client's transaction, under the map's exclusive hold.
    fn swap_in_transaction(&self, txn: &mut Transaction<'_>, a: u32, b: u32) -> Result<(), Fault> {
        self.store_swap(txn, a, b)?;
        self.map.assert_held_exclusively();
        self.map.exchange(a, b);
        Ok(())
    }

    /// The exclusive hold for a client's transaction that changes the map (SWAPDB or a
    /// flush in an EXEC block or a script), and the map as it was: the transaction changes
    /// the map as it runs, so that what it does next sees the change, and each attempt of
    /// it and one that did not commit set the map back to it ([`Keyspace::set_map`]).
    /// The map's exclusive hold for a transaction that keeps conflicting, so that its next
    /// attempt runs while no other transaction does (see `Keyspace::run_retried`); `None`
    /// if it cannot be had within [`ALONE_WAIT`].
    pub(crate) fn hold_to_run_alone(&self) -> Option<ExclusiveHold<'_>> {
        self.map.try_hold_exclusively(Instant::now() + ALONE_WAIT)
    }

    pub(crate) fn hold_map_for_change(&self) -> (ExclusiveHold<'_>, MapState) {
        let exclusive = self.map.hold_exclusively();
        (exclusive, self.map.state())
    }

    /// Sets the map back to `state` (under the block's exclusive hold).
    pub(crate) fn set_map(&self, state: &MapState) {
        self.map.assert_held_exclusively();
        self.map.set_state(state);
    }

    /// Commits a change of the map under the exclusive hold: `write` writes its rows in a
    /// transaction of its own (again after a conflict, which only a page split shared with
    /// a key's row causes), `apply` changes the map in memory once they are committed.
    /// Returns the commit to wait for before answering.
    pub(super) fn change_map<T>(
        &self,
        command: &str,
        mut write: impl FnMut(&mut Transaction<'_>) -> Result<T, Fault>,
        apply: impl FnOnce(&DatabaseMap, T),
    ) -> Result<PendingCommit<'_>, Fault> {
        let _exclusive = self.map.hold_exclusively();
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            tailstore_engine::pause_before_retry(attempt);
            let mut txn = self.database().begin();
            let written = match write(&mut txn) {
                Ok(written) => written,
                Err(fault) => {
                    txn.rollback();
                    return Err(fault);
                }
            };
            match txn.commit_pending() {
                Ok(pending) => {
                    apply(&self.map, written);
                    return Ok(pending);
                }
                Err(err) if err.is_retryable() => last = Some(err),
                Err(err) => return Err(Fault::Engine(err)),
            }
        }
        Err(Fault::Engine(last.unwrap_or_else(|| {
            tailstore_engine::EngineError::Corrupt(format!(
                "kv: {command} retried without an abort"
            ))
        })))
    }

    /// Stores that logical database `db` is stored database `stored` (no row when it is
    /// its own).
    pub(super) fn store_mapping(
        &self,
        txn: &mut Transaction<'_>,
        db: u32,
        stored: u32,
    ) -> Result<(), Fault> {
        let field = db.to_be_bytes();
        if db == stored {
            self.delete_value(txn, MAP_OWNER, &field)?;
            return Ok(());
        }
        let old = self.value_len(txn, MAP_OWNER, &field)?;
        self.write_value(txn, MAP_OWNER, &field, &stored.to_be_bytes(), old)
    }

    /// Reads the stored map at open: each row a logical database and its stored one, no two
    /// databases stored under one number; and the flushed databases still being freed.
    pub(super) fn load_database_map(&mut self) -> Result<(), KvError> {
        let mut txn = self.database().begin();
        let rows = self.fields(&mut txn, MAP_OWNER, ScanDirection::Ascending, usize::MAX);
        let flushed = self.flushed_databases(&mut txn);
        txn.rollback();
        let engine = |fault: Fault| KvError::Engine(fault.into_engine_error());
        let (rows, flushed) = (rows.map_err(engine)?, flushed.map_err(engine)?);
        let databases = self.databases;
        let mut stored: Vec<u32> = (0..databases).collect();
        let mut unseen = HashSet::new();
        for (field, value) in &rows {
            let (Ok(db), Ok(to)) = (
                <[u8; 4]>::try_from(&field[..]),
                <[u8; 4]>::try_from(&value[..]),
            ) else {
                return Err(damaged_map("a row that is not two database numbers"));
            };
            let (db, to) = (u32::from_be_bytes(db), u32::from_be_bytes(to));
            if to >= HIDDEN {
                return Err(damaged_map(&format!("database {db} stored as {to}")));
            }
            match stored.get_mut(db as usize) {
                Some(slot) => *slot = to,
                // A database past --databases: unseen in this run, its number kept.
                None => _ = unseen.insert(to),
            }
        }
        let mut seen = HashSet::new();
        for &to in stored.iter().chain(&unseen) {
            if !seen.insert(to) {
                return Err(damaged_map(&format!(
                    "two databases stored as database {to}"
                )));
            }
        }
        if let Some(both) = flushed.iter().find(|s| seen.contains(s)) {
            return Err(damaged_map(&format!(
                "database {both} is in use and being freed as flushed"
            )));
        }
        let map = DatabaseMap::identity(databases);
        for (db, &to) in stored.iter().enumerate() {
            map.assign(db as u32, to);
        }
        *map.taken.lock() = Taken { flushed, unseen };
        self.map = map;
        Ok(())
    }
}

fn damaged_map(what: &str) -> KvError {
    KvError::DatabaseMap(format!("the stored map of databases is damaged: {what}"))
}
