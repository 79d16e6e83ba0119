//! Lua scripts: EVAL, EVALSHA, their read-only forms and SCRIPT, as Redis 7.0 runs them.
//!
//! # One script, one transaction
//!
//! A script runs as one engine transaction, like an EXEC block: every `redis.call` inside
//! it is a data command run in that transaction's context ([`crate::command::Ctx`]), and the
//! reply is sent, like any other, only once the commit is durable. Other clients see all of
//! the script's writes or none of them, and a SIGKILL cannot leave half of a script: the
//! commit's log record holds all of its changes.
//!
//! The engine's transactions are optimistic: a conflicting commit aborts the transaction
//! and the runner runs it again. A script is therefore run again from its start after a
//! conflict, on a fresh transaction; what it did in the aborted run is gone with that
//! transaction, except for its effects outside the database, and it has none that leave
//! before the commit: messages it PUBLISHes are collected per run and only the last run's
//! are sent (after the durability wait, like a PUBLISH's), and the keys its writes signal
//! to blocked clients are signalled after the commit.
//!
//! As in Redis, a script that fails part-way (an error raised by `redis.call`, a Lua
//! runtime error) keeps what it wrote before the failure: its error is its reply, and the
//! transaction commits. Three failures undo the script instead, because the server, not the
//! script, stops it: running longer than its time limit ([`DEFAULT_TIME_LIMIT`] unless `serve
//! --script-time-limit` says otherwise; Redis would answer BUSY to every
//! other client until SCRIPT KILL or SHUTDOWN NOSAVE; a transaction can simply be rolled
//! back), an allocation past the memory limit (below), and an engine error (a conflict is
//! retried; a stopped database fails the script).
//!
//! # The sandbox
//!
//! Each event loop has its own Lua 5.1 state ([`Vm`], Redis's Lua version), created at the
//! loop's first script; the scripts' bodies are shared by all loops ([`Scripts`], by SHA1,
//! so EVALSHA works on any connection) and compiled once per loop. Scripts see Redis's
//! globals through read-only tables: a script cannot create globals, change a library or
//! the `redis` table, or reach the real globals (no `getfenv`, `setfenv`, `rawset`,
//! `loadstring`, `dofile`), so one client's script cannot change another's. The libraries
//! are Lua's base, `string`, `table` and `math`, Redis's `cjson`, `cmsgpack` and `bit`, and
//! the `redis` table (`call`, `pcall`, `error_reply`, `status_reply`, `sha1hex`, `log`,
//! `setresp`, `replicate_commands`, and `set_repl`, `debug` and `breakpoint`, which do
//! nothing here); Redis's `struct` is not provided. KEYS and ARGV are new tables for each
//! script, and neither `loadstring` nor EVAL loads Lua's bytecode (Lua 5.1 trusts what it
//! loads, and crafted bytecode escapes any sandbox). Once the server stops a script (its
//! time limit, SCRIPT KILL) no `pcall` or `xpcall` catches the stop.
//! A loop's Lua state never holds more than its memory limit ([`DEFAULT_MEMORY_LIMIT`]
//! unless `serve --script-memory` says otherwise): Lua's allocator refuses what would pass
//! it, so one call cannot overshoot (`string.rep`, a doubling `..` loop). A script whose
//! allocation is refused fails with Lua's "not enough memory" and is undone, as one that runs
//! too long; one that catches the failure with `pcall` runs on within the limit.
//!
//! The bodies are not durable: after a restart EVALSHA answers NOSCRIPT until the script
//! is loaded again, as in Redis (clients fall back to EVAL).

mod bit;
mod cache;
mod cjson;
mod cmsgpack;
mod convert;
pub mod library;
mod vm;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sha1::{Digest, Sha1};

pub use cache::{BlockScripts, ScriptCache};
pub use vm::{Host, Invocation, Target, Vm};

/// How long a script may run before the server stops it and undoes its writes, unless the
/// server is told otherwise (`ServerConfig::script_time_limit`): Redis's default
/// `busy-reply-threshold`, after which Redis answers BUSY to everyone else.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(5);

/// How long a library's code may run at its load (Redis's, after which FUNCTION LOAD
/// answers "FUNCTION LOAD timeout").
pub const LOAD_TIME_LIMIT: Duration = Duration::from_millis(500);

/// The most memory one event loop's Lua state may hold, unless the server is told otherwise
/// (`ServerConfig::script_memory`).
pub const DEFAULT_MEMORY_LIMIT: usize = 512 * 1024 * 1024;

