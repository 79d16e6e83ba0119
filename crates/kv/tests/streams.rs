//! Streams and consumer groups through the server, in the cases a review found answered
//! otherwise than Redis 7.0.15 answers them (the expected replies are that server's).

mod support;

use std::thread;
use std::time::Duration;

use redis::Value;
use support::{command, error_text, eventually, q, Options, TestServer};

/// Redis's DUMP of an empty stream whose entries-added wrapped past `i64::MAX`
/// (XADD p 1-1 f v, XDEL p 1-1, XSETID p 1-1 ENTRIESADDED 9223372036854775807, XADD p 2-1
/// f v, XDEL p 2-1 on Redis 7.0.15).
const WRAPPED_DUMP: &str = "130000020100000201818000000000000000000a00b6eba83af2343043";

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        Value::Int(n) => n.to_string(),
        other => panic!("not a string: {other:?}"),
    }
}

/// The value of `field` in a flat name/value reply (XINFO STREAM's, one of XINFO GROUPS').
fn field<'v>(reply: &'v Value, name: &str) -> &'v Value {
    let Value::Array(items) = reply else {
        panic!("not a name/value array: {reply:?}");
    };
    items
        .chunks(2)
        .find(|pair| text(&pair[0]) == name)
        .map(|pair| &pair[1])
        .unwrap_or_else(|| panic!("no {name} in {reply:?}"))
}

/// The one group XINFO GROUPS lists: (last-delivered-id, entries-read, lag, pending).
fn only_group(con: &mut redis::Connection, key: &str) -> (String, Value, Value, Value) {
    let groups: Vec<Value> = q(con, &["XINFO", "GROUPS", key]);
    assert_eq!(groups.len(), 1, "{groups:?}");
    let group = &groups[0];
    (
        text(field(group, "last-delivered-id")),
        field(group, "entries-read").clone(),
        field(group, "lag").clone(),
        field(group, "pending").clone(),
    )
}

/// An XREAD or XREADGROUP reply as (stream, [entry id…]) pairs.
fn read_ids(reply: &Value) -> Vec<(String, Vec<String>)> {
    let Value::Array(streams) = reply else {
        panic!("not a read reply: {reply:?}");
    };
    streams
        .iter()
        .map(|stream| {
            let Value::Array(pair) = stream else {
                panic!("not [key, entries]: {stream:?}");
            };
            let Value::Array(entries) = &pair[1] else {
                panic!("no entries: {stream:?}");
            };
            let ids = entries
                .iter()
                .map(|entry| match entry {
                    Value::Array(parts) => text(&parts[0]),
                    other => panic!("not an entry: {other:?}"),
                })
                .collect();
            (text(&pair[0]), ids)
        })
        .collect()
}

fn pairs(expected: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    expected
        .iter()
        .map(|(key, ids)| {
            (
                key.to_string(),
                ids.iter().map(|id| id.to_string()).collect(),
            )
        })
        .collect()
}

/// The reply to `args`, or its error's full text.
fn reply_or_error(con: &mut redis::Connection, args: &[&str]) -> Result<Value, String> {
    command(args)
        .query::<Value>(con)
        .map_err(|err| error_text(&err))
}

#[test]
fn entries_added_wraps_past_i64_max_as_in_redis() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: String = q(&mut con, &["XADD", "p", "1-1", "f", "v"]);
    assert_eq!(q::<i64>(&mut con, &["XDEL", "p", "1-1"]), 1);
    let set = ["XSETID", "p", "1-1", "ENTRIESADDED", "9223372036854775807"];
    let _: String = q(&mut con, &set);
    let _: String = q(&mut con, &["XADD", "p", "2-1", "f", "v"]);
    // The entries removed (added less the length) now wrap too: this XDEL stored them.
    assert_eq!(
        reply_or_error(&mut con, &["XDEL", "p", "2-1"]),
        Ok(Value::Int(1))
    );
    let info: Value = q(&mut con, &["XINFO", "STREAM", "p"]);
    assert_eq!(
        field(&info, "entries-added"),
        &Value::Int(i64::MIN),
        "{info:?}"
    );
    assert_eq!(text(field(&info, "max-deleted-entry-id")), "2-1");
    // DUMP writes the count as Redis does.
    let dumped: Vec<u8> = q(&mut con, &["DUMP", "p"]);
    assert_eq!(hex(&dumped), WRAPPED_DUMP);
}

