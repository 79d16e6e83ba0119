//! Floats as Redis reads them. Redis parses with C's `strtod` / `strtold`, whose syntax is
//! wider than Rust's `f64::from_str` (hexadecimal floats: `0x10` is 16, `0x1.8p1` is 3) and
//! whose range errors each caller treats in its own way: ZADD refuses `1e400`, a ZRANGEBYSCORE
//! bound reads it as `inf`, INCRBYFLOAT computes in a long double, where it fits.

use super::{Fault, NOT_FLOAT};

/// Hexadecimal digits kept of a mantissa: 60 bits, more than an f64's 53 plus a rounding bit,
/// so that the conversion to f64 rounds once, correctly (later digits only set a sticky bit).
const HEX_DIGITS: usize = 15;
/// Binary exponents past which every value overflows or underflows: bounds the scaling loop.
const EXPONENT_LIMIT: i64 = 1 << 14;

/// A whole string read by `strtod`: its value, and whether it was out of a double's range
/// (strtod's ERANGE: ±HUGE_VAL for `overflow`, 0 for `underflow`).
struct CDouble {
    value: f64,
    overflow: bool,
    underflow: bool,
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
/// [`parse_score_bound`], but a value out of a double's range is refused too (Redis checks
/// ERANGE there).
pub fn parse_sort_score(arg: &[u8]) -> Option<f64> {
    strtod_whole(arg)
        .filter(|c| !c.overflow && !c.underflow)
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
    Some(CDouble {
        value,
        overflow: value.is_infinite() && !literal,
        underflow: value == 0.0 && nonzero,
    })
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
        Some(text) => binary_exponent(text)?,
        None => 0,
    };
    let (bits, shift) = hex_mantissa(whole, fraction);
    let value = scale(bits as f64, power.saturating_add(shift));
    Some(CDouble {
        value,
        overflow: value.is_infinite(),
        underflow: value == 0.0 && bits != 0,
    })
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

/// A decimal exponent with an optional sign, saturated (strtod reads any number of digits).
fn binary_exponent(text: &str) -> Option<i64> {
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
            .min(EXPONENT_LIMIT)
    });
    Some(if negative { -magnitude } else { magnitude })
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
