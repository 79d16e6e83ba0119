//! Order-Status (clause 2.6): a customer's balance and their most recent order. Read-only.

use rand::Rng;
use tailstore_engine::{KeyRange, Transaction};
use tailstore_storage::ScanDirection;

use super::{customer_id, narrow, select_customer, show_key, CustomerSelector, Decision};
use crate::error::{Result, TpccError};
use crate::random::NuRandConstants;
use crate::row::{id, Fields};
use crate::schema::{
    customer, order_line as ol, orders, Tables, DISTRICTS_PER_WAREHOUSE, ORDERS_BY_CUSTOMER,
};

/// The terminal's input (clause 2.6.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusInput {
    pub w_id: u32,
    pub d_id: u32,
    pub customer: CustomerSelector,
}

impl OrderStatusInput {
    /// Clause 2.6.1: district uniform; customer by last name 60%, by id 40%.
    pub fn generate<R: Rng + ?Sized>(rng: &mut R, w_id: u32, c: &NuRandConstants) -> Self {
        OrderStatusInput {
            w_id,
            d_id: rng.gen_range(1..=DISTRICTS_PER_WAREHOUSE),
            customer: CustomerSelector::generate(rng, c),
        }
    }
}

/// One line of the order, as the terminal shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusLine {
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: i64,
    /// Cents.
    pub amount: i64,
    pub delivery_d: Option<i64>,
}

/// What the terminal shows (clause 2.6.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusOutput {
    pub c_id: u32,
    pub c_first: String,
    pub c_middle: String,
    pub c_last: String,
    /// Cents.
    pub c_balance: i64,
    pub o_id: u32,
    pub o_entry_d: Option<i64>,
    pub o_carrier_id: Option<i64>,
    pub lines: Vec<StatusLine>,
}

/// Clause 2.6.2.2: the customer, their order with the largest `o_id` (through
/// `orders_by_customer`, descending, limit 1), and its lines.
pub fn order_status(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    input: &OrderStatusInput,
) -> Result<Decision<OrderStatusOutput>> {
    let c = select_customer(txn, tables, input.w_id, input.d_id, &input.customer)?;
    let c_id = customer_id(&c)?;
    let prefix = vec![id(input.w_id), id(input.d_id), id(c_id)];
    let last = txn.scan_index(
        &tables.orders,
        ORDERS_BY_CUSTOMER,
        &KeyRange::prefix(prefix.clone()),
        ScanDirection::Descending,
        1,
    )?;
    let order = last.first().ok_or_else(|| {
        TpccError::MissingRow(format!("an order of customer {}", show_key(&prefix)))
    })?;
    let o_id = narrow(order.int(orders::O_ID)?)?;
    let line_rows = txn.scan(
        &tables.order_line,
        &KeyRange::prefix(vec![id(input.w_id), id(input.d_id), id(o_id)]),
        ScanDirection::Ascending,
        usize::MAX,
    )?;
    let lines = line_rows
        .iter()
        .map(|row| {
            Ok(StatusLine {
                i_id: narrow(row.int(ol::OL_I_ID)?)?,
                supply_w_id: narrow(row.int(ol::OL_SUPPLY_W_ID)?)?,
                quantity: row.int(ol::OL_QUANTITY)?,
                amount: row.decimal(ol::OL_AMOUNT)?,
                delivery_d: row.timestamp_or_null(ol::OL_DELIVERY_D)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Decision::Commit(OrderStatusOutput {
        c_id,
        c_first: c.text(customer::C_FIRST)?.to_string(),
        c_middle: c.text(customer::C_MIDDLE)?.to_string(),
        c_last: c.text(customer::C_LAST)?.to_string(),
        c_balance: c.decimal(customer::C_BALANCE)?,
        o_id,
        o_entry_d: order.timestamp_or_null(orders::O_ENTRY_D)?,
        o_carrier_id: order.int_or_null(orders::O_CARRIER_ID)?,
        lines,
    }))
}
