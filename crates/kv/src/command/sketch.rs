//! HyperLogLog sketches in Redis 7.0's byte format (`hyperloglog.c`), so that a sketch is the
//! same string on both servers: GET of a key PFADD built returns Redis's bytes, and a sketch
//! copied from one server to the other counts the same there.
//!
//! # Byte format
//!
//! A 16-byte header: `HYLL`, the encoding (0 dense, 1 sparse), three unused bytes, and the
//! cached cardinality as a little-endian u64 whose top bit set means "stale" (PFADD and
//! PFMERGE set it; a single-key PFCOUNT recomputes and stores the count).
//!
//! 16,384 registers (P = 14) of 6 bits. An element's 64-bit MurmurHash64A (seed
//! `0xadc83b19`) picks register `hash & 16383`; the register keeps the largest "position of
//! the first set bit" of the remaining 50 bits (1–51) seen in its elements.
//!
//! * Dense: 12,288 bytes after the header, register `j` at bits `6j … 6j+5` counted from the
//!   least significant bit of byte 0 (a register may straddle two bytes). 12,304 bytes in all,
//!   exactly: any other length of a dense sketch is not a sketch.
//! * Sparse: run-length opcodes after the header, covering the registers in order:
//!   `00xxxxxx` ZERO, 1–64 zero registers; `01xxxxxx yyyyyyyy` XZERO, 1–16,384 zero
//!   registers (a 14-bit length); `1vvvvvxx` VAL, 1–4 registers holding 1–32. A new sketch
//!   is one XZERO of all 16,384. A sketch turns dense, for good, when a register would pass
//!   32 or when an update would take the sparse string past 3,000 bytes (Redis's default
//!   `hll-sparse-max-bytes`).
//!
//! Redis updates a sparse sketch in place, splitting one opcode into up to three and then
//! merging equal VAL neighbours among up to five opcodes from the one before: the bytes
//! depend on that exact procedure, so [`set_sparse`] follows it step by step.

/// Registers per sketch.
pub const REGISTERS: usize = 1 << P;
const P: u32 = 14;
/// Bits of the hash left once the register index is taken.
const Q: u32 = 64 - P;
const HEADER: usize = 16;
const MAGIC: &[u8; 4] = b"HYLL";
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
/// The only length of a dense sketch.
pub const DENSE_LEN: usize = HEADER + REGISTERS * 6 / 8;
/// Longest a sparse sketch grows before it turns dense (Redis's `hll-sparse-max-bytes`).
const SPARSE_MAX_BYTES: usize = 3000;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
/// 0.5 / ln 2: the estimator's constant for an unbounded number of registers.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
const CACHE_STALE: u8 = 0x80;

const _: () = assert!(DENSE_LEN == 12_304);
const _: () = assert!(REGISTERS == XZERO_MAX_LEN);

/// The stored string is not a sketch: Redis's WRONGTYPE reply for it.
#[derive(Debug, PartialEq)]
pub struct NotSketch;

/// A sketch whose sparse opcodes do not cover the registers exactly: Redis's INVALIDOBJ.
#[derive(Debug, PartialEq)]
pub struct Corrupt;

/// Whether `bytes` are a sketch: long enough for the header, the magic, a known encoding,
/// and a dense one of exactly its length. A sparse one's opcodes are checked when they are
/// walked, as Redis does.
pub fn check(bytes: &[u8]) -> Result<(), NotSketch> {
    let fits = bytes.len() >= HEADER
        && &bytes[..4] == MAGIC
        && bytes[4] <= SPARSE
        && (bytes[4] != DENSE || bytes.len() == DENSE_LEN);
    fits.then_some(()).ok_or(NotSketch)
}

/// A new, empty sketch: sparse, one XZERO over every register, count 0 cached.
pub fn empty() -> Vec<u8> {
    let mut sketch = header(SPARSE);
    push_xzero(&mut sketch, REGISTERS);
    sketch
}

fn header(encoding: u8) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER + 2);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&[encoding, 0, 0, 0]);
    header.extend_from_slice(&[0; 8]);
    header
}

pub fn is_dense(sketch: &[u8]) -> bool {
    sketch[4] == DENSE
}

/// The cached count, if it is not stale.
pub fn cached(sketch: &[u8]) -> Option<u64> {
    let card: [u8; 8] = sketch[8..16].try_into().ok()?;
    (card[7] & CACHE_STALE == 0).then(|| u64::from_le_bytes(card))
}

