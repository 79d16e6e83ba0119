//! `tailstore`: the command-line front end.
//!
//! Every subcommand explains itself with `--help`. Errors are printed as one clear line and
//! end the process with a non-zero status; nothing here panics on bad input.

#![forbid(unsafe_code)]

mod args;
mod bench_engine;
mod bench_log;
mod interrupt;
mod kv;
mod latency;
mod report;
mod serve;
mod tpcc;

use std::process::ExitCode;

/// mimalloc instead of glibc's allocator: rows, keys and write sets are many small, short-lived
/// allocations, and glibc spent a fifth of TPC-C's CPU time in malloc and free (decision 47).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

/// tailstore — durable, low-latency transactions with the tail of the log in persistent memory.
///
/// A commit is durable as soon as its log record is flushed from the CPU cache into persistent
/// memory (PMEM); full log blocks reach the disk later, in the background. Without real PMEM, a
/// file on tmpfs (/dev/shm) emulates it: that survives a process crash, not a power cut, and
/// every report says which medium was used.
#[derive(Parser)]
#[command(name = "tailstore", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Benchmarks of tailstore's components.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The TPC-C workload: load a database, check it, run it, compare commit modes.
    #[command(subcommand)]
    Tpcc(tpcc::TpccCommand),
    /// A Redis-compatible server: every write is durable before its reply.
    ///
    /// Speaks RESP2 and RESP3 (HELLO 3) with pipelining, so redis-cli, redis-benchmark and
    /// Redis client libraries work unchanged. Data lives in the database directory; after a
    /// crash, a restart replays only the log since the last checkpoint. Stop it with Ctrl-C
    /// (SIGINT) or SIGTERM for a clean shutdown.
    Serve(serve::ServeArgs),
    /// The Redis-compatible server seen from a client: compare it with Redis.
    #[command(subcommand)]
    Kv(kv::KvCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Commit throughput and latency of the log manager in each commit mode.
    ///
    /// With no options, compares all four modes (fsync, buffer, pmem-log, async) at 1 and 8
    /// threads with 128-byte records, three runs each, in a temporary log directory on disk and
    /// a PMEM file emulated in /dev/shm, and prints the median run of each case with the log
    /// manager's counters. Takes under a minute.
    Log(bench_log::BenchLogArgs),
    /// Lookups and inserts through the embedded database's transactions.
    ///
    /// With no options: loads a table of 1,000,000 100-byte rows (id INT64 primary key +
    /// VARCHAR(92)) in a temporary directory on disk, then measures point lookups (one get per
    /// read-only transaction, and 10 per transaction) with a buffer pool holding all data at 1
    /// and 2 threads; single-row insert transactions in fresh databases in the buffer, async
    /// and fsync commit modes at 1 and 2 threads (PMEM emulated in /dev/shm); and lookups with
    /// the pool at 1/8, 1/4, 1/2 and all of the data's size, with pages read per lookup. Cases
    /// are interleaved, three runs each, the median run reported. Takes a few minutes.
    Engine(bench_engine::BenchEngineArgs),
    /// A memtier-like load generator for any RESP server (tailstore serve, Redis, …).
    ///
    /// T threads (--threads) each drive N connections (--clients) through one poller; every
    /// connection keeps P requests in flight (--pipeline), sending a new one for each reply
    /// (closed loop). SETs and GETs follow --ratio SET:GET exactly; keys are PREFIX<n> over
    /// --key-space, random or sequential. Runs --requests per connection (default 10000) or
    /// --test-time seconds. Reports ops/s (SET and GET), GET hits and misses (nil), KB/s sent
    /// and received, latency from sending a request to reading its reply (avg, p50, p99,
    /// p99.9, max; HdrHistogram), and error replies with the first error's text.
    Kv(kv::bench::BenchKvArgs),
}

type CliResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(BenchCommand::Log(args)) => bench_log::run(&args),
        Command::Bench(BenchCommand::Engine(args)) => bench_engine::run(&args),
        Command::Bench(BenchCommand::Kv(args)) => kv::bench::run(&args),
        Command::Tpcc(command) => tpcc::run(&command),
        Command::Kv(command) => kv::run(&command),
        Command::Serve(args) => serve::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(1)
        }
    }
}
