//! The nine TPC-C tables (specification 5.11, clause 1.3), their keys and the indexes the
//! transactions need, plus `tpcc_meta`, the kit's own table of load parameters.
//!
//! Every column of the specification is here, in the specification's order, named as there
//! (lower case). Types map as follows:
//!
//! | specification            | column type                          |
//! |--------------------------|--------------------------------------|
//! | `N unique IDs`           | `INT32`                              |
//! | `numeric(m)` (integers)  | `INT32` (holds at least the m digits)|
//! | `signed numeric(m, n)`   | `DECIMAL(m, n)`                      |
//! | `variable text, size N`  | `VARCHAR(N)`                         |
//! | `fixed text, size N`     | `CHAR(N)`                            |
//! | `date and time`          | `TIMESTAMP` (µs since the epoch)     |
//!
//! Columns the specification allows to be null (`o_carrier_id`, `ol_delivery_d`) are
//! nullable; all others are `NOT NULL`.
//!
//! Keys: the primary keys of clause 1.3 (`ORDER` is called `orders`, a reserved word in SQL).
//! HISTORY has no primary key in the specification; this kit adds the surrogate column
//! `h_id INT64` as its primary key. The load numbers the initial rows 1 ..= 30,000 × W (one
//! per customer, in (warehouse, district, customer) order) and the run allocates the next ids
//! from a counter that starts after the largest one stored (see
//! [`Workload`](crate::Workload)), so history rows are appended at the end of the tree and
//! no two terminals ever write the same key.
//!
//! Secondary indexes:
//! * `customer_by_name` on `(c_w_id, c_d_id, c_last, c_first)`: Payment and Order-Status
//!   select customers by last name, sorted by first name;
//! * `orders_by_customer` on `(o_w_id, o_d_id, o_c_id, o_id)`: Order-Status finds a
//!   customer's most recent order with a descending scan, limit 1.
//!
//! Column positions are constants in one module per table (`customer::C_BALANCE`, …),
//! generated with the column list so the two cannot disagree.

use tailstore_engine::{Database, EngineError, Table};
use tailstore_storage::{Column, ColumnType, IndexDef, Schema};

use crate::error::{Result, TpccError};

/// Cardinalities of the initial population (clause 1.2 and 4.3.3.1).
pub const ITEMS: u32 = 100_000;
pub const STOCK_PER_WAREHOUSE: u32 = ITEMS;
pub const DISTRICTS_PER_WAREHOUSE: u32 = 10;
pub const CUSTOMERS_PER_DISTRICT: u32 = 3_000;
pub const ORDERS_PER_DISTRICT: u32 = 3_000;
/// The last 900 orders of each district are undelivered: they have NEW-ORDER rows.
pub const NEW_ORDERS_PER_DISTRICT: u32 = 900;
/// The first order id that is undelivered after the load (3,000 - 900 + 1).
pub const FIRST_UNDELIVERED_ORDER: u32 = ORDERS_PER_DISTRICT - NEW_ORDERS_PER_DISTRICT + 1;
/// The customers whose last names are their sequence number (the rest use NURand).
pub const CUSTOMERS_NAMED_IN_SEQUENCE: u32 = 1_000;

/// Names of the tables, as created.
pub const WAREHOUSE: &str = "warehouse";
pub const DISTRICT: &str = "district";
pub const CUSTOMER: &str = "customer";
pub const HISTORY: &str = "history";
pub const NEW_ORDER: &str = "new_order";
pub const ORDERS: &str = "orders";
pub const ORDER_LINE: &str = "order_line";
pub const ITEM: &str = "item";
pub const STOCK: &str = "stock";
/// The kit's table of load parameters (warehouse count, NURand load constants, completion).
pub const META: &str = "tpcc_meta";

/// The index of customers by last name.
pub const CUSTOMER_BY_NAME: &str = "customer_by_name";
/// The index of orders by customer.
pub const ORDERS_BY_CUSTOMER: &str = "orders_by_customer";

const ID: ColumnType = ColumnType::Int32;
const COUNT: ColumnType = ColumnType::Int32;
const TIME: ColumnType = ColumnType::Timestamp;

