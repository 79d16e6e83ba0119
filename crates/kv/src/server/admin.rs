//! Commands the connection answers itself: PING, HELLO, SELECT, CLIENT, COMMAND, CONFIG,
//! INFO, TIME, FLUSHDB/FLUSHALL, SAVE.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tailstore_engine::PendingCommit;
use tailstore_resp::{Protocol, Reply};

use super::acl::User;
use super::clients::ClientFilter;
use super::connection::Connection;
use super::pubsub::{Message, Subscriber, Target};
use super::saves::SaveKind;
use super::{command_stats, standalone, tracking, Shared};
use crate::command::docs;
use crate::command::key_specs::{self, BeginSearch, FindKeys, KeySpec};
use crate::command::subcommands::Subcommand;
use crate::command::{
    categories, help, is, matches, parse_int, subcommands, Command, MapChange, COMMANDS,
    NOT_INTEGER, SYNTAX,
};
use crate::keyspace::notifications;

pub use crate::REDIS_VERSION;

/// Runs a connection or server command outside MULTI.
pub fn run<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    command: &Command,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    if let Some(change) = map_change(shared, conn.db, command, args) {
        return match change {
            Ok(change) => change_map(shared, conn, change, pending),
            Err(refusal) => refusal,
        };
    }
    match command.name {
        "quit" => {
            conn.closing = true;
            Reply::ok()
        }
        "reset" => {
            super::pubsub::unsubscribe_all(shared, conn);
            shared.tracking.disable(conn);
            if std::mem::take(&mut conn.monitoring) {
                shared.monitors.remove(conn.home);
            }
            conn.multi = None;
            conn.watched.clear();
            conn.db = 0;
            conn.protocol = Protocol::Resp2;
            conn.name = None;
            conn.authenticated = !shared.password.required();
            conn.user = None;
            update_listing(shared, conn);
            Reply::Status("RESET".into())
        }
        "hello" => hello(shared, conn, args),
        "monitor" => {
            conn.monitoring = true;
            shared.monitors.add(conn.home);
            Reply::ok()
        }
        _ => answer(shared, conn, command, args, false),
    }
}

/// A connection or server command queued in MULTI, answered as EXEC runs.
pub fn queued(
    shared: &Shared,
    conn: &mut Connection,
    command: &Command,
    args: &[Vec<u8>],
) -> Reply {
    answer(shared, conn, command, args, true)
}

/// A connection or server command, at the top level or (`in_exec`) queued in MULTI.
fn answer(
    shared: &Shared,
    conn: &mut Connection,
    command: &Command,
    args: &[Vec<u8>],
    in_exec: bool,
) -> Reply {
    if let Some(reply) = connectionless(shared, command, args, &mut conn.published) {
        return reply;
    }
    match command.name {
        "select" => select(shared, conn, &args[1]),
        "client" => client(shared, conn, args),
        "command" => command_info(args),
        "config" => config(shared, args),
        "info" => info(shared, args),
        "save" | "bgsave" | "bgrewriteaof" => save(shared, command.name, in_exec),
        "auth" => auth(shared, conn, args),
        "wait" => wait(args),
        "slowlog" => shared.slowlog.command(args),
        "acl" => super::acl::acl(shared, conn, args),
        "latency" if is(&args[1], "histogram") => {
            command_stats::histogram_reply(&shared.command_stats(), &args[2..])
        }
        // A primary without replicas (replication is not implemented).
        "role" => Reply::Array(vec![
            Reply::Bulk(b"master".to_vec()),
            Reply::Int(0),
            Reply::Array(Vec::new()),
        ]),
        // Queued in MULTI: EXEC has dropped the watches already.
        "unwatch" => Reply::ok(),
        // Queued in MULTI (outside it, `run` answers these).
        "hello" => hello(shared, conn, args),
        "monitor" => Reply::error("ERR MONITOR isn't allowed for DENY BLOCKING client"),
        name => standalone::answer(name, args).unwrap_or_else(|| {
            Reply::error(format!(
                "ERR '{name}' is not allowed inside MULTI in tailstore"
            ))
        }),
    }
}

/// The server commands that need no connection, which scripts may call too; `None` for
/// the others. PUBLISH's messages go to `published`, sent after the durability wait.
pub fn connectionless(
    shared: &Shared,
    command: &Command,
    args: &[Vec<u8>],
    published: &mut Vec<(Subscriber, Message)>,
) -> Option<Reply> {
    Some(match command.name {
        "ping" => match args.get(1) {
            Some(message) if args.len() == 2 => Reply::Bulk(message.clone()),
            Some(_) => wrong_arity("ping"),
            None => Reply::Status("PONG".into()),
        },
        "echo" => Reply::Bulk(args[1].clone()),
        "time" => time(),
        "lastsave" => Reply::Int(shared.saves.last_at() as i64),
        "publish" => Reply::Int(shared.publish(&args[1], &args[2], published) as i64),
        "spublish" => {
            let deliver = |who, message| published.push((who, message));
            let delivered = shared.pubsub.publish_shard(&args[1], &args[2], deliver);
            Reply::Int(delivered as i64)
        }
        "pubsub" => pubsub(shared, args),
        "lolwut" => lolwut(args),
        _ => return None,
    })
}

/// LOLWUT [VERSION version]: the line Redis 7.0 answers for its own version, for every
/// version (Redis draws generative art for versions 5 and 6; tailstore draws none).
fn lolwut(args: &[Vec<u8>]) -> Reply {
    if args.len() >= 3 && is(&args[1], "version") && parse_int(&args[2]).is_err() {
        return Reply::error(NOT_INTEGER);
    }
    Reply::Verbatim {
        format: *b"txt",
        text: format!("Redis ver. {REDIS_VERSION}\n").into_bytes(),
    }
}

