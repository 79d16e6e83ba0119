//! Transactions: optimistic, serializable, with early lock release.
//!
//! # Protocol (in the style of Silo, Tu et al., SOSP 2013)
//!
//! *Execution.* Reads go straight to the B+trees, without locks, and are remembered in a
//! read set: each point read with the version of the row it saw (or "absent"), each range
//! scan with its bounds, limit and the (key, version) pairs it returned, or, for a walk that
//! passed over rows without returning them (a count, a rank; `walk_tree`), with the stamps
//! of the leaves it read. Writes are buffered in the transaction's write set; the trees are
//! not touched.
//!
//! *Commit* (transactions with writes):
//! 1. Lock every written key in its tree's lock table, in (tree, key) order. A key locked by
//!    another transaction is waited for, yielding the processor, at most `LOCK_YIELDS` times;
//!    then this transaction aborts (`write-conflict`). Every committer takes its locks in the
//!    same order and holds no lock while it waits for anything but a later key, so the
//!    waits cannot form a cycle; the bound keeps a committer from holding its own locks
//!    for long behind a holder that was preempted.
//! 2. Validate: every point read must not be locked by another transaction that changes
//!    what it read, and then still see the same version (or, for a column read, the same
//!    values in its columns) (`read-changed`); for every scan, no key in the range it covered
//!    may be locked by another transaction, and then the scan, run again, must return the
//!    same pairs, or a walk's leaves must still have their stamps (`phantom`; why that is
//!    enough: docs/design/storage.md §2). The lock is checked first: see `validate_scan`.
//! 3. Compute the new value of every row changed by column (see below), then, tree by tree
//!    in *descending* tree order, take the tree's write latch and apply its writes with a
//!    new version (a database-wide counter); log them all as one record (`wal.rs`), stamp
//!    the touched pages with its LSN, return the pages the changes emptied to the free list
//!    and release the latches. Unless the pool copies pages to a double-write area in PMEM,
//!    the record ends with a full image of every page changed for the first time since the
//!    latest checkpoint began (`Shared::redo_lsn`; see `recovery.rs`, "torn pages"). Emptied pages are freed only after the append: freed
//!    earlier, another tree's committer could reuse one and log its new contents before
//!    this record logs it as free, and redo would replay the two in that wrong order.
//!    Every latch is held until the append, so the first one taken is held longest: any
//!    fixed order would do against deadlock, and descending order takes last the trees
//!    created first, which in a schema like TPC-C's are the small, hot ones (warehouse,
//!    district) that every transaction reads (decision 49 in docs/ARCHITECTURE.md).
//! 4. Release the key locks, then wait for the record to be durable. The locks are released
//!    *before* the wait (early lock release).
//!
//! Read-only transactions validate (step 2) and then wait until the log is durable up to
//! where it had been appended when they committed. One that made a single point read and no
//! scan skips the validation (see "Read-only transactions" below).
//!
//! # Why it is serializable
//!
//! Order committed transactions by the moment each holds all its locks (after step 1). Take
//! T committing with reads R and writes W. Every row in R had, at validation, the version T
//! read and was unlocked by others, so no transaction that changed it committed between T's
//! read and T's validation; one that locks it later serializes after T (and if it read
//! anything T writes, it fails its own validation: T's key is locked, or its version
//! changed). Scans get the same guarantee for the keys that were *not* there (phantoms): an
//! insert into the range is either applied (the re-scan differs) or being committed (its key
//! is locked in the range) or comes after T's validation (it serializes after T). So each
//! transaction behaves as if it ran alone at its lock point. See docs/design/storage.md.
//!
//! # Column reads and column writes
//!
//! [`Transaction::get_columns`] reads some columns of a row; [`Transaction::update_columns`]
//! (and [`Transaction::add`]) changes some columns of a row that exists, as a patch applied
//! at commit to the row *as it is then* — after its lock is held, so no one else changes the
//! row between the computation and the apply. A patch records only a read of the row's
//! existence; an `Add` does not read the column it adds to. Each read and each key lock
//! carries a column mask (`patch.rs`); whole-row reads and writes have every bit.
//!
//! *Validation.* A column read R of row r whose version changed still holds if the columns
//! it read have the values it read, and no lock on r held by another transaction changes
//! one of them. The serializability argument above goes through unchanged with "the
//! version of what R read" in place of "the version of r": the transactions that changed r
//! between R's read and the validation changed only other columns (or put back the same
//! values), so ordering the reader before or after them does not change what it read. Two
//! patches of one row never lose each other's changes, because each is applied to the row
//! as the previous one left it, not as a full image computed from a stale read; concurrent
//! `Add`s to one counter commute. A whole-row write (`update`, `insert`, `delete`) still
//! conflicts with every reader of the row, and a scan still sees any change to a row as a
//! new version.
//!
//! # Read-only transactions with one point read
//!
//! Such a transaction R read one version of one key k, under the tree's read latch, so W, the
//! last transaction to apply a write of k before the read, had finished applying it, and U,
//! the next one, applies after the read. W held k's lock until it had applied, so U locked k
//! after that: W's lock point precedes U's. R's only conflicts are W → R (R read W's write)
//! and R → U (U overwrote what R read), so placing R anywhere between those two lock points
//! keeps every edge pointing forward: validating R could only abort it needlessly. This does
//! not extend to a second read, nor to a scan: a writer Y that locked one key before X
//! locked another may apply after R read while X applied before, and Y may have read
//! something X overwrote, which closes a cycle X → R → Y → X that validation catches.
//! Durability is unchanged: R still waits for the log as far as it was appended.
//!
//! # Read-committed transactions
//!
//! [`Database::begin_read_committed`](crate::Database::begin_read_committed) starts a
//! transaction that only reads and is not validated at commit: isolation level 1 (no dirty
//! writes, no dirty reads), what the TPC-C specification asks of Stock-Level (clause 3.4.1)
//! and what a report that may mix moments needs. It never sees a change of a transaction that
//! has not committed: writes are buffered until commit and applied only after their
//! transaction has validated, and a read never takes a change not yet appended (the leaf's
//! unlogged mark, "Reads beside a writer" in the B+tree). It may see part of a commit that is
//! being applied and rows of different moments (read skew), which level 1 allows. Its commit
//! waits, as every read-only one does, for the log as far as it was appended, so nothing it
//! saw can be lost once it is acknowledged. It writes nothing: a write is refused
//! ([`EngineError::ReadCommittedWrite`]), since a write computed from unvalidated reads could
//! lose another transaction's update. Serializable transactions are unaffected: they never
//! read its (non-existent) writes, and its reads constrain no one.
//!
//! # Validating a point read without searching again
//!
//! A point read remembers the leaf it searched and the leaf's LSN. At validation, if the key
//! is not locked by another transaction and the leaf still has that LSN, the read stands:
//! every applied change to a leaf is stamped with a new, larger LSN before the tree latch is
//! released, and a change being applied right now holds the lock of every key it writes.
//! (A split in progress may move the key to another page, but does not change its version.)
//!
//! # Early lock release is safe
//!
//! A transaction that saw T's writes read them after T's step 3, which appended T's record;
//! if it writes, its own record has a larger LSN, and records become durable in LSN order,
//! so waiting for its own record waits for T's. A read-only one waits for the log as far as
//! it had been appended at its commit, which includes T's record. So no transaction is
//! acknowledged before every transaction whose writes it saw is durable.
//!
//! Row versions are unique and increase over the life of the database: the counter starts at
//! the log's end LSN when the database opens, and every commit that takes a version appends a
//! record of more than one byte, so versions never catch up with LSNs of a later opening.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tailstore_storage::key::prefix_successor;
use tailstore_storage::{
    LeafRoom, LeafStamp, PageIdMap, PageIdSet, Redo, ScanDirection, Schema, StorageError,
    TreeWriter, Value,
};

use crate::catalog::TableState;
use crate::database::Shared;
use crate::error::{AbortCause, EngineError, Result};
use crate::interleave::{self, Point};
use crate::patch::{check_columns, project, ColumnChange, ColumnMask, Patch};
use crate::plant::Plant;
use crate::wal;

const VERSION_BYTES: usize = 8;

/// How many times a committer yields while a key it must lock is held by another committer
/// before it gives up (`write-conflict`). Locks are taken in (tree, key) order, so waiting
/// cannot deadlock; the bound only stops a transaction from waiting behind a preempted
/// holder for long while it holds locks of its own.
const LOCK_YIELDS: u32 = 1000;

/// A handle on a table, cheap to clone.
#[derive(Clone)]
pub struct Table {
    state: Arc<TableState>,
}

impl Table {
    pub(crate) fn new(state: Arc<TableState>) -> Table {
        Table { state }
    }

    pub fn name(&self) -> &str {
        self.state.name()
    }

    pub fn schema(&self) -> &Schema {
        &self.state.schema
    }

    /// Position of the secondary index `name`.
    fn index_position(&self, name: &str) -> Result<usize> {
        self.state
            .schema
            .index_position(name)
            .ok_or_else(|| EngineError::NoSuchIndex {
                table: self.name().to_string(),
                index: name.to_string(),
            })
    }
}

/// A range of keys given by column values: bounds are key *prefixes*. `Included(v)` as the
/// lower bound starts at the first key beginning with `v`; `Excluded(v)` starts after every
/// key beginning with `v`; as the upper bound, `Included(v)` ends after every key beginning
/// with `v` and `Excluded(v)` ends before the first one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    pub lower: Bound<Vec<Value>>,
    pub upper: Bound<Vec<Value>>,
}

impl KeyRange {
    /// Every key.
    pub fn all() -> KeyRange {
        KeyRange {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
        }
    }

    /// The keys that begin with `prefix`.
    pub fn prefix(prefix: Vec<Value>) -> KeyRange {
        KeyRange {
            lower: Bound::Included(prefix.clone()),
            upper: Bound::Included(prefix),
        }
    }

    pub fn new(lower: Bound<Vec<Value>>, upper: Bound<Vec<Value>>) -> KeyRange {
        KeyRange { lower, upper }
    }
}

type ByteBound = Bound<Vec<u8>>;
/// A bound on the write set's (tree id, key) order.
type WriteBound = Bound<(u32, Vec<u8>)>;

