//! ACL users (decision 162): users besides `default`, each with its passwords and what it
//! may run (commands, subcommands, categories), touch (key patterns) and publish or
//! subscribe to (channel patterns), made by ACL SETUSER with Redis 7.0's rules and checked
//! before every command of a connection logged in as one.
//!
//! * `default` stays the user of `requirepass` (`server/auth.rs`): every permission, its
//!   password the setting's. ACL SETUSER refuses to change it.
//! * A user's command rules are kept in order and read the way Redis applies them to its
//!   bitmap: the last rule that names a command (by itself, its subcommand, a category it
//!   is in, or `@all`) decides, and `+@all` or `-@all` starts the list over. A category
//!   is the subcommand's where there is one (`-@dangerous` refuses CLIENT KILL, not
//!   CLIENT SETNAME), from `command/categories.rs`.
//! * A key pattern allows reading and writing the keys it matches (`~pattern`,
//!   `%RW~pattern`), or one of them (`%R~pattern`, `%W~pattern`): which of a command's
//!   keys it reads and which it writes come from the key specifications
//!   (`command/key_specs.rs`), as in Redis.
//! * Selectors (`(~app:* +get)`) are further sets of commands, keys and channels: a
//!   command runs if the user's own set or one selector allows it whole, and a refusal is
//!   the one Redis would pick among theirs.
//! * A connection holds its user as of its login and reads it again when ACL SETUSER or
//!   DELUSER changed the users since (a counter read per command); a deleted user's
//!   connections are closed.
//! * Users are kept, as Redis keeps them, in an ACL file (`serve --aclfile`): read at
//!   start and by ACL LOAD, written by ACL SAVE. Without one, a restart starts with
//!   `default` alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use tailstore_resp::Reply;

use super::auth::{digest, hex, same_digest, Password};
use super::clients::ClientFilter;
use super::connection::Connection;
use super::Shared;
use crate::command::{categories, lookup, matches, subcommands, Command};

/// A user made by ACL SETUSER.
#[derive(Clone, Debug)]
pub struct User {
    pub name: Vec<u8>,
    enabled: bool,
    nopass: bool,
    /// SHA-256 digests of its passwords.
    passwords: Vec<[u8; 32]>,
    /// What the user may run, touch and publish to (Redis's root selector).
    root: Permissions,
    /// Further sets of permissions (Redis's selectors, `(~app:* +get)`): a command any one
    /// of them allows whole (its command, keys and channels) runs.
    selectors: Vec<Permissions>,
    /// `sanitize-payload` (true) or `skip-sanitize-payload` (false), as given; tailstore
    /// checks every RESTORE payload whole either way.
    sanitize: Option<bool>,
}

/// Commands, key patterns and channel patterns: a user's own, or one of its selectors.
#[derive(Clone, Debug, PartialEq)]
struct Permissions {
    /// In order; empty: no command.
    commands: Vec<CommandRule>,
    keys: Patterns,
    channels: Patterns,
}

#[derive(Clone, Debug, PartialEq)]
enum Patterns {
    All,
    Some(Vec<Pattern>),
}

/// A key or channel pattern with what it allows of the keys it matches (channels: both).
#[derive(Clone, Debug, PartialEq)]
struct Pattern {
    text: Vec<u8>,
    access: Access,
}

/// Reading (`%R~`), writing (`%W~`), or both (`~`, `%RW~`), as bits.
type Access = u8;
const READ: Access = 1;
const WRITE: Access = 2;
const READ_WRITE: Access = READ | WRITE;

#[derive(Clone, Copy, Debug, PartialEq)]
struct CommandRule {
    allow: bool,
    what: Selector,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Selector {
    All,
    /// A category's bit.
    Category(u32),
    Command(&'static str),
    /// A container's subcommand: `config|get`.
    Subcommand(&'static str, &'static str),
}

/// Why a user may not run a command.
#[derive(Debug, PartialEq)]
pub enum Denial {
    /// The command (its full name: `config|set`).
    Command(String),
    Key(Vec<u8>),
    Channel(Vec<u8>),
    /// SORT's BY pattern, or its GET, which read keys no pattern names (Redis allows them
    /// only to users with every key).
    SortBy,
    SortGet,
}

/// Where a command was refused, as ACL LOG's `context` says.
#[derive(Clone, Copy)]
pub enum Context {
    TopLevel,
    Multi,
    Script,
}

impl User {
    /// A new user: off, no password, no command, key or channel (Redis 7.0's defaults,
    /// `acl-pubsub-default resetchannels` among them).
    fn new(name: &[u8]) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            root: Permissions::none(),
            selectors: Vec::new(),
            sanitize: None,
        }
    }

    /// Whether `password` logs in as this user.
    pub fn accepts(&self, password: &[u8]) -> bool {
        let given = digest(password);
        self.enabled && (self.nopass || self.passwords.iter().any(|kept| same_digest(kept, &given)))
    }

    /// Whether the user may run `command` (`args`, the name first) with its keys and
    /// channels: whether its own permissions or one of its selectors allow all three. When
    /// none does, the refusal is Redis's choice among theirs: the one that got furthest
    /// (a command refused, then a key, then a channel), and of those the one of the latest
    /// argument. The command is known and its arity and subcommand were checked.
    pub fn check(&self, command: &Command, args: &[Vec<u8>]) -> Result<(), Denial> {
        let sub = subcommands::named(command.name, args);
        // Logging in (again, as another user) and leaving are open to every user, as the
        // commands Redis flags `no_auth`.
        let open_to_all = matches!(command.name, "auth" | "hello" | "quit" | "reset");
        let mut refusals = Vec::new();
        for permissions in self.permission_sets() {
            match permissions.check(command, sub, args, open_to_all) {
                Ok(()) => return self.may_sort_by_patterns(command, args),
                Err(refusal) => refusals.push(refusal),
            }
        }
        let rank = |(denial, at): &(Denial, usize)| {
            let stage = match denial {
                Denial::Command(_) => 0,
                Denial::Key(_) | Denial::SortBy | Denial::SortGet => 1,
                Denial::Channel(_) => 2,
            };
            (stage, *at)
        };
        // The first of the highest rank, as Redis replaces its choice only by a higher one.
        let mut chosen = refusals.remove(0);
        for refusal in refusals {
            if rank(&refusal) > rank(&chosen) {
                chosen = refusal;
            }
        }
        Err(chosen.0)
    }

    /// The user's own permissions, then its selectors'.
    fn permission_sets(&self) -> impl Iterator<Item = &Permissions> {
        std::iter::once(&self.root).chain(&self.selectors)
    }

    /// SORT's options that read keys by pattern (BY with a `*`, GET) are for users that
    /// may read every key, as Redis's SORT checks when it runs.
    fn may_sort_by_patterns(&self, command: &Command, args: &[Vec<u8>]) -> Result<(), Denial> {
        let reads_every_key = self.permission_sets().any(Permissions::reads_every_key);
        if matches!(command.name, "sort" | "sort_ro") && !reads_every_key {
            return sort_options_allowed(args);
        }
        Ok(())
    }

