//! Streams in a payload: their entries in listpack nodes, their last ID, and their consumer
//! groups with pending entries and consumers.
//!
//! ```text
//! stream   = nodes:length  (master:string(16-byte ID)  node:string(listpack))*
//!            entries:length  last_ms:length  last_seq:length
//!            [type 19+: first ID (2 lengths), largest deleted ID (2 lengths), entries added]
//!            groups:length  group*
//! group    = name:string  last_ms:length  last_seq:length  [type 19+: entries read:length]
//!            pending:length  (id:16 bytes  delivered:i64le ms  deliveries:length)*
//!            consumers:length  (name:string  seen:i64le ms  [type 21: active:i64le ms]
//!                               owned:length  id:16 bytes*)*
//! node     = a listpack: count deleted fields field*  0         (the master entry)
//!            then count + deleted entries:
//!            flags ms-diff seq-diff  (fields (field value)* | value* if flags & 2)  lp-count
//! ```
//!
//! IDs are two big-endian u64s (milliseconds, sequence); an entry's ID is the master's
//! plus its differences (as wrapping 64-bit integers); flags & 1 marks a deleted entry,
//! flags & 2 one with the master's fields, whose names are then left out.
//!
//! DUMP writes type 19 (Redis 7.0's, what Redis 7.0 itself writes) for a stream given
//! with counts, and type 15 (Redis 5.0's, restored by every Redis since) for one without,
//! whose counts Redis derives on loading it. The server gives a stream's counts only where
//! type 15 would lose them (a deletion, a group's count of entries read that was set or
//! is not known), so that most payloads still restore in Redis 6. Reading types 19 and 21, the
//! counts (entries added, the largest deleted ID, each group's entries read) are kept, and
//! the first ID and consumers' active times let go (the first ID is the first entry's).

use std::collections::{HashMap, HashSet};

use super::listpack::{self, Item};
use super::{bad, code, put_length, put_string, Budget, RdbError, Reader};

/// Entries per listpack node that DUMP writes (Redis's stream-node-max-entries default).
const ENTRIES_PER_NODE: usize = 100;
/// Bytes of fields and values after which DUMP closes a node (stream-node-max-bytes).
const NODE_BYTES: usize = 4096;
const DELETED: i64 = 1;
const SAME_FIELDS: i64 = 2;
/// A pending entry's bytes at the least: its ID, its delivery time, its count.
const PENDING_BYTES: u64 = 16 + 8 + 1;

/// A stream entry's ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    /// 0-0: no ID (no entry deleted, the first ID of a stream without entries).
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };

    fn bytes(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    fn of_bytes(bytes: &[u8]) -> Result<StreamId, RdbError> {
        let bytes: &[u8; 16] = bytes
            .try_into()
            .map_err(|_| bad("a stream ID that is not 16 bytes"))?;
        let (ms, seq) = bytes.split_at(8);
        let number = |half: &[u8]| half.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        Ok(StreamId {
            ms: number(ms),
            seq: number(seq),
        })
    }
}

/// One entry: its ID and its fields and values, alternating.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamEntry {
    pub id: StreamId,
    pub fields: Vec<Vec<u8>>,
}

/// A consumer group's pending entry: delivered to `consumer`, not acknowledged.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingEntry {
    pub id: StreamId,
    pub consumer: Vec<u8>,
    /// When it was last delivered, ms since the epoch.
    pub delivered_at: i64,
    pub deliveries: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Consumer {
    pub name: Vec<u8>,
    /// Its last read or claim, ms since the epoch.
    pub seen_at: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub name: Vec<u8>,
    /// The last ID delivered to the group.
    pub last_id: StreamId,
    /// How many entries the group has read (-1: not known), if the payload says (types
    /// 19 and 21). DUMP writes it only with its stream's counts.
    pub entries_read: Option<i64>,
    /// In ID order.
    pub pending: Vec<PendingEntry>,
    pub consumers: Vec<Consumer>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stream {
    /// In ID order.
    pub entries: Vec<StreamEntry>,
    /// The largest ID ever added (entries after it were deleted, or none).
    pub last_id: StreamId,
    /// How many entries were ever added and the largest ID deleted, if the payload says
    /// (types 19 and 21). DUMP writes type 19 for a stream with counts, type 15 for one
    /// without.
    pub counts: Option<StreamCounts>,
    pub groups: Vec<Group>,
}

/// What Redis 7 counts of a stream besides its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamCounts {
    pub entries_added: u64,
    /// 0-0: none deleted.
    pub max_deleted: StreamId,
}

