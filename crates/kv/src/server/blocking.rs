//! Clients blocked in BLPOP, BRPOP, BLMOVE or BRPOPLPUSH, and the writes that wake them.
//!
//! # How a client blocks and wakes
//!
//! A blocking command runs once like any data command (its handler is the non-blocking
//! form: `command/lists.rs`). If it finds nothing — a nil reply — and the client is not in
//! MULTI, the nil is not sent: the connection keeps the command ([`Blocked`]) and reads no
//! further command until it is answered. Its worker registers the keys it waits on in
//! [`Waiters`], shared by every event loop. Every write command, once its transaction is
//! applied, signals its keys there ([`Waiters::signal`]); each loop with a client waiting
//! on one of them is handed the key and woken. That loop then runs the waiting clients'
//! commands again, the longest-waiting first; one that finds an element is answered
//! (after the pass's durability wait, like any reply), the others wait on. At the
//! deadline the command runs a last time and its reply, nil or not, is sent.
//!
//! # Why no wake-up is lost
//!
//! A write that lands between the failed run and the registration signals nobody. So a
//! newly registered client is run once more after its registration, on the next pass.
//! Registration is `count += 1` then a fence; a signal is the write's apply, a fence, then
//! a read of `count`. Of the two fences, whichever comes second sees what preceded the
//! other: either the signal sees the waiter (and wakes it), or the run after the
//! registration sees the element. A retry that finds the list emptied again by another
//! client waits on; spurious wake-ups (a DEL signals its key too) cost one run.
//!
//! # Why an element popped for a client reaches it or stays durable
//!
//! The retry is an ordinary transaction and its reply waits for its own commit, whose log
//! record follows the push's. A client that disconnects while blocked is closed and
//! unregistered before any retry, so nothing is popped for a connection already gone;
//! one that disconnects after its pop was committed loses that element, as in Redis.
//!
//! Across loops the longest-waiting client is served first only within its loop: two
//! loops woken by one push race for the element (Redis, single-threaded, serves the
//! longest-waiting client of the key).
//!
//! # Why a push costs one run
//!
//! Every client waiting on a written key is due to run again. With thousands of clients
//! blocked on one queue, each push ran them all, one transaction each, though the first
//! took the element. So a pass notes the keys a woken client's pop found empty
//! ([`FoundEmpty`]), and a client woken later in the pass for those keys alone waits on
//! without running: a list or sorted set empty for one pop is empty for every pop of its
//! kind. No wake-up is lost by it: the key was found empty after the write that woke the
//! client, and a later write signals it again. Stream reads are always run (another
//! group or ID may find entries), as are a client's last run and its run after it
//! registered.

use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicUsize, Ordering};
use std::time::Instant;

use crate::command::Command;
use crate::keyspace::Kind;

/// A database number and a key.
pub type DbKey = (u32, Vec<u8>);

/// A connection's blocked command.
pub struct Blocked {
    pub command: &'static Command,
    pub args: Vec<Vec<u8>>,
    /// The database selected when the command was sent.
    pub db: u32,
    /// When it is answered nil at the latest; `None`: never (a timeout of 0).
    pub deadline: Option<Instant>,
    /// The keys it waits on, each once.
    pub keys: Vec<Vec<u8>>,
    /// Its place in its worker's order of blocked clients; 0 until registered.
    pub order: u64,
    /// Set by CLIENT UNBLOCK … ERROR: answered with Redis's UNBLOCKED error instead of a
    /// last run.
    pub unblocked_with_error: bool,
}

impl Blocked {
    pub fn new(
        command: &'static Command,
        args: Vec<Vec<u8>>,
        db: u32,
        deadline: Option<Instant>,
    ) -> Blocked {
        let mut keys = crate::command::blocking_sources(command.name, &args).to_vec();
        keys.sort_unstable();
        keys.dedup();
        Blocked {
            command,
            args,
            db,
            deadline,
            keys,
            order: 0,
            unblocked_with_error: false,
        }
    }

    pub fn waits_on(&self, (db, key): &DbKey) -> bool {
        *db == self.db && self.keys.binary_search(key).is_ok()
    }

    /// What a run that found nothing says of its keys for other waiters: for the pops
    /// of lists and of sorted sets, that each key holds no element for any of them (of
    /// the kind named here). A stream read says nothing of the others' (another group,
    /// another ID may find entries).
    pub fn pops(&self) -> Option<Kind> {
        match self.command.name {
            "blpop" | "brpop" | "blmove" | "brpoplpush" | "blmpop" => Some(Kind::List),
            "bzpopmin" | "bzpopmax" | "bzmpop" => Some(Kind::ZSet),
            _ => None,
        }
    }
}

/// The keys a pass found empty for one kind of pop, running woken clients again: the
/// other clients woken for those keys alone wait on (see "Why a push costs one run").
#[derive(Default)]
pub struct FoundEmpty(Vec<(Kind, DbKey)>);

impl FoundEmpty {
    /// Notes the keys of `blocked`, whose run found nothing.
    pub fn note(&mut self, blocked: &Blocked) {
        if let Some(kind) = blocked.pops() {
            let keys = blocked.keys.iter().map(|k| (kind, (blocked.db, k.clone())));
            self.0.extend(keys);
        }
    }

