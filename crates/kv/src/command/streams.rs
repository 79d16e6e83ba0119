//! Stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM and XREAD, whose BLOCK form
//! the server waits on like BLPOP (`server/blocking.rs`). Consumer groups (XGROUP,
//! XREADGROUP, XACK…) and XINFO are not implemented.
//!
//! How entries are stored: `keyspace::stream`. Arguments are read as Redis 7.0 reads them,
//! in its order, so that a command with two faults gets Redis's error for the first.
//!
//! Approximate trimming (`MAXLEN ~`, `MINID ~`) removes whole runs of [`NODE_ENTRIES`] of
//! the oldest entries, as Redis removes whole nodes of its radix tree (which hold up to 100
//! entries, and fewer when the entries are large): the stream keeps at least what it asked
//! for, and most XADDs of a capped stream trim nothing.

use tailstore_resp::Reply;
use tailstore_storage::ScanDirection;

use super::hashes::wrong_arity;
use super::rebuild::{keep_only, remove_held, Elements, Kept};
use super::{bulk, is, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::notifications;
use crate::keyspace::stream::{decode_entry, encode_entry, StreamId};
use crate::keyspace::{KeyMeta, Kind};

/// Redis's reply to an ID argument that does not parse.
const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
/// The entries approximate trimming removes at a time (Redis's `stream-node-max-entries`).
const NODE_ENTRIES: u64 = 100;
/// The longest ID argument Redis reads (its parse buffer is 128 bytes).
const MAX_ID_TEXT: usize = 127;

// ---------------------------------------------------------------------------------------
// IDs

/// An unsigned number as Redis's `string2ull` reads it: a strict integer (no sign, space or
/// leading zero) that must not be negative, or else whatever C's `strtoull` accepts in
/// full (leading spaces and a sign, `-` wrapping around). The argument ends at a NUL, as a
/// C string does.
fn parse_u64(text: &[u8]) -> Option<u64> {
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    if let Ok(value) = parse_int(text) {
        return u64::try_from(value).ok();
    }
    let start = text
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .unwrap_or(text.len());
    let text = &text[start..];
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = digits.iter().try_fold(0u64, |value, digit| {
        value.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
    })?;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// An ID argument: `ms-seq`, or `ms` (the sequence number is then `missing_seq`), or, unless
/// `strict`, `-` and `+` (the smallest and largest IDs). With `star` (XADD), `ms-*` leaves
/// the sequence number to the stream: the second value says whether it was given.
fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    star: bool,
) -> Result<(StreamId, bool), Fault> {
    let invalid = || Fault::err(INVALID_ID);
    if arg.len() > MAX_ID_TEXT {
        return Err(invalid());
    }
    match arg {
        b"-" | b"+" if strict => return Err(invalid()),
        b"-" => return Ok((StreamId::MIN, true)),
        b"+" => return Ok((StreamId::MAX, true)),
        _ => {}
    }
    let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
        Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms).ok_or_else(invalid)?;
    match seq {
        Some(b"*") if star => Ok((StreamId::new(ms, 0), false)),
        Some(seq) => Ok((StreamId::new(ms, parse_u64(seq).ok_or_else(invalid)?), true)),
        None => Ok((StreamId::new(ms, missing_seq), true)),
    }
}

/// An ID that must be given in full or as `ms` (XDEL, XREAD, MINID).
pub(super) fn parse_strict_id(arg: &[u8]) -> Result<StreamId, Fault> {
    Ok(parse_id(arg, 0, true, false)?.0)
}

/// An ID, `ms`, `-` or `+` (XGROUP SETID).
pub(super) fn parse_loose_id(arg: &[u8]) -> Result<StreamId, Fault> {
    Ok(parse_id(arg, 0, false, false)?.0)
}

