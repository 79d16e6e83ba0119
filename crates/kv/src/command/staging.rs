//! Values too large for one commit, written over transactions of their own: a large
//! RESTORE's collection (decision 140), a long string (decision 148). The pieces go under
//! a new owner that no key points to, queued for the lazy free with the first piece (a
//! crash or a failure leaves nothing behind) and kept from it by a guard until the
//! command's own transaction, which gives the owner its key and takes it off the queue, is
//! applied (`Ctx::building`).

use std::ops::Range;

use tailstore_rdb::{Group, PendingEntry, StreamEntry};

use super::lists::push_one;
use super::{Ctx, Fault};
use crate::keyspace::groups::Pending;
use crate::keyspace::stream::{encode_entry, StreamId};
use crate::keyspace::{KeyMeta, Kind};

/// A string longer than a piece (`piece_bytes`) is written in pieces of its parts.
pub(super) fn is_long(ctx: &Ctx, value: &[u8]) -> bool {
    value.len() > piece_bytes(ctx)
}

/// `value` (a string's) as pieces of whole parts, about `piece_bytes` each.
pub(super) fn string_pieces<'a>(ctx: &Ctx, value: &'a [u8]) -> Vec<Piece<'a>> {
    let capacity = ctx.ks.part_capacity(b"");
    let per_piece = (piece_bytes(ctx) / (capacity + ROW_BYTES)).max(1);
    let parts = value.len().div_ceil(capacity).max(1);
    (0..parts)
        .step_by(per_piece)
        .map(|first| Piece::StringParts {
            value,
            parts: first..(first + per_piece).min(parts),
        })
        .collect()
}

/// Bytes of rows one piece writes (and the most a value is written with in its command's own
/// transaction): a quarter of what one commit may write, which leaves room for the rows'
/// keys and the pages' images in the commit's record.
pub(super) fn piece_bytes(ctx: &Ctx) -> usize {
    ctx.ks.database().max_commit_bytes() / 4
}

/// What a row costs beside its element's bytes: its key's owner and part, the row's header.
pub(super) const ROW_BYTES: usize = 48;

