//! The consistency conditions of clause 3.3.2.
//!
//! | #  | relationship (per warehouse, district, order, line or customer)                   |
//! |----|-----------------------------------------------------------------------------------|
//! | 1  | `w_ytd = sum(d_ytd)`                                                              |
//! | 2  | `d_next_o_id - 1 = max(o_id) = max(no_o_id)`                                      |
//! | 3  | `max(no_o_id) - min(no_o_id) + 1 =` new-order rows of the district                |
//! | 4  | `sum(o_ol_cnt) =` order-line rows of the district                                 |
//! | 5  | `o_carrier_id` is NULL iff the order has a new-order row                          |
//! | 6  | `o_ol_cnt =` the order's order-line rows                                          |
//! | 7  | `ol_delivery_d` is NULL iff the order's `o_carrier_id` is NULL                    |
//! | 8  | `w_ytd = sum(h_amount)` of the warehouse's history                                |
//! | 9  | `d_ytd = sum(h_amount)` of the district's history                                 |
//! | 10 | `c_balance = sum(delivered ol_amount) - sum(h_amount)` of the customer            |
//! | 11 | orders - new-orders `= 2100` per district (only right after the load)             |
//! | 12 | `c_balance + c_ytd_payment = sum(delivered ol_amount)` of the customer            |
//!
//! Conditions 2 and 3 do not apply to the new-order rows of a district that has none.
//! Every condition reports the first row that breaks it.
//!
//! The conditions are stated over the rows present, so the check also requires the rows
//! the population always has: warehouses 1 ..= `tpcc_meta`'s count, districts 1 ..= 10 of
//! each and, where it reads them (conditions 10 and 12), customers 1 ..= 3,000 of each
//! district ([`TpccError::MissingRow`], or [`TpccError::UnexpectedRow`] for one past them).
//! A row whose id is out of range is named in the error.
//!
//! The checks read each district (its orders, new orders, lines and customers) in one
//! read-only transaction, and HISTORY in chunks; run them on a database no terminal is
//! writing to, or a chunk may be read at a different moment from another.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::time::{Duration, Instant};

use tailstore_engine::{Database, KeyRange, Table, Transaction};
use tailstore_storage::{ScanDirection, Value};

use crate::error::{Result, TpccError, Violation};
use crate::row::{id, Fields};
use crate::schema::{
    customer as c, district, history as h, new_order as no, order_line as ol, orders as o,
    warehouse, Tables, CUSTOMERS_PER_DISTRICT, DISTRICTS_PER_WAREHOUSE, FIRST_UNDELIVERED_ORDER,
};
use crate::txn::{format_cents, narrow, show_key};
use crate::workload::{run_txn, LoadParameters};

/// Conditions 1–4: those the specification requires to be tested in every run.
pub const BASIC: [u8; 4] = [1, 2, 3, 4];
/// Conditions that hold after any number of transactions: all but 11.
pub const AFTER_RUN: [u8; 11] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12];
/// All twelve conditions: they hold right after the load.
pub const AFTER_LOAD: [u8; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

/// Rows read per transaction when scanning HISTORY.
const HISTORY_CHUNK: usize = 10_000;

/// What a check covered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// The conditions that hold.
    pub conditions: Vec<u8>,
    pub warehouses: u32,
    pub districts: u32,
    pub elapsed: Duration,
}

/// Checks conditions 1–4 or, with `all`, every condition that holds after a run (1–10 and
/// 12). The first violation is returned as [`TpccError::Inconsistent`].
pub fn check(db: &Database, all: bool) -> Result<CheckReport> {
    check_conditions(db, if all { &AFTER_RUN } else { &BASIC })
}

