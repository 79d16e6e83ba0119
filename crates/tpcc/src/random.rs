//! The specification's random generators (clauses 2.1.6 and 4.3.2).
//!
//! Every generator takes the random number generator as an argument, so that a seeded
//! [`StdRng`] (see [`seeded`]) reproduces a load or a terminal's inputs exactly.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// `A` of NURand for `C_LAST` (clause 2.1.6).
pub const A_C_LAST: u32 = 255;
/// `A` of NURand for `C_ID`.
pub const A_C_ID: u32 = 1023;
/// `A` of NURand for `OL_I_ID`.
pub const A_OL_I_ID: u32 = 8191;

/// The ten syllables of customer last names (clause 4.3.2.3).
pub const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The marker 10% of `i_data` and `s_data` hold (clause 4.3.3.1).
pub const ORIGINAL: &str = "ORIGINAL";

const ALPHANUMERIC: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A generator seeded with `seed`.
pub fn seeded(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A seed for the `index`-th of many generators derived from `seed` (SplitMix64), so that
/// generators of neighbouring indexes are unrelated.
pub fn derive_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The constants `C` of NURand: one per `A` (clause 2.1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NuRandConstants {
    /// `C` for `C_LAST` (A = 255), in 0 ..= 255.
    pub c_last: u32,
    /// `C` for `C_ID` (A = 1023), in 0 ..= 1023.
    pub c_id: u32,
    /// `C` for `OL_I_ID` (A = 8191), in 0 ..= 8191.
    pub ol_i_id: u32,
}

impl NuRandConstants {
    /// Constants for the initial population, each uniform in 0 ..= A.
    pub fn for_load<R: Rng + ?Sized>(rng: &mut R) -> NuRandConstants {
        NuRandConstants {
            c_last: rng.gen_range(0..=A_C_LAST),
            c_id: rng.gen_range(0..=A_C_ID),
            ol_i_id: rng.gen_range(0..=A_OL_I_ID),
        }
    }

    /// Constants for a run against a database loaded with `load`: `c_last` uniform among
    /// the values that obey [`c_last_delta_ok`] (clause 2.1.6.1), the others uniform in
    /// 0 ..= A (the specification lets them be anything, the load's values included).
    pub fn for_run<R: Rng + ?Sized>(rng: &mut R, load: &NuRandConstants) -> NuRandConstants {
        let allowed: Vec<u32> = (0..=A_C_LAST)
            .filter(|&run| c_last_delta_ok(load.c_last, run))
            .collect();
        // Never empty: c_load + 65 <= 255 or c_load - 65 >= 0 always holds.
        let c_last = allowed[rng.gen_range(0..allowed.len())];
        NuRandConstants {
            c_last,
            c_id: rng.gen_range(0..=A_C_ID),
            ol_i_id: rng.gen_range(0..=A_OL_I_ID),
        }
    }

    /// Whether these run-time constants may be used against a database loaded with `load`.
    pub fn valid_for_run(&self, load: &NuRandConstants) -> bool {
        c_last_delta_ok(load.c_last, self.c_last)
            && self.c_id <= A_C_ID
            && self.ol_i_id <= A_OL_I_ID
    }
}

/// Clause 2.1.6.1: `C_delta = |C_run - C_load|` for `C_LAST` must lie in 65 ..= 119 and
/// differ from 96 and 112 (which would make the run's name distribution line up with the
/// load's).
pub fn c_last_delta_ok(c_load: u32, c_run: u32) -> bool {
    let delta = c_load.abs_diff(c_run);
    (65..=119).contains(&delta) && delta != 96 && delta != 112 && c_run <= A_C_LAST
}

/// `NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x`.
pub fn nurand<R: Rng + ?Sized>(rng: &mut R, a: u32, c: u32, x: u32, y: u32) -> u32 {
    let r = rng.gen_range(0..=a) | rng.gen_range(x..=y);
    ((r + c) % (y - x + 1)) + x
}

/// A customer's last name from a number in 0 ..= 999: one syllable per decimal digit.
pub fn last_name(number: u32) -> String {
    let digits = [number / 100 % 10, number / 10 % 10, number % 10];
    digits.iter().map(|&d| SYLLABLES[d as usize]).collect()
}

/// The last name of a run-time customer selection: `NURand(255, 0, 999)`.
pub fn random_last_name<R: Rng + ?Sized>(rng: &mut R, c: &NuRandConstants) -> String {
    last_name(nurand(rng, A_C_LAST, c.c_last, 0, 999))
}

/// A run-time customer id: `NURand(1023, 1, 3000)`.
pub fn random_customer_id<R: Rng + ?Sized>(rng: &mut R, c: &NuRandConstants) -> u32 {
    nurand(
        rng,
        A_C_ID,
        c.c_id,
        1,
        crate::schema::CUSTOMERS_PER_DISTRICT,
    )
}

/// A run-time item id: `NURand(8191, 1, 100000)`.
pub fn random_item_id<R: Rng + ?Sized>(rng: &mut R, c: &NuRandConstants) -> u32 {
    nurand(rng, A_OL_I_ID, c.ol_i_id, 1, crate::schema::ITEMS)
}

/// A random a-string of `min ..= max` alphanumeric characters (clause 4.3.2.2).
pub fn a_string<R: Rng + ?Sized>(rng: &mut R, min: usize, max: usize) -> String {
    let len = rng.gen_range(min..=max);
    let mut out = String::with_capacity(len);
    push_alphanumeric(rng, len, &mut out);
    out
}

/// Appends `len` uniform alphanumeric characters. Ten characters per 64 random bits
/// (6 bits each, the two values above 61 rejected): the load draws ~10^8 of them, so one
/// `gen_range` per character would be a visible part of its time.
fn push_alphanumeric<R: Rng + ?Sized>(rng: &mut R, len: usize, out: &mut String) {
    let (mut bits, mut left, mut pushed) = (0u64, 0, 0);
    while pushed < len {
        if left == 0 {
            bits = rng.next_u64();
            left = 10;
        }
        let v = (bits & 63) as usize;
        bits >>= 6;
        left -= 1;
        if let Some(&c) = ALPHANUMERIC.get(v) {
            out.push(char::from(c));
            pushed += 1;
        }
    }
}

/// A random n-string of `min ..= max` digits (clause 4.3.2.2).
pub fn n_string<R: Rng + ?Sized>(rng: &mut R, min: usize, max: usize) -> String {
    let len = rng.gen_range(min..=max);
    (0..len)
        .map(|_| char::from(b'0' + rng.gen_range(0..10u8)))
        .collect()
}

/// A zip code: a random n-string of 4 digits and the constant "11111" (clause 4.3.2.7).
pub fn zip<R: Rng + ?Sized>(rng: &mut R) -> String {
    let mut zip = n_string(rng, 4, 4);
    zip.push_str("11111");
    zip
}

/// `i_data` or `s_data`: an a-string of `min ..= max` characters; in 10% of them, selected
/// at random, "ORIGINAL" at a random position (clause 4.3.3.1).
pub fn data_with_original<R: Rng + ?Sized>(rng: &mut R, min: usize, max: usize) -> String {
    let mut data = a_string(rng, min, max);
    if data.len() >= ORIGINAL.len() && rng.gen_ratio(1, 10) {
        let at = rng.gen_range(0..=data.len() - ORIGINAL.len());
        // The string is ASCII, so byte positions are character boundaries.
        data.replace_range(at..at + ORIGINAL.len(), ORIGINAL);
    }
    data
}

/// A random decimal in `min ..= max` of the scaled integers (e.g. cents).
pub fn scaled<R: Rng + ?Sized>(rng: &mut R, min: i64, max: i64) -> i64 {
    rng.gen_range(min..=max)
}

/// A random id in `min ..= max` different from `not` (which must lie in the range, and the
/// range must hold another value).
pub fn other_id<R: Rng + ?Sized>(rng: &mut R, min: u32, max: u32, not: u32) -> u32 {
    // Draw from one fewer value and skip `not`: uniform over the others, no retry loop.
    let v = rng.gen_range(min..max);
    if v >= not {
        v + 1
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_are_syllables_of_the_digits() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
        assert_eq!(last_name(40), "BARPRESBAR");
        let longest = (0..1000).map(|n| last_name(n).len()).max();
        assert_eq!(longest, Some(15), "fits c_last VARCHAR(16)");
        let distinct: std::collections::HashSet<String> = (0..1000).map(last_name).collect();
        assert_eq!(distinct.len(), 1000);
    }

    #[test]
    fn c_rule_of_clause_2_1_6_1() {
        assert!(c_last_delta_ok(0, 65));
        assert!(c_last_delta_ok(200, 81));
        assert!(c_last_delta_ok(10, 129));
        assert!(!c_last_delta_ok(0, 64));
        assert!(!c_last_delta_ok(0, 120));
        assert!(!c_last_delta_ok(0, 96));
        assert!(!c_last_delta_ok(150, 38));
        assert!(!c_last_delta_ok(0, 112));
        assert!(!c_last_delta_ok(0, 256 + 65), "beyond A");
        let mut rng = seeded(7);
        for c_load in 0..=A_C_LAST {
            let load = NuRandConstants {
                c_last: c_load,
                c_id: 0,
                ol_i_id: 0,
            };
            for _ in 0..20 {
                let run = NuRandConstants::for_run(&mut rng, &load);
                assert!(run.valid_for_run(&load), "{load:?} {run:?}");
            }
        }
    }

    #[test]
    fn run_constants_cover_every_allowed_value() {
        let load = NuRandConstants {
            c_last: 100,
            c_id: 5,
            ol_i_id: 5,
        };
        let mut rng = seeded(1);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..5000 {
            seen.insert(NuRandConstants::for_run(&mut rng, &load).c_last);
        }
        let allowed = (0..=A_C_LAST).filter(|&r| c_last_delta_ok(100, r)).count();
        assert_eq!(seen.len(), allowed);
    }

    /// The exact distribution of NURand(A, x, y) with constant `c`, by enumerating both
    /// random draws.
    fn exact(a: u32, c: u32, x: u32, y: u32) -> Vec<f64> {
        let n = (y - x + 1) as usize;
        let mut p = vec![0.0; n];
        let weight = 1.0 / (f64::from(a + 1) * n as f64);
        for r1 in 0..=a {
            for r2 in x..=y {
                p[(((r1 | r2) + c) % (y - x + 1)) as usize] += weight;
            }
        }
        p
    }

    /// NURand's shape: draws follow the exact distribution (total variation distance),
    /// which is far from uniform; the most frequent values come several times as often as
    /// the average.
    #[test]
    fn nurand_distribution() {
        let mut rng = seeded(42);
        for &(a, x, y) in &[(255, 0, 999), (1023, 1, 3000)] {
            let c = rng.gen_range(0..=a);
            let n = (y - x + 1) as usize;
            let draws = 40 * n;
            let mut counts = vec![0u32; n];
            for _ in 0..draws {
                let v = nurand(&mut rng, a, c, x, y);
                assert!((x..=y).contains(&v));
                counts[(v - x) as usize] += 1;
            }
            let p = exact(a, c, x, y);
            let tv =
                |q: &dyn Fn(usize) -> f64| (0..n).map(|i| (p[i] - q(i)).abs()).sum::<f64>() / 2.0;
            let observed = tv(&|i| f64::from(counts[i]) / draws as f64);
            let from_uniform = tv(&|_| 1.0 / n as f64);
            assert!(
                observed < 0.08,
                "A={a}: {observed} from the exact distribution"
            );
            assert!(
                from_uniform > 0.2,
                "A={a}: only {from_uniform} from uniform"
            );
            let max = f64::from(counts.iter().copied().max().unwrap_or(0));
            assert!(max > 3.0 * 40.0, "A={a}: max {max}");
        }
        // A = 8191 over 100,000 items: in range and skewed.
        let c = rng.gen_range(0..=A_OL_I_ID);
        let mut counts = vec![0u32; 100_000];
        for _ in 0..1_000_000 {
            let v = nurand(&mut rng, A_OL_I_ID, c, 1, 100_000);
            assert!((1..=100_000).contains(&v));
            counts[(v - 1) as usize] += 1;
        }
        let mut sorted = counts.clone();
        sorted.sort_unstable();
        assert!(f64::from(sorted[99_999]) > 3.0 * 10.0 && sorted[50_000] < 10);
    }

    /// Run-time last names: three syllables each, distributed as NURand(255, 0, 999).
    #[test]
    fn last_name_distribution() {
        let numbers: std::collections::HashMap<String, usize> =
            (0..1000).map(|n| (last_name(n), n as usize)).collect();
        let mut rng = seeded(77);
        let c = NuRandConstants::for_load(&mut rng);
        let draws = 40_000;
        let mut counts = vec![0u32; 1000];
        for _ in 0..draws {
            let name = random_last_name(&mut rng, &c);
            let Some(&n) = numbers.get(&name) else {
                panic!("{name} is not three syllables")
            };
            counts[n] += 1;
        }
        let p = exact(A_C_LAST, c.c_last, 0, 999);
        let tv: f64 = (0..1000)
            .map(|i| (p[i] - f64::from(counts[i]) / f64::from(draws)).abs())
            .sum::<f64>()
            / 2.0;
        assert!(tv < 0.08, "{tv}");
    }

    #[test]
    fn nurand_matches_its_formula() {
        // With x = 0 and y = 2^k - 1 >= A, random(0, A) | random(0, y) sets bits with
        // probability above 1/2 for the low bits: the mean exceeds the midpoint.
        let mut rng = seeded(3);
        let draws = 200_000;
        let sum: u64 = (0..draws)
            .map(|_| u64::from(nurand(&mut rng, 255, 0, 0, 1023)))
            .sum();
        let mean = sum as f64 / draws as f64;
        // E = E[high bits] + E[low 8 bits | OR] = 2 bits of 1/2 (768/2 = 384) + 255 * 3/4.
        let expected = 384.0 + 255.0 * 0.75;
        assert!((mean - expected).abs() < 3.0, "mean {mean} vs {expected}");
    }

    #[test]
    fn strings() {
        let mut rng = seeded(9);
        let mut originals = 0;
        for _ in 0..10_000 {
            let s = a_string(&mut rng, 26, 50);
            assert!((26..=50).contains(&s.len()));
            assert!(s.bytes().all(|b| b.is_ascii_alphanumeric()));
            let d = data_with_original(&mut rng, 26, 50);
            assert!((26..=50).contains(&d.len()));
            originals += usize::from(d.contains(ORIGINAL));
        }
        // 10% by construction (and a random 26..50 string almost never holds it by chance).
        assert!((800..=1200).contains(&originals), "{originals}");
        let z = zip(&mut rng);
        assert_eq!(z.len(), 9);
        assert!(z.ends_with("11111") && z.bytes().all(|b| b.is_ascii_digit()));
        let phone = n_string(&mut rng, 16, 16);
        assert_eq!(phone.len(), 16);
        assert!(phone.bytes().all(|b| b.is_ascii_digit()));
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2000 {
            seen.extend(a_string(&mut rng, 10, 10).into_bytes());
        }
        assert_eq!(seen.len(), 62, "every alphanumeric character occurs");
    }

    #[test]
    fn other_id_is_uniform_and_never_the_excluded_one() {
        let mut rng = seeded(5);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            let v = other_id(&mut rng, 1, 5, 3);
            counts[v as usize] += 1;
        }
        assert_eq!(counts[3], 0);
        assert_eq!(counts[0], 0);
        for v in [1, 2, 4, 5] {
            assert!((14_000..16_000).contains(&counts[v]), "{counts:?}");
        }
    }
}
