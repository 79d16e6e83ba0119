//! The default user's password (`requirepass`, `server/auth.rs`) through the server: what an
//! unauthenticated connection may do, what AUTH and HELLO AUTH change, CONFIG SET
//! requirepass on connections already open, and the replies compared with a real
//! `redis-server`'s.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::real_redis::same_replies;
use support::{err, exchange, q, Options, TestServer};

fn with_password(password: &'static str) -> TestServer {
    TestServer::with(Options {
        password: Some(password),
        ..Options::default()
    })
}

const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";

#[test]
fn auth_answers_as_redis_does() {
    // Both servers start without a password; the connection sets one and RESETs to be asked
    // for it.
    same_replies(
        "auth_answers_as_redis_does",
        &[
            &["AUTH", "anything"],
            &["AUTH", "default", "anything"],
            &["AUTH", "someone", "anything"],
            &["CONFIG", "SET", "requirepass", "secret"],
            &["PING"],
            &["RESET"],
            &["PING"],
            &["GET", "k"],
            &["SET", "k", "v"],
            &["CONFIG", "GET", "requirepass"],
            &["HELLO"],
            &["HELLO", "3"],
            &["HELLO", "2", "AUTH", "default", "wrong"],
            &["HELLO", "2", "AUTH", "default"],
            &["NOSUCHCOMMAND"],
            &["GET"],
            &["AUTH"],
            &["AUTH", "a", "b", "c"],
            &["AUTH", "wrong"],
            &["AUTH", "someone", "secret"],
            &["AUTH", "secret"],
            &["GET", "k"],
            &["ACL", "LIST"],
            &["ACL", "WHOAMI"],
            &["RESET"],
            &["AUTH", "default", "secret"],
            &["CONFIG", "SET", "requirepass", "other"],
            &["PING"],
            &["AUTH", "secret"],
            &["AUTH", "other"],
            &["RESET"],
            &["CONFIG", "GET", "requirepass"],
            &["hello", "2", "AUTH", "default", "other"], // not compared: names the server
            &["CONFIG", "SET", "requirepass", ""],
            &["RESET"],
            &["PING"],
            &["AUTH", "x"],
            &["ACL", "LIST"],
            &["CONFIG", "GET", "requirepass"],
        ],
    );
}

