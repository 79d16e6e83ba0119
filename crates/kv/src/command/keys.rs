//! Key commands: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, MOVE, COPY, RANDOMKEY, expiry and
//! DBSIZE.

use tailstore_resp::Reply;
use tailstore_storage::Value;

use super::pattern::matches;
use super::random::Rng;
use super::strings::{deadline_ms, invalid_expire_time};
use super::{bulk, is, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::notifications;
use crate::keyspace::{CopyCursor, ElementRun, KeyMeta};

/// Keys a SCAN call looks at when COUNT is not given (Redis's default hint).
const DEFAULT_COUNT: usize = 10;
/// One past the last slot: the cursor space of SCAN is the 32-bit slot numbers.
const SLOTS: i64 = 1 << 32;
/// Keys RANDOMKEY reads at a time while it passes over expired ones.
const RANDOM_BATCH: usize = 16;

pub fn del(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let mut removed = 0;
    for key in &args[1..] {
        if let Some(meta) = ctx.meta(key)? {
            ctx.remove(key, &meta)?;
            ctx.notify(notifications::GENERIC, "del", key);
            removed += 1;
        }
    }
    Ok(Reply::Int(removed))
}

pub fn exists(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let mut found = 0;
    for key in &args[1..] {
        found += i64::from(ctx.meta(key)?.is_some());
    }
    Ok(Reply::Int(found))
}

pub fn type_(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let name = ctx.meta(&args[1])?.map_or("none", |m| m.kind.name());
    Ok(Reply::Status(name.to_string()))
}

/// Every live key of the selected database, in slot order, with its meta.
fn live_keys(ctx: &mut Ctx, from: i64, limit: usize) -> Result<Vec<(Vec<u8>, KeyMeta)>, Fault> {
    let mut rows = ctx.ks.keys_from(ctx.txn, ctx.db, from, limit)?;
    rows.retain(|(_, meta)| !meta.is_expired(ctx.now));
    Ok(rows)
}

pub fn keys(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let pattern = &args[1];
    let found = live_keys(ctx, 0, usize::MAX)?
        .into_iter()
        .filter(|(key, _)| matches(pattern, key))
        .map(|(key, _)| bulk(key))
        .collect();
    Ok(Reply::Array(found))
}

pub fn dbsize(ctx: &mut Ctx, _args: &[Vec<u8>]) -> Outcome {
    let (keys, _) = ctx.ks.live_counts(ctx.txn, ctx.db, ctx.now)?;
    Ok(Reply::Int(keys as i64))
}

struct ScanOptions<'a> {
    pattern: Option<&'a [u8]>,
    count: usize,
    kind: Option<&'a [u8]>,
}

/// The MATCH pattern of HSCAN / SSCAN / ZSCAN's options (MATCH and COUNT; COUNT is checked
/// but only a hint: those commands answer a whole collection in one call).
pub fn collection_pattern(args: &[Vec<u8>]) -> Result<Option<Vec<u8>>, Fault> {
    Ok(parse_scan_options(args, false)?.pattern.map(<[u8]>::to_vec))
}

fn parse_scan_options(args: &[Vec<u8>], allow_type: bool) -> Result<ScanOptions<'_>, Fault> {
    let mut options = ScanOptions {
        pattern: None,
        count: DEFAULT_COUNT,
        kind: None,
    };
    let mut rest = args.iter();
    while let Some(option) = rest.next() {
        let value = rest.next().ok_or_else(|| Fault::err(SYNTAX))?;
        if is(option, "MATCH") {
            options.pattern = Some(value);
        } else if is(option, "COUNT") {
            let count = parse_int(value)?;
            if count < 1 {
                return Err(Fault::err(SYNTAX));
            }
            options.count = count as usize;
        } else if allow_type && is(option, "TYPE") {
            options.kind = Some(value);
        } else {
            return Err(Fault::err(SYNTAX));
        }
    }
    Ok(options)
}

/// SCAN's cursor is the slot to resume at: keys are stored in slot order, so a key present
/// for the whole iteration is returned exactly once, whatever else changes. Read as
/// Redis reads it, with C's `strtoul`: "" is 0, a sign may lead, and a negative number
/// wraps around (a cursor past the last slot: the scan is over).
pub fn parse_cursor(arg: &[u8]) -> Result<i64, Fault> {
    let (negative, digits) = match arg {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, arg),
    };
    let value = if arg.is_empty() {
        Some(0)
    } else if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        None
    } else {
        digits.iter().try_fold(0u64, |value, digit| {
            value.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
        })
    };
    value
        .map(|c| if negative { c.wrapping_neg() } else { c })
        .map(|c| c.min(SLOTS as u64) as i64)
        .ok_or_else(|| Fault::err("ERR invalid cursor"))
}

