//! The keyspace: Redis's databases, keys and values stored in engine tables.
//!
//! # Layout (see docs/design/kv.md)
//!
//! ```text
//! kv_keys    (db, slot, key) -> kind, expire_at_ms, version, len, head, tail, id
//! kv_parts   (owner, field, part) -> data, total     values, cut into parts (stream entries too;
//!                                                    owner -1: function libraries, see [`libraries`];
//!                                                    owner -2: the map of databases, see [`databases`];
//!                                                    owner -3: flushed databases, see [`flushes`])
//! kv_zset    (owner, member) -> score; index by_score (owner, score)
//! kv_expiry  (at_ms, db, key)                        keys with a TTL, by deadline
//! kv_garbage (owner) -> kind                         elements of deleted keys, freed later
//! kv_counts  (db) -> keys, expires                   kv_keys rows, and those with a TTL
//! kv_groups, kv_consumers, kv_pending                streams' consumer groups (see [`groups`])
//! kv_streams (owner) -> removed, max_deleted         a stream's counts (see [`stream`])
//! kv_group_reads (owner, group) -> entries_read      a group's count of entries read
//! ```
//!
//! A key's elements belong to its *id* (the owner), not to its name: each incarnation of a
//! key gets a new id, so RENAME moves one row, and DEL of a large collection removes the
//! key's row at once and leaves its elements to a background task (Redis's lazy free)
//! without a later key of the same name ever seeing them.
//!
//! Every write command changes its key's `kv_keys` row (at least its `version`), so WATCH
//! needs to look at that row only, and two commands on one key conflict in the engine's OCC
//! (they both write that row) and never interleave. Two exceptions: while no connection
//! watches any key, a string overwritten by a value of the same length and deadline leaves
//! the row alone, and two such writes conflict on the part rows they both write instead
//! (see [`watches`]); and a stream's consumer-group commands leave it alone as Redis leaves
//! the key unmodified for WATCH, conflicting on the group's rows (see [`groups`]).

mod counts;
mod databases;
mod flushes;
mod garbage;
pub mod groups;
pub mod key_stats;
mod libraries;
mod meta;
pub mod notifications;
mod parts;
pub mod stream;
pub mod watches;
mod zset;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tailstore_engine::{Database, EngineError, Table};
use tailstore_storage::{Column, ColumnType, IndexDef, Schema, SchemaError, MAX_ENTRY};

pub use databases::MAX_DATABASES;
pub(crate) use garbage::ElementRun;
pub use garbage::{BuildGuard, CopyCursor, Freed, BATCH_ROWS};
pub use libraries::MAX_LIBRARY_NAME;
pub use meta::slot_of;
pub use meta::{KeyMeta, Kind};
pub use parts::{seq_field, seq_of_field, MAX_FIELD, MAX_KEY};
pub(crate) use zset::MemberOrder;
pub use zset::{score_key, score_of_key, ALL_SCORES};

/// Why the keyspace could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("keyspace table `{table}`: {source}")]
    Schema {
        table: &'static str,
        source: SchemaError,
    },
    #[error("keyspace table `{0}` exists with a different schema: not a tailstore kv database")]
    WrongSchema(&'static str),
    #[error("{0}")]
    DatabaseMap(String),
}

/// Redis's default `proto-max-bulk-len`, until the server sets its own.
const DEFAULT_MAX_BULK: usize = 512 << 20;

