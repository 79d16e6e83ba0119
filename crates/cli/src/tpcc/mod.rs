//! `tailstore tpcc`: the TPC-C workload (crate `tailstore-tpcc`) driven from the command line.
//!
//! ```text
//! load      create a database (or K of them) and load W warehouses, checkpoint, close
//! check     open (printing what recovery did) and check the consistency conditions
//! run       HammerDB-style virtual users for a ramp-up and a timed window: TPM, NOPM,
//!           latency per transaction type, aborts, the log's counters, CPU
//! compare   the same workload in each commit configuration, interleaved runs, medians
//! ```
//!
//! Databases on the command line: `--db DIR` is the data directory; the log file goes to
//! `--log-dir` (default: `DIR`) and the PMEM file of `buffer` and `pmem-log` to `--pmem`.
//! With `--instances K` there are K databases: `DIR/instance-1` … `DIR/instance-K`, logs in
//! `LOG_DIR/instance-i` when `--log-dir` is given, and PMEM files `PATH` with `-i` added
//! before the extension (`/dev/shm/tpcc.pmem` → `/dev/shm/tpcc-1.pmem`, …).

mod check;
mod compare;
mod driver;
mod load;
mod run;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use tailstore_engine::{Database, DbConfig, EngineError, OpenReport, DATA_FILE_NAME};
use tailstore_log::format::HEADER_BYTES;
use tailstore_log::CommitMode;

use crate::args::ByteSize;
use crate::CliResult;

pub use check::CheckArgs;
pub use compare::CompareArgs;
pub use load::LoadArgs;
pub use run::RunArgs;

#[derive(Subcommand)]
pub enum TpccCommand {
    /// Create a database and load W warehouses (clause 4.3.3.1), then checkpoint and close.
    ///
    /// DIR must not exist or be empty, and the log file and PMEM file must not exist yet.
    /// Prints the load time, the rows loaded and the sizes of the data file, log file and
    /// PMEM file.
    Load(LoadArgs),
    /// Check the consistency conditions of clause 3.3.2 on a loaded database.
    ///
    /// Conditions 1–4 by default, 1–10 and 12 with --all (11 holds only right after the
    /// load). Opening prints what recovery replayed. Exits with status 1 naming the first
    /// condition that does not hold and the row that breaks it.
    Check(CheckArgs),
    /// Run the TPC-C transactions with virtual users, HammerDB-style, and report TPM, NOPM,
    /// latency per transaction type, aborts, the log's counters and CPU utilisation.
    ///
    /// Each virtual user has a home warehouse (round-robin over the warehouses) and runs
    /// transactions back to back (no keying or think time unless --keying-thinking). The
    /// ramp-up is excluded from every figure. TPM counts the transactions the engine committed
    /// or rolled back in the timed window (read from its counters); NOPM is the growth of
    /// Σ d_next_o_id over the window (read from the database, as HammerDB does), both per
    /// minute.
    Run(RunArgs),
    /// Run the same TPC-C workload in each commit configuration and compare them.
    ///
    /// Configurations: fsync with the log on disk (the baseline), fsync with the log on
    /// /dev/shm ("block-mode PMEM"), buffer (the persisted log buffer: tail of the log in
    /// PMEM), pmem-log (the whole log in PMEM) and async (not durable). Each configuration
    /// needs a database loaded with its own kind of log, so the database is loaded once per
    /// log kind (fsync, buffer, pmem-log, async: four loads), closed, and copied afresh (data
    /// file, log file, PMEM file) for every run. Runs are interleaved; the median run of each
    /// configuration is reported with its change against fsync on disk.
    ///
    /// Defaults: 4 warehouses, 8 users, 3 s ramp-up + 18 s timed, 1 run, checkpoints every
    /// 1GiB of log or 30 s: about two and a half minutes on a 2-core machine (four loads of
    /// ~5 s, five runs of ~24 s). The issue's reference run is `--duration 60 --runs 3`
    /// (about 15 minutes).
    Compare(CompareArgs),
}

pub fn run(command: &TpccCommand) -> CliResult<()> {
    match command {
        TpccCommand::Load(args) => load::run(args),
        TpccCommand::Check(args) => check::run(args),
        TpccCommand::Run(args) => run::run(args),
        TpccCommand::Compare(args) => compare::run(args),
    }
}

/// Where a database (or K of them) lives and how its log is kept.
/// `--stock-level-isolation` of `tpcc run` and `tpcc compare`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StockLevelIsolation {
    /// Level 1: committed data only, never aborted (clause 3.4.1 asks no more of it).
    ReadCommitted,
    /// Level 3, like the other four transactions.
    Serializable,
}

