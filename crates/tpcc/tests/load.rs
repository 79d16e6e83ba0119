//! A load of one warehouse: the population of clause 4.3.3.1 and all twelve consistency
//! conditions.

mod common;

use std::collections::HashMap;

use tailstore_engine::{Database, KeyRange, Table, Transaction};
use tailstore_storage::{ScanDirection, Value};
use tailstore_tpcc::check::{check_conditions, AFTER_LOAD};
use tailstore_tpcc::random::{c_last_delta_ok, last_name, NuRandConstants};
use tailstore_tpcc::schema::history as h;
use tailstore_tpcc::schema::{
    customer as c, district as d, item, new_order as no, order_line as ol, orders as o, stock as s,
    Tables,
};
use tailstore_tpcc::{LoadParameters, Terminal, TpccError, Workload};

fn rows(db: &Database, table: &Table, prefix: Vec<Value>) -> Vec<Vec<Value>> {
    let mut txn = db.begin();
    let range = if prefix.is_empty() {
        KeyRange::all()
    } else {
        KeyRange::prefix(prefix)
    };
    let rows = txn
        .scan(table, &range, ScanDirection::Ascending, usize::MAX)
        .expect("scan");
    txn.commit().expect("read-only commit");
    rows
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Decimal(i) => *i,
        other => panic!("not a number: {other:?}"),
    }
}

fn text(v: &Value) -> &str {
    match v {
        Value::Text(s) => s,
        other => panic!("not text: {other:?}"),
    }
}

#[test]
fn one_warehouse_population_and_all_twelve_conditions() {
    let fixture = common::loaded(1, 2, 101);
    let db = &fixture.db;
    let checked =
        check_conditions(db, &AFTER_LOAD).expect("all twelve conditions hold after the load");
    assert_eq!(checked.conditions, AFTER_LOAD.to_vec());
    assert_eq!((checked.warehouses, checked.districts), (1, 10));

    let tables = Tables::open(db).expect("tables");
    let params = LoadParameters::read(db, &tables).expect("parameters");
    assert!(params.complete);
    assert_eq!(params.warehouses, 1);
    assert_eq!(params.constants, fixture.report.constants);
    let workload = Workload::open(db, &mut tailstore_tpcc::random::seeded(3)).expect("workload");
    assert!(c_last_delta_ok(
        workload.load_constants().c_last,
        workload.run_constants().c_last
    ));

    check_items_and_stock(db, &tables);
    check_districts(db, &tables);
    check_customers(db, &tables);
    check_orders(db, &tables);
    every_condition_catches_its_violation(db, &tables);
    check_conditions(db, &AFTER_LOAD).expect("the database is restored");
    refuses_what_it_cannot_do(db, &workload);
    // A load cut short: the check refuses it, rather than report as violated a condition
    // on what was never loaded (it named condition 2 before).
    write(db, |txn| {
        let row = [Value::Text("load_complete".into()), Value::Int(0)];
        txn.update(&tables.meta, &row).expect("update");
    });
    let cut_short = check_conditions(db, &AFTER_LOAD);
    assert!(
        matches!(cut_short, Err(TpccError::NotLoaded(_))),
        "{cut_short:?}"
    );
}

fn refuses_what_it_cannot_do(db: &Database, workload: &Workload<'_>) {
    let again = tailstore_tpcc::load(db, 1, 1, false);
    assert!(
        matches!(again, Err(TpccError::AlreadyLoaded(_))),
        "{again:?}"
    );
    let load = workload.load_constants();
    let too_close = NuRandConstants {
        c_last: (load.c_last + 1) % 256,
        ..load
    };
    assert!(matches!(
        Workload::with_constants(db, too_close),
        Err(TpccError::InvalidArgument(_))
    ));
    let rng = || tailstore_tpcc::random::seeded(1);
    assert!(
        Terminal::new(workload, 2, 1, rng()).is_err(),
        "only one warehouse"
    );
    assert!(
        Terminal::new(workload, 1, 11, rng()).is_err(),
        "ten districts"
    );
    assert!(check_conditions(db, &[13]).is_err());
}