    /// Applies one ACL SETUSER rule (a selector's rules merged into one: see
    /// [`merge_selectors`]); Redis's reason if it is refused.
    fn apply(&mut self, rule: &[u8]) -> Result<(), String> {
        let text = String::from_utf8_lossy(rule);
        let word = text.to_ascii_lowercase();
        match word.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "sanitize-payload" => self.sanitize = Some(true),
            "skip-sanitize-payload" => self.sanitize = Some(false),
            "clearselectors" => self.selectors.clear(),
            "reset" => {
                *self = User {
                    sanitize: Some(true),
                    ..User::new(&self.name)
                }
            }
            _ => return self.apply_other(rule, &word),
        }
        Ok(())
    }

    /// A password rule, a selector, or a rule of the user's own permissions.
    fn apply_other(&mut self, rule: &[u8], word: &str) -> Result<(), String> {
        match rule.first() {
            Some(b'>') => {
                let kept = digest(&rule[1..]);
                self.add_password(kept);
            }
            Some(b'#') => self.add_password(parse_digest(&rule[1..])?),
            Some(b'<') => self.remove_password(&digest(&rule[1..]))?,
            Some(b'!') => self.remove_password(&parse_digest(&rule[1..])?)?,
            Some(b'(') if rule.ends_with(b")") => {
                let mut selector = Permissions::none();
                for inner in rule[1..rule.len() - 1]
                    .split(u8::is_ascii_whitespace)
                    .filter(|w| !w.is_empty())
                {
                    selector.apply(inner, &String::from_utf8_lossy(inner).to_ascii_lowercase())?;
                }
                self.selectors.push(selector);
            }
            _ => self.root.apply(rule, word)?,
        }
        Ok(())
    }

    fn add_password(&mut self, kept: [u8; 32]) {
        self.nopass = false;
        if !self.passwords.contains(&kept) {
            self.passwords.push(kept);
        }
    }

    fn remove_password(&mut self, kept: &[u8; 32]) -> Result<(), String> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != kept);
        if self.passwords.len() == before {
            return Err(
                "The password you are trying to remove from the user does not exist".into(),
            );
        }
        Ok(())
    }

    /// The user's rules as ACL LIST writes them (after `user NAME `).
    fn describe(&self) -> String {
        let mut words = self.flags();
        words.extend(self.passwords.iter().map(|p| format!("#{}", hex(p))));
        words.push(self.root.describe());
        words.extend(
            self.selectors
                .iter()
                .map(|selector| format!("({})", selector.describe())),
        );
        words.join(" ")
    }

    fn flags(&self) -> Vec<String> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }.to_string()];
        if self.nopass {
            flags.push("nopass".into());
        }
        match self.sanitize {
            Some(true) => flags.push("sanitize-payload".into()),
            Some(false) => flags.push("skip-sanitize-payload".into()),
            None => {}
        }
        flags
    }

    /// ACL GETUSER's reply.
    fn getuser_reply(&self) -> Reply {
        let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        getuser_reply(
            self.flags().iter().map(|f| text(f)).collect(),
            self.passwords.iter().map(|p| text(&hex(p))).collect(),
            self.root.getuser_fields(),
            self.selectors
                .iter()
                .map(|selector| Reply::Map(selector.getuser_fields()))
                .collect(),
        )
    }
}

impl Permissions {
    /// No command, key or channel (a new user's, and a new selector's).
    fn none() -> Permissions {
        Permissions {
            commands: Vec::new(),
            keys: Patterns::Some(Vec::new()),
            channels: Patterns::Some(Vec::new()),
        }
    }

    /// Whether these permissions allow the command, its keys and its channels; if not,
    /// the refusal and the position of the argument refused (0 for the command).
    fn check(
        &self,
        command: &Command,
        sub: Option<&str>,
        args: &[Vec<u8>],
        open_to_all: bool,
    ) -> Result<(), (Denial, usize)> {
        if !open_to_all && !self.may_run(command.name, sub) {
            let name = match sub {
                Some(sub) => format!("{}|{sub}", command.name),
                None => command.name.to_string(),
            };
            return Err((Denial::Command(name), 0));
        }
        if let Patterns::Some(patterns) = &self.keys {
            for key in command.keys_with_flags(args) {
                let needs =
                    if key.reads() { READ } else { 0 } | if key.writes() { WRITE } else { 0 };
                let name = &args[key.at];
                let allows = |p: &Pattern| p.access & needs == needs && matches(&p.text, name);
                if !patterns.iter().any(allows) {
                    return Err((Denial::Key(name.clone()), key.at));
                }
            }
        }
        if let (Patterns::Some(allowed), Some((as_patterns, from, channels))) =
            (&self.channels, channels_named(command, args))
        {
            for (at, channel) in channels.iter().enumerate() {
                let fits = |p: &Pattern| {
                    if as_patterns {
                        p.text == *channel // a pattern subscription only to a pattern allowed as it is
                    } else {
                        matches(&p.text, channel)
                    }
                };
                if !allowed.iter().any(fits) {
                    return Err((Denial::Channel(channel.clone()), from + at));
                }
            }
        }
        Ok(())
    }

    /// The command rules' verdict on `command` (with `sub`, a container's subcommand).
    fn may_run(&self, command: &str, sub: Option<&str>) -> bool {
        let bits = match sub {
            Some(sub) => categories::of(&format!("{command}|{sub}")),
            None => categories::of(command),
        };
        let names = |rule: &CommandRule| match rule.what {
            Selector::All => true,
            Selector::Category(bit) => bits & bit != 0,
            Selector::Command(name) => name == command,
            Selector::Subcommand(name, of) => name == command && Some(of) == sub,
        };
        self.commands
            .iter()
            .rev()
            .find(|rule| names(rule))
            .is_some_and(|rule| rule.allow)
    }

    /// Whether a key pattern lets every key be read (Redis asks whether one allows reading
    /// the key `*`: `allkeys`, or a pattern that matches that name).
    fn reads_every_key(&self) -> bool {
        match &self.keys {
            Patterns::All => true,
            Patterns::Some(patterns) => patterns
                .iter()
                .any(|p| p.access & READ != 0 && matches(&p.text, b"*")),
        }
    }

    /// Applies one rule on commands, keys or channels (`word`: the rule in lowercase).
    fn apply(&mut self, rule: &[u8], word: &str) -> Result<(), String> {
        match word {
            "allkeys" => self.keys = Patterns::All,
            "resetkeys" => self.keys = Patterns::Some(Vec::new()),
            "allchannels" => self.channels = Patterns::All,
            "resetchannels" => self.channels = Patterns::Some(Vec::new()),
            "allcommands" => self.add_command_rule(true, Selector::All),
            "nocommands" => self.add_command_rule(false, Selector::All),
            _ => match rule.first() {
                Some(b'~') => add_pattern(&mut self.keys, &rule[1..], READ_WRITE, KEYS_AFTER_ALL)?,
                Some(b'%') => {
                    let (access, pattern) = key_pattern_with_permissions(&rule[1..])?;
                    add_pattern(&mut self.keys, pattern, access, KEYS_AFTER_ALL)?;
                }
                Some(b'&') => add_pattern(
                    &mut self.channels,
                    &rule[1..],
                    READ_WRITE,
                    CHANNELS_AFTER_ALL,
                )?,
                Some(b'+') => self.add_command_rule(true, selector(&word[1..])?),
                Some(b'-') => self.add_command_rule(false, selector(&word[1..])?),
                _ => return Err("Syntax error".into()),
            },
        }
        Ok(())
    }

