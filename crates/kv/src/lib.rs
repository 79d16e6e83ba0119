//! A Redis-compatible server on the tailstore engine: every write is durable before its
//! reply.
//!
//! ```text
//! server     connections, RESP, pipelining, MULTI/WATCH, group commit per event-loop pass
//!   │
//! script     EVAL's Lua scripts: one engine transaction each, running data commands
//!   │
//! command    the command table; data commands run in one engine transaction each
//!   │          (DUMP and RESTORE through tailstore_rdb: Redis's serialization of one value)
//!   │
//! keyspace   Redis's databases and keys as rows of four engine tables (docs/design/kv.md)
//!   │
//! tailstore_engine
//! ```

#![forbid(unsafe_code)]

pub mod command;
pub mod keyspace;
pub mod script;
pub mod server;

pub use command::{BlockStep, Executed, MapChange, Watched};

/// The Redis version we answer to clients that check it: the command set and semantics of
/// Redis 7.0 (as far as docs/design/kv.md lists them).
pub const REDIS_VERSION: &str = "7.0.0";
pub use keyspace::{Keyspace, KvError};
