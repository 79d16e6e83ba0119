//! Redis's `cjson` library for scripts: `cjson.encode`, `cjson.decode` and `cjson.null`, by
//! way of `serde_json` (which the workspace has; Redis bundles the lua-cjson C library).
//!
//! As lua-cjson does: a table whose keys are exactly 1..n (n ≥ 1) is an array, any other
//! table an object (an empty one `{}`), number keys becoming strings; JSON's null decodes to
//! `cjson.null`, a light userdata that encodes back to null. NaN and the infinities, and
//! tables nested deeper than 1,000, cannot be encoded; functions neither.

use mlua::{LightUserData, Lua, Table, Value};
use serde_json::{Map, Number, Value as Json};

use super::vm::library_error;

/// Deeper tables are refused (lua-cjson's default limit, which also keeps a self-containing
/// table from recursing forever).
const MAX_DEPTH: usize = 1000;

/// JSON's null in Lua.
const NULL: Value = Value::LightUserData(LightUserData(std::ptr::null_mut()));

/// The `cjson` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let cjson = lua.create_table()?;
    cjson.raw_set(
        "encode",
        lua.create_function(|lua, value: Value| {
            let json = to_json(&value, 0).map_err(|text| library_error(lua, text, true))?;
            Ok(json.to_string())
        })?,
    )?;
    cjson.raw_set(
        "decode",
        lua.create_function(|lua, text: mlua::LuaString| {
            let json = decode(&text.as_bytes()).map_err(|text| library_error(lua, text, true))?;
            from_json(lua, json)
        })?,
    )?;
    cjson.raw_set("null", NULL)?;
    Ok(cjson)
}

/// JSON text as a value, nested at most [`MAX_DEPTH`] deep as lua-cjson allows (serde_json
/// alone stops at 128): deeper text is refused with lua-cjson's message before the parser,
/// which recurses once per level, sees it. Other errors are serde_json's texts.
fn decode(text: &[u8]) -> Result<Json, String> {
    if let Some(at) = too_deep(text) {
        return Err(format!(
            "Found too many nested data structures ({}) at character {}",
            MAX_DEPTH + 1,
            at + 1
        ));
    }
    let mut parser = serde_json::Deserializer::from_slice(text);
    parser.disable_recursion_limit();
    let json = serde::Deserialize::deserialize(&mut parser).map_err(|err| err.to_string())?;
    parser.end().map_err(|err| err.to_string())?;
    Ok(json)
}

/// Where `text` opens its array or object number `MAX_DEPTH` + 1 at once, if it does
/// (brackets inside strings are text).
fn too_deep(text: &[u8]) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (at, &byte) in text.iter().enumerate() {
        match (in_string, byte) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') => in_string = false,
            (true, _) => {}
            (false, b'"') => in_string = true,
            (false, b'[' | b'{') => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(at);
                }
            }
            (false, b']' | b'}') => depth = depth.saturating_sub(1),
            (false, _) => {}
        }
    }
    None
}

fn to_json(value: &Value, depth: usize) -> Result<Json, String> {
    if depth > MAX_DEPTH {
        return Err("Cannot serialise, excessive nesting (1001)".into());
    }
    Ok(match value {
        Value::Nil => Json::Null,
        Value::LightUserData(data) if data.0.is_null() => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(n) => Json::from(*n),
        Value::Number(x) if x.fract() == 0.0 && x.abs() < 1e15 => Json::from(*x as i64),
        Value::Number(x) => Number::from_f64(*x)
            .map(Json::Number)
            .ok_or("Cannot serialise number: must not be NaN or Inf")?,
        Value::String(s) => Json::String(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Value::Table(table) => table_to_json(table, depth)?,
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    })
}

fn table_to_json(table: &Table, depth: usize) -> Result<Json, String> {
    let pairs: Vec<(Value, Value)> = table
        .pairs::<Value, Value>()
        .collect::<mlua::Result<_>>()
        .map_err(|err| err.to_string())?;
    let len = pairs.len();
    let is_array = len > 0
        && pairs.iter().all(|(key, _)| match key {
            Value::Integer(n) => (1..=len as i64).contains(n),
            Value::Number(x) => x.fract() == 0.0 && *x >= 1.0 && *x <= len as f64,
            _ => false,
        });
    if is_array {
        let mut items = vec![Json::Null; len];
        for (key, value) in &pairs {
            let at = match key {
                Value::Integer(n) => *n as usize,
                Value::Number(x) => *x as usize,
                _ => continue,
            };
            items[at - 1] = to_json(value, depth + 1)?;
        }
        return Ok(Json::Array(items));
    }
    let mut object = Map::new();
    for (key, value) in &pairs {
        let name = match key {
            Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            Value::Integer(n) => n.to_string(),
            Value::Number(x) => x.to_string(),
            _ => return Err("Cannot serialise table: table key must be a number or string".into()),
        };
        object.insert(name, to_json(value, depth + 1)?);
    }
    Ok(Json::Object(object))
}

fn from_json(lua: &Lua, json: Json) -> mlua::Result<Value> {
    Ok(match json {
        Json::Null => NULL,
        Json::Bool(b) => Value::Boolean(b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::String(lua.create_string(s)?),
        Json::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (at, item) in items.into_iter().enumerate() {
                table.raw_set(at + 1, from_json(lua, item)?)?;
            }
            Value::Table(table)
        }
        Json::Object(object) => {
            let table = lua.create_table_with_capacity(0, object.len())?;
            for (name, item) in object {
                table.raw_set(name, from_json(lua, item)?)?;
            }
            Value::Table(table)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(lua: &Lua, code: &str) -> String {
        lua.load(code).eval::<String>().expect(code)
    }

    #[test]
    fn values_round_trip_as_lua_cjson_writes_them() {
        let lua = Lua::new();
        lua.globals()
            .set("cjson", library(&lua).expect("cjson"))
            .expect("set");
        assert_eq!(
            eval(&lua, "return cjson.encode({1, 2, 'x'})"),
            "[1,2,\"x\"]"
        );
        assert_eq!(eval(&lua, "return cjson.encode({})"), "{}");
        assert_eq!(
            eval(&lua, "return cjson.encode({a = {b = true}})"),
            "{\"a\":{\"b\":true}}"
        );
        assert_eq!(
            eval(&lua, "return cjson.encode({[1] = 'a', [3] = 'c'})"),
            "{\"1\":\"a\",\"3\":\"c\"}"
        );
        assert_eq!(eval(&lua, "return cjson.encode(1.5)"), "1.5");
        assert_eq!(
            eval(&lua, "local t = cjson.decode('{\"a\":[1,null,3]}') return tostring(t.a[2] == cjson.null) .. t.a[3]"),
            "true3"
        );
        assert_eq!(
            eval(
                &lua,
                "return cjson.encode(cjson.decode('[1,{\"k\":\"v\"}]'))"
            ),
            "[1,{\"k\":\"v\"}]"
        );
    }

    #[test]
    fn what_json_cannot_hold_is_an_error() {
        let lua = Lua::new();
        lua.globals()
            .set("cjson", library(&lua).expect("cjson"))
            .expect("set");
        for code in [
            "return cjson.encode(0/0)",
            "return cjson.encode(function() end)",
            "local t = {} t.t = t return cjson.encode(t)",
            "return cjson.decode('{')",
        ] {
            assert!(lua.load(code).exec().is_err(), "{code}");
        }
    }
}
