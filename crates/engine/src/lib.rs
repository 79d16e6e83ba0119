//! tailstore's embedded database: tables with typed columns, composite primary keys and
//! secondary indexes; serializable transactions on many threads; a bounded buffer pool;
//! checkpoints; crash recovery in every commit mode of the log.
//!
//! ```text
//! database   open / create / recover, checkpoints, the catalog of tables, counters
//!   │
//! txn        transactions: optimistic execution, commit-time key locks (locks), validation,
//!   │          apply + one log record per transaction (wal), early lock release
//! recovery   redo from the last checkpoint (meta), free-page rebuild
//!   │
//! tailstore_storage   rows and keys, B+trees with redo records, buffer pool, pages
//! tailstore_log       the log manager and its commit modes
//! ```
//!
//! # Example
//!
//! ```
//! use tailstore_engine::{Database, DbConfig, KeyRange};
//! use tailstore_log::CommitMode;
//! use tailstore_storage::{Column, ColumnType, IndexDef, Schema, ScanDirection, Value};
//!
//! # fn main() -> Result<(), tailstore_engine::EngineError> {
//! let dir = tempfile::tempdir().expect("temporary directory");
//! let config = DbConfig::new(dir.path(), CommitMode::Fsync, None);
//! let (db, _report) = Database::open(config)?;
//!
//! // accounts(id INT64 PRIMARY KEY, owner VARCHAR(40), balance DECIMAL(12, 2)), indexed by owner
//! let schema = Schema::new(
//!     vec![
//!         Column::new("id", ColumnType::Int64),
//!         Column::new("owner", ColumnType::Varchar(40)),
//!         Column::new("balance", ColumnType::Decimal { precision: 12, scale: 2 }),
//!     ],
//!     vec![0],
//!     vec![IndexDef::new("by_owner", vec![1], false)],
//! )?;
//! let accounts = db.create_table("accounts", &schema)?;
//!
//! let mut txn = db.begin();
//! txn.insert(&accounts, &[Value::Int(1), Value::Text("ada".into()), Value::Decimal(10_000)])?;
//! txn.insert(&accounts, &[Value::Int(2), Value::Text("bob".into()), Value::Decimal(2_500)])?;
//! txn.commit()?; // durable when this returns
//!
//! // Move 10.00 from account 1 to account 2, retrying on conflicts.
//! db.run(10, |txn| {
//!     let mut from = txn.get(&accounts, &[Value::Int(1)])?.expect("account 1");
//!     let mut to = txn.get(&accounts, &[Value::Int(2)])?.expect("account 2");
//!     if let (Value::Decimal(a), Value::Decimal(b)) = (&mut from[2], &mut to[2]) {
//!         *a -= 1_000;
//!         *b += 1_000;
//!     }
//!     txn.update(&accounts, &from)?;
//!     txn.update(&accounts, &to)
//! })?;
//!
//! let mut txn = db.begin();
//! let bobs = txn.scan_index(
//!     &accounts,
//!     "by_owner",
//!     &KeyRange::prefix(vec![Value::Text("bob".into())]),
//!     ScanDirection::Ascending,
//!     10,
//! )?;
//! assert_eq!(bobs[0][2], Value::Decimal(3_500));
//! txn.commit()?;
//! db.close()?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod catalog;
pub mod cpus;
mod database;
mod error;
mod interleave;
mod locks;
mod meta;
mod patch;
mod pending_redo;
mod plant;
mod recovery;
mod replay_weight;
mod txn;
mod wal;

pub use database::{
    doublewrite_path, pause_before_retry, physical_memory_bytes, remove_pmem_files, BackgroundRedo,
    Database, DbConfig, EngineStats, OpenReport, RestartRedo, DATA_FILE_NAME,
    DEFAULT_DOUBLEWRITE_SLOTS,
};
pub use error::{AbortCause, EngineError, Result};
pub use patch::ColumnChange;
pub use recovery::RecoveryReport;
pub use txn::{KeyRange, PendingCommit, Table, Transaction};
