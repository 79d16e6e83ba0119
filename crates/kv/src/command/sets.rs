//! Set commands: SADD, SREM, membership, random members, SINTER / SUNION / SDIFF.
//!
//! A member is a field of the key in `kv_parts` with an empty value; the key's `len` counts
//! the members. Members come back in byte order (Redis's order is its hash table's).

use std::collections::BTreeSet;

use tailstore_resp::Reply;
use tailstore_storage::ScanDirection;

use super::hashes::{check_field, collection_scan_options, scan_reply, wrong_arity};
use super::keys::parse_cursor;
use super::lists::parse_count;
use super::pattern::matches;
use super::random::{
    by_position, parse_random_count, pick_by_count, pick_by_position, pick_one, Rng,
};
use super::rebuild::{remove_held, remove_named, Elements};
use super::{bulk, is, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::notifications;
use crate::keyspace::{KeyMeta, Kind};

/// Every member of the set `key` (which exists), in byte order.
pub(super) fn members(ctx: &mut Ctx, owner: i64) -> Result<Vec<Vec<u8>>, Fault> {
    let fields = ctx
        .ks
        .fields(ctx.txn, owner, ScanDirection::Ascending, usize::MAX)?;
    if fields.is_empty() {
        // An empty set is deleted with its last member: its key's row is then stale or
        // damaged, and the random picks below would divide by zero.
        return Err(Fault::corrupt(format!("set {owner} has no members")));
    }
    Ok(fields.into_iter().map(|(member, _)| member).collect())
}

fn is_member(ctx: &mut Ctx, owner: i64, member: &[u8]) -> Result<bool, Fault> {
    Ok(ctx.ks.value_len(ctx.txn, owner, member)?.is_some())
}

/// Adds `member` to the set; true if it was not there.
fn add_member(ctx: &mut Ctx, meta: &mut KeyMeta, member: &[u8]) -> Result<bool, Fault> {
    if is_member(ctx, meta.id, member)? {
        return Ok(false);
    }
    ctx.ks.write_value(ctx.txn, meta.id, member, b"", None)?;
    meta.len += 1;
    Ok(true)
}

fn set_reply(members: impl IntoIterator<Item = Vec<u8>>) -> Reply {
    Reply::Set(members.into_iter().map(bulk).collect())
}

pub fn sadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    for member in &args[2..] {
        check_field(member, "member")?;
    }
    let key = &args[1];
    let mut meta = ctx.meta_for_write(key, Kind::Set)?;
    let mut added = 0;
    for member in &args[2..] {
        added += i64::from(add_member(ctx, &mut meta, member)?);
    }
    if added > 0 {
        ctx.save(key, &mut meta)?;
        ctx.notify(notifications::SET, "sadd", key);
    }
    Ok(Reply::Int(added))
}

pub fn srem(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    for member in &args[2..] {
        check_field(member, "member")?;
    }
    let key = &args[1];
    let Some(mut meta) = ctx.meta_of(key, Kind::Set)? else {
        return Ok(Reply::Int(0));
    };
    let removed = remove_named(ctx, &mut meta, &args[2..], Elements::Values)?;
    if removed > 0 {
        meta.len -= removed;
        ctx.notify(notifications::SET, "srem", key);
        ctx.save(key, &mut meta)?;
    }
    Ok(Reply::Int(removed))
}

/// SMEMBERS: a set in RESP3, an array in RESP2.
pub fn smembers(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let Some(meta) = ctx.meta_of(key, Kind::Set)? else {
        return Ok(Reply::Set(Vec::new()));
    };
    Ok(set_reply(members(ctx, meta.id)?))
}

pub fn sismember(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, member) = (&args[1], &args[2]);
    check_field(member, "member")?;
    let Some(meta) = ctx.meta_of(key, Kind::Set)? else {
        return Ok(Reply::Int(0));
    };
    Ok(Reply::Int(i64::from(is_member(ctx, meta.id, member)?)))
}

pub fn smismember(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    for member in &args[2..] {
        check_field(member, "member")?;
    }
    let owner = ctx.meta_of(key, Kind::Set)?.map(|m| m.id);
    let mut replies = Vec::with_capacity(args.len() - 2);
    for member in &args[2..] {
        let found = match owner {
            Some(owner) => is_member(ctx, owner, member)?,
            None => false,
        };
        replies.push(Reply::Int(i64::from(found)));
    }
    Ok(Reply::Array(replies))
}

pub fn scard(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(Reply::Int(
        ctx.meta_of(&args[1], Kind::Set)?.map_or(0, |m| m.len),
    ))
}

