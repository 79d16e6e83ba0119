//! Elements of deleted keys: freed at once when few, else queued in `kv_garbage` and freed
//! in batches by a background task (Redis's lazy free); and elements copied to a new owner
//! (COPY).

use tailstore_engine::{KeyRange, Table, Transaction};
use tailstore_storage::{ScanDirection, Value};

use super::meta::{int, KeyMeta, Kind};
use super::Keyspace;
use crate::command::Fault;

/// Element rows a delete removes in its own transaction; a larger key's go to the queue.
pub const INLINE_ROWS: usize = 256;
/// Bytes of element rows one transaction removes inline, over all the keys it deletes (DEL of
/// many keys, a FLUSHDB batch), unless a quarter of the commit's size limit is less: past
/// it, the next keys' elements go to the queue. Removals are charged to that limit (see
/// [`charge_removal`]); this keeps deletes of keys well inside it, so that a delete is never
/// refused for its size.
pub const INLINE_BYTES: usize = 2 << 20;
/// Element rows the background task removes per transaction, and no more bytes of them
/// than a quarter of the commit's size limit. A count alone made transactions of 2 MB (512
/// parts of a long string): past the limit of a server with a small pool or log ring
/// (`--buffer-pool 8MiB` allows 1 MiB), so that every round of the lazy free failed and
/// deleted keys were never freed.
pub const BATCH_ROWS: usize = 512;
/// Element rows read per scan by a copy.
const COPY_SCAN_ROWS: usize = 256;
/// What a row costs a commit beside its columns' bytes (its header, the engine's version).
const ROW_HEADER: usize = 48;

/// How much of a key's elements one transaction may delete.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    rows: usize,
    /// Of the rows' values ([`row_bytes`]).
    bytes: usize,
    /// The first row is deleted whatever its size: the background task must get on, and a
    /// row once written fits a commit.
    at_least_one: bool,
}

/// What [`Keyspace::delete_elements`] did.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deleted {
    pub rows: usize,
    /// No element of the key is left.
    pub all: bool,
}

/// Where a copy of a key's element rows stands: the table (in `element_tables` order) and
/// the key of the last row read from it.
#[derive(Clone, Debug, Default)]
pub struct CopyCursor {
    table: usize,
    after: Option<Vec<Value>>,
}

/// Element rows read for a copy, each with its table (in `element_tables` order).
pub(crate) type ElementRun = Vec<(usize, Vec<Value>)>;

/// When a deleted key's elements are freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freed {
    /// In the deleting transaction.
    Now,
    /// By the background task: queued in `kv_garbage`.
    Later,
}

impl Keyspace {
    /// Frees the elements of the key `meta` describes (its row is the caller's business).
    pub(crate) fn free_elements(
        &self,
        txn: &mut Transaction<'_>,
        meta: &KeyMeta,
    ) -> Result<Freed, Fault> {
        // Elements are counted in the key's row, a stream's consumer groups are not, and a
        // long value has many part rows: deleted here up to a bound on rows and on what the
        // transaction already removed, the rest queued.
        let known_large = meta.kind != Kind::Stream && self.element_rows(meta) > INLINE_ROWS;
        let budget = Budget {
            rows: INLINE_ROWS,
            bytes: self.inline_bytes().saturating_sub(txn.charged()),
            at_least_one: false,
        };
        if !known_large
            && budget.bytes > 0
            && self.delete_elements(txn, meta.id, meta.kind, budget)?.all
        {
            return Ok(Freed::Now);
        }
        self.queue_garbage(txn, meta.id, meta.kind)?;
        Ok(Freed::Later)
    }

    /// Bytes of elements a delete frees inline, over its transaction ([`INLINE_BYTES`]).
    fn inline_bytes(&self) -> usize {
        INLINE_BYTES.min(self.database().max_commit_bytes() / 4)
    }

