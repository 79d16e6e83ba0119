//! The server through a real client (the `redis` crate) and through raw TCP: command
//! families with Redis's semantics and error texts, RESP2 and RESP3, MULTI/EXEC/WATCH, the
//! protocol's edge cases, and the limits that keep one client from exhausting the server.
//!
//! Every test starts its own server (in-process, port 0, a fresh database in a temporary
//! directory with its PMEM log buffer in /dev/shm), so tests do not see each other's keys.

mod support;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use redis::Value;
use support::{
    all_keys_freed, closed_by_server, err, eventually, exchange, expect_bytes, hello3,
    proc_status_kib, q, raw_value, read_exactly, server_error_text, stored_rows, Options,
    TestServer,
};
use tailstore_log::CommitMode;

const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";

fn ok(value: Value) {
    assert_eq!(value, Value::Okay);
}

/// The command was queued by MULTI.
#[track_caller]
fn queued(c: &mut redis::Connection, args: &[&str]) {
    assert_eq!(raw_value(c, args), Value::SimpleString("QUEUED".into()));
}

fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

// ---------------------------------------------------------------------------------------
// strings

#[test]
fn set_and_get_with_every_option() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["SET", "k", "v"]));
    assert_eq!(
        q::<Option<String>>(&mut c, &["GET", "k"]).as_deref(),
        Some("v")
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "missing"]), None);

    // NX: only if absent; XX: only if present. A refused SET answers nil.
    assert_eq!(raw_value(&mut c, &["SET", "k", "w", "NX"]), Value::Nil);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "v");
    ok(raw_value(&mut c, &["SET", "fresh", "1", "NX"]));
    assert_eq!(raw_value(&mut c, &["SET", "absent", "w", "XX"]), Value::Nil);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "absent"]), 0);
    ok(raw_value(&mut c, &["SET", "k", "w", "XX"]));
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "w");

    // GET: the old value (nil if none), and the write happens.
    assert_eq!(raw_value(&mut c, &["SET", "k", "x", "GET"]), bulk("w"));
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "x");
    assert_eq!(raw_value(&mut c, &["SET", "new", "y", "GET"]), Value::Nil);
    assert_eq!(q::<String>(&mut c, &["GET", "new"]), "y");
    // NX with GET: refused, the old value still answered.
    assert_eq!(
        raw_value(&mut c, &["SET", "k", "z", "NX", "GET"]),
        bulk("x")
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "x");

    // EX / PX set a TTL, KEEPTTL keeps it, a plain SET clears it.
    ok(raw_value(&mut c, &["SET", "e", "1", "EX", "100"]));
    let ttl: i64 = q(&mut c, &["TTL", "e"]);
    assert!((99..=100).contains(&ttl), "TTL {ttl}");
    ok(raw_value(&mut c, &["SET", "e", "2", "KEEPTTL"]));
    let ttl: i64 = q(&mut c, &["TTL", "e"]);
    assert!((99..=100).contains(&ttl), "TTL after KEEPTTL {ttl}");
    assert_eq!(q::<String>(&mut c, &["GET", "e"]), "2");
    ok(raw_value(&mut c, &["SET", "e", "3"]));
    assert_eq!(q::<i64>(&mut c, &["TTL", "e"]), -1);
    ok(raw_value(&mut c, &["SET", "p", "1", "PX", "100000"]));
    let pttl: i64 = q(&mut c, &["PTTL", "p"]);
    assert!((95_000..=100_000).contains(&pttl), "PTTL {pttl}");
    let at = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 1000)
        .to_string();
    ok(raw_value(&mut c, &["SET", "x", "1", "EXAT", &at]));
    let ttl: i64 = q(&mut c, &["TTL", "x"]);
    assert!((998..=1000).contains(&ttl), "TTL after EXAT {ttl}");

    // Errors, with Redis's texts; none of them writes.
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "EX", "0"]),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "PX", "-5"]),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(err(&mut c, &["SET", "k", "v", "EX", "ten"]), NOT_INTEGER);
    assert_eq!(err(&mut c, &["SET", "k", "v", "NX", "XX"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "EX", "10", "PX", "10"]),
        SYNTAX
    );
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "EX", "10", "KEEPTTL"]),
        SYNTAX
    );
    assert_eq!(err(&mut c, &["SET", "k", "v", "EX"]), SYNTAX);
    assert_eq!(err(&mut c, &["SET", "k", "v", "BOGUS"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["SET", "k", "v", "EX", "9223372036854775807"]),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        err(&mut c, &["SETEX", "k", "0", "v"]),
        "ERR invalid expire time in 'setex' command"
    );
    assert_eq!(
        err(&mut c, &["SET", "k"]),
        "ERR wrong number of arguments for 'set' command"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "x");
    assert_eq!(
        err(&mut c, &["GET", "a", "b"]),
        "ERR wrong number of arguments for 'get' command"
    );
}

#[test]
fn setnx_getset_getdel() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["SETNX", "a", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["SETNX", "a", "2"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "a"]), "1");
    assert_eq!(raw_value(&mut c, &["GETSET", "a", "3"]), bulk("1"));
    assert_eq!(raw_value(&mut c, &["GETSET", "b", "1"]), Value::Nil);
    assert_eq!(q::<String>(&mut c, &["GET", "b"]), "1");
    // GETSET clears the TTL, as SET does.
    ok(raw_value(&mut c, &["SET", "t", "v", "EX", "100"]));
    assert_eq!(raw_value(&mut c, &["GETSET", "t", "w"]), bulk("v"));
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), -1);
    assert_eq!(raw_value(&mut c, &["GETDEL", "a"]), bulk("3"));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a"]), 0);
    assert_eq!(raw_value(&mut c, &["GETDEL", "a"]), Value::Nil);
    // A deleted key with a TTL leaves nothing behind: it can be set again without one.
    assert_eq!(raw_value(&mut c, &["GETDEL", "t"]), bulk("w"));
    ok(raw_value(&mut c, &["SET", "t", "again"]));
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), -1);
}

#[test]
fn mget_mset_msetnx() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]));
    let values: Vec<Option<String>> = q(&mut c, &["MGET", "a", "b", "missing", "c"]);
    assert_eq!(
        values,
        [Some("1".into()), Some("2".into()), None, Some("3".into())]
    );
    assert_eq!(
        err(&mut c, &["MSET", "a", "1", "b"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        err(&mut c, &["MSET", "a"]),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "a"]), "1");
    // MSETNX: all or nothing.
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "a", "9", "z", "9"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "a"]), "1");
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "y", "1", "z", "2"]), 1);
    let values: Vec<Option<String>> = q(&mut c, &["MGET", "y", "z"]);
    assert_eq!(values, [Some("1".into()), Some("2".into())]);
    // A key given twice: the last value wins (each write sees the one before it).
    ok(raw_value(&mut c, &["MSET", "dup", "1", "dup", "2"]));
    assert_eq!(q::<String>(&mut c, &["GET", "dup"]), "2");
    assert_eq!(q::<i64>(&mut c, &["MSETNX", "dup2", "1", "dup2", "2"]), 1);
    assert_eq!(q::<String>(&mut c, &["GET", "dup2"]), "2");
    // MSET clears TTLs.
    ok(raw_value(&mut c, &["SET", "t", "v", "EX", "100"]));
    ok(raw_value(&mut c, &["MSET", "t", "w"]));
    assert_eq!(q::<i64>(&mut c, &["TTL", "t"]), -1);
}

#[test]
fn counters() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]), 1);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "n", "10"]), 11);
    assert_eq!(q::<i64>(&mut c, &["DECR", "n"]), 10);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "n", "3"]), 7);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "n", "-7"]), 0);
    assert_eq!(q::<i64>(&mut c, &["DECR", "fresh"]), -1);
    assert_eq!(q::<String>(&mut c, &["GET", "n"]), "0");
    assert_eq!(q::<String>(&mut c, &["TYPE", "n"]), "string");

    ok(raw_value(&mut c, &["SET", "s", "abc"]));
    assert_eq!(err(&mut c, &["INCR", "s"]), NOT_INTEGER);
    ok(raw_value(&mut c, &["SET", "s", " 1"]));
    assert_eq!(err(&mut c, &["INCR", "s"]), NOT_INTEGER);
    ok(raw_value(&mut c, &["SET", "s", "1.5"]));
    assert_eq!(err(&mut c, &["INCR", "s"]), NOT_INTEGER);
    assert_eq!(err(&mut c, &["INCRBY", "n", "abc"]), NOT_INTEGER);
    assert_eq!(
        err(&mut c, &["INCRBY", "n", "99999999999999999999"]),
        NOT_INTEGER
    );
    assert_eq!(err(&mut c, &["DECRBY", "n", "1x"]), NOT_INTEGER);

    ok(raw_value(&mut c, &["SET", "big", "9223372036854775807"]));
    assert_eq!(
        err(&mut c, &["INCR", "big"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err(&mut c, &["INCRBY", "big", "1"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "big"]), "9223372036854775807");
    ok(raw_value(&mut c, &["SET", "small", "-9223372036854775808"]));
    assert_eq!(
        err(&mut c, &["DECR", "small"]),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        err(&mut c, &["DECRBY", "n", "-9223372036854775808"]),
        "ERR decrement would overflow"
    );
    assert_eq!(q::<i64>(&mut c, &["GET", "n"]), 0);

    // INCR keeps the key's TTL.
    ok(raw_value(&mut c, &["SET", "t", "5", "EX", "100"]));
    assert_eq!(q::<i64>(&mut c, &["INCR", "t"]), 6);
    assert!(q::<i64>(&mut c, &["TTL", "t"]) > 90);
}

#[test]
fn incrbyfloat() {
    let server = TestServer::start();
    let mut c = server.client();
    // Redis's documented example.
    ok(raw_value(&mut c, &["SET", "f", "10.50"]));
    assert_eq!(
        raw_value(&mut c, &["INCRBYFLOAT", "f", "0.1"]),
        bulk("10.6")
    );
    assert_eq!(raw_value(&mut c, &["INCRBYFLOAT", "f", "-5"]), bulk("5.6"));
    ok(raw_value(&mut c, &["SET", "f", "5.0e3"]));
    assert_eq!(
        raw_value(&mut c, &["INCRBYFLOAT", "f", "2.0e2"]),
        bulk("5200")
    );
    assert_eq!(q::<String>(&mut c, &["GET", "f"]), "5200");
    assert_eq!(raw_value(&mut c, &["INCRBYFLOAT", "new", "3"]), bulk("3"));
    assert_eq!(
        raw_value(&mut c, &["INCRBYFLOAT", "new", "1.5"]),
        bulk("4.5")
    );
    ok(raw_value(&mut c, &["SET", "s", "abc"]));
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "s", "1"]), NOT_FLOAT);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "f", "abc"]), NOT_FLOAT);
    assert_eq!(err(&mut c, &["INCRBYFLOAT", "f", "nan"]), NOT_FLOAT);
    assert_eq!(
        err(&mut c, &["INCRBYFLOAT", "f", "inf"]),
        "ERR increment would produce NaN or Infinity"
    );
    assert_eq!(q::<String>(&mut c, &["GET", "f"]), "5200");
}

#[test]
fn append_strlen_getrange_setrange() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["APPEND", "ap", "Hello"]), 5);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "ap", " World"]), 11);
    assert_eq!(q::<String>(&mut c, &["GET", "ap"]), "Hello World");
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "ap"]), 11);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "missing"]), 0);

    ok(raw_value(&mut c, &["SET", "r", "This is a string"]));
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "r", "0", "3"]), "This");
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "r", "-3", "-1"]), "ing");
    assert_eq!(
        q::<String>(&mut c, &["GETRANGE", "r", "0", "-1"]),
        "This is a string"
    );
    assert_eq!(
        q::<String>(&mut c, &["GETRANGE", "r", "10", "100"]),
        "string"
    );
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "r", "5", "3"]), "");
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "r", "-100", "1"]), "Th");
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "missing", "0", "-1"]), "");
    assert_eq!(err(&mut c, &["GETRANGE", "r", "a", "1"]), NOT_INTEGER);

    ok(raw_value(&mut c, &["SET", "sr", "Hello World"]));
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "sr", "6", "Redis"]), 11);
    assert_eq!(q::<String>(&mut c, &["GET", "sr"]), "Hello Redis");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "pad", "6", "Redis"]), 11);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "pad"]), b"\0\0\0\0\0\0Redis");
    assert_eq!(
        err(&mut c, &["SETRANGE", "sr", "-1", "x"]),
        "ERR offset is out of range"
    );
    assert_eq!(
        err(&mut c, &["SETRANGE", "sr", "536870911", "xx"]),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    // An empty patch on a missing key creates nothing.
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "none", "5", ""]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "none"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "sr"]), "Hello Redis");
}

/// A value much larger than one B+tree entry is cut into parts: every operation on it must
/// see the whole value, and rewriting it shorter must not leave stale parts behind.
#[test]
fn large_values_round_trip() {
    let server = TestServer::start();
    let mut c = server.client();
    let value: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let ok_reply: Value = redis::cmd("SET")
        .arg("big")
        .arg(&value)
        .query(&mut c)
        .unwrap();
    assert_eq!(ok_reply, Value::Okay);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "big"]), value);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "big"]), 100_000);
    assert_eq!(
        q::<Vec<u8>>(&mut c, &["GETRANGE", "big", "40000", "60000"]),
        &value[40_000..=60_000]
    );
    // APPEND across the part boundary, then a SETRANGE in the middle.
    let tail: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
    let len: i64 = redis::cmd("APPEND")
        .arg("big")
        .arg(&tail)
        .query(&mut c)
        .unwrap();
    assert_eq!(len, 150_000);
    let mut expected = value.clone();
    expected.extend_from_slice(&tail);
    let patch = vec![b'#'; 10_000];
    let len: i64 = redis::cmd("SETRANGE")
        .arg("big")
        .arg(95_000)
        .arg(&patch)
        .query(&mut c)
        .unwrap();
    assert_eq!(len, 150_000);
    expected[95_000..105_000].copy_from_slice(&patch);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "big"]), expected);
    let got: Vec<Option<Vec<u8>>> = q(&mut c, &["MGET", "big", "nothing"]);
    assert_eq!(got, [Some(expected.clone()), None]);
    // RENAME moves every part.
    ok(raw_value(&mut c, &["RENAME", "big", "moved"]));
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "moved"]), expected);
    // Shorter, then longer again: no stale part may reappear.
    ok(raw_value(&mut c, &["SET", "moved", "short"]));
    assert_eq!(q::<String>(&mut c, &["GET", "moved"]), "short");
    let longer = vec![b'z'; 30_000];
    let _: Value = redis::cmd("SET")
        .arg("moved")
        .arg(&longer)
        .query(&mut c)
        .unwrap();
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "moved"]), longer);
    assert_eq!(q::<i64>(&mut c, &["DEL", "moved"]), 1);
    assert_eq!(q::<Option<Vec<u8>>>(&mut c, &["GET", "moved"]), None);
    // A value of a few MiB.
    let huge: Vec<u8> = (0..3_000_000u32).map(|i| (i % 241) as u8).collect();
    let _: Value = redis::cmd("SET")
        .arg("huge")
        .arg(&huge)
        .query(&mut c)
        .unwrap();
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "huge"]), huge);
}

// ---------------------------------------------------------------------------------------
// keys

#[test]
fn del_unlink_exists_type() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["MSET", "a", "1", "b", "2", "c", "3"]));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "b", "missing", "a"]), 3);
    assert_eq!(q::<String>(&mut c, &["TYPE", "a"]), "string");
    assert_eq!(q::<String>(&mut c, &["TYPE", "missing"]), "none");
    assert_eq!(q::<i64>(&mut c, &["DEL", "a", "missing"]), 1);
    assert_eq!(q::<i64>(&mut c, &["DEL", "a"]), 0);
    assert_eq!(q::<i64>(&mut c, &["UNLINK", "b", "c", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "b", "c"]), 0);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    assert_eq!(
        err(&mut c, &["DEL"]),
        "ERR wrong number of arguments for 'del' command"
    );
}

#[test]
fn keys_with_patterns() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(
        &mut c,
        &[
            "MSET", "user:1", "a", "user:2", "b", "user:10", "c", "order:1", "d", "hello", "e",
            "hallo", "f", "hxllo", "g",
        ],
    ));
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(
        sorted(q(&mut c, &["KEYS", "user:*"])),
        ["user:1", "user:10", "user:2"]
    );
    assert_eq!(sorted(q(&mut c, &["KEYS", "user:?"])), ["user:1", "user:2"]);
    assert_eq!(sorted(q(&mut c, &["KEYS", "h[ae]llo"])), ["hallo", "hello"]);
    assert_eq!(sorted(q(&mut c, &["KEYS", "h[^e]llo"])), ["hallo", "hxllo"]);
    assert_eq!(sorted(q(&mut c, &["KEYS", "*1"])), ["order:1", "user:1"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]).len(), 7);
    assert!(q::<Vec<String>>(&mut c, &["KEYS", "nothing*"]).is_empty());
}

/// Inserts `n` keys `key:0` … through MSET batches.
fn insert_keys(c: &mut redis::Connection, n: usize) -> BTreeSet<String> {
    let names: Vec<String> = (0..n).map(|i| format!("key:{i}")).collect();
    for chunk in names.chunks(100) {
        let mut cmd = redis::cmd("MSET");
        for name in chunk {
            cmd.arg(name).arg("v");
        }
        let _: () = cmd.query(c).unwrap();
    }
    names.into_iter().collect()
}

/// Runs a SCAN to completion; every key it returned, in order (duplicates kept).
fn scan_all(c: &mut redis::Connection, extra: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    for _ in 0..100_000 {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(extra);
        let (next, keys): (String, Vec<String>) = q(c, &args);
        seen.extend(keys);
        if next == "0" {
            return seen;
        }
        cursor = next;
    }
    panic!("SCAN {extra:?} did not finish");
}

#[test]
fn scan_returns_every_key_exactly_once() {
    let server = TestServer::start();
    let mut c = server.client();
    let all = insert_keys(&mut c, 1000);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1000);

    for extra in [
        &[][..],
        &["COUNT", "7"],
        &["COUNT", "100"],
        &["COUNT", "5000"],
    ] {
        let seen = scan_all(&mut c, extra);
        let unique: BTreeSet<String> = seen.iter().cloned().collect();
        assert_eq!(
            unique.len(),
            seen.len(),
            "SCAN {extra:?} returned a key twice"
        );
        assert_eq!(unique, all, "SCAN {extra:?} missed keys");
    }
    let seen = scan_all(&mut c, &["MATCH", "key:1*", "COUNT", "20"]);
    let unique: BTreeSet<String> = seen.iter().cloned().collect();
    let expected: BTreeSet<String> = all
        .iter()
        .filter(|k| k.starts_with("key:1"))
        .cloned()
        .collect();
    assert_eq!(unique.len(), seen.len(), "SCAN MATCH returned a key twice");
    assert_eq!(unique, expected);
    assert_eq!(
        scan_all(&mut c, &["TYPE", "string", "COUNT", "50"]).len(),
        1000
    );
    assert!(scan_all(&mut c, &["TYPE", "hash", "COUNT", "50"]).is_empty());
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT", "0"]), SYNTAX);
    assert_eq!(err(&mut c, &["SCAN", "0", "COUNT"]), SYNTAX);
    assert_eq!(err(&mut c, &["SCAN", "x"]), "ERR invalid cursor");

    // Keys present for the whole iteration are returned even while others are added and
    // removed between calls.
    let mut cursor = "0".to_string();
    let mut seen = HashSet::new();
    let mut round = 0;
    loop {
        let (next, keys): (String, Vec<String>) = q(&mut c, &["SCAN", &cursor, "COUNT", "25"]);
        seen.extend(keys);
        round += 1;
        let extra = format!("extra:{round}");
        ok(raw_value(&mut c, &["SET", &extra, "x"]));
        if round % 2 == 0 {
            let _: i64 = q(&mut c, &["DEL", &format!("extra:{}", round - 1)]);
        }
        if next == "0" {
            break;
        }
        cursor = next;
    }
    for key in &all {
        assert!(
            seen.contains(key),
            "{key} missed while the keyspace changed"
        );
    }
}

