//! Stock-Level (clause 2.8): how many of the items in the district's last 20 orders are low
//! in stock. Read-only.

use std::collections::BTreeSet;
use std::ops::Bound;

use rand::Rng;
use tailstore_engine::{KeyRange, Transaction};
use tailstore_storage::ScanDirection;

use super::{must_get_columns, narrow, Decision};
use crate::error::Result;
use crate::row::{id, Fields};
use crate::schema::{district, order_line as ol, stock, Tables};

/// Orders examined: the last 20 of the district.
pub const RECENT_ORDERS: u32 = 20;

/// The terminal's input (clause 2.8.1). The district is the terminal's own, fixed for the
/// whole run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StockLevelInput {
    pub w_id: u32,
    pub d_id: u32,
    /// 10 ..= 20.
    pub threshold: i64,
}

impl StockLevelInput {
    /// Clause 2.8.1: threshold uniform in 10 ..= 20.
    pub fn generate<R: Rng + ?Sized>(rng: &mut R, w_id: u32, d_id: u32) -> StockLevelInput {
        StockLevelInput {
            w_id,
            d_id,
            threshold: rng.gen_range(10..=20),
        }
    }
}

/// What the terminal shows (clause 2.8.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StockLevelOutput {
    /// Distinct items of the last 20 orders whose `s_quantity` is below the threshold.
    pub low_stock: u32,
}

/// Clause 2.8.2.2: lines with `d_next_o_id - 20 <= ol_o_id < d_next_o_id`, their distinct
/// items, and those with `s_quantity < threshold` in the home warehouse.
pub fn stock_level(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    input: &StockLevelInput,
) -> Result<Decision<StockLevelOutput>> {
    let (w, d) = (id(input.w_id), id(input.d_id));
    let district_row = must_get_columns(
        txn,
        &tables.district,
        &[w.clone(), d.clone()],
        &[district::D_NEXT_O_ID],
    )?;
    let next = narrow(district_row.int(0)?)?;
    let first = next.saturating_sub(RECENT_ORDERS);
    let range = KeyRange::new(
        Bound::Included(vec![w.clone(), d.clone(), id(first)]),
        Bound::Excluded(vec![w.clone(), d, id(next)]),
    );
    // Only each line's item is decoded: a line also carries 24 characters of district info.
    let mut items = BTreeSet::new();
    let mut bad_line = None;
    let item_only = |column| column == ol::OL_I_ID;
    txn.scan_each(
        &tables.order_line,
        &range,
        ScanDirection::Ascending,
        usize::MAX,
        item_only,
        |line| {
            match line.int(ol::OL_I_ID) {
                Ok(item) => {
                    items.insert(item);
                }
                Err(err) => {
                    bad_line.get_or_insert(err);
                }
            }
            Ok(())
        },
    )?;
    if let Some(err) = bad_line {
        return Err(err);
    }
    let mut low_stock = 0;
    for i_id in items {
        let s = must_get_columns(
            txn,
            &tables.stock,
            &[w.clone(), tailstore_storage::Value::Int(i_id)],
            &[stock::S_QUANTITY],
        )?;
        if s.int(0)? < input.threshold {
            low_stock += 1;
        }
    }
    Ok(Decision::Commit(StockLevelOutput { low_stock }))
}