    /// What the background task removes per transaction ([`BATCH_ROWS`]).
    pub(crate) fn batch_budget(&self) -> Budget {
        Budget {
            rows: BATCH_ROWS,
            bytes: self.database().max_commit_bytes() / 4,
            at_least_one: true,
        }
    }

    /// Deletes element rows of `owner` (of `kind`), in order, within `budget`.
    pub(crate) fn delete_elements(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        kind: Kind,
        budget: Budget,
    ) -> Result<Deleted, Fault> {
        let range = KeyRange::prefix(vec![Value::Int(owner)]);
        let (mut deleted, mut bytes) = (0, 0);
        for table in self.element_tables(kind) {
            // One row more than the budget's, to tell whether any is left.
            let rows = txn.scan(
                table,
                &range,
                ScanDirection::Ascending,
                budget.rows - deleted + 1,
            )?;
            let (mut taken, bytes_before) = (0, bytes);
            for row in &rows {
                let size = row_bytes(row);
                let first = deleted + taken == 0 && budget.at_least_one;
                if deleted + taken == budget.rows || (bytes + size > budget.bytes && !first) {
                    break;
                }
                bytes += size;
                taken += 1;
            }
            let key_columns = table.schema().primary_key().len();
            charge_removal(txn, bytes - bytes_before)?;
            for row in &rows[..taken] {
                txn.remove(table, &row[..key_columns])?;
            }
            deleted += taken;
            if taken < rows.len() {
                return Ok(Deleted {
                    rows: deleted,
                    all: false,
                });
            }
        }
        Ok(Deleted {
            rows: deleted,
            all: true,
        })
    }

    /// The tables a key of `kind` keeps its elements in: every one's key starts with the
    /// owner, its first column. A stream's are in the order [`stream_tables`] numbers.
    fn element_tables(&self, kind: Kind) -> Vec<&Table> {
        match kind {
            Kind::ZSet => vec![&self.zset],
            Kind::Stream => {
                use stream_tables::*;
                let mut tables = vec![&self.parts; 6];
                tables[ENTRIES] = &self.parts;
                tables[GROUPS] = &self.groups;
                tables[CONSUMERS] = &self.consumers;
                tables[PENDING] = &self.pending;
                tables[COUNTS] = &self.streams;
                tables[GROUP_READS] = &self.group_reads;
                tables
            }
            _ => vec![&self.parts],
        }
    }

    /// The element rows of `owner` (of `kind`: a stream's consumer groups too) from
    /// `cursor` on, about `max_bytes` of them and at least one; and the cursor after them,
    /// `None` once every row is read (COPY).
    pub(crate) fn element_run(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        kind: Kind,
        cursor: &CopyCursor,
        max_bytes: usize,
    ) -> Result<(ElementRun, Option<CopyCursor>), Fault> {
        let tables = self.element_tables(kind);
        let (mut run, mut bytes) = (Vec::new(), 0);
        let mut at = cursor.clone();
        while let Some(table) = tables.get(at.table) {
            if bytes >= max_bytes {
                return Ok((run, Some(at)));
            }
            let lower = match at.after.take() {
                Some(key) => std::ops::Bound::Excluded(key),
                None => std::ops::Bound::Included(vec![Value::Int(owner)]),
            };
            let range = KeyRange::new(lower, std::ops::Bound::Included(vec![Value::Int(owner)]));
            let rows = txn.scan(table, &range, ScanDirection::Ascending, COPY_SCAN_ROWS)?;
            let key_columns = table.schema().primary_key().len();
            let table_at = at.table;
            if rows.len() < COPY_SCAN_ROWS {
                at = CopyCursor {
                    table: at.table + 1,
                    after: None,
                };
            } else if let Some(last) = rows.last() {
                at.after = Some(last[..key_columns].to_vec());
            }
            bytes += rows
                .iter()
                .map(|row| row_bytes(row) + ROW_HEADER)
                .sum::<usize>();
            run.extend(rows.into_iter().map(|row| (table_at, row)));
        }
        Ok((run, None))
    }