#[test]
fn rename_and_renamenx() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["SET", "a", "1", "EX", "100"]));
    ok(raw_value(&mut c, &["RENAME", "a", "b"]));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "a"]), None);
    assert_eq!(q::<String>(&mut c, &["GET", "b"]), "1");
    let ttl: i64 = q(&mut c, &["TTL", "b"]);
    assert!(
        (99..=100).contains(&ttl),
        "the TTL moves with the key: {ttl}"
    );
    assert_eq!(err(&mut c, &["RENAME", "missing", "x"]), "ERR no such key");
    assert_eq!(
        err(&mut c, &["RENAMENX", "missing", "x"]),
        "ERR no such key"
    );
    ok(raw_value(&mut c, &["SET", "c", "3"]));
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "b", "c"]), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "c"]), "3");
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", "b", "d"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "b"]), 0);
    // RENAME replaces the target, and the target's TTL goes with it.
    ok(raw_value(&mut c, &["SET", "c", "3", "EX", "500"]));
    ok(raw_value(&mut c, &["RENAME", "d", "c"]));
    assert_eq!(q::<String>(&mut c, &["GET", "c"]), "1");
    let ttl: i64 = q(&mut c, &["TTL", "c"]);
    assert!((98..=100).contains(&ttl), "TTL after replacing: {ttl}");
    ok(raw_value(&mut c, &["RENAME", "c", "c"]));
    assert_eq!(q::<String>(&mut c, &["GET", "c"]), "1");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
    // The old key's deadline does not linger: a new key of that name has no TTL and does
    // not expire.
    ok(raw_value(&mut c, &["SET", "e", "v", "PX", "150"]));
    ok(raw_value(&mut c, &["RENAME", "e", "f"]));
    ok(raw_value(&mut c, &["SET", "e", "new"]));
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        q::<Option<String>>(&mut c, &["GET", "e"]).as_deref(),
        Some("new")
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "f"]), None);
}

#[test]
fn expire_ttl_persist() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["SET", "k", "v"]));
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "missing"]), -2);
    assert_eq!(q::<i64>(&mut c, &["PTTL", "missing"]), -2);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100"]), 1);
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "TTL {ttl}");
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "k", "5000"]), 1);
    let pttl: i64 = q(&mut c, &["PTTL", "k"]);
    assert!((4_000..=5_000).contains(&pttl), "PTTL {pttl}");
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "k"]), 0);
    assert_eq!(q::<i64>(&mut c, &["PERSIST", "missing"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "missing", "10"]), 0);
    assert_eq!(err(&mut c, &["EXPIRE", "k", "ten"]), NOT_INTEGER);
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "9223372036854775807"]),
        "ERR invalid expire time in 'expire' command"
    );
    assert_eq!(
        err(&mut c, &["EXPIRE", "k", "10", "YY"]),
        "ERR Unsupported option YY"
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    // NX / XX / GT / LT.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "XX"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "100", "NX"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "200", "NX"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "50", "GT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "200", "GT"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "300", "LT"]), 0);
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "150", "LT"]), 1);
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((149..=150).contains(&ttl), "TTL {ttl}");
    // A deadline in the past deletes the key.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "k", "0"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    ok(raw_value(&mut c, &["SET", "k", "v"]));
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "k", "-1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    // Writes that replace the value clear the TTL; those that modify it keep it.
    ok(raw_value(&mut c, &["SET", "k", "v", "EX", "100"]));
    assert_eq!(q::<i64>(&mut c, &["APPEND", "k", "w"]), 2);
    assert!(q::<i64>(&mut c, &["TTL", "k"]) > 0);
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "k", "0", "x"]), 2);
    assert!(q::<i64>(&mut c, &["TTL", "k"]) > 0);
    ok(raw_value(&mut c, &["SET", "k", "v"]));
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
}

#[test]
fn getex_expiretime_touch() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["SET", "k", "v"]));
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETEX", "k"]),
        Some("v".into())
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETEX", "k", "EX", "100"]),
        Some("v".into())
    );
    let ttl: i64 = q(&mut c, &["TTL", "k"]);
    assert!((99..=100).contains(&ttl), "TTL {ttl}");
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETEX", "k", "persist"]),
        Some("v".into())
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -1);
    // Absolute deadlines read back as they were given.
    q::<Option<String>>(&mut c, &["GETEX", "k", "PXAT", "4102444800123"]);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "k"]), 4_102_444_800_123);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "k"]), 4_102_444_800);
    assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", "missing"]), -2);
    // The latest deadline there is, rounded as Redis 7.0.15 answers it.
    ok(raw_value(&mut c, &["SET", "late", "v"]));
    assert_eq!(
        q::<i64>(&mut c, &["PEXPIREAT", "late", "9223372036854775807"]),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["EXPIRETIME", "late"]),
        9_223_372_036_854_776
    );
    assert_eq!(
        q::<i64>(&mut c, &["PEXPIRETIME", "late"]),
        9_223_372_036_854_775_807
    );
    ok(raw_value(&mut c, &["SET", "plain", "v"]));
    assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", "plain"]), -1);
    // Errors, in Redis's order: the options' syntax, then the key, then the amount.
    assert_eq!(
        err(&mut c, &["GETEX", "k", "EX", "1", "PX", "1"]),
        "ERR syntax error"
    );
    assert_eq!(err(&mut c, &["GETEX", "k", "KEEPTTL"]), "ERR syntax error");
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETEX", "missing", "EX", "x"]),
        None
    );
    assert_eq!(err(&mut c, &["GETEX", "k", "EX", "x"]), NOT_INTEGER);
    assert_eq!(
        err(&mut c, &["GETEX", "k", "EX", "0"]),
        "ERR invalid expire time in 'getex' command"
    );
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "list", "a"]), 1);
    assert!(err(&mut c, &["GETEX", "list"]).starts_with("WRONGTYPE"));
    // A deadline already past deletes the key; the reply is still its value.
    assert_eq!(
        q::<Option<String>>(&mut c, &["GETEX", "k", "EXAT", "1"]),
        Some("v".into())
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    // TOUCH counts the keys that exist, each time it is named.
    assert_eq!(
        q::<i64>(&mut c, &["TOUCH", "plain", "plain", "list", "k"]),
        3
    );
}

/// A key past its deadline is gone for every command that reads it, at once, whether or not
/// the active expiry got to it yet.
#[test]
fn lazy_expiry() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["SET", "live", "v"]));
    let sent = Instant::now();
    ok(raw_value(&mut c, &["SET", "k", "v", "PX", "50"]));
    let acked = Instant::now();
    // Every GET sent after the deadline must find the key gone; the first of them goes out
    // within a few ms of it, before the active expiry (every 100 ms) is likely to have run.
    loop {
        let asked = acked.elapsed();
        let got: Option<String> = q(&mut c, &["GET", "k"]);
        if got.is_none() {
            let elapsed = sent.elapsed();
            assert!(
                elapsed >= Duration::from_millis(49),
                "expired early, {elapsed:?} after SET PX 50"
            );
            break;
        }
        assert!(
            asked < Duration::from_millis(52),
            "a GET sent {asked:?} after SET PX 50 was acknowledged still found the key"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    assert_eq!(q::<i64>(&mut c, &["TTL", "k"]), -2);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "k"]), 0);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]), ["live"]);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
    // An expired key counts as absent for NX, and its old TTL does not come back.
    ok(raw_value(&mut c, &["SET", "old", "v", "PX", "30"]));
    std::thread::sleep(Duration::from_millis(60));
    ok(raw_value(&mut c, &["SET", "old", "w", "NX"]));
    assert_eq!(q::<i64>(&mut c, &["TTL", "old"]), -1);
    ok(raw_value(&mut c, &["SET", "cnt", "41", "PX", "30"]));
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(q::<i64>(&mut c, &["INCR", "cnt"]), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", "cnt"]), -1);
}

/// Keys with a TTL are removed by the server within about a second of their deadline,
/// without anyone reading them.
#[test]
fn active_expiry() {
    let server = TestServer::start();
    let mut c = server.client();
    for i in 0..10 {
        ok(raw_value(&mut c, &["SET", &format!("keep:{i}"), "v"]));
    }
    let set_at = Instant::now();
    for db in ["0", "3"] {
        let _: () = q(&mut c, &["SELECT", db]);
        for i in 0..300 {
            ok(raw_value(
                &mut c,
                &["SET", &format!("short:{i}"), "v", "PX", "1000"],
            ));
        }
    }
    let _: () = q(&mut c, &["SELECT", "0"]);
    let set_end = Instant::now();
    if set_at.elapsed() < Duration::from_millis(900) {
        assert_eq!(stored_rows(&server, "kv_keys"), 610);
        assert_eq!(stored_rows(&server, "kv_expiry"), 600);
    }
    // Gone within a second of the deadline.
    let limit = (set_end + Duration::from_millis(2000)).saturating_duration_since(Instant::now());
    let gone = eventually(limit, || {
        stored_rows(&server, "kv_keys") == 10 && stored_rows(&server, "kv_expiry") == 0
    });
    assert!(
        gone,
        "expired keys still stored: {} key rows, {} deadline rows",
        stored_rows(&server, "kv_keys"),
        stored_rows(&server, "kv_expiry")
    );
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 10);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "short:*"]).len(), 0);
    let info: String = q(&mut c, &["INFO", "keyspace"]);
    assert!(info.contains("db0:keys=10,expires=0"), "{info}");
    assert!(!info.contains("db3:"), "{info}");
}

#[test]
fn select_isolates_databases() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["SET", "k", "zero"]));
    ok(raw_value(&mut c, &["SELECT", "1"]));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "k"]), None);
    ok(raw_value(&mut c, &["SET", "k", "one"]));
    ok(raw_value(&mut c, &["SET", "only1", "x"]));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]).len(), 2);
    ok(raw_value(&mut c, &["SELECT", "15"]));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    ok(raw_value(&mut c, &["SELECT", "0"]));
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "zero");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "only1"]), 0);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
    // Another connection starts in database 0 whatever this one selected.
    ok(raw_value(&mut c, &["SELECT", "1"]));
    let mut other = server.client();
    assert_eq!(q::<String>(&mut other, &["GET", "k"]), "zero");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "one");
    assert_eq!(
        err(&mut c, &["SELECT", "16"]),
        "ERR DB index is out of range"
    );
    assert_eq!(
        err(&mut c, &["SELECT", "-1"]),
        "ERR DB index is out of range"
    );
    assert_eq!(err(&mut c, &["SELECT", "one"]), NOT_INTEGER);
    // A refused SELECT leaves the selection alone.
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "one");
}

#[test]
fn flushdb_flushall_dbsize() {
    let server = TestServer::start();
    let mut c = server.client();
    insert_keys(&mut c, 150);
    ok(raw_value(&mut c, &["SET", "t", "v", "EX", "100"]));
    ok(raw_value(&mut c, &["SELECT", "2"]));
    ok(raw_value(&mut c, &["MSET", "a", "1", "b", "2"]));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 2);
    ok(raw_value(&mut c, &["FLUSHDB"]));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    ok(raw_value(&mut c, &["SELECT", "0"]));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 151);
    ok(raw_value(&mut c, &["SELECT", "2"]));
    ok(raw_value(&mut c, &["SET", "a", "1"]));
    ok(raw_value(&mut c, &["FLUSHALL"]));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    ok(raw_value(&mut c, &["SELECT", "0"]));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 0);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "key:7"]), None);
    // Nothing is left stored once the flushed databases are freed, deadlines included.
    assert!(
        all_keys_freed(&server),
        "a flushed database's rows were left"
    );
    ok(raw_value(&mut c, &["FLUSHALL", "ASYNC"]));
    ok(raw_value(&mut c, &["FLUSHDB", "SYNC"]));
    assert_eq!(err(&mut c, &["FLUSHDB", "NOW"]), SYNTAX);
}

// ---------------------------------------------------------------------------------------
// DUMP and RESTORE

fn dump(c: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query(c).expect("DUMP")
}

fn restore(
    c: &mut redis::Connection,
    key: &str,
    ttl: i64,
    payload: &[u8],
    options: &[&str],
) -> Result<Value, String> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(ttl)
        .arg(payload)
        .arg(options)
        .query(c)
        .map_err(|e| support::error_text(&e))
}

/// A key's type and value as text, its unordered collections sorted: equal for equal
/// values on any server.
fn contents(c: &mut redis::Connection, key: &str) -> String {
    let kind: String = q(c, &["TYPE", key]);
    let mut items: Vec<String> = match kind.as_str() {
        "string" => vec![q(c, &["GET", key])],
        "list" => q(c, &["LRANGE", key, "0", "-1"]),
        "set" => q(c, &["SMEMBERS", key]),
        "hash" => q::<Vec<(String, String)>>(c, &["HGETALL", key])
            .into_iter()
            .map(|(field, value)| format!("{field}={value}"))
            .collect(),
        "zset" => q(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        "stream" => stream_contents(c, key),
        other => panic!("{key} is a {other}"),
    };
    if matches!(kind.as_str(), "set" | "hash") {
        items.sort();
    }
    format!("{kind} {items:?}")
}

/// A stream's entries read forwards and backwards (Redis walks its nodes backwards by the
/// entries' back lengths), its counts and its groups' (XINFO), and the pending entries of
/// its group `g` without their idle times.
fn stream_contents(c: &mut redis::Connection, key: &str) -> Vec<String> {
    let entries: Vec<(String, Vec<String>)> = q(c, &["XRANGE", key, "-", "+"]);
    let mut backwards: Vec<(String, Vec<String>)> = q(c, &["XREVRANGE", key, "+", "-"]);
    backwards.reverse();
    assert_eq!(backwards, entries, "{key} read backwards");
    let mut items: Vec<String> = entries.iter().map(|e| format!("{e:?}")).collect();
    let info: HashMap<String, Value> = q(c, &["XINFO", "STREAM", key]);
    for count in ["entries-added", "max-deleted-entry-id", "last-generated-id"] {
        items.push(format!("{count} {:?}", info.get(count)));
    }
    let groups: Vec<HashMap<String, Value>> = q(c, &["XINFO", "GROUPS", key]);
    for group in groups {
        let [name, last, read, lag] =
            ["name", "last-delivered-id", "entries-read", "lag"].map(|f| group.get(f));
        items.push(format!("group {name:?} {last:?} read {read:?} lag {lag:?}"));
    }
    if let Ok(pending) = redis::cmd("XPENDING")
        .arg(&[key, "g", "-", "+", "1000"])
        .query::<Vec<(String, String, i64, i64)>>(c)
    {
        items.extend(
            pending
                .into_iter()
                .map(|(id, consumer, _, n)| format!("{id} {consumer} {n}")),
        );
    }
    items
}

/// Keys of every kind, each in the encodings Redis 7.0 gives small and large values:
/// integer, short, compressible and long strings; lists of one and of several nodes; sets
/// of integers, of strings and large ones; hashes small, large and with a long value;
/// sorted sets small (with infinite scores) and large.
fn fill_every_encoding(c: &mut redis::Connection) -> Vec<&'static str> {
    let long: String = (0..20_000)
        .map(|i| char::from(b'!' + (i * 7 % 90) as u8))
        .collect();
    ok(raw_value(c, &["SET", "s:int", "12345"]));
    ok(raw_value(c, &["SET", "s:short", "hello"]));
    ok(raw_value(c, &["SET", "s:lzf", &"ab".repeat(500)]));
    ok(raw_value(c, &["SET", "s:long", &long]));
    q::<i64>(c, &["RPUSH", "l:small", "a", "b", "1", "-20", "70000", ""]);
    q::<i64>(
        c,
        &["SADD", "set:int", "1", "2", "300", "-70000", "5000000000"],
    );
    q::<i64>(c, &["SADD", "set:str", "x", "y", "z"]);
    q::<i64>(
        c,
        &["HSET", "h:small", "a", "1", "b", "hello", "c", "-300000"],
    );
    q::<i64>(c, &["HSET", "h:longvalue", "f", &long[..100]]);
    q::<i64>(
        c,
        &[
            "ZADD", "z:small", "1.5", "x", "2", "y", "-inf", "z", "+inf", "w",
        ],
    );
    for i in 0..1_000 {
        let (i, element) = (i.to_string(), format!("element {i} {}", &long[..i % 40]));
        q::<i64>(c, &["RPUSH", "l:nodes", &element]);
        q::<i64>(c, &["SADD", "set:big", &format!("m{i}")]);
        q::<i64>(c, &["HSET", "h:big", &format!("f{i}"), &i]);
        q::<i64>(c, &["ZADD", "z:big", &format!("{i}.25"), &format!("m{i}")]);
    }
    q::<i64>(c, &["RPUSH", "l:nodes", &long]);
    // A stream of several nodes, entries of the master's fields and of others, deleted
    // ones (its last among them), a group with pending entries of two consumers and a
    // consumer with none, and a second group that read nothing.
    for i in 1..=300 {
        let id = format!("{}-{}", 1_000 + i / 7, i % 7);
        let value = &long[..i % 300];
        let mut add = vec!["XADD", "st", &id, "a", value, "b", "2"];
        if i % 5 == 0 {
            add = vec!["XADD", "st", &id, "other", value];
        }
        q::<String>(c, &add);
    }
    for id in ["1001-3", "1010-0", "1042-6"] {
        q::<i64>(c, &["XDEL", "st", id]);
    }
    ok(raw_value(c, &["XGROUP", "CREATE", "st", "g", "0"]));
    ok(raw_value(c, &["XGROUP", "CREATE", "st", "idle", "$"]));
    raw_value(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "5",
            "STREAMS",
            "st",
            ">",
        ],
    );
    raw_value(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "bob",
            "COUNT",
            "3",
            "STREAMS",
            "st",
            ">",
        ],
    );
    q::<i64>(c, &["XGROUP", "CREATECONSUMER", "st", "g", "carol"]);
    q::<i64>(c, &["XACK", "st", "g", "1000-2"]);
    // A stream whose counts a payload without them keeps (Redis derives them): nothing
    // deleted, its group's count of entries read following from its last delivered ID
    // (the last: it read all).
    for id in ["5-1", "5-2", "6-0"] {
        q::<String>(c, &["XADD", "st:plain", id, "f", id]);
    }
    ok(raw_value(c, &["XGROUP", "CREATE", "st:plain", "g", "0"]));
    let read_all = ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "st:plain", ">"];
    raw_value(c, &read_all);
    vec![
        "s:int",
        "s:short",
        "s:lzf",
        "s:long",
        "l:small",
        "l:nodes",
        "set:int",
        "set:str",
        "set:big",
        "h:small",
        "h:longvalue",
        "h:big",
        "z:small",
        "z:big",
        "st",
        "st:plain",
    ]
}

