//! The Redis-compatible side of tailstore seen from a client: a load generator for any RESP
//! server and the comparison of tailstore's server against Redis.
//!
//! ```text
//! bench       `tailstore bench kv`: memtier-like closed-loop load, T threads × N connections
//!   ├ workload    keys (random or sequential), SET:GET ratio, the value bytes
//!   └ connection  one non-blocking connection: P requests in flight, replies matched in order
//! compare     `tailstore kv compare`: servers started in temporary directories, the reference
//!   └ server      study's workloads, throughput and latency tables, restart after SIGKILL
//! migrate     `tailstore kv migrate`: every key of one server copied into another (SCAN,
//!               PTTL, DUMP, RESTORE)
//! link        a blocking connection that pipelines (compare's questions, migrate's copies)
//! address     a server's address: HOST:PORT, or a Unix socket's path
//! ```

mod address;
pub mod bench;
mod compare;
mod connection;
mod link;
mod migrate;
mod server;
mod tls;
mod workload;

use clap::Subcommand;

use crate::CliResult;

pub use compare::CompareArgs;
pub use migrate::MigrateArgs;

#[derive(Subcommand)]
pub enum KvCommand {
    /// Compare `tailstore serve` in each commit mode with Redis 7 (appendfsync always,
    /// everysec, no persistence) on the reference study's workloads.
    ///
    /// Every server runs in its own temporary directory (under /var/tmp, on disk), on loopback,
    /// on a free port; PMEM is emulated by a file in /dev/shm. Workloads: SET ratios 0, 20, 50,
    /// 80 and 100% with 4 KiB values, once with throughput settings (pipeline 4, 50 clients
    /// per thread, 2 threads: 100 connections) and once with latency settings (pipeline 1, 1
    /// client, 1 thread); the key space is filled before the first run that reads. Then, for
    /// each server in a fresh directory: write --restart-data-mb of data at full speed, SIGKILL
    /// the server, start it again and time until its first reply to PING.
    ///
    /// Prints a throughput table and a latency table with ratios against Redis with
    /// `appendfsync always`, and the restart times. Redis is skipped (with a note) when
    /// redis-server is not on PATH; a server that does not start is reported and skipped.
    /// The defaults take about three minutes.
    Compare(CompareArgs),
    /// Copy the keys of one RESP server into another: from Redis into tailstore, back, or
    /// between two tailstore servers.
    ///
    /// SCANs the source database by database, reads each key's remaining TTL (PTTL) and its
    /// value in Redis's serialization (DUMP), and RESTOREs it in the target's database of the
    /// same number, --batch keys per round trip each way. Every kind of value moves, streams
    /// with their consumer groups included (tailstore reads the DUMP payloads of Redis 2.6 to
    /// 7.2; Redis 6.0 and later read tailstore's). The source is only read. Prints, per
    /// database, the keys copied and those not copied with the reason (a key the target
    /// already holds, without --replace; a string longer than one commit of the target may
    /// write), and exits non-zero if any key was not copied.
    Migrate(MigrateArgs),
}

pub fn run(command: &KvCommand) -> CliResult<()> {
    match command {
        KvCommand::Compare(args) => compare::run(args),
        KvCommand::Migrate(args) => migrate::run(args),
    }
}
