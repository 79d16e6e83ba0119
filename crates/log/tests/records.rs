//! Reading records back in place (`Records::next_in_place`, one reused buffer, what a restart's
//! redo uses) gives exactly what the owning iterator gives: every record's LSN, end and
//! payload, in order, whatever the sizes of the records before it.

use std::path::Path;
use std::sync::Arc;

use tailstore_log::{CommitMode, LogConfig, LogManager, Record, KIB};
use tailstore_media::real::RealStorage;

/// Payload sizes that grow, shrink and repeat, so a reused buffer must both grow and forget
/// the tail of a longer record.
const SIZES: [usize; 8] = [100, 9 * KIB, 0, 64 * KIB, 3, 8 * KIB, 8 * KIB, 17];

fn payload(i: usize) -> Vec<u8> {
    let tag = format!("record {i};");
    tag.bytes().cycle().take(SIZES[i % SIZES.len()]).collect()
}

fn open(mode: CommitMode, dir: &Path) -> LogManager {
    let pmem = mode.uses_pmem().then(|| dir.join("log.pmem"));
    let config = LogConfig::new(mode, dir, pmem);
    LogManager::open(Arc::new(RealStorage), &config)
        .expect("open the log")
        .0
}

fn reads_in_place_what_the_iterator_reads(mode: CommitMode) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(mode, dir.path());
    let count = 4 * SIZES.len() + 3;
    let mut end = 0;
    for i in 0..count {
        end = log.commit(&payload(i)).expect("commit");
    }
    log.force_durable(end).expect("harden");
    log.close().expect("close");
    drop(log);

    let log = open(mode, dir.path());
    let owned: Vec<Record> = log.records().collect::<Result<_, _>>().expect("records");
    assert_eq!(owned.len(), count, "{mode}: records read back");
    let mut records = log.records();
    let mut seen = 0;
    while let Some(record) = records.next_in_place() {
        let record = record.expect("record in place");
        let expected = &owned[seen];
        assert_eq!(
            (record.lsn, record.end),
            (expected.lsn, expected.end),
            "{mode}: record {seen}'s position"
        );
        assert_eq!(
            record.payload,
            payload(seen),
            "{mode}: record {seen}'s payload"
        );
        seen += 1;
    }
    assert_eq!(seen, count, "{mode}: records read in place");
    assert!(
        records.next_in_place().is_none(),
        "{mode}: the end stays the end"
    );
}

#[test]
fn fsync_reads_in_place_what_the_iterator_reads() {
    reads_in_place_what_the_iterator_reads(CommitMode::Fsync);
}

#[test]
fn buffer_reads_in_place_what_the_iterator_reads() {
    reads_in_place_what_the_iterator_reads(CommitMode::Buffer);
}

#[test]
fn pmem_log_reads_in_place_what_the_iterator_reads() {
    reads_in_place_what_the_iterator_reads(CommitMode::PmemLog);
}
