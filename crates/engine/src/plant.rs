//! Bugs the engine's unit tests plant in one database, to see that the checks built to
//! catch them do: each was once a real mistake or an order that looked right, and the
//! test that guards against it must fail while it is there.
//!
//! A plant is a field of the database's configuration that exists only when the crate is
//! compiled for its own unit tests (`cfg(test)`): other builds, the tests of other crates
//! included, have neither the field nor the branches that read it. Per database, not per
//! process, because the unit tests run side by side in one process. Until decision 233
//! they were cargo features, and CI compiled the engine again for each.

/// A planted bug (see the module documentation).
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plant {
    /// A scan is validated in the old, wrong order: run again (a count's leaves checked)
    /// before its range's locks are checked (`txn/interleavings.rs` must catch it).
    RescanBeforeLockCheck,
    /// A read-only commit does not wait for the log to be durable up to what it read
    /// (`txn/histories.rs`, the cut histories, must catch it).
    ReadOnlyWithoutWait,
    /// A point read that found no row is never validated again (`txn/histories.rs`, the
    /// random histories, must catch it).
    AbsentReadsUnchecked,
}
