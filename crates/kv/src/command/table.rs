//! Every command the server knows, with what COMMAND reports of it.

use super::key_specs::{self, FoundKey};
use super::{
    bitfield, bitmaps, consumer_groups, dump, geo, hashes, hyperloglog, keys, lcs, lists, memory,
    object, sets, sort, stream_info, streams, strings, zset_algebra, zsets, Handler,
};

/// How a command runs.
#[derive(Clone, Copy)]
pub enum Run {
    /// Against the keyspace, in one engine transaction.
    Data(Handler),
    /// By the connection itself (PING, SELECT, MULTI, INFO…).
    Server,
}

/// Where in a command's arguments an option names a key, if one does.
pub type OptionKey = fn(&[Vec<u8>]) -> Option<usize>;

/// One command: its name and Redis's metadata (arity counts the name; negative means "at
/// least"), and how it runs.
#[derive(Clone, Copy)]
pub struct Command {
    pub name: &'static str,
    pub arity: i32,
    pub flags: &'static [&'static str],
    /// Positions of the first and last key arguments and the step between keys (0 0 0: none;
    /// a last key of -1 means "to the end").
    pub keys: (i32, i32, i32),
    pub group: &'static str,
    pub summary: &'static str,
    /// Where an option names one more key (GEORADIUS … STORE key), which the key positions
    /// cannot say.
    pub option_key: Option<OptionKey>,
    pub run: Run,
}

impl Command {
    /// Whether `argc` arguments (with the name) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    pub fn is_write(&self) -> bool {
        self.flags.contains(&"write")
    }

    pub fn is_read_only(&self) -> bool {
        self.flags.contains(&"readonly")
    }

    /// Whether the command may change data or send messages though not a write: Redis's
    /// `may-replicate` flag, which COMMAND INFO does not show (so it is not among `flags`).
    /// A WRITE pause holds such a command and a read-only script may not call it.
    pub fn may_replicate(&self) -> bool {
        MAY_REPLICATE.contains(&self.name)
    }

    /// Whether the server waits when one run of the command finds nothing (BLPOP…).
    pub fn is_blocking(&self) -> bool {
        self.flags.contains(&"blocking")
    }

    /// The key a write puts in a database other than the selected one, with that database:
    /// MOVE's, and COPY's with its DB option (to wake clients blocked on it there).
    pub fn key_elsewhere<'a>(&self, args: &'a [Vec<u8>]) -> Option<(u32, &'a [u8])> {
        let (db, key) = match self.name {
            "move" => (args.get(2)?, args.get(1)?),
            "copy" => {
                let at = args
                    .iter()
                    .skip(3)
                    .position(|a| a.eq_ignore_ascii_case(b"db"))?;
                (args.get(3 + at + 1)?, args.get(2)?)
            }
            _ => return None,
        };
        let db = std::str::from_utf8(db).ok()?.parse().ok()?;
        Some((db, key.as_slice()))
    }

    /// The key arguments of `args` (name first), by the command's key positions.
    pub fn key_args<'a>(&self, args: &'a [Vec<u8>]) -> impl Iterator<Item = &'a [u8]> {
        let (first, last, step) = self.keys;
        let argc = args.len() as i32;
        let last = if last < 0 {
            argc + last
        } else {
            last.min(argc - 1)
        };
        // A command without keys (0 0 0) has no positions: the range from 0 is cut off.
        let last = if first > 0 { last } else { -1 };
        let option_key = self.option_key.and_then(|find| find(args));
        (first..=last)
            .step_by(step.max(1) as usize)
            .map(|at| at as usize)
            .chain(option_key)
            .map(move |at| args[at].as_slice())
    }
}

impl Command {
    /// Every key `args` (the name first) names, with what the command does to it: by the
    /// key specifications, as Redis's COMMAND GETKEYSANDFLAGS finds them (none where the
    /// arguments do not fit them), and the key an option names if they did not find it
    /// (GEORADIUS … STORE a STORE b writes `b`; Redis's specification finds `a`), as
    /// written over.
    pub fn keys_with_flags(&self, args: &[Vec<u8>]) -> Vec<FoundKey> {
        let mut keys = key_specs::keys(&key_specs::full_name(self, args), args);
        if let Some(at) = self.option_key.and_then(|find| find(args)) {
            if !keys.iter().any(|key| key.at == at) {
                keys.push(FoundKey {
                    at,
                    flags: key_specs::flag::OW | key_specs::flag::UPDATE,
                });
            }
        }
        keys
    }

    /// The keys of [`Command::keys_with_flags`].
    pub fn named_keys<'a>(&self, args: &'a [Vec<u8>]) -> Vec<&'a [u8]> {
        self.keys_with_flags(args)
            .iter()
            .map(|key| args[key.at].as_slice())
            .collect()
    }

    /// Whether the command (the subcommand `args` name, for a container) can name keys at
    /// all (COMMAND GETKEYS refuses one that cannot).
    pub fn takes_keys(&self, args: &[Vec<u8>]) -> bool {
        key_specs::has_keys(&key_specs::full_name(self, args))
    }
}

/// The commands Redis flags `may-replicate` that are not writes and that a script may call:
/// PFCOUNT writes the count it caches in its sketch; PUBLISH and SPUBLISH send messages.
const MAY_REPLICATE: &[&str] = &["pfcount", "publish", "spublish"];

const W: &[&str] = &["write", "denyoom"];
const WF: &[&str] = &["write", "denyoom", "fast"];
const D: &[&str] = &["write", "fast"];
/// XREAD: blocking only with its BLOCK option; its keys follow STREAMS.
const RB: &[&str] = &["readonly", "blocking", "movablekeys"];
const WO: &[&str] = &["write"];
/// Writes whose keys are found by the command (LMPOP's numkeys), and the blocking ones
/// among them (BLMPOP; XREADGROUP, which blocks only with its BLOCK option).
const W_MOVABLE: &[&str] = &["write", "movablekeys"];
const R_MOVABLE: &[&str] = &["readonly", "movablekeys"];
const WB_MOVABLE: &[&str] = &["write", "blocking", "movablekeys"];
/// GEORADIUS and GEORADIUSBYMEMBER: writes only with STORE, whose key an option names.
const WD_MOVABLE: &[&str] = &["write", "denyoom", "movablekeys"];
const R: &[&str] = &["readonly"];
const RF: &[&str] = &["readonly", "fast"];
const S: &[&str] = &["fast", "loading", "stale"];
const A: &[&str] = &["admin", "loading", "stale"];
const P: &[&str] = &["pubsub", "loading", "stale"];
const PF: &[&str] = &["pubsub", "loading", "stale", "fast"];
const LUA: &[&str] = &[
    "noscript",
    "stale",
    "skip_monitor",
    "no_mandatory_keys",
    "movablekeys",
];
const LUA_RO: &[&str] = &[
    "noscript",
    "stale",
    "skip_monitor",
    "no_mandatory_keys",
    "readonly",
    "movablekeys",
];

