//! The SIGKILL crash harness shared by the log's and the engine's process-crash tests (and,
//! in [`damage`], what the damage tests share; in [`certificates`], the TLS tests'
//! certificates).
//!
//! A test binary re-executes itself with `--exact <entry>` and [`CHILD_ENV`] set, so the
//! entry test runs the child's workload instead of being an empty test. The child prints one
//! line per fact the parent must later find (an acknowledged commit, `READY`, a checkpoint);
//! the parent collects complete lines only — a line cut by the kill was never fully printed —
//! and kills the child with SIGKILL at the moment it chooses.

#![forbid(unsafe_code)]

#[cfg(feature = "certificates")]
pub mod certificates;
pub mod damage;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Set (to "1") in the child's environment.
pub const CHILD_ENV: &str = "TAILSTORE_CRASH_CHILD";

/// Whether this process is a crash child.
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// A variable the parent passed to the child.
pub fn env_var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("child: {name} is not set"))
}

/// Ends the child with `code`, saying why on stderr (which the parent prints on failure).
pub fn child_exit(code: i32, why: String) -> ! {
    eprintln!("crash child: {why}");
    std::process::exit(code)
}

/// The child's line printer: each line sent is written to stdout and flushed at once, so that
/// the parent sees an acknowledgement as soon as it is made (a line cut by the kill is never
/// whole). When the parent has gone, nobody will kill the child: it exits.
pub fn line_printer() -> mpsc::SyncSender<String> {
    let (tx, rx) = mpsc::sync_channel::<String>(64);
    thread::spawn(move || {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        for line in rx {
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                std::process::exit(0);
            }
        }
    });
    tx
}

/// Where a test keeps a PMEM file named `name`: in /dev/shm (tmpfs, as a real run) when it
/// has room for a test's PMEM files, else in `dir` (a PMEM file is refused on a file system
/// with less room than its size).
pub fn pmem_path(dir: &Path, name: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    if tailstore_media::pmem::scratch_dir(PMEM_ROOM) == shm {
        shm.join(name)
    } else {
        dir.join(name)
    }
}

/// Room a test's PMEM files want: a ring or a whole-log region and a double-write area, and
/// as much to spare.
const PMEM_ROOM: u64 = 512 << 20;

/// Kills per test: `TAILSTORE_KILLS`, else `default`.
pub fn kills(default: usize) -> usize {
    std::env::var("TAILSTORE_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A running child and the readers of its output.
pub struct CrashChild {
    child: Option<Child>,
    started: Instant,
    lines_seen: Receiver<String>,
    stdout: Option<JoinHandle<Vec<String>>>,
    stderr: Option<JoinHandle<String>>,
}

/// What a killed child printed.
pub struct Killed {
    /// Complete lines of stdout, in order (a `READY` line cleaned of the harness's prefix).
    pub lines: Vec<String>,
    pub stderr: String,
}

impl CrashChild {
    /// Re-runs the current test binary's test `entry` as a child with `envs` (and
    /// [`CHILD_ENV`]) set.
    pub fn spawn(entry: &str, envs: &[(&str, String)]) -> CrashChild {
        let exe = std::env::current_exe().expect("current exe");
        let mut command = Command::new(exe);
        command
            .args(["--exact", entry, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in envs {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("spawn the crash child");
        let started = Instant::now();
        let stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let (seen_tx, lines_seen) = mpsc::channel();
        let stdout = thread::spawn(move || {
            let mut lines = Vec::new();
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    // A line cut by the kill has no newline: it was never completely printed.
                    Ok(_) if !line.ends_with('\n') => break,
                    Ok(_) => {
                        // The harness's "test child_entry ... " has no newline; READY follows.
                        let text = match line.find("READY ") {
                            Some(at) => &line[at..],
                            None => &line,
                        };
                        let text = text.trim_end().to_string();
                        let _ = seen_tx.send(text.clone());
                        lines.push(text);
                    }
                }
            }
            lines
        });
        let stderr = thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        CrashChild {
            child: Some(child),
            started,
            lines_seen,
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    /// Time since the child was started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Waits until the child prints a line starting with `prefix` (lines before it are
    /// passed over); `false` after `timeout` or once its output ends.
    pub fn wait_for_line(&self, prefix: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines_seen.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }

    /// SIGKILLs the child and returns what it printed. Panics (naming `label`) if it had
    /// exited by itself before the kill, or if it exited cleanly.
    pub fn kill(mut self, label: &str) -> Killed {
        let mut child = self.child.take().expect("child");
        if let Ok(Some(status)) = child.try_wait() {
            let stderr = self.join_stderr();
            panic!(
                "{label}: the child exited by itself ({status}) before the kill; stderr:\n{stderr}"
            );
        }
        child.kill().expect("SIGKILL the child");
        let status = child.wait().expect("reap the child");
        assert!(
            !status.success(),
            "{label}: the child was killed, yet exited cleanly"
        );
        let lines = self
            .stdout
            .take()
            .map(|h| h.join().expect("stdout reader"))
            .unwrap_or_default();
        let stderr = self.join_stderr();
        Killed { lines, stderr }
    }

    fn join_stderr(&mut self) -> String {
        self.stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for CrashChild {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
