//! SORT and SORT_RO: a list's, set's or sorted set's elements sorted as numbers or (ALPHA)
//! as strings, by themselves or by the values that a BY pattern finds (`weight_*`,
//! `object_*->field`), with LIMIT, GET patterns for what to return, and STORE into a list,
//! as Redis 7.0's `sort.c` does:
//!
//! * Numbers are read with plain strtod (leading spaces allowed, the empty string is 0); one
//!   that does not read, is NaN, out of range, or a subnormal a double cannot hold exactly
//!   (`1e-310`: glibc's strtod sets ERANGE, which Redis checks) fails the command with "One
//!   or more scores can't be converted into double". Equal numbers are ordered by the
//!   elements' bytes.
//! * A BY pattern with no `*` does not sort, even with another BY after it: a list or
//!   sorted set comes in its own order (reversed by DESC), with LIMIT applied to that order. A missing BY key weighs 0 (or, with
//!   ALPHA, comes first).
//! * GET `#` is the element itself; a pattern with no `*`, or a key that is missing or of
//!   another kind, gives nil (an empty string in a STORE).
//! * STORE replaces the destination, whatever it held and its TTL, with a list, or deletes
//!   it when the result is empty, and answers the list's length.
//!
//! Where Redis leaves the order unspecified, tailstore answers one of the orders Redis may
//! give: a set with a BY that does not sort comes sorted as ALPHA (Redis's order for it in
//! scripts and with STORE; its hash table's order otherwise), and ALPHA ties under BY keep
//! the collection's order (a list's; a set's in bytes, a sorted set's by score).

use std::cmp::Ordering;

use tailstore_resp::Reply;

use super::float::parse_sort_score;
use super::{bulk, is, parse_int, Ctx, Fault, Outcome, SYNTAX, WRONGTYPE};
use super::{lists, sets, strings, zsets};
use crate::keyspace::notifications;
use crate::keyspace::{KeyMeta, Kind, MAX_FIELD, MAX_KEY};

const NOT_A_NUMBER: &str = "ERR One or more scores can't be converted into double";

/// What the options ask for.
#[derive(Default)]
struct Options<'a> {
    desc: bool,
    alpha: bool,
    /// LIMIT's offset and count (count negative: to the end).
    limit: Option<(i64, i64)>,
    /// The last BY pattern.
    by: Option<&'a [u8]>,
    /// Whether any BY pattern had no `*`: then nothing is sorted, whatever BY came after.
    keeps_order: bool,
    gets: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
    /// STORE's destination's position among the options.
    store_at: Option<usize>,
}

pub fn sort(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, false)
}

pub fn sort_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, true)
}

fn run(ctx: &mut Ctx, args: &[Vec<u8>], read_only: bool) -> Outcome {
    let mut options = parse(&args[2..], read_only)?;
    let meta = ctx.read_meta(&args[1])?;
    if let Some(meta) = &meta {
        if !matches!(meta.kind, Kind::List | Kind::Set | Kind::ZSet) {
            return Err(Fault::err(WRONGTYPE));
        }
    }
    let kind = meta.as_ref().map(|m| m.kind);
    let mut sorts = !options.keeps_order;
    if !sorts && kind == Some(Kind::Set) {
        // No order of its own to keep: sorted as strings, as Redis does in scripts and with
        // STORE (its hash table's order otherwise, which no client can rely on).
        (sorts, options.alpha, options.by) = (true, true, None);
    }
    let len = meta.as_ref().map_or(0, |m| m.len);
    let (start, end) = window(options.limit, len);
    let chosen = match &meta {
        None => Vec::new(),
        Some(meta) if !sorts => own_order(ctx, meta, start, end, options.desc)?,
        Some(meta) => {
            let elements = all_elements(ctx, meta)?;
            let sorted = sorted(ctx, elements, &options)?;
            let take = usize::try_from(end - start + 1).unwrap_or(0);
            let skip = usize::try_from(start).unwrap_or(0);
            sorted.into_iter().skip(skip).take(take).collect()
        }
    };
    let values = gathered(ctx, chosen, &options.gets)?;
    match options.store {
        // Nothing found is nil in a reply, an empty string in a stored list.
        None => Ok(Reply::Array(
            values
                .into_iter()
                .map(|v| v.map_or(Reply::Null, bulk))
                .collect(),
        )),
        Some(destination) => {
            let values: Vec<Vec<u8>> = values.into_iter().map(Option::unwrap_or_default).collect();
            Ok(Reply::Int(store_list(ctx, destination, &values)?))
        }
    }
}

/// Where STORE names its destination in SORT's arguments (the server wakes the clients
/// blocked on it).
pub fn store_key(args: &[Vec<u8>]) -> Option<usize> {
    let options = parse(args.get(2..)?, false).ok()?;
    options.store_at.map(|at| at + 2)
}

