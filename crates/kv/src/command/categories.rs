//! Redis's ACL categories (`@read`, `@dangerous`…) of every command and subcommand
//! tailstore answers, as Redis 7.0 assigns them: what `ACL SETUSER bob +@read -@dangerous`
//! allows, what ACL CAT lists and what COMMAND INFO reports. Kept as data, not derived
//! from [`super::Command`]'s flags: those follow Redis's only where the server acts on them
//! (decision 160), and a category is a permission. `kv/tests/differential.rs` compares the
//! table with a `redis-server`'s COMMAND when one is installed (CLIENT SETINFO and
//! NO-TOUCH, which Redis 7.0 lacks, have Redis 7.2's).

pub const KEYSPACE: u32 = 1 << 0;
pub const READ: u32 = 1 << 1;
pub const WRITE: u32 = 1 << 2;
pub const SET: u32 = 1 << 3;
pub const SORTEDSET: u32 = 1 << 4;
pub const LIST: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const STRING: u32 = 1 << 7;
pub const BITMAP: u32 = 1 << 8;
pub const HYPERLOGLOG: u32 = 1 << 9;
pub const GEO: u32 = 1 << 10;
pub const STREAM: u32 = 1 << 11;
pub const PUBSUB: u32 = 1 << 12;
pub const ADMIN: u32 = 1 << 13;
pub const FAST: u32 = 1 << 14;
pub const SLOW: u32 = 1 << 15;
pub const BLOCKING: u32 = 1 << 16;
pub const DANGEROUS: u32 = 1 << 17;
pub const CONNECTION: u32 = 1 << 18;
pub const TRANSACTION: u32 = 1 << 19;
pub const SCRIPTING: u32 = 1 << 20;

