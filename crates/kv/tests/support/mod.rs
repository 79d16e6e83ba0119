//! A server started by the test, in-process, on a free port of the loopback, over a fresh
//! database in a temporary directory (its PMEM log buffer in /dev/shm), and the clients that
//! talk to it: the `redis` crate for commands, a raw TCP stream for the protocol itself.

#![allow(dead_code)]

pub mod conversation;
pub mod generate;
pub mod key_events;
pub mod real_redis;
pub mod redis_process;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use redis::{ConnectionLike, FromRedisValue, Value};
use tailstore_engine::{Database, DbConfig};
use tailstore_kv::server::{Plant, Secret, Server, ServerConfig, Tls, UnixSocket};
use tailstore_kv::Keyspace;
use tailstore_log::CommitMode;
use tailstore_media::sim::SimStorage;
use tailstore_media::Storage;
use tempfile::TempDir;

/// Where [`TestServer::on_sim`] keeps its database on the simulated storage.
pub const SIM_DIR: &str = "/db";
pub const SIM_PMEM: &str = "/pmem/db.pmem";

/// How long a test waits for any one reply before it fails instead of hanging.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Tests that measure the process's memory run alone: the others take this lock shared for
/// as long as their server runs, those take it exclusively.
static MEMORY: RwLock<()> = RwLock::new(());

enum Guard {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Exclusive(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

impl Guard {
    fn for_options(options: &Options) -> Guard {
        if options.exclusive {
            Guard::Exclusive(MEMORY.write().unwrap_or_else(|e| e.into_inner()))
        } else {
            Guard::Shared(MEMORY.read().unwrap_or_else(|e| e.into_inner()))
        }
    }
}

/// The database settings of `tailstore serve` that the tests keep: a 64 MiB log ring, so
/// one command may write 8 MiB (`Database::max_commit_bytes`, which the pool also bounds: an
/// eighth of it).
fn serve_like(config: DbConfig) -> DbConfig {
    with_ring_and_pool(config, SERVE_RING_AND_POOL)
}

const SERVE_RING_AND_POOL: usize = 64 << 20;

fn with_ring_and_pool(mut config: DbConfig, bytes: usize) -> DbConfig {
    config.buffer_pool_bytes = bytes;
    config.log.ring_bytes = bytes;
    config
}

/// For a test that measures memory without a server of its own: while the guard lives, no
/// other test's server runs.
pub fn measuring_memory_alone() -> RwLockWriteGuard<'static, ()> {
    MEMORY.write().unwrap_or_else(|e| e.into_inner())
}

/// A running server; dropping it stops the server and waits for its threads.
pub struct TestServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    server: Option<Server>,
    pub ks: Arc<Keyspace>,
    /// Where the database lives (nothing for the simulated storage).
    _dirs: Vec<TempDir>,
    _guard: Guard,
}

/// How a test wants its server.
pub struct Options {
    pub mode: CommitMode,
    pub max_clients: usize,
    pub max_bulk: usize,
    /// `ServerConfig::query_limit`.
    pub query_limit: usize,
    /// Each event loop's Lua memory limit.
    pub script_memory: usize,
    pub script_time_limit: Duration,
    pub threads: usize,
    pub poll_spin: Duration,
    /// Run with no other test's server alive (for memory measurements).
    pub exclusive: bool,
    /// The log ring and the buffer pool, each: a command may write an eighth of it. Less
    /// than `serve`'s 64 MiB for the tests of values written over several commits, which
    /// then need values an eighth as large.
    pub ring_and_pool_bytes: usize,
    /// `requirepass`.
    pub password: Option<&'static str>,
    /// TLS: on every connection, or with `tls_beside_plain` on a second address.
    pub tls: Option<Tls>,
    pub tls_beside_plain: bool,
    /// A Unix domain socket beside TCP.
    pub unix_socket: Option<UnixSocket>,
    /// `ServerConfig::aclfile`.
    pub aclfile: Option<std::path::PathBuf>,
    /// Bugs planted in the server, for a test that must catch them (`ServerConfig::plants`).
    pub plants: Vec<Plant>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: CommitMode::Buffer,
            max_clients: 10_000,
            max_bulk: 512 << 20,
            query_limit: tailstore_kv::server::DEFAULT_QUERY_LIMIT,
            script_memory: 512 << 20,
            script_time_limit: tailstore_kv::script::DEFAULT_TIME_LIMIT,
            threads: 2,
            poll_spin: Duration::from_micros(50),
            exclusive: false,
            ring_and_pool_bytes: SERVE_RING_AND_POOL,
            password: None,
            tls: None,
            tls_beside_plain: false,
            unix_socket: None,
            aclfile: None,
            plants: Vec::new(),
        }
    }
}