/// PUBSUB CHANNELS [pattern] | NUMSUB [channel…] | NUMPAT, with Redis 7.0's replies (NUMSUB
/// a flat array in RESP3 too) and error texts.
fn pubsub(shared: &Shared, args: &[Vec<u8>]) -> Reply {
    let bulk = |bytes: &[u8]| Reply::Bulk(bytes.to_vec());
    let typed = String::from_utf8_lossy(&args[1]);
    match (typed.to_ascii_lowercase().as_str(), args.len()) {
        (sub @ ("channels" | "shardchannels"), 2 | 3) => {
            let target = channels_of(sub);
            let pattern = args.get(2).map(Vec::as_slice);
            let names = shared.pubsub.channels(target, pattern);
            Reply::Array(names.iter().map(|c| bulk(c)).collect())
        }
        ("channels" | "shardchannels", _) => Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{typed}'. Try PUBSUB HELP."
        )),
        (sub @ ("numsub" | "shardnumsub"), _) => {
            let target = channels_of(sub);
            let count = |c: &[u8]| Reply::Int(shared.pubsub.subscribers_of(target, c) as i64);
            Reply::Array(args[2..].iter().flat_map(|c| [bulk(c), count(c)]).collect())
        }
        ("numpat", _) => Reply::Int(shared.pubsub.patterns() as i64),
        _ => help(PUBSUB_HELP),
    }
}

/// The channels a PUBSUB subcommand asks about: the shard channels for SHARD….
fn channels_of(sub: &str) -> Target {
    if sub.starts_with("shard") {
        Target::Shard
    } else {
        Target::Channel
    }
}

fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

fn select(shared: &Shared, conn: &mut Connection, arg: &[u8]) -> Reply {
    match database_index(shared, arg) {
        Ok(db) => {
            conn.db = db;
            update_listing(shared, conn);
            Reply::ok()
        }
        Err(reply) => reply,
    }
}

/// SELECT's argument: a database index, or Redis's error reply.
pub fn database_index(shared: &Shared, arg: &[u8]) -> Result<u32, Reply> {
    // Read as Redis reads an integer: no sign '+', no leading zero.
    match parse_int(arg) {
        Err(_) => Err(Reply::error(NOT_INTEGER)),
        Ok(i) if i < 0 || i >= i64::from(shared.ks.databases()) => {
            Err(Reply::error("ERR DB index is out of range"))
        }
        Ok(i) => Ok(i as u32),
    }
}

fn time() -> Reply {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Reply::Array(vec![
        Reply::Bulk(now.as_secs().to_string().into_bytes()),
        Reply::Bulk(now.subsec_micros().to_string().into_bytes()),
    ])
}

fn update_listing(shared: &Shared, conn: &Connection) {
    shared.client_list.update(conn);
}

/// The name CLIENT SETNAME or HELLO SETNAME gives (`None`: the empty name, which clears
/// it), or Redis's refusal of it.
fn client_name(name: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    if name.iter().any(|b| *b <= b' ' || *b > b'~') {
        return Err(Reply::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok((!name.is_empty()).then(|| name.to_vec()))
}

/// AUTH [user] password (`server/auth.rs`).
fn auth(shared: &Shared, conn: &mut Connection, args: &[Vec<u8>]) -> Reply {
    let (user, password) = match args {
        [_, password] => (None, password),
        [_, user, password] => (Some(&user[..]), password),
        _ => return Reply::error("ERR syntax error"),
    };
    let client = || conn.listing().line();
    match shared
        .password
        .attempt(&shared.users, "AUTH", user, password, client)
    {
        Ok(user) => {
            log_in(shared, conn, user);
            Reply::ok()
        }
        Err(refused) => refused,
    }
}

/// The connection runs its commands as `user` (`None`: `default`) from now on.
fn log_in(shared: &Shared, conn: &mut Connection, user: Option<Arc<User>>) {
    conn.authenticated = true;
    conn.user = user;
    conn.user_generation = shared.users.generation();
    update_listing(shared, conn); // CLIENT LIST's user, CLIENT KILL USER
}

/// WAIT numreplicas timeout: no replicas, so none acknowledge (at once, as in Redis).
fn wait(args: &[Vec<u8>]) -> Reply {
    let int = |arg: &[u8]| crate::command::parse_int(arg).ok();
    if int(&args[1]).is_none() {
        return Reply::error("ERR value is not an integer or out of range");
    }
    match int(&args[2]) {
        None => Reply::error("ERR timeout is not an integer or out of range"),
        Some(t) if t < 0 => Reply::error("ERR timeout is negative"),
        Some(_) => Reply::Int(0),
    }
}

/// What a HELLO asks for: a protocol (`None`: the connection's), a login (user, password)
/// and a name.
struct HelloRequest<'a> {
    protocol: Option<Protocol>,
    credentials: Option<(&'a [u8], &'a [u8])>,
    name: Option<&'a [u8]>,
}

/// HELLO's arguments read, or Redis's refusal of them.
fn hello_request(args: &[Vec<u8>]) -> Result<HelloRequest<'_>, Reply> {
    let protocol = match args.get(1).map(Vec::as_slice) {
        None => None,
        Some(b"2") => Some(Protocol::Resp2),
        Some(b"3") => Some(Protocol::Resp3),
        Some(other) if crate::command::parse_int(other).is_err() => {
            return Err(Reply::error(
                "ERR Protocol version is not an integer or out of range",
            ))
        }
        Some(_) => return Err(Reply::error("NOPROTO unsupported protocol version")),
    };
    let mut request = HelloRequest {
        protocol,
        credentials: None,
        name: None,
    };
    let mut at = 2;
    while let Some(option) = args.get(at) {
        let more = args.len() - at - 1;
        if is(option, "AUTH") && more >= 2 {
            request.credentials = Some((&args[at + 1], &args[at + 2]));
            at += 3;
        } else if is(option, "SETNAME") && more >= 1 {
            request.name = Some(&args[at + 1]);
            at += 2;
        } else {
            return Err(Reply::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(option)
            )));
        }
    }
    Ok(request)
}

