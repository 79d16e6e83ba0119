//! What the blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX,
//! BLMPOP, BZMPOP, XREAD and XREADGROUP with BLOCK) share: their timeout, read as Redis
//! reads it, and the keys they wait on; and the pops from the first of several keys
//! (LMPOP, ZMPOP and their blocking forms). Each handler is the command run once, without
//! waiting; the server blocks the client on its nil (`server/blocking.rs`).

use tailstore_resp::Reply;

use super::hashes::wrong_arity;
use super::streams::parse_read;
use super::{
    bulk, is, of_kind, parse_int, parse_long_double, Command, Ctx, Fault, Outcome, SYNTAX,
};
use crate::keyspace::{KeyMeta, Kind};

/// The keys a blocked command waits on: the ones it pops from (BLMOVE's and BRPOPLPUSH's
/// source, not their destination; XREAD's streams; every key of the others).
pub fn blocking_sources<'a>(name: &str, args: &'a [Vec<u8>]) -> &'a [Vec<u8>] {
    match name {
        "blmove" | "brpoplpush" => &args[1..2.min(args.len())],
        "xread" | "xreadgroup" => parse_read(args, name == "xreadgroup").map_or(&[], |r| r.keys),
        "blmpop" | "bzmpop" => numbered_keys(args, 2).unwrap_or_default(),
        _ => &args[1..args.len().saturating_sub(1).max(1)],
    }
}

/// How long a blocking command that finds nothing waits, in milliseconds (`Some(None)`:
/// for ever); `None` if it does not wait: XREAD without BLOCK, or arguments its run will
/// answer with an error.
pub fn blocking_timeout(name: &str, args: &[Vec<u8>]) -> Option<Option<u64>> {
    match name {
        "xread" | "xreadgroup" => parse_read(args, name == "xreadgroup").ok()?.block,
        "blmpop" | "bzmpop" => parse_timeout(args.get(1)?).ok(),
        _ => parse_timeout(args.last()?).ok(),
    }
}

/// Redis's refusal of a command a script may not run as it was sent: XREAD's and
/// XREADGROUP's BLOCK (named as the script typed it).
pub fn refused_in_script(command: &Command, args: &[Vec<u8>]) -> Option<Reply> {
    let group = match command.name {
        "xread" => false,
        "xreadgroup" => true,
        _ => return None,
    };
    let read = parse_read(args, group).ok()?;
    read.block.is_some().then(|| {
        Reply::error(format!(
            "ERR {} command is not allowed with BLOCK option from scripts",
            String::from_utf8_lossy(&args[0])
        ))
    })
}

/// `KEY [KEY …] timeout` (BLPOP, BRPOP, BZPOPMIN, BZPOPMAX) run once, in Redis's order:
/// the timeout first, then the keys in turn; the first key that holds a `kind` is popped
/// by `pop` (its reply's elements after the key's name; none: nothing popped, the next
/// key is tried), a key of another kind answered
/// with WRONGTYPE only if no earlier key had one. A nil array when none does: the server
/// blocks a client on it (`server/blocking.rs`); inside MULTI, as in Redis, it is the reply.
pub(super) fn pop_first(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    kind: Kind,
    mut pop: impl FnMut(&mut Ctx, &[u8], KeyMeta) -> Result<Vec<Reply>, Fault>,
) -> Outcome {
    let (timeout, keys) = args[1..].split_last().ok_or_else(|| wrong_arity(args))?;
    parse_timeout(timeout)?;
    for key in keys {
        if let Some(meta) = waited_meta_of(ctx, key, kind)? {
            let popped = pop(ctx, key, meta)?;
            if !popped.is_empty() {
                let reply = std::iter::once(bulk(key.clone())).chain(popped);
                return Ok(Reply::Array(reply.collect()));
            }
        }
    }
    Ok(Reply::NullArray)
}

/// The options after LMPOP's or ZMPOP's end, read as Redis reads them: a first COUNT with a
/// value is checked at once (so a bad count is told before a word after it); any other
/// word, or a second COUNT, is a syntax error. 1 without COUNT.
fn multi_pop_count(options: &[Vec<u8>]) -> Result<i64, Fault> {
    let mut count = None;
    let mut at = 0;
    while at < options.len() {
        let more = at + 1 < options.len();
        if count.is_none() && is(&options[at], "count") && more {
            at += 1;
            let value = parse_int(&options[at]).ok().filter(|&c| c > 0);
            count = Some(value.ok_or_else(|| Fault::err("ERR count should be greater than 0"))?);
        } else {
            return Err(Fault::err(SYNTAX));
        }
        at += 1;
    }
    Ok(count.unwrap_or(1))
}

