//! ACL users (decision 162) from a client's side: the rules Redis 7.0 reads, the refusals
//! of commands, keys and channels at the top level, in MULTI and in scripts, ACL's own
//! subcommands, compared byte for byte with a `redis-server` when one is installed; and,
//! on tailstore alone, that a change to a user applies to its connections at once, that
//! deleting it closes them, and what ACL LOG and CLIENT LIST say of them.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use redis::Value;
use support::real_redis::same_replies;
use support::{client_at, closed_by_server, err, eventually, q, raw_value, TestServer};

/// The user most cases log in as: GET, SET, a few more, on keys `k*` and channels `ch*`.
const ALICE: &[&str] = &[
    "ACL",
    "SETUSER",
    "alice",
    "on",
    ">pw",
    "~k*",
    "&ch*",
    "-@all",
    "+get",
    "+set",
    "+publish",
    "+client",
    "+eval",
    "+multi",
    "+exec",
    "+config|get",
    "+acl|whoami",
    "+sort",
    "+ping",
];

#[test]
fn acl_users_are_checked_as_redis_checks_them() {
    let cases: &[&[&str]] = &[
        ALICE,
        &["SET", "k1", "v"],
        &["SET", "other", "v"],
        &["AUTH", "alice", "wrong"],
        &["AUTH", "nosuch", "pw"],
        &["AUTH", "alice", "pw"],
        &["ACL", "WHOAMI"],
        &["GET", "k1"],
        &["GET", "other"],
        &["SET", "x", "1"],
        &["DEL", "k1"],
        &["PUBLISH", "ch1", "m"],
        &["PUBLISH", "zz", "m"],
        &["CONFIG", "GET", "maxclients"],
        &["CONFIG", "SET", "maxclients", "10"],
        &["ACL", "LIST"],
        &["CLIENT", "SETNAME", "zz"],
        &["SORT", "k1", "BY", "w_*"],
        &["SORT", "k1", "GET", "#"],
        &["EVAL", "return 1", "1", "x"],
        &["EVAL", "return 1", "1", "k1"],
        &["EVAL", "return redis.call('del', KEYS[1])", "1", "k1"],
        &["EVAL", "return redis.call('get', 'zz')", "0"],
        &["EVAL", "return redis.pcall('get', 'zz')", "0"],
        &["MULTI"],
        &["GET", "k1"],
        &["DEL", "k1"],
        &["EXEC"],
        &["AUTH", "default", "anything"],
        &["ACL", "WHOAMI"],
        &["ACL", "USERS"],
        &["ACL", "DRYRUN", "alice", "DEL", "k1"],
        &["ACL", "DRYRUN", "alice", "GET", "x"],
        &["ACL", "DRYRUN", "alice", "GET", "k9"],
        &["ACL", "DRYRUN", "alice", "PUBLISH", "x", "m"],
        &["ACL", "DRYRUN", "alice", "CONFIG", "SET", "a", "b"],
        &["ACL", "DRYRUN", "nosuch", "GET", "x"],
        &["ACL", "DRYRUN", "alice", "NOSUCH"],
        &["ACL", "DRYRUN", "alice", "GET"],
        &["ACL", "SETUSER", "bob", "reset"],
        &["ACL", "GETUSER", "bob"],
        &["ACL", "GETUSER", "nosuch"],
        &["ACL", "SETUSER", "bob", "foo"],
        &["ACL", "SETUSER", "bob", "+nosuch"],
        &["ACL", "SETUSER", "bob", "+@nosuch"],
        &["ACL", "SETUSER", "bob", "#abc"],
        &["ACL", "SETUSER", "bob", "<nope"],
        &["ACL", "SETUSER", "bob", "-config|nosuch"],
        &["ACL", "SETUSER", "bob", "+config|get|x"],
        &["ACL", "SETUSER", "bob", "%X~x"],
        &["ACL", "SETUSER", "bob", "allkeys", "~x"],
        &["ACL", "SETUSER", "bob", "allchannels", "&x"],
        &["ACL", "SETUSER", "a b", "on"],
        &["ACL", "SETUSER", "bob", "on", "nopass", "+@all", "~*", "&*"],
        &["ACL", "GETUSER", "bob"],
        &["ACL", "CAT", "nosuch"],
        &["ACL", "DELUSER", "default"],
        &["ACL", "DELUSER", "bob", "zed"],
        &["ACL", "LOAD"],
        &["ACL", "SAVE"],
        &["ACL", "SETUSER", "carl", "off", ">pw", "+@all", "~*"],
        &["AUTH", "carl", "pw"],
        &["CLIENT", "KILL", "USER", "nosuch"],
        &["CLIENT", "KILL", "USER", "carl"],
        &["COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch"],
        &["ACL", "DELUSER", "alice", "carl"],
        &["ACL", "USERS"],
    ];
    same_replies("ACL users against Redis", cases);
}