/// The login an AUTH or a HELLO asks for, if it is well formed: the user (`None`: AUTH's
/// one-argument form) and the password.
pub(super) fn requested_login<'a>(
    command: &Command,
    args: &'a [Vec<u8>],
) -> Option<(Option<&'a [u8]>, &'a [u8])> {
    match (command.name, args) {
        ("auth", [_, password]) => Some((None, password)),
        ("auth", [_, user, password]) => Some((Some(user), password)),
        ("hello", _) => {
            let (user, password) = hello_request(args).ok()?.credentials?;
            Some((Some(user), password))
        }
        _ => None,
    }
}

/// HELLO [protover [AUTH user pass] [SETNAME name]].
fn hello(shared: &Shared, conn: &mut Connection, args: &[Vec<u8>]) -> Reply {
    let HelloRequest {
        protocol,
        credentials,
        name,
    } = match hello_request(args) {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let protocol = protocol.unwrap_or(conn.protocol);
    if let Some((user, password)) = credentials {
        let client = || conn.listing().line();
        let users = &shared.users;
        match shared
            .password
            .attempt(users, "HELLO", Some(user), password, client)
        {
            Ok(user) => log_in(shared, conn, user),
            Err(refused) => return refused,
        }
    }
    if !conn.authenticated && shared.password.required() {
        return super::auth::hello_refusal();
    }
    if let Some(name) = name {
        match client_name(name) {
            Ok(valid) => conn.name = valid,
            Err(refused) => return refused,
        }
    }
    conn.protocol = protocol;
    update_listing(shared, conn);
    let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    Reply::Map(vec![
        (text("server"), text("redis")),
        (text("version"), text(REDIS_VERSION)),
        (
            text("proto"),
            Reply::Int(if protocol == Protocol::Resp3 { 3 } else { 2 }),
        ),
        (text("id"), Reply::Int(conn.id as i64)),
        (text("mode"), text("standalone")),
        (text("role"), text("master")),
        (text("modules"), Reply::Array(Vec::new())),
    ])
}

fn client(shared: &Shared, conn: &mut Connection, args: &[Vec<u8>]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("id", 2) => Reply::Int(conn.id as i64),
        ("getname", 2) => conn.name.clone().map_or(Reply::Null, Reply::Bulk),
        ("setname", 3) => match client_name(&args[2]) {
            Ok(name) => {
                conn.name = name;
                update_listing(shared, conn);
                Reply::ok()
            }
            Err(refused) => refused,
        },
        ("setinfo", 4) => {
            if is(&args[2], "LIB-NAME") {
                conn.lib_name = Some(args[3].clone());
            } else if is(&args[2], "LIB-VER") {
                conn.lib_version = Some(args[3].clone());
            } else {
                return Reply::error(format!(
                    "ERR Unrecognized option '{}'",
                    String::from_utf8_lossy(&args[2])
                ));
            }
            Reply::ok()
        }
        ("list", _) => match ClientFilter::parse_list(&args[2..]) {
            Ok(filter) => {
                // Its own line as it stands now, not as its last pass left it.
                conn.note_buffers(Instant::now(), Some(args));
                update_listing(shared, conn);
                Reply::Verbatim {
                    format: *b"txt",
                    text: shared.client_list.lines(&filter).into_bytes(),
                }
            }
            Err(refusal) => refusal,
        },
        ("kill", 3..) => client_kill(shared, conn, &args[2..]),
        ("unblock", 3..=4) => client_unblock(shared, &args[2..]),
        ("pause", 3 | 4) => client_pause(shared, &args[2..]),
        ("pause", _) => Reply::error(SYNTAX),
        ("unpause", _) => {
            shared.pause.end();
            for each in shared.loops.iter() {
                each.wake(); // the clients it held back run now
            }
            Reply::ok()
        }
        ("info", 2) => {
            conn.note_buffers(Instant::now(), Some(args));
            Reply::Verbatim {
                format: *b"txt",
                text: format!("{}\n", conn.listing().line()).into_bytes(),
            }
        }
        ("reply", 3) => client_reply(conn, &args[2]),
        ("tracking", _) => {
            let reply =
                tracking::client_tracking(&shared.tracking, &shared.client_list, conn, &args[2..]);
            update_listing(shared, conn); // its flags and redirect
            reply
        }
        ("caching", _) => tracking::client_caching(conn, &args[2]),
        ("getredir", _) => tracking::client_getredir(conn),
        ("trackinginfo", _) => tracking::client_trackinginfo(conn),
        // Nothing is evicted (no maxmemory) and no command changes a key's access time
        // that OBJECT IDLETIME would read differently: the switches are accepted, as Redis
        // reads them.
        ("no-evict" | "no-touch", _) if is(&args[2], "on") || is(&args[2], "off") => Reply::ok(),
        ("no-evict" | "no-touch", _) => Reply::error(SYNTAX),
        _ => help(CLIENT_HELP),
    }
}

/// CLIENT KILL addr:port, or CLIENT KILL with filters (ID, ADDR, LADDR, TYPE, USER,
/// SKIPME): closes the clients picked, this one after its reply (see `server/clients.rs`).
fn client_kill(shared: &Shared, conn: &mut Connection, args: &[Vec<u8>]) -> Reply {
    let filter = match ClientFilter::parse_kill(args, |name| shared.users.exists(name)) {
        Ok(filter) => filter,
        Err(refusal) => return refusal,
    };
    filter.reply(kill_clients(shared, conn, &filter))
}

/// Closes the clients `filter` picks (`conn` after its reply): how many.
pub(super) fn kill_clients(shared: &Shared, conn: &mut Connection, filter: &ClientFilter) -> usize {
    let doomed = shared.client_list.matching(filter, conn.id);
    for client in &doomed {
        if client.id == conn.id {
            conn.closing = true;
        } else {
            shared.loops[client.home.at].kill(client.home.token, client.id);
        }
    }
    doomed.len()
}

