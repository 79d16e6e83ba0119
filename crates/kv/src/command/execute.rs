//! Running data commands as engine transactions: one command, or an EXEC block, retried
//! while the engine reports a conflict, committed without waiting so the server can share
//! one durability wait among every reply of an event-loop pass.

use std::time::{Duration, Instant};

use tailstore_engine::{EngineError, PendingCommit};
use tailstore_resp::Reply;

use super::{Command, Ctx, Fault, Outcome, Run};
use crate::keyspace::notifications::KeyEvent;
use crate::keyspace::watches::WatchToken;
use crate::keyspace::Keyspace;

/// Attempts before a conflicting command gives up (each one is a real abort: with per-key
/// conflicts only, running out takes a key hammered by many clients at once).
const ATTEMPTS: usize = 1000;

/// Conflicts after which a transaction's next attempt runs alone, under the map of
/// databases' exclusive hold: no other transaction starts or commits meanwhile, so it
/// cannot conflict again. One conflict suffices for an attempt that ran [`LONG_ATTEMPT`]
/// or more: a long read (KEYS, DBSIZE, a script's loop) overlaps some commit of the active
/// expiry or of a writer almost every time, and ran 10–20 times over before this.
const ALONE_AFTER: usize = 3;
const LONG_ATTEMPT: Duration = Duration::from_millis(5);

/// Why [`Keyspace::run_retried`] gave up.
enum Failure {
    /// The body's or the engine's error that retrying cannot cure.
    Fault(Fault),
    /// The command's own error reply, and the key events it told before it (only key
    /// misses: a command checks what can fail before it writes), which Redis publishes as
    /// it looks keys up.
    Answered { reply: Reply, events: Vec<KeyEvent> },
    /// Every attempt conflicted: the last torn read and the last abort, if any.
    Exhausted {
        torn: Option<String>,
        abort: Option<EngineError>,
    },
}

/// A transaction committed without waiting: what its body answered, the commit to wait
/// for, and its key events.
struct Committed<'db, T> {
    value: T,
    pending: PendingCommit<'db>,
    events: Vec<KeyEvent>,
}

/// A command's reply and the commit to wait for before sending it.
pub struct Executed<'db> {
    pub reply: Reply,
    /// `None` only when the database refused to run anything (its error is the reply).
    pub pending: Option<PendingCommit<'db>>,
    /// Whether the transaction committed (false: it was undone, and the reply says why).
    pub committed: bool,
    /// Its key events, to publish once it is durable (none unless it committed).
    pub events: Vec<KeyEvent>,
}

/// Whether a transaction's read lookups count (INFO's `keyspace_hits` and
/// `keyspace_misses`, `keymiss` events): a client's commands' do; the server's own work's
/// (the active expiry, the lazy free) does not, nor a blocked command's runs after its
/// first (Redis looks its keys up when the command comes, and serves it later from the
/// key it wakes on).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum CountLookups {
    Yes,
    No,
}

/// A key watched by WATCH: its version then (`None`: absent). The watch lasts as long as
/// this does (see `keyspace::watches`).
pub struct Watched {
    pub db: u32,
    pub key: Vec<u8>,
    pub version: Option<i64>,
    /// The version of the key's row, expired or not: one that appears or changes, though it
    /// has expired by EXEC, was written meanwhile (Redis: the write touched the key).
    stored_version: Option<i64>,
    /// The deletions counted in the key's bucket when it was watched (see
    /// `WatchGate::deletions`), for a key that was absent.
    deletions: u64,
    /// How many times the database's stored number had changed (`Keyspace::map_epoch`):
    /// once it changes, the version and the deletions above describe another stored
    /// database, and EXEC fails. Redis fails it only if the key existed in either database
    /// of the SWAPDB (or in the flushed one), or was written after; which keys existed then
    /// is not known here, so an absent key watched across a SWAPDB or a flush fails EXEC
    /// too: an abort the client retries, never a block that runs after a change.
    map_epoch: u64,
    _live: WatchToken,
}

