//! Table schemas: column types, columns, the primary key and secondary indexes.
//!
//! A [`Schema`] is built once, validated, and then immutable: every column index it holds is
//! known to be in range, column and index names are unique, the primary key is non-empty and
//! has no nullable column. The row layer ([`crate::row`]) and the key encoding
//! ([`crate::key`]) rely on these invariants.
//!
//! ```
//! use tailstore_storage::schema::{Column, ColumnType, IndexDef, Schema};
//!
//! // TPC-C's CUSTOMER, abridged: primary key (c_w_id, c_d_id, c_id) and a non-unique index
//! // on (c_w_id, c_d_id, c_last) used by the payment and order-status transactions.
//! let schema = Schema::new(
//!     vec![
//!         Column::new("c_id", ColumnType::Int32),
//!         Column::new("c_d_id", ColumnType::Int32),
//!         Column::new("c_w_id", ColumnType::Int32),
//!         Column::new("c_last", ColumnType::Varchar(16)),
//!         Column::new("c_credit", ColumnType::Char(2)),
//!         Column::new("c_balance", ColumnType::Decimal { precision: 12, scale: 2 }),
//!         Column::nullable("c_since", ColumnType::Timestamp),
//!     ],
//!     vec![2, 1, 0],
//!     vec![IndexDef::new("customer_by_last", vec![2, 1, 3], false)],
//! )
//! .expect("valid schema");
//! assert_eq!(schema.column_index("c_last"), Some(3));
//! assert_eq!(schema.value_columns(), &[3, 4, 5, 6]);
//!
//! // A nullable primary-key column is refused with a message naming it.
//! let err = Schema::new(
//!     vec![Column::nullable("k", ColumnType::Int64)],
//!     vec![0],
//!     vec![],
//! )
//! .unwrap_err();
//! assert_eq!(err.to_string(), "primary key column `k` is nullable");
//! ```

use std::fmt;

/// The largest decimal precision: every `DECIMAL(18, s)` value fits in an `i64`.
pub const MAX_DECIMAL_PRECISION: u8 = 18;

/// The largest `CHAR(n)`: a padded value must fit in one B+tree entry
/// ([`crate::btree::MAX_ENTRY`] bytes).
pub const MAX_CHAR_LENGTH: usize = crate::btree::MAX_ENTRY;

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ColumnType {
    /// A 32-bit signed integer (held as [`crate::row::Value::Int`], range-checked).
    Int32,
    /// A 64-bit signed integer.
    Int64,
    /// Fixed-point decimal, `DECIMAL(precision, scale)`: the value `v` is stored as the scaled
    /// integer `v * 10^scale` in an `i64` ([`crate::row::Value::Decimal`]), with at most
    /// `precision` digits in all (1 ..= [`MAX_DECIMAL_PRECISION`], `scale <= precision`).
    Decimal { precision: u8, scale: u8 },
    /// `CHAR(n)`: text of at most `n` characters, padded with spaces to exactly `n` (SQL's
    /// PAD SPACE semantics: `'ab'` and `'ab  '` are the same value).
    /// `1 <= n <=` [`MAX_CHAR_LENGTH`].
    Char(u32),
    /// `VARCHAR(max)`: text of at most `max` characters (Unicode scalar values).
    Varchar(u32),
    /// A byte string of at most `max` bytes.
    Bytes(u32),
    /// Microseconds since the Unix epoch (UTC), signed.
    Timestamp,
}

impl ColumnType {
    /// The width in bytes of this type in the fixed-width part of an encoded row, or `None`
    /// for variable-length types.
    pub fn fixed_width(self) -> Option<usize> {
        match self {
            ColumnType::Int32 => Some(4),
            ColumnType::Int64 | ColumnType::Decimal { .. } | ColumnType::Timestamp => Some(8),
            ColumnType::Char(_) | ColumnType::Varchar(_) | ColumnType::Bytes(_) => None,
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::Int32 => write!(f, "INT32"),
            ColumnType::Int64 => write!(f, "INT64"),
            ColumnType::Decimal { precision, scale } => write!(f, "DECIMAL({precision},{scale})"),
            ColumnType::Char(n) => write!(f, "CHAR({n})"),
            ColumnType::Varchar(n) => write!(f, "VARCHAR({n})"),
            ColumnType::Bytes(n) => write!(f, "BYTES({n})"),
            ColumnType::Timestamp => write!(f, "TIMESTAMP"),
        }
    }
}

/// A named, typed column.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
    /// Whether the column accepts NULL.
    pub nullable: bool,
}

impl Column {
    /// A `NOT NULL` column.
    pub fn new(name: impl Into<String>, ty: ColumnType) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: false,
        }
    }

    /// A nullable column.
    pub fn nullable(name: impl Into<String>, ty: ColumnType) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: true,
        }
    }
}

