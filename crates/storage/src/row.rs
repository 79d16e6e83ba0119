//! Values, their type checks against a column, and the compact encoding of a row's non-key
//! part (the B+tree value stored under the primary key, see [`crate::key`]).
//!
//! **Row value format** (version 1), for the schema's [value columns](Schema::value_columns)
//! in column order:
//!
//! ```text
//! u8        format version (1)
//! bitmap    ceil(n / 8) bytes, bit i (LSB first) set = column i is NULL; unused bits zero
//! fixed     for each non-NULL fixed-width column, in order: INT32 as i32 LE (4 bytes);
//!           INT64, DECIMAL (scaled) and TIMESTAMP as i64 LE (8 bytes)
//! variable  for each non-NULL CHAR / VARCHAR / BYTES column, in order: the length as a
//!           LEB128 varint (at most 5 bytes), then the bytes (UTF-8 for text; CHAR is stored
//!           without its trailing pad spaces and padded again when decoded)
//! ```
//!
//! NULL columns take only their bitmap bit. Decoding checks everything (version, bitmap,
//! NULL in a NOT NULL column, lengths, UTF-8, type limits, trailing bytes) and returns
//! [`RowError::Malformed`] rather than panicking on any input.
//!
//! ```
//! use tailstore_storage::row::Value;
//! use tailstore_storage::schema::{Column, ColumnType, Schema};
//!
//! let schema = Schema::new(
//!     vec![
//!         Column::new("id", ColumnType::Int64),
//!         Column::new("code", ColumnType::Char(4)),
//!         Column::nullable("note", ColumnType::Varchar(100)),
//!     ],
//!     vec![0],
//!     vec![],
//! )?;
//! let row = vec![Value::Int(7), Value::from("ab"), Value::Null];
//! let (key, value) = schema.encode_row(&row)?;
//! let back = schema.decode_row(&key, &value)?;
//! assert_eq!(back, vec![Value::Int(7), Value::from("ab  "), Value::Null]); // CHAR(4) padded
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::schema::{Column, ColumnType, Schema};

/// Current row value format version.
pub const ROW_FORMAT_VERSION: u8 = 1;

