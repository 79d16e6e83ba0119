//! The container commands (CLIENT, CONFIG, XGROUP…): the subcommands each answers, with
//! their arities and flags, in one table. The table decides before a command runs or is queued
//! whether its subcommand is known and has the right number of arguments, with Redis 7's
//! two refusals (`unknown subcommand 'x'. Try CLIENT HELP.`, `wrong number of arguments for
//! 'client|kill' command`), and it is what COMMAND LIST names as `client|kill`. A
//! subcommand Redis has and tailstore does not answer (MEMORY STATS) is left out, so it
//! is refused as unknown rather than by a handler's fallback.

/// A subcommand: its name, arity (the container and the subcommand counted; negative: at
/// least that many) and Redis's flags for it (COMMAND INFO lists them; a container's own
/// entry has none).
#[derive(Clone, Copy, Debug)]
pub struct Subcommand {
    pub name: &'static str,
    pub arity: i32,
    pub flags: &'static [&'static str],
}

const fn sub(name: &'static str, arity: i32, flags: &'static [&'static str]) -> Subcommand {
    Subcommand { name, arity, flags }
}

const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const ANYTIME: &[&str] = &["loading", "stale"];
const ADMIN_SETTING: &[&str] = &["admin", "stale", "no_async_loading"];
const CONNECTION: &[&str] = &["noscript", "loading", "stale"];
const STALE: &[&str] = &["stale"];
const READ: &[&str] = &["readonly"];
const SUBSCRIPTIONS: &[&str] = &["pubsub", "loading", "stale"];
const NOSCRIPT: &[&str] = &["noscript"];
const NONE: &[&str] = &[];
const BUSY: &[&str] = &["noscript", "allow_busy"];
const WRITE: &[&str] = &["write"];
const ADMIN_STALE: &[&str] = &["admin", "stale"];
const ADMIN_ANYTIME: &[&str] = &["admin", "loading", "stale"];
const ADMIN_SCRIPTLESS: &[&str] = &["admin", "noscript", "no_async_loading"];
const WRITE_SCRIPTLESS: &[&str] = &["write", "noscript"];
const GROW_SCRIPTLESS: &[&str] = &["write", "denyoom", "noscript"];
const GROW: &[&str] = &["write", "denyoom"];
const SCRIPTLESS_STALE: &[&str] = &["noscript", "stale"];
const ADMIN_SCRIPTLESS_STALE: &[&str] = &["admin", "noscript", "stale"];
const ADMIN_NOSCRIPT: &[&str] = &["admin", "noscript"];

const ACL: &[Subcommand] = &[
    sub("cat", -2, CONNECTION),
    sub("deluser", -3, ADMIN),
    sub("dryrun", -4, ADMIN),
    sub("genpass", -2, CONNECTION),
    sub("getuser", 3, ADMIN),
    sub("help", 2, ANYTIME),
    sub("list", 2, ADMIN),
    sub("load", 2, ADMIN),
    sub("log", -2, ADMIN),
    sub("save", 2, ADMIN),
    sub("setuser", -3, ADMIN),
    sub("users", 2, ADMIN),
    sub("whoami", 2, CONNECTION),
];

const CLIENT: &[Subcommand] = &[
    sub("caching", 3, CONNECTION),
    sub("getname", 2, CONNECTION),
    sub("getredir", 2, CONNECTION),
    sub("help", 2, ANYTIME),
    sub("id", 2, CONNECTION),
    sub("info", 2, CONNECTION),
    sub("kill", -3, ADMIN),
    sub("list", -2, ADMIN),
    sub("no-evict", 3, ADMIN),
    sub("no-touch", 3, CONNECTION),
    sub("pause", -3, ADMIN),
    sub("reply", 3, CONNECTION),
    sub("setinfo", 4, CONNECTION),
    sub("setname", 3, CONNECTION),
    sub("tracking", -3, CONNECTION),
    sub("trackinginfo", 2, CONNECTION),
    sub("unblock", -3, ADMIN),
    sub("unpause", 2, ADMIN),
];

const CLUSTER: &[Subcommand] = &[
    sub("addslots", -3, ADMIN_SETTING),
    sub("addslotsrange", -4, ADMIN_SETTING),
    sub("bumpepoch", 2, ADMIN_SETTING),
    sub("count-failure-reports", 3, ADMIN_STALE),
    sub("countkeysinslot", 3, STALE),
    sub("delslots", -3, ADMIN_SETTING),
    sub("delslotsrange", -4, ADMIN_SETTING),
    sub("failover", -2, ADMIN_SETTING),
    sub("flushslots", 2, ADMIN_SETTING),
    sub("forget", 3, ADMIN_SETTING),
    sub("getkeysinslot", 4, STALE),
    sub("help", 2, ANYTIME),
    sub("info", 2, STALE),
    sub("keyslot", 3, STALE),
    sub("links", 2, STALE),
    sub("meet", -4, ADMIN_SETTING),
    sub("myid", 2, STALE),
    sub("nodes", 2, STALE),
    sub("replicas", 3, ADMIN_STALE),
    sub("replicate", 3, ADMIN_SETTING),
    sub("reset", -2, ADMIN_SCRIPTLESS_STALE),
    sub("saveconfig", 2, ADMIN_SETTING),
    sub("set-config-epoch", 3, ADMIN_SETTING),
    sub("setslot", -4, ADMIN_SETTING),
    sub("shards", 2, STALE),
    sub("slaves", 3, ADMIN_STALE),
    sub("slots", 2, STALE),
];

/// COMMAND alone (all commands) is a container without a subcommand: its arity is -1.
const COMMAND: &[Subcommand] = &[
    sub("count", 2, ANYTIME),
    sub("docs", -2, ANYTIME),
    sub("getkeys", -4, ANYTIME),
    sub("getkeysandflags", -4, ANYTIME),
    sub("help", 2, ANYTIME),
    sub("info", -2, ANYTIME),
    sub("list", -2, ANYTIME),
];

const CONFIG: &[Subcommand] = &[
    sub("get", -3, ADMIN),
    sub("help", 2, ANYTIME),
    sub("resetstat", 2, ADMIN),
    sub("rewrite", 2, ADMIN),
    sub("set", -4, ADMIN),
];

const FUNCTION: &[Subcommand] = &[
    sub("delete", 3, WRITE_SCRIPTLESS),
    sub("dump", 2, NOSCRIPT),
    sub("flush", -2, WRITE_SCRIPTLESS),
    sub("help", 2, ANYTIME),
    sub("kill", 2, BUSY),
    sub("list", -2, NOSCRIPT),
    sub("load", -3, GROW_SCRIPTLESS),
    sub("restore", -3, GROW_SCRIPTLESS),
    sub("stats", 2, BUSY),
];

const LATENCY: &[Subcommand] = &[
    sub("doctor", 2, ADMIN),
    sub("graph", 3, ADMIN),
    sub("help", 2, ANYTIME),
    sub("histogram", -2, ADMIN),
    sub("history", 3, ADMIN),
    sub("latest", 2, ADMIN),
    sub("reset", -2, ADMIN),
];

const MEMORY: &[Subcommand] = &[
    sub("doctor", 2, NONE),
    sub("help", 2, ANYTIME),
    sub("malloc-stats", 2, NONE),
    sub("purge", 2, NONE),
    sub("stats", 2, NONE),
    sub("usage", -3, READ),
];

const MODULE: &[Subcommand] = &[
    sub("help", 2, ANYTIME),
    sub("list", 2, ADMIN_NOSCRIPT),
    sub("load", -3, ADMIN_SCRIPTLESS),
    sub("loadex", -3, ADMIN_SCRIPTLESS),
    sub("unload", 3, ADMIN_SCRIPTLESS),
];

const OBJECT: &[Subcommand] = &[
    sub("encoding", 3, READ),
    sub("freq", 3, READ),
    sub("help", 2, ANYTIME),
    sub("idletime", 3, READ),
    sub("refcount", 3, READ),
];

const PUBSUB: &[Subcommand] = &[
    sub("channels", -2, SUBSCRIPTIONS),
    sub("help", 2, ANYTIME),
    sub("numpat", 2, SUBSCRIPTIONS),
    sub("numsub", -2, SUBSCRIPTIONS),
    sub("shardchannels", -2, SUBSCRIPTIONS),
    sub("shardnumsub", -2, SUBSCRIPTIONS),
];

const SCRIPT: &[Subcommand] = &[
    sub("debug", 3, NOSCRIPT),
    sub("exists", -3, NOSCRIPT),
    sub("flush", -2, NOSCRIPT),
    sub("help", 2, ANYTIME),
    sub("kill", 2, BUSY),
    sub("load", 3, SCRIPTLESS_STALE),
];

const SLOWLOG: &[Subcommand] = &[
    sub("get", -2, ADMIN_ANYTIME),
    sub("help", 2, ANYTIME),
    sub("len", 2, ADMIN_ANYTIME),
    sub("reset", 2, ADMIN_ANYTIME),
];

const XGROUP: &[Subcommand] = &[
    sub("create", -5, GROW),
    sub("createconsumer", 5, GROW),
    sub("delconsumer", 5, WRITE),
    sub("destroy", 4, WRITE),
    sub("help", 2, ANYTIME),
    sub("setid", -5, WRITE),
];

const XINFO: &[Subcommand] = &[
    sub("consumers", 4, READ),
    sub("groups", 3, READ),
    sub("help", 2, ANYTIME),
    sub("stream", -3, READ),
];

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
    find(container, args.get(1)?).map(|sub| sub.name)
}