#[test]
fn dump_and_restore_carry_every_kind_and_its_deadline() {
    let server = TestServer::start();
    let mut c = server.client();
    let keys = fill_every_encoding(&mut c);
    for key in &keys {
        let payload = dump(&mut c, key).expect("the key exists");
        let copy = format!("copy:{key}");
        ok(restore(&mut c, &copy, 0, &payload, &[]).unwrap());
        assert_eq!(contents(&mut c, &copy), contents(&mut c, key), "{key}");
        assert_eq!(q::<i64>(&mut c, &["TTL", &copy]), -1);
    }
    // A stream without deletions is written without counts (type 15; `st`, with them,
    // below).
    assert_eq!(dump(&mut c, "st:plain").expect("a stream")[0], 15);
    let payload = dump(&mut c, "h:small").unwrap();
    assert_eq!(dump(&mut c, "missing"), None);

    // BUSYKEY unless REPLACE; REPLACE replaces a key of another kind.
    assert_eq!(
        restore(&mut c, "s:int", 0, &payload, &[]),
        Err("BUSYKEY Target key name already exists.".into())
    );
    ok(restore(&mut c, "s:int", 0, &payload, &["REPLACE"]).unwrap());
    assert_eq!(contents(&mut c, "s:int"), contents(&mut c, "h:small"));

    // A TTL in ms from now, or an absolute deadline; one already past leaves no key.
    ok(restore(&mut c, "ttl", 100_000, &payload, &[]).unwrap());
    let pttl: i64 = q(&mut c, &["PTTL", "ttl"]);
    assert!((90_000..=100_000).contains(&pttl), "{pttl}");
    ok(restore(&mut c, "past", 1, &payload, &["ABSTTL"]).unwrap());
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "past"]), 0);
    ok(restore(&mut c, "ttl", 1, &payload, &["REPLACE", "ABSTTL"]).unwrap());
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "ttl"]), 0);
    ok(restore(&mut c, "lru", 0, &payload, &["IDLETIME", "10"]).unwrap());
    ok(restore(&mut c, "lfu", 0, &payload, &["FREQ", "255"]).unwrap());

    // Redis's errors, in its order of checks.
    let refused = |c: &mut redis::Connection, ttl: i64, payload: &[u8], options: &[&str]| {
        restore(c, "new", ttl, payload, options).unwrap_err()
    };
    assert_eq!(
        refused(&mut c, -1, &payload, &[]),
        "ERR Invalid TTL value, must be >= 0"
    );
    assert_eq!(refused(&mut c, 0, &payload, &["NOPE"]), SYNTAX);
    assert_eq!(
        refused(&mut c, 0, &payload, &["FREQ", "1", "IDLETIME", "1"]),
        SYNTAX
    );
    assert_eq!(
        refused(&mut c, 0, &payload, &["IDLETIME", "-1"]),
        "ERR Invalid IDLETIME value, must be >= 0"
    );
    assert_eq!(
        refused(&mut c, 0, &payload, &["FREQ", "256"]),
        "ERR Invalid FREQ value, must be >= 0 and <= 255"
    );
    let mut damaged = payload.clone();
    damaged[3] ^= 0x20;
    assert_eq!(
        refused(&mut c, 0, &damaged, &[]),
        "ERR DUMP payload version or checksum are wrong"
    );
    assert_eq!(
        refused(&mut c, 0, b"short", &[]),
        "ERR DUMP payload version or checksum are wrong"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "new"]), 0);

    // A restored stream goes on where the original stood: its last ID (its last entry was
    // deleted), its group's last delivered ID and pending entries.
    let payload = dump(&mut c, "st").unwrap();
    ok(restore(&mut c, "st2", 0, &payload, &[]).unwrap());
    let too_small =
        "ERR The ID specified in XADD is equal or smaller than the target stream top item";
    assert_eq!(err(&mut c, &["XADD", "st2", "1042-6", "f", "v"]), too_small);
    let next = |c: &mut redis::Connection, key: &str| {
        raw_value(
            c,
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "dave",
                "COUNT",
                "1",
                "STREAMS",
                key,
                ">",
            ],
        )
    };
    let (ours, original) = (next(&mut c, "st2"), next(&mut c, "st"));
    assert_eq!(
        format!("{ours:?}").replace("st2", "st"),
        format!("{original:?}")
    );
    let summary = |c: &mut redis::Connection, key: &str| raw_value(c, &["XPENDING", key, "g"]);
    assert_eq!(summary(&mut c, "st2"), summary(&mut c, "st"));
    let groups = |c: &mut redis::Connection, key: &str| {
        format!("{:?}", raw_value(c, &["XINFO", "GROUPS", key]))
    };
    // A stream with deletions is written with its counts (type 19): the group at the last
    // ID, whose count is not known, stays unknown (type 15 would have let Redis derive
    // the count of entries added, 297).
    assert_eq!(payload[0], 19);
    assert_eq!(groups(&mut c, "st2"), groups(&mut c, "st"));
}

/// A server whose commands may write 1 MiB each (an eighth of `serve`'s 8 MiB): the tests
/// of values written over several commits need values an eighth as large, which take an
/// eighth of the time to build, send and check.
fn server_of_small_commits() -> TestServer {
    let server = TestServer::with(Options {
        ring_and_pool_bytes: 8 << 20,
        ..Options::default()
    });
    assert!(server.ks.database().max_commit_bytes() <= 1 << 20);
    server
}

/// Values of each kind past what one RESTORE piece writes (a quarter of the commit limit),
/// the list past the whole commit limit: each in the order DUMP reads it back, so that its
/// payload comes back byte for byte.
fn large_values(limit: usize) -> Vec<(&'static str, tailstore_rdb::Object)> {
    use tailstore_rdb::{Consumer, Group, Object, PendingEntry, Stream, StreamEntry, StreamId};
    let text = |i: usize, width: usize| format!("{i:0>width$}").into_bytes();
    let list: Vec<Vec<u8>> = (0..limit * 3 / 2 / 100).map(|i| text(i, 100)).collect();
    let count = limit / 2 / 100;
    let set: Vec<Vec<u8>> = (0..count).map(|i| text(i, 60)).collect();
    let hash = (0..count).map(|i| (text(i, 20), text(i, 60))).collect();
    let zset = (0..count).map(|i| (text(i, 60), i as f64 * 0.5)).collect();
    let id = |i: usize| StreamId {
        ms: 1_000 + i as u64 / 3,
        seq: i as u64 % 3,
    };
    let entries = (0..count)
        .map(|i| StreamEntry {
            id: id(i),
            fields: vec![b"f".to_vec(), text(i, 80)],
        })
        .collect();
    let pending = (0..count / 10)
        .map(|i| PendingEntry {
            id: id(i * 10),
            consumer: if i % 2 == 0 {
                b"alice".to_vec()
            } else {
                b"bob".to_vec()
            },
            delivered_at: 1_700_000_000_000 + i as i64,
            deliveries: 1 + i as u64 % 3,
        })
        .collect();
    let stream = Stream {
        entries,
        last_id: StreamId {
            ms: 1 << 40,
            seq: 9,
        },
        counts: None,
        groups: vec![Group {
            name: b"g".to_vec(),
            last_id: id(count - 1),
            entries_read: None,
            pending,
            consumers: vec![
                Consumer {
                    name: b"alice".to_vec(),
                    seen_at: 1_700_000_000_000,
                },
                Consumer {
                    name: b"bob".to_vec(),
                    seen_at: 1_700_000_000_001,
                },
            ],
        }],
    };
    // One group whose pending entries alone are past the commit limit (every entry
    // delivered and none acknowledged, as after a consumer read it all and died).
    let many = limit / 20;
    let delivered = Stream {
        entries: (0..many)
            .map(|i| StreamEntry {
                id: id(i),
                fields: vec![b"f".to_vec(), b"v".to_vec()],
            })
            .collect(),
        last_id: id(many - 1),
        counts: None,
        groups: vec![Group {
            name: b"readers".to_vec(),
            last_id: id(many - 1),
            entries_read: None,
            pending: (0..many)
                .map(|i| PendingEntry {
                    id: id(i),
                    consumer: b"carol".to_vec(),
                    delivered_at: 1_700_000_000_000,
                    deliveries: 1,
                })
                .collect(),
            consumers: vec![Consumer {
                name: b"carol".to_vec(),
                seen_at: 1_700_000_000_000,
            }],
        }],
    };
    vec![
        ("list", Object::List(list)),
        ("set", Object::Set(set)),
        ("hash", Object::Hash(hash)),
        ("zset", Object::ZSet(zset)),
        ("stream", Object::Stream(stream)),
        ("delivered", Object::Stream(delivered)),
    ]
}

/// The lazy free run over and over on a thread of its own until stopped: whatever it may
/// take, it takes at once.
struct LazyFree {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl LazyFree {
    fn run(server: &TestServer) -> LazyFree {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (ks, stop) = (server.ks.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                ks.free_garbage().expect("the lazy free");
            }
        });
        LazyFree { done, thread }
    }

    fn stop(self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().expect("the freeing thread");
    }
}

/// Commands that remove more of a collection than one commit may change rebuild it from
/// what they keep (decision 191): each answers as Redis does and leaves exactly the
/// elements it keeps (XTRIM's stream its consumer group too), with the lazy free running
/// all the while. Before, each was refused with "transaction too large". The kept elements fit one piece in some cases and take
/// several in the last LTRIM's.
#[test]
fn removals_larger_than_a_commit_rebuild_what_they_keep() {
    let server = server_of_small_commits();
    let mut c = server.client();
    let count = server.ks.database().max_commit_bytes() * 3 / 100;
    let all: Vec<String> = (0..count).map(|i| format!("{i:0>100}")).collect();
    let fill = |c: &mut redis::Connection, command: &str, key: &str| {
        for chunk in all.chunks(2000) {
            let mut cmd = redis::cmd(command);
            cmd.arg(key);
            for element in chunk {
                match command {
                    "ZADD" => {
                        let score = element.trim_start_matches('0').parse::<f64>();
                        cmd.arg(score.unwrap_or(0.0));
                    }
                    // A hash's fields hold themselves.
                    "HSET" => {
                        cmd.arg(element);
                    }
                    _ => {}
                }
                cmd.arg(element);
            }
            cmd.query::<i64>(c).expect(command);
        }
    };
    let range =
        |c: &mut redis::Connection, key: &str| q::<Vec<String>>(c, &["LRANGE", key, "0", "-1"]);
    let freer = LazyFree::run(&server);

    fill(&mut c, "RPUSH", "trimmed");
    ok(q(&mut c, &["LTRIM", "trimmed", "100", "199"]));
    assert_eq!(range(&mut c, "trimmed"), all[100..200]);
    fill(&mut c, "RPUSH", "left");
    let n = (count - 5).to_string();
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LPOP", "left", &n]),
        all[..count - 5]
    );
    assert_eq!(range(&mut c, "left"), all[count - 5..]);
    fill(&mut c, "RPUSH", "right");
    let popped: Vec<String> = q(&mut c, &["RPOP", "right", &n]);
    assert!(popped.iter().eq(all[5..].iter().rev()), "RPOP's order");
    assert_eq!(range(&mut c, "right"), all[..5]);
    fill(&mut c, "SADD", "set");
    let mut popped: Vec<String> = q(&mut c, &["SPOP", "set", &n]);
    let mut left: Vec<String> = q(&mut c, &["SMEMBERS", "set"]);
    assert_eq!((popped.len(), left.len()), (count - 5, 5));
    popped.append(&mut left);
    popped.sort();
    assert_eq!(popped, all, "SPOP's members and the ones left are the set");
    fill(&mut c, "ZADD", "zset");
    let last = (count - 4).to_string();
    assert_eq!(
        q::<usize>(&mut c, &["ZREMRANGEBYRANK", "zset", "0", &last]),
        count - 3
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "zset", "0", "-1"]),
        all[count - 3..]
    );
    fill(&mut c, "ZADD", "popped");
    let popped: Vec<String> = q(&mut c, &["ZPOPMIN", "popped", &n]);
    assert_eq!(popped.len(), 2 * (count - 5), "members and scores");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "popped", "0", "-1"]),
        all[count - 5..]
    );

    // A splice past the limit (LREM of every other element, LINSERT in the middle of a
    // list whose every element differs, which renumbers half of it): the list is written
    // afresh under a new owner.
    fill(&mut c, "RPUSH", "spliced");
    let mut marked = redis::pipe();
    for at in (0..count).step_by(2) {
        marked.cmd("LSET").arg("spliced").arg(at).arg("x").ignore();
    }
    marked.query::<()>(&mut c).expect("LSET");
    let odd: Vec<String> = all.iter().skip(1).step_by(2).cloned().collect();
    assert_eq!(
        q::<usize>(&mut c, &["LREM", "spliced", "0", "x"]),
        count.div_ceil(2)
    );
    assert_eq!(range(&mut c, "spliced"), odd);
    fill(&mut c, "RPUSH", "inserted");
    let middle = &all[count / 2];
    let len: usize = q(&mut c, &["LINSERT", "inserted", "BEFORE", middle, "new"]);
    assert_eq!(len, count + 1);
    let mut expected = all[..count / 2].to_vec();
    expected.push("new".to_string());
    expected.extend_from_slice(&all[count / 2..]);
    assert_eq!(range(&mut c, "inserted"), expected);

    // Removals of named elements, one absent and one named twice among them, counted.
    let remove = |c: &mut redis::Connection, command: &str, key: &str, names: &[String]| {
        let mut cmd = redis::cmd(command);
        cmd.arg(key).arg(names).arg("absent").arg(&names[0]);
        cmd.query::<usize>(c).expect(command)
    };
    fill(&mut c, "SADD", "members");
    assert_eq!(remove(&mut c, "SREM", "members", &all[5..]), count - 5);
    let mut left: Vec<String> = q(&mut c, &["SMEMBERS", "members"]);
    left.sort();
    assert_eq!(left, all[..5]);
    fill(&mut c, "HSET", "hash");
    assert_eq!(remove(&mut c, "HDEL", "hash", &all[..count - 5]), count - 5);
    assert_eq!(q::<Vec<String>>(&mut c, &["HKEYS", "hash"]).len(), 5);
    fill(&mut c, "ZADD", "named");
    assert_eq!(remove(&mut c, "ZREM", "named", &all[5..]), count - 5);
    assert_eq!(
        q::<Vec<String>>(&mut c, &["ZRANGE", "named", "0", "-1"]),
        all[..5]
    );

    // A stream with a consumer group: the group, its consumer and its pending entries
    // move with the entries kept (the trimmed ones stay pending, as in Redis).
    let mut adds = redis::pipe();
    for (i, element) in all.iter().enumerate() {
        adds.cmd("XADD")
            .arg("stream")
            .arg(format!("{}-0", i + 1))
            .arg("f")
            .arg(element);
    }
    adds.query::<()>(&mut c).expect("XADD");
    ok(q(&mut c, &["XGROUP", "CREATE", "stream", "g", "0"]));
    q::<Value>(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "3",
            "STREAMS",
            "stream",
            ">",
        ],
    );
    assert_eq!(
        q::<usize>(&mut c, &["XTRIM", "stream", "MAXLEN", "5"]),
        count - 5
    );
    let entries: Vec<(String, Vec<String>)> = q(&mut c, &["XRANGE", "stream", "-", "+"]);
    let ids: Vec<String> = entries.into_iter().map(|(id, _)| id).collect();
    let kept: Vec<String> = (count - 4..=count).map(|i| format!("{i}-0")).collect();
    assert_eq!(ids, kept);
    let pending: (usize, String, String, Value) = q(&mut c, &["XPENDING", "stream", "g"]);
    assert_eq!((pending.0, pending.1.as_str()), (3, "1-0"));
    // XDEL of all but the first and last entries, one ID absent and one named twice.
    let mut deleting = redis::pipe();
    for (i, element) in all.iter().enumerate() {
        deleting
            .cmd("XADD")
            .arg("deleted")
            .arg(format!("{}-0", i + 1))
            .arg("f")
            .arg(element);
    }
    deleting.query::<()>(&mut c).expect("XADD");
    let mut xdel = redis::cmd("XDEL");
    xdel.arg("deleted").arg("999999999-0").arg("2-0");
    for i in 2..count {
        xdel.arg(format!("{i}-0"));
    }
    assert_eq!(xdel.query::<usize>(&mut c).expect("XDEL"), count - 2);
    let entries: Vec<(String, Vec<String>)> = q(&mut c, &["XRANGE", "deleted", "-", "+"]);
    let ids: Vec<String> = entries.into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["1-0".to_string(), format!("{count}-0")]);
    assert_eq!(q::<usize>(&mut c, &["XLEN", "deleted"]), 2);
    let info: Vec<Value> = q(&mut c, &["XINFO", "STREAM", "deleted"]);
    let max_deleted = info
        .iter()
        .position(|v| *v == Value::BulkString(b"max-deleted-entry-id".to_vec()))
        .map(|at| info[at + 1].clone());
    assert_eq!(
        max_deleted,
        Some(Value::BulkString(format!("{}-0", count - 1).into_bytes()))
    );

    // A third removed (past the limit), two thirds kept: copied over several pieces.
    fill(&mut c, "RPUSH", "long");
    let end = (count * 2 / 3).to_string();
    ok(q(&mut c, &["LTRIM", "long", "0", &end]));
    assert_eq!(range(&mut c, "long"), all[..=count * 2 / 3]);
    freer.stop();
    assert_eq!(
        range(&mut c, "long"),
        all[..=count * 2 / 3],
        "after the lazy free"
    );
}

/// RESTORE writes a large value over transactions of its own (under an owner no key points
/// to, queued for the lazy free and kept from it until the key is created), so a list past
/// the commit limit is restored whole; the lazy free, run all the while, takes nothing of
/// them; and a RESTORE that fails after some of its pieces leaves nothing behind.
#[test]
fn restore_builds_values_past_one_commit_over_several() {
    let server = server_of_small_commits();
    let mut c = server.client();
    let limit = server.ks.database().max_commit_bytes();
    let freer = LazyFree::run(&server);
    for (key, object) in large_values(limit) {
        let payload = tailstore_rdb::dump(&object);
        ok(restore(&mut c, key, 0, &payload, &[]).unwrap());
        assert!(
            dump(&mut c, key).unwrap() == payload,
            "{key} does not read back as it was restored"
        );
    }
    assert_eq!(
        q::<i64>(&mut c, &["LLEN", "list"]) as usize,
        limit * 3 / 2 / 100
    );
    freer.stop();

    // Pieces written, then one element past the commit limit: refused, and what was
    // written is freed.
    let before = stored_rows(&server, "kv_parts");
    let mut items: Vec<Vec<u8>> = (0..limit / 100)
        .map(|i| format!("{i:0>100}").into_bytes())
        .collect();
    items.push(vec![b'x'; limit + 1]);
    let payload = tailstore_rdb::dump(&tailstore_rdb::Object::List(items));
    let refused = restore(&mut c, "failed", 0, &payload, &[]).unwrap_err();
    assert!(refused.contains("transaction too large"), "{refused}");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "failed"]), 0);
    assert!(
        eventually(Duration::from_secs(30), || stored_rows(&server, "kv_parts")
            == before),
        "{} part rows, {before} before the failed RESTORE",
        stored_rows(&server, "kv_parts")
    );
}

