//! Sorted-set commands: ZADD and its flags, scores, ranges by rank, score and lex, ranks,
//! pops, counts and range removals.
//!
//! Members live in `kv_zset` (keyspace/zset.rs), ordered by (score, member) through its
//! `by_score` index and by member through its primary key; the key's `len` counts them.
//!
//! Scores are answered with [`Reply::Double`]: a bulk string in RESP2 (Redis's text, via
//! `format_double`), a double in RESP3. Members with their scores (WITHSCORES, ZPOPMIN with
//! a count) are [`Reply::Pairs`]: flat in RESP2, [member, score] pairs in RESP3, as Redis 7
//! answers.

use std::collections::BTreeMap;
use std::ops::Bound;

use tailstore_engine::KeyRange;
use tailstore_resp::{format_double, Reply};
use tailstore_storage::{ScanDirection, Value};

use super::blocking::{multi_pop, pop_first};
use super::hashes::{check_field, collection_scan_options, scan_reply};
use super::keys::parse_cursor;
use super::lists::parse_count;
use super::pattern::matches;
use super::random::{by_position, parse_count_with, pick_by_count, pick_by_position, pick_one};
use super::rebuild::{remove_held, remove_named, Elements};
use super::strings::clamp_range;
use super::{bulk, is, parse_float, parse_int, parse_score_bound, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::notifications;
use crate::keyspace::{score_of_key, KeyMeta, Kind, MemberOrder, ALL_SCORES};

const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";
const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";

/// Members with their scores, in the order a command answers them.
type Scored = Vec<(Vec<u8>, f64)>;

fn direction(rev: bool) -> ScanDirection {
    if rev {
        ScanDirection::Descending
    } else {
        ScanDirection::Ascending
    }
}

/// A score range bound: `(1.5` is exclusive, `1.5`, `-inf`, `+inf` inclusive.
fn score_bound(arg: &[u8]) -> Result<Bound<f64>, Fault> {
    let parsed = match arg.strip_prefix(b"(") {
        Some(rest) => parse_score_bound(rest).map(Bound::Excluded),
        None => parse_score_bound(arg).map(Bound::Included),
    };
    parsed.ok_or_else(|| Fault::err(NOT_FLOAT_RANGE))
}

fn score_range(min: &[u8], max: &[u8]) -> Result<(Bound<f64>, Bound<f64>), Fault> {
    Ok((score_bound(min)?, score_bound(max)?))
}

/// Whether no score lies between `min` and `max`.
fn empty_score_range(min: Bound<f64>, max: Bound<f64>) -> bool {
    let (lo, lo_open) = match min {
        Bound::Included(s) => (s, false),
        Bound::Excluded(s) => (s, true),
        Bound::Unbounded => return false,
    };
    let (hi, hi_open) = match max {
        Bound::Included(s) => (s, false),
        Bound::Excluded(s) => (s, true),
        Bound::Unbounded => return false,
    };
    lo > hi || (lo == hi && (lo_open || hi_open))
}

/// A lex range bound: `-` and `+` are the lowest and highest strings, `[a` inclusive, `(a`
/// exclusive.
#[derive(Clone, PartialEq)]
enum Lex {
    Lowest,
    Highest,
    Included(Vec<u8>),
    Excluded(Vec<u8>),
}

fn lex_bound(arg: &[u8]) -> Result<Lex, Fault> {
    match arg.split_first() {
        Some((b'-', [])) => Ok(Lex::Lowest),
        Some((b'+', [])) => Ok(Lex::Highest),
        Some((b'[', rest)) => Ok(Lex::Included(rest.to_vec())),
        Some((b'(', rest)) => Ok(Lex::Excluded(rest.to_vec())),
        _ => Err(Fault::err(NOT_LEX_RANGE)),
    }
}

/// The rows of `owner`'s members from `min` to `max` in byte order; `None` if no member
/// can be in it.
fn lex_range(owner: i64, min: &Lex, max: &Lex) -> Option<KeyRange> {
    let prefix = vec![Value::Int(owner)];
    let with = |member: &[u8]| {
        let mut values = prefix.clone();
        values.push(Value::Bytes(member.to_vec()));
        values
    };
    let lower = match min {
        Lex::Lowest => Bound::Included(prefix.clone()),
        Lex::Included(m) => Bound::Included(with(m)),
        Lex::Excluded(m) => Bound::Excluded(with(m)),
        Lex::Highest => return None,
    };
    let upper = match max {
        Lex::Highest => Bound::Included(prefix.clone()),
        Lex::Included(m) => Bound::Included(with(m)),
        Lex::Excluded(m) => Bound::Excluded(with(m)),
        Lex::Lowest => return None,
    };
    let empty = match (min, max) {
        (Lex::Included(a), Lex::Included(b)) => a > b,
        (Lex::Included(a) | Lex::Excluded(a), Lex::Included(b) | Lex::Excluded(b)) => a >= b,
        _ => false,
    };
    (!empty).then(|| KeyRange::new(lower, upper))
}

/// Members of the sorted set with id `owner` whose member lies between `min` and `max` in
/// byte order (meant, as in Redis, for sets whose members all have one score), at most
/// `limit`.
fn members_by_lex(
    ctx: &mut Ctx,
    owner: i64,
    min: &Lex,
    max: &Lex,
    rev: bool,
    limit: usize,
) -> Result<Scored, Fault> {
    let Some(range) = lex_range(owner, min, max) else {
        return Ok(Vec::new());
    };
    let rows = ctx.txn.scan(&ctx.ks.zset, &range, direction(rev), limit)?;
    rows.iter()
        .map(|row| match (&row[1], &row[2]) {
            (Value::Bytes(member), Value::Int(score)) => Ok((member.clone(), score_of_key(*score))),
            _ => Err(Fault::corrupt(
                "kv_zset row of unexpected shape".to_string(),
            )),
        })
        .collect()
}

/// Members by rank: indexes `start..=end` (negative: from the end) in ascending order, or
/// descending with `rev`.
pub(super) fn members_by_rank(
    ctx: &mut Ctx,
    owner: i64,
    len: i64,
    start: i64,
    end: i64,
    rev: bool,
) -> Result<Scored, Fault> {
    let Some((from, to)) = clamp_range(start, end, len) else {
        return Ok(Vec::new());
    };
    // The index is walked from the nearer end, passing over the ranks before the range a
    // leaf at a time: `ZREVRANGE key 1000 -1` on 1,001 members (a job queue keeping its last
    // thousand jobs) passes over nothing from the far end.
    let beyond = (len as usize).saturating_sub(to + 1);
    let (near, skip, reversed) = if beyond < from {
        (!rev, beyond, true)
    } else {
        (rev, from, false)
    };
    let count = (to - from) + 1;
    let mut members =
        ctx.ks
            .members_by_score(ctx.txn, owner, ALL_SCORES, direction(near), skip, count)?;
    if reversed {
        members.reverse();
    }
    Ok(members)
}

/// Members by score, after skipping `offset` of them, at most `limit` (negative: all).
#[allow(clippy::too_many_arguments)]
fn members_in_scores(
    ctx: &mut Ctx,
    owner: i64,
    min: Bound<f64>,
    max: Bound<f64>,
    rev: bool,
    offset: i64,
    limit: i64,
) -> Result<Scored, Fault> {
    // A negative offset walks off the end of the range in Redis: nothing is returned.
    if empty_score_range(min, max) || offset < 0 || limit == 0 {
        return Ok(Vec::new());
    }
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    let skip = usize::try_from(offset).unwrap_or(usize::MAX);
    ctx.ks
        .members_by_score(ctx.txn, owner, (min, max), direction(rev), skip, take)
}

/// Members as an array, or with `withscores` as (member, score) pairs.
fn range_reply(items: Scored, withscores: bool) -> Reply {
    if withscores {
        return scored_pairs(items);
    }
    Reply::Array(items.into_iter().map(|(member, _)| bulk(member)).collect())
}

/// (member, score) pairs: flat in RESP2, nested in RESP3.
fn scored_pairs(items: Scored) -> Reply {
    let pairs = items
        .into_iter()
        .map(|(member, score)| (bulk(member), Reply::Double(score)));
    Reply::Pairs(pairs.collect())
}

struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member …]
pub fn zadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let mut f = ZaddFlags {
        nx: false,
        xx: false,
        gt: false,
        lt: false,
        ch: false,
        incr: false,
    };
    let mut i = 2;
    while let Some(arg) = args.get(i) {
        let flag = if is(arg, "NX") {
            &mut f.nx
        } else if is(arg, "XX") {
            &mut f.xx
        } else if is(arg, "GT") {
            &mut f.gt
        } else if is(arg, "LT") {
            &mut f.lt
        } else if is(arg, "CH") {
            &mut f.ch
        } else if is(arg, "INCR") {
            &mut f.incr
        } else {
            break;
        };
        *flag = true;
        i += 1;
    }
    let pairs = &args[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(Fault::err(SYNTAX));
    }
    if f.nx && f.xx {
        return Err(Fault::err(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(Fault::err(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if f.incr && pairs.len() > 2 {
        return Err(Fault::err(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let mut items = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks(2) {
        items.push((parse_float(&pair[0])?, &pair[1]));
    }
    for (_, member) in &items {
        check_field(member, "member")?;
    }
    let existing = ctx.meta_of(key, Kind::ZSet)?;
    if existing.is_none() && f.xx {
        return Ok(if f.incr { Reply::Null } else { Reply::Int(0) });
    }
    if let (Some(old), true) = (&existing, f.incr && !f.nx) {
        // The only error a write could meet: found before anything is written.
        let (delta, member) = items[0];
        if let Some(current) = ctx.ks.member_score(ctx.txn, old.id, member)? {
            if (current + delta).is_nan() {
                return Err(Fault::err(NAN_SCORE));
            }
        }
    }
    let mut meta = ctx.meta_for_write(key, Kind::ZSet)?;
    let (mut added, mut updated, mut processed) = (0, 0, 0);
    let mut last = 0.0;
    for (score, member) in items {
        match ctx.ks.member_score(ctx.txn, meta.id, member)? {
            Some(current) => {
                if f.nx {
                    continue;
                }
                let new = if f.incr { current + score } else { score };
                if (f.gt && new <= current) || (f.lt && new >= current) {
                    continue;
                }
                processed += 1;
                last = new;
                if new != current {
                    ctx.ks.put_member(ctx.txn, meta.id, member, new, true)?;
                    updated += 1;
                }
            }
            None => {
                if f.xx {
                    continue;
                }
                processed += 1;
                last = score;
                ctx.ks.put_member(ctx.txn, meta.id, member, score, false)?;
                meta.len += 1;
                added += 1;
            }
        }
    }
    if added + updated > 0 {
        ctx.save(key, &mut meta)?;
        let event = if f.incr { "zincr" } else { "zadd" };
        ctx.notify(notifications::ZSET, event, key);
    }
    Ok(match (f.incr, processed > 0) {
        (true, true) => Reply::Double(last),
        (true, false) => Reply::Null,
        (false, _) => Reply::Int(if f.ch { added + updated } else { added }),
    })
}

pub fn zincrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, member) = (&args[1], &args[3]);
    // Redis runs ZINCRBY through ZADD's parser, which takes these words for its flags and
    // then finds the member missing.
    if ["nx", "xx", "gt", "lt", "ch", "incr"]
        .iter()
        .any(|flag| is(&args[2], flag))
    {
        return Err(Fault::err(SYNTAX));
    }
    let delta = parse_float(&args[2])?;
    check_field(member, "member")?;
    let current = match ctx.meta_of(key, Kind::ZSet)? {
        Some(meta) => ctx.ks.member_score(ctx.txn, meta.id, member)?,
        None => None,
    };
    let new = current.unwrap_or(0.0) + delta;
    if new.is_nan() {
        return Err(Fault::err(NAN_SCORE));
    }
    if current == Some(new) {
        // As ZADD INCR, and as in Redis: a score that stays as it was is no change, to a
        // WATCH or to a listener.
        return Ok(Reply::Double(new));
    }
    let mut meta = ctx.meta_for_write(key, Kind::ZSet)?;
    ctx.ks
        .put_member(ctx.txn, meta.id, member, new, current.is_some())?;
    if current.is_none() {
        meta.len += 1;
    }
    ctx.save(key, &mut meta)?;
    ctx.notify(notifications::ZSET, "zincr", key);
    Ok(Reply::Double(new))
}

pub fn zrem(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    for member in &args[2..] {
        check_field(member, "member")?;
    }
    let Some(mut meta) = ctx.meta_of(key, Kind::ZSet)? else {
        return Ok(Reply::Int(0));
    };
    let removed = remove_named(ctx, &mut meta, &args[2..], Elements::Members)?;
    if removed > 0 {
        meta.len -= removed;
        ctx.notify(notifications::ZSET, "zrem", key);
        ctx.save(key, &mut meta)?;
    }
    Ok(Reply::Int(removed))
}

pub fn zscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, member) = (&args[1], &args[2]);
    check_field(member, "member")?;
    let Some(meta) = ctx.meta_of(key, Kind::ZSet)? else {
        return Ok(Reply::Null);
    };
    let score = ctx.ks.member_score(ctx.txn, meta.id, member)?;
    Ok(score.map_or(Reply::Null, Reply::Double))
}

pub fn zmscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let scores = member_scores(ctx, &args[1], &args[2..])?;
    let replies = scores
        .into_iter()
        .map(|score| score.map_or(Reply::Null, Reply::Double));
    Ok(Reply::Array(replies.collect()))
}

/// Each member's score in the sorted set at `key` (`None`: not a member, or no such key).
pub(super) fn member_scores(
    ctx: &mut Ctx,
    key: &[u8],
    members: &[Vec<u8>],
) -> Result<Vec<Option<f64>>, Fault> {
    for member in members {
        check_field(member, "member")?;
    }
    let owner = ctx.meta_of(key, Kind::ZSet)?.map(|m| m.id);
    let mut scores = Vec::with_capacity(members.len());
    for member in members {
        scores.push(match owner {
            Some(owner) => ctx.ks.member_score(ctx.txn, owner, member)?,
            None => None,
        });
    }
    Ok(scores)
}

/// Replaces `destination`, whatever it held (its kind and TTL too, as Redis's `setKey`), with
/// a sorted set of `members`, or deletes it if there are none: the write of the commands that
/// store a result (ZUNIONSTORE…, GEOSEARCHSTORE), told as `event`. A score of -0 is stored
/// as 0 (`score_key`), as in Redis's small sorted sets. Returns the number of members.
pub(super) fn store_members(
    ctx: &mut Ctx,
    destination: &[u8],
    members: &BTreeMap<Vec<u8>, f64>,
    event: &'static str,
) -> Result<i64, Fault> {
    let members = members
        .iter()
        .map(|(member, score)| (member.clone(), *score));
    store_sorted_set(ctx, destination, members, event)
}

pub fn zcard(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(Reply::Int(
        ctx.meta_of(&args[1], Kind::ZSet)?.map_or(0, |m| m.len),
    ))
}

/// What a ZRANGE-family command ranges over.
#[derive(Clone, Copy, PartialEq)]
enum By {
    /// Not said yet (ZRANGE without BYSCORE / BYLEX): by rank.
    Auto,
    Rank,
    Score,
    Lex,
}

/// ZRANGE and its older forms, as Redis's `zrangeGenericCommand`: `by` and `rev` are fixed
/// by the older commands and left open (`Auto`, `None`) by ZRANGE, whose options set them.
fn zrange_generic(ctx: &mut Ctx, args: &[Vec<u8>], by: By, rev: Option<bool>) -> Outcome {
    let (items, withscores) = range_items(ctx, &args[1..], by, rev, true)?;
    Ok(range_reply(items.unwrap_or_default(), withscores))
}

/// The members a ZRANGE-family range selects: `args` from the source key on (key, min, max,
/// options), `None` if the key does not exist; and whether WITHSCORES was given (refused as
/// a syntax error unless `withscores_allowed`).
fn range_items(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    mut by: By,
    rev: Option<bool>,
    withscores_allowed: bool,
) -> Result<(Option<Scored>, bool), Fault> {
    let key = &args[0];
    let mut rev = rev;
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut i = 3;
    while i < args.len() {
        let arg = &args[i];
        let left = args.len() - i - 1;
        if withscores_allowed && is(arg, "WITHSCORES") {
            withscores = true;
        } else if is(arg, "LIMIT") && left >= 2 {
            offset = parse_int(&args[i + 1])?;
            limit = parse_int(&args[i + 2])?;
            i += 2;
        } else if rev.is_none() && is(arg, "REV") {
            rev = Some(true);
        } else if by == By::Auto && is(arg, "BYLEX") {
            by = By::Lex;
        } else if by == By::Auto && is(arg, "BYSCORE") {
            by = By::Score;
        } else {
            return Err(Fault::err(SYNTAX));
        }
        i += 1;
    }
    let rev = rev.unwrap_or(false);
    if by == By::Auto {
        by = By::Rank;
    }
    if limit != -1 && by == By::Rank {
        return Err(Fault::err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(Fault::err(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // Reverse score and lex ranges are given as max, min.
    let (min, max) = if rev && by != By::Rank {
        (&args[2], &args[1])
    } else {
        (&args[1], &args[2])
    };
    // The source's lookup is a read, ZRANGESTORE's too, as in Redis.
    let items = match by {
        By::Auto | By::Rank => {
            let (start, end) = (parse_int(min)?, parse_int(max)?);
            let Some(meta) = ctx.read_meta_of(key, Kind::ZSet)? else {
                return Ok((None, withscores));
            };
            members_by_rank(ctx, meta.id, meta.len, start, end, rev)?
        }
        By::Score => {
            let (min, max) = score_range(min, max)?;
            let Some(meta) = ctx.read_meta_of(key, Kind::ZSet)? else {
                return Ok((None, withscores));
            };
            members_in_scores(ctx, meta.id, min, max, rev, offset, limit)?
        }
        By::Lex => {
            let (min, max) = (lex_bound(min)?, lex_bound(max)?);
            let Some(meta) = ctx.read_meta_of(key, Kind::ZSet)? else {
                return Ok((None, withscores));
            };
            if offset < 0 || limit == 0 {
                return Ok((Some(Vec::new()), withscores));
            }
            let take = usize::try_from(limit).unwrap_or(usize::MAX);
            let skip = offset as usize;
            let rows = members_by_lex(ctx, meta.id, &min, &max, rev, skip.saturating_add(take))?;
            rows.into_iter().skip(skip).take(take).collect()
        }
    };
    Ok((Some(items), withscores))
}

/// ZRANGESTORE destination source min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]:
/// the range stored as the sorted set `destination` (deleted if the range is empty); its
/// size.
pub fn zrangestore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (items, _) = range_items(ctx, &args[2..], By::Auto, None, false)?;
    let items = items.unwrap_or_default();
    let stored = store_sorted_set(ctx, &args[1], items, "zrangestore")?;
    Ok(Reply::Int(stored))
}

/// Replaces `destination`, whatever it held, by a sorted set of `members` (distinct), told
/// as `event`, or deletes it (told as `del` if it existed) if there are none; their number.
pub(super) fn store_sorted_set(
    ctx: &mut Ctx,
    destination: &[u8],
    members: impl IntoIterator<Item = (Vec<u8>, f64)>,
    event: &'static str,
) -> Result<i64, Fault> {
    super::check_key(destination)?;
    let (old, mut meta) = ctx.replace(destination, Kind::ZSet)?;
    for (member, score) in members {
        ctx.ks.put_member(ctx.txn, meta.id, &member, score, false)?;
        meta.len += 1;
    }
    ctx.save(destination, &mut meta)?;
    let stored = meta.len > 0;
    ctx.notify_stored(
        (notifications::ZSET, event),
        destination,
        stored,
        old.is_some(),
    );
    Ok(meta.len)
}

/// ZRANGE key start stop [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    zrange_generic(ctx, args, By::Auto, None)
}

pub fn zrevrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    zrange_generic(ctx, args, By::Rank, Some(true))
}

pub fn zrangebyscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    zrange_generic(ctx, args, By::Score, Some(false))
}

pub fn zrevrangebyscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    zrange_generic(ctx, args, By::Score, Some(true))
}

pub fn zrangebylex(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    zrange_generic(ctx, args, By::Lex, Some(false))
}

pub fn zrevrangebylex(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    zrange_generic(ctx, args, By::Lex, Some(true))
}

/// ZRANK / ZREVRANK key member [WITHSCORE].
fn rank(ctx: &mut Ctx, args: &[Vec<u8>], rev: bool) -> Outcome {
    if args.len() > 4 {
        return Err(super::hashes::wrong_arity(args));
    }
    let withscore = match args.get(3) {
        None => false,
        Some(arg) if is(arg, "WITHSCORE") => true,
        Some(_) => return Err(Fault::err(SYNTAX)),
    };
    let missing = if withscore {
        Reply::NullArray
    } else {
        Reply::Null
    };
    let (key, member) = (&args[1], &args[2]);
    check_field(member, "member")?;
    let Some(meta) = ctx.meta_of(key, Kind::ZSet)? else {
        return Ok(missing);
    };
    let Some(score) = ctx.ks.member_score(ctx.txn, meta.id, member)? else {
        return Ok(missing);
    };
    let position = ctx.ks.rank_of(ctx.txn, meta.id, meta.len, member, score)? as i64;
    if position >= meta.len {
        return Err(Fault::corrupt(format!(
            "sorted-set member ranked {position} of {} members",
            meta.len
        )));
    }
    let rank = if rev {
        meta.len - 1 - position
    } else {
        position
    };
    Ok(if withscore {
        Reply::Array(vec![Reply::Int(rank), Reply::Double(score)])
    } else {
        Reply::Int(rank)
    })
}

pub fn zrank(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    rank(ctx, args, false)
}

pub fn zrevrank(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    rank(ctx, args, true)
}

pub fn zcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (min, max) = score_range(&args[2], &args[3])?;
    let Some(meta) = ctx.meta_of(&args[1], Kind::ZSet)? else {
        return Ok(Reply::Int(0));
    };
    if empty_score_range(min, max) {
        return Ok(Reply::Int(0));
    }
    let counted = ctx
        .ks
        .count_by_score(ctx.txn, meta.id, meta.len, (min, max))?;
    Ok(Reply::Int(counted as i64))
}

