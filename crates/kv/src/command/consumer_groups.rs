//! Streams' consumer groups: XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER,
//! HELP), XREADGROUP (its BLOCK form waited on by the server like XREAD's), XACK, XPENDING,
//! XCLAIM and XAUTOCLAIM, with Redis 7.0's replies and errors, in its order of checks.
//! Storage: `keyspace::groups`. XINFO: `stream_info.rs`.
//!
//! Group commands leave the stream's own row alone, as Redis leaves the key unmodified for
//! WATCH; two commands on one group conflict on the group's rows instead.

use tailstore_resp::Reply;
use tailstore_storage::ScanDirection;

use super::hashes::wrong_arity;
use super::streams::{
    entry_reply, parse_interval, parse_loose_id, parse_range_start, parse_read, parse_strict_id,
    ReadArgs,
};
use super::{bulk, is, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::groups::{GroupRows, Pending};
use crate::keyspace::notifications;
use crate::keyspace::stream::StreamId;
use crate::keyspace::{KeyMeta, Kind, MAX_FIELD};

/// Tries of XAUTOCLAIM per entry it may claim (Redis's `attempts_factor`).
const ATTEMPTS_PER_CLAIM: usize = 10;

fn no_group(key: &[u8], group: &[u8]) -> Fault {
    Fault::err(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

/// Group and consumer names are B+tree key columns: longer ones are refused.
pub(super) fn check_name(name: &[u8], what: &str) -> Result<(), Fault> {
    if name.len() > MAX_FIELD {
        return Err(Fault::err(format!(
            "ERR {what} name is longer than tailstore's limit of {MAX_FIELD} bytes"
        )));
    }
    Ok(())
}

/// The stream at `key` and the last ID delivered to its `group`, or Redis's NOGROUP. A
/// read lookup (XPENDING's, XCLAIM's), as in Redis.
fn stream_group(ctx: &mut Ctx, key: &[u8], group: &[u8]) -> Result<(KeyMeta, StreamId), Fault> {
    let looked_up = ctx.read_meta(key)?;
    group_of(ctx, key, looked_up, group)
}

/// [`stream_group`] of the key `key` a read lookup found as `looked_up`.
fn group_of(
    ctx: &mut Ctx,
    key: &[u8],
    looked_up: Option<KeyMeta>,
    group: &[u8],
) -> Result<(KeyMeta, StreamId), Fault> {
    check_name(group, "group")?;
    let meta = super::of_kind(looked_up, Kind::Stream)?.ok_or_else(|| no_group(key, group))?;
    let last = ctx.ks.group(ctx.txn, meta.id, group)?;
    last.map(|last| (meta, last))
        .ok_or_else(|| no_group(key, group))
}

/// Whether the stream still has the entry `id`.
fn entry_exists(ctx: &mut Ctx, owner: i64, id: StreamId) -> Result<bool, Fault> {
    Ok(ctx.ks.value_len(ctx.txn, owner, &id.field())?.is_some())
}

/// The entry `id` as XRANGE answers it, or `None` if it was deleted.
fn entry(ctx: &mut Ctx, owner: i64, id: StreamId) -> Result<Option<Reply>, Fault> {
    let stored = ctx.ks.read_value(ctx.txn, owner, &id.field(), None)?;
    stored.map(|stored| entry_reply(id, &stored)).transpose()
}

/// Makes `consumer` exist, seen now (Redis refreshes a consumer's seen time whenever it
/// reads or claims); a consumer it creates is told as an event of the stream `key`.
fn touch_consumer(
    ctx: &mut Ctx,
    key: &[u8],
    owner: i64,
    group: &[u8],
    consumer: &[u8],
) -> Result<(), Fault> {
    // The look costs a read: only while the event is published.
    let created = ctx.ks.notifications.wants(notifications::STREAM)
        && ctx
            .ks
            .consumer_seen(ctx.txn, owner, group, consumer)?
            .is_none();
    ctx.ks
        .put_consumer(ctx.txn, owner, group, consumer, ctx.now)?;
    if created {
        ctx.notify(notifications::STREAM, "xgroup-createconsumer", key);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// XGROUP

const XGROUP_HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

/// XGROUP subcommand key group …
pub fn xgroup(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    super::subcommands::check("xgroup", args).map_err(Fault::err)?;
    let typed = String::from_utf8_lossy(&args[1]).into_owned();
    let sub = typed.to_ascii_lowercase();
    if sub == "help" {
        return Ok(super::help(XGROUP_HELP));
    }
    let syntax = || {
        Fault::err(format!(
            "ERR unknown subcommand or wrong number of arguments for '{typed}'. Try XGROUP HELP."
        ))
    };
    let (mkstream, entries_read) =
        group_options(&sub, args).map_err(|fault| fault.unwrap_or_else(syntax))?;
    let (key, group) = (&args[2], &args[3]);
    check_name(group, "group")?;
    let meta = ctx.meta_of(key, Kind::Stream)?;
    let last = match &meta {
        Some(meta) => ctx.ks.group(ctx.txn, meta.id, group)?,
        None => None,
    };
    if !mkstream {
        if meta.is_none() {
            return Err(Fault::err(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
            ));
        }
        if last.is_none() && matches!(sub.as_str(), "setid" | "createconsumer" | "delconsumer") {
            return Err(Fault::err(format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(group),
                String::from_utf8_lossy(key)
            )));
        }
    }
    match (sub.as_str(), args.len()) {
        ("create", 5..=8) => create_group(ctx, args, meta, last.is_some(), entries_read),
        ("setid", 5 | 7) => {
            let meta = meta.ok_or_else(syntax)?;
            let id = match args[4].as_slice() {
                b"$" => StreamId::last_of(&meta),
                id => parse_loose_id(id)?,
            };
            ctx.ks.put_group(ctx.txn, meta.id, group, id)?;
            ctx.ks
                .put_entries_read(ctx.txn, meta.id, group, entries_read)?;
            ctx.notify(notifications::STREAM, "xgroup-setid", key);
            Ok(Reply::ok())
        }
        ("destroy", 4) => {
            let Some(mut meta) = meta.filter(|_| last.is_some()) else {
                return Ok(Reply::Int(0));
            };
            if ctx.rebuilds_removals {
                rebuild_without(ctx, key, &mut meta, GroupRows::Group(group))?;
            } else {
                ctx.ks.delete_group(ctx.txn, meta.id, group)?;
            }
            ctx.notify(notifications::STREAM, "xgroup-destroy", key);
            Ok(Reply::Int(1))
        }
        ("createconsumer", 5) => {
            let (meta, consumer) = (meta.ok_or_else(syntax)?, &args[4]);
            check_name(consumer, "consumer")?;
            if ctx
                .ks
                .consumer_seen(ctx.txn, meta.id, group, consumer)?
                .is_some()
            {
                return Ok(Reply::Int(0));
            }
            touch_consumer(ctx, key, meta.id, group, consumer)?;
            Ok(Reply::Int(1))
        }
        ("delconsumer", 5) => {
            let meta = meta.ok_or_else(syntax)?;
            let Some(pending) = delete_consumer(ctx, key, meta, group, &args[4])? else {
                return Ok(Reply::Int(0));
            };
            ctx.notify(notifications::STREAM, "xgroup-delconsumer", key);
            Ok(Reply::Int(pending))
        }
        _ => Err(syntax()),
    }
}

/// CREATE's and SETID's options after the ID: whether MKSTREAM was given, and the count
/// of entries read ENTRIESREAD gives the group (`None`: not known, Redis's -1, also when
/// not given). `Err(None)`: Redis's subcommand syntax error.
fn group_options(sub: &str, args: &[Vec<u8>]) -> Result<(bool, Option<i64>), Option<Fault>> {
    let (mut mkstream, mut entries_read) = (false, None);
    if !matches!(sub, "create" | "setid") {
        return Ok((false, None));
    }
    let mut i = 5;
    while i < args.len() {
        if sub == "create" && is(&args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if is(&args[i], "entriesread") && i + 1 < args.len() {
            let read = parse_int(&args[i + 1]).map_err(Some)?;
            if read < -1 {
                return Err(Some(Fault::err(
                    "ERR value for ENTRIESREAD must be positive or -1",
                )));
            }
            entries_read = Some(read).filter(|read| *read >= 0);
            i += 2;
        } else {
            return Err(None);
        }
    }
    Ok((mkstream, entries_read))
}

fn create_group(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    meta: Option<KeyMeta>,
    exists: bool,
    entries_read: Option<i64>,
) -> Outcome {
    let (key, group) = (&args[2], &args[3]);
    let id = match (args[4].as_slice(), &meta) {
        (b"$", Some(meta)) => StreamId::last_of(meta),
        (b"$", None) => StreamId::MIN,
        (id, _) => parse_strict_id(id)?,
    };
    let meta = match meta {
        Some(meta) => meta,
        None => {
            // MKSTREAM: the empty stream, saved now that nothing can fail.
            let mut meta = ctx.meta_for_write(key, Kind::Stream)?;
            ctx.save(key, &mut meta)?;
            meta
        }
    };
    if exists {
        return Err(Fault::err("BUSYGROUP Consumer Group name already exists"));
    }
    ctx.ks.put_group(ctx.txn, meta.id, group, id)?;
    ctx.ks
        .put_entries_read(ctx.txn, meta.id, group, entries_read)?;
    ctx.notify(notifications::STREAM, "xgroup-create", key);
    Ok(Reply::ok())
}

/// DELCONSUMER: how many pending entries the consumer had (dropped with it); `None` if
/// there was no such consumer.
fn delete_consumer(
    ctx: &mut Ctx,
    key: &[u8],
    mut meta: KeyMeta,
    group: &[u8],
    consumer: &[u8],
) -> Result<Option<i64>, Fault> {
    check_name(consumer, "consumer")?;
    if ctx
        .ks
        .consumer_seen(ctx.txn, meta.id, group, consumer)?
        .is_none()
    {
        return Ok(None);
    }
    let all = (StreamId::MIN, StreamId::MAX);
    let owned = ctx
        .ks
        .pending_range(ctx.txn, meta.id, group, all, usize::MAX, |p| {
            p.consumer == consumer
        })?;
    if ctx.rebuilds_removals {
        rebuild_without(ctx, key, &mut meta, GroupRows::Consumer(group, consumer))?;
    } else {
        for entry in &owned {
            ctx.ks.delete_pending(ctx.txn, meta.id, group, entry.id)?;
        }
        ctx.ks.delete_consumer(ctx.txn, meta.id, group, consumer)?;
    }
    Ok(Some(owned.len() as i64))
}

/// Removes `rows` from the stream `key` (`meta`, saved with its new owner) in an attempt
/// after one refused as larger than a commit may be: the stream is rebuilt under a new
/// owner from every other row and the old one queued for the lazy free, as XTRIM rebuilds
/// (`rebuild.rs`), since deleting the rows would be as large again. Unlike the deletion,
/// this changes the key's row (its owner), which a WATCH of the stream sees.
fn rebuild_without(
    ctx: &mut Ctx,
    key: &[u8],
    meta: &mut KeyMeta,
    rows: GroupRows,
) -> Result<(), Fault> {
    let to = ctx.ks.new_version();
    super::keys::copy_elements(ctx, meta, to, |table, row| rows.keeps(table, row))?;
    ctx.ks.queue_garbage(ctx.txn, meta.id, meta.kind)?;
    meta.id = to;
    ctx.save(key, meta)
}

// ---------------------------------------------------------------------------------------
// XREADGROUP

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS key
/// [key …] id [id …], run once: new entries for `>` (delivered to the consumer, pending
/// unless NOACK), else the consumer's pending entries after the ID. A nil array when `>`
/// finds nothing on every stream: the server blocks a client with BLOCK on it.
pub fn xreadgroup(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let read = parse_read(args, true)?;
    let (group, consumer) = read.group.ok_or_else(|| wrong_arity(args))?;
    check_name(group, "group")?;
    check_name(consumer, "consumer")?;
    let mut targets = Vec::with_capacity(read.keys.len());
    for (key, id) in read.keys.iter().zip(read.ids) {
        let meta = read_target(ctx, key, group)?;
        let after = match id.as_slice() {
            b"$" => return Err(Fault::err(
                "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
            )),
            b">" => None,
            // Redis reads `>` as this ID, so naming it is asking for new entries too.
            id => Some(parse_strict_id(id)?).filter(|after| *after != StreamId::MAX),
        };
        targets.push((key, meta, after));
    }
    let mut streams = Vec::new();
    for (key, meta, after) in targets {
        // Redis looks each stream up again (a read) as it serves it.
        ctx.count_lookup(key, true);
        let served = match after {
            Some(after) => Some(history(ctx, key, &meta, (group, consumer), after, &read)?),
            None => deliver_new(ctx, key, &meta, (group, consumer), &read)?,
        };
        if let Some(entries) = served {
            streams.push((bulk(key.clone()), Reply::Array(entries)));
        }
    }
    if streams.is_empty() {
        return Ok(Reply::NullArray);
    }
    Ok(Reply::Keyed(streams))
}

/// The stream at `key` that XREADGROUP reads with `group`, which it must have: else
/// Redis's NOGROUP, or, when a blocked XREADGROUP runs again and finds its stream or group
/// gone, the errors Redis unblocks it with.
fn read_target(ctx: &mut Ctx, key: &[u8], group: &[u8]) -> Result<KeyMeta, Fault> {
    let looked_up = ctx.read_meta(key)?;
    // A key deleted, or replaced by one of another kind, is no longer the stream waited on.
    let stream_gone = looked_up
        .as_ref()
        .is_none_or(|meta| meta.kind != Kind::Stream);
    if stream_gone && ctx.is_blocked_rerun() {
        return Err(Fault::err("UNBLOCKED the stream key no longer exists"));
    }
    let meta = super::of_kind(looked_up, Kind::Stream)?;
    let found = match &meta {
        Some(meta) => ctx.ks.group(ctx.txn, meta.id, group)?.is_some(),
        None => false,
    };
    match meta.filter(|_| found) {
        Some(meta) => Ok(meta),
        None if ctx.is_blocked_rerun() => Err(Fault::err(
            "NOGROUP the consumer group this client was blocked on no longer exists",
        )),
        None => Err(Fault::err(format!(
            "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(group)
        ))),
    }
}

/// The consumer's pending entries after `after` (each delivered again: its delivery time
/// and count move on; one deleted from the stream since comes as `[id, nil]`).
fn history(
    ctx: &mut Ctx,
    key: &[u8],
    meta: &KeyMeta,
    (group, consumer): (&[u8], &[u8]),
    after: StreamId,
    read: &ReadArgs,
) -> Result<Vec<Reply>, Fault> {
    touch_consumer(ctx, key, meta.id, group, consumer)?;
    let Some(first) = after.next() else {
        return Ok(Vec::new());
    };
    let mut owned = ctx.ks.pending_range(
        ctx.txn,
        meta.id,
        group,
        (first, StreamId::MAX),
        usize::MAX,
        |p| p.consumer == consumer,
    )?;
    owned.truncate(read.limit());
    let mut replies = Vec::with_capacity(owned.len());
    for mut pending in owned {
        match entry(ctx, meta.id, pending.id)? {
            Some(found) => {
                pending.delivered_at = ctx.now;
                // RETRYCOUNT may have set any count; Redis's increment wraps.
                pending.deliveries = pending.deliveries.wrapping_add(1);
                ctx.ks.put_pending(ctx.txn, meta.id, group, &pending)?;
                replies.push(found);
            }
            None => replies.push(Reply::Array(vec![
                bulk(pending.id.to_string()),
                Reply::NullArray,
            ])),
        }
    }
    Ok(replies)
}

/// The entries after the group's last delivered ID, delivered to the consumer; `None` if
/// there are none. The ID is read now, not when the command's keys were checked: a key
/// named twice is served twice, the second time after what the first delivered.
fn deliver_new(
    ctx: &mut Ctx,
    key: &[u8],
    meta: &KeyMeta,
    (group, consumer): (&[u8], &[u8]),
    read: &ReadArgs,
) -> Result<Option<Vec<Reply>>, Fault> {
    let last = ctx
        .ks
        .group(ctx.txn, meta.id, group)?
        .ok_or_else(|| no_group(key, group))?;
    let Some(first) = last.next() else {
        return Ok(None);
    };
    let found = ctx.ks.fields_range(
        ctx.txn,
        meta.id,
        &first.field(),
        &StreamId::MAX.field(),
        ScanDirection::Ascending,
        read.limit(),
    )?;
    if found.is_empty() {
        return Ok(None);
    }
    touch_consumer(ctx, key, meta.id, group, consumer)?;
    let position = ctx.ks.stream_position(ctx.txn, meta)?;
    let mut entries_read = ctx.ks.entries_read(ctx.txn, meta.id, group)?;
    let mut replies = Vec::with_capacity(found.len());
    let mut newest = last;
    for (field, stored) in found {
        let id = StreamId::of_field(&field)?;
        entries_read = position.read_after_delivering(entries_read, id);
        if !read.noack {
            let pending = Pending {
                id,
                consumer: consumer.to_vec(),
                delivered_at: ctx.now,
                deliveries: 1,
            };
            ctx.ks.put_pending(ctx.txn, meta.id, group, &pending)?;
        }
        newest = newest.max(id);
        replies.push(entry_reply(id, &stored)?);
    }
    ctx.ks.put_group(ctx.txn, meta.id, group, newest)?;
    ctx.ks
        .put_entries_read(ctx.txn, meta.id, group, entries_read)?;
    Ok(Some(replies))
}

// ---------------------------------------------------------------------------------------
// XACK and XPENDING

/// XACK key group id [id …]: how many of the entries were pending (0 without the stream
/// or the group, whatever the IDs).
pub fn xack(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, group) = (&args[1], &args[2]);
    check_name(group, "group")?;
    // A read lookup, as Redis's XACK makes.
    let Some(meta) = ctx.read_meta_of(key, Kind::Stream)? else {
        return Ok(Reply::Int(0));
    };
    if ctx.ks.group(ctx.txn, meta.id, group)?.is_none() {
        return Ok(Reply::Int(0));
    }
    let ids = args[3..]
        .iter()
        .map(|arg| parse_strict_id(arg))
        .collect::<Result<Vec<_>, _>>()?;
    let mut acknowledged = 0;
    for id in ids {
        if ctx.ks.pending(ctx.txn, meta.id, group, id)?.is_some() {
            ctx.ks.delete_pending(ctx.txn, meta.id, group, id)?;
            acknowledged += 1;
        }
    }
    Ok(Reply::Int(acknowledged))
}

/// XPENDING's range form: its IDs, count, minimum idle time and consumer.
struct PendingQuery<'a> {
    range: (StreamId, StreamId),
    count: usize,
    min_idle: i64,
    consumer: Option<&'a [u8]>,
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
pub fn xpending(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    if args.len() != 3 && !(6..=9).contains(&args.len()) {
        return Err(Fault::err(SYNTAX));
    }
    let query = if args.len() >= 6 {
        Some(pending_query(args)?)
    } else {
        None
    };
    let (key, group) = (&args[1], &args[2]);
    let (meta, _) = stream_group(ctx, key, group)?;
    match query {
        None => pending_summary(ctx, meta.id, group),
        Some(query) => pending_entries(ctx, meta.id, group, &query),
    }
}

fn pending_query(args: &[Vec<u8>]) -> Result<PendingQuery<'_>, Fault> {
    let mut at = 3;
    let mut min_idle = 0;
    if is(&args[3], "idle") {
        min_idle = parse_int(&args[4])?;
        if args.len() < 8 {
            return Err(Fault::err(SYNTAX));
        }
        at += 2;
    }
    let count = parse_int(&args[at + 2])?.max(0);
    let range = parse_interval(&args[at], &args[at + 1])?;
    Ok(PendingQuery {
        range,
        count: usize::try_from(count).unwrap_or(usize::MAX),
        min_idle,
        consumer: args.get(at + 3).map(Vec::as_slice),
    })
}

/// The summary: how many entries are pending, the first and last, and how many each
/// consumer has (consumers with none left out).
fn pending_summary(ctx: &mut Ctx, owner: i64, group: &[u8]) -> Outcome {
    let pending = ctx.ks.all_pending(ctx.txn, owner, group)?;
    let (Some(first), Some(last)) = (pending.first(), pending.last()) else {
        return Ok(Reply::Array(vec![
            Reply::Int(0),
            Reply::Null,
            Reply::Null,
            Reply::NullArray,
        ]));
    };
    let mut per_consumer = std::collections::BTreeMap::<&[u8], i64>::new();
    for entry in &pending {
        *per_consumer.entry(&entry.consumer).or_default() += 1;
    }
    let consumers = per_consumer
        .into_iter()
        .map(|(name, count)| Reply::Array(vec![bulk(name), bulk(count.to_string())]))
        .collect();
    Ok(Reply::Array(vec![
        Reply::Int(pending.len() as i64),
        bulk(first.id.to_string()),
        bulk(last.id.to_string()),
        Reply::Array(consumers),
    ]))
}

/// The pending entries in the query's range: `[id, consumer, idle ms, deliveries]` each.
fn pending_entries(ctx: &mut Ctx, owner: i64, group: &[u8], query: &PendingQuery) -> Outcome {
    if let Some(consumer) = query.consumer {
        check_name(consumer, "consumer")?;
        if ctx
            .ks
            .consumer_seen(ctx.txn, owner, group, consumer)?
            .is_none()
        {
            return Ok(Reply::Array(Vec::new()));
        }
    }
    let now = ctx.now;
    let filtered = query.consumer.is_some() || query.min_idle != 0;
    let rows = if filtered { usize::MAX } else { query.count };
    let mut found = ctx
        .ks
        .pending_range(ctx.txn, owner, group, query.range, rows, |p| {
            query.consumer.is_none_or(|c| p.consumer == c)
                && (query.min_idle == 0 || now - p.delivered_at >= query.min_idle)
        })?;
    found.truncate(query.count);
    let replies = found
        .into_iter()
        .map(|p| {
            Reply::Array(vec![
                bulk(p.id.to_string()),
                bulk(p.consumer),
                Reply::Int((now - p.delivered_at).max(0)),
                Reply::Int(p.deliveries),
            ])
        })
        .collect();
    Ok(Reply::Array(replies))
}

// ---------------------------------------------------------------------------------------
// XCLAIM and XAUTOCLAIM

/// How XCLAIM and XAUTOCLAIM hand a pending entry to a consumer.
struct Claim<'a> {
    key: &'a [u8],
    owner: i64,
    group: &'a [u8],
    consumer: &'a [u8],
    /// The delivery time the entry gets.
    delivered_at: i64,
    /// Deliveries it gets (`None`: one more, or as many as before with JUSTID).
    deliveries: Option<i64>,
    just_id: bool,
    /// Whether the consumer was made to exist (once per command).
    touched: bool,
}

impl Claim<'_> {
    /// Gives `pending` to the consumer; its reply: the ID with JUSTID, else the entry.
    fn take(&mut self, ctx: &mut Ctx, mut pending: Pending) -> Result<Reply, Fault> {
        if !self.touched {
            touch_consumer(ctx, self.key, self.owner, self.group, self.consumer)?;
            self.touched = true;
        }
        pending.consumer = self.consumer.to_vec();
        pending.delivered_at = self.delivered_at;
        pending.deliveries = match self.deliveries {
            Some(count) => count,
            None if self.just_id => pending.deliveries,
            None => pending.deliveries.wrapping_add(1),
        };
        ctx.ks
            .put_pending(ctx.txn, self.owner, self.group, &pending)?;
        if self.just_id {
            return Ok(bulk(pending.id.to_string()));
        }
        Ok(entry(ctx, self.owner, pending.id)?.unwrap_or(Reply::Null))
    }
}

/// XCLAIM's options after its IDs.
#[derive(Default)]
struct ClaimOptions {
    force: bool,
    just_id: bool,
    /// IDLE's or TIME's delivery time.
    delivered_at: Option<i64>,
    retry_count: Option<i64>,
    last_id: Option<StreamId>,
}

fn claim_options(args: &[Vec<u8>], now: i64) -> Result<ClaimOptions, Fault> {
    let mut options = ClaimOptions::default();
    let number = |arg: &[u8], option: &str| {
        parse_int(arg)
            .map_err(|_| Fault::err(format!("ERR Invalid {option} option argument for XCLAIM")))
    };
    let mut i = 0;
    while i < args.len() {
        let more = i + 1 < args.len();
        let option = args[i].as_slice();
        if is(option, "force") {
            options.force = true;
        } else if is(option, "justid") {
            options.just_id = true;
        } else if is(option, "idle") && more {
            i += 1;
            // Any IDLE is taken, as Redis takes it: its subtraction wraps.
            options.delivered_at = Some(now.wrapping_sub(number(&args[i], "IDLE")?));
        } else if is(option, "time") && more {
            i += 1;
            options.delivered_at = Some(number(&args[i], "TIME")?);
        } else if is(option, "retrycount") && more {
            i += 1;
            options.retry_count = Some(number(&args[i], "RETRYCOUNT")?);
        } else if is(option, "lastid") && more {
            i += 1;
            options.last_id = Some(parse_strict_id(&args[i])?);
        } else {
            return Err(Fault::err(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(option)
            )));
        }
        i += 1;
    }
    Ok(options)
}

