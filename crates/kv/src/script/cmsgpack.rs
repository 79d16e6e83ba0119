//! Redis's `cmsgpack` library for scripts: `pack`, `unpack`, `unpack_one` and
//! `unpack_limit`, encoding MessagePack as the lua-cmsgpack C library Redis bundles does,
//! byte for byte (job queues such as BullMQ pack options on the client and unpack them in
//! scripts). The markers are `rmp`'s.
//!
//! Encoding: a number that is a whole i64 is the smallest integer format (unsigned ones
//! for n ≥ 0), any other number a float32 when that holds it exactly, else a float64;
//! strings are `str` (never `bin`); a table whose keys are exactly 1..n is an array (an
//! empty table too), any other a map in Lua's iteration order; tables nested deeper than
//! 16, functions and the like are nil. Decoding accepts every format but `bin` and the
//! extension types (lua-cmsgpack 0.4 predates them), and turns every number into a Lua
//! number.

use mlua::{Lua, MultiValue, Table, Value};
use rmp::decode::RmpRead;
use rmp::encode;
use rmp::Marker;

use super::vm::{argument_error, library_error};

/// Tables nested deeper are encoded as nil (lua-cmsgpack's limit, which also stops a table
/// that contains itself).
const MAX_NESTING: usize = 16;
/// Containers nested deeper are refused when decoding (lua-cmsgpack recurses on the C
/// stack without a limit).
const MAX_DECODE_DEPTH: usize = 1000;

/// The `cmsgpack` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let cmsgpack = lua.create_table()?;
    cmsgpack.raw_set(
        "pack",
        lua.create_function(|lua, args: MultiValue| raising(lua, pack(lua, &args)))?,
    )?;
    cmsgpack.raw_set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            raising(lua, unpack_call(lua, &args, None, None))
        })?,
    )?;
    cmsgpack.raw_set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            raising(lua, unpack_call(lua, &args, Some(1), Some(2)))
        })?,
    )?;
    cmsgpack.raw_set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let unpacked = integer_arg(&args, 2, None)
                .and_then(|limit| unpack_call(lua, &args, Some(limit), Some(3)));
            raising(lua, unpacked)
        })?,
    )?;
    Ok(cmsgpack)
}

