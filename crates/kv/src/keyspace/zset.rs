//! Sorted-set members in `kv_zset` (keyed by the owning key's id), with scores as order-preserving integers so that the
//! `by_score` index orders members by (score, member) as Redis does.

use std::ops::Bound;

use tailstore_engine::{KeyRange, Transaction};
use tailstore_storage::{ScanDirection, Value};

use super::meta::{bytes, int};
use super::Keyspace;
use crate::command::Fault;

/// The i64 whose signed order is the f64's numeric order (NaN never gets here; -0 is 0).
pub fn score_key(score: f64) -> i64 {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    (ordered ^ (1 << 63)) as i64
}

pub fn score_of_key(key: i64) -> f64 {
    let ordered = (key as u64) ^ (1 << 63);
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    f64::from_bits(bits)
}

fn member_key(owner: i64, member: &[u8]) -> Vec<Value> {
    vec![Value::Int(owner), Value::Bytes(member.to_vec())]
}

fn prefix(owner: i64) -> Vec<Value> {
    vec![Value::Int(owner)]
}

impl Keyspace {
    /// A member's score, if it is in the set.
    pub(crate) fn member_score(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        member: &[u8],
    ) -> Result<Option<f64>, Fault> {
        let row = txn.get(&self.zset, &member_key(owner, member))?;
        row.map(|row| Ok(score_of_key(int(&row[2])?))).transpose()
    }

    /// Adds a member or changes its score (`had` says whether it was there).
    pub(crate) fn put_member(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        member: &[u8],
        score: f64,
        had: bool,
    ) -> Result<(), Fault> {
        let mut row = member_key(owner, member);
        row.push(Value::Int(score_key(score)));
        if had {
            txn.update(&self.zset, &row)?;
        } else {
            txn.insert(&self.zset, &row)?;
        }
        Ok(())
    }

    pub(crate) fn delete_member(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        member: &[u8],
    ) -> Result<bool, Fault> {
        Ok(txn.delete(&self.zset, &member_key(owner, member))?)
    }

    /// The members, with their scores, at `positions` (strictly increasing) among the set's
    /// members in byte order: the rows before each are passed over, not read
    /// (`Transaction::rows_at`, whose caveat holds: the key's row must be read as well).
    pub(crate) fn zset_members_at(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        positions: &[usize],
    ) -> Result<Vec<(Vec<u8>, f64)>, Fault> {
        let range = KeyRange::prefix(prefix(owner));
        txn.rows_at(&self.zset, &range, positions)?
            .iter()
            .map(|row| Ok((bytes(&row[1])?.to_vec(), score_of_key(int(&row[2])?))))
            .collect()
    }

    /// Up to `limit` members with their scores from one end of the set (the lowest scores
    /// first when `direction` is ascending).
    pub(crate) fn members_from_end(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        direction: ScanDirection,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, f64)>, Fault> {
        self.members_by_score(txn, owner, ALL_SCORES, direction, 0, limit)
    }

    /// Members with their scores in (score, member) order, from `scores.0` to `scores.1`
    /// (in `direction`), after passing over `skip` of them, at most `limit`. They are read
    /// from the `by_score` index alone, whose keys hold both; the members passed over are
    /// counted a leaf at a time (`Transaction::index_entries`), so ZRANGE's 500,000th rank
    /// costs a visit of the leaves before it, not a copy of every member.
    pub(crate) fn members_by_score(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        scores: (Bound<f64>, Bound<f64>),
        direction: ScanDirection,
        skip: usize,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, f64)>, Fault> {
        let range = score_range(owner, scores);
        let entries = txn.index_entries(&self.zset, BY_SCORE, &range, direction, skip, limit)?;
        entries
            .iter()
            .map(|entry| match entry.as_slice() {
                [_, Value::Int(score), _, Value::Bytes(member)] => {
                    Ok((member.clone(), score_of_key(*score)))
                }
                _ => Err(Fault::corrupt(
                    "kv_zset score index entry of unexpected shape".to_string(),
                )),
            })
            .collect()
    }

    /// How many members have scores from `scores.0` to `scores.1` (ZCOUNT), of the `len`
    /// members of `owner` (see [`Keyspace::count_members`]).
    pub(crate) fn count_by_score(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        len: i64,
        scores: (Bound<f64>, Bound<f64>),
    ) -> Result<usize, Fault> {
        let range = score_range(owner, scores);
        self.count_members(txn, owner, len, MemberOrder::ByScore, &range)
    }

    /// How many members come before `member`, whose score is `score`, in (score, member)
    /// order: its rank (ZRANK), of the `len` members of `owner`, counted as
    /// [`Keyspace::count_by_score`] counts.
    pub(crate) fn rank_of(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        len: i64,
        member: &[u8],
        score: f64,
    ) -> Result<usize, Fault> {
        // The index key: its columns (owner, score), then the primary key (owner, member).
        let mut entry = with_score(owner, score);
        entry.extend(member_key(owner, member));
        let before = KeyRange::new(Bound::Included(prefix(owner)), Bound::Excluded(entry));
        self.count_members(txn, owner, len, MemberOrder::ByScore, &before)
    }

