//! OBJECT ENCODING, REFCOUNT, FREQ, IDLETIME and HELP.
//!
//! tailstore keeps values in B+tree rows, not in Redis's objects, so ENCODING names the
//! encoding Redis 7.0 would give the value as it is now, by Redis's default thresholds:
//! `int`, `embstr` or `raw` for strings, `quicklist` for lists, `intset` or `hashtable`
//! for sets, `listpack` or `hashtable` for hashes, `listpack` or `skiplist` for sorted
//! sets, `stream`. Redis never converts a value back to its compact encoding once it has
//! grown out of it (nor a string from `raw` once APPEND or SETRANGE touched it); here a
//! value that shrank is named by what it holds. REFCOUNT answers 1, or Redis's shared
//! integers' count for the integers 0–9999 it shares. Access times and frequencies are
//! not kept (no eviction policy uses them): FREQ answers Redis's refusal under the
//! `noeviction` policy, IDLETIME a refusal of its own.

use tailstore_resp::Reply;
use tailstore_storage::ScanDirection;

use super::{is, parse_int, Ctx, Fault, Outcome};
use crate::keyspace::{KeyMeta, Kind};

/// Redis 7.0's defaults: `set-max-intset-entries`, `hash-max-listpack-entries`,
/// `zset-max-listpack-entries`, their `-value` (64 for both), and the longest `embstr`.
const INTSET_ENTRIES: usize = 512;
const HASH_LISTPACK_ENTRIES: usize = 512;
const ZSET_LISTPACK_ENTRIES: usize = 128;
const LISTPACK_VALUE: usize = 64;
const EMBSTR_BYTES: usize = 44;
/// Integers Redis shares one object for (`OBJ_SHARED_INTEGERS`), and that object's count.
const SHARED_INTEGERS: i64 = 10_000;
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the encoding Redis would use for the value stored at <key>.",
    "FREQ <key>",
    "    Not tracked: tailstore evicts nothing, so it keeps no access frequencies.",
    "IDLETIME <key>",
    "    Not tracked: tailstore evicts nothing, so it keeps no access times.",
    "REFCOUNT <key>",
    "    Return the number of references Redis would hold to the value of <key>.",
    "HELP",
    "    Prints this help.",
];

/// OBJECT subcommand [key] (its arity checked by `subcommand_check` before it runs, and
/// again here for callers that run it directly).
pub fn object(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    if args.len() < 2 {
        return Err(Fault::err(
            "ERR wrong number of arguments for 'object' command",
        ));
    }
    if let Err(refusal) = super::subcommands::check("object", args) {
        return Err(Fault::err(refusal));
    }
    if is(&args[1], "help") {
        return Ok(super::help(OBJECT_HELP));
    }
    let key = &args[2];
    let Some(meta) = ctx.meta(key)? else {
        return Ok(Reply::Null);
    };
    if is(&args[1], "encoding") {
        let encoding = encoding(ctx, key, &meta)?;
        Ok(Reply::Bulk(encoding.as_bytes().to_vec()))
    } else if is(&args[1], "refcount") {
        let shared = string_encoding(ctx, key, &meta)?.1;
        Ok(Reply::Int(if shared { SHARED_REFCOUNT } else { 1 }))
    } else if is(&args[1], "freq") {
        Err(Fault::err(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please \
             note that when switching between policies at runtime LRU and LFU data will take \
             some time to adjust.",
        ))
    } else {
        Err(Fault::err(
            "ERR tailstore keeps no access times (it evicts nothing): OBJECT IDLETIME is not \
             tracked",
        ))
    }
}

/// The encoding Redis 7.0 would give the value now.
fn encoding(ctx: &mut Ctx, key: &[u8], meta: &KeyMeta) -> Result<&'static str, Fault> {
    let len = usize::try_from(meta.len).unwrap_or(0);
    Ok(match meta.kind {
        Kind::String => string_encoding(ctx, key, meta)?.0,
        Kind::List => "quicklist",
        Kind::Stream => "stream",
        Kind::Set if len <= INTSET_ENTRIES => {
            let members = ctx
                .ks
                .fields(ctx.txn, meta.id, ScanDirection::Ascending, len)?;
            if members.iter().all(|(member, _)| parse_int(member).is_ok()) {
                "intset"
            } else {
                "hashtable"
            }
        }
        Kind::Set => "hashtable",
        Kind::Hash if len <= HASH_LISTPACK_ENTRIES => {
            let fields = ctx
                .ks
                .fields(ctx.txn, meta.id, ScanDirection::Ascending, len)?;
            let short = |(field, value): &(Vec<u8>, Vec<u8>)| {
                field.len() <= LISTPACK_VALUE && value.len() <= LISTPACK_VALUE
            };
            if fields.iter().all(short) {
                "listpack"
            } else {
                "hashtable"
            }
        }
        Kind::Hash => "hashtable",
        Kind::ZSet if len <= ZSET_LISTPACK_ENTRIES => {
            let members =
                ctx.ks
                    .members_from_end(ctx.txn, meta.id, ScanDirection::Ascending, len)?;
            if members.iter().all(|(m, _)| m.len() <= LISTPACK_VALUE) {
                "listpack"
            } else {
                "skiplist"
            }
        }
        Kind::ZSet => "skiplist",
    })
}

/// A string's encoding, and whether Redis would share its object (an integer below
/// 10,000); `("", false)` for other kinds.
fn string_encoding(
    ctx: &mut Ctx,
    key: &[u8],
    meta: &KeyMeta,
) -> Result<(&'static str, bool), Fault> {
    if meta.kind != Kind::String {
        return Ok(("", false));
    }
    if usize::try_from(meta.len).map_or(true, |len| len > EMBSTR_BYTES) {
        return Ok(("raw", false));
    }
    let value = ctx.string(key)?.unwrap_or_default();
    Ok(match parse_int(&value) {
        Ok(n) if value.len() <= 20 => ("int", (0..SHARED_INTEGERS).contains(&n)),
        _ => ("embstr", false),
    })
}
