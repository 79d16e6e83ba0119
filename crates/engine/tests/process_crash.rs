//! Real process crashes of the database: a child process runs a transactional workload on
//! several threads and is killed with SIGKILL at a random instant; the parent recovers what it
//! left and checks every transaction the child acknowledged, and the invariants of all the
//! data, whether acknowledged or not.
//!
//! The test binary is its own child: [`child_entry`] does nothing unless
//! `TAILSTORE_CRASH_CHILD` is set; the parent runs `current_exe() --exact child_entry
//! --nocapture --test-threads=1` with the database's location in the environment. The child
//! opens the database with [`Database::open`] (real files: the data file and the log in a
//! temporary directory on disk, the PMEM file in a temporary directory in /dev/shm when it
//! exists), with a small
//! buffer pool (pages are evicted and written all the time) and a short checkpoint interval
//! (checkpoints run during the workload). It prints one line per event, each only after the
//! event is durable (one printer thread, flushed per line, fed through a small bounded
//! channel so that printed acks are recent ones):
//!
//! ```text
//! READY <records> <bytes> <µs>   the database is open (what its recovery replayed)
//! TABLE <name>                   create_table returned
//! LOAD <batch>                   the transaction inserting accounts of the batch committed
//! LOADED                         all accounts exist; the workload starts
//! ACK <thread> <seq>             the thread's transaction number <seq> committed
//! CKPT <n>                       the database's checkpoint counter reached <n>
//! STATS <checkpoints> <evictions> <pages written> <aborts>    every 10 ms
//! ```
//!
//! The workload, on 2–4 threads: bank transfers between [`ACCOUNTS`] accounts (the sum of
//! the balances never changes), each also inserting a row keyed by the transfer's id into
//! `transfers`; and inserts of 1–3 rows with unique ids into `items`, which has a secondary
//! index. What transaction `<seq>` of thread `<thread>` in run `<run>` does, and every value
//! it writes, is a function of those three numbers ([`work`]), so the parent knows the
//! exact content of every row the child may have written.
//!
//! After each kill the parent copies the database's files (the child is dead: they are what a
//! crash left) and opens the copy, which recovers it, then checks: [`Database::check`]; the
//! tables present are a prefix of those the child creates, including every acknowledged one;
//! accounts were loaded in whole batches, every acknowledged batch; every transfer and item
//! row is one the child could have written, byte for byte, and the items of one transaction
//! are all there or none; the index holds exactly the items; the balances are the initial
//! ones plus the effect of the transfers present, so they sum to the initial total; each
//! thread's transactions present are a prefix of those it ran (they become durable in
//! order), holding every acknowledged one (and the index finds each acknowledged item); the
//! earlier runs' transactions are exactly those found after their own kill. The next child
//! then recovers the original files itself and continues the workload on them, so recovery
//! runs on databases that recoveries (and the checkpoints after them) left, killed at any
//! point. Every third kill the parent recovers the database in place instead (and closes it
//! cleanly), so that the next child starts from that. A fresh database is started every
//! [`KILLS_PER_DATABASE`] kills, so the initial load is crashed too and the checks stay
//! cheap.
//!
//! Kills land early (after the start: during creation, recovery or the load), right after the
//! child printed a `CKPT` line, or most often 20–150 ms into the run. A child that does not
//! report a checkpoint within 10 s of opening fails the test: it is stuck (the `pmem-log`
//! region is small, so a checkpoint that cannot free it shows up here).
//!
//! `TAILSTORE_KILLS=<n>` sets the kills per durable mode (default 50), `TAILSTORE_CRASH_SEED`
//! the seed of the kill schedule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use tailstore_crash::{child_exit, env_var, CrashChild, Killed};
use tailstore_engine::{
    doublewrite_path, Database, DbConfig, EngineError, KeyRange, OpenReport, Table,
};
use tailstore_log::{CommitMode, KIB, MIB};
use tailstore_storage::{Column, ColumnType, IndexDef, ScanDirection, Schema, Value, PAGE_SIZE};

const MODE_ENV: &str = "TAILSTORE_CRASH_MODE";
const DIR_ENV: &str = "TAILSTORE_CRASH_DIR";
const PMEM_ENV: &str = "TAILSTORE_CRASH_PMEM";
const THREADS_ENV: &str = "TAILSTORE_CRASH_THREADS";
const RUN_ENV: &str = "TAILSTORE_CRASH_RUN";

