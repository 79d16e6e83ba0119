//! The row layer: order preservation and round trips of the key encoding, row value round
//! trips, malformed input, value type checks, index keys and prefix scans over a real B+tree.

use std::cmp::Ordering;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use tailstore_media::sim::SimStorage;
use tailstore_media::{OpenMode, Storage};
use tailstore_storage::key::{
    decode_tuple, decode_value, encode_tuple, prefix_bounds, prefix_len, prefix_successor,
    skip_value,
};
use tailstore_storage::row::{decode_fields, RowError, Value};
use tailstore_storage::schema::{Column, ColumnType, IndexDef, Schema};
use tailstore_storage::{BTree, BufferPool, ScanDirection};

/// SQL order of two values of the same column (NULL first).
fn sql_cmp(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::Int(x), Value::Int(y))
        | (Value::Decimal(x), Value::Decimal(y))
        | (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
        (Value::Text(x), Value::Text(y)) => x.chars().cmp(y.chars()),
        (Value::Bytes(x), Value::Bytes(y)) => x.cmp(y),
        _ => panic!("values of different kinds in one column: {a:?} {b:?}"),
    }
}

fn tuple_cmp(a: &[Value], b: &[Value]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| sql_cmp(x, y))
        .find(|o| o.is_ne())
        .unwrap_or(a.len().cmp(&b.len()))
}

fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        -3i64..3,
        any::<i64>(),
        Just(i64::MIN),
        Just(i64::MAX),
        Just(-1),
        Just(256),
    ]
}

fn text() -> impl Strategy<Value = String> {
    // Small alphabet (with NUL and a multi-byte char) so that prefixes and ties are common.
    prop_oneof!["[ab\\x00\\x01\\xFF é]{0,5}", any::<String>()]
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), Just(b'a'), any::<u8>()],
        0..6,
    )
}

/// A value of column kind `kind` (0 int, 1 decimal, 2 timestamp, 3 text, 4 bytes), or NULL.
fn value_of(kind: u8) -> BoxedStrategy<Value> {
    let v = match kind {
        0 => int().prop_map(Value::Int).boxed(),
        1 => int().prop_map(Value::Decimal).boxed(),
        2 => int().prop_map(Value::Timestamp).boxed(),
        3 => text().prop_map(Value::Text).boxed(),
        _ => bytes().prop_map(Value::Bytes).boxed(),
    };
    prop_oneof![1 => Just(Value::Null), 5 => v].boxed()
}

fn tuple_of(kinds: Vec<u8>) -> BoxedStrategy<Vec<Value>> {
    kinds
        .into_iter()
        .map(value_of)
        .collect::<Vec<_>>()
        .prop_map(|v| v)
        .boxed()
}

