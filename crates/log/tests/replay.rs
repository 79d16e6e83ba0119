//! `LogReplay`: a restart's one walk over the log. A walk asked to start at a record yields
//! the records from there; it starts there only where the `buffer` mode's hardened LSN lies
//! ahead (and then must cross it), elsewhere at the log's first record, verifying the
//! records before the requested start without yielding them. The end it reaches is where
//! the log goes on after `finish`.

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use tailstore_log::{CommitMode, LogConfig, LogError, LogManager, LogReplay, Record, Walked};
use tailstore_media::real::RealStorage;

const COUNT: usize = 40;
const FROM: usize = 25;

fn config(mode: CommitMode, dir: &Path) -> LogConfig {
    let pmem = mode.uses_pmem().then(|| dir.join("log.pmem"));
    LogConfig::new(mode, dir, pmem)
}

fn payload(i: usize) -> Vec<u8> {
    format!("record {i};")
        .bytes()
        .cycle()
        .take(200 + i * 37)
        .collect()
}

/// A closed log of `COUNT` records (all hardened to the log file), and the records.
fn closed_log(mode: CommitMode, dir: &Path) -> Vec<Record> {
    let (log, _) = LogManager::open(Arc::new(RealStorage), &config(mode, dir)).expect("create");
    let mut end = 0;
    for i in 0..COUNT {
        end = log.commit(&payload(i)).expect("commit");
    }
    log.force_durable(end).expect("harden");
    log.close().expect("close");
    let records = log
        .records()
        .collect::<Result<Vec<_>, _>>()
        .expect("records");
    assert_eq!(records.len(), COUNT);
    records
}

fn replay(mode: CommitMode, dir: &Path) -> LogReplay {
    LogReplay::open(Arc::new(RealStorage), &config(mode, dir)).expect("open for replay")
}

/// Walks `replay` from `from` to the end: the indexes (into `written`) of the records it
/// yields, and what it reached.
fn walk(replay: &LogReplay, from: u64, written: &[Record]) -> (Vec<usize>, Walked) {
    let mut records = replay.records_from(from).expect("walk");
    let mut yielded = Vec::new();
    while let Some(record) = records.next_in_place() {
        let record = record.expect("record");
        let at = written
            .iter()
            .position(|w| w.lsn == record.lsn)
            .expect("a written record");
        assert_eq!(record.payload, written[at].payload, "record {at}'s payload");
        assert_eq!(record.end, written[at].end, "record {at}'s end");
        yielded.push(at);
    }
    (yielded, records.walked().expect("the walk reached the end"))
}

/// Flips a byte in the middle of record `r`'s payload in the log file.
fn damage(dir: &Path, r: &Record) {
    let path = dir.join(tailstore_log::LOG_FILE_NAME);
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("log file");
    let at = r.lsn + 16 + r.payload.len() as u64 / 2;
    let mut byte = [0u8];
    file.seek(SeekFrom::Start(at)).expect("seek");
    file.read_exact(&mut byte).expect("read");
    byte[0] ^= 0x5a;
    file.seek(SeekFrom::Start(at)).expect("seek");
    file.write_all(&byte).expect("write");
}

fn from_a_record_yields_it_and_the_records_after(mode: CommitMode, walks_from_start: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let written = closed_log(mode, dir.path());
    let replay = replay(mode, dir.path());
    let (yielded, walked) = walk(&replay, written[FROM].lsn, &written);
    assert_eq!(yielded, (FROM..COUNT).collect::<Vec<_>>(), "{mode}");
    assert!(walked.reached_from(), "{mode}");
    assert_eq!(walked.end(), written[COUNT - 1].end, "{mode}");
    let verified = if walks_from_start {
        COUNT
    } else {
        COUNT - FROM
    };
    assert_eq!(
        walked.records(),
        verified as u64,
        "{mode}: records verified"
    );

    // The log goes on from the end the walk reached, and keeps every record.
    let (log, recovery) = replay.finish(walked).expect("finish");
    assert_eq!(recovery.end_lsn, written[COUNT - 1].end, "{mode}");
    let end = log
        .commit(b"after the replay")
        .expect("commit after the replay");
    log.close().expect("close");
    drop(log);
    let (log, recovery) =
        LogManager::open(Arc::new(RealStorage), &config(mode, dir.path())).expect("reopen");
    assert_eq!(recovery.end_lsn, end, "{mode}");
    let again = log
        .records()
        .collect::<Result<Vec<_>, _>>()
        .expect("records");
    assert_eq!(again.len(), COUNT + 1, "{mode}");
    assert_eq!(again[COUNT].payload, b"after the replay", "{mode}");
}