/// A column value. Integers of every width, decimals (scaled) and timestamps are `i64`s;
/// the column's [`ColumnType`] says how to read them. The default is `Null` (what
/// `std::mem::take` leaves behind when a value is moved out of a row).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Value {
    #[default]
    Null,
    /// An INT32 or INT64 value.
    Int(i64),
    /// A DECIMAL value as its scaled integer: `12.34` in a `DECIMAL(p, 2)` column is `1234`.
    Decimal(i64),
    /// A CHAR or VARCHAR value.
    Text(String),
    Bytes(Vec<u8>),
    /// Microseconds since the Unix epoch.
    Timestamp(i64),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The variant's name, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "integer",
            Value::Decimal(_) => "decimal",
            Value::Text(_) => "text",
            Value::Bytes(_) => "bytes",
            Value::Timestamp(_) => "timestamp",
        }
    }

    /// Checks that this value may be stored in `column`: the right variant for its type,
    /// INT32 range, DECIMAL precision, CHAR/VARCHAR length in characters (CHAR ignores
    /// trailing spaces beyond its length), BYTES length, NULL only where nullable.
    pub fn check(&self, column: &Column) -> Result<(), RowError> {
        let mismatch = || RowError::TypeMismatch {
            column: column.name.clone(),
            ty: column.ty,
            found: self.kind(),
        };
        let too_long = |len: usize| RowError::TooLong {
            column: column.name.clone(),
            ty: column.ty,
            len,
        };
        let out_of_range = |value: i64| RowError::OutOfRange {
            column: column.name.clone(),
            ty: column.ty,
            value,
        };
        match (column.ty, self) {
            (_, Value::Null) => {
                if !column.nullable {
                    return Err(RowError::NullNotAllowed(column.name.clone()));
                }
            }
            (ColumnType::Int32, Value::Int(v)) => {
                if i32::try_from(*v).is_err() {
                    return Err(out_of_range(*v));
                }
            }
            (ColumnType::Int64, Value::Int(_)) | (ColumnType::Timestamp, Value::Timestamp(_)) => {}
            (ColumnType::Decimal { precision, .. }, Value::Decimal(v)) => {
                // `checked_pow` because a `Column` built outside a schema may claim any
                // precision; beyond 19 digits every i64 fits.
                let limit = 10u64.checked_pow(u32::from(precision));
                if limit.is_some_and(|limit| v.unsigned_abs() >= limit) {
                    return Err(out_of_range(*v));
                }
            }
            (ColumnType::Char(n), Value::Text(s)) => {
                if let Some(len) = chars_beyond(s.trim_end_matches(' '), n) {
                    return Err(too_long(len));
                }
            }
            (ColumnType::Varchar(n), Value::Text(s)) => {
                if let Some(len) = chars_beyond(s, n) {
                    return Err(too_long(len));
                }
            }
            (ColumnType::Bytes(n), Value::Bytes(b)) => {
                if b.len() > n as usize {
                    return Err(too_long(b.len()));
                }
            }
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    /// [`Value::check`], then the canonical form stored for `column`: CHAR(n) text padded
    /// with spaces to exactly `n` characters; everything else unchanged.
    pub fn normalized(&self, column: &Column) -> Result<Value, RowError> {
        self.check(column)?;
        Ok(match (column.ty, self) {
            (ColumnType::Char(n), Value::Text(s)) => Value::Text(pad_char(s, n)),
            _ => self.clone(),
        })
    }
}

/// The length of `s` in characters if it is more than `n`. A string of at most `n` bytes
/// has at most `n` characters, so the common case counts nothing (counting was 4% of TPC-C).
fn chars_beyond(s: &str, n: u32) -> Option<usize> {
    if s.len() <= n as usize {
        return None;
    }
    let len = char_len(s);
    (len > n as usize).then_some(len)
}

/// `s` without trailing spaces, padded with spaces to `n` characters (`s` must fit).
pub(crate) fn pad_char(s: &str, n: u32) -> String {
    const SPACES: &str = "                                                                ";
    let trimmed = s.trim_end_matches(' ');
    let mut pad = (n as usize).saturating_sub(char_len(trimmed));
    let mut out = String::with_capacity(trimmed.len() + pad);
    out.push_str(trimmed);
    while pad > 0 {
        let run = pad.min(SPACES.len());
        out.push_str(&SPACES[..run]);
        pad -= run;
    }
    out
}

/// Whether `s` is already what [`pad_char`] would make of it for CHAR(`n`): exactly `n`
/// characters (trailing spaces are the padding).
fn is_padded(s: &str, n: u32) -> bool {
    char_len(s) == n as usize
}

/// The length of `s` in characters; for ASCII, its length in bytes (checked at memory
/// speed, where counting characters walks them one by one).
fn char_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Int(i64::from(v))
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::Bytes(v)
    }
}

impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Value {
        Value::Bytes(v.to_vec())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// Errors of the row layer: values that do not fit their column, and bytes that are not a
/// valid encoded row or key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    #[error("expected {expected} values, got {found}")]
    WrongArity { expected: usize, found: usize },
    #[error("column `{0}` is NOT NULL but got NULL")]
    NullNotAllowed(String),
    #[error("column `{column}` of type {ty} cannot hold a {found} value")]
    TypeMismatch {
        column: String,
        ty: ColumnType,
        found: &'static str,
    },
    #[error("value {value} is out of range for column `{column}` of type {ty}")]
    OutOfRange {
        column: String,
        ty: ColumnType,
        value: i64,
    },
    #[error("value of length {len} is too long for column `{column}` of type {ty}")]
    TooLong {
        column: String,
        ty: ColumnType,
        len: usize,
    },
    #[error("no index #{0} in the schema")]
    UnknownIndex(usize),
    #[error("malformed row: {0}")]
    Malformed(String),
    #[error("malformed key at byte {offset}: {reason}")]
    MalformedKey { offset: usize, reason: &'static str },
}

impl Schema {
    /// Checks a full row (one value per column, in column order) and returns its normalized
    /// form (see [`Value::normalized`]).
    pub fn check_row(&self, row: &[Value]) -> Result<Vec<Value>, RowError> {
        arity(self.columns().len(), row.len())?;
        self.columns()
            .iter()
            .zip(row)
            .map(|(c, v)| v.normalized(c))
            .collect()
    }

    /// [`Schema::check_row`] without copying the row when no value needs normalizing (only
    /// a CHAR value not yet padded to its length): the common case — a row read, changed
    /// and written back holds its CHAR values padded already — and rows can be kilobytes.
    pub fn checked_row<'r>(
        &self,
        row: &'r [Value],
    ) -> Result<std::borrow::Cow<'r, [Value]>, RowError> {
        arity(self.columns().len(), row.len())?;
        let mut needs_padding = false;
        for (column, value) in self.columns().iter().zip(row) {
            value.check(column)?;
            needs_padding |= match (column.ty, value) {
                (ColumnType::Char(n), Value::Text(s)) => !is_padded(s, n),
                _ => false,
            };
        }
        if needs_padding {
            return self.check_row(row).map(std::borrow::Cow::Owned);
        }
        Ok(std::borrow::Cow::Borrowed(row))
    }

    /// Encodes a full row into its B+tree entry: (primary key, value).
    pub fn encode_row(&self, row: &[Value]) -> Result<(Vec<u8>, Vec<u8>), RowError> {
        Ok((self.primary_key_of(row)?, self.encode_value(row)?))
    }

    /// Encodes the non-key part of a full row (one value per column, in column order).
    pub fn encode_value(&self, row: &[Value]) -> Result<Vec<u8>, RowError> {
        self.encode_value_after(0, row)
    }

    /// [`Schema::encode_value`] behind `room` zero bytes, which the caller fills in later
    /// (the engine's row version): the value is not copied again to put something before it.
    pub fn encode_value_after(&self, room: usize, row: &[Value]) -> Result<Vec<u8>, RowError> {
        arity(self.columns().len(), row.len())?;
        let columns = self.columns_at(self.value_columns());
        let values: Vec<&Value> = self.value_columns().iter().map(|&c| &row[c]).collect();
        encode_fields_after(room, &columns, &values)
    }

    /// Decodes a row value into the values of the [value columns](Schema::value_columns),
    /// in that order.
    pub fn decode_value(&self, bytes: &[u8]) -> Result<Vec<Value>, RowError> {
        let columns = self.columns_at(self.value_columns());
        decode_fields(&columns, bytes)
    }

    /// Decodes a B+tree entry back into the full row, in column order.
    pub fn decode_row(&self, key: &[u8], value: &[u8]) -> Result<Vec<Value>, RowError> {
        let mut row = vec![Value::Null; self.columns().len()];
        self.decode_row_into(key, value, |_| true, &mut row)?;
        Ok(row)
    }

    /// The values of `columns` (in that order) of the row stored as (`key`, `value`):
    /// [`Schema::decode_row_into`] with just those columns wanted (a stock row carries eleven
    /// strings; a read of its quantity needs none).
    pub fn decode_columns(
        &self,
        key: &[u8],
        value: &[u8],
        columns: &[usize],
    ) -> Result<Vec<Value>, RowError> {
        let width = self.columns().len();
        if let Some(&c) = columns.iter().find(|&&c| c >= width) {
            return Err(RowError::Malformed(format!(
                "column {c} asked of a row of {width} columns"
            )));
        }
        let mut row = vec![Value::Null; width];
        self.decode_row_into(key, value, |c| columns.contains(&c), &mut row)?;
        Ok(columns.iter().map(|&c| row[c].clone()).collect())
    }

    /// [`Schema::decode_row`] into `row` (one value per column, each `Null`: a scan reuses
    /// one row for all its entries), decoding only the columns `wanted`; the others stay
    /// `Null`. The entry's layout (the key's tags, lengths and escapes, the value's lengths,
    /// NULL bitmap and trailing bytes) is checked whole, the contents of the columns not
    /// wanted are not (their text is not checked as UTF-8, nor a key column's value against
    /// its type). An error is reported as `decode_row` reports it.
    pub fn decode_row_into(
        &self,
        key: &[u8],
        value: &[u8],
        wanted: impl Fn(usize) -> bool,
        row: &mut [Value],
    ) -> Result<(), RowError> {
        arity(self.columns().len(), row.len())?;
        debug_assert!(
            row.iter().all(Value::is_null),
            "a row to decode into is all NULL"
        );
        if self.decode_directly(key, value, &wanted, row).is_ok() {
            return Ok(());
        }
        // The plain path's error (or, should it decode what the direct one refused, its row).
        let full = self.decode_row_in_parts(key, value)?;
        for (c, v) in full.into_iter().enumerate() {
            row[c] = if wanted(c) { v } else { Value::Null };
        }
        Ok(())
    }

    /// [`Schema::decode_row_into`]'s common case, straight into the row without intermediate
    /// vectors; an error here is only a sign that the plain path must say what is wrong.
    fn decode_directly(
        &self,
        key: &[u8],
        value: &[u8],
        wanted: impl Fn(usize) -> bool,
        row: &mut [Value],
    ) -> Result<(), RowError> {
        let columns = self.columns();
        let mut pos = 0;
        for &c in self.primary_key() {
            if pos >= key.len() {
                return Err(RowError::Malformed("key too short".into()));
            }
            if !wanted(c) {
                crate::key::skip_value(key, &mut pos)?;
                continue;
            }
            let v = crate::key::decode_value(key, &mut pos)?;
            v.check(&columns[c])?;
            row[c] = match (columns[c].ty, v) {
                (ColumnType::Char(n), Value::Text(s)) => Value::Text(pad_char(&s, n)),
                (_, v) => v,
            };
        }
        if pos != key.len() {
            return Err(RowError::Malformed("key too long".into()));
        }
        let value_columns = self.value_columns();
        decode_fields_into(
            value_columns.len(),
            |i| &columns[value_columns[i]],
            |i| Some(value_columns[i]).filter(|&c| wanted(c)),
            value,
            row,
        )
    }

    fn decode_row_in_parts(&self, key: &[u8], value: &[u8]) -> Result<Vec<Value>, RowError> {
        let key_values = self.decode_primary_key(key)?;
        let rest = self.decode_value(value)?;
        let mut row = vec![Value::Null; self.columns().len()];
        for (&c, v) in self.primary_key().iter().zip(key_values) {
            row[c] = v;
        }
        for (&c, v) in self.value_columns().iter().zip(rest) {
            row[c] = v;
        }
        Ok(row)
    }
}

