//! A real `redis-server` child process on a free port, for the tests that compare tailstore
//! with Redis. Shared with the cli's tests (they include this file by path), so it uses
//! nothing from the rest of `support`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server on a free port in a temporary directory, killed when dropped.
pub struct RedisServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RedisServer {
    pub fn address(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}

/// The `redis-server` program on the PATH, if any.
pub fn redis_program() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("redis-server"))
        .find(|p| p.is_file())
}

/// Starts redis-server without persistence and waits until it answers PING.
pub fn start_redis(program: &Path) -> RedisServer {
    let dir = tempfile::tempdir().expect("temporary directory");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(program)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts redis-server");
    let redis = RedisServer {
        child,
        port,
        _dir: dir,
    };
    let limit = Instant::now() + Duration::from_secs(20);
    while !answers_ping(redis.address()) {
        assert!(Instant::now() < limit, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    redis
}

fn answers_ping(address: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect(address) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}
