//! From a parsed command to its reply: the command table, MULTI/EXEC/WATCH, and the data
//! commands' commits collected for the pass's one durability wait.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tailstore_engine::PendingCommit;
use tailstore_resp::{Protocol, Reply};

use super::acl;
use super::admin;
use super::auth;
use super::blocking::Blocked;
use super::connection::{Connection, Queued};
use super::eval;
use super::functions;
use super::interleave::{self, Point};
use super::pubsub;
use super::slowlog;
use super::tracking;
use super::Shared;
use crate::command::{
    blocking_timeout, lookup, resolve_last_ids, subcommand_check, Command, CommandCode,
    CountLookups, Run,
};
use crate::script::{BlockScripts, Vm};
use crate::{BlockStep, Executed};

/// Whether the connection has not given the password the server asks for (Redis's
/// `authRequired`): its commands are refused but for logging in, and its requests are held
/// to Redis's small limits.
fn unauthenticated(shared: &Shared, conn: &Connection) -> bool {
    !conn.authenticated && shared.password.required()
}

/// Executes every complete command in the connection's input, appending the replies to its
/// output and the commits to `pending`.
pub fn serve<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    vm: &Vm,
    pending: &mut Vec<PendingCommit<'s>>,
) {
    while !conn.closing && !conn.backlogged() && conn.blocked.is_none() {
        let args = match conn.postponed.take() {
            Some(args) => args,
            None => match conn.next_command(unauthenticated(shared, conn)) {
                Ok(Some(args)) => args,
                Ok(None) => return,
                Err(err) => {
                    // As Redis does: the error, then the connection is closed.
                    send(shared, conn, &Reply::error(err.to_string()));
                    conn.closing = true;
                    return;
                }
            },
        };
        if unauthenticated(shared, conn) {
            if let Some((command, refusal)) = auth::refusal(&args) {
                shared.loops[conn.home.at]
                    .command_stats
                    .reject(command, &args);
                let refusal = refused(conn, &args, refusal);
                send(shared, conn, &refusal);
                continue;
            }
        }
        if conn.user.is_some() {
            if let Some(refusal) = denied(shared, conn, &args) {
                let refusal = refused(conn, &args, refusal);
                send(shared, conn, &refusal);
                continue;
            }
            if conn.closing {
                return; // its user was deleted
            }
        }
        let no_writes = |args: &[Vec<u8>]| eval::declares_no_writes(shared, args);
        if shared.pause.holds(&args, conn.multi.as_deref(), no_writes) {
            conn.postponed = Some(args);
            return;
        }
        shared.commands.fetch_add(1, Ordering::Relaxed);
        if is_shutdown(&args) && conn.multi.is_none() {
            match shutdown(shared, &args) {
                // As Redis: no reply; the connection closes as the server stops.
                None => {
                    conn.closing = true;
                    return;
                }
                Some(refusal) => {
                    send(shared, conn, &refusal);
                    continue;
                }
            }
        }
        let caching_word = conn.tracking.is_some() && tracking::is_client_caching(&args);
        if let Some(reply) = one(shared, conn, vm, args, pending) {
            send(shared, conn, &reply);
        }
        if conn.tracking.is_some() {
            tracking::command_done(conn, caching_word);
        }
    }
    // Stopped for backpressure: pick up the rest once the output drains.
    conn.unread = conn.unread || conn.backlogged();
}

