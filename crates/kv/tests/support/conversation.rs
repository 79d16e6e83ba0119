//! Conversations of three raw connections (spread over the event loops), compared byte for
//! byte between a real `redis-server` and tailstore: what each connection receives, its
//! replies and what other connections' commands send it (messages, invalidations).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

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
    // Side by side: a conversation is mostly waiting for quiet.
    let (expected, got) = thread::scope(|scope| {
        let redis = scope.spawn(|| converse(servers.redis.address(), conversation));
        let got = converse(servers.tailstore.address(), conversation);
        (redis.join().expect("the conversation with Redis"), got)
    });
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

/// How long every connection must stay silent before a step is taken as over: what a
/// command sends other connections may come a little after its reply (from another loop).
const QUIET: Duration = Duration::from_millis(100);

/// How long the speaker's first byte may take.
const FIRST_BYTE: Duration = Duration::from_secs(10);

/// Runs the conversation; per step, what each connection had received by its end: the
/// speaker's replies (waited for, as every step's speaker gets one), and whatever any
/// connection was sent until none received a byte for [`QUIET`].
fn converse(address: SocketAddr, conversation: &[Step]) -> Vec<Vec<Vec<u8>>> {
    let mut connections: Vec<TcpStream> = (0..3)
        .map(|_| {
            let stream = TcpStream::connect(address).expect("connect");
            // Reads sweep the connections; a request is far smaller than a socket's buffer,
            // so a write never finds it full.
            stream.set_nonblocking(true).expect("nonblocking");
            stream
        })
        .collect();
    let ids: Vec<String> = connections
        .iter_mut()
        .map(|stream| client_id(std::slice::from_mut(stream)))
        .collect();
    let mut transcript = Vec::new();
    for (speaker, request) in conversation {
        let mut request = String::from_utf8_lossy(request).into_owned();
        for (n, id) in ids.iter().enumerate() {
            request = request.replace(&format!("$ID{n}"), id);
        }
        connections[*speaker]
            .write_all(request.as_bytes())
            .expect("write");
        transcript.push(read_until_quiet(&mut connections, *speaker));
    }
    transcript
}

/// The connection's CLIENT ID, as text.
fn client_id(stream: &mut [TcpStream]) -> String {
    stream[0].write_all(b"CLIENT ID\r\n").expect("write");
    let reply = String::from_utf8_lossy(&read_until_quiet(stream, 0)[0]).into_owned();
    let id = reply.trim_start_matches(':').trim_end();
    assert!(id.parse::<u64>().is_ok(), "CLIENT ID answered {reply:?}");
    id.to_string()
}

/// What each of `streams` receives once `speaker`'s first byte has come (within
/// [`FIRST_BYTE`]) until none of them receives a byte for [`QUIET`].
fn read_until_quiet(streams: &mut [TcpStream], speaker: usize) -> Vec<Vec<u8>> {
    let started = Instant::now();
    let mut got = vec![Vec::new(); streams.len()];
    let mut last_byte = None;
    let mut buffer = [0u8; 65536];
    while last_byte.is_none_or(|at: Instant| at.elapsed() < QUIET) {
        let mut received = false;
        for (stream, got) in streams.iter_mut().zip(&mut got) {
            loop {
                match stream.read(&mut buffer) {
                    Ok(0) => break,
                    Ok(n) => {
                        got.extend_from_slice(&buffer[..n]);
                        received = true;
                    }
                    // Nothing more now; or a reset, which ends the stream as a close does.
                    Err(_) => break,
                }
            }
        }
        if received && !got[speaker].is_empty() {
            last_byte = Some(Instant::now());
        }
        if last_byte.is_none() && started.elapsed() > FIRST_BYTE {
            break;
        }
        thread::sleep(Duration::from_millis(1));
    }
    got
}
