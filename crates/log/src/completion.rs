//! Advancing the filled watermark without convoys.
//!
//! Appenders finish copying their records out of order. The first idea — each one waits until
//! its predecessor has published, then publishes — turns into a convoy as soon as there are more
//! threads than cores: every publish then needs a wake-up of the next thread, one after another.
//! Instead a finished appender that is not next in line *parks its completion* here and leaves;
//! whoever advances `filled` up to a parked completion takes it and advances over it too, so one
//! thread that regains its core publishes every record finished behind it in one pass.
//!
//! Both structures use the same lost-wake-up argument (Dekker): the party that waits first makes
//! itself visible (SeqCst increment), then re-reads the watermark (SeqCst); the party that moves
//! the watermark stores it (SeqCst), then reads the count (SeqCst). Sequential consistency
//! guarantees at least one of them sees the other.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

const SLOTS: usize = 64;

fn slot_of(lsn: u64) -> usize {
    ((lsn / crate::record::RECORD_ALIGN) % SLOTS as u64) as usize
}

/// Finished reservations `[start, end)` that could not be published yet, keyed by `start`.
pub(crate) struct Completions {
    count: AtomicUsize,
    slots: Vec<Mutex<Vec<(u64, u64)>>>,
}

impl Completions {
    pub fn new() -> Self {
        Self {
            count: AtomicUsize::new(0),
            slots: (0..SLOTS).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// Publishes `[start, end)`: advances `filled` over it and over every parked completion that
    /// follows, or parks it for the appender that will reach `start`. Returns the range `filled`
    /// moved over by this call (empty when the completion was parked).
    pub fn publish(&self, filled: &AtomicU64, start: u64, end: u64) -> (u64, u64) {
        if filled.compare_exchange(start, end, SeqCst, SeqCst).is_ok() {
            return (start, self.advance_from(filled, end));
        }
        self.count.fetch_add(1, SeqCst);
        self.slots[slot_of(start)].lock().push((start, end));
        // The predecessor may have reached `start` and looked for us before we were parked: if
        // so, whichever of us takes the parked entry advances.
        if filled.load(SeqCst) == start {
            if let Some(end) = self.take(start) {
                filled.store(end, SeqCst);
                return (start, self.advance_from(filled, end));
            }
        }
        (start, start)
    }

    /// `filled` equals `at` and the caller is the only one entitled to move it.
    fn advance_from(&self, filled: &AtomicU64, mut at: u64) -> u64 {
        while self.count.load(SeqCst) > 0 {
            match self.take(at) {
                Some(end) => {
                    filled.store(end, SeqCst);
                    at = end;
                }
                None => break,
            }
        }
        at
    }

    fn take(&self, start: u64) -> Option<u64> {
        let mut slot = self.slots[slot_of(start)].lock();
        let index = slot.iter().position(|(s, _)| *s == start)?;
        let (_, end) = slot.swap_remove(index);
        self.count.fetch_sub(1, SeqCst);
        Some(end)
    }
}

/// Threads parked until a watermark reaches an LSN.
pub(crate) struct LsnWaiters {
    count: AtomicUsize,
    parked: Mutex<Vec<(u64, Thread)>>,
    /// Checks before parking ([`FILL_SPINS`] or none).
    spins: u32,
}

/// Spins before parking for a watermark that normally moves within a microsecond when the
/// thread that moves it is running (`filled`).
pub(crate) const FILL_SPINS: u32 = 200;

impl LsnWaiters {
    /// Waiters that check `spins` times before they park: none for a watermark that moves
    /// once per device round trip (`hardened` in group commit), where spinning would only
    /// take the processor from the committers a leader is gathering.
    pub fn new(spins: u32) -> Self {
        Self {
            count: AtomicUsize::new(0),
            parked: Mutex::new(Vec::new()),
            spins,
        }
    }

    /// Returns once `watermark >= lsn` or `give_up()` is true.
    pub fn wait(&self, watermark: &AtomicU64, lsn: u64, give_up: impl Fn() -> bool) {
        // The timeout only bounds the cost of a missed `give_up` notification.
        self.wait_parked(watermark, lsn, || {
            (!give_up()).then_some(Duration::from_millis(1))
        });
    }

    /// Returns once `watermark >= lsn` or `deadline` has passed. A parked thread's timer
    /// may fire up to the kernel's timer slack (50 µs by default) late, but a thread that
    /// moves the watermark past `lsn` and calls [`LsnWaiters::wake`] wakes it at once; a
    /// thread that yields instead can lose its core for a whole time slice (milliseconds)
    /// to a busy one (decision 250).
    pub fn wait_until(&self, watermark: &AtomicU64, lsn: u64, deadline: Instant) {
        self.wait_parked(watermark, lsn, || {
            deadline
                .checked_duration_since(Instant::now())
                .filter(|left| !left.is_zero())
        });
    }

    /// Waits until `watermark >= lsn` or `park_for()` says to stop waiting (`None`); each
    /// park lasts at most what `park_for` returned.
    fn wait_parked(
        &self,
        watermark: &AtomicU64,
        lsn: u64,
        park_for: impl Fn() -> Option<Duration>,
    ) {
        for _ in 0..self.spins {
            if watermark.load(SeqCst) >= lsn || park_for().is_none() {
                return;
            }
            std::hint::spin_loop();
        }
        let me = thread::current();
        self.parked.lock().push((lsn, me.clone()));
        self.count.fetch_add(1, SeqCst);
        while watermark.load(SeqCst) < lsn {
            // An unpark that raced ahead of this park makes it return at once.
            let Some(park) = park_for() else { break };
            thread::park_timeout(park);
        }
        self.count.fetch_sub(1, SeqCst);
        self.parked
            .lock()
            .retain(|(waiting_for, waiter)| *waiting_for != lsn || waiter.id() != me.id());
    }

    /// Wakes every thread waiting for an LSN at or below `reached`, and, first, the one
    /// waiting for the lowest LSN above it: the one whose `give_up` sends it to move the
    /// watermark on (the next group-commit leader), while the others keep sleeping.
    pub fn wake_reached_and_next(&self, reached: u64) {
        if self.count.load(SeqCst) == 0 {
            return;
        }
        let parked = self.parked.lock();
        for index in reached_and_next(&parked, reached) {
            parked[index].1.unpark();
        }
    }

    /// Wakes every thread waiting for an LSN at or below `reached` (all of them if `None`).
    pub fn wake(&self, reached: Option<u64>) {
        if self.count.load(SeqCst) == 0 {
            return;
        }
        for (lsn, waiter) in self.parked.lock().iter() {
            if reached.is_none_or(|r| *lsn <= r) {
                waiter.unpark();
            }
        }
    }
}

/// Which of `parked` [`LsnWaiters::wake_reached_and_next`] wakes, in order: the waiter for
/// the lowest LSN above `reached`, then every waiter at or below it.
fn reached_and_next<T>(parked: &[(u64, T)], reached: u64) -> Vec<usize> {
    let next = (0..parked.len())
        .filter(|&i| parked[i].0 > reached)
        .min_by_key(|&i| parked[i].0);
    next.into_iter()
        .chain((0..parked.len()).filter(|&i| parked[i].0 <= reached))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A round's end wakes its next leader first, then the waiters it covered; the rest of
    /// the uncovered keep sleeping.
    #[test]
    fn a_round_wakes_the_covered_and_the_next_leader_only() {
        let parked = [(40, 'a'), (10, 'b'), (30, 'c'), (20, 'd'), (20, 'e')];
        assert_eq!(reached_and_next(&parked, 20), vec![2, 1, 3, 4]);
        assert_eq!(reached_and_next(&parked, 5), vec![1]);
        assert_eq!(reached_and_next(&parked, 40), vec![0, 1, 2, 3, 4]);
        assert!(reached_and_next::<char>(&[], 20).is_empty());
    }

    #[test]
    fn out_of_order_completions_publish_in_one_pass() {
        let c = Completions::new();
        let filled = AtomicU64::new(0);
        assert_eq!(c.publish(&filled, 16, 32), (16, 16));
        assert_eq!(c.publish(&filled, 32, 40), (32, 32));
        assert_eq!(filled.load(SeqCst), 0);
        assert_eq!(c.publish(&filled, 0, 16), (0, 40));
        assert_eq!(filled.load(SeqCst), 40);
        assert_eq!(c.count.load(SeqCst), 0);
    }

    /// Many threads publishing disjoint consecutive ranges in random order always end with
    /// `filled` at the end of the last one (no completion lost in a race).
    #[test]
    fn concurrent_publishers_never_lose_a_completion() {
        for round in 0..50u64 {
            let c = Arc::new(Completions::new());
            let filled = Arc::new(AtomicU64::new(0));
            let next = Arc::new(AtomicU64::new(0));
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let (c, filled, next) = (c.clone(), filled.clone(), next.clone());
                    thread::spawn(move || {
                        for i in 0..2000u64 {
                            let size = 8 * (1 + (i * 7 + t + round) % 5);
                            let start = next.fetch_add(size, SeqCst);
                            c.publish(&filled, start, start + size);
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().expect("publisher");
            }
            assert_eq!(filled.load(SeqCst), next.load(SeqCst), "round {round}");
        }
    }

    #[test]
    fn waiters_wake_when_the_watermark_passes() {
        let w = Arc::new(LsnWaiters::new(FILL_SPINS));
        let mark = Arc::new(AtomicU64::new(0));
        let waiter = {
            let (w, mark) = (w.clone(), mark.clone());
            thread::spawn(move || w.wait(&mark, 100, || false))
        };
        thread::sleep(Duration::from_millis(5));
        mark.store(100, SeqCst);
        w.wake(Some(100));
        waiter.join().expect("waiter returns");
    }
}