#[test]
fn restore_takes_a_wrapped_entries_added_as_redis_does() {
    let server = TestServer::start();
    let mut con = server.client();
    let payload = unhex(WRAPPED_DUMP);
    let restored: String = redis::cmd("RESTORE")
        .arg("p")
        .arg(0)
        .arg(payload)
        .query(&mut con)
        .expect("RESTORE");
    assert_eq!(restored, "OK");
    let info: Value = q(&mut con, &["XINFO", "STREAM", "p"]);
    assert_eq!(
        field(&info, "entries-added"),
        &Value::Int(i64::MIN),
        "{info:?}"
    );
    assert_eq!(text(field(&info, "last-generated-id")), "2-1");
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

/// A stream `key` of entries 1-0 … `n`-0 with the group `g` at 0.
fn stream_with_group(con: &mut redis::Connection, key: &str, n: usize) {
    for i in 1..=n {
        let _: String = q(con, &["XADD", key, &format!("{i}-0"), "f", "v"]);
    }
    let _: String = q(con, &["XGROUP", "CREATE", key, "g", "0"]);
}

#[test]
fn xreadgroup_serves_a_key_named_twice_after_what_the_first_delivered() {
    let server = TestServer::start();
    let mut con = server.client();
    stream_with_group(&mut con, "s", 5);
    let read = [
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        "s",
        ">",
        ">",
    ];
    let reply: Value = q(&mut con, &read);
    assert_eq!(
        read_ids(&reply),
        pairs(&[("s", &["1-0", "2-0"]), ("s", &["3-0", "4-0"])])
    );
    let group = only_group(&mut con, "s");
    assert_eq!(
        group,
        ("4-0".into(), Value::Int(4), Value::Int(1), Value::Int(4))
    );

    stream_with_group(&mut con, "n", 5);
    let read = [
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "NOACK",
        "STREAMS",
        "n",
        "n",
        ">",
        ">",
    ];
    let reply: Value = q(&mut con, &read);
    let all: &[&str] = &["1-0", "2-0", "3-0", "4-0", "5-0"];
    assert_eq!(read_ids(&reply), pairs(&[("n", all)]));
    let group = only_group(&mut con, "n");
    assert_eq!(
        group,
        ("5-0".into(), Value::Int(5), Value::Int(0), Value::Int(0))
    );
}

#[test]
fn error_texts_are_redis_7_0s() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: String = q(&mut con, &["XADD", "x", "5-18446744073709551615", "f", "v"]);
    assert_eq!(
        reply_or_error(&mut con, &["XADD", "x", "5-*", "f", "v"]),
        Err("ERR Elements are too large to be stored".into())
    );
    let unbalanced =
        "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.";
    for read in [
        &["XREAD", "STREAMS", "x", "y", "0"][..],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "x", "y", "0"][..],
    ] {
        assert_eq!(
            reply_or_error(&mut con, read),
            Err(unbalanced.into()),
            "{read:?}"
        );
    }
}

#[test]
fn xgroup_help_is_redis_7_0s() {
    let server = TestServer::start();
    let mut con = server.client();
    let help: Vec<String> = q(&mut con, &["XGROUP", "HELP"]);
    let redis = [
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
        "HELP",
        "    Prints this help.",
    ];
    assert_eq!(help, redis);
}

#[test]
fn xreadgroup_reads_the_largest_id_as_new_entries() {
    let server = TestServer::start();
    let mut con = server.client();
    stream_with_group(&mut con, "s", 3);
    let max = "18446744073709551615-18446744073709551615";
    let reply: Value = q(
        &mut con,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            max,
        ],
    );
    assert_eq!(read_ids(&reply), pairs(&[("s", &["1-0"])]));
    // Any other ID reads the consumer's own pending entries after it: none.
    let below = "18446744073709551615-18446744073709551614";
    let reply: Value = q(
        &mut con,
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", below],
    );
    assert_eq!(read_ids(&reply), pairs(&[("s", &[])]));
    let reply: Value = q(
        &mut con,
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", max],
    );
    assert_eq!(read_ids(&reply), pairs(&[("s", &["2-0", "3-0"])]));
    let group = only_group(&mut con, "s");
    assert_eq!(
        group,
        ("3-0".into(), Value::Int(3), Value::Int(0), Value::Int(3))
    );
}