/// For a connection logged in as an ACL user: the refusal of `args` if the user may not
/// run it (recorded for ACL LOG; in MULTI, EXEC will fail), else `None`. The user is read
/// again if ACL SETUSER or DELUSER changed the users since; a deleted user's connection
/// is closed. Unknown commands and wrong arities pass, to be refused as they are for
/// every connection (Redis checks those first).
fn denied(shared: &Shared, conn: &mut Connection, args: &[Vec<u8>]) -> Option<Reply> {
    let generation = shared.users.generation();
    if conn.user_generation != generation {
        let name = conn.user.as_ref()?.name.clone();
        let Some(user) = shared.users.get(&name) else {
            conn.closing = true;
            return None;
        };
        conn.user = Some(user);
        conn.user_generation = generation;
    }
    let user = conn.user.clone()?;
    let command = lookup(&args[0])?;
    if !command.arity_ok(args.len()) || subcommand_check(command, args).is_err() {
        return None;
    }
    let denial = user.check(command, args).err()?;
    let context = match conn.multi {
        Some(_) => acl::Context::Multi,
        None => acl::Context::TopLevel,
    };
    conn.multi_failed |= conn.multi.is_some();
    shared.loops[conn.home.at]
        .command_stats
        .reject(command, args);
    acl::log_denial(
        &shared.password,
        &user,
        &denial,
        context,
        conn.listing().line(),
    );
    Some(acl::refusal_reply(&denial))
}

fn is_shutdown(args: &[Vec<u8>]) -> bool {
    args[0].eq_ignore_ascii_case(b"shutdown")
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE]: stops the server, which then closes the database
/// with a checkpoint (NOSAVE too: every acknowledged write is in the log either way).
/// `None` when the server is stopping; the error reply otherwise.
fn shutdown(shared: &Shared, args: &[Vec<u8>]) -> Option<Reply> {
    for option in &args[1..] {
        let known = ["NOSAVE", "SAVE", "NOW", "FORCE"]
            .iter()
            .any(|o| option.eq_ignore_ascii_case(o.as_bytes()));
        if option.eq_ignore_ascii_case(b"ABORT") {
            return Some(Reply::error("ERR No shutdown in progress."));
        }
        if !known {
            return Some(Reply::error("ERR syntax error"));
        }
    }
    let named = |name: &[u8]| args[1..].iter().any(|o| o.eq_ignore_ascii_case(name));
    if named(b"NOSAVE") && named(b"SAVE") {
        return Some(Reply::error("ERR syntax error"));
    }
    shared.stop.store(true, Ordering::Relaxed);
    None
}

/// Sends `reply`, unless CLIENT REPLY turned replies off or skips this one; an error
/// reply is counted (INFO errorstats), sent or not, as Redis counts it.
fn send(shared: &Shared, conn: &mut Connection, reply: &Reply) {
    if let Reply::Error(text) = reply {
        shared.loops[conn.home.at].command_stats.error(text);
    }
    if sending(conn) {
        reply.encode(conn.protocol, &mut conn.output);
    }
}

/// Whether the next reply is sent (CLIENT REPLY OFF and SKIP drop it); a skip is used up.
fn sending(conn: &mut Connection) -> bool {
    if conn.replies_off {
        return false;
    }
    if conn.replies_to_skip > 0 {
        conn.replies_to_skip -= 1;
        return false;
    }
    true
}