pub fn zlexcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (min, max) = (lex_bound(&args[2])?, lex_bound(&args[3])?);
    let Some(meta) = ctx.meta_of(&args[1], Kind::ZSet)? else {
        return Ok(Reply::Int(0));
    };
    let Some(range) = lex_range(meta.id, &min, &max) else {
        return Ok(Reply::Int(0));
    };
    let counted = ctx
        .ks
        .count_members(ctx.txn, meta.id, meta.len, MemberOrder::ByName, &range)?;
    Ok(Reply::Int(counted as i64))
}

/// ZPOPMIN / ZPOPMAX key [count]. Without a count, Redis 7.0 answers one flat [member,
/// score] in both protocols; with one (even 1), (member, score) pairs, nested in RESP3.
fn zpop(ctx: &mut Ctx, args: &[Vec<u8>], max: bool) -> Outcome {
    if args.len() > 3 {
        return Err(Fault::err(SYNTAX));
    }
    let count = match args.get(2) {
        None => 1,
        Some(arg) => parse_count(arg)?,
    };
    let counted = args.len() == 3;
    let key = &args[1];
    // The key's kind is checked before a count of 0 answers, as in Redis (WRONGTYPE wins).
    let Some(mut meta) = ctx.meta_of(key, Kind::ZSet)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == 0 {
        return Ok(Reply::Array(Vec::new()));
    }
    let popped = pop_members(ctx, key, &mut meta, count, max)?;
    if counted {
        return Ok(scored_pairs(popped));
    }
    let flat = popped
        .into_iter()
        .flat_map(|(member, score)| [bulk(member), Reply::Double(score)]);
    Ok(Reply::Array(flat.collect()))
}

