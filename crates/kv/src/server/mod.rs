//! The network server: event-loop threads, each serving its share of the connections.
//!
//! # Durability before the reply
//!
//! A worker thread runs passes: it polls, reads every ready connection, parses and executes
//! every complete command ([`crate::Keyspace::execute`] commits without waiting), and holds
//! the replies in the connections' output buffers. At the end of the pass it waits once
//! for the highest commit of the pass to be durable and only then writes the replies out.
//! So no reply, to a write or to a read of someone else's write, leaves before what it
//! reports is durable, and one wait covers every client served in the pass (in `fsync` mode
//! one fsync; in the PMEM modes each record was fenced at its append, and the wait checks the
//! log's watermark): group commit across an event-loop pass.

mod acl;
mod admin;
mod auth;
mod blocking;
mod clients;
mod command_stats;
mod connection;
mod dispatch;
mod eval;
mod functions;
mod info;
mod interleave;
mod metrics;
mod monitor;
mod pause;
mod plant;
mod pubsub;
mod saves;
mod slowlog;
mod socket;
mod standalone;
mod tls;
mod tracking;
mod transaction;
mod worker;

pub use auth::Secret;
pub use interleave::CHAOS_PAUSES_VAR;
pub use plant::{Plant, PlantError, PLANT_VAR};
pub use socket::Socket;
pub use tls::{pem_reason, receive_records, send_records, Tls, TlsError, TlsFiles};

use socket::Listener;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use tailstore_engine::RestartRedo;

use crate::command::{Command, Expired};
use crate::keyspace::notifications::{self, KeyEvent};
use crate::Keyspace;

/// Redis's default `client-query-buffer-limit`, 1 GiB.
pub const DEFAULT_QUERY_LIMIT: usize = 1 << 30;

/// What `tailstore serve` was asked for.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub max_clients: usize,
    /// The largest bulk string a request may carry (Redis's proto-max-bulk-len).
    pub max_bulk: usize,
    /// The most bytes one client may have held for commands not yet run, the arguments
    /// read of an unfinished command included (Redis's `client-query-buffer-limit`): a
    /// client past it is closed. `serve` uses [`DEFAULT_QUERY_LIMIT`].
    pub query_limit: usize,
    /// The most memory each event loop's Lua state may hold (see `crate::script`).
    pub script_memory: usize,
    /// How long a script may run before the server stops it (see `crate::script`).
    pub script_time_limit: Duration,
    /// Event-loop threads.
    pub threads: usize,
    /// How long an event loop that has just served requests keeps polling (yielding the
    /// processor between polls) before it blocks; zero blocks at once. See
    /// `server/worker.rs`, "Polling before blocking".
    pub poll_spin: Duration,
    /// What INFO and CONFIG report about durability, e.g. "buffer (PMEM log buffer in
    /// /dev/shm/x.pmem, emulated: survives a process crash, not a power cut)".
    pub durability: String,
    /// Whether a reply is sent only after its write is durable (false in `async` mode).
    pub durable_replies: bool,
    /// How long opening the database took (recovery included), for INFO.
    pub recovery: Duration,
    /// The default user's password (`requirepass`); `None`: no password.
    pub password: Option<Secret>,
    /// TLS (`server/tls.rs`): on `tls_listen` if given, `listen` staying plain TCP (Redis's
    /// `tls-port` beside `port`); else on `listen`, which then speaks only TLS (Redis's
    /// `tls-port` with `port 0`). `None`: plain TCP only.
    pub tls: Option<Tls>,
    /// A second address to listen on, for TLS connections (needs `tls`).
    pub tls_listen: Option<SocketAddr>,
    /// A Unix domain socket to listen on as well, for plain connections.
    pub unix_socket: Option<UnixSocket>,
    /// The ACL file (Redis's `aclfile`): its users are loaded at start and by ACL LOAD,
    /// and ACL SAVE writes them there (`server/acl.rs`).
    pub aclfile: Option<PathBuf>,
    /// Bugs planted in this server by a test, to see its checks catch them (`plant.rs`);
    /// empty but in such tests. Only builds with debug assertions act on them.
    pub plants: Vec<Plant>,
}

