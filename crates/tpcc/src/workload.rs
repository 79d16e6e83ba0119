//! A loaded TPC-C database opened for a run: its tables, the load's parameters (kept in
//! `tpcc_meta`), the run-time NURand constants and the allocator of history ids.

use std::sync::atomic::{AtomicI64, Ordering};

use rand::Rng;
use tailstore_engine::{Database, KeyRange, Transaction};
use tailstore_storage::{ScanDirection, Value};

use crate::error::{Result, TpccError};
use crate::random::NuRandConstants;
use crate::row::Fields;
use crate::schema::{history, meta, Tables};

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
    /// rule of clause 2.1.6.1 against the load's).
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
        let last = run_txn(db, |txn| {
            let rows = txn.scan(
                &tables.history,
                &KeyRange::all(),
                ScanDirection::Descending,
                1,
            )?;
            rows.first().map(|row| row.int(history::H_ID)).transpose()
        })?;
        Ok(Workload {
            db,
            tables,
            load,
            run_constants,
            next_history_id: AtomicI64::new(last.unwrap_or(0) + 1),
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
