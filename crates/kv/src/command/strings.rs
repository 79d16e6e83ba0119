//! String commands: GET, SET and friends, counters, ranges.

use tailstore_resp::{format_human, Reply};

use super::{
    bulk, parse_int, parse_long_double, Ctx, Fault, Outcome, NOT_INTEGER, SYNTAX, WRONGTYPE,
};
use crate::keyspace::notifications;
use crate::keyspace::{KeyMeta, Kind};

impl Ctx<'_, '_> {
    /// The string at `key`, `None` if absent; WRONGTYPE for another kind. A lookup of the
    /// running command's kind, as [`Ctx::meta`]'s.
    pub fn string(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Fault> {
        let meta = self.meta(key)?;
        self.string_in(meta)
    }

    /// [`Ctx::string`] as a read lookup whatever the command ([`Ctx::read_meta`]).
    pub fn read_string(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Fault> {
        let meta = self.read_meta(key)?;
        self.string_in(meta)
    }

    /// The string at `key` as its meta row and its length (part 0's, which decides, as in
    /// [`Ctx::string`]), for a command that reads or writes a few of its bytes
    /// (`Keyspace::visit_value_range`); `None` if absent, WRONGTYPE for another kind.
    pub(super) fn string_total(&mut self, key: &[u8]) -> Result<Option<(KeyMeta, usize)>, Fault> {
        let meta = self.meta(key)?;
        self.string_total_in(meta)
    }

    /// [`Ctx::string_total`] as a read lookup whatever the command ([`Ctx::read_meta`]).
    pub(super) fn read_string_total(
        &mut self,
        key: &[u8],
    ) -> Result<Option<(KeyMeta, usize)>, Fault> {
        let meta = self.read_meta(key)?;
        self.string_total_in(meta)
    }

    fn string_total_in(
        &mut self,
        meta: Option<KeyMeta>,
    ) -> Result<Option<(KeyMeta, usize)>, Fault> {
        let Some(meta) = super::of_kind(meta, Kind::String)? else {
            return Ok(None);
        };
        // No part 0 reads as no string, as `read_value` answers.
        let total = self.ks.value_len(self.txn, meta.id, b"")?;
        Ok(total.map(|total| (meta, total)))
    }

    /// Bytes `range` of the string `meta` of `total` bytes ([`Ctx::string_total`]'s).
    /// The whole string `found` ([`Ctx::string_total`]) names, empty if none: what a write
    /// that grows it rewrites.
    pub(super) fn whole_string(
        &mut self,
        found: Option<(KeyMeta, usize)>,
    ) -> Result<Vec<u8>, Fault> {
        match found {
            Some((meta, total)) => Ok(self
                .ks
                .read_value(self.txn, meta.id, b"", Some(total))?
                .unwrap_or_default()),
            None => Ok(Vec::new()),
        }
    }

    pub(super) fn string_bytes(
        &mut self,
        meta: &KeyMeta,
        total: usize,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<u8>, Fault> {
        self.ks
            .read_value_range(self.txn, meta.id, b"", total, range)
    }

    /// Writes `patch` at `offset` into the live string `meta` of `total` bytes
    /// ([`Ctx::string_total`]'s), zero-filling and growing it if the patch ends past it: only
    /// the part rows that hold changed bytes are rewritten, and part 0 if the length changes
    /// (`Keyspace::patch_value`). The string's new length. Only for a write
    /// [`Ctx::patches_in_place`] allows.
    pub(super) fn patch_string(
        &mut self,
        key: &[u8],
        mut meta: KeyMeta,
        total: usize,
        offset: usize,
        patch: &[u8],
    ) -> Result<usize, Fault> {
        let new_total = self
            .ks
            .patch_value(self.txn, meta.id, b"", total, offset, patch)?;
        // As `put_string_over`: same length, same deadline, so the row would differ only in
        // its version, which only a WATCH needs.
        if string_len(&meta) == Some(new_total) && self.may_keep_row() {
            return Ok(new_total);
        }
        meta.len = new_total as i64;
        self.store_meta(key, &mut meta)?;
        Ok(new_total)
    }

    /// Replaces the string at `key`, which `stored` (its meta row as loaded, expired or not)
    /// and `old` (its bytes, if it is a live string) describe, by `new`. When `new` has
    /// `old`'s length, only the part rows whose bytes changed are rewritten, from `new`,
    /// with nothing read again. Otherwise, or when those parts are more than a piece, as
    /// [`Ctx::put_string_over`] (keeping the deadline). A PFADD to a dense HyperLogLog
    /// changes its header and a register: one or two of its three parts (decision 240).
    pub(super) fn put_string_changes(
        &mut self,
        key: &[u8],
        stored: Option<KeyMeta>,
        old: Option<&[u8]>,
        new: &[u8],
    ) -> Result<(), Fault> {
        let live = stored
            .as_ref()
            .filter(|meta| meta.kind == Kind::String && !meta.is_expired(self.now));
        let (Some(meta), Some(old)) = (live, old) else {
            return self.put_string_over(key, stored, new, None);
        };
        let capacity = self.ks.part_capacity(b"");
        let changed: Vec<usize> = old
            .chunks(capacity)
            .zip(new.chunks(capacity))
            .enumerate()
            .filter_map(|(part, (was, is))| (was != is).then_some(part))
            .collect();
        let rewritten = changed.len().saturating_mul(capacity);
        if new.len() != old.len() || rewritten > super::staging::piece_bytes(self) {
            return self.put_string_over(key, stored, new, None);
        }
        let mut meta = meta.clone();
        for part in changed {
            self.ks
                .write_value_parts(self.txn, meta.id, b"", new, part..part + 1)?;
        }
        // Same length, same deadline: the row would differ only in its version, which only
        // a WATCH needs (see `keyspace::watches`).
        if self.may_keep_row() {
            return Ok(());
        }
        self.store_meta(key, &mut meta)
    }

    /// Whether `len` bytes written at `offset` into a string of `total` bytes may be
    /// written in place ([`Ctx::patch_string`]): not when the bytes it changes (with the
    /// zeros between the string's end and `offset`) are more than a piece, which its
    /// command's own transaction must not write (decision 148); `put_string` writes such a
    /// string whole, in pieces.
    pub(super) fn patches_in_place(&self, total: usize, offset: usize, len: usize) -> bool {
        let changed = offset.saturating_add(len) - offset.min(total);
        changed <= super::staging::piece_bytes(self)
    }

    /// Refuses a string of `len` bytes longer than `proto-max-bulk-len` (`serve
    /// --max-bulk`), with Redis's error (APPEND, SETRANGE).
    fn check_size(&self, len: i64) -> Result<(), Fault> {
        let limit = i64::try_from(self.ks.max_bulk()).unwrap_or(i64::MAX);
        if len > limit {
            return Err(Fault::err(
                "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
            ));
        }
        Ok(())
    }

    /// The string of the live key `meta` (if any); WRONGTYPE for another kind.
    fn string_in(&mut self, meta: Option<KeyMeta>) -> Result<Option<Vec<u8>>, Fault> {
        match meta {
            Some(meta) if meta.kind != Kind::String => Err(Fault::err(WRONGTYPE)),
            Some(meta) => string_of(self, &meta),
            None => Ok(None),
        }
    }

    /// The string at `key`, as [`Ctx::string`], and the key's meta row as stored (expired or
    /// not): a read-modify-write (INCR, APPEND…) hands the row to [`Ctx::put_string_over`]
    /// rather than descending to it a second time.
    ///
    /// This is the lookup of a key the command changes (no hit or miss counted);
    /// [`Ctx::read_string_and_row`] is a read lookup.
    pub fn string_and_row(
        &mut self,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, Option<KeyMeta>), Fault> {
        self.string_and_row_looked_up(key, false)
    }

    /// [`Ctx::string_and_row`] as a read lookup (PFCOUNT, which may write its cache).
    pub fn read_string_and_row(
        &mut self,
        key: &[u8],
    ) -> Result<(Option<Vec<u8>>, Option<KeyMeta>), Fault> {
        self.string_and_row_looked_up(key, true)
    }

    fn string_and_row_looked_up(
        &mut self,
        key: &[u8],
        counted: bool,
    ) -> Result<(Option<Vec<u8>>, Option<KeyMeta>), Fault> {
        super::check_key(key)?;
        let stored = self.ks.load_meta(self.txn, self.db, key)?;
        let live = stored.clone().filter(|m| !m.is_expired(self.now));
        if counted {
            self.count_lookup(key, live.is_some());
        }
        let value = self.string_in(live)?;
        Ok((value, stored))
    }

    /// Replaces whatever `key` holds with the string `value`, with deadline `expire_at`
    /// (`None` keeps the current one, as KEEPTTL).
    pub fn put_string(
        &mut self,
        key: &[u8],
        value: &[u8],
        expire_at: Option<i64>,
    ) -> Result<(), Fault> {
        super::check_key(key)?;
        let stored = self.ks.load_meta(self.txn, self.db, key)?;
        self.put_string_over(key, stored, value, expire_at)
    }

    /// [`Ctx::put_string`] when the caller has already loaded the key's meta row (`stored`,
    /// expired or not).
    pub fn put_string_over(
        &mut self,
        key: &[u8],
        stored: Option<KeyMeta>,
        value: &[u8],
        expire_at: Option<i64>,
    ) -> Result<(), Fault> {
        if super::staging::is_long(self, value) {
            return self.put_long_string(key, stored, value, expire_at);
        }
        // KEEPTTL keeps a live key's deadline whatever it held, as Redis does.
        let mut expire_at = expire_at;
        let mut meta = match stored {
            Some(old)
                if old.kind == Kind::String
                    && !old.is_expired(self.now)
                    && !self.shrinks_past_inline(&old, value.len()) =>
            {
                old
            }
            Some(old) => {
                let live = !old.is_expired(self.now);
                expire_at = self.remove_replaced(key, &old, expire_at)?;
                if live {
                    self.overwriting_meta(Kind::String)
                } else {
                    self.new_meta(Kind::String)
                }
            }
            None => self.new_meta(Kind::String),
        };
        let old_total = meta.stored.then_some(meta.len as usize);
        let before = meta.clone();
        self.ks
            .write_value(self.txn, meta.id, b"", value, old_total)?;
        meta.len = value.len() as i64;
        if let Some(at) = expire_at {
            self.set_expiry(key, &mut meta, at)?;
        }
        // Same length, same deadline: the row would differ only in its version, which only
        // a WATCH needs (see `keyspace::watches`).
        if meta.stored && meta == before && self.may_keep_row() {
            return Ok(());
        }
        self.store_meta(key, &mut meta)
    }

    /// [`Ctx::put_string_over`] of a string longer than a piece (decision 148): its parts are
    /// written in pieces, in transactions of their own, under a new owner
    /// (`command/staging.rs`); this transaction removes the key's old value (freed lazily
    /// if large) and gives the key the new owner. A string longer than one commit could
    /// hold is stored so, and one whose write would fit is too: its transaction stays small.
    fn put_long_string(
        &mut self,
        key: &[u8],
        stored: Option<KeyMeta>,
        value: &[u8],
        expire_at: Option<i64>,
    ) -> Result<(), Fault> {
        let mut expire_at = expire_at;
        let mut overwrites = false;
        if let Some(old) = stored {
            overwrites = !old.is_expired(self.now);
            expire_at = self.remove_replaced(key, &old, expire_at)?;
        }
        let pieces = super::staging::string_pieces(self, value);
        let mut meta = super::staging::write_staged(self, Kind::String, &pieces)?;
        meta.overwrites = overwrites;
        self.ks.forget_garbage(self.txn, meta.id)?;
        if let Some(at) = expire_at {
            self.set_expiry(key, &mut meta, at)?;
        }
        self.store_meta(key, &mut meta)
    }

    /// Removes `old`, the key's value that a new string replaces; the deadline the new value
    /// gets: `expire_at`, or, when that is `None` (KEEPTTL), a live old value's.
    fn remove_replaced(
        &mut self,
        key: &[u8],
        old: &KeyMeta,
        expire_at: Option<i64>,
    ) -> Result<Option<i64>, Fault> {
        let expired = old.is_expired(self.now);
        self.remove(key, old)?;
        if expired {
            self.tell_expired(key);
        }
        let kept = (!expired).then_some(old.expire_at);
        Ok(expire_at.or(kept))
    }

    /// Whether writing `new_len` bytes over the string `old` would remove many of its parts
    /// (see `Keyspace::shrinks_past_inline`).
    fn shrinks_past_inline(&self, old: &KeyMeta, new_len: usize) -> bool {
        let old_len = string_len(old).unwrap_or(0);
        old.stored && self.ks.shrinks_past_inline(old_len, new_len)
    }
}

/// A string's length as its meta row has it (every string write keeps it), for reading all
/// its parts at once; `None` if the row says something impossible.
fn string_len(meta: &KeyMeta) -> Option<usize> {
    usize::try_from(meta.len).ok()
}

pub fn get(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(ctx.string(&args[1])?.map_or(Reply::Null, bulk))
}

/// When SET writes: always, only if the key is absent (NX), only if present (XX).
#[derive(PartialEq)]
enum Condition {
    Always,
    IfAbsent,
    IfPresent,
}

struct SetOptions {
    condition: Condition,
    /// `None`: clear the TTL; `Some(None)`: keep it; `Some(Some(at))`: expire at `at`.
    expiry: Option<Option<i64>>,
    get: bool,
}

/// The TTL options of SET as given, before the amount is parsed.
enum Ttl<'a> {
    Clear,
    Keep,
    /// EX, PX, EXAT or PXAT (lower case) and its amount.
    Deadline(String, &'a [u8]),
}

impl Ttl<'_> {
    /// Whether `option` (lower case, KEEPTTL included) may follow this one. As in Redis, an
    /// option may be repeated (the last amount counts) but not mixed with another TTL option.
    fn allows(&self, option: &str) -> bool {
        match self {
            Ttl::Clear => true,
            Ttl::Keep => option == "keepttl",
            Ttl::Deadline(unit, _) => unit == option,
        }
    }
}

fn parse_set_options(ctx: &Ctx, args: &[Vec<u8>]) -> Result<SetOptions, Fault> {
    let (mut condition, mut ttl, mut get) = (Condition::Always, Ttl::Clear, false);
    let mut i = 3;
    while i < args.len() {
        let arg = &args[i];
        let name = String::from_utf8_lossy(arg).to_ascii_lowercase();
        let next = args.get(i + 1);
        match (name.as_str(), next) {
            ("nx", _) if condition != Condition::IfPresent => condition = Condition::IfAbsent,
            ("xx", _) if condition != Condition::IfAbsent => condition = Condition::IfPresent,
            ("get", _) => get = true,
            ("keepttl", _) if ttl.allows(&name) => ttl = Ttl::Keep,
            ("ex" | "px" | "exat" | "pxat", Some(amount)) if ttl.allows(&name) => {
                ttl = Ttl::Deadline(name, amount);
                i += 1;
            }
            _ => return Err(Fault::err(SYNTAX)),
        }
        i += 1;
    }
    // Redis parses the amount only once every option is known to fit: a syntax error
    // anywhere comes first, and only the last of repeated amounts is checked.
    let expiry = match ttl {
        Ttl::Clear => None,
        Ttl::Keep => Some(None),
        Ttl::Deadline(unit, amount) => Some(Some(deadline(ctx.now, &unit, amount, "set")?)),
    };
    Ok(SetOptions {
        condition,
        expiry,
        get,
    })
}

/// The deadline an EX/PX/EXAT/PXAT argument names, in ms since the epoch.
pub fn deadline(now: i64, unit: &str, arg: &[u8], command: &str) -> Result<i64, Fault> {
    let amount = parse_int(arg)?;
    if amount <= 0 {
        return Err(invalid_expire_time(command));
    }
    deadline_ms(now, unit, amount).ok_or_else(|| invalid_expire_time(command))
}

/// The deadline, in ms since the epoch, that `amount` in `unit` (ex, px, exat, pxat) names
/// at `now`; `None` where Redis finds it out of range: seconds that overflow as ms, or a
/// relative amount that overflows when added to now. Negative amounts are allowed.
pub fn deadline_ms(now: i64, unit: &str, amount: i64) -> Option<i64> {
    let ms = match unit {
        "ex" | "exat" => amount.checked_mul(1000)?,
        _ => amount,
    };
    let base = match unit {
        "ex" | "px" => now,
        _ => 0,
    };
    ms.checked_add(base)
}

pub fn invalid_expire_time(command: &str) -> Fault {
    Fault::err(format!("ERR invalid expire time in '{command}' command"))
}

pub fn set(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let options = parse_set_options(ctx, args)?;
    let key = &args[1];
    super::check_key(key)?;
    let stored = ctx.ks.load_meta(ctx.txn, ctx.db, key)?;
    let live = stored.clone().filter(|m| !m.is_expired(ctx.now));
    if options.get {
        // GET's lookup, as Redis's SET … GET runs GET first.
        ctx.count_lookup(key, live.is_some());
    }
    let old = match live {
        Some(meta) if options.get && meta.kind != Kind::String => {
            return Err(Fault::err(super::WRONGTYPE))
        }
        Some(meta) => Some(meta),
        None => None,
    };
    let previous = match &old {
        Some(meta) if options.get => ctx.ks.read_value(ctx.txn, meta.id, b"", string_len(meta))?,
        _ => None,
    };
    let blocked = match options.condition {
        Condition::Always => false,
        Condition::IfAbsent => old.is_some(),
        Condition::IfPresent => old.is_none(),
    };
    if !blocked {
        let expire_at = match options.expiry {
            None => Some(0),
            Some(keep_or_at) => keep_or_at,
        };
        ctx.put_string_over(key, stored, &args[2], expire_at)?;
        ctx.notify(notifications::STRING, "set", key);
        if matches!(expire_at, Some(at) if at != 0) {
            ctx.notify(notifications::GENERIC, "expire", key);
        }
    }
    Ok(match (options.get, blocked) {
        (true, _) => previous.map_or(Reply::Null, bulk),
        (false, true) => Reply::Null,
        (false, false) => Reply::ok(),
    })
}

pub fn setnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    if ctx.meta(&args[1])?.is_some() {
        return Ok(Reply::Int(0));
    }
    ctx.put_string(&args[1], &args[2], Some(0))?;
    ctx.notify(notifications::STRING, "set", &args[1]);
    Ok(Reply::Int(1))
}

/// SETEX key seconds value / PSETEX key milliseconds value.
pub fn setex(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let unit = if name == "setex" { "ex" } else { "px" };
    let at = deadline(ctx.now, unit, &args[2], &name)?;
    ctx.put_string(&args[1], &args[3], Some(at))?;
    ctx.notify(notifications::STRING, "set", &args[1]);
    ctx.notify(notifications::GENERIC, "expire", &args[1]);
    Ok(Reply::ok())
}

pub fn getset(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let old = ctx.read_string(&args[1])?;
    ctx.put_string(&args[1], &args[2], Some(0))?;
    ctx.notify(notifications::STRING, "set", &args[1]);
    Ok(old.map_or(Reply::Null, bulk))
}

pub fn getdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let Some(value) = ctx.read_string(key)? else {
        return Ok(Reply::Null);
    };
    if let Some(meta) = ctx.meta(key)? {
        ctx.remove(key, &meta)?;
        ctx.notify(notifications::GENERIC, "del", key);
    }
    Ok(bulk(value))
}

