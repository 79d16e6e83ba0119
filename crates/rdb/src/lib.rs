//! Redis's serialization of one value: the payload DUMP returns and RESTORE takes, so that
//! keys move between Redis and tailstore with Redis's own commands and the tools built on
//! them (a script that pipes DUMP into RESTORE, RIOT, redis-shake's RESTORE writer).
//!
//! # Format (Redis's RDB encoding of one object, framed as DUMP frames it)
//!
//! ```text
//! payload  = type:u8  object  version:u16le  crc:u64le
//! crc      = CRC-64/Redis (Jones polynomial, reflected, from 0) of all that precedes it
//! length   = 00llllll                        6 bits
//!          | 01llllll llllllll               14 bits, big-endian
//!          | 0x80 u32be | 0x81 u64be
//! string   = length bytes
//!          | 11000000 i8 | 11000001 i16le | 11000010 i32le     an integer, as its text
//!          | 11000011 clen:length len:length data              LZF-compressed (see lzf.rs)
//! ```
//!
//! | type | object | written by |
//! | --- | --- | --- |
//! | 0 string | string | all |
//! | 1 list, 2 set | length, then that many strings | Redis < 3.2 (list), all (large sets) |
//! | 3 sorted set | length, then (member string, score as text: 1 byte length, 253 NaN, 254 +inf, 255 −inf) | Redis < 4.0 |
//! | 4 hash | length, then (field, value) strings | all (large hashes) |
//! | 5 sorted set | length, then (member string, score f64le) | Redis ≥ 4.0 (large sorted sets) |
//! | 10, 12, 13 | a string holding a ziplist (list, sorted set, hash) | Redis < 7.0 |
//! | 11 | a string holding an intset (set of integers) | all |
//! | 14 | length, then that many ziplists (a quicklist's nodes) | Redis 3.2–6.2 |
//! | 16, 17, 20 | a string holding a listpack (hash, sorted set, set) | Redis ≥ 7.0 (20: ≥ 7.2) |
//! | 18 | length, then (container: length 1 plain or 2 packed, string: the element or a listpack) | Redis ≥ 7.0 |
//! | 15, 19, 21 | a stream: listpack nodes, last ID, consumer groups (see stream.rs) | Redis 5.0–6.2, 7.0, 7.2 |
//!
//! DUMP writes only types 0, 1, 2, 4, 5 and 15, with version 9: every Redis since 6.0
//! restores them (version 9 is Redis 6's; the types are older) and turns them into its
//! compact encodings itself; and type 19, with version 10 (Redis 7.0's), for a stream
//! whose counts type 15 would lose (see stream.rs). RESTORE reads all of the above, versions up to 11 (Redis
//! 7.2); it refuses modules' values and the zipmaps of Redis before 2.6 by name.
//!
//! A payload is untrusted input: every length is checked against the bytes that remain
//! before anything is allocated for it, and a value Redis would refuse is refused too (an
//! empty collection, a set member or hash field twice, a NaN score).

#![forbid(unsafe_code)]

mod libraries;
mod listpack;
mod lzf;
mod stream;
mod ziplist;

use std::collections::HashSet;

use crc::{Crc, CRC_64_REDIS};

pub use libraries::{dump_libraries, restore_libraries, LIBRARIES_VERSION};
pub use stream::{Consumer, Group, PendingEntry, Stream, StreamCounts, StreamEntry, StreamId};

/// The version DUMP writes in its payloads (see the module documentation).
pub const DUMP_VERSION: u16 = 9;
/// The version DUMP writes in a payload of a type 19 stream: Redis 7.0's, the first that
/// reads that type.
pub const STREAM_COUNTS_VERSION: u16 = 10;
/// The newest version RESTORE reads: Redis 7.2's.
pub const NEWEST_VERSION: u16 = 11;
/// The version and checksum after the object.
const FOOTER: usize = 10;
/// The end marker of a listpack and of a ziplist.
const END: u8 = 0xff;
/// The count of a listpack or ziplist too long to count in its header.
const COUNT_NOT_KEPT: usize = u16::MAX as usize;
/// The longest string a payload may hold (Redis's proto-max-bulk-len default).
const MAX_STRING: usize = 512 << 20;