const fn dec(precision: u8, scale: u8) -> ColumnType {
    ColumnType::Decimal { precision, scale }
}

const fn varchar(n: u32) -> ColumnType {
    ColumnType::Varchar(n)
}

const fn fixed(n: u32) -> ColumnType {
    ColumnType::Char(n)
}

/// Declares one table's columns: a module with a position constant per column, `COLUMNS`
/// (the count) and `columns()` (the list, in the same order).
macro_rules! columns {
    ($(#[$doc:meta])* $table:ident { $($column:ident: $ty:expr $(, $null:ident)?;)* }) => {
        $(#[$doc])*
        pub mod $table {
            use super::*;

            #[allow(non_camel_case_types, clippy::upper_case_acronyms, dead_code)]
            #[repr(usize)]
            enum Position { $($column,)* END }

            $(pub const $column: usize = Position::$column as usize;)*
            /// The number of columns.
            pub const COLUMNS: usize = Position::END as usize;

            /// The columns in table order.
            pub fn columns() -> Vec<Column> {
                vec![$(column(stringify!($column), $ty, nullable!($($null)?)),)*]
            }
        }
    };
}

macro_rules! nullable {
    () => {
        false
    };
    (null) => {
        true
    };
}

fn column(upper_name: &str, ty: ColumnType, nullable: bool) -> Column {
    let name = upper_name.to_ascii_lowercase();
    if nullable {
        Column::nullable(name, ty)
    } else {
        Column::new(name, ty)
    }
}

columns!(
    /// WAREHOUSE (clause 1.3.1).
    warehouse {
        W_ID: ID;
        W_NAME: varchar(10);
        W_STREET_1: varchar(20);
        W_STREET_2: varchar(20);
        W_CITY: varchar(20);
        W_STATE: fixed(2);
        W_ZIP: fixed(9);
        W_TAX: dec(4, 4);
        W_YTD: dec(12, 2);
    }
);

columns!(
    /// DISTRICT (clause 1.3.1).
    district {
        D_ID: ID;
        D_W_ID: ID;
        D_NAME: varchar(10);
        D_STREET_1: varchar(20);
        D_STREET_2: varchar(20);
        D_CITY: varchar(20);
        D_STATE: fixed(2);
        D_ZIP: fixed(9);
        D_TAX: dec(4, 4);
        D_YTD: dec(12, 2);
        D_NEXT_O_ID: ID;
    }
);

columns!(
    /// CUSTOMER (clause 1.3.1).
    customer {
        C_ID: ID;
        C_D_ID: ID;
        C_W_ID: ID;
        C_FIRST: varchar(16);
        C_MIDDLE: fixed(2);
        C_LAST: varchar(16);
        C_STREET_1: varchar(20);
        C_STREET_2: varchar(20);
        C_CITY: varchar(20);
        C_STATE: fixed(2);
        C_ZIP: fixed(9);
        C_PHONE: fixed(16);
        C_SINCE: TIME;
        C_CREDIT: fixed(2);
        C_CREDIT_LIM: dec(12, 2);
        C_DISCOUNT: dec(4, 4);
        C_BALANCE: dec(12, 2);
        C_YTD_PAYMENT: dec(12, 2);
        C_PAYMENT_CNT: COUNT;
        C_DELIVERY_CNT: COUNT;
        C_DATA: varchar(500);
    }
);

columns!(
    /// HISTORY (clause 1.3.1), with the surrogate primary key `h_id` (see the module
    /// documentation).
    history {
        H_ID: ColumnType::Int64;
        H_C_ID: ID;
        H_C_D_ID: ID;
        H_C_W_ID: ID;
        H_D_ID: ID;
        H_W_ID: ID;
        H_DATE: TIME;
        H_AMOUNT: dec(6, 2);
        H_DATA: varchar(24);
    }
);

columns!(
    /// NEW-ORDER (clause 1.3.1).
    new_order {
        NO_O_ID: ID;
        NO_D_ID: ID;
        NO_W_ID: ID;
    }
);

columns!(
    /// ORDER (clause 1.3.1), named `orders`.
    orders {
        O_ID: ID;
        O_D_ID: ID;
        O_W_ID: ID;
        O_C_ID: ID;
        O_ENTRY_D: TIME;
        O_CARRIER_ID: ID, null;
        O_OL_CNT: COUNT;
        O_ALL_LOCAL: COUNT;
    }
);

columns!(
    /// ORDER-LINE (clause 1.3.1).
    order_line {
        OL_O_ID: ID;
        OL_D_ID: ID;
        OL_W_ID: ID;
        OL_NUMBER: ID;
        OL_I_ID: ID;
        OL_SUPPLY_W_ID: ID;
        OL_DELIVERY_D: TIME, null;
        OL_QUANTITY: COUNT;
        OL_AMOUNT: dec(6, 2);
        OL_DIST_INFO: fixed(24);
    }
);

columns!(
    /// ITEM (clause 1.3.1).
    item {
        I_ID: ID;
        I_IM_ID: ID;
        I_NAME: varchar(24);
        I_PRICE: dec(5, 2);
        I_DATA: varchar(50);
    }
);

columns!(
    /// STOCK (clause 1.3.1).
    stock {
        S_I_ID: ID;
        S_W_ID: ID;
        S_QUANTITY: COUNT;
        S_DIST_01: fixed(24);
        S_DIST_02: fixed(24);
        S_DIST_03: fixed(24);
        S_DIST_04: fixed(24);
        S_DIST_05: fixed(24);
        S_DIST_06: fixed(24);
        S_DIST_07: fixed(24);
        S_DIST_08: fixed(24);
        S_DIST_09: fixed(24);
        S_DIST_10: fixed(24);
        S_YTD: COUNT;
        S_ORDER_CNT: COUNT;
        S_REMOTE_CNT: COUNT;
        S_DATA: varchar(50);
    }
);

columns!(
    /// `tpcc_meta`: one row per load parameter (see [`crate::workload`]).
    meta {
        NAME: varchar(32);
        VALUE: ColumnType::Int64;
    }
);

/// The column of `s_dist_xx` for district `d_id` (1 ..= 10).
pub fn stock_dist_column(d_id: u32) -> Result<usize> {
    match d_id {
        1..=10 => Ok(stock::S_DIST_01 + (d_id as usize - 1)),
        _ => Err(TpccError::InvalidArgument(format!(
            "district id {d_id} is not in 1 ..= 10"
        ))),
    }
}

/// The schema of each table, by name, in creation order.
pub fn schemas() -> Result<Vec<(&'static str, Schema)>> {
    use customer as c;
    use orders as o;
    let schema = |columns, key, indexes| Schema::new(columns, key, indexes);
    Ok(vec![
        (
            WAREHOUSE,
            schema(warehouse::columns(), vec![warehouse::W_ID], vec![])?,
        ),
        (
            DISTRICT,
            schema(
                district::columns(),
                vec![district::D_W_ID, district::D_ID],
                vec![],
            )?,
        ),
        (
            CUSTOMER,
            schema(
                c::columns(),
                vec![c::C_W_ID, c::C_D_ID, c::C_ID],
                vec![IndexDef::new(
                    CUSTOMER_BY_NAME,
                    vec![c::C_W_ID, c::C_D_ID, c::C_LAST, c::C_FIRST],
                    false,
                )],
            )?,
        ),
        (
            HISTORY,
            schema(history::columns(), vec![history::H_ID], vec![])?,
        ),
        (
            NEW_ORDER,
            schema(
                new_order::columns(),
                vec![new_order::NO_W_ID, new_order::NO_D_ID, new_order::NO_O_ID],
                vec![],
            )?,
        ),
        (
            ORDERS,
            schema(
                o::columns(),
                vec![o::O_W_ID, o::O_D_ID, o::O_ID],
                vec![IndexDef::new(
                    ORDERS_BY_CUSTOMER,
                    vec![o::O_W_ID, o::O_D_ID, o::O_C_ID, o::O_ID],
                    false,
                )],
            )?,
        ),
        (
            ORDER_LINE,
            schema(
                order_line::columns(),
                vec![
                    order_line::OL_W_ID,
                    order_line::OL_D_ID,
                    order_line::OL_O_ID,
                    order_line::OL_NUMBER,
                ],
                vec![],
            )?,
        ),
        (ITEM, schema(item::columns(), vec![item::I_ID], vec![])?),
        (
            STOCK,
            schema(stock::columns(), vec![stock::S_W_ID, stock::S_I_ID], vec![])?,
        ),
        (META, schema(meta::columns(), vec![meta::NAME], vec![])?),
    ])
}

impl From<tailstore_storage::SchemaError> for TpccError {
    fn from(err: tailstore_storage::SchemaError) -> Self {
        TpccError::Engine(EngineError::Schema(err))
    }
}

/// Handles on the ten tables (cheap to clone).
#[derive(Clone)]
pub struct Tables {
    pub warehouse: Table,
    pub district: Table,
    pub customer: Table,
    pub history: Table,
    pub new_order: Table,
    pub orders: Table,
    pub order_line: Table,
    pub item: Table,
    pub stock: Table,
    pub meta: Table,
}

impl Tables {
    /// The tables of a database that holds them; [`TpccError::NotLoaded`] if one is missing.
    pub fn open(db: &Database) -> Result<Tables> {
        let get = |name: &str| {
            db.table(name).map_err(|err| match err {
                EngineError::NoSuchTable(_) => {
                    TpccError::NotLoaded(format!("there is no table `{name}`"))
                }
                other => other.into(),
            })
        };
        Ok(Tables {
            warehouse: get(WAREHOUSE)?,
            district: get(DISTRICT)?,
            customer: get(CUSTOMER)?,
            history: get(HISTORY)?,
            new_order: get(NEW_ORDER)?,
            orders: get(ORDERS)?,
            order_line: get(ORDER_LINE)?,
            item: get(ITEM)?,
            stock: get(STOCK)?,
            meta: get(META)?,
        })
    }
}

/// Creates the ten tables; [`TpccError::AlreadyLoaded`] if any of them exists.
pub fn create_tables(db: &Database) -> Result<Tables> {
    let schemas = schemas()?;
    let existing = db.table_names();
    let clashes: Vec<&str> = schemas
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| existing.iter().any(|e| e == name))
        .collect();
    if !clashes.is_empty() {
        return Err(TpccError::AlreadyLoaded(clashes.join(", ")));
    }
    for (name, schema) in &schemas {
        db.create_table(name, schema)?;
    }
    Tables::open(db)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_constants_name_their_columns() {
        for (name, schema) in schemas().expect("valid schemas") {
            let columns = schema.columns();
            let count = match name {
                WAREHOUSE => warehouse::COLUMNS,
                DISTRICT => district::COLUMNS,
                CUSTOMER => customer::COLUMNS,
                HISTORY => history::COLUMNS,
                NEW_ORDER => new_order::COLUMNS,
                ORDERS => orders::COLUMNS,
                ORDER_LINE => order_line::COLUMNS,
                ITEM => item::COLUMNS,
                STOCK => stock::COLUMNS,
                _ => meta::COLUMNS,
            };
            assert_eq!(columns.len(), count, "{name}");
        }
        let customer = customer::columns();
        assert_eq!(customer[customer::C_BALANCE].name, "c_balance");
        assert_eq!(customer[customer::C_DATA].name, "c_data");
        let stock = stock::columns();
        assert_eq!(stock[stock::S_DIST_10].name, "s_dist_10");
        assert_eq!(
            stock[stock_dist_column(7).expect("valid")].name,
            "s_dist_07"
        );
        assert!(stock_dist_column(11).is_err());
        let orders = orders::columns();
        assert!(orders[orders::O_CARRIER_ID].nullable);
        assert!(!orders[orders::O_OL_CNT].nullable);
    }

    #[test]
    fn every_column_of_the_specification() {
        // Clause 1.3: the number of columns of each table (HISTORY plus its surrogate key).
        assert_eq!(warehouse::COLUMNS, 9);
        assert_eq!(district::COLUMNS, 11);
        assert_eq!(customer::COLUMNS, 21);
        assert_eq!(history::COLUMNS, 8 + 1);
        assert_eq!(new_order::COLUMNS, 3);
        assert_eq!(orders::COLUMNS, 8);
        assert_eq!(order_line::COLUMNS, 10);
        assert_eq!(item::COLUMNS, 5);
        assert_eq!(stock::COLUMNS, 17);
    }
}
