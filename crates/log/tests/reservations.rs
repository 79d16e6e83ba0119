//! `LogManager::reserve` and `LogManager::fill`: a record's place is fixed first and its
//! bytes written later (the engine reserves under its trees' latches and writes after
//! releasing them). Records filled out of order become durable in LSN order, a crash keeps
//! exactly the filled prefix, and a reservation abandoned unfilled stops the log instead of
//! leaving a hole that every later wait would hang behind.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tailstore_log::{CommitMode, LogConfig, LogError, LogManager, Record, KIB};
use tailstore_media::scaled_growth::ScaledGrowth;
use tailstore_media::sim::SimStorage;

const MODES: [CommitMode; 4] = [
    CommitMode::Fsync,
    CommitMode::Buffer,
    CommitMode::PmemLog,
    CommitMode::Async,
];

fn config(mode: CommitMode) -> LogConfig {
    let mut config = LogConfig::new(mode, "/db", Some(PathBuf::from("/pmem/log.pmem")));
    config.block_bytes = 4 * KIB;
    config.ring_bytes = 64 * KIB;
    config.pmem_log_bytes = 64 * KIB;
    config.harden_age = Duration::from_millis(1);
    config
}

fn open(storage: &SimStorage, mode: CommitMode) -> LogManager {
    LogManager::open(Arc::new(ScaledGrowth(storage.clone())), &config(mode))
        .expect("open the log")
        .0
}

fn payloads(log: &LogManager) -> Vec<Vec<u8>> {
    log.records()
        .collect::<Result<Vec<Record>, _>>()
        .expect("read the records")
        .into_iter()
        .map(|r| r.payload)
        .collect()
}

#[test]
fn records_filled_out_of_order_become_durable_in_lsn_order() {
    for mode in MODES {
        let storage = SimStorage::new();
        let log = open(&storage, mode);
        let start = log.appended_lsn();
        let first = log.reserve(5).expect("reserve the first");
        let second = log.reserve(6).expect("reserve the second");
        let (first_end, second_end) = (first.end(), second.end());
        assert!(
            first_end < second_end,
            "{mode:?}: places in reservation order"
        );
        assert_eq!(
            log.fill(second, b"second").expect("fill the second"),
            second_end
        );
        assert_eq!(
            log.appended_lsn(),
            start,
            "{mode:?}: the second record counts as appended before the first is written"
        );
        assert_eq!(
            log.fill(first, b"first").expect("fill the first"),
            first_end
        );
        assert_eq!(log.appended_lsn(), second_end, "{mode:?}");
        log.wait_durable(second_end).expect("durable");
        drop(log);
        let reopened = open(&storage.process_crash(), mode);
        assert_eq!(
            payloads(&reopened),
            [b"first".to_vec(), b"second".to_vec()],
            "{mode:?}: both records, in their places"
        );
    }
}

#[test]
fn a_crash_between_out_of_order_fills_keeps_only_the_filled_prefix() {
    for mode in [CommitMode::Buffer, CommitMode::PmemLog] {
        let storage = SimStorage::new();
        let log = open(&storage, mode);
        log.commit(b"before").expect("a commit before");
        let first = log.reserve(5).expect("reserve the first");
        let second = log.reserve(6).expect("reserve the second");
        log.fill(second, b"second").expect("fill the second");
        // The process dies with the first place still a hole: the crash takes the PMEM ring
        // as it is, and the leaked reservation never runs its drop.
        let image = storage.process_crash();
        std::mem::forget(first);
        let reopened = open(&image, mode);
        assert_eq!(
            payloads(&reopened),
            [b"before".to_vec()],
            "{mode:?}: a record behind an unwritten one is not recovered"
        );
    }
}

#[test]
fn an_abandoned_reservation_stops_the_log() {
    for mode in MODES {
        let storage = SimStorage::new();
        let log = open(&storage, mode);
        log.commit(b"before").expect("a commit before");
        let abandoned = log.reserve(8).expect("reserve");
        let behind = abandoned.end();
        drop(abandoned);
        let never_written = |result: Result<u64, LogError>, what: &str| match result {
            Err(LogError::Stopped { cause }) => assert!(
                cause.contains("never written"),
                "{mode:?}: {what}: stopped for {cause:?}"
            ),
            other => panic!("{mode:?}: {what}: expected Stopped, got {other:?}"),
        };
        never_written(log.append(b"after"), "an append after it");
        never_written(
            log.wait_durable(behind).map(|()| behind),
            "a wait for the abandoned place",
        );
    }
}
