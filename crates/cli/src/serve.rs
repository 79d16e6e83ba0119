//! `tailstore serve`: the Redis-compatible server on a database directory.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tailstore_engine::cpus::{CpuError, CpuList};
use tailstore_engine::DbConfig;
use tailstore_kv::keyspace::notifications;
use tailstore_kv::server::{
    Plant, Secret, Server, ServerConfig, Tls, TlsFiles, UnixSocket, PLANT_VAR,
};
use tailstore_kv::Keyspace;
use tailstore_log::CommitMode;

use crate::args::ByteSize;
use crate::report::log_medium;
use crate::tpcc::{open_database, set_pmem_log_region, TuningArgs};
use crate::CliResult;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6379")]
    pub listen: SocketAddr,
    /// Database directory (created if missing; its parent must exist).
    #[arg(long, value_name = "DIR")]
    pub db: PathBuf,
    /// Commit mode: fsync, buffer (tail of the log in PMEM), pmem-log (whole log in PMEM) or
    /// async (replies before the write is durable: acknowledged writes can be lost).
    #[arg(long = "commit", value_name = "MODE", default_value = "buffer")]
    pub commit: CommitMode,
    /// Directory of the log file (default: the database directory).
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
    /// PMEM file for buffer and pmem-log: on a DAX file system, or on /dev/shm to emulate PMEM
    /// (survives a process crash, not a power cut). Default for those modes:
    /// /dev/shm/tailstore-<port>.pmem. The double-write area (a copy of each page before it is
    /// written, to repair pages a power cut tears) goes beside it, in PATH.pages: keep both
    /// with the database.
    #[arg(long, value_name = "PATH")]
    pub pmem: Option<PathBuf>,
    /// Buffer pool: the data kept in memory; more data than this is paged to the data file.
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub buffer_pool: ByteSize,
    /// Most connections at once; more are refused with Redis's error.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub max_clients: usize,
    /// Largest bulk string a request may carry (Redis's proto-max-bulk-len; at least 1MiB,
    /// as Redis requires).
    #[arg(long, value_name = "SIZE", default_value = "512MiB")]
    pub max_bulk: ByteSize,
    /// Most memory a Lua script's state may hold, per event loop (scripts run in one state
    /// per loop). An allocation past it is refused: the script fails with "not enough
    /// memory" and its writes are undone. At least 8MiB.
    #[arg(long, value_name = "SIZE", default_value = "512MiB")]
    pub script_memory: ByteSize,
    /// Milliseconds a Lua script (EVAL, FCALL) may run before the server stops it and undoes
    /// its writes, with an error to its client (Redis's busy-reply-threshold, after which
    /// Redis instead answers BUSY to every other client until SCRIPT KILL). SCRIPT KILL and
    /// FUNCTION KILL stop one sooner. At least 1.
    #[arg(long, value_name = "MILLIS", default_value_t = 5000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub script_time_limit: u64,
    /// Numbered databases (SELECT 0 .. N-1).
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub databases: u32,
    /// Keyspace notifications at start, in Redis's letters (e.g. KEA: every class of event
    /// on both kinds of channel; Ex: expired keys on __keyevent@<db>__:expired; n and m add
    /// new keys and the misses of read lookups, which A leaves out). Empty by
    /// default, as in Redis: none. CONFIG SET notify-keyspace-events changes it while the
    /// server runs. Events are published once their write is durable.
    #[arg(long, value_name = "FLAGS", default_value = "", value_parser = parse_notifications)]
    pub notify_keyspace_events: u32,
    /// Event-loop threads (default: one per core the process may use, hardware threads of a
    /// core counted once). Connections are dealt to them in turn. Reads run beside writers;
    /// writes to a table are applied one at a time (each takes the table's tree latch), so
    /// a write-heavy load gains less from more loops than a read-heavy one, and on a machine
    /// of few cores shared with its clients it sees a longer tail (a loop waiting for the
    /// latch holds its replies): there one loop cut the p99 of 4 KiB SETs on two cores by
    /// a third (half before decision 248), at 15-25% fewer SETs per second. Fewer loops
    /// than cores leave `--background-cpus auto` cores of its own: see ARCHITECTURE.md,
    /// decisions 57, 104 and 248.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Microseconds an event loop that has just served requests keeps polling for more
    /// before it sleeps (0: sleep at once). A client that sends its next request within
    /// this window finds the loop awake, which saves the wake-up of a sleeping thread on
    /// every round trip; the loop yields the processor between polls, and an idle server
    /// never polls.
    #[arg(long, value_name = "MICROS", default_value_t = 50)]
    pub poll_spin: u64,
    /// After a crash, redo every page the log changed before serving. By default the server
    /// answers once the log is read: each page is redone when a command first needs it, and
    /// the first checkpoint redoes the rest in the background (ARCHITECTURE.md, decision 95).
    #[arg(long)]
    pub redo_before_serving: bool,
    /// Processors for the background threads (the checkpointer, the log writer and the
    /// keyspace's housekeeping), as a list like `3` or `2-3,6`. `auto`: the last of the
    /// cores the process may use, as many as it has beyond the event loops (with two
    /// single-threaded cores and `--threads 1`, the second), or, with none to spare (as with
    /// the default of a loop per core), as `any`: wherever the scheduler puts them. The
    /// event loops are never confined. The background threads stream over whole pages
    /// (checksums, copies, writes), which evicts the caches of the processor they run on;
    /// kept apart, they leave the loops' caches to the loops (ARCHITECTURE.md, decision 103).
    #[arg(long, value_name = "LIST", default_value = "auto")]
    pub background_cpus: BackgroundCpus,
    /// Password clients must give (AUTH, or HELLO … AUTH) before their commands run: Redis's
    /// `requirepass`, the password of its `default` user. Visible to other users of this
    /// machine in the process list; prefer --requirepass-file. CONFIG SET requirepass
    /// changes it while the server runs (until it restarts).
    #[arg(long, value_name = "PASSWORD", conflicts_with = "requirepass_file")]
    pub requirepass: Option<Secret>,
    /// Reads the password (see --requirepass) from the first line of FILE.
    #[arg(long, value_name = "FILE")]
    pub requirepass_file: Option<PathBuf>,
    /// Speak TLS, with this certificate chain (PEM, the server's certificate first), on
    /// --tls-listen if given, else on --listen (which then takes only TLS: as Redis's
    /// tls-port with port 0). Needs --tls-key-file.
    #[arg(long, value_name = "FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// The private key of --tls-cert-file (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// With TLS, ask every client for a certificate signed by one of these authorities
    /// (PEM), as Redis's tls-auth-clients does; without it, clients are not asked for one.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    pub tls_ca_cert_file: Option<PathBuf>,
    /// A second address to listen on, for TLS connections, while --listen goes on taking
    /// plain TCP ones (Redis's tls-port beside port). Needs --tls-cert-file.
    #[arg(long, value_name = "ADDR", requires = "tls_cert_file")]
    pub tls_listen: Option<SocketAddr>,
    /// A Unix domain socket to listen on as well, for clients on this machine (Redis's
    /// unixsocket; `redis-cli -s PATH`). A socket file left at PATH by a server that did not
    /// stop cleanly is replaced; the file is removed when the server stops.
    #[arg(long, value_name = "PATH")]
    pub unixsocket: Option<PathBuf>,
    /// The socket file's permissions, in octal, e.g. 700 (Redis's unixsocketperm; by
    /// default, as the umask leaves them).
    #[arg(long, value_name = "MODE", requires = "unixsocket", value_parser = parse_mode)]
    pub unixsocketperm: Option<u32>,
    /// A file of ACL users, one `user NAME RULES…` line each (Redis's aclfile): loaded at
    /// start (a line that does not read refuses the start) and by ACL LOAD; ACL SAVE
    /// writes the users there. Without it users made by ACL SETUSER last until a restart.
    #[arg(long, value_name = "PATH")]
    pub aclfile: Option<PathBuf>,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// Where `serve` runs its background threads (`--background-cpus`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackgroundCpus {
    Auto,
    Any,
    List(CpuList),
}

