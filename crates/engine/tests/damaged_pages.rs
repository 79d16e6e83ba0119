//! Damage behind a valid checksum: pages of the data file, the checkpoint record in the meta
//! pages, and log records that redo applies, each passing its checksum but saying something
//! wrong (bit rot under a checksum computed again, a buggy writer, a file from someone else). Checksums cannot catch it; the
//! structure checks must. The engine may refuse to open, report a page as corrupt or stop
//! after the error; it must never panic, in any thread, and never hang.
//!
//! Each case damages one copy of one database, in one of several ways chosen from its seed
//! (random bytes, boundary values in the fields a node's header and slots hold, another
//! page's payload, another kind, an LSN past the log, fields of the checkpoint record and of
//! the catalog, page ids and lengths of a logged op), opens it, and reads and writes everything through the engine: a structure
//! check, scans of every tree both ways, point reads, a transaction of inserts, updates and
//! deletes, a checkpoint and a close. Two databases are damaged: one closed cleanly (the
//! damage is met by reads) and one whose process crashed after commits past the last
//! checkpoint (met by redo first).
//!
//! A second test damages what only the PMEM modes keep (`buffer`, `pmem-log`) in databases
//! whose process crashed with commits still only in the PMEM ring: a record of the ring (its
//! length, its LSN or its payload, with its CRC computed again) and a copy in the
//! double-write area (its page id, another page's payload, its kind, its LSN, its write
//! number, with the page's checksum and the slot's computed again), the page in place torn
//! in most cases so that the open restores the damaged copy, and the headers beside them
//! (the ring's capacity, block size and start word; the area's slot count, page size and
//! database id).

mod support;

use std::ops::Range;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use support::*;
use tailstore_crash::damage::{env_number, run_with_deadline, PanicLog, Rng, Unfinished};
use tailstore_engine::{doublewrite_path, Database, KeyRange};
use tailstore_log::format::{encode_start_word, LogFileHeader, PmemHeader, LOG_START_LSN, MAX_LSN};
use tailstore_log::{record, record_size, CommitMode};
use tailstore_media::sim::SimStorage;
use tailstore_storage::page::HEADER_SIZE;
use tailstore_storage::{Page, ScanDirection, PAGE_SIZE};

/// Cases per database; each seed picks its page and its kind of damage. The environment's
/// `DAMAGED_PAGES_CASES` runs more.
const CASES: u64 = 800;

/// Longer than any case takes (a few hundred milliseconds in a debug build): a case still
/// running then is taken to hang.
const HANG: Duration = Duration::from_secs(60);

/// Pool frames: small enough that the scans evict, so damaged pages are also read again.
const POOL_PAGES: usize = 48;

/// Rows of `items` in the damaged databases; ids `0..ROWS`.
const ROWS: i64 = 400;

/// The mode of the first test's databases.
const MODE: CommitMode = CommitMode::Fsync;
/// The log file of the simulated databases (in `fsync` mode, the whole log).
const SIM_LOG_FILE: &str = "/db/tailstore.log";

/// Meta pages: two slots of four pages (engine `meta.rs`).
const META_PAGES: u64 = 8;
const HEADER: usize = 32;
const KIND_AT: usize = 4;
const LSN_AT: usize = 16;
const KIND_META: u8 = 2;
const KIND_INNER: u8 = 3;
/// Byte offsets of the checkpoint record's fields in the first meta page's payload.
const META_SEQ_AT: usize = 16;
const META_LSN_AT: usize = 24;
const META_PAGE_COUNT_AT: usize = 32;
const META_CATALOG_LEN_AT: usize = 40;
const META_CATALOG_CRC_AT: usize = 44;
const META_CATALOG_AT: usize = 56;

/// Cases per database of the PMEM modes' test; `DAMAGED_PMEM_CASES` runs more.
const PMEM_CASES: u64 = 150;

#[test]
fn damaged_pages_with_valid_checksums_never_panic_or_hang() {
    let (_alone, panics) = panic_log();
    let bases = [
        ("closed cleanly", closed_database()),
        ("crashed after commits", crashed_database()),
    ];
    let mut outcomes = Outcomes::default();
    for (what, base) in &bases {
        for seed in first_case()..cases() {
            let (storage, damage) = damaged(base, seed);
            let case = format!("{what}, seed {seed}: {damage}");
            outcomes.count(run_case(&case, MODE, storage, panics));
        }
    }
    eprintln!("{outcomes:?}");
    // The damage must reach the checks, not only bytes nobody reads again.
    assert!(
        outcomes.refused_open > 0 && outcomes.errors_after_open > 0,
        "{outcomes:?}"
    );
}

/// The PMEM modes' structures, damaged behind valid checksums in databases whose process
/// crashed with commits only in the ring: a record of the ring, a copy in the double-write
/// area.
#[test]
fn damaged_pmem_ring_and_doublewrite_copies_never_panic_or_hang() {
    let (_alone, panics) = panic_log();
    let mut outcomes = Outcomes::default();
    for mode in [CommitMode::Buffer, CommitMode::PmemLog] {
        let base = crashed_with_commits_in_the_ring(mode);
        for seed in first_case()..pmem_cases() {
            let (storage, damage) = damaged_pmem(&base, seed);
            let case = format!("{mode}, crashed with commits in the ring, seed {seed}: {damage}");
            outcomes.count(run_case(&case, mode, storage, panics));
        }
    }
    eprintln!("{outcomes:?}");
    assert!(
        outcomes.refused_open > 0 && outcomes.errors_after_open > 0,
        "{outcomes:?}"
    );
}

/// The process's panic log, and this test's turn: the tests of this file run one at a time,
/// so that a panic is reported by the test whose case caused it.
fn panic_log() -> (MutexGuard<'static, ()>, &'static PanicLog) {
    static TURN: Mutex<()> = Mutex::new(());
    static LOG: OnceLock<PanicLog> = OnceLock::new();
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let log = LOG.get_or_init(PanicLog::install);
    log.take();
    (turn, log)
}

