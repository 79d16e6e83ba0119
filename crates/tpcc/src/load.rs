//! The initial population (clause 4.3.3.1), loaded in parallel.
//!
//! The work is cut into units that write disjoint keys: 10,000 items; a warehouse and its
//! districts; 10,000 stock rows of a warehouse; a district's customers and their history
//! rows; a district's orders with their lines and new-order rows. Threads take units from a
//! shared queue (interleaved by table, so that concurrent commits mostly latch different
//! B+trees) and insert their rows in transactions of `batch_rows` rows each. Every unit
//! draws from its own generator, seeded from the load's seed and the unit's number, so a
//! seed reproduces the same database whatever the thread count.
//!
//! The load's NURand constants and the warehouse count are written to `tpcc_meta` first,
//! with `load_complete = 0`; the last transaction sets it to 1, and a checkpoint follows.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use tailstore_engine::{Database, Table};
use tailstore_storage::Value;

use crate::error::{Result, TpccError};
use crate::random::{
    a_string, data_with_original, derive_seed, last_name, n_string, nurand, seeded, zip,
    NuRandConstants, A_C_LAST,
};
use crate::row::{build, id, now_micros};
use crate::schema::{
    create_tables, customer as c, district, history as h, item, new_order as no, order_line as ol,
    orders as o, stock as s, warehouse as w, Tables, CUSTOMERS_NAMED_IN_SEQUENCE,
    CUSTOMERS_PER_DISTRICT, DISTRICTS_PER_WAREHOUSE, FIRST_UNDELIVERED_ORDER, ITEMS,
    NEW_ORDERS_PER_DISTRICT, ORDERS_PER_DISTRICT, STOCK_PER_WAREHOUSE,
};
use crate::workload::{run_txn, LoadParameters};

/// Items or stock rows per unit of work.
const CHUNK: u32 = 10_000;

/// How to load.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    pub warehouses: u32,
    /// Loading threads (at least 1).
    pub threads: usize,
    /// Show a progress bar on stderr (hidden when stderr is not a terminal).
    pub progress: bool,
    /// Seed of every random choice of the load.
    pub seed: u64,
    /// Rows inserted per transaction.
    pub batch_rows: usize,
}

impl LoadConfig {
    /// `warehouses` on `threads` threads, no progress bar, a seed from the clock, 1,000 rows
    /// per transaction.
    pub fn new(warehouses: u32, threads: usize) -> LoadConfig {
        LoadConfig {
            warehouses,
            threads,
            progress: false,
            seed: now_micros().unsigned_abs(),
            batch_rows: 1_000,
        }
    }
}

/// What a load did.
#[derive(Clone, Debug)]
pub struct LoadReport {
    pub warehouses: u32,
    pub seed: u64,
    /// The NURand constants of the load (kept in `tpcc_meta`).
    pub constants: NuRandConstants,
    /// Rows inserted (all tables).
    pub rows: u64,
    /// The whole load, the final checkpoint included.
    pub elapsed: Duration,
    /// The final checkpoint alone.
    pub checkpoint: Duration,
}

/// Creates the TPC-C tables in `db` (which must not hold them yet) and loads `warehouses`
/// warehouses on `threads` threads, with a progress bar on stderr if `progress`; then
/// checkpoints. The commit mode is the database's.
pub fn load(db: &Database, warehouses: u32, threads: usize, progress: bool) -> Result<LoadReport> {
    let config = LoadConfig {
        progress,
        ..LoadConfig::new(warehouses, threads)
    };
    load_with(db, &config)
}

/// [`load`] with every option.
pub fn load_with(db: &Database, config: &LoadConfig) -> Result<LoadReport> {
    if config.warehouses == 0 || config.threads == 0 || config.batch_rows == 0 {
        return Err(TpccError::InvalidArgument(
            "warehouses, threads and batch rows must be at least 1".into(),
        ));
    }
    let began = Instant::now();
    let tables = create_tables(db)?;
    let constants = NuRandConstants::for_load(&mut seeded(config.seed));
    let mut parameters = LoadParameters {
        warehouses: config.warehouses,
        constants,
        complete: false,
    };
    run_txn(db, |txn| parameters.write(txn, &tables))?;
    let units = plan(config.warehouses);
    let bar = progress_bar(config);
    let rows = run_units(db, &tables, &units, config, &constants, &bar)?;
    parameters.complete = true;
    run_txn(db, |txn| parameters.write(txn, &tables))?;
    bar.finish_and_clear();
    let checkpoint_began = Instant::now();
    db.checkpoint()?;
    Ok(LoadReport {
        warehouses: config.warehouses,
        seed: config.seed,
        constants,
        rows,
        elapsed: began.elapsed(),
        checkpoint: checkpoint_began.elapsed(),
    })
}

