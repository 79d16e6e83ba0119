//! Delivery (clause 2.7): deliver the oldest undelivered order of each of the warehouse's ten
//! districts, all in one transaction.

use rand::Rng;
use tailstore_engine::{ColumnChange, KeyRange, Transaction};
use tailstore_storage::{ScanDirection, Value};

use super::{must_get, narrow, Decision};
use crate::error::Result;
use crate::row::{id, now_micros, Fields};
use crate::schema::{
    customer, new_order as no, order_line as ol, orders, Tables, DISTRICTS_PER_WAREHOUSE,
};

/// The terminal's input (clause 2.7.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryInput {
    pub w_id: u32,
    /// 1 ..= 10.
    pub carrier_id: u32,
    /// `ol_delivery_d`, µs since the epoch.
    pub delivery_d: i64,
}

impl DeliveryInput {
    /// Clause 2.7.1: carrier uniform in 1 ..= 10.
    pub fn generate<R: Rng + ?Sized>(rng: &mut R, w_id: u32) -> DeliveryInput {
        DeliveryInput {
            w_id,
            carrier_id: rng.gen_range(1..=10),
            delivery_d: now_micros(),
        }
    }
}

/// What the deferred execution records (clause 2.7.2.2): the order delivered in each
/// district, or none where the district had no undelivered order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryOutput {
    /// (d_id, o_id) of every order delivered.
    pub delivered: Vec<(u32, u32)>,
    /// Districts skipped for want of a NEW-ORDER row.
    pub skipped: u32,
}

/// Clause 2.7.4.2, for each district in turn.
pub fn delivery(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    input: &DeliveryInput,
) -> Result<Decision<DeliveryOutput>> {
    let mut output = DeliveryOutput {
        delivered: Vec::new(),
        skipped: 0,
    };
    for d_id in 1..=DISTRICTS_PER_WAREHOUSE {
        match deliver_district(txn, tables, input, d_id)? {
            Some(o_id) => output.delivered.push((d_id, o_id)),
            None => output.skipped += 1,
        }
    }
    Ok(Decision::Commit(output))
}

/// Delivers the district's oldest undelivered order; `None` if there is none.
fn deliver_district(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    input: &DeliveryInput,
    d_id: u32,
) -> Result<Option<u32>> {
    let (w, d) = (id(input.w_id), id(d_id));
    // The smallest no_o_id: an ascending prefix scan, limit 1.
    let oldest = txn.scan(
        &tables.new_order,
        &KeyRange::prefix(vec![w.clone(), d.clone()]),
        ScanDirection::Ascending,
        1,
    )?;
    let Some(new_order) = oldest.first() else {
        return Ok(None);
    };
    let o_id = narrow(new_order.int(no::NO_O_ID)?)?;
    let order_key = [w.clone(), d.clone(), id(o_id)];
    txn.delete(&tables.new_order, &order_key)?;

    let mut order = must_get(txn, &tables.orders, &order_key)?;
    let c_id = narrow(order.int(orders::O_C_ID)?)?;
    order[orders::O_CARRIER_ID] = id(input.carrier_id);
    txn.update(&tables.orders, &order)?;

    let amount = deliver_lines(txn, tables, &order_key, input.delivery_d)?;
    // Added to at commit: no conflict with a Payment by the customer at the same time.
    txn.update_columns(
        &tables.customer,
        &[w, d, id(c_id)],
        &[
            (customer::C_BALANCE, ColumnChange::Add(amount)),
            (customer::C_DELIVERY_CNT, ColumnChange::Add(1)),
        ],
    )?;
    Ok(Some(o_id))
}

/// Sets `ol_delivery_d` on every line of the order; returns the sum of `ol_amount`.
fn deliver_lines(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    order_key: &[Value],
    delivery_d: i64,
) -> Result<i64> {
    let lines = txn.scan(
        &tables.order_line,
        &KeyRange::prefix(order_key.to_vec()),
        ScanDirection::Ascending,
        usize::MAX,
    )?;
    let mut amount = 0;
    for mut line in lines {
        amount += line.decimal(ol::OL_AMOUNT)?;
        line[ol::OL_DELIVERY_D] = Value::Timestamp(delivery_d);
        txn.update(&tables.order_line, &line)?;
    }
    Ok(amount)
}
