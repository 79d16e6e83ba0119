//! Sorted-set algebra: ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE, ZUNION, ZINTER, ZDIFF and
//! ZINTERCARD, as Redis 7.0 computes them. A set counts as a sorted set whose members all
//! score 1. A member's score in a source is multiplied by the source's WEIGHT (NaN, from
//! 0 × inf, counting as 0), and scores of one member in several sources are combined by
//! AGGREGATE (SUM, where inf + -inf counts as 0, MIN or MAX). A union or an intersection
//! takes the sources from the smallest, as Redis does: the order of the sums, which decides
//! their last bits and whether an inf + -inf was summed, is Redis's too.

use std::collections::BTreeMap;

use tailstore_resp::Reply;
use tailstore_storage::ScanDirection;

use super::zsets::store_members;
use super::{bulk, is, parse_float, parse_int, Ctx, Fault, Outcome, SYNTAX, WRONGTYPE};
use crate::keyspace::{KeyMeta, Kind};

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis's `zunionInterAggregate`: `b` may be NaN (an intersection's 0 × inf).
    fn combine(self, a: f64, b: f64) -> f64 {
        match self {
            Aggregate::Sum => zero_if_nan(a + b),
            Aggregate::Min if b < a => b,
            Aggregate::Max if b > a => b,
            Aggregate::Min | Aggregate::Max => a,
        }
    }
}

fn zero_if_nan(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x
    }
}

/// What the command writes or answers.
#[derive(Clone, Copy, PartialEq)]
enum Output {
    /// Into the key at `args[1]` (the *STORE forms): the count.
    Store,
    /// The members, with their scores if WITHSCORES.
    Members,
    /// How many members (ZINTERCARD), at most LIMIT.
    Count,
}

/// A source's members with their scores (`None`: no such key).
type Members = Option<Vec<(Vec<u8>, f64)>>;

/// The parsed command: each source's members and weight, and the options.
struct Request {
    sources: Vec<(Members, f64)>,
    aggregate: Aggregate,
    with_scores: bool,
    limit: usize,
}

fn run(ctx: &mut Ctx, args: &[Vec<u8>], op: Op, output: Output) -> Outcome {
    let numkeys_at = if output == Output::Store { 2 } else { 1 };
    let request = parse(ctx, args, numkeys_at, op, output)?;
    let result = combine(op, request.aggregate, request.sources);
    match output {
        Output::Store => {
            let event = match op {
                Op::Union => "zunionstore",
                Op::Inter => "zinterstore",
                Op::Diff => "zdiffstore",
            };
            Ok(Reply::Int(store_members(ctx, &args[1], &result, event)?))
        }
        Output::Count => Ok(Reply::Int(result.len().min(request.limit) as i64)),
        Output::Members => Ok(members_reply(result, request.with_scores)),
    }
}