/// Runs one command; its reply, or `None` when the connection blocked (BLPOP…).
fn one<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    vm: &Vm,
    args: Vec<Vec<u8>>,
    pending: &mut Vec<PendingCommit<'s>>,
) -> Option<Reply> {
    let Some(command) = lookup(&args[0]) else {
        conn.multi_failed |= conn.multi.is_some();
        return Some(unknown_command(&args));
    };
    conn.running(CommandCode::of(command, None));
    if !command.arity_ok(args.len()) {
        conn.multi_failed |= conn.multi.is_some();
        let stats = &shared.loops[conn.home.at].command_stats;
        stats.reject(command, &args);
        let refusal = Reply::error(format!(
            "ERR wrong number of arguments for '{}' command",
            command.name
        ));
        return Some(refused(conn, &args, refusal));
    }
    match subcommand_check(command, &args) {
        Err(refusal) => {
            conn.multi_failed |= conn.multi.is_some();
            return Some(Reply::error(refusal));
        }
        Ok(Some(subcommand)) => conn.running(CommandCode::of(command, Some(subcommand))),
        Ok(None) => {}
    }
    // Redis's `no-multi` commands: refused while queuing, which fails the EXEC.
    if conn.multi.is_some() && matches!(command.name, "save" | "shutdown") {
        conn.multi_failed = true;
        shared.loops[conn.home.at]
            .command_stats
            .reject(command, &args);
        return Some(Reply::error("ERR Command not allowed inside a transaction"));
    }
    if conn.monitoring {
        if matches!(command.run, Run::Data(_)) || eval::is_eval(command) {
            return Some(Reply::error("ERR Replica can't interact with the keyspace"));
        }
        if command.name == "monitor" {
            return None; // already one: Redis does not answer
        }
    }
    if conn.subscriptions() > 0 && conn.protocol == Protocol::Resp2 {
        if let Some(reply) = pubsub::in_subscribed_context(command, &args) {
            return Some(refused(conn, &args, reply));
        }
    }
    if conn.multi.is_none() {
        if let Some(change) = pubsub::Change::of(command.name) {
            pubsub::change(shared, conn, change, &args[1..]);
            shared.client_list.update(conn); // CLIENT KILL TYPE pubsub sees it
            monitored(shared, conn, command, &args);
            return None;
        }
        if command.is_blocking() {
            // Cloned for the slow log and MONITOR: a blocking command's arguments are a few
            // keys. Monitors see it once it ran, blocked or answered, as in Redis.
            let (started, logged) = (Instant::now(), args.clone());
            conn.active_at(started);
            let reply = block_or_reply(shared, conn, command, args, pending);
            monitored(shared, conn, command, &logged);
            finished(shared, conn, command, &logged, started, reply.as_ref());
            return reply;
        }
    }
    reply_to(shared, conn, vm, command, args, pending)
}

/// Shows `command`, which the connection ran in its current database, to the monitors.
fn monitored(shared: &Shared, conn: &mut Connection, command: &Command, args: &[Vec<u8>]) {
    let outbox = &mut conn.published;
    shared
        .monitors
        .feed(command, conn.db, &conn.peer, args, outbox);
}

/// After a command of `conn` ran: its run time, to the slow log and to its loop's latency
/// histograms.
fn finished(
    shared: &Shared,
    conn: &Connection,
    command: &Command,
    args: &[Vec<u8>],
    started: Instant,
    reply: Option<&Reply>,
) {
    record_run(shared, conn, (command, args), started.elapsed(), reply);
}

/// A command of `conn` that ran for `took`: to the slow log (unless the command is one
/// Redis keeps out of it: EXEC, whose commands are logged one by one) and to its loop's
/// latency histograms.
fn record_run(
    shared: &Shared,
    conn: &Connection,
    (command, args): (&Command, &[Vec<u8>]),
    took: Duration,
    reply: Option<&Reply>,
) {
    if !command.flags.contains(&"skip_slowlog") {
        shared.slowlog.note(took, args, client(conn));
    }
    shared.loops[conn.home.at]
        .command_stats
        .record(command, args, took, reply);
}

/// The connection as the slow log names it.
fn client(conn: &Connection) -> slowlog::Client<'_> {
    slowlog::Client {
        peer: &conn.peer,
        name: conn.name.as_deref(),
    }
}

/// A command (known, of the right arity) that neither subscribes nor blocks: queued in
/// MULTI, else run. Its reply, or `None` when it sent its reply itself (EXEC).
fn reply_to<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    vm: &Vm,
    command: &'static Command,
    args: Vec<Vec<u8>>,
    pending: &mut Vec<PendingCommit<'s>>,
) -> Option<Reply> {
    if conn.multi.is_some()
        && !matches!(
            command.name,
            "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
        )
    {
        if let Some(queue) = conn.multi.as_mut() {
            queue.push(Queued { args });
        }
        return Some(Reply::Status("QUEUED".into()));
    }
    let started = Instant::now();
    conn.active_at(started);
    if eval::is_eval(command) {
        // Before the script, whose calls are shown after it (as `lua`).
        monitored(shared, conn, command, &args);
    }
    let reply = match command.name {
        "multi" => Some(multi(conn)),
        "exec" => exec(shared, conn, vm, pending),
        "discard" => Some(discard(conn)),
        "watch" => Some(watch(shared, conn, &args)),
        "unwatch" => {
            conn.watched.clear();
            Some(Reply::ok())
        }
        _ if eval::is_eval(command) => {
            remember_reads(shared, conn, command, &args);
            Some(eval::eval(shared, conn, vm, command, &args, pending))
        }
        "script" => Some(eval::script(&mut &shared.scripts, vm, &args)),
        "function" => Some(functions::function(shared, vm, &args, pending)),
        _ => Some(run(shared, conn, command, &args, pending)),
    };
    if !eval::is_eval(command) {
        monitored(shared, conn, command, &args);
    }
    finished(shared, conn, command, &args, started, reply.as_ref());
    reply
}

