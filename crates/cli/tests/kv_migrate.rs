//! `tailstore kv migrate` against sources that are hard to copy from: keys in their last
//! millisecond or whose TTL runs out in transit, a tailstore source that stops reading a
//! client whose replies pile up, batches of large values, a DUMP too large for a reply, a
//! source that refuses FUNCTION DUMP or hangs up, and targets that refuse keys or lack a
//! database. The odd sources are played by a small RESP server on a thread ([`fake_source`])
//! whose answers each test scripts; targets (and the ordinary sources) are redis-server,
//! the tests skipping where it is not installed, and `tailstore serve`.

mod support;
use support::{pmem_dir, Client, Server};
use tailstore_resp::{Limits, RequestParser, Value};

#[path = "../../kv/tests/support/redis_process.rs"]
mod redis_process;
use redis_process::{redis_program, start_redis, RedisServer};

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A redis-server, or `None` (the test says it skips) where none is installed.
fn redis(test: &str) -> Option<RedisServer> {
    let Some(program) = redis_program() else {
        println!("redis-server not found: skipping {test}");
        return None;
    };
    Some(start_redis(&program))
}

fn call(client: &mut Client, args: &[&[u8]]) -> Value {
    client.call(args)
}

/// What one request gets from the fake source.
enum Answer {
    /// These bytes.
    Raw(Vec<u8>),
    /// A bulk reply of this many bytes (zeros), written in pieces.
    Oversized(u64),
    /// Nothing for this long, then the next answer.
    Pause(Duration),
    /// The connection closed.
    Hangup,
}

fn bulk(bytes: &[u8]) -> Answer {
    let mut out = format!("${}\r\n", bytes.len()).into_bytes();
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
    Answer::Raw(out)
}

fn int(n: i64) -> Answer {
    Answer::Raw(format!(":{n}\r\n").into_bytes())
}

fn line(text: &str) -> Answer {
    Answer::Raw(format!("{text}\r\n").into_bytes())
}

/// A key the fake source holds: its name, what PTTL answers, its DUMP payload.
struct FakeKey {
    name: Vec<u8>,
    pttl: i64,
    payload: Vec<u8>,
}

/// A source of `keys` in db 0 (and `extra_info` in INFO keyspace), without FUNCTION, that
/// answers SCAN with every key at once.
fn standard(keys: &[FakeKey], extra_info: &str, args: &[Vec<u8>]) -> Vec<Answer> {
    let command = args[0].to_ascii_uppercase();
    let key = |name: &[u8]| keys.iter().find(|k| k.name == name);
    let answer = match &command[..] {
        b"PING" => line("+PONG"),
        b"INFO" => {
            bulk(format!("# Keyspace\r\ndb0:keys={}\r\n{extra_info}", keys.len()).as_bytes())
        }
        b"FUNCTION" => line("-ERR unknown command 'FUNCTION', with args beginning with: 'DUMP' "),
        b"SELECT" => line("+OK"),
        b"DBSIZE" => int(keys.len() as i64),
        b"SCAN" => {
            let mut out = format!("*2\r\n$1\r\n0\r\n*{}\r\n", keys.len()).into_bytes();
            for k in keys {
                out.extend(format!("${}\r\n", k.name.len()).as_bytes());
                out.extend(&k.name);
                out.extend(b"\r\n");
            }
            Answer::Raw(out)
        }
        b"PTTL" => int(key(&args[1]).map_or(-2, |k| k.pttl)),
        b"DUMP" => key(&args[1]).map_or(line("$-1"), |k| bulk(&k.payload)),
        other => panic!(
            "the fake source was asked {:?}",
            String::from_utf8_lossy(other)
        ),
    };
    vec![answer]
}

/// A RESP server on a thread, for one connection, answering each request with what
/// `answer` gives.
fn fake_source(mut answer: impl FnMut(&[Vec<u8>]) -> Vec<Answer> + Send + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        let mut parser = RequestParser::new(Limits::default());
        let mut input = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            while let Ok(Some((args, used))) = parser.parse(&input) {
                input.drain(..used);
                for reply in answer(&args) {
                    if !give(&mut stream, reply) {
                        return;
                    }
                }
            }
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => input.extend_from_slice(&chunk[..n]),
            }
        }
    });
    address
}

/// Writes `answer` to `stream`: whether the connection goes on.
fn give(stream: &mut std::net::TcpStream, answer: Answer) -> bool {
    match answer {
        Answer::Raw(bytes) => stream.write_all(&bytes).is_ok(),
        Answer::Oversized(length) => {
            let zeros = vec![0u8; 1 << 20];
            let mut left = length;
            let mut ok = stream
                .write_all(format!("${length}\r\n").as_bytes())
                .is_ok();
            while ok && left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                ok = stream.write_all(&zeros[..n]).is_ok();
                left -= n as u64;
            }
            ok && stream.write_all(b"\r\n").is_ok()
        }
        Answer::Pause(time) => {
            std::thread::sleep(time);
            true
        }
        Answer::Hangup => false,
    }
}

