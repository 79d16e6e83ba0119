//! Functions (FUNCTION LOAD … FCALL) through the server: replies compared byte for byte
//! with a real `redis-server`'s, libraries durable across power cuts, FUNCTION DUMP and
//! RESTORE payloads moved between Redis and tailstore, a block's library changes stored in
//! its transaction, every event loop running the
//! libraries' newest code, and FUNCTION STATS and KILL on a running function.

mod support;

use std::thread;
use std::time::Duration;

use redis::Value;
use support::real_redis::same_replies;
use support::redis_process::{redis_program, start_redis};
use support::{client_at, err, eventually, exchange, q, raw_value, restarted, Options, TestServer};
use tailstore_media::sim::SimStorage;

const LIBRARY: &str = "#!lua name=mylib
local calls = 0
local function echo(keys, args) calls = calls + 1; return {keys[1], args[1], calls} end
local function write(keys, args) return redis.call('set', keys[1], args[1]) end
local function fail(keys, args) local x = nil; return x.y end
local function globals(keys, args) return KEYS end
redis.register_function('echo', echo)
redis.register_function{function_name='write', callback=write, description='writes'}
redis.register_function{function_name='read', callback=function(k) return redis.call('get', k[1]) end,
  flags={'no-writes', 'allow-oom'}}
redis.register_function{function_name='wro', callback=write, flags={'no-writes'}}
redis.register_function('fail', fail)
redis.register_function('globals', globals)
redis.register_function('pc', function(k) return redis.pcall('incr', k[1]) end)
";

