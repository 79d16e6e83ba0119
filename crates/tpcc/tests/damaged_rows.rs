//! The TPC-C kit over rows damaged behind valid checksums: one row per case has a column
//! set to a hostile but well-formed value (a boundary of its type, a negative id, a count
//! of 0 or 2^31 - 1, a string of another length), or is deleted, or an extra row is
//! inserted, through the engine's own API, as a bug's write or bit rot under a recomputed
//! checksum would leave it. Then the consistency check (`tailstore tpcc check`) and each of
//! the five transactions, aimed at the damaged rows, run on it. Every run must end — never a
//! panic, in any thread, never a hang — and the check must fail where one of clause 3.3.2's
//! conditions covers the damaged value. Transactions may fail with an error.
//!
//! The database is loaded once (one warehouse); each case's damage is undone after it, and
//! the transactions roll back instead of committing, so every case starts from the load.
//! `DAMAGED_TPCC_CASES` runs more cases, `DAMAGED_TPCC_VERBOSE` prints each.
//!
//! The layers below have their own: `engine/tests/damaged_pages.rs`, `kv/tests/damaged_rows.rs`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tailstore_crash::damage::{
    env_number, peak_memory_bytes, run_with_deadline, PanicLog, Rng, Unfinished,
};
use tailstore_engine::{Database, Table};
use tailstore_storage::Value;
use tailstore_tpcc::random::{last_name, seeded};
use tailstore_tpcc::schema::{
    customer as c, district as d, history as h, item as i, meta, new_order as no, order_line as ol,
    orders as o, stock as s, warehouse as w, Tables,
};
use tailstore_tpcc::txn::delivery::{delivery, DeliveryInput};
use tailstore_tpcc::txn::new_order::{new_order, LineInput, NewOrderInput};
use tailstore_tpcc::txn::order_status::{order_status, OrderStatusInput};
use tailstore_tpcc::txn::payment::{payment, PaymentInput};
use tailstore_tpcc::txn::stock_level::{stock_level, StockLevelInput};
use tailstore_tpcc::txn::{execute, CustomerSelector, Decision};
use tailstore_tpcc::{check::AFTER_LOAD, check_conditions, Result, RetryPolicy, Workload};

/// Cases; `DAMAGED_TPCC_CASES` runs more.
const CASES: u64 = 40;

/// Longer than any case takes: a case still running then is taken to hang.
const HANG: Duration = Duration::from_secs(60);

/// The most memory the whole test may have held at once (`VmHWM`): an `ol_cnt` of 2^31 - 1
/// obeyed would be far more.
const PEAK_MEMORY: u64 = 3 << 30;

/// How the check reports damage it can see: a condition that does not hold, a row that
/// must be there and is not, one that must not be and is, or load parameters that no load
/// writes.
const REPORTED: [&str; 4] = [
    "consistency condition",
    "missing row",
    "unexpected row",
    "no complete TPC-C database",
];

/// Longer than any one transaction on a damaged row may take: a transaction that fails on
/// a row that is stored wrong is reported, not retried a thousand times.
const SLOW_TXN: Duration = Duration::from_millis(500);

#[derive(Clone)]
enum Undo {
    /// Put this row back (it was updated or deleted).
    Restore(Table, Vec<Value>),
    /// Delete the row under this key (it was inserted).
    Remove(Table, Vec<Value>),
}

/// One case's damage and what the transactions aim at.
struct Damage {
    what: String,
    /// Whether one of clause 3.3.2's conditions (or the check's row counts) covers it.
    covered: bool,
    d_id: u32,
    c_id: u32,
    o_id: u32,
    i_id: u32,
    undo: Vec<Undo>,
}

fn key(values: &[i64]) -> Vec<Value> {
    values.iter().map(|&v| Value::Int(v)).collect()
}

fn int32_extremes() -> [i64; 7] {
    [
        -1,
        0,
        i64::from(i32::MIN),
        i64::from(i32::MAX),
        i64::from(i32::MAX) - 1,
        1 << 20,
        16,
    ]
}

fn get(db: &Database, table: &Table, k: &[Value]) -> Option<Vec<Value>> {
    let mut txn = db.begin();
    let row = txn.get(table, k).expect("get");
    txn.commit().expect("commit");
    row
}