/// COPY of keys larger than one commit: written over transactions of their own, as a
/// large RESTORE is (the lazy free running all the while takes nothing of them), each
/// copy the same value as its source, in another database too; a string rewritten while
/// it is copied is copied as it was at one moment, never half old and half new.
#[test]
fn copy_writes_keys_past_one_commit_over_several() {
    let server = server_of_small_commits();
    let mut c = server.client();
    let limit = server.ks.database().max_commit_bytes();
    let freer = LazyFree::run(&server);
    for (key, object) in large_values(limit) {
        let payload = tailstore_rdb::dump(&object);
        ok(restore(&mut c, key, 0, &payload, &[]).unwrap());
        let copy = format!("{key}:copy");
        assert_eq!(q::<i64>(&mut c, &["COPY", key, &copy]), 1, "{key}");
        assert!(dump(&mut c, &copy).unwrap() == payload, "{copy} differs");
        assert_eq!(
            q::<i64>(&mut c, &["COPY", key, key, "DB", "3", "REPLACE"]),
            1
        );
        q::<()>(&mut c, &["DEL", key]);
        q::<()>(&mut c, &["SELECT", "3"]);
        assert!(
            dump(&mut c, key).unwrap() == payload,
            "{key} in db 3 differs"
        );
        q::<()>(&mut c, &["SELECT", "0"]);
        assert!(
            dump(&mut c, &copy).unwrap() == payload,
            "{copy} lost its elements"
        );
    }
    freer.stop();

    // A writer rewrites a long string with one of the same length (which leaves the key's
    // row alone: see `keyspace::watches`) while it is copied, a mark at both ends: a copy
    // has the same mark at both ends, the source at one moment, never a first run read
    // before a rewrite and a last run read after it.
    let len = limit * 3 / 4;
    let marked = move |mark: usize| {
        let mut value = vec![b'.'; len];
        let mark = format!("mark {mark:>4}");
        value[..mark.len()].copy_from_slice(mark.as_bytes());
        value[len - mark.len()..].copy_from_slice(mark.as_bytes());
        value
    };
    let _: () = redis::cmd("SET")
        .arg("changing")
        .arg(marked(0))
        .query(&mut c)
        .unwrap();
    let address = server.address();
    let writer = std::thread::spawn(move || {
        let mut w = support::client_at(address);
        for mark in 1..40 {
            let _: () = redis::cmd("SET")
                .arg("changing")
                .arg(marked(mark))
                .query(&mut w)
                .expect("the writer's SET");
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    for round in 0..12 {
        let copy = format!("snapshot:{round}");
        assert_eq!(q::<i64>(&mut c, &["COPY", "changing", &copy]), 1);
        let value: Vec<u8> = q(&mut c, &["GET", &copy]);
        assert_eq!(value.len(), len);
        assert_eq!(
            String::from_utf8_lossy(&value[..9]),
            String::from_utf8_lossy(&value[len - 9..]),
            "{copy} mixes two moments of its source"
        );
    }
    writer.join().expect("the writer");
}

/// Every encoding of redis-server's DUMP restores here to the same value, and what DUMP
/// writes here restores in redis-server to the same value again.
#[test]
fn payloads_move_between_redis_and_tailstore() {
    let Some(servers) = support::real_redis::Servers::start("DUMP/RESTORE against Redis") else {
        return;
    };
    let mut redis = support::client_at(servers.redis.address());
    let mut ours = servers.tailstore.client();
    for key in fill_every_encoding(&mut redis) {
        let from_redis = dump(&mut redis, key).unwrap();
        ok(restore(&mut ours, key, 0, &from_redis, &[]).unwrap());
        let value = contents(&mut redis, key);
        assert_eq!(contents(&mut ours, key), value, "{key} from Redis");
        let back = format!("back:{key}");
        let from_ours = dump(&mut ours, key).unwrap();
        ok(restore(&mut redis, &back, 60_000, &from_ours, &[]).unwrap());
        assert_eq!(contents(&mut redis, &back), value, "{key} back in Redis");
    }
}

/// MEMORY USAGE answers about the bytes of a key's rows: a value's bytes and a little per
/// row, estimated from samples for collections (all with SAMPLES 0), nil for a missing key;
/// Redis's errors for bad options and other subcommands.
#[test]
fn memory_usage_counts_the_rows_of_a_key() {
    let server = TestServer::start();
    let mut c = server.client();
    let usage = |c: &mut redis::Connection, args: &[&str]| -> i64 {
        q(c, &[&["MEMORY", "USAGE"][..], args].concat())
    };
    ok(raw_value(&mut c, &["SET", "small", "x"]));
    ok(raw_value(&mut c, &["SET", "big", &"x".repeat(100_000)]));
    let (small, big) = (usage(&mut c, &["small"]), usage(&mut c, &["big"]));
    assert!((1..1_000).contains(&small), "{small}");
    assert!((100_000..110_000).contains(&big), "{big}");
    for i in 0..1_000 {
        q::<i64>(&mut c, &["RPUSH", "list", &format!("{i:0>100}")]);
        q::<i64>(
            &mut c,
            &["ZADD", "zset", &i.to_string(), &format!("{i:0>50}")],
        );
    }
    for key in ["list", "zset"] {
        let sampled = usage(&mut c, &[key]);
        let counted = usage(&mut c, &[key, "SAMPLES", "0"]);
        assert!((50_000..400_000).contains(&sampled), "{key}: {sampled}");
        // Equal-sized elements: the sample's estimate is the count, give or take rounding.
        assert!(
            (sampled - counted).abs() < 1_000,
            "{key}: {sampled} vs {counted}"
        );
    }
    assert_eq!(
        raw_value(&mut c, &["MEMORY", "USAGE", "missing"]),
        Value::Nil
    );
    assert_eq!(
        err(&mut c, &["MEMORY", "USAGE", "big", "SAMPLES", "-1"]),
        SYNTAX
    );
    assert_eq!(err(&mut c, &["MEMORY", "USAGE", "big", "NOPE"]), SYNTAX);
    assert_eq!(
        err(&mut c, &["MEMORY", "USAGE", "big", "SAMPLES", "x"]),
        NOT_INTEGER
    );
    assert_eq!(
        err(&mut c, &["MEMORY", "NOPE"]),
        "ERR unknown subcommand 'NOPE'. Try MEMORY HELP."
    );
    assert!(
        matches!(raw_value(&mut c, &["MEMORY", "HELP"]), Value::Array(lines) if lines.len() == 14)
    );
}

/// LOLWUT answers the line Redis 7 answers for its version (the one INFO reports), for
/// every version: tailstore draws no art.
#[test]
fn lolwut_answers_the_version_line() {
    let server = TestServer::start();
    let mut c = server.client();
    let line = |c: &mut redis::Connection, args: &[&str]| -> String { q(c, args) };
    let version = format!("Redis ver. {}\n", tailstore_kv::REDIS_VERSION);
    assert_eq!(line(&mut c, &["LOLWUT"]), version);
    assert_eq!(line(&mut c, &["LOLWUT", "VERSION", "5"]), version);
    assert_eq!(err(&mut c, &["LOLWUT", "VERSION", "x"]), NOT_INTEGER);
}

/// MEMORY STATS reports the process's memory, the pool, the data file and the keys by
/// database, under Redis's names where they mean the same; DOCTOR, MALLOC-STATS and PURGE
/// answer.
#[test]
fn memory_stats_reports_the_keys_and_the_process() {
    let server = TestServer::start();
    let mut c = server.client();
    q::<()>(&mut c, &["MSET", "a", "1", "b", "2"]);
    q::<()>(&mut c, &["SET", "c", "3", "EX", "100"]);
    q::<()>(&mut c, &["SELECT", "4"]);
    q::<()>(&mut c, &["SET", "d", "4"]);
    let stats: HashMap<String, Value> = q(&mut c, &["MEMORY", "STATS"]);
    let int = |name: &str| match stats.get(name) {
        Some(Value::Int(n)) => *n,
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(int("keys.count"), 4);
    assert!(int("total.allocated") > 1 << 20, "{stats:?}");
    assert!(int("peak.allocated") >= int("total.allocated"), "{stats:?}");
    assert!(int("tailstore.buffer-pool.bytes") > 0, "{stats:?}");
    let db = |n: &str| -> Vec<(String, i64)> {
        match stats.get(n) {
            Some(Value::Array(pairs)) => redis::from_redis_value(Value::Array(pairs.clone()))
                .unwrap_or_else(|e| panic!("{n}: {e}")),
            other => panic!("{n}: {other:?}"),
        }
    };
    assert_eq!(db("db.0"), [("keys".into(), 3), ("expires".into(), 1)]);
    assert_eq!(db("db.4"), [("keys".into(), 1), ("expires".into(), 0)]);
    assert!(!stats.contains_key("db.1"), "{stats:?}");
    let doctor: String = q(&mut c, &["MEMORY", "DOCTOR"]);
    assert!(doctor.contains("buffer pool"), "{doctor}");
    let malloc: String = q(&mut c, &["MEMORY", "MALLOC-STATS"]);
    assert_eq!(malloc, "Stats not supported for the current allocator");
    ok(raw_value(&mut c, &["MEMORY", "PURGE"]));
    assert_eq!(
        err(&mut c, &["MEMORY", "STATS", "x"]),
        "ERR wrong number of arguments for 'memory|stats' command"
    );
}

// ---------------------------------------------------------------------------------------
// connection and server

/// Every container command COMMAND LIST names (`client|help`…) answers its HELP with its
/// lines, the first naming it: the refusal of an unknown subcommand points there. (CLUSTER
/// answers every subcommand as a Redis without cluster support does.)
#[test]
fn every_container_answers_its_help() {
    let server = TestServer::start();
    let mut c = server.client();
    let names: Vec<String> = q(&mut c, &["COMMAND", "LIST"]);
    let containers: Vec<&str> = names
        .iter()
        .filter_map(|name| name.strip_suffix("|help"))
        .filter(|container| *container != "cluster")
        .collect();
    assert!(containers.len() >= 14, "{containers:?}");
    for container in containers {
        let Value::Array(lines) = raw_value(&mut c, &[container, "HELP"]) else {
            panic!("{container} HELP: not an array");
        };
        let first = format!("{:?}", lines.first());
        assert!(
            first.contains(&format!("{} <subcommand>", container.to_uppercase())),
            "{container}: {first}"
        );
        assert!(lines.len() >= 4, "{container}: {lines:?}");
        assert!(
            err(&mut c, &[container, "NOSUCH"])
                .ends_with(&format!("Try {} HELP.", container.to_uppercase())),
            "{container}"
        );
    }
}

#[test]
fn ping_echo_time() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        raw_value(&mut c, &["PING"]),
        Value::SimpleString("PONG".into())
    );
    assert_eq!(raw_value(&mut c, &["PING", "hi there"]), bulk("hi there"));
    assert_eq!(
        raw_value(&mut c, &["ECHO", "hello world"]),
        bulk("hello world")
    );
    assert_eq!(
        err(&mut c, &["PING", "a", "b"]),
        "ERR wrong number of arguments for 'ping' command"
    );
    assert_eq!(
        err(&mut c, &["ECHO"]),
        "ERR wrong number of arguments for 'echo' command"
    );
    let (secs, micros): (String, String) = q(&mut c, &["TIME"]);
    let secs: u64 = secs.parse().unwrap();
    let micros: u64 = micros.parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(secs.abs_diff(now) <= 2, "TIME says {secs}, now is {now}");
    assert!(micros < 1_000_000);
}

#[test]
fn hello_switches_to_resp3() {
    let server = TestServer::start();
    // Through raw bytes: what each protocol puts on the wire.
    let mut s = server.raw();
    exchange(&mut s, b"GET missing\r\n", b"$-1\r\n");
    exchange(&mut s, b"INCRBYFLOAT f 1.5\r\n", b"$3\r\n1.5\r\n");
    exchange(
        &mut s,
        b"CONFIG GET appendonly\r\n",
        b"*2\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n",
    );
    let reply = hello3(&mut s);
    assert_eq!(&reply[..3], b"%7\r", "HELLO 3 answers a map of 7");
    let text = String::from_utf8_lossy(&reply);
    assert!(text.contains("$5\r\nproto\r\n:3\r\n"), "{text}");
    assert!(text.contains("$6\r\nserver\r\n$5\r\nredis\r\n"), "{text}");
    exchange(&mut s, b"GET missing\r\n", b"_\r\n");
    exchange(
        &mut s,
        b"CONFIG GET appendonly\r\n",
        b"%1\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n",
    );
    // Redis answers INCRBYFLOAT with a bulk string in RESP3 too.
    exchange(&mut s, b"INCRBYFLOAT f 1\r\n", b"$3\r\n2.5\r\n");
    exchange(&mut s, b"MGET f missing\r\n", b"*2\r\n$3\r\n2.5\r\n_\r\n");
    // Back to RESP2.
    s.write_all(b"HELLO 2\r\n").unwrap();
    let head = read_exactly(&mut s, 4);
    assert_eq!(head, b"*14\r", "HELLO 2 answers the map as a flat array");
    drop(s);

    // Through the client: RESP3 values.
    let mut c = server.client3();
    assert_eq!(raw_value(&mut c, &["GET", "missing"]), Value::Nil);
    let hello = raw_value(&mut c, &["HELLO", "3"]);
    let Value::Map(fields) = hello else {
        panic!("HELLO 3 answered {hello:?}");
    };
    assert!(
        fields.contains(&(bulk("proto"), Value::Int(3))),
        "{fields:?}"
    );
    let config = raw_value(&mut c, &["CONFIG", "GET", "appendfsync"]);
    assert_eq!(
        config,
        Value::Map(vec![(bulk("appendfsync"), bulk("always"))])
    );
    let info = raw_value(&mut c, &["INFO", "server"]);
    assert!(
        matches!(&info, Value::VerbatimString { text, .. } if text.contains("redis_version:")),
        "{info:?}"
    );
    let mut c2 = server.client();
    assert_eq!(
        err(&mut c2, &["HELLO", "4"]),
        "NOPROTO unsupported protocol version"
    );
    assert_eq!(
        err(&mut c2, &["HELLO", "three"]),
        "ERR Protocol version is not an integer or out of range"
    );
    // A refused HELLO leaves the protocol alone.
    assert_eq!(
        raw_value(&mut c2, &["CONFIG", "GET", "save"]),
        Value::Array(vec![bulk("save"), bulk("")])
    );
    // HELLO with SETNAME names the connection.
    let _ = raw_value(&mut c2, &["HELLO", "2", "SETNAME", "named"]);
    assert_eq!(q::<String>(&mut c2, &["CLIENT", "GETNAME"]), "named");
}

/// CLIENT LIST's fields are Redis's, in its order, and say what Redis says of a client in
/// MULTI (`x`, its queued commands and their memory), of one waiting in BLPOP (`b`), and of
/// one whose command has not all arrived (the arguments read so far).
#[test]
fn client_list_shows_multi_blocked_and_partial_clients_as_redis_does() {
    let Some(servers) = support::real_redis::Servers::start("CLIENT LIST against Redis") else {
        return;
    };
    let lines = |address: std::net::SocketAddr| -> Vec<String> {
        let mut in_multi = TcpStream::connect(address).expect("connect");
        exchange(
            &mut in_multi,
            b"MULTI\r\nSET a bb\r\nGET ccc\r\n",
            b"+OK\r\n+QUEUED\r\n+QUEUED\r\n",
        );
        let mut blocked = TcpStream::connect(address).expect("connect");
        blocked.write_all(b"BLPOP nothing 0\r\n").expect("write");
        let mut partial = TcpStream::connect(address).expect("connect");
        partial
            .write_all(b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$10\r\nab")
            .expect("write");
        let mut lister = support::client_at(address);
        let fields = |line: &str| -> String {
            let pick = ["flags=", "multi=", "argv-mem=", "multi-mem=", "cmd="];
            line.split(' ')
                .filter(|field| pick.iter().any(|p| field.starts_with(p)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let settled = eventually(Duration::from_secs(5), || {
            let list: String = q(&mut lister, &["CLIENT", "LIST"]);
            list.contains("flags=b") && list.contains("argv-mem=8 ")
        });
        assert!(settled, "the blocked and the partial client are listed");
        let list: String = q(&mut lister, &["CLIENT", "LIST"]);
        let names: Vec<String> = list
            .lines()
            .map(|line| {
                line.split(' ')
                    .map(|f| f.split('=').next().unwrap_or("").to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        names
            .iter()
            .for_each(|n| assert_eq!(n, &names[0], "one set of fields"));
        // In order of their fields: the servers number clients in their own orders.
        let mut picked: Vec<String> = list.lines().map(fields).collect();
        picked.sort();
        picked.push(names[0].clone());
        drop((in_multi, blocked, partial));
        picked
    };
    let ours = lines(servers.tailstore.address());
    let redis = lines(servers.redis.address());
    assert_eq!(ours, redis);
}

#[test]
fn client_commands() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut d = server.client();
    assert_eq!(raw_value(&mut c, &["CLIENT", "GETNAME"]), Value::Nil);
    ok(raw_value(&mut c, &["CLIENT", "SETNAME", "worker-1"]));
    assert_eq!(q::<String>(&mut c, &["CLIENT", "GETNAME"]), "worker-1");
    assert_eq!(
        err(&mut c, &["CLIENT", "SETNAME", "a b"]),
        "ERR Client names cannot contain spaces, newlines or special characters."
    );
    assert_eq!(q::<String>(&mut c, &["CLIENT", "GETNAME"]), "worker-1");
    let id: i64 = q(&mut c, &["CLIENT", "ID"]);
    let other: i64 = q(&mut d, &["CLIENT", "ID"]);
    assert!(id > 0 && other > 0 && id != other);
    ok(raw_value(&mut d, &["SELECT", "4"]));
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2, "{list}");
    let mine = lines
        .iter()
        .find(|l| l.starts_with(&format!("id={id} ")))
        .unwrap_or_else(|| panic!("no line for id {id}: {list}"));
    assert!(mine.contains(" name=worker-1 "), "{mine}");
    let theirs = lines
        .iter()
        .find(|l| l.starts_with(&format!("id={other} ")))
        .unwrap_or_else(|| panic!("no line for id {other}: {list}"));
    assert!(theirs.contains(" db=4 "), "{theirs}");
    assert!(theirs.contains(" fd="), "{theirs}");
    // `age` and `idle` are read when the list is shown: d has been idle since its SELECT,
    // c is answered in its own command.
    std::thread::sleep(Duration::from_millis(1100));
    let seconds = |line: &str, field: &str| -> u64 {
        let value = line
            .split(' ')
            .find_map(|f| f.strip_prefix(field))
            .unwrap_or_else(|| panic!("no {field} in {line}"));
        value
            .parse()
            .unwrap_or_else(|_| panic!("{field}{value} in {line}"))
    };
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    let line = |id: i64| {
        let start = format!("id={id} ");
        list.lines()
            .find(|l| l.starts_with(&start))
            .unwrap_or_else(|| panic!("no line for id {id}: {list}"))
            .to_string()
    };
    let (mine, theirs) = (line(id), line(other));
    assert!(seconds(&theirs, "age=") >= 1, "{theirs}");
    assert!(seconds(&theirs, "idle=") >= 1, "{theirs}");
    assert_eq!(seconds(&mine, "idle="), 0, "{mine}");
    // `cmd` too, with the subcommand as Redis 7 names it.
    assert!(mine.contains(" cmd=client|list "), "{mine}");
    assert!(theirs.contains(" cmd=select "), "{theirs}");
    let _: String = q(&mut d, &["PING"]);
    let list: String = q(&mut c, &["CLIENT", "LIST"]);
    let theirs = list
        .lines()
        .find(|l| l.starts_with(&format!("id={other} ")))
        .unwrap_or_default();
    assert_eq!(seconds(theirs, "idle="), 0, "{theirs}");
    assert!(theirs.contains(" cmd=ping "), "{theirs}");
    ok(raw_value(
        &mut c,
        &["CLIENT", "SETINFO", "LIB-NAME", "tests"],
    ));
    assert!(err(&mut c, &["CLIENT", "NOSUCH"]).starts_with("ERR unknown subcommand"));
    // Refused as a Redis 7 refuses it by default (enable-debug-command no).
    assert!(err(&mut c, &["DEBUG", "SLEEP", "0"]).starts_with("ERR DEBUG command not allowed."));
    // A closed connection leaves the list.
    drop(d);
    let gone = eventually(Duration::from_secs(5), || {
        q::<String>(&mut c, &["CLIENT", "LIST"]).lines().count() == 1
    });
    assert!(gone, "a closed connection stayed in CLIENT LIST");
}

/// DEBUG is refused before the ACL check and while queuing, as Redis refuses its
/// protected commands: in MULTI the refusal fails the EXEC.
#[test]
fn debug_is_refused_before_acl_and_while_queuing() {
    let server = TestServer::start();
    let mut c = server.client();
    let debug = &["DEBUG", "SLEEP", "0"];
    ok(raw_value(&mut c, &["MULTI"]));
    assert!(err(&mut c, debug).starts_with("ERR DEBUG command not allowed."));
    assert!(err(&mut c, &["EXEC"]).starts_with("EXECABORT Transaction discarded"));
    let user = &["ACL", "SETUSER", "ro", "on", ">pw", "~*", "+get"];
    ok(raw_value(&mut c, user));
    ok(raw_value(&mut c, &["AUTH", "ro", "pw"]));
    assert!(err(&mut c, debug).starts_with("ERR DEBUG command not allowed."));
}

#[test]
fn command_introspection() {
    let server = TestServer::start();
    let mut c = server.client();
    let count: i64 = q(&mut c, &["COMMAND", "COUNT"]);
    assert!(count > 50, "COMMAND COUNT {count}");
    let all = raw_value(&mut c, &["COMMAND"]);
    assert!(matches!(&all, Value::Array(v) if v.len() as i64 == count));
    let info = raw_value(&mut c, &["COMMAND", "INFO", "get", "nosuch"]);
    let Value::Array(entries) = info else {
        panic!("COMMAND INFO answered {info:?}");
    };
    assert_eq!(entries.len(), 2);
    let Value::Array(get) = &entries[0] else {
        panic!("COMMAND INFO get: {:?}", entries[0]);
    };
    assert_eq!(get[0], bulk("get"));
    assert_eq!(get[1], Value::Int(2));
    let flags = format!("{:?}", get[2]);
    assert!(flags.contains("readonly"), "{flags}");
    assert_eq!(&get[3..6], &[Value::Int(1), Value::Int(1), Value::Int(1)]);
    assert_eq!(entries[1], Value::Nil);
    let set = raw_value(&mut c, &["COMMAND", "INFO", "SET"]);
    assert!(format!("{set:?}").contains("write"), "{set:?}");

    // DOCS: a map from name to a map with at least the summary (a flat array in RESP2).
    let docs = raw_value(&mut c, &["COMMAND", "DOCS", "get"]);
    let Value::Array(pairs) = docs else {
        panic!("COMMAND DOCS answered {docs:?}");
    };
    assert_eq!(pairs.len(), 2);
    assert_eq!(pairs[0], bulk("get"));
    let Value::Array(doc) = &pairs[1] else {
        panic!("COMMAND DOCS get: {:?}", pairs[1]);
    };
    assert!(doc.contains(&bulk("summary")), "{doc:?}");
    assert!(doc.contains(&bulk("group")), "{doc:?}");
    let mut c3 = server.client3();
    let docs = raw_value(&mut c3, &["COMMAND", "DOCS", "get"]);
    assert!(
        matches!(&docs, Value::Map(m) if m.len() == 1 && m[0].0 == bulk("get")),
        "{docs:?}"
    );
    assert!(err(&mut c, &["COMMAND", "NOSUCH"]).starts_with("ERR unknown subcommand"));
}

/// One SLOWLOG GET entry: id, Unix time, microseconds, arguments, address, client name.
fn slowlog_entries(c: &mut redis::Connection, count: &str) -> Vec<(i64, i64, Vec<String>, String)> {
    let Value::Array(entries) = raw_value(c, &["SLOWLOG", "GET", count]) else {
        panic!("SLOWLOG GET answered something else than an array");
    };
    entries
        .into_iter()
        .map(|entry| {
            let Value::Array(fields) = entry else {
                panic!("an entry that is not an array: {entry:?}");
            };
            let int = |v: &Value| match v {
                Value::Int(n) => *n,
                other => panic!("not an integer: {other:?}"),
            };
            let text = |v: &Value| match v {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("not a bulk string: {other:?}"),
            };
            let Value::Array(args) = &fields[3] else {
                panic!("arguments that are not an array: {fields:?}");
            };
            assert!(text(&fields[4]).starts_with("127.0.0.1:"), "{fields:?}");
            (
                int(&fields[0]),
                int(&fields[2]),
                args.iter().map(text).collect(),
                text(&fields[5]),
            )
        })
        .collect()
}

#[test]
fn slowlog_keeps_the_slow_commands_newest_first() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["CLIENT", "SETNAME", "slow-one"]));
    // Under the default threshold (10 ms) quick commands are not logged; a script that
    // spins for 30 ms is, with its time.
    ok(raw_value(&mut c, &["SET", "k", "v"]));
    let spin = "local t = redis.call('TIME') local start = t[1] * 1e6 + t[2] \
                repeat t = redis.call('TIME') until t[1] * 1e6 + t[2] - start > 30000 return 1";
    assert_eq!(raw_value(&mut c, &["EVAL", spin, "0"]), Value::Int(1));
    // (A quick command on a loaded machine may pass 10 ms too: only the script is sure.)
    let entries = slowlog_entries(&mut c, "10");
    let (_, micros, _, name) = entries
        .iter()
        .find(|(_, _, args, _)| args[0] == "EVAL")
        .unwrap_or_else(|| panic!("no EVAL in {entries:?}"));
    assert!(*micros >= 30_000, "{micros} µs");
    assert_eq!(name, "slow-one");

    // At 0 every command is logged, newest first, ids counting up; long arguments are cut.
    ok(raw_value(
        &mut c,
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
    ));
    ok(raw_value(&mut c, &["SLOWLOG", "RESET"])); // logged once it has emptied the log
    let long = "x".repeat(200);
    ok(raw_value(&mut c, &["SET", "k", &long]));
    let entries = slowlog_entries(&mut c, "2");
    assert_eq!(entries.len(), 2);
    assert_eq!(
        entries[0].2[2],
        format!("{}... (72 more bytes)", "x".repeat(128))
    );
    assert_eq!(entries[1].2, ["SLOWLOG", "RESET"]);
    assert!(entries[0].0 > entries[1].0);
    assert_eq!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]), 3); // and the SLOWLOG GET

    // The length limit trims; a CONFIG SET with one refused pair changes nothing.
    assert!(err(
        &mut c,
        &["CONFIG", "SET", "slowlog-max-len", "1", "appendonly", "no"]
    )
    .contains("'appendonly'"));
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "slowlog-max-len"]),
        ["slowlog-max-len", "128"]
    );
    ok(raw_value(
        &mut c,
        &["CONFIG", "SET", "slowlog-max-len", "2"],
    ));
    assert_eq!(slowlog_entries(&mut c, "-1").len(), 2);
    assert_eq!(
        err(&mut c, &["SLOWLOG", "GET", "-2"]),
        "ERR count should be greater than or equal to -1"
    );
    ok(raw_value(&mut c, &["SLOWLOG", "RESET"]));
    ok(raw_value(
        &mut c,
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
    ));
    ok(raw_value(&mut c, &["SET", "k", "v"]));
    // RESET itself was logged after it emptied the log (as in Redis); nothing since.
    assert_eq!(slowlog_entries(&mut c, "10").len(), 1);
}

