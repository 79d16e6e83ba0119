//! What a standalone server answers about features it does not have: clusters, modules,
//! ACL users other than `default`, replicas and the latency monitor. Client libraries and
//! tools probe for them (a cluster-aware client sends CLUSTER SLOTS, an object mapper sends
//! MODULE LIST to look for a search module, a dashboard sends LATENCY LATEST), and read
//! Redis's own answers: a Redis without cluster support, without modules, with only the
//! `default` user (no password: AUTH already answers as one, `admin.rs`), with no replicas
//! and with latency monitoring off. tailstore answers the same, which is true of it; what
//! would change such a feature is refused with an error that says tailstore lacks it.

use tailstore_resp::Reply;

use super::auth::Password;
use crate::command::{help, is, lookup, parse_int};

/// Redis's answer to the cluster commands of a server without cluster support.
const NO_CLUSTER: &str = "ERR This instance has cluster support disabled";

/// The answer to `command` (`args`) if it is one of this module's; `None` otherwise.
pub fn answer(command: &str, args: &[Vec<u8>], password: &Password) -> Option<Reply> {
    Some(match command {
        "readonly" | "readwrite" | "asking" => Reply::error(NO_CLUSTER),
        // Every subcommand of CLUSTER's (`command::subcommands`) gets Redis's answer.
        "cluster" => Reply::error(NO_CLUSTER),
        "module" => module(args),
        "latency" => latency(args),
        "acl" => acl(args, password),
        "replicaof" | "slaveof" => replicaof(args),
        "failover" => failover(args),
        // Redis 7 refuses DEBUG unless `enable-debug-command` allows it; tailstore has none.
        "debug" => Reply::error(
            "ERR DEBUG command not allowed. tailstore does not implement DEBUG (its \
             subcommands inspect and change Redis's own memory).",
        ),
        _ => return None,
    })
}

/// The subcommand `args[1]` in lowercase.
fn subcommand(args: &[Vec<u8>]) -> String {
    String::from_utf8_lossy(&args[1]).to_ascii_lowercase()
}

fn unknown_subcommand(command: &str, args: &[Vec<u8>]) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand '{}'. Try {command} HELP.",
        String::from_utf8_lossy(&args[1])
    ))
}

fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// MODULE LIST (none loaded), HELP; LOAD, LOADEX and UNLOAD refused.
fn module(args: &[Vec<u8>]) -> Reply {
    match (subcommand(args).as_str(), args.len()) {
        ("list", 2) => Reply::Array(Vec::new()),
        ("help", 2) => help(&[
            "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LIST",
            "    Return a list of loaded modules: none, tailstore loads no modules.",
            "HELP",
            "    Prints this help.",
        ]),
        ("load" | "loadex", 3..) | ("unload", 3) => {
            Reply::error("ERR tailstore does not load Redis modules")
        }
        _ => unknown_subcommand("MODULE", args),
    }
}

/// The latency monitor, off as in a Redis whose `latency-monitor-threshold` is 0: no
/// events, nothing to reset. (LATENCY HISTOGRAM, of the per-command latencies, is
/// answered by `server/latency.rs`.)
fn latency(args: &[Vec<u8>]) -> Reply {
    match (subcommand(args).as_str(), args.len()) {
        ("latest", 2) => Reply::Array(Vec::new()),
        ("history", 3) => Reply::Array(Vec::new()),
        ("reset", _) => Reply::Int(0),
        ("graph", 3) => Reply::error(format!(
            "ERR No samples available for event '{}'",
            String::from_utf8_lossy(&args[2])
        )),
        ("doctor", 2) => Reply::Verbatim {
            format: *b"txt",
            text: b"Latency monitoring is disabled in this tailstore instance: it records no latency events. The slow log (SLOWLOG GET) lists the commands that ran longer than slowlog-log-slower-than.\n".to_vec(),
        },
        ("help", 2) => help(&[
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
            "HELP",
            "    Prints this help.",
        ]),
        _ => unknown_subcommand("LATENCY", args),
    }
}

/// ACL as a Redis whose only user is `default`, with every permission and the password
/// `requirepass` gives it, if any (`server/auth.rs`).
fn acl(args: &[Vec<u8>], password: &Password) -> Reply {
    let bulk = |text: &str| Reply::Bulk(text.as_bytes().to_vec());
    match (subcommand(args).as_str(), args.len()) {
        ("whoami", 2) => bulk("default"),
        ("users", 2) => Reply::Array(vec![bulk("default")]),
        ("list", 2) => Reply::Array(vec![bulk(&format!(
            "user default on {} ~* &* +@all",
            password.acl_rule()
        ))]),
        ("log", 2) => password.refusals_reply(10),
        ("log", 3) if is(&args[2], "reset") => {
            password.forget_refusals();
            Reply::ok()
        }
        ("log", 3) => match parse_int(&args[2]) {
            Ok(count) => password.refusals_reply(usize::try_from(count).unwrap_or(0)),
            Err(_) => Reply::error("ERR value is not an integer or out of range"),
        },
        ("help", _) => help(ACL_HELP),
        ("getuser", _) if args[2] == b"default" => default_user(password),
        ("getuser", _) => Reply::Null, // no such user
        ("genpass", 2 | 3) => genpass(args.get(2)),
        ("dryrun", 4..) => dryrun(&args[2..]),
        ("deluser", 3..) if args[2..].iter().any(|user| user == b"default") => {
            Reply::error("ERR The 'default' user cannot be removed")
        }
        ("deluser", 3..) => Reply::Int(0),
        ("setuser" | "cat" | "load" | "save", _) => Reply::error(
            "ERR tailstore has no users but 'default' (every command, the password requirepass sets): ACL users are not implemented",
        ),
        _ => unknown_subcommand("ACL", args),
    }
}

