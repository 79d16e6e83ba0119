//! `tailstore kv migrate`: copies the keys of one RESP server into another with Redis's own
//! commands: SCAN the source, PTTL and DUMP each key, RESTORE it in the target with what was
//! left of its TTL. From Redis into tailstore, back, or between two tailstore servers.
//! The source's function libraries go first (FUNCTION DUMP, then FUNCTION RESTORE), so a
//! key that only a function reads arrives where the function already is.
//!
//! A SCAN step asks for `--batch` keys; their PTTLs and DUMPs are pipelined to the source in
//! windows of at most [`REQUEST_WINDOW`] bytes of requests and about [`REPLY_WINDOW`] bytes of
//! expected replies (a tailstore source stops reading a connection whose unsent replies pass
//! 64 MiB, so a client that wrote a whole large batch before reading would wait for ever), and
//! the keys received are restored in the target whenever their payloads pass
//! [`HELD_PAYLOAD`] bytes (so memory stays bounded whatever `--batch` and the keys' sizes).
//! A key's TTL is what PTTL answered less the time between that reply and its RESTORE; one
//! whose deadline passed meanwhile counts as gone. A key written in the source during the
//! copy may be copied as it was before or after that write; one deleted meanwhile is
//! skipped (its DUMP answers nil). Keys are copied, never removed from the source. Every
//! error names the side that failed, and the counts so far are printed before it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tailstore_kv::server::Secret;
use tailstore_resp::Value;

use super::address::ServerAddress;
use super::link::{Link, Received};
use super::server::reply_text;
use super::tls::{TlsClient, TlsClientArgs};
use crate::report::group;
use crate::CliResult;

/// How long one round trip may take before the copy stops (a DUMP of a large key included).
const PATIENCE: Duration = Duration::from_secs(120);
/// Failures named one by one; the rest are counted with their reason.
const FAILURES_NAMED: usize = 5;
/// Bytes of PTTL and DUMP requests written to the source before their replies are read:
/// little enough for the sockets' buffers to take even when the server has stopped reading.
const REQUEST_WINDOW: usize = 1 << 20;
/// Reply bytes the source is expected to owe at most, from the replies' sizes so far: half
/// of the 64 MiB of unsent replies past which a tailstore server stops reading.
const REPLY_WINDOW: u64 = 32 << 20;
/// Keys asked for in the first window, before any reply's size is known; each window may
/// grow to twice the last one and this many more.
const FIRST_WINDOW: usize = 16;
/// DUMP payload bytes received and held before they are restored in the target.
const HELD_PAYLOAD: u64 = 64 << 20;
/// Bytes of RESTORE payloads per write to the target: each write's TTLs are reckoned just
/// before it.
const RESTORE_CHUNK: u64 = 1 << 20;
/// Bytes of a key's name shown in a failure line.
const NAME_SHOWN: usize = 64;