/// A run of a value's elements (or of a string's parts), written in one transaction.
pub(super) enum Piece<'a> {
    List(&'a [Vec<u8>]),
    Set(&'a [Vec<u8>]),
    Hash(&'a [(Vec<u8>, Vec<u8>)]),
    ZSet(&'a [(Vec<u8>, f64)]),
    Entries(&'a [StreamEntry]),
    Groups(&'a [Group]),
    /// A group too large for one piece, without its pending entries ...
    GroupHead(&'a Group),
    /// ... which follow in pieces of their own.
    Pending {
        group: &'a [u8],
        entries: &'a [PendingEntry],
    },
    /// Parts `parts` of a string `value` (each of `Keyspace::part_capacity` bytes).
    StringParts {
        value: &'a [u8],
        parts: Range<usize>,
    },
}

/// `items` cut into runs of about `budget` bytes each (by `size`), at least one item a run.
pub(super) fn runs<T>(items: &[T], budget: usize, size: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let mut runs = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (at, item) in items.iter().enumerate() {
        let item_bytes = size(item) + ROW_BYTES;
        if at > start && bytes + item_bytes > budget {
            runs.push(&items[start..at]);
            (start, bytes) = (at, 0);
        }
        bytes += item_bytes;
    }
    if start < items.len() {
        runs.push(&items[start..]);
    }
    runs
}

/// Writes `piece` under `meta.id`, counting its elements in `meta` (not saved).
pub(super) fn write_piece(ctx: &mut Ctx, meta: &mut KeyMeta, piece: &Piece) -> Result<(), Fault> {
    let owner = meta.id;
    match *piece {
        Piece::List(items) => {
            for item in items {
                push_one(ctx, meta, item, false)?;
            }
        }
        Piece::Set(members) => {
            for member in members {
                ctx.ks.write_value(ctx.txn, owner, member, b"", None)?;
            }
            meta.len += members.len() as i64;
        }
        Piece::Hash(fields) => {
            for (field, value) in fields {
                ctx.ks.write_value(ctx.txn, owner, field, value, None)?;
            }
            meta.len += fields.len() as i64;
        }
        Piece::ZSet(members) => {
            for (member, score) in members {
                ctx.ks.put_member(ctx.txn, owner, member, *score, false)?;
            }
            meta.len += members.len() as i64;
        }
        Piece::Entries(entries) => {
            for entry in entries {
                let field = StreamId::from(entry.id).field();
                let stored = encode_entry(&entry.fields);
                ctx.ks.write_value(ctx.txn, owner, &field, &stored, None)?;
            }
            meta.len += entries.len() as i64;
        }
        Piece::Groups(groups) => {
            for group in groups {
                write_group_head(ctx, owner, group)?;
                write_pending(ctx, owner, &group.name, &group.pending)?;
            }
        }
        Piece::GroupHead(group) => write_group_head(ctx, owner, group)?,
        Piece::Pending { group, entries } => write_pending(ctx, owner, group, entries)?,
        Piece::StringParts { value, ref parts } => {
            ctx.ks
                .write_value_parts(ctx.txn, owner, b"", value, parts.clone())?;
            meta.len = value.len() as i64;
        }
    }
    Ok(())
}

/// A group and its consumers; its pending entries are [`write_pending`]'s.
fn write_group_head(ctx: &mut Ctx, owner: i64, group: &Group) -> Result<(), Fault> {
    let name = &group.name;
    ctx.ks
        .put_group(ctx.txn, owner, name, group.last_id.into())?;
    for consumer in &group.consumers {
        ctx.ks
            .put_consumer(ctx.txn, owner, name, &consumer.name, consumer.seen_at)?;
    }
    Ok(())
}

/// `entries`, pending in the group `name` (written before, consumers included).
fn write_pending(
    ctx: &mut Ctx,
    owner: i64,
    name: &[u8],
    entries: &[PendingEntry],
) -> Result<(), Fault> {
    for entry in entries {
        let pending = Pending {
            id: entry.id.into(),
            consumer: entry.consumer.clone(),
            delivered_at: entry.delivered_at,
            deliveries: i64::try_from(entry.deliveries).unwrap_or(i64::MAX),
        };
        ctx.ks.put_pending(ctx.txn, owner, name, &pending)?;
    }
    Ok(())
}

/// Writes `pieces` in transactions of their own under a new owner, queued for the lazy
/// free with the first and kept from it by a guard that this command's transaction holds
/// until it is applied (`Ctx::building`); the owner and what its elements count.
pub(super) fn write_staged(ctx: &mut Ctx, kind: Kind, pieces: &[Piece]) -> Result<KeyMeta, Fault> {
    let mut meta = ctx.new_meta(kind);
    ctx.building.push(ctx.ks.begin_building(meta.id));
    for (at, piece) in pieces.iter().enumerate() {
        meta = write_one_piece(ctx, meta.id, kind, at == 0, |staged| {
            let mut written = meta.clone();
            write_piece(staged, &mut written, piece)?;
            Ok(written)
        })?;
    }
    Ok(meta)
}

/// Runs `write` (a piece of `owner`'s elements, of `kind`) in a transaction of its own; the
/// `first` piece queues the owner for the lazy free in the same transaction, so that no
/// piece is ever durable without the queue entry that frees it if the build fails. The
/// caller holds the owner's build guard (`Keyspace::begin_building`) until its own
/// transaction is applied.
pub(super) fn write_one_piece<T>(
    ctx: &Ctx,
    owner: i64,
    kind: Kind,
    first: bool,
    mut write: impl FnMut(&mut Ctx) -> Result<T, Fault>,
) -> Result<T, Fault> {
    Ok(ctx.ks.run_internal(ctx.db, |staged| {
        if first {
            staged.ks.queue_garbage(staged.txn, owner, kind)?;
        }
        write(staged)
    })?)
}