/// Rows of a load of `warehouses` (order lines at their expected 10 per order).
pub fn expected_rows(warehouses: u32) -> u64 {
    let per_district = 2 * u64::from(CUSTOMERS_PER_DISTRICT)
        + u64::from(ORDERS_PER_DISTRICT) * 11
        + u64::from(NEW_ORDERS_PER_DISTRICT);
    let per_warehouse = 1
        + u64::from(DISTRICTS_PER_WAREHOUSE) * (1 + per_district)
        + u64::from(STOCK_PER_WAREHOUSE);
    u64::from(ITEMS) + u64::from(warehouses) * per_warehouse
}

fn progress_bar(config: &LoadConfig) -> ProgressBar {
    if !config.progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(expected_rows(config.warehouses));
    let style = ProgressStyle::with_template(
        "loading {bar:30} {human_pos}/~{human_len} rows  {per_sec}  {elapsed}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// A unit of work: rows no other unit writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Items {
        first: u32,
        last: u32,
    },
    /// The warehouse row and its districts.
    Warehouse {
        w_id: u32,
    },
    Stock {
        w_id: u32,
        first: u32,
        last: u32,
    },
    /// A district's customers and their history rows.
    Customers {
        w_id: u32,
        d_id: u32,
    },
    /// A district's orders, order lines and new orders.
    Orders {
        w_id: u32,
        d_id: u32,
    },
}

/// All units, interleaved by kind so that neighbours in the queue write different tables.
fn plan(warehouses: u32) -> Vec<Unit> {
    let chunks = |count: u32| {
        (0..count.div_ceil(CHUNK)).map(move |k| (k * CHUNK + 1, ((k + 1) * CHUNK).min(count)))
    };
    let items: Vec<Unit> = chunks(ITEMS)
        .map(|(first, last)| Unit::Items { first, last })
        .collect();
    let mut stock = Vec::new();
    let (mut customers, mut orders, mut houses) = (Vec::new(), Vec::new(), Vec::new());
    for w_id in 1..=warehouses {
        houses.push(Unit::Warehouse { w_id });
        stock.extend(
            chunks(STOCK_PER_WAREHOUSE).map(|(first, last)| Unit::Stock { w_id, first, last }),
        );
        for d_id in 1..=DISTRICTS_PER_WAREHOUSE {
            customers.push(Unit::Customers { w_id, d_id });
            orders.push(Unit::Orders { w_id, d_id });
        }
    }
    interleave(vec![orders, stock, customers, items, houses])
}

/// Round-robin over the lists until all are empty.
fn interleave(lists: Vec<Vec<Unit>>) -> Vec<Unit> {
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| lists.iter().filter_map(move |list| list.get(i).copied()))
        .collect()
}

/// Runs the units on `config.threads` threads; returns the rows inserted. The first error
/// stops every thread after its current unit.
fn run_units(
    db: &Database,
    tables: &Tables,
    units: &[Unit],
    config: &LoadConfig,
    constants: &NuRandConstants,
    bar: &ProgressBar,
) -> Result<u64> {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let worker = || -> Result<u64> {
        let mut sink = Sink::new(db, config.batch_rows, bar);
        while !stop.load(Ordering::Relaxed) {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(&unit) = units.get(i) else { break };
            let mut rng = seeded(derive_seed(config.seed, i as u64));
            let loaded =
                load_unit(&mut sink, tables, &mut rng, unit, constants).and_then(|()| sink.flush());
            if let Err(err) = loaded {
                stop.store(true, Ordering::Relaxed);
                return Err(err);
            }
        }
        Ok(sink.inserted)
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.threads).map(|_| scope.spawn(worker)).collect();
        let mut rows = 0;
        let mut first_error = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(n)) => rows += n,
                Ok(Err(err)) => {
                    first_error.get_or_insert(err);
                }
                Err(_) => {
                    first_error.get_or_insert(TpccError::Panicked("load"));
                }
            }
        }
        first_error.map_or(Ok(rows), Err)
    })
}