/// Applies `change` in one transaction.
fn write(db: &Database, change: impl FnOnce(&mut Transaction<'_>)) {
    let mut txn = db.begin();
    change(&mut txn);
    txn.commit().expect("commit");
}

/// Adds `delta` to a numeric column of the row under `key`.
fn bump(db: &Database, table: &Table, key: &[i64], column: usize, delta: i64) {
    write(db, |txn| {
        let key: Vec<Value> = key.iter().map(|&k| Value::Int(k)).collect();
        let mut row = txn.get(table, &key).expect("get").expect("row");
        row[column] = match row[column] {
            Value::Int(v) => Value::Int(v + delta),
            Value::Decimal(v) => Value::Decimal(v + delta),
            ref other => panic!("not a number: {other:?}"),
        };
        txn.update(table, &row).expect("update");
    });
}

/// Asserts that checking exactly `conditions` fails on the first of them.
fn violated(db: &Database, conditions: &[u8]) {
    for &condition in conditions {
        match check_conditions(db, &[condition]) {
            Err(TpccError::Inconsistent(v)) => {
                assert_eq!(v.condition, condition, "{v}");
                assert!(
                    v.to_string().contains("(w 1") || v.to_string().contains("warehouse 1"),
                    "{v}"
                );
            }
            other => panic!("condition {condition} should fail: {other:?}"),
        }
    }
}

fn every_condition_catches_its_violation(db: &Database, t: &Tables) {
    bump(db, &t.district, &[1, 1], d::D_YTD, 1);
    violated(db, &[1, 9]);
    bump(db, &t.district, &[1, 1], d::D_YTD, -1);

    bump(db, &t.district, &[1, 2], d::D_NEXT_O_ID, 1);
    violated(db, &[2]);
    bump(db, &t.district, &[1, 2], d::D_NEXT_O_ID, -1);

    // A new-order row missing from the middle of district 3's.
    let key = [Value::Int(1), Value::Int(3), Value::Int(2500)];
    write(db, |txn| {
        assert!(txn.delete(&t.new_order, &key).expect("delete"))
    });
    violated(db, &[3, 5]);
    write(db, |txn| {
        let row = [Value::Int(2500), Value::Int(3), Value::Int(1)];
        txn.insert(&t.new_order, &row).expect("insert");
    });

    bump(db, &t.orders, &[1, 4, 17], o::O_OL_CNT, 1);
    violated(db, &[4, 6]);
    bump(db, &t.orders, &[1, 4, 17], o::O_OL_CNT, -1);

    write(db, |txn| {
        let key = [1, 5, 2999, 1].map(Value::Int);
        let mut line = txn.get(&t.order_line, &key).expect("get").expect("line");
        line[ol::OL_DELIVERY_D] = Value::Timestamp(1);
        txn.update(&t.order_line, &line).expect("update");
    });
    violated(db, &[7]);
    write(db, |txn| {
        let key = [1, 5, 2999, 1].map(Value::Int);
        let mut line = txn.get(&t.order_line, &key).expect("get").expect("line");
        line[ol::OL_DELIVERY_D] = Value::Null;
        txn.update(&t.order_line, &line).expect("update");
    });

    // A payment recorded in HISTORY only.
    let mut payment = vec![Value::Int(1); h::COLUMNS];
    payment[h::H_ID] = Value::Int(1 << 40);
    payment[h::H_DATE] = Value::Timestamp(0);
    payment[h::H_AMOUNT] = Value::Decimal(500);
    payment[h::H_DATA] = Value::Text("x".into());
    write(db, |txn| txn.insert(&t.history, &payment).expect("insert"));
    violated(db, &[8, 9, 10]);
    write(db, |txn| {
        assert!(txn
            .delete(&t.history, &[Value::Int(1 << 40)])
            .expect("delete"))
    });

    bump(db, &t.customer, &[1, 6, 77], c::C_BALANCE, 5);
    violated(db, &[10, 12]);
    bump(db, &t.customer, &[1, 6, 77], c::C_BALANCE, -5);

    // One more delivered order in district 7, complete with its line.
    let order = [3001, 7, 1, 1, 0, 3, 1, 1].map(Value::Int);
    write(db, |txn| {
        let mut order = order.to_vec();
        order[o::O_ENTRY_D] = Value::Timestamp(0);
        txn.insert(&t.orders, &order).expect("insert order");
        let mut line = vec![Value::Int(1); ol::COLUMNS];
        line[ol::OL_O_ID] = Value::Int(3001);
        line[ol::OL_D_ID] = Value::Int(7);
        line[ol::OL_DELIVERY_D] = Value::Timestamp(0);
        line[ol::OL_AMOUNT] = Value::Decimal(0);
        line[ol::OL_DIST_INFO] = Value::Text("x".into());
        txn.insert(&t.order_line, &line).expect("insert line");
    });
    bump(db, &t.district, &[1, 7], d::D_NEXT_O_ID, 1);
    // Consistent but for condition 2 (the newest order is delivered, older ones are not).
    check_conditions(db, &[1, 3, 4, 5, 6, 7, 8, 9, 10, 12]).expect("a delivered order");
    violated(db, &[11]);
    bump(db, &t.district, &[1, 7], d::D_NEXT_O_ID, -1);
    write(db, |txn| {
        assert!(txn
            .delete(&t.order_line, &[1, 7, 3001, 1].map(Value::Int))
            .expect("delete"));
        assert!(txn
            .delete(&t.orders, &[1, 7, 3001].map(Value::Int))
            .expect("delete"));
    });
}

fn check_items_and_stock(db: &Database, t: &Tables) {
    let items = rows(db, &t.item, vec![]);
    assert_eq!(items.len(), 100_000);
    let original = items
        .iter()
        .filter(|r| text(&r[item::I_DATA]).contains("ORIGINAL"))
        .count();
    assert!(
        (9_000..=11_000).contains(&original),
        "{original} items ORIGINAL"
    );
    assert!(items
        .iter()
        .all(|r| (100..=10_000).contains(&int(&r[item::I_PRICE]))));
    let stock = rows(db, &t.stock, vec![Value::Int(1)]);
    assert_eq!(stock.len(), 100_000);
    assert!(stock
        .iter()
        .all(|r| (10..=100).contains(&int(&r[s::S_QUANTITY])) && int(&r[s::S_YTD]) == 0));
}

fn check_districts(db: &Database, t: &Tables) {
    let districts = rows(db, &t.district, vec![Value::Int(1)]);
    assert_eq!(districts.len(), 10);
    for row in &districts {
        assert_eq!(int(&row[d::D_NEXT_O_ID]), 3001);
        assert_eq!(int(&row[d::D_YTD]), 3_000_000);
        assert_eq!(text(&row[d::D_ZIP]).len(), 9);
    }
}

fn check_customers(db: &Database, t: &Tables) {
    let customers = rows(db, &t.customer, vec![Value::Int(1)]);
    assert_eq!(customers.len(), 30_000);
    let bad_credit = customers
        .iter()
        .filter(|r| text(&r[c::C_CREDIT]) == "BC")
        .count();
    assert!(
        (2_700..=3_300).contains(&bad_credit),
        "{bad_credit} of 30,000 BC"
    );
    let mut names: HashMap<String, usize> = HashMap::new();
    for row in &customers {
        let c_id = int(&row[c::C_ID]);
        if c_id <= 1000 {
            assert_eq!(
                text(&row[c::C_LAST]),
                last_name(c_id as u32 - 1),
                "customer {c_id} named in sequence"
            );
        }
        assert_eq!(text(&row[c::C_MIDDLE]), "OE");
        assert_eq!(int(&row[c::C_BALANCE]), -1_000);
        *names.entry(text(&row[c::C_LAST]).to_string()).or_default() += 1;
    }
    // NURand(255, 0, 999) for the other 2,000 per district: skewed, every name present.
    assert_eq!(names.len(), 1000);
    let most = names.values().copied().max().unwrap_or(0);
    assert!(most > 3 * 30, "the most frequent name has {most} customers");
}

fn check_orders(db: &Database, t: &Tables) {
    for d_id in 1..=10 {
        let key = vec![Value::Int(1), Value::Int(d_id)];
        let orders = rows(db, &t.orders, key.clone());
        assert_eq!(orders.len(), 3000);
        let mut customers: Vec<i64> = orders.iter().map(|r| int(&r[o::O_C_ID])).collect();
        customers.sort_unstable();
        assert_eq!(
            customers,
            (1..=3000).collect::<Vec<_>>(),
            "a permutation of the customers"
        );
        for row in &orders {
            let undelivered = int(&row[o::O_ID]) >= 2101;
            assert_eq!(row[o::O_CARRIER_ID].is_null(), undelivered);
            assert!((5..=15).contains(&int(&row[o::O_OL_CNT])));
        }
        let new_orders = rows(db, &t.new_order, key.clone());
        assert_eq!(new_orders.len(), 900);
        assert_eq!(int(&new_orders[0][no::NO_O_ID]), 2101);
        let lines = rows(db, &t.order_line, key);
        for row in &lines {
            let undelivered = int(&row[ol::OL_O_ID]) >= 2101;
            assert_eq!(row[ol::OL_DELIVERY_D].is_null(), undelivered);
            assert_eq!(int(&row[ol::OL_AMOUNT]) == 0, !undelivered);
        }
    }
}