/// Removes up to `count` members with the lowest (highest if `max`) scores; returns them
/// with their scores, in pop order, and saves the key.
fn pop_members(
    ctx: &mut Ctx,
    key: &[u8],
    meta: &mut KeyMeta,
    count: i64,
    max: bool,
) -> Result<Vec<(Vec<u8>, f64)>, Fault> {
    let popped = ctx.ks.members_from_end(
        ctx.txn,
        meta.id,
        direction(max),
        usize::try_from(count).unwrap_or(usize::MAX),
    )?;
    remove_members(ctx, meta, &popped)?;
    meta.len -= popped.len() as i64;
    let event = if max { "zpopmax" } else { "zpopmin" };
    ctx.notify(notifications::ZSET, event, key);
    ctx.save(key, meta)?;
    Ok(popped)
}

/// BZPOPMIN / BZPOPMAX key [key …] timeout, as run once: [key, member, score] of the first
/// key that holds a sorted set (`pop_first`).
fn blocking_zpop(ctx: &mut Ctx, args: &[Vec<u8>], max: bool) -> Outcome {
    pop_first(ctx, args, Kind::ZSet, |ctx, key, mut meta| {
        let popped = pop_members(ctx, key, &mut meta, 1, max)?;
        Ok(popped
            .into_iter()
            .flat_map(|(member, score)| [bulk(member), Reply::Double(score)])
            .collect())
    })
}