impl FromStr for BackgroundCpus {
    type Err = CpuError;

    fn from_str(text: &str) -> Result<BackgroundCpus, CpuError> {
        Ok(match text {
            "auto" => BackgroundCpus::Auto,
            "any" => BackgroundCpus::Any,
            list => BackgroundCpus::List(list.parse()?),
        })
    }
}

impl BackgroundCpus {
    /// The processors for the background threads of a server with `loops` event loops, of
    /// the `allowed` ones, grouped into `cores` (see [`CpuList::cores`]); `None`: wherever
    /// the scheduler puts them. `auto` counts cores, not processors: the hardware threads of
    /// a core share its caches, so it hands out only whole cores the loops can spare (the
    /// last ones).
    fn resolve(
        &self,
        allowed: &CpuList,
        cores: &[CpuList],
        loops: usize,
    ) -> Result<Option<CpuList>, CpuError> {
        Ok(match self {
            BackgroundCpus::Any => None,
            BackgroundCpus::List(list) => {
                list.check_within(allowed)?;
                Some(list.clone())
            }
            BackgroundCpus::Auto => cores.get(loops..).and_then(CpuList::joined),
        })
    }
}

/// The log's ring in DRAM (`fsync`, `async`): a commit's record must fit half of it, which
/// bounds the largest value one command can write (see `Database::max_commit_bytes`: 8 MiB
/// with this ring).
const LOG_RING: usize = 64 << 20;

