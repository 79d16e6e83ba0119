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

use std::sync::Arc;

use tailstore_engine::PendingCommit;
use tailstore_resp::Reply;

use super::Shared;
use crate::command::{is, matches, Fault};
use crate::keyspace::MAX_LIBRARY_NAME;
use crate::script::library::{library_header, Library, LibrarySet, Policy};
use crate::script::{Scripts, Vm};
use crate::Executed;

/// FUNCTION and its subcommand (known, of the right arity: `subcommand_check`).
pub fn function<'s>(
    shared: &'s Shared,
    vm: &Vm,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let outcome = match sub.as_str() {
        "load" => load(shared, vm, &args[2..], pending),
        "delete" => delete(shared, &args[2], pending),
        "flush" => flush(shared, &args[2..], pending),
        "list" => {
            list(shared, &args[2..]).map(|reply| after_the_changes_read(shared, reply, pending))
        }
        "dump" => Ok(after_the_changes_read(shared, dump(shared), pending)),
        "restore" => restore(shared, vm, &args[2..], pending),
        "stats" => Ok(after_the_changes_read(shared, stats(shared), pending)),
        "kill" if shared.scripts.kill() => Ok(Reply::ok()),
        "kill" => Err("NOTBUSY No scripts in execution right now.".into()),
        _ => Ok(help()),
    };
    outcome.unwrap_or_else(Reply::Error)
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

/// FUNCTION LOAD [REPLACE] code: the library's name.
fn load<'s>(
    shared: &'s Shared,
    vm: &Vm,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Result<Reply, String> {
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
    let _change = shared.libraries.begin_change();
    let library = compiled(&shared.scripts, vm, code, |name| {
        if policy == Policy::Append && shared.libraries.contains(name) {
            return Err(format!("Library '{name}' already exists"));
        }
        Ok(())
    })
    .map_err(|text| format!("ERR {text}"))?;
    let name = library.name.clone();
    let set = shared
        .libraries
        .merged(vec![library], policy)
        .map_err(|text| format!("ERR {text}"))?;
    Ok(change(shared, set, Reply::Bulk(name.into_bytes()), pending))
}

/// A library of `code`, its `#!lua` line read and its code run on this loop's Lua state
/// to learn its functions; `check_name` may refuse it by name before its code runs.
fn compiled(
    scripts: &Scripts,
    vm: &Vm,
    code: &[u8],
    check_name: impl FnOnce(&str) -> Result<(), String>,
) -> Result<Library, String> {
    let header = library_header(code)?;
    if header.name.len() > MAX_LIBRARY_NAME {
        return Err(format!(
            "tailstore: a library's name is at most {MAX_LIBRARY_NAME} bytes"
        ));
    }
    check_name(&header.name)?;
    let registered = vm.load_library(scripts, code, header.code_start)?;
    let library = Library {
        name: header.name,
        code: Arc::from(code),
        code_start: header.code_start,
        functions: registered.into_iter().map(|r| r.spec).collect(),
    };
    Ok(library.in_name_order())
}

/// FUNCTION DELETE library.
fn delete<'s>(
    shared: &'s Shared,
    name: &[u8],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Result<Reply, String> {
    let _change = shared.libraries.begin_change();
    let set = std::str::from_utf8(name)
        .ok()
        .and_then(|name| shared.libraries.without(name))
        .ok_or("ERR Library not found")?;
    Ok(change(shared, set, Reply::ok(), pending))
}

/// FUNCTION FLUSH [ASYNC|SYNC].
fn flush<'s>(
    shared: &'s Shared,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Result<Reply, String> {
    match args {
        [] => {}
        [mode] if is(mode, "sync") || is(mode, "async") => {}
        _ => return Err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option".into()),
    }
    let _change = shared.libraries.begin_change();
    Ok(change(shared, LibrarySet::new(), Reply::ok(), pending))
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
fn restore<'s>(
    shared: &'s Shared,
    vm: &Vm,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Result<Reply, String> {
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
    let _change = shared.libraries.begin_change();
    let libraries = codes
        .iter()
        .map(|code| compiled(&shared.scripts, vm, code, |_| Ok(())))
        .collect::<Result<Vec<_>, String>>()
        .map_err(|text| format!("ERR {text}"))?;
    let set = shared
        .libraries
        .merged(libraries, policy)
        .map_err(|text| format!("ERR {text}"))?;
    Ok(change(shared, set, Reply::ok(), pending))
}

/// Stores the libraries as `set` (removing those it lacks, writing those that are new to
/// it) in one transaction, and installs the set once it committed: `reply` then, else
/// the transaction's error.
fn change<'s>(
    shared: &'s Shared,
    set: LibrarySet,
    reply: Reply,
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    let (old, _) = shared.libraries.all();
    let Executed {
        reply,
        pending: commit,
        committed,
        .. // no key is written
    } = shared.ks.run_for_client(0, |ctx| {
        for name in old.keys().filter(|name| !set.contains_key(*name)) {
            ctx.ks.remove_library(ctx.txn, name.as_bytes())?;
        }
        for (name, library) in &set {
            if old.get(name).is_none_or(|old| !Arc::ptr_eq(old, library)) {
                ctx.ks
                    .store_library(ctx.txn, name.as_bytes(), &library.code)?;
            }
        }
        Ok::<Reply, Fault>(reply.clone())
    });
    pending.extend(commit);
    if committed {
        shared.libraries.install(set);
    }
    reply
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
fn list(shared: &Shared, args: &[Vec<u8>]) -> Result<Reply, String> {
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
    let (set, _) = shared.libraries.all();
    let listed = set
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
fn dump(shared: &Shared) -> Reply {
    let (set, _) = shared.libraries.all();
    let payload = tailstore_rdb::dump_libraries(set.values().map(|library| &library.code[..]));
    Reply::Bulk(payload)
}

/// FUNCTION STATS: the function running longest now, if any, and the engine's counts.
fn stats(shared: &Shared) -> Reply {
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
    let (libraries, functions) = shared.libraries.counts();
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
/// start. A stored library that no longer loads stops the start with an error naming
/// it, as Redis refuses an RDB file whose functions do not load.
pub fn load_stored(shared: &Shared) -> Result<usize, String> {
    let stored = shared
        .ks
        .run_internal(0, |ctx| ctx.ks.stored_libraries(ctx.txn))
        .map_err(|err| format!("the stored function libraries could not be read: {err}"))?;
    let vm = Vm::default();
    let mut libraries = Vec::with_capacity(stored.len());
    for (name, code) in &stored {
        let library = compiled(&shared.scripts, &vm, code, |_| Ok(())).map_err(|text| {
            format!(
                "the function library '{}' stored in the database does not load: {text}",
                String::from_utf8_lossy(name)
            )
        })?;
        libraries.push(library);
    }
    let count = libraries.len();
    let set = shared
        .libraries
        .merged(libraries, Policy::Append)
        .map_err(|text| format!("the stored function libraries collide: {text}"))?;
    shared.libraries.install(set);
    Ok(count)
}