/// Subscriptions: refused in scripts, as Redis does.
const SUBSCRIBING: &[&str] = &["pubsub", "noscript", "loading", "stale"];
/// Logging in and leaving: open before AUTH and while a script is busy.
const OPEN: &[&str] = &[
    "noscript",
    "loading",
    "stale",
    "fast",
    "no_auth",
    "allow_busy",
];
/// MULTI, DISCARD, WATCH, UNWATCH.
const TRANSACTION: &[&str] = &["noscript", "loading", "stale", "fast", "allow_busy"];
/// Refused in scripts only.
const NS: &[&str] = &["noscript"];
const FAST: &[&str] = &["fast"];
/// Blocking: run once, and if it finds nothing the server waits for a write to its keys;
/// refused in scripts (which cannot wait).
const BLOCKING_POP: &[&str] = &["write", "noscript", "blocking"];
const BLOCKING_MOVE: &[&str] = &["write", "denyoom", "noscript", "blocking"];
const BLOCKING_FAST: &[&str] = &["write", "noscript", "blocking", "fast"];
/// Saving and replication settings.
const SAVING: &[&str] = &["admin", "noscript", "no_async_loading"];
const REPLICATION: &[&str] = &["admin", "noscript", "stale", "no_async_loading"];
const ADMIN_NS: &[&str] = &["admin", "noscript", "loading", "stale"];

const fn data(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: (i32, i32, i32),
    group: &'static str,
    summary: &'static str,
    handler: Handler,
) -> Command {
    Command {
        name,
        arity,
        flags,
        keys,
        group,
        summary,
        option_key: None,
        run: Run::Data(handler),
    }
}

/// A data command with a key named by an option (see [`Command::option_key`]).
const fn with_option_key(command: Command, option_key: fn(&[Vec<u8>]) -> Option<usize>) -> Command {
    Command {
        option_key: Some(option_key),
        ..command
    }
}

const fn server(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    group: &'static str,
    summary: &'static str,
) -> Command {
    Command {
        name,
        arity,
        flags,
        keys: (0, 0, 0),
        group,
        summary,
        option_key: None,
        run: Run::Server,
    }
}

const K1: (i32, i32, i32) = (1, 1, 1);
const KALL: (i32, i32, i32) = (1, -1, 1);
const KPAIRS: (i32, i32, i32) = (1, -1, 2);
const K12: (i32, i32, i32) = (1, 2, 1);
const NONE: (i32, i32, i32) = (0, 0, 0);
/// Every argument but the last (BLPOP's keys; the last is the timeout).
const KBUTLAST: (i32, i32, i32) = (1, -2, 1);

