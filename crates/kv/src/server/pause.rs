//! CLIENT PAUSE timeout [WRITE|ALL] and CLIENT UNPAUSE: clients' commands held back for a
//! while, as a failover or an upgrade script asks of Redis before it switches servers.
//!
//! A command that the pause holds (every command in ALL mode; in WRITE mode those that may
//! change data or send messages: writes, scripts and functions but their read-only forms
//! and those declared `no-writes`, PUBLISH, SPUBLISH, PFCOUNT (which writes the count it
//! caches), the FUNCTION subcommands that change libraries, an EXEC whose queue holds one)
//! is not run: it waits on its connection, which takes no further command (so a
//! pipeline keeps its order), until the pause ends. Its event loop sleeps no longer than
//! the pause, and CLIENT UNPAUSE wakes every loop. The active expiry waits too, so that a
//! paused server's data does not change, which is what the pause promises. As in Redis, the
//! client that paused is paused with the others, and in ALL mode even CLIENT UNPAUSE waits
//! for the timeout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use super::connection::Queued;
use crate::command::{lookup, Command, Run};

/// The pause now, if any.
#[derive(Default)]
pub struct Pause {
    /// Whether a pause may be in force: the one load the commands of an unpaused server pay.
    active: AtomicBool,
    state: Mutex<Option<Paused>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Paused {
    until: Instant,
    writes_only: bool,
}

impl Pause {
    /// CLIENT PAUSE: holds commands until `until` (all of them, or only those that may
    /// write). A pause in force is lengthened, never shortened, and stays ALL if it was.
    pub fn start(&self, until: Instant, writes_only: bool) {
        let mut state = self.state.lock();
        let paused = match *state {
            Some(old) if old.until > Instant::now() => Paused {
                until: old.until.max(until),
                writes_only: old.writes_only && writes_only,
            },
            _ => Paused { until, writes_only },
        };
        *state = Some(paused);
        self.active.store(true, Ordering::Release);
    }

    /// CLIENT UNPAUSE (the caller wakes the loops).
    pub fn end(&self) {
        *self.state.lock() = None;
        self.active.store(false, Ordering::Release);
    }

    /// Whether a pause may be in force (one that has run out may not be noticed yet).
    pub fn may_be_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// When the pause in force ends; `None` if none is.
    pub fn ends_at(&self) -> Option<Instant> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        let mut state = self.state.lock();
        match *state {
            Some(paused) if paused.until > Instant::now() => Some(paused.until),
            _ => {
                *state = None;
                self.active.store(false, Ordering::Release);
                None
            }
        }
    }

    /// Whether the pause in force holds back the command `args` (`queued`: the commands
    /// an EXEC would run; `no_writes`: whether a script or function call runs code that
    /// declares `no-writes`, which a WRITE pause lets through).
    pub fn holds(
        &self,
        args: &[Vec<u8>],
        queued: Option<&[Queued]>,
        no_writes: impl Fn(&[Vec<u8>]) -> bool,
    ) -> bool {
        if !self.active.load(Ordering::Acquire) {
            return false;
        }
        let current = *self.state.lock();
        let writes_only = match current {
            Some(paused) if paused.until > Instant::now() => paused.writes_only,
            _ => return self.ends_at().is_some(),
        };
        !writes_only || (may_write(args, queued) && !no_writes(args))
    }
}

/// Whether the command `args` may change data or send messages (WRITE mode holds it).
fn may_write(args: &[Vec<u8>], queued: Option<&[Queued]>) -> bool {
    let Some(command) = lookup(&args[0]) else {
        return false;
    };
    match command.name {
        "exec" => queued.is_some_and(|queue| queue.iter().any(|q| may_write(&q.args, None))),
        "eval" | "evalsha" | "fcall" | "publish" | "spublish" => true,
        "function" => args.get(1).is_some_and(|sub| {
            ["load", "delete", "flush", "restore"]
                .iter()
                .any(|name| sub.eq_ignore_ascii_case(name.as_bytes()))
        }),
        // PFCOUNT, which writes the count it caches: a read Redis flags `may-replicate`.
        _ => is_data_write(command) || command.may_replicate(),
    }
}

fn is_data_write(command: &Command) -> bool {
    matches!(command.run, Run::Data(_)) && command.is_write()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn words(line: &str) -> Vec<Vec<u8>> {
        line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_write_pause_holds_what_may_write_until_it_ends() {
        let pause = Pause::default();
        assert!(!pause.holds(&words("SET k v"), None, |_| false));
        pause.start(Instant::now() + Duration::from_secs(60), true);
        for held in [
            "SET k v",
            "PFCOUNT h",
            "DEL k",
            "EVAL x 0",
            "PUBLISH c m",
            "FUNCTION LOAD x",
        ] {
            assert!(pause.holds(&words(held), None, |_| false), "{held}");
        }
        for free in [
            "GET k",
            "EVAL_RO x 0",
            "FCALL_RO f 0",
            "FUNCTION LIST",
            "PING",
        ] {
            assert!(!pause.holds(&words(free), None, |_| false), "{free}");
        }
        assert!(
            !pause.holds(&words("EVAL x 0"), None, |_| true),
            "declared no-writes"
        );
        let queue = [words("GET k"), words("INCR k")].map(|args| Queued { args });
        assert!(pause.holds(&words("EXEC"), Some(&queue), |_| false));
        let counts = [words("PFCOUNT h")].map(|args| Queued { args });
        assert!(pause.holds(&words("EXEC"), Some(&counts), |_| false));
        assert!(!pause.holds(&words("EXEC"), Some(&queue[..1]), |_| false));
        pause.end();
        assert!(!pause.holds(&words("SET k v"), None, |_| false));
        assert_eq!(pause.ends_at(), None);
    }

    #[test]
    fn a_pause_is_lengthened_never_shortened_and_stays_all() {
        let pause = Pause::default();
        let later = Instant::now() + Duration::from_secs(60);
        pause.start(later, false);
        pause.start(Instant::now() + Duration::from_secs(1), true);
        assert_eq!(pause.ends_at(), Some(later));
        assert!(pause.holds(&words("GET k"), None, |_| false));
        pause.start(Instant::now(), true);
        assert_eq!(pause.ends_at(), Some(later));
    }

    #[test]
    fn a_pause_ends_by_itself() {
        let pause = Pause::default();
        pause.start(Instant::now() + Duration::from_millis(20), false);
        assert!(pause.holds(&words("GET k"), None, |_| false));
        std::thread::sleep(Duration::from_millis(30));
        assert!(!pause.holds(&words("GET k"), None, |_| false));
        assert_eq!(pause.ends_at(), None);
    }
}
