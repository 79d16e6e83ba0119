//! One client connection: its buffers, parser and session state.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ServerConnection;
use tailstore_resp::{Limits, Protocol, RequestParser};

use std::collections::BTreeSet;

use super::blocking::Blocked;
use super::pubsub::{Backlog, Message, Subscriber, Target};
use super::socket::Socket;
use super::tls::{receive_records, send_records};
use crate::command::CommandCode;
use crate::Watched;

/// Bytes read from one connection per pass before the others get their turn.
const READ_PER_PASS: usize = 256 * 1024;
/// Above this many bytes in its reply buffer (unsent replies, and a written prefix not yet
/// dropped: see [`Connection::drop_written`]), the connection is not read until they drain:
/// a client that sends without reading cannot make the server buffer without bound.
pub const OUTPUT_HIGH_WATER: usize = 64 * 1024 * 1024;
/// A written prefix of the reply buffer shorter than this is kept until the whole buffer
/// is written (then it is cleared at no cost): dropping it would move the unsent rest.
const KEPT_WRITTEN: usize = 1024 * 1024;
const READ_CHUNK: usize = 16 * 1024;
/// An emptied read buffer larger than this is given back rather than kept for the next read.
const KEPT_INPUT: usize = 1024 * 1024;
/// A reply buffer that a large reply grew past this is given back down to it once the
/// reply is written, rather than kept for the connection's life (a pooled connection that
/// once read a large value would hold its size while idle).
const KEPT_OUTPUT: usize = 1024 * 1024;
/// A blocked connection is read (so that its close is seen) until this many bytes of
/// commands wait behind the blocked one; a client that sends more is closed, as Redis
/// closes one past its query buffer limit. Reading stopped at a limit instead would leave
/// the rest of the stream, and its end, in the socket: a client gone meanwhile would look
/// alive, and a push would pop an element for it that nobody gets.
const BLOCKED_INPUT: usize = 64 * 1024 * 1024;

/// A command queued by MULTI.
pub struct Queued {
    pub args: Vec<Vec<u8>>,
}

impl Queued {
    /// Its share of CLIENT LIST's `multi-mem`, as Redis counts a queued command: its
    /// arguments' bytes and a pointer per argument.
    fn memory(&self) -> usize {
        let pointers = self.args.len() * std::mem::size_of::<usize>();
        self.args.iter().map(Vec::len).sum::<usize>() + pointers
    }
}

/// How long CLIENT LIST's `rbp` keeps the reply buffer's peak, as Redis keeps it.
const PEAK_WINDOW: Duration = Duration::from_secs(5);

