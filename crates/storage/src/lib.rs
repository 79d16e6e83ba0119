//! tailstore's storage engine: the layers under tables, transactions and recovery.
//!
//! ```text
//! schema, row, key   table schemas and typed values; the row value format; the
//!   │                  order-preserving key encoding (primary and secondary index keys)
//! btree        B+tree: byte-string keys in memcmp order, slotted leaf/inner pages,
//!   │            get / insert / update / delete / ordered scans, splits and merges
//! buffer_pool  a bounded cache of pages: page table, per-frame latches, pins, CLOCK
//!   │            eviction, the write-ahead hook before every dirty write, counters
//! page         the 16 KiB page and its on-disk header: CRC32C, page id, page LSN, kind
//!   │
//! doublewrite  (PMEM commit modes) a persistent copy of each page before it is written in
//!   │            place, from which a page torn by a power cut is restored at open
//! tailstore_media::File, Region   the data file and the PMEM area (real or simulated)
//! ```
//!
//! Each layer only talks to the one below it. The data file is an array of pages: page `n`
//! lives at byte offset `n * PAGE_SIZE`. Every page is sealed (checksummed) just before it is
//! written and verified just after it is read, so a torn, misplaced or bit-rotted page is
//! reported as [`StorageError::Corrupt`] and never handed to the layers above.
//!
//! Not yet here (later issues): logging of page changes (the B+tree does not stamp page LSNs
//! yet), a persistent free-page list, recovery, and latch coupling inside the B+tree.

#![forbid(unsafe_code)]

pub mod btree;
pub mod buffer_pool;
pub mod doublewrite;
pub mod error;
mod interleave;
pub mod key;
pub mod page;
mod plant;
pub mod row;
pub mod schema;

pub use btree::{
    BTree, Entry, LeafRoom, LeafStamp, PageOp, ReadContention, Redo, ScanDirection, TreeShape,
    TreeWriter, Walked, MAX_ENTRY,
};
pub use buffer_pool::{
    BufferPool, PageReadGuard, PageWriteGuard, PendingRedo, PoolStats, WriteAheadHook,
};
pub use doublewrite::{DoubleWrite, Restored};
pub use error::{HookError, Result, StorageError};
pub use page::{Lsn, Page, PageId, PageIdMap, PageIdSet, PageKind, PAGE_SIZE};
pub use plant::Plant;
pub use row::{RowError, Value};
pub use schema::{Column, ColumnType, IndexDef, Schema, SchemaError};