#[derive(Args)]
pub struct MigrateArgs {
    /// The server the keys are read from (host:port, or a Unix socket's path: one with a
    /// '/'): Redis, or tailstore.
    #[arg(long, value_name = "ADDR")]
    pub from: String,
    /// The server they are written to (host:port, or a Unix socket's path).
    #[arg(long, value_name = "ADDR")]
    pub to: String,
    /// The source's password (its `requirepass`), sent with AUTH before anything else.
    #[arg(long, value_name = "PASSWORD")]
    pub from_password: Option<Secret>,
    /// The target's password (its `requirepass`).
    #[arg(long, value_name = "PASSWORD")]
    pub to_password: Option<Secret>,
    /// The ACL user --from-password is for (AUTH user password); by default `default`.
    #[arg(long, value_name = "NAME", requires = "from_password")]
    pub from_user: Option<String>,
    /// The ACL user --to-password is for.
    #[arg(long, value_name = "NAME", requires = "to_password")]
    pub to_user: Option<String>,
    /// Databases to copy, e.g. 0,3 (default: every database of the source that holds keys,
    /// from its INFO keyspace). Each key goes to the database of the same number.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub db: Vec<u32>,
    /// Replace keys the target already has (RESTORE … REPLACE). Without it such a key is
    /// left as it is and counted as not copied.
    #[arg(long)]
    pub replace: bool,
    /// Copy only the keys that match this glob-style pattern (SCAN's MATCH).
    #[arg(long, value_name = "PATTERN")]
    pub r#match: Option<String>,
    /// Keys asked for per SCAN, and copied per round trip.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub batch: u64,
    /// Leave the function libraries (FUNCTION LOAD) where they are: copy keys only. By
    /// default the source's libraries are copied first; with `--replace`, a library the
    /// target has of the same name is replaced.
    #[arg(long)]
    pub skip_functions: bool,
    /// Speak TLS to the source, as redis-cli --tls does. Needs --from-tls-ca-cert-file.
    #[arg(long, requires = "from_tls_ca_cert_file")]
    pub from_tls: bool,
    /// The authorities (PEM) whose signature the source's certificate must bear.
    #[arg(long, value_name = "FILE", requires = "from_tls")]
    pub from_tls_ca_cert_file: Option<PathBuf>,
    /// A certificate (PEM) to present to a source that asks clients for one. Needs
    /// --from-tls-key-file.
    #[arg(long, value_name = "FILE", requires_all = ["from_tls", "from_tls_key_file"])]
    pub from_tls_cert_file: Option<PathBuf>,
    /// The private key (PEM) of --from-tls-cert-file.
    #[arg(long, value_name = "FILE", requires = "from_tls_cert_file")]
    pub from_tls_key_file: Option<PathBuf>,
    /// Speak TLS to the target. Needs --to-tls-ca-cert-file.
    #[arg(long, requires = "to_tls_ca_cert_file")]
    pub to_tls: bool,
    /// The authorities (PEM) whose signature the target's certificate must bear.
    #[arg(long, value_name = "FILE", requires = "to_tls")]
    pub to_tls_ca_cert_file: Option<PathBuf>,
    /// A certificate (PEM) to present to a target that asks clients for one. Needs
    /// --to-tls-key-file.
    #[arg(long, value_name = "FILE", requires_all = ["to_tls", "to_tls_key_file"])]
    pub to_tls_cert_file: Option<PathBuf>,
    /// The private key (PEM) of --to-tls-cert-file.
    #[arg(long, value_name = "FILE", requires = "to_tls_cert_file")]
    pub to_tls_key_file: Option<PathBuf>,
}

/// One end of a migration, as its options give it.
struct Side<'a> {
    /// "source" or "target", in messages.
    role: &'static str,
    /// Its options' prefix: `from` or `to`.
    prefix: &'static str,
    address: &'a str,
    /// Its TLS settings, as `bench kv`'s options would give them.
    tls: TlsClientArgs,
    user: Option<&'a str>,
    password: Option<&'a Secret>,
}

impl MigrateArgs {
    fn source(&self) -> Side<'_> {
        Side {
            role: "source",
            prefix: "from",
            address: &self.from,
            tls: TlsClientArgs {
                tls: self.from_tls,
                tls_ca_cert_file: self.from_tls_ca_cert_file.clone(),
                tls_cert_file: self.from_tls_cert_file.clone(),
                tls_key_file: self.from_tls_key_file.clone(),
            },
            user: self.from_user.as_deref(),
            password: self.from_password.as_ref(),
        }
    }

    fn target(&self) -> Side<'_> {
        Side {
            role: "target",
            prefix: "to",
            address: &self.to,
            tls: TlsClientArgs {
                tls: self.to_tls,
                tls_ca_cert_file: self.to_tls_ca_cert_file.clone(),
                tls_cert_file: self.to_tls_cert_file.clone(),
                tls_key_file: self.to_tls_key_file.clone(),
            },
            user: self.to_user.as_deref(),
            password: self.to_password.as_ref(),
        }
    }
}

