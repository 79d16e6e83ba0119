//! Consumer groups of streams, in three tables keyed by the stream's owner id (so that they
//! move with RENAME and go with the stream's other rows when it is deleted):
//!
//! ```text
//! kv_groups    (owner, group) -> last_ms, last_seq                  the last ID delivered
//! kv_consumers (owner, group, consumer) -> seen_at                  its last read or claim, ms
//! kv_pending   (owner, group, id) -> consumer, delivered_at, deliveries
//! ```
//!
//! `kv_pending` is the group's pending entries list (PEL): the entries delivered and not
//! acknowledged, each with the consumer that has it. Redis also keeps one list per
//! consumer; here a consumer's entries are the group's filtered by consumer, which costs a
//! scan of the group's list where Redis reads the consumer's own.

use tailstore_engine::{KeyRange, Transaction};
use tailstore_storage::{ScanDirection, Value};

use super::meta::{bytes, int};
use super::stream::StreamId;
use super::Keyspace;
use crate::command::Fault;

/// A delivered, unacknowledged entry of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub id: StreamId,
    pub consumer: Vec<u8>,
    /// When it was last delivered, ms since the epoch.
    pub delivered_at: i64,
    pub deliveries: i64,
}

fn group_key(owner: i64, group: &[u8]) -> Vec<Value> {
    vec![Value::Int(owner), Value::Bytes(group.to_vec())]
}

fn member_key(owner: i64, group: &[u8], member: &[u8]) -> Vec<Value> {
    vec![
        Value::Int(owner),
        Value::Bytes(group.to_vec()),
        Value::Bytes(member.to_vec()),
    ]
}

/// A `kv_groups` row's last delivered ID.
fn last_delivered(row: &[Value]) -> Result<StreamId, Fault> {
    Ok(StreamId::new(int(&row[2])? as u64, int(&row[3])? as u64))
}

fn pending_of(row: &[Value]) -> Result<Pending, Fault> {
    Ok(Pending {
        id: StreamId::of_field(bytes(&row[2])?)?,
        consumer: bytes(&row[3])?.to_vec(),
        delivered_at: int(&row[4])?,
        deliveries: int(&row[5])?,
    })
}

/// The rows a removal of a group, or of one consumer, takes from a stream rebuilt under a
/// new owner (XGROUP DESTROY and DELCONSUMER of more pending entries than one commit may
/// delete: `command/consumer_groups.rs`).
pub(crate) enum GroupRows<'a> {
    /// The group: its row, its count of entries read, its consumers and pending entries.
    Group(&'a [u8]),
    /// A consumer of a group (group, consumer), with the group's pending entries it has.
    Consumer(&'a [u8], &'a [u8]),
}

impl GroupRows<'_> {
    /// Whether the rebuilt stream keeps `row` of its table `table`, numbered as the copy of
    /// a stream's rows numbers them (`Keyspace::element_tables`): its entries, groups,
    /// consumers, pending entries, counts, then its groups' counts.
    pub(crate) fn keeps(&self, table: usize, row: &[Value]) -> Result<bool, Fault> {
        use super::garbage::stream_tables::{CONSUMERS, GROUPS, GROUP_READS, PENDING};
        // The column naming a row's consumer, in the tables that have one.
        let consumer_at = match table {
            GROUPS | GROUP_READS => None,
            CONSUMERS => Some(2),
            PENDING => Some(3),
            _ => return Ok(true),
        };
        let column = |at: usize| {
            let missing = || Fault::corrupt(format!("group row {row:?} has no column {at}"));
            bytes(row.get(at).ok_or_else(missing)?)
        };
        let group = column(1)?;
        Ok(match (self, consumer_at) {
            (GroupRows::Group(removed), _) => group != *removed,
            (GroupRows::Consumer(removed, consumer), Some(at)) => {
                group != *removed || column(at)? != *consumer
            }
            (GroupRows::Consumer(..), None) => true,
        })
    }
}

impl Keyspace {
    /// The last ID delivered to `group`, if the stream has that group.
    pub(crate) fn group(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
    ) -> Result<Option<StreamId>, Fault> {
        let Some(row) = txn.get(&self.groups, &group_key(owner, group))? else {
            return Ok(None);
        };
        last_delivered(&row).map(Some)
    }

    /// The stream's groups, each with the last ID delivered to it, in name order.
    pub(crate) fn groups_of(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
    ) -> Result<Vec<(Vec<u8>, StreamId)>, Fault> {
        let range = KeyRange::prefix(vec![Value::Int(owner)]);
        let rows = txn.scan(&self.groups, &range, ScanDirection::Ascending, usize::MAX)?;
        rows.iter()
            .map(|row| Ok((bytes(&row[1])?.to_vec(), last_delivered(row)?)))
            .collect()
    }

    /// The group's consumers, each with when it was last seen, in name order.
    pub(crate) fn consumers_of(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
    ) -> Result<Vec<(Vec<u8>, i64)>, Fault> {
        let range = KeyRange::prefix(group_key(owner, group));
        let rows = txn.scan(
            &self.consumers,
            &range,
            ScanDirection::Ascending,
            usize::MAX,
        )?;
        rows.iter()
            .map(|row| Ok((bytes(&row[2])?.to_vec(), int(&row[3])?)))
            .collect()
    }

