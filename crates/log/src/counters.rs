//! The log manager's counters: what SQL Server's performance counters showed in the reference
//! studies (log flushes, flush waits, write sizes). Plain relaxed atomics: they are statistics,
//! never used to decide anything.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

#[derive(Default)]
pub(crate) struct Counters {
    /// Bumped once per commit by every committer: padded so it does not share a line with the
    /// rarely written ones below.
    commits: CachePadded<AtomicU64>,
    disk_writes: AtomicU64,
    disk_write_bytes: AtomicU64,
    flushes: AtomicU64,
    commits_waited: AtomicU64,
    flush_wait_ns: AtomicU64,
    ring_full_waits: AtomicU64,
    ring_full_wait_ns: AtomicU64,
    gather_wait_ns: AtomicU64,
}

impl Counters {
    pub fn commit(&self) {
        self.commits.fetch_add(1, Relaxed);
    }

    pub fn disk_write(&self, bytes: usize) {
        self.disk_writes.fetch_add(1, Relaxed);
        self.disk_write_bytes.fetch_add(bytes as u64, Relaxed);
    }

    pub fn flush(&self) {
        self.flushes.fetch_add(1, Relaxed);
    }

    pub fn flush_wait(&self, ns: u64) {
        self.commits_waited.fetch_add(1, Relaxed);
        self.flush_wait_ns.fetch_add(ns, Relaxed);
    }

    pub fn ring_full_wait(&self, ns: u64) {
        self.ring_full_waits.fetch_add(1, Relaxed);
        self.ring_full_wait_ns.fetch_add(ns, Relaxed);
    }

    pub fn gather_wait(&self, ns: u64) {
        self.gather_wait_ns.fetch_add(ns, Relaxed);
    }

    pub fn snapshot(&self, log_bytes: u64) -> LogCounters {
        LogCounters {
            commits: self.commits.load(Relaxed),
            log_bytes,
            disk_writes: self.disk_writes.load(Relaxed),
            disk_write_bytes: self.disk_write_bytes.load(Relaxed),
            flushes: self.flushes.load(Relaxed),
            commits_waited: self.commits_waited.load(Relaxed),
            flush_wait_ns: self.flush_wait_ns.load(Relaxed),
            ring_full_waits: self.ring_full_waits.load(Relaxed),
            ring_full_wait_ns: self.ring_full_wait_ns.load(Relaxed),
            gather_wait_ns: self.gather_wait_ns.load(Relaxed),
        }
    }
}

/// A snapshot of the counters; subtract two with [`LogCounters::since`] to get a run's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCounters {
    pub commits: u64,
    /// Bytes appended to the log (records, headers and padding).
    pub log_bytes: u64,
    /// `write` calls to the log file, and the bytes they carried.
    pub disk_writes: u64,
    pub disk_write_bytes: u64,
    /// `fdatasync` calls on the log file.
    pub flushes: u64,
    /// Commits that had to wait for a flush, and the total time they waited.
    pub commits_waited: u64,
    pub flush_wait_ns: u64,
    /// Appends that found the ring full, and the total time they waited for space.
    pub ring_full_waits: u64,
    pub ring_full_wait_ns: u64,
    /// `fsync`: time group-commit leaders spent waiting for committers to join their round.
    pub gather_wait_ns: u64,
}

impl LogCounters {
    /// The change from `earlier` to `self`.
    pub fn since(&self, earlier: &LogCounters) -> LogCounters {
        LogCounters {
            commits: self.commits - earlier.commits,
            log_bytes: self.log_bytes - earlier.log_bytes,
            disk_writes: self.disk_writes - earlier.disk_writes,
            disk_write_bytes: self.disk_write_bytes - earlier.disk_write_bytes,
            flushes: self.flushes - earlier.flushes,
            commits_waited: self.commits_waited - earlier.commits_waited,
            flush_wait_ns: self.flush_wait_ns - earlier.flush_wait_ns,
            ring_full_waits: self.ring_full_waits - earlier.ring_full_waits,
            ring_full_wait_ns: self.ring_full_wait_ns - earlier.ring_full_wait_ns,
            gather_wait_ns: self.gather_wait_ns - earlier.gather_wait_ns,
        }
    }

    pub fn avg_write_bytes(&self) -> f64 {
        ratio(self.disk_write_bytes as f64, self.disk_writes)
    }

    pub fn commits_per_flush(&self) -> f64 {
        ratio(self.commits as f64, self.flushes)
    }

    pub fn avg_flush_wait_us(&self) -> f64 {
        ratio(self.flush_wait_ns as f64 / 1000.0, self.commits_waited)
    }
}

fn ratio(total: f64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        total / count as f64
    }
}