/// Writes `stream`: as type 19 if it has counts (its groups then have theirs, `None`
/// written as -1, not known), else as type 15 (its groups' counts left out). Returns the
/// type written.
pub fn put_stream(out: &mut Vec<u8>, stream: &Stream) -> u8 {
    let kind = match stream.counts {
        Some(_) => code::STREAM_LISTPACKS_2,
        None => code::STREAM_LISTPACKS,
    };
    out.push(kind);
    let nodes = nodes(&stream.entries);
    put_length(out, nodes.len() as u64);
    for node in nodes {
        put_string(out, &node[0].id.bytes());
        put_string(out, &node_listpack(node));
    }
    put_length(out, stream.entries.len() as u64);
    put_id(out, stream.last_id);
    if let Some(counts) = stream.counts {
        // Redis keeps 0-0 as the first ID of a stream without entries.
        put_id(out, stream.entries.first().map_or(StreamId::MIN, |e| e.id));
        put_id(out, counts.max_deleted);
        put_length(out, counts.entries_added);
    }
    put_length(out, stream.groups.len() as u64);
    for group in &stream.groups {
        put_group(out, group, kind);
    }
    kind
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_length(out, id.ms);
    put_length(out, id.seq);
}

fn put_group(out: &mut Vec<u8>, group: &Group, kind: u8) {
    put_string(out, &group.name);
    put_id(out, group.last_id);
    if kind >= code::STREAM_LISTPACKS_2 {
        // A length, as Redis writes its signed count: -1 (not known) is 2^64 - 1.
        put_length(out, group.entries_read.unwrap_or(-1) as u64);
    }
    put_length(out, group.pending.len() as u64);
    for pending in &group.pending {
        out.extend_from_slice(&pending.id.bytes());
        out.extend_from_slice(&pending.delivered_at.to_le_bytes());
        put_length(out, pending.deliveries);
    }
    let mut owned: HashMap<&[u8], Vec<StreamId>> = HashMap::new();
    for pending in &group.pending {
        owned.entry(&pending.consumer).or_default().push(pending.id);
    }
    put_length(out, group.consumers.len() as u64);
    for consumer in &group.consumers {
        put_string(out, &consumer.name);
        out.extend_from_slice(&consumer.seen_at.to_le_bytes());
        let ids = owned
            .get(consumer.name.as_slice())
            .map_or(&[][..], Vec::as_slice);
        put_length(out, ids.len() as u64);
        for id in ids {
            out.extend_from_slice(&id.bytes());
        }
    }
}

/// The entries cut into nodes as Redis cuts them by default: a node is closed at
/// [`ENTRIES_PER_NODE`] entries, or once its entries' bytes reach [`NODE_BYTES`].
fn nodes(entries: &[StreamEntry]) -> Vec<&[StreamEntry]> {
    let mut nodes = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (at, entry) in entries.iter().enumerate() {
        bytes += entry.fields.iter().map(Vec::len).sum::<usize>();
        if at + 1 - start == ENTRIES_PER_NODE || bytes >= NODE_BYTES {
            nodes.push(&entries[start..=at]);
            (start, bytes) = (at + 1, 0);
        }
    }
    if start < entries.len() {
        nodes.push(&entries[start..]);
    }
    nodes
}