/// The meta of a key a blocking command pops from, if it holds `kind`. Another kind is
/// WRONGTYPE on the command's first run; on a blocked client's later runs it is passed
/// over, as Redis leaves a client blocked (or serves it from another of its keys) when a
/// key it waits on is written with another type.
pub(super) fn waited_meta_of(
    ctx: &mut Ctx,
    key: &[u8],
    kind: Kind,
) -> Result<Option<KeyMeta>, Fault> {
    match ctx.meta(key)? {
        Some(meta) if meta.kind != kind && ctx.is_blocked_rerun() => Ok(None),
        meta => of_kind(meta, kind),
    }
}

/// A blocking command's timeout in seconds (its last argument), as Redis 7.0.15 reads it: a
/// long double, times 1,000, rounded up to whole milliseconds (so `0.0001` waits 1 ms, and
/// only 0, or a fraction of a millisecond below it, waits forever); what rounds below zero,
/// or does not fit an i64 (`inf`, `1e17`), is "negative". `None` is no deadline.
pub fn parse_timeout(arg: &[u8]) -> Result<Option<u64>, Fault> {
    let seconds = parse_long_double(arg)
        .map_err(|_| Fault::err("ERR timeout is not a float or out of range"))?;
    let ms = seconds * 1000.0;
    // 2^63: the first f64 an i64 cannot hold (Redis's cast gives i64::MIN past it).
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !(-LIMIT..LIMIT).contains(&ms) || ms <= -1.0 {
        return Err(Fault::err("ERR timeout is negative"));
    }
    let millis = ms.ceil() as u64;
    Ok((millis > 0).then_some(millis))
}

/// The keys of LMPOP, ZMPOP and their blocking forms: `numkeys key…` from `numkeys_at`;
/// `None` if they do not fit the arguments.
pub(super) fn numbered_keys(args: &[Vec<u8>], numkeys_at: usize) -> Option<&[Vec<u8>]> {
    let count = usize::try_from(parse_int(args.get(numkeys_at)?).ok()?).ok()?;
    args.get(numkeys_at + 1..numkeys_at + 1 + count)
}

/// LMPOP numkeys key [key …] LEFT|RIGHT [COUNT count] and ZMPOP's MIN|MAX (`ends`), from
/// `numkeys_at` (BLMPOP and BZMPOP have their timeout before): the first of the keys that
/// holds a non-empty `kind` is popped by `pop` (from the first end if `first`, up to
/// `count`) and answered `[key, [element…]]`; a nil array when none does, which blocks
/// a client of the blocking forms. Arguments are checked as Redis checks them, in its
/// order: numkeys, the end, COUNT, the timeout, then each key's kind as it is reached.
pub(super) fn multi_pop(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    numkeys_at: usize,
    (kind, ends): (Kind, [&str; 2]),
    mut pop: impl FnMut(&mut Ctx, &[u8], KeyMeta, bool, i64) -> Result<Vec<Reply>, Fault>,
) -> Outcome {
    let numkeys = parse_int(&args[numkeys_at])
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Fault::err("ERR numkeys should be greater than 0"))?;
    let end_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(numkeys_at + 1))
        .filter(|&at| at < args.len())
        .ok_or_else(|| Fault::err(SYNTAX))?;
    let first = match &args[end_at] {
        end if is(end, ends[0]) => true,
        end if is(end, ends[1]) => false,
        _ => return Err(Fault::err(SYNTAX)),
    };
    let count = multi_pop_count(&args[end_at + 1..])?;
    if numkeys_at == 2 {
        parse_timeout(&args[1])?;
    }
    for key in &args[numkeys_at + 1..end_at] {
        let Some(meta) = waited_meta_of(ctx, key, kind)? else {
            continue;
        };
        if meta.len > 0 {
            let popped = pop(ctx, key, meta, first, count)?;
            return Ok(Reply::Array(vec![bulk(key.clone()), Reply::Array(popped)]));
        }
    }
    Ok(Reply::NullArray)
}