/// An AUTH or HELLO AUTH inside MULTI changes the user the block's later commands are
/// checked against, scripts among them, as Redis's EXEC checks each at its turn; a refused
/// login changes nothing.
#[test]
fn a_login_inside_multi_applies_to_the_commands_after_it() {
    let cases: &[&[&str]] = &[
        ALICE,
        &["MULTI"],
        &["SET", "other", "1"],
        &["AUTH", "alice", "pw"],
        &["SET", "x", "2"],
        &["GET", "other"],
        &["EVAL", "return redis.call('get', 'other')", "0"],
        &["ACL", "WHOAMI"],
        &["EXEC"],
        &["ACL", "WHOAMI"],
        &["MULTI"],
        &["AUTH", "alice", "wrong"],
        &["HELLO", "2", "AUTH", "default", "anything"],
        &["DEL", "other"],
        &["HELLO", "2", "AUTH", "alice", "pw", "SETNAME", "a b"],
        &["DEL", "other"],
        &["HELLO", "2", "AUTH", "alice", "pw"],
        &["DEL", "other"],
        &["EXEC"],
        &["ACL", "WHOAMI"],
        &["AUTH", "default", "anything"],
        &["EXISTS", "other", "x"],
    ];
    same_replies("a login inside MULTI against Redis", cases);
}

/// A connection logged in as `user` with `password`.
fn logged_in(server: &TestServer, user: &str, password: &str) -> redis::Connection {
    let mut con = client_at(server.address());
    assert_eq!(raw_value(&mut con, &["AUTH", user, password]), Value::Okay);
    con
}

#[test]
fn a_change_to_a_user_applies_to_its_connections_at_once() {
    let server = TestServer::start();
    let mut admin = server.client();
    assert_eq!(raw_value(&mut admin, ALICE), Value::Okay);
    let mut alice = logged_in(&server, "alice", "pw");
    assert_eq!(raw_value(&mut alice, &["SET", "k1", "v"]), Value::Okay);
    let listed: String = q(&mut admin, &["CLIENT", "LIST"]);
    assert!(listed.contains("user=alice"), "{listed}");
    let refused = "NOPERM this user has no permissions to run the 'set' command";
    assert_eq!(
        raw_value(&mut admin, &["ACL", "SETUSER", "alice", "-set"]),
        Value::Okay
    );
    assert_eq!(err(&mut alice, &["SET", "k1", "w"]), refused);
    assert_eq!(
        raw_value(&mut admin, &["ACL", "SETUSER", "alice", "+@write"]),
        Value::Okay
    );
    assert_eq!(raw_value(&mut alice, &["SET", "k1", "w"]), Value::Okay);
    // Turned off, it may log in no more; RESET returns the connection to `default`.
    assert_eq!(
        raw_value(&mut admin, &["ACL", "SETUSER", "alice", "off"]),
        Value::Okay
    );
    let mut again = client_at(server.address());
    assert!(err(&mut again, &["AUTH", "alice", "pw"]).starts_with("WRONGPASS"));
    assert_eq!(
        raw_value(&mut alice, &["RESET"]),
        Value::SimpleString("RESET".into())
    );
    assert_eq!(q::<String>(&mut alice, &["ACL", "WHOAMI"]), "default");
}

#[test]
fn deleting_a_user_closes_its_connections() {
    let server = TestServer::start();
    let mut admin = server.client();
    assert_eq!(raw_value(&mut admin, ALICE), Value::Okay);
    let _alice = logged_in(&server, "alice", "pw");
    let mut idle = server.raw();
    support::exchange(&mut idle, b"AUTH alice pw\r\n", b"+OK\r\n");
    assert_eq!(q::<i64>(&mut admin, &["ACL", "DELUSER", "alice"]), 1);
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    assert!(
        closed_by_server(&mut idle),
        "a deleted user's connection stays open"
    );
    // The other connection is closed by its own event loop, on its next pass.
    let gone = eventually(Duration::from_secs(10), || {
        !q::<String>(&mut admin, &["CLIENT", "LIST"]).contains("user=alice")
    });
    assert!(gone, "a deleted user's connection is still listed");
}

