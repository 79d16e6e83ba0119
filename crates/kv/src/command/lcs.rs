//! LCS: the longest common subsequence of two strings, as Redis 7.0 computes it — the same
//! table and the same walk back through it, so that of several subsequences of the longest
//! length the one Redis answers is answered, with the same match ranges.

use tailstore_resp::Reply;

use super::{bulk, is, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::{KeyMeta, Kind};

/// The most bytes Redis lets LCS's table (four a cell) take: `proto-max-bulk-len`, at its
/// default, since a command does not see tailstore's `--max-bulk`. The table here keeps a
/// bit a cell, but the refusal is Redis's, so that both servers compute the same LCSs.
const MAX_TABLE_BYTES: u64 = 512 * 1024 * 1024;

const TABLE_TOO_LARGE: &str =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";

struct Options {
    idx: bool,
    len: bool,
    with_match_len: bool,
    min_match_len: u64,
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]
pub fn lcs(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    // Both keys are looked up before either's kind is checked, as in Redis.
    let looked_up = [ctx.meta(&args[1])?, ctx.meta(&args[2])?];
    let [a, b] = looked_up.map(string_meta);
    let (a, b) = (a?, b?);
    let options = parse_options(&args[3..])?;
    // From the stored lengths, before either string is read.
    check_table_size(stored_len(&a), stored_len(&b))?;
    let (a, b) = (operand(ctx, a)?, operand(ctx, b)?);
    let table = Table::of(&a, &b);
    if options.len && !options.idx {
        return Ok(Reply::Int(i64::from(table.length())));
    }
    let walk = table.walk_back(&a, &b, &options);
    if !options.idx {
        return Ok(bulk(walk.subsequence));
    }
    Ok(Reply::Map(vec![
        (bulk("matches"), Reply::Array(walk.ranges)),
        (bulk("len"), Reply::Int(i64::from(table.length()))),
    ]))
}

/// A key LCS looked up (`meta`), if it holds a string; Redis's error of its own for another
/// kind.
fn string_meta(meta: Option<KeyMeta>) -> Result<Option<KeyMeta>, Fault> {
    match meta {
        Some(meta) if meta.kind != Kind::String => Err(Fault::err(
            "ERR The specified keys must contain string values",
        )),
        meta => Ok(meta),
    }
}

fn stored_len(meta: &Option<KeyMeta>) -> u64 {
    meta.as_ref().map_or(0, |meta| meta.len.max(0) as u64)
}

/// Redis's refusal of a table of `(a_len + 1) × (b_len + 1)` cells of four bytes past
/// `proto-max-bulk-len`.
fn check_table_size(a_len: u64, b_len: u64) -> Result<(), Fault> {
    let bytes = (a_len + 1).saturating_mul(b_len + 1).saturating_mul(4);
    if bytes > MAX_TABLE_BYTES {
        return Err(Fault::err(TABLE_TOO_LARGE));
    }
    Ok(())
}

/// The string of a key LCS looked up: empty if absent.
fn operand(ctx: &mut Ctx, meta: Option<KeyMeta>) -> Result<Vec<u8>, Fault> {
    match meta {
        Some(meta) => Ok(super::strings::string_of(ctx, &meta)?.unwrap_or_default()),
        None => Ok(Vec::new()),
    }
}

fn parse_options(args: &[Vec<u8>]) -> Result<Options, Fault> {
    let mut options = Options {
        idx: false,
        len: false,
        with_match_len: false,
        min_match_len: 0,
    };
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if is(arg, "IDX") {
            options.idx = true;
        } else if is(arg, "LEN") {
            options.len = true;
        } else if is(arg, "WITHMATCHLEN") {
            options.with_match_len = true;
        } else if is(arg, "MINMATCHLEN") && i + 1 < args.len() {
            // A negative length counts as 0, as in Redis.
            options.min_match_len = parse_int(&args[i + 1])?.max(0) as u64;
            i += 1;
        } else {
            return Err(Fault::err(SYNTAX));
        }
        i += 1;
    }
    if options.idx && options.len {
        return Err(Fault::err(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(options)
}

/// What the walk back needs of Redis's table of LCS lengths (`LCS(i, j)`: of the first `i`
/// bytes of one string and the first `j` of the other): at a cell whose bytes differ, only
/// whether `LCS(i-1, j) > LCS(i, j-1)`, one bit. The lengths themselves are computed a row
/// at a time, so a table takes a bit per cell where Redis's takes four bytes.
struct Table {
    width: usize,
    up_is_longer: Vec<u64>,
    length: u32,
}

/// What the walk back collects: the subsequence, and the match ranges IDX answers.
struct Walk {
    subsequence: Vec<u8>,
    ranges: Vec<Reply>,
}

/// A run of matching bytes, at `a_start..=a_end` in one string and from `b_start` on in the
/// other (the same length).
struct Run {
    a_start: usize,
    a_end: usize,
    b_start: usize,
}

impl Table {
    fn of(a: &[u8], b: &[u8]) -> Table {
        let width = b.len() + 1;
        let mut up_is_longer = vec![0u64; ((a.len() + 1) * width).div_ceil(64)];
        let mut above = vec![0u32; width];
        let mut row = vec![0u32; width];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                row[j] = if a[i - 1] == b[j - 1] {
                    above[j - 1] + 1
                } else {
                    let (up, left) = (above[j], row[j - 1]);
                    if up > left {
                        let cell = i * width + j;
                        up_is_longer[cell / 64] |= 1 << (cell % 64);
                    }
                    up.max(left)
                };
            }
            std::mem::swap(&mut above, &mut row);
        }
        Table {
            width,
            up_is_longer,
            length: above[b.len()],
        }
    }

    fn up_is_longer(&self, i: usize, j: usize) -> bool {
        let cell = i * self.width + j;
        self.up_is_longer[cell / 64] & (1 << (cell % 64)) != 0
    }

    fn length(&self) -> u32 {
        self.length
    }

    /// From the table's last cell back to a first byte: a match is taken, else the step
    /// toward the larger neighbour (toward `j - 1` on a tie, as Redis steps). A run of
    /// matches is a range, reported when a step leaves it or the walk reaches a first byte.
    fn walk_back(&self, a: &[u8], b: &[u8], options: &Options) -> Walk {
        let mut subsequence = vec![0u8; self.length() as usize];
        let mut ranges = Vec::new();
        let mut left = subsequence.len();
        let mut run: Option<Run> = None;
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            let ended = if a[i - 1] == b[j - 1] {
                left -= 1;
                subsequence[left] = a[i - 1];
                let current = run.get_or_insert(Run {
                    a_start: i,
                    a_end: i - 1,
                    b_start: j,
                });
                // Each match extends the run one byte back (a match follows a match only
                // diagonally, so the run is contiguous).
                current.a_start -= 1;
                current.b_start -= 1;
                i -= 1;
                j -= 1;
                current.a_start == 0 || current.b_start == 0
            } else {
                if self.up_is_longer(i, j) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                run.is_some()
            };
            if ended {
                if let Some(done) = run.take() {
                    add_range(&mut ranges, &done, options);
                }
            }
        }
        Walk {
            subsequence,
            ranges,
        }
    }
}

