//! What the CLI's integration tests share: running the binary and reading what it said.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use tailstore_resp::{encode_command, parse_reply, Limits, Value};

/// Runs the `tailstore` binary with `args` and waits for it.
pub fn tailstore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tailstore"))
        .args(args)
        .output()
        .expect("runs the tailstore binary")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A temporary directory for PMEM files: in /dev/shm (emulated PMEM) where it has room for
/// a server's (`serve`'s 1 GiB log buffer and 64 MiB double-write area, with room to spare;
/// they are refused on a file system with less room than their size).
pub fn pmem_dir() -> tempfile::TempDir {
    let parent = tailstore_media::pmem::scratch_dir(4 << 30);
    tempfile::tempdir_in(parent).unwrap_or_else(|_| tempfile::tempdir().expect("tempdir"))
}

pub fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Fails with a non-zero status and a message containing every one of `needles`, without a
/// panic.
pub fn refused(args: &[&str], needles: &[&str]) {
    let out = tailstore(args);
    assert!(
        !out.status.success(),
        "{args:?} succeeded: {}",
        text(&out.stdout)
    );
    let err = text(&out.stderr);
    for needle in needles {
        assert!(err.contains(needle), "{args:?}: {needle:?} not in {err:?}");
    }
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
}

/// A `tailstore serve` process started by a test, on a port of the loopback it chose.
pub struct Server {
    pub child: Child,
    pub address: SocketAddr,
    /// What it said up to its "listening on" line ("opened in …, recovery replayed …").
    pub said: Vec<String>,
    /// The lines it says on stderr from then on.
    lines: mpsc::Receiver<String>,
}

/// `tailstore serve ARGS…`, started, its stderr piped (where it says what it does).
pub fn spawn_serve(args: &[&str], stdout: Stdio) -> Child {
    spawn_serve_with_env(&[], args, stdout)
}

/// As [`spawn_serve`], with `vars` added to the server's environment alone (not this
/// process's, whose other tests start servers of their own meanwhile).
pub fn spawn_serve_with_env(vars: &[(&str, &str)], args: &[&str], stdout: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tailstore"))
        .arg("serve")
        .args(args)
        .envs(vars.iter().copied())
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tailstore serve")
}

impl Server {
    /// Starts `tailstore serve --listen 127.0.0.1:0 ARGS…` and learns its address from the
    /// "listening on" line.
    pub fn start(args: &[&str]) -> Server {
        Server::start_with_env(&[], args)
    }

    /// As [`Server::start`], with `vars` added to the server's environment (a bug planted
    /// in it for a test, `TAILSTORE_PLANT`).
    pub fn start_with_env(vars: &[(&str, &str)], args: &[&str]) -> Server {
        let child = spawn_serve_with_env(
            vars,
            &[&["--listen", "127.0.0.1:0"][..], args].concat(),
            Stdio::null(),
        );
        Server::listening(child)
    }

    /// As [`Server::start`], the process allowed only `files` open files (through
    /// util-linux's `prlimit`); `None` where `prlimit` is not installed.
    pub fn start_with_open_files(files: u64, args: &[&str]) -> Option<Server> {
        let limit = format!("--nofile={files}:{files}");
        let child = Command::new("prlimit")
            .arg(limit)
            .arg(env!("CARGO_BIN_EXE_tailstore"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .ok()?;
        Some(Server::listening(child))
    }

    /// The server `child` runs, once it says it listens.
    fn listening(mut child: Child) -> Server {
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut said = Vec::new();
        let address = loop {
            let line = match lines.recv_timeout(Duration::from_secs(30)) {
                Ok(line) => line,
                Err(_) => panic!("tailstore serve did not start listening within 30 s: {said:?}"),
            };
            if let Some(rest) = line.split("listening on ").nth(1) {
                let address = rest.split(';').next().unwrap_or("").trim();
                let address = address.parse().expect("listening address");
                said.push(line);
                break address;
            }
            assert!(
                !line.starts_with("error"),
                "tailstore serve failed to start: {line}"
            );
            said.push(line);
        };
        Server {
            child,
            address,
            said,
            lines,
        }
    }

    /// Whether a line it said up to its "listening on" line contains `needle`.
    #[allow(dead_code)] // not every test binary that shares this module asks
    pub fn had_said(&self, needle: &str) -> bool {
        self.said.iter().any(|line| line.contains(needle))
    }

    /// The first line it says from now on, within `limit`, that contains `needle`; the
    /// lines before it are dropped.
    #[allow(dead_code)] // not every test binary that shares this module asks
    pub fn says_within(&self, needle: &str, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            if line.contains(needle) {
                return Some(line);
            }
        }
    }

    /// Waits (at most `limit`) for the process to exit; its status and the lines it said
    /// since it listened.
    pub fn exit_within(mut self, limit: Duration) -> (ExitStatus, Vec<String>) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("tailstore serve did not exit within {limit:?}");
            }
            thread::sleep(Duration::from_millis(10));
        };
        // The reader thread ends with the pipe, which the exit closed.
        let said = self.lines.iter().collect();
        (status, said)
    }
}

/// A test that fails leaves no server behind.
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking RESP connection.
pub struct Client {
    stream: TcpStream,
    input: Vec<u8>,
}

impl Client {
    pub fn connect(address: SocketAddr) -> std::io::Result<Client> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        Ok(Client {
            stream,
            input: Vec::new(),
        })
    }

    pub fn send(&mut self, args: &[&[u8]]) -> std::io::Result<()> {
        let mut out = Vec::new();
        encode_command(args, &mut out);
        self.stream.write_all(&out)
    }

    pub fn receive(&mut self) -> std::io::Result<Value> {
        loop {
            if let Some((value, used)) = parse_reply(&self.input, &Limits::default())
                .map_err(|e| std::io::Error::other(e.to_string()))?
            {
                self.input.drain(..used);
                return Ok(value);
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.input.extend_from_slice(&chunk[..n]);
        }
    }

    pub fn call(&mut self, args: &[&[u8]]) -> Value {
        self.send(args).expect("send");
        self.receive().expect("reply")
    }
}
