//! Key specifications (decision 164) compared with a `redis-server` when one is installed:
//! every command's COMMAND INFO, field by field and its specifications among them, the keys and flags COMMAND GETKEYS and
//! GETKEYSANDFLAGS find (and their refusals), in RESP2 and RESP3; and ACL key patterns
//! that allow reading or writing alone, checked by those flags.

mod support;

use redis::Value;
use support::raw_value;
use support::real_redis::{same_replies, Compared};

/// COMMAND INFO's field `at` of command `name`.
fn info_field(con: &mut redis::Connection, name: &str, at: usize) -> Value {
    let Value::Array(mut entries) = raw_value(con, &["COMMAND", "INFO", name]) else {
        panic!("COMMAND INFO {name}: not an array");
    };
    let Some(Value::Array(fields)) = entries.pop() else {
        panic!("COMMAND INFO {name}: no entry");
    };
    fields
        .into_iter()
        .nth(at)
        .unwrap_or_else(|| panic!("COMMAND INFO {name}: no field {at}"))
}

/// COMMAND INFO's key specifications, without the free-text `notes` Redis gives some.
fn key_specs_of(con: &mut redis::Connection, name: &str) -> Value {
    let Value::Array(specs) = info_field(con, name, 8) else {
        panic!("COMMAND INFO {name}: no key specifications");
    };
    let without_notes = |spec: Value| match spec {
        Value::Array(pairs) => Value::Array(
            pairs
                .chunks(2)
                .filter(|pair| pair[0] != Value::BulkString(b"notes".to_vec()))
                .flatten()
                .cloned()
                .collect(),
        ),
        other => other,
    };
    Value::Array(specs.into_iter().map(without_notes).collect())
}

/// A field listing words (flags, ACL categories) in an order of no meaning, sorted.
fn sorted_words(value: Value) -> Value {
    match value {
        Value::Array(mut words) => {
            words.sort_by_key(|word| format!("{word:?}"));
            Value::Array(words)
        }
        other => other,
    }
}

/// COMMAND INFO of every command and subcommand both servers know (`COMMAND INFO
/// object|encoding`), field by field: name, arity, flags, key positions, ACL categories,
/// tips and key specifications (a container's list of subcommands differs: each server has
/// a few the other has not). ZRANK and ZREVRANK take Redis 7.2's WITHSCORE (an arity of
/// -3).
#[test]
fn every_command_is_described_as_redis_describes_it() {
    let Some(Compared {
        mut redis,
        mut tailstore,
        commands: both,
        servers: _servers,
    }) = Compared::start("COMMAND INFO against Redis")
    else {
        return;
    };
    let mut compared = 0;
    for name in &both {
        let fields = [
            "arity",
            "flags",
            "first key",
            "last key",
            "step",
            "categories",
            "tips",
        ];
        for (at, field) in fields.iter().enumerate().map(|(at, field)| (at + 1, field)) {
            if at == 1 && matches!(name.as_str(), "zrank" | "zrevrank") {
                continue;
            }
            assert_eq!(
                sorted_words(info_field(&mut tailstore, name, at)),
                sorted_words(info_field(&mut redis, name, at)),
                "{name}'s {field}"
            );
        }
        assert_eq!(
            key_specs_of(&mut tailstore, name),
            key_specs_of(&mut redis, name),
            "{name}'s key specifications"
        );
        compared += 1;
    }
    assert!(compared > 330, "only {compared} commands compared");
}

