//! Bugs that tests plant in one buffer pool, to see that the checks built to catch them do:
//! each breaks a rule recovery rests on, and the test that guards the rule must fail while it
//! is there.
//!
//! A plant is given to [`crate::BufferPool::with_plants`] and takes effect only in builds with
//! debug assertions (the README's test command builds so); in a release build the branches
//! that read it compile to nothing. Per pool, not per process, because tests run side by side
//! in one process. Until decision 236 this was a cargo feature, and CI compiled the storage
//! crate and the engine again for it.

/// A planted bug (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plant {
    /// A page is written to the data file without waiting for the log to be durable up to its
    /// LSN: the write-ahead rule broken (the engine's `tests/recovery.rs` must catch it).
    PageBeforeItsLog,
}
