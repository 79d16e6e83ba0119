//! Payment (clause 2.5): a customer pays, through their own or a remote warehouse.

use rand::Rng;
use tailstore_engine::Transaction;
use tailstore_storage::Value;

use super::{
    customer_id, format_cents, must_get_columns, select_customer, CustomerSelector, Decision,
};
use crate::error::Result;
use crate::random::{other_id, NuRandConstants};
use crate::row::{build, id, now_micros, Fields};
use crate::schema::{customer, district, history, warehouse, Tables, DISTRICTS_PER_WAREHOUSE};

/// `c_data` never grows beyond this (clause 2.5.2.2).
const C_DATA_MAX: usize = 500;

/// The terminal's input (clause 2.5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentInput {
    pub w_id: u32,
    pub d_id: u32,
    /// The customer's warehouse and district (remote for 15% of payments).
    pub c_w_id: u32,
    pub c_d_id: u32,
    pub customer: CustomerSelector,
    /// `h_amount` in cents, 1.00 ..= 5,000.00.
    pub amount: i64,
    /// `h_date`, µs since the epoch.
    pub date: i64,
}

impl PaymentInput {
    /// Clause 2.5.1: district uniform; 85% of customers from the home district, 15% from a
    /// random district of a remote warehouse (home if there is only one); customer by last
    /// name 60%, by id 40%; amount uniform in 1.00 ..= 5,000.00.
    pub fn generate<R: Rng + ?Sized>(
        rng: &mut R,
        w_id: u32,
        warehouses: u32,
        c: &NuRandConstants,
    ) -> PaymentInput {
        let d_id = rng.gen_range(1..=DISTRICTS_PER_WAREHOUSE);
        let (c_w_id, c_d_id) = if rng.gen_range(1..=100) <= 85 || warehouses == 1 {
            (w_id, d_id)
        } else {
            (
                other_id(rng, 1, warehouses, w_id),
                rng.gen_range(1..=DISTRICTS_PER_WAREHOUSE),
            )
        };
        PaymentInput {
            w_id,
            d_id,
            c_w_id,
            c_d_id,
            customer: CustomerSelector::generate(rng, c),
            amount: rng.gen_range(100..=500_000),
            date: now_micros(),
        }
    }

    /// Whether the customer belongs to another warehouse.
    pub fn is_remote(&self) -> bool {
        self.c_w_id != self.w_id
    }
}

/// What the terminal shows after a Payment (clause 2.5.3), abridged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentOutput {
    pub c_id: u32,
    pub c_credit: String,
    /// `c_balance` after the payment, in cents.
    pub c_balance: i64,
}

/// Clause 2.5.2.2. `h_id` is the new history row's surrogate key
/// ([`Workload::next_history_id`](crate::Workload::next_history_id)).
pub fn payment(
    txn: &mut Transaction<'_>,
    tables: &Tables,
    input: &PaymentInput,
    h_id: i64,
) -> Result<Decision<PaymentOutput>> {
    let (w, d) = (id(input.w_id), id(input.d_id));
    // The name and address, read as columns, and the year-to-date total, added to at commit
    // without reading it: concurrent Payments through one warehouse or district do not
    // conflict, nor do New-Orders reading its tax rate.
    let warehouse_key = std::slice::from_ref(&w);
    let warehouse_address = must_get_columns(
        txn,
        &tables.warehouse,
        warehouse_key,
        &[
            warehouse::W_NAME,
            warehouse::W_STREET_1,
            warehouse::W_STREET_2,
            warehouse::W_CITY,
            warehouse::W_STATE,
            warehouse::W_ZIP,
        ],
    )?;
    txn.add(
        &tables.warehouse,
        warehouse_key,
        warehouse::W_YTD,
        input.amount,
    )?;
    let district_key = [w, d];
    let district_address = must_get_columns(
        txn,
        &tables.district,
        &district_key,
        &[
            district::D_NAME,
            district::D_STREET_1,
            district::D_STREET_2,
            district::D_CITY,
            district::D_STATE,
            district::D_ZIP,
        ],
    )?;
    txn.add(
        &tables.district,
        &district_key,
        district::D_YTD,
        input.amount,
    )?;

    let mut customer_row =
        select_customer(txn, tables, input.c_w_id, input.c_d_id, &input.customer)?;
    let c_id = customer_id(&customer_row)?;
    let c_balance = pay(&mut customer_row, input, c_id)?;
    txn.update(&tables.customer, &customer_row)?;

    let h_data = format!(
        "{}    {}",
        warehouse_address.text(0)?,
        district_address.text(0)?
    );
    let history_row = build(
        history::COLUMNS,
        [
            (history::H_ID, Value::Int(h_id)),
            (history::H_C_ID, id(c_id)),
            (history::H_C_D_ID, id(input.c_d_id)),
            (history::H_C_W_ID, id(input.c_w_id)),
            (history::H_D_ID, id(input.d_id)),
            (history::H_W_ID, id(input.w_id)),
            (history::H_DATE, Value::Timestamp(input.date)),
            (history::H_AMOUNT, Value::Decimal(input.amount)),
            (history::H_DATA, Value::Text(h_data)),
        ],
    );
    txn.insert(&tables.history, &history_row)?;
    Ok(Decision::Commit(PaymentOutput {
        c_id,
        c_credit: customer_row.text(customer::C_CREDIT)?.to_string(),
        c_balance,
    }))
}