fn blocked_clients(server: &TestServer) -> u64 {
    let info: String = q(&mut server.client(), &["INFO", "clients"]);
    info.lines()
        .find_map(|line| line.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO clients tells blocked_clients")
}

/// Blocks an XREADGROUP on `key`'s group `g` (new entries), runs `change` on another
/// connection once it waits, and answers the blocked client's reply.
fn blocked_then(server: &TestServer, key: &str, change: &[&str]) -> Result<Value, String> {
    blocked_at_then(server, key, ">", change)
}

/// [`blocked_then`] with the ID the XREADGROUP names.
fn blocked_at_then(
    server: &TestServer,
    key: &str,
    id: &str,
    change: &[&str],
) -> Result<Value, String> {
    let mut blocked = server.client();
    let (key, id) = (key.to_string(), id.to_string());
    let waiting = thread::spawn(move || {
        let read = [
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "10000",
            "STREAMS",
            &key,
            &id,
        ];
        reply_or_error(&mut blocked, &read)
    });
    assert!(
        eventually(Duration::from_secs(10), || blocked_clients(server) == 1),
        "the XREADGROUP never blocked"
    );
    let _: Value = q(&mut server.client(), change);
    waiting.join().expect("the blocked client's thread")
}

#[test]
fn a_blocked_xreadgroup_whose_stream_or_group_goes_away_is_told_as_redis_tells_it() {
    let server = TestServer::start();
    let mut con = server.client();
    let create = |con: &mut redis::Connection, key: &str| {
        let _: String = q(con, &["XGROUP", "CREATE", key, "g", "$", "MKSTREAM"]);
    };
    create(&mut con, "destroyed");
    assert_eq!(
        blocked_then(
            &server,
            "destroyed",
            &["XGROUP", "DESTROY", "destroyed", "g"]
        ),
        Err("NOGROUP the consumer group this client was blocked on no longer exists".into())
    );
    let gone = Err("UNBLOCKED the stream key no longer exists".to_string());
    create(&mut con, "deleted");
    assert_eq!(blocked_then(&server, "deleted", &["DEL", "deleted"]), gone);
    create(&mut con, "replaced");
    assert_eq!(
        blocked_then(&server, "replaced", &["SET", "replaced", "x"]),
        gone
    );
    // A first run still answers the plain NOGROUP and WRONGTYPE.
    let read = [
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "10",
        "STREAMS",
        "deleted",
        ">",
    ];
    assert_eq!(
        reply_or_error(&mut con, &read),
        Err(
            "NOGROUP No such key 'deleted' or consumer group 'g' in XREADGROUP with GROUP option"
                .into()
        )
    );
    let read = [
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "10",
        "STREAMS",
        "replaced",
        ">",
    ];
    assert_eq!(
        reply_or_error(&mut con, &read),
        Err("WRONGTYPE Operation against a key holding the wrong kind of value".into())
    );
}

#[test]
fn a_blocked_xreadgroup_on_the_largest_id_waits_for_new_entries() {
    let server = TestServer::start();
    let mut con = server.client();
    let _: String = q(&mut con, &["XGROUP", "CREATE", "b", "g", "$", "MKSTREAM"]);
    let max = "18446744073709551615-18446744073709551615";
    let reply = blocked_at_then(&server, "b", max, &["XADD", "b", "1-1", "f", "v"]);
    assert_eq!(
        read_ids(&reply.expect("entries")),
        pairs(&[("b", &["1-1"])])
    );
}

/// Pending entries past what one commit may delete: XGROUP DESTROY and DELCONSUMER of
/// them rebuild the stream without them, as XTRIM rebuilds (Redis drops them at once).
/// The other groups, their consumers and pending entries, and the stream's entries and
/// counts stay.
#[test]
fn groups_and_consumers_with_more_pending_entries_than_a_commit_are_removed() {
    let server = TestServer::with(Options {
        ring_and_pool_bytes: 8 << 20,
        ..Options::default()
    });
    let mut con = server.client();
    let limit = server.ks.database().max_commit_bytes();
    assert!(limit <= 1 << 20, "a commit limit of {limit}");
    // Pending rows count about 30 bytes each against the commit limit: a fifth more.
    let n = limit / 25;
    let ids: Vec<String> = (1..=n).map(|i| format!("{i}-1")).collect();
    for chunk in ids.chunks(2000) {
        let mut adds = redis::pipe();
        for id in chunk {
            adds.cmd("XADD").arg("s").arg(id).arg("f").arg("v").ignore();
        }
        adds.query::<()>(&mut con).expect("XADD");
    }
    let read = |con: &mut redis::Connection, group: &str, consumer: &str, count: usize| {
        let count = count.to_string();
        let read = [
            "XREADGROUP",
            "GROUP",
            group,
            consumer,
            "COUNT",
            &count,
            "STREAMS",
            "s",
            ">",
        ];
        let _: Value = q(con, &read);
    };
    for group in ["g", "other", "doomed"] {
        let _: String = q(&mut con, &["XGROUP", "CREATE", "s", group, "0"]);
    }
    read(&mut con, "g", "small", 3);
    read(&mut con, "other", "x", 2);
    for _ in (0..n).step_by(5000) {
        read(&mut con, "g", "big", 5000);
        read(&mut con, "doomed", "c", 5000);
    }
    let summary =
        |con: &mut redis::Connection, group: &str| -> Value { q(con, &["XPENDING", "s", group]) };
    let other_before = summary(&mut con, "other");
    let groups_before: Vec<Value> = q(&mut con, &["XINFO", "GROUPS", "s"]);

    let deleted = ["XGROUP", "DELCONSUMER", "s", "g", "big"];
    assert_eq!(
        reply_or_error(&mut con, &deleted),
        Ok(Value::Int(n as i64 - 3))
    );
    let destroyed = ["XGROUP", "DESTROY", "s", "doomed"];
    assert_eq!(reply_or_error(&mut con, &destroyed), Ok(Value::Int(1)));

    let pending: Vec<Value> = q(&mut con, &["XPENDING", "s", "g", "-", "+", "10"]);
    let owners: Vec<(String, String)> = pending
        .iter()
        .map(|entry| match entry {
            Value::Array(parts) => (text(&parts[0]), text(&parts[1])),
            other => panic!("not a pending entry: {other:?}"),
        })
        .collect();
    let small = |id: &str| (id.to_string(), "small".to_string());
    assert_eq!(owners, [small("1-1"), small("2-1"), small("3-1")]);
    let consumers: Vec<Value> = q(&mut con, &["XINFO", "CONSUMERS", "s", "g"]);
    assert_eq!(consumers.len(), 1, "{consumers:?}");
    assert_eq!(text(field(&consumers[0], "name")), "small");
    assert_eq!(summary(&mut con, "other"), other_before);
    // `g` and `other` as they were, but for the pending entries `big` took with it.
    let groups: Vec<Value> = q(&mut con, &["XINFO", "GROUPS", "s"]);
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(groups[1], groups_before[2], "other");
    assert_eq!(field(&groups[0], "pending"), &Value::Int(3));
    assert_eq!(field(&groups[0], "consumers"), &Value::Int(1));
    for name in ["last-delivered-id", "entries-read", "lag"] {
        assert_eq!(
            field(&groups[0], name),
            field(&groups_before[1], name),
            "g's {name}"
        );
    }
    assert_eq!(q::<usize>(&mut con, &["XLEN", "s"]), n);
    let info: Value = q(&mut con, &["XINFO", "STREAM", "s"]);
    assert_eq!(field(&info, "entries-added"), &Value::Int(n as i64));
    // A group of the same name starts afresh: nothing of the destroyed one is left.
    let _: String = q(&mut con, &["XGROUP", "CREATE", "s", "doomed", "0"]);
    let summary = summary(&mut con, "doomed");
    assert_eq!(field_at(&summary, 0), &Value::Int(0), "{summary:?}");
}

fn field_at(reply: &Value, at: usize) -> &Value {
    match reply {
        Value::Array(items) => &items[at],
        other => panic!("not an array: {other:?}"),
    }
}

/// A stream whose entries-added wrapped, and its groups' reads and lags after it, against
/// a real Redis (skipped without one): the counts wrap the same way everywhere.
#[test]
fn wrapped_counts_answer_as_redis_does() {
    support::real_redis::same_replies(
        "wrapped stream counts against Redis",
        &[
            &["XADD", "p", "1-1", "f", "v"],
            &["XGROUP", "CREATE", "p", "before", "0"],
            &["XSETID", "p", "1-1", "ENTRIESADDED", "9223372036854775807"],
            &[
                "XGROUP",
                "CREATE",
                "p",
                "at",
                "$",
                "ENTRIESREAD",
                "9223372036854775807",
            ],
            &["XADD", "p", "2-1", "f", "v"],
            &["XADD", "p", "3-1", "f", "v"],
            &["XINFO", "GROUPS", "p"],
            &[
                "XREADGROUP",
                "GROUP",
                "at",
                "c",
                "COUNT",
                "1",
                "STREAMS",
                "p",
                ">",
            ],
            &["XREADGROUP", "GROUP", "before", "c", "STREAMS", "p", ">"],
            &["XINFO", "GROUPS", "p"],
            &["XDEL", "p", "2-1"],
            &["XINFO", "GROUPS", "p"],
            &["XTRIM", "p", "MAXLEN", "0"],
            &["XINFO", "GROUPS", "p"],
            &["XADD", "p", "4-1", "f", "v"],
            &["XINFO", "GROUPS", "p"],
            &["XREADGROUP", "GROUP", "at", "c", "STREAMS", "p", ">"],
            &["XINFO", "GROUPS", "p"],
        ],
    );
}