/// Whether the ACL file at `path` reads (for a server whose default password is
/// `password`): its error if not, naming the line.
pub fn check_acl_file(path: &Path, password: Option<&Secret>) -> Result<(), String> {
    acl::Users::default().load(path, &auth::Password::new(password))
}

/// A Unix domain socket to serve (Redis's `unixsocket` and `unixsocketperm`).
#[derive(Clone, Debug)]
pub struct UnixSocket {
    pub path: PathBuf,
    /// The socket file's permission bits (e.g. 0o700), else as the umask leaves them.
    pub permissions: Option<u32>,
}

impl UnixSocket {
    /// Whether the server may take the path: `true` when a socket file is there, left by a
    /// server that did not stop cleanly (it is replaced, as Redis replaces it), `false` when
    /// nothing is; an error for any other kind of file (which Redis would unlink) and for a
    /// directory that does not exist. `serve` asks before it touches the database.
    pub fn stale(&self) -> io::Result<bool> {
        let path = &self.path;
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_socket() => Ok(true),
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the path exists and is not a socket",
            )),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                match path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                    Some(dir) if !dir.is_dir() => Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("no directory {}", dir.display()),
                    )),
                    _ => Ok(false),
                }
            }
            Err(err) => Err(err),
        }
    }
}

impl ServerConfig {
    /// The address plain TCP clients connect to, if any (Redis's `port`).
    pub fn plain_address(&self) -> Option<SocketAddr> {
        (self.tls.is_none() || self.tls_listen.is_some()).then_some(self.listen)
    }

    /// The address TLS clients connect to, if any (Redis's `tls-port`).
    pub fn tls_address(&self) -> Option<SocketAddr> {
        self.tls.as_ref()?;
        Some(self.tls_listen.unwrap_or(self.listen))
    }

    /// Whether `plant` is planted in this server and acted on: never without debug
    /// assertions, so that a release build compiles every planted bug away.
    pub(crate) fn planted(&self, plant: Plant) -> bool {
        cfg!(debug_assertions) && self.plants.contains(&plant)
    }
}

/// Counters and settings every worker shares.
pub struct Shared {
    pub ks: Arc<Keyspace>,
    pub config: ServerConfig,
    pub started: Instant,
    pub clients: AtomicUsize,
    pub next_client_id: AtomicU64,
    pub connections_received: AtomicU64,
    pub commands: AtomicU64,
    /// The totals' recent samples, for INFO's instantaneous rates (`server/metrics.rs`).
    pub rates: metrics::Rates,
    /// Runs of blocking commands, first runs and reruns of blocked clients (INFO stats).
    pub blocked_runs: AtomicU64,
    pub rejected: AtomicU64,
    pub stop: Arc<AtomicBool>,
    /// The checkpoints clients asked for with SAVE, BGSAVE and BGREWRITEAOF (LASTSAVE, INFO).
    pub saves: saves::Saves,
    /// This run's identity, 40 hex digits (INFO's `run_id`), and the id of its replication
    /// history (`master_replid`), as Redis draws them at its start.
    pub run_id: String,
    pub replication_id: String,
    /// The connected clients, for CLIENT LIST and CLIENT KILL.
    pub client_list: clients::Clients,
    /// Per worker, what other threads see of it (connections handed over, connections served).
    pub loops: Box<[worker::LoopState]>,
    /// The worker whose turn the next accepted connection is (modulo the workers).
    pub next_worker: AtomicUsize,
    /// Clients blocked in BLPOP & co, by the keys they wait on.
    pub waiters: blocking::Waiters,
    /// Pub/sub subscriptions.
    pub pubsub: pubsub::PubSub,
    /// The Lua scripts' bodies, by SHA1 (EVALSHA).
    pub scripts: crate::script::Scripts,
    /// The function libraries (FUNCTION LOAD, FCALL).
    pub libraries: crate::script::library::Libraries,
    /// The commands that ran slowly (SLOWLOG).
    pub slowlog: slowlog::SlowLog,
    /// The connections in MONITOR mode.
    pub monitors: monitor::Monitors,
    /// CLIENT PAUSE.
    pub pause: pause::Pause,
    /// CLIENT TRACKING: the keys tracking clients read, and their prefixes.
    pub tracking: tracking::Tracking,
    /// The default user's password, which CONFIG SET changes (`server/auth.rs`).
    pub password: auth::Password,
    /// The ACL users besides `default` (`server/acl.rs`).
    pub users: acl::Users,
    /// `client-query-buffer-limit`: [`ServerConfig::query_limit`] at start, then what
    /// CONFIG SET made it.
    pub query_limit: AtomicUsize,
}

