//! The default user's password (Redis's `requirepass`, decision 154): which connections must
//! AUTH before their commands run, and the check of what they send.
//!
//! As in Redis 7, whose only user here is `default`:
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
//! A password is compared by its SHA-256 digest, in a time that does not depend on where
//! the bytes differ (Redis's `time_independent_strcmp` has the same purpose). ACL LIST shows
//! the digest and CONFIG GET requirepass the password itself, as Redis does, to clients that
//! passed the check.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;
use sha2::{Digest, Sha256};
use tailstore_resp::Reply;

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
}

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

    /// AUTH's and HELLO AUTH's check of `user` and `password`.
    pub fn check(&self, user: &[u8], password: &[u8]) -> Result<(), Reply> {
        if user != b"default" {
            return Err(Reply::error(WRONGPASS));
        }
        match &*self.set.read() {
            None => Ok(()),
            Some(set) if same_digest(&set.digest, &digest(password)) => Ok(()),
            Some(_) => Err(Reply::error(WRONGPASS)),
        }
    }

    /// AUTH password: the default user's check, or Redis's refusal when none is set.
    pub fn check_default(&self, password: &[u8]) -> Result<(), Reply> {
        if !self.required() {
            return Err(Reply::error(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ));
        }
        self.check(b"default", password)
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

/// HELLO's refusal to an unauthenticated connection that gave no AUTH.
pub fn hello_refusal() -> Reply {
    Reply::error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
}

fn digest(password: &[u8]) -> [u8; 32] {
    Sha256::digest(password).into()
}

/// Compares every byte, whatever the first difference: the time taken tells nothing of it.
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |differ, (x, y)| differ | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(text: &str) -> Secret {
        Secret(text.as_bytes().to_vec())
    }

    #[test]
    fn no_password_takes_any_for_default_and_refuses_plain_auth() {
        let password = Password::new(None);
        assert!(!password.required());
        assert!(password.check(b"default", b"anything").is_ok());
        assert!(password.check(b"other", b"anything").is_err());
        assert!(password.check_default(b"anything").is_err());
        assert_eq!(password.acl_rule(), "nopass");
        assert_eq!(Password::new(Some(&secret(""))).acl_rule(), "nopass");
    }

    #[test]
    fn a_password_is_checked_and_changed() {
        let password = Password::new(Some(&secret("secret")));
        assert!(password.required());
        assert!(password.check_default(b"secret").is_ok());
        assert!(password.check_default(b"secreT").is_err());
        assert!(password.check_default(b"secret ").is_err());
        assert!(password.check(b"default", b"").is_err());
        assert!(password.check(b"someone", b"secret").is_err());
        assert_eq!(password.setting(), "secret");
        // Redis's ACL LIST for requirepass "secret".
        assert_eq!(
            password.acl_rule(),
            "#2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
        );
        password.change(b"other".to_vec());
        assert!(password.check_default(b"secret").is_err());
        assert!(password.check_default(b"other").is_ok());
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

    #[test]
    fn the_secret_is_not_printed() {
        assert_eq!(format!("{:?}", secret("hunter2")), "Secret(redacted)");
    }
}