/// The subcommand `typed` (any case) of `container`, if it has one.
pub fn find(container: &str, typed: &[u8]) -> Option<&'static Subcommand> {
    let subcommands = of(container)?;
    place(subcommands, typed).map(|at| &subcommands[at])
}

/// Where the subcommand `typed` (any case) is in `subcommands`, if it is there.
fn place(subcommands: &[Subcommand], typed: &[u8]) -> Option<usize> {
    subcommands
        .iter()
        .position(|sub| typed.eq_ignore_ascii_case(sub.name.as_bytes()))
}

/// A container's own flags in COMMAND INFO: none but COMMAND's, which also runs alone
/// (the command table's flags for a container are its subcommands' joined, which the
/// server acts on: XGROUP writes, OBJECT reads).
pub fn own_flags(container: &str) -> &'static [&'static str] {
    match container {
        "command" => &["loading", "stale"],
        _ => &[],
    }
}

/// Redis's refusal of `args` (container first) if its subcommand is unknown or has the
/// wrong number of arguments; COMMAND alone passes. Otherwise the subcommand's place in
/// its container's table (`None`: not a container's, or COMMAND alone).
pub fn check(container: &str, args: &[Vec<u8>]) -> Result<Option<usize>, String> {
    let Some(subcommands) = of(container) else {
        return Ok(None);
    };
    let Some(typed) = args.get(1) else {
        return Ok(None); // only COMMAND's arity lets it through alone
    };
    let Some(at) = place(subcommands, typed) else {
        return Err(format!(
            "ERR unknown subcommand '{}'. Try {} HELP.",
            String::from_utf8_lossy(typed),
            container.to_ascii_uppercase()
        ));
    };
    let Subcommand {
        name: sub, arity, ..
    } = subcommands[at];
    let argc = i32::try_from(args.len()).unwrap_or(i32::MAX);
    if (arity >= 0 && argc != arity) || (arity < 0 && argc < -arity) {
        return Err(format!(
            "ERR wrong number of arguments for '{container}|{sub}' command"
        ));
    }
    Ok(Some(at))
}