/// How the users' transactions run, for `tpcc run` and `tpcc compare`.
#[derive(Args, Clone, Copy, Debug)]
pub struct ExecutionArgs {
    /// Isolation of Stock-Level: read-committed (level 1, all that clause 3.4.1 asks of it:
    /// it never aborts) or serializable (level 3, like the other four; aborted by every
    /// New-Order that changes a stock row it read, and run again).
    #[arg(
        long,
        value_enum,
        value_name = "LEVEL",
        default_value = "read-committed"
    )]
    pub stock_level_isolation: StockLevelIsolation,

    /// Transactions that run at once, as on a server's worker threads: a user takes a free
    /// worker before each attempt (in turn, waiting if there is none) and gives it back once
    /// its commit is applied and logged, before it waits for durability. Without a bound
    /// (the default) every user runs whenever it likes, and with many more users than cores
    /// the kernel preempts transactions in the middle of their commits and optimistic
    /// concurrency control runs them again and again: on 2 cores and 1 warehouse, 256 users
    /// made a third more NOPM with --workers 4. With few users per core the wait for a
    /// worker at every transaction can cost more than it saves (decision 92 in
    /// docs/ARCHITECTURE.md)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
}

impl ExecutionArgs {
    /// The bound on transactions running at once (`None`: none).
    pub fn workers(&self) -> Option<usize> {
        self.workers.map(|n| n as usize)
    }
}

impl From<StockLevelIsolation> for tailstore_tpcc::Isolation {
    fn from(level: StockLevelIsolation) -> Self {
        match level {
            StockLevelIsolation::ReadCommitted => tailstore_tpcc::Isolation::ReadCommitted,
            StockLevelIsolation::Serializable => tailstore_tpcc::Isolation::Serializable,
        }
    }
}

