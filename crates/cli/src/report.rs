//! Pieces every benchmark shares: where scratch files go, letting the disk settle between
//! cases, the warm-up / measured window of worker threads, running cases interleaved over
//! several runs, the median run, the medium of a log, the progress bar and the JSON file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use tailstore_log::{LogConfig, LogManager};
use tailstore_media::real::filesystem_type;

use crate::CliResult;

/// Where a benchmark puts its scratch directory when none is given: /var/tmp (on disk, not
/// tmpfs) when it exists, else the system's temporary directory.
pub fn default_scratch_parent() -> PathBuf {
    let var_tmp = Path::new("/var/tmp");
    if var_tmp.is_dir() {
        var_tmp.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The directory of a benchmark's PMEM files: `--pmem-dir` if given (it must exist), else
/// /dev/shm (tmpfs: emulated PMEM) when it has `room` bytes free, else `fallback` (the
/// reports name the directory and its file system). A PMEM file is refused on a file system
/// with less room than its size.
pub fn pmem_dir(given: Option<&PathBuf>, fallback: &Path, room: u64) -> CliResult<PathBuf> {
    let shm = Path::new("/dev/shm");
    match given {
        Some(dir) if !dir.is_dir() => {
            Err(format!("--pmem-dir: directory does not exist: {}", dir.display()).into())
        }
        Some(dir) => Ok(dir.clone()),
        None if tailstore_media::pmem::scratch_dir(room) == shm => Ok(shm.to_path_buf()),
        None => Ok(fallback.to_path_buf()),
    }
}

/// Waits until the disk has written back everything earlier cases left dirty (the `sync`
/// command: a system-wide flush), then gives it a moment to go quiet. Measured by `bench log`:
/// without this, an `fsync` case that follows a case writing 400 MB/s saw 4 ms `fdatasync`s
/// instead of ~0.1 ms.
pub fn settle_disk() {
    let _ = std::process::Command::new("sync").status();
    thread::sleep(Duration::from_millis(100));
}

/// The file system of `dir`, with a note when it is memory (where `fdatasync` is a no-op).
pub fn filesystem_of(dir: &Path) -> String {
    let fs = filesystem_type(dir).unwrap_or_else(|| "unknown fs".into());
    if fs == "tmpfs" {
        format!("{fs} (volatile: fdatasync is a no-op)")
    } else {
        fs
    }
}

/// Where an open log keeps its bytes: the PMEM medium and flush instruction for the PMEM
/// modes, and the file system of the log file for the modes that write one.
pub fn log_medium(log: &LogManager, config: &LogConfig) -> String {
    let log_fs = || format!("log file on {}", filesystem_of(&config.log_dir));
    match (log.pmem_medium(), log.pmem_flush_kind()) {
        (Some(medium), Some(flush)) if config.mode.uses_log_file() => {
            format!("{medium}, {flush}; {}", log_fs())
        }
        (Some(medium), Some(flush)) => format!("{medium}, {flush}"),
        _ => log_fs(),
    }
}

/// The flags worker threads of a timed case watch: keep going while [`Window::running`],
/// count what they do while [`Window::measuring`].
#[derive(Default)]
pub struct Window {
    stop: AtomicBool,
    measuring: AtomicBool,
}

impl Window {
    pub fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }

    pub fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    /// Lets the workers warm up for `warmup`, then measures for `seconds`: returns
    /// `snapshot()` taken at the start and at the end of the measured interval and the
    /// interval's length. Tells the workers to stop before returning.
    pub fn measure<S>(
        &self,
        warmup: Duration,
        seconds: f64,
        mut snapshot: impl FnMut() -> S,
    ) -> (S, S, Duration) {
        thread::sleep(warmup);
        let before = snapshot();
        let began = Instant::now();
        self.measuring.store(true, Ordering::Release);
        thread::sleep(Duration::from_secs_f64(seconds));
        self.measuring.store(false, Ordering::Release);
        let elapsed = began.elapsed();
        let after = snapshot();
        self.stop.store(true, Ordering::Release);
        (before, after, elapsed)
    }
}

/// Runs every case `runs` times with `measure`, all cases once per run. Each run starts one
/// case later, so that no case always follows the same neighbour (a disk still busy with the
/// previous case's writes would otherwise bias one case). Returns the results per case, in
/// run order. Shows a progress bar labelled by `label`.
pub fn run_interleaved<C, R>(
    cases: &[C],
    runs: usize,
    label: impl Fn(&C) -> String,
    mut measure: impl FnMut(&C) -> CliResult<R>,
) -> CliResult<Vec<Vec<R>>> {
    let progress = case_progress((cases.len() * runs) as u64);
    let mut results: Vec<Vec<R>> = cases.iter().map(|_| Vec::new()).collect();
    for run in 0..runs {
        for k in 0..cases.len() {
            let i = (k + run) % cases.len();
            progress.set_message(format!("run {}/{runs}: {}", run + 1, label(&cases[i])));
            results[i].push(measure(&cases[i])?);
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    Ok(results)
}

/// The run with the median `rate` (the lower one of an even count: of two runs, never the
/// better one), and the rate of every run in the order given. `runs` must not be empty.
pub fn median_run<R>(mut runs: Vec<R>, rate: impl Fn(&R) -> f64) -> (R, Vec<f64>) {
    let rates: Vec<f64> = runs.iter().map(&rate).collect();
    runs.sort_by(|a, b| rate(a).total_cmp(&rate(b)));
    let median = runs.swap_remove((runs.len() - 1) / 2);
    (median, rates)
}

/// A progress bar over `len` benchmark cases (hidden when stderr is not a terminal).
pub fn case_progress(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template("{bar:30} {pos}/{len} cases  {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Writes `reports` as pretty JSON to `path` and says so.
pub fn write_json<T: Serialize>(path: &Path, reports: &T) -> CliResult<()> {
    let text = serde_json::to_string_pretty(reports)?;
    write_whole(path, (text + "\n").as_bytes())?;
    println!("\nJSON written to {}", path.display());
    Ok(())
}

/// Writes `bytes` to `path` whole or not at all: into a file beside it, renamed over it
/// once written, so that a full disk leaves no truncated result that reads as complete.
pub fn write_whole(path: &Path, bytes: &[u8]) -> CliResult<()> {
    let cannot = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut partial = tempfile::NamedTempFile::new_in(dir).map_err(cannot)?;
    std::io::Write::write_all(&mut partial, bytes).map_err(cannot)?;
    partial.persist(path).map_err(|e| cannot(e.error))?;
    Ok(())
}

/// `1234567` as `1,234,567`.
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Checks the options every benchmark shares: thread counts, seconds per case, runs.
/// Refuses an output file (`flag`'s) that could not be written, before the work whose
/// results it would hold: its directory missing, or the path a directory. Found only at
/// the end, such a mistake threw the whole run away.
pub fn check_output(flag: &str, path: Option<&Path>) -> CliResult<()> {
    let Some(path) = path else {
        return Ok(());
    };
    if path.is_dir() {
        return Err(format!("{flag}: {} is a directory", path.display()).into());
    }
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) if !parent.is_dir() => {
            Err(format!("{flag}: directory does not exist: {}", parent.display()).into())
        }
        _ => Ok(()),
    }
}

/// `items` without repeats, in the order each first came: a case named twice runs once.
pub fn distinct<T: PartialEq + Copy>(items: &[T]) -> Vec<T> {
    let mut kept: Vec<T> = Vec::with_capacity(items.len());
    for &item in items {
        if !kept.contains(&item) {
            kept.push(item);
        }
    }
    kept
}

pub fn check_run_options(threads: &[usize], seconds: f64, runs: usize) -> CliResult<()> {
    if threads.is_empty() || threads.contains(&0) {
        return Err("--threads needs counts of at least 1".into());
    }
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err("--seconds must be a positive number".into());
    }
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_grouping() {
        let (m, rates) = median_run(vec![3.0, 1.0, 2.0], |&r| r);
        assert_eq!(m, 2.0);
        assert_eq!(rates, vec![3.0, 1.0, 2.0]);
        assert_eq!(median_run(vec![4.0, 1.0, 3.0, 2.0], |&r| r).0, 2.0);
        assert_eq!(median_run(vec![5.0, 1.0], |&r| r).0, 1.0);
        assert_eq!(group(1_000_000), "1,000,000");
        assert_eq!(group(999), "999");
        assert_eq!(distinct(&[3, 1, 3, 2, 1]), vec![3, 1, 2]);
    }

    #[test]
    fn interleaving_rotates_the_order() {
        let mut order = Vec::new();
        let results = run_interleaved(
            &['a', 'b', 'c'],
            2,
            |c| c.to_string(),
            |&c| {
                order.push(c);
                Ok(c)
            },
        )
        .expect("runs");
        assert_eq!(order, vec!['a', 'b', 'c', 'b', 'c', 'a']);
        assert_eq!(results, vec![vec!['a'; 2], vec!['b'; 2], vec!['c'; 2]]);
    }
}
