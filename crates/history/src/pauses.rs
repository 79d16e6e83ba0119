//! Named points in a crate's code where its unit tests can stop a thread, or make it pause at
//! random, to reach the narrow windows between two steps of a concurrent operation.
//!
//! A crate under test keeps a tiny `interleave` module: an enum of its points and a
//! `reached(point)` that is an empty inline function outside `cfg(test)` (release builds carry
//! no trace) and calls [`reached`] here under `cfg(test)`, where this crate is a
//! dev-dependency. Hooks and random pauses are per thread.

use std::cell::{Cell, RefCell};

type Hook = Box<dyn FnMut()>;

thread_local! {
    /// This thread's hooks: each runs once, the first time its point is reached.
    static HOOKS: RefCell<Vec<(&'static str, Hook)>> = const { RefCell::new(Vec::new()) };
    /// This thread's random pauses: 0 for none, else the generator's state.
    static CHAOS: Cell<u64> = const { Cell::new(0) };
    /// The points where this thread pauses at random.
    static CHAOS_AT: Cell<fn(&'static str) -> bool> = const { Cell::new(everywhere) };
}

/// A filter for [`chaos_where`] that pauses at every point (what [`chaos`] does).
pub fn everywhere(_point: &'static str) -> bool {
    true
}

/// Runs `hook` (once) when this thread next reaches `point`.
pub fn at(point: &'static str, hook: impl FnMut() + 'static) {
    HOOKS.with(|hooks| hooks.borrow_mut().push((point, Box::new(hook))));
}

/// Makes this thread, from now on, pause at random at every point: yield the processor at
/// half of them, sleep up to 200 µs at one in eight, so that random schedules reach the
/// windows between steps. `seed` picks the pauses.
pub fn chaos(seed: u64) {
    chaos_where(seed, everywhere);
}

/// [`chaos`] at the points `at` accepts only (some points are reached so often that pausing
/// there would slow a test that looks for other windows).
pub fn chaos_where(seed: u64, at: fn(&'static str) -> bool) {
    CHAOS.with(|state| state.set(seed | 1));
    CHAOS_AT.with(|filter| filter.set(at));
}

/// This thread is at `point`: runs the hook waiting there, then pauses if chaos is on.
pub fn reached(point: &'static str) {
    let hook = HOOKS.with(|hooks| {
        let mut hooks = hooks.borrow_mut();
        let at = hooks.iter().position(|(p, _)| *p == point)?;
        Some(hooks.remove(at).1)
    });
    // Run outside the borrow: a hook may block, or register another hook.
    if let Some(mut hook) = hook {
        hook();
    }
    if CHAOS_AT.with(|filter| filter.get()(point)) {
        pause_at_random();
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_hook_runs_once_at_its_point_and_only_there() {
        let runs = Rc::new(Cell::new(0));
        let counted = runs.clone();
        at("here", move || counted.set(counted.get() + 1));
        reached("elsewhere");
        assert_eq!(runs.get(), 0);
        reached("here");
        reached("here");
        assert_eq!(runs.get(), 1);
    }
}
