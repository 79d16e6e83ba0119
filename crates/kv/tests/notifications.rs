//! Keyspace notifications (`notify-keyspace-events`): the setting as Redis reads and shows
//! it, the events of every write command as Redis sends them (compared with a real
//! `redis-server` where one is installed), `expired` events from the active expiry, and
//! what is never told: a transaction that did not run, a write that failed.
//! (The random differential test compares the events of its sequences too; a write whose
//! sync fails tells nothing: `fail_stop.rs`.)

mod support;

use std::time::Duration;

use support::generate::show;
use support::key_events::{without_expired, KeyEvents};
use support::real_redis::Servers;
use support::{client_at, err, keyspace_lookups, q, raw_value, TestServer};

/// What a line of a scenario did: its key events (`channel message` lines) but the
/// `expired` ones, whose moment is each server's own (the tests below check them), and
/// the read lookups counted since the scenario began (INFO's hits and misses; not asked
/// inside MULTI, where INFO would be queued).
type Told = (Vec<String>, Option<(u64, u64)>);

/// Runs each line on `con`, returning what each did.
fn events_of(con: &mut redis::Connection, events: &mut KeyEvents, lines: &[&str]) -> Vec<Told> {
    raw_value(con, &["CONFIG", "RESETSTAT"]);
    events.since_last();
    let mut in_multi = false;
    lines
        .iter()
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            raw_value(con, &words);
            match words[0].to_ascii_uppercase().as_str() {
                "MULTI" => in_multi = true,
                "EXEC" | "DISCARD" => in_multi = false,
                _ => {}
            }
            let told = without_expired(events.since_last());
            (told, (!in_multi).then(|| keyspace_lookups(con)))
        })
        .collect()
}