/// A tree of a table the transaction uses: (table slot in `Transaction::tables`, tree index).
#[derive(Clone, Copy, PartialEq, Eq)]
struct TreeRef {
    table: usize,
    tree: usize,
}

/// A stored row's version and its decoded values.
type VersionedRow = (u64, Vec<Value>);

struct PointRead {
    tree: TreeRef,
    key: Vec<u8>,
    version: Option<u64>,
    /// The leaf the key was found in (or would be) and its LSN then: validation's fast path.
    stamp: LeafStamp,
    /// For a read of some columns of a row that exists: those and the values read. `None`:
    /// the read depends on the whole row.
    columns: Option<Box<ColumnRead>>,
}

struct ColumnRead {
    columns: Vec<usize>,
    values: Vec<Value>,
    mask: ColumnMask,
}

impl PointRead {
    fn mask(&self) -> ColumnMask {
        self.columns
            .as_ref()
            .map_or(ColumnMask::WHOLE_ROW, |read| read.mask)
    }
}

struct RangeRead {
    tree: TreeRef,
    lower: ByteBound,
    upper: ByteBound,
    direction: ScanDirection,
    limit: usize,
    proof: ScanProof,
}

/// What a scan keeps to show, at validation, that it would read the same again.
enum ScanProof {
    /// (key, version) as returned; index entries have version 0. Run again, the scan must
    /// return the same pairs; the bounds are cut at the last pair if `limit` was reached.
    Pairs(SeenKeys),
    /// The stamps of the leaves a walk read ([`BTree::walk_stamped`]), which passed over
    /// pairs without returning them (a count, a rank): each leaf must still have its
    /// stamp. The bounds are already cut to the part the walk covered.
    ///
    /// [`BTree::walk_stamped`]: tailstore_storage::BTree::walk_stamped
    Leaves(Vec<LeafStamp>),
}

/// The (key, version) pairs a scan returned, in scan order, the keys back to back in one
/// buffer: validation compares a second scan with them, and a vector per key was one
/// allocation per element of every LRANGE.
#[derive(Default)]
struct SeenKeys {
    bytes: Vec<u8>,
    /// Per pair, where its key ends in `bytes`, and its version.
    ends: Vec<(usize, u64)>,
}

impl SeenKeys {
    fn push(&mut self, key: &[u8], version: u64) {
        self.bytes.extend_from_slice(key);
        self.ends.push((self.bytes.len(), version));
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, at: usize) -> Option<(&[u8], u64)> {
        let (end, version) = *self.ends.get(at)?;
        let start = at.checked_sub(1).map_or(0, |before| self.ends[before].0);
        Some((&self.bytes[start..end], version))
    }

    fn last(&self) -> Option<(&[u8], u64)> {
        self.len().checked_sub(1).and_then(|at| self.get(at))
    }

    fn keys(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.len()).filter_map(|at| self.get(at).map(|(key, _)| key))
    }
}

struct Write {
    tree: TreeRef,
    op: WriteOp,
}

#[derive(Clone)]
enum WriteOp {
    /// The row value or index value to put.
    Put(PutValue),
    Delete,
    /// Column changes to a row that exists, applied to the row as it is at commit.
    Patch(Patch),
}

/// A value to put behind room for the row version, which `apply_and_log` writes into it: a
/// table's B+tree stores each row as its version and then its value, and with the room kept
/// from the row's encoding on, the value reaches the leaf without another copy of it (a 4 KiB
/// Redis value was copied once more for its 8-byte version; ARCHITECTURE decision 106). An
/// index entry's room stays unused.
#[derive(Clone)]
struct PutValue(Vec<u8>);

impl PutValue {
    /// The encoding of `row`'s value columns.
    fn row(schema: &Schema, row: &[Value]) -> Result<PutValue> {
        Ok(PutValue(schema.encode_value_after(VERSION_BYTES, row)?))
    }

    /// `row`'s primary key and [`PutValue::row`].
    fn keyed_row(schema: &Schema, row: &[Value]) -> Result<(Vec<u8>, PutValue)> {
        Ok((schema.primary_key_of(row)?, PutValue::row(schema, row)?))
    }

    /// An index entry's value: empty.
    fn empty() -> PutValue {
        PutValue(vec![0; VERSION_BYTES])
    }

    /// The value, without the room for the version.
    fn value(&self) -> &[u8] {
        &self.0[VERSION_BYTES..]
    }

    /// Writes the row's version into its room.
    fn stamp(&mut self, version: u64) {
        self.0[..VERSION_BYTES].copy_from_slice(&version.to_le_bytes());
    }

    /// The row as a table's B+tree stores it, once stamped: its version, then the value.
    fn stored(&self) -> &[u8] {
        &self.0
    }

    fn into_value(mut self) -> Vec<u8> {
        self.0.drain(..VERSION_BYTES);
        self.0
    }
}

impl WriteOp {
    fn from_value(value: Option<PutValue>) -> WriteOp {
        value.map_or(WriteOp::Delete, WriteOp::Put)
    }

    /// About the bytes the write adds to the commit record besides its key: a put's value
    /// and its row version (a patch's value is known only at commit; counted as nothing).
    fn logged_value_len(&self) -> usize {
        match self {
            WriteOp::Put(value) => value.stored().len(),
            WriteOp::Patch(_) | WriteOp::Delete => 0,
        }
    }

    /// The columns the write changes (for its key lock).
    fn changes(&self) -> ColumnMask {
        match self {
            WriteOp::Patch(patch) => patch.mask(),
            WriteOp::Put(_) | WriteOp::Delete => ColumnMask::WHOLE_ROW,
        }
    }
}

/// Bytes a redo op takes besides its key and value (tag, page id, lengths), rounded up: for
/// reserving a commit record's buffer at once.
const REDO_OP_BYTES: usize = 32;

/// A transaction. Dropping it without [`Transaction::commit`] rolls it back.
pub struct Transaction<'db> {
    db: &'db Shared,
    /// Owner id of the key locks; 0 (no owner: every lock is another's) until commit.
    id: u64,
    tables: Vec<TableRef<'db>>,
    reads: Vec<PointRead>,
    scans: Vec<RangeRead>,
    /// Keyed by (tree id, key): the commit order of step 1.
    writes: BTreeMap<(u32, Vec<u8>), Write>,
    /// What `writes` would log, kept as they change (see [`Transaction::check_size`]).
    write_bytes: usize,
    /// What callers said their removals may add to the record (see [`Transaction::charge`]).
    charged_bytes: usize,
    /// Read-only and not validated (see "Read-committed transactions").
    read_committed: bool,
    done: bool,
}

/// A table a transaction uses: borrowed from the database's registry when it is there (no
/// reference count to write, see `Shared::registered`), else a counted reference.
enum TableRef<'db> {
    Registered(&'db TableState),
    Counted(Arc<TableState>),
}

impl TableRef<'_> {
    fn state(&self) -> &TableState {
        match self {
            TableRef::Registered(state) => state,
            TableRef::Counted(state) => state,
        }
    }
}

/// A commit applied but not yet known to be durable ([`Transaction::commit_pending`]).
/// Dropping it without [`PendingCommit::wait`] leaves the commit unacknowledged: it may or
/// may not survive a crash.
#[must_use = "a commit is acknowledged only after `wait`"]
pub struct PendingCommit<'db> {
    db: &'db Shared,
    lsn: u64,
    /// `None` for a read-only transaction (it logged nothing of its own).
    intent: Option<tailstore_log::CommitIntent<'db>>,
}

impl PendingCommit<'_> {
    /// The log position that must be durable before the commit may be acknowledged.
    pub fn lsn(&self) -> u64 {
        self.lsn
    }

    /// Whether the transaction wrote anything (a read-only one logged nothing).
    pub fn wrote(&self) -> bool {
        self.intent.is_some()
    }

    /// Waits until the commit is durable in the database's commit mode.
    pub fn wait(self) -> Result<()> {
        let durable = match self.intent {
            Some(intent) => intent.wait(self.lsn),
            None => self.db.log.wait_durable(self.lsn),
        };
        // A log that cannot make it durable has stopped: so has the database.
        durable.map_err(|e| self.db.fail_stop(e.into()))?;
        self.db.counters.commits.add(1);
        Ok(())
    }
}

impl<'db> Transaction<'db> {
    pub(crate) fn new(db: &'db Shared) -> Self {
        Transaction {
            db,
            id: 0,
            tables: Vec::new(),
            reads: Vec::new(),
            scans: Vec::new(),
            writes: BTreeMap::new(),
            write_bytes: 0,
            charged_bytes: 0,
            read_committed: false,
            done: false,
        }
    }

    /// A transaction at isolation level 1 (see "Read-committed transactions").
    pub(crate) fn new_read_committed(db: &'db Shared) -> Self {
        let mut txn = Transaction::new(db);
        txn.read_committed = true;
        txn
    }

    /// The row whose primary key is `key` (one value per primary-key column).
    pub fn get(&mut self, table: &Table, key: &[Value]) -> Result<Option<Vec<Value>>> {
        let pk = self.full_primary_key(table, key)?;
        let slot = self.slot(table);
        let schema = table.schema();
        self.read_row_with(slot, pk, |pk, value| Ok(schema.decode_row(pk, value)?))
    }

    /// The rows whose primary keys are `keys`, as [`Transaction::get`] of each would return
    /// them, read in as few B+tree descents as the leaves allow (rows with adjacent keys,
    /// such as the parts of one value, usually share a leaf; see [`BTree::get_many_with`]).
    /// Each row is recorded as a point read of its own.
    ///
    /// [`BTree::get_many_with`]: tailstore_storage::BTree::get_many_with
    pub fn get_many(
        &mut self,
        table: &Table,
        keys: &[Vec<Value>],
    ) -> Result<Vec<Option<Vec<Value>>>> {
        if !self.writes.is_empty() {
            // Its own writes come first: one read at a time, through them.
            return keys.iter().map(|key| self.get(table, key)).collect();
        }
        let pks = keys
            .iter()
            .map(|key| self.full_primary_key(table, key))
            .collect::<Result<Vec<_>>>()?;
        self.get_many_stored(table, pks)
    }