    /// A rule on every command starts the list over: nothing before it still decides.
    fn add_command_rule(&mut self, allow: bool, what: Selector) {
        if what == Selector::All {
            self.commands.clear();
            if !allow {
                return; // an empty list allows nothing
            }
        }
        self.commands.push(CommandRule { allow, what });
    }

    /// The permissions as ACL LIST writes them: keys, channels, commands.
    fn describe(&self) -> String {
        let mut words = pattern_words(&self.keys, '~');
        if self.channels != Patterns::All {
            words.push("resetchannels".into());
        }
        words.extend(pattern_words(&self.channels, '&'));
        words.push(self.command_words());
        words.join(" ")
    }

    fn command_words(&self) -> String {
        let mut words = Vec::new();
        if self.commands.first().map(|r| r.what) != Some(Selector::All) {
            words.push("-@all".to_string());
        }
        for rule in &self.commands {
            let sign = if rule.allow { '+' } else { '-' };
            let what = match rule.what {
                Selector::All => "@all".to_string(),
                Selector::Category(bit) => {
                    format!("@{}", categories::names(bit).next().unwrap_or_default())
                }
                Selector::Command(name) => name.to_string(),
                Selector::Subcommand(name, sub) => format!("{name}|{sub}"),
            };
            words.push(format!("{sign}{what}"));
        }
        words.join(" ")
    }

    /// ACL GETUSER's `commands`, `keys` and `channels`.
    fn getuser_fields(&self) -> Vec<(Reply, Reply)> {
        let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        vec![
            (text("commands"), text(&self.command_words())),
            (
                text("keys"),
                text(&pattern_words(&self.keys, '~').join(" ")),
            ),
            (
                text("channels"),
                text(&pattern_words(&self.channels, '&').join(" ")),
            ),
        ]
    }
}

const KEYS_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const CHANNELS_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";

/// Adds `pattern` with `access`; a pattern already there gains the access. `*` with every
/// access allows everything, and nothing may follow it but `*` again.
fn add_pattern(
    patterns: &mut Patterns,
    pattern: &[u8],
    access: Access,
    after_all: &str,
) -> Result<(), String> {
    let everything = pattern == b"*" && access == READ_WRITE;
    match patterns {
        Patterns::All if everything => {}
        Patterns::All => return Err(after_all.into()),
        Patterns::Some(_) if everything => *patterns = Patterns::All,
        Patterns::Some(list) => match list.iter_mut().find(|p| p.text == pattern) {
            Some(kept) => kept.access |= access,
            None => list.push(Pattern {
                text: pattern.to_vec(),
                access,
            }),
        },
    }
    Ok(())
}

/// A `%…~pattern` rule's access and pattern, read as Redis 7.0 reads it: `R` and `W` at
/// most once each, then `~` and the pattern (none: the empty pattern).
fn key_pattern_with_permissions(rule: &[u8]) -> Result<(Access, &[u8]), String> {
    let mut access = 0;
    for (at, &byte) in rule.iter().enumerate() {
        match byte.to_ascii_uppercase() {
            b'R' if access & READ == 0 => access |= READ,
            b'W' if access & WRITE == 0 => access |= WRITE,
            b'~' if access != 0 => return Ok((access, &rule[at + 1..])),
            _ => return Err("Syntax error".into()),
        }
    }
    if access == 0 {
        return Err("Syntax error".into());
    }
    Ok((access, &[]))
}

/// The patterns as ACL LIST writes them: `~p` (or `&p` for channels), `%R~p`, `%W~p`.
fn pattern_words(patterns: &Patterns, sign: char) -> Vec<String> {
    let word = |p: &Pattern| {
        let text = String::from_utf8_lossy(&p.text);
        match p.access {
            READ => format!("%R{sign}{text}"),
            WRITE => format!("%W{sign}{text}"),
            _ => format!("{sign}{text}"),
        }
    };
    match patterns {
        Patterns::All => vec![format!("{sign}*")],
        Patterns::Some(list) => list.iter().map(word).collect(),
    }
}

/// `#…`'s digest: 64 lowercase hex digits.
fn parse_digest(text: &[u8]) -> Result<[u8; 32], String> {
    let refused = || {
        "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters".to_string()
    };
    let lower_hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    if text.len() != 64 || !text.iter().all(lower_hex) {
        return Err(refused());
    }
    let mut digest = [0u8; 32];
    for (at, pair) in text.chunks_exact(2).enumerate() {
        let pair = std::str::from_utf8(pair).map_err(|_| refused())?;
        digest[at] = u8::from_str_radix(pair, 16).map_err(|_| refused())?;
    }
    Ok(digest)
}

/// What a `+…`/`-…` rule names (lowercase, without its sign).
fn selector(name: &str) -> Result<Selector, String> {
    let unknown = || "Unknown command or category name in ACL".to_string();
    if let Some(category) = name.strip_prefix('@') {
        if category == "all" {
            return Ok(Selector::All);
        }
        return categories::named(category)
            .map(Selector::Category)
            .ok_or_else(unknown);
    }
    let Some((container, sub)) = name.split_once('|') else {
        return lookup(name.as_bytes())
            .map(|command| Selector::Command(command.name))
            .ok_or_else(unknown);
    };
    if sub.contains('|') {
        return Err("Allowing first-arg of a subcommand is not supported".into());
    }
    let command = lookup(container.as_bytes()).ok_or_else(unknown)?;
    let Some(known) = subcommands::of(command.name) else {
        return Err(format!(
            "tailstore allows or refuses commands whole: '{container}' has no subcommands"
        ));
    };
    known
        .iter()
        .find(|known| known.name == sub)
        .map(|known| Selector::Subcommand(command.name, known.name))
        .ok_or_else(unknown)
}

/// The channels a command publishes or subscribes to, whether they are patterns, and the
/// position of the first.
fn channels_named<'a>(
    command: &Command,
    args: &'a [Vec<u8>],
) -> Option<(bool, usize, &'a [Vec<u8>])> {
    match command.name {
        "publish" | "spublish" => Some((false, 1, &args[1..2])),
        "subscribe" | "ssubscribe" => Some((false, 1, &args[1..])),
        "psubscribe" => Some((true, 1, &args[1..])),
        _ => None,
    }
}