/// The command table, sorted by nothing in particular: [`lookup`] searches it.
pub static COMMANDS: &[Command] = &[
    // connection and server
    server(
        "ping",
        -1,
        FAST,
        "connection",
        "Returns the server's liveliness response.",
    ),
    server("echo", 2, S, "connection", "Returns the given string."),
    server(
        "auth",
        -2,
        OPEN,
        "connection",
        "Authenticates the connection (no ACL users: the default user, with requirepass's password).",
    ),
    server(
        "wait",
        3,
        NS,
        "generic",
        "Waits for replicas to acknowledge writes (there are none: answers 0).",
    ),
    server(
        "lolwut",
        -1,
        RF,
        "server",
        "Answers the version line Redis answers; draws no art.",
    ),
    server(
        "role",
        1,
        &["noscript", "loading", "stale", "fast"],
        "server",
        "Returns the replication role: a primary without replicas.",
    ),
    server(
        "shutdown",
        -1,
        &["admin", "noscript", "loading", "stale", "no_multi", "allow_busy"],
        "server",
        "Stops the server, which closes the database with a checkpoint.",
    ),
    // pub/sub (server/pubsub.rs)
    server(
        "subscribe",
        -2,
        SUBSCRIBING,
        "pubsub",
        "Listens for messages published to channels.",
    ),
    server(
        "unsubscribe",
        -1,
        SUBSCRIBING,
        "pubsub",
        "Stops listening to messages posted to channels.",
    ),
    server(
        "psubscribe",
        -2,
        SUBSCRIBING,
        "pubsub",
        "Listens for messages published to channels that match patterns.",
    ),
    server(
        "punsubscribe",
        -1,
        SUBSCRIBING,
        "pubsub",
        "Stops listening to messages published to channels that match patterns.",
    ),
    server(
        "publish",
        3,
        PF,
        "pubsub",
        "Posts a message to a channel.",
    ),
    Command {
        keys: KALL, // shard channels, hashed as keys are
        ..server(
            "ssubscribe",
            -2,
            SUBSCRIBING,
            "pubsub",
            "Listens for messages published to shard channels.",
        )
    },
    Command {
        keys: KALL, // shard channels, hashed as keys are
        ..server(
            "sunsubscribe",
            -1,
            SUBSCRIBING,
            "pubsub",
            "Stops listening to messages posted to shard channels.",
        )
    },
    Command {
        keys: K1, // shard channels, hashed as keys are
        ..server(
            "spublish",
            3,
            PF,
            "pubsub",
            "Posts a message to a shard channel.",
        )
    },
    server(
        "pubsub",
        -2,
        P,
        "pubsub",
        "PUBSUB CHANNELS, NUMSUB, NUMPAT, SHARDCHANNELS, SHARDNUMSUB.",
    ),
    server(
        "hello",
        -1,
        OPEN,
        "connection",
        "Handshakes with the server (protocol 2 or 3).",
    ),
    server(
        "select",
        2,
        S,
        "connection",
        "Changes the selected database.",
    ),
    server("quit", -1, OPEN, "connection", "Closes the connection."),
    server("reset", 1, OPEN, "connection", "Resets the connection."),
    server(
        "client",
        -2,
        S,
        "connection",
        "CLIENT SETNAME, GETNAME, ID, SETINFO, LIST, INFO, KILL, PAUSE, REPLY, TRACKING…",
    ),
    server(
        "command",
        -1,
        S,
        "server",
        "COMMAND, COUNT, DOCS, INFO, LIST.",
    ),
    server(
        "config",
        -2,
        A,
        "server",
        "CONFIG GET, SET, RESETSTAT, REWRITE.",
    ),
    server(
        "info",
        -1,
        &["loading", "stale"],
        "server",
        "Returns information and statistics about the server.",
    ),
    server("time", 1, S, "server", "Returns the server time."),
    server(
        "flushdb",
        -1,
        WO,
        "server",
        "Removes every key from the selected database.",
    ),
    server(
        "swapdb",
        3,
        D,
        "server",
        "Exchanges the contents of two databases, for every client at once.",
    ),
    server(
        "flushall",
        -1,
        WO,
        "server",
        "Removes every key from every database.",
    ),
    server(
        "save",
        1,
        &["admin", "noscript", "no_async_loading", "no_multi"],
        "server",
        "Takes a checkpoint of the database.",
    ),
    server(
        "bgsave",
        -1,
        SAVING,
        "server",
        "Takes a checkpoint of the database.",
    ),
    server(
        "bgrewriteaof",
        1,
        SAVING,
        "server",
        "Takes a checkpoint of the database (what bounds the log a restart replays).",
    ),
    // What a standalone server answers of features it lacks (server/standalone.rs).
    server("cluster", -2, S, "cluster", "Answers that cluster support is disabled."),
    server("readonly", 1, S, "cluster", "Answers that cluster support is disabled."),
    server("readwrite", 1, S, "cluster", "Answers that cluster support is disabled."),
    server("asking", 1, FAST, "cluster", "Answers that cluster support is disabled."),
    server("module", -2, A, "server", "MODULE LIST: no modules are loaded."),
    server(
        "latency",
        -2,
        A,
        "server",
        "The latency monitor, off: no events are recorded.",
    ),
    server(
        "acl",
        -2,
        S,
        "server",
        "ACL for the one user, default, without a password.",
    ),
    server(
        "replicaof",
        3,
        REPLICATION,
        "server",
        "REPLICAOF NO ONE: already a primary; tailstore does not replicate.",
    ),
    server(
        "slaveof",
        3,
        REPLICATION,
        "server",
        "REPLICAOF's old name.",
    ),
    server(
        "failover",
        -1,
        &["admin", "noscript", "stale"],
        "server",
        "Answers that there are no replicas to fail over to.",
    ),
    server(
        "debug",
        -2,
        ADMIN_NS,
        "server",
        "Refused, as Redis 7 refuses it by default.",
    ),
    server(
        "lastsave",
        1,
        S,
        "server",
        "The time of the last checkpoint.",
    ),
    server(
        "monitor",
        1,
        ADMIN_NS,
        "server",
        "Streams every command the server runs to this connection.",
    ),
    server(
        "slowlog",
        -2,
        A,
        "server",
        "Lists, counts or clears the commands that ran slower than a threshold.",
    ),
    server("multi", 1, TRANSACTION, "transactions", "Starts a transaction."),
    server(
        "exec",
        1,
        &["noscript", "loading", "stale", "skip_slowlog"],
        "transactions",
        "Executes the queued commands as one transaction.",
    ),
    server(
        "discard",
        1,
        TRANSACTION,
        "transactions",
        "Discards the queued commands.",
    ),
    Command {
        keys: KALL,
        ..server(
            "watch",
            -2,
            TRANSACTION,
            "transactions",
            "Makes EXEC fail if these keys change.",
        )
    },
    server("unwatch", 1, TRANSACTION, "transactions", "Forgets the watched keys."),
    // scripting (server/eval.rs, script/)
    server(
        "eval",
        -3,
        LUA,
        "scripting",
        "Runs a Lua script as one transaction.",
    ),
    server(
        "evalsha",
        -3,
        LUA,
        "scripting",
        "Runs a loaded Lua script by its SHA1.",
    ),
    server(
        "eval_ro",
        -3,
        LUA_RO,
        "scripting",
        "Runs a read-only Lua script.",
    ),
    server(
        "evalsha_ro",
        -3,
        LUA_RO,
        "scripting",
        "Runs a loaded read-only Lua script by its SHA1.",
    ),
    server(
        "fcall",
        -3,
        LUA,
        "scripting",
        "Runs a function of a loaded library as one transaction.",
    ),
    server(
        "fcall_ro",
        -3,
        LUA_RO,
        "scripting",
        "Runs a read-only function of a loaded library.",
    ),
    server(
        "function",
        -2,
        NS,
        "scripting",
        "Loads, lists, dumps, restores or deletes function libraries.",
    ),
    server(
        "script",
        -2,
        NS,
        "scripting",
        "Loads, checks, flushes or kills Lua scripts.",
    ),
    data(
        "dbsize",
        1,
        RF,
        NONE,
        "server",
        "Returns the number of keys in the database.",
        keys::dbsize,
    ),
    // keys
    data("del", -2, WO, KALL, "generic", "Deletes keys.", keys::del),
    data("unlink", -2, D, KALL, "generic", "Deletes keys.", keys::del),
    data(
        "exists",
        -2,
        RF,
        KALL,
        "generic",
        "Counts the given keys that exist.",
        keys::exists,
    ),
    // TOUCH counts like EXISTS; tailstore keeps no access times to update.
    data(
        "touch",
        -2,
        RF,
        KALL,
        "generic",
        "Counts the given keys that exist (no access times are kept).",
        keys::exists,
    ),
    data(
        "type",
        2,
        RF,
        K1,
        "generic",
        "Returns the kind of value a key holds.",
        keys::type_,
    ),
    data(
        "keys",
        2,
        R,
        NONE,
        "generic",
        "Returns the keys matching a pattern.",
        keys::keys,
    ),
    data(
        "scan",
        -2,
        R,
        NONE,
        "generic",
        "Iterates over the keys.",
        keys::scan,
    ),
    data(
        "rename",
        3,
        WO,
        K12,
        "generic",
        "Renames a key, replacing the target.",
        keys::rename,
    ),
    data(
        "renamenx",
        3,
        D,
        K12,
        "generic",
        "Renames a key if the target is free.",
        keys::renamenx,
    ),
    data(
        "move",
        3,
        D,
        K1,
        "generic",
        "Moves a key to another database.",
        keys::move_,
    ),
    data(
        "copy",
        -3,
        W,
        K12,
        "generic",
        "Copies a key, to another name or database.",
        keys::copy,
    ),
    data(
        "dump",
        2,
        R,
        K1,
        "generic",
        "Returns a serialized representation of the value stored at a key.",
        dump::dump,
    ),
    data(
        "restore",
        -4,
        W,
        K1,
        "generic",
        "Creates a key from the serialized representation of a value.",
        dump::restore,
    ),
    data(
        "memory",
        -2,
        R,
        (2, 2, 1),
        "server",
        "Reports the bytes a key and its value take in tailstore's tables.",
        memory::memory,
    ),
    data(
        "object",
        -2,
        R,
        (2, 2, 1),
        "generic",
        "Names the encoding Redis would give a key's value (OBJECT ENCODING, REFCOUNT).",
        object::object,
    ),
    data(
        "randomkey",
        1,
        R,
        NONE,
        "generic",
        "Returns a random key of the database.",
        keys::randomkey,
    ),
    data(
        "expire",
        -3,
        D,
        K1,
        "generic",
        "Sets a key's time to live in seconds.",
        keys::expire,
    ),
    data(
        "pexpire",
        -3,
        D,
        K1,
        "generic",
        "Sets a key's time to live in milliseconds.",
        keys::expire,
    ),
    data(
        "expireat",
        -3,
        D,
        K1,
        "generic",
        "Sets a key's deadline (Unix seconds).",
        keys::expire,
    ),
    data(
        "pexpireat",
        -3,
        D,
        K1,
        "generic",
        "Sets a key's deadline (Unix ms).",
        keys::expire,
    ),
    data(
        "ttl",
        2,
        RF,
        K1,
        "generic",
        "Returns a key's time to live in seconds.",
        keys::ttl,
    ),
    data(
        "pttl",
        2,
        RF,
        K1,
        "generic",
        "Returns a key's time to live in milliseconds.",
        keys::pttl,
    ),
    data(
        "expiretime",
        2,
        RF,
        K1,
        "generic",
        "Returns a key's deadline as a Unix time in seconds.",
        keys::expiretime,
    ),
    data(
        "pexpiretime",
        2,
        RF,
        K1,
        "generic",
        "Returns a key's deadline as a Unix time in milliseconds.",
        keys::pexpiretime,
    ),
    data(
        "persist",
        2,
        D,
        K1,
        "generic",
        "Removes a key's time to live.",
        keys::persist,
    ),
    // strings
    data(
        "get",
        2,
        RF,
        K1,
        "string",
        "Returns a key's string value.",
        strings::get,
    ),
    data(
        "set",
        -3,
        W,
        K1,
        "string",
        "Sets a key's string value.",
        strings::set,
    ),
    data(
        "setnx",
        3,
        WF,
        K1,
        "string",
        "Sets a key's value if it does not exist.",
        strings::setnx,
    ),
    data(
        "setex",
        4,
        W,
        K1,
        "string",
        "Sets a value with a TTL in seconds.",
        strings::setex,
    ),
    data(
        "psetex",
        4,
        W,
        K1,
        "string",
        "Sets a value with a TTL in milliseconds.",
        strings::setex,
    ),
    data(
        "getset",
        3,
        WF,
        K1,
        "string",
        "Sets a value and returns the old one.",
        strings::getset,
    ),
    data(
        "getdel",
        2,
        D,
        K1,
        "string",
        "Returns a value and deletes the key.",
        strings::getdel,
    ),
    data(
        "getex",
        -2,
        D,
        K1,
        "string",
        "Returns a value and sets or clears the key's deadline.",
        strings::getex,
    ),
    data(
        "mget",
        -2,
        RF,
        KALL,
        "string",
        "Returns the values of several keys.",
        strings::mget,
    ),
    data(
        "mset",
        -3,
        W,
        KPAIRS,
        "string",
        "Sets several keys.",
        strings::mset,
    ),
    data(
        "msetnx",
        -3,
        W,
        KPAIRS,
        "string",
        "Sets several keys if none exists.",
        strings::msetnx,
    ),
    data(
        "incr",
        2,
        WF,
        K1,
        "string",
        "Adds one to an integer value.",
        strings::incr,
    ),
    data(
        "decr",
        2,
        WF,
        K1,
        "string",
        "Subtracts one from an integer value.",
        strings::decr,
    ),
    data(
        "incrby",
        3,
        WF,
        K1,
        "string",
        "Adds to an integer value.",
        strings::incrby,
    ),
    data(
        "decrby",
        3,
        WF,
        K1,
        "string",
        "Subtracts from an integer value.",
        strings::decrby,
    ),
    data(
        "incrbyfloat",
        3,
        WF,
        K1,
        "string",
        "Adds to a floating-point value.",
        strings::incrbyfloat,
    ),
    data(
        "append",
        3,
        WF,
        K1,
        "string",
        "Appends to a string value.",
        strings::append,
    ),
    data(
        "strlen",
        2,
        RF,
        K1,
        "string",
        "Returns a string value's length.",
        strings::strlen,
    ),
    data(
        "getrange",
        4,
        R,
        K1,
        "string",
        "Returns a substring.",
        strings::getrange,
    ),
    data(
        "lcs",
        -3,
        R,
        K12,
        "string",
        "Returns the longest common subsequence of two strings.",
        lcs::lcs,
    ),
    data(
        "substr",
        4,
        R,
        K1,
        "string",
        "Returns a substring.",
        strings::getrange,
    ),
    data(
        "setrange",
        4,
        W,
        K1,
        "string",
        "Overwrites part of a string value.",
        strings::setrange,
    ),
    // hashes
    // bitmaps
    data(
        "setbit",
        4,
        W,
        K1,
        "bitmap",
        "Sets or clears the bit at an offset of a string.",
        bitmaps::setbit,
    ),
    data(
        "getbit",
        3,
        RF,
        K1,
        "bitmap",
        "Returns the bit at an offset of a string.",
        bitmaps::getbit,
    ),
    data(
        "bitcount",
        -2,
        R,
        K1,
        "bitmap",
        "Counts the set bits of a string, or of a range of it.",
        bitmaps::bitcount,
    ),
    data(
        "bitpos",
        -3,
        R,
        K1,
        "bitmap",
        "Finds the first set or clear bit of a string, or of a range of it.",
        bitmaps::bitpos,
    ),
    data(
        "bitfield",
        -2,
        W,
        K1,
        "bitmap",
        "Performs arbitrary bitfield integer operations on strings.",
        bitfield::bitfield,
    ),
    data(
        "bitfield_ro",
        -2,
        RF,
        K1,
        "bitmap",
        "Performs arbitrary read-only bitfield integer operations on strings.",
        bitfield::bitfield_ro,
    ),
    with_option_key(
        data(
            "sort",
            -2,
            WD_MOVABLE,
            K1,
            "generic",
            "Sorts a list's, set's or sorted set's elements, returns or stores them.",
            sort::sort,
        ),
        sort::store_key,
    ),
    data(
        "sort_ro",
        -2,
        R_MOVABLE,
        K1,
        "generic",
        "Sorts a list's, set's or sorted set's elements and returns them.",
        sort::sort_ro,
    ),
    data(
        "pfadd",
        -2,
        WF,
        K1,
        "hyperloglog",
        "Adds elements to the HyperLogLog sketch at a key, creating it if absent.",
        hyperloglog::pfadd,
    ),
    data(
        "pfcount",
        -2,
        R,
        KALL,
        "hyperloglog",
        "Estimates the number of distinct elements added to one or more HyperLogLog sketches.",
        hyperloglog::pfcount,
    ),
    data(
        "pfmerge",
        -2,
        W,
        KALL,
        "hyperloglog",
        "Merges HyperLogLog sketches into the first key's.",
        hyperloglog::pfmerge,
    ),
    data(
        "bitop",
        -4,
        W,
        (2, -1, 1),
        "bitmap",
        "Stores the AND, OR, XOR of strings, or the NOT of one, in a key.",
        bitmaps::bitop,
    ),
    data(
        "hset",
        -4,
        WF,
        K1,
        "hash",
        "Sets fields of a hash.",
        hashes::hset,
    ),
    data(
        "hsetnx",
        4,
        WF,
        K1,
        "hash",
        "Sets a hash field if it does not exist.",
        hashes::hsetnx,
    ),
    data(
        "hmset",
        -4,
        WF,
        K1,
        "hash",
        "Sets fields of a hash.",
        hashes::hmset,
    ),
    data(
        "hget",
        3,
        RF,
        K1,
        "hash",
        "Returns a hash field's value.",
        hashes::hget,
    ),
    data(
        "hmget",
        -3,
        RF,
        K1,
        "hash",
        "Returns the values of hash fields.",
        hashes::hmget,
    ),
    data(
        "hgetall",
        2,
        R,
        K1,
        "hash",
        "Returns every field and value of a hash.",
        hashes::hgetall,
    ),
    data(
        "hrandfield",
        -2,
        R,
        K1,
        "hash",
        "Returns random fields, with their values if asked.",
        hashes::hrandfield,
    ),
    data(
        "hdel",
        -3,
        D,
        K1,
        "hash",
        "Deletes fields of a hash.",
        hashes::hdel,
    ),
    data(
        "hexists",
        3,
        RF,
        K1,
        "hash",
        "Says whether a hash field exists.",
        hashes::hexists,
    ),
    data(
        "hlen",
        2,
        RF,
        K1,
        "hash",
        "Returns the number of fields in a hash.",
        hashes::hlen,
    ),
    data(
        "hkeys",
        2,
        R,
        K1,
        "hash",
        "Returns the fields of a hash.",
        hashes::hkeys,
    ),
    data(
        "hvals",
        2,
        R,
        K1,
        "hash",
        "Returns the values of a hash.",
        hashes::hvals,
    ),
    data(
        "hstrlen",
        3,
        RF,
        K1,
        "hash",
        "Returns the length of a hash field's value.",
        hashes::hstrlen,
    ),
    data(
        "hincrby",
        4,
        WF,
        K1,
        "hash",
        "Adds to an integer hash field.",
        hashes::hincrby,
    ),
    data(
        "hincrbyfloat",
        4,
        WF,
        K1,
        "hash",
        "Adds to a floating-point hash field.",
        hashes::hincrbyfloat,
    ),
    data(
        "hscan",
        -3,
        R,
        K1,
        "hash",
        "Iterates over the fields of a hash.",
        hashes::hscan,
    ),
    // lists
    data(
        "lpush",
        -3,
        WF,
        K1,
        "list",
        "Prepends elements to a list.",
        lists::lpush,
    ),
    data(
        "rpush",
        -3,
        WF,
        K1,
        "list",
        "Appends elements to a list.",
        lists::rpush,
    ),
    data(
        "lpushx",
        -3,
        WF,
        K1,
        "list",
        "Prepends elements to an existing list.",
        lists::lpushx,
    ),
    data(
        "rpushx",
        -3,
        WF,
        K1,
        "list",
        "Appends elements to an existing list.",
        lists::rpushx,
    ),
    data(
        "lpop",
        -2,
        D,
        K1,
        "list",
        "Removes and returns the first elements of a list.",
        lists::lpop,
    ),
    data(
        "rpop",
        -2,
        D,
        K1,
        "list",
        "Removes and returns the last elements of a list.",
        lists::rpop,
    ),
    data(
        "lmove",
        5,
        W,
        K12,
        "list",
        "Moves an element from one end of a list to an end of another.",
        lists::lmove,
    ),
    data(
        "rpoplpush",
        3,
        W,
        K12,
        "list",
        "Moves the last element of a list to the head of another.",
        lists::rpoplpush,
    ),
    data(
        "lmpop",
        -4,
        W_MOVABLE,
        NONE,
        "list",
        "Removes and returns elements from the first non-empty list of several.",
        lists::lmpop,
    ),
    data(
        "blmpop",
        -5,
        WB_MOVABLE,
        NONE,
        "list",
        "Removes and returns elements from the first non-empty list of several, or waits for one.",
        lists::blmpop,
    ),
    data(
        "blpop",
        -3,
        BLOCKING_POP,
        KBUTLAST,
        "list",
        "Removes and returns the first element of the first non-empty list, or waits for one.",
        lists::blpop,
    ),
    data(
        "brpop",
        -3,
        BLOCKING_POP,
        KBUTLAST,
        "list",
        "Removes and returns the last element of the first non-empty list, or waits for one.",
        lists::brpop,
    ),
    data(
        "blmove",
        6,
        BLOCKING_MOVE,
        K12,
        "list",
        "Moves an element from one list to another, waiting for one if the source is empty.",
        lists::blmove,
    ),
    data(
        "brpoplpush",
        4,
        BLOCKING_MOVE,
        K12,
        "list",
        "Moves the last element of a list to the head of another, waiting for one.",
        lists::brpoplpush,
    ),
    data(
        "llen",
        2,
        RF,
        K1,
        "list",
        "Returns the length of a list.",
        lists::llen,
    ),
    data(
        "lrange",
        4,
        R,
        K1,
        "list",
        "Returns a range of elements of a list.",
        lists::lrange,
    ),
    data(
        "lindex",
        3,
        R,
        K1,
        "list",
        "Returns an element of a list by its index.",
        lists::lindex,
    ),
    data(
        "lset",
        4,
        W,
        K1,
        "list",
        "Sets an element of a list by its index.",
        lists::lset,
    ),
    data(
        "ltrim",
        4,
        WO,
        K1,
        "list",
        "Keeps only a range of a list.",
        lists::ltrim,
    ),
    data(
        "lrem",
        4,
        WO,
        K1,
        "list",
        "Removes elements equal to a value from a list.",
        lists::lrem,
    ),
    data(
        "linsert",
        5,
        W,
        K1,
        "list",
        "Inserts an element before or after another.",
        lists::linsert,
    ),
    data(
        "lpos",
        -3,
        R,
        K1,
        "list",
        "Returns the indexes of matching elements.",
        lists::lpos,
    ),
    // sets
    data(
        "sadd",
        -3,
        WF,
        K1,
        "set",
        "Adds members to a set.",
        sets::sadd,
    ),
    data(
        "srem",
        -3,
        D,
        K1,
        "set",
        "Removes members from a set.",
        sets::srem,
    ),
    data(
        "smembers",
        2,
        R,
        K1,
        "set",
        "Returns every member of a set.",
        sets::smembers,
    ),
    data(
        "sismember",
        3,
        RF,
        K1,
        "set",
        "Says whether a member is in a set.",
        sets::sismember,
    ),
    data(
        "smismember",
        -3,
        RF,
        K1,
        "set",
        "Says whether members are in a set.",
        sets::smismember,
    ),
    data(
        "scard",
        2,
        RF,
        K1,
        "set",
        "Returns the number of members of a set.",
        sets::scard,
    ),
    data(
        "spop",
        -2,
        D,
        K1,
        "set",
        "Removes and returns random members.",
        sets::spop,
    ),
    data(
        "srandmember",
        -2,
        R,
        K1,
        "set",
        "Returns random members.",
        sets::srandmember,
    ),
    data(
        "sintercard",
        -3,
        R_MOVABLE,
        NONE,
        "set",
        "Returns the number of members in the intersection of sets.",
        sets::sintercard,
    ),
    data(
        "sinter",
        -2,
        R,
        KALL,
        "set",
        "Returns the intersection of sets.",
        sets::sinter,
    ),
    data(
        "sunion",
        -2,
        R,
        KALL,
        "set",
        "Returns the union of sets.",
        sets::sunion,
    ),
    data(
        "sdiff",
        -2,
        R,
        KALL,
        "set",
        "Returns the difference of sets.",
        sets::sdiff,
    ),
    data(
        "sinterstore",
        -3,
        W,
        KALL,
        "set",
        "Stores the intersection of sets.",
        sets::sinterstore,
    ),
    data(
        "sunionstore",
        -3,
        W,
        KALL,
        "set",
        "Stores the union of sets.",
        sets::sunionstore,
    ),
    data(
        "sdiffstore",
        -3,
        W,
        KALL,
        "set",
        "Stores the difference of sets.",
        sets::sdiffstore,
    ),
    data(
        "smove",
        4,
        D,
        K12,
        "set",
        "Moves a member from one set to another.",
        sets::smove,
    ),
    data(
        "sscan",
        -3,
        R,
        K1,
        "set",
        "Iterates over the members of a set.",
        sets::sscan,
    ),
    // sorted sets
    data(
        "zadd",
        -4,
        WF,
        K1,
        "sorted-set",
        "Adds members or updates their scores.",
        zsets::zadd,
    ),
    data(
        "zincrby",
        4,
        WF,
        K1,
        "sorted-set",
        "Adds to a member's score.",
        zsets::zincrby,
    ),
    data(
        "zrem",
        -3,
        D,
        K1,
        "sorted-set",
        "Removes members.",
        zsets::zrem,
    ),
    data(
        "zscore",
        3,
        RF,
        K1,
        "sorted-set",
        "Returns a member's score.",
        zsets::zscore,
    ),
    data(
        "zmscore",
        -3,
        RF,
        K1,
        "sorted-set",
        "Returns the scores of members.",
        zsets::zmscore,
    ),
    data(
        "zcard",
        2,
        RF,
        K1,
        "sorted-set",
        "Returns the number of members.",
        zsets::zcard,
    ),
    data(
        "zrange",
        -4,
        R,
        K1,
        "sorted-set",
        "Returns members in a range of ranks, scores or lex.",
        zsets::zrange,
    ),
    data(
        "zrangestore",
        -5,
        W,
        K12,
        "sorted-set",
        "Stores a range of members in a key.",
        zsets::zrangestore,
    ),
    data(
        "zrandmember",
        -2,
        R,
        K1,
        "sorted-set",
        "Returns random members, with their scores if asked.",
        zsets::zrandmember,
    ),
    data(
        "zrevrange",
        -4,
        R,
        K1,
        "sorted-set",
        "Returns members in a range of ranks, high to low.",
        zsets::zrevrange,
    ),
    data(
        "zrangebyscore",
        -4,
        R,
        K1,
        "sorted-set",
        "Returns members in a range of scores.",
        zsets::zrangebyscore,
    ),
    data(
        "zrevrangebyscore",
        -4,
        R,
        K1,
        "sorted-set",
        "Returns members in a range of scores, high to low.",
        zsets::zrevrangebyscore,
    ),
    data(
        "zrangebylex",
        -4,
        R,
        K1,
        "sorted-set",
        "Returns members in a lexical range.",
        zsets::zrangebylex,
    ),
    data(
        "zrevrangebylex",
        -4,
        R,
        K1,
        "sorted-set",
        "Returns members in a lexical range, high to low.",
        zsets::zrevrangebylex,
    ),
    data(
        "zrank",
        -3,
        RF,
        K1,
        "sorted-set",
        "Returns a member's rank.",
        zsets::zrank,
    ),
    data(
        "zrevrank",
        -3,
        RF,
        K1,
        "sorted-set",
        "Returns a member's rank, high to low.",
        zsets::zrevrank,
    ),
    data(
        "zcount",
        4,
        RF,
        K1,
        "sorted-set",
        "Counts members in a range of scores.",
        zsets::zcount,
    ),
    data(
        "zlexcount",
        4,
        RF,
        K1,
        "sorted-set",
        "Counts members in a lexical range.",
        zsets::zlexcount,
    ),
    data(
        "zmpop",
        -4,
        W_MOVABLE,
        NONE,
        "sorted-set",
        "Removes and returns members with the lowest or highest scores from the first non-empty sorted set of several.",
        zsets::zmpop,
    ),
    data(
        "bzmpop",
        -5,
        WB_MOVABLE,
        NONE,
        "sorted-set",
        "ZMPOP, or waits for a member.",
        zsets::bzmpop,
    ),
    data(
        "bzpopmin",
        -3,
        BLOCKING_FAST,
        KBUTLAST,
        "sorted-set",
        "Removes and returns the member with the lowest score of the first non-empty sorted set, or waits for one.",
        zsets::bzpopmin,
    ),
    data(
        "bzpopmax",
        -3,
        BLOCKING_FAST,
        KBUTLAST,
        "sorted-set",
        "Removes and returns the member with the highest score of the first non-empty sorted set, or waits for one.",
        zsets::bzpopmax,
    ),
    data(
        "zpopmin",
        -2,
        D,
        K1,
        "sorted-set",
        "Removes and returns the lowest-scored members.",
        zsets::zpopmin,
    ),
    data(
        "zpopmax",
        -2,
        D,
        K1,
        "sorted-set",
        "Removes and returns the highest-scored members.",
        zsets::zpopmax,
    ),
    data(
        "zremrangebyrank",
        4,
        WO,
        K1,
        "sorted-set",
        "Removes members in a range of ranks.",
        zsets::zremrangebyrank,
    ),
    data(
        "zremrangebyscore",
        4,
        WO,
        K1,
        "sorted-set",
        "Removes members in a range of scores.",
        zsets::zremrangebyscore,
    ),
    data(
        "zremrangebylex",
        4,
        WO,
        K1,
        "sorted-set",
        "Removes members in a lexical range.",
        zsets::zremrangebylex,
    ),
    data(
        "zunionstore",
        -4,
        WD_MOVABLE,
        K1,
        "sorted-set",
        "Stores the union of sorted sets (and sets) in a key.",
        zset_algebra::zunionstore,
    ),
    data(
        "zinterstore",
        -4,
        WD_MOVABLE,
        K1,
        "sorted-set",
        "Stores the intersection of sorted sets (and sets) in a key.",
        zset_algebra::zinterstore,
    ),
    data(
        "zdiffstore",
        -4,
        WD_MOVABLE,
        K1,
        "sorted-set",
        "Stores the difference of sorted sets (and sets) in a key.",
        zset_algebra::zdiffstore,
    ),
    data(
        "zunion",
        -3,
        R_MOVABLE,
        NONE,
        "sorted-set",
        "Returns the union of sorted sets (and sets).",
        zset_algebra::zunion,
    ),
    data(
        "zinter",
        -3,
        R_MOVABLE,
        NONE,
        "sorted-set",
        "Returns the intersection of sorted sets (and sets).",
        zset_algebra::zinter,
    ),
    data(
        "zdiff",
        -3,
        R_MOVABLE,
        NONE,
        "sorted-set",
        "Returns the difference of sorted sets (and sets).",
        zset_algebra::zdiff,
    ),
    data(
        "zintercard",
        -3,
        R_MOVABLE,
        NONE,
        "sorted-set",
        "Returns the number of members in the intersection of sorted sets (and sets).",
        zset_algebra::zintercard,
    ),
    data(
        "zscan",
        -3,
        R,
        K1,
        "sorted-set",
        "Iterates over the members of a sorted set.",
        zsets::zscan,
    ),
    // streams
    data(
        "xadd",
        -5,
        WF,
        K1,
        "stream",
        "Appends a new entry to a stream, creating the key if needed.",
        streams::xadd,
    ),
    data(
        "xlen",
        2,
        RF,
        K1,
        "stream",
        "Returns the number of entries in a stream.",
        streams::xlen,
    ),
    data(
        "xrange",
        -4,
        R,
        K1,
        "stream",
        "Returns the entries of a stream within a range of IDs.",
        streams::xrange,
    ),
    data(
        "xrevrange",
        -4,
        R,
        K1,
        "stream",
        "Returns the entries of a stream within a range of IDs, in reverse order.",
        streams::xrevrange,
    ),
    data(
        "xdel",
        -3,
        D,
        K1,
        "stream",
        "Deletes entries from a stream and returns how many were deleted.",
        streams::xdel,
    ),
    data(
        "xtrim",
        -4,
        WO,
        K1,
        "stream",
        "Deletes the oldest entries of a stream.",
        streams::xtrim,
    ),
    data(
        "xread",
        -4,
        RB,
        NONE,
        "stream",
        "Returns the entries of streams after given IDs, or waits for some (BLOCK).",
        streams::xread,
    ),
    data(
        "xsetid",
        -3,
        WF,
        K1,
        "stream",
        "An internal command for replicating stream values: sets a stream's last ID.",
        streams::xsetid,
    ),
    data(
        "xinfo",
        -2,
        R,
        (2, 2, 1),
        "stream",
        "Returns information about a stream, its consumer groups or a group's consumers.",
        stream_info::xinfo,
    ),
    data(
        "xgroup",
        -2,
        WO,
        (2, 2, 1),
        "stream",
        "Creates, destroys and changes consumer groups and their consumers.",
        consumer_groups::xgroup,
    ),
    data(
        "xreadgroup",
        -7,
        WB_MOVABLE,
        NONE,
        "stream",
        "Delivers entries to a consumer of a group, or waits for some (BLOCK).",
        consumer_groups::xreadgroup,
    ),
    data(
        "xack",
        -4,
        D,
        K1,
        "stream",
        "Acknowledges entries delivered to a consumer group.",
        consumer_groups::xack,
    ),
    data(
        "xpending",
        -3,
        R,
        K1,
        "stream",
        "Returns a consumer group's pending (delivered, unacknowledged) entries.",
        consumer_groups::xpending,
    ),
    data(
        "xclaim",
        -6,
        D,
        K1,
        "stream",
        "Hands pending entries to another consumer of the group.",
        consumer_groups::xclaim,
    ),
    data(
        "xautoclaim",
        -6,
        D,
        K1,
        "stream",
        "Hands the pending entries idle for long enough to another consumer of the group.",
        consumer_groups::xautoclaim,
    ),
    // geo (a sorted set of geohash scores: geo.rs)
    data(
        "geoadd",
        -5,
        W,
        K1,
        "geo",
        "Adds members at positions (longitude, latitude) to a geo set.",
        geo::geoadd,
    ),
    data(
        "geopos",
        -2,
        R,
        K1,
        "geo",
        "Returns the positions of members of a geo set.",
        geo::geopos,
    ),
    data(
        "geodist",
        -4,
        R,
        K1,
        "geo",
        "Returns the distance between two members of a geo set.",
        geo::geodist,
    ),
    data(
        "geohash",
        -2,
        R,
        K1,
        "geo",
        "Returns the standard geohash strings of members of a geo set.",
        geo::geohash,
    ),
    data(
        "geosearch",
        -7,
        R,
        K1,
        "geo",
        "Returns the members of a geo set within a circle or a rectangle.",
        geo::geosearch,
    ),
    data(
        "geosearchstore",
        -8,
        W,
        K12,
        "geo",
        "Stores the members of a geo set within a circle or a rectangle.",
        geo::geosearchstore,
    ),
    with_option_key(
        data(
            "georadius",
            -6,
            WD_MOVABLE,
            K1,
            "geo",
            "Returns, or stores, the members of a geo set within a radius of a position.",
            geo::georadius,
        ),
        geo::store_key,
    ),
    data(
        "georadius_ro",
        -6,
        R,
        K1,
        "geo",
        "Returns the members of a geo set within a radius of a position.",
        geo::georadius_ro,
    ),
    with_option_key(
        data(
            "georadiusbymember",
            -5,
            WD_MOVABLE,
            K1,
            "geo",
            "Returns, or stores, the members of a geo set within a radius of a member.",
            geo::georadiusbymember,
        ),
        geo::store_key,
    ),
    data(
        "georadiusbymember_ro",
        -5,
        R,
        K1,
        "geo",
        "Returns the members of a geo set within a radius of a member.",
        geo::georadiusbymember_ro,
    ),
];