#[derive(Args, Clone, Debug)]
pub struct DbArgs {
    /// Data directory of the database (with --instances K: DIR/instance-1 … DIR/instance-K).
    #[arg(long, value_name = "DIR")]
    pub db: PathBuf,
    /// Commit mode: fsync, buffer (tail of the log in PMEM), pmem-log (whole log in PMEM) or
    /// async (not durable). A database is opened in the mode it was loaded in.
    #[arg(long = "commit", value_name = "MODE", default_value = "fsync")]
    pub commit: CommitMode,
    /// Directory of the log file (fsync, buffer, async). Default: the data directory. Put it
    /// on /dev/shm to emulate a log on block-mode PMEM.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// The PMEM file of buffer and pmem-log: on a DAX file system, or on /dev/shm to emulate
    /// PMEM (which survives a process crash, not a power cut).
    #[arg(long, value_name = "PATH")]
    pub pmem: Option<PathBuf>,
    /// Buffer pool per database. Default: enough to hold the data (192 MiB per warehouse
    /// plus 64 MiB when loading; 1.5 times the data file plus 64 MiB when opening).
    #[arg(long, value_name = "SIZE")]
    pub buffer_pool: Option<ByteSize>,
    /// Independent databases, each with its own log and PMEM file (see DIR).
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub instances: usize,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// The engine's checkpoint policy and the size of the pmem-log region (the engine's
/// defaults unless given).
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct TuningArgs {
    /// Checkpoint once this much log was written since the last checkpoint began. Default:
    /// for serve 128MiB in buffer mode and 256MiB in fsync and async, the engine's 1GiB
    /// otherwise; in pmem-log, a quarter of its region. In fsync and async modes the first
    /// change of each page after a checkpoint logs a full image of the page, so frequent
    /// checkpoints multiply the log volume (buffer and pmem-log copy pages to a double-write
    /// area in PMEM instead).
    #[arg(long, value_name = "SIZE")]
    pub checkpoint_log: Option<ByteSize>,
    /// Checkpoint at least every S seconds (0: only by log volume). Default: the engine's, 30.
    #[arg(long, value_name = "S", value_parser = crate::args::seconds)]
    pub checkpoint_every: Option<f64>,
    /// A checkpoint leaves dirty the pages first changed in about the last SIZE of log, for
    /// a later one to write, and a restart replays that much more: a page changed again and
    /// again is written once per SIZE plus --checkpoint-log of log instead of once per
    /// --checkpoint-log. 0: each checkpoint writes every dirty page. Default: for serve five
    /// times --checkpoint-log in buffer mode (640MiB; with its 1GiB --log-ring, the restart
    /// reads that log from PMEM) and twice --checkpoint-log in pmem-log mode; 0 otherwise.
    #[arg(long, value_name = "SIZE")]
    pub checkpoint_keep: Option<ByteSize>,
    /// Bound on the log a restart replays: once this much was written since the last
    /// completed checkpoint (checkpoints falling behind the writes), writes wait for one, so
    /// a restart after a crash replays about this much at most (plus the commits already
    /// under way). Default: for serve, --checkpoint-keep plus twice --checkpoint-log; none
    /// otherwise (pmem-log: its region bounds it). At least --checkpoint-log. For serve,
    /// these three sizes count each log record as at least 1KiB: a restart's time follows
    /// the records it replays as well as their bytes.
    #[arg(long, value_name = "SIZE")]
    pub max_replay: Option<ByteSize>,
    /// pmem-log: size of the whole log's PMEM region, set when the database is created (a
    /// multiple of 64KiB; an existing PMEM file keeps its size). Only a checkpoint frees it.
    /// Default: 768MiB for serve, 256MiB otherwise.
    #[arg(long, value_name = "SIZE")]
    pub pmem_log_size: Option<ByteSize>,
    /// buffer and pmem-log: size of the double-write area (PMEM_FILE.pages), which holds a
    /// copy of each page written until a sync of the data file; set when the area is created
    /// (default 64MiB: 4,096 pages of 16KiB; at least 1MiB). The data file is synced each
    /// time half of it fills, so a workload that evicts many dirty pages (a pool much smaller
    /// than its data) runs faster with a larger one: TPC-C with a pool an eighth of its data
    /// lost 20% of its throughput to these syncs with 32MiB and 11–13% with 256MiB (8KiB
    /// pages).
    #[arg(long, value_name = "SIZE")]
    pub doublewrite_size: Option<ByteSize>,
    /// buffer: size of the log buffer in PMEM (the ring), set when the PMEM file is created
    /// (a multiple of 64KiB; an existing file keeps its size); fsync and async: of the ring
    /// in DRAM. A restart reads the records the PMEM ring still holds from there, not from
    /// the disk (decision 109), so a ring as large as what a restart replays makes the
    /// restart's read of the log a read of memory. Default: 1GiB for serve in buffer mode,
    /// 64MiB for serve otherwise, 20MiB for the other commands.
    #[arg(long, value_name = "SIZE")]
    pub log_ring: Option<ByteSize>,
}

/// `pmem-log`: a whole-log PMEM region of `region` bytes, and the checkpoint interval that
/// goes with it (a quarter of the region, at most 64 MiB: checkpoints free the region).
pub fn set_pmem_log_region(config: &mut DbConfig, region: usize) {
    config.log.pmem_log_bytes = region;
    config.checkpoint_log_bytes = (region as u64 / 4).min(64 << 20);
}

impl TuningArgs {
    pub fn validate(&self) -> CliResult<()> {
        if self.checkpoint_log.is_some_and(|b| b.0 < 1 << 20) {
            return Err("--checkpoint-log must be at least 1MiB".into());
        }
        if self
            .checkpoint_every
            .is_some_and(|s| !(s >= 0.0 && s.is_finite()))
        {
            return Err("--checkpoint-every must be zero or more seconds".into());
        }
        if self
            .pmem_log_size
            .is_some_and(|b| b.0 < 1 << 20 || b.0 % (64 << 10) != 0)
        {
            return Err("--pmem-log-size must be a multiple of 64KiB of at least 1MiB".into());
        }
        if self.doublewrite_size.is_some_and(|b| b.0 < 1 << 20) {
            return Err("--doublewrite-size must be at least 1MiB".into());
        }
        if let (Some(replay), Some(interval)) = (self.max_replay, self.checkpoint_log) {
            if replay.0 < interval.0 {
                return Err("--max-replay must be at least --checkpoint-log".into());
            }
        }
        if self
            .log_ring
            .is_some_and(|b| b.0 < 1 << 20 || b.0 % (64 << 10) != 0)
        {
            return Err("--log-ring must be a multiple of 64KiB of at least 1MiB".into());
        }
        if self.max_replay.is_some_and(|b| b.0 < 1 << 20) {
            return Err("--max-replay must be at least 1MiB".into());
        }
        Ok(())
    }

