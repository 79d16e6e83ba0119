//! A loaded TPC-C database opened for a run: its tables, the load's parameters (kept in
//! `tpcc_meta`), the run-time NURand constants and the allocator of history ids.

use std::sync::atomic::{AtomicI64, Ordering};

use rand::Rng;
use tailstore_engine::{Database, KeyRange, Transaction};
use tailstore_storage::{ScanDirection, Value};

use crate::check::one_to;
use crate::error::{Result, TpccError};
use crate::random::NuRandConstants;
use crate::row::Fields;
use crate::schema::{history, meta, warehouse, Tables};
use crate::txn::narrow;

/// Attempts of the kit's own small transactions (reading or writing `tpcc_meta`).
pub(crate) const META_ATTEMPTS: usize = 100;

const WAREHOUSES: &str = "warehouses";
const C_LAST: &str = "c_last_load";
const C_ID: &str = "c_id_load";
const OL_I_ID: &str = "ol_i_id_load";
const COMPLETE: &str = "load_complete";

/// What the load recorded in `tpcc_meta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadParameters {
    pub warehouses: u32,
    /// The NURand constants of the load (the run's `C_LAST` constant must obey the delta
    /// rule against `constants.c_last`, so it has to be kept).
    pub constants: NuRandConstants,
    /// Whether the load finished (set in its last transaction).
    pub complete: bool,
}

impl LoadParameters {
    /// Writes the parameters (inserting or replacing each row).
    pub(crate) fn write(&self, txn: &mut Transaction<'_>, tables: &Tables) -> Result<()> {
        let c = &self.constants;
        let rows = [
            (WAREHOUSES, i64::from(self.warehouses)),
            (C_LAST, i64::from(c.c_last)),
            (C_ID, i64::from(c.c_id)),
            (OL_I_ID, i64::from(c.ol_i_id)),
            (COMPLETE, i64::from(self.complete)),
        ];
        for (name, value) in rows {
            let row = [Value::Text(name.into()), Value::Int(value)];
            if txn.get(&tables.meta, &row[..1])?.is_some() {
                txn.update(&tables.meta, &row)?;
            } else {
                txn.insert(&tables.meta, &row)?;
            }
        }
        Ok(())
    }

    /// Reads the parameters; [`TpccError::NotLoaded`] if a row is missing.
    pub fn read(db: &Database, tables: &Tables) -> Result<LoadParameters> {
        let mut values = [0i64; 5];
        let names = [WAREHOUSES, C_LAST, C_ID, OL_I_ID, COMPLETE];
        run_txn(db, |txn| {
            for (value, name) in values.iter_mut().zip(names) {
                let row = txn
                    .get(&tables.meta, &[Value::Text(name.into())])?
                    .ok_or_else(|| TpccError::NotLoaded(format!("tpcc_meta has no `{name}`")))?;
                *value = row.int(meta::VALUE)?;
            }
            Ok(())
        })?;
        let narrow = |v: i64, what: &str| {
            u32::try_from(v).map_err(|_| TpccError::NotLoaded(format!("tpcc_meta: bad {what} {v}")))
        };
        Ok(LoadParameters {
            warehouses: narrow(values[0], WAREHOUSES)?,
            constants: NuRandConstants {
                c_last: narrow(values[1], C_LAST)?,
                c_id: narrow(values[2], C_ID)?,
                ol_i_id: narrow(values[3], OL_I_ID)?,
            },
            complete: values[4] == 1,
        })
    }
}

/// Runs a body in a transaction and commits it, retrying while it aborts.
pub(crate) fn run_txn<T>(
    db: &Database,
    mut body: impl FnMut(&mut Transaction<'_>) -> Result<T>,
) -> Result<T> {
    let mut attempt = 1;
    loop {
        let mut txn = db.begin();
        let outcome = body(&mut txn).and_then(|value| Ok(txn.commit().map(|()| value)?));
        match outcome {
            Err(err) if err.is_retryable() && attempt < META_ATTEMPTS => attempt += 1,
            other => return other,
        }
    }
}

/// A loaded database, ready for terminals (share it between their threads by reference).
pub struct Workload<'db> {
    db: &'db Database,
    tables: Tables,
    load: LoadParameters,
    run_constants: NuRandConstants,
    next_history_id: AtomicI64,
}

