//! Doubles as Redis 7.2+ writes them in replies (`d2string`): integers without a fraction,
//! otherwise the shortest digits that read back as the same double, laid out as Redis's
//! `fpconv_dtoa` lays them out.

/// Largest magnitude Redis still prints as an integer (`LLONG_MAX / 2`): past it, an integral
/// double goes through the shortest-digits path like any other.
const INTEGER_LIMIT: f64 = (i64::MAX / 2) as f64;

/// Redis's formatting of a double in replies: "nan", "inf", "-inf", "0"/"-0"; an integral value up
/// to 2^62 as an integer ("3", not "3.0"); otherwise the shortest round-trip digits, in plain
/// notation for moderate exponents ("0.000001", "123456789012345680000") and scientific notation
/// with a signed exponent beyond ("1e+20", "1e-7", "1.2345678901234567e+4").
///
/// Used by ZSCORE, ZINCRBY and every RESP2 double. (INCRBYFLOAT and HINCRBYFLOAT store their result
/// with Redis's long-double "human" format instead, which never uses an exponent: [`format_human`].)
pub fn format_double(value: f64) -> String {
    if value.is_nan() {
        "nan".to_owned()
    } else if value.is_infinite() {
        if value < 0.0 { "-inf" } else { "inf" }.to_owned()
    } else if value == 0.0 {
        if value.is_sign_negative() { "-0" } else { "0" }.to_owned()
    } else if let Some(integer) = exact_integer(value) {
        integer.to_string()
    } else {
        shortest(value)
    }
}

/// Decimals Redis's "human" long-double format keeps (`%.17Lf`).
const HUMAN_DECIMALS: usize = 17;

/// Redis's "human" format of a number INCRBYFLOAT and HINCRBYFLOAT store and answer
/// (`ld2string` with `LD_STR_HUMAN`: `%.17Lf` without trailing zeros): never an exponent
/// (`1e20` is "100000000000000000000", `1e-7` is "0.0000001"), at most 17 decimals (so
/// `1e-20` is "0"), and no "-0". The digits are the shortest that read back as the same
/// double: Redis computes in a long double, so it may show more of them (see
/// docs/design/kv.md, "Known differences"). Infinities and NaN, which those commands
/// refuse, are written as [`format_double`] writes them.
pub fn format_human(value: f64) -> String {
    if !value.is_finite() {
        return format_double(value);
    }
    // `Display` for f64 lays out the shortest round-trip digits without an exponent.
    let plain = value.to_string();
    let decimals = plain
        .split_once('.')
        .map_or(0, |(_, fraction)| fraction.len());
    if decimals > HUMAN_DECIMALS {
        return format_human_exact(value);
    }
    trim_fraction(&plain)
}

/// Redis's "human" format of a long double that holds an f64 exactly, as GEOPOS's and
/// WITHCOORD's coordinates do (`addReplyHumanLongDouble`): `%.17Lf` of the f64's exact
/// value, without trailing zeros and without "-0". Unlike [`format_human`], which stands in
/// for a value Redis computed in a long double, all 17 decimals count here: 13.361389338970184
/// is "13.36138933897018433". Infinities and NaN are written as [`format_double`] writes them.
pub fn format_human_exact(value: f64) -> String {
    if !value.is_finite() {
        return format_double(value);
    }
    // Fixed-precision formatting of an f64 is exact and rounds half to even, as glibc does.
    trim_fraction(&format!("{value:.HUMAN_DECIMALS$}"))
}

