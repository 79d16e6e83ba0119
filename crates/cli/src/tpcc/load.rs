//! `tailstore tpcc load`: a new database with W warehouses.

use std::path::Path;
use std::time::Instant;

use clap::Args;
use tailstore_engine::Database;
use tailstore_tpcc::load::expected_rows;
use tailstore_tpcc::{load_with, LoadConfig};

use super::{bytes, describe_sizes, load_pool_bytes, DbArgs, Instance, TuningArgs};
use crate::report::{filesystem_of, group};
use crate::CliResult;

#[derive(Args, Debug)]
pub struct LoadArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Warehouses to load (about 100 MiB of data each).
    #[arg(long, value_name = "W")]
    pub warehouses: u32,
    /// Loading threads. Default: the number of cores.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Seed of the load's random choices (the same seed loads the same rows). Default: from
    /// the clock.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Rows inserted per transaction.
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    pub batch_rows: usize,
}

/// What loading one instance produced.
pub struct Loaded {
    pub rows: u64,
    pub seconds: f64,
    pub close_seconds: f64,
}

pub fn run(args: &LoadArgs) -> CliResult<()> {
    args.db.validate()?;
    if args.warehouses == 0 {
        return Err("--warehouses must be at least 1".into());
    }
    if args.threads == Some(0) || args.batch_rows == 0 {
        return Err("--threads and --batch-rows must be at least 1".into());
    }
    let instances = args.db.instances();
    // Every instance is checked before any is created: a refusal leaves nothing behind.
    for instance in &instances {
        check_new(instance, args.db.commit)?;
        check_room(instance, args.warehouses)?;
    }
    let threads = args.threads.unwrap_or_else(cores);
    let pool = args
        .db
        .buffer_pool
        .map_or_else(|| load_pool_bytes(args.warehouses), |p| p.0);
    let k = instances.len();
    println!(
        "tailstore tpcc load: {} warehouse(s) (~{} rows) into {} database(s), commit {}, {threads} thread(s), {} rows per transaction, buffer pool {}",
        args.warehouses,
        group(expected_rows(args.warehouses)),
        k,
        args.db.commit,
        args.batch_rows,
        bytes(pool as u64)
    );
    let seed = args.seed.unwrap_or_else(clock_seed);
    for instance in &instances {
        let config = LoadConfig {
            progress: true,
            seed: seed.wrapping_add(instance.number as u64 - 1),
            batch_rows: args.batch_rows,
            ..LoadConfig::new(args.warehouses, threads)
        };
        let loaded = load_instance(instance, args.db.commit, pool, &args.db.tuning, &config)?;
        let label = instance.label(k);
        println!(
            "{label}loaded {} rows in {:.1} s ({} rows/s), closed (checkpoint) in {:.2} s; {}",
            group(loaded.rows),
            loaded.seconds,
            group((loaded.rows as f64 / loaded.seconds) as u64),
            loaded.close_seconds,
            describe_sizes(instance, args.db.commit)
        );
        println!(
            "{label}data in {} ({}), seed {}",
            instance.data_dir.display(),
            filesystem_of(&instance.data_dir),
            config.seed
        );
    }
    Ok(())
}

/// The least a warehouse takes in the data file (its rows alone are about 85 MB by the
/// specification's sizes): a load that cannot fit is refused before it starts, rather
/// than stopped by a full disk hours in.
const LEAST_BYTES_PER_WAREHOUSE: u64 = 64 << 20;

/// Refuses a load whose data cannot fit the free space where the instance's data goes.
fn check_room(instance: &Instance, warehouses: u32) -> CliResult<()> {
    let dir = instance
        .data_dir
        .ancestors()
        .find(|d| d.is_dir())
        .unwrap_or(&instance.data_dir);
    let Ok(stats) = rustix::fs::statvfs(dir) else {
        return Ok(()); // what cannot be asked is found out by the load
    };
    let free = stats.f_bavail.saturating_mul(stats.f_frsize);
    let needed = u64::from(warehouses).saturating_mul(LEAST_BYTES_PER_WAREHOUSE);
    if needed > free {
        return Err(format!(
            "{} warehouse(s) need at least {} and {} has {} free",
            warehouses,
            bytes(needed),
            dir.display(),
            bytes(free)
        )
        .into());
    }
    Ok(())
}

/// Creates the instance's directories; refuses when a database, log or PMEM file is there.
pub fn check_new(instance: &Instance, mode: tailstore_log::CommitMode) -> CliResult<()> {
    let dir = &instance.data_dir;
    if dir.exists() {
        if !dir.is_dir() {
            return Err(format!("{} exists and is not a directory", dir.display()).into());
        }
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .count();
        if entries > 0 {
            return Err(format!(
                "{} is not empty: tpcc load creates a new database (remove the directory or name another one)",
                dir.display()
            )
            .into());
        }
    }
    if mode.uses_log_file() && instance.log_file().exists() {
        return Err(format!(
            "log file {} already exists: it belongs to another database (remove it or use another --log-dir)",
            instance.log_file().display()
        )
        .into());
    }
    if let Some(pmem) = instance.pmem.as_deref().filter(|_| mode.uses_pmem()) {
        if pmem.exists() {
            return Err(format!(
                "PMEM file {} already exists: it belongs to another database (remove it or name another --pmem)",
                pmem.display()
            )
            .into());
        }
        if let Some(parent) = pmem.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !parent.is_dir() {
                return Err(format!("PMEM directory {} does not exist", parent.display()).into());
            }
        }
    }
    Ok(())
}

/// Creates the database of `instance`, loads it and closes it.
pub fn load_instance(
    instance: &Instance,
    mode: tailstore_log::CommitMode,
    pool: usize,
    tuning: &TuningArgs,
    config: &LoadConfig,
) -> CliResult<Loaded> {
    create_dir(&instance.data_dir)?;
    create_dir(&instance.log_dir)?;
    let began = Instant::now();
    let (db, _) = Database::open(instance.config(mode, pool, tuning)).map_err(|e| {
        format!(
            "cannot create a database in {}: {e}",
            instance.data_dir.display()
        )
    })?;
    let report = load_with(&db, config)?;
    let seconds = began.elapsed().as_secs_f64();
    let closing = Instant::now();
    db.close()?;
    Ok(Loaded {
        rows: report.rows,
        seconds,
        close_seconds: closing.elapsed().as_secs_f64(),
    })
}

fn create_dir(dir: &Path) -> CliResult<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create directory {}: {e}", dir.display()).into())
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64)
}