/// A connection to `side`, logged in and answering PING.
fn connect(side: &Side) -> CliResult<Peer> {
    let prefix = side.prefix;
    let tls = TlsClient::new(&side.tls, side.address, &format!("{prefix}-"))?;
    let address = ServerAddress::parse(side.address, &format!("--{prefix}"))?;
    let tls_option = if prefix == "from" {
        "--from-tls"
    } else {
        "--to-tls"
    };
    let mut link = Link::connect(&address, side.address, PATIENCE, tls.as_ref(), tls_option)?;
    let name = format!("the {} {}", side.role, side.address);
    let password_option = format!("--{prefix}-password");
    let peer_name = format!("the {} ({})", side.role, side.address);
    link.authenticate(&name, side.user, side.password, &password_option)
        .map_err(|e| {
            let text = e.to_string();
            if text.starts_with(&name) {
                return text;
            }
            // A TLS-only server resets or closes a plaintext client at its first request.
            let hint = if !side.tls.tls
                && (text.contains("reset") || text.contains("closed the connection"))
            {
                format!(" (if it speaks only TLS, give {tls_option})")
            } else {
                String::new()
            };
            format!("{peer_name}: {text}{hint}")
        })?;
    Ok(Peer {
        link,
        name: peer_name,
    })
}

/// A connection and the side it reaches: every error it gives says which side failed.
struct Peer {
    link: Link,
    /// "the source (ADDR)" or "the target (ADDR)".
    name: String,
}

impl Peer {
    fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> CliResult<Value> {
        let reply = self.link.call(args);
        reply.map_err(|e| self.blame(e))
    }

    fn send<A: AsRef<[u8]>>(&mut self, commands: &[Vec<A>]) -> CliResult<()> {
        let sent = self.link.send(commands);
        sent.map_err(|e| self.blame(e))
    }

    fn receive(&mut self) -> CliResult<Value> {
        let reply = self.link.receive();
        reply.map_err(|e| self.blame(e))
    }

    fn receive_or_skip(&mut self) -> CliResult<Received> {
        let reply = self.link.receive_or_skip();
        reply.map_err(|e| self.blame(e))
    }

    /// `error`, prefixed with this side's name.
    fn blame(&self, error: impl std::fmt::Display) -> Box<dyn std::error::Error + Send + Sync> {
        format!("{}: {error}", self.name).into()
    }
}

/// What happened to the keys of one database.
#[derive(Default)]
struct Tally {
    copied: u64,
    /// Gone from the source between SCAN and DUMP, or expired meanwhile.
    vanished: u64,
    /// The DUMP payloads of the keys the target restored.
    payload_bytes: u64,
    /// Error text → (how many, the first keys, shown as [`key_name`] shows them).
    failed: BTreeMap<String, (u64, Vec<String>)>,
}

impl Tally {
    fn failures(&self) -> u64 {
        self.failed.values().map(|(n, _)| n).sum()
    }

    fn fail(&mut self, key: &[u8], reason: String) {
        let entry = self.failed.entry(reason).or_default();
        entry.0 += 1;
        if entry.1.len() < FAILURES_NAMED {
            entry.1.push(key_name(key));
        }
    }

    /// Adds `other`'s counts to these.
    fn absorb(&mut self, other: Tally) {
        self.copied += other.copied;
        self.vanished += other.vanished;
        self.payload_bytes += other.payload_bytes;
        for (reason, (n, keys)) in other.failed {
            let entry = self.failed.entry(reason).or_default();
            entry.0 += n;
            entry.1.extend(keys);
        }
    }
}

/// A key's name for a failure line: escaped (a name is bytes, maybe binary), and no more
/// than its first [`NAME_SHOWN`] bytes with its length, so a long name does not flood it.
fn key_name(key: &[u8]) -> String {
    if key.len() <= NAME_SHOWN {
        return key.escape_ascii().to_string();
    }
    format!(
        "{}… ({} bytes)",
        key[..NAME_SHOWN].escape_ascii(),
        group(key.len() as u64)
    )
}

