//! List commands: pushes and pops at both ends, moves between lists (LMOVE, RPOPLPUSH),
//! their blocking forms (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH: run once here, waited on by the
//! server), ranges, LSET, LTRIM, LREM, LINSERT, LPOS.
//!
//! The element with sequence number `s` is the value under field [`seq_field`]`(s)`; the
//! live sequence numbers are `meta.head .. meta.tail`, so the element at index `i` is
//! `head + i` (a point read) and `len == tail - head`. Pushes move `head` down or `tail` up;
//! a removal or insertion in the middle rewrites the shorter side of the list so that the
//! numbers stay contiguous (O(n), like Redis's own LREM and LINSERT).

use std::ops::Range;

use tailstore_resp::Reply;

use super::blocking::{multi_pop, parse_timeout, pop_first, waited_meta_of};
use super::hashes::wrong_arity;
use super::rebuild::{keep_only, rewrite_list, Kept};
use super::strings::clamp_range;
use super::{bulk, is, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::notifications;
use crate::keyspace::{seq_field, seq_of_field, KeyMeta, Kind};

/// Redis's error for a negative (or non-numeric) count of LPOP, SPOP, ZPOPMIN…
pub(super) const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";

/// Parses a count that must be zero or more, with Redis's error text for anything else.
pub(super) fn parse_count(arg: &[u8]) -> Result<i64, Fault> {
    match parse_int(arg) {
        Ok(count) if count >= 0 => Ok(count),
        _ => Err(Fault::err(MUST_BE_POSITIVE)),
    }
}

/// The element at sequence number `seq` (it must exist: `head <= seq < tail`).
fn element(ctx: &mut Ctx, owner: i64, seq: i64) -> Result<Vec<u8>, Fault> {
    ctx.ks
        .read_value(ctx.txn, owner, &seq_field(seq), None)?
        .ok_or_else(|| Fault::corrupt(format!("list element {seq} is missing")))
}

/// The elements at indexes `from..=to` (both within the list).
pub(super) fn elements(
    ctx: &mut Ctx,
    meta: &KeyMeta,
    from: usize,
    to: usize,
) -> Result<Vec<Vec<u8>>, Fault> {
    let count = to + 1 - from;
    if count == 1 {
        return Ok(vec![element(ctx, meta.id, meta.head + from as i64)?]);
    }
    // One range scan over the elements' fields (sequence numbers are contiguous).
    let (first, last) = (meta.head + from as i64, meta.head + to as i64);
    let found = ctx
        .ks
        .fields_between(ctx.txn, meta.id, &seq_field(first), &seq_field(last))?;
    if found.len() != count {
        return Err(Fault::corrupt(format!(
            "list elements {first}..={last}: {} found",
            found.len()
        )));
    }
    let mut out = Vec::with_capacity(count);
    for ((field, value), seq) in found.into_iter().zip(first..) {
        if seq_of_field(&field)? != seq {
            return Err(Fault::corrupt(
                "list sequence numbers are not contiguous".to_string(),
            ));
        }
        out.push(value);
    }
    Ok(out)
}

/// Every element of a list.
pub(super) fn all_elements(ctx: &mut Ctx, meta: &KeyMeta) -> Result<Vec<Vec<u8>>, Fault> {
    if meta.len == 0 {
        return Ok(Vec::new());
    }
    elements(ctx, meta, 0, meta.len as usize - 1)
}

/// Writes `new` at sequence numbers `new_start..` where `old` was at `old_start..`: values
/// that did not change are left alone, and old numbers outside the new run are deleted.
fn write_run(
    ctx: &mut Ctx,
    owner: i64,
    old_start: i64,
    old: &[Vec<u8>],
    new_start: i64,
    new: &[&[u8]],
) -> Result<(), Fault> {
    for (i, value) in new.iter().enumerate() {
        let seq = new_start + i as i64;
        let before = usize::try_from(seq - old_start)
            .ok()
            .and_then(|at| old.get(at));
        match before {
            Some(before) if before.as_slice() == *value => {}
            before => {
                let old_total = before.map(Vec::len);
                ctx.ks
                    .write_value(ctx.txn, owner, &seq_field(seq), value, old_total)?
            }
        }
    }
    let new_end = new_start + new.len() as i64;
    for i in 0..old.len() {
        let seq = old_start + i as i64;
        if seq < new_start || seq >= new_end {
            ctx.ks.delete_value(ctx.txn, owner, &seq_field(seq))?;
        }
    }
    Ok(())
}

/// Replaces the elements at indexes `range` of the list (whose elements are `all`) with
/// `with`, moving whichever side of the list is shorter; updates `meta` (not saved).
fn splice(
    ctx: &mut Ctx,
    meta: &mut KeyMeta,
    all: &[Vec<u8>],
    range: std::ops::Range<usize>,
    with: &[Vec<u8>],
) -> Result<(), Fault> {
    if ctx.rebuilds_removals {
        // Past what a commit may rewrite: the whole list afresh under a new owner.
        let mut elements = all[..range.start].to_vec();
        elements.extend_from_slice(with);
        elements.extend_from_slice(&all[range.end..]);
        return rewrite_list(ctx, meta, &elements);
    }
    let head = meta.head;
    if all.len() - range.start <= range.end {
        // The head stays: everything from `range.start` on is rewritten.
        let new: Vec<&[u8]> = with
            .iter()
            .chain(&all[range.end..])
            .map(Vec::as_slice)
            .collect();
        let start = head + range.start as i64;
        write_run(ctx, meta.id, start, &all[range.start..], start, &new)?;
        meta.tail = start + new.len() as i64;
    } else {
        // The tail stays: everything before `range.end` is rewritten.
        let new: Vec<&[u8]> = all[..range.start]
            .iter()
            .chain(with)
            .map(Vec::as_slice)
            .collect();
        let new_head = head + range.end as i64 - new.len() as i64;
        write_run(ctx, meta.id, head, &all[..range.end], new_head, &new)?;
        meta.head = new_head;
    }
    meta.len = meta.tail - meta.head;
    Ok(())
}

fn push(ctx: &mut Ctx, args: &[Vec<u8>], left: bool, only_existing: bool) -> Outcome {
    let key = &args[1];
    if only_existing && ctx.meta_of(key, Kind::List)?.is_none() {
        return Ok(Reply::Int(0));
    }
    let mut meta = ctx.meta_for_write(key, Kind::List)?;
    for value in &args[2..] {
        push_one(ctx, &mut meta, value, left)?;
    }
    ctx.save(key, &mut meta)?;
    ctx.notify(notifications::LIST, pushed(left), key);
    Ok(Reply::Int(meta.len))
}

/// Adds `value` at one end of the list; updates `meta` (not saved).
pub(super) fn push_one(
    ctx: &mut Ctx,
    meta: &mut KeyMeta,
    value: &[u8],
    left: bool,
) -> Result<(), Fault> {
    let seq = if left {
        meta.head -= 1;
        meta.head
    } else {
        meta.tail += 1;
        meta.tail - 1
    };
    ctx.ks
        .write_value(ctx.txn, meta.id, &seq_field(seq), value, None)?;
    meta.len = meta.tail - meta.head;
    Ok(())
}

pub fn lpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    push(ctx, args, true, false)
}