/// Checks the given conditions (numbers 1 ..= 12, e.g. [`AFTER_LOAD`]).
pub fn check_conditions(db: &Database, conditions: &[u8]) -> Result<CheckReport> {
    if let Some(bad) = conditions.iter().find(|&&n| !(1..=12).contains(&n)) {
        return Err(TpccError::InvalidArgument(format!(
            "there is no consistency condition {bad} (1 ..= 12)"
        )));
    }
    let began = Instant::now();
    let wanted: BTreeSet<u8> = conditions.iter().copied().collect();
    let tables = Tables::open(db)?;
    let load = LoadParameters::read(db, &tables)?;
    if !load.complete {
        // Its conditions would fail on what was never loaded, not on what was.
        return Err(TpccError::NotLoaded(
            "the load did not finish; load again into an empty database".into(),
        ));
    }
    let warehouses = load.warehouses;
    let history = if wanted.iter().any(|n| [8, 9, 10].contains(n)) {
        HistorySums::read(db, &tables.history)?
    } else {
        HistorySums::default()
    };
    let checker = Checker {
        db,
        tables: &tables,
        warehouses,
        wanted: &wanted,
        history: &history,
    };
    let (warehouses, districts) = checker.run()?;
    Ok(CheckReport {
        conditions: wanted.into_iter().collect(),
        warehouses,
        districts,
        elapsed: began.elapsed(),
    })
}

/// Whether `ids` (ascending, as a primary key scan returns them) are exactly 1 ..= `count`:
/// the warehouses the load made, the districts of each. Every condition is stated over
/// them, so a missing one would otherwise pass unseen (a database whose only warehouse was
/// gone passed every condition).
pub(crate) fn one_to(ids: &[u32], count: u32, name: impl Fn(u32) -> String) -> Result<()> {
    let mut expected = 1u32;
    for &id in ids {
        if id > count {
            return Err(TpccError::UnexpectedRow(format!(
                "{} (only 1 ..= {count})",
                name(id)
            )));
        }
        if id != expected {
            return Err(TpccError::MissingRow(name(expected)));
        }
        expected = expected.saturating_add(1);
    }
    if (1..=count).contains(&expected) {
        return Err(TpccError::MissingRow(name(expected)));
    }
    Ok(())
}

/// `err`, met reading one row, with the row named: an id out of range or a value of another
/// kind says which row holds it.
fn in_row(err: TpccError, row: impl FnOnce() -> String) -> TpccError {
    match err {
        TpccError::OutOfRange(_) | TpccError::BadValue { .. } => {
            TpccError::UnexpectedRow(format!("{}: {err}", row()))
        }
        other => other,
    }
}

fn violation(condition: u8, detail: String) -> TpccError {
    TpccError::Inconsistent(Violation { condition, detail })
}

/// Sums of `h_amount`, by warehouse, district and customer.
#[derive(Default)]
struct HistorySums {
    by_warehouse: HashMap<u32, i64>,
    by_district: HashMap<(u32, u32), i64>,
    by_customer: HashMap<(u32, u32, u32), i64>,
}

impl HistorySums {
    fn read(db: &Database, history: &Table) -> Result<HistorySums> {
        let mut sums = HistorySums::default();
        let mut after: Option<Value> = None;
        loop {
            let lower = after
                .clone()
                .map_or(Bound::Unbounded, |k| Bound::Excluded(vec![k]));
            let range = KeyRange::new(lower, Bound::Unbounded);
            let rows = run_txn(db, |txn| {
                txn.scan(history, &range, ScanDirection::Ascending, HISTORY_CHUNK)
                    .map_err(TpccError::from)
            })?;
            for row in &rows {
                sums.add(row)
                    .map_err(|e| in_row(e, || format!("history {}", show_key(&row[..1]))))?;
            }
            match rows.last() {
                Some(last) if rows.len() == HISTORY_CHUNK => after = Some(last[h::H_ID].clone()),
                _ => return Ok(sums),
            }
        }
    }