/// Scenarios of the write commands the random sequences of `differential.rs` do not send
/// (blocking commands answered at once, RESTORE, MOVE, COPY between databases, SORT STORE,
/// GEO stores, claims…) and of the corners of the others (a deadline already past, a
/// collection emptied, a store of nothing over a key). Each starts from empty databases.
const SCENARIOS: &[&[&str]] = &[
    &[
        "SET s v EX 100",
        "SET s v KEEPTTL",
        "SET s w PXAT 1",
        "SET s v NX",
        "SET s v XX GET",
    ],
    &[
        "SETEX s 100 v",
        "PSETEX s 100000 v",
        "SETNX s v",
        "SETNX t v",
        "GETSET t w",
    ],
    &[
        "SET s 1",
        "GETEX s EX 100",
        "GETEX s PERSIST",
        "GETEX s PERSIST",
        "GETEX s PXAT 1",
    ],
    &[
        "SET s 1",
        "EXPIRE s 100",
        "PERSIST s",
        "PEXPIREAT s 1",
        "EXPIRE s 100",
    ],
    &[
        "MSET a 1 b 2",
        "MSETNX a 1 c 3",
        "MSETNX c 3 d 4",
        "GETDEL a",
        "GETDEL a",
    ],
    &[
        "INCR n",
        "DECRBY n 3",
        "INCRBYFLOAT n 1.5",
        "APPEND n x",
        "SETRANGE n 0 y",
        "SETRANGE n 0 ",
    ],
    &[
        "SETBIT b 7 1",
        "SETBIT b 7 1",
        "SETBIT b 7 0",
        "BITOP NOT c b",
        "BITOP AND c nothing",
    ],
    &[
        "BITFIELD f SET u8 0 200",
        "BITFIELD f SET u8 0 200",
        "BITFIELD f INCRBY u1 0 100",
        "BITFIELD f INCRBY u8 0 100 OVERFLOW FAIL INCRBY u8 0 100",
        "BITFIELD f OVERFLOW FAIL INCRBY u8 0 100",
        "BITFIELD f GET u8 0",
    ],
    &[
        "PFADD h a b",
        "PFADD h a",
        "PFADD g c",
        "PFMERGE m h g",
        "PFCOUNT m",
    ],
    &[
        "SET s v",
        "RENAME s t",
        "RENAMENX t t",
        "SET u 1",
        "RENAMENX t u",
        "RENAME t u",
    ],
    &[
        "SET s v",
        "MOVE s 1",
        "SET s v",
        "COPY s s2",
        "COPY s s3 DB 2",
        "COPY s s2 REPLACE",
    ],
    &[
        "SET s v",
        "DEL s nothing",
        "SET s v",
        "UNLINK s",
        "EXPIRE s 100",
    ],
    &[
        "RPUSH l a b c",
        "LPUSHX l z",
        "RPUSHX none z",
        "LINSERT l BEFORE a y",
        "LSET l 0 x",
        "LREM l 0 b",
        "LTRIM l 0 1",
        "LTRIM l 5 10",
    ],
    &[
        "RPUSH l a b",
        "LMOVE l l LEFT RIGHT",
        "LMOVE l m RIGHT LEFT",
        "RPOPLPUSH l m",
        "BLMOVE m l LEFT LEFT 0",
        "BRPOPLPUSH none l 0.01",
    ],
    &[
        "RPUSH l a b c",
        "LPOP l",
        "RPOP l 5",
        "RPUSH l a b",
        "BLPOP none l 0",
        "BRPOP l 0",
        "RPUSH k a",
        "LMPOP 2 l k LEFT COUNT 3",
        "RPUSH k a b",
        "BLMPOP 0 1 k RIGHT COUNT 9",
    ],
    &[
        "RPUSH l 3 1 2",
        "SORT l STORE d",
        "SORT nothing STORE d",
        "SORT nothing STORE d",
    ],
    &[
        "SADD s a b c",
        "SADD s a",
        "SREM s a z",
        "SMOVE s t b",
        "SMOVE s t c",
        "SPOP t 5",
    ],
    &[
        "SADD s a b c",
        "SPOP s",
        "SPOP s 1",
        "SADD t x",
        "SINTERSTORE d s t",
        "SUNIONSTORE d s t",
        "SDIFFSTORE d s s",
        "SDIFFSTORE d s s",
    ],
    &[
        "ZADD z 1 a 2 b",
        "ZADD z 1 a",
        "ZADD z INCR 0 a",
        "ZINCRBY z 0 a",
        "ZINCRBY z 1 a",
        "ZREM z a",
        "ZREM z b",
    ],
    &[
        "ZADD z 1 a 2 b 3 c 4 d",
        "ZPOPMIN z",
        "ZPOPMAX z 1",
        "BZPOPMIN z 0",
        "BZPOPMAX z 0",
        "ZADD z 1 a 2 b",
        "ZMPOP 1 z MIN COUNT 1",
        "BZMPOP 0 1 z MAX COUNT 5",
    ],
    &[
        "ZADD z 1 a 2 b 3 c",
        "ZREMRANGEBYSCORE z 1 1",
        "ZREMRANGEBYRANK z 0 0",
        "ZREMRANGEBYLEX z - +",
        "ZADD y 1 a",
        "ZUNIONSTORE d 2 y z",
        "ZINTERSTORE d 2 y z",
        "ZDIFFSTORE d 1 y",
        "ZRANGESTORE e y 0 -1",
        "ZRANGESTORE e y 5 6",
    ],
    &[
        "GEOADD g 13.36 38.11 a 15.08 37.50 b",
        "GEOSEARCHSTORE d g FROMMEMBER a BYRADIUS 500 km",
        "GEORADIUS g 15 37 200 km STORE r",
        "GEORADIUSBYMEMBER g a 1 m STOREDIST r",
        "GEOSEARCHSTORE d none FROMLONLAT 0 0 BYRADIUS 1 km",
    ],
    &[
        "HSET h a 1 b 2",
        "HMSET h c 3",
        "HSETNX h a 9",
        "HSETNX h d 4",
        "HINCRBY h a 1",
        "HINCRBYFLOAT h a 0.5",
        "HDEL h z",
        "HDEL h a b c d",
    ],
    &[
        "XADD x 1-0 f v",
        "XADD x MAXLEN 1 2-0 f v",
        "XADD none NOMKSTREAM * f v",
        "XDEL x 9-9",
        "XDEL x 2-0",
        "XADD x 3-0 f v",
        "XTRIM x MAXLEN 5",
        "XSETID x 9-0",
    ],
    &[
        "XGROUP CREATE x g $ MKSTREAM",
        "XGROUP CREATECONSUMER x g c",
        "XGROUP CREATECONSUMER x g c",
        "XADD x 1-0 f v",
        "XREADGROUP GROUP g d STREAMS x >",
        "XREADGROUP GROUP g e STREAMS x 0",
        "XCLAIM x g f 0 1-0",
        "XAUTOCLAIM x g h 0 0",
        "XGROUP SETID x g 0",
        "XGROUP DELCONSUMER x g c",
        "XGROUP DELCONSUMER x g zz",
        "XGROUP DESTROY x g",
        "XGROUP DESTROY x g",
    ],
    &["SET s v", "DUMP s", "SELECT 3", "SET t v", "EXPIRE t 0"],
    &["MULTI", "SET a 1", "RPUSH l x", "LPOP l", "EXEC"],
    // Lines are split at spaces: scripts without any.
    &["EVAL redis.call('set','a',1);redis.call('del','a') 0"],
    // A block's script tells its events in its place among the block's commands.
    &[
        "MULTI",
        "SET a 1",
        "EVAL redis.call('set','b',2);redis.call('del','a') 0",
        "SET c 3",
        "EXEC",
    ],
];

