//! One event-loop thread: accept, read, execute, wait for durability once, write.
//!
//! # Spreading connections
//!
//! Every worker polls the one listening socket, and the first to wake used to accept every
//! connection waiting: a client that opens its connections in a burst (redis-benchmark opens
//! all 50 before sending anything) had them all served by one thread while the others idled.
//! So the worker that accepts a connection gives it to the workers in turn (a shared
//! round-robin counter): it keeps its own turns and hands the others over through the
//! receiver's [`LoopState`] queue, waking that worker's poll. INFO's `clients` section tells
//! how many connections each loop serves (`tailstore_clients_per_loop`). A server may listen
//! on several sockets, plain TCP, TLS (`serve --tls-listen`) and a Unix socket (`serve
//! --unixsocket`): every worker polls them all, and a connection handed over carries
//! whether it speaks TLS.
//!
//! # Polling before blocking
//!
//! A loop with nothing ready sleeps in `epoll_wait`, and the next request then pays for
//! waking it: the kernel's wake-up of a sleeping thread, often on a processor that has gone
//! idle, is several microseconds of a SET round trip that is about 20 µs in all with one
//! client on loopback. So a loop whose last pass served requests first polls without
//! sleeping for up to `ServerConfig::poll_spin` (50 µs by default), yielding the processor
//! between polls so that runnable threads — the log writer, a client on the same core —
//! are not held up; only then does it sleep. A client that keeps a conversation going finds
//! the loop awake; an idle server never polls. The cost is at most one window of CPU per
//! pause in the traffic. Measured in ARCHITECTURE.md, decision 52.
//!
//! # Messages ahead of the commands sent after them
//!
//! Other loops hand this one messages for its connections (published messages,
//! invalidations of tracked keys, MONITOR lines) through its [`LoopState`] queue, before
//! they answer the command that caused them. A client that has seen that answer and then
//! sends a command here (CLIENT TRACKING's readers rely on it: "the writer was answered,
//! PING, and every invalidation of its write came before PONG") must get the messages
//! before the reply, as from Redis, whose one thread appends them to the output at once.
//! So each pass takes the queue after reading its connections and before running any
//! command: a command read in this pass was sent after any message queued before the read,
//! and the take comes after the read. Taking the queue only when the poll reported the
//! waker, as the loop once did, misses a message queued between the poll and the read: the
//! command then runs first, and its reply overtakes the message (`tracking.rs`'s
//! `caching_readers_end_each_round_with_no_stale_copy` caught it once, under load). CLIENT
//! KILL's requests are taken at the same point, so a client killed before it sent what the
//! pass just read runs none of it, as Redis, which frees a killed client at once.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token, Waker};
use tailstore_engine::PendingCommit;
use tailstore_resp::{Limits, Reply};

use super::blocking::{DbKey, FoundEmpty};
use super::connection::{Connection, Traffic};
use super::dispatch;
use super::interleave::{self, Point};
use super::plant::Plant;
use super::pubsub::{self, Message, Subscriber, PUBSUB_OUTPUT_LIMIT};
use super::socket::{Listener, Socket};
use super::tls::Tls;
use super::Shared;
use crate::script::Vm;

/// The token of a worker's [`LoopState`] waker; its listening sockets follow, then its
/// connections.
const HANDOFF: Token = Token(0);
/// The most unsent output a connection that has not authenticated may leave before it is
/// closed: Redis's limit (its 16 KiB reply buffer and 1 KiB beyond).
const UNAUTHENTICATED_OUTPUT: usize = 17 * 1024;
/// How long a poll waits when nothing is ready, so that a stop request is noticed.
const IDLE: Duration = Duration::from_millis(100);