/// ZMPOP numkeys key [key …] MIN|MAX [COUNT count] (`multi_pop`): `[member, score]` pairs,
/// nested in both protocols.
pub fn zmpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    multi_pop(ctx, args, 1, (Kind::ZSet, ["min", "max"]), pop_scored)
}

/// BZMPOP timeout numkeys key [key …] MIN|MAX [COUNT count], as run once.
pub fn bzmpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    multi_pop(ctx, args, 2, (Kind::ZSet, ["min", "max"]), pop_scored)
}

/// ZMPOP's pop: up to `count` members, the lowest scores first if `min`.
fn pop_scored(
    ctx: &mut Ctx,
    key: &[u8],
    mut meta: KeyMeta,
    min: bool,
    count: i64,
) -> Result<Vec<Reply>, Fault> {
    let popped = pop_members(ctx, key, &mut meta, count, !min)?;
    let pairs = popped
        .into_iter()
        .map(|(member, score)| Reply::Array(vec![bulk(member), Reply::Double(score)]));
    Ok(pairs.collect())
}

pub fn bzpopmin(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    blocking_zpop(ctx, args, false)
}

pub fn bzpopmax(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    blocking_zpop(ctx, args, true)
}

pub fn zpopmin(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    zpop(ctx, args, false)
}