/// What a payload may decode to: its elements' bytes, each counted with
/// [`ELEMENT_OVERHEAD`] more, at most [`BUDGET_PER_BYTE`] times the payload's length plus
/// [`BUDGET_BASE`]. A packed encoding holds an element in a byte or two, LZF compresses 88
/// to 1, and a stream names its fields once for a node of entries: a payload of a few MB
/// decoded to gigabytes before this bound. Redis keeps these encodings as they are.
const BUDGET_PER_BYTE: usize = 16;
const BUDGET_BASE: usize = 256 << 20;
/// What an element costs beyond its bytes (a vector's header and its allocation's).
const ELEMENT_OVERHEAD: usize = 32;

/// What is left of a payload's decoding budget (see [`BUDGET_PER_BYTE`]).
pub(crate) struct Budget {
    left: usize,
}

impl Budget {
    fn for_payload(len: usize) -> Self {
        Budget {
            left: BUDGET_BASE.saturating_add(len.saturating_mul(BUDGET_PER_BYTE)),
        }
    }

    #[cfg(test)]
    pub(crate) fn unlimited() -> Self {
        Budget { left: usize::MAX }
    }

    #[cfg(test)]
    fn of(left: usize) -> Self {
        Budget { left }
    }

    /// Takes an element of `len` bytes from the budget, before it is made.
    pub(crate) fn charge(&mut self, len: usize) -> Result<(), RdbError> {
        let cost = len.saturating_add(ELEMENT_OVERHEAD);
        self.left = self.left.checked_sub(cost).ok_or(RdbError::TooLarge)?;
        Ok(())
    }
}

static CRC64: Crc<u64> = Crc::<u64>::new(&CRC_64_REDIS);

/// RDB's value types (rdb.h).
mod code {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
}

/// A quicklist node's container (type 18): one element as it is, or a listpack of them.
const PLAIN_NODE: u64 = 1;
const PACKED_NODE: u64 = 2;

/// Name and value pairs: a hash's fields.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// One entry of a listpack or ziplist, read from the start of what it is given: its
/// element and the bytes it took.
type EntryReader = fn(&[u8]) -> Result<(Vec<u8>, usize), RdbError>;
/// [`listpack::elements`] or [`ziplist::elements`].
type PackedReader = fn(&[u8], &mut Budget) -> Result<Vec<Vec<u8>>, RdbError>;

/// One key's value, as a payload carries it.
#[derive(Clone, Debug, PartialEq)]
pub enum Object {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    Hash(Pairs),
    ZSet(Vec<(Vec<u8>, f64)>),
    Stream(Stream),
}

/// Why a payload was refused. The texts start with Redis's own, which clients look for.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RdbError {
    #[error("DUMP payload version or checksum are wrong")]
    VersionOrChecksum,
    #[error("Bad data format ({0})")]
    BadFormat(&'static str),
    #[error(
        "Bad data format (tailstore decodes at most {per_byte} times a payload's length plus \
         {base} MiB, counting {overhead} bytes more per element)",
        per_byte = BUDGET_PER_BYTE, base = BUDGET_BASE >> 20, overhead = ELEMENT_OVERHEAD
    )]
    TooLarge,
    #[error("Bad data format: tailstore does not restore {0}")]
    Unsupported(&'static str),
    /// FUNCTION RESTORE: a payload holding something other than libraries.
    #[error("given type is not a function")]
    NotALibrary,
    #[error("Pre-GA function format not supported")]
    PreGaLibrary,
    #[error("Failed loading library payload")]
    LibraryPayload,
}

fn bad(what: &'static str) -> RdbError {
    RdbError::BadFormat(what)
}

