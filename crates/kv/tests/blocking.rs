//! BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZMPOP, XREAD and XREADGROUP with BLOCK through
//! the server: a client blocks until a write
//! to one of its keys (from any event loop) or its deadline, commands it sent after the
//! blocked one wait for it, a client gone while blocked takes nothing, and under many
//! producers and consumers every element is delivered exactly once (no lost wake-up).

mod support;

use std::collections::BTreeSet;
use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;
use support::{command, eventually, expect_bytes, q, Options, TestServer};

fn bulk(text: &str) -> Value {
    Value::BulkString(text.as_bytes().to_vec())
}

/// The number INFO's `section` gives for `field`.
fn info_number(server: &TestServer, section: &str, field: &str) -> u64 {
    let info: String = q(&mut server.client(), &["info", section]);
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} tells {field}"))
}

fn blocked_clients(server: &TestServer) -> usize {
    info_number(server, "clients", "blocked_clients") as usize
}

/// Waits until `n` clients are blocked (so a write that follows finds them waiting).
#[track_caller]
fn wait_for_blocked(server: &TestServer, n: usize) {
    assert!(
        eventually(Duration::from_secs(10), || blocked_clients(server) == n),
        "{n} clients never blocked (blocked_clients: {})",
        blocked_clients(server)
    );
}

/// Runs `args` on a connection of its own, in a thread: the reply when it comes.
fn in_background(server: &TestServer, args: &[&str]) -> thread::JoinHandle<Value> {
    let mut con = server.client();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    thread::spawn(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        q(&mut con, &args)
    })
}

fn join(handle: thread::JoinHandle<Value>) -> Value {
    handle.join().expect("the blocked client's thread")
}

#[test]
fn a_push_from_another_connection_wakes_the_blocked_client() {
    // Two event loops: the connections are dealt to them in turn, so the blocked client
    // and the pushing one are served by different loops.
    let server = TestServer::start();
    let mut con = server.client();
    let blocked = in_background(&server, &["blpop", "q1", "q2", "0"]);
    wait_for_blocked(&server, 1);
    let _: i64 = q(&mut con, &["rpush", "q2", "hello"]);
    assert_eq!(join(blocked), Value::Array(vec![bulk("q2"), bulk("hello")]));
    assert_eq!(
        q::<i64>(&mut con, &["exists", "q2"]),
        0,
        "the element was taken"
    );
    assert_eq!(blocked_clients(&server), 0);

    let blocked = in_background(&server, &["blmove", "src", "dst", "RIGHT", "left", "0"]);
    wait_for_blocked(&server, 1);
    let _: i64 = q(&mut con, &["lpush", "src", "a"]);
    assert_eq!(join(blocked), bulk("a"));
    assert_eq!(
        q::<Vec<String>>(&mut con, &["lrange", "dst", "0", "-1"]),
        ["a"]
    );

    // A push inside MULTI/EXEC wakes it too, and so does the destination of an LMOVE.
    let blocked = in_background(&server, &["brpoplpush", "m", "n", "0"]);
    wait_for_blocked(&server, 1);
    let _: Value = redis::pipe()
        .atomic()
        .cmd("rpush")
        .arg("m")
        .arg("x")
        .query(&mut con)
        .expect("MULTI/EXEC");
    assert_eq!(join(blocked), bulk("x"));
    let blocked = in_background(&server, &["brpop", "moved", "0"]);
    wait_for_blocked(&server, 1);
    let _: Value = q(&mut con, &["lmove", "n", "moved", "left", "left"]);
    assert_eq!(join(blocked), Value::Array(vec![bulk("moved"), bulk("x")]));

    // Sorted sets: BZPOPMIN waits for a ZADD.
    let blocked = in_background(&server, &["bzpopmin", "z1", "z2", "0"]);
    wait_for_blocked(&server, 1);
    let _: i64 = q(&mut con, &["zadd", "z2", "2.5", "m", "3", "n"]);
    assert_eq!(
        join(blocked),
        Value::Array(vec![bulk("z2"), bulk("m"), bulk("2.5")])
    );
    assert_eq!(
        q::<Vec<String>>(&mut con, &["zrange", "z2", "0", "-1"]),
        ["n"]
    );
}