/// SPOP key [count]: one random member (bulk or nil); with a count, a set of up to `count`
/// distinct members.
pub fn spop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    if args.len() > 3 {
        return Err(Fault::err(SYNTAX));
    }
    let count = args.get(2).map(|arg| parse_count(arg)).transpose()?;
    let key = &args[1];
    let Some(mut meta) = ctx.meta_of(key, Kind::Set)? else {
        return Ok(count.map_or(Reply::Null, |_| Reply::Set(Vec::new())));
    };
    if count == Some(0) {
        return Ok(Reply::Set(Vec::new()));
    }
    if count.is_some_and(|c| c >= meta.len) {
        // Redis answers a count that takes every member with SMEMBERS's code, whose read
        // lookup counts a hit.
        ctx.count_lookup(key, true);
    }
    let picks = count.map_or(1, |c| c.unsigned_abs());
    let popped = if by_position(meta.len, picks) {
        members_by_position(ctx, &meta, picks as i64)?
    } else {
        let all = members(ctx, meta.id)?;
        let wanted = usize::try_from(picks).unwrap_or(usize::MAX).min(all.len());
        Rng::new().pick(all, wanted)
    };
    let held = popped.iter().map(Vec::as_slice);
    remove_held(ctx, &mut meta, held, Elements::Values)?;
    meta.len -= popped.len() as i64;
    ctx.notify(notifications::SET, "spop", key);
    ctx.save(key, &mut meta)?;
    Ok(match count {
        None => popped.into_iter().next().map_or(Reply::Null, bulk),
        Some(_) => set_reply(popped),
    })
}

/// SRANDMEMBER key [count]: one random member; with a positive count, up to `count`
/// distinct members; with a negative one, exactly `-count` members, repeats allowed.
pub fn srandmember(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    if args.len() > 3 {
        return Err(Fault::err(SYNTAX));
    }
    let count = args.get(2).map(|arg| parse_random_count(arg)).transpose()?;
    let key = &args[1];
    let Some(meta) = ctx.meta_of(key, Kind::Set)? else {
        return Ok(count.map_or(Reply::Null, |_| Reply::Array(Vec::new())));
    };
    let picks = count.map_or(1, i64::unsigned_abs);
    if by_position(meta.len, picks) {
        let picked = members_by_position(ctx, &meta, count.unwrap_or(1))?;
        return Ok(match count {
            None => picked.into_iter().next().map_or(Reply::Null, bulk),
            Some(_) => Reply::Array(picked.into_iter().map(bulk).collect()),
        });
    }
    let all = members(ctx, meta.id)?;
    let Some(count) = count else {
        return Ok(pick_one(all).map_or(Reply::Null, bulk));
    };
    // The whole set too is an array, as Redis 7.0.15 answers it (7.2 answers a RESP3 set).
    let (picks, _whole) = pick_by_count(all, count)?;
    Ok(Reply::Array(picks.into_iter().map(bulk).collect()))
}

/// `count` random members of the set `meta` ([`by_position`], [`pick_by_position`]). The
/// key's row was read (its count): a member added or removed meanwhile changed it, so the
/// positions need no validation of their own.
fn members_by_position(ctx: &mut Ctx, meta: &KeyMeta, count: i64) -> Result<Vec<Vec<u8>>, Fault> {
    pick_by_position(meta.len as usize, count, |positions| {
        ctx.ks.fields_at(ctx.txn, meta.id, positions)
    })
}

#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Inter,
    Union,
    Diff,
}

/// The members of the combination of the sets `keys` (missing keys are empty sets; every
/// key is type-checked first, as Redis does).
fn combine(ctx: &mut Ctx, keys: &[Vec<u8>], op: SetOp) -> Result<BTreeSet<Vec<u8>>, Fault> {
    let mut metas = Vec::with_capacity(keys.len());
    for key in keys {
        metas.push(ctx.read_meta_of(key, Kind::Set)?);
    }
    let mut result = BTreeSet::new();
    match op {
        SetOp::Inter => {
            if metas.iter().any(Option::is_none) {
                return Ok(result);
            }
            // Look the smallest set's members up in the others.
            let smallest = (0..keys.len())
                .min_by_key(|&i| metas[i].as_ref().map_or(0, |m| m.len))
                .unwrap_or(0);
            let owners: Vec<i64> = metas.iter().flatten().map(|m| m.id).collect();
            'members: for member in members(ctx, owners[smallest])? {
                for (i, &owner) in owners.iter().enumerate() {
                    if i != smallest && !is_member(ctx, owner, &member)? {
                        continue 'members;
                    }
                }
                result.insert(member);
            }
        }
        SetOp::Union => {
            for meta in metas.iter().flatten() {
                result.extend(members(ctx, meta.id)?);
            }
        }
        SetOp::Diff => {
            let Some(first) = &metas[0] else {
                return Ok(result);
            };
            result.extend(members(ctx, first.id)?);
            for meta in metas.iter().skip(1).flatten() {
                if result.is_empty() {
                    break;
                }
                let mut kept = BTreeSet::new();
                for member in result {
                    if !is_member(ctx, meta.id, &member)? {
                        kept.insert(member);
                    }
                }
                result = kept;
            }
        }
    }
    Ok(result)
}

