//! FUNCTION LOAD, DELETE, FLUSH, LIST, DUMP, RESTORE, STATS, KILL and HELP: the server's
//! function libraries (`script::library`), stored durably (`keyspace::libraries`); FCALL
//! runs their functions as EVAL runs a script (`server/eval.rs`).
//!
//! A change to the libraries is a transaction of its own, whose reply waits for its
//! durability as any write's: the set it leaves is computed and checked first (Redis's
//! errors for a library or function that exists), under [`Libraries::begin_change`] so
//! that no other change passes its checks against the same set; the rows are written;
//! and the set is installed only once the transaction committed. A function call that
//! finds the new set reads after the change's record was appended, so its own reply
//! waits for that record too (see "Durability before the reply" in docs/design/kv.md).
//! Inside MULTI a change is checked as EXEC prepares the block, against the block's view
//! of the libraries, and stored in the block's transaction ([`in_block`], decision 178).

use std::sync::Arc;

use tailstore_engine::PendingCommit;
use tailstore_resp::Reply;

use super::eval::NOT_BUSY;
use super::Shared;
use crate::command::{is, matches, BlockBody, Ctx, Fault, Outcome};
use crate::keyspace::MAX_LIBRARY_NAME;
use crate::script::library::{
    library_header, merged, without, BlockLibraries, FunctionSpec, Library, LibrarySet, Policy,
};
use crate::script::{Scripts, Vm};
use crate::Executed;

/// FUNCTION and its subcommand (known, of the right arity: `subcommand_check`).
pub fn function<'s>(
    shared: &'s Shared,
    vm: &Vm,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    let sub = subcommand(args);
    let outcome = match sub.as_str() {
        "load" | "delete" | "flush" | "restore" => {
            let _change = shared.libraries.begin_change();
            let (installed, _) = shared.libraries.all();
            planned(shared, vm, &sub, &args[2..], &installed)
                .map(|planned| change(shared, &installed, planned, pending))
        }
        "list" => list(&shared.libraries.all().0, &args[2..])
            .map(|reply| after_the_changes_read(shared, reply, pending)),
        "dump" => {
            let reply = dump(&shared.libraries.all().0);
            Ok(after_the_changes_read(shared, reply, pending))
        }
        "stats" => {
            let reply = stats(shared, shared.libraries.counts());
            Ok(after_the_changes_read(shared, reply, pending))
        }
        "kill" => kill(shared),
        _ => Ok(help()),
    };
    outcome.unwrap_or_else(Reply::Error)
}

/// FUNCTION's subcommand, in lowercase.
fn subcommand(args: &[Vec<u8>]) -> String {
    String::from_utf8_lossy(&args[1]).to_ascii_lowercase()
}

/// A FUNCTION command queued in MULTI, as EXEC's walk before the block makes it (in the
/// block's order, so that the FCALLs after a change call what it left, as in Redis): a
/// change checked against the block's view of the libraries and recorded there, whose rows
/// the block's transaction writes ([`BlockChange`]); or, as `Err`, the reply of one that
/// fails, or that reads the libraries (LIST and DUMP: the set at its place in the block,
/// made durable by the block's own commit, which follows the record of any change it
/// shows), or STATS, KILL or HELP.
pub(super) fn in_block(
    shared: &Shared,
    vm: &Vm,
    args: &[Vec<u8>],
    view: &mut BlockLibraries<'_>,
) -> Result<BlockChange, Reply> {
    let sub = subcommand(args);
    let answer = match sub.as_str() {
        "load" | "delete" | "flush" | "restore" => {
            let before = view.begin_change();
            let Planned { set, reply } =
                planned(shared, vm, &sub, &args[2..], &before).map_err(Reply::Error)?;
            view.changed_to(set.clone());
            return Ok(BlockChange {
                before,
                after: set,
                reply,
            });
        }
        "list" => list(&view.current(), &args[2..]),
        "dump" => Ok(dump(&view.current())),
        "stats" => Ok(stats(shared, view.counts())),
        // As SCRIPT KILL in a block (see `BlockScripts`): no script runs where it stands.
        "kill" => Err(NOT_BUSY.into()),
        _ => Ok(help()),
    };
    Err(answer.unwrap_or_else(Reply::Error))
}

