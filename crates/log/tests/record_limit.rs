//! Every record an append accepts, a restart reads back. Recovery refuses a header whose
//! length passes `MAX_PAYLOAD` (a plausibility check on what it reads), so an append must
//! refuse such a record too, whatever the ring's size: `serve` ran a 64 MiB ring, whose half
//! let a 16.6 MB record through, and a restart lost that commit and every one after it.
//! (Regression, was a bug.)

use std::path::Path;
use std::sync::Arc;

use tailstore_log::{record_size, CommitMode, LogConfig, LogError, LogManager, MAX_PAYLOAD};
use tailstore_media::real::RealStorage;

fn open(dir: &Path) -> LogManager {
    let mut config = LogConfig::new(CommitMode::Fsync, dir, None);
    // Half of it is twice what recovery accepts.
    config.ring_bytes = 4 * MAX_PAYLOAD;
    LogManager::open(Arc::new(RealStorage), &config)
        .expect("open the log")
        .0
}

#[test]
fn an_append_is_refused_where_recovery_would_refuse_the_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open(dir.path());
    assert_eq!(log.max_record_bytes(), record_size(MAX_PAYLOAD));
    assert_eq!(log.max_payload_bytes(), MAX_PAYLOAD);
    match log.commit(&vec![7u8; MAX_PAYLOAD + 1]) {
        Err(LogError::RecordTooLarge { len, max }) => {
            assert_eq!((len, max), (MAX_PAYLOAD + 1, MAX_PAYLOAD));
        }
        other => panic!("a record recovery would refuse was not refused: {other:?}"),
    }
    let largest = vec![9u8; MAX_PAYLOAD];
    log.commit(&largest)
        .expect("the largest record recovery reads");
    log.commit(b"after it").expect("a record after it");
    log.close().expect("close");
    drop(log);

    let log = open(dir.path());
    let payloads: Vec<Vec<u8>> = log.records().map(|r| r.expect("record").payload).collect();
    assert_eq!(payloads.len(), 2, "records read back after the restart");
    assert!(payloads[0] == largest, "the largest record's payload");
    assert_eq!(payloads[1], b"after it");
}