    /// Applies the options to `config`. A pmem-log region's size comes from its file when it
    /// exists (the engine paces checkpoints by it, so it must be the real one).
    pub fn apply(&self, config: &mut DbConfig) {
        if config.log.mode == CommitMode::PmemLog {
            let existing = config
                .log
                .pmem_path
                .as_deref()
                .map(file_len)
                .filter(|&len| len > HEADER_BYTES as u64)
                .map(|len| len as usize - HEADER_BYTES);
            if let Some(region) = existing.or(self.pmem_log_size.map(|b| b.0)) {
                set_pmem_log_region(config, region);
            }
        }
        if let Some(bytes) = self.checkpoint_log {
            config.checkpoint_log_bytes = bytes.0 as u64;
        }
        if let Some(bytes) = self.max_replay {
            config.max_replay_bytes = Some(bytes.0 as u64);
        }
        if let Some(bytes) = self.checkpoint_keep {
            config.checkpoint_keep_bytes = bytes.0 as u64;
        }
        if let Some(every) = self.checkpoint_every {
            config.checkpoint_interval = (every > 0.0).then(|| Duration::from_secs_f64(every));
        }
        if let Some(bytes) = self.doublewrite_size {
            config.doublewrite_slots = tailstore_storage::doublewrite::slots_in(bytes.0);
        }
        if let Some(bytes) = self.log_ring {
            config.log.ring_bytes = bytes.0;
        }
    }
}

/// One database of a [`DbArgs`].
#[derive(Clone, Debug)]
pub struct Instance {
    /// 1-based.
    pub number: usize,
    pub data_dir: PathBuf,
    pub log_dir: PathBuf,
    pub pmem: Option<PathBuf>,
}

impl Instance {
    pub fn data_file(&self) -> PathBuf {
        self.data_dir.join(DATA_FILE_NAME)
    }

    pub fn log_file(&self) -> PathBuf {
        self.log_dir.join(tailstore_log::LOG_FILE_NAME)
    }

    /// The engine's configuration in `mode` with a pool of `pool` bytes.
    pub fn config(&self, mode: CommitMode, pool: usize, tuning: &TuningArgs) -> DbConfig {
        let pmem = self.pmem.clone().filter(|_| mode.uses_pmem());
        let mut config = DbConfig::new(&self.data_dir, mode, pmem);
        config.log.log_dir = self.log_dir.clone();
        config.buffer_pool_bytes = pool;
        tuning.apply(&mut config);
        config
    }

    /// "instance 2: " when there are several, "" otherwise.
    pub fn label(&self, of: usize) -> String {
        if of > 1 {
            format!("instance {}: ", self.number)
        } else {
            String::new()
        }
    }
}

impl DbArgs {
    /// Checks the options that do not depend on the files.
    pub fn validate(&self) -> CliResult<()> {
        if self.instances == 0 {
            return Err("--instances must be at least 1".into());
        }
        if self.commit.uses_pmem() && self.pmem.is_none() {
            return Err(format!(
                "commit mode {} keeps log bytes in PMEM: give its file with --pmem PATH (e.g. /dev/shm/tpcc.pmem to emulate PMEM)",
                self.commit
            )
            .into());
        }
        if let Some(pool) = self.buffer_pool {
            if pool.0 < 1 << 20 {
                return Err("--buffer-pool must be at least 1MiB".into());
            }
        }
        self.tuning.validate()
    }

    /// The databases named by the options.
    pub fn instances(&self) -> Vec<Instance> {
        let k = self.instances;
        (1..=k)
            .map(|number| {
                let sub = |dir: &Path| match k {
                    1 => dir.to_path_buf(),
                    _ => dir.join(format!("instance-{number}")),
                };
                let data_dir = sub(&self.db);
                let log_dir = self.log_dir.as_deref().map_or(data_dir.clone(), sub);
                let pmem = self.pmem.as_deref().map(|p| match k {
                    1 => p.to_path_buf(),
                    _ => numbered(p, number),
                });
                Instance {
                    number,
                    data_dir,
                    log_dir,
                    pmem,
                }
            })
            .collect()
    }
}

/// `/a/b.pmem` with `-n` before the extension: `/a/b-n.pmem`.
pub fn numbered(path: &Path, n: usize) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{n}"),
    };
    path.with_file_name(name)
}

/// The pool that holds a load of `warehouses`: what the kit's own tests use.
pub fn load_pool_bytes(warehouses: u32) -> usize {
    within_memory((64 << 20) + warehouses as usize * (192 << 20))
}

/// The pool that holds a loaded data file and its growth during a run.
pub fn run_pool_bytes(data_file_bytes: u64) -> usize {
    within_memory((data_file_bytes as usize).saturating_mul(3) / 2 + (64 << 20))
}

/// A default pool of `bytes`, at most half of this machine's memory: more data than that
/// is paged to the data file (the engine refuses a pool larger than the memory).
fn within_memory(bytes: usize) -> usize {
    let half = usize::try_from(tailstore_engine::physical_memory_bytes() / 2).unwrap_or(usize::MAX);
    if half == 0 {
        bytes
    } else {
        bytes.min(half)
    }
}

