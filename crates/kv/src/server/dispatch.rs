//! From a parsed command to its reply: the command table, MULTI/EXEC/WATCH (queued here,
//! run in `transaction.rs`), and the data commands' commits collected for the pass's one
//! durability wait.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tailstore_engine::PendingCommit;
use tailstore_resp::{Protocol, Reply};

use super::acl;
use super::admin;
use super::auth;
use super::blocking::Blocked;
use super::connection::Connection;
use super::eval;
use super::functions;
use super::interleave::{self, Point};
use super::pubsub;
use super::slowlog;
use super::standalone;
use super::tracking;
use super::transaction;
use super::Shared;
use crate::command::{
    blocking_timeout, lookup, resolve_last_ids, subcommand_check, with_blocked_count, Command,
    CommandCode, CountLookups, Run,
};
use crate::script::Vm;
use crate::Executed;

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
        if let Some((command, refusal)) = standalone::protected_refusal(&args) {
            conn.multi_failed |= conn.multi.is_some();
            shared.loops[conn.home.at]
                .command_stats
                .reject(command, &args);
            send(shared, conn, &refusal);
            continue;
        }
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
        let keeps_caching = conn.tracking.is_some() && tracking::is_client_command(&args);
        let own_first = pubsub::own_messages_go_first(conn, &args).then_some(conn.published.len());
        if let Some(reply) = one(shared, conn, vm, args, pending) {
            if let Some(from) = own_first {
                pubsub::send_own_messages(conn, from);
            }
            send(shared, conn, &reply);
        }
        if conn.tracking.is_some() {
            tracking::command_done(conn, keeps_caching);
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
pub(super) fn send(shared: &Shared, conn: &mut Connection, reply: &Reply) {
    if let Reply::Error(text) = reply {
        shared.loops[conn.home.at].command_stats.error(text);
    }
    if sending(conn) {
        reply.encode(conn.protocol, &mut conn.output);
    }
}

/// Whether the next reply is sent (CLIENT REPLY OFF and SKIP drop it); a skip is used up.
pub(super) fn sending(conn: &mut Connection) -> bool {
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
            // Its confirmations are sent whatever CLIENT REPLY said, as Redis sends them;
            // a SKIP is used up by this command all the same, not by the next one.
            let _ = sending(conn);
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
pub(super) fn record_run(
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
        conn.queue(args);
        return Some(Reply::Status("QUEUED".into()));
    }
    let started = Instant::now();
    conn.active_at(started);
    if eval::is_eval(command) {
        // Before the script, whose calls are shown after it (as `lua`).
        monitored(shared, conn, command, &args);
    }
    let reply = match command.name {
        "multi" => Some(transaction::multi(conn)),
        "exec" => transaction::exec(shared, conn, vm, pending),
        "discard" => Some(transaction::discard(conn)),
        "watch" => Some(transaction::watch(shared, conn, &args)),
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
pub(super) fn remember_reads(
    shared: &Shared,
    conn: &mut Connection,
    command: &Command,
    args: &[Vec<u8>],
) {
    if conn.tracking.is_some() && (command.is_read_only() || eval::is_eval(command)) {
        let keys = command.named_keys(args);
        shared.tracking.remember(&shared.client_list, conn, keys);
    }
}

/// After `conn`'s write to the keys of `args`: the invalidations due to tracking clients,
/// sent after the pass's durability wait like its replies.
pub(super) fn invalidate(
    shared: &Shared,
    conn: &mut Connection,
    command: &Command,
    args: &[Vec<u8>],
) {
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
    let args = match command.name {
        "xread" | "xreadgroup" => with_blocked_count(args, command.name == "xreadgroup"),
        _ => args,
    };
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
    if is_nil(&reply) {
        if !last {
            return false;
        }
        // A wait that ends with nothing is answered a nil array whatever the command's own
        // nil (BLMOVE's and BRPOPLPUSH's is a nil bulk string), as Redis answers a timed
        // out client.
        send(shared, conn, &Reply::NullArray);
        return true;
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
