//! SIGKILL of `tailstore tpcc run` in `buffer` mode (issue 5's crash test): after every kill,
//! `tpcc check --all` passes on the reopened database, and every New-Order the driver saw
//! acknowledged is there.
//!
//! One warehouse is loaded once. Then, round after round on the same database: the real
//! binary runs `tpcc run --commit buffer --users 4 --ack-log FILE` (the driver appends
//! `NO <instance> <w> <d> <o_id> <c_id> <ol_cnt> <entry_d>` to FILE once a New-Order's commit
//! has returned); the parent waits until a varying number of New-Orders were acknowledged
//! plus a varying delay, kills the driver with SIGKILL, and then
//! - runs `tpcc check --all` (opening it runs recovery): conditions 1–10 and 12 must hold;
//! - opens the database itself and requires, for every order acknowledged in this or an
//!   earlier round: its ORDER row with the acknowledged customer, line count and entry date,
//!   exactly that many ORDER-LINE rows, a NEW-ORDER row exactly while it is undelivered,
//!   and `d_next_o_id` beyond it. Comparing the row's contents, and checking after every
//!   round, matters: a lost order's id is given again to the next order of its district,
//!   so a bare existence check at the end would be fooled.
//!
//! Rounds alternate between the engine's default checkpoint policy and a checkpoint every
//! 0.2 s (each takes ~0.15 s on one warehouse), so that some kills land during a
//! checkpoint. `TAILSTORE_KILLS=<n>` sets the rounds (default 5: about 15 s on two cores).
//! The PMEM file is on /dev/shm, which outlives the process.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tailstore_engine::{Database, DbConfig, KeyRange};
use tailstore_log::CommitMode;
use tailstore_storage::{ScanDirection, Value};
use tailstore_tpcc::schema::{district, orders};

mod support;
use support::{path, tailstore, text};

fn kills() -> usize {
    tailstore_crash::kills(5)
}

/// One acknowledged New-Order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ack {
    w_id: i64,
    d_id: i64,
    o_id: i64,
    c_id: i64,
    ol_cnt: i64,
    entry_d: i64,
}

/// The complete lines of an ack log (a last line without its newline was cut by the kill).
fn read_acks(file: &Path) -> Vec<Ack> {
    let bytes = std::fs::read(file).unwrap_or_default();
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..=end],
        None => &[][..],
    };
    text(complete)
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let n = |k: usize| -> i64 {
                fields
                    .get(k)
                    .and_then(|f| f.parse().ok())
                    .unwrap_or_else(|| panic!("malformed ack line {line:?}"))
            };
            assert!(
                fields.len() == 8 && fields[0] == "NO" && n(1) == 1,
                "malformed ack line {line:?}"
            );
            Ack {
                w_id: n(2),
                d_id: n(3),
                o_id: n(4),
                c_id: n(5),
                ol_cnt: n(6),
                entry_d: n(7),
            }
        })
        .collect()
}

/// Counts the complete lines of `file` (cheaply: newlines).
fn ack_lines(file: &Path) -> usize {
    std::fs::read(file)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
}

/// Where the database lives and how it commits.
struct Setup<'a> {
    db: &'a Path,
    pmem: &'a Path,
    mode: &'a str,
}

impl Setup<'_> {
    /// `--db DIR --commit MODE --pmem PATH`.
    fn args(&self) -> [&str; 6] {
        let (db, pmem) = (path(self.db), path(self.pmem));
        ["--db", db, "--commit", self.mode, "--pmem", pmem]
    }
}

/// Starts `tpcc run` on the database, acknowledging New-Orders in `acks`.
fn start_run(setup: &Setup, acks: &Path, output: &Path, round: usize) -> Child {
    let log = File::create(output).expect("driver output file");
    let mut command = Command::new(env!("CARGO_BIN_EXE_tailstore"));
    command
        .args(["tpcc", "run", "--users", "4"])
        .args(setup.args())
        .args(["--rampup", "0", "--duration", "120", "--progress", "0"])
        .args(["--ack-log", path(acks)])
        .args(["--seed", &(round as u64 * 7919 + 1).to_string()]);
    if round % 2 == 1 {
        command.args(["--checkpoint-every", "0.2"]);
    }
    command
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("clone"))
        .stderr(log)
        .spawn()
        .expect("spawn tailstore tpcc run")
}

