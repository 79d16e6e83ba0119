//! DUMP and RESTORE: a key's value in Redis's serialization (`tailstore_rdb`), so that keys
//! move between Redis and tailstore; a stream with its consumer groups.

use tailstore_resp::Reply;
use tailstore_storage::ScanDirection;

use super::consumer_groups::check_name;
use super::hashes::{all_fields, check_field};
use super::lists::all_elements;
use super::sets::members;
use super::staging::{piece_bytes, runs, write_piece, write_staged, Piece, ROW_BYTES};
use super::strings::string_of;
use super::{bulk, check_key, is, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::notifications;
use crate::keyspace::stream::{decode_entry, StreamCounts, StreamId, StreamPosition};
use crate::keyspace::{KeyMeta, Kind};
use tailstore_rdb::{self as rdb, Consumer, Group, Object, PendingEntry, Stream, StreamEntry};

/// DUMP key: the key's value as a payload RESTORE (here or in Redis) takes; nil if the key
/// does not exist.
pub fn dump(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let Some(meta) = ctx.meta(&args[1])? else {
        return Ok(Reply::Null);
    };
    let object = object_of(ctx, &meta)?;
    Ok(bulk(rdb::dump(&object)))
}

/// The value of the key whose meta is `meta`, read whole.
fn object_of(ctx: &mut Ctx, meta: &KeyMeta) -> Result<Object, Fault> {
    Ok(match meta.kind {
        Kind::String => Object::String(
            string_of(ctx, meta)?
                .ok_or_else(|| Fault::corrupt(format!("string {} is missing", meta.id)))?,
        ),
        Kind::List => Object::List(all_elements(ctx, meta)?),
        Kind::Set => Object::Set(members(ctx, meta.id)?),
        Kind::Hash => Object::Hash(all_fields(ctx, meta.id)?),
        Kind::ZSet => Object::ZSet(ctx.ks.members_from_end(
            ctx.txn,
            meta.id,
            ScanDirection::Ascending,
            usize::MAX,
        )?),
        Kind::Stream => Object::Stream(stream_of(ctx, meta)?),
    })
}

/// The stream whose meta is `meta`: its entries, its groups with their pending entries
/// and consumers, and the counts of both if the counts Redis derives from a payload
/// without them (type 15) would be others (see [`counts_kept`]).
fn stream_of(ctx: &mut Ctx, meta: &KeyMeta) -> Result<Stream, Fault> {
    let stored = ctx
        .ks
        .fields(ctx.txn, meta.id, ScanDirection::Ascending, usize::MAX)?;
    let entries: Vec<StreamEntry> = stored
        .into_iter()
        .map(|(field, value)| {
            Ok(StreamEntry {
                id: StreamId::of_field(&field)?.into(),
                fields: decode_entry(&value)?,
            })
        })
        .collect::<Result<_, Fault>>()?;
    let first = entries.first().map(|entry| entry.id.into());
    let position = ctx.ks.stream_position_from(ctx.txn, meta, first)?;
    let mut groups = Vec::new();
    for (name, last) in ctx.ks.groups_of(ctx.txn, meta.id)? {
        let pending = ctx
            .ks
            .all_pending(ctx.txn, meta.id, &name)?
            .into_iter()
            .map(|p| PendingEntry {
                id: p.id.into(),
                consumer: p.consumer,
                delivered_at: p.delivered_at,
                deliveries: p.deliveries.max(0) as u64,
            })
            .collect();
        let consumers = ctx
            .ks
            .consumers_of(ctx.txn, meta.id, &name)?
            .into_iter()
            .map(|(name, seen_at)| Consumer { name, seen_at })
            .collect();
        let entries_read = Some(ctx.ks.entries_read(ctx.txn, meta.id, &name)?.unwrap_or(-1));
        groups.push(Group {
            name,
            last_id: last.into(),
            entries_read,
            pending,
            consumers,
        });
    }
    let mut stream = Stream {
        entries,
        last_id: position.last.into(),
        counts: None,
        groups,
    };
    let counts = position.counts;
    if counts_kept(&position, &stream.groups) {
        stream.groups.iter_mut().for_each(|g| g.entries_read = None);
    } else {
        stream.counts = Some(rdb::StreamCounts {
            entries_added: counts.entries_added as u64,
            max_deleted: counts.max_deleted.into(),
        });
    }
    Ok(stream)
}

/// Whether a payload without counts (type 15) keeps the counts of the stream at `position`
/// and of its `groups` (their entries read, -1 if not known): whether they are those Redis
/// derives on loading it, as [`store_stream_counts`] derives them here. Only then does
/// DUMP write type 15, which Redis 6 restores too; else type 19, as Redis 7.0 does.
fn counts_kept(position: &StreamPosition, groups: &[Group]) -> bool {
    let derived = StreamPosition {
        counts: StreamCounts::of_entries(position.len),
        ..*position
    };
    derived.counts == position.counts
        && groups.iter().all(|group| {
            let read = derived.entries_up_to(group.last_id.into()).unwrap_or(-1);
            group.entries_read == Some(read)
        })
}

/// The counts of a restored stream and of its groups: the payload's (types 19 and 21), else
/// those Redis derives on loading a stream without them (type 15): entries added = the
/// entries there are, nothing deleted, and each group's entries read as far as that can
/// be told from its last delivered ID.
fn store_stream_counts(ctx: &mut Ctx, meta: &KeyMeta, stream: &Stream) -> Result<(), Fault> {
    let len = stream.entries.len() as i64;
    let counts = match stream.counts {
        // Taken as Redis loads it, unchecked: the count wraps (`StreamCounts`), so one
        // past `i64::MAX`, or below the entries held, is a stream Redis could have saved.
        Some(counts) => StreamCounts {
            entries_added: counts.entries_added as i64,
            max_deleted: counts.max_deleted.into(),
        },
        None => StreamCounts::of_entries(len),
    };
    ctx.ks.put_stream_counts(ctx.txn, meta, counts)?;
    let position = StreamPosition {
        len,
        first: stream
            .entries
            .first()
            .map_or(StreamId::MIN, |e| e.id.into()),
        last: stream.last_id.into(),
        counts,
    };
    for group in &stream.groups {
        let entries_read = match group.entries_read {
            Some(read) => Some(read).filter(|read| *read >= 0),
            None => position.entries_up_to(group.last_id.into()),
        };
        ctx.ks
            .put_entries_read(ctx.txn, meta.id, &group.name, entries_read)?;
    }
    Ok(())
}

/// RESTORE's options after the payload.
struct RestoreOptions {
    replace: bool,
    absolute: bool,
}

/// REPLACE, ABSTTL, IDLETIME seconds and FREQ frequency, with Redis's checks. The last two
/// tell an evicting Redis how hot the key is; this server never evicts, so they are checked
/// and let go.
fn restore_options(args: &[Vec<u8>]) -> Result<RestoreOptions, Fault> {
    let mut options = RestoreOptions {
        replace: false,
        absolute: false,
    };
    let (mut idle, mut freq) = (false, false);
    let mut i = 0;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if is(&args[i], "REPLACE") {
            options.replace = true;
        } else if is(&args[i], "ABSTTL") {
            options.absolute = true;
        } else if is(&args[i], "IDLETIME") && has_value && !freq {
            if parse_int(&args[i + 1])? < 0 {
                return Err(Fault::err("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle = true;
            i += 1;
        } else if is(&args[i], "FREQ") && has_value && !idle {
            if !(0..=255).contains(&parse_int(&args[i + 1])?) {
                return Err(Fault::err(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq = true;
            i += 1;
        } else {
            return Err(Fault::err(SYNTAX));
        }
        i += 1;
    }
    Ok(options)
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]: creates
/// `key` with the value of a DUMP payload (of this server or of Redis 2.6 to 7.2), and a
/// deadline `ttl` ms from now (an absolute one with ABSTTL; 0: none). Redis's order of
/// checks and errors: BUSYKEY unless REPLACE, the TTL, then the payload. A deadline already
/// past leaves the key deleted (with REPLACE) or absent, and answers OK.
pub fn restore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let options = restore_options(&args[4..])?;
    check_key(key)?;
    let existing = ctx.meta(key)?;
    if existing.is_some() && !options.replace {
        return Err(Fault::err("BUSYKEY Target key name already exists."));
    }
    let ttl = parse_int(&args[2])?;
    if ttl < 0 {
        return Err(Fault::err("ERR Invalid TTL value, must be >= 0"));
    }
    let object = rdb::restore(&args[3]).map_err(|err| Fault::err(format!("ERR {err}")))?;
    check_names(&object)?;
    let replaced = existing.is_some();
    if let Some(old) = existing {
        ctx.remove(key, &old)?;
    }
    let deadline = match ttl {
        0 => 0,
        ttl if options.absolute => ttl,
        ttl => ctx.now.saturating_add(ttl),
    };
    if deadline != 0 && deadline <= ctx.now {
        if replaced {
            ctx.notify(notifications::GENERIC, "del", key);
        }
        return Ok(Reply::ok());
    }
    store(ctx, key, object, deadline)?;
    ctx.notify(notifications::GENERIC, "restore", key);
    Ok(Reply::ok())
}

/// Hash fields and set members are B+tree key columns: longer ones are refused before
/// anything is written.
fn check_names(object: &Object) -> Result<(), Fault> {
    match object {
        Object::String(_) | Object::List(_) => Ok(()),
        Object::Set(members) => members.iter().try_for_each(|m| check_field(m, "member")),
        Object::Hash(pairs) => pairs.iter().try_for_each(|(f, _)| check_field(f, "field")),
        Object::ZSet(members) => members
            .iter()
            .try_for_each(|(m, _)| check_field(m, "member")),
        Object::Stream(stream) => stream.groups.iter().try_for_each(|group| {
            check_name(&group.name, "group")?;
            group
                .consumers
                .iter()
                .try_for_each(|c| check_name(&c.name, "consumer"))
        }),
    }
}

/// What a pending entry's row holds besides the row's own bytes: its ID, its times and
/// count, and its consumer's name.
fn pending_bytes(entry: &PendingEntry) -> usize {
    32 + entry.consumer.len()
}

/// A collection's elements as pieces of about `budget` bytes each (one piece when they fit).
fn pieces(object: &Object, budget: usize) -> Vec<Piece<'_>> {
    let pairs = |(a, b): &(Vec<u8>, Vec<u8>)| a.len() + b.len();
    match object {
        Object::String(_) => Vec::new(),
        Object::List(items) => runs(items, budget, Vec::len)
            .into_iter()
            .map(Piece::List)
            .collect(),
        Object::Set(members) => runs(members, budget, Vec::len)
            .into_iter()
            .map(Piece::Set)
            .collect(),
        Object::Hash(fields) => runs(fields, budget, pairs)
            .into_iter()
            .map(Piece::Hash)
            .collect(),
        Object::ZSet(members) => runs(members, budget, |(m, _)| m.len() + 8)
            .into_iter()
            .map(Piece::ZSet)
            .collect(),
        Object::Stream(stream) => {
            let entry = |e: &StreamEntry| e.fields.iter().map(|f| f.len() + 4).sum();
            let group = |g: &Group| {
                let names = g
                    .consumers
                    .iter()
                    .map(|c| c.name.len() + ROW_BYTES)
                    .sum::<usize>();
                let pending = g.pending.iter().map(pending_bytes).sum::<usize>();
                names + pending + g.pending.len() * ROW_BYTES + g.name.len()
            };
            let entries = runs(&stream.entries, budget, entry)
                .into_iter()
                .map(Piece::Entries);
            let mut pieces: Vec<Piece<'_>> = entries.collect();
            // A group larger than a piece is alone in its run: its pending entries, which
            // can number millions, go in pieces of their own after it.
            for run in runs(&stream.groups, budget, group) {
                match run {
                    [large] if group(large) > budget => {
                        pieces.push(Piece::GroupHead(large));
                        let pending = runs(&large.pending, budget, pending_bytes);
                        pieces.extend(pending.into_iter().map(|entries| Piece::Pending {
                            group: &large.name,
                            entries,
                        }));
                    }
                    _ => pieces.push(Piece::Groups(run)),
                }
            }
            pieces
        }
    }
}

fn kind_of(object: &Object) -> Kind {
    match object {
        Object::String(_) => Kind::String,
        Object::List(_) => Kind::List,
        Object::Set(_) => Kind::Set,
        Object::Hash(_) => Kind::Hash,
        Object::ZSet(_) => Kind::ZSet,
        Object::Stream(_) => Kind::Stream,
    }
}

/// Stores `object` as the new key `key` (which does not exist now) with `deadline` (0:
/// none). A collection larger than one piece is written first, piece by piece, in
/// transactions of its own under a new owner queued for the lazy free (a crash or a
/// failure leaves nothing behind; no key points to it yet, so no reader sees it); this
/// command's transaction then gives it the key and takes it off the queue.
fn store(ctx: &mut Ctx, key: &[u8], object: Object, deadline: i64) -> Result<(), Fault> {
    if let Object::String(value) = &object {
        // A string longer than a piece is written in pieces too (`Ctx::put_string`).
        return ctx.put_string(key, value, Some(deadline));
    }
    let kind = kind_of(&object);
    let pieces = pieces(&object, piece_bytes(ctx));
    let mut meta = if pieces.len() <= 1 {
        let mut meta = ctx.meta_for_write(key, kind)?;
        for piece in &pieces {
            write_piece(ctx, &mut meta, piece)?;
        }
        meta
    } else {
        let staged = write_staged(ctx, kind, &pieces)?;
        let fresh = ctx.meta_for_write(key, kind)?;
        ctx.ks.forget_garbage(ctx.txn, staged.id)?;
        KeyMeta {
            id: staged.id,
            len: staged.len,
            head: staged.head,
            tail: staged.tail,
            ..fresh
        }
    };
    if let Object::Stream(stream) = &object {
        StreamId::from(stream.last_id).store_as_last(&mut meta);
        store_stream_counts(ctx, &meta, stream)?;
    }
    if deadline != 0 {
        ctx.set_expiry(key, &mut meta, deadline)?;
    }
    ctx.save(key, &mut meta)
}