pub fn rpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    push(ctx, args, false, false)
}

pub fn lpushx(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    push(ctx, args, true, true)
}

pub fn rpushx(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    push(ctx, args, false, true)
}

/// Removes up to `count` elements from one end of the list; returns them in pop order.
fn pop_elements(
    ctx: &mut Ctx,
    key: &[u8],
    meta: &mut KeyMeta,
    count: i64,
    left: bool,
) -> Result<Vec<Vec<u8>>, Fault> {
    let count = count.min(meta.len);
    let mut popped = Vec::with_capacity(count as usize);
    if ctx.rebuilds_removals {
        let (taken, kept) = if left {
            (meta.head..meta.head + count, meta.head + count..meta.tail)
        } else {
            (meta.tail - count..meta.tail, meta.head..meta.tail - count)
        };
        for seq in taken {
            popped.push(element(ctx, meta.id, seq)?);
        }
        // From the right end, the last element first.
        if !left {
            popped.reverse();
        }
        keep_trimmed(ctx, meta, kept)?;
    } else {
        for _ in 0..count {
            popped.push(pop_one(ctx, meta, left)?);
        }
    }
    ctx.notify(notifications::LIST, popped_from(left), key);
    ctx.save(key, meta)?;
    Ok(popped)
}

/// Removes the list's elements outside the sequence numbers `keep` (within its ends):
/// one by one, or, in an attempt after one too large, by rebuilding the list from the
/// elements kept (`rebuild.rs`). Updates `meta` (not saved).
fn keep_trimmed(ctx: &mut Ctx, meta: &mut KeyMeta, keep: Range<i64>) -> Result<(), Fault> {
    if ctx.rebuilds_removals {
        keep_only(ctx, meta, Kept::Seqs(keep.clone()))?;
    } else {
        for seq in (meta.head..keep.start).chain(keep.end..meta.tail) {
            ctx.ks.delete_value(ctx.txn, meta.id, &seq_field(seq))?;
        }
    }
    meta.head = keep.start;
    meta.tail = keep.end;
    meta.len = keep.end - keep.start;
    Ok(())
}

