//! One event-loop thread: accept, read, execute, wait for durability once, write.

use std::collections::HashMap;
use std::io;
use std::net::TcpListener as StdListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};
use tailstore_engine::PendingCommit;
use tailstore_resp::{Limits, Reply};

use super::connection::Connection;
use super::dispatch;
use super::Shared;

const LISTENER: Token = Token(0);
/// How long a poll waits when nothing is ready, so that a stop request is noticed.
const IDLE: Duration = Duration::from_millis(100);

pub struct Worker {
    shared: Arc<Shared>,
    poll: Poll,
    listener: TcpListener,
    connections: HashMap<Token, Connection>,
    next_token: usize,
}

impl Worker {
    pub fn new(shared: Arc<Shared>, listener: StdListener) -> io::Result<Worker> {
        let poll = Poll::new()?;
        let mut listener = TcpListener::from_std(listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(Worker {
            shared,
            poll,
            listener,
            connections: HashMap::new(),
            next_token: 1,
        })
    }

    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let mut ready: Vec<Token> = Vec::new();
        while !self.shared.stop.load(Ordering::Relaxed) {
            // A connection held back by its unsent replies waits for its socket to take
            // them (a writable event), not for the next pass: polling it would spin.
            let unread = self
                .connections
                .values()
                .any(|c| c.unread && !c.backlogged());
            let timeout = if unread { Duration::ZERO } else { IDLE };
            if let Err(err) = self.poll.poll(&mut events, Some(timeout)) {
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            ready.clear();
            for event in events.iter() {
                if event.token() == LISTENER {
                    self.accept()?;
                } else {
                    ready.push(event.token());
                }
            }
            ready.extend(
                self.connections
                    .iter()
                    .filter(|(_, c)| c.unread && !c.backlogged())
                    .map(|(token, _)| *token),
            );
            ready.sort_unstable();
            ready.dedup();
            self.pass(&ready);
        }
        self.shared
            .clients
            .fetch_sub(self.connections.len(), Ordering::Relaxed);
        Ok(())
    }

    /// Serves the connections in `ready`: every command they sent, then one durability wait,
    /// then their replies.
    fn pass(&mut self, ready: &[Token]) {
        let shared = self.shared.clone();
        let mut pending: Vec<PendingCommit<'_>> = Vec::new();
        let mut dead: Vec<Token> = Vec::new();
        for token in ready {
            let Some(conn) = self.connections.get_mut(token) else {
                continue;
            };
            match conn.fill() {
                Ok(true) => dispatch::serve(&shared, conn, &mut pending),
                Ok(false) | Err(_) => dead.push(*token),
            }
        }
        let durable = if cfg!(feature = "planted-early-reply") {
            // The planted bug (test builds only): reply without waiting.
            drop(pending);
            Ok(())
        } else {
            wait_all(pending)
        };
        for token in ready {
            if dead.contains(token) {
                continue;
            }
            let Some(conn) = self.connections.get_mut(token) else {
                continue;
            };
            if durable.is_err() {
                // Fail-stop: the database refuses writes from now on; no reply of this
                // pass may claim success, so the connection is closed without one.
                conn.output.clear();
                dead.push(*token);
                continue;
            }
            match conn.flush() {
                Ok(true) if conn.closing => dead.push(*token),
                Ok(_) => {}
                Err(_) => dead.push(*token),
            }
        }
        if let Err(message) = durable {
            eprintln!("tailstore serve: durability wait failed, closing the pass's connections: {message}");
        }
        for token in dead {
            self.close(token);
        }
    }

    fn accept(&mut self) -> io::Result<()> {
        loop {
            let (mut stream, peer) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(err) if is_transient(&err) => {
                    eprintln!("tailstore serve: accept failed: {err}");
                    return Ok(());
                }
                Err(err) => return Err(err),
            };
            let shared = &self.shared;
            shared.connections_received.fetch_add(1, Ordering::Relaxed);
            if shared.clients.fetch_add(1, Ordering::Relaxed) >= shared.config.max_clients {
                shared.clients.fetch_sub(1, Ordering::Relaxed);
                shared.rejected.fetch_add(1, Ordering::Relaxed);
                let mut refusal = Vec::new();
                Reply::error("ERR max number of clients reached")
                    .encode(Default::default(), &mut refusal);
                let _ = io::Write::write(&mut stream, &refusal);
                continue;
            }
            let _ = stream.set_nodelay(true);
            let token = Token(self.next_token);
            self.next_token += 1;
            self.poll.registry().register(
                &mut stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
            let limits = Limits {
                max_bulk: shared.config.max_bulk,
                ..Limits::default()
            };
            let conn = Connection::new(stream, id, peer.to_string(), limits);
            shared.client_list.lock().insert(id, conn.describe());
            self.connections.insert(token, conn);
        }
    }

    fn close(&mut self, token: Token) {
        if let Some(mut conn) = self.connections.remove(&token) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            self.shared.clients.fetch_sub(1, Ordering::Relaxed);
            self.shared.client_list.lock().remove(&conn.id);
        }
    }
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

/// Accept errors that concern one connection or a passing shortage, not the listener.
fn is_transient(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    ) || matches!(err.raw_os_error(), Some(EMFILE | ENFILE))
}

/// Linux's "too many open files" (per process, system-wide): a shortage that passes.
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;
