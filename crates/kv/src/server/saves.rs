//! What the clients' SAVE, BGSAVE and BGREWRITEAOF did, each a checkpoint here
//! (`admin::save`): LASTSAVE, and INFO persistence's `rdb_*` and `aof_*` fields, which
//! monitoring watches for a failing or stuck save ("rdb_last_bgsave_status:err").
//! A checkpoint runs on the asking client's event loop, so another client's INFO can see
//! one in progress.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use super::unix_seconds;

/// Which of Redis's two kinds of save a command asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveKind {
    /// SAVE and BGSAVE (Redis: an RDB snapshot).
    Snapshot,
    /// BGREWRITEAOF (Redis: an AOF rewrite; here too what bounds the log a restart replays).
    Rewrite,
}

/// The saves of a server since it started.
pub struct Saves {
    /// Unix time of the last save that succeeded (LASTSAVE; the server's start before one).
    last_at: AtomicU64,
    snapshots: Record,
    rewrites: Record,
}

/// One kind's saves.
struct Record {
    /// Saves that succeeded.
    done: AtomicU64,
    /// Failures since the last success.
    failures_in_a_row: AtomicU64,
    /// Unix time the running save started; 0 when none runs.
    running_since: AtomicU64,
    /// Whether the last save failed.
    last_failed: AtomicBool,
    /// How long the last save took, in whole seconds; -1 before the first.
    last_took_secs: AtomicI64,
}

impl Record {
    fn new() -> Record {
        Record {
            done: AtomicU64::new(0),
            failures_in_a_row: AtomicU64::new(0),
            running_since: AtomicU64::new(0),
            last_failed: AtomicBool::new(false),
            last_took_secs: AtomicI64::new(-1),
        }
    }

    fn in_progress(&self) -> bool {
        self.running_since.load(Ordering::Relaxed) != 0
    }

    /// Seconds the running save has taken so far; -1 when none runs (Redis's field).
    fn current_secs(&self) -> i64 {
        match self.running_since.load(Ordering::Relaxed) {
            0 => -1,
            since => unix_seconds().saturating_sub(since) as i64,
        }
    }

    fn status(&self) -> &'static str {
        if self.last_failed.load(Ordering::Relaxed) {
            "err"
        } else {
            "ok"
        }
    }
}

impl Default for Saves {
    fn default() -> Saves {
        Saves {
            last_at: AtomicU64::new(unix_seconds()),
            snapshots: Record::new(),
            rewrites: Record::new(),
        }
    }
}

impl Saves {
    /// Runs `save` (a checkpoint) as a save of `kind`, recording its time and outcome.
    pub fn run<E>(&self, kind: SaveKind, save: impl FnOnce() -> Result<(), E>) -> Result<(), E> {
        let record = self.record(kind);
        let started = Instant::now();
        record
            .running_since
            .store(unix_seconds().max(1), Ordering::Relaxed);
        let outcome = save();
        let took = i64::try_from(started.elapsed().as_secs()).unwrap_or(i64::MAX);
        record.last_took_secs.store(took, Ordering::Relaxed);
        record
            .last_failed
            .store(outcome.is_err(), Ordering::Relaxed);
        if outcome.is_ok() {
            record.done.fetch_add(1, Ordering::Relaxed);
            record.failures_in_a_row.store(0, Ordering::Relaxed);
            self.last_at.store(unix_seconds(), Ordering::Relaxed);
        } else {
            record.failures_in_a_row.fetch_add(1, Ordering::Relaxed);
        }
        record.running_since.store(0, Ordering::Relaxed);
        outcome
    }

    /// LASTSAVE: the Unix time of the last save that succeeded.
    pub fn last_at(&self) -> u64 {
        self.last_at.load(Ordering::Relaxed)
    }

    fn record(&self, kind: SaveKind) -> &Record {
        match kind {
            SaveKind::Snapshot => &self.snapshots,
            SaveKind::Rewrite => &self.rewrites,
        }
    }