/// What GETEX does to the key's deadline.
enum DeadlineChange<'a> {
    Keep,
    /// PERSIST.
    Clear,
    /// EX, PX, EXAT or PXAT (lower case) and its amount, parsed only once the key is known
    /// to be a string.
    Set(String, &'a [u8]),
}

/// GETEX's options as Redis parses them: any one of EX, PX, EXAT, PXAT and PERSIST, which may
/// be repeated (the last amount counts) but not mixed.
fn parse_getex_options(args: &[Vec<u8>]) -> Result<DeadlineChange<'_>, Fault> {
    let mut change = DeadlineChange::Keep;
    let mut i = 2;
    while i < args.len() {
        let name = String::from_utf8_lossy(&args[i]).to_ascii_lowercase();
        let next = args.get(i + 1);
        change = match (name.as_str(), next, &change) {
            ("persist", _, DeadlineChange::Keep | DeadlineChange::Clear) => DeadlineChange::Clear,
            ("ex" | "px" | "exat" | "pxat", Some(amount), DeadlineChange::Keep) => {
                i += 1;
                DeadlineChange::Set(name, amount)
            }
            ("ex" | "px" | "exat" | "pxat", Some(amount), DeadlineChange::Set(unit, _))
                if *unit == name =>
            {
                i += 1;
                DeadlineChange::Set(name, amount)
            }
            _ => return Err(Fault::err(SYNTAX)),
        };
        i += 1;
    }
    Ok(change)
}

/// GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]. In Redis's order: the options'
/// syntax, then the key (nil if absent, WRONGTYPE for another kind), then the amount; a
/// deadline already past deletes the key, whose value is still the reply.
pub fn getex(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let change = parse_getex_options(args)?;
    let key = &args[1];
    let Some(mut meta) = ctx.read_meta_of(key, Kind::String)? else {
        return Ok(Reply::Null);
    };
    // As in Redis, a deadline given is a change of the key (a WATCH of it fails) even when it
    // is the same; PERSIST changes only a key that had one.
    let at = match &change {
        DeadlineChange::Keep => None,
        DeadlineChange::Clear => (meta.expire_at != 0).then_some(0),
        DeadlineChange::Set(unit, amount) => Some(deadline(ctx.now, unit, amount, "getex")?),
    };
    let value = ctx
        .ks
        .read_value(ctx.txn, meta.id, b"", string_len(&meta))?;
    match at {
        Some(at) if at != 0 && at <= ctx.now => {
            ctx.remove(key, &meta)?;
            ctx.notify(notifications::GENERIC, "del", key);
        }
        Some(at) => {
            ctx.set_expiry(key, &mut meta, at)?;
            ctx.store_meta(key, &mut meta)?;
            let event = if at == 0 { "persist" } else { "expire" };
            ctx.notify(notifications::GENERIC, event, key);
        }
        None => {}
    }
    Ok(value.map_or(Reply::Null, bulk))
}