/// An interval of IDs as XRANGE and XPENDING read it, start first: each end an ID, `-`,
/// `+`, or `(ID` excluding the ID; Redis's errors for an exclusive end beyond the last ID.
pub(super) fn parse_interval(start: &[u8], end: &[u8]) -> Result<(StreamId, StreamId), Fault> {
    let start = parse_range_start(start)?;
    let (end, exclusive) = parse_interval_end(end, u64::MAX)?;
    let end = match exclusive {
        true => end
            .previous()
            .ok_or_else(|| Fault::err("ERR invalid end ID for the interval"))?,
        false => end,
    };
    Ok((start, end))
}

/// The start of an interval (XAUTOCLAIM's start too).
pub(super) fn parse_range_start(arg: &[u8]) -> Result<StreamId, Fault> {
    let (start, exclusive) = parse_interval_end(arg, 0)?;
    match exclusive {
        true => start
            .next()
            .ok_or_else(|| Fault::err("ERR invalid start ID for the interval")),
        false => Ok(start),
    }
}

/// One end of an XRANGE interval: an ID, `-` or `+`, or `(ID`, which excludes the ID.
fn parse_interval_end(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), Fault> {
    match arg {
        [b'(', id @ ..] if !id.is_empty() => Ok((parse_id(id, missing_seq, true, false)?.0, true)),
        _ => Ok((parse_id(arg, missing_seq, false, false)?.0, false)),
    }
}

// ---------------------------------------------------------------------------------------
// entries

/// Up to `limit` entries with IDs in `first..=last`, from the `direction`'s end.
fn entries(
    ctx: &mut Ctx,
    owner: i64,
    (first, last): (StreamId, StreamId),
    direction: ScanDirection,
    limit: usize,
) -> Result<Vec<(StreamId, Vec<u8>)>, Fault> {
    if first > last || limit == 0 {
        return Ok(Vec::new());
    }
    let found = ctx.ks.fields_range(
        ctx.txn,
        owner,
        &first.field(),
        &last.field(),
        direction,
        limit,
    )?;
    found
        .into_iter()
        .map(|(field, stored)| Ok((StreamId::of_field(&field)?, stored)))
        .collect()
}

/// Entries as Redis sends them: `[id, [field, value, …]]` each.
fn entries_reply(entries: Vec<(StreamId, Vec<u8>)>) -> Result<Reply, Fault> {
    let replies = entries
        .into_iter()
        .map(|(id, stored)| entry_reply(id, &stored))
        .collect::<Result<Vec<_>, Fault>>()?;
    Ok(Reply::Array(replies))
}

/// One entry as Redis sends it: `[id, [field, value, …]]`.
pub(super) fn entry_reply(id: StreamId, stored: &[u8]) -> Result<Reply, Fault> {
    let items = decode_entry(stored)?.into_iter().map(Reply::Bulk).collect();
    Ok(Reply::Array(vec![
        bulk(id.to_string()),
        Reply::Array(items),
    ]))
}

// ---------------------------------------------------------------------------------------
// XADD and XTRIM

/// How a stream is trimmed: what it keeps, whether approximately, and (approximately only)
/// how many entries one trim removes at most (0: no limit).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Trim {
    keep: Keep,
    approximate: bool,
    limit: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Keep {
    /// At most this many entries.
    Newest(u64),
    /// The entries from this ID on.
    From(StreamId),
}

/// XADD's and XTRIM's options, as Redis parses them in one loop.
#[derive(Default)]
struct AddOrTrim {
    trim: Option<Trim>,
    no_mkstream: bool,
    /// XADD's ID and whether its sequence number was given (`None`: `*`).
    id: Option<(StreamId, bool)>,
    /// Where XADD's field/value pairs start.
    fields_at: usize,
}