#[test]
fn a_move_or_copy_into_the_blocked_client_s_database_wakes_it() {
    let server = TestServer::start();
    let mut con = server.client();
    let blocked_in_db = |db: &str, key: &str| {
        let mut waiter = server.client();
        let _: () = q(&mut waiter, &["select", db]);
        let key = key.to_string();
        // A deadline, so that a missed wake-up fails instead of hanging: its last run
        // would find the element too, but only after the deadline.
        thread::spawn(move || {
            let began = Instant::now();
            let answer = q::<Value>(&mut waiter, &["blpop", &key, "10"]);
            assert!(
                began.elapsed() < Duration::from_secs(5),
                "woken by its deadline, not by the write"
            );
            answer
        })
    };
    // Once blocked, the waiter's connection is left quiet for a while, so that only the
    // signal of the write (not a late event of its own socket) runs its command again.
    let settled = || {
        wait_for_blocked(&server, 1);
        thread::sleep(Duration::from_millis(300));
    };
    let blocked = blocked_in_db("1", "jobs");
    settled();
    let _: i64 = q(&mut con, &["rpush", "jobs", "a"]);
    assert_eq!(q::<i64>(&mut con, &["move", "jobs", "1"]), 1);
    assert_eq!(join(blocked), Value::Array(vec![bulk("jobs"), bulk("a")]));

    let blocked = blocked_in_db("2", "copied");
    settled();
    let _: i64 = q(&mut con, &["rpush", "src", "b"]);
    assert_eq!(q::<i64>(&mut con, &["copy", "src", "copied", "db", "2"]), 1);
    assert_eq!(join(blocked), Value::Array(vec![bulk("copied"), bulk("b")]));
    assert_eq!(
        q::<Vec<String>>(&mut con, &["lrange", "src", "0", "-1"]),
        ["b"],
        "the source is left as it was"
    );
}

/// The server's count of blocking-command runs (first runs and reruns).
fn blocking_runs(server: &TestServer) -> u64 {
    info_number(server, "stats", "tailstore_blocking_runs")
}

#[test]
fn a_waiting_client_costs_nothing_until_a_write_or_its_deadline() {
    // A run that finds nothing writes nothing, so it must not wake the clients of its key:
    // its own loop among them, which would run it again at once, and again (a blocked
    // BLPOP once kept a core busy for as long as it waited).
    let server = TestServer::start();
    for args in [
        &["blpop", "nothing", "1"][..],
        &["bzpopmin", "nothing", "1"],
        &["blmove", "nothing", "dst", "left", "left", "1"],
        &[
            "xreadgroup",
            "group",
            "g",
            "c",
            "block",
            "1000",
            "streams",
            "st",
            ">",
        ],
    ] {
        if args[0] == "xreadgroup" {
            let _: () = q(
                &mut server.client(),
                &["xgroup", "create", "st", "g", "$", "mkstream"],
            );
        }
        let before = blocking_runs(&server);
        let answer: Value = q(&mut server.client(), args);
        assert_eq!(answer, Value::Nil, "{args:?} waited for nothing");
        let runs = blocking_runs(&server) - before;
        // The first run, one more after its registration, the last one at the deadline.
        assert!(runs <= 3, "{args:?} ran {runs} times while it waited");
    }
}

#[test]
fn a_blocked_command_counts_its_lookups_once() {
    // Redis looks a blocking command's keys up when it comes (XREAD: each stream twice,
    // read lookups) and not again while it waits; tailstore runs it again (decision 174).
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = q(&mut con, &["config", "resetstat"]);
    let before = blocking_runs(&server);
    let args = ["xread", "block", "300", "streams", "none", "0"];
    assert_eq!(q::<Value>(&mut con, &args), Value::Nil);
    assert!(blocking_runs(&server) - before >= 2, "XREAD ran only once");
    assert_eq!(info_number(&server, "stats", "keyspace_misses"), 2);
    assert_eq!(info_number(&server, "stats", "keyspace_hits"), 0);
}