/// The event of a push to the left end if `left`, else to the right.
fn pushed(left: bool) -> &'static str {
    if left {
        "lpush"
    } else {
        "rpush"
    }
}

/// The event of a pop from the left end if `left`, else from the right.
fn popped_from(left: bool) -> &'static str {
    if left {
        "lpop"
    } else {
        "rpop"
    }
}

/// Removes the element at one end of the list and returns it; updates `meta` (not saved).
/// A stored list is never empty (the last pop deletes its key), so an empty one is damage.
fn pop_one(ctx: &mut Ctx, meta: &mut KeyMeta, left: bool) -> Result<Vec<u8>, Fault> {
    if meta.len <= 0 {
        return Err(Fault::corrupt(format!(
            "list {} is stored with no elements",
            meta.id
        )));
    }
    let seq = if left { meta.head } else { meta.tail - 1 };
    let value = element(ctx, meta.id, seq)?;
    ctx.ks.delete_value(ctx.txn, meta.id, &seq_field(seq))?;
    if left {
        meta.head += 1;
    } else {
        meta.tail -= 1;
    }
    meta.len = meta.tail - meta.head;
    Ok(value)
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT.
pub fn lmove(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let from_left = parse_end(&args[3])?;
    let to_left = parse_end(&args[4])?;
    move_element(ctx, &args[1], &args[2], from_left, to_left)
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
pub fn rpoplpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    move_element(ctx, &args[1], &args[2], false, true)
}

/// Whether LEFT (`true`) or RIGHT names the end of a list, in any case.
fn parse_end(arg: &[u8]) -> Result<bool, Fault> {
    if is(arg, "left") {
        Ok(true)
    } else if is(arg, "right") {
        Ok(false)
    } else {
        Err(Fault::err(SYNTAX))
    }
}

/// Moves one element between the ends of two lists, or of one (a rotation, which keeps the
/// key and its deadline even when the list holds a single element). In Redis's order: an
/// absent source answers nil before the destination's kind is checked; the push is told
/// before the pop, and an emptied source's deletion last.
fn move_element(
    ctx: &mut Ctx,
    source: &[u8],
    destination: &[u8],
    from_left: bool,
    to_left: bool,
) -> Outcome {
    let Some(mut from) = ctx.meta_of(source, Kind::List)? else {
        return Ok(Reply::Null);
    };
    if source == destination {
        let value = pop_one(ctx, &mut from, from_left)?;
        push_one(ctx, &mut from, &value, to_left)?;
        ctx.save(source, &mut from)?;
        ctx.notify(notifications::LIST, pushed(to_left), source);
        ctx.notify(notifications::LIST, popped_from(from_left), source);
        return Ok(bulk(value));
    }
    ctx.meta_of(destination, Kind::List)?;
    let value = pop_one(ctx, &mut from, from_left)?;
    let mut to = ctx.meta_for_write(destination, Kind::List)?;
    push_one(ctx, &mut to, &value, to_left)?;
    ctx.save(destination, &mut to)?;
    ctx.notify(notifications::LIST, pushed(to_left), destination);
    ctx.notify(notifications::LIST, popped_from(from_left), source);
    ctx.save(source, &mut from)?;
    Ok(bulk(value))
}

/// LPOP / RPOP key [count]: one element (bulk or nil) without a count; with one, an array
/// (nil array when the key does not exist).
fn pop(ctx: &mut Ctx, args: &[Vec<u8>], left: bool) -> Outcome {
    if args.len() > 3 {
        return Err(wrong_arity(args));
    }
    let count = args.get(2).map(|arg| parse_count(arg)).transpose()?;
    let key = &args[1];
    let Some(mut meta) = ctx.meta_of(key, Kind::List)? else {
        return Ok(count.map_or(Reply::Null, |_| Reply::NullArray));
    };
    match count {
        None => {
            let mut popped = pop_elements(ctx, key, &mut meta, 1, left)?;
            Ok(popped.pop().map_or(Reply::Null, bulk))
        }
        Some(0) => Ok(Reply::Array(Vec::new())),
        Some(count) => {
            let popped = pop_elements(ctx, key, &mut meta, count, left)?;
            Ok(Reply::Array(popped.into_iter().map(bulk).collect()))
        }
    }
}

pub fn lpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    pop(ctx, args, true)
}