/// Redis's hints to clients and cluster proxies (COMMAND INFO's tips) for a command by its
/// full name (`client|list` for a subcommand): that a reply may differ between runs on the
/// same data, or list in any order, and how a proxy would spread the command over shards
/// or nodes and join the replies.
pub fn tips(name: &str) -> &'static [&'static str] {
    const ANY_OUTPUT: &str = "nondeterministic_output";
    const ANY_ORDER: &str = "nondeterministic_output_order";
    const ALL_SHARDS: &str = "request_policy:all_shards";
    const ALL_NODES: &str = "request_policy:all_nodes";
    const MULTI_SHARD: &str = "request_policy:multi_shard";
    const ALL_SUCCEEDED: &str = "response_policy:all_succeeded";
    const ONE_SUCCEEDED: &str = "response_policy:one_succeeded";
    const SPECIAL: &str = "response_policy:special";
    const SUM: &str = "response_policy:agg_sum";
    const MIN: &str = "response_policy:agg_min";
    match name {
        "dump"
        | "hrandfield"
        | "hscan"
        | "lastsave"
        | "pttl"
        | "spop"
        | "srandmember"
        | "sscan"
        | "time"
        | "ttl"
        | "xadd"
        | "xautoclaim"
        | "xclaim"
        | "xpending"
        | "xtrim"
        | "zrandmember"
        | "zscan"
        | "client|list"
        | "client|info"
        | "object|idletime"
        | "object|encoding"
        | "object|freq"
        | "object|refcount"
        | "xinfo|consumers"
        | "cluster|replicas"
        | "cluster|bumpepoch"
        | "cluster|nodes"
        | "cluster|links"
        | "cluster|info"
        | "cluster|slots"
        | "cluster|slaves"
        | "cluster|shards"
        | "cluster|count-failure-reports"
        | "cluster|getkeysinslot" => &[ANY_OUTPUT],
        "command" | "hgetall" | "hkeys" | "hvals" | "sdiff" | "sinter" | "smembers" | "sunion"
        | "function|list" | "command|docs" | "command|list" | "command|info" | "module|list" => {
            &[ANY_ORDER]
        }
        "del" | "exists" | "touch" | "unlink" => &[MULTI_SHARD, SUM],
        "flushall" | "flushdb" | "ping" | "function|delete" | "function|restore"
        | "function|load" | "function|flush" | "memory|purge" => &[ALL_SHARDS, ALL_SUCCEEDED],
        "script|load" | "script|flush" | "config|set" | "slowlog|reset" | "latency|reset" => {
            &[ALL_NODES, ALL_SUCCEEDED]
        }
        "function|kill" | "script|kill" => &[ALL_SHARDS, ONE_SUCCEEDED],
        "function|stats" | "memory|stats" | "memory|doctor" | "memory|malloc-stats" => {
            &[ANY_OUTPUT, ALL_SHARDS, SPECIAL]
        }
        "latency|graph" | "latency|latest" | "latency|histogram" | "latency|doctor"
        | "latency|history" => &[ANY_OUTPUT, ALL_NODES, SPECIAL],
        "script|exists" => &[ALL_SHARDS, "response_policy:agg_logical_and"],
        "slowlog|len" => &[ALL_NODES, SUM, ANY_OUTPUT],
        "slowlog|get" => &[ALL_NODES, ANY_OUTPUT],
        "mget" => &[MULTI_SHARD],
        "mset" => &[MULTI_SHARD, ALL_SUCCEEDED],
        "msetnx" => &[MULTI_SHARD, MIN],
        "scan" => &[ANY_OUTPUT, "request_policy:special"],
        "keys" => &[ALL_SHARDS, ANY_ORDER],
        "wait" => &[ALL_SHARDS, MIN],
        "info" => &[ANY_OUTPUT, ALL_SHARDS, SPECIAL],
        "randomkey" => &[ALL_SHARDS, ANY_OUTPUT],
        "dbsize" => &[ALL_SHARDS, SUM],
        _ => &[],
    }
}

