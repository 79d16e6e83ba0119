//! New-Order (clause 2.4): enter an order of 5–15 lines, taking the items from stock.

use rand::Rng;
use tailstore_engine::{ColumnChange, Transaction};
use tailstore_storage::Value;

use super::{must_get, must_get_columns, narrow, Decision};
use crate::error::Result;
use crate::random::{other_id, random_customer_id, random_item_id, NuRandConstants, ORIGINAL};
use crate::row::{build, id, now_micros, Fields};
use crate::schema::{
    customer, district, item, new_order as no, order_line as ol, orders, stock, stock_dist_column,
    warehouse, Tables, DISTRICTS_PER_WAREHOUSE, ITEMS,
};

/// The item id of the 1% of orders that roll back: no item has it (clause 2.4.1.4).
pub const UNUSED_ITEM_ID: u32 = ITEMS + 1;

/// One line of the order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineInput {
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: u32,
}

/// The terminal's input (clause 2.4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrderInput {
    pub w_id: u32,
    pub d_id: u32,
    pub c_id: u32,
    pub lines: Vec<LineInput>,
    /// `o_entry_d`, µs since the epoch.
    pub entry_d: i64,
}

impl NewOrderInput {
    /// Clause 2.4.1: district uniform; customer `NURand(1023, 1, 3000)`; 5–15 lines of
    /// item `NURand(8191, 1, 100000)` and quantity 1–10; in 1% of orders the last item id
    /// is unused (the order rolls back); each line's supplier is the home warehouse, or a
    /// remote one for 1% of lines when there are several warehouses.
    pub fn generate<R: Rng + ?Sized>(
        rng: &mut R,
        w_id: u32,
        warehouses: u32,
        c: &NuRandConstants,
    ) -> NewOrderInput {
        let d_id = rng.gen_range(1..=DISTRICTS_PER_WAREHOUSE);
        let c_id = random_customer_id(rng, c);
        let ol_cnt = rng.gen_range(5..=15);
        let rollback = rng.gen_range(1..=100) == 1;
        let lines = (0..ol_cnt)
            .map(|n| {
                let i_id = if rollback && n == ol_cnt - 1 {
                    UNUSED_ITEM_ID
                } else {
                    random_item_id(rng, c)
                };
                let remote = warehouses > 1 && rng.gen_range(1..=100) == 1;
                LineInput {
                    i_id,
                    supply_w_id: if remote {
                        other_id(rng, 1, warehouses, w_id)
                    } else {
                        w_id
                    },
                    quantity: rng.gen_range(1..=10),
                }
            })
            .collect();
        NewOrderInput {
            w_id,
            d_id,
            c_id,
            lines,
            entry_d: now_micros(),
        }
    }

    /// Whether the order names the unused item (and so must roll back).
    pub fn rolls_back(&self) -> bool {
        self.lines.iter().any(|l| l.i_id == UNUSED_ITEM_ID)
    }

    /// Lines supplied by another warehouse.
    pub fn remote_lines(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| l.supply_w_id != self.w_id)
            .count()
    }
}

/// One line as the terminal shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineOutput {
    pub i_id: u32,
    pub supply_w_id: u32,
    pub quantity: u32,
    /// `s_quantity` after the update.
    pub stock_quantity: i64,
    /// `i_price` and `ol_amount`, in cents.
    pub price: i64,
    pub amount: i64,
    /// 'B' (brand) if both `i_data` and `s_data` hold "ORIGINAL", else 'G' (generic).
    pub brand_generic: char,
}

/// What the terminal shows after a New-Order (clause 2.4.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrderOutput {
    pub o_id: u32,
    pub all_local: bool,
    /// `sum(ol_amount) * (1 - c_discount) * (1 + w_tax + d_tax)`, in cents.
    pub total_amount: i64,
    pub lines: Vec<LineOutput>,
}

/// Clause 2.4.2.2. Rolls back when an item id is unused, after doing the work that comes
/// before it in the clause's order (the warehouse, district and customer, the order and the
/// lines before it), as clause 2.4.2.3 requires of the 1% of orders that roll back.
///
/// The lines' items and stock come first and the district's next order id last, so that the
/// stretch in which another New-Order of the same district conflicts with this one (from
/// reading `d_next_o_id` to the commit) is as short as it can be. Under serializable
/// isolation the order of a transaction's reads and writes is not observable: the output
/// and the changes are those of the clause's order.
pub fn new_order(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    input: &NewOrderInput,
) -> Result<Decision<NewOrderOutput>> {
    let mut supplied = Vec::with_capacity(input.lines.len());
    for line in &input.lines {
        let Some(item_row) = txn.get(&tables.item, &[id(line.i_id)])? else {
            place_order(txn, tables, input, supplied)?;
            return Ok(Decision::Rollback);
        };
        supplied.push(supply_line(txn, tables, input, line, &item_row)?);
    }
    place_order(txn, tables, input, supplied).map(Decision::Commit)
}