/// What an EXEC block is made of: data commands and, in between, connection commands the
/// server answers itself (PING, SELECT…), through [`BlockStep::Server`], and scripts.
pub enum BlockStep<'a> {
    /// A data command and the database selected when it was queued (SELECT may be queued).
    Data(u32, &'static Command, &'a [Vec<u8>]),
    Server(Reply),
    /// A step the server runs in the block's transaction itself (EVAL).
    Body(&'a mut dyn BlockBody),
    /// SWAPDB, FLUSHDB or FLUSHALL: a change of the map of databases.
    Map(MapChange),
}

/// How one step of an EXEC block ran ([`Keyspace::execute_block_timed`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct StepRun {
    pub took: Duration,
    /// Where its key events begin in the block's ([`Executed::events`]): each step's run
    /// up to the next one's start.
    pub events_from: usize,
}

/// A change of the map of databases queued in MULTI or called by a script
/// (`keyspace::databases`): the block or script runs under the map's exclusive hold, and
/// the commands after it see the change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapChange {
    /// FLUSHDB (`Some(db)`) or FLUSHALL (`None`).
    Flush(Option<u32>),
    Swap(u32, u32),
}

/// Work of the server's that runs in an EXEC block's transaction, like a data command.
pub trait BlockBody {
    /// One run in `ctx`'s transaction (again, from the start, after a conflict).
    fn run(&mut self, ctx: &mut Ctx<'_, '_>) -> Outcome;
}