/// Sets `column` of the row under `k` to `value`; returns the undo.
fn set(db: &Database, table: &Table, k: &[Value], column: usize, value: Value) -> Undo {
    let original = get(db, table, k).unwrap_or_else(|| panic!("no row {k:?}"));
    let mut row = original.clone();
    row[column] = value;
    let mut txn = db.begin();
    txn.update(table, &row).expect("damaging update");
    txn.commit().expect("commit");
    Undo::Restore(table.clone(), original)
}

fn delete(db: &Database, table: &Table, k: &[Value]) -> Undo {
    let original = get(db, table, k).unwrap_or_else(|| panic!("no row {k:?}"));
    let mut txn = db.begin();
    assert!(txn.delete(table, k).expect("delete"));
    txn.commit().expect("commit");
    Undo::Restore(table.clone(), original)
}

fn insert(db: &Database, table: &Table, row: Vec<Value>, k: Vec<Value>) -> Undo {
    let mut txn = db.begin();
    txn.insert(table, &row).expect("damaging insert");
    txn.commit().expect("commit");
    Undo::Remove(table.clone(), k)
}

/// A row moved to another key: deleted under `k`, inserted with `column` set to `value`.
fn rekey(db: &Database, table: &Table, k: &[Value], column: usize, value: Value) -> Vec<Undo> {
    let original = get(db, table, k).unwrap_or_else(|| panic!("no row {k:?}"));
    let mut moved = original.clone();
    moved[column] = value;
    let mut txn = db.begin();
    assert!(txn.delete(table, k).expect("delete"));
    let inserted = txn.insert(table, &moved);
    if inserted.is_err() {
        // The new key is taken: leave the row missing instead.
        drop(txn);
        return vec![delete(db, table, k)];
    }
    txn.commit().expect("commit");
    let new_key = pk(table, &moved);
    vec![
        Undo::Remove(table.clone(), new_key),
        Undo::Restore(table.clone(), original),
    ]
}

/// The primary key values of `row`.
fn pk(table: &Table, row: &[Value]) -> Vec<Value> {
    table
        .schema()
        .primary_key()
        .iter()
        .map(|&c| row[c].clone())
        .collect()
}

fn undo(db: &Database, undo: &[Undo]) {
    let mut txn = db.begin();
    for u in undo {
        match u {
            Undo::Remove(table, k) => {
                txn.delete(table, k).expect("undo: delete");
            }
            Undo::Restore(table, row) => {
                let k = pk(table, row);
                if txn.get(table, &k).expect("undo: get").is_some() {
                    txn.update(table, row).expect("undo: update");
                } else {
                    txn.insert(table, row).expect("undo: insert");
                }
            }
        }
    }
    txn.commit().expect("undo: commit");
}

