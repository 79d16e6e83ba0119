//! The five transactions on a loaded database of two warehouses, one at a time (each against
//! what it must change), then a concurrent mix on four terminals, after which conditions
//! 1–10 and 12 must hold. One test, in steps, so that the database is loaded once.

mod common;

use std::collections::BTreeSet;

use tailstore_engine::{Database, KeyRange, Table};
use tailstore_storage::{ScanDirection, Value};
use tailstore_tpcc::random::{last_name, seeded};
use tailstore_tpcc::schema::{
    customer as c, district as d, history as h, new_order as no, order_line as ol, orders as o,
    stock as s, warehouse as w, Tables, CUSTOMER_BY_NAME,
};
use tailstore_tpcc::txn::delivery::{delivery, DeliveryInput};
use tailstore_tpcc::txn::new_order::{new_order, LineInput, NewOrderInput, UNUSED_ITEM_ID};
use tailstore_tpcc::txn::order_status::{order_status, OrderStatusInput};
use tailstore_tpcc::txn::payment::{payment, PaymentInput};
use tailstore_tpcc::txn::stock_level::{stock_level, StockLevelInput};
use tailstore_tpcc::txn::{execute, CustomerSelector, Executed, TxnOutcome};
use tailstore_tpcc::{check, Outcome, RetryPolicy, Terminal, TxnKind, Workload};

fn get(db: &Database, table: &Table, key: &[i64]) -> Option<Vec<Value>> {
    let key: Vec<Value> = key.iter().map(|&k| Value::Int(k)).collect();
    let mut txn = db.begin();
    let row = txn.get(table, &key).expect("get");
    txn.commit().expect("commit");
    row
}

fn must(db: &Database, table: &Table, key: &[i64]) -> Vec<Value> {
    get(db, table, key).unwrap_or_else(|| panic!("no row {key:?} in {}", table.name()))
}

fn scan(db: &Database, table: &Table, prefix: &[i64]) -> Vec<Vec<Value>> {
    let prefix: Vec<Value> = prefix.iter().map(|&k| Value::Int(k)).collect();
    let mut txn = db.begin();
    let rows = txn
        .scan(
            table,
            &KeyRange::prefix(prefix),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan");
    txn.commit().expect("commit");
    rows
}

fn num(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Decimal(i) | Value::Timestamp(i) => *i,
        other => panic!("not a number: {other:?}"),
    }
}

fn committed<T: std::fmt::Debug>(done: Executed<T>) -> T {
    match done.outcome {
        TxnOutcome::Committed(out) => out,
        other => panic!("expected a commit, got {other:?}"),
    }
}

#[test]
fn transactions_then_a_concurrent_mix_keep_the_database_consistent() {
    let fixture = common::loaded(2, 2, 202);
    let db = &fixture.db;
    let t = Tables::open(db).expect("tables");
    new_order_takes_stock_and_records_the_order(db, &t);
    new_order_with_an_unused_item_rolls_back(db, &t);
    payment_by_last_name_pays_the_middle_customer(db, &t);
    order_status_shows_the_last_order(db, &t);
    delivery_delivers_the_oldest_order_of_every_district(db, &t);
    stock_level_counts_distinct_items_below_the_threshold(db, &t);
    check(db, true).expect("conditions 1-10 and 12 after single transactions");
    concurrent_mix(db);
    let report = check(db, true).expect("conditions 1-10 and 12 after the mix");
    assert_eq!(report.conditions, vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12]);
}

