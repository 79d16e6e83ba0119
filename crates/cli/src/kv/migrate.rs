//! `tailstore kv migrate`: copies the keys of one RESP server into another with Redis's own
//! commands: SCAN the source, PTTL and DUMP each key, RESTORE it in the target with what was
//! left of its TTL. From Redis into tailstore, back, or between two tailstore servers.
//! The source's function libraries go first (FUNCTION DUMP, then FUNCTION RESTORE), so a
//! key that only a function reads arrives where the function already is.
//!
//! A round trip carries `--batch` keys each way (pipelined). A key written in the source
//! during the copy may be copied as it was before or after that write; one deleted meanwhile
//! is skipped (its DUMP answers nil). Keys are copied, never removed from the source.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use tailstore_kv::server::Secret;
use tailstore_resp::Value;

use super::address::ServerAddress;
use super::link::Link;
use super::server::reply_text;
use super::tls::{TlsClient, TlsClientArgs};
use crate::report::group;
use crate::CliResult;

/// How long one round trip may take before the copy stops (a DUMP of a large key included).
const PATIENCE: Duration = Duration::from_secs(120);
/// Failures named one by one; the rest are counted with their reason.
const FAILURES_NAMED: usize = 5;

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
fn connect(side: &Side) -> CliResult<Link> {
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
    link.authenticate(&name, side.user, side.password, &password_option)?;
    Ok(link)
}

/// What happened to the keys of one database.
#[derive(Default)]
struct Tally {
    copied: u64,
    /// Gone from the source between SCAN and DUMP, or expired meanwhile.
    vanished: u64,
    payload_bytes: u64,
    /// Error text → (how many, the first keys).
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
            entry.1.push(String::from_utf8_lossy(key).into_owned());
        }
    }
}

pub fn run(args: &MigrateArgs) -> CliResult<()> {
    let mut source = connect(&args.source())?;
    let mut target = connect(&args.target())?;
    let databases = if args.db.is_empty() {
        databases_with_keys(&mut source)?
    } else {
        args.db.clone()
    };
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
    let functions = if args.skip_functions {
        Ok(())
    } else {
        copy_functions(&mut source, &mut target, args.replace)?
    };
    if let Err(reason) = &functions {
        println!("function libraries: none copied: {reason}");
    }
    for db in databases {
        let tally = copy_database(&mut source, &mut target, db, args)?;
        report_database(db, &tally, &mut target)?;
        all.copied += tally.copied;
        all.vanished += tally.vanished;
        all.payload_bytes += tally.payload_bytes;
        for (reason, (n, keys)) in tally.failed {
            let entry = all.failed.entry(reason).or_default();
            entry.0 += n;
            entry.1.extend(keys);
        }
    }
    let seconds = began.elapsed().as_secs_f64();
    println!(
        "copied {} keys ({:.1} MB of DUMP payloads) in {seconds:.2} s, {:.0} keys/s",
        group(all.copied),
        all.payload_bytes as f64 / 1e6,
        all.copied as f64 / seconds.max(1e-9),
    );
    if all.failures() > 0 {
        return Err(format!("{} keys were not copied (see above)", group(all.failures())).into());
    }
    functions.map_err(|_| "the function libraries were not copied (see above)".into())
}