pub fn scan(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let from = parse_cursor(&args[1])?;
    let options = parse_scan_options(&args[2..], true)?;
    // Read whole slots: one more row than COUNT tells where the next slot starts.
    let mut rows = ctx.ks.keys_from(ctx.txn, ctx.db, from, options.count + 1)?;
    let next = if rows.len() > options.count {
        let next_slot = crate::keyspace::slot_of(&rows[options.count].0);
        rows.retain(|(key, _)| crate::keyspace::slot_of(key) < next_slot);
        if rows.is_empty() {
            // More than COUNT keys share a slot: take that whole slot.
            rows = ctx.ks.keys_from(ctx.txn, ctx.db, from, usize::MAX)?;
            rows.retain(|(key, _)| crate::keyspace::slot_of(key) == next_slot);
            next_slot + 1
        } else {
            next_slot
        }
    } else {
        0
    };
    let keys = rows
        .into_iter()
        .filter(|(key, meta)| {
            !meta.is_expired(ctx.now)
                && options.pattern.is_none_or(|p| matches(p, key))
                && options.kind.is_none_or(|k| is(k, meta.kind.name()))
        })
        .map(|(key, _)| bulk(key))
        .collect();
    let cursor = if next >= SLOTS { 0 } else { next };
    Ok(Reply::Array(vec![
        bulk(cursor.to_string()),
        Reply::Array(keys),
    ]))
}

pub fn rename(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    if rename_key(ctx, &args[1], &args[2], false)? {
        Ok(Reply::ok())
    } else {
        Ok(Reply::Int(0))
    }
}

pub fn renamenx(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(Reply::Int(i64::from(rename_key(
        ctx, &args[1], &args[2], true,
    )?)))
}

/// Moves `from` to `to` (replacing `to` unless `only_new`); false if `to` existed and
/// `only_new`.
fn rename_key(ctx: &mut Ctx, from: &[u8], to: &[u8], only_new: bool) -> Result<bool, Fault> {
    let Some(meta) = ctx.meta(from)? else {
        return Err(Fault::err("ERR no such key"));
    };
    super::check_key(to)?;
    if from == to {
        return Ok(!only_new);
    }
    if let Some(target) = ctx.meta(to)? {
        if only_new {
            return Ok(false);
        }
        ctx.remove(to, &target)?;
    }
    relocate(ctx, from, meta, ctx.db, to)?;
    ctx.notify(notifications::GENERIC, "rename_from", from);
    ctx.notify(notifications::GENERIC, "rename_to", to);
    Ok(true)
}

/// Moves the key `from` (whose meta is `meta`) to the name `to` of database `db`, where no
/// live key has that name: only its row moves, whatever its size, since its elements belong
/// to its id.
fn relocate(ctx: &mut Ctx, from: &[u8], meta: KeyMeta, db: u32, to: &[u8]) -> Result<(), Fault> {
    // Clears an expired key of that name.
    ctx.in_db(db, |ctx| ctx.meta_for_write(to, meta.kind))?;
    ctx.ks
        .set_deadline(ctx.txn, ctx.db, from, meta.expire_at, 0)?;
    ctx.ks.delete_meta(ctx.txn, ctx.db, from, &meta)?;
    let expire_at = meta.expire_at;
    let mut moved = KeyMeta {
        expire_at: 0,
        stored: false,
        stored_expire_at: 0,
        overwrites: false,
        ..meta
    };
    ctx.in_db(db, |ctx| {
        ctx.set_expiry(to, &mut moved, expire_at)?;
        ctx.store_meta(to, &mut moved)
    })
}

