//! Order-preserving key encoding: tuples of [`Value`]s to byte strings whose memcmp order is
//! the tuples' lexicographic order (the B+tree compares keys with memcmp).
//!
//! Each element is a tag byte followed by its payload; the encoding of a tuple is the
//! concatenation of its elements, so the encoding of a prefix of a tuple is a byte prefix of
//! the tuple's encoding (which is what [`prefix_bounds`] relies on).
//!
//! ```text
//! NULL       0x01                               (sorts before every non-NULL value)
//! Int        0x10  8 bytes big-endian, sign bit flipped
//! Decimal    0x11  the scaled i64, same as Int
//! Timestamp  0x12  same as Int
//! Text       0x20  UTF-8 bytes, each 0x00 written as 0x00 0xFF, then terminator 0x00 0x00
//! Bytes      0x21  same as Text
//! ```
//!
//! Within one column all non-NULL values have the same tag, so elements compare by payload:
//! flipped big-endian integers in signed order; escaped strings in byte order with a
//! prefix first (the terminator `0x00 0x00` is below any continuation, including the
//! escaped `0x00 0xFF`); UTF-8 byte order equals code point order. CHAR columns are padded
//! to their length before encoding (SQL PAD SPACE comparison). The encoding is
//! self-describing: [`decode_tuple`] needs no schema.
//!
//! ```
//! use std::ops::Bound;
//! use tailstore_storage::key::{decode_tuple, encode_tuple, prefix_bounds};
//! use tailstore_storage::row::Value;
//!
//! let a = encode_tuple(&[Value::Int(-5), Value::from("ab")]);
//! let b = encode_tuple(&[Value::Int(-5), Value::from("abc")]);
//! let c = encode_tuple(&[Value::Int(3), Value::Null]);
//! assert!(a < b && b < c);
//! assert_eq!(decode_tuple(&c)?, vec![Value::Int(3), Value::Null]);
//!
//! // Every key whose first element is -5 lies within these bounds.
//! let (lower, upper) = prefix_bounds(&encode_tuple(&[Value::Int(-5)]));
//! assert!(matches!(&lower, Bound::Included(l) if l.as_slice() <= a.as_slice()));
//! assert!(matches!(&upper, Bound::Excluded(u) if b.as_slice() < u.as_slice() && u.as_slice() < c.as_slice()));
//! # Ok::<(), tailstore_storage::row::RowError>(())
//! ```

use std::ops::Bound;

use crate::row::{arity, RowError, Value};
use crate::schema::{Column, ColumnType, Schema};

const TAG_NULL: u8 = 0x01;
const TAG_INT: u8 = 0x10;
const TAG_DECIMAL: u8 = 0x11;
const TAG_TIMESTAMP: u8 = 0x12;
const TAG_TEXT: u8 = 0x20;
const TAG_BYTES: u8 = 0x21;

/// Appends the encoding of one value to `out`.
pub fn encode_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.push(TAG_NULL),
        Value::Int(v) => put_i64(out, TAG_INT, *v),
        Value::Decimal(v) => put_i64(out, TAG_DECIMAL, *v),
        Value::Timestamp(v) => put_i64(out, TAG_TIMESTAMP, *v),
        Value::Text(s) => put_escaped(out, TAG_TEXT, s.as_bytes()),
        Value::Bytes(b) => put_escaped(out, TAG_BYTES, b),
    }
}

/// The encoding of a tuple (values as given: no type check, no CHAR padding; the
/// [`Schema`] methods do both).
pub fn encode_tuple(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        encode_value(v, &mut out);
    }
    out
}

/// Decodes a whole key back into its tuple; malformed input is an error, never a panic.
pub fn decode_tuple(bytes: &[u8]) -> Result<Vec<Value>, RowError> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < bytes.len() {
        out.push(decode_value(bytes, &mut pos)?);
    }
    Ok(out)
}

/// Decodes the element starting at `*pos` and advances `*pos` past it.
pub fn decode_value(bytes: &[u8], pos: &mut usize) -> Result<Value, RowError> {
    let start = *pos;
    Ok(match element(bytes, pos)? {
        Element::Null => Value::Null,
        Element::Int(TAG_INT, v) => Value::Int(v),
        Element::Int(TAG_DECIMAL, v) => Value::Decimal(v),
        // `element` gives `Int` for the three integer tags only.
        Element::Int(_, v) => Value::Timestamp(v),
        Element::Escaped(TAG_TEXT, raw) => Value::Text(String::from_utf8(unescape(raw)).map_err(
            |_| RowError::MalformedKey {
                offset: start,
                reason: "text is not UTF-8",
            },
        )?),
        Element::Escaped(_, raw) => Value::Bytes(unescape(raw)),
    })
}

/// Advances `*pos` past the element starting there, checking its framing (tag, length,
/// escapes) as [`decode_value`] does, without building its value (and so without checking
/// that text is UTF-8): a read that wants some of a key's columns walks over the others.
pub fn skip_value(bytes: &[u8], pos: &mut usize) -> Result<(), RowError> {
    element(bytes, pos).map(drop)
}