fn new_order_takes_stock_and_records_the_order(db: &Database, t: &Tables) {
    let next = num(&must(db, &t.district, &[1, 3])[d::D_NEXT_O_ID]);
    let stock_before = [must(db, &t.stock, &[1, 7]), must(db, &t.stock, &[2, 8])];
    let input = NewOrderInput {
        w_id: 1,
        d_id: 3,
        c_id: 42,
        lines: vec![
            LineInput {
                i_id: 7,
                supply_w_id: 1,
                quantity: 4,
            },
            LineInput {
                i_id: 8,
                supply_w_id: 2,
                quantity: 9,
            },
        ],
        entry_d: 1_000,
    };
    let out = committed(
        execute(db, &RetryPolicy::default(), |txn| new_order(txn, t, &input)).expect("new-order"),
    );
    assert_eq!(i64::from(out.o_id), next);
    assert!(!out.all_local);
    assert_eq!(
        num(&must(db, &t.district, &[1, 3])[d::D_NEXT_O_ID]),
        next + 1
    );
    let order = must(db, &t.orders, &[1, 3, next]);
    assert_eq!(num(&order[o::O_C_ID]), 42);
    assert_eq!(num(&order[o::O_OL_CNT]), 2);
    assert_eq!(num(&order[o::O_ALL_LOCAL]), 0);
    assert!(order[o::O_CARRIER_ID].is_null());
    assert!(get(db, &t.new_order, &[1, 3, next]).is_some());
    let lines = scan(db, &t.order_line, &[1, 3, next]);
    assert_eq!(lines.len(), 2);
    for ((line, before), q) in lines.iter().zip(&stock_before).zip([4, 9]) {
        let i_id = num(&line[ol::OL_I_ID]);
        let price = num(&must(db, &t.item, &[i_id])[tailstore_tpcc::schema::item::I_PRICE]);
        assert_eq!(num(&line[ol::OL_AMOUNT]), price * q);
        assert!(line[ol::OL_DELIVERY_D].is_null());
        let supply = num(&line[ol::OL_SUPPLY_W_ID]);
        let after = must(db, &t.stock, &[supply, i_id]);
        let on_hand = num(&before[s::S_QUANTITY]);
        let expected = if on_hand >= q + 10 {
            on_hand - q
        } else {
            on_hand - q + 91
        };
        assert_eq!(num(&after[s::S_QUANTITY]), expected);
        assert_eq!(num(&after[s::S_YTD]), num(&before[s::S_YTD]) + q);
        assert_eq!(
            num(&after[s::S_ORDER_CNT]),
            num(&before[s::S_ORDER_CNT]) + 1
        );
        let remote = i64::from(supply != 1);
        assert_eq!(
            num(&after[s::S_REMOTE_CNT]),
            num(&before[s::S_REMOTE_CNT]) + remote
        );
        // ol_dist_info is the supplying stock's s_dist for the order's district (3).
        assert_eq!(line[ol::OL_DIST_INFO], after[s::S_DIST_03]);
    }
}

fn new_order_with_an_unused_item_rolls_back(db: &Database, t: &Tables) {
    let next = num(&must(db, &t.district, &[1, 4])[d::D_NEXT_O_ID]);
    let stock_before = must(db, &t.stock, &[1, 9]);
    let input = NewOrderInput {
        w_id: 1,
        d_id: 4,
        c_id: 5,
        lines: vec![
            LineInput {
                i_id: 9,
                supply_w_id: 1,
                quantity: 2,
            },
            LineInput {
                i_id: UNUSED_ITEM_ID,
                supply_w_id: 1,
                quantity: 1,
            },
        ],
        entry_d: 1_000,
    };
    assert!(input.rolls_back());
    let placed_before_the_rollback = std::cell::Cell::new(false);
    let done = execute(db, &RetryPolicy::default(), |txn| {
        let decision = new_order(txn, t, &input)?;
        // Clause 2.4.2.3: the work before the unused item is done, then rolled back.
        let at = |key: &[i64]| key.iter().map(|&k| Value::Int(k)).collect::<Vec<_>>();
        let district = txn.get(&t.district, &at(&[1, 4]))?.expect("district");
        placed_before_the_rollback.set(
            num(&district[d::D_NEXT_O_ID]) == next + 1
                && txn.get(&t.orders, &at(&[1, 4, next]))?.is_some()
                && txn.get(&t.new_order, &at(&[1, 4, next]))?.is_some()
                && txn.get(&t.order_line, &at(&[1, 4, next, 1]))?.is_some(),
        );
        Ok(decision)
    })
    .expect("new-order");
    assert_eq!(done.outcome, TxnOutcome::RolledBack);
    assert!(
        placed_before_the_rollback.get(),
        "the order and its first line were placed before the rollback"
    );
    assert_eq!(
        num(&must(db, &t.district, &[1, 4])[d::D_NEXT_O_ID]),
        next,
        "nothing of it stays"
    );
    assert!(get(db, &t.orders, &[1, 4, next]).is_none());
    assert!(get(db, &t.new_order, &[1, 4, next]).is_none());
    assert_eq!(must(db, &t.stock, &[1, 9]), stock_before);
}

