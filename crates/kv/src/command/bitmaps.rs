//! Bitmaps, strings read and written bit by bit: SETBIT, GETBIT, BITCOUNT, BITPOS and
//! BITOP, as Redis 7.0 answers them (ranges in bytes or, with BIT, in bits). Bit 0 is the
//! most significant bit of the first byte. A string is read whole and written whole, as
//! SETRANGE does.

use tailstore_resp::Reply;

use super::{is, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::notifications;

/// The largest string a bit offset may reach: Redis's `proto-max-bulk-len` default.
const MAX_BYTES: u64 = 512 * 1024 * 1024;

/// A bit offset as Redis reads it: a strict integer from 0, inside 512 MiB.
fn parse_offset(arg: &[u8]) -> Result<u64, Fault> {
    parse_int(arg)
        .ok()
        .and_then(|offset| u64::try_from(offset).ok())
        .filter(|offset| offset >> 3 < MAX_BYTES)
        .ok_or_else(|| Fault::err("ERR bit offset is not an integer or out of range"))
}

fn bit_at(value: &[u8], offset: u64) -> bool {
    let byte = value.get((offset >> 3) as usize).copied().unwrap_or(0);
    byte & (0x80 >> (offset & 7)) != 0
}

/// SETBIT key offset 0|1: the bit's previous value. The string grows (zero-filled) to
/// reach the offset and keeps its deadline.
pub fn setbit(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let key = &args[1];
    let offset = parse_offset(&args[2])?;
    let on = match parse_int(&args[3]) {
        Ok(0) => false,
        Ok(1) => true,
        _ => return Err(Fault::err("ERR bit is not an integer or out of range")),
    };
    let stored = ctx.string(key)?;
    let existed = stored.is_some();
    let mut value = stored.unwrap_or_default();
    let byte = (offset >> 3) as usize;
    let grown = value.len() <= byte;
    if grown {
        ctx.check_commit_room(byte + 1)?;
        value.resize(byte + 1, 0);
    }
    let mask = 0x80 >> (offset & 7);
    let was = value[byte] & mask != 0;
    // As Redis 7: a bit set to what it was changes nothing (no write, no event, no
    // WATCH's failure).
    if existed && !grown && was == on {
        return Ok(Reply::Int(i64::from(was)));
    }
    if on {
        value[byte] |= mask;
    } else {
        value[byte] &= !mask;
    }
    ctx.put_string(key, &value, None)?;
    ctx.notify(notifications::STRING, "setbit", key);
    Ok(Reply::Int(i64::from(was)))
}

/// GETBIT key offset: 0 past the end, or for no key.
pub fn getbit(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let offset = parse_offset(&args[2])?;
    let value = ctx.string(&args[1])?.unwrap_or_default();
    Ok(Reply::Int(i64::from(bit_at(&value, offset))))
}

/// A `start end [BYTE|BIT]` range, as bits `first..=last` of a string of `len` bytes;
/// `None` if empty. Redis's clamps: negative from the end, then into the string.
fn bit_range(start: i64, end: i64, len: usize, in_bits: bool) -> Option<(u64, u64)> {
    let total = if in_bits { len as i64 * 8 } else { len as i64 };
    let clamp = |index: i64| {
        if index < 0 {
            (total + index).max(0)
        } else {
            index
        }
    };
    let (start, end) = (clamp(start), clamp(end).min(total - 1));
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if in_bits {
        (start, end)
    } else {
        (start * 8, end * 8 + 7)
    })
}

/// BYTE or BIT, the unit of a range.
fn parse_unit(arg: Option<&Vec<u8>>) -> Result<bool, Fault> {
    match arg {
        None => Ok(false),
        Some(unit) if is(unit, "bit") => Ok(true),
        Some(unit) if is(unit, "byte") => Ok(false),
        Some(_) => Err(Fault::err(SYNTAX)),
    }
}

fn count_ones(value: &[u8], (first, last): (u64, u64)) -> u64 {
    let (first_byte, last_byte) = ((first >> 3) as usize, (last >> 3) as usize);
    let whole: u64 = value[first_byte..=last_byte]
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    // Bits of the edge bytes outside the range.
    let before = value[first_byte] & !(0xFFu8 >> (first & 7));
    let after = value[last_byte] & (0x7Fu8 >> (last & 7));
    whole - u64::from(before.count_ones()) - u64::from(after.count_ones())
}