/// The arguments in Redis's order: numkeys, every key's kind, then the options.
fn parse(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    numkeys_at: usize,
    op: Op,
    output: Output,
) -> Result<Request, Fault> {
    let numkeys = parse_int(&args[numkeys_at])?;
    if numkeys < 1 {
        return Err(Fault::err(format!(
            "ERR at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(&args[0]).to_ascii_lowercase()
        )));
    }
    let keys_end = usize::try_from(numkeys)
        .ok()
        .and_then(|n| n.checked_add(numkeys_at + 1))
        .filter(|&end| end <= args.len())
        .ok_or_else(|| Fault::err(SYNTAX))?;
    let keys = &args[numkeys_at + 1..keys_end];
    let metas = keys
        .iter()
        .map(|key| match ctx.read_meta(key)? {
            Some(meta) if !matches!(meta.kind, Kind::ZSet | Kind::Set) => {
                Err(Fault::err(WRONGTYPE))
            }
            meta => Ok(meta),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut request = Request {
        sources: Vec::new(),
        aggregate: Aggregate::Sum,
        with_scores: false,
        limit: usize::MAX,
    };
    let mut weights = vec![1.0; keys.len()];
    parse_options(&args[keys_end..], op, output, &mut request, &mut weights)?;
    for (meta, weight) in metas.into_iter().zip(weights) {
        let members = meta.map(|meta| scored_members(ctx, &meta)).transpose()?;
        request.sources.push((members, weight));
    }
    Ok(request)
}

fn parse_options(
    mut options: &[Vec<u8>],
    op: Op,
    output: Output,
    request: &mut Request,
    weights: &mut [f64],
) -> Result<(), Fault> {
    let combining = op != Op::Diff && output != Output::Count;
    while let Some(option) = options.first() {
        let remaining = options.len();
        if combining && remaining > weights.len() && is(option, "weights") {
            for (weight, arg) in weights.iter_mut().zip(&options[1..]) {
                *weight =
                    parse_float(arg).map_err(|_| Fault::err("ERR weight value is not a float"))?;
            }
            options = &options[1 + weights.len()..];
        } else if combining && remaining >= 2 && is(option, "aggregate") {
            request.aggregate = match &options[1] {
                name if is(name, "sum") => Aggregate::Sum,
                name if is(name, "min") => Aggregate::Min,
                name if is(name, "max") => Aggregate::Max,
                _ => return Err(Fault::err(SYNTAX)),
            };
            options = &options[2..];
        } else if output == Output::Members && is(option, "withscores") {
            request.with_scores = true;
            options = &options[1..];
        } else if output == Output::Count && remaining >= 2 && is(option, "limit") {
            let limit = parse_int(&options[1])
                .ok()
                .and_then(|limit| usize::try_from(limit).ok())
                .ok_or_else(|| Fault::err("ERR LIMIT can't be negative"))?;
            request.limit = if limit == 0 { usize::MAX } else { limit };
            options = &options[2..];
        } else {
            return Err(Fault::err(SYNTAX));
        }
    }
    Ok(())
}

/// A source's members and scores: a sorted set's, or a set's members at score 1.
fn scored_members(ctx: &mut Ctx, meta: &KeyMeta) -> Result<Vec<(Vec<u8>, f64)>, Fault> {
    if meta.kind == Kind::Set {
        let fields = ctx
            .ks
            .fields(ctx.txn, meta.id, ScanDirection::Ascending, usize::MAX)?;
        return Ok(fields
            .into_iter()
            .map(|(member, _)| (member, 1.0))
            .collect());
    }
    ctx.ks
        .members_from_end(ctx.txn, meta.id, ScanDirection::Ascending, usize::MAX)
}

fn combine(op: Op, aggregate: Aggregate, sources: Vec<(Members, f64)>) -> BTreeMap<Vec<u8>, f64> {
    match op {
        Op::Union => union(aggregate, sources),
        Op::Inter => intersection(aggregate, sources),
        Op::Diff => difference(sources),
    }
}

fn weighted(score: f64, weight: f64) -> f64 {
    zero_if_nan(score * weight)
}

/// Sorts sources from the smallest (a missing key is empty), ties in key order: Redis's
/// qsort by cardinality, glibc's being a stable merge sort.
fn smallest_first(sources: &mut [(Members, f64)]) {
    sources.sort_by_key(|(members, _)| members.as_ref().map_or(0, Vec::len));
}

fn union(aggregate: Aggregate, mut sources: Vec<(Members, f64)>) -> BTreeMap<Vec<u8>, f64> {
    smallest_first(&mut sources);
    let mut result = BTreeMap::new();
    for (members, weight) in sources {
        for (member, score) in members.unwrap_or_default() {
            let score = weighted(score, weight);
            result
                .entry(member)
                .and_modify(|sum| *sum = aggregate.combine(*sum, score))
                .or_insert(score);
        }
    }
    result
}

fn intersection(aggregate: Aggregate, mut sources: Vec<(Members, f64)>) -> BTreeMap<Vec<u8>, f64> {
    if sources.iter().any(|(members, _)| members.is_none()) {
        return BTreeMap::new();
    }
    smallest_first(&mut sources);
    let lookups: Vec<(BTreeMap<Vec<u8>, f64>, f64)> = sources[1..]
        .iter()
        .map(|(members, weight)| (members.iter().flatten().cloned().collect(), *weight))
        .collect();
    let (first, first_weight) = sources.swap_remove(0);
    let mut result = BTreeMap::new();
    'members: for (member, score) in first.unwrap_or_default() {
        let mut total = weighted(score, first_weight);
        for (lookup, weight) in &lookups {
            let Some(&other) = lookup.get(&member) else {
                continue 'members;
            };
            // Unlike the first source's, these products are combined as they are: a NaN
            // sum becomes 0, and MIN and MAX keep what they had (Redis's order of checks).
            total = aggregate.combine(total, other * *weight);
        }
        result.insert(member, total);
    }
    result
}

fn difference(mut sources: Vec<(Members, f64)>) -> BTreeMap<Vec<u8>, f64> {
    let rest: std::collections::BTreeSet<Vec<u8>> = sources
        .drain(1..)
        .flat_map(|(members, _)| members.unwrap_or_default())
        .map(|(member, _)| member)
        .collect();
    let (first, _) = sources.swap_remove(0);
    first
        .unwrap_or_default()
        .into_iter()
        .filter(|(member, _)| !rest.contains(member))
        .collect()
}

/// The result in (score, member) order, as ZRANGE answers.
fn members_reply(result: BTreeMap<Vec<u8>, f64>, with_scores: bool) -> Reply {
    let mut ordered: Vec<(Vec<u8>, f64)> = result.into_iter().collect();
    // -0 and 0 are one score (Redis's skip list compares them equal): the member decides.
    ordered.sort_by(|(a, x), (b, y)| {
        x.partial_cmp(y)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.cmp(b))
    });
    if with_scores {
        let pairs = ordered
            .into_iter()
            .map(|(member, score)| (bulk(member), Reply::Double(score)));
        return Reply::Pairs(pairs.collect());
    }
    Reply::Array(
        ordered
            .into_iter()
            .map(|(member, _)| bulk(member))
            .collect(),
    )
}

/// ZUNIONSTORE destination numkeys key [key …] [WEIGHTS weight …] [AGGREGATE SUM|MIN|MAX]
pub fn zunionstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, Op::Union, Output::Store)
}

/// ZINTERSTORE destination numkeys key [key …] [WEIGHTS weight …] [AGGREGATE SUM|MIN|MAX]
pub fn zinterstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, Op::Inter, Output::Store)
}

/// ZDIFFSTORE destination numkeys key [key …]
pub fn zdiffstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, Op::Diff, Output::Store)
}

/// ZUNION numkeys key [key …] [WEIGHTS weight …] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zunion(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, Op::Union, Output::Members)
}

/// ZINTER numkeys key [key …] [WEIGHTS weight …] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zinter(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, Op::Inter, Output::Members)
}

/// ZDIFF numkeys key [key …] [WITHSCORES]
pub fn zdiff(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, Op::Diff, Output::Members)
}

/// ZINTERCARD numkeys key [key …] [LIMIT limit]
pub fn zintercard(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    run(ctx, args, Op::Inter, Output::Count)
}
