//! The keyspace over rows damaged behind valid checksums: one stored row's value bytes
//! changed (a count, a length, a deadline, an id, a kind, random bytes), or a byte of its
//! key, in a page whose checksum is computed again, as a bug's write or a crafted file would
//! leave it. A changed value leaves the page and the row well formed, so only the keyspace
//! can see that it is wrong (a changed key mostly fails the node's own check). Every
//! command on every key must get a reply (an error is fine) — never a panic, in any thread,
//! never a hang, and never an allocation as large as a damaged length asks for.
//!
//! The engine's own side of the same question is `engine/tests/damaged_pages.rs`.

mod support;

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use tailstore_crash::damage::{
    env_number, peak_memory_bytes, run_with_deadline, PanicLog, Rng, Unfinished,
};
use tailstore_engine::{Database, DbConfig, KeyRange};
use tailstore_kv::command::{lookup, Run};
use tailstore_kv::Keyspace;
use tailstore_log::CommitMode;
use tailstore_media::scaled_growth::ScaledGrowth;
use tailstore_media::sim::SimStorage;
use tailstore_media::Storage;
use tailstore_resp::Reply;
use tailstore_storage::{Page, ScanDirection, Value, PAGE_SIZE};

/// Cases; `DAMAGED_ROWS_CASES` runs more, `DAMAGED_ROWS_VERBOSE` prints each.
const CASES: u64 = 2000;

/// Longer than any case takes: a case still running then is taken to hang.
const HANG: Duration = Duration::from_secs(60);

/// The most memory the whole test may have held at once (`VmHWM`): a damaged length of
/// 2^40 obeyed would be far more, or abort the process.
const PEAK_MEMORY: u64 = 3 << 30;

const SIM_DIR: &str = "/db";
const SIM_DATA_FILE: &str = "/db/tailstore.db";

/// Page layout (`storage/src/page.rs`, `btree/node.rs`): the kind byte, the payload after a
/// 32-byte header; in a node's payload the slot count at 0 and 10-byte slots from 16, each
/// the cell's offset, the key's length and the value's length.
const KIND_AT: usize = 4;
const KIND_LEAF: u8 = 4;
const HEADER: usize = 32;

/// The keys filled, one or more of each kind, in database 0 (and `elsewhere` in 3).
const KEYS: &[&str] = &[
    "small", "big", "ttl", "due", "counter", "list", "hash", "set", "zset", "empty",
];

#[test]
fn damaged_rows_get_replies_never_a_panic_a_hang_or_a_huge_allocation() {
    let panics = PanicLog::install();
    let base = filled_database();
    let mut outcomes = Outcomes::default();
    for seed in 0..env_number("DAMAGED_ROWS_CASES").unwrap_or(CASES) {
        let (storage, damage) = damaged(&base, seed);
        let case = format!("seed {seed}: {damage}");
        let outcome = match run_with_deadline(HANG, move || exercise(&storage)) {
            Ok(outcome) => outcome,
            // The panic log has the message; it is reported below.
            Err(Unfinished::Panicked) => Outcome::Refused("panicked".into()),
            Err(Unfinished::Hung) => panic!("{case}: still running after {HANG:?}"),
        };
        if std::env::var_os("DAMAGED_ROWS_VERBOSE").is_some() {
            eprintln!("{case}\n  {}", outcome.describe());
        }
        let panicked = panics.take();
        assert!(
            panicked.is_empty(),
            "{case}: a panic: {}",
            panicked.join(" | ")
        );
        outcomes.count(&outcome);
    }
    eprintln!("{outcomes:?}");
    let peak = peak_memory_bytes();
    assert!(peak < PEAK_MEMORY, "the test held {peak} bytes at once");
    // The damage must reach the keyspace's decoding, not only the engine's.
    assert!(
        outcomes.served_reporting_damage > 0 && outcomes.refused > 0,
        "{outcomes:?}"
    );
}

