//! `tailstore serve` from the outside: the settings it refuses, and how it stops.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Client, Server};
use tailstore_engine::cpus::CpuList;
use tailstore_resp::Value;

/// Runs `tailstore serve` with `args` and expects it to exit at once with an error naming
/// `needle`; a server that starts instead is killed and the test fails.
fn serve_refused(args: &[&str], needle: &str) {
    let mut child = support::spawn_serve(args, Stdio::piped());
    let limit = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?}: the server started instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("output");
    let err = support::text(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(err.contains(needle), "{args:?}: {needle:?} not in {err:?}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
}

/// `tailstore serve` refuses settings it cannot serve with, before it creates or opens
/// anything: one clear line, a non-zero status, and no database directory left behind.
#[test]
fn serve_refuses_bad_settings_before_touching_the_database() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("db");
    let db = support::path(&db);
    for (flag, value, needle) in [
        ("--max-bulk", "0", "--max-bulk must be at least 1MiB"),
        ("--max-bulk", "1KiB", "--max-bulk must be at least 1MiB"),
        (
            "--script-memory",
            "1MiB",
            "--script-memory must be at least 8MiB",
        ),
        (
            "--buffer-pool",
            "4KiB",
            "--buffer-pool must be at least 1MiB",
        ),
        (
            "--databases",
            "0",
            "--databases must be from 1 to 1073741824",
        ),
        (
            "--databases",
            "1073741825",
            "--databases must be from 1 to 1073741824",
        ),
        ("--max-clients", "0", "--max-clients must be at least 1"),
        ("--threads", "0", "--threads must be at least 1"),
        ("--listen", "999.1.1.1:1", "invalid socket address"),
        ("--commit", "sometimes", "--commit"),
        ("--background-cpus", "3-1", "runs backwards"),
        ("--background-cpus", "some", "invalid processor list"),
        // No machine here has a thousand processors.
        ("--background-cpus", "1023", "not all among those"),
        (
            "--requirepass-file",
            "/nonexistent/password",
            "cannot read --requirepass-file /nonexistent/password",
        ),
        ("--requirepass", "", "is empty"),
        (
            "--notify-keyspace-events",
            "KEq",
            "Invalid event class character",
        ),
    ] {
        let mut args = vec!["--db", db, flag, value];
        if flag != "--listen" {
            // Port 0: a server started by mistake takes no one's port.
            args.extend(["--listen", "127.0.0.1:0"]);
        }
        serve_refused(&args, needle);
        assert!(
            !std::path::Path::new(db).exists(),
            "{flag} {value}: the database directory was created"
        );
    }
    let (missing, here) = ("/nonexistent/server.crt", "Cargo.toml");
    for (tls, needle) in [
        (
            &["--tls-cert-file", missing, "--tls-key-file", missing][..],
            "TLS: cannot read /nonexistent/server.crt",
        ),
        (
            &["--tls-cert-file", here, "--tls-key-file", here],
            "TLS: Cargo.toml holds no PEM certificate",
        ),
        (&["--tls-cert-file", here], "--tls-key-file"),
        (&["--tls-ca-cert-file", here], "--tls-cert-file"),
    ] {
        let args = [&["--db", db, "--listen", "127.0.0.1:0"][..], tls].concat();
        serve_refused(&args, needle);
        assert!(!std::path::Path::new(db).exists(), "{tls:?}: created");
    }
}