/// `server` stopped, and a new one with the default options on `image` (a power cut's),
/// with a client.
pub fn restarted(
    server: TestServer,
    con: redis::Connection,
    image: &SimStorage,
) -> (TestServer, redis::Connection) {
    drop(con);
    drop(server);
    let server = TestServer::on_sim(Options::default(), image);
    let con = server.client();
    (server, con)
}

impl TestServer {
    /// A server in `buffer` mode with the defaults of `tailstore serve`.
    pub fn start() -> TestServer {
        TestServer::with(Options::default())
    }

    pub fn with(options: Options) -> TestServer {
        let guard = Guard::for_options(&options);
        let dir = tempfile::tempdir().expect("temporary directory");
        // The 64 MiB ring and the 64 MiB double-write area, with room to spare.
        let shm = tempfile::Builder::new()
            .prefix("tailstore-kv-test")
            .tempdir_in(tailstore_media::pmem::scratch_dir(512 << 20))
            .expect("temporary directory for the PMEM files");
        let pmem = options
            .mode
            .uses_pmem()
            .then(|| shm.path().join("log.pmem"));
        let config = with_ring_and_pool(
            DbConfig::new(dir.path(), options.mode, pmem),
            options.ring_and_pool_bytes,
        );
        let (db, _report) = Database::open(config).expect("open the database");
        TestServer::serving(db, &options, guard, vec![dir, shm])
    }

    /// A server over a database on the simulated storage (at `SIM_DIR`, its PMEM file at
    /// `SIM_PMEM`), created there or recovered from what `storage` holds, with no
    /// checkpoints unless asked: the tests inject faults into, and crash, `storage`.
    pub fn on_sim(options: Options, storage: &SimStorage) -> TestServer {
        let guard = Guard::for_options(&options);
        let db = open_sim_database(options.mode, storage);
        TestServer::serving(db, &options, guard, Vec::new())
    }

