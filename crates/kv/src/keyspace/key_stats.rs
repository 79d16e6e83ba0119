//! What INFO counts of keys: read lookups as Redis counts them (`keyspace_hits`,
//! `keyspace_misses`), keys removed because they expired (`expired_keys`), and keys the
//! lazy free finished freeing (`lazyfreed_objects`: a deleted key whose elements it
//! removed, a key of a flushed database).
//!
//! A read lookup (Redis's `lookupKeyRead`) that finds a live key is a hit, one that finds
//! none (or an expired one) a miss; a write command's lookup of the key it changes (Redis's
//! `lookupKeyWrite`) counts neither. Which lookups are reads is `command::Ctx`'s to say.
//!
//! A command counts as it runs; its counts are added here once its transaction's last
//! attempt is over, so that a retried attempt counts once: all of them if it committed,
//! only its lookups if it was answered with an error (Redis counts a lookup whose command
//! then fails on the key's type; a removal that was undone removed nothing).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// One attempt's counts, or the totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyStats {
    pub hits: u64,
    pub misses: u64,
    pub expired: u64,
    pub lazyfreed: u64,
}

impl KeyStats {
    /// Counts one read lookup that `found` a live key or not.
    pub fn count_lookup(&mut self, found: bool) {
        if found {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
    }

    /// These counts but the removals: an attempt that did not commit removed nothing.
    pub fn lookups_only(self) -> KeyStats {
        KeyStats {
            expired: 0,
            lazyfreed: 0,
            ..self
        }
    }
}

/// Shards of the totals: each thread adds to its own (the event loops, one each up to
/// this many), so that counting every read command does not move one cache line between
/// the loops' cores at each GET.
const SHARDS: usize = 16;

/// The server's totals since it started or since CONFIG RESETSTAT.
#[derive(Default)]
pub struct KeyStatTotals {
    shards: [CachePadded<Shard>; SHARDS],
}

#[derive(Default)]
struct Shard {
    hits: AtomicU64,
    misses: AtomicU64,
    expired: AtomicU64,
    lazyfreed: AtomicU64,
}

impl Shard {
    fn counters(&self) -> [&AtomicU64; 4] {
        [&self.hits, &self.misses, &self.expired, &self.lazyfreed]
    }
}

impl KeyStatTotals {
    pub fn add(&self, stats: KeyStats) {
        if stats == KeyStats::default() {
            return;
        }
        let shard = &self.shards[thread_shard()];
        let counts = [stats.hits, stats.misses, stats.expired, stats.lazyfreed];
        for (counter, n) in shard.counters().into_iter().zip(counts) {
            if n > 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    pub fn get(&self) -> KeyStats {
        let sum = |pick: fn(&Shard) -> &AtomicU64| {
            self.shards
                .iter()
                .map(|shard| pick(shard).load(Ordering::Relaxed))
                .sum()
        };
        KeyStats {
            hits: sum(|shard| &shard.hits),
            misses: sum(|shard| &shard.misses),
            expired: sum(|shard| &shard.expired),
            lazyfreed: sum(|shard| &shard.lazyfreed),
        }
    }

    pub fn reset(&self) {
        for counter in self.shards.iter().flat_map(|shard| shard.counters()) {
            counter.store(0, Ordering::Relaxed);
        }
    }
}

/// The calling thread's shard: threads take them in turn as they first count.
fn thread_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: Cell<Option<usize>> = const { Cell::new(None) };
    }
    SHARD.with(|shard| match shard.get() {
        Some(taken) => taken,
        None => {
            let taken = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
            shard.set(Some(taken));
            taken
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_attempts_and_reset() {
        let totals = KeyStatTotals::default();
        let mut attempt = KeyStats::default();
        attempt.count_lookup(true);
        attempt.count_lookup(false);
        attempt.count_lookup(false);
        attempt.expired = 1;
        attempt.lazyfreed = 3;
        totals.add(attempt);
        totals.add(attempt.lookups_only());
        let expected = KeyStats {
            hits: 2,
            misses: 4,
            expired: 1,
            lazyfreed: 3,
        };
        assert_eq!(totals.get(), expected);
        totals.reset();
        assert_eq!(totals.get(), KeyStats::default());
    }

    #[test]
    fn threads_add_to_shards_that_sum_up() {
        let totals = KeyStatTotals::default();
        let one_hit = KeyStats {
            hits: 1,
            ..KeyStats::default()
        };
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| (0..1000).for_each(|_| totals.add(one_hit)));
            }
        });
        assert_eq!(totals.get().hits, 4000);
    }
}
