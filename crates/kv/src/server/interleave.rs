//! Named points in the event loops where a test build pauses at random, so that the
//! server's own tests meet the schedules a loaded machine makes rare: a message queued
//! between a poll and a read, a write applied between a read's registration and its read.
//!
//! In a build with debug assertions (the test and dev profiles) whose process has
//! [`CHAOS_PAUSES_VAR`] set (CI runs the tests of cross-loop messages, wake-ups and fresh
//! reads so), every event loop pauses at random at each point it passes — it yields the
//! processor at half of them and sleeps up to 200 µs at one in eight
//! (`tailstore_history::pauses`). A switch read when a loop starts rather than a cargo
//! feature, so that those tests run under it without compiling the server again (decision
//! 229). Without debug assertions [`reached`] is an empty inline function: release builds
//! carry no trace of the points.

/// The environment variable that turns the random pauses on (any value).
pub const CHAOS_PAUSES_VAR: &str = "TAILSTORE_CHAOS_PAUSES";

/// A place in an event loop's pass, or in a command's run on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// The poll returned; its events are not yet taken.
    Polled,
    /// The pass is about to read its connections.
    BeforeReads,
    /// The pass has read its connections and not yet taken its messages.
    AfterReads,
    /// A connection's commands of this pass have run.
    Served,
    /// The pass is about to wait for durability.
    BeforeTheWait,
    /// A message has been handed to another loop (or this one).
    Delivered,
    /// A command's keys are remembered for tracking; it has not read them yet.
    Remembered,
    /// A data command's transaction is committed; its keys are not yet signalled.
    Committed,
}

impl Point {
    #[cfg(debug_assertions)]
    fn name(self) -> &'static str {
        match self {
            Point::Polled => "kv: polled",
            Point::BeforeReads => "kv: before the reads",
            Point::AfterReads => "kv: after the reads",
            Point::Served => "kv: served",
            Point::BeforeTheWait => "kv: before the durability wait",
            Point::Delivered => "kv: delivered",
            Point::Remembered => "kv: remembered",
            Point::Committed => "kv: committed",
        }
    }
}

/// Makes this thread (an event loop, its `index`) pause at random from now on, if
/// [`CHAOS_PAUSES_VAR`] is set.
#[cfg(debug_assertions)]
pub fn start_pausing(index: usize) {
    if std::env::var_os(CHAOS_PAUSES_VAR).is_none() {
        return;
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64);
    tailstore_history::pauses::chaos(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn start_pausing(_index: usize) {}

#[cfg(debug_assertions)]
pub fn reached(point: Point) {
    tailstore_history::pauses::reached(point.name());
}

#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn reached(_point: Point) {}