/// The order of `input` whose first lines are `supplied`: the warehouse's, district's and
/// customer's part, the ORDER and NEW-ORDER rows, and a line for each supplied one.
fn place_order(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    input: &NewOrderInput,
    supplied: Vec<(LineOutput, Value)>,
) -> Result<NewOrderOutput> {
    let (w, d) = (id(input.w_id), id(input.d_id));
    // Column reads and changes: Payment's additions to `w_ytd` and `d_ytd` in the same rows
    // do not conflict with them.
    let w_tax = must_get_columns(
        txn,
        &tables.warehouse,
        std::slice::from_ref(&w),
        &[warehouse::W_TAX],
    )?
    .decimal(0)?;
    let customer_key = [w.clone(), d.clone(), id(input.c_id)];
    let c_discount = must_get_columns(
        txn,
        &tables.customer,
        &customer_key,
        &[customer::C_DISCOUNT, customer::C_LAST, customer::C_CREDIT],
    )?
    .decimal(0)?;
    let district_key = [w, d];
    let district = must_get_columns(
        txn,
        &tables.district,
        &district_key,
        &[district::D_TAX, district::D_NEXT_O_ID],
    )?;
    let d_tax = district.decimal(0)?;
    let o_id = narrow(district.int(1)?)?;
    let next = (district::D_NEXT_O_ID, ColumnChange::Set(id(o_id + 1)));
    txn.update_columns(&tables.district, &district_key, &[next])?;
    insert_order(txn, tables, input, o_id)?;
    let mut lines = Vec::with_capacity(supplied.len());
    for (number, (line, (output, dist_info))) in (1..).zip(input.lines.iter().zip(supplied)) {
        insert_order_line(txn, tables, input, o_id, number, line, &output, dist_info)?;
        lines.push(output);
    }
    let sum: i64 = lines.iter().map(|l| l.amount).sum();
    Ok(NewOrderOutput {
        o_id,
        all_local: input.remote_lines() == 0,
        total_amount: total_amount(sum, c_discount, w_tax, d_tax),
        lines,
    })
}

/// The ORDER row and its NEW-ORDER row.
fn insert_order(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    input: &NewOrderInput,
    o_id: u32,
) -> Result<()> {
    let all_local = i64::from(input.remote_lines() == 0);
    let order = build(
        orders::COLUMNS,
        [
            (orders::O_ID, id(o_id)),
            (orders::O_D_ID, id(input.d_id)),
            (orders::O_W_ID, id(input.w_id)),
            (orders::O_C_ID, id(input.c_id)),
            (orders::O_ENTRY_D, Value::Timestamp(input.entry_d)),
            (orders::O_CARRIER_ID, Value::Null),
            (orders::O_OL_CNT, Value::Int(input.lines.len() as i64)),
            (orders::O_ALL_LOCAL, Value::Int(all_local)),
        ],
    );
    txn.insert(&tables.orders, &order)?;
    let new_order = build(
        no::COLUMNS,
        [
            (no::NO_O_ID, id(o_id)),
            (no::NO_D_ID, id(input.d_id)),
            (no::NO_W_ID, id(input.w_id)),
        ],
    );
    txn.insert(&tables.new_order, &new_order)?;
    Ok(())
}

/// Takes one line's quantity from stock; returns the line's output and its `s_dist_xx`.
fn supply_line(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    input: &NewOrderInput,
    line: &LineInput,
    item_row: &[Value],
) -> Result<(LineOutput, Value)> {
    let mut stock_row = must_get(txn, &tables.stock, &[id(line.supply_w_id), id(line.i_id)])?;
    let stock_quantity = take_from_stock(&mut stock_row, line, input.w_id)?;
    txn.update(&tables.stock, &stock_row)?;
    let price = item_row.decimal(item::I_PRICE)?;
    let original = item_row.text(item::I_DATA)?.contains(ORIGINAL)
        && stock_row.text(stock::S_DATA)?.contains(ORIGINAL);
    let dist_info = stock_row[stock_dist_column(input.d_id)?].clone();
    let output = LineOutput {
        i_id: line.i_id,
        supply_w_id: line.supply_w_id,
        quantity: line.quantity,
        stock_quantity,
        price,
        amount: price * i64::from(line.quantity),
        brand_generic: if original { 'B' } else { 'G' },
    };
    Ok((output, dist_info))
}

/// The ORDER-LINE row of a supplied line.
#[allow(clippy::too_many_arguments)]
fn insert_order_line(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    input: &NewOrderInput,
    o_id: u32,
    number: u32,
    line: &LineInput,
    output: &LineOutput,
    dist_info: Value,
) -> Result<()> {
    let order_line = build(
        ol::COLUMNS,
        [
            (ol::OL_O_ID, id(o_id)),
            (ol::OL_D_ID, id(input.d_id)),
            (ol::OL_W_ID, id(input.w_id)),
            (ol::OL_NUMBER, id(number)),
            (ol::OL_I_ID, id(line.i_id)),
            (ol::OL_SUPPLY_W_ID, id(line.supply_w_id)),
            (ol::OL_DELIVERY_D, Value::Null),
            (ol::OL_QUANTITY, id(line.quantity)),
            (ol::OL_AMOUNT, Value::Decimal(output.amount)),
            (ol::OL_DIST_INFO, dist_info),
        ],
    );
    txn.insert(&tables.order_line, &order_line)?;
    Ok(())
}

