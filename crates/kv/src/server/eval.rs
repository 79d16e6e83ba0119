//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT: their arguments and replies, and what the
//! server lends a running script (`crate::script` runs it).

use std::sync::Arc;
use std::time::Instant;

use tailstore_engine::PendingCommit;
use tailstore_resp::{Protocol, Reply};

use super::acl::{self, User};
use super::admin::{self, connectionless, database_index};
use super::connection::Connection;
use super::pubsub::{Message, Subscriber};
use super::Shared;
use crate::command::{
    is, parse_int, BlockBody, Command, Ctx, Fault, MapChange, Outcome, NOT_INTEGER,
};
use crate::keyspace::notifications::KeyEvent;
use crate::script::library::{
    script_header, BlockLibraries, Flags, LibrarySet, LibrarySource, Running, RunningFunction,
};
use crate::script::{sha1_hex, Host, Invocation, ScriptCache, Target, Vm};
use crate::Executed;

/// EVAL script numkeys key… arg… (and its three siblings): the script's reply, its commit
/// added to `pending`.
pub fn eval<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    vm: &Vm,
    command: &Command,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    let found = Found {
        scripts: &mut &shared.scripts,
        block_libraries: None,
    };
    let mut script = match Prepared::new(shared, conn, vm, command, args, found) {
        Ok(script) => script,
        Err(reply) => return reply,
    };
    let Executed {
        reply,
        pending: commit,
        committed,
        .. // the host took each call's events as it went
    } = shared.ks.run_for_client(conn.db, |ctx| script.run(ctx));
    pending.extend(commit);
    script.finish(conn, committed);
    reply
}