/// Damages one row of `db`, chosen by `rng`.
fn damage(db: &Database, t: &Tables, rng: &mut Rng) -> Damage {
    let d_id = 1 + rng.below(10) as u32;
    let c_id = 1 + rng.below(3000) as u32;
    // The oldest undelivered order (Delivery's), the newest, or any.
    let o_id = match rng.below(3) {
        0 => 2101,
        1 => 3000,
        _ => 1 + rng.below(3000) as u32,
    };
    let i_id = 1 + rng.below(100_000) as u32;
    let (dd, cc, oo, ii) = (
        i64::from(d_id),
        i64::from(c_id),
        i64::from(o_id),
        i64::from(i_id),
    );
    let delivered = o_id < 2101;
    let int32 = Value::Int(rng.pick(&int32_extremes()));
    let big_decimal = |rng: &mut Rng, digits: u32| {
        let max = 10i64.pow(digits) - 1;
        Value::Decimal(rng.pick(&[max, -max, 0, -1]))
    };
    let text = |rng: &mut Rng, max: usize| {
        // Four-byte characters only a few: 500 of them would not fit in a row.
        let len = rng.pick(&[0usize, 1, max]);
        let glyph = rng.pick(&["é", "x", " ", "\u{1F600}"]);
        Value::Text(glyph.repeat(if glyph.len() > 2 { len.min(2) } else { len }))
    };
    let ol_key = key(&[1, dd, oo, 1]);
    let o_key = key(&[1, dd, oo]);
    let mut covered = false;
    let mut undos = Vec::new();
    let what = match rng.below(30) {
        0 => {
            let v = Value::Int(rng.pick(&[-1, 0, 1, 2999, 3002, i32::MIN.into(), i32::MAX.into()]));
            covered = true; // condition 2
            undos.push(set(
                db,
                &t.district,
                &key(&[1, dd]),
                d::D_NEXT_O_ID,
                v.clone(),
            ));
            format!("district {d_id}: d_next_o_id {v:?}")
        }
        1 => {
            let v = big_decimal(rng, 12);
            covered = true; // condition 1
            undos.push(set(db, &t.district, &key(&[1, dd]), d::D_YTD, v.clone()));
            format!("district {d_id}: d_ytd {v:?}")
        }
        2 => {
            let v = big_decimal(rng, 4);
            undos.push(set(db, &t.district, &key(&[1, dd]), d::D_TAX, v.clone()));
            format!("district {d_id}: d_tax {v:?}")
        }
        3 => {
            let v = big_decimal(rng, 12);
            covered = true; // conditions 1 and 8
            undos.push(set(db, &t.warehouse, &key(&[1]), w::W_YTD, v.clone()));
            format!("warehouse 1: w_ytd {v:?}")
        }
        4 => {
            let v = Value::Int(rng.pick(&[0, 16, -1, 1, 4, i32::MAX.into(), i32::MIN.into()]));
            covered = true; // conditions 4 and 6
            undos.push(set(db, &t.orders, &o_key, o::O_OL_CNT, v.clone()));
            format!("order {d_id}/{o_id}: o_ol_cnt {v:?}")
        }
        5 => {
            let v = if rng.below(2) == 0 {
                Value::Null
            } else {
                Value::Int(rng.pick(&[-1, 0, 11, i32::MAX.into(), i32::MIN.into()]))
            };
            // Condition 5 covers NULL-ness only.
            covered = delivered == (v == Value::Null);
            undos.push(set(db, &t.orders, &o_key, o::O_CARRIER_ID, v.clone()));
            format!("order {d_id}/{o_id}: o_carrier_id {v:?}")
        }
        6 => {
            let v = Value::Int(rng.pick(&[-1, 0, 3001, i32::MAX.into(), i32::MIN.into()]));
            undos.push(set(db, &t.orders, &o_key, o::O_C_ID, v.clone()));
            format!("order {d_id}/{o_id}: o_c_id {v:?}")
        }
        7 => {
            let v = Value::Int(rng.pick(&[-1, 0, 16, i32::MAX.into(), i32::MIN.into()]));
            undos.extend(rekey(db, &t.order_line, &ol_key, ol::OL_NUMBER, v.clone()));
            format!("order line {d_id}/{o_id}/1: ol_number {v:?}")
        }
        8 => {
            let v = Value::Int(rng.pick(&[-1, 0, 100_001, i32::MAX.into(), i32::MIN.into()]));
            undos.push(set(db, &t.order_line, &ol_key, ol::OL_I_ID, v.clone()));
            format!("order line {d_id}/{o_id}/1: ol_i_id {v:?}")
        }
        9 => {
            let v = big_decimal(rng, 6);
            // Conditions 10 and 12 sum delivered lines only.
            covered = delivered && v != Value::Decimal(0);
            undos.push(set(db, &t.order_line, &ol_key, ol::OL_AMOUNT, v.clone()));
            format!("order line {d_id}/{o_id}/1: ol_amount {v:?}")
        }
        10 => {
            let v = int32.clone();
            undos.push(set(db, &t.order_line, &ol_key, ol::OL_QUANTITY, v.clone()));
            format!("order line {d_id}/{o_id}/1: ol_quantity {v:?}")
        }
        11 => {
            // An extra line after the last one.
            let mut row = get(db, &t.order_line, &ol_key).expect("line 1");
            row[ol::OL_NUMBER] = Value::Int(16);
            covered = true; // conditions 4 and 6
            undos.push(insert(db, &t.order_line, row, key(&[1, dd, oo, 16])));
            format!("order {d_id}/{o_id}: an extra line 16")
        }
        12 => {
            covered = true; // conditions 4 and 6
            undos.push(delete(db, &t.order_line, &ol_key));
            format!("order {d_id}/{o_id}: line 1 missing")
        }
        13 => {
            covered = true; // condition 7 (lines without their order), 2 for the newest
            undos.push(delete(db, &t.orders, &o_key));
            format!("order {d_id}/{o_id} missing (its lines stay)")
        }
        14 => {
            covered = true; // conditions 3 and 5, or 5 for a delivered order
            if delivered {
                let row = key(&[oo, dd, 1]);
                undos.push(insert(db, &t.new_order, row, key(&[1, dd, oo])));
                format!("new-order {d_id}/{o_id} for a delivered order")
            } else {
                undos.push(delete(db, &t.new_order, &o_key));
                format!("new-order {d_id}/{o_id} missing")
            }
        }
        15 => {
            covered = true; // condition 1
            undos.push(delete(db, &t.district, &key(&[1, dd])));
            format!("district {d_id} missing")
        }
        16 => {
            covered = true; // the warehouse the load made is not there
            undos.push(delete(db, &t.warehouse, &key(&[1])));
            "warehouse 1 missing".to_string()
        }
        17 => {
            let v = big_decimal(rng, 12);
            covered = true; // conditions 10 and 12 (v is never the loaded -10.00)
            undos.push(set(
                db,
                &t.customer,
                &key(&[1, dd, cc]),
                c::C_BALANCE,
                v.clone(),
            ));
            format!("customer {d_id}/{c_id}: c_balance {v:?}")
        }
        18 => {
            let column = rng.pick(&[c::C_PAYMENT_CNT, c::C_DELIVERY_CNT]);
            let v = int32.clone();
            undos.push(set(db, &t.customer, &key(&[1, dd, cc]), column, v.clone()));
            format!("customer {d_id}/{c_id}: column {column} {v:?}")
        }
        19 => {
            let (column, v) = match rng.below(4) {
                0 => (c::C_DISCOUNT, big_decimal(rng, 4)),
                1 => (c::C_CREDIT, text(rng, 2)),
                2 => (c::C_DATA, text(rng, 500)),
                _ => (c::C_FIRST, text(rng, 16)),
            };
            undos.push(set(db, &t.customer, &key(&[1, dd, cc]), column, v));
            format!("customer {d_id}/{c_id}: column {column} of another length or value")
        }
        20 => {
            covered = true; // conditions 10 and 12 are stated for every customer
            undos.push(delete(db, &t.customer, &key(&[1, dd, cc])));
            format!("customer {d_id}/{c_id} missing")
        }
        21 => {
            let column = rng.pick(&[s::S_QUANTITY, s::S_YTD, s::S_ORDER_CNT, s::S_REMOTE_CNT]);
            let v = int32.clone();
            undos.push(set(db, &t.stock, &key(&[1, ii]), column, v.clone()));
            format!("stock {i_id}: column {column} {v:?}")
        }
        22 => {
            undos.push(delete(db, &t.stock, &key(&[1, ii])));
            format!("stock {i_id} missing")
        }
        23 => {
            let (column, v) = match rng.below(3) {
                0 => (i::I_PRICE, big_decimal(rng, 5)),
                1 => (i::I_DATA, text(rng, 50)),
                _ => (i::I_IM_ID, int32.clone()),
            };
            undos.push(set(db, &t.item, &key(&[ii]), column, v));
            format!("item {i_id}: column {column} damaged")
        }
        24 => {
            let (table, k, column) = if rng.below(2) == 0 {
                (&t.warehouse, key(&[1]), w::W_NAME)
            } else {
                (&t.district, key(&[1, dd]), d::D_NAME)
            };
            undos.push(set(db, table, &k, column, text(rng, 10)));
            format!("{} name of another length", table.name())
        }
        25 => {
            // A history row with the largest id (and a payment of nothing).
            let mut row = vec![Value::Int(1); h::COLUMNS];
            let h_id = rng.pick(&[i64::MAX, i64::MAX - 1, -1, i64::MIN]);
            row[h::H_ID] = Value::Int(h_id);
            row[h::H_DATE] = Value::Timestamp(0);
            row[h::H_AMOUNT] = Value::Decimal(0);
            row[h::H_DATA] = Value::Text(String::new());
            undos.push(insert(db, &t.history, row, key(&[h_id])));
            format!("a history row with h_id {h_id}")
        }
        27 => {
            // The oldest new-order row moved to another order id.
            let v = Value::Int(rng.pick(&[-1, 0, 3001, i32::MAX.into(), i32::MIN.into()]));
            covered = true; // conditions 2, 3 or 5
            let k = key(&[1, dd, 2101]);
            undos.extend(rekey(db, &t.new_order, &k, no::NO_O_ID, v.clone()));
            format!("new-order {d_id}/2101 moved to o_id {v:?}")
        }
        28 => {
            // An order moved to another id, its lines left behind.
            let v = Value::Int(rng.pick(&[-1, 0, 3001, i32::MAX.into(), i32::MIN.into()]));
            covered = true; // condition 7 (lines without their order), and 2
            undos.extend(rekey(db, &t.orders, &o_key, o::O_ID, v.clone()));
            format!("order {d_id}/{o_id} moved to o_id {v:?}")
        }
        26 => {
            let v = rng.pick(&[0, -1, 2, 1 << 20, u32::MAX.into(), i64::MAX]);
            // The load made one warehouse, and the check counts them against this.
            covered = true;
            let k = vec![Value::Text("warehouses".into())];
            undos.push(set(db, &t.meta, &k, meta::VALUE, Value::Int(v)));
            format!("tpcc_meta: warehouses {v}")
        }
        _ => {
            // The newest order's line 1 delivered although the order is not.
            covered = true; // condition 7
            let v = Value::Timestamp(rng.pick(&[0, -1, i64::MAX, i64::MIN]));
            undos.push(set(
                db,
                &t.order_line,
                &ol_key,
                ol::OL_DELIVERY_D,
                v.clone(),
            ));
            let what = if delivered { "NULL" } else { "set" };
            if delivered {
                // Undo the above: a delivered line is made undelivered instead.
                undo(db, &undos);
                undos.clear();
                undos.push(set(
                    db,
                    &t.order_line,
                    &ol_key,
                    ol::OL_DELIVERY_D,
                    Value::Null,
                ));
            }
            format!("order line {d_id}/{o_id}/1: ol_delivery_d {what}")
        }
    };
    Damage {
        what,
        covered,
        d_id,
        c_id,
        o_id,
        i_id,
        undo: undos,
    }
}

