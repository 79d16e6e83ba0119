//! Argument types shared by subcommands.

use std::fmt;
use std::str::FromStr;

/// A byte count written as `4096`, `64KiB`, `20MiB`, `1GiB` (also `K`, `M`, `G`, `KB`…, all
/// binary multiples: storage sizes here are always powers of two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub usize);

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        let number: usize = digits
            .parse()
            .map_err(|_| format!("'{s}' is not a size (examples: 4096, 64KiB, 20MiB, 1GiB)"))?;
        let multiplier: usize = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            other => {
                return Err(format!(
                    "unknown size unit '{other}' in '{s}' (use KiB, MiB or GiB)"
                ))
            }
        };
        number
            .checked_mul(multiplier)
            .map(ByteSize)
            .ok_or_else(|| format!("size '{s}' is too large"))
    }
}

/// [`ByteSize`]'s parser for an option kept as a plain byte count.
pub fn byte_count(text: &str) -> Result<usize, String> {
    text.parse::<ByteSize>().map(|size| size.0)
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        match n {
            n if n >= 1 << 30 && n % (1 << 30) == 0 => write!(f, "{}GiB", n >> 30),
            n if n >= 1 << 20 && n % (1 << 20) == 0 => write!(f, "{}MiB", n >> 20),
            n if n >= 1 << 10 && n % (1 << 10) == 0 => write!(f, "{}KiB", n >> 10),
            n => write!(f, "{n}B"),
        }
    }
}

/// The longest time an option in seconds takes (about 31 years): a longer one would not
/// fit the clocks' durations, and is a typing mistake anyway.
const MAX_SECONDS: f64 = 1e9;

/// A number of seconds: finite, not negative, at most [`MAX_SECONDS`] (each option checks
/// its own lower bound, zero or more).
pub fn seconds(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(0.0..=MAX_SECONDS).contains(&value) {
        return Err(format!("{text} is not between 0 and {MAX_SECONDS} seconds"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!("64KiB".parse(), Ok(ByteSize(65536)));
        assert_eq!("20MiB".parse(), Ok(ByteSize(20 << 20)));
        assert_eq!("4096".parse(), Ok(ByteSize(4096)));
        assert_eq!(" 1 GiB".parse(), Ok(ByteSize(1 << 30)));
        assert!("12XB".parse::<ByteSize>().is_err());
        assert!("".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(20 << 20).to_string(), "20MiB");
        assert_eq!(ByteSize(100).to_string(), "100B");
    }
}