/// The PMEM log buffer in `buffer` mode. Appends use 64 MiB of it past the hardened LSN (the
/// same 8 MiB bound on a commit); the rest keeps the last lap of the log below it, which a
/// restart reads from PMEM instead of from the disk (decision 109). Larger than what a restart
/// replays at most by default (`BUFFER_KEEP_INTERVALS` plus two intervals, 896 MiB), so that
/// all of it comes from there.
const BUFFER_LOG_RING: usize = 1 << 30;

/// What a checkpoint leaves dirty in `buffer` mode by default, in checkpoint intervals
/// (decision 70, and 109 for the size): with the default interval, 640 MiB, so that a page
/// changed again and again is written once per 768 MiB of log instead of once per 384 MiB,
/// half the pages a 4 KiB-SET load writes, and the restart that replays it reads it from
/// the PMEM ring.
const BUFFER_KEEP_INTERVALS: u64 = 5;

/// Log written between checkpoints' starts by default, in the modes without PMEM: recovery
/// after a crash replays at most about twice this much, which keeps a restart well under a
/// second.
const DEFAULT_CHECKPOINT_LOG: u64 = 256 << 20;

/// The same in `buffer` mode, whose checkpoints leave the pages of the last five intervals
/// dirty by default (`BUFFER_KEEP_INTERVALS`): a restart replays at most 896 MiB, read from
/// the PMEM ring. (In `fsync` and `async` modes each checkpoint's start makes the next change
/// of every page log a full image of it, so more frequent starts would cost log volume there.)
const BUFFER_CHECKPOINT_LOG: u64 = 128 << 20;

/// Each log record counts as at least this many bytes in the checkpoint policy (see the
/// engine's `replay_weight.rs`): a restart after SIGKILL replayed ~112,000 4 KiB SETs
/// (492 MB) in 1.25 s, but ~825,000 100-byte SETs (177 MB) in 1.42 s, so at a bound in
/// bytes alone small values would take several times as long to replay as large ones. A
/// 4 KiB SET's record is heavier than the floor and counts as before.
const RECORD_REPLAY_FLOOR: u64 = 1 << 10;