pub fn rpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    pop(ctx, args, false)
}

/// BLPOP / BRPOP key [key …] timeout, as run once: [key, element] of the first key that
/// holds a list (`pop_first`).
fn blocking_pop(ctx: &mut Ctx, args: &[Vec<u8>], left: bool) -> Outcome {
    pop_first(ctx, args, Kind::List, |ctx, key, mut meta| {
        let popped = pop_elements(ctx, key, &mut meta, 1, left)?;
        Ok(popped.into_iter().map(bulk).collect())
    })
}

/// LMPOP numkeys key [key …] LEFT|RIGHT [COUNT count] (`multi_pop`).
pub fn lmpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    multi_pop(ctx, args, 1, (Kind::List, ["left", "right"]), pop_from)
}

/// BLMPOP timeout numkeys key [key …] LEFT|RIGHT [COUNT count], as run once.
pub fn blmpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    multi_pop(ctx, args, 2, (Kind::List, ["left", "right"]), pop_from)
}

/// LMPOP's pop: up to `count` elements from the left end if `left`.
fn pop_from(
    ctx: &mut Ctx,
    key: &[u8],
    mut meta: KeyMeta,
    left: bool,
    count: i64,
) -> Result<Vec<Reply>, Fault> {
    let popped = pop_elements(ctx, key, &mut meta, count, left)?;
    Ok(popped.into_iter().map(bulk).collect())
}

pub fn blpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    blocking_pop(ctx, args, true)
}

pub fn brpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    blocking_pop(ctx, args, false)
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout, as run once: LMOVE, whose nil
/// (an absent source) the server turns into a wait.
pub fn blmove(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let from_left = parse_end(&args[3])?;
    let to_left = parse_end(&args[4])?;
    parse_timeout(&args[5])?;
    if ctx.is_blocked_rerun() && waited_meta_of(ctx, &args[1], Kind::List)?.is_none() {
        return Ok(Reply::Null); // a source of another kind is waited on, as if absent
    }
    move_element(ctx, &args[1], &args[2], from_left, to_left)
}