/// SORT's options that read keys by pattern: BY with a `*`, any GET.
fn sort_options_allowed(args: &[Vec<u8>]) -> Result<(), Denial> {
    let mut at = 2;
    while at < args.len() {
        let word = &args[at];
        if word.eq_ignore_ascii_case(b"limit") {
            at += 3;
        } else if word.eq_ignore_ascii_case(b"store") {
            at += 2;
        } else if word.eq_ignore_ascii_case(b"by") {
            if args.get(at + 1).is_some_and(|p| p.contains(&b'*')) {
                return Err(Denial::SortBy);
            }
            at += 2;
        } else if word.eq_ignore_ascii_case(b"get") {
            return Err(Denial::SortGet);
        } else {
            at += 1;
        }
    }
    Ok(())
}

/// A name ACL SETUSER may make or change.
fn check_name(name: &[u8]) -> Result<(), String> {
    if name.contains(&b' ') || name.contains(&0) {
        return Err("Usernames can't contain spaces or null characters".into());
    }
    if name == b"default" {
        return Err("tailstore's 'default' user keeps every permission; its password is requirepass (CONFIG SET requirepass)".into());
    }
    Ok(())
}

/// `user` with `rules` applied in turn; the first refused rule's error.
fn with_rules<'a>(
    mut user: User,
    rules: impl IntoIterator<Item = &'a [u8]>,
) -> Result<User, String> {
    for rule in rules {
        user.apply(rule).map_err(|reason| {
            format!(
                "Error in ACL SETUSER modifier '{}': {reason}",
                String::from_utf8_lossy(rule)
            )
        })?;
    }
    Ok(user)
}

/// ACL SETUSER's rules with each selector written over several (`(~app:*`, `+get)`)
/// joined into one, as Redis joins them; a selector never closed is refused, by its first
/// rule.
fn merge_selectors(rules: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut merged = Vec::new();
    let mut open: Option<(Vec<u8>, &Vec<u8>)> = None;
    for rule in rules {
        match open.as_mut() {
            None if rule.first() == Some(&b'(') && rule.last() != Some(&b')') => {
                open = Some((rule.clone(), rule));
            }
            None => merged.push(rule.clone()),
            Some((text, _)) => {
                text.push(b' ');
                text.extend_from_slice(rule);
                if rule.last() == Some(&b')') {
                    merged.extend(open.take().map(|(text, _)| text));
                }
            }
        }
    }
    match open {
        Some((_, first)) => Err(first.clone()),
        None => Ok(merged),
    }
}

/// ACL GETUSER's reply, for any user: its permissions' fields, then its selectors'.
fn getuser_reply(
    flags: Vec<Reply>,
    passwords: Vec<Reply>,
    permissions: Vec<(Reply, Reply)>,
    selectors: Vec<Reply>,
) -> Reply {
    let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let mut fields = vec![
        (text("flags"), Reply::Set(flags)),
        (text("passwords"), Reply::Array(passwords)),
    ];
    fields.extend(permissions);
    fields.push((text("selectors"), Reply::Array(selectors)));
    Reply::Map(fields)
}

/// The users besides `default`, shared by the event loops.
#[derive(Default)]
pub struct Users {
    named: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    /// Changed by every ACL SETUSER and DELUSER: a connection whose user it read before
    /// reads its user again.
    generation: AtomicU64,
}

impl Users {
    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        self.named.read().get(name).cloned()
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether `name` is a user (`default` included).
    pub fn exists(&self, name: &[u8]) -> bool {
        name == b"default" || self.named.read().contains_key(name)
    }

    /// ACL SETUSER name rule…: the rules applied to the user (made if new) all, or none
    /// if one is refused.
    fn set(&self, name: &[u8], rules: &[Vec<u8>]) -> Result<(), Reply> {
        let error = |reason: String| Reply::error(format!("ERR {reason}"));
        check_name(name).map_err(error)?;
        let rules = merge_selectors(rules).map_err(|first| {
            error(format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&first)
            ))
        })?;
        let mut named = self.named.write();
        let user = named
            .get(name)
            .map_or_else(|| User::new(name), |u| User::clone(u));
        let user = with_rules(user, rules.iter().map(Vec::as_slice)).map_err(error)?;
        named.insert(name.to_vec(), Arc::new(user));
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Replaces the users by those of the ACL file at `path` (one `user NAME RULES…` per
    /// line; blank lines and `#` comments skipped), all or none: the first line that does
    /// not read is the error, with its number. A `default` line must say what the default
    /// user is (every permission, `password`'s rule), as ACL SAVE writes it.
    pub fn load(&self, path: &Path, password: &Password) -> Result<(), String> {
        let text = std::fs::read(path)
            .map_err(|e| format!("cannot read the ACL file {}: {e}", path.display()))?;
        let mut named = BTreeMap::new();
        for (number, line) in text.split(|&b| b == b'\n').enumerate() {
            let at = |reason: String| format!("{}:{}: {reason}", path.display(), number + 1);
            let words: Vec<&[u8]> = line
                .split(u8::is_ascii_whitespace)
                .filter(|w| !w.is_empty())
                .collect();
            let (name, rules) = match words.as_slice() {
                [] => continue,
                [first, ..] if first.starts_with(b"#") => continue,
                [b"user", name, rules @ ..] => (*name, rules),
                _ => return Err(at("should start with user keyword".into())),
            };
            if name == b"default" {
                let ours = default_line(password);
                if words.join(&b' ') != ours.as_bytes() {
                    return Err(at(format!("the 'default' user has every permission and requirepass's password here: its line must read \"{ours}\"")));
                }
                continue;
            }
            check_name(name).map_err(at)?;
            let rules: Vec<Vec<u8>> = rules.iter().map(|rule| rule.to_vec()).collect();
            let rules = merge_selectors(&rules).map_err(|first| {
                at(format!(
                    "unmatched parenthesis in the selector starting at '{}'",
                    String::from_utf8_lossy(&first)
                ))
            })?;
            if named.contains_key(name) {
                return Err(at(format!(
                    "user '{}' is defined twice",
                    String::from_utf8_lossy(name)
                )));
            }
            let user = with_rules(User::new(name), rules.iter().map(Vec::as_slice)).map_err(at)?;
            named.insert(name.to_vec(), Arc::new(user));
        }
        *self.named.write() = named;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Writes every user's ACL LIST line to the ACL file at `path`: to a new file, made
    /// durable, then renamed over the old one, so that a crash leaves one or the other.
    pub fn save(&self, path: &Path, password: &Password) -> std::io::Result<()> {
        let mut text = list_lines(password, self).join("\n");
        text.push('\n');
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        let mut file = std::fs::File::create(&temporary)?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        let directory = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        std::fs::File::open(directory)?.sync_all()
    }

    /// The users' names (`default` left out).
    fn names(&self) -> Vec<Vec<u8>> {
        self.named.read().keys().cloned().collect()
    }

    /// ACL DELUSER: how many of `names` were users.
    fn delete(&self, names: &[Vec<u8>]) -> usize {
        let mut named = self.named.write();
        let deleted = names.iter().filter(|n| named.remove(*n).is_some()).count();
        self.generation.fetch_add(1, Ordering::AcqRel);
        deleted
    }

    fn all(&self) -> Vec<Arc<User>> {
        self.named.read().values().cloned().collect()
    }
}

/// The NOPERM reply to a command refused at the top level or queued in MULTI.
pub fn refusal_reply(denial: &Denial) -> Reply {
    Reply::error(match denial {
        Denial::Command(name) => {
            format!("NOPERM this user has no permissions to run the '{name}' command")
        }
        Denial::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        Denial::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into()
        }
        Denial::SortBy => {
            "ERR BY option of SORT denied due to insufficient ACL permissions.".into()
        }
        Denial::SortGet => {
            "ERR GET option of SORT denied due to insufficient ACL permissions.".into()
        }
    })
}

