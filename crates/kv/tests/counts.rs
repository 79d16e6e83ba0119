//! DBSIZE and INFO's keyspace section answer from per-database counts kept by every write
//! (`kv_counts`, decision 73), not from a scan. These tests hold the counts against the keys
//! themselves: after random writes of every kind that creates, deletes, renames or expires
//! keys, after power cuts that recover the counts from the log, and for a database written
//! before the counts existed.

mod support;

use std::cell::RefCell;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redis::ConnectionLike;
use support::{command, open_sim_database, q, Options, TestServer};
use tailstore_engine::KeyRange;
use tailstore_log::CommitMode;
use tailstore_media::sim::SimStorage;
use tailstore_storage::ScanDirection;

/// The databases the random writes use.
const DATABASES: [u32; 2] = [0, 1];
/// The longest TTL a random write gives that may pass during the test, in milliseconds;
/// every other TTL is far longer than the test.
const SHORT_TTL_MS: u32 = 20;

fn key() -> impl Strategy<Value = String> {
    (0..6u8).prop_map(|k| format!("k{k}"))
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("v".to_string()),
        Just("value".to_string()),
        Just("7".to_string())
    ]
}

fn short_ttl() -> impl Strategy<Value = String> {
    (1..=SHORT_TTL_MS).prop_map(|ms| ms.to_string())
}

/// One write (or SELECT / MULTI / EXEC) as its words: everything that creates, deletes,
/// renames or re-times a key, on keys of every kind, so wrong-kind errors happen too.
fn step() -> BoxedStrategy<Vec<String>> {
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    prop_oneof![
        (key(), value()).prop_map(move |(k, v)| words(&["SET", &k, &v])),
        (key(), value(), short_ttl()).prop_map(move |(k, v, t)| words(&["SET", &k, &v, "PX", &t])),
        (key(), value()).prop_map(move |(k, v)| words(&["SET", &k, &v, "EX", "100000"])),
        (key(), value()).prop_map(move |(k, v)| words(&["SET", &k, &v, "KEEPTTL"])),
        (key(), value()).prop_map(move |(k, v)| words(&["SET", &k, &v, "NX"])),
        (key(), value()).prop_map(move |(k, v)| words(&["GETSET", &k, &v])),
        (key(), key()).prop_map(move |(a, b)| words(&["MSET", &a, "1", &b, "2"])),
        key().prop_map(move |k| words(&["INCR", &k])),
        (key(), value()).prop_map(move |(k, v)| words(&["APPEND", &k, &v])),
        key().prop_map(move |k| words(&["GETDEL", &k])),
        (key(), key()).prop_map(move |(a, b)| words(&["DEL", &a, &b])),
        key().prop_map(move |k| words(&["UNLINK", &k])),
        (key(), key()).prop_map(move |(a, b)| words(&["RENAME", &a, &b])),
        (key(), key()).prop_map(move |(a, b)| words(&["RENAMENX", &a, &b])),
        key().prop_map(move |k| words(&["EXPIRE", &k, "100000"])),
        (key(), short_ttl()).prop_map(move |(k, t)| words(&["PEXPIRE", &k, &t])),
        key().prop_map(move |k| words(&["EXPIRE", &k, "-1"])),
        key().prop_map(move |k| words(&["PERSIST", &k])),
        key().prop_map(move |k| words(&["HSET", &k, "f", "v"])),
        key().prop_map(move |k| words(&["HDEL", &k, "f"])),
        key().prop_map(move |k| words(&["RPUSH", &k, "a"])),
        key().prop_map(move |k| words(&["LPOP", &k])),
        key().prop_map(move |k| words(&["SADD", &k, "m"])),
        key().prop_map(move |k| words(&["SPOP", &k])),
        key().prop_map(move |k| words(&["ZADD", &k, "1", "m"])),
        key().prop_map(move |k| words(&["ZREM", &k, "m"])),
        (0..2u32).prop_map(move |db| words(&["SELECT", &db.to_string()])),
        Just(words(&["MULTI"])),
        Just(words(&["EXEC"])),
        Just(words(&["FLUSHDB"])),
    ]
    .boxed()
}

/// What the keys of the connection's database say: (keys, keys with a TTL), once every
/// short TTL given so far has passed (no key changes state while they are asked).
fn counted_from_keys(con: &mut redis::Connection) -> (u64, u64) {
    std::thread::sleep(Duration::from_millis(u64::from(SHORT_TTL_MS) + 5));
    let keys: Vec<String> = q(con, &["KEYS", "*"]);
    let with_ttl = keys
        .iter()
        .filter(|k| q::<i64>(con, &["PTTL", k]) >= 0)
        .count();
    (keys.len() as u64, with_ttl as u64)
}

