//! MEMORY USAGE and MEMORY HELP. tailstore keeps keys in B+tree tables on pages, not in
//! objects on a heap, so MEMORY USAGE answers what a key takes there: its row in `kv_keys`
//! and its elements' rows (keys, bytes and each entry's header room), a collection's
//! estimated from SAMPLES elements (5 by default, 0: all) as Redis estimates its own. A
//! stream's consumer groups are not counted. The rest of Redis's MEMORY (STATS, DOCTOR,
//! MALLOC-STATS, PURGE) describes its allocator and is not implemented.

use tailstore_resp::Reply;
use tailstore_storage::ScanDirection;

use super::{is, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::{KeyMeta, Kind};

/// Elements sampled when SAMPLES does not say (Redis's `OBJ_COMPUTE_SIZE_DEF_SAMPLES`).
const DEFAULT_SAMPLES: usize = 5;
/// A `kv_keys` row's bytes beside its key: database, slot, kind, deadline, version, length,
/// head, tail and id, and the entry's header room.
const KEY_ROW_BYTES: usize = 9 * 9 + 64;
/// A sorted-set member's bytes beside its name: its row and its score index's entry, each
/// with the owner, the score and an entry's header room.
const ZSET_MEMBER_BYTES: usize = 2 * (9 + 9 + 64);

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "USAGE <key> [SAMPLES <count>]",
    "    Return the bytes <key> and its value take in tailstore's tables. Elements of",
    "    collections are sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

/// MEMORY subcommand … (its subcommand checked by `subcommand_check` before it runs, and
/// again here for callers that run it directly).
pub fn memory(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    super::subcommands::check("memory", args).map_err(Fault::err)?;
    if is(&args[1], "help") {
        return Ok(super::help(MEMORY_HELP));
    }
    usage(ctx, args)
}

/// MEMORY USAGE key [SAMPLES count]: about the bytes of the key's rows; nil if it does not
/// exist.
fn usage(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let mut samples = DEFAULT_SAMPLES;
    let mut i = 3;
    while i < args.len() {
        if !(is(&args[i], "SAMPLES") && i + 1 < args.len()) {
            return Err(Fault::err(SYNTAX));
        }
        samples = match parse_int(&args[i + 1])? {
            n if n < 0 => return Err(Fault::err(SYNTAX)),
            0 => usize::MAX,
            n => usize::try_from(n).unwrap_or(usize::MAX),
        };
        i += 2;
    }
    let key = &args[2];
    let Some(meta) = ctx.meta(key)? else {
        return Ok(Reply::Null);
    };
    let elements = element_bytes(ctx, &meta, samples)?;
    Ok(Reply::Int((key.len() + KEY_ROW_BYTES + elements) as i64))
}

/// The bytes of the key's element rows: a string's parts counted, a collection's estimated
/// from its first `samples` elements.
fn element_bytes(ctx: &mut Ctx, meta: &KeyMeta, samples: usize) -> Result<usize, Fault> {
    let len = meta.len.max(0) as usize;
    let sampled: Vec<usize> = match meta.kind {
        Kind::String => return Ok(ctx.ks.stored_bytes(b"", len)),
        Kind::ZSet => ctx
            .ks
            .members_from_end(ctx.txn, meta.id, ScanDirection::Ascending, samples)?
            .iter()
            .map(|(member, _)| member.len() + ZSET_MEMBER_BYTES)
            .collect(),
        Kind::List | Kind::Set | Kind::Hash | Kind::Stream => ctx
            .ks
            .fields(ctx.txn, meta.id, ScanDirection::Ascending, samples)?
            .iter()
            .map(|(field, value)| ctx.ks.stored_bytes(field, value.len()))
            .collect(),
    };
    if sampled.is_empty() {
        return Ok(0);
    }
    let total: usize = sampled.iter().sum();
    // The sample's mean per element, times the elements.
    Ok((total as u128 * len as u128 / sampled.len() as u128) as usize)
}
