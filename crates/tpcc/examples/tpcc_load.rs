//! Times a load: `cargo run --release -p tailstore-tpcc --example tpcc_load -- [WAREHOUSES]
//! [THREADS] [MODE] [POOL_MIB] [load-only]`, into a temporary directory under /var/tmp; then
//! (unless `load-only`) checks all twelve consistency conditions, runs 1,000 transactions on
//! each of THREADS terminals and checks conditions 1–10 and 12.

use std::time::Instant;

use tailstore_engine::{Database, DbConfig};
use tailstore_log::CommitMode;
use tailstore_tpcc::check::{check_conditions, AFTER_LOAD};
use tailstore_tpcc::random::seeded;
use tailstore_tpcc::{load_with, LoadConfig, Outcome, Retries, Terminal, TxnReport, Workload};

/// Transactions per terminal.
const TRANSACTIONS: usize = 1000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_string());
    let warehouses: u32 = arg(0, "1").parse()?;
    let threads: usize = arg(1, "2").parse()?;
    let mode: CommitMode = arg(2, "async").parse()?;
    let pool_mib: usize = arg(3, "2048").parse()?;
    let dir = tempfile::Builder::new()
        .prefix("tpcc-load-")
        .tempdir_in("/var/tmp")?;
    let mut config = DbConfig::new(dir.path(), mode, None);
    config.buffer_pool_bytes = pool_mib << 20;
    if let Some(mib) = std::env::var("CHECKPOINT_MIB")
        .ok()
        .and_then(|m| m.parse::<u64>().ok())
    {
        config.checkpoint_log_bytes = mib << 20;
    }
    let (db, _) = Database::open(config)?;
    let load = LoadConfig {
        progress: true,
        seed: 1,
        batch_rows: std::env::var("BATCH")
            .ok()
            .and_then(|b| b.parse().ok())
            .unwrap_or(1000),
        ..LoadConfig::new(warehouses, threads)
    };
    let report = load_with(&db, &load)?;
    println!(
        "loaded {} warehouses ({} rows) in {:.2?} (checkpoint {:.2?}) with {threads} threads, {mode}",
        report.warehouses, report.rows, report.elapsed, report.checkpoint
    );
    let stats = db.stats();
    println!(
        "data file {} MiB, commits {}, aborts {}, checkpoints {} ({:.2?}), log {} MiB, \
         ring-full waits {} ({:.2?})",
        db.data_bytes() >> 20,
        stats.commits,
        stats.total_aborts(),
        stats.checkpoints,
        stats.checkpoint_time,
        stats.log.log_bytes >> 20,
        stats.log.ring_full_waits,
        std::time::Duration::from_nanos(stats.log.ring_full_wait_ns),
    );
    if arg(4, "") == "load-only" {
        return Ok(());
    }
    let began = Instant::now();
    let checked = check_conditions(&db, &AFTER_LOAD)?;
    println!(
        "conditions {:?} hold ({:.2?})",
        checked.conditions,
        began.elapsed()
    );
    run_mix(&db, warehouses, threads)?;
    Ok(())
}

fn run_mix(
    db: &Database,
    warehouses: u32,
    threads: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let workload = Workload::open(db, &mut seeded(2))?;
    let began = Instant::now();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let workload = &workload;
                s.spawn(move || -> tailstore_tpcc::Result<Vec<TxnReport>> {
                    let w_id = t as u32 % warehouses + 1;
                    let d_id = (t % 10) as u32 + 1;
                    let mut terminal = Terminal::new(workload, w_id, d_id, seeded(10 + t as u64))?;
                    (0..TRANSACTIONS).map(|_| terminal.run_next()).collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect::<Vec<_>>()
    });
    let elapsed = began.elapsed();
    let mut reports = Vec::new();
    for result in results {
        reports.extend(result.map_err(|_| "terminal panicked")??);
    }
    let mut retries = Retries::default();
    for report in &reports {
        retries.add(&report.retries);
    }
    let rolled_back = reports
        .iter()
        .filter(|r| r.outcome == Outcome::RolledBack)
        .count();
    println!(
        "{} transactions in {elapsed:.2?} ({:.0}/s), {rolled_back} rolled back; retries: {:?}, \
         stale reads {}",
        reports.len(),
        reports.len() as f64 / elapsed.as_secs_f64(),
        retries.by_cause().collect::<Vec<_>>(),
        retries.stale_reads()
    );
    let checked = tailstore_tpcc::check(db, true)?;
    println!("after the run: conditions {:?} hold", checked.conditions);
    Ok(())
}