/// CLIENT UNBLOCK id [TIMEOUT | ERROR]: 1 if client `id` waits in a blocking command, which
/// then ends as at its timeout (its command runs a last time) or with Redis's UNBLOCKED
/// error; 0 otherwise. The client's event loop ends it; a write that serves the client
/// first, in the moment between, wins (Redis, single-threaded, has no such moment).
fn client_unblock(shared: &Shared, args: &[Vec<u8>]) -> Reply {
    let error = match args.get(1) {
        None => false,
        Some(reason) if is(reason, "timeout") => false,
        Some(reason) if is(reason, "error") => true,
        Some(_) => return Reply::error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let Some(id) = crate::command::parse_int(&args[0]).ok() else {
        return Reply::error("ERR value is not an integer or out of range");
    };
    let Some(home) = u64::try_from(id)
        .ok()
        .and_then(|id| shared.client_list.blocked_at(id))
    else {
        return Reply::Int(0);
    };
    shared.loops[home.at].unblock(home.token, id as u64, error);
    Reply::Int(1)
}

/// CLIENT PAUSE timeout [WRITE|ALL]: holds back clients' commands (all of them, or those
/// that may write) for `timeout` ms (see `server/pause.rs`).
fn client_pause(shared: &Shared, args: &[Vec<u8>]) -> Reply {
    let writes_only = match args.get(1) {
        None => false,
        Some(mode) if is(mode, "write") => true,
        Some(mode) if is(mode, "all") => false,
        Some(_) => return Reply::error("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let timeout = match crate::command::parse_int(&args[0]).ok() {
        None => return Reply::error("ERR timeout is not an integer or out of range"),
        Some(ms) if ms < 0 => return Reply::error("ERR timeout is negative"),
        Some(ms) => Duration::from_millis(ms as u64),
    };
    // A timeout past what the clock can add (i64::MAX ms) pauses for as long as it can.
    let now = Instant::now();
    let until = now
        .checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now);
    shared.pause.start(until, writes_only);
    Reply::ok()
}

/// CLIENT REPLY ON | OFF | SKIP. OFF and SKIP are not answered: their own reply is the
/// first one dropped (see `dispatch::send`).
fn client_reply(conn: &mut Connection, mode: &[u8]) -> Reply {
    if is(mode, "on") {
        conn.replies_off = false;
        conn.replies_to_skip = 0;
    } else if is(mode, "off") {
        conn.replies_off = true;
    } else if is(mode, "skip") {
        conn.replies_to_skip = 2;
    } else {
        return Reply::error("ERR syntax error");
    }
    Reply::ok()
}

/// COMMAND, COMMAND COUNT, COMMAND INFO name…, COMMAND DOCS [name…], COMMAND LIST.
fn command_info(args: &[Vec<u8>]) -> Reply {
    let sub = args
        .get(1)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    match sub.as_deref() {
        // COMMAND, and COMMAND INFO naming no command: every command.
        None | Some("info") if args.len() <= 2 => {
            Reply::Array(COMMANDS.iter().map(describe_command).collect())
        }
        Some("count") => Reply::Int(COMMANDS.len() as i64),
        Some("list") => command_list(&args[2..]),
        Some("info") => Reply::Array(
            args[2..]
                .iter()
                .map(|name| describe_named(name).unwrap_or(Reply::NullArray))
                .collect(),
        ),
        Some("docs") if args.len() > 2 => Reply::Map(
            args[2..]
                .iter()
                .filter_map(|name| lookup_named(name))
                .map(|named| match named {
                    (command, None) => document_command(command),
                    (container, Some(sub)) => document_subcommand(container, sub.name),
                })
                .collect(),
        ),
        Some("docs") => Reply::Map(COMMANDS.iter().map(document_command).collect()),
        Some("getkeys") => command_getkeys(&args[2..], false),
        Some("getkeysandflags") => command_getkeys(&args[2..], true),
        _ => help(COMMAND_HELP),
    }
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]: every
/// command's name and each container's subcommands' (`client|kill`), as Redis 7.0 lists
/// them. No command comes from a module; an unknown category has no commands.
fn command_list(filter: &[Vec<u8>]) -> Reply {
    let names = COMMANDS.iter().flat_map(|command| {
        std::iter::once(command.name.to_string()).chain(subcommands::full_names(command.name))
    });
    let picked: Vec<String> = match filter {
        [] => names.collect(),
        [by, kind, _] if is(by, "filterby") && is(kind, "module") => Vec::new(),
        [by, kind, pattern] if is(by, "filterby") && is(kind, "pattern") => {
            let pattern = pattern.to_ascii_lowercase();
            names
                .filter(|name| matches(&pattern, name.as_bytes()))
                .collect()
        }
        [by, kind, category] if is(by, "filterby") && is(kind, "aclcat") => {
            let bit = categories::named(&String::from_utf8_lossy(category)).unwrap_or(0);
            names
                .filter(|name| categories::of(name) & bit != 0)
                .collect()
        }
        _ => return Reply::error(SYNTAX),
    };
    Reply::Array(
        picked
            .into_iter()
            .map(|name| Reply::Bulk(name.into_bytes()))
            .collect(),
    )
}

/// COMMAND GETKEYS command arg… (and GETKEYSANDFLAGS, each key with its flags): the keys
/// the command would name, refused as Redis 7.0 refuses a command it does not know, one
/// without keys, one of the wrong arity, and arguments that do not say their keys.
fn command_getkeys(args: &[Vec<u8>], with_flags: bool) -> Reply {
    let Some(command) = crate::command::lookup(&args[0]) else {
        return Reply::error("ERR Invalid command specified");
    };
    let container = subcommands::of(command.name).is_some();
    if container && args.len() > 1 && subcommands::named(command.name, args).is_none() {
        return Reply::error("ERR Invalid command specified");
    }
    if !command.takes_keys(args) {
        return Reply::error("ERR The command has no key arguments");
    }
    if !command.arity_ok(args.len()) || subcommands::check(command.name, args).is_err() {
        return Reply::error("ERR Invalid number of arguments specified for command");
    }
    let keys = command.keys_with_flags(args);
    if keys.is_empty() && !command.flags.contains(&"no_mandatory_keys") {
        return Reply::error("ERR Invalid arguments specified for command");
    }
    let key = |at: usize| Reply::Bulk(args[at].clone());
    Reply::Array(
        keys.into_iter()
            .map(|found| match with_flags {
                true => Reply::Array(vec![key(found.at), key_flags(found.flags)]),
                false => key(found.at),
            })
            .collect(),
    )
}

/// Key specification flags as COMMAND INFO and GETKEYSANDFLAGS list them.
fn key_flags(flags: u16) -> Reply {
    Reply::Set(
        key_specs::flag::NAMES
            .iter()
            .filter(|(bit, _)| flags & bit != 0)
            .map(|(_, name)| Reply::Status((*name).into()))
            .collect(),
    )
}

/// A key specification as COMMAND INFO describes it.
fn describe_key_spec(spec: &KeySpec) -> Reply {
    let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let int = |n: i64| Reply::Int(n);
    let typed = |kind: &str, fields: Vec<(&str, Reply)>| {
        Reply::Map(vec![
            (text("type"), text(kind)),
            (
                text("spec"),
                Reply::Map(fields.into_iter().map(|(k, v)| (text(k), v)).collect()),
            ),
        ])
    };
    let begin = match spec.begin {
        BeginSearch::Index(index) => typed("index", vec![("index", int(index as i64))]),
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => typed(
            "keyword",
            vec![
                ("keyword", text(keyword)),
                ("startfrom", int(i64::from(start_from))),
            ],
        ),
        BeginSearch::Unknown => typed("unknown", Vec::new()),
    };
    let find = match spec.find {
        FindKeys::Range {
            last_key,
            step,
            limit,
        } => typed(
            "range",
            vec![
                ("lastkey", int(i64::from(last_key))),
                ("keystep", int(step as i64)),
                ("limit", int(limit as i64)),
            ],
        ),
        FindKeys::Keynum {
            count_at,
            first,
            step,
        } => typed(
            "keynum",
            vec![
                ("keynumidx", int(count_at as i64)),
                ("firstkey", int(first as i64)),
                ("keystep", int(step as i64)),
            ],
        ),
        FindKeys::Unknown => typed("unknown", Vec::new()),
    };
    Reply::Map(vec![
        (text("flags"), key_flags(spec.flags)),
        (text("begin_search"), begin),
        (text("find_keys"), find),
    ])
}

/// COMMAND INFO's entry for `name`: a command, or a container's subcommand
/// (`object|encoding`).
fn describe_named(name: &[u8]) -> Option<Reply> {
    Some(match lookup_named(name)? {
        (command, None) => describe_command(command),
        (container, Some(sub)) => describe_subcommand(container, sub),
    })
}

/// The command `name` names, or the container and subcommand of a full name
/// (`client|kill`), as COMMAND INFO and DOCS take them.
fn lookup_named(name: &[u8]) -> Option<(&'static Command, Option<&'static Subcommand>)> {
    let Some(split) = name.iter().position(|&b| b == b'|') else {
        return Some((crate::command::lookup(name)?, None));
    };
    let container = crate::command::lookup(&name[..split])?;
    let sub = subcommands::find(container.name, &name[split + 1..])?;
    Some((container, Some(sub)))
}

/// A command's entry; a container has no keys or specifications of its own, and flags only
/// where it also runs alone: its subcommands list theirs.
fn describe_command(command: &Command) -> Reply {
    match subcommands::of(command.name) {
        Some(subs) => describe(
            command.name,
            command.arity,
            subcommands::own_flags(command.name),
            (0, 0, 0),
            subs.iter()
                .map(|sub| describe_subcommand(command, sub))
                .collect(),
        ),
        None => describe(
            command.name,
            command.arity,
            command.flags,
            command.keys,
            Vec::new(),
        ),
    }
}

fn describe_subcommand(container: &Command, sub: &Subcommand) -> Reply {
    let name = format!("{}|{}", container.name, sub.name);
    let keys = key_specs::legacy_positions(key_specs::of(&name));
    describe(&name, sub.arity, sub.flags, keys, Vec::new())
}

/// COMMAND INFO's ten fields: name, arity, flags, first and last key and step, ACL
/// categories, tips, key specifications, subcommands.
fn describe(
    name: &str,
    arity: i32,
    flags: &[&str],
    (first, last, step): (i32, i32, i32),
    subcommands: Vec<Reply>,
) -> Reply {
    let status = |word: String| Reply::Status(word);
    Reply::Array(vec![
        Reply::Bulk(name.into()),
        Reply::Int(i64::from(arity)),
        Reply::Set(flags.iter().map(|f| status((*f).into())).collect()),
        Reply::Int(i64::from(first)),
        Reply::Int(i64::from(last)),
        Reply::Int(i64::from(step)),
        Reply::Set(
            categories::names(categories::of(name))
                .map(|category| status(format!("@{category}")))
                .collect(),
        ),
        Reply::Set(
            crate::command::tips(name)
                .iter()
                .map(|tip| Reply::Bulk(tip.as_bytes().to_vec()))
                .collect(),
        ),
        Reply::Set(key_specs::of(name).iter().map(describe_key_spec).collect()),
        Reply::Set(subcommands),
    ])
}

/// COMMAND DOCS's entry for a command: its summary, version, group and argument tree, and
/// a container's subcommands' entries (`command/docs.rs`).
fn document_command(command: &Command) -> (Reply, Reply) {
    let subcommands: Vec<(Reply, Reply)> = subcommands::of(command.name)
        .unwrap_or_default()
        .iter()
        .map(|sub| document_subcommand(command, sub.name))
        .collect();
    let mut fields = document(command.name, command.summary, command.group);
    if !subcommands.is_empty() {
        fields.push((text("subcommands"), Reply::Map(subcommands)));
    }
    (text(command.name), Reply::Map(fields))
}

/// COMMAND DOCS's entry for a subcommand (`client|kill`), in its container's group.
fn document_subcommand(container: &Command, sub: &str) -> (Reply, Reply) {
    let name = format!("{}|{sub}", container.name);
    let summary = docs::of(&name)
        .and_then(|doc| doc.summary)
        .unwrap_or_default();
    let entry = document(&name, summary, container.group);
    (text(&name), Reply::Map(entry))
}

/// The fields of one command's or subcommand's entry in COMMAND DOCS.
fn document(name: &str, summary: &str, group: &str) -> Vec<(Reply, Reply)> {
    let doc = docs::of(name);
    let mut fields = vec![
        (text("summary"), text(summary)),
        (text("since"), text(doc.map_or("1.0.0", |doc| doc.since))),
        (text("group"), text(group)),
    ];
    if let Some(doc) = doc.filter(|doc| !doc.arguments.is_empty()) {
        let arguments = doc.arguments.iter().map(document_argument).collect();
        fields.push((text("arguments"), Reply::Array(arguments)));
    }
    fields
}

/// One argument of a COMMAND DOCS tree, its fields in Redis's order.
fn document_argument(argument: &docs::Argument) -> Reply {
    let mut fields = vec![
        (text("name"), text(&argument.name)),
        (text("type"), text(argument.kind.name())),
    ];
    if let Some(index) = argument.key_spec_index {
        fields.push((text("key_spec_index"), Reply::Int(i64::from(index))));
    }
    if let Some(token) = argument.token {
        fields.push((text("token"), text(token)));
    }
    let flags = argument.flags();
    if !flags.is_empty() {
        let flags = flags.into_iter().map(|f| Reply::Status(f.into())).collect();
        fields.push((text("flags"), Reply::Set(flags)));
    }
    if !argument.arguments.is_empty() {
        let parts = argument.arguments.iter().map(document_argument).collect();
        fields.push((text("arguments"), Reply::Array(parts)));
    }
    Reply::Map(fields)
}

fn text(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

/// The settings CONFIG GET answers: the ones clients ask about, answered truthfully.
fn settings(shared: &Shared) -> Vec<(&'static str, String)> {
    let config = &shared.config;
    let durable = config.durable_replies;
    vec![
        ("save", String::new()),
        // Every write is logged before its reply: the closest Redis setting is an
        // append-only file synced always (or, in async mode, never).
        ("appendonly", if durable { "yes" } else { "no" }.into()),
        ("appendfsync", if durable { "always" } else { "no" }.into()),
        ("tailstore-durability", config.durability.clone()),
        ("requirepass", shared.password.setting()),
        ("acllog-max-len", super::auth::LOG_MAX_ENTRIES.to_string()),
        // A new ACL user may use no channel until given one (Redis 7.0's default).
        ("acl-pubsub-default", "resetchannels".into()),
        (
            "aclfile",
            config
                .aclfile
                .as_ref()
                .map(|path| path.display().to_string())
                .unwrap_or_default(),
        ),
        ("databases", shared.ks.databases().to_string()),
        ("maxclients", config.max_clients.to_string()),
        (
            "client-query-buffer-limit",
            shared.query_limit.load(Ordering::Relaxed).to_string(),
        ),
        ("proto-max-bulk-len", config.max_bulk.to_string()),
        // How long a script runs before the server stops it (`serve --script-time-limit`),
        // under Redis 7's name and its older alias, in milliseconds as Redis gives them.
        (
            "busy-reply-threshold",
            config.script_time_limit.as_millis().to_string(),
        ),
        (
            "lua-time-limit",
            config.script_time_limit.as_millis().to_string(),
        ),
        // As Redis's: 0 for what is not listened to.
        ("port", port(config.plain_address())),
        ("tls-port", port(config.tls_address())),
        (
            "unixsocket",
            config
                .unix_socket
                .as_ref()
                .map(|u| u.path.display().to_string())
                .unwrap_or_default(),
        ),
        (
            "unixsocketperm",
            format!(
                "{:o}",
                config
                    .unix_socket
                    .as_ref()
                    .and_then(|u| u.permissions)
                    .unwrap_or(0)
            ),
        ),
        ("bind", config.listen.ip().to_string()),
        ("maxmemory", "0".into()),
        ("maxmemory-policy", "noeviction".into()),
        ("timeout", "0".into()),
        (
            "tcp-keepalive",
            super::socket::KEEPALIVE.as_secs().to_string(),
        ),
        ("io-threads", config.threads.to_string()),
        ("latency-tracking", "yes".into()),
        (
            "tracking-table-max-keys",
            tracking::MAX_TRACKED_KEYS.to_string(),
        ),
        (
            "latency-tracking-info-percentiles",
            command_stats::info_percentiles_setting(),
        ),
        (
            "notify-keyspace-events",
            notifications::format(shared.ks.notifications.get()),
        ),
    ]
    .into_iter()
    .chain(shared.slowlog.settings())
    .collect()
}

/// A listening address's port as Redis's settings give it: 0 for none.
pub fn port(address: Option<std::net::SocketAddr>) -> String {
    address.map_or(0, |a| a.port()).to_string()
}

fn config(shared: &Shared, args: &[Vec<u8>]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "get" if args.len() >= 3 => {
            let all = settings(shared);
            let mut found = Vec::new();
            for (name, value) in &all {
                if args[2..]
                    .iter()
                    .any(|p| matches(&p.to_ascii_lowercase(), name.as_bytes()))
                {
                    found.push((
                        Reply::Bulk(name.as_bytes().to_vec()),
                        Reply::Bulk(value.clone().into_bytes()),
                    ));
                }
            }
            Reply::Map(found)
        }
        "set" if args.len().is_multiple_of(2) => config_set(shared, &args[2..]),
        "set" => Reply::error(SYNTAX),
        "resetstat" => {
            for stats in shared.command_stats() {
                stats.reset();
            }
            shared.ks.key_stats.reset();
            Reply::ok()
        }
        "rewrite" => Reply::error("ERR The server is running without a config file"),
        _ => help(CONFIG_HELP),
    }
}

/// CONFIG SET of (name, value) pairs. The slow log's two settings, `requirepass`,
/// `notify-keyspace-events` and `client-query-buffer-limit` change at run time; the others are command-line options, so a
/// pair that would change one is refused and nothing is set; pairs whose values are
/// already in effect (a client making sure of `appendfsync always` before it relies on it,
/// say) are accepted and change nothing, as Redis accepts setting a value it already has.
fn config_set(shared: &Shared, pairs: &[Vec<u8>]) -> Reply {
    let current = settings(shared);
    let mut changes = Vec::new();
    let mut password = None;
    let mut notify = None;
    let mut query_limit = None;
    for pair in pairs.chunks_exact(2) {
        let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
        if name == "client-query-buffer-limit" {
            match query_limit_value(&pair[1]) {
                Ok(limit) => query_limit = Some(limit),
                Err(refused) => return config_set_refused(&name, refused),
            }
            continue;
        }
        if name == "requirepass" {
            password = Some(pair[1].clone());
            continue;
        }
        if name == "notify-keyspace-events" {
            match notifications::parse(&pair[1]) {
                Ok(flags) => notify = Some(flags),
                Err(refused) => return config_set_refused(&name, &refused.to_string()),
            }
            continue;
        }
        match shared.slowlog.check_setting(&name, &pair[1]) {
            Some(Ok(change)) => {
                changes.push(change);
                continue;
            }
            Some(Err(refused)) => return refused,
            None => {}
        }
        let in_effect = current.iter().any(|(known, value)| {
            *known == name && value.as_bytes().eq_ignore_ascii_case(&pair[1])
        });
        if !in_effect {
            return Reply::error(format!(
                "ERR CONFIG SET '{name}': tailstore's settings are its command-line options \
                 (durability is its --commit mode); only a value already in effect is accepted"
            ));
        }
    }
    // All or nothing, as Redis: applied once every pair passed.
    for change in changes {
        shared.slowlog.apply(change);
    }
    if let Some(password) = password {
        shared.password.change(password);
    }
    if let Some(flags) = notify {
        shared.ks.notifications.set(flags);
    }
    if let Some(limit) = query_limit {
        shared.query_limit.store(limit, Ordering::Relaxed);
    }
    Reply::ok()
}

/// Redis's refusal of a CONFIG SET pair whose value `name` does not take.
fn config_set_refused(name: &str, why: &str) -> Reply {
    Reply::error(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
    ))
}