#[test]
fn config_get_tells_the_durability() {
    let server = TestServer::start();
    let mut c = server.client();
    let fsync: Vec<String> = q(&mut c, &["CONFIG", "GET", "appendfsync"]);
    assert_eq!(fsync, ["appendfsync", "always"]);
    let several: Vec<String> = q(&mut c, &["CONFIG", "GET", "save", "appendonly"]);
    assert_eq!(several.len(), 4, "{several:?}");
    let durability: Vec<String> = q(&mut c, &["CONFIG", "GET", "tailstore-*"]);
    assert!(durability[1].contains("buffer"), "{durability:?}");
    let databases: Vec<String> = q(&mut c, &["CONFIG", "GET", "databases"]);
    assert_eq!(databases, ["databases", "16"]);
    // Redis's default, in milliseconds, under both of its names.
    let scripts: Vec<String> = q(
        &mut c,
        &["CONFIG", "GET", "busy-reply-threshold", "lua-time-limit"],
    );
    assert_eq!(
        scripts,
        ["busy-reply-threshold", "5000", "lua-time-limit", "5000"]
    );
    let all: Vec<String> = q(&mut c, &["CONFIG", "GET", "*"]);
    assert!(all.contains(&"maxclients".to_string()));
    assert!(q::<Vec<String>>(&mut c, &["CONFIG", "GET", "nosuch"]).is_empty());
    let refused = err(&mut c, &["CONFIG", "SET", "appendfsync", "no"]);
    assert!(
        refused.contains("'appendfsync'") && refused.contains("--commit"),
        "{refused}"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "appendfsync"])[1],
        "always"
    );
    // Values already in effect are accepted (case as Redis compares it); one pair that
    // would change something refuses the whole command.
    ok(raw_value(
        &mut c,
        &["CONFIG", "SET", "appendfsync", "ALWAYS"],
    ));
    ok(raw_value(
        &mut c,
        &["CONFIG", "SET", "save", "", "appendonly", "yes"],
    ));
    assert!(err(
        &mut c,
        &["CONFIG", "SET", "appendonly", "yes", "maxmemory", "1gb"]
    )
    .starts_with("ERR CONFIG SET 'maxmemory'"));
    assert!(err(&mut c, &["CONFIG", "SET", "nosuch", "1"]).starts_with("ERR CONFIG SET 'nosuch'"));
    drop(c);
    drop(server);

    let server = TestServer::with(Options {
        mode: CommitMode::Async,
        ..Options::default()
    });
    let mut c = server.client();
    let fsync: Vec<String> = q(&mut c, &["CONFIG", "GET", "appendfsync"]);
    assert_eq!(fsync, ["appendfsync", "no"]);
    let appendonly: Vec<String> = q(&mut c, &["CONFIG", "GET", "appendonly"]);
    assert_eq!(appendonly, ["appendonly", "no"]);
    ok(raw_value(&mut c, &["CONFIG", "SET", "appendfsync", "no"]));
    assert!(err(&mut c, &["CONFIG", "SET", "appendfsync", "always"]).contains("--commit"));
}

/// The number in INFO field `name` of `info`; panics if there is none.
fn info_number(info: &str, name: &str) -> f64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {name} in {info}"))
}

/// INFO `section`'s reply on a raw connection, whole, as the bytes it came in.
fn raw_info(stream: &mut TcpStream, section: &str) -> Vec<u8> {
    let request = format!("INFO {section}\r\n");
    stream.write_all(request.as_bytes()).expect("write");
    let mut header = Vec::new();
    while !header.ends_with(b"\r\n") {
        header.extend(read_exactly(stream, 1));
    }
    let len: usize = std::str::from_utf8(&header[1..header.len() - 2])
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("INFO's reply began {header:?}"));
    header.extend(read_exactly(stream, len + 2));
    header
}

#[test]
fn info_counts_the_bytes_read_and_written_and_the_commands_per_second() {
    let server = TestServer::start();
    let mut raw = server.raw();
    let first = raw_info(&mut raw, "stats");
    exchange(&mut raw, b"PING\r\n", b"+PONG\r\n");
    let second = raw_info(&mut raw, "stats");
    let field = |reply: &[u8], name: &str| info_number(&String::from_utf8_lossy(reply), name);
    // Between the two INFOs the server read the PING and the second INFO, and wrote the
    // first INFO's reply and the PONG (a reply is counted once written).
    let read = field(&second, "total_net_input_bytes") - field(&first, "total_net_input_bytes");
    let written =
        field(&second, "total_net_output_bytes") - field(&first, "total_net_output_bytes");
    assert_eq!(read as usize, "PING\r\n".len() + "INFO stats\r\n".len());
    assert_eq!(written as usize, first.len() + "+PONG\r\n".len());
    // A second of commands shows in the rate (sampled ten times a second over 1.6 s).
    let mut c = server.client();
    let busy_until = Instant::now() + Duration::from_millis(1000);
    while Instant::now() < busy_until {
        let _: () = redis::pipe()
            .cmd("PING")
            .ignore()
            .cmd("PING")
            .ignore()
            .query(&mut c)
            .expect("PING");
    }
    let info: String = q(&mut c, &["INFO", "stats"]);
    assert!(
        info_number(&info, "instantaneous_ops_per_sec") > 100.0,
        "{info}"
    );
    assert!(
        info_number(&info, "instantaneous_input_kbps") > 0.0,
        "{info}"
    );
    assert!(
        info_number(&info, "instantaneous_output_kbps") > 0.0,
        "{info}"
    );
}

#[test]
fn info_counts_the_keys_removed_as_expired() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["SET", "a", "1", "PX", "1"]));
    ok(raw_value(&mut c, &["SET", "b", "1", "PX", "1"]));
    std::thread::sleep(Duration::from_millis(5));
    // A write over an expired key removes it first (counted), the active expiry the other.
    ok(raw_value(&mut c, &["SET", "a", "2"]));
    let expired = || {
        let info: String = q(&mut server.client(), &["INFO", "stats"]);
        info_number(&info, "expired_keys")
    };
    assert!(eventually(Duration::from_secs(5), || expired() == 2.0));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1);
    ok(raw_value(&mut c, &["CONFIG", "RESETSTAT"]));
    assert_eq!(expired(), 0.0);
}

#[test]
fn info_has_the_six_sections() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["SET", "a", "1"]));
    ok(raw_value(&mut c, &["SET", "b", "1", "EX", "100"]));
    let info: String = q(&mut c, &["INFO"]);
    for section in [
        "Server",
        "Clients",
        "Memory",
        "Persistence",
        "Stats",
        "Keyspace",
    ] {
        assert!(
            info.contains(&format!("# {section}\r\n")),
            "no {section} in {info}"
        );
    }
    assert!(info.contains("redis_version:"), "{info}");
    assert!(info.contains("connected_clients:1\r\n"), "{info}");
    assert!(
        info.contains(&format!("tcp_port:{}\r\n", server.port())),
        "{info}"
    );
    assert!(info.contains("db0:keys=2,expires=1"), "{info}");
    assert!(info.contains("tailstore_poll_spin_us:50\r\n"), "{info}");
    // The log's counters: the two SETs were logged; no append found the ring full.
    // Whole units: the ms fields have three decimals.
    let counter = |name: &str| info_number(&info, name) as u64;
    assert!(counter("tailstore_log_bytes") > 0, "{info}");
    assert_eq!(counter("tailstore_log_ring_full_waits"), 0, "{info}");
    assert_eq!(counter("tailstore_log_ring_full_wait_ms"), 0, "{info}");
    // What a restart would replay now (a number: `counter` panics otherwise), and its
    // bound: none for this test's database (`serve` sets one); no write waited at it.
    let bytes = counter("tailstore_log_since_checkpoint_bytes");
    assert!(
        counter("tailstore_replay_weight_since_checkpoint") >= bytes,
        "{info}"
    );
    assert!(
        info.contains("tailstore_replay_weight_limit:none\r\n"),
        "{info}"
    );
    assert_eq!(counter("tailstore_checkpoint_room_waits"), 0, "{info}");
    assert_eq!(counter("tailstore_checkpoint_room_wait_ms"), 0, "{info}");
    // SAVE runs a checkpoint, whose time counts.
    let _: String = q(&mut c, &["SAVE"]);
    let persistence: String = q(&mut c, &["INFO", "persistence"]);
    assert!(info_number(&persistence, "tailstore_checkpoints") >= 1.0);
    assert!(info_number(&persistence, "tailstore_checkpoint_ms") > 0.0);
    let server_only: String = q(&mut c, &["INFO", "server"]);
    assert!(server_only.starts_with("# Server\r\n"), "{server_only}");
    assert!(!server_only.contains("# Clients"), "{server_only}");
    let two: String = q(&mut c, &["INFO", "clients", "keyspace"]);
    assert!(two.contains("# Clients") && two.contains("# Keyspace") && !two.contains("# Stats"));
}

// ---------------------------------------------------------------------------------------
// transactions

#[test]
fn multi_exec_discard() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["MULTI"]));
    let queued = Value::SimpleString("QUEUED".into());
    assert_eq!(raw_value(&mut c, &["SET", "a", "1"]), queued);
    assert_eq!(raw_value(&mut c, &["INCR", "a"]), queued);
    assert_eq!(raw_value(&mut c, &["GET", "a"]), queued);
    assert_eq!(raw_value(&mut c, &["PING"]), queued);
    assert_eq!(
        raw_value(&mut c, &["EXEC"]),
        Value::Array(vec![
            Value::Okay,
            Value::Int(2),
            bulk("2"),
            Value::SimpleString("PONG".into())
        ])
    );
    // An empty transaction.
    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Array(vec![]));
    // DISCARD drops the queue.
    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(raw_value(&mut c, &["SET", "d", "1"]), queued);
    ok(raw_value(&mut c, &["DISCARD"]));
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "d"]), None);
    assert_eq!(err(&mut c, &["EXEC"]), "ERR EXEC without MULTI");
    assert_eq!(err(&mut c, &["DISCARD"]), "ERR DISCARD without MULTI");
    // Nested MULTI is refused without ending the transaction.
    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(err(&mut c, &["MULTI"]), "ERR MULTI calls can not be nested");
    assert_eq!(raw_value(&mut c, &["SET", "n", "1"]), queued);
    assert_eq!(
        raw_value(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Okay])
    );
    assert_eq!(q::<String>(&mut c, &["GET", "n"]), "1");
    // UNWATCH may be queued (it answers OK).
    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(raw_value(&mut c, &["UNWATCH"]), queued);
    assert_eq!(
        raw_value(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Okay])
    );
    // SELECT inside MULTI changes the database of what follows, and stays selected.
    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(raw_value(&mut c, &["SELECT", "1"]), queued);
    assert_eq!(raw_value(&mut c, &["SET", "in1", "x"]), queued);
    assert_eq!(
        raw_value(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Okay, Value::Okay])
    );
    assert_eq!(q::<String>(&mut c, &["GET", "in1"]), "x");
    ok(raw_value(&mut c, &["SELECT", "0"]));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "in1"]), 0);
}

#[test]
fn exec_aborts_after_a_queueing_error() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["SET", "a", "1"]);
    assert!(err(&mut c, &["NOSUCHCOMMAND", "x"]).starts_with("ERR unknown command 'NOSUCHCOMMAND'"));
    assert_eq!(
        err(&mut c, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "a"]), None);
    // A wrong arity aborts too, and the next transaction starts clean.
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["SET", "a", "1"]);
    assert_eq!(
        err(&mut c, &["GET"]),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        err(&mut c, &["EXEC"]),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "a"]), None);
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["SET", "a", "2"]);
    assert_eq!(
        raw_value(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Okay])
    );
    assert_eq!(q::<String>(&mut c, &["GET", "a"]), "2");
}

/// A refused EXEC (a wrong arity, a user without it, a subscribed RESP2 connection, no
/// login) ends the transaction and says why, as Redis's does; compared byte for byte with a
/// `redis-server` when one is installed.
#[test]
fn a_refused_exec_discards_the_transaction() {
    let cases: &[&[&str]] = &[
        &["EXEC", "x"],
        &["MULTI"],
        &["SET", "k", "1"],
        &["EXEC", "x"],
        &["EXEC"],
        &["GET", "k"],
        &["WATCH", "k"],
        &["MULTI"],
        &["EXEC", "x"],
        &["UNWATCH"],
        &[
            "ACL", "SETUSER", "noexec", "on", "nopass", "+@all", "-exec", "~*",
        ],
        &["AUTH", "noexec", "p"],
        &["MULTI"],
        &["SET", "k", "2"],
        &["EXEC"],
        &["DISCARD"],
        &["GET", "k"],
        &["AUTH", "default", "x"],
        &["ACL", "DELUSER", "noexec"],
        &["SUBSCRIBE", "ch"],
        &["EXEC"],
        &["MULTI"],
        &["RESET"],
        &["CONFIG", "SET", "requirepass", "secret"],
        &["AUTH", "nosuch", "x"],
        &["MULTI"],
        &["EXEC"],
        &["AUTH", "secret"],
        &["CONFIG", "SET", "requirepass", ""],
    ];
    support::real_redis::same_replies("a_refused_exec_discards_the_transaction", cases);
}

#[test]
fn an_error_inside_exec_does_not_stop_the_rest() {
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["SET", "s", "abc"]));
    ok(raw_value(&mut c, &["MULTI"]));
    for args in [
        &["SET", "before", "1"][..],
        &["INCR", "s"],
        &["SET", "k", "v", "EX", "0"],
        &["SET", "after", "2"],
        &["GET", "s"],
    ] {
        assert_eq!(
            raw_value(&mut c, args),
            Value::SimpleString("QUEUED".into())
        );
    }
    let Value::Array(replies) = raw_value(&mut c, &["EXEC"]) else {
        panic!("EXEC did not answer an array");
    };
    assert_eq!(replies.len(), 5);
    assert_eq!(replies[0], Value::Okay);
    assert_eq!(server_error_text(&replies[1]).as_deref(), Some(NOT_INTEGER));
    assert_eq!(
        server_error_text(&replies[2]).as_deref(),
        Some("ERR invalid expire time in 'set' command")
    );
    assert_eq!(replies[3], Value::Okay);
    assert_eq!(replies[4], bulk("abc"));
    let values: Vec<Option<String>> = q(&mut c, &["MGET", "before", "after", "k", "s"]);
    assert_eq!(
        values,
        [Some("1".into()), Some("2".into()), None, Some("abc".into())]
    );
}