/// The whole log's PMEM region in `pmem-log` mode when `serve` creates the database. The
/// engine's 256 MiB (a checkpoint every 64 MiB, writers waiting once 192 MiB are unreleased)
/// kept 4 KiB SETs waiting for checkpoints nearly half of the time; with 768 MiB they never
/// waited and ran about 1.5× faster, and a restart replays at most 576 MiB (docs/benchmarks.md,
/// "The whole log in PMEM, with room").
const PMEM_LOG_REGION: usize = 768 << 20;

/// Refuses a `--listen` or `--tls-listen` address that cannot be bound, before the database
/// is opened: a new one would otherwise be created (with its PMEM files, a GiB on /dev/shm)
/// and left behind by a server that then failed to listen. The port is free again when
/// this returns; one taken in the moment before the server binds it is still refused then.
/// Every address stays bound until all are: `--tls-listen` on the port of `--listen` is
/// refused too.
fn check_ports_free(args: &ServeArgs) -> CliResult<()> {
    let mut bound = Vec::new();
    for address in std::iter::once(args.listen).chain(args.tls_listen) {
        let listener = std::net::TcpListener::bind(address)
            .map_err(|e| format!("cannot listen on {address}: {e}"))?;
        bound.push(listener);
    }
    Ok(())
}

pub fn run(args: &ServeArgs) -> CliResult<()> {
    let allowed = CpuList::allowed()?;
    let cores = allowed.cores(CpuList::core_siblings);
    let loops = args.threads.unwrap_or_else(|| default_loops(&cores));
    let background_cpus = args
        .background_cpus
        .resolve(&allowed, &cores, loops)
        .map_err(|e| format!("--background-cpus: {e}"))?;
    let password = password(args)?;
    let tls = tls(args)?;
    // Before the database is touched, as a bad setting is.
    let plants = plants()?;
    let max_clients = open_files_for(args.max_clients)?;
    let unix_socket = args.unixsocket.clone().map(|path| UnixSocket {
        path,
        permissions: args.unixsocketperm,
    });
    if let Some(socket) = &unix_socket {
        // Before the database is touched; the server replaces a stale socket when it starts.
        socket
            .stale()
            .map_err(|e| format!("--unixsocket {}: {e}", socket.path.display()))?;
    }
    if let Some(path) = &args.aclfile {
        // Before the database is touched, as Redis refuses to start on a bad ACL file.
        tailstore_kv::server::check_acl_file(path, password.as_ref())
            .map_err(|e| format!("--aclfile: {e}"))?;
    }
    check_ports_free(args)?;
    validate(args)?;
    let mut config = db_config(args);
    config.background_cpus = background_cpus.clone();
    let (db, report) = open_database(config.clone())?;
    let recovery = report.recovery.elapsed;
    let medium = log_medium(db.log(), &config.log);
    let mut restored = match report.recovery.pmem_tail_bytes {
        0 => String::new(),
        n => format!("; the log's last {n} bytes were only in the PMEM log buffer"),
    };
    if let n @ 1.. = report.recovery.pages_checked_against_copies {
        restored += &format!("; {n} pages checked against their copies in the double-write area");
    }
    if let n @ 1.. = report.recovery.torn_pages_restored {
        restored += &format!("; {n} pages torn by the crash restored from the double-write area");
    }
    let redo = match report.recovery.pages_to_redo {
        0 => String::new(),
        n if config.redo_at_first_load => {
            format!("; {n} pages to redo, each at its first use, the rest in the background")
        }
        n => format!("; {n} pages redone"),
    };
    eprintln!(
        "tailstore serve: database {} opened in {:.1} ms (recovery replayed {} log bytes in {} records{redo}{restored})",
        args.db.display(),
        recovery.as_secs_f64() * 1e3,
        report.recovery.bytes,
        report.recovery.records
    );
    let durable = args.commit.is_durable();
    let mut pages = match config.doublewrite_file() {
        Some(file) => format!("; pages copied to {} before each write", file.display()),
        None => String::new(),
    };
    if args.commit == CommitMode::Buffer {
        // What /dev/shm holds once the log has gone round (decision 109).
        let ring = ByteSize(db.log().ring_bytes() as usize);
        pages = format!("; a {ring} PMEM log buffer, read back at restarts{pages}");
    }
    let durability = format!(
        "{} ({medium}){pages}{}",
        args.commit,
        if durable {
            ""
        } else {
            "; async: replies before writes are durable, acknowledged writes can be lost"
        }
    );
    let ks = Arc::new(Keyspace::open(Arc::new(db), args.databases)?);
    ks.notifications.set(args.notify_keyspace_events);
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let server_config = ServerConfig {
        listen: args.listen,
        max_clients,
        max_bulk: args.max_bulk.0,
        query_limit: tailstore_kv::server::DEFAULT_QUERY_LIMIT,
        script_memory: args.script_memory.0,
        script_time_limit: Duration::from_millis(args.script_time_limit),
        threads: loops,
        poll_spin: Duration::from_micros(args.poll_spin),
        durability: durability.clone(),
        durable_replies: durable,
        recovery,
        password: password.clone(),
        tls: tls.clone(),
        tls_listen: args.tls_listen,
        unix_socket,
        aclfile: args.aclfile.clone(),
        plants,
    };
    let server = Server::start(ks.clone(), server_config, stop).map_err(|e| {
        let mut addresses = args.listen.to_string();
        if let Some(tls) = args.tls_listen {
            addresses += &format!(" and {tls}");
        }
        if let Some(path) = &args.unixsocket {
            addresses += &format!(" and {}", path.display());
        }
        format!("cannot listen on {addresses}: {e}")
    })?;
    let placement = match &background_cpus {
        Some(cpus) => format!("on processors {cpus} of {allowed}"),
        None => "wherever the scheduler puts them".to_string(),
    };
    let addresses = std::iter::once(server.address()).chain(server.tls_address());
    for address in addresses.filter(|a| password.is_none() && !a.ip().is_loopback()) {
        eprintln!(
            "tailstore serve: warning: listening beyond loopback with no password: anyone \
             who reaches {address} can read and write every key (--requirepass-file sets one)"
        );
    }
    eprintln!(
        "tailstore serve: listening on {}; commit mode {durability}; {loops} event loop{}, background threads {placement}; {}; {}",
        server.address(),
        if loops == 1 { "" } else { "s" },
        if password.is_some() { "clients must AUTH" } else { "no password" },
        protocols(&server, tls.is_some(), args.tls_ca_cert_file.is_some())
            + &server
                .unix_socket()
                .map(|path| format!(", and Unix socket {}", path.display()))
                .unwrap_or_default()
    );
    let served = server.wait();
    close(ks)?;
    served.map_err(|e| format!("server failed: {e}"))?;
    eprintln!("tailstore serve: stopped cleanly (checkpoint written)");
    Ok(())
}