#[test]
fn an_unauthenticated_connection_reads_and_writes_nothing() {
    let server = with_password("s3cret");
    let mut stranger = server.raw();
    exchange(&mut stranger, b"SET k stolen\r\n", NOAUTH);
    exchange(&mut stranger, b"GET k\r\n", NOAUTH);
    exchange(&mut stranger, b"MULTI\r\n", NOAUTH);
    exchange(&mut stranger, b"EVAL \"return 1\" 0\r\n", NOAUTH);
    exchange(&mut stranger, b"FLUSHALL\r\n", NOAUTH);
    // Answered before the server could stop: it did not.
    exchange(&mut stranger, b"SHUTDOWN NOSAVE\r\n", NOAUTH);
    exchange(&mut stranger, b"CONFIG SET requirepass x\r\n", NOAUTH);
    exchange(
        &mut stranger,
        b"AUTH wrong\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    exchange(&mut stranger, b"PING\r\n", NOAUTH);

    // The redis crate authenticates from the URL.
    let mut owner = support::client_at_url(&format!("redis://:s3cret@{}/", server.address()));
    assert_eq!(q::<Option<String>>(&mut owner, &["GET", "k"]), None);
    q::<()>(&mut owner, &["SET", "k", "mine"]);
    let stats: String = q(&mut owner, &["INFO", "commandstats"]);
    assert!(
        stats.contains("cmdstat_get:calls=1,") && stats.contains("rejected_calls=1,"),
        "{stats}"
    );
    let errors: String = q(&mut owner, &["INFO", "errorstats"]);
    assert!(errors.contains("errorstat_NOAUTH:count=8"), "{errors}");

    exchange(&mut stranger, b"AUTH s3cret\r\n", b"+OK\r\n");
    exchange(&mut stranger, b"GET k\r\n", b"$4\r\nmine\r\n");
}

/// Sends `requests` GETs on `stream` from another thread, reading nothing meanwhile;
/// returns once they were all written or the server closed the connection.
fn flood(stream: &TcpStream, requests: usize) {
    let mut writer = stream.try_clone().expect("clone the stream");
    let sent = std::thread::spawn(move || {
        let _ = writer.write_all(&b"GET k\r\n".repeat(requests));
    });
    sent.join().expect("the writer");
}

/// The replies read from `stream` until it ends (or stalls for 20 s).
fn replies_until_the_end(stream: &mut TcpStream) -> usize {
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    received.windows(2).filter(|w| w == b"\r\n").count()
}

#[test]
fn a_client_that_floods_refusals_unread_is_closed_unless_authenticated() {
    const REQUESTS: usize = 200_000;
    // 2,000,000 unread refusals are 68 MB: more than the two sockets' buffers take even
    // grown to their largest (`tcp_rmem`'s 32 MiB and `tcp_wmem`'s 4 MiB on this machine).
    const UNREAD: usize = 10 * REQUESTS;
    let server = with_password("s3cret");
    // NOAUTH refusals left unread, more than the sockets' buffers take: closed, as Redis
    // closes it, where a client that has logged in is held back at 64 MiB. The client's
    // receive buffer is fixed small: grown by the kernel's autotuning it held 34 MB of
    // them, and the server, never held back, had no unsent output to judge (a fresh
    // clone's CI saw it once; and once more, ci115, with the buffer fixed and 34 MB, so
    // the flood is now larger than any growth).
    let mut stranger = server.raw();
    rustix::net::sockopt::set_socket_recv_buffer_size(&stranger, 64 << 10)
        .expect("a receive buffer");
    flood(&stranger, UNREAD);
    let answered = replies_until_the_end(&mut stranger);
    assert!(answered < UNREAD, "all {answered} refusals were sent");

    // The same flood once logged in is answered in full (read as it comes).
    let mut owner = server.raw();
    exchange(&mut owner, b"AUTH s3cret\r\n", b"+OK\r\n");
    let reader = owner.try_clone().expect("clone the stream");
    let counting = std::thread::spawn(move || {
        let mut reader = std::io::BufReader::new(reader);
        let mut line = Vec::new();
        let mut answered = 0;
        while answered < REQUESTS {
            line.clear();
            match std::io::BufRead::read_until(&mut reader, b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => answered += 1,
            }
        }
        answered
    });
    flood(&owner, REQUESTS);
    assert_eq!(counting.join().expect("the reader"), REQUESTS);
}

/// Until it has logged in, a client's requests are held to Redis's limits (ten arguments,
/// 16 KiB bulks), refused with Redis's protocol errors and the connection closed; once
/// logged in, or once no password is asked, they are not.
#[test]
fn an_unauthenticated_client_sends_only_small_requests() {
    let server = with_password("s3cret");
    for (request, refusal) in [
        (
            &b"*11\r\n"[..],
            &b"-ERR Protocol error: unauthenticated multibulk length\r\n"[..],
        ),
        (
            b"*2\r\n$4\r\nAUTH\r\n$16385\r\n",
            b"-ERR Protocol error: unauthenticated bulk length\r\n",
        ),
    ] {
        let mut stranger = server.raw();
        exchange(&mut stranger, request, refusal);
        let mut rest = Vec::new();
        let end = stranger.read_to_end(&mut rest);
        assert!(
            end.is_ok() && rest.is_empty(),
            "not closed: {end:?}, {rest:?}"
        );
    }
    let value = "v".repeat(20_000);
    let set = format!(
        "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n{value}\r\n",
        value.len()
    );
    let mut owner = server.raw();
    exchange(&mut owner, b"AUTH s3cret\r\n", b"+OK\r\n");
    exchange(&mut owner, set.as_bytes(), b"+OK\r\n");

    // A connection opened while the password was asked, after it is taken away.
    let mut early = server.raw();
    exchange(&mut owner, b"CONFIG SET requirepass \"\"\r\n", b"+OK\r\n");
    exchange(&mut early, set.as_bytes(), b"+OK\r\n");
}

#[test]
fn hello_auth_authenticates_and_selects_the_protocol() {
    let server = with_password("pw");
    let mut stream = server.raw();
    exchange(
        &mut stream,
        b"HELLO 3 AUTH default nope\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    exchange(&mut stream, b"PING\r\n", NOAUTH);
    let hello = support::hello3_with(&mut stream, b"HELLO 3 AUTH default pw SETNAME app\r\n");
    assert!(
        hello.starts_with(b"%7\r\n"),
        "{:?}",
        String::from_utf8_lossy(&hello)
    );
    exchange(&mut stream, b"CLIENT GETNAME\r\n", b"$3\r\napp\r\n");
    // RESP3 now: a null is `_`.
    exchange(&mut stream, b"GET nothing\r\n", b"_\r\n");
}

#[test]
fn a_password_change_keeps_open_connections_as_they_are() {
    let server = TestServer::start();
    let mut before = server.client();
    q::<()>(&mut before, &["CONFIG", "SET", "requirepass", "first"]);
    // Connected while no password was set: still served.
    q::<()>(&mut before, &["SET", "k", "v"]);
    let mut after = server.raw();
    exchange(&mut after, b"GET k\r\n", NOAUTH);
    // No password: the connection that never authenticated is served…
    q::<()>(&mut before, &["CONFIG", "SET", "requirepass", ""]);
    exchange(&mut after, b"GET k\r\n", b"$1\r\nv\r\n");
    // …until one is set again.
    q::<()>(&mut before, &["CONFIG", "SET", "requirepass", "second"]);
    exchange(&mut after, b"GET k\r\n", NOAUTH);
    exchange(
        &mut after,
        b"AUTH first\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    exchange(&mut after, b"AUTH second\r\n", b"+OK\r\n");
    exchange(&mut after, b"GET k\r\n", b"$1\r\nv\r\n");
    // RESET asks again.
    exchange(
        &mut after,
        b"RESET\r\nGET k\r\n",
        b"+RESET\r\n-NOAUTH Authentication required.\r\n",
    );
    assert_eq!(
        err(
            &mut before,
            &["CONFIG", "SET", "requirepass", "third", "maxclients", "7"]
        ),
        "ERR CONFIG SET 'maxclients': tailstore's settings are its command-line options \
         (durability is its --commit mode); only a value already in effect is accepted"
    );
    // All or nothing: the refused pair left the password as it was.
    exchange(&mut after, b"AUTH second\r\n", b"+OK\r\n");
}

#[test]
fn a_pause_does_not_hold_the_refusal_of_an_unauthenticated_write() {
    let server = with_password("pw");
    let mut admin = support::client_at_url(&format!("redis://:pw@{}/", server.address()));
    q::<()>(&mut admin, &["CLIENT", "PAUSE", "3000", "WRITE"]);
    let mut stranger = server.raw();
    let started = Instant::now();
    exchange(&mut stranger, b"SET k v\r\n", NOAUTH);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "the refusal waited {:?} for the pause",
        started.elapsed()
    );
    q::<()>(&mut admin, &["CLIENT", "UNPAUSE"]);
}

#[test]
fn acl_log_records_the_refused_attempts() {
    let server = with_password("pw");
    let mut stranger = server.raw();
    let wrongpass = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";
    exchange(&mut stranger, b"AUTH guess1\r\n", wrongpass);
    exchange(&mut stranger, b"AUTH mallory guess\r\n", wrongpass);
    exchange(&mut stranger, b"AUTH guess2\r\n", wrongpass);
    exchange(&mut stranger, b"HELLO 3 AUTH default guess3\r\n", wrongpass);
    // Refused commands are not attempts to log in: not logged.
    exchange(&mut stranger, b"GET k\r\n", NOAUTH);
    let mut owner = support::client_at_url(&format!("redis://:pw@{}/", server.address()));
    let entries: Vec<std::collections::HashMap<String, redis::Value>> =
        q(&mut owner, &["ACL", "LOG"]);
    let summary: Vec<(i64, String, String)> = entries
        .iter()
        .map(|entry| {
            let text = |name: &str| match &entry[name] {
                redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                other => panic!("{name}: {other:?}"),
            };
            assert_eq!(text("reason"), "auth");
            assert_eq!(text("context"), "toplevel");
            let client = text("client-info");
            assert!(
                client.starts_with("id=") && client.contains(" user=default "),
                "{client}"
            );
            let redis::Value::Int(count) = entry["count"] else {
                panic!("count: {:?}", entry["count"]);
            };
            (count, text("object"), text("username"))
        })
        .collect();
    assert_eq!(
        summary,
        [
            (1, "HELLO".into(), "default".into()),
            (2, "AUTH".into(), "default".into()),
            (1, "AUTH".into(), "mallory".into()),
        ]
    );
    let newest: Vec<redis::Value> = q(&mut owner, &["ACL", "LOG", "1"]);
    assert_eq!(newest.len(), 1);
    q::<()>(&mut owner, &["ACL", "LOG", "RESET"]);
    let after: Vec<redis::Value> = q(&mut owner, &["ACL", "LOG"]);
    assert!(after.is_empty());
}

/// A password never reaches SLOWLOG: AUTH's arguments, HELLO AUTH's credentials and
/// CONFIG SET requirepass's value are logged as `(redacted)`, as Redis logs them.
#[test]
fn the_slow_log_keeps_no_password() {
    let server = TestServer::start();
    let mut con = server.client();
    q::<()>(&mut con, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    q::<()>(&mut con, &["CONFIG", "SET", "requirepass", "hunter2"]);
    q::<()>(&mut con, &["AUTH", "hunter2"]);
    q::<()>(&mut con, &["AUTH", "default", "hunter2"]);
    let _: redis::Value = q(&mut con, &["HELLO", "2", "AUTH", "default", "hunter2"]);
    let hash = "#".to_string() + &"ab".repeat(32);
    q::<()>(
        &mut con,
        &["ACL", "SETUSER", "carol", "on", &hash, ">hunter3", "~*"],
    );
    let entries: Vec<redis::Value> = q(&mut con, &["SLOWLOG", "GET", "-1"]);
    let logged: Vec<Vec<String>> = entries
        .iter()
        .map(|entry| {
            let redis::Value::Array(fields) = entry else {
                panic!("{entry:?}")
            };
            let redis::Value::Array(args) = &fields[3] else {
                panic!("{fields:?}")
            };
            args.iter()
                .map(|arg| match arg {
                    redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into(),
                    other => panic!("{other:?}"),
                })
                .collect()
        })
        .collect();
    let redacted = |words: &[&str]| logged.iter().any(|args| args == words);
    assert!(
        redacted(&["CONFIG", "SET", "requirepass", "(redacted)"]),
        "{logged:?}"
    );
    assert!(redacted(&["AUTH", "(redacted)"]), "{logged:?}");
    assert!(
        redacted(&["AUTH", "(redacted)", "(redacted)"]),
        "{logged:?}"
    );
    assert!(
        redacted(&["HELLO", "2", "AUTH", "(redacted)", "(redacted)"]),
        "{logged:?}"
    );
    // ACL SETUSER's user and every rule, `#hash` ones too, as Redis hides them.
    let redacted_rules = ["(redacted)"; 5];
    let setuser = [&["ACL", "SETUSER"][..], &redacted_rules[..]].concat();
    assert!(redacted(&setuser), "{logged:?}");
    assert!(
        !logged
            .iter()
            .flatten()
            .any(|arg| arg.contains("hunter") || arg.contains("abab")),
        "{logged:?}"
    );
}