/// Runs one case on a database of `mode` with a deadline; fails on a hang, a panic in any
/// thread, or a meta page of another kind afterwards.
fn run_case(case: &str, mode: CommitMode, storage: SimStorage, panics: &PanicLog) -> Outcome {
    if verbose() {
        eprintln!("{case}");
    }
    let meta_before = meta_page_kinds(&storage);
    let run = storage.clone();
    let outcome = match run_with_deadline(HANG, move || exercise(&run, mode)) {
        Ok(outcome) => outcome,
        // The panic log has the message; it is reported below.
        Err(Unfinished::Panicked) => Outcome::ErrorAfterOpen("panicked".into()),
        Err(Unfinished::Hung) => panic!("{case}: still running after {HANG:?}"),
    };
    assert_eq!(
        meta_page_kinds(&storage),
        meta_before,
        "{case}: a meta page was overwritten with another kind of page"
    );
    if verbose() {
        match &outcome {
            Outcome::RefusedOpen(err) => eprintln!("  refused to open: {err}"),
            Outcome::ErrorAfterOpen(err) => eprintln!("  error after the open: {err}"),
            Outcome::NoError => eprintln!("  no error"),
        }
    }
    let panicked = panics.take();
    assert!(
        panicked.is_empty(),
        "{case}: the engine panicked: {}",
        panicked.join(" | ")
    );
    outcome
}

fn cases() -> u64 {
    env_number("DAMAGED_PAGES_CASES").unwrap_or(CASES)
}

fn pmem_cases() -> u64 {
    env_number("DAMAGED_PMEM_CASES").unwrap_or(PMEM_CASES)
}

/// `DAMAGED_PAGES_FIRST` skips the seeds below it (to run again the case a failure names).
fn first_case() -> u64 {
    env_number("DAMAGED_PAGES_FIRST").unwrap_or(0)
}

/// `DAMAGED_PAGES_VERBOSE` prints each case and what it came to.
fn verbose() -> bool {
    std::env::var_os("DAMAGED_PAGES_VERBOSE").is_some()
}

/// What one case came to (each is fine; only panics and hangs are failures), with the
/// first error.
enum Outcome {
    RefusedOpen(String),
    ErrorAfterOpen(String),
    NoError,
}

#[derive(Debug, Default)]
struct Outcomes {
    refused_open: u64,
    errors_after_open: u64,
    no_error: u64,
}

impl Outcomes {
    fn count(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::RefusedOpen(_) => self.refused_open += 1,
            Outcome::ErrorAfterOpen(_) => self.errors_after_open += 1,
            Outcome::NoError => self.no_error += 1,
        }
    }
}

/// Opens the database on `storage` and uses all of it; errors are expected, results are not
/// compared (damage behind a valid checksum can change a value undetectably).
fn exercise(storage: &SimStorage, mode: CommitMode) -> Outcome {
    let db = match open_sim(storage, &sim_config(mode, POOL_PAGES)) {
        Ok((db, _)) => db,
        Err(err) => return Outcome::RefusedOpen(err.to_string()),
    };
    let mut results = vec![db.check().map(|_| ())];
    for name in db.table_names() {
        results.push(read_everything(&db, &name));
    }
    results.push(write_some(&db));
    results.push(db.checkpoint());
    results.push(db.close());
    match results.into_iter().find_map(Result::err) {
        Some(err) => Outcome::ErrorAfterOpen(err.to_string()),
        None => Outcome::NoError,
    }
}

fn read_everything(db: &Database, name: &str) -> tailstore_engine::Result<()> {
    let table = db.table(name)?;
    let mut txn = db.begin();
    for direction in [ScanDirection::Ascending, ScanDirection::Descending] {
        txn.scan(&table, &KeyRange::all(), direction, usize::MAX)?;
        for index in table.schema().indexes() {
            txn.scan_index(&table, &index.name, &KeyRange::all(), direction, usize::MAX)?;
        }
    }
    for id in (-1..=ROWS).step_by(7) {
        txn.get(&table, &key(id))?;
    }
    txn.commit()
}

/// Inserts, updates and deletes in `items`, enough to split and merge leaves.
fn write_some(db: &Database) -> tailstore_engine::Result<()> {
    let table = db.table("items")?;
    let mut txn = db.begin();
    for id in ROWS..ROWS + 40 {
        txn.put(&table, &Item::new(id, id % 5, 1_000_000 + id, 300).values())?;
    }
    for id in (0..ROWS).step_by(3) {
        txn.delete(&table, &key(id))?;
    }
    for id in (1..ROWS).step_by(11) {
        txn.put(&table, &Item::new(id, 9, 2_000_000 + id, 20).values())?;
    }
    txn.commit()
}

// ---------------------------------------------------------------------------------------------
// The databases damaged.

fn fill(db: &Database, ids: Range<i64>) {
    let table = db.table("items").expect("items");
    for chunk in ids.collect::<Vec<_>>().chunks(50) {
        let mut txn = db.begin();
        for &id in chunk {
            let note = (id as usize * 37) % 500;
            txn.put(&table, &Item::new(id, id % 7, id, note).values())
                .expect("put");
        }
        txn.commit().expect("commit");
    }
}

/// A new database on simulated storage with `items` and a second table of its schema.
fn two_tables() -> (SimStorage, Database) {
    two_tables_with(&sim_config(MODE, 1024))
}

fn two_tables_with(config: &tailstore_engine::DbConfig) -> (SimStorage, Database) {
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, config).expect("create");
    for name in ["items", "other"] {
        db.create_table(name, &items_schema())
            .expect("create a table");
    }
    (storage, db)
}

/// `items` with [`ROWS`] rows over several levels of leaves and inner nodes, and a second
/// table, checkpointed and closed.
fn closed_database() -> SimStorage {
    let (storage, db) = two_tables();
    fill(&db, 0..ROWS);
    db.close().expect("close");
    storage
}

