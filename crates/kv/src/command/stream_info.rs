//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS and XINFO HELP: what a
//! stream, its consumer groups and their consumers hold, in Redis 7.0's replies and errors.
//!
//! Left out of XINFO STREAM: `radix-tree-keys` and `radix-tree-nodes` (Redis's memory
//! layout). `entries-added`, `max-deleted-entry-id`, a group's `entries-read` and `lag`
//! follow Redis 7.0's counts and rules (`keyspace::stream`'s "Counts"): nil where Redis
//! cannot tell them.

use tailstore_resp::Reply;
use tailstore_storage::ScanDirection;

use super::consumer_groups::check_name;
use super::streams::entry_reply;
use super::{bulk, is, parse_int, Ctx, Fault, Outcome};
use crate::keyspace::groups::Pending;
use crate::keyspace::stream::{StreamId, StreamPosition};
use crate::keyspace::{KeyMeta, Kind};

/// Entries and pending entries XINFO STREAM FULL shows when COUNT does not say.
const FULL_COUNT: usize = 10;

const XINFO_HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
];

/// XINFO subcommand key …
pub fn xinfo(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    super::subcommands::check("xinfo", args).map_err(Fault::err)?;
    if is(&args[1], "help") {
        return Ok(super::help(XINFO_HELP));
    }
    let key = &args[2];
    let meta = ctx
        .meta_of(key, Kind::Stream)?
        .ok_or_else(|| Fault::err("ERR no such key"))?;
    if is(&args[1], "consumers") {
        consumers(ctx, &meta, key, &args[3])
    } else if is(&args[1], "groups") {
        groups(ctx, &meta)
    } else {
        stream(ctx, &meta, &args[1], &args[3..])
    }
}

/// A map reply of `(name, value)` pairs (a flat array in RESP2).
fn map(pairs: Vec<(&str, Reply)>) -> Reply {
    Reply::Map(pairs.into_iter().map(|(k, v)| (bulk(k), v)).collect())
}

fn id_reply(id: StreamId) -> Reply {
    bulk(id.to_string())
}

fn consumers(ctx: &mut Ctx, meta: &KeyMeta, key: &[u8], group: &[u8]) -> Outcome {
    check_name(group, "group")?;
    if ctx.ks.group(ctx.txn, meta.id, group)?.is_none() {
        return Err(Fault::err(format!(
            "NOGROUP No such consumer group '{}' for key name '{}'",
            String::from_utf8_lossy(group),
            String::from_utf8_lossy(key)
        )));
    }
    let pending = ctx.ks.all_pending(ctx.txn, meta.id, group)?;
    let consumers = ctx.ks.consumers_of(ctx.txn, meta.id, group)?;
    let now = ctx.now;
    let replies = consumers
        .into_iter()
        .map(|(name, seen_at)| {
            let owned = pending.iter().filter(|p| p.consumer == name).count();
            map(vec![
                ("name", bulk(name)),
                ("pending", Reply::Int(owned as i64)),
                ("idle", Reply::Int(now.saturating_sub(seen_at).max(0))),
            ])
        })
        .collect();
    Ok(Reply::Array(replies))
}

fn groups(ctx: &mut Ctx, meta: &KeyMeta) -> Outcome {
    let position = ctx.ks.stream_position(ctx.txn, meta)?;
    let mut replies = Vec::new();
    for (name, last) in ctx.ks.groups_of(ctx.txn, meta.id)? {
        let consumers = ctx.ks.consumers_of(ctx.txn, meta.id, &name)?.len();
        let pending = ctx.ks.all_pending(ctx.txn, meta.id, &name)?.len();
        let [entries_read, lag] = reads(ctx, meta, &position, (&name, last))?;
        replies.push(map(vec![
            ("name", bulk(name)),
            ("consumers", Reply::Int(consumers as i64)),
            ("pending", Reply::Int(pending as i64)),
            ("last-delivered-id", id_reply(last)),
            ("entries-read", entries_read),
            ("lag", lag),
        ]));
    }
    Ok(Reply::Array(replies))
}

/// A group's `entries-read` and `lag` (each nil where it cannot be told), from its name
/// and last delivered ID.
fn reads(
    ctx: &mut Ctx,
    meta: &KeyMeta,
    position: &StreamPosition,
    (name, last): (&[u8], StreamId),
) -> Result<[Reply; 2], Fault> {
    let entries_read = ctx.ks.entries_read(ctx.txn, meta.id, name)?;
    let count = |count: Option<i64>| count.map_or(Reply::Null, Reply::Int);
    Ok([count(entries_read), count(position.lag(entries_read, last))])
}