/// FUNCTION DUMP from the source, FUNCTION RESTORE into the target (REPLACE or APPEND):
/// what it says, or why the target refused the libraries. A source that has no functions
/// (Redis before 7.0 does not know FUNCTION) has nothing to copy.
fn copy_functions(
    source: &mut Link,
    target: &mut Link,
    replace: bool,
) -> CliResult<Result<(), String>> {
    let payload = match source.call(&["FUNCTION", "DUMP"])? {
        Value::Bulk(payload) => payload,
        Value::Error(text) => {
            println!(
                "function libraries: none copied: the source answered FUNCTION DUMP with {}",
                String::from_utf8_lossy(&text)
            );
            return Ok(Ok(()));
        }
        other => return Err(format!("FUNCTION DUMP answered {}", reply_text(&other)).into()),
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

/// The databases of `link`'s server that hold keys, from INFO keyspace (`db3:keys=…`).
fn databases_with_keys(link: &mut Link) -> CliResult<Vec<u32>> {
    let info = match link.call(&["INFO", "keyspace"])? {
        Value::Bulk(text) | Value::Verbatim { text, .. } => {
            String::from_utf8_lossy(&text).into_owned()
        }
        other => return Err(format!("INFO keyspace answered {}", reply_text(&other)).into()),
    };
    let mut databases: Vec<u32> = info
        .lines()
        .filter_map(|line| line.strip_prefix("db")?.split(':').next()?.parse().ok())
        .collect();
    databases.sort_unstable();
    Ok(databases)
}

/// SELECT `db` on `link`; an error names the server's answer.
fn select(link: &mut Link, db: u32, which: &str) -> CliResult<()> {
    match link.call(&["SELECT".to_string(), db.to_string()])? {
        Value::Error(text) => Err(format!(
            "the {which} server refused SELECT {db}: {}",
            String::from_utf8_lossy(&text)
        )
        .into()),
        _ => Ok(()),
    }
}

fn copy_database(
    source: &mut Link,
    target: &mut Link,
    db: u32,
    args: &MigrateArgs,
) -> CliResult<Tally> {
    select(source, db, "source")?;
    select(target, db, "target")?;
    let total = match source.call(&["DBSIZE"])? {
        Value::Int(n) => n.max(0) as u64,
        other => return Err(format!("DBSIZE answered {}", reply_text(&other)).into()),
    };
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("db {msg} {bar:30} {pos}/{len} keys  {per_sec}  eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(db.to_string());
    let mut tally = Tally::default();
    let mut cursor = b"0".to_vec();
    loop {
        let (next, keys) = scan(source, &cursor, args)?;
        copy_keys(source, target, &keys, args.replace, &mut tally)?;
        bar.inc(keys.len() as u64);
        if next == b"0" {
            break;
        }
        cursor = next;
    }
    bar.finish_and_clear();
    Ok(tally)
}

/// One SCAN step from `cursor`: the next cursor and the keys.
fn scan(link: &mut Link, cursor: &[u8], args: &MigrateArgs) -> CliResult<(Vec<u8>, Vec<Vec<u8>>)> {
    let mut command = vec![
        b"SCAN".to_vec(),
        cursor.to_vec(),
        b"COUNT".to_vec(),
        args.batch.to_string().into_bytes(),
    ];
    if let Some(pattern) = &args.r#match {
        command.extend([b"MATCH".to_vec(), pattern.clone().into_bytes()]);
    }
    let reply = link.call(&command)?;
    scan_reply(reply).map_err(|other| format!("SCAN answered {}", reply_text(&other)).into())
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

/// Copies `keys`: their PTTLs and DUMPs in one round trip to the source, their RESTOREs in
/// one to the target.
fn copy_keys(
    source: &mut Link,
    target: &mut Link,
    keys: &[Vec<u8>],
    replace: bool,
    tally: &mut Tally,
) -> CliResult<()> {
    let asks: Vec<Vec<&[u8]>> = keys
        .iter()
        .flat_map(|key| [vec![&b"PTTL"[..], key], vec![&b"DUMP"[..], key]])
        .collect();
    source.send(&asks)?;
    let mut restores = Vec::new();
    let mut restored_keys = Vec::new();
    for key in keys {
        let ttl = source.receive()?;
        let dump = source.receive()?;
        let (ttl, payload) = match (ttl, dump) {
            (Value::Int(-2), _) | (_, Value::Null) => {
                tally.vanished += 1;
                continue;
            }
            (Value::Int(ttl), Value::Bulk(payload)) => (ttl.max(0), payload),
            (Value::Error(text), _) | (_, Value::Error(text)) => {
                tally.fail(key, String::from_utf8_lossy(&text).into_owned());
                continue;
            }
            (ttl, dump) => {
                let reason = format!(
                    "PTTL and DUMP answered {} and {}",
                    reply_text(&ttl),
                    reply_text(&dump)
                );
                tally.fail(key, reason);
                continue;
            }
        };
        tally.payload_bytes += payload.len() as u64;
        let mut restore = vec![
            b"RESTORE".to_vec(),
            key.clone(),
            ttl.to_string().into_bytes(),
            payload,
        ];
        if replace {
            restore.push(b"REPLACE".to_vec());
        }
        restores.push(restore);
        restored_keys.push(key);
    }
    target.send(&restores)?;
    for key in restored_keys {
        match target.receive()? {
            Value::Error(text) => tally.fail(key, String::from_utf8_lossy(&text).into_owned()),
            _ => tally.copied += 1,
        }
    }
    Ok(())
}

/// One line per database: what was copied, what was not and why, and both servers' key
/// counts now.
fn report_database(db: u32, tally: &Tally, target: &mut Link) -> CliResult<()> {
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