/// As [`closed_database`], but half the rows are committed after the checkpoint and the
/// process then crashes: the open replays them onto the damaged file.
fn crashed_database() -> SimStorage {
    let (storage, db) = two_tables();
    fill(&db, 0..ROWS / 2);
    db.checkpoint().expect("checkpoint");
    fill(&db, ROWS / 2..ROWS);
    crash_and_drop(&storage, db, Crash::Process)
}

/// A copy of `base` with damage chosen by `seed`, and what the damage was.
fn damaged(base: &SimStorage, seed: u64) -> (SimStorage, String) {
    let storage = image(base, Crash::Process);
    let mut rng = Rng::from_seed(seed);
    if rng.below(4) == 0 {
        if let Some(what) = damage_log_record(&storage, &mut rng) {
            return (storage, what);
        }
    }
    let mut file = storage.file_bytes(SIM_DATA_FILE).expect("data file");
    let pages = (file.len() / PAGE_SIZE) as u64;
    let what = if rng.below(6) == 0 {
        damage_checkpoint_record(&mut file, &mut rng)
    } else {
        let page = META_PAGES + rng.below(pages - META_PAGES);
        let what = damage_page(&mut file, pages, page, &mut rng);
        format!("page {page}: {what}")
    };
    storage.set_file_bytes(SIM_DATA_FILE, file);
    (storage, what)
}

/// Damages one data page's bytes in a way chosen by `rng` and seals it again.
fn damage_page(file: &mut [u8], pages: u64, page: u64, rng: &mut Rng) -> String {
    let at = page as usize * PAGE_SIZE;
    let payload = HEADER..PAGE_SIZE;
    let choice = rng.below(6);
    if choice == 5 {
        // Another page's payload (and kind) under this page's id.
        let other = META_PAGES + rng.below(pages - META_PAGES);
        let from = other as usize * PAGE_SIZE;
        let copy = file[from..from + PAGE_SIZE].to_vec();
        file[at + KIND_AT] = copy[KIND_AT];
        file[at + HEADER..at + PAGE_SIZE].copy_from_slice(&copy[HEADER..]);
        seal(&mut file[at..at + PAGE_SIZE]);
        return format!("the payload of page {other}");
    }
    let bytes = &mut file[at..at + PAGE_SIZE];
    let what = match choice {
        0 => {
            let n = 1 + rng.below(8);
            for _ in 0..n {
                let i = payload.start + rng.below(payload.len() as u64) as usize;
                bytes[i] = rng.next_u64() as u8;
            }
            format!("{n} random bytes")
        }
        1 => {
            // Node headers and slot arrays: small integers at the payload's start.
            let i = HEADER + 2 * rng.below(64) as usize;
            let value = rng.pick(&[0u16, 1, 2, 0x7FFF, 0xFFFF, PAGE_SIZE as u16 - 1, 4096]);
            bytes[i..i + 2].copy_from_slice(&value.to_le_bytes());
            format!("u16 {value:#x} at byte {i}")
        }
        2 => {
            // A child id of an inner node (anywhere in other pages): itself, another
            // page of the file (an ancestor, a sibling, another tree's), a meta page,
            // past the end.
            let other = META_PAGES + rng.below(pages - META_PAGES);
            let value = rng.pick(&[
                0,
                META_PAGES - 1,
                page,
                META_PAGES,
                other,
                pages,
                1 << 40,
                u64::MAX,
            ]);
            let i = child_id_at(bytes, rng)
                .unwrap_or_else(|| HEADER + rng.below((PAGE_SIZE - HEADER - 8) as u64) as usize);
            bytes[i..i + 8].copy_from_slice(&value.to_le_bytes());
            format!("u64 {value} at byte {i}")
        }
        3 => {
            let lsn = rng.pick(&[u64::MAX, 1 << 40, 1]);
            bytes[LSN_AT..LSN_AT + 8].copy_from_slice(&lsn.to_le_bytes());
            format!("LSN {lsn}")
        }
        _ => {
            let kind = 1 + rng.below(4) as u8;
            bytes[KIND_AT] = kind;
            format!("kind {kind}")
        }
    };
    seal(bytes);
    what
}

/// Where a child id of the inner node in `bytes` lies (one chosen by `rng`); `None` if the
/// page is not an inner node. Layout: `tailstore_storage::btree::node` (payload: `count`
/// u16 at 0, the rightmost child at 8, slots of 10 bytes from 16 with the cell's offset and
/// key length first; a cell is the key, then the child id).
fn child_id_at(bytes: &[u8], rng: &mut Rng) -> Option<usize> {
    if bytes[KIND_AT] != KIND_INNER {
        return None;
    }
    let payload = &bytes[HEADER..];
    let u16_at = |at: usize| u16::from_le_bytes([payload[at], payload[at + 1]]) as usize;
    let count = u16_at(0);
    let position = rng.below(count as u64 + 1) as usize;
    if position == count {
        return Some(HEADER + 8);
    }
    let slot = 16 + 10 * position;
    Some(HEADER + u16_at(slot) + u16_at(slot + 2))
}

/// Damages a field of the checkpoint record in both meta slots (so that the open cannot
/// fall back on the older one) and seals their pages again.
fn damage_checkpoint_record(file: &mut [u8], rng: &mut Rng) -> String {
    let choice = rng.below(3);
    let value = rng.next_u64();
    let digit = rng.next_u64();
    let mut what = Vec::new();
    for slot in 0..2u64 {
        let first = (slot * 4) as usize * PAGE_SIZE;
        let page = &mut file[first..first + PAGE_SIZE];
        if page[KIND_AT] != KIND_META {
            continue;
        }
        let record = &mut page[HEADER..];
        let done = match choice {
            0 => {
                let count = [0, 1, 8, 9, u64::MAX, 1 << 40, value % 64][(value % 7) as usize];
                record[META_PAGE_COUNT_AT..META_PAGE_COUNT_AT + 8]
                    .copy_from_slice(&count.to_le_bytes());
                format!("checkpoint record: page count {count}")
            }
            1 => {
                let lsn = [0, 1, u64::MAX, 1 << 40, value % 100_000][(value % 5) as usize];
                record[META_LSN_AT..META_LSN_AT + 8].copy_from_slice(&lsn.to_le_bytes());
                format!("checkpoint record: checkpoint LSN {lsn}")
            }
            _ => damage_catalog(record, digit),
        };
        seal(page);
        what.push(format!("slot {slot}: {done}"));
    }
    what.join("; ")
}

