//! The default user's password (Redis's `requirepass`, decision 154): which connections must
//! AUTH before their commands run, and the check of what they send.
//!
//! As in Redis 7 (the ACL users beside `default`, who log in here too, are `server/acl.rs`'s):
//! * With no password (the default), every connection may run everything, and AUTH of the
//!   `default` user takes any password, as Redis's `nopass` user does.
//! * A connection accepted while a password is set starts unauthenticated: every command
//!   but AUTH, HELLO, QUIT and RESET is refused with `NOAUTH`, after the checks Redis makes
//!   first (an unknown command, a wrong number of arguments). AUTH, or HELLO with AUTH,
//!   given the password authenticates it.
//! * An authenticated connection stays so when the password changes (CONFIG SET
//!   requirepass); one that is not may run everything while no password is set. RESET
//!   makes it unauthenticated again if a password is set.
//!
//! Each refused AUTH or HELLO AUTH, and each command an ACL user may not run, is recorded
//! for ACL LOG, as Redis records it: newest first, at most 128 entries (its
//! `acllog-max-len`), a refusal like one of the ten newest (the same reason, context,
//! object and user name, within 60 s) counted in that entry, which moves to the front.
//!
//! A password is compared by its SHA-256 digest, in a time that does not depend on where
//! the bytes differ (Redis's `time_independent_strcmp` has the same purpose). ACL LIST shows
//! the digest and CONFIG GET requirepass the password itself, as Redis does, to clients that
//! passed the check.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};
use tailstore_resp::Reply;

use super::acl::{User, Users};
use crate::command::{lookup, subcommand_check, Command};