pub fn run(args: &MigrateArgs) -> CliResult<()> {
    let mut source = connect(&args.source())?;
    let mut target = connect(&args.target())?;
    let databases = if args.db.is_empty() {
        databases_with_keys(&mut source)?
    } else {
        args.db.clone()
    };
    check_databases(&mut target, &databases)?;
    println!(
        "copying {} from {} to {} (databases {})",
        args.r#match
            .as_deref()
            .map_or("every key".to_string(), |p| format!(
                "the keys matching {p:?}"
            )),
        args.from,
        args.to,
        if databases.is_empty() {
            "none: the source holds no keys".to_string()
        } else {
            databases
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    let began = Instant::now();
    let mut all = Tally::default();
    let copied = copy_all(&mut source, &mut target, &databases, args, &mut all);
    // The counts so far, even when an error stopped the copy: the user learns what is
    // already in the target.
    let seconds = began.elapsed().as_secs_f64();
    println!(
        "{}copied {} keys ({:.1} MB of DUMP payloads) in {seconds:.2} s, {:.0} keys/s",
        if copied.is_err() { "stopped: " } else { "" },
        group(all.copied),
        all.payload_bytes as f64 / 1e6,
        all.copied as f64 / seconds.max(1e-9),
    );
    let functions = copied?;
    if all.failures() > 0 {
        return Err(format!("{} keys were not copied (see above)", group(all.failures())).into());
    }
    functions.map_err(|_| "the function libraries were not copied (see above)".into())
}

/// The function libraries, then the keys of `databases`, counted in `all`: the libraries'
/// outcome, or the error that stopped the copy.
fn copy_all(
    source: &mut Peer,
    target: &mut Peer,
    databases: &[u32],
    args: &MigrateArgs,
    all: &mut Tally,
) -> CliResult<Result<(), String>> {
    let functions = if args.skip_functions {
        Ok(())
    } else {
        copy_functions(source, target, args.replace)?
    };
    if let Err(reason) = &functions {
        println!("function libraries: none copied: {reason}");
    }
    for &db in databases {
        let mut tally = Tally::default();
        let copied = copy_database(source, target, db, args, &mut tally)
            .and_then(|()| report_database(db, &tally, target));
        all.absorb(tally);
        copied?;
    }
    Ok(functions)
}

/// Refuses databases the target does not have (CONFIG GET databases), before anything is
/// copied: otherwise the keys of the lower ones would be copied before SELECT failed. A
/// target that does not answer CONFIG GET is not checked.
fn check_databases(target: &mut Peer, databases: &[u32]) -> CliResult<()> {
    let Some(&highest) = databases.iter().max() else {
        return Ok(());
    };
    let Value::Array(pair) = target.call(&["CONFIG", "GET", "databases"])? else {
        return Ok(());
    };
    let count = match pair.as_slice() {
        [_, Value::Bulk(count)] => std::str::from_utf8(count).ok().and_then(|c| c.parse().ok()),
        _ => None,
    };
    match count {
        Some(count) if highest >= count => Err(format!(
            "{} has {count} databases (CONFIG GET databases), so the source's db {highest} \
             has nowhere to go: nothing was copied (choose others with --db)",
            target.name
        )
        .into()),
        _ => Ok(()),
    }
}

/// FUNCTION DUMP from the source, FUNCTION RESTORE into the target (REPLACE or APPEND):
/// what it says, or why the libraries were not copied. A source that does not know
/// FUNCTION (Redis before 7.0) has nothing to copy; any other refusal (an ACL user without
/// the permission) fails the run, as the libraries may exist and were not copied.
fn copy_functions(
    source: &mut Peer,
    target: &mut Peer,
    replace: bool,
) -> CliResult<Result<(), String>> {
    let payload = match source.call(&["FUNCTION", "DUMP"])? {
        Value::Bulk(payload) => payload,
        Value::Error(text) if knows_no_functions(&text) => {
            println!(
                "function libraries: none copied: the source answered FUNCTION DUMP with {}",
                String::from_utf8_lossy(&text)
            );
            return Ok(Ok(()));
        }
        Value::Error(text) => {
            return Ok(Err(format!(
                "{} refused FUNCTION DUMP: {} (give --skip-functions to copy the keys alone)",
                source.name,
                String::from_utf8_lossy(&text)
            )))
        }
        other => {
            let reply = reply_text(&other);
            return Err(source.blame(format!("FUNCTION DUMP answered {reply}")));
        }
    };
    let libraries = tailstore_rdb::restore_libraries(&payload)
        .map_err(|err| format!("the source's FUNCTION DUMP payload does not read: {err}"))?;
    if libraries.is_empty() {
        println!("function libraries: the source has none");
        return Ok(Ok(()));
    }
    let policy = if replace { "REPLACE" } else { "APPEND" };
    let restore: [&[u8]; 4] = [b"FUNCTION", b"RESTORE", &payload, policy.as_bytes()];
    match target.call(&restore)? {
        Value::Error(text) => Ok(Err(format!(
            "the target answered FUNCTION RESTORE with {}",
            String::from_utf8_lossy(&text)
        ))),
        _ => {
            println!("function libraries: {} copied", libraries.len());
            Ok(Ok(()))
        }
    }
}

/// Whether an error reply to FUNCTION DUMP says the server has no FUNCTION command (Redis
/// before 7.0: "ERR unknown command 'FUNCTION'…", or "ERR unknown subcommand 'DUMP'…").
fn knows_no_functions(error: &[u8]) -> bool {
    error.starts_with(b"ERR unknown command") || error.starts_with(b"ERR unknown subcommand")
}

/// The databases of `peer`'s server that hold keys, from INFO keyspace (`db3:keys=…`).
fn databases_with_keys(peer: &mut Peer) -> CliResult<Vec<u32>> {
    let info = match peer.call(&["INFO", "keyspace"])? {
        Value::Bulk(text) | Value::Verbatim { text, .. } => {
            String::from_utf8_lossy(&text).into_owned()
        }
        other => {
            let reply = reply_text(&other);
            return Err(peer.blame(format!("INFO keyspace answered {reply}")));
        }
    };
    let mut databases: Vec<u32> = info
        .lines()
        .filter_map(|line| line.strip_prefix("db")?.split(':').next()?.parse().ok())
        .collect();
    databases.sort_unstable();
    Ok(databases)
}

/// SELECT `db` on `peer`; an error names the server's answer.
fn select(peer: &mut Peer, db: u32) -> CliResult<()> {
    match peer.call(&["SELECT".to_string(), db.to_string()])? {
        Value::Error(text) => {
            let text = String::from_utf8_lossy(&text).into_owned();
            Err(peer.blame(format!("SELECT {db} was refused: {text}")))
        }
        _ => Ok(()),
    }
}

/// Copies the keys of `db`, counting them in `tally` (which keeps the counts so far when an
/// error stops the copy).
fn copy_database(
    source: &mut Peer,
    target: &mut Peer,
    db: u32,
    args: &MigrateArgs,
    tally: &mut Tally,
) -> CliResult<()> {
    select(source, db)?;
    select(target, db)?;
    let total = match source.call(&["DBSIZE"])? {
        Value::Int(n) => n.max(0) as u64,
        other => {
            let reply = reply_text(&other);
            return Err(source.blame(format!("DBSIZE answered {reply}")));
        }
    };
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("db {msg} {bar:30} {pos}/{len} keys  {per_sec}  eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(db.to_string());
    let mut window = Window::default();
    let mut cursor = b"0".to_vec();
    loop {
        let (next, keys) = scan(source, &cursor, args)?;
        copy_keys(source, target, &keys, args.replace, &mut window, tally)?;
        bar.inc(keys.len() as u64);
        if next == b"0" {
            break;
        }
        cursor = next;
    }
    bar.finish_and_clear();
    Ok(())
}

/// One SCAN step from `cursor`: the next cursor and the keys.
fn scan(peer: &mut Peer, cursor: &[u8], args: &MigrateArgs) -> CliResult<(Vec<u8>, Vec<Vec<u8>>)> {
    let mut command = vec![
        b"SCAN".to_vec(),
        cursor.to_vec(),
        b"COUNT".to_vec(),
        args.batch.to_string().into_bytes(),
    ];
    if let Some(pattern) = &args.r#match {
        command.extend([b"MATCH".to_vec(), pattern.clone().into_bytes()]);
    }
    let reply = peer.call(&command)?;
    scan_reply(reply).map_err(|other| peer.blame(format!("SCAN answered {}", reply_text(&other))))
}
/// SCAN's reply as (next cursor, keys), or the reply itself if it is not shaped so.
fn scan_reply(reply: Value) -> Result<(Vec<u8>, Vec<Vec<u8>>), Value> {
    let Value::Array(parts) = reply else {
        return Err(reply);
    };
    match <[Value; 2]>::try_from(parts) {
        Ok([Value::Bulk(next), Value::Array(keys)])
            if keys.iter().all(|key| matches!(key, Value::Bulk(_))) =>
        {
            let keys = keys
                .into_iter()
                .filter_map(|key| match key {
                    Value::Bulk(key) => Some(key),
                    _ => None,
                })
                .collect();
            Ok((next, keys))
        }
        Ok(parts) => Err(Value::Array(parts.into())),
        Err(parts) => Err(Value::Array(parts)),
    }
}

/// How many keys the next window asks the source for, learnt from the replies so far.
struct Window {
    /// The most keys of the next window.
    keys: usize,
}

impl Default for Window {
    fn default() -> Self {
        Window { keys: FIRST_WINDOW }
    }
}

impl Window {
    /// The end of the window that starts at `keys[start]`: at most `self.keys` keys whose
    /// requests fit in [`REQUEST_WINDOW`] bytes, and at least one.
    fn end(&self, keys: &[Vec<u8>], start: usize) -> usize {
        let mut bytes = 0;
        let mut end = start;
        for key in &keys[start..] {
            let request = request_bytes(key);
            if end > start && (end - start >= self.keys || bytes + request > REQUEST_WINDOW) {
                break;
            }
            bytes += request;
            end += 1;
        }
        end
    }

    /// After a window of `keys` keys whose replies took `reply_bytes`: as many keys as
    /// replies of that mean size fit in [`REPLY_WINDOW`], at most twice as many as this
    /// window had and [`FIRST_WINDOW`] more (the next keys may be larger: grow by steps).
    fn learn(&mut self, keys: usize, reply_bytes: u64) {
        let per_key = (reply_bytes / keys.max(1) as u64).max(1);
        let fit = usize::try_from(REPLY_WINDOW / per_key).unwrap_or(usize::MAX);
        self.keys = fit.clamp(1, keys.saturating_mul(2).saturating_add(FIRST_WINDOW));
    }
}

/// The bytes of `key`'s PTTL and DUMP requests, near enough (lengths of up to 9 digits).
fn request_bytes(key: &[u8]) -> usize {
    // *2\r\n$4\r\nPTTL\r\n$<len>\r\n<key>\r\n, and DUMP's the same.
    2 * (key.len() + 30)
}

/// A key dumped from the source, waiting for its RESTORE.
struct Dumped<'k> {
    key: &'k [u8],
    /// What PTTL answered (-1: no expiry), and when.
    pttl: i64,
    answered: Instant,
    payload: Vec<u8>,
}

/// What RESTORE is given for a key whose PTTL answered `pttl` `elapsed` ago: 0 (no expiry)
/// for -1; the time left, at least 1 ms, otherwise (as Redis's MIGRATE does: PTTL answers 0
/// in the key's last millisecond, and RESTORE's 0 would make it immortal); `None` once the
/// deadline has passed: the key is gone from the source too.
fn restore_ttl(pttl: i64, elapsed: Duration) -> Option<i64> {
    if pttl == -1 {
        return Some(0);
    }
    let elapsed = i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX);
    let left = pttl.saturating_sub(elapsed);
    // A deadline in this very millisecond has not passed (Redis expires a key once the
    // clock is past its deadline).
    (left >= 0).then_some(left.max(1))
}