    /// The rows at `positions` (strictly increasing) among the rows whose primary key lies
    /// in `range`, in key order: position 0 is the range's first row. A position past the
    /// range's last row finds none, so fewer rows may come back. The rows between positions
    /// are passed over in the tree, neither copied nor recorded: a random member of a set
    /// of a million costs the visit of the leaves before it (SPOP, SRANDMEMBER).
    ///
    /// Only the rows returned are recorded, as point reads: which rows hold which positions
    /// is *not* validated. A caller whose answer depends on the positions (not only on the
    /// rows it got) must also read a row that every insert or delete in `range` writes (a
    /// set's key row, with its count), so that such a change aborts it. With writes of its
    /// own in `range`, the transaction reads the range as a [`Transaction::scan`] does,
    /// through them, and the scan is validated.
    pub fn rows_at(
        &mut self,
        table: &Table,
        range: &KeyRange,
        positions: &[usize],
    ) -> Result<Vec<Vec<Value>>> {
        let (tree, lower, upper) = self.primary_bounds(table, range)?;
        if is_empty_range(&lower, &upper) || positions.is_empty() {
            return Ok(Vec::new());
        }
        let own_writes = self.writes_in(tree, &lower, &upper);
        if own_writes {
            let last = positions[positions.len() - 1];
            let mut rows = self.scan(
                table,
                range,
                ScanDirection::Ascending,
                last.saturating_add(1),
            )?;
            let mut taken = Vec::with_capacity(positions.len());
            for &at in positions {
                if let Some(row) = rows.get_mut(at) {
                    taken.push(std::mem::take(row));
                }
            }
            return Ok(taken);
        }
        let pks = self
            .tree(tree)
            .btree
            .keys_at(as_ref(&lower), as_ref(&upper), positions)?;
        // Read again as point reads, each recorded with the version it saw. A row gone in
        // between (another commit deleted it) is left out.
        Ok(self
            .get_many_stored(table, pks)?
            .into_iter()
            .flatten()
            .collect())
    }

    /// Whether this transaction has written a key of `tree` in `(lower, upper)`.
    fn writes_in(&self, tree: TreeRef, lower: &ByteBound, upper: &ByteBound) -> bool {
        let bounds = write_bounds(self.tree_id(tree), lower, upper);
        self.writes.range(bounds).next().is_some()
    }

    /// [`Transaction::get_many`] of encoded primary keys, read from the tree: for keys this
    /// transaction has not written.
    fn get_many_stored(
        &mut self,
        table: &Table,
        pks: Vec<Vec<u8>>,
    ) -> Result<Vec<Option<Vec<Value>>>> {
        let slot = self.slot(table);
        let tree = TreeRef {
            table: slot,
            tree: 0,
        };
        let schema = table.schema();
        let mut found: Vec<Result<Option<VersionedRow>>> = Vec::with_capacity(pks.len());
        found.resize_with(pks.len(), || Ok(None));
        let pk_refs: Vec<&[u8]> = pks.iter().map(Vec::as_slice).collect();
        let stamps = self.tree(tree).btree.get_many_with(&pk_refs, |i, stored| {
            found[i] = stored
                .map(|bytes| {
                    let (version, value) = split_version(bytes)?;
                    Ok((version, schema.decode_row(&pks[i], value)?))
                })
                .transpose();
        })?;
        assert_eq!(stamps.len(), pks.len(), "a stamp for every key read");
        let mut rows = Vec::with_capacity(pks.len());
        for ((pk, stamp), found) in pks.into_iter().zip(stamps).zip(found) {
            let (version, row) = found?.unzip();
            self.record_read(tree, pk, version, stamp);
            rows.push(row);
        }
        Ok(rows)
    }

    /// The values of `columns` (in that order) of the row whose primary key is `key`. The
    /// transaction depends only on these columns (and on the row existing): a concurrent
    /// commit that changes other columns of the row with [`Transaction::update_columns`]
    /// does not abort it. See "Column reads and column writes" in the module documentation.
    pub fn get_columns(
        &mut self,
        table: &Table,
        key: &[Value],
        columns: &[usize],
    ) -> Result<Option<Vec<Value>>> {
        let schema = table.schema();
        check_columns(schema, table.name(), columns)?;
        let pk = self.full_primary_key(table, key)?;
        let slot = self.slot(table);
        let tree = TreeRef {
            table: slot,
            tree: 0,
        };
        if !self.writes.is_empty() && self.writes.contains_key(&(self.tree_id(tree), pk.clone())) {
            // Read through this transaction's own write: as a whole-row read.
            let row =
                self.read_row_with(slot, pk, |pk, value| Ok(schema.decode_row(pk, value)?))?;
            return Ok(row.map(|row| project(&row, columns)));
        }
        self.read_stored_columns(tree, schema, pk, columns)
    }

    /// Changes some columns of the row whose primary key is `key`, which must exist
    /// ([`EngineError::RowNotFound`] otherwise). The changes apply at commit to the row as it
    /// is then; the transaction reads only the row's existence, so concurrent transactions
    /// that change or read *other* columns do not conflict with it, nor do concurrent
    /// [`ColumnChange::Add`]s to the same column. Key and index columns cannot be changed
    /// this way (use [`Transaction::update`]). An `Add` to a column that holds NULL at commit,
    /// or one that leaves the column's range, fails the commit with nothing changed.
    pub fn update_columns(
        &mut self,
        table: &Table,
        key: &[Value],
        changes: &[(usize, ColumnChange)],
    ) -> Result<()> {
        let schema = table.schema();
        let patch = Patch::new(schema, table.name(), changes)?;
        let missing = || EngineError::RowNotFound(table.name().to_string());
        if changes.is_empty() {
            // Nothing to change: only the row's existence matters.
            return match self.get_columns(table, key, &[])? {
                Some(_) => Ok(()),
                None => Err(self.unless_stale(missing())),
            };
        }
        let pk = self.full_primary_key(table, key)?;
        let slot = self.slot(table);
        let tree = TreeRef {
            table: slot,
            tree: 0,
        };
        let id = self.tree_id(tree);
        let op = match self
            .writes
            .get_mut(&(id, pk.clone()))
            .map(|write| &mut write.op)
        {
            Some(WriteOp::Put(value)) => {
                let mut row = schema.decode_row(&pk, value.value())?;
                patch.apply(schema, &mut row)?;
                WriteOp::Put(PutValue::row(schema, &row)?)
            }
            Some(WriteOp::Delete) => return Err(missing()),
            Some(WriteOp::Patch(earlier)) => {
                // In place: a counter one transaction changes per row it writes (a key
                // count) would otherwise be copied once per change, quadratic in the rows.
                earlier.then(patch);
                return Ok(());
            }
            None => {
                // A read that found the row already makes the commit depend on its existence.
                let found = self
                    .reads
                    .iter()
                    .any(|read| read.tree == tree && read.version.is_some() && read.key == pk);
                if !found
                    && self
                        .read_stored_columns(tree, schema, pk.clone(), &[])?
                        .is_none()
                {
                    return Err(self.unless_stale(missing()));
                }
                WriteOp::Patch(patch)
            }
        };
        self.buffer_op(slot, 0, pk, op)
    }

    /// Adds `delta` to integer or decimal column `column` of the row whose primary key is
    /// `key`, at commit: [`Transaction::update_columns`] with one [`ColumnChange::Add`].
    pub fn add(&mut self, table: &Table, key: &[Value], column: usize, delta: i64) -> Result<()> {
        self.update_columns(table, key, &[(column, ColumnChange::Add(delta))])
    }

    /// Adds a row (one value per column); [`EngineError::DuplicateKey`] if its primary key
    /// (or a unique index key) is taken.
    pub fn insert(&mut self, table: &Table, row: &[Value]) -> Result<()> {
        let slot = self.slot(table);
        let schema = table.schema();
        let row = schema.checked_row(row)?;
        let (pk, value) = PutValue::keyed_row(schema, &row)?;
        if self.read_row(slot, &pk)?.is_some() {
            return Err(self.unless_stale(EngineError::DuplicateKey(table.name().to_string())));
        }
        self.check_unique(table, slot, &row, None)?;
        self.buffer_write(slot, 0, pk, Some(value))?;
        for i in 0..schema.indexes().len() {
            let key = schema.index_key(i, &row)?;
            self.buffer_write(slot, 1 + i, key, Some(PutValue::empty()))?;
        }
        Ok(())
    }

    /// Replaces the row with the same primary key; [`EngineError::RowNotFound`] if there is
    /// none.
    pub fn update(&mut self, table: &Table, row: &[Value]) -> Result<()> {
        let slot = self.slot(table);
        let schema = table.schema();
        let row = schema.checked_row(row)?;
        let (pk, value) = PutValue::keyed_row(schema, &row)?;
        let old = match self.read_row(slot, &pk)? {
            Some(old) => schema.decode_row(&pk, &old)?,
            None => {
                let missing = EngineError::RowNotFound(table.name().to_string());
                return Err(self.unless_stale(missing));
            }
        };
        self.check_unique(table, slot, &row, Some(&old))?;
        self.buffer_write(slot, 0, pk, Some(value))?;
        for i in 0..schema.indexes().len() {
            let (old_key, new_key) = (schema.index_key(i, &old)?, schema.index_key(i, &row)?);
            if old_key != new_key {
                self.buffer_write(slot, 1 + i, old_key, None)?;
                self.buffer_write(slot, 1 + i, new_key, Some(PutValue::empty()))?;
            }
        }
        Ok(())
    }

    /// Writes a row whether or not one with its primary key exists (a blind write: the
    /// transaction reads nothing, so it adds nothing to validate). Only for tables without
    /// secondary indexes, whose entries would need the old row; on others it reads the row
    /// and inserts or updates.
    pub fn put(&mut self, table: &Table, row: &[Value]) -> Result<()> {
        let schema = table.schema();
        if !schema.indexes().is_empty() {
            let key = schema.primary_key_of(row)?;
            let slot = self.slot(table);
            return match self.read_row(slot, &key)? {
                Some(_) => self.update(table, row),
                None => self.insert(table, row),
            };
        }
        let slot = self.slot(table);
        let row = schema.checked_row(row)?;
        let (pk, value) = PutValue::keyed_row(schema, &row)?;
        self.buffer_write(slot, 0, pk, Some(value))?;
        Ok(())
    }