/// One element of a key, as it lies in the key's bytes.
enum Element<'b> {
    Null,
    /// An integer-like element: its tag and value.
    Int(u8, i64),
    /// A string element: its tag and its escaped bytes, without the terminator.
    Escaped(u8, &'b [u8]),
}

fn element<'b>(bytes: &'b [u8], pos: &mut usize) -> Result<Element<'b>, RowError> {
    let start = *pos;
    let err = |offset, reason| RowError::MalformedKey { offset, reason };
    let tag = *bytes.get(start).ok_or(err(start, "missing element"))?;
    *pos = start + 1;
    Ok(match tag {
        TAG_NULL => Element::Null,
        TAG_INT | TAG_DECIMAL | TAG_TIMESTAMP => {
            let raw = bytes
                .get(*pos..*pos + 8)
                .ok_or(err(*pos, "truncated integer"))?;
            let mut a = [0u8; 8];
            a.copy_from_slice(raw);
            *pos += 8;
            Element::Int(tag, (u64::from_be_bytes(a) ^ (1 << 63)) as i64)
        }
        TAG_TEXT | TAG_BYTES => {
            let from = *pos;
            skip_escaped(bytes, pos)?;
            Element::Escaped(tag, &bytes[from..*pos - 2])
        }
        _ => return Err(err(start, "unknown tag")),
    })
}

/// The byte length of the first `n` elements of `key` (so `&key[..len]` is their encoding
/// and `&key[len..]` the rest's).
pub fn prefix_len(key: &[u8], n: usize) -> Result<usize, RowError> {
    let mut pos = 0;
    for _ in 0..n {
        decode_value(key, &mut pos)?;
    }
    Ok(pos)
}

/// Scan bounds covering exactly the keys that start with `prefix`:
/// `[prefix, successor)`, where the successor is the smallest byte string greater than every
/// string with that prefix (unbounded if there is none: an empty or all-0xFF prefix).
pub fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let upper = match prefix_successor(prefix) {
        Some(s) => Bound::Excluded(s),
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix.to_vec()), upper)
}

/// The smallest byte string greater than all strings starting with `prefix`, if any.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut out = prefix[..=last].to_vec();
    out[last] += 1;
    Some(out)
}

fn put_i64(out: &mut Vec<u8>, tag: u8, v: i64) {
    out.push(tag);
    out.extend_from_slice(&((v as u64) ^ (1 << 63)).to_be_bytes());
}

fn put_escaped(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag);
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Moves `*pos` past an escaped string and its terminator (`00 00`), checking that every
/// other zero byte is escaped (`00 FF`).
fn skip_escaped(bytes: &[u8], pos: &mut usize) -> Result<(), RowError> {
    let unterminated = || RowError::MalformedKey {
        offset: bytes.len(),
        reason: "unterminated string",
    };
    loop {
        let rest = bytes.get(*pos..).unwrap_or_default();
        let zero = rest.iter().position(|&b| b == 0).ok_or_else(unterminated)?;
        *pos += zero + 1;
        let next = *bytes.get(*pos).ok_or_else(unterminated)?;
        *pos += 1;
        match next {
            0x00 => return Ok(()),
            0xFF => {}
            _ => {
                return Err(RowError::MalformedKey {
                    offset: *pos - 1,
                    reason: "bad escape",
                })
            }
        }
    }
}

/// The bytes an escaped string (checked by [`skip_escaped`], terminator excluded) stands
/// for: each `00 FF` is a zero byte.
fn unescape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut runs = raw.split(|&b| b == 0);
    out.extend_from_slice(runs.next().unwrap_or_default());
    for run in runs {
        // Every zero but the terminator's is followed by its 0xFF.
        out.push(0);
        out.extend_from_slice(run.get(1..).unwrap_or_default());
    }
    out
}

/// Bytes reserved for a key before it is encoded: most keys (a few integers, a short
/// string) fit, so encoding one does not grow its buffer element by element.
const KEY_CAPACITY: usize = 64;

/// Key construction from a schema: type checks, CHAR padding and column order.
impl Schema {
    /// The primary key of a full row (one value per column, in column order).
    pub fn primary_key_of(&self, row: &[Value]) -> Result<Vec<u8>, RowError> {
        arity(self.columns().len(), row.len())?;
        let mut out = Vec::with_capacity(KEY_CAPACITY);
        for &c in self.primary_key() {
            self.encode_key_column(c, &row[c], &mut out)?;
        }
        Ok(out)
    }