impl<'db> Workload<'db> {
    /// Opens the workload with run-time NURand constants drawn from `rng` (obeying the
    /// rule of clause 2.1.6.1 against the load's). The warehouses stored must be 1 ..=
    /// `tpcc_meta`'s count ([`TpccError::MissingRow`] or [`TpccError::UnexpectedRow`]), and
    /// a history id must be left after the largest one stored.
    pub fn open<R: Rng + ?Sized>(db: &'db Database, rng: &mut R) -> Result<Workload<'db>> {
        let tables = Tables::open(db)?;
        let load = LoadParameters::read(db, &tables)?;
        let run = NuRandConstants::for_run(rng, &load.constants);
        Self::build(db, tables, load, run)
    }

    /// Opens the workload with the given run-time constants; refused if they break the
    /// rule of clause 2.1.6.1 against the load's.
    pub fn with_constants(db: &'db Database, run: NuRandConstants) -> Result<Workload<'db>> {
        let tables = Tables::open(db)?;
        let load = LoadParameters::read(db, &tables)?;
        if !run.valid_for_run(&load.constants) {
            return Err(TpccError::InvalidArgument(format!(
                "run-time constants {run:?} break clause 2.1.6.1 against the load's {:?}",
                load.constants
            )));
        }
        Self::build(db, tables, load, run)
    }

    fn build(
        db: &'db Database,
        tables: Tables,
        load: LoadParameters,
        run_constants: NuRandConstants,
    ) -> Result<Workload<'db>> {
        if !load.complete {
            return Err(TpccError::NotLoaded(
                "the load did not finish; load again into an empty database".into(),
            ));
        }
        let (last, warehouses) = run_txn(db, |txn| {
            let rows = txn.scan(
                &tables.history,
                &KeyRange::all(),
                ScanDirection::Descending,
                1,
            )?;
            let last = rows.first().map(|row| row.int(history::H_ID)).transpose()?;
            let warehouses = txn
                .scan(
                    &tables.warehouse,
                    &KeyRange::all(),
                    ScanDirection::Ascending,
                    usize::MAX,
                )?
                .iter()
                .map(|row| narrow(row.int(warehouse::W_ID)?))
                .collect::<Result<Vec<u32>>>()?;
            Ok((last, warehouses))
        })?;
        // Terminals and drivers go through warehouses 1 ..= the count: it must be what is
        // stored, or a damaged count of 2^32 - 1 sends them looking for billions.
        one_to(&warehouses, load.warehouses, |w| format!("warehouse {w}"))
            .map_err(|e| e.counted(format!("tpcc_meta counts {} warehouses", load.warehouses)))?;
        // The next history id; a stored id of i64::MAX leaves none (it overflowed).
        let last = last.unwrap_or(0);
        let next = last.checked_add(1).ok_or_else(|| {
            TpccError::UnexpectedRow(format!("history h_id {last}: no id is left after it"))
        })?;
        Ok(Workload {
            db,
            tables,
            load,
            run_constants,
            next_history_id: AtomicI64::new(next),
        })
    }

    pub fn db(&self) -> &'db Database {
        self.db
    }

    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The number of warehouses loaded.
    pub fn warehouses(&self) -> u32 {
        self.load.warehouses
    }

    /// The NURand constants of the load.
    pub fn load_constants(&self) -> NuRandConstants {
        self.load.constants
    }

    /// The NURand constants terminals use.
    pub fn run_constants(&self) -> NuRandConstants {
        self.run_constants
    }