/// Every category's name, in the order of its bit (and of Redis's ACL CAT).
pub const NAMES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Each command (`get`) and container subcommand (`client|kill`) with its categories,
/// sorted by name.
const TABLE: &[(&str, u32)] = &[
    ("acl", SLOW),
    ("acl|cat", SLOW),
    ("acl|deluser", ADMIN | SLOW | DANGEROUS),
    ("acl|dryrun", ADMIN | SLOW | DANGEROUS),
    ("acl|genpass", SLOW),
    ("acl|getuser", ADMIN | SLOW | DANGEROUS),
    ("acl|help", SLOW),
    ("acl|list", ADMIN | SLOW | DANGEROUS),
    ("acl|load", ADMIN | SLOW | DANGEROUS),
    ("acl|log", ADMIN | SLOW | DANGEROUS),
    ("acl|save", ADMIN | SLOW | DANGEROUS),
    ("acl|setuser", ADMIN | SLOW | DANGEROUS),
    ("acl|users", ADMIN | SLOW | DANGEROUS),
    ("acl|whoami", SLOW),
    ("append", WRITE | STRING | FAST),
    ("asking", FAST | CONNECTION),
    ("auth", FAST | CONNECTION),
    ("bgrewriteaof", ADMIN | SLOW | DANGEROUS),
    ("bgsave", ADMIN | SLOW | DANGEROUS),
    ("bitcount", READ | BITMAP | SLOW),
    ("bitfield", WRITE | BITMAP | SLOW),
    ("bitfield_ro", READ | BITMAP | FAST),
    ("bitop", WRITE | BITMAP | SLOW),
    ("bitpos", READ | BITMAP | SLOW),
    ("blmove", WRITE | LIST | SLOW | BLOCKING),
    ("blmpop", WRITE | LIST | SLOW | BLOCKING),
    ("blpop", WRITE | LIST | SLOW | BLOCKING),
    ("brpop", WRITE | LIST | SLOW | BLOCKING),
    ("brpoplpush", WRITE | LIST | SLOW | BLOCKING),
    ("bzmpop", WRITE | SORTEDSET | SLOW | BLOCKING),
    ("bzpopmax", WRITE | SORTEDSET | FAST | BLOCKING),
    ("bzpopmin", WRITE | SORTEDSET | FAST | BLOCKING),
    ("client", SLOW),
    ("client|caching", SLOW | CONNECTION),
    ("client|getname", SLOW | CONNECTION),
    ("client|getredir", SLOW | CONNECTION),
    ("client|help", SLOW | CONNECTION),
    ("client|id", SLOW | CONNECTION),
    ("client|info", SLOW | CONNECTION),
    ("client|kill", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("client|list", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("client|no-evict", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("client|no-touch", SLOW | CONNECTION),
    ("client|pause", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("client|reply", SLOW | CONNECTION),
    ("client|setinfo", SLOW | CONNECTION),
    ("client|setname", SLOW | CONNECTION),
    ("client|tracking", SLOW | CONNECTION),
    ("client|trackinginfo", SLOW | CONNECTION),
    ("client|unblock", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("client|unpause", ADMIN | SLOW | DANGEROUS | CONNECTION),
    ("cluster", SLOW),
    ("cluster|addslots", ADMIN | SLOW | DANGEROUS),
    ("cluster|addslotsrange", ADMIN | SLOW | DANGEROUS),
    ("cluster|bumpepoch", ADMIN | SLOW | DANGEROUS),
    ("cluster|count-failure-reports", ADMIN | SLOW | DANGEROUS),
    ("cluster|countkeysinslot", SLOW),
    ("cluster|delslots", ADMIN | SLOW | DANGEROUS),
    ("cluster|delslotsrange", ADMIN | SLOW | DANGEROUS),
    ("cluster|failover", ADMIN | SLOW | DANGEROUS),
    ("cluster|flushslots", ADMIN | SLOW | DANGEROUS),
    ("cluster|forget", ADMIN | SLOW | DANGEROUS),
    ("cluster|getkeysinslot", SLOW),
    ("cluster|help", SLOW),
    ("cluster|info", SLOW),
    ("cluster|keyslot", SLOW),
    ("cluster|links", SLOW),
    ("cluster|meet", ADMIN | SLOW | DANGEROUS),
    ("cluster|myid", SLOW),
    ("cluster|nodes", SLOW),
    ("cluster|replicas", ADMIN | SLOW | DANGEROUS),
    ("cluster|replicate", ADMIN | SLOW | DANGEROUS),
    ("cluster|reset", ADMIN | SLOW | DANGEROUS),
    ("cluster|saveconfig", ADMIN | SLOW | DANGEROUS),
    ("cluster|set-config-epoch", ADMIN | SLOW | DANGEROUS),
    ("cluster|setslot", ADMIN | SLOW | DANGEROUS),
    ("cluster|shards", SLOW),
    ("cluster|slaves", ADMIN | SLOW | DANGEROUS),
    ("cluster|slots", SLOW),
    ("command", SLOW | CONNECTION),
    ("command|count", SLOW | CONNECTION),
    ("command|docs", SLOW | CONNECTION),
    ("command|getkeys", SLOW | CONNECTION),
    ("command|getkeysandflags", SLOW | CONNECTION),
    ("command|help", SLOW | CONNECTION),
    ("command|info", SLOW | CONNECTION),
    ("command|list", SLOW | CONNECTION),
    ("config", SLOW),
    ("config|get", ADMIN | SLOW | DANGEROUS),
    ("config|help", SLOW),
    ("config|resetstat", ADMIN | SLOW | DANGEROUS),
    ("config|rewrite", ADMIN | SLOW | DANGEROUS),
    ("config|set", ADMIN | SLOW | DANGEROUS),
    ("copy", KEYSPACE | WRITE | SLOW),
    ("dbsize", KEYSPACE | READ | FAST),
    ("debug", ADMIN | SLOW | DANGEROUS),
    ("decr", WRITE | STRING | FAST),
    ("decrby", WRITE | STRING | FAST),
    ("del", KEYSPACE | WRITE | SLOW),
    ("discard", FAST | TRANSACTION),
    ("dump", KEYSPACE | READ | SLOW),
    ("echo", FAST | CONNECTION),
    ("eval", SLOW | SCRIPTING),
    ("eval_ro", SLOW | SCRIPTING),
    ("evalsha", SLOW | SCRIPTING),
    ("evalsha_ro", SLOW | SCRIPTING),
    ("exec", SLOW | TRANSACTION),
    ("exists", KEYSPACE | READ | FAST),
    ("expire", KEYSPACE | WRITE | FAST),
    ("expireat", KEYSPACE | WRITE | FAST),
    ("expiretime", KEYSPACE | READ | FAST),
    ("failover", ADMIN | SLOW | DANGEROUS),
    ("fcall", SLOW | SCRIPTING),
    ("fcall_ro", SLOW | SCRIPTING),
    ("flushall", KEYSPACE | WRITE | SLOW | DANGEROUS),
    ("flushdb", KEYSPACE | WRITE | SLOW | DANGEROUS),
    ("function", SLOW),
    ("function|delete", WRITE | SLOW | SCRIPTING),
    ("function|dump", SLOW | SCRIPTING),
    ("function|flush", WRITE | SLOW | SCRIPTING),
    ("function|help", SLOW | SCRIPTING),
    ("function|kill", SLOW | SCRIPTING),
    ("function|list", SLOW | SCRIPTING),
    ("function|load", WRITE | SLOW | SCRIPTING),
    ("function|restore", WRITE | SLOW | SCRIPTING),
    ("function|stats", SLOW | SCRIPTING),
    ("geoadd", WRITE | GEO | SLOW),
    ("geodist", READ | GEO | SLOW),
    ("geohash", READ | GEO | SLOW),
    ("geopos", READ | GEO | SLOW),
    ("georadius", WRITE | GEO | SLOW),
    ("georadius_ro", READ | GEO | SLOW),
    ("georadiusbymember", WRITE | GEO | SLOW),
    ("georadiusbymember_ro", READ | GEO | SLOW),
    ("geosearch", READ | GEO | SLOW),
    ("geosearchstore", WRITE | GEO | SLOW),
    ("get", READ | STRING | FAST),
    ("getbit", READ | BITMAP | FAST),
    ("getdel", WRITE | STRING | FAST),
    ("getex", WRITE | STRING | FAST),
    ("getrange", READ | STRING | SLOW),
    ("getset", WRITE | STRING | FAST),
    ("hdel", WRITE | HASH | FAST),
    ("hello", FAST | CONNECTION),
    ("hexists", READ | HASH | FAST),
    ("hget", READ | HASH | FAST),
    ("hgetall", READ | HASH | SLOW),
    ("hincrby", WRITE | HASH | FAST),
    ("hincrbyfloat", WRITE | HASH | FAST),
    ("hkeys", READ | HASH | SLOW),
    ("hlen", READ | HASH | FAST),
    ("hmget", READ | HASH | FAST),
    ("hmset", WRITE | HASH | FAST),
    ("hrandfield", READ | HASH | SLOW),
    ("hscan", READ | HASH | SLOW),
    ("hset", WRITE | HASH | FAST),
    ("hsetnx", WRITE | HASH | FAST),
    ("hstrlen", READ | HASH | FAST),
    ("hvals", READ | HASH | SLOW),
    ("incr", WRITE | STRING | FAST),
    ("incrby", WRITE | STRING | FAST),
    ("incrbyfloat", WRITE | STRING | FAST),
    ("info", SLOW | DANGEROUS),
    ("keys", KEYSPACE | READ | SLOW | DANGEROUS),
    ("lastsave", ADMIN | FAST | DANGEROUS),
    ("latency", SLOW),
    ("latency|doctor", ADMIN | SLOW | DANGEROUS),
    ("latency|graph", ADMIN | SLOW | DANGEROUS),
    ("latency|help", SLOW),
    ("latency|histogram", ADMIN | SLOW | DANGEROUS),
    ("latency|history", ADMIN | SLOW | DANGEROUS),
    ("latency|latest", ADMIN | SLOW | DANGEROUS),
    ("latency|reset", ADMIN | SLOW | DANGEROUS),
    ("lcs", READ | STRING | SLOW),
    ("lindex", READ | LIST | SLOW),
    ("linsert", WRITE | LIST | SLOW),
    ("llen", READ | LIST | FAST),
    ("lmove", WRITE | LIST | SLOW),
    ("lmpop", WRITE | LIST | SLOW),
    ("lolwut", READ | FAST),
    ("lpop", WRITE | LIST | FAST),
    ("lpos", READ | LIST | SLOW),
    ("lpush", WRITE | LIST | FAST),
    ("lpushx", WRITE | LIST | FAST),
    ("lrange", READ | LIST | SLOW),
    ("lrem", WRITE | LIST | SLOW),
    ("lset", WRITE | LIST | SLOW),
    ("ltrim", WRITE | LIST | SLOW),
    ("memory", SLOW),
    ("memory|doctor", SLOW),
    ("memory|help", SLOW),
    ("memory|malloc-stats", SLOW),
    ("memory|purge", SLOW),
    ("memory|stats", SLOW),
    ("memory|usage", READ | SLOW),
    ("mget", READ | STRING | FAST),
    ("module", SLOW),
    ("module|help", SLOW),
    ("module|list", ADMIN | SLOW | DANGEROUS),
    ("module|load", ADMIN | SLOW | DANGEROUS),
    ("module|loadex", ADMIN | SLOW | DANGEROUS),
    ("module|unload", ADMIN | SLOW | DANGEROUS),
    ("monitor", ADMIN | SLOW | DANGEROUS),
    ("move", KEYSPACE | WRITE | FAST),
    ("mset", WRITE | STRING | SLOW),
    ("msetnx", WRITE | STRING | SLOW),
    ("multi", FAST | TRANSACTION),
    ("object", SLOW),
    ("object|encoding", KEYSPACE | READ | SLOW),
    ("object|freq", KEYSPACE | READ | SLOW),
    ("object|help", KEYSPACE | SLOW),
    ("object|idletime", KEYSPACE | READ | SLOW),
    ("object|refcount", KEYSPACE | READ | SLOW),
    ("persist", KEYSPACE | WRITE | FAST),
    ("pexpire", KEYSPACE | WRITE | FAST),
    ("pexpireat", KEYSPACE | WRITE | FAST),
    ("pexpiretime", KEYSPACE | READ | FAST),
    ("pfadd", WRITE | HYPERLOGLOG | FAST),
    ("pfcount", READ | HYPERLOGLOG | SLOW),
    ("pfmerge", WRITE | HYPERLOGLOG | SLOW),
    ("ping", FAST | CONNECTION),
    ("psetex", WRITE | STRING | SLOW),
    ("psubscribe", PUBSUB | SLOW),
    ("pttl", KEYSPACE | READ | FAST),
    ("publish", PUBSUB | FAST),
    ("pubsub", SLOW),
    ("pubsub|channels", PUBSUB | SLOW),
    ("pubsub|help", SLOW),
    ("pubsub|numpat", PUBSUB | SLOW),
    ("pubsub|numsub", PUBSUB | SLOW),
    ("pubsub|shardchannels", PUBSUB | SLOW),
    ("pubsub|shardnumsub", PUBSUB | SLOW),
    ("punsubscribe", PUBSUB | SLOW),
    ("quit", FAST | CONNECTION),
    ("randomkey", KEYSPACE | READ | SLOW),
    ("readonly", FAST | CONNECTION),
    ("readwrite", FAST | CONNECTION),
    ("rename", KEYSPACE | WRITE | SLOW),
    ("renamenx", KEYSPACE | WRITE | FAST),
    ("replicaof", ADMIN | SLOW | DANGEROUS),
    ("reset", FAST | CONNECTION),
    ("restore", KEYSPACE | WRITE | SLOW | DANGEROUS),
    ("role", ADMIN | FAST | DANGEROUS),
    ("rpop", WRITE | LIST | FAST),
    ("rpoplpush", WRITE | LIST | SLOW),
    ("rpush", WRITE | LIST | FAST),
    ("rpushx", WRITE | LIST | FAST),
    ("sadd", WRITE | SET | FAST),
    ("save", ADMIN | SLOW | DANGEROUS),
    ("scan", KEYSPACE | READ | SLOW),
    ("scard", READ | SET | FAST),
    ("script", SLOW),
    ("script|debug", SLOW | SCRIPTING),
    ("script|exists", SLOW | SCRIPTING),
    ("script|flush", SLOW | SCRIPTING),
    ("script|help", SLOW | SCRIPTING),
    ("script|kill", SLOW | SCRIPTING),
    ("script|load", SLOW | SCRIPTING),
    ("sdiff", READ | SET | SLOW),
    ("sdiffstore", WRITE | SET | SLOW),
    ("select", FAST | CONNECTION),
    ("set", WRITE | STRING | SLOW),
    ("setbit", WRITE | BITMAP | SLOW),
    ("setex", WRITE | STRING | SLOW),
    ("setnx", WRITE | STRING | FAST),
    ("setrange", WRITE | STRING | SLOW),
    ("shutdown", ADMIN | SLOW | DANGEROUS),
    ("sinter", READ | SET | SLOW),
    ("sintercard", READ | SET | SLOW),
    ("sinterstore", WRITE | SET | SLOW),
    ("sismember", READ | SET | FAST),
    ("slaveof", ADMIN | SLOW | DANGEROUS),
    ("slowlog", SLOW),
    ("slowlog|get", ADMIN | SLOW | DANGEROUS),
    ("slowlog|help", SLOW),
    ("slowlog|len", ADMIN | SLOW | DANGEROUS),
    ("slowlog|reset", ADMIN | SLOW | DANGEROUS),
    ("smembers", READ | SET | SLOW),
    ("smismember", READ | SET | FAST),
    ("smove", WRITE | SET | FAST),
    ("sort", WRITE | SET | SORTEDSET | LIST | SLOW | DANGEROUS),
    ("sort_ro", READ | SET | SORTEDSET | LIST | SLOW | DANGEROUS),
    ("spop", WRITE | SET | FAST),
    ("spublish", PUBSUB | FAST),
    ("srandmember", READ | SET | SLOW),
    ("srem", WRITE | SET | FAST),
    ("sscan", READ | SET | SLOW),
    ("ssubscribe", PUBSUB | SLOW),
    ("strlen", READ | STRING | FAST),
    ("subscribe", PUBSUB | SLOW),
    ("substr", READ | STRING | SLOW),
    ("sunion", READ | SET | SLOW),
    ("sunionstore", WRITE | SET | SLOW),
    ("sunsubscribe", PUBSUB | SLOW),
    ("swapdb", KEYSPACE | WRITE | FAST | DANGEROUS),
    ("time", FAST),
    ("touch", KEYSPACE | READ | FAST),
    ("ttl", KEYSPACE | READ | FAST),
    ("type", KEYSPACE | READ | FAST),
    ("unlink", KEYSPACE | WRITE | FAST),
    ("unsubscribe", PUBSUB | SLOW),
    ("unwatch", FAST | TRANSACTION),
    ("wait", SLOW | CONNECTION),
    ("watch", FAST | TRANSACTION),
    ("xack", WRITE | STREAM | FAST),
    ("xadd", WRITE | STREAM | FAST),
    ("xautoclaim", WRITE | STREAM | FAST),
    ("xclaim", WRITE | STREAM | FAST),
    ("xdel", WRITE | STREAM | FAST),
    ("xgroup", SLOW),
    ("xgroup|create", WRITE | STREAM | SLOW),
    ("xgroup|createconsumer", WRITE | STREAM | SLOW),
    ("xgroup|delconsumer", WRITE | STREAM | SLOW),
    ("xgroup|destroy", WRITE | STREAM | SLOW),
    ("xgroup|help", STREAM | SLOW),
    ("xgroup|setid", WRITE | STREAM | SLOW),
    ("xinfo", SLOW),
    ("xinfo|consumers", READ | STREAM | SLOW),
    ("xinfo|groups", READ | STREAM | SLOW),
    ("xinfo|help", STREAM | SLOW),
    ("xinfo|stream", READ | STREAM | SLOW),
    ("xlen", READ | STREAM | FAST),
    ("xpending", READ | STREAM | SLOW),
    ("xrange", READ | STREAM | SLOW),
    ("xread", READ | STREAM | SLOW | BLOCKING),
    ("xreadgroup", WRITE | STREAM | SLOW | BLOCKING),
    ("xrevrange", READ | STREAM | SLOW),
    ("xsetid", WRITE | STREAM | FAST),
    ("xtrim", WRITE | STREAM | SLOW),
    ("zadd", WRITE | SORTEDSET | FAST),
    ("zcard", READ | SORTEDSET | FAST),
    ("zcount", READ | SORTEDSET | FAST),
    ("zdiff", READ | SORTEDSET | SLOW),
    ("zdiffstore", WRITE | SORTEDSET | SLOW),
    ("zincrby", WRITE | SORTEDSET | FAST),
    ("zinter", READ | SORTEDSET | SLOW),
    ("zintercard", READ | SORTEDSET | SLOW),
    ("zinterstore", WRITE | SORTEDSET | SLOW),
    ("zlexcount", READ | SORTEDSET | FAST),
    ("zmpop", WRITE | SORTEDSET | SLOW),
    ("zmscore", READ | SORTEDSET | FAST),
    ("zpopmax", WRITE | SORTEDSET | FAST),
    ("zpopmin", WRITE | SORTEDSET | FAST),
    ("zrandmember", READ | SORTEDSET | SLOW),
    ("zrange", READ | SORTEDSET | SLOW),
    ("zrangebylex", READ | SORTEDSET | SLOW),
    ("zrangebyscore", READ | SORTEDSET | SLOW),
    ("zrangestore", WRITE | SORTEDSET | SLOW),
    ("zrank", READ | SORTEDSET | FAST),
    ("zrem", WRITE | SORTEDSET | FAST),
    ("zremrangebylex", WRITE | SORTEDSET | SLOW),
    ("zremrangebyrank", WRITE | SORTEDSET | SLOW),
    ("zremrangebyscore", WRITE | SORTEDSET | SLOW),
    ("zrevrange", READ | SORTEDSET | SLOW),
    ("zrevrangebylex", READ | SORTEDSET | SLOW),
    ("zrevrangebyscore", READ | SORTEDSET | SLOW),
    ("zrevrank", READ | SORTEDSET | FAST),
    ("zscan", READ | SORTEDSET | SLOW),
    ("zscore", READ | SORTEDSET | FAST),
    ("zunion", READ | SORTEDSET | SLOW),
    ("zunionstore", WRITE | SORTEDSET | SLOW),
];

/// The categories of `name` (a command's or a subcommand's full name, lowercase); 0 if
/// tailstore does not answer it.
pub fn of(name: &str) -> u32 {
    TABLE
        .binary_search_by(|(known, _)| known.cmp(&name))
        .map_or(0, |at| TABLE[at].1)
}

/// The bit of the category named `name` (without its `@`, any case).
pub fn named(name: &str) -> Option<u32> {
    NAMES
        .iter()
        .position(|known| known.eq_ignore_ascii_case(name))
        .map(|at| 1 << at)
}

/// The categories' names in `bits`, in [`NAMES`]'s order.
pub fn names(bits: u32) -> impl Iterator<Item = &'static str> {
    NAMES
        .iter()
        .enumerate()
        .filter(move |(at, _)| bits & (1 << at) != 0)
        .map(|(_, name)| *name)
}

/// The full names of every command and subcommand in category `bit`.
pub fn members(bit: u32) -> impl Iterator<Item = &'static str> {
    TABLE
        .iter()
        .filter(move |(_, bits)| bits & bit != 0)
        .map(|(name, _)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{subcommands, COMMANDS};

    #[test]
    fn every_command_and_subcommand_has_its_categories_once() {
        assert!(
            TABLE.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted, no repeats"
        );
        for command in COMMANDS.iter() {
            let names = std::iter::once(command.name.to_string())
                .chain(subcommands::full_names(command.name));
            for name in names {
                assert!(of(&name) != 0, "{name} has no category");
            }
        }
        assert_eq!(
            TABLE.len(),
            COMMANDS
                .iter()
                .map(|c| 1 + subcommands::full_names(c.name).count())
                .sum::<usize>()
        );
    }

    #[test]
    fn categories_are_found_by_name_and_listed_back() {
        assert_eq!(named("Dangerous"), Some(DANGEROUS));
        assert_eq!(named("nosuch"), None);
        assert_eq!(
            names(of("get")).collect::<Vec<_>>(),
            ["read", "string", "fast"]
        );
        assert!(members(HASH).any(|name| name == "hset"));
        assert!(members(DANGEROUS).any(|name| name == "client|kill"));
        assert!(!members(DANGEROUS).any(|name| name == "client|setname"));
    }
}