/// Changes one digit of the catalog's JSON (table ids, root pages, column types and sizes,
/// key positions) and stores the catalog's checksum again. Only the part of the catalog in
/// the slot's first page is changed.
fn damage_catalog(record: &mut [u8], pick: u64) -> String {
    let len = u32::from_le_bytes(
        record[META_CATALOG_LEN_AT..META_CATALOG_LEN_AT + 4]
            .try_into()
            .unwrap_or([0; 4]),
    ) as usize;
    let end = META_CATALOG_AT + len;
    if end > record.len() {
        return "catalog: longer than one page, left alone".into();
    }
    let digits: Vec<usize> = (META_CATALOG_AT..end)
        .filter(|&i| record[i].is_ascii_digit())
        .collect();
    if digits.is_empty() {
        return "catalog: no digit to change".into();
    }
    let i = digits[(pick % digits.len() as u64) as usize];
    let old = record[i];
    record[i] = b'0' + ((old - b'0' + 1 + (pick >> 32) as u8 % 9) % 10);
    let context = String::from_utf8_lossy(
        &record[i.saturating_sub(12).max(META_CATALOG_AT)..(i + 4).min(end)],
    )
    .into_owned();
    let crc = crc32c::crc32c(&record[META_CATALOG_AT..end]);
    record[META_CATALOG_CRC_AT..META_CATALOG_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    format!(
        "catalog: digit {} → {} in {context:?}",
        old as char, record[i] as char
    )
}

/// Damages one log record that redo will apply (one after the checkpoint) and gives it a
/// valid CRC again; `None` if there is none (a database closed cleanly).
fn damage_log_record(storage: &SimStorage, rng: &mut Rng) -> Option<String> {
    let mut log = storage.file_bytes(SIM_LOG_FILE).expect("log file");
    let header: &[u8; 48] = log[..48].try_into().ok()?;
    let salt = record::salt(LogFileHeader::decode(header).ok()?.db_id);
    let records = records_from(&log, checkpoint_lsn(storage));
    let &(lsn, len) = records.get(rng.below(records.len() as u64) as usize)?;
    let at = lsn as usize + record::RECORD_HEADER;
    let what = damage_payload(&mut log[at..at + len], rng);
    let header = record::encode_header(salt, lsn, &log[at..at + len]);
    log[lsn as usize..at].copy_from_slice(&header);
    storage.set_file_bytes(SIM_LOG_FILE, log);
    Some(format!("log record at LSN {lsn}: {what}"))
}

/// The LSN redo starts at: the checkpoint record's, in the newer of the meta slots.
fn checkpoint_lsn(storage: &SimStorage) -> u64 {
    let file = storage.file_bytes(SIM_DATA_FILE).expect("data file");
    let field = |slot: usize, at: usize| {
        let at = slot * 4 * PAGE_SIZE + HEADER + at;
        u64::from_le_bytes(file[at..at + 8].try_into().unwrap_or([0; 8]))
    };
    let newer = if field(1, META_SEQ_AT) > field(0, META_SEQ_AT) {
        1
    } else {
        0
    };
    field(newer, META_LSN_AT)
}

/// (LSN, payload length) of the records of the log file from `lsn` on, as far as their
/// headers name their positions (the CRC is not checked: every record there is valid).
fn records_from(log: &[u8], mut lsn: u64) -> Vec<(u64, usize)> {
    let mut out = Vec::new();
    while let Some(header) = log.get(lsn as usize..lsn as usize + record::RECORD_HEADER) {
        let header: &[u8; record::RECORD_HEADER] = header.try_into().expect("16 bytes");
        let Some(candidate) = record::parse_header(header, lsn) else {
            break;
        };
        if candidate.len == 0 || lsn as usize + record::RECORD_HEADER + candidate.len > log.len() {
            break;
        }
        out.push((lsn, candidate.len));
        lsn += record_size(candidate.len);
    }
    out
}

/// Damages an engine log record's payload (`engine/src/wal.rs`: a kind byte, then for a
/// table's creation its definition, then page ops as `storage/src/btree/redo.rs` encodes
/// them): a page id, a length or random bytes.
fn damage_payload(payload: &mut [u8], rng: &mut Rng) -> String {
    let fields = op_fields(payload);
    let choice = rng.below(3);
    if choice == 0 && !fields.ids.is_empty() {
        let i = fields.ids[rng.below(fields.ids.len() as u64) as usize];
        let id = rng.pick(&[0, 1, META_PAGES - 1, META_PAGES, 40, 1 << 40, u64::MAX]);
        payload[i..i + 8].copy_from_slice(&id.to_le_bytes());
        return format!("page id {id} at byte {i}");
    }
    if choice == 1 && !fields.lengths.is_empty() {
        let i = fields.lengths[rng.below(fields.lengths.len() as u64) as usize];
        let payload_len = (PAGE_SIZE - HEADER_SIZE) as u16;
        let len = rng.pick(&[0u16, 1, 2001, payload_len, 0xFFFF]);
        payload[i..i + 2].copy_from_slice(&len.to_le_bytes());
        return format!("length {len} at byte {i}");
    }
    let n = 1 + rng.below(4);
    for _ in 0..n {
        let i = rng.below(payload.len() as u64) as usize;
        payload[i] = rng.next_u64() as u8;
    }
    format!("{n} random bytes")
}

/// Byte offsets of the page ids and of the 16-bit lengths in a record's page ops.
#[derive(Default)]
struct OpFields {
    ids: Vec<usize>,
    lengths: Vec<usize>,
}

fn op_fields(payload: &[u8]) -> OpFields {
    let mut fields = OpFields::default();
    let u16_at = |at: usize| {
        payload
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let mut at = match payload.first() {
        Some(1) => 1,
        Some(2) => match payload.get(1..5) {
            Some(len) => 5 + u32::from_le_bytes(len.try_into().unwrap_or([0; 4])) as usize,
            None => return fields,
        },
        _ => return fields,
    };
    // Each op: its tag, its page id, then per tag (redo.rs):
    // Put     key_len u16  value_len u16  key  value
    // Delete  key_len u16  key
    // Image   kind u8  front_len u16  back_len u16  front  back
    // Link    left u64  right u64  key_len u16  separator
    while let Some(&tag) = payload.get(at) {
        fields.ids.push(at + 1);
        let body = at + 9;
        let next = match tag {
            1 => u16_at(body)
                .zip(u16_at(body + 2))
                .map(|(k, v)| (vec![body, body + 2], body + 4 + k + v)),
            2 => u16_at(body).map(|k| (vec![body], body + 2 + k)),
            3 => u16_at(body + 1)
                .zip(u16_at(body + 3))
                .map(|(f, b)| (vec![body + 1, body + 3], body + 5 + f + b)),
            4 => {
                fields.ids.extend([body, body + 8]);
                u16_at(body + 16).map(|k| (vec![body + 16], body + 18 + k))
            }
            _ => None,
        };
        let Some((lengths, next)) = next else { break };
        fields.lengths.extend(lengths);
        at = next;
    }
    fields.ids.retain(|&i| i + 8 <= payload.len());
    fields.lengths.retain(|&i| i + 2 <= payload.len());
    fields
}

// ---------------------------------------------------------------------------------------------
// The PMEM modes: records in the ring, copies in the double-write area.

/// The PMEM file's layout (`tailstore_log::format`; docs/design/log.md §1.3): the database
/// id and the ring's capacity in its header, the start word (the hardened LSN in `buffer`,
/// the released one in `pmem-log`, above a CRC-8 byte), the ring from 4 KiB on.
const PMEM_DB_ID_AT: usize = 16;
const PMEM_RING_BYTES_AT: usize = 24;
const PMEM_START_WORD_AT: usize = 64;
const PMEM_RING_AT: usize = 4096;
/// The double-write area's layout (`tailstore_storage::doublewrite`): slots from 4 KiB on,
/// each a header (write number u64, page id u64, the page's checksum u32, a CRC32C of those
/// 20 bytes) padded to 64 bytes, then the page.
const SLOTS_AT: usize = 4096;
const SLOT_HEADER: usize = 64;
const SLOT_BYTES: usize = tailstore_storage::doublewrite::SLOT_BYTES;
const PAGE_ID_AT: usize = 8;
/// The double-write area's two records of its synced mark (`doublewrite.rs`): each a seq
/// and its crc.
const SYNCED_MARKS_AT: [usize; 2] = [64, 128];

/// A database of `mode` (`buffer` or `pmem-log`) as [`crashed_database`] makes one, with
/// a few small commits more, whose last commits are, in `buffer` mode, still only in the
/// PMEM ring when the process dies (the writer hardens only once a quarter of the ring is
/// pending, and the log ends less than that past its one round), and whose checkpoint wrote
/// its pages through the double-write area.
fn crashed_with_commits_in_the_ring(mode: CommitMode) -> SimStorage {
    let mut config = sim_config(mode, 1024);
    config.log.harden_age = Duration::from_secs(3600);
    config.log.harden_batch_bytes = Some(config.log.ring_bytes / 4);
    let (storage, db) = two_tables_with(&config);
    fill(&db, 0..ROWS / 2);
    db.checkpoint().expect("checkpoint");
    fill(&db, ROWS / 2..ROWS);
    // Small commits after the writer's last round: records of a few hundred bytes, most
    // of the ring's records (the fills' are tens of KB each).
    let table = db.table("items").expect("items");
    for round in 0..8 {
        let mut txn = db.begin();
        for id in (round..ROWS).step_by(67) {
            txn.put(&table, &Item::new(id, round, 3_000_000 + id, 12).values())
                .expect("put");
        }
        txn.delete(&table, &key(ROWS - 1 - round)).expect("delete");
        txn.commit().expect("commit");
    }
    let crashed = crash_and_drop(&storage, db, Crash::Process);
    // Otherwise the cases would damage nothing the open reads.
    let log = LogStream::read(&crashed);
    if verbose() {
        eprintln!(
            "{mode}: start word {}, checkpoint at {}, records only in the ring: {:?}",
            log.boundary,
            checkpoint_lsn(&crashed),
            log.ring_records(checkpoint_lsn(&crashed))
        );
    }
    assert!(
        log.ring_records(checkpoint_lsn(&crashed)).len() > 2,
        "{mode}: no commits after the checkpoint only in the ring"
    );
    assert!(
        !used_slots(&doublewrite_area(&crashed)).is_empty(),
        "{mode}: the double-write area holds no copy"
    );
    crashed
}

/// A copy of `base` (a database of a PMEM mode) with damage chosen by `seed`: a record of
/// the ring or a copy in the double-write area.
fn damaged_pmem(base: &SimStorage, seed: u64) -> (SimStorage, String) {
    let storage = image(base, Crash::Process);
    let mut rng = Rng::from_seed(seed);
    let what = match rng.below(8) {
        0..3 => damage_ring_record(&storage, &mut rng),
        3..6 => damage_doublewrite_copy(&storage, &mut rng),
        6 => damage_log_pmem_header(&storage, &mut rng),
        _ => damage_doublewrite_header(&storage, &mut rng),
    };
    (storage, what)
}

/// Changes a field of the PMEM file's header (the ring's capacity, the block size) and
/// computes its CRC again, or the start word (with its CRC-8 again): where the ring ends,
/// how the writer cuts it, where the log starts.
fn damage_log_pmem_header(storage: &SimStorage, rng: &mut Rng) -> String {
    let mut region = storage.region_bytes(SIM_PMEM).expect("PMEM file");
    let bytes: &[u8; 56] = region[..56].try_into().expect("56 bytes");
    let mut header = PmemHeader::decode(bytes).expect("a valid PMEM header");
    let log = LogStream::read(storage);
    let what = match rng.below(3) {
        0 => {
            let capacity = header.ring_bytes;
            header.ring_bytes = rng.pick(&[
                0,
                4,
                capacity - 8,
                capacity / 2,
                capacity * 2,
                1 << 40,
                u64::MAX,
            ]);
            format!("ring capacity {capacity} → {}", header.ring_bytes)
        }
        1 => {
            let block = rng.pick(&[0, 1, 3, 4096 * 3, 1 << 40, u64::MAX]);
            // In `buffer` mode the writer cuts the ring into blocks of the log file's size.
            if let Some(mut file) = storage
                .file_bytes(SIM_LOG_FILE)
                .filter(|_| rng.below(2) == 0)
            {
                let bytes: &[u8; 48] = file[..48].try_into().expect("48 bytes");
                let mut header = LogFileHeader::decode(bytes).expect("a valid log file header");
                header.block_bytes = block;
                file[..48].copy_from_slice(&header.encode());
                storage.set_file_bytes(SIM_LOG_FILE, file);
                return format!("log file header: block size {block}");
            }
            header.block_bytes = block;
            format!("block size {block}")
        }
        _ => {
            let start = log.boundary;
            let records = log.ring_records(checkpoint_lsn(storage));
            let skip_one = records.get(1).map_or(start + 8, |&(lsn, _)| lsn);
            let lsn = rng.pick(&[
                start + 8,
                start.saturating_sub(8).max(LOG_START_LSN),
                skip_one,
                start + log.capacity,
                1 << 40,
                MAX_LSN & !7,
            ]);
            region[PMEM_START_WORD_AT..PMEM_START_WORD_AT + 8]
                .copy_from_slice(&encode_start_word(lsn).to_le_bytes());
            storage.set_region_bytes(SIM_PMEM, region);
            return format!("PMEM start word {start} → {lsn}");
        }
    };
    region[..56].copy_from_slice(&header.encode());
    storage.set_region_bytes(SIM_PMEM, region);
    format!("PMEM header: {what}")
}

/// Changes a field of the double-write area's header (its slot count, page size, database
/// id) and computes its CRC again.
fn damage_doublewrite_header(storage: &SimStorage, rng: &mut Rng) -> String {
    let mut area = doublewrite_area(storage);
    let slots = u64_at(&area, 8);
    let (at, value) = match rng.below(3) {
        0 => (
            8,
            rng.pick(&[0, 1, slots - 1, slots + 1, 1 << 40, u64::MAX / 2, u64::MAX]),
        ),
        1 => (16, rng.pick(&[0, 4096, u64::MAX])),
        _ => (24, u64_at(&area, 24) ^ 1),
    };
    area[at..at + 8].copy_from_slice(&value.to_le_bytes());
    let crc = crc32c::crc32c(&area[..32]);
    area[32..36].copy_from_slice(&crc.to_le_bytes());
    storage.set_region_bytes(doublewrite_path(std::path::Path::new(SIM_PMEM)), area);
    let field = ["slot count", "page size", "database id"][(at - 8) / 8];
    format!("double-write area's header: {field} {value}")
}

/// The log's byte stream as recovery reads it: from the log file below `boundary` (the
/// hardened LSN; `buffer` only), from the PMEM ring from there on.
struct LogStream {
    region: Vec<u8>,
    file: Vec<u8>,
    boundary: u64,
    capacity: u64,
    salt: u32,
}

impl LogStream {
    fn read(storage: &SimStorage) -> LogStream {
        let region = storage.region_bytes(SIM_PMEM).expect("PMEM file");
        let word = |at: usize| u64::from_le_bytes(region[at..at + 8].try_into().unwrap_or([0; 8]));
        LogStream {
            boundary: word(PMEM_START_WORD_AT) >> 8,
            capacity: word(PMEM_RING_BYTES_AT),
            salt: record::salt(word(PMEM_DB_ID_AT)),
            file: storage.file_bytes(SIM_LOG_FILE).unwrap_or_default(),
            region,
        }
    }

    fn ring_offset(&self, lsn: u64) -> usize {
        PMEM_RING_AT + (lsn % self.capacity) as usize
    }

    /// The stream's bytes `[lsn, lsn + len)` (zeros where the file ends).
    fn bytes(&self, lsn: u64, len: usize) -> Vec<u8> {
        (lsn..lsn + len as u64)
            .map(|at| match at < self.boundary {
                true => self.file.get(at as usize).copied().unwrap_or(0),
                false => self.region[self.ring_offset(at)],
            })
            .collect()
    }

    /// Writes `bytes` at `lsn`, which must lie in the ring.
    fn write_ring(&mut self, lsn: u64, bytes: &[u8]) {
        assert!(lsn >= self.boundary, "LSN {lsn} is in the log file");
        for (at, &byte) in (lsn..).zip(bytes) {
            let offset = self.ring_offset(at);
            self.region[offset] = byte;
        }
    }

    /// (LSN, payload length) of the valid records from `from` (a record boundary) on that
    /// lie wholly in the ring: the commits only the PMEM region holds.
    fn ring_records(&self, from: u64) -> Vec<(u64, usize)> {
        let mut out = Vec::new();
        let mut lsn = from;
        // Beyond one lap from the boundary the ring holds nothing of this stream.
        while lsn + record::RECORD_HEADER as u64 <= self.boundary + self.capacity {
            let header = self.bytes(lsn, record::RECORD_HEADER);
            let header: &[u8; record::RECORD_HEADER] = header[..].try_into().expect("16 bytes");
            let Some(candidate) = record::parse_header(header, lsn) else {
                break;
            };
            let end = lsn + record_size(candidate.len);
            if end > self.boundary + self.capacity
                || !candidate.verifies(self.salt, &self.bytes(lsn + 16, candidate.len))
            {
                break;
            }
            if lsn >= self.boundary {
                out.push((lsn, candidate.len));
            }
            lsn = end;
        }
        out
    }
}

/// Damages one record that only the ring holds, past the checkpoint (so that redo applies
/// it), and computes its CRC again: its length (shorter, longer, swallowing the next record,
/// more than the ring holds), its LSN field, or its payload as [`damage_payload`] does.
fn damage_ring_record(storage: &SimStorage, rng: &mut Rng) -> String {
    let mut log = LogStream::read(storage);
    let records = log.ring_records(checkpoint_lsn(storage));
    let index = rng.below(records.len() as u64) as usize;
    let (lsn, len) = records[index];
    let payload_at = lsn + record::RECORD_HEADER as u64;
    let what = match rng.below(3) {
        0 => {
            let swallow_next = records.get(index + 1).map_or(len + 8, |&(_, next)| {
                (record_size(len) + record_size(next)) as usize - record::RECORD_HEADER
            });
            let new_len = rng.pick(&[
                0,
                1,
                len.saturating_sub(1),
                len + 8,
                swallow_next,
                log.capacity as usize,
                record::MAX_PAYLOAD,
                u32::MAX as usize,
            ]);
            let mut header = record::encode_header(log.salt, lsn, &log.bytes(payload_at, len));
            if new_len as u64 + record::RECORD_HEADER as u64 <= log.capacity {
                header = record::encode_header(log.salt, lsn, &log.bytes(payload_at, new_len));
            } else {
                // No CRC can cover more than the ring holds: the length alone.
                header[4..8].copy_from_slice(&(new_len as u32).to_le_bytes());
            }
            log.write_ring(lsn, &header);
            format!("length {len} → {new_len}")
        }
        1 => {
            let field = rng.pick(&[lsn + 8, lsn + log.capacity, 1 << 40, u64::MAX]);
            let header = record::encode_header(log.salt, field, &log.bytes(payload_at, len));
            log.write_ring(lsn, &header);
            format!("LSN field {field}")
        }
        _ => {
            let mut payload = log.bytes(payload_at, len);
            let what = damage_payload(&mut payload, rng);
            log.write_ring(lsn, &record::encode_header(log.salt, lsn, &payload));
            log.write_ring(payload_at, &payload);
            what
        }
    };
    storage.set_region_bytes(SIM_PMEM, log.region);
    format!("ring record at LSN {lsn} (of {len} bytes): {what}")
}

fn doublewrite_area(storage: &SimStorage) -> Vec<u8> {
    let path = doublewrite_path(std::path::Path::new(SIM_PMEM));
    storage.region_bytes(path).expect("double-write area")
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// The slots of the area that hold a copy (write number not 0).
fn used_slots(area: &[u8]) -> Vec<usize> {
    let slots = area.len().saturating_sub(SLOTS_AT) / SLOT_BYTES;
    (0..slots)
        .filter(|slot| u64_at(area, SLOTS_AT + slot * SLOT_BYTES) != 0)
        .collect()
}

/// Damages the copy in one used slot of the double-write area and makes both its checks
/// pass again (the page's checksum, the slot's CRC): another page id (a data page, a meta
/// page, past the file's end), another page's payload and kind, another kind, an LSN far
/// ahead, a write number far ahead or another slot's, random bytes. In three cases in four
/// the page in place that the copy names is torn, as a power cut in its write would leave
/// it, so that the open writes the copy back. The area's synced mark is cleared, as in an
/// area written before marks existed: a restore then checks every copy, the damaged one too
/// (with the mark it checks only the copies written since the last sync, and the base
/// database's were all synced by its checkpoint).
fn damage_doublewrite_copy(storage: &SimStorage, rng: &mut Rng) -> String {
    let mut area = doublewrite_area(storage);
    for at in SYNCED_MARKS_AT {
        area[at..at + 12].fill(0);
    }
    let mut file = storage.file_bytes(SIM_DATA_FILE).expect("data file");
    let pages = (file.len() / PAGE_SIZE) as u64;
    let used = used_slots(&area);
    let slot = used[rng.below(used.len() as u64) as usize];
    let at = SLOTS_AT + slot * SLOT_BYTES;
    let mut seq = u64_at(&area, at);
    let mut id = u64_at(&area, at + PAGE_ID_AT);
    let copy = at + SLOT_HEADER..at + SLOT_BYTES;
    let what = match rng.below(7) {
        0 => {
            let data_page = META_PAGES + rng.below(pages - META_PAGES);
            id = rng.pick(&[data_page, 0, 3, pages, pages + 5, 1 << 40, u64::MAX]);
            area[copy.start + PAGE_ID_AT..copy.start + PAGE_ID_AT + 8]
                .copy_from_slice(&id.to_le_bytes());
            format!("page id {id}")
        }
        1 => {
            // Another data page than the one the copy is of.
            let other = META_PAGES
                + (id - META_PAGES + 1 + rng.below(pages - META_PAGES - 1)) % (pages - META_PAGES);
            let from = other as usize * PAGE_SIZE;
            area[copy.start + KIND_AT] = file[from + KIND_AT];
            area[copy.start + HEADER..copy.end]
                .copy_from_slice(&file[from + HEADER..from + PAGE_SIZE]);
            format!("the payload of page {other}")
        }
        2 => {
            let kind = rng.below(6) as u8;
            area[copy.start + KIND_AT] = kind;
            format!("kind {kind}")
        }
        3 => {
            let lsn = rng.pick(&[u64::MAX, 1 << 40, 0]);
            area[copy.start + LSN_AT..copy.start + LSN_AT + 8].copy_from_slice(&lsn.to_le_bytes());
            format!("LSN {lsn}")
        }
        4 => {
            let other = u64_at(
                &area,
                SLOTS_AT + used[rng.below(used.len() as u64) as usize] * SLOT_BYTES,
            );
            seq = rng.pick(&[u64::MAX, u64::MAX - 1, 1 << 63, other, 1]);
            format!("write number {seq}")
        }
        _ => {
            let n = 1 + rng.below(8);
            for _ in 0..n {
                let i = copy.start + HEADER + rng.below((PAGE_SIZE - HEADER) as u64) as usize;
                area[i] = rng.next_u64() as u8;
            }
            format!("{n} random bytes")
        }
    };
    seal(&mut area[copy.clone()]);
    let mut header = [0u8; 20];
    header[..8].copy_from_slice(&seq.to_le_bytes());
    header[8..16].copy_from_slice(&id.to_le_bytes());
    header[16..20].copy_from_slice(&area[copy.start..copy.start + 4]);
    area[at..at + 20].copy_from_slice(&header);
    area[at + 20..at + 24].copy_from_slice(&crc32c::crc32c(&header).to_le_bytes());
    storage.set_region_bytes(doublewrite_path(std::path::Path::new(SIM_PMEM)), area);
    let torn = (META_PAGES..pages).contains(&id) && rng.below(4) != 0;
    if torn {
        let from = id as usize * PAGE_SIZE + PAGE_SIZE / 2;
        file[from..from + PAGE_SIZE / 2].fill(0xEE);
        storage.set_file_bytes(SIM_DATA_FILE, file);
    }
    let torn = if torn { ", the page in place torn" } else { "" };
    format!("double-write slot {slot} (a copy of page {id}): {what}{torn}")
}

/// The kind byte of each meta page of the data file.
fn meta_page_kinds(storage: &SimStorage) -> Vec<u8> {
    let file = storage.file_bytes(SIM_DATA_FILE).expect("data file");
    (0..META_PAGES as usize)
        .map(|page| file.get(page * PAGE_SIZE + KIND_AT).copied().unwrap_or(0))
        .collect()
}

/// Stores a valid checksum in a page's bytes.
fn seal(bytes: &mut [u8]) {
    let mut page = Page::zeroed();
    page.bytes_mut_for_read().copy_from_slice(bytes);
    page.seal();
    bytes.copy_from_slice(page.bytes());
}

/// A meta slot that no longer reads back is passed over for the other, and the open says so
/// rather than silently. A checkpoint whose record is torn by a crash leaves such a slot
/// over a log not yet released below it: the open starts from the checkpoint before, in the
/// other slot, and says so. A record damaged later, once its checkpoint released the log
/// below it, leaves the older checkpoint without its log: the open refuses, and says why.
/// A slot never written (a new database's second) is not reported.
#[test]
fn an_unreadable_meta_slot_is_passed_over_and_said() {
    let (storage, db) = two_tables();
    fill(&db, 0..ROWS / 2);
    db.checkpoint().expect("checkpoint");
    fill(&db, ROWS / 2..ROWS);
    let log_not_released = storage.file_bytes(SIM_LOG_FILE).expect("log file");
    db.checkpoint().expect("checkpoint");
    let rows = all_rows(&db);
    let crashed = crash_and_drop(&storage, db, Crash::Process);

    let intact = image(&crashed, Crash::Process);
    let (db, report) = open_sim(&intact, &sim_config(MODE, 1024)).expect("open");
    assert_eq!(
        report.recovery.meta_slot_passed_over, None,
        "{}",
        report.recovery
    );
    assert!(all_rows(&db) == rows, "rows after an open of both slots");

    let torn = image(&crashed, Crash::Process);
    let newer = tear_the_newer_meta_slot(&torn);
    torn.set_file_bytes(SIM_LOG_FILE, log_not_released);
    let (db, report) = open_sim(&torn, &sim_config(MODE, 1024)).expect("open past the slot");
    let said = report.recovery.to_string();
    assert!(
        said.contains(&format!("in the other meta slot, meta slot {newer}: ")),
        "the open did not say that it passed over slot {newer}: {said}"
    );
    assert!(
        all_rows(&db) == rows,
        "rows after an open of the older slot"
    );

    let damaged = image(&crashed, Crash::Process);
    let newer = tear_the_newer_meta_slot(&damaged);
    let refused = match open_sim(&damaged, &sim_config(MODE, 1024)) {
        Ok(_) => panic!("opened at a checkpoint whose log was released"),
        Err(refused) => refused.to_string(),
    };
    assert!(
        refused.contains(&format!(
            "the newer one does not read back, meta slot {newer}: "
        )),
        "the refusal does not name the slot passed over: {refused}"
    );
}

/// Damages the first page of the meta slot with the newer checkpoint record (its checksum
/// then fails); returns the slot.
fn tear_the_newer_meta_slot(storage: &SimStorage) -> usize {
    let mut file = storage.file_bytes(SIM_DATA_FILE).expect("data file");
    let newer = newer_meta_slot(&file);
    file[newer * 4 * PAGE_SIZE + HEADER + 100] ^= 0x5a;
    storage.set_file_bytes(SIM_DATA_FILE, file);
    newer
}

/// Every row of `items`, in key order.
fn all_rows(db: &Database) -> Vec<Vec<tailstore_storage::Value>> {
    let table = db.table("items").expect("items");
    let mut txn = db.begin();
    let rows = txn
        .scan(
            &table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan");
    txn.rollback();
    rows
}

/// The meta slot whose checkpoint record has the higher number.
fn newer_meta_slot(file: &[u8]) -> usize {
    let seq = |slot: usize| u64_at(file, slot * 4 * PAGE_SIZE + HEADER + META_SEQ_AT);
    usize::from(seq(1) > seq(0))
}
