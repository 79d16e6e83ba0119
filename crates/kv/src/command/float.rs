//! Floats as Redis reads them. Redis parses with C's `strtod` / `strtold`, whose syntax is
//! wider than Rust's `f64::from_str` (hexadecimal floats: `0x10` is 16, `0x1.8p1` is 3) and
//! whose range errors each caller treats in its own way: ZADD refuses `1e400`, a ZRANGEBYSCORE
//! bound reads it as `inf`, INCRBYFLOAT computes in a long double, where it fits.

use std::cmp::Ordering;

use super::{Fault, NOT_FLOAT};

/// Hexadecimal digits kept of a mantissa: 60 bits, more than an f64's 53 plus a rounding bit,
/// so that the conversion to f64 rounds once, correctly (later digits only set a sticky bit).
const HEX_DIGITS: usize = 15;
/// Binary exponents past which every value overflows or underflows: bounds the scaling loop.
const EXPONENT_LIMIT: i64 = 1 << 14;
/// Significant digits of a decimal kept to judge its tininess: more than a subnormal or the
/// midpoint under DBL_MIN written out has (at most 770), so later digits only count as one
/// last digit that is not 0.
const DECIMAL_DIGITS: usize = 800;

/// A whole string read by `strtod`: its value, and whether it was out of a double's range
/// (strtod's ERANGE: ±HUGE_VAL for `overflow`, 0 for `underflow`, and, for `tiny`, glibc's
/// ERANGE for a result below DBL_MIN that is not exact: a subnormal or 0, which glibc's
/// strtod returns with ERANGE set).
struct CDouble {
    value: f64,
    overflow: bool,
    underflow: bool,
    tiny: bool,
}

/// A float argument as Redis's `getDoubleFromObject` reads it (ZADD and ZINCRBY scores):
/// strtod's syntax, no leading whitespace, and NaN or a value out of a double's range
/// refused.
pub fn parse_float(arg: &[u8]) -> Result<f64, Fault> {
    match read_whole(arg) {
        Some(c) if !c.overflow && !c.underflow && !c.value.is_nan() => Ok(c.value),
        _ => Err(Fault::err(NOT_FLOAT)),
    }
}

/// A number as Redis's `string2ld` reads it (INCRBYFLOAT, HINCRBYFLOAT): like
/// [`parse_float`], but in a long double, whose range is far wider than an f64's. A value
/// too small for an f64 is read as 0: Redis holds it, and it vanishes from the 17 decimals
/// it shows of the result. One too large is read as an infinity, which those commands
/// refuse where Redis computes on (a known difference: they compute in an f64).
pub fn parse_long_double(arg: &[u8]) -> Result<f64, Fault> {
    match read_whole(arg) {
        Some(c) if !c.value.is_nan() => Ok(c.value),
        _ => Err(Fault::err(NOT_FLOAT)),
    }
}

/// A score range bound after its optional `(`, as Redis's `zslParseRange` reads it: plain
/// strtod, so leading whitespace is skipped, an empty string is 0 (strtod converts nothing
/// and stops at the end) and a value out of range is ±inf or 0; only NaN and text left over
/// are refused.
pub fn parse_score_bound(arg: &[u8]) -> Option<f64> {
    strtod_whole(arg).map(|c| c.value)
}

/// An element, or the value a BY pattern finds, as SORT reads it: plain strtod, as
/// [`parse_score_bound`], but refused wherever strtod sets ERANGE (Redis checks `errno`
/// there, whatever the value): out of a double's range, and also a subnormal result that is
/// not exact (`1e-310`; `0x1p-1074` is exact and reads), which ZADD accepts.
pub fn parse_sort_score(arg: &[u8]) -> Option<f64> {
    strtod_whole(arg)
        .filter(|c| !c.overflow && !c.underflow && !c.tiny)
        .map(|c| c.value)
}

