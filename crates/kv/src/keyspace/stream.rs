//! Stream entries: their IDs, and how an entry's fields and values are stored.
//!
//! The entry with ID `ms-seq` is the value under field [`StreamId::field`] (the two numbers
//! big-endian, so that byte order is ID order and a range of IDs is one range scan) of the
//! key's owner in `kv_parts`; long entries take several parts like any value. The value is
//! the entry's field/value pairs, each as a 4-byte little-endian length and its bytes.
//!
//! The key's row holds the number of entries (`len`) and the largest ID ever added, in
//! `head` (ms) and `tail` (seq) as the u64s' bit patterns: XADD must give a larger ID even
//! after that entry was deleted, so it is not the last entry's.
//!
//! # Counts (Redis 7's `entries-added`, `max-deleted-entry-id`, `entries-read`, `lag`)
//!
//! Redis 7 counts the entries ever added to a stream and keeps the largest ID XDEL
//! removed, and counts for each consumer group the entries it has read; from these it
//! tells how many entries a group has still to read (its lag) without counting them, or
//! answers nil when deletions make that impossible to tell. tailstore keeps the same
//! counts with the same rules ([`StreamCounts`], [`StreamPosition`]), so that XINFO
//! answers as Redis does: the stream's in `kv_streams (owner) -> removed, max_deleted_ms,
//! max_deleted_seq`, a group's in `kv_group_reads (owner, group) -> entries_read` (-1: not
//! known), both keyed by the owner so that they move with RENAME, are copied by COPY and
//! are freed with the stream. The stream's row counts the entries *removed* (by XDEL and
//! trimming), not those added: entries added = the key's `len` + removed, so XADD, the
//! command streams run most, changes no row but the key's and its entry's. A stream
//! stored before these tables existed has no row: it reads as Redis reads a stream saved
//! without counts (RDB type 15), entries added = its length, nothing deleted; a group
//! without a row as one whose count is not known.

use std::fmt;

use tailstore_engine::Transaction;
use tailstore_storage::{ScanDirection, Value};

use super::meta::{int, KeyMeta};
use super::Keyspace;
use crate::command::Fault;

/// A stream entry's ID: milliseconds and a sequence number, ordered as a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

/// The bytes of an entry's field in `kv_parts`.
pub const ID_FIELD_LEN: usize = 16;

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID in order, if there is one.
    pub fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId::new(self.ms, seq)),
            None => Some(StreamId::new(self.ms.checked_add(1)?, 0)),
        }
    }

    /// The previous ID in order, if there is one.
    pub fn previous(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId::new(self.ms, seq)),
            None => Some(StreamId::new(self.ms.checked_sub(1)?, u64::MAX)),
        }
    }

    /// The entry's field in `kv_parts`.
    pub fn field(self) -> [u8; ID_FIELD_LEN] {
        let mut field = [0u8; ID_FIELD_LEN];
        field[..8].copy_from_slice(&self.ms.to_be_bytes());
        field[8..].copy_from_slice(&self.seq.to_be_bytes());
        field
    }

    pub fn of_field(field: &[u8]) -> Result<StreamId, Fault> {
        let field: &[u8; ID_FIELD_LEN] = field
            .try_into()
            .map_err(|_| Fault::corrupt(format!("stream entry field of {} bytes", field.len())))?;
        let (ms, seq) = field.split_at(8);
        let number = |bytes: &[u8]| {
            let mut array = [0u8; 8];
            array.copy_from_slice(bytes);
            u64::from_be_bytes(array)
        };
        Ok(StreamId::new(number(ms), number(seq)))
    }

    /// The largest ID a stream ever had added, from its key's row.
    pub fn last_of(meta: &KeyMeta) -> StreamId {
        StreamId::new(meta.head as u64, meta.tail as u64)
    }

    /// Records `self` in a stream key's row as the largest ID ever added.
    pub fn store_as_last(self, meta: &mut KeyMeta) {
        meta.head = self.ms as i64;
        meta.tail = self.seq as i64;
    }
}

/// A stream's counts besides its entries.
///
/// Redis keeps entries added as a `uint64_t` and a group's entries read as a `long long`,
/// and counts past `i64::MAX` wrap (XSETID … ENTRIESADDED 9223372036854775807 and one XADD
/// more, or ENTRIESREAD at the maximum and one read): the arithmetic on them here wraps the
/// same way, and XINFO shows what Redis shows (decision 192).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamCounts {
    /// Entries ever added (XADD; XSETID ENTRIESADDED sets it), modulo 2^64.
    pub entries_added: i64,
    /// The largest ID XDEL removed; 0-0 if none (XSETID MAXDELETEDID sets it).
    pub max_deleted: StreamId,
}