/// The least memory limit a Lua state is given: the sandbox's libraries and prelude take
/// about a hundred KiB, and a limit they do not fit in fails every script.
pub const MIN_MEMORY_LIMIT: usize = 8 * 1024 * 1024;

/// The bodies of the scripts loaded since the start (or the last SCRIPT FLUSH), by their
/// SHA1 in lowercase hex: what EVALSHA finds, on any event loop; and the scripts' limits.
pub struct Scripts {
    bodies: Mutex<Bodies>,
    /// Counts SCRIPT FLUSHes: a loop whose compiled functions are older drops them.
    flushes: AtomicU64,
    /// Scripts running now, on any loop (SCRIPT KILL's NOTBUSY).
    running: AtomicUsize,
    /// Counts SCRIPT KILLs: a script running when it changes is stopped.
    kills: Arc<AtomicU64>,
    /// Bytes each loop's Lua state may hold.
    memory_limit: usize,
    /// How long a script may run.
    time_limit: Duration,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts::new(DEFAULT_MEMORY_LIMIT, DEFAULT_TIME_LIMIT)
    }
}

type Bodies = HashMap<String, Arc<[u8]>>;

impl Scripts {
    /// No bodies yet; each loop's Lua state limited to `memory_limit` bytes (at least
    /// [`MIN_MEMORY_LIMIT`]), each script to `time_limit` (at least a millisecond).
    pub fn new(memory_limit: usize, time_limit: Duration) -> Scripts {
        Scripts {
            bodies: Mutex::default(),
            flushes: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            kills: Arc::default(),
            memory_limit: memory_limit.max(MIN_MEMORY_LIMIT),
            time_limit: time_limit.max(Duration::from_millis(1)),
        }
    }

    pub fn time_limit(&self) -> Duration {
        self.time_limit
    }

    pub fn memory_limit(&self) -> usize {
        self.memory_limit
    }

    /// Remembers `body`; its SHA1.
    pub fn load(&self, body: &[u8]) -> String {
        let sha = sha1_hex(body);
        self.insert(&sha, body);
        sha
    }

    /// Remembers `body`, whose SHA1 is `sha`.
    pub fn insert(&self, sha: &str, body: &[u8]) {
        self.bodies
            .lock()
            .entry(sha.to_string())
            .or_insert_with(|| body.into());
    }

    /// The body whose SHA1 is `sha` (any case).
    pub fn get(&self, sha: &[u8]) -> Option<Arc<[u8]>> {
        let sha = std::str::from_utf8(sha).ok()?.to_ascii_lowercase();
        self.bodies.lock().get(&sha).cloned()
    }

    /// How many bodies are loaded (INFO's `number_of_cached_scripts`).
    pub fn len(&self) -> usize {
        self.bodies.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, sha: &[u8]) -> bool {
        self.get(sha).is_some()
    }

    /// SCRIPT FLUSH: forgets every body.
    pub fn flush(&self) {
        let mut bodies = self.bodies.lock();
        bodies.clear();
        // Under the lock: a loop that sees the old count finds the bodies still there.
        self.flushes.fetch_add(1, Ordering::SeqCst);
    }

    fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::SeqCst)
    }

    /// SCRIPT KILL: stops the scripts running now (their writes are undone); `false` if
    /// none is.
    pub fn kill(&self) -> bool {
        if self.running.load(Ordering::SeqCst) == 0 {
            return false;
        }
        self.kills.fetch_add(1, Ordering::SeqCst);
        true
    }
}

/// SHA1 of `bytes` in lowercase hex, as EVALSHA and `redis.sha1hex` name it.
pub fn sha1_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(40);
    for byte in Sha1::digest(bytes) {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 15)]));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_matches_redis() {
        // Redis: SCRIPT LOAD "return 1", and redis.sha1hex('').
        assert_eq!(
            sha1_hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }

    #[test]
    fn bodies_are_found_by_sha_in_any_case_until_flushed() {
        let scripts = Scripts::default();
        let sha = scripts.load(b"return 1");
        assert!(scripts.contains(sha.to_ascii_uppercase().as_bytes()));
        assert_eq!(
            scripts.get(sha.as_bytes()).as_deref(),
            Some(&b"return 1"[..])
        );
        scripts.flush();
        assert!(!scripts.contains(sha.as_bytes()));
        assert_eq!(scripts.flushes(), 1);
    }
}