/// The smallest `client-query-buffer-limit` Redis takes, 1 MiB.
const MIN_QUERY_LIMIT: u64 = 1 << 20;

/// A `client-query-buffer-limit` value: a memory value (bytes, or a number with Redis's
/// units, `k`/`kb` … `g`/`gb`) from 1 MiB to `i64::MAX`, refused with Redis's words.
fn query_limit_value(text: &[u8]) -> Result<usize, &'static str> {
    let bytes = memory_value(text).ok_or("argument must be a memory value")?;
    if !(MIN_QUERY_LIMIT..=i64::MAX as u64).contains(&bytes) {
        return Err("argument must be between 1048576 and 9223372036854775807 inclusive");
    }
    Ok(usize::try_from(bytes).unwrap_or(usize::MAX))
}

/// A memory value as Redis reads one: digits, then no unit (bytes) or one of `b`, `k`
/// (1,000), `kb` (1,024), `m`, `mb`, `g`, `gb`, in any case; `None` for anything else. A
/// value past `u64` is `u64::MAX`, out of every range, as Redis finds such digits.
fn memory_value(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?.to_ascii_lowercase();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let unit: u64 = match unit {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    if digits.is_empty() {
        return None;
    }
    // Digits alone fail to parse only past `u64`.
    Some(
        digits
            .parse::<u64>()
            .unwrap_or(u64::MAX)
            .saturating_mul(unit),
    )
}

fn save(shared: &Shared, name: &str, in_exec: bool) -> Reply {
    let kind = match name {
        "bgrewriteaof" => SaveKind::Rewrite,
        _ => SaveKind::Snapshot,
    };
    match shared.saves.run(kind, || shared.ks.database().checkpoint()) {
        Ok(()) => {
            // Redis schedules a background save asked for in EXEC, and says so.
            let when = if in_exec { "scheduled" } else { "started" };
            // BGREWRITEAOF too: a checkpoint bounds the log a restart replays, which is
            // what an AOF rewrite is for.
            match name {
                "bgsave" => Reply::Status(format!("Background saving {when}")),
                "bgrewriteaof" => {
                    Reply::Status(format!("Background append only file rewriting {when}"))
                }
                _ => Reply::ok(),
            }
        }
        Err(err) => Reply::error(format!("ERR checkpoint failed: {err}")),
    }
}

/// SWAPDB index1 index2: exchanges two databases' contents for every client at once
/// (`keyspace/databases.rs`), answered once durable. FLUSHDB / FLUSHALL: empties the
/// connection's database / every database at once (`keyspace/flushes.rs`), answered once
/// durable; SYNC and ASYNC alike, the keys are freed in the background.
fn change_map<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    change: MapChange,
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    let committed = match change {
        MapChange::Flush(db) => shared.ks.flush(db),
        MapChange::Swap(a, b) => shared.ks.swap_databases(a, b),
    };
    match committed {
        Ok(commit) => pending.push(commit),
        Err(fault) => return crate::command::fault_reply(fault),
    }
    map_changed(shared, conn, change);
    Reply::ok()
}

