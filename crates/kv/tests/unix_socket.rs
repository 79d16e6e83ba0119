//! A Unix domain socket beside TCP (`ServerConfig::unix_socket`, Redis's `unixsocket`): the
//! same keys through either, Redis's address and `U` flag in CLIENT LIST, the socket's
//! permissions, the file removed at the stop, a stale socket replaced, and `redis-cli -s`
//! against it. (Any other file at the path is refused: `cli/tests/serve.rs`.)

mod support;

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use support::{q, Options, TestServer};
use tailstore_kv::server::UnixSocket;

/// A path for a socket of this test process, in the temporary directory (a Unix socket's
/// path must be short).
fn socket_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("tailstore-{}-{name}.sock", std::process::id()))
}

fn with_socket_at(path: PathBuf, permissions: u32) -> TestServer {
    TestServer::with(Options {
        unix_socket: Some(UnixSocket {
            path,
            permissions: Some(permissions),
        }),
        ..Options::default()
    })
}

/// Sends `request` on `stream` and reads exactly `expected.len()` bytes, which must be it.
#[track_caller]
fn exchange(stream: &mut UnixStream, request: &[u8], expected: &[u8]) {
    stream.write_all(request).expect("write");
    let mut got = vec![0; expected.len()];
    stream.read_exact(&mut got).expect("the reply");
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

#[test]
fn the_unix_socket_serves_the_same_keys() {
    let server = with_socket_at(socket_path("same-keys"), 0o700);
    let path = server.unix_socket();
    let meta = std::fs::metadata(&path).expect("the socket file");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);

    let mut local = UnixStream::connect(&path).expect("connect");
    local
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    exchange(&mut local, b"SET k local\r\n", b"+OK\r\n");
    let mut tcp = server.client();
    assert_eq!(q::<String>(&mut tcp, &["GET", "k"]), "local");

    let name = format!("{}:0", path.display());
    let list = format!("CLIENT LIST ID {}\r\n", {
        local.write_all(b"CLIENT ID\r\n").expect("write");
        let mut reply = [0u8; 64];
        let n = local.read(&mut reply).expect("read");
        String::from_utf8_lossy(&reply[1..n - 2]).into_owned()
    });
    local.write_all(list.as_bytes()).expect("write");
    let mut reply = vec![0u8; 4096];
    let n = local.read(&mut reply).expect("read");
    let line = String::from_utf8_lossy(&reply[..n]);
    assert!(
        line.contains(&format!("addr={name} laddr={name} ")),
        "{line}"
    );
    assert!(line.contains(" flags=U "), "{line}");

    let settings: Vec<String> = q(&mut tcp, &["CONFIG", "GET", "unixsocket*"]);
    assert_eq!(
        settings,
        [
            "unixsocket",
            &path.display().to_string(),
            "unixsocketperm",
            "700"
        ]
    );
    drop(local);
    drop(tcp);
    drop(server);
    assert!(!path.exists(), "the socket file outlived the server");
}

#[test]
fn a_stale_socket_is_replaced() {
    // A server that did not stop cleanly leaves its socket file behind.
    let path = socket_path("stale");
    drop(std::os::unix::net::UnixListener::bind(&path).expect("a socket file"));
    assert!(path.exists());
    let server = with_socket_at(path, 0o755);
    let mut stream = UnixStream::connect(server.unix_socket()).expect("connect");
    exchange(&mut stream, b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn redis_cli_connects_through_the_socket() {
    let installed = std::process::Command::new("redis-cli")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !installed {
        println!("redis-cli not found: skipping");
        return;
    }
    let server = with_socket_at(socket_path("redis-cli"), 0o700);
    let out = std::process::Command::new("redis-cli")
        .arg("-s")
        .arg(server.unix_socket())
        .args(["SET", "via", "cli"])
        .output()
        .expect("run redis-cli");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
    let mut tcp = server.client();
    assert_eq!(q::<String>(&mut tcp, &["GET", "via"]), "cli");
}