    /// Deletes the row whose primary key is `key` without reading it (a blind write; see
    /// [`Transaction::put`]). Tables with secondary indexes read the row first.
    pub fn remove(&mut self, table: &Table, key: &[Value]) -> Result<()> {
        if !table.schema().indexes().is_empty() {
            return self.delete(table, key).map(drop);
        }
        let pk = self.full_primary_key(table, key)?;
        let slot = self.slot(table);
        self.buffer_write(slot, 0, pk, None)?;
        Ok(())
    }

    /// Counts `bytes` against the commit's size limit ([`Database::max_commit_bytes`]), as
    /// if written: for a caller about to remove rows it knows to be large. A removal logs only
    /// its key, but the merges of the leaves it empties log images of the pages they leave,
    /// which for large rows come to about twice the bytes removed. Other modes log such a
    /// record in parts, but in `pmem-log` one that does not fit the log would stop the
    /// database after its pages changed; charged, it bounds the work of one commit in every
    /// mode. Refused like a write past the limit (the transaction changes nothing when it
    /// commits).
    ///
    /// [`Database::max_commit_bytes`]: crate::Database::max_commit_bytes
    pub fn charge(&mut self, bytes: usize) -> Result<()> {
        self.charged_bytes = self.charged_bytes.saturating_add(bytes);
        self.check_size(0)
    }

    /// What [`Transaction::charge`] has counted so far.
    pub fn charged(&self) -> usize {
        self.charged_bytes
    }

    /// Removes the row whose primary key is `key`; returns whether it existed.
    pub fn delete(&mut self, table: &Table, key: &[Value]) -> Result<bool> {
        let Some(old) = self.get(table, key)? else {
            return Ok(false);
        };
        let slot = self.slot(table);
        let schema = table.schema();
        self.buffer_write(slot, 0, schema.primary_key_of(&old)?, None)?;
        for i in 0..schema.indexes().len() {
            self.buffer_write(slot, 1 + i, schema.index_key(i, &old)?, None)?;
        }
        Ok(true)
    }

    /// Rows whose primary key lies in `range`, in `direction`, at most `limit`.
    pub fn scan(
        &mut self,
        table: &Table,
        range: &KeyRange,
        direction: ScanDirection,
        limit: usize,
    ) -> Result<Vec<Vec<Value>>> {
        let mut rows = Vec::new();
        self.scan_each(
            table,
            range,
            direction,
            limit,
            |_| true,
            |row| {
                rows.push(row.iter_mut().map(std::mem::take).collect());
                Ok(())
            },
        )?;
        Ok(rows)
    }

    /// [`Transaction::scan`] without a vector per row: each row in turn is decoded into one
    /// row reused from entry to entry, with only the columns `wanted` (the others `Null`, see
    /// [`Schema::decode_row_into`]), and handed to `take`, which may move values out of it.
    /// A list's 600 elements cost 600 row vectors and their unwanted keys' copies before.
    pub fn scan_each(
        &mut self,
        table: &Table,
        range: &KeyRange,
        direction: ScanDirection,
        limit: usize,
        wanted: impl Fn(usize) -> bool,
        mut take: impl FnMut(&mut [Value]) -> Result<()>,
    ) -> Result<()> {
        let (tree, lower, upper) = self.primary_bounds(table, range)?;
        let schema = table.schema();
        let mut row = vec![Value::Null; schema.columns().len()];
        self.scan_tree(tree, lower, upper, direction, limit, |key, value| {
            row.fill(Value::Null);
            schema.decode_row_into(key, value, &wanted, &mut row)?;
            take(&mut row)
        })?;
        Ok(())
    }

    /// Rows whose key in secondary index `index` lies in `range` (bounds are prefixes of the
    /// index columns followed by the primary-key columns), in index order.
    pub fn scan_index(
        &mut self,
        table: &Table,
        index: &str,
        range: &KeyRange,
        direction: ScanDirection,
        limit: usize,
    ) -> Result<Vec<Vec<Value>>> {
        let position = table.index_position(index)?;
        let (tree, lower, upper) = self.index_bounds(table, index, range)?;
        let slot = tree.table;
        let schema = table.schema();
        let index_keys = self.scan_tree(tree, lower, upper, direction, limit, |key, _| {
            Ok(key.to_vec())
        })?;
        interleave::reached(Point::IndexScanned);
        let mut rows = Vec::with_capacity(index_keys.len());
        for index_key in index_keys {
            let pk = schema.primary_key_from_index_key(position, &index_key)?;
            let Some(value) = self.read_row(slot, pk)? else {
                // A commit may have deleted the row, and its entry, since the index was
                // read: then the scan's range changed and this is a retryable abort, not
                // damage.
                let missing = EngineError::Corrupt(format!(
                    "index `{index}` of table `{}` names a missing row",
                    table.name()
                ));
                return Err(self.unless_stale(missing));
            };
            rows.push(schema.decode_row(pk, &value)?);
        }
        Ok(rows)
    }

    /// How many rows have their primary key in `range`. The rows are counted a leaf at a
    /// time, neither read nor recorded: counting a million costs a visit of their leaves.
    /// The count is validated by those leaves' stamps, so a commit that changes one of
    /// them meanwhile, even outside the range, aborts this transaction (`phantom`).
    pub fn count(&mut self, table: &Table, range: &KeyRange) -> Result<usize> {
        let (tree, lower, upper) = self.primary_bounds(table, range)?;
        self.count_tree(tree, lower, upper)
    }

    /// [`Transaction::count`] of the entries of secondary index `index` in `range`.
    pub fn count_index(&mut self, table: &Table, index: &str, range: &KeyRange) -> Result<usize> {
        let (tree, lower, upper) = self.index_bounds(table, index, range)?;
        self.count_tree(tree, lower, upper)
    }

    /// Roughly what share of the rows with their primary key in `whole` have it in `part` (a
    /// range inside it), from 0 to 1, from the shape of the tree
    /// (`BTree::position_estimate`); 0 when `whole` looks empty. Neither validated nor
    /// recorded: for choosing between counting `part` and counting the rest of `whole`,
    /// never for an answer.
    pub fn share_estimate(
        &mut self,
        table: &Table,
        part: &KeyRange,
        whole: &KeyRange,
    ) -> Result<f64> {
        let (tree, part_lower, part_upper) = self.primary_bounds(table, part)?;
        let (_, whole_lower, whole_upper) = self.primary_bounds(table, whole)?;
        self.share_in_tree(
            tree,
            (&part_lower, &part_upper),
            (&whole_lower, &whole_upper),
        )
    }

    /// [`Transaction::share_estimate`] of the entries of secondary index `index`.
    pub fn index_share_estimate(
        &mut self,
        table: &Table,
        index: &str,
        part: &KeyRange,
        whole: &KeyRange,
    ) -> Result<f64> {
        let (tree, part_lower, part_upper) = self.index_bounds(table, index, part)?;
        let (_, whole_lower, whole_upper) = self.index_bounds(table, index, whole)?;
        self.share_in_tree(
            tree,
            (&part_lower, &part_upper),
            (&whole_lower, &whole_upper),
        )
    }

    fn share_in_tree(
        &self,
        tree: TreeRef,
        part: (&ByteBound, &ByteBound),
        whole: (&ByteBound, &ByteBound),
    ) -> Result<f64> {
        let btree = &self.tree(tree).btree;
        let at = |bound: &ByteBound, unbounded: f64| match bound {
            Bound::Unbounded => Ok(unbounded),
            Bound::Included(key) | Bound::Excluded(key) => btree.position_estimate(key),
        };
        let (whole_lower, whole_upper) = (at(whole.0, 0.0)?, at(whole.1, 1.0)?);
        // A part that shares a bound with the whole (a rank's start) reuses its descent.
        let part_lower = if part.0 == whole.0 {
            whole_lower
        } else {
            at(part.0, 0.0)?
        };
        let part_upper = if part.1 == whole.1 {
            whole_upper
        } else {
            at(part.1, 1.0)?
        };
        let (whole_span, part_span) = (whole_upper - whole_lower, part_upper - part_lower);
        if whole_span <= 0.0 {
            return Ok(0.0);
        }
        Ok((part_span / whole_span).clamp(0.0, 1.0))
    }