    fn add(&mut self, row: &[Value]) -> Result<()> {
        let amount = row.decimal(h::H_AMOUNT)?;
        let (w_id, d_id) = (narrow(row.int(h::H_W_ID)?)?, narrow(row.int(h::H_D_ID)?)?);
        let customer = (
            narrow(row.int(h::H_C_W_ID)?)?,
            narrow(row.int(h::H_C_D_ID)?)?,
            narrow(row.int(h::H_C_ID)?)?,
        );
        *self.by_warehouse.entry(w_id).or_default() += amount;
        *self.by_district.entry((w_id, d_id)).or_default() += amount;
        *self.by_customer.entry(customer).or_default() += amount;
        Ok(())
    }
}

struct Checker<'a> {
    db: &'a Database,
    tables: &'a Tables,
    /// How many warehouses the load made (`tpcc_meta`).
    warehouses: u32,
    wanted: &'a BTreeSet<u8>,
    history: &'a HistorySums,
}

impl Checker<'_> {
    fn wants(&self, condition: u8) -> bool {
        self.wanted.contains(&condition)
    }

    /// Checks every warehouse and district; returns how many there are.
    fn run(&self) -> Result<(u32, u32)> {
        let warehouses = run_txn(self.db, |txn| {
            Ok(txn.scan(
                &self.tables.warehouse,
                &KeyRange::all(),
                ScanDirection::Ascending,
                usize::MAX,
            )?)
        })?;
        let ids = warehouses
            .iter()
            .map(|w| narrow(w.int(warehouse::W_ID)?))
            .collect::<Result<Vec<u32>>>()?;
        one_to(&ids, self.warehouses, |w| format!("warehouse {w}"))
            .map_err(|e| e.counted(format!("tpcc_meta counts {} warehouses", self.warehouses)))?;
        let mut districts = 0;
        for w_row in &warehouses {
            districts += self.check_warehouse(w_row)?;
        }
        Ok((warehouses.len() as u32, districts))
    }

    fn check_warehouse(&self, w_row: &[Value]) -> Result<u32> {
        let w_id = narrow(w_row.int(warehouse::W_ID)?)?;
        let w_ytd = w_row.decimal(warehouse::W_YTD)?;
        let districts = run_txn(self.db, |txn| {
            Ok(txn.scan(
                &self.tables.district,
                &KeyRange::prefix(vec![id(w_id)]),
                ScanDirection::Ascending,
                usize::MAX,
            )?)
        })?;
        let ids = districts
            .iter()
            .map(|d| narrow(d.int(district::D_ID)?))
            .collect::<Result<Vec<u32>>>()?;
        one_to(&ids, DISTRICTS_PER_WAREHOUSE, |d| {
            format!("district (w {w_id}, d {d})")
        })?;
        self.check_warehouse_totals(w_id, w_ytd, &districts)?;
        for d_row in &districts {
            let data =
                DistrictData::read(self.db, self.tables, w_id, d_row, self.needs_customers())?;
            self.check_district(&data)?;
        }
        Ok(districts.len() as u32)
    }

    /// Conditions 1 and 8.
    fn check_warehouse_totals(
        &self,
        w_id: u32,
        w_ytd: i64,
        districts: &[Vec<Value>],
    ) -> Result<()> {
        if self.wants(1) {
            let sum: i64 = districts
                .iter()
                .map(|d| d.decimal(district::D_YTD))
                .sum::<Result<i64>>()?;
            if sum != w_ytd {
                let (ytd, sum) = (format_cents(w_ytd), format_cents(sum));
                let detail = format!("warehouse {w_id}: w_ytd {ytd} != sum(d_ytd) {sum}");
                return Err(violation(1, detail));
            }
        }
        if self.wants(8) {
            let sum = self.history.by_warehouse.get(&w_id).copied().unwrap_or(0);
            if sum != w_ytd {
                let (ytd, sum) = (format_cents(w_ytd), format_cents(sum));
                let detail = format!("warehouse {w_id}: w_ytd {ytd} != sum(h_amount) {sum}");
                return Err(violation(8, detail));
            }
        }
        Ok(())
    }

    fn needs_customers(&self) -> bool {
        self.wants(10) || self.wants(12)
    }

    fn check_district(&self, data: &DistrictData) -> Result<()> {
        let checks: [(u8, DistrictCheck); 7] = [
            (2, condition_2),
            (3, condition_3),
            (4, condition_4),
            (5, condition_5),
            (6, condition_6),
            (7, condition_7),
            (11, condition_11),
        ];
        for (condition, check) in checks {
            if self.wants(condition) {
                check(data).map_err(|detail| violation(condition, detail))?;
            }
        }
        if self.wants(9) {
            self.check_district_total(data)?;
        }
        self.check_customers(data)
    }

    /// Condition 9.
    fn check_district_total(&self, data: &DistrictData) -> Result<()> {
        let key = (data.w_id, data.d_id);
        let sum = self.history.by_district.get(&key).copied().unwrap_or(0);
        if sum == data.ytd {
            return Ok(());
        }
        let (ytd, sum) = (format_cents(data.ytd), format_cents(sum));
        let detail = format!("{}: d_ytd {ytd} != sum(h_amount) {sum}", data.name());
        Err(violation(9, detail))
    }

    /// Conditions 10 and 12.
    fn check_customers(&self, data: &DistrictData) -> Result<()> {
        let delivered = data.delivered_by_customer();
        for cust in &data.customers {
            let delivered = delivered.get(&cust.c_id).copied().unwrap_or(0);
            let paid = self
                .history
                .by_customer
                .get(&(data.w_id, data.d_id, cust.c_id))
                .copied()
                .unwrap_or(0);
            let who = || {
                format!(
                    "customer (w {}, d {}, c {})",
                    data.w_id, data.d_id, cust.c_id
                )
            };
            if self.wants(10) && cust.balance != delivered - paid {
                return Err(violation(
                    10,
                    format!(
                        "{}: c_balance {} != delivered ol_amount {} - h_amount {}",
                        who(),
                        format_cents(cust.balance),
                        format_cents(delivered),
                        format_cents(paid)
                    ),
                ));
            }
            if self.wants(12) && cust.balance + cust.ytd_payment != delivered {
                return Err(violation(
                    12,
                    format!(
                        "{}: c_balance {} + c_ytd_payment {} != delivered ol_amount {}",
                        who(),
                        format_cents(cust.balance),
                        format_cents(cust.ytd_payment),
                        format_cents(delivered)
                    ),
                ));
            }
        }
        Ok(())
    }
}

