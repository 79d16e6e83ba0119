//! A key's row in `kv_keys`: its kind, deadline, version and shape.

use tailstore_engine::{KeyRange, Transaction};
use tailstore_storage::{ScanDirection, Value};

use super::counts::CountDelta;
use super::Keyspace;
use crate::command::Fault;

/// The kind of value a key holds (Redis's TYPE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    String = 0,
    Hash = 1,
    List = 2,
    Set = 3,
    ZSet = 4,
    Stream = 5,
}

impl Kind {
    /// The name TYPE answers.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Stream => "stream",
        }
    }

    pub(crate) fn from_code(code: i64) -> Option<Kind> {
        Some(match code {
            0 => Kind::String,
            1 => Kind::Hash,
            2 => Kind::List,
            3 => Kind::Set,
            4 => Kind::ZSet,
            5 => Kind::Stream,
            _ => return None,
        })
    }
}

/// What `kv_keys` says of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyMeta {
    pub kind: Kind,
    /// Deadline in milliseconds since the epoch; 0 when the key has no TTL.
    pub expire_at: i64,
    /// Changes with every write to the key (WATCH compares it).
    pub version: i64,
    /// A string's length in bytes, or a collection's number of elements.
    pub len: i64,
    /// A list's first and one-past-last element sequence numbers; a stream's largest ID
    /// ever added (see `keyspace::stream`).
    pub head: i64,
    pub tail: i64,
    /// The id of this incarnation of the key: its elements are stored under it (see the
    /// module documentation of `keyspace`).
    pub id: i64,
    /// Whether the row exists in the table (a new key's meta does not yet).
    pub stored: bool,
    /// The deadline the stored row has (0: none, or no row): what `kv_counts` counted.
    pub(crate) stored_expire_at: i64,
    /// Whether this new incarnation replaces a live key in place, so that storing it
    /// creates no key (no `new` event; see `Ctx::overwriting_meta`).
    pub(crate) overwrites: bool,
}

impl KeyMeta {
    /// The meta of a key about to be created, with the fresh id `id`.
    pub fn new(kind: Kind, id: i64) -> KeyMeta {
        KeyMeta {
            kind,
            expire_at: 0,
            version: 0,
            len: 0,
            head: 0,
            tail: 0,
            id,
            stored: false,
            stored_expire_at: 0,
            overwrites: false,
        }
    }

    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }

    /// Whether the stored row has a deadline (`kv_counts` counts it among the expires).
    pub(crate) fn stored_with_ttl(&self) -> bool {
        self.stored && self.stored_expire_at != 0
    }
}

/// The slot of a key: its place in `kv_keys`'s order, which SCAN's cursor names. Hashing
/// spreads keys evenly, so a cursor (a slot number) stays valid whatever is inserted or
/// deleted between two SCAN calls, and no key present throughout is missed.
pub fn slot_of(key: &[u8]) -> i64 {
    i64::from(crc32c::crc32c(key))
}

fn key_columns(db: u32, key: &[u8]) -> Vec<Value> {
    vec![
        Value::Int(i64::from(db)),
        Value::Int(slot_of(key)),
        Value::Bytes(key.to_vec()),
    ]
}

impl Keyspace {
    /// The key's meta row, expired or not.
    pub(crate) fn load_meta(
        &self,
        txn: &mut Transaction<'_>,
        db: u32,
        key: &[u8],
    ) -> Result<Option<KeyMeta>, Fault> {
        let Some(row) = txn.get(&self.keys, &key_columns(self.stored_db(db), key))? else {
            return Ok(None);
        };
        decode_meta(&row).map(Some)
    }

    /// Writes the key's meta row with a new version, and counts a new key or a deadline
    /// given or taken (see [`super::counts`]).
    pub(crate) fn store_meta(
        &self,
        txn: &mut Transaction<'_>,
        db: u32,
        key: &[u8],
        meta: &mut KeyMeta,
    ) -> Result<(), Fault> {
        meta.version = self.new_version();
        let mut row = key_columns(self.stored_db(db), key);
        row.extend([
            Value::Int(meta.kind as i64),
            Value::Int(meta.expire_at),
            Value::Int(meta.version),
            Value::Int(meta.len),
            Value::Int(meta.head),
            Value::Int(meta.tail),
            Value::Int(meta.id),
        ]);
        // A blind write: the caller loaded the meta (or knows the key is new).
        txn.put(&self.keys, &row)?;
        self.count(txn, db, CountDelta::of_store(meta))?;
        meta.stored = true;
        meta.stored_expire_at = meta.expire_at;
        Ok(())
    }

