//! Named points inside a commit where a unit test can stop one transaction while others run.
//!
//! The anomaly tests (`tests/anomalies.rs`) interleave transactions at operation granularity:
//! a commit runs from its first step to its last before the next one starts. Some orders of
//! two commits' *steps* matter too — a validation that checks a read's locks and its version
//! in the wrong order lets a writer slip between the two — and those need a commit stopped
//! halfway. Outside tests, [`reached`] is an empty inline function: release builds carry no
//! trace of the hooks.

/// A place inside [`crate::Transaction::commit_pending`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Point {
    /// Step 2 (validation) passed; step 3 (apply and log) comes next.
    Validated,
    /// A point read is being validated and has passed the first of its two checks (no other
    /// transaction's lock on what it read; it still reads the same).
    BetweenTheChecksOfAPointRead,
    /// The same for a scan (no other transaction's lock in its range; run again, it returns
    /// the same rows).
    BetweenTheChecksOfAScan,
}

#[cfg(not(test))]
#[inline(always)]
pub(crate) fn reached(_point: Point) {}

#[cfg(test)]
pub(crate) use hooks::{at, chaos, reached};

#[cfg(test)]
mod hooks {
    use std::cell::{Cell, RefCell};

    use super::Point;

    type Hook = Box<dyn FnMut()>;

    thread_local! {
        /// This thread's hooks: each runs once, the first time its point is reached.
        static HOOKS: RefCell<Vec<(Point, Hook)>> = const { RefCell::new(Vec::new()) };
        /// This thread's random pauses: 0 for none, else the generator's state.
        static CHAOS: Cell<u64> = const { Cell::new(0) };
    }

    /// Runs `hook` (once) when this thread's next commit reaches `point`.
    pub(crate) fn at(point: Point, hook: impl FnMut() + 'static) {
        HOOKS.with(|hooks| hooks.borrow_mut().push((point, Box::new(hook))));
    }

    /// Makes this thread, from now on, pause at random at every point: yield the processor
    /// at half of them, sleep up to 200 µs at one in eight, so that random schedules reach
    /// the narrow windows between a commit's steps. `seed` picks the pauses.
    pub(crate) fn chaos(seed: u64) {
        CHAOS.with(|state| state.set(seed | 1));
    }

    pub(crate) fn reached(point: Point) {
        let hook = HOOKS.with(|hooks| {
            let mut hooks = hooks.borrow_mut();
            let at = hooks.iter().position(|(p, _)| *p == point)?;
            Some(hooks.remove(at).1)
        });
        // Run outside the borrow: a hook may block, or register another hook.
        if let Some(mut hook) = hook {
            hook();
        }
        pause_at_random();
    }

    fn pause_at_random() {
        let Some(draw) = CHAOS.with(|state| {
            let mut x = state.get();
            if x == 0 {
                return None;
            }
            // xorshift64: any cheap generator will do, the seed makes it repeatable per thread.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            state.set(x);
            Some(x)
        }) else {
            return;
        };
        match draw % 8 {
            0..=3 => std::thread::yield_now(),
            4 => std::thread::sleep(std::time::Duration::from_micros((draw >> 8) % 200)),
            _ => {}
        }
    }
}