/// File descriptors `serve` keeps for itself beside its clients' sockets: the database's
/// files, each event loop's poll and waker, the listeners, and room to spare (Redis keeps
/// 32; the loops and the database take more here).
const RESERVED_FDS: u64 = 64;

/// Raises this process's limit on open files so that `max_clients` connections fit beside
/// the server's own files, as Redis does at start; where the hard limit forbids it, the
/// server takes fewer clients and says so (past the limit, accept would fail for want of a
/// descriptor instead of refusing the client with Redis's "max number of clients"). The
/// number of clients to take.
fn open_files_for(max_clients: usize) -> CliResult<usize> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let wanted = (max_clients as u64).saturating_add(RESERVED_FDS);
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(u64::MAX);
    if current >= wanted {
        return Ok(max_clients);
    }
    let raised = wanted.min(limit.maximum.unwrap_or(u64::MAX));
    let raise = Rlimit {
        current: Some(raised),
        maximum: limit.maximum,
    };
    let available = match setrlimit(Resource::Nofile, raise) {
        Ok(()) => raised,
        Err(_) => current,
    };
    if available >= wanted {
        return Ok(max_clients);
    }
    let clients = available.saturating_sub(RESERVED_FDS);
    if clients == 0 {
        return Err(format!(
            "this process may open only {available} files (ulimit -n), which leaves no room for \
             clients beside the server's own {RESERVED_FDS}: raise the limit"
        )
        .into());
    }
    eprintln!(
        "tailstore serve: warning: --max-clients {max_clients} needs {wanted} open files and \
         this process may open only {available} (ulimit -n): taking at most {clients} clients"
    );
    Ok(clients as usize)
}