impl Keyspace {
    /// Runs one data command in the selected database `db`.
    pub fn execute(&self, db: u32, command: &Command, args: &[Vec<u8>]) -> Executed<'_> {
        self.execute_counting(db, command, args, CountLookups::Yes)
    }

    /// [`Keyspace::execute`], its read lookups counted or not.
    pub fn execute_counting(
        &self,
        db: u32,
        command: &Command,
        args: &[Vec<u8>],
        counted: CountLookups,
    ) -> Executed<'_> {
        let Run::Data(handler) = command.run else {
            return self.refuse(Reply::error("ERR not a data command"));
        };
        self.run_counting(db, counted, |ctx| ctx.run(command, handler, args))
    }

    /// Runs an EXEC block as one transaction: `NullArray` if a watched key changed, else
    /// the array of the commands' replies (a command's error reply does not stop the rest).
    pub fn execute_block(&self, steps: &mut [BlockStep<'_>], watched: &[Watched]) -> Executed<'_> {
        let mut runs = vec![StepRun::default(); steps.len()];
        self.execute_block_timed(steps, watched, &mut runs)
    }

    /// [`Keyspace::execute_block`], with how each step ran in the attempt that ended the run
    /// in `runs` (INFO `commandstats` counts the commands of a block one by one, and each
    /// step's key events are published in its place).
    pub fn execute_block_timed(
        &self,
        steps: &mut [BlockStep<'_>],
        watched: &[Watched],
        runs: &mut [StepRun],
    ) -> Executed<'_> {
        assert_eq!(steps.len(), runs.len(), "a run per step");
        self.run_for_client(0, |ctx| run_block(ctx, steps, watched, runs))
    }

    /// Runs `body` as one transaction for a client, committed without waiting for
    /// durability: the caller waits before sending the reply (also a script's runner). A
    /// body that changes the map of databases (SWAPDB, FLUSHDB or FLUSHALL in an EXEC block
    /// or a script) runs again under the map's exclusive hold.
    pub fn run_for_client(
        &self,
        db: u32,
        body: impl FnMut(&mut Ctx<'_, '_>) -> Outcome,
    ) -> Executed<'_> {
        self.run_counting(db, CountLookups::Yes, body)
    }

    /// [`Keyspace::run_for_client`], its read lookups counted or not.
    fn run_counting(
        &self,
        db: u32,
        counted: CountLookups,
        mut body: impl FnMut(&mut Ctx<'_, '_>) -> Outcome,
    ) -> Executed<'_> {
        match self.run_retried(db, counted, &mut body) {
            Err(Failure::Fault(Fault::MapHoldNeeded)) => self.run_holding_map(db, counted, body),
            outcome => self.executed(outcome),
        }
    }

    /// [`Keyspace::run_for_client`] under the map's exclusive hold: the body changes the map
    /// as it runs, so that what it does after a change sees it; each attempt starts from
    /// the map as it was, and a body that did not commit leaves it so.
    fn run_holding_map(
        &self,
        db: u32,
        counted: CountLookups,
        mut body: impl FnMut(&mut Ctx<'_, '_>) -> Outcome,
    ) -> Executed<'_> {
        let (_exclusive, before) = self.hold_map_for_change();
        let outcome = self.run_retried(db, counted, |ctx| {
            ctx.ks.set_map(&before);
            body(ctx)
        });
        let executed = self.executed(outcome);
        if !executed.committed {
            self.set_map(&before);
        }
        executed
    }

    /// A client's reply and commit from its transaction's outcome.
    fn executed<'db>(&'db self, outcome: Result<Committed<'db, Reply>, Failure>) -> Executed<'db> {
        match outcome {
            Ok(Committed {
                value: reply,
                pending,
                events,
            }) => Executed {
                reply,
                pending: Some(pending),
                committed: true,
                events,
            },
            Err(Failure::Fault(fault)) => self.refuse(fault_reply(fault)),
            Err(Failure::Answered { reply, events }) => Executed {
                events,
                ..self.refuse(reply)
            },
            Err(Failure::Exhausted { torn, .. }) => self.refuse(exhausted_reply(torn)),
        }
    }

    /// Runs `body` in database `db` as a transaction of its own, committed and durable on
    /// return: for work no client waits on (FLUSHDB batches, the active expiry, the lazy
    /// free). An error reply of `body` is reported as an engine error.
    pub(crate) fn run_internal<T>(
        &self,
        db: u32,
        body: impl FnMut(&mut Ctx<'_, '_>) -> Result<T, Fault>,
    ) -> Result<T, EngineError> {
        match self.run_retried(db, CountLookups::No, body) {
            Ok(Committed { value, pending, .. }) => pending.wait().map(|()| value),
            Err(Failure::Fault(fault)) => Err(fault.into_engine_error()),
            Err(Failure::Answered { reply, .. }) => Err(Fault::Reply(reply).into_engine_error()),
            Err(Failure::Exhausted {
                torn: Some(detail), ..
            }) => Err(Fault::corruption(&detail)),
            Err(Failure::Exhausted { abort, .. }) => Err(abort.unwrap_or_else(|| {
                EngineError::Corrupt("kv: transaction retried without an abort".into())
            })),
        }
    }

    /// The one retry loop: runs `body` in a transaction and commits it without waiting,
    /// again (with back-off) while the engine reports a conflict or the reads saw two
    /// commits at once (`Fault::Torn`), up to [`ATTEMPTS`] times. The counts of the attempt
    /// that ends it are added to INFO's (`keyspace::key_stats`); its read lookups only when
    /// `counted` says so.
    fn run_retried<T>(
        &self,
        db: u32,
        counted: CountLookups,
        mut body: impl FnMut(&mut Ctx<'_, '_>) -> Result<T, Fault>,
    ) -> Result<Committed<'_, T>, Failure> {
        let count = |stats| self.key_stats.add(stats);
        let (mut torn, mut abort) = (None, None);
        let mut rebuilds_removals = false;
        let (mut conflicts, mut last_took, mut alone) = (0, Duration::ZERO, None);
        // Tried once: a transaction inside another's body (a large value's pieces) finds
        // its own thread's shared hold in the way, and would wait for it every attempt.
        let mut may_run_alone = true;
        for attempt in 0..ATTEMPTS {
            let long = conflicts > 0 && last_took >= LONG_ATTEMPT;
            if may_run_alone && (conflicts >= ALONE_AFTER || long) {
                alone = self.hold_to_run_alone();
                may_run_alone = false;
            }
            if alone.is_none() {
                tailstore_engine::pause_before_retry(attempt);
            }
            let began = Instant::now();
            // Held to the commit: one map for the whole transaction (SWAPDB waits).
            let _map = self.hold_databases();
            let mut txn = self.database().begin();
            let mut ctx = Ctx::now(self, &mut txn, db);
            ctx.counts_lookups = counted == CountLookups::Yes;
            ctx.rebuilds_removals = rebuilds_removals;
            let err = match body(&mut ctx) {
                Ok(value) => {
                    // Kept until the changes are applied (see `keyspace::watches`).
                    let mut unwatched = ctx.unwatched.take();
                    let planted = cfg!(debug_assertions) && self.early_gate_release_planted();
                    if planted && unwatched.take().is_some() {
                        // The planted bug (a test's, in builds with debug assertions only):
                        // released before the apply, with time for a WATCH to begin and read
                        // in between.
                        std::thread::sleep(std::time::Duration::from_micros(300));
                    }
                    let _unwatched = unwatched;
                    let _building = std::mem::take(&mut ctx.building);
                    let events = std::mem::take(&mut ctx.events);
                    let stats = ctx.stats;
                    match txn.commit_pending() {
                        Ok(pending) => {
                            count(stats);
                            return Ok(Committed {
                                value,
                                pending,
                                events,
                            });
                        }
                        Err(err) => err,
                    }
                }
                Err(Fault::Engine(err)) => err,
                Err(Fault::Torn(detail)) => {
                    // Retried only while what it read has changed since: rows that do not
                    // fit together in reads that all still hold are stored that way, and
                    // are reported at once (a damaged row made every command on its key
                    // retry for about a second, the event loop and its clients waiting).
                    let settled = txn.reads_still_hold();
                    txn.rollback();
                    match settled {
                        Ok(true) => return Err(Failure::Fault(Fault::Torn(detail))),
                        Ok(false) => torn = Some(detail),
                        Err(err) => return Err(Failure::Fault(Fault::Engine(err))),
                    }
                    (conflicts, last_took) = (conflicts + 1, began.elapsed());
                    continue;
                }
                Err(fault) => {
                    count(ctx.stats.lookups_only());
                    let events = std::mem::take(&mut ctx.events);
                    txn.rollback();
                    return Err(match fault {
                        Fault::Reply(reply) => Failure::Answered { reply, events },
                        fault => Failure::Fault(fault),
                    });
                }
            };
            if is_too_large(&err) && !rebuilds_removals {
                // Once more, large removals rebuilding what they keep (`rebuild.rs`).
                rebuilds_removals = true;
                continue;
            }
            if !err.is_retryable() {
                return Err(Failure::Fault(Fault::Engine(err)));
            }
            abort = Some(err);
            (conflicts, last_took) = (conflicts + 1, began.elapsed());
        }
        Err(Failure::Exhausted { torn, abort })
    }

    /// Runs `body` in a transaction that is rolled back: reads that change nothing and
    /// reveal no write to a client by themselves (WATCH's version, XREAD's `$`).
    pub fn peek<T>(
        &self,
        db: u32,
        body: impl FnOnce(&mut Ctx<'_, '_>) -> Result<T, Fault>,
    ) -> Result<T, Reply> {
        let _map = self.hold_databases();
        let mut txn = self.database().begin();
        let result = body(&mut Ctx::now(self, &mut txn, db));
        txn.rollback();
        result.map_err(fault_reply)
    }

    /// The version WATCH remembers for a key.
    pub fn watch(&self, db: u32, key: &[u8]) -> Result<Watched, Reply> {
        // First: from now on every write of the key gives it a new version.
        let live = self.watches.begin();
        // Under the map's hold (the peek's), so that the count and the rows read agree.
        let (meta, stored, map_epoch, deletions) = self.peek(db, |ctx| {
            let epoch = ctx.ks.map_epoch(db);
            let deletions = ctx.ks.watches.deletions(ctx.ks.stored_db(db), key);
            Ok((ctx.meta(key)?, ctx.stored_meta(key)?, epoch, deletions))
        })?;
        Ok(Watched {
            db,
            key: key.to_vec(),
            version: meta.map(|m| m.version),
            stored_version: stored.map(|m| m.version),
            deletions,
            map_epoch,
            _live: live,
        })
    }

    /// An error reply that must still wait for everything appended so far: the reply may
    /// reveal a write (a WRONGTYPE, a refused NX) that is not durable yet.
    fn refuse(&self, reply: Reply) -> Executed<'_> {
        match self.database().begin().commit_pending() {
            Ok(pending) => Executed {
                reply,
                pending: Some(pending),
                committed: false,
                events: Vec::new(),
            },
            // The database stopped after a failure: nothing commits any more, reads included
            // (what they read may never become durable), and the reply says why.
            Err(err) => Executed {
                reply: engine_reply(&err),
                pending: None,
                committed: false,
                events: Vec::new(),
            },
        }
    }
}