    /// Writes `run` (read by [`Keyspace::element_run`] from a key of `kind`) as elements of
    /// the owner `to`.
    pub(crate) fn put_element_run(
        &self,
        txn: &mut Transaction<'_>,
        to: i64,
        kind: Kind,
        run: &ElementRun,
    ) -> Result<(), Fault> {
        let tables = self.element_tables(kind);
        for (table, row) in run {
            let mut row = row.clone();
            row[0] = Value::Int(to);
            txn.put(tables[*table], &row)?;
        }
        Ok(())
    }

    /// One queued owner and its kind, if any is queued, that no build (a large RESTORE,
    /// COPY or string written in pieces) is still writing.
    pub(crate) fn next_garbage(
        &self,
        txn: &mut Transaction<'_>,
    ) -> Result<Option<(i64, Kind)>, Fault> {
        self.next_garbage_after(txn, || {})
    }

    /// [`Keyspace::next_garbage`], running `before_scan` just before it reads the queue:
    /// the moment a build may begin unseen (the test of the order below).
    fn next_garbage_after(
        &self,
        txn: &mut Transaction<'_>,
        before_scan: impl FnOnce(),
    ) -> Result<Option<(i64, Kind)>, Fault> {
        // Enough rows to pass the owners being built now, and a few more begun meanwhile.
        let limit = self.building.lock().len() + 8;
        before_scan();
        let rows = self.queue_rows(txn, limit)?;
        // Looked at after the scan, not before: a build registers its owner before the
        // transaction that queues it commits, so an owner whose row this scan read is in
        // the set by now if it is being built. Read before the scan, the set could miss a
        // build begun in between, and its first pieces were freed under it (a SET of 20 MB
        // read back as nothing, under load).
        let building = self.building.lock();
        for row in &rows {
            let owner = int(&row[0])?;
            if building.contains(&owner) {
                continue;
            }
            let code = int(&row[1])?;
            let kind = Kind::from_code(code).ok_or_else(|| {
                Fault::corrupt(format!("kv_garbage row with unknown kind {code}"))
            })?;
            return Ok(Some((owner, kind)));
        }
        Ok(None)
    }

    /// Marks `owner` as being built: the lazy free leaves its queued elements alone until
    /// the guard is dropped. Taken before the transaction that queues it commits.
    pub(crate) fn begin_building(&self, owner: i64) -> BuildGuard<'_> {
        self.building.lock().insert(owner);
        BuildGuard { ks: self, owner }
    }

    /// Queues `owner`'s elements (of `kind`) for the lazy free: a RESTORE writing them
    /// over several transactions, so that a crash or a failure leaves nothing behind.
    pub(crate) fn queue_garbage(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        kind: Kind,
    ) -> Result<(), Fault> {
        txn.put(&self.garbage, &[Value::Int(owner), Value::Int(kind as i64)])?;
        Ok(())
    }

    /// How many owners wait in the queue, counted up to `limit`.
    pub(crate) fn queued_owners(
        &self,
        txn: &mut Transaction<'_>,
        limit: usize,
    ) -> Result<usize, Fault> {
        Ok(self.queue_rows(txn, limit)?.len())
    }

    /// The first `limit` rows of the queue, in owner order.
    fn queue_rows(
        &self,
        txn: &mut Transaction<'_>,
        limit: usize,
    ) -> Result<Vec<Vec<Value>>, Fault> {
        let all = KeyRange::all();
        Ok(txn.scan(&self.garbage, &all, ScanDirection::Ascending, limit)?)
    }

    /// Takes `owner` off the queue (all its elements are gone).
    pub(crate) fn forget_garbage(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
    ) -> Result<(), Fault> {
        txn.remove(&self.garbage, &[Value::Int(owner)])?;
        Ok(())
    }

    /// About how many element rows a key has: one per element of a collection (a long hash
    /// value or list element has more parts, which only makes the queue take it more often),
    /// a string's parts.
    fn element_rows(&self, meta: &KeyMeta) -> usize {
        match meta.kind {
            Kind::String => (meta.len.max(0) as usize).div_ceil(self.part_capacity(b"")),
            _ => meta.len.max(0) as usize,
        }
    }
}

