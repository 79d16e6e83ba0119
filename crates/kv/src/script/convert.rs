//! Between Redis replies and Lua values, both ways, by Redis 7.0's conversion tables:
//! a command's reply as `redis.call` returns it to the script (RESP2's table, or RESP3's
//! after `redis.setresp(3)`), and the script's result as the client's reply.

use mlua::{Lua, Table, Value};
use tailstore_resp::{format_double, format_human_exact, Protocol, Reply};

/// How deep a script's result may nest (Redis refuses deeper ones the same way, from the
/// C stack's limit).
const MAX_DEPTH: usize = 1000;

/// A command's reply as `redis.call` returns it (an error reply as `{err = text}`, which
/// `redis.call` raises and `redis.pcall` returns).
pub fn reply_to_lua(lua: &Lua, reply: Reply, resp3: bool) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Status(text) => single_field(lua, "ok", Value::String(lua.create_string(text)?))?,
        Reply::Error(text) => single_field(lua, "err", Value::String(lua.create_string(text)?))?,
        Reply::Int(n) => Value::Integer(n),
        Reply::Bulk(bytes) => Value::String(lua.create_string(bytes)?),
        Reply::Verbatim { text, .. } => Value::String(lua.create_string(text)?),
        Reply::Null | Reply::NullArray if resp3 => Value::Nil,
        Reply::Null | Reply::NullArray => Value::Boolean(false),
        Reply::Array(items) | Reply::Push(items) => array(lua, items, resp3)?,
        Reply::Set(items) if resp3 => {
            let set = lua.create_table()?;
            for item in items {
                set.raw_set(reply_to_lua(lua, item, resp3)?, true)?;
            }
            single_field(lua, "set", Value::Table(set))?
        }
        Reply::Set(items) => array(lua, items, resp3)?,
        Reply::Map(pairs) | Reply::Keyed(pairs) if resp3 => {
            let map = lua.create_table()?;
            for (key, value) in pairs {
                map.raw_set(
                    reply_to_lua(lua, key, resp3)?,
                    reply_to_lua(lua, value, resp3)?,
                )?;
            }
            single_field(lua, "map", Value::Table(map))?
        }
        // RESP3's pairs, and RESP2's keyed pairs (the map arm took RESP3's): nested.
        Reply::Pairs(pairs) if resp3 => nested(lua, pairs, resp3)?,
        Reply::Keyed(pairs) => nested(lua, pairs, resp3)?,
        Reply::Map(pairs) | Reply::Pairs(pairs) => {
            array(lua, pairs.into_iter().flat_map(|(a, b)| [a, b]), resp3)?
        }
        Reply::Double(x) if resp3 => single_field(lua, "double", Value::Number(x))?,
        Reply::Double(x) => Value::String(lua.create_string(format_double(x))?),
        // Redis's Lua reads the reply's text back (strtod), 17 decimals of it.
        Reply::HumanDouble(x) if resp3 => {
            let read = format_human_exact(x).parse().unwrap_or(x);
            single_field(lua, "double", Value::Number(read))?
        }
        Reply::HumanDouble(x) => Value::String(lua.create_string(format_human_exact(x))?),
        Reply::Bool(b) if resp3 => Value::Boolean(b),
        Reply::Bool(b) => Value::Integer(i64::from(b)),
    })
}

/// Redis's one-field tables: `{ok = …}`, `{err = …}`, `{map = …}`…
pub(super) fn single_field(lua: &Lua, name: &str, value: Value) -> mlua::Result<Value> {
    let table = lua.create_table_with_capacity(0, 1)?;
    table.raw_set(name, value)?;
    Ok(Value::Table(table))
}

/// Pairs as an array of two-element arrays.
fn nested(lua: &Lua, pairs: Vec<(Reply, Reply)>, resp3: bool) -> mlua::Result<Value> {
    let items = pairs.into_iter().map(|(a, b)| Reply::Array(vec![a, b]));
    array(lua, items, resp3)
}

fn array(lua: &Lua, items: impl IntoIterator<Item = Reply>, resp3: bool) -> mlua::Result<Value> {
    let table = lua.create_table()?;
    for (at, item) in items.into_iter().enumerate() {
        table.raw_set(at + 1, reply_to_lua(lua, item, resp3)?)?;
    }
    Ok(Value::Table(table))
}

/// A script's result as the client's reply, in the client's protocol. Booleans are RESP3's
/// only where the script chose RESP3 too (`redis.setresp(3)`), as in Redis 7.0; else true is
/// 1 and false is nil.
pub fn lua_to_reply(value: &Value, protocol: Protocol, script_resp3: bool) -> Reply {
    let booleans = match (protocol, script_resp3) {
        (Protocol::Resp3, true) => Protocol::Resp3,
        _ => Protocol::Resp2,
    };
    to_reply(value, booleans, 0)
}

/// `protocol` here only decides how booleans are sent: everything else is encoded in the
/// client's protocol later.
fn to_reply(value: &Value, protocol: Protocol, depth: usize) -> Reply {
    if depth > MAX_DEPTH {
        return Reply::error("ERR reached lua stack limit");
    }
    let resp3 = protocol == Protocol::Resp3;
    match value {
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Integer(n) => Reply::Int(*n),
        // Lua 5.1's numbers are doubles; Redis truncates them to integers.
        Value::Number(x) => Reply::Int(truncated(*x)),
        Value::Boolean(b) if resp3 => Reply::Bool(*b),
        Value::Boolean(true) => Reply::Int(1),
        Value::Table(table) => table_to_reply(table, protocol, depth),
        _ => Reply::Null,
    }
}

