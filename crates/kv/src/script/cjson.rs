//! Redis's `cjson` library for scripts: `cjson.encode`, `cjson.decode` and `cjson.null`.
//! Redis bundles the lua-cjson 2.1.0 C library; here `decode` goes by way of `serde_json`
//! (which the workspace has) and `encode` writes the text as lua-cjson writes it (decision
//! 193): numbers as `%.14g`, `/` and control characters escaped, other bytes as they are.
//!
//! As lua-cjson does: a table whose keys are all integers from 1 on is an array (its holes
//! null; an "excessively sparse array" when the largest key passes both 10 and twice the
//! keys), any other table an object (an empty one `{}`), number keys becoming strings;
//! JSON's null decodes to `cjson.null`, a light userdata that encodes back to null. NaN and
//! the infinities, and tables nested deeper than 1,000, cannot be encoded; functions
//! neither.

use mlua::{LightUserData, Lua, Table, Value};
use serde_json::Value as Json;

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
            let mut out = Vec::new();
            encode(&value, 0, &mut out).map_err(|text| library_error(lua, text, true))?;
            lua.create_string(&out)
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

/// Appends `value` as lua-cjson 2.1.0 (Redis's) writes it.
fn encode(value: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err("Cannot serialise, excessive nesting (1001)".into());
    }
    match value {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(data) if data.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(_) | Value::Number(_) => number(lua_number(value).unwrap_or_default(), out)?,
        Value::String(text) => string(&text.as_bytes(), out),
        Value::Table(table) => encode_table(table, depth, out)?,
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    }
    Ok(())
}

/// A number as C's `%.14g` writes it (lua-cjson's default precision): 14 significant
/// digits, trailing zeros dropped, an exponent of at least two digits past 1e14 and below
/// 1e-4 (`1/3` is `0.33333333333333`, `2^53` is `9.007199254741e+15`, `-0` is `-0`).
fn number(x: f64, out: &mut Vec<u8>) -> Result<(), String> {
    if !x.is_finite() {
        return Err("Cannot serialise number: must not be NaN or Inf".into());
    }
    out.extend_from_slice(c_g(x, 14).as_bytes());
    Ok(())
}

