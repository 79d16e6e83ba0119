//! MULTI, EXEC, DISCARD and WATCH: a block queued on its connection and run as one engine
//! transaction, its reply sent element by element so that the connection commands among
//! its commands (answered in their places once it has run) change what follows them as in
//! Redis (decision 176).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tailstore_engine::PendingCommit;
use tailstore_resp::{Protocol, Reply};

use super::acl::User;
use super::admin;
use super::connection::{Connection, Queued};
use super::dispatch::{invalidate, record_run, remember_reads, send, sending};
use super::eval;
use super::functions;
use super::pubsub;
use super::{acl, Shared};
use crate::command::{lookup, Command, MapChange, Run, StepRun};
use crate::keyspace::notifications::KeyEvent;
use crate::script::library::BlockLibraries;
use crate::script::{BlockScripts, Vm};
use crate::{BlockStep, Executed};

pub(super) fn multi(conn: &mut Connection) -> Reply {
    if conn.multi.is_some() {
        return Reply::error("ERR MULTI calls can not be nested");
    }
    conn.begin_multi();
    conn.multi_failed = false;
    Reply::ok()
}

pub(super) fn discard(conn: &mut Connection) -> Reply {
    if conn.multi.take().is_none() {
        return Reply::error("ERR DISCARD without MULTI");
    }
    conn.watched.clear();
    Reply::ok()
}

