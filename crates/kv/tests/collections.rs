//! The collection command families (hashes, lists, sets, sorted sets, streams) driven through the
//! command table against a real engine database in a temporary directory.

mod support;

use std::collections::VecDeque;

use tailstore_kv::command::lookup;
use tailstore_kv::{BlockStep, Keyspace};
use tailstore_resp::Reply;
use tempfile::TempDir;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

struct Kv {
    ks: Keyspace,
    _dir: TempDir,
}

fn kv() -> Kv {
    let (ks, dir) = support::open_keyspace();
    Kv { ks, _dir: dir }
}

impl Kv {
    /// Runs one command (arity checked as the server does) and waits for its commit.
    fn bytes(&self, args: Vec<Vec<u8>>) -> Reply {
        let command = lookup(&args[0])
            .unwrap_or_else(|| panic!("no command {}", String::from_utf8_lossy(&args[0])));
        if !command.arity_ok(args.len()) {
            return Reply::error(format!(
                "ERR wrong number of arguments for '{}' command",
                command.name
            ));
        }
        let executed = self.ks.execute(0, command, &args);
        if let Some(pending) = executed.pending {
            pending.wait().expect("commit");
        }
        executed.reply
    }

    fn run(&self, args: &[&str]) -> Reply {
        self.bytes(args.iter().map(|a| a.as_bytes().to_vec()).collect())
    }

    /// Runs commands as one EXEC block; the array of their replies.
    fn block(&self, commands: &[&[&str]]) -> Vec<Reply> {
        let owned: Vec<Vec<Vec<u8>>> = commands
            .iter()
            .map(|c| c.iter().map(|a| a.as_bytes().to_vec()).collect())
            .collect();
        let mut steps: Vec<BlockStep<'_>> = owned
            .iter()
            .map(|args| BlockStep::Data(0, lookup(&args[0]).expect("command"), args))
            .collect();
        let executed = self.ks.execute_block(&mut steps, &[]);
        if let Some(pending) = executed.pending {
            pending.wait().expect("commit");
        }
        match executed.reply {
            Reply::Array(replies) => replies,
            other => panic!("block answered {other:?}"),
        }
    }

    fn version(&self, key: &str) -> Option<i64> {
        self.ks.watch(0, key.as_bytes()).expect("watch").version
    }

    fn exists(&self, key: &str) -> bool {
        self.run(&["exists", key]) == Reply::Int(1)
    }
}

fn b(text: &str) -> Reply {
    Reply::Bulk(text.as_bytes().to_vec())
}

fn int(n: i64) -> Reply {
    Reply::Int(n)
}

fn err(text: &str) -> Reply {
    Reply::Error(text.to_string())
}

fn arr(items: &[&str]) -> Reply {
    Reply::Array(items.iter().map(|s| b(s)).collect())
}

fn set(items: &[&str]) -> Reply {
    Reply::Set(items.iter().map(|s| b(s)).collect())
}

fn d(value: f64) -> Reply {
    Reply::Double(value)
}

/// Bulk strings of a reply (array or set), in order.
fn strings(reply: &Reply) -> Vec<String> {
    let items = match reply {
        Reply::Array(items) | Reply::Set(items) => items,
        other => panic!("not an array: {other:?}"),
    };
    items
        .iter()
        .map(|item| match item {
            Reply::Bulk(bytes) => String::from_utf8(bytes.clone()).expect("utf-8"),
            other => panic!("not a bulk: {other:?}"),
        })
        .collect()
}

fn big(seed: u8, len: usize) -> String {
    (0..len)
        .map(|i| char::from(b'a' + ((i + seed as usize) % 26) as u8))
        .collect()
}

// ---------------------------------------------------------------------------------------
// hashes

#[test]
fn hash_fields_set_and_read() {
    let kv = kv();
    assert_eq!(kv.run(&["hset", "h", "f1", "v1", "f2", "v2"]), int(2));
    assert_eq!(kv.run(&["hset", "h", "f1", "x", "f3", "y"]), int(1));
    assert_eq!(kv.run(&["hset", "h", "f4", "a", "f4", "b"]), int(1));
    assert_eq!(kv.run(&["hget", "h", "f1"]), b("x"));
    assert_eq!(kv.run(&["hget", "h", "f4"]), b("b"));
    assert_eq!(kv.run(&["hget", "h", "nope"]), Reply::Null);
    assert_eq!(kv.run(&["hget", "missing", "f1"]), Reply::Null);
    assert_eq!(
        kv.run(&["hmget", "h", "f2", "nope", "f3"]),
        Reply::Array(vec![b("v2"), Reply::Null, b("y")])
    );
    assert_eq!(
        kv.run(&["hmget", "missing", "a", "b"]),
        Reply::Array(vec![Reply::Null, Reply::Null])
    );
    assert_eq!(kv.run(&["hlen", "h"]), int(4));
    assert_eq!(kv.run(&["hlen", "missing"]), int(0));
    assert_eq!(kv.run(&["hexists", "h", "f2"]), int(1));
    assert_eq!(kv.run(&["hexists", "h", "zz"]), int(0));
    assert_eq!(kv.run(&["hstrlen", "h", "f2"]), int(2));
    assert_eq!(kv.run(&["hstrlen", "h", "zz"]), int(0));
    assert_eq!(kv.run(&["hkeys", "h"]), arr(&["f1", "f2", "f3", "f4"]));
    assert_eq!(kv.run(&["hvals", "h"]), arr(&["x", "v2", "y", "b"]));
    assert_eq!(kv.run(&["hkeys", "missing"]), arr(&[]));
    assert_eq!(
        kv.run(&["hgetall", "h"]),
        Reply::Map(vec![
            (b("f1"), b("x")),
            (b("f2"), b("v2")),
            (b("f3"), b("y")),
            (b("f4"), b("b")),
        ])
    );
    assert_eq!(kv.run(&["hgetall", "missing"]), Reply::Map(vec![]));
    assert_eq!(kv.run(&["type", "h"]), Reply::Status("hash".into()));

    assert_eq!(kv.run(&["hsetnx", "h", "f1", "new"]), int(0));
    assert_eq!(kv.run(&["hget", "h", "f1"]), b("x"));
    assert_eq!(kv.run(&["hsetnx", "h", "f5", "new"]), int(1));
    assert_eq!(kv.run(&["hsetnx", "fresh", "f", "v"]), int(1));
    assert_eq!(kv.run(&["hlen", "h"]), int(5));
    assert_eq!(kv.run(&["hmset", "h", "f1", "m1", "f9", "m9"]), Reply::ok());
    assert_eq!(kv.run(&["hget", "h", "f1"]), b("m1"));
    assert_eq!(kv.run(&["hlen", "h"]), int(6));
}

#[test]
fn hash_arity_and_field_limits() {
    let kv = kv();
    assert_eq!(
        kv.run(&["hset", "h", "f1", "v1", "f2"]),
        err("ERR wrong number of arguments for 'hset' command")
    );
    assert_eq!(
        kv.run(&["hmset", "h", "f1", "v1", "f2"]),
        err("ERR wrong number of arguments for 'hmset' command")
    );
    let long = "f".repeat(300);
    assert_eq!(
        kv.run(&["hset", "h", "ok", "v", &long, "v"]),
        err("ERR field is longer than tailstore's limit of 256 bytes")
    );
    assert!(!kv.exists("h"), "a refused HSET wrote nothing");
    assert!(matches!(kv.run(&["hget", "h", &long]), Reply::Error(_)));
    let fits = "f".repeat(256);
    assert_eq!(kv.run(&["hset", "h", &fits, "v"]), int(1));
    assert_eq!(kv.run(&["hget", "h", &fits]), b("v"));
}

