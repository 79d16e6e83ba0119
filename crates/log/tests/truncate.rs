//! The log file's head is given back after a release (what checkpoints do): the file's start
//! moves, its space is freed, and reopening finds exactly the records after the release.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use tailstore_log::{CommitMode, LogConfig, LogManager, Record, KIB, LOG_FILE_NAME};
use tailstore_media::real::RealStorage;

/// Enough records of [`PAYLOAD`] bytes to pass the 64 MiB release step with room to spare.
const RECORDS: usize = 1300;
const PAYLOAD: usize = 64 * KIB;

fn payload(i: usize) -> Vec<u8> {
    let tag = format!("record {i}:");
    tag.bytes().cycle().take(PAYLOAD).collect()
}

fn config(mode: CommitMode, dir: &Path) -> LogConfig {
    let pmem = mode.uses_pmem().then(|| dir.join("log.pmem"));
    LogConfig::new(mode, dir, pmem)
}

fn open(mode: CommitMode, dir: &Path) -> (LogManager, tailstore_log::Recovery) {
    LogManager::open(Arc::new(RealStorage), &config(mode, dir)).expect("open the log")
}

/// Bytes the file system holds for the log file.
fn allocated(dir: &Path) -> u64 {
    std::fs::metadata(dir.join(LOG_FILE_NAME))
        .expect("log file")
        .blocks()
        * 512
}

fn release_frees_the_head(mode: CommitMode) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(mode, dir.path());
    let ends: Vec<u64> = (0..RECORDS)
        .map(|i| log.commit(&payload(i)).expect("commit"))
        .collect();
    let end = *ends.last().expect("records");
    log.force_durable(end).expect("harden");
    // Release up to the end of a record past 70 MiB: the file's head goes. `buffer` hardens
    // to the file in the background and moves the file's start only over a hardened
    // prefix, so the release may have to be asked again (as each checkpoint does).
    let keep_from = ends
        .iter()
        .position(|&end| end > 70 << 20)
        .expect("70 MiB written");
    let release_at = ends[keep_from];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // Without the release the file would hold about `end` bytes once all is hardened.
    while allocated(dir.path()) + (60 << 20) > end && std::time::Instant::now() < deadline {
        log.release(release_at).expect("release");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let after = allocated(dir.path());
    assert!(
        after + (60 << 20) <= end,
        "{mode}: release freed too little: {after} bytes allocated for {end} bytes of log"
    );
    // A release below the current start changes nothing.
    log.release(ends[0]).expect("release below the start");
    log.close().expect("close");
    drop(log);

    let (log, recovery) = open(mode, dir.path());
    assert_eq!(
        recovery.start_lsn, release_at,
        "{mode}: the file's start moved"
    );
    let found: Vec<Record> = log.records().collect::<Result<_, _>>().expect("records");
    assert_eq!(
        found.len(),
        RECORDS - keep_from - 1,
        "{mode}: records after the release"
    );
    for (record, i) in found.iter().zip(keep_from + 1..) {
        assert_eq!(record.payload, payload(i), "{mode}: record {i} reads back");
    }
    // And the log goes on from there.
    let end = log
        .commit(b"after reopening")
        .expect("commit after reopening");
    log.force_durable(end).expect("harden");
}

#[test]
fn fsync_release_frees_the_head() {
    release_frees_the_head(CommitMode::Fsync);
}

#[test]
fn buffer_release_frees_the_head() {
    release_frees_the_head(CommitMode::Buffer);
}

#[test]
fn async_release_frees_the_head() {
    release_frees_the_head(CommitMode::Async);
}