/// XCLAIM key group consumer min-idle-time id [id …] [IDLE ms] [TIME ms] [RETRYCOUNT n]
/// [FORCE] [JUSTID] [LASTID id]
pub fn xclaim(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    let (meta, last) = stream_group(ctx, key, group)?;
    check_name(consumer, "consumer")?;
    let min_idle = parse_int(&args[4])
        .map_err(|_| Fault::err("ERR Invalid min-idle-time argument for XCLAIM"))?
        .max(0);
    let ids: Vec<StreamId> = args[5..]
        .iter()
        .map_while(|arg| parse_strict_id(arg).ok())
        .collect();
    let now = ctx.now;
    let options = claim_options(&args[5 + ids.len()..], now)?;
    if let Some(last_id) = options.last_id.filter(|&id| id > last) {
        ctx.ks.put_group(ctx.txn, meta.id, group, last_id)?;
    }
    let delivered_at = options
        .delivered_at
        .filter(|&at| (0..=now).contains(&at))
        .unwrap_or(now);
    let mut claim = Claim {
        key,
        owner: meta.id,
        group,
        consumer,
        delivered_at,
        deliveries: options.retry_count.filter(|&count| count >= 0),
        just_id: options.just_id,
        touched: false,
    };
    let mut replies = Vec::new();
    for id in ids {
        let pending = ctx.ks.pending(ctx.txn, meta.id, group, id)?;
        if !entry_exists(ctx, meta.id, id)? {
            if pending.is_some() {
                ctx.ks.delete_pending(ctx.txn, meta.id, group, id)?;
            }
            continue;
        }
        let pending = match pending {
            Some(pending) => {
                if min_idle != 0 && now - pending.delivered_at < min_idle {
                    continue;
                }
                pending
            }
            // FORCE makes an entry pending that was not (Redis's new entries start at one
            // delivery, and the claim adds one).
            None if options.force => Pending {
                id,
                consumer: Vec::new(),
                delivered_at: now,
                deliveries: 1,
            },
            None => continue,
        };
        replies.push(claim.take(ctx, pending)?);
    }
    Ok(Reply::Array(replies))
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]: the cursor to
/// resume at (0-0: the end), the entries claimed, and the IDs of the pending entries it
/// found deleted from the stream (and dropped).
pub fn xautoclaim(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    // Redis looks the key up before it reads the other arguments.
    let looked_up = ctx.read_meta(key)?;
    let min_idle = parse_int(&args[4])
        .map_err(|_| Fault::err("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?
        .max(0);
    let start = parse_range_start(&args[5])?;
    let (count, just_id) = autoclaim_options(&args[6..])?;
    let (meta, _) = group_of(ctx, key, looked_up, group)?;
    check_name(consumer, "consumer")?;
    let now = ctx.now;
    let attempts = count.saturating_mul(ATTEMPTS_PER_CLAIM);
    // One more than the attempts: the one after them is the cursor.
    let mut candidates = ctx
        .ks
        .pending_range(
            ctx.txn,
            meta.id,
            group,
            (start, StreamId::MAX),
            attempts.saturating_add(1),
            |_| true,
        )?
        .into_iter();
    let mut claim = Claim {
        key,
        owner: meta.id,
        group,
        consumer,
        delivered_at: now,
        deliveries: None,
        just_id,
        touched: false,
    };
    let (mut claimed, mut deleted, mut left) = (Vec::new(), Vec::new(), count);
    let mut cursor = StreamId::MIN;
    for (tried, pending) in candidates.by_ref().enumerate() {
        if tried == attempts || left == 0 {
            cursor = pending.id;
            break;
        }
        if !entry_exists(ctx, meta.id, pending.id)? {
            ctx.ks.delete_pending(ctx.txn, meta.id, group, pending.id)?;
            deleted.push(bulk(pending.id.to_string()));
            left -= 1;
            continue;
        }
        if min_idle != 0 && now - pending.delivered_at < min_idle {
            continue;
        }
        claimed.push(claim.take(ctx, pending)?);
        left -= 1;
    }
    Ok(Reply::Array(vec![
        bulk(cursor.to_string()),
        Reply::Array(claimed),
        Reply::Array(deleted),
    ]))
}

fn autoclaim_options(args: &[Vec<u8>]) -> Result<(usize, bool), Fault> {
    let (mut count, mut just_id) = (100, false);
    let mut i = 0;
    while i < args.len() {
        if is(&args[i], "count") && i + 1 < args.len() {
            let limit = i64::MAX / ATTEMPTS_PER_CLAIM.max(16) as i64;
            count = parse_int(&args[i + 1])
                .ok()
                .filter(|c| (1..=limit).contains(c))
                .ok_or_else(|| Fault::err("ERR COUNT must be > 0"))? as usize;
            i += 1;
        } else if is(&args[i], "justid") {
            just_id = true;
        } else {
            return Err(Fault::err(SYNTAX));
        }
        i += 1;
    }
    Ok((count, just_id))
}