/// Opens an existing database; refuses (instead of creating one) when its data file is
/// missing.
pub fn open_existing(
    instance: &Instance,
    args: &DbArgs,
) -> CliResult<(Database, OpenReport, DbConfig)> {
    let (mode, pool) = (args.commit, args.buffer_pool);
    let dir = &instance.data_dir;
    if !dir.is_dir() {
        return Err(format!(
            "database directory {} does not exist (create a database with `tailstore tpcc load --db {} --warehouses W`)",
            dir.display(),
            dir.display()
        )
        .into());
    }
    let data = instance.data_file();
    let Ok(meta) = std::fs::metadata(&data) else {
        return Err(format!(
            "{} holds no database: {} does not exist (create one with `tailstore tpcc load --db {} --warehouses W`)",
            dir.display(),
            data.display(),
            dir.display()
        )
        .into());
    };
    let pool = pool.map_or_else(|| run_pool_bytes(meta.len()), |p| p.0);
    let config = instance.config(mode, pool, &args.tuning);
    let (db, report) = open_database(config.clone())?;
    Ok((db, report, config))
}

/// Opens the database `config` names; an error names its directory once.
pub fn open_database(config: DbConfig) -> CliResult<(Database, OpenReport)> {
    let dir = config.data_dir.clone();
    Database::open(config).map_err(|e| {
        let hint = if no_space(&e) {
            " (--log-ring and --doublewrite-size set the sizes of the PMEM files)"
        } else {
            ""
        };
        let why = match e {
            EngineError::Open(why) => why,
            other => other.to_string(),
        };
        format!("cannot open the database in {}: {why}{hint}", dir.display()).into()
    })
}

/// Whether `e` is a PMEM file its file system has no room for.
fn no_space(e: &EngineError) -> bool {
    use tailstore_log::LogError;
    use tailstore_media::MediaError;
    use tailstore_storage::StorageError;
    matches!(
        e,
        EngineError::Media(MediaError::NoSpace { .. })
            | EngineError::Log(LogError::Media(MediaError::NoSpace { .. }))
            | EngineError::Storage(StorageError::Media(MediaError::NoSpace { .. }))
    )
}

/// One line on what opening did: its time and the log recovery replayed.
pub fn describe_open(report: &OpenReport) -> String {
    let r = &report.recovery;
    format!(
        "opened in {:.2} s; recovery replayed {} log records ({}, LSN {}..{}) into {} pages",
        r.elapsed.as_secs_f64(),
        r.records,
        bytes(r.bytes),
        r.from_lsn,
        r.to_lsn,
        r.pages_to_redo
    )
}

/// A byte count for people: `812.3 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The size of a file, 0 if it does not exist.
pub fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// "data 120.3 MiB, log file 300.1 MiB, PMEM 20.0 MiB" for what exists of an instance.
pub fn describe_sizes(instance: &Instance, mode: CommitMode) -> String {
    let mut parts = vec![format!(
        "data file {}",
        bytes(file_len(&instance.data_file()))
    )];
    if mode.uses_log_file() {
        parts.push(format!(
            "log file {}",
            bytes(file_len(&instance.log_file()))
        ));
    }
    if let Some(pmem) = instance.pmem.as_deref().filter(|_| mode.uses_pmem()) {
        parts.push(format!("PMEM file {}", bytes(file_len(pmem))));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_paths() {
        let args = DbArgs {
            db: "/d".into(),
            commit: CommitMode::Buffer,
            log_dir: Some("/l".into()),
            pmem: Some("/dev/shm/t.pmem".into()),
            buffer_pool: None,
            instances: 2,
            tuning: TuningArgs::default(),
        };
        let inst = args.instances();
        assert_eq!(inst[1].data_dir, PathBuf::from("/d/instance-2"));
        assert_eq!(inst[1].log_dir, PathBuf::from("/l/instance-2"));
        assert_eq!(inst[1].pmem, Some(PathBuf::from("/dev/shm/t-2.pmem")));
        let one = DbArgs {
            instances: 1,
            log_dir: None,
            ..args
        };
        let inst = one.instances();
        assert_eq!(inst[0].log_dir, PathBuf::from("/d"));
        assert_eq!(inst[0].pmem, Some(PathBuf::from("/dev/shm/t.pmem")));
        assert_eq!(numbered(Path::new("x"), 3), PathBuf::from("x-3"));
        assert_eq!(bytes(1536), "1.5 KiB");
    }
}
