//! `tailstore tpcc …` from the outside: bad flags and missing databases give one clear error
//! line and a non-zero status; a one-warehouse load, run and check work end to end.

use std::path::Path;
use std::process::Output;

use tailstore_engine::{Database, DbConfig, Table, Transaction};
use tailstore_storage::Value;

mod support;
use support::{path, refused, tailstore};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn bad_flags_are_refused() {
    refused(&["tpcc", "run"], &["--db"]);
    refused(&["tpcc", "load", "--db", "/tmp/x"], &["--warehouses"]);
    refused(
        &["tpcc", "run", "--db", "/tmp/x", "--commit", "fast"],
        &["unknown commit mode 'fast'"],
    );
    refused(
        &["tpcc", "run", "--db", "/tmp/x", "--buffer-pool", "12XB"],
        &["unknown size unit"],
    );
    refused(
        &["tpcc", "check", "--db", "/tmp/x", "--bogus"],
        &["--bogus"],
    );
    refused(
        &["tpcc", "compare", "--configs", "fsync"],
        &["unknown configuration 'fsync'"],
    );
    refused(
        &["tpcc", "compare", "--dir", "/nonexistent/tailstore"],
        &["--dir", "does not exist"],
    );
    refused(
        &["tpcc", "load", "--db", "/tmp/x", "--warehouses", "0"],
        &["--warehouses must be at least 1"],
    );
    refused(
        &[
            "tpcc",
            "load",
            "--db",
            "/tmp/x",
            "--warehouses",
            "1",
            "--commit",
            "buffer",
        ],
        &["--pmem"],
    );
    refused(
        &["tpcc", "run", "--db", "/tmp/x", "--users", "0"],
        &["--users must be at least 1"],
    );
    refused(
        &["tpcc", "run", "--db", "/tmp/x", "--workers", "0"],
        &["--workers", "0 is not in 1.."],
    );
    refused(
        &["tpcc", "run", "--db", "/tmp/x", "--duration", "0"],
        &["--duration must be a positive number"],
    );
}

#[test]
fn missing_or_occupied_databases_are_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let missing = dir.path().join("nothing-here");
    refused(
        &["tpcc", "run", "--db", path(&missing)],
        &["does not exist", "tpcc load"],
    );
    refused(
        &["tpcc", "check", "--db", path(dir.path())],
        &["holds no database", "tailstore.db"],
    );
    // Nothing was created by the refusals.
    assert!(!missing.exists());
    assert!(!dir.path().join("tailstore.db").exists());
    std::fs::write(dir.path().join("other"), b"x").expect("write");
    refused(
        &[
            "tpcc",
            "load",
            "--db",
            path(dir.path()),
            "--warehouses",
            "1",
        ],
        &["is not empty"],
    );
}

/// A load that cannot fit: more warehouses than the disk has room for, a buffer pool larger
/// than the machine's memory. Both are refused before anything is written; before, the
/// first went on until the disk filled, the second took all memory (or aborted).
#[test]
fn loads_that_cannot_fit_are_refused_up_front() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("db");
    refused(
        &[
            "tpcc",
            "load",
            "--db",
            path(&db),
            "--warehouses",
            "4000000000",
        ],
        &["need at least", "free"],
    );
    assert!(!db.exists(), "the refusal created {}", db.display());
    refused(
        &[
            "tpcc",
            "load",
            "--db",
            path(&db),
            "--warehouses",
            "1",
            "--buffer-pool",
            "1000000GiB",
        ],
        &["larger than this machine's memory"],
    );
    assert!(!db.join("tailstore.db").exists());
}