/// Whether `command` runs a script or a function.
pub fn is_eval(command: &Command) -> bool {
    matches!(
        command.name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// Whether the script or function EVAL, EVALSHA or FCALL (`args`) names declares
/// `no-writes` (its `#!lua flags=…` line, or its `flags` at registration): a WRITE pause
/// lets it through, as Redis does.
pub fn declares_no_writes(shared: &Shared, args: &[Vec<u8>]) -> bool {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let flags = match (name.as_str(), args.get(1)) {
        ("eval", Some(body)) => script_header(body).ok().flatten().map(|(f, _)| f),
        ("evalsha", Some(sha)) => shared
            .scripts
            .get(sha)
            .and_then(|body| script_header(&body).ok().flatten().map(|(f, _)| f)),
        ("fcall", Some(function)) => shared
            .libraries
            .function(function)
            .map(|(library, at)| library.functions[at].flags),
        _ => None,
    };
    flags.is_some_and(Flags::no_writes)
}

/// What an invocation runs.
enum Code {
    Script {
        sha: String,
        body: Arc<[u8]>,
    },
    /// A function, of the installed libraries or of the set an EXEC block's FUNCTION
    /// changes before it left.
    Function {
        name: String,
        block_set: Option<Arc<LibrarySet>>,
    },
}

/// Where EVALSHA finds its script and FCALL its function: the server's script cache and
/// installed libraries, or an EXEC block's views of them.
pub struct Found<'c, 'v> {
    pub scripts: &'c mut dyn ScriptCache,
    pub block_libraries: Option<&'c BlockLibraries<'v>>,
}

/// An EVAL whose script is found and compiled and whose arguments are checked, to run in a
/// transaction: its own, or EXEC's when it was queued in MULTI.
pub struct Prepared<'a> {
    vm: &'a Vm,
    code: Code,
    /// The whole command (FUNCTION STATS shows a running function's).
    command_line: &'a [Vec<u8>],
    keys: &'a [Vec<u8>],
    argv: &'a [Vec<u8>],
    read_only: bool,
    protocol: Protocol,
    db: u32,
    host: ScriptHost<'a>,
}

impl<'a> Prepared<'a> {
    /// The script EVAL (EVALSHA…) `args` names, found in (and loaded into) `found.scripts`,
    /// or the function FCALL names, found as `found` says; or the error reply that refuses it.
    pub fn new(
        shared: &'a Shared,
        conn: &Connection,
        vm: &'a Vm,
        command: &Command,
        args: &'a [Vec<u8>],
        found: Found<'_, '_>,
    ) -> Result<Prepared<'a>, Reply> {
        let (code, flags, bad_numkeys) = if command.name.starts_with("fcall") {
            let function = match found.block_libraries {
                Some(view) => view.function(&args[1]),
                None => shared.libraries.function(&args[1]),
            };
            let Some((library, at)) = function else {
                return Err(Reply::error("ERR Function not found"));
            };
            let function = &library.functions[at];
            let code = Code::Function {
                name: function.name.clone(),
                block_set: found.block_libraries.and_then(BlockLibraries::changed),
            };
            (
                code,
                Some(function.flags),
                "ERR Bad number of keys provided",
            )
        } else {
            let (sha, body) = script_named(found.scripts, vm, command, &args[1])?;
            // Compiled: its `#!lua` line, if any, is valid.
            let flags = script_header(&body).ok().flatten().map(|(flags, _)| flags);
            (Code::Script { sha, body }, flags, NOT_INTEGER)
        };
        let ro_command = command.name.ends_with("_ro");
        if ro_command && flags.is_some_and(|flags| !flags.no_writes()) {
            return Err(Reply::error(
                "ERR Can not execute a script with write flag using *_ro command.",
            ));
        }
        let (keys, argv) = split_keys(&args[2..], bad_numkeys)?;
        Ok(Prepared {
            vm,
            code,
            command_line: args,
            keys,
            argv,
            read_only: ro_command || flags.is_some_and(Flags::no_writes),
            protocol: conn.protocol,
            db: conn.db,
            host: ScriptHost {
                shared,
                published: Vec::new(),
                written: Vec::new(),
                changed_maps: Vec::new(),
                listed: None,
                user: conn.user.clone().map(|user| (user, conn.listing().line())),
            },
        })
    }

    /// The script as queued in MULTI after an AUTH that logged `conn` in as `user`
    /// (`None`: `default`).
    pub fn run_as(mut self, user: &Option<Arc<User>>, conn: &Connection) -> Self {
        self.host.user = user.clone().map(|user| (user, conn.listing().line()));
        self
    }

    /// The script as queued in MULTI after a SELECT of `db`.
    pub fn in_database(&mut self, db: u32) -> &mut Self {
        self.db = db;
        self
    }

    /// One run in `ctx`'s transaction (again after a conflict).
    pub fn run(&mut self, ctx: &mut Ctx<'_, '_>) -> Result<Reply, Fault> {
        ctx.db = self.db;
        let target = match &self.code {
            Code::Script { sha, body } => Target::Script { sha, body },
            Code::Function { name, block_set } => Target::Function {
                name,
                libraries: match block_set {
                    Some(set) => LibrarySource::Block(set),
                    None => LibrarySource::Installed(&self.host.shared.libraries),
                },
            },
        };
        let invocation = Invocation {
            target,
            command: self.command_line,
            keys: self.keys,
            argv: self.argv,
            read_only: self.read_only,
            protocol: self.protocol,
        };
        self.vm
            .run(&self.host.shared.scripts, ctx, &invocation, &mut self.host)
    }

    /// The messages of its run so far (its calls' monitor lines and key events, its
    /// PUBLISHes), taken for an EXEC block to send in the script's place among its steps.
    pub fn take_messages(&mut self) -> Vec<(Subscriber, Message)> {
        std::mem::take(&mut self.host.published)
    }

    /// After its transaction: if it `committed`, the script's messages wait for the pass's
    /// durability wait with the replies, and the clients blocked on the keys it wrote are
    /// woken.
    pub fn finish(mut self, conn: &mut Connection, committed: bool) {
        if !committed {
            return;
        }
        conn.published.append(&mut self.host.published);
        let shared = self.host.shared;
        for (db, keys) in &self.host.written {
            shared.signal(*db, keys.iter().map(Vec::as_slice));
            let keys = keys.iter().map(Vec::as_slice);
            let outbox = &mut conn.published;
            shared
                .tracking
                .invalidate(&shared.client_list, conn.id, keys, outbox);
        }
        for change in std::mem::take(&mut self.host.changed_maps) {
            admin::map_changed(shared, conn, change);
        }
    }
}

