//! Key lookups as Redis counts them (INFO's `keyspace_hits` and `keyspace_misses`): a read
//! lookup (Redis's `lookupKeyRead`) that finds a live key is a hit, one that finds none (or
//! an expired one) a miss; a write command's lookup of the key it changes (Redis's
//! `lookupKeyWrite`) counts neither. Which lookups are reads is `command::Ctx`'s to say.
//!
//! A command counts its lookups as it runs; they are added here once its transaction's last
//! attempt is over (committed, or answered with an error, as Redis counts a lookup whose
//! command then fails on the key's type), so that a retried attempt counts once.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// One attempt's read lookups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lookups {
    pub hits: u64,
    pub misses: u64,
}

impl Lookups {
    /// Counts one read lookup that `found` a live key or not.
    pub fn count(&mut self, found: bool) {
        if found {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
    }
}

/// Shards of the totals: each thread adds to its own (the event loops, one each up to
/// this many), so that counting every read command does not move one cache line between
/// the loops' cores at each GET.
const SHARDS: usize = 16;

/// The server's totals since it started or since CONFIG RESETSTAT.
#[derive(Default)]
pub struct LookupTotals {
    shards: [CachePadded<Shard>; SHARDS],
}

#[derive(Default)]
struct Shard {
    hits: AtomicU64,
    misses: AtomicU64,
}

impl LookupTotals {
    pub fn add(&self, lookups: Lookups) {
        if lookups == Lookups::default() {
            return;
        }
        let shard = &self.shards[thread_shard()];
        shard.hits.fetch_add(lookups.hits, Ordering::Relaxed);
        shard.misses.fetch_add(lookups.misses, Ordering::Relaxed);
    }

    pub fn get(&self) -> Lookups {
        self.shards
            .iter()
            .fold(Lookups::default(), |sum, shard| Lookups {
                hits: sum.hits + shard.hits.load(Ordering::Relaxed),
                misses: sum.misses + shard.misses.load(Ordering::Relaxed),
            })
    }

    pub fn reset(&self) {
        for shard in &self.shards {
            shard.hits.store(0, Ordering::Relaxed);
            shard.misses.store(0, Ordering::Relaxed);
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
        let totals = LookupTotals::default();
        let mut attempt = Lookups::default();
        attempt.count(true);
        attempt.count(false);
        attempt.count(false);
        totals.add(attempt);
        totals.add(attempt);
        assert_eq!(totals.get(), Lookups { hits: 2, misses: 4 });
        totals.reset();
        assert_eq!(totals.get(), Lookups::default());
    }
}