pub fn mget(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let mut replies = Vec::with_capacity(args.len() - 1);
    for key in &args[1..] {
        // MGET answers nil for a key of another kind instead of WRONGTYPE.
        let value = match ctx.meta(key)? {
            Some(meta) if meta.kind == Kind::String => {
                ctx.ks
                    .read_value(ctx.txn, meta.id, b"", string_len(&meta))?
            }
            _ => None,
        };
        replies.push(value.map_or(Reply::Null, bulk));
    }
    Ok(Reply::Array(replies))
}

fn pairs(args: &[Vec<u8>]) -> Result<&[Vec<u8>], Fault> {
    let pairs = &args[1..];
    if !pairs.len().is_multiple_of(2) {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
        return Err(Fault::err(format!(
            "ERR wrong number of arguments for '{name}' command"
        )));
    }
    for pair in pairs.chunks(2) {
        super::check_key(&pair[0])?;
    }
    Ok(pairs)
}

pub fn mset(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    for pair in pairs(args)?.chunks(2) {
        ctx.put_string(&pair[0], &pair[1], Some(0))?;
        ctx.notify(notifications::STRING, "set", &pair[0]);
    }
    Ok(Reply::ok())
}

pub fn msetnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let pairs = pairs(args)?;
    for pair in pairs.chunks(2) {
        if ctx.meta(&pair[0])?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    for pair in pairs.chunks(2) {
        ctx.put_string(&pair[0], &pair[1], Some(0))?;
        ctx.notify(notifications::STRING, "set", &pair[0]);
    }
    Ok(Reply::Int(1))
}