/// Command lines whose keys GETKEYS and GETKEYSANDFLAGS are asked for.
const LINES: &[&[&str]] = &[
    &["GET", "k"],
    &["SET", "k", "v"],
    &["SET", "k", "v", "EX", "10", "GET"],
    &["SET", "k", "v", "get"],
    &["MSET", "a", "1", "b", "2"],
    &["MSETNX", "a", "1", "b", "2"],
    &["DEL", "a", "b"],
    &["EXISTS", "a", "b"],
    &["LMOVE", "s", "d", "LEFT", "RIGHT"],
    &["BLPOP", "a", "b", "0"],
    &["BLMPOP", "0", "2", "a", "b", "LEFT"],
    &["LMPOP", "2", "a", "b", "LEFT", "COUNT", "3"],
    &["LMPOP", "5", "a", "LEFT"],
    &["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"],
    &["ZUNION", "2", "a", "b"],
    &["ZUNION", "x", "a", "b"],
    &["ZUNION", "-1", "a", "b"],
    &["ZINTERCARD", "1", "a", "LIMIT", "2"],
    &["EVAL", "return 1", "2", "a", "b", "c"],
    &["EVAL", "return 1", "0"],
    &["EVAL_RO", "return 1", "1", "a"],
    &["FCALL", "f", "1", "a", "b"],
    &["FCALL_RO", "f", "0"],
    &["XREAD", "COUNT", "2", "STREAMS", "s", "t", "0", "0"],
    &["XREAD", "STREAMS", "s", "t", "0"],
    &["XREAD", "COUNT", "2"],
    &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"],
    &["SORT", "s", "BY", "w_*", "STORE", "d"],
    &["SORT", "s", "LIMIT", "0", "1", "STORE", "a", "STORE", "b"],
    &["SORT", "s", "BY", "store"],
    &["SORT_RO", "s", "BY", "w_*"],
    &["BITFIELD", "k", "GET", "u8", "0"],
    &["BITFIELD", "k", "GET", "u8", "0", "SET", "u8", "0", "1"],
    &["BITFIELD", "k", "OVERFLOW", "SAT", "GET", "u8", "0"],
    &["BITFIELD", "k", "INCRBY"],
    &["BITFIELD_RO", "k", "GET", "u8", "0"],
    &["GEORADIUS", "k", "0", "0", "1", "km", "STORE", "d"],
    &[
        "GEORADIUS",
        "k",
        "0",
        "0",
        "1",
        "km",
        "COUNT",
        "1",
        "STOREDIST",
        "d",
    ],
    &["GEORADIUSBYMEMBER", "k", "m", "1", "km", "STORE", "d"],
    &[
        "GEOSEARCHSTORE",
        "d",
        "s",
        "FROMMEMBER",
        "m",
        "BYRADIUS",
        "1",
        "km",
    ],
    &["RENAME", "a", "b"],
    &["RENAMENX", "a", "b"],
    &["COPY", "a", "b"],
    &["BITOP", "AND", "d", "a", "b"],
    &["PFMERGE", "d", "a", "b"],
    &["PFCOUNT", "a", "b"],
    &["LCS", "a", "b"],
    &["SINTERSTORE", "d", "a", "b"],
    &["OBJECT", "ENCODING", "k"],
    &["OBJECT", "HELP"],
    &["OBJECT", "NOSUCH", "k"],
    &["OBJECT", "ENCODING"],
    &["MEMORY", "USAGE", "k"],
    &["XINFO", "STREAM", "s"],
    &["XGROUP", "CREATE", "s", "g", "$"],
    &["XGROUP", "DESTROY", "s", "g"],
    &["WATCH", "a", "b"],
    &["SPUBLISH", "ch", "m"],
    &["SSUBSCRIBE", "ch"],
    &["PUBLISH", "ch", "m"],
    &["PING"],
    &["TIME", "x"],
    &["NOSUCH", "k"],
    &["GET"],
    &["GET", "a", "b"],
];

#[test]
fn getkeys_and_getkeysandflags_find_redis_s_keys() {
    let mut cases: Vec<Vec<&str>> = Vec::new();
    for hello in ["2", "3"] {
        cases.push(vec!["hello", hello]);
        for line in LINES {
            for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
                cases.push(
                    ["COMMAND", sub]
                        .iter()
                        .chain(line.iter())
                        .copied()
                        .collect(),
                );
            }
        }
    }
    cases.push(vec!["COMMAND", "GETKEYSANDFLAGS"]);
    let cases: Vec<&[&str]> = cases.iter().map(Vec::as_slice).collect();
    same_replies("COMMAND GETKEYS against Redis", &cases);
}

