//! Hash commands: HSET, HGET and friends, counters, HSCAN.
//!
//! Each field's value is stored under (owner, field) in `kv_parts`, so a value may be of
//! any size; the key's `len` counts the fields.

use tailstore_resp::{format_human, Reply};
use tailstore_storage::ScanDirection;

use super::keys::{collection_pattern, parse_cursor};
use super::pattern::matches;
use super::random::{by_position, parse_count_with, pick_by_count, pick_by_position, pick_one};
use super::rebuild::{remove_named, Elements};
use super::{bulk, is, parse_int, parse_long_double, Ctx, Fault, Outcome};
use crate::keyspace::notifications;
use crate::keyspace::{KeyMeta, Kind, MAX_FIELD};

/// Hash fields and (sorted-)set members are B+tree key columns: longer ones are refused up
/// front, as [`super::check_key`] does for keys. `what` names the thing ("field", "member").
pub(super) fn check_field(field: &[u8], what: &str) -> Result<(), Fault> {
    if field.len() > MAX_FIELD {
        return Err(Fault::err(format!(
            "ERR {what} is longer than tailstore's limit of {MAX_FIELD} bytes"
        )));
    }
    Ok(())
}

/// Redis's reply to a command whose argument count is wrong in a way the table's arity
/// cannot express (an odd number of field/value arguments…).
pub(super) fn wrong_arity(args: &[Vec<u8>]) -> Fault {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    Fault::err(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// (field, value) pairs.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Every (field, value) of a hash, in field order.
pub(super) fn all_fields(ctx: &mut Ctx, owner: i64) -> Result<Fields, Fault> {
    ctx.ks
        .fields(ctx.txn, owner, ScanDirection::Ascending, usize::MAX)
}

/// Sets `field` of the hash whose meta is `meta` to `value`; true if it is new.
fn put_field(ctx: &mut Ctx, meta: &mut KeyMeta, field: &[u8], value: &[u8]) -> Result<bool, Fault> {
    // Reads see the transaction's own writes: a field named twice in one HSET is new once.
    let old = ctx.ks.value_len(ctx.txn, meta.id, field)?;
    ctx.ks.write_value(ctx.txn, meta.id, field, value, old)?;
    if old.is_none() {
        meta.len += 1;
    }
    Ok(old.is_none())
}

/// HSET key field value [field value …]: the number of fields added.
pub fn hset(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(Reply::Int(set_fields(ctx, args)?))
}

/// HMSET key field value [field value …]: HSET answering OK.
pub fn hmset(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    set_fields(ctx, args)?;
    Ok(Reply::ok())
}

fn set_fields(ctx: &mut Ctx, args: &[Vec<u8>]) -> Result<i64, Fault> {
    let pairs = &args[2..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(wrong_arity(args));
    }
    for pair in pairs.chunks(2) {
        check_field(&pair[0], "field")?;
    }
    let key = &args[1];
    let mut meta = ctx.meta_for_write(key, Kind::Hash)?;
    let mut added = 0;
    for pair in pairs.chunks(2) {
        added += i64::from(put_field(ctx, &mut meta, &pair[0], &pair[1])?);
    }
    ctx.save(key, &mut meta)?;
    ctx.notify(notifications::HASH, "hset", key);
    Ok(added)
}

pub fn hsetnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, field) = (&args[1], &args[2]);
    check_field(field, "field")?;
    if let Some(meta) = ctx.meta_of(key, Kind::Hash)? {
        if ctx.ks.value_len(ctx.txn, meta.id, field)?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    let mut meta = ctx.meta_for_write(key, Kind::Hash)?;
    put_field(ctx, &mut meta, field, &args[3])?;
    ctx.save(key, &mut meta)?;
    ctx.notify(notifications::HASH, "hset", key);
    Ok(Reply::Int(1))
}

/// The value of `field` in the hash `key`; `None` if either is missing.
pub(super) fn field_value(
    ctx: &mut Ctx,
    key: &[u8],
    field: &[u8],
) -> Result<Option<Vec<u8>>, Fault> {
    check_field(field, "field")?;
    let Some(meta) = ctx.meta_of(key, Kind::Hash)? else {
        return Ok(None);
    };
    ctx.ks.read_value(ctx.txn, meta.id, field, None)
}

pub fn hget(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(field_value(ctx, &args[1], &args[2])?.map_or(Reply::Null, bulk))
}

pub fn hmget(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    for field in &args[2..] {
        check_field(field, "field")?;
    }
    let owner = ctx.meta_of(key, Kind::Hash)?.map(|m| m.id);
    let mut replies = Vec::with_capacity(args.len() - 2);
    for field in &args[2..] {
        let value = match owner {
            Some(owner) => ctx.ks.read_value(ctx.txn, owner, field, None)?,
            None => None,
        };
        replies.push(value.map_or(Reply::Null, bulk));
    }
    Ok(Reply::Array(replies))
}

/// HGETALL: a map in RESP3, field/value pairs flattened in RESP2 (the encoder's job).
pub fn hgetall(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let Some(meta) = ctx.meta_of(key, Kind::Hash)? else {
        return Ok(Reply::Map(Vec::new()));
    };
    let pairs = all_fields(ctx, meta.id)?
        .into_iter()
        .map(|(field, value)| (bulk(field), bulk(value)))
        .collect();
    Ok(Reply::Map(pairs))
}

pub fn hkeys(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let Some(meta) = ctx.meta_of(key, Kind::Hash)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let fields = all_fields(ctx, meta.id)?;
    Ok(Reply::Array(
        fields.into_iter().map(|(f, _)| bulk(f)).collect(),
    ))
}

pub fn hvals(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let Some(meta) = ctx.meta_of(key, Kind::Hash)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let fields = all_fields(ctx, meta.id)?;
    Ok(Reply::Array(
        fields.into_iter().map(|(_, v)| bulk(v)).collect(),
    ))
}

pub fn hdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    for field in &args[2..] {
        check_field(field, "field")?;
    }
    let Some(mut meta) = ctx.meta_of(key, Kind::Hash)? else {
        return Ok(Reply::Int(0));
    };
    let removed = remove_named(ctx, &mut meta, &args[2..], Elements::Values)?;
    if removed > 0 {
        meta.len -= removed;
        // Before the save, whose deletion of an emptied hash is told after it, as Redis.
        ctx.notify(notifications::HASH, "hdel", key);
        ctx.save(key, &mut meta)?;
    }
    Ok(Reply::Int(removed))
}