#[test]
fn buffer_walks_from_the_record_asked_for() {
    from_a_record_yields_it_and_the_records_after(CommitMode::Buffer, false);
}

#[test]
fn fsync_walks_from_the_logs_start_and_yields_from_the_record_asked_for() {
    from_a_record_yields_it_and_the_records_after(CommitMode::Fsync, true);
}

/// A start that is not a record boundary is reported as not reached; the walk yields the
/// records after it.
#[test]
fn a_start_between_records_is_not_reached() {
    let dir = tempfile::tempdir().expect("tempdir");
    let written = closed_log(CommitMode::Fsync, dir.path());
    let replay = replay(CommitMode::Fsync, dir.path());
    let (yielded, walked) = walk(&replay, written[FROM].lsn + 8, &written);
    assert_eq!(yielded, (FROM + 1..COUNT).collect::<Vec<_>>());
    assert!(!walked.reached_from());
}

/// A damaged record between the walk's start and the hardened LSN: the log was durable
/// there, so `finish` refuses it instead of cutting the log short (and losing the records
/// after it).
#[test]
fn buffer_refuses_a_damaged_record_after_the_start_below_the_hardened_lsn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let written = closed_log(CommitMode::Buffer, dir.path());
    damage(dir.path(), &written[FROM + 3]);
    let replay = replay(CommitMode::Buffer, dir.path());
    let (yielded, walked) = walk(&replay, written[FROM].lsn, &written);
    assert_eq!(yielded, (FROM..FROM + 3).collect::<Vec<_>>());
    match replay.finish(walked) {
        Err(LogError::Corrupt { detail, .. }) => assert!(detail.contains("hardened"), "{detail}"),
        other => panic!("expected a Corrupt error, got {:?}", other.map(|_| ())),
    }
}

/// Where the walk starts at the log's first record, a damaged record before the requested
/// start ends the valid prefix there: the start is not reached, and nothing is yielded.
#[test]
fn fsync_verifies_the_records_before_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let written = closed_log(CommitMode::Fsync, dir.path());
    damage(dir.path(), &written[FROM - 5]);
    let replay = replay(CommitMode::Fsync, dir.path());
    let (yielded, walked) = walk(&replay, written[FROM].lsn, &written);
    assert!(yielded.is_empty(), "{yielded:?}");
    assert!(!walked.reached_from());
    assert_eq!(walked.end(), written[FROM - 5].lsn);
}

/// What a recovery found survives a power cut right after it. In `fsync` and `async` modes a
/// crash can leave records that were written to the log file but never synced (a group
/// commit's write done, its `fdatasync` not): recovery finds them whole and the database
/// redoes them, shows them to readers and may write pages and a checkpoint with their
/// changes. So they must be durable before anything depends on them, or a power cut soon
/// after the restart takes them back (the next open then finds a checkpoint its log does not
/// reach). Repair's cut of the log file at the end (`File::set_len`, which syncs the file)
/// makes them so; without it, this fails.
#[test]
fn a_recovered_prefix_survives_a_power_cut_after_the_restart() {
    use tailstore_media::sim::SimStorage;
    for mode in [CommitMode::Fsync, CommitMode::Async] {
        let config = LogConfig::new(mode, "/db", None);
        let storage = SimStorage::new();
        let (log, _) = LogManager::open(Arc::new(storage.clone()), &config).expect("create");
        let synced = log.commit(b"synced").expect("commit");
        log.force_durable(synced).expect("harden");
        // The next hardening round's writes go through; its sync, the medium's fourth
        // operation from here, finds it dead (the recovery below checks the first part).
        storage.crash_after(4);
        let unsynced = log.append(b"written, never synced").expect("append");
        assert!(
            log.force_durable(unsynced).is_err(),
            "{mode}: the sync must fail"
        );
        drop(log);
        let restarted = storage.process_crash();
        let (log, recovery) =
            LogManager::open(Arc::new(restarted.clone()), &config).expect("recover");
        assert_eq!(
            recovery.end_lsn, unsynced,
            "{mode}: the written record is whole"
        );
        drop(log);
        for seed in 0..8 {
            let after_cut = restarted.power_cut(seed);
            let (_, again) = LogManager::open(Arc::new(after_cut), &config).expect("reopen");
            assert_eq!(
                again.end_lsn, unsynced,
                "{mode}, power cut {seed}: the recovered record was lost"
            );
        }
    }
}