/// What the start line says of the protocols spoken: "plain TCP", "TLS", or both with the
/// TLS address; and whether TLS clients must present a certificate.
fn protocols(server: &Server, tls: bool, certified_clients: bool) -> String {
    let spoken = match (tls, server.tls_address()) {
        (false, _) => return "plain TCP".into(),
        (true, None) => "TLS".to_string(),
        (true, Some(address)) => format!("plain TCP, and TLS on {address}"),
    };
    match certified_clients {
        true => format!("{spoken}, TLS clients must present a certificate"),
        false => spoken,
    }
}

/// The bugs a test plants in this server (`TAILSTORE_PLANT`, plant names separated by
/// commas; see `tailstore_kv::server::Plant`), read only in builds with debug assertions:
/// a release build ignores the variable and plants nothing. An unknown name is refused, so
/// that a test's plant cannot go missing unnoticed.
fn plants() -> CliResult<Vec<Plant>> {
    if !cfg!(debug_assertions) {
        return Ok(Vec::new());
    }
    let Some(list) = std::env::var_os(PLANT_VAR) else {
        return Ok(Vec::new());
    };
    let list = list
        .into_string()
        .map_err(|_| format!("{PLANT_VAR}: not UTF-8"))?;
    let plants = Plant::parse_list(&list).map_err(|e| format!("{PLANT_VAR}: {e}"))?;
    if !plants.is_empty() {
        let names: Vec<&str> = plants.iter().map(|p| p.name()).collect();
        eprintln!(
            "tailstore serve: planted bugs (for a test): {}",
            names.join(", ")
        );
    }
    Ok(plants)
}

/// A file mode in octal, as `--unixsocketperm` takes it (Redis's unixsocketperm).
/// `--notify-keyspace-events`' letters, as CONFIG SET reads them.
fn parse_notifications(text: &str) -> Result<u32, String> {
    notifications::parse(text.as_bytes()).map_err(|refused| refused.to_string())
}

fn parse_mode(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text, 8)
        .ok()
        .filter(|mode| *mode <= 0o777)
        .ok_or_else(|| format!("'{text}' is not a file mode in octal, 0 to 777"))
}

/// The password `--requirepass` or `--requirepass-file` gives; `None` for none (or empty).
fn password(args: &ServeArgs) -> CliResult<Option<Secret>> {
    let secret = match (&args.requirepass, &args.requirepass_file) {
        (Some(secret), _) => secret.clone(),
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read --requirepass-file {}: {e}", file.display()))?;
            Secret(text.lines().next().unwrap_or_default().as_bytes().to_vec())
        }
        (None, None) => return Ok(None),
    };
    if secret.0.is_empty() {
        return Err(
            "the password (--requirepass or --requirepass-file's first line) is empty".into(),
        );
    }
    Ok(Some(secret))
}

/// The TLS settings `--tls-cert-file`, `--tls-key-file` and `--tls-ca-cert-file` give,
/// loaded and checked; `None` for plain TCP.
fn tls(args: &ServeArgs) -> CliResult<Option<Tls>> {
    let (Some(cert), Some(key)) = (&args.tls_cert_file, &args.tls_key_file) else {
        return Ok(None);
    };
    let files = TlsFiles {
        cert: cert.clone(),
        key: key.clone(),
        client_ca: args.tls_ca_cert_file.clone(),
    };
    Ok(Some(Tls::load(&files).map_err(|e| format!("TLS: {e}"))?))
}

