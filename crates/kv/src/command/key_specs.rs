//! Key specifications (decision 164): for every command that names keys, where its keys
//! are in its arguments and what it does to each (reads it, overwrites it, deletes it…),
//! as Redis 7.0 describes its commands in COMMAND INFO. One table serves three readers:
//! COMMAND INFO and COMMAND GETKEYS / GETKEYSANDFLAGS, which report it; the ACL check,
//! whose key patterns may allow reading (`%R~`) or writing (`%W~`) alone; and every place
//! that needs a command's keys (client tracking, scripts' written keys).
//!
//! A specification has flags, a *begin search* (the first key is at an index, or after a
//! keyword) and a *find keys* step (a range from there, or a count of keys in an argument).
//! Keys are found from the specifications as Redis finds them (`getKeysUsingKeySpecs`):
//! arguments that do not fit a specification (a count of keys past the end) name no key
//! at all. A few commands' flags depend on their arguments (SET with GET reads the old
//! value; BITFIELD with only GETs reads) and SORT's STORE may appear anywhere: for those a
//! procedure reads the arguments, as Redis's own do.

use super::Command;

/// What a command does to a key, as the bits of [`KeySpec::flags`].
pub mod flag {
    /// Reads the key's value (and nothing else).
    pub const RO: u16 = 1;
    /// Reads and writes it.
    pub const RW: u16 = 1 << 1;
    /// Overwrites it whatever it held.
    pub const OW: u16 = 1 << 2;
    /// Removes it.
    pub const RM: u16 = 1 << 3;
    /// The value (or part of it) reaches the client.
    pub const ACCESS: u16 = 1 << 4;
    /// The value is changed.
    pub const UPDATE: u16 = 1 << 5;
    /// Something is added to the value.
    pub const INSERT: u16 = 1 << 6;
    /// Something is removed from the value (or the key itself).
    pub const DELETE: u16 = 1 << 7;
    /// The argument is not a key (a shard channel), but is hashed as one.
    pub const NOT_KEY: u16 = 1 << 8;
    /// The specification may miss keys (SORT's STORE).
    pub const INCOMPLETE: u16 = 1 << 9;
    /// The flags depend on other arguments (SET's GET).
    pub const VARIABLE_FLAGS: u16 = 1 << 10;

    /// The flags' names, in the order COMMAND INFO lists them.
    pub const NAMES: [(u16, &str); 11] = [
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

use flag::*;

/// Where the search for a specification's keys begins.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BeginSearch {
    /// At this argument (the command's name is 0).
    Index(usize),
    /// After this keyword (any case), looked for from argument `start_from` towards the end,
    /// or, when `start_from` is negative, from that many from the end towards the start.
    Keyword {
        keyword: &'static str,
        start_from: i32,
    },
    /// Only a procedure can tell (SORT's STORE).
    Unknown,
}

/// How the keys go on from where the search began.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FindKeys {
    /// Every `step`-th argument up to `last_key`, counted from the first key (0: one key), or
    /// when negative from the end (-1: the last argument); with a `limit` above 1, only the
    /// first 1/`limit` of the arguments that remain (XREAD's keys before their IDs).
    Range {
        last_key: i32,
        step: usize,
        limit: usize,
    },
    /// The argument `count_at` (from the first key) counts the keys, which begin `first`
    /// arguments on.
    Keynum {
        count_at: usize,
        first: usize,
        step: usize,
    },
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeySpec {
    pub flags: u16,
    pub begin: BeginSearch,
    pub find: FindKeys,
}

/// One key a command's arguments name: its position (the name is 0) and the flags of the
/// specification that found it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FoundKey {
    pub at: usize,
    pub flags: u16,
}

impl FoundKey {
    /// Whether the command reads the key's value (an ACL pattern must allow reading).
    pub fn reads(&self) -> bool {
        self.flags & ACCESS != 0
    }

    /// Whether the command changes the key (an ACL pattern must allow writing).
    pub fn writes(&self) -> bool {
        self.flags & (INSERT | DELETE | UPDATE) != 0
    }
}