    /// The keys of the entries of secondary index `index` in `range`, in `direction`,
    /// after the first `skip`: at most `limit`, each as the index columns' values followed
    /// by the primary key's. The rows are not read: for an index whose key holds what the
    /// caller needs (a sorted set's score and member). The entries passed over are counted
    /// a leaf at a time, as [`Transaction::count`] counts, and validated as it is; with
    /// none passed over, the entries are validated as a scan's are.
    pub fn index_entries(
        &mut self,
        table: &Table,
        index: &str,
        range: &KeyRange,
        direction: ScanDirection,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<Vec<Value>>> {
        let position = table.index_position(index)?;
        let (tree, lower, upper) = self.index_bounds(table, index, range)?;
        let schema = table.schema();
        let (_, entries) = self.walk_tree(tree, lower, upper, direction, skip, limit, |key| {
            let (mut values, pk) = schema.decode_index_key(position, key)?;
            values.extend(pk);
            Ok(values)
        })?;
        Ok(entries)
    }

    fn count_tree(&mut self, tree: TreeRef, lower: ByteBound, upper: ByteBound) -> Result<usize> {
        let direction = ScanDirection::Ascending;
        let (counted, _) = self.walk_tree(
            tree,
            lower,
            upper,
            direction,
            usize::MAX,
            usize::MAX,
            |_| Ok(()),
        )?;
        Ok(counted)
    }

    /// The table's primary tree and `range`'s bounds in it.
    fn primary_bounds(
        &mut self,
        table: &Table,
        range: &KeyRange,
    ) -> Result<(TreeRef, ByteBound, ByteBound)> {
        let slot = self.slot(table);
        let schema = table.schema();
        let (lower, upper) = byte_bounds(range, |values| schema.primary_key_prefix(values))?;
        Ok((
            TreeRef {
                table: slot,
                tree: 0,
            },
            lower,
            upper,
        ))
    }

    /// Index `index`'s tree and `range`'s bounds in it.
    fn index_bounds(
        &mut self,
        table: &Table,
        index: &str,
        range: &KeyRange,
    ) -> Result<(TreeRef, ByteBound, ByteBound)> {
        let slot = self.slot(table);
        let position = table.index_position(index)?;
        let schema = table.schema();
        let (lower, upper) = byte_bounds(range, |values| schema.index_prefix(position, values))?;
        let tree = TreeRef {
            table: slot,
            tree: 1 + position,
        };
        Ok((tree, lower, upper))
    }

    /// Commits. On a retryable error ([`EngineError::is_retryable`]) nothing was changed.
    pub fn commit(self) -> Result<()> {
        self.commit_pending()?.wait()
    }

    /// Commits without waiting for durability: the changes are applied and visible, the locks
    /// released, and the returned [`PendingCommit`] must be waited on before the commit is
    /// acknowledged to anyone. A server answering many clients at once commits each of their
    /// transactions this way and then waits once, for the highest LSN (group commit across an
    /// event-loop pass). On a retryable error nothing was changed.
    pub fn commit_pending(mut self) -> Result<PendingCommit<'db>> {
        self.done = true;
        let db = self.db;
        // After a failure nothing commits, reads included: what they read may include a
        // change whose record never becomes durable.
        db.check_running()?;
        if self.writes.is_empty() {
            if !self.read_committed && !self.reads_one_version() {
                self.validate()?;
            }
            // Whatever this transaction read may have been written by a commit not yet
            // durable: it waits for every record handed out so far. Not only the filled
            // prefix: a later record may be published and its changes readable while an
            // earlier one is still being written (`tests/durable_reads.rs`).
            let lsn = if db.config.planted(Plant::ReadOnlyWithoutWait) {
                // Planted so that `txn/histories.rs` is seen to catch it: no wait at all.
                0
            } else {
                db.log.reserved_lsn()
            };
            return Ok(PendingCommit {
                db,
                lsn,
                intent: None,
            });
        }
        // Refused here, a transaction too large to log changes nothing; refused by the log
        // after its pages changed, it would stop the database.
        self.check_size(0)?;
        self.check_pages()?;
        // Before any page changes: a full `pmem-log` must not stop us halfway.
        db.wait_for_checkpoint_room(self.write_bytes)?;
        // Ids name lock owners, so only a transaction that locks needs one (taking it at
        // `begin` would make every reader write a shared counter).
        self.id = db.next_txn.fetch_add(1, Ordering::Relaxed);
        let intent = db.log.intend_commit();
        self.lock_writes()?;
        let outcome = self.validate().and_then(|()| {
            interleave::reached(Point::Validated);
            self.apply_and_log()
        });
        self.unlock_writes();
        interleave::reached(Point::Unlocked);
        if let Err(err) = &outcome {
            if !err.is_retryable() {
                // Refused before anything changed (a patch that cannot apply, a record too
                // large): the transaction ends as if rolled back.
                db.counters.rollbacks.add(1);
            }
        }
        let lsn = outcome?;
        Ok(PendingCommit {
            db,
            lsn,
            intent: Some(intent),
        })
    }

    /// `err` (a duplicate or missing row), unless the transaction already read something that
    /// has changed since: then the error may only be an effect of the stale read (an order id
    /// read from a counter that another transaction has since advanced), and the caller gets
    /// a retryable abort instead.
    fn unless_stale(&mut self, err: EngineError) -> EngineError {
        match self.validate() {
            Ok(()) => err,
            Err(abort) => {
                // Counted as an abort by `validate`; dropping it later is not a rollback too.
                self.done = true;
                abort
            }
        }
    }

    /// Refuses a transaction that writes more than a commit may ([`EngineError::TooLarge`]):
    /// refused before any page changes, it changes nothing; refused by the log after its
    /// pages changed, it would stop the database. `patched` is the size of the rows changed
    /// by column once computed (0 before: they count for their keys only until then).
    fn check_size(&self, patched: usize) -> Result<()> {
        let bytes = self.write_bytes + self.charged_bytes + patched;
        let limit = self.db.max_commit_bytes();
        if bytes > limit {
            return Err(EngineError::TooLarge { bytes, limit });
        }
        Ok(())
    }

    /// Refuses a transaction whose writes fall on more pages than a commit may change
    /// ([`EngineError::TooManyPages`], before anything changes): a commit that changed more
    /// pages than the pool has frames would stop the database (`max_commit_pages`). Only a
    /// transaction with enough writes to come near the limit is estimated, by a walk to
    /// each write's leaf (`estimate_pages`): a few hundred writes with a small pool, a few
    /// thousand with a large one.
    fn check_pages(&self) -> Result<()> {
        let limit = self.db.max_commit_pages();
        let bound = self.writes.len() * PAGES_PER_WRITE
            + 2 * self.write_bytes / tailstore_storage::PAGE_SIZE;
        if bound <= limit {
            return Ok(());
        }
        let pages = self.estimate_pages();
        if pages > limit {
            return Err(EngineError::TooManyPages { pages, limit });
        }
        Ok(())
    }

    /// About how many pages applying the writes changes, read without latches: each
    /// write's leaf; for each split (where what the puts add to a leaf passes its free room,
    /// one per half page beyond) a new page, and for each leaf whose removals could leave
    /// it underfull (it may merge) a sibling; the parents of the leaves that split or merge,
    /// and the root.
    fn estimate_pages(&self) -> usize {
        let mut leaves: PageIdMap<LeafLoad> = PageIdMap::default();
        let mut unknown = 0;
        for ((_, key), write) in &self.writes {
            let btree = &self.tree(write.tree).btree;
            let Ok(room) = btree.leaf_room(key) else {
                // A writer moved the path (or the walk met damage, which the apply will
                // meet again): counted as a leaf of its own that splits.
                unknown += 3;
                continue;
            };
            let load = leaves.entry(room.leaf).or_insert(LeafLoad {
                room,
                added: 0,
                removed: 0,
            });
            load.removed += room.entry;
            load.added += match &write.op {
                // The entry, with its slot and lengths.
                WriteOp::Put(value) => key.len() + value.value().len() + VERSION_BYTES + 8,
                // Its new size is known only once applied: as if it doubled.
                WriteOp::Patch(_) => 2 * room.entry,
                WriteOp::Delete => 0,
            };
        }
        let mut changed_parents = PageIdSet::default();
        let mut new_pages = 0;
        for load in leaves.values() {
            let more = load.splits() + usize::from(load.may_merge());
            if more > 0 {
                new_pages += more;
                changed_parents.extend(load.room.parent);
            }
        }
        // A split or merge may reach the root, which then changes too.
        let root = usize::from(new_pages > 0);
        leaves.len() + unknown + new_pages + changed_parents.len() + root
    }

    /// Bytes a buffered write adds to the commit record: its key and value, with a little
    /// for the op's header; a row changed by column counts without its value.
    fn logged_bytes(key_len: usize, op: &WriteOp) -> usize {
        let value = match op {
            WriteOp::Put(value) => value.value().len(),
            WriteOp::Delete | WriteOp::Patch(_) => 0,
        };
        key_len + value + 16
    }

    /// Whether the transaction read at most one row version and scanned nothing: a read-only
    /// one that does so needs no validation (see "Read-only transactions" above).
    fn reads_one_version(&self) -> bool {
        self.reads.len() <= 1 && self.scans.is_empty()
    }