/// The listpack of one node: the master entry (the first entry's field names), then the
/// entries, each marked SAME_FIELDS where its names are the master's.
fn node_listpack(node: &[StreamEntry]) -> Vec<u8> {
    let master = &node[0];
    let names: Vec<&[u8]> = master.fields.iter().step_by(2).map(Vec::as_slice).collect();
    let mut items = vec![
        Item::Int(node.len() as i64),
        Item::Int(0),
        Item::Int(names.len() as i64),
    ];
    items.extend(names.iter().map(|name| Item::Str(name)));
    items.push(Item::Int(0));
    for entry in node {
        let same = entry.fields.len() == names.len() * 2
            && entry
                .fields
                .iter()
                .step_by(2)
                .zip(&names)
                .all(|(a, b)| a == b);
        let pairs = entry.fields.len() / 2;
        items.push(Item::Int(if same { SAME_FIELDS } else { 0 }));
        items.push(Item::Int(entry.id.ms.wrapping_sub(master.id.ms) as i64));
        items.push(Item::Int(entry.id.seq.wrapping_sub(master.id.seq) as i64));
        if same {
            items.extend(entry.fields.iter().skip(1).step_by(2).map(|v| Item::Str(v)));
        } else {
            items.push(Item::Int(pairs as i64));
            items.extend(entry.fields.iter().map(|item| Item::Str(item)));
        }
        let pieces = pairs + 3 + if same { 0 } else { pairs + 1 };
        items.push(Item::Int(pieces as i64));
    }
    listpack::write(&items)
}

impl Reader<'_> {
    /// A stream of type `kind` (15, 19 or 21).
    pub(super) fn stream(&mut self, kind: u8) -> Result<Stream, RdbError> {
        let mut entries = Vec::new();
        for _ in 0..self.count(2)? {
            let master = StreamId::of_bytes(&self.string()?)?;
            let elements = self.packed(listpack::elements)?;
            read_node(master, elements, &mut entries, &mut self.budget)?;
        }
        let length = self.plain_length()?;
        let last_id = self.id()?;
        let counts = if kind >= code::STREAM_LISTPACKS_2 {
            self.id()?; // the first entry's ID
            let max_deleted = self.id()?;
            let entries_added = self.plain_length()?;
            Some(StreamCounts {
                entries_added,
                max_deleted,
            })
        } else {
            None
        };
        let mut groups = Vec::new();
        for _ in 0..self.count(3)? {
            groups.push(self.group(kind)?);
        }
        let stream = Stream {
            entries,
            last_id,
            counts,
            groups,
        };
        check_stream(&stream, length)?;
        Ok(stream)
    }

    fn id(&mut self) -> Result<StreamId, RdbError> {
        Ok(StreamId {
            ms: self.plain_length()?,
            seq: self.plain_length()?,
        })
    }

    fn time(&mut self) -> Result<i64, RdbError> {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(bytes))
    }

    fn group(&mut self, kind: u8) -> Result<Group, RdbError> {
        let name = self.string()?;
        let last_id = self.id()?;
        let entries_read = if kind >= code::STREAM_LISTPACKS_2 {
            // Written as a length: -1 (not known) is 2^64 - 1.
            Some(self.plain_length()? as i64)
        } else {
            None
        };
        let mut pending = Vec::new();
        for _ in 0..self.count(PENDING_BYTES)? {
            pending.push(PendingEntry {
                id: StreamId::of_bytes(self.take(16)?)?,
                delivered_at: self.time()?,
                deliveries: self.plain_length()?,
                consumer: Vec::new(),
            });
        }
        // Each consumer names the pending entries it owns; every entry has one owner.
        let slots: HashMap<StreamId, usize> =
            pending.iter().enumerate().map(|(i, p)| (p.id, i)).collect();
        let mut owned = vec![false; pending.len()];
        let mut consumers = Vec::new();
        for _ in 0..self.count(10)? {
            let name = self.string()?;
            let seen_at = self.time()?;
            if kind >= code::STREAM_LISTPACKS_3 {
                self.time()?; // when it last did something
            }
            for _ in 0..self.count(16)? {
                let id = StreamId::of_bytes(self.take(16)?)?;
                let slot = slots
                    .get(&id)
                    .ok_or(bad("a consumer's entry not pending in its group"))?;
                if std::mem::replace(&mut owned[*slot], true) {
                    return Err(bad("a pending entry of two consumers"));
                }
                self.budget.charge(name.len())?;
                pending[*slot].consumer = name.clone();
            }
            consumers.push(Consumer { name, seen_at });
        }
        if owned.contains(&false) {
            return Err(bad("a pending entry without a consumer"));
        }
        Ok(Group {
            name,
            last_id,
            entries_read,
            pending,
            consumers,
        })
    }
}

