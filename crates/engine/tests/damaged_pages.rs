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

mod support;

use std::ops::Range;
use std::time::Duration;

use support::*;
use tailstore_crash::damage::{env_number, run_with_deadline, PanicLog, Rng, Unfinished};
use tailstore_engine::{Database, KeyRange};
use tailstore_log::format::LogFileHeader;
use tailstore_log::{record, record_size, CommitMode};
use tailstore_media::sim::SimStorage;
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
const META_CATALOG_AT: usize = 48;

#[test]
fn damaged_pages_with_valid_checksums_never_panic_or_hang() {
    let panics = PanicLog::install();
    let bases = [
        ("closed cleanly", closed_database()),
        ("crashed after commits", crashed_database()),
    ];
    let mut outcomes = Outcomes::default();
    for (what, base) in &bases {
        for seed in first_case()..cases() {
            let (storage, damage) = damaged(base, seed);
            let case = format!("{what}, seed {seed}: {damage}");
            if verbose() {
                eprintln!("{case}");
            }
            let meta_before = meta_page_kinds(&storage);
            let run = storage.clone();
            let outcome = match run_with_deadline(HANG, move || exercise(&run)) {
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
            outcomes.count(outcome);
        }
    }
    eprintln!("{outcomes:?}");
    // The damage must reach the checks, not only bytes nobody reads again.
    assert!(
        outcomes.refused_open > 0 && outcomes.errors_after_open > 0,
        "{outcomes:?}"
    );
}

fn cases() -> u64 {
    env_number("DAMAGED_PAGES_CASES").unwrap_or(CASES)
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
fn exercise(storage: &SimStorage) -> Outcome {
    let db = match open_sim(storage, &sim_config(MODE, POOL_PAGES)) {
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
    let storage = SimStorage::new();
    let (db, _) = open_sim(&storage, &sim_config(MODE, 1024)).expect("create");
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
        let len = rng.pick(&[0u16, 1, 2001, 8160, 0xFFFF]);
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