/// A library function's error.
enum Raise {
    /// `luaL_argerror`'s: argument `at` and what is wrong with it.
    Argument(usize, String),
    /// Raised by the function itself (`luaL_error`): after the caller's place.
    AtCaller(String),
    /// Raised by Lua's own C API inside it (`lua_settable`'s "table index is nil"): bare.
    Bare(&'static str),
}

/// A function's results, or its error raised as Lua's library functions raise theirs.
fn raising(lua: &Lua, result: Result<Vec<Value>, Raise>) -> mlua::Result<MultiValue> {
    result
        .map(MultiValue::from_iter)
        .map_err(|raise| match raise {
            Raise::Argument(at, message) => argument_error(lua, at, &message),
            Raise::AtCaller(text) => library_error(lua, text, true),
            Raise::Bare(text) => library_error(lua, text, false),
        })
}

/// Argument `at` (from 1) as an integer, as `luaL_checkinteger` (or, with a default,
/// `luaL_optinteger`) reads it: a number, or a string that is one, truncated.
fn integer_arg(args: &MultiValue, at: usize, default: Option<i64>) -> Result<i64, Raise> {
    let value = args.get(at - 1).unwrap_or(&Value::Nil);
    let number = match value {
        Value::Nil if default.is_some() => return Ok(default.unwrap_or(0)),
        Value::Integer(n) => Some(*n as f64),
        Value::Number(x) => Some(*x),
        Value::String(s) => std::str::from_utf8(&s.as_bytes())
            .ok()
            .and_then(|text| text.trim().parse::<f64>().ok()),
        _ => None,
    };
    number
        .map(|x| x as i64)
        .ok_or_else(|| bad_argument(at, "number", value))
}

/// `luaL_argerror` for an argument of the wrong type.
fn bad_argument(at: usize, expected: &str, got: &Value) -> Raise {
    let got = match got {
        Value::Nil => "no value",
        other => other.type_name(),
    };
    Raise::Argument(at, format!("{expected} expected, got {got}"))
}

// ---------------------------------------------------------------------------------------
// pack

fn pack(lua: &Lua, values: &MultiValue) -> Result<Vec<Value>, Raise> {
    if values.is_empty() {
        return Err(Raise::Argument(
            0,
            "MessagePack pack needs input.".to_string(),
        ));
    }
    let mut out = Vec::new();
    for value in values {
        encode_value(&mut out, value, 0).map_err(|err| Raise::AtCaller(err.to_string()))?;
    }
    let packed = lua
        .create_string(out)
        .map_err(|err| Raise::AtCaller(err.to_string()))?;
    Ok(vec![Value::String(packed)])
}

fn encode_value(out: &mut Vec<u8>, value: &Value, level: usize) -> mlua::Result<()> {
    match value {
        Value::String(s) => encode_bytes(out, &s.as_bytes()),
        Value::Boolean(b) => encode::write_bool(out, *b).map_err(write_error),
        Value::Integer(n) => encode_int(out, *n),
        Value::Number(x) => match whole_i64(*x) {
            Some(n) => encode_int(out, n),
            None => encode_float(out, *x),
        },
        Value::Table(table) if level < MAX_NESTING => encode_table(out, table, level),
        _ => encode::write_nil(out).map_err(write_error),
    }
}

/// `x` as an i64 when it is one exactly (lua-cmsgpack's `(int64_t)x == x`, which is false
/// for the infinities, NaN and anything outside the i64 range).
fn whole_i64(x: f64) -> Option<i64> {
    // 2^63: the first f64 an i64 cannot hold.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    ((-LIMIT..LIMIT).contains(&x) && x.fract() == 0.0).then_some(x as i64)
}

fn encode_int(out: &mut Vec<u8>, n: i64) -> mlua::Result<()> {
    match (u64::try_from(n), n) {
        (Ok(n @ 0..=127), _) => encode::write_pfix(out, n as u8).map_err(write_error),
        (Ok(n), _) if n <= 0xff => encode::write_u8(out, n as u8).map_err(write_error),
        (Ok(n), _) if n <= 0xffff => encode::write_u16(out, n as u16).map_err(write_error),
        (Ok(n), _) if n <= 0xffff_ffff => encode::write_u32(out, n as u32).map_err(write_error),
        (Ok(n), _) => encode::write_u64(out, n).map_err(write_error),
        (Err(_), n @ -32..=-1) => encode::write_nfix(out, n as i8).map_err(write_error),
        (Err(_), n) if n >= -128 => encode::write_i8(out, n as i8).map_err(write_error),
        (Err(_), n) if n >= -32768 => encode::write_i16(out, n as i16).map_err(write_error),
        (Err(_), n) if n >= i64::from(i32::MIN) => {
            encode::write_i32(out, n as i32).map_err(write_error)
        }
        (Err(_), n) => encode::write_i64(out, n).map_err(write_error),
    }
}

fn encode_float(out: &mut Vec<u8>, x: f64) -> mlua::Result<()> {
    let narrow = x as f32;
    if f64::from(narrow) == x {
        encode::write_f32(out, narrow).map_err(write_error)
    } else {
        encode::write_f64(out, x).map_err(write_error)
    }
}

fn encode_bytes(out: &mut Vec<u8>, bytes: &[u8]) -> mlua::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| mlua::Error::runtime("MessagePack cannot pack a string of 4 GiB or more"))?;
    encode::write_str_len(out, len).map_err(write_error)?;
    out.extend_from_slice(bytes);
    Ok(())
}

fn encode_table(out: &mut Vec<u8>, table: &Table, level: usize) -> mlua::Result<()> {
    let (mut count, mut max) = (0usize, 0usize);
    let mut array = true;
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let index = match key {
            Value::Integer(n) => usize::try_from(n).ok().filter(|&n| n > 0),
            Value::Number(x) if x > 0.0 && x.fract() == 0.0 && x <= f64::from(i32::MAX) => {
                Some(x as usize)
            }
            _ => None,
        };
        let Some(index) = index else {
            array = false;
            count += 1;
            continue;
        };
        max = max.max(index);
        count += 1;
    }
    let len = u32::try_from(count)
        .map_err(|_| mlua::Error::runtime("MessagePack cannot pack a table that large"))?;
    if array && count == max {
        encode::write_array_len(out, len).map_err(write_error)?;
        for index in 1..=count {
            encode_value(out, &table.raw_get::<Value>(index)?, level + 1)?;
        }
    } else {
        encode::write_map_len(out, len).map_err(write_error)?;
        for pair in table.pairs::<Value, Value>() {
            let (key, value) = pair?;
            encode_value(out, &key, level + 1)?;
            encode_value(out, &value, level + 1)?;
        }
    }
    Ok(())
}