impl StreamCounts {
    /// The counts Redis gives a stream read without them (RDB type 15): every entry there
    /// is was added, none deleted.
    pub fn of_entries(len: i64) -> StreamCounts {
        StreamCounts {
            entries_added: len,
            max_deleted: StreamId::MIN,
        }
    }
}

/// A stream as a group's count of entries read is computed against: its length, its first
/// entry's ID (0-0 when empty), the largest ID ever added and its counts.
#[derive(Clone, Copy, Debug)]
pub struct StreamPosition {
    pub len: i64,
    pub first: StreamId,
    pub last: StreamId,
    pub counts: StreamCounts,
}

impl StreamPosition {
    /// Whether an entry at or after `start` may have been deleted (Redis's
    /// `streamRangeHasTombstones` up to the end): the largest deleted ID lies there, among
    /// the entries there are.
    fn deleted_from(&self, start: StreamId) -> bool {
        let deleted = self.counts.max_deleted;
        self.len > 0 && deleted != StreamId::MIN && self.first <= deleted && start <= deleted
    }

    /// How many entries had been added up to and including `id`, where that can be told
    /// (Redis's `streamEstimateDistanceFromFirstEverEntry`): always for the last ID and in
    /// an empty stream; before or at the first entry only while no deletion lies after it;
    /// never between the first and the last entry, nor after the last.
    pub fn entries_up_to(&self, id: StreamId) -> Option<i64> {
        let added = self.counts.entries_added;
        if added == 0 {
            return Some(0);
        }
        if self.len == 0 && id <= self.last {
            return Some(added);
        }
        match id.cmp(&self.last) {
            std::cmp::Ordering::Equal => return Some(added),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
        let deleted = self.counts.max_deleted;
        if deleted == StreamId::MIN || deleted < self.first {
            match id.cmp(&self.first) {
                std::cmp::Ordering::Less => return Some(added.wrapping_sub(self.len)),
                std::cmp::Ordering::Equal => {
                    return Some(added.wrapping_sub(self.len).wrapping_add(1))
                }
                std::cmp::Ordering::Greater => {}
            }
        }
        None
    }

    /// A group's count of entries read (`None`: not known) once the entry `id`, after its
    /// last delivered one, is delivered to it: one more if the count was known and no
    /// deletion lies ahead, else what can be told of `id`.
    pub fn read_after_delivering(&self, entries_read: Option<i64>, id: StreamId) -> Option<i64> {
        match entries_read {
            Some(read) if !self.deleted_from(id) => Some(read.wrapping_add(1)),
            _ if self.counts.entries_added != 0 => self.entries_up_to(id),
            unchanged => unchanged,
        }
    }

    /// A group's lag: how many entries were added after its last delivered ID `last`, if
    /// that can be told (Redis's `streamReplyWithCGLag`). Negative when a group was told
    /// it had read more than was ever added (XGROUP … ENTRIESREAD), as in Redis.
    pub fn lag(&self, entries_read: Option<i64>, last: StreamId) -> Option<i64> {
        let added = self.counts.entries_added;
        if added == 0 {
            return Some(0);
        }
        match entries_read {
            Some(read) if !self.deleted_from(last) => Some(added.wrapping_sub(read)),
            _ => self
                .entries_up_to(last)
                .map(|read| added.wrapping_sub(read)),
        }
    }
}

impl Keyspace {
    /// The counts of the stream `meta` (as [`StreamCounts::of_entries`] if it has no row).
    pub(crate) fn stream_counts(
        &self,
        txn: &mut Transaction<'_>,
        meta: &KeyMeta,
    ) -> Result<StreamCounts, Fault> {
        let Some(row) = txn.get(&self.streams, &[Value::Int(meta.id)])? else {
            return Ok(StreamCounts::of_entries(meta.len));
        };
        // Entries removed, modulo 2^64 like entries added: once entries added wraps past
        // `i64::MAX` (XSETID … ENTRIESADDED), removed (added − len) may show as negative.
        let removed = int(&row[1])?;
        let entries_added = meta.len.wrapping_add(removed);
        Ok(StreamCounts {
            entries_added,
            max_deleted: StreamId::new(int(&row[2])? as u64, int(&row[3])? as u64),
        })
    }

    /// The stream `meta` as its groups' counts are computed against.
    pub(crate) fn stream_position(
        &self,
        txn: &mut Transaction<'_>,
        meta: &KeyMeta,
    ) -> Result<StreamPosition, Fault> {
        let first = match self
            .fields(txn, meta.id, ScanDirection::Ascending, 1)?
            .first()
        {
            Some((field, _)) => Some(StreamId::of_field(field)?),
            None => None,
        };
        self.stream_position_from(txn, meta, first)
    }

