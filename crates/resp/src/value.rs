//! Replies as a client receives them: every RESP2 and RESP3 type.

use crate::error::ProtocolError;
use crate::line::{find_line, Line};
use crate::number::parse_integer;
use crate::Limits;

/// Deepest nesting of aggregates accepted. Values are dropped recursively, so an unbounded depth
/// would let a peer overflow the stack of whoever drops the reply; Redis's replies nest a handful
/// of levels.
const MAX_NESTING: usize = 128;

/// Any RESP2/RESP3 value as a client receives it. RESP3 attributes (`|`) are read and dropped:
/// the value they annotate is returned in their place.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `+OK`
    Simple(Vec<u8>),
    /// `-ERR ...` or RESP3's blob error `!len`: the text without '-'.
    Error(Vec<u8>),
    /// `:1`
    Int(i64),
    /// `$3\r\nfoo`
    Bulk(Vec<u8>),
    /// RESP2's `$-1` and `*-1`, RESP3's `_`.
    Null,
    /// `*n`
    Array(Vec<Value>),
    /// `%n`
    Map(Vec<(Value, Value)>),
    /// `~n`
    Set(Vec<Value>),
    /// `,1.5`
    Double(f64),
    /// `#t` / `#f`
    Bool(bool),
    /// `(12345678901234567890`: the digits as sent.
    BigNumber(Vec<u8>),
    /// `=len\r\nfmt:text`
    Verbatim {
        /// The format, e.g. `txt` or `mkd`.
        format: [u8; 3],
        /// The text after `fmt:`.
        text: Vec<u8>,
    },
    /// `>n`: an out-of-band message (pub/sub, invalidation).
    Push(Vec<Value>),
}

/// Parses one reply from the front of buf: `Ok(None)` = incomplete; `Ok(Some((value, consumed)))`.
///
/// Lengths and counts are checked against `limits` when their line arrives, and nothing is
/// allocated beyond what the received bytes can fill. Aggregates may nest 128 deep; parsing
/// uses no recursion.
pub fn parse_reply(buf: &[u8], limits: &Limits) -> Result<Option<(Value, usize)>, ProtocolError> {
    let mut reader = Reader {
        buf,
        limits,
        pos: 0,
    };
    let mut open: Vec<Aggregate> = Vec::new();
    loop {
        let mut finished = match reader.item()? {
            None => return Ok(None),
            Some(Item::Value(value)) => Some(value),
            Some(Item::Open(aggregate)) => {
                if open.len() == MAX_NESTING {
                    return Err(ProtocolError::TooDeeplyNested);
                }
                open.push(aggregate);
                None
            }
        };
        // Close every aggregate the item completed, handing each to its parent.
        while let Some(top) = open.last_mut() {
            if let Some(value) = finished.take() {
                top.push(value);
            }
            if top.remaining > 0 {
                break;
            }
            finished = open.pop().and_then(Aggregate::finish);
            if finished.is_none() {
                // An attribute ended: the element it annotates is still to come.
                break;
            }
        }
        if let (true, Some(value)) = (open.is_empty(), finished) {
            return Ok(Some((value, reader.pos)));
        }
    }
}

/// One element header read from the stream.
enum Item {
    /// A complete scalar.
    Value(Value),
    /// An aggregate whose elements follow.
    Open(Aggregate),
}

/// What kind of aggregate is being filled.
#[derive(Clone, Copy)]
enum Kind {
    Array,
    Set,
    Push,
    Map,
    Attribute,
}

/// An aggregate whose elements are being read.
struct Aggregate {
    kind: Kind,
    /// Elements still to come (a map's keys and values each count).
    remaining: usize,
    items: Vec<Value>,
}

impl Aggregate {
    fn push(&mut self, value: Value) {
        if !matches!(self.kind, Kind::Attribute) {
            self.items.push(value);
        }
        self.remaining = self.remaining.saturating_sub(1);
    }

    /// The finished value; `None` for an attribute, which is dropped.
    fn finish(self) -> Option<Value> {
        match self.kind {
            Kind::Array => Some(Value::Array(self.items)),
            Kind::Set => Some(Value::Set(self.items)),
            Kind::Push => Some(Value::Push(self.items)),
            Kind::Map => Some(Value::Map(pairs(self.items))),
            Kind::Attribute => None,
        }
    }
}

/// Groups a map's flat key, value, key, value... elements into pairs.
fn pairs(items: Vec<Value>) -> Vec<(Value, Value)> {
    let mut pairs = Vec::with_capacity(items.len() / 2);
    let mut items = items.into_iter();
    while let (Some(key), Some(value)) = (items.next(), items.next()) {
        pairs.push((key, value));
    }
    pairs
}