/// A write into a vector, which does not fail; the error type is `std::io`'s.
fn write_error(err: impl std::fmt::Display) -> mlua::Error {
    mlua::Error::runtime(format!("MessagePack: {err}"))
}

// ---------------------------------------------------------------------------------------
// unpack

/// Why input could not be decoded, in lua-cmsgpack's words.
enum Unpack {
    Missing,
    BadFormat,
    /// An offset or limit out of range.
    Request(String),
    /// A map key Lua tables cannot have (nil, NaN): Lua's own error.
    BadKey(&'static str),
    Lua(mlua::Error),
}

impl From<mlua::Error> for Unpack {
    fn from(err: mlua::Error) -> Unpack {
        Unpack::Lua(err)
    }
}

/// `unpack(text)`, `unpack_one(text [, offset])`, `unpack_limit(text, limit [, offset])`:
/// the offset is argument `offset_at`.
fn unpack_call(
    lua: &Lua,
    args: &MultiValue,
    limit: Option<i64>,
    offset_at: Option<usize>,
) -> Result<Vec<Value>, Raise> {
    let text = match args.front() {
        Some(Value::String(text)) => text.as_bytes().to_vec(),
        Some(number @ (Value::Integer(_) | Value::Number(_))) => lua
            .coerce_string(number.clone())
            .ok()
            .flatten()
            .map(|s| s.as_bytes().to_vec())
            .unwrap_or_default(),
        other => {
            let got = other.unwrap_or(&Value::Nil);
            return Err(bad_argument(1, "string", got));
        }
    };
    let offset = match offset_at {
        None => 0,
        Some(at) => integer_arg(args, at, Some(0))?,
    };
    unpack(lua, &text, limit, offset).map_err(|err| match err {
        Unpack::Lua(err) => Raise::AtCaller(err.to_string()),
        Unpack::Missing => Raise::AtCaller("Missing bytes in input.".to_string()),
        Unpack::BadFormat => Raise::AtCaller("Bad data format in input.".to_string()),
        Unpack::BadKey(text) => Raise::Bare(text),
        Unpack::Request(text) => Raise::AtCaller(text),
    })
}

/// Decodes up to `limit` values (`None`: all) from `offset` on. With a limit, the offset
/// of the rest comes first (-1 when nothing is left), as lua-cmsgpack returns it.
fn unpack(lua: &Lua, text: &[u8], limit: Option<i64>, offset: i64) -> Result<Vec<Value>, Unpack> {
    let (Ok(start), Ok(limit)) = (usize::try_from(offset), usize::try_from(limit.unwrap_or(0)))
    else {
        return Err(Unpack::Request(format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            text.len()
        )));
    };
    let Some(mut rest) = text.get(start..) else {
        return Err(Unpack::Request(format!(
            "Start offset {start} greater than input length {}.",
            text.len()
        )));
    };
    let decode_all = limit == 0 && start == 0;
    let limit = if decode_all { usize::MAX } else { limit };
    let mut values = Vec::new();
    while !rest.is_empty() && values.len() < limit {
        values.push(decode(lua, &mut rest, 0)?);
    }
    if !decode_all {
        let next = if rest.is_empty() {
            -1
        } else {
            (text.len() - rest.len()) as i64
        };
        values.insert(0, Value::Number(next as f64));
    }
    Ok(values)
}

