//! Conversations of three raw connections (spread over the event loops), compared byte for
//! byte between a real `redis-server` and tailstore: what each connection receives, its
//! replies and what other connections' commands send it (messages, invalidations).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::real_redis::Servers;

/// What one connection says. `$ID0`, `$ID1` and `$ID2` in it stand for the connections'
/// CLIENT IDs (which differ between the servers).
pub type Step = (usize, &'static [u8]);

/// Runs `conversation` against both servers and asserts that every connection received the
/// same bytes at every step (in HELLO's replies, the server's version and the connection's
/// id, which differ between the servers, are replaced by `VERSION` and `ID`).
pub fn compare(conversation: &[Step], test: &str) {
    let Some(servers) = Servers::start(test) else {
        return;
    };
    let expected = converse(servers.redis.address(), conversation);
    let got = converse(servers.tailstore.address(), conversation);
    for (step, (want, have)) in expected.iter().zip(&got).enumerate() {
        let request = conversation[step].1;
        for (who, (want, have)) in want.iter().zip(have).enumerate() {
            assert_eq!(
                without_hello_variables(have),
                without_hello_variables(want),
                "step {step} ({:?}), connection {who}",
                String::from_utf8_lossy(request)
            );
        }
    }
}

/// `received` as text, the values of HELLO's `version` (a bulk string) and `id` (an
/// integer) replaced by `VERSION` and `ID`, in both protocols.
fn without_hello_variables(received: &[u8]) -> String {
    let text = String::from_utf8_lossy(received);
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    loop {
        let found = [
            ("$7\r\nversion\r\n", "VERSION", 2),
            ("$2\r\nid\r\n", "ID", 1),
        ]
        .into_iter()
        .filter_map(|(name, shown, lines)| Some((rest.find(name)?, name, shown, lines)))
        .min();
        let Some((at, name, shown, value_lines)) = found else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at + name.len()]);
        out.push_str(shown);
        out.push_str("\r\n");
        rest = &rest[at + name.len()..];
        for _ in 0..value_lines {
            rest = rest.split_once("\r\n").map_or("", |(_, after)| after);
        }
    }
}

/// Runs the conversation; per step, what each connection had received by its end: the
/// speaker's replies (waited for, as every step's speaker gets one), then whatever the
/// others were sent, each read until 50 ms pass without a byte.
fn converse(address: SocketAddr, conversation: &[Step]) -> Vec<Vec<Vec<u8>>> {
    let mut connections: Vec<TcpStream> = (0..3)
        .map(|_| {
            let stream = TcpStream::connect(address).expect("connect");
            stream
                .set_read_timeout(Some(Duration::from_millis(50)))
                .expect("timeout");
            stream
        })
        .collect();
    let ids: Vec<String> = connections.iter_mut().map(client_id).collect();
    let mut transcript = Vec::new();
    for (speaker, request) in conversation {
        let mut request = String::from_utf8_lossy(request).into_owned();
        for (n, id) in ids.iter().enumerate() {
            request = request.replace(&format!("$ID{n}"), id);
        }
        connections[*speaker]
            .write_all(request.as_bytes())
            .expect("write");
        let mut received = vec![Vec::new(); connections.len()];
        received[*speaker] = read_until_quiet(&mut connections[*speaker], true);
        for (who, stream) in connections.iter_mut().enumerate() {
            if who != *speaker {
                received[who] = read_until_quiet(stream, false);
            }
        }
        transcript.push(received);
    }
    transcript
}

/// The connection's CLIENT ID, as text.
fn client_id(stream: &mut TcpStream) -> String {
    stream.write_all(b"CLIENT ID\r\n").expect("write");
    let reply = String::from_utf8_lossy(&read_until_quiet(stream, true)).into_owned();
    let id = reply.trim_start_matches(':').trim_end();
    assert!(id.parse::<u64>().is_ok(), "CLIENT ID answered {reply:?}");
    id.to_string()
}

/// What `stream` receives until a read times out, after the first byte if `expecting`
/// (for up to 10 s).
fn read_until_quiet(stream: &mut TcpStream, expecting: bool) -> Vec<u8> {
    let started = std::time::Instant::now();
    let mut got = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buffer[..n]),
            Err(_)
                if expecting && got.is_empty() && started.elapsed() < Duration::from_secs(10) => {}
            Err(_) => return got,
        }
    }
}