pub fn set_cache(sketch: &mut [u8], count: u64) {
    sketch[8..16].copy_from_slice(&count.to_le_bytes());
}

pub fn mark_stale(sketch: &mut [u8]) {
    sketch[15] |= CACHE_STALE;
}

/// Adds `element`; `true` if a register grew (the sketch changed).
pub fn add(sketch: &mut Vec<u8>, element: &[u8]) -> Result<bool, Corrupt> {
    let (index, rank) = register_and_rank(element);
    set_register(sketch, index, rank)
}

/// Raises register `index` to `value` if it holds less; `true` if it did.
pub fn set_register(sketch: &mut Vec<u8>, index: usize, value: u8) -> Result<bool, Corrupt> {
    // Up to 63, not 51: a dense sketch's bytes may have been written with SETRANGE, and
    // PFMERGE carries its registers over.
    assert!(index < REGISTERS && value < 64);
    if is_dense(sketch) {
        return Ok(raise_dense(&mut sketch[HEADER..], index, value));
    }
    if value > VAL_MAX_VALUE {
        return promote(sketch, index, value);
    }
    set_sparse(sketch, index, value)
}

/// The register an element lands in, and the position of the first set bit of the hash's
/// other 50 bits (51 when none is set).
fn register_and_rank(element: &[u8]) -> (usize, u8) {
    let hash = murmur_hash_64a(element, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Austin Appleby's MurmurHash64A, reading its 8-byte blocks little-endian (Redis's
/// endian-neutral variant).
fn murmur_hash_64a(data: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = u64::from(seed) ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            h ^= u64::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

fn dense_get(registers: &[u8], index: usize) -> u8 {
    let bit = index * 6;
    let (byte, shift) = (bit / 8, bit % 8);
    // The last register's second byte lies past the end; its bits would be masked away.
    let low = u16::from(registers[byte]);
    let high = u16::from(registers.get(byte + 1).copied().unwrap_or(0));
    (((low | high << 8) >> shift) & 63) as u8
}

fn dense_put(registers: &mut [u8], index: usize, value: u8) {
    let bit = index * 6;
    let (byte, shift) = (bit / 8, bit % 8);
    let mask = 63u16 << shift;
    let bits = u16::from(value) << shift;
    registers[byte] = (registers[byte] & !(mask as u8)) | bits as u8;
    if let Some(next) = registers.get_mut(byte + 1) {
        *next = (*next & !((mask >> 8) as u8)) | (bits >> 8) as u8;
    }
}

fn raise_dense(registers: &mut [u8], index: usize, value: u8) -> bool {
    let grows = value > dense_get(registers, index);
    if grows {
        dense_put(registers, index, value);
    }
    grows
}

// ---------------------------------------------------------------------------------------
// sparse opcodes

/// One decoded opcode: a run of `len` registers holding `value` (0 for ZERO and XZERO),
/// `bytes` long.
#[derive(Clone, Copy)]
struct Op {
    value: u8,
    len: usize,
    bytes: usize,
}

/// The opcode at `ops[at]`. An XZERO cut off by the end reads its second byte as 0, as
/// Redis reads the string's terminating NUL.
fn op_at(ops: &[u8], at: usize) -> Op {
    let first = ops[at];
    if first & 0x80 != 0 {
        Op {
            value: ((first >> 2) & 0x1f) + 1,
            len: usize::from(first & 0x3) + 1,
            bytes: 1,
        }
    } else if first & 0x40 != 0 {
        let second = ops.get(at + 1).copied().unwrap_or(0);
        Op {
            value: 0,
            len: (usize::from(first & 0x3f) << 8 | usize::from(second)) + 1,
            bytes: 2,
        }
    } else {
        Op {
            value: 0,
            len: usize::from(first & 0x3f) + 1,
            bytes: 1,
        }
    }
}

fn val_byte(value: u8, len: usize) -> u8 {
    debug_assert!((1..=VAL_MAX_VALUE).contains(&value) && (1..=VAL_MAX_LEN).contains(&len));
    0x80 | (value - 1) << 2 | (len - 1) as u8
}

fn push_zeros(out: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        push_xzero(out, len);
    } else {
        out.push((len - 1) as u8);
    }
}

fn push_xzero(out: &mut Vec<u8>, len: usize) {
    let encoded = len - 1;
    out.extend_from_slice(&[0x40 | (encoded >> 8) as u8, encoded as u8]);
}

/// Walks a sparse sketch's opcodes, calling `run(first register, len, value)` for each VAL
/// run and each zero run; `Corrupt` unless they cover exactly [`REGISTERS`]. A run that
/// would pass the last register stops the walk as corrupt, as in Redis 7.0.15 with the fix
/// of CVE-2025-32023 (its merge and its conversion to dense stopped at a VAL run past the
/// end before, and took a sketch that had covered every register by then); its histogram
/// for the estimate counts every run and compares the sum: the same verdict.
fn walk_sparse(sketch: &[u8], mut run: impl FnMut(usize, usize, u8)) -> Result<(), Corrupt> {
    let ops = &sketch[HEADER..];
    let (mut at, mut index) = (0, 0);
    while at < ops.len() {
        let op = op_at(ops, at);
        if index + op.len > REGISTERS {
            return Err(Corrupt);
        }
        run(index, op.len, op.value);
        index += op.len;
        at += op.bytes;
    }
    if index == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// Raises register `index` of a sparse sketch to `value` (at most 32), as Redis's
/// `hllSparseSet` does: find the opcode covering it; leave a VAL already as high; rewrite a
/// single-register VAL or ZERO in place; otherwise split the opcode into up to three (runs
/// before, the register, runs after), turning dense if that would pass the size limit; then
/// merge equal adjacent VALs among up to five opcodes starting from the one before.
fn set_sparse(sketch: &mut Vec<u8>, index: usize, value: u8) -> Result<bool, Corrupt> {
    let end = sketch.len();
    let (mut at, mut first, mut prev) = (HEADER, 0, None);
    let mut found = None;
    while at < end {
        let op = op_at(&sketch[HEADER..], at - HEADER);
        if index < first + op.len {
            found = Some(op);
            break;
        }
        prev = Some(at);
        at += op.bytes;
        first += op.len;
    }
    let Some(op) = found else {
        return Err(Corrupt);
    };
    if op.value >= value {
        return Ok(false); // a VAL as high already (a ZERO's value is 0)
    }
    if op.len == 1 && op.bytes == 1 {
        sketch[at] = val_byte(value, 1); // a single-register VAL or ZERO
    } else {
        let last = first + op.len - 1;
        let mut replacement = Vec::with_capacity(5);
        let surround = |out: &mut Vec<u8>, len: usize| match op.value {
            0 => push_zeros(out, len),
            old => out.push(val_byte(old, len)),
        };
        if index != first {
            surround(&mut replacement, index - first);
        }
        replacement.push(val_byte(value, 1));
        if index != last {
            surround(&mut replacement, last - index);
        }
        let grows_by = replacement.len().saturating_sub(op.bytes);
        if grows_by > 0 && sketch.len() + grows_by > SPARSE_MAX_BYTES {
            return promote(sketch, index, value);
        }
        // An XZERO cut off by the end of a damaged sketch has one byte where two are read:
        // Redis writes the whole replacement and then sets the length as if both had been
        // there, which cuts the replacement's last byte (or the whole of a lone VAL).
        let len = sketch.len() + replacement.len() - op.bytes;
        let present = op.bytes.min(sketch.len() - at);
        sketch.splice(at..at + present, replacement);
        sketch.truncate(len);
    }
    merge_vals(sketch, prev.unwrap_or(HEADER));
    Ok(true)
}

/// Redis's step 4 of `hllSparseSet`: from `start`, over up to five opcodes, folds each VAL
/// into an equal VAL after it while their runs fit one opcode.
fn merge_vals(sketch: &mut Vec<u8>, start: usize) {
    let mut at = start;
    let mut scans = 5;
    while at < sketch.len() && scans > 0 {
        scans -= 1;
        let op = op_at(&sketch[HEADER..], at - HEADER);
        if op.value == 0 {
            at += op.bytes;
            continue;
        }
        if let Some(next) = sketch.get(at + 1).filter(|&&byte| byte & 0x80 != 0) {
            let next = op_at(&[*next], 0);
            let len = op.len + next.len;
            if next.value == op.value && len <= VAL_MAX_LEN {
                sketch[at + 1] = val_byte(op.value, len);
                sketch.remove(at);
                continue; // the merged VAL may merge with the one after it too
            }
        }
        at += 1;
    }
}

/// Turns a sparse sketch dense, then raises register `index` to `value` (which is why it
/// turned: the result is always a change).
fn promote(sketch: &mut Vec<u8>, index: usize, value: u8) -> Result<bool, Corrupt> {
    to_dense(sketch)?;
    let raised = raise_dense(&mut sketch[HEADER..], index, value);
    assert!(
        raised,
        "a register that made a sketch dense must grow in it"
    );
    Ok(true)
}

/// Makes `sketch` dense (a dense one stays as it is), keeping the header's cached count.
pub fn to_dense(sketch: &mut Vec<u8>) -> Result<(), Corrupt> {
    if is_dense(sketch) {
        return Ok(());
    }
    let mut dense = sketch[..HEADER].to_vec();
    dense[4] = DENSE;
    dense.resize(DENSE_LEN, 0);
    walk_sparse(sketch, |first, len, value| {
        if value != 0 {
            for index in first..first + len {
                dense_put(&mut dense[HEADER..], index, value);
            }
        }
    })?;
    *sketch = dense;
    Ok(())
}

/// Raises each of `max`'s registers to the sketch's where the sketch's is higher.
pub fn merge_into(max: &mut [u8], sketch: &[u8]) -> Result<(), Corrupt> {
    assert_eq!(max.len(), REGISTERS);
    if is_dense(sketch) {
        for (index, register) in max.iter_mut().enumerate() {
            *register = (*register).max(dense_get(&sketch[HEADER..], index));
        }
        return Ok(());
    }
    walk_sparse(sketch, |first, len, value| {
        if value != 0 {
            for register in &mut max[first..first + len] {
                *register = (*register).max(value);
            }
        }
    })
}

// ---------------------------------------------------------------------------------------
// the estimate

/// The sketch's estimated cardinality, computed (the cache is not read).
pub fn count(sketch: &[u8]) -> Result<u64, Corrupt> {
    let mut histogram = [0u64; 64];
    if is_dense(sketch) {
        for index in 0..REGISTERS {
            histogram[usize::from(dense_get(&sketch[HEADER..], index))] += 1;
        }
    } else {
        walk_sparse(sketch, |_, len, value| {
            histogram[usize::from(value)] += len as u64
        })?;
    }
    Ok(estimate(&histogram))
}

/// The estimated cardinality of registers held one per byte (the merge of several sketches).
pub fn count_registers(registers: &[u8]) -> u64 {
    let mut histogram = [0u64; 64];
    for &register in registers {
        histogram[usize::from(register & 63)] += 1;
    }
    estimate(&histogram)
}

/// Otmar Ertl's improved raw estimator ("New cardinality estimation algorithms for
/// HyperLogLog sketches", 2017), in Redis's order of floating-point operations so that
/// both servers round to the same integer.
fn estimate(histogram: &[u64; 64]) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - histogram[q + 1] as f64) / m);
    for j in (1..=q).rev() {
        z += histogram[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    redis_rounding(ALPHA_INF * m * m / z)
}

/// Redis's `(uint64_t) llroundl(e)` on x86-64: to the nearest integer, halves away from
/// zero; an estimate past a long long's range (an infinity, when every register is above
/// those the histogram reads) is LLONG_MIN, 2^63 here, which PFCOUNT answers as
/// -9223372036854775808 and which, cached, reads as a stale count.
fn redis_rounding(estimate: f64) -> u64 {
    const LONG_LONG_END: f64 = 9_223_372_036_854_775_808.0;
    let rounded = estimate.round();
    if (0.0..LONG_LONG_END).contains(&rounded) {
        rounded as u64
    } else {
        1 << 63
    }
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if before == z {
            return z / 3.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any bytes after a sparse header (what APPEND and SETRANGE can leave) are
        /// answered, never a panic; whatever an update leaves is still walked safely.
        #[test]
        fn damaged_sparse_opcodes_never_panic(
            ops in prop::collection::vec(any::<u8>(), 0..40),
            updates in prop::collection::vec((0..REGISTERS, 1..=51u8), 1..8),
        ) {
            let mut sketch = header(SPARSE);
            sketch.extend_from_slice(&ops);
            let _ = count(&sketch);
            let _ = merge_into(&mut vec![0; REGISTERS], &sketch);
            for (index, value) in updates {
                if set_register(&mut sketch, index, value).is_err() {
                    break;
                }
                let _ = count(&sketch);
            }
            let _ = to_dense(&mut sketch);
        }

        /// Registers raised one by one read back as the largest value each was given,
        /// sparse or dense, and the sketch's bytes never pass the sparse limit unless dense.
        #[test]
        fn registers_keep_their_largest_value(
            updates in prop::collection::vec((0..REGISTERS, 1..=51u8), 1..300),
            spread in 1..REGISTERS,
        ) {
            let mut sketch = empty();
            let mut reference = vec![0u8; REGISTERS];
            for (index, value) in updates {
                let index = index % spread;
                let grows = value > reference[index];
                reference[index] = reference[index].max(value);
                prop_assert_eq!(set_register(&mut sketch, index, value), Ok(grows));
                prop_assert!(is_dense(&sketch) || sketch.len() <= SPARSE_MAX_BYTES);
            }
            prop_assert_eq!(registers_of(&sketch), reference);
        }
    }

    fn registers_of(sketch: &[u8]) -> Vec<u8> {
        let mut max = vec![0; REGISTERS];
        merge_into(&mut max, sketch).expect("a valid sketch");
        max
    }

    #[test]
    fn one_element_lands_where_redis_puts_it() {
        // The opcodes after the header of `PFADD k ELEMENT` on redis-server 7.0.15 (GET k):
        // the register (the first XZERO's length) and the rank (the VAL's value) follow
        // from MurmurHash64A, so these cover the hash with every tail length from 0 to 3
        // and a whole 8-byte block.
        let cases: [(&[u8], &[u8]); 5] = [
            (b"", b"W1\x84h\xcc"),
            (b"a", b"q\xa6\x84NW"),
            (b"abcdefgh", b"Ef\x80z\x97"),
            (b"hello world", b"d\xb6\x8c[G"),
            (b"123456789", b"dL\x84[\xb1"),
        ];
        for (element, ops) in cases {
            let mut sketch = empty();
            assert_eq!(add(&mut sketch, element), Ok(true));
            assert_eq!(add(&mut sketch, element), Ok(false));
            mark_stale(&mut sketch);
            assert_eq!(&sketch[16..], ops, "{:?}", String::from_utf8_lossy(element));
            assert_eq!(&sketch[..16], b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80");
        }
    }

    #[test]
    fn a_new_sketch_is_one_xzero_with_a_fresh_count() {
        let sketch = empty();
        assert_eq!(sketch.len(), 18);
        assert_eq!(&sketch[16..], &[0x7f, 0xff]);
        assert_eq!(cached(&sketch), Some(0));
        assert_eq!(count(&sketch), Ok(0));
        assert_eq!(check(&sketch), Ok(()));
    }

    #[test]
    fn dense_registers_straddle_bytes_without_touching_their_neighbours() {
        let mut registers = vec![0u8; REGISTERS * 6 / 8];
        for index in 0..REGISTERS {
            dense_put(&mut registers, index, (index % 64) as u8);
        }
        for index in 0..REGISTERS {
            assert_eq!(dense_get(&registers, index), (index % 64) as u8, "{index}");
        }
    }

    #[test]
    fn sparse_and_dense_hold_the_same_registers() {
        let mut sketch = empty();
        let mut reference = vec![0u8; REGISTERS];
        for n in 0..2_000u32 {
            let element = n.to_le_bytes();
            let (index, rank) = register_and_rank(&element);
            reference[index] = reference[index].max(rank);
            add(&mut sketch, &element).expect("valid");
            if n % 97 == 0 {
                assert_eq!(registers_of(&sketch), reference, "after {n}");
            }
        }
        let was_sparse = !is_dense(&sketch);
        to_dense(&mut sketch).expect("valid");
        assert!(was_sparse || is_dense(&sketch));
        assert_eq!(registers_of(&sketch), reference);
        assert_eq!(sketch.len(), DENSE_LEN);
    }

    #[test]
    fn a_sparse_sketch_turns_dense_past_its_size_limit() {
        let mut sketch = empty();
        let mut n = 0u32;
        while !is_dense(&sketch) {
            assert!(sketch.len() <= SPARSE_MAX_BYTES);
            add(&mut sketch, &n.to_be_bytes()).expect("valid");
            n += 1;
        }
        assert_eq!(sketch.len(), DENSE_LEN);
        assert!(n > 500, "turned dense after {n} elements");
    }

    #[test]
    fn counts_are_within_the_sketchs_error() {
        // Standard error 1.04 / sqrt(16384) = 0.81%; allow five of those.
        let mut sketch = empty();
        let mut added = 0u64;
        for target in [10u64, 100, 1_000, 10_000, 100_000] {
            while added < target {
                add(&mut sketch, format!("element:{added}").as_bytes()).expect("valid");
                added += 1;
            }
            let counted = count(&sketch).expect("valid") as f64;
            let error = (counted - target as f64).abs() / target as f64;
            assert!(error < 0.041, "{target} elements counted as {counted}");
        }
    }

    #[test]
    fn a_sparse_sketch_whose_runs_do_not_cover_the_registers_is_corrupt() {
        let mut short = header(SPARSE);
        push_xzero(&mut short, REGISTERS - 1);
        assert_eq!(count(&short), Err(Corrupt));
        let mut long = empty();
        long.push(val_byte(3, 1));
        assert_eq!(count(&long), Err(Corrupt));
        // So are they to the merge and the conversion to dense (with CVE-2025-32023's
        // fix, Redis's stop at a VAL run past the end no longer takes the sketch).
        assert_eq!(merge_into(&mut vec![0; REGISTERS], &long), Err(Corrupt));
        assert_eq!(to_dense(&mut long), Err(Corrupt));
        let mut zeros_past = empty();
        zeros_past.push(0);
        assert_eq!(
            merge_into(&mut vec![0; REGISTERS], &zeros_past),
            Err(Corrupt)
        );
    }

    #[test]
    fn an_xzero_cut_off_by_the_end_is_split_as_redis_splits_it() {
        // Damaged as `APPEND key "\x40"` leaves it: an XZERO's first byte, last.
        let mut sketch = header(SPARSE);
        push_xzero(&mut sketch, REGISTERS - 1);
        sketch.push(0x40);
        assert_eq!(set_register(&mut sketch, REGISTERS - 1, 3), Ok(true));
        assert_eq!(&sketch[HEADER..], &[0x7f, 0xfe], "the lone VAL is cut off");
        let mut sketch = empty();
        sketch.push(0x7f); // an XZERO of 16,384 more, past the registers
        assert_eq!(set_register(&mut sketch, 5, 2), Ok(true));
        assert_eq!(count(&sketch), Err(Corrupt));
    }

    #[test]
    fn registers_past_51_from_a_damaged_dense_sketch_merge_into_a_sparse_one() {
        let mut dense = empty();
        to_dense(&mut dense).expect("valid");
        dense[HEADER..].fill(0xff); // every register 63
        let mut registers = vec![0; REGISTERS];
        merge_into(&mut registers, &dense).expect("a dense sketch is always walkable");
        assert!(registers.iter().all(|&r| r == 63));
        let mut sketch = empty();
        assert_eq!(set_register(&mut sketch, 7, 63), Ok(true));
        assert!(is_dense(&sketch));
        assert_eq!(dense_get(&sketch[HEADER..], 7), 63);
        assert_eq!(count_registers(&registers), count(&dense).expect("dense"));
    }

    #[test]
    fn an_infinite_estimate_is_redis_s_llroundl_of_it() {
        // Every register 63: none in the histogram Redis reads, so its estimate is an
        // infinity, which Redis 7.0.15's PFCOUNT answers as -9223372036854775808.
        let mut dense = empty();
        to_dense(&mut dense).expect("valid");
        dense[HEADER..].fill(0xff);
        assert_eq!(count(&dense), Ok(1 << 63));
        assert_eq!(count_registers(&vec![63; REGISTERS]), 1 << 63);
        // Cached, it reads as stale (its top bit is the stale mark), as in Redis.
        set_cache(&mut dense, 1 << 63);
        assert_eq!(cached(&dense), None);
        assert_eq!(redis_rounding(2.5), 3);
        assert_eq!(redis_rounding(f64::NAN), 1 << 63);
        assert_eq!(redis_rounding(9.3e18), 1 << 63);
    }

    #[test]
    fn only_a_header_with_the_magic_and_a_known_encoding_is_a_sketch() {
        assert_eq!(check(b"HYLL"), Err(NotSketch));
        assert_eq!(check(b"hello world, not a sketch"), Err(NotSketch));
        let mut bad_encoding = empty();
        bad_encoding[4] = 2;
        assert_eq!(check(&bad_encoding), Err(NotSketch));
        let mut short_dense = empty();
        short_dense[4] = DENSE;
        assert_eq!(check(&short_dense), Err(NotSketch));
    }
}