/// `--requirepass-file`: the first line of the file is the password; clients are refused
/// until they give it, and the start says so. Listening beyond loopback with no password is
/// warned of.
#[test]
fn a_password_from_a_file_is_asked_for() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let shm = support::pmem_dir();
    let file = dir.path().join("password");
    std::fs::write(&file, "correct horse\nnot this line\n").expect("write the password");
    let db = dir.path().join("db");
    let pmem = shm.path().join("db.pmem");
    let args = [
        "--db",
        support::path(&db),
        "--pmem",
        support::path(&pmem),
        "--requirepass-file",
        support::path(&file),
    ];
    let with_events = [&args[..], &["--notify-keyspace-events", "Kg$"]].concat();
    let server = Server::start(&with_events);
    assert!(server.had_said("clients must AUTH"), "{:?}", server.said);
    let mut client = Client::connect(server.address).expect("connect");
    let noauth = Value::Error("NOAUTH Authentication required.".into());
    assert_eq!(client.call(&[b"SET", b"k", b"v"]), noauth);
    assert_eq!(
        client.call(&[b"AUTH", b"correct horse\nnot this line"]),
        Value::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert_eq!(
        client.call(&[b"AUTH", b"correct horse"]),
        Value::Simple("OK".into())
    );
    assert_eq!(
        client.call(&[b"SET", b"k", b"v"]),
        Value::Simple("OK".into())
    );
    // (The flag given at start, as CONFIG GET shows it.)
    assert_eq!(
        client.call(&[b"CONFIG", b"GET", b"notify-keyspace-events"]),
        Value::Array(vec![
            Value::Bulk(b"notify-keyspace-events".to_vec()),
            Value::Bulk(b"g$K".to_vec())
        ])
    );
    drop(server);

    let mut open = support::spawn_serve(
        &[
            "--db",
            support::path(&db),
            "--pmem",
            support::path(&pmem),
            "--listen",
            "0.0.0.0:0",
        ],
        Stdio::null(),
    );
    let stderr = open.stderr.take().expect("stderr");
    let said: Vec<String> = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map_while(Result::ok)
        .take_while(|line| !line.contains("listening on"))
        .collect();
    let _ = open.kill();
    let _ = open.wait();
    assert!(said.iter().any(|line| line.contains("warning")), "{said:?}");
}

/// A clean stop, by SIGTERM, SIGINT or SHUTDOWN: the server exits 0 after a checkpoint, says
/// so, and the next start replays nothing and has every key.
#[test]
fn a_stopped_server_checkpoints_and_restarts_with_nothing_to_replay() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let shm = support::pmem_dir();
    let db = dir.path().join("db");
    let pmem = shm.path().join("db.pmem");
    let args = ["--db", support::path(&db), "--pmem", support::path(&pmem)];
    let mut keys = 0;
    for how in ["SIGTERM", "SIGINT", "SHUTDOWN"] {
        let server = Server::start(&args);
        let mut client = Client::connect(server.address).expect("connect");
        let restarted = keys > 0;
        if restarted {
            assert!(
                server.had_said("replayed 0 log bytes"),
                "after a clean stop, a start replays nothing: {:?}",
                server.said
            );
        }
        assert_eq!(
            client.call(&[b"DBSIZE"]),
            Value::Int(keys),
            "{how}: the keys of the runs before"
        );
        for _ in 0..500 {
            let key = format!("key:{keys}");
            assert_eq!(
                client.call(&[b"SET", key.as_bytes(), &[b'v'; 3000]]),
                Value::Simple("OK".into())
            );
            keys += 1;
        }
        match how {
            "SHUTDOWN" => {
                // Redis's SHUTDOWN does not reply: the connection just closes.
                client.send(&[b"SHUTDOWN"]).expect("send SHUTDOWN");
                assert!(client.receive().is_err(), "SHUTDOWN replied");
            }
            signal => {
                let status = Command::new("kill")
                    .args([
                        &format!("-{}", &signal[3..]),
                        &server.child.id().to_string(),
                    ])
                    .status()
                    .expect("run kill");
                assert!(status.success(), "kill -{signal}");
            }
        }
        let (status, said) = server.exit_within(Duration::from_secs(60));
        assert!(status.success(), "{how}: exit status {status}: {said:?}");
        assert!(
            said.iter()
                .any(|line| line.contains("stopped cleanly (checkpoint written)")),
            "{how}: {said:?}"
        );
    }
    let server = Server::start(&args);
    let mut client = Client::connect(server.address).expect("connect");
    assert_eq!(client.call(&[b"DBSIZE"]), Value::Int(keys));
}

/// The processors each thread of the server process may run on, by thread name. A thread
/// that ends while it is read (the open's short-lived recovery threads) is left out.
fn thread_placement(pid: u32) -> Vec<(String, String)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads");
    let mut threads = Vec::new();
    for task in tasks {
        let Ok(task) = task else { continue };
        let task = task.path();
        let read = |file: &str| std::fs::read_to_string(task.join(file));
        let (Ok(name), Ok(status)) = (read("comm"), read("status")) else {
            continue;
        };
        let allowed = status
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list");
        threads.push((name.trim().to_string(), allowed.trim().to_string()));
    }
    threads
}

