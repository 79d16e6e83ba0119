//! Commands that read or write a few bytes of a long string: GETRANGE, GETBIT, BITCOUNT and
//! BITPOS with a range and BITFIELD GET read only the part rows that hold those bytes;
//! SETRANGE and SETBIT inside the string rewrite only the part rows they touch. Each was a
//! read (and a rewrite) of the whole string: on a 400 MiB string, seconds each. And the
//! limits of a string's growth follow `proto-max-bulk-len` (`serve --max-bulk`), as Redis's.

mod support;

use support::real_redis::same_replies;
use support::{err, open_keyspace, q, run_on, Options, TestServer};
use tailstore_kv::Keyspace;
use tailstore_resp::Reply;

/// Long enough for about 800 part rows (a part holds about 5 KB), yet written in one
/// commit of the keyspace `open_keyspace` gives.
const LONG: usize = 4 << 20;

/// Buffer-pool page requests (hits and misses) that `args` made: how many pages a read
/// touched, whatever the pool holds and however fast the machine is.
fn pages_touched(ks: &Keyspace, args: &[&str]) -> (u64, Reply) {
    let before = ks.database().stats().pool;
    let reply = run_on(ks, args);
    let after = ks.database().stats().pool;
    let touched = (after.hits + after.misses) - (before.hits + before.misses);
    (touched, reply)
}

/// Bytes appended to the log while `args` ran (its commit's record, with any piece's).
fn log_bytes_written(ks: &Keyspace, args: &[&str]) -> (u64, Reply) {
    let before = ks.database().stats().log.log_bytes;
    let reply = run_on(ks, args);
    let after = ks.database().stats().log.log_bytes;
    (after - before, reply)
}

/// A long string of varied bytes (digits and letters), stored at `big`; its bytes.
fn long_string(ks: &Keyspace) -> Vec<u8> {
    let value: Vec<u8> = (0..LONG).map(|i| b"0123456789abcdefXYZ"[i % 19]).collect();
    let text = String::from_utf8(value.clone()).expect("ASCII");
    assert_eq!(run_on(ks, &["SET", "big", &text]), Reply::ok());
    value
}

fn ones(bytes: &[u8]) -> i64 {
    bytes.iter().map(|b| i64::from(b.count_ones())).sum()
}

#[test]
fn reads_of_a_few_bytes_touch_only_their_parts() {
    let (ks, _dir) = open_keyspace();
    let value = long_string(&ks);
    let (whole, reply) = pages_touched(&ks, &["GET", "big"]);
    assert_eq!(reply, Reply::Bulk(value.clone()));
    let middle = LONG / 2;
    let (m, m1) = (middle.to_string(), (middle + 1).to_string());
    let bit = (middle * 8 + 3).to_string();
    let cases: Vec<(Vec<&str>, Reply)> = vec![
        (
            vec!["GETRANGE", "big", "0", "0"],
            Reply::Bulk(value[..1].to_vec()),
        ),
        (
            vec!["GETRANGE", "big", "-3", "-1"],
            Reply::Bulk(value[LONG - 3..].to_vec()),
        ),
        (
            vec!["SUBSTR", "big", &m, &m1],
            Reply::Bulk(value[middle..middle + 2].to_vec()),
        ),
        (
            vec!["GETBIT", "big", &bit],
            Reply::Int(i64::from(value[middle] >> 4 & 1)),
        ),
        (
            vec!["BITCOUNT", "big", &m, &m1],
            Reply::Int(ones(&value[middle..middle + 2])),
        ),
        (
            vec!["BITCOUNT", "big", "-2", "-1", "BYTE"],
            Reply::Int(ones(&value[LONG - 2..])),
        ),
        (
            vec!["BITPOS", "big", "0", &m, &m1],
            Reply::Int(middle as i64 * 8),
        ),
        (
            vec!["BITFIELD", "big", "GET", "u8", &bit],
            Reply::Array(vec![Reply::Int(i64::from(
                (value[middle] << 3) | (value[middle + 1] >> 5),
            ))]),
        ),
    ];
    for (args, expected) in cases {
        let (touched, reply) = pages_touched(&ks, &args);
        eprintln!("{args:?}: {touched} pages touched, GET {whole}");
        assert_eq!(reply, expected, "{args:?}");
        // A whole read touches every leaf of the string (hundreds); a few bytes, a
        // descent or two.
        assert!(
            touched * 20 < whole && touched < 64,
            "{args:?} touched {touched} pages; a whole read touches {whole}"
        );
    }
}