pub fn zpopmax(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    zpop(ctx, args, true)
}

/// Removes `members` (with their scores) from the sorted set `meta` (`rebuild.rs`).
fn remove_members(
    ctx: &mut Ctx,
    meta: &mut KeyMeta,
    members: &[(Vec<u8>, f64)],
) -> Result<(), Fault> {
    let held = members.iter().map(|(member, _)| member.as_slice());
    remove_held(ctx, meta, held, Elements::Members)
}

/// Removes the members a range names; the number removed.
fn remove_range(ctx: &mut Ctx, key: &[u8], by: By, min: &[u8], max: &[u8]) -> Outcome {
    enum Range {
        Rank(i64, i64),
        Score(Bound<f64>, Bound<f64>),
        Lex(Lex, Lex),
    }
    let range = match by {
        By::Score => {
            let (min, max) = score_range(min, max)?;
            Range::Score(min, max)
        }
        By::Lex => Range::Lex(lex_bound(min)?, lex_bound(max)?),
        By::Auto | By::Rank => Range::Rank(parse_int(min)?, parse_int(max)?),
    };
    let Some(mut meta) = ctx.meta_of(key, Kind::ZSet)? else {
        return Ok(Reply::Int(0));
    };
    let doomed = match range {
        Range::Rank(start, end) => members_by_rank(ctx, meta.id, meta.len, start, end, false)?,
        Range::Score(min, max) => members_in_scores(ctx, meta.id, min, max, false, 0, -1)?,
        Range::Lex(min, max) => members_by_lex(ctx, meta.id, &min, &max, false, usize::MAX)?,
    };
    remove_members(ctx, &mut meta, &doomed)?;
    if !doomed.is_empty() {
        meta.len -= doomed.len() as i64;
        let event = match by {
            By::Score => "zremrangebyscore",
            By::Lex => "zremrangebylex",
            By::Auto | By::Rank => "zremrangebyrank",
        };
        ctx.notify(notifications::ZSET, event, key);
        ctx.save(key, &mut meta)?;
    }
    Ok(Reply::Int(doomed.len() as i64))
}