pub(crate) fn arity(expected: usize, found: usize) -> Result<(), RowError> {
    if expected == found {
        Ok(())
    } else {
        Err(RowError::WrongArity { expected, found })
    }
}

/// Encodes `values` for `columns` (same length) in the row value format, checking each.
pub fn encode_fields(columns: &[&Column], values: &[&Value]) -> Result<Vec<u8>, RowError> {
    encode_fields_after(0, columns, values)
}

/// [`encode_fields`] behind `room` zero bytes (see [`Schema::encode_value_after`]).
fn encode_fields_after(
    room: usize,
    columns: &[&Column],
    values: &[&Value],
) -> Result<Vec<u8>, RowError> {
    arity(columns.len(), values.len())?;
    let n = columns.len();
    // Sized for the whole row, so that a value of kilobytes is not copied again as the
    // buffer grows (5 bytes: the longest length varint).
    let variable: usize = values
        .iter()
        .map(|v| variable_len(v).map_or(0, |b| 5 + b))
        .sum();
    let mut out = Vec::with_capacity(room + 1 + n.div_ceil(8) + 8 * n + variable);
    out.resize(room, 0);
    out.push(ROW_FORMAT_VERSION);
    let bitmap_at = out.len();
    out.resize(bitmap_at + n.div_ceil(8), 0);
    for (i, (column, value)) in columns.iter().zip(values).enumerate() {
        value.check(column)?;
        if value.is_null() {
            out[bitmap_at + i / 8] |= 1 << (i % 8);
        }
    }
    for (column, value) in columns.iter().zip(values) {
        match (column.ty, value) {
            (ColumnType::Int32, Value::Int(v)) => {
                let v = i32::try_from(*v).map_err(|_| RowError::OutOfRange {
                    column: column.name.clone(),
                    ty: column.ty,
                    value: *v,
                })?;
                out.extend_from_slice(&v.to_le_bytes());
            }
            (_, Value::Int(v) | Value::Decimal(v) | Value::Timestamp(v)) => {
                out.extend_from_slice(&v.to_le_bytes());
            }
            _ => {}
        }
    }
    for (column, value) in columns.iter().zip(values) {
        let bytes: &[u8] = match (column.ty, value) {
            (ColumnType::Char(_), Value::Text(s)) => s.trim_end_matches(' ').as_bytes(),
            (_, Value::Text(s)) => s.as_bytes(),
            (_, Value::Bytes(b)) => b,
            _ => continue,
        };
        let len = u32::try_from(bytes.len()).map_err(|_| RowError::TooLong {
            column: column.name.clone(),
            ty: column.ty,
            len: bytes.len(),
        })?;
        put_varint(&mut out, len);
        out.extend_from_slice(bytes);
    }
    Ok(out)
}

/// The byte length of a variable-length value (text or bytes), `None` for the others.
fn variable_len(value: &Value) -> Option<usize> {
    match value {
        Value::Text(s) => Some(s.len()),
        Value::Bytes(b) => Some(b.len()),
        _ => None,
    }
}