#[test]
fn writes_inside_a_string_rewrite_only_their_parts() {
    let (ks, _dir) = open_keyspace();
    let mut value = long_string(&ks);
    let middle = LONG / 2;
    let offset = middle.to_string();
    let (logged, reply) = log_bytes_written(&ks, &["SETRANGE", "big", &offset, "zz"]);
    assert_eq!(reply, Reply::Int(LONG as i64));
    value[middle..middle + 2].copy_from_slice(b"zz");
    eprintln!("SETRANGE of 2 bytes in {LONG}: {logged} bytes logged");
    // A rewrite logs the whole string (4 MiB); one part is about 5 KB.
    assert!(
        logged < 64 << 10,
        "SETRANGE of 2 bytes logged {logged} bytes"
    );
    let bit = (8 * (LONG - 1)).to_string();
    let (logged, reply) = log_bytes_written(&ks, &["SETBIT", "big", &bit, "1"]);
    assert_eq!(reply, Reply::Int(0));
    value[LONG - 1] |= 0x80;
    eprintln!("SETBIT in {LONG}: {logged} bytes logged");
    assert!(logged < 64 << 10, "SETBIT logged {logged} bytes");
    assert_eq!(run_on(&ks, &["GET", "big"]), Reply::Bulk(value));
    assert_eq!(run_on(&ks, &["STRLEN", "big"]), Reply::Int(LONG as i64));
    // Growing is a whole-string write, as before (one of several parts here: growing the
    // long string past what a commit holds is refused before it is built).
    let small = "s".repeat(20_000);
    assert_eq!(run_on(&ks, &["SET", "small", &small]), Reply::ok());
    assert_eq!(
        run_on(&ks, &["SETRANGE", "small", "20000", "!"]),
        Reply::Int(20_001)
    );
    assert_eq!(
        run_on(&ks, &["SETBIT", "small", "160015", "1"]),
        Reply::Int(0)
    );
    let mut grown = small.into_bytes();
    grown.extend([b'!', 1]);
    assert_eq!(run_on(&ks, &["GET", "small"]), Reply::Bulk(grown));
}

/// A SETRANGE or SETBIT that rewrites parts in place still changes the key for a WATCH.
#[test]
fn writes_in_place_fail_a_watch() {
    let server = TestServer::start();
    let mut watcher = server.client();
    let mut writer = server.client();
    q::<()>(&mut writer, &["SET", "k", &"a".repeat(20_000)]);
    for write in [
        &["SETRANGE", "k", "15000", "b"][..],
        &["SETBIT", "k", "100", "1"],
    ] {
        q::<()>(&mut watcher, &["WATCH", "k"]);
        q::<i64>(&mut writer, write);
        q::<()>(&mut watcher, &["MULTI"]);
        q::<()>(&mut watcher, &["GET", "k"]);
        let exec: Option<Vec<String>> = q(&mut watcher, &["EXEC"]);
        assert_eq!(exec, None, "{write:?} left the WATCH standing");
    }
    let tail: String = q(&mut writer, &["GETRANGE", "k", "14999", "15001"]);
    assert_eq!(tail, "aba");
}

/// Ranges over a string of several parts, their edges in every part, answered as Redis
/// 7.0 answers them (where a `redis-server` is installed).
#[test]
fn ranges_across_parts_answer_as_redis_does() {
    let len: i64 = 30_000;
    let text: String = (0..len)
        .map(|i| match (i / 4_000) % 3 {
            // Runs of zero bytes, for BITPOS 1 to search through.
            0 => '\0',
            1 => char::from(b"abcXYZ019"[(i % 9) as usize]),
            _ => char::from(b"\x01\x7f@"[(i % 3) as usize]),
        })
        .collect();
    let mut cases: Vec<Vec<String>> = vec![
        vec!["SET".into(), "s".into(), text],
        // All ones, for BITPOS 0 to search through.
        vec!["BITOP".into(), "NOT".into(), "ones".into(), "s".into()],
        vec!["SET".into(), "h".into(), "hello".into()],
        vec!["HSET".into(), "wrong".into(), "f".into(), "v".into()],
    ];
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |bound: i64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % (2 * bound as u64 + 1)) as i64 - bound
    };
    let strings: Vec<String> = ["s", "ones", "h", "wrong", "none"].map(String::from).into();
    for round in 0..400 {
        let key = strings[round % strings.len()].clone();
        let (a, b) = (next(len + 10).to_string(), next(len + 10).to_string());
        let (bit_a, bit_b) = (
            next(8 * len + 10).to_string(),
            next(8 * len + 10).to_string(),
        );
        let bit = next(8 * len + 10).abs().to_string();
        let value = ["0", "1"][round % 2].to_string();
        let case: Vec<String> = match round % 9 {
            0 => vec!["GETRANGE".into(), key, a, b],
            1 => vec!["GETBIT".into(), key, bit],
            2 => vec!["BITCOUNT".into(), key, a, b],
            3 => vec!["BITCOUNT".into(), key, bit_a, bit_b, "BIT".into()],
            4 => vec!["BITPOS".into(), key, value, a],
            5 => vec!["BITPOS".into(), key, value, a, b, "BYTE".into()],
            6 => vec!["BITPOS".into(), key, value, bit_a, bit_b, "BIT".into()],
            7 => vec!["BITFIELD_RO".into(), key, "GET".into(), "i13".into(), bit],
            _ => vec!["SETBIT".into(), key, bit, value],
        };
        cases.push(case);
        if round % 40 == 0 {
            let at = next(len).abs().to_string();
            cases.push(vec![
                "SETRANGE".into(),
                "s".into(),
                at,
                "\x7fpatch\0".into(),
            ]);
            cases.push(vec!["GET".into(), "s".into()]);
        }
    }
    cases.push(vec!["GET".into(), "s".into()]);
    cases.push(vec!["GET".into(), "ones".into()]);
    let cases: Vec<Vec<&str>> = cases
        .iter()
        .map(|case| case.iter().map(String::as_str).collect())
        .collect();
    let cases: Vec<&[&str]> = cases.iter().map(Vec::as_slice).collect();
    same_replies("ranges_across_parts_answer_as_redis_does", &cases);
}

const TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// `serve --max-bulk 1MiB`: APPEND and SETRANGE refuse a string longer, SETBIT, GETBIT and
/// BITFIELD an offset past it, as Redis does with `proto-max-bulk-len` 1 MiB.
#[test]
fn string_growth_follows_max_bulk() {
    const MAX: usize = 1 << 20;
    let server = TestServer::with(Options {
        max_bulk: MAX,
        ..Options::default()
    });
    let mut con = server.client();
    let limit: Vec<String> = q(&mut con, &["CONFIG", "GET", "proto-max-bulk-len"]);
    assert_eq!(limit[1], MAX.to_string());
    q::<()>(&mut con, &["SET", "k", &"x".repeat(MAX - 10)]);
    assert_eq!(err(&mut con, &["APPEND", "k", &"y".repeat(11)]), TOO_LONG);
    assert_eq!(
        q::<i64>(&mut con, &["APPEND", "k", &"y".repeat(10)]),
        MAX as i64
    );
    let last = (MAX - 1).to_string();
    assert_eq!(err(&mut con, &["SETRANGE", "new", &last, "ab"]), TOO_LONG);
    assert_eq!(
        q::<i64>(&mut con, &["SETRANGE", "new", &last, "a"]),
        MAX as i64
    );
    let (past, inside) = ((8 * MAX).to_string(), (8 * MAX - 1).to_string());
    for args in [
        &["SETBIT", "bits", &past, "1"][..],
        &["GETBIT", "bits", &past],
        &["BITFIELD", "bits", "SET", "u8", &past, "1"],
        &["BITFIELD_RO", "bits", "GET", "u8", &past],
    ] {
        assert_eq!(err(&mut con, args), BAD_OFFSET, "{args:?}");
    }
    assert_eq!(q::<i64>(&mut con, &["SETBIT", "bits", &inside, "1"]), 0);
    assert_eq!(q::<i64>(&mut con, &["GETBIT", "bits", &inside]), 1);
    assert_eq!(q::<i64>(&mut con, &["STRLEN", "bits"]), MAX as i64);
}

/// A range read across parts sees one write's bytes, never a mix, while other clients
/// rewrite the string in place (SETRANGE over every part) and whole (SET of another
/// length, under a new layout): the parts read are validated as a whole read's are.
#[test]
fn range_reads_of_a_string_written_concurrently_are_whole() {
    let server = TestServer::start();
    let mut reader = server.client();
    q::<()>(&mut reader, &["SET", "c", &"a".repeat(30_000)]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = [["SETRANGE", "b"], ["SET", "c"]]
        .into_iter()
        .map(|[command, byte]| {
            let mut con = server.client();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut round = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let value = byte.repeat(30_000 + 10_000 * (round % 2));
                    match command {
                        "SETRANGE" => q::<i64>(&mut con, &["SETRANGE", "c", "0", &value]),
                        _ => {
                            q::<()>(&mut con, &["SET", "c", &value]);
                            0
                        }
                    };
                    round += 1;
                }
            })
        })
        .collect();
    let started = std::time::Instant::now();
    let mut reads = 0;
    while started.elapsed() < std::time::Duration::from_secs(2) {
        let got: Vec<u8> = q(&mut reader, &["GETRANGE", "c", "4000", "26000"]);
        assert_eq!(got.len(), 22_001);
        assert!(
            got.iter().all(|&b| b == got[0]),
            "read {reads}: a range mixing writes"
        );
        let count: i64 = q(&mut reader, &["BITCOUNT", "c", "4000", "26000"]);
        assert_eq!(count % 22_001, 0, "read {reads}: a count mixing writes");
        reads += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.join().expect("writer");
    }
}