/// The full names of `command`'s subcommands (`client|kill`), none if it is not a
/// container.
pub fn full_names(command: &str) -> impl Iterator<Item = String> + '_ {
    of(command)
        .unwrap_or_default()
        .iter()
        .map(move |sub| format!("{command}|{}", sub.name))
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
        let get = CONFIG.iter().position(|sub| sub.name == "get");
        assert!(get.is_some());
        assert_eq!(check("config", &args("config get a b c")), Ok(get));
        assert_eq!(check("command", &args("COMMAND")), Ok(None));
        assert_eq!(check("get", &args("GET nosuch")), Ok(None));
    }

    #[test]
    fn tables_are_sorted_lowercase_and_their_arities_count_the_subcommand() {
        for container in ["acl", "client", "cluster", "command", "config", "function"]
            .into_iter()
            .chain(["latency", "memory", "module", "object", "pubsub", "script"])
            .chain(["slowlog", "xgroup", "xinfo"])
        {
            let subs = of(container).expect("a container");
            assert!(
                subs.windows(2).all(|w| w[0].name < w[1].name),
                "{container}"
            );
            for sub in subs {
                assert_eq!(sub.name.to_ascii_lowercase(), sub.name);
                assert!(sub.arity.abs() >= 2, "{container}|{}", sub.name);
            }
            assert!(subs.iter().any(|sub| sub.name == "help"), "{container}");
        }
    }
}
