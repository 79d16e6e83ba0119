//! Random picks: SPOP, SRANDMEMBER, HRANDFIELD, ZRANDMEMBER and RANDOMKEY.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::{is, parse_int, Fault, SYNTAX};

/// The most items a negative count (picks with repeats) may ask for: the reply is built in
/// memory, and Redis would happily build one of any size.
pub const MAX_RANDOM_REPLY: u64 = 1 << 22;

/// A small xorshift generator, seeded from the clock and a counter (no dependency needed:
/// random picks need variety, not cryptographic quality).
pub struct Rng(u64);

impl Rng {
    pub fn new() -> Rng {
        static CALLS: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        // splitmix64 of the clock and the call number, so two calls in one nanosecond differ.
        let mut z = nanos ^ CALLS.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(z | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `k` distinct numbers of `0..n` (`k <= n`), in increasing order: Floyd's sampling, `k`
    /// draws whatever `n` (a set's positions, `Keyspace::fields_at`).
    pub fn distinct_below(&mut self, n: usize, k: usize) -> Vec<usize> {
        assert!(k <= n, "{k} distinct numbers below {n}");
        let mut chosen = std::collections::BTreeSet::new();
        for j in n - k..n {
            let t = self.below(j + 1);
            if !chosen.insert(t) {
                chosen.insert(j);
            }
        }
        chosen.into_iter().collect()
    }

    /// `k` distinct items of `items` (`k <= items.len()`), in random order.
    pub fn pick<T>(&mut self, mut items: Vec<T>, k: usize) -> Vec<T> {
        for i in 0..k {
            let j = i + self.below(items.len() - i);
            items.swap(i, j);
        }
        items.truncate(k);
        items
    }
}

/// Sets and sorted sets of more members than this give random members by their positions
/// (`Keyspace::fields_at`, `Keyspace::zset_members_at`), not by reading every member: an SPOP
/// of one member of a set of a million read the million (decision 237).
const PICKED_BY_POSITION_ABOVE: i64 = 1024;

/// The most random members one command picks by position; more read the whole collection.
const MOST_PICKED_BY_POSITION: u64 = 1024;

/// Whether `picks` random members of a collection of `len` are picked by position: a large
/// collection, and fewer picks than members (a count that takes them all reads them all).
pub fn by_position(len: i64, picks: u64) -> bool {
    len > PICKED_BY_POSITION_ABOVE && picks <= MOST_PICKED_BY_POSITION && picks < len.unsigned_abs()
}

/// What `count` picks of a collection of `len` members ([`by_position`]): `k` distinct ones in
/// random order for `count = k >= 0`, `-count` drawn each on its own (repeats allowed) in the
/// order drawn for a negative one. `fetch` gives the members at positions (strictly
/// increasing, each below `len`), all of them.
pub fn pick_by_position<T: Clone>(
    len: usize,
    count: i64,
    fetch: impl FnOnce(&[usize]) -> Result<Vec<T>, Fault>,
) -> Result<Vec<T>, Fault> {
    let mut rng = Rng::new();
    let k = count.unsigned_abs() as usize;
    if count >= 0 {
        let positions = rng.distinct_below(len, k);
        let members = fetched(fetch(&positions)?, &positions)?;
        return Ok(rng.pick(members, k));
    }
    let draws: Vec<usize> = (0..k).map(|_| rng.below(len)).collect();
    let mut positions = draws.clone();
    positions.sort_unstable();
    positions.dedup();
    let members = fetched(fetch(&positions)?, &positions)?;
    draws
        .iter()
        .map(|draw| {
            let at = positions
                .binary_search(draw)
                .map_err(|_| Fault::corrupt("a drawn position was not looked up".to_string()))?;
            Ok(members[at].clone())
        })
        .collect()
}

/// `members`, which `positions` asked for: all of them, or the count the key's row holds and
/// its rows disagree (a torn read, retried, or damage).
fn fetched<T>(members: Vec<T>, positions: &[usize]) -> Result<Vec<T>, Fault> {
    if members.len() != positions.len() {
        return Err(Fault::corrupt(format!(
            "{} members found at {} positions below the key's count",
            members.len(),
            positions.len()
        )));
    }
    Ok(members)
}

/// The count of SRANDMEMBER, HRANDFIELD or ZRANDMEMBER, in the range Redis accepts.
pub fn parse_random_count(arg: &[u8]) -> Result<i64, Fault> {
    let count = parse_int(arg)?;
    if count == i64::MIN {
        return Err(Fault::err(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    Ok(count)
}

/// HRANDFIELD's and ZRANDMEMBER's arguments after the key, checked in Redis's order (the
/// count, then the option's name `with`, then the count's half range a reply of pairs
/// allows): `None` without a count, else the count and whether the option was given.
pub fn parse_count_with(args: &[Vec<u8>], with: &str) -> Result<Option<(i64, bool)>, Fault> {
    let Some(count) = args.first() else {
        return Ok(None);
    };
    let count = parse_random_count(count)?;
    let paired = match &args[1..] {
        [] => false,
        [option] if is(option, with) => true,
        _ => return Err(Fault::err(SYNTAX)),
    };
    if paired && count.unsigned_abs() > (i64::MAX / 2) as u64 {
        return Err(Fault::err("ERR value is out of range"));
    }
    Ok(Some((count, paired)))
}

/// What a count picks from `all` (not empty), as SRANDMEMBER, HRANDFIELD and ZRANDMEMBER
/// read it: a positive count up to that many distinct items (all of them, in their order,
/// when it covers them: `true`), a negative one exactly `-count` items with repeats, 0
/// none.
pub fn pick_by_count<T: Clone>(all: Vec<T>, count: i64) -> Result<(Vec<T>, bool), Fault> {
    if all.is_empty() {
        return Ok((all, true));
    }
    let mut rng = Rng::new();
    if count < 0 {
        if count.unsigned_abs() > MAX_RANDOM_REPLY {
            return Err(Fault::err(format!(
                "ERR count is beyond tailstore's limit of {MAX_RANDOM_REPLY} members"
            )));
        }
        let picks = (0..count.unsigned_abs())
            .map(|_| all[rng.below(all.len())].clone())
            .collect();
        return Ok((picks, false));
    }
    if count as u64 >= all.len() as u64 {
        return Ok((all, true));
    }
    Ok((rng.pick(all, count as usize), false))
}

/// One random item of `all`, if any.
pub fn pick_one<T>(all: Vec<T>) -> Option<T> {
    if all.is_empty() {
        return None;
    }
    let at = Rng::new().below(all.len());
    all.into_iter().nth(at)
}