    /// [`Keyspace::stream_position`], the stream's first entry's ID (`None`: it has none)
    /// read already.
    pub(crate) fn stream_position_from(
        &self,
        txn: &mut Transaction<'_>,
        meta: &KeyMeta,
        first: Option<StreamId>,
    ) -> Result<StreamPosition, Fault> {
        Ok(StreamPosition {
            len: meta.len,
            first: first.unwrap_or(StreamId::MIN),
            last: StreamId::last_of(meta),
            counts: self.stream_counts(txn, meta)?,
        })
    }

    /// Stores the `counts` of the stream `meta` as it is now (its `len` after the change
    /// that moved them). The entries removed are stored modulo 2^64, as entries added
    /// wraps in Redis: any bit pattern is a valid count.
    pub(crate) fn put_stream_counts(
        &self,
        txn: &mut Transaction<'_>,
        meta: &KeyMeta,
        counts: StreamCounts,
    ) -> Result<(), Fault> {
        let removed = counts.entries_added.wrapping_sub(meta.len);
        let row = [
            Value::Int(meta.id),
            Value::Int(removed),
            Value::Int(counts.max_deleted.ms as i64),
            Value::Int(counts.max_deleted.seq as i64),
        ];
        txn.put(&self.streams, &row)?;
        Ok(())
    }
}

/// IDs as DUMP payloads carry them (`tailstore_rdb`).
impl From<tailstore_rdb::StreamId> for StreamId {
    fn from(id: tailstore_rdb::StreamId) -> StreamId {
        StreamId::new(id.ms, id.seq)
    }
}

impl From<StreamId> for tailstore_rdb::StreamId {
    fn from(id: StreamId) -> tailstore_rdb::StreamId {
        tailstore_rdb::StreamId {
            ms: id.ms,
            seq: id.seq,
        }
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// An entry's field/value pairs as stored.
pub fn encode_entry(pairs: &[Vec<u8>]) -> Vec<u8> {
    let size: usize = pairs.iter().map(|item| 4 + item.len()).sum();
    let mut out = Vec::with_capacity(size);
    for item in pairs {
        // Arguments are bounded by the request size limit (512 MiB by default).
        let len = u32::try_from(item.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(item);
    }
    out
}

/// The field/value pairs of a stored entry, flattened (field, value, field, value…).
pub fn decode_entry(stored: &[u8]) -> Result<Vec<Vec<u8>>, Fault> {
    let mut items = Vec::new();
    let mut rest = stored;
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| Fault::corrupt("stream entry cut inside a length".to_string()))?;
        let len = u32::from_le_bytes(*len) as usize;
        if len > tail.len() {
            return Err(Fault::corrupt(format!(
                "stream entry item of {len} bytes with {} left",
                tail.len()
            )));
        }
        let (item, tail) = tail.split_at(len);
        items.push(item.to_vec());
        rest = tail;
    }
    if items.is_empty() || items.len() % 2 != 0 {
        return Err(Fault::corrupt(format!(
            "stream entry of {} items, not field/value pairs",
            items.len()
        )));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn field_order_is_id_order(a in any::<(u64, u64)>(), b in any::<(u64, u64)>()) {
            let (a, b) = (StreamId::new(a.0, a.1), StreamId::new(b.0, b.1));
            prop_assert_eq!(a.cmp(&b), a.field().cmp(&b.field()));
            prop_assert_eq!(StreamId::of_field(&a.field()).ok(), Some(a));
        }

        #[test]
        fn entries_decode_to_what_was_encoded(
            pairs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6)
        ) {
            let items: Vec<Vec<u8>> = pairs.iter().flat_map(|p| [p.clone(), p.clone()]).collect();
            prop_assert_eq!(decode_entry(&encode_entry(&items)).ok(), Some(items));
        }
    }

    #[test]
    fn next_and_previous_carry_into_the_milliseconds() {
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(
            StreamId::new(2, 0).previous(),
            Some(StreamId::new(1, u64::MAX))
        );
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::MIN.previous(), None);
    }

    #[test]
    fn damaged_entries_are_refused() {
        let good = encode_entry(&[b"f".to_vec(), b"v".to_vec()]);
        assert!(decode_entry(&good[..good.len() - 1]).is_err(), "cut short");
        assert!(decode_entry(&good[..3]).is_err(), "cut inside a length");
        assert!(
            decode_entry(&encode_entry(&[b"f".to_vec()])).is_err(),
            "odd items"
        );
        assert!(decode_entry(b"").is_err(), "no pairs");
        assert!(StreamId::of_field(b"short").is_err());
    }
}
