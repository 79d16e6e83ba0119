//! What `bench engine` does to the database, all through its public transactional API: the
//! table and its rows, loading them, the warm-up scans, and worker threads running point
//! lookups or single-row inserts, each in its own transaction, over a timed window.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tailstore_engine::{Database, EngineError, EngineStats, KeyRange, Table};
use tailstore_storage::{Column, ColumnType, ScanDirection, Schema, Value};

use crate::latency::LatencyRecorder;
use crate::report::Window;
use crate::CliResult;

/// The benchmark's table.
pub const TABLE: &str = "bench";

/// Bytes of the `id` column; the rest of a row is its payload.
pub const ID_BYTES: usize = 8;

/// Rows per transaction while loading.
pub const LOAD_BATCH: u64 = 1_000;

/// Rows per read-only transaction of the warm-up scans.
const WARM_CHUNK: u64 = 10_000;

/// The rows: `id INT64 PRIMARY KEY, payload VARCHAR(row_bytes - 8)`, every payload exactly
/// that long, so that a row is `row_bytes` bytes of column data.
#[derive(Clone, Copy, Debug)]
pub struct Rows {
    pub row_bytes: usize,
}

impl Rows {
    pub fn payload_len(self) -> usize {
        self.row_bytes - ID_BYTES
    }

    pub fn schema(self) -> CliResult<Schema> {
        let columns = vec![
            Column::new("id", ColumnType::Int64),
            Column::new("payload", ColumnType::Varchar(self.payload_len() as u32)),
        ];
        Ok(Schema::new(columns, vec![0], Vec::new())?)
    }

    /// Row `id`: its payload is a letter chosen by the id, the id in hex, then that letter
    /// repeated (cut to the payload's length, at least 1).
    pub fn row(self, id: u64) -> Vec<Value> {
        let len = self.payload_len();
        let mut payload = format!("{}{id:016x}", letter(id));
        payload.truncate(len);
        let fill = len - payload.len();
        payload.extend(std::iter::repeat_n(letter(id), fill));
        vec![Value::Int(id as i64), Value::Text(payload)]
    }

    /// Checks that a lookup of `id` found row `id`.
    pub fn check(self, id: u64, found: Option<Vec<Value>>) -> Result<(), String> {
        let row = found.ok_or_else(|| format!("row {id} is missing from the table"))?;
        let ok = match row.as_slice() {
            [Value::Int(got), Value::Text(payload)] => {
                *got == id as i64
                    && payload.len() == self.payload_len()
                    && payload.starts_with(letter(id))
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!("row {id} has wrong contents: {row:?}"))
        }
    }
}

fn letter(id: u64) -> char {
    char::from(b'a' + (id % 26) as u8)
}

/// Inserts rows `0..rows`, [`LOAD_BATCH`] per transaction, showing a progress bar.
pub fn load(db: &Database, table: &Table, rows: Rows, count: u64) -> CliResult<()> {
    let bar = ProgressBar::new(count);
    let style = ProgressStyle::with_template("loading {bar:30} {pos}/{len} rows  {per_sec}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    for start in (0..count).step_by(LOAD_BATCH as usize) {
        let end = (start + LOAD_BATCH).min(count);
        db.run(3, |txn| {
            (start..end).try_for_each(|id| txn.insert(table, &rows.row(id)))
        })
        .map_err(|e| format!("loading rows {start}..{end}: {e}"))?;
        bar.inc(end - start);
    }
    bar.finish_and_clear();
    Ok(())
}

/// Reads every row once, in key order (read-only transactions of [`WARM_CHUNK`] rows, rolled
/// back: there is nothing to validate), so that a pool holding all data holds it before the
/// measurement starts.
pub fn warm(db: &Database, table: &Table, count: u64) -> CliResult<()> {
    for start in (0..count).step_by(WARM_CHUNK as usize) {
        let end = start + WARM_CHUNK;
        let range = KeyRange::new(
            Bound::Included(vec![Value::Int(start as i64)]),
            Bound::Excluded(vec![Value::Int(end as i64)]),
        );
        let mut txn = db.begin();
        txn.scan(table, &range, ScanDirection::Ascending, WARM_CHUNK as usize)?;
        txn.rollback();
    }
    Ok(())
}

/// Why a step (one transaction) of a worker did not count.
pub enum StepError {
    /// The transaction aborted (retryable): counted, and the worker goes on.
    Abort,
    /// Anything else ends the benchmark.
    Fatal(String),
}

impl From<EngineError> for StepError {
    fn from(err: EngineError) -> Self {
        if err.is_retryable() {
            StepError::Abort
        } else {
            StepError::Fatal(err.to_string())
        }
    }
}