const fn spec(flags: u16, begin: BeginSearch, find: FindKeys) -> KeySpec {
    KeySpec { flags, begin, find }
}

const fn at(index: usize) -> BeginSearch {
    BeginSearch::Index(index)
}

const fn after(keyword: &'static str, start_from: i32) -> BeginSearch {
    BeginSearch::Keyword {
        keyword,
        start_from,
    }
}

/// The key where the search began, alone.
const ONE: FindKeys = range(0, 1);
/// Every argument from there to the end.
const ALL: FindKeys = range(-1, 1);
/// Every argument but the last (BLPOP's timeout).
const ALL_BUT_LAST: FindKeys = range(-2, 1);
/// Keys counted by the argument where the search began, from the next one.
const COUNTED: FindKeys = FindKeys::Keynum {
    count_at: 0,
    first: 1,
    step: 1,
};

const fn range(last_key: i32, step: usize) -> FindKeys {
    FindKeys::Range {
        last_key,
        step,
        limit: 0,
    }
}

/// One key at argument 1 with these flags.
const fn first(flags: u16) -> KeySpec {
    spec(flags, at(1), ONE)
}

const READ: &[KeySpec] = &[first(RO | ACCESS)];
const LOOK: &[KeySpec] = &[first(RO)];
const UPDATE_1: &[KeySpec] = &[first(RW | UPDATE)];
const DELETE_FROM: &[KeySpec] = &[first(RW | DELETE)];
const CHANGE_READ: &[KeySpec] = &[first(RW | ACCESS | UPDATE)];
const INSERT_1: &[KeySpec] = &[first(RW | INSERT)];
const POP: &[KeySpec] = &[first(RW | ACCESS | DELETE)];
const OVERWRITE: &[KeySpec] = &[first(OW | UPDATE)];
const READ_COUNTED: &[KeySpec] = &[spec(RO | ACCESS, at(1), COUNTED)];
const MOVE_ONE: &[KeySpec] = &[first(RW | ACCESS | DELETE), spec(RW | INSERT, at(2), ONE)];
const LOOK_2: &[KeySpec] = &[spec(RO, at(2), ONE)];
const READ_ALL: &[KeySpec] = &[spec(RO | ACCESS, at(1), ALL)];
const LOOK_ALL: &[KeySpec] = &[spec(RO, at(1), ALL)];
const BLOCKING_POP: &[KeySpec] = &[spec(RW | ACCESS | DELETE, at(1), ALL_BUT_LAST)];
const STORE_COUNTED: &[KeySpec] = &[first(OW | UPDATE), spec(RO | ACCESS, at(2), COUNTED)];
const READ_2: &[KeySpec] = &[spec(RO | ACCESS, at(2), ONE)];
const POP_COUNTED: &[KeySpec] = &[spec(RW | ACCESS | DELETE, at(1), COUNTED)];
const BLOCKING_POP_COUNTED: &[KeySpec] = &[spec(RW | ACCESS | DELETE, at(2), COUNTED)];
const STORE_READ: &[KeySpec] = &[first(OW | UPDATE), READ_2[0]];
const STORE_ALL: &[KeySpec] = &[first(OW | UPDATE), spec(RO | ACCESS, at(2), ALL)];
const DELETE_ALL: &[KeySpec] = &[spec(RM | DELETE, at(1), ALL)];
const GROUP_DELETE: &[KeySpec] = &[spec(RW | DELETE, at(2), ONE)];
const GROUP_INSERT: &[KeySpec] = &[spec(RW | INSERT, at(2), ONE)];
const SCRIPT_RO: &[KeySpec] = &[spec(RO | ACCESS, at(2), COUNTED)];
const SCRIPT: &[KeySpec] = &[spec(RW | ACCESS | UPDATE, at(2), COUNTED)];
const SHARD_CHANNELS: &[KeySpec] = &[spec(NOT_KEY, at(1), ALL)];
const SORT_RO: &[KeySpec] = &[
    first(RO | ACCESS),
    spec(RO | ACCESS, BeginSearch::Unknown, FindKeys::Unknown),
];
const SORT: &[KeySpec] = &[
    SORT_RO[0],
    SORT_RO[1],
    spec(OW | UPDATE, BeginSearch::Unknown, FindKeys::Unknown),
];
const RENAME: &[KeySpec] = &[first(RW | ACCESS | DELETE), spec(OW | UPDATE, at(2), ONE)];