struct OrderInfo {
    c_id: u32,
    carrier: Option<i64>,
    ol_cnt: i64,
}

struct LineInfo {
    o_id: u32,
    number: i64,
    delivered: bool,
    amount: i64,
}

struct CustomerInfo {
    c_id: u32,
    balance: i64,
    ytd_payment: i64,
}

/// What the district-level conditions need of one district.
struct DistrictData {
    w_id: u32,
    d_id: u32,
    ytd: i64,
    next_o_id: i64,
    orders: BTreeMap<u32, OrderInfo>,
    /// `no_o_id`s, ascending.
    new_orders: Vec<u32>,
    lines: Vec<LineInfo>,
    customers: Vec<CustomerInfo>,
}

impl DistrictData {
    /// Reads the district's rows in one transaction (customers only if `customers`).
    fn read(
        db: &Database,
        t: &Tables,
        w_id: u32,
        d_row: &[Value],
        customers: bool,
    ) -> Result<DistrictData> {
        let d_id = narrow(d_row.int(district::D_ID)?)?;
        run_txn(db, |txn| {
            let prefix = KeyRange::prefix(vec![id(w_id), id(d_id)]);
            let mut data = DistrictData {
                w_id,
                d_id,
                ytd: d_row.decimal(district::D_YTD)?,
                next_o_id: d_row.int(district::D_NEXT_O_ID)?,
                orders: BTreeMap::new(),
                new_orders: Vec::new(),
                lines: Vec::new(),
                customers: Vec::new(),
            };
            let named = |table: &Table, row: &[Value], e| {
                let key = table.schema().primary_key().iter().map(|&c| row[c].clone());
                in_row(e, || {
                    format!("{} {}", table.name(), show_key(&key.collect::<Vec<_>>()))
                })
            };
            for row in all(txn, &t.orders, &prefix)? {
                let read = || -> Result<(u32, OrderInfo)> {
                    let info = OrderInfo {
                        c_id: narrow(row.int(o::O_C_ID)?)?,
                        carrier: row.int_or_null(o::O_CARRIER_ID)?,
                        ol_cnt: row.int(o::O_OL_CNT)?,
                    };
                    Ok((narrow(row.int(o::O_ID)?)?, info))
                };
                let (o_id, info) = read().map_err(|e| named(&t.orders, &row, e))?;
                data.orders.insert(o_id, info);
            }
            for row in all(txn, &t.new_order, &prefix)? {
                let o_id =
                    narrow(row.int(no::NO_O_ID)?).map_err(|e| named(&t.new_order, &row, e))?;
                data.new_orders.push(o_id);
            }
            for row in all(txn, &t.order_line, &prefix)? {
                let read = || -> Result<LineInfo> {
                    Ok(LineInfo {
                        o_id: narrow(row.int(ol::OL_O_ID)?)?,
                        number: row.int(ol::OL_NUMBER)?,
                        delivered: row.timestamp_or_null(ol::OL_DELIVERY_D)?.is_some(),
                        amount: row.decimal(ol::OL_AMOUNT)?,
                    })
                };
                data.lines
                    .push(read().map_err(|e| named(&t.order_line, &row, e))?);
            }
            if customers {
                for row in all(txn, &t.customer, &prefix)? {
                    let read = || -> Result<CustomerInfo> {
                        Ok(CustomerInfo {
                            c_id: narrow(row.int(c::C_ID)?)?,
                            balance: row.decimal(c::C_BALANCE)?,
                            ytd_payment: row.decimal(c::C_YTD_PAYMENT)?,
                        })
                    };
                    data.customers
                        .push(read().map_err(|e| named(&t.customer, &row, e))?);
                }
                // Conditions 10 and 12 are stated per customer: every one the load made.
                let ids: Vec<u32> = data.customers.iter().map(|c| c.c_id).collect();
                let name = |c| format!("customer (w {w_id}, d {d_id}, c {c})");
                one_to(&ids, CUSTOMERS_PER_DISTRICT, name)?;
            }
            Ok(data)
        })
    }