/// INCR and friends: the integer the string holds (0 when absent) plus `delta`, stored.
fn add(ctx: &mut Ctx, key: &[u8], delta: i64) -> Outcome {
    let (value, row) = ctx.string_and_row(key)?;
    let current = match value {
        None => 0,
        Some(value) if value.len() > 20 => return Err(Fault::err(NOT_INTEGER)),
        Some(value) => parse_int(&value)?,
    };
    let next = current
        .checked_add(delta)
        .ok_or_else(|| Fault::err("ERR increment or decrement would overflow"))?;
    ctx.put_string_over(key, row, next.to_string().as_bytes(), None)?;
    ctx.notify(notifications::STRING, "incrby", key);
    Ok(Reply::Int(next))
}

pub fn incr(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    add(ctx, &args[1], 1)
}

pub fn decr(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    add(ctx, &args[1], -1)
}

pub fn incrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    add(ctx, &args[1], parse_int(&args[2])?)
}

pub fn decrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let delta = parse_int(&args[2])?;
    let negated = delta
        .checked_neg()
        .ok_or_else(|| Fault::err("ERR decrement would overflow"))?;
    add(ctx, &args[1], negated)
}

pub fn incrbyfloat(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    // Redis checks the stored value (its kind, then its number) before the increment.
    let (value, row) = ctx.string_and_row(key)?;
    let current = match value {
        None => 0.0,
        Some(value) => parse_long_double(&value)?,
    };
    let delta = parse_long_double(&args[2])?;
    let next = current + delta;
    if !next.is_finite() {
        return Err(Fault::err("ERR increment would produce NaN or Infinity"));
    }
    let text = format_human(next);
    ctx.put_string_over(key, row, text.as_bytes(), None)?;
    ctx.notify(notifications::STRING, "incrbyfloat", key);
    Ok(bulk(text))
}