/// A secondary index: its key is the index columns followed by the primary-key columns, so
/// that entries of a non-unique index are unique too (see [`Schema::index_key`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct IndexDef {
    pub name: String,
    /// Indices into [`Schema::columns`], in key order.
    pub columns: Vec<usize>,
    /// Whether two rows may not share the same (non-NULL) index columns. Enforcing it is the
    /// table layer's job: look up [`Schema::index_prefix`] before inserting.
    pub unique: bool,
}

impl IndexDef {
    pub fn new(name: impl Into<String>, columns: Vec<usize>, unique: bool) -> IndexDef {
        IndexDef {
            name: name.into(),
            columns,
            unique,
        }
    }
}

/// Why a schema was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("a schema needs at least one column")]
    NoColumns,
    #[error("duplicate column name `{0}`")]
    DuplicateColumn(String),
    #[error("column `{column}` has an invalid type {ty}: {reason}")]
    InvalidType {
        column: String,
        ty: ColumnType,
        reason: String,
    },
    #[error("the primary key is empty")]
    EmptyPrimaryKey,
    #[error("{owner} refers to column #{index}, but the schema has {count} columns")]
    UnknownColumn {
        owner: String,
        index: usize,
        count: usize,
    },
    #[error("{owner} lists column `{column}` twice")]
    RepeatedKeyColumn { owner: String, column: String },
    #[error("primary key column `{0}` is nullable")]
    NullablePrimaryKey(String),
    #[error("duplicate index name `{0}`")]
    DuplicateIndex(String),
    #[error("index `{0}` has no columns")]
    EmptyIndex(String),
}

/// A validated table schema (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    columns: Vec<Column>,
    primary_key: Vec<usize>,
    indexes: Vec<IndexDef>,
    /// The columns not in the primary key, in column order: what a row's value holds.
    value_columns: Vec<usize>,
}

impl Schema {
    /// Validates and builds a schema. `primary_key` and each index's columns are indices
    /// into `columns`; a composite primary key is allowed.
    pub fn new(
        columns: Vec<Column>,
        primary_key: Vec<usize>,
        indexes: Vec<IndexDef>,
    ) -> Result<Schema, SchemaError> {
        if columns.is_empty() {
            return Err(SchemaError::NoColumns);
        }
        for (i, column) in columns.iter().enumerate() {
            if columns[..i].iter().any(|c| c.name == column.name) {
                return Err(SchemaError::DuplicateColumn(column.name.clone()));
            }
            check_type(column)?;
        }
        if primary_key.is_empty() {
            return Err(SchemaError::EmptyPrimaryKey);
        }
        check_key_columns("the primary key", &primary_key, &columns)?;
        for &c in &primary_key {
            if columns[c].nullable {
                return Err(SchemaError::NullablePrimaryKey(columns[c].name.clone()));
            }
        }
        for (i, index) in indexes.iter().enumerate() {
            if indexes[..i].iter().any(|x| x.name == index.name) {
                return Err(SchemaError::DuplicateIndex(index.name.clone()));
            }
            if index.columns.is_empty() {
                return Err(SchemaError::EmptyIndex(index.name.clone()));
            }
            check_key_columns(&format!("index `{}`", index.name), &index.columns, &columns)?;
        }
        let value_columns = (0..columns.len())
            .filter(|c| !primary_key.contains(c))
            .collect();
        Ok(Schema {
            columns,
            primary_key,
            indexes,
            value_columns,
        })
    }

    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The primary-key columns, in key order.
    pub fn primary_key(&self) -> &[usize] {
        &self.primary_key
    }

    pub fn indexes(&self) -> &[IndexDef] {
        &self.indexes
    }

    /// The columns outside the primary key, in column order: those a row's value holds.
    pub fn value_columns(&self) -> &[usize] {
        &self.value_columns
    }

    /// The columns at `positions` (indices into [`Schema::columns`]), in that order.
    pub fn columns_at<'a>(
        &'a self,
        positions: impl IntoIterator<Item = &'a usize>,
    ) -> Vec<&'a Column> {
        positions.into_iter().map(|&c| &self.columns[c]).collect()
    }

    /// The position of the column named `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The position of the index named `name`.
    pub fn index_position(&self, name: &str) -> Option<usize> {
        self.indexes.iter().position(|x| x.name == name)
    }
}

fn check_type(column: &Column) -> Result<(), SchemaError> {
    let invalid = |reason: &str| SchemaError::InvalidType {
        column: column.name.clone(),
        ty: column.ty,
        reason: reason.to_string(),
    };
    match column.ty {
        ColumnType::Decimal { precision, scale } => {
            if precision == 0 || precision > MAX_DECIMAL_PRECISION {
                return Err(invalid("precision must be between 1 and 18"));
            }
            if scale > precision {
                return Err(invalid("scale must not exceed precision"));
            }
        }
        ColumnType::Char(0) => return Err(invalid("CHAR needs a length of at least 1")),
        ColumnType::Char(n) if n as usize > MAX_CHAR_LENGTH => {
            return Err(invalid(&format!(
                "CHAR is padded to its length, which must not exceed {MAX_CHAR_LENGTH}"
            )))
        }
        _ => {}
    }
    Ok(())
}