impl Shared {
    /// After a write to `keys` of database `db` was applied: wakes the loops whose clients
    /// wait on one of them (see `server/blocking.rs`).
    pub fn signal<'k>(&self, db: u32, keys: impl Iterator<Item = &'k [u8]>) {
        self.waiters
            .signal(db, keys, |at, key| self.loops[at].wake_for(key));
    }

    /// After `command` (a write) was applied in database `db`: [`Shared::signal`] for its
    /// keys, and for the key it wrote in another database if it did (MOVE, COPY … DB).
    pub fn signal_write(&self, db: u32, command: &Command, args: &[Vec<u8>]) {
        self.signal(db, command.key_args(args));
        if let Some((elsewhere, key)) = command.key_elsewhere(args) {
            self.signal(elsewhere, std::iter::once(key));
        }
    }

    /// Every loop's command figures (INFO commandstats, errorstats and latencystats,
    /// LATENCY HISTOGRAM).
    pub fn command_stats(&self) -> Vec<&command_stats::CommandStats> {
        self.loops
            .iter()
            .map(|state| &state.command_stats)
            .collect()
    }

    /// PUBLISH: the message for each of its subscribers, added to `outbox` (delivered after
    /// the pass's durability wait: `server/pubsub.rs`); how many subscribers that was.
    pub fn publish(
        &self,
        channel: &[u8],
        payload: &[u8],
        outbox: &mut Vec<(pubsub::Subscriber, pubsub::Message)>,
    ) -> usize {
        self.pubsub
            .publish(channel, payload, |who, message| outbox.push((who, message)))
    }

    /// Publishes a committed transaction's key events (`keyspace::notifications`) on the
    /// channels the setting names, into `outbox`, which is sent after the durability wait.
    pub fn publish_key_events(
        &self,
        events: Vec<KeyEvent>,
        outbox: &mut Vec<(pubsub::Subscriber, pubsub::Message)>,
    ) {
        let flags = self.ks.notifications.get();
        for event in events {
            if flags & notifications::KEYSPACE != 0 {
                let mut channel = format!("__keyspace@{}__:", event.db).into_bytes();
                channel.extend_from_slice(&event.key);
                self.publish(&channel, event.event.as_bytes(), outbox);
            }
            if flags & notifications::KEYEVENT != 0 {
                let channel = format!("__keyevent@{}__:{}", event.db, event.event);
                self.publish(channel.as_bytes(), &event.key, outbox);
            }
        }
    }
}

