//! `fsync` group commit gathers into a flush only the committers that have not appended
//! yet, for at most 50 µs (`GATHER_LIMIT`): a lone committer's flush begins at once
//! (log.md, "Group commit"; ARCHITECTURE decision 9).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tailstore_log::{CommitMode, LogConfig, LogManager, KIB};
use tailstore_media::scaled_growth::ScaledGrowth;
use tailstore_media::sim::SimStorage;

/// The manager's gathering limit: a commit that waited it out took at least this long.
const GATHER_LIMIT: Duration = Duration::from_micros(50);

#[test]
fn a_lone_committer_does_not_wait_for_others_to_gather() {
    let mut config = LogConfig::new(CommitMode::Fsync, "/db", None);
    config.block_bytes = 4 * KIB;
    config.ring_bytes = 64 * KIB;
    // Simulated syncs take no time, so a commit is its append, its write and the wait.
    let storage = ScaledGrowth(SimStorage::new());
    let (log, _) = LogManager::open(Arc::new(storage), &config).expect("open the log");
    // The fastest of many: a busy machine may preempt some, not all of them.
    let fastest = (0..200)
        .map(|i| {
            let began = Instant::now();
            log.commit(format!("commit {i}").as_bytes())
                .expect("commit");
            began.elapsed()
        })
        .min()
        .expect("commits");
    assert!(
        fastest < GATHER_LIMIT,
        "a lone commit took {fastest:?}: its flush waited for committers that were not there"
    );
}