/// Column kinds and two tuples following them (the second often sharing a prefix).
fn two_tuples() -> impl Strategy<Value = (Vec<Value>, Vec<Value>)> {
    proptest::collection::vec(0u8..5, 1..5).prop_flat_map(|kinds| {
        let n = kinds.len();
        (tuple_of(kinds.clone()), tuple_of(kinds), 0..=n).prop_map(|(a, mut b, shared)| {
            b[..shared].clone_from_slice(&a[..shared]);
            (a, b)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn key_encoding_preserves_order((a, b) in two_tuples()) {
        let (ea, eb) = (encode_tuple(&a), encode_tuple(&b));
        prop_assert_eq!(tuple_cmp(&a, &b), ea.cmp(&eb), "{:?} vs {:?}", a, b);
    }

    #[test]
    fn single_value_keys_preserve_order(
        (a, b) in (0u8..5).prop_flat_map(|kind| (value_of(kind), value_of(kind)))
    ) {
        let (ea, eb) = (encode_tuple(std::slice::from_ref(&a)), encode_tuple(std::slice::from_ref(&b)));
        prop_assert_eq!(sql_cmp(&a, &b), ea.cmp(&eb), "{:?} vs {:?}", a, b);
    }

    #[test]
    fn key_round_trip((a, _b) in two_tuples()) {
        let encoded = encode_tuple(&a);
        prop_assert_eq!(decode_tuple(&encoded).expect("decodes"), a.clone());
        // The encoding of every prefix is a byte prefix, found by prefix_len.
        for n in 0..=a.len() {
            let len = prefix_len(&encoded, n).expect("prefix");
            let expected = encode_tuple(&a[..n]);
            prop_assert_eq!(&encoded[..len], expected.as_slice());
        }
    }

    #[test]
    fn prefix_bounds_select_exactly_the_prefix((a, b) in two_tuples(), n in 0usize..5) {
        let n = n.min(a.len());
        let prefix = encode_tuple(&a[..n]);
        let key = encode_tuple(&b);
        let in_bounds = match prefix_bounds(&prefix) {
            (Bound::Included(lo), Bound::Excluded(hi)) => key >= lo && key < hi,
            (Bound::Included(lo), Bound::Unbounded) => key >= lo,
            other => panic!("unexpected bounds {other:?}"),
        };
        prop_assert_eq!(in_bounds, a[..n] == b[..n]);
    }

    #[test]
    fn key_decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(values) = decode_tuple(&bytes) {
            // Whatever decodes re-encodes to the same bytes (the encoding is canonical).
            prop_assert_eq!(encode_tuple(&values), bytes);
        }
    }

    /// Walking over an element ends where decoding it ends, and fails where decoding fails,
    /// with the same error, except that a walk does not look inside text for UTF-8.
    #[test]
    fn skipping_an_element_walks_as_far_as_decoding_it(
        (a, _b) in two_tuples(),
        noise in proptest::collection::vec(prop_oneof![Just(0u8), Just(0xFFu8), Just(0x20u8), any::<u8>()], 0..24),
        at in any::<prop::sample::Index>(),
        xor in 0u8..=255,
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = encode_tuple(&a);
        bytes.extend_from_slice(&noise);
        let i = at.index(bytes.len());
        bytes[i] ^= xor;
        bytes.truncate(cut.index(bytes.len() + 1));
        let (mut decoded_to, mut skipped_to) = (0, 0);
        while decoded_to < bytes.len() {
            let decoded = decode_value(&bytes, &mut decoded_to);
            let skipped = skip_value(&bytes, &mut skipped_to);
            match decoded {
                Err(RowError::MalformedKey { reason: "text is not UTF-8", .. }) => {
                    prop_assert!(skipped.is_ok());
                }
                Err(err) => {
                    prop_assert_eq!(skipped, Err(err));
                    break;
                }
                Ok(_) => prop_assert!(skipped.is_ok()),
            }
            prop_assert_eq!(decoded_to, skipped_to);
        }
    }

    /// A projection of an entry whose key is damaged decodes what the full decode holds in
    /// those columns, or fails; it fails wherever the key's framing is broken.
    #[test]
    fn decode_columns_of_a_damaged_key(
        row in wide_row(),
        columns in proptest::collection::vec(0usize..11, 0..6),
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
    ) {
        let schema = wide_schema();
        let (mut key, value) = schema.encode_row(&row).expect("valid row");
        let i = at.index(key.len());
        key[i] ^= xor;
        let projected = schema.decode_columns(&key, &value, &columns);
        if let Ok(full) = schema.decode_row(&key, &value) {
            let picked: Vec<Value> = columns.iter().map(|&c| full[c].clone()).collect();
            prop_assert_eq!(projected, Ok(picked));
        } else if decode_tuple(&key).is_err() && !matches!(
            decode_tuple(&key),
            Err(RowError::MalformedKey { reason: "text is not UTF-8", .. })
        ) {
            prop_assert!(projected.is_err(), "a key with broken framing decoded");
        }
    }

    #[test]
    fn row_round_trip(row in wide_row()) {
        let schema = wide_schema();
        let (key, value) = schema.encode_row(&row).expect("valid row");
        let back = schema.decode_row(&key, &value).expect("decodes");
        prop_assert_eq!(&back, &schema.check_row(&row).expect("valid"));
        // Normalized rows encode identically.
        prop_assert_eq!(schema.encode_row(&back).expect("valid"), (key, value));
    }

    /// A projection decodes what the full decode holds in those columns, in the order asked
    /// (repeats included), and a damaged entry fails or succeeds as the full decode of the
    /// asked columns would tell (a layout error fails both).
    #[test]
    fn decode_columns_projects_decode_row(
        row in wide_row(),
        columns in proptest::collection::vec(0usize..11, 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let schema = wide_schema();
        let (key, value) = schema.encode_row(&row).expect("valid row");
        let full = schema.decode_row(&key, &value).expect("decodes");
        let picked: Vec<Value> = columns.iter().map(|&c| full[c].clone()).collect();
        prop_assert_eq!(schema.decode_columns(&key, &value, &columns).expect("decodes"), picked);
        let short = &value[..cut.index(value.len())];
        prop_assert!(schema.decode_columns(&key, short, &columns).is_err(), "a truncated row decoded");
        prop_assert!(schema.decode_columns(&key, &value, &[11]).is_err(), "a column past the row");
    }

    #[test]
    fn row_decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        let schema = wide_schema();
        let _ = schema.decode_value(&bytes);
        let mut versioned = bytes.clone();
        versioned.insert(0, 1);
        let _ = schema.decode_value(&versioned);
        let _ = schema.decode_row(&bytes, &versioned);
    }

    #[test]
    fn row_decoding_damaged_rows_never_panics(
        row in wide_row(),
        at in any::<prop::sample::Index>(),
        xor in 1u8..=255,
        cut in any::<prop::sample::Index>(),
    ) {
        let schema = wide_schema();
        let value = schema.encode_value(&row).expect("valid row");
        let mut flipped = value.clone();
        let i = at.index(flipped.len());
        flipped[i] ^= xor;
        let _ = schema.decode_value(&flipped);
        let truncated = &value[..cut.index(value.len())];
        prop_assert!(schema.decode_value(truncated).is_err());
        let mut longer = value.clone();
        longer.push(0);
        prop_assert!(schema.decode_value(&longer).is_err());
    }
}

fn dec(precision: u8, scale: u8) -> ColumnType {
    ColumnType::Decimal { precision, scale }
}

/// A schema with every type, nullable and not, and a composite primary key.
fn wide_schema() -> Schema {
    Schema::new(
        vec![
            Column::new("k1", ColumnType::Int32),
            Column::new("k2", ColumnType::Varchar(8)),
            Column::nullable("i32", ColumnType::Int32),
            Column::new("i64", ColumnType::Int64),
            Column::nullable("money", dec(12, 2)),
            Column::nullable("code", ColumnType::Char(4)),
            Column::new("name", ColumnType::Varchar(20)),
            Column::nullable("blob", ColumnType::Bytes(16)),
            Column::nullable("at", ColumnType::Timestamp),
            Column::new("state", ColumnType::Char(2)),
            Column::new("k3", ColumnType::Char(3)),
        ],
        vec![0, 1, 10],
        vec![IndexDef::new("by_name", vec![6, 5], false)],
    )
    .expect("valid schema")
}

fn nullable(v: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop_oneof![1 => Just(Value::Null), 3 => v].boxed()
}

fn wide_row() -> impl Strategy<Value = Vec<Value>> {
    let chars = |n: usize| proptest::collection::vec(any::<char>(), 0..=n);
    let text = move |n: usize| {
        chars(n)
            .prop_map(|c| Value::Text(c.into_iter().collect()))
            .boxed()
    };
    vec![
        any::<i32>().prop_map(Value::from).boxed(),
        text(8),
        nullable(any::<i32>().prop_map(Value::from).boxed()),
        any::<i64>().prop_map(Value::Int).boxed(),
        nullable(
            (-999_999_999_999i64..=999_999_999_999)
                .prop_map(Value::Decimal)
                .boxed(),
        ),
        nullable(text(4)),
        text(20),
        nullable(
            proptest::collection::vec(any::<u8>(), 0..=16)
                .prop_map(Value::Bytes)
                .boxed(),
        ),
        nullable(any::<i64>().prop_map(Value::Timestamp).boxed()),
        "[A-Z ]{0,2}".prop_map(Value::Text).boxed(),
        "[a-c ]{0,3}".prop_map(Value::Text).boxed(),
    ]
}

#[test]
fn value_checks_name_the_column() {
    let schema = wide_schema();
    let mut row = vec![
        Value::Int(1),
        Value::from("k"),
        Value::Null,
        Value::Int(2),
        Value::Decimal(12_345), // 123.45
        Value::from("ab"),
        Value::from("n"),
        Value::Null,
        Value::Null,
        Value::from("CA"),
        Value::from("x"),
    ];
    schema.check_row(&row).expect("valid");
    let err = |row: &[Value]| schema.encode_row(row).expect_err("refused");

    let mut r = row.clone();
    r[2] = Value::Int(i64::from(i32::MAX) + 1);
    assert_eq!(
        err(&r).to_string(),
        "value 2147483648 is out of range for column `i32` of type INT32"
    );
    r = row.clone();
    r[4] = Value::Decimal(1_000_000_000_000);
    assert!(matches!(err(&r), RowError::OutOfRange { column, .. } if column == "money"));
    r = row.clone();
    r[4] = Value::Int(5);
    assert_eq!(
        err(&r).to_string(),
        "column `money` of type DECIMAL(12,2) cannot hold a integer value"
    );
    r = row.clone();
    r[3] = Value::Null;
    assert_eq!(err(&r), RowError::NullNotAllowed("i64".into()));
    r = row.clone();
    r[5] = Value::from("abcde");
    assert!(matches!(err(&r), RowError::TooLong { column, len: 5, .. } if column == "code"));
    r = row.clone();
    r[5] = Value::from("abcd   "); // trailing pad beyond CHAR(4) is fine
    schema.check_row(&r).expect("pad spaces are not length");
    r = row.clone();
    r[1] = Value::from("ééééééééé"); // 9 characters in VARCHAR(8)
    assert!(matches!(err(&r), RowError::TooLong { column, len: 9, .. } if column == "k2"));
    r = row.clone();
    r[1] = Value::from("éééééééé"); // 8 characters (16 bytes) fits
    schema.check_row(&r).expect("length counts characters");
    r = row.clone();
    r[7] = Value::Bytes(vec![0; 17]);
    assert!(matches!(err(&r), RowError::TooLong { column, len: 17, .. } if column == "blob"));
    r = row.clone();
    r[8] = Value::Int(0);
    assert!(matches!(err(&r), RowError::TypeMismatch { column, .. } if column == "at"));
    assert_eq!(
        err(&row[..3]),
        RowError::WrongArity {
            expected: 11,
            found: 3
        }
    );
    row[5] = Value::from("ab");
    assert_eq!(
        schema.check_row(&row).expect("valid")[5],
        Value::from("ab  ")
    );
}

#[test]
fn char_keys_compare_with_pad_space() {
    let schema =
        Schema::new(vec![Column::new("c", ColumnType::Char(3))], vec![0], vec![]).expect("valid");
    let key = |s: &str| schema.primary_key_of(&[Value::from(s)]).expect("fits");
    assert_eq!(key("a"), key("a  "));
    assert!(key("a\u{1}") < key("a")); // 'a' = 'a  ' and ' ' > '\x01'
    assert!(key("a") < key("a!"));
    assert!(key("ab") < key("b"));
}

/// A CHAR value with exactly its length in characters is stored as it is (the row is
/// borrowed, not copied); anything else is padded or trimmed to that length, ASCII or not.
#[test]
fn char_values_are_padded_only_when_they_need_it() {
    let schema = Schema::new(
        vec![
            Column::new("id", ColumnType::Int64),
            Column::new("c", ColumnType::Char(4)),
        ],
        vec![0],
        vec![],
    )
    .expect("valid");
    let cases = [
        ("ab  ", "ab  ", true),
        ("abcd", "abcd", true),
        ("éééé", "éééé", true),
        ("é   ", "é   ", true),
        ("ab", "ab  ", false),
        ("é", "é   ", false),
        ("ab      ", "ab  ", false),
        ("", "    ", false),
    ];
    for (given, stored, borrowed) in cases {
        let row = [Value::Int(1), Value::from(given)];
        let checked = schema.checked_row(&row).expect("fits");
        assert_eq!(checked[1], Value::from(stored), "{given:?}");
        assert_eq!(
            matches!(checked, std::borrow::Cow::Borrowed(_)),
            borrowed,
            "{given:?}"
        );
        assert_eq!(
            checked.as_ref(),
            schema.check_row(&row).expect("fits").as_slice()
        );
    }
}

proptest! {
    /// `checked_row` agrees with `check_row` (which always normalizes) on CHAR values of
    /// spaces, ASCII and multi-byte characters.
    #[test]
    fn checked_row_normalizes_like_check_row(
        text in prop::collection::vec(prop::sample::select(vec!['a', ' ', 'é', '中']), 0..9)
    ) {
        let schema = Schema::new(
            vec![Column::new("id", ColumnType::Int64), Column::new("c", ColumnType::Char(5))],
            vec![0],
            vec![],
        )
        .expect("valid");
        let text: String = text.into_iter().collect();
        let row = [Value::Int(1), Value::from(text.as_str())];
        match (schema.checked_row(&row), schema.check_row(&row)) {
            (Ok(checked), Ok(normal)) => prop_assert_eq!(checked.as_ref(), normal.as_slice()),
            (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
            (a, b) => prop_assert!(false, "checked_row {:?} but check_row {:?}", a, b),
        }
    }
}

#[test]
fn malformed_rows_are_refused_with_reasons() {
    let columns = [
        Column::new("a", ColumnType::Int32),
        Column::new("t", ColumnType::Varchar(3)),
    ];
    let cols: Vec<&Column> = columns.iter().collect();
    let cases: &[(&[u8], &str)] = &[
        (&[], "truncated"),
        (&[2, 0], "unknown format version 2"),
        (&[1, 0b100], "unused bits"),
        (&[1, 0b01], "NULL in NOT NULL column `a`"),
        (&[1, 0, 1, 0, 0], "truncated"),
        (&[1, 0, 1, 0, 0, 0, 9, b'x'], "truncated"),
        (&[1, 0, 1, 0, 0, 0, 1, 0xC3], "not valid UTF-8"),
        (&[1, 0, 1, 0, 0, 0, 4, b'a', b'b', b'c', b'd'], "too long"),
        (&[1, 0, 1, 0, 0, 0, 0, 7], "1 trailing bytes"),
        (&[1, 0, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], "varint"),
    ];
    for (bytes, reason) in cases {
        let err = decode_fields(&cols, bytes).expect_err("malformed");
        assert!(
            err.to_string().contains(reason),
            "{bytes:?}: {err} lacks {reason}"
        );
    }
    assert_eq!(
        decode_fields(&cols, &[1, 0, 1, 0, 0, 0, 2, b'h', b'i']).expect("valid"),
        vec![Value::Int(1), Value::from("hi")]
    );
}

#[test]
fn malformed_keys_are_refused() {
    for bytes in [
        &[0x10, 0, 0][..],
        &[0x20, b'a'],
        &[0x20, b'a', 0],
        &[0x20, 0, 0x07],
        &[0x20, 0xC3, 0, 0],
        &[0x7F],
    ] {
        assert!(
            matches!(decode_tuple(bytes), Err(RowError::MalformedKey { .. })),
            "{bytes:?}"
        );
    }
    let schema = wide_schema();
    // A key of the right length but the wrong types is refused by the schema.
    let wrong = encode_tuple(&[Value::from("x"), Value::from("y"), Value::from("z  ")]);
    assert!(matches!(
        schema.decode_primary_key(&wrong),
        Err(RowError::TypeMismatch { .. })
    ));
    assert_eq!(prefix_successor(&[1, 0xFF, 0xFF]), Some(vec![2]));
    assert_eq!(prefix_successor(&[0xFF]), None);
}

/// TPC-C's customer-by-last-name lookup through a secondary index over a real B+tree.
#[test]
fn index_prefix_scan_finds_customers_by_last_name() {
    let storage = SimStorage::new();
    let file = storage
        .open_file(Path::new("/db/data"), OpenMode::CreateIfMissing)
        .expect("open");
    let pool = Arc::new(BufferPool::new(file, 64, Box::new(|_| Ok(()))).expect("pool"));
    let table = BTree::create(pool.clone()).expect("table");
    let index = BTree::create(pool).expect("index");
    let schema = Schema::new(
        vec![
            Column::new("c_id", ColumnType::Int32),
            Column::new("c_d_id", ColumnType::Int32),
            Column::new("c_w_id", ColumnType::Int32),
            Column::new("c_first", ColumnType::Varchar(16)),
            Column::new("c_last", ColumnType::Varchar(16)),
            Column::new("c_balance", dec(12, 2)),
        ],
        vec![2, 1, 0],
        vec![IndexDef::new("by_last", vec![2, 1, 4, 3], false)],
    )
    .expect("valid");
    let lasts = ["BARBAR", "BARBARA", "OUGHT", "BAR"];
    for w in 1..=2 {
        for d in 1..=3 {
            for c in 1..=20 {
                let row = vec![
                    Value::Int(c),
                    Value::Int(d),
                    Value::Int(w),
                    Value::Text(format!("first{:02}", 20 - c)),
                    Value::from(lasts[c as usize % lasts.len()]),
                    Value::Decimal(-1000 + c),
                ];
                let (key, value) = schema.encode_row(&row).expect("row");
                table.insert(&key, &value).expect("insert");
                index
                    .insert(&schema.index_key(0, &row).expect("index key"), &[])
                    .expect("insert index");
            }
        }
    }
    let prefix = schema
        .index_prefix(0, &[Value::Int(2), Value::Int(3), Value::from("BARBAR")])
        .expect("prefix");
    let (lo, hi) = prefix_bounds(&prefix);
    let hits = index
        .range(
            lo.as_ref().map(Vec::as_slice),
            hi.as_ref().map(Vec::as_slice),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan");
    let mut firsts = Vec::new();
    for (index_key, _) in &hits {
        let pk = schema.primary_key_from_index_key(0, index_key).expect("pk");
        let (indexed, pk_values) = schema.decode_index_key(0, index_key).expect("index key");
        assert_eq!(
            indexed[..3],
            [Value::Int(2), Value::Int(3), Value::from("BARBAR")]
        );
        assert_eq!(schema.decode_primary_key(pk).expect("pk"), pk_values);
        let value = table.get(pk).expect("get").expect("row present");
        let row = schema.decode_row(pk, &value).expect("row");
        assert_eq!(row[2], Value::Int(2));
        assert_eq!(row[1], Value::Int(3));
        assert_eq!(row[4], Value::from("BARBAR"));
        match &row[3] {
            Value::Text(first) => firsts.push(first.clone()),
            other => panic!("c_first is {other:?}"),
        }
    }
    // c ≡ 0 (mod 4): c = 4, 8, 12, 16, 20, returned in c_first order.
    assert_eq!(firsts.len(), 5);
    assert!(firsts.windows(2).all(|w| w[0] < w[1]));

    // All customers of warehouse 1, district 2 via a primary-key prefix.
    let prefix = schema
        .primary_key_prefix(&[Value::Int(1), Value::Int(2)])
        .expect("prefix");
    let (lo, hi) = prefix_bounds(&prefix);
    let rows = table
        .range(
            lo.as_ref().map(Vec::as_slice),
            hi.as_ref().map(Vec::as_slice),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan");
    let ids: Vec<Value> = rows
        .iter()
        .map(|(k, v)| schema.decode_row(k, v).expect("row")[0].clone())
        .collect();
    assert_eq!(ids, (1..=20).map(Value::Int).collect::<Vec<_>>());
    assert!(matches!(
        schema.primary_key_prefix(&[Value::Int(1), Value::Null]),
        Err(RowError::NullNotAllowed(c)) if c == "c_d_id"
    ));
}