    /// A primary-key prefix: `values` for the first `values.len()` primary-key columns.
    /// Pass it to [`prefix_bounds`] to scan them all; with every column given it is the
    /// whole key.
    pub fn primary_key_prefix(&self, values: &[Value]) -> Result<Vec<u8>, RowError> {
        // `encode_checked` over the primary-key columns, without collecting them first and
        // without copying values that need no padding (every lookup encodes its key here).
        let key_columns = self.primary_key();
        if values.len() > key_columns.len() {
            return Err(RowError::WrongArity {
                expected: key_columns.len(),
                found: values.len(),
            });
        }
        let mut out = Vec::with_capacity(KEY_CAPACITY);
        for (&c, v) in key_columns.iter().zip(values) {
            self.encode_key_column(c, v, &mut out)?;
        }
        Ok(out)
    }

    /// Appends `v`, checked (and padded if column `c` is CHAR), as key column `c`; copies
    /// the value only to pad it (every write and lookup encodes its key here).
    fn encode_key_column(&self, c: usize, v: &Value, out: &mut Vec<u8>) -> Result<(), RowError> {
        let column = &self.columns()[c];
        match (column.ty, v) {
            (ColumnType::Char(_), Value::Text(_)) => encode_value(&v.normalized(column)?, out),
            _ => {
                v.check(column)?;
                encode_value(v, out);
            }
        }
        Ok(())
    }

    /// Decodes a primary key into the (checked, normalized) values of the primary-key
    /// columns, in key order.
    pub fn decode_primary_key(&self, key: &[u8]) -> Result<Vec<Value>, RowError> {
        let values = decode_tuple(key)?;
        arity(self.primary_key().len(), values.len())?;
        self.primary_key()
            .iter()
            .zip(&values)
            .map(|(&c, v)| v.normalized(&self.columns()[c]))
            .collect()
    }

    /// The key of a row's entry in secondary index `index`: the index columns, then the
    /// primary-key columns (so entries of a non-unique index are distinct). The index's value
    /// can be empty: the primary key is recovered with
    /// [`Schema::primary_key_from_index_key`].
    pub fn index_key(&self, index: usize, row: &[Value]) -> Result<Vec<u8>, RowError> {
        arity(self.columns().len(), row.len())?;
        let def = self
            .indexes()
            .get(index)
            .ok_or(RowError::UnknownIndex(index))?;
        let mut out = Vec::new();
        for &c in def.columns.iter().chain(self.primary_key()) {
            encode_value(&row[c].normalized(&self.columns()[c])?, &mut out);
        }
        Ok(out)
    }

    /// An index-key prefix: `values` for the first `values.len()` columns of the index key
    /// (index columns, then primary-key columns). E.g. for an index on
    /// `(c_w_id, c_d_id, c_last)`, `[w, d, last]` selects all customers of district `(w, d)`
    /// named `last`, via [`prefix_bounds`]. For a unique index, a non-empty scan of the
    /// prefix of all index columns means a conflict (unless a value is NULL: SQL allows
    /// duplicate NULLs).
    pub fn index_prefix(&self, index: usize, values: &[Value]) -> Result<Vec<u8>, RowError> {
        let def = self
            .indexes()
            .get(index)
            .ok_or(RowError::UnknownIndex(index))?;
        let columns = self.columns_at(def.columns.iter().chain(self.primary_key()));
        encode_checked(&columns, values)
    }

    /// Decodes a key of secondary index `index` into (index column values, primary-key
    /// values), both checked and normalized.
    pub fn decode_index_key(
        &self,
        index: usize,
        key: &[u8],
    ) -> Result<(Vec<Value>, Vec<Value>), RowError> {
        let def = self
            .indexes()
            .get(index)
            .ok_or(RowError::UnknownIndex(index))?;
        let mut values = decode_tuple(key)?;
        arity(def.columns.len() + self.primary_key().len(), values.len())?;
        let pk = values.split_off(def.columns.len());
        let values = def
            .columns
            .iter()
            .zip(&values)
            .map(|(&c, v)| v.normalized(&self.columns()[c]))
            .collect::<Result<Vec<_>, _>>()?;
        let pk = self
            .primary_key()
            .iter()
            .zip(&pk)
            .map(|(&c, v)| v.normalized(&self.columns()[c]))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((values, pk))
    }

    /// The primary key embedded at the end of an index key of `index`.
    pub fn primary_key_from_index_key<'k>(
        &self,
        index: usize,
        key: &'k [u8],
    ) -> Result<&'k [u8], RowError> {
        let def = self
            .indexes()
            .get(index)
            .ok_or(RowError::UnknownIndex(index))?;
        let at = prefix_len(key, def.columns.len())?;
        Ok(&key[at..])
    }
}

fn encode_checked(columns: &[&Column], values: &[Value]) -> Result<Vec<u8>, RowError> {
    if values.len() > columns.len() {
        return Err(RowError::WrongArity {
            expected: columns.len(),
            found: values.len(),
        });
    }
    let mut out = Vec::new();
    for (column, v) in columns.iter().zip(values) {
        encode_value(&v.normalized(column)?, &mut out);
    }
    Ok(out)
}