/// A password as given on the command line: never printed (`Debug` redacts it).
#[derive(Clone)]
pub struct Secret(pub Vec<u8>);

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Secret, Self::Err> {
        Ok(Secret(text.as_bytes().to_vec()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(redacted)")
    }
}

/// The default user's password, shared by the event loops.
pub struct Password {
    set: RwLock<Option<Set>>,
    /// Whether a password is set: read for each command of an unauthenticated connection
    /// without taking the lock.
    required: AtomicBool,
    /// ACL LOG: the refused attempts, newest first.
    refusals: Mutex<VecDeque<Refusal>>,
}

/// One ACL LOG entry: like refusals (the same reason, context, object and user name).
struct Refusal {
    count: u64,
    /// "auth", or what an ACL user was refused: "command", "key", "channel".
    reason: &'static str,
    /// "toplevel", "multi" or "lua".
    context: &'static str,
    /// AUTH or HELLO for a login; the command, key or channel refused.
    object: Vec<u8>,
    user: Vec<u8>,
    /// The last attempt's time and its client's CLIENT LIST line.
    at: Instant,
    client: String,
}

/// Redis's `acllog-max-len` default.
pub const LOG_MAX_ENTRIES: usize = 128;
/// A refusal is counted in an entry this recent (Redis's `ACL_LOG_GROUPING_MAX_TIME_DELTA`)…
const GROUPING_WINDOW: Duration = Duration::from_secs(60);
/// …among this many of the newest.
const GROUPING_DEPTH: usize = 10;

struct Set {
    text: Vec<u8>,
    digest: [u8; 32],
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

impl Password {
    /// The password the server starts with; `None` or empty: none.
    pub fn new(initial: Option<&Secret>) -> Password {
        let password = Password {
            set: RwLock::new(None),
            required: AtomicBool::new(false),
            refusals: Mutex::new(VecDeque::new()),
        };
        password.change(initial.map(|secret| secret.0.clone()).unwrap_or_default());
        password
    }

    /// Whether connections must authenticate (a password is set).
    pub fn required(&self) -> bool {
        self.required.load(Ordering::Acquire)
    }

    /// CONFIG SET requirepass: `password`, or none if it is empty. Connections keep the
    /// state they have.
    pub fn change(&self, password: Vec<u8>) {
        let mut set = self.set.write();
        *set = (!password.is_empty()).then(|| Set {
            digest: digest(&password),
            text: password,
        });
        self.required.store(set.is_some(), Ordering::Release);
    }

    /// An attempt of `command` ("AUTH" or "HELLO") to log in as `user` (`None`: AUTH's
    /// one-argument form, the default user) with `password`: the ACL user logged in as
    /// (`None` for `default`). A wrong user or password, or a user that is off, is
    /// refused with WRONGPASS and recorded for ACL LOG with `client` (its CLIENT LIST
    /// line); AUTH's one-argument form with no password set is Redis's configuration
    /// error, not a refusal.
    pub fn attempt(
        &self,
        users: &Users,
        command: &'static str,
        user: Option<&[u8]>,
        password: &[u8],
        client: impl FnOnce() -> String,
    ) -> Result<Option<Arc<User>>, Reply> {
        if user.is_none() && !self.required() {
            return Err(Reply::error(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ));
        }
        if let Some(logged_in) = self.login(users, user, password) {
            return Ok(logged_in);
        }
        let object = command.as_bytes().to_vec();
        let user = user.unwrap_or(b"default");
        self.note("auth", "toplevel", object, user, client());
        Err(Reply::error(WRONGPASS))
    }

    /// Whom `password` logs in as `user` (`None`: AUTH's one-argument form), recording
    /// nothing: `Some(None)` for `default`, `None` if it is refused.
    pub fn login(
        &self,
        users: &Users,
        user: Option<&[u8]>,
        password: &[u8],
    ) -> Option<Option<Arc<User>>> {
        if user.is_none() && !self.required() {
            return None; // AUTH <password> with none set: an error, not a login
        }
        let user = user.unwrap_or(b"default");
        if user == b"default" && self.accepts(password) {
            return Some(None);
        }
        let named = users.get(user).filter(|named| named.accepts(password))?;
        Some(Some(named))
    }

    /// Whether `password` is the default user's.
    fn accepts(&self, password: &[u8]) -> bool {
        match &*self.set.read() {
            None => true,
            Some(set) => same_digest(&set.digest, &digest(password)),
        }
    }

    /// Records a refusal for ACL LOG: a login's (reason "auth", object AUTH or HELLO), or
    /// an ACL user's command (`server/acl.rs`).
    pub fn note(
        &self,
        reason: &'static str,
        context: &'static str,
        object: Vec<u8>,
        user: &[u8],
        client: String,
    ) {
        let now = Instant::now();
        let mut refusals = self.refusals.lock();
        let similar = refusals.iter().take(GROUPING_DEPTH).position(|entry| {
            entry.reason == reason
                && entry.context == context
                && entry.object == object
                && entry.user == user
                && now.duration_since(entry.at) < GROUPING_WINDOW
        });
        let entry = match similar.and_then(|at| refusals.remove(at)) {
            Some(entry) => Refusal {
                count: entry.count + 1,
                at: now,
                client,
                ..entry
            },
            None => Refusal {
                count: 1,
                reason,
                context,
                object,
                user: user.to_vec(),
                at: now,
                client,
            },
        };
        refusals.push_front(entry);
        refusals.truncate(LOG_MAX_ENTRIES);
    }

    /// ACL LOG [count]: the newest `count` entries (10 when not given), each a map.
    pub fn refusals_reply(&self, count: usize) -> Reply {
        let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        let refusals = self.refusals.lock();
        let entries = refusals.iter().take(count).map(|entry| {
            Reply::Map(vec![
                (text("count"), Reply::Int(entry.count as i64)),
                (text("reason"), text(entry.reason)),
                (text("context"), text(entry.context)),
                (text("object"), Reply::Bulk(entry.object.clone())),
                (text("username"), Reply::Bulk(entry.user.clone())),
                (
                    text("age-seconds"),
                    Reply::Double(entry.at.elapsed().as_millis() as f64 / 1000.0),
                ),
                (text("client-info"), text(&entry.client)),
            ])
        });
        Reply::Array(entries.collect())
    }

    /// ACL LOG RESET.
    pub fn forget_refusals(&self) {
        self.refusals.lock().clear();
    }

    /// What CONFIG GET requirepass answers: the password, or empty.
    pub fn setting(&self) -> String {
        let set = self.set.read();
        set.as_ref()
            .map(|set| String::from_utf8_lossy(&set.text).into_owned())
            .unwrap_or_default()
    }

    /// The default user's rule in ACL LIST: `nopass`, or the password's digest.
    pub fn acl_rule(&self) -> String {
        match &*self.set.read() {
            None => "nopass".into(),
            Some(set) => format!("#{}", hex(&set.digest)),
        }
    }
}

/// Why a connection that must authenticate first cannot run `args`: `None` when it may (a
/// command Redis marks `no_auth`), and when the command is unknown or has the wrong number
/// of arguments, which Redis answers before it asks for authentication.
pub fn refusal(args: &[Vec<u8>]) -> Option<(&'static Command, Reply)> {
    let command = lookup(&args[0])?;
    if !command.arity_ok(args.len()) || subcommand_check(command, args).is_err() {
        return None;
    }
    match command.name {
        "auth" | "hello" | "quit" | "reset" => None,
        _ => Some((command, Reply::error("NOAUTH Authentication required."))),
    }
}

/// The positions of `args` that carry credentials, which MONITOR and SLOWLOG show as
/// `(redacted)`, as Redis does: AUTH's arguments, the two after HELLO's AUTH, and the
/// value of each `requirepass` pair of CONFIG SET.
pub fn secret_arguments(args: &[Vec<u8>]) -> Vec<usize> {
    let is = |arg: &[u8], word: &str| arg.eq_ignore_ascii_case(word.as_bytes());
    match args {
        [command, ..] if is(command, "auth") => (1..args.len()).collect(),
        [command, rest @ ..] if is(command, "hello") => rest
            .iter()
            .position(|a| is(a, "auth"))
            .map_or_else(Vec::new, |at| vec![at + 2, at + 3]),
        // ACL SETUSER: the user and every rule, as Redis hides them (`#hash` rules are as
        // secret as `>password` ones).
        [command, sub, ..] if is(command, "acl") && is(sub, "setuser") => (2..args.len()).collect(),
        [command, sub, pairs @ ..] if is(command, "config") && is(sub, "set") => pairs
            .chunks_exact(2)
            .enumerate()
            .filter(|(_, pair)| is(&pair[0], "requirepass"))
            .map(|(n, _)| 2 + 2 * n + 1)
            .collect(),
        _ => Vec::new(),
    }
}

/// HELLO's refusal to an unauthenticated connection that gave no AUTH.
pub fn hello_refusal() -> Reply {
    Reply::error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
}

pub(super) fn digest(password: &[u8]) -> [u8; 32] {
    Sha256::digest(password).into()
}

/// Compares every byte, whatever the first difference: the time taken tells nothing of it.
pub(super) fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |differ, (x, y)| differ | (x ^ y)) == 0
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(text: &str) -> Secret {
        Secret(text.as_bytes().to_vec())
    }

    fn auth(password: &Password, user: Option<&str>, given: &str) -> Result<(), Reply> {
        let users = Users::default();
        password
            .attempt(
                &users,
                "AUTH",
                user.map(str::as_bytes),
                given.as_bytes(),
                String::new,
            )
            .map(|_| ())
    }

    /// A refused login of `user` by `command`, as `attempt` records it.
    fn refused(password: &Password, command: &str, user: &[u8], client: String) {
        password.note(
            "auth",
            "toplevel",
            command.as_bytes().to_vec(),
            user,
            client,
        );
    }

    #[test]
    fn no_password_takes_any_for_default_and_refuses_plain_auth() {
        let password = Password::new(None);
        assert!(!password.required());
        assert!(auth(&password, Some("default"), "anything").is_ok());
        assert!(auth(&password, Some("other"), "anything").is_err());
        assert_eq!(
            auth(&password, None, "anything"),
            Err(Reply::error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"))
        );
        // Only the refused user is logged: the configuration error is no attempt.
        assert_eq!(logged(&password), [(1, "AUTH".into(), "other".into())]);
        assert_eq!(password.acl_rule(), "nopass");
        assert_eq!(Password::new(Some(&secret(""))).acl_rule(), "nopass");
    }

    #[test]
    fn a_password_is_checked_and_changed() {
        let password = Password::new(Some(&secret("secret")));
        assert!(password.required());
        assert!(auth(&password, None, "secret").is_ok());
        assert!(auth(&password, Some("default"), "secret").is_ok());
        assert_eq!(
            auth(&password, None, "secreT"),
            Err(Reply::error(WRONGPASS))
        );
        assert!(auth(&password, None, "secret ").is_err());
        assert!(auth(&password, Some("default"), "").is_err());
        assert!(auth(&password, Some("someone"), "secret").is_err());
        assert_eq!(password.setting(), "secret");
        // Redis's ACL LIST for requirepass "secret".
        assert_eq!(
            password.acl_rule(),
            "#2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
        );
        password.change(b"other".to_vec());
        assert!(auth(&password, None, "secret").is_err());
        assert!(auth(&password, None, "other").is_ok());
        password.change(Vec::new());
        assert!(!password.required());
        assert_eq!(password.setting(), "");
    }

    #[test]
    fn only_no_auth_commands_and_malformed_ones_pass_unauthenticated() {
        let args = |words: &[&str]| -> Vec<Vec<u8>> {
            words.iter().map(|w| w.as_bytes().to_vec()).collect()
        };
        for allowed in [&["AUTH", "x"][..], &["hello", "3"], &["QUIT"], &["reset"]] {
            assert!(refusal(&args(allowed)).is_none(), "{allowed:?}");
        }
        // Answered by the usual path: unknown, or the wrong number of arguments.
        for malformed in [&["nosuchcommand"][..], &["GET"], &["reset", "x"]] {
            assert!(refusal(&args(malformed)).is_none(), "{malformed:?}");
        }
        for refused in [
            &["PING"][..],
            &["GET", "k"],
            &["SHUTDOWN"],
            &["CONFIG", "GET", "*"],
        ] {
            assert!(refusal(&args(refused)).is_some(), "{refused:?}");
        }
    }

    /// The entries of ACL LOG as (count, command, user), newest first.
    fn logged(password: &Password) -> Vec<(i64, String, String)> {
        let Reply::Array(entries) = password.refusals_reply(usize::MAX) else {
            panic!("ACL LOG is an array");
        };
        entries
            .into_iter()
            .map(|entry| {
                let Reply::Map(pairs) = entry else {
                    panic!("an entry is a map")
                };
                let field = |name: &str| {
                    let at = pairs
                        .iter()
                        .position(|(key, _)| *key == Reply::Bulk(name.as_bytes().to_vec()));
                    pairs[at.expect("the field")].1.clone()
                };
                let text = |reply: Reply| match reply {
                    Reply::Bulk(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    other => panic!("{other:?}"),
                };
                let Reply::Int(count) = field("count") else {
                    panic!("count")
                };
                (count, text(field("object")), text(field("username")))
            })
            .collect()
    }

    #[test]
    fn refusals_are_logged_newest_first_and_like_ones_counted_together() {
        let password = Password::new(Some(&secret("pw")));
        refused(&password, "AUTH", b"default", "client 1".into());
        refused(&password, "AUTH", b"bob", "client 1".into());
        refused(&password, "HELLO", b"default", "client 2".into());
        refused(&password, "AUTH", b"default", "client 3".into());
        assert_eq!(
            logged(&password),
            [
                (2, "AUTH".into(), "default".into()),
                (1, "HELLO".into(), "default".into()),
                (1, "AUTH".into(), "bob".into()),
            ]
        );
        // Only the ten newest are looked at for a like entry.
        for user in 0..10 {
            refused(
                &password,
                "AUTH",
                user.to_string().as_bytes(),
                String::new(),
            );
        }
        refused(&password, "AUTH", b"bob", String::new());
        let log = logged(&password);
        assert_eq!(log[0], (1, "AUTH".into(), "bob".into()));
        assert_eq!(log.len(), 14);
        for user in 0..LOG_MAX_ENTRIES {
            refused(
                &password,
                "HELLO",
                user.to_string().as_bytes(),
                String::new(),
            );
        }
        assert_eq!(logged(&password).len(), LOG_MAX_ENTRIES);
        password.forget_refusals();
        assert!(logged(&password).is_empty());
    }

    #[test]
    fn credentials_are_found_where_redis_finds_them() {
        let args = |words: &[&str]| -> Vec<Vec<u8>> {
            words.iter().map(|w| w.as_bytes().to_vec()).collect()
        };
        assert_eq!(secret_arguments(&args(&["AUTH", "pw"])), [1]);
        assert_eq!(secret_arguments(&args(&["auth", "user", "pw"])), [1, 2]);
        assert_eq!(
            secret_arguments(&args(&["hello", "3", "AUTH", "u", "p", "SETNAME", "n"])),
            [3, 4]
        );
        assert!(secret_arguments(&args(&["hello", "3", "setname", "n"])).is_empty());
        assert_eq!(
            secret_arguments(&args(&[
                "CONFIG",
                "SET",
                "slowlog-max-len",
                "5",
                "REQUIREPASS",
                "pw",
                "requirepass",
            ])),
            [5]
        );
        assert!(secret_arguments(&args(&["config", "get", "requirepass"])).is_empty());
        assert!(secret_arguments(&args(&["GET", "auth"])).is_empty());
        assert_eq!(
            secret_arguments(&args(&[
                "ACL", "SETUSER", "bob", "on", ">pw", "+@all", "<old"
            ])),
            [2, 3, 4, 5, 6]
        );
    }

    #[test]
    fn the_secret_is_not_printed() {
        assert_eq!(format!("{:?}", secret("hunter2")), "Secret(redacted)");
    }
}
