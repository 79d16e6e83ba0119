//! SLOWLOG: the commands whose run took at least `slowlog-log-slower-than` microseconds
//! (10,000 by default; negative turns the log off), newest first, at most
//! `slowlog-max-len` of them (128), as Redis keeps them: an id, the Unix time, the
//! microseconds, the arguments (at most 32, each cut at 128 bytes; credentials shown as
//! `(redacted)`, as MONITOR shows them), the client's address and name. Both settings change at run time with CONFIG SET.
//!
//! A run is the command's execution: from its parsed arguments to its reply, without the
//! wait for durability that the event-loop pass shares among its replies (Redis does not
//! count its `appendfsync always` write either) and without the time a blocking command
//! spent blocked. An EXEC block runs as one engine transaction, so it is timed and logged
//! as one command, where Redis logs the commands inside it one by one.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tailstore_resp::Reply;

use super::auth::secret_arguments;
use super::unix_seconds;
use crate::command::is;

/// Arguments an entry keeps; past that the last one says how many more there were.
const MAX_ARGS: usize = 32;
/// Bytes an argument keeps; past that it says how many more there were.
const MAX_ARG_BYTES: usize = 128;
const DEFAULT_SLOWER_THAN_US: i64 = 10_000;
const DEFAULT_MAX_LEN: u64 = 128;

struct Entry {
    id: u64,
    at: u64,
    micros: u64,
    args: Vec<Vec<u8>>,
    peer: String,
    name: Vec<u8>,
}

pub struct SlowLog {
    entries: Mutex<VecDeque<Entry>>,
    next_id: AtomicU64,
    slower_than_us: AtomicI64,
    max_len: AtomicU64,
}

impl Default for SlowLog {
    fn default() -> Self {
        SlowLog {
            entries: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            slower_than_us: AtomicI64::new(DEFAULT_SLOWER_THAN_US),
            max_len: AtomicU64::new(DEFAULT_MAX_LEN),
        }
    }
}

/// Who ran a command, for its entry.
pub struct Client<'a> {
    pub peer: &'a str,
    pub name: Option<&'a [u8]>,
}

impl SlowLog {
    /// Logs the command `args` whose run began at `started`, if it was slow enough.
    pub fn note(&self, took: Duration, args: &[Vec<u8>], client: Client) {
        let threshold = self.slower_than_us.load(Ordering::Relaxed);
        if threshold < 0 {
            return;
        }
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        if micros < threshold as u64 {
            return;
        }
        let entry = Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            at: unix_seconds(),
            micros,
            args: kept_args(args),
            peer: client.peer.to_string(),
            name: client.name.unwrap_or_default().to_vec(),
        };
        let mut entries = self.entries.lock();
        entries.push_front(entry);
        entries.truncate(self.max_len.load(Ordering::Relaxed) as usize);
    }

    /// SLOWLOG GET [count] | LEN | RESET | HELP.
    pub fn command(&self, args: &[Vec<u8>]) -> Reply {
        let sub = &args[1];
        match args.len() {
            2 if is(sub, "len") => Reply::Int(self.entries.lock().len() as i64),
            2 if is(sub, "reset") => {
                self.entries.lock().clear();
                Reply::ok()
            }
            2 if is(sub, "help") => help(),
            2 | 3 if is(sub, "get") => match args.get(2).map(|count| parse_count(count)) {
                None => self.get(10),
                Some(Some(count)) => self.get(count),
                Some(None) => Reply::error("ERR count should be greater than or equal to -1"),
            },
            _ if ["get", "len", "reset", "help"].iter().any(|known| is(sub, known)) => {
                Reply::error(format!(
                    "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
                    String::from_utf8_lossy(sub)
                ))
            }
            _ => Reply::error(format!(
                "ERR unknown subcommand '{}'. Try SLOWLOG HELP.",
                String::from_utf8_lossy(sub)
            )),
        }
    }

    /// The newest `count` entries (all of them for `usize::MAX`).
    fn get(&self, count: usize) -> Reply {
        let entries = self.entries.lock();
        Reply::Array(entries.iter().take(count).map(describe).collect())
    }

    /// The settings CONFIG GET reports, with their values.
    pub fn settings(&self) -> [(&'static str, String); 2] {
        [
            (
                "slowlog-log-slower-than",
                self.slower_than_us.load(Ordering::Relaxed).to_string(),
            ),
            (
                "slowlog-max-len",
                self.max_len.load(Ordering::Relaxed).to_string(),
            ),
        ]
    }

    /// Checks CONFIG SET of the setting `name` to `value`: `None` if `name` is not one of
    /// the log's, else the change to make or Redis's error.
    pub fn check_setting(&self, name: &str, value: &[u8]) -> Option<Result<Setting, Reply>> {
        let number = crate::command::parse_int(value).ok();
        let refused = |why: &str| {
            Reply::error(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
            ))
        };
        Some(match (name, number) {
            ("slowlog-log-slower-than" | "slowlog-max-len", None) => {
                Err(refused("argument couldn't be parsed into an integer"))
            }
            ("slowlog-log-slower-than", Some(n)) if n >= -1 => Ok(Setting::SlowerThan(n)),
            ("slowlog-log-slower-than", Some(_)) => Err(refused(
                "argument must be between -1 and 9223372036854775807 inclusive",
            )),
            ("slowlog-max-len", Some(n)) if n >= 0 => Ok(Setting::MaxLen(n as u64)),
            ("slowlog-max-len", Some(_)) => Err(refused(
                "argument must be between 0 and 9223372036854775807 inclusive",
            )),
            _ => return None,
        })
    }

    /// Makes a change [`SlowLog::check_setting`] allowed.
    pub fn apply(&self, setting: Setting) {
        match setting {
            Setting::SlowerThan(us) => self.slower_than_us.store(us, Ordering::Relaxed),
            Setting::MaxLen(len) => {
                self.max_len.store(len, Ordering::Relaxed);
                self.entries.lock().truncate(len as usize);
            }
        }
    }
}