fn validate(args: &ServeArgs) -> CliResult<()> {
    let most = tailstore_kv::keyspace::MAX_DATABASES;
    if !(1..=most).contains(&args.databases) {
        return Err(format!("--databases must be from 1 to {most}").into());
    }
    if args.max_clients == 0 {
        return Err("--max-clients must be at least 1".into());
    }
    if args.threads == Some(0) {
        return Err("--threads must be at least 1".into());
    }
    if args.buffer_pool.0 < 1 << 20 {
        return Err("--buffer-pool must be at least 1MiB".into());
    }
    if args.max_bulk.0 < 1 << 20 {
        // A smaller one refuses ordinary values; Redis sets the same floor.
        return Err("--max-bulk must be at least 1MiB".into());
    }
    if args.script_memory.0 < tailstore_kv::script::MIN_MEMORY_LIMIT {
        return Err("--script-memory must be at least 8MiB".into());
    }
    args.tuning.validate()?;
    if !args.db.exists() {
        std::fs::create_dir(&args.db).map_err(|e| {
            format!(
                "cannot create the database directory {}: {e}",
                args.db.display()
            )
        })?;
    } else if !args.db.is_dir() {
        return Err(format!("{} is not a directory", args.db.display()).into());
    }
    Ok(())
}

fn db_config(args: &ServeArgs) -> DbConfig {
    let pmem = args.commit.uses_pmem().then(|| {
        args.pmem.clone().unwrap_or_else(|| {
            PathBuf::from(format!("/dev/shm/tailstore-{}.pmem", args.listen.port()))
        })
    });
    let mut config = DbConfig::new(&args.db, args.commit, pmem);
    if let Some(dir) = &args.log_dir {
        config.log.log_dir = dir.clone();
    }
    config.buffer_pool_bytes = args.buffer_pool.0;
    config.log.ring_bytes = match args.commit {
        CommitMode::Buffer => BUFFER_LOG_RING,
        _ => LOG_RING,
    };
    config.record_replay_floor = RECORD_REPLAY_FLOOR;
    config.redo_at_first_load = !args.redo_before_serving;
    match args.commit {
        CommitMode::PmemLog => set_pmem_log_region(&mut config, PMEM_LOG_REGION),
        CommitMode::Buffer => config.checkpoint_log_bytes = BUFFER_CHECKPOINT_LOG,
        _ => config.checkpoint_log_bytes = DEFAULT_CHECKPOINT_LOG,
    }
    args.tuning.apply(&mut config);
    if args.tuning.checkpoint_keep.is_none() {
        match args.commit {
            CommitMode::Buffer => {
                config.checkpoint_keep_bytes = BUFFER_KEEP_INTERVALS * config.checkpoint_log_bytes
            }
            CommitMode::PmemLog => config.checkpoint_keep_bytes = 2 * config.checkpoint_log_bytes,
            _ => {}
        }
    }
    if args.tuning.max_replay.is_none() && args.commit != CommitMode::PmemLog {
        // A restart replays at most the log a checkpoint keeps plus two checkpoint
        // intervals, however far the checkpoints fall behind the writes (see
        // `Shared::wait_for_checkpoint_room`).
        config.max_replay_bytes =
            Some(config.checkpoint_keep_bytes + 2 * config.checkpoint_log_bytes);
    }
    config
}

/// One event loop per core of the processors the process may use (see `ServeArgs::threads`
/// and [`CpuList::cores`]).
fn default_loops(cores: &[CpuList]) -> usize {
    cores.len()
}