/// The options, refused at the first that does not parse, as Redis does.
fn parse(args: &[Vec<u8>], read_only: bool) -> Result<Options<'_>, Fault> {
    let mut options = Options::default();
    let mut at = 0;
    while at < args.len() {
        let (name, left) = (&args[at], args.len() - at - 1);
        if is(name, "asc") {
            options.desc = false;
        } else if is(name, "desc") {
            options.desc = true;
        } else if is(name, "alpha") {
            options.alpha = true;
        } else if is(name, "limit") && left >= 2 {
            options.limit = Some((parse_int(&args[at + 1])?, parse_int(&args[at + 2])?));
            at += 2;
        } else if is(name, "store") && left >= 1 && !read_only {
            options.store = Some(&args[at + 1]);
            options.store_at = Some(at + 1);
            at += 1;
        } else if is(name, "by") && left >= 1 {
            options.by = Some(&args[at + 1]);
            options.keeps_order |= !has_star(&args[at + 1]);
            at += 1;
        } else if is(name, "get") && left >= 1 {
            options.gets.push(&args[at + 1]);
            at += 1;
        } else {
            return Err(Fault::err(SYNTAX));
        }
        at += 1;
    }
    Ok(options)
}

/// The part of a pattern C's string functions see: up to its first NUL byte.
fn c_string(pattern: &[u8]) -> &[u8] {
    let end = pattern
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(pattern.len());
    &pattern[..end]
}

fn has_star(pattern: &[u8]) -> bool {
    c_string(pattern).contains(&b'*')
}