#[test]
fn the_deadline_answers_nil() {
    let server = TestServer::start();
    let started = Instant::now();
    assert_eq!(
        q::<Value>(&mut server.client(), &["blpop", "none", "0.2"]),
        Value::Nil
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(5),
        "BLPOP with a 0.2 s timeout answered after {waited:?}"
    );
    let args = ["blmove", "none", "d", "left", "left", "0.05"];
    assert_eq!(q::<Value>(&mut server.client(), &args), Value::Nil);
    // RESP3: its null; RESP2: a nil array, BLMOVE's too (its nil outside a wait is a nil
    // bulk string), as Redis 7.0.15 answers a client whose wait timed out.
    let mut raw = server.raw();
    support::hello3(&mut raw);
    raw.write_all(b"BLPOP none 0.01\r\nBRPOPLPUSH none d 0.01\r\n")
        .expect("write");
    expect_bytes(&mut raw, b"_\r\n_\r\n");
    let mut raw = server.raw();
    raw.write_all(b"BRPOP none 0.01\r\nBLMOVE none d left left 0.01\r\nBZPOPMAX none 0.01\r\n")
        .expect("write");
    expect_bytes(&mut raw, b"*-1\r\n*-1\r\n*-1\r\n");
    assert_eq!(blocked_clients(&server), 0);
    // A fraction of a millisecond is one millisecond, not forever (Redis 7.0.15 rounds up).
    let started = Instant::now();
    assert_eq!(
        q::<Value>(&mut server.client(), &["blpop", "none", "0.0001"]),
        Value::Nil
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn commands_sent_after_a_blocked_one_wait_for_it() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.write_all(b"BLPOP k 0\r\nPING\r\nLLEN k\r\n")
        .expect("write");
    wait_for_blocked(&server, 1);
    raw.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    assert!(
        std::io::Read::read(&mut raw, &mut byte).is_err(),
        "a reply came while the client was blocked"
    );
    raw.set_read_timeout(Some(support::REPLY_TIMEOUT))
        .expect("timeout");
    let _: i64 = q(&mut server.client(), &["rpush", "k", "v", "w"]);
    expect_bytes(&mut raw, b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n+PONG\r\n:1\r\n");
}

#[test]
fn inside_multi_a_blocking_command_answers_at_once() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.write_all(b"MULTI\r\nBLPOP k 0\r\nBLMOVE k d left left 0\r\nEXEC\r\n")
        .expect("write");
    expect_bytes(
        &mut raw,
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n*-1\r\n$-1\r\n",
    );
    assert_eq!(blocked_clients(&server), 0);
}

/// Once no client is blocked, an element pushed to `k` stays there.
fn no_one_takes_the_next_push(server: &TestServer) {
    wait_for_blocked(server, 0);
    let mut con = server.client();
    let _: i64 = q(&mut con, &["rpush", "k", "kept"]);
    assert_eq!(
        q::<Vec<String>>(&mut con, &["lrange", "k", "0", "-1"]),
        ["kept"]
    );
}

#[test]
fn a_client_gone_while_blocked_takes_nothing() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.write_all(b"BLPOP k 0\r\n").expect("write");
    wait_for_blocked(&server, 1);
    drop(raw);
    no_one_takes_the_next_push(&server);
}

/// The same, when the client sent more behind its blocked command than the server used to
/// read while it was blocked (1 MiB): its end of stream went unseen behind the rest, and a
/// push's element was popped for it.
#[test]
fn a_client_gone_while_blocked_behind_a_full_input_takes_nothing() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.write_all(b"BLPOP k 0\r\n").expect("write");
    wait_for_blocked(&server, 1);
    raw.write_all(&b"PING\r\n".repeat(700_000)).expect("write");
    drop(raw);
    no_one_takes_the_next_push(&server);
}