    fn name(&self) -> String {
        format!("district (w {}, d {})", self.w_id, self.d_id)
    }

    /// The sum of `ol_amount` of delivered lines, by customer.
    fn delivered_by_customer(&self) -> HashMap<u32, i64> {
        let mut sums = HashMap::new();
        for line in self.lines.iter().filter(|l| l.delivered) {
            if let Some(order) = self.orders.get(&line.o_id) {
                *sums.entry(order.c_id).or_default() += line.amount;
            }
        }
        sums
    }
}

fn all(txn: &mut Transaction<'_>, table: &Table, range: &KeyRange) -> Result<Vec<Vec<Value>>> {
    Ok(txn.scan(table, range, ScanDirection::Ascending, usize::MAX)?)
}

type Check = std::result::Result<(), String>;

/// A district-level condition: the detail of the first violation.
type DistrictCheck = fn(&DistrictData) -> Check;

fn condition_2(d: &DistrictData) -> Check {
    let max_o_id = d.orders.keys().next_back().copied();
    if max_o_id.map(i64::from) != Some(d.next_o_id - 1) {
        return Err(format!(
            "{}: d_next_o_id - 1 = {} but max(o_id) = {max_o_id:?}",
            d.name(),
            d.next_o_id - 1
        ));
    }
    match d.new_orders.last() {
        Some(&max_no) if i64::from(max_no) != d.next_o_id - 1 => Err(format!(
            "{}: d_next_o_id - 1 = {} but max(no_o_id) = {max_no}",
            d.name(),
            d.next_o_id - 1
        )),
        _ => Ok(()),
    }
}