/// A plain decimal without the zeros ending its fraction (nor a bare point), "-0" as "0".
fn trim_fraction(text: &str) -> String {
    let trimmed = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    };
    if trimmed == "-0" {
        "0".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// The value as an i64 when it is integral and within Redis's integer-printing range.
fn exact_integer(value: f64) -> Option<i64> {
    if !(-INTEGER_LIMIT..=INTEGER_LIMIT).contains(&value) {
        return None;
    }
    // In range, so the cast is exact for integral values; the comparison rejects fractions.
    let integer = value as i64;
    (integer as f64 == value).then_some(integer)
}

/// Lays out the shortest round-trip digits of a finite, non-zero value.
fn shortest(value: f64) -> String {
    // `{:e}` gives the shortest digits that round-trip: "d.ddde<exp>".
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if value < 0.0 { "-" } else { "" };
    format!("{sign}{}", layout(&digits, exponent))
}

/// Places `digits` (d1 d2 ... dn, value d1.d2...dn × 10^exponent) as fpconv's `emit_digits` does.
fn layout(digits: &str, exponent: i32) -> String {
    let count = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    // The power of ten of the last digit.
    let last = exponent - (count - 1);
    let magnitude = exponent.abs();
    if last >= 0 && magnitude < count + 7 {
        return format!("{digits}{}", "0".repeat(last.unsigned_abs() as usize));
    }
    if last < 0 && (last > -7 || magnitude < 4) {
        return plain_fraction(digits, count + last);
    }
    scientific(digits, exponent)
}

/// `digits` with the decimal point after `integer_digits` of them (before, padded, if <= 0).
fn plain_fraction(digits: &str, integer_digits: i32) -> String {
    match usize::try_from(integer_digits) {
        Ok(split) if split > 0 => {
            let (whole, fraction) = digits.split_at(split.min(digits.len()));
            format!("{whole}.{fraction}")
        }
        _ => format!(
            "0.{}{digits}",
            "0".repeat(integer_digits.unsigned_abs() as usize)
        ),
    }
}

/// `d.ddde+x` / `d.ddde-x`, the exponent without leading zeros.
fn scientific(digits: &str, exponent: i32) -> String {
    let (first, rest) = digits.split_at(1.min(digits.len()));
    let point = if rest.is_empty() { "" } else { "." };
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{first}{point}{rest}e{sign}{}", exponent.unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_values() {
        assert_eq!(format_double(f64::NAN), "nan");
        assert_eq!(format_double(-f64::NAN), "nan");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_double(0.0), "0");
        assert_eq!(format_double(-0.0), "-0");
    }

    #[test]
    fn integers_have_no_fraction() {
        assert_eq!(format_double(3.0), "3");
        assert_eq!(format_double(-17.0), "-17");
        assert_eq!(format_double(1e17), "100000000000000000");
        assert_eq!(format_double(4611686018427387904.0), "4611686018427387904");
        // Past LLONG_MAX / 2 the digits path takes over.
        assert_eq!(format_double(9223372036854775808.0), "9223372036854776000");
        assert_eq!(format_double(1e19), "1e+19");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(-1e20), "-1e+20");
        assert_eq!(
            format_double(1.2345678901234568e20),
            "123456789012345680000"
        );
    }

    #[test]
    fn fractions_use_shortest_digits() {
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(0.1), "0.1");
        assert_eq!(format_double(-0.1), "-0.1");
        assert_eq!(format_double(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_double(2.71), "2.71");
        assert_eq!(format_double(1234.5678), "1234.5678");
        assert_eq!(format_double(12345.6), "12345.6");
        assert_eq!(format_double(0.000001), "0.000001");
        assert_eq!(format_double(0.001234), "0.001234");
        // Seven or more fraction digits past the point, and a magnitude of 4 or more: exponent.
        assert_eq!(format_double(0.00012345), "1.2345e-4");
    }

    #[test]
    fn exponents_as_fpconv_writes_them() {
        assert_eq!(format_double(1e-7), "1e-7");
        assert_eq!(format_double(1.5e-7), "1.5e-7");
        assert_eq!(format_double(12345.678901234567), "1.2345678901234567e+4");
        assert_eq!(format_double(1.5e300), "1.5e+300");
        assert_eq!(format_double(1e100), "1e+100");
        assert_eq!(format_double(5e-324), "5e-324");
        assert_eq!(format_double(f64::MAX), "1.7976931348623157e+308");
    }

    #[test]
    fn human_format_has_no_exponent_and_at_most_17_decimals() {
        assert_eq!(format_human(1.5), "1.5");
        assert_eq!(format_human(-3.0), "-3");
        assert_eq!(format_human(0.0), "0");
        assert_eq!(format_human(-0.0), "0");
        assert_eq!(format_human(1.1), "1.1");
        assert_eq!(format_human(1e20), "100000000000000000000");
        assert_eq!(format_human(-1e20), "-100000000000000000000");
        assert_eq!(format_human(1e-7), "0.0000001");
        assert_eq!(format_human(1.5e-17), "0.00000000000000002");
        assert_eq!(format_human(1e-20), "0");
        assert_eq!(format_human(-1e-20), "0");
        assert_eq!(format_human(f64::INFINITY), "inf");
    }

    #[test]
    fn exact_human_format_keeps_all_17_decimals() {
        // GEOPOS's answers for Palermo (13.361389 38.115556) and the point at 0 0, from Redis.
        assert_eq!(
            format_human_exact(13.361389338970184),
            "13.36138933897018433"
        );
        assert_eq!(format_human_exact(38.1155563954963), "38.11555639549629859");
        assert_eq!(format_human_exact(85.05112878), "85.0511287799999991");
        assert_eq!(format_human_exact(180.0), "180");
        assert_eq!(format_human_exact(-0.0), "0");
        assert_eq!(
            format_human_exact(2.682209014892578e-6),
            "0.00000268220901489"
        );
        assert_eq!(format_human_exact(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn output_reads_back_as_the_same_double() {
        for value in [
            0.1,
            1.0 / 3.0,
            2.5e-8,
            6.02214076e23,
            -1e23,
            f64::MIN_POSITIVE,
        ] {
            let text = format_double(value);
            assert_eq!(text.parse::<f64>().expect("parses"), value, "{text}");
        }
    }
}