/// Copies `keys`: their PTTLs and DUMPs asked for in windows (see [`Window`]), their
/// RESTOREs sent whenever the payloads held pass [`HELD_PAYLOAD`], and at the end.
fn copy_keys(
    source: &mut Peer,
    target: &mut Peer,
    keys: &[Vec<u8>],
    replace: bool,
    window: &mut Window,
    tally: &mut Tally,
) -> CliResult<()> {
    let mut held = Vec::new();
    let mut held_bytes = 0;
    let mut start = 0;
    while start < keys.len() {
        let end = window.end(keys, start);
        let asks: Vec<Vec<&[u8]>> = keys[start..end]
            .iter()
            .flat_map(|key| [vec![&b"PTTL"[..], key], vec![&b"DUMP"[..], key]])
            .collect();
        source.send(&asks)?;
        let mut reply_bytes = 0;
        for key in &keys[start..end] {
            let (dumped, bytes) = dump_reply(source, key, tally)?;
            reply_bytes += bytes;
            if let Some(dumped) = dumped {
                held_bytes += dumped.payload.len() as u64;
                held.push(dumped);
            }
            if held_bytes >= HELD_PAYLOAD {
                restore(target, std::mem::take(&mut held), replace, tally)?;
                held_bytes = 0;
            }
        }
        window.learn(end - start, reply_bytes);
        start = end;
    }
    restore(target, held, replace, tally)
}