#[test]
fn watch_aborts_exec_when_a_key_changed() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut other = server.client();
    ok(raw_value(&mut c, &["SET", "k", "0"]));

    // Changed by another connection: EXEC answers nil and runs nothing.
    ok(raw_value(&mut c, &["WATCH", "k"]));
    ok(raw_value(&mut other, &["SET", "k", "other"]));
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["SET", "k", "mine"]);
    queued(&mut c, &["SET", "side", "effect"]);
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Nil);
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "other");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "side"]), 0);

    // Unchanged: EXEC runs (and the watch is gone afterwards).
    ok(raw_value(&mut c, &["WATCH", "k"]));
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["SET", "k", "mine"]);
    assert_eq!(
        raw_value(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Okay])
    );
    assert_eq!(q::<String>(&mut c, &["GET", "k"]), "mine");
    ok(raw_value(&mut other, &["SET", "k", "later"]));
    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Array(vec![]));

    // A watched key that did not exist and was created meanwhile.
    ok(raw_value(&mut c, &["WATCH", "absent"]));
    ok(raw_value(&mut other, &["SET", "absent", "now"]));
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["INCR", "counter"]);
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Nil);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "counter"]), 0);

    // Deleted meanwhile; and a change that leaves the same value still counts.
    ok(raw_value(&mut c, &["WATCH", "absent", "k"]));
    ok(raw_value(&mut other, &["SET", "k", "later"]));
    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Nil);
    ok(raw_value(&mut c, &["WATCH", "absent"]));
    assert_eq!(q::<i64>(&mut other, &["DEL", "absent"]), 1);
    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Nil);

    // Absent when watched, created and deleted again meanwhile: absent at EXEC too, and
    // still a change (it ran before decision 205). Untouched, EXEC runs.
    ok(raw_value(&mut c, &["WATCH", "absent"]));
    ok(raw_value(&mut other, &["SET", "absent", "briefly"]));
    assert_eq!(q::<i64>(&mut other, &["DEL", "absent"]), 1);
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["INCR", "counter"]);
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Nil);
    ok(raw_value(&mut c, &["WATCH", "absent"]));
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["INCR", "counter"]);
    assert_eq!(
        raw_value(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Int(1)])
    );

    // Absent when watched, created with a deadline that passes before EXEC and not yet
    // removed (CLIENT PAUSE WRITE holds the active expiry back): still a change, as in Redis
    // (it ran before, `[1]`). A key already expired when watched and left alone is not.
    ok(raw_value(&mut c, &["WATCH", "fleeting"]));
    ok(raw_value(&mut other, &["SET", "fleeting", "v", "PX", "20"]));
    ok(raw_value(
        &mut other,
        &["CLIENT", "PAUSE", "10000", "WRITE"],
    ));
    std::thread::sleep(Duration::from_millis(60));
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["GET", "counter"]);
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Nil);
    ok(raw_value(&mut c, &["WATCH", "fleeting"]));
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["GET", "counter"]);
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Array(vec![bulk("1")]));
    ok(raw_value(&mut other, &["CLIENT", "UNPAUSE"]));

    // UNWATCH forgets; DISCARD forgets too.
    ok(raw_value(&mut c, &["WATCH", "k"]));
    ok(raw_value(&mut c, &["UNWATCH"]));
    ok(raw_value(&mut other, &["SET", "k", "x"]));
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["GET", "k"]);
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Array(vec![bulk("x")]));
    ok(raw_value(&mut c, &["WATCH", "k"]));
    ok(raw_value(&mut c, &["MULTI"]));
    ok(raw_value(&mut c, &["DISCARD"]));
    ok(raw_value(&mut other, &["SET", "k", "y"]));
    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Array(vec![]));

    // The watching connection's own change counts, as in Redis.
    ok(raw_value(&mut c, &["WATCH", "k"]));
    ok(raw_value(&mut c, &["SET", "k", "self"]));
    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Nil);

    // WATCH in a database is about that database's key.
    ok(raw_value(&mut c, &["SELECT", "1"]));
    ok(raw_value(&mut c, &["WATCH", "k"]));
    ok(raw_value(&mut other, &["SET", "k", "db0 change"]));
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["SET", "k", "db1"]);
    assert_eq!(
        raw_value(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Okay])
    );

    ok(raw_value(&mut c, &["MULTI"]));
    assert_eq!(
        err(&mut c, &["WATCH", "k"]),
        "ERR WATCH inside MULTI is not allowed"
    );
    ok(raw_value(&mut c, &["DISCARD"]));
}

/// The connection and server commands queued in a block that a changed watched key aborts
/// run no more than its data commands do, as in Redis: its SELECT leaves the connection in
/// its database (or the writes after EXEC would go to another one), CLIENT SETNAME leaves
/// the name, PUBLISH publishes nothing. In a block that runs they do, in order with the
/// rest.
#[test]
fn an_aborted_exec_leaves_the_connection_as_it_was() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut other = server.client();
    let mut subscriber = server.raw();
    subscriber.write_all(b"SUBSCRIBE news\r\n").expect("write");
    expect_bytes(
        &mut subscriber,
        b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n",
    );
    ok(raw_value(&mut c, &["CLIENT", "SETNAME", "before"]));
    ok(raw_value(&mut c, &["WATCH", "k"]));
    ok(raw_value(&mut other, &["SET", "k", "changed"]));
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["SELECT", "3"]);
    queued(&mut c, &["CLIENT", "SETNAME", "after"]);
    queued(&mut c, &["PUBLISH", "news", "aborted"]);
    queued(&mut c, &["SET", "in-block", "x"]);
    assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Nil);
    assert_eq!(q::<String>(&mut c, &["CLIENT", "GETNAME"]), "before");
    ok(raw_value(&mut c, &["SET", "after-exec", "x"]));
    assert_eq!(
        q::<i64>(&mut other, &["EXISTS", "after-exec"]),
        1,
        "the aborted block's SELECT moved the connection to another database"
    );

    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["PUBLISH", "news", "ran"]);
    queued(&mut c, &["SELECT", "3"]);
    queued(&mut c, &["SET", "in-db3", "x"]);
    queued(&mut c, &["CLIENT", "SETNAME", "after"]);
    assert_eq!(
        raw_value(&mut c, &["EXEC"]),
        Value::Array(vec![Value::Int(1), Value::Okay, Value::Okay, Value::Okay])
    );
    assert_eq!(q::<String>(&mut c, &["CLIENT", "GETNAME"]), "after");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "in-db3"]), 1);
    assert_eq!(q::<i64>(&mut other, &["EXISTS", "in-db3"]), 0);
    // Only the message of the block that ran.
    expect_bytes(
        &mut subscriber,
        b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$3\r\nran\r\n",
    );
}

/// WATCH against writes that leave the key's row alone (a same-length overwrite while no
/// watch is live, decision 65), on several event loops at once: an EXEC that runs must see
/// the watched key exactly as its client read it after WATCH. Watchers read the key, then
/// run `GET k; SET k <same length>` in the block; blind writers overwrite it with values of
/// the same length meanwhile. A blind write applied after a WATCH read the version, without
/// giving a new one, shows up as an EXEC whose GET differs from the read. Catching that is a
/// matter of chance per attempt: with 300 attempts per watcher a CI run once missed the
/// planted bug, and on a loaded machine 1 run in 15 did; with 1,500, none of 12 under load.
#[test]
fn exec_sees_the_watched_key_as_read_after_watch() {
    watchers_see_the_key_as_read_after_watch(Vec::new());
}

/// The same with a write's WATCH gate released before its changes apply, the bug it exists
/// to catch (`Plant::EarlyGateRelease`).
#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
#[should_panic(expected = "EXEC ran though the watched key changed after WATCH")]
fn planted_early_gate_release_is_caught_by_the_watchers() {
    watchers_see_the_key_as_read_after_watch(vec![tailstore_kv::server::Plant::EarlyGateRelease]);
}

/// `exec_sees_the_watched_key_as_read_after_watch`, on a server with `plants`.
fn watchers_see_the_key_as_read_after_watch(plants: Vec<tailstore_kv::server::Plant>) {
    let server = TestServer::with(Options {
        threads: 4,
        plants,
        ..Options::default()
    });
    ok(raw_value(&mut server.client(), &["SET", "k", "w0000000"]));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Paced, so that some blocks run; a watcher's block takes several round trips.
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let mut c = server.client();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    std::thread::sleep(Duration::from_micros(100 * (n % 4)));
                    ok(raw_value(
                        &mut c,
                        &["SET", "k", &format!("b{w}{:06}", n % 1_000_000)],
                    ));
                }
            })
        })
        .collect();
    let watchers: Vec<_> = (0..3)
        .map(|w| {
            let mut c = server.client();
            std::thread::spawn(move || {
                let mut ran = 0;
                for attempt in 0..1500u64 {
                    ok(raw_value(&mut c, &["WATCH", "k"]));
                    let read: String = q(&mut c, &["GET", "k"]);
                    ok(raw_value(&mut c, &["MULTI"]));
                    queued(&mut c, &["GET", "k"]);
                    queued(&mut c, &["SET", "k", &format!("w{w}{attempt:06}")]);
                    match raw_value(&mut c, &["EXEC"]) {
                        Value::Nil => {}
                        Value::Array(replies) => {
                            assert_eq!(
                                replies,
                                vec![bulk(&read), Value::Okay],
                                "EXEC ran though the watched key changed after WATCH"
                            );
                            ran += 1;
                        }
                        other => panic!("EXEC answered {other:?}"),
                    }
                    // Gaps with no watch live, in which blind writes leave the row alone.
                    std::thread::sleep(Duration::from_micros(100 * (attempt % 3)));
                }
                ran
            })
        })
        .collect();
    // A watcher's failed assertion is this test's failure, with its message.
    let ran: usize = watchers
        .into_iter()
        .map(|t| {
            t.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
        .sum();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    // Not a property, but without any EXEC that ran the test would check nothing.
    assert!(ran > 0, "every EXEC was aborted");
}

/// A watched key created and deleted again after a SWAPDB or a flush: EXEC fails, as in
/// Redis (whose SET of the key touches the watch). Before the map's change was counted,
/// EXEC compared the key's bucket of deletions in another stored database, where the count
/// could match: the block ran.
#[test]
fn watch_aborts_exec_across_a_swapdb_or_a_flush() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut other = server.client();
    for change in [
        &["SWAPDB", "0", "1"][..],
        &["FLUSHDB"][..],
        &["FLUSHALL"][..],
    ] {
        // The key once existed, so its bucket counts a deletion in this database.
        ok(raw_value(&mut other, &["SET", "k", "old"]));
        assert_eq!(q::<i64>(&mut other, &["DEL", "k"]), 1);
        ok(raw_value(&mut c, &["WATCH", "k"]));
        ok(raw_value(&mut other, change));
        ok(raw_value(&mut other, &["SET", "k", "new"]));
        assert_eq!(q::<i64>(&mut other, &["DEL", "k"]), 1);
        ok(raw_value(&mut c, &["MULTI"]));
        queued(&mut c, &["SET", "marker", "1"]);
        assert_eq!(raw_value(&mut c, &["EXEC"]), Value::Nil, "after {change:?}");
        assert_eq!(
            q::<i64>(&mut c, &["EXISTS", "marker"]),
            0,
            "after {change:?}"
        );
    }
}

/// Many clients incrementing one counter through WATCH/MULTI/EXEC with retries: no
/// increment is lost (optimistic locking works across connections and worker threads).
#[test]
fn watch_based_increments_are_not_lost() {
    let server = TestServer::start();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut c = server.client();
            std::thread::spawn(move || {
                let mut done = 0;
                let mut attempts = 0;
                while done < 50 {
                    attempts += 1;
                    assert!(attempts < 10_000, "too many aborted transactions");
                    ok(raw_value(&mut c, &["WATCH", "counter"]));
                    let current: Option<i64> = q(&mut c, &["GET", "counter"]);
                    let next = (current.unwrap_or(0) + 1).to_string();
                    ok(raw_value(&mut c, &["MULTI"]));
                    let _ = raw_value(&mut c, &["SET", "counter", &next]);
                    if raw_value(&mut c, &["EXEC"]) != Value::Nil {
                        done += 1;
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["GET", "counter"]), 200);
}

// ---------------------------------------------------------------------------------------
// the protocol, byte by byte

#[test]
fn inline_commands() {
    let server = TestServer::start();
    let mut s = server.raw();
    exchange(&mut s, b"PING\r\n", b"+PONG\r\n");
    exchange(&mut s, b"PING\n", b"+PONG\r\n");
    exchange(&mut s, b"SET a \"b c\"\r\n", b"+OK\r\n");
    exchange(&mut s, b"GET a\r\n", b"$3\r\nb c\r\n");
    exchange(
        &mut s,
        b"SET q 'it''s'\r\n",
        b"-ERR Protocol error: unbalanced quotes in request\r\n",
    );
    assert!(closed_by_server(&mut s));

    let mut s = server.raw();
    exchange(&mut s, b"\r\n\r\nSET e \"x\\ty\\x41\"\r\n", b"+OK\r\n");
    exchange(&mut s, b"GET e\r\n", b"$4\r\nx\tyA\r\n");
    exchange(&mut s, b"  ECHO   spaced   \r\n", b"$6\r\nspaced\r\n");
    exchange(
        &mut s,
        b"SET u \"open\r\n",
        b"-ERR Protocol error: unbalanced quotes in request\r\n",
    );
    assert!(closed_by_server(&mut s));
}

#[test]
fn pipelined_commands_in_one_write() {
    let server = TestServer::start();
    let mut s = server.raw();
    let mut request = Vec::new();
    let mut expected = Vec::new();
    for i in 1..=1000 {
        if i % 2 == 1 {
            request.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$7\r\ncounter\r\n");
            expected.extend_from_slice(format!(":{}\r\n", i / 2 + 1).as_bytes());
        } else {
            let value = format!("v{i}");
            request.extend_from_slice(
                format!(
                    "*3\r\n$3\r\nSET\r\n${}\r\nk{i}\r\n${}\r\n{value}\r\n",
                    format!("k{i}").len(),
                    value.len()
                )
                .as_bytes(),
            );
            expected.extend_from_slice(b"+OK\r\n");
        }
    }
    request.extend_from_slice(b"GET k1000\r\n");
    expected.extend_from_slice(b"$5\r\nv1000\r\n");
    exchange(&mut s, &request, &expected);
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["GET", "counter"]), 500);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 501);
}

#[test]
fn a_request_split_into_single_bytes() {
    let server = TestServer::start();
    let mut s = server.raw();
    let request = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$11\r\nhello world\r\n*2\r\n$3\r\nGET\r\n$3\r\nkey\r\nPING\r\n";
    for (i, byte) in request.iter().enumerate() {
        s.write_all(&[*byte]).unwrap();
        if i % 4 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    expect_bytes(&mut s, b"+OK\r\n$11\r\nhello world\r\n+PONG\r\n");
}

#[test]
fn command_errors_keep_the_connection() {
    let server = TestServer::start();
    let mut s = server.raw();
    exchange(
        &mut s,
        b"*3\r\n$6\r\nFOOBAR\r\n$1\r\na\r\n$2\r\nbc\r\n",
        b"-ERR unknown command 'FOOBAR', with args beginning with: 'a' 'bc' \r\n",
    );
    exchange(
        &mut s,
        b"foobar\r\n",
        b"-ERR unknown command 'foobar', with args beginning with: \r\n",
    );
    exchange(
        &mut s,
        b"*1\r\n$3\r\nGET\r\n",
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    exchange(
        &mut s,
        b"GeT a b\r\n",
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    exchange(&mut s, b"*0\r\n*-1\r\nPING\r\n", b"+PONG\r\n");
    exchange(&mut s, b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n");
}

/// Each malformed request gets Redis's protocol error text, then the connection is closed;
/// the server goes on serving others.
#[test]
fn protocol_errors_close_the_connection() {
    let server = TestServer::start();
    let cases: &[(&[u8], &[u8])] = &[
        (
            b"*1\r\n$x\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$-1\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\nPING\r\n",
            b"-ERR Protocol error: expected '$', got 'P'\r\n",
        ),
        (
            b"*x\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*2147483648\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
    ];
    // Replies to the commands before the error still arrive, in order.
    let mut s = server.raw();
    exchange(
        &mut s,
        b"PING\r\n*1\r\n$4\r\nECHO\r\n*1\r\n$x\r\nPING\r\n",
        b"+PONG\r\n-ERR wrong number of arguments for 'echo' command\r\n-ERR Protocol error: invalid bulk length\r\n",
    );
    assert!(closed_by_server(&mut s));
    for (request, reply) in cases {
        let mut s = server.raw();
        exchange(&mut s, b"PING\r\n", b"+PONG\r\n");
        exchange(&mut s, request, reply);
        assert!(
            closed_by_server(&mut s),
            "connection left open after {:?}",
            String::from_utf8_lossy(request)
        );
    }
    // An inline request without a newline longer than 64 KiB.
    let mut s = server.raw();
    let mut long = vec![b'a'; 70 * 1024];
    long.extend_from_slice(b"\r\n");
    s.write_all(&long).unwrap();
    expect_bytes(&mut s, b"-ERR Protocol error: too big inline request\r\n");
    assert!(closed_by_server(&mut s));
    let mut c = server.client();
    assert_eq!(
        raw_value(&mut c, &["PING"]),
        Value::SimpleString("PONG".into())
    );
}

/// Sets `big` to 64 KiB, then pipelines `n` GETs of it on a raw connection (from another
/// thread, so the replies can back up) followed by `end` (more requests, or nothing), and
/// shuts the writing side down if `half_close`. Returns the connection once the `n` replies
/// have been read, in order and complete.
fn read_pipelined_gets_of_64_kib(
    server: &TestServer,
    n: usize,
    end: &'static [u8],
    half_close: bool,
) -> TcpStream {
    let mut c = server.client();
    let value = vec![b'x'; 64 * 1024];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&value)
        .query(&mut c)
        .unwrap();
    let mut s = server.raw();
    let writer = {
        let mut s = s.try_clone().unwrap();
        std::thread::spawn(move || {
            s.write_all(&b"GET big\r\n".repeat(n)).unwrap();
            s.write_all(end).unwrap();
            if half_close {
                s.shutdown(std::net::Shutdown::Write).unwrap();
            }
        })
    };
    let mut header = b"$65536\r\n".to_vec();
    header.extend_from_slice(&value);
    header.extend_from_slice(b"\r\n");
    for _ in 0..n {
        expect_bytes(&mut s, &header);
    }
    writer.join().unwrap();
    s
}

/// Replies stay in order and complete when a client pipelines more than it reads, and QUIT
/// answers OK, then closes.
#[test]
fn quit_and_a_large_pipeline_of_reads() {
    let server = TestServer::start();
    let mut s = read_pipelined_gets_of_64_kib(&server, 300, b"QUIT\r\n", false);
    expect_bytes(&mut s, b"+OK\r\n");
    assert!(closed_by_server(&mut s));
}

/// A client that pipelines more reads than the output may hold (64 MiB) and then shuts its
/// side down still gets every reply: the server closes only once all it sent is served.
#[test]
fn a_half_closed_client_gets_every_reply_past_the_output_limit() {
    let server = TestServer::start();
    // 1100 × 64 KiB ≈ 69 MiB of replies.
    let mut s = read_pipelined_gets_of_64_kib(&server, 1100, b"", true);
    assert!(closed_by_server(&mut s));
}

/// Runs `round` on 20 fresh raw connections to one server, each with a short read timeout:
/// the tests of how the server drains a socket repeat so that what they send reaches the
/// server in one piece at least some of the time.
fn on_twenty_connections(round: impl Fn(&mut TcpStream)) {
    let server = TestServer::start();
    for _ in 0..20 {
        let mut s = server.raw();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        round(&mut s);
    }
}

/// Requests sent together with the end of the stream are answered, and the connection is then
/// closed. The server stops reading a socket at a short read (the queue is empty), which would
/// lose a FIN that arrived with the data if the poll's report of it were not kept: the
/// connection would stay open after its replies.
#[test]
fn requests_sent_with_the_end_of_the_stream_are_answered_and_the_connection_closed() {
    on_twenty_connections(|s| {
        s.write_all(b"PING\r\nECHO end\r\n").unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        expect_bytes(s, b"+PONG\r\n$3\r\nend\r\n");
        assert!(
            closed_by_server(s),
            "the server kept the connection open after the end of the stream"
        );
    });
}

/// A client's TCP urgent data does not strand the requests that follow it. A read stops at
/// the urgent mark with the rest of the stream still queued, and no new wake-up comes for
/// that rest: the server must go on reading such a connection until the socket is empty.
/// (The urgent byte itself is taken out of the stream, as Redis's reads do too.)
#[test]
fn requests_after_urgent_data_are_served() {
    on_twenty_connections(|s| {
        rustix::net::send(&*s, b"PING\r\nX", rustix::net::SendFlags::OOB).unwrap();
        s.write_all(b"ECHO after\r\n").unwrap();
        expect_bytes(s, b"+PONG\r\n$5\r\nafter\r\n");
    });
}

// ---------------------------------------------------------------------------------------
// limits

/// The soft limit on open files, from /proc/self/limits.
fn open_file_limit() -> usize {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1024)
}

#[test]
fn a_thousand_connections_held_and_served() {
    let server = TestServer::start();
    // Each connection costs two descriptors here (client and server end).
    let wanted = 1000;
    let fit = open_file_limit().saturating_sub(200) / 2;
    let n = wanted.min(fit);
    if n < wanted {
        eprintln!(
            "open-file limit {}: holding {n} connections, not {wanted}",
            open_file_limit()
        );
    }
    let mut streams: Vec<TcpStream> = (0..n)
        .map(|i| {
            TcpStream::connect(server.address()).unwrap_or_else(|e| panic!("connection {i}: {e}"))
        })
        .collect();
    for s in &streams {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    }
    // Every connection sends before any reads: all are open and waiting at once.
    for (i, s) in streams.iter_mut().enumerate() {
        s.write_all(format!("SET conn:{i} {i}\r\n").as_bytes())
            .unwrap();
    }
    for s in &mut streams {
        expect_bytes(s, b"+OK\r\n");
    }
    for (i, s) in streams.iter_mut().enumerate() {
        let value = i.to_string();
        exchange(s, b"PING\r\nGET conn:0\r\n", b"+PONG\r\n$1\r\n0\r\n");
        exchange(
            s,
            format!("GET conn:{i}\r\n").as_bytes(),
            format!("${}\r\n{value}\r\n", value.len()).as_bytes(),
        );
    }
    let mut c = server.client();
    let info: String = q(&mut c, &["INFO", "clients"]);
    assert!(
        info.contains(&format!("connected_clients:{}\r\n", n + 1)),
        "{info}"
    );
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), n as i64);
    drop(streams);
    let all_closed = eventually(Duration::from_secs(10), || {
        q::<String>(&mut c, &["INFO", "clients"]).contains("connected_clients:1\r\n")
    });
    assert!(all_closed, "closed connections are still counted");
}

#[test]
fn max_clients_refuses_the_next_one() {
    let server = TestServer::with(Options {
        max_clients: 5,
        ..Options::default()
    });
    let mut held: Vec<TcpStream> = (0..5).map(|_| server.raw()).collect();
    for s in &mut held {
        exchange(s, b"PING\r\n", b"+PONG\r\n");
    }
    let mut sixth = server.raw();
    expect_bytes(&mut sixth, b"-ERR max number of clients reached\r\n");
    assert!(closed_by_server(&mut sixth));
    // The refusal did not take a place: after one leaves, a new one is served.
    drop(held.pop());
    let served = eventually(Duration::from_secs(5), || {
        let mut s = server.raw();
        s.write_all(b"PING\r\n").unwrap();
        read_exactly(&mut s, 7) == b"+PONG\r\n"
    });
    assert!(served, "no place freed after a client left");
    for s in &mut held {
        exchange(s, b"PING\r\n", b"+PONG\r\n");
    }
}

/// Resident and virtual memory of this process (the server runs in it), in KiB.
fn memory_kib() -> (u64, u64) {
    (proc_status_kib("VmRSS"), proc_status_kib("VmSize"))
}

#[track_caller]
fn assert_memory_within(before: (u64, u64), what: &str) {
    let after = memory_kib();
    let rss_growth = after.0.saturating_sub(before.0);
    let virtual_growth = after.1.saturating_sub(before.1);
    assert!(
        rss_growth < 64 << 10,
        "{what}: resident memory grew by {} MiB",
        rss_growth >> 10
    );
    // Reserving the announced length without touching it shows in the address space only.
    assert!(
        virtual_growth < 256 << 10,
        "{what}: address space grew by {} MiB",
        virtual_growth >> 10
    );
}

#[test]
fn a_two_gib_bulk_header_is_refused_without_allocating() {
    let server = TestServer::with(Options {
        exclusive: true,
        ..Options::default()
    });
    let mut c = server.client();
    assert_eq!(
        raw_value(&mut c, &["PING"]),
        Value::SimpleString("PONG".into())
    );
    let before = memory_kib();
    for header in [
        &b"*2\r\n$3\r\nGET\r\n$2147483648\r\n"[..],
        b"*2\r\n$3\r\nSET\r\n$536870913\r\n",
        b"*2\r\n$3\r\nGET\r\n$99999999999999999999999\r\n",
    ] {
        let mut s = server.raw();
        exchange(
            &mut s,
            header,
            b"-ERR Protocol error: invalid bulk length\r\n",
        );
        assert!(closed_by_server(&mut s));
    }
    assert_memory_within(before, "after 2 GiB bulk headers");
    assert_eq!(
        raw_value(&mut c, &["PING"]),
        Value::SimpleString("PONG".into())
    );
}

#[test]
fn announced_lengths_are_not_allocated_before_the_bytes_arrive() {
    let server = TestServer::with(Options {
        exclusive: true,
        ..Options::default()
    });
    let mut c = server.client();
    assert_eq!(
        raw_value(&mut c, &["PING"]),
        Value::SimpleString("PONG".into())
    );
    let before = memory_kib();
    // Just under max_bulk, and a huge argument count; a few bytes of each, then silence.
    let mut bulk = server.raw();
    bulk.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870000\r\nabc")
        .unwrap();
    let mut args = server.raw();
    args.write_all(b"*1000000000\r\n$4\r\nPING\r\n").unwrap();
    let mut both = server.raw();
    both.write_all(b"*2000000000\r\n$536870000\r\nxyz").unwrap();
    // Let the server read them; a later command on another connection is served meanwhile.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        raw_value(&mut c, &["PING"]),
        Value::SimpleString("PONG".into())
    );
    assert_memory_within(before, "with 512 MiB bulks and 10^9 arguments announced");
    // The partial SET never happened; closing the connections frees them.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]), 0);
    drop((bulk, args, both));
    let closed = eventually(Duration::from_secs(5), || {
        q::<String>(&mut c, &["INFO", "clients"]).contains("connected_clients:1\r\n")
    });
    assert!(closed);
    assert_memory_within(before, "after those connections closed");
}