    /// Whether every read so far still holds at this moment: the commit's validation, run
    /// without committing (`Ok(false)` where it would abort). When it holds, the values read
    /// are the database's committed state now, together, so rows that contradict each other
    /// were stored that way; a caller that retries reads which do not fit together (they may
    /// have straddled another commit) can tell damage from a race by this.
    pub fn reads_still_hold(&self) -> Result<bool> {
        match self.validate() {
            Ok(()) => Ok(true),
            Err(err) if err.is_retryable() => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Discards the transaction's writes.
    pub fn rollback(mut self) {
        self.done = true;
        self.db.counters.rollbacks.add(1);
    }

    /// The encoded primary key of `table` with one value per key column.
    fn full_primary_key(&self, table: &Table, key: &[Value]) -> Result<Vec<u8>> {
        let schema = table.schema();
        if key.len() != schema.primary_key().len() {
            return Err(tailstore_storage::RowError::WrongArity {
                expected: schema.primary_key().len(),
                found: key.len(),
            }
            .into());
        }
        Ok(schema.primary_key_prefix(key)?)
    }

    fn slot(&mut self, table: &Table) -> usize {
        let wanted: &TableState = &table.state;
        match self
            .tables
            .iter()
            .position(|t| std::ptr::eq(t.state(), wanted))
        {
            Some(slot) => slot,
            None => {
                let entry = match self.db.registered(&table.state) {
                    Some(state) => TableRef::Registered(state),
                    None => TableRef::Counted(table.state.clone()),
                };
                self.tables.push(entry);
                self.tables.len() - 1
            }
        }
    }

    fn tree(&self, tree: TreeRef) -> &crate::catalog::Tree {
        &self.tables[tree.table].state().trees[tree.tree]
    }

    fn tree_id(&self, tree: TreeRef) -> u32 {
        self.tree(tree).id
    }

    /// The row value (without version) under primary key `pk`: this transaction's own write
    /// if it has one, else the tree's (recorded in the read set).
    fn read_row(&mut self, slot: usize, pk: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read_row_with(slot, pk.to_vec(), |_, value| Ok(value.to_vec()))
    }

    /// The row of primary key `pk` (this transaction's own write, else the stored row, a
    /// read recorded for validation) passed to `decode` with its key, in place.
    fn read_row_with<R>(
        &mut self,
        slot: usize,
        pk: Vec<u8>,
        decode: impl FnOnce(&[u8], &[u8]) -> Result<R>,
    ) -> Result<Option<R>> {
        let tree = TreeRef {
            table: slot,
            tree: 0,
        };
        if !self.writes.is_empty() {
            let key = (self.tree_id(tree), pk);
            match self.writes.get(&key).map(|write| &write.op) {
                Some(WriteOp::Put(value)) => return decode(&key.1, value.value()).map(Some),
                Some(WriteOp::Delete) => return Ok(None),
                Some(WriteOp::Patch(patch)) => {
                    let patch = patch.clone();
                    return self.read_patched_row(tree, key.1, &patch, decode);
                }
                None => return self.read_stored_row(tree, key.1, decode),
            }
        }
        self.read_stored_row(tree, pk, decode)
    }

    /// The stored row of `pk` (a whole-row read) with this transaction's `patch` applied.
    fn read_patched_row<R>(
        &mut self,
        tree: TreeRef,
        pk: Vec<u8>,
        patch: &Patch,
        decode: impl FnOnce(&[u8], &[u8]) -> Result<R>,
    ) -> Result<Option<R>> {
        let schema = self.tables[tree.table].state().schema.clone();
        let Some(mut row) = self.read_stored_row(tree, pk.clone(), |pk, value| {
            Ok(schema.decode_row(pk, value)?)
        })?
        else {
            // The patch was buffered after reading that the row exists: it was deleted since.
            return Err(self.unless_stale(EngineError::RowNotFound(
                self.tables[tree.table].state().name().to_string(),
            )));
        };
        patch.apply(&schema, &mut row)?;
        decode(&pk, &schema.encode_value(&row)?).map(Some)
    }

    fn read_stored_row<R>(
        &mut self,
        tree: TreeRef,
        pk: Vec<u8>,
        decode: impl FnOnce(&[u8], &[u8]) -> Result<R>,
    ) -> Result<Option<R>> {
        let (found, stamp) = self.tree(tree).btree.get_with(&pk, |stored| {
            stored.map(|bytes| {
                let (version, value) = split_version(bytes)?;
                Ok::<_, EngineError>((version, decode(&pk, value)?))
            })
        })?;
        let (version, row) = found.transpose()?.unzip();
        self.record_read(tree, pk, version, stamp);
        Ok(row)
    }

    /// Adds a whole-row point read of `key` (found at `version`, or absent) to the read set.
    fn record_read(&mut self, tree: TreeRef, key: Vec<u8>, version: Option<u64>, stamp: LeafStamp) {
        self.reads.push(PointRead {
            tree,
            key,
            version,
            stamp,
            columns: None,
        });
    }

    /// The values of `columns` of the stored row of `pk`, recorded as a read of those
    /// columns only (of the whole row if there is none: any insert changes that).
    fn read_stored_columns(
        &mut self,
        tree: TreeRef,
        schema: &Schema,
        pk: Vec<u8>,
        columns: &[usize],
    ) -> Result<Option<Vec<Value>>> {
        let values = self.read_stored_row(tree, pk, |pk, value| {
            Ok(schema.decode_columns(pk, value, columns)?)
        })?;
        let Some(values) = values else {
            return Ok(None);
        };
        let read = self
            .reads
            .last_mut()
            .ok_or_else(|| EngineError::Corrupt("a point read left no record".into()))?;
        read.columns = Some(Box::new(ColumnRead {
            columns: columns.to_vec(),
            values: values.clone(),
            mask: ColumnMask::read_of(columns),
        }));
        Ok(Some(values))
    }

    /// Buffers a write. An entry the B+tree could not hold is refused here, before commit:
    /// refused at apply time, it would stop the database.
    fn buffer_write(
        &mut self,
        slot: usize,
        tree: usize,
        key: Vec<u8>,
        value: Option<PutValue>,
    ) -> Result<()> {
        self.buffer_op(slot, tree, key, WriteOp::from_value(value))
    }

    /// [`Transaction::buffer_write`] of any op. A patched row's size is known only when it
    /// is applied, and checked then (`resolve_patches`).
    fn buffer_op(&mut self, slot: usize, tree: usize, key: Vec<u8>, op: WriteOp) -> Result<()> {
        if self.read_committed {
            return Err(EngineError::ReadCommittedWrite);
        }
        if let WriteOp::Put(value) = &op {
            check_entry_size(&key, value.value())?;
        } else if key.len() > tailstore_storage::MAX_ENTRY {
            return Err(StorageError::EntryTooLarge {
                size: key.len(),
                max: tailstore_storage::MAX_ENTRY,
            }
            .into());
        }
        let tree = TreeRef { table: slot, tree };
        let id = self.tree_id(tree);
        let key_len = key.len();
        let added = Self::logged_bytes(key_len, &op);
        let replaced = self.writes.insert((id, key), Write { tree, op });
        let removed = replaced.map_or(0, |old| Self::logged_bytes(key_len, &old.op));
        self.write_bytes = self.write_bytes + added - removed;
        // Refused at the write that crosses the limit, not only at commit: a command that
        // asks for a huge write (SETRANGE at a large offset) stops here instead of building
        // a write set the commit would refuse anyway. The write stays buffered, so the
        // commit refuses it too.
        self.check_size(0)
    }

    /// A unique index must not hold `row`'s index columns for another row.
    fn check_unique(
        &mut self,
        table: &Table,
        slot: usize,
        row: &[Value],
        old: Option<&[Value]>,
    ) -> Result<()> {
        let schema = table.schema();
        for (i, def) in schema.indexes().iter().enumerate() {
            let values: Vec<Value> = def.columns.iter().map(|&c| row[c].clone()).collect();
            let unchanged = old.is_some_and(|old| def.columns.iter().all(|&c| old[c] == row[c]));
            if !def.unique || unchanged || values.iter().any(Value::is_null) {
                continue;
            }
            let range = KeyRange::prefix(values);
            let (lower, upper) = byte_bounds(&range, |v| schema.index_prefix(i, v))?;
            let tree = TreeRef {
                table: slot,
                tree: 1 + i,
            };
            if !self
                .scan_tree(tree, lower, upper, ScanDirection::Ascending, 1, |_, _| {
                    Ok(())
                })?
                .is_empty()
            {
                let duplicate = EngineError::DuplicateKey(format!("{}.{}", table.name(), def.name));
                return Err(self.unless_stale(duplicate));
            }
        }
        Ok(())
    }

    /// Scans a tree, merging this transaction's own writes, and records the scan: `take` of
    /// each (key, value) of the answer, in scan order.
    ///
    /// Without own writes in the range, the tree's pairs are the answer as they come: within
    /// the limit, and in order, each key once (`BTree::scan`, "Scans, leaf by leaf"), so
    /// `take` sees them in place, with no copy and no map to sort them (decision 96). It then
    /// runs with a leaf latched, so it must not read the tree (see [`BTree::scan`]).
    ///
    /// [`BTree::scan`]: tailstore_storage::BTree::scan
    fn scan_tree<T>(
        &mut self,
        tree: TreeRef,
        lower: ByteBound,
        upper: ByteBound,
        direction: ScanDirection,
        limit: usize,
        mut take: impl FnMut(&[u8], &[u8]) -> Result<T>,
    ) -> Result<Vec<T>> {
        if is_empty_range(&lower, &upper) {
            return Ok(Vec::new()); // no key can ever be in it: nothing to validate either
        }
        let id = self.tree_id(tree);
        let own: Vec<(Vec<u8>, WriteOp)> = self
            .writes
            .range(write_bounds(id, &lower, &upper))
            .map(|((_, key), write)| (key.clone(), write.op.clone()))
            .collect();
        // Own deletes may hide up to `own.len()` of the tree's pairs: read that many more.
        let tree_limit = limit.saturating_add(own.len());
        let primary = tree.tree == 0;
        let mut seen = SeenKeys::default();
        let mut taken = Vec::new();
        // With own writes: the tree's pairs, in scan order, for the merge.
        let mut found = Vec::new();
        let mut failure = None;
        self.tree(tree).btree.scan(
            as_ref(&lower),
            as_ref(&upper),
            direction,
            tree_limit,
            |key, value| {
                let Ok((version, value)) = scanned_version(primary, value) else {
                    failure = Some(EngineError::Corrupt("a row without its version".into()));
                    return false;
                };
                seen.push(key, version);
                if !own.is_empty() {
                    found.push((key.to_vec(), value.to_vec()));
                    return true;
                }
                match take(key, value) {
                    Ok(item) => taken.push(item),
                    Err(err) => failure = Some(err),
                }
                failure.is_none()
            },
        )?;
        if let Some(err) = failure {
            return Err(err);
        }
        debug_assert!(
            seen.keys()
                .zip(seen.keys().skip(1))
                .all(|pair| match direction {
                    ScanDirection::Ascending => pair.0 < pair.1,
                    ScanDirection::Descending => pair.0 > pair.1,
                }),
            "a tree scan returned keys out of order or twice"
        );
        if !own.is_empty() {
            // When the tree's answer was cut at the limit, own writes beyond its last key are
            // out of sight: the tree may hold more pairs before them.
            let frontier = (seen.len() == tree_limit).then(|| seen.last().map(|(k, _)| k.to_vec()));
            let schema = &self.tables[tree.table].state().schema;
            let merged = merge_own_writes(found, own, frontier, direction, schema, limit)?;
            taken = merged
                .iter()
                .map(|(key, value)| take(key, value))
                .collect::<Result<_>>()?;
        }
        self.scans.push(RangeRead {
            tree,
            lower,
            upper,
            direction,
            limit: tree_limit,
            proof: ScanProof::Pairs(seen),
        });
        Ok(taken)
    }

    /// Walks a tree's range in `direction`: passes over the first `skip` keys, then gives
    /// `take` each key of the next `limit`. Returns how many keys it passed over and what
    /// `take` made of the keys it gave.
    ///
    /// Without own writes in the range the walk is validated by its leaves' stamps
    /// ([`ScanProof::Leaves`]), so the keys passed over cost a visit of their leaves, not a
    /// copy and a record each: a rank in a set of a million. It then runs with a leaf
    /// latched, so `take` must not read the tree. When it passes over nothing, or with own
    /// writes in the range (merged with the tree's keys as a scan merges them), it is a
    /// scan validated pair by pair: a change elsewhere in its first leaf does not abort it.
    #[allow(clippy::too_many_arguments)]
    fn walk_tree<T>(
        &mut self,
        tree: TreeRef,
        lower: ByteBound,
        upper: ByteBound,
        direction: ScanDirection,
        skip: usize,
        limit: usize,
        mut take: impl FnMut(&[u8]) -> Result<T>,
    ) -> Result<(usize, Vec<T>)> {
        if is_empty_range(&lower, &upper) || limit == 0 {
            return Ok((0, Vec::new())); // no key can ever be in it: nothing to validate
        }
        let own_writes = self.writes_in(tree, &lower, &upper);
        if skip == 0 || own_writes {
            let mut at = 0usize;
            let kept = self.scan_tree(
                tree,
                lower,
                upper,
                direction,
                skip.saturating_add(limit),
                |key, _| {
                    at += 1;
                    (at > skip).then(|| take(key)).transpose()
                },
            )?;
            return Ok((at.min(skip), kept.into_iter().flatten().collect()));
        }
        let mut stamps = Vec::new();
        let mut taken = Vec::new();
        let mut last = Vec::new();
        let mut failure = None;
        let walked = self.tree(tree).btree.walk_stamped(
            as_ref(&lower),
            as_ref(&upper),
            direction,
            skip,
            limit,
            &mut stamps,
            |key, _| match take(key) {
                Ok(item) => {
                    taken.push(item);
                    if taken.len() == limit {
                        last = key.to_vec(); // the visit that ends the walk: its cut
                    }
                    true
                }
                Err(err) => {
                    failure = Some(err);
                    false
                }
            },
        )?;
        if let Some(err) = failure {
            return Err(err);
        }
        // Cut at the last key given when the limit ended the walk: keys beyond it were not
        // read, and a change among them does not change the answer.
        let (mut lower, mut upper) = (lower, upper);
        if walked.visited == limit {
            match direction {
                ScanDirection::Ascending => upper = Bound::Included(last),
                ScanDirection::Descending => lower = Bound::Included(last),
            }
        }
        self.scans.push(RangeRead {
            tree,
            lower,
            upper,
            direction,
            limit: usize::MAX,
            proof: ScanProof::Leaves(stamps),
        });
        Ok((walked.passed, taken))
    }

    /// Step 1: lock the write set, in order, waiting only briefly for each key.
    fn lock_writes(&mut self) -> Result<()> {
        for (locked, ((_, key), write)) in self.writes.iter().enumerate() {
            let locks = &self.tree(write.tree).locks;
            let changes = write.op.changes();
            let mut tries = 0;
            while !locks.try_lock(key, self.id, changes) {
                tries += 1;
                if tries > LOCK_YIELDS {
                    self.unlock_first(locked);
                    return Err(self.db.count_abort(AbortCause::WriteConflict));
                }
                // The holder is between its step 1 and step 4, which take microseconds,
                // unless it was preempted: then yielding lets it run.
                std::thread::yield_now();
            }
        }
        Ok(())
    }

    fn unlock_writes(&self) {
        self.unlock_first(self.writes.len());
    }

    fn unlock_first(&self, n: usize) {
        for ((_, key), write) in self.writes.iter().take(n) {
            self.tree(write.tree).locks.unlock(key, self.id);
        }
    }

    /// Step 2: every read still holds.
    fn validate(&self) -> Result<()> {
        for read in &self.reads {
            let tree = self.tree(read.tree);
            if tree.locks.locked_by_other(&read.key, self.id, read.mask()) {
                return Err(self.db.count_abort(AbortCause::ReadChanged));
            }
            interleave::reached(Point::BetweenTheChecksOfAPointRead);
            // What it read is not being changed (no lock) and no logged change touched its
            // leaf since the read: the version is the same. Otherwise search again.
            if tree.btree.leaf_unchanged(read.stamp)? {
                continue;
            }
            if !self.still_reads_the_same(read)? {
                return Err(self.db.count_abort(AbortCause::ReadChanged));
            }
        }
        for scan in &self.scans {
            self.validate_scan(scan)?;
        }
        Ok(())
    }

    /// Whether the stored row still gives `read` what it read: the same version, or for a
    /// column read, the same values in those columns.
    fn still_reads_the_same(&self, read: &PointRead) -> Result<bool> {
        if read.version.is_none() && self.db.config.planted(Plant::AbsentReadsUnchecked) {
            // Planted so that `txn/histories.rs` is seen to catch it (decision 85).
            return Ok(true);
        }
        let Some(bytes) = self.tree(read.tree).btree.get(&read.key)? else {
            return Ok(read.version.is_none());
        };
        let (version, value) = split_version(&bytes)?;
        if Some(version) == read.version {
            return Ok(true);
        }
        let Some(columns) = &read.columns else {
            return Ok(false);
        };
        let now = self.tables[read.tree.table].state().schema.decode_columns(
            &read.key,
            value,
            &columns.columns,
        )?;
        Ok(now == columns.values)
    }

    /// A scan holds if no other transaction holds a lock in the part of its range it covered
    /// and, run again, it returns the same pairs — checked in that order, as a point read's
    /// lock is checked before its version. A writer of a key in the range holds the key's
    /// lock from before its own validation until after its row is in the tree; found
    /// unlocked first, such a writer either applied already (the scan run afterwards sees its
    /// row) or locks later, serializing after us. Run first, the scan could miss a row
    /// applied just after it, and the lock check find that row's writer already gone: write
    /// skew (`txn/interleavings.rs` stops a writer exactly there).
    fn validate_scan(&self, scan: &RangeRead) -> Result<()> {
        if self.db.config.planted(Plant::RescanBeforeLockCheck) {
            // The old, wrong order, planted so that `txn/interleavings.rs` is seen to catch it.
            self.check_scan_returns_the_same(scan)?;
            interleave::reached(Point::BetweenTheChecksOfAScan);
            return self.check_scan_range_unlocked(scan);
        }
        self.check_scan_range_unlocked(scan)?;
        interleave::reached(Point::BetweenTheChecksOfAScan);
        self.check_scan_returns_the_same(scan)
    }

    /// No other transaction holds a key in the part of the range `scan` covered: up to its
    /// last key if the limit cut it.
    fn check_scan_range_unlocked(&self, scan: &RangeRead) -> Result<()> {
        let (mut lower, mut upper) = (as_ref(&scan.lower), as_ref(&scan.upper));
        if let ScanProof::Pairs(seen) = &scan.proof {
            if let Some((last, _)) = seen.last().filter(|_| seen.len() == scan.limit) {
                match scan.direction {
                    ScanDirection::Ascending => upper = Bound::Included(last),
                    ScanDirection::Descending => lower = Bound::Included(last),
                }
            }
        }
        if self
            .tree(scan.tree)
            .locks
            .range_locked_by_other(lower, upper, self.id)
        {
            return Err(self.db.count_abort(AbortCause::Phantom));
        }
        Ok(())
    }

    /// `scan`, run again, returns the same (key, version) pairs; or for a walk, each of its
    /// leaves still has its stamp.
    fn check_scan_returns_the_same(&self, scan: &RangeRead) -> Result<()> {
        let seen = match &scan.proof {
            ScanProof::Pairs(seen) => seen,
            ScanProof::Leaves(stamps) => {
                let btree = &self.tree(scan.tree).btree;
                for &stamp in stamps {
                    if !btree.leaf_unchanged(stamp)? {
                        return Err(self.db.count_abort(AbortCause::Phantom));
                    }
                }
                return Ok(());
            }
        };
        let primary = scan.tree.tree == 0;
        // Compared pair by pair as the second scan goes, which stops at the first difference.
        let mut visited = 0;
        let mut same = true;
        self.tree(scan.tree).btree.scan(
            as_ref(&scan.lower),
            as_ref(&scan.upper),
            scan.direction,
            scan.limit,
            |key, value| {
                let version = scanned_version(primary, value).map_or(u64::MAX, |(v, _)| v);
                same = seen
                    .get(visited)
                    .is_some_and(|(seen, v)| seen == key && v == version);
                visited += 1;
                same
            },
        )?;
        if !same || visited != seen.len() {
            return Err(self.db.count_abort(AbortCause::Phantom));
        }
        Ok(())
    }

    /// Step 3: apply the writes under the trees' write latches, log them as one record and
    /// stamp the touched pages. Returns the record's end LSN.
    fn apply_and_log(&mut self) -> Result<u64> {
        let db = self.db;
        // Nothing has changed yet: an error here fails the transaction, not the database.
        let mut patched = self.resolve_patches()?;
        if !patched.is_empty() {
            // Checked before locking too, with only the patched rows' keys counted.
            self.check_size(patched.iter().flatten().map(|v| v.value().len()).sum())?;
        }
        let version = db.next_version.fetch_add(1, Ordering::Relaxed);
        let rows = self
            .writes
            .values_mut()
            .filter(|write| write.tree.tree == 0);
        for write in rows {
            if let WriteOp::Put(value) = &mut write.op {
                value.stamp(version);
            }
        }
        for value in patched.iter_mut().flatten() {
            value.stamp(version); // patches change rows only
        }
        let writes: Vec<(&(u32, Vec<u8>), &Write)> = self.writes.iter().collect();
        let mut redo = wal::commit_redo();
        redo.reserve(
            writes
                .iter()
                .map(|((_, key), write)| REDO_OP_BYTES + key.len() + write.op.logged_value_len())
                .sum(),
        );
        let mut writers: Vec<TreeWriter<'_>> = Vec::new();
        for range in tree_runs(&writes).into_iter().rev() {
            let ((_, first_key), first) = writes[range.start];
            let writer = self.tree(first.tree).btree.writer_for(first_key);
            let writer = writer.map_err(|e| db.fail_stop(e.into()))?;
            for i in range {
                let ((_, key), write) = writes[i];
                let value = match &write.op {
                    WriteOp::Put(value) => Some(value),
                    WriteOp::Patch(_) => patched[i].as_ref(),
                    WriteOp::Delete => None,
                };
                let applied = match value {
                    Some(value) if write.tree.tree == 0 => {
                        writer.put(key, value.stored(), &mut redo)
                    }
                    Some(value) => writer.put(key, value.value(), &mut redo),
                    None => writer.delete(key, &mut redo).map(|_| ()),
                };
                applied.map_err(|e| db.fail_stop(e.into()))?;
            }
            writers.push(writer);
        }
        interleave::reached(Point::AppliedNotLogged);
        // From reading `redo_lsn` to the end of the append (see `Shared::log_gate`).
        let append = db.append_gate(redo.bytes().len());
        let redo_lsn = db.redo_lsn.load(Ordering::SeqCst);
        self.full_page_images(&mut redo, redo_lsn)
            .map_err(|e| db.fail_stop(e))?;
        let placed = db.place_and_stamp(redo.bytes(), &redo, &append)?;
        interleave::reached(Point::LoggedStillLatched);
        // Only now may another tree reuse the pages this transaction emptied: its record,
        // which logs them as free, has its place in the log before any record of theirs.
        for &id in redo.freed() {
            db.pool.free(id);
        }
        // The record is written with the latches released (`wal.rs`, "Reserve under the
        // latches, write after them"): its place fixes its order among the pages' changes,
        // and no one acknowledges a change that reads or follows it before it is durable.
        drop(writers);
        interleave::reached(Point::PlacedNotWritten);
        let lsn = db.write_placed(placed, redo.bytes())?;
        // Held to here: a checkpoint's position is never inside a record being written.
        drop(append);
        wal::recycle_redo(redo);
        Ok(lsn)
    }

    /// The new value of every patched row, by position in the write set (`None` for other
    /// writes): the stored row with the patch applied, checked against the B+tree's entry
    /// limit. The row is locked by this transaction (step 1), so no one else changes it, and
    /// its last writer had applied its change before unlocking it: the plain read is current.
    fn resolve_patches(&self) -> Result<Vec<Option<PutValue>>> {
        let patches = |write: &Write| matches!(write.op, WriteOp::Patch(_));
        if !self.writes.values().any(patches) {
            return Ok(Vec::new()); // never indexed: only patches look their value up
        }
        let mut values = Vec::with_capacity(self.writes.len());
        for ((_, key), write) in &self.writes {
            let WriteOp::Patch(patch) = &write.op else {
                values.push(None);
                continue;
            };
            let state = self.tables[write.tree.table].state();
            // Validation (step 2) found the row there, and it has been locked since.
            let stored = self.tree(write.tree).btree.get(key)?.ok_or_else(|| {
                EngineError::Corrupt(format!(
                    "a locked row of table `{}` vanished before its change was applied",
                    state.name()
                ))
            })?;
            let mut row = state.schema.decode_row(key, split_version(&stored)?.1)?;
            patch.apply(&state.schema, &mut row)?;
            let value = PutValue::row(&state.schema, &row)?;
            check_entry_size(key, value.value())?;
            values.push(Some(value));
        }
        Ok(values)
    }

    /// Ends `redo` with an image of every page it changes for the first time since the
    /// latest checkpoint began (page LSN `<= redo_lsn`), unless its last op already is one.
    /// A crash may tear a page written after the checkpoint; redo rebuilds such a page from
    /// this image (skipping the record's earlier ops on it) instead of reading it. Where
    /// checkpoints keep recent pages dirty, redo starts at an earlier checkpoint's start,
    /// and the page's first change since *that* one was imaged too (`Shared::checkpoint_if`).
    /// Not needed where the pool restores torn pages from a double-write area at open.
    fn full_page_images(&self, redo: &mut Redo, redo_lsn: u64) -> Result<()> {
        if self.db.pool.restores_torn_pages() {
            return Ok(());
        }
        let needing = redo.needing_image(redo_lsn);
        redo.reserve(needing.len() * tailstore_storage::PAGE_SIZE);
        for id in needing {
            redo.image(&*self.db.pool.read(id)?);
        }
        Ok(())
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.db.counters.rollbacks.add(1);
        }
    }
}

/// A bound on the pages one write changes (its leaf, a split's new page and parent, or a
/// merge's sibling and parent, up to the root): below `writes * PAGES_PER_WRITE` pages, a
/// commit is not estimated.
const PAGES_PER_WRITE: usize = 8;

/// What a commit puts into and removes from one leaf, for [`Transaction::estimate_pages`]:
/// the entries it writes, and the entries now there under the keys it writes or removes.
struct LeafLoad {
    room: LeafRoom,
    added: usize,
    removed: usize,
}

impl LeafLoad {
    /// New pages the leaf's splits need: none while what it gains fits its free room, then
    /// one per half page beyond.
    fn splits(&self) -> usize {
        let gained = self.added.saturating_sub(self.removed);
        if gained <= self.room.free {
            return 0;
        }
        1 + (gained - self.room.free) / (tailstore_storage::PAGE_SIZE / 2)
    }

