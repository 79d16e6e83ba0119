//! Bugs that tests plant in one log, to see that the checks built to catch them do: each
//! breaks a rule the log's durability rests on, and the test that guards the rule must fail
//! while it is there.
//!
//! A plant is named in [`crate::LogConfig::plants`] and takes effect only in builds with
//! debug assertions (the README's test command builds so); in a release build the branches
//! that read it compile to nothing. Per log, not per process, because tests run side by side
//! in one process. Until decision 236 these were cargo features, and CI compiled the log and
//! the engine again for each.

/// A planted bug (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plant {
    /// No fence after an appended record is flushed to the PMEM ring: a commit is
    /// acknowledged before its record is persistent (`tests/power_cut.rs` must catch it).
    MissingFence,
    /// The log's open trusts what a crashed process left: no sync of the log file, no flush
    /// of the ring's records as recovery reads them, no persist of the start word (the
    /// engine's `tests/recovery.rs` must catch it).
    RecoveryTrustsTheCrash,
}

/// Whether `plant` is among `plants` and takes effect in this build.
pub(crate) fn planted(plants: &[Plant], plant: Plant) -> bool {
    cfg!(debug_assertions) && plants.contains(&plant)
}