/// GEORADIUS's keys, its STORE and STOREDIST options searched from argument `options`.
const fn georadius(options: i32) -> [KeySpec; 3] {
    [
        first(RO | ACCESS),
        spec(OW | UPDATE, after("STORE", options), ONE),
        spec(OW | UPDATE, after("STOREDIST", options), ONE),
    ]
}

/// XREAD's and XREADGROUP's keys: the first half of what follows STREAMS.
const fn streams_after(start_from: i32) -> [KeySpec; 1] {
    [spec(
        RO | ACCESS,
        after("STREAMS", start_from),
        FindKeys::Range {
            last_key: -1,
            step: 1,
            limit: 2,
        },
    )]
}

/// The key specifications of a command by its full name (`object|encoding` for a
/// container's subcommand); none for a command without keys.
pub fn of(name: &str) -> &'static [KeySpec] {
    match name {
        "bitcount"
        | "bitfield_ro"
        | "bitpos"
        | "dump"
        | "expiretime"
        | "geodist"
        | "geohash"
        | "geopos"
        | "georadius_ro"
        | "georadiusbymember_ro"
        | "geosearch"
        | "get"
        | "getbit"
        | "getrange"
        | "hget"
        | "hgetall"
        | "hkeys"
        | "hmget"
        | "hrandfield"
        | "hscan"
        | "hvals"
        | "lindex"
        | "lpos"
        | "lrange"
        | "pexpiretime"
        | "pttl"
        | "smembers"
        | "smismember"
        | "srandmember"
        | "sscan"
        | "substr"
        | "ttl"
        | "xpending"
        | "xrange"
        | "xrevrange"
        | "zcount"
        | "zlexcount"
        | "zmscore"
        | "zrandmember"
        | "zrange"
        | "zrangebylex"
        | "zrangebyscore"
        | "zrank"
        | "zrevrange"
        | "zrevrangebylex"
        | "zrevrangebyscore"
        | "zrevrank"
        | "zscan"
        | "zscore" => READ,
        "expire" | "expireat" | "geoadd" | "hmset" | "hset" | "lset" | "persist" | "pexpire"
        | "pexpireat" | "setrange" | "xack" | "xclaim" | "xsetid" | "zadd" | "xadd" => UPDATE_1,
        "hdel" | "lrem" | "ltrim" | "srem" | "xautoclaim" | "xdel" | "xtrim" | "zrem"
        | "zremrangebylex" | "zremrangebyrank" | "zremrangebyscore" => DELETE_FROM,
        "decr" | "decrby" | "getset" | "hincrby" | "hincrbyfloat" | "incr" | "incrby"
        | "incrbyfloat" | "move" | "setbit" | "zincrby" | "getex" => CHANGE_READ,
        "hexists" | "hlen" | "hstrlen" | "llen" | "scard" | "sismember" | "strlen" | "type"
        | "xlen" | "zcard" => LOOK,
        "append" | "hsetnx" | "linsert" | "lpush" | "lpushx" | "pfadd" | "rpush" | "rpushx"
        | "sadd" => INSERT_1,
        "getdel" | "lpop" | "rpop" | "spop" | "zpopmax" | "zpopmin" => POP,
        "sintercard" | "zdiff" | "zinter" | "zintercard" | "zunion" => READ_COUNTED,
        "blmove" | "brpoplpush" | "lmove" | "rpoplpush" | "smove" => MOVE_ONE,
        "memory|usage" | "object|encoding" | "object|freq" | "object|idletime"
        | "object|refcount" => LOOK_2,
        "mget" | "sdiff" | "sinter" | "sunion" => READ_ALL,
        "blpop" | "brpop" | "bzpopmax" | "bzpopmin" => BLOCKING_POP,
        "psetex" | "restore" | "setex" => OVERWRITE,
        "zdiffstore" | "zinterstore" | "zunionstore" => STORE_COUNTED,
        "exists" | "touch" | "watch" => LOOK_ALL,
        "xinfo|consumers" | "xinfo|groups" | "xinfo|stream" => READ_2,
        "blmpop" | "bzmpop" => BLOCKING_POP_COUNTED,
        "geosearchstore" | "zrangestore" => STORE_READ,
        "sdiffstore" | "sunionstore" => STORE_ALL,
        "sinterstore" => const { &[first(RW | UPDATE), STORE_ALL[1]] },
        "ssubscribe" | "sunsubscribe" => SHARD_CHANNELS,
        "spublish" => const { &[first(NOT_KEY)] },
        "eval_ro" | "fcall_ro" | "evalsha_ro" => SCRIPT_RO,
        "eval" | "fcall" | "evalsha" => SCRIPT,
        "lmpop" | "zmpop" => POP_COUNTED,
        "del" | "unlink" => DELETE_ALL,
        "xgroup|delconsumer" | "xgroup|destroy" => GROUP_DELETE,
        "xgroup|create" | "xgroup|createconsumer" => GROUP_INSERT,
        "xgroup|setid" => const { &[spec(RW | UPDATE, at(2), ONE)] },
        "xread" => const { &streams_after(1) },
        "xreadgroup" => const { &streams_after(4) },
        "setnx" => const { &[first(OW | INSERT)] },
        "pfcount" => const { &[spec(RW | ACCESS, at(1), ALL)] },
        "pfmerge" => const { &[first(RW | ACCESS | INSERT), spec(RO | ACCESS, at(2), ALL)] },
        "mset" => const { &[spec(OW | UPDATE, at(1), range(-1, 2))] },
        "msetnx" => const { &[spec(OW | INSERT, at(1), range(-1, 2))] },
        "bitfield" => const { &[first(RW | ACCESS | UPDATE | VARIABLE_FLAGS)] },
        "set" => const { &[first(RW | ACCESS | UPDATE | VARIABLE_FLAGS)] },
        "renamenx" => const { &[RENAME[0], spec(OW | INSERT, at(2), ONE)] },
        "rename" => RENAME,
        "copy" => const { &[first(RO | ACCESS), spec(OW | UPDATE, at(2), ONE)] },
        "bitop" => const { &[spec(OW | UPDATE, at(2), ONE), spec(RO | ACCESS, at(3), ALL)] },
        "lcs" => const { &[spec(RO | ACCESS, at(1), range(1, 1))] },
        "sort" => SORT,
        "sort_ro" => SORT_RO,
        "georadius" => const { &georadius(6) },
        "georadiusbymember" => const { &georadius(5) },
        _ => &[],
    }
}

