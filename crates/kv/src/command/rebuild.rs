//! Removals larger than a commit: a collection rebuilt from what it keeps (decision 191).
//!
//! A command that removes elements deletes their rows in its transaction, and a commit may
//! change only so much (`Database::max_commit_bytes`, 8 MiB by default in `buffer` mode): an
//! LTRIM, ZREMRANGEBYRANK, SPOP or LPOP with a count that takes most of a collection of a
//! million elements was refused as "transaction too large", where Redis does it. When an
//! attempt is refused for its size, the runner tries once more with
//! `Ctx::rebuilds_removals` set, and those commands then copy the elements they keep to a
//! new owner (in pieces of transactions of their own when they are many, as COPY copies,
//! decision 145), point the key at it, and queue the old owner, all its rows, for the lazy
//! free (decision 45). The command still runs as one moment: every row it copies is read
//! in its own transaction, which validates them at its commit, and the key's row changes
//! only there. Its cost is the rows kept instead of the rows removed, and the lazy free
//! removes the old rows later, a batch at a time. A list spliced in the middle (LREM,
//! LINSERT), whose kept elements are renumbered, is written afresh instead, in pieces as a
//! large RESTORE writes one (`rewrite_list`).

use std::collections::HashSet;
use std::ops::Range;

use tailstore_storage::Value;

use super::staging::{piece_bytes, runs, write_staged, Piece};
use super::{Ctx, Fault};
use crate::keyspace::{seq_of_field, KeyMeta, Kind};

/// The element rows a rebuilt collection keeps.
pub(super) enum Kept<'a> {
    /// A list's elements numbered in the range (sequence numbers).
    Seqs(Range<i64>),
    /// A set's, hash's or sorted set's elements but the ones named.
    AllBut(&'a HashSet<Vec<u8>>),
    /// A stream's entries after the one whose field (its ID, 16 bytes in ID order) is
    /// given, and all its groups' rows.
    EntriesAfter(Vec<u8>),
}

impl Kept<'_> {
    /// Whether the element row `row` of the collection's `table` (0: its elements' table,
    /// then a stream's group tables) is kept. Element rows begin with their owner, then
    /// their element's key: a list element's sequence number, a member, a field or an ID.
    fn keeps(&self, table: usize, row: &[Value]) -> Result<bool, Fault> {
        if table > 0 {
            return Ok(true);
        }
        let Some(Value::Bytes(element)) = row.get(1) else {
            return Err(Fault::corrupt(format!("element row {row:?} has no key")));
        };
        Ok(match self {
            Kept::Seqs(range) => range.contains(&seq_of_field(element)?),
            Kept::AllBut(removed) => !removed.contains(element),
            Kept::EntriesAfter(last) => element > last,
        })
    }
}

/// Gives the collection `meta` describes a new owner that holds only the elements `kept`
/// names, and queues its old owner for the lazy free; `meta` (not saved) names the new
/// owner. Its length and ends are the caller's to set, as after removing one by one.
pub(super) fn keep_only(ctx: &mut Ctx, meta: &mut KeyMeta, kept: Kept) -> Result<(), Fault> {
    let to = ctx.ks.new_version();
    super::keys::copy_elements(ctx, meta, to, |table, row| kept.keeps(table, row))?;
    ctx.ks.queue_garbage(ctx.txn, meta.id, meta.kind)?;
    meta.id = to;
    Ok(())
}

/// Where a set's, hash's or sorted set's elements are kept: value rows (`kv_parts`: set
/// members, hash fields) or sorted-set members (`kv_zset`, with their scores' index).
#[derive(Clone, Copy)]
pub(super) enum Elements {
    Values,
    Members,
}

impl Elements {
    /// Deletes `element` of `owner`; whether it was there.
    fn delete(self, ctx: &mut Ctx, owner: i64, element: &[u8]) -> Result<bool, Fault> {
        match self {
            Elements::Values => ctx.ks.delete_value(ctx.txn, owner, element),
            Elements::Members => ctx.ks.delete_member(ctx.txn, owner, element),
        }
    }

    /// Whether `owner` holds `element`.
    fn holds(self, ctx: &mut Ctx, owner: i64, element: &[u8]) -> Result<bool, Fault> {
        Ok(match self {
            Elements::Values => ctx.ks.value_len(ctx.txn, owner, element)?.is_some(),
            Elements::Members => ctx.ks.member_score(ctx.txn, owner, element)?.is_some(),
        })
    }
}

/// Removes the elements `held` names, all of which the set, hash or sorted set `meta`
/// holds (SPOP's and the sorted-set pops' picks): one by one, or, in an attempt after one
/// refused as too large, by rebuilding the collection from the others. `meta`'s length is
/// the caller's to set.
pub(super) fn remove_held<'e>(
    ctx: &mut Ctx,
    meta: &mut KeyMeta,
    held: impl IntoIterator<Item = &'e [u8]>,
    elements: Elements,
) -> Result<(), Fault> {
    if ctx.rebuilds_removals {
        let named: HashSet<Vec<u8>> = held.into_iter().map(<[u8]>::to_vec).collect();
        return keep_only(ctx, meta, Kept::AllBut(&named));
    }
    for element in held {
        elements.delete(ctx, meta.id, element)?;
    }
    Ok(())
}

/// Removes those of the elements `named` that the set, hash or sorted set `meta` holds
/// (SREM, HDEL, ZREM: a name given twice counts once) as [`remove_held`] does; how many
/// it removed. `meta`'s length is the caller's to set.
pub(super) fn remove_named(
    ctx: &mut Ctx,
    meta: &mut KeyMeta,
    named: &[Vec<u8>],
    elements: Elements,
) -> Result<i64, Fault> {
    if !ctx.rebuilds_removals {
        let mut removed = 0;
        for element in named {
            removed += i64::from(elements.delete(ctx, meta.id, element)?);
        }
        return Ok(removed);
    }
    let mut held = HashSet::new();
    for element in named {
        if elements.holds(ctx, meta.id, element)? {
            held.insert(element.clone());
        }
    }
    keep_only(ctx, meta, Kept::AllBut(&held))?;
    Ok(held.len() as i64)
}

/// Gives the list `meta` a new owner that holds `elements` (numbered afresh), written in
/// pieces of transactions of their own as a large RESTORE writes a list (decision 140),
/// and queues its old owner for the lazy free; `meta` (not saved) then describes the new
/// list. For a splice (LREM, LINSERT) that would rewrite more than a commit may.
pub(super) fn rewrite_list(
    ctx: &mut Ctx,
    meta: &mut KeyMeta,
    elements: &[Vec<u8>],
) -> Result<(), Fault> {
    let pieces: Vec<Piece> = runs(elements, piece_bytes(ctx), Vec::len)
        .into_iter()
        .map(Piece::List)
        .collect();
    let staged = write_staged(ctx, Kind::List, &pieces)?;
    ctx.ks.forget_garbage(ctx.txn, staged.id)?;
    ctx.ks.queue_garbage(ctx.txn, meta.id, Kind::List)?;
    meta.id = staged.id;
    meta.head = staged.head;
    meta.tail = staged.tail;
    meta.len = staged.len;
    Ok(())
}