/// A client that sends more than 64 MiB behind its blocked command is closed, as Redis
/// closes one past its query buffer limit: the server does not hold it all.
#[test]
fn a_blocked_client_that_sends_too_much_behind_is_closed() {
    let server = TestServer::start();
    let mut raw = server.raw();
    raw.write_all(b"BLPOP k 0\r\n").expect("write");
    wait_for_blocked(&server, 1);
    // The server closes the connection part way: the rest of the write may fail.
    let _ = raw.write_all(&b"PING\r\n".repeat(11_500_000));
    no_one_takes_the_next_push(&server);
}

/// A key waited on that a write turns into another type leaves the client waiting, and
/// an element on another of its keys is served, as in Redis; before, the client was woken
/// with WRONGTYPE, and the element stayed.
#[test]
fn a_waited_key_of_another_type_is_passed_over() {
    let server = TestServer::start();
    let mut con = server.client();
    let waiting = in_background(&server, &["blpop", "k1", "k2", "10"]);
    wait_for_blocked(&server, 1);
    let _: Value = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("k1")
        .arg("x")
        .cmd("RPUSH")
        .arg("k2")
        .arg("y")
        .query(&mut con)
        .expect("EXEC");
    assert_eq!(join(waiting), Value::Array(vec![bulk("k2"), bulk("y")]));

    for args in [
        &["blpop", "s", "0.3"][..],
        &["blmove", "s", "d", "left", "left", "0.3"],
        &["bzpopmin", "s", "0.3"],
    ] {
        let waiting = in_background(&server, args);
        wait_for_blocked(&server, 1);
        let _: () = q(&mut con, &["set", "s", "a string"]);
        assert_eq!(join(waiting), Value::Nil, "{args:?}");
        let _: i64 = q(&mut con, &["del", "s"]);
    }
}

/// FLUSHDB and FLUSHALL run the blocked clients of the databases they empty once more, as
/// SWAPDB does: an XREADGROUP whose stream they took is told so, as Redis tells it; before,
/// it waited until the stream was written again.
#[test]
fn a_flush_tells_a_blocked_xreadgroup_its_stream_is_gone() {
    let server = TestServer::start();
    let mut con = server.client();
    for flush in [&["flushdb"][..], &["flushall"]] {
        let _: () = q(&mut con, &["xgroup", "create", "s", "g", "$", "mkstream"]);
        let args = [
            "xreadgroup",
            "group",
            "g",
            "c",
            "block",
            "0",
            "streams",
            "s",
            ">",
        ];
        let mut reader = server.client();
        let waiting = thread::spawn(move || {
            let result: redis::RedisResult<Value> = command(&args).query(&mut reader);
            result.map_err(|e| e.to_string())
        });
        wait_for_blocked(&server, 1);
        let _: () = q(&mut con, flush);
        let told = waiting.join().expect("the blocked client's thread");
        let refusal = told.expect_err("an error reply");
        assert!(
            refusal.contains("UNBLOCKED") && refusal.contains("the stream key no longer exists"),
            "{flush:?}: {refusal}"
        );
    }
}

/// One push among many clients waiting on its key runs a few of them, not all: once a run
/// finds the list empty again, the others woken for it wait on. Before, each of 20 pushes
/// ran all 200 waiting clients (about 4,000 runs).
#[test]
fn a_push_runs_few_of_the_clients_waiting_on_its_key() {
    let server = TestServer::start();
    let mut waiting: Vec<std::net::TcpStream> = Vec::new();
    for n in 1..=200 {
        let mut raw = server.raw();
        raw.write_all(b"BLPOP queue 0\r\n").expect("write");
        waiting.push(raw);
        if n % 50 == 0 {
            wait_for_blocked(&server, n);
        }
    }
    let runs_before = blocking_runs(&server);
    let mut con = server.client();
    for pushed in 1..=20 {
        let _: i64 = q(&mut con, &["rpush", "queue", "x"]);
        wait_for_blocked(&server, 200 - pushed);
    }
    let runs = blocking_runs(&server) - runs_before;
    assert!(runs < 200, "20 pushes ran blocked commands {runs} times");
}

