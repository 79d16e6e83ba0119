//! Helpers shared by the engine's integration tests: the `items` table and its in-memory
//! model, a checker that compares a database (rows and every index) with the model, and
//! databases on the simulated storage (`SimStorage`) or in a temporary directory.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tailstore_engine::{AbortCause, Database, DbConfig, EngineError, KeyRange, OpenReport, Table};
use tailstore_log::{CommitMode, KIB, MIB};
use tailstore_media::sim::SimStorage;
use tailstore_storage::{Column, ColumnType, IndexDef, ScanDirection, Schema, Value, PAGE_SIZE};

use tailstore_media::scaled_growth::ScaledGrowth;

/// Where the simulated databases live.
pub const SIM_DIR: &str = "/db";
pub const SIM_PMEM: &str = "/pmem/db.pmem";
/// The data file of a simulated database.
pub const SIM_DATA_FILE: &str = "/db/tailstore.db";

/// A row of the `items` table: `(id INT64 PRIMARY KEY, grp INT64, val INT64, note VARCHAR)`,
/// indexed by `grp` (`by_grp`, not unique) and by `val` (`by_val`, unique).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub id: i64,
    pub grp: i64,
    pub val: i64,
    pub note: Option<String>,
}

impl Item {
    pub fn new(id: i64, grp: i64, val: i64, note_len: usize) -> Item {
        let note = (note_len > 0).then(|| {
            let c = char::from(b'a' + (id.rem_euclid(26)) as u8);
            std::iter::repeat_n(c, note_len).collect()
        });
        Item { id, grp, val, note }
    }

    pub fn values(&self) -> Vec<Value> {
        vec![
            Value::Int(self.id),
            Value::Int(self.grp),
            Value::Int(self.val),
            match &self.note {
                Some(n) => Value::Text(n.clone()),
                None => Value::Null,
            },
        ]
    }

    pub fn from_values(values: &[Value]) -> Item {
        let int = |v: &Value| match v {
            Value::Int(i) => *i,
            other => panic!("expected an integer, found {other:?}"),
        };
        assert_eq!(values.len(), 4, "a row of items has 4 columns: {values:?}");
        Item {
            id: int(&values[0]),
            grp: int(&values[1]),
            val: int(&values[2]),
            note: match &values[3] {
                Value::Null => None,
                Value::Text(t) => Some(t.clone()),
                other => panic!("expected text or NULL, found {other:?}"),
            },
        }
    }
}

/// Longest note (VARCHAR length).
pub const MAX_NOTE: usize = 600;

pub fn items_schema() -> Schema {
    Schema::new(
        vec![
            Column::new("id", ColumnType::Int64),
            Column::new("grp", ColumnType::Int64),
            Column::new("val", ColumnType::Int64),
            Column::nullable("note", ColumnType::Varchar(MAX_NOTE as u32)),
        ],
        vec![0],
        vec![
            IndexDef::new("by_grp", vec![1], false),
            IndexDef::new("by_val", vec![2], true),
        ],
    )
    .expect("valid schema")
}

/// Trees of `items` (rows, `by_grp`, `by_val`): entries per row in `Database::check`.
pub const ITEM_TREES: u64 = 3;

/// The committed contents of `items`, by id.
pub type Model = BTreeMap<i64, Item>;

pub fn key(id: i64) -> Vec<Value> {
    vec![Value::Int(id)]
}

/// Checks that `table` holds exactly `model`: full scans in both directions, every index
/// (each entry names its row and each row has its entries), point reads of present and
/// absent keys, and the structure of every tree (`Database::check`; with one table, also its
/// entry count). `what` goes into every failure message.
pub fn verify(db: &Database, table: &Table, model: &Model, what: &str) {
    try_verify(db, table, model).unwrap_or_else(|e| panic!("{what}: {e}"));
}