/// Requests sent on one connection in turn, each with its reply compared.
const CASES: &[&[&str]] = &[
    &["flushall"],
    &["function", "flush"],
    &["function", "load", LIBRARY],
    &["function", "load", LIBRARY],
    &["fcall", "echo", "1", "k", "a"],
    &["fcall", "ECHO", "0"],
    &["fcall", "write", "1", "s", "v"],
    &["fcall", "read", "1", "s"],
    &["fcall_ro", "read", "1", "s"],
    &["fcall_ro", "write", "1", "s", "w"],
    &["fcall", "wro", "1", "s", "w"],
    &["fcall", "fail", "0"],
    &["fcall", "globals", "0"],
    &["fcall", "pc", "1", "s"],
    &["fcall", "nosuch", "0"],
    &["fcall", "echo", "x"],
    &["fcall", "echo", "-1"],
    &["fcall", "echo", "3", "a"],
    // Listed: Redis lists a library's functions in its hash table's order, tailstore in
    // name order; a library of one function compares them byte for byte.
    &["function", "delete", "mylib"],
    &["function", "load", SMALL],
    &["function", "list"],
    &["function", "list", "withcode", "libraryname", "SM*"],
    &["function", "list", "libraryname", "other"],
    &["function", "list", "libraryname"],
    &["function", "list", "withcode", "withcode"],
    &["function", "list", "foo"],
    &["function", "stats"],
    &["function", "kill"],
    &["function", "nosuch"],
    &["function", "delete"],
    &["function", "delete", "nosuch"],
    &["function", "flush", "now"],
    &["function", "load", "replace", "x", "y"],
    &["function", "restore", "garbage"],
    &["function", "restore", "garbage", "merge"],
    // In MULTI, and called from a script (refused).
    &["function", "load", "replace", LIBRARY],
    &["multi"],
    &["fcall", "write", "1", "m", "1"],
    &["fcall", "read", "1", "m"],
    &["exec"],
    &["eval", "return redis.call('fcall', 'echo', 0)", "0"],
    // Libraries' first lines and loads that fail.
    &["function", "load", "return 1"],
    &["function", "load", "#!lua name=x"],
    &["function", "load", "#!lua\nreturn 1"],
    &["function", "load", "#!lua name=x name=y\n"],
    &["function", "load", "#!lua name=x foo=bar\n"],
    &["function", "load", "#!js name=x\n"],
    &["function", "load", "#!lua name=x-y\n"],
    &["function", "load", "#!lua name=x\nreturn 1"],
    &["function", "load", "#!lua name=x\nlocal x = = 1"],
    &["function", "load", "#!lua name=x\nredis.call('set', 'a', 'b')"],
    &["function", "load", "#!lua name=x\nx = 1"],
    &["function", "load", "#!lua name=x\nlocal s = string"],
    &["function", "load", "#!lua name=x\nerror('oops')"],
    &["function", "load", "#!lua name=x\nwhile true do end"],
    &["function", "load", "#!lua name=x\nredis.register_function('echo', function() end)"],
    &["function", "load", "#!lua name=x\nredis.register_function('a-b', function() end)"],
    &["function", "load", "#!lua name=x\nredis.register_function('f')"],
    &["function", "load", "#!lua name=x\nredis.register_function('f', 1)"],
    &["function", "load", "#!lua name=x\nredis.register_function({}, function() end)"],
    &["function", "load", "#!lua name=x\nredis.register_function('f', function() end, 3)"],
    &["function", "load", "#!lua name=x\nredis.register_function{function_name='f'}"],
    &["function", "load", "#!lua name=x\nredis.register_function{callback=function() end}"],
    &[
        "function",
        "load",
        "#!lua name=x\nredis.register_function{function_name='f', callback=function() end, flags={'bad'}}",
    ],
    &[
        "function",
        "load",
        "#!lua name=x\nredis.register_function{function_name='f', callback=function() end, flags='no-writes'}",
    ],
    &[
        "function",
        "load",
        "#!lua name=x\nredis.register_function{function_name='f', callback=function() end, foo=1}",
    ],
    &[
        "function",
        "load",
        "#!lua name=x\nredis.register_function('f', function() end); redis.register_function('f', function() end)",
    ],
    &["function", "load", "#!lua name=x\nredis.log()"],
    &[
        "function",
        "load",
        "#!lua name=x\nlocal v = redis.REDIS_VERSION; redis.register_function(1, function() return redis.register_function end)",
    ],
    &["fcall", "1", "0"],
    &["function", "delete", "x"],
    // Scripts' `#!lua` lines (Redis 7's EVAL flags).
    &["eval", "#!lua\nreturn 1", "0"],
    &["eval", "#!lua flags=no-writes\nreturn redis.call('set', 'a', 'b')", "0"],
    &["eval", "#!lua flags=no-writes\nerror('x')", "0"],
    &["eval", "#!js\nreturn 1", "0"],
    &["eval", "#!lua flags=foo\nreturn 1", "0"],
    &["eval", "#!lua foo=bar\nreturn 1", "0"],
    &["eval", "#!lua flags=no-writes,allow-oom\nreturn 1", "0"],
    &["eval", "#!lua", "0"],
    &["eval", "#!lua flags=\nreturn redis.call('set', 'a', 'c')", "0"],
    &["eval_ro", "#!lua\nreturn 1", "0"],
    &["eval_ro", "#!lua flags=no-writes\nreturn redis.call('get', 'a')", "0"],
    &["script", "load", "#!js\nreturn 1"],
    // RESP3.
    &["hello", "3"],
    &["fcall", "echo", "1", "k", "a"],
    &["function", "delete", "mylib"],
    &["function", "load", SMALL],
    &["function", "list", "withcode"],
    &["function", "stats"],
    &["function", "delete", "small"],
    &["function", "list"],
];

/// A library of one function, with a description and flags.
const SMALL: &str = "#!lua name=small
redis.register_function{function_name='read', callback=function(k) return redis.call('get', k[1]) end,
  flags={'no-writes', 'allow-oom'}, description='reads a key'}
";

#[test]
fn functions_get_the_replies_redis_sends() {
    same_replies("functions_get_the_replies_redis_sends", CASES);
}

/// The libraries FUNCTION LIST lists with their functions' names, in name order (Redis
/// lists both in its hash tables' order).
fn listed(con: &mut redis::Connection) -> Vec<(String, Vec<String>)> {
    let libraries: Vec<Vec<Value>> = q(con, &["function", "list"]);
    let mut listed: Vec<(String, Vec<String>)> = libraries
        .into_iter()
        .map(|fields| {
            let name: String = redis::from_redis_value(fields[1].clone()).expect("a name");
            let functions: Vec<Vec<Value>> =
                redis::from_redis_value(fields[5].clone()).expect("list");
            let mut names: Vec<String> = functions
                .iter()
                .map(|f| redis::from_redis_value(f[1].clone()).expect("a function's name"))
                .collect();
            names.sort();
            (name, names)
        })
        .collect();
    listed.sort();
    listed
}