/// A blocked XREAD or XREADGROUP with no COUNT is served at most 1,000 entries per stream,
/// as Redis serves it; before, all 1,500 that one block added.
#[test]
fn a_blocked_stream_read_is_served_at_most_a_thousand_entries() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = q(&mut con, &["xgroup", "create", "s", "g", "$", "mkstream"]);
    let reads = [
        &[
            "xreadgroup",
            "group",
            "g",
            "c",
            "block",
            "0",
            "streams",
            "s",
            ">",
        ][..],
        &["xread", "count", "0", "block", "0", "streams", "s", "$"],
    ];
    let waiting: Vec<_> = reads
        .iter()
        .enumerate()
        .map(|(n, args)| {
            let handle = in_background(&server, args);
            wait_for_blocked(&server, n + 1);
            handle
        })
        .collect();
    let mut block = redis::pipe();
    block.atomic();
    for _ in 0..1_500 {
        block
            .cmd("XADD")
            .arg("s")
            .arg("*")
            .arg("f")
            .arg("v")
            .ignore();
    }
    let _: () = block.query(&mut con).expect("EXEC");
    for (args, handle) in reads.iter().zip(waiting) {
        let Value::Array(streams) = join(handle) else {
            panic!("{args:?}: not an array")
        };
        let Some(Value::Array(stream)) = streams.first() else {
            panic!("{args:?}: no stream")
        };
        let Some(Value::Array(entries)) = stream.get(1) else {
            panic!("{args:?}: no entries")
        };
        assert_eq!(entries.len(), 1_000, "{args:?}");
    }
}

#[test]
fn the_longest_waiting_client_of_a_loop_is_served_first() {
    let server = TestServer::with(Options {
        threads: 1,
        ..Options::default()
    });
    let mut waiting = Vec::new();
    for n in 1..=3 {
        waiting.push(in_background(&server, &["blpop", "w", "0"]));
        wait_for_blocked(&server, n);
    }
    let mut con = server.client();
    for (n, handle) in waiting.into_iter().enumerate() {
        let element = format!("e{n}");
        let _: i64 = q(&mut con, &["rpush", "w", &element]);
        assert_eq!(join(handle), Value::Array(vec![bulk("w"), bulk(&element)]));
    }
    // One push of three elements serves three waiting clients, one element each.
    let waiting: Vec<_> = (1..=3)
        .map(|n| {
            let handle = in_background(&server, &["brpop", "w", "0"]);
            wait_for_blocked(&server, n);
            handle
        })
        .collect();
    let _: i64 = q(&mut con, &["rpush", "w", "a", "b", "c"]);
    let got: Vec<Value> = waiting.into_iter().map(join).collect();
    let expected = ["c", "b", "a"].map(|e| Value::Array(vec![bulk("w"), bulk(e)]));
    assert_eq!(got, expected);
}

