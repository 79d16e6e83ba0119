//! The background writer (`buffer`, `async`) writes its rounds of whole blocks to the log file
//! with direct I/O (decision 55), and what it wrote that way recovers like any other bytes.
//!
//! The simulated file refuses a misaligned direct write (as the kernel does), so a writer
//! that computed a round's range or buffer badly would stop the log here; and a writer that
//! went back to buffered writes fails the count.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tailstore_log::{CommitMode, LogConfig, LogManager, KIB};
use tailstore_media::scaled_growth::ScaledGrowth;
use tailstore_media::sim::SimStorage;

fn config(mode: CommitMode) -> LogConfig {
    let mut config = LogConfig::new(mode, "/db", Some(PathBuf::from("/pmem/log.pmem")));
    config.block_bytes = 4 * KIB;
    config.ring_bytes = 64 * KIB;
    config.harden_age = Duration::from_millis(1);
    config
}

fn open(storage: &SimStorage, config: &LogConfig) -> LogManager {
    LogManager::open(Arc::new(ScaledGrowth(storage.clone())), config)
        .expect("open the log")
        .0
}

fn payload(seq: usize) -> Vec<u8> {
    let mut p = format!("commit {seq};").into_bytes();
    p.resize(p.len() + seq % 700, b'a' + (seq % 26) as u8);
    p
}

#[test]
fn the_writer_hardens_whole_blocks_directly_and_they_recover() {
    for mode in [CommitMode::Buffer, CommitMode::Async] {
        let config = config(mode);
        let storage = SimStorage::new();
        let log = open(&storage, &config);
        let mut payloads = Vec::new();
        let began = Instant::now();
        while storage.direct_writes() < 3 {
            assert!(
                began.elapsed() < Duration::from_secs(10),
                "{mode}: {} direct writes after {} commits in 10 s",
                storage.direct_writes(),
                payloads.len()
            );
            let p = payload(payloads.len());
            log.commit(&p).expect("commit");
            payloads.push(p);
            if payloads.len() % 64 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        log.close().expect("close");
        drop(log);
        let reopened = open(&storage.process_crash(), &config);
        let found: Vec<Vec<u8>> = reopened
            .records()
            .map(|r| r.expect("replay").payload)
            .collect();
        assert_eq!(found.len(), payloads.len(), "{mode}");
        assert!(found == payloads, "{mode}: recovered payloads differ");
    }
}