fn decode(lua: &Lua, input: &mut &[u8], depth: usize) -> Result<Value, Unpack> {
    if depth > MAX_DECODE_DEPTH {
        return Err(Unpack::BadFormat);
    }
    let marker = Marker::from_u8(input.read_u8().map_err(|_| Unpack::Missing)?);
    let missing = |_| Unpack::Missing;
    let number = |x: f64| Ok(Value::Number(x));
    match marker {
        Marker::FixPos(n) => number(f64::from(n)),
        Marker::FixNeg(n) => number(f64::from(n)),
        Marker::U8 => number(f64::from(input.read_data_u8().map_err(missing)?)),
        Marker::U16 => number(f64::from(input.read_data_u16().map_err(missing)?)),
        Marker::U32 => number(f64::from(input.read_data_u32().map_err(missing)?)),
        Marker::U64 => number(input.read_data_u64().map_err(missing)? as f64),
        Marker::I8 => number(f64::from(input.read_data_i8().map_err(missing)?)),
        Marker::I16 => number(f64::from(input.read_data_i16().map_err(missing)?)),
        Marker::I32 => number(f64::from(input.read_data_i32().map_err(missing)?)),
        Marker::I64 => number(input.read_data_i64().map_err(missing)? as f64),
        Marker::F32 => number(f64::from(input.read_data_f32().map_err(missing)?)),
        Marker::F64 => number(input.read_data_f64().map_err(missing)?),
        Marker::Null => Ok(Value::Nil),
        Marker::True => Ok(Value::Boolean(true)),
        Marker::False => Ok(Value::Boolean(false)),
        Marker::FixStr(len) => string(lua, input, u32::from(len)),
        Marker::Str8 => {
            let len = input.read_data_u8().map_err(missing)?;
            string(lua, input, u32::from(len))
        }
        Marker::Str16 => {
            let len = input.read_data_u16().map_err(missing)?;
            string(lua, input, u32::from(len))
        }
        Marker::Str32 => {
            let len = input.read_data_u32().map_err(missing)?;
            string(lua, input, len)
        }
        Marker::FixArray(len) => array(lua, input, u32::from(len), depth),
        Marker::Array16 => {
            let len = input.read_data_u16().map_err(missing)?;
            array(lua, input, u32::from(len), depth)
        }
        Marker::Array32 => {
            let len = input.read_data_u32().map_err(missing)?;
            array(lua, input, len, depth)
        }
        Marker::FixMap(len) => map(lua, input, u32::from(len), depth),
        Marker::Map16 => {
            let len = input.read_data_u16().map_err(missing)?;
            map(lua, input, u32::from(len), depth)
        }
        Marker::Map32 => {
            let len = input.read_data_u32().map_err(missing)?;
            map(lua, input, len, depth)
        }
        _ => Err(Unpack::BadFormat),
    }
}

fn string(lua: &Lua, input: &mut &[u8], len: u32) -> Result<Value, Unpack> {
    let len = len as usize;
    if input.len() < len {
        return Err(Unpack::Missing);
    }
    let (bytes, rest) = input.split_at(len);
    *input = rest;
    Ok(Value::String(lua.create_string(bytes)?))
}

/// Elements of an array or entries of a map claimed by a header: at least a byte each, so
/// a header longer than the input is cut short before anything is allocated for it.
fn check_room(input: &[u8], items: u32) -> Result<(), Unpack> {
    if (input.len() as u64) < u64::from(items) {
        return Err(Unpack::Missing);
    }
    Ok(())
}

fn array(lua: &Lua, input: &mut &[u8], len: u32, depth: usize) -> Result<Value, Unpack> {
    check_room(input, len)?;
    let table = lua.create_table()?;
    for index in 1..=len {
        let value = decode(lua, input, depth + 1)?;
        table.raw_set(index, value)?;
    }
    Ok(Value::Table(table))
}

fn map(lua: &Lua, input: &mut &[u8], len: u32, depth: usize) -> Result<Value, Unpack> {
    check_room(input, len.saturating_mul(2))?;
    let table = lua.create_table()?;
    for _ in 0..len {
        let key = decode(lua, input, depth + 1)?;
        let value = decode(lua, input, depth + 1)?;
        match key {
            Value::Nil => return Err(Unpack::BadKey("table index is nil")),
            Value::Number(x) if x.is_nan() => return Err(Unpack::BadKey("table index is NaN")),
            key => table.raw_set(key, value)?,
        }
    }
    Ok(Value::Table(table))
}