/// Reads `key`'s PTTL and DUMP replies: the key to restore, if it is to be (a key gone or
/// refused is counted in `tally`), and the bytes its DUMP reply took.
fn dump_reply<'k>(
    source: &mut Peer,
    key: &'k [u8],
    tally: &mut Tally,
) -> CliResult<(Option<Dumped<'k>>, u64)> {
    let ttl = source.receive()?;
    let answered = Instant::now();
    let dump = match source.receive_or_skip()? {
        Received::Reply(dump) => dump,
        Received::Oversized(length) => {
            let reason = format!(
                "its DUMP payload of {} bytes is larger than a reply may be here ({} bytes, \
                 Redis's proto-max-bulk-len)",
                group(length),
                group(tailstore_resp::Limits::default().max_bulk as u64),
            );
            tally.fail(key, reason);
            return Ok((None, length));
        }
    };
    let dumped = match (ttl, dump) {
        (Value::Int(-2), _) | (_, Value::Null) => {
            tally.vanished += 1;
            None
        }
        (Value::Int(pttl), Value::Bulk(payload)) => Some(Dumped {
            key,
            pttl,
            answered,
            payload,
        }),
        (Value::Error(text), _) | (_, Value::Error(text)) => {
            tally.fail(key, String::from_utf8_lossy(&text).into_owned());
            None
        }
        (ttl, dump) => {
            let reason = format!(
                "PTTL and DUMP answered {} and {}",
                reply_text(&ttl),
                reply_text(&dump)
            );
            tally.fail(key, reason);
            None
        }
    };
    let bytes = dumped.as_ref().map_or(0, |d| d.payload.len() as u64);
    Ok((dumped, bytes))
}