    fn serving(db: Database, options: &Options, guard: Guard, dirs: Vec<TempDir>) -> TestServer {
        let ks = Arc::new(Keyspace::open(Arc::new(db), 16).expect("open the keyspace"));
        let durable = options.mode.is_durable();
        let server_config = ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            max_clients: options.max_clients,
            max_bulk: options.max_bulk,
            query_limit: options.query_limit,
            script_memory: options.script_memory,
            script_time_limit: options.script_time_limit,
            threads: options.threads,
            poll_spin: options.poll_spin,
            durability: format!("{} (test)", options.mode),
            durable_replies: durable,
            recovery: Duration::ZERO,
            password: options.password.map(|p| Secret(p.as_bytes().to_vec())),
            tls: options.tls.clone(),
            tls_listen: options
                .tls_beside_plain
                .then(|| "127.0.0.1:0".parse().unwrap()),
            unix_socket: options.unix_socket.clone(),
            aclfile: options.aclfile.clone(),
            plants: options.plants.clone(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let server =
            Server::start(ks.clone(), server_config, stop.clone()).expect("start the server");
        TestServer {
            address: server.address(),
            stop,
            server: Some(server),
            ks,
            _dirs: dirs,
            _guard: guard,
        }
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// The port of the second, TLS, address (`Options::tls_beside_plain`).
    pub fn tls_port(&self) -> u16 {
        let server = self.server.as_ref().expect("a running server");
        server.tls_address().expect("a TLS address").port()
    }

    /// The Unix domain socket's path (`Options::unix_socket`).
    pub fn unix_socket(&self) -> std::path::PathBuf {
        let server = self.server.as_ref().expect("a running server");
        server.unix_socket().expect("a Unix socket").to_path_buf()
    }

    /// A RESP2 connection through the `redis` crate.
    pub fn client(&self) -> redis::Connection {
        self.connect(&format!("redis://{}/", self.address))
    }

    /// A RESP3 connection through the `redis` crate (it says HELLO 3 on connecting).
    pub fn client3(&self) -> redis::Connection {
        self.connect(&format!("redis://{}/?protocol=resp3", self.address))
    }

    fn connect(&self, url: &str) -> redis::Connection {
        connect(url)
    }

    /// A plain TCP connection, for what the protocol looks like byte by byte.
    pub fn raw(&self) -> TcpStream {
        let stream = TcpStream::connect(self.address).expect("connect");
        stream.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(REPLY_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(server) = self.server.take() {
            let outcome = server.wait();
            if !std::thread::panicking() {
                outcome.expect("the server stopped with an error");
            }
        }
    }
}

/// The database of [`TestServer::on_sim`] in `mode`, opened (created or recovered) on
/// `storage` without a server.
pub fn open_sim_database(mode: CommitMode, storage: &SimStorage) -> Database {
    let pmem = mode.uses_pmem().then(|| PathBuf::from(SIM_PMEM));
    let mut config = serve_like(DbConfig::new(SIM_DIR, mode, pmem));
    // The simulator copies every region at a crash: a smaller ring than the server's.
    config.log.ring_bytes = 4 << 20;
    config.log.pmem_log_bytes = 16 << 20;
    config.checkpoint_interval = None;
    config.checkpoint_log_bytes = u64::MAX;
    let storage: Arc<dyn Storage> = Arc::new(storage.clone());
    let (db, _report) = Database::open_with(storage, config).expect("open the database");
    db
}

/// Runs a data command on `ks` directly (no server), waiting for its commit; its reply.
pub fn run_on(ks: &Keyspace, args: &[&str]) -> tailstore_resp::Reply {
    let command = tailstore_kv::command::lookup(args[0].as_bytes()).expect("a command");
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    let executed = ks.execute(0, command, &args);
    if let Some(pending) = executed.pending {
        pending.wait().expect("commit");
    }
    executed.reply
}

/// A RESP2 connection through the `redis` crate to any server (a real redis-server too).
pub fn client_at(address: SocketAddr) -> redis::Connection {
    client_at_url(&format!("redis://{address}/"))
}

/// A connection through the `redis` crate to `url` (with a password in it, say).
pub fn client_at_url(url: &str) -> redis::Connection {
    connect(url)
}

fn connect(url: &str) -> redis::Connection {
    let client = redis::Client::open(url).expect("client");
    let con = client
        .get_connection_with_timeout(REPLY_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    con.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    con.set_write_timeout(Some(REPLY_TIMEOUT)).unwrap();
    con
}

/// Commands that write one value to every key, in one of the four ways a client may, sent
/// at once on a raw connection: a SET per key, one MSET, SETs in a MULTI block, a script.
pub struct WritesOfEveryKey {
    batch: Vec<u8>,
    replies: usize,
}

impl WritesOfEveryKey {
    /// The commands writing `value` to every key of `keys`, the way `way` (modulo 4) names.
    pub fn new(keys: &[String], value: &str, way: usize) -> WritesOfEveryKey {
        let words = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let sets = keys.iter().map(|k| words(&["SET", k, value]));
        let commands: Vec<Vec<String>> = match way % 4 {
            0 => sets.collect(),
            1 => vec![std::iter::once("MSET".to_string())
                .chain(keys.iter().flat_map(|k| [k.clone(), value.to_string()]))
                .collect()],
            2 => std::iter::once(words(&["MULTI"]))
                .chain(sets)
                .chain(std::iter::once(words(&["EXEC"])))
                .collect(),
            _ => {
                let script = "for _, k in ipairs(KEYS) do redis.call('set', k, ARGV[1]) end";
                let count = keys.len().to_string();
                let mut eval = words(&["EVAL", script, &count]);
                eval.extend(keys.iter().cloned());
                eval.push(value.to_string());
                vec![eval]
            }
        };
        let mut batch = Vec::new();
        for args in &commands {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            batch.extend(command(&args).get_packed_command());
        }
        WritesOfEveryKey {
            batch,
            replies: commands.len(),
        }
    }

    /// Sends the commands on `stream` and reads every reply (none of them an error).
    pub fn send(&self, stream: &mut TcpStream) {
        stream.write_all(&self.batch).expect("write");
        let (mut got, mut buffer) = (Vec::new(), [0u8; 4096]);
        let mut parsed = 0;
        let limits = tailstore_resp::Limits::default();
        while parsed < self.replies {
            if let Some((reply, used)) = tailstore_resp::parse_reply(&got, &limits).expect("RESP") {
                assert!(
                    !matches!(reply, tailstore_resp::Value::Error(_)),
                    "a write failed: {reply:?}"
                );
                got.drain(..used);
                parsed += 1;
                continue;
            }
            let n = stream.read(&mut buffer).expect("a reply");
            assert!(n > 0, "the server closed the connection");
            got.extend_from_slice(&buffer[..n]);
        }
    }
}

/// Builds a command from its words.
pub fn command(args: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd
}

/// Runs a command that must succeed, converting its reply.
#[track_caller]
pub fn q<T: FromRedisValue>(con: &mut redis::Connection, args: &[&str]) -> T {
    match command(args).query(con) {
        Ok(value) => value,
        Err(err) => panic!("{args:?} failed: {err}"),
    }
}

/// The reply to a command exactly as it came (errors nested in arrays included).
#[track_caller]
pub fn raw_value(con: &mut redis::Connection, args: &[&str]) -> Value {
    con.req_command(&command(args))
        .unwrap_or_else(|err| panic!("{args:?}: {err}"))
}

/// The full text of the error a command must be answered with, e.g.
/// "ERR value is not an integer or out of range".
#[track_caller]
/// A server's read lookups as INFO counts them: (`keyspace_hits`, `keyspace_misses`).
#[allow(dead_code)] // not every test binary that has the support module compares them
pub fn keyspace_lookups(con: &mut redis::Connection) -> (u64, u64) {
    let info: String = q(con, &["INFO", "stats"]);
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("INFO stats has no {name}"))
    };
    (field("keyspace_hits"), field("keyspace_misses"))
}

pub fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    match command(args).query::<Value>(con) {
        Ok(value) => panic!("{args:?} answered {value:?}, expected an error"),
        Err(err) => error_text(&err),
    }
}

pub fn error_text(err: &redis::RedisError) -> String {
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => err.to_string(),
    }
}