/// A Lua number as Redis makes it an integer reply: C's cast, truncating toward zero, which
/// on x86-64 gives the "integer indefinite" value, i64::MIN, for NaN and whatever is out of
/// range — so INCRBY's reply of i64::MAX, a double of 2^63 in Lua, comes back as i64::MIN,
/// as from Redis (Rust's cast would saturate to i64::MAX).
fn truncated(x: f64) -> i64 {
    const TWO_TO_THE_63: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() || !(-TWO_TO_THE_63..TWO_TO_THE_63).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// A table: Redis's special single-field tables first, else an array up to its first nil.
fn table_to_reply(table: &Table, protocol: Protocol, depth: usize) -> Reply {
    if let Some(text) = string_field(table, "err") {
        return Reply::Error(text);
    }
    if let Some(text) = string_field(table, "ok") {
        return Reply::Status(text);
    }
    if let Ok(Value::Number(x)) = table.raw_get::<Value>("double") {
        return Reply::Double(x);
    }
    if let Ok(Value::Integer(n)) = table.raw_get::<Value>("double") {
        return Reply::Double(n as f64);
    }
    if let Ok(Value::Table(map)) = table.raw_get::<Value>("map") {
        let pairs = map
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, v)| {
                (
                    to_reply(&k, protocol, depth + 1),
                    to_reply(&v, protocol, depth + 1),
                )
            })
            .collect();
        return Reply::Map(pairs);
    }
    if let Ok(Value::Table(set)) = table.raw_get::<Value>("set") {
        let members = set
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, _)| to_reply(&k, protocol, depth + 1))
            .collect();
        return Reply::Set(members);
    }
    let mut items = Vec::new();
    for at in 1.. {
        match table.raw_get::<Value>(at) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(item) => items.push(to_reply(&item, protocol, depth + 1)),
        }
    }
    Reply::Array(items)
}

fn string_field(table: &Table, name: &str) -> Option<String> {
    match table.raw_get::<Value>(name) {
        Ok(Value::String(s)) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(reply: Reply, resp3: bool, protocol: Protocol) -> Reply {
        let lua = Lua::new();
        let value = reply_to_lua(&lua, reply, resp3).expect("to lua");
        lua_to_reply(&value, protocol, true)
    }

    #[test]
    fn resp2_conversions_are_redis_s() {
        let p = Protocol::Resp2;
        assert_eq!(round_trip(Reply::Int(-7), false, p), Reply::Int(-7));
        assert_eq!(round_trip(Reply::ok(), false, p), Reply::ok());
        assert_eq!(
            round_trip(Reply::error("ERR x"), false, p),
            Reply::error("ERR x")
        );
        // A nil bulk is false in Lua, and false is a nil bulk again.
        assert_eq!(round_trip(Reply::Null, false, p), Reply::Null);
        assert_eq!(
            round_trip(Reply::Double(1.5), false, p),
            Reply::Bulk(b"1.5".to_vec())
        );
        assert_eq!(round_trip(Reply::Bool(true), false, p), Reply::Int(1));
        assert_eq!(
            round_trip(
                Reply::Map(vec![(Reply::Bulk(b"f".to_vec()), Reply::Int(1))]),
                false,
                p
            ),
            Reply::Array(vec![Reply::Bulk(b"f".to_vec()), Reply::Int(1)])
        );
    }

    #[test]
    fn an_array_ends_at_its_first_nil() {
        let lua = Lua::new();
        let value: Value = lua
            .load("return {1, 'two', {3}, nil, 5}")
            .eval()
            .expect("eval");
        assert_eq!(
            lua_to_reply(&value, Protocol::Resp2, false),
            Reply::Array(vec![
                Reply::Int(1),
                Reply::Bulk(b"two".to_vec()),
                Reply::Array(vec![Reply::Int(3)]),
            ])
        );
        let value: Value = lua.load("return 3.99").eval().expect("eval");
        assert_eq!(lua_to_reply(&value, Protocol::Resp2, false), Reply::Int(3));
        let value: Value = lua.load("return false").eval().expect("eval");
        assert_eq!(lua_to_reply(&value, Protocol::Resp2, false), Reply::Null);
        assert_eq!(
            lua_to_reply(&value, Protocol::Resp3, true),
            Reply::Bool(false)
        );
        assert_eq!(lua_to_reply(&value, Protocol::Resp3, false), Reply::Null);
    }

    #[test]
    fn resp3_tables_keep_their_types() {
        let p = Protocol::Resp3;
        assert_eq!(round_trip(Reply::Null, true, p), Reply::Null);
        assert_eq!(round_trip(Reply::Double(2.5), true, p), Reply::Double(2.5));
        assert_eq!(round_trip(Reply::Bool(false), true, p), Reply::Bool(false));
        assert_eq!(
            round_trip(Reply::Set(vec![Reply::Bulk(b"m".to_vec())]), true, p),
            Reply::Set(vec![Reply::Bulk(b"m".to_vec())])
        );
    }

    #[test]
    fn a_result_nested_too_deep_is_an_error_not_a_crash() {
        let lua = Lua::new();
        let value: Value = lua
            .load("local t = {} for i = 1, 5000 do t = {t} end return t")
            .eval()
            .expect("eval");
        let reply = lua_to_reply(&value, Protocol::Resp2, false);
        let mut at = &reply;
        while let Reply::Array(items) = at {
            at = &items[0];
        }
        assert_eq!(at, &Reply::error("ERR reached lua stack limit"));
    }
}