pub fn hexists(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, field) = (&args[1], &args[2]);
    check_field(field, "field")?;
    let Some(meta) = ctx.meta_of(key, Kind::Hash)? else {
        return Ok(Reply::Int(0));
    };
    let found = ctx.ks.value_len(ctx.txn, meta.id, field)?.is_some();
    Ok(Reply::Int(i64::from(found)))
}

pub fn hlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(Reply::Int(
        ctx.meta_of(&args[1], Kind::Hash)?.map_or(0, |m| m.len),
    ))
}

pub fn hstrlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, field) = (&args[1], &args[2]);
    check_field(field, "field")?;
    let Some(meta) = ctx.meta_of(key, Kind::Hash)? else {
        return Ok(Reply::Int(0));
    };
    let len = ctx.ks.value_len(ctx.txn, meta.id, field)?.unwrap_or(0);
    Ok(Reply::Int(len as i64))
}

pub fn hincrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, field) = (&args[1], &args[2]);
    let delta = parse_int(&args[3])?;
    let current = match field_value(ctx, key, field)? {
        None => 0,
        Some(value) => {
            parse_int(&value).map_err(|_| Fault::err("ERR hash value is not an integer"))?
        }
    };
    let next = current
        .checked_add(delta)
        .ok_or_else(|| Fault::err("ERR increment or decrement would overflow"))?;
    let mut meta = ctx.meta_for_write(key, Kind::Hash)?;
    put_field(ctx, &mut meta, field, next.to_string().as_bytes())?;
    ctx.save(key, &mut meta)?;
    ctx.notify(notifications::HASH, "hincrby", key);
    Ok(Reply::Int(next))
}

pub fn hincrbyfloat(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, field) = (&args[1], &args[2]);
    let delta = parse_long_double(&args[3])?;
    if delta.is_infinite() {
        return Err(Fault::err("ERR value is NaN or Infinity"));
    }
    let current = match field_value(ctx, key, field)? {
        None => 0.0,
        Some(value) => {
            parse_long_double(&value).map_err(|_| Fault::err("ERR hash value is not a float"))?
        }
    };
    let next = current + delta;
    if !next.is_finite() {
        return Err(Fault::err("ERR increment would produce NaN or Infinity"));
    }
    let text = format_human(next);
    let mut meta = ctx.meta_for_write(key, Kind::Hash)?;
    put_field(ctx, &mut meta, field, text.as_bytes())?;
    ctx.save(key, &mut meta)?;
    ctx.notify(notifications::HASH, "hincrbyfloat", key);
    Ok(bulk(text))
}

