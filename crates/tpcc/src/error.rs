//! The kit's error type.

use tailstore_engine::EngineError;

/// A consistency condition that does not hold, with the row that breaks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The condition's number in the specification (3.3.2.1 is 1, …, 3.3.2.12 is 12).
    pub condition: u8,
    /// The offending row and the values that disagree.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "consistency condition {} (3.3.2.{}) does not hold: {}",
            self.condition, self.condition, self.detail
        )
    }
}

/// Everything the kit can report.
#[derive(Debug, thiserror::Error)]
pub enum TpccError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The database holds no complete TPC-C population (no tables, or a load that stopped).
    #[error("no complete TPC-C database: {0}")]
    NotLoaded(String),
    /// `load` found TPC-C tables already there.
    #[error("the database already holds TPC-C tables ({0}); load into an empty database")]
    AlreadyLoaded(String),
    /// A row the population guarantees is missing (e.g. a customer without any order).
    #[error("missing row: {0}")]
    MissingRow(String),
    /// A row the population never has (a warehouse past `tpcc_meta`'s count, a district 11).
    #[error("unexpected row: {0}")]
    UnexpectedRow(String),
    /// A column holds a value of the wrong kind: the table was not created by this kit.
    #[error("column #{column} holds {found}, expected {expected}")]
    BadValue {
        column: usize,
        expected: &'static str,
        found: &'static str,
    },
    /// An id or count read from the database does not fit its range.
    #[error("id or count {0} is out of range")]
    OutOfRange(i64),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("{0}")]
    Inconsistent(Violation),
    /// A worker thread panicked (a bug); the others were stopped.
    #[error("a {0} thread panicked")]
    Panicked(&'static str),
}

impl TpccError {
    /// A missing or unexpected row's message with `why` appended.
    pub(crate) fn counted(self, why: String) -> TpccError {
        match self {
            TpccError::MissingRow(what) => TpccError::MissingRow(format!("{what} ({why})")),
            TpccError::UnexpectedRow(what) => TpccError::UnexpectedRow(format!("{what} ({why})")),
            other => other,
        }
    }

    /// Whether running the transaction again may succeed (the engine aborted it).
    pub fn is_retryable(&self) -> bool {
        matches!(self, TpccError::Engine(e) if e.is_retryable())
    }
}

/// Result with [`TpccError`].
pub type Result<T> = std::result::Result<T, TpccError>;