/// RESTOREs `held` in the target, written in chunks of about [`RESTORE_CHUNK`] payload
/// bytes whose TTLs are reckoned just before each is written, then their replies read.
fn restore(
    target: &mut Peer,
    held: Vec<Dumped>,
    replace: bool,
    tally: &mut Tally,
) -> CliResult<()> {
    // The keys sent, with their payloads' sizes, in the order of their replies.
    let mut sent = Vec::new();
    let mut start = 0;
    while start < held.len() {
        let end = chunk_end(&held, start);
        let chunk = &held[start..end];
        let ttls: Vec<Option<String>> = chunk
            .iter()
            .map(|dumped| {
                restore_ttl(dumped.pttl, dumped.answered.elapsed()).map(|t| t.to_string())
            })
            .collect();
        let mut commands = Vec::new();
        for (dumped, ttl) in chunk.iter().zip(&ttls) {
            let Some(ttl) = ttl else {
                tally.vanished += 1;
                continue;
            };
            let mut command = vec![&b"RESTORE"[..], dumped.key, ttl.as_bytes(), &dumped.payload];
            if replace {
                command.push(b"REPLACE");
            }
            commands.push(command);
            sent.push((dumped.key, dumped.payload.len() as u64));
        }
        target.send(&commands)?;
        start = end;
    }
    for (key, bytes) in sent {
        match target.receive()? {
            Value::Error(text) => tally.fail(key, String::from_utf8_lossy(&text).into_owned()),
            _ => {
                tally.copied += 1;
                tally.payload_bytes += bytes;
            }
        }
    }
    Ok(())
}