/// `--background-cpus`: the checkpointer, the log writer and the housekeeping run on the
/// processors given (by default, those beyond the event loops' number: with one loop, every
/// processor but the first), the event loop wherever the process may run; `any` confines
/// none of them.
#[test]
fn background_threads_run_apart_from_the_event_loops() {
    let allowed = CpuList::allowed().expect("allowed processors");
    let cores = allowed.cores(CpuList::core_siblings);
    if cores.len() < 2 {
        eprintln!("one core: no placement to check");
        return;
    }
    let everywhere = allowed.to_string();
    let last = cores[cores.len() - 1].to_string();
    // `auto` with one loop: every core but the first.
    let beyond_the_loop = CpuList::joined(&cores[1..])
        .expect("a second core")
        .to_string();
    let dir = tempfile::tempdir().expect("temporary directory");
    let shm = support::pmem_dir();
    let db = dir.path().join("db");
    let pmem = shm.path().join("db.pmem");
    let background = ["tailstore-check", "log-writer-buff", "kv-housekeeping"];
    let cases = [
        (Some(last.as_str()), last.as_str()),
        (Some("any"), everywhere.as_str()),
        (None, beyond_the_loop.as_str()),
    ];
    for (choice, expected) in cases {
        let mut args = vec![
            "--db",
            support::path(&db),
            "--pmem",
            support::path(&pmem),
            "--threads",
            "1",
        ];
        if let Some(choice) = choice {
            args.extend(["--background-cpus", choice]);
        }
        let server = Server::start(&args);
        // A thread names and places itself when it first runs, which on a busy machine can
        // come after the server says it listens: what it should be is awaited, a while.
        let placed = |threads: &[(String, String)]| {
            let on = |name: &str| threads.iter().find(|(thread, _)| thread == name);
            background
                .iter()
                .all(|name| on(name).is_some_and(|(_, cpus)| cpus == expected))
                && on("kv-worker-0").is_some_and(|(_, cpus)| cpus == &everywhere)
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut threads = thread_placement(server.child.id());
        while !placed(&threads) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            threads = thread_placement(server.child.id());
        }
        assert!(
            placed(&threads),
            "{choice:?}: background threads on {expected}, the event loop on {everywhere}: \
             {threads:?}"
        );
        let mut client = Client::connect(server.address).expect("connect");
        client.send(&[b"SHUTDOWN"]).expect("send SHUTDOWN");
        let (status, said) = server.exit_within(Duration::from_secs(60));
        assert!(
            status.success(),
            "{choice:?}: exit status {status}: {said:?}"
        );
    }
}

/// A port in use is refused before the database is opened: nothing is created. Before, a
/// new database and its PMEM files (a GiB on /dev/shm) were made, then left behind.
#[test]
fn a_port_in_use_is_refused_before_the_database_is_created() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let shm = support::pmem_dir();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let address = taken.local_addr().expect("address").to_string();
    let db = dir.path().join("db");
    let pmem = shm.path().join("db.pmem");
    serve_refused(
        &[
            "--db",
            support::path(&db),
            "--pmem",
            support::path(&pmem),
            "--listen",
            &address,
        ],
        &format!("cannot listen on {address}"),
    );
    assert!(!db.exists(), "the database was created");
    let left: Vec<_> = std::fs::read_dir(shm.path()).expect("read_dir").collect();
    assert!(left.is_empty(), "PMEM files left behind: {left:?}");

    // A free port given to both --listen and --tls-listen: the second cannot be bound once
    // the first is, which the check must find too.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .to_string();
    let certificates = tailstore_crash::certificates::Certificates::new();
    let file = |name: &str| certificates.path(name).to_string_lossy().into_owned();
    serve_refused(
        &[
            "--db",
            support::path(&db),
            "--pmem",
            support::path(&pmem),
            "--listen",
            &free,
            "--tls-listen",
            &free,
            "--tls-cert-file",
            &file("server.crt"),
            "--tls-key-file",
            &file("server.key"),
        ],
        &format!("cannot listen on {free}"),
    );
    assert!(
        !db.exists(),
        "the database was created (one port for both listeners)"
    );
    let left: Vec<_> = std::fs::read_dir(shm.path()).expect("read_dir").collect();
    assert!(left.is_empty(), "PMEM files left behind: {left:?}");
}