/// What other threads see of one worker: the connections other workers accepted for it
/// (see "Spreading connections"), the keys written that its blocked clients wait on
/// (`server/blocking.rs`) and how many connections it serves.
pub struct LoopState {
    /// Its commands' figures (`server/command_stats.rs`).
    pub command_stats: super::command_stats::CommandStats,
    incoming: parking_lot::Mutex<Vec<Accepted>>,
    woken: parking_lot::Mutex<Vec<DbKey>>,
    /// Published messages for its subscribed connections (`server/pubsub.rs`).
    messages: parking_lot::Mutex<Vec<(Token, Message)>>,
    /// Its connections CLIENT KILL closes, with their ids (`server/clients.rs`).
    kills: parking_lot::Mutex<Vec<(Token, u64)>>,
    /// Its blocked connections CLIENT UNBLOCK ends, with their ids and whether with an
    /// error (else as if their timeout had come).
    unblocks: parking_lot::Mutex<Vec<(Token, u64, bool)>>,
    waker: Waker,
    /// Connections the worker serves, for INFO.
    pub serving: AtomicUsize,
    /// Bytes its connections read and wrote, for INFO (`total_net_input_bytes`…), and the
    /// times they were read from and written to (`total_reads_processed`…).
    net_input: AtomicU64,
    net_output: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
}

impl LoopState {
    /// Counts what its connections read and wrote.
    fn count_traffic(&self, traffic: Traffic) {
        self.net_input.fetch_add(traffic.read, Ordering::Relaxed);
        self.net_output
            .fetch_add(traffic.written, Ordering::Relaxed);
        self.reads.fetch_add(traffic.reads, Ordering::Relaxed);
        self.writes.fetch_add(traffic.writes, Ordering::Relaxed);
    }

    /// What its connections read and wrote since the server started.
    pub fn traffic(&self) -> Traffic {
        Traffic {
            read: self.net_input.load(Ordering::Relaxed),
            written: self.net_output.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
        }
    }

    /// The state of the worker that will poll `poll`.
    pub fn new(poll: &Poll) -> io::Result<LoopState> {
        Ok(LoopState {
            command_stats: super::command_stats::CommandStats::default(),
            incoming: parking_lot::Mutex::new(Vec::new()),
            woken: parking_lot::Mutex::new(Vec::new()),
            messages: parking_lot::Mutex::new(Vec::new()),
            kills: parking_lot::Mutex::new(Vec::new()),
            unblocks: parking_lot::Mutex::new(Vec::new()),
            waker: Waker::new(poll.registry(), HANDOFF)?,
            serving: AtomicUsize::new(0),
            net_input: AtomicU64::new(0),
            net_output: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        })
    }

    fn give(&self, accepted: Accepted) -> io::Result<()> {
        self.incoming.lock().push(accepted);
        self.waker.wake()
    }

    fn take(&self) -> Vec<Accepted> {
        std::mem::take(&mut *self.incoming.lock())
    }

    /// Hands the worker a key written that some client of its waits on, and wakes it.
    pub fn wake_for(&self, key: DbKey) {
        self.woken.lock().push(key);
        self.wake();
    }

    /// Hands the worker a message for its connection `token`, and wakes it.
    pub fn deliver(&self, token: Token, message: Message) {
        self.messages.lock().push((token, message));
        self.wake();
    }

    /// Asks the worker to close its connection `token` if it is still client `id`.
    pub fn kill(&self, token: Token, id: u64) {
        self.kills.lock().push((token, id));
        self.wake();
    }

    /// Asks the worker to end the block of its connection `token` if it is still client
    /// `id` and still blocked: with Redis's UNBLOCKED error if `error`, else as at its
    /// timeout.
    pub fn unblock(&self, token: Token, id: u64, error: bool) {
        self.unblocks.lock().push((token, id, error));
        self.wake();
    }

    pub fn wake(&self) {
        if let Err(err) = self.waker.wake() {
            // What was queued waits for the loop's next wake; a loop with blocked clients
            // also takes its keys on every pass, at most `IDLE` apart.
            eprintln!("tailstore serve: waking an event loop failed: {err}");
        }
    }

    fn take_woken(&self) -> Vec<DbKey> {
        std::mem::take(&mut *self.woken.lock())
    }
}