#[test]
fn every_write_command_tells_what_redis_tells() {
    let Some(servers) = Servers::start("every_write_command_tells_what_redis_tells") else {
        return;
    };
    let (redis, tailstore) = (servers.redis.address(), servers.tailstore.address());
    let mut sides = [
        (client_at(redis), KeyEvents::every(redis)),
        (client_at(tailstore), KeyEvents::every(tailstore)),
    ];
    let mut told = 0;
    for scenario in SCENARIOS {
        let [theirs, ours] = sides.each_mut().map(|(con, events)| {
            for reset in [&["SELECT", "0"][..], &["FLUSHALL"]] {
                raw_value(con, reset);
            }
            events_of(con, events, scenario)
        });
        for (at, (ours, theirs)) in ours.iter().zip(&theirs).enumerate() {
            let lines: Vec<Vec<String>> = scenario[..=at]
                .iter()
                .map(|line| line.split(' ').map(String::from).collect())
                .collect();
            assert_eq!(
                ours,
                theirs,
                "tailstore (left) and Redis (right) told different events or counted different \
                 lookups (hits, misses) after:\n{}",
                show(&lines)
            );
            told += ours.0.len();
        }
    }
    assert!(told > 300, "only {told} events: the scenarios tell little");
    // RESTORE with each server's own DUMP payload.
    for (con, events) in &mut sides {
        raw_value(con, &["FLUSHALL"]);
        let _: () = q(con, &["SET", "s", "v"]);
        let payload: Vec<u8> = q(con, &["DUMP", "s"]);
        events.since_last();
        let mut restore = |args: &[&[u8]]| {
            redis::cmd("RESTORE")
                .arg(args)
                .query::<redis::Value>(con)
                .ok();
            events.since_last()
        };
        let ttl_past: &[u8] = b"1";
        assert_eq!(
            restore(&[b"t", b"0", &payload]),
            [
                "__keyspace@0__:t new",
                "__keyevent@0__:new t",
                "__keyspace@0__:t restore",
                "__keyevent@0__:restore t"
            ]
        );
        assert_eq!(
            restore(&[b"t", b"0", &payload]),
            Vec::<String>::new(),
            "BUSYKEY"
        );
        assert_eq!(
            restore(&[b"t", ttl_past, &payload, b"REPLACE", b"ABSTTL"]),
            ["__keyspace@0__:t del", "__keyevent@0__:del t"]
        );
    }
}

#[test]
fn the_setting_reads_and_shows_as_in_redis() {
    let server = TestServer::start();
    let mut con = server.client();
    let get = |con: &mut redis::Connection| -> Vec<String> {
        q(con, &["CONFIG", "GET", "notify-keyspace-events"])
    };
    assert_eq!(get(&mut con), ["notify-keyspace-events", ""]);
    for (setting, shown) in [
        ("KEA", "AKE"),
        ("Ex", "xE"),
        ("zhsl$gK", "g$lshzK"),
        ("Anm", "Am"),
        ("nmKE", "nKEm"),
        ("", ""),
    ] {
        let _: () = q(
            &mut con,
            &["CONFIG", "SET", "notify-keyspace-events", setting],
        );
        assert_eq!(
            get(&mut con),
            ["notify-keyspace-events", shown],
            "{setting}"
        );
    }
    assert_eq!(
        err(
            &mut con,
            &["CONFIG", "SET", "notify-keyspace-events", "KEq"]
        ),
        "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - \
         Invalid event class character. Use 'Ag$lshzxeKEtmdn'."
    );
    // All or nothing: a refused pair leaves the other pairs unset.
    let refusal = err(
        &mut con,
        &[
            "CONFIG",
            "SET",
            "slowlog-max-len",
            "7",
            "notify-keyspace-events",
            "q",
        ],
    );
    assert!(refusal.contains("Invalid event class"), "{refusal}");
    let kept: Vec<String> = q(&mut con, &["CONFIG", "GET", "slowlog-max-len"]);
    assert_ne!(kept[1], "7");
    assert_eq!(get(&mut con), ["notify-keyspace-events", ""]);
}