/// The value of the string whose meta row is `meta`.
pub(super) fn string_of(ctx: &mut Ctx, meta: &KeyMeta) -> Result<Option<Vec<u8>>, Fault> {
    ctx.ks.read_value(ctx.txn, meta.id, b"", string_len(meta))
}

pub fn append(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (key, tail) = (&args[1], &args[2]);
    let found = ctx.string_total(key)?;
    let total = found.as_ref().map_or(0, |(_, total)| *total);
    ctx.check_size(total as i64 + tail.len() as i64)?;
    let len = match found {
        Some((meta, total)) if ctx.patches_in_place(total, total, tail.len()) => {
            ctx.patch_string(key, meta, total, total, tail)?
        }
        found => {
            let mut value = ctx.whole_string(found)?;
            value.extend_from_slice(tail);
            ctx.put_string(key, &value, None)?;
            value.len()
        }
    };
    ctx.notify(notifications::STRING, "append", key);
    Ok(Reply::Int(len as i64))
}

pub fn strlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    Ok(Reply::Int(
        ctx.meta_of(&args[1], Kind::String)?.map_or(0, |m| m.len),
    ))
}

/// Redis's rule for a [start, end] range with negative indexes over `len` items: the
/// inclusive range clamped into it, or `None` when empty.
pub fn clamp_range(start: i64, end: i64, len: i64) -> Option<(usize, usize)> {
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end.min(len - 1) };
    (start <= end && start < len && len > 0).then_some((start as usize, end as usize))
}