/// A database named by MOVE or COPY: Redis's errors for a number that is not one.
fn database_arg(ctx: &Ctx, arg: &[u8], int_range: bool) -> Result<u32, Fault> {
    let index = parse_int(arg)?;
    if int_range && i32::try_from(index).is_err() {
        return Err(Fault::err(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    u32::try_from(index)
        .ok()
        .filter(|&db| db < ctx.ks.databases())
        .ok_or_else(|| Fault::err("ERR DB index is out of range"))
}

const SAME_OBJECT: &str = "ERR source and destination objects are the same";

/// MOVE key db: 1 if the key moved to database `db`, 0 if it does not exist or `db` has a
/// key of that name.
pub fn move_(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let target = database_arg(ctx, &args[2], true)?;
    if target == ctx.db {
        return Err(Fault::err(SAME_OBJECT));
    }
    let Some(meta) = ctx.meta(key)? else {
        return Ok(Reply::Int(0));
    };
    if ctx.in_db(target, |ctx| ctx.meta(key))?.is_some() {
        return Ok(Reply::Int(0));
    }
    relocate(ctx, key, meta, target, key)?;
    ctx.notify(notifications::GENERIC, "move_from", key);
    ctx.in_db(target, |ctx| {
        ctx.notify(notifications::GENERIC, "move_to", key)
    });
    Ok(Reply::Int(1))
}

/// COPY source destination [DB db] [REPLACE]: 1 if `source` was copied (its elements and
/// its deadline) to `destination`, 0 if it does not exist or, without REPLACE, the
/// destination does.
pub fn copy(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (from, to) = (&args[1], &args[2]);
    let mut target = ctx.db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "REPLACE") {
            replace = true;
        } else if is(&args[i], "DB") && i + 1 < args.len() {
            target = database_arg(ctx, &args[i + 1], false)?;
            i += 1;
        } else {
            return Err(Fault::err(SYNTAX));
        }
        i += 1;
    }
    if target == ctx.db && from == to {
        return Err(Fault::err(SAME_OBJECT));
    }
    // A read lookup, as Redis's COPY makes of its source.
    let Some(source) = ctx.read_meta(from)? else {
        return Ok(Reply::Int(0));
    };
    ctx.in_db(target, |ctx| copy_into(ctx, &source, to, replace))
}

/// COPY's writes in the destination's database: `source`'s copy as `to`.
fn copy_into(ctx: &mut Ctx, source: &KeyMeta, to: &[u8], replace: bool) -> Outcome {
    super::check_key(to)?;
    if let Some(existing) = ctx.meta(to)? {
        if !replace {
            return Ok(Reply::Int(0));
        }
        ctx.remove(to, &existing)?;
    }
    // Clears an expired key of that name, and gives the copy an id of its own.
    let fresh = ctx.meta_for_write(to, source.kind)?;
    let mut copy = KeyMeta {
        expire_at: 0,
        ..fresh
    };
    copy.len = source.len;
    copy.head = source.head;
    copy.tail = source.tail;
    copy_elements(ctx, source, copy.id, |_, _| Ok(true))?;
    ctx.set_expiry(to, &mut copy, source.expire_at)?;
    ctx.store_meta(to, &mut copy)?;
    ctx.notify(notifications::GENERIC, "copy_to", to);
    Ok(Reply::Int(1))
}

/// Copies `source`'s element rows to the new owner `to`. Up to a quarter of a commit's
/// bytes they are written in this command's transaction. A larger key's are written over
/// transactions of their own, a run at a time, as `command/staging.rs` writes a large
/// RESTORE's (decision 140), but read run by run rather than held whole:
/// under the new owner, queued for the lazy free with the first run (a crash or a failure
/// leaves nothing behind) and kept from it until this transaction, which gives the owner
/// its key, is applied. Every run is read in this transaction, so its commit validates
/// them: a write to the source during the copy aborts it, and the copy is made again.
/// Only the rows `keep` accepts (given the row's table, in `element_tables` order, and the
/// row) are copied: a collection rebuilt from what a removal keeps (`rebuild.rs`).
pub(super) fn copy_elements(
    ctx: &mut Ctx,
    source: &KeyMeta,
    to: i64,
    keep: impl Fn(usize, &[Value]) -> Result<bool, Fault>,
) -> Result<(), Fault> {
    let budget = super::staging::piece_bytes(ctx);
    let kind = source.kind;
    let start = CopyCursor::default();
    let kept_of = |run: ElementRun| -> Result<ElementRun, Fault> {
        let mut kept = Vec::with_capacity(run.len());
        for (table, row) in run {
            if keep(table, &row)? {
                kept.push((table, row));
            }
        }
        Ok(kept)
    };
    let (run, mut next) = ctx
        .ks
        .element_run(ctx.txn, source.id, kind, &start, budget)?;
    let mut run = kept_of(run)?;
    if next.is_none() {
        return ctx.ks.put_element_run(ctx.txn, to, kind, &run);
    }
    ctx.building.push(ctx.ks.begin_building(to));
    let mut first = true;
    loop {
        super::staging::write_one_piece(ctx, to, kind, first, |staged| {
            staged.ks.put_element_run(staged.txn, to, kind, &run)
        })?;
        first = false;
        let Some(cursor) = next else {
            break;
        };
        let read;
        (read, next) = ctx
            .ks
            .element_run(ctx.txn, source.id, kind, &cursor, budget)?;
        run = kept_of(read)?;
    }
    ctx.ks.forget_garbage(ctx.txn, to)
}

/// RANDOMKEY: a live key of the selected database, from a random slot on; nil if there is
/// none.
pub fn randomkey(ctx: &mut Ctx, _args: &[Vec<u8>]) -> Outcome {
    let (keys, _) = ctx.ks.live_counts(ctx.txn, ctx.db, ctx.now)?;
    if keys == 0 {
        return Ok(Reply::Null);
    }
    let start = (Rng::new().next() % SLOTS as u64) as i64;
    // From the random slot to the end, then from the first slot round to it.
    for (from, until) in [(start, SLOTS), (0, start)] {
        let mut at = from;
        while at < until {
            let rows = ctx.ks.keys_from(ctx.txn, ctx.db, at, RANDOM_BATCH)?;
            let Some((last, _)) = rows.last() else {
                break;
            };
            at = crate::keyspace::slot_of(last) + 1;
            let live = rows.into_iter().find(|(key, meta)| {
                !meta.is_expired(ctx.now) && crate::keyspace::slot_of(key) < until
            });
            if let Some((key, _)) = live {
                return Ok(bulk(key));
            }
        }
    }
    Ok(Reply::Null)
}

/// EXPIRE's conditions on the key's current deadline.
#[derive(Default)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl ExpireFlags {
    /// Whether a key whose deadline is `current` (0: none) may get deadline `at`. GT treats
    /// "no deadline" as infinite (never exceeded), LT as infinite too (always undercut).
    fn allow(&self, current: i64, at: i64) -> bool {
        !((self.nx && current != 0)
            || (self.xx && current == 0)
            || (self.gt && (current == 0 || at <= current))
            || (self.lt && current != 0 && at >= current))
    }
}

