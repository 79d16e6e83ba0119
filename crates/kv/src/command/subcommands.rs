//! The container commands (CLIENT, CONFIG, XGROUP…): the subcommands each answers, with
//! their arities, in one table. The table decides before a command runs or is queued
//! whether its subcommand is known and has the right number of arguments, with Redis 7's
//! two refusals (`unknown subcommand 'x'. Try CLIENT HELP.`, `wrong number of arguments for
//! 'client|kill' command`), and it is what COMMAND LIST names as `client|kill`. A
//! subcommand Redis has and tailstore does not answer (MEMORY STATS) is left out, so it
//! is refused as unknown rather than by a handler's fallback.

/// A subcommand's name and arity (the container and the subcommand counted; negative:
/// at least that many).
type Subcommand = (&'static str, i32);

const ACL: &[Subcommand] = &[
    ("cat", -2),
    ("deluser", -3),
    ("dryrun", -4),
    ("genpass", -2),
    ("getuser", 3),
    ("help", 2),
    ("list", 2),
    ("load", 2),
    ("log", -2),
    ("save", 2),
    ("setuser", -3),
    ("users", 2),
    ("whoami", 2),
];

const CLIENT: &[Subcommand] = &[
    ("caching", 3),
    ("getname", 2),
    ("getredir", 2),
    ("help", 2),
    ("id", 2),
    ("info", 2),
    ("kill", -3),
    ("list", -2),
    ("no-evict", 3),
    ("no-touch", 3),
    ("pause", -3),
    ("reply", 3),
    ("setinfo", 4),
    ("setname", 3),
    ("tracking", -3),
    ("trackinginfo", 2),
    ("unblock", -3),
    ("unpause", 2),
];

const CLUSTER: &[Subcommand] = &[
    ("addslots", -3),
    ("addslotsrange", -4),
    ("bumpepoch", 2),
    ("count-failure-reports", 3),
    ("countkeysinslot", 3),
    ("delslots", -3),
    ("delslotsrange", -4),
    ("failover", -2),
    ("flushslots", 2),
    ("forget", 3),
    ("getkeysinslot", 4),
    ("help", 2),
    ("info", 2),
    ("keyslot", 3),
    ("links", 2),
    ("meet", -4),
    ("myid", 2),
    ("nodes", 2),
    ("replicas", 3),
    ("replicate", 3),
    ("reset", -2),
    ("saveconfig", 2),
    ("set-config-epoch", 3),
    ("setslot", -4),
    ("shards", 2),
    ("slaves", 3),
    ("slots", 2),
];

/// COMMAND alone (all commands) is a container without a subcommand: its arity is -1.
const COMMAND: &[Subcommand] = &[
    ("count", 2),
    ("docs", -2),
    ("getkeys", -4),
    ("getkeysandflags", -4),
    ("help", 2),
    ("info", -2),
    ("list", -2),
];

const CONFIG: &[Subcommand] = &[
    ("get", -3),
    ("help", 2),
    ("resetstat", 2),
    ("rewrite", 2),
    ("set", -4),
];

const FUNCTION: &[Subcommand] = &[
    ("delete", 3),
    ("dump", 2),
    ("flush", -2),
    ("help", 2),
    ("kill", 2),
    ("list", -2),
    ("load", -3),
    ("restore", -3),
    ("stats", 2),
];

const LATENCY: &[Subcommand] = &[
    ("doctor", 2),
    ("graph", 3),
    ("help", 2),
    ("histogram", -2),
    ("history", 3),
    ("latest", 2),
    ("reset", -2),
];

const MEMORY: &[Subcommand] = &[
    ("doctor", 2),
    ("help", 2),
    ("malloc-stats", 2),
    ("purge", 2),
    ("stats", 2),
    ("usage", -3),
];

const MODULE: &[Subcommand] = &[
    ("help", 2),
    ("list", 2),
    ("load", -3),
    ("loadex", -3),
    ("unload", 3),
];

const OBJECT: &[Subcommand] = &[
    ("encoding", 3),
    ("freq", 3),
    ("help", 2),
    ("idletime", 3),
    ("refcount", 3),
];

const PUBSUB: &[Subcommand] = &[
    ("channels", -2),
    ("help", 2),
    ("numpat", 2),
    ("numsub", -2),
    ("shardchannels", -2),
    ("shardnumsub", -2),
];

const SCRIPT: &[Subcommand] = &[
    ("debug", 3),
    ("exists", -3),
    ("flush", -2),
    ("help", 2),
    ("kill", 2),
    ("load", 3),
];

const SLOWLOG: &[Subcommand] = &[("get", -2), ("help", 2), ("len", 2), ("reset", 2)];

const XGROUP: &[Subcommand] = &[
    ("create", -5),
    ("createconsumer", 5),
    ("delconsumer", 5),
    ("destroy", 4),
    ("help", 2),
    ("setid", -5),
];

const XINFO: &[Subcommand] = &[("consumers", 4), ("groups", 3), ("help", 2), ("stream", -3)];

/// The subcommands of `command` (a command's lowercase name), `None` if it is not a
/// container.
pub fn of(command: &str) -> Option<&'static [Subcommand]> {
    Some(match command {
        "acl" => ACL,
        "client" => CLIENT,
        "cluster" => CLUSTER,
        "command" => COMMAND,
        "config" => CONFIG,
        "function" => FUNCTION,
        "latency" => LATENCY,
        "memory" => MEMORY,
        "module" => MODULE,
        "object" => OBJECT,
        "pubsub" => PUBSUB,
        "script" => SCRIPT,
        "slowlog" => SLOWLOG,
        "xgroup" => XGROUP,
        "xinfo" => XINFO,
        _ => return None,
    })
}