/// Appends the live entries of the node whose master ID is `master` to `entries`.
fn read_node(
    master: StreamId,
    elements: Vec<Vec<u8>>,
    entries: &mut Vec<StreamEntry>,
    budget: &mut Budget,
) -> Result<(), RdbError> {
    let mut items = elements.into_iter();
    let mut next = || {
        items
            .next()
            .ok_or(bad("a stream node ends inside an entry"))
    };
    let int = |item: Vec<u8>| {
        std::str::from_utf8(&item)
            .ok()
            .and_then(|text| text.parse::<i64>().ok())
            .ok_or(bad("a stream node's number is not one"))
    };
    let live = int(next()?)?;
    let deleted = int(next()?)?;
    let names = (0..int(next()?)?)
        .map(|_| next())
        .collect::<Result<Vec<_>, _>>()?;
    if int(next()?)? != 0 || live < 0 || deleted < 0 {
        return Err(bad("a stream node's master entry is damaged"));
    }
    for _ in 0..live.saturating_add(deleted) {
        let flags = int(next()?)?;
        let id = StreamId {
            ms: master.ms.wrapping_add(int(next()?)? as u64),
            seq: master.seq.wrapping_add(int(next()?)? as u64),
        };
        let mut fields = Vec::new();
        if flags & SAME_FIELDS != 0 {
            for name in &names {
                budget.charge(name.len())?;
                fields.push(name.clone());
                fields.push(next()?);
            }
        } else {
            for _ in 0..int(next()?)?.saturating_mul(2) {
                fields.push(next()?);
            }
        }
        next()?; // the entry's count of pieces, for walking back
        if flags & DELETED == 0 {
            entries.push(StreamEntry { id, fields });
        }
    }
    if next().is_ok() {
        return Err(bad("a stream node holds more than its counts say"));
    }
    Ok(())
}

/// What Redis's loader checks, and what the keyspace needs to hold (no entry without
/// fields, no name twice).
fn check_stream(stream: &Stream, length: u64) -> Result<(), RdbError> {
    let ids = stream.entries.iter().map(|e| e.id);
    if stream.entries.len() as u64 != length {
        return Err(bad("a stream's length that its entries disagree with"));
    }
    if ids.clone().zip(ids.skip(1)).any(|(a, b)| a >= b) {
        return Err(bad("stream entries out of order"));
    }
    if stream.entries.last().is_some_and(|e| e.id > stream.last_id) {
        return Err(bad("a stream entry past the stream's last ID"));
    }
    if stream.entries.iter().any(|e| e.fields.is_empty()) {
        return Err(bad("a stream entry without fields"));
    }
    let mut names = HashSet::new();
    for group in &stream.groups {
        if !names.insert(&group.name) {
            return Err(bad("a consumer group twice"));
        }
        let mut consumers = HashSet::new();
        if !group.consumers.iter().all(|c| consumers.insert(&c.name)) {
            return Err(bad("a consumer twice in its group"));
        }
        let pending = group.pending.iter().map(|p| p.id);
        if pending.clone().zip(pending.skip(1)).any(|(a, b)| a >= b) {
            return Err(bad("pending entries out of order"));
        }
    }
    Ok(())
}
