//! CLIENT PAUSE and CLIENT UNPAUSE through the server: what a pause holds back and for how
//! long, in order, on every event loop; the active expiry held too; errors compared with a
//! real `redis-server`'s.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::real_redis::Servers;
use support::{client_at, q, stored_rows, TestServer};

/// Sends `request` on a new raw connection and reads until `expected` has arrived: how long
/// that took.
fn timed(server: &TestServer, request: &[u8], expected: &[u8]) -> Duration {
    let mut stream = server.raw();
    let started = Instant::now();
    stream.write_all(request).expect("write");
    read_exactly(&mut stream, expected);
    started.elapsed()
}

fn read_exactly(stream: &mut TcpStream, expected: &[u8]) {
    let mut got = vec![0u8; expected.len()];
    stream.read_exact(&mut got).expect("the replies");
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

#[test]
fn a_write_pause_holds_writes_in_order_and_lets_reads_through() {
    let server = TestServer::start();
    let mut admin = server.client();
    q::<()>(&mut admin, &["SET", "k", "old"]);
    q::<()>(&mut admin, &["CLIENT", "PAUSE", "1500", "WRITE"]);
    let paused_at = Instant::now();
    // A pipeline whose first command writes: the read after it waits for it, in order.
    let mut writer = server.raw();
    writer.write_all(b"SET k new\r\nGET k\r\n").expect("write");
    // Reads on other connections (on both event loops) are answered meanwhile.
    for _ in 0..4 {
        let waited = timed(&server, b"GET k\r\n", b"$3\r\nold\r\n");
        assert!(waited < Duration::from_millis(1000), "{waited:?}");
    }
    read_exactly(&mut writer, b"+OK\r\n$3\r\nnew\r\n");
    let held = paused_at.elapsed();
    assert!(held >= Duration::from_millis(1450), "{held:?}");
    assert!(held < Duration::from_secs(5), "{held:?}");
    // The pausing client is paused with the others.
    q::<()>(&mut admin, &["CLIENT", "PAUSE", "300", "WRITE"]);
    let started = Instant::now();
    q::<()>(&mut admin, &["SET", "k", "mine"]);
    assert!(started.elapsed() >= Duration::from_millis(250));
}

#[test]
fn a_write_pause_lets_through_scripts_and_functions_declared_read_only() {
    let server = TestServer::start();
    let mut admin = server.client();
    let library = "#!lua name=l\nredis.register_function{function_name='reads', callback=function(k) return redis.call('get', k[1]) end, flags={'no-writes'}}\nredis.register_function('writes', function(k) return redis.call('set', k[1], 'x') end)";
    q::<String>(&mut admin, &["FUNCTION", "LOAD", library]);
    q::<()>(&mut admin, &["SET", "k", "v"]);
    q::<()>(&mut admin, &["CLIENT", "PAUSE", "1500", "WRITE"]);
    let script = "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])";
    // An inline EVAL: Redis's splitting turns the `\n` back into a newline.
    let eval = format!("EVAL \"{}\" 1 k\r\n", script.replace('\n', "\\n"));
    for request in [&b"FCALL reads 1 k\r\n"[..], eval.as_bytes()] {
        let waited = timed(&server, request, b"$1\r\nv\r\n");
        assert!(waited < Duration::from_millis(1000), "{waited:?}");
    }
    let waited = timed(&server, b"FCALL writes 1 k\r\n", b"+OK\r\n");
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
}

#[test]
fn unpause_releases_the_held_clients_at_once() {
    let server = TestServer::start();
    let mut admin = server.client();
    q::<()>(&mut admin, &["CLIENT", "PAUSE", "20000", "WRITE"]);
    let started = Instant::now();
    let address = server.address();
    let held: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let mut con = client_at(address);
                q::<i64>(&mut con, &["INCR", "n"]);
                let _: Vec<redis::Value> = redis::pipe()
                    .atomic()
                    .cmd("INCR")
                    .arg(format!("m{i}"))
                    .query(&mut con)
                    .expect("EXEC");
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(q::<Option<i64>>(&mut admin, &["GET", "n"]), None);
    q::<()>(&mut client_at(address), &["CLIENT", "UNPAUSE"]);
    for each in held {
        each.join().expect("a held client");
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(q::<i64>(&mut admin, &["GET", "n"]), 4);
}

#[test]
fn an_all_pause_holds_every_command_even_unpause() {
    let server = TestServer::start();
    let mut admin = server.client();
    q::<()>(&mut admin, &["CLIENT", "PAUSE", "500", "ALL"]);
    let waited = timed(&server, b"PING\r\n", b"+PONG\r\n");
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    q::<()>(&mut admin, &["CLIENT", "PAUSE", "400"]);
    let waited = timed(&server, b"CLIENT UNPAUSE\r\nPING\r\n", b"+OK\r\n+PONG\r\n");
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
}

#[test]
fn a_paused_server_expires_no_key_until_the_pause_ends() {
    let server = TestServer::start();
    let mut admin = server.client();
    q::<()>(&mut admin, &["SET", "brief", "v", "PX", "50"]);
    q::<()>(&mut admin, &["CLIENT", "PAUSE", "800", "WRITE"]);
    std::thread::sleep(Duration::from_millis(400));
    // Expired, so not read; but not removed: the active expiry waits for the pause.
    assert_eq!(q::<Option<String>>(&mut admin, &["GET", "brief"]), None);
    assert_eq!(stored_rows(&server, "kv_keys"), 1);
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        support::eventually(Duration::from_secs(5), || stored_rows(&server, "kv_keys")
            == 0),
        "the key is removed once the pause is over"
    );
}

#[test]
fn client_pause_refuses_what_redis_refuses() {
    let Some(servers) = Servers::start("client_pause_refuses_what_redis_refuses") else {
        return;
    };
    let requests: &[&[u8]] = &[
        b"CLIENT PAUSE 100 foo\r\n",
        b"CLIENT PAUSE x foo\r\n",
        b"CLIENT PAUSE -1\r\n",
        b"CLIENT PAUSE x\r\n",
        b"CLIENT PAUSE 99999999999999999999\r\n",
        b"CLIENT PAUSE\r\n",
        b"CLIENT UNPAUSE x\r\n",
        b"CLIENT PAUSE 0 write\r\n",
        b"CLIENT UNPAUSE\r\n",
    ];
    let answers = |address| {
        let mut stream = TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut got = Vec::new();
        for request in requests {
            stream.write_all(request).expect("write");
            let mut buffer = [0u8; 256];
            let n = stream.read(&mut buffer).expect("a reply");
            got.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
        }
        got
    };
    assert_eq!(
        answers(servers.tailstore.address()),
        answers(servers.redis.address())
    );
}

/// PFCOUNT writes the count it caches (Redis flags it `may-replicate`): a WRITE pause holds
/// it, and an EXEC that queued it, as Redis 7.0.15 does.
#[test]
fn a_write_pause_holds_pfcount() {
    let server = TestServer::start();
    let mut admin = server.client();
    q::<i64>(&mut admin, &["PFADD", "h", "a", "b", "c"]);
    let mut block = server.raw();
    block.write_all(b"MULTI\r\nPFCOUNT h\r\n").expect("write");
    read_exactly(&mut block, b"+OK\r\n+QUEUED\r\n");
    q::<()>(&mut admin, &["CLIENT", "PAUSE", "1000", "WRITE"]);
    let paused_at = Instant::now();
    block.write_all(b"EXEC\r\n").expect("write");
    let waited = timed(&server, b"PFCOUNT h\r\n", b":3\r\n");
    assert!(waited >= Duration::from_millis(700), "{waited:?}");
    read_exactly(&mut block, b"*1\r\n:3\r\n");
    assert!(paused_at.elapsed() >= Duration::from_millis(900));
    // Reads are not held.
    q::<()>(&mut admin, &["CLIENT", "PAUSE", "1000", "WRITE"]);
    let waited = timed(&server, b"GET h\r\n", b"$");
    assert!(waited < Duration::from_millis(700), "{waited:?}");
}
