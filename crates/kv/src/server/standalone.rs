//! What a standalone server answers about features it does not have: clusters, modules,
//! replicas and the latency monitor. Client libraries and
//! tools probe for them (a cluster-aware client sends CLUSTER SLOTS, an object mapper sends
//! MODULE LIST to look for a search module, a dashboard sends LATENCY LATEST), and read
//! Redis's own answers: a Redis without cluster support, without modules, with no replicas
//! and with latency monitoring off. tailstore answers the same, which is true of it; what
//! would change such a feature is refused with an error that says tailstore lacks it.

use tailstore_resp::Reply;

use crate::command::{help, is, lookup, Command};

/// Redis's answer to the cluster commands of a server without cluster support.
const NO_CLUSTER: &str = "ERR This instance has cluster support disabled";

/// The answer to `command` (`args`) if it is one of this module's; `None` otherwise.
pub fn answer(command: &str, args: &[Vec<u8>]) -> Option<Reply> {
    Some(match command {
        "readonly" | "readwrite" | "asking" => Reply::error(NO_CLUSTER),
        // Every subcommand of CLUSTER's (`command::subcommands`) gets Redis's answer.
        "cluster" => Reply::error(NO_CLUSTER),
        "module" => module(args),
        "latency" => latency(args),
        "replicaof" | "slaveof" => replicaof(args),
        "failover" => failover(args),
        _ => return None,
    })
}

/// The refusal of a command Redis refuses before it checks the client's login and ACL
/// user, and while queuing in MULTI (failing the EXEC): its `protected` commands, while
/// their settings keep them off. Of those, tailstore has DEBUG, which Redis 7 refuses
/// unless `enable-debug-command` allows it: tailstore implements none of it.
pub fn protected_refusal(args: &[Vec<u8>]) -> Option<(&'static Command, Reply)> {
    // Every command passes here: the name is compared before any lookup.
    if !is(&args[0], "debug") {
        return None;
    }
    let command = lookup(&args[0]).filter(|c| c.arity_ok(args.len()))?;
    let refusal = Reply::error(
        "ERR DEBUG command not allowed. tailstore does not implement DEBUG (its \
         subcommands inspect and change Redis's own memory).",
    );
    Some((command, refusal))
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