#[test]
fn libraries_survive_power_cuts_and_flushall() {
    let storage = SimStorage::new();
    let server = TestServer::on_sim(Options::default(), &storage);
    let mut con = server.client();
    assert_eq!(
        q::<String>(&mut con, &["function", "load", LIBRARY]),
        "mylib"
    );
    let second =
        "#!lua name=second\nredis.register_function('twice', function(k, a) return a[1] * 2 end)";
    assert_eq!(
        q::<String>(&mut con, &["function", "load", second]),
        "second"
    );
    q::<()>(&mut con, &["flushall"]);
    // Acknowledged, so durable: a power cut right after keeps both.
    let image = storage.power_cut(1);
    let (server, mut con) = restarted(server, con, &image);
    assert_eq!(
        listed(&mut con),
        vec![
            (
                "mylib".to_string(),
                ["echo", "fail", "globals", "pc", "read", "write", "wro"]
                    .map(String::from)
                    .to_vec()
            ),
            ("second".to_string(), vec!["twice".to_string()]),
        ]
    );
    assert_eq!(q::<i64>(&mut con, &["fcall", "twice", "0", "21"]), 42);
    q::<()>(&mut con, &["fcall", "write", "1", "k", "v"]);
    let replaced =
        "#!lua name=second\nredis.register_function('thrice', function(k, a) return a[1] * 3 end)";
    q::<String>(&mut con, &["function", "load", "replace", replaced]);
    q::<()>(&mut con, &["function", "delete", "mylib"]);
    let image = image.power_cut(2);
    let (server, mut con) = restarted(server, con, &image);
    assert_eq!(
        listed(&mut con),
        vec![("second".to_string(), vec!["thrice".to_string()])]
    );
    assert_eq!(
        err(&mut con, &["fcall", "twice", "0", "1"]),
        "ERR Function not found"
    );
    assert_eq!(q::<i64>(&mut con, &["fcall", "thrice", "0", "2"]), 6);
    assert_eq!(q::<String>(&mut con, &["get", "k"]), "v");
    q::<()>(&mut con, &["function", "flush"]);
    let image = image.power_cut(3);
    let (_server, mut con) = restarted(server, con, &image);
    assert!(listed(&mut con).is_empty());
}

#[test]
fn a_blocks_library_changes_are_stored_in_its_transaction() {
    let storage = SimStorage::new();
    let server = TestServer::on_sim(Options::default(), &storage);
    let mut con = server.client();
    let put = "#!lua name=blocklib\nredis.register_function('put', function(k, a) return redis.call('set', k[1], a[1]) end)";
    let (name, _): (String, ()) = redis::pipe()
        .atomic()
        .cmd("function")
        .arg("load")
        .arg(put)
        .cmd("fcall")
        .arg("put")
        .arg(1)
        .arg("k")
        .arg("v")
        .query(&mut con)
        .expect("the block runs");
    assert_eq!(name, "blocklib");
    // Acknowledged, so durable: the library and what its function wrote in the block.
    let image = storage.power_cut(1);
    let (server, mut con) = restarted(server, con, &image);
    assert_eq!(
        listed(&mut con),
        vec![("blocklib".to_string(), vec!["put".to_string()])]
    );
    assert_eq!(q::<String>(&mut con, &["get", "k"]), "v");
    // Changes that undo one another within a block leave what the last one left.
    let twice =
        "#!lua name=other\nredis.register_function('twice', function(k, a) return a[1] * 2 end)";
    let _: Value = redis::pipe()
        .atomic()
        .cmd("function")
        .arg("delete")
        .arg("blocklib")
        .cmd("function")
        .arg("load")
        .arg(twice)
        .cmd("function")
        .arg("load")
        .arg(put)
        .cmd("function")
        .arg("delete")
        .arg("other")
        .query(&mut con)
        .expect("the block runs");
    let image = image.power_cut(2);
    let (_server, mut con) = restarted(server, con, &image);
    assert_eq!(
        listed(&mut con),
        vec![("blocklib".to_string(), vec!["put".to_string()])]
    );
    assert_eq!(
        err(&mut con, &["fcall", "twice", "0", "1"]),
        "ERR Function not found"
    );
}