/// Clause 2.4.2.2's stock update; returns the new `s_quantity`.
fn take_from_stock(stock_row: &mut [Value], line: &LineInput, home_w_id: u32) -> Result<i64> {
    let ordered = i64::from(line.quantity);
    let on_hand = stock_row.int(stock::S_QUANTITY)?;
    // Restock by 91 when fewer than 10 would remain.
    let left = if on_hand >= ordered + 10 {
        on_hand - ordered
    } else {
        on_hand - ordered + 91
    };
    stock_row[stock::S_QUANTITY] = Value::Int(left);
    stock_row[stock::S_YTD] = Value::Int(stock_row.int(stock::S_YTD)? + ordered);
    stock_row[stock::S_ORDER_CNT] = Value::Int(stock_row.int(stock::S_ORDER_CNT)? + 1);
    if line.supply_w_id != home_w_id {
        stock_row[stock::S_REMOTE_CNT] = Value::Int(stock_row.int(stock::S_REMOTE_CNT)? + 1);
    }
    Ok(left)
}

/// `sum * (1 - discount) * (1 + w_tax + d_tax)` in cents, rounded half up; the rates have
/// four decimals.
fn total_amount(sum_cents: i64, discount: i64, w_tax: i64, d_tax: i64) -> i64 {
    let scale = 10_000i128;
    let product = i128::from(sum_cents)
        * (scale - i128::from(discount))
        * (scale + i128::from(w_tax + d_tax));
    let total = (product + scale * scale / 2) / (scale * scale);
    i64::try_from(total).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::seeded;

    fn constants() -> NuRandConstants {
        NuRandConstants {
            c_last: 10,
            c_id: 300,
            ol_i_id: 4000,
        }
    }

    #[test]
    fn inputs_follow_clause_2_4_1() {
        let mut rng = seeded(11);
        let (mut orders, mut rollbacks, mut lines, mut remote) = (0, 0, 0, 0);
        for _ in 0..100_000 {
            let input = NewOrderInput::generate(&mut rng, 2, 5, &constants());
            assert!((5..=15).contains(&input.lines.len()));
            assert!((1..=10).contains(&input.d_id));
            assert!((1..=3000).contains(&input.c_id));
            for (n, line) in input.lines.iter().enumerate() {
                assert!((1..=10).contains(&line.quantity));
                assert!((1..=5).contains(&line.supply_w_id));
                if line.i_id == UNUSED_ITEM_ID {
                    assert_eq!(n, input.lines.len() - 1, "only the last line");
                } else {
                    assert!((1..=ITEMS).contains(&line.i_id));
                }
            }
            orders += 1;
            rollbacks += usize::from(input.rolls_back());
            lines += input.lines.len();
            remote += input.remote_lines();
        }
        let rollback_share = rollbacks as f64 / orders as f64;
        let remote_share = remote as f64 / lines as f64;
        assert!((0.009..0.011).contains(&rollback_share), "{rollback_share}");
        assert!((0.009..0.011).contains(&remote_share), "{remote_share}");
        let mean_lines = lines as f64 / orders as f64;
        assert!((9.9..10.1).contains(&mean_lines), "{mean_lines}");
    }

    #[test]
    fn one_warehouse_means_no_remote_lines() {
        let mut rng = seeded(12);
        for _ in 0..10_000 {
            let input = NewOrderInput::generate(&mut rng, 1, 1, &constants());
            assert_eq!(input.remote_lines(), 0);
        }
    }

    #[test]
    fn stock_is_restocked_below_ten() {
        let mut row = vec![Value::Null; stock::COLUMNS];
        for (c, v) in [
            (stock::S_QUANTITY, 15),
            (stock::S_YTD, 0),
            (stock::S_ORDER_CNT, 0),
            (stock::S_REMOTE_CNT, 0),
        ] {
            row[c] = Value::Int(v);
        }
        let line = |quantity, supply_w_id| LineInput {
            i_id: 1,
            supply_w_id,
            quantity,
        };
        assert_eq!(take_from_stock(&mut row, &line(5, 1), 1).ok(), Some(10));
        assert_eq!(take_from_stock(&mut row, &line(3, 2), 1).ok(), Some(98));
        assert_eq!(row[stock::S_YTD], Value::Int(8));
        assert_eq!(row[stock::S_ORDER_CNT], Value::Int(2));
        assert_eq!(row[stock::S_REMOTE_CNT], Value::Int(1));
    }

    #[test]
    fn total_amount_applies_discount_and_taxes() {
        // 100.00 with 10% discount and 5% + 5% tax = 99.00.
        assert_eq!(total_amount(10_000, 1_000, 500, 500), 9_900);
        assert_eq!(total_amount(0, 1_000, 500, 500), 0);
        // 1.01 * 0.5 * 1.0 = 0.505, rounded half up.
        assert_eq!(total_amount(101, 5_000, 0, 0), 51);
    }
}