fn run<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    command: &'static Command,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    match command.run {
        Run::Data(_) => execute(
            shared,
            conn,
            (conn.db, CountLookups::Yes),
            command,
            args,
            pending,
        ),
        Run::Server => admin::run(shared, conn, command, args, pending),
    }
}

/// Runs a data command of `conn` and, if it writes, wakes the clients blocked on its keys
/// and invalidates them for the clients tracking them. A blocking command that found
/// nothing wrote nothing and wakes nobody: a blocked client's run that signalled its own
/// key would wake its own loop to run it again, and again, spinning while it waits.
fn execute<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    (db, counted): (u32, CountLookups),
    command: &'static Command,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    remember_reads(shared, conn, command, args);
    interleave::reached(Point::Remembered);
    let (reply, wrote) = run_data(shared, conn, (db, counted), command, args, pending);
    interleave::reached(Point::Committed);
    if command.is_write() && !(command.is_blocking() && is_nil(&reply)) {
        shared.signal_write(db, command, args);
    }
    if wrote {
        invalidate(shared, conn, command, args);
    }
    reply
}

/// Before a read-only command (or a script) of a tracking client reads: its keys are
/// remembered for the client (`server/tracking.rs`, "Why no stale copy survives").
fn remember_reads(shared: &Shared, conn: &mut Connection, command: &Command, args: &[Vec<u8>]) {
    if conn.tracking.is_some() && (command.is_read_only() || eval::is_eval(command)) {
        let keys = command.named_keys(args);
        shared.tracking.remember(&shared.client_list, conn, keys);
    }
}

/// After `conn`'s write to the keys of `args`: the invalidations due to tracking clients,
/// sent after the pass's durability wait like its replies.
fn invalidate(shared: &Shared, conn: &mut Connection, command: &Command, args: &[Vec<u8>]) {
    if shared.tracking.clients() > 0 {
        let (clients, outbox) = (&shared.client_list, &mut conn.published);
        let keys = command.named_keys(args);
        shared.tracking.invalidate(clients, conn.id, keys, outbox);
    }
}

/// A blocking command's run outside MULTI (first or again: only the first counts its
/// read lookups), counted for `INFO stats`.
fn execute_blocking<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    (db, counted): (u32, CountLookups),
    command: &'static Command,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> Reply {
    shared.blocked_runs.fetch_add(1, Ordering::Relaxed);
    execute(shared, conn, (db, counted), command, args, pending)
}

/// Runs a data command of `conn`: its reply, and whether its transaction wrote anything.
/// Its key events go out with the pass's replies.
fn run_data<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    (db, counted): (u32, CountLookups),
    command: &'static Command,
    args: &[Vec<u8>],
    pending: &mut Vec<PendingCommit<'s>>,
) -> (Reply, bool) {
    let Executed {
        reply,
        pending: commit,
        events,
        ..
    } = shared.ks.execute_counting(db, command, args, counted);
    let wrote = commit.as_ref().is_some_and(PendingCommit::wrote);
    pending.extend(commit);
    if !events.is_empty() {
        shared.publish_key_events(events, &mut conn.published);
    }
    (reply, wrote)
}