/// A socket the server accepts connections on.
pub struct Endpoint {
    pub listener: Listener,
    /// Whether its connections speak TLS (with `ServerConfig::tls`).
    pub tls: bool,
}

/// A blocked client to run again in a pass: whether it is its last run (its deadline
/// passed), and whether it is due only because a key it waits on was written (not its
/// deadline, nor its run after it registered).
struct Due {
    token: Token,
    last: bool,
    only_woken: bool,
}

/// A connection just accepted, on its way to the worker whose turn it is.
struct Accepted {
    stream: Socket,
    /// Its peer's address as CLIENT LIST shows it.
    peer: String,
    tls: bool,
}

pub struct Worker {
    shared: Arc<Shared>,
    /// This worker's place in `shared.loops`.
    index: usize,
    poll: Poll,
    /// Polled with the tokens after [`HANDOFF`], in order.
    listeners: Vec<Endpoint>,
    /// Listeners whose accept stopped at a shortage of file descriptors: tried again each
    /// pass (at most `IDLE` apart), since the connections left waiting in their queues bring
    /// no new readiness event.
    accept_later: Vec<usize>,
    /// Whether the last accept met a shortage (said once, not at every retry).
    short: bool,
    connections: HashMap<Token, Connection>,
    next_token: usize,
    /// This worker's blocked connections, the longest-waiting first.
    blocked: BTreeMap<u64, Token>,
    next_block: u64,
    /// Connections blocked in the last pass, to run once more after their registration.
    recheck: Vec<Token>,
    /// This loop's Lua state for EVAL (`crate::script`).
    vm: Vm,
}

impl Worker {
    /// Worker `index`, polling `poll` (whose waker is in `shared.loops[index]`) and
    /// accepting on `endpoints`.
    pub fn new(
        shared: Arc<Shared>,
        index: usize,
        poll: Poll,
        endpoints: Vec<Endpoint>,
    ) -> io::Result<Worker> {
        assert!(
            index < shared.loops.len(),
            "a worker without its loop state"
        );
        let mut listeners = endpoints;
        for (at, endpoint) in listeners.iter_mut().enumerate() {
            poll.registry().register(
                &mut endpoint.listener,
                listener_token(at),
                Interest::READABLE,
            )?;
        }
        let next_token = listener_token(listeners.len()).0;
        Ok(Worker {
            shared,
            index,
            poll,
            listeners,
            accept_later: Vec::new(),
            short: false,
            connections: HashMap::new(),
            next_token,
            blocked: BTreeMap::new(),
            next_block: 1,
            recheck: Vec::new(),
            vm: Vm::default(),
        })
    }

    pub fn run(mut self) -> io::Result<()> {
        interleave::start_pausing(self.index);
        let mut events = Events::with_capacity(1024);
        let mut ready: Vec<Token> = Vec::new();
        while !self.shared.stop.load(Ordering::Relaxed) {
            // A connection held back by its unsent replies waits for its socket to take
            // them (a writable event), not for the next pass: polling it would spin.
            let unread = self
                .connections
                .values()
                .any(|c| c.unread && !c.backlogged());
            let served = !ready.is_empty();
            let sleep = self.sleep_limit();
            self.wait_for_events(&mut events, unread, served, sleep)?;
            interleave::reached(Point::Polled);
            ready.clear();
            for at in std::mem::take(&mut self.accept_later) {
                self.accept(at)?;
            }
            let mut handoff = false;
            for event in events.iter() {
                if let Some(at) = self.listener_at(event.token()) {
                    self.accept(at)?;
                } else if event.token() == HANDOFF {
                    handoff = true;
                    for accepted in self.shared.loops[self.index].take() {
                        self.adopt(accepted)?;
                    }
                    // (Messages and kills are taken in every pass, after its reads: see
                    // `pass`.)
                    self.take_unblocks();
                } else {
                    if event.is_read_closed() || event.is_error() || event.is_priority() {
                        if let Some(conn) = self.connections.get_mut(&event.token()) {
                            conn.read_to_the_end = true;
                        }
                    }
                    ready.push(event.token());
                }
            }
            // Commands a CLIENT PAUSE held back run once it has ended (it ends by itself,
            // which the loop's sleep is bounded by, or by CLIENT UNPAUSE, which wakes it).
            let unpaused = self.shared.pause.ends_at().is_none();
            ready.extend(
                self.connections
                    .iter()
                    .filter(|(_, c)| {
                        (c.unread && !c.backlogged()) || (unpaused && c.postponed.is_some())
                    })
                    .map(|(token, _)| *token),
            );
            let due = if handoff || !self.blocked.is_empty() {
                self.due_blocked()
            } else {
                Vec::new()
            };
            ready.extend(due.iter().map(|d| d.token));
            ready.sort_unstable();
            ready.dedup();
            self.pass(&ready, &due);
        }
        self.shared
            .clients
            .fetch_sub(self.connections.len(), Ordering::Relaxed);
        Ok(())
    }