pub fn try_verify(db: &Database, table: &Table, model: &Model) -> Result<(), String> {
    let err = |e: EngineError| e.to_string();
    let expected: Vec<Item> = model.values().cloned().collect();
    let mut txn = db.begin();
    let rows: Vec<Item> = txn
        .scan(
            table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .map_err(err)?
        .iter()
        .map(|r| Item::from_values(r))
        .collect();
    if rows != expected {
        return Err(describe_difference("ascending scan", &rows, &expected));
    }
    let mut desc: Vec<Item> = txn
        .scan(
            table,
            &KeyRange::all(),
            ScanDirection::Descending,
            usize::MAX,
        )
        .map_err(err)?
        .iter()
        .map(|r| Item::from_values(r))
        .collect();
    desc.reverse();
    if desc != expected {
        return Err(describe_difference("descending scan", &desc, &expected));
    }
    // Each index, in its own order.
    let mut by_grp = expected.clone();
    by_grp.sort_by_key(|i| (i.grp, i.id));
    let mut by_val = expected.clone();
    by_val.sort_by_key(|i| (i.val, i.id));
    for (index, want) in [("by_grp", &by_grp), ("by_val", &by_val)] {
        let got: Vec<Item> = txn
            .scan_index(
                table,
                index,
                &KeyRange::all(),
                ScanDirection::Ascending,
                usize::MAX,
            )
            .map_err(err)?
            .iter()
            .map(|r| Item::from_values(r))
            .collect();
        if &got != want {
            return Err(describe_difference(index, &got, want));
        }
    }
    // Point reads: every present key, and the gaps around them.
    for item in &expected {
        let got = txn.get(table, &key(item.id)).map_err(err)?;
        if got.as_deref().map(Item::from_values).as_ref() != Some(item) {
            return Err(format!("get({}) = {got:?}, expected {item:?}", item.id));
        }
        for gap in [item.id - 1, item.id + 1] {
            if !model.contains_key(&gap) {
                if let Some(row) = txn.get(table, &key(gap)).map_err(err)? {
                    return Err(format!("get({gap}) = {row:?}, expected no row"));
                }
            }
        }
    }
    txn.commit().map_err(err)?;
    let entries = db.check().map_err(err)?;
    // `check` counts the entries of every table.
    if db.table_names().len() == 1 && entries != ITEM_TREES * model.len() as u64 {
        return Err(format!(
            "the trees hold {entries} entries, expected {} for {} rows",
            ITEM_TREES * model.len() as u64,
            model.len()
        ));
    }
    Ok(())
}

fn describe_difference(what: &str, got: &[Item], want: &[Item]) -> String {
    let first = got
        .iter()
        .zip(want)
        .position(|(g, w)| g != w)
        .unwrap_or(got.len().min(want.len()));
    format!(
        "{what}: {} rows, expected {}; first difference at position {first}: got {:?}, expected {:?}",
        got.len(),
        want.len(),
        got.get(first),
        want.get(first)
    )
}

/// Rows of `items` in `range` of ids (inclusive bounds), the model's answer to a scan.
pub fn model_scan(
    model: &Model,
    lower: Bound<i64>,
    upper: Bound<i64>,
    direction: ScanDirection,
    limit: usize,
) -> Vec<Item> {
    let range = model.range((lower, upper)).map(|(_, v)| v.clone());
    match direction {
        ScanDirection::Ascending => range.take(limit).collect(),
        ScanDirection::Descending => range.rev().take(limit).collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// Simulated databases.

/// A configuration for a database on the simulated storage: small log buffers (so that the
/// simulator's copies stay cheap), a pool of `pool_pages` frames, no periodic checkpoints.
pub fn sim_config(mode: CommitMode, pool_pages: usize) -> DbConfig {
    let mut config = DbConfig::new(SIM_DIR, mode, Some(PathBuf::from(SIM_PMEM)));
    config.log.block_bytes = 4 * KIB;
    // Records hold full-page images: a ring of 512 KiB takes records of up to 256 KiB, and
    // transactions writing up to 64 KiB of rows (`Database::max_commit_bytes`; the crash
    // workloads write records of up to about 70 KiB).
    config.log.ring_bytes = 512 * KIB;
    // Small: the simulator copies the whole region at every crash, and the log's recovery
    // wipes its free part at every open (see also `checkpoint_if_log_grew`).
    config.log.pmem_log_bytes = 512 * KIB;
    // The runs' logs are a few MB: release the log file's head in small steps, so that
    // checkpoints move its start (and crashes strike while they do).
    config.log.release_step_bytes = 32 * KIB as u64;
    config.buffer_pool_bytes = pool_pages * PAGE_SIZE;
    // Few slots: the simulator copies every region at every crash, and slots reused often
    // exercise the syncs that reuse needs.
    config.doublewrite_slots = 8;
    config.checkpoint_interval = None;
    // Checkpoints only when the test asks, except that `pmem-log` must free its region.
    config.checkpoint_log_bytes = match mode {
        CommitMode::PmemLog => 128 * KIB as u64,
        _ => u64::MAX,
    };
    config
}

/// Log bytes between the checkpoints the tests take themselves in `pmem-log` mode.
pub const PMEM_CHECKPOINT_BYTES: u64 = 128 << 10;

/// In `pmem-log` mode, checkpoints when the log grew by [`PMEM_CHECKPOINT_BYTES`] since
/// `*since` (an LSN, updated). That mode frees its small simulated region only at
/// checkpoints; the engine checkpoints by itself when the region runs low, but these
/// checkpoints at known points keep runs of the tests alike (and the region mostly empty,
/// which makes the simulator's copies at crashes cheap).
pub fn checkpoint_if_log_grew(db: &Database, since: &mut u64) -> tailstore_engine::Result<()> {
    if db.commit_mode() != CommitMode::PmemLog {
        return Ok(());
    }
    let now = db.log().appended_lsn();
    if now.saturating_sub(*since) >= PMEM_CHECKPOINT_BYTES {
        // The checkpointer's kind: the same as `checkpoint` unless the test's configuration
        // keeps recent pages dirty.
        db.checkpoint_keeping_recent()?;
        *since = db.log().appended_lsn();
    }
    Ok(())
}

/// Opens (creating or recovering) the database on `storage`.
/// A new `fsync` database on simulated storage (a pool of 256 pages) with table `items`
/// holding `items`, committed: the starting point of the two-transaction scenarios.
pub fn items_database(items: &[Item]) -> (SimStorage, Database, Table) {
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &sim_config(CommitMode::Fsync, 256)).expect("open");
    let table = db.create_table("items", &items_schema()).expect("create");
    let mut txn = db.begin();
    for item in items {
        txn.insert(&table, &item.values()).expect("insert");
    }
    txn.commit().expect("setup commit");
    (storage, db, table)
}

pub fn open_sim(
    storage: &SimStorage,
    config: &DbConfig,
) -> tailstore_engine::Result<(Database, OpenReport)> {
    Database::open_with(Arc::new(ScaledGrowth(storage.clone())), config.clone())
}

/// How a simulated machine goes down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// The process dies: everything written to the OS (or stored to PMEM) survives.
    Process,
    /// The power goes: only what was synced (or persisted) survives, plus a seeded random
    /// subset of the rest.
    PowerCut(u64),
}

/// What a restart after `crash` finds on `storage` (the running database is not disturbed).
pub fn image(storage: &SimStorage, crash: Crash) -> SimStorage {
    match crash {
        Crash::Process => storage.process_crash(),
        Crash::PowerCut(seed) => storage.power_cut(seed),
    }
}

/// Takes the restart image, then kills the medium and drops `db` (whose shutdown would
/// otherwise keep writing to the old storage).
pub fn crash_and_drop(storage: &SimStorage, db: Database, crash: Crash) -> SimStorage {
    let after = image(storage, crash);
    storage.crash_after(0);
    drop(db);
    after
}

// ---------------------------------------------------------------------------------------------
// Databases in a temporary directory.

/// A data directory in a temporary directory and, for the PMEM modes, a PMEM file in
/// /dev/shm when it exists (else in the temporary directory), removed on drop.
pub struct TempDb {
    pub dir: tempfile::TempDir,
    pub pmem: PathBuf,
}

impl TempDb {
    pub fn new(what: &str) -> TempDb {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = tempfile::tempdir().expect("temporary directory");
        let name = format!(
            "tailstore-engine-test-{}-{what}-{}.pmem",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let pmem = tailstore_crash::pmem_path(dir.path(), &name);
        TempDb { dir, pmem }
    }

    pub fn config(&self, mode: CommitMode) -> DbConfig {
        let mut config = DbConfig::new(self.dir.path(), mode, Some(self.pmem.clone()));
        config.log.ring_bytes = 4 * MIB;
        config.log.pmem_log_bytes = 32 * MIB;
        config.checkpoint_log_bytes = 8 * MIB as u64;
        config
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        tailstore_engine::remove_pmem_files(&self.pmem);
    }
}

/// SplitMix64: independent seeds from a base seed and an index.
pub fn mix(seed: u64, index: u64) -> u64 {
    let mut z = seed
        .wrapping_add(index.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Asserts that `result` is an abort with `cause`, retryable.
#[track_caller]
pub fn assert_aborted(result: tailstore_engine::Result<()>, cause: AbortCause) {
    match result {
        Err(err @ EngineError::Aborted { cause: found }) => {
            assert_eq!(found, cause, "aborted for the wrong reason: {err}");
            assert!(err.is_retryable(), "an abort must be retryable");
        }
        other => panic!("expected an abort ({cause}), got {other:?}"),
    }
}