/// The options of HSCAN / SSCAN / ZSCAN after the cursor: MATCH, COUNT and (HSCAN only,
/// Redis 7.4) NOVALUES. Returns the pattern and whether NOVALUES was given.
pub(super) fn collection_scan_options(
    args: &[Vec<u8>],
    allow_novalues: bool,
) -> Result<(Option<Vec<u8>>, bool), Fault> {
    let mut novalues = false;
    let mut rest = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        if allow_novalues && is(&args[i], "NOVALUES") {
            novalues = true;
            i += 1;
            continue;
        }
        rest.extend(args[i..].iter().take(2).cloned());
        i += 2;
    }
    // COUNT is only a hint: the whole collection comes back in one call (cursor 0), as Redis
    // does for a collection in its compact encoding.
    Ok((collection_pattern(&rest)?, novalues))
}

/// The reply of a *SCAN over a collection answered in one call.
pub(super) fn scan_reply(items: Vec<Reply>) -> Reply {
    Reply::Array(vec![bulk("0"), Reply::Array(items)])
}

/// HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]: the whole hash in one call,
/// whatever the cursor (Redis does this for small hashes; any cursor is answered with the
/// full result and cursor 0).
pub fn hscan(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    parse_cursor(&args[2])?;
    let key = &args[1];
    let Some(meta) = ctx.meta_of(key, Kind::Hash)? else {
        return Ok(scan_reply(Vec::new()));
    };
    let (pattern, novalues) = collection_scan_options(&args[3..], true)?;
    let mut items = Vec::new();
    for (field, value) in all_fields(ctx, meta.id)? {
        if pattern.as_deref().is_some_and(|p| !matches(p, &field)) {
            continue;
        }
        items.push(bulk(field));
        if !novalues {
            items.push(bulk(value));
        }
    }
    Ok(scan_reply(items))
}

/// `count` random fields of the hash `meta` with their values, as [`pick_by_position`]
/// picks them, when [`by_position`] says so and every value is one part row: then positions
/// over rows are positions over fields. `None` otherwise: a value of several rows would be
/// drawn once per row, so those hashes are read whole.
fn fields_by_position(ctx: &mut Ctx, meta: &KeyMeta, count: i64) -> Result<Option<Fields>, Fault> {
    if !by_position(meta.len, count.unsigned_abs())
        || ctx.ks.part_rows(ctx.txn, meta.id)? != meta.len as usize
    {
        return Ok(None);
    }
    let picked = pick_by_position(meta.len as usize, count, |positions| {
        ctx.ks.field_values_at(ctx.txn, meta.id, positions)
    })?;
    Ok(Some(picked))
}

/// HRANDFIELD key [count [WITHVALUES]]: one random field, or by a count as SRANDMEMBER
/// picks members (with values: [field, value] pairs in RESP3, flat in RESP2).
pub fn hrandfield(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let count = parse_count_with(&args[2..], "withvalues")?;
    let Some(meta) = ctx.meta_of(&args[1], Kind::Hash)? else {
        return Ok(count.map_or(Reply::Null, |_| Reply::Array(Vec::new())));
    };
    let picks = count.map_or(1, |(count, _)| count);
    if let Some(picked) = fields_by_position(ctx, &meta, picks)? {
        return Ok(match count {
            None => picked
                .into_iter()
                .next()
                .map_or(Reply::Null, |(field, _)| bulk(field)),
            Some((_, true)) => Reply::Pairs(
                picked
                    .into_iter()
                    .map(|(f, v)| (bulk(f), bulk(v)))
                    .collect(),
            ),
            Some((_, false)) => Reply::Array(picked.into_iter().map(|(f, _)| bulk(f)).collect()),
        });
    }
    let all = all_fields(ctx, meta.id)?;
    let Some((count, with_values)) = count else {
        return Ok(pick_one(all).map_or(Reply::Null, |(field, _)| bulk(field)));
    };
    Ok(if with_values {
        let (picks, _) = pick_by_count(all, count)?;
        Reply::Pairs(picks.into_iter().map(|(f, v)| (bulk(f), bulk(v))).collect())
    } else {
        // The values dropped before the picks: a negative count repeats what it picks, up
        // to millions of times, and a copy of a long value each time exhausted the memory.
        let fields = all.into_iter().map(|(f, _)| f).collect();
        let (picks, _) = pick_by_count(fields, count)?;
        Reply::Array(picks.into_iter().map(bulk).collect())
    })
}