/// Rows that contradict each other are reported as soon as the reads that found them still
/// hold, not retried as if they had straddled another commit: a string whose first part
/// claims more bytes than its parts hold. Retried, one GET took 1,000 attempts and about a
/// second, with the server's event loop waiting.
#[test]
fn a_stored_contradiction_is_reported_at_once_not_retried() {
    let storage = filled_database();
    let ks = open(&storage).expect("open");
    let db = ks.database();
    let parts = db.table("kv_parts").expect("kv_parts");
    let mut txn = db.begin();
    let mut first_parts = txn
        .scan(
            &parts,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan kv_parts")
        .into_iter()
        // (owner, field, part, data, total): part 0 of the long string.
        .filter(|row| row[2] == Value::Int(0) && row[4] == Value::Int(BIG as i64));
    let mut row = first_parts.next().expect("the first part of `big`");
    row[4] = Value::Int(2 * BIG as i64);
    txn.put(&parts, &row).expect("put");
    txn.commit().expect("commit");
    let rollbacks = db.stats().rollbacks;
    match run(&ks, 0, &["GET", "big"]) {
        Reply::Error(err) => {
            let err = String::from_utf8_lossy(err.as_ref()).into_owned();
            assert!(err.contains("corrupt") && err.contains("part"), "{err}");
        }
        other => panic!("GET of a damaged string answered {other:?}"),
    }
    let retries = db.stats().rollbacks - rollbacks;
    assert!(retries <= 1, "GET was retried {retries} times");
    close(ks);
}

enum Outcome {
    /// The database or the keyspace did not open.
    Refused(String),
    /// Every command got a reply; how many reported the damage (the engine's errors: corrupt
    /// or malformed data), and the first of those.
    Served {
        damage_reports: usize,
        first: Option<String>,
    },
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Outcome::Refused(why) => format!("refused to open: {why}"),
            Outcome::Served {
                damage_reports,
                first,
            } => format!(
                "served; {damage_reports} replies reported damage, the first: {}",
                first.as_deref().unwrap_or("none")
            ),
        }
    }
}

#[derive(Debug, Default)]
struct Outcomes {
    refused: u64,
    served_reporting_damage: u64,
    served_unaware: u64,
}

impl Outcomes {
    fn count(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Refused(_) => self.refused += 1,
            Outcome::Served {
                damage_reports: 0, ..
            } => self.served_unaware += 1,
            Outcome::Served { .. } => self.served_reporting_damage += 1,
        }
    }
}

/// `async`: durability is not the question here, and each sync copies a simulated file.
fn config() -> DbConfig {
    let mut config = DbConfig::new(SIM_DIR, CommitMode::Async, None);
    config.buffer_pool_bytes = 4 << 20;
    config.log.ring_bytes = 4 << 20;
    config.checkpoint_interval = None;
    config.checkpoint_log_bytes = u64::MAX;
    config
}

fn open(storage: &SimStorage) -> Result<Keyspace, String> {
    // Files pre-extended in small steps: the simulator copies whole files.
    let storage: Arc<dyn Storage> = Arc::new(ScaledGrowth(storage.clone()));
    let (db, _) = Database::open_with(storage, config()).map_err(|e| e.to_string())?;
    Keyspace::open(Arc::new(db), 16).map_err(|e| e.to_string())
}

/// Runs `args` as the server would, waiting for the commit; the reply.
fn run(ks: &Keyspace, db: u32, args: &[&str]) -> Reply {
    let Some(command) = lookup(args[0].as_bytes()) else {
        return Reply::error("ERR unknown command");
    };
    assert!(matches!(command.run, Run::Data(_)), "{}", args[0]);
    assert!(command.arity_ok(args.len()), "{args:?}");
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    let executed = ks.execute(db, command, &args);
    match executed.pending.map(|pending| pending.wait()) {
        Some(Err(err)) => Reply::error(format!("ERR commit: {err}")),
        _ => executed.reply,
    }
}

/// One key of each kind, with elements enough for several parts and rows, checkpointed and
/// closed.
/// The length of the string `big`: three part rows (a part holds ~5,300 bytes).
const BIG: usize = 12_000;

fn filled_database() -> SimStorage {
    let storage = SimStorage::new();
    let ks = open(&storage).expect("create");
    let big = "b".repeat(BIG);
    let members: Vec<String> = (0..30).map(|i| format!("m{i}")).collect();
    let mut list = vec!["RPUSH", "list"];
    list.extend(members.iter().map(String::as_str));
    let mut set = vec!["SADD", "set"];
    set.extend(members.iter().map(String::as_str));
    let mut hash = vec!["HSET", "hash"];
    let mut zset = vec!["ZADD", "zset"];
    let scores: Vec<String> = (0..30).map(|i| format!("{}.5", i * 7)).collect();
    for (member, score) in members.iter().zip(&scores) {
        hash.extend([member.as_str(), score.as_str()]);
        zset.extend([score.as_str(), member.as_str()]);
    }
    for args in [
        &["SET", "small", "hello"][..],
        &["SET", "big", &big],
        &["SET", "ttl", "soon", "EX", "100000"],
        // Due by the time the cases run: the active expiry removes it.
        &["SET", "due", "now", "PX", "1"],
        &["INCRBY", "counter", "41"],
        &["SET", "empty", ""],
        &list,
        &hash,
        &set,
        &zset,
    ] {
        let reply = run(&ks, 0, args);
        assert!(!matches!(reply, Reply::Error(_)), "{args:?}: {reply:?}");
    }
    run(&ks, 3, &["SET", "elsewhere", "x"]);
    close(ks);
    storage
}