/// A position in the buffer being parsed.
struct Reader<'a> {
    buf: &'a [u8],
    limits: &'a Limits,
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads the element at `pos`: a scalar, or an aggregate's header.
    fn item(&mut self) -> Result<Option<Item>, ProtocolError> {
        let Some(&kind) = self.buf.get(self.pos) else {
            return Ok(None);
        };
        if !b"+-:$_,#(!=*~>%|".contains(&kind) {
            return Err(ProtocolError::UnknownReplyType { got: kind });
        }
        let Some(line) = self.line()? else {
            return Ok(None);
        };
        match kind {
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                Ok(self.aggregate(kind, line)?.map(|item| match item {
                    Some(aggregate) => Item::Open(aggregate),
                    None => Item::Value(Value::Null),
                }))
            }
            b'$' | b'!' | b'=' => self.blob(kind, line).map(|value| value.map(Item::Value)),
            _ => scalar(kind, line).map(|value| Some(Item::Value(value))),
        }
    }

    /// Reads the rest of the line after the type byte at `pos`, and steps past its CRLF.
    fn line(&mut self) -> Result<Option<&'a [u8]>, ProtocolError> {
        let start = self.pos + 1;
        let end = match find_line(self.buf, start, b'\r', self.limits.max_inline) {
            Line::Found(end) => end,
            Line::Incomplete => return Ok(None),
            Line::TooLong => return Err(ProtocolError::TooBigReplyLine),
        };
        match self.buf.get(end + 1) {
            None => Ok(None),
            Some(b'\n') => {
                self.pos = end + 2;
                Ok(Some(self.buf.get(start..end).unwrap_or_default()))
            }
            Some(_) => Err(ProtocolError::BadLineTerminator),
        }
    }

    /// An aggregate header with its count `line`; `Some(None)` for RESP2's null array `*-1`.
    fn aggregate(&self, kind: u8, line: &[u8]) -> Result<Option<Option<Aggregate>>, ProtocolError> {
        let count = parse_integer(line).ok_or(ProtocolError::InvalidMultibulkLength)?;
        if count == -1 && kind == b'*' {
            return Ok(Some(None));
        }
        let count = usize::try_from(count)
            .ok()
            .filter(|count| *count <= self.limits.max_multibulk)
            .ok_or(ProtocolError::InvalidMultibulkLength)?;
        let (kind, elements) = match kind {
            b'~' => (Kind::Set, Some(count)),
            b'>' => (Kind::Push, Some(count)),
            b'%' => (Kind::Map, count.checked_mul(2)),
            b'|' => (Kind::Attribute, count.checked_mul(2)),
            _ => (Kind::Array, Some(count)),
        };
        let remaining = elements.ok_or(ProtocolError::InvalidMultibulkLength)?;
        // Every element takes at least three bytes ("_\r\n"), so no more can fit in what has
        // arrived: a claimed count costs memory only as its elements come in.
        let room = self.buf.len().saturating_sub(self.pos) / 3;
        let items = Vec::with_capacity(remaining.min(room));
        Ok(Some(Some(Aggregate {
            kind,
            remaining,
            items,
        })))
    }

    /// A bulk string, blob error or verbatim string with length `line`.
    fn blob(&mut self, kind: u8, line: &[u8]) -> Result<Option<Value>, ProtocolError> {
        let len = parse_integer(line).ok_or(ProtocolError::InvalidBulkLength)?;
        if len == -1 && kind == b'$' {
            return Ok(Some(Value::Null));
        }
        let len = usize::try_from(len)
            .ok()
            .filter(|len| *len <= self.limits.max_bulk)
            .ok_or(ProtocolError::InvalidBulkLength)?;
        let Some(payload) = self.payload(len)? else {
            return Ok(None);
        };
        match kind {
            b'!' => Ok(Some(Value::Error(payload.to_vec()))),
            b'=' => verbatim(payload).map(Some),
            _ => Ok(Some(Value::Bulk(payload.to_vec()))),
        }
    }

    /// The `len` bytes at `pos` once they and their CRLF have arrived.
    fn payload(&mut self, len: usize) -> Result<Option<&'a [u8]>, ProtocolError> {
        let end = self
            .pos
            .checked_add(len)
            .ok_or(ProtocolError::InvalidBulkLength)?;
        let Some(framed) = self.buf.get(self.pos..end.saturating_add(2)) else {
            return Ok(None);
        };
        let (payload, terminator) = framed.split_at(len);
        if terminator != b"\r\n" {
            return Err(ProtocolError::UnterminatedBulk);
        }
        self.pos = end + 2;
        Ok(Some(payload))
    }
}

/// A one-line value of type `kind`.
fn scalar(kind: u8, line: &[u8]) -> Result<Value, ProtocolError> {
    match kind {
        b'+' => Ok(Value::Simple(line.to_vec())),
        b'-' => Ok(Value::Error(line.to_vec())),
        b':' => parse_integer(line)
            .map(Value::Int)
            .ok_or(ProtocolError::InvalidInteger),
        b'_' if line.is_empty() => Ok(Value::Null),
        b'_' => Err(ProtocolError::InvalidNull),
        b',' => double(line).map(Value::Double),
        b'#' => match line {
            b"t" => Ok(Value::Bool(true)),
            b"f" => Ok(Value::Bool(false)),
            _ => Err(ProtocolError::InvalidBoolean),
        },
        b'(' => big_number(line),
        got => Err(ProtocolError::UnknownReplyType { got }),
    }
}

/// A RESP3 double: decimal or exponent notation, `inf`, `-inf`, `nan`.
fn double(line: &[u8]) -> Result<f64, ProtocolError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or(ProtocolError::InvalidDouble)
}

/// A RESP3 big number: an optional sign and at least one decimal digit.
fn big_number(line: &[u8]) -> Result<Value, ProtocolError> {
    let digits = line
        .strip_prefix(b"-")
        .or_else(|| line.strip_prefix(b"+"))
        .unwrap_or(line);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ProtocolError::InvalidBigNumber);
    }
    Ok(Value::BigNumber(line.to_vec()))
}

/// A verbatim string's payload: three format bytes, ':', the text.
fn verbatim(payload: &[u8]) -> Result<Value, ProtocolError> {
    match payload {
        [a, b, c, b':', text @ ..] => Ok(Value::Verbatim {
            format: [*a, *b, *c],
            text: text.to_vec(),
        }),
        _ => Err(ProtocolError::InvalidVerbatim),
    }
}
