//! COMMAND DOCS (decision 168) compared with a `redis-server` when one is installed: every
//! command's and subcommand's version, group and argument tree (a subcommand's both among
//! its container's and asked for by its full name), and the syntax line redis-cli's HELP
//! builds from them.

mod support;

use std::net::SocketAddr;
use std::process::Command;

use redis::Value;
use support::raw_value;
use support::real_redis::Compared;

/// Text from a bulk or simple string.
fn text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

/// A map's fields (RESP2 sends a map as a flat array).
fn fields(value: &Value) -> Vec<(String, Value)> {
    let Value::Array(flat) = value else {
        panic!("not a map: {value:?}")
    };
    flat.chunks(2)
        .map(|pair| (text(&pair[0]), pair[1].clone()))
        .collect()
}

fn field<'a>(entry: &'a [(String, Value)], name: &str) -> Option<&'a Value> {
    entry
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value)
}

/// The COMMAND DOCS entry of `name`; a subcommand's (`client|kill`) asked for by name when
/// `directly`, else found among its container's.
fn entry(con: &mut redis::Connection, name: &str, directly: bool) -> Vec<(String, Value)> {
    let container = name.split('|').next().unwrap_or(name);
    let asked = if directly { name } else { container };
    // An unknown name among the ones asked for is left out of the answer.
    let reply = raw_value(con, &["COMMAND", "DOCS", "no-such-command", asked]);
    let Value::Array(pair) = &reply else {
        panic!("COMMAND DOCS {asked}: {reply:?}")
    };
    assert_eq!(pair.len(), 2, "COMMAND DOCS {asked}: {reply:?}");
    assert_eq!(text(&pair[0]), asked);
    let entry = fields(&pair[1]);
    if asked == name {
        return entry;
    }
    let subcommands = fields(field(&entry, "subcommands").expect("subcommands"));
    fields(field(&subcommands, name).unwrap_or_else(|| panic!("no entry for {name}")))
}

/// An argument tree as lines, one per argument, indented by depth, with the fields both
/// servers give: name, type, key specification, token and flags (not Redis's `since` of
/// an argument, nor its free-text fields).
fn tree(arguments: Option<&Value>, depth: usize, lines: &mut Vec<String>) {
    let Some(Value::Array(arguments)) = arguments else {
        return;
    };
    for argument in arguments {
        let argument = fields(argument);
        let mut line = " ".repeat(depth * 2);
        for name in ["name", "type", "key_spec_index", "token"] {
            if let Some(value) = field(&argument, name) {
                line += &format!("{name}={value:?} ");
            }
        }
        if let Some(Value::Array(flags)) = field(&argument, "flags") {
            let mut flags: Vec<String> = flags.iter().map(|flag| format!("{flag:?}")).collect();
            flags.sort();
            line += &format!("flags={flags:?}");
        }
        lines.push(line);
        tree(field(&argument, "arguments"), depth + 1, lines);
    }
}

/// The version, group and argument tree of `name`'s entry, as text to compare.
fn described(con: &mut redis::Connection, name: &str, directly: bool) -> Vec<String> {
    let entry = entry(con, name, directly);
    let summary = field(&entry, "summary").map(text).unwrap_or_default();
    assert!(!summary.is_empty(), "{name} has no summary");
    let mut lines = vec![
        format!("since {:?}", field(&entry, "since")),
        format!("group {:?}", field(&entry, "group")),
    ];
    tree(field(&entry, "arguments"), 0, &mut lines);
    lines
}

#[test]
fn every_command_is_documented_as_redis_documents_it() {
    let Some(Compared {
        mut redis,
        mut tailstore,
        commands: both,
        servers: _servers,
    }) = Compared::start("COMMAND DOCS against Redis")
    else {
        return;
    };
    for name in &both {
        for directly in [false, true] {
            assert_eq!(
                described(&mut tailstore, name, directly).join("\n"),
                described(&mut redis, name, directly).join("\n"),
                "COMMAND DOCS {name} (asked for by name: {directly})"
            );
        }
    }
    assert!(both.len() > 330, "only {} commands compared", both.len());
}

/// The syntax line `redis-cli -p PORT HELP words…` prints (its second line), if
/// `redis-cli` runs here.
fn help_line(address: SocketAddr, words: &[&str]) -> Option<String> {
    let output = Command::new("redis-cli")
        .args([
            "-h",
            &address.ip().to_string(),
            "-p",
            &address.port().to_string(),
        ])
        .arg("help")
        .args(words)
        .output()
        .ok()?;
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    Some(printed.lines().nth(1).unwrap_or_default().to_string())
}

/// What a user of redis-cli sees: HELP's syntax line for every command and subcommand is
/// the one it shows against Redis.
#[test]
fn redis_cli_help_shows_the_syntax_redis_shows() {
    let Some(Compared {
        servers,
        commands: both,
        ..
    }) = Compared::start("redis-cli HELP against Redis")
    else {
        return;
    };
    if help_line(servers.redis.address(), &["get"]).is_none() {
        println!("redis-cli not found: skipping redis_cli_help_shows_the_syntax_redis_shows");
        return;
    }
    // Two redis-cli runs per name, ~500 in all: four at a time (10.5 s one at a time here).
    const RUNNERS: usize = 4;
    let (redis, tailstore) = (servers.redis.address(), servers.tailstore.address());
    let names: Vec<_> = both.iter().collect();
    std::thread::scope(|scope| {
        for first in 0..RUNNERS {
            let names = &names;
            scope.spawn(move || {
                for name in names.iter().skip(first).step_by(RUNNERS) {
                    let words: Vec<&str> = name.split('|').collect();
                    let theirs = help_line(redis, &words);
                    let ours = help_line(tailstore, &words);
                    assert!(
                        theirs.as_ref().is_some_and(|line| !line.trim().is_empty()),
                        "{name}: {theirs:?}"
                    );
                    assert_eq!(ours, theirs, "redis-cli HELP {}", words.join(" "));
                }
            });
        }
    });
}
