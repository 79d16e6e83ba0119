//! The engine's error type.

use tailstore_log::LogError;
use tailstore_storage::{RowError, SchemaError, StorageError};

/// Why a transaction was aborted by the concurrency control. Every cause is retryable: run
/// the transaction again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbortCause {
    /// A row this transaction writes is being committed by another transaction.
    WriteConflict,
    /// A row this transaction read was changed (or is being changed) by a transaction that
    /// committed first.
    ReadChanged,
    /// A range this transaction scanned gained or lost rows (a phantom) before it committed.
    Phantom,
}

impl AbortCause {
    pub const ALL: [AbortCause; 3] = [
        AbortCause::WriteConflict,
        AbortCause::ReadChanged,
        AbortCause::Phantom,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AbortCause::WriteConflict => "write-conflict",
            AbortCause::ReadChanged => "read-changed",
            AbortCause::Phantom => "phantom",
        }
    }
}

impl std::fmt::Display for AbortCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything the embedded API can report.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The transaction lost a conflict and was rolled back; retry it.
    #[error("transaction aborted ({cause}); it can be retried")]
    Aborted { cause: AbortCause },
    #[error("no table named `{0}`")]
    NoSuchTable(String),
    #[error("table `{0}` already exists")]
    TableExists(String),
    #[error("table `{table}` has no index named `{index}`")]
    NoSuchIndex { table: String, index: String },
    /// An insert found a row with the same primary key (or unique index key).
    #[error("duplicate key in table `{0}`")]
    DuplicateKey(String),
    /// An update named a row that does not exist.
    #[error("no such row in table `{0}`")]
    RowNotFound(String),
    /// A column read or column change the table does not allow (no such column, a key or
    /// index column, an addition to a non-number).
    #[error("{0}")]
    Column(String),
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Row(#[from] RowError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Media(#[from] tailstore_media::MediaError),
    /// The transaction writes (or removes, as charged by `Transaction::charge`) more than
    /// one commit may (see [`crate::Database::max_commit_bytes`]); nothing was changed.
    #[error("transaction too large: it writes or removes {bytes} bytes, a commit may change at most {limit}")]
    TooLarge { bytes: usize, limit: usize },
    /// The transaction's writes fall on more pages than the buffer pool can hold while the
    /// commit is logged (see [`crate::Database::max_commit_pages`]); nothing was changed.
    #[error("transaction too large: its writes fall on about {pages} pages, a commit may change at most {limit} (the buffer pool holds every page a commit changes until it is logged)")]
    TooManyPages { pages: usize, limit: usize },
    /// A `pmem-log` commit in parts found less room in the region than its parts take; its
    /// pages had changed, so the database stops (see `Shared::append_commit`).
    #[error("a commit of {needed} bytes of log in parts found {room} bytes free in the pmem-log region, which only a checkpoint frees")]
    NoRoomForParts { needed: u64, room: u64 },
    /// The database's files are not what they should be (meta pages, catalog, log records).
    /// A write in a read-committed transaction, whose reads are not validated.
    #[error("a read-committed transaction only reads; run writes in a serializable one (`Database::begin`)")]
    ReadCommittedWrite,
    /// The catalog (every table's definition) is stored whole in a meta slot.
    #[error("table `{table}` not created: the catalog would take {bytes} bytes, more than the {limit} a meta page slot holds")]
    CatalogFull {
        table: String,
        bytes: usize,
        limit: usize,
    },
    #[error("database is corrupt: {0}")]
    Corrupt(String),
    /// The database was opened with something it cannot use.
    #[error("cannot open the database: {0}")]
    Open(String),
    /// Fail-stop: a change could not be logged or written, so the in-memory state is no
    /// longer known to match what is durable. Reopen the database to recover.
    #[error("the database stopped accepting writes after a failure ({0}); reopen it to recover")]
    Stopped(String),
}

impl EngineError {
    /// Whether running the transaction again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, EngineError::Aborted { .. })
    }
}

/// Result with [`EngineError`].
pub type Result<T> = std::result::Result<T, EngineError>;
