//! The pair of servers the differential tests compare: a real `redis-server` and tailstore's
//! (in-process). Without a `redis-server` on the PATH the tests say they are skipped and pass.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use tailstore_resp::{parse_reply, Limits};

use super::redis_process::{redis_program, start_redis, RedisServer};
use super::{command, TestServer};

/// A real Redis and tailstore, side by side.
pub struct Servers {
    pub redis: RedisServer,
    pub tailstore: TestServer,
}

impl Servers {
    /// Both servers, or `None` (after saying so) when redis-server is not installed.
    pub fn start(test: &str) -> Option<Servers> {
        let Some(program) = redis_program() else {
            println!("redis-server not found: skipping {test}");
            return None;
        };
        Some(Servers {
            redis: start_redis(&program),
            tailstore: TestServer::start(),
        })
    }
}

/// Both servers, a connection to each, and the commands and subcommands both list, for the
/// tests that go through every command. Keep `servers` bound while the connections are in
/// use: dropping it stops both servers.
#[allow(dead_code)] // not every test binary that has the support module compares commands
pub struct Compared {
    pub servers: Servers,
    pub redis: redis::Connection,
    pub tailstore: redis::Connection,
    /// [`commands_both_answer`].
    pub commands: Vec<String>,
}

#[allow(dead_code)]
impl Compared {
    /// The servers, connections and commands, or `None` (after saying so) when
    /// redis-server is not installed.
    pub fn start(test: &str) -> Option<Compared> {
        let servers = Servers::start(test)?;
        let mut redis = super::client_at(servers.redis.address());
        let mut tailstore = servers.tailstore.client();
        let commands = commands_both_answer(&mut redis, &mut tailstore);
        Some(Compared {
            servers,
            redis,
            tailstore,
            commands,
        })
    }
}

/// The commands and subcommands (`client|kill`) both servers list in COMMAND LIST, in
/// tailstore's order (tailstore also has a few of Redis 7.2's, Redis 7.0 some it has not).
#[allow(dead_code)] // not every test binary that has the support module compares commands
pub fn commands_both_answer(
    redis: &mut redis::Connection,
    tailstore: &mut redis::Connection,
) -> Vec<String> {
    let theirs: std::collections::BTreeSet<String> =
        super::q::<Vec<String>>(redis, &["COMMAND", "LIST"])
            .into_iter()
            .collect();
    super::q::<Vec<String>>(tailstore, &["COMMAND", "LIST"])
        .into_iter()
        .filter(|name| theirs.contains(name))
        .collect()
}

/// Sends `cases` in turn on one connection to each server and asserts that every reply is
/// the same, byte for byte (HELLO's, which names the server and its version, excepted).
pub fn same_replies(test: &str, cases: &[&[&str]]) {
    let Some(servers) = Servers::start(test) else {
        return;
    };
    let expected = converse(servers.redis.address(), cases);
    let got = converse(servers.tailstore.address(), cases);
    for (at, (want, have)) in expected.iter().zip(&got).enumerate() {
        if cases[at][0] == "hello" {
            continue;
        }
        assert_eq!(
            String::from_utf8_lossy(have),
            String::from_utf8_lossy(want),
            "{:?}",
            cases[at]
        );
    }
}

/// The replies to `cases`, each exactly as received.
fn converse(address: SocketAddr, cases: &[&[&str]]) -> Vec<Vec<u8>> {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    cases
        .iter()
        .map(|args| {
            stream
                .write_all(&command(args).get_packed_command())
                .expect("write");
            read_reply(&mut stream)
        })
        .collect()
}

/// One whole reply's bytes.
fn read_reply(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        if let Ok(Some((_, used))) = parse_reply(&got, &Limits::default()) {
            assert_eq!(used, got.len(), "one reply at a time");
            return got;
        }
        let n = stream.read(&mut buffer).expect("a reply");
        assert!(n > 0, "the server closed the connection");
        got.extend_from_slice(&buffer[..n]);
    }
}
