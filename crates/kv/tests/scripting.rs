//! Lua scripts through the server: replies compared byte for byte with a real
//! `redis-server`'s, EVALSHA through a client library, a script as one transaction (all of
//! its writes or none, retried on conflict, undone when stopped), and its effects outside
//! the database (blocked clients, pub/sub).

mod support;

use std::thread;
use std::time::{Duration, Instant};

use support::real_redis::same_replies;
use support::{command, err, eventually, q, Options, TestServer};

/// Requests sent on one connection in turn, each with its reply compared. What Redis adds
/// to an error ("script: SHA, on @user_script:LINE.") is compared too.
const CASES: &[&[&str]] = &[
    &["flushall"],
    // Compilation and the arguments of EVAL.
    &["eval", "x", "0"],
    &["eval", "return 1", "-1"],
    &["eval", "return 1", "2", "a"],
    &["eval", "return 1", "x"],
    &["eval", "return #KEYS + #ARGV", "2", "a", "b", "c"],
    &[
        "eval",
        "return {KEYS[1], ARGV[1], ARGV[2]}",
        "1",
        "k",
        "a",
        "b",
    ],
    // Lua values as replies.
    &["eval", "return {1, 2, {3, 'x'}, nil, 5}", "0"],
    &["eval", "return 3.99", "0"],
    &["eval", "return -3.99", "0"],
    &["eval", "return true", "0"],
    &["eval", "return false", "0"],
    &["eval", "return nil", "0"],
    &["eval", "return {err='My Error'}", "0"],
    &["eval", "return redis.error_reply('My Error')", "0"],
    // Numbers reach commands as `%.17g` writes them.
    &["eval", "return redis.call('incrby', 'big', 100000000000000)", "0"],
    &["eval", "redis.call('set', 'ts', 1700000000123456) return redis.call('get', 'ts')", "0"],
    &["eval", "redis.call('set', 'third', 1/3) return redis.call('get', 'third')", "0"],
    &["eval", "redis.call('set', 'f', 2^60) return redis.call('get', 'f')", "0"],
    &["eval", "redis.call('set', 'f', -1.5e-7) return redis.call('get', 'f')", "0"],
    // Replication flags and the debugger's calls, accepted with no effect.
    &[
        "eval",
        "redis.set_repl(redis.REPL_ALL) redis.debug('x', 1) \
         return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_REPLICA, redis.REPL_SLAVE, \
         redis.REPL_ALL, redis.breakpoint()}",
        "0",
    ],
    &["eval", "return redis.pcall(function() redis.set_repl(7) end)", "0"],
    &["eval", "redis.set_repl(7)", "0"],
    // KEYS and ARGV are new tables for each script: a metatable one sets is gone.
    &["eval", "setmetatable(ARGV, {__index = function() return 'planted' end}) return 1", "0"],
    &["eval", "return ARGV[1] or 'fresh'", "0"],
    // error_reply's code: the first word when a space follows it, else ERR; a '-' and
    // line ends around the message taken off; line ends inside it sent as spaces.
    &["eval", "return redis.error_reply('Error')", "0"],
    &["eval", "return redis.error_reply('-MY Error')", "0"],
    &["eval", "return redis.error_reply('-Error')", "0"],
    &["eval", "return redis.error_reply('')", "0"],
    &["eval", "return redis.error_reply('\r\nA B\r\n')", "0"],
    &["eval", "return redis.error_reply('a\r\n+INJECTED')", "0"],
    &["eval", "return redis.error_reply('abc').err", "0"],
    &["eval", "return {err='x\r\n:42'}", "0"],
    &["eval", "return redis.status_reply('ok\r\n:1')", "0"],
    // Many values from a script, and through pcall (Lua 5.1's API check, on in debug
    // builds of Lua, aborted the server on these).
    &[
        "eval",
        "local t = {} for i = 1, 30 do t[i] = i end return unpack(t)",
        "0",
    ],
    &[
        "eval",
        "local t = {} for i = 1, 300 do t[i] = i end return #{pcall(unpack, t)}",
        "0",
    ],
    &[
        "eval",
        "return cmsgpack.unpack(string.rep(string.char(0x45), 40))",
        "0",
    ],
    // A raised string keeps its lines, as spaces.
    &["eval", "error('two\nlines\r\n-EVIL')", "0"],
    &["eval", "return redis.status_reply('FINE')", "0"],
    &["eval", "return {double=3.5}", "0"],
    &["eval", "return redis.status_reply(1, 2)", "0"],
    // Replies as Lua values.
    &["eval", "return redis.call('get', 'nokey')", "0"],
    &["eval", "return type(redis.call('get', 'nokey'))", "0"],
    &[
        "eval",
        "return redis.call('set', KEYS[1], ARGV[1])",
        "1",
        "s",
        "abc",
    ],
    &["eval", "return type(redis.call('set', 'x', 'y'))", "0"],
    &["eval", "return redis.call('set', 'x', 'z', 'get')", "0"],
    &["eval", "return redis.call('zadd', 'z', 1.5, 'a')", "0"],
    &[
        "eval",
        "return redis.call('zrange', 'z', 0, -1, 'withscores')",
        "0",
    ],
    &["eval", "return redis.call('zscore', 'z', 'a')", "0"],
    &[
        "eval",
        "redis.setresp(3) return redis.call('zscore', 'z', 'a')",
        "0",
    ],
    &[
        "eval",
        "redis.setresp(3) return redis.call('get', 'nokey') == nil",
        "0",
    ],
    &["eval", "redis.setresp(4)", "0"],
    &["eval", "return redis.call('hgetall', 'nohash')", "0"],
    &[
        "eval",
        "redis.call('hset', 'h', 'f', 'v') return redis.call('hgetall', 'h')",
        "0",
    ],
    &["eval", "return redis.call('set', 'n', 1.5)", "0"],
    &["eval", "return redis.call('set', 'n', 1e20)", "0"],
    &["get", "n"],
    // Errors: raised by redis.call, returned by redis.pcall, raised by the script.
    &["eval", "return redis.call('incr', KEYS[1])", "1", "s"],
    &[
        "eval",
        "local r = redis.call('incr', KEYS[1]) return 'after'",
        "1",
        "s",
    ],
    &["eval", "return redis.pcall('incr', KEYS[1])", "1", "s"],
    &[
        "eval",
        "local ok, e = pcall(redis.call, 'incr', 's') return e",
        "0",
    ],
    &[
        "eval",
        "return pcall(function() error({err='inner'}) end)",
        "0",
    ],
    &["eval", "error('boom')", "0"],
    &["eval", "\nlocal x = 1\nerror('line three')", "0"],
    &["eval", "error({err='from a table'})", "0"],
    &["eval", "error()", "0"],
    &[
        "eval",
        "\nlocal x = 1\nreturn redis.call('lpush', KEYS[1])",
        "1",
        "l",
    ],
    &["eval", "return redis.call('nosuch')", "0"],
    &["eval", "return redis.call('get')", "0"],
    &["eval", "return redis.call()", "0"],
    &["eval", "return redis.call({})", "0"],
    &["eval", "return redis.call('eval', 'return 1', 0)", "0"],
    &["eval", "return redis.call('multi')", "0"],
    &["eval", "return redis.call('subscribe', 'x')", "0"],
    &["eval_ro", "return redis.call('set', 'a', 'b')", "0"],
    &["eval_ro", "return redis.call('get', 's')", "0"],
    // A failure keeps the writes before it, as in Redis.
    &[
        "eval",
        "redis.call('set', 'kept', '1') error('after a write')",
        "0",
    ],
    &["get", "kept"],
    // The sandbox.
    &["eval", "a = 5", "0"],
    &["eval", "return b", "0"],
    &["eval", "return print", "0"],
    &["eval", "redis.call = nil", "0"],
    &["eval", "string.rep = nil", "0"],
    &["eval", "return string.rep('x', 3)", "0"],
    &["eval", "return _G.KEYS[1]", "1", "kk"],
    &["eval", "return loadstring('return 1 + 1')()", "0"],
    &["eval", "return redis.sha1hex('')", "0"],
    // Redis's cjson and bit libraries.
    &["eval", "return cjson.encode({1, 2, 'x', {a = true}})", "0"],
    &["eval", "return cjson.encode({})", "0"],
    &[
        "eval",
        "local t = cjson.decode('{\"a\":[1,2.5,\"s\"]}') return {t.a[1], t.a[3], tostring(t.a[2])}",
        "0",
    ],
    &[
        "eval",
        "return cjson.decode('[1,null]')[2] == cjson.null",
        "0",
    ],
    // What JSON cannot hold, and nesting to lua-cjson's limit and past it (a table that
    // holds itself overflowed a debug build's event loop, and took the server down).
    &["eval", "local t = {} t[1] = t return cjson.encode(t)", "0"],
    &["eval", "local t = {} t.a = t return cjson.encode(t)", "0"],
    &["eval", "return cjson.encode(0/0)", "0"],
    &["eval", "return cjson.encode(function() end)", "0"],
    &[
        "eval",
        "return #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))",
        "0",
    ],
    &[
        "eval",
        "return cjson.decode(string.rep('{\"a\":', 1001) .. '1' .. string.rep('}', 1001))",
        "0",
    ],
    &[
        "eval",
        "return cjson.decode('[\"[[[\",' .. string.rep('[', 1001))",
        "0",
    ],
    &[
        "eval",
        "return {bit.band(7, 3), bit.bor(1, 2), bit.bxor(5, 1), bit.bnot(0), bit.lshift(1, 31)}",
        "0",
    ],
    &[
        "eval",
        "return {bit.tohex(255), bit.tohex(-1, -4), bit.tobit(2^32 + 1), bit.arshift(-256, 4)}",
        "0",
    ],
    // Redis's cmsgpack: integers at each width and sign, floats that fit a float32 and
    // ones that do not, strings at each header size, arrays, maps, nesting beyond 16,
    // several values; unpack of each format, and the errors of each function.
    &[
        "eval",
        "return cmsgpack.pack(0, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296, -1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649, 2^53)",
        "0",
    ],
    &["eval", "return cmsgpack.pack(1.5, 0.1, -2.25, 1/0, -1/0, 2^63, -2^63, 1e300)", "0"],
    &[
        "eval",
        "return cmsgpack.pack('', 'abc', string.rep('x', 31), string.rep('y', 32), string.rep('z', 256), true, false, nil)",
        "0",
    ],
    &["eval", "return cmsgpack.pack({}, {1, 2, 3}, {1, nil, 3}, {a = 1}, {[2] = 'b'}, {[1.5] = 1})", "0"],
    &[
        "eval",
        "local t = {} local c = t for i = 1, 20 do c[1] = {} c = c[1] end return cmsgpack.pack(t)",
        "0",
    ],
    &["eval", "local t = {x = 1} t.self = t return #cmsgpack.pack(t)", "0"],
    &["eval", "return cmsgpack.pack(print, {f = print})", "0"],
    &[
        "eval",
        "local a, b, c = cmsgpack.unpack(cmsgpack.pack({1, 'two', {three = 3}}, -7, 'x')) return {a[1], a[2], a[3].three, b, c}",
        "0",
    ],
    &[
        "eval",
        "return {cmsgpack.unpack(string.char(0x93, 0xcc, 0xff, 0xd1, 0x80, 0x00, 0xa1, 0x7a))}",
        "0",
    ],
    &[
        "eval",
        "return {cmsgpack.unpack(string.char(0xca, 0x3f, 0xc0, 0, 0, 0xdc, 0, 1, 0xc3, 0xdb, 0, 0, 0, 1, 0x41))}",
        "0",
    ],
    &[
        "eval",
        "local x = {cmsgpack.unpack(cmsgpack.pack(1.5, 2^40, -2^40, 0.1))} return {tostring(x[1]), tostring(x[2]), tostring(x[3]), tostring(x[4])}",
        "0",
    ],
    &["eval", "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}", "0"],
    &["eval", "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2), 1)}", "0"],
    &["eval", "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}", "0"],
    &["eval", "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 5, 2)}", "0"],
    &["eval", "cmsgpack.pack = nil", "0"],
    &["eval", "return cmsgpack.pack()", "0"],
    &["eval", "return cmsgpack.unpack(string.char(0x92, 1))", "0"],
    &["eval", "return cmsgpack.unpack(string.char(0xc1))", "0"],
    &["eval", "return cmsgpack.unpack(string.char(0xd4, 1, 2))", "0"],
    &["eval", "return cmsgpack.unpack(string.char(0xc4, 1, 2))", "0"],
    &["eval", "return cmsgpack.unpack(string.char(0x81, 0xc0, 1))", "0"],
    &["eval", "return cmsgpack.unpack({})", "0"],
    &["eval", "return cmsgpack.unpack()", "0"],
    &["eval", "return cmsgpack.unpack(12)", "0"],
    &["eval", "return cmsgpack.unpack_limit('x')", "0"],
    &["eval", "return cmsgpack.unpack_limit('x', 'y')", "0"],
    &["eval", "return cmsgpack.unpack_one('x', -1)", "0"],
    &["eval", "return cmsgpack.unpack_one('x', 5)", "0"],
    &["eval", "return pcall(cmsgpack.unpack, string.char(0xc1))", "0"],
    &["eval", "local ok, e = pcall(cmsgpack.pack) return e", "0"],
    // Streams from scripts: entries as nested arrays, XREAD's map in both protocols, and
    // BLOCK refused.
    &["eval", "return redis.call('xadd', KEYS[1], '1-1', 'f', 'v')", "1", "stream"],
    &["eval", "return redis.call('xrange', KEYS[1], '-', '+')", "1", "stream"],
    &["eval", "return redis.call('xread', 'streams', KEYS[1], '0')", "1", "stream"],
    &[
        "eval",
        "redis.setresp(3) return redis.call('xread', 'streams', KEYS[1], '0')",
        "1",
        "stream",
    ],
    &[
        "eval",
        "return redis.call('xread', 'block', '0', 'streams', KEYS[1], '$')",
        "1",
        "stream",
    ],
    // Connection commands inside scripts; SELECT stays the script's.
    &["eval", "return redis.call('ping')", "0"],
    &["eval", "return redis.call('echo', 'hi')", "0"],
    &[
        "eval",
        "redis.call('select', 1) return redis.call('set', 'in1', 'x')",
        "0",
    ],
    &["exists", "in1"],
    &["select", "1"],
    &["get", "in1"],
    &["select", "0"],
    &["eval", "return redis.call('select', 99)", "0"],
    &["eval", "return redis.call('publish', 'nobody', 'm')", "0"],
    // Scripts queued in MULTI run in EXEC's transaction, in the database selected before.
    &["multi"],
    &["set", "m", "1"],
    &["eval", "return redis.call('incr', 'm')", "0"],
    &["select", "1"],
    &["eval", "return redis.call('set', 'm1', 'x')", "0"],
    &["select", "0"],
    &["evalsha", "0000000000000000000000000000000000000000", "0"],
    &["eval", "x", "0"],
    &["eval", "return redis.call('get', 'm')", "0"],
    &["exec"],
    &["exists", "m1"],
    // EVALSHA and SCRIPT.
    &["evalsha", "0000000000000000000000000000000000000000", "0"],
    &["evalsha", "abc", "0"],
    &["script", "load", "return 1"],
    &["script", "load", "x"],
    &["evalsha", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0"],
    &["evalsha", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"],
    &[
        "evalsha_ro",
        "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
        "0",
    ],
    &[
        "script",
        "exists",
        "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
        "ffff",
    ],
    // EVAL loads its script too.
    &[
        "script",
        "exists",
        "b36f6a251a4827a53c13e202f3feb7d9f4350dee",
    ],
    &["script", "kill"],
    &["script", "flush", "x"],
    &["script", "flush"],
    &[
        "script",
        "exists",
        "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
    ],
    &["script", "exists"],
    &["script", "foo"],
    &["script", "debug", "no"],
    &["script", "debug", "maybe"],
    &["script", "debug"],
    // RESP3 clients: booleans, nulls, doubles, maps and sets.
    &["hello", "3"],
    &["eval", "return true", "0"],
    &["eval", "return false", "0"],
    &["eval", "return {double=3.5}", "0"],
    &["eval", "return {map={a=1}}", "0"],
    &["eval", "return {set={a=true}}", "0"],
    &["eval", "return redis.call('get', 'nokey')", "0"],
    &["xread", "streams", "stream", "0"],
    &["eval", "redis.setresp(3) return true", "0"],
    &["eval", "redis.setresp(3) return false", "0"],
    &[
        "eval",
        "redis.setresp(3) return redis.call('hgetall', 'h')",
        "0",
    ],
    &[
        "eval",
        "redis.setresp(3) return redis.call('hgetall', 'h').map.f",
        "0",
    ],
    &["eval", "return redis.call('hgetall', 'h')", "0"],
];

#[test]
fn scripts_get_the_replies_redis_sends() {
    same_replies("scripts_get_the_replies_redis_sends", CASES);
}

#[test]
fn a_client_library_runs_scripts_by_their_sha() {
    let server = TestServer::start();
    let mut con = server.client();
    // redis::Script sends EVALSHA, and on NOSCRIPT loads the script and sends it again.
    let script = redis::Script::new("return redis.call('incrby', KEYS[1], ARGV[1])");
    let first: i64 = script.key("counter").arg(5).invoke(&mut con).expect("run");
    let second: i64 = script.key("counter").arg(2).invoke(&mut con).expect("run");
    assert_eq!((first, second), (5, 7));
    // Every connection, whichever event loop serves it, finds the script.
    for _ in 0..4 {
        let mut other = server.client();
        let exists: Vec<i64> = q(&mut other, &["script", "exists", script.get_hash()]);
        assert_eq!(exists, vec![1]);
    }
    let info: String = q(&mut con, &["info", "memory"]);
    assert!(info.contains("number_of_cached_scripts:1\r\n"), "{info}");
    q::<()>(&mut con, &["script", "flush"]);
    let info: String = q(&mut con, &["info", "memory"]);
    assert!(info.contains("number_of_cached_scripts:0\r\n"), "{info}");
    let third: i64 = script
        .key("counter")
        .arg(1)
        .invoke(&mut con)
        .expect("reload");
    assert_eq!(third, 8);
}

/// A read-modify-write in Lua, which only a transaction keeps from losing updates.
const INCREMENT: &str =
    "local v = tonumber(redis.call('get', KEYS[1]) or '0') redis.call('set', KEYS[1], v + 1) return v + 1";

#[test]
fn concurrent_scripts_lose_no_update() {
    let server = TestServer::start();
    let clients = 4;
    let each = 300;
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let mut con = server.client();
            thread::spawn(move || {
                for _ in 0..each {
                    let _: i64 = q(&mut con, &["eval", INCREMENT, "1", "hot"]);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("client");
    }
    let mut con = server.client();
    let total: i64 = q(&mut con, &["get", "hot"]);
    assert_eq!(total, clients * each);
}

/// SCRIPT KILL stops a script, also one that catches every error with `pcall` (whose
/// `pcall` swallowed the stop before, so that nothing could stop it).
#[test]
fn a_script_killed_leaves_nothing_behind() {
    // A minute: the script must still run when SCRIPT KILL comes, however slow the machine.
    let server = TestServer::with(Options {
        script_time_limit: Duration::from_secs(60),
        ..Options::default()
    });
    for script in [
        "redis.call('set', 'half', '1') while true do end",
        "redis.call('set', 'half', '1') while true do pcall(function() while true do end end) end",
        "redis.call('set', 'half', '1') \
         while true do xpcall(function() while true do end end, function() return 1 end) end",
    ] {
        let mut runner = server.client();
        let mut other = server.client();
        let (done, answer) = std::sync::mpsc::channel();
        thread::spawn(move || done.send(err(&mut runner, &["eval", script, "0"])));
        assert!(
            eventually(Duration::from_secs(30), || {
                command(&["script", "kill"]).query::<()>(&mut other).is_ok()
            }),
            "SCRIPT KILL never found the script running"
        );
        let Ok(text) = answer.recv_timeout(Duration::from_secs(30)) else {
            // A panic would wait for the server to shut down, which waits for the script.
            use std::io::Write;
            let message = format!("{script}: still running 30 s after SCRIPT KILL\n");
            let _ = std::io::stderr().write_all(message.as_bytes());
            std::process::exit(101);
        };
        assert!(text.contains("SCRIPT KILL"), "{script}: {text}");
        assert!(text.contains("undone"), "{script}: {text}");
        let half: Option<String> = q(&mut other, &["get", "half"]);
        assert_eq!(half, None, "a killed script's write was kept");
    }
}

/// Lua's bytecode is never loaded: Lua 5.1 trusts it, and crafted bytecode reads and
/// writes memory outside the sandbox.
#[test]
fn a_script_cannot_load_bytecode() {
    let server = TestServer::start();
    let mut c = server.client();
    let dumped: Option<String> = q(
        &mut c,
        &[
            "eval",
            "return loadstring(string.dump(function() return 7 end))",
            "0",
        ],
    );
    assert_eq!(dumped, None, "loadstring compiled bytecode");
    let bytecode: Vec<u8> = q(
        &mut c,
        &["eval", "return string.dump(function() return 42 end)", "0"],
    );
    assert_eq!(bytecode[0], 27);
    let refused = redis::cmd("EVAL")
        .arg(&bytecode)
        .arg(0)
        .query::<i64>(&mut c)
        .expect_err("a script of bytecode ran");
    assert!(
        refused.to_string().contains("Error compiling script"),
        "{refused}"
    );
}

#[test]
fn a_script_out_of_its_time_leaves_nothing_behind() {
    let limit = Duration::from_millis(1500);
    let server = TestServer::with(Options {
        script_time_limit: limit,
        ..Options::default()
    });
    let mut other = server.client();
    // Nobody kills this one: the time limit stops it.
    let started = Instant::now();
    let text = err(
        &mut other,
        &[
            "eval",
            "redis.call('set', 'half', '2') while true do pcall(function() end) end",
            "0",
        ],
    );
    assert!(started.elapsed() >= limit, "{text}");
    assert!(text.contains("longer than 1500 ms"), "{text}");
    let half: Option<String> = q(&mut other, &["get", "half"]);
    assert_eq!(half, None, "a script stopped for its time kept its write");
    assert_eq!(
        err(&mut other, &["script", "kill"]),
        "NOTBUSY No scripts in execution right now."
    );
}

#[test]
fn a_script_s_push_wakes_a_blocked_client_and_its_publish_reaches_subscribers() {
    let server = TestServer::start();
    let mut waiter = server.client();
    let popped = thread::spawn(move || -> Vec<String> { q(&mut waiter, &["blpop", "jobs", "10"]) });
    let mut subscriber = server.client();
    let mut pubsub = subscriber.as_pubsub();
    pubsub.subscribe("done").expect("subscribe");
    pubsub
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut con = server.client();
    assert!(eventually(Duration::from_secs(10), || {
        let info: String = q(&mut con, &["info", "clients"]);
        info.contains("blocked_clients:1\r\n")
    }));
    let delivered: i64 = q(
        &mut con,
        &[
            "eval",
            "redis.call('rpush', KEYS[1], ARGV[1]) return redis.call('publish', 'done', ARGV[1])",
            "1",
            "jobs",
            "job-1",
        ],
    );
    assert_eq!(delivered, 1);
    assert_eq!(popped.join().expect("waiter"), vec!["jobs", "job-1"]);
    let message = pubsub.get_message().expect("a message");
    assert_eq!(message.get_payload::<String>().expect("text"), "job-1");
}

#[test]
fn one_client_s_script_cannot_change_another_s_globals() {
    let server = TestServer::start();
    let mut con = server.client();
    for attack in [
        "redis.call = function() return 'hijacked' end",
        "redis = {}",
        "rawset(_G, 'x', 1)",
        "setmetatable(_G, nil)",
        "getfenv(0).redis = nil",
        "string.len = function() return 0 end",
        "getmetatable('').__index.len = function() return 0 end",
        "loadstring('redis = nil')()",
    ] {
        let _ = command(&["eval", attack, "0"]).query::<redis::Value>(&mut con);
    }
    let answer: Vec<String> = q(
        &mut con,
        &[
            "eval",
            "redis.call('set', 'k', 'v') return {redis.call('get', 'k'), tostring(string.len('abc'))}",
            "0",
        ],
    );
    assert_eq!(answer, vec!["v", "3"]);
    let text = err(&mut con, &["eval", "return x", "0"]);
    assert!(text.contains("nonexistent global variable 'x'"), "{text}");
}

#[test]
fn a_script_out_of_memory_gets_an_error_and_the_server_goes_on() {
    let server = small_lua_server();
    let mut con = server.client();
    q::<()>(&mut con, &["set", "k", "before"]);
    let text = err(
        &mut con,
        &[
            "eval",
            "redis.call('set', 'k', 'after') local kb = string.rep('y', 1024) local t = {} \
             for i = 1, 2000 do t[i] = string.rep(kb, 1024) .. i end return #t",
            "0",
        ],
    );
    assert!(text.contains("more than 32 MiB"), "{text}");
    assert!(text.contains("undone"), "{text}");
    let value: String = q(&mut con, &["get", "k"]);
    assert_eq!(value, "before", "the stopped script's write was undone");
    let answer: i64 = q(&mut con, &["eval", "return #string.rep('x', 1e6)", "0"]);
    assert_eq!(answer, 1_000_000);
}

/// A server whose event loops' Lua states may hold 32 MiB each (fresh memory is slow to
/// come by on some machines: 512 MiB of it can take longer than a script's 5 s).
fn small_lua_server() -> TestServer {
    TestServer::with(support::Options {
        script_memory: 32 << 20,
        ..Default::default()
    })
}

/// One library call may not allocate past the limit between two of the hook's checks:
/// the allocator refuses it, caught by `pcall` or not.
#[test]
fn one_call_cannot_take_the_lua_state_past_its_memory_limit() {
    let server = small_lua_server();
    let mut con = server.client();
    let text = err(
        &mut con,
        &["eval", "return #string.rep('x', 64 * 2^20)", "0"],
    );
    assert!(text.contains("more than 32 MiB"), "{text}");
    // Doubling a string: 27 rounds reach 128 MiB in about a hundred instructions.
    let text = err(
        &mut con,
        &[
            "eval",
            "local s = 'x' for i = 1, 27 do s = s .. s end return #s",
            "0",
        ],
    );
    assert!(text.contains("more than 32 MiB"), "{text}");
    // Caught, the refusal leaves the script running within the limit.
    let reply: Vec<String> = q(
        &mut con,
        &[
            "eval",
            "local ok, e = pcall(string.rep, 'x', 64 * 2^20) return {tostring(ok), e}",
            "0",
        ],
    );
    assert_eq!(reply, ["false", "not enough memory"]);
    // A reply too large for the state, refused while `redis.call` builds it.
    for i in 0..40 {
        let value = format!("{i:02}").repeat(1 << 19); // 1 MiB each, all different
        q::<i64>(&mut con, &["rpush", "list", &value]);
    }
    let text = err(
        &mut con,
        &[
            "eval",
            "redis.call('set', 'mark', 1) return #redis.call('lrange', KEYS[1], 0, -1)",
            "1",
            "list",
        ],
    );
    assert!(text.contains("more than 32 MiB"), "{text}");
    let mark: Option<i64> = q(&mut con, &["get", "mark"]);
    assert_eq!(mark, None, "the stopped script's SET was undone");
}

/// A transaction that keeps conflicting runs alone after a few conflicts, after one when
/// it ran long: here a script that reads a key and then loops for 20 ms while another
/// client writes that key every millisecond, so that every attempt beside the writer
/// conflicts. Before, it ran out of its 1,000 attempts (about 20 s) and answered that it
/// kept conflicting.
#[test]
fn a_long_script_that_keeps_conflicting_runs_alone() {
    let server = TestServer::start();
    let mut c = server.client();
    let _: () = command(&["SET", "k", "0"]).query(&mut c).expect("SET");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (mut w, stop) = (server.client(), stop.clone());
        thread::spawn(move || {
            let mut writes = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: () = command(&["SET", "k", &writes.to_string()])
                    .query(&mut w)
                    .expect("SET");
                writes += 1;
                thread::sleep(Duration::from_millis(1));
            }
            writes
        })
    };
    let script = "local v = redis.call('GET', KEYS[1]) \
        local t0 = redis.call('TIME') \
        repeat local t = redis.call('TIME') \
        until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) >= 20000 \
        return v";
    thread::sleep(Duration::from_millis(20));
    let began = Instant::now();
    let read: redis::RedisResult<String> = command(&["EVAL", script, "1", "k"]).query(&mut c);
    let took = began.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = writer.join().expect("the writer");
    assert!(read.is_ok(), "{read:?}");
    assert!(writes > 10, "the writer wrote {writes} times");
    assert!(took < Duration::from_secs(2), "the script took {took:?}");
}