/// The keyspace's tables and clocks, shared by every connection.
pub struct Keyspace {
    db: Arc<Database>,
    pub(crate) keys: Table,
    pub(crate) parts: Table,
    /// The most bytes of key and value a `kv_parts` row takes in this store, as its schema
    /// records (see [`parts_table`]); values are cut into parts by it.
    part_limit: usize,
    pub(crate) zset: Table,
    pub(crate) expiry: Table,
    pub(crate) garbage: Table,
    pub(crate) counts: Table,
    pub(crate) groups: Table,
    pub(crate) consumers: Table,
    pub(crate) pending: Table,
    pub(crate) streams: Table,
    pub(crate) group_reads: Table,
    databases: u32,
    /// Source of key versions (WATCH): unique over the server's life and, since it starts at
    /// the wall clock in nanoseconds, larger than any version an earlier run handed out.
    next_version: AtomicU64,
    /// Live WATCHes, and the gate between them and writes that leave a key's row alone.
    pub(crate) watches: Arc<watches::WatchGate>,
    /// Owners whose elements a RESTORE is writing over several transactions: queued in
    /// `kv_garbage` (so that a crash leaves nothing behind) and skipped by the lazy free
    /// until the key is created or the RESTORE fails (see [`garbage::BuildGuard`]).
    building: parking_lot::Mutex<std::collections::HashSet<i64>>,
    /// Which stored database each numbered one is (SWAPDB, flushes; see [`databases`]).
    map: databases::DatabaseMap,
    /// Which key events are published (`notify-keyspace-events`; see [`notifications`]).
    pub notifications: notifications::Notifications,
    /// Read lookups' hits and misses and expired keys, for INFO (see [`key_stats`]).
    pub key_stats: key_stats::KeyStatTotals,
    /// `proto-max-bulk-len` (`serve --max-bulk`): how long a command may make a string.
    max_bulk: AtomicUsize,
    /// A bug planted by a test (`server::Plant::EarlyGateRelease`, set by the server that
    /// serves this keyspace): only builds with debug assertions have it.
    #[cfg(debug_assertions)]
    early_gate_release: std::sync::atomic::AtomicBool,
}

