//! The log's background thread (`buffer`'s writer, `pmem-log`'s preparer) readies the PMEM
//! ring's slots ahead of the appends during the ring's first lap in the process
//! (`Shared::prepare_ring_ahead`): a new ring's pages are allocated by that thread, not by the
//! appends' first writes to them, and only as far ahead as it says.
//!
//! The ring is a 128 MiB file in `/dev/shm` where it has room (else the temporary
//! directory): its allocated blocks say which pages the writer readied.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tailstore_log::{CommitMode, LogConfig, LogManager, MIB};
use tailstore_media::real::RealStorage;

const RING: usize = 128 * MIB;
/// What the writer readies past the appends (`RING_PREPARE_AHEAD` in the manager).
const AHEAD: u64 = 32 * MIB as u64;

fn allocated_bytes(path: &Path) -> u64 {
    path.metadata().expect("stat the ring's file").blocks() * 512
}

/// Waits (at most 10 s) until the ring's file has at least `bytes` allocated; returns what it
/// has then.
fn wait_for_allocated(path: &Path, bytes: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let allocated = allocated_bytes(path);
        if allocated >= bytes || Instant::now() > deadline {
            return allocated;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_buffer_writer_readies_the_rings_pages_ahead_of_the_appends_and_no_further() {
    readies_the_rings_pages_ahead_of_the_appends_and_no_further(CommitMode::Buffer);
}

#[test]
fn the_pmem_log_preparer_readies_the_logs_pages_ahead_of_the_appends_and_no_further() {
    readies_the_rings_pages_ahead_of_the_appends_and_no_further(CommitMode::PmemLog);
}

fn readies_the_rings_pages_ahead_of_the_appends_and_no_further(mode: CommitMode) {
    let dir =
        tempfile::tempdir_in(tailstore_media::pmem::scratch_dir(2 * RING as u64)).expect("tempdir");
    let pmem = dir.path().join("log.pmem");
    let mut config = LogConfig::new(mode, dir.path(), Some(pmem.clone()));
    config.ring_bytes = RING;
    let (log, _) = LogManager::open(Arc::new(RealStorage), &config).expect("create");
    log.commit(b"first").expect("commit");
    let readied = wait_for_allocated(&pmem, AHEAD);
    assert!(
        readied >= AHEAD,
        "the log's background thread readied {readied} bytes of the ring, not the {AHEAD} ahead of the appends"
    );
    // Nothing appended since: the writer stops at its distance past the appends, never far
    // beyond (the file's header and the rounding to pages excepted).
    std::thread::sleep(Duration::from_millis(200));
    let readied = allocated_bytes(&pmem);
    assert!(
        readied <= AHEAD + MIB as u64,
        "the log's background thread readied {readied} bytes, more than {AHEAD} past one small record"
    );
    // Appends move the readied slots on.
    let payload = vec![7u8; 60_000];
    for _ in 0..(16 * MIB / payload.len()) {
        log.commit(&payload).expect("commit");
    }
    // The readied pages' end, rounded down to a page (the ring starts past the file's header).
    let goal = (log.appended_lsn() + AHEAD) / 4096 * 4096;
    let readied = wait_for_allocated(&pmem, goal);
    assert!(
        readied >= goal,
        "after ~16 MiB of appends, {readied} bytes readied, not {goal}"
    );
    log.close().expect("close");
}
