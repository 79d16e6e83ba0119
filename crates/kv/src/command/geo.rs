//! GEO commands: GEOADD, GEOPOS, GEODIST, GEOHASH, GEOSEARCH, GEOSEARCHSTORE and the older
//! GEORADIUS, GEORADIUS_RO, GEORADIUSBYMEMBER and GEORADIUSBYMEMBER_RO, as Redis 7.0
//! answers them.
//!
//! A geo set is a sorted set whose scores are its members' 52-bit geohashes (geohash.rs), as
//! in Redis: GEOADD is ZADD with scores made from positions, the sorted-set commands work on
//! a geo set, and the GEO commands on any sorted set (a score no GEOADD wrote names the cell
//! Redis takes it for). A search reads the members whose scores lie in each of its cells
//! (`Region::cells`), keeps those in its shape, and orders them by distance as Redis's sorts
//! do (distance_order.rs).
//!
//! Arguments are checked in Redis's order, each error where Redis meets it: the source key's
//! kind first, then the position and shape the command's form fixes, then the options one by
//! one (FROMMEMBER looks its member up there), then how the options fit together.

use std::collections::BTreeMap;
use std::ops::Bound;

use tailstore_resp::Reply;
use tailstore_storage::ScanDirection;

use super::distance_order::{compare, sort_first};
use super::geohash::{self, Region, Shape};
use super::hashes::check_field;
use super::zsets::{member_scores, store_members, zadd};
use super::{bulk, is, parse_float, parse_int, Ctx, Fault, Outcome, SYNTAX};
use crate::keyspace::{KeyMeta, Kind};

const BAD_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";
const NO_MEMBER: &str = "ERR could not decode requested zset member";