impl Keyspace {
    /// Opens the keyspace in `db`, creating its tables on first use.
    pub fn open(db: Arc<Database>, databases: u32) -> Result<Keyspace, KvError> {
        if !(1..=MAX_DATABASES).contains(&databases) {
            return Err(KvError::DatabaseMap(format!(
                "{databases} databases: a store has 1 to {MAX_DATABASES}"
            )));
        }
        let keys = table(&db, "kv_keys", keys_schema()?)?;
        let (parts, part_limit) = parts_table(&db)?;
        let zset = table(&db, "kv_zset", zset_schema()?)?;
        let expiry = table(&db, "kv_expiry", expiry_schema()?)?;
        let garbage = table(&db, "kv_garbage", garbage_schema()?)?;
        let counts = table(&db, "kv_counts", counts_schema()?)?;
        let groups = table(&db, "kv_groups", groups_schema()?)?;
        let consumers = table(&db, "kv_consumers", consumers_schema()?)?;
        let pending = table(&db, "kv_pending", pending_schema()?)?;
        // Created in a store made before a stream's counts were kept (see `stream`).
        let streams = table(&db, "kv_streams", streams_schema()?)?;
        let group_reads = table(&db, "kv_group_reads", group_reads_schema()?)?;
        let start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        let mut ks = Keyspace {
            db,
            keys,
            parts,
            part_limit,
            zset,
            expiry,
            garbage,
            counts,
            groups,
            consumers,
            pending,
            streams,
            group_reads,
            databases,
            next_version: AtomicU64::new(start),
            watches: Arc::default(),
            building: parking_lot::Mutex::default(),
            map: databases::DatabaseMap::identity(databases),
            notifications: notifications::Notifications::default(),
            key_stats: key_stats::KeyStatTotals::default(),
            max_bulk: AtomicUsize::new(DEFAULT_MAX_BULK),
            #[cfg(debug_assertions)]
            early_gate_release: std::sync::atomic::AtomicBool::new(false),
        };
        // Before the map is read: a store that counts its keys here has never been swapped.
        counts::ensure_rows(&ks, databases)?;
        ks.load_database_map()?;
        Ok(ks)
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Gives the database back (to close it after the server stopped).
    pub fn into_database(self) -> Arc<Database> {
        self.db
    }

    /// How many numbered databases SELECT accepts.
    pub fn databases(&self) -> u32 {
        self.databases
    }

    /// Sets `proto-max-bulk-len`: as in Redis, APPEND and SETRANGE refuse to make a string
    /// longer, and SETBIT, GETBIT and BITFIELD refuse a bit offset past it.
    pub fn set_max_bulk(&self, bytes: usize) {
        self.max_bulk.store(bytes, Ordering::Relaxed);
    }

    /// `proto-max-bulk-len` ([`Keyspace::set_max_bulk`]).
    pub(crate) fn max_bulk(&self) -> usize {
        self.max_bulk.load(Ordering::Relaxed)
    }

    /// Plants, or uproots, the bug of a write that releases its WATCH gate before its
    /// changes apply (`server::Plant::EarlyGateRelease`): the server serving this keyspace
    /// sets it from its plants when it starts.
    #[cfg(debug_assertions)]
    pub(crate) fn set_early_gate_release_planted(&self, planted: bool) {
        self.early_gate_release.store(planted, Ordering::Relaxed);
    }

    /// Whether a write releases its WATCH gate before its changes apply (a bug planted by
    /// a test): never without debug assertions.
    pub(crate) fn early_gate_release_planted(&self) -> bool {
        #[cfg(debug_assertions)]
        return self.early_gate_release.load(Ordering::Relaxed);
        #[cfg(not(debug_assertions))]
        false
    }

    /// A fresh key version (see [`KeyMeta::version`]).
    pub(crate) fn new_version(&self) -> i64 {
        (self.next_version.fetch_add(1, Ordering::Relaxed) & (i64::MAX as u64)) as i64
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn table(db: &Database, name: &'static str, schema: Schema) -> Result<Table, KvError> {
    match db.table(name) {
        Ok(table) if table.schema() == &schema => Ok(table),
        Ok(_) => Err(KvError::WrongSchema(name)),
        Err(EngineError::NoSuchTable(_)) => Ok(db.create_table(name, &schema)?),
        Err(err) => Err(err.into()),
    }
}

fn schema(
    table: &'static str,
    columns: Vec<Column>,
    key: Vec<usize>,
    indexes: Vec<IndexDef>,
) -> Result<Schema, KvError> {
    Schema::new(columns, key, indexes).map_err(|source| KvError::Schema { table, source })
}

fn keys_schema() -> Result<Schema, KvError> {
    use ColumnType::{Bytes, Int32, Int64};
    let columns = vec![
        Column::new("db", Int32),
        Column::new("slot", Int64),
        Column::new("key", Bytes(MAX_KEY as u32)),
        Column::new("kind", Int32),
        Column::new("expire_at", Int64),
        Column::new("version", Int64),
        Column::new("len", Int64),
        Column::new("head", Int64),
        Column::new("tail", Int64),
        Column::new("id", Int64),
    ];
    schema("kv_keys", columns, vec![0, 1, 2], vec![])
}

/// The `kv_parts` table and the most bytes of key and value its rows take: this build's
/// [`MAX_ENTRY`] for a new store; for one written by a build with a smaller largest entry
/// (4,066 bytes before decision 100), the limit its schema records, so that its values are
/// still cut where they were written (a writer that replaces a value and a reader must
/// agree on how many parts it has).
fn parts_table(db: &Database) -> Result<(Table, usize), KvError> {
    const NAME: &str = "kv_parts";
    let table = match db.table(NAME) {
        Ok(table) => table,
        Err(EngineError::NoSuchTable(_)) => {
            return Ok((db.create_table(NAME, &parts_schema(MAX_ENTRY)?)?, MAX_ENTRY))
        }
        Err(err) => return Err(err.into()),
    };
    let recorded = match table.schema().columns().get(parts::DATA).map(|c| c.ty) {
        Some(ColumnType::Bytes(limit)) => limit as usize,
        _ => return Err(KvError::WrongSchema(NAME)),
    };
    if recorded > MAX_ENTRY || table.schema() != &parts_schema(recorded)? {
        return Err(KvError::WrongSchema(NAME));
    }
    Ok((table, recorded))
}

fn parts_schema(limit: usize) -> Result<Schema, KvError> {
    use ColumnType::{Bytes, Int32, Int64};
    let columns = vec![
        Column::new("owner", Int64),
        Column::new("field", Bytes(MAX_FIELD as u32)),
        Column::new("part", Int32),
        Column::new("data", Bytes(limit as u32)),
        Column::new("total", Int64),
    ];
    schema("kv_parts", columns, vec![0, 1, 2], vec![])
}

fn zset_schema() -> Result<Schema, KvError> {
    use ColumnType::{Bytes, Int64};
    let columns = vec![
        Column::new("owner", Int64),
        Column::new("member", Bytes(MAX_FIELD as u32)),
        Column::new("score", Int64),
    ];
    let by_score = IndexDef::new(zset::BY_SCORE, vec![0, 2], false);
    schema("kv_zset", columns, vec![0, 1], vec![by_score])
}

fn garbage_schema() -> Result<Schema, KvError> {
    use ColumnType::{Int32, Int64};
    let columns = vec![Column::new("owner", Int64), Column::new("kind", Int32)];
    schema("kv_garbage", columns, vec![0], vec![])
}

fn counts_schema() -> Result<Schema, KvError> {
    use ColumnType::{Int32, Int64};
    let columns = vec![
        Column::new("db", Int32),
        Column::new("keys", Int64),
        Column::new("expires", Int64),
    ];
    schema("kv_counts", columns, vec![0], vec![])
}

fn groups_schema() -> Result<Schema, KvError> {
    use ColumnType::{Bytes, Int64};
    let columns = vec![
        Column::new("owner", Int64),
        Column::new("group", Bytes(MAX_FIELD as u32)),
        Column::new("last_ms", Int64),
        Column::new("last_seq", Int64),
    ];
    schema("kv_groups", columns, vec![0, 1], vec![])
}

fn consumers_schema() -> Result<Schema, KvError> {
    use ColumnType::{Bytes, Int64};
    let columns = vec![
        Column::new("owner", Int64),
        Column::new("group", Bytes(MAX_FIELD as u32)),
        Column::new("consumer", Bytes(MAX_FIELD as u32)),
        Column::new("seen_at", Int64),
    ];
    schema("kv_consumers", columns, vec![0, 1, 2], vec![])
}

fn pending_schema() -> Result<Schema, KvError> {
    use ColumnType::{Bytes, Int64};
    let columns = vec![
        Column::new("owner", Int64),
        Column::new("group", Bytes(MAX_FIELD as u32)),
        Column::new("id", Bytes(stream::ID_FIELD_LEN as u32)),
        Column::new("consumer", Bytes(MAX_FIELD as u32)),
        Column::new("delivered_at", Int64),
        Column::new("deliveries", Int64),
    ];
    schema("kv_pending", columns, vec![0, 1, 2], vec![])
}

fn streams_schema() -> Result<Schema, KvError> {
    use ColumnType::Int64;
    let columns = vec![
        Column::new("owner", Int64),
        Column::new("removed", Int64),
        Column::new("max_deleted_ms", Int64),
        Column::new("max_deleted_seq", Int64),
    ];
    schema("kv_streams", columns, vec![0], vec![])
}

fn group_reads_schema() -> Result<Schema, KvError> {
    use ColumnType::{Bytes, Int64};
    let columns = vec![
        Column::new("owner", Int64),
        Column::new("group", Bytes(MAX_FIELD as u32)),
        Column::new("entries_read", Int64),
    ];
    schema("kv_group_reads", columns, vec![0, 1], vec![])
}

fn expiry_schema() -> Result<Schema, KvError> {
    use ColumnType::{Bytes, Int32, Int64};
    let columns = vec![
        Column::new("at", Int64),
        Column::new("db", Int32),
        Column::new("key", Bytes(MAX_KEY as u32)),
    ];
    schema("kv_expiry", columns, vec![0, 1, 2], vec![])
}