/// Waits until `acks` holds at least `want` lines; panics (with the driver's output) if the
/// driver exits or nothing comes within a minute.
fn wait_for_acks(child: &mut Child, acks: &Path, want: usize, output: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while ack_lines(acks) < want {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!(
                "tpcc run exited ({status}) before acknowledging {want} New-Orders: {}",
                std::fs::read_to_string(output).unwrap_or_default()
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "tpcc run acknowledged {} of {want} New-Orders in a minute: {}",
                ack_lines(acks),
                std::fs::read_to_string(output).unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Opens the database and checks every acknowledged order; the first problem as text.
fn verify_acked(setup: &Setup, acked: &[Ack]) -> Result<(), String> {
    let mode: CommitMode = setup.mode.parse().map_err(|e| format!("mode: {e:?}"))?;
    let pmem = Some(setup.pmem.to_path_buf()).filter(|_| mode.uses_pmem());
    let mut config = DbConfig::new(setup.db, mode, pmem);
    config.buffer_pool_bytes = 256 << 20;
    let (database, _) = Database::open(config).map_err(|e| format!("open: {e}"))?;
    let result = check_orders(&database, acked);
    database.close().map_err(|e| format!("close: {e}"))?;
    result
}

fn check_orders(db: &Database, acked: &[Ack]) -> Result<(), String> {
    let table = |name: &str| db.table(name).map_err(|e| format!("table {name}: {e}"));
    let (orders_t, lines_t, new_order_t, district_t) = (
        table("orders")?,
        table("order_line")?,
        table("new_order")?,
        table("district")?,
    );
    let mut next_o_id = BTreeMap::new();
    for ack in acked {
        let key = [
            Value::Int(ack.w_id),
            Value::Int(ack.d_id),
            Value::Int(ack.o_id),
        ];
        let (order, lines, new_order) = db
            .run(100, |txn| {
                let order = txn.get(&orders_t, &key)?;
                let lines = txn.scan(
                    &lines_t,
                    &KeyRange::prefix(key.to_vec()),
                    ScanDirection::Ascending,
                    usize::MAX,
                )?;
                let new_order = txn.get(&new_order_t, &key)?;
                Ok((order, lines.len(), new_order.is_some()))
            })
            .map_err(|e| format!("reading order {ack:?}: {e}"))?;
        let Some(order) = order else {
            return Err(format!("acknowledged order {ack:?} is missing"));
        };
        let expected = [
            (orders::O_C_ID, Value::Int(ack.c_id)),
            (orders::O_OL_CNT, Value::Int(ack.ol_cnt)),
            (orders::O_ENTRY_D, Value::Timestamp(ack.entry_d)),
        ];
        for (column, value) in expected {
            if order[column] != value {
                return Err(format!(
                    "acknowledged order {ack:?} was replaced by another order with its id: {order:?}"
                ));
            }
        }
        if lines as i64 != ack.ol_cnt {
            return Err(format!(
                "acknowledged order {ack:?} has {lines} order lines, not {}",
                ack.ol_cnt
            ));
        }
        let delivered = order[orders::O_CARRIER_ID] != Value::Null;
        if new_order == delivered {
            return Err(format!(
                "acknowledged order {ack:?}: delivered {delivered} but NEW-ORDER row present {new_order}"
            ));
        }
        let next = match next_o_id.get(&(ack.w_id, ack.d_id)) {
            Some(&next) => next,
            None => {
                let key = [Value::Int(ack.w_id), Value::Int(ack.d_id)];
                let row = db
                    .run(100, |txn| txn.get(&district_t, &key))
                    .map_err(|e| format!("reading district: {e}"))?
                    .ok_or_else(|| format!("district {key:?} is missing"))?;
                let Value::Int(next) = row[district::D_NEXT_O_ID] else {
                    return Err(format!("district {key:?}: bad d_next_o_id"));
                };
                next_o_id.insert((ack.w_id, ack.d_id), next);
                next
            }
        };
        if next <= ack.o_id {
            return Err(format!(
                "acknowledged order {ack:?} is at or beyond d_next_o_id {next}"
            ));
        }
    }
    Ok(())
}

/// Loads one warehouse in `mode` and kills `tpcc run` `rounds` times; a summary, or the first
/// violation found.
fn crash_rounds(mode: &str, rounds: usize) -> Result<String, String> {
    let began = Instant::now();
    let dir = tempfile::tempdir().expect("temporary directory");
    let shm = support::pmem_dir();
    let (db, pmem) = (dir.path().join("db"), shm.path().join("tpcc.pmem"));
    let setup = Setup {
        db: &db,
        pmem: &pmem,
        mode,
    };
    let mut load = vec!["tpcc", "load", "--warehouses", "1", "--seed", "5"];
    load.extend(setup.args());
    let out = tailstore(&load);
    assert!(out.status.success(), "load: {}", text(&out.stderr));
    let loaded = began.elapsed();

    let mut acked: Vec<Ack> = Vec::new();
    let mut keys = std::collections::HashSet::new();
    for round in 0..rounds {
        let acks = dir.path().join(format!("acks-{round}.log"));
        let output = dir.path().join(format!("run-{round}.out"));
        let mut child = start_run(&setup, &acks, &output, round);
        // A varying amount of work, then a varying delay.
        wait_for_acks(&mut child, &acks, 20 + 300 * (round % 5), &output);
        thread::sleep(Duration::from_millis(37 * (round as u64 % 7)));
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "tpcc run exited before the kill: {}",
            std::fs::read_to_string(&output).unwrap_or_default()
        );
        child.kill().expect("SIGKILL tpcc run");
        let _ = child.wait();

        let round_acks = read_acks(&acks);
        if round_acks.is_empty() {
            return Err(format!("round {round}: nothing acknowledged"));
        }
        for ack in &round_acks {
            if !keys.insert((ack.w_id, ack.d_id, ack.o_id)) {
                return Err(format!(
                    "round {round}: order {ack:?} acknowledged twice: an earlier one was lost and its id given again"
                ));
            }
        }
        acked.extend(round_acks.iter().copied());

        let mut check = vec!["tpcc", "check", "--all"];
        check.extend(setup.args());
        let out = tailstore(&check);
        let stdout = text(&out.stdout);
        if !out.status.success() || !stdout.contains("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12 hold") {
            return Err(format!(
                "round {round}: tpcc check --all after the kill failed: {stdout}{}",
                text(&out.stderr)
            ));
        }
        verify_acked(&setup, &acked).map_err(|problem| {
            format!(
                "round {round} ({} New-Orders acknowledged in it, {} in all): {problem}",
                round_acks.len(),
                acked.len()
            )
        })?;
        let recovery = stdout
            .split("recovery ")
            .nth(1)
            .and_then(|rest| rest.lines().next())
            .unwrap_or("?");
        eprintln!(
            "{mode} round {round}: killed after {} acknowledged New-Orders; check --all passed (recovery {recovery}); all {} acknowledged so far present",
            round_acks.len(),
            acked.len()
        );
    }
    Ok(format!(
        "{mode}: {rounds} kills, {} acknowledged New-Orders all present; load {:.1} s, total {:.1} s",
        acked.len(),
        loaded.as_secs_f64(),
        began.elapsed().as_secs_f64()
    ))
}

#[test]
fn sigkill_during_buffer_run_keeps_acknowledged_new_orders() {
    match crash_rounds("buffer", kills()) {
        Ok(summary) => eprintln!("{summary}"),
        Err(violation) => panic!("{violation}"),
    }
}
