//! Commands: the table of every command the server knows, and the context data commands
//! run in (one engine transaction).
//!
//! Rule for every data command: check everything that can fail with an error reply
//! (arguments, WRONGTYPE, overflow) *before* the first write. Inside MULTI/EXEC the
//! transaction continues after a command's error reply, and that command must have
//! changed nothing.

mod bitfield;
mod bitmaps;
mod blocking;
pub mod categories;
mod code;
mod consumer_groups;
mod distance_order;
pub mod docs;
mod dump;
mod execute;
mod float;
mod geo;
mod geohash;
mod hashes;
mod hyperloglog;
pub mod key_specs;
mod keys;
mod lcs;
mod lists;
pub(crate) mod memory;
mod object;
mod pattern;
mod random;
mod rebuild;
mod sets;
mod sketch;
mod sort;
mod staging;
mod stream_info;
mod streams;
mod strings;
pub mod subcommands;
mod table;
mod zset_algebra;
mod zsets;

use parking_lot::RwLockReadGuard;
use tailstore_engine::{EngineError, Transaction};
use tailstore_resp::Reply;

use crate::keyspace::key_stats::KeyStats;
use crate::keyspace::notifications::{self, Class, KeyEvent};
use crate::keyspace::{now_ms, BuildGuard, Freed, KeyMeta, Keyspace, Kind, MAX_KEY};

pub use blocking::{blocking_sources, blocking_timeout, parse_timeout, refused_in_script};
pub use code::CommandCode;
pub use execute::{
    fault_reply, BlockBody, BlockStep, CountLookups, Executed, MapChange, StepRun, Watched,
};
pub use float::{parse_float, parse_long_double, parse_score_bound};
pub use keys::Expired;
pub use pattern::matches;
pub use streams::{resolve_last_ids, with_blocked_count};
pub use table::{lookup, tips, Command, Run, COMMANDS};

/// A container command's check of its subcommand, before it runs or is queued: Redis's
/// error text if it is unknown or has the wrong number of arguments.
pub fn subcommand_check(command: &Command, args: &[Vec<u8>]) -> Result<Option<usize>, String> {
    subcommands::check(command.name, args)
}

/// Redis's reply to a command on a key of another kind.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
pub const SYNTAX: &str = "ERR syntax error";

/// Why a data command did not produce its normal reply.
#[derive(Debug)]
pub enum Fault {
    /// The command's own error reply (bad argument, wrong type…); it changed nothing.
    Reply(Reply),
    /// The engine refused: a retryable conflict, or a failure that stops the database.
    Engine(EngineError),
    /// Stored rows that do not fit together (a missing part, a length that disagrees with
    /// the parts). Reads are not a snapshot in the engine's optimistic transactions: rows
    /// read before and after another commit can disagree, and validation would abort the
    /// transaction at commit. So the command is retried if its reads no longer hold; rows
    /// that disagree in reads that all still hold are corruption, reported at once.
    Torn(String),
    /// The transaction changes the map of databases (SWAPDB, FLUSHDB or FLUSHALL in an
    /// EXEC block or a script) without the map's exclusive hold: the client's runner runs it
    /// again under that hold (see `keyspace::databases`).
    MapHoldNeeded,
}

impl Fault {
    pub fn err(message: impl Into<String>) -> Fault {
        Fault::Reply(Reply::error(message))
    }

    /// Stored data that does not decode or fit together: never returned as a value; retried
    /// as a possibly torn read, then reported (see [`Fault::Torn`]).
    pub fn corrupt(detail: String) -> Fault {
        Fault::Torn(detail)
    }

    /// The corruption a torn read that persisted amounts to.
    pub fn corruption(detail: &str) -> EngineError {
        EngineError::Corrupt(format!("kv: {detail}"))
    }

    /// This fault as an engine error, where no client gets a reply (internal work): a
    /// torn read is corruption there, as is an error reply.
    pub fn into_engine_error(self) -> EngineError {
        match self {
            Fault::Engine(err) => err,
            Fault::Torn(detail) => Fault::corruption(&detail),
            Fault::Reply(reply) => EngineError::Corrupt(format!("kv: {reply:?}")),
            Fault::MapHoldNeeded => map_changed_outside_a_client(),
        }
    }
}

/// A change of the map of databases reached the engine outside a client's runner (which
/// gives it the exclusive hold): a bug, reported rather than run unsafely.
fn map_changed_outside_a_client() -> EngineError {
    EngineError::Corrupt("kv: the map of databases changed without its exclusive hold".into())
}