#[test]
fn many_producers_and_consumers_deliver_every_element_once() {
    const ELEMENTS: usize = 3_000;
    const PRODUCERS: usize = 4;
    const CONSUMERS: usize = 8;
    let server = TestServer::start();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let mut con = server.client();
            thread::spawn(move || {
                let mut got = Vec::new();
                loop {
                    let reply: Vec<String> = q(&mut con, &["blpop", "a", "b", "0"]);
                    if reply[1] == "stop" {
                        return got;
                    }
                    got.push(reply[1].parse::<usize>().expect("an element"));
                }
            })
        })
        .collect();
    wait_for_blocked(&server, CONSUMERS);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let mut con = server.client();
            thread::spawn(move || {
                for i in (p..ELEMENTS).step_by(PRODUCERS) {
                    let key = if i % 3 == 0 { "a" } else { "b" };
                    let _: i64 = q(&mut con, &["rpush", key, &i.to_string()]);
                    if i % 61 == 0 {
                        thread::sleep(Duration::from_millis(2)); // consumers block again
                    }
                }
            })
        })
        .collect();
    for producer in producers {
        producer.join().expect("producer");
    }
    // A lost wake-up leaves an element in a list while every consumer waits.
    let mut con = server.client();
    let llen = |con: &mut redis::Connection, key| q::<i64>(con, &["llen", key]);
    assert!(
        eventually(Duration::from_secs(10), || llen(&mut con, "a")
            + llen(&mut con, "b")
            == 0
            && blocked_clients(&server) == CONSUMERS),
        "elements left while consumers wait: a {}, b {}",
        llen(&mut con, "a"),
        llen(&mut con, "b")
    );
    for _ in 0..CONSUMERS {
        let _: i64 = q(&mut con, &["rpush", "a", "stop"]);
    }
    let mut delivered = Vec::new();
    for consumer in consumers {
        delivered.extend(consumer.join().expect("consumer"));
    }
    let unique: BTreeSet<usize> = delivered.iter().copied().collect();
    assert_eq!(
        delivered.len(),
        unique.len(),
        "an element was delivered twice"
    );
    assert_eq!(
        unique,
        (0..ELEMENTS).collect(),
        "elements were not delivered"
    );
}

#[test]
fn a_push_between_the_run_and_the_registration_is_not_missed() {
    // A client's blocking command runs and finds nothing; its loop registers it only at
    // the end of the pass. A push from another loop in between signals nobody: the run
    // after the registration must find it. To widen that window, a slow command (LRANGE
    // of a long list) of a second connection of the same loop follows in the same pass,
    // and the push is sent while it runs.
    const ROUNDS: usize = 20;
    let server = TestServer::with(Options {
        threads: 2,
        poll_spin: Duration::ZERO,
        ..Options::default()
    });
    // Connections go to the loops in turn: consumer and slow to loop 0, producer to 1.
    let mut consumer = server.raw();
    let mut producer = server.raw();
    let mut slow = server.raw();
    let mut setup = server.client();
    for batch in 0..20 {
        let elements: Vec<String> = (0..1000).map(|i| format!("{batch}-{i}")).collect();
        let mut args = vec!["rpush", "long"];
        args.extend(elements.iter().map(String::as_str));
        let _: i64 = q(&mut setup, &args);
    }
    let started = Instant::now();
    let _: Vec<String> = q(&mut setup, &["lrange", "long", "0", "-1"]);
    let lrange = started.elapsed();
    consumer
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    for round in 0..ROUNDS {
        let element = format!("{round:04}");
        consumer.write_all(b"BLPOP race 0\r\n").expect("write");
        slow.write_all(b"LRANGE long 0 -1\r\n").expect("write");
        thread::sleep(lrange / 4);
        let push = format!("RPUSH race {element}\r\n");
        producer.write_all(push.as_bytes()).expect("write");
        expect_bytes(&mut producer, b":1\r\n");
        let reply = support::read_exactly(&mut consumer, 24);
        assert_eq!(
            String::from_utf8_lossy(&reply),
            format!("*2\r\n$4\r\nrace\r\n$4\r\n{element}\r\n"),
            "round {round}: the blocked client missed the push"
        );
        drain_array(&mut slow);
    }
}

/// Reads a RESP2 array of bulk strings whole.
fn drain_array(stream: &mut std::net::TcpStream) {
    let line = |stream: &mut std::net::TcpStream| {
        let mut line = Vec::new();
        while !line.ends_with(b"\r\n") {
            line.extend(support::read_exactly(stream, 1));
        }
        String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned()
    };
    let count: usize = line(stream).parse().expect("an array");
    for _ in 0..count {
        let len: usize = line(stream).parse().expect("a bulk string");
        support::read_exactly(stream, len + 2);
    }
}