/// Kills per durable mode unless `TAILSTORE_KILLS` says otherwise.
const DEFAULT_KILLS: usize = 50;
/// A fresh database is started after this many kills.
const KILLS_PER_DATABASE: usize = 10;

const ACCOUNTS: i64 = 500;
/// Accounts are loaded by transactions of this many.
const LOAD_BATCH: i64 = 50;
const BATCHES: i64 = ACCOUNTS / LOAD_BATCH;
const INITIAL_BALANCE: i64 = 1_000;
const TOTAL: i64 = ACCOUNTS * INITIAL_BALANCE;
/// Longest item payload.
const MAX_PAYLOAD: u32 = 1_600;
/// Enough for a transaction to get through any amount of conflicts.
const ATTEMPTS: usize = 1 << 30;

/// The tables in the order the child creates them.
const TABLES: [&str; 3] = ["accounts", "transfers", "items"];
const ITEMS_INDEX: &str = "by_tag";

/// The database of every process: small pool, frequent checkpoints that keep recent pages
/// dirty, small log regions (the `pmem-log` region fills within a second unless checkpoints
/// keep freeing it).
fn db_config(mode: CommitMode, dir: &Path, pmem: &Path) -> DbConfig {
    let mut c = DbConfig::new(dir, mode, mode.uses_pmem().then(|| pmem.to_path_buf()));
    c.log.block_bytes = 16 * KIB;
    c.log.ring_bytes = MIB;
    c.log.pmem_log_bytes = 2 * MIB;
    c.buffer_pool_bytes = 32 * PAGE_SIZE;
    c.checkpoint_interval = Some(Duration::from_millis(60));
    c.checkpoint_log_bytes = 512 * KIB as u64;
    // The checkpointer's checkpoints leave the pages of the last stretches dirty, so that
    // the kills also find redo starting before the last checkpoint.
    c.checkpoint_keep_bytes = 512 * KIB as u64;
    c
}

fn schema(table: &str) -> Schema {
    use ColumnType::{Bytes, Int64, Varchar};
    let (columns, indexes) = match table {
        "accounts" => (
            vec![
                Column::new("id", Int64),
                Column::new("owner", Varchar(24)),
                Column::new("balance", Int64),
            ],
            vec![],
        ),
        "transfers" => (
            vec![
                Column::new("id", Int64),
                Column::new("src", Int64),
                Column::new("dst", Int64),
                Column::new("amount", Int64),
            ],
            vec![],
        ),
        "items" => (
            vec![
                Column::new("id", Int64),
                Column::new("tag", Varchar(16)),
                Column::new("payload", Bytes(MAX_PAYLOAD)),
            ],
            vec![IndexDef::new(ITEMS_INDEX, vec![1], false)],
        ),
        other => panic!("no table {other}"),
    };
    Schema::new(columns, vec![0], indexes).expect("schema")
}

fn account_row(id: i64, balance: i64) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Text(format!("owner-{id}")),
        Value::Int(balance),
    ]
}

/// One transaction of the workload: run (child process), thread, and the thread's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Op {
    run: u64,
    thread: u64,
    seq: u64,
}

/// What a transaction does: a function of its [`Op`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    Transfer { src: i64, dst: i64, amount: i64 },
    Items(u64),
}