/// IDX's entry for a run, if it is at least MINMATCHLEN long: its range in each string, and
/// its length with WITHMATCHLEN.
fn add_range(ranges: &mut Vec<Reply>, run: &Run, options: &Options) {
    let len = run.a_end - run.a_start + 1;
    if (len as u64) < options.min_match_len {
        return;
    }
    let span = |start: usize| {
        Reply::Array(vec![
            Reply::Int(start as i64),
            Reply::Int((start + len - 1) as i64),
        ])
    };
    let mut entry = vec![span(run.a_start), span(run.b_start)];
    if options.with_match_len {
        entry.push(Reply::Int(len as i64));
    }
    ranges.push(Reply::Array(entry));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(min_match_len: u64) -> Options {
        Options {
            idx: true,
            len: false,
            with_match_len: true,
            min_match_len,
        }
    }

    /// Every integer of a reply, depth first.
    fn ints(reply: &Reply, into: &mut Vec<i64>) {
        match reply {
            Reply::Int(v) => into.push(*v),
            Reply::Array(items) => items.iter().for_each(|item| ints(item, into)),
            other => panic!("unexpected reply {other:?}"),
        }
    }

    /// Each IDX entry as [a_start, a_end, b_start, b_end, len].
    fn ranges(a: &str, b: &str, min: u64) -> Vec<Vec<i64>> {
        let table = Table::of(a.as_bytes(), b.as_bytes());
        let walk = table.walk_back(a.as_bytes(), b.as_bytes(), &options(min));
        walk.ranges
            .iter()
            .map(|entry| {
                let mut found = Vec::new();
                ints(entry, &mut found);
                found
            })
            .collect()
    }

    #[test]
    fn the_documented_example_gives_redis_s_answer() {
        // Redis 7.0.15: LCS of "ohmytext" and "mynewtext" is "mytext", IDX WITHMATCHLEN
        // 1) 4 7 / 5 8 / 4  2) 2 3 / 0 1 / 2.
        let table = Table::of(b"ohmytext", b"mynewtext");
        assert_eq!(table.length(), 6);
        let walk = table.walk_back(b"ohmytext", b"mynewtext", &options(0));
        assert_eq!(walk.subsequence, b"mytext");
        assert_eq!(
            ranges("ohmytext", "mynewtext", 0),
            vec![vec![4, 7, 5, 8, 4], vec![2, 3, 0, 1, 2]]
        );
        assert_eq!(
            ranges("ohmytext", "mynewtext", 4),
            vec![vec![4, 7, 5, 8, 4]]
        );
    }

    #[test]
    fn the_table_is_refused_where_redis_refuses_it() {
        // Redis 7.0.15 with proto-max-bulk-len 512 MiB computes two 11,584-byte strings and
        // refuses two of 11,585 bytes: 11,586² × 4 bytes is past 512 MiB.
        assert!(check_table_size(11_584, 11_584).is_ok());
        for (a, b) in [(11_585, 11_584), (1 << 27, 0), (u64::MAX - 1, u64::MAX - 1)] {
            match check_table_size(a, b) {
                Err(Fault::Reply(Reply::Error(text))) => assert_eq!(text, TABLE_TOO_LARGE),
                other => panic!("{a} × {b}: {other:?}"),
            }
        }
        assert!(check_table_size((1 << 27) - 1, 0).is_ok());
    }

    #[test]
    fn empty_and_disjoint_strings_have_no_matches() {
        assert_eq!(Table::of(b"", b"abc").length(), 0);
        assert!(ranges("abc", "xyz", 0).is_empty());
        assert!(ranges("", "", 0).is_empty());
    }
}
