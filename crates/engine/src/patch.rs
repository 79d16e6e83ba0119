//! Column-granular reads and writes: which columns a read depends on, which columns a write
//! changes, and the changes themselves.
//!
//! A row is the unit of storage and of the version the concurrency control checks, but two
//! transactions that touch *different columns* of one row do not conflict: TPC-C's Payment
//! adds to `w_ytd` while New-Order reads `w_tax` of the same warehouse row. Each read and
//! each key lock carries a [`ColumnMask`]; two of them overlap only if they share a column
//! (or one of them is the whole row). See "Column reads and column writes" in `txn.rs` for
//! the protocol and why it stays serializable.

use tailstore_storage::schema::{Column, ColumnType};
use tailstore_storage::{Schema, Value};

use crate::error::{EngineError, Result};

/// A set of columns of one row, as a bit per column. Bit 63 stands for the row as a whole
/// (its existence and every column): every mask that comes from a whole-row read or write
/// has it, so those always overlap anything. Columns from 62 on share bit 62, which can only
/// make masks overlap that would not otherwise: never the wrong way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ColumnMask(u64);

impl ColumnMask {
    /// The row as a whole: a full read, an insert, an update of the whole row, a delete.
    pub(crate) const WHOLE_ROW: ColumnMask = ColumnMask(u64::MAX);
    /// Nothing but the row's existence (and what the whole-row bit stands for).
    const EXISTENCE: ColumnMask = ColumnMask(1 << 63);

    fn bit(column: usize) -> u64 {
        1 << column.min(62)
    }

    /// A read of `columns`: it depends on them and on the row existing.
    pub(crate) fn read_of(columns: &[usize]) -> ColumnMask {
        ColumnMask(
            columns
                .iter()
                .fold(Self::EXISTENCE.0, |mask, &c| mask | Self::bit(c)),
        )
    }

    /// A patch of `columns`: it changes them and nothing else, and the row stays.
    fn write_of(columns: impl Iterator<Item = usize>) -> ColumnMask {
        ColumnMask(columns.fold(0, |mask, c| mask | Self::bit(c)))
    }

    pub(crate) fn overlaps(self, other: ColumnMask) -> bool {
        self.0 & other.0 != 0
    }
}

/// A change to one column of a row, applied at commit to the row as it is then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ColumnChange {
    /// Sets the column to this value.
    Set(Value),
    /// Adds to an integer or decimal column (a decimal in its scaled units: 1 is 0.01 in a
    /// `DECIMAL(p, 2)`). The transaction does not read the column, so concurrent additions
    /// to one counter do not conflict.
    Add(i64),
}

/// The column changes a transaction makes to one row, in the order it made them.
#[derive(Clone, Debug)]
pub(crate) struct Patch {
    changes: Vec<(usize, ColumnChange)>,
    mask: ColumnMask,
}

impl Patch {
    /// Checks `changes` against `schema` (in range, not a key or index column, a value the
    /// column accepts, additions only to numbers) and returns them as a patch, CHAR values
    /// padded.
    pub(crate) fn new(
        schema: &Schema,
        table: &str,
        changes: &[(usize, ColumnChange)],
    ) -> Result<Patch> {
        let mut checked = Vec::with_capacity(changes.len());
        for (column, change) in changes {
            let def = changeable_column(schema, table, *column)?;
            let change = match change {
                ColumnChange::Set(value) => ColumnChange::Set(value.normalized(def)?),
                ColumnChange::Add(delta) => {
                    if !matches!(
                        def.ty,
                        ColumnType::Int32 | ColumnType::Int64 | ColumnType::Decimal { .. }
                    ) {
                        return Err(EngineError::Column(format!(
                            "cannot add to column `{}` of table `{table}`: it is of type {}",
                            def.name, def.ty
                        )));
                    }
                    ColumnChange::Add(*delta)
                }
            };
            checked.push((*column, change));
        }
        let mask = ColumnMask::write_of(checked.iter().map(|(c, _)| *c));
        Ok(Patch {
            changes: checked,
            mask,
        })
    }

    pub(crate) fn mask(&self) -> ColumnMask {
        self.mask
    }

