//! When a write may leave its key's `kv_keys` row as it is.
//!
//! WATCH remembers a key's version ([`super::KeyMeta::version`]) and EXEC compares it, so a
//! write that WATCH must see has to give the row a new version. A string overwritten by a
//! value of the same length and deadline changes nothing else in the row, and rewriting it
//! costs a fifth of such a SET (one more B+tree change and log entry besides the three
//! parts of a 4 KiB value). So while no connection watches any key, such a write leaves the
//! row, version included, untouched; while one does, every write gives a new version as
//! before. Everything else still holds without the row's rewrite: the engine validates the
//! row the write read, and two writes of one string write the same part rows, so they
//! conflict in the engine as before.
//!
//! # The race this closes
//!
//! A write that found no watch and a WATCH that begins meanwhile: if the write were applied
//! after the WATCH read the version, EXEC would find the version unchanged and run, though
//! the key changed after WATCH (and the watching client may even have read the old value in
//! between). So the check and the write's application are one critical section against the
//! start of a watch: the write checks under a shared hold of the gate and keeps it until its
//! transaction's changes are applied (not until they are durable); a watch counts itself
//! under the exclusive hold, which waits for every such write, and reads the version after.
//! A write that checks later sees the count and takes the full path. A writer that cannot
//! take the shared hold at once (a watch is starting) takes the full path too, so neither
//! side ever waits on a hold the other cannot release.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard};

/// The count of live watches and the gate between them and writes that skip the row.
pub struct WatchGate {
    live: AtomicUsize,
    gate: RwLock<()>,
    /// Deletions of keys, counted per bucket of their hash: a watched key that was absent
    /// has no version to compare, and one created and deleted again after WATCH is absent
    /// again at EXEC; its bucket's count tells that it was deleted meanwhile (a deletion of
    /// another key of the bucket makes EXEC fail too: an abort the client retries, never
    /// a write that goes through).
    deletions: Box<[AtomicU64]>,
}

/// Buckets of [`WatchGate`]'s deletion counts.
const DELETION_BUCKETS: usize = 4096;

impl Default for WatchGate {
    fn default() -> Self {
        WatchGate {
            live: AtomicUsize::new(0),
            gate: RwLock::new(()),
            deletions: (0..DELETION_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// One watched key; the watch ends when it is dropped (UNWATCH, EXEC, DISCARD, a closed
/// connection).
pub struct WatchToken {
    gate: Arc<WatchGate>,
}

impl Drop for WatchToken {
    fn drop(&mut self) {
        let before = self.gate.live.fetch_sub(1, Ordering::AcqRel);
        assert!(before > 0, "a watch ended that never began");
    }
}

impl WatchGate {
    /// Starts a watch, once every write that found none has been applied. The caller reads
    /// the key's version after this returns.
    pub fn begin(self: &Arc<Self>) -> WatchToken {
        let _writes_applied = self.gate.write();
        self.live.fetch_add(1, Ordering::AcqRel);
        WatchToken { gate: self.clone() }
    }

    /// A hold under which no watch can begin, if none is live now and none is starting:
    /// the write that holds it until its changes are applied may leave the key's row alone.
    pub fn unwatched(&self) -> Option<RwLockReadGuard<'_, ()>> {
        let hold = self.gate.try_read()?;
        (self.live.load(Ordering::Acquire) == 0).then_some(hold)
    }

    /// How many watches are live (INFO, tests).
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// Counts a deletion of `key` of the stored database `stored_db`, before the
    /// transaction that deletes it is applied.
    pub fn note_deletion(&self, stored_db: u32, key: &[u8]) {
        self.deletions[bucket(stored_db, key)].fetch_add(1, Ordering::AcqRel);
    }

    /// The deletions counted in the bucket of `key` of the stored database `stored_db`:
    /// WATCH reads it after the key's row.
    pub fn deletions(&self, stored_db: u32, key: &[u8]) -> u64 {
        self.deletions[bucket(stored_db, key)].load(Ordering::Acquire)
    }
}

/// The bucket of a key of a stored database: the database counts, or the lazy free of a
/// flushed database's keys (stored apart from the live one's) would count as deletions
/// of the live database's keys of the same names.
fn bucket(stored_db: u32, key: &[u8]) -> usize {
    let hash = crc32c::crc32c(key) ^ stored_db.wrapping_mul(0x9e37_79b9);
    hash as usize % DELETION_BUCKETS
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_live_watch_closes_the_gate_until_it_ends() {
        let gate = Arc::new(WatchGate::default());
        assert!(gate.unwatched().is_some());
        let first = gate.begin();
        let second = gate.begin();
        assert!(gate.unwatched().is_none());
        drop(first);
        assert!(gate.unwatched().is_none(), "one watch is still live");
        drop(second);
        assert!(gate.unwatched().is_some());
        assert_eq!(gate.live(), 0);
    }

    #[test]
    fn a_watch_begins_only_after_the_writes_that_found_none() {
        let gate = Arc::new(WatchGate::default());
        let hold = gate.unwatched().expect("no watch yet");
        let (began, watch_began) = mpsc::channel();
        let watcher = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                let token = gate.begin();
                began.send(()).expect("the test waits");
                token
            })
        };
        assert!(
            watch_began
                .recv_timeout(Duration::from_millis(200))
                .is_err(),
            "the watch began while a write that found none was being applied"
        );
        drop(hold);
        watch_began
            .recv_timeout(Duration::from_secs(10))
            .expect("the watch begins once the write is applied");
        let token = watcher.join().expect("the watcher does not panic");
        assert!(gate.unwatched().is_none());
        drop(token);
    }
}