    /// Fills `events` with what is ready: at once if a connection still has unread input,
    /// else after polling for up to the spin window if the last pass `served` requests (see
    /// "Polling before blocking"), else after sleeping until something is ready or `IDLE`
    /// has passed. The events a poll returns are the ones to serve: mio's polls are
    /// edge-triggered, so an event taken by one poll is not reported again by the next.
    fn wait_for_events(
        &mut self,
        events: &mut Events,
        unread: bool,
        served: bool,
        sleep: Duration,
    ) -> io::Result<()> {
        if unread || sleep.is_zero() {
            return self.poll_once(events, Duration::ZERO);
        }
        let window = self.shared.config.poll_spin;
        if served && !window.is_zero() {
            let start = Instant::now();
            loop {
                self.poll_once(events, Duration::ZERO)?;
                if !events.is_empty() {
                    return Ok(());
                }
                if start.elapsed() >= window {
                    break;
                }
                std::thread::yield_now();
            }
        }
        self.poll_once(events, sleep)
    }

    /// How long the loop may sleep: `IDLE`, less if a blocked client's deadline comes
    /// first, nothing if a client blocked in the last pass is still to be run again. Looks
    /// at every blocked connection of the loop (a timer wheel would not: few block at once).
    fn sleep_limit(&self) -> Duration {
        if !self.recheck.is_empty() {
            return Duration::ZERO;
        }
        let now = Instant::now();
        // Only while a pause may be in force: the scan is not for every pass.
        let pause_end = (self.shared.pause.may_be_active()
            && self.connections.values().any(|c| c.postponed.is_some()))
        .then(|| self.shared.pause.ends_at().unwrap_or(now));
        self.blocked
            .values()
            .filter_map(|token| self.connections.get(token)?.blocked.as_ref()?.deadline)
            .chain(pause_end)
            .map(|deadline| deadline.saturating_duration_since(now))
            .fold(IDLE, Duration::min)
    }

    /// The blocked connections to run again in this pass, the longest-waiting first, each
    /// with whether this is its last run (its deadline passed): those waiting on a key
    /// written since (see `server/blocking.rs`), those blocked in the last pass, and those
    /// whose deadline has come.
    fn due_blocked(&mut self) -> Vec<Due> {
        let woken = self.shared.loops[self.index].take_woken();
        let recheck = std::mem::take(&mut self.recheck);
        let now = Instant::now();
        let mut due = Vec::new();
        for token in self.blocked.values() {
            let Some(blocked) = self.connections.get(token).and_then(|c| c.blocked.as_ref()) else {
                continue;
            };
            let last = blocked.deadline.is_some_and(|deadline| deadline <= now);
            let must = last || recheck.contains(token);
            if must || woken.iter().any(|k| blocked.waits_on(k)) {
                due.push(Due {
                    token: *token,
                    last,
                    only_woken: !must,
                });
            }
        }
        due
    }