/// XREAD's reply with one stream and one entry of one field.
fn one_entry(key: &str, id: &str, field: &str, value: &str) -> Value {
    let entry = Value::Array(vec![bulk(id), Value::Array(vec![bulk(field), bulk(value)])]);
    Value::Array(vec![Value::Array(vec![
        bulk(key),
        Value::Array(vec![entry]),
    ])])
}

#[test]
fn xread_block_waits_for_entries_after_the_id_it_was_given() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: String = q(&mut con, &["xadd", "events", "1-1", "old", "1"]);

    // `$`: what comes after the stream's last ID at the moment it blocked, even when the
    // entry that wakes it has an ID below the present time's. (A wait of 5 s rather than
    // for ever: a `$` read again at the wake-up would miss the entry and answer nil.)
    let blocked = in_background(
        &server,
        &["xread", "block", "5000", "streams", "events", "$"],
    );
    wait_for_blocked(&server, 1);
    let _: String = q(&mut con, &["xadd", "events", "2-1", "new", "2"]);
    assert_eq!(join(blocked), one_entry("events", "2-1", "new", "2"));

    // A stream that does not exist yet: `$` is 0-0, and any entry wakes it. A write to
    // another stream does not answer it.
    let blocked = in_background(
        &server,
        &[
            "xread", "count", "5", "block", "5000", "streams", "later", "events", "$", "$",
        ],
    );
    wait_for_blocked(&server, 1);
    let _: String = q(&mut con, &["xadd", "elsewhere", "5-0", "f", "v"]);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(blocked_clients(&server), 1, "an unrelated stream woke it");
    let _: String = q(&mut con, &["xadd", "later", "1-0", "first", "x"]);
    assert_eq!(join(blocked), one_entry("later", "1-0", "first", "x"));

    // With an explicit ID there is nothing to wait for when a later entry exists.
    let reply: Value = q(
        &mut con,
        &["xread", "block", "0", "streams", "events", "1-1"],
    );
    assert_eq!(reply, one_entry("events", "2-1", "new", "2"));
    assert_eq!(blocked_clients(&server), 0);
}

#[test]
fn xread_block_times_out_with_nil_and_without_block_answers_at_once() {
    let server = TestServer::start();
    let mut con = server.client();
    let began = Instant::now();
    let reply: Value = q(&mut con, &["xread", "block", "100", "streams", "none", "$"]);
    assert_eq!(reply, Value::Nil);
    assert!(
        began.elapsed() >= Duration::from_millis(100),
        "it did not wait"
    );

    let began = Instant::now();
    let reply: Value = q(&mut con, &["xread", "streams", "none", "0"]);
    assert_eq!(reply, Value::Nil);
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "XREAD without BLOCK waited"
    );

    // In MULTI, BLOCK does not wait: the block's reply holds the nil.
    let _: () = q(&mut con, &["multi"]);
    let _: () = q(&mut con, &["xread", "block", "0", "streams", "none", "$"]);
    let replies: Value = q(&mut con, &["exec"]);
    assert_eq!(replies, Value::Array(vec![Value::Nil]));
}

#[test]
fn xreadgroup_block_delivers_a_new_entry_to_the_waiting_consumer() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: () = q(
        &mut con,
        &["xgroup", "create", "jobs", "workers", "$", "mkstream"],
    );
    let blocked = in_background(
        &server,
        &[
            "xreadgroup",
            "group",
            "workers",
            "w1",
            "block",
            "5000",
            "streams",
            "jobs",
            ">",
        ],
    );
    wait_for_blocked(&server, 1);
    let _: String = q(&mut con, &["xadd", "jobs", "1-1", "job", "a"]);
    assert_eq!(join(blocked), one_entry("jobs", "1-1", "job", "a"));
    // Delivered: pending for w1, and not delivered again to the group.
    let pending: Value = q(&mut con, &["xpending", "jobs", "workers"]);
    let expected = Value::Array(vec![
        Value::Int(1),
        bulk("1-1"),
        bulk("1-1"),
        Value::Array(vec![Value::Array(vec![bulk("w1"), bulk("1")])]),
    ]);
    assert_eq!(pending, expected);
    let again: Value = q(
        &mut con,
        &[
            "xreadgroup",
            "group",
            "workers",
            "w2",
            "streams",
            "jobs",
            ">",
        ],
    );
    assert_eq!(again, Value::Nil);
    let acked: i64 = q(&mut con, &["xack", "jobs", "workers", "1-1"]);
    assert_eq!(acked, 1);
}