/// The error text of a `Value::ServerError` (an element of an EXEC reply).
pub fn server_error_text(value: &Value) -> Option<String> {
    match value {
        Value::ServerError(err) => Some(match err.details() {
            Some(detail) => format!("{} {detail}", err.code()),
            None => err.code().to_string(),
        }),
        _ => None,
    }
}

/// Sends `request` and reads exactly `expected.len()` bytes back, which must be `expected`.
#[track_caller]
pub fn exchange(stream: &mut TcpStream, request: &[u8], expected: &[u8]) {
    stream.write_all(request).expect("write");
    expect_bytes(stream, expected);
}

/// Reads exactly `expected.len()` bytes, which must be `expected`.
#[track_caller]
pub fn expect_bytes(stream: &mut TcpStream, expected: &[u8]) {
    let got = read_exactly(stream, expected.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected),
        "unexpected reply bytes"
    );
}

/// Switches a raw connection to RESP3 with `HELLO 3` and returns HELLO's whole reply (a map
/// that ends with `modules` and an empty array).
#[track_caller]
pub fn hello3(stream: &mut TcpStream) -> Vec<u8> {
    hello3_with(stream, b"HELLO 3\r\n")
}

/// [`hello3`] with the HELLO request given (one with AUTH or SETNAME).
#[track_caller]
pub fn hello3_with(stream: &mut TcpStream, request: &[u8]) -> Vec<u8> {
    stream.write_all(request).expect("write");
    let mut reply = Vec::new();
    while !reply.ends_with(b"$7\r\nmodules\r\n*0\r\n") {
        let byte = read_exactly(stream, 1);
        assert_eq!(byte.len(), 1, "connection closed in HELLO's reply");
        reply.extend(byte);
        assert!(reply.len() < 4096);
    }
    reply
}

