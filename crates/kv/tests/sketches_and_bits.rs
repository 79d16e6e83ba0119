//! LCS's table limit, BITOP over keys named many times, PFCOUNT's cached count (a write: in
//! read-only scripts; its WRITE pause is in `client_pause.rs`), PFCOUNT of an infinite
//! estimate, and the
//! numbers SORT refuses: each as Redis 7.0.15 answers it (checked against a real
//! `redis-server`, and by `same_replies` where one is installed).

mod support;

use support::real_redis::same_replies;
use support::{err, peak_resident_bytes, q, Options, TestServer};

const LCS_TOO_LARGE: &str =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
const READ_ONLY_SCRIPT: &str = "ERR Write commands are not allowed from read-only scripts.";
const NOT_A_NUMBER: &str = "ERR One or more scores can't be converted into double";

#[test]
fn lcs_refuses_a_table_past_proto_max_bulk_len_as_redis_does() {
    let server = TestServer::start();
    let mut con = server.client();
    // (11,584 + 1)² cells of four bytes fit in 512 MiB; (11,585 + 1)² do not.
    for (key, byte, len) in [("a", "x", 11_585), ("b", "y", 11_585), ("c", "x", 11_584)] {
        q::<()>(&mut con, &["SET", key, &byte.repeat(len)]);
    }
    q::<()>(&mut con, &["SET", "d", &"y".repeat(11_584)]);
    assert_eq!(err(&mut con, &["LCS", "a", "b", "LEN"]), LCS_TOO_LARGE);
    assert_eq!(err(&mut con, &["LCS", "a", "b"]), LCS_TOO_LARGE);
    assert_eq!(q::<i64>(&mut con, &["LCS", "c", "d", "LEN"]), 0);
    assert_eq!(q::<i64>(&mut con, &["LCS", "c", "c", "LEN"]), 11_584);
    // The options are read first, and one long string against an empty one is small.
    assert_eq!(err(&mut con, &["LCS", "a", "b", "BAD"]), "ERR syntax error");
    assert_eq!(q::<i64>(&mut con, &["LCS", "a", "nokey", "LEN"]), 0);
}

/// BITOP copied every source once per name: an 8 MiB key named 64 times took 512 MiB at
/// once (200 times: 1.7 GB and 24.5 s). Each distinct key is read once now.
#[test]
fn bitop_reads_a_key_named_many_times_once() {
    let server = TestServer::with(Options {
        exclusive: true,
        ..Options::default()
    });
    let mut con = server.client();
    q::<i64>(&mut con, &["SETBIT", "big", "67108863", "1"]);
    // Once with one name, so that the allocator's steady state is in the baseline.
    assert_eq!(q::<i64>(&mut con, &["BITOP", "OR", "d", "big"]), 8 << 20);
    let before = peak_resident_bytes();
    let mut args = vec!["BITOP", "OR", "d"];
    args.extend(std::iter::repeat_n("big", 64));
    assert_eq!(q::<i64>(&mut con, &args), 8 << 20);
    // Saturating: VmHWM may read lower than before (see hostile_arguments.rs).
    let grew_mib = peak_resident_bytes().saturating_sub(before) >> 20;
    assert!(grew_mib < 128, "peak memory grew by {grew_mib} MiB");
    assert_eq!(q::<i64>(&mut con, &["BITCOUNT", "d"]), 1);
    assert_eq!(q::<i64>(&mut con, &["GETBIT", "d", "67108863"]), 1);
}

#[test]
fn bitop_over_repeated_and_missing_keys_answers_as_redis_does() {
    let server = TestServer::start();
    let mut con = server.client();
    q::<()>(&mut con, &["SET", "a", "ab"]);
    q::<()>(&mut con, &["SET", "b", "0123456789abcdefXYZ"]);
    let get = |con: &mut redis::Connection| q::<Vec<u8>>(con, &["GET", "d"]);
    // XOR of a key with itself cancels out; the length is still the longest source's.
    assert_eq!(q::<i64>(&mut con, &["BITOP", "XOR", "d", "a", "a"]), 2);
    assert_eq!(get(&mut con), b"\0\0");
    assert_eq!(
        q::<i64>(&mut con, &["BITOP", "XOR", "d", "a", "b", "a"]),
        19
    );
    assert_eq!(get(&mut con), b"0123456789abcdefXYZ");
    // AND with a missing key is all zeros; repeated keys count once.
    assert_eq!(
        q::<i64>(&mut con, &["BITOP", "AND", "d", "b", "b", "nokey"]),
        19
    );
    assert_eq!(get(&mut con), [0u8; 19]);
    assert_eq!(
        q::<i64>(&mut con, &["BITOP", "AND", "d", "b", "a", "b"]),
        19
    );
    let mut and = vec![b'0' & b'a', b'1' & b'b'];
    and.resize(19, 0);
    assert_eq!(get(&mut con), and);
    assert_eq!(
        q::<i64>(&mut con, &["BITOP", "OR", "d", "nokey", "a", "a"]),
        2
    );
    assert_eq!(get(&mut con), b"ab");
    // A key of another kind is refused wherever it is named, before anything is written.
    q::<i64>(&mut con, &["RPUSH", "list", "x"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(
        err(&mut con, &["BITOP", "OR", "d", "b", "b", "list"]),
        wrongtype
    );
    assert_eq!(get(&mut con), b"ab");
    // Every source empty: the destination is deleted.
    assert_eq!(
        q::<i64>(&mut con, &["BITOP", "OR", "d", "nokey", "nokey"]),
        0
    );
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "d"]), 0);
}