pub struct Connection {
    pub stream: Socket,
    pub id: u64,
    /// Its event loop and token there: how PUBLISH names it.
    pub home: Subscriber,
    /// Its pub/sub subscriptions (`server/pubsub.rs`).
    pub channels: BTreeSet<Vec<u8>>,
    pub patterns: BTreeSet<Vec<u8>>,
    pub shard_channels: BTreeSet<Vec<u8>>,
    /// The messages addressed to it and not yet in its output (`server/pubsub.rs`).
    pub backlog: Arc<Backlog>,
    /// Messages this connection's PUBLISHes addressed in this pass: handed to their
    /// subscribers' loops only after the pass's durability wait, like its replies.
    pub published: Vec<(Subscriber, Message)>,
    pub peer: String,
    /// The server's end of the connection (CLIENT KILL LADDR).
    pub local: String,
    /// Read buffer: all of it initialized (zeroed once, when it grows), so that a read
    /// does not clear the room it reads into; `input[parsed..filled]` is unparsed, less
    /// what the parser took of a command not all arrived, which [`Connection::compact`]
    /// drops: an argument read is held as an argument, not in the buffer as well.
    input: Vec<u8>,
    /// Bytes of `input` holding data read from the socket.
    filled: usize,
    /// Bytes of `input` already parsed into commands.
    parsed: usize,
    parser: RequestParser,
    pub output: Vec<u8>,
    /// Bytes of `output` already written.
    written: usize,
    /// The most `output` held when a flush began, since `peak_since` (CLIENT LIST's `rbp`).
    output_peak: usize,
    peak_since: Instant,
    pub protocol: Protocol,
    pub db: u32,
    pub name: Option<Vec<u8>>,
    pub lib_name: Option<Vec<u8>>,
    pub lib_version: Option<Vec<u8>>,
    /// Commands queued since MULTI (`None` outside MULTI): see [`Connection::queue`].
    pub multi: Option<Vec<Queued>>,
    /// The memory of `multi`'s commands (CLIENT LIST's `multi-mem`), added as each is
    /// queued so that noting it at every pass costs nothing; zeroed by MULTI.
    queued_memory: usize,
    /// A command failed to queue: EXEC answers EXECABORT.
    pub multi_failed: bool,
    pub watched: Vec<Watched>,
    /// The blocking command (BLPOP…) the connection waits in: no further command of its
    /// input is run until it is answered (`server/blocking.rs`).
    pub blocked: Option<Blocked>,
    /// The command a CLIENT PAUSE holds back: run, before any later one, once the pause
    /// ends (`server/pause.rs`).
    pub postponed: Option<Vec<Vec<u8>>>,
    /// Close once the output is written (after QUIT or a protocol error).
    pub closing: bool,
    /// The socket had more to read when the pass moved on (edge-triggered polling will
    /// not report it again).
    pub unread: bool,
    /// A poll reported the peer's end of the stream, an error or urgent data: reads go on
    /// until the socket says it has nothing more, never stopping at a short read (see
    /// [`Connection::fill`]).
    pub read_to_the_end: bool,
    /// MONITOR made it a monitor (`server/monitor.rs`): it is sent every command's line.
    pub monitoring: bool,
    /// CLIENT REPLY OFF: no replies are sent until CLIENT REPLY ON.
    pub replies_off: bool,
    /// Replies still to drop: CLIENT REPLY SKIP's own and the next command's.
    pub replies_to_skip: u8,
    /// CLIENT TRACKING's settings, `None` while off (`server/tracking.rs`).
    pub tracking: Option<super::tracking::Mode>,
    /// It may run commands while a password is set: it gave the password, or it connected
    /// while none was set (`server/auth.rs`).
    pub authenticated: bool,
    /// The ACL user it logged in as (`None`: `default`), as of `user_generation`
    /// (`server/acl.rs`).
    pub user: Option<Arc<super::acl::User>>,
    pub user_generation: u64,
    /// The TLS session its bytes pass through, on a server that speaks TLS
    /// (`server/tls.rs`).
    pub tls: Option<Box<ServerConnection>>,
    /// When it connected, and its last command and when that began, for CLIENT LIST's
    /// `age`, `idle` and `cmd`: shared with its listing, which other loops read.
    created: Instant,
    activity: Arc<Activity>,
    /// Bytes read and written since its loop last took them for INFO's totals
    /// ([`Connection::take_traffic`]; under TLS, the plaintext, as Redis counts it).
    traffic: Traffic,
}

/// Bytes a connection read and wrote, and how many times it was read from and written to
/// (Redis's `total_reads_processed` and `total_writes_processed` count the times its
/// event loop handled a client's input and flushed its output).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub read: u64,
    pub written: u64,
    pub reads: u64,
    pub writes: u64,
}

impl std::ops::AddAssign for Traffic {
    fn add_assign(&mut self, other: Traffic) {
        self.read += other.read;
        self.written += other.written;
        self.reads += other.reads;
        self.writes += other.writes;
    }
}