impl From<EngineError> for Fault {
    fn from(err: EngineError) -> Fault {
        Fault::Engine(err)
    }
}

pub type Outcome = Result<Reply, Fault>;

/// A data command's handler: its arguments (name first) in a transaction.
pub type Handler = fn(&mut Ctx<'_, '_>, &[Vec<u8>]) -> Outcome;

/// What a data command runs with.
pub struct Ctx<'t, 'db> {
    pub ks: &'db Keyspace,
    pub txn: &'t mut Transaction<'db>,
    /// The selected database.
    pub db: u32,
    /// The time the command runs at, in ms since the epoch (one value per command, as in
    /// Redis, so a command sees a key either expired or not).
    pub now: i64,
    /// Held from the first write that left its key's row alone until the transaction's
    /// changes are applied (see `keyspace::watches`).
    pub(crate) unwatched: Option<RwLockReadGuard<'db, ()>>,
    /// Owners a RESTORE wrote over transactions of their own and this one gives keys to:
    /// kept from the lazy free until this transaction's changes are applied.
    pub(crate) building: Vec<BuildGuard<'db>>,
    /// The key events of this attempt, in order (`keyspace::notifications`): published
    /// once the transaction committed and is durable.
    pub events: Vec<KeyEvent>,
    /// Whether the command running is a write command: its lookups ([`Ctx::meta`]) are
    /// then Redis's `lookupKeyWrite`, which count no hit or miss.
    writing: bool,
    /// This attempt's read lookups (counted only while `counts_lookups`, see
    /// [`CountLookups`]) and expired keys removed (`keyspace::key_stats`).
    pub(crate) stats: KeyStats,
    pub(crate) counts_lookups: bool,
    /// This attempt follows one refused as larger than a commit may be: a command that
    /// removes many elements of a collection keeps the others under a new owner instead
    /// (`rebuild.rs`).
    pub(crate) rebuilds_removals: bool,
}

impl<'t, 'db> Ctx<'t, 'db> {
    /// A command's context in `txn` on database `db`, at the current time.
    pub fn now(ks: &'db Keyspace, txn: &'t mut Transaction<'db>, db: u32) -> Self {
        Ctx {
            ks,
            txn,
            db,
            now: now_ms(),
            unwatched: None,
            building: Vec::new(),
            events: Vec::new(),
            writing: false,
            stats: KeyStats::default(),
            counts_lookups: true,
            rebuilds_removals: false,
        }
    }

    /// Runs data command `command` (whose handler is `handler`) on `args`.
    pub fn run(&mut self, command: &Command, handler: Handler, args: &[Vec<u8>]) -> Outcome {
        self.writing = command.is_write();
        handler(self, args)
    }

    /// Notes that `event` of `class` happened to `key` in the selected database, if the
    /// setting publishes that class (Redis's `notifyKeyspaceEvent`, called where Redis calls
    /// it, after the change).
    pub fn notify(&mut self, class: Class, event: &'static str, key: &[u8]) {
        if self.ks.notifications.wants(class) {
            self.events.push(KeyEvent {
                db: self.db,
                event,
                key: key.to_vec(),
            });
        }
    }

    /// Whether a write may leave its key's row (and version) as it is: only while no
    /// connection watches any key, and then no watch begins until this transaction's changes
    /// are applied (its runner keeps the hold until then).
    pub(crate) fn may_keep_row(&mut self) -> bool {
        if self.unwatched.is_none() {
            self.unwatched = self.ks.watches.unwatched();
        }
        self.unwatched.is_some()
    }
}

impl Ctx<'_, '_> {
    /// Refuses, before it is built, a value of `len` bytes that no commit could write: the
    /// engine's own error, which the commit would give after the value was cut into parts.
    pub fn check_commit_room(&self, len: usize) -> Result<(), Fault> {
        let limit = self.ks.database().max_commit_bytes();
        if len > limit {
            return Err(EngineError::TooLarge { bytes: len, limit }.into());
        }
        Ok(())
    }

    /// The key's meta, or `None` if it does not exist or has expired: a lookup of the
    /// running command's kind. A read command's is a read lookup (counted, and a miss told
    /// as a `keymiss` event); a write command's, of a key it changes, counts nothing, as
    /// Redis's `lookupKeyWrite`. A write command that reads a key it does not change (a
    /// STORE command's sources, GETDEL) asks for [`Ctx::read_meta`].
    pub fn meta(&mut self, key: &[u8]) -> Result<Option<KeyMeta>, Fault> {
        if self.writing {
            self.live_meta(key)
        } else {
            self.read_meta(key)
        }
    }

