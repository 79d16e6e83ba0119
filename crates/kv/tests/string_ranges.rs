//! Commands that read or write a few bytes of a long string: GETRANGE, GETBIT, BITCOUNT and
//! BITPOS with a range and BITFIELD GET read only the part rows that hold those bytes;
//! SETRANGE, SETBIT, BITFIELD and APPEND rewrite only the part rows they touch (and part 0
//! when they grow the string). Each was a read (and a rewrite) of the whole string: on a
//! 400 MiB string, seconds each. And the limits of a string's growth follow
//! `proto-max-bulk-len` (`serve --max-bulk`), as Redis's.

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
    let (logged, reply) = log_bytes_written(&ks, &["BITFIELD", "big", "SET", "u8", &bit, "7"]);
    assert_eq!(
        reply,
        Reply::Array(vec![Reply::Int(i64::from(value[LONG - 1]))])
    );
    value[LONG - 1] = 7;
    eprintln!("BITFIELD SET in {LONG}: {logged} bytes logged");
    assert!(logged < 64 << 10, "BITFIELD SET logged {logged} bytes");
    assert_eq!(run_on(&ks, &["GET", "big"]), Reply::Bulk(value));
    assert_eq!(run_on(&ks, &["STRLEN", "big"]), Reply::Int(LONG as i64));
}

/// APPEND, and SETRANGE, SETBIT and BITFIELD past the end, grow a long string by
/// rewriting its last part and part 0 (decision 235): each rewrote the whole string, so
/// that appending to a string took time in its length.
#[test]
fn growths_rewrite_only_their_parts() {
    let (ks, _dir) = open_keyspace();
    let mut value = long_string(&ks);
    let far_bit = (8 * (LONG + 20) + 7).to_string();
    let field = (8 * (LONG + 21)).to_string();
    let growths: [(&[&str], &[u8], Reply); 4] = [
        (
            &["APPEND", "big", "tail"],
            b"tail",
            Reply::Int(LONG as i64 + 4),
        ),
        (
            &["SETRANGE", "big", &(LONG + 10).to_string(), "far"],
            b"\0\0\0\0\0\0far",
            Reply::Int(LONG as i64 + 13),
        ),
        (
            &["SETBIT", "big", &far_bit, "1"],
            b"\0\0\0\0\0\0\0\x01",
            Reply::Int(0),
        ),
        (
            &["BITFIELD", "big", "SET", "u8", &field, "65"],
            b"A",
            Reply::Array(vec![Reply::Int(0)]),
        ),
    ];
    for (args, added, expected) in growths {
        let (logged, reply) = log_bytes_written(&ks, args);
        value.extend_from_slice(added);
        eprintln!("{:?}: {logged} bytes logged", args[0]);
        assert_eq!(reply, expected, "{args:?}");
        // A whole rewrite logs the whole string (4 MiB); a part is about 5 KB.
        assert!(logged < 64 << 10, "{args:?} logged {logged} bytes");
    }
    let Reply::Bulk(stored) = run_on(&ks, &["GET", "big"]) else {
        panic!("GET big");
    };
    assert_eq!(stored.len(), value.len());
    assert!(
        stored == value,
        "GET: ends {:?}, not {:?}",
        &stored[LONG - 4..],
        &value[LONG - 4..]
    );
    // The parts a growth left as they were still read as the string's (their rows hold the
    // shorter length they were written with).
    let tail = (LONG - 20_000).to_string();
    assert_eq!(
        run_on(&ks, &["GETRANGE", "big", &tail, "-1"]),
        Reply::Bulk(value[LONG - 20_000..].to_vec())
    );
    assert_eq!(run_on(&ks, &["BITCOUNT", "big"]), Reply::Int(ones(&value)));
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| arg.to_string()).collect()
}

