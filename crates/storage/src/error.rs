//! The storage engine's error type.

use tailstore_media::MediaError;

use crate::page::{Lsn, PageId};

/// The error a write-ahead hook returns (the log manager's own error, boxed, so that this
/// crate does not depend on the log crate).
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong below the row layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The data file could not be read or written.
    #[error(transparent)]
    Media(#[from] MediaError),
    /// A page read from the data file failed verification; its bytes are never handed out.
    #[error("page {page_id} is corrupt: {reason}")]
    Corrupt { page_id: PageId, reason: String },
    /// Every frame of the buffer pool is pinned, so no page can be brought in.
    #[error("buffer pool exhausted: all {capacity} frames are pinned")]
    PoolExhausted { capacity: usize },
    /// The write-ahead hook refused (the log could not be made durable up to `lsn`), so the
    /// dirty page was not written.
    #[error("write-ahead hook failed for page {page_id} (page LSN {lsn}): {source}")]
    WriteAhead {
        page_id: PageId,
        lsn: Lsn,
        #[source]
        source: HookError,
    },
    /// A key plus its value exceeds what one B+tree page is guaranteed to hold.
    #[error("entry of {size} bytes (key + value) exceeds the maximum of {max}")]
    EntryTooLarge { size: usize, max: usize },
    /// A B+tree insert failed halfway through a structure modification (a split whose new
    /// page could not be linked into its parent); the tree refuses all use until recovery.
    #[error(
        "B+tree rooted at page {root} is inconsistent after a failed split; it needs recovery"
    )]
    TreeInconsistent { root: PageId },
    /// Fail-stop: a write or sync of the data file failed, so its state is unknown; the pool
    /// refuses every later change (reads still work) until the database is reopened.
    #[error("the storage engine stopped accepting writes after an I/O failure ({cause}); reopen the database to recover")]
    Stopped { cause: String },
    /// Recovery could not redo the log's changes to a page at its first load (see
    /// `buffer_pool.rs`, "Redo at first load"): the database stops.
    #[error("redo of page {page_id} at its first load failed: {reason}")]
    Redo { page_id: PageId, reason: String },
    /// The PMEM double-write area (`doublewrite.rs`) is not one, or is damaged.
    #[error("double-write area {name}: {reason}")]
    DoubleWriteArea { name: String, reason: String },
    /// `insert` of a key that is already present.
    #[error("duplicate key")]
    DuplicateKey,
    /// `update` of a key that is absent.
    #[error("key not found")]
    KeyNotFound,
}

/// Result with [`StorageError`].
pub type Result<T> = std::result::Result<T, StorageError>;