impl BlockBody for Prepared<'_> {
    fn run(&mut self, ctx: &mut Ctx<'_, '_>) -> Outcome {
        Prepared::run(self, ctx)
    }
}

/// A script's keys and its other arguments.
type KeysAndArgs<'a> = (&'a [Vec<u8>], &'a [Vec<u8>]);

/// The script EVAL (EVALSHA…) names by its `body_or_sha`: its SHA1 and its body, compiled
/// on this loop.
fn script_named(
    cache: &mut dyn ScriptCache,
    vm: &Vm,
    command: &Command,
    body_or_sha: &[u8],
) -> Result<(String, Arc<[u8]>), Reply> {
    if command.name.starts_with("evalsha") {
        let body = cache
            .get(body_or_sha)
            .ok_or_else(|| Reply::error("NOSCRIPT No matching script. Please use EVAL."))?;
        let sha = String::from_utf8_lossy(body_or_sha).to_ascii_lowercase();
        return Ok((sha, body));
    }
    // EVAL loads its script too, as Redis does (EVALSHA then finds it).
    let sha = sha1_hex(body_or_sha);
    let anew = vm.compile(cache.scripts(), &sha, body_or_sha)?;
    cache.remember(&sha, body_or_sha, anew);
    Ok((sha, body_or_sha.into()))
}