pub fn zremrangebyrank(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    remove_range(ctx, &args[1], By::Rank, &args[2], &args[3])
}

pub fn zremrangebyscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    remove_range(ctx, &args[1], By::Score, &args[2], &args[3])
}

pub fn zremrangebylex(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    remove_range(ctx, &args[1], By::Lex, &args[2], &args[3])
}

/// ZSCAN key cursor [MATCH pattern] [COUNT count]: the whole set in one call (cursor 0),
/// member then score (as a string, as Redis answers it) in score order.
pub fn zscan(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    parse_cursor(&args[2])?;
    let key = &args[1];
    let Some(meta) = ctx.meta_of(key, Kind::ZSet)? else {
        return Ok(scan_reply(Vec::new()));
    };
    let (pattern, _) = collection_scan_options(&args[3..], false)?;
    let all = ctx
        .ks
        .members_from_end(ctx.txn, meta.id, ScanDirection::Ascending, usize::MAX)?;
    let mut items = Vec::new();
    for (member, score) in all {
        if pattern.as_deref().is_none_or(|p| matches(p, &member)) {
            items.push(bulk(member));
            items.push(bulk(format_double(score)));
        }
    }
    Ok(scan_reply(items))
}

/// ZRANDMEMBER key [count [WITHSCORES]]: one random member, or by a count as SRANDMEMBER
/// picks members (with scores: [member, score] pairs in RESP3, flat in RESP2).
pub fn zrandmember(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let count = parse_count_with(&args[2..], "withscores")?;
    let Some(meta) = ctx.meta_of(&args[1], Kind::ZSet)? else {
        return Ok(count.map_or(Reply::Null, |_| Reply::Array(Vec::new())));
    };
    // A large set's members are picked by their positions in member order, not read whole
    // (decision 237): the key's row was read, and every ZADD or ZREM that adds or removes a
    // member changes its count.
    let picks = count.map_or(1, |(count, _)| count.unsigned_abs());
    if by_position(meta.len, picks) {
        let picked = pick_by_position(meta.len as usize, count.map_or(1, |(c, _)| c), |at| {
            ctx.ks.zset_members_at(ctx.txn, meta.id, at)
        })?;
        return Ok(match count {
            None => picked
                .into_iter()
                .next()
                .map_or(Reply::Null, |(member, _)| bulk(member)),
            Some((_, with_scores)) => range_reply(picked, with_scores),
        });
    }
    let all = members_by_rank(ctx, meta.id, meta.len, 0, -1, false)?;
    let Some((count, with_scores)) = count else {
        return Ok(pick_one(all).map_or(Reply::Null, |(member, _)| bulk(member)));
    };
    let (picks, _) = pick_by_count(all, count)?;
    Ok(range_reply(picks, with_scores))
}