/// Random APPENDs, SETRANGEs, SETBITs and BITFIELDs in and past the end of a string of a
/// few parts answer, and leave the string, as a model of Redis's rules says, whether a
/// write goes in place or whole; random range reads see it at every step.
#[test]
fn random_writes_and_growths_of_a_string_of_a_few_parts_match_a_model() {
    use rand::{Rng, SeedableRng};
    let seed: u64 = std::env::var("STRING_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("STRING_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for round in 0..8 {
        let (ks, _dir) = open_keyspace();
        let mut model: Vec<u8> = Vec::new();
        for step in 0..40 {
            let len = model.len();
            let at = |rng: &mut rand::rngs::StdRng| rng.gen_range(0..len + 12_000);
            let text: String = (0..rng.gen_range(0..7_000))
                .map(|i| char::from(b'a' + ((i + step) % 26) as u8))
                .collect();
            let (args, expected) = match rng.gen_range(0..4) {
                0 => {
                    model.extend_from_slice(text.as_bytes());
                    (
                        strings(&["APPEND", "s", &text]),
                        Reply::Int(model.len() as i64),
                    )
                }
                1 => {
                    let offset = at(&mut rng);
                    if !text.is_empty() {
                        put_bytes(&mut model, offset, text.as_bytes());
                    }
                    let args = strings(&["SETRANGE", "s", &offset.to_string(), &text]);
                    (args, Reply::Int(model.len() as i64))
                }
                2 => {
                    let (bit, on) = (at(&mut rng) * 8 + rng.gen_range(0..8), rng.gen_bool(0.5));
                    let mask = 0x80u8 >> (bit % 8);
                    let was = model.get(bit / 8).is_some_and(|byte| byte & mask != 0);
                    put_bytes(&mut model, bit / 8, &[]);
                    let byte = &mut model[bit / 8];
                    *byte = if on { *byte | mask } else { *byte & !mask };
                    let args =
                        strings(&["SETBIT", "s", &bit.to_string(), if on { "1" } else { "0" }]);
                    (args, Reply::Int(i64::from(was)))
                }
                _ => {
                    let (byte, number) = (at(&mut rng), rng.gen_range(0..256u16));
                    // Read after the write, and never grows the string.
                    let looked = rng.gen_range(0..len + 40_000);
                    let old = model.get(byte).copied().unwrap_or(0);
                    put_bytes(&mut model, byte, &[number as u8]);
                    let read = model.get(looked).copied().unwrap_or(0);
                    let args = strings(&[
                        "BITFIELD",
                        "s",
                        "SET",
                        "u8",
                        &(8 * byte).to_string(),
                        &number.to_string(),
                        "GET",
                        "u8",
                        &(8 * looked).to_string(),
                    ]);
                    let replies = vec![Reply::Int(i64::from(old)), Reply::Int(i64::from(read))];
                    (args, Reply::Array(replies))
                }
            };
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let context = format!("seed {seed}, round {round}, step {step}: {}", args[0]);
            assert_eq!(run_on(&ks, &args), expected, "{context}");
            let model_len = model.len();
            assert_eq!(
                run_on(&ks, &["STRLEN", "s"]),
                Reply::Int(model_len as i64),
                "{context}"
            );
            let start = rng.gen_range(0..model_len.max(1));
            let stop = rng.gen_range(start..model_len.max(1) + 10);
            let range = run_on(
                &ks,
                &["GETRANGE", "s", &start.to_string(), &stop.to_string()],
            );
            let expected = model
                .get(start..(stop + 1).min(model_len))
                .unwrap_or_default();
            assert_eq!(
                range,
                Reply::Bulk(expected.to_vec()),
                "{context}: GETRANGE {start} {stop}"
            );
        }
        assert_eq!(
            run_on(&ks, &["GET", "s"]),
            Reply::Bulk(model),
            "seed {seed}, round {round}"
        );
    }
}

/// `bytes` written at `offset` of `value`, which grows zero-filled to reach past them.
fn put_bytes(value: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    let end = offset + bytes.len().max(1);
    if value.len() < end {
        value.resize(end, 0);
    }
    value[offset..offset + bytes.len()].copy_from_slice(bytes);
}

/// A SETRANGE, SETBIT, APPEND or BITFIELD that rewrites parts in place (growing the string
/// or not) still changes the key for a WATCH.
#[test]
fn writes_in_place_fail_a_watch() {
    let server = TestServer::start();
    let mut watcher = server.client();
    let mut writer = server.client();
    q::<()>(&mut writer, &["SET", "k", &"a".repeat(20_000)]);
    for write in [
        &["SETRANGE", "k", "15000", "b"][..],
        &["SETBIT", "k", "100", "1"],
        &["APPEND", "k", "c"],
        &["SETRANGE", "k", "25000", "d"],
        &["SETBIT", "k", "240000", "1"],
        &["BITFIELD", "k", "SET", "u8", "800", "7"],
        &["BITFIELD", "k", "SET", "u8", "250000", "7"],
    ] {
        q::<()>(&mut watcher, &["WATCH", "k"]);
        q::<redis::Value>(&mut writer, write);
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

/// Clients on both event loops APPEND to one string of several parts at once: each APPEND
/// rewrites only the last parts and part 0 (decision 235), and two of them that overlap
/// must conflict, one retried, so that the string ends with every token once and each
/// client's in its order (a lost update would drop tokens; a torn one would mix them).
#[test]
fn concurrent_appends_to_a_long_string_lose_nothing() {
    const CLIENTS: usize = 4;
    const APPENDS: usize = 300;
    let server = TestServer::start();
    let head = "h".repeat(12_000);
    q::<()>(&mut server.client(), &["SET", "s", &head]);
    let writers: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let mut con = server.client();
            std::thread::spawn(move || {
                for i in 0..APPENDS {
                    // 28 bytes: a part (about 5 KB) fills every ~190 tokens.
                    let token = format!("<client {c} token {i:05}>{}", "-".repeat(6));
                    q::<i64>(&mut con, &["APPEND", "s", &token]);
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer");
    }
    let value: String = q(&mut server.client(), &["GET", "s"]);
    let tail = value
        .strip_prefix(head.as_str())
        .expect("the string's head kept");
    assert_eq!(tail.len(), CLIENTS * APPENDS * 28, "bytes appended");
    let tokens: Vec<&str> = tail.split_terminator("------").collect();
    assert_eq!(tokens.len(), CLIENTS * APPENDS);
    for c in 0..CLIENTS {
        let mine: Vec<&str> = tokens
            .iter()
            .copied()
            .filter(|token| token.starts_with(&format!("<client {c} ")))
            .collect();
        let expected: Vec<String> = (0..APPENDS)
            .map(|i| format!("<client {c} token {i:05}>"))
            .collect();
        assert_eq!(mine, expected, "client {c}'s tokens, in its order");
    }
    let len: i64 = q(&mut server.client(), &["STRLEN", "s"]);
    assert_eq!(len as usize, value.len());
}

/// PFADD to a dense HyperLogLog rewrites the part rows its changed bytes are in (the header's
/// stale mark in part 0, and the register's), not its 12,304 bytes; so does PFCOUNT's write
/// of its cached count (decision 240). The registers stay those a whole write gives.
#[test]
fn pfadd_to_a_dense_sketch_rewrites_only_its_changed_parts() {
    let (ks, _dir) = open_keyspace();
    let elements: Vec<String> = (0..5_000).map(|n| format!("e{n}")).collect();
    for batch in elements.chunks(500) {
        let mut args = vec!["PFADD", "hll"];
        args.extend(batch.iter().map(String::as_str));
        run_on(&ks, &args);
    }
    assert_eq!(run_on(&ks, &["STRLEN", "hll"]), Reply::Int(12_304), "dense");
    // A whole write logs the sketch's three part rows: 12,488 bytes here. A part holds
    // about 5.4 KB, so a patch logs part 0 (the header), and the register's part if another.
    let (mut pfadds, mut raised, mut pfcounts) = (0, 0, 0);
    for n in 0..200 {
        let element = format!("new{n}");
        let (logged, reply) = log_bytes_written(&ks, &["PFADD", "hll", &element]);
        if reply == Reply::Int(1) {
            raised += 1;
            pfadds += logged;
        }
        let (logged, _) = log_bytes_written(&ks, &["PFCOUNT", "hll"]);
        pfcounts = pfcounts.max(logged);
    }
    assert!(raised > 20, "only {raised} of 200 PFADDs raised a register");
    let per_pfadd = pfadds / raised;
    eprintln!("{raised} PFADDs raised a register, {per_pfadd} bytes logged each on average; a PFCOUNT at most {pfcounts}");
    assert!(
        per_pfadd < 9_500,
        "a PFADD logged {per_pfadd} bytes on average"
    );
    assert!(pfcounts < 6_500, "a PFCOUNT logged {pfcounts} bytes");
    // The same elements in one PFADD to a new key, written whole: the same registers.
    let mut all = vec!["PFADD".to_string(), "twin".to_string()];
    all.extend(elements);
    all.extend((0..200).map(|n| format!("new{n}")));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    assert_eq!(run_on(&ks, &all), Reply::Int(1));
    let (Reply::Bulk(patched), Reply::Bulk(whole)) =
        (run_on(&ks, &["GET", "hll"]), run_on(&ks, &["GET", "twin"]))
    else {
        panic!("GET of the sketches");
    };
    // Past the 16-byte header, whose cached count only the patched one has.
    assert!(
        patched[16..] == whole[16..],
        "the patched sketch's registers differ from those written whole"
    );
}
