//! BITFIELD and BITFIELD_RO: integers of 1 to 64 bits at any bit offset of a string, read,
//! written and incremented with Redis 7.0's overflow rules (WRAP, SAT, FAIL), its order of
//! checks and its quirks: a write creates or grows the string to its farthest field even
//! when every write fails with FAIL, and an unsigned SET of a negative number saturates
//! upwards (the number is read as its 64-bit two's complement).

use tailstore_resp::Reply;

use super::{is, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::notifications;

const BAD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";

#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy)]
enum Action {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One operation: a field of `bits` bits at bit `offset`, signed or not.
#[derive(Clone, Copy)]
struct Op {
    action: Action,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

pub fn bitfield(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, false)
}

pub fn bitfield_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, true)
}

fn run(ctx: &mut Ctx, args: &[Vec<u8>], read_only: bool) -> Outcome {
    let key = &args[1];
    let ops = parse_ops(&args[2..], ctx.ks.max_bulk() as u64)?;
    let last_written = ops
        .iter()
        .filter(|op| !matches!(op.action, Action::Get))
        .map(|op| op.offset + u64::from(op.bits) - 1)
        .max();
    let Some(last_written) = last_written else {
        // Only reads: a missing key reads as zeros and is not created (a read lookup, as
        // Redis's for a BITFIELD of GETs).
        return read_only_fields(ctx, key, &ops);
    };
    if read_only {
        return Err(Fault::err(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let written_end = (last_written >> 3) as usize + 1;
    let first = ops
        .iter()
        .map(|op| (op.offset >> 3) as usize)
        .min()
        .unwrap_or(0);
    let span_end = ops.iter().map(field_end).max().unwrap_or(0);
    // One past the bytes every operation reads or writes in a string of `total` bytes, cut at
    // its end unless a write grows it: only their parts (and part 0 if it grows) are read
    // and rewritten.
    let bytes_end = |total: usize| written_end.max(span_end.min(total));
    let (replies, changes) = match ctx.string_total(key)? {
        Some((meta, total)) if ctx.patches_in_place(total, first, bytes_end(total) - first) => {
            let end = bytes_end(total);
            let mut bytes = ctx.string_bytes(&meta, total, first..end)?;
            bytes.resize(end - first, 0);
            let grown = total < written_end;
            let (replies, changes) = run_ops(&mut bytes, &ops, first, grown);
            if grown || changes > 0 {
                ctx.patch_string(key, meta, total, first, &bytes)?;
            }
            (replies, changes)
        }
        found => {
            let existed = found.is_some();
            let mut value = ctx.whole_string(found)?;
            let grown = value.len() < written_end;
            if grown {
                ctx.check_commit_room(written_end)?;
                value.resize(written_end, 0);
            }
            let dirty = !existed || grown;
            let (replies, changes) = run_ops(&mut value, &ops, 0, dirty);
            if dirty || changes > 0 {
                ctx.put_string(key, &value, None)?;
            }
            (replies, changes)
        }
    };
    if changes > 0 {
        ctx.notify(notifications::STRING, "setbit", key);
    }
    Ok(Reply::Array(replies))
}

/// One past the last byte of `op`'s field.
fn field_end(op: &Op) -> usize {
    ((op.offset + u64::from(op.bits) - 1) >> 3) as usize + 1
}

/// Runs `ops` over `bytes`, the string's bytes from byte `first` on: their replies, and how
/// many writes changed the string. As Redis 7 counts changes: a write that an overflow
/// refused (FAIL: a nil reply) changed nothing, nor did one that left its field as it was,
/// unless the command created or grew the string (`dirty`).
fn run_ops(bytes: &mut [u8], ops: &[Op], first: usize, dirty: bool) -> (Vec<Reply>, usize) {
    let mut changes = 0;
    let mut replies = Vec::with_capacity(ops.len());
    for op in ops {
        let op = Op {
            offset: op.offset - 8 * first as u64,
            ..*op
        };
        let old = read_bits(bytes, op.offset, op.bits);
        let reply = apply(bytes, &op);
        let written = !matches!(op.action, Action::Get) && reply != Reply::Null;
        if written && (dirty || read_bits(bytes, op.offset, op.bits) != old) {
            changes += 1;
        }
        replies.push(reply);
    }
    (replies, changes)
}

/// A BITFIELD of GETs only: each reads the bytes that hold its field (at most nine), from
/// the parts that hold them, not the whole string.
fn read_only_fields(ctx: &mut Ctx, key: &[u8], ops: &[Op]) -> Outcome {
    let Some((meta, total)) = ctx.read_string_total(key)? else {
        return Ok(Reply::Array(ops.iter().map(|op| get(&[], op)).collect()));
    };
    let mut replies = Vec::with_capacity(ops.len());
    for op in ops {
        let first = (op.offset >> 3) as usize;
        let last = ((op.offset + u64::from(op.bits) - 1) >> 3) as usize;
        let bytes = ctx.string_bytes(&meta, total, first..last + 1)?;
        // The field's offset in the bytes read; past them, the string reads as zeros.
        let field = Op {
            offset: op.offset & 7,
            ..*op
        };
        replies.push(get(&bytes, &field));
    }
    Ok(Reply::Array(replies))
}

/// The operations in order, with the OVERFLOW in force for each; errors as Redis checks
/// them, operation by operation. A field's byte must lie inside `max_bytes`
/// (`proto-max-bulk-len`).
fn parse_ops(args: &[Vec<u8>], max_bytes: u64) -> Result<Vec<Op>, Fault> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut at = 0;
    while at < args.len() {
        let left = args.len() - at - 1;
        let name = &args[at];
        // `None`: GET; else how the amount after the field makes the operation.
        let write: Option<fn(i64) -> Action> = if is(name, "get") && left >= 2 {
            None
        } else if is(name, "set") && left >= 3 {
            Some(Action::Set)
        } else if is(name, "incrby") && left >= 3 {
            Some(Action::IncrBy)
        } else if is(name, "overflow") && left >= 1 {
            overflow = parse_overflow(&args[at + 1])?;
            at += 2;
            continue;
        } else {
            return Err(Fault::err(SYNTAX));
        };
        let (signed, bits) = parse_type(&args[at + 1])?;
        let offset = parse_offset(&args[at + 2], bits, max_bytes)?;
        let action = match write {
            None => Action::Get,
            Some(make) => make(
                parse_int(&args[at + 3])
                    .map_err(|_| Fault::err("ERR value is not an integer or out of range"))?,
            ),
        };
        ops.push(Op {
            action,
            signed,
            bits,
            offset,
            overflow,
        });
        at += if write.is_some() { 4 } else { 3 };
    }
    Ok(ops)
}

fn parse_overflow(arg: &[u8]) -> Result<Overflow, Fault> {
    if is(arg, "wrap") {
        Ok(Overflow::Wrap)
    } else if is(arg, "sat") {
        Ok(Overflow::Sat)
    } else if is(arg, "fail") {
        Ok(Overflow::Fail)
    } else {
        Err(Fault::err("ERR Invalid OVERFLOW type specified"))
    }
}

/// `i1`…`i64` or `u1`…`u63` (lower case only, as Redis).
fn parse_type(arg: &[u8]) -> Result<(bool, u32), Fault> {
    let bad = || Fault::err(BAD_TYPE);
    let (signed, digits) = match arg.split_first() {
        Some((b'i', digits)) => (true, digits),
        Some((b'u', digits)) => (false, digits),
        _ => return Err(bad()),
    };
    let bits = parse_int(digits).map_err(|_| bad())?;
    let most = if signed { 64 } else { 63 };
    match u32::try_from(bits) {
        Ok(bits) if (1..=most).contains(&bits) => Ok((signed, bits)),
        _ => Err(bad()),
    }
}

/// A bit offset, or `#N`: the N-th field of this width.
fn parse_offset(arg: &[u8], bits: u32, max_bytes: u64) -> Result<u64, Fault> {
    let bad = || Fault::err(BAD_OFFSET);
    let (index, digits) = match arg.split_first() {
        Some((b'#', digits)) => (true, digits),
        _ => (false, arg),
    };
    let number = parse_int(digits).map_err(|_| bad())?;
    let offset = if index {
        number.checked_mul(i64::from(bits)).ok_or_else(bad)?
    } else {
        number
    };
    u64::try_from(offset)
        .ok()
        .filter(|offset| offset >> 3 < max_bytes)
        .ok_or_else(bad)
}

/// GET: the field, the string zero-padded past its end.
fn get(value: &[u8], op: &Op) -> Reply {
    let raw = read_bits(value, op.offset, op.bits);
    Reply::Int(if op.signed {
        sign_extend(raw, op.bits)
    } else {
        raw as i64
    })
}

/// SET or INCRBY on `value` (long enough): the reply, nil when FAIL refused the write.
fn apply(value: &mut [u8], op: &Op) -> Reply {
    if matches!(op.action, Action::Get) {
        return get(value, op);
    }
    let old = read_bits(value, op.offset, op.bits);
    let written = if op.signed {
        signed_change(sign_extend(old, op.bits), op)
    } else {
        unsigned_change(old, op)
    };
    match written {
        Some((new, reply)) => {
            write_bits(value, op.offset, op.bits, new);
            Reply::Int(reply)
        }
        None => Reply::Null,
    }
}

/// The bits to write and the reply (the old value for SET, the new one for INCRBY), or
/// `None` on an overflow under FAIL.
fn signed_change(old: i64, op: &Op) -> Option<(u64, i64)> {
    let (base, incr, reply_old) = match op.action {
        Action::Set(new) => (new, 0, true),
        Action::IncrBy(incr) => (old, incr, false),
        Action::Get => return None,
    };
    let new = match signed_overflow(base, incr, op.bits, op.overflow) {
        Checked::Fits => base.wrapping_add(incr),
        Checked::Limited(limit) => limit,
        Checked::Refused => return None,
    };
    Some((new as u64, if reply_old { old } else { new }))
}

fn unsigned_change(old: u64, op: &Op) -> Option<(u64, i64)> {
    let (base, incr, reply_old) = match op.action {
        Action::Set(new) => (new as u64, 0, true),
        Action::IncrBy(incr) => (old, incr, false),
        Action::Get => return None,
    };
    let new = match unsigned_overflow(base, incr, op.bits, op.overflow) {
        Checked::Fits => base.wrapping_add(incr as u64),
        Checked::Limited(limit) => limit as u64,
        Checked::Refused => return None,
    };
    Some((new, if reply_old { old as i64 } else { new as i64 }))
}

enum Checked {
    Fits,
    /// Overflowed, and WRAP or SAT gives this value.
    Limited(i64),
    /// Overflowed under FAIL.
    Refused,
}

fn limited(overflow: Overflow, wrapped: impl FnOnce() -> i64, saturated: i64) -> Checked {
    match overflow {
        Overflow::Wrap => Checked::Limited(wrapped()),
        Overflow::Sat => Checked::Limited(saturated),
        Overflow::Fail => Checked::Refused,
    }
}

/// Redis's `checkSignedBitfieldOverflow`, its comparisons kept as they are.
fn signed_overflow(value: i64, incr: i64, bits: u32, overflow: Overflow) -> Checked {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let wrap = || {
        let sum = (value as u64).wrapping_add(incr as u64);
        if bits == 64 {
            return sum as i64;
        }
        let mask = u64::MAX << bits;
        let sign = 1u64 << (bits - 1);
        (if sum & sign != 0 {
            sum | mask
        } else {
            sum & !mask
        }) as i64
    };
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr)
    {
        limited(overflow, wrap, max)
    } else if value < min
        || (bits != 64 && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        limited(overflow, wrap, min)
    } else {
        Checked::Fits
    }
}

/// Redis's `checkUnsignedBitfieldOverflow` (fields of at most 63 bits).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, overflow: Overflow) -> Checked {
    let max = (1u64 << bits) - 1;
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrap = || (value.wrapping_add(incr as u64) & !(u64::MAX << bits)) as i64;
    if value > max || (incr > 0 && incr > max_incr) {
        limited(overflow, wrap, max as i64)
    } else if incr < 0 && incr < min_incr {
        limited(overflow, wrap, 0)
    } else {
        Checked::Fits
    }
}

