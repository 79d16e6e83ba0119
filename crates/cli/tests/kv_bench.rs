//! `tailstore bench kv` and `tailstore kv migrate` from the outside: against a real
//! redis-server (when installed) the benchmark runs exactly the requests asked for and reports
//! them in its JSON; a migration copies every key with its TTL; bad options and an
//! unreachable server give one clear error line and a non-zero status, never a panic.

mod support;
use support::{pmem_dir, refused, tailstore, text, Client, Server};
use tailstore_resp::Value;

#[path = "../../kv/tests/support/redis_process.rs"]
mod redis_process;
use redis_process::{redis_program, start_redis};

#[test]
fn runs_exactly_the_requests_against_redis() {
    let Some(program) = redis_program() else {
        println!("redis-server not found: skipping the run against Redis");
        return;
    };
    let redis = start_redis(&program);
    let dir = tempfile::tempdir().expect("temporary directory");
    let json = dir.path().join("bench.json");
    let server = redis.address().to_string();
    let out = tailstore(&[
        "bench",
        "kv",
        "--server",
        &server,
        "--requests",
        "200",
        "--clients",
        "4",
        "--threads",
        "1",
        "--data-size",
        "1KiB",
        "--ratio",
        "1:1",
        "--json",
        json.to_str().expect("utf-8 path"),
    ]);
    assert!(
        out.status.success(),
        "bench kv failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON file"))
            .expect("JSON");
    let num = |field: &str| {
        report[field]
            .as_f64()
            .unwrap_or_else(|| panic!("{field} missing or not a number: {report}"))
    };
    assert_eq!(report["server"], server.as_str());
    assert_eq!(num("clients"), 4.0);
    assert_eq!(num("threads"), 1.0);
    assert_eq!(num("pipeline"), 1.0);
    assert_eq!(report["ratio"], "1:1");
    assert_eq!(num("data_size"), 1024.0);
    assert_eq!(num("key_space"), 100_000.0);
    assert_eq!(num("ops"), 800.0, "4 connections x 200 requests: {report}");
    assert_eq!(num("errors"), 0.0, "{report}");
    // 1:1 alternates SET and GET on every connection: exactly half each.
    assert_eq!(num("sets"), 400.0);
    assert_eq!(num("gets"), 400.0);
    assert_eq!(num("hits") + num("misses"), 400.0);
    assert!(num("ops_per_sec") > 0.0);
    assert!(
        (num("set_ops_per_sec") + num("get_ops_per_sec") - num("ops_per_sec")).abs()
            < 1e-6 * num("ops_per_sec")
    );
    assert!(num("kb_per_sec") > 0.0);
    let latency = &report["latency_ms"];
    let lat = |field: &str| {
        latency[field]
            .as_f64()
            .unwrap_or_else(|| panic!("latency_ms.{field} missing: {report}"))
    };
    for field in ["avg", "p50", "p99", "p999", "max"] {
        assert!(lat(field) > 0.0, "latency_ms.{field}: {report}");
    }
    assert!(lat("p50") <= lat("p99") && lat("p99") <= lat("p999") && lat("p999") <= lat("max"));

    // Only SETs over a small key space, then only GETs: every GET hits.
    let small = |ratio: &str| {
        let out = tailstore(&[
            "bench",
            "kv",
            "--server",
            &server,
            "--requests",
            "50",
            "--clients",
            "2",
            "--threads",
            "2",
            "--pipeline",
            "8",
            "--key-space",
            "200",
            "--key-pattern",
            "sequential",
            "--ratio",
            ratio,
            "--json",
            json.to_str().expect("utf-8 path"),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON file"))
                .expect("JSON");
        report
    };
    let sets = small("1:0");
    assert_eq!(sets["ops"], 200);
    assert_eq!(sets["gets"], 0);
    let gets = small("0:1");
    assert_eq!(gets["ops"], 200);
    assert_eq!(gets["hits"], 200, "{gets}");
    assert_eq!(gets["misses"], 0);
}

#[test]
fn bad_options_and_unreachable_servers_are_refused() {
    refused(
        &["bench", "kv", "--ratio", "abc"],
        &["'abc' is not a SET:GET ratio"],
    );
    refused(
        &["bench", "kv", "--ratio", "0:0"],
        &["at least one SET or one GET"],
    );
    refused(
        &["bench", "kv", "--key-pattern", "zigzag"],
        &["zigzag", "--key-pattern"],
    );
    refused(
        &["bench", "kv", "--requests", "5", "--test-time", "1"],
        &["--test-time"],
    );
    refused(
        &["bench", "kv", "--server", "127.0.0.1:1", "--requests", "5"],
        &["cannot connect to 127.0.0.1:1"],
    );
    refused(
        &["bench", "kv", "--server", "nonsense", "--requests", "5"],
        &["--server 'nonsense' is not an address"],
    );
    refused(&["bench", "kv", "--clients", "0"], &["at least 1"]);
    refused(
        &["bench", "kv", "--test-time", "1e30"],
        &["not between 0 and"],
    );
    refused(
        &["bench", "kv", "--warmup", "1", "--requests", "5"],
        &["--test-time"],
    );
    refused(
        &["bench", "log", "--seconds", "1e30"],
        &["not between 0 and"],
    );
    // An output file that could not be written is refused before the run, not after it.
    for command in [
        &["tpcc", "run", "--db", "/tmp"][..],
        &["bench", "kv"],
        &["bench", "log"],
        &["bench", "engine"],
    ] {
        let args = [command, &["--json", "/no/such/dir/out.json"]].concat();
        refused(&args, &["--json: directory does not exist: /no/such/dir"]);
        let args = [command, &["--json", "/tmp"]].concat();
        refused(&args, &["--json: /tmp is a directory"]);
    }
    // A batch too large to end (one transaction holds it) is refused up front.
    refused(
        &[
            "bench",
            "engine",
            "--cases",
            "lookup-batch",
            "--batch",
            "100000000000",
        ],
        &["--batch must be between 1 and"],
    );
    refused(
        &["tpcc", "run", "--duration", "nan"],
        &["not between 0 and"],
    );
    refused(
        &["kv", "compare", "--servers", "redis"],
        &["unknown server 'redis'"],
    );
    refused(&["kv", "compare", "--ratios", "120"], &["not a percentage"]);
}

/// Every benchmark that places PMEM files refuses a `--pmem-dir` that does not exist before
/// it starts anything.
#[test]
fn benchmarks_refuse_a_missing_pmem_dir() {
    let missing = "/nonexistent/tailstore-pmem";
    let needle = format!("--pmem-dir: directory does not exist: {missing}");
    for command in [
        &["kv", "compare"][..],
        &["bench", "engine"][..],
        &["tpcc", "compare"][..],
    ] {
        refused(&[command, &["--pmem-dir", missing]].concat(), &[&needle]);
    }
}

#[test]
fn compare_passes_serve_args_to_every_tailstore_server() {
    // An option `serve` does not know: the server must refuse it, and the comparison must
    // report that instead of measuring a server started without it.
    let out = tailstore(&[
        "kv",
        "compare",
        "--servers",
        "tailstore-buffer",
        "--ratios",
        "100",
        "--test-time",
        "0.1",
        "--warmup",
        "0",
        "--restart-data-mb",
        "0",
        "--serve-arg=--no-such-option",
    ]);
    let all = text(&out.stdout) + &text(&out.stderr);
    assert!(
        all.contains("unexpected argument '--no-such-option'"),
        "the server did not get the option: {all}"
    );
}

/// A `tailstore serve` of its own, in `dir`.
fn serve_in(dir: &std::path::Path, shm: &std::path::Path, name: &str) -> Server {
    serve_with(dir, shm, name, &[])
}

/// [`serve_in`] with more options.
fn serve_with(dir: &std::path::Path, shm: &std::path::Path, name: &str, extra: &[&str]) -> Server {
    let db = dir.join(name);
    let pmem = shm.join(format!("{name}.pmem"));
    let args = ["--db", support::path(&db), "--pmem", support::path(&pmem)];
    Server::start(&[&args[..], extra].concat())
}

fn call(client: &mut Client, args: &[&str]) -> Value {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    client.call(&args)
}

/// Keys of every kind in databases 0 and 2 (one with a TTL), and what names them.
fn fill(client: &mut Client) -> Vec<(u32, String)> {
    let mut keys = Vec::new();
    for i in 0..300 {
        let key = format!("string:{i}");
        call(client, &["SET", &key, &"v".repeat(i)]);
        keys.push((0, key));
    }
    for command in [
        &["RPUSH", "list", "a", "b", "c"][..],
        &["HSET", "hash", "f", "1", "g", "2"],
        &["SADD", "set", "x", "y"],
        &["ZADD", "zset", "1.5", "m", "-2", "n"],
        &["SET", "expiring", "soon", "EX", "1000"],
    ] {
        call(client, command);
        keys.push((0, command[1].to_string()));
    }
    call(client, &["SELECT", "2"]);
    call(client, &["XADD", "stream", "1-1", "f", "v"]);
    call(client, &["XGROUP", "CREATE", "stream", "group", "0"]);
    call(
        client,
        &[
            "XREADGROUP",
            "GROUP",
            "group",
            "c",
            "STREAMS",
            "stream",
            ">",
        ],
    );
    keys.push((2, "stream".to_string()));
    call(client, &["SELECT", "0"]);
    call(client, &["FUNCTION", "LOAD", "REPLACE", LIBRARY]);
    keys
}

/// A function library `fill` loads in the source.
const LIBRARY: &str =
    "#!lua name=lib\nredis.register_function('strlen_of', function(k) return redis.call('strlen', k[1]) end)";

/// What the library's function says of `string:12` on `client`'s server.
fn library_works(client: &mut Client) {
    assert_eq!(
        call(client, &["FCALL", "strlen_of", "1", "string:12"]),
        Value::Int(12)
    );
}

/// Between two tailstore servers every key arrives with the same DUMP (the same value, in
/// one encoding) and its TTL; a second run finds them there and says so, unless --replace.
#[test]
fn migrate_copies_every_key_with_its_ttl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shm = pmem_dir();
    let from = serve_in(dir.path(), shm.path(), "from");
    let to = serve_in(dir.path(), shm.path(), "to");
    let mut source = Client::connect(from.address).expect("connect");
    let mut target = Client::connect(to.address).expect("connect");
    let keys = fill(&mut source);
    let (from_addr, to_addr) = (from.address.to_string(), to.address.to_string());
    let migrate = |extra: &[&str]| {
        let args = [
            &[
                "kv", "migrate", "--from", &from_addr, "--to", &to_addr, "--batch", "7",
            ][..],
            extra,
        ]
        .concat();
        tailstore(&args)
    };
    let out = migrate(&[]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let said = text(&out.stdout);
    assert!(said.contains("db 0: 305 keys copied"), "{said}");
    assert!(said.contains("db 2: 1 keys copied"), "{said}");
    assert!(said.contains("function libraries: 1 copied"), "{said}");
    library_works(&mut target);
    for (db, key) in &keys {
        for client in [&mut source, &mut target] {
            call(client, &["SELECT", &db.to_string()]);
        }
        let dump = |client: &mut Client| call(client, &["DUMP", key]);
        assert_eq!(dump(&mut target), dump(&mut source), "{key}");
    }
    call(&mut target, &["SELECT", "0"]);
    let Value::Int(ttl) = call(&mut target, &["TTL", "expiring"]) else {
        panic!("TTL");
    };
    assert!((990..=1000).contains(&ttl), "{ttl}");

    let again = migrate(&["--db", "0"]);
    assert!(!again.status.success());
    assert!(
        text(&again.stdout).contains("305 keys: BUSYKEY Target key name already exists."),
        "{}",
        text(&again.stdout)
    );
    assert!(
        text(&again.stdout).contains(
            "function libraries: none copied: the target answered FUNCTION RESTORE with ERR Library 'lib' already exists"
        ),
        "{}",
        text(&again.stdout)
    );
    assert!(text(&again.stderr).contains("305 keys were not copied"));
    let replaced = migrate(&["--replace", "--match", "string:1*"]);
    assert!(replaced.status.success(), "{}", text(&replaced.stderr));
    assert!(
        text(&replaced.stdout).contains("db 0: 111 keys copied"),
        "{}",
        text(&replaced.stdout)
    );

    refused(
        &["kv", "migrate", "--from", "127.0.0.1:1", "--to", &to_addr],
        &["cannot connect to 127.0.0.1:1"],
    );
    refused(
        &[
            "kv", "migrate", "--from", &from_addr, "--to", &to_addr, "--batch", "0",
        ],
        &["--batch"],
    );
}

/// From redis-server (when installed) into tailstore: the values read back the same.
#[test]
fn migrate_copies_redis_into_tailstore() {
    let Some(program) = redis_program() else {
        println!("redis-server not found: skipping the migration from Redis");
        return;
    };
    let redis = start_redis(&program);
    let dir = tempfile::tempdir().expect("tempdir");
    let shm = pmem_dir();
    let to = serve_in(dir.path(), shm.path(), "to");
    let mut source = Client::connect(redis.address()).expect("connect");
    let mut target = Client::connect(to.address).expect("connect");
    let keys = fill(&mut source);
    let out = tailstore(&[
        "kv",
        "migrate",
        "--from",
        &redis.address().to_string(),
        "--to",
        &to.address.to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    for (db, key) in &keys {
        for client in [&mut source, &mut target] {
            call(client, &["SELECT", &db.to_string()]);
        }
        let read = |client: &mut Client| match call(client, &["TYPE", key]) {
            Value::Simple(kind) if kind == b"string" => call(client, &["GET", key]),
            Value::Simple(kind) if kind == b"list" => call(client, &["LRANGE", key, "0", "-1"]),
            Value::Simple(kind) if kind == b"hash" => call(client, &["HMGET", key, "f", "g"]),
            Value::Simple(kind) if kind == b"set" => {
                call(client, &["SMISMEMBER", key, "x", "y", "z"])
            }
            Value::Simple(kind) if kind == b"zset" => {
                call(client, &["ZRANGE", key, "0", "-1", "WITHSCORES"])
            }
            Value::Simple(kind) if kind == b"stream" => call(client, &["XPENDING", key, "group"]),
            other => panic!("{key}: {other:?}"),
        };
        assert_eq!(read(&mut target), read(&mut source), "{key}");
    }
    call(&mut target, &["SELECT", "0"]);
    library_works(&mut target);
}

/// `bench kv --password` and `kv migrate --from-password/--to-password` against servers
/// with `--requirepass`: without the password, or with a wrong one, each stops with one
/// clear line naming the option; with it, each does its work.
#[test]
fn the_tools_authenticate_with_the_password_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shm = pmem_dir();
    let with_password = |name: &str, password: &str| {
        serve_with(dir.path(), shm.path(), name, &["--requirepass", password])
    };
    let (from, to) = (with_password("from", "p1"), with_password("to", "p2"));
    let (from_addr, to_addr) = (from.address.to_string(), to.address.to_string());
    let bench = |extra: &[&str]| {
        let base = ["bench", "kv", "--server", &from_addr, "--requests", "50"];
        tailstore(&[&base[..], extra, &["--ratio", "1:0", "--clients", "2"]].concat())
    };
    refused_with(bench(&[]), "asks for a password: give it with --password");
    refused_with(
        bench(&["--password", "p2"]),
        "refused the password (--password): WRONGPASS",
    );
    let out = bench(&["--password", "p1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("errors: 0"),
        "{}",
        text(&out.stdout)
    );

    let migrate = |extra: &[&str]| {
        let base = ["kv", "migrate", "--from", &from_addr, "--to", &to_addr];
        tailstore(&[&base[..], extra].concat())
    };
    refused_with(migrate(&["--from-password", "p1"]), "the target 127.0.0.1");
    refused_with(
        migrate(&["--to-password", "p2"]),
        "give it with --from-password",
    );
    let out = migrate(&["--from-password", "p1", "--to-password", "p2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (mut source, mut target) = (
        Client::connect(from.address).expect("connect"),
        Client::connect(to.address).expect("connect"),
    );
    assert_eq!(
        call(&mut source, &["AUTH", "p1"]),
        Value::Simple("OK".into())
    );
    assert_eq!(
        call(&mut target, &["AUTH", "p2"]),
        Value::Simple("OK".into())
    );
    let written = call(&mut source, &["DBSIZE"]);
    assert!(matches!(written, Value::Int(n) if n > 150), "{written:?}");
    assert_eq!(call(&mut target, &["DBSIZE"]), written);
}

/// Both tools reach a server through its Unix socket, given as a path: `bench kv` runs
/// its load there, `kv migrate` copies from one socket to another; TLS over a socket, and
/// a socket that is not there, are refused.
#[test]
fn the_tools_reach_servers_through_their_unix_sockets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shm = pmem_dir();
    let with_socket = |name: &str| {
        let socket = dir.path().join(format!("{name}.sock"));
        let extra = ["--unixsocket", support::path(&socket)];
        let server = serve_with(dir.path(), shm.path(), name, &extra);
        (server, socket.to_string_lossy().into_owned())
    };
    let ((from, from_socket), (to, to_socket)) = (with_socket("from"), with_socket("to"));
    let bench = |extra: &[&str]| {
        let base = ["bench", "kv", "--server", &from_socket, "--requests", "200"];
        let load = ["--ratio", "1:0", "--clients", "4", "--pipeline", "4"];
        tailstore(&[&base[..], extra, &load].concat())
    };
    let out = bench(&[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains(&format!("({from_socket})"))
            && said.contains("1,600 ops")
            && said.contains("errors: 0"),
        "{said}"
    );
    let certificates = tailstore_crash::certificates::Certificates::new();
    let ca = certificates.path("ca.crt").to_string_lossy().into_owned();
    refused_with(
        bench(&["--tls", "--tls-ca-cert-file", &ca]),
        "--tls asks for TLS, which a Unix socket",
    );
    let nowhere = dir.path().join("nowhere.sock");
    let base = ["bench", "kv", "--server", support::path(&nowhere)];
    refused_with(tailstore(&base), "cannot connect to");

    let out = tailstore(&["kv", "migrate", "--from", &from_socket, "--to", &to_socket]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (mut source, mut target) = (
        Client::connect(from.address).expect("connect"),
        Client::connect(to.address).expect("connect"),
    );
    let written = call(&mut source, &["DBSIZE"]);
    assert!(matches!(written, Value::Int(n) if n > 1_000), "{written:?}");
    assert_eq!(call(&mut target, &["DBSIZE"]), written);
}

/// `--user` logs the tools in as an ACL user: a load by a user that may only SET, GET and
/// PING, a migration into a target as a user of its own; a wrong user is refused.
#[test]
fn the_tools_log_in_as_acl_users() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shm = pmem_dir();
    let acl = dir.path().join("users.acl");
    std::fs::write(
        &acl,
        "user loader on >lp ~key:* +set +get +ping\nuser mover on >mp ~* +@all\n",
    )
    .expect("write");
    let server = |name: &str| {
        serve_with(
            dir.path(),
            shm.path(),
            name,
            &["--aclfile", support::path(&acl)],
        )
    };
    let (from, to) = (server("from"), server("to"));
    let (from_addr, to_addr) = (from.address.to_string(), to.address.to_string());
    let bench = |user: &str| {
        let base = ["bench", "kv", "--server", &from_addr, "--requests", "50"];
        let login = ["--user", user, "--password", "lp", "--ratio", "1:1"];
        tailstore(&[&base[..], &login, &["--clients", "2"]].concat())
    };
    let out = bench("loader");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("errors: 0"),
        "{}",
        text(&out.stdout)
    );
    refused_with(
        bench("mover"),
        "refused the password (--password): WRONGPASS",
    );
    // A user whose every GET is refused (its keys are key:*, the load's are others): the
    // errors are no operations, and the run fails saying so.
    let out = tailstore(&[
        "bench",
        "kv",
        "--server",
        &from_addr,
        "--requests",
        "50",
        "--user",
        "loader",
        "--password",
        "lp",
        "--ratio",
        "0:1",
        "--clients",
        "1",
        "--threads",
        "1",
        "--key-prefix",
        "other:",
        "--json",
        support::path(&dir.path().join("refused.json")),
    ]);
    refused_with(out, "were answered with an error (the first: GET: NOPERM");
    let report = std::fs::read_to_string(dir.path().join("refused.json")).expect("the JSON");
    let report: serde_json::Value = serde_json::from_str(&report).expect("JSON");
    assert_eq!(report["ops"], 0, "{report}");
    assert_eq!(report["errors"], 50, "{report}");
    refused_with(
        tailstore(&["bench", "kv", "--server", &from_addr, "--user", "loader"]),
        "--password",
    );
    let migrate = |user: &str| {
        let base = ["kv", "migrate", "--from", &from_addr, "--to", &to_addr];
        tailstore(&[&base[..], &["--to-user", user, "--to-password", "mp"]].concat())
    };
    refused_with(migrate("loader"), "refused the password (--to-password)");
    let out = migrate("mover");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (mut source, mut target) = (
        Client::connect(from.address).expect("connect"),
        Client::connect(to.address).expect("connect"),
    );
    let written = call(&mut source, &["DBSIZE"]);
    assert!(matches!(written, Value::Int(n) if n > 10), "{written:?}");
    assert_eq!(call(&mut target, &["DBSIZE"]), written);
}

/// The run failed, with `needle` in what it said and no panic.
#[track_caller]
fn refused_with(out: std::process::Output, needle: &str) {
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(!out.status.success(), "succeeded: {said}");
    assert!(said.contains(needle), "{needle:?} not in {said:?}");
    assert!(!said.contains("panicked"), "{said}");
}

/// `serve` on the database `name` in `dir` (its PMEM file in `shm`), speaking only TLS with
/// the test certificates and asking clients for theirs.
fn tls_only_server(
    certificates: &tailstore_crash::certificates::Certificates,
    dir: &std::path::Path,
    shm: &std::path::Path,
    name: &str,
) -> Server {
    let file = |name: &str| certificates.path(name).to_string_lossy().into_owned();
    let (db, pmem) = (dir.join(name), shm.join(format!("{name}.pmem")));
    Server::start(&[
        "--db",
        support::path(&db),
        "--pmem",
        support::path(&pmem),
        "--tls-cert-file",
        &file("server.crt"),
        "--tls-key-file",
        &file("server.key"),
        "--tls-ca-cert-file",
        &file("ca.crt"),
    ])
}

/// `bench kv --tls` against `serve --tls-*` that asks clients for certificates: the load
/// runs with the client's certificate; without `--tls`, without the authority or without
/// a client certificate it stops with one clear line.
#[test]
fn bench_kv_speaks_tls() {
    let certificates = tailstore_crash::certificates::Certificates::new();
    let file = |name: &str| certificates.path(name).to_string_lossy().into_owned();
    let (ca, cert, key) = (file("ca.crt"), file("client.crt"), file("client.key"));
    let dir = tempfile::tempdir().expect("tempdir");
    let shm = pmem_dir();
    let server = tls_only_server(&certificates, dir.path(), shm.path(), "db");
    assert!(server.had_said("TLS, TLS clients must present a certificate"));
    let address = server.address.to_string();
    let bench = |extra: &[&str]| {
        let base = ["bench", "kv", "--server", &address, "--requests", "200"];
        tailstore(&[&base[..], extra, &["--clients", "4", "--pipeline", "4"]].concat())
    };
    let out = bench(&[
        "--tls",
        "--tls-ca-cert-file",
        &ca,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("1,600 ops") && said.contains("errors: 0"),
        "{said}"
    );
    refused_with(bench(&[]), "it speaks TLS (give --tls)");
    refused_with(bench(&["--tls"]), "--tls-ca-cert-file");
    let without_certificate = bench(&["--tls", "--tls-ca-cert-file", &ca]);
    assert!(!without_certificate.status.success());
    assert!(!text(&without_certificate.stderr).contains("panicked"));
}

/// `serve --tls-listen` takes TLS connections on a second address while `--listen` goes on
/// taking plain ones: `bench kv` runs against each, each as its address wants.
#[test]
fn serve_takes_plain_tcp_and_tls_side_by_side() {
    let certificates = tailstore_crash::certificates::Certificates::new();
    let file = |name: &str| certificates.path(name).to_string_lossy().into_owned();
    let dir = tempfile::tempdir().expect("tempdir");
    let shm = pmem_dir();
    let (db, pmem) = (dir.path().join("db"), shm.path().join("db.pmem"));
    let (server_cert, server_key, ca) = (file("server.crt"), file("server.key"), file("ca.crt"));
    let server = Server::start(&[
        "--db",
        support::path(&db),
        "--pmem",
        support::path(&pmem),
        "--tls-cert-file",
        &server_cert,
        "--tls-key-file",
        &server_key,
        "--tls-listen",
        "127.0.0.1:0",
    ]);
    let line = server
        .said
        .iter()
        .find_map(|line| line.split("plain TCP, and TLS on ").nth(1))
        .expect("the start line names the TLS address");
    let tls_address = line.trim().to_string();
    let bench = |address: &str, extra: &[&str]| {
        let base = ["bench", "kv", "--server", address, "--requests", "200"];
        tailstore(&[&base[..], extra, &["--clients", "2", "--pipeline", "4"]].concat())
    };
    let plain = server.address.to_string();
    for out in [
        bench(&plain, &[]),
        bench(&tls_address, &["--tls", "--tls-ca-cert-file", &ca]),
    ] {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("errors: 0"));
    }
    refused_with(bench(&tls_address, &[]), "it speaks TLS (give --tls)");

    // `kv migrate` from that TLS address into a TLS-only server that asks for a client
    // certificate.
    let target = tls_only_server(&certificates, dir.path(), shm.path(), "db2");
    let target_address = target.address.to_string();
    let migrate = |extra: &[&str]| {
        let base = [
            "kv",
            "migrate",
            "--from",
            &tls_address,
            "--to",
            &target_address,
        ];
        tailstore(
            &[
                &base[..],
                &["--from-tls", "--from-tls-ca-cert-file", &ca],
                extra,
            ]
            .concat(),
        )
    };
    refused_with(migrate(&[]), "it speaks TLS (give --to-tls)");
    let (client_cert, client_key) = (file("client.crt"), file("client.key"));
    let out = migrate(&[
        "--to-tls",
        "--to-tls-ca-cert-file",
        &ca,
        "--to-tls-cert-file",
        &client_cert,
        "--to-tls-key-file",
        &client_key,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut source = Client::connect(server.address).expect("connect");
    let Value::Int(keys) = call(&mut source, &["DBSIZE"]) else {
        panic!("DBSIZE");
    };
    let said = text(&out.stdout);
    assert!(
        keys > 0 && said.contains(&format!("copied {keys} keys")),
        "{said}"
    );
}

#[test]
fn compare_reports_what_each_server_says_of_its_durability() {
    // The report named the PMEM medium without asking: "PMEM emulated" even on a DAX file
    // system. Each tailstore server's own account (INFO's `tailstore_durability`) is shown.
    let dir = tempfile::tempdir().expect("tempdir");
    let pmem = support::pmem_dir();
    let markdown = dir.path().join("compare.md");
    let out = tailstore(&[
        "kv",
        "compare",
        "--servers",
        "tailstore-buffer",
        "--ratios",
        "100",
        "--test-time",
        "0.2",
        "--warmup",
        "0",
        "--restart-data-mb",
        "0",
        "--key-space",
        "100",
        "--data-size",
        "1KiB",
        "--dir",
        support::path(dir.path()),
        "--pmem-dir",
        support::path(pmem.path()),
        "--markdown",
        support::path(&markdown),
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let report = std::fs::read_to_string(&markdown).expect("the markdown report");
    let line = report
        .lines()
        .find(|line| line.starts_with("- `tailstore-buffer`"))
        .unwrap_or_else(|| panic!("no line for the server: {report}"));
    assert!(line.contains("(it reports: buffer ("), "{line}");
    assert!(report.contains("1024-byte values"), "{report}");
}

#[test]
fn compare_interrupted_by_sigterm_kills_its_server_and_removes_its_scratch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pmem = support::pmem_dir();
    let mut compare = std::process::Command::new(env!("CARGO_BIN_EXE_tailstore"))
        .args([
            "kv",
            "compare",
            "--servers",
            "tailstore-buffer",
            "--ratios",
            "100",
        ])
        .args([
            "--test-time",
            "120",
            "--warmup",
            "0",
            "--restart-data-mb",
            "0",
        ])
        .args(["--dir", support::path(dir.path())])
        .args(["--pmem-dir", support::path(pmem.path())])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn kv compare");
    let scratch = wait_for_listening_server(dir.path());
    let server_pids = pids_naming(&scratch);
    assert!(!server_pids.is_empty(), "no process serves {scratch:?}");

    let pid = rustix::process::Pid::from_raw(compare.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let waited = std::time::Instant::now();
    let status = loop {
        if let Some(status) = compare.try_wait().expect("wait") {
            break status;
        }
        assert!(
            waited.elapsed().as_secs() < 30,
            "kv compare still runs 30 s after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut compare.stderr.take().expect("stderr"), &mut err)
        .expect("stderr");
    assert!(!status.success(), "exit status {status} after SIGTERM");
    assert!(err.contains("interrupted by SIGTERM"), "stderr: {err}");
    let alive: Vec<u32> = server_pids
        .into_iter()
        .filter(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    assert!(alive.is_empty(), "servers still running: {alive:?}");
    let left = |d: &std::path::Path| std::fs::read_dir(d).expect("read_dir").count();
    assert_eq!(left(dir.path()), 0, "scratch directories left behind");
    assert_eq!(left(pmem.path()), 0, "PMEM files left behind");
}

/// The scratch directory under `parent` whose server says it is listening.
fn wait_for_listening_server(parent: &std::path::Path) -> std::path::PathBuf {
    let start = std::time::Instant::now();
    loop {
        for entry in std::fs::read_dir(parent).expect("read_dir").flatten() {
            let log = std::fs::read_to_string(entry.path().join("server.log")).unwrap_or_default();
            if log.contains("listening on") {
                return entry.path();
            }
        }
        assert!(
            start.elapsed().as_secs() < 60,
            "no server started in {parent:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The processes whose command line names `path`.
fn pids_naming(path: &std::path::Path) -> Vec<u32> {
    let needle = path.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .collect()
}

/// `bench log` interrupted removes its scratch: the log directory it made and its PMEM
/// file (a gigabyte of memory on tmpfs). Before, both stayed.
#[test]
fn bench_log_interrupted_by_sigterm_removes_its_scratch() {
    let pmem = support::pmem_dir();
    let file = pmem.path().join("bench.pmem");
    let bench = std::process::Command::new(env!("CARGO_BIN_EXE_tailstore"))
        .args(["bench", "log", "--commit", "buffer", "--threads", "1"])
        .args(["--seconds", "60", "--runs", "1"])
        .args(["--pmem", support::path(&file)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn bench log");
    let started = std::time::Instant::now();
    while !file.exists() {
        assert!(
            started.elapsed().as_secs() < 60,
            "the PMEM file never appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = rustix::process::Pid::from_raw(bench.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let out = bench.wait_with_output().expect("wait");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 15), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    let left: Vec<_> = std::fs::read_dir(pmem.path()).expect("read_dir").collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