/// Stops the keyspace and closes the database with a checkpoint.
fn close(ks: Arc<Keyspace>) -> CliResult<()> {
    let ks = Arc::try_unwrap(ks).map_err(|_| "the keyspace is still in use at shutdown")?;
    let db = Arc::try_unwrap(ks.into_database())
        .map_err(|_| "the database is still in use at shutdown")?;
    db.close()
        .map_err(|e| format!("closing the database failed: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(text: &str) -> CpuList {
        text.parse().expect("a valid list")
    }

    /// One core per processor.
    fn no_smt(_: usize) -> Option<CpuList> {
        None
    }

    /// `choice` resolved for `loops` loops on the processors `allowed`, whose cores
    /// `siblings` tells.
    fn resolve_on(
        choice: &BackgroundCpus,
        allowed: &CpuList,
        loops: usize,
        siblings: impl Fn(usize) -> Option<CpuList>,
    ) -> Result<Option<CpuList>, CpuError> {
        choice.resolve(allowed, &allowed.cores(siblings), loops)
    }

    #[test]
    fn auto_gives_the_background_threads_the_cores_beyond_the_loops() {
        let auto = BackgroundCpus::Auto;
        let resolved =
            |allowed: &str, loops| resolve_on(&auto, &list(allowed), loops, no_smt).expect("auto");
        assert_eq!(resolved("0-1", 1), Some(list("1")));
        assert_eq!(resolved("0-15", 8), Some(list("8-15")));
        assert_eq!(resolved("2,5,7", 1), Some(list("5,7")));
        // No processor to spare: wherever the scheduler puts them.
        assert_eq!(resolved("0-1", 2), None);
        assert_eq!(resolved("3", 1), None);
        // Eight cores of two hardware threads, the siblings numbered apart (0 and 8, …).
        let smt = |cpu: usize| Some(list(&format!("{},{}", cpu % 8, cpu % 8 + 8)));
        let smt_resolved = |loops| resolve_on(&auto, &list("0-15"), loops, smt).expect("auto");
        assert_eq!(smt_resolved(8), None, "no core to spare");
        assert_eq!(smt_resolved(6), Some(list("6-7,14-15")));
    }

    #[test]
    fn the_default_runs_one_loop_per_core() {
        assert_eq!(default_loops(&list("0-1").cores(no_smt)), 2);
        assert_eq!(default_loops(&list("3").cores(no_smt)), 1);
        // Eight cores of two hardware threads each, numbered apart (0 and 8, …).
        let smt = |cpu: usize| Some(list(&format!("{},{}", cpu % 8, cpu % 8 + 8)));
        assert_eq!(default_loops(&list("0-15").cores(smt)), 8);
        assert_eq!(default_loops(&list("0-3,8-9").cores(smt)), 4);
    }

    fn config_of(args: &[&str]) -> DbConfig {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let argv = ["serve", "--db", "/tmp/db"].iter().chain(args);
        db_config(&<Cli as clap::Parser>::parse_from(argv).serve)
    }

    /// What a restart replays at most lies in the PMEM ring's last lap, so that a restart
    /// reads none of it from the disk (decision 109); a shorter interval keeps less.
    #[test]
    fn buffer_mode_replays_no_more_than_its_ring_keeps() {
        let config = config_of(&[]);
        let ring = config.log.ring_bytes as u64;
        let lap = ring - tailstore_log::format::append_window(CommitMode::Buffer, ring);
        let replay = config.max_replay_bytes.expect("a bound");
        assert!(replay <= lap, "replays {replay}, the lap holds {lap}");
        assert_eq!(config.checkpoint_keep_bytes, 640 << 20);
        let config = config_of(&["--checkpoint-log", "1MiB"]);
        assert_eq!(config.checkpoint_keep_bytes, 5 << 20);
        assert_eq!(config_of(&["--commit", "fsync"]).checkpoint_keep_bytes, 0);
    }

    #[test]
    fn a_given_list_must_be_among_the_allowed_processors() {
        let allowed = list("0-3");
        let given = |text: &str| text.parse::<BackgroundCpus>().expect("valid");
        assert_eq!(
            resolve_on(&given("any"), &allowed, 1, no_smt).expect("any"),
            None
        );
        assert_eq!(
            resolve_on(&given("2-3"), &allowed, 1, no_smt).expect("within"),
            Some(list("2-3"))
        );
        let err = resolve_on(&given("3-4"), &allowed, 1, no_smt).expect_err("4 is not allowed");
        assert!(err.to_string().contains("not all among"), "{err}");
        assert!("sometimes".parse::<BackgroundCpus>().is_err());
    }
}