/// Rows waiting to be inserted, committed `batch` at a time.
struct Sink<'a> {
    db: &'a Database,
    rows: Vec<(&'a Table, Vec<Value>)>,
    batch: usize,
    bar: &'a ProgressBar,
    inserted: u64,
}

impl<'a> Sink<'a> {
    fn new(db: &'a Database, batch: usize, bar: &'a ProgressBar) -> Self {
        Sink {
            db,
            rows: Vec::with_capacity(batch),
            batch,
            bar,
            inserted: 0,
        }
    }

    fn push(&mut self, table: &'a Table, row: Vec<Value>) -> Result<()> {
        self.rows.push((table, row));
        if self.rows.len() >= self.batch {
            self.flush()?;
        }
        Ok(())
    }

    /// Inserts the waiting rows in one transaction (again if it aborts: the rows are kept
    /// until it commits).
    fn flush(&mut self) -> Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = &self.rows;
        run_txn(self.db, |txn| {
            for (table, row) in rows {
                txn.insert(table, row)?;
            }
            Ok(())
        })?;
        let n = self.rows.len() as u64;
        self.bar.inc(n);
        self.inserted += n;
        self.rows.clear();
        Ok(())
    }
}

fn load_unit<'a>(
    sink: &mut Sink<'a>,
    t: &'a Tables,
    rng: &mut StdRng,
    unit: Unit,
    constants: &NuRandConstants,
) -> Result<()> {
    match unit {
        Unit::Items { first, last } => {
            (first..=last).try_for_each(|i| sink.push(&t.item, item_row(rng, i)))
        }
        Unit::Warehouse { w_id } => load_warehouse(sink, t, rng, w_id),
        Unit::Stock { w_id, first, last } => {
            (first..=last).try_for_each(|i| sink.push(&t.stock, stock_row(rng, w_id, i)))
        }
        Unit::Customers { w_id, d_id } => load_customers(sink, t, rng, w_id, d_id, constants),
        Unit::Orders { w_id, d_id } => load_orders(sink, t, rng, w_id, d_id),
    }
}

fn text(s: String) -> Value {
    Value::Text(s)
}

fn item_row(rng: &mut StdRng, i_id: u32) -> Vec<Value> {
    build(
        item::COLUMNS,
        [
            (item::I_ID, id(i_id)),
            (item::I_IM_ID, id(rng.gen_range(1..=10_000))),
            (item::I_NAME, text(a_string(rng, 14, 24))),
            (item::I_PRICE, Value::Decimal(rng.gen_range(100..=10_000))),
            (item::I_DATA, text(data_with_original(rng, 26, 50))),
        ],
    )
}

fn load_warehouse<'a>(
    sink: &mut Sink<'a>,
    t: &'a Tables,
    rng: &mut StdRng,
    w_id: u32,
) -> Result<()> {
    let row = build(
        w::COLUMNS,
        [
            (w::W_ID, id(w_id)),
            (w::W_NAME, text(a_string(rng, 6, 10))),
            (w::W_STREET_1, text(a_string(rng, 10, 20))),
            (w::W_STREET_2, text(a_string(rng, 10, 20))),
            (w::W_CITY, text(a_string(rng, 10, 20))),
            (w::W_STATE, text(a_string(rng, 2, 2))),
            (w::W_ZIP, text(zip(rng))),
            (w::W_TAX, Value::Decimal(rng.gen_range(0..=2_000))),
            (w::W_YTD, Value::Decimal(30_000_000)),
        ],
    );
    sink.push(&t.warehouse, row)?;
    for d_id in 1..=DISTRICTS_PER_WAREHOUSE {
        sink.push(&t.district, district_row(rng, w_id, d_id))?;
    }
    Ok(())
}

fn district_row(rng: &mut StdRng, w_id: u32, d_id: u32) -> Vec<Value> {
    use district as d;
    build(
        d::COLUMNS,
        [
            (d::D_ID, id(d_id)),
            (d::D_W_ID, id(w_id)),
            (d::D_NAME, text(a_string(rng, 6, 10))),
            (d::D_STREET_1, text(a_string(rng, 10, 20))),
            (d::D_STREET_2, text(a_string(rng, 10, 20))),
            (d::D_CITY, text(a_string(rng, 10, 20))),
            (d::D_STATE, text(a_string(rng, 2, 2))),
            (d::D_ZIP, text(zip(rng))),
            (d::D_TAX, Value::Decimal(rng.gen_range(0..=2_000))),
            (d::D_YTD, Value::Decimal(3_000_000)),
            (d::D_NEXT_O_ID, id(ORDERS_PER_DISTRICT + 1)),
        ],
    )
}