/// ACL GETUSER default, as Redis describes its `default` user with every permission: on,
/// with the password's digest or `nopass`.
fn default_user(password: &Password) -> Reply {
    let text = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let rule = password.acl_rule();
    let (flags, passwords) = match rule.strip_prefix('#') {
        Some(digest) => (vec![text("on")], vec![text(digest)]),
        None => (vec![text("on"), text("nopass")], Vec::new()),
    };
    Reply::Map(vec![
        (text("flags"), Reply::Set(flags)),
        (text("passwords"), Reply::Array(passwords)),
        (text("commands"), text("+@all")),
        (text("keys"), text("~*")),
        (text("channels"), text("&*")),
        (text("selectors"), Reply::Array(Vec::new())),
    ])
}

/// ACL GENPASS [bits]: a random password of `bits` bits (256 by default), in hex digits
/// (as many as hold `bits`).
fn genpass(bits: Option<&Vec<u8>>) -> Reply {
    let bits = match bits.map(|b| parse_int(b)) {
        None => 256,
        Some(Err(_)) => return Reply::error("ERR value is not an integer or out of range"),
        Some(Ok(bits)) if !(1..=4096).contains(&bits) => {
            return Reply::error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
        }
        Some(Ok(bits)) => bits as usize,
    };
    // A password: from the kernel's random source, not a generator seeded by the clock.
    let mut random = vec![0u8; bits.div_ceil(8)];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut source| std::io::Read::read_exact(&mut source, &mut random));
    if let Err(err) = read {
        return Reply::error(format!("ERR tailstore: reading /dev/urandom failed: {err}"));
    }
    let hex: String = random
        .iter()
        .flat_map(|byte| [byte >> 4, byte & 15])
        .take(bits.div_ceil(4))
        .map(|digit| char::from(b"0123456789abcdef"[usize::from(digit)]))
        .collect();
    Reply::Bulk(hex.into_bytes())
}

/// ACL DRYRUN user command [arg …]: the default user may run every command.
fn dryrun(args: &[Vec<u8>]) -> Reply {
    if args[0] != b"default" {
        return Reply::error(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(&args[0])
        ));
    }
    match lookup(&args[1]) {
        None => Reply::error(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(&args[1])
        )),
        Some(command) if !command.arity_ok(args.len() - 1) => wrong_arity(command.name),
        Some(_) => Reply::ok(),
    }
}

/// REPLICAOF NO ONE: already a primary. Any other: refused, tailstore does not replicate.
fn replicaof(args: &[Vec<u8>]) -> Reply {
    if is(&args[1], "no") && is(&args[2], "one") {
        return Reply::ok();
    }
    Reply::error("ERR tailstore does not replicate: it cannot become a replica")
}

/// FAILOVER: a primary without replicas has none to fail over to.
fn failover(args: &[Vec<u8>]) -> Reply {
    if args.get(1).is_some_and(|arg| is(arg, "abort")) {
        return Reply::error("ERR No failover in progress.");
    }
    Reply::error("ERR FAILOVER requires connected replicas.")
}

const ACL_HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DELUSER <username> [<username> ...]",
    "    Deletes the users named: none exist but 'default', which cannot be deleted.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Whether the user may run the command: the only user, 'default', may run every one.",
    "GENPASS [<bits>]",
    "    A random password of <bits> bits (256 if not given), in hex digits.",
    "LIST",
    "    The users with their rules: 'default', with every permission and its password.",
    "LOG [<count> | RESET]",
    "    The newest <count> refused logins (10 if not given), or forgets them.",
    "USERS",
    "    The users' names.",
    "WHOAMI",
    "    The user this connection is logged in as.",
    "GETUSER <username>",
    "    The user's flags, password digests and permissions: 'default' is the only user.",
    "CAT, LOAD, SAVE, SETUSER",
    "    Refused: tailstore has no ACL users but 'default'.",
    "HELP",
    "    Prints this help.",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::auth::Secret;

    fn ask(line: &str) -> Reply {
        let args: Vec<Vec<u8>> = line.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        let name = line
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        answer(&name, &args, &Password::new(None)).expect("one of this module's commands")
    }

    #[test]
    fn acl_genpass_gives_the_bits_asked_for_in_hex() {
        for (line, len) in [
            ("ACL GENPASS", 64),
            ("ACL GENPASS 32", 8),
            ("ACL GENPASS 5", 2),
        ] {
            let Reply::Bulk(hex) = ask(line) else {
                panic!("{line}: not a bulk");
            };
            assert_eq!(hex.len(), len, "{line}");
            assert!(hex.iter().all(u8::is_ascii_hexdigit));
        }
        assert!(matches!(ask("ACL GENPASS 4097"), Reply::Error(_)));
    }

    #[test]
    fn dryrun_checks_the_command_and_its_arity() {
        assert_eq!(ask("ACL DRYRUN default GET x"), Reply::ok());
        assert!(matches!(ask("ACL DRYRUN default GET"), Reply::Error(e) if e.contains("'get'")));
        assert!(matches!(ask("ACL DRYRUN bob GET x"), Reply::Error(e) if e.contains("'bob'")));
    }

    #[test]
    fn getuser_shows_the_password_digest_once_one_is_set() {
        let args: Vec<Vec<u8>> = ["ACL", "GETUSER", "default"].map(|w| w.into()).to_vec();
        let secret = Secret(b"abc".to_vec());
        let Some(Reply::Map(fields)) = answer("acl", &args, &Password::new(Some(&secret))) else {
            panic!("not a map");
        };
        let sha256_of_abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
        assert_eq!(fields[0].1, Reply::Set(vec![bulk("on")]));
        assert_eq!(fields[1].1, Reply::Array(vec![bulk(sha256_of_abc)]));
    }
}
