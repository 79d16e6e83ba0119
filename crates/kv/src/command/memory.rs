//! MEMORY. tailstore keeps keys in B+tree tables on pages, not in objects on a heap, so
//! MEMORY USAGE answers what a key takes there: its row in `kv_keys` and its elements' rows
//! (keys, bytes and each entry's header room), a collection's estimated from SAMPLES
//! elements (5 by default, 0: all) as Redis estimates its own. A stream's consumer groups
//! are not counted. MEMORY STATS answers what tailstore knows of its memory (the process's
//! resident and peak bytes, the buffer pool, the data file, the keys by database) under
//! Redis's names where they mean the same, tailstore's own otherwise; the figures of Redis's
//! allocator and object overheads it does not have are left out. MEMORY DOCTOR says what
//! there is to watch instead; MALLOC-STATS answers as Redis does without jemalloc, and PURGE
//! has nothing to purge.

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
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return the bytes <key> and its value take in tailstore's tables. Elements of",
    "    collections are sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

/// MEMORY DOCTOR's report: tailstore's memory is a fixed buffer pool, so what there is to
/// diagnose is elsewhere.
const DOCTOR: &str = "tailstore keeps its data in pages of a buffer pool of fixed size \
(--buffer-pool) and in its data file, not on a heap: memory does not grow with the data and \
fragments nowhere, so there is nothing here for a memory doctor to find. INFO memory and \
MEMORY STATS show the pool and the process; INFO persistence shows the checkpoints and the \
log a restart would replay.\n";

/// MEMORY subcommand … (its subcommand checked by `subcommand_check` before it runs, and
/// again here for callers that run it directly).
pub fn memory(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    super::subcommands::check("memory", args).map_err(Fault::err)?;
    match String::from_utf8_lossy(&args[1])
        .to_ascii_lowercase()
        .as_str()
    {
        "help" => Ok(super::help(MEMORY_HELP)),
        "stats" => stats(ctx),
        "doctor" => Ok(Reply::Verbatim {
            format: *b"txt",
            text: DOCTOR.as_bytes().to_vec(),
        }),
        // Redis's answer when its allocator is not jemalloc.
        "malloc-stats" => Ok(super::bulk("Stats not supported for the current allocator")),
        "purge" => Ok(Reply::ok()),
        _ => usage(ctx, args),
    }
}

/// MEMORY STATS: a map of what tailstore knows of its memory (see the module's text).
fn stats(ctx: &mut Ctx) -> Outcome {
    let name = |text: &str| super::bulk(text);
    let int = |n: u64| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
    let engine = ctx.ks.database().stats();
    let page = tailstore_storage::PAGE_SIZE as u64;
    let mut pairs = Vec::new();
    if let Some(process) = process_memory() {
        pairs.push((name("peak.allocated"), int(process.peak)));
        pairs.push((name("total.allocated"), int(process.resident)));
    }
    pairs.push((
        name("tailstore.buffer-pool.bytes"),
        int(engine.pool_pages * page),
    ));
    pairs.push((name("dataset.bytes"), int(engine.data_pages * page)));
    let mut keys = 0;
    for db in 0..ctx.ks.databases() {
        let (live, expiring) = ctx.ks.live_counts(ctx.txn, db, ctx.now)?;
        if live > 0 {
            let counts = vec![(name("keys"), int(live)), (name("expires"), int(expiring))];
            pairs.push((name(&format!("db.{db}")), Reply::Map(counts)));
        }
        keys += live;
    }
    pairs.push((name("keys.count"), int(keys)));
    Ok(Reply::Map(pairs))
}

/// The process's resident bytes now and at their peak.
pub(crate) struct ProcessMemory {
    pub resident: u64,
    pub peak: u64,
}

/// [`ProcessMemory`] from /proc/self/status (`VmRSS`, `VmHWM`); `None` where it cannot be
/// read (not Linux).
pub(crate) fn process_memory() -> Option<ProcessMemory> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some(ProcessMemory {
        resident: kib_field(&status, "VmRSS:")? * 1024,
        peak: kib_field(&status, "VmHWM:")? * 1024,
    })
}

/// The value of a `Name:   123 kB` line of a /proc file (`field` with its colon).
pub(crate) fn kib_field(text: &str, field: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(field))?;
    line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
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
    // Not a lookup Redis counts (it finds the key in the dictionary directly).
    let Some(meta) = ctx.live_meta(key)? else {
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
