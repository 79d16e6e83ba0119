//! A loaded database in a temporary directory.

#![allow(dead_code)]

use tailstore_engine::{Database, DbConfig};
use tailstore_log::CommitMode;
use tailstore_tpcc::{load_with, LoadConfig, LoadReport};

pub struct Loaded {
    // Field order: the database closes before its directory is removed.
    pub db: Database,
    pub report: LoadReport,
    _dir: tempfile::TempDir,
}

/// `warehouses` loaded on `threads` threads with `seed`, commit mode async.
pub fn loaded(warehouses: u32, threads: usize, seed: u64) -> Loaded {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut config = DbConfig::new(dir.path(), CommitMode::Async, None);
    // Big enough to hold the data: the load then never waits for evictions.
    config.buffer_pool_bytes =
        (64 << 20) + (usize::try_from(warehouses).unwrap_or(1) * (192 << 20));
    let (db, _) = Database::open(config).expect("open");
    let load = LoadConfig {
        seed,
        ..LoadConfig::new(warehouses, threads)
    };
    let report = load_with(&db, &load).expect("load");
    Loaded {
        db,
        report,
        _dir: dir,
    }
}