/// The customer's side of the payment; returns the new balance.
fn pay(customer_row: &mut [Value], input: &PaymentInput, c_id: u32) -> Result<i64> {
    let balance = customer_row.decimal(customer::C_BALANCE)? - input.amount;
    let ytd = customer_row.decimal(customer::C_YTD_PAYMENT)? + input.amount;
    let count = customer_row.int(customer::C_PAYMENT_CNT)? + 1;
    customer_row[customer::C_BALANCE] = Value::Decimal(balance);
    customer_row[customer::C_YTD_PAYMENT] = Value::Decimal(ytd);
    customer_row[customer::C_PAYMENT_CNT] = Value::Int(count);
    // Bad credit: the payment is noted at the left of c_data, which keeps 500 characters.
    if customer_row.text(customer::C_CREDIT)?.starts_with("BC") {
        let note = format!(
            "{} {} {} {} {} {} ",
            c_id,
            input.c_d_id,
            input.c_w_id,
            input.d_id,
            input.w_id,
            format_cents(input.amount)
        );
        let data: String = note
            .chars()
            .chain(customer_row.text(customer::C_DATA)?.chars())
            .take(C_DATA_MAX)
            .collect();
        customer_row[customer::C_DATA] = Value::Text(data);
    }
    Ok(balance)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::seeded;

    #[test]
    fn inputs_follow_clause_2_5_1() {
        let c = NuRandConstants {
            c_last: 10,
            c_id: 300,
            ol_i_id: 4000,
        };
        let mut rng = seeded(21);
        let (mut remote, mut by_name) = (0, 0);
        let draws = 100_000;
        for _ in 0..draws {
            let input = PaymentInput::generate(&mut rng, 3, 4, &c);
            assert!((100..=500_000).contains(&input.amount));
            assert!((1..=10).contains(&input.d_id) && (1..=10).contains(&input.c_d_id));
            if input.is_remote() {
                remote += 1;
                assert_ne!(input.c_w_id, 3);
            } else {
                assert_eq!(input.c_d_id, input.d_id);
            }
            by_name += usize::from(input.customer.by_name());
        }
        let remote_share = remote as f64 / draws as f64;
        let name_share = by_name as f64 / draws as f64;
        assert!((0.145..0.155).contains(&remote_share), "{remote_share}");
        assert!((0.595..0.605).contains(&name_share), "{name_share}");
        for _ in 0..10_000 {
            assert!(!PaymentInput::generate(&mut rng, 1, 1, &c).is_remote());
        }
    }

    #[test]
    fn bad_credit_payment_is_noted_in_c_data() {
        let mut row = vec![Value::Null; customer::COLUMNS];
        row[customer::C_BALANCE] = Value::Decimal(-1_000);
        row[customer::C_YTD_PAYMENT] = Value::Decimal(1_000);
        row[customer::C_PAYMENT_CNT] = Value::Int(1);
        row[customer::C_CREDIT] = Value::Text("BC".into());
        row[customer::C_DATA] = Value::Text("x".repeat(C_DATA_MAX));
        let input = PaymentInput {
            w_id: 1,
            d_id: 2,
            c_w_id: 3,
            c_d_id: 4,
            customer: CustomerSelector::Id(5),
            amount: 12_345,
            date: 0,
        };
        assert_eq!(pay(&mut row, &input, 5).ok(), Some(-13_345));
        let data = row.text(customer::C_DATA).unwrap_or_default();
        assert!(data.starts_with("5 4 3 2 1 123.45 xxx"), "{data}");
        assert_eq!(data.len(), C_DATA_MAX);
        assert_eq!(row[customer::C_PAYMENT_CNT], Value::Int(2));
        assert_eq!(row[customer::C_YTD_PAYMENT], Value::Decimal(13_345));
    }
}