    fn may_merge(&self) -> bool {
        self.removed.saturating_sub(self.added) > self.room.spare
    }
}

/// Refuses a row or index entry the B+tree could not hold. Rows carry their 8-byte version
/// in front of the value (see `apply_and_log`).
fn check_entry_size(key: &[u8], value: &[u8]) -> Result<()> {
    let size = key.len() + value.len() + VERSION_BYTES;
    if size > tailstore_storage::MAX_ENTRY {
        return Err(StorageError::EntryTooLarge {
            size,
            max: tailstore_storage::MAX_ENTRY,
        }
        .into());
    }
    Ok(())
}

/// The pairs a scan `found` in the tree (in scan order) with the transaction's `own` writes
/// in its range applied, in scan order, at most `limit` of them. `frontier` is set when the
/// tree's answer was cut at its limit: `Some(last key)`, beyond which own puts stay out of
/// sight.
fn merge_own_writes(
    found: Vec<(Vec<u8>, Vec<u8>)>,
    own: Vec<(Vec<u8>, WriteOp)>,
    frontier: Option<Option<Vec<u8>>>,
    direction: ScanDirection,
    schema: &Schema,
    limit: usize,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = found.into_iter().collect();
    for (key, op) in own {
        let beyond = match (&frontier, direction) {
            (Some(Some(last)), ScanDirection::Ascending) => key > *last,
            (Some(Some(last)), ScanDirection::Descending) => key < *last,
            _ => false,
        };
        match op {
            WriteOp::Put(value) if !beyond => {
                merged.insert(key, value.into_value());
            }
            WriteOp::Put(_) => {}
            WriteOp::Delete => {
                merged.remove(&key);
            }
            // A patched row is in sight if the tree returned it (it exists: the patch
            // read so); it shows with the patch applied.
            WriteOp::Patch(patch) => {
                if let Some(value) = merged.get_mut(&key) {
                    let mut row = schema.decode_row(&key, value)?;
                    patch.apply(schema, &mut row)?;
                    *value = schema.encode_value(&row)?;
                }
            }
        }
    }
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = match direction {
        ScanDirection::Ascending => merged.into_iter().collect(),
        ScanDirection::Descending => merged.into_iter().rev().collect(),
    };
    out.truncate(limit);
    Ok(out)
}

/// The positions in `writes` (sorted by tree id) of each tree's writes, in tree order.
fn tree_runs(writes: &[(&(u32, Vec<u8>), &Write)]) -> Vec<std::ops::Range<usize>> {
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, ((id, _), _)) in writes.iter().enumerate() {
        match runs.last_mut() {
            Some(run) if writes[run.start].0 .0 == *id => run.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    runs
}

fn split_version(stored: &[u8]) -> Result<(u64, &[u8])> {
    if stored.len() < VERSION_BYTES {
        return Err(EngineError::Corrupt(
            "a row shorter than its version".into(),
        ));
    }
    let (version, value) = stored.split_at(VERSION_BYTES);
    let mut bytes = [0; VERSION_BYTES];
    bytes.copy_from_slice(version);
    Ok((u64::from_le_bytes(bytes), value))
}

/// A scanned entry's row version and value: a table's primary tree stores the version before
/// the value; index entries have none (0).
fn scanned_version(primary: bool, stored: &[u8]) -> Result<(u64, &[u8])> {
    if primary {
        split_version(stored)
    } else {
        Ok((0, stored))
    }
}

fn as_ref(bound: &ByteBound) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Byte bounds of a [`KeyRange`] (prefix semantics), given the encoding of a prefix.
fn byte_bounds(
    range: &KeyRange,
    encode: impl Fn(&[Value]) -> std::result::Result<Vec<u8>, tailstore_storage::RowError>,
) -> Result<(ByteBound, ByteBound)> {
    let lower = match &range.lower {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(v) => Bound::Included(encode(v)?),
        Bound::Excluded(v) => match prefix_successor(&encode(v)?) {
            Some(next) => Bound::Included(next),
            // Nothing sorts after every key with this prefix: the range is empty.
            None => return Ok((Bound::Excluded(Vec::new()), Bound::Excluded(Vec::new()))),
        },
    };
    let upper = match &range.upper {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Excluded(v) => Bound::Excluded(encode(v)?),
        Bound::Included(v) => match prefix_successor(&encode(v)?) {
            Some(next) => Bound::Excluded(next),
            None => Bound::Unbounded,
        },
    };
    Ok((lower, upper))
}

/// Whether no key lies within the bounds (`BTreeMap::range` would panic on them).
fn is_empty_range(lower: &ByteBound, upper: &ByteBound) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) => {
            l >= u
        }
        _ => false,
    }
}

/// The write-set keys of tree `id` within byte bounds.
fn write_bounds(id: u32, lower: &ByteBound, upper: &ByteBound) -> (WriteBound, WriteBound) {
    let lower = match lower {
        Bound::Unbounded => Bound::Included((id, Vec::new())),
        Bound::Included(k) => Bound::Included((id, k.clone())),
        Bound::Excluded(k) => Bound::Excluded((id, k.clone())),
    };
    let upper = match upper {
        Bound::Unbounded => Bound::Excluded((id + 1, Vec::new())),
        Bound::Included(k) => Bound::Included((id, k.clone())),
        Bound::Excluded(k) => Bound::Excluded((id, k.clone())),
    };
    (lower, upper)
}

#[cfg(test)]
mod commit_parts;
#[cfg(test)]
mod histories;
#[cfg(test)]
mod interleavings;
#[cfg(test)]
mod walks;