/// A FUNCTION change queued in MULTI: the set before it and the set it leaves, whose
/// difference it stores in the block's transaction, and its reply.
pub(super) struct BlockChange {
    before: LibrarySet,
    after: LibrarySet,
    reply: Reply,
}

impl BlockBody for BlockChange {
    fn run(&mut self, ctx: &mut Ctx<'_, '_>) -> Outcome {
        store_difference(ctx, &self.before, &self.after)?;
        Ok(self.reply.clone())
    }
}

/// FUNCTION KILL.
fn kill(shared: &Shared) -> Result<Reply, String> {
    if shared.scripts.kill() {
        Ok(Reply::ok())
    } else {
        Err(NOT_BUSY.into())
    }
}

/// `reply`, which reports the libraries as they are now, once what it reports is durable: a
/// change is installed after its record is appended but before that record is durable, so
/// the reply waits, as a read's does, for a commit after it (an empty transaction's: its
/// place in the log is past every record appended before it).
fn after_the_changes_read<'s>(
    shared: &'s Shared,
    reply: Reply,
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    let executed = shared
        .ks
        .run_for_client(0, |_| Ok::<Reply, Fault>(Reply::Null));
    pending.extend(executed.pending);
    match executed.reply {
        failed @ Reply::Error(_) => failed,
        _ => reply,
    }
}

/// What a change of the libraries leaves, checked against the set it starts from: the new
/// set, and the reply to send once it is stored.
struct Planned {
    set: LibrarySet,
    reply: Reply,
}

/// The change FUNCTION `sub` (LOAD, DELETE, FLUSH or RESTORE) with `args` makes to `base`,
/// or Redis's error text.
fn planned(
    shared: &Shared,
    vm: &Vm,
    sub: &str,
    args: &[Vec<u8>],
    base: &LibrarySet,
) -> Result<Planned, String> {
    match sub {
        "load" => load(shared, vm, args, base),
        "delete" => delete(&args[0], base),
        "flush" => flush(args),
        _ => restore(shared, vm, args, base),
    }
}

/// FUNCTION LOAD [REPLACE] code: the library's name.
fn load(shared: &Shared, vm: &Vm, args: &[Vec<u8>], base: &LibrarySet) -> Result<Planned, String> {
    let (code, options) = args.split_last().ok_or("ERR syntax error")?;
    let mut policy = Policy::Append;
    for option in options {
        if !is(option, "replace") {
            return Err(format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(option)
            ));
        }
        policy = Policy::Replace;
    }
    let library = compiled(&shared.scripts, vm, code, |name| {
        if policy == Policy::Append && base.contains_key(name) {
            return Err(format!("Library '{name}' already exists"));
        }
        Ok(())
    })
    .map_err(|text| format!("ERR {text}"))?;
    let name = library.name.clone();
    let set = merged(base, vec![library], policy).map_err(|text| format!("ERR {text}"))?;
    Ok(Planned {
        set,
        reply: Reply::Bulk(name.into_bytes()),
    })
}

/// A library of `code`, its `#!lua` line read and its code run on this loop's Lua state
/// to learn its functions; `check_name` may refuse it by name before its code runs.
fn compiled(
    scripts: &Scripts,
    vm: &Vm,
    code: &[u8],
    check_name: impl FnOnce(&str) -> Result<(), String>,
) -> Result<Library, String> {
    library_of(code, check_name, |start| {
        vm.load_library(scripts, code, start)
    })
}

/// A library of `code`, its `#!lua` line read, `check_name` asked, and its functions
/// learnt from `load` (given where its code starts).
fn library_of(
    code: &[u8],
    check_name: impl FnOnce(&str) -> Result<(), String>,
    load: impl FnOnce(usize) -> Result<Vec<FunctionSpec>, String>,
) -> Result<Library, String> {
    let header = library_header(code)?;
    if header.name.len() > MAX_LIBRARY_NAME {
        return Err(format!(
            "tailstore: a library's name is at most {MAX_LIBRARY_NAME} bytes"
        ));
    }
    check_name(&header.name)?;
    let library = Library {
        functions: load(header.code_start)?,
        name: header.name,
        code: Arc::from(code),
        code_start: header.code_start,
    };
    Ok(library.in_name_order())
}