/// BITCOUNT key [start end [BYTE|BIT]]: 0 for no key, whatever the range says.
pub fn bitcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let Some(value) = ctx.string(&args[1])? else {
        return Ok(Reply::Int(0));
    };
    let range = match args.len() {
        2 => bit_range(0, -1, value.len(), false),
        4 | 5 => {
            let (start, end) = (parse_int(&args[2])?, parse_int(&args[3])?);
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Int(0));
            }
            let in_bits = parse_unit(args.get(4))?;
            bit_range(start, end, value.len(), in_bits)
        }
        _ => return Err(Fault::err(SYNTAX)),
    };
    Ok(Reply::Int(
        range.map_or(0, |range| count_ones(&value, range)) as i64,
    ))
}

/// BITPOS key 0|1 [start [end [BYTE|BIT]]]: the first bit of that value in the range, or
/// -1. No key is all zeros; a search for 0 without an end finds the bit after the string
/// when the string is all ones (its zero padding).
pub fn bitpos(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let wanted = match parse_int(&args[2])? {
        0 => false,
        1 => true,
        _ => return Err(Fault::err("ERR The bit argument must be 1 or 0.")),
    };
    let Some(value) = ctx.string(&args[1])? else {
        return Ok(Reply::Int(if wanted { -1 } else { 0 }));
    };
    if args.len() > 6 {
        return Err(Fault::err(SYNTAX));
    }
    let start = args
        .get(3)
        .map(|arg| parse_int(arg))
        .transpose()?
        .unwrap_or(0);
    let in_bits = parse_unit(args.get(5))?;
    let end = args.get(4).map(|arg| parse_int(arg)).transpose()?;
    let Some((first, last)) = bit_range(start, end.unwrap_or(-1), value.len(), in_bits) else {
        return Ok(Reply::Int(-1));
    };
    let found = (first..=last).find(|&bit| bit_at(&value, bit) == wanted);
    Ok(Reply::Int(match found {
        Some(bit) => bit as i64,
        None if !wanted && end.is_none() => last as i64 + 1,
        None => -1,
    }))
}

/// BITOP AND|OR|XOR|NOT destkey key [key …]: the result's length; the destination is
/// replaced (no deadline), or deleted when every source is empty.
pub fn bitop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let op = args[1].to_ascii_lowercase();
    if !matches!(op.as_slice(), b"and" | b"or" | b"xor" | b"not") {
        return Err(Fault::err(SYNTAX));
    }
    if op == b"not" && args.len() != 4 {
        return Err(Fault::err(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    // A key of another kind is WRONGTYPE (from `Ctx::string`) before anything is written.
    let mut sources = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        sources.push(ctx.read_string(key)?.unwrap_or_default());
    }
    let len = sources.iter().map(Vec::len).max().unwrap_or(0);
    let destination = &args[2];
    if len == 0 {
        if let Some(old) = ctx.meta(destination)? {
            ctx.remove(destination, &old)?;
            ctx.notify(notifications::GENERIC, "del", destination);
        }
        return Ok(Reply::Int(0));
    }
    // No check of the result's size: it is no longer than its longest source, which is
    // stored already (a long one written in pieces, decision 148).
    let byte = |source: &Vec<u8>, at: usize| source.get(at).copied().unwrap_or(0);
    let result: Vec<u8> = (0..len)
        .map(|at| {
            let mut bytes = sources.iter().map(|source| byte(source, at));
            let first = bytes.next().unwrap_or(0);
            match op.as_slice() {
                b"and" => bytes.fold(first, |a, b| a & b),
                b"or" => bytes.fold(first, |a, b| a | b),
                b"xor" => bytes.fold(first, |a, b| a ^ b),
                _ => !first,
            }
        })
        .collect();
    ctx.put_string(destination, &result, Some(0))?;
    ctx.notify(notifications::STRING, "set", destination);
    Ok(Reply::Int(len as i64))
}