    /// How many of the `len` members of `owner` (its key's count) lie in `part` of `order`:
    /// counted directly, or as `len` less the members either side of `part`, whichever the
    /// tree's shape says passes over fewer leaves (decision 243): a rank near the top, or a
    /// count of most of a set, walks the few leaves beside it. Each count is a walk a leaf
    /// at a time (`Transaction::count`), validated by those leaves' stamps, and `len` is
    /// validated with the key's row.
    pub(crate) fn count_members(
        &self,
        txn: &mut Transaction<'_>,
        owner: i64,
        len: i64,
        order: MemberOrder,
        part: &KeyRange,
    ) -> Result<usize, Fault> {
        if len < COUNTED_EITHER_WAY_FROM {
            return self.count_in(txn, order, part);
        }
        let all = KeyRange::new(
            Bound::Included(prefix(owner)),
            Bound::Included(prefix(owner)),
        );
        let share = match order {
            MemberOrder::ByName => txn.share_estimate(&self.zset, part, &all)?,
            MemberOrder::ByScore => txn.index_share_estimate(&self.zset, BY_SCORE, part, &all)?,
        };
        let Some((below, above)) = (share > 0.5).then(|| sides(owner, part)).flatten() else {
            return self.count_in(txn, order, part);
        };
        let beside = self.count_in(txn, order, &below)? + self.count_in(txn, order, &above)?;
        usize::try_from(len)
            .ok()
            .and_then(|len| len.checked_sub(beside))
            .ok_or_else(|| {
                Fault::corrupt(format!(
                    "{beside} sorted-set members counted beside a range, of {len}"
                ))
            })
    }

    fn count_in(
        &self,
        txn: &mut Transaction<'_>,
        order: MemberOrder,
        range: &KeyRange,
    ) -> Result<usize, Fault> {
        Ok(match order {
            MemberOrder::ByName => txn.count(&self.zset, range)?,
            MemberOrder::ByScore => txn.count_index(&self.zset, BY_SCORE, range)?,
        })
    }
}

/// The members from which a count may walk the other way ([`Keyspace::count_members`]):
/// a smaller set lies in a few leaves, which either way passes over sooner than the
/// estimate's descents are made (up to four, `Transaction::index_share_estimate`).
const COUNTED_EITHER_WAY_FROM: i64 = 1024;

/// Which order of a sorted set's members a count walks: `kv_zset`'s rows, by member
/// (ZLEXCOUNT), or its `by_score` index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemberOrder {
    ByName,
    ByScore,
}

/// The members of `owner` below and above `part`, a range of them (`None` for an
/// unbounded side, which its ranges never have: they start and end at `owner`'s prefix).
fn sides(owner: i64, part: &KeyRange) -> Option<(KeyRange, KeyRange)> {
    // The complement of a bound: the keys it leaves out on its side.
    let flip = |bound: &Bound<Vec<Value>>| match bound {
        Bound::Included(values) => Some(Bound::Excluded(values.clone())),
        Bound::Excluded(values) => Some(Bound::Included(values.clone())),
        Bound::Unbounded => None,
    };
    let below = KeyRange::new(Bound::Included(prefix(owner)), flip(&part.lower)?);
    let above = KeyRange::new(flip(&part.upper)?, Bound::Included(prefix(owner)));
    Some((below, above))
}

/// Every score, lowest to highest.
pub const ALL_SCORES: (Bound<f64>, Bound<f64>) = (Bound::Unbounded, Bound::Unbounded);

/// The index of members by (score, member).
pub(super) const BY_SCORE: &str = "by_score";

/// The `by_score` range of `owner`'s members with scores from `scores.0` to `scores.1`.
fn score_range(owner: i64, scores: (Bound<f64>, Bound<f64>)) -> KeyRange {
    let bound = |b: Bound<f64>| match b {
        Bound::Included(s) => Bound::Included(with_score(owner, s)),
        Bound::Excluded(s) => Bound::Excluded(with_score(owner, s)),
        Bound::Unbounded => Bound::Included(prefix(owner)),
    };
    KeyRange::new(bound(scores.0), bound(scores.1))
}

fn with_score(owner: i64, score: f64) -> Vec<Value> {
    let mut values = prefix(owner);
    values.push(Value::Int(score_key(score)));
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_keys_sort_like_scores() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
        ];
        for pair in scores.windows(2) {
            assert!(score_key(pair[0]) < score_key(pair[1]), "{pair:?}");
        }
        for score in scores {
            assert_eq!(score_of_key(score_key(score)), score);
        }
        assert_eq!(score_key(-0.0), score_key(0.0));
    }
}