/// A stored library, read at the server's start (see [`load_stored`]).
fn stored_library(scripts: &Scripts, code: &[u8]) -> Result<Library, String> {
    library_of(
        code,
        |_| Ok(()),
        |start| Vm::default().load_stored_library(scripts, code, start),
    )
}

/// FUNCTION DELETE library.
fn delete(name: &[u8], base: &LibrarySet) -> Result<Planned, String> {
    let set = std::str::from_utf8(name)
        .ok()
        .and_then(|name| without(base, name))
        .ok_or("ERR Library not found")?;
    Ok(Planned {
        set,
        reply: Reply::ok(),
    })
}

/// FUNCTION FLUSH [ASYNC|SYNC].
fn flush(args: &[Vec<u8>]) -> Result<Planned, String> {
    match args {
        [] => {}
        [mode] if is(mode, "sync") || is(mode, "async") => {}
        _ => return Err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option".into()),
    }
    Ok(Planned {
        set: LibrarySet::new(),
        reply: Reply::ok(),
    })
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
fn restore(
    shared: &Shared,
    vm: &Vm,
    args: &[Vec<u8>],
    base: &LibrarySet,
) -> Result<Planned, String> {
    let policy = match &args[1..] {
        [] => Policy::Append,
        [policy] if is(policy, "flush") => Policy::Flush,
        [policy] if is(policy, "append") => Policy::Append,
        [policy] if is(policy, "replace") => Policy::Replace,
        [_] => {
            return Err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
                    .into(),
            )
        }
        _ => return Err(
            "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP."
                .into(),
        ),
    };
    let codes = tailstore_rdb::restore_libraries(&args[0]).map_err(|err| format!("ERR {err}"))?;
    let libraries = codes
        .iter()
        .map(|code| compiled(&shared.scripts, vm, code, |_| Ok(())))
        .collect::<Result<Vec<_>, String>>()
        .map_err(|text| format!("ERR {text}"))?;
    let set = merged(base, libraries, policy).map_err(|text| format!("ERR {text}"))?;
    Ok(Planned {
        set,
        reply: Reply::ok(),
    })
}

/// Stores the change from the `installed` set (read under the change guard, which the
/// caller holds) to the one `planned` leaves in one transaction, and installs the new set
/// once it committed: the planned reply then, else the transaction's error.
fn change<'s>(
    shared: &'s Shared,
    installed: &LibrarySet,
    Planned { set, reply }: Planned,
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    let Executed {
        reply,
        pending: commit,
        committed,
        .. // no key is written
    } = shared.ks.run_for_client(0, |ctx| {
        store_difference(ctx, installed, &set)?;
        Ok::<Reply, Fault>(reply.clone())
    });
    pending.extend(commit);
    if committed {
        shared.libraries.install(set);
    }
    reply
}

/// Writes the rows that turn the stored libraries `before` into `after`: removes those
/// `after` lacks, stores those new to it (a library kept as it was is not written again).
fn store_difference(
    ctx: &mut Ctx<'_, '_>,
    before: &LibrarySet,
    after: &LibrarySet,
) -> Result<(), Fault> {
    for name in before.keys().filter(|name| !after.contains_key(*name)) {
        ctx.ks.remove_library(ctx.txn, name.as_bytes())?;
    }
    for (name, library) in after {
        if before
            .get(name)
            .is_none_or(|old| !Arc::ptr_eq(old, library))
        {
            ctx.ks
                .store_library(ctx.txn, name.as_bytes(), &library.code)?;
        }
    }
    Ok(())
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
fn list(libraries: &LibrarySet, args: &[Vec<u8>]) -> Result<Reply, String> {
    let (mut pattern, mut with_code) = (None, false);
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if !with_code && is(arg, "withcode") {
            with_code = true;
        } else if pattern.is_none() && is(arg, "libraryname") {
            pattern = Some(
                rest.next()
                    .ok_or("ERR library name argument was not given")?,
            );
        } else {
            return Err(format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(arg)
            ));
        }
    }
    let listed = libraries
        .values()
        .filter(|library| {
            pattern.is_none_or(|p| {
                matches(
                    &p.to_ascii_lowercase(),
                    &library.name.to_ascii_lowercase().into_bytes(),
                )
            })
        })
        .map(|library| library_reply(library, with_code))
        .collect();
    Ok(Reply::Array(listed))
}