fn stock_row(rng: &mut StdRng, w_id: u32, i_id: u32) -> Vec<Value> {
    let mut row = build(
        s::COLUMNS,
        [
            (s::S_I_ID, id(i_id)),
            (s::S_W_ID, id(w_id)),
            (s::S_QUANTITY, Value::Int(rng.gen_range(10..=100))),
            (s::S_YTD, Value::Int(0)),
            (s::S_ORDER_CNT, Value::Int(0)),
            (s::S_REMOTE_CNT, Value::Int(0)),
            (s::S_DATA, text(data_with_original(rng, 26, 50))),
        ],
    );
    for dist in &mut row[s::S_DIST_01..=s::S_DIST_10] {
        *dist = text(a_string(rng, 24, 24));
    }
    row
}

fn load_customers<'a>(
    sink: &mut Sink<'a>,
    t: &'a Tables,
    rng: &mut StdRng,
    w_id: u32,
    d_id: u32,
    constants: &NuRandConstants,
) -> Result<()> {
    let since = now_micros();
    for c_id in 1..=CUSTOMERS_PER_DISTRICT {
        sink.push(
            &t.customer,
            customer_row(rng, w_id, d_id, c_id, since, constants),
        )?;
        // One history row per customer, numbered in (warehouse, district, customer) order.
        let district_index = u64::from((w_id - 1) * DISTRICTS_PER_WAREHOUSE + (d_id - 1));
        let h_id = district_index * u64::from(CUSTOMERS_PER_DISTRICT) + u64::from(c_id);
        let history = build(
            h::COLUMNS,
            [
                (h::H_ID, Value::Int(h_id as i64)),
                (h::H_C_ID, id(c_id)),
                (h::H_C_D_ID, id(d_id)),
                (h::H_C_W_ID, id(w_id)),
                (h::H_D_ID, id(d_id)),
                (h::H_W_ID, id(w_id)),
                (h::H_DATE, Value::Timestamp(since)),
                (h::H_AMOUNT, Value::Decimal(1_000)),
                (h::H_DATA, text(a_string(rng, 12, 24))),
            ],
        );
        sink.push(&t.history, history)?;
    }
    Ok(())
}

fn customer_row(
    rng: &mut StdRng,
    w_id: u32,
    d_id: u32,
    c_id: u32,
    since: i64,
    constants: &NuRandConstants,
) -> Vec<Value> {
    // The first 1,000 customers are named in sequence, so every name exists in every
    // district; the rest by NURand with the load's constant.
    let name_number = if c_id <= CUSTOMERS_NAMED_IN_SEQUENCE {
        c_id - 1
    } else {
        nurand(rng, A_C_LAST, constants.c_last, 0, 999)
    };
    let credit = if rng.gen_ratio(1, 10) { "BC" } else { "GC" };
    build(
        c::COLUMNS,
        [
            (c::C_ID, id(c_id)),
            (c::C_D_ID, id(d_id)),
            (c::C_W_ID, id(w_id)),
            (c::C_FIRST, text(a_string(rng, 8, 16))),
            (c::C_MIDDLE, text("OE".into())),
            (c::C_LAST, text(last_name(name_number))),
            (c::C_STREET_1, text(a_string(rng, 10, 20))),
            (c::C_STREET_2, text(a_string(rng, 10, 20))),
            (c::C_CITY, text(a_string(rng, 10, 20))),
            (c::C_STATE, text(a_string(rng, 2, 2))),
            (c::C_ZIP, text(zip(rng))),
            (c::C_PHONE, text(n_string(rng, 16, 16))),
            (c::C_SINCE, Value::Timestamp(since)),
            (c::C_CREDIT, text(credit.into())),
            (c::C_CREDIT_LIM, Value::Decimal(5_000_000)),
            (c::C_DISCOUNT, Value::Decimal(rng.gen_range(0..=5_000))),
            (c::C_BALANCE, Value::Decimal(-1_000)),
            (c::C_YTD_PAYMENT, Value::Decimal(1_000)),
            (c::C_PAYMENT_CNT, Value::Int(1)),
            (c::C_DELIVERY_CNT, Value::Int(0)),
            (c::C_DATA, text(a_string(rng, 300, 500))),
        ],
    )
}