/// `arg` read whole by plain strtod: leading whitespace skipped, the empty string 0; `None`
/// for text left over or NaN.
fn strtod_whole(arg: &[u8]) -> Option<CDouble> {
    if arg.is_empty() {
        return Some(CDouble {
            value: 0.0,
            overflow: false,
            underflow: false,
            tiny: false,
        });
    }
    let start = arg.iter().position(|b| !is_c_space(*b))?;
    read_whole(&arg[start..]).filter(|c| !c.value.is_nan())
}

/// C's `isspace` in the C locale.
fn is_c_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Reads all of `arg` as strtod would, without skipping whitespace: `None` when strtod would
/// stop before the end (or convert nothing).
fn read_whole(arg: &[u8]) -> Option<CDouble> {
    let text = std::str::from_utf8(arg).ok()?;
    let (negative, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let hex = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X"));
    let mut read = match hex {
        Some(digits) => hexadecimal(digits)?,
        None => decimal(body)?,
    };
    if negative {
        read.value = -read.value;
    }
    Some(read)
}

/// A decimal number or `inf` / `infinity` / `nan` (any case), without a sign.
fn decimal(body: &str) -> Option<CDouble> {
    // A second sign ("+-1") is not part of a number; Rust's parser would take it.
    if body.starts_with(['+', '-']) {
        return None;
    }
    let value: f64 = body.parse().ok()?;
    let literal = body.bytes().next().is_some_and(|b| b.is_ascii_alphabetic());
    let mantissa = body.split(['e', 'E']).next().unwrap_or("");
    let nonzero = mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b));
    // Only a result at most DBL_MIN can be tiny: the exact value is worked out for those.
    let tiny = nonzero
        && value.abs() <= f64::MIN_POSITIVE
        && decimal_exact(body).is_some_and(|exact| is_tiny(&exact, value));
    Some(CDouble {
        value,
        overflow: value.is_infinite() && !literal,
        underflow: value == 0.0 && nonzero,
        tiny,
    })
}

/// The exact value of a decimal number Rust's parser took (digits with an optional point,
/// then an optional exponent), to [`DECIMAL_DIGITS`] significant digits and one digit 1 after
/// them if any later digit is not 0; `None` for zero.
fn decimal_exact(body: &str) -> Option<Exact> {
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        // Unbounded: the digits before it may make up for any exponent.
        Some(at) => (&body[..at], signed_exponent(&body[at + 1..], i64::MAX)?),
        None => (body, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = whole.bytes().chain(fraction.bytes()).map(|b| b - b'0');
    let (mut digits, mut dropped, mut more) = (Vec::new(), 0i64, false);
    for digit in all.skip_while(|&d| d == 0) {
        if digits.len() < DECIMAL_DIGITS {
            digits.push(digit);
        } else {
            dropped += 1;
            more |= digit != 0;
        }
    }
    let mut exponent = exponent
        .saturating_sub(fraction.len() as i64)
        .saturating_add(dropped);
    if more {
        // Above the digits kept, below them plus one in their last place: no number the
        // value is compared with lies in between.
        digits.push(1);
        exponent = exponent.saturating_sub(1);
    }
    Exact::new(digits, exponent)
}

/// An exponent (written in decimal) with an optional sign, its magnitude saturated at
/// `limit`: strtod reads any number of digits.
fn signed_exponent(text: &str, limit: i64) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude = digits.bytes().fold(0i64, |n, b| {
        n.saturating_mul(10)
            .saturating_add(i64::from(b - b'0'))
            .min(limit)
    });
    Some(if negative { -magnitude } else { magnitude })
}