/// Decodes bytes in the row value format for `columns`; never panics.
pub fn decode_fields(columns: &[&Column], bytes: &[u8]) -> Result<Vec<Value>, RowError> {
    let mut values = vec![Value::Null; columns.len()];
    decode_fields_into(columns.len(), |i| columns[i], Some, bytes, &mut values)?;
    Ok(values)
}

/// [`decode_fields`] for the `n` columns `column(0..n)`, storing the value of column `i` in
/// `out[place(i)]` (which must be `Null`), so that a whole row is decoded without copies. A
/// column whose `place` is `None` is not wanted: its bytes are walked over (the format is
/// still checked) but not decoded, validated as text or stored.
fn decode_fields_into<'c>(
    n: usize,
    column: impl Fn(usize) -> &'c Column,
    place: impl Fn(usize) -> Option<usize>,
    bytes: &[u8],
    out: &mut [Value],
) -> Result<(), RowError> {
    let malformed = |reason: String| RowError::Malformed(reason);
    let mut reader = Reader { bytes, pos: 0 };
    let version = reader.take(1)?[0];
    if version != ROW_FORMAT_VERSION {
        return Err(malformed(format!("unknown format version {version}")));
    }
    let bitmap = reader.take(n.div_ceil(8))?;
    let used_bits = n % 8;
    if used_bits > 0 {
        if let Some(last) = bitmap.last() {
            if last >> used_bits != 0 {
                return Err(malformed("unused bits of the NULL bitmap are set".into()));
            }
        }
    }
    let is_null = |i: usize| bitmap.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0);
    for i in 0..n {
        let column = column(i);
        if is_null(i) {
            if !column.nullable {
                return Err(malformed(format!(
                    "NULL in NOT NULL column `{}`",
                    column.name
                )));
            }
            continue;
        }
        let value = match column.ty {
            ColumnType::Int32 => Value::Int(i64::from(i32::from_le_bytes(reader.array()?))),
            ColumnType::Int64 => Value::Int(i64::from_le_bytes(reader.array()?)),
            ColumnType::Decimal { .. } => Value::Decimal(i64::from_le_bytes(reader.array()?)),
            ColumnType::Timestamp => Value::Timestamp(i64::from_le_bytes(reader.array()?)),
            ColumnType::Char(_) | ColumnType::Varchar(_) | ColumnType::Bytes(_) => continue,
        };
        if let Some(at) = place(i) {
            out[at] = value;
        }
    }
    for i in 0..n {
        let column = column(i);
        if is_null(i) || column.ty.fixed_width().is_some() {
            continue;
        }
        let len = reader.varint()? as usize;
        let raw = reader.take(len)?;
        let Some(at) = place(i) else {
            continue;
        };
        out[at] =
            match column.ty {
                ColumnType::Bytes(_) => Value::Bytes(raw.to_vec()),
                ColumnType::Char(n) => {
                    let s = std::str::from_utf8(raw).map_err(|_| {
                        malformed(format!("column `{}` is not valid UTF-8", column.name))
                    })?;
                    if chars_beyond(s, n).is_some() {
                        return Err(malformed(format!("column `{}` is too long", column.name)));
                    }
                    Value::Text(pad_char(s, n))
                }
                _ => Value::Text(String::from_utf8(raw.to_vec()).map_err(|_| {
                    malformed(format!("column `{}` is not valid UTF-8", column.name))
                })?),
            };
    }
    if reader.pos != bytes.len() {
        return Err(malformed(format!(
            "{} trailing bytes",
            bytes.len() - reader.pos
        )));
    }
    for i in 0..n {
        if let Some(at) = place(i) {
            out[at]
                .check(column(i))
                .map_err(|e| malformed(format!("decoded value does not fit: {e}")))?;
        }
    }
    Ok(())
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7F) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], RowError> {
        let end = self.pos.checked_add(len).filter(|&e| e <= self.bytes.len());
        match end.and_then(|e| self.bytes.get(self.pos..e)) {
            Some(s) => {
                self.pos += len;
                Ok(s)
            }
            None => Err(RowError::Malformed(format!(
                "truncated: needs {len} bytes at offset {} of {}",
                self.pos,
                self.bytes.len()
            ))),
        }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RowError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn varint(&mut self) -> Result<u32, RowError> {
        let mut v: u32 = 0;
        for i in 0..5 {
            let b = self.take(1)?[0];
            let bits = u32::from(b & 0x7F);
            if i == 4 && bits > 0x0F {
                return Err(RowError::Malformed("length varint overflows".into()));
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(RowError::Malformed("length varint too long".into()))
    }
}