    /// This patch followed by `later`, folded so that a column keeps at most a `Set` and an
    /// `Add` after it however often it is changed: a counter one transaction changes per row
    /// it writes (a key count) stays one change instead of growing with the rows. A `Set`
    /// replaces what came before it on its column; additions sum unless the sum overflows,
    /// where they are kept apart (applied one after another, as before folding).
    pub(crate) fn then(&mut self, later: Patch) {
        for (column, change) in later.changes {
            self.fold(column, change);
        }
        self.mask = ColumnMask(self.mask.0 | later.mask.0);
    }

    fn fold(&mut self, column: usize, change: ColumnChange) {
        let last = self.changes.iter().rposition(|(c, _)| *c == column);
        match (change, last) {
            (ColumnChange::Set(value), Some(_)) => {
                self.changes.retain(|(c, _)| *c != column);
                self.changes.push((column, ColumnChange::Set(value)));
            }
            (ColumnChange::Add(delta), Some(at)) => match &mut self.changes[at].1 {
                ColumnChange::Add(sum) if sum.checked_add(delta).is_some() => *sum += delta,
                _ => self.changes.push((column, ColumnChange::Add(delta))),
            },
            (change, None) => self.changes.push((column, change)),
        }
    }

    /// Applies the changes to `row` (a full row of `schema`).
    pub(crate) fn apply(&self, schema: &Schema, row: &mut [Value]) -> Result<()> {
        for (column, change) in &self.changes {
            let def = &schema.columns()[*column];
            let current = &row[*column];
            let next = match change {
                ColumnChange::Set(value) => value.clone(),
                ColumnChange::Add(delta) => added(current, *delta, def)?,
            };
            next.check(def)?;
            row[*column] = next;
        }
        Ok(())
    }
}

/// `current + delta` for an integer or decimal column.
fn added(current: &Value, delta: i64, def: &Column) -> Result<Value> {
    let overflow = || {
        EngineError::Column(format!(
            "adding {delta} to column `{}` overflows a 64-bit integer",
            def.name
        ))
    };
    match current {
        Value::Int(v) => Ok(Value::Int(v.checked_add(delta).ok_or_else(overflow)?)),
        Value::Decimal(v) => Ok(Value::Decimal(v.checked_add(delta).ok_or_else(overflow)?)),
        other => Err(EngineError::Column(format!(
            "cannot add to column `{}`: it holds {}",
            def.name,
            other.kind()
        ))),
    }
}

/// Column `column` of `schema`, if a patch may change it: key and index columns are changed
/// only by whole-row updates, which also move the entries they are part of.
fn changeable_column<'s>(schema: &'s Schema, table: &str, column: usize) -> Result<&'s Column> {
    let def = column_def(schema, table, column)?;
    let in_key = schema.primary_key().contains(&column);
    let indexed = schema
        .indexes()
        .iter()
        .any(|index| index.columns.contains(&column));
    if in_key || indexed {
        return Err(EngineError::Column(format!(
            "column `{}` of table `{table}` is part of the primary key or an index: \
             change it with `update`",
            def.name
        )));
    }
    Ok(def)
}

/// Checks that every column in `columns` exists in `schema`.
pub(crate) fn check_columns(schema: &Schema, table: &str, columns: &[usize]) -> Result<()> {
    columns
        .iter()
        .try_for_each(|&c| column_def(schema, table, c).map(drop))
}

/// Column `column` of `schema`, or an error naming the table.
fn column_def<'s>(schema: &'s Schema, table: &str, column: usize) -> Result<&'s Column> {
    schema
        .columns()
        .get(column)
        .ok_or_else(|| EngineError::Column(format!("table `{table}` has no column #{column}")))
}