/// BRPOPLPUSH source destination timeout: BLMOVE source destination RIGHT LEFT timeout.
pub fn brpoplpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    parse_timeout(&args[3])?;
    if ctx.is_blocked_rerun() && waited_meta_of(ctx, &args[1], Kind::List)?.is_none() {
        return Ok(Reply::Null); // a source of another kind is waited on, as if absent
    }
    move_element(ctx, &args[1], &args[2], false, true)
}

pub fn llen(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(Reply::Int(
        ctx.meta_of(&args[1], Kind::List)?.map_or(0, |m| m.len),
    ))
}

pub fn lrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (start, end) = (parse_int(&args[2])?, parse_int(&args[3])?);
    let key = &args[1];
    let Some(meta) = ctx.meta_of(key, Kind::List)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let Some((from, to)) = clamp_range(start, end, meta.len) else {
        return Ok(Reply::Array(Vec::new()));
    };
    let values = elements(ctx, &meta, from, to)?;
    Ok(Reply::Array(values.into_iter().map(bulk).collect()))
}

/// The position of index `index` (negative: from the end) in a list of `len`, if inside.
fn position(index: i64, len: i64) -> Option<i64> {
    let at = if index < 0 {
        len.checked_add(index)?
    } else {
        index
    };
    (0..len).contains(&at).then_some(at)
}

pub fn lindex(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let Some(meta) = ctx.meta_of(key, Kind::List)? else {
        return Ok(Reply::Null);
    };
    let index = parse_int(&args[2])?;
    match position(index, meta.len) {
        Some(at) => Ok(bulk(element(ctx, meta.id, meta.head + at)?)),
        None => Ok(Reply::Null),
    }
}

pub fn lset(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let Some(mut meta) = ctx.meta_of(key, Kind::List)? else {
        return Err(Fault::err("ERR no such key"));
    };
    let index = parse_int(&args[2])?;
    let Some(at) = position(index, meta.len) else {
        return Err(Fault::err("ERR index out of range"));
    };
    let field = seq_field(meta.head + at);
    let old = ctx.ks.value_len(ctx.txn, meta.id, &field)?;
    ctx.ks
        .write_value(ctx.txn, meta.id, &field, &args[3], old)?;
    ctx.save(key, &mut meta)?;
    ctx.notify(notifications::LIST, "lset", key);
    Ok(Reply::ok())
}

pub fn ltrim(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (start, end) = (parse_int(&args[2])?, parse_int(&args[3])?);
    let key = &args[1];
    let Some(mut meta) = ctx.meta_of(key, Kind::List)? else {
        return Ok(Reply::ok());
    };
    match clamp_range(start, end, meta.len) {
        // Nothing left: saving an empty list deletes the key and all its elements.
        None => meta.len = 0,
        Some((from, to)) => {
            let keep = meta.head + from as i64..meta.head + to as i64 + 1;
            keep_trimmed(ctx, &mut meta, keep)?;
        }
    }
    // Redis signals the key as modified (and tells it) even when nothing was trimmed.
    ctx.notify(notifications::LIST, "ltrim", key);
    ctx.save(key, &mut meta)?;
    Ok(Reply::ok())
}

/// LREM key count element: removes the first `count` occurrences (from the tail when
/// negative, all when 0).
pub fn lrem(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let count = parse_int(&args[2])?;
    let (key, target) = (&args[1], &args[3]);
    let Some(mut meta) = ctx.meta_of(key, Kind::List)? else {
        return Ok(Reply::Int(0));
    };
    let all = all_elements(ctx, &meta)?;
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let found = all
        .iter()
        .enumerate()
        .filter(|(_, v)| v.as_slice() == target.as_slice());
    let removed: Vec<usize> = if count < 0 {
        let mut from_tail: Vec<usize> = found.rev().take(limit).map(|(i, _)| i).collect();
        from_tail.reverse();
        from_tail
    } else {
        found.take(limit).map(|(i, _)| i).collect()
    };
    let (Some(&first), Some(&last)) = (removed.first(), removed.last()) else {
        return Ok(Reply::Int(0));
    };
    let kept: Vec<Vec<u8>> = (first..=last)
        .filter(|i| removed.binary_search(i).is_err())
        .map(|i| all[i].clone())
        .collect();
    splice(ctx, &mut meta, &all, first..last + 1, &kept)?;
    ctx.notify(notifications::LIST, "lrem", key);
    ctx.save(key, &mut meta)?;
    Ok(Reply::Int(removed.len() as i64))
}