/// `$<len>\r\n<value>\r\n` for each value.
fn bulks(values: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for value in values {
        out.extend_from_slice(format!("${}\r\n", value.len()).as_bytes());
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The numeric `field` of `client`'s line in CLIENT LIST (asked on `lister`).
fn client_list_field(lister: &mut redis::Connection, client: &TcpStream, field: &str) -> usize {
    let addr = format!("addr={} ", client.local_addr().expect("local address"));
    let list: String = q(lister, &["CLIENT", "LIST"]);
    let line = list
        .lines()
        .find(|line| line.contains(&addr))
        .unwrap_or_else(|| panic!("no {addr}in {list}"));
    let prefix = format!("{field}=");
    line.split(' ')
        .find_map(|f| f.strip_prefix(prefix.as_str()))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no numeric {field} in {line}"))
}

/// The arguments read of a command not all arrived are held once, as arguments, not also in
/// the client's input: CLIENT LIST's `qbuf` stays small while `argv-mem` grows (as in Redis),
/// and the command, once whole, gets its arguments intact.
#[test]
fn an_unfinished_commands_arguments_are_held_once() {
    let server = TestServer::start();
    let mut lister = server.client();
    let values: Vec<Vec<u8>> = (0..6u8).map(|n| vec![b'a' + n; 1 << 20]).collect();
    let mut s = server.raw();
    s.write_all(b"*8\r\n$5\r\nRPUSH\r\n$4\r\nlist\r\n").unwrap();
    s.write_all(&bulks(&values[..5])).unwrap();
    let argv = 5 + 4 + (5 << 20);
    let read_all = eventually(Duration::from_secs(10), || {
        client_list_field(&mut lister, &s, "argv-mem") == argv
    });
    assert!(read_all, "the five values were not all read");
    let qbuf = client_list_field(&mut lister, &s, "qbuf");
    let total = client_list_field(&mut lister, &s, "tot-mem");
    assert!(
        qbuf < 64 << 10,
        "qbuf={qbuf} with {argv} bytes of arguments read"
    );
    assert!(
        total < argv + (2 << 20),
        "tot-mem={total} with {argv} bytes of arguments read"
    );
    exchange(&mut s, &bulks(&values[5..]), b":6\r\n");
    for (at, value) in values.iter().enumerate() {
        let got: Vec<u8> = q(&mut lister, &["LINDEX", "list", &at.to_string()]);
        assert!(got == *value, "element {at} differs");
    }
}

/// A reply buffer that a large reply grew is given back once the reply is written: a
/// connection that read a large value and then idles (a pooled one) does not go on holding
/// the value's size. CLIENT LIST's `rbs` is the buffer's size.
#[test]
fn a_reply_buffer_grown_by_a_large_reply_is_given_back() {
    let server = TestServer::start();
    let mut lister = server.client();
    let value = vec![b'v'; 6 << 20];
    exchange(
        &mut server.raw(),
        &[
            b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n".as_slice(),
            &bulks(std::slice::from_ref(&value)),
        ]
        .concat(),
        b"+OK\r\n",
    );
    let mut s = server.raw();
    exchange(
        &mut s,
        b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n",
        &bulks(&[value]),
    );
    let given_back = eventually(Duration::from_secs(10), || {
        client_list_field(&mut lister, &s, "rbs") <= 1 << 20
    });
    let rbs = client_list_field(&mut lister, &s, "rbs");
    assert!(given_back, "rbs={rbs} after a 6 MiB reply was written");
    exchange(&mut s, b"PING\r\n", b"+PONG\r\n");
}

/// A client whose unfinished command holds more than the query limit (Redis's
/// `client-query-buffer-limit`) is closed, and the others are served on.
#[test]
fn a_client_past_the_query_limit_is_closed() {
    let server = TestServer::with(Options {
        query_limit: 8 << 20,
        ..Options::default()
    });
    let mut c = server.client();
    let mut s = server.raw();
    closed_past_an_8_mib_limit(&mut c, &mut s);
}

/// `client-query-buffer-limit` is Redis's CONFIG setting too: CONFIG GET gives it in bytes,
/// CONFIG SET takes Redis's memory values and refuses others with Redis's words (as Redis
/// 7.0 does, checked by hand), and a limit set so holds for the clients already connected.
#[test]
fn the_query_limit_is_a_config_setting() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut s = server.raw();
    let limit = |c: &mut redis::Connection| -> Vec<String> {
        q(c, &["CONFIG", "GET", "client-query-buffer-limit"])
    };
    assert_eq!(limit(&mut c), ["client-query-buffer-limit", "1073741824"]);
    let prefix = "ERR CONFIG SET failed (possibly related to argument 'client-query-buffer-limit')";
    let range = "argument must be between 1048576 and 9223372036854775807 inclusive";
    let memory = "argument must be a memory value";
    for (value, why) in [
        ("100", range),
        ("1m", range),
        ("9223372036854775808", range),
        ("99999999999999999999", range),
        ("1.5mb", memory),
        ("-1", memory),
        ("8 mb", memory),
    ] {
        let refused = err(
            &mut c,
            &["CONFIG", "SET", "client-query-buffer-limit", value],
        );
        assert_eq!(
            refused,
            format!("{prefix} - {why}"),
            "CONFIG SET to {value:?}"
        );
    }
    assert_eq!(limit(&mut c), ["client-query-buffer-limit", "1073741824"]);
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "client-query-buffer-limit", "8MB"],
    );
    assert_eq!(limit(&mut c), ["client-query-buffer-limit", "8388608"]);
    closed_past_an_8_mib_limit(&mut c, &mut s);
}

/// `s` sends 16 MiB of a command it never finishes: the server, whose query limit is
/// 8 MiB, closes it and serves `c` on.
fn closed_past_an_8_mib_limit(c: &mut redis::Connection, s: &mut TcpStream) {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let value = bulks(&[vec![b'v'; 1 << 20]]);
    // The server may close the connection before it is all sent.
    let mut open = s.write_all(b"*100000000\r\n").is_ok();
    for _ in 0..16 {
        open = open && s.write_all(&value).is_ok();
    }
    assert!(
        closed_by_server(s),
        "a client holding 16 MiB of an unfinished command is not closed (limit 8 MiB)"
    );
    let closed = eventually(Duration::from_secs(5), || {
        q::<String>(c, &["INFO", "clients"]).contains("connected_clients:1\r\n")
    });
    assert!(closed, "the client is still listed");
    assert_eq!(raw_value(c, &["PING"]), Value::SimpleString("PONG".into()));
}

/// The CPU time this process has used (user + system), from /proc/self/stat.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name (which is in parentheses): utime and stime are 14 and 15.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// A client that sends requests without reading the replies: the server stops reading it
/// once its unsent replies pass the high-water mark (memory stays bounded), does not spin
/// while it waits, and delivers every reply once the client reads.
#[test]
fn a_client_that_does_not_read_is_bounded() {
    let server = TestServer::with(Options {
        exclusive: true,
        ..Options::default()
    });
    let mut c = server.client();
    let value: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&value)
        .query(&mut c)
        .unwrap();
    let n = 300; // 300 MB of replies
    let mut s = server.raw();
    let before = memory_kib();
    s.write_all(&b"GET big\r\n".repeat(n)).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let cpu_before = cpu_time();
    std::thread::sleep(Duration::from_secs(1));
    let busy = cpu_time().saturating_sub(cpu_before);
    let grown = proc_status_kib("VmRSS").saturating_sub(before.0);
    // Others are still served meanwhile.
    assert_eq!(
        raw_value(&mut c, &["PING"]),
        Value::SimpleString("PONG".into())
    );
    assert!(
        grown < 160 << 10,
        "resident memory grew by {} MiB for a client that does not read",
        grown >> 10
    );
    assert!(
        busy < Duration::from_millis(200),
        "the server used {busy:?} of CPU in 1 s waiting for a client to read"
    );
    let mut reply = format!("${}\r\n", value.len()).into_bytes();
    reply.extend_from_slice(&value);
    reply.extend_from_slice(b"\r\n");
    for i in 0..n {
        let got = read_exactly(&mut s, reply.len());
        assert!(got == reply, "reply {i} of {n} differs");
    }
    exchange(&mut s, b"PING\r\n", b"+PONG\r\n");
}

/// Readers of a value cut into parts, while writers replace it with values of other sizes:
/// every read sees one whole value, never a mix and never an error (an optimistic
/// transaction that read parts of two versions is retried, not reported as corruption).
#[test]
fn reads_of_a_value_rewritten_concurrently_are_whole() {
    let server = TestServer::start();
    let values: Vec<Vec<u8>> = [150_000usize, 20_000, 60_000, 5]
        .iter()
        .enumerate()
        .map(|(n, len)| vec![b'a' + n as u8; *len])
        .collect();
    let mut c = server.client();
    let _: () = redis::cmd("SET")
        .arg("v")
        .arg(&values[0])
        .query(&mut c)
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let mut c = server.client();
            let values = values.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut i = w;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let value = &values[i % values.len()];
                    let reply: Result<Value, _> =
                        redis::cmd("SET").arg("v").arg(value).query(&mut c);
                    if let Err(e) = reply {
                        return Err(format!("SET: {e}"));
                    }
                    let reply: Result<Value, _> = redis::cmd("APPEND")
                        .arg("w")
                        .arg(&value[..1000.min(value.len())])
                        .query(&mut c);
                    if let Err(e) = reply {
                        return Err(format!("APPEND: {e}"));
                    }
                    i += 1;
                }
                Ok(())
            })
        })
        .collect();
    let started = Instant::now();
    let mut reads = 0;
    while started.elapsed() < Duration::from_secs(3) {
        let got: Vec<u8> = match redis::cmd("GET").arg("v").query(&mut c) {
            Ok(got) => got,
            Err(e) => panic!("GET failed after {reads} reads: {e}"),
        };
        assert!(
            values.contains(&got),
            "GET returned a value of {} bytes that was never written",
            got.len()
        );
        let _: Option<Vec<u8>> = match redis::cmd("GETRANGE").arg("w").arg(0).arg(-1).query(&mut c)
        {
            Ok(got) => got,
            Err(e) => panic!("GETRANGE failed after {reads} reads: {e}"),
        };
        reads += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap().unwrap();
    }
}

/// Key commands on every kind, and string commands on keys of other kinds.
#[test]
fn keys_of_every_kind() {
    const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    let server = TestServer::start();
    let mut c = server.client();
    ok(raw_value(&mut c, &["SET", "s", "v"]));
    assert_eq!(q::<i64>(&mut c, &["HSET", "h", "f1", "a", "f2", "b"]), 2);
    assert_eq!(q::<i64>(&mut c, &["RPUSH", "l", "x", "y", "z"]), 3);
    assert_eq!(q::<i64>(&mut c, &["SADD", "st", "m1", "m2"]), 2);
    assert_eq!(
        q::<i64>(&mut c, &["ZADD", "z", "1.5", "one", "2", "two"]),
        2
    );
    for (key, kind) in [
        ("s", "string"),
        ("h", "hash"),
        ("l", "list"),
        ("st", "set"),
        ("z", "zset"),
    ] {
        assert_eq!(q::<String>(&mut c, &["TYPE", key]), kind);
    }
    for args in [
        &["GET", "h"][..],
        &["INCR", "l"],
        &["INCRBYFLOAT", "z", "1"],
        &["APPEND", "st", "x"],
        &["STRLEN", "h"],
        &["GETRANGE", "l", "0", "-1"],
        &["SETRANGE", "z", "0", "x"],
        &["GETSET", "h", "x"],
        &["GETDEL", "l"],
        &["SET", "h", "x", "GET"],
    ] {
        assert_eq!(err(&mut c, args), WRONGTYPE, "{args:?}");
    }
    // Nothing was written by the refused commands.
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "hash");
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "0", "-1"]),
        ["x", "y", "z"]
    );
    // MGET answers nil for other kinds.
    let values: Vec<Option<String>> = q(&mut c, &["MGET", "s", "h", "l"]);
    assert_eq!(values, [Some("v".into()), None, None]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s", "h", "l", "st", "z"]), 5);
    let mut kinds = scan_all(&mut c, &["TYPE", "hash"]);
    kinds.extend(scan_all(&mut c, &["TYPE", "zset"]));
    assert_eq!(kinds, ["h", "z"]);

    // RENAME moves a collection whole, with its TTL.
    assert_eq!(q::<i64>(&mut c, &["EXPIRE", "h", "100"]), 1);
    ok(raw_value(&mut c, &["RENAME", "h", "h2"]));
    let mut fields: Vec<String> = q(&mut c, &["HGETALL", "h2"]);
    fields.sort();
    assert_eq!(fields, ["a", "b", "f1", "f2"]);
    assert!(q::<i64>(&mut c, &["TTL", "h2"]) > 90);
    ok(raw_value(&mut c, &["RENAME", "l", "l2"]));
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l2", "0", "-1"]),
        ["x", "y", "z"]
    );
    ok(raw_value(&mut c, &["RENAME", "z", "z2"]));
    assert_eq!(raw_value(&mut c, &["ZSCORE", "z2", "one"]), bulk("1.5"));
    ok(raw_value(&mut c, &["RENAME", "st", "st2"]));
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "st2", "m2"]), 1);
    // RENAME over a key of another kind replaces it.
    ok(raw_value(&mut c, &["RENAME", "s", "l2"]));
    assert_eq!(q::<String>(&mut c, &["GET", "l2"]), "v");
    // SET replaces a collection; the old elements leave no rows behind.
    ok(raw_value(&mut c, &["SET", "z2", "now a string"]));
    assert_eq!(q::<String>(&mut c, &["TYPE", "z2"]), "string");
    assert_eq!(stored_rows(&server, "kv_zset"), 0);
    assert_eq!(q::<i64>(&mut c, &["DEL", "h2", "st2", "l2", "z2"]), 4);
    assert_eq!(stored_rows(&server, "kv_keys"), 0);
    assert_eq!(stored_rows(&server, "kv_parts"), 0);
    assert_eq!(stored_rows(&server, "kv_expiry"), 0);

    // A collection with a TTL is removed whole by the active expiry.
    assert_eq!(q::<i64>(&mut c, &["HSET", "eh", "f", "v"]), 1);
    assert_eq!(q::<i64>(&mut c, &["ZADD", "ez", "1", "m"]), 1);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "eh", "50"]), 1);
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", "ez", "50"]), 1);
    let gone = eventually(Duration::from_secs(2), || {
        stored_rows(&server, "kv_keys") == 0
            && stored_rows(&server, "kv_parts") == 0
            && stored_rows(&server, "kv_zset") == 0
    });
    assert!(gone, "an expired collection left rows behind");
    // FLUSHALL removes every kind's rows.
    assert_eq!(q::<i64>(&mut c, &["ZADD", "fz", "1", "m"]), 1);
    assert_eq!(q::<i64>(&mut c, &["LPUSH", "fl", "a"]), 1);
    ok(raw_value(&mut c, &["FLUSHALL"]));
    assert!(
        all_keys_freed(&server),
        "a flushed database's rows were left"
    );
}