impl Connection {
    pub fn new(
        stream: Socket,
        id: u64,
        home: Subscriber,
        peer: String,
        local: String,
        limits: Limits,
    ) -> Connection {
        let created = Instant::now();
        Connection {
            stream,
            id,
            home,
            channels: BTreeSet::new(),
            patterns: BTreeSet::new(),
            shard_channels: BTreeSet::new(),
            backlog: Arc::default(),
            published: Vec::new(),
            peer,
            local,
            input: Vec::new(),
            filled: 0,
            parsed: 0,
            parser: RequestParser::new(limits),
            output: Vec::new(),
            written: 0,
            output_peak: 0,
            peak_since: created,
            protocol: Protocol::Resp2,
            db: 0,
            name: None,
            lib_name: None,
            lib_version: None,
            multi: None,
            queued_memory: 0,
            multi_failed: false,
            watched: Vec::new(),
            blocked: None,
            postponed: None,
            closing: false,
            unread: false,
            read_to_the_end: false,
            monitoring: false,
            replies_off: false,
            replies_to_skip: 0,
            tracking: None,
            authenticated: true,
            user: None,
            user_generation: 0,
            tls: None,
            created,
            activity: Arc::default(),
            traffic: Traffic::default(),
        }
    }

    /// Reads what the socket has (up to the per-pass share); `Ok(false)` when the peer
    /// closed the connection.
    ///
    /// A read that returns less than the room it was given has emptied the socket's receive
    /// queue, so the next read would only say `WouldBlock`: the loop stops there and saves
    /// that system call (one per pipelined batch under load). Edge-triggered polling loses
    /// nothing by it: every segment that arrives after the read wakes the poll again. Two
    /// things break that rule, and the poll reports both: the end of the stream (a FIN that
    /// came with the data was reported by the poll that led here, and will not be again)
    /// and TCP urgent data (a read stops at the urgent mark, the rest of the stream still
    /// queued). Once a poll has reported either, or an error (`read_to_the_end`), the reads
    /// go on until the socket returns 0 or `WouldBlock`.
    pub fn fill(&mut self) -> io::Result<bool> {
        self.unread = false;
        if self.backlogged() || self.closing {
            self.unread = !self.closing;
            return Ok(true);
        }
        if self.blocked.is_some() && self.filled - self.parsed >= BLOCKED_INPUT {
            return Err(io::Error::other(format!(
                "more than {} MiB of commands sent behind a blocked command",
                BLOCKED_INPUT >> 20
            )));
        }
        self.traffic.reads += 1;
        if self.tls.is_some() {
            return self.fill_through_tls();
        }
        let mut read = 0;
        loop {
            if !self.room_to_read(read) {
                return Ok(true);
            }
            let room = self.input.len() - self.filled;
            match self.stream.read(&mut self.input[self.filled..]) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.filled += n;
                    read += n;
                    self.traffic.read += n as u64;
                    if n < room && !self.read_to_the_end {
                        return Ok(true);
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// [`Connection::fill`] through the TLS session: the plaintext it holds first, then
    /// records from the socket, until the socket has nothing more (a short read proves
    /// nothing here: the session reads records, not what the client sent). A record that
    /// does not decrypt, or a failed handshake, is an error: the session's alert is sent
    /// and the connection closed.
    fn fill_through_tls(&mut self) -> io::Result<bool> {
        let mut read = 0;
        loop {
            if !self.room_to_read(read) {
                return Ok(true);
            }
            let Some(tls) = self.tls.as_deref_mut() else {
                return Ok(true);
            };
            match tls.reader().read(&mut self.input[self.filled..]) {
                // The client's close_notify: the end of its stream.
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.filled += n;
                    read += n;
                    self.traffic.read += n as u64;
                    continue;
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(err),
            }
            match receive_records(tls, &mut self.stream) {
                Ok(0) => return Ok(false),
                Ok(_) => {}
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// Before a read of a pass that has read `read` bytes from this connection: `false`,
    /// and `unread` set for the next pass, once that is [`READ_PER_PASS`]; else room is
    /// made for the read.
    fn room_to_read(&mut self, read: usize) -> bool {
        if read >= READ_PER_PASS {
            self.unread = true;
            return false;
        }
        self.make_room();
        true
    }

    /// Ensures at least [`READ_CHUNK`] bytes of room after the data: first by moving the
    /// unparsed bytes to the front, then by growing the buffer by what is missing (only
    /// that is zeroed, so memory follows the bytes received; `Vec` amortizes the copies).
    fn make_room(&mut self) {
        if self.input.len() - self.filled >= READ_CHUNK {
            return;
        }
        self.compact();
        if self.input.len() - self.filled < READ_CHUNK {
            self.input.resize(self.filled + READ_CHUNK, 0);
        }
    }

    /// The next complete command in the input, if any; parsed under Redis's tighter limits
    /// if the client is `unauthenticated` (it has not given the password a server asks for).
    pub fn next_command(
        &mut self,
        unauthenticated: bool,
    ) -> Result<Option<Vec<Vec<u8>>>, tailstore_resp::ProtocolError> {
        loop {
            if self.parsed == self.filled {
                self.filled = 0;
                self.parsed = 0;
                if self.input.len() > KEPT_INPUT {
                    self.input = Vec::new(); // after a large request
                }
                return Ok(None);
            }
            self.parser.set_unauthenticated(unauthenticated);
            match self.parser.parse(&self.input[self.parsed..self.filled])? {
                None => {
                    self.compact();
                    return Ok(None);
                }
                Some((args, consumed)) => {
                    self.parsed += consumed;
                    if !args.is_empty() {
                        return Ok(Some(args));
                    }
                }
            }
        }
    }

    /// Drops the bytes parsed into commands and those the parser took of the command not
    /// all arrived (its arguments read so far), moving the rest to the front: a long-lived
    /// connection's buffer does not grow, and a command's arguments are not held twice
    /// while it arrives. Once the rest is a bulk's payload, nothing is taken until the
    /// bulk is whole, so a large bulk arriving in many reads is moved at most once.
    fn compact(&mut self) {
        let taken = self.parser.consumed();
        let dropped = self.parsed + taken;
        if dropped == 0 {
            return;
        }
        self.input.copy_within(dropped..self.filled, 0);
        self.filled -= dropped;
        self.parsed = 0;
        self.parser.discard(taken);
        self.shrink_input();
    }

    /// Gives back most of a buffer that a large request grew and that now holds little
    /// (the start of the next command), rather than keep it for the connection's life.
    fn shrink_input(&mut self) {
        if self.input.len() > KEPT_INPUT && self.filled < self.input.len() / 4 {
            self.input.truncate(self.filled.max(KEPT_INPUT));
            self.input.shrink_to_fit();
        }
    }

    /// The bytes held for the commands not yet run: the unparsed input and what the
    /// arguments read of a command not all arrived hold (what the server's query limit,
    /// Redis's `client-query-buffer-limit`, caps).
    pub fn query_bytes(&self) -> usize {
        (self.filled - self.parsed).saturating_add(self.parser.partial_arg_memory())
    }

    /// Channels, patterns and shard channels subscribed to.
    pub fn subscriptions(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard_channels.len()
    }

    /// The subscriptions to channels or to patterns.
    pub fn subscribed(&mut self, target: Target) -> &mut BTreeSet<Vec<u8>> {
        match target {
            Target::Channel => &mut self.channels,
            Target::Pattern => &mut self.patterns,
            Target::Shard => &mut self.shard_channels,
        }
    }

    /// Bytes of output not yet written.
    pub fn unsent(&self) -> usize {
        self.output.len() - self.written
    }

    /// Whether the reply buffer is past the high-water mark. Its written prefix counts:
    /// a client that reads as fast as it pipelines keeps the unsent part below the mark,
    /// and without the prefix counted the buffer would grow by every reply until it
    /// drained.
    pub fn backlogged(&self) -> bool {
        self.output.len() > OUTPUT_HIGH_WATER
    }

    /// The bytes read and written since the last call.
    pub fn take_traffic(&mut self) -> Traffic {
        std::mem::take(&mut self.traffic)
    }

    /// Writes as much of the output as the socket takes; whether everything was written.
    pub fn flush(&mut self) -> io::Result<bool> {
        if self.written < self.output.len() {
            self.traffic.writes += 1;
        }
        self.output_peak = self.output_peak.max(self.output.len());
        if self.tls.is_some() {
            return self.flush_through_tls();
        }
        while self.written < self.output.len() {
            match self.stream.write(&self.output[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n;
                    self.traffic.written += n as u64;
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    self.drop_written();
                    return Ok(false);
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        self.output_written();
        Ok(true)
    }

    /// Every reply is written: the buffer is emptied, and shrunk to [`KEPT_OUTPUT`] if a
    /// large reply grew it past that.
    fn output_written(&mut self) {
        self.output.clear();
        self.written = 0;
        if self.output.capacity() > KEPT_OUTPUT {
            self.output.shrink_to(KEPT_OUTPUT);
        }
    }

    /// After a flush the socket stopped: drops the written prefix of the output once it is
    /// at least [`KEPT_WRITTEN`] and at least as long as the unsent rest. Each byte moved
    /// is then paid for by a byte written before it, so the copying stays linear in the
    /// output; and the buffer stays within twice its unsent part (or that plus
    /// `KEPT_WRITTEN`), where keeping every reply until all were written let a client
    /// that pipelines deeply while it reads grow it by every reply.
    fn drop_written(&mut self) {
        if self.written >= KEPT_WRITTEN && self.written >= self.unsent() {
            self.output.drain(..self.written);
            self.written = 0;
        }
    }

    /// [`Connection::flush`] through the TLS session: the output is handed to the session
    /// as far as its buffer takes it (rustls's default limit), and the session's records
    /// (the handshake's too) are written while the socket takes them.
    fn flush_through_tls(&mut self) -> io::Result<bool> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return Ok(true);
        };
        loop {
            // The records already made go first: a session whose buffer is full takes
            // nothing more, and `taken == 0` below must mean only the handshake's hold.
            if !send_records(tls, &mut self.stream)? {
                self.drop_written();
                return Ok(false);
            }
            let unsent = match self.output.get(self.written..) {
                Some(unsent) if !unsent.is_empty() => unsent,
                _ => {
                    self.output_written();
                    return Ok(true);
                }
            };
            let taken = tls.writer().write(unsent)?;
            self.written += taken;
            self.traffic.written += taken as u64;
            if taken == 0 {
                // An empty session buffer that takes nothing: the handshake has not
                // finished, and the session holds the replies back until the client
                // speaks again (whose reads lead to the next flush).
                return Ok(false);
            }
        }
    }

    /// Ends the TLS session, if any, with a close_notify, sent if the socket takes it now.
    pub fn close_tls(&mut self) {
        if let Some(tls) = self.tls.as_deref_mut() {
            tls.send_close_notify();
            let _ = tls.write_tls(&mut self.stream);
        }
    }

    /// CLIENT LIST's flags that change only when its line is refreshed, as Redis writes
    /// those this server has: P subscribed, then (after where `x` in MULTI and `b` blocked
    /// go, which [`Connection::note_buffers`] notes) t tracking (R its redirect's client
    /// gone, B broadcasting), U on a Unix socket.
    fn flags(&self) -> Flags {
        let tracking = self.tracking.as_ref();
        let later = [
            (tracking.is_some(), 't'),
            (tracking.is_some_and(|m| m.broken_redirect), 'R'),
            (tracking.is_some_and(|m| m.bcast), 'B'),
            (self.stream.is_unix(), 'U'),
        ];
        Flags {
            subscribed: self.subscriptions() > 0,
            later: later
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, f)| *f)
                .collect(),
        }
    }

    /// Notes that a command began at `at` (CLIENT LIST's `idle`).
    pub fn active_at(&self, at: Instant) {
        let ms = at.saturating_duration_since(self.created).as_millis();
        self.activity
            .started_ms
            .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Notes its buffers and its state as the pass leaves them, as of `now` (CLIENT LIST's
    /// `multi`, the `x` and `b` flags, and the buffer fields, `qbuf` to `events`): a
    /// subscriber that does not read shows its growing output to every CLIENT LIST, and a
    /// client in MULTI or a blocking command shows it, as in Redis. `running` is the
    /// command it runs now, if it asks about itself (CLIENT LIST, CLIENT INFO): its
    /// arguments count in `argv-mem` as Redis counts them, as do a blocked command's and
    /// those read of a command not all arrived.
    pub fn note_buffers(&mut self, now: Instant, running: Option<&[Vec<u8>]>) {
        let peak = self.output_peak;
        if now.saturating_duration_since(self.peak_since) >= PEAK_WINDOW {
            self.peak_since = now;
            self.output_peak = self.output.len();
        }
        let buffers = &self.activity.buffers;
        let store = |field: &AtomicU64, value: usize| field.store(value as u64, Ordering::Relaxed);
        let queued = self.multi.as_ref();
        let queued_bytes = queued.map_or(0, |_| self.queued_memory);
        let held = running.or(self.blocked.as_ref().map(|b| b.args.as_slice()));
        let held_bytes = held.map_or(0, |args| args.iter().map(Vec::len).sum());
        let partial_args = self.parser.partial_arg_bytes() + held_bytes;
        store(&buffers.unparsed, self.filled - self.parsed);
        store(&buffers.input_free, self.input.len() - self.filled);
        store(&buffers.partial_args, partial_args);
        store(&buffers.queued_bytes, queued_bytes);
        store(&buffers.output_capacity, self.output.capacity());
        store(&buffers.output_peak, peak);
        store(&buffers.unsent, self.unsent());
        let total = self.input.len() + self.output.capacity() + partial_args + queued_bytes;
        store(&buffers.total, total);
        let queued = queued.map_or(-1, |q| i64::try_from(q.len()).unwrap_or(i64::MAX));
        buffers.queued.store(queued, Ordering::Relaxed);
        buffers
            .blocked
            .store(self.blocked.is_some(), Ordering::Relaxed);
    }

    /// MULTI: the commands after it are queued until EXEC or DISCARD.
    pub fn begin_multi(&mut self) {
        self.multi = Some(Vec::new());
        self.queued_memory = 0;
    }

    /// Queues a command of a MULTI block (nothing outside one).
    pub fn queue(&mut self, args: Vec<Vec<u8>>) {
        if let Some(queue) = self.multi.as_mut() {
            let command = Queued { args };
            self.queued_memory += command.memory();
            queue.push(command);
        }
    }

    /// Notes the command it is running (CLIENT LIST's `cmd`).
    pub fn running(&self, command: CommandCode) {
        self.activity
            .command
            .store(command.bits(), Ordering::Relaxed);
    }

    /// The name of the user it logged in as.
    pub fn user_name(&self) -> std::borrow::Cow<'_, str> {
        self.user
            .as_ref()
            .map_or("default".into(), |u| String::from_utf8_lossy(&u.name))
    }

    /// CLIENT LIST's line for this connection, whose `age`, `idle` and `cmd` are read
    /// whenever it is shown.
    pub fn listing(&self) -> Listing {
        let name = self
            .name
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        let redirect = match &self.tracking {
            None => -1,
            Some(mode) => mode.redirect.map_or(0, |id| id as i64),
        };
        let head = format!(
            "id={} addr={} laddr={} fd={} name={name}",
            self.id,
            self.peer,
            self.local,
            self.stream.as_raw_fd(),
        );
        let middle = format!(
            "db={} sub={} psub={} ssub={}",
            self.db,
            self.channels.len(),
            self.patterns.len(),
            self.shard_channels.len(),
        );
        let tail = format!(
            "user={} redir={redirect} resp={}",
            self.user_name(),
            match self.protocol {
                Protocol::Resp2 => 2,
                Protocol::Resp3 => 3,
            }
        );
        Listing {
            head,
            flags: self.flags(),
            middle,
            tail,
            created: self.created,
            activity: self.activity.clone(),
        }
    }
}

/// What other loops read of a connection as it runs: its latest command, and its buffers
/// as its loop's last pass left them.
struct Activity {
    /// When its latest command began, in ms after the connect.
    started_ms: AtomicU64,
    /// Its [`CommandCode`].
    command: AtomicU32,
    buffers: Buffers,
}

impl Default for Activity {
    fn default() -> Activity {
        Activity {
            started_ms: AtomicU64::new(0),
            command: AtomicU32::new(CommandCode::NONE.bits()),
            buffers: Buffers::default(),
        }
    }
}

/// A connection's buffers in bytes and its state, as its loop's last pass left them
/// ([`Connection::note_buffers`]).
struct Buffers {
    /// Read, not yet parsed (`qbuf`).
    unparsed: AtomicU64,
    /// Room left to read into (`qbuf-free`).
    input_free: AtomicU64,
    /// The arguments read of a command not all arrived (`argv-mem`).
    partial_args: AtomicU64,
    /// Commands queued in MULTI, -1 outside it (`multi`, the `x` flag).
    queued: AtomicI64,
    /// Their memory as Redis counts it (`multi-mem`).
    queued_bytes: AtomicU64,
    /// The reply buffer's size (`rbs`) and the most it held in the last few seconds
    /// (`rbp`).
    output_capacity: AtomicU64,
    output_peak: AtomicU64,
    /// Replies not yet written to the socket (`obl` and `omem`: this server has one reply
    /// buffer, where Redis has a fixed one and a list of blocks, `oll`, always 0 here).
    unsent: AtomicU64,
    /// All of the above's memory (`tot-mem`).
    total: AtomicU64,
    /// Waiting in a blocking command (the `b` flag).
    blocked: AtomicBool,
}

impl Default for Buffers {
    fn default() -> Buffers {
        Buffers {
            unparsed: AtomicU64::new(0),
            input_free: AtomicU64::new(0),
            partial_args: AtomicU64::new(0),
            queued: AtomicI64::new(-1),
            queued_bytes: AtomicU64::new(0),
            output_capacity: AtomicU64::new(0),
            output_peak: AtomicU64::new(0),
            unsent: AtomicU64::new(0),
            total: AtomicU64::new(0),
            blocked: AtomicBool::new(false),
        }
    }
}

impl Buffers {
    /// CLIENT LIST's fields of the buffers, in Redis's order, and `events`.
    fn fields(&self) -> String {
        let load = |field: &AtomicU64| field.load(Ordering::Relaxed);
        let unsent = load(&self.unsent);
        format!(
            "qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={unsent} oll=0 \
             omem={unsent} tot-mem={} events={}",
            load(&self.unparsed),
            load(&self.input_free),
            load(&self.partial_args),
            load(&self.queued_bytes),
            load(&self.output_capacity),
            load(&self.output_peak),
            load(&self.total),
            if unsent > 0 { "rw" } else { "r" },
        )
    }
}

/// CLIENT LIST's flags of a connection's last refresh, around the two its loop notes at
/// each pass (see [`Connection::flags`]).
struct Flags {
    subscribed: bool,
    later: String,
}

impl Flags {
    /// The flags as Redis writes them: P, x, b, then the later ones; N for none.
    fn with(&self, buffers: &Buffers) -> String {
        let in_multi = buffers.queued.load(Ordering::Relaxed) >= 0;
        let blocked = buffers.blocked.load(Ordering::Relaxed);
        let mut flags: String = [(self.subscribed, 'P'), (in_multi, 'x'), (blocked, 'b')]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, f)| *f)
            .collect();
        flags.push_str(&self.later);
        if flags.is_empty() {
            flags.push('N');
        }
        flags
    }
}

/// A connection's CLIENT LIST line as of its last refresh, with what it needs to write its
/// `age`, `idle` and `cmd` as of now.
pub struct Listing {
    head: String,
    flags: Flags,
    middle: String,
    tail: String,
    created: Instant,
    activity: Arc<Activity>,
}

impl Listing {
    /// The line, in Redis's order of fields: `age` and `idle` in seconds.
    pub fn line(&self) -> String {
        let age = self.created.elapsed();
        let started = self.activity.started_ms.load(Ordering::Relaxed);
        let idle = age.saturating_sub(std::time::Duration::from_millis(started));
        let command = CommandCode::from_bits(self.activity.command.load(Ordering::Relaxed));
        let buffers = &self.activity.buffers;
        format!(
            "{} age={} idle={} flags={} {} multi={} {} cmd={} {}",
            self.head,
            age.as_secs(),
            idle.as_secs(),
            self.flags.with(buffers),
            self.middle,
            buffers.queued.load(Ordering::Relaxed),
            buffers.fields(),
            command.full_name(),
            self.tail
        )
    }
}
