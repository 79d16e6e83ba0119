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
pub(crate) use hooks::{at, reached};

#[cfg(test)]
mod hooks {
    use std::cell::RefCell;

    use super::Point;

    type Hook = Box<dyn FnMut()>;

    thread_local! {
        /// This thread's hooks: each runs once, the first time its point is reached.
        static HOOKS: RefCell<Vec<(Point, Hook)>> = const { RefCell::new(Vec::new()) };
    }

    /// Runs `hook` (once) when this thread's next commit reaches `point`.
    pub(crate) fn at(point: Point, hook: impl FnMut() + 'static) {
        HOOKS.with(|hooks| hooks.borrow_mut().push((point, Box::new(hook))));
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
    }
}
