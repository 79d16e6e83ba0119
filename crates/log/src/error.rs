//! Errors of the log manager. Each says what is wrong and, where the user can act, what to do.

use tailstore_media::MediaError;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error(transparent)]
    Media(#[from] MediaError),

    /// Fail-stop: after a failed write, fsync or persist nothing more is accepted, because the
    /// state of the medium is unknown and acknowledging anything could lose it.
    #[error("the log stopped accepting commits after an I/O failure ({cause}); reopen the database to recover")]
    Stopped { cause: String },

    #[error("{path}: {detail}")]
    Corrupt { path: String, detail: String },

    #[error("{path} belongs to another database (id {found:#018x}, expected {expected:#018x})")]
    ForeignDatabase {
        path: String,
        found: u64,
        expected: u64,
    },

    #[error("{path} was created for commit mode '{found}'; open it with --commit {found}, not '{requested}'")]
    ModeMismatch {
        path: String,
        found: String,
        requested: String,
    },

    #[error("{present} holds a log, but {missing} is missing or was never initialised: {why}")]
    MissingCompanion {
        present: String,
        missing: String,
        why: &'static str,
    },

    #[error("log file {path} ends at byte {file_end}, but the PMEM buffer says it was hardened up to {hardened}: the log file was truncated or replaced")]
    LogFileTruncated {
        path: String,
        file_end: u64,
        hardened: u64,
    },

    #[error("invalid log configuration: {0}")]
    Config(String),

    #[error("record of {len} bytes does not fit the log's ring (at most {max} bytes)")]
    RecordTooLarge { len: usize, max: usize },

    /// A page (or a caller) waits for a log position no record reaches: the data file holds
    /// changes whose log records were lost, which the write-ahead rule forbids.
    #[error("LSN {lsn} is past the end of the log ({end}): a data page holds changes the log does not have (the log lost records the data file kept); the database is corrupt")]
    PastTheEnd { lsn: u64, end: u64 },

    #[error("LSN {lsn} is not the start of a record in the log (valid range {start}..={end})")]
    NotARecordBoundary { lsn: u64, start: u64, end: u64 },
}

pub type Result<T> = std::result::Result<T, LogError>;