/// The end of the chunk of `held` that starts at `start`: payloads of at most
/// [`RESTORE_CHUNK`] bytes together, or one.
fn chunk_end(held: &[Dumped], start: usize) -> usize {
    let mut bytes = 0;
    let mut end = start;
    while let Some(dumped) = held.get(end) {
        let size = dumped.payload.len() as u64;
        if end > start && bytes + size > RESTORE_CHUNK {
            break;
        }
        bytes += size;
        end += 1;
    }
    end
}

/// One line per database: what was copied, what was not and why, and both servers' key
/// counts now.
fn report_database(db: u32, tally: &Tally, target: &mut Peer) -> CliResult<()> {
    let now = match target.call(&["DBSIZE"])? {
        Value::Int(n) => n.to_string(),
        other => reply_text(&other),
    };
    println!(
        "db {db}: {} keys copied, {} gone from the source before their turn, {} not copied; \
         the target's db {db} now holds {now} keys",
        group(tally.copied),
        group(tally.vanished),
        group(tally.failures()),
    );
    for (reason, (n, keys)) in &tally.failed {
        println!("  {} keys: {reason} (e.g. {})", group(*n), keys.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_ttls_keep_last_milliseconds_and_lose_the_time_in_transit() {
        let now = Duration::ZERO;
        assert_eq!(restore_ttl(-1, Duration::from_secs(9)), Some(0));
        // PTTL 0: the key's last millisecond; RESTORE's 0 would make it immortal.
        assert_eq!(restore_ttl(0, now), Some(1));
        assert_eq!(restore_ttl(5_000, now), Some(5_000));
        assert_eq!(
            restore_ttl(5_000, Duration::from_millis(1_200)),
            Some(3_800)
        );
        assert_eq!(restore_ttl(5_000, Duration::from_millis(5_000)), Some(1));
        assert_eq!(restore_ttl(5_000, Duration::from_millis(5_001)), None);
    }

    #[test]
    fn windows_fit_the_request_and_reply_bounds() {
        let long: Vec<Vec<u8>> = vec![vec![b'k'; 500]; 30_000];
        let mut window = Window { keys: usize::MAX };
        let end = window.end(&long, 0);
        assert!(end * request_bytes(&long[0]) <= REQUEST_WINDOW, "{end}");
        assert!(end > 500, "{end}");
        assert_eq!(Window::default().end(&long, 29_990), 30_000);
        // One key at least, however large its request.
        assert_eq!(window.end(&[vec![b'k'; 2 << 20]], 0), 1);
        // Replies of 20 MiB: one key per window; of 4 KiB: as many as fit, growing by steps.
        window.learn(16, 16 * (20 << 20));
        assert_eq!(window.keys, 1);
        window.learn(1, 4096);
        assert_eq!(window.keys, 2 + FIRST_WINDOW);
        window.learn(100_000, 100_000 * 4096);
        assert_eq!(window.keys, (REPLY_WINDOW / 4096) as usize);
    }

    #[test]
    fn key_names_are_escaped_and_cut() {
        assert_eq!(key_name(b"a\n\xff"), "a\\n\\xff");
        let long = [b"x".repeat(70), b"\n".to_vec()].concat();
        assert_eq!(key_name(&long), format!("{}… (71 bytes)", "x".repeat(64)));
    }

    #[test]
    fn only_an_unknown_function_command_means_no_functions() {
        assert!(knows_no_functions(b"ERR unknown command 'FUNCTION'"));
        assert!(knows_no_functions(
            b"ERR unknown subcommand 'DUMP'. Try FUNCTION HELP."
        ));
        assert!(!knows_no_functions(
            b"NOPERM this user has no permissions to run the 'function|dump' command"
        ));
    }
}