pub fn sinter(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(set_reply(combine(ctx, &args[1..], SetOp::Inter)?))
}

/// SINTERCARD numkeys key [key …] [LIMIT limit]: the intersection's size, at most `limit`
/// (0: no limit).
pub fn sintercard(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let numkeys = parse_int(&args[1])
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Fault::err("ERR numkeys should be greater than 0"))?;
    let keys_end = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(2))
        .filter(|&end| end <= args.len())
        .ok_or_else(|| Fault::err("ERR Number of keys can't be greater than number of args"))?;
    let mut limit = 0;
    for option in args[keys_end..].chunks(2) {
        match option {
            [name, value] if is(name, "LIMIT") => {
                limit = parse_int(value)
                    .ok()
                    .filter(|&l| l >= 0)
                    .ok_or_else(|| Fault::err("ERR LIMIT can't be negative"))?;
            }
            _ => return Err(Fault::err(SYNTAX)),
        }
    }
    let found = combine(ctx, &args[2..keys_end], SetOp::Inter)?.len() as i64;
    Ok(Reply::Int(if limit == 0 {
        found
    } else {
        found.min(limit)
    }))
}

pub fn sunion(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(set_reply(combine(ctx, &args[1..], SetOp::Union)?))
}

pub fn sdiff(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(set_reply(combine(ctx, &args[1..], SetOp::Diff)?))
}

/// S*STORE destination key [key …]: replaces `destination` (whatever it held) with the
/// result; an empty result deletes it.
fn store(ctx: &mut Ctx, args: &[Vec<u8>], op: SetOp, event: &'static str) -> Outcome {
    if args.len() < 3 {
        return Err(wrong_arity(args));
    }
    let destination = &args[1];
    super::check_key(destination)?;
    let result = combine(ctx, &args[2..], op)?;
    let (old, mut meta) = ctx.replace(destination, Kind::Set)?;
    for member in &result {
        ctx.ks.write_value(ctx.txn, meta.id, member, b"", None)?;
    }
    meta.len = result.len() as i64;
    ctx.save(destination, &mut meta)?;
    let stored = !result.is_empty();
    ctx.notify_stored(
        (notifications::SET, event),
        destination,
        stored,
        old.is_some(),
    );
    Ok(Reply::Int(meta.len))
}

pub fn sinterstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    store(ctx, args, SetOp::Inter, "sinterstore")
}

pub fn sunionstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    store(ctx, args, SetOp::Union, "sunionstore")
}

pub fn sdiffstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    store(ctx, args, SetOp::Diff, "sdiffstore")
}

/// SMOVE source destination member.
pub fn smove(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (source, destination, member) = (&args[1], &args[2], &args[3]);
    check_field(member, "member")?;
    let Some(mut from) = ctx.meta_of(source, Kind::Set)? else {
        return Ok(Reply::Int(0));
    };
    ctx.meta_of(destination, Kind::Set)?;
    if source == destination {
        return Ok(Reply::Int(i64::from(is_member(ctx, from.id, member)?)));
    }
    if !ctx.ks.delete_value(ctx.txn, from.id, member)? {
        return Ok(Reply::Int(0));
    }
    from.len -= 1;
    ctx.notify(notifications::SET, "srem", source);
    ctx.save(source, &mut from)?;
    let mut to = ctx.meta_for_write(destination, Kind::Set)?;
    if add_member(ctx, &mut to, member)? {
        ctx.save(destination, &mut to)?;
        ctx.notify(notifications::SET, "sadd", destination);
    }
    Ok(Reply::Int(1))
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]: the whole set in one call (cursor 0).
pub fn sscan(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    parse_cursor(&args[2])?;
    let key = &args[1];
    let Some(meta) = ctx.meta_of(key, Kind::Set)? else {
        return Ok(scan_reply(Vec::new()));
    };
    let (pattern, _) = collection_scan_options(&args[3..], false)?;
    let items = members(ctx, meta.id)?
        .into_iter()
        .filter(|m| pattern.as_deref().is_none_or(|p| matches(p, m)))
        .map(bulk)
        .collect();
    Ok(scan_reply(items))
}