/// The full name whose key specifications describe `args` of `command`: a container's
/// subcommand as `container|subcommand`, any other command by its name.
pub fn full_name(command: &Command, args: &[Vec<u8>]) -> std::borrow::Cow<'static, str> {
    match super::subcommands::named(command.name, args) {
        Some(sub) => format!("{}|{sub}", command.name).into(),
        None => command.name.into(),
    }
}

/// The legacy key positions (first, last, step) that a single specification of keys from
/// an index describes; (0, 0, 0) for any other specifications, whose keys move.
pub fn legacy_positions(specs: &[KeySpec]) -> (i32, i32, i32) {
    match specs {
        [KeySpec {
            begin: BeginSearch::Index(first),
            find: FindKeys::Range { last_key, step, .. },
            ..
        }] => {
            let first = *first as i32;
            let last = if *last_key >= 0 {
                first + last_key
            } else {
                *last_key
            };
            (first, last, *step as i32)
        }
        _ => (0, 0, 0),
    }
}

/// Whether a command (by its full name) can name keys: a specification of a key, not of a
/// channel hashed as one.
pub fn has_keys(name: &str) -> bool {
    of(name).iter().any(|spec| spec.flags & NOT_KEY == 0)
}

/// The keys `args` (the command's name first) name by `name`'s specifications, as Redis's
/// `getKeysFromCommandWithSpecs` finds them: none where the arguments do not fit.
pub fn keys(name: &str, args: &[Vec<u8>]) -> Vec<FoundKey> {
    let specs = of(name);
    let variable = specs.iter().any(|spec| spec.flags & VARIABLE_FLAGS != 0);
    if has_keys(name) && !variable {
        if let Some(found) = by_specs(specs, args) {
            return found;
        }
    }
    by_procedure(name, args)
}