/// A blocking command outside MULTI: its reply if one run finds an element (or fails),
/// else `None`, the connection blocked on it until a write to its keys or its deadline.
fn block_or_reply<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    command: &'static Command,
    args: Vec<Vec<u8>>,
    pending: &mut Vec<PendingCommit<'s>>,
) -> Option<Reply> {
    let Some(timeout) = blocking_timeout(command.name, &args) else {
        let first = (conn.db, CountLookups::Yes);
        return Some(execute(shared, conn, first, command, &args, pending));
    };
    let args = match command.name {
        "xread" => shared
            .ks
            .peek(conn.db, |ctx| resolve_last_ids(ctx, &args))
            .unwrap_or(args), // the run answers with the error
        _ => args,
    };
    let first = (conn.db, CountLookups::Yes);
    let reply = execute_blocking(shared, conn, first, command, &args, pending);
    if !is_nil(&reply) {
        return Some(reply);
    }
    let deadline = timeout.and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms)));
    conn.blocked = Some(Blocked::new(command, args, conn.db, deadline));
    None
}

/// Runs a blocked connection's command again: `true` (its reply sent, the connection no
/// longer blocked) if it found an element, failed, or this is its `last` run (the deadline).
pub fn retry_blocked<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    pending: &mut Vec<PendingCommit<'s>>,
    last: bool,
) -> bool {
    // Taken for the run (which needs the connection) and put back: the caller ends it.
    let Some(blocked) = conn.blocked.take() else {
        return true;
    };
    let done = retry(shared, conn, &blocked, pending, last);
    conn.blocked = Some(blocked);
    done
}

fn retry<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    blocked: &Blocked,
    pending: &mut Vec<PendingCommit<'s>>,
    last: bool,
) -> bool {
    if blocked.unblocked_with_error {
        send(
            shared,
            conn,
            &Reply::error("UNBLOCKED client unblocked via CLIENT UNBLOCK"),
        );
        return true;
    }
    let (db, command, args) = (blocked.db, blocked.command, &blocked.args);
    let again = (db, CountLookups::No);
    let reply = execute_blocking(shared, conn, again, command, args, pending);
    if is_nil(&reply) && !last {
        return false;
    }
    send(shared, conn, &reply);
    true
}

/// The reply of a blocking command that found nothing.
fn is_nil(reply: &Reply) -> bool {
    matches!(reply, Reply::Null | Reply::NullArray)
}

/// Redis's text: the name and the first arguments, quoted.
fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let quoted: String = args[1..]
        .iter()
        .take(20)
        .map(|arg| format!("'{}' ", String::from_utf8_lossy(&arg[..arg.len().min(128)])))
        .collect();
    Reply::error(format!(
        "ERR unknown command '{}', with args beginning with: {quoted}",
        String::from_utf8_lossy(&args[0][..args[0].len().min(128)])
    ))
}

/// The reply to a command refused before it ran. A refused EXEC ends the transaction, as
/// Redis's does, and says so: "EXECABORT Transaction discarded because of: " and the
/// refusal (without its `ERR`).
fn refused(conn: &mut Connection, args: &[Vec<u8>], refusal: Reply) -> Reply {
    if !args[0].eq_ignore_ascii_case(b"exec") {
        return refusal;
    }
    conn.multi = None;
    conn.multi_failed = false;
    conn.watched.clear();
    match refusal {
        Reply::Error(text) => Reply::error(format!(
            "EXECABORT Transaction discarded because of: {}",
            text.strip_prefix("ERR ").unwrap_or(&text)
        )),
        other => other,
    }
}

fn multi(conn: &mut Connection) -> Reply {
    if conn.multi.is_some() {
        return Reply::error("ERR MULTI calls can not be nested");
    }
    conn.multi = Some(Vec::new());
    conn.multi_failed = false;
    Reply::ok()
}

fn discard(conn: &mut Connection) -> Reply {
    if conn.multi.take().is_none() {
        return Reply::error("ERR DISCARD without MULTI");
    }
    conn.watched.clear();
    Reply::ok()
}