/// The command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    // Names are short: lower-case into a small buffer instead of allocating.
    let mut lower = [0u8; 32];
    let lower = lower.get_mut(..name.len())?;
    for (to, from) in lower.iter_mut().zip(name) {
        *to = from.to_ascii_lowercase();
    }
    by_name().get(&*lower).copied()
}

fn by_name() -> &'static std::collections::HashMap<&'static [u8], &'static Command> {
    static BY_NAME: std::sync::OnceLock<
        std::collections::HashMap<&'static [u8], &'static Command>,
    > = std::sync::OnceLock::new();
    BY_NAME.get_or_init(|| COMMANDS.iter().map(|c| (c.name.as_bytes(), c)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys `find` reads in the command line `line`, space-separated.
    fn keys_found(line: &str, find: fn(&Command, &[Vec<u8>]) -> Vec<String>) -> String {
        let args: Vec<Vec<u8>> = line.split(' ').map(|a| a.as_bytes().to_vec()).collect();
        let command = lookup(&args[0]).expect("a command");
        find(command, &args).join(" ")
    }

    fn text(key: &[u8]) -> String {
        String::from_utf8_lossy(key).into_owned()
    }

    #[test]
    fn key_args_follow_the_key_positions() {
        let keys = |line: &str| keys_found(line, |c, args| c.key_args(args).map(text).collect());
        assert_eq!(keys("get k"), "k");
        assert_eq!(keys("mset a 1 b 2"), "a b");
        assert_eq!(keys("del a b c"), "a b c");
        assert_eq!(keys("blpop a b 0"), "a b");
        assert_eq!(keys("lmove s d left left"), "s d");
        assert_eq!(keys("geosearchstore d s frommember m byradius 1 m"), "d s");
        assert_eq!(keys("georadius s 0 0 1 m count 1 store d"), "s d");
        assert_eq!(keys("georadiusbymember s m 1 m store x storedist d"), "s d");
        assert_eq!(keys("georadius s 0 0 1 m count store"), "s");
        assert_eq!(keys("georadius_ro s 0 0 1 m store d"), "s");
        assert_eq!(keys("ping"), "");
        assert_eq!(keys("flushdb"), "");
    }

    #[test]
    fn named_keys_read_the_commands_whose_keys_move() {
        let keys = |line: &str| {
            keys_found(line, |c, args| {
                c.named_keys(args).into_iter().map(text).collect()
            })
        };
        assert_eq!(keys("get k"), "k");
        assert_eq!(keys("lmpop 2 a b left count 3"), "a b");
        assert_eq!(keys("blmpop 0 2 a b left"), "a b");
        assert_eq!(keys("zunionstore d 2 a b weights 1 2"), "d a b");
        assert_eq!(keys("zunion 2 a b"), "a b");
        assert_eq!(keys("sintercard 1 a limit 2"), "a");
        assert_eq!(keys("eval body 2 a b c"), "a b");
        assert_eq!(keys("fcall f 1 a b"), "a");
        assert_eq!(keys("xread count 2 streams s t 0 0"), "s t");
        assert_eq!(keys("xreadgroup group g c streams s >"), "s");
        assert_eq!(keys("sort s by w_* store d"), "s d");
        assert_eq!(keys("georadius s 0 0 1 m store a store b"), "s a b");
        assert_eq!(keys("object encoding k"), "k");
        assert_eq!(keys("object help"), "");
        assert_eq!(keys("lmpop 5 a left"), "", "more keys counted than given");
        assert_eq!(keys("zunion x a"), "", "no count");
    }

    /// A command has key specifications (a container's are its subcommands') if and only
    /// if its key positions name keys (or shard channels) or it says its keys move: the
    /// ACL check, tracking and GETKEYS would see no keys in one without.
    #[test]
    fn every_command_with_key_positions_has_key_specifications() {
        for command in COMMANDS {
            let mut names: Vec<String> =
                super::super::subcommands::full_names(command.name).collect();
            if names.is_empty() {
                names.push(command.name.to_string());
            }
            let specified = names.iter().any(|name| !key_specs::of(name).is_empty());
            let positioned = command.keys.0 > 0 || command.flags.contains(&"movablekeys");
            assert_eq!(positioned, specified, "{}", command.name);
        }
    }

    /// Words that steer the key finders: keywords, counts (some past the end, some
    /// negative, some not numbers), subcommands.
    const WORDS: &[&str] = &[
        "k",
        "v",
        "0",
        "1",
        "2",
        "3",
        "-1",
        "x",
        "STREAMS",
        "STORE",
        "STOREDIST",
        "GET",
        "BY",
        "LIMIT",
        "KEYS",
        "COUNT",
        "ENCODING",
        "USAGE",
        "CREATE",
        "STREAM",
        "HELP",
        "SET",
        "OVERFLOW",
        "INCRBY",
        "WEIGHTS",
        "DB",
        "",
    ];

    proptest::proptest! {
        /// Any command with any arguments (of any number, whatever its arity): the keys found
        /// are arguments, never the command's name, and no finder panics.
        #[test]
        fn keys_are_found_among_any_arguments(
            at in 0..COMMANDS.len(),
            words in proptest::collection::vec(proptest::sample::select(WORDS), 0..10),
        ) {
            let command = &COMMANDS[at];
            let args: Vec<Vec<u8>> = std::iter::once(command.name)
                .chain(words.iter().copied())
                .map(|w| w.as_bytes().to_vec())
                .collect();
            for key in command.keys_with_flags(&args) {
                proptest::prop_assert!(key.at > 0 && key.at < args.len(), "{:?} in {:?}", key, args);
            }
            let _ = command.takes_keys(&args);
            if command.arity_ok(args.len()) {
                proptest::prop_assert!(command.key_args(&args).count() < args.len());
            }
        }
    }

    #[test]
    fn every_command_is_found_by_its_name_in_any_case() {
        let mut names = std::collections::HashSet::new();
        for command in COMMANDS {
            assert!(names.insert(command.name), "{} listed twice", command.name);
            assert_eq!(command.name, command.name.to_ascii_lowercase());
            let upper = command.name.to_ascii_uppercase();
            let found = lookup(upper.as_bytes()).map(|c| c.name);
            assert_eq!(found, Some(command.name));
        }
        assert!(lookup(b"no-such-command").is_none());
        assert!(lookup(&[b'x'; 100]).is_none());
    }
}