    pub(crate) fn put_group(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
        last: StreamId,
    ) -> Result<(), Fault> {
        let mut row = group_key(owner, group);
        row.extend([Value::Int(last.ms as i64), Value::Int(last.seq as i64)]);
        txn.put(&self.groups, &row)?;
        Ok(())
    }

    /// Removes `group` with its consumers and pending entries.
    pub(crate) fn delete_group(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
    ) -> Result<(), Fault> {
        for table in [&self.consumers, &self.pending] {
            let rows = txn.scan(
                table,
                &KeyRange::prefix(group_key(owner, group)),
                ScanDirection::Ascending,
                usize::MAX,
            )?;
            for row in &rows {
                txn.remove(table, &row[..3])?;
            }
        }
        txn.remove(&self.groups, &group_key(owner, group))?;
        txn.remove(&self.group_reads, &group_key(owner, group))?;
        Ok(())
    }

    /// How many entries `group` has read, if that is known (see `stream`'s "Counts").
    pub(crate) fn entries_read(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
    ) -> Result<Option<i64>, Fault> {
        let Some(row) = txn.get(&self.group_reads, &group_key(owner, group))? else {
            return Ok(None);
        };
        // -1 is Redis's "not known"; a count read past `i64::MAX` wraps to the negatives,
        // as Redis's does (`stream.rs`, `StreamCounts`).
        match int(&row[2])? {
            -1 => Ok(None),
            read => Ok(Some(read)),
        }
    }

    pub(crate) fn put_entries_read(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
        entries_read: Option<i64>,
    ) -> Result<(), Fault> {
        let mut row = group_key(owner, group);
        row.push(Value::Int(entries_read.unwrap_or(-1)));
        txn.put(&self.group_reads, &row)?;
        Ok(())
    }

    /// When `consumer` of `group` was last seen, if it exists.
    pub(crate) fn consumer_seen(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
        consumer: &[u8],
    ) -> Result<Option<i64>, Fault> {
        let key = member_key(owner, group, consumer);
        let Some(row) = txn.get(&self.consumers, &key)? else {
            return Ok(None);
        };
        Ok(Some(int(&row[3])?))
    }

    /// Creates `consumer` or records that it was seen at `now`.
    pub(crate) fn put_consumer(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
        consumer: &[u8],
        now: i64,
    ) -> Result<(), Fault> {
        let mut row = member_key(owner, group, consumer);
        row.push(Value::Int(now));
        txn.put(&self.consumers, &row)?;
        Ok(())
    }

    pub(crate) fn delete_consumer(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
        consumer: &[u8],
    ) -> Result<(), Fault> {
        txn.remove(&self.consumers, &member_key(owner, group, consumer))?;
        Ok(())
    }

    /// The group's pending entry for `id`, if any.
    pub(crate) fn pending(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
        id: StreamId,
    ) -> Result<Option<Pending>, Fault> {
        let key = member_key(owner, group, &id.field());
        txn.get(&self.pending, &key)?
            .map(|row| pending_of(&row))
            .transpose()
    }

    /// Every pending entry of the group, in ID order.
    pub(crate) fn all_pending(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
    ) -> Result<Vec<Pending>, Fault> {
        let all = (StreamId::MIN, StreamId::MAX);
        self.pending_range(txn, owner, group, all, usize::MAX, |_| true)
    }

    /// The group's pending entries with IDs in `first..=last`, in ID order, of the first
    /// `rows` there (those `keep` accepts).
    pub(crate) fn pending_range(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
        (first, last): (StreamId, StreamId),
        rows: usize,
        mut keep: impl FnMut(&Pending) -> bool,
    ) -> Result<Vec<Pending>, Fault> {
        if first > last || rows == 0 {
            return Ok(Vec::new());
        }
        let bound = |id: StreamId| member_key(owner, group, &id.field());
        let range = KeyRange::new(
            std::ops::Bound::Included(bound(first)),
            std::ops::Bound::Included(bound(last)),
        );
        let mut found = Vec::new();
        let mut fault = None;
        txn.scan_each(
            &self.pending,
            &range,
            ScanDirection::Ascending,
            rows,
            |_| true,
            |row| {
                if fault.is_none() {
                    match pending_of(row) {
                        Ok(entry) if keep(&entry) => found.push(entry),
                        Ok(_) => {}
                        Err(err) => fault = Some(err),
                    }
                }
                Ok(())
            },
        )?;
        fault.map_or(Ok(found), Err)
    }

    pub(crate) fn put_pending(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
        entry: &Pending,
    ) -> Result<(), Fault> {
        let mut row = member_key(owner, group, &entry.id.field());
        row.extend([
            Value::Bytes(entry.consumer.clone()),
            Value::Int(entry.delivered_at),
            Value::Int(entry.deliveries),
        ]);
        txn.put(&self.pending, &row)?;
        Ok(())
    }

    pub(crate) fn delete_pending(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        group: &[u8],
        id: StreamId,
    ) -> Result<(), Fault> {
        txn.remove(&self.pending, &member_key(owner, group, &id.field()))?;
        Ok(())
    }
}