/// The flags after EXPIRE's amount, as Redis reads them: any number, in any order (XX GT is
/// both conditions), repeats allowed; then the pairs that contradict each other refused.
fn parse_expire_flags(args: &[Vec<u8>]) -> Result<ExpireFlags, Fault> {
    let mut flags = ExpireFlags::default();
    for arg in args {
        let flag = match arg.to_ascii_uppercase().as_slice() {
            b"NX" => &mut flags.nx,
            b"XX" => &mut flags.xx,
            b"GT" => &mut flags.gt,
            b"LT" => &mut flags.lt,
            _ => {
                return Err(Fault::err(format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(arg)
                )))
            }
        };
        *flag = true;
    }
    if flags.nx && (flags.xx || flags.gt || flags.lt) {
        return Err(Fault::err(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if flags.gt && flags.lt {
        return Err(Fault::err(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(flags)
}

/// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT key amount [NX | XX | GT | LT …].
pub fn expire(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let unit = match name.as_str() {
        "expire" => "ex",
        "pexpire" => "px",
        "expireat" => "exat",
        _ => "pxat",
    };
    // As in Redis, the flags are checked before the amount.
    let flags = parse_expire_flags(&args[3..])?;
    let at = expiry_deadline(ctx.now, unit, &args[2], &name)?;
    let key = &args[1];
    let Some(mut meta) = ctx.meta(key)? else {
        return Ok(Reply::Int(0));
    };
    if !flags.allow(meta.expire_at, at) {
        return Ok(Reply::Int(0));
    }
    if at <= ctx.now {
        // A deadline in the past deletes the key at once, as in Redis.
        ctx.remove(key, &meta)?;
        ctx.notify(notifications::GENERIC, "del", key);
        return Ok(Reply::Int(1));
    }
    ctx.set_expiry(key, &mut meta, at)?;
    ctx.store_meta(key, &mut meta)?;
    ctx.notify(notifications::GENERIC, "expire", key);
    Ok(Reply::Int(1))
}

/// Like [`super::strings::deadline`], but zero and negative amounts are allowed: they
/// expire the key now (unless so far below zero that Redis finds them out of range: seconds
/// before `i64::MIN / 1000`).
fn expiry_deadline(now: i64, unit: &str, arg: &[u8], command: &str) -> Result<i64, Fault> {
    let amount = parse_int(arg)?;
    let at = deadline_ms(now, unit, amount).ok_or_else(|| invalid_expire_time(command))?;
    Ok(if amount > 0 { at } else { at.min(now - 1) })
}

/// What TTL, PTTL, EXPIRETIME and PEXPIRETIME answer: -2 for no key, -1 for no deadline, else
/// the time left (or, `absolute`, the deadline since the epoch) in units of `unit_ms`,
/// rounded as Redis rounds it.
fn remaining(ctx: &mut Ctx, key: &[u8], unit_ms: i64, absolute: bool) -> Outcome {
    Ok(Reply::Int(match ctx.meta(key)? {
        None => -2,
        Some(meta) if meta.expire_at == 0 => -1,
        Some(meta) => {
            let from = if absolute { 0 } else { ctx.now };
            let left = meta.expire_at.saturating_sub(from).max(0);
            // Rounded half up without adding first: a deadline may be near i64::MAX ms.
            left / unit_ms + i64::from(left % unit_ms >= unit_ms - unit_ms / 2)
        }
    }))
}

pub fn ttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    remaining(ctx, &args[1], 1000, false)
}

pub fn pttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    remaining(ctx, &args[1], 1, false)
}

pub fn expiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    remaining(ctx, &args[1], 1000, true)
}

pub fn pexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    remaining(ctx, &args[1], 1, true)
}

pub fn persist(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    match ctx.meta(key)? {
        Some(mut meta) if meta.expire_at != 0 => {
            ctx.set_expiry(key, &mut meta, 0)?;
            ctx.store_meta(key, &mut meta)?;
            ctx.notify(notifications::GENERIC, "persist", key);
            Ok(Reply::Int(1))
        }
        _ => Ok(Reply::Int(0)),
    }
}

/// What a round of the active expiry removed: the keys (whatever their database), and
/// their `expired` events if the setting asks for them.
pub struct Expired {
    pub keys: Vec<Vec<u8>>,
    pub events: Vec<notifications::KeyEvent>,
}

impl crate::keyspace::Keyspace {
    /// The active expiry: removes up to `limit` keys whose deadline has passed; returns how
    /// many it removed.
    pub fn expire_due(&self, limit: usize) -> Result<usize, tailstore_engine::EngineError> {
        self.expire_due_keys(limit)
            .map(|expired| expired.keys.len())
    }

    /// [`Self::expire_due`], answering the keys it removed, durable by then.
    pub fn expire_due_keys(&self, limit: usize) -> Result<Expired, tailstore_engine::EngineError> {
        self.run_internal(0, |ctx| {
            let due = ctx.ks.due_keys(ctx.txn, ctx.now, limit)?;
            let mut keys = Vec::new();
            for (at, db, key) in due {
                ctx.db = db;
                match ctx.ks.load_meta(ctx.txn, db, &key)? {
                    Some(meta) if meta.is_expired(ctx.now) => {
                        ctx.remove(&key, &meta)?;
                        // A flushed database's keys are no client's (`keyspace::flushes`).
                        if db < ctx.ks.databases() {
                            ctx.tell_expired(&key);
                            keys.push(key);
                        }
                    }
                    // A stale queue entry (the key was rewritten without clearing it).
                    _ => ctx.ks.set_deadline(ctx.txn, db, &key, at, 0)?,
                }
            }
            let events = std::mem::take(&mut ctx.events);
            Ok(Expired { keys, events })
        })
    }
}

impl crate::keyspace::Keyspace {
    /// (live keys, keys with a TTL) in database `db`, for INFO's keyspace section.
    pub fn count_keys(&self, db: u32) -> Result<(u64, u64), String> {
        let _map = self.hold_databases();
        let mut txn = self.database().begin();
        let counts = self.live_counts(&mut txn, db, crate::keyspace::now_ms());
        txn.rollback();
        counts.map_err(|fault| format!("{fault:?}"))
    }
}

impl crate::keyspace::Keyspace {
    /// Deleted keys whose elements the lazy free has yet to remove, and keys of flushed
    /// databases not freed yet (INFO's `lazyfree_pending_objects`); the former counted up
    /// to 100,000 so that INFO stays quick.
    pub fn lazyfree_pending(&self) -> Result<usize, Reply> {
        self.peek(0, |ctx| {
            let flushed = ctx.ks.flushed_keys(ctx.txn)?;
            let queued = ctx.ks.queued_owners(ctx.txn, 100_000)?;
            Ok(queued.saturating_add(usize::try_from(flushed).unwrap_or(0)))
        })
    }

    /// The lazy free: removes up to one batch of the elements of deleted keys (see
    /// `Ctx::remove`); returns how many element rows it removed (0: nothing is queued).
    pub fn free_garbage(&self) -> Result<usize, tailstore_engine::EngineError> {
        self.run_internal(0, |ctx| {
            let Some((owner, kind)) = ctx.ks.next_garbage(ctx.txn)? else {
                return Ok(0);
            };
            let budget = ctx.ks.batch_budget();
            let deleted = ctx.ks.delete_elements(ctx.txn, owner, kind, budget)?;
            if deleted.all {
                ctx.ks.forget_garbage(ctx.txn, owner)?;
                ctx.stats.lazyfreed += 1;
            }
            Ok(deleted.rows.max(1))
        })
    }
}