/// An owner whose elements are being written over several transactions (a large RESTORE):
/// while it lives, the lazy free skips the owner's queue entry. It must outlive the apply of
/// the transaction that takes the owner off the queue and gives it a key (the runner keeps
/// it until then, as it keeps `Ctx::unwatched`): freed earlier, the key would point at
/// elements the lazy free was removing.
pub struct BuildGuard<'a> {
    ks: &'a Keyspace,
    owner: i64,
}

impl Drop for BuildGuard<'_> {
    fn drop(&mut self) {
        self.ks.building.lock().remove(&self.owner);
    }
}

/// Charges the removal of `bytes` of rows to the transaction's size limit. A removal logs
/// its key only, but the B+tree merges the leaves it empties and logs images of what they
/// leave: removing 40 MiB of list elements made a 74 MB record (2026-12-03), more than the
/// log takes, which stopped the database. Charged at three quarters of the bytes, the
/// removals a commit may hold (with its writes, `Database::max_commit_bytes`) make records
/// well inside the log's limit; one command that removes more (LTRIM of a list of large
/// elements) is refused and changes nothing, where it would have stopped the database.
pub(crate) fn charge_removal(txn: &mut Transaction<'_>, bytes: usize) -> Result<(), Fault> {
    txn.charge(bytes / 4 * 3)?;
    Ok(())
}

/// About what a row takes in a leaf (its values' bytes).
fn row_bytes(row: &[Value]) -> usize {
    row.iter()
        .map(|value| match value {
            Value::Bytes(bytes) => bytes.len(),
            Value::Text(text) => text.len(),
            _ => 8,
        })
        .sum()
}

/// The place of each of a stream's tables among its [`Keyspace::element_tables`], for code
/// that tells a copied stream's rows apart (`keyspace/groups.rs` `GroupRows`).
pub(crate) mod stream_tables {
    pub const ENTRIES: usize = 0;
    pub const GROUPS: usize = 1;
    pub const CONSUMERS: usize = 2;
    pub const PENDING: usize = 3;
    pub const COUNTS: usize = 4;
    pub const GROUP_READS: usize = 5;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tailstore_engine::{Database, DbConfig};
    use tailstore_log::CommitMode;

    use super::*;

    #[test]
    fn a_build_begun_while_the_lazy_free_looks_is_not_handed_to_it() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let config = DbConfig::new(dir.path(), CommitMode::Async, None);
        let (db, _) = Database::open(config).expect("open the database");
        let ks = Keyspace::open(Arc::new(db), 16).expect("open the keyspace");
        let owner = 42;
        let mut build = None;
        let mut txn = ks.database().begin();
        // A build registers its owner and commits the queue row that guards its pieces
        // between the lazy free's first look at the builds and its scan of the queue.
        let found = ks
            .next_garbage_after(&mut txn, || {
                build = Some(ks.begin_building(owner));
                let mut queueing = ks.database().begin();
                ks.queue_garbage(&mut queueing, owner, Kind::List)
                    .expect("queue the owner");
                queueing.commit().expect("commit the queue row");
            })
            .expect("look for garbage");
        txn.rollback();
        assert_eq!(found, None, "the lazy free took an owner still being built");
        // Once the build ends, the same row is handed out: the scan does see it.
        drop(build);
        let mut txn = ks.database().begin();
        let found = ks.next_garbage(&mut txn).expect("look for garbage");
        txn.rollback();
        assert_eq!(found, Some((owner, Kind::List)));
    }
}
