//! What the blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX, XREAD
//! with BLOCK) share: their timeout, read as Redis reads it, and the keys they wait on. Each handler is the
//! command run once, without waiting; the server blocks the client on its nil
//! (`server/blocking.rs`).

use tailstore_resp::Reply;

use super::hashes::wrong_arity;
use super::streams::parse_read;
use super::{bulk, parse_long_double, Command, Ctx, Fault, Outcome};
use crate::keyspace::{KeyMeta, Kind};

/// The keys a blocked command waits on: the ones it pops from (BLMOVE's and BRPOPLPUSH's
/// source, not their destination; XREAD's streams; every key of the others).
pub fn blocking_sources<'a>(name: &str, args: &'a [Vec<u8>]) -> &'a [Vec<u8>] {
    match name {
        "blmove" | "brpoplpush" => &args[1..2.min(args.len())],
        "xread" | "xreadgroup" => parse_read(args, name == "xreadgroup").map_or(&[], |r| r.keys),
        _ => &args[1..args.len().saturating_sub(1).max(1)],
    }
}

/// How long a blocking command that finds nothing waits, in milliseconds (`Some(None)`:
/// for ever); `None` if it does not wait: XREAD without BLOCK, or arguments its run will
/// answer with an error.
pub fn blocking_timeout(name: &str, args: &[Vec<u8>]) -> Option<Option<u64>> {
    match name {
        "xread" | "xreadgroup" => parse_read(args, name == "xreadgroup").ok()?.block,
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
        if let Some(meta) = ctx.meta_of(key, kind)? {
            let popped = pop(ctx, key, meta)?;
            if !popped.is_empty() {
                let reply = std::iter::once(bulk(key.clone())).chain(popped);
                return Ok(Reply::Array(reply.collect()));
            }
        }
    }
    Ok(Reply::NullArray)
}

/// A blocking command's timeout in seconds (its last argument), as Redis 7.0 reads it: a
/// long double, times 1,000, truncated to whole milliseconds (so `0.0001` is 0, which waits
/// forever); what truncates below zero, or does not fit an i64 (`inf`, `1e17`), is
/// "negative". `None` is no deadline.
pub fn parse_timeout(arg: &[u8]) -> Result<Option<u64>, Fault> {
    let seconds = parse_long_double(arg)
        .map_err(|_| Fault::err("ERR timeout is not a float or out of range"))?;
    let ms = seconds * 1000.0;
    // 2^63: the first f64 an i64 cannot hold (Redis's cast gives i64::MIN past it).
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !(-LIMIT..LIMIT).contains(&ms) || ms <= -1.0 {
        return Err(Fault::err("ERR timeout is negative"));
    }
    let millis = ms.trunc() as u64;
    Ok((millis > 0).then_some(millis))
}