    /// Whether every key `blocked` waits on was found empty for its kind of pop.
    pub fn covers(&self, blocked: &Blocked) -> bool {
        let Some(kind) = blocked.pops() else {
            return false;
        };
        blocked.keys.iter().all(|key| {
            self.0
                .iter()
                .any(|(k, (db, found))| *k == kind && *db == blocked.db && found == key)
        })
    }
}

/// Which loops have clients waiting on which keys.
#[derive(Default)]
pub struct Waiters {
    /// Blocked clients in all: zero lets a write skip the map (the common case).
    count: AtomicUsize,
    /// Per (db, key), the loop of each client waiting on it (a loop once per client).
    keys: parking_lot::Mutex<HashMap<DbKey, Vec<usize>>>,
}

impl Waiters {
    /// Clients blocked now (INFO's `blocked_clients`).
    pub fn blocked(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Registers a client of loop `at` waiting on `blocked`'s keys. The caller runs its
    /// command once more afterwards (see "Why no wake-up is lost").
    pub fn register(&self, at: usize, blocked: &Blocked) {
        let mut keys = self.keys.lock();
        for key in &blocked.keys {
            keys.entry((blocked.db, key.clone())).or_default().push(at);
        }
        drop(keys);
        self.count.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Removes what [`Waiters::register`] added for the same client.
    pub fn unregister(&self, at: usize, blocked: &Blocked) {
        let mut keys = self.keys.lock();
        for key in &blocked.keys {
            let db_key = (blocked.db, key.clone());
            let Some(loops) = keys.get_mut(&db_key) else {
                continue;
            };
            if let Some(place) = loops.iter().position(|&l| l == at) {
                loops.swap_remove(place);
            }
            if loops.is_empty() {
                keys.remove(&db_key);
            }
        }
        drop(keys);
        let before = self.count.fetch_sub(1, Ordering::SeqCst);
        assert!(before > 0, "a blocked client unregistered twice");
    }

    /// The keys of database `db` some client waits on (for SWAPDB and the flushes, which
    /// change them all).
    pub fn waited_keys(&self, db: u32) -> Vec<Vec<u8>> {
        let waiting = self.keys.lock();
        let keys = waiting.keys().filter(|(at, _)| *at == db);
        keys.map(|(_, key)| key.clone()).collect()
    }

    /// After a write to `keys` of database `db` was applied: hands each key some client
    /// waits on to the loops of those clients (`wake(loop, key)`).
    pub fn signal<'k>(
        &self,
        db: u32,
        keys: impl Iterator<Item = &'k [u8]>,
        mut wake: impl FnMut(usize, DbKey),
    ) {
        fence(Ordering::SeqCst);
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let waiting = self.keys.lock();
        for key in keys {
            let db_key = (db, key.to_vec());
            let Some(loops) = waiting.get(&db_key) else {
                continue;
            };
            let mut woken: Vec<usize> = loops.clone();
            woken.sort_unstable();
            woken.dedup();
            for at in woken {
                wake(at, db_key.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::lookup;

    fn blpop(keys: &[&str]) -> Blocked {
        let mut args: Vec<Vec<u8>> = vec![b"blpop".to_vec()];
        args.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
        args.push(b"0".to_vec());
        let command = lookup(b"blpop").expect("blpop is a command");
        Blocked::new(command, args, 0, None)
    }

    fn signalled(waiters: &Waiters, key: &str) -> Vec<usize> {
        let mut woken = Vec::new();
        waiters.signal(0, [key.as_bytes()].into_iter(), |at, _| woken.push(at));
        woken
    }

    #[test]
    fn a_signal_reaches_each_waiting_loop_once_until_unregistered() {
        let waiters = Waiters::default();
        assert!(signalled(&waiters, "a").is_empty());
        let (first, second, third) = (blpop(&["a", "b", "a"]), blpop(&["a"]), blpop(&["b"]));
        waiters.register(1, &first);
        waiters.register(1, &second);
        waiters.register(0, &third);
        assert_eq!(waiters.blocked(), 3);
        assert_eq!(signalled(&waiters, "a"), vec![1]);
        assert_eq!(signalled(&waiters, "b"), vec![0, 1]);
        assert!(signalled(&waiters, "c").is_empty());
        waiters.unregister(1, &first);
        assert_eq!(signalled(&waiters, "b"), vec![0]);
        assert_eq!(signalled(&waiters, "a"), vec![1]);
        waiters.unregister(1, &second);
        waiters.unregister(0, &third);
        assert_eq!(waiters.blocked(), 0);
        assert!(waiters.keys.lock().is_empty());
    }

    #[test]
    fn a_client_waits_on_its_sources_only() {
        let blpop = blpop(&["x", "y"]);
        assert_eq!(blpop.keys, vec![b"x".to_vec(), b"y".to_vec()]);
        assert!(blpop.waits_on(&(0, b"y".to_vec())));
        assert!(!blpop.waits_on(&(1, b"y".to_vec())));
        assert!(
            !blpop.waits_on(&(0, b"0".to_vec())),
            "the timeout is no key"
        );
        let args: Vec<Vec<u8>> = ["blmove", "src", "dst", "left", "right", "1"]
            .iter()
            .map(|a| a.as_bytes().to_vec())
            .collect();
        let blmove = Blocked::new(lookup(b"blmove").expect("a command"), args, 0, None);
        assert_eq!(blmove.keys, vec![b"src".to_vec()]);
    }
}