/// The refusal, in EXEC's reply, of a queued command the rules no longer allow: they
/// changed between MULTI and EXEC. The block's other commands run, as in Redis.
pub fn exec_refusal(denial: &Denial) -> Reply {
    let reason = match denial {
        Denial::Command(_) => "no permission to execute the command or subcommand",
        Denial::Key(_) => "no permission to touch the specified keys",
        Denial::Channel(_) => "no permission to access one of the channels used as arguments",
        Denial::SortBy | Denial::SortGet => return refusal_reply(denial),
    };
    Reply::error(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"))
}

/// The error a script's `redis.call` raises for a refused command.
pub fn script_refusal(denial: &Denial) -> Reply {
    Reply::error(match denial {
        Denial::Command(_) => {
            "ERR The user executing the script can't run this command or subcommand"
        }
        Denial::Key(_) => "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments",
        Denial::Channel(_) => {
            "ERR The user executing the script can't publish to the channel mentioned in the command"
        }
        Denial::SortBy => "ERR BY option of SORT denied due to insufficient ACL permissions.",
        Denial::SortGet => "ERR GET option of SORT denied due to insufficient ACL permissions.",
    })
}

/// Records `denial` of `user`'s command for ACL LOG (SORT's options are refused as
/// errors of the command, not logged, as Redis does).
pub fn log_denial(
    password: &Password,
    user: &User,
    denial: &Denial,
    context: Context,
    client: String,
) {
    let (reason, object) = match denial {
        Denial::Command(name) => ("command", name.as_bytes().to_vec()),
        Denial::Key(key) => ("key", key.clone()),
        Denial::Channel(channel) => ("channel", channel.clone()),
        Denial::SortBy | Denial::SortGet => return,
    };
    let context = match context {
        Context::TopLevel => "toplevel",
        Context::Multi => "multi",
        Context::Script => "lua",
    };
    password.note(reason, context, object, &user.name, client);
}

/// ACL and its subcommands (known, of the right arity: `subcommand_check`), for `conn`.
pub fn acl(shared: &Shared, conn: &mut Connection, args: &[Vec<u8>]) -> Reply {
    let (password, users) = (&shared.password, &shared.users);
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let bulk = |bytes: &[u8]| Reply::Bulk(bytes.to_vec());
    match sub.as_str() {
        "whoami" => bulk(conn.user.as_ref().map_or(&b"default"[..], |u| &u.name)),
        "users" => {
            let mut names: Vec<Vec<u8>> = users.all().iter().map(|u| u.name.clone()).collect();
            names.push(b"default".to_vec());
            names.sort();
            Reply::Array(names.iter().map(|n| bulk(n)).collect())
        }
        "list" => {
            let lines = list_lines(password, users);
            Reply::Array(lines.iter().map(|l| bulk(l.as_bytes())).collect())
        }
        "getuser" if args[2] == b"default" => default_user(password),
        "getuser" => users.get(&args[2]).map_or(Reply::Null, |u| u.getuser_reply()),
        "setuser" => {
            let before = users.get(&args[2]);
            if let Err(refusal) = users.set(&args[2], &args[3..]) {
                return refusal;
            }
            let after = users.get(&args[2]);
            if let (Some(before), Some(after)) = (before, after) {
                if narrowed(&before, &after) {
                    // Subscriptions once allowed may not be now: the user's subscribed
                    // connections go (Redis closes those holding one no longer allowed).
                    let filter = ClientFilter::subscribed_of_user(&args[2]);
                    super::admin::kill_clients(shared, conn, &filter);
                }
            }
            Reply::ok()
        }
        "deluser" if args[2..].iter().any(|name| name == b"default") => {
            Reply::error("ERR The 'default' user cannot be removed")
        }
        "deluser" => {
            let deleted = users.delete(&args[2..]);
            // Their connections go now, not at their next command: one may never send one.
            for name in &args[2..] {
                super::admin::kill_clients(shared, conn, &ClientFilter::of_user(name));
            }
            Reply::Int(deleted as i64)
        }
        "cat" => cat(args.get(2)),
        "dryrun" => dryrun(users, &args[2..]),
        "log" => log(password, args.get(2)),
        "genpass" => genpass(args.get(2)),
        "load" | "save" if shared.config.aclfile.is_some() => aclfile(shared, conn, &sub),
        "load" | "save" => Reply::error("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."),
        _ => crate::command::help(ACL_HELP),
    }
}

/// ACL LOAD and ACL SAVE, with the server's ACL file.
fn aclfile(shared: &Shared, conn: &mut Connection, sub: &str) -> Reply {
    let Some(path) = &shared.config.aclfile else {
        return Reply::error("ERR no ACL file");
    };
    let (password, users) = (&shared.password, &shared.users);
    if sub == "save" {
        return match users.save(path, password) {
            Ok(()) => Reply::ok(),
            Err(e) => Reply::error(format!(
                "ERR cannot save the ACL file {}: {e}",
                path.display()
            )),
        };
    }
    let before = users.names();
    if let Err(reason) = users.load(path, password) {
        return Reply::error(format!("ERR {reason}"));
    }
    // Every connection of a user other than `default` goes now, whether the file kept the
    // user or not (its rights, passwords or channels may be others now), as in Redis.
    for name in before.iter().filter(|name| name.as_slice() != b"default") {
        super::admin::kill_clients(shared, conn, &ClientFilter::of_user(name));
    }
    Reply::ok()
}

/// Whether a user's channels `after` a change may be fewer than `before` it: its own
/// channel patterns narrowed, or a selector changed or gone.
fn narrowed(before: &User, after: &User) -> bool {
    narrowed_patterns(&before.root.channels, &after.root.channels)
        || before
            .selectors
            .iter()
            .any(|selector| !after.selectors.contains(selector))
}

/// Whether channel patterns `after` may allow less than `before` did.
fn narrowed_patterns(before: &Patterns, after: &Patterns) -> bool {
    match (before, after) {
        (_, Patterns::All) => false,
        (Patterns::All, Patterns::Some(_)) => true,
        (Patterns::Some(before), Patterns::Some(after)) => {
            before.iter().any(|pattern| !after.contains(pattern))
        }
    }
}

fn list_lines(password: &Password, users: &Users) -> Vec<String> {
    let mut lines: Vec<(Vec<u8>, String)> = users
        .all()
        .iter()
        .map(|u| {
            let name = String::from_utf8_lossy(&u.name);
            (u.name.clone(), format!("user {name} {}", u.describe()))
        })
        .collect();
    lines.push((b"default".to_vec(), default_line(password)));
    lines.sort();
    lines.into_iter().map(|(_, line)| line).collect()
}

/// The default user's ACL LIST line.
fn default_line(password: &Password) -> String {
    format!("user default on {} ~* &* +@all", password.acl_rule())
}

/// ACL GETUSER default, as Redis describes its `default` user with every permission: on,
/// with the password's digest or `nopass`.
fn default_user(password: &Password) -> Reply {
    let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let rule = password.acl_rule();
    let (flags, passwords) = match rule.strip_prefix('#') {
        Some(digest) => (vec![text("on")], vec![text(digest)]),
        None => (vec![text("on"), text("nopass")], Vec::new()),
    };
    let everything = Permissions {
        commands: vec![CommandRule {
            allow: true,
            what: Selector::All,
        }],
        keys: Patterns::All,
        channels: Patterns::All,
    };
    getuser_reply(flags, passwords, everything.getuser_fields(), Vec::new())
}

/// ACL CAT [category]: the categories, or the commands and subcommands in one.
fn cat(category: Option<&Vec<u8>>) -> Reply {
    let bulk = |name: &str| Reply::Bulk(name.as_bytes().to_vec());
    let Some(category) = category else {
        return Reply::Array(categories::NAMES.iter().map(|n| bulk(n)).collect());
    };
    let typed = String::from_utf8_lossy(category);
    match categories::named(&typed) {
        Some(bit) => Reply::Array(categories::members(bit).map(bulk).collect()),
        None => Reply::error(format!("ERR Unknown category '{typed}'")),
    }
}

/// ACL DRYRUN user command arg…: whether the user may run it, or why not.
fn dryrun(users: &Users, args: &[Vec<u8>]) -> Reply {
    let user = users.get(&args[0]);
    if user.is_none() && args[0] != b"default" {
        return Reply::error(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(&args[0])
        ));
    }
    let Some(command) = lookup(&args[1]) else {
        return Reply::error(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(&args[1])
        ));
    };
    if !command.arity_ok(args.len() - 1) {
        return Reply::error(format!(
            "ERR wrong number of arguments for '{}' command",
            command.name
        ));
    }
    let Some(user) = user else {
        return Reply::ok(); // default: every permission
    };
    let lossy = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match user.check(command, &args[1..]) {
        Ok(()) => Reply::ok(),
        Err(Denial::Command(name)) => Reply::Bulk(
            format!("This user has no permissions to run the '{name}' command").into_bytes(),
        ),
        Err(Denial::Key(key)) => Reply::Bulk(
            format!(
                "This user has no permissions to access the '{}' key",
                lossy(&key)
            )
            .into_bytes(),
        ),
        Err(Denial::Channel(channel)) => Reply::Bulk(
            format!(
                "This user has no permissions to access the '{}' channel",
                lossy(&channel)
            )
            .into_bytes(),
        ),
        // SORT refuses these options when it runs, not as a permission (Redis's DRYRUN
        // says OK to them too).
        Err(Denial::SortBy | Denial::SortGet) => Reply::ok(),
    }
}