/// A second server given a copy of the first's database and the same PMEM file is refused:
/// two processes appending to one PMEM log overwrite each other's durable records (before the
/// PMEM files were locked, that left the first database unopenable after a crash: "the log
/// file is corrupt").
#[test]
fn a_second_server_on_the_same_pmem_file_is_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let shm = support::pmem_dir();
    let pmem = shm.path().join("db.pmem");
    let pmem = support::path(&pmem);
    for mode in ["buffer", "pmem-log"] {
        let first = dir.path().join(format!("{mode}-first"));
        let other = dir.path().join(format!("{mode}-other"));
        let args = ["--commit", mode, "--pmem", pmem];
        let server = Server::start(&[&["--db", support::path(&first)][..], &args].concat());
        std::fs::create_dir(&other).expect("create the copy's directory");
        for entry in std::fs::read_dir(&first).expect("list the database") {
            let entry = entry.expect("directory entry");
            std::fs::copy(entry.path(), other.join(entry.file_name())).expect("copy");
        }
        serve_refused(
            &[
                &["--db", support::path(&other), "--listen", "127.0.0.1:0"][..],
                &args,
            ]
            .concat(),
            "db.pmem is in use by another process",
        );
        drop(server); // killed: its PMEM file goes next
        std::fs::remove_file(pmem).expect("remove the PMEM file");
        let _ = std::fs::remove_file(format!("{pmem}.pages"));
    }
}

/// A `--pmem` that names the database's own data file or log file is refused by name: mapped
/// as a ring, the file would be written over.
#[test]
fn a_pmem_file_that_is_the_data_file_or_the_log_is_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = support::path(dir.path());
    for (file, what) in [("tailstore.db", "data file"), ("tailstore.log", "log file")] {
        let pmem = dir.path().join(file);
        for mode in ["buffer", "pmem-log"] {
            serve_refused(
                &[
                    "--db",
                    db,
                    "--pmem",
                    support::path(&pmem),
                    "--commit",
                    mode,
                    "--listen",
                    "127.0.0.1:0",
                ],
                &format!("is the database's {what}"),
            );
        }
    }
}

/// Under a low limit on open files, `serve` takes as many clients as fit beside its own
/// files and refuses the rest with Redis's error (as Redis lowers its maxclients), where
/// accept would otherwise fail for want of a descriptor and leave clients waiting
/// unanswered; a limit with no room for clients at all is refused before the database is
/// touched.
#[test]
fn a_low_open_files_limit_lowers_max_clients() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let shm = support::pmem_dir();
    let db = dir.path().join("db");
    let pmem = shm.path().join("db.pmem");
    let args = ["--db", support::path(&db), "--pmem", support::path(&pmem)];
    let Some(server) = Server::start_with_open_files(100, &args) else {
        eprintln!("prlimit is not installed: skipped");
        return;
    };
    assert!(
        server.had_said("this process may open only 100 (ulimit -n): taking at most 36 clients"),
        "{:?}",
        server.said
    );
    let mut clients: Vec<Client> = (0..36)
        .map(|_| Client::connect(server.address).expect("connect"))
        .collect();
    for client in &mut clients {
        assert_eq!(client.call(&[b"PING"]), Value::Simple("PONG".into()));
    }
    let mut refused = Client::connect(server.address).expect("connect");
    assert_eq!(
        refused.call(&[b"PING"]),
        Value::Error("ERR max number of clients reached".into())
    );
    assert_eq!(
        clients[0].call(&[b"CONFIG", b"GET", b"maxclients"]),
        Value::Array(vec![
            Value::Bulk(b"maxclients".to_vec()),
            Value::Bulk(b"36".to_vec())
        ])
    );
    drop(server);

    let elsewhere = dir.path().join("never");
    let status = Command::new("prlimit")
        .arg("--nofile=40:40")
        .arg(env!("CARGO_BIN_EXE_tailstore"))
        .args(["serve", "--db", support::path(&elsewhere)])
        .output()
        .expect("run prlimit");
    assert!(!status.status.success());
    let said = support::text(&status.stderr);
    assert!(said.contains("leaves no room for clients"), "{said}");
    assert!(!elsewhere.exists(), "the database directory was created");
}

