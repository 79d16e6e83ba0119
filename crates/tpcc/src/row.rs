//! Typed access to the columns of a row (`Vec<Value>` in the tables' column order).

use tailstore_storage::Value;

use crate::error::{Result, TpccError};

/// Reads columns of a decoded row by position, checking their kind.
pub(crate) trait Fields {
    /// An INT32 or INT64 column.
    fn int(&self, column: usize) -> Result<i64>;
    /// A nullable integer column.
    fn int_or_null(&self, column: usize) -> Result<Option<i64>>;
    /// A DECIMAL column, as its scaled integer.
    fn decimal(&self, column: usize) -> Result<i64>;
    /// A CHAR or VARCHAR column (CHAR comes back padded to its length).
    fn text(&self, column: usize) -> Result<&str>;
    /// A nullable TIMESTAMP column.
    fn timestamp_or_null(&self, column: usize) -> Result<Option<i64>>;
}

fn bad(column: usize, expected: &'static str, found: Option<&Value>) -> TpccError {
    TpccError::BadValue {
        column,
        expected,
        found: found.map_or("nothing", Value::kind),
    }
}

impl Fields for [Value] {
    fn int(&self, column: usize) -> Result<i64> {
        match self.get(column) {
            Some(Value::Int(v)) => Ok(*v),
            other => Err(bad(column, "an integer", other)),
        }
    }

    fn int_or_null(&self, column: usize) -> Result<Option<i64>> {
        match self.get(column) {
            Some(Value::Int(v)) => Ok(Some(*v)),
            Some(Value::Null) => Ok(None),
            other => Err(bad(column, "an integer or NULL", other)),
        }
    }

    fn decimal(&self, column: usize) -> Result<i64> {
        match self.get(column) {
            Some(Value::Decimal(v)) => Ok(*v),
            other => Err(bad(column, "a decimal", other)),
        }
    }

    fn text(&self, column: usize) -> Result<&str> {
        match self.get(column) {
            Some(Value::Text(s)) => Ok(s),
            other => Err(bad(column, "text", other)),
        }
    }

    fn timestamp_or_null(&self, column: usize) -> Result<Option<i64>> {
        match self.get(column) {
            Some(Value::Timestamp(v)) => Ok(Some(*v)),
            Some(Value::Null) => Ok(None),
            other => Err(bad(column, "a timestamp or NULL", other)),
        }
    }
}

/// An id as a key value.
pub(crate) fn id(v: u32) -> Value {
    Value::Int(i64::from(v))
}

/// Microseconds since the Unix epoch, now (0 if the clock is before 1970).
pub(crate) fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// A row of `columns` values with the given (position, value) pairs set and the rest NULL:
/// rows are built by column constant, never by remembering the column order.
pub(crate) fn build<const N: usize>(columns: usize, values: [(usize, Value); N]) -> Vec<Value> {
    let mut row = vec![Value::Null; columns];
    for (column, value) in values {
        if let Some(slot) = row.get_mut(column) {
            *slot = value;
        }
    }
    row
}