    /// One poll; an interrupted one counts as one that found nothing.
    fn poll_once(&mut self, events: &mut Events, timeout: Duration) -> io::Result<()> {
        match self.poll.poll(events, Some(timeout)) {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {
                events.clear();
                Ok(())
            }
            outcome => outcome,
        }
    }

    /// Serves the connections in `ready`: the blocked ones `due` to run again first, the
    /// longest-waiting first; then every command they sent; then one durability wait; then
    /// their replies.
    fn pass(&mut self, ready: &[Token], due: &[Due]) {
        let shared = self.shared.clone();
        let mut pending: Vec<PendingCommit<'_>> = Vec::new();
        let mut dead: Vec<Token> = Vec::new();
        let mut ended: Vec<Token> = Vec::new();
        let planted_early_messages = self.planted_messages_before_reads(ready);
        interleave::reached(Point::BeforeReads);
        let mut traffic = Traffic::default();
        for token in ready {
            let Some(conn) = self.connections.get_mut(token) else {
                continue;
            };
            let filled = conn.fill();
            traffic += conn.take_traffic();
            match filled {
                // A blocked client that went away is closed before its command runs
                // again, so nothing is popped for it (Redis frees it at once too).
                Ok(false) if conn.blocked.is_some() => dead.push(*token),
                Ok(true) => {}
                Ok(false) => ended.push(*token),
                Err(_) => dead.push(*token),
            }
        }
        // After the reads, before any command runs: a message handed to this loop before a
        // command just read was sent goes out ahead of that command's reply (see "Messages
        // ahead of the commands sent after them").
        interleave::reached(Point::AfterReads);
        let messaged = planted_early_messages.unwrap_or_else(|| self.take_messages());
        // Likewise, a client killed before it sent what was just read runs none of it (Redis
        // frees a killed client at once).
        self.take_kills();
        let mut found_empty = FoundEmpty::default();
        for &Due {
            ref token,
            last,
            only_woken,
        } in due
        {
            let Some(conn) = self.connections.get_mut(token) else {
                continue;
            };
            if dead.contains(token) {
                continue;
            }
            let Some(blocked) = conn.blocked.as_ref() else {
                continue;
            };
            if only_woken && found_empty.covers(blocked) {
                continue;
            }
            if !dispatch::retry_blocked(&shared, conn, &mut pending, last) {
                if let Some(blocked) = conn.blocked.as_ref() {
                    found_empty.note(blocked);
                }
            } else {
                let blocked = conn.blocked.take();
                conn.unread = true; // the commands sent after it, read or not
                if let Some(blocked) = blocked {
                    self.blocked.remove(&blocked.order);
                    shared.waiters.unregister(self.index, &blocked);
                    shared.client_list.set_blocked(conn.id, false);
                }
            }
        }
        let mut newly_blocked: Vec<Token> = Vec::new();
        for token in ready {
            if dead.contains(token) {
                continue;
            }
            let Some(conn) = self.connections.get_mut(token) else {
                continue;
            };
            // A client that sends its last commands and shuts its side down
            // (`printf 'GET k\r\n' | nc -N`) still gets them run and answered, as Redis
            // does: the connection closes once everything that arrived before the end of
            // the stream is served (not while backpressure holds some back: a later pass
            // reads the end again and serves the rest) and the replies are written.
            dispatch::serve(&shared, conn, &self.vm, &mut pending);
            interleave::reached(Point::Served);
            conn.closing |= ended.contains(token) && !conn.unread;
            if conn.blocked.as_ref().is_some_and(|b| b.order == 0) {
                newly_blocked.push(*token);
            }
        }
        for token in newly_blocked {
            self.register_blocked(token);
        }
        interleave::reached(Point::BeforeTheWait);
        let durable = if shared.config.planted(Plant::EarlyReply) {
            // The planted bug (a test's, in builds with debug assertions only): reply
            // without waiting.
            drop(pending);
            Ok(())
        } else {
            wait_all(pending)
        };
        let only_messaged = messaged.iter().filter(|t| ready.binary_search(t).is_err());
        let now = Instant::now();
        for token in ready.iter().chain(only_messaged) {
            if dead.contains(token) {
                continue;
            }
            let Some(conn) = self.connections.get_mut(token) else {
                continue;
            };
            if durable.is_err() {
                // Fail-stop: the database refuses writes from now on; no reply of this
                // pass may claim success, so the connection is closed without one (and
                // its messages are not published).
                conn.output.clear();
                conn.published.clear();
                dead.push(*token);
                continue;
            }
            for (who, message) in conn.published.drain(..) {
                shared.loops[who.at].deliver(who.token, message);
                interleave::reached(Point::Delivered);
            }
            let flushed = conn.flush();
            traffic += conn.take_traffic();
            conn.note_buffers(now, None);
            // Checked once the pass has read, parsed and answered what it could: what is
            // held now waits for bytes the client has not sent.
            if past_query_limit(shared.query_limit.load(Ordering::Relaxed), conn) {
                dead.push(*token);
                continue;
            }
            match flushed {
                Ok(true) if conn.closing => dead.push(*token),
                // A client that has not logged in and does not read its refusals is
                // closed, as Redis closes it (CVE-2025-21605), instead of being held to
                // the high-water mark of a client that has.
                Ok(false) if !conn.authenticated && conn.unsent() > UNAUTHENTICATED_OUTPUT => {
                    dead.push(*token)
                }
                Ok(_) => {}
                Err(_) => dead.push(*token),
            }
        }
        shared.loops[self.index].count_traffic(traffic);
        if let Err(message) = durable {
            eprintln!("tailstore serve: durability wait failed, closing the pass's connections: {message}");
        }
        for token in dead {
            self.close(token);
        }
    }