/// The customers of district (1, 2) named `last`, sorted by c_first then c_id.
fn named(db: &Database, t: &Tables, last: &str) -> Vec<Vec<Value>> {
    let mut txn = db.begin();
    let prefix = vec![Value::Int(1), Value::Int(2), Value::Text(last.into())];
    let rows = txn
        .scan_index(
            &t.customer,
            CUSTOMER_BY_NAME,
            &KeyRange::prefix(prefix),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan");
    txn.commit().expect("commit");
    rows
}

fn payment_by_last_name_pays_the_middle_customer(db: &Database, t: &Tables) {
    // The most common last name of the district (NURand makes some names frequent).
    let last = (0..1000)
        .map(last_name)
        .max_by_key(|name| named(db, t, name).len())
        .expect("names");
    let rows = named(db, t, &last);
    assert!(rows.len() >= 3, "{} customers named {last}", rows.len());
    let mut sorted = rows.clone();
    let first = |row: &Vec<Value>| match &row[c::C_FIRST] {
        Value::Text(s) => (s.clone(), num(&row[c::C_ID])),
        other => panic!("c_first {other:?}"),
    };
    sorted.sort_by_key(first);
    assert_eq!(sorted, rows, "the index returns them by c_first");
    let middle = &rows[rows.len().div_ceil(2) - 1];
    let c_id = num(&middle[c::C_ID]);
    let w_before = must(db, &t.warehouse, &[2]);
    let d_before = must(db, &t.district, &[2, 5]);
    let input = PaymentInput {
        w_id: 2,
        d_id: 5,
        c_w_id: 1,
        c_d_id: 2,
        customer: CustomerSelector::LastName(last.clone()),
        amount: 123_456,
        date: 7,
    };
    let out = committed(
        execute(db, &RetryPolicy::default(), |txn| {
            payment(txn, t, &input, 9_000_001)
        })
        .expect("payment"),
    );
    assert_eq!(i64::from(out.c_id), c_id);
    let after = must(db, &t.customer, &[1, 2, c_id]);
    assert_eq!(
        num(&after[c::C_BALANCE]),
        num(&middle[c::C_BALANCE]) - 123_456
    );
    assert_eq!(
        num(&after[c::C_YTD_PAYMENT]),
        num(&middle[c::C_YTD_PAYMENT]) + 123_456
    );
    assert_eq!(
        num(&after[c::C_PAYMENT_CNT]),
        num(&middle[c::C_PAYMENT_CNT]) + 1
    );
    assert_eq!(
        num(&must(db, &t.warehouse, &[2])[w::W_YTD]),
        num(&w_before[w::W_YTD]) + 123_456
    );
    assert_eq!(
        num(&must(db, &t.district, &[2, 5])[d::D_YTD]),
        num(&d_before[d::D_YTD]) + 123_456
    );
    let history = must(db, &t.history, &[9_000_001]);
    assert_eq!(
        [h::H_C_ID, h::H_C_D_ID, h::H_C_W_ID, h::H_D_ID, h::H_W_ID].map(|col| num(&history[col])),
        [c_id, 2, 1, 5, 2]
    );
    let Value::Text(data) = &after[c::C_DATA] else {
        panic!("c_data")
    };
    if out.c_credit == "BC" {
        assert!(
            data.starts_with(&format!("{c_id} 2 1 5 2 1234.56 ")),
            "{data}"
        );
    } else {
        assert_eq!(after[c::C_DATA], middle[c::C_DATA]);
    }
}

fn order_status_shows_the_last_order(db: &Database, t: &Tables) {
    // Customer 42 of (1, 3) got a second order from the first step.
    let input = OrderStatusInput {
        w_id: 1,
        d_id: 3,
        customer: CustomerSelector::Id(42),
    };
    let out = committed(
        execute(db, &RetryPolicy::default(), |txn| {
            order_status(txn, t, &input)
        })
        .expect("order-status"),
    );
    let newest = num(&must(db, &t.district, &[1, 3])[d::D_NEXT_O_ID]) - 1;
    assert_eq!(i64::from(out.o_id), newest);
    assert_eq!(out.lines.len(), 2);
    assert_eq!(out.o_carrier_id, None);
    assert!(out.lines.iter().all(|l| l.delivery_d.is_none()));
}

fn delivery_delivers_the_oldest_order_of_every_district(db: &Database, t: &Tables) {
    let oldest: Vec<i64> = (1..=10)
        .map(|d_id| num(&scan(db, &t.new_order, &[2, d_id])[0][no::NO_O_ID]))
        .collect();
    let customers: Vec<Vec<Value>> = (1..=10)
        .zip(&oldest)
        .map(|(d_id, &o_id)| {
            let c_id = num(&must(db, &t.orders, &[2, d_id, o_id])[o::O_C_ID]);
            must(db, &t.customer, &[2, d_id, c_id])
        })
        .collect();
    let input = DeliveryInput {
        w_id: 2,
        carrier_id: 7,
        delivery_d: 99,
    };
    let out = committed(
        execute(db, &RetryPolicy::default(), |txn| delivery(txn, t, &input)).expect("delivery"),
    );
    assert_eq!(out.skipped, 0);
    assert_eq!(
        out.delivered,
        (1..=10)
            .zip(oldest.iter().map(|&o| o as u32))
            .collect::<Vec<_>>()
    );
    for ((d_id, &o_id), before) in (1..=10).zip(&oldest).zip(&customers) {
        assert!(get(db, &t.new_order, &[2, d_id, o_id]).is_none());
        assert_eq!(
            num(&must(db, &t.orders, &[2, d_id, o_id])[o::O_CARRIER_ID]),
            7
        );
        let lines = scan(db, &t.order_line, &[2, d_id, o_id]);
        assert!(lines.iter().all(|l| num(&l[ol::OL_DELIVERY_D]) == 99));
        let total: i64 = lines.iter().map(|l| num(&l[ol::OL_AMOUNT])).sum();
        let after = must(db, &t.customer, &[2, d_id, num(&before[c::C_ID])]);
        assert_eq!(
            num(&after[c::C_BALANCE]),
            num(&before[c::C_BALANCE]) + total
        );
        assert_eq!(
            num(&after[c::C_DELIVERY_CNT]),
            num(&before[c::C_DELIVERY_CNT]) + 1
        );
    }
}

fn stock_level_counts_distinct_items_below_the_threshold(db: &Database, t: &Tables) {
    for (d_id, threshold) in [(3, 20), (6, 10), (9, 15)] {
        let next = num(&must(db, &t.district, &[1, d_id])[d::D_NEXT_O_ID]);
        let items: BTreeSet<i64> = (next - 20..next)
            .flat_map(|o_id| scan(db, &t.order_line, &[1, d_id, o_id]))
            .map(|l| num(&l[ol::OL_I_ID]))
            .collect();
        let expected = items
            .iter()
            .filter(|&&i| num(&must(db, &t.stock, &[1, i])[s::S_QUANTITY]) < threshold)
            .count();
        let input = StockLevelInput {
            w_id: 1,
            d_id: d_id as u32,
            threshold,
        };
        let out = committed(
            execute(db, &RetryPolicy::default(), |txn| {
                stock_level(txn, t, &input)
            })
            .expect("stock-level"),
        );
        assert_eq!(
            out.low_stock as usize, expected,
            "district {d_id}, threshold {threshold}"
        );
    }
}

/// Four terminals (two per warehouse) run 150 transactions each from the standard deck.
fn concurrent_mix(db: &Database) {
    let workload = Workload::open(db, &mut seeded(5)).expect("workload");
    let reports = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4u32)
            .map(|k| {
                let workload = &workload;
                scope.spawn(move || {
                    let mut terminal =
                        Terminal::new(workload, k % 2 + 1, k + 1, seeded(50 + u64::from(k)))
                            .expect("terminal");
                    (0..150)
                        .map(|_| terminal.run_next().expect("transaction"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("terminal thread"))
            .collect::<Vec<_>>()
    });
    assert_eq!(reports.len(), 600);
    let count = |kind| reports.iter().filter(|r| r.kind == kind).count();
    assert!(
        count(TxnKind::NewOrder) >= 250 && count(TxnKind::Payment) >= 250,
        "{reports:?}"
    );
    for kind in [TxnKind::OrderStatus, TxnKind::Delivery, TxnKind::StockLevel] {
        assert!(count(kind) >= 24, "{kind}: {}", count(kind));
    }
    for report in &reports {
        match report.outcome {
            Outcome::Committed => {}
            Outcome::RolledBack => assert_eq!(report.kind, TxnKind::NewOrder),
            Outcome::Aborted(cause) => panic!("{} gave up after retries ({cause})", report.kind),
        }
    }
}