/// A change to one of the log's settings.
pub enum Setting {
    SlowerThan(i64),
    MaxLen(u64),
}

/// SLOWLOG GET's count: -1 for all, else at least 0.
fn parse_count(arg: &[u8]) -> Option<usize> {
    let count = crate::command::parse_int(arg).ok()?;
    match count {
        -1 => Some(usize::MAX),
        0.. => Some(count as usize),
        _ => None,
    }
}

fn kept_args(args: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let secret = secret_arguments(args);
    let cut = |(at, arg): (usize, &Vec<u8>)| {
        if secret.contains(&at) {
            return b"(redacted)".to_vec();
        }
        if arg.len() <= MAX_ARG_BYTES {
            return arg.clone();
        }
        let mut kept = arg[..MAX_ARG_BYTES].to_vec();
        kept.extend_from_slice(
            format!("... ({} more bytes)", arg.len() - MAX_ARG_BYTES).as_bytes(),
        );
        kept
    };
    if args.len() <= MAX_ARGS {
        return args.iter().enumerate().map(cut).collect();
    }
    let mut kept: Vec<Vec<u8>> = args[..MAX_ARGS - 1].iter().enumerate().map(cut).collect();
    let more = args.len() - (MAX_ARGS - 1);
    kept.push(format!("... ({more} more arguments)").into_bytes());
    kept
}

fn describe(entry: &Entry) -> Reply {
    Reply::Array(vec![
        Reply::Int(entry.id as i64),
        Reply::Int(entry.at as i64),
        Reply::Int(entry.micros as i64),
        Reply::Array(entry.args.iter().cloned().map(Reply::Bulk).collect()),
        Reply::Bulk(entry.peer.clone().into_bytes()),
        Reply::Bulk(entry.name.clone()),
    ])
}

fn help() -> Reply {
    let lines = [
        "SLOWLOG <subcommand> [<arg>]. Subcommands are:",
        "GET [<count>]",
        "    The newest <count> entries (10 if not given, all for -1), each: id, Unix time,",
        "    microseconds, arguments, client address, client name.",
        "LEN",
        "    The number of entries.",
        "RESET",
        "    Removes every entry.",
        "HELP",
        "    This text.",
    ];
    crate::command::help(&lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: &[&str]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn long_commands_are_cut_as_redis_cuts_them() {
        let many: Vec<Vec<u8>> = (0..40).map(|n| n.to_string().into_bytes()).collect();
        let kept = kept_args(&many);
        assert_eq!(kept.len(), 32);
        assert_eq!(kept[30], b"30");
        assert_eq!(kept[31], b"... (9 more arguments)");
        let long = vec![b"set".to_vec(), vec![b'k'; 130]];
        let kept = kept_args(&long);
        assert_eq!(kept[1].len(), 128 + "... (2 more bytes)".len());
        assert!(kept[1].ends_with(b"... (2 more bytes)"));
    }

    #[test]
    fn only_runs_as_slow_as_the_threshold_are_kept_newest_first() {
        let log = SlowLog::default();
        let client = || Client {
            peer: "127.0.0.1:1",
            name: Some(b"me"),
        };
        log.note(Duration::ZERO, &words(&["get", "fast"]), client());
        assert_eq!(log.entries.lock().len(), 0);
        log.apply(Setting::SlowerThan(0));
        log.note(Duration::ZERO, &words(&["get", "a"]), client());
        log.note(Duration::ZERO, &words(&["get", "b"]), client());
        let entries = log.entries.lock();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].args[1], b"b");
        assert_eq!(entries[0].id, 1);
        drop(entries);
        log.apply(Setting::MaxLen(1));
        assert_eq!(log.entries.lock().len(), 1);
        log.apply(Setting::SlowerThan(-1));
        log.note(Duration::ZERO, &words(&["get", "c"]), client());
        assert_eq!(log.entries.lock()[0].args[1], b"b");
    }
}