#[test]
fn the_active_expiry_tells_each_key_it_removes() {
    let server = TestServer::start();
    let mut events = KeyEvents::listen(server.address(), "Ex", &["__keyevent@*__:expired"]);
    let mut con = server.client();
    let _: () = q(&mut con, &["SET", "a", "1", "PX", "20"]);
    let _: () = q(&mut con, &["SELECT", "5"]);
    let _: () = q(&mut con, &["SET", "b", "1", "PX", "20"]);
    let mut heard = vec![events.next_event(), events.next_event()];
    heard.sort();
    assert_eq!(
        heard,
        ["__keyevent@0__:expired a", "__keyevent@5__:expired b"]
    );
    // A write that finds its key expired tells the expiry before its own event.
    let mut events = KeyEvents::listen(server.address(), "KEA", &["__keyspace@5__:c"]);
    let _: () = q(&mut con, &["SET", "c", "1", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(5));
    let _: i64 = q(&mut con, &["RPUSH", "c", "x"]);
    let mut heard = events.since_last();
    heard.retain(|e| !e.ends_with(" set") && !e.ends_with(" expire"));
    if !heard.iter().any(|e| e.ends_with(" expired")) {
        // The active expiry removed it first, and tells it from its own thread.
        heard.insert(0, events.next_event());
    }
    assert_eq!(
        heard,
        ["__keyspace@5__:c expired", "__keyspace@5__:c rpush"]
    );
}

#[test]
fn nothing_is_told_of_what_did_not_happen() {
    let server = TestServer::start();
    let mut events = KeyEvents::every(server.address());
    let mut con = server.client();
    let mut other = server.client();
    // An error, a no-op and a refused condition tell nothing.
    let _: i64 = q(&mut con, &["RPUSH", "l", "a"]);
    events.since_last();
    for command in [
        &["INCR", "l"][..],
        &["SET", "l", "v", "NX"],
        &["DEL", "none"],
        &["SREM", "none", "a"],
    ] {
        raw_value(&mut con, command);
        assert_eq!(events.since_last(), Vec::<String>::new(), "{command:?}");
    }
    // A block a changed watched key aborts runs nothing, so tells nothing.
    let _: () = q(&mut con, &["WATCH", "l"]);
    let _: i64 = q(&mut other, &["RPUSH", "l", "b"]);
    events.since_last();
    let _: () = q(&mut con, &["MULTI"]);
    for _ in 0..2 {
        let _: String = q(&mut con, &["SET", "k", "v"]);
    }
    assert_eq!(raw_value(&mut con, &["EXEC"]), redis::Value::Nil);
    assert_eq!(events.since_last(), Vec::<String>::new());
    // With the setting off (Redis's default), nothing is told.
    let _: () = q(&mut con, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    let _: () = q(&mut con, &["SET", "k", "v"]);
    assert_eq!(events.since_last(), Vec::<String>::new());
}

#[test]
fn a_blocked_pop_tells_its_pop_when_a_push_serves_it_each_in_order() {
    let server = TestServer::start();
    let mut events = KeyEvents::listen(server.address(), "KEA", &["__keyspace@0__:l"]);
    let address = server.address();
    let popper = std::thread::spawn(move || {
        let mut con = client_at(address);
        let popped: Vec<String> = q(&mut con, &["BLPOP", "l", "10"]);
        popped
    });
    // Until the popper is blocked, the push might find nobody waiting.
    let mut con = server.client();
    let blocked = support::eventually(Duration::from_secs(10), || {
        let info: String = q(&mut con, &["INFO", "clients"]);
        info.contains("blocked_clients:1")
    });
    assert!(blocked, "the popper never blocked");
    let _: i64 = q(&mut con, &["RPUSH", "l", "x"]);
    assert_eq!(popper.join().expect("the popper"), ["l", "x"]);
    let mut heard = vec![
        events.next_event(),
        events.next_event(),
        events.next_event(),
    ];
    // The push and the pop finish in passes of two event loops, each telling its events
    // after its durability wait: the pop may be told first (`keyspace/notifications.rs`).
    // Each client's events are in order.
    let push = heard
        .iter()
        .position(|e| e.ends_with(" rpush"))
        .expect("rpush");
    assert_eq!(heard.remove(push), "__keyspace@0__:l rpush");
    assert_eq!(heard, ["__keyspace@0__:l lpop", "__keyspace@0__:l del"]);
}

#[test]
fn a_script_tells_its_events_in_order_with_its_messages() {
    let server = TestServer::start();
    let mut events = KeyEvents::listen(server.address(), "K$g", &["__keyspace@0__:*", "news"]);
    let mut con = server.client();
    let script = "redis.call('set', 'a', 1); redis.call('publish', 'news', 'between'); \
                  redis.call('del', 'a'); return 1";
    let _: i64 = q(&mut con, &["EVAL", script, "0"]);
    assert_eq!(
        events.since_last(),
        [
            "__keyspace@0__:a set",
            "news between",
            "__keyspace@0__:a del"
        ]
    );
}
