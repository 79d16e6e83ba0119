//! MONITOR: every command the server runs, as a line to each connection that asked, in
//! Redis's format: `1700000000.123456 [0 127.0.0.1:50000] "set" "k" "v"` (the Unix time in
//! microseconds, the database, the client's address or `lua` for a script's calls, and the
//! arguments as written, quoted and escaped as Redis's `sdscatrepr` does).
//!
//! What is shown is what Redis 7.0 shows: a command once it has run (so `SELECT 3` shows
//! database 3), whether it failed or not, but not one refused before it ran (unknown, wrong
//! arity); not the admin commands (CONFIG, SLOWLOG, MONITOR…); an EXEC block's commands when
//! EXEC runs them, then EXEC; a script's EVAL before the commands it calls. AUTH's and
//! HELLO … AUTH's credentials are shown as `(redacted)`.
//!
//! The lines travel as published messages do (`server/pubsub.rs`): collected in the
//! connection's outbox and handed to each monitor's loop after the pass's durability wait,
//! so a monitor never sees a write that its writer's reply could still fail to
//! acknowledge, and a script's lines only if the script committed. A monitor that does not
//! read is disconnected as a subscriber is.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::RwLock;

use super::auth::secret_arguments;
use super::pubsub::{Message, Subscriber};
use crate::command::Command;

/// The connections in MONITOR mode.
#[derive(Default)]
pub struct Monitors {
    watchers: RwLock<Vec<Subscriber>>,
    /// Whether there are any: read by every command, so not behind the lock.
    any: AtomicBool,
}

impl Monitors {
    pub fn add(&self, who: Subscriber) {
        let mut watchers = self.watchers.write();
        watchers.push(who);
        self.any.store(true, Ordering::Relaxed);
    }

    pub fn remove(&self, who: Subscriber) {
        let mut watchers = self.watchers.write();
        watchers.retain(|w| *w != who);
        self.any.store(!watchers.is_empty(), Ordering::Relaxed);
    }

    /// Addresses the line for `args` (run in database `db` by `source`) to every monitor,
    /// in `outbox`, if there are monitors and the command is one they are shown.
    pub fn feed(
        &self,
        command: &Command,
        db: u32,
        source: &str,
        args: &[Vec<u8>],
        outbox: &mut Vec<(Subscriber, Message)>,
    ) {
        if !self.any.load(Ordering::Relaxed) || !shown(command, args) {
            return;
        }
        let line: Arc<str> = line(db, source, args).into();
        for who in self.watchers.read().iter() {
            outbox.push((*who, Message::Monitored(line.clone())));
        }
    }
}

/// Whether monitors see `command` (Redis hides its admin commands, and the admin
/// subcommands of a container: ACL SETUSER, whose rules hold password hashes, CLIENT KILL).
fn shown(command: &Command, args: &[Vec<u8>]) -> bool {
    let subcommand = args
        .get(1)
        .and_then(|typed| crate::command::subcommands::find(command.name, typed));
    !command.flags.contains(&"admin") && !subcommand.is_some_and(|s| s.flags.contains(&"admin"))
}

fn line(db: u32, source: &str, args: &[Vec<u8>]) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut line = format!(
        "{}.{:06} [{db} {source}]",
        now.as_secs(),
        now.subsec_micros()
    );
    let secret = secret_arguments(args);
    for (at, arg) in args.iter().enumerate() {
        line.push(' ');
        if secret.contains(&at) {
            line.push_str("\"(redacted)\"");
        } else {
            quote(arg, &mut line);
        }
    }
    line
}

/// `arg` between double quotes, escaped as Redis's `sdscatrepr`.
fn quote(arg: &[u8], out: &mut String) {
    out.push('"');
    for &byte in arg {
        match byte {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b' '..=b'~' => out.push(char::from(byte)),
            _ => {
                let _ = write!(out, "\\x{byte:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: &[&[u8]]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.to_vec()).collect()
    }

    #[test]
    fn arguments_are_quoted_and_escaped_as_redis_does() {
        let line = line(
            3,
            "127.0.0.1:5",
            &words(&[b"set", b"bin", b"a\nb\x01\"\\ \xff"]),
        );
        let (time, rest) = line.split_once(' ').expect("a time first");
        assert!(
            time.split_once('.').is_some_and(|(_, us)| us.len() == 6),
            "{time}"
        );
        assert_eq!(rest, r#"[3 127.0.0.1:5] "set" "bin" "a\nb\x01\"\\ \xff""#);
    }

    #[test]
    fn credentials_are_redacted() {
        let auth = line(0, "lua", &words(&[b"AUTH", b"user", b"pw"]));
        assert!(
            auth.ends_with(r#""AUTH" "(redacted)" "(redacted)""#),
            "{auth}"
        );
        let hello = line(
            0,
            "a",
            &words(&[b"hello", b"3", b"auth", b"u", b"p", b"setname", b"n"]),
        );
        assert!(
            hello.ends_with(r#""hello" "3" "auth" "(redacted)" "(redacted)" "setname" "n""#),
            "{hello}"
        );
    }
}