pub(super) fn watch(shared: &Shared, conn: &mut Connection, args: &[Vec<u8>]) -> Reply {
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
pub(super) fn exec<'s>(
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
    let users = step_users(shared, conn, &queue);
    // Scripts are found and compiled first, and SCRIPT and FUNCTION commands run, in the
    // block's order (an EVALSHA after a SCRIPT LOAD finds its script, an FCALL after a
    // FUNCTION LOAD its function), on the block's views of the script cache and of the
    // libraries, which reach the server's only if the block runs; each script runs, and
    // each change of the libraries is stored, in the block's transaction.
    let mut cache = BlockScripts::new(&shared.scripts);
    let mut libraries = BlockLibraries::new(&shared.libraries);
    let mut scripts: Vec<Result<Ready<'_>, Reply>> = queue
        .iter()
        .zip(&mut took)
        .zip(&users)
        .filter_map(|((queued, took), user)| {
            let command = lookup(&queued.args[0]).filter(|c| prepared_first(c))?;
            let started = Instant::now();
            let views = (&mut cache, &mut libraries);
            let invocation = (command, &queued.args[..]);
            let prepared = prepare(shared, (conn, user), vm, invocation, views);
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
    let mut deferred: Vec<(usize, Invocation<'_>)> = Vec::new();
    let mut db = conn.db;
    for (queued, user) in queue.iter().zip(&users) {
        let Some(command) = lookup(&queued.args[0]) else {
            continue;
        };
        remember_reads(shared, conn, command, &queued.args);
        if let Some(refusal) = exec_denial(user, command, &queued.args) {
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
                Some(Ok(Ready::Script(script))) => BlockStep::Body(script.in_database(db)),
                Some(Ok(Ready::Change(change))) => BlockStep::Body(change),
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
                    deferred.push((steps.len(), (command, &queued.args)));
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
    let mut runs = vec![StepRun::default(); steps.len()];
    let Executed {
        reply,
        pending: commit,
        committed,
        events,
    } = shared
        .ks
        .execute_block_timed(&mut steps, &watched, &mut runs);
    for (took, run) in took.iter_mut().zip(&runs) {
        *took += run.took;
    }
    let wrote = commit.as_ref().is_some_and(PendingCommit::wrote);
    pending.extend(commit);
    let ran = committed && !matches!(reply, Reply::NullArray);
    if ran {
        cache.apply();
        libraries.apply();
    }
    let after = AfterSteps::of(&steps);
    drop(steps);
    // Each step's script, if it has one, in the step's place.
    let mut scripts = scripts.into_iter();
    let mut step_scripts: Vec<Option<Ready<'_>>> = queue
        .iter()
        .map(|queued| {
            lookup(&queued.args[0]).filter(|c| prepared_first(c))?;
            scripts.next().and_then(Result::ok)
        })
        .collect();
    let unsent = match reply {
        Reply::Array(replies) if ran => {
            let block = Block {
                replies,
                deferred: &deferred,
                commands: &ran_commands,
                took: &mut took,
                messages: StepMessages {
                    queue: &queue,
                    databases: &after.databases,
                    events,
                    events_from: runs.iter().map(|run| run.events_from).collect(),
                    scripts: &mut step_scripts,
                },
            };
            answer_block(shared, conn, block);
            None
        }
        other => {
            shared.publish_key_events(events, &mut conn.published);
            Some(other)
        }
    };
    after.apply(shared, conn, &queue, (wrote && committed, ran));
    for ready in step_scripts.into_iter().flatten() {
        if let Ready::Script(script) = ready {
            script.finish(conn, committed);
        }
    }
    unsent
}

/// What a block's steps leave to do once it has run: each data command's database (for
/// MONITOR), the writes to signal to blocked clients and to invalidate for tracking
/// clients, and the changes of the map of databases.
struct AfterSteps {
    /// `None`: a connection or server command, shown in the database selected once it ran.
    databases: Vec<Option<u32>>,
    /// The write commands' databases, commands and places in the block.
    writes: Vec<(u32, &'static Command, usize)>,
    map_changes: Vec<MapChange>,
}

impl AfterSteps {
    fn of(steps: &[BlockStep<'_>]) -> AfterSteps {
        let mut after = AfterSteps {
            databases: Vec::with_capacity(steps.len()),
            writes: Vec::new(),
            map_changes: Vec::new(),
        };
        for (at, step) in steps.iter().enumerate() {
            let db = match step {
                BlockStep::Data(db, command, _) => {
                    if command.is_write() {
                        after.writes.push((*db, *command, at));
                    }
                    Some(*db)
                }
                BlockStep::Map(change) => {
                    after.map_changes.push(*change);
                    None
                }
                _ => None,
            };
            after.databases.push(db);
        }
        after
    }

    /// Signals the writes of the block `queue` (and, if it `wrote` and committed,
    /// invalidates their keys), and applies its map changes if it `ran`.
    fn apply(
        &self,
        shared: &Shared,
        conn: &mut Connection,
        queue: &[Queued],
        (wrote, ran): (bool, bool),
    ) {
        for &(db, command, at) in &self.writes {
            let args = &queue[at].args;
            shared.signal_write(db, command, args);
            if wrote {
                invalidate(shared, conn, command, args);
            }
        }
        if ran {
            for change in &self.map_changes {
                admin::map_changed(shared, conn, *change);
            }
        }
    }
}

/// Whether a queued command is dealt with before its block runs: a script, found and
/// compiled (EVAL, EVALSHA, FCALL…), and SCRIPT and FUNCTION, which change or read the
/// script cache and the libraries those find their code in (the block's views of them,
/// `script::BlockScripts` and `script::library::BlockLibraries`).
fn prepared_first(command: &Command) -> bool {
    eval::is_eval(command) || matches!(command.name, "script" | "function")
}

/// What EXEC's walk before the block makes of a command [`prepared_first`] names, to run
/// in the block's transaction: a script, or a change of the libraries.
enum Ready<'a> {
    Script(eval::Prepared<'a>),
    Change(functions::BlockChange),
}

/// What EXEC's walk before the block makes of a command [`prepared_first`] names: what
/// is to run in the block's transaction, or the command's reply (a refusal, or what a
/// SCRIPT or FUNCTION command answered). A command its user may no longer run is not run.
fn prepare<'a>(
    shared: &'a Shared,
    (conn, user): (&Connection, &Option<Arc<User>>),
    vm: &'a Vm,
    (command, args): Invocation<'a>,
    (cache, libraries): (&mut BlockScripts<'_>, &mut BlockLibraries<'_>),
) -> Result<Ready<'a>, Reply> {
    if let Some(refusal) = exec_denial(user, command, args) {
        return Err(refusal);
    }
    match command.name {
        "script" => Err(eval::script(cache, vm, args)),
        "function" => functions::in_block(shared, vm, args, libraries).map(Ready::Change),
        _ => {
            let found = eval::Found {
                scripts: cache,
                block_libraries: Some(libraries),
            };
            let prepared = eval::Prepared::new(shared, conn, vm, command, args, found)?;
            Ok(Ready::Script(prepared.run_as(user, conn)))
        }
    }
}

/// The refusal of a queued command its `user` (`None`: `default`) may not run when its
/// turn comes (EXEC read the connection's user again).
fn exec_denial(user: &Option<Arc<User>>, command: &Command, args: &[Vec<u8>]) -> Option<Reply> {
    let denial = user.as_ref()?.check(command, args).err()?;
    Some(acl::exec_refusal(&denial))
}

/// The ACL user each queued command runs as (`None`: `default`): the connection's, and
/// from the command after an AUTH or HELLO AUTH that logs in on, the user it logs in as,
/// as Redis's EXEC checks each command against the client's user at its turn. (Connection
/// commands are answered once the block has run, each in its place, the login among them.)
fn step_users(shared: &Shared, conn: &Connection, queue: &[Queued]) -> Vec<Option<Arc<User>>> {
    let mut user = conn.user.clone();
    let mut users = Vec::with_capacity(queue.len());
    for queued in queue {
        users.push(user.clone());
        let login = lookup(&queued.args[0])
            .and_then(|command| admin::requested_login(command, &queued.args));
        if let Some((name, password)) = login {
            if let Some(logged_in) = shared.password.login(&shared.users, name, password) {
                user = logged_in;
            }
        }
    }
    users
}

/// A queued command and its arguments.
type Invocation<'q> = (&'static Command, &'q [Vec<u8>]);

/// A block that ran, to answer: its replies (the deferred commands' places empty), the
/// deferred commands with their places, each step's command (`None`: refused by ACL, not
/// run) and each one's run time so far.
struct Block<'b, 'q> {
    replies: Vec<Reply>,
    deferred: &'b [(usize, Invocation<'q>)],
    commands: &'b [Option<Invocation<'q>>],
    took: &'b mut [Duration],
    messages: StepMessages<'b, 'q>,
}

/// What a block that ran tells others, step by step, in the order Redis tells it: each
/// command's key events, then its line to the monitors (once it ran, as Redis feeds them),
/// then a script's calls, events and PUBLISHes (a deferred PUBLISH's messages are sent as
/// it is answered, in its place).
struct StepMessages<'b, 'q> {
    queue: &'q [Queued],
    databases: &'b [Option<u32>],
    events: Vec<KeyEvent>,
    /// Where each step's events begin in `events`: both are the committed attempt's, so
    /// the marks rise and none lies past the end.
    events_from: Vec<usize>,
    scripts: &'b mut [Option<Ready<'q>>],
}

impl StepMessages<'_, '_> {
    /// The messages of step `at` before its reply: its key events.
    fn before_reply(&mut self, shared: &Shared, conn: &mut Connection, at: usize) {
        let end = self
            .events_from
            .get(at + 1)
            .copied()
            .unwrap_or(self.events.len());
        let events = self.events[self.events_from[at]..end].to_vec();
        if !events.is_empty() {
            shared.publish_key_events(events, &mut conn.published);
        }
    }

    /// The messages of step `at` after its reply: its line to the monitors (a connection
    /// command's in the database selected now, after a SELECT the one it selected), then
    /// its script's, if it ran one.
    fn after_reply(&mut self, shared: &Shared, conn: &mut Connection, at: usize) {
        let args = &self.queue[at].args;
        if let Some(command) = lookup(&args[0]) {
            let db = self.databases[at].unwrap_or(conn.db);
            shared
                .monitors
                .feed(command, db, &conn.peer, args, &mut conn.published);
        }
        if let Some(Ready::Script(script)) = &mut self.scripts[at] {
            conn.published.append(&mut script.take_messages());
        }
    }
}

/// Sends the replies of a block that ran: the array's header, then each reply in order,
/// each connection or server command answered in its place, so that what it changes
/// applies to the replies after it as in Redis: HELLO's protocol, CLIENT REPLY OFF and ON,
/// a (P)SUBSCRIBE's confirmations (sent in its place, however many, as Redis does, so the
/// array holds more than its header says) and the subscribed context's PING. Each reply
/// goes through [`send`] (errors counted for INFO errorstats), and each command that ran
/// is counted in INFO commandstats and the slow log, as Redis counts a block's commands.
fn answer_block(shared: &Shared, conn: &mut Connection, block: Block<'_, '_>) {
    let Block {
        replies,
        deferred,
        commands,
        took,
        mut messages,
    } = block;
    if sending(conn) {
        Reply::encode_array_header(replies.len(), &mut conn.output);
    }
    let mut deferred = deferred.iter().peekable();
    let mut skip_after = false;
    for (at, reply) in replies.into_iter().enumerate() {
        messages.before_reply(shared, conn, at);
        let reply = match deferred.next_if(|(place, ..)| *place == at) {
            Some(&(_, (command, args))) if is_reply_skip(command, args) => {
                // Redis skips the reply of the command after EXEC, not the block's next.
                skip_after = true;
                None
            }
            Some(&(_, (command, args))) => {
                let started = Instant::now();
                let answer = answer_deferred(shared, conn, (command, args));
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
        messages.after_reply(shared, conn, at);
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
fn answer_deferred(
    shared: &Shared,
    conn: &mut Connection,
    (command, args): (&Command, &[Vec<u8>]),
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
    Some(admin::queued(shared, conn, command, args))
}