/// FUNCTION DUMP's payload as bytes.
fn dump(con: &mut redis::Connection) -> Vec<u8> {
    q(con, &["function", "dump"])
}

fn restore(con: &mut redis::Connection, payload: &[u8], policy: &str) -> redis::RedisResult<()> {
    redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(payload)
        .arg(policy)
        .query(con)
}

#[test]
fn dumps_move_libraries_between_redis_and_tailstore() {
    let Some(program) = redis_program() else {
        println!(
            "redis-server not found: skipping dumps_move_libraries_between_redis_and_tailstore"
        );
        return;
    };
    let redis = start_redis(&program);
    let tailstore = TestServer::start();
    let mut from_redis = client_at(redis.address());
    let mut to_ts = tailstore.client();
    q::<()>(&mut from_redis, &["function", "flush"]);
    q::<String>(&mut from_redis, &["function", "load", LIBRARY]);
    // Redis compresses code longer than 20 bytes with LZF.
    let payload = dump(&mut from_redis);
    restore(&mut to_ts, &payload, "append").expect("restores Redis's payload");
    assert_eq!(q::<i64>(&mut to_ts, &["fcall", "pc", "1", "n"]), 1);
    let refused = restore(&mut to_ts, &payload, "append").expect_err("a collision");
    assert!(
        format!("{refused:?}").contains("Library 'mylib' already exists"),
        "{refused:?}"
    );
    restore(&mut to_ts, &payload, "replace").expect("replaces");
    let other = "#!lua name=other\nredis.register_function('o', function() return 'o' end)";
    q::<String>(&mut to_ts, &["function", "load", other]);
    let back = dump(&mut to_ts);
    restore(&mut from_redis, &back, "flush").expect("Redis restores tailstore's payload");
    assert_eq!(q::<String>(&mut from_redis, &["fcall", "o", "0"]), "o");
    assert_eq!(listed(&mut from_redis), listed(&mut to_ts));
    restore(&mut to_ts, &payload, "flush").expect("flushes first");
    assert_eq!(listed(&mut to_ts).len(), 1);
    let mut damaged = back.clone();
    damaged[3] ^= 0x20;
    let refused = restore(&mut to_ts, &damaged, "flush").expect_err("a bad checksum");
    assert!(
        format!("{refused:?}").contains("payload version or checksum are wrong"),
        "{refused:?}"
    );
    assert_eq!(
        listed(&mut to_ts).len(),
        1,
        "a refused restore changes nothing"
    );
}

#[test]
fn every_connection_runs_the_newest_code_of_a_library() {
    let server = TestServer::with(Options {
        threads: 2,
        ..Options::default()
    });
    let mut loader = server.client();
    let version = |n: u32| {
        format!("#!lua name=v\nredis.register_function('version', function() return {n} end)")
    };
    q::<String>(&mut loader, &["function", "load", &version(1)]);
    // New connections go to the loops in turn: both loops are asked, several times.
    let mut connections: Vec<_> = (0..4).map(|_| server.client()).collect();
    for con in &mut connections {
        assert_eq!(q::<i64>(con, &["fcall", "version", "0"]), 1);
    }
    for n in 2..5 {
        q::<String>(&mut loader, &["function", "load", "replace", &version(n)]);
        for con in &mut connections {
            assert_eq!(q::<i64>(con, &["fcall", "version", "0"]), i64::from(n));
        }
    }
    q::<()>(&mut loader, &["function", "delete", "v"]);
    for con in &mut connections {
        assert_eq!(
            err(con, &["fcall", "version", "0"]),
            "ERR Function not found"
        );
    }
}