/// The block's reply; `Err` only with an engine error or a torn read (a command's error
/// reply is an element of the array).
fn run_block(
    ctx: &mut Ctx<'_, '_>,
    steps: &mut [BlockStep<'_>],
    watched: &[Watched],
    runs: &mut [StepRun],
) -> Result<Reply, Fault> {
    for watch in watched {
        ctx.db = watch.db;
        let stored_meta = match ctx.stored_meta(&watch.key) {
            Ok(meta) => meta,
            Err(Fault::Reply(_)) => None,
            Err(fault) => return Err(fault),
        };
        let stored_now = stored_meta.as_ref().map(|m| m.version);
        let now = stored_meta
            .filter(|m| !m.is_expired(ctx.now))
            .map(|m| m.version);
        // Created or rewritten since, though expired by now: a write touched the key. (A
        // key already expired when watched and left alone runs, as in Redis.)
        let rewritten = stored_now.is_some() && stored_now != watch.stored_version;
        let stored = ctx.ks.stored_db(watch.db);
        let deleted_since = || ctx.ks.watches.deletions(stored, &watch.key) != watch.deletions;
        let remapped = ctx.ks.map_epoch(watch.db) != watch.map_epoch;
        if remapped || now != watch.version || rewritten || (now.is_none() && deleted_since()) {
            return Ok(Reply::NullArray);
        }
    }
    let mut replies = Vec::with_capacity(steps.len());
    for (step, run) in steps.iter_mut().zip(runs) {
        let started = Instant::now();
        run.events_from = ctx.events.len();
        let reply = match step {
            BlockStep::Server(reply) => reply.clone(),
            BlockStep::Body(body) => step_reply(body.run(ctx))?,
            BlockStep::Data(db, command, args) => match command.run {
                Run::Data(handler) => {
                    ctx.db = *db;
                    step_reply(ctx.run(command, handler, args))?
                }
                Run::Server => Reply::error("ERR not a data command"),
            },
            BlockStep::Map(change) => {
                step_reply(ctx.ks.change_map_in(ctx.txn, *change).map(|()| Reply::ok()))?
            }
        };
        run.took = started.elapsed();
        replies.push(reply);
    }
    Ok(Reply::Array(replies))
}

/// A step's reply in the block's array: its error reply too; `Err` only for what ends the
/// whole block (an engine error, a torn read).
fn step_reply(outcome: Outcome) -> Result<Reply, Fault> {
    match outcome {
        Err(Fault::Reply(reply)) => Ok(reply),
        other => other,
    }
}

fn engine_reply(err: &EngineError) -> Reply {
    match err {
        // The engine's own advice is to reopen the database: for a client, the server.
        EngineError::Stopped(cause) => Reply::error(format!(
            "ERR tailstore: the database stopped accepting writes after a failure ({cause}); \
             restart the server to recover"
        )),
        other => Reply::error(format!("ERR tailstore engine: {other}")),
    }
}

/// The reply once every attempt failed: a conflict, or (when attempts read rows that did
/// not fit together) the corruption that persisted.
fn exhausted_reply(torn: Option<String>) -> Reply {
    match torn {
        Some(detail) => engine_reply(&Fault::corruption(&detail)),
        None => Reply::error("ERR tailstore: transaction kept conflicting with others; retry it"),
    }
}

/// The reply a client gets for a fault.
pub fn fault_reply(fault: Fault) -> Reply {
    match fault {
        Fault::Reply(reply) => reply,
        Fault::Engine(err) => engine_reply(&err),
        Fault::Torn(detail) => engine_reply(&Fault::corruption(&detail)),
        Fault::MapHoldNeeded => engine_reply(&Fault::MapHoldNeeded.into_engine_error()),
    }
}

/// A transaction refused for its size: a command that removes many elements may then fit
/// by rebuilding what it keeps.
fn is_too_large(err: &EngineError) -> bool {
    matches!(
        err,
        EngineError::TooLarge { .. } | EngineError::TooManyPages { .. }
    )
}
