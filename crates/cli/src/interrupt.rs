//! What an interrupted benchmark leaves behind: nothing of its scratch.
//!
//! `bench log`, `bench engine` and `tpcc compare` put their databases in a scratch
//! directory and their PMEM files (up to gigabytes, on tmpfs: memory) beside a name of
//! their own. SIGINT, SIGTERM or SIGHUP would end the process without running a
//! destructor, leaving all of it. A command registers what it creates here; a thread waits
//! for those signals, removes it, and ends the process with the signal's exit status
//! (128 + its number). The work in progress is thrown away: its results were never
//! complete.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::thread;

use crate::CliResult;

/// Something a command created that an interruption removes.
enum Leftover {
    /// A directory and everything in it.
    Dir(PathBuf),
    /// The files in `dir` whose names start with `prefix` (a PMEM file and its `.pages`).
    Named { dir: PathBuf, prefix: String },
}

static LEFTOVERS: Mutex<Vec<Leftover>> = Mutex::new(Vec::new());

fn leftovers() -> std::sync::MutexGuard<'static, Vec<Leftover>> {
    // A panic while holding it leaves plain data behind: still usable.
    LEFTOVERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// From now on SIGINT, SIGTERM and SIGHUP remove what was registered and end the process
/// (`command` names it in the message).
pub fn clean_up_on_signals(command: &'static str) -> CliResult<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| format!("cannot handle SIGINT, SIGTERM and SIGHUP: {e}"))?;
    thread::Builder::new()
        .name("interrupt".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let removed = remove_all();
                eprintln!(
                    "{command}: interrupted by {}; removed {removed} scratch path(s)",
                    name_of(signal)
                );
                std::process::exit(128 + signal);
            }
        })?;
    Ok(())
}

/// Registers a directory to remove on an interruption.
pub fn remove_dir_on_interrupt(dir: &Path) {
    leftovers().push(Leftover::Dir(dir.to_path_buf()));
}

/// Registers the files of `dir` named `prefix…` to remove on an interruption.
pub fn remove_named_on_interrupt(dir: &Path, prefix: &str) {
    leftovers().push(Leftover::Named {
        dir: dir.to_path_buf(),
        prefix: prefix.to_string(),
    });
}

/// Removes every registered path; how many were there.
fn remove_all() -> usize {
    let mut removed = 0;
    for leftover in leftovers().iter() {
        match leftover {
            Leftover::Dir(dir) => {
                removed += usize::from(std::fs::remove_dir_all(dir).is_ok());
            }
            Leftover::Named { dir, prefix } => {
                let Ok(entries) = std::fs::read_dir(dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let named = entry
                        .file_name()
                        .to_string_lossy()
                        .starts_with(prefix.as_str());
                    if named && std::fs::remove_file(entry.path()).is_ok() {
                        removed += 1;
                    }
                }
            }
        }
    }
    removed
}

/// The name of one of the signals handled here.
pub fn name_of(signal: i32) -> &'static str {
    match signal {
        signal_hook::consts::SIGINT => "SIGINT",
        signal_hook::consts::SIGTERM => "SIGTERM",
        _ => "SIGHUP",
    }
}