/// Scripts that recurse as deep as Redis lets them (`cjson` through 1,000 levels of a table
/// that holds itself, 1,000 nested JSON arrays each way) are answered with Redis's
/// errors and leave the server serving: the event loops' stacks hold them (a debug build's
/// loop overflowed the default 2 MiB and the server aborted).
#[test]
fn deep_scripts_do_not_take_the_server_down() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let shm = support::pmem_dir();
    let db = dir.path().join("db");
    let pmem = shm.path().join("db.pmem");
    let server = Server::start(&["--db", support::path(&db), "--pmem", support::path(&pmem)]);
    let mut client = Client::connect(server.address).expect("connect");
    let nested = Value::Error(
        "ERR user_script:1: Cannot serialise, excessive nesting (1001) script: \
         576653f0096d47f87063058b9abe9085cdcd4f41, on @user_script:1."
            .into(),
    );
    let script = "local t = {} t[1] = t return cjson.encode(t)";
    assert_eq!(client.call(&[b"EVAL", script.as_bytes(), b"0"]), nested);
    let deep = "return #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))";
    assert_eq!(
        client.call(&[b"EVAL", deep.as_bytes(), b"0"]),
        Value::Int(2000)
    );
    assert_eq!(client.call(&[b"PING"]), Value::Simple("PONG".into()));
}

/// `--unixsocket`: clients on this machine connect through the socket file, with the
/// permissions `--unixsocketperm` gives it; the file goes when the server stops cleanly; a
/// path held by another kind of file, and a mode that is not octal, are refused before the
/// database is touched.
#[test]
fn a_unix_socket_serves_beside_tcp() {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().expect("temporary directory");
    let shm = support::pmem_dir();
    let db = dir.path().join("db");
    let pmem = shm.path().join("db.pmem");
    let socket = dir.path().join("tailstore.sock");
    let args = [
        "--db",
        support::path(&db),
        "--pmem",
        support::path(&pmem),
        "--unixsocket",
        support::path(&socket),
        "--unixsocketperm",
        "700",
    ];
    let server = Server::start(&args);
    let said = format!(", and Unix socket {}", socket.display());
    assert!(server.had_said(&said), "{:?}", server.said);
    let mode = std::fs::metadata(&socket)
        .expect("the socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    let mut local = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
    local.write_all(b"SHUTDOWN\r\n").expect("write");
    let mut rest = Vec::new();
    let _ = local.read_to_end(&mut rest);
    let (status, _) = server.exit_within(Duration::from_secs(30));
    assert!(status.success());
    assert!(!socket.exists(), "the socket file outlived the server");

    std::fs::write(&socket, b"not a socket").expect("write");
    let elsewhere = dir.path().join("never");
    let refuse = |extra: &[&str], needle: &str| {
        let base = ["serve", "--db", support::path(&elsewhere)];
        let more = ["--pmem", support::path(&pmem), "--listen", "127.0.0.1:0"];
        support::refused(&[&base[..], &more, extra].concat(), &[needle]);
    };
    refuse(
        &["--unixsocket", support::path(&socket)],
        "the path exists and is not a socket",
    );
    assert_eq!(std::fs::read(&socket).expect("the file"), b"not a socket");
    refuse(
        &["--unixsocket", "/tmp/x.sock", "--unixsocketperm", "800"],
        "not a file mode in octal",
    );
    let nowhere = dir.path().join("no/such/dir.sock");
    refuse(&["--unixsocket", support::path(&nowhere)], "no directory");
    assert!(!elsewhere.exists());
}

/// `--aclfile`: a file whose line does not read, or that is missing, refuses the start
/// before the database is touched, naming the line; a good one's users can log in.
#[test]
fn an_acl_file_is_read_before_the_server_starts() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let shm = support::pmem_dir();
    let pmem = shm.path().join("db.pmem");
    let acl = dir.path().join("users.acl");
    let never = dir.path().join("never");
    let refuse = |needle: &str| {
        let args = [
            "serve",
            "--db",
            support::path(&never),
            "--pmem",
            support::path(&pmem),
        ];
        let more = ["--listen", "127.0.0.1:0", "--aclfile", support::path(&acl)];
        support::refused(&[&args[..], &more].concat(), &[needle]);
        assert!(!never.exists(), "the database was made");
    };
    refuse("cannot read the ACL file");
    std::fs::write(&acl, "user app on >pw +@all ~*\nuser bad on +nosuch\n").expect("write");
    refuse("users.acl:2: Error in ACL SETUSER modifier '+nosuch'");
    std::fs::write(&acl, "user app on >pw +@all ~*\n").expect("write");
    let db = dir.path().join("db");
    let server = Server::start(&[
        "--db",
        support::path(&db),
        "--pmem",
        support::path(&pmem),
        "--aclfile",
        support::path(&acl),
    ]);
    let mut client = support::Client::connect(server.address).expect("connect");
    let said = client.call(&[&b"AUTH"[..], b"app", b"pw"]);
    assert_eq!(said, tailstore_resp::Value::Simple("OK".into()));
}