/// The keys by the specifications; `None` if one of them does not fit the arguments or
/// needs a procedure.
fn by_specs(specs: &[KeySpec], args: &[Vec<u8>]) -> Option<Vec<FoundKey>> {
    let mut found = Vec::new();
    for spec in specs.iter().filter(|spec| spec.flags & NOT_KEY == 0) {
        let Some(start) = begin(spec.begin, args)? else {
            continue; // the keyword is absent: this specification names no key
        };
        let (first, last, step) = extent(spec.find, start, args)?;
        if last >= args.len() || last < first || first >= args.len() {
            return None;
        }
        found.extend((first..=last).step_by(step.max(1)).map(|at| FoundKey {
            at,
            flags: spec.flags,
        }));
    }
    Some(found)
}

/// Where a specification's keys begin: `Some(None)` when its keyword is absent, `None` when
/// only a procedure can tell.
fn begin(search: BeginSearch, args: &[Vec<u8>]) -> Option<Option<usize>> {
    match search {
        BeginSearch::Index(index) => Some(Some(index)),
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => {
            let argc = args.len() as i64;
            // Redis's search stops before its far end (the last argument, or the name).
            let positions: Box<dyn Iterator<Item = i64>> = if start_from > 0 {
                Box::new(i64::from(start_from)..argc - 1)
            } else {
                Box::new((1..=argc + i64::from(start_from)).rev())
            };
            let found = positions
                .take_while(|&at| (0..argc).contains(&at))
                .find(|&at| args[at as usize].eq_ignore_ascii_case(keyword.as_bytes()));
            Some(found.map(|at| at as usize + 1))
        }
        BeginSearch::Unknown => None,
    }
}

/// The first and last positions of a specification's keys and the step between them;
/// `None` when the arguments do not say (a count that is not a number).
fn extent(find: FindKeys, start: usize, args: &[Vec<u8>]) -> Option<(usize, usize, usize)> {
    let argc = args.len() as i64;
    let start_at = start as i64;
    let (first, last, step) = match find {
        FindKeys::Range {
            last_key,
            step,
            limit,
        } => {
            let last = match (last_key, limit) {
                (last_key, _) if last_key >= 0 => start_at + i64::from(last_key),
                (last_key, 0 | 1) => argc + i64::from(last_key),
                (last_key, limit) => {
                    start_at + ((argc - start_at) / limit as i64 + i64::from(last_key))
                }
            };
            (start_at, last, step)
        }
        FindKeys::Keynum {
            count_at,
            first,
            step,
        } => {
            let count = args.get(start + count_at)?;
            let count: i64 = std::str::from_utf8(count).ok()?.parse().ok()?;
            if count < 0 {
                return None;
            }
            let first = start_at + first as i64;
            // A count past any argument list is refused below, as Redis refuses it.
            (first, first.checked_add(count - 1)?, step)
        }
        FindKeys::Unknown => return None,
    };
    if first < 0 || last < 0 {
        return None;
    }
    Some((first as usize, last as usize, step))
}

/// The keys of the commands whose specifications cannot say them (SORT's STORE) or their
/// flags (SET's GET, BITFIELD's GETs), read from the arguments as Redis's procedures read
/// them; none for any other command whose specifications did not fit.
fn by_procedure(name: &str, args: &[Vec<u8>]) -> Vec<FoundKey> {
    if args.len() < 2 {
        return Vec::new(); // no key to find (each of them names one first)
    }
    let key = |at: usize, flags: u16| FoundKey { at, flags };
    match name {
        "set" => {
            let get = args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
            let flags = if get {
                RW | ACCESS | UPDATE
            } else {
                OW | UPDATE
            };
            vec![key(1, flags)]
        }
        "bitfield" => {
            let flags = if bitfield_only_reads(args) {
                RO | ACCESS
            } else {
                RW | ACCESS | UPDATE
            };
            vec![key(1, flags)]
        }
        "sort_ro" => vec![key(1, RO | ACCESS)],
        "sort" => {
            let mut keys = vec![key(1, RO | ACCESS)];
            keys.extend(sort_store_at(args).map(|at| key(at, OW | UPDATE)));
            keys
        }
        _ => Vec::new(),
    }
}