/// The change of the map SWAPDB, FLUSHDB or FLUSHALL (run in database `db`) asks for, or
/// the refusal of its arguments; `None` for any other command.
pub fn map_change(
    shared: &Shared,
    db: u32,
    command: &Command,
    args: &[Vec<u8>],
) -> Option<Result<MapChange, Reply>> {
    let flushed = match command.name {
        "swapdb" => return Some(swap_indexes(shared, args).map(|(a, b)| MapChange::Swap(a, b))),
        "flushdb" => Some(db),
        "flushall" => None,
        _ => return None,
    };
    let option = |a: &Vec<u8>| is(a, "ASYNC") || is(a, "SYNC");
    if args.len() > 2 || !args[1..].iter().all(option) {
        return Some(Err(Reply::error(SYNTAX)));
    }
    Some(Ok(MapChange::Flush(flushed)))
}

fn swap_indexes(shared: &Shared, args: &[Vec<u8>]) -> Result<(u32, u32), Reply> {
    let index = |arg: &[u8], refusal: &str| parse_int(arg).map_err(|_| Reply::error(refusal));
    let a = index(&args[1], "ERR invalid first DB index")?;
    let b = index(&args[2], "ERR invalid second DB index")?;
    let databases = i64::from(shared.ks.databases());
    if !(0..databases).contains(&a) || !(0..databases).contains(&b) {
        return Err(Reply::error("ERR DB index is out of range"));
    }
    Ok((a as u32, b as u32))
}

