//! Accepting through a shortage of file descriptors (`server/worker.rs`, `accept`): the
//! connections left in a listener's queue when accept fails for want of a descriptor are
//! accepted once descriptors are free again, without waiting for another connection to
//! arrive (the readiness event that told of them does not come again). Redis fixed the same
//! starvation as CVE-2025-48367. A test binary of its own: it lowers the limit on open
//! files of the whole process.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use rustix::net::{connect, socket, AddressFamily, SocketType};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use support::TestServer;

/// Puts the process's limit on open files back as it was, also when the test fails.
struct Restore(Rlimit);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = setrlimit(Resource::Nofile, self.0);
    }
}

fn answers_ping(stream: &mut TcpStream, patience: Duration) -> bool {
    stream.set_read_timeout(Some(patience)).expect("timeout");
    let mut reply = [0u8; 7];
    stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

#[test]
fn connections_queued_in_a_descriptor_shortage_are_served_once_descriptors_free_up() {
    let server = TestServer::start();
    let before = getrlimit(Resource::Nofile);
    // The clients' sockets are made before the limit is lowered, so that only the server
    // runs short: of the 6 descriptors left, it can accept 6 of the 14 connections.
    let sockets: Vec<_> = (0..14)
        .map(|_| socket(AddressFamily::INET, SocketType::STREAM, None).expect("a socket"))
        .collect();
    let open = std::fs::read_dir("/proc/self/fd").expect("/proc").count() as u64;
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(open + 6),
            maximum: before.maximum,
        },
    )
    .expect("lower the limit on open files");
    let _restore = Restore(before);

    let mut clients: Vec<TcpStream> = sockets
        .into_iter()
        .map(|fd| {
            connect(&fd, &server.address()).expect("connect");
            TcpStream::from(fd)
        })
        .collect();
    for client in &mut clients {
        client.write_all(b"PING\r\n").expect("send");
    }
    let (mut served, mut waiting) = (Vec::new(), Vec::new());
    for mut client in clients {
        if answers_ping(&mut client, Duration::from_millis(500)) {
            served.push(client);
        } else {
            waiting.push(client);
        }
    }
    assert!(
        !waiting.is_empty() && !served.is_empty(),
        "no shortage: {} served, {} waiting",
        served.len(),
        waiting.len()
    );

    // Free descriptors, with no new connection to wake the listener.
    drop(served);
    for client in &mut waiting {
        assert!(
            answers_ping(client, Duration::from_secs(5)),
            "a connection queued during the shortage was never served"
        );
    }
}
