//! SWAPDB (`keyspace/databases.rs`): a conversation compared byte for byte with a real
//! `redis-server`'s (the swap itself, its refusals, a blocked client served by it, a WATCH
//! it breaks, MOVE and FLUSHDB after it), swaps that survive power cuts, and swaps racing
//! commands that each must land whole in one database.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::conversation::{compare, Step};
use support::{
    eventually, exchange, expect_bytes, hello3, msets_are_read_whole, q, restarted, stored_rows,
    Options, TestServer,
};
use tailstore_media::sim::SimStorage;

/// Connection 0 writes and swaps, 1 blocks in database 1, 2 watches a key of database 0.
const CONVERSATION: &[Step] = &[
    (0, b"SET a 1\r\nSELECT 1\r\nSET b 2\r\nEXPIRE b 100\r\nSELECT 0\r\n"),
    (1, b"SELECT 1\r\nBLPOP list 0\r\n"),
    (2, b"WATCH a\r\nMULTI\r\nGET a\r\n"),
    (0, b"RPUSH list x\r\nSWAPDB 0 1\r\n"),
    (2, b"EXEC\r\n"),
    (0, b"GET b\r\nGET a\r\nTTL b\r\nDBSIZE\r\nSELECT 1\r\nGET a\r\nDBSIZE\r\nSELECT 0\r\n"),
    (0, b"SWAPDB 0 0\r\nSWAPDB 0 x\r\nSWAPDB x 0\r\nSWAPDB 0 16\r\nSWAPDB -1 0\r\nSWAPDB 0\r\nGET b\r\n"),
    (0, b"MOVE b 1\r\nSELECT 1\r\nDBSIZE\r\nGET b\r\nSWAPDB 1 0\r\nDBSIZE\r\nFLUSHDB\r\nSELECT 0\r\nDBSIZE\r\nGET a\r\nGET b\r\n"),
];

#[test]
fn a_swapdb_conversation_gets_the_bytes_redis_sends() {
    compare(
        CONVERSATION,
        "a_swapdb_conversation_gets_the_bytes_redis_sends",
    );
}

/// An acknowledged SWAPDB is durable: after a power cut the databases are as swapped,
/// their keys' deadlines too; swapping back leaves no trace of the map.
#[test]
fn swaps_survive_power_cuts() {
    let storage = SimStorage::new();
    let server = TestServer::on_sim(Options::default(), &storage);
    let mut con = server.client();
    q::<()>(&mut con, &["set", "zero", "0"]);
    q::<()>(&mut con, &["set", "two", "2", "ex", "1000"]);
    q::<()>(&mut con, &["move", "two", "2"]);
    q::<()>(&mut con, &["swapdb", "0", "2"]);
    q::<()>(&mut con, &["swapdb", "2", "5"]);
    let image = storage.power_cut(1);
    let (server, mut con) = restarted(server, con, &image);
    let get = |con: &mut redis::Connection, db: &str, key: &str| -> Option<String> {
        q::<()>(con, &["select", db]);
        q(con, &["get", key])
    };
    assert_eq!(get(&mut con, "0", "two"), Some("2".into()));
    assert_eq!(get(&mut con, "5", "zero"), Some("0".into()));
    assert_eq!(get(&mut con, "2", "zero"), None);
    q::<()>(&mut con, &["select", "0"]);
    let ttl: i64 = q(&mut con, &["ttl", "two"]);
    assert!(
        (900..=1000).contains(&ttl),
        "the deadline moved with its key: {ttl}"
    );
    // Back to where they were, and again after a second power cut.
    q::<()>(&mut con, &["swapdb", "5", "2"]);
    q::<()>(&mut con, &["swapdb", "0", "2"]);
    let image = image.power_cut(2);
    let (_server, mut con) = restarted(server, con, &image);
    assert_eq!(get(&mut con, "0", "zero"), Some("0".into()));
    assert_eq!(get(&mut con, "2", "two"), Some("2".into()));
    assert_eq!(q::<i64>(&mut con, &["dbsize"]), 1);
}

/// Swaps race MSETs of many keys: each MSET, and each MGET after it, must see one
/// database, never part of one and part of the other (a command holds the map from its
/// start to its commit). With the hold taken away, an MGET finds a split MSET at once.
#[test]
fn a_command_racing_swaps_lands_whole_in_one_database() {
    let server = TestServer::start();
    let keys: Vec<String> = (0..200).map(|n| format!("k{n}")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let mut con = server.client();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                q::<()>(&mut con, &["swapdb", "0", "1"]);
                swaps += 1;
            }
            swaps
        })
    };
    let mut con = server.client();
    let rounds = msets_are_read_whole(&mut con, &keys, &keys, Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("the swapper");
    assert!(swaps > 10 && rounds > 10, "{swaps} swaps, {rounds} rounds");
    println!("{rounds} MSET/MGET rounds against {swaps} swaps");
}

/// A tracking client is told to drop everything it cached when databases are swapped, as
/// after a flush: its keys are tracked by name, and a name may now hold another value
/// (redis-server 7.0.15 sends nothing here).
#[test]
fn a_swap_invalidates_every_tracking_client_cache() {
    let server = TestServer::start();
    let mut tracker = server.raw();
    hello3(&mut tracker);
    exchange(&mut tracker, b"CLIENT TRACKING on\r\n", b"+OK\r\n");
    exchange(&mut tracker, b"GET k\r\n", b"_\r\n");
    let mut con = server.client();
    q::<()>(&mut con, &["swapdb", "0", "1"]);
    expect_bytes(&mut tracker, b">2\r\n$10\r\ninvalidate\r\n_\r\n");
}

/// The active expiry finds a key in the database a swap moved it to: the deadline queue
/// names stored databases, read back as logical ones, so the key's row is removed (not
/// left behind as a stale queue entry) and the counts stay right.
#[test]
fn the_active_expiry_follows_a_swapped_key() {
    let server = TestServer::start();
    let mut con = server.client();
    q::<()>(&mut con, &["set", "short", "v", "px", "300"]);
    q::<()>(&mut con, &["set", "kept", "v"]);
    q::<()>(&mut con, &["swapdb", "0", "3"]);
    assert_eq!(stored_rows(&server, "kv_keys"), 2);
    let removed = eventually(Duration::from_secs(10), || {
        stored_rows(&server, "kv_keys") == 1
    });
    assert!(removed, "the expired key's row stayed after the swap");
    assert_eq!(stored_rows(&server, "kv_expiry"), 0);
    q::<()>(&mut con, &["select", "3"]);
    assert_eq!(q::<i64>(&mut con, &["dbsize"]), 1);
    assert_eq!(
        q::<Option<String>>(&mut con, &["get", "kept"]),
        Some("v".into())
    );
    let keyspace: String = q(&mut con, &["info", "keyspace"]);
    assert!(keyspace.contains("db3:keys=1,expires=0"), "{keyspace}");
    assert!(!keyspace.contains("db0:"), "{keyspace}");
}