/// Meters per unit: M, KM, FT or MI, in any case.
fn unit(arg: &[u8]) -> Result<f64, Fault> {
    let units = [("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)];
    units
        .iter()
        .find(|(name, _)| is(arg, name))
        .map(|&(_, meters)| meters)
        .ok_or_else(|| Fault::err(BAD_UNIT))
}

/// A longitude and a latitude a geo set can hold.
fn position(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), Fault> {
    let (lon, lat) = (parse_float(lon)?, parse_float(lat)?);
    if !geohash::can_hold(lon, lat) {
        return Err(Fault::err(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

/// A length argument (radius, width, height), a float; `what` names it in the error.
fn length(arg: &[u8], what: &str) -> Result<f64, Fault> {
    parse_float(arg).map_err(|_| Fault::err(format!("ERR need numeric {what}")))
}

/// BYRADIUS's (and GEORADIUS's) radius and unit.
fn circle(radius: &[u8], unit_arg: &[u8]) -> Result<(Shape, f64), Fault> {
    let radius = length(radius, "radius")?;
    if radius < 0.0 {
        return Err(Fault::err("ERR radius cannot be negative"));
    }
    Ok((Shape::Circle { radius }, unit(unit_arg)?))
}

/// BYBOX's width, height and unit.
fn rectangle(args: &[Vec<u8>]) -> Result<(Shape, f64), Fault> {
    let width = length(&args[0], "width")?;
    let height = length(&args[1], "height")?;
    if height < 0.0 || width < 0.0 {
        return Err(Fault::err("ERR height or width cannot be negative"));
    }
    Ok((Shape::Rectangle { width, height }, unit(&args[2])?))
}

/// A distance as Redis writes it: four decimals (`%.4f`, NaN as glibc writes it).
fn distance_text(meters: f64) -> Vec<u8> {
    let text = match (meters.is_nan(), meters.is_sign_negative()) {
        (true, true) => "-nan".to_string(),
        (true, false) => "nan".to_string(),
        (false, _) => format!("{meters:.4}"),
    };
    text.into_bytes()
}

/// GEOADD key [NX|XX] [CH] longitude latitude member [longitude latitude member …]: ZADD of
/// each member at its position's score, with the flags passed on.
pub fn geoadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let flags_end = args[2..]
        .iter()
        .position(|arg| !(is(arg, "NX") || is(arg, "XX") || is(arg, "CH")))
        .map_or(args.len(), |at| at + 2);
    let flags = &args[2..flags_end];
    let both = flags.iter().any(|f| is(f, "NX")) && flags.iter().any(|f| is(f, "XX"));
    let triples = &args[flags_end..];
    if !triples.len().is_multiple_of(3) || both {
        return Err(Fault::err(SYNTAX));
    }
    let mut zadd_args = args[..flags_end].to_vec();
    zadd_args[0] = b"zadd".to_vec();
    for triple in triples.chunks(3) {
        let (lon, lat) = position(&triple[0], &triple[1])?;
        // ZADD reads the score back from its text, as Redis's GEOADD hands it over.
        zadd_args.push(geohash::score(lon, lat).to_string().into_bytes());
        zadd_args.push(triple[2].clone());
    }
    zadd(ctx, &zadd_args)
}

/// GEOPOS key [member …]: each member's [longitude, latitude], or a null array.
pub fn geopos(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let scores = member_scores(ctx, &args[1], &args[2..])?;
    let replies = scores.into_iter().map(|score| match score {
        Some(score) => {
            let (lon, lat) = geohash::position(score);
            Reply::Array(vec![Reply::HumanDouble(lon), Reply::HumanDouble(lat)])
        }
        None => Reply::NullArray,
    });
    Ok(Reply::Array(replies.collect()))
}

/// GEOHASH key [member …]: each member's standard 11-character geohash, or a null.
pub fn geohash(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let scores = member_scores(ctx, &args[1], &args[2..])?;
    let replies = scores.into_iter().map(|score| match score {
        Some(score) => bulk(geohash::geohash(score).to_vec()),
        None => Reply::Null,
    });
    Ok(Reply::Array(replies.collect()))
}

/// GEODIST key member1 member2 [M|KM|FT|MI]: the distance, or a null if either is missing.
pub fn geodist(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    let meters_per_unit = match args.get(4) {
        None => 1.0,
        Some(arg) if args.len() == 5 => unit(arg)?,
        Some(_) => return Err(Fault::err(SYNTAX)),
    };
    let scores = member_scores(ctx, &args[1], &args[2..4])?;
    let (Some(first), Some(second)) = (scores[0], scores[1]) else {
        return Ok(Reply::Null);
    };
    let (lon1, lat1) = geohash::position(first);
    let (lon2, lat2) = geohash::position(second);
    let meters = geohash::distance(lon1, lat1, lon2, lat2);
    Ok(bulk(distance_text(meters / meters_per_unit)))
}

/// Which search command: each takes its position and shape from other arguments, and accepts
/// options of its own.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// GEORADIUS key longitude latitude radius unit …; `store`: STORE and STOREDIST allowed
    /// (not in GEORADIUS_RO).
    Radius { store: bool },
    /// GEORADIUSBYMEMBER key member radius unit …; `store` as above.
    ByMember { store: bool },
    /// GEOSEARCH key FROMMEMBER … | FROMLONLAT … BYRADIUS … | BYBOX … …
    Search,
    /// GEOSEARCHSTORE destination source …, as GEOSEARCH, and STOREDIST.
    SearchStore,
}

impl Form {
    /// The event of a store of this form's results.
    fn stored(self) -> &'static str {
        match self {
            Form::SearchStore => "geosearchstore",
            _ => "georadiusstore",
        }
    }

    fn searching(self) -> bool {
        matches!(self, Form::Search | Form::SearchStore)
    }

    fn may_store(self) -> bool {
        matches!(
            self,
            Form::Radius { store: true } | Form::ByMember { store: true }
        )
    }

    fn source_at(self) -> usize {
        if self == Form::SearchStore {
            2
        } else {
            1
        }
    }
}

/// The order a search answers in.
#[derive(Clone, Copy, Default, PartialEq)]
enum Order {
    /// As found: by cell, then by score and member within one.
    #[default]
    Found,
    Ascending,
    Descending,
}

/// A search as its arguments ask for it.
#[derive(Default)]
struct Request {
    centre: Option<(f64, f64)>,
    /// The shape, and meters per unit of it.
    shape: Option<(Shape, f64)>,
    /// Which of GEOSEARCH's options were given (FROMMEMBER leaves no centre without a key).
    from_member: bool,
    from_lonlat: bool,
    by_radius: bool,
    by_box: bool,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    order: Order,
    /// At most this many results (0: all).
    count: i64,
    /// Stop reading once `count` are found, unsorted.
    any: bool,
    /// Where the results are stored, instead of answered.
    store: Option<Vec<u8>>,
    /// Store each member's distance, not its score.
    store_dist: bool,
}

/// The position of `member` in the sorted set with id `owner`, for a search around it.
fn member_position(ctx: &mut Ctx, owner: i64, member: &[u8]) -> Result<(f64, f64), Fault> {
    check_field(member, "member")?;
    let score = ctx.ks.member_score(ctx.txn, owner, member)?;
    score
        .map(geohash::position)
        .ok_or_else(|| Fault::err(NO_MEMBER))
}

/// The position and shape the older forms take from fixed places (GEORADIUSBYMEMBER only
/// when its key exists: its member is looked up there); returns where the options begin.
fn fixed_arguments(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    form: Form,
    source: Option<&KeyMeta>,
    request: &mut Request,
) -> Result<usize, Fault> {
    match form {
        Form::Radius { .. } => {
            request.centre = Some(position(&args[2], &args[3])?);
            request.shape = Some(circle(&args[4], &args[5])?);
            Ok(6)
        }
        Form::ByMember { .. } => {
            if let Some(meta) = source {
                request.centre = Some(member_position(ctx, meta.id, &args[2])?);
                request.shape = Some(circle(&args[3], &args[4])?);
            }
            Ok(5)
        }
        Form::Search => Ok(2),
        Form::SearchStore => {
            request.store = Some(args[1].clone());
            Ok(3)
        }
    }
}

/// The options, one by one; an option another excludes (FROMLONLAT after FROMMEMBER, BYBOX
/// after BYRADIUS, STORE where it is not allowed) or that lacks its arguments is a syntax
/// error.
fn parse_options(
    ctx: &mut Ctx,
    options: &[Vec<u8>],
    form: Form,
    source: Option<&KeyMeta>,
    request: &mut Request,
) -> Result<(), Fault> {
    let mut i = 0;
    while let Some(option) = options.get(i) {
        let left = options.len() - i - 1;
        let rest = &options[i + 1..];
        let taken = if is(option, "WITHDIST") {
            request.with_dist = true;
            0
        } else if is(option, "WITHHASH") {
            request.with_hash = true;
            0
        } else if is(option, "WITHCOORD") {
            request.with_coord = true;
            0
        } else if is(option, "ANY") {
            request.any = true;
            0
        } else if is(option, "ASC") {
            request.order = Order::Ascending;
            0
        } else if is(option, "DESC") {
            request.order = Order::Descending;
            0
        } else if is(option, "COUNT") && left >= 1 {
            request.count = parse_int(&rest[0])?;
            if request.count <= 0 {
                return Err(Fault::err("ERR COUNT must be > 0"));
            }
            1
        } else if (is(option, "STORE") || is(option, "STOREDIST")) && left >= 1 && form.may_store()
        {
            request.store = Some(rest[0].clone());
            request.store_dist = is(option, "STOREDIST");
            1
        } else if is(option, "STOREDIST") && form == Form::SearchStore {
            request.store_dist = true;
            0
        } else {
            search_option(ctx, option, rest, form, source, request)?
        };
        i += 1 + taken;
    }
    Ok(())
}

/// GEOSEARCH's own options, where the centre and shape come from: how many arguments the
/// option took.
fn search_option(
    ctx: &mut Ctx,
    option: &[u8],
    rest: &[Vec<u8>],
    form: Form,
    source: Option<&KeyMeta>,
    request: &mut Request,
) -> Result<usize, Fault> {
    if !form.searching() {
        return Err(Fault::err(SYNTAX));
    }
    if is(option, "FROMMEMBER") && !rest.is_empty() && !request.from_lonlat {
        // Without the key the member is not looked up: the reply is empty anyway.
        if let Some(meta) = source {
            request.centre = Some(member_position(ctx, meta.id, &rest[0])?);
        }
        request.from_member = true;
        Ok(1)
    } else if is(option, "FROMLONLAT") && rest.len() >= 2 && !request.from_member {
        request.centre = Some(position(&rest[0], &rest[1])?);
        request.from_lonlat = true;
        Ok(2)
    } else if is(option, "BYRADIUS") && rest.len() >= 2 && !request.by_box {
        request.shape = Some(circle(&rest[0], &rest[1])?);
        request.by_radius = true;
        Ok(2)
    } else if is(option, "BYBOX") && rest.len() >= 3 && !request.by_radius {
        request.shape = Some(rectangle(&rest[..3])?);
        request.by_box = true;
        Ok(3)
    } else {
        Err(Fault::err(SYNTAX))
    }
}

/// How the options fit together, checked once all are read.
fn check_request(args: &[Vec<u8>], form: Form, request: &Request) -> Result<(), Fault> {
    let name = String::from_utf8_lossy(&args[0]);
    if request.store.is_some() && (request.with_dist || request.with_hash || request.with_coord) {
        let which = if form == Form::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(Fault::err(format!(
            "ERR {which} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    if form.searching() && !(request.from_member || request.from_lonlat) {
        return Err(Fault::err(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if form.searching() && !(request.by_radius || request.by_box) {
        return Err(Fault::err(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if request.any && request.count == 0 {
        return Err(Fault::err("ERR the ANY argument requires COUNT argument"));
    }
    Ok(())
}

/// A member the search found.
#[derive(Clone)]
struct Found {
    member: Vec<u8>,
    score: f64,
    lon: f64,
    lat: f64,
    /// From the centre, in meters.
    meters: f64,
}

/// The members in `region`, cell by cell and in score order within one, stopping at `limit`
/// (0: none).
fn find(ctx: &mut Ctx, owner: i64, region: &Region, limit: usize) -> Result<Vec<Found>, Fault> {
    let mut found = Vec::new();
    let full = |found: &Vec<Found>| limit > 0 && found.len() >= limit;
    for cell in region.cells() {
        if full(&found) {
            break;
        }
        let (min, max) = cell.scores();
        let scores = (Bound::Included(min), Bound::Excluded(max));
        let members = ctx.ks.members_by_score(
            ctx.txn,
            owner,
            scores,
            ScanDirection::Ascending,
            0,
            usize::MAX,
        )?;
        for (member, score) in members {
            let (lon, lat) = geohash::position(score);
            let Some(meters) = region.reach(lon, lat) else {
                continue;
            };
            found.push(Found {
                member,
                score,
                lon,
                lat,
                meters,
            });
            if full(&found) {
                break;
            }
        }
    }
    Ok(found)
}

/// The search commands' common body, as Redis's `georadiusGeneric`.
fn search(ctx: &mut Ctx, args: &[Vec<u8>], form: Form) -> Outcome {
    let source = ctx.read_meta_of(&args[form.source_at()], Kind::ZSet)?;
    let request = parse_search(ctx, args, form, source.as_ref())?;
    let (Some(meta), Some((lon, lat)), Some((shape, unit))) =
        (source, request.centre, request.shape)
    else {
        // No source key (with one, parsing leaves a centre and a shape): nothing found.
        return match &request.store {
            Some(destination) => {
                let stored = store_members(ctx, destination, &BTreeMap::new(), form.stored())?;
                Ok(Reply::Int(stored))
            }
            None => Ok(Reply::Array(Vec::new())),
        };
    };
    let region = Region {
        lon,
        lat,
        shape,
        unit,
    };
    let found = results(ctx, meta.id, &region, &request)?;
    match &request.store {
        Some(destination) => {
            let (event, dist) = (form.stored(), request.store_dist);
            store_found(ctx, destination, found, (unit, dist), event)
        }
        None => Ok(found_reply(found, unit, &request)),
    }
}

/// The request, its arguments checked in Redis's order.
fn parse_search(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    form: Form,
    source: Option<&KeyMeta>,
) -> Result<Request, Fault> {
    let mut request = Request::default();
    let options_at = fixed_arguments(ctx, args, form, source, &mut request)?;
    parse_options(ctx, &args[options_at..], form, source, &mut request)?;
    check_request(args, form, &request)?;
    // The nearest COUNT, unless ANY asks for any COUNT.
    if request.count > 0 && request.order == Order::Found && !request.any {
        request.order = Order::Ascending;
    }
    Ok(request)
}

/// What the search answers or stores: the members found, in the order asked for, at most
/// COUNT of them.
fn results(
    ctx: &mut Ctx,
    owner: i64,
    region: &Region,
    request: &Request,
) -> Result<Vec<Found>, Fault> {
    let count = usize::try_from(request.count).unwrap_or(usize::MAX);
    let limit = if request.any { count } else { 0 };
    let mut found = find(ctx, owner, region, limit)?;
    let returned = if count == 0 {
        found.len()
    } else {
        count.min(found.len())
    };
    if request.order != Order::Found {
        let descending = request.order == Order::Descending;
        sort_first(&mut found, returned, &|a: &Found, b: &Found| {
            compare(a.meters, b.meters, descending)
        });
    }
    found.truncate(returned);
    Ok(found)
}

/// Stores the results as a sorted set of their scores, or distances in the search's unit.
fn store_found(
    ctx: &mut Ctx,
    destination: &[u8],
    found: Vec<Found>,
    (unit, distances): (f64, bool),
    event: &'static str,
) -> Outcome {
    let returned = found.len() as i64;
    let members: BTreeMap<Vec<u8>, f64> = found
        .into_iter()
        .map(|f| {
            let score = if distances { f.meters / unit } else { f.score };
            (f.member, score)
        })
        .collect();
    store_members(ctx, destination, &members, event)?;
    Ok(Reply::Int(returned))
}

/// The results: members alone, or each as [member, distance?, hash?, [lon, lat]?].
fn found_reply(found: Vec<Found>, unit: f64, request: &Request) -> Reply {
    let with_any = request.with_dist || request.with_hash || request.with_coord;
    let replies = found.into_iter().map(|f| {
        if !with_any {
            return bulk(f.member);
        }
        let mut parts = vec![bulk(f.member)];
        if request.with_dist {
            parts.push(bulk(distance_text(f.meters / unit)));
        }
        if request.with_hash {
            parts.push(Reply::Int(f.score as i64));
        }
        if request.with_coord {
            parts.push(Reply::Array(vec![
                Reply::HumanDouble(f.lon),
                Reply::HumanDouble(f.lat),
            ]));
        }
        Reply::Array(parts)
    });
    Reply::Array(replies.collect())
}

/// GEOSEARCH key FROMMEMBER member | FROMLONLAT longitude latitude BYRADIUS radius unit |
/// BYBOX width height unit [ASC|DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]
pub fn geosearch(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    search(ctx, args, Form::Search)
}

/// GEOSEARCHSTORE destination source … (as GEOSEARCH, without WITH*) [STOREDIST]
pub fn geosearchstore(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    search(ctx, args, Form::SearchStore)
}

/// GEORADIUS key longitude latitude radius unit [WITHCOORD] [WITHDIST] [WITHHASH]
/// [COUNT count [ANY]] [ASC|DESC] [STORE key | STOREDIST key]
pub fn georadius(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    search(ctx, args, Form::Radius { store: true })
}

pub fn georadius_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    search(ctx, args, Form::Radius { store: false })
}

/// GEORADIUSBYMEMBER key member radius unit … (as GEORADIUS)
pub fn georadiusbymember(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    search(ctx, args, Form::ByMember { store: true })
}

pub fn georadiusbymember_ro(ctx: &mut Ctx, args: &[Vec<u8>]) -> Outcome {
    search(ctx, args, Form::ByMember { store: false })
}

/// Where GEORADIUS's or GEORADIUSBYMEMBER's STORE or STOREDIST names its destination (the
/// last one counts), for the writes a blocked client waits on. COUNT's number is skipped;
/// other mistakes make the command fail before it writes.
pub fn store_key(args: &[Vec<u8>]) -> Option<usize> {
    let mut at = if is(&args[0], "GEORADIUS") { 6 } else { 5 };
    let mut key = None;
    while at + 1 < args.len() {
        if is(&args[at], "STORE") || is(&args[at], "STOREDIST") {
            key = Some(at + 1);
            at += 1;
        } else if is(&args[at], "COUNT") {
            at += 1;
        }
        at += 1;
    }
    key
}