fn library_reply(library: &Library, with_code: bool) -> Reply {
    let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let status = |s: &str| Reply::Status(s.to_string());
    let functions = library
        .functions
        .iter()
        .map(|function| {
            Reply::Map(vec![
                (text("name"), text(&function.name)),
                (
                    text("description"),
                    function
                        .description
                        .clone()
                        .map_or(Reply::Null, Reply::Bulk),
                ),
                (
                    text("flags"),
                    Reply::Set(function.flags.names().map(status).collect()),
                ),
            ])
        })
        .collect();
    let mut fields = vec![
        (text("library_name"), text(&library.name)),
        (text("engine"), text("LUA")),
        (text("functions"), Reply::Array(functions)),
    ];
    if with_code {
        fields.push((text("library_code"), Reply::Bulk(library.code.to_vec())));
    }
    Reply::Map(fields)
}

/// FUNCTION DUMP: every library, in Redis's payload.
fn dump(libraries: &LibrarySet) -> Reply {
    let payload =
        tailstore_rdb::dump_libraries(libraries.values().map(|library| &library.code[..]));
    Reply::Bulk(payload)
}

/// FUNCTION STATS: the function running longest now, if any, and the engine's counts of
/// the libraries and their functions.
fn stats(shared: &Shared, (libraries, functions): (usize, usize)) -> Reply {
    let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let running = shared
        .libraries
        .longest_running()
        .map_or(Reply::Null, |run| {
            Reply::Map(vec![
                (text("name"), text(&run.name)),
                (
                    text("command"),
                    Reply::Array(run.command.into_iter().map(Reply::Bulk).collect()),
                ),
                (
                    text("duration_ms"),
                    Reply::Int(run.started.elapsed().as_millis() as i64),
                ),
            ])
        });
    let lua = Reply::Map(vec![
        (text("libraries_count"), Reply::Int(libraries as i64)),
        (text("functions_count"), Reply::Int(functions as i64)),
    ]);
    Reply::Map(vec![
        (text("running_script"), running),
        (text("engines"), Reply::Map(vec![(text("LUA"), lua)])),
    ])
}

fn help() -> Reply {
    crate::command::help(FUNCTION_HELP)
}

const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    The libraries are removed at once whichever mode is given.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];

/// Loads the libraries stored in the database into `shared.libraries`, at the server's
/// start. Each loads in a Lua state of its own, as FUNCTION LOAD checked it (what one
/// library's code keeps does not count against the next's memory), and without LOAD's
/// half-second limit (a busy machine must not refuse what it accepted). A stored library
/// that still does not load stops the start with an error naming it, as Redis refuses an
/// RDB file whose functions do not load.
pub fn load_stored(shared: &Shared) -> Result<usize, String> {
    let stored = shared
        .ks
        .run_internal(0, |ctx| ctx.ks.stored_libraries(ctx.txn))
        .map_err(|err| format!("the stored function libraries could not be read: {err}"))?;
    let mut libraries = Vec::with_capacity(stored.len());
    for (name, code) in &stored {
        let library = stored_library(&shared.scripts, code).map_err(|text| {
            format!(
                "the function library '{}' stored in the database does not load: {text} \
                 (a larger --script-memory may let it)",
                String::from_utf8_lossy(name)
            )
        })?;
        libraries.push(library);
    }
    let count = libraries.len();
    let set = merged(&LibrarySet::new(), libraries, Policy::Append)
        .map_err(|text| format!("the stored function libraries collide: {text}"))?;
    shared.libraries.install(set);
    Ok(count)
}