/// The subcommand `args` (the container first) name, lowercase as the table has it; `None`
/// for a command that is not a container or a subcommand it does not have.
pub fn named(container: &str, args: &[Vec<u8>]) -> Option<&'static str> {
    let typed = args.get(1)?;
    of(container)?
        .iter()
        .find(|(name, _)| typed.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(name, _)| *name)
}

/// Redis's refusal of `args` (container first) if its subcommand is unknown or has the
/// wrong number of arguments; COMMAND alone passes.
pub fn check(container: &str, args: &[Vec<u8>]) -> Result<(), String> {
    let Some(subcommands) = of(container) else {
        return Ok(());
    };
    let Some(typed) = args.get(1) else {
        return Ok(()); // only COMMAND's arity lets it through alone
    };
    let typed = String::from_utf8_lossy(typed);
    let sub = typed.to_ascii_lowercase();
    let Some(&(_, arity)) = subcommands.iter().find(|(name, _)| *name == sub) else {
        return Err(format!(
            "ERR unknown subcommand '{typed}'. Try {} HELP.",
            container.to_ascii_uppercase()
        ));
    };
    let argc = i32::try_from(args.len()).unwrap_or(i32::MAX);
    if (arity >= 0 && argc != arity) || (arity < 0 && argc < -arity) {
        return Err(format!(
            "ERR wrong number of arguments for '{container}|{sub}' command"
        ));
    }
    Ok(())
}

/// The full names of `command`'s subcommands (`client|kill`), none if it is not a
/// container.
pub fn full_names(command: &str) -> impl Iterator<Item = String> + '_ {
    of(command)
        .unwrap_or_default()
        .iter()
        .map(move |(sub, _)| format!("{command}|{sub}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Vec<u8>> {
        line.split(' ').map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn unknown_subcommands_and_wrong_arities_get_redis_texts() {
        assert_eq!(
            check("client", &args("CLIENT nosuch")),
            Err("ERR unknown subcommand 'nosuch'. Try CLIENT HELP.".into())
        );
        assert_eq!(
            check("client", &args("CLIENT SETNAME a b")),
            Err("ERR wrong number of arguments for 'client|setname' command".into())
        );
        assert_eq!(
            check("config", &args("CONFIG GET")),
            Err("ERR wrong number of arguments for 'config|get' command".into())
        );
        assert_eq!(check("config", &args("config get a b c")), Ok(()));
        assert_eq!(check("command", &args("COMMAND")), Ok(()));
        assert_eq!(check("get", &args("GET nosuch")), Ok(()));
    }

    #[test]
    fn tables_are_sorted_lowercase_and_their_arities_count_the_subcommand() {
        for container in ["acl", "client", "cluster", "command", "config", "function"]
            .into_iter()
            .chain(["latency", "memory", "module", "object", "pubsub", "script"])
            .chain(["slowlog", "xgroup", "xinfo"])
        {
            let subs = of(container).expect("a container");
            assert!(subs.windows(2).all(|w| w[0].0 < w[1].0), "{container}");
            for (name, arity) in subs {
                assert_eq!(name.to_ascii_lowercase(), *name);
                assert!(arity.abs() >= 2, "{container}|{name}");
            }
            assert!(subs.iter().any(|(name, _)| *name == "help"), "{container}");
        }
    }
}