fn parse_add_or_trim(args: &[Vec<u8>], xadd: bool) -> Result<AddOrTrim, Fault> {
    let mut parsed = AddOrTrim::default();
    let (mut keep, mut approximate, mut limit) = (None, false, None);
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let option = args[i].as_slice();
        if xadd && option == b"*" {
            break;
        } else if (is(option, "maxlen") || is(option, "minid")) && more > 0 {
            if keep.is_some() {
                return Err(Fault::err(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            approximate = false;
            if more >= 2 && matches!(args[i + 1].as_slice(), b"~" | b"=") {
                approximate = args[i + 1] == b"~";
                i += 1;
            }
            let threshold = &args[i + 1];
            keep = Some(if is(option, "maxlen") {
                let max = parse_int(threshold)?;
                let max = u64::try_from(max)
                    .map_err(|_| Fault::err("ERR The MAXLEN argument must be >= 0."))?;
                Keep::Newest(max)
            } else {
                Keep::From(parse_strict_id(threshold)?)
            });
            i += 1;
        } else if is(option, "limit") && more > 0 {
            let count = parse_int(&args[i + 1])?;
            let count = u64::try_from(count)
                .map_err(|_| Fault::err("ERR The LIMIT argument must be >= 0."))?;
            limit = Some(count);
            i += 1;
        } else if xadd && is(option, "nomkstream") {
            parsed.no_mkstream = true;
        } else if xadd {
            parsed.id = Some(parse_id(option, 0, true, true)?);
            break;
        } else {
            return Err(Fault::err(SYNTAX));
        }
        i += 1;
    }
    parsed.fields_at = i + 1;
    if limit.is_some_and(|l| l > 0) && keep.is_none() {
        return Err(Fault::err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && keep.is_none() {
        return Err(Fault::err(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit.is_some() && !approximate {
        return Err(Fault::err(
            "ERR syntax error, LIMIT cannot be used without the special ~ option",
        ));
    }
    parsed.trim = keep.map(|keep| Trim {
        keep,
        approximate,
        limit: match limit {
            Some(limit) => limit,
            None if approximate => 100 * NODE_ENTRIES,
            None => 0,
        },
    });
    Ok(parsed)
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|ID field value [field
/// value …]
pub fn xadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let parsed = parse_add_or_trim(args, true)?;
    let pairs = args.get(parsed.fields_at..).unwrap_or_default();
    if pairs.len() < 2 || !pairs.len().is_multiple_of(2) {
        return Err(wrong_arity(args));
    }
    if parsed.id == Some((StreamId::MIN, true)) {
        return Err(Fault::err(
            "ERR The ID specified in XADD must be greater than 0-0",
        ));
    }
    let key = &args[1];
    if parsed.no_mkstream && ctx.meta_of(key, Kind::Stream)?.is_none() {
        return Ok(Reply::Null);
    }
    let mut meta = ctx.meta_for_write(key, Kind::Stream)?;
    let id = next_id(&meta, parsed.id, ctx.now)?;
    let stored = encode_entry(pairs);
    ctx.check_commit_room(stored.len())?;
    ctx.ks
        .write_value(ctx.txn, meta.id, &id.field(), &stored, None)?;
    // One more entry, one more added: the stream's counts row is left alone.
    meta.len += 1;
    id.store_as_last(&mut meta);
    let trimmed = match parsed.trim {
        Some(trim) => trim_stream(ctx, &mut meta, trim)?,
        None => 0,
    };
    ctx.save(key, &mut meta)?;
    ctx.notify(notifications::STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(notifications::STREAM, "xtrim", key);
    }
    Ok(bulk(id.to_string()))
}

/// The ID XADD gives its entry: `asked` (`None`: `*`, from the clock `now_ms`), which must
/// be larger than every ID the stream had.
fn next_id(
    meta: &KeyMeta,
    asked: Option<(StreamId, bool)>,
    now_ms: i64,
) -> Result<StreamId, Fault> {
    let last = StreamId::last_of(meta);
    if last == StreamId::MAX {
        return Err(Fault::err(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let too_small = || {
        Fault::err(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        )
    };
    let id = match asked {
        None => {
            let now = u64::try_from(now_ms).unwrap_or(0);
            if now > last.ms {
                StreamId::new(now, 0)
            } else {
                last.next().ok_or_else(too_small)?
            }
        }
        // No sequence number is left in that ms: Redis 7.0 fails the append without
        // saying why, and XADD answers its catch-all text.
        Some((id, false)) if id.ms == last.ms => last
            .next()
            .filter(|n| n.ms == id.ms)
            .ok_or_else(|| Fault::err("ERR Elements are too large to be stored"))?,
        Some((id, _)) => id,
    };
    if id <= last {
        return Err(too_small());
    }
    Ok(id)
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]: how many entries it removed.
pub fn xtrim(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let parsed = parse_add_or_trim(args, false)?;
    let key = &args[1];
    let Some(mut meta) = ctx.meta_of(key, Kind::Stream)? else {
        return Ok(Reply::Int(0));
    };
    let Some(trim) = parsed.trim else {
        return Ok(Reply::Int(0));
    };
    let removed = trim_stream(ctx, &mut meta, trim)?;
    if removed > 0 {
        ctx.save(key, &mut meta)?;
        ctx.notify(notifications::STREAM, "xtrim", key);
    }
    Ok(Reply::Int(removed as i64))
}

/// Removes the oldest entries `trim` does not keep; how many (the caller saves `meta`).
fn trim_stream(ctx: &mut Ctx, meta: &mut KeyMeta, trim: Trim) -> Result<usize, Fault> {
    let whole_runs = |count: u64| count - count % NODE_ENTRIES;
    let capped = |count: u64| match trim.limit {
        0 => count,
        limit => count.min(whole_runs(limit)),
    };
    let oldest = match trim.keep {
        Keep::Newest(max) => {
            let excess = (meta.len as u64).saturating_sub(max);
            let count = if trim.approximate {
                capped(whole_runs(excess))
            } else {
                excess
            };
            entries(
                ctx,
                meta.id,
                (StreamId::MIN, StreamId::MAX),
                ScanDirection::Ascending,
                count as usize,
            )?
        }
        Keep::From(first_kept) => {
            let Some(last_removed) = first_kept.previous() else {
                return Ok(0);
            };
            let limit = if trim.approximate {
                capped(u64::MAX)
            } else {
                u64::MAX
            };
            let mut below = entries(
                ctx,
                meta.id,
                (StreamId::MIN, last_removed),
                ScanDirection::Ascending,
                usize::try_from(limit).unwrap_or(usize::MAX),
            )?;
            if trim.approximate {
                below.truncate(whole_runs(below.len() as u64) as usize);
            }
            below
        }
    };
    if oldest.is_empty() {
        return Ok(0);
    }
    let counts = ctx.ks.stream_counts(ctx.txn, meta)?;
    if ctx.rebuilds_removals {
        // The oldest entries go: the kept ones are those after the last of them.
        if let Some((last_removed, _)) = oldest.last() {
            keep_only(ctx, meta, Kept::EntriesAfter(last_removed.field().to_vec()))?;
        }
    } else {
        for (id, stored) in &oldest {
            ctx.ks
                .remove_value(ctx.txn, meta.id, &id.field(), stored.len())?;
        }
    }
    meta.len -= oldest.len() as i64;
    // As many entries added as before: as many more removed.
    ctx.ks.put_stream_counts(ctx.txn, meta, counts)?;
    Ok(oldest.len())
}

// ---------------------------------------------------------------------------------------
// reads and deletes

/// XLEN key
pub fn xlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let meta = ctx.meta_of(&args[1], Kind::Stream)?;
    Ok(Reply::Int(meta.map_or(0, |m| m.len)))
}

/// XRANGE key start end [COUNT count]
pub fn xrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    range(ctx, args, ScanDirection::Ascending)
}

/// XREVRANGE key end start [COUNT count]
pub fn xrevrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    range(ctx, args, ScanDirection::Descending)
}

fn range(ctx: &mut Ctx, args: &[Vec<u8>], direction: ScanDirection) -> Outcome {
    let (start, end) = match direction {
        ScanDirection::Ascending => (&args[2], &args[3]),
        ScanDirection::Descending => (&args[3], &args[2]),
    };
    let (start, end) = parse_interval(start, end)?;
    let mut count = None;
    let mut options = args[4..].iter();
    while let Some(option) = options.next() {
        match options.next() {
            Some(value) if is(option, "count") => count = Some(parse_int(value)?.max(0)),
            _ => return Err(Fault::err(SYNTAX)),
        }
    }
    let Some(meta) = ctx.meta_of(&args[1], Kind::Stream)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == Some(0) {
        return Ok(Reply::NullArray);
    }
    let limit = count.map_or(usize::MAX, |c| usize::try_from(c).unwrap_or(usize::MAX));
    entries_reply(entries(ctx, meta.id, (start, end), direction, limit)?)
}

/// XDEL key id [id …]: how many of the entries existed.
pub fn xdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let Some(mut meta) = ctx.meta_of(key, Kind::Stream)? else {
        return Ok(Reply::Int(0));
    };
    let ids = args[2..]
        .iter()
        .map(|arg| parse_strict_id(arg))
        .collect::<Result<Vec<_>, _>>()?;
    let mut counts = ctx.ks.stream_counts(ctx.txn, &meta)?;
    // The named entries the stream holds, each once (an ID named twice counts once).
    let mut held = std::collections::BTreeSet::new();
    for id in ids {
        let field = id.field();
        if !held.contains(&field) && ctx.ks.value_len(ctx.txn, meta.id, &field)?.is_some() {
            counts.max_deleted = counts.max_deleted.max(id);
            held.insert(field);
        }
    }
    let deleted = held.len() as i64;
    if deleted > 0 {
        remove_held(
            ctx,
            &mut meta,
            held.iter().map(|f| &f[..]),
            Elements::Values,
        )?;
        meta.len -= deleted;
        ctx.ks.put_stream_counts(ctx.txn, &meta, counts)?;
        ctx.save(key, &mut meta)?;
        ctx.notify(notifications::STREAM, "xdel", key);
    }
    Ok(Reply::Int(deleted))
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]: sets the
/// stream's last ID (the one XADD must exceed) and, if given, its count of entries added
/// and its largest deleted ID, with Redis 7.0's checks in its order.
pub fn xsetid(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let id = parse_strict_id(&args[2])?;
    let (mut entries_added, mut max_deleted) = (None, None);
    let mut i = 3;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if is(&args[i], "ENTRIESADDED") && has_value {
            let count = parse_int(&args[i + 1])?;
            if count < 0 {
                return Err(Fault::err("ERR entries_added must be positive"));
            }
            entries_added = Some(count);
        } else if is(&args[i], "MAXDELETEDID") && has_value {
            let deleted = parse_strict_id(&args[i + 1])?;
            if id < deleted {
                return Err(Fault::err(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            max_deleted = Some(deleted);
        } else {
            return Err(Fault::err(SYNTAX));
        }
        i += 2;
    }
    let key = &args[1];
    let mut meta = ctx
        .meta_of(key, Kind::Stream)?
        .ok_or_else(|| Fault::err("ERR no such key"))?;
    // Redis 7.0 does not compare the ID with the largest deleted ID it has (later
    // versions refuse a smaller one), only with the top entry's.
    let mut counts = ctx.ks.stream_counts(ctx.txn, &meta)?;
    if meta.len > 0 {
        let last_entry = ctx
            .ks
            .fields(ctx.txn, meta.id, ScanDirection::Descending, 1)?;
        if let Some((field, _)) = last_entry.first() {
            if id < StreamId::of_field(field)? {
                return Err(Fault::err(
                    "ERR The ID specified in XSETID is smaller than the target stream top item",
                ));
            }
        }
        if entries_added.is_some_and(|count| count < meta.len) {
            return Err(Fault::err(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    counts.entries_added = entries_added.unwrap_or(counts.entries_added);
    // MAXDELETEDID 0-0 leaves the count as it was, as in Redis.
    counts.max_deleted = max_deleted
        .filter(|deleted| *deleted != StreamId::MIN)
        .unwrap_or(counts.max_deleted);
    ctx.ks.put_stream_counts(ctx.txn, &meta, counts)?;
    id.store_as_last(&mut meta);
    ctx.save(key, &mut meta)?;
    ctx.notify(notifications::STREAM, "xsetid", key);
    Ok(Reply::ok())
}

// ---------------------------------------------------------------------------------------
// XREAD

/// XREAD's and XREADGROUP's options.
pub struct ReadArgs<'a> {
    /// Entries per stream at most (0: all).
    count: usize,
    /// BLOCK's timeout in milliseconds (`Some(None)`: forever), `None` without BLOCK.
    pub block: Option<Option<u64>>,
    /// XREADGROUP's group and consumer.
    pub group: Option<(&'a [u8], &'a [u8])>,
    pub noack: bool,
    pub keys: &'a [Vec<u8>],
    pub ids: &'a [Vec<u8>],
}

impl ReadArgs<'_> {
    /// Entries per stream at most.
    pub fn limit(&self) -> usize {
        match self.count {
            0 => usize::MAX,
            count => count,
        }
    }
}

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key …] id [id …], or with
/// `xreadgroup` XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK]
/// STREAMS …: the options, in Redis's order of checks.
pub fn parse_read(args: &[Vec<u8>], xreadgroup: bool) -> Result<ReadArgs<'_>, Fault> {
    let mut read = ReadArgs {
        count: 0,
        block: None,
        group: None,
        noack: false,
        keys: &[],
        ids: &[],
    };
    let mut i = 1;
    let mut streams = None;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let option = args[i].as_slice();
        if is(option, "block") && more > 0 {
            read.block = Some(parse_block_timeout(&args[i + 1])?);
            i += 1;
        } else if is(option, "count") && more > 0 {
            read.count = usize::try_from(parse_int(&args[i + 1])?.max(0)).unwrap_or(usize::MAX);
            i += 1;
        } else if is(option, "streams") && more > 0 {
            let listed = &args[i + 1..];
            if !listed.len().is_multiple_of(2) {
                // Redis 7.0 names XREAD and `$` for XREADGROUP too.
                return Err(Fault::err(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            streams = Some(listed.split_at(listed.len() / 2));
            break;
        } else if is(option, "group") && more >= 2 {
            if !xreadgroup {
                return Err(Fault::err(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            read.group = Some((&args[i + 1], &args[i + 2]));
            i += 2;
        } else if is(option, "noack") {
            if !xreadgroup {
                return Err(Fault::err(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            read.noack = true;
        } else {
            return Err(Fault::err(SYNTAX));
        }
        i += 1;
    }
    let (keys, ids) = streams.ok_or_else(|| Fault::err(SYNTAX))?;
    if xreadgroup && read.group.is_none() {
        return Err(Fault::err("ERR Missing GROUP option for XREADGROUP"));
    }
    (read.keys, read.ids) = (keys, ids);
    Ok(read)
}

/// What the server blocks an XREAD or XREADGROUP (`xreadgroup`) on: `args`, with `COUNT
/// 1000` before STREAMS when they ask for every entry (no COUNT, or 0). Redis serves a
/// blocked read at most that many entries per stream, so that an ID far in the past, or a
/// burst of entries while it waited, does not make one huge reply (here also a
/// transaction larger than a commit may be).
pub fn with_blocked_count(mut args: Vec<Vec<u8>>, xreadgroup: bool) -> Vec<Vec<u8>> {
    const BLOCKED_DEFAULT_COUNT: &[u8] = b"1000";
    let Ok(read) = parse_read(&args, xreadgroup) else {
        return args; // its run answers the error
    };
    if read.count != 0 {
        return args;
    }
    let streams_at = args.len() - 2 * read.keys.len() - 1;
    let count = [b"COUNT".to_vec(), BLOCKED_DEFAULT_COUNT.to_vec()];
    args.splice(streams_at..streams_at, count);
    args
}

/// XREAD's options ([`parse_read`]).
pub fn parse_xread(args: &[Vec<u8>]) -> Result<ReadArgs<'_>, Fault> {
    parse_read(args, false)
}

/// BLOCK's timeout: whole milliseconds, 0 for ever.
fn parse_block_timeout(arg: &[u8]) -> Result<Option<u64>, Fault> {
    let ms =
        parse_int(arg).map_err(|_| Fault::err("ERR timeout is not an integer or out of range"))?;
    match u64::try_from(ms) {
        Err(_) => Err(Fault::err("ERR timeout is negative")),
        Ok(0) => Ok(None),
        Ok(ms) => Ok(Some(ms)),
    }
}

/// XREAD run once: for each stream, its entries after the ID given (`$`: after its last ID
/// now, so none), as a map of the streams that have any; a nil array if none has. The
/// server blocks a client with BLOCK on the nil, after [`resolve_last_ids`].
pub fn xread(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let read = parse_xread(args)?;
    // Each stream's row and the ID to read after, every key checked before any is read.
    let mut targets = Vec::with_capacity(read.ids.len());
    for (key, id) in read.keys.iter().zip(read.ids) {
        let meta = ctx.meta_of(key, Kind::Stream)?;
        let after = match id.as_slice() {
            b"$" => meta.as_ref().map_or(StreamId::MIN, StreamId::last_of),
            b">" => {
                return Err(Fault::err(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ))
            }
            id => parse_strict_id(id)?,
        };
        targets.push((key, meta, after));
    }
    let limit = read.limit();
    let mut streams = Vec::new();
    for (key, meta, after) in targets {
        // Redis looks each stream up again (a read) as it serves it.
        ctx.count_lookup(key, meta.is_some());
        let (Some(meta), Some(first)) = (meta, after.next()) else {
            continue;
        };
        let found = entries(
            ctx,
            meta.id,
            (first, StreamId::MAX),
            ScanDirection::Ascending,
            limit,
        )?;
        if !found.is_empty() {
            streams.push((bulk(key.clone()), entries_reply(found)?));
        }
    }
    if streams.is_empty() {
        return Ok(Reply::NullArray);
    }
    Ok(Reply::Keyed(streams))
}

/// XREAD's arguments with each `$` replaced by its stream's last ID now (`0-0` for a
/// stream that does not exist): what a blocked XREAD waits for is what comes after the
/// moment it blocked, however often it runs again.
pub fn resolve_last_ids(ctx: &mut Ctx, args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, Fault> {
    let read = parse_xread(args)?;
    let ids_at = args.len() - read.ids.len();
    let mut resolved = args.to_vec();
    for (at, key) in (ids_at..).zip(read.keys) {
        if resolved[at] == b"$" {
            let meta = ctx.meta_of(key, Kind::Stream)?;
            let last = meta.as_ref().map_or(StreamId::MIN, StreamId::last_of);
            resolved[at] = last.to_string().into_bytes();
        }
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Option<(StreamId, bool)> {
        parse_id(text.as_bytes(), 7, false, true).ok()
    }

    #[test]
    fn ids_are_read_as_redis_reads_them() {
        assert_eq!(id("5-3"), Some((StreamId::new(5, 3), true)));
        assert_eq!(id("5"), Some((StreamId::new(5, 7), true)));
        assert_eq!(id("5-*"), Some((StreamId::new(5, 0), false)));
        assert_eq!(id("-"), Some((StreamId::MIN, true)));
        assert_eq!(id("+"), Some((StreamId::MAX, true)));
        // strtoull's leniency, which Redis inherits.
        assert_eq!(id("+5"), Some((StreamId::new(5, 7), true)));
        assert_eq!(id(" 5-05"), Some((StreamId::new(5, 5), true)));
        assert_eq!(id("5- -1"), Some((StreamId::new(5, u64::MAX), true)));
        assert_eq!(id("5\0junk"), Some((StreamId::new(5, 7), true)));
        for bad in [
            "",
            "-5",
            "5-",
            "5--1",
            "1-2-3",
            "x",
            "18446744073709551616",
            "(5",
        ] {
            assert_eq!(id(bad), None, "{bad:?}");
        }
        assert_eq!(id(&"1".repeat(128)), None, "longer than Redis's buffer");
        assert!(
            parse_id(b"5-*", 0, true, false).is_err(),
            "`*` is XADD's only"
        );
        assert!(parse_id(b"+", 0, true, false).is_err(), "strict: no `+`");
    }

    #[test]
    fn interval_ends_may_be_exclusive() {
        assert_eq!(
            parse_interval_end(b"(5", 0).ok(),
            Some((StreamId::new(5, 0), true))
        );
        assert_eq!(
            parse_interval_end(b"5", 9).ok(),
            Some((StreamId::new(5, 9), false))
        );
        assert!(parse_interval_end(b"(-", 0).is_err());
        assert!(parse_interval_end(b"(", 0).is_err());
    }

    #[test]
    fn trim_options_follow_redis() {
        let args = |line: &str| -> Vec<Vec<u8>> {
            line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
        };
        let trim = |line: &str| parse_add_or_trim(&args(line), false).map(|p| p.trim);
        assert_eq!(
            trim("xtrim s maxlen ~ 10").ok().flatten(),
            Some(Trim {
                keep: Keep::Newest(10),
                approximate: true,
                limit: 10_000
            })
        );
        assert!(trim("xtrim s MINID 5 extra").is_err());
        assert!(trim("xtrim s maxlen = 1 limit 10").is_err());
        assert!(trim("xtrim s maxlen 1 minid 2").is_err());
        assert!(trim("xtrim s limit 10").is_err());
        let added = parse_add_or_trim(&args("xadd s nomkstream maxlen 5 9-* f v"), true);
        let added = added.ok().map(|p| (p.no_mkstream, p.id, p.fields_at));
        assert_eq!(added, Some((true, Some((StreamId::new(9, 0), false)), 6)));
    }

    #[test]
    fn xadd_ids_grow() {
        let mut meta = KeyMeta::new(Kind::Stream, 1);
        StreamId::new(5, 5).store_as_last(&mut meta);
        let next = |meta: &KeyMeta, asked| next_id(meta, asked, 3).ok();
        assert_eq!(
            next(&meta, None),
            Some(StreamId::new(5, 6)),
            "a clock behind the stream"
        );
        assert_eq!(
            next(&meta, Some((StreamId::new(5, 0), false))),
            Some(StreamId::new(5, 6))
        );
        assert_eq!(
            next(&meta, Some((StreamId::new(6, 0), false))),
            Some(StreamId::new(6, 0))
        );
        assert_eq!(next(&meta, Some((StreamId::new(4, 0), false))), None);
        assert_eq!(next(&meta, Some((StreamId::new(5, 5), true))), None);
        StreamId::new(5, u64::MAX).store_as_last(&mut meta);
        assert_eq!(
            next(&meta, Some((StreamId::new(5, 0), false))),
            None,
            "5-* is full"
        );
        assert_eq!(next(&meta, None), Some(StreamId::new(6, 0)));
        StreamId::MAX.store_as_last(&mut meta);
        assert!(next(&meta, None).is_none());
    }
}