fn load_orders<'a>(
    sink: &mut Sink<'a>,
    t: &'a Tables,
    rng: &mut StdRng,
    w_id: u32,
    d_id: u32,
) -> Result<()> {
    // o_c_id: a random permutation of the customers, so each has exactly one order.
    let mut customers: Vec<u32> = (1..=CUSTOMERS_PER_DISTRICT).collect();
    customers.shuffle(rng);
    let entry_d = now_micros();
    for (o_id, c_id) in (1..=ORDERS_PER_DISTRICT).zip(customers) {
        let delivered = o_id < FIRST_UNDELIVERED_ORDER;
        let ol_cnt = rng.gen_range(5..=15);
        let carrier = if delivered {
            id(rng.gen_range(1..=10))
        } else {
            Value::Null
        };
        let order = build(
            o::COLUMNS,
            [
                (o::O_ID, id(o_id)),
                (o::O_D_ID, id(d_id)),
                (o::O_W_ID, id(w_id)),
                (o::O_C_ID, id(c_id)),
                (o::O_ENTRY_D, Value::Timestamp(entry_d)),
                (o::O_CARRIER_ID, carrier),
                (o::O_OL_CNT, id(ol_cnt)),
                (o::O_ALL_LOCAL, Value::Int(1)),
            ],
        );
        sink.push(&t.orders, order)?;
        for number in 1..=ol_cnt {
            sink.push(
                &t.order_line,
                order_line_row(rng, w_id, d_id, o_id, number, delivered, entry_d),
            )?;
        }
        if !delivered {
            let new_order = build(
                no::COLUMNS,
                [
                    (no::NO_O_ID, id(o_id)),
                    (no::NO_D_ID, id(d_id)),
                    (no::NO_W_ID, id(w_id)),
                ],
            );
            sink.push(&t.new_order, new_order)?;
        }
    }
    Ok(())
}

fn order_line_row(
    rng: &mut StdRng,
    w_id: u32,
    d_id: u32,
    o_id: u32,
    number: u32,
    delivered: bool,
    entry_d: i64,
) -> Vec<Value> {
    // Delivered lines were delivered when entered and cost nothing (so that the customers'
    // balances of -10.00 satisfy conditions 10 and 12).
    let (delivery_d, amount) = if delivered {
        (Value::Timestamp(entry_d), 0)
    } else {
        (Value::Null, rng.gen_range(1..=999_999))
    };
    build(
        ol::COLUMNS,
        [
            (ol::OL_O_ID, id(o_id)),
            (ol::OL_D_ID, id(d_id)),
            (ol::OL_W_ID, id(w_id)),
            (ol::OL_NUMBER, id(number)),
            (ol::OL_I_ID, id(rng.gen_range(1..=ITEMS))),
            (ol::OL_SUPPLY_W_ID, id(w_id)),
            (ol::OL_DELIVERY_D, delivery_d),
            (ol::OL_QUANTITY, Value::Int(5)),
            (ol::OL_AMOUNT, Value::Decimal(amount)),
            (ol::OL_DIST_INFO, text(a_string(rng, 24, 24))),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_every_row_once() {
        let units = plan(3);
        let items: u32 = units
            .iter()
            .map(|u| match u {
                Unit::Items { first, last } => last - first + 1,
                _ => 0,
            })
            .sum();
        assert_eq!(items, ITEMS);
        for w_id in 1..=3 {
            let stock: u32 = units
                .iter()
                .map(|u| match u {
                    Unit::Stock {
                        w_id: x,
                        first,
                        last,
                    } if *x == w_id => last - first + 1,
                    _ => 0,
                })
                .sum();
            assert_eq!(stock, STOCK_PER_WAREHOUSE);
            assert!(units.contains(&Unit::Warehouse { w_id }));
            for d_id in 1..=10 {
                assert!(units.contains(&Unit::Customers { w_id, d_id }));
                assert!(units.contains(&Unit::Orders { w_id, d_id }));
            }
        }
        assert_eq!(units.len(), 10 + 3 * (1 + 10 + 20));
        // Interleaved: the first units are of different kinds.
        assert!(matches!(units[0], Unit::Orders { .. }));
        assert!(matches!(units[1], Unit::Stock { .. }));
    }

    #[test]
    fn expected_rows_of_one_warehouse() {
        // 100,000 items + 100,000 stock + 10 districts × (3,000 customers + 3,000 history
        // + 3,000 orders + 30,000 lines + 900 new orders) + 1 warehouse + 10 districts.
        assert_eq!(expected_rows(1), 200_000 + 10 * 39_900 + 11);
    }
}
