//! A real `redis-server` for the differential tests, and the pair of servers they compare:
//! that one and tailstore's (in-process). Without a `redis-server` on the PATH the tests say
//! they are skipped and pass.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TestServer;

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
