//! A store written by an older build, whose B+tree entries held at most 4,066 bytes (16 KiB
//! pages before decision 100), keeps cutting its values into parts of that size: a 4 KiB
//! value there is two part rows, and a writer that replaced it as if it were one (this
//! build's size) would leave the second behind, where a later, longer value would find it.
//! A stream stored before its counts were kept (decision 179) reads as Redis reads one
//! saved without them, and counts on from there.

mod support;

use std::sync::Arc;

use support::run_on;

use tailstore_engine::{Database, DbConfig, KeyRange};
use tailstore_kv::Keyspace;
use tailstore_log::CommitMode;
use tailstore_media::sim::SimStorage;
use tailstore_media::Storage;
use tailstore_resp::Reply;
use tailstore_storage::{Column, ColumnType, ScanDirection, Schema, Value};

const SIM_DIR: &str = "/sim/older";

/// The largest entry of the builds before decision 100, which `kv_parts`' data column
/// recorded.
const OLDER_LIMIT: u32 = 4066;

fn open(storage: &SimStorage) -> Database {
    let mut config = DbConfig::new(SIM_DIR, CommitMode::Async, None);
    config.buffer_pool_bytes = 4 << 20;
    config.log.ring_bytes = 4 << 20;
    let storage: Arc<dyn Storage> = Arc::new(storage.clone());
    Database::open_with(storage, config).expect("open").0
}

/// `kv_parts` as the older builds created it.
fn older_parts_schema(limit: u32) -> Schema {
    use ColumnType::{Bytes, Int32, Int64};
    let columns = vec![
        Column::new("owner", Int64),
        Column::new("field", Bytes(256)),
        Column::new("part", Int32),
        Column::new("data", Bytes(limit)),
        Column::new("total", Int64),
    ];
    Schema::new(columns, vec![0, 1, 2], vec![]).expect("schema")
}