    /// Deletes the key's meta row only (`meta` is what was loaded of it), and counts it
    /// gone.
    pub(crate) fn delete_meta(
        &self,
        txn: &mut Transaction<'_>,
        db: u32,
        key: &[u8],
        meta: &KeyMeta,
    ) -> Result<(), Fault> {
        assert!(meta.stored, "deleting the row of a key that has none");
        self.watches.note_deletion(self.stored_db(db), key);
        txn.remove(&self.keys, &key_columns(self.stored_db(db), key))?;
        self.count(txn, db, CountDelta::of_delete(meta))
    }

    /// Records or clears the key's deadline in `kv_expiry` (the active expiry's queue).
    pub(crate) fn set_deadline(
        &self,
        txn: &mut Transaction<'_>,
        db: u32,
        key: &[u8],
        old: i64,
        new: i64,
    ) -> Result<(), Fault> {
        if old == new {
            return Ok(());
        }
        if old != 0 {
            txn.remove(&self.expiry, &deadline_row(old, self.stored_db(db), key))?;
        }
        if new != 0 {
            txn.put(&self.expiry, &deadline_row(new, self.stored_db(db), key))?;
        }
        Ok(())
    }

    /// Up to `limit` keys whose deadline is at or before `now_ms`, as (deadline, db, key).
    pub(crate) fn due_keys(
        &self,
        txn: &mut Transaction<'_>,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<(i64, u32, Vec<u8>)>, Fault> {
        let range = KeyRange::new(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Included(vec![Value::Int(now_ms)]),
        );
        let rows = txn.scan(&self.expiry, &range, ScanDirection::Ascending, limit)?;
        rows.iter()
            .map(|row| {
                Ok((
                    int(&row[0])?,
                    self.logical_db(int(&row[1])? as u32),
                    bytes(&row[2])?.to_vec(),
                ))
            })
            .collect()
    }

    /// Keys of database `db` in slot order from slot `from`, at most `limit` (the last slot
    /// returned is complete: the caller resumes after it).
    pub(crate) fn keys_from(
        &self,
        txn: &mut Transaction<'_>,
        db: u32,
        from: i64,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, KeyMeta)>, Fault> {
        let db = Value::Int(i64::from(self.stored_db(db)));
        let range = KeyRange::new(
            std::ops::Bound::Included(vec![db.clone(), Value::Int(from)]),
            std::ops::Bound::Included(vec![db]),
        );
        let rows = txn.scan(&self.keys, &range, ScanDirection::Ascending, limit)?;
        rows.iter()
            .map(|row| Ok((bytes(&row[2])?.to_vec(), decode_meta(row)?)))
            .collect()
    }
}

fn deadline_row(at: i64, db: u32, key: &[u8]) -> Vec<Value> {
    vec![
        Value::Int(at),
        Value::Int(i64::from(db)),
        Value::Bytes(key.to_vec()),
    ]
}

fn decode_meta(row: &[Value]) -> Result<KeyMeta, Fault> {
    let code = int(&row[3])?;
    let kind = Kind::from_code(code)
        .ok_or_else(|| Fault::corrupt(format!("kv_keys row with unknown kind {code}")))?;
    let expire_at = int(&row[4])?;
    let meta = KeyMeta {
        kind,
        expire_at,
        version: int(&row[5])?,
        len: int(&row[6])?,
        head: int(&row[7])?,
        tail: int(&row[8])?,
        id: int(&row[9])?,
        stored: true,
        stored_expire_at: expire_at,
        overwrites: false,
    };
    // Counts and positions are stored data that commands compute with (an element count
    // of -1 once became an allocation of 2^64 elements): checked before any command sees them.
    let list_span = meta.tail.checked_sub(meta.head);
    if meta.len < 0 || (kind == Kind::List && list_span != Some(meta.len)) {
        return Err(Fault::corrupt(format!(
            "kv_keys row of a {} with length {}, head {} and tail {}",
            kind.name(),
            meta.len,
            meta.head,
            meta.tail
        )));
    }
    Ok(meta)
}

pub(crate) fn int(value: &Value) -> Result<i64, Fault> {
    match value {
        Value::Int(v) => Ok(*v),
        other => Err(Fault::corrupt(format!(
            "expected an integer column, found {}",
            other.kind()
        ))),
    }
}

pub(crate) fn bytes(value: &Value) -> Result<&[u8], Fault> {
    match value {
        Value::Bytes(v) => Ok(v),
        other => Err(not_bytes(other)),
    }
}

/// [`bytes`], moved out of `value` (left `Null`) rather than copied.
pub(crate) fn take_bytes(value: &mut Value) -> Result<Vec<u8>, Fault> {
    match std::mem::replace(value, Value::Null) {
        Value::Bytes(v) => Ok(v),
        other => Err(not_bytes(&other)),
    }
}

fn not_bytes(value: &Value) -> Fault {
    Fault::corrupt(format!("expected a bytes column, found {}", value.kind()))
}