/// `per_txn` random point lookups in one read-only transaction; returns the lookups done.
pub fn lookup_step(
    db: &Database,
    table: &Table,
    rows: Rows,
    count: u64,
    per_txn: usize,
    rng: &mut Rng,
) -> Result<u64, StepError> {
    let mut txn = db.begin();
    for _ in 0..per_txn {
        let id = rng.below(count);
        let found = txn.get(table, &[Value::Int(id as i64)])?;
        rows.check(id, found).map_err(StepError::Fatal)?;
    }
    txn.commit()?;
    Ok(per_txn as u64)
}

/// One row inserted and committed in its own transaction; ids come from `next`.
pub fn insert_step(
    db: &Database,
    table: &Table,
    rows: Rows,
    next: &AtomicU64,
) -> Result<u64, StepError> {
    let id = next.fetch_add(1, Ordering::Relaxed);
    let mut txn = db.begin();
    txn.insert(table, &rows.row(id))?;
    txn.commit()?;
    Ok(1)
}

/// What the workers did in the measured interval.
pub struct Tally {
    /// Lookups or inserted rows.
    pub ops: u64,
    /// Committed transactions.
    pub txns: u64,
    pub aborts: u64,
    /// Per committed transaction, from `begin` to the end of `commit`.
    pub latency: LatencyRecorder,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            ops: 0,
            txns: 0,
            aborts: 0,
            latency: LatencyRecorder::new(),
        }
    }

    fn add(&mut self, other: &Tally) {
        self.ops += other.ops;
        self.txns += other.txns;
        self.aborts += other.aborts;
        self.latency.merge(&other.latency);
    }
}

/// One timed run: the workers' tally and the database's counters around the measured interval.
pub struct Timed {
    pub tally: Tally,
    pub before: EngineStats,
    pub after: EngineStats,
    pub elapsed: Duration,
}

/// Runs `step` in a loop on `threads` threads: a warm-up of a fifth of `seconds` (at most
/// half a second), then `seconds` measured. Thread `t` draws from `Rng` stream `(seed, t)`.
pub fn drive<F>(db: &Database, threads: usize, seconds: f64, seed: u64, step: F) -> CliResult<Timed>
where
    F: Fn(&mut Rng) -> Result<u64, StepError> + Sync,
{
    let window = Window::default();
    let warmup = Duration::from_secs_f64((seconds / 5.0).min(0.5));
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (window, step) = (&window, &step);
                scope.spawn(move || work(window, step, Rng::stream(seed, t as u64)))
            })
            .collect();
        let (before, after, elapsed) = window.measure(warmup, seconds, || db.stats());
        let mut tally = Tally::new();
        for worker in workers {
            let done = worker.join().map_err(|_| "a worker thread panicked")??;
            tally.add(&done);
        }
        Ok(Timed {
            tally,
            before,
            after,
            elapsed,
        })
    })
}

fn work<F>(window: &Window, step: &F, mut rng: Rng) -> Result<Tally, String>
where
    F: Fn(&mut Rng) -> Result<u64, StepError>,
{
    let mut tally = Tally::new();
    while window.running() {
        let began = Instant::now();
        let outcome = step(&mut rng);
        if !window.measuring() {
            if let Err(StepError::Fatal(err)) = outcome {
                return Err(err);
            }
            continue;
        }
        match outcome {
            Ok(ops) => {
                tally.ops += ops;
                tally.txns += 1;
                tally.latency.record_ns(began.elapsed().as_nanos() as u64);
            }
            Err(StepError::Abort) => tally.aborts += 1,
            Err(StepError::Fatal(err)) => return Err(err),
        }
    }
    Ok(tally)
}

/// SplitMix64: a small, fast generator; each thread gets its own stream.
pub struct Rng(u64);

impl Rng {
    pub fn stream(seed: u64, stream: u64) -> Rng {
        Rng((seed << 32) ^ (stream + 1).wrapping_mul(0x2545_F491_4F6C_DD1D))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (multiply-shift; the bias is negligible for n ≪ 2^64).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_the_asked_size_and_check() {
        let rows = Rows { row_bytes: 100 };
        let row = rows.row(0x1234);
        match &row[1] {
            Value::Text(p) => assert_eq!(p.len(), 92),
            other => panic!("payload {other:?}"),
        }
        assert!(rows.check(0x1234, Some(row.clone())).is_ok());
        assert!(rows.check(0x1235, Some(row)).is_err());
        assert!(rows.check(7, None).is_err());
        let short = Rows { row_bytes: 12 };
        assert!(short.check(99, Some(short.row(99))).is_ok());
    }

    #[test]
    fn rng_stays_below() {
        let mut rng = Rng::stream(1, 0);
        assert!((0..1000).all(|_| rng.below(10) < 10));
    }
}