/// Whether BITFIELD's subcommands are all GETs (with OVERFLOW between them): a syntax error
/// counts as a write, the safer guess.
fn bitfield_only_reads(args: &[Vec<u8>]) -> bool {
    let mut at = 2;
    while at < args.len() {
        let left = args.len() - at - 1;
        let word = &args[at];
        if word.eq_ignore_ascii_case(b"get") && left >= 2 {
            at += 3;
        } else if word.eq_ignore_ascii_case(b"overflow") && left >= 1 {
            at += 2;
        } else {
            return false;
        }
    }
    true
}

/// The position of the key SORT's last STORE option names, its other options skipped
/// with their arguments.
pub fn sort_store_at(args: &[Vec<u8>]) -> Option<usize> {
    let mut store = None;
    let mut at = 2;
    while at < args.len() {
        let word = &args[at];
        if word.eq_ignore_ascii_case(b"limit") {
            at += 2;
        } else if word.eq_ignore_ascii_case(b"get") || word.eq_ignore_ascii_case(b"by") {
            at += 1;
        } else if word.eq_ignore_ascii_case(b"store") && at + 1 < args.len() {
            store = Some(at + 1);
        }
        at += 1;
    }
    store
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Vec<u8>> {
        line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    fn found(line: &str) -> Vec<(usize, u16)> {
        let args = args(line);
        let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
        keys(&name, &args).iter().map(|k| (k.at, k.flags)).collect()
    }

    #[test]
    fn ranges_counts_and_keywords_find_their_keys() {
        assert_eq!(found("get k"), [(1, RO | ACCESS)]);
        assert_eq!(found("mset a 1 b 2"), [(1, OW | UPDATE), (3, OW | UPDATE)]);
        assert_eq!(
            found("blpop a b 0"),
            [(1, RW | ACCESS | DELETE), (2, RW | ACCESS | DELETE)]
        );
        assert_eq!(
            found("zunionstore d 2 a b weights 1 2"),
            [(1, OW | UPDATE), (3, RO | ACCESS), (4, RO | ACCESS)]
        );
        assert_eq!(
            found("xread count 2 streams a b 0 0"),
            [(4, RO | ACCESS), (5, RO | ACCESS)]
        );
        assert_eq!(
            found("georadius k 0 0 1 km store d"),
            [(1, RO | ACCESS), (7, OW | UPDATE)]
        );
    }

    #[test]
    fn arguments_that_do_not_fit_name_no_key() {
        assert_eq!(found("zunion 3 a b"), []);
        assert_eq!(found("zunion x a b"), []);
        assert_eq!(found("eval script 0"), []);
        assert_eq!(found("xread streams"), []);
        assert_eq!(found("ping"), []);
    }

    #[test]
    fn procedures_read_the_flags_and_keys_specifications_cannot_say() {
        assert_eq!(found("set k v"), [(1, OW | UPDATE)]);
        assert_eq!(found("set k v get"), [(1, RW | ACCESS | UPDATE)]);
        assert_eq!(found("bitfield k get u8 0"), [(1, RO | ACCESS)]);
        assert_eq!(
            found("bitfield k get u8 0 set u8 0 1"),
            [(1, RW | ACCESS | UPDATE)]
        );
        assert_eq!(
            found("sort k limit 0 1 store a store b"),
            [(1, RO | ACCESS), (8, OW | UPDATE)]
        );
        assert_eq!(found("sort k by store"), [(1, RO | ACCESS)]);
    }

    #[test]
    fn shard_channels_are_not_keys() {
        assert!(!has_keys("spublish"));
        assert_eq!(found("spublish ch msg"), []);
        assert!(has_keys("get"));
    }
}
