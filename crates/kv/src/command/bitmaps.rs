//! Bitmaps, strings read and written bit by bit: SETBIT, GETBIT, BITCOUNT, BITPOS and
//! BITOP, as Redis 7.0 answers them (ranges in bytes or, with BIT, in bits). Bit 0 is the
//! most significant bit of the first byte. GETBIT and a range of BITCOUNT or BITPOS read
//! only the parts of the string that hold their bytes, a whole-string count or search reads
//! it a part at a time, and a SETBIT rewrites only the part it touches (and part 0 if it
//! grows the string); a SETBIT that creates the string, and BITOP, write it whole.

use std::collections::HashMap;
use std::ops::ControlFlow;

use tailstore_resp::Reply;

use super::{is, parse_int, strings, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::{notifications, KeyMeta, Kind};

/// A bit offset as Redis reads it: a strict integer from 0 whose byte lies inside
/// `proto-max-bulk-len` (`serve --max-bulk`).
fn parse_offset(ctx: &Ctx, arg: &[u8]) -> Result<u64, Fault> {
    let max_bytes = ctx.ks.max_bulk() as u64;
    parse_int(arg)
        .ok()
        .and_then(|offset| u64::try_from(offset).ok())
        .filter(|offset| offset >> 3 < max_bytes)
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
    let offset = parse_offset(ctx, &args[2])?;
    let on = match parse_int(&args[3]) {
        Ok(0) => false,
        Ok(1) => true,
        _ => return Err(Fault::err("ERR bit is not an integer or out of range")),
    };
    let byte = (offset >> 3) as usize;
    let mask = 0x80 >> (offset & 7);
    let was = match ctx.string_total(key)? {
        Some((meta, total)) if ctx.patches_in_place(total, byte, 1) => {
            setbit_in_place(ctx, key, meta, total, byte, mask, on)?
        }
        found => setbit_whole(ctx, key, found, byte, mask, on)?,
    };
    Ok(Reply::Int(i64::from(was)))
}

/// SETBIT of a bit in the string `meta` of `total` bytes, or just past its end: only the
/// part that holds it is read and rewritten (with part 0, and the zeros before the bit,
/// if the string grows). The bit's previous value (0: past the end).
fn setbit_in_place(
    ctx: &mut Ctx,
    key: &[u8],
    meta: KeyMeta,
    total: usize,
    byte: usize,
    mask: u8,
    on: bool,
) -> Result<bool, Fault> {
    let old = ctx.string_bytes(&meta, total, byte..byte + 1)?;
    let old = old.first().copied().unwrap_or(0);
    let was = old & mask != 0;
    // As Redis 7: a bit set to what it was inside the string changes nothing (no write, no
    // event, no WATCH's failure); past the end, the string still grows.
    if was == on && byte < total {
        return Ok(was);
    }
    let new = if on { old | mask } else { old & !mask };
    ctx.patch_string(key, meta, total, byte, &[new])?;
    ctx.notify(notifications::STRING, "setbit", key);
    Ok(was)
}

/// SETBIT that creates the string, or grows it by more than a piece to reach `byte`:
/// written whole (`put_string` writes it in pieces). The bit's previous value (0: past the
/// end).
fn setbit_whole(
    ctx: &mut Ctx,
    key: &[u8],
    found: Option<(KeyMeta, usize)>,
    byte: usize,
    mask: u8,
    on: bool,
) -> Result<bool, Fault> {
    let mut value = ctx.whole_string(found)?;
    if value.len() <= byte {
        ctx.check_commit_room(byte + 1)?;
        value.resize(byte + 1, 0);
    }
    let was = value[byte] & mask != 0;
    if on {
        value[byte] |= mask;
    } else {
        value[byte] &= !mask;
    }
    ctx.put_string(key, &value, None)?;
    ctx.notify(notifications::STRING, "setbit", key);
    Ok(was)
}

/// GETBIT key offset: 0 past the end, or for no key. Reads the one byte's part.
pub fn getbit(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let offset = parse_offset(ctx, &args[2])?;
    let byte = (offset >> 3) as usize;
    let value = match ctx.string_total(&args[1])? {
        Some((meta, total)) => ctx.string_bytes(&meta, total, byte..byte + 1)?,
        None => Vec::new(),
    };
    Ok(Reply::Int(i64::from(bit_at(&value, offset & 7))))
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

/// The bytes that hold bits `first..=last`.
fn byte_span((first, last): (u64, u64)) -> std::ops::Range<usize> {
    (first >> 3) as usize..(last >> 3) as usize + 1
}

/// The ones among bits `first..=last` that lie in `bytes`, which start at byte `at` of the
/// string and lie inside the range's bytes.
fn count_ones(bytes: &[u8], at: usize, (first, last): (u64, u64)) -> u64 {
    let whole: u64 = bytes.iter().map(|b| u64::from(b.count_ones())).sum();
    let span = byte_span((first, last));
    // Bits of the edge bytes outside the range, where this run holds them.
    let before = match span.start.checked_sub(at).and_then(|i| bytes.get(i)) {
        Some(byte) => byte & !(0xFFu8 >> (first & 7)),
        None => 0,
    };
    let after = match (span.end - 1).checked_sub(at).and_then(|i| bytes.get(i)) {
        Some(byte) => byte & (0x7Fu8 >> (last & 7)),
        None => 0,
    };
    whole - u64::from(before.count_ones()) - u64::from(after.count_ones())
}

/// BITCOUNT key [start end [BYTE|BIT]]: 0 for no key, whatever the range says. Reads the
/// parts that hold the range, one at a time.
pub fn bitcount(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let Some((meta, total)) = ctx.string_total(&args[1])? else {
        return Ok(Reply::Int(0));
    };
    let range = match args.len() {
        2 => bit_range(0, -1, total, false),
        4 | 5 => {
            let (start, end) = (parse_int(&args[2])?, parse_int(&args[3])?);
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Int(0));
            }
            let in_bits = parse_unit(args.get(4))?;
            bit_range(start, end, total, in_bits)
        }
        _ => return Err(Fault::err(SYNTAX)),
    };
    let Some(range) = range else {
        return Ok(Reply::Int(0));
    };
    let mut ones = 0;
    ctx.ks.visit_value_range(
        ctx.txn,
        meta.id,
        b"",
        total,
        byte_span(range),
        |at, bytes| {
            ones += count_ones(bytes, at, range);
            ControlFlow::Continue(())
        },
    )?;
    Ok(Reply::Int(ones as i64))
}