fn check_key_columns(owner: &str, key: &[usize], columns: &[Column]) -> Result<(), SchemaError> {
    for (i, &c) in key.iter().enumerate() {
        if c >= columns.len() {
            return Err(SchemaError::UnknownColumn {
                owner: owner.to_string(),
                index: c,
                count: columns.len(),
            });
        }
        if key[..i].contains(&c) {
            return Err(SchemaError::RepeatedKeyColumn {
                owner: owner.to_string(),
                column: columns[c].name.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols() -> Vec<Column> {
        vec![
            Column::new("a", ColumnType::Int32),
            Column::new("b", ColumnType::Varchar(10)),
            Column::nullable("c", ColumnType::Int64),
        ]
    }

    #[test]
    fn valid_schema_with_composite_key_and_index() {
        let s = Schema::new(
            cols(),
            vec![1, 0],
            vec![IndexDef::new("by_c", vec![2], true)],
        )
        .expect("valid");
        assert_eq!(s.primary_key(), &[1, 0]);
        assert_eq!(s.value_columns(), &[2]);
        assert_eq!(s.index_position("by_c"), Some(0));
        assert_eq!(s.column_index("zz"), None);
    }

    #[test]
    fn decimal_check_survives_an_unvalidated_precision() {
        use crate::row::Value;
        let wide = Column::new(
            "d",
            ColumnType::Decimal {
                precision: 40,
                scale: 0,
            },
        );
        Value::Decimal(i64::MIN)
            .check(&wide)
            .expect("every i64 fits");
        let narrow = Column::new(
            "d",
            ColumnType::Decimal {
                precision: 2,
                scale: 1,
            },
        );
        Value::Decimal(-99).check(&narrow).expect("fits");
        assert!(Value::Decimal(100).check(&narrow).is_err());
    }

    #[test]
    fn schema_validation_errors() {
        let err = |c: Vec<Column>, pk: Vec<usize>, ix: Vec<IndexDef>| {
            Schema::new(c, pk, ix).expect_err("must be refused")
        };
        assert_eq!(err(vec![], vec![0], vec![]), SchemaError::NoColumns);
        assert_eq!(err(cols(), vec![], vec![]), SchemaError::EmptyPrimaryKey);
        let mut dup = cols();
        dup.push(Column::new("a", ColumnType::Int64));
        assert_eq!(
            err(dup, vec![0], vec![]),
            SchemaError::DuplicateColumn("a".into())
        );
        let e = err(cols(), vec![0, 7], vec![]);
        assert_eq!(
            e.to_string(),
            "the primary key refers to column #7, but the schema has 3 columns"
        );
        assert_eq!(
            err(cols(), vec![2], vec![]),
            SchemaError::NullablePrimaryKey("c".into())
        );
        assert_eq!(
            err(cols(), vec![0, 0], vec![]).to_string(),
            "the primary key lists column `a` twice"
        );
        let e = err(cols(), vec![0], vec![IndexDef::new("i", vec![5], false)]);
        assert_eq!(
            e.to_string(),
            "index `i` refers to column #5, but the schema has 3 columns"
        );
        assert_eq!(
            err(cols(), vec![0], vec![IndexDef::new("i", vec![], false)]),
            SchemaError::EmptyIndex("i".into())
        );
        assert_eq!(
            err(
                cols(),
                vec![0],
                vec![
                    IndexDef::new("i", vec![1], false),
                    IndexDef::new("i", vec![2], false)
                ]
            ),
            SchemaError::DuplicateIndex("i".into())
        );
        let bad_decimal = vec![Column::new(
            "m",
            ColumnType::Decimal {
                precision: 19,
                scale: 2,
            },
        )];
        assert!(err(bad_decimal, vec![0], vec![])
            .to_string()
            .contains("column `m` has an invalid type DECIMAL(19,2)"));
        let bad_scale = vec![Column::new(
            "m",
            ColumnType::Decimal {
                precision: 4,
                scale: 5,
            },
        )];
        assert!(matches!(
            err(bad_scale, vec![0], vec![]),
            SchemaError::InvalidType { .. }
        ));
        for n in [0, MAX_CHAR_LENGTH as u32 + 1] {
            let bad_char = vec![Column::new("s", ColumnType::Char(n))];
            assert!(matches!(
                err(bad_char, vec![0], vec![]),
                SchemaError::InvalidType { .. }
            ));
        }
    }
}
