//! The TPC-C kit (specification 5.11) for tailstore's embedded database.
//!
//! ```text
//! schema     the nine tables, every column, keys, the two secondary indexes; tpcc_meta
//! random     NURand and its constants (the C_LAST delta rule), names, a-/n-strings, zips
//! load       the initial population, in parallel, batched, with a progress bar
//! workload   a loaded database opened for a run: run-time constants, history ids
//! txn        New-Order, Payment, Order-Status, Delivery, Stock-Level; inputs; retries
//! terminal   the card deck of transaction types and a terminal that runs them
//! workers    the transaction monitor: at most N transactions execute at once
//! check      consistency conditions 1–12
//! ```
//!
//! # For a driver
//!
//! * [`load()`]`(db, warehouses, threads, progress)` creates the tables in an empty database,
//!   loads it and checkpoints ([`load_with`] takes a seed and the batch size).
//! * [`Workload::open`] reads the load's parameters and draws the run-time NURand constants;
//!   share it by reference between the terminals' threads.
//! * [`Terminal::new`]`(&workload, w_id, d_id, rng)` and [`Terminal::run_next`] deal the next
//!   type from the deck and run it: a [`TxnReport`] with its type, [`Outcome`] (committed,
//!   rolled back, or aborted after the retry policy's last attempt), latency (retries
//!   included), engine retries by cause and, for a committed New-Order, the
//!   [`EnteredOrder`]. An `Err` is fatal (the database stopped).
//!   Keying and think times, and Delivery's deferred queue (clause 2.7.2), are the driver's:
//!   a terminal runs Delivery at once, in its own thread.
//! * [`check()`]`(db, all)` checks conditions 1–4, or 1–10 and 12; [`check_conditions`] any
//!   set ([`check::AFTER_LOAD`] is all twelve).
//!
//! # Example
//!
//! ```no_run
//! use tailstore_engine::{Database, DbConfig};
//! use tailstore_log::CommitMode;
//! use tailstore_tpcc::{check, load, random::seeded, Terminal, Workload};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (db, _) = Database::open(DbConfig::new("/tmp/tpcc", CommitMode::Async, None))?;
//! load(&db, 1, 2, true)?;
//! let workload = Workload::open(&db, &mut seeded(1))?;
//! let mut terminal = Terminal::new(&workload, 1, 1, seeded(2))?;
//! for _ in 0..100 {
//!     let report = terminal.run_next()?;
//!     println!("{} {:?} {:?}", report.kind, report.outcome, report.latency);
//! }
//! check(&db, true)?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod check;
pub mod error;
pub mod load;
pub mod random;
mod row;
pub mod schema;
pub mod terminal;
pub mod txn;
pub mod workers;
pub mod workload;

pub use check::{check, check_conditions, CheckReport};
pub use error::{Result, TpccError, Violation};
pub use load::{load, load_with, LoadConfig, LoadReport};
pub use terminal::{Deck, EnteredOrder, Terminal, TxnKind, TxnReport};
pub use txn::{Isolation, Outcome, Retries, RetryPolicy};
pub use workers::{Worker, Workers};
pub use workload::{LoadParameters, Workload};