/// ACL LOG [count | RESET].
fn log(password: &Password, arg: Option<&Vec<u8>>) -> Reply {
    match arg {
        None => password.refusals_reply(10),
        Some(arg) if arg.eq_ignore_ascii_case(b"reset") => {
            password.forget_refusals();
            Reply::ok()
        }
        Some(arg) => match crate::command::parse_int(arg) {
            Ok(count) => password.refusals_reply(usize::try_from(count).unwrap_or(0)),
            Err(_) => Reply::error("ERR value is not an integer or out of range"),
        },
    }
}

/// ACL GENPASS [bits]: a random password of `bits` bits (256 by default), in hex digits
/// (as many as hold `bits`).
fn genpass(bits: Option<&Vec<u8>>) -> Reply {
    let bits = match bits.map(|b| crate::command::parse_int(b)) {
        None => 256,
        Some(Err(_)) => return Reply::error("ERR value is not an integer or out of range"),
        Some(Ok(bits)) if !(1..=4096).contains(&bits) => {
            return Reply::error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
        }
        Some(Ok(bits)) => bits as usize,
    };
    // A password: from the kernel's random source, not a generator seeded by the clock.
    let mut random = vec![0u8; bits.div_ceil(8)];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut source| std::io::Read::read_exact(&mut source, &mut random));
    if let Err(err) = read {
        return Reply::error(format!("ERR tailstore: reading /dev/urandom failed: {err}"));
    }
    let mut text = hex(&random);
    text.truncate(bits.div_ceil(4));
    Reply::Bulk(text.into_bytes())
}