    /// INFO persistence's fields of the saves, in Redis's order.
    pub fn snapshot_fields(&self) -> Vec<(&'static str, String)> {
        let record = &self.snapshots;
        vec![
            (
                "rdb_bgsave_in_progress",
                u8::from(record.in_progress()).to_string(),
            ),
            ("rdb_last_save_time", self.last_at().to_string()),
            ("rdb_last_bgsave_status", record.status().into()),
            (
                "rdb_last_bgsave_time_sec",
                record.last_took_secs.load(Ordering::Relaxed).to_string(),
            ),
            (
                "rdb_current_bgsave_time_sec",
                record.current_secs().to_string(),
            ),
            ("rdb_saves", record.done.load(Ordering::Relaxed).to_string()),
        ]
    }

    /// INFO persistence's fields of the AOF rewrites (BGREWRITEAOF), in Redis's order.
    pub fn rewrite_fields(&self) -> Vec<(&'static str, String)> {
        let record = &self.rewrites;
        vec![
            (
                "aof_rewrite_in_progress",
                u8::from(record.in_progress()).to_string(),
            ),
            ("aof_rewrite_scheduled", "0".into()),
            (
                "aof_last_rewrite_time_sec",
                record.last_took_secs.load(Ordering::Relaxed).to_string(),
            ),
            (
                "aof_current_rewrite_time_sec",
                record.current_secs().to_string(),
            ),
            ("aof_last_bgrewrite_status", record.status().into()),
            (
                "aof_rewrites",
                record.done.load(Ordering::Relaxed).to_string(),
            ),
            (
                "aof_rewrites_consecutive_failures",
                record.failures_in_a_row.load(Ordering::Relaxed).to_string(),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field<'f>(fields: &'f [(&'static str, String)], name: &str) -> &'f str {
        fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no field {name} in {fields:?}"))
    }

    #[test]
    fn a_save_is_counted_timed_and_its_failure_reported_until_one_succeeds() {
        let saves = Saves::default();
        let fields = saves.snapshot_fields();
        assert_eq!(field(&fields, "rdb_saves"), "0");
        assert_eq!(field(&fields, "rdb_last_bgsave_time_sec"), "-1");
        assert_eq!(field(&fields, "rdb_last_bgsave_status"), "ok");

        let seen_running = saves.run(SaveKind::Snapshot, || {
            let fields = saves.snapshot_fields();
            assert_eq!(field(&fields, "rdb_bgsave_in_progress"), "1");
            assert_eq!(field(&fields, "rdb_current_bgsave_time_sec"), "0");
            Ok::<(), ()>(())
        });
        assert_eq!(seen_running, Ok(()));
        let fields = saves.snapshot_fields();
        assert_eq!(field(&fields, "rdb_saves"), "1");
        assert_eq!(field(&fields, "rdb_bgsave_in_progress"), "0");
        assert_eq!(field(&fields, "rdb_current_bgsave_time_sec"), "-1");
        assert_eq!(field(&fields, "rdb_last_bgsave_time_sec"), "0");

        for _ in 0..2 {
            assert_eq!(
                saves.run(SaveKind::Rewrite, || Err("disk full")),
                Err("disk full")
            );
        }
        let rewrites = saves.rewrite_fields();
        assert_eq!(field(&rewrites, "aof_last_bgrewrite_status"), "err");
        assert_eq!(field(&rewrites, "aof_rewrites_consecutive_failures"), "2");
        assert_eq!(field(&rewrites, "aof_rewrites"), "0");
        // The snapshots' record is apart.
        assert_eq!(
            field(&saves.snapshot_fields(), "rdb_last_bgsave_status"),
            "ok"
        );

        assert_eq!(saves.run(SaveKind::Rewrite, || Ok::<(), ()>(())), Ok(()));
        let rewrites = saves.rewrite_fields();
        assert_eq!(field(&rewrites, "aof_last_bgrewrite_status"), "ok");
        assert_eq!(field(&rewrites, "aof_rewrites_consecutive_failures"), "0");
        assert_eq!(field(&rewrites, "aof_rewrites"), "1");
    }
}
