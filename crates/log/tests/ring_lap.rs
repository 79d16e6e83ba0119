//! `buffer` mode with a ring larger than its append window (decision 109): a restart, and any
//! read after it, takes the records the ring's last lap still holds from PMEM, and the others
//! from the log file; recovery clears only the window past the end of the valid prefix.
//!
//! The ring is 128 MiB, twice the window, in a sparse file of a temporary directory (mapping a
//! file works on any file system), so the lap is the 64 MiB below the hardened LSN.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tailstore_log::format::{append_window, HEADER_BYTES};
use tailstore_log::record::{encode_header, salt};
use tailstore_log::{CommitMode, LogConfig, LogError, LogManager, Record, Recovery, MIB};
use tailstore_media::real::RealStorage;

const RING: usize = 128 * MIB;

struct Db {
    dir: tempfile::TempDir,
}

impl Db {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn pmem_file(&self) -> PathBuf {
        self.dir.path().join("log.pmem")
    }

    fn log_file(&self) -> PathBuf {
        self.dir.path().join(tailstore_log::LOG_FILE_NAME)
    }

    fn open(&self) -> tailstore_log::Result<(LogManager, Recovery)> {
        let mut config =
            LogConfig::new(CommitMode::Buffer, self.dir.path(), Some(self.pmem_file()));
        config.ring_bytes = RING;
        LogManager::open(Arc::new(RealStorage), &config)
    }

    /// A log holding `count` records of `len` bytes each, cleanly closed (everything
    /// hardened, the records also in the ring).
    fn with_records(count: usize, len: usize) -> (Self, Vec<Record>) {
        let db = Self::new();
        let (log, _) = db.open().expect("create");
        for i in 0..count {
            log.commit(&payload(i, len)).expect("commit");
        }
        log.close().expect("close");
        let written = read_all(&log);
        assert_eq!(written.len(), count);
        (db, written)
    }

    /// Flips a bit of `record`'s payload in the log file (`in_file`) or in the ring.
    fn damage(&self, record: &Record, in_file: bool) {
        let at = record.lsn + 16 + record.payload.len() as u64 / 2;
        let (path, offset) = if in_file {
            (self.log_file(), at)
        } else {
            (self.pmem_file(), ring_offset(at))
        };
        flip(&path, offset);
    }
}

fn ring_offset(lsn: u64) -> u64 {
    HEADER_BYTES as u64 + lsn % RING as u64
}

fn flip(path: &Path, offset: u64) {
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open");
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).expect("read");
    byte[0] ^= 0x20;
    file.write_all_at(&byte, offset).expect("write");
}

fn payload(i: usize, len: usize) -> Vec<u8> {
    let tag = format!("record {i};");
    tag.bytes().cycle().take(len).collect()
}

fn read_all(log: &LogManager) -> Vec<Record> {
    log.records()
        .collect::<Result<_, _>>()
        .expect("read the records")
}

fn reopened(db: &Db) -> (LogManager, Recovery) {
    db.open().expect("reopen")
}

/// A record damaged in one of its two copies (the log file's, or the ring's) reads back
/// whole from the other, at the open and after it.
fn one_damaged_copy_reads_back(in_file: bool) {
    let (db, written) = Db::with_records(200, 10_000);
    db.damage(&written[120], in_file);
    let (log, recovery) = reopened(&db);
    assert_eq!(recovery.records, written.len() as u64);
    assert_eq!(read_all(&log), written, "read after the open");
}

#[test]
fn a_record_whose_file_copy_is_damaged_is_read_from_the_ring() {
    one_damaged_copy_reads_back(true);
}

#[test]
fn a_record_whose_ring_copy_is_damaged_is_read_from_the_file() {
    one_damaged_copy_reads_back(false);
}

#[test]
fn a_record_damaged_in_both_copies_is_corrupt() {
    let (db, written) = Db::with_records(200, 10_000);
    db.damage(&written[120], true);
    db.damage(&written[120], false);
    match db.open() {
        Err(LogError::Corrupt { detail, .. }) => {
            assert!(detail.contains(&written[120].lsn.to_string()), "{detail}");
        }
        Err(other) => panic!("expected a corrupt log, got {other}"),
        Ok(_) => panic!("the log opened with a record damaged in both copies"),
    }
}

/// 80 MiB of records: the first 16 MiB lie below the lap (the window's worth below the
/// hardened LSN is the next lap's), and only the file has them.
#[test]
fn records_below_the_lap_are_read_from_the_file() {
    let (db, written) = Db::with_records(8_000, 10_474);
    let end = written.last().expect("records").end;
    let lowest = (end + append_window(CommitMode::Buffer, RING as u64)).saturating_sub(RING as u64);
    let below = written
        .iter()
        .position(|r| r.lsn >= lowest)
        .expect("a record in the lap");
    assert!(below > 1_000, "{below} records below the lap");
    // Damaged in the file below the lap: the file is what a restart reads there.
    db.damage(&written[below / 2], true);
    assert!(matches!(db.open(), Err(LogError::Corrupt { .. })));
    db.damage(&written[below / 2], true);
    // In the ring below the lap: never read.
    db.damage(&written[below / 2], false);
    let (log, _) = reopened(&db);
    assert_eq!(read_all(&log), written);
}

/// What a crashed process can have left past the end of the valid prefix lies within the
/// append window past the hardened LSN: recovery zeroes those slots, and leaves the lap's.
#[test]
fn recovery_clears_the_window_past_the_end_and_keeps_the_lap() {
    let (db, written) = Db::with_records(200, 10_000);
    let end = written.last().expect("records").end;
    // A record that verifies, 1 MiB past the end (where the crashed process's append after
    // a torn one could have left it), and one at the window's last slot.
    let pmem = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(db.pmem_file())
        .expect("open the PMEM file");
    let mut id = [0u8; 8];
    pmem.read_exact_at(&mut id, 16)
        .expect("read the database id");
    let salt = salt(u64::from_le_bytes(id));
    let window = append_window(CommitMode::Buffer, RING as u64);
    let stale = [end + MIB as u64, end + window - 64];
    for lsn in stale {
        let body = b"a stale record";
        let mut record = encode_header(salt, lsn, body).to_vec();
        record.extend_from_slice(body);
        pmem.write_all_at(&record, ring_offset(lsn)).expect("plant");
    }
    let ring_before = read_ring(&pmem, written[0].lsn, (end - written[0].lsn) as usize);

    let (log, recovery) = reopened(&db);
    assert_eq!(recovery.end_lsn, end);
    for lsn in stale {
        assert!(
            read_ring(&pmem, lsn, 30).iter().all(|b| *b == 0),
            "the record planted at {lsn} is still there"
        );
    }
    assert!(
        read_ring(&pmem, written[0].lsn, (end - written[0].lsn) as usize) == ring_before,
        "the lap's records changed"
    );
    assert_eq!(read_all(&log), written);
}

fn read_ring(pmem: &fs::File, lsn: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    pmem.read_exact_at(&mut bytes, ring_offset(lsn))
        .expect("read the ring");
    bytes
}
