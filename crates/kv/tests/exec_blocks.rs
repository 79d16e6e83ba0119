//! What an EXEC block answers and how its commands are counted, compared with a real
//! `redis-server`: connection commands that change the replies after them (HELLO's
//! protocol, CLIENT REPLY, subscriptions and the subscribed context's PING), SCRIPT and
//! FUNCTION among the block's commands (an FCALL calling what a FUNCTION LOAD before it in
//! the block loaded), the order of what the block tells subscribers, the refusals of
//! MONITOR and SSUBSCRIBE, and INFO
//! `errorstats`, `commandstats` and the slow log counting the block's commands one by one.
//! Without a `redis-server` on the PATH the tests print that they are skipped and pass.

mod support;

use std::io::Write;
use std::net::SocketAddr;

use support::conversation::{compare, Step};
use support::real_redis::Servers;
use support::{client_at, q};

/// The SHA1 of the script `return 7`.
const RETURN_7: &str = "59b6ab2fbe0ee4b25733de0f62e6cda4899ef8e9";

/// Each step ends with a command that is answered, so that the conversation reads a reply.
const BLOCKS: &[Step] = &[
    // HELLO: the replies after it in its protocol, the array's header and those before it
    // not; a refused HELLO changes nothing.
    (0, b"HSET h f v\r\nMULTI\r\nHGETALL h\r\nHELLO 3\r\nHGETALL h\r\nHELLO 2\r\nHGETALL h\r\nEXEC\r\nHGETALL h\r\n"),
    (0, b"MULTI\r\nHELLO 4\r\nHELLO 3 SETNAME named\r\nCLIENT GETNAME\r\nHGETALL h\r\nEXEC\r\nHGETALL h\r\nHELLO 2\r\n"),
    // Subscriptions: their confirmations in their place (more than the header counts), a
    // data command between them, PING in the subscribed context's form after them.
    (1, b"MULTI\r\nSUBSCRIBE ch1 ch2\r\nSET k v\r\nPING x\r\nPSUBSCRIBE p*\r\nGET k\r\nEXEC\r\nPING\r\n"),
    (2, b"PUBLISH ch1 m1\r\nPUBLISH pq m2\r\n"),
    (1, b"UNSUBSCRIBE ch1 ch2\r\nPUNSUBSCRIBE\r\n"),
    (1, b"MULTI\r\nUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\nSSUBSCRIBE s\r\nMONITOR\r\nPING\r\nEXEC\r\n"),
    (1, b"MULTI\r\nSUBSCRIBE ch3\r\nUNSUBSCRIBE ch3\r\nPING\r\nEXEC\r\nPING\r\n"),
    // RESP3: the confirmations are pushes, PING is PING.
    (2, b"HELLO 3\r\nMULTI\r\nSUBSCRIBE ch4\r\nPING\r\nUNSUBSCRIBE\r\nEXEC\r\nHELLO 2\r\n"),
    // CLIENT REPLY: SKIP skips the reply to the command after EXEC, not the block's next
    // reply; OFF drops the replies after it until ON.
    (2, b"MULTI\r\nCLIENT REPLY SKIP\r\nPING a\r\nPING b\r\nEXEC\r\nPING skipped\r\nPING c\r\n"),
    (2, b"MULTI\r\nCLIENT REPLY OFF\r\nPING a\r\nCLIENT REPLY ON\r\nPING b\r\nEXEC\r\n"),
    (2, b"MULTI\r\nCLIENT REPLY OFF\r\nPING a\r\nEXEC\r\nPING b\r\nCLIENT REPLY ON\r\n"),
    // SCRIPT in the block's order with its scripts: an EVALSHA after a SCRIPT LOAD finds
    // the script, one after a SCRIPT FLUSH does not.
    (0, b"MULTI\r\nSCRIPT EXISTS 59b6ab2fbe0ee4b25733de0f62e6cda4899ef8e9\r\nSCRIPT LOAD \"return 7\"\r\nEVALSHA 59b6ab2fbe0ee4b25733de0f62e6cda4899ef8e9 0\r\nSCRIPT EXISTS 59b6ab2fbe0ee4b25733de0f62e6cda4899ef8e9 x\r\nSCRIPT FLUSH\r\nEVALSHA 59b6ab2fbe0ee4b25733de0f62e6cda4899ef8e9 0\r\nSCRIPT KILL\r\nEXEC\r\n"),
    // A block that a changed watched key aborts leaves the script cache as it was: its
    // SCRIPT FLUSH, SCRIPT LOAD and EVAL's loading of its script never happened.
    (0, b"SCRIPT LOAD \"return 7\"\r\nWATCH w\r\n"),
    (2, b"SET w changed\r\n"),
    (0, b"MULTI\r\nSCRIPT FLUSH\r\nSCRIPT LOAD \"return 8\"\r\nEVAL \"return 9\" 0\r\nEXEC\r\nSCRIPT EXISTS 59b6ab2fbe0ee4b25733de0f62e6cda4899ef8e9 c2db959528781f82a78b455e9842f46a02a43b61 09b143ac1d8426a09f24496a390fd0d70cafdc7c\r\n"),
    // One that runs: the flush, then what was loaded after it.
    (0, b"MULTI\r\nSCRIPT LOAD \"return 8\"\r\nSCRIPT FLUSH\r\nEVAL \"return 9\" 0\r\nEXEC\r\nSCRIPT EXISTS 59b6ab2fbe0ee4b25733de0f62e6cda4899ef8e9 c2db959528781f82a78b455e9842f46a02a43b61 09b143ac1d8426a09f24496a390fd0d70cafdc7c\r\n"),
    // FUNCTION: its changes, listings and errors in their places.
    (0, b"MULTI\r\n*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n$68\r\n#!lua name=lib\nredis.register_function('f', function() return 1 end)\r\nFUNCTION LIST\r\n*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n$68\r\n#!lua name=lib\nredis.register_function('f', function() return 1 end)\r\nFUNCTION STATS\r\nEXEC\r\n"),
    (0, b"FCALL f 0\r\nMULTI\r\nFCALL f 0\r\nFUNCTION DELETE lib\r\nFUNCTION DELETE lib\r\nFUNCTION DUMP\r\nEXEC\r\nFCALL f 0\r\n"),
    // An FCALL after a FUNCTION LOAD in the same block calls what it loaded; one after a
    // DELETE finds nothing; a LIST between changes shows the set at its place.
    (0, b"MULTI\r\n*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n$97\r\n#!lua name=lib2\nredis.register_function('g', function(k) return redis.call('SET', k[1], 'G') end)\r\nFCALL g 1 kg\r\nGET kg\r\n*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n$97\r\n#!lua name=lib2\nredis.register_function('g', function(k) return redis.call('SET', k[1], 'G') end)\r\nFUNCTION LIST\r\nFUNCTION DELETE lib2\r\nFCALL g 1 kg\r\n*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n$68\r\n#!lua name=lib\nredis.register_function('f', function() return 1 end)\r\nFCALL f 0\r\nEXEC\r\nFCALL f 0\r\nFCALL g 1 kg\r\n"),
    // A block that a changed watched key aborts leaves the libraries as they were.
    (0, b"WATCH w\r\n"),
    (2, b"SET w again\r\n"),
    (0, b"MULTI\r\nFUNCTION FLUSH\r\n*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n$97\r\n#!lua name=lib2\nredis.register_function('g', function(k) return redis.call('SET', k[1], 'G') end)\r\nFCALL g 1 kg2\r\nEXEC\r\nFCALL f 0\r\nFCALL g 1 kg2\r\nEXISTS kg2\r\n"),
    // FLUSH in a block: the FCALLs after it find nothing.
    (0, b"MULTI\r\nFCALL f 0\r\nFUNCTION FLUSH\r\nFCALL f 0\r\nFUNCTION LIST\r\nEXEC\r\nFUNCTION LIST\r\n"),
    // A block's errors are counted one by one.
    (0, b"CONFIG RESETSTAT\r\nSET s abc\r\nMULTI\r\nINCR s\r\nLPUSH s x\r\nPING\r\nEXEC\r\nINFO errorstats\r\n"),
    // What a block tells subscribers comes in its commands' order: each command's key
    // events, a script's events and PUBLISHes in its place, a PUBLISH of the block in its.
    (2, b"CONFIG SET notify-keyspace-events KEA\r\n"),
    (1, b"SUBSCRIBE ch5\r\nPSUBSCRIBE __keyevent@0__:*\r\n"),
    (2, b"MULTI\r\nSET a 1\r\nEVAL \"redis.call('set','b',2) redis.call('publish','ch5','y') redis.call('del','a')\" 0\r\nPUBLISH ch5 z\r\nSET c 3\r\nEXEC\r\n"),
    (1, b"UNSUBSCRIBE ch5\r\nPUNSUBSCRIBE\r\n"),
    (2, b"CONFIG SET notify-keyspace-events \"\"\r\n"),
];

