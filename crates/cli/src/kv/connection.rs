//! One connection of the load generator: a non-blocking socket that keeps up to `pipeline`
//! requests in flight and matches replies to requests in order (RESP replies come back in
//! the order the requests were sent).
//!
//! The hot path allocates nothing of its own: requests are encoded into a reused output
//! buffer (the key into a reused key buffer, the value copied from bytes built once), replies
//! are parsed out of a reused input buffer, the requests in flight sit in a ring allocated for
//! `pipeline` entries. (What `parse_reply` allocates for the reply itself is the RESP crate's.)
//!
//! Latency of a request is the time from just before the write that sends it to just after
//! the read that brought its reply in; with pipelining each request of a batch is timed on
//! its own, so a reply that waited behind others in the batch counts that wait.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use rustls::ClientConnection;
use tailstore_kv::server::{receive_records, send_records, Socket};
use tailstore_resp::{encode_command, parse_reply, Limits, Value};

use super::workload::{KeyGen, Ratio};
use crate::latency::LatencyRecorder;

/// Bytes of the input buffer to start with; it grows to hold a reply that does not fit.
const INPUT_BUFFER: usize = 64 << 10;
/// The input buffer never grows past this (a reply larger than this is an error).
const MAX_INPUT_BUFFER: usize = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Set,
    Get,
}

struct InFlight {
    sent: Instant,
    op: Op,
}

/// What one thread counted, merged over its connections.
pub struct ThreadStats {
    pub sets: u64,
    pub gets: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Bytes written and read (from the end of the warm-up on).
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub latency: LatencyRecorder,
    /// When the last measured reply arrived.
    pub last_reply: Option<Instant>,
}

impl ThreadStats {
    pub fn new() -> Self {
        ThreadStats {
            sets: 0,
            gets: 0,
            hits: 0,
            misses: 0,
            errors: 0,
            first_error: None,
            tx_bytes: 0,
            rx_bytes: 0,
            latency: LatencyRecorder::new(),
            last_reply: None,
        }
    }

    fn error(&mut self, text: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(text);
        }
    }
}

/// What the connections of one thread share: the workload and the counters.
pub struct ThreadContext<'a> {
    pub ratio: Ratio,
    pub pipeline: usize,
    pub keys: KeyGen,
    pub value: &'a [u8],
    pub limits: Limits,
    /// Requests sent before this are warm-up: not counted.
    pub measure_from: Instant,
    /// False once the run is over: no new requests, only the replies still awaited.
    pub issuing: bool,
    pub stats: ThreadStats,
    /// When the last reply (measured or not) arrived: for detecting a stalled server.
    pub last_progress: Instant,
}

pub struct Connection {
    pub stream: Socket,
    /// The TLS session its bytes pass through (`--tls`; handshake done at connect).
    tls: Option<Box<ClientConnection>>,
    out: Vec<u8>,
    out_pos: usize,
    input: Vec<u8>,
    in_start: usize,
    in_end: usize,
    in_flight: VecDeque<InFlight>,
    /// Requests still to send (`u64::MAX` when the run is timed).
    remaining: u64,
    /// Requests sent so far: picks SET or GET by the ratio.
    sent: u64,
}

impl Connection {
    pub fn new(
        stream: Socket,
        tls: Option<Box<ClientConnection>>,
        pipeline: usize,
        requests: Option<u64>,
    ) -> Self {
        Connection {
            stream,
            tls,
            out: Vec::with_capacity(64 << 10),
            out_pos: 0,
            input: vec![0; INPUT_BUFFER],
            in_start: 0,
            in_end: 0,
            in_flight: VecDeque::with_capacity(pipeline),
            remaining: requests.unwrap_or(u64::MAX),
            sent: 0,
        }
    }

    /// Whether this connection has nothing more to do.
    pub fn is_done(&self, ctx: &ThreadContext<'_>) -> bool {
        self.in_flight.is_empty() && (self.remaining == 0 || !ctx.issuing)
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Tops the requests in flight up to the pipeline depth and sends them.
    pub fn fill(&mut self, ctx: &mut ThreadContext<'_>) -> Result<(), String> {
        if ctx.issuing && self.remaining > 0 && self.in_flight.len() < ctx.pipeline {
            let now = Instant::now();
            while self.in_flight.len() < ctx.pipeline && self.remaining > 0 {
                let op = if ctx.ratio.is_set(self.sent) {
                    Op::Set
                } else {
                    Op::Get
                };
                let key = ctx.keys.next_key();
                match op {
                    Op::Set => encode_command(&[&b"SET"[..], key, ctx.value], &mut self.out),
                    Op::Get => encode_command(&[&b"GET"[..], key], &mut self.out),
                }
                self.in_flight.push_back(InFlight { sent: now, op });
                self.sent += 1;
                self.remaining -= 1;
            }
        }
        self.flush(ctx)
    }

    /// Writes what is pending, until done or the socket is full (then the poller says when
    /// it is writable again).
    pub fn flush(&mut self, ctx: &mut ThreadContext<'_>) -> Result<(), String> {
        if self.tls.is_some() {
            return self.flush_through_tls(ctx);
        }
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err("the server closed the connection".into()),
                Ok(n) => {
                    self.out_pos += n;
                    ctx.stats.tx_bytes += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("cannot send to the server: {e}")),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        Ok(())
    }

    /// [`Connection::flush`] through the TLS session: the requests are handed to the
    /// session as far as its buffer takes them, its records written while the socket takes
    /// them. The bytes counted are the requests' (RESP), as without TLS.
    fn flush_through_tls(&mut self, ctx: &mut ThreadContext<'_>) -> Result<(), String> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return Ok(());
        };
        let failed = |e: io::Error| format!("cannot send to the server: {e}");
        loop {
            // The records already made go first: a session whose buffer is full takes
            // nothing, and stopping there would leave part of a request in `out` with
            // both sockets' queues empty, the server waiting for the rest of it.
            if !send_records(tls, &mut self.stream).map_err(failed)? {
                return Ok(()); // the poller says when the socket takes more
            }
            let unsent = &self.out[self.out_pos..];
            if unsent.is_empty() {
                self.out.clear();
                self.out_pos = 0;
                return Ok(());
            }
            let taken = tls.writer().write(unsent).map_err(failed)?;
            if taken == 0 {
                // The handshake is done (`TlsClient::secure`), so an empty session buffer
                // takes data: a refusal would stall the run, better said now.
                return Err("cannot send to the server: the TLS session takes no data".into());
            }
            self.out_pos += taken;
            ctx.stats.tx_bytes += taken as u64;
        }
    }