fn condition_3(d: &DistrictData) -> Check {
    let (Some(&min), Some(&max)) = (d.new_orders.first(), d.new_orders.last()) else {
        return Ok(());
    };
    let count = d.new_orders.len() as u64;
    if u64::from(max - min) + 1 != count {
        return Err(format!(
            "{}: max(no_o_id) {max} - min(no_o_id) {min} + 1 != {count} new-order rows",
            d.name()
        ));
    }
    Ok(())
}

fn condition_4(d: &DistrictData) -> Check {
    let sum: i64 = d.orders.values().map(|o| o.ol_cnt).sum();
    if sum != d.lines.len() as i64 {
        return Err(format!(
            "{}: sum(o_ol_cnt) {sum} != {} order-line rows",
            d.name(),
            d.lines.len()
        ));
    }
    Ok(())
}

fn condition_5(d: &DistrictData) -> Check {
    let pending: BTreeSet<u32> = d.new_orders.iter().copied().collect();
    for (&o_id, order) in &d.orders {
        if order.carrier.is_none() != pending.contains(&o_id) {
            return Err(format!(
                "order (w {}, d {}, o {o_id}): o_carrier_id {:?} but new-order row {}",
                d.w_id,
                d.d_id,
                order.carrier,
                if pending.contains(&o_id) {
                    "present"
                } else {
                    "absent"
                }
            ));
        }
    }
    match pending.iter().find(|o_id| !d.orders.contains_key(o_id)) {
        Some(o_id) => Err(format!(
            "new-order (w {}, d {}, o {o_id}) has no order",
            d.w_id, d.d_id
        )),
        None => Ok(()),
    }
}

fn condition_6(d: &DistrictData) -> Check {
    let mut counts: HashMap<u32, i64> = HashMap::new();
    for line in &d.lines {
        *counts.entry(line.o_id).or_default() += 1;
    }
    for (&o_id, order) in &d.orders {
        let lines = counts.get(&o_id).copied().unwrap_or(0);
        if lines != order.ol_cnt {
            return Err(format!(
                "order (w {}, d {}, o {o_id}): o_ol_cnt {} but {lines} order-line rows",
                d.w_id, d.d_id, order.ol_cnt
            ));
        }
    }
    Ok(())
}

fn condition_7(d: &DistrictData) -> Check {
    for line in &d.lines {
        let name = || {
            format!(
                "order-line (w {}, d {}, o {}, n {})",
                d.w_id, d.d_id, line.o_id, line.number
            )
        };
        let Some(order) = d.orders.get(&line.o_id) else {
            return Err(format!("{} has no order", name()));
        };
        if line.delivered == order.carrier.is_none() {
            return Err(format!(
                "{}: ol_delivery_d {} but o_carrier_id {:?}",
                name(),
                if line.delivered { "set" } else { "NULL" },
                order.carrier
            ));
        }
    }
    Ok(())
}