/// The DUMP payload of a string `value` as `client`'s server writes it.
fn payload_of(client: &mut Client, value: &[u8]) -> Vec<u8> {
    call(client, &[b"SET", b"payload:tmp", value]);
    let Value::Bulk(payload) = call(client, &[b"DUMP", b"payload:tmp"]) else {
        panic!("DUMP");
    };
    call(client, &[b"DEL", b"payload:tmp"]);
    payload
}

/// What a run said and how it ended; `status` is `None` if it ran past its limit (and
/// was killed); `peak_kib`, its largest resident set seen (VmHWM).
struct Run {
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
    peak_kib: u64,
}

impl Run {
    fn said(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// `tailstore kv migrate --from FROM --to TO EXTRA…`, killed if it runs past `limit`.
fn migrate(from: SocketAddr, to: SocketAddr, extra: &[&str], limit: Duration) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailstore"))
        .args([
            "kv",
            "migrate",
            "--from",
            &from.to_string(),
            "--to",
            &to.to_string(),
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("out"))
        .stderr(std::fs::File::create(&err).expect("err"))
        .spawn()
        .expect("runs tailstore");
    let status_file = format!("/proc/{}/status", child.id());
    let deadline = Instant::now() + limit;
    let mut peak_kib = 0;
    let status = loop {
        // VmHWM only grows: its last reading before the exit is the peak, near enough.
        if let Ok(status) = std::fs::read_to_string(&status_file) {
            peak_kib = peak_kib.max(vm_hwm_kib(&status));
        }
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run {
        status,
        stdout: std::fs::read_to_string(out).unwrap_or_default(),
        stderr: std::fs::read_to_string(err).unwrap_or_default(),
        peak_kib,
    }
}

fn vm_hwm_kib(status: &str) -> u64 {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[track_caller]
fn succeeded(run: &Run) {
    assert!(
        run.status.is_some_and(|s| s.success()),
        "{:?}: {}",
        run.status,
        run.said()
    );
}

#[track_caller]
fn failed_with(run: &Run, needle: &str) {
    assert!(
        run.status.is_some_and(|s| !s.success()),
        "{:?}: {}",
        run.status,
        run.said()
    );
    assert!(
        run.said().contains(needle),
        "{needle:?} not in {}",
        run.said()
    );
    assert!(!run.said().contains("panicked"), "{}", run.said());
}

const LIMIT: Duration = Duration::from_secs(60);

/// PTTL answers 0 in a key's last millisecond, when DUMP still finds it; RESTORE's TTL 0
/// means "no expiry", so the key must arrive with 1 ms (as Redis's MIGRATE gives it), not
/// live for ever. A source without FUNCTION (Redis before 7.0) has no libraries to copy.
#[test]
fn a_key_in_its_last_millisecond_does_not_become_immortal() {
    let Some(target) = redis("the copy of a key in its last millisecond") else {
        return;
    };
    let mut client = Client::connect(target.address()).expect("connect");
    let keys = vec![
        FakeKey {
            name: b"last".to_vec(),
            pttl: 0,
            payload: payload_of(&mut client, b"v"),
        },
        FakeKey {
            name: b"forever".to_vec(),
            pttl: -1,
            payload: payload_of(&mut client, b"w"),
        },
    ];
    let source = fake_source(move |args| standard(&keys, "", args));
    let run = migrate(source, target.address(), &[], LIMIT);
    succeeded(&run);
    assert!(
        run.stdout
            .contains("the source answered FUNCTION DUMP with ERR unknown command"),
        "{}",
        run.stdout
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(call(&mut client, &[b"PTTL", b"last"]), Value::Int(-2));
    assert_eq!(call(&mut client, &[b"PTTL", b"forever"]), Value::Int(-1));
}

/// The time between a key's PTTL reply and its RESTORE is taken off its TTL, and a key
/// whose TTL ran out meanwhile is counted as gone: here the source takes a second over
/// the second key's DUMP.
#[test]
fn ttls_lose_the_time_the_copy_took() {
    let Some(target) = redis("the TTLs of a slow copy") else {
        return;
    };
    let mut client = Client::connect(target.address()).expect("connect");
    let keys = vec![
        FakeKey {
            name: b"long".to_vec(),
            pttl: 5_000,
            payload: payload_of(&mut client, b"v"),
        },
        FakeKey {
            name: b"short".to_vec(),
            pttl: 600,
            payload: payload_of(&mut client, b"w"),
        },
    ];
    let source = fake_source(move |args| {
        let mut answers = standard(&keys, "", args);
        if args[0] == b"DUMP" && args[1] == b"short" {
            answers.insert(0, Answer::Pause(Duration::from_millis(1_000)));
        }
        answers
    });
    let run = migrate(source, target.address(), &[], LIMIT);
    succeeded(&run);
    let Value::Int(left) = call(&mut client, &[b"PTTL", b"long"]) else {
        panic!("PTTL");
    };
    assert!(
        (3_000..=4_100).contains(&left),
        "{left} ms left: {}",
        run.stdout
    );
    assert_eq!(call(&mut client, &[b"EXISTS", b"short"]), Value::Int(0));
    assert!(
        run.stdout.contains("1 keys copied, 1 gone from the source"),
        "{}",
        run.stdout
    );
}

/// A source that refuses FUNCTION DUMP (an ACL user without FUNCTION) may have libraries
/// that were not copied: the run says so and fails, after copying the keys.
#[test]
fn a_refused_function_dump_fails_the_run() {
    let (Some(source), Some(target)) = (redis("a refused FUNCTION DUMP"), redis("")) else {
        return;
    };
    let mut client = Client::connect(source.address()).expect("connect");
    call(&mut client, &[b"SET", b"k", b"v"]);
    let user: [&[u8]; 7] = [b"ACL", b"SETUSER", b"mover", b"on", b">pw", b"~*", b"+@all"];
    call(&mut client, &user);
    call(&mut client, &[b"ACL", b"SETUSER", b"mover", b"-function"]);
    let login = ["--from-user", "mover", "--from-password", "pw"];
    let run = migrate(source.address(), target.address(), &login, LIMIT);
    failed_with(&run, "the function libraries were not copied");
    failed_with(&run, "refused FUNCTION DUMP: NOPERM");
    assert!(run.stdout.contains("db 0: 1 keys copied"), "{}", run.stdout);
}

/// A tailstore source stops reading a client once 64 MiB of its replies are unsent. With
/// a batch whose DUMP replies pass that early (1 MiB values first in SCAN's order) and
/// whose requests are many and long (10,000 keys of 512-byte names), a client that wrote
/// the whole batch before reading would wait for ever; the copy must finish.
#[test]
fn a_large_batch_from_a_tailstore_source_does_not_stall() {
    let Some(target) = redis("the copy of a large batch from tailstore") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let shm = pmem_dir();
    let (db, pmem) = (dir.path().join("db"), shm.path().join("from.pmem"));
    let from = Server::start(&["--db", support::path(&db), "--pmem", support::path(&pmem)]);
    let mut client = Client::connect(from.address).expect("connect");
    let keys: Vec<Vec<u8>> = (0..10_000)
        .map(|i| format!("{i:06}{}", "n".repeat(506)).into_bytes())
        .collect();
    for chunk in keys.chunks(1_000) {
        for key in chunk {
            client.send(&[b"SET", key, b"v"]).expect("send");
        }
        for _ in chunk {
            client.receive().expect("reply");
        }
    }
    let Value::Array(reply) = call(&mut client, &[b"SCAN", b"0", b"COUNT", b"100000"]) else {
        panic!("SCAN");
    };
    let Some(Value::Array(order)) = reply.get(1) else {
        panic!("SCAN: {reply:?}");
    };
    let large = vec![b'x'; 1 << 20];
    for key in order.iter().take(70) {
        let Value::Bulk(key) = key else {
            panic!("{key:?}")
        };
        assert_eq!(
            call(&mut client, &[b"SET", key, &large]),
            Value::Simple(b"OK".to_vec())
        );
    }
    let run = migrate(
        from.address,
        target.address(),
        &["--batch", "100000"],
        LIMIT,
    );
    assert!(run.status.is_some(), "the copy stalled: {}", run.said());
    succeeded(&run);
    assert!(
        run.stdout.contains("db 0: 10,000 keys copied"),
        "{}",
        run.stdout
    );
}

/// Random bytes (a DUMP of them does not compress).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// 12 values of 20 MiB, in one batch of the default 100 keys: the copy holds a bounded
/// part of them at a time, not the batch's payloads (and copies of them).
#[test]
fn memory_stays_bounded_whatever_the_batch_holds() {
    let (Some(source), Some(target)) = (redis("the copy of large values"), redis("")) else {
        return;
    };
    let mut client = Client::connect(source.address()).expect("connect");
    for i in 0..12u64 {
        let value = noise(20 << 20, i + 1);
        call(
            &mut client,
            &[b"SET", format!("big:{i}").as_bytes(), &value],
        );
    }
    let run = migrate(source.address(), target.address(), &[], LIMIT);
    succeeded(&run);
    assert!(
        run.stdout.contains("db 0: 12 keys copied"),
        "{}",
        run.stdout
    );
    let peak_mib = run.peak_kib / 1024;
    assert!(
        (1..400).contains(&peak_mib),
        "the copy of 240 MiB took {peak_mib} MiB at its peak"
    );
}

/// A DUMP payload over the 512 MiB a reply may have is reported with its key, its size
/// and the limit; the keys after it are still copied.
#[test]
fn a_dump_too_large_for_a_reply_is_reported_and_skipped() {
    let Some(target) = redis("the copy of a DUMP too large") else {
        return;
    };
    let mut client = Client::connect(target.address()).expect("connect");
    let payload = payload_of(&mut client, b"v");
    let keys = vec![
        FakeKey {
            name: b"huge".to_vec(),
            pttl: -1,
            payload: Vec::new(),
        },
        FakeKey {
            name: b"after".to_vec(),
            pttl: -1,
            payload,
        },
    ];
    let source = fake_source(move |args| {
        if args[0] == b"DUMP" && args[1] == b"huge" {
            return vec![Answer::Oversized((512 << 20) + 1)];
        }
        standard(&keys, "", args)
    });
    let run = migrate(source, target.address(), &[], LIMIT);
    failed_with(&run, "1 keys were not copied");
    assert!(
        run.stdout.contains(
            "1 keys: its DUMP payload of 536,870,913 bytes is larger than a reply may be \
             here (536,870,912 bytes, Redis's proto-max-bulk-len) (e.g. huge)"
        ),
        "{}",
        run.stdout
    );
    assert_eq!(call(&mut client, &[b"EXISTS", b"after"]), Value::Int(1));
}

/// An error names the side that failed, after the counts of what was copied before it.
#[test]
fn an_error_names_its_side_after_the_counts_so_far() {
    let Some(target) = redis("a source that hangs up") else {
        return;
    };
    let mut client = Client::connect(target.address()).expect("connect");
    let keys = vec![
        FakeKey {
            name: b"a".to_vec(),
            pttl: -1,
            payload: payload_of(&mut client, b"v"),
        },
        FakeKey {
            name: b"b".to_vec(),
            pttl: -1,
            payload: payload_of(&mut client, b"w"),
        },
    ];
    let mut scans = 0;
    let source = fake_source(move |args| {
        if args[0] != b"SCAN" {
            return standard(&keys, "", args);
        }
        scans += 1;
        if scans > 1 {
            return vec![Answer::Hangup];
        }
        let answer = b"*2\r\n$2\r\n17\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n".to_vec();
        vec![Answer::Raw(answer)]
    });
    let run = migrate(source, target.address(), &[], LIMIT);
    failed_with(
        &run,
        &format!("error: the source ({source}): the server closed the connection"),
    );
    assert!(
        run.stdout.contains("stopped: copied 2 keys"),
        "{}",
        run.stdout
    );
    assert_eq!(call(&mut client, &[b"DBSIZE"]), Value::Int(2));
}

/// A key the target refuses is named by the start of its name and its length, and its
/// payload is not counted as copied.
#[test]
fn a_refused_key_is_named_briefly_and_its_payload_not_counted() {
    let Some(target) = redis("a refused key") else {
        return;
    };
    let mut client = Client::connect(target.address()).expect("connect");
    let name = [b"k".repeat(299), b"\n".to_vec()].concat();
    let keys = vec![FakeKey {
        name: name.clone(),
        pttl: -1,
        payload: payload_of(&mut client, &noise(300_000, 7)),
    }];
    call(&mut client, &[b"SET", &name, b"there already"]);
    let source = fake_source(move |args| standard(&keys, "", args));
    let run = migrate(source, target.address(), &[], LIMIT);
    failed_with(&run, "1 keys were not copied");
    let shown = format!("(e.g. {}… (300 bytes))", "k".repeat(64));
    assert!(run.stdout.contains(&shown), "{shown} not in {}", run.stdout);
    assert!(
        run.stdout
            .contains("copied 0 keys (0.0 MB of DUMP payloads)"),
        "{}",
        run.stdout
    );
}

/// A source database the target does not have is refused before anything is copied, not
/// found out after the databases before it were.
#[test]
fn a_database_the_target_lacks_is_refused_before_copying() {
    let Some(target) = redis("a database the target lacks") else {
        return;
    };
    let mut client = Client::connect(target.address()).expect("connect");
    let keys = vec![FakeKey {
        name: b"a".to_vec(),
        pttl: -1,
        payload: payload_of(&mut client, b"v"),
    }];
    let source = fake_source(move |args| standard(&keys, "db40:keys=1\r\n", args));
    let run = migrate(source, target.address(), &[], LIMIT);
    failed_with(
        &run,
        "has 16 databases (CONFIG GET databases), so the source's db 40 has nowhere to go",
    );
    assert_eq!(call(&mut client, &[b"DBSIZE"]), Value::Int(0));
}