/// The entry at one end of the stream with its ID, if the stream has one.
fn end_entry(
    ctx: &mut Ctx,
    meta: &KeyMeta,
    direction: ScanDirection,
) -> Result<Option<(StreamId, Reply)>, Fault> {
    let found = ctx.ks.fields(ctx.txn, meta.id, direction, 1)?;
    found
        .first()
        .map(|(field, stored)| {
            let id = StreamId::of_field(field)?;
            Ok((id, entry_reply(id, stored)?))
        })
        .transpose()
}

/// XINFO STREAM key [FULL [COUNT count]]; `typed` is the subcommand as the client wrote
/// it (Redis's refusal of the options quotes it).
fn stream(ctx: &mut Ctx, meta: &KeyMeta, typed: &[u8], options: &[Vec<u8>]) -> Outcome {
    let refused = || {
        Fault::err(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
            String::from_utf8_lossy(typed)
        ))
    };
    let full = match options {
        [] => None,
        [word] if is(word, "FULL") => Some(FULL_COUNT),
        [word, count, n] if is(word, "FULL") && is(count, "COUNT") => {
            let n = parse_int(n)?;
            Some(if n < 0 { FULL_COUNT } else { n as usize })
        }
        _ => return Err(refused()),
    };
    let first = end_entry(ctx, meta, ScanDirection::Ascending)?;
    let first_id = first.as_ref().map(|(id, _)| *id);
    let position = ctx.ks.stream_position_from(ctx.txn, meta, first_id)?;
    let counts = position.counts;
    let mut pairs = vec![
        ("length", Reply::Int(meta.len)),
        ("last-generated-id", id_reply(position.last)),
        ("max-deleted-entry-id", id_reply(counts.max_deleted)),
        ("entries-added", Reply::Int(counts.entries_added)),
        // 0-0 for an empty stream.
        ("recorded-first-entry-id", id_reply(position.first)),
    ];
    let Some(count) = full else {
        let groups = ctx.ks.groups_of(ctx.txn, meta.id)?.len();
        let last = end_entry(ctx, meta, ScanDirection::Descending)?;
        let entry = |end: Option<(StreamId, Reply)>| end.map_or(Reply::Null, |(_, reply)| reply);
        pairs.push(("groups", Reply::Int(groups as i64)));
        pairs.push(("first-entry", entry(first)));
        pairs.push(("last-entry", entry(last)));
        return Ok(map(pairs));
    };
    // COUNT 0: everything.
    let limit = if count == 0 { usize::MAX } else { count };
    let entries = ctx
        .ks
        .fields(ctx.txn, meta.id, ScanDirection::Ascending, limit)?
        .into_iter()
        .map(|(field, stored)| entry_reply(StreamId::of_field(&field)?, &stored))
        .collect::<Result<_, Fault>>()?;
    pairs.push(("entries", Reply::Array(entries)));
    pairs.push(("groups", full_groups(ctx, meta, &position, limit)?));
    Ok(map(pairs))
}

/// XINFO STREAM FULL's groups: each with its pending entries and its consumers with
/// theirs, at most `limit` pending entries a list.
fn full_groups(ctx: &mut Ctx, meta: &KeyMeta, position: &StreamPosition, limit: usize) -> Outcome {
    let mut replies = Vec::new();
    for (name, last) in ctx.ks.groups_of(ctx.txn, meta.id)? {
        let pending = ctx.ks.all_pending(ctx.txn, meta.id, &name)?;
        let consumers = ctx.ks.consumers_of(ctx.txn, meta.id, &name)?;
        let [entries_read, lag] = reads(ctx, meta, position, (&name, last))?;
        let group_pending = pending
            .iter()
            .take(limit)
            .map(|p| {
                Reply::Array(vec![
                    id_reply(p.id),
                    bulk(p.consumer.clone()),
                    Reply::Int(p.delivered_at),
                    Reply::Int(p.deliveries),
                ])
            })
            .collect();
        let consumer_replies = consumers
            .into_iter()
            .map(|(consumer, seen_at)| {
                let owned: Vec<&Pending> =
                    pending.iter().filter(|p| p.consumer == consumer).collect();
                let listed = owned
                    .iter()
                    .take(limit)
                    .map(|p| {
                        Reply::Array(vec![
                            id_reply(p.id),
                            Reply::Int(p.delivered_at),
                            Reply::Int(p.deliveries),
                        ])
                    })
                    .collect();
                map(vec![
                    ("name", bulk(consumer)),
                    ("seen-time", Reply::Int(seen_at)),
                    ("pel-count", Reply::Int(owned.len() as i64)),
                    ("pending", Reply::Array(listed)),
                ])
            })
            .collect();
        replies.push(map(vec![
            ("name", bulk(name)),
            ("last-delivered-id", id_reply(last)),
            ("entries-read", entries_read),
            ("lag", lag),
            ("pel-count", Reply::Int(pending.len() as i64)),
            ("pending", Reply::Array(group_pending)),
            ("consumers", Reply::Array(consumer_replies)),
        ]));
    }
    Ok(Reply::Array(replies))
}