const ACL_HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    The command categories, or the commands and subcommands in one.",
    "DELUSER <username> [<username> ...]",
    "    Deletes the users named (not 'default'), closing their connections.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Whether the user may run the command with these arguments, and if not why.",
    "GENPASS [<bits>]",
    "    A random password of <bits> bits (256 if not given), in hex digits.",
    "GETUSER <username>",
    "    The user's flags, password digests, commands, key and channel patterns.",
    "LIST",
    "    Every user with its rules, one line each.",
    "LOG [<count> | RESET]",
    "    The newest <count> refusals (10 if not given): logins and denied commands.",
    "SETUSER <username> <rule> [<rule> ...]",
    "    Makes or changes a user: on|off, >password, <password, #digest, !digest, nopass,",
    "    resetpass, ~pattern, %RW~pattern, allkeys, resetkeys, &pattern, allchannels,",
    "    resetchannels, +command, -command, +command|subcommand, +@category, -@category,",
    "    allcommands, nocommands, reset.",
    "USERS",
    "    The users' names.",
    "WHOAMI",
    "    The user this connection is logged in as.",
    "LOAD",
    "    Replaces the users by those of the ACL file (serve --aclfile).",
    "SAVE",
    "    Writes the users to the ACL file.",
    "HELP",
    "    Prints this help.",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> User {
        let mut user = User::new(b"bob");
        for rule in rules {
            user.apply(rule.as_bytes()).expect(rule);
        }
        user
    }

    fn check(user: &User, line: &str) -> Result<(), Denial> {
        let args: Vec<Vec<u8>> = line.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        let command = lookup(&args[0]).expect("a command");
        user.check(command, &args)
    }

    /// Rules of every kind, some refused in some orders (a pattern after `allkeys`).
    const RULES: &[&str] = &[
        "on",
        "off",
        "nopass",
        ">pw",
        ">other",
        "resetpass",
        "~a*",
        "~b",
        "%R~a*",
        "%W~c*",
        "%RW~d",
        "~*",
        "allkeys",
        "resetkeys",
        "&ch*",
        "&*",
        "allchannels",
        "resetchannels",
        "+get",
        "-get",
        "+set",
        "+@read",
        "-@write",
        "+@all",
        "-@all",
        "+client|kill",
        "-client",
        "allcommands",
        "nocommands",
        "(~s* +get)",
        "(%R~r* +@read &n*)",
        "()",
        "(allkeys allcommands allchannels)",
        "clearselectors",
        "reset",
        "skip-sanitize-payload",
    ];

    /// Requests whose verdicts a user's rules decide.
    const REQUESTS: &[&str] = &[
        "GET a1",
        "GET b",
        "SET a1 v",
        "SET c1 v GET",
        "SET d v",
        "GET s1",
        "GET r1",
        "MGET a1 r1",
        "LMOVE a1 c1 LEFT LEFT",
        "PUBLISH ch1 m",
        "PUBLISH n1 m",
        "SUBSCRIBE ch1",
        "CLIENT KILL ID 1",
        "CLIENT SETNAME x",
        "SORT a1 BY w_*",
        "PING",
    ];

    proptest::proptest! {
        /// ACL SAVE writes each user as ACL LIST describes it, and ACL LOAD reads it back:
        /// the description, read as rules, must make the same user (the same description
        /// and the same verdicts).
        #[test]
        fn a_user_read_back_from_its_description_is_the_same_user(
            rules in proptest::collection::vec(proptest::sample::select(RULES), 0..12),
        ) {
            let mut made = User::new(b"bob");
            for rule in &rules {
                let _ = made.apply(rule.as_bytes()); // a refused rule changes nothing
            }
            let words: Vec<Vec<u8>> = made
                .describe()
                .split(' ')
                .map(|word| word.as_bytes().to_vec())
                .collect();
            let merged = merge_selectors(&words).expect("selectors closed");
            let read = with_rules(User::new(b"bob"), merged.iter().map(Vec::as_slice))
                .expect("a description reads back");
            proptest::prop_assert_eq!(read.describe(), made.describe());
            for request in REQUESTS {
                proptest::prop_assert_eq!(check(&read, request), check(&made, request), "{}", request);
            }
        }
    }

    #[test]
    fn the_last_rule_that_names_a_command_decides() {
        let bob = user(&["+@all", "-@dangerous", "+client|kill", "-get", "allkeys"]);
        assert_eq!(check(&bob, "SET k v"), Ok(()));
        assert_eq!(check(&bob, "GET k"), Err(Denial::Command("get".into())));
        assert_eq!(check(&bob, "KEYS *"), Err(Denial::Command("keys".into())));
        assert_eq!(check(&bob, "CLIENT KILL ID 5"), Ok(()));
        assert_eq!(check(&bob, "CLIENT SETNAME x"), Ok(()));
        assert_eq!(
            check(&bob, "CONFIG SET a b"),
            Err(Denial::Command("config|set".into()))
        );
        let reader = user(&["+@read", "+config|get", "~*"]);
        assert_eq!(check(&reader, "GET k"), Ok(()));
        assert_eq!(check(&reader, "CONFIG GET x"), Ok(()));
        assert_eq!(
            check(&reader, "SET k v"),
            Err(Denial::Command("set".into()))
        );
        assert_eq!(
            user(&["+get", "nocommands"]).root.command_words(),
            "-@all",
            "-@all starts over"
        );
        assert_eq!(
            bob.root.command_words(),
            "+@all -@dangerous +client|kill -get"
        );
        let nothing = user(&[]);
        assert_eq!(check(&nothing, "AUTH alice pw"), Ok(()));
        assert_eq!(check(&nothing, "PING"), Err(Denial::Command("ping".into())));
    }

    #[test]
    fn keys_and_channels_must_match_a_pattern() {
        let bob = user(&["+@all", "~app:*", "&news.*"]);
        assert_eq!(check(&bob, "MSET app:1 a app:2 b"), Ok(()));
        assert_eq!(
            check(&bob, "MSET app:1 a other b"),
            Err(Denial::Key(b"other".to_vec()))
        );
        assert_eq!(check(&bob, "EVAL x 1 app:1"), Ok(()));
        assert_eq!(check(&bob, "EVAL x 1 y"), Err(Denial::Key(b"y".to_vec())));
        assert_eq!(check(&bob, "PUBLISH news.a m"), Ok(()));
        assert_eq!(
            check(&bob, "SUBSCRIBE news.a sport"),
            Err(Denial::Channel(b"sport".to_vec()))
        );
        assert_eq!(check(&bob, "PSUBSCRIBE news.*"), Ok(()));
        assert_eq!(
            check(&bob, "PSUBSCRIBE news.a*"),
            Err(Denial::Channel(b"news.a*".to_vec()))
        );
        assert_eq!(check(&bob, "SORT app:1 BY nosort"), Ok(()));
        assert_eq!(check(&bob, "SORT app:1 BY w_*"), Err(Denial::SortBy));
        assert_eq!(check(&bob, "SORT app:1 STORE app:get"), Ok(()));
        assert_eq!(check(&bob, "SORT app:1 GET #"), Err(Denial::SortGet));
        let everything = user(&["+@all", "allkeys", "allchannels"]);
        assert!(user(&["allkeys"]).apply(b"%R~*").is_err());
        assert_eq!(check(&everything, "SORT app:1 GET x_*"), Ok(()));
        assert_eq!(check(&everything, "SUBSCRIBE any"), Ok(()));
    }

    #[test]
    fn read_and_write_patterns_allow_what_the_key_specifications_say() {
        let reader = user(&["+@all", "%R~r:*", "%W~w:*", "~rw:*"]);
        assert_eq!(check(&reader, "GET r:1"), Ok(()));
        assert_eq!(
            check(&reader, "SET r:1 v"),
            Err(Denial::Key(b"r:1".to_vec()))
        );
        assert_eq!(check(&reader, "SET w:1 v"), Ok(()));
        assert_eq!(
            check(&reader, "SET w:1 v GET"),
            Err(Denial::Key(b"w:1".to_vec())),
            "GET reads the old value"
        );
        assert_eq!(check(&reader, "GET w:1"), Err(Denial::Key(b"w:1".to_vec())));
        // EXISTS reads no value: any pattern that matches will do.
        assert_eq!(check(&reader, "EXISTS r:1 w:1"), Ok(()));
        assert_eq!(check(&reader, "LMOVE rw:1 w:1 LEFT LEFT"), Ok(()));
        assert_eq!(
            check(&reader, "LMOVE r:1 w:1 LEFT LEFT"),
            Err(Denial::Key(b"r:1".to_vec()))
        );
        assert_eq!(check(&reader, "COPY r:1 w:1"), Ok(()));
        assert_eq!(check(&reader, "DEL w:1"), Ok(()));
        assert_eq!(check(&reader, "DEL r:1"), Err(Denial::Key(b"r:1".to_vec())));
        let both = user(&["+@all", "%R~k", "%W~k"]);
        assert_eq!(both.describe(), "off ~k resetchannels +@all");
        assert_eq!(check(&both, "INCR k"), Ok(()));
    }

    #[test]
    fn a_selector_allows_a_command_whole_and_refusals_are_redis_s_choice() {
        let both = user(&["~a*", "+get", "(~b* +set)", "(%R~c* +@read &ch*)"]);
        assert_eq!(check(&both, "GET a1"), Ok(()));
        assert_eq!(check(&both, "SET b1 v"), Ok(()));
        assert_eq!(check(&both, "GET c1"), Ok(()));
        // No set allows all of it: the refusal that got furthest, at the latest argument.
        assert_eq!(check(&both, "SET a1 v"), Err(Denial::Key(b"a1".to_vec())));
        assert_eq!(check(&both, "MGET a1 b1"), Err(Denial::Key(b"a1".to_vec())));
        assert_eq!(check(&both, "INCR b1"), Err(Denial::Command("incr".into())));
        let three = user(&["~a*", "+@all", "(~b* +@all)", "(~c* +@all)"]);
        assert_eq!(
            check(&three, "MGET b1 c1 a1"),
            Err(Denial::Key(b"c1".to_vec()))
        );
        assert_eq!(
            check(&three, "MGET a1 b1 c1"),
            Err(Denial::Key(b"b1".to_vec()))
        );
        assert_eq!(
            both.describe(),
            "off ~a* resetchannels -@all +get (~b* resetchannels -@all +set) \
             (%R~c* resetchannels &ch* -@all +@read)"
        );
        let merged = |rules: &[&str]| {
            let rules: Vec<Vec<u8>> = rules.iter().map(|r| r.as_bytes().to_vec()).collect();
            merge_selectors(&rules).map(|m| {
                m.iter()
                    .map(|r| String::from_utf8_lossy(r).into_owned())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            merged(&["on", "(~x", "+get)", "()"]),
            Ok(vec!["on".into(), "(~x +get)".into(), "()".into()])
        );
        assert_eq!(merged(&["(~x", "+get"]), Err(b"(~x".to_vec()));
    }

    #[test]
    fn passwords_log_in_only_an_enabled_user() {
        let mut bob = user(&[">one", ">two"]);
        assert!(!bob.accepts(b"one"), "off");
        bob.apply(b"on").expect("on");
        assert!(bob.accepts(b"one") && bob.accepts(b"two") && !bob.accepts(b"three"));
        bob.apply(b"<one").expect("remove");
        assert!(!bob.accepts(b"one"));
        assert!(bob.apply(b"<one").is_err());
        let digest_of_abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        bob.apply(format!("#{digest_of_abc}").as_bytes())
            .expect("digest");
        assert!(bob.accepts(b"abc"));
        bob.apply(b"nopass").expect("nopass");
        assert!(bob.accepts(b"anything"));
        assert!(
            bob.describe().starts_with("on nopass "),
            "{}",
            bob.describe()
        );
    }

    #[test]
    fn bad_rules_are_refused_with_redis_reasons() {
        let refused = |rule: &str| User::new(b"bob").apply(rule.as_bytes()).err();
        assert_eq!(refused("foo").as_deref(), Some("Syntax error"));
        for rule in ["+nosuch", "+@nosuch", "-config|nosuch"] {
            assert_eq!(
                refused(rule).as_deref(),
                Some("Unknown command or category name in ACL"),
                "{rule}"
            );
        }
        assert!(refused("#abc").is_some_and(|r| r.contains("64 characters")));
        for rule in ["%X~x", "%~x", "%RR~x", "%"] {
            assert_eq!(refused(rule).as_deref(), Some("Syntax error"), "{rule}");
        }
        assert_eq!(refused("%R~x"), None);
        assert_eq!(refused("%W"), None);
        assert_eq!(refused("(~x +get)"), None);
        assert_eq!(refused("(on)").as_deref(), Some("Syntax error"));
        assert_eq!(
            refused("(~x +nosuch)").as_deref(),
            Some("Unknown command or category name in ACL")
        );
        assert!(refused("+config|get|x").is_some_and(|r| r.contains("first-arg")));
        assert_eq!(refused("%RW~x"), None);
        let mut all = user(&["allkeys"]);
        assert!(all.apply(b"~x").is_err_and(|r| r.contains("resetkeys")));
    }

    #[test]
    fn genpass_gives_the_bits_asked_for_in_hex() {
        for (bits, len) in [(None, 64), (Some("32"), 8), (Some("5"), 2)] {
            let arg = bits.map(|b: &str| b.as_bytes().to_vec());
            let Reply::Bulk(hex) = genpass(arg.as_ref()) else {
                panic!("{bits:?}: not a bulk");
            };
            assert_eq!(hex.len(), len, "{bits:?}");
            assert!(hex.iter().all(u8::is_ascii_hexdigit));
        }
        assert!(matches!(genpass(Some(&b"4097".to_vec())), Reply::Error(_)));
    }

    #[test]
    fn dryrun_says_why_a_user_may_not_run_a_command() {
        let users = Users::default();
        let words = |line: &str| {
            line.split(' ')
                .map(|w| w.as_bytes().to_vec())
                .collect::<Vec<_>>()
        };
        users.set(b"bob", &words("on +get ~k*")).expect("set");
        assert_eq!(dryrun(&users, &words("default GET x")), Reply::ok());
        assert_eq!(dryrun(&users, &words("bob GET k1")), Reply::ok());
        let said = |line: &str| match dryrun(&users, &words(line)) {
            Reply::Bulk(text) => String::from_utf8_lossy(&text).into_owned(),
            Reply::Error(text) => text,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            said("bob GET x"),
            "This user has no permissions to access the 'x' key"
        );
        assert_eq!(
            said("bob DEL k1"),
            "This user has no permissions to run the 'del' command"
        );
        assert!(said("default GET").contains("'get'"));
        assert!(said("zed GET x").contains("'zed'"));
        assert_eq!(said("bob NOSUCH"), "ERR Command 'NOSUCH' not found");
    }

    #[test]
    fn default_user_shows_the_password_digest_once_one_is_set() {
        let secret = super::super::auth::Secret(b"abc".to_vec());
        let Reply::Map(fields) = default_user(&Password::new(Some(&secret))) else {
            panic!("not a map");
        };
        let sha256_of_abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        assert_eq!(fields[0].1, Reply::Set(vec![bulk("on")]));
        assert_eq!(fields[1].1, Reply::Array(vec![bulk(sha256_of_abc)]));
    }

    #[test]
    fn setuser_applies_every_rule_or_none() {
        let users = Users::default();
        let rules = |words: &[&str]| {
            words
                .iter()
                .map(|w| w.as_bytes().to_vec())
                .collect::<Vec<_>>()
        };
        users
            .set(b"bob", &rules(&["on", ">pw", "+get"]))
            .expect("set");
        let refused = users.set(b"bob", &rules(&["-get", "+nosuch"]));
        assert!(matches!(refused, Err(Reply::Error(e)) if e.contains("'+nosuch'")));
        let bob = users.get(b"bob").expect("bob");
        assert_eq!(bob.root.command_words(), "-@all +get");
        assert!(users.set(b"a b", &[]).is_err() && users.set(b"default", &[]).is_err());
        let before = users.generation();
        assert_eq!(users.delete(&rules(&["bob", "zed"])), 1);
        assert!(users.generation() > before && users.get(b"bob").is_none());
    }
}