    /// A history id no other payment uses (the surrogate key of HISTORY).
    pub fn next_history_id(&self) -> i64 {
        self.next_history_id.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::random::seeded;
    use crate::schema::create_tables;
    use tailstore_engine::DbConfig;
    use tailstore_log::CommitMode;
    use tailstore_storage::{Column, ColumnType};

    /// A row of `columns` with a plausible value of each column's type, `key` first.
    pub(crate) fn row_of(columns: &[Column], key: &[(usize, Value)]) -> Vec<Value> {
        let mut row: Vec<Value> = columns
            .iter()
            .map(|c| match c.ty {
                ColumnType::Decimal { .. } => Value::Decimal(0),
                ColumnType::Char(_) | ColumnType::Varchar(_) => Value::Text("x".into()),
                ColumnType::Timestamp => Value::Timestamp(0),
                _ => Value::Int(1),
            })
            .collect();
        for (column, value) in key {
            row[*column] = value.clone();
        }
        row
    }

    /// Warehouse 1.
    pub(crate) fn warehouse_1() -> (&'static str, Vec<Value>) {
        (crate::schema::WAREHOUSE, row_of(&warehouse::columns(), &[]))
    }

    /// A database with the tables, `tpcc_meta` counting `warehouses` (complete) and `rows`
    /// inserted.
    pub(crate) fn with_db(
        warehouses: u32,
        rows: &[(&str, Vec<Value>)],
        test: impl FnOnce(&Database),
    ) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let config = DbConfig::new(dir.path(), CommitMode::Async, None);
        let (db, _) = Database::open(config).expect("open");
        let tables = create_tables(&db).expect("tables");
        let mut txn = db.begin();
        let load = LoadParameters {
            warehouses,
            constants: NuRandConstants {
                c_last: 10,
                c_id: 300,
                ol_i_id: 4000,
            },
            complete: true,
        };
        load.write(&mut txn, &tables).expect("parameters");
        for (name, row) in rows {
            txn.insert(&db.table(name).expect("table"), row)
                .expect("insert");
        }
        txn.commit().expect("commit");
        test(&db);
    }

    #[test]
    fn a_history_id_of_i64_max_is_refused_not_overflowed() {
        let h = row_of(
            &history::columns(),
            &[(history::H_ID, Value::Int(i64::MAX))],
        );
        with_db(1, &[warehouse_1(), (crate::schema::HISTORY, h)], |db| {
            let opened = Workload::open(db, &mut seeded(1));
            assert!(
                matches!(opened, Err(TpccError::UnexpectedRow(ref m)) if m.contains("h_id")),
                "{:?}",
                opened.err()
            );
        });
        let h = row_of(
            &history::columns(),
            &[(history::H_ID, Value::Int(i64::MAX - 1))],
        );
        with_db(1, &[warehouse_1(), (crate::schema::HISTORY, h)], |db| {
            let workload = Workload::open(db, &mut seeded(1)).expect("one id is left");
            assert_eq!(workload.next_history_id(), i64::MAX);
        });
    }

    #[test]
    fn the_warehouse_count_must_be_what_is_stored() {
        for (count, missing) in [(2, true), (u32::MAX, true), (0, false)] {
            with_db(count, &[warehouse_1()], |db| {
                let opened = Workload::open(db, &mut seeded(1)).map(|w| w.warehouses());
                match opened {
                    Err(TpccError::MissingRow(m)) if missing => assert!(m.contains("warehouse 2")),
                    Err(TpccError::UnexpectedRow(m)) if !missing => {
                        assert!(m.contains("warehouse 1"))
                    }
                    other => panic!("{count} warehouses: {other:?}"),
                }
            });
        }
        with_db(1, &[warehouse_1()], |db| {
            assert_eq!(
                Workload::open(db, &mut seeded(1))
                    .ok()
                    .map(|w| w.warehouses()),
                Some(1)
            );
        });
    }
}