/// The values of `columns` in `row`, in that order.
pub(crate) fn project(row: &[Value], columns: &[usize]) -> Vec<Value> {
    columns.iter().map(|&c| row[c].clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tailstore_storage::schema::IndexDef;

    fn schema() -> Schema {
        Schema::new(
            vec![
                Column::new("id", ColumnType::Int64),
                Column::new("name", ColumnType::Char(4)),
                Column::new(
                    "ytd",
                    ColumnType::Decimal {
                        precision: 6,
                        scale: 2,
                    },
                ),
                Column::new("grp", ColumnType::Int32),
                Column::new("cnt", ColumnType::Int32),
            ],
            vec![0],
            vec![IndexDef::new("by_grp", vec![3], false)],
        )
        .expect("valid schema")
    }

    #[test]
    fn masks_overlap_on_shared_columns_and_on_the_whole_row() {
        let reads_name = ColumnMask::read_of(&[1]);
        let writes_ytd = ColumnMask::write_of([2].into_iter());
        assert!(!reads_name.overlaps(writes_ytd));
        assert!(ColumnMask::read_of(&[2]).overlaps(writes_ytd));
        assert!(ColumnMask::read_of(&[]).overlaps(ColumnMask::WHOLE_ROW));
        assert!(!ColumnMask::read_of(&[]).overlaps(writes_ytd));
        // Columns beyond 62 share a bit: they may overlap needlessly, never miss.
        assert!(ColumnMask::read_of(&[70]).overlaps(ColumnMask::write_of([63].into_iter())));
    }

    /// A change to `cnt` (INT32, column 4) or `ytd` (DECIMAL(6, 2), column 2).
    fn small_change() -> impl Strategy<Value = (usize, ColumnChange)> {
        let column = prop_oneof![Just(2usize), Just(4usize)];
        let change = prop_oneof![
            (-300i64..300).prop_map(ColumnChange::Add),
            (-3_000i64..3_000).prop_map(|v| ColumnChange::Set(Value::Int(v))),
        ];
        (column, change).prop_map(|(column, change)| match (column, change) {
            (2, ColumnChange::Set(Value::Int(v))) => (2, ColumnChange::Set(Value::Decimal(v))),
            other => other,
        })
    }

    proptest! {
        /// Patches joined one change at a time (a transaction's counter updates) apply
        /// what the changes applied one after another do, and hold at most two changes
        /// per column however many were joined.
        #[test]
        fn joined_patches_apply_the_changes_in_order_and_stay_small(
            changes in proptest::collection::vec(small_change(), 1..60),
        ) {
            let schema = schema();
            let start = || {
                vec![Value::Int(1), Value::Text("ab".into()), Value::Decimal(0), Value::Int(0), Value::Int(0)]
            };
            let mut one_by_one = start();
            for change in &changes {
                let single = Patch::new(&schema, "t", std::slice::from_ref(change)).expect("valid");
                single.apply(&schema, &mut one_by_one).expect("within range");
            }
            let mut joined = Patch::new(&schema, "t", &changes[..1]).expect("valid");
            for change in &changes[1..] {
                joined.then(Patch::new(&schema, "t", std::slice::from_ref(change)).expect("valid"));
            }
            let mut row = start();
            joined.apply(&schema, &mut row).expect("within range");
            prop_assert_eq!(row, one_by_one);
            prop_assert!(joined.changes.len() <= 4, "{} changes kept", joined.changes.len());
        }
    }

    #[test]
    fn additions_whose_sum_overflows_are_kept_apart() {
        let schema = schema();
        let add = |d| Patch::new(&schema, "t", &[(4, ColumnChange::Add(d))]).expect("valid");
        let mut joined = add(i64::MAX);
        joined.then(add(1));
        assert_eq!(joined.changes.len(), 2);
        joined.then(add(-5));
        assert_eq!(
            joined.changes,
            vec![(4, ColumnChange::Add(i64::MAX)), (4, ColumnChange::Add(-4))]
        );
    }

    #[test]
    fn patches_add_set_and_refuse_what_they_may_not_change() {
        let schema = schema();
        let patch = Patch::new(
            &schema,
            "t",
            &[
                (2, ColumnChange::Add(150)),
                (1, ColumnChange::Set(Value::Text("ab".into()))),
                (2, ColumnChange::Add(-50)),
            ],
        )
        .expect("valid patch");
        let mut row = vec![
            Value::Int(1),
            Value::Text("xyzw".into()),
            Value::Decimal(1_000),
            Value::Int(7),
            Value::Int(0),
        ];
        patch.apply(&schema, &mut row).expect("applies");
        assert_eq!(row[1], Value::Text("ab  ".into()));
        assert_eq!(row[2], Value::Decimal(1_100));
        for (column, change) in [
            (0, ColumnChange::Add(1)),
            (3, ColumnChange::Add(1)),
            (1, ColumnChange::Add(1)),
            (9, ColumnChange::Add(1)),
            (2, ColumnChange::Set(Value::Text("x".into()))),
        ] {
            assert!(Patch::new(&schema, "t", &[(column, change)]).is_err());
        }
        // Beyond the column's precision: found when the patch is applied, at commit.
        let big = Patch::new(&schema, "t", &[(2, ColumnChange::Add(999_999))]).expect("valid");
        assert!(big.apply(&schema, &mut row).is_err());
    }
}