/// A score is a Double in RESP3 and Redis's text in a bulk string in RESP2.
#[test]
fn doubles_in_resp2_and_resp3() {
    let server = TestServer::start();
    let mut s = server.raw();
    exchange(&mut s, b"ZADD z 2.5 m\r\n", b":1\r\n");
    exchange(&mut s, b"ZSCORE z m\r\n", b"$3\r\n2.5\r\n");
    exchange(&mut s, b"ZSCORE z nosuch\r\n", b"$-1\r\n");
    hello3(&mut s);
    exchange(&mut s, b"ZSCORE z m\r\n", b",2.5\r\n");
    exchange(&mut s, b"ZSCORE z nosuch\r\n", b"_\r\n");
    let mut c = server.client3();
    assert_eq!(raw_value(&mut c, &["ZSCORE", "z", "m"]), Value::Double(2.5));
}

/// A value too large for one transaction of this configuration (here: its log record is
/// larger than half the log's ring) is refused with an error, and the database goes on
/// accepting writes: one client's command must not stop the server.
#[test]
fn a_value_too_large_for_one_commit_is_refused_without_stopping_the_database() {
    let server = TestServer::start();
    let mut c = server.client();
    let value = vec![b'x'; 8 << 20];
    let outcome: redis::RedisResult<Value> = redis::cmd("SET").arg("big").arg(&value).query(&mut c);
    if let Err(e) = &outcome {
        eprintln!("SET of 8 MiB refused: {e}");
    }
    ok(raw_value(&mut c, &["SET", "after", "ok"]));
    assert_eq!(q::<String>(&mut c, &["GET", "after"]), "ok");
    match outcome {
        Ok(_) => assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "big"]), value),
        Err(_) => assert_eq!(q::<i64>(&mut c, &["EXISTS", "big"]), 0),
    }
}

/// An EXEC block whose writes together exceed what one commit may log (8 MiB here) is
/// refused as a whole, even though each command alone fits: nothing of it happens, and the
/// server goes on. (Hash values: a long string is written in pieces of its own, decision
/// 148, so two 5 MiB SETs in one block commit.)
#[test]
fn an_exec_block_larger_than_a_commit_changes_nothing() {
    let server = TestServer::start();
    let mut c = server.client();
    let value = "v".repeat(5 << 20);
    ok(raw_value(&mut c, &["MULTI"]));
    queued(&mut c, &["SET", "a", "1"]);
    queued(&mut c, &["HSET", "big1", "f", &value]);
    queued(&mut c, &["HSET", "big2", "f", &value]);
    queued(&mut c, &["SET", "c", "1"]);
    let outcome: redis::RedisResult<Value> = redis::cmd("EXEC").query(&mut c);
    let refused = match &outcome {
        Err(err) => err.to_string(),
        Ok(other) => panic!("EXEC answered {other:?}"),
    };
    assert!(refused.contains("transaction too large"), "{refused}");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "big1", "big2", "c"]), 0);
    ok(raw_value(&mut c, &["SET", "after", "ok"]));
}

/// Strings longer than a quarter of a commit are written in pieces, in transactions of
/// their own, under a new owner the key gets in the command's own transaction (decision
/// 148): a SET past the commit limit (8 MiB here) is stored and reads back, with its
/// deadline, KEEPTTL, an overwrite, APPEND, changes inside it (SETRANGE, SETBIT, BITOP),
/// RESTORE and an EXEC block of two; the lazy free,
/// run all the while, takes nothing of them, and frees the values they replace.
#[test]
fn strings_longer_than_a_commit_are_written_in_pieces() {
    let server = server_of_small_commits();
    let mut c = server.client();
    let limit = server.ks.database().max_commit_bytes();
    let freer = LazyFree::run(&server);
    let long = |seed: u8| -> Vec<u8> {
        (0..limit * 5 / 2)
            .map(|i| seed.wrapping_add((i % 251) as u8))
            .collect()
    };
    let set = |c: &mut redis::Connection, key: &str, value: &[u8], extra: &[&str]| {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value);
        for word in extra {
            cmd.arg(*word);
        }
        cmd.query::<Value>(c).unwrap()
    };
    let before = stored_rows(&server, "kv_parts");
    ok(set(&mut c, "s", &long(1), &["EX", "1000"]));
    assert!(
        q::<Vec<u8>>(&mut c, &["GET", "s"]) == long(1),
        "s reads back"
    );
    assert_eq!(q::<usize>(&mut c, &["STRLEN", "s"]), limit * 5 / 2);
    let ttl = q::<i64>(&mut c, &["TTL", "s"]);
    assert!((990..=1000).contains(&ttl), "{ttl}");
    ok(set(&mut c, "s", &long(2), &["KEEPTTL"]));
    assert!(
        q::<i64>(&mut c, &["TTL", "s"]) > 0,
        "KEEPTTL kept the deadline"
    );
    let got = q::<Vec<u8>>(&mut c, &["GET", "s"]);
    let first_difference = got.iter().zip(long(2)).position(|(a, b)| *a != b);
    assert!(
        got == long(2),
        "after SET … KEEPTTL: {} bytes, first difference at {first_difference:?}",
        got.len()
    );
    let appended: i64 = redis::cmd("APPEND")
        .arg("s")
        .arg(b"!")
        .query(&mut c)
        .unwrap();
    assert_eq!(appended as usize, limit * 5 / 2 + 1);
    assert_eq!(
        q::<Vec<u8>>(&mut c, &["GETRANGE", "s", "-2", "-1"]),
        vec![long(2)[limit * 5 / 2 - 1], b'!']
    );
    // In-place changes inside it, past the limit's offset: SETRANGE, SETBIT, BITOP.
    let offset = (limit + 10).to_string();
    assert_eq!(
        q::<usize>(&mut c, &["SETRANGE", "s", &offset, "#"]),
        limit * 5 / 2 + 1
    );
    q::<i64>(
        &mut c,
        &["SETBIT", "s", &((limit + 11) * 8).to_string(), "1"],
    );
    assert_eq!(
        q::<usize>(&mut c, &["BITOP", "NOT", "inverted", "s"]),
        limit * 5 / 2 + 1
    );
    assert_eq!(
        q::<Vec<u8>>(&mut c, &["GETRANGE", "s", &offset, &offset]),
        b"#"
    );
    q::<()>(&mut c, &["DEL", "inverted"]);
    let payload: Vec<u8> = redis::cmd("DUMP").arg("s").query(&mut c).unwrap();
    let restored: Value = redis::cmd("RESTORE")
        .arg("copy")
        .arg(0)
        .arg(&payload)
        .query(&mut c)
        .unwrap();
    ok(restored);
    assert!(q::<Vec<u8>>(&mut c, &["GET", "copy"]) == q::<Vec<u8>>(&mut c, &["GET", "s"]));
    ok(raw_value(&mut c, &["MULTI"]));
    for key in ["a", "b"] {
        let reply: Value = redis::cmd("SET")
            .arg(key)
            .arg(long(3))
            .query(&mut c)
            .unwrap();
        assert_eq!(reply, Value::SimpleString("QUEUED".into()));
    }
    let replies: Vec<Value> = redis::cmd("EXEC").query(&mut c).unwrap();
    assert_eq!(replies, vec![Value::Okay, Value::Okay]);
    assert!(q::<Vec<u8>>(&mut c, &["GET", "b"]) == long(3));
    // Short values over the long ones: what the long ones held is freed.
    for key in ["s", "copy", "a", "b"] {
        ok(raw_value(&mut c, &["SET", key, "short"]));
    }
    assert!(
        eventually(Duration::from_secs(30), || stored_rows(&server, "kv_parts")
            == before + 4),
        "{} part rows, {before} before the long strings and 4 short ones",
        stored_rows(&server, "kv_parts")
    );
    freer.stop();
}

/// An EXEC block of a thousand commands is one transaction, and all of it happens.
#[test]
fn a_large_exec_block() {
    let server = TestServer::start();
    let mut c = server.client();
    let value = "v".repeat(1000);
    ok(raw_value(&mut c, &["MULTI"]));
    for i in 0..1000 {
        let key = format!("k{i}");
        queued(&mut c, &["SET", &key, &value]);
    }
    queued(&mut c, &["INCR", "n"]);
    let Value::Array(replies) = raw_value(&mut c, &["EXEC"]) else {
        panic!("EXEC did not answer an array");
    };
    assert_eq!(replies.len(), 1001);
    assert!(replies[..1000].iter().all(|r| *r == Value::Okay));
    assert_eq!(replies[1000], Value::Int(1));
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]), 1001);
    assert_eq!(q::<String>(&mut c, &["GET", "k999"]), value);
}

/// QUIT answers OK and closes the connection: commands pipelined after it are not run.
/// RESET goes back to RESP2 and database 0.
#[test]
fn quit_and_reset() {
    let server = TestServer::start();
    let mut s = server.raw();
    exchange(&mut s, b"SET a 1\r\nQUIT\r\nSET b 2\r\n", b"+OK\r\n+OK\r\n");
    assert!(closed_by_server(&mut s));
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "a", "b"]), 1);

    let mut s = server.raw();
    hello3(&mut s);
    exchange(&mut s, b"SELECT 2\r\nGET a\r\n", b"+OK\r\n_\r\n");
    exchange(&mut s, b"MULTI\r\nRESET\r\n", b"+OK\r\n+RESET\r\n");
    exchange(&mut s, b"GET a\r\nGET b\r\n", b"$1\r\n1\r\n$-1\r\n");
    exchange(&mut s, b"EXEC\r\n", b"-ERR EXEC without MULTI\r\n");
}

/// DEL of a collection too large to delete in one commit answers at once; its elements are
/// freed in the background, and a new key of the same name never sees them. RENAME of such
/// a key moves it whole, however large.
#[test]
fn large_keys_are_deleted_lazily_and_renamed_whole() {
    let server = TestServer::start();
    let mut c = server.client();
    // 300,000 fields: ~14 MB of element keys, more than one commit may delete (8 MiB).
    for batch in 0..300 {
        let mut cmd = redis::cmd("HSET");
        cmd.arg("big");
        for i in 0..1000 {
            cmd.arg(format!("field:{:07}", batch * 1000 + i)).arg("v");
        }
        let added: i64 = cmd.query(&mut c).unwrap();
        assert_eq!(added, 1000);
    }
    assert_eq!(q::<i64>(&mut c, &["HLEN", "big"]), 300_000);
    ok(raw_value(&mut c, &["RENAME", "big", "moved"]));
    assert_eq!(q::<i64>(&mut c, &["HLEN", "moved"]), 300_000);
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "moved", "field:0123456"]),
        Some("v".to_string())
    );
    let parts_before = stored_rows(&server, "kv_parts");
    assert!(parts_before >= 300_000, "{parts_before} part rows");
    assert_eq!(q::<i64>(&mut c, &["DEL", "moved"]), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "moved"]), 0);
    // A new key of the same name starts empty while the old elements are still being freed.
    assert_eq!(q::<i64>(&mut c, &["HSET", "moved", "new", "1"]), 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "moved"]), 1);
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "moved", "field:0123456"]),
        None
    );
    let freed = eventually(Duration::from_secs(60), || {
        stored_rows(&server, "kv_parts") == 1 && stored_rows(&server, "kv_garbage") == 0
    });
    assert!(
        freed,
        "elements of the deleted key still stored: {} part rows, {} queued",
        stored_rows(&server, "kv_parts"),
        stored_rows(&server, "kv_garbage")
    );
}

/// Connections opened in a burst, before any of them sends a request (as redis-benchmark
/// opens its clients), are dealt to the event loops in turn rather than all served by the
/// loop that woke first.
#[test]
fn a_burst_of_connections_is_spread_over_the_event_loops() {
    let server = TestServer::with(Options {
        threads: 4,
        ..Options::default()
    });
    let streams: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(server.address()).expect("connect"))
        .collect();
    let mut c = server.client();
    let per_loop = |c: &mut redis::Connection| -> Vec<usize> {
        let info: String = q(c, &["INFO", "clients"]);
        let mut counts: Vec<usize> = info
            .lines()
            .find_map(|l| l.strip_prefix("tailstore_clients_per_loop:"))
            .unwrap_or_default()
            .split(',')
            .filter_map(|n| n.parse().ok())
            .collect();
        // Which loop serves the 41st connection (this one) depends on where turns began.
        counts.sort_unstable();
        counts
    };
    let spread = eventually(Duration::from_secs(10), || {
        per_loop(&mut c) == [10, 10, 10, 11]
    });
    assert!(spread, "connections per loop: {:?}", per_loop(&mut c));
    drop(streams);
}

/// Removing many large elements in one command once made a log record larger than the log
/// takes (the B+tree's merges log images of the leaves they empty), which stopped the
/// database: 40 list elements of 1 MiB and a DEL were enough. Deleting keys now frees large
/// ones through the queue, a SET over a long string too, and a command that removes too
/// much of one key at once rebuilds the key from what it keeps (an LTRIM, an HDEL of many
/// fields: decision 191; before it, they were refused); the database goes on in every case.
#[test]
fn removing_large_elements_never_stops_the_database() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut run = |args: &[&[u8]]| -> redis::RedisResult<Value> {
        let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(&mut con)
    };
    let element = |i: usize| format!("{i:02}").repeat(1 << 19).into_bytes(); // 1 MiB each
    let fill = |run: &mut dyn FnMut(&[&[u8]]) -> redis::RedisResult<Value>, key: &[u8]| {
        for i in 0..40 {
            run(&[b"rpush", key, &element(i)]).expect("RPUSH of 1 MiB");
        }
    };
    let still_writes = |run: &mut dyn FnMut(&[&[u8]]) -> redis::RedisResult<Value>| {
        let reply = run(&[b"set", b"probe", b"1"]);
        assert!(reply.is_ok(), "the database stopped: {reply:?}");
    };

    fill(&mut run, b"list");
    assert_eq!(run(&[b"del", b"list"]).expect("DEL"), Value::Int(1));
    still_writes(&mut run);

    fill(&mut run, b"list");
    // Past the commit limit: the list rebuilt from what it keeps (decision 191).
    assert_eq!(
        run(&[b"ltrim", b"list", b"1", b"1"]).expect("LTRIM of 39 MiB"),
        Value::Okay
    );
    assert_eq!(run(&[b"llen", b"list"]).expect("LLEN"), Value::Int(1));
    assert_eq!(
        run(&[b"lindex", b"list", b"0"]).expect("LINDEX"),
        Value::BulkString(element(1))
    );
    still_writes(&mut run);
    fill(&mut run, b"list");
    assert_eq!(
        run(&[b"ltrim", b"list", b"0", b"38"]).expect("LTRIM of two"),
        Value::Okay
    );

    for i in 0..40 {
        let field = format!("f{i}");
        run(&[b"hset", b"hash", field.as_bytes(), &element(i)]).expect("HSET of 1 MiB");
    }
    let fields: Vec<String> = (0..40).map(|i| format!("f{i}")).collect();
    let mut hdel: Vec<&[u8]> = vec![b"hdel", b"hash"];
    hdel.extend(fields.iter().map(|f| f.as_bytes()));
    assert_eq!(run(&hdel).expect("HDEL of 40 MiB"), Value::Int(40));
    assert_eq!(run(&[b"exists", b"hash"]).expect("EXISTS"), Value::Int(0));
    still_writes(&mut run);

    let long = "s".repeat(2 << 20);
    run(&[b"set", b"string", long.as_bytes()]).expect("SET of 2 MiB");
    for _ in 0..2 {
        run(&[b"append", b"string", long.as_bytes()]).expect("APPEND of 2 MiB");
    }
    run(&[b"set", b"other", long.as_bytes()]).expect("SET of 2 MiB");
    let mset = run(&[b"mset", b"string", b"x", b"other", b"y"]);
    assert_eq!(mset.expect("MSET over 6 MiB and 2 MiB"), Value::Okay);
    // The old string freed through the queue, its deadline stays with KEEPTTL.
    run(&[b"set", b"other", long.as_bytes(), b"ex", b"1000"]).expect("SET EX");
    run(&[b"set", b"other", b"z", b"keepttl"]).expect("SET KEEPTTL");
    assert_eq!(
        run(&[b"persist", b"other"]).expect("PERSIST"),
        Value::Int(1)
    );
    assert_eq!(run(&[b"get", b"other"]).expect("GET"), bulk("z"));

    fill(&mut run, b"again");
    assert_eq!(run(&[b"flushall"]).expect("FLUSHALL"), Value::Okay);
    assert_eq!(run(&[b"dbsize"]).expect("DBSIZE"), Value::Int(0));
    still_writes(&mut run);
}

/// Command statistics (`server/command_stats.rs`): every command's run time is recorded
/// per command (per subcommand of a container) on each event loop; INFO latencystats,
/// commandstats and errorstats and LATENCY HISTOGRAM merge the loops' figures; CONFIG
/// RESETSTAT empties them.
#[test]
fn command_statistics_report_each_command_that_ran() {
    let server = TestServer::start();
    // Two clients: on the two event loops, whose histograms the reports merge.
    let mut clients = [server.client(), server.client()];
    for (n, client) in clients.iter_mut().enumerate() {
        ok(raw_value(client, &["set", "k", &n.to_string()]));
        let _: i64 = q(client, &["client", "id"]);
    }
    let con = &mut server.client3(); // RESP3: the replies are maps
    let info: String = q(con, &["info", "latencystats"]);
    assert!(info.starts_with("# Latencystats\r\n"), "{info}");
    for name in ["set", "client|id", "hello"] {
        let line = format!("latency_percentiles_usec_{name}:p50=");
        assert!(info.contains(&line), "{name} missing: {info}");
    }
    let default: String = q(con, &["info"]);
    assert!(!default.contains("Latencystats"), "not a default section");
    let Value::Map(commands) = raw_value(con, &["latency", "histogram", "set", "client"]) else {
        panic!("LATENCY HISTOGRAM answers a map")
    };
    let names: Vec<Value> = commands.iter().map(|(name, _)| name.clone()).collect();
    // In the order named; CLIENT names each subcommand that ran (the client library
    // sends CLIENT SETINFO as it connects).
    assert_eq!(names[0], bulk("set"), "{names:?}");
    assert!(names.contains(&bulk("client|id")), "{names:?}");
    let subcommand =
        |name: &Value| matches!(name, Value::BulkString(b) if b.starts_with(b"client|"));
    assert!(names[1..].iter().all(subcommand), "{names:?}");
    let Value::Map(detail) = &commands[0].1 else {
        panic!("a command's map")
    };
    assert_eq!(
        detail[0],
        (bulk("calls"), Value::Int(2)),
        "one SET per loop"
    );
    let Value::Map(buckets) = &detail[1].1 else {
        panic!("histogram_usec's map")
    };
    assert_eq!(buckets.last().map(|(_, n)| n), Some(&Value::Int(2)));
    ok(raw_value(con, &["config", "resetstat"]));
    let Value::Map(commands) = raw_value(con, &["latency", "histogram", "set"]) else {
        panic!("a map")
    };
    assert!(commands.is_empty(), "reset: {commands:?}");
    // Calls, failures (an error reply) and refusals (a wrong number of arguments), and the
    // errors by their first word, in every section that Redis reports them in.
    let failed = err(con, &["lpush", "k", "x"]);
    assert!(failed.starts_with("WRONGTYPE"), "{failed}");
    assert!(err(con, &["get"]).starts_with("ERR wrong number"));
    let stats: String = q(con, &["info", "commandstats"]);
    assert!(
        stats.contains(
            "cmdstat_get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0\r\n"
        ),
        "{stats}"
    );
    assert!(stats.contains("cmdstat_lpush:calls=1,"), "{stats}");
    assert!(
        stats.contains(",rejected_calls=0,failed_calls=1\r\n"),
        "{stats}"
    );
    let default: String = q(con, &["info"]);
    assert!(
        default
            .contains("# Errorstats\r\nerrorstat_ERR:count=1\r\nerrorstat_WRONGTYPE:count=1\r\n"),
        "{default}"
    );
    assert!(default.contains("total_error_replies:2\r\n"), "{default}");
    assert!(!default.contains("Commandstats"), "not a default section");
}