/// The indexes `start..=end` of the elements LIMIT keeps, by Redis's arithmetic (an offset
/// past the end keeps nothing; `end < start` means nothing).
fn window(limit: Option<(i64, i64)>, len: i64) -> (i64, i64) {
    let (offset, count) = limit.unwrap_or((0, -1));
    let start = offset.max(0);
    // Saturating where Redis's `start + count - 1` would overflow (undefined in C; Redis
    // answers to the end there, as this does).
    let mut end = if count < 0 {
        len - 1
    } else {
        start.saturating_add(count - 1)
    };
    if start >= len {
        return (len - 1, len - 2);
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// A list's or sorted set's elements `start..=end` in its own order, or the reverse order
/// with DESC: what SORT returns when its BY does not sort.
fn own_order(
    ctx: &mut Ctx,
    meta: &KeyMeta,
    start: i64,
    end: i64,
    desc: bool,
) -> Result<Vec<Vec<u8>>, Fault> {
    if end < start {
        return Ok(Vec::new());
    }
    if meta.kind == Kind::ZSet {
        let members = zsets::members_by_rank(ctx, meta.id, meta.len, start, end, desc)?;
        return Ok(members.into_iter().map(|(member, _)| member).collect());
    }
    let (from, to) = if desc {
        (meta.len - 1 - end, meta.len - 1 - start)
    } else {
        (start, end)
    };
    let mut elements = lists::elements(ctx, meta, from as usize, to as usize)?;
    if desc {
        elements.reverse();
    }
    Ok(elements)
}

/// Every element: a list's in order, a set's in byte order, a sorted set's by score.
fn all_elements(ctx: &mut Ctx, meta: &KeyMeta) -> Result<Vec<Vec<u8>>, Fault> {
    Ok(match meta.kind {
        Kind::List => lists::elements(ctx, meta, 0, meta.len as usize - 1)?,
        Kind::Set => sets::members(ctx, meta.id)?,
        _ => zsets::members_by_rank(ctx, meta.id, meta.len, 0, -1, false)?
            .into_iter()
            .map(|(member, _)| member)
            .collect(),
    })
}

/// What an element is sorted by.
enum Weight {
    Number(f64),
    /// ALPHA with BY: the value found, if any (missing ones come first).
    Text(Option<Vec<u8>>),
    /// ALPHA without BY: the element itself.
    Itself,
}

/// `elements` in SORT's order (a stable sort: ties the comparison leaves keep their order).
fn sorted(ctx: &mut Ctx, elements: Vec<Vec<u8>>, options: &Options) -> Result<Vec<Vec<u8>>, Fault> {
    let mut weighed = Vec::with_capacity(elements.len());
    let mut unreadable = false;
    for element in elements {
        let found = match options.by {
            Some(by) => lookup(ctx, by, &element)?,
            None => Some(element.clone()),
        };
        let weight = match (options.alpha, options.by, found) {
            (true, None, _) => Weight::Itself,
            (true, Some(_), found) => Weight::Text(found),
            (false, _, None) => Weight::Number(0.0),
            (false, _, Some(value)) => {
                Weight::Number(parse_sort_score(&value).unwrap_or_else(|| {
                    unreadable = true;
                    0.0
                }))
            }
        };
        weighed.push((weight, element));
    }
    if unreadable {
        return Err(Fault::err(NOT_A_NUMBER));
    }
    weighed.sort_by(|a, b| {
        let order = compare(a, b);
        if options.desc {
            order.reverse()
        } else {
            order
        }
    });
    Ok(weighed.into_iter().map(|(_, element)| element).collect())
}

fn compare((a, a_element): &(Weight, Vec<u8>), (b, b_element): &(Weight, Vec<u8>)) -> Ordering {
    match (a, b) {
        (Weight::Number(x), Weight::Number(y)) => x
            .partial_cmp(y)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a_element.cmp(b_element)),
        (Weight::Text(x), Weight::Text(y)) => x.cmp(y),
        _ => a_element.cmp(b_element),
    }
}

/// What a BY or GET pattern finds for `element`, as Redis's `lookupKeyByPattern`: `#` is the
/// element; otherwise the first `*` is replaced by the element to make a key, whose string
/// is the value, or, when `->field` follows the `*`, that field of its hash. Nothing (not
/// an error) for a pattern with no `*`, a missing key, or a key of another kind.
fn lookup(ctx: &mut Ctx, pattern: &[u8], element: &[u8]) -> Result<Option<Vec<u8>>, Fault> {
    if c_string(pattern) == b"#" {
        return Ok(Some(element.to_vec()));
    }
    let visible = c_string(pattern);
    let Some(star) = visible.iter().position(|&b| b == b'*') else {
        return Ok(None);
    };
    let arrow = visible[star + 1..]
        .windows(2)
        .position(|pair| pair == b"->")
        .map(|at| star + 1 + at)
        .filter(|&at| at + 2 < visible.len());
    let suffix_end = arrow.unwrap_or(pattern.len());
    let key = [&pattern[..star], element, &pattern[star + 1..suffix_end]].concat();
    if key.len() > MAX_KEY {
        return Ok(None); // no such key can exist here
    }
    // A read lookup, as Redis's `lookupKeyByPattern` makes.
    let Some(meta) = ctx.read_meta(&key)? else {
        return Ok(None);
    };
    match arrow {
        Some(at) => {
            let field = &pattern[at + 2..];
            if meta.kind != Kind::Hash || field.len() > MAX_FIELD {
                return Ok(None);
            }
            ctx.ks.read_value(ctx.txn, meta.id, field, None)
        }
        None if meta.kind == Kind::String => strings::string_of(ctx, &meta),
        None => Ok(None),
    }
}

/// What SORT returns or stores: each chosen element, or for each the values of the GET
/// patterns (`None` where a pattern finds nothing).
fn gathered(
    ctx: &mut Ctx,
    chosen: Vec<Vec<u8>>,
    gets: &[&[u8]],
) -> Result<Vec<Option<Vec<u8>>>, Fault> {
    if gets.is_empty() {
        return Ok(chosen.into_iter().map(Some).collect());
    }
    let mut out = Vec::with_capacity(chosen.len() * gets.len());
    for element in &chosen {
        for get in gets {
            out.push(lookup(ctx, get, element)?);
        }
    }
    Ok(out)
}

/// Replaces `destination`, whatever it held and its TTL, with a list of `values`, or deletes
/// it when there are none; the list's length.
fn store_list(ctx: &mut Ctx, destination: &[u8], values: &[Vec<u8>]) -> Result<i64, Fault> {
    super::check_key(destination)?;
    let (old, mut meta) = ctx.replace(destination, Kind::List)?;
    if values.is_empty() {
        let event = (notifications::LIST, "sortstore");
        ctx.notify_stored(event, destination, false, old.is_some());
        return Ok(0);
    }
    for value in values {
        lists::push_one(ctx, &mut meta, value, false)?;
    }
    ctx.save(destination, &mut meta)?;
    ctx.notify_stored(
        (notifications::LIST, "sortstore"),
        destination,
        true,
        old.is_some(),
    );
    Ok(meta.len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_keeps_what_redis_keeps() {
        assert_eq!(window(None, 5), (0, 4));
        assert_eq!(window(Some((1, 2)), 5), (1, 2));
        assert_eq!(window(Some((-3, 2)), 5), (0, 1));
        assert_eq!(window(Some((2, -1)), 5), (2, 4));
        assert_eq!(window(Some((2, 0)), 5), (2, 1));
        assert_eq!(window(Some((5, 1)), 5), (4, 3));
        assert_eq!(window(Some((0, 10)), 5), (0, 4));
        assert_eq!(window(Some((1, i64::MAX)), 5), (1, 4));
        assert_eq!(window(None, 0), (-1, -2));
    }

    #[test]
    fn patterns_are_read_up_to_their_first_nul() {
        assert!(has_star(b"w_*"));
        assert!(!has_star(b"w_\0*"));
        assert_eq!(c_string(b"#\0x"), b"#");
    }
}
