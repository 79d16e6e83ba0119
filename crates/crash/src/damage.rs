//! Pieces of the damage tests (`engine/tests/damaged_pages.rs`, `kv/tests/damaged_rows.rs`):
//! each runs thousands of cases that must neither panic, in any thread, nor hang, and
//! chooses each case's damage from its seed alone.

use std::panic;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// Every panic of any thread of the process from its creation on, message and thread,
/// each still reported as usual. A test binary that uses it should hold one test only (or
/// tests that accept each other's panics): the hook is the process's.
pub struct PanicLog {
    panics: Arc<Mutex<Vec<String>>>,
}

impl PanicLog {
    pub fn install() -> PanicLog {
        let panics = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&panics);
        let report = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            report(info);
            let thread = thread::current().name().unwrap_or("unnamed").to_string();
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!("thread {thread}: {info}"));
        }));
        PanicLog { panics }
    }

    /// The panics since the last call.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.panics.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// How a case run by [`run_with_deadline`] ended without a result.
#[derive(Debug, PartialEq, Eq)]
pub enum Unfinished {
    /// It panicked (a [`PanicLog`] has the message).
    Panicked,
    /// It was still running at the deadline (left running: a hung thread cannot be stopped).
    Hung,
}

/// Runs `case` on a thread of its own, waiting at most `deadline` for its result.
pub fn run_with_deadline<T: Send + 'static>(
    deadline: Duration,
    case: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Unfinished> {
    let (done, result) = mpsc::channel();
    let worker = thread::Builder::new()
        .name("damaged-case".into())
        .spawn(move || {
            let _ = done.send(case());
        })
        .map_err(|_| Unfinished::Panicked)?;
    match result.recv_timeout(deadline) {
        Ok(value) => {
            let _ = worker.join();
            Ok(value)
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(Unfinished::Panicked),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(Unfinished::Hung),
    }
}

/// xorshift64: a case's choices, reproducible from its seed alone.
pub struct Rng(u64);

impl Rng {
    pub fn from_seed(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// One of `choices` (which must not be empty).
    pub fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        choices[self.below(choices.len() as u64) as usize]
    }
}

/// The number in environment variable `name`, if it holds one (cases to run, a first seed).
pub fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|n| n.parse().ok())
}

/// The most resident memory the process has had (`VmHWM` of /proc/self/status), in bytes; 0
/// where unknown: the damage tests' bound on what a damaged length made anything allocate.
pub fn peak_memory_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