#[test]
fn bitop_lcs_and_sort_answer_as_a_real_redis_does() {
    let long_a = "x".repeat(11_585);
    let long_b = "y".repeat(11_585);
    let fits_a = "x".repeat(11_584);
    let fits_b = "y".repeat(11_584);
    same_replies(
        "bitop_lcs_and_sort_answer_as_a_real_redis_does",
        &[
            &["SET", "a", "ab"],
            &["SET", "b", "0123456789abcdefXYZ"],
            &["BITOP", "XOR", "d", "a", "a"],
            &["GET", "d"],
            &["BITOP", "XOR", "d", "a", "b", "a", "b", "b"],
            &["GET", "d"],
            &["BITOP", "AND", "d", "b", "a", "b", "nokey"],
            &["GET", "d"],
            &["BITOP", "OR", "d", "a", "b", "a"],
            &["GET", "d"],
            &["BITOP", "NOT", "d", "b"],
            &["GET", "d"],
            &["SET", "la", &long_a],
            &["SET", "lb", &long_b],
            &["SET", "fa", &fits_a],
            &["SET", "fb", &fits_b],
            &["LCS", "la", "lb", "LEN"],
            &["LCS", "la", "lb", "IDX"],
            &["LCS", "fa", "fb", "LEN"],
            &["LCS", "la", "fa", "LEN"],
            &["LCS", "la", "lb", "BAD"],
            // Redis's SORT reads `errno` without clearing it, so the SORTs that succeed
            // come before the first that sets ERANGE.
            &["RPUSH", "m", "0x1p-1074", "2.2250738585072014e-308", "1"],
            &["SORT", "m"],
            &["RPUSH", "l", "1e-310", "2"],
            &["SORT", "l", "ALPHA"],
            &["ZADD", "z", "1e-310", "a"],
            &["SORT", "l"],
            &["RPUSH", "n", "2.2250738585072012e-308", "1"],
            &["SORT", "n"],
        ],
    );
}

/// Redis 7.0.15 refuses PFCOUNT (and PUBLISH, SPUBLISH) in EVAL_RO and in scripts declared
/// `no-writes`, whether or not the count is cached.
#[test]
fn read_only_scripts_may_not_call_pfcount() {
    let server = TestServer::start();
    let mut con = server.client();
    q::<i64>(&mut con, &["PFADD", "h", "a", "b", "c"]);
    q::<i64>(&mut con, &["PFCOUNT", "h"]);
    let refused = [
        ["EVAL_RO", "return redis.call('pfcount', KEYS[1])", "1", "h"],
        [
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('pfcount', KEYS[1])",
            "1",
            "h",
        ],
        ["EVAL_RO", "return redis.call('publish', 'c', 'm')", "0", ""],
        [
            "EVAL_RO",
            "return redis.call('spublish', 'c', 'm')",
            "0",
            "",
        ],
    ];
    for args in refused {
        let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
        let text = err(&mut con, &args);
        assert!(text.starts_with(READ_ONLY_SCRIPT), "{args:?}: {text}");
    }
    let pcall = "return redis.pcall('pfcount', KEYS[1])";
    let text = err(&mut con, &["EVAL_RO", pcall, "1", "h"]);
    assert_eq!(text, READ_ONLY_SCRIPT);
    // A script that may write calls it.
    let eval = "return redis.call('pfcount', KEYS[1])";
    assert_eq!(q::<i64>(&mut con, &["EVAL", eval, "1", "h"]), 3);
}

/// A dense sketch whose registers are all 63, with a stale cached count: Redis estimates
/// an infinity and answers `llroundl` of it.
#[test]
fn pfcount_of_an_infinite_estimate_is_redis_s() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut sketch = b"HYLL\0\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
    sketch.resize(16 + 16384 * 6 / 8, 0xff);
    redis::cmd("SET")
        .arg("h")
        .arg(sketch)
        .query::<()>(&mut con)
        .expect("SET");
    for _ in 0..2 {
        assert_eq!(q::<i64>(&mut con, &["PFCOUNT", "h"]), i64::MIN);
    }
    assert_eq!(q::<i64>(&mut con, &["PFCOUNT", "h", "nokey"]), i64::MIN);
    // Cached, that count reads as stale, as in Redis.
    let card = q::<Vec<u8>>(&mut con, &["GETRANGE", "h", "8", "15"]);
    assert_eq!(card, b"\0\0\0\0\0\0\0\x80");
}

/// glibc's strtod sets ERANGE for a subnormal it cannot hold exactly, and SORT refuses it.
#[test]
fn sort_refuses_inexact_subnormals_and_zadd_takes_them() {
    let server = TestServer::start();
    let mut con = server.client();
    q::<i64>(&mut con, &["RPUSH", "l", "1e-310", "2"]);
    assert_eq!(err(&mut con, &["SORT", "l"]), NOT_A_NUMBER);
    q::<()>(&mut con, &["SET", "w_2", "5e-324"]);
    assert_eq!(err(&mut con, &["SORT", "l", "BY", "w_*"]), NOT_A_NUMBER);
    let exact = ["0x1p-1074", "2.2250738585072014e-308", "1"];
    q::<i64>(&mut con, &["RPUSH", "m", exact[0], exact[1], exact[2]]);
    assert_eq!(q::<Vec<String>>(&mut con, &["SORT", "m"]), exact);
    assert_eq!(q::<i64>(&mut con, &["ZADD", "z", "1e-310", "a"]), 1);
}