    /// The key's meta, as a read lookup whatever the command (Redis's `lookupKeyRead`).
    pub fn read_meta(&mut self, key: &[u8]) -> Result<Option<KeyMeta>, Fault> {
        let meta = self.live_meta(key)?;
        self.count_lookup(key, meta.is_some());
        Ok(meta)
    }

    /// The key's meta if it holds a `kind`, `None` if it does not exist; WRONGTYPE otherwise
    /// ([`Ctx::meta`]'s lookup).
    pub fn meta_of(&mut self, key: &[u8], kind: Kind) -> Result<Option<KeyMeta>, Fault> {
        let meta = self.meta(key)?;
        of_kind(meta, kind)
    }

    /// Whether this run is a blocked command's run after its first: those alone among a
    /// client's commands count no read lookups (`CountLookups`), as Redis serves them from
    /// the key they wake on rather than as a command sent.
    pub fn is_blocked_rerun(&self) -> bool {
        !self.counts_lookups
    }

    /// [`Ctx::meta_of`] as a read lookup whatever the command ([`Ctx::read_meta`]).
    pub fn read_meta_of(&mut self, key: &[u8], kind: Kind) -> Result<Option<KeyMeta>, Fault> {
        let meta = self.read_meta(key)?;
        of_kind(meta, kind)
    }

    /// The key's live meta, without counting a lookup (EXEC's check of its watched keys).
    pub(crate) fn live_meta(&mut self, key: &[u8]) -> Result<Option<KeyMeta>, Fault> {
        let meta = self.stored_meta(key)?;
        Ok(meta.filter(|m| !m.is_expired(self.now)))
    }

    /// The key's meta as stored, expired or not.
    pub(crate) fn stored_meta(&mut self, key: &[u8]) -> Result<Option<KeyMeta>, Fault> {
        check_key(key)?;
        self.ks.load_meta(self.txn, self.db, key)
    }

    /// Counts and tells (`expired`) a key this transaction removed because it had expired.
    pub(crate) fn tell_expired(&mut self, key: &[u8]) {
        self.stats.expired += 1;
        self.notify(notifications::EXPIRED, "expired", key);
    }

    /// Counts a read lookup, and tells a miss (Redis's `keymiss`).
    pub(crate) fn count_lookup(&mut self, key: &[u8], found: bool) {
        if !self.counts_lookups {
            return;
        }
        self.stats.count_lookup(found);
        if !found {
            self.notify(notifications::KEY_MISS, "keymiss", key);
        }
    }

    /// The key's meta for a write of a `kind`: the existing one, or a new empty one (after
    /// clearing out an expired key of the same name).
    pub fn meta_for_write(&mut self, key: &[u8], kind: Kind) -> Result<KeyMeta, Fault> {
        check_key(key)?;
        match self.ks.load_meta(self.txn, self.db, key)? {
            Some(meta) if meta.is_expired(self.now) => {
                self.remove(key, &meta)?;
                self.tell_expired(key);
                Ok(self.new_meta(kind))
            }
            Some(meta) if meta.kind != kind => Err(Fault::err(WRONGTYPE)),
            Some(meta) => Ok(meta),
            None => Ok(self.new_meta(kind)),
        }
    }

    /// The meta of a key about to be created: a new incarnation, with an id of its own.
    pub fn new_meta(&self, kind: Kind) -> KeyMeta {
        KeyMeta::new(kind, self.ks.new_version())
    }

    /// The meta of a new incarnation of a key that replaces the live one in place (Redis's
    /// `setKey` over an existing key, `dbOverwrite`): storing it tells no `new` event.
    pub fn overwriting_meta(&self, kind: Kind) -> KeyMeta {
        KeyMeta {
            overwrites: true,
            ..self.new_meta(kind)
        }
    }

    /// For a command that replaces `destination` with a new value of `kind` (a STORE
    /// command): removes what it held, and gives the live key it held (if any) and the
    /// meta of the new value, which overwrites that key or clears out an expired one.
    pub fn replace(
        &mut self,
        destination: &[u8],
        kind: Kind,
    ) -> Result<(Option<KeyMeta>, KeyMeta), Fault> {
        if let Some(old) = self.meta(destination)? {
            self.remove(destination, &old)?;
            return Ok((Some(old), self.overwriting_meta(kind)));
        }
        Ok((None, self.meta_for_write(destination, kind)?))
    }