fn watch(shared: &Shared, conn: &mut Connection, args: &[Vec<u8>]) -> Reply {
    if conn.multi.is_some() {
        return Reply::error("ERR WATCH inside MULTI is not allowed");
    }
    for key in &args[1..] {
        match shared.ks.watch(conn.db, key) {
            Ok(watched) => conn.watched.push(watched),
            Err(reply) => return reply,
        }
    }
    Reply::ok()
}

/// EXEC: the queued commands as one engine transaction (connection and server commands
/// among them are answered after it, if it ran; SELECT changes the database of the commands
/// after it). A block that ran is answered here, element by element ([`answer_block`]):
/// `None`. Otherwise the reply to send: EXECABORT, a failure, or nil (a watched key changed).
fn exec<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    vm: &Vm,
    pending: &mut Vec<PendingCommit<'s>>,
) -> Option<Reply> {
    let Some(queue) = conn.multi.take() else {
        return Some(Reply::error("ERR EXEC without MULTI"));
    };
    let watched = std::mem::take(&mut conn.watched);
    if conn.multi_failed {
        conn.multi_failed = false;
        return Some(Reply::error(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    let mut took = vec![Duration::ZERO; queue.len()];
    // Scripts are found and compiled first, and SCRIPT commands run, in the block's order
    // (an EVALSHA after a SCRIPT LOAD finds its script), on the block's view of the script
    // cache, which reaches the server's only if the block runs; each script runs in the
    // block's transaction.
    let mut cache = BlockScripts::new(&shared.scripts);
    let mut scripts: Vec<Result<eval::Prepared<'_>, Reply>> = queue
        .iter()
        .zip(&mut took)
        .filter_map(|(queued, took)| {
            let command = lookup(&queued.args[0]).filter(|c| prepared_first(c))?;
            let started = Instant::now();
            let prepared = prepare(shared, conn, vm, (command, &queued.args), &mut cache);
            *took = started.elapsed();
            Some(prepared)
        })
        .collect();
    let mut next_script = scripts.iter_mut();
    let mut steps = Vec::with_capacity(queue.len());
    // Each step's command, for INFO commandstats and the slow log, unless ACL refused it.
    let mut ran_commands: Vec<Option<Invocation<'_>>> = Vec::with_capacity(queue.len());
    // The connection and server commands are answered once the block has run, and only if
    // it did: a block that a changed watched key aborts, or that fails, must leave the
    // connection as it was (its SELECT too). Meanwhile the database a queued SELECT picks
    // is followed here, for the commands after it.
    let mut deferred: Vec<(usize, &'static Command, &[Vec<u8>])> = Vec::new();
    let mut db = conn.db;
    for queued in &queue {
        let Some(command) = lookup(&queued.args[0]) else {
            continue;
        };
        remember_reads(shared, conn, command, &queued.args);
        if let Some(refusal) = exec_denial(conn, command, &queued.args) {
            if prepared_first(command) {
                next_script.next(); // its script is not run
            }
            steps.push(BlockStep::Server(refusal));
            ran_commands.push(None);
            continue;
        }
        let step = match command.run {
            Run::Data(_) => BlockStep::Data(db, command, &queued.args),
            Run::Server if prepared_first(command) => match next_script.next() {
                Some(Ok(script)) => BlockStep::Body(script.in_database(db)),
                Some(Err(answer)) => BlockStep::Server(answer.clone()),
                None => BlockStep::Server(Reply::error("ERR tailstore: a script went missing")),
            },
            Run::Server => match admin::map_change(shared, db, command, &queued.args) {
                Some(Ok(change)) => BlockStep::Map(change),
                Some(Err(refusal)) => BlockStep::Server(refusal),
                None => {
                    if command.name == "select" {
                        db = admin::database_index(shared, &queued.args[1]).unwrap_or(db);
                    }
                    deferred.push((steps.len(), command, &queued.args));
                    BlockStep::Server(Reply::Null) // answered once the block has run
                }
            },
        };
        steps.push(step);
        ran_commands.push(Some((command, &queued.args)));
    }
    // Unknown commands fail the block as they are queued: each queued command is a step,
    // and `took` and `ran_commands` are indexed by either.
    assert_eq!(steps.len(), queue.len(), "a step per queued command");
    let mut step_took = vec![Duration::ZERO; steps.len()];
    let Executed {
        reply,
        pending: commit,
        committed,
        events,
    } = shared
        .ks
        .execute_block_timed(&mut steps, &watched, &mut step_took);
    for (took, step_took) in took.iter_mut().zip(step_took) {
        *took += step_took;
    }
    let wrote = commit.as_ref().is_some_and(PendingCommit::wrote);
    pending.extend(commit);
    // Before the messages of the block's deferred PUBLISHes, which Redis would have sent
    // in their place among the commands.
    if !events.is_empty() {
        shared.publish_key_events(events, &mut conn.published);
    }
    let ran = committed && !matches!(reply, Reply::NullArray);
    if ran {
        cache.apply();
    }
    let unsent = match reply {
        Reply::Array(replies) if ran => {
            let block = Block {
                replies,
                deferred: &deferred,
                commands: &ran_commands,
                took: &mut took,
            };
            answer_block(shared, conn, vm, block, pending);
            None
        }
        other => Some(other),
    };
    for step in &steps {
        match step {
            BlockStep::Data(db, command, args) if command.is_write() => {
                shared.signal_write(*db, command, args);
                if wrote && committed {
                    invalidate(shared, conn, command, args);
                }
            }
            BlockStep::Map(change) if ran => admin::map_changed(shared, conn, *change),
            _ => {}
        }
    }
    // Each command's database, for MONITOR (connection commands: the block's last).
    let databases: Vec<u32> = steps
        .iter()
        .map(|step| match step {
            BlockStep::Data(db, ..) => *db,
            _ => conn.db,
        })
        .collect();
    drop(steps);
    // The block's commands ran unless a watched key had changed: each is shown to the
    // monitors in order, a script followed by its calls (its effects are kept, messages
    // and calls, only if the block committed).
    let mut scripts = scripts.into_iter();
    for (queued, db) in queue.iter().zip(databases) {
        let Some(command) = lookup(&queued.args[0]) else {
            continue;
        };
        if ran {
            let outbox = &mut conn.published;
            shared
                .monitors
                .feed(command, db, &conn.peer, &queued.args, outbox);
        }
        if eval::is_eval(command) {
            if let Some(Ok(script)) = scripts.next() {
                script.finish(conn, committed);
            }
        } else if prepared_first(command) {
            scripts.next();
        }
    }
    unsent
}

/// Whether a queued command is dealt with before its block runs: a script, found and
/// compiled (EVAL, EVALSHA, FCALL…), and SCRIPT, which changes or reads the script cache
/// those find their scripts in (the block's view of it, `script::BlockScripts`).
fn prepared_first(command: &Command) -> bool {
    eval::is_eval(command) || command.name == "script"
}

/// What EXEC's walk before the block makes of a command [`prepared_first`] names: a
/// script to run in the block's transaction, or the command's reply (a refusal, or what a
/// SCRIPT command answered). A command its user may no longer run is not run.
fn prepare<'a>(
    shared: &'a Shared,
    conn: &Connection,
    vm: &'a Vm,
    (command, args): Invocation<'a>,
    cache: &mut BlockScripts<'_>,
) -> Result<eval::Prepared<'a>, Reply> {
    if let Some(refusal) = exec_denial(conn, command, args) {
        return Err(refusal);
    }
    if command.name == "script" {
        return Err(eval::script(cache, vm, args));
    }
    eval::Prepared::new(shared, conn, vm, command, args, cache)
}

/// The refusal of a queued command its user may no longer run (EXEC read the user again).
fn exec_denial(conn: &Connection, command: &Command, args: &[Vec<u8>]) -> Option<Reply> {
    let user = conn.user.as_ref()?;
    let denial = user.check(command, args).err()?;
    Some(acl::exec_refusal(&denial))
}

/// A queued command and its arguments.
type Invocation<'q> = (&'static Command, &'q [Vec<u8>]);

/// A block that ran, to answer: its replies (the deferred commands' places empty), the
/// deferred commands with their places, each step's command (`None`: refused by ACL, not
/// run) and each one's run time so far.
struct Block<'b, 'q> {
    replies: Vec<Reply>,
    deferred: &'b [(usize, &'static Command, &'q [Vec<u8>])],
    commands: &'b [Option<Invocation<'q>>],
    took: &'b mut [Duration],
}

/// Sends the replies of a block that ran: the array's header, then each reply in order,
/// each connection or server command answered in its place, so that what it changes
/// applies to the replies after it as in Redis: HELLO's protocol, CLIENT REPLY OFF and ON,
/// a (P)SUBSCRIBE's confirmations (sent in its place, however many, as Redis does, so the
/// array holds more than its header says) and the subscribed context's PING. Each reply
/// goes through [`send`] (errors counted for INFO errorstats), and each command that ran
/// is counted in INFO commandstats and the slow log, as Redis counts a block's commands.
fn answer_block<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    vm: &Vm,
    block: Block<'_, '_>,
    pending: &mut Vec<PendingCommit<'s>>,
) {
    let Block {
        replies,
        deferred,
        commands,
        took,
    } = block;
    if sending(conn) {
        Reply::encode_array_header(replies.len(), &mut conn.output);
    }
    let mut deferred = deferred.iter().peekable();
    let mut skip_after = false;
    for (at, reply) in replies.into_iter().enumerate() {
        let reply = match deferred.next_if(|(place, ..)| *place == at) {
            Some(&(_, command, args)) if is_reply_skip(command, args) => {
                // Redis skips the reply of the command after EXEC, not the block's next.
                skip_after = true;
                None
            }
            Some(&(_, command, args)) => {
                let started = Instant::now();
                let answer = answer_deferred(shared, conn, vm, (command, args), pending);
                took[at] += started.elapsed();
                answer
            }
            None => Some(reply),
        };
        if let Some(reply) = &reply {
            send(shared, conn, reply);
        }
        if let Some((command, args)) = commands[at] {
            record_run(shared, conn, (command, args), took[at], reply.as_ref());
        }
    }
    if skip_after {
        conn.replies_to_skip = 1;
    }
}