/// `numkeys key… arg…`: the keys and the other arguments; `bad_numkeys` is the error for
/// a count that is not a number (EVAL's and FCALL's differ).
fn split_keys<'a>(args: &'a [Vec<u8>], bad_numkeys: &str) -> Result<KeysAndArgs<'a>, Reply> {
    let numkeys = parse_int(&args[0]).map_err(|_| Reply::error(bad_numkeys))?;
    if numkeys < 0 {
        return Err(Reply::error("ERR Number of keys can't be negative"));
    }
    let rest = &args[1..];
    if numkeys as u64 > rest.len() as u64 {
        return Err(Reply::error(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    Ok(rest.split_at(numkeys as usize))
}

/// SCRIPT LOAD | EXISTS | FLUSH | KILL, on `cache` (the server's, or an EXEC block's view).
pub fn script(cache: &mut dyn ScriptCache, vm: &Vm, args: &[Vec<u8>]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("load", 3) => {
            let sha = sha1_hex(&args[2]);
            match vm.compile(cache.scripts(), &sha, &args[2]) {
                Ok(_) => {
                    // Stored whether or not this loop compiled it before, as Redis stores it.
                    cache.remember(&sha, &args[2], true);
                    Reply::Bulk(sha.into_bytes())
                }
                Err(reply) => reply,
            }
        }
        ("exists", 3..) => Reply::Array(
            args[2..]
                .iter()
                .map(|sha| Reply::Int(i64::from(cache.contains(sha))))
                .collect(),
        ),
        ("flush", _) => {
            if args.len() > 3 || args.len() == 3 && !is(&args[2], "sync") && !is(&args[2], "async")
            {
                return Reply::error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            cache.flush();
            Reply::ok()
        }
        // Scripts run without the debugger, as SCRIPT DEBUG NO asks; it is not implemented.
        ("debug", 3) if is(&args[2], "no") => Reply::ok(),
        ("debug", 3) if is(&args[2], "yes") || is(&args[2], "sync") => Reply::error(
            "ERR tailstore does not implement the Lua debugger (SCRIPT DEBUG YES and SYNC)",
        ),
        ("debug", 3) => Reply::error("ERR Use SCRIPT DEBUG YES/SYNC/NO"),
        ("kill", 2) if cache.kill() => Reply::ok(),
        ("kill", 2) => Reply::error(NOT_BUSY),
        ("help", 2) => crate::command::help(SCRIPT_HELP),
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try SCRIPT HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

/// SCRIPT KILL's and FUNCTION KILL's answer when no script runs.
pub(super) const NOT_BUSY: &str = "NOTBUSY No scripts in execution right now.";

const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    NO only: tailstore does not implement the Lua debugger.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache.",
    "KILL",
    "    Stop the scripts running now; tailstore undoes their writes.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
];

/// What a script may do besides data commands, and what it leaves for after its commit.
struct ScriptHost<'s> {
    shared: &'s Shared,
    /// Messages the script PUBLISHed, sent after the pass's durability wait.
    published: Vec<(Subscriber, Message)>,
    /// The keys its writes changed, by database, signalled to blocked clients.
    written: Vec<(u32, Vec<Vec<u8>>)>,
    /// Its SWAPDBs and flushes, told to blocked and tracking clients.
    changed_maps: Vec<MapChange>,
    /// A function while it runs: listed for FUNCTION STATS.
    listed: Option<Running<'s>>,
    /// The ACL user the client logged in as (`None`: `default`, who may run everything),
    /// with the client's CLIENT LIST line for ACL LOG.
    user: Option<(Arc<User>, String)>,
}

impl Host for ScriptHost<'_> {
    fn map_change(
        &mut self,
        command: &Command,
        args: &[Vec<u8>],
        db: u32,
    ) -> Option<Result<MapChange, Reply>> {
        admin::map_change(self.shared, db, command, args)
    }

    fn changed_map(&mut self, change: MapChange) {
        self.changed_maps.push(change);
    }

    fn denied(&mut self, command: &Command, args: &[Vec<u8>]) -> Option<Reply> {
        let (user, client) = self.user.as_ref()?;
        let denial = user.check(command, args).err()?;
        let (password, context) = (&self.shared.password, acl::Context::Script);
        acl::log_denial(password, user, &denial, context, client.clone());
        Some(acl::script_refusal(&denial))
    }

    fn started(&mut self, function: Option<(&str, &[Vec<u8>])>) {
        if let Some((name, command)) = function {
            self.listed = Some(self.shared.libraries.started(RunningFunction {
                name: name.to_string(),
                command: command.to_vec(),
                started: Instant::now(),
            }));
        }
    }

    fn finished(&mut self) {
        self.listed = None;
    }

    fn begin(&mut self) {
        self.published.clear();
        self.written.clear();
        self.changed_maps.clear();
    }

    fn server_command(
        &mut self,
        command: &Command,
        args: &[Vec<u8>],
        db: &mut u32,
    ) -> Option<Reply> {
        if command.name == "select" {
            // The script's own database: the client's stays as it was.
            return Some(match database_index(self.shared, &args[1]) {
                Ok(index) => {
                    *db = index;
                    Reply::ok()
                }
                Err(reply) => reply,
            });
        }
        connectionless(self.shared, command, args, &mut self.published)
    }

    fn notified(&mut self, events: Vec<KeyEvent>) {
        self.shared.publish_key_events(events, &mut self.published);
    }

    fn called(&mut self, db: u32, command: &Command, args: &[Vec<u8>]) {
        let monitors = &self.shared.monitors;
        monitors.feed(command, db, "lua", args, &mut self.published);
    }

    fn wrote(&mut self, db: u32, command: &Command, args: &[Vec<u8>]) {
        self.written.push((
            db,
            command
                .named_keys(args)
                .into_iter()
                .map(<[u8]>::to_vec)
                .collect(),
        ));
        if let Some((elsewhere, key)) = command.key_elsewhere(args) {
            self.written.push((elsewhere, vec![key.to_vec()]));
        }
    }
}
