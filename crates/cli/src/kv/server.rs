//! Servers `kv compare` starts: how each is spawned, waited for (first reply to PING), asked a
//! question, stopped, and killed — also when `kv compare` itself is interrupted.
//!
//! Why a registry of live servers: SIGINT, SIGTERM or SIGHUP would end `kv compare` without
//! running any destructor, leaving its servers running (a SIGTERM reaches only our process)
//! and their scratch directories and PMEM files behind. Instead a thread waits for those signals, kills
//! every registered server, and leaves the rest to the main thread: its next request fails,
//! it sees [`interrupted`], and unwinds through the destructors that remove the scratch.
//! The registry's lock is held while a child is reaped, so a pid is never signalled after it
//! was reaped (and possibly reused).

use std::fs::File;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use tailstore_resp::Value;

use super::link::Link;

use crate::CliResult;

/// A server process with its output going to a file; killed (SIGKILL) if still running when
/// dropped.
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
    /// Where its stdout and stderr go.
    pub log: PathBuf,
    /// When it was spawned.
    pub spawned: Instant,
}

/// The servers alive now, and the signal that interrupted us, if one did.
struct Live {
    pids: Vec<u32>,
    interrupted_by: Option<&'static str>,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    pids: Vec::new(),
    interrupted_by: None,
});

fn live() -> std::sync::MutexGuard<'static, Live> {
    // A panic while holding it leaves plain data behind: still usable.
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// From now on SIGINT, SIGTERM and SIGHUP (a closed terminal) kill every server spawned
/// here and make [`interrupted`] say so, instead of ending the process.
pub fn stop_servers_on_signals() -> CliResult<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| format!("cannot handle SIGINT, SIGTERM and SIGHUP: {e}"))?;
    thread::Builder::new()
        .name("kv-compare-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                let name = crate::interrupt::name_of(signal);
                let mut live = live();
                live.interrupted_by.get_or_insert(name);
                for &pid in &live.pids {
                    kill_pid(pid, rustix::process::Signal::KILL);
                }
                live.pids.clear();
            }
        })?;
    Ok(())
}

/// The signal that interrupted this run, if one did.
pub fn interrupted() -> Option<&'static str> {
    live().interrupted_by
}

fn kill_pid(pid: u32, signal: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// A free TCP port on loopback (free when asked: the port is released for the server).
pub fn free_port() -> CliResult<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))?;
    Ok(listener.local_addr()?.port())
}

/// Whether `program` is an executable file on PATH.
pub fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

impl ServerProcess {
    /// Spawns `program args…` with stdout and stderr appended to `log`.
    pub fn spawn(program: &Path, args: &[String], port: u16, log: &Path) -> CliResult<Self> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone()?;
        let spawned = Instant::now();
        let mut live = live();
        if let Some(signal) = live.interrupted_by {
            return Err(format!("interrupted by {signal}").into());
        }
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        live.pids.push(child.id());
        drop(live);
        Ok(ServerProcess {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log: log.to_path_buf(),
            spawned,
        })
    }

    /// Waits until the server answers PING with something other than an error (Redis
    /// answers `-LOADING` while it replays its AOF), trying to connect every millisecond.
    /// Returns the time from spawning to that reply. Fails when the process exits or
    /// `timeout` passes, with the end of what it printed.
    pub fn wait_ready(&mut self, timeout: Duration) -> CliResult<Duration> {
        let limit = self.spawned + timeout;
        loop {
            if let Some(status) = self.try_wait()? {
                return Err(
                    format!("exited ({status}) before answering: {}", self.log_tail(6)).into(),
                );
            }
            if let Ok(stream) = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)) {
                let _ = stream.set_nodelay(true);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut link = Link::new(stream);
                // The same connection keeps asking while the server is loading.
                while Instant::now() < limit {
                    match link.call(&["PING"]) {
                        Ok(Value::Error(_)) => thread::sleep(Duration::from_millis(1)),
                        Ok(_) => return Ok(self.spawned.elapsed()),
                        Err(_) => break,
                    }
                }
            }
            if Instant::now() >= limit {
                return Err(format!(
                    "did not answer PING within {} s: {}",
                    timeout.as_secs(),
                    self.log_tail(6)
                )
                .into());
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Sends one command on a fresh connection and returns the reply.
    pub fn command(&self, args: &[&str]) -> CliResult<Value> {
        let stream = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Link::new(stream).call(args)
    }

    /// Reaps the process if it has exited, unregistering it first.
    fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        let mut live = live();
        let status = self.child.try_wait()?;
        if status.is_some() {
            let pid = self.child.id();
            live.pids.retain(|&p| p != pid);
        }
        Ok(status)
    }

    /// Kills the process with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        {
            let mut live = live();
            let _ = self.child.kill();
            let pid = self.child.id();
            live.pids.retain(|&p| p != pid);
        }
        let _ = self.child.wait();
    }

    /// Asks the process to stop (SIGTERM), waits up to `grace` for it, then kills it.
    pub fn stop(&mut self, grace: Duration) {
        if let Ok(None) = self.try_wait() {
            // Our own child, not reaped yet: its pid cannot have been reused.
            kill_pid(self.child.id(), rustix::process::Signal::TERM);
            let limit = Instant::now() + grace;
            while Instant::now() < limit {
                if let Ok(Some(_)) = self.try_wait() {
                    return;
                }
                thread::sleep(Duration::from_millis(10));
            }
        }
        self.kill();
    }

    /// The last `lines` non-empty lines the server printed, joined by " | ".
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        if tail.is_empty() {
            "(it printed nothing)".to_string()
        } else {
            tail.join(" | ")
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.try_wait() {
            self.kill();
        }
    }
}

/// A reply as text for reports: an integer, a string, or the error.
pub fn reply_text(value: &Value) -> String {
    match value {
        Value::Int(n) => n.to_string(),
        Value::Simple(s) | Value::Bulk(s) | Value::Error(s) => String::from_utf8_lossy(s).into(),
        other => format!("{other:?}"),
    }
}