/// LINSERT key BEFORE|AFTER pivot element: the new length, -1 without the pivot, 0 without
/// the key.
pub fn linsert(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let after = if is(&args[2], "AFTER") {
        true
    } else if is(&args[2], "BEFORE") {
        false
    } else {
        return Err(Fault::err(SYNTAX));
    };
    let (key, pivot, value) = (&args[1], &args[3], &args[4]);
    let Some(mut meta) = ctx.meta_of(key, Kind::List)? else {
        return Ok(Reply::Int(0));
    };
    let all = all_elements(ctx, &meta)?;
    let Some(at) = all.iter().position(|v| v == pivot) else {
        return Ok(Reply::Int(-1));
    };
    let at = at + usize::from(after);
    splice(ctx, &mut meta, &all, at..at, std::slice::from_ref(value))?;
    ctx.save(key, &mut meta)?;
    ctx.notify(notifications::LIST, "linsert", key);
    Ok(Reply::Int(meta.len))
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len].
pub fn lpos(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, target) = (&args[1], &args[2]);
    let mut rank: i64 = 1;
    let mut count: Option<i64> = None;
    let mut maxlen: i64 = 0;
    let mut i = 3;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if is(&args[i], "RANK") && has_value {
            rank = parse_int(&args[i + 1])?;
            if rank == i64::MIN {
                return Err(Fault::err(
                    "ERR value is out of range, must be between -9223372036854775807 and 9223372036854775807",
                ));
            }
            if rank == 0 {
                return Err(Fault::err(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if is(&args[i], "COUNT") && has_value {
            count = Some(
                parse_int(&args[i + 1])
                    .ok()
                    .filter(|c| *c >= 0)
                    .ok_or_else(|| Fault::err("ERR COUNT can't be negative"))?,
            );
        } else if is(&args[i], "MAXLEN") && has_value {
            maxlen = parse_int(&args[i + 1])
                .ok()
                .filter(|m| *m >= 0)
                .ok_or_else(|| Fault::err("ERR MAXLEN can't be negative"))?;
        } else {
            return Err(Fault::err(SYNTAX));
        }
        i += 2;
    }
    let none = || count.map_or(Reply::Null, |_| Reply::Array(Vec::new()));
    let Some(meta) = ctx.meta_of(key, Kind::List)? else {
        return Ok(none());
    };
    let len = meta.len as usize;
    // Only the first MAXLEN elements from the end the search starts at are compared.
    let span = if maxlen == 0 {
        len
    } else {
        len.min(maxlen as usize)
    };
    if span == 0 {
        return Ok(none());
    }
    let (from, to) = if rank > 0 {
        (0, span - 1)
    } else {
        (len - span, len - 1)
    };
    let window = elements(ctx, &meta, from, to)?;
    let indexes: Box<dyn Iterator<Item = usize>> = if rank > 0 {
        Box::new(from..=to)
    } else {
        Box::new((from..=to).rev())
    };
    let wanted = match count {
        None => 1,
        Some(0) => usize::MAX,
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let skip = rank.unsigned_abs() - 1;
    let found: Vec<Reply> = indexes
        .filter(|&i| window[i - from] == *target)
        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        .take(wanted)
        .map(|i| Reply::Int(i as i64))
        .collect();
    Ok(match count {
        Some(_) => Reply::Array(found),
        None => found.into_iter().next().unwrap_or(Reply::Null),
    })
}