/// GETRANGE's own rule, which is not [`clamp_range`]: an `end` before the start of the
/// string is clamped to 0 (so `GETRANGE "10" -5 -5` is "1"), unless both indexes are
/// negative and `start > end`. Redis keeps this quirk for compatibility (a fix was reverted).
fn string_range(start: i64, end: i64, len: i64) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    (start <= end && len > 0).then_some((start as usize, end as usize))
}

/// GETRANGE key start end (and SUBSTR): reads only the parts that hold the range.
pub fn getrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let (start, end) = (parse_int(&args[2])?, parse_int(&args[3])?);
    let Some((meta, total)) = ctx.string_total(&args[1])? else {
        return Ok(bulk(Vec::new()));
    };
    Ok(match string_range(start, end, total as i64) {
        Some((from, to)) => bulk(ctx.string_bytes(&meta, total, from..to + 1)?),
        None => bulk(Vec::new()),
    })
}

/// SETRANGE key offset value: rewrites only the parts it touches, and part 0 if it grows
/// the string ([`Ctx::patch_string`]); one that creates the string, or writes more than a
/// piece, writes the whole string.
pub fn setrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let offset = parse_int(&args[2])?;
    if offset < 0 {
        return Err(Fault::err("ERR offset is out of range"));
    }
    let patch = &args[3];
    let found = ctx.string_total(key)?;
    if patch.is_empty() {
        return Ok(Reply::Int(found.map_or(0, |(_, total)| total as i64)));
    }
    // Saturating: an offset near i64::MAX must be refused, not wrap to a small size.
    ctx.check_size(offset.saturating_add(patch.len() as i64))?;
    let offset = offset as usize;
    let len = match found {
        Some((meta, total)) if ctx.patches_in_place(total, offset, patch.len()) => {
            ctx.patch_string(key, meta, total, offset, patch)?
        }
        found => setrange_whole(ctx, key, found, offset, patch)?,
    };
    ctx.notify(notifications::STRING, "setrange", key);
    Ok(Reply::Int(len as i64))
}

/// SETRANGE's write of the whole string (`found`, if any, as [`Ctx::string_total`] gave
/// it): for a string it creates, or a patch too large to write in place. Its length.
fn setrange_whole(
    ctx: &mut Ctx,
    key: &[u8],
    found: Option<(KeyMeta, usize)>,
    offset: usize,
    patch: &[u8],
) -> Result<usize, Fault> {
    let mut value = ctx.whole_string(found)?;
    let end = offset + patch.len();
    // SETRANGE is how a short request asks for a huge value: one growing past what a
    // commit holds is refused before it is built. A change inside a long string is not.
    if value.len() < end {
        ctx.check_commit_room(end)?;
        value.resize(end, 0);
    }
    value[offset..end].copy_from_slice(patch);
    ctx.put_string(key, &value, None)?;
    Ok(value.len())
}