fn condition_11(d: &DistrictData) -> Check {
    let delivered = d.orders.len() as i64 - d.new_orders.len() as i64;
    let expected = i64::from(FIRST_UNDELIVERED_ORDER) - 1;
    if delivered != expected {
        return Err(format!(
            "{}: {} orders - {} new-orders = {delivered}, not {expected}",
            d.name(),
            d.orders.len(),
            d.new_orders.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{DISTRICT, HISTORY, ORDERS};
    use crate::workload::tests::{row_of, warehouse_1, with_db};

    #[test]
    fn ids_must_be_one_to_the_count() {
        let name = |n: u32| format!("row {n}");
        assert!(one_to(&[1, 2, 3], 3, name).is_ok());
        assert!(one_to(&[], 0, name).is_ok());
        let missing = |ids: &[u32], count| match one_to(ids, count, name) {
            Err(TpccError::MissingRow(m)) => m,
            other => panic!("{ids:?} of {count}: {other:?}"),
        };
        assert_eq!(missing(&[], 1), "row 1");
        assert_eq!(missing(&[1, 3], 3), "row 2");
        assert_eq!(missing(&[2, 3], 3), "row 1");
        assert_eq!(missing(&[1], u32::MAX), "row 2");
        assert!(matches!(
            one_to(&[1, 2], 1, name),
            Err(TpccError::UnexpectedRow(_))
        ));
        assert!(matches!(
            one_to(&[1], 0, name),
            Err(TpccError::UnexpectedRow(_))
        ));
    }

    /// Every condition is stated over the warehouses and districts present: without the
    /// count from `tpcc_meta` a database whose only warehouse was gone passed them all.
    #[test]
    fn a_missing_warehouse_or_district_fails_the_check() {
        with_db(1, &[], |db| match check_conditions(db, &AFTER_LOAD) {
            Err(TpccError::MissingRow(m)) => assert!(m.contains("warehouse 1"), "{m}"),
            other => panic!("no warehouse: {other:?}"),
        });
        let district = |d: i64| {
            let key = [
                (district::D_ID, Value::Int(d)),
                (district::D_W_ID, Value::Int(1)),
            ];
            (DISTRICT, row_of(&district::columns(), &key))
        };
        let nine: Vec<_> = std::iter::once(warehouse_1())
            .chain((1..=10).filter(|&d| d != 4).map(district))
            .collect();
        with_db(1, &nine, |db| match check_conditions(db, &BASIC) {
            Err(TpccError::MissingRow(m)) => assert_eq!(m, "district (w 1, d 4)"),
            other => panic!("nine districts: {other:?}"),
        });
        let eleven: Vec<_> = std::iter::once(warehouse_1())
            .chain((1..=11).map(district))
            .collect();
        with_db(1, &eleven, |db| match check_conditions(db, &BASIC) {
            Err(TpccError::UnexpectedRow(m)) => assert!(m.contains("d 11"), "{m}"),
            other => panic!("eleven districts: {other:?}"),
        });
    }

    /// A row whose id is out of range is named in the error (it said "id or count -1 is out
    /// of range", nothing more); every customer of a district must be there for conditions
    /// 10 and 12, which are stated per customer.
    #[test]
    fn a_row_out_of_range_is_named_and_customers_are_counted() {
        let district = |d: i64| {
            let key = [
                (district::D_ID, Value::Int(d)),
                (district::D_W_ID, Value::Int(1)),
            ];
            (DISTRICT, row_of(&district::columns(), &key))
        };
        let mut rows: Vec<_> = std::iter::once(warehouse_1())
            .chain((1..=10).map(district))
            .collect();
        with_db(1, &rows, |db| match check_conditions(db, &[10]) {
            Err(TpccError::MissingRow(m)) => assert_eq!(m, "customer (w 1, d 1, c 1)"),
            other => panic!("no customers: {other:?}"),
        });
        let order = [(o::O_C_ID, Value::Int(-1)), (o::O_ID, Value::Int(7))];
        rows.push((ORDERS, row_of(&o::columns(), &order)));
        with_db(1, &rows, |db| match check_conditions(db, &BASIC) {
            Err(TpccError::UnexpectedRow(m)) => assert!(m.starts_with("orders (1, 1, 7): "), "{m}"),
            other => panic!("an order of customer -1: {other:?}"),
        });
        let payment = [(h::H_ID, Value::Int(5)), (h::H_W_ID, Value::Int(-1))];
        rows.push((HISTORY, row_of(&h::columns(), &payment)));
        with_db(1, &rows, |db| match check_conditions(db, &[8]) {
            Err(TpccError::UnexpectedRow(m)) => assert!(m.starts_with("history (5): "), "{m}"),
            other => panic!("a payment to warehouse -1: {other:?}"),
        });
    }
}