fn mix(mut x: u64) -> u64 {
    // splitmix64's finalizer
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn hash_op(op: Op) -> u64 {
    mix(mix(mix(op.run) ^ op.thread) ^ op.seq)
}

fn work(op: Op) -> Work {
    let h = hash_op(op);
    if h.is_multiple_of(2) {
        let src = ((h >> 8) % ACCOUNTS as u64) as i64;
        let dst = (src + 1 + ((h >> 24) % (ACCOUNTS as u64 - 1)) as i64) % ACCOUNTS;
        let amount = 1 + ((h >> 40) % 200) as i64;
        Work::Transfer { src, dst, amount }
    } else {
        Work::Items(1 + (h >> 8) % 3)
    }
}

/// Row ids: run (31 bits), thread (4), seq (26), row of the transaction (2).
fn pack(op: Op, j: u64) -> i64 {
    assert!(op.run < 1 << 31 && op.thread < 16 && op.seq < 1 << 26 && j < 4);
    ((op.run << 32) | (op.thread << 28) | (op.seq << 2) | j) as i64
}

fn unpack(id: i64) -> (Op, u64) {
    let id = id as u64;
    let op = Op {
        run: id >> 32,
        thread: (id >> 28) & 0xF,
        seq: (id >> 2) & ((1 << 26) - 1),
    };
    (op, id & 3)
}

/// Row `j` of an items transaction.
fn item_row(op: Op, j: u64) -> Vec<Value> {
    let h = mix(hash_op(op) ^ (j + 1));
    let mut rng = StdRng::seed_from_u64(h);
    let len = match rng.gen_range(0..100) {
        0..=4 => rng.gen_range(600..=MAX_PAYLOAD as usize),
        5..=29 => rng.gen_range(100..600),
        _ => rng.gen_range(0..100),
    };
    let mut payload = vec![0; len];
    rng.fill_bytes(&mut payload);
    vec![
        Value::Int(pack(op, j)),
        Value::Text(format!("t{:03}", h % 300)),
        Value::Bytes(payload),
    ]
}

fn transfer_row(op: Op, src: i64, dst: i64, amount: i64) -> Vec<Value> {
    vec![
        Value::Int(pack(op, 0)),
        Value::Int(src),
        Value::Int(dst),
        Value::Int(amount),
    ]
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("expected an integer, found {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The child.

/// The child process's entry point; an ordinary (empty) test when `TAILSTORE_CRASH_CHILD` is
/// not set.
#[test]
fn child_entry() {
    if tailstore_crash::is_child() {
        child_main();
    }
}

fn child_main() -> ! {
    let mode: CommitMode = env_var(MODE_ENV)
        .parse()
        .unwrap_or_else(|e| child_exit(2, e));
    let dir = PathBuf::from(env_var(DIR_ENV));
    let pmem = PathBuf::from(env_var(PMEM_ENV));
    let threads: u64 = env_var(THREADS_ENV).parse().expect("thread count");
    let run: u64 = env_var(RUN_ENV).parse().expect("run number");
    let (db, report) = Database::open(db_config(mode, &dir, &pmem))
        .unwrap_or_else(|e| child_exit(3, format!("open failed: {e}")));
    let db = Arc::new(db);

    let tx = tailstore_crash::line_printer();
    let say = |line: String| tx.send(line).expect("printer");
    let r = &report.recovery;
    say(format!(
        "READY {} {} {}",
        r.records,
        r.bytes,
        r.elapsed.as_micros()
    ));

    let fail = |what: &str, e: EngineError| -> ! { child_exit(4, format!("{what}: {e}")) };
    let tables: Vec<Table> = TABLES
        .iter()
        .map(|&name| match db.table(name) {
            Ok(table) => table,
            Err(EngineError::NoSuchTable(_)) => {
                let table = db
                    .create_table(name, &schema(name))
                    .unwrap_or_else(|e| fail("create_table", e));
                say(format!("TABLE {name}"));
                table
            }
            Err(e) => fail("table", e),
        })
        .collect();
    let [accounts, transfers, items] = <[Table; 3]>::try_from(tables).ok().expect("3 tables");

    // The load: one transaction per batch; a batch whose first account exists is complete.
    for batch in 0..BATCHES {
        let first = batch * LOAD_BATCH;
        let present = db
            .run(ATTEMPTS, |txn| txn.get(&accounts, &[Value::Int(first)]))
            .unwrap_or_else(|e| fail("get", e));
        if present.is_none() {
            db.run(ATTEMPTS, |txn| {
                for id in first..first + LOAD_BATCH {
                    txn.insert(&accounts, &account_row(id, INITIAL_BALANCE))?;
                }
                Ok(())
            })
            .unwrap_or_else(|e| fail("load", e));
            say(format!("LOAD {batch}"));
        }
    }
    say("LOADED".to_string());

    for thread in 0..threads {
        let db = Arc::clone(&db);
        let tx = tx.clone();
        let (accounts, transfers, items) = (accounts.clone(), transfers.clone(), items.clone());
        thread::spawn(move || {
            for seq in 0.. {
                let op = Op { run, thread, seq };
                let outcome = match work(op) {
                    Work::Transfer { src, dst, amount } => db.run(ATTEMPTS, |txn| {
                        let missing = || EngineError::RowNotFound("accounts".into());
                        let mut from = txn
                            .get(&accounts, &[Value::Int(src)])?
                            .ok_or_else(missing)?;
                        let mut to = txn
                            .get(&accounts, &[Value::Int(dst)])?
                            .ok_or_else(missing)?;
                        from[2] = Value::Int(int(&from[2]) - amount);
                        to[2] = Value::Int(int(&to[2]) + amount);
                        txn.update(&accounts, &from)?;
                        txn.update(&accounts, &to)?;
                        txn.insert(&transfers, &transfer_row(op, src, dst, amount))
                    }),
                    Work::Items(rows) => db.run(ATTEMPTS, |txn| {
                        for j in 0..rows {
                            txn.insert(&items, &item_row(op, j))?;
                        }
                        Ok(())
                    }),
                };
                match outcome {
                    Ok(()) => tx.send(format!("ACK {thread} {seq}")).expect("printer"),
                    Err(e) => child_exit(4, format!("{op:?} failed: {e}")),
                }
            }
        });
    }

    // Report checkpoints as they happen, so that the parent can kill right after one, and
    // now and then how busy the pool and the checkpointer are.
    let mut seen = db.stats().checkpoints;
    for tick in 1u64.. {
        thread::sleep(Duration::from_millis(1));
        let stats = db.stats();
        if stats.checkpoints != seen {
            seen = stats.checkpoints;
            say(format!("CKPT {seen}"));
        }
        if tick % 10 == 0 {
            say(format!(
                "STATS {} {} {} {}",
                stats.checkpoints,
                stats.pool.evictions,
                stats.pool.pages_written,
                stats.total_aborts()
            ));
        }
    }
    unreachable!()
}

// ---------------------------------------------------------------------------------------------
// The parent.

/// A database: the data file and the log in a temporary directory on disk, the PMEM file in
/// a temporary directory in /dev/shm when it exists (both removed on drop).
struct Db {
    mode: CommitMode,
    dir: tempfile::TempDir,
    /// The PMEM file's directory, unless it is `dir`.
    _shm: Option<tempfile::TempDir>,
    pmem: PathBuf,
}

impl Db {
    fn new(mode: CommitMode) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let shm = Path::new("/dev/shm");
        // A PMEM file is refused on a file system with less room than its size.
        let room = tailstore_media::pmem::scratch_dir(512 << 20) == shm;
        let shm = room.then(|| {
            tempfile::Builder::new()
                .prefix("tailstore-engine-crash-")
                .tempdir_in(shm)
                .expect("tempdir in /dev/shm")
        });
        let pmem = shm
            .as_ref()
            .map_or(dir.path(), |d| d.path())
            .join("log.pmem");
        Self {
            mode,
            dir,
            _shm: shm,
            pmem,
        }
    }

    /// A copy of the database's files, as they are now.
    fn copy(&self) -> Db {
        let copy = Db::new(self.mode);
        for entry in std::fs::read_dir(self.dir.path()).expect("read the database directory") {
            let entry = entry.expect("directory entry");
            if entry.file_type().expect("file type").is_file() {
                std::fs::copy(entry.path(), copy.dir.path().join(entry.file_name()))
                    .expect("copy a database file");
            }
        }
        if self.pmem.parent() != Some(self.dir.path()) {
            for (from, to) in [
                (self.pmem.clone(), copy.pmem.clone()),
                (doublewrite_path(&self.pmem), doublewrite_path(&copy.pmem)),
            ] {
                if from.exists() {
                    std::fs::copy(&from, &to).expect("copy a PMEM file");
                }
            }
        }
        copy
    }

    fn open(&self, what: &str) -> (Database, OpenReport) {
        Database::open(db_config(self.mode, self.dir.path(), &self.pmem))
            .unwrap_or_else(|e| panic!("{what}: open failed: {e}"))
    }
}

/// Kills the child if the parent panics while it runs.
/// When the parent kills the child.
#[derive(Clone, Copy, Debug)]
enum KillAfter {
    /// This long after starting it (while it creates, recovers or loads).
    Start(Duration),
    /// This long after it reported that the database is open.
    Ready(Duration),
    /// This long after it reported a checkpoint during the workload.
    Checkpoint(Duration),
}

/// What one child printed before it died.
#[derive(Default)]
struct ChildOutput {
    /// Records, bytes and µs its recovery took.
    ready: Option<(u64, u64, u64)>,
    tables: Vec<String>,
    batches: Vec<i64>,
    loaded: bool,
    acks: Vec<(u64, u64)>,
    checkpoints: usize,
    /// The last STATS line: checkpoints, evictions, pages written, aborts.
    stats: [u64; 4],
    stderr: String,
}

fn parse_output(lines: &[String], stderr: String) -> ChildOutput {
    let mut out = ChildOutput {
        stderr,
        ..ChildOutput::default()
    };
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> u64 {
            fields[i]
                .parse()
                .unwrap_or_else(|_| panic!("bad child line {line:?}"))
        };
        match fields.first() {
            Some(&"READY") => out.ready = Some((num(1), num(2), num(3))),
            Some(&"TABLE") => out.tables.push(fields[1].to_string()),
            Some(&"LOAD") => out.batches.push(num(1) as i64),
            Some(&"LOADED") => out.loaded = true,
            Some(&"ACK") => out.acks.push((num(1), num(2))),
            Some(&"CKPT") => out.checkpoints += 1,
            Some(&"STATS") => out.stats = [num(1), num(2), num(3), num(4)],
            _ => {} // the test harness's own lines
        }
    }
    out
}

/// Starts a child on `db` and kills it with SIGKILL as `kill` says.
fn crash_child(db: &Db, threads: u64, run: u64, kill: KillAfter) -> ChildOutput {
    let child = CrashChild::spawn(
        "child_entry",
        &[
            (MODE_ENV, db.mode.name().to_string()),
            (DIR_ENV, db.dir.path().display().to_string()),
            (PMEM_ENV, db.pmem.display().to_string()),
            (THREADS_ENV, threads.to_string()),
            (RUN_ENV, run.to_string()),
        ],
    );
    let mut never = None;
    match kill {
        KillAfter::Start(delay) => thread::sleep(delay.saturating_sub(child.elapsed())),
        KillAfter::Ready(delay) => {
            if child.wait_for_line("READY ", Duration::from_secs(60)) {
                thread::sleep(delay);
            } else {
                never = Some("READY");
            }
        }
        KillAfter::Checkpoint(delay) => {
            if !child.wait_for_line("READY ", Duration::from_secs(60)) {
                never = Some("READY");
            } else if child.wait_for_line("CKPT ", Duration::from_secs(10)) {
                thread::sleep(delay);
            } else {
                never = Some("a checkpoint");
            }
        }
    }
    let Killed { lines, stderr } = child.kill(db.mode.name());
    if let Some(what) = never {
        let tail = &lines[lines.len().saturating_sub(20)..];
        panic!(
            "{}: the child never reported {what} (stuck?); the end of its stdout:\n{}\n\
             stderr:\n{stderr}",
            db.mode,
            tail.join("\n")
        );
    }
    parse_output(&lines, stderr)
}

/// What the parent knows the database holds: what it found after the previous kill.
#[derive(Default)]
struct Model {
    tables: usize,
    batches: BTreeSet<i64>,
    /// Transactions present per (run, thread) of the workload (all of them, from 0).
    ops: BTreeMap<(u64, u64), u64>,
}

/// What the checks after one kill saw.
struct Verified {
    acks: usize,
    commits: usize,
    recovery: Duration,
    recovery_bytes: u64,
}

fn scan_all(db: &Database, table: &Table) -> Vec<Vec<Value>> {
    let mut txn = db.begin();
    let rows = txn
        .scan(
            table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .unwrap_or_else(|e| panic!("scan {}: {e}", table.name()));
    txn.rollback();
    rows
}

/// Opens (recovers) `copy` and checks it against `model`, the acks in `out` of run `run`
/// (with `threads` threads), and the invariants; returns the new model.
fn verify(
    copy: &Db,
    model: &Model,
    out: &ChildOutput,
    run: u64,
    threads: u64,
    what: &str,
) -> (Model, Verified) {
    let durable = copy.mode.is_durable();
    let (db, report) = copy.open(what);
    let entries = db
        .check()
        .unwrap_or_else(|e| panic!("{what}: check failed: {e}"));

    // Tables: a prefix of TABLES, with every one seen before and every acknowledged one.
    let names = db.table_names();
    let present = TABLES.iter().take_while(|n| names.iter().any(|m| m == *n));
    let present = present.count();
    assert_eq!(
        present,
        names.len(),
        "{what}: tables {names:?} are not a prefix of {TABLES:?}"
    );
    assert!(
        present >= model.tables,
        "{what}: tables were lost: {names:?}"
    );
    if durable {
        for name in &out.tables {
            assert!(
                names.contains(name),
                "{what}: acknowledged table {name} is lost"
            );
        }
    }
    let mut new = Model {
        tables: present,
        ..Model::default()
    };
    let table = |name: &str| db.table(name).ok();
    let (accounts, transfers, items) = (table(TABLES[0]), table(TABLES[1]), table(TABLES[2]));

    // Accounts: whole batches, every acknowledged one.
    let account_rows = accounts.as_ref().map_or(Vec::new(), |t| scan_all(&db, t));
    let mut balances: BTreeMap<i64, i64> = BTreeMap::new();
    for row in &account_rows {
        let (id, balance) = (int(&row[0]), int(&row[2]));
        assert!((0..ACCOUNTS).contains(&id), "{what}: account {id}");
        assert_eq!(
            row[1],
            account_row(id, 0)[1],
            "{what}: owner of account {id}"
        );
        balances.insert(id, balance);
    }
    for batch in 0..BATCHES {
        let ids = batch * LOAD_BATCH..(batch + 1) * LOAD_BATCH;
        let found = ids.clone().filter(|id| balances.contains_key(id)).count();
        assert!(
            found == 0 || found == LOAD_BATCH as usize,
            "{what}: batch {batch} is partly loaded ({found} accounts)"
        );
        if found > 0 {
            new.batches.insert(batch);
        }
    }
    assert!(
        new.batches.is_superset(&model.batches),
        "{what}: loaded accounts were lost"
    );
    if durable {
        for batch in &out.batches {
            assert!(
                new.batches.contains(batch),
                "{what}: acknowledged load batch {batch} is lost"
            );
        }
    }
    let loaded = new.batches.len() == BATCHES as usize;
    assert!(
        loaded || !durable || !out.loaded,
        "{what}: LOADED but not loaded"
    );

    // Transfers: each the one its id says; their effect is in the balances.
    let mut ops: BTreeMap<(u64, u64), BTreeSet<u64>> = BTreeMap::new();
    let transfer_rows = transfers.as_ref().map_or(Vec::new(), |t| scan_all(&db, t));
    let mut deltas: BTreeMap<i64, i64> = BTreeMap::new();
    for row in &transfer_rows {
        let (op, j) = unpack(int(&row[0]));
        let Work::Transfer { src, dst, amount } = work(op) else {
            panic!("{what}: transfer row {row:?} of {op:?}, which inserts items");
        };
        assert_eq!(j, 0, "{what}: transfer row {row:?}");
        assert_eq!(
            row,
            &transfer_row(op, src, dst, amount),
            "{what}: transfer row of {op:?}"
        );
        *deltas.entry(src).or_default() -= amount;
        *deltas.entry(dst).or_default() += amount;
        ops.entry((op.run, op.thread)).or_default().insert(op.seq);
    }

    // Items: each the one its id says, all rows of a transaction or none.
    let item_rows = items.as_ref().map_or(Vec::new(), |t| scan_all(&db, t));
    let mut item_ops: BTreeMap<Op, u64> = BTreeMap::new();
    for row in &item_rows {
        let (op, j) = unpack(int(&row[0]));
        let Work::Items(rows) = work(op) else {
            panic!("{what}: item row {:?} of {op:?}, a transfer", row[0]);
        };
        assert!(
            j < rows,
            "{what}: item row {j} of {op:?}, which inserts {rows}"
        );
        assert!(
            row == &item_row(op, j),
            "{what}: item row {j} of {op:?} differs"
        );
        *item_ops.entry(op).or_default() += 1;
    }
    for (op, found) in &item_ops {
        let Work::Items(rows) = work(*op) else {
            unreachable!()
        };
        assert_eq!(
            *found, rows,
            "{what}: {op:?} inserted {rows} items; {found} are there"
        );
        ops.entry((op.run, op.thread)).or_default().insert(op.seq);
    }

    // The index holds exactly the items.
    if let Some(items) = &items {
        let mut txn = db.begin();
        let indexed = txn
            .scan_index(
                items,
                ITEMS_INDEX,
                &KeyRange::all(),
                ScanDirection::Ascending,
                usize::MAX,
            )
            .unwrap_or_else(|e| panic!("{what}: index scan: {e}"));
        txn.rollback();
        let mut indexed: Vec<i64> = indexed.iter().map(|r| int(&r[0])).collect();
        indexed.sort_unstable();
        let ids: Vec<i64> = item_rows.iter().map(|r| int(&r[0])).collect();
        assert!(
            indexed == ids,
            "{what}: the index does not hold exactly the items"
        );
    }
    let rows = account_rows.len() + transfer_rows.len() + 2 * item_rows.len();
    assert_eq!(entries, rows as u64, "{what}: check() counts other entries");

    // Balances: the initial ones plus the transfers present.
    if loaded {
        for (id, balance) in &balances {
            let want = INITIAL_BALANCE + deltas.get(id).copied().unwrap_or(0);
            assert_eq!(*balance, want, "{what}: balance of account {id}");
        }
        let sum: i64 = balances.values().sum();
        assert_eq!(sum, TOTAL, "{what}: the sum of the balances");
    } else {
        assert!(
            ops.is_empty(),
            "{what}: the workload ran before the accounts were loaded"
        );
    }

    // Each thread's transactions present: a prefix of those it ran; earlier runs unchanged.
    for (&(r, thread), seqs) in &ops {
        let n = seqs.len() as u64;
        assert_eq!(
            seqs.last().copied(),
            Some(n - 1),
            "{what}: run {r} thread {thread} has holes: {seqs:?}"
        );
        assert!(r <= run, "{what}: rows of run {r}, which never ran");
        if r == run {
            assert!(thread < threads, "{what}: rows of thread {thread}");
        } else {
            assert_eq!(
                model.ops.get(&(r, thread)),
                Some(&n),
                "{what}: run {r} thread {thread} changed since it was checked"
            );
        }
        new.ops.insert((r, thread), n);
    }
    for (&(r, thread), n) in &model.ops {
        assert_eq!(
            new.ops.get(&(r, thread)),
            Some(n),
            "{what}: transactions of run {r} thread {thread} were lost"
        );
    }

    // Every acknowledged transaction is there; the index finds each acknowledged item.
    let mut acks = 0;
    if durable {
        let mut txn = db.begin();
        for &(thread, seq) in &out.acks {
            let op = Op { run, thread, seq };
            let n = new.ops.get(&(run, thread)).copied().unwrap_or(0);
            assert!(
                seq < n,
                "{what}: acknowledged {op:?} ({:?}) is lost; {n} of the thread's \
                 transactions are there",
                work(op)
            );
            if let Work::Items(rows) = work(op) {
                let items = items.as_ref().expect("items");
                for j in 0..rows {
                    let row = item_row(op, j);
                    let prefix = KeyRange::prefix(vec![row[1].clone(), row[0].clone()]);
                    let found = txn
                        .scan_index(items, ITEMS_INDEX, &prefix, ScanDirection::Ascending, 2)
                        .unwrap_or_else(|e| panic!("{what}: index lookup: {e}"));
                    assert!(
                        found == [row],
                        "{what}: the index does not find item {j} of acknowledged {op:?}"
                    );
                }
            }
            acks += 1;
        }
        txn.rollback();
    }
    db.close()
        .unwrap_or_else(|e| panic!("{what}: close failed: {e}"));
    let commits = new.ops.values().sum::<u64>() as usize;
    let verified = Verified {
        acks,
        commits,
        recovery: report.recovery.elapsed,
        recovery_bytes: report.recovery.bytes,
    };
    (new, verified)
}

fn kills() -> usize {
    tailstore_crash::kills(DEFAULT_KILLS)
}

fn kill_loop(mode: CommitMode, kills: usize) {
    let seed = std::env::var("TAILSTORE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0xDB_C4A5_u64);
    let mut rng = StdRng::seed_from_u64(seed ^ mode as u64);
    let began = Instant::now();
    let mut db = Db::new(mode);
    let mut model = Model::default();
    let (mut databases, mut in_place) = (1, 0);
    let (mut acks, mut max_commits, mut early, mut in_load, mut after_ckpt) = (0, 0, 0, 0, 0);
    let (mut max_recovery, mut max_bytes, mut max_child_recovery) =
        (Duration::ZERO, 0, Duration::ZERO);
    // Summed over the children: checkpoints, evictions, pages written, aborts.
    let mut stats = [0; 4];
    for kill in 0..kills {
        let nth = kill % KILLS_PER_DATABASE;
        if kill > 0 && nth == 0 {
            db = Db::new(mode);
            model = Model::default();
            databases += 1;
        }
        let run = kill as u64 + 1;
        let threads = rng.gen_range(2..=4u64);
        let ms = Duration::from_millis;
        let when = match nth {
            0 => KillAfter::Start(ms(rng.gen_range(0..60))),
            1 if model.batches.len() < BATCHES as usize => {
                KillAfter::Ready(ms(rng.gen_range(0..10)))
            }
            6 => KillAfter::Start(ms(rng.gen_range(0..40))),
            4 | 8 => KillAfter::Checkpoint(ms(rng.gen_range(0..3))),
            _ => KillAfter::Ready(ms(rng.gen_range(20..=150))),
        };
        let what = format!("{mode}, kill {kill} (seed {seed:#x}, {threads} threads, {when:?})");
        let out = crash_child(&db, threads, run, when);
        assert!(
            !out.stderr.contains("crash child:") && !out.stderr.contains("panicked"),
            "{what}: the child failed:\n{}",
            out.stderr
        );
        early += usize::from(out.ready.is_none());
        in_load += usize::from(!out.loaded);
        after_ckpt += usize::from(matches!(when, KillAfter::Checkpoint(_)));
        for (sum, n) in stats.iter_mut().zip(out.stats) {
            *sum += n;
        }
        if let Some((_, _, micros)) = out.ready {
            max_child_recovery = max_child_recovery.max(Duration::from_micros(micros));
        }
        // Usually the checks recover a copy and the next child recovers the crash itself;
        // every third time they recover the database in place, and the next child starts
        // from what the parent's recovery and clean shutdown left.
        let verified;
        if kill % 3 == 2 {
            (model, verified) = verify(&db, &model, &out, run, threads, &what);
            in_place += 1;
        } else {
            let copy = db.copy();
            (model, verified) = verify(&copy, &model, &out, run, threads, &what);
        }
        acks += verified.acks;
        max_commits = max_commits.max(verified.commits);
        max_recovery = max_recovery.max(verified.recovery);
        max_bytes = max_bytes.max(verified.recovery_bytes);
    }
    eprintln!(
        "{mode}: {kills} kills on {databases} database(s) ({in_place} recovered in place) in \
         {:.1?}: {acks} acknowledged \
         commits verified, up to {max_commits} workload commits recovered; {early} kills \
         before the database was open, {in_load} before the load completed, {after_ckpt} \
         right after a checkpoint; recovery: at most {max_recovery:.1?} and {max_bytes} log \
         bytes (the children's: at most {max_child_recovery:.1?}); the children ran {} \
         checkpoints, evicted {} pages, wrote {} pages and retried {} aborted transactions",
        began.elapsed(),
        stats[0],
        stats[1],
        stats[2],
        stats[3]
    );
}

#[test]
fn sigkill_fsync() {
    kill_loop(CommitMode::Fsync, kills());
}

#[test]
fn sigkill_buffer() {
    kill_loop(CommitMode::Buffer, kills());
}

#[test]
fn sigkill_pmem_log() {
    kill_loop(CommitMode::PmemLog, kills());
}

/// `async` promises nothing about acknowledged commits, but what it recovers must still be
/// whole transactions, each thread's in order, with every invariant intact.
#[test]
fn sigkill_async() {
    kill_loop(CommitMode::Async, (kills() / 5).max(1));
}