    /// Reads what arrived, handles every complete reply, then sends new requests.
    pub fn on_readable(&mut self, ctx: &mut ThreadContext<'_>) -> Result<(), String> {
        if self.tls.is_some() {
            return self.read_through_tls(ctx);
        }
        loop {
            self.make_room()?;
            let space = self.input.len() - self.in_end;
            let n = match self.stream.read(&mut self.input[self.in_end..]) {
                Ok(0) => return Err(self.closed()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("cannot read from the server: {e}")),
            };
            self.in_end += n;
            ctx.stats.rx_bytes += n as u64;
            let now = Instant::now();
            self.take_replies(ctx, now)?;
            // A short read emptied the socket; the poller reports the next arrival.
            if n < space {
                break;
            }
        }
        self.fill(ctx)
    }

    /// [`Connection::on_readable`] through the TLS session: the replies it has decrypted,
    /// then the socket's records, until the socket has nothing more.
    fn read_through_tls(&mut self, ctx: &mut ThreadContext<'_>) -> Result<(), String> {
        loop {
            self.make_room()?;
            let Some(tls) = self.tls.as_deref_mut() else {
                return Ok(());
            };
            match tls.reader().read(&mut self.input[self.in_end..]) {
                Ok(0) => return Err(self.closed()),
                Ok(n) => {
                    self.in_end += n;
                    ctx.stats.rx_bytes += n as u64;
                    self.take_replies(ctx, Instant::now())?;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(format!("cannot read from the server: {e}")),
            }
            match receive_records(tls, &mut self.stream) {
                Ok(0) => return Err(self.closed()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("cannot read from the server: {e}")),
            }
        }
        self.fill(ctx)
    }

    /// Why the run stops when the server closed the connection.
    fn closed(&self) -> String {
        if self.in_flight.is_empty() {
            "the server closed the connection".into()
        } else {
            format!(
                "the server closed the connection with {} request(s) unanswered",
                self.in_flight.len()
            )
        }
    }

    /// Makes room at the end of the input buffer: moves a partial reply to the front, or
    /// grows the buffer when the partial reply fills it.
    fn make_room(&mut self) -> Result<(), String> {
        if self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
        }
        if self.in_end < self.input.len() {
            return Ok(());
        }
        if self.in_start > 0 {
            self.input.copy_within(self.in_start..self.in_end, 0);
            self.in_end -= self.in_start;
            self.in_start = 0;
        } else if self.input.len() < MAX_INPUT_BUFFER {
            let len = self.input.len() * 2;
            self.input.resize(len, 0);
        } else {
            return Err(format!(
                "a reply of more than {} MiB: not what SET or GET return",
                MAX_INPUT_BUFFER >> 20
            ));
        }
        Ok(())
    }

    fn take_replies(&mut self, ctx: &mut ThreadContext<'_>, now: Instant) -> Result<(), String> {
        while self.in_start < self.in_end {
            let parsed = parse_reply(&self.input[self.in_start..self.in_end], &ctx.limits)
                .map_err(|e| format!("the server's reply does not parse: {e}"))?;
            let Some((value, used)) = parsed else {
                break;
            };
            self.in_start += used;
            let request = self
                .in_flight
                .pop_front()
                .ok_or("the server sent a reply to no request")?;
            ctx.last_progress = now;
            record(ctx, request, value, now);
        }
        Ok(())
    }
}

/// Counts one reply to `request`: an error (or a reply of the wrong kind) as an error,
/// never as an operation done, nor in the latencies; only replies to requests sent after
/// the warm-up count.
fn record(ctx: &mut ThreadContext<'_>, request: InFlight, value: Value, now: Instant) {
    let stats = &mut ctx.stats;
    if request.sent < ctx.measure_from {
        return;
    }
    let verb = if request.op == Op::Set { "SET" } else { "GET" };
    match (&value, request.op) {
        (Value::Error(text), _) => {
            stats.error(format!("{verb}: {}", String::from_utf8_lossy(text)));
            return;
        }
        (Value::Simple(_), Op::Set) => {}
        (Value::Bulk(_), Op::Get) => stats.hits += 1,
        (Value::Null, Op::Get) => stats.misses += 1,
        (other, _) => {
            stats.error(format!("{verb}: unexpected reply {other:?}"));
            return;
        }
    }
    {
        match request.op {
            Op::Set => stats.sets += 1,
            Op::Get => stats.gets += 1,
        }
        let ns = now.saturating_duration_since(request.sent);
        stats.latency.record_ns(duration_ns(ns));
        stats.last_reply = Some(now);
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