/// What others are told once a change of the map is committed: clients blocked on keys of
/// swapped or flushed databases run their commands again (an XREADGROUP whose stream is
/// gone is answered so, as Redis answers it), and every tracking client is told to drop
/// what it cached (keys are tracked by name, whatever their database).
pub fn map_changed(shared: &Shared, conn: &mut Connection, change: MapChange) {
    let changed: Vec<u32> = match change {
        MapChange::Swap(a, b) => vec![a, b],
        MapChange::Flush(Some(db)) => vec![db],
        MapChange::Flush(None) => (0..shared.ks.databases()).collect(),
    };
    for db in changed {
        let keys = shared.waiters.waited_keys(db);
        shared.signal(db, keys.iter().map(Vec::as_slice));
    }
    let outbox = &mut conn.published;
    shared.tracking.flushed(&shared.client_list, outbox);
}

fn info(shared: &Shared, args: &[Vec<u8>]) -> Reply {
    let wanted: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    Reply::Verbatim {
        format: *b"txt",
        text: super::info::report(shared, &wanted).into_bytes(),
    }
}

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CACHING (YES|NO)",
    "    With tracking in OPTIN or OPTOUT mode: track (or not) the keys the next command reads.",
    "GETNAME",
    "    This connection's name, or nil.",
    "GETREDIR",
    "    The id of the client that receives this one's invalidations; 0 if none, -1 without tracking.",
    "ID",
    "    This connection's id.",
    "INFO",
    "    This connection's line of CLIENT LIST.",
    "KILL <ip:port>",
    "    Closes the client at that address.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Closes the clients picked by ID <id>, ADDR <ip:port>, LADDR <ip:port>,",
    "    TYPE (NORMAL|MASTER|REPLICA|PUBSUB), USER <name> and SKIPME (YES|NO) (YES by default).",
    "LIST [TYPE (NORMAL|MASTER|REPLICA|PUBSUB)] [ID <id> [<id> ...]]",
    "    One line per connected client, or per client picked by type or by id.",
    "NO-EVICT (ON|OFF)",
    "    Accepted: tailstore evicts no keys.",
    "NO-TOUCH (ON|OFF)",
    "    Accepted: tailstore keeps no access times that reads would change.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Holds back the clients' commands (or their writes) for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Turns this connection's replies off, on, or off for the next command.",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "    Records the client library's name or version for CLIENT LIST.",
    "SETNAME <name>",
    "    Names this connection.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]] [OPTIN] [OPTOUT] [NOLOOP]",
    "    Turns invalidation messages for the keys this connection reads on or off.",
    "TRACKINGINFO",
    "    This connection's tracking flags, redirect and prefixes.",
    "UNBLOCK <id> [TIMEOUT|ERROR]",
    "    Ends the blocking command the client waits in, as if it timed out (or with an error).",
    "UNPAUSE",
    "    Ends CLIENT PAUSE.",
    "HELP",
    "    Prints this help.",
];