    /// The planted bug (a test's, in builds with debug assertions only; `None` otherwise):
    /// the messages taken before the pass reads its connections, as the loop once took
    /// them, and a pause in between when a tracking or subscribed client is to be read, so
    /// that a write's invalidation (a published message) and that client's next command can
    /// both arrive in that window (`tracking.rs` and `pubsub.rs` must catch it).
    fn planted_messages_before_reads(&mut self, ready: &[Token]) -> Option<Vec<Token>> {
        if !self.shared.config.planted(Plant::MessagesBeforeReads) {
            return None;
        }
        let early = self.take_messages();
        let messaged_kind = |token: &Token| {
            let conn = self.connections.get(token);
            conn.is_some_and(|c| c.tracking.is_some() || c.subscriptions() > 0)
        };
        if ready.iter().any(messaged_kind) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(early)
    }

    /// The place in `listeners` of the socket polled with `token`, if it is one of them.
    fn listener_at(&self, token: Token) -> Option<usize> {
        (0..self.listeners.len()).find(|&at| listener_token(at) == token)
    }

    /// Accepts the connections waiting on `listeners[at]`.
    fn accept(&mut self, at: usize) -> io::Result<()> {
        let tls = self.listeners[at].tls;
        loop {
            let (mut stream, peer) = match self.listeners[at].listener.accept() {
                Ok(accepted) => {
                    self.short = false;
                    accepted
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // That connection's failure: the others queued behind it are accepted
                // (the readiness event that told of them will not come again).
                Err(err) if is_one_connections(&err) => continue,
                Err(err) if is_shortage(&err) => {
                    if !self.short {
                        eprintln!("tailstore serve: accept failed, trying again shortly: {err}");
                    }
                    self.short = true;
                    if !self.accept_later.contains(&at) {
                        self.accept_later.push(at);
                    }
                    return Ok(());
                }
                Err(err) => return Err(err),
            };
            let shared = &self.shared;
            shared.connections_received.fetch_add(1, Ordering::Relaxed);
            if shared.clients.fetch_add(1, Ordering::Relaxed) >= shared.config.max_clients {
                shared.clients.fetch_sub(1, Ordering::Relaxed);
                shared.rejected.fetch_add(1, Ordering::Relaxed);
                if !tls {
                    // (A TLS client would read it as a broken record: it is just closed.)
                    let mut refusal = Vec::new();
                    Reply::error("ERR max number of clients reached")
                        .encode(Default::default(), &mut refusal);
                    let _ = io::Write::write(&mut stream, &refusal);
                }
                continue;
            }
            let loops = &shared.loops;
            let turn = shared.next_worker.fetch_add(1, Ordering::Relaxed) % loops.len();
            let accepted = Accepted { stream, peer, tls };
            if turn == self.index {
                self.adopt(accepted)?;
            } else {
                loops[turn].give(accepted)?;
            }
        }
    }

    /// Starts serving a connection accepted for this worker.
    fn adopt(&mut self, accepted: Accepted) -> io::Result<()> {
        let Accepted {
            mut stream,
            peer,
            tls,
        } = accepted;
        let shared = &self.shared;
        let tls = shared.config.tls.as_ref().filter(|_| tls);
        let session = match tls.map(Tls::session).transpose() {
            Ok(session) => session.map(Box::new),
            Err(err) => {
                // This connection's failure, not the loop's: it is dropped (closed).
                eprintln!("tailstore serve: cannot start a TLS session: {err}");
                shared.clients.fetch_sub(1, Ordering::Relaxed);
                return Ok(());
            }
        };
        stream.set_up();
        let token = Token(self.next_token);
        self.next_token += 1;
        // Readiness at registration is reported too, so a request sent before a handed-over
        // connection is registered is not missed. PRIORITY reports urgent data, at whose mark
        // a read stops short of what is queued (see `Connection::fill`).
        self.poll.registry().register(
            &mut stream,
            token,
            Interest::READABLE | Interest::WRITABLE | Interest::PRIORITY,
        )?;
        let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
        let limits = Limits {
            max_bulk: shared.config.max_bulk,
            ..Limits::default()
        };
        let home = Subscriber {
            at: self.index,
            token,
        };
        let local = stream.local_name();
        let mut conn = Connection::new(stream, id, home, peer, local, limits);
        conn.authenticated = !shared.password.required();
        conn.tls = session;
        shared.client_list.update(&conn);
        self.connections.insert(token, conn);
        shared.loops[self.index]
            .serving
            .store(self.connections.len(), Ordering::Relaxed);
        Ok(())
    }

    /// Appends the messages handed to this loop for its connections (published messages,
    /// invalidations, MONITOR lines) to their output, and answers their tokens, for the
    /// pass to write them out. A subscriber whose unsent output passed
    /// `PUBSUB_OUTPUT_LIMIT` is disconnected, as Redis does.
    fn take_messages(&mut self) -> Vec<Token> {
        let messages = std::mem::take(&mut *self.shared.loops[self.index].messages.lock());
        let mut messaged = Vec::new();
        let mut slow = Vec::new();
        for (token, message) in messages {
            let Some(conn) = self.connections.get_mut(&token) else {
                continue; // closed since it subscribed
            };
            if conn.unsent() > PUBSUB_OUTPUT_LIMIT || conn.backlog.overflowed() {
                slow.push(token);
                continue;
            }
            if let Some(frame) = message.frame_for(conn) {
                frame.encode(conn.protocol, &mut conn.output);
                messaged.push(token);
            }
        }
        slow.sort_unstable();
        slow.dedup();
        for token in slow {
            eprintln!("tailstore serve: a subscriber left {PUBSUB_OUTPUT_LIMIT} bytes of messages unread; disconnected");
            self.close(token);
        }
        messaged.sort_unstable();
        messaged.dedup();
        messaged
    }

    /// Registers a connection that blocked in this pass (see `server/blocking.rs`, "Why no
    /// wake-up is lost"): its command runs once more in the next pass.
    fn register_blocked(&mut self, token: Token) {
        let Some(conn) = self.connections.get_mut(&token) else {
            return;
        };
        let Some(blocked) = conn.blocked.as_mut() else {
            return;
        };
        blocked.order = self.next_block;
        self.next_block += 1;
        self.shared.waiters.register(self.index, blocked);
        self.shared.client_list.set_blocked(conn.id, true);
        self.blocked.insert(blocked.order, token);
        self.recheck.push(token);
    }

    /// Closes the connections CLIENT KILL named, those still the clients it meant.
    fn take_kills(&mut self) {
        let kills = std::mem::take(&mut *self.shared.loops[self.index].kills.lock());
        for (token, id) in kills {
            if self.connections.get(&token).is_some_and(|c| c.id == id) {
                self.close(token);
            }
        }
    }

    /// Makes the blocked connections CLIENT UNBLOCK named due now (`due_blocked` picks
    /// them in this pass), those still the clients it meant and still blocked.
    fn take_unblocks(&mut self) {
        let unblocks = std::mem::take(&mut *self.shared.loops[self.index].unblocks.lock());
        let now = Instant::now();
        for (token, id, error) in unblocks {
            let Some(conn) = self.connections.get_mut(&token).filter(|c| c.id == id) else {
                continue;
            };
            if let Some(blocked) = conn.blocked.as_mut() {
                blocked.deadline = Some(now);
                blocked.unblocked_with_error = error;
            }
        }
    }

    fn close(&mut self, token: Token) {
        if let Some(mut conn) = self.connections.remove(&token) {
            if let Some(blocked) = conn.blocked.take().filter(|b| b.order != 0) {
                self.blocked.remove(&blocked.order);
                self.shared.waiters.unregister(self.index, &blocked);
            }
            pubsub::unsubscribe_all(&self.shared, &mut conn);
            self.shared.tracking.disable(&mut conn);
            if conn.monitoring {
                self.shared.monitors.remove(conn.home);
            }
            conn.close_tls();
            let _ = self.poll.registry().deregister(&mut conn.stream);
            self.shared.clients.fetch_sub(1, Ordering::Relaxed);
            self.shared.client_list.remove(conn.id);
            self.shared.loops[self.index]
                .serving
                .store(self.connections.len(), Ordering::Relaxed);
        }
    }
}

/// The token a worker polls its listening socket `at` with.
fn listener_token(at: usize) -> Token {
    Token(HANDOFF.0 + 1 + at)
}

/// Whether `conn` holds more than `limit` bytes for commands it has not finished sending
/// or that have not run (Redis's `client-query-buffer-limit`); if so it is logged, as Redis
/// logs the client it closes for that, for the caller to close it.
fn past_query_limit(limit: usize, conn: &Connection) -> bool {
    let held = conn.query_bytes();
    if held <= limit {
        return false;
    }
    eprintln!(
        "tailstore serve: closing client that reached max query buffer length: id={} addr={} \
         ({held} bytes held, limit {limit})",
        conn.id, conn.peer
    );
    true
}

/// Waits for every commit of the pass, the highest LSN first (so the rest return at once).
fn wait_all(mut pending: Vec<PendingCommit<'_>>) -> Result<(), String> {
    pending.sort_unstable_by_key(|p| std::cmp::Reverse(p.lsn()));
    let mut outcome = Ok(());
    for commit in pending {
        if let Err(err) = commit.wait() {
            if outcome.is_ok() {
                outcome = Err(err.to_string());
            }
        }
    }
    outcome
}

/// Accept errors that concern the one connection being accepted, not the listener.
fn is_one_connections(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

/// Accept errors of a shortage that passes (file descriptors, the kernel's memory).
fn is_shortage(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(EMFILE | ENFILE | ENOBUFS | ENOMEM))
}

/// Linux's "too many open files" (per process, system-wide): a shortage that passes.
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;
/// Linux's "no buffer space" and "out of memory" from accept.
const ENOBUFS: i32 = 105;
const ENOMEM: i32 = 12;