    /// Writes the key's meta row; a key stored where there was none is told as `new`
    /// (Redis's `dbAdd`).
    pub fn store_meta(&mut self, key: &[u8], meta: &mut KeyMeta) -> Result<(), Fault> {
        let created = !meta.stored && !meta.overwrites;
        self.ks.store_meta(self.txn, self.db, key, meta)?;
        if created {
            self.notify(notifications::NEW, "new", key);
        }
        Ok(())
    }

    /// Tells what a command that stores its result in `key` did (Redis's `setKey`, or its
    /// `dbDelete` when the result is empty): `event` of `class` if it stored something,
    /// `del` if it only removed a key that was there (`replaced`), nothing otherwise.
    pub fn notify_stored(
        &mut self,
        (class, event): (Class, &'static str),
        key: &[u8],
        stored: bool,
        replaced: bool,
    ) {
        match (stored, replaced) {
            (true, _) => self.notify(class, event, key),
            (false, true) => self.notify(notifications::GENERIC, "del", key),
            (false, false) => {}
        }
    }

    /// Saves a changed key: a collection left empty is deleted, as Redis does (a stream
    /// stays, empty, as in Redis: it keeps its last ID).
    pub fn save(&mut self, key: &[u8], meta: &mut KeyMeta) -> Result<(), Fault> {
        if !matches!(meta.kind, Kind::String | Kind::Stream) && meta.len == 0 {
            if meta.stored {
                self.remove(key, meta)?;
                self.notify(notifications::GENERIC, "del", key);
            }
            return Ok(());
        }
        self.store_meta(key, meta)
    }

    /// Deletes a key and everything stored under it: its elements at once when there are
    /// few, else by the background task (`Keyspace::free_garbage`), so that deleting a key
    /// costs one small transaction however large it is (the key is gone either way: its
    /// elements belong to its id, which no later key reuses). Says when the elements are
    /// freed.
    pub fn remove(&mut self, key: &[u8], meta: &KeyMeta) -> Result<Freed, Fault> {
        let freed = self.ks.free_elements(self.txn, meta)?;
        self.ks
            .set_deadline(self.txn, self.db, key, meta.expire_at, 0)?;
        self.ks.delete_meta(self.txn, self.db, key, meta)?;
        Ok(freed)
    }

    /// Runs `f` with database `db` selected (MOVE and COPY write into another database).
    pub fn in_db<T>(&mut self, db: u32, f: impl FnOnce(&mut Self) -> T) -> T {
        let selected = std::mem::replace(&mut self.db, db);
        let result = f(self);
        self.db = selected;
        result
    }

    /// Sets or clears (0) a key's deadline; the caller saves the meta.
    pub fn set_expiry(&mut self, key: &[u8], meta: &mut KeyMeta, at: i64) -> Result<(), Fault> {
        self.ks
            .set_deadline(self.txn, self.db, key, meta.expire_at, at)?;
        meta.expire_at = at;
        Ok(())
    }
}

/// `meta` if it is of `kind` (or absent); WRONGTYPE otherwise.
pub(super) fn of_kind(meta: Option<KeyMeta>, kind: Kind) -> Result<Option<KeyMeta>, Fault> {
    match meta {
        Some(meta) if meta.kind != kind => Err(Fault::err(WRONGTYPE)),
        other => Ok(other),
    }
}

/// Keys longer than we can index are refused up front (see [`MAX_KEY`]).
pub fn check_key(key: &[u8]) -> Result<(), Fault> {
    if key.len() > MAX_KEY {
        return Err(Fault::err(format!(
            "ERR key is longer than tailstore's limit of {MAX_KEY} bytes"
        )));
    }
    Ok(())
}

/// Parses an integer argument as Redis does (no spaces, no '+', fits an i64).
pub fn parse_int(arg: &[u8]) -> Result<i64, Fault> {
    std::str::from_utf8(arg)
        .ok()
        .filter(|s| {
            !(s.starts_with('+') || s.starts_with("-0") || (s.len() > 1 && s.starts_with('0')))
        })
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| Fault::err(NOT_INTEGER))
}

/// Whether an argument equals an option name, ignoring case.
pub fn is(arg: &[u8], option: &str) -> bool {
    arg.eq_ignore_ascii_case(option.as_bytes())
}

/// A HELP subcommand's reply: its lines as status replies, as Redis sends them.
pub fn help(lines: &[&str]) -> Reply {
    Reply::Array(
        lines
            .iter()
            .map(|line| Reply::Status((*line).into()))
            .collect(),
    )
}

pub fn bulk(bytes: impl Into<Vec<u8>>) -> Reply {
    Reply::Bulk(bytes.into())
}