/// `object` as a DUMP payload.
pub fn dump(object: &Object) -> Vec<u8> {
    let mut out = Vec::new();
    let strings = |out: &mut Vec<u8>, code: u8, items: &[Vec<u8>]| {
        out.push(code);
        put_length(out, items.len() as u64);
        for item in items {
            put_string(out, item);
        }
    };
    match object {
        Object::String(value) => {
            out.push(code::STRING);
            put_string(&mut out, value);
        }
        Object::List(items) => strings(&mut out, code::LIST, items),
        Object::Set(members) => strings(&mut out, code::SET, members),
        Object::Hash(pairs) => {
            out.push(code::HASH);
            put_length(&mut out, pairs.len() as u64);
            for (field, value) in pairs {
                put_string(&mut out, field);
                put_string(&mut out, value);
            }
        }
        Object::ZSet(members) => {
            out.push(code::ZSET_2);
            put_length(&mut out, members.len() as u64);
            for (member, score) in members {
                put_string(&mut out, member);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        Object::Stream(stream) => {
            if stream::put_stream(&mut out, stream) == code::STREAM_LISTPACKS_2 {
                return frame(out, STREAM_COUNTS_VERSION);
            }
        }
    }
    frame(out, DUMP_VERSION)
}

/// A payload of `body` (a type and its object) with the footer of `version`: the version
/// and the checksum of all before it.
pub fn frame(mut body: Vec<u8>, version: u16) -> Vec<u8> {
    body.extend_from_slice(&version.to_le_bytes());
    let crc = CRC64.checksum(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

fn put_length(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if let Ok(len) = u32::try_from(len) {
        out.push(0x80);
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    put_length(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The value a DUMP payload (of this server or of Redis) carries.
pub fn restore(payload: &[u8]) -> Result<Object, RdbError> {
    restore_within(payload, Budget::for_payload(payload.len()))
}

/// [`restore`], decoding at most what `budget` allows.
fn restore_within(payload: &[u8], budget: Budget) -> Result<Object, RdbError> {
    let body = verified_body(payload)?;
    let mut reader = Reader::new(body, budget);
    let object = reader.object()?;
    if reader.at != body.len() {
        return Err(bad("bytes after the value"));
    }
    Ok(object)
}

/// The payload without its footer, once the footer's version and checksum are found good.
fn verified_body(payload: &[u8]) -> Result<&[u8], RdbError> {
    let split = payload
        .len()
        .checked_sub(FOOTER)
        .ok_or(RdbError::VersionOrChecksum)?;
    let (body, footer) = payload.split_at(split);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&footer[2..]);
    let checked = &payload[..split + 2];
    if version > NEWEST_VERSION || CRC64.checksum(checked) != u64::from_le_bytes(crc) {
        return Err(RdbError::VersionOrChecksum);
    }
    Ok(body)
}

/// A length as stored: a plain one, or the mark of a string in a special encoding.
enum Length {
    Plain(u64),
    Encoded(u8),
}

/// Reads a payload's object from its start.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    budget: Budget,
}

impl<'a> Reader<'a> {
    /// A reader of `body`, a payload's object, that may decode what `budget` allows.
    fn new(body: &'a [u8], budget: Budget) -> Self {
        Reader {
            bytes: body,
            at: 0,
            budget,
        }
    }

    fn take(&mut self, len: u64) -> Result<&'a [u8], RdbError> {
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| self.at.checked_add(len))
            .filter(|&end| end <= self.bytes.len())
            .ok_or(bad("the value runs past the payload's end"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    fn length(&mut self) -> Result<Length, RdbError> {
        let first = self.byte()?;
        let big_endian = |bytes: &[u8]| bytes.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        Ok(match first >> 6 {
            0 => Length::Plain(u64::from(first & 0x3f)),
            1 => Length::Plain(u64::from(first & 0x3f) << 8 | u64::from(self.byte()?)),
            2 => match first {
                0x80 => Length::Plain(big_endian(self.take(4)?)),
                0x81 => Length::Plain(big_endian(self.take(8)?)),
                _ => return Err(bad("a length of an unknown encoding")),
            },
            _ => Length::Encoded(first & 0x3f),
        })
    }

    fn plain_length(&mut self) -> Result<u64, RdbError> {
        match self.length()? {
            Length::Plain(len) => Ok(len),
            Length::Encoded(_) => Err(bad("an encoded string where a length belongs")),
        }
    }

    /// A count of things that each take at least `each` bytes of what follows: a damaged
    /// count is refused before anything is allocated for it.
    fn count(&mut self, each: u64) -> Result<usize, RdbError> {
        let count = self.plain_length()?;
        let room = (self.bytes.len() - self.at) as u64;
        if count.saturating_mul(each) > room {
            return Err(bad("a count larger than the payload holds"));
        }
        Ok(count as usize)
    }

    fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        let int = |bytes: &[u8]| listpack::int_text(listpack::little_endian_int(bytes));
        match self.length()? {
            Length::Plain(len) => {
                let bytes = self.take(len)?;
                self.budget.charge(bytes.len())?;
                Ok(bytes.to_vec())
            }
            Length::Encoded(0) => Ok(int(self.take(1)?)),
            Length::Encoded(1) => Ok(int(self.take(2)?)),
            Length::Encoded(2) => Ok(int(self.take(4)?)),
            Length::Encoded(3) => {
                let compressed = self.plain_length()?;
                let len = usize::try_from(self.plain_length()?)
                    .ok()
                    .filter(|&len| len <= MAX_STRING)
                    .ok_or(bad("a compressed string longer than 512 MiB"))?;
                self.budget.charge(len)?;
                lzf::decompress(self.take(compressed)?, len)
            }
            Length::Encoded(_) => Err(bad("a string of an unknown encoding")),
        }
    }

    fn strings(&mut self) -> Result<Vec<Vec<u8>>, RdbError> {
        let count = self.count(1)?;
        (0..count).map(|_| self.string()).collect()
    }

    fn object(&mut self) -> Result<Object, RdbError> {
        let kind = self.byte()?;
        match kind {
            code::STRING => Ok(Object::String(self.string()?)),
            code::LIST => list(self.strings()?),
            code::SET => set(self.strings()?),
            code::HASH => hash(pairs(self.strings_twice()?)?),
            code::ZSET => {
                let count = self.count(2)?;
                let members = (0..count)
                    .map(|_| Ok((self.string()?, self.text_score()?)))
                    .collect::<Result<_, RdbError>>()?;
                zset(members)
            }
            code::ZSET_2 => {
                let count = self.count(9)?;
                let members = (0..count)
                    .map(|_| {
                        let member = self.string()?;
                        let mut score = [0u8; 8];
                        score.copy_from_slice(self.take(8)?);
                        Ok((member, f64::from_le_bytes(score)))
                    })
                    .collect::<Result<_, RdbError>>()?;
                zset(members)
            }
            code::LIST_ZIPLIST => list(self.packed(ziplist::elements)?),
            code::SET_INTSET => {
                let blob = self.string()?;
                set(intset(&blob, &mut self.budget)?)
            }
            code::ZSET_ZIPLIST => zset(scored(self.packed(ziplist::elements)?)?),
            code::HASH_ZIPLIST => hash(pairs(self.packed(ziplist::elements)?)?),
            code::LIST_QUICKLIST => {
                let mut items = Vec::new();
                for _ in 0..self.count(1)? {
                    items.extend(self.packed(ziplist::elements)?);
                }
                list(items)
            }
            code::HASH_LISTPACK => hash(pairs(self.packed(listpack::elements)?)?),
            code::ZSET_LISTPACK => zset(scored(self.packed(listpack::elements)?)?),
            code::SET_LISTPACK => set(self.packed(listpack::elements)?),
            code::LIST_QUICKLIST_2 => list(self.quicklist_2()?),
            code::HASH_ZIPMAP => Err(RdbError::Unsupported(
                "a zipmap hash (written by Redis before 2.6)",
            )),
            code::STREAM_LISTPACKS | code::STREAM_LISTPACKS_2 | code::STREAM_LISTPACKS_3 => {
                Ok(Object::Stream(self.stream(kind)?))
            }
            code::MODULE | code::MODULE_2 => Err(RdbError::Unsupported("a module's value")),
            _ => Err(bad("a value of an unknown type")),
        }
    }

    /// The elements of the listpack or ziplist the next string holds, read by `elements`.
    fn packed(&mut self, elements: PackedReader) -> Result<Vec<Vec<u8>>, RdbError> {
        let blob = self.string()?;
        elements(&blob, &mut self.budget)
    }

    /// A count of strings that come in twos (a hash's fields and values), then the strings.
    fn strings_twice(&mut self) -> Result<Vec<Vec<u8>>, RdbError> {
        let count = self.count(2)?;
        (0..count * 2).map(|_| self.string()).collect()
    }

    /// A score of type 3, as text: a byte of length or of a special value, then the text.
    fn text_score(&mut self) -> Result<f64, RdbError> {
        match self.byte()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            len => score_of_text(self.take(u64::from(len))?),
        }
    }

    /// The elements of a list of type 18: its nodes' elements in order.
    fn quicklist_2(&mut self) -> Result<Vec<Vec<u8>>, RdbError> {
        let mut items = Vec::new();
        for _ in 0..self.count(2)? {
            let container = self.plain_length()?;
            let node = self.string()?;
            match container {
                PLAIN_NODE => items.push(node),
                PACKED_NODE => items.extend(listpack::elements(&node, &mut self.budget)?),
                _ => return Err(bad("a list node of an unknown container")),
            }
        }
        Ok(items)
    }
}

/// The elements of a listpack or a ziplist: a header whose first four bytes are the blob's
/// length and whose last two count the entries (65535: not kept), entries read one at a
/// time by `entry` (an element and the bytes it took), and the end marker.
fn packed_elements(
    blob: &[u8],
    header: usize,
    entry: EntryReader,
    budget: &mut Budget,
) -> Result<Vec<Vec<u8>>, RdbError> {
    let head = blob
        .get(..=header)
        .ok_or(bad("a packed list shorter than its header"))?;
    let total = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let count = usize::from(u16::from_le_bytes([head[header - 2], head[header - 1]]));
    if total != blob.len() || blob.last() != Some(&END) {
        return Err(bad("a packed list's length or end marker is wrong"));
    }
    let mut out = Vec::new();
    let mut at = header;
    // `entry` takes at least one byte and never more than it is given: `at` stays before
    // the end marker until it reaches it.
    while blob[at] != END {
        let (element, size) = entry(&blob[at..blob.len() - 1])?;
        budget.charge(element.len())?;
        out.push(element);
        at += size;
    }
    if at != blob.len() - 1 || (count != COUNT_NOT_KEPT && count != out.len()) {
        return Err(bad("a packed list's count is wrong"));
    }
    Ok(out)
}

/// The members of an intset: `width:u32le count:u32le` then the integers, little-endian.
fn intset(blob: &[u8], budget: &mut Budget) -> Result<Vec<Vec<u8>>, RdbError> {
    let head = blob
        .get(..8)
        .ok_or(bad("an intset shorter than its header"))?;
    let width = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let count = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    let body = &blob[8..];
    if !matches!(width, 2 | 4 | 8) || Some(body.len()) != count.checked_mul(width) {
        return Err(bad("an intset's width or count is wrong"));
    }
    body.chunks(width)
        .map(|int| {
            let text = listpack::int_text(listpack::little_endian_int(int));
            budget.charge(text.len())?;
            Ok(text)
        })
        .collect()
}

/// `raw`'s low `bits` bits as a two's complement integer.
fn sign_extend(raw: u64, bits: u32) -> i64 {
    if bits >= 64 {
        return raw as i64;
    }
    let shift = 64 - bits;
    ((raw << shift) as i64) >> shift
}

fn score_of_text(text: &[u8]) -> Result<f64, RdbError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|text| text.parse::<f64>().ok())
        .ok_or(bad("a score that is not a number"))
}

/// Elements that alternate name and value (a hash's fields, a sorted set's members).
fn pairs(elements: Vec<Vec<u8>>) -> Result<Pairs, RdbError> {
    if !elements.len().is_multiple_of(2) {
        return Err(bad("an odd number of elements where pairs belong"));
    }
    let mut elements = elements.into_iter();
    let mut out = Vec::with_capacity(elements.len() / 2);
    while let (Some(name), Some(value)) = (elements.next(), elements.next()) {
        out.push((name, value));
    }
    Ok(out)
}

fn scored(elements: Vec<Vec<u8>>) -> Result<Vec<(Vec<u8>, f64)>, RdbError> {
    pairs(elements)?
        .into_iter()
        .map(|(member, score)| Ok((member, score_of_text(&score)?)))
        .collect()
}

fn non_empty<T>(items: &[T]) -> Result<(), RdbError> {
    if items.is_empty() {
        return Err(bad("an empty collection"));
    }
    Ok(())
}

fn distinct<'a>(names: impl Iterator<Item = &'a [u8]>, what: &'static str) -> Result<(), RdbError> {
    let mut seen = HashSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(bad(what));
        }
    }
    Ok(())
}

fn list(items: Vec<Vec<u8>>) -> Result<Object, RdbError> {
    non_empty(&items)?;
    Ok(Object::List(items))
}

fn set(members: Vec<Vec<u8>>) -> Result<Object, RdbError> {
    non_empty(&members)?;
    distinct(members.iter().map(Vec::as_slice), "a set member twice")?;
    Ok(Object::Set(members))
}

fn hash(pairs: Pairs) -> Result<Object, RdbError> {
    non_empty(&pairs)?;
    distinct(
        pairs.iter().map(|(field, _)| field.as_slice()),
        "a hash field twice",
    )?;
    Ok(Object::Hash(pairs))
}

fn zset(members: Vec<(Vec<u8>, f64)>) -> Result<Object, RdbError> {
    non_empty(&members)?;
    distinct(
        members.iter().map(|(member, _)| member.as_slice()),
        "a sorted set member twice",
    )?;
    if members.iter().any(|(_, score)| score.is_nan()) {
        return Err(bad("a NaN score"));
    }
    Ok(Object::ZSet(members))
}

#[cfg(test)]
mod tests;