/// BITPOS key 0|1 [start [end [BYTE|BIT]]]: the first bit of that value in the range, or
/// -1. No key is all zeros; a search for 0 without an end finds the bit after the string
/// when the string is all ones (its zero padding). Reads the range's parts in order until
/// it finds the bit.
pub fn bitpos(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let wanted = match parse_int(&args[2])? {
        0 => false,
        1 => true,
        _ => return Err(Fault::err("ERR The bit argument must be 1 or 0.")),
    };
    let Some((meta, total)) = ctx.string_total(&args[1])? else {
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
    let Some((first, last)) = bit_range(start, end.unwrap_or(-1), total, in_bits) else {
        return Ok(Reply::Int(-1));
    };
    let mut found = None;
    let span = byte_span((first, last));
    ctx.ks
        .visit_value_range(ctx.txn, meta.id, b"", total, span, |at, bytes| {
            found = find_bit(bytes, at, (first, last), wanted);
            if found.is_some() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
    Ok(Reply::Int(match found {
        Some(bit) => bit as i64,
        None if !wanted && end.is_none() => last as i64 + 1,
        None => -1,
    }))
}

/// The first bit of value `wanted` among bits `first..=last` that lie in `bytes`, which
/// start at byte `at` of the string. Whole bytes that cannot hold it are skipped.
fn find_bit(bytes: &[u8], at: usize, (first, last): (u64, u64), wanted: bool) -> Option<u64> {
    if bytes.is_empty() {
        return None;
    }
    let skip = if wanted { 0x00 } else { 0xFF };
    let base = at as u64 * 8;
    let from = first.max(base);
    let to = last.min(base + bytes.len() as u64 * 8 - 1);
    let mut bit = from;
    while bit <= to {
        let byte = bytes[((bit - base) >> 3) as usize];
        if bit & 7 == 0 && byte == skip && bit + 7 <= to {
            bit += 8;
            continue;
        }
        if bit_at(bytes, bit - base) == wanted {
            return Some(bit);
        }
        bit += 1;
    }
    None
}

/// BITOP AND|OR|XOR|NOT destkey key [key …]: the result's length; the destination is
/// replaced (no deadline), or deleted when every source is empty.
///
/// Each named key is looked up as Redis does (a read lookup per name), but each distinct
/// key is read once and folded into the result before the next is read: a BITOP naming one
/// large key many times holds the result and one source, not a copy per name.
pub fn bitop(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let op = BitOp::parse(&args[1])?;
    if op == BitOp::Not && args.len() != 4 {
        return Err(Fault::err(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let names = &args[3..];
    // A key of another kind is WRONGTYPE before anything is read or written.
    let mut metas = Vec::with_capacity(names.len());
    for name in names {
        metas.push(ctx.read_meta_of(name, Kind::String)?);
    }
    let len = metas
        .iter()
        .flatten()
        .map(|meta| meta.len.max(0) as usize)
        .max();
    let len = len.unwrap_or(0);
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
    let mut folding = Folding::new(op, len);
    for (first, times) in distinct(names) {
        let source = match &metas[first] {
            Some(meta) => strings::string_of(ctx, meta)?.unwrap_or_default(),
            None => Vec::new(),
        };
        folding.add(&source, times);
    }
    ctx.put_string(destination, &folding.result, Some(0))?;
    ctx.notify(notifications::STRING, "set", destination);
    Ok(Reply::Int(len as i64))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

impl BitOp {
    fn parse(arg: &[u8]) -> Result<BitOp, Fault> {
        Ok(match arg.to_ascii_lowercase().as_slice() {
            b"and" => BitOp::And,
            b"or" => BitOp::Or,
            b"xor" => BitOp::Xor,
            b"not" => BitOp::Not,
            _ => return Err(Fault::err(SYNTAX)),
        })
    }
}

/// Each distinct name of `names`: the position of its first mention and how many times it
/// is named, in the order of first mentions.
fn distinct(names: &[Vec<u8>]) -> Vec<(usize, usize)> {
    let mut at: HashMap<&[u8], usize> = HashMap::with_capacity(names.len());
    let mut found: Vec<(usize, usize)> = Vec::new();
    for (position, name) in names.iter().enumerate() {
        match at.get(name.as_slice()) {
            Some(&index) => found[index].1 += 1,
            None => {
                at.insert(name, found.len());
                found.push((position, 1));
            }
        }
    }
    found
}

/// BITOP's result built one source at a time, each source shorter than the result padded
/// with zero bytes, as Redis reads it. The operations are associative and commutative, so
/// the sources may come in any order; a source named several times counts once in AND and
/// OR and cancels out in pairs in XOR.
struct Folding {
    op: BitOp,
    result: Vec<u8>,
}

impl Folding {
    fn new(op: BitOp, len: usize) -> Folding {
        // The identity of AND is all ones; of OR and XOR all zeros (NOT overwrites it).
        let fill = if op == BitOp::And { 0xFF } else { 0 };
        Folding {
            op,
            result: vec![fill; len],
        }
    }

    /// Folds in `source`, named `times` times.
    fn add(&mut self, source: &[u8], times: usize) {
        let (covered, past) = self.result.split_at_mut(source.len());
        match self.op {
            BitOp::And => {
                combine(covered, source, |r, s| r & s);
                past.fill(0);
            }
            BitOp::Or => combine(covered, source, |r, s| r | s),
            BitOp::Xor if times % 2 == 1 => combine(covered, source, |r, s| r ^ s),
            BitOp::Xor => {}
            BitOp::Not => combine(covered, source, |_, s| !s),
        }
    }
}

/// `result[i] = f(result[i], source[i])` over two slices of one length, eight bytes at a
/// time (the operations are bitwise, so the bytes' order in a word does not matter).
fn combine(result: &mut [u8], source: &[u8], f: impl Fn(u64, u64) -> u64) {
    let mut result_words = result.chunks_exact_mut(8);
    let mut source_words = source.chunks_exact(8);
    for (r, s) in (&mut result_words).zip(&mut source_words) {
        r.copy_from_slice(&f(word(r), word(s)).to_ne_bytes());
    }
    let rest = result_words.into_remainder().iter_mut();
    for (r, s) in rest.zip(source_words.remainder()) {
        // The low byte of the word's result is the byte's.
        *r = f(u64::from(*r), u64::from(*s)) as u8;
    }
}

fn word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes);
    u64::from_ne_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Redis's byte-wise BITOP over every named source, in order: each output byte starts
    /// from the first source's (NOT: inverted) and takes in the others', a missing byte 0.
    fn reference(op: BitOp, sources: &[&[u8]]) -> Vec<u8> {
        let len = sources.iter().map(|s| s.len()).max().unwrap_or(0);
        let byte = |source: &[u8], at: usize| source.get(at).copied().unwrap_or(0);
        (0..len)
            .map(|at| {
                let mut bytes = sources.iter().map(|source| byte(source, at));
                let first = bytes.next().unwrap_or(0);
                match op {
                    BitOp::And => bytes.fold(first, |a, b| a & b),
                    BitOp::Or => bytes.fold(first, |a, b| a | b),
                    BitOp::Xor => bytes.fold(first, |a, b| a ^ b),
                    BitOp::Not => !first,
                }
            })
            .collect()
    }

    /// What `bitop` computes for `names` whose strings `values` holds (absent: missing).
    fn folded(op: BitOp, names: &[Vec<u8>], values: &HashMap<Vec<u8>, Vec<u8>>) -> Vec<u8> {
        let value = |name: &Vec<u8>| values.get(name).cloned().unwrap_or_default();
        let len = names
            .iter()
            .map(|name| value(name).len())
            .max()
            .unwrap_or(0);
        let mut folding = Folding::new(op, len);
        for (first, times) in distinct(names) {
            folding.add(&value(&names[first]), times);
        }
        folding.result
    }

    #[test]
    fn folding_distinct_sources_answers_what_byte_wise_bitop_answers() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(148);
        for round in 0..3000 {
            // Lengths around the word size, some empty; "gone" is never stored.
            let mut values = HashMap::new();
            for name in ["a", "b", "c", "d"] {
                let len = rng.gen_range(0..40);
                let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                values.insert(name.as_bytes().to_vec(), bytes);
            }
            let op = [BitOp::And, BitOp::Or, BitOp::Xor, BitOp::Not][round % 4];
            let count = if op == BitOp::Not {
                1
            } else {
                rng.gen_range(1..8)
            };
            let names: Vec<Vec<u8>> = (0..count)
                .map(|_| ["a", "b", "c", "d", "gone"][rng.gen_range(0..5)].into())
                .collect();
            let sources: Vec<Vec<u8>> = names
                .iter()
                .map(|name| values.get(name).cloned().unwrap_or_default())
                .collect();
            let sources: Vec<&[u8]> = sources.iter().map(Vec::as_slice).collect();
            assert_eq!(
                folded(op, &names, &values),
                reference(op, &sources),
                "{op:?} of {names:?}"
            );
        }
    }

    #[test]
    fn a_key_named_again_is_read_once_and_counted() {
        let names: Vec<Vec<u8>> = ["x", "y", "x", "x", "z", "y"].map(Vec::from).into();
        assert_eq!(distinct(&names), vec![(0, 3), (1, 2), (4, 1)]);
    }
}
