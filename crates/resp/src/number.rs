//! Decimal integers as RESP writes them: parsed with Redis's strictness, written without
//! going through `fmt` (length headers are written for every reply).

/// Longest text of an i64: "-9223372036854775808".
const MAX_LEN: usize = 20;

/// Parses a decimal i64 with the rules of Redis's `string2ll`: no sign but '-', no leading
/// zeros, no spaces, no "-0". Lengths on the wire are compared byte for byte with what Redis
/// accepts, so a laxer parser would accept streams Redis refuses.
pub(crate) fn parse_integer(text: &[u8]) -> Option<i64> {
    if text.is_empty() || text.len() > MAX_LEN {
        return None;
    }
    if text == b"0" {
        return Some(0);
    }
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if !matches!(digits.first(), Some(b'1'..=b'9')) {
        return None;
    }
    let magnitude = digits.iter().try_fold(0u64, |total, &byte| {
        let digit = byte.checked_sub(b'0').filter(|digit| *digit <= 9)?;
        total.checked_mul(10)?.checked_add(u64::from(digit))
    })?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Appends `value` in decimal.
pub(crate) fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; MAX_LEN];
    let mut start = MAX_LEN;
    loop {
        start -= 1;
        // The remainder is below 10, so the cast keeps it whole.
        digits[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[start..]);
}

/// Appends `value` in decimal, with a '-' when negative.
pub(crate) fn write_signed(out: &mut Vec<u8>, value: i64) {
    if value < 0 {
        out.push(b'-');
    }
    write_unsigned(out, value.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_string2ll_accepts() {
        assert_eq!(parse_integer(b"0"), Some(0));
        assert_eq!(parse_integer(b"7"), Some(7));
        assert_eq!(parse_integer(b"-12"), Some(-12));
        assert_eq!(parse_integer(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_integer(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn refuses_what_string2ll_refuses() {
        for text in [
            &b""[..],
            b"-",
            b"-0",
            b"+1",
            b"01",
            b" 1",
            b"1 ",
            b"1a",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"18446744073709551616",
            b"123456789012345678901",
        ] {
            assert_eq!(
                parse_integer(text),
                None,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn writes_decimal() {
        let mut out = Vec::new();
        write_signed(&mut out, i64::MIN);
        out.push(b' ');
        write_signed(&mut out, 0);
        out.push(b' ');
        write_unsigned(&mut out, u64::MAX);
        assert_eq!(out, b"-9223372036854775808 0 18446744073709551615");
    }
}