fn close(ks: Keyspace) {
    let db = ks.into_database();
    if let Ok(db) = Arc::try_unwrap(db) {
        let _ = db.close();
    }
}

/// Opens the damaged database and runs commands of every family on every key, reads first,
/// then writes, then deletes.
fn exercise(storage: &SimStorage) -> Outcome {
    let ks = match open(storage) {
        Ok(ks) => ks,
        Err(err) => return Outcome::Refused(err),
    };
    let mut damage_reports = 0;
    let mut first = None;
    let mut replied = |reply: Reply| {
        if let Reply::Error(err) = reply {
            let err = String::from_utf8_lossy(err.as_ref()).into_owned();
            if err.starts_with("ERR tailstore engine") {
                damage_reports += 1;
                first.get_or_insert(err);
            }
        }
    };
    for args in [
        &["DBSIZE"][..],
        &["KEYS", "*"],
        &["SCAN", "0", "COUNT", "100"],
        &["RANDOMKEY"],
    ] {
        if lookup(args[0].as_bytes()).is_some_and(|c| matches!(c.run, Run::Data(_))) {
            replied(run(&ks, 0, args));
        }
    }
    for key in KEYS {
        for script in [READS, WRITES] {
            for args in script {
                let args: Vec<&str> = args
                    .iter()
                    .map(|&a| if a == "K" { *key } else { a })
                    .collect();
                replied(run(&ks, 0, &args));
            }
        }
    }
    replied(run(&ks, 3, &["GET", "elsewhere"]));
    // The server's background work over the same rows: the active expiry, and the lazy
    // free of the deleted collections' elements.
    let mut background = vec![ks.expire_due(100)];
    for key in KEYS {
        replied(run(&ks, 0, &["DEL", key]));
    }
    background.push(ks.free_garbage());
    for result in background {
        if let Err(err) = result {
            damage_reports += 1;
            first.get_or_insert(format!("background: {err}"));
        }
    }
    close(ks);
    Outcome::Served {
        damage_reports,
        first,
    }
}

/// Commands that read key `K`, of every kind (the wrong kind answers WRONGTYPE).
const READS: &[&[&str]] = &[
    &["TYPE", "K"],
    &["EXISTS", "K"],
    &["TTL", "K"],
    &["PTTL", "K"],
    &["PEXPIRETIME", "K"],
    &["GET", "K"],
    &["GETEX", "K"],
    &["STRLEN", "K"],
    &["GETRANGE", "K", "0", "-1"],
    &["GETRANGE", "K", "4000", "4100"],
    &["LLEN", "K"],
    &["LRANGE", "K", "0", "-1"],
    &["LINDEX", "K", "-3"],
    &["HLEN", "K"],
    &["HGETALL", "K"],
    &["HGET", "K", "m3"],
    &["SCARD", "K"],
    &["SMEMBERS", "K"],
    &["SISMEMBER", "K", "m4"],
    &["SRANDMEMBER", "K", "-5"],
    &["ZCARD", "K"],
    &["ZRANGE", "K", "0", "-1", "WITHSCORES"],
    &["ZRANGEBYSCORE", "K", "-inf", "+inf"],
    &["ZSCORE", "K", "m5"],
    &["ZRANK", "K", "m5"],
];