/// Every category holds the commands and subcommands Redis puts in it (of those tailstore
/// answers): what `+@read` or `-@dangerous` allow is what it allows in Redis.
#[test]
fn categories_hold_the_commands_redis_puts_in_them() {
    let Some(support::real_redis::Compared {
        mut redis,
        mut tailstore,
        commands,
        servers: _servers,
    }) = support::real_redis::Compared::start("ACL categories against Redis")
    else {
        return;
    };
    let ours: BTreeSet<String> = commands.into_iter().collect();
    let names: Vec<String> = q(&mut tailstore, &["ACL", "CAT"]);
    assert_eq!(names, q::<Vec<String>>(&mut redis, &["ACL", "CAT"]));
    for category in &names {
        let members = |con: &mut redis::Connection| -> BTreeSet<String> {
            q::<Vec<String>>(con, &["ACL", "CAT", category])
                .into_iter()
                .filter(|name| ours.contains(name))
                .collect()
        };
        assert_eq!(members(&mut tailstore), members(&mut redis), "@{category}");
    }
}

#[test]
fn acl_log_says_what_was_refused_where() {
    let server = TestServer::start();
    let mut admin = server.client();
    assert_eq!(raw_value(&mut admin, ALICE), Value::Okay);
    let mut alice = logged_in(&server, "alice", "pw");
    let _ = err(&mut alice, &["DEL", "k1"]);
    let _ = err(&mut alice, &["EVAL", "return redis.call('get', 'zz')", "0"]);
    assert_eq!(raw_value(&mut alice, &["MULTI"]), Value::Okay);
    let _ = err(&mut alice, &["PUBLISH", "zz", "m"]);
    let entries: Vec<Vec<Value>> = q(&mut admin, &["ACL", "LOG"]);
    let field = |entry: &Vec<Value>, name: &str| {
        let at = entry
            .iter()
            .position(|v| *v == Value::BulkString(name.as_bytes().to_vec()))
            .expect(name);
        match &entry[at + 1] {
            Value::BulkString(text) => String::from_utf8_lossy(text).into_owned(),
            other => format!("{other:?}"),
        }
    };
    let seen: Vec<(String, String, String)> = entries
        .iter()
        .map(|e| (field(e, "reason"), field(e, "context"), field(e, "object")))
        .collect();
    let expected = [
        ("channel", "multi", "zz"),
        ("key", "lua", "zz"),
        ("command", "toplevel", "del"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(seen, expected);
    assert!(entries.iter().all(|e| field(e, "username") == "alice"));
}

/// A queued command its user may no longer run when EXEC comes is refused in EXEC's reply,
/// with Redis's text, and the block's other commands run; on Redis too when installed.
#[test]
fn rules_changed_before_exec_refuse_the_queued_command() {
    let tailstore = TestServer::start();
    let redis = support::redis_process::redis_program()
        .map(|program| support::redis_process::start_redis(&program));
    let mut addresses = vec![tailstore.address()];
    addresses.extend(redis.as_ref().map(|r| r.address()));
    for address in addresses {
        let mut admin = client_at(address);
        assert_eq!(raw_value(&mut admin, ALICE), Value::Okay);
        let mut alice = client_at(address);
        assert_eq!(raw_value(&mut alice, &["AUTH", "alice", "pw"]), Value::Okay);
        assert_eq!(raw_value(&mut alice, &["MULTI"]), Value::Okay);
        for queued in [&["SET", "k1", "v"][..], &["GET", "k1"]] {
            let reply = raw_value(&mut alice, queued);
            assert_eq!(reply, Value::SimpleString("QUEUED".into()));
        }
        let revoke = ["ACL", "SETUSER", "alice", "-set"];
        assert_eq!(raw_value(&mut admin, &revoke), Value::Okay);
        let Value::Array(replies) = raw_value(&mut alice, &["EXEC"]) else {
            panic!("{address}: EXEC is not an array");
        };
        let refused = support::server_error_text(&replies[0]).unwrap_or_default();
        assert_eq!(
            refused,
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand",
            "{address}"
        );
        assert_eq!(
            replies[1],
            Value::Nil,
            "{address}: GET ran, after a SET that did not"
        );
    }
}

/// Narrowing a user's channels closes its subscribed connections (Redis closes those with
/// a subscription no longer allowed); widening them, or any other change, does not.
#[test]
fn narrowed_channels_close_the_users_subscribers() {
    let server = TestServer::start();
    let mut admin = server.client();
    assert_eq!(raw_value(&mut admin, ALICE), Value::Okay);
    assert_eq!(
        raw_value(&mut admin, &["ACL", "SETUSER", "alice", "+subscribe"]),
        Value::Okay
    );
    let mut subscriber = server.raw();
    support::exchange(&mut subscriber, b"AUTH alice pw\r\n", b"+OK\r\n");
    support::exchange(
        &mut subscriber,
        b"SUBSCRIBE ch1\r\n",
        b"*3\r\n$9\r\nsubscribe\r\n$3\r\nch1\r\n:1\r\n",
    );
    let widen = ["ACL", "SETUSER", "alice", "&other", "-get"];
    assert_eq!(raw_value(&mut admin, &widen), Value::Okay);
    support::exchange(
        &mut subscriber,
        b"PING\r\n",
        b"*2\r\n$4\r\npong\r\n$0\r\n\r\n",
    );
    let narrow = ["ACL", "SETUSER", "alice", "resetchannels", "&other"];
    assert_eq!(raw_value(&mut admin, &narrow), Value::Okay);
    subscriber
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    assert!(closed_by_server(&mut subscriber), "still subscribed to ch1");
}

/// `aclfile`: its users are there from the start, ACL SAVE writes every user to it (and a
/// server started on it finds them), ACL LOAD replaces the users by the file's, all or
/// none, closing the connections of users it no longer has.
#[test]
fn the_acl_file_keeps_users_across_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("users.acl");
    std::fs::write(
        &path,
        "# made by hand\nuser alice on >pw ~k* +get\n\nuser default on nopass ~* &* +@all\n",
    )
    .expect("write");
    let options = || support::Options {
        aclfile: Some(path.clone()),
        ..support::Options::default()
    };
    let server = TestServer::with(options());
    let mut admin = server.client();
    let setting: Vec<String> = q(&mut admin, &["CONFIG", "GET", "aclfile"]);
    assert_eq!(setting[1], path.display().to_string());
    let mut alice = logged_in(&server, "alice", "pw");
    assert_eq!(raw_value(&mut alice, &["GET", "k1"]), Value::Nil);
    let bob = ["ACL", "SETUSER", "bob", "on", "nopass", "+@all", "~*"];
    assert_eq!(raw_value(&mut admin, &bob), Value::Okay);
    let dora = [
        "ACL", "SETUSER", "dora", "on", "nopass", "%R~r*", "+get", "(~w*", "+set)",
    ];
    assert_eq!(raw_value(&mut admin, &dora), Value::Okay);
    assert_eq!(raw_value(&mut admin, &["ACL", "SAVE"]), Value::Okay);
    let saved = std::fs::read_to_string(&path).expect("read");
    assert!(
        saved.contains("user bob on nopass ~* resetchannels +@all\n"),
        "{saved}"
    );
    let dora_line =
        "user dora on nopass %R~r* resetchannels -@all +get (~w* resetchannels -@all +set)\n";
    assert!(saved.contains(dora_line), "{saved}");
    drop(server);
    let again = TestServer::with(options());
    let mut admin = again.client();
    let users: Vec<String> = q(&mut admin, &["ACL", "USERS"]);
    assert_eq!(users, ["alice", "bob", "default", "dora"]);
    let listed: Vec<String> = q(&mut admin, &["ACL", "LIST"]);
    assert!(
        listed.contains(&dora_line.trim_end().to_string()),
        "{listed:?}"
    );

    let mut bobs = again.raw();
    support::exchange(&mut bobs, b"AUTH bob x\r\n", b"+OK\r\n");
    let mut alices = again.raw();
    support::exchange(&mut alices, b"AUTH alice pw\r\n", b"+OK\r\n");
    std::fs::write(&path, "user alice on >pw ~k* +get\nuser carl on bogus\n").expect("write");
    let refused = err(&mut admin, &["ACL", "LOAD"]);
    assert!(
        refused.ends_with(":2: Error in ACL SETUSER modifier 'bogus': Syntax error"),
        "{refused}"
    );
    assert_eq!(
        q::<Vec<String>>(&mut admin, &["ACL", "USERS"]),
        users,
        "all or none"
    );
    std::fs::write(&path, "user alice on >pw ~k* (~x +get\n").expect("write");
    let refused = err(&mut admin, &["ACL", "LOAD"]);
    assert!(
        refused.ends_with(":1: unmatched parenthesis in the selector starting at '(~x'"),
        "{refused}"
    );
    std::fs::write(&path, "user alice on >pw ~k* +get\n").expect("write");
    assert_eq!(raw_value(&mut admin, &["ACL", "LOAD"]), Value::Okay);
    assert_eq!(
        q::<Vec<String>>(&mut admin, &["ACL", "USERS"]),
        ["alice", "default"]
    );
    bobs.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    assert!(
        closed_by_server(&mut bobs),
        "a user the file no longer has stays connected"
    );
    // A user the file keeps (its rights may be others now) is logged out too, as in Redis.
    alices
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    assert!(
        closed_by_server(&mut alices),
        "a user the file kept stays connected after ACL LOAD"
    );
    std::fs::write(&path, "user default on nopass ~* +@all\n").expect("write");
    assert!(err(&mut admin, &["ACL", "LOAD"]).contains("'default' user"));
}

#[test]
fn selectors_are_checked_as_redis_checks_them() {
    let cases: &[&[&str]] = &[
        &[
            "ACL",
            "SETUSER",
            "sel",
            "on",
            ">pw",
            "~a*",
            "+get",
            "(~b* +set)",
            "(%R~c*",
            "+@read",
            "&ch*)",
            "(~t* +@all)",
        ],
        &["ACL", "GETUSER", "sel"],
        &["ACL", "LIST"],
        &["SET", "c1", "v"],
        &["RPUSH", "clist", "x"],
        &["AUTH", "sel", "pw"],
        &["GET", "a1"],
        &["SET", "b1", "v"],
        &["GET", "c1"],
        &["SET", "a1", "v"],
        &["MGET", "a1", "b1"],
        &["MGET", "b1", "c1"],
        &["INCR", "b1"],
        &["PUBLISH", "ch1", "m"],
        &["PUBLISH", "zz", "m"],
        &["SUBSCRIBE", "zz"],
        &["SORT", "clist", "BY", "w_*"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "t1"],
        &["EVAL", "return redis.call('get', 'a1')", "0"],
        &["MULTI"],
        &["SET", "b2", "v"],
        &["GET", "b2"],
        &["EXEC"],
        &["AUTH", "default", "anything"],
        &["ACL", "DRYRUN", "sel", "MGET", "a1", "b1"],
        &["ACL", "DRYRUN", "sel", "SET", "a1", "v"],
        &["ACL", "DRYRUN", "sel", "PUBLISH", "zz", "m"],
        &["ACL", "DRYRUN", "sel", "SET", "t1", "v"],
        &[
            "ACL",
            "SETUSER",
            "sel2",
            "on",
            "nopass",
            "~a*",
            "+@all",
            "(~b* +@all)",
            "(~c* +@all)",
        ],
        &["ACL", "DRYRUN", "sel2", "MGET", "b1", "c1", "a1"],
        &["ACL", "DRYRUN", "sel2", "MGET", "a1", "b1", "c1"],
        &["ACL", "DRYRUN", "sel2", "MGET", "c1", "b1", "a1"],
        &["ACL", "DRYRUN", "sel2", "SORT", "a1", "BY", "w_*"],
        // SETUSER's refusals of selectors, and clearing them.
        &["ACL", "SETUSER", "sel", "(~x +get"],
        &["ACL", "SETUSER", "sel", "(~x", "+get"],
        &["ACL", "SETUSER", "sel", "(~x +nosuch)"],
        &["ACL", "SETUSER", "sel", "(on)"],
        &["ACL", "SETUSER", "sel", "(allkeys ~x)"],
        &["ACL", "SETUSER", "sel", "clearselectors", "()"],
        &["ACL", "GETUSER", "sel"],
        &["ACL", "SETUSER", "sel", "reset"],
        &["ACL", "LIST"],
        &["ACL", "DELUSER", "sel", "sel2"],
    ];
    same_replies("ACL selectors against Redis", cases);
}