#[test]
fn blmpop_and_bzmpop_wait_for_any_of_their_keys() {
    let server = TestServer::start();
    let mut con = server.client();
    let blocked = in_background(
        &server,
        &["blmpop", "0", "2", "l1", "l2", "right", "count", "2"],
    );
    wait_for_blocked(&server, 1);
    let _: i64 = q(&mut con, &["rpush", "l2", "a", "b", "c"]);
    let popped = Value::Array(vec![bulk("l2"), Value::Array(vec![bulk("c"), bulk("b")])]);
    assert_eq!(join(blocked), popped);

    let blocked = in_background(&server, &["bzmpop", "0", "1", "z", "max"]);
    wait_for_blocked(&server, 1);
    let _: i64 = q(&mut con, &["zadd", "z", "1", "one", "2", "two"]);
    let member = Value::Array(vec![bulk("two"), bulk("2")]);
    assert_eq!(
        join(blocked),
        Value::Array(vec![bulk("z"), Value::Array(vec![member])])
    );

    let started = Instant::now();
    let timed_out: Value = q(&mut con, &["blmpop", "0.05", "1", "none", "left"]);
    assert_eq!(timed_out, Value::Nil);
    assert!(started.elapsed() >= Duration::from_millis(50));
}

/// CLIENT UNBLOCK ends a client's block as its timeout would (the command's nil) or with
/// Redis's UNBLOCKED error, answers 1 for a blocked client and 0 for any other, and leaves
/// the client serving commands afterwards; Redis's errors for a bad reason or id.
#[test]
fn client_unblock_ends_a_block_as_a_timeout_or_with_an_error() {
    let server = TestServer::start();
    let mut other = server.client();
    let mut waiter = server.client();
    let id: i64 = q(&mut waiter, &["CLIENT", "ID"]);
    let id = id.to_string();
    assert_eq!(q::<i64>(&mut other, &["CLIENT", "UNBLOCK", &id]), 0);
    for (reason, expected) in [
        (None, Ok(Value::Nil)),
        (Some("TIMEOUT"), Ok(Value::Nil)),
        (
            Some("ERROR"),
            Err("UNBLOCKED client unblocked via CLIENT UNBLOCK".to_string()),
        ),
    ] {
        let blocked = thread::spawn(move || {
            let reply = redis::cmd("BLPOP")
                .arg(&["list", "0"])
                .query::<Value>(&mut waiter)
                .map_err(|e| support::error_text(&e));
            (reply, waiter)
        });
        wait_for_blocked(&server, 1);
        let mut unblock = vec!["CLIENT", "UNBLOCK", id.as_str()];
        unblock.extend(reason);
        assert_eq!(q::<i64>(&mut other, &unblock), 1, "{reason:?}");
        let (reply, back) = blocked.join().expect("the blocked client's thread");
        waiter = back;
        assert_eq!(reply, expected, "{reason:?}");
        assert_eq!(q::<String>(&mut waiter, &["PING"]), "PONG");
        assert_eq!(q::<i64>(&mut other, &["CLIENT", "UNBLOCK", &id]), 0);
    }
    let refused = |c: &mut redis::Connection, args: &[&str]| support::err(c, args);
    assert_eq!(
        refused(&mut other, &["CLIENT", "UNBLOCK", &id, "LATER"]),
        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"
    );
    assert_eq!(
        refused(&mut other, &["CLIENT", "UNBLOCK", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<i64>(&mut other, &["CLIENT", "UNBLOCK", "999999"]), 0);
}