/// `x` as C's `%.{precision}g` writes it (`precision` at least 1): that many significant
/// digits, trailing zeros dropped, an exponent of at least two digits from 10^precision up
/// and below 1e-4; `inf`, `-inf` and `nan` as glibc writes them.
pub(super) fn c_g(x: f64, precision: i32) -> String {
    assert!(precision >= 1);
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // The exponent of `x` rounded to `precision` digits decides the form, as C's %g does.
    let scientific = format!("{:.*e}", (precision - 1) as usize, x);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..precision).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            without_trailing_zeros(mantissa),
            exponent.unsigned_abs()
        )
    } else {
        let decimals = (precision - 1 - exponent) as usize;
        without_trailing_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn without_trailing_zeros(digits: &str) -> &str {
    if digits.contains('.') {
        digits.trim_end_matches('0').trim_end_matches('.')
    } else {
        digits
    }
}

/// A string, escaped as lua-cjson escapes it: `"`, `\`, `/` and the control characters;
/// other bytes, those past ASCII included, as they are (no UTF-8 check).
fn string(text: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &byte in text {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{byte:04x}").as_bytes()),
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

/// A table as lua-cjson writes it: an array when every key is an integer from 1 on (holes
/// as null, unless the largest key passes both 10 and twice the keys: "excessively sparse
/// array"), else an object whose keys are strings or numbers, in the table's own order.
fn encode_table(table: &Table, depth: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let pairs: Vec<(Value, Value)> = table
        .pairs::<Value, Value>()
        .collect::<mlua::Result<_>>()
        .map_err(|err| err.to_string())?;
    if let Some(len) = array_length(&pairs)? {
        out.push(b'[');
        for at in 1..=len {
            if at > 1 {
                out.push(b',');
            }
            let value: Value = table.raw_get(at).map_err(|err| err.to_string())?;
            encode(&value, depth + 1, out)?;
        }
        out.push(b']');
        return Ok(());
    }
    out.push(b'{');
    for (at, (key, value)) in pairs.iter().enumerate() {
        if at > 0 {
            out.push(b',');
        }
        match key {
            Value::String(text) => string(&text.as_bytes(), out),
            Value::Integer(_) | Value::Number(_) => {
                out.push(b'"');
                number(lua_number(key).unwrap_or_default(), out)?;
                out.push(b'"');
            }
            other => {
                return Err(format!(
                    "Cannot serialise {}: table key must be a number or string",
                    other.type_name()
                ))
            }
        }
        out.push(b':');
        encode(value, depth + 1, out)?;
    }
    out.push(b'}');
    Ok(())
}

/// A Lua number as a double (Lua 5.1 has no integers; mlua may still hand one over).
fn lua_number(value: &Value) -> Option<f64> {
    match value {
        Value::Integer(n) => Some(*n as f64),
        Value::Number(x) => Some(*x),
        _ => None,
    }
}

/// The length of the array a table's keys make (lua-cjson's `lua_array_length`), or `None`
/// when it is an object (an empty table too). lua-cjson keeps the largest key in a C `int`:
/// a key past `i32::MAX` becomes `INT_MIN` there (x86's conversion of an out-of-range
/// double), which a later, smaller key replaces, and a table whose largest key ends so is
/// written as an object (Redis: `{[1e300]=1}` is `{"1e+300":1}`).
fn array_length(pairs: &[(Value, Value)]) -> Result<Option<usize>, String> {
    let (mut largest, mut keys) = (0i32, 0i64);
    for (key, _) in pairs {
        let Some(k) = lua_number(key) else {
            return Ok(None);
        };
        if k.floor() != k || k < 1.0 {
            return Ok(None);
        }
        if k > f64::from(largest) {
            largest = if k < 2_147_483_648.0 {
                k as i32
            } else {
                i32::MIN
            };
        }
        keys += 1;
    }
    if i64::from(largest) > keys * 2 && largest > 10 {
        return Err("Cannot serialise table: excessively sparse array".into());
    }
    Ok(usize::try_from(largest).ok().filter(|&len| len > 0))
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

    /// A Lua state with the library as the global `cjson`, as scripts have it.
    fn lua_with_cjson() -> Lua {
        let lua = Lua::new();
        lua.globals()
            .set("cjson", library(&lua).expect("cjson"))
            .expect("set");
        lua
    }

    fn eval(lua: &Lua, code: &str) -> String {
        lua.load(code).eval::<String>().expect(code)
    }

    #[test]
    fn values_round_trip_as_lua_cjson_writes_them() {
        let lua = lua_with_cjson();
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
            "[\"a\",null,\"c\"]"
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

    /// What Redis 7.0.15's lua-cjson wrote for each (`EVAL "return cjson.encode(…)" 0`).
    #[test]
    fn encodes_as_redis_lua_cjson_does() {
        let lua = lua_with_cjson();
        for (value, redis) in [
            ("1/3", "0.33333333333333"),
            ("123456789012345", "1.2345678901234e+14"),
            ("1e300", "1e+300"),
            ("-0", "-0"),
            ("1e-5", "1e-05"),
            ("0.1", "0.1"),
            ("1e14", "1e+14"),
            ("12345678901234", "12345678901234"),
            ("2^53", "9.007199254741e+15"),
            ("-1.5e-7", "-1.5e-07"),
            ("'a/b'", "\"a\\/b\""),
            (
                "'\\1\\8\\9\\10\\11\\12\\13\\31\\127\"\\\\'",
                "\"\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f\\u007f\\\"\\\\\"",
            ),
            ("{[1.5]='x'}", "{\"1.5\":\"x\"}"),
            ("{[0]='x'}", "{\"0\":\"x\"}"),
            ("{[1e300]=1}", "{\"1e+300\":1}"),
            ("{[1]=1,[2]=2,[4]=4}", "[1,2,null,4]"),
            (
                "{[10]=1}",
                "[null,null,null,null,null,null,null,null,null,1]",
            ),
            ("{1,{2,{}}}", "[1,[2,{}]]"),
        ] {
            assert_eq!(
                eval(&lua, &format!("return cjson.encode({value})")),
                redis,
                "{value}"
            );
        }
        let bytes: mlua::LuaString = lua
            .load("return cjson.encode('\\128\\255')")
            .eval()
            .expect("bytes past ASCII");
        assert_eq!(&bytes.as_bytes()[..], b"\"\x80\xff\"", "passed through");
        for (value, message) in [
            (
                "{[1]='a',[30]='c'}",
                "Cannot serialise table: excessively sparse array",
            ),
            (
                "{[true]=1}",
                "Cannot serialise boolean: table key must be a number or string",
            ),
        ] {
            let err = lua
                .load(format!("return cjson.encode({value})"))
                .exec()
                .expect_err(value);
            assert!(err.to_string().contains(message), "{value}: {err}");
        }
    }

    #[test]
    fn what_json_cannot_hold_is_an_error() {
        let lua = lua_with_cjson();
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