/// What running the check and the transactions on one damaged database gave.
struct Outcome {
    check: std::result::Result<(), String>,
    /// Each transaction: its name, what it ended with, how long it took.
    txns: Vec<(&'static str, String, Duration)>,
}

/// Runs `body` like a terminal would (`execute`, retries included), but rolls back where
/// it would commit, so the database keeps the case's damage only.
fn rolled_back<T>(
    db: &Database,
    mut body: impl FnMut(&mut tailstore_engine::Transaction<'_>) -> Result<Decision<T>>,
) -> (String, Duration) {
    let began = Instant::now();
    let result = execute(db, &RetryPolicy::default(), |txn| {
        body(txn).map(|_| Decision::<()>::Rollback)
    });
    let said = match result {
        Ok(done) => format!("ended {:?} after {} attempts", done.outcome, done.attempts),
        Err(err) => format!("error: {err}"),
    };
    (said, began.elapsed())
}

fn exercise(db: &Database, target: (u32, u32, u32, u32)) -> Outcome {
    let (d_id, c_id, o_id, i_id) = target;
    let check = check_conditions(db, &AFTER_LOAD)
        .map(|_| ())
        .map_err(|e| e.to_string());
    let mut txns = Vec::new();
    let workload = Workload::open(db, &mut seeded(7));
    txns.push((
        "workload",
        workload
            .as_ref()
            .map_or_else(|e| e.to_string(), |_| "opened".into()),
        Duration::ZERO,
    ));
    let Ok(t) = Tables::open(db) else {
        return Outcome { check, txns };
    };
    let t = &t;
    // The customer of the damaged order, for Order-Status.
    let order_customer = get(db, &t.orders, &key(&[1, d_id.into(), o_id.into()]))
        .and_then(|row| match row[o::O_C_ID] {
            Value::Int(v) => u32::try_from(v).ok(),
            _ => None,
        })
        .unwrap_or(c_id);
    let items = [i_id, 1, 2, i_id % 100_000 + 1, 100_000];
    let lines: Vec<LineInput> = items
        .iter()
        .map(|&i_id| LineInput {
            i_id,
            supply_w_id: 1,
            quantity: 5,
        })
        .collect();
    let order = NewOrderInput {
        w_id: 1,
        d_id,
        c_id,
        lines,
        entry_d: 1,
    };
    let (said, took) = rolled_back(db, |txn| new_order(txn, t, &order));
    txns.push(("new-order", said, took));
    for selector in [
        CustomerSelector::Id(c_id),
        CustomerSelector::LastName(last_name((c_id - 1) % 1000)),
    ] {
        let pay = PaymentInput {
            w_id: 1,
            d_id,
            c_w_id: 1,
            c_d_id: d_id,
            customer: selector.clone(),
            amount: 500_000,
            date: 1,
        };
        let (said, took) = rolled_back(db, |txn| payment(txn, t, &pay, i64::MAX));
        txns.push(("payment", said, took));
    }
    for customer in [order_customer, c_id] {
        let status = OrderStatusInput {
            w_id: 1,
            d_id,
            customer: CustomerSelector::Id(customer),
        };
        let (said, took) = rolled_back(db, |txn| order_status(txn, t, &status));
        txns.push(("order-status", said, took));
    }
    let deliver = DeliveryInput {
        w_id: 1,
        carrier_id: 10,
        delivery_d: 1,
    };
    let (said, took) = rolled_back(db, |txn| delivery(txn, t, &deliver));
    txns.push(("delivery", said, took));
    for threshold in [20, i64::MIN, i64::MAX] {
        let level = StockLevelInput {
            w_id: 1,
            d_id,
            threshold,
        };
        let (said, took) = rolled_back(db, |txn| stock_level(txn, t, &level));
        txns.push(("stock-level", said, took));
    }
    Outcome { check, txns }
}

#[test]
fn damaged_rows_never_panic_or_hang_and_the_check_reports_them() {
    let panics = PanicLog::install();
    let fixture = Arc::new(common::loaded(1, 2, 303));
    let tables = Tables::open(&fixture.db).expect("tables");
    let verbose = std::env::var_os("DAMAGED_TPCC_VERBOSE").is_some();
    let (mut slowest, mut failed_checks, mut errors) = (Duration::ZERO, 0, 0);
    for seed in 0..env_number("DAMAGED_TPCC_CASES").unwrap_or(CASES) {
        let mut rng = Rng::from_seed(seed);
        let damage = damage(&fixture.db, &tables, &mut rng);
        let case = format!("seed {seed}: {}", damage.what);
        let target = (damage.d_id, damage.c_id, damage.o_id, damage.i_id);
        let shared = Arc::clone(&fixture);
        let outcome = match run_with_deadline(HANG, move || exercise(&shared.db, target)) {
            Ok(outcome) => outcome,
            Err(Unfinished::Panicked) => panic!("{case}: panicked: {}", panics.take().join(" | ")),
            Err(Unfinished::Hung) => panic!("{case}: still running after {HANG:?}"),
        };
        if verbose {
            eprintln!("{case}\n  check: {:?}", outcome.check);
            for (name, said, took) in &outcome.txns {
                eprintln!("  {name}: {said} ({took:?})");
            }
        }
        let panicked = panics.take();
        assert!(
            panicked.is_empty(),
            "{case}: a panic: {}",
            panicked.join(" | ")
        );
        if damage.covered {
            match &outcome.check {
                Err(e) if REPORTED.iter().any(|r| e.starts_with(r)) => {}
                other => panic!("{case}: the check said {other:?}"),
            }
        }
        failed_checks += usize::from(outcome.check.is_err());
        for (name, said, took) in &outcome.txns {
            assert!(*took < SLOW_TXN, "{case}: {name} took {took:?}: {said}");
            slowest = slowest.max(*took);
            errors += usize::from(said.starts_with("error"));
        }
        undo(&fixture.db, &damage.undo);
    }
    eprintln!(
        "failed checks: {failed_checks}, transaction errors: {errors}, slowest transaction: \
         {slowest:?}"
    );
    check_conditions(&fixture.db, &AFTER_LOAD).expect("every case's damage was undone");
    let peak = peak_memory_bytes();
    assert!(peak < PEAK_MEMORY, "the test held {peak} bytes at once");
}