/// A listening Unix socket at `socket.path`, in non-blocking mode, with its permissions.
fn listen_unix(socket: &UnixSocket) -> io::Result<UnixListener> {
    let path = &socket.path;
    if socket.stale()? {
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    listener.set_nonblocking(true)?;
    if let Some(mode) = socket.permissions {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(listener)
}

/// A listening socket on `address`, in non-blocking mode for the event loops.
fn listen(address: SocketAddr) -> io::Result<TcpListener> {
    let listener = TcpListener::bind(address)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Each event loop's stack. Scripts recurse on it as deep as Redis lets them, and
/// then some: `cjson` through 1,000 levels of tables, `cmsgpack`, the replies of nested
/// tables; a self-containing table given to `cjson.encode` overflowed the default 2 MiB of
/// a debug build's loop and took the server down. Only the pages touched are memory.
const LOOP_STACK: usize = 64 << 20;

/// How often the active expiry looks for keys whose deadline has passed, and how many it
/// removes per look.
const EXPIRY_PERIOD: Duration = Duration::from_millis(100);
const EXPIRY_BATCH: usize = 200;
/// Time per housekeeping round given to freeing the elements of deleted keys.
const FREE_BUDGET: Duration = Duration::from_millis(50);

/// A running server; [`Server::wait`] returns when `stop` is set.
pub struct Server {
    address: SocketAddr,
    threads: Vec<thread::JoinHandle<io::Result<()>>>,
    shared: Arc<Shared>,
    /// The Unix socket's file, removed when the server stops.
    unix_path: Option<PathBuf>,
}

impl Server {
    /// Binds `config.listen` (and `config.tls_listen`) and starts the worker threads.
    pub fn start(
        ks: Arc<Keyspace>,
        config: ServerConfig,
        stop: Arc<AtomicBool>,
    ) -> io::Result<Server> {
        assert!(
            config.tls_listen.is_none() || config.tls.is_some(),
            "a TLS address without TLS settings"
        );
        let listener = listen(config.listen)?;
        let address = listener.local_addr()?;
        let tls_listener = config.tls_listen.map(listen).transpose()?;
        // INFO and CONFIG tell the ports bound, also when port 0 was asked for.
        let config = ServerConfig {
            listen: address,
            tls_listen: match &tls_listener {
                Some(l) => Some(l.local_addr()?),
                None => None,
            },
            ..config
        };
        // Commands that grow a string refuse one past it, as Redis's do.
        ks.set_max_bulk(config.max_bulk);
        // The one planted bug that lives in the keyspace's code rather than the server's.
        #[cfg(debug_assertions)]
        ks.set_early_gate_release_planted(config.planted(Plant::EarlyGateRelease));
        let tls_only = config.tls.is_some() && tls_listener.is_none();
        let unix = match &config.unix_socket {
            Some(socket) => Some((listen_unix(socket)?, socket.path.clone())),
            None => None,
        };
        let threads = config.threads.max(1);
        let (script_memory, script_time_limit) = (config.script_memory, config.script_time_limit);
        let polls = (0..threads)
            .map(|_| mio::Poll::new())
            .collect::<io::Result<Vec<_>>>()?;
        let loops = polls
            .iter()
            .map(worker::LoopState::new)
            .collect::<io::Result<_>>()?;
        let users = acl::Users::default();
        if let Some(path) = &config.aclfile {
            users
                .load(path, &auth::Password::new(config.password.as_ref()))
                .map_err(io::Error::other)?;
        }
        let shared = Arc::new(Shared {
            query_limit: AtomicUsize::new(config.query_limit),
            ks,
            started: Instant::now(),
            clients: AtomicUsize::new(0),
            next_client_id: AtomicU64::new(1),
            connections_received: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            rates: metrics::Rates::default(),
            blocked_runs: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            stop,
            saves: saves::Saves::default(),
            run_id: info::random_id(),
            replication_id: info::random_id(),
            client_list: clients::Clients::default(),
            loops,
            next_worker: AtomicUsize::new(0),
            waiters: blocking::Waiters::default(),
            pubsub: pubsub::PubSub::default(),
            scripts: crate::script::Scripts::new(script_memory, script_time_limit),
            libraries: crate::script::library::Libraries::default(),
            slowlog: slowlog::SlowLog::default(),
            monitors: monitor::Monitors::default(),
            pause: pause::Pause::default(),
            tracking: tracking::Tracking::default(),
            password: auth::Password::new(config.password.as_ref()),
            users,
            config,
        });
        functions::load_stored(&shared).map_err(io::Error::other)?;
        let mut handles = Vec::with_capacity(threads + 1);
        for (index, poll) in polls.into_iter().enumerate() {
            let tcp = |listener: &TcpListener| -> io::Result<Listener> {
                Ok(Listener::Tcp(mio::net::TcpListener::from_std(
                    listener.try_clone()?,
                )))
            };
            let mut endpoints = vec![worker::Endpoint {
                listener: tcp(&listener)?,
                tls: tls_only,
            }];
            if let Some(tls_listener) = &tls_listener {
                endpoints.push(worker::Endpoint {
                    listener: tcp(tls_listener)?,
                    tls: true,
                });
            }
            if let Some((unix, path)) = &unix {
                let listener = mio::net::UnixListener::from_std(unix.try_clone()?);
                endpoints.push(worker::Endpoint {
                    listener: Listener::Unix(listener, path.clone()),
                    tls: false,
                });
            }
            let shared = shared.clone();
            let handle = thread::Builder::new()
                .name(format!("kv-worker-{index}"))
                .stack_size(LOOP_STACK)
                .spawn(move || {
                    let _stops = StopWhenGone(shared.stop.clone());
                    worker::Worker::new(shared, index, poll, endpoints)?.run()
                })?;
            handles.push(handle);
        }
        let expiry = shared.clone();
        handles.push(
            thread::Builder::new()
                .name("kv-housekeeping".into())
                .spawn(move || {
                    let _stops = StopWhenGone(expiry.stop.clone());
                    // Beside the database's own background threads.
                    if let Some(cpus) = expiry.ks.database().background_cpus() {
                        cpus.keep_current_thread();
                    }
                    housekeeping(&expiry);
                    Ok(())
                })?,
        );
        Ok(Server {
            address,
            threads: handles,
            shared,
            unix_path: unix.map(|(_, path)| path),
        })
    }

    /// The address the server listens on (useful with port 0): `--listen`'s.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The address the server takes TLS connections on beside [`Server::address`], if any.
    pub fn tls_address(&self) -> Option<SocketAddr> {
        self.shared.config.tls_listen
    }

    /// Waits for the workers to stop (after `stop` was set); the first worker error, if any.
    pub fn wait(self) -> io::Result<()> {
        let mut outcome = Ok(());
        for handle in self.threads {
            let result = handle
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("a server thread panicked")));
            if outcome.is_ok() {
                outcome = result;
            }
        }
        drop(self.shared);
        if let Some(path) = &self.unix_path {
            // As Redis does at its shutdown.
            let _ = std::fs::remove_file(path);
        }
        outcome
    }

    /// The Unix domain socket the server listens on, if any.
    pub fn unix_socket(&self) -> Option<&Path> {
        self.unix_path.as_deref()
    }
}

/// Held by each server thread: when the thread ends for any reason (an error, or a panic,
/// which is a bug) the whole server stops, and [`Server::wait`] reports why. Otherwise the
/// process lived on with a loop gone: the connections dealt to that loop hung, and a
/// supervisor saw nothing to restart.
struct StopWhenGone(Arc<AtomicBool>);

impl Drop for StopWhenGone {
    fn drop(&mut self) {
        if !self.0.swap(true, Ordering::SeqCst) {
            let name = thread::current()
                .name()
                .unwrap_or("a server thread")
                .to_string();
            let how = if thread::panicking() {
                "panicked"
            } else {
                "ended"
            };
            eprintln!("tailstore serve: {name} {how}; stopping the server");
        }
    }
}

/// Housekeeping, ten times a second: the active expiry (Redis samples keys with a TTL; we
/// read the deadline queue, `kv_expiry`, so no expired key waits to be sampled), then the
/// lazy free of deleted keys' elements (`Keyspace::free_garbage`) and of flushed databases'
/// keys (`Keyspace::free_flushed`), for at most
/// [`FREE_BUDGET`] per round so that it never hogs a core.
fn housekeeping(shared: &Shared) {
    let mut told = ToldFailure::default();
    let mut report = |what: &str, err: tailstore_engine::EngineError| {
        let cause = err.to_string();
        if told.is_new(&cause) {
            eprintln!("tailstore serve: {what} failed: {cause}");
        }
    };
    let mut redo_pending = true;
    while !shared.stop.load(Ordering::Relaxed) {
        thread::sleep(EXPIRY_PERIOD);
        shared.rates.sample(Instant::now(), shared.totals());
        if redo_pending {
            redo_pending = tell_when_redo_finished(shared);
        }
        // A paused server's data stays as it is (CLIENT PAUSE).
        while shared.pause.ends_at().is_none() {
            match shared.ks.expire_due_keys(EXPIRY_BATCH) {
                Ok(expired) => {
                    let removed = expired.keys.len();
                    tell_expired(shared, expired);
                    if removed < EXPIRY_BATCH {
                        break;
                    }
                }
                Err(err) => {
                    report("active expiry", err);
                    break;
                }
            }
        }
        let began = Instant::now();
        while began.elapsed() < FREE_BUDGET && !shared.stop.load(Ordering::Relaxed) {
            let freed = match shared.ks.free_garbage() {
                Ok(0) => shared.ks.free_flushed(),
                freed => freed,
            };
            match freed {
                Ok(0) => break,
                Ok(_) => continue,
                Err(err) => {
                    report("freeing deleted keys", err);
                    break;
                }
            }
        }
    }
}

/// The cause of the housekeeping's last failure told. A failure that persists (a database
/// that stopped accepting writes) fails each of its tasks ten times a second, with one
/// cause: told once, not once per task and round.
#[derive(Default)]
struct ToldFailure {
    cause: String,
}

impl ToldFailure {
    /// Whether `cause` differs from the last one told (and is now the last one).
    fn is_new(&mut self, cause: &str) -> bool {
        if self.cause == cause {
            return false;
        }
        self.cause = cause.to_string();
        true
    }
}

impl Shared {
    /// Commands run and bytes read and written since the server started.
    pub fn totals(&self) -> metrics::Totals {
        let traffic = self.traffic();
        metrics::Totals {
            commands: self.commands.load(Ordering::Relaxed),
            input: traffic.read,
            output: traffic.written,
        }
    }

    /// What the connections of every event loop read and wrote since the server started.
    pub fn traffic(&self) -> connection::Traffic {
        let mut total = connection::Traffic::default();
        for one in self.loops.iter().map(worker::LoopState::traffic) {
            total += one;
        }
        total
    }
}

/// Tells the clients tracking keys the active expiry removed, and the subscribers to their
/// `expired` events (the removal is durable by now).
fn tell_expired(shared: &Shared, expired: Expired) {
    let mut outbox = Vec::new();
    let keys = expired.keys.iter().map(Vec::as_slice);
    shared
        .tracking
        .invalidate(&shared.client_list, 0, keys, &mut outbox);
    shared.publish_key_events(expired.events, &mut outbox);
    for (who, message) in outbox {
        shared.loops[who.at].deliver(who.token, message);
    }
}

/// Says once that the redo a restart left to the background is done (the open said how many
/// pages it left); returns whether it is still to come.
fn tell_when_redo_finished(shared: &Shared) -> bool {
    match shared.ks.database().restart_redo() {
        RestartRedo::Pending { .. } => true,
        RestartRedo::AtOpen => false,
        RestartRedo::Finished(done) => {
            eprintln!(
                "tailstore serve: the restart's redo is done: the first checkpoint redid the {} \
                 pages no command had needed, in {:.1} ms",
                done.pages,
                done.time.as_secs_f64() * 1e3
            );
            false
        }
    }
}

pub(crate) fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_is_told_once_whichever_task_meets_it() {
        let mut told = ToldFailure::default();
        let stopped = "the database stopped accepting writes";
        // The expiry and the lazy free alternate, each meeting the same cause.
        let new: Vec<bool> = (0..6).map(|_| told.is_new(stopped)).collect();
        assert_eq!(new, [true, false, false, false, false, false]);
        assert!(told.is_new("another cause"));
        assert!(told.is_new(stopped), "a cause told again after another");
    }

    #[test]
    fn a_server_thread_that_panics_or_ends_stops_the_server() {
        let stop = Arc::new(AtomicBool::new(false));
        let held = stop.clone();
        let panicked = thread::spawn(move || {
            let _stops = StopWhenGone(held);
            panic!("a bug in a handler");
        })
        .join();
        assert!(panicked.is_err());
        assert!(
            stop.load(Ordering::SeqCst),
            "a panic left the server running"
        );

        let stop = Arc::new(AtomicBool::new(false));
        drop(StopWhenGone(stop.clone()));
        assert!(
            stop.load(Ordering::SeqCst),
            "an ended thread left the server running"
        );
    }
}
