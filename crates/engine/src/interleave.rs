//! Named points inside a commit where a unit test can stop one transaction while others run,
//! or make every commit pause at random (`tailstore_history::pauses`).
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
    /// Step 3 has applied every write (the touched pages are marked unlogged, the trees'
    /// latches held) and not yet appended the record.
    AppliedNotLogged,
    /// A commit too long for one record has appended a part and has more to append
    /// (`wal.rs`, "Commits in parts").
    BetweenCommitParts,
    /// The record has its place in the log and the pages are stamped with its end; the
    /// trees' latches are still held.
    LoggedStillLatched,
    /// The trees' latches are released; the record, placed, is not yet written.
    PlacedNotWritten,
    /// Step 4 has released the key locks; the commit has yet to wait for durability.
    Unlocked,
    /// Not in a commit: a scan of a secondary index has read the index's entries and not
    /// yet the rows they name (`Transaction::scan_index`).
    IndexScanned,
    /// Not in a commit: a checkpoint has written its pages and made the log durable up to
    /// where redo will start; it has not read the catalog for its meta page yet
    /// (`Shared::checkpoint_if`).
    CheckpointFlushed,
}

impl Point {
    #[cfg(test)]
    fn name(self) -> &'static str {
        match self {
            Point::Validated => "engine: validated",
            Point::BetweenTheChecksOfAPointRead => "engine: between the checks of a point read",
            Point::BetweenTheChecksOfAScan => "engine: between the checks of a scan",
            Point::AppliedNotLogged => "engine: applied, not logged",
            Point::BetweenCommitParts => "engine: between commit parts",
            Point::LoggedStillLatched => "engine: logged, still latched",
            Point::PlacedNotWritten => "engine: placed, not written",
            Point::Unlocked => "engine: unlocked",
            Point::IndexScanned => "engine: index scanned, rows not read",
            Point::CheckpointFlushed => "engine: checkpoint flushed, catalog not read",
        }
    }
}

#[cfg(not(test))]
#[inline(always)]
pub(crate) fn reached(_point: Point) {}

#[cfg(test)]
pub(crate) fn reached(point: Point) {
    tailstore_history::pauses::reached(point.name());
}

/// Runs `hook` (once) when this thread's next commit reaches `point`.
#[cfg(test)]
pub(crate) fn at(point: Point, hook: impl FnMut() + 'static) {
    tailstore_history::pauses::at(point.name(), hook);
}

#[cfg(test)]
pub(crate) use tailstore_history::pauses::chaos;