/// CLIENT REPLY SKIP.
fn is_reply_skip(command: &Command, args: &[Vec<u8>]) -> bool {
    command.name == "client"
        && args.len() == 3
        && args[1].eq_ignore_ascii_case(b"reply")
        && args[2].eq_ignore_ascii_case(b"skip")
}

/// A connection or server command of a block that ran, answered in its place; `None` when
/// it sent its answer itself (a subscription's confirmations).
fn answer_deferred<'s>(
    shared: &'s Shared,
    conn: &mut Connection,
    vm: &Vm,
    (command, args): (&Command, &[Vec<u8>]),
    pending: &mut Vec<PendingCommit<'s>>,
) -> Option<Reply> {
    if let Some(change) = pubsub::Change::of(command.name) {
        if change.is_shard_subscribe() {
            return Some(Reply::error(
                "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client",
            ));
        }
        pubsub::change(shared, conn, change, &args[1..]);
        shared.client_list.update(conn); // CLIENT KILL TYPE pubsub sees it
        return None;
    }
    if command.name == "ping" && conn.subscriptions() > 0 && conn.protocol == Protocol::Resp2 {
        return pubsub::in_subscribed_context(command, args);
    }
    Some(match command.name {
        // Changes of the libraries: each its own transaction, after the block's (FCALLs of
        // the block found their functions before it ran).
        "function" => functions::function(shared, vm, args, pending),
        _ => admin::queued(shared, conn, command, args),
    })
}
