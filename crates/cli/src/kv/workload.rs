//! What the load generator asks for: which operation (the SET:GET ratio), which key (random or
//! sequential over the key space) and the value bytes (built once, shared by every SET).

use std::fmt;
use std::str::FromStr;

use clap::ValueEnum;

/// SETs to GETs, as memtier writes it: `1:10` is one SET for every ten GETs, `1:0` only SETs,
/// `0:1` only GETs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub set: u32,
    pub get: u32,
}

impl Ratio {
    /// The ratio with `set_pct` percent SETs, in lowest terms (20 → 1:4, 100 → 1:0).
    pub fn from_set_percent(set_pct: u32) -> Ratio {
        let set_pct = set_pct.min(100);
        let (set, get) = (set_pct, 100 - set_pct);
        let g = gcd(set, get).max(1);
        Ratio {
            set: set / g,
            get: get / g,
        }
    }

    /// Whether the `n`th request of a connection (from 0) is a SET: each cycle of
    /// `set + get` requests starts with its SETs, so the ratio holds exactly over every cycle.
    #[inline]
    pub fn is_set(&self, n: u64) -> bool {
        n % u64::from(self.set + self.get) < u64::from(self.set)
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl FromStr for Ratio {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!("'{s}' is not a SET:GET ratio (examples: 1:10, 1:1, 1:0 for only SETs, 0:1 for only GETs)")
        };
        let (set, get) = s.trim().split_once(':').ok_or_else(bad)?;
        let set: u32 = set.trim().parse().map_err(|_| bad())?;
        let get: u32 = get.trim().parse().map_err(|_| bad())?;
        if set == 0 && get == 0 {
            return Err(format!(
                "'{s}': the ratio needs at least one SET or one GET"
            ));
        }
        if set.checked_add(get).is_none_or(|sum| sum > 1_000_000) {
            return Err(format!("'{s}': SET + GET must be at most 1000000"));
        }
        Ok(Ratio { set, get })
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.set, self.get)
    }
}

/// How keys are picked from the key space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KeyPattern {
    /// Uniformly at random over the whole key space.
    Random,
    /// In order: each thread walks its own slice of the key space (thread t of T: keys
    /// t·K/T up to (t+1)·K/T), wrapping around at its end, its connections taking the next
    /// key in turn. A run of K/(T·N) requests per client writes every key exactly once.
    Sequential,
}

impl KeyPattern {
    pub fn name(self) -> &'static str {
        match self {
            KeyPattern::Random => "random",
            KeyPattern::Sequential => "sequential",
        }
    }
}

/// SplitMix64: a tiny, fast generator, plenty for picking keys.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`), by multiply-and-shift (no division).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// The keys one thread asks for, written into a reused buffer: `prefix` + decimal number.
pub struct KeyGen {
    pattern: KeyPattern,
    rng: SplitMix64,
    /// The thread's slice of the key space (sequential), or all of it (random).
    lo: u64,
    span: u64,
    next: u64,
    key: Vec<u8>,
    prefix_len: usize,
}

impl KeyGen {
    /// The generator of thread `thread` of `threads`.
    pub fn new(
        pattern: KeyPattern,
        prefix: &[u8],
        key_space: u64,
        thread: usize,
        threads: usize,
        seed: u64,
    ) -> Self {
        let (t, n) = (thread as u64, threads.max(1) as u64);
        let (mut lo, hi) = (key_space * t / n, key_space * (t + 1) / n);
        let mut span = hi - lo;
        if pattern == KeyPattern::Random || span == 0 {
            lo = 0;
            span = key_space.max(1);
        }
        let mut key = Vec::with_capacity(prefix.len() + 20);
        key.extend_from_slice(prefix);
        KeyGen {
            pattern,
            rng: SplitMix64::new(seed ^ (t + 1).wrapping_mul(0xA076_1D64_78BD_642F)),
            lo,
            span,
            next: 0,
            key,
            prefix_len: prefix.len(),
        }
    }

    /// The next key number.
    #[inline]
    pub fn next_number(&mut self) -> u64 {
        match self.pattern {
            KeyPattern::Random => self.rng.below(self.span),
            KeyPattern::Sequential => {
                let k = self.lo + self.next;
                self.next += 1;
                if self.next == self.span {
                    self.next = 0;
                }
                k
            }
        }
    }

    /// The next key's bytes (valid until the next call).
    #[inline]
    pub fn next_key(&mut self) -> &[u8] {
        let number = self.next_number();
        self.key.truncate(self.prefix_len);
        push_decimal(&mut self.key, number);
        &self.key
    }
}

/// Appends `n` in decimal without going through `fmt` (and without allocating, once `out`
/// has room for 20 more bytes).
#[inline]
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The value every SET writes: `size` printable bytes (a repeating pattern, so that the data
/// is not all one byte yet costs nothing to produce).
pub fn value_bytes(size: usize) -> Vec<u8> {
    const PATTERN: &[u8] =
        b"tailstore-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVWXYZ.";
    PATTERN.iter().copied().cycle().take(size).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_parse_and_cycle() {
        assert_eq!("1:10".parse(), Ok(Ratio { set: 1, get: 10 }));
        assert_eq!(" 1 : 0 ".parse(), Ok(Ratio { set: 1, get: 0 }));
        assert!("abc".parse::<Ratio>().is_err());
        assert!("1".parse::<Ratio>().is_err());
        assert!("0:0".parse::<Ratio>().is_err());
        assert!("-1:2".parse::<Ratio>().is_err());
        let r = Ratio { set: 1, get: 3 };
        let sets = (0..400).filter(|&n| r.is_set(n)).count();
        assert_eq!(sets, 100);
        assert!(Ratio { set: 1, get: 0 }.is_set(7));
        assert!(!Ratio { set: 0, get: 1 }.is_set(0));
        assert_eq!(Ratio::from_set_percent(20), Ratio { set: 1, get: 4 });
        assert_eq!(Ratio::from_set_percent(100), Ratio { set: 1, get: 0 });
        assert_eq!(Ratio::from_set_percent(0), Ratio { set: 0, get: 1 });
        assert_eq!(Ratio::from_set_percent(50).to_string(), "1:1");
    }

    #[test]
    fn sequential_keys_cover_each_thread_slice() {
        let mut seen = Vec::new();
        for t in 0..3 {
            let mut keys = KeyGen::new(KeyPattern::Sequential, b"k:", 10, t, 3, 1);
            let slice: Vec<u64> = (0..4).map(|_| keys.next_number()).collect();
            seen.push(slice);
        }
        assert_eq!(
            seen,
            vec![vec![0, 1, 2, 0], vec![3, 4, 5, 3], vec![6, 7, 8, 9]]
        );
        let mut keys = KeyGen::new(KeyPattern::Sequential, b"key:", 100, 0, 1, 1);
        assert_eq!(keys.next_key(), b"key:0");
        assert_eq!(keys.next_key(), b"key:1");
    }

    #[test]
    fn random_keys_stay_in_the_key_space() {
        let mut keys = KeyGen::new(KeyPattern::Random, b"", 7, 1, 2, 42);
        let mut hit = [false; 7];
        for _ in 0..1000 {
            let k = keys.next_number();
            assert!(k < 7);
            hit[k as usize] = true;
        }
        assert!(hit.iter().all(|&h| h));
        let mut out = Vec::new();
        push_decimal(&mut out, 0);
        push_decimal(&mut out, u64::MAX);
        assert_eq!(out, b"018446744073709551615");
        assert_eq!(value_bytes(3), b"tai");
    }
}
