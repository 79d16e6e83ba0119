//! tailstore's log manager.
//!
//! One log, four ways to make a commit durable ([`CommitMode`]): `fsync` group commit, the
//! persisted log buffer in PMEM (`buffer`), the whole log in PMEM (`pmem-log`), and `async`
//! for comparison. Many threads append at once; recovery returns the longest valid prefix.
//!
//! ```
//! use std::sync::Arc;
//! use tailstore_log::{CommitMode, LogConfig, LogManager};
//! use tailstore_media::sim::SimStorage;
//!
//! let storage = Arc::new(SimStorage::new());
//! let config = LogConfig::new(CommitMode::Buffer, "/db", Some("/pmem/log.pmem".into()));
//! let (log, recovery) = LogManager::open(storage.clone(), &config)?;
//! assert!(recovery.created);
//! let lsn = log.commit(b"hello")?; // durable once this returns
//! drop(log);
//!
//! let (log, recovery) = LogManager::open(storage, &config)?;
//! assert_eq!(recovery.end_lsn, lsn);
//! let records: Vec<_> = log.records().collect::<Result<_, _>>()?;
//! assert_eq!(records[0].payload, b"hello");
//! # Ok::<(), tailstore_log::LogError>(())
//! ```
//!
//! Byte formats and the argument for why an acknowledged commit survives a crash:
//! docs/design/log.md.

#![forbid(unsafe_code)]

#[cfg(feature = "append-pauses")]
pub mod append_pauses;
mod completion;
pub mod config;
mod counters;
mod error;
pub mod format;
mod manager;
mod plant;
pub mod record;
mod recovery;
mod ring;
mod scan;

pub use config::{CommitMode, LogConfig, ThreadSetup, KIB, MIB};
pub use counters::LogCounters;
pub use error::{LogError, Result};
pub use format::LOG_START_LSN;
pub use manager::{CommitIntent, LogManager, Reservation};
pub use plant::Plant;
pub use record::{record_size, MAX_PAYLOAD};
pub use recovery::{LogReplay, Recovery, Walked};
pub use scan::{Record, RecordRef, Records};

/// Name of the log file inside the log directory.
pub const LOG_FILE_NAME: &str = "tailstore.log";