#[test]
fn a_running_function_is_listed_by_stats_and_stopped_by_kill() {
    // A minute, not the default five seconds: a stalled machine once let the function's
    // time run out between STATS listing it and KILL, which then found nothing running.
    let server = TestServer::with(Options {
        script_time_limit: Duration::from_secs(60),
        threads: 2,
        ..Options::default()
    });
    // A loop running a function serves nothing else until it ends, so the admin and the
    // raw connection must be on the other loop. Connections go to the loops in turn, in the
    // order they are accepted (a PING makes sure each is before the next is opened): the
    // caller and the loader on one loop, the admin and the raw one on the other. Opened
    // after the caller started, as the test once did, they shared its loop now and then and
    // waited out the minute.
    let accepted = |mut con: redis::Connection| {
        assert_eq!(q::<String>(&mut con, &["ping"]), "PONG");
        con
    };
    let mut caller_con = accepted(server.client());
    let mut admin = accepted(server.client());
    let mut con = accepted(server.client());
    let mut raw = server.raw();
    exchange(&mut raw, b"PING\r\n", b"+PONG\r\n");
    let spin = "#!lua name=spin\nredis.register_function('spin', function(k) redis.call('set', k[1], 'written') while true do end end)";
    q::<String>(&mut con, &["function", "load", spin]);
    let caller = thread::spawn(move || err(&mut caller_con, &["fcall", "spin", "1", "spun"]));
    let running = |admin: &mut redis::Connection| {
        let stats: Vec<Value> = q(admin, &["function", "stats"]);
        stats[1].clone()
    };
    assert!(
        eventually(Duration::from_secs(5), || running(&mut admin) != Value::Nil),
        "FUNCTION STATS lists the running function"
    );
    let listed: Vec<Value> = redis::from_redis_value(running(&mut admin)).expect("a map");
    let name: String = redis::from_redis_value(listed[1].clone()).expect("a name");
    let command: Vec<String> = redis::from_redis_value(listed[3].clone()).expect("its command");
    assert_eq!(name, "spin");
    assert_eq!(command, ["fcall", "spin", "1", "spun"]);
    // A block stands where no script runs, as in Redis: its KILLs find none, and leave
    // the function another connection (perhaps on another loop) runs alone.
    let not_busy = "-NOTBUSY No scripts in execution right now.\r\n";
    exchange(
        &mut raw,
        b"MULTI\r\nFUNCTION KILL\r\nSCRIPT KILL\r\nEXEC\r\n",
        format!("+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n{not_busy}{not_busy}").as_bytes(),
    );
    assert_ne!(running(&mut admin), Value::Nil);
    assert_eq!(raw_value(&mut admin, &["function", "kill"]), Value::Okay);
    let stopped = caller.join().expect("the caller");
    assert!(stopped.contains("SCRIPT KILL"), "{stopped}");
    assert_eq!(running(&mut admin), Value::Nil);
    assert_eq!(
        q::<Option<String>>(&mut admin, &["get", "spun"]),
        None,
        "a killed function's writes are undone"
    );
}

/// A loop holds any number of compiled scripts and functions. Each used to take a slot of
/// mlua's reference stack, about 8,000 in all: past them every new EVAL script failed with
/// "out of Lua stack", and a library of that many functions did not load.
#[test]
fn a_loop_holds_more_scripts_and_functions_than_lua_has_references() {
    let server = TestServer::start();
    let mut con = server.client();
    let mut pipe = redis::pipe();
    for n in 0..9_000 {
        pipe.cmd("EVAL").arg(format!("return {n}")).arg(0);
    }
    let answers: Vec<i64> = pipe.query(&mut con).expect("9,000 scripts");
    assert_eq!(answers.last(), Some(&8_999));
    let registrations: String = (0..9_000)
        .map(|n| format!("redis.register_function('f{n}', function() return {n} end)\n"))
        .collect();
    let library = format!("#!lua name=many\n{registrations}");
    let _: String = q(&mut con, &["FUNCTION", "LOAD", &library]);
    assert_eq!(q::<i64>(&mut con, &["FCALL", "f8999", "0"]), 8_999);
    assert_eq!(q::<i64>(&mut con, &["FCALL", "F0", "0"]), 0);
}