/// Reads `n` bytes (fewer if the server closes the connection first).
pub fn read_exactly(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut got = vec![0; n];
    let mut filled = 0;
    while filled < n {
        match stream.read(&mut got[filled..]) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => panic!("read after {filled} of {n} bytes: {err}"),
        }
    }
    got.truncate(filled);
    got
}

/// Whether the server closed the connection: the next read sees the end of the stream (or a
/// reset), within the reply timeout.
pub fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(err) => matches!(
            err.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
        ),
    }
}

/// Polls `check` every 20 ms until it is true or `limit` has passed; whether it became true.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if check() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A line of /proc/self/status in KiB, e.g. `VmRSS`.
pub fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// A keyspace over a fresh database (`async` commits) in a temporary directory, without a
/// server: for tests of the command layer itself. Keep the directory as long as the keyspace.
pub fn open_keyspace() -> (Keyspace, TempDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = DbConfig::new(dir.path(), CommitMode::Async, None);
    let (db, _) = Database::open(config).expect("open the database");
    let ks = Keyspace::open(Arc::new(db), 16).expect("open the keyspace");
    (ks, dir)
}

/// How many rows `table` of the server's database holds (the keyspace's tables, read
/// beneath the commands: rows of expired keys and of deleted keys' elements count).
/// Rows of keys in `table` (`kv_keys`, `kv_expiry`) or of their elements (the others):
/// those of the server's own (function libraries, the map of databases, flushed databases:
/// owners below 0 in `kv_parts`) left out.
pub fn key_rows(server: &TestServer, table: &str) -> usize {
    let rows = all_rows(server, table);
    let own = |row: &Vec<tailstore_storage::Value>| {
        table == "kv_parts" && matches!(row[0], tailstore_storage::Value::Int(owner) if owner < 0)
    };
    rows.iter().filter(|row| !own(row)).count()
}

/// Whether the background tasks have freed every key's rows (deleted keys' elements, flushed
/// databases' keys) within ten seconds.
pub fn all_keys_freed(server: &TestServer) -> bool {
    // Ten seconds, not two: under the whole suite (and random pauses) a restarted server's
    // free of a FLUSHALL's 2,500 keys once took longer than two.
    eventually(Duration::from_secs(10), || {
        ["kv_keys", "kv_parts", "kv_expiry", "kv_zset", "kv_garbage"]
            .iter()
            .all(|table| key_rows(server, table) == 0)
    })
}

pub fn stored_rows(server: &TestServer, table: &str) -> usize {
    all_rows(server, table).len()
}

fn all_rows(server: &TestServer, table: &str) -> Vec<Vec<tailstore_storage::Value>> {
    let db = server.ks.database();
    let table = db.table(table).expect("table");
    let mut txn = db.begin();
    let rows = txn
        .scan(
            &table,
            &tailstore_engine::KeyRange::all(),
            tailstore_storage::ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan");
    txn.rollback();
    rows
}

/// For `time`, rounds of an MSET of `keys` (each to the round's number) and an MGET of
/// `read`: each MGET must see one MSET's values, or none of them (a flushed database), never
/// a mix. Returns the rounds run.
pub fn msets_are_read_whole(
    con: &mut redis::Connection,
    keys: &[String],
    read: &[String],
    time: Duration,
) -> usize {
    let began = Instant::now();
    let mut rounds = 0;
    while began.elapsed() < time {
        let mut mset = vec!["mset".to_string()];
        for key in keys {
            mset.extend([key.clone(), rounds.to_string()]);
        }
        let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
        q::<()>(con, &mset);
        let mut mget = vec!["mget"];
        mget.extend(read.iter().map(String::as_str));
        let values: Vec<Option<String>> = q(con, &mget);
        let first = &values[0];
        assert!(
            values.iter().all(|v| v == first),
            "round {rounds}: one MGET saw several MSETs' values, or some of them flushed: {:?}",
            values.iter().collect::<std::collections::BTreeSet<_>>()
        );
        rounds += 1;
    }
    rounds
}

/// This process's peak resident memory so far, in bytes (`VmHWM` in /proc/self/status): the
/// test servers run in it, so a test can bound what one request made the server hold.
pub fn peak_resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib << 10
}