const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern> [<pattern> ...]",
    "    The settings whose names match a glob-style pattern, with their values.",
    "SET <setting> <value> [<setting> <value> ...]",
    "    Changes requirepass and the slow log's settings; the others are command-line",
    "    options of tailstore serve, so only their value in effect is accepted.",
    "RESETSTAT",
    "    Resets the per-command statistics of INFO commandstats and latencystats.",
    "REWRITE",
    "    Refused: tailstore has no configuration file.",
    "HELP",
    "    Prints this help.",
];

const PUBSUB_HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    The channels with subscribers, those matching a glob-style pattern if one is given.",
    "NUMPAT",
    "    The number of pattern subscriptions.",
    "NUMSUB [<channel> ...]",
    "    Each channel with its number of subscribers.",
    "SHARDCHANNELS [<pattern>]",
    "    The shard channels with subscribers, those matching a pattern if one is given.",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Each shard channel with its number of subscribers.",
    "HELP",
    "    Prints this help.",
];

const COMMAND_HELP: &[&str] = &[
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Every command's name, arity, flags and key positions.",
    "COUNT",
    "    The number of commands.",
    "LIST [FILTERBY (MODULE <name>|ACLCAT <category>|PATTERN <pattern>)]",
    "    Every command's name, with the subcommands of container commands (CLIENT|KILL).",
    "INFO [<command-name> ...]",
    "    The details COMMAND gives, for the commands named (for all if none is).",
    "DOCS [<command-name> ...]",
    "    Each command's summary and group, for the commands named (for all if none is).",
    "GETKEYS <full-command>",
    "    The keys the command would name.",
    "GETKEYSANDFLAGS <full-command>",
    "    The keys the command would name, each with what the command does to it.",
    "HELP",
    "    Prints this help.",
];