#[test]
fn hdel_deletes_the_emptied_hash() {
    let kv = kv();
    kv.run(&["hset", "h", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(kv.run(&["hdel", "h", "a", "zz", "a"]), int(1));
    assert_eq!(kv.run(&["hlen", "h"]), int(2));
    assert_eq!(kv.run(&["hdel", "missing", "a"]), int(0));
    assert_eq!(kv.run(&["hdel", "h", "b", "c"]), int(2));
    assert!(!kv.exists("h"));
    assert_eq!(kv.run(&["type", "h"]), Reply::Status("none".into()));
    assert_eq!(kv.run(&["hgetall", "h"]), Reply::Map(vec![]));
    // The key can be reused as another kind.
    assert_eq!(kv.run(&["rpush", "h", "x"]), int(1));
    assert_eq!(kv.run(&["hset", "h", "a", "1"]), err(WRONGTYPE));
}

#[test]
fn hash_counters() {
    let kv = kv();
    assert_eq!(kv.run(&["hincrby", "h", "n", "5"]), int(5));
    assert_eq!(kv.run(&["hincrby", "h", "n", "-7"]), int(-2));
    assert_eq!(kv.run(&["hget", "h", "n"]), b("-2"));
    assert_eq!(
        kv.run(&["hincrby", "h", "n", "x"]),
        err("ERR value is not an integer or out of range")
    );
    kv.run(&[
        "hset",
        "h",
        "s",
        "abc",
        "max",
        "9223372036854775807",
        "f",
        "1.5",
    ]);
    assert_eq!(
        kv.run(&["hincrby", "h", "s", "1"]),
        err("ERR hash value is not an integer")
    );
    assert_eq!(
        kv.run(&["hincrby", "h", "f", "1"]),
        err("ERR hash value is not an integer")
    );
    assert_eq!(
        kv.run(&["hincrby", "h", "max", "1"]),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(kv.run(&["hget", "h", "max"]), b("9223372036854775807"));

    assert_eq!(kv.run(&["hincrbyfloat", "h", "f", "0.25"]), b("1.75"));
    assert_eq!(kv.run(&["hincrbyfloat", "h", "new", "3"]), b("3"));
    assert_eq!(kv.run(&["hincrbyfloat", "h", "n", "2.5"]), b("0.5"));
    assert_eq!(kv.run(&["hget", "h", "f"]), b("1.75"));
    assert_eq!(
        kv.run(&["hincrbyfloat", "h", "s", "1"]),
        err("ERR hash value is not a float")
    );
    assert_eq!(
        kv.run(&["hincrbyfloat", "h", "f", "x"]),
        err("ERR value is not a valid float")
    );
    assert_eq!(
        kv.run(&["hincrbyfloat", "h", "f", "inf"]),
        err("ERR value is NaN or Infinity")
    );
    kv.run(&["hset", "h", "huge", "1.7e308"]);
    assert_eq!(
        kv.run(&["hincrbyfloat", "h", "huge", "1.7e308"]),
        err("ERR increment would produce NaN or Infinity")
    );
    assert_eq!(kv.run(&["hlen", "h"]), int(6));
}

#[test]
fn hash_values_larger_than_a_part() {
    let kv = kv();
    // Two and four part rows (a part holds ~5,300 bytes).
    let large = big(1, 8000);
    let larger = big(2, 20000);
    assert_eq!(kv.run(&["hset", "h", "big", &large, "small", "s"]), int(2));
    assert_eq!(kv.run(&["hget", "h", "big"]), b(&large));
    assert_eq!(kv.run(&["hstrlen", "h", "big"]), int(8000));
    // Shrink to one part, grow past the first size, read back each time.
    kv.run(&["hset", "h", "big", "tiny"]);
    assert_eq!(kv.run(&["hget", "h", "big"]), b("tiny"));
    kv.run(&["hset", "h", "big", &larger]);
    assert_eq!(kv.run(&["hget", "h", "big"]), b(&larger));
    assert_eq!(kv.run(&["hvals", "h"]), arr(&[&larger, "s"]));
    assert_eq!(
        kv.run(&["hgetall", "h"]),
        Reply::Map(vec![(b("big"), b(&larger)), (b("small"), b("s"))])
    );
    assert_eq!(kv.run(&["hdel", "h", "big"]), int(1));
    assert_eq!(
        kv.run(&["hgetall", "h"]),
        Reply::Map(vec![(b("small"), b("s"))])
    );
    assert_eq!(kv.run(&["hdel", "h", "small"]), int(1));
    assert!(!kv.exists("h"));
    // Nothing of the old values is left under the key.
    kv.run(&["hset", "h", "x", "1"]);
    assert_eq!(
        kv.run(&["hgetall", "h"]),
        Reply::Map(vec![(b("x"), b("1"))])
    );
}

#[test]
fn hscan_returns_the_whole_hash() {
    let kv = kv();
    kv.run(&["hset", "h", "apple", "1", "banana", "2", "avocado", "3"]);
    assert_eq!(
        kv.run(&["hscan", "h", "0"]),
        Reply::Array(vec![
            b("0"),
            arr(&["apple", "1", "avocado", "3", "banana", "2"])
        ])
    );
    assert_eq!(
        kv.run(&["hscan", "h", "0", "MATCH", "a*", "COUNT", "1"]),
        Reply::Array(vec![b("0"), arr(&["apple", "1", "avocado", "3"])])
    );
    assert_eq!(
        kv.run(&["hscan", "h", "0", "match", "*an*", "NOVALUES"]),
        Reply::Array(vec![b("0"), arr(&["banana"])])
    );
    assert_eq!(
        kv.run(&["hscan", "missing", "0"]),
        Reply::Array(vec![b("0"), arr(&[])])
    );
    assert_eq!(kv.run(&["hscan", "h", "x"]), err("ERR invalid cursor"));
    assert_eq!(
        kv.run(&["hscan", "h", "0", "COUNT", "0"]),
        err("ERR syntax error")
    );
    assert_eq!(
        kv.run(&["hscan", "h", "0", "BOGUS", "1"]),
        err("ERR syntax error")
    );
    kv.run(&["set", "s", "v"]);
    assert_eq!(kv.run(&["hscan", "s", "0"]), err(WRONGTYPE));
}

// ---------------------------------------------------------------------------------------
// lists

#[test]
fn list_push_and_pop_at_both_ends() {
    let kv = kv();
    assert_eq!(kv.run(&["lpush", "l", "a", "b", "c"]), int(3));
    assert_eq!(kv.run(&["lrange", "l", "0", "-1"]), arr(&["c", "b", "a"]));
    assert_eq!(kv.run(&["rpush", "l", "d", "e"]), int(5));
    assert_eq!(
        kv.run(&["lrange", "l", "0", "-1"]),
        arr(&["c", "b", "a", "d", "e"])
    );
    assert_eq!(kv.run(&["llen", "l"]), int(5));
    assert_eq!(kv.run(&["type", "l"]), Reply::Status("list".into()));
    assert_eq!(kv.run(&["lpop", "l"]), b("c"));
    assert_eq!(kv.run(&["rpop", "l"]), b("e"));
    assert_eq!(kv.run(&["lpop", "l", "2"]), arr(&["b", "a"]));
    assert_eq!(kv.run(&["lpop", "l", "0"]), arr(&[]));
    assert_eq!(kv.run(&["rpop", "l", "10"]), arr(&["d"]));
    assert!(!kv.exists("l"), "a list popped empty is deleted");
    assert_eq!(kv.run(&["lpop", "l"]), Reply::Null);
    assert_eq!(kv.run(&["lpop", "l", "3"]), Reply::NullArray);
    assert_eq!(kv.run(&["rpop", "l", "0"]), Reply::NullArray);
    assert_eq!(kv.run(&["llen", "l"]), int(0));
    assert_eq!(
        kv.run(&["lpop", "l", "-1"]),
        err("ERR value is out of range, must be positive")
    );
    assert_eq!(
        kv.run(&["lpop", "l", "x"]),
        err("ERR value is out of range, must be positive")
    );
    assert_eq!(
        kv.run(&["lpop", "l", "1", "2"]),
        err("ERR wrong number of arguments for 'lpop' command")
    );

    assert_eq!(kv.run(&["lpushx", "l", "a"]), int(0));
    assert_eq!(kv.run(&["rpushx", "l", "a"]), int(0));
    assert!(!kv.exists("l"));
    kv.run(&["rpush", "l", "m"]);
    assert_eq!(kv.run(&["lpushx", "l", "h1", "h2"]), int(3));
    assert_eq!(kv.run(&["rpushx", "l", "t"]), int(4));
    assert_eq!(
        kv.run(&["lrange", "l", "0", "-1"]),
        arr(&["h2", "h1", "m", "t"])
    );
}

#[test]
fn lmove_and_rpoplpush_move_an_element_between_lists() {
    let kv = kv();
    kv.run(&["rpush", "a", "1", "2", "3"]);
    assert_eq!(kv.run(&["lmove", "a", "b", "left", "right"]), b("1"));
    assert_eq!(kv.run(&["lmove", "a", "b", "RIGHT", "LEFT"]), b("3"));
    assert_eq!(kv.run(&["lrange", "a", "0", "-1"]), arr(&["2"]));
    assert_eq!(kv.run(&["lrange", "b", "0", "-1"]), arr(&["3", "1"]));
    assert_eq!(kv.run(&["rpoplpush", "a", "b"]), b("2"));
    assert!(!kv.exists("a"), "a list moved empty is deleted");
    assert_eq!(kv.run(&["lrange", "b", "0", "-1"]), arr(&["2", "3", "1"]));
    // One list: a rotation, which keeps the key (and its deadline) even at one element.
    assert_eq!(kv.run(&["lmove", "b", "b", "right", "left"]), b("1"));
    assert_eq!(kv.run(&["lrange", "b", "0", "-1"]), arr(&["1", "2", "3"]));
    kv.run(&["rpush", "one", "x"]);
    kv.run(&["expire", "one", "100"]);
    assert_eq!(kv.run(&["rpoplpush", "one", "one"]), b("x"));
    assert_eq!(kv.run(&["lrange", "one", "0", "-1"]), arr(&["x"]));
    assert!(matches!(kv.run(&["ttl", "one"]), Reply::Int(t) if t > 0));
    // Redis's order: an absent source is nil whatever the destination holds.
    kv.run(&["set", "s", "v"]);
    assert_eq!(kv.run(&["lmove", "none", "s", "left", "left"]), Reply::Null);
    assert_eq!(kv.run(&["rpoplpush", "none", "b"]), Reply::Null);
    assert_eq!(kv.run(&["lmove", "b", "s", "left", "left"]), err(WRONGTYPE));
    assert_eq!(kv.run(&["rpoplpush", "s", "b"]), err(WRONGTYPE));
    assert_eq!(
        kv.run(&["lrange", "b", "0", "-1"]),
        arr(&["1", "2", "3"]),
        "a refused move changes nothing"
    );
    assert_eq!(
        kv.run(&["lmove", "b", "c", "up", "left"]),
        err("ERR syntax error")
    );
    assert_eq!(
        kv.run(&["lmove", "b", "c", "left"]),
        err("ERR wrong number of arguments for 'lmove' command")
    );
}

#[test]
fn blocking_list_commands_run_once_as_their_non_blocking_forms() {
    // What the server runs, and what MULTI answers: the wait is the server's (tests/blocking.rs).
    let kv = kv();
    kv.run(&["rpush", "b", "1", "2", "3"]);
    assert_eq!(kv.run(&["blpop", "a", "b", "0"]), arr(&["b", "1"]));
    assert_eq!(kv.run(&["brpop", "a", "b", "0.5"]), arr(&["b", "3"]));
    assert_eq!(kv.run(&["blpop", "a", "c", "1"]), Reply::NullArray);
    assert_eq!(kv.run(&["blmove", "b", "d", "left", "RIGHT", "0"]), b("2"));
    assert!(!kv.exists("b"), "a list popped empty is deleted");
    assert_eq!(kv.run(&["brpoplpush", "d", "e", "0"]), b("2"));
    assert_eq!(
        kv.run(&["blmove", "d", "e", "left", "left", "0"]),
        Reply::Null
    );
    assert_eq!(kv.run(&["brpoplpush", "d", "e", "0"]), Reply::Null);
    // Redis's order: keys in turn, WRONGTYPE only if no earlier key had an element.
    kv.run(&["set", "s", "v"]);
    assert_eq!(kv.run(&["blpop", "none", "s", "e", "0"]), err(WRONGTYPE));
    assert_eq!(kv.run(&["blpop", "e", "s", "0"]), arr(&["e", "2"]));
    assert_eq!(
        kv.run(&["blmove", "s", "e", "left", "left", "0"]),
        err(WRONGTYPE)
    );
    // The timeout, read before anything else, as Redis 7.0 reads it.
    let negative = err("ERR timeout is negative");
    let not_float = err("ERR timeout is not a float or out of range");
    for timeout in ["-1", "inf", "-inf", "1e16", "9223372036854776"] {
        assert_eq!(kv.run(&["blpop", "s", timeout]), negative, "{timeout}");
    }
    for timeout in ["x", "nan", "", " 1", "1 "] {
        assert_eq!(kv.run(&["brpop", "s", timeout]), not_float, "{timeout:?}");
    }
    for timeout in ["-0", "-0.0009", "0x10", "1.5e-3", "9223372036854"] {
        assert_eq!(
            kv.run(&["blpop", "nolist", timeout]),
            Reply::NullArray,
            "{timeout}"
        );
    }
    assert_eq!(
        kv.run(&["blmove", "s", "e", "left", "left", "x"]),
        not_float
    );
    assert_eq!(
        kv.run(&["blmove", "s", "e", "up", "left", "x"]),
        err("ERR syntax error"),
        "the ends are read before the timeout"
    );
    assert_eq!(kv.run(&["brpoplpush", "s", "e", "-1"]), negative);
    assert_eq!(
        kv.run(&["blpop", "k"]),
        err("ERR wrong number of arguments for 'blpop' command")
    );
}

#[test]
fn bzpopmin_and_bzpopmax_run_once_as_a_pop_of_one_member() {
    let kv = kv();
    kv.run(&["zadd", "z", "1", "a", "2", "b", "3", "c"]);
    let popped = |key: &str, member: &str, score: f64| {
        Reply::Array(vec![b(key), b(member), Reply::Double(score)])
    };
    assert_eq!(
        kv.run(&["bzpopmin", "none", "z", "0"]),
        popped("z", "a", 1.0)
    );
    assert_eq!(kv.run(&["bzpopmax", "z", "1.5"]), popped("z", "c", 3.0));
    assert_eq!(kv.run(&["bzpopmax", "z", "0"]), popped("z", "b", 2.0));
    assert!(!kv.exists("z"), "a sorted set popped empty is deleted");
    assert_eq!(kv.run(&["bzpopmin", "z", "none", "0"]), Reply::NullArray);
    kv.run(&["rpush", "l", "x"]);
    kv.run(&["zadd", "y", "5", "m"]);
    assert_eq!(kv.run(&["bzpopmin", "l", "y", "0"]), err(WRONGTYPE));
    assert_eq!(kv.run(&["bzpopmin", "y", "l", "0"]), popped("y", "m", 5.0));
    assert_eq!(
        kv.run(&["bzpopmax", "l", "-1"]),
        err("ERR timeout is negative"),
        "the timeout is read first"
    );
}

#[test]
fn list_ranges_and_indexes() {
    let kv = kv();
    kv.run(&["rpush", "l", "a", "b", "c", "d", "e"]);
    assert_eq!(kv.run(&["lrange", "l", "1", "3"]), arr(&["b", "c", "d"]));
    assert_eq!(kv.run(&["lrange", "l", "-2", "-1"]), arr(&["d", "e"]));
    assert_eq!(kv.run(&["lrange", "l", "-100", "1"]), arr(&["a", "b"]));
    assert_eq!(kv.run(&["lrange", "l", "3", "100"]), arr(&["d", "e"]));
    assert_eq!(kv.run(&["lrange", "l", "3", "1"]), arr(&[]));
    assert_eq!(kv.run(&["lrange", "l", "5", "10"]), arr(&[]));
    assert_eq!(kv.run(&["lrange", "l", "-1", "-2"]), arr(&[]));
    assert_eq!(kv.run(&["lrange", "missing", "0", "-1"]), arr(&[]));
    assert_eq!(
        kv.run(&["lrange", "l", "a", "1"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(kv.run(&["lindex", "l", "0"]), b("a"));
    assert_eq!(kv.run(&["lindex", "l", "-1"]), b("e"));
    assert_eq!(kv.run(&["lindex", "l", "-5"]), b("a"));
    assert_eq!(kv.run(&["lindex", "l", "-6"]), Reply::Null);
    assert_eq!(kv.run(&["lindex", "l", "5"]), Reply::Null);
    assert_eq!(kv.run(&["lindex", "missing", "0"]), Reply::Null);

    assert_eq!(kv.run(&["lset", "l", "-2", "D"]), Reply::ok());
    assert_eq!(kv.run(&["lset", "l", "0", "A"]), Reply::ok());
    assert_eq!(
        kv.run(&["lrange", "l", "0", "-1"]),
        arr(&["A", "b", "c", "D", "e"])
    );
    assert_eq!(
        kv.run(&["lset", "l", "5", "x"]),
        err("ERR index out of range")
    );
    assert_eq!(
        kv.run(&["lset", "l", "-6", "x"]),
        err("ERR index out of range")
    );
    assert_eq!(
        kv.run(&["lset", "missing", "0", "x"]),
        err("ERR no such key")
    );
    assert!(!kv.exists("missing"));
}

#[test]
fn long_lists_read_by_scan_and_by_point_reads() {
    let kv = kv();
    let values: Vec<String> = (0..300).map(|i| format!("v{i}")).collect();
    let mut args = vec!["rpush", "l"];
    args.extend(values.iter().map(String::as_str));
    assert_eq!(kv.run(&args), int(300));
    // LPUSH below zero too, so sequence numbers cross the sign boundary.
    assert_eq!(kv.run(&["lpush", "l", "first"]), int(301));
    let mut expected = vec!["first".to_string()];
    expected.extend(values.iter().cloned());
    assert_eq!(strings(&kv.run(&["lrange", "l", "0", "-1"])), expected);
    assert_eq!(
        strings(&kv.run(&["lrange", "l", "100", "102"])),
        expected[100..=102].to_vec()
    );
    assert_eq!(
        strings(&kv.run(&["lrange", "l", "-250", "-60"])),
        expected[51..=241].to_vec()
    );
    assert_eq!(kv.run(&["lindex", "l", "150"]), b(&expected[150]));
}

#[test]
fn ltrim_keeps_a_range() {
    let kv = kv();
    kv.run(&["rpush", "l", "a", "b", "c", "d", "e"]);
    assert_eq!(kv.run(&["ltrim", "l", "1", "-2"]), Reply::ok());
    assert_eq!(kv.run(&["lrange", "l", "0", "-1"]), arr(&["b", "c", "d"]));
    assert_eq!(kv.run(&["ltrim", "l", "-100", "100"]), Reply::ok());
    assert_eq!(kv.run(&["lrange", "l", "0", "-1"]), arr(&["b", "c", "d"]));
    assert_eq!(kv.run(&["ltrim", "l", "2", "2"]), Reply::ok());
    assert_eq!(kv.run(&["lrange", "l", "0", "-1"]), arr(&["d"]));
    // Pushes still work at both ends after a trim.
    kv.run(&["lpush", "l", "x"]);
    kv.run(&["rpush", "l", "y"]);
    assert_eq!(kv.run(&["lrange", "l", "0", "-1"]), arr(&["x", "d", "y"]));
    assert_eq!(kv.run(&["ltrim", "l", "2", "1"]), Reply::ok());
    assert!(!kv.exists("l"), "LTRIM to nothing deletes the list");
    assert_eq!(kv.run(&["ltrim", "missing", "0", "1"]), Reply::ok());
    assert!(!kv.exists("missing"));
    assert_eq!(
        kv.run(&["ltrim", "l", "x", "1"]),
        err("ERR value is not an integer or out of range")
    );
}

#[test]
fn lrem_by_count_direction() {
    let kv = kv();
    let fill = |kv: &Kv| {
        kv.run(&["del", "l"]);
        kv.run(&["rpush", "l", "x", "a", "x", "b", "x", "c", "x"]);
    };
    fill(&kv);
    assert_eq!(kv.run(&["lrem", "l", "2", "x"]), int(2));
    assert_eq!(
        kv.run(&["lrange", "l", "0", "-1"]),
        arr(&["a", "b", "x", "c", "x"])
    );
    fill(&kv);
    assert_eq!(kv.run(&["lrem", "l", "-2", "x"]), int(2));
    assert_eq!(
        kv.run(&["lrange", "l", "0", "-1"]),
        arr(&["x", "a", "x", "b", "c"])
    );
    fill(&kv);
    assert_eq!(kv.run(&["lrem", "l", "0", "x"]), int(4));
    assert_eq!(kv.run(&["lrange", "l", "0", "-1"]), arr(&["a", "b", "c"]));
    assert_eq!(kv.run(&["llen", "l"]), int(3));
    // Indexes stay dense after the removal.
    assert_eq!(kv.run(&["lindex", "l", "1"]), b("b"));
    assert_eq!(kv.run(&["lindex", "l", "-1"]), b("c"));
    assert_eq!(kv.run(&["lrem", "l", "0", "zz"]), int(0));
    assert_eq!(kv.run(&["lrem", "l", "-100", "b"]), int(1));
    assert_eq!(kv.run(&["lrange", "l", "0", "-1"]), arr(&["a", "c"]));
    assert_eq!(kv.run(&["rpush", "l", "d"]), int(3));
    assert_eq!(kv.run(&["lpush", "l", "z"]), int(4));
    assert_eq!(
        kv.run(&["lrange", "l", "0", "-1"]),
        arr(&["z", "a", "c", "d"])
    );
    assert_eq!(kv.run(&["lrem", "missing", "1", "a"]), int(0));
    assert_eq!(
        kv.run(&["lrem", "l", "x", "a"]),
        err("ERR value is not an integer or out of range")
    );
    kv.run(&["del", "l"]);
    kv.run(&["rpush", "l", "q", "q", "q"]);
    assert_eq!(kv.run(&["lrem", "l", "0", "q"]), int(3));
    assert!(!kv.exists("l"), "a list emptied by LREM is deleted");
}

#[test]
fn linsert_before_and_after() {
    let kv = kv();
    kv.run(&["rpush", "l", "a", "b", "c", "d"]);
    assert_eq!(kv.run(&["linsert", "l", "BEFORE", "c", "X"]), int(5));
    assert_eq!(
        kv.run(&["lrange", "l", "0", "-1"]),
        arr(&["a", "b", "X", "c", "d"])
    );
    assert_eq!(kv.run(&["linsert", "l", "after", "a", "Y"]), int(6));
    assert_eq!(
        kv.run(&["lrange", "l", "0", "-1"]),
        arr(&["a", "Y", "b", "X", "c", "d"])
    );
    assert_eq!(kv.run(&["linsert", "l", "before", "a", "H"]), int(7));
    assert_eq!(kv.run(&["linsert", "l", "after", "d", "T"]), int(8));
    assert_eq!(
        kv.run(&["lrange", "l", "0", "-1"]),
        arr(&["H", "a", "Y", "b", "X", "c", "d", "T"])
    );
    assert_eq!(kv.run(&["lindex", "l", "0"]), b("H"));
    assert_eq!(kv.run(&["lindex", "l", "7"]), b("T"));
    assert_eq!(kv.run(&["linsert", "l", "before", "zz", "Q"]), int(-1));
    assert_eq!(kv.run(&["linsert", "missing", "before", "a", "Q"]), int(0));
    assert!(!kv.exists("missing"));
    assert_eq!(
        kv.run(&["linsert", "l", "middle", "a", "Q"]),
        err("ERR syntax error")
    );
    assert_eq!(kv.run(&["llen", "l"]), int(8));
}

#[test]
fn lpos_finds_matches() {
    let kv = kv();
    kv.run(&["rpush", "l", "a", "b", "c", "1", "2", "3", "c", "c"]);
    assert_eq!(kv.run(&["lpos", "l", "c"]), int(2));
    assert_eq!(kv.run(&["lpos", "l", "c", "RANK", "2"]), int(6));
    assert_eq!(kv.run(&["lpos", "l", "c", "RANK", "-1"]), int(7));
    assert_eq!(kv.run(&["lpos", "l", "c", "RANK", "-3"]), int(2));
    assert_eq!(kv.run(&["lpos", "l", "c", "RANK", "4"]), Reply::Null);
    assert_eq!(
        kv.run(&["lpos", "l", "c", "COUNT", "2"]),
        Reply::Array(vec![int(2), int(6)])
    );
    assert_eq!(
        kv.run(&["lpos", "l", "c", "COUNT", "0"]),
        Reply::Array(vec![int(2), int(6), int(7)])
    );
    assert_eq!(
        kv.run(&["lpos", "l", "c", "RANK", "-1", "COUNT", "2"]),
        Reply::Array(vec![int(7), int(6)])
    );
    assert_eq!(kv.run(&["lpos", "l", "c", "MAXLEN", "2"]), Reply::Null);
    assert_eq!(
        kv.run(&["lpos", "l", "c", "COUNT", "0", "MAXLEN", "7"]),
        Reply::Array(vec![int(2), int(6)])
    );
    assert_eq!(
        kv.run(&["lpos", "l", "zz", "COUNT", "0"]),
        Reply::Array(vec![])
    );
    assert_eq!(kv.run(&["lpos", "missing", "a"]), Reply::Null);
    assert_eq!(
        kv.run(&["lpos", "missing", "a", "COUNT", "1"]),
        Reply::Array(vec![])
    );
    assert!(
        matches!(kv.run(&["lpos", "l", "c", "RANK", "0"]), Reply::Error(e) if e.starts_with("ERR RANK can't be zero"))
    );
    assert_eq!(
        kv.run(&["lpos", "l", "c", "COUNT", "-1"]),
        err("ERR COUNT can't be negative")
    );
    assert_eq!(
        kv.run(&["lpos", "l", "c", "MAXLEN", "-1"]),
        err("ERR MAXLEN can't be negative")
    );
    assert_eq!(kv.run(&["lpos", "l", "c", "RANK"]), err("ERR syntax error"));
}

#[test]
fn list_elements_larger_than_a_part() {
    let kv = kv();
    let e: Vec<String> = (0..6)
        .map(|i| big(i, 6000 + usize::from(i) * 1000))
        .collect();
    kv.run(&["rpush", "l", &e[0], &e[1], &e[2], &e[3]]);
    kv.run(&["lpush", "l", &e[4]]);
    assert_eq!(
        strings(&kv.run(&["lrange", "l", "0", "-1"])),
        vec![
            e[4].clone(),
            e[0].clone(),
            e[1].clone(),
            e[2].clone(),
            e[3].clone()
        ]
    );
    assert_eq!(kv.run(&["lindex", "l", "2"]), b(&e[1]));
    // LREM and LINSERT in the middle move large elements between sequence numbers.
    assert_eq!(kv.run(&["lrem", "l", "1", &e[1]]), int(1));
    assert_eq!(kv.run(&["linsert", "l", "after", &e[0], "small"]), int(5));
    assert_eq!(kv.run(&["linsert", "l", "before", &e[3], &e[5]]), int(6));
    let expected = vec![
        e[4].clone(),
        e[0].clone(),
        "small".to_string(),
        e[2].clone(),
        e[5].clone(),
        e[3].clone(),
    ];
    assert_eq!(strings(&kv.run(&["lrange", "l", "0", "-1"])), expected);
    for (i, value) in expected.iter().enumerate() {
        assert_eq!(kv.run(&["lindex", "l", &i.to_string()]), b(value));
    }
    assert_eq!(kv.run(&["lset", "l", "2", &e[1]]), Reply::ok());
    assert_eq!(kv.run(&["lindex", "l", "2"]), b(&e[1]));
    assert_eq!(kv.run(&["lset", "l", "2", "tiny"]), Reply::ok());
    assert_eq!(kv.run(&["lindex", "l", "2"]), b("tiny"));
    assert_eq!(kv.run(&["rpop", "l"]), b(&e[3]));
    assert_eq!(
        kv.run(&["lpop", "l", "10"]),
        Reply::Array(vec![b(&e[4]), b(&e[0]), b("tiny"), b(&e[2]), b(&e[5])])
    );
    assert!(!kv.exists("l"));
}

/// A small deterministic generator for the model test.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Random list operations checked against a `VecDeque` after each one.
#[test]
fn list_operations_match_a_model() {
    let kv = kv();
    let mut model: VecDeque<String> = VecDeque::new();
    let mut rng = Lcg(42);
    for step in 0..400 {
        let value = format!("v{}", rng.below(6));
        let len = model.len() as i64;
        match rng.below(9) {
            0 => {
                kv.run(&["lpush", "l", &value]);
                model.push_front(value);
            }
            1 | 2 => {
                kv.run(&["rpush", "l", &value]);
                model.push_back(value);
            }
            3 => {
                let reply = kv.run(&["lpop", "l"]);
                assert_eq!(reply, model.pop_front().map_or(Reply::Null, |v| b(&v)));
            }
            4 => {
                let reply = kv.run(&["rpop", "l"]);
                assert_eq!(reply, model.pop_back().map_or(Reply::Null, |v| b(&v)));
            }
            5 => {
                let count = rng.below(5) as i64 - 2;
                let reply = kv.run(&["lrem", "l", &count.to_string(), &value]);
                let positions: Vec<usize> =
                    (0..model.len()).filter(|&i| model[i] == value).collect();
                let limit = if count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let mut doomed: Vec<usize> = if count < 0 {
                    positions.iter().rev().take(limit).copied().collect()
                } else {
                    positions.iter().take(limit).copied().collect()
                };
                doomed.sort_unstable();
                for &i in doomed.iter().rev() {
                    model.remove(i);
                }
                assert_eq!(reply, int(doomed.len() as i64), "step {step}");
            }
            6 => {
                let pivot = format!("v{}", rng.below(6));
                let after = rng.below(2) == 1;
                let reply = kv.run(&[
                    "linsert",
                    "l",
                    if after { "after" } else { "before" },
                    &pivot,
                    &value,
                ]);
                let expected = if model.is_empty() {
                    0
                } else if let Some(at) = model.iter().position(|v| *v == pivot) {
                    model.insert(at + usize::from(after), value);
                    model.len() as i64
                } else {
                    -1
                };
                assert_eq!(reply, int(expected), "step {step}");
            }
            7 if len > 0 => {
                let index = rng.below(2 * len as u64) as i64 - len;
                assert_eq!(
                    kv.run(&["lset", "l", &index.to_string(), &value]),
                    Reply::ok()
                );
                let at = if index < 0 { len + index } else { index } as usize;
                model[at] = value;
            }
            8 if len > 4 && rng.below(4) == 0 => {
                kv.run(&["ltrim", "l", "1", "-2"]);
                model.pop_front();
                model.pop_back();
            }
            _ => {}
        }
        let expected: Vec<String> = model.iter().cloned().collect();
        assert_eq!(
            strings(&kv.run(&["lrange", "l", "0", "-1"])),
            expected,
            "step {step}"
        );
        assert_eq!(kv.run(&["llen", "l"]), int(model.len() as i64));
        assert_eq!(kv.exists("l"), !model.is_empty());
        if let Some(last) = model.back() {
            assert_eq!(kv.run(&["lindex", "l", "-1"]), b(last));
        }
    }
}

// ---------------------------------------------------------------------------------------
// sets

#[test]
fn set_members() {
    let kv = kv();
    assert_eq!(kv.run(&["sadd", "s", "b", "a", "c", "a"]), int(3));
    assert_eq!(kv.run(&["sadd", "s", "a", "d"]), int(1));
    assert_eq!(kv.run(&["scard", "s"]), int(4));
    assert_eq!(kv.run(&["scard", "missing"]), int(0));
    assert_eq!(kv.run(&["type", "s"]), Reply::Status("set".into()));
    assert_eq!(kv.run(&["smembers", "s"]), set(&["a", "b", "c", "d"]));
    assert_eq!(kv.run(&["smembers", "missing"]), set(&[]));
    assert_eq!(kv.run(&["sismember", "s", "a"]), int(1));
    assert_eq!(kv.run(&["sismember", "s", "z"]), int(0));
    assert_eq!(kv.run(&["sismember", "missing", "a"]), int(0));
    assert_eq!(
        kv.run(&["smismember", "s", "a", "z", "d"]),
        Reply::Array(vec![int(1), int(0), int(1)])
    );
    assert_eq!(
        kv.run(&["smismember", "missing", "a"]),
        Reply::Array(vec![int(0)])
    );
    assert_eq!(kv.run(&["srem", "s", "a", "z", "a"]), int(1));
    assert_eq!(kv.run(&["srem", "missing", "a"]), int(0));
    assert_eq!(kv.run(&["srem", "s", "b", "c", "d"]), int(3));
    assert!(!kv.exists("s"), "a set emptied by SREM is deleted");
    assert_eq!(kv.run(&["sadd", "s", ""]), int(1));
    assert_eq!(kv.run(&["sismember", "s", ""]), int(1));
    let long = "m".repeat(257);
    assert_eq!(
        kv.run(&["sadd", "t", "ok", &long]),
        err("ERR member is longer than tailstore's limit of 256 bytes")
    );
    assert!(!kv.exists("t"));
}

#[test]
fn spop_and_srandmember() {
    let kv = kv();
    let all = ["a", "b", "c", "d", "e"];
    let mut args = vec!["sadd", "s"];
    args.extend(all);
    kv.run(&args);

    let one = strings(&Reply::Array(vec![kv.run(&["srandmember", "s"])]));
    assert!(all.contains(&one[0].as_str()));
    let three = strings(&kv.run(&["srandmember", "s", "3"]));
    assert_eq!(three.len(), 3);
    let mut distinct = three.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "a positive count gives distinct members");
    // The whole set, as an array (Redis 7.0.15; 7.2 answers a RESP3 set).
    let whole = kv.run(&["srandmember", "s", "10"]);
    assert!(matches!(whole, Reply::Array(_)), "{whole:?}");
    let mut whole = strings(&whole);
    whole.sort();
    assert_eq!(whole, all);
    let repeats = strings(&kv.run(&["srandmember", "s", "-20"]));
    assert_eq!(
        repeats.len(),
        20,
        "a negative count gives exactly that many"
    );
    assert!(repeats.iter().all(|m| all.contains(&m.as_str())));
    let mut seen = repeats.clone();
    seen.sort();
    seen.dedup();
    assert!(seen.len() < 20, "with 5 members, 20 picks repeat");
    assert_eq!(kv.run(&["srandmember", "s", "0"]), arr(&[]));
    assert_eq!(kv.run(&["srandmember", "missing"]), Reply::Null);
    assert_eq!(kv.run(&["srandmember", "missing", "3"]), arr(&[]));
    assert_eq!(
        kv.run(&["srandmember", "s", "x"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        kv.run(&["scard", "s"]),
        int(5),
        "SRANDMEMBER removes nothing"
    );

    let popped = kv.run(&["spop", "s"]);
    let popped = strings(&Reply::Array(vec![popped]))[0].clone();
    assert_eq!(kv.run(&["sismember", "s", &popped]), int(0));
    assert_eq!(kv.run(&["scard", "s"]), int(4));
    let two = strings(&kv.run(&["spop", "s", "2"]));
    assert_eq!(two.len(), 2);
    assert_ne!(two[0], two[1]);
    for member in &two {
        assert_eq!(kv.run(&["sismember", "s", member]), int(0));
    }
    assert_eq!(kv.run(&["scard", "s"]), int(2));
    assert_eq!(kv.run(&["spop", "s", "0"]), set(&[]));
    assert_eq!(
        kv.run(&["spop", "s", "-1"]),
        err("ERR value is out of range, must be positive")
    );
    let rest = strings(&kv.run(&["spop", "s", "10"]));
    assert_eq!(rest.len(), 2);
    let mut everything: Vec<String> = rest.into_iter().chain(two).chain([popped]).collect();
    everything.sort();
    assert_eq!(everything, all.map(String::from).to_vec());
    assert!(!kv.exists("s"), "a set popped empty is deleted");
    assert_eq!(kv.run(&["spop", "s"]), Reply::Null);
    assert_eq!(kv.run(&["spop", "s", "2"]), set(&[]));
}

#[test]
fn set_algebra_and_smove() {
    let kv = kv();
    kv.run(&["sadd", "x", "a", "b", "c", "d"]);
    kv.run(&["sadd", "y", "c", "d", "e"]);
    kv.run(&["sadd", "z", "d", "f"]);
    assert_eq!(kv.run(&["sinter", "x", "y"]), set(&["c", "d"]));
    assert_eq!(kv.run(&["sinter", "x", "y", "z"]), set(&["d"]));
    assert_eq!(kv.run(&["sinter", "x", "missing"]), set(&[]));
    assert_eq!(
        kv.run(&["sunion", "x", "y", "missing"]),
        set(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(kv.run(&["sdiff", "x", "y"]), set(&["a", "b"]));
    assert_eq!(
        kv.run(&["sdiff", "x", "missing", "z"]),
        set(&["a", "b", "c"])
    );
    assert_eq!(kv.run(&["sdiff", "missing", "x"]), set(&[]));
    kv.run(&["set", "str", "v"]);
    assert_eq!(kv.run(&["sinter", "missing", "str"]), err(WRONGTYPE));
    assert_eq!(kv.run(&["sunion", "x", "str"]), err(WRONGTYPE));

    assert_eq!(kv.run(&["sinterstore", "dst", "x", "y"]), int(2));
    assert_eq!(kv.run(&["smembers", "dst"]), set(&["c", "d"]));
    assert_eq!(
        kv.run(&["sunionstore", "str", "y", "z"]),
        int(4),
        "the destination's kind does not matter"
    );
    assert_eq!(kv.run(&["smembers", "str"]), set(&["c", "d", "e", "f"]));
    assert_eq!(kv.run(&["sdiffstore", "x", "x", "y"]), int(2));
    assert_eq!(kv.run(&["smembers", "x"]), set(&["a", "b"]));
    assert_eq!(kv.run(&["sinterstore", "dst", "x", "z"]), int(0));
    assert!(!kv.exists("dst"), "an empty result deletes the destination");

    assert_eq!(kv.run(&["smove", "x", "y", "a"]), int(1));
    assert_eq!(kv.run(&["smembers", "x"]), set(&["b"]));
    assert_eq!(kv.run(&["smembers", "y"]), set(&["a", "c", "d", "e"]));
    assert_eq!(kv.run(&["smove", "x", "y", "zz"]), int(0));
    assert_eq!(kv.run(&["smove", "missing", "y", "a"]), int(0));
    assert_eq!(kv.run(&["smove", "y", "y", "a"]), int(1));
    kv.run(&["set", "plain", "v"]);
    assert_eq!(kv.run(&["smove", "x", "plain", "b"]), err(WRONGTYPE));
    assert_eq!(kv.run(&["smove", "x", "new", "b"]), int(1));
    assert!(
        !kv.exists("x"),
        "SMOVE of the last member deletes the source"
    );
    assert_eq!(kv.run(&["smembers", "new"]), set(&["b"]));
    assert_eq!(
        kv.run(&["sscan", "y", "0", "MATCH", "[ac]"]),
        Reply::Array(vec![b("0"), arr(&["a", "c"])])
    );
}

// ---------------------------------------------------------------------------------------
// sorted sets

#[test]
fn zadd_and_scores() {
    let kv = kv();
    assert_eq!(
        kv.run(&["zadd", "z", "1", "a", "2", "b", "-1.5", "c"]),
        int(3)
    );
    assert_eq!(kv.run(&["zadd", "z", "5", "a", "3", "d"]), int(1));
    assert_eq!(kv.run(&["zcard", "z"]), int(4));
    assert_eq!(kv.run(&["zcard", "missing"]), int(0));
    assert_eq!(kv.run(&["type", "z"]), Reply::Status("zset".into()));
    assert_eq!(kv.run(&["zscore", "z", "a"]), d(5.0));
    assert_eq!(kv.run(&["zscore", "z", "c"]), d(-1.5));
    assert_eq!(kv.run(&["zscore", "z", "zz"]), Reply::Null);
    assert_eq!(kv.run(&["zscore", "missing", "a"]), Reply::Null);
    assert_eq!(
        kv.run(&["zmscore", "z", "a", "zz", "d"]),
        Reply::Array(vec![d(5.0), Reply::Null, d(3.0)])
    );
    assert_eq!(
        kv.run(&["zmscore", "missing", "a"]),
        Reply::Array(vec![Reply::Null])
    );
    assert_eq!(kv.run(&["zincrby", "z", "2.5", "a"]), d(7.5));
    assert_eq!(kv.run(&["zincrby", "z", "1", "new"]), d(1.0));
    assert_eq!(kv.run(&["zcard", "z"]), int(5));
    assert_eq!(
        kv.run(&["zincrby", "z", "x", "a"]),
        err("ERR value is not a valid float")
    );
    assert_eq!(
        kv.run(&["zadd", "z", "x", "a"]),
        err("ERR value is not a valid float")
    );
    assert_eq!(
        kv.run(&["zadd", "z", "nan", "a"]),
        err("ERR value is not a valid float")
    );
    assert_eq!(
        kv.run(&["zadd", "z", "1", "a", "2"]),
        err("ERR syntax error")
    );
    assert_eq!(
        kv.run(&["zadd", "z", "inf", "top", "-inf", "bottom"]),
        int(2)
    );
    assert_eq!(kv.run(&["zscore", "z", "top"]), d(f64::INFINITY));
    assert_eq!(
        kv.run(&["zincrby", "z", "-inf", "top"]),
        err("ERR resulting score is not a number (NaN)")
    );
    assert_eq!(kv.run(&["zscore", "z", "top"]), d(f64::INFINITY));

    assert_eq!(kv.run(&["zrem", "z", "a", "zz", "top", "bottom"]), int(3));
    assert_eq!(kv.run(&["zrem", "missing", "a"]), int(0));
    assert_eq!(kv.run(&["zcard", "z"]), int(4));
    assert_eq!(kv.run(&["zrem", "z", "b", "c", "d", "new"]), int(4));
    assert!(!kv.exists("z"), "a sorted set emptied by ZREM is deleted");
}

#[test]
fn zadd_flags() {
    let kv = kv();
    kv.run(&["zadd", "z", "10", "a", "20", "b"]);
    assert_eq!(kv.run(&["zadd", "z", "NX", "1", "a", "30", "c"]), int(1));
    assert_eq!(kv.run(&["zscore", "z", "a"]), d(10.0));
    assert_eq!(kv.run(&["zadd", "z", "XX", "11", "a", "40", "d"]), int(0));
    assert_eq!(kv.run(&["zscore", "z", "a"]), d(11.0));
    assert_eq!(kv.run(&["zscore", "z", "d"]), Reply::Null);
    assert_eq!(
        kv.run(&["zadd", "z", "XX", "CH", "12", "a", "20", "b"]),
        int(1)
    );
    assert_eq!(kv.run(&["zadd", "z", "CH", "13", "a", "50", "e"]), int(2));
    assert_eq!(
        kv.run(&["zadd", "z", "GT", "CH", "5", "a", "25", "b"]),
        int(1)
    );
    assert_eq!(kv.run(&["zscore", "z", "a"]), d(13.0));
    assert_eq!(kv.run(&["zscore", "z", "b"]), d(25.0));
    assert_eq!(
        kv.run(&["zadd", "z", "LT", "CH", "5", "a", "35", "b"]),
        int(1)
    );
    assert_eq!(kv.run(&["zscore", "z", "a"]), d(5.0));
    assert_eq!(kv.run(&["zscore", "z", "b"]), d(25.0));
    assert_eq!(
        kv.run(&["zadd", "z", "GT", "1", "newgt"]),
        int(1),
        "GT still adds new members"
    );
    assert_eq!(kv.run(&["zadd", "z", "XX", "GT", "100", "a"]), int(0));
    assert_eq!(kv.run(&["zscore", "z", "a"]), d(100.0));

    assert_eq!(kv.run(&["zadd", "z", "INCR", "2", "a"]), d(102.0));
    assert_eq!(kv.run(&["zadd", "z", "INCR", "2", "fresh"]), d(2.0));
    assert_eq!(kv.run(&["zadd", "z", "NX", "INCR", "2", "a"]), Reply::Null);
    assert_eq!(
        kv.run(&["zadd", "z", "XX", "INCR", "2", "nobody"]),
        Reply::Null
    );
    assert_eq!(kv.run(&["zscore", "z", "nobody"]), Reply::Null);
    assert_eq!(kv.run(&["zadd", "z", "GT", "INCR", "-1", "a"]), Reply::Null);
    assert_eq!(kv.run(&["zadd", "z", "LT", "INCR", "-1", "a"]), d(101.0));
    assert_eq!(kv.run(&["zadd", "z", "INCR", "0", "a"]), d(101.0));

    assert_eq!(
        kv.run(&["zadd", "z", "NX", "XX", "1", "a"]),
        err("ERR XX and NX options at the same time are not compatible")
    );
    for flags in [["NX", "GT"], ["NX", "LT"], ["GT", "LT"]] {
        assert_eq!(
            kv.run(&["zadd", "z", flags[0], flags[1], "1", "a"]),
            err("ERR GT, LT, and/or NX options at the same time are not compatible")
        );
    }
    assert_eq!(
        kv.run(&["zadd", "z", "INCR", "1", "a", "2", "b"]),
        err("ERR INCR option supports a single increment-element pair")
    );
    assert_eq!(
        kv.run(&["zadd", "z", "CH"]),
        err("ERR wrong number of arguments for 'zadd' command")
    );
    assert_eq!(kv.run(&["zadd", "z", "CH", "NX"]), err("ERR syntax error"));
    assert_eq!(
        kv.run(&["zadd", "z", "BOGUS", "1", "a"]),
        err("ERR syntax error")
    );

    assert_eq!(kv.run(&["zadd", "nokey", "XX", "1", "a"]), int(0));
    assert_eq!(
        kv.run(&["zadd", "nokey", "XX", "INCR", "1", "a"]),
        Reply::Null
    );
    assert!(!kv.exists("nokey"), "XX never creates the key");
    kv.run(&["zadd", "inf", "inf", "m"]);
    assert_eq!(
        kv.run(&["zadd", "inf", "INCR", "-inf", "m"]),
        err("ERR resulting score is not a number (NaN)")
    );
    assert_eq!(kv.run(&["zscore", "inf", "m"]), d(f64::INFINITY));
}

#[test]
fn zrange_by_rank_score_and_lex() {
    let kv = kv();
    kv.run(&[
        "zadd", "z", "1", "a", "2", "b", "2", "bb", "3", "c", "-5", "neg", "10", "top",
    ]);
    assert_eq!(
        kv.run(&["zrange", "z", "0", "-1"]),
        arr(&["neg", "a", "b", "bb", "c", "top"])
    );
    assert_eq!(kv.run(&["zrange", "z", "1", "2"]), arr(&["a", "b"]));
    assert_eq!(kv.run(&["zrange", "z", "-2", "-1"]), arr(&["c", "top"]));
    assert_eq!(kv.run(&["zrange", "z", "4", "100"]), arr(&["c", "top"]));
    assert_eq!(kv.run(&["zrange", "z", "3", "1"]), arr(&[]));
    assert_eq!(
        kv.run(&["zrange", "z", "0", "1", "REV"]),
        arr(&["top", "c"])
    );
    assert_eq!(
        kv.run(&["zrevrange", "z", "0", "2"]),
        arr(&["top", "c", "bb"])
    );
    assert_eq!(
        kv.run(&["zrange", "z", "0", "1", "WITHSCORES"]),
        Reply::Pairs(vec![(b("neg"), d(-5.0)), (b("a"), d(1.0))])
    );
    assert_eq!(
        kv.run(&["zrevrange", "z", "0", "0", "withscores"]),
        Reply::Pairs(vec![(b("top"), d(10.0))])
    );
    assert_eq!(kv.run(&["zrange", "missing", "0", "-1"]), arr(&[]));
    assert_eq!(
        kv.run(&["zrange", "z", "a", "1"]),
        err("ERR value is not an integer or out of range")
    );

    // Scores: inclusive, exclusive, infinite.
    assert_eq!(
        kv.run(&["zrange", "z", "1", "3", "BYSCORE"]),
        arr(&["a", "b", "bb", "c"])
    );
    assert_eq!(
        kv.run(&["zrange", "z", "(1", "(3", "BYSCORE"]),
        arr(&["b", "bb"])
    );
    assert_eq!(
        kv.run(&["zrangebyscore", "z", "(2", "+inf"]),
        arr(&["c", "top"])
    );
    assert_eq!(kv.run(&["zrangebyscore", "z", "-inf", "(1"]), arr(&["neg"]));
    assert_eq!(kv.run(&["zrangebyscore", "z", "(2", "2"]), arr(&[]));
    assert_eq!(kv.run(&["zrangebyscore", "z", "2", "2"]), arr(&["b", "bb"]));
    assert_eq!(kv.run(&["zrangebyscore", "z", "5", "1"]), arr(&[]));
    assert_eq!(
        kv.run(&[
            "zrangebyscore",
            "z",
            "-inf",
            "+inf",
            "WITHSCORES",
            "LIMIT",
            "1",
            "2"
        ]),
        Reply::Pairs(vec![(b("a"), d(1.0)), (b("b"), d(2.0))])
    );
    assert_eq!(
        kv.run(&["zrangebyscore", "z", "-inf", "+inf", "LIMIT", "4", "-1"]),
        arr(&["c", "top"])
    );
    assert_eq!(
        kv.run(&["zrangebyscore", "z", "-inf", "+inf", "LIMIT", "-1", "2"]),
        arr(&[])
    );
    assert_eq!(
        kv.run(&["zrangebyscore", "z", "-inf", "+inf", "LIMIT", "0", "0"]),
        arr(&[])
    );
    assert_eq!(
        kv.run(&["zrevrangebyscore", "z", "+inf", "(2"]),
        arr(&["top", "c"])
    );
    assert_eq!(
        kv.run(&["zrevrangebyscore", "z", "2", "-inf", "LIMIT", "1", "5"]),
        arr(&["b", "a", "neg"])
    );
    assert_eq!(
        kv.run(&["zrange", "z", "(10", "2", "BYSCORE", "REV"]),
        arr(&["c", "bb", "b"])
    );
    assert_eq!(
        kv.run(&["zrange", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2"]),
        arr(&["c", "bb"])
    );
    assert_eq!(
        kv.run(&["zrangebyscore", "z", "x", "1"]),
        err("ERR min or max is not a float")
    );
    assert_eq!(
        kv.run(&["zrangebyscore", "z", "(x", "1"]),
        err("ERR min or max is not a float")
    );
    // Bounds are read by strtod, as Redis reads them: "(" (nothing to convert) is an
    // exclusive 0, not an error.
    assert_eq!(kv.run(&["zrangebyscore", "z", "(", "1"]), arr(&["a"]));
    assert_eq!(
        kv.run(&["zrange", "z", "0", "-1", "LIMIT", "0", "1"]),
        err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
        )
    );
    assert_eq!(
        kv.run(&["zrange", "z", "0", "-1", "BYSCORE", "BYSCORE"]),
        err("ERR syntax error")
    );
    assert_eq!(
        kv.run(&["zrange", "z", "0", "-1", "REV", "REV"]),
        err("ERR syntax error")
    );
    assert_eq!(
        kv.run(&["zrevrange", "z", "0", "-1", "REV"]),
        err("ERR syntax error")
    );
    assert_eq!(
        kv.run(&["zrangebyscore", "z", "0", "1", "BYSCORE"]),
        err("ERR syntax error")
    );
    assert_eq!(
        kv.run(&["zrangebyscore", "z", "0", "1", "LIMIT", "0"]),
        err("ERR syntax error")
    );
    assert_eq!(kv.run(&["zcount", "z", "(1", "3"]), int(3));
    assert_eq!(kv.run(&["zcount", "z", "-inf", "+inf"]), int(6));
    assert_eq!(kv.run(&["zcount", "missing", "-inf", "+inf"]), int(0));
    assert_eq!(
        kv.run(&["zcount", "z", "a", "1"]),
        err("ERR min or max is not a float")
    );

    // Lex ranges (every score equal).
    kv.run(&[
        "zadd", "lex", "0", "alpha", "0", "bravo", "0", "charlie", "0", "delta",
    ]);
    assert_eq!(
        kv.run(&["zrangebylex", "lex", "[bravo", "[charlie"]),
        arr(&["bravo", "charlie"])
    );
    assert_eq!(
        kv.run(&["zrange", "lex", "(bravo", "+", "BYLEX"]),
        arr(&["charlie", "delta"])
    );
    assert_eq!(
        kv.run(&["zrange", "lex", "+", "-", "BYLEX", "REV", "LIMIT", "0", "2"]),
        arr(&["delta", "charlie"])
    );
    assert_eq!(
        kv.run(&["zrevrangebylex", "lex", "(charlie", "-"]),
        arr(&["bravo", "alpha"])
    );
    assert_eq!(kv.run(&["zrangebylex", "lex", "+", "-"]), arr(&[]));
    assert_eq!(kv.run(&["zrangebylex", "lex", "(b", "(b"]), arr(&[]));
    assert_eq!(kv.run(&["zlexcount", "lex", "[b", "(d"]), int(2));
    assert_eq!(
        kv.run(&["zrangebylex", "lex", "b", "c"]),
        err("ERR min or max not valid string range item")
    );
    assert_eq!(
        kv.run(&["zrange", "lex", "-", "+", "BYLEX", "WITHSCORES"]),
        err("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    );
}

#[test]
fn zrank_pops_and_range_removal() {
    let kv = kv();
    kv.run(&["zadd", "z", "1", "a", "2", "b", "2", "c", "3", "d"]);
    assert_eq!(kv.run(&["zrank", "z", "a"]), int(0));
    assert_eq!(kv.run(&["zrank", "z", "c"]), int(2));
    assert_eq!(kv.run(&["zrevrank", "z", "c"]), int(1));
    assert_eq!(kv.run(&["zrevrank", "z", "d"]), int(0));
    assert_eq!(kv.run(&["zrank", "z", "zz"]), Reply::Null);
    assert_eq!(kv.run(&["zrank", "missing", "a"]), Reply::Null);
    assert_eq!(
        kv.run(&["zrank", "z", "b", "WITHSCORE"]),
        Reply::Array(vec![int(1), d(2.0)])
    );
    assert_eq!(kv.run(&["zrank", "z", "zz", "WITHSCORE"]), Reply::NullArray);
    assert_eq!(
        kv.run(&["zrank", "z", "b", "BOGUS"]),
        err("ERR syntax error")
    );

    assert_eq!(
        kv.run(&["zpopmin", "z"]),
        Reply::Array(vec![b("a"), d(1.0)])
    );
    assert_eq!(
        kv.run(&["zpopmax", "z", "2"]),
        Reply::Pairs(vec![(b("d"), d(3.0)), (b("c"), d(2.0))])
    );
    assert_eq!(kv.run(&["zpopmin", "z", "0"]), arr(&[]));
    assert_eq!(
        kv.run(&["zpopmin", "z", "-1"]),
        err("ERR value is out of range, must be positive")
    );
    assert_eq!(
        kv.run(&["zpopmin", "z", "10"]),
        Reply::Pairs(vec![(b("b"), d(2.0))])
    );
    assert!(!kv.exists("z"), "a sorted set popped empty is deleted");
    assert_eq!(kv.run(&["zpopmin", "z"]), arr(&[]));
    assert_eq!(kv.run(&["zpopmax", "z", "3"]), arr(&[]));

    kv.run(&[
        "zadd", "r", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
    ]);
    assert_eq!(kv.run(&["zremrangebyrank", "r", "-2", "-1"]), int(2));
    assert_eq!(kv.run(&["zrange", "r", "0", "-1"]), arr(&["a", "b", "c"]));
    assert_eq!(kv.run(&["zremrangebyscore", "r", "(1", "2"]), int(1));
    assert_eq!(kv.run(&["zrange", "r", "0", "-1"]), arr(&["a", "c"]));
    assert_eq!(kv.run(&["zremrangebylex", "r", "-", "[a"]), int(1));
    assert_eq!(kv.run(&["zremrangebyscore", "r", "-inf", "+inf"]), int(1));
    assert!(!kv.exists("r"));
    assert_eq!(kv.run(&["zremrangebyrank", "r", "0", "-1"]), int(0));
}

#[test]
fn zscan_and_score_formats() {
    let kv = kv();
    kv.run(&[
        "zadd", "z", "1.5", "apple", "-2", "avocado", "3e3", "banana",
    ]);
    assert_eq!(
        kv.run(&["zscan", "z", "0", "MATCH", "a*"]),
        Reply::Array(vec![b("0"), arr(&["avocado", "-2", "apple", "1.5"])])
    );
    assert_eq!(kv.run(&["zscore", "z", "banana"]), d(3000.0));
}

// ---------------------------------------------------------------------------------------
// across the families

#[test]
fn wrong_type_everywhere() {
    let kv = kv();
    kv.run(&["set", "str", "v"]);
    kv.run(&["hset", "hash", "f", "v"]);
    kv.run(&["rpush", "list", "x"]);
    kv.run(&["sadd", "set", "m"]);
    kv.run(&["zadd", "zset", "1", "m"]);
    let commands: &[&[&str]] = &[
        &["hset", "K", "f", "v"],
        &["hsetnx", "K", "f", "v"],
        &["hget", "K", "f"],
        &["hmget", "K", "f"],
        &["hgetall", "K"],
        &["hdel", "K", "f"],
        &["hexists", "K", "f"],
        &["hlen", "K"],
        &["hkeys", "K"],
        &["hvals", "K"],
        &["hincrby", "K", "f", "1"],
        &["hincrbyfloat", "K", "f", "1"],
        &["hstrlen", "K", "f"],
        &["lpush", "K", "x"],
        &["rpush", "K", "x"],
        &["lpushx", "K", "x"],
        &["lpop", "K"],
        &["rpop", "K", "2"],
        &["llen", "K"],
        &["lrange", "K", "0", "-1"],
        &["lindex", "K", "0"],
        &["lset", "K", "0", "x"],
        &["ltrim", "K", "0", "1"],
        &["lrem", "K", "0", "x"],
        &["linsert", "K", "before", "x", "y"],
        &["lpos", "K", "x"],
        &["sadd", "K", "m"],
        &["srem", "K", "m"],
        &["smembers", "K"],
        &["sismember", "K", "m"],
        &["smismember", "K", "m"],
        &["scard", "K"],
        &["spop", "K"],
        &["srandmember", "K", "2"],
        &["zadd", "K", "1", "m"],
        &["zincrby", "K", "1", "m"],
        &["zrem", "K", "m"],
        &["zscore", "K", "m"],
        &["zmscore", "K", "m"],
        &["zcard", "K"],
        &["zrange", "K", "0", "-1"],
        &["zrangebyscore", "K", "-inf", "+inf"],
        &["zrevrange", "K", "0", "-1"],
        &["zrank", "K", "m"],
        &["zpopmin", "K"],
        &["zpopmax", "K", "2"],
        &["zcount", "K", "-inf", "+inf"],
    ];
    for command in commands {
        let own = match command[0].as_bytes()[0] {
            b'h' => "hash",
            b'l' | b'r' => "list",
            b's' => "set",
            _ => "zset",
        };
        for key in ["str", "hash", "list", "set", "zset"] {
            if key == own {
                continue;
            }
            let args: Vec<&str> = command
                .iter()
                .map(|a| if *a == "K" { key } else { a })
                .collect();
            assert_eq!(kv.run(&args), err(WRONGTYPE), "{args:?}");
        }
    }
    // Nothing changed.
    assert_eq!(kv.run(&["get", "str"]), b("v"));
    assert_eq!(
        kv.run(&["hgetall", "hash"]),
        Reply::Map(vec![(b("f"), b("v"))])
    );
    assert_eq!(kv.run(&["lrange", "list", "0", "-1"]), arr(&["x"]));
    assert_eq!(kv.run(&["smembers", "set"]), set(&["m"]));
    assert_eq!(
        kv.run(&["zrange", "zset", "0", "-1", "withscores"]),
        Reply::Pairs(vec![(b("m"), d(1.0))])
    );
}

#[test]
fn every_write_bumps_the_version_and_reads_do_not() {
    let kv = kv();
    kv.run(&["hset", "h", "f", "1"]);
    kv.run(&["rpush", "l", "a", "b", "c"]);
    kv.run(&["sadd", "s", "a", "b"]);
    kv.run(&["sadd", "sp", "a", "b"]);
    kv.run(&["zadd", "z", "1", "a", "2", "b"]);
    let writes: &[&[&str]] = &[
        &["hset", "h", "f", "2"],
        &["hincrby", "h", "f", "1"],
        &["hincrbyfloat", "h", "f", "1.5"],
        &["hsetnx", "h", "g", "1"],
        &["hdel", "h", "g"],
        &["lset", "l", "0", "x"],
        &["ltrim", "l", "0", "-1"],
        &["linsert", "l", "after", "b", "y"],
        &["lrem", "l", "1", "y"],
        &["lpush", "l", "z"],
        &["rpop", "l"],
        &["sadd", "s", "c"],
        &["srem", "s", "c"],
        &["spop", "sp"],
        &["zadd", "z", "5", "a"],
        &["zincrby", "z", "1", "a"],
        &["zrem", "z", "a"],
        &["zadd", "z", "1", "q"],
        &["zpopmax", "z"],
    ];
    for write in writes {
        let key = write[1];
        let before = kv.version(key);
        assert!(!matches!(kv.run(write), Reply::Error(_)), "{write:?}");
        assert_ne!(
            kv.version(key),
            before,
            "{write:?} must change the key's version"
        );
    }
    let reads_and_no_ops: &[&[&str]] = &[
        &["hgetall", "h"],
        &["hsetnx", "h", "f", "9"],
        &["hdel", "h", "nope"],
        &["lrange", "l", "0", "-1"],
        &["lrem", "l", "0", "nope"],
        &["linsert", "l", "before", "nope", "x"],
        &["sadd", "s", "b"],
        &["srem", "s", "nope"],
        &["srandmember", "s", "-3"],
        &["zadd", "z", "NX", "9", "q"],
        &["zadd", "z", "1", "q"],
        &["zincrby", "z", "0", "q"],
        &["zadd", "z", "INCR", "0", "q"],
        &["zrange", "z", "0", "-1"],
        &["zrank", "z", "q"],
    ];
    for read in reads_and_no_ops {
        let key = read[1];
        let before = kv.version(key);
        kv.run(read);
        assert_eq!(kv.version(key), before, "{read:?} must leave the key alone");
    }
}

#[test]
fn failing_commands_in_a_block_change_nothing() {
    let kv = kv();
    let long = "m".repeat(300);
    let replies = kv.block(&[
        &["sadd", "s", "a", &long],
        &["hset", "h", "f", "v", &long, "v"],
        &["zadd", "z", "1", "a", "x", "b"],
        &["zadd", "z", "1", "a", &long, "b"],
        &["rpush", "l", "a", "b"],
        &["lpop", "l", "-1"],
        &["hset", "n", "f", "notanumber"],
        &["hincrby", "n", "f", "1"],
        &["zadd", "inf", "inf", "m"],
        &["zadd", "inf", "incr", "-inf", "m"],
        &["zincrby", "inf", "-inf", "m"],
        &["linsert", "l", "sideways", "a", "x"],
        &["scard", "s"],
        &["hlen", "h"],
        &["zcard", "z"],
        &["lrange", "l", "0", "-1"],
        &["hget", "n", "f"],
        &["zscore", "inf", "m"],
    ]);
    assert!(matches!(&replies[0], Reply::Error(_)));
    assert!(matches!(&replies[1], Reply::Error(_)));
    assert_eq!(replies[2], err("ERR value is not a valid float"));
    assert!(matches!(&replies[3], Reply::Error(_)));
    assert_eq!(replies[4], int(2));
    assert!(matches!(&replies[5], Reply::Error(_)));
    assert_eq!(replies[7], err("ERR hash value is not an integer"));
    assert_eq!(replies[9], err("ERR resulting score is not a number (NaN)"));
    assert_eq!(
        replies[10],
        err("ERR resulting score is not a number (NaN)")
    );
    assert_eq!(replies[11], err("ERR syntax error"));
    assert_eq!(replies[12], int(0), "the refused SADD added nothing");
    assert_eq!(replies[13], int(0), "the refused HSET set nothing");
    assert_eq!(replies[14], int(0), "the refused ZADDs added nothing");
    assert_eq!(replies[15], arr(&["a", "b"]));
    assert_eq!(replies[16], b("notanumber"));
    assert_eq!(replies[17], d(f64::INFINITY));
}

#[test]
fn expired_collections_are_gone() {
    let kv = kv();
    kv.run(&["hset", "h", "old", "1"]);
    kv.run(&["rpush", "l", "old"]);
    kv.run(&["zadd", "z", "1", "old"]);
    kv.run(&["sadd", "s", "old"]);
    for key in ["h", "l", "z", "s"] {
        assert_eq!(kv.run(&["pexpire", key, "1"]), int(1));
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(kv.run(&["hget", "h", "old"]), Reply::Null);
    assert_eq!(kv.run(&["hset", "h", "new", "2"]), int(1));
    assert_eq!(
        kv.run(&["hgetall", "h"]),
        Reply::Map(vec![(b("new"), b("2"))])
    );
    assert_eq!(kv.run(&["ttl", "h"]), int(-1));
    assert_eq!(kv.run(&["llen", "l"]), int(0));
    assert_eq!(kv.run(&["rpush", "l", "new"]), int(1));
    assert_eq!(kv.run(&["lrange", "l", "0", "-1"]), arr(&["new"]));
    assert_eq!(kv.run(&["zadd", "z", "2", "new"]), int(1));
    assert_eq!(kv.run(&["zrange", "z", "0", "-1"]), arr(&["new"]));
    assert_eq!(kv.run(&["sadd", "s", "new"]), int(1));
    assert_eq!(kv.run(&["smembers", "s"]), set(&["new"]));
    // A TTL on a live collection survives writes to it.
    kv.run(&["expire", "s", "100"]);
    kv.run(&["sadd", "s", "more"]);
    assert_eq!(kv.run(&["ttl", "s"]), int(100));
}

// ---------------------------------------------------------------------------------------
// streams

/// An XRANGE entry: `[id, [field, value]]`.
fn entry(id: &str, field: &str, value: &str) -> Reply {
    Reply::Array(vec![b(id), arr(&[field, value])])
}

#[test]
fn stream_ranges_of_any_count_over_entries_larger_than_a_part() {
    let kv = kv();
    // Small entries between ones cut into several parts: a range read in batches of rows
    // must never stop inside an entry's parts or skip one.
    let model: Vec<(String, String)> = (0..12u8)
        .map(|i| {
            let len = if i % 3 == 1 {
                6000 + usize::from(i) * 1500
            } else {
                1 + usize::from(i)
            };
            (format!("{}-{}", 1 + i / 4, i % 4), big(i, len))
        })
        .collect();
    for (id, value) in &model {
        assert_eq!(kv.run(&["xadd", "s", id, "f", value]), b(id));
    }
    let expect = |entries: &[&(String, String)]| {
        Reply::Array(entries.iter().map(|(id, v)| entry(id, "f", v)).collect())
    };
    for count in 1..=model.len() + 1 {
        let count_text = count.to_string();
        let forward: Vec<_> = model.iter().take(count).collect();
        let backward: Vec<_> = model.iter().rev().take(count).collect();
        assert_eq!(
            kv.run(&["xrange", "s", "-", "+", "count", &count_text]),
            expect(&forward)
        );
        assert_eq!(
            kv.run(&["xrevrange", "s", "+", "-", "count", &count_text]),
            expect(&backward),
            "count {count}"
        );
    }
    // Bounds inside the stream, exclusive ones, and XREAD after an ID.
    let middle: Vec<_> = model[4..8].iter().collect();
    assert_eq!(kv.run(&["xrange", "s", "2", "2"]), expect(&middle));
    assert_eq!(kv.run(&["xrange", "s", "(1-3", "(3-0"]), expect(&middle));
    let after: Vec<_> = model[9..11].iter().collect();
    assert_eq!(
        kv.run(&["xread", "count", "2", "streams", "s", "3-0"]),
        Reply::Keyed(vec![(b("s"), expect(&after))])
    );
    assert_eq!(kv.run(&["xlen", "s"]), int(12));
}

#[test]
fn approximate_trimming_keeps_at_least_what_was_asked() {
    let kv = kv();
    for i in 1..=350 {
        let id = format!("{i}-0");
        assert_eq!(
            kv.run(&["xadd", "s", "maxlen", "~", "100", &id, "f", "v"]),
            b(&id)
        );
        let Reply::Int(len) = kv.run(&["xlen", "s"]) else {
            panic!("XLEN answers an integer")
        };
        // Whole runs of 100 go, once the stream holds 100 more than it keeps.
        assert!((100.min(i)..200).contains(&len), "after {i} entries: {len}");
        assert_eq!(len, if i < 200 { i } else { 100 + i % 100 }, "after {i}");
    }
    // 150 entries (201-0 … 350-0): MINID ~ removes the whole runs below the ID only.
    assert_eq!(kv.run(&["xlen", "s"]), int(150));
    assert_eq!(kv.run(&["xtrim", "s", "minid", "~", "340"]), int(100));
    assert_eq!(kv.run(&["xtrim", "s", "minid", "~", "340"]), int(0));
    assert_eq!(kv.run(&["xtrim", "s", "minid", "340"]), int(39));
    // LIMIT caps a trim at whole runs; exact trimming removes exactly.
    for i in 351..=600 {
        kv.run(&["xadd", "s", &format!("{i}-0"), "f", "v"]);
    }
    assert_eq!(kv.run(&["xlen", "s"]), int(261));
    assert_eq!(
        kv.run(&["xtrim", "s", "maxlen", "~", "0", "limit", "150"]),
        int(100)
    );
    assert_eq!(
        kv.run(&["xtrim", "s", "maxlen", "~", "0", "limit", "50"]),
        int(0)
    );
    assert_eq!(kv.run(&["xtrim", "s", "maxlen", "=", "7"]), int(154));
    assert_eq!(
        kv.run(&["xrange", "s", "-", "+", "count", "1"]),
        Reply::Array(vec![entry("594-0", "f", "v")])
    );
}

#[test]
fn an_emptied_stream_stays_and_keeps_its_last_id() {
    let kv = kv();
    assert_eq!(
        kv.run(&["xadd", "s", "nomkstream", "*", "f", "v"]),
        Reply::Null
    );
    assert!(!kv.exists("s"));
    assert_eq!(kv.run(&["xadd", "s", "5-5", "f", "v"]), b("5-5"));
    assert_eq!(kv.run(&["xdel", "s", "5-5", "5-5", "1"]), int(1));
    assert_eq!(kv.run(&["xlen", "s"]), int(0));
    assert_eq!(kv.run(&["type", "s"]), Reply::Status("stream".into()));
    assert_eq!(
        kv.run(&["xadd", "s", "5-5", "f", "v"]),
        err("ERR The ID specified in XADD is equal or smaller than the target stream top item")
    );
    assert_eq!(kv.run(&["xadd", "s", "5-*", "f", "v"]), b("5-6"));
    // `*` takes the clock: far above 5 ms since the epoch.
    let Reply::Bulk(id) = kv.run(&["xadd", "s", "*", "f", "v"]) else {
        panic!("XADD answers the ID")
    };
    let ms: u64 = String::from_utf8(id)
        .expect("utf-8")
        .split('-')
        .next()
        .and_then(|ms| ms.parse().ok())
        .expect("an ID");
    assert!(ms > 1_600_000_000_000, "{ms}");
    assert_eq!(
        kv.run(&["xrange", "s", "-", "+", "count", "0"]),
        Reply::NullArray
    );
    assert_eq!(
        kv.run(&["xrange", "none", "-", "+", "count", "0"]),
        arr(&[])
    );
    assert_eq!(kv.run(&["set", "str", "x"]), Reply::ok());
    for command in [
        &["xadd", "str", "*", "f", "v"][..],
        &["xlen", "str"],
        &["xrange", "str", "-", "+"],
        &["xdel", "str", "1"],
        &["xtrim", "str", "maxlen", "0"],
        &["xread", "streams", "s", "str", "0", "0"],
    ] {
        assert_eq!(kv.run(command), err(WRONGTYPE), "{command:?}");
    }
    // DEL frees the entries; a new stream of the name starts from 0-0.
    assert_eq!(kv.run(&["del", "s"]), int(1));
    assert_eq!(kv.run(&["xadd", "s", "0-*", "f", "v"]), b("0-1"));
}

// ---------------------------------------------------------------------------------------
// bitmaps

/// BITPOS and BITCOUNT at the edges, with the answers redis-server 7.0.15 gave for the
/// same strings and arguments: a search for 0 through a string of ones finds the zero
/// padding after it unless the range has an end; ranges in bits cut bytes.
#[test]
fn bitpos_and_bitcount_answer_as_redis_at_the_edges() {
    let kv = kv();
    let set = |key: &str, value: &[u8]| {
        let args = vec![b"set".to_vec(), key.as_bytes().to_vec(), value.to_vec()];
        assert_eq!(kv.bytes(args), Reply::ok());
    };
    set("b", &[0xFF, 0xFF, 0xFF]);
    set("c", &[0xFF, 0xF0, 0x00]);
    let cases: &[(&str, &str, i64)] = &[
        ("b", "0", 24),
        ("b", "1", 0),
        ("b", "0 0", 24),
        ("b", "0 1", 24),
        ("b", "0 -1", 24),
        ("b", "0 0 -1", -1),
        ("b", "0 0 1", -1),
        ("b", "0 2 2", -1),
        ("b", "0 0 -1 bit", -1),
        ("b", "0 5 22 bit", -1),
        ("b", "0 5 23 bit", -1),
        ("b", "1 5 22 bit", 5),
        ("b", "0 3", -1),
        ("b", "1 3", -1),
        ("c", "0", 12),
        ("c", "0 0 0", -1),
        ("c", "0 1 1", 12),
        ("c", "0 4 11 bit", -1),
        ("c", "0 4 12 bit", 12),
        ("c", "1 -2", 8),
        ("c", "0 -3 -2 bit", 21),
    ];
    for (key, args, expected) in cases {
        let mut command = vec!["bitpos", key];
        command.extend(args.split(' '));
        assert_eq!(kv.run(&command), int(*expected), "BITPOS {key} {args}");
    }
    assert_eq!(kv.run(&["bitcount", "c", "4", "12", "bit"]), int(8));
    assert_eq!(kv.run(&["bitcount", "c", "-9", "-1", "bit"]), int(0));
    assert_eq!(kv.run(&["bitpos", "none", "0"]), int(0));
    assert_eq!(kv.run(&["bitpos", "none", "1"]), int(-1));
}

/// The bulk strings of a reply of pairs (HRANDFIELD … WITHVALUES, ZRANDMEMBER … WITHSCORES).
fn pairs(reply: &Reply) -> Vec<(String, String)> {
    let Reply::Pairs(items) = reply else {
        panic!("not pairs: {reply:?}");
    };
    let text = |r: &Reply| match r {
        Reply::Bulk(bytes) => String::from_utf8(bytes.clone()).expect("utf-8"),
        Reply::Double(x) => x.to_string(),
        other => panic!("unexpected {other:?}"),
    };
    items.iter().map(|(a, b)| (text(a), text(b))).collect()
}

#[test]
fn random_fields_and_members_come_from_the_collection() {
    let kv = kv();
    kv.run(&["hset", "h", "a", "1", "b", "2", "c", "3"]);
    kv.run(&["zadd", "z", "1", "a", "2", "b", "3", "c"]);
    let value_of = |field: &str| (field.as_bytes()[0] - b'a' + 1).to_string();
    for _ in 0..20 {
        // A positive count: distinct picks, at most the collection's size.
        let picked = strings(&kv.run(&["hrandfield", "h", "2"]));
        assert_eq!(picked.len(), 2);
        assert_ne!(picked[0], picked[1]);
        let with_values = pairs(&kv.run(&["hrandfield", "h", "2", "withvalues"]));
        for (field, value) in &with_values {
            assert_eq!(
                value,
                &value_of(field),
                "each value goes with its own field"
            );
        }
        // A negative count: exactly that many, repeats allowed.
        let repeated = strings(&kv.run(&["zrandmember", "z", "-7"]));
        assert_eq!(repeated.len(), 7);
        assert!(repeated
            .iter()
            .all(|m| ["a", "b", "c"].contains(&m.as_str())));
        for (member, score) in pairs(&kv.run(&["zrandmember", "z", "-3", "withscores"])) {
            assert_eq!(
                score,
                value_of(&member),
                "each score goes with its own member"
            );
        }
        let one = strings(&Reply::Array(vec![kv.run(&["hrandfield", "h"])]));
        assert!(["a", "b", "c"].contains(&one[0].as_str()));
    }
    // A count that covers the collection answers all of it.
    let mut all = strings(&kv.run(&["zrandmember", "z", "10"]));
    all.sort();
    assert_eq!(all, ["a", "b", "c"]);
    assert_eq!(kv.run(&["hrandfield", "nothing"]), Reply::Null);
    assert_eq!(kv.run(&["zrandmember", "nothing", "3"]), arr(&[]));
    assert_eq!(
        kv.run(&["hrandfield", "z", "1"]),
        err(WRONGTYPE),
        "a sorted set is not a hash"
    );
}

#[test]
fn a_copy_is_independent_of_its_source() {
    let kv = kv();
    kv.run(&["rpush", "l", "a", "b", "c"]);
    kv.run(&["sadd", "s", "x", "y"]);
    kv.run(&["zadd", "z", "1", "m", "2", "n"]);
    kv.run(&["hset", "h", "f", "v"]);
    kv.run(&["set", "str", &big(7, 20_000)]);
    for key in ["l", "s", "z", "h", "str"] {
        let copy = format!("{key}-copy");
        assert_eq!(kv.run(&["copy", key, &copy]), int(1));
        assert_eq!(kv.run(&["type", &copy]), kv.run(&["type", key]));
    }
    assert_eq!(kv.run(&["get", "str-copy"]), b(&big(7, 20_000)));
    // Writes to the copy leave the source alone, and the other way round.
    kv.run(&["rpush", "l-copy", "d"]);
    kv.run(&["lpop", "l"]);
    assert_eq!(kv.run(&["lrange", "l", "0", "-1"]), arr(&["b", "c"]));
    assert_eq!(
        kv.run(&["lrange", "l-copy", "0", "-1"]),
        arr(&["a", "b", "c", "d"])
    );
    kv.run(&["srem", "s-copy", "x"]);
    assert_eq!(kv.run(&["smembers", "s"]), set(&["x", "y"]));
    kv.run(&["zincrby", "z", "10", "m"]);
    assert_eq!(kv.run(&["zscore", "z-copy", "m"]), d(1.0));
    kv.run(&["del", "h"]);
    assert_eq!(kv.run(&["hget", "h-copy", "f"]), b("v"));
    // REPLACE overwrites a key of another kind; without it, nothing is copied.
    assert_eq!(kv.run(&["copy", "s", "h-copy"]), int(0));
    assert_eq!(kv.run(&["copy", "s", "h-copy", "replace"]), int(1));
    assert_eq!(kv.run(&["type", "h-copy"]), Reply::Status("set".into()));
}

#[test]
fn a_copied_stream_keeps_its_consumer_groups() {
    let kv = kv();
    kv.run(&["xadd", "st", "1-1", "a", "1"]);
    kv.run(&["xadd", "st", "2-1", "b", "2"]);
    kv.run(&["xgroup", "create", "st", "g", "0"]);
    kv.run(&[
        "xreadgroup",
        "group",
        "g",
        "c",
        "count",
        "1",
        "streams",
        "st",
        ">",
    ]);
    assert_eq!(kv.run(&["copy", "st", "st2"]), int(1));
    assert_eq!(kv.run(&["xack", "st", "g", "1-1"]), int(1));
    // The copy's group still has the entry pending, and delivers the next one.
    assert_eq!(kv.run(&["xack", "st2", "g", "1-1"]), int(1));
    let next = kv.run(&["xreadgroup", "group", "g", "c", "streams", "st2", ">"]);
    let entry = Reply::Array(vec![b("2-1"), arr(&["b", "2"])]);
    assert_eq!(
        next,
        Reply::Keyed(vec![(b("st2"), Reply::Array(vec![entry]))])
    );
    assert_eq!(kv.run(&["xlen", "st2"]), int(2));
}

#[test]
fn move_takes_a_key_to_another_database_with_its_deadline() {
    let kv = kv();
    kv.run(&["rpush", "l", "a", "b"]);
    kv.run(&["pexpire", "l", "100000"]);
    assert_eq!(kv.run(&["move", "l", "3"]), int(1));
    assert!(!kv.exists("l"));
    let moved = kv.ks.execute(
        3,
        lookup(b"pttl").expect("pttl"),
        &[b"pttl".to_vec(), b"l".to_vec()],
    );
    let Reply::Int(ttl) = moved.reply else {
        panic!("PTTL answered {:?}", moved.reply);
    };
    assert!(
        ttl > 0 && ttl <= 100_000,
        "the deadline moved with the key: {ttl}"
    );
    let llen = kv.ks.execute(
        3,
        lookup(b"llen").expect("llen"),
        &[b"llen".to_vec(), b"l".to_vec()],
    );
    assert_eq!(llen.reply, int(2));
    assert_eq!(kv.run(&["move", "l", "3"]), int(0), "no such key left here");
}

/// A set of more than 1,024 members gives its random members by position (`fields_at`)
/// rather than by reading every member: SRANDMEMBER and SPOP still answer with members of
/// the set, distinct where Redis's are, every member as likely as any other (a chi-square
/// test over 60,000 draws), SPOP takes each member once, and an EXEC block that added a
/// member before its SRANDMEMBER (writes of its own in the set's range) can draw it.
#[test]
fn random_members_of_a_large_set_are_picked_by_position() {
    const MEMBERS: usize = 3_000;
    let kv = kv();
    let all: Vec<String> = (0..MEMBERS).map(|i| format!("m{i:05}")).collect();
    for batch in all.chunks(500) {
        let mut args = vec!["sadd", "s"];
        args.extend(batch.iter().map(String::as_str));
        assert_eq!(kv.run(&args), int(batch.len() as i64));
    }
    let index = |member: &str| -> usize {
        all.binary_search_by(|m| m.as_str().cmp(member))
            .unwrap_or_else(|_| panic!("{member} is not a member"))
    };

    // Draws with repeats: each member's count against the 20 expected.
    let mut counts = vec![0u64; MEMBERS];
    for _ in 0..60 {
        let drawn = strings(&kv.run(&["srandmember", "s", "-1000"]));
        assert_eq!(
            drawn.len(),
            1000,
            "a negative count gives exactly that many"
        );
        for member in &drawn {
            counts[index(member)] += 1;
        }
    }
    let expected = 60_000.0 / MEMBERS as f64;
    let chi_square: f64 = counts
        .iter()
        .map(|&n| (n as f64 - expected).powi(2) / expected)
        .sum();
    // 2,999 degrees of freedom: mean 2,999, standard deviation 77.5; six of them above.
    eprintln!("chi-square over {MEMBERS} members: {chi_square:.0}");
    assert!(
        chi_square < 3_464.0,
        "picks far from uniform: chi-square {chi_square:.0}"
    );
    assert!(
        counts.iter().all(|&n| n > 0),
        "a member never drawn in 60,000 draws"
    );

    let distinct = strings(&kv.run(&["srandmember", "s", "1000"]));
    let mut sorted: Vec<usize> = distinct.iter().map(|m| index(m)).collect();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        1000,
        "a positive count gives distinct members"
    );
    let one = strings(&Reply::Array(vec![kv.run(&["srandmember", "s"])]));
    index(&one[0]);
    assert_eq!(kv.run(&["srandmember", "s", "0"]), arr(&[]));

    // Added in the block, before the draw: the block's own write is in the set's range.
    let replies = kv.block(&[&["sadd", "s", "zz-new"], &["srandmember", "s", "-1000"]]);
    assert_eq!(replies[0], int(1));
    let drawn = strings(&replies[1]);
    assert_eq!(drawn.len(), 1000);
    assert!(drawn
        .iter()
        .all(|m| m == "zz-new" || all.binary_search(m).is_ok()));
    assert_eq!(kv.run(&["srem", "s", "zz-new"]), int(1));

    // SPOP one at a time, then by counts, down to an empty set: every member once.
    let mut popped = Vec::new();
    for _ in 0..1_500 {
        popped.extend(strings(&Reply::Array(vec![kv.run(&["spop", "s"])])));
    }
    while kv.exists("s") {
        popped.extend(strings(&kv.run(&["spop", "s", "400"])));
    }
    let mut taken: Vec<usize> = popped.iter().map(|m| index(m)).collect();
    taken.sort_unstable();
    assert_eq!(
        taken,
        (0..MEMBERS).collect::<Vec<_>>(),
        "each member popped once"
    );
}

/// ZRANDMEMBER of a sorted set of more than 1,024 members picks by position too (decision
/// 237): members of the set with their own scores, distinct for a positive count, every
/// member drawn in 30,000 draws over 2,000.
#[test]
fn random_members_of_a_large_sorted_set_are_picked_by_position() {
    const MEMBERS: usize = 2_000;
    let kv = kv();
    let scores: Vec<(String, String)> = (0..MEMBERS)
        .map(|i| (format!("{}", (i * 7919) % 10_007), format!("z{i:05}")))
        .collect();
    for batch in scores.chunks(500) {
        let mut args = vec!["zadd", "z"];
        for (score, member) in batch {
            args.extend([score.as_str(), member.as_str()]);
        }
        assert_eq!(kv.run(&args), int(batch.len() as i64));
    }
    let index = |member: &str| -> usize {
        member[1..]
            .parse()
            .unwrap_or_else(|_| panic!("{member} is not a member"))
    };
    let mut seen = vec![false; MEMBERS];
    for _ in 0..30 {
        let Reply::Pairs(drawn) = kv.run(&["zrandmember", "z", "-1000", "withscores"]) else {
            panic!("ZRANDMEMBER WITHSCORES answers pairs");
        };
        assert_eq!(drawn.len(), 1_000, "1,000 members and their scores");
        for (member, score) in drawn {
            let member = strings(&Reply::Array(vec![member])).remove(0);
            let at = index(&member);
            let expected: f64 = scores[at].0.parse().expect("a score");
            assert_eq!(score, Reply::Double(expected), "{member}'s score");
            seen[at] = true;
        }
    }
    assert!(
        seen.iter().all(|&s| s),
        "a member never drawn in 30,000 draws"
    );
    let distinct = strings(&kv.run(&["zrandmember", "z", "1000"]));
    let mut at: Vec<usize> = distinct.iter().map(|m| index(m)).collect();
    at.sort_unstable();
    at.dedup();
    assert_eq!(at.len(), 1000, "a positive count gives distinct members");
    let one = strings(&Reply::Array(vec![kv.run(&["zrandmember", "z"])]));
    index(&one[0]);
}

/// Clients on both event loops SPOP one large set at once, one member or a few at a time,
/// until it is empty: every member is popped exactly once, although each pop picks by
/// position (decision 237) and two pops may pick the same one (one of them is retried).
#[test]
fn concurrent_pops_of_a_large_set_take_each_member_once() {
    const MEMBERS: usize = 3_000;
    let server = support::TestServer::start();
    let mut con = server.client();
    for batch in (0..MEMBERS).collect::<Vec<_>>().chunks(500) {
        let members: Vec<String> = batch.iter().map(|i| format!("m{i:05}")).collect();
        let mut args = vec!["SADD", "s"];
        args.extend(members.iter().map(String::as_str));
        let added: i64 = support::q(&mut con, &args);
        assert_eq!(added as usize, batch.len());
    }
    let poppers: Vec<_> = (0..4)
        .map(|c| {
            let mut con = server.client();
            std::thread::spawn(move || {
                let mut popped: Vec<String> = Vec::new();
                loop {
                    let got: Vec<String> = if c % 2 == 0 {
                        let one: Option<String> = support::q(&mut con, &["SPOP", "s"]);
                        one.into_iter().collect()
                    } else {
                        support::q(&mut con, &["SPOP", "s", "3"])
                    };
                    if got.is_empty() {
                        return popped;
                    }
                    popped.extend(got);
                }
            })
        })
        .collect();
    let mut all: Vec<String> = poppers
        .into_iter()
        .flat_map(|popper| popper.join().expect("popper"))
        .collect();
    all.sort();
    let expected: Vec<String> = (0..MEMBERS).map(|i| format!("m{i:05}")).collect();
    assert_eq!(all.len(), MEMBERS, "members popped");
    assert_eq!(all, expected, "each member popped once");
}

/// Ranks, counts and rank ranges of a sorted set of many leaves are counted a leaf at a time
/// (decision 238), not read member by member: each answer must still be the one the
/// (score, member) order gives, ties broken by member, from either end, with and without
/// writes of the same block before it.
#[test]
fn ranks_counts_and_rank_ranges_of_a_large_sorted_set() {
    const MEMBERS: usize = 6_000;
    let kv = kv();
    // Scores with many ties: member order decides within one.
    let mut model: Vec<(u64, String)> = (0..MEMBERS)
        .map(|i| (((i * 7919) % 500) as u64, format!("z{i:05}")))
        .collect();
    for batch in model.chunks(500) {
        let mut args = vec!["zadd".to_string(), "z".to_string()];
        for (score, member) in batch {
            args.extend([score.to_string(), member.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(kv.run(&args), int(batch.len() as i64));
    }
    model.sort();
    let last = MEMBERS as i64 - 1;
    for at in (0..MEMBERS).step_by(397).chain([MEMBERS - 1]) {
        let (score, member) = &model[at];
        assert_eq!(kv.run(&["zrank", "z", member]), int(at as i64), "{member}");
        assert_eq!(kv.run(&["zrevrank", "z", member]), int(last - at as i64));
        let with_score = Reply::Array(vec![int(at as i64), d(*score as f64)]);
        assert_eq!(kv.run(&["zrank", "z", member, "withscore"]), with_score);
    }
    assert_eq!(kv.run(&["zrank", "z", "absent"]), Reply::Null);

    let in_scores =
        |low: u64, high: u64| model.iter().filter(move |(s, _)| (low..=high).contains(s));
    assert_eq!(
        kv.run(&["zcount", "z", "-inf", "+inf"]),
        int(MEMBERS as i64)
    );
    assert_eq!(
        kv.run(&["zcount", "z", "100", "(300"]),
        int(in_scores(100, 299).count() as i64)
    );
    assert_eq!(kv.run(&["zcount", "z", "(100", "100"]), int(0));
    let lex = model
        .iter()
        .filter(|(_, m)| ("z01000".."z04000").contains(&m.as_str()));
    assert_eq!(
        kv.run(&["zlexcount", "z", "[z01000", "(z04000"]),
        int(lex.count() as i64)
    );
    assert_eq!(kv.run(&["zlexcount", "z", "-", "+"]), int(MEMBERS as i64));

    let members = |range: std::ops::Range<usize>| -> Vec<String> {
        model[range].iter().map(|(_, m)| m.clone()).collect()
    };
    assert_eq!(
        strings(&kv.run(&["zrange", "z", "2500", "2509"])),
        members(2500..2510)
    );
    let mut reversed = members(MEMBERS - 2510..MEMBERS - 2500);
    reversed.reverse();
    assert_eq!(
        strings(&kv.run(&["zrevrange", "z", "2500", "2509"])),
        reversed
    );
    assert_eq!(
        strings(&kv.run(&["zrange", "z", "-3", "-1"])),
        members(MEMBERS - 3..MEMBERS)
    );
    let skipped: Vec<String> = in_scores(200, 499)
        .skip(1000)
        .take(5)
        .map(|(_, m)| m.clone())
        .collect();
    let by_score = kv.run(&["zrangebyscore", "z", "200", "+inf", "limit", "1000", "5"]);
    assert_eq!(strings(&by_score), skipped);
    let mut below: Vec<String> = in_scores(0, 300).map(|(_, m)| m.clone()).collect();
    below.reverse();
    let by_score = kv.run(&["zrevrangebyscore", "z", "300", "-inf", "limit", "700", "4"]);
    assert_eq!(strings(&by_score), below[700..704]);
    let too_far = kv.run(&["zrangebyscore", "z", "-inf", "+inf", "limit", "6000", "1"]);
    assert_eq!(strings(&too_far), Vec::<String>::new());

    // In a block, after writes of its own in the set's range.
    let (_, first) = model[0].clone();
    let replies = kv.block(&[
        &["zadd", "z", "-1", "aaa"],
        &["zrank", "z", &first],
        &["zcount", "z", "-inf", "0"],
        &["zrange", "z", "1", "1"],
    ]);
    assert_eq!(replies[1], int(1));
    let zeros = in_scores(0, 0).count() as i64;
    assert_eq!(replies[2], int(zeros + 1));
    assert_eq!(strings(&replies[3]), [first]);

    // Removed by rank: the ranks after them move down.
    assert_eq!(kv.run(&["zremrangebyrank", "z", "1001", "1010"]), int(10));
    let (_, after) = &model[1010];
    assert_eq!(kv.run(&["zrank", "z", after]), int(1001));
    assert_eq!(kv.run(&["zcard", "z"]), int(MEMBERS as i64 + 1 - 10));
}

/// HRANDFIELD of a hash of more than 1,024 fields picks by position (decision 239) when
/// every value is one part row: each field comes with its own value, every field is drawn
/// in 60,000 draws over 3,000, a positive count gives distinct fields. A hash with one value
/// of several rows is read whole instead, and answers the same way.
#[test]
fn random_fields_of_a_large_hash_are_picked_by_position() {
    const FIELDS: usize = 3_000;
    let kv = kv();
    let fields: Vec<(String, String)> = (0..FIELDS)
        .map(|i| (format!("f{i:05}"), format!("value of {i}")))
        .collect();
    for batch in fields.chunks(500) {
        let mut args = vec!["hset", "h"];
        for (field, value) in batch {
            args.extend([field.as_str(), value.as_str()]);
        }
        assert_eq!(kv.run(&args), int(batch.len() as i64));
    }
    let mut drawn = vec![false; FIELDS];
    for _ in 0..60 {
        let reply = kv.run(&["hrandfield", "h", "-1000", "withvalues"]);
        assert_eq!(check_pairs(reply, &fields, &mut drawn), 1000);
    }
    assert!(
        drawn.iter().all(|&d| d),
        "a field never drawn in 60,000 draws"
    );
    let mut distinct = strings(&kv.run(&["hrandfield", "h", "1000"]));
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        1000,
        "a positive count gives distinct fields"
    );
    let one = kv.run(&["hrandfield", "h"]);
    assert!(matches!(one, Reply::Bulk(_)), "{one:?}");

    // One value of several part rows: the hash is read whole, with the same answers.
    let long = "x".repeat(100_000);
    assert_eq!(kv.run(&["hset", "h", "f00007", &long]), int(0));
    let mut fields = fields;
    fields[7].1 = long;
    let mut drawn = vec![false; FIELDS];
    for _ in 0..3 {
        let reply = kv.run(&["hrandfield", "h", "-1000", "withvalues"]);
        assert_eq!(check_pairs(reply, &fields, &mut drawn), 1000);
    }
}

/// The (field, value) pairs of an HRANDFIELD … WITHVALUES reply, each checked against
/// `fields` (field `f{i:05}` is `fields[i]`) and marked in `drawn`; their number.
fn check_pairs(reply: Reply, fields: &[(String, String)], drawn: &mut [bool]) -> usize {
    let Reply::Pairs(pairs) = reply else {
        panic!("HRANDFIELD WITHVALUES answers pairs");
    };
    for (field, value) in &pairs {
        let field = strings(&Reply::Array(vec![field.clone()])).remove(0);
        let at: usize = field[1..].parse().expect("a field");
        assert!(
            *value == b(&fields[at].1),
            "{field} came with another's value"
        );
        drawn[at] = true;
    }
    pairs.len()
}