/// (keys, expires) of `db` in INFO's keyspace section; (0, 0) when it has no line.
fn info_counts(con: &mut redis::Connection, db: u32) -> (u64, u64) {
    let info: String = q(con, &["INFO", "keyspace"]);
    let prefix = format!("db{db}:");
    let Some(line) = info.lines().find(|l| l.starts_with(&prefix)) else {
        return (0, 0);
    };
    let field = |name: &str| -> u64 {
        line[prefix.len()..]
            .split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
    };
    (field("keys"), field("expires"))
}

/// Checks DBSIZE and INFO keyspace against the keys of each database the tests use.
fn check_counts(server: &TestServer, when: &str) -> Result<(), TestCaseError> {
    let mut con = server.client();
    for db in DATABASES {
        q::<String>(&mut con, &["SELECT", &db.to_string()]);
        let (keys, with_ttl) = counted_from_keys(&mut con);
        let dbsize: u64 = q(&mut con, &["DBSIZE"]);
        prop_assert_eq!(dbsize, keys, "DBSIZE of db {} {}", db, when);
        let info = info_counts(&mut con, db);
        prop_assert_eq!(
            info,
            (keys, with_ttl),
            "INFO keyspace of db {} {}",
            db,
            when
        );
    }
    Ok(())
}

/// Random writes on one server, its counts checked after each sequence; every eighth
/// sequence ends in a power cut, and the counts the recovery rebuilt are checked too.
#[test]
fn dbsize_and_info_agree_with_the_keys_through_random_writes_and_power_cuts() {
    let storage = RefCell::new(SimStorage::new());
    let server = RefCell::new(Some(TestServer::on_sim(
        Options::default(),
        &storage.borrow(),
    )));
    let cases = RefCell::new(0u64);
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = runner.run(&prop::collection::vec(step(), 1..40), |steps| {
        let guard = server.borrow();
        let running = guard.as_ref().expect("a server runs between sequences");
        let mut con = running.client();
        for words in &steps {
            // Errors (wrong kinds, no such key, EXEC without MULTI) are part of the mix.
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            con.req_command(&command(&words))
                .map_err(|e| TestCaseError::fail(format!("{words:?}: {e}")))?;
        }
        // A MULTI left open would queue the next sequence's commands.
        let _ = con.req_command(&command(&["DISCARD"]));
        check_counts(running, "after the writes")?;
        drop(guard);
        let mut case = cases.borrow_mut();
        *case += 1;
        if case.is_multiple_of(8) {
            let image = storage.borrow().power_cut(*case);
            server.borrow_mut().take();
            let restarted = TestServer::on_sim(Options::default(), &image);
            check_counts(&restarted, "after a power cut")?;
            *server.borrow_mut() = Some(restarted);
            *storage.borrow_mut() = image;
        }
        Ok(())
    });
    if let Err(err) = outcome {
        panic!("{err}");
    }
}

/// A database whose keys were written before `kv_counts` existed (its rows removed here)
/// gets them counted when the keyspace opens.
#[test]
fn a_database_without_counts_is_counted_when_opened() {
    let storage = SimStorage::new();
    {
        let server = TestServer::on_sim(Options::default(), &storage);
        let mut con = server.client();
        for i in 0..5_000 {
            let key = format!("key:{i}");
            let _: () = match i % 3 {
                0 => q(&mut con, &["SET", &key, "v", "EX", "100000"]),
                1 => q(&mut con, &["SET", &key, "v"]),
                _ => q(&mut con, &["HSET", &key, "f", "v"]),
            };
        }
        q::<String>(&mut con, &["SELECT", "3"]);
        q::<()>(&mut con, &["SET", "other", "v"]);
    }
    let db = open_sim_database(CommitMode::Buffer, &storage);
    let counts = db.table("kv_counts").expect("the counts table");
    let mut txn = db.begin();
    let rows = txn
        .scan(
            &counts,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan the counts");
    assert_eq!(rows.len(), 16, "one row per database");
    for row in &rows {
        txn.remove(&counts, &row[..1]).expect("remove a counts row");
    }
    txn.commit().expect("commit");
    db.close().expect("close");

    let server = TestServer::on_sim(Options::default(), &storage);
    let mut con = server.client();
    assert_eq!(q::<u64>(&mut con, &["DBSIZE"]), 5_000);
    assert_eq!(info_counts(&mut con, 0), (5_000, 1_667));
    assert_eq!(info_counts(&mut con, 3), (1, 0));
    q::<()>(&mut con, &["DEL", "key:0", "key:1"]);
    assert_eq!(info_counts(&mut con, 0), (4_998, 1_666));
}