/// A one-warehouse database: load, a two-second run, all conditions checked; then a second
/// load into the same directory is refused.
#[test]
fn load_run_check_one_warehouse() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let db = dir.path().join("db");
    let json = dir.path().join("run.json");
    let out = tailstore(&[
        "tpcc",
        "load",
        "--db",
        path(&db),
        "--warehouses",
        "1",
        "--commit",
        "async",
        "--seed",
        "5",
    ]);
    assert!(out.status.success(), "load: {}", stderr(&out));
    assert!(stdout(&out).contains("loaded"), "{}", stdout(&out));

    let out = tailstore(&[
        "tpcc",
        "run",
        "--db",
        path(&db),
        "--commit",
        "async",
        "--users",
        "2",
        "--workers",
        "1",
        "--rampup",
        "0.5",
        "--duration",
        "2",
        "--progress",
        "1",
        "--seed",
        "9",
        "--json",
        path(&json),
    ]);
    assert!(out.status.success(), "run: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("recovery replayed"), "{text}");
    assert!(
        text.contains("Stock-Level read-committed, 1 worker\n"),
        "{text}"
    );
    assert!(
        text.contains("TEST RESULT : System achieved"),
        "no result line: {text}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    for key in [
        "tpm",
        "nopm",
        "users",
        "warehouses",
        "instances",
        "commit",
        "medium",
        "duration_s",
        "per_type",
        "log",
        "cpu_util",
    ] {
        assert!(!report[key].is_null(), "{key} missing in {report}");
    }
    assert!(report["tpm"].as_f64().expect("tpm") > 0.0);
    assert!(report["nopm"].as_f64().expect("nopm") > 0.0);
    assert!(report["tpm"].as_f64() > report["nopm"].as_f64());
    assert_eq!(report["commit"], "async");
    assert_eq!(report["stock_level_isolation"], "read-committed");
    assert_eq!(report["workers"], 1);
    let new_order = &report["per_type"]["new-order"];
    assert!(new_order["count"].as_u64().expect("count") > 0);
    assert!(new_order["retries"].as_u64().is_some(), "{new_order}");
    assert!(new_order["p95_ms"].as_f64().expect("p95") > 0.0);
    assert!(report["log"]["log_bytes"].as_u64().expect("log bytes") > 0);

    let out = tailstore(&[
        "tpcc",
        "check",
        "--db",
        path(&db),
        "--commit",
        "async",
        "--all",
    ]);
    assert!(out.status.success(), "check: {}", stderr(&out));
    assert!(
        stdout(&out).contains("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12 hold"),
        "{}",
        stdout(&out)
    );

    // The wrong commit mode names the right one.
    refused(&["tpcc", "check", "--db", path(&db)], &["--commit async"]);
    refused(
        &["tpcc", "load", "--db", path(&db), "--warehouses", "1"],
        &["is not empty"],
    );

    // Break condition 1 (w_ytd = Σ d_ytd) behind the kit's back: check names it and the row.
    change_districts(&db, |txn, table| {
        let mut row = txn
            .get(table, &[Value::Int(1), Value::Int(3)])?
            .expect("district (1, 3)");
        row[tailstore_tpcc::schema::district::D_YTD] = Value::Decimal(1);
        txn.update(table, &row)
    });
    let out = tailstore(&["tpcc", "check", "--db", path(&db), "--commit", "async"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("consistency condition 1 "), "{err}");
    assert!(err.contains("warehouse 1"), "{err}");

    // A district the load made, gone: the conditions are stated over the rows present, so
    // the check requires them, and says the database fails it.
    change_districts(&db, |txn, table| {
        txn.delete(table, &[Value::Int(1), Value::Int(10)])
            .map(drop)
    });
    let out = tailstore(&["tpcc", "check", "--db", path(&db), "--commit", "async"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("fails the check"), "{err}");
    assert!(err.contains("district (w 1, d 10)"), "{err}");
}

/// Changes the `async` database in `db`'s district table behind the kit's back, in one
/// transaction.
fn change_districts(
    db: &Path,
    mut change: impl FnMut(&mut Transaction<'_>, &Table) -> tailstore_engine::Result<()>,
) {
    let config = DbConfig::new(db, tailstore_log::CommitMode::Async, None);
    let (database, _) = Database::open(config).expect("open");
    let table = database.table("district").expect("district");
    database
        .run(10, |txn| change(txn, &table))
        .expect("change the districts");
    database.close().expect("close");
}

/// The comparison end to end on one warehouse, two configurations: JSON of every run, the
/// summary and the Markdown table.
#[test]
fn compare_two_configurations() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let d = path(dir.path());
    let markdown = dir.path().join("compare.md");
    let out = tailstore(&[
        "tpcc",
        "compare",
        "--warehouses",
        "1",
        "--users",
        "2",
        "--duration",
        "1",
        "--rampup",
        "0.2",
        "--configs",
        "fsync-disk,buffer",
        "--dir",
        d,
        "--pmem-dir",
        d,
        "--json-dir",
        d,
        "--markdown",
        path(&markdown),
        "--checkpoint-log",
        "256MiB",
        "--pmem-log-size",
        "64MiB",
    ]);
    assert!(out.status.success(), "compare: {}", stderr(&out));
    let text = std::fs::read_to_string(&markdown).expect("markdown written");
    assert!(
        text.contains("| fsync-disk |") && text.contains("| buffer |"),
        "{text}"
    );
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("compare.json")).expect("summary"),
    )
    .expect("json");
    let configs = summary["configs"].as_array().expect("configs");
    assert_eq!(configs.len(), 2);
    assert_eq!(configs[0]["tpm_vs_fsync_disk_pct"].as_f64(), Some(0.0));
    assert!(configs[1]["nopm"].as_f64().expect("nopm") > 0.0);
    for name in ["run-fsync-disk-1.json", "run-buffer-1.json"] {
        assert!(dir.path().join(name).exists(), "{name} missing");
    }
    // Only the reports are left: the databases and PMEM files are gone.
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        vec![
            "compare.json",
            "compare.md",
            "run-buffer-1.json",
            "run-fsync-disk-1.json"
        ]
    );
}