/// `bits` bits from bit `offset` (bit 0: the first byte's most significant), most
/// significant first; zeros past the end of `value`.
fn read_bits(value: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0, |field, at| {
        let bit = offset + at;
        let byte = value.get((bit >> 3) as usize).copied().unwrap_or(0);
        (field << 1) | u64::from(byte >> (7 - (bit & 7)) & 1)
    })
}

fn write_bits(value: &mut [u8], offset: u64, bits: u32, field: u64) {
    for at in 0..u64::from(bits) {
        let bit = offset + at;
        let mask = 0x80u8 >> (bit & 7);
        let byte = &mut value[(bit >> 3) as usize];
        if field >> (u64::from(bits) - 1 - at) & 1 == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

fn sign_extend(raw: u64, bits: u32) -> i64 {
    if bits < 64 && raw & (1u64 << (bits - 1)) != 0 {
        (raw | (u64::MAX << bits)) as i64
    } else {
        raw as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_and_write_across_bytes_most_significant_bit_first() {
        let mut value = vec![0u8; 3];
        write_bits(&mut value, 5, 10, 0b10_1100_0111);
        assert_eq!(value, [0b0000_0101, 0b1000_1110, 0]);
        assert_eq!(read_bits(&value, 5, 10), 0b10_1100_0111);
        assert_eq!(read_bits(&value, 20, 8), 0, "zeros past the end");
        assert_eq!(sign_extend(0b1111_1111, 8), -1);
        assert_eq!(sign_extend(0b0111_1111, 8), 127);
    }

    #[test]
    fn overflow_rules_are_redis_own() {
        // i8: 127 + 1 wraps to -128, saturates at 127, fails.
        assert!(matches!(
            signed_overflow(127, 1, 8, Overflow::Wrap),
            Checked::Limited(-128)
        ));
        assert!(matches!(
            signed_overflow(127, 1, 8, Overflow::Sat),
            Checked::Limited(127)
        ));
        assert!(matches!(
            signed_overflow(127, 1, 8, Overflow::Fail),
            Checked::Refused
        ));
        assert!(matches!(
            signed_overflow(-128, -1, 8, Overflow::Sat),
            Checked::Limited(-128)
        ));
        assert!(matches!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            Checked::Limited(i64::MIN)
        ));
        // u8: SET -1 is 2^64 - 1, above the maximum: SAT gives 255, not 0.
        assert!(matches!(
            unsigned_overflow(u64::MAX, 0, 8, Overflow::Sat),
            Checked::Limited(255)
        ));
        assert!(matches!(
            unsigned_overflow(0, -1, 8, Overflow::Wrap),
            Checked::Limited(255)
        ));
        assert!(matches!(
            unsigned_overflow(0, -1, 8, Overflow::Sat),
            Checked::Limited(0)
        ));
        assert!(matches!(
            unsigned_overflow(200, 55, 8, Overflow::Fail),
            Checked::Fits
        ));
    }
}