/// The part of a hexadecimal float after `0x`: hex digits with an optional point, then an
/// optional binary exponent (`p` and a signed decimal number).
fn hexadecimal(digits: &str) -> Option<CDouble> {
    let (mantissa, exponent) = match digits.find(['p', 'P']) {
        Some(at) => (&digits[..at], Some(&digits[at + 1..])),
        None => (digits, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_hex = whole
        .chars()
        .chain(fraction.chars())
        .all(|c| c.is_ascii_hexdigit());
    if (whole.is_empty() && fraction.is_empty()) || !all_hex {
        return None;
    }
    let power = match exponent {
        Some(text) => signed_exponent(text, EXPONENT_LIMIT)?,
        None => 0,
    };
    let (bits, shift) = hex_mantissa(whole, fraction);
    let power = power.saturating_add(shift);
    if let Some((value, tiny)) = hex_below_normal(bits, power) {
        return Some(CDouble {
            value,
            overflow: false,
            underflow: value == 0.0,
            tiny,
        });
    }
    let value = scale(bits as f64, power);
    Some(CDouble {
        value,
        overflow: value.is_infinite(),
        underflow: value == 0.0 && bits != 0,
        tiny: false,
    })
}

/// `bits` × 2^`power` (not 0) when its first 53 bits lie below DBL_MIN, as glibc's strtod
/// rounds it into a subnormal (`round_and_return`): the value, and whether ERANGE is set
/// (some bit shifted out, unless the value rounds up to DBL_MIN at 53 bits). Rounded once,
/// from the bits: a double's rounding first would round twice. As in glibc, the bit just
/// after the first 53 is left out (of the rounding and of ERANGE); the later bits count.
fn hex_below_normal(bits: u64, power: i64) -> Option<(f64, bool)> {
    if bits == 0 {
        return None;
    }
    let width = 64 - i64::from(bits.leading_zeros());
    // The first 53 bits, times 2^`exponent`; the bit after them; whether any later is set.
    let (top, exponent, half, more) = if width <= 53 {
        let pad = 53 - width;
        (bits << pad, power.saturating_sub(pad), false, false)
    } else {
        let dropped = width - 53;
        let later = bits & ((1 << (dropped - 1)) - 1);
        (
            bits >> dropped,
            power.saturating_add(dropped),
            (bits >> (dropped - 1)) & 1 == 1,
            later != 0,
        )
    };
    let shift = (-1074i64).saturating_sub(exponent);
    if shift < 1 {
        return None;
    }
    if shift > 53 {
        return Some((0.0, true));
    }
    // Tininess after rounding (glibc's case of one bit shifted out): 53 ones and the half
    // bit round up to DBL_MIN, which is no underflow.
    let rounds_to_normal = shift == 1 && top == (1 << 53) - 1 && half;
    let round = (top >> (shift - 1)) & 1 == 1;
    let sticky = top & ((1 << (shift - 1)) - 1) != 0 || more;
    let mut units = top >> shift;
    if round && (sticky || units & 1 == 1) {
        units += 1;
    }
    Some((
        f64::from_bits(units),
        !rounds_to_normal && (round || sticky),
    ))
}

/// The first [`HEX_DIGITS`] significant digits as an integer (a last bit set if any later
/// digit is not zero), and the power of two to multiply it by.
fn hex_mantissa(whole: &str, fraction: &str) -> (u64, i64) {
    let (mut bits, mut shift, mut kept, mut sticky) = (0u64, 0i64, 0usize, false);
    let digits = whole
        .chars()
        .map(|c| (c, false))
        .chain(fraction.chars().map(|c| (c, true)));
    for (c, in_fraction) in digits {
        let digit = u64::from(c.to_digit(16).unwrap_or(0));
        if kept == 0 && digit == 0 {
            // A leading zero: only its place counts.
            shift -= if in_fraction { 4 } else { 0 };
            continue;
        }
        if kept < HEX_DIGITS {
            bits = (bits << 4) | digit;
            kept += 1;
            shift -= if in_fraction { 4 } else { 0 };
        } else {
            sticky |= digit != 0;
            shift += if in_fraction { 0 } else { 4 };
        }
    }
    (bits | u64::from(sticky), shift)
}

/// Whether glibc's strtod reports ERANGE for the nonzero decimal `exact` it read as `value`
/// (at most DBL_MIN): when the result is below DBL_MIN and not exact. Below is judged after
/// rounding to 53 bits with an unbounded exponent (tininess after rounding, as on x86): a
/// value just under DBL_MIN that rounds up to it at 53 bits (`2.2250738585072013e-308`) is
/// not tiny. glibc also leaves out the bit after the first 53 here, as it does for
/// hexadecimal floats; only a decimal of some 750 digits that is exactly an odd multiple of
/// 2^-1075 would show it, so that is not copied.
fn is_tiny(exact: &Exact, value: f64) -> bool {
    let magnitude = value.abs();
    if magnitude > f64::MIN_POSITIVE {
        return false;
    }
    if magnitude < f64::MIN_POSITIVE {
        // A subnormal (or 0): whatever rounds to it is below DBL_MIN. Written out, a
        // subnormal k × 2^-1074 (k < 2^52) ends at the 1,023rd decimal place or later, so a
        // shorter number is not one (no need to write it out).
        if exact.exponent > -1023 {
            return true;
        }
        return Exact::of_binary(magnitude.to_bits(), 1074).as_ref() != Some(exact);
    }
    // DBL_MIN: tiny below the midpoint between it and the 53-bit number under it,
    // (2^54 - 1) × 2^-1076; a tie rounds to DBL_MIN (the even one).
    Exact::of_binary((1 << 54) - 1, 1076).is_some_and(|midpoint| *exact < midpoint)
}

/// A nonzero value exactly, as decimal digits (0 to 9, neither the first nor the last 0)
/// times 10^`exponent`: values of any size, so a string's and a double's compare exactly.
#[derive(Debug, PartialEq, Eq)]
struct Exact {
    digits: Vec<u8>,
    exponent: i64,
}

impl Exact {
    /// `digits` (0 to 9) × 10^`exponent`; `None` for zero.
    fn new(digits: impl IntoIterator<Item = u8>, exponent: i64) -> Option<Exact> {
        let mut digits: Vec<u8> = digits.into_iter().skip_while(|&d| d == 0).collect();
        let zeros = digits.iter().rev().take_while(|&&d| d == 0).count();
        digits.truncate(digits.len() - zeros);
        let exponent = exponent.saturating_add(zeros as i64);
        (!digits.is_empty()).then_some(Exact { digits, exponent })
    }

    /// `k` × 2^-`n`, which is k × 5^n × 10^-n.
    fn of_binary(k: u64, n: u32) -> Option<Exact> {
        Exact::new(times_power_of_five(k, n), -i64::from(n))
    }

    /// The power of ten just above the leading digit: the larger, the larger the value.
    fn magnitude(&self) -> i64 {
        self.exponent.saturating_add(self.digits.len() as i64)
    }
}

impl Ord for Exact {
    fn cmp(&self, other: &Exact) -> Ordering {
        // At one magnitude the digits line up from the leading one; where one runs out
        // first the other has a nonzero digit more.
        self.magnitude()
            .cmp(&other.magnitude())
            .then_with(|| self.digits.cmp(&other.digits))
    }
}

impl PartialOrd for Exact {
    fn partial_cmp(&self, other: &Exact) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The decimal digits of `k` × 5^`n`, most significant first (leading zeros possible).
fn times_power_of_five(k: u64, n: u32) -> Vec<u8> {
    // Limbs of nine decimal digits, least significant first; each step multiplies by at
    // most 5^13, so a limb times it plus a carry stays within a u64.
    const BASE: u64 = 1_000_000_000;
    let mut limbs = vec![k % BASE, k / BASE % BASE, k / BASE / BASE];
    let mut left = n;
    while left > 0 {
        let step = left.min(13);
        let factor = 5u64.pow(step);
        let mut carry = 0;
        for limb in &mut limbs {
            let product = *limb * factor + carry;
            *limb = product % BASE;
            carry = product / BASE;
        }
        while carry > 0 {
            limbs.push(carry % BASE);
            carry /= BASE;
        }
        left -= step;
    }
    let mut digits = Vec::with_capacity(limbs.len() * 9);
    for limb in limbs.iter().rev() {
        let mut place = BASE / 10;
        while place > 0 {
            digits.push((limb / place % 10) as u8);
            place /= 10;
        }
    }
    digits
}

/// `value` × 2^`power`, in steps that each stay within an f64's exponents.
fn scale(mut value: f64, power: i64) -> f64 {
    let mut power = power.clamp(-EXPONENT_LIMIT, EXPONENT_LIMIT);
    while power != 0 && value != 0.0 && value.is_finite() {
        let step = power.clamp(-1000, 1000);
        value *= 2f64.powi(step as i32);
        power -= step;
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(text: &str) -> Option<f64> {
        parse_float(text.as_bytes()).ok()
    }

    #[test]
    fn decimals_as_rust_reads_them() {
        assert_eq!(float("1.5"), Some(1.5));
        assert_eq!(float("-3"), Some(-3.0));
        assert_eq!(float("+2"), Some(2.0));
        assert_eq!(float(".5"), Some(0.5));
        assert_eq!(float("5."), Some(5.0));
        assert_eq!(float("1e3"), Some(1000.0));
        assert_eq!(float("-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(float("Infinity"), Some(f64::INFINITY));
        for bad in ["", " 1", "1 ", "abc", "nan", "+-1", "1e", ".", "1_0", "0x"] {
            assert_eq!(float(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn hexadecimal_floats_as_strtod_reads_them() {
        assert_eq!(float("0x10"), Some(16.0));
        assert_eq!(float("-0X1.8p1"), Some(-3.0));
        assert_eq!(float("0x.8"), Some(0.5));
        assert_eq!(float("0x1p-2"), Some(0.25));
        assert_eq!(float("0x0000000000000000001"), Some(1.0));
        assert_eq!(float("0x1.00000000000000000001"), Some(1.0));
        assert_eq!(float("0x1fffffffffffff"), Some(9007199254740991.0));
        assert_eq!(float("0x1p-1074"), Some(f64::from_bits(1)));
        for bad in ["0x", "0x.", "0x1p", "0x1g", "0x1p+", "0xp1"] {
            assert_eq!(float(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn out_of_range_is_refused_by_scores_and_read_by_the_others() {
        assert_eq!(float("1e400"), None);
        assert_eq!(float("-1e-400"), None);
        assert_eq!(float("0x1p2000"), None);
        assert_eq!(float("0e999"), Some(0.0));
        assert_eq!(parse_long_double(b"1e-400").ok(), Some(0.0));
        assert_eq!(parse_score_bound(b"1e400"), Some(f64::INFINITY));
        assert_eq!(parse_score_bound(b"1e-400"), Some(0.0));
    }

    /// What glibc 2.36's strtod answers for `text`: its value's bits, and whether it set
    /// ERANGE (checked with a C program calling it). Among them glibc's own ways: the bit
    /// after a hexadecimal's first 53 is left out of a subnormal's rounding and of ERANGE
    /// (`0x20000000000041p-1081` rounds down, `0x20000000000001p-1081` sets no ERANGE).
    const GLIBC: &[(&str, u64, bool)] = &[
        ("1e-310", 0x0000_1268_8b70_e62b, true),
        ("-1e-310", 0x8000_1268_8b70_e62b, true),
        ("5e-324", 1, true),
        ("4.9406564584124654e-324", 1, true),
        ("2.4703282292062328e-324", 1, true),
        ("2.4703282292062327e-324", 0, true),
        ("1e-400", 0, true),
        ("0x1p-1075", 0, true),
        ("0x1p-1074", 1, false),
        ("0x1.8p-1074", 2, true),
        ("0x1.8p-1073", 3, false),
        ("0x1.0000000000001p-1074", 1, true),
        ("0x0.0000000000001p-1022", 1, false),
        ("0x1p-1023", 0x0008_0000_0000_0000, false),
        ("1.1125369292536007e-308", 0x0008_0000_0000_0000, true),
        ("2.2250738585072014e-308", 0x0010_0000_0000_0000, false),
        ("2.2250738585072012e-308", 0x0010_0000_0000_0000, true),
        ("2.2250738585072011e-308", 0x000f_ffff_ffff_ffff, true),
        ("0x1.fffffffffffffp-1023", 0x0010_0000_0000_0000, true),
        ("0x1.fffffffffffff8p-1023", 0x0010_0000_0000_0000, false),
        ("0x1.fffffffffffffcp-1023", 0x0010_0000_0000_0000, false),
        ("0x1.ffffffffffffe8p-1023", 0x000f_ffff_ffff_ffff, false),
        ("0xe60adb6dc13376p-1078", 0x000e_60ad_b6dc_1337, true),
        ("0x20000000000041p-1081", 0x0000_4000_0000_0000, true),
        ("0x20000000000001p-1081", 0x0000_4000_0000_0000, false),
        ("2.2250738585072013e-308", 0x0010_0000_0000_0000, false),
        ("2.2250738585072012595e-308", 0x0010_0000_0000_0000, true),
        ("2.2250738585072012596e-308", 0x0010_0000_0000_0000, false),
        ("0e-999", 0, false),
        ("0x0p-5000", 0, false),
        ("1e-300", 0x01a5_6e1f_c2f8_f359, false),
    ];

    #[test]
    fn sort_refuses_what_glibc_s_strtod_sets_erange_for() {
        for &(text, bits, erange) in GLIBC {
            let read = strtod_whole(text.as_bytes()).expect(text);
            assert_eq!(read.value.to_bits(), bits, "{text}");
            let refused = parse_sort_score(text.as_bytes()).is_none();
            assert_eq!(refused, erange, "{text}");
        }
        // 2^-1074 written out in full: exact, so glibc sets no ERANGE.
        let exact = format!("0.{}", exact_min_subnormal());
        assert_eq!(parse_sort_score(exact.as_bytes()), Some(f64::from_bits(1)));
        let over = format!("{exact}1");
        assert_eq!(parse_sort_score(over.as_bytes()), None);
        // Past the digits kept, a digit that is not 0 still counts.
        let far = format!("{exact}{}1", "0".repeat(900));
        assert_eq!(parse_sort_score(far.as_bytes()), None);
        let zeros = format!("{exact}{}", "0".repeat(900));
        assert_eq!(parse_sort_score(zeros.as_bytes()), Some(f64::from_bits(1)));
        // About DBL_MIN's midpoint, 2.22507385850720125957382…e-308 (glibc: ERANGE below).
        let above = format!("2.2250738585072012595739{}e-308", "0".repeat(900));
        assert_eq!(parse_sort_score(above.as_bytes()), Some(f64::MIN_POSITIVE));
        let below = format!("2.2250738585072012595738{}1e-308", "0".repeat(900));
        assert_eq!(parse_sort_score(below.as_bytes()), None);
        // ZADD's rule is unchanged: only 0 and the infinities are out of range there.
        assert_eq!(float("1e-310"), Some(f64::from_bits(0x0000_1268_8b70_e62b)));
        assert_eq!(float("5e-324"), Some(f64::from_bits(1)));
    }

    /// The 1,074 decimals of 2^-1074 (5^1074, with leading zeros).
    fn exact_min_subnormal() -> String {
        let digits = times_power_of_five(1, 1074);
        let text: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
        format!("{text:0>1074}")
    }

    #[test]
    fn exact_values_compare_as_numbers() {
        let exact = |digits: &[u8], exponent| Exact::new(digits.iter().copied(), exponent);
        assert_eq!(exact(&[0, 1, 5, 0, 0], -4), exact(&[1, 5], -2));
        assert_eq!(exact(&[0, 0], 7), None);
        assert!(exact(&[1, 5], -2) < exact(&[1, 5, 1], -3));
        assert!(exact(&[9, 9], -3) < exact(&[1], -1));
        assert_eq!(Exact::of_binary(1, 2), exact(&[2, 5], -2));
        assert_eq!(Exact::of_binary(3, 0), exact(&[3], 0));
    }

    #[test]
    fn score_bounds_skip_whitespace_and_read_nothing_as_zero() {
        assert_eq!(parse_score_bound(b""), Some(0.0));
        assert_eq!(parse_score_bound(b" 1"), Some(1.0));
        assert_eq!(parse_score_bound(b"\t-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score_bound(b" "), None);
        assert_eq!(parse_score_bound(b"1 "), None);
        assert_eq!(parse_score_bound(b"nan"), None);
    }
}