#[test]
fn a_blocks_connection_commands_change_the_replies_after_them_as_in_redis() {
    assert_eq!(RETURN_7.len(), 40);
    compare(
        BLOCKS,
        "a_blocks_connection_commands_change_the_replies_after_them_as_in_redis",
    );
}

/// Runs a block with a failing command, a script and a SCRIPT command, with the slow log
/// taking every command, and returns what INFO commandstats says of each command (without
/// its times) and the names the slow log holds, newest first.
fn counted_block(address: SocketAddr) -> (Vec<String>, Vec<String>) {
    let mut con = client_at(address);
    let _: () = q(&mut con, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    let _: () = q(&mut con, &["SLOWLOG", "RESET"]);
    let _: () = q(&mut con, &["CONFIG", "RESETSTAT"]);
    let mut raw = std::net::TcpStream::connect(address).expect("connect");
    raw.write_all(
        b"SET s abc\r\nMULTI\r\nINCR s\r\nPING\r\nEVAL \"return 1\" 0\r\nSCRIPT EXISTS x\r\nEXEC\r\n",
    )
    .expect("write");
    support::expect_bytes(
        &mut raw,
        b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*4\r\n-ERR value is not an integer or out of range\r\n+PONG\r\n:1\r\n*1\r\n:0\r\n",
    );
    // Off, so that nothing after the block is logged however slow (a loaded machine, a
    // debug build).
    let _: () = q(
        &mut con,
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
    );
    let stats: String = q(&mut con, &["INFO", "commandstats"]);
    let mut counts: Vec<String> = stats
        .lines()
        .filter(|line| line.starts_with("cmdstat_"))
        .map(|line| {
            let (name, fields) = line.split_once(':').unwrap_or((line, ""));
            let kept: Vec<&str> = fields
                .split(',')
                .filter(|field| !field.starts_with("usec"))
                .collect();
            format!("{name}:{}", kept.join(","))
        })
        .collect();
    counts.sort();
    let entries: redis::Value = q(&mut con, &["SLOWLOG", "GET", "20"]);
    let logged = slowlog_names(&entries);
    (counts, logged)
}

/// The first argument of each slow log entry.
fn slowlog_names(entries: &redis::Value) -> Vec<String> {
    let redis::Value::Array(entries) = entries else {
        panic!("SLOWLOG GET answered {entries:?}");
    };
    entries
        .iter()
        .map(|entry| match entry {
            redis::Value::Array(fields) => match fields.get(3) {
                Some(redis::Value::Array(args)) => match args.first() {
                    Some(redis::Value::BulkString(name)) => {
                        String::from_utf8_lossy(name).to_lowercase()
                    }
                    other => panic!("a slow log entry's arguments begin with {other:?}"),
                },
                other => panic!("a slow log entry's arguments are {other:?}"),
            },
            other => panic!("a slow log entry is {other:?}"),
        })
        .collect()
}

#[test]
fn a_blocks_commands_are_counted_and_logged_one_by_one_as_in_redis() {
    let Some(servers) =
        Servers::start("a_blocks_commands_are_counted_and_logged_one_by_one_as_in_redis")
    else {
        return;
    };
    let (redis_counts, redis_logged) = counted_block(servers.redis.address());
    let (counts, logged) = counted_block(servers.tailstore.address());
    assert!(
        counts
            .iter()
            .any(|line| line == "cmdstat_incr:calls=1,rejected_calls=0,failed_calls=1"),
        "{counts:?}"
    );
    assert_eq!(counts, redis_counts);
    assert!(!logged.iter().any(|name| name == "exec"), "{logged:?}");
    assert_eq!(logged, redis_logged);
}