#[test]
fn command_info_describes_key_specifications_in_resp3() {
    let cases: &[&[&str]] = &[
        &["hello", "3"],
        // (Commands whose specifications have no notes.)
        &[
            "COMMAND",
            "INFO",
            "get",
            "lmove",
            "zunion",
            "xread",
            "georadius",
            "mset",
            "scan",
        ],
    ];
    same_replies("COMMAND INFO in RESP3 against Redis", cases);
}

#[test]
fn read_and_write_key_patterns_are_checked_as_redis_checks_them() {
    let cases: &[&[&str]] = &[
        &[
            "ACL", "SETUSER", "rita", "on", ">pw", "+@all", "%R~r*", "%W~w*", "~both*",
        ],
        &["ACL", "GETUSER", "rita"],
        &["ACL", "LIST"],
        &["SET", "r1", "v"],
        &["RPUSH", "rlist", "a", "b"],
        &["AUTH", "rita", "pw"],
        &["GET", "r1"],
        &["SET", "r1", "v2"],
        &["SET", "w1", "v"],
        &["SET", "w1", "v", "GET"],
        &["GET", "w1"],
        &["EXISTS", "r1", "w1"],
        &["TYPE", "w1"],
        &["STRLEN", "w1"],
        &["APPEND", "r1", "x"],
        &["COPY", "r1", "w2"],
        &["COPY", "w1", "r2"],
        &["LMOVE", "rlist", "wlist", "LEFT", "LEFT"],
        &["LMOVE", "bothlist", "wlist", "LEFT", "LEFT"],
        &["LRANGE", "rlist", "0", "-1"],
        &["DEL", "w1"],
        &["DEL", "r1"],
        &["INCR", "w3"],
        &["INCR", "both3"],
        &["SORT", "rlist", "ALPHA"],
        &["SORT", "rlist", "ALPHA", "STORE", "w4"],
        &["SORT", "wlist", "ALPHA"],
        &["BITFIELD", "r1", "GET", "u8", "0"],
        &["BITFIELD", "r1", "SET", "u8", "0", "1"],
        &["BITFIELD", "w1", "SET", "u8", "0", "1"],
        &["EVAL", "return 1", "1", "r1"],
        &["EVAL_RO", "return 1", "1", "r1"],
        &["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "w5"],
        &["EVAL", "return redis.call('get', 'w1')", "0"],
        &["EVAL", "return redis.call('set', 'r1', 'x')", "0"],
        &["WATCH", "r1", "w1"],
        &["WATCH", "r1", "elsewhere"],
        &["MULTI"],
        &["GET", "r1"],
        &["GET", "w1"],
        &["EXEC"],
        &["AUTH", "default", "anything"],
        &["ACL", "DRYRUN", "rita", "GET", "r1"],
        &["ACL", "DRYRUN", "rita", "SET", "r1", "v"],
        &["ACL", "DRYRUN", "rita", "SET", "w1", "v", "GET"],
        // Patterns and their access, as Redis reads and lists them.
        &[
            "ACL",
            "SETUSER",
            "rita",
            "resetkeys",
            "%R~k",
            "%W~k",
            "%W~only",
        ],
        &["ACL", "GETUSER", "rita"],
        &["ACL", "SETUSER", "rita", "resetkeys", "%RW~*"],
        &["ACL", "GETUSER", "rita"],
        &["ACL", "SETUSER", "rita", "resetkeys", "%R~*", "~x"],
        &["ACL", "GETUSER", "rita"],
        &["ACL", "SETUSER", "rita", "allkeys", "%R~x"],
        &["ACL", "SETUSER", "rita", "resetkeys", "%W"],
        &["ACL", "SETUSER", "rita", "resetkeys", "%~x"],
        &["ACL", "SETUSER", "rita", "resetkeys", "%RR~x"],
        &["ACL", "SETUSER", "rita", "resetkeys", "%rw~lower"],
        &["ACL", "LIST"],
        &["ACL", "DELUSER", "rita"],
    ];
    same_replies("ACL read and write key patterns against Redis", cases);
}
