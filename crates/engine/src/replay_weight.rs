//! The measure of log that the checkpoint policy counts in: what a restart would replay.
//!
//! A restart's redo costs per record (reading and checking its header, decoding it, finding
//! its pages) as well as per byte. Measured by `serve` after SIGKILL, on this project's
//! 2-core machine: ~1.7–2.6 µs per record of a 100-byte SET (~200–500 bytes of log each)
//! against ~11 µs per record of a 4 KiB SET (~4.4 KiB each). A bound on the log in bytes
//! alone therefore lets a log of small records take several times longer to replay than one
//! of large records at the same bound. The replay weight counts each record as at least
//! [`DbConfig::record_replay_floor`](crate::DbConfig::record_replay_floor) bytes, so that one
//! bound means about the same restart time whatever the records' size.
//!
//! A weight is a position on the log's own scale: the LSN plus the shortfall of every
//! record appended since the database opened. Both only grow, so differences of two weights
//! are amounts of log. Records replayed by the restart are counted at their bytes only (the
//! checkpoint that recovery asks for follows at once).

use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) struct ReplayWeight {
    floor: u64,
    /// What the records appended since the open lacked of `floor`, in total.
    shortfall: AtomicU64,
}

impl ReplayWeight {
    pub fn new(floor: u64) -> ReplayWeight {
        ReplayWeight {
            floor,
            shortfall: AtomicU64::new(0),
        }
    }

    /// Counts one appended record of `len` bytes. Free for records of at least the floor
    /// (the 4 KiB SET's path): no shared write.
    pub fn count(&self, len: usize) {
        let lacking = self.floor.saturating_sub(len as u64);
        if lacking > 0 {
            self.shortfall.fetch_add(lacking, Ordering::Relaxed);
        }
    }

    /// The weight of the log up to `lsn`, the end of the appended records. Exact while no
    /// append is in flight (a checkpoint holds the log gate); otherwise it may lag by the
    /// shortfall of the records in flight, which only makes a limit fire a record later.
    pub fn at(&self, lsn: u64) -> u64 {
        lsn + self.shortfall.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_records_weigh_the_floor_and_long_ones_their_bytes() {
        let weight = ReplayWeight::new(1024);
        weight.count(100);
        weight.count(4096);
        weight.count(1024);
        // 100 + 4096 + 1024 bytes of log, weighing 1024 + 4096 + 1024.
        assert_eq!(weight.at(5220), 6144);
        let bytes_only = ReplayWeight::new(0);
        bytes_only.count(100);
        assert_eq!(bytes_only.at(5220), 5220);
    }
}