/// Commands that change key `K`.
const WRITES: &[&[&str]] = &[
    &["APPEND", "K", "tail"],
    &["SETRANGE", "K", "3", "xy"],
    &["INCR", "K"],
    &["RPUSH", "K", "new"],
    &["LSET", "K", "1", "v"],
    &["LPOP", "K"],
    &["LMOVE", "K", "K", "RIGHT", "LEFT"],
    &["RPOPLPUSH", "K", "other"],
    &["BLPOP", "none", "K", "0"],
    &["BRPOPLPUSH", "K", "other", "0"],
    &["BZPOPMIN", "K", "0"],
    &["LTRIM", "K", "0", "10"],
    &["LREM", "K", "0", "m7"],
    &["HSET", "K", "f", "v"],
    &["HDEL", "K", "m1"],
    &["HINCRBY", "K", "n", "1"],
    &["SADD", "K", "q"],
    &["SREM", "K", "m2"],
    &["SPOP", "K"],
    &["ZADD", "K", "5", "q"],
    &["ZINCRBY", "K", "1", "m2"],
    &["ZPOPMIN", "K"],
    &["ZREM", "K", "m9"],
    &["EXPIRE", "K", "1000"],
    &["PERSIST", "K"],
    &["GETEX", "K", "EX", "1000"],
    &["RENAME", "K", "moved"],
    &["RENAME", "moved", "K"],
    &["SET", "K", "fresh", "KEEPTTL"],
];

/// A copy of `base` with one row's value damaged as `seed` chooses, and what was done.
fn damaged(base: &SimStorage, seed: u64) -> (SimStorage, String) {
    let storage = base.process_crash();
    let mut file = storage.file_bytes(SIM_DATA_FILE).expect("data file");
    let leaves: Vec<usize> = (0..file.len() / PAGE_SIZE)
        .filter(|&p| file[p * PAGE_SIZE + KIND_AT] == KIND_LEAF)
        .collect();
    let mut rng = Rng::from_seed(seed);
    let page = leaves[rng.below(leaves.len() as u64) as usize];
    let bytes = &mut file[page * PAGE_SIZE..(page + 1) * PAGE_SIZE];
    let what = match cells_of_a_row(bytes, &mut rng) {
        // One case in five changes a key's byte (most such keys fail the node's check;
        // the others name another key, database or owner).
        Some((key, _)) if rng.below(5) == 0 && !key.is_empty() => {
            let at = key.start + rng.below(key.len() as u64) as usize;
            bytes[at] = rng.next_u64() as u8;
            format!(
                "page {page}: byte {} of a {}-byte key",
                at - key.start,
                key.len()
            )
        }
        Some((_, value)) => {
            format!("page {page}: {}", damage_value(&mut bytes[value], &mut rng))
        }
        None => format!("page {page}: an empty leaf, left alone"),
    };
    seal(bytes);
    storage.set_file_bytes(SIM_DATA_FILE, file);
    (storage, what)
}

/// The byte ranges, in the page, of the key and the value of a slot of the leaf in `page`
/// chosen by `rng`.
fn cells_of_a_row(page: &[u8], rng: &mut Rng) -> Option<(Range<usize>, Range<usize>)> {
    let payload = &page[HEADER..];
    let u16_at = |at: usize| u16::from_le_bytes([payload[at], payload[at + 1]]) as usize;
    let count = u16_at(0);
    if count == 0 {
        return None;
    }
    let slot = 16 + 10 * rng.below(count as u64) as usize;
    let key = HEADER + u16_at(slot);
    let value = key + u16_at(slot + 2);
    Some((key..value, value..value + u16_at(slot + 4)))
}

/// Damages a row's value (`storage/src/row.rs`: a format byte, a NULL bitmap, then the
/// fixed-width columns, 8 bytes each for the keyspace's integers, then the variable ones):
/// an integer column set to a boundary value, or random bytes.
fn damage_value(value: &mut [u8], rng: &mut Rng) -> String {
    // The keyspace's tables have at most 8 value columns: a one-byte bitmap.
    let fixed = 2;
    let columns = value.len().saturating_sub(fixed) / 8;
    if columns > 0 && rng.below(3) != 0 {
        let column = rng.below(columns as u64) as usize;
        let at = fixed + 8 * column;
        let n = rng.pick(&[0, 1, -1, 2, 7, 255, 1 << 31, 1 << 40, i64::MAX, i64::MIN]);
        value[at..at + 8].copy_from_slice(&n.to_le_bytes());
        return format!(
            "integer {column} of a {}-byte value set to {n}",
            value.len()
        );
    }
    if value.is_empty() {
        return "an empty value, left alone".into();
    }
    let n = 1 + rng.below(3);
    for _ in 0..n {
        let i = rng.below(value.len() as u64) as usize;
        value[i] = rng.next_u64() as u8;
    }
    format!("{n} random bytes in a {}-byte value", value.len())
}

fn seal(bytes: &mut [u8]) {
    let mut page = Page::zeroed();
    page.bytes_mut_for_read().copy_from_slice(bytes);
    page.seal();
    bytes.copy_from_slice(page.bytes());
}