/// (part, data length) of every part row.
fn part_rows(ks: &Keyspace) -> Vec<(i64, usize)> {
    let db = ks.database();
    let parts = db.table("kv_parts").expect("kv_parts");
    let mut txn = db.begin();
    let rows = txn
        .scan(
            &parts,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan kv_parts");
    rows.iter()
        .map(|row| match (&row[2], &row[3]) {
            (Value::Int(part), Value::Bytes(data)) => (*part, data.len()),
            other => panic!("not a part row: {other:?}"),
        })
        .collect()
}

/// Removes every row of `table`, as a store made before the table existed has none.
fn empty_table(ks: &Keyspace, table: &str) {
    let db = ks.database();
    let table = db.table(table).expect("the table");
    let mut txn = db.begin();
    let rows = txn
        .scan(
            &table,
            &KeyRange::all(),
            ScanDirection::Ascending,
            usize::MAX,
        )
        .expect("scan");
    let key_columns = table.schema().primary_key().len();
    for row in &rows {
        txn.remove(&table, &row[..key_columns]).expect("remove");
    }
    txn.commit().expect("commit");
}

/// The value of `name` in a map reply.
fn map_field(map: &Reply, name: &str) -> Reply {
    let Reply::Map(fields) = map else {
        panic!("not a map: {map:?}");
    };
    fields
        .iter()
        .find(|(k, _)| *k == Reply::Bulk(name.as_bytes().to_vec()))
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {name} in {map:?}"))
}

/// XINFO GROUPS' (name, entries-read, lag) of each group.
fn group_reads(ks: &Keyspace, key: &str) -> Vec<(String, Reply, Reply)> {
    let Reply::Array(groups) = run_on(ks, &["XINFO", "GROUPS", key]) else {
        panic!("XINFO GROUPS answered otherwise");
    };
    groups
        .into_iter()
        .map(|group| {
            let field = |name: &str| map_field(&group, name);
            let name = String::from_utf8(bulk(field("name"))).expect("a name");
            (name, field("entries-read"), field("lag"))
        })
        .collect()
}

#[test]
fn a_stream_stored_without_counts_reads_as_redis_reads_one_saved_without_them() {
    let ks = Keyspace::open(Arc::new(open(&SimStorage::new())), 16).expect("open");
    for id in ["1-0", "2-0", "3-0", "4-0"] {
        run_on(&ks, &["XADD", "s", id, "f", "v"]);
    }
    run_on(&ks, &["XDEL", "s", "1-0"]);
    run_on(&ks, &["XGROUP", "CREATE", "s", "before", "0"]);
    run_on(&ks, &["XGROUP", "CREATE", "s", "at", "3-0"]);
    run_on(
        &ks,
        &["XGROUP", "CREATE", "s", "told", "0", "ENTRIESREAD", "1"],
    );
    empty_table(&ks, "kv_streams");
    empty_table(&ks, "kv_group_reads");
    // Three entries, as if all ever added; no deletion known; no group's count known, each
    // lag told where it can be from the last delivered ID.
    let info = run_on(&ks, &["XINFO", "STREAM", "s"]);
    assert_eq!(map_field(&info, "entries-added"), Reply::Int(3));
    assert_eq!(
        map_field(&info, "max-deleted-entry-id"),
        Reply::Bulk(b"0-0".to_vec())
    );
    assert_eq!(
        group_reads(&ks, "s"),
        vec![
            ("at".to_string(), Reply::Null, Reply::Null),
            ("before".to_string(), Reply::Null, Reply::Int(3)),
            ("told".to_string(), Reply::Null, Reply::Int(3)),
        ]
    );
    // Counting on: the next entry is the fourth added, and a group that reads everything
    // knows its count.
    run_on(&ks, &["XADD", "s", "5-0", "f", "v"]);
    run_on(
        &ks,
        &["XREADGROUP", "GROUP", "before", "c", "STREAMS", "s", ">"],
    );
    assert_eq!(
        group_reads(&ks, "s")[1],
        ("before".to_string(), Reply::Int(4), Reply::Int(0))
    );
}

fn bulk(reply: Reply) -> Vec<u8> {
    match reply {
        Reply::Bulk(bytes) => bytes.to_vec(),
        other => panic!("expected a bulk reply, got {other:?}"),
    }
}

#[test]
fn a_store_of_smaller_parts_keeps_cutting_its_values_there() {
    let storage = SimStorage::new();
    let db = open(&storage);
    db.create_table("kv_parts", &older_parts_schema(OLDER_LIMIT))
        .expect("create the older kv_parts");
    let ks = Keyspace::open(Arc::new(db), 16).expect("open the older store");
    let four_kib = "v".repeat(4096);
    assert_eq!(run_on(&ks, &["SET", "k", &four_kib]), Reply::ok());
    let rows = part_rows(&ks);
    assert_eq!(
        rows.len(),
        2,
        "a 4 KiB value in 4,066-byte entries: {rows:?}"
    );
    assert!(rows.iter().all(|&(_, len)| len < OLDER_LIMIT as usize));
    // Overwritten by a shorter value and then a longer one, nothing of the first is left.
    assert_eq!(run_on(&ks, &["SET", "k", "short"]), Reply::ok());
    assert_eq!(part_rows(&ks), vec![(0, 5)]);
    let longer = "w".repeat(7000);
    assert_eq!(run_on(&ks, &["SET", "k", &longer]), Reply::ok());
    assert_eq!(bulk(run_on(&ks, &["GET", "k"])), longer.as_bytes());
    assert_eq!(part_rows(&ks).len(), 2);
    assert_eq!(run_on(&ks, &["DEL", "k"]), Reply::Int(1));
    assert_eq!(part_rows(&ks), vec![]);
}

#[test]
fn a_new_store_keeps_a_4_kib_value_in_one_part_row() {
    let ks = Keyspace::open(Arc::new(open(&SimStorage::new())), 16).expect("open");
    let four_kib = "v".repeat(4096);
    assert_eq!(run_on(&ks, &["SET", "k", &four_kib]), Reply::ok());
    assert_eq!(part_rows(&ks), vec![(0, 4096)]);
    assert_eq!(bulk(run_on(&ks, &["GET", "k"])), four_kib.as_bytes());
}

#[test]
fn a_parts_table_of_another_shape_is_refused() {
    let db = open(&SimStorage::new());
    let mut columns = older_parts_schema(OLDER_LIMIT).columns().to_vec();
    columns[3] = Column::new("data", ColumnType::Int64);
    let other = Schema::new(columns, vec![0, 1, 2], vec![]).expect("schema");
    db.create_table("kv_parts", &other).expect("create");
    let err = Keyspace::open(Arc::new(db), 16).err().expect("refused");
    assert!(err.to_string().contains("`kv_parts`"), "{err}");
}
