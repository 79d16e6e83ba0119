//! SIGKILL of `tailstore serve` under a write load, in each durable commit mode: after every
//! restart, every write the server acknowledged is there, and nothing else is wrong.
//!
//! The parent starts the real binary (`tailstore serve --listen 127.0.0.1:0`), learns its
//! port from the "listening on" line, and runs writer threads, each on its own connection
//! with a few requests in flight: `SET w:<run>:<thread>:<seq> <value>` (the value is a
//! function of the key; every 16th is 5,000 bytes, so it spans several parts) and
//! `INCR counter:<thread>`. Each records what was acknowledged. After 20–150 ms (or at once,
//! now and then, to kill during recovery or startup) the parent kills the server with
//! SIGKILL, starts it again on the same directory and checks, before the next round of
//! writes:
//! - every acknowledged SET reads back byte for byte (MGET);
//! - a SET that was sent but not acknowledged reads back as its value or nil, nothing else;
//! - each counter is at least its highest acknowledged INCR reply, and at most the number of
//!   INCRs ever sent;
//! - DBSIZE, from the counts the writes keep, equals the number of keys KEYS * lists.
//!
//! Every [`FULL_CHECK_EVERY`]th restart, and after the last kill, the check reads every SET
//! of every run. The restarts between read the SETs of the last [`RECENT_RUNS`] runs (the
//! writes a kill can have caught in flight) and a different random sample of the older
//! ones, and leave DBSIZE to the next full check: a full check after every kill made a soak's
//! time grow with the square of its kills (400 kills did not finish in 25 minutes).
//!
//! `a_job_queue_survives_sigkills` does the same to a job queue: a producer's RPUSHes and a
//! consumer's BLPOPs, with half as many kills per mode (`check_queue` says what it checks);
//! `transfer_scripts_survive_sigkills_whole` to two clients' Lua scripts, each moving an
//! amount between two balances and appending to a ledger (`check_transfers`);
//! `an_event_stream_survives_sigkills` to a producer's XADDs, with a quarter as many kills
//! (`check_events`); `a_consumer_group_survives_sigkills` to the same beside a consumer
//! group's worker (XREADGROUP, XACK of all but the first of each batch;
//! `check_group_work`); `flushed_databases_survive_sigkills` to three connections that each
//! write and flush their own database, FLUSHDB alone and in MULTI blocks, with a quarter as
//! many kills (`flush_crash_loop`).
//!
//! `large_restores_killed_midway_leave_their_keys_whole_or_absent` kills the server while
//! RESTOREs build lists past one commit over several transactions: each key is whole or
//! absent after the restart, and what a killed build wrote is freed.
//!
//! `TAILSTORE_KILLS=<n>` sets the kills per mode (default 50).
//!
//! `planted_early_reply_is_caught`, `…_by_the_job_queue`, `…_by_the_transfer_scripts`,
//! `…_by_the_event_stream`, `…_by_the_consumer_group` and `…_by_the_flushes` run the same
//! loops on a server with a bug planted (`TAILSTORE_PLANT=early-reply`, which only builds
//! with debug assertions read: it replies before waiting for durability): each must see an
//! acknowledged write lost (or an acknowledged pop undone) within a few kills in `fsync`
//! mode (there the records wait in a DRAM ring, which a SIGKILL takes with it).

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::{Client, Server};
use tailstore_kv::server::{Plant, PLANT_VAR};
use tailstore_resp::Value;

const WRITERS: usize = 3;
const IN_FLIGHT: usize = 4;

/// Restarts between two checks of every write (the first restart and the last are full).
const FULL_CHECK_EVERY: usize = 10;
/// Runs whose every SET the restarts between full checks read.
const RECENT_RUNS: usize = 3;
/// Older acknowledged SETs those restarts read, chosen anew each time.
const OLDER_SAMPLE: usize = 2_000;

fn kills() -> usize {
    tailstore_crash::kills(50)
}

/// The value stored under `key`: long every 16th sequence number.
fn value_of(key: &str, seq: u64) -> Vec<u8> {
    let len = if seq % 16 == 15 { 5_000 } else { 100 };
    key.bytes().cycle().take(len).collect()
}

/// A database directory and a PMEM file (on /dev/shm when it can be) for one test's server,
/// and the bug planted in every server started on them, if any.
struct Place {
    dir: tempfile::TempDir,
    _shm: tempfile::TempDir,
    pmem: PathBuf,
    plant: Option<Plant>,
}

impl Place {
    fn new() -> Place {
        Place::planted(None)
    }

    /// A place whose servers have `plant` planted (`TAILSTORE_PLANT`).
    fn planted(plant: Option<Plant>) -> Place {
        let shm = support::pmem_dir();
        Place {
            dir: tempfile::tempdir().expect("tempdir"),
            pmem: shm.path().join("kv.pmem"),
            _shm: shm,
            plant,
        }
    }

    /// The server in `mode` on this place's files.
    fn start(&self, mode: &str) -> Server {
        let (dir, pmem) = (support::path(self.dir.path()), support::path(&self.pmem));
        let args = [
            "--threads",
            "2",
            "--buffer-pool",
            "64MiB",
            // Checkpoints during the short runs; in the PMEM modes they leave the pages of the
            // last two MiB dirty, so that kills find redo starting before the last one.
            "--checkpoint-log",
            "1MiB",
            "--db",
            dir,
            "--commit",
            mode,
            "--pmem",
            pmem,
        ];
        // Set for this child alone: the other tests' servers, started by this process at
        // the same time, have none.
        let plant = self.plant.map(|plant| (PLANT_VAR, plant.name()));
        Server::start_with_env(plant.as_slice(), &args)
    }
}

/// What one writer thread did in one run.
#[derive(Default)]
struct Written {
    /// SETs acknowledged with +OK, and SETs sent without a reply.
    acked: Vec<(String, u64)>,
    unacked: Vec<(String, u64)>,
    incr_sent: u64,
    incr_max_ack: i64,
}

fn write_load(address: SocketAddr, run: usize, writer: usize, stop: Arc<AtomicBool>) -> Written {
    let mut written = Written::default();
    let Ok(mut client) = Client::connect(address) else {
        return written;
    };
    let counter = format!("counter:{writer}");
    let mut seq = 0u64;
    // Requests in flight, oldest first: Some((key, seq)) for a SET, None for an INCR.
    let mut in_flight: std::collections::VecDeque<Option<(String, u64)>> = Default::default();
    loop {
        while in_flight.len() < IN_FLIGHT && !stop.load(Ordering::Relaxed) {
            let sent = if seq % 4 == 3 {
                written.incr_sent += 1;
                client.send(&[b"INCR", counter.as_bytes()]).map(|()| None)
            } else {
                let key = format!("w:{run}:{writer}:{seq}");
                let value = value_of(&key, seq);
                client
                    .send(&[b"SET", key.as_bytes(), &value])
                    .map(|()| Some((key, seq)))
            };
            seq += 1;
            match sent {
                Ok(request) => in_flight.push_back(request),
                Err(_) => return unacknowledged(written, in_flight),
            }
        }
        let Some(request) = in_flight.pop_front() else {
            return written;
        };
        match (client.receive(), request) {
            (Ok(Value::Simple(ok)), Some(set)) if ok == b"OK" => written.acked.push(set),
            (Ok(Value::Int(n)), None) => written.incr_max_ack = written.incr_max_ack.max(n),
            (Ok(other), _) => panic!("unexpected reply {other:?}"),
            (Err(_), request) => {
                in_flight.push_front(request);
                return unacknowledged(written, in_flight);
            }
        }
    }
}

fn unacknowledged(
    mut written: Written,
    in_flight: std::collections::VecDeque<Option<(String, u64)>>,
) -> Written {
    written.unacked.extend(in_flight.into_iter().flatten());
    written
}

/// Everything the parent knows the server was asked and answered, over all runs.
#[derive(Default)]
struct Ledger {
    /// Per run, in order.
    runs: Vec<Run>,
    incr_sent: BTreeMap<usize, u64>,
    incr_acked: BTreeMap<usize, i64>,
}

/// The SETs of one run (between a start and its kill), of every writer.
#[derive(Default)]
struct Run {
    acked: Vec<(String, u64)>,
    unacked: Vec<(String, u64)>,
}

impl Ledger {
    fn acked(&self) -> usize {
        self.runs.iter().map(|run| run.acked.len()).sum()
    }

    /// The runs a check reads in full, and the sample of acknowledged SETs it reads from the
    /// runs before them (`full`: every run, no sample).
    fn to_check(&self, full: bool, seed: &mut u64) -> (&[Run], Vec<&(String, u64)>) {
        let first_recent = if full {
            0
        } else {
            self.runs.len().saturating_sub(RECENT_RUNS)
        };
        let (older, recent) = self.runs.split_at(first_recent);
        let older: Vec<&(String, u64)> = older.iter().flat_map(|run| &run.acked).collect();
        let sample = if older.len() <= OLDER_SAMPLE {
            older
        } else {
            (0..OLDER_SAMPLE)
                .map(|_| older[(next_random(seed) % older.len() as u64) as usize])
                .collect()
        };
        (recent, sample)
    }
}

fn next_random(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Checks what the restarted server holds against the ledger (in full, or the recent runs
/// and a sample of the rest); the first violation as text.
fn check(
    address: SocketAddr,
    ledger: &Ledger,
    full: bool,
    seed: &mut u64,
    context: impl Fn(String) -> String,
) -> Result<(), String> {
    let mut client = Client::connect(address).expect("connect for the check");
    let (runs, sample) = ledger.to_check(full, seed);
    let acked = runs.iter().flat_map(|run| &run.acked).chain(sample);
    acknowledged_sets_read_back(&mut client, acked).map_err(&context)?;
    for (key, seq) in runs.iter().flat_map(|run| &run.unacked) {
        let value = client.call(&[b"GET", key.as_bytes()]);
        if value != Value::Null && value != Value::Bulk(value_of(key, *seq)) {
            return Err(context(format!(
                "unacknowledged SET {key} reads back as garbage: {value:?}"
            )));
        }
    }
    counters_within_bounds(&mut client, ledger).map_err(&context)?;
    if full {
        keys_are_counted(&mut client).map_err(&context)?;
    }
    Ok(())
}

/// Every SET in `acked` reads back byte for byte.
fn acknowledged_sets_read_back<'a>(
    client: &mut Client,
    acked: impl Iterator<Item = &'a (String, u64)>,
) -> Result<(), String> {
    let acked: Vec<&(String, u64)> = acked.collect();
    for batch in acked.chunks(200) {
        let mut args: Vec<&[u8]> = vec![b"MGET"];
        args.extend(batch.iter().map(|(key, _)| key.as_bytes()));
        let Value::Array(values) = client.call(&args) else {
            return Err("MGET did not return an array".into());
        };
        for ((key, seq), value) in batch.iter().zip(values) {
            if value != Value::Bulk(value_of(key, *seq)) {
                return Err(format!("acknowledged SET {key} lost or wrong: {value:?}"));
            }
        }
    }
    Ok(())
}

/// Each counter lies between its highest acknowledged INCR and the INCRs sent.
fn counters_within_bounds(client: &mut Client, ledger: &Ledger) -> Result<(), String> {
    for (writer, sent) in &ledger.incr_sent {
        let counter = format!("counter:{writer}");
        let value = match client.call(&[b"GET", counter.as_bytes()]) {
            Value::Bulk(bytes) => String::from_utf8_lossy(&bytes).parse::<i64>().unwrap_or(-1),
            Value::Null => 0,
            other => return Err(format!("counter reads {other:?}")),
        };
        let acked = ledger.incr_acked.get(writer).copied().unwrap_or(0);
        if value < acked || value > *sent as i64 {
            return Err(format!(
                "{counter} = {value}, acknowledged up to {acked}, sent {sent}"
            ));
        }
    }
    Ok(())
}

/// DBSIZE, which reads the counts the writes keep (decision 73), against the keys listed.
fn keys_are_counted(client: &mut Client) -> Result<(), String> {
    let Value::Array(keys) = client.call(&[b"KEYS", b"*"]) else {
        return Err("KEYS * did not return an array".into());
    };
    match client.call(&[b"DBSIZE"]) {
        Value::Int(n) if n == keys.len() as i64 => Ok(()),
        other => Err(format!(
            "DBSIZE answered {other:?}, KEYS * lists {}",
            keys.len()
        )),
    }
}

/// Kills the server `kills` times under the write load; the first violation found, if any.
fn crash_loop(mode: &str, kills: usize, plant: Option<Plant>) -> Result<(), String> {
    let place = Place::planted(plant);
    let mut ledger = Ledger::default();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ mode.len() as u64;
    let mut restart_times = Vec::new();
    for kill in 0..kills {
        let started = Instant::now();
        let mut server = place.start(mode);
        restart_times.push(started.elapsed());
        let full = kill % FULL_CHECK_EVERY == 0;
        let context = |what: String| format!("{mode}, after kill {kill}: {what}");
        check(server.address, &ledger, full, &mut seed, context)?;
        let delay = match next_random(&mut seed) % 10 {
            0 => Duration::ZERO,
            _ => Duration::from_millis(20 + seed % 130),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let stop = stop.clone();
                let address = server.address;
                thread::spawn(move || write_load(address, kill, writer, stop))
            })
            .collect();
        thread::sleep(delay);
        server.child.kill().expect("SIGKILL the server");
        let _ = server.child.wait();
        stop.store(true, Ordering::Relaxed);
        let mut run = Run::default();
        for (writer, handle) in writers.into_iter().enumerate() {
            let written = handle.join().expect("writer thread");
            run.acked.extend(written.acked);
            run.unacked.extend(written.unacked);
            *ledger.incr_sent.entry(writer).or_default() += written.incr_sent;
            let acked = ledger.incr_acked.entry(writer).or_default();
            *acked = (*acked).max(written.incr_max_ack);
        }
        ledger.runs.push(run);
    }
    let server = place.start(mode);
    let context = |what: String| format!("{mode}, after the last kill ({kills}): {what}");
    check(server.address, &ledger, true, &mut seed, context)?;
    drop(server);
    restart_times.sort();
    eprintln!(
        "{mode}: {} kills, {} acknowledged SETs all present; restart to listening: median {:?}, max {:?}",
        kills,
        ledger.acked(),
        restart_times[restart_times.len() / 2],
        restart_times.last().copied().unwrap_or_default()
    );
    assert!(ledger.acked() > 0, "{mode}: no write was ever acknowledged");
    Ok(())
}

#[test]
fn sigkill_fsync() {
    crash_loop("fsync", kills(), None).unwrap_or_else(|violation| panic!("{violation}"));
}

#[test]
fn sigkill_buffer() {
    crash_loop("buffer", kills(), None).unwrap_or_else(|violation| panic!("{violation}"));
}

#[test]
fn sigkill_pmem_log() {
    crash_loop("pmem-log", kills(), None).unwrap_or_else(|violation| panic!("{violation}"));
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
fn planted_early_reply_is_caught() {
    catches_the_early_reply("the writers", crash_loop);
}

/// A kill loop of a workload (in a mode, with a number of kills, on servers with a bug
/// planted or none): its violation, if it found one.
type CrashLoop = fn(&str, usize, Option<Plant>) -> Result<(), String>;

/// Runs `crash_loop` in each durable mode, with `kills() / share` kills each.
fn in_durable_modes(share: usize, crash_loop: CrashLoop) {
    for mode in ["fsync", "buffer"] {
        crash_loop(mode, kills() / share, None).unwrap_or_else(|violation| panic!("{violation}"));
    }
}

/// With the early reply planted in its servers, `crash_loop` (of `workload`) must find a
/// violation within 20 kills in `fsync` mode.
fn catches_the_early_reply(workload: &str, crash_loop: CrashLoop) {
    match crash_loop("fsync", 20, Some(Plant::EarlyReply)) {
        Err(violation) => eprintln!("planted bug caught: {violation}"),
        Ok(()) => panic!("replies sent before durability went unnoticed by {workload} in 20 kills"),
    }
}

/// A restart that leaves pages to redo at their first use says so when it opens, and says
/// again once the first checkpoint has redone the rest; INFO then has nothing left to redo.
#[test]
fn a_restart_says_when_its_background_redo_is_done() {
    let place = Place::new();
    let mut server = place.start("buffer");
    let mut client = Client::connect(server.address).expect("connect");
    // 5,000-byte values (sequence number 15), 10 MB: checkpoints during the writes, trees
    // deeper than their roots, so that the open needs only some of the pages to redo.
    for i in 0..2_000u64 {
        let key = format!("key:{i}");
        let reply = client.call(&[b"SET", key.as_bytes(), &value_of(&key, 15)]);
        assert_eq!(reply, Value::Simple(b"OK".to_vec()), "SET {key}");
    }
    server.child.kill().expect("SIGKILL");
    let _ = server.child.wait();

    let server = place.start("buffer");
    let opened = server.said.join("\n");
    let left: u64 = opened
        .split(" pages to redo, each at its first use")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the open left no pages to redo: {opened}"));
    let done = server
        .says_within("the restart's redo is done", Duration::from_secs(20))
        .unwrap_or_else(|| panic!("no word of the background redo ({left} pages left)"));
    let redone: u64 = done
        .split("redid the ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no page count in {done:?}"));
    assert!(redone <= left, "{done} ({left} pages left at the open)");
    let mut client = Client::connect(server.address).expect("connect");
    let info = match client.call(&[b"INFO", b"persistence"]) {
        Value::Bulk(text) => String::from_utf8(text).expect("INFO is text"),
        other => panic!("INFO answered {other:?}"),
    };
    assert!(
        info.contains("tailstore_pages_left_to_redo:0\r\n"),
        "{info}"
    );
    assert!(
        info.contains(&format!("tailstore_background_redo_pages:{redone}\r\n")),
        "{info}"
    );
    let key = "key:1999";
    assert_eq!(
        client.call(&[b"GET", key.as_bytes()]),
        Value::Bulk(value_of(key, 15))
    );
}

/// Deadlines are stored with the keys: after a SIGKILL and a restart, a key with a TTL still
/// has it and still expires on time, and a key without one keeps none.
#[test]
fn expiry_survives_a_sigkill() {
    let place = Place::new();
    let mut server = place.start("buffer");
    let mut client = Client::connect(server.address).expect("connect");
    assert_eq!(
        client.call(&[b"SET", b"soon", b"v", b"PX", b"1500"]),
        Value::Simple(b"OK".to_vec())
    );
    assert_eq!(
        client.call(&[b"SET", b"later", b"v", b"EX", b"1000"]),
        Value::Simple(b"OK".to_vec())
    );
    assert_eq!(
        client.call(&[b"SET", b"never", b"v"]),
        Value::Simple(b"OK".to_vec())
    );
    let set_at = Instant::now();
    server.child.kill().expect("SIGKILL");
    let _ = server.child.wait();

    let server = place.start("buffer");
    let mut client = Client::connect(server.address).expect("connect");
    let ttl = |client: &mut Client, key: &[u8]| match client.call(&[b"PTTL", key]) {
        Value::Int(ms) => ms,
        other => panic!("PTTL answered {other:?}"),
    };
    let later = ttl(&mut client, b"later");
    assert!(
        (990_000..=1_000_000).contains(&later),
        "PTTL later = {later}"
    );
    assert_eq!(ttl(&mut client, b"never"), -1);
    if set_at.elapsed() < Duration::from_millis(1_400) {
        let soon = ttl(&mut client, b"soon");
        assert!(soon > 0 && soon <= 1_500, "PTTL soon = {soon}");
    }
    thread::sleep(Duration::from_millis(1_600).saturating_sub(set_at.elapsed()));
    assert_eq!(
        client.call(&[b"GET", b"soon"]),
        Value::Null,
        "expired after the restart"
    );
    assert_eq!(client.call(&[b"EXISTS", b"later", b"never"]), Value::Int(2));
}

/// A value near the largest one transaction may write survives a SIGKILL, and so do the
/// writes after it. Regression (was a bug): in `fsync` mode such a SET logs about twice its
/// bytes (full images of the pages it fills), 16.6 MB here, which the log's append accepted
/// (half of serve's 64 MiB ring) and its recovery refused (then at most 16 MiB): the restart
/// ended the log before that record and lost it, and "after" with it.
#[test]
fn the_largest_values_survive_a_sigkill() {
    const LARGE: usize = 8 * 1024 * 1024 - 100_000;
    let large: Vec<u8> = (0..LARGE).map(|i| (i % 251) as u8).collect();
    for mode in ["fsync", "buffer"] {
        let place = Place::new();
        let mut server = place.start(mode);
        let mut client = Client::connect(server.address).expect("connect");
        let ok = Value::Simple(b"OK".to_vec());
        assert_eq!(
            client.call(&[b"SET", b"large", &large]),
            ok,
            "{mode}: SET large"
        );
        assert_eq!(
            client.call(&[b"SET", b"after", b"1"]),
            ok,
            "{mode}: SET after"
        );
        server.child.kill().expect("SIGKILL");
        let _ = server.child.wait();

        let server = place.start(mode);
        let mut client = Client::connect(server.address).expect("connect");
        assert!(
            client.call(&[b"GET", b"large"]) == Value::Bulk(large.clone()),
            "{mode}: the large value after the restart"
        );
        assert_eq!(
            client.call(&[b"GET", b"after"]),
            Value::Bulk(b"1".to_vec()),
            "{mode}: the SET after it"
        );
    }
}

/// What a job queue's producer and consumer were told over all runs. Jobs are numbered in
/// the order they were sent.
#[derive(Default)]
struct Queue {
    /// Jobs sent so far: `0..sent`.
    sent: u64,
    /// Jobs whose RPUSH was acknowledged.
    pushed: std::collections::BTreeSet<u64>,
    /// Jobs a BLPOP answered with.
    taken: std::collections::BTreeSet<u64>,
    /// BLPOPs a kill cut off before their reply: each may have taken one job.
    cut_pops: usize,
}

const QUEUE: &[u8] = b"jobs";

fn job_number(value: &Value) -> Result<u64, String> {
    match value {
        Value::Bulk(job) => std::str::from_utf8(job)
            .ok()
            .and_then(|job| job.strip_prefix("job:"))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("not a job: {value:?}")),
        other => Err(format!("not a job: {other:?}")),
    }
}

/// Pushes jobs `first..` with a few RPUSHes in flight until the connection fails; the jobs
/// acknowledged, and how many were sent.
fn produce(address: SocketAddr, first: u64) -> (Vec<u64>, u64) {
    let (mut acked, mut next) = (Vec::new(), first);
    let Ok(mut client) = Client::connect(address) else {
        return (acked, 0);
    };
    let mut in_flight = std::collections::VecDeque::new();
    loop {
        while in_flight.len() < IN_FLIGHT {
            let job = format!("job:{next}");
            if client.send(&[b"RPUSH", QUEUE, job.as_bytes()]).is_err() {
                return (acked, next - first);
            }
            in_flight.push_back(next);
            next += 1;
        }
        match client.receive() {
            Ok(Value::Int(_)) => acked.extend(in_flight.pop_front()),
            Ok(other) => panic!("RPUSH answered {other:?}"),
            Err(_) => return (acked, next - first),
        }
    }
}

/// Takes jobs with BLPOP (waiting without a deadline) until the connection fails; the jobs
/// taken, and whether a BLPOP was cut off.
fn consume(address: SocketAddr) -> (Vec<u64>, bool) {
    let mut taken = Vec::new();
    let Ok(mut client) = Client::connect(address) else {
        return (taken, false);
    };
    loop {
        if client.send(&[b"BLPOP", QUEUE, b"0"]).is_err() {
            return (taken, true);
        }
        match client.receive() {
            Ok(Value::Array(pair)) if pair.len() == 2 => {
                taken.push(job_number(&pair[1]).unwrap_or_else(|e| panic!("BLPOP: {e}")))
            }
            Ok(other) => panic!("BLPOP answered {other:?}"),
            Err(_) => return (taken, true),
        }
    }
}

/// What the restarted server's queue holds, against what producer and consumer were told.
fn check_queue(address: SocketAddr, queue: &Queue) -> Result<(), String> {
    let mut client = Client::connect(address).expect("connect for the check");
    let Value::Array(items) = client.call(&[b"LRANGE", QUEUE, b"0", b"-1"]) else {
        return Err("LRANGE did not answer an array".into());
    };
    let list = items
        .iter()
        .map(job_number)
        .collect::<Result<Vec<_>, _>>()?;
    if !list.windows(2).all(|pair| pair[0] < pair[1]) {
        return Err(format!(
            "the queue is not in push order, or holds a job twice: {list:?}"
        ));
    }
    if let Some(last) = list.last().filter(|&&last| last >= queue.sent) {
        return Err(format!("job {last} was never sent"));
    }
    if let Some(back) = list.iter().find(|job| queue.taken.contains(job)) {
        return Err(format!(
            "job {back} was taken, acknowledged, and is back in the queue"
        ));
    }
    let listed: std::collections::BTreeSet<u64> = list.into_iter().collect();
    let lost: Vec<u64> = queue
        .pushed
        .iter()
        .filter(|job| !listed.contains(job) && !queue.taken.contains(job))
        .copied()
        .collect();
    if lost.len() > queue.cut_pops {
        return Err(format!(
            "{} acknowledged jobs neither queued nor taken ({:?}…), with {} BLPOPs cut off",
            lost.len(),
            &lost[..lost.len().min(5)],
            queue.cut_pops
        ));
    }
    Ok(())
}

/// A job queue under SIGKILL: one producer RPUSHes numbered jobs, one consumer takes them
/// with BLPOP. After every restart no job acknowledged as taken is back; every job
/// acknowledged as pushed is queued or was taken (by an acknowledged BLPOP, or by one of
/// the BLPOPs a kill cut off, one job each at most); the queue holds each job once, in
/// push order, and only jobs that were sent.
fn queue_crash_loop(mode: &str, kills: usize, plant: Option<Plant>) -> Result<(), String> {
    let mut queue = Queue::default();
    kill_loop(
        mode,
        kills,
        plant,
        &mut queue,
        check_queue,
        |address, _, queue| {
            let first = queue.sent;
            let producer = thread::spawn(move || produce(address, first));
            let consumer = thread::spawn(move || consume(address));
            Box::new(move |queue: &mut Queue| {
                let (pushed, sent) = producer.join().expect("producer");
                let (taken, cut) = consumer.join().expect("consumer");
                queue.sent += sent;
                queue.pushed.extend(pushed);
                queue.taken.extend(taken);
                queue.cut_pops += usize::from(cut);
            })
        },
    )?;
    eprintln!(
        "{mode}: {kills} kills, {} jobs pushed and acknowledged, {} taken and acknowledged",
        queue.pushed.len(),
        queue.taken.len()
    );
    assert!(!queue.taken.is_empty(), "{mode}: no job was ever taken");
    Ok(())
}

/// What a load leaves to do once the server under it was killed: join its threads and
/// add what they were told to the test's record.
type Finish<S> = Box<dyn FnOnce(&mut S)>;

/// `kills` rounds of: start the server in `mode` (with `plant`) on one place's files, `check`
/// what it holds against `record`, start `load` on it, and SIGKILL it 10–100 ms later (the
/// load's threads then find their connections gone); then one last check after the last
/// kill.
fn kill_loop<S>(
    mode: &str,
    kills: usize,
    plant: Option<Plant>,
    record: &mut S,
    check: fn(SocketAddr, &S) -> Result<(), String>,
    mut load: impl FnMut(SocketAddr, usize, &S) -> Finish<S>,
) -> Result<(), String> {
    let place = Place::planted(plant);
    let mut seed = 0x2545_f491_4f6c_dd1du64 ^ mode.len() as u64;
    for kill in 0..kills {
        let mut server = place.start(mode);
        check(server.address, record).map_err(|e| format!("{mode}, after kill {kill}: {e}"))?;
        let finish = load(server.address, kill, record);
        thread::sleep(Duration::from_millis(10 + next_random(&mut seed) % 90));
        server.child.kill().expect("SIGKILL the server");
        let _ = server.child.wait();
        finish(record);
    }
    let server = place.start(mode);
    check(server.address, record).map_err(|e| format!("{mode}, after the last kill: {e}"))
}

#[test]
fn a_job_queue_survives_sigkills() {
    in_durable_modes(2, queue_crash_loop);
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
fn planted_early_reply_is_caught_by_the_job_queue() {
    catches_the_early_reply("the queue", queue_crash_loop);
}

/// Accounts that scripts move amounts between, starting at zero.
const ACCOUNTS: u64 = 5;

/// One transfer as one script: two balances and the ledger's entry change together.
const TRANSFER: &str = "local amount = tonumber(ARGV[1]) \
    redis.call('incrby', KEYS[1], -amount) \
    redis.call('incrby', KEYS[2], amount) \
    return redis.call('rpush', KEYS[3], ARGV[2] .. ':' .. KEYS[1] .. ':' .. KEYS[2] .. ':' .. amount)";

/// What the transfer scripts' clients were told over all runs.
#[derive(Default)]
struct Transfers {
    /// Transfers sent, by number.
    sent: std::collections::BTreeSet<u64>,
    /// Transfers whose script was acknowledged.
    acked: std::collections::BTreeSet<u64>,
}

/// Transfer numbers each client of a run has to itself.
const TRANSFER_STRIDE: u64 = 1 << 24;

/// Runs transfer scripts, numbered from `first`, with a few in flight until the connection
/// fails; those acknowledged, and those sent. Transfer `n` moves `n % 7 + 1` from account
/// `n % 5` to the next one.
fn transfer_load(address: SocketAddr, first: u64) -> (Vec<u64>, Vec<u64>) {
    let (mut acked, mut next) = (Vec::new(), first);
    let Ok(mut client) = Client::connect(address) else {
        return (acked, Vec::new());
    };
    let mut in_flight = std::collections::VecDeque::new();
    loop {
        while in_flight.len() < IN_FLIGHT {
            let from = format!("acct:{}", next % ACCOUNTS);
            let to = format!("acct:{}", (next + 1) % ACCOUNTS);
            let (amount, id) = ((next % 7 + 1).to_string(), next.to_string());
            let request: [&[u8]; 8] = [
                b"EVAL",
                TRANSFER.as_bytes(),
                b"3",
                from.as_bytes(),
                to.as_bytes(),
                b"ledger",
                amount.as_bytes(),
                id.as_bytes(),
            ];
            if client.send(&request).is_err() {
                return (acked, (first..next).collect());
            }
            in_flight.push_back(next);
            next += 1;
        }
        match client.receive() {
            Ok(Value::Int(_)) => acked.extend(in_flight.pop_front()),
            Ok(other) => panic!("EVAL answered {other:?}"),
            Err(_) => return (acked, (first..next).collect()),
        }
    }
}

/// The restarted server's balances and ledger, against the acknowledged transfers: every
/// one is in the ledger, no entry is there twice or was never sent, and the balances are
/// exactly what the ledger's transfers make of zero (no script applied in part).
fn check_transfers(address: SocketAddr, transfers: &Transfers) -> Result<(), String> {
    let mut client = Client::connect(address).expect("connect for the check");
    let Value::Array(entries) = client.call(&[b"LRANGE", b"ledger", b"0", b"-1"]) else {
        return Err("LRANGE did not answer an array".into());
    };
    let mut expected = BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for entry in &entries {
        let Value::Bulk(entry) = entry else {
            return Err(format!("ledger entry {entry:?}"));
        };
        let text = String::from_utf8_lossy(entry);
        let fields: Vec<&str> = text.split(':').collect();
        let parsed = match fields[..] {
            [id, "acct", from, "acct", to, amount] => id
                .parse::<u64>()
                .ok()
                .zip(amount.parse::<i64>().ok())
                .map(|(id, amount)| (id, from, to, amount)),
            _ => None,
        };
        let Some((id, from, to, amount)) = parsed else {
            return Err(format!("ledger entry {text:?}"));
        };
        if !transfers.sent.contains(&id) || !seen.insert(id) {
            return Err(format!("transfer {id} in the ledger twice, or never sent"));
        }
        *expected.entry(format!("acct:{from}")).or_insert(0i64) -= amount;
        *expected.entry(format!("acct:{to}")).or_insert(0i64) += amount;
    }
    if let Some(lost) = transfers.acked.iter().find(|id| !seen.contains(id)) {
        return Err(format!("acknowledged transfer {lost} is not in the ledger"));
    }
    for account in 0..ACCOUNTS {
        let key = format!("acct:{account}");
        let balance = match client.call(&[b"GET", key.as_bytes()]) {
            Value::Bulk(n) => String::from_utf8_lossy(&n).parse::<i64>().ok(),
            Value::Null => Some(0),
            _ => None,
        };
        let want = expected.get(&key).copied().unwrap_or(0);
        if balance != Some(want) {
            return Err(format!(
                "{key} holds {balance:?}, the ledger's transfers make {want}: a script applied in part"
            ));
        }
    }
    Ok(())
}

/// Transfer scripts under SIGKILL (two clients), checked after every restart.
fn transfers_crash_loop(mode: &str, kills: usize, plant: Option<Plant>) -> Result<(), String> {
    let mut transfers = Transfers::default();
    kill_loop(
        mode,
        kills,
        plant,
        &mut transfers,
        check_transfers,
        |address, kill, _| {
            let clients: Vec<_> = (0..2)
                .map(|client| {
                    let first = (2 * kill as u64 + client) * TRANSFER_STRIDE;
                    thread::spawn(move || transfer_load(address, first))
                })
                .collect();
            Box::new(move |transfers: &mut Transfers| {
                for client in clients {
                    let (acked, sent) = client.join().expect("client");
                    transfers.acked.extend(acked);
                    transfers.sent.extend(sent);
                }
            })
        },
    )?;
    eprintln!(
        "{mode}: {kills} kills, {} transfer scripts acknowledged",
        transfers.acked.len()
    );
    assert!(
        !transfers.acked.is_empty(),
        "{mode}: no script was ever acknowledged"
    );
    Ok(())
}

#[test]
fn transfer_scripts_survive_sigkills_whole() {
    in_durable_modes(2, transfers_crash_loop);
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
fn planted_early_reply_is_caught_by_the_transfer_scripts() {
    catches_the_early_reply("the scripts", transfers_crash_loop);
}

/// What an event log's producer was told over all runs: events are numbered in the order
/// they were sent, and each acknowledged XADD answered the entry's ID.
#[derive(Default)]
struct EventLog {
    /// Events sent so far: `0..sent`.
    sent: u64,
    /// Acknowledged events, by number, with the ID XADD answered.
    acked: BTreeMap<u64, String>,
}

const EVENTS: &[u8] = b"events";

/// Appends events `first..` with `XADD events * n <number>`, a few in flight, until the
/// connection fails; the events acknowledged with their IDs, and how many were sent.
fn append_events(address: SocketAddr, first: u64) -> (Vec<(u64, String)>, u64) {
    let (mut acked, mut next) = (Vec::new(), first);
    let Ok(mut client) = Client::connect(address) else {
        return (acked, 0);
    };
    let mut in_flight = std::collections::VecDeque::new();
    loop {
        while in_flight.len() < IN_FLIGHT {
            let number = next.to_string();
            if client
                .send(&[b"XADD", EVENTS, b"*", b"n", number.as_bytes()])
                .is_err()
            {
                return (acked, next - first);
            }
            in_flight.push_back(next);
            next += 1;
        }
        match client.receive() {
            Ok(Value::Bulk(id)) => {
                let id = String::from_utf8(id).expect("an ID is text");
                acked.extend(in_flight.pop_front().map(|n| (n, id)));
            }
            Ok(other) => panic!("XADD answered {other:?}"),
            Err(_) => return (acked, next - first),
        }
    }
}

/// The restarted server's stream against what the producer was told: every acknowledged
/// event is there under the ID it was given; entries are in event order, each event once,
/// and only events that were sent; a new entry's ID is above every acknowledged one.
fn check_events(address: SocketAddr, log: &EventLog) -> Result<(), String> {
    let mut client = Client::connect(address).expect("connect for the check");
    let Value::Array(entries) = client.call(&[b"XRANGE", EVENTS, b"-", b"+"]) else {
        return Err("XRANGE did not answer an array".into());
    };
    let mut stored = BTreeMap::new();
    let mut last = None;
    for entry in &entries {
        let (id, number) = match entry {
            Value::Array(pair) => match (&pair[0], &pair[1]) {
                (Value::Bulk(id), Value::Array(fields)) if fields.len() == 2 => {
                    (String::from_utf8_lossy(id).into_owned(), &fields[1])
                }
                _ => return Err(format!("not an entry: {entry:?}")),
            },
            _ => return Err(format!("not an entry: {entry:?}")),
        };
        let number: u64 = match number {
            Value::Bulk(n) => std::str::from_utf8(n).ok().and_then(|n| n.parse().ok()),
            _ => None,
        }
        .ok_or_else(|| format!("entry {id} holds no event number"))?;
        if number >= log.sent || last.is_some_and(|last| number <= last) {
            return Err(format!("event {number} out of order, twice or never sent"));
        }
        last = Some(number);
        stored.insert(number, id);
    }
    for (number, id) in &log.acked {
        match stored.get(number) {
            Some(found) if found == id => {}
            Some(found) => {
                return Err(format!(
                    "event {number} acknowledged as {id}, stored as {found}"
                ))
            }
            None => return Err(format!("acknowledged event {number} ({id}) is gone")),
        }
    }
    if let Some(id) = log.acked.values().last() {
        let again = client.call(&[b"XADD", EVENTS, id.as_bytes(), b"n", b"again"]);
        if !matches!(&again, Value::Error(text) if String::from_utf8_lossy(text).contains("equal or smaller"))
        {
            return Err(format!("XADD {id} after the restart answered {again:?}"));
        }
    }
    Ok(())
}

/// An event log under SIGKILL: one producer XADDs numbered events (`check_events` says
/// what each restart must hold).
fn events_crash_loop(mode: &str, kills: usize, plant: Option<Plant>) -> Result<(), String> {
    let mut log = EventLog::default();
    kill_loop(
        mode,
        kills,
        plant,
        &mut log,
        check_events,
        |address, _, log| {
            let first = log.sent;
            let producer = thread::spawn(move || append_events(address, first));
            Box::new(move |log: &mut EventLog| {
                let (acked, sent) = producer.join().expect("producer");
                log.sent += sent;
                log.acked.extend(acked);
            })
        },
    )?;
    eprintln!(
        "{mode}: {kills} kills, {} events acknowledged",
        log.acked.len()
    );
    assert!(
        !log.acked.is_empty(),
        "{mode}: no event was ever acknowledged"
    );
    Ok(())
}

/// What a consumer group's worker was told, beside its stream's producer.
#[derive(Default)]
struct GroupWork {
    log: EventLog,
    /// Entries an XREADGROUP reply handed the worker.
    delivered: std::collections::BTreeSet<String>,
    /// Entries whose XACK reply counted them.
    acked: std::collections::BTreeSet<String>,
    /// Entries of an XACK a kill cut off before its reply.
    cut_acks: std::collections::BTreeSet<String>,
}

const GROUP: &[u8] = b"workers";

/// The IDs of an XREADGROUP reply's entries (one stream).
fn delivered_ids(reply: &Value) -> Result<Vec<String>, String> {
    let Value::Array(streams) = reply else {
        return Err(format!("XREADGROUP answered {reply:?}"));
    };
    let entries = match streams.first() {
        Some(Value::Array(stream)) if stream.len() == 2 => &stream[1],
        other => return Err(format!("XREADGROUP answered a stream {other:?}")),
    };
    let Value::Array(entries) = entries else {
        return Err(format!("XREADGROUP answered entries {entries:?}"));
    };
    entries
        .iter()
        .map(|entry| match entry {
            Value::Array(pair) => match &pair[0] {
                Value::Bulk(id) => Ok(String::from_utf8_lossy(id).into_owned()),
                other => Err(format!("an entry's ID {other:?}")),
            },
            other => Err(format!("an entry {other:?}")),
        })
        .collect()
}

/// A worker of the group: takes up to 8 new entries at a time (waiting for them), then
/// acknowledges all but the first, until the connection fails. What it was handed, what its XACKs
/// counted, and the entries of an XACK cut off.
fn run_worker(address: SocketAddr) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut delivered, mut acked) = (Vec::new(), Vec::new());
    let Ok(mut client) = Client::connect(address) else {
        return (delivered, acked, Vec::new());
    };
    let read: [&[u8]; 10] = [
        b"XREADGROUP",
        b"GROUP",
        GROUP,
        b"w",
        b"COUNT",
        b"8",
        b"BLOCK",
        b"0",
        b"STREAMS",
        EVENTS,
    ];
    loop {
        let mut request = read.to_vec();
        request.push(b">");
        let ids = match client.send(&request).and_then(|()| client.receive()) {
            Ok(reply) => delivered_ids(&reply).unwrap_or_else(|e| panic!("{e}")),
            Err(_) => return (delivered, acked, Vec::new()),
        };
        delivered.extend(ids.iter().cloned());
        // The first of each batch is left pending, for the checks to find there.
        let ids = ids.get(1..).unwrap_or_default().to_vec();
        let mut ack: Vec<&[u8]> = vec![b"XACK", EVENTS, GROUP];
        ack.extend(ids.iter().map(|id| id.as_bytes()));
        match client.send(&ack).and_then(|()| client.receive()) {
            Ok(Value::Int(n)) if n as usize == ids.len() => acked.extend(ids),
            Ok(Value::Error(_)) if ids.is_empty() => {} // XACK without IDs: its arity
            Ok(other) => panic!("XACK of {} entries answered {other:?}", ids.len()),
            Err(_) => return (delivered, acked, ids),
        }
    }
}

/// The IDs that lead the arrays of a reply (XRANGE's entries, XPENDING's detailed form).
fn leading_ids(items: &[Value]) -> std::collections::BTreeSet<String> {
    items
        .iter()
        .filter_map(|item| match item {
            Value::Array(fields) => match fields.first() {
                Some(Value::Bulk(id)) => Some(String::from_utf8_lossy(id).into_owned()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The restarted server's group against what its worker was told (and the stream against
/// its producer, `check_events`): no acknowledged entry is pending; every entry handed
/// out and not acknowledged (nor in an XACK cut off) is; only stored entries are pending;
/// and an entry handed out is never handed out again as new.
fn check_group_work(address: SocketAddr, work: &GroupWork) -> Result<(), String> {
    check_events(address, &work.log)?;
    let mut client = Client::connect(address).expect("connect for the check");
    let created = client.call(&[b"XGROUP", b"CREATE", EVENTS, GROUP, b"0", b"MKSTREAM"]);
    if !matches!(&created, Value::Simple(_) | Value::Error(_)) {
        return Err(format!("XGROUP CREATE answered {created:?}"));
    }
    let Value::Array(pending) =
        client.call(&[b"XPENDING", EVENTS, GROUP, b"-", b"+", b"100000000"])
    else {
        return Err("XPENDING did not answer an array".into());
    };
    let pending = leading_ids(&pending);
    if let Some(id) = work.acked.iter().find(|id| pending.contains(*id)) {
        return Err(format!("entry {id} was acknowledged and is pending again"));
    }
    let unacked = work.delivered.iter().filter(|id| !work.acked.contains(*id));
    if let Some(id) = unacked
        .filter(|id| !work.cut_acks.contains(*id))
        .find(|id| !pending.contains(*id))
    {
        return Err(format!(
            "entry {id} was handed out, not acknowledged, and is not pending"
        ));
    }
    let Value::Array(entries) = client.call(&[b"XRANGE", EVENTS, b"-", b"+"]) else {
        return Err("XRANGE did not answer an array".into());
    };
    let existing = leading_ids(&entries);
    if let Some(id) = pending.iter().find(|id| !existing.contains(*id)) {
        return Err(format!("entry {id} is pending and not in the stream"));
    }
    let next = client.call(&[
        b"XREADGROUP",
        b"GROUP",
        GROUP,
        b"checker",
        b"COUNT",
        b"1",
        b"STREAMS",
        EVENTS,
        b">",
    ]);
    if next != Value::Null {
        let ids = delivered_ids(&next)?;
        if let Some(id) = ids.iter().find(|id| work.delivered.contains(*id)) {
            return Err(format!("entry {id} was handed out again as new"));
        }
        let mut ack: Vec<&[u8]> = vec![b"XACK", EVENTS, GROUP];
        ack.extend(ids.iter().map(|id| id.as_bytes()));
        client.call(&ack);
    }
    Ok(())
}

/// A stream's producer and a consumer group's worker under SIGKILL (`check_group_work`
/// says what each restart must hold).
fn group_crash_loop(mode: &str, kills: usize, plant: Option<Plant>) -> Result<(), String> {
    let mut work = GroupWork::default();
    kill_loop(
        mode,
        kills,
        plant,
        &mut work,
        check_group_work,
        |address, _, work| {
            let first = work.log.sent;
            let producer = thread::spawn(move || append_events(address, first));
            let worker = thread::spawn(move || run_worker(address));
            Box::new(move |work: &mut GroupWork| {
                let (acked, sent) = producer.join().expect("producer");
                work.log.sent += sent;
                work.log.acked.extend(acked);
                let (delivered, acked, cut) = worker.join().expect("worker");
                work.delivered.extend(delivered);
                work.acked.extend(acked);
                work.cut_acks.extend(cut);
            })
        },
    )?;
    eprintln!(
        "{mode}: {kills} kills, {} entries handed out, {} acknowledged",
        work.delivered.len(),
        work.acked.len()
    );
    assert!(
        !work.acked.is_empty(),
        "{mode}: no entry was ever acknowledged"
    );
    Ok(())
}

#[test]
fn a_consumer_group_survives_sigkills() {
    in_durable_modes(4, group_crash_loop);
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
fn planted_early_reply_is_caught_by_the_consumer_group() {
    catches_the_early_reply("the group", group_crash_loop);
}

#[test]
fn an_event_stream_survives_sigkills() {
    in_durable_modes(4, events_crash_loop);
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
fn planted_early_reply_is_caught_by_the_event_stream() {
    catches_the_early_reply("the stream", events_crash_loop);
}

/// The number INFO gives for `field`.
fn info_number(client: &mut Client, field: &str) -> Option<u64> {
    let Value::Bulk(text) = client.call(&[b"INFO"]) else {
        return None;
    };
    let prefix = format!("{field}:");
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|line| line.strip_prefix(&prefix)?.trim().parse().ok())
}

/// Rounds of: start a `buffer` server on one place's files, `check` the keys the earlier
/// rounds wrote (with whether each round's request was answered), wait until the lazy free
/// has nothing queued (what a killed request wrote goes there), then send round `round`'s
/// `request` and SIGKILL the server at a moment within `kill_within_ms` drawn from `seed`;
/// six rounds, a last check after the last kill. Whether each request was answered.
fn requests_killed_midway(
    mut seed: u64,
    kill_within_ms: u64,
    check: impl Fn(&mut Client, usize, &[bool]),
    request: impl Fn(usize) -> Vec<Vec<u8>>,
) -> Vec<bool> {
    let place = Place::new();
    let mut answered: Vec<bool> = Vec::new();
    for round in 0..=6usize {
        let mut server = place.start("buffer");
        let mut client = Client::connect(server.address).expect("connect");
        check(&mut client, round, &answered);
        let deadline = Instant::now() + Duration::from_secs(60);
        while info_number(&mut client, "lazyfree_pending_objects") != Some(0) {
            assert!(
                Instant::now() < deadline,
                "after kill {round}: a killed request's writes are still queued"
            );
            thread::sleep(Duration::from_millis(20));
        }
        if round == 6 {
            break;
        }
        let args = request(round);
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        client.send(&args).expect("send the request");
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(client.receive());
        });
        thread::sleep(Duration::from_millis(
            next_random(&mut seed) % kill_within_ms,
        ));
        server.child.kill().expect("SIGKILL the server");
        let _ = server.child.wait();
        let reply = rx
            .recv_timeout(Duration::from_secs(10))
            .ok()
            .and_then(Result::ok);
        answered.push(reply == Some(Value::Simple(b"OK".to_vec())));
    }
    answered
}

/// RESTOREs of lists past one commit, built over several transactions (decision 140),
/// killed at random moments: after each restart every such key is whole or absent, whole
/// if its RESTORE was answered, and what a killed build wrote goes to the lazy free.
#[test]
fn large_restores_killed_midway_leave_their_keys_whole_or_absent() {
    // 100-byte elements, 12 MB: past the 8 MiB a commit may write with a 64 MiB pool.
    const COUNT: i64 = 120_000;
    let items: Vec<Vec<u8>> = (0..COUNT)
        .map(|i| format!("{i:0>100}").into_bytes())
        .collect();
    let payload = tailstore_rdb::dump(&tailstore_rdb::Object::List(items));
    let check = |client: &mut Client, round: usize, answered: &[bool]| {
        for (earlier, answered) in answered.iter().enumerate() {
            let key = format!("list:{earlier}");
            let len = client.call(&[b"LLEN", key.as_bytes()]);
            let whole = len == Value::Int(COUNT);
            assert!(
                whole || (!answered && len == Value::Int(0)),
                "after kill {round}: {key} (answered: {answered}) has {len:?} elements"
            );
            if whole {
                let last = client.call(&[b"LINDEX", key.as_bytes(), b"-1"]);
                assert_eq!(
                    last,
                    Value::Bulk(format!("{:0>100}", COUNT - 1).into_bytes())
                );
            }
        }
    };
    let request = |round: usize| {
        let key = format!("list:{round}").into_bytes();
        vec![b"RESTORE".to_vec(), key, b"0".to_vec(), payload.clone()]
    };
    let answered = requests_killed_midway(0x2545_f491_4f6c_dd1d, 1_500, check, request);
    eprintln!("RESTOREs answered before their kill: {answered:?}");
}

/// SETs of strings longer than a commit (written in pieces under a new owner, decision
/// 148), killed at random moments: after each restart every such key is whole or absent,
/// whole if its SET was answered, and a killed SET's pieces go to the lazy free.
#[test]
fn long_sets_killed_midway_leave_their_keys_whole_or_absent() {
    // 12 MB: past the 8 MiB a commit may write with a 64 MiB pool.
    const LEN: usize = 12_000_000;
    let value =
        |round: usize| -> Vec<u8> { (0..LEN).map(|i| (round * 31 + i % 241) as u8).collect() };
    let check = |client: &mut Client, round: usize, answered: &[bool]| {
        for (earlier, answered) in answered.iter().enumerate() {
            let key = format!("string:{earlier}");
            match client.call(&[b"GET", key.as_bytes()]) {
                Value::Bulk(read) => assert!(
                    read == value(earlier),
                    "after kill {round}: {key} is not the value its SET sent"
                ),
                Value::Null => assert!(!*answered, "after kill {round}: answered {key} is gone"),
                other => panic!("after kill {round}: GET {key} answered {other:?}"),
            }
        }
    };
    let request = |round: usize| {
        let key = format!("string:{round}").into_bytes();
        vec![b"SET".to_vec(), key, value(round)]
    };
    let answered = requests_killed_midway(0x9e37_79b9_7f4a_7c15, 600, check, request);
    eprintln!("long SETs answered before their kill: {answered:?}");
}

/// What the clients loading and deleting function libraries were told over all runs.
#[derive(Default)]
struct Libraries {
    sent_loads: std::collections::BTreeSet<u64>,
    acked_loads: std::collections::BTreeSet<u64>,
    sent_deletes: std::collections::BTreeSet<u64>,
    acked_deletes: std::collections::BTreeSet<u64>,
}

/// Library numbers each run has to itself.
const LIBRARY_STRIDE: u64 = 1 << 20;

/// Library `n`: `lib_n`, whose one function `f_n` answers `n`.
fn library_code(n: u64) -> String {
    format!("#!lua name=lib_{n}\nredis.register_function('f_{n}', function() return {n} end)")
}

/// Loads libraries numbered from `first`, and after each deletes the one loaded three
/// before, one request at a time until the connection fails: what was sent and told.
fn library_load(address: SocketAddr, first: u64) -> Libraries {
    let mut told = Libraries::default();
    let Ok(mut client) = Client::connect(address) else {
        return told;
    };
    for n in first.. {
        let code = library_code(n);
        told.sent_loads.insert(n);
        if client
            .send(&[b"FUNCTION", b"LOAD", code.as_bytes()])
            .is_err()
        {
            return told;
        }
        match client.receive() {
            Ok(Value::Bulk(name)) if name == format!("lib_{n}").as_bytes() => {
                told.acked_loads.insert(n);
            }
            Ok(other) => panic!("FUNCTION LOAD answered {other:?}"),
            Err(_) => return told,
        }
        let Some(old) = n.checked_sub(3).filter(|old| *old >= first) else {
            continue;
        };
        let name = format!("lib_{old}");
        told.sent_deletes.insert(old);
        if client
            .send(&[b"FUNCTION", b"DELETE", name.as_bytes()])
            .is_err()
        {
            return told;
        }
        match client.receive() {
            Ok(Value::Simple(ok)) if ok == b"OK" => {
                told.acked_deletes.insert(old);
            }
            Ok(other) => panic!("FUNCTION DELETE answered {other:?}"),
            Err(_) => return told,
        }
    }
    told
}

/// The restarted server's libraries against what their clients were told: every
/// acknowledged load is there and its function answers, unless a delete of it was sent;
/// no acknowledged delete is undone; no library is there that was never sent.
fn check_libraries(address: SocketAddr, told: &Libraries) -> Result<(), String> {
    let mut client = Client::connect(address).expect("connect for the check");
    let Value::Array(listed) = client.call(&[b"FUNCTION", b"LIST"]) else {
        return Err("FUNCTION LIST did not answer an array".into());
    };
    let mut present = std::collections::BTreeSet::new();
    for library in &listed {
        let name = match library {
            Value::Array(fields) => match fields.get(1) {
                Some(Value::Bulk(name)) => String::from_utf8_lossy(name).into_owned(),
                other => return Err(format!("a library named {other:?}")),
            },
            other => return Err(format!("FUNCTION LIST listed {other:?}")),
        };
        let n = name
            .strip_prefix("lib_")
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|n| told.sent_loads.contains(n))
            .ok_or_else(|| format!("library {name} was never loaded"))?;
        present.insert(n);
    }
    for n in &told.acked_loads {
        if told.sent_deletes.contains(n) {
            continue;
        }
        if !present.contains(n) {
            return Err(format!("acknowledged library lib_{n} is missing"));
        }
        let function = format!("f_{n}");
        let answer = client.call(&[b"FCALL", function.as_bytes(), b"0"]);
        if answer != Value::Int(*n as i64) {
            return Err(format!("FCALL {function} answered {answer:?}"));
        }
    }
    if let Some(n) = told.acked_deletes.iter().find(|n| present.contains(n)) {
        return Err(format!(
            "library lib_{n}, deleted with an acknowledgement, is back"
        ));
    }
    Ok(())
}

/// Function libraries loaded and deleted under SIGKILL, checked after every restart.
fn libraries_crash_loop(mode: &str, kills: usize, plant: Option<Plant>) -> Result<(), String> {
    let mut told = Libraries::default();
    kill_loop(
        mode,
        kills,
        plant,
        &mut told,
        check_libraries,
        |address, kill, _| {
            let first = kill as u64 * LIBRARY_STRIDE;
            let client = thread::spawn(move || library_load(address, first));
            Box::new(move |told: &mut Libraries| {
                let run = client.join().expect("client");
                told.sent_loads.extend(run.sent_loads);
                told.acked_loads.extend(run.acked_loads);
                told.sent_deletes.extend(run.sent_deletes);
                told.acked_deletes.extend(run.acked_deletes);
            })
        },
    )?;
    eprintln!(
        "{mode}: {kills} kills, {} library loads and {} deletes acknowledged",
        told.acked_loads.len(),
        told.acked_deletes.len()
    );
    assert!(
        !told.acked_loads.is_empty(),
        "{mode}: no library load was ever acknowledged"
    );
    Ok(())
}

#[test]
fn function_libraries_survive_sigkills() {
    in_durable_modes(5, libraries_crash_loop);
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
fn planted_early_reply_is_caught_by_the_libraries() {
    catches_the_early_reply("the libraries", libraries_crash_loop);
}

/// What one connection does to its own database under the flush workload.
#[derive(Clone, Debug)]
enum DbOp {
    Set(String),
    Flush,
    /// MULTI, SET the key, FLUSHDB, SET the key again … EXEC: the key alone is left.
    SetFlushSet(String),
}

impl DbOp {
    fn apply(&self, keys: &mut std::collections::BTreeSet<String>) {
        match self {
            DbOp::Set(key) => {
                keys.insert(key.clone());
            }
            DbOp::Flush => keys.clear(),
            DbOp::SetFlushSet(key) => {
                keys.clear();
                keys.insert(key.clone());
            }
        }
    }

    /// Its requests, and whether a reply acknowledges it (the last request's).
    fn requests(&self) -> Vec<Vec<&[u8]>> {
        let flush: &[u8] = b"FLUSHDB";
        match self {
            DbOp::Set(key) => vec![vec![b"SET", key.as_bytes(), key.as_bytes()]],
            DbOp::Flush => vec![vec![flush]],
            DbOp::SetFlushSet(key) => vec![
                vec![b"MULTI"],
                vec![b"SET", key.as_bytes(), key.as_bytes()],
                vec![flush],
                vec![b"SET", key.as_bytes(), key.as_bytes()],
                vec![b"EXEC"],
            ],
        }
    }

    fn acknowledged_by(&self, reply: &Value) -> bool {
        match (self, reply) {
            (DbOp::SetFlushSet(_), Value::Array(replies)) => replies.len() == 3,
            (_, Value::Simple(ok)) => ok == b"OK",
            _ => false,
        }
    }
}

/// Runs `db`'s share of the flush workload (keys `f:<run>:<db>:<seq>`, every 8th operation
/// a FLUSHDB, every 16th a block) with a few operations in flight until the connection
/// fails; the operations acknowledged and those sent without a reply, each in order.
fn flush_load(address: SocketAddr, run: usize, db: usize, stop: Arc<AtomicBool>) -> OpsOf {
    let mut ops = OpsOf::default();
    let Ok(mut client) = Client::connect(address) else {
        return ops;
    };
    // The kill may come at once: a failed SELECT ends the run with nothing sent.
    let selected = client
        .send(&[b"SELECT", db.to_string().as_bytes()])
        .and_then(|()| client.receive());
    if !matches!(selected, Ok(Value::Simple(ok)) if ok == b"OK") {
        return ops;
    }
    let mut in_flight = std::collections::VecDeque::new();
    let mut seq = 0u64;
    loop {
        while in_flight.len() < IN_FLIGHT && !stop.load(Ordering::Relaxed) {
            let key = format!("f:{run}:{db}:{seq}");
            let op = match seq % 16 {
                7 => DbOp::Flush,
                15 => DbOp::SetFlushSet(key),
                _ => DbOp::Set(key),
            };
            seq += 1;
            let sent = op.requests().iter().try_for_each(|args| client.send(args));
            in_flight.push_back(op);
            if sent.is_err() {
                ops.unacked.extend(in_flight);
                return ops;
            }
        }
        let Some(op) = in_flight.pop_front() else {
            return ops;
        };
        let replies: Result<Vec<Value>, _> =
            op.requests().iter().map(|_| client.receive()).collect();
        match replies.as_deref().map(|replies| replies.last()) {
            Ok(Some(last)) if op.acknowledged_by(last) => ops.acked.push(op),
            Ok(_) => panic!("unexpected replies to {op:?}: {replies:?}"),
            Err(_) => {
                ops.unacked.push(op);
                ops.unacked.extend(in_flight);
                return ops;
            }
        }
    }
}

/// One connection's operations in one run: acknowledged, then sent without a reply.
#[derive(Default)]
struct OpsOf {
    acked: Vec<DbOp>,
    unacked: Vec<DbOp>,
}

/// The keys of database `db` (each holding its own name as its value), checked against the
/// counts DBSIZE reads.
fn keys_of(client: &mut Client, db: usize) -> Result<std::collections::BTreeSet<String>, String> {
    client.call(&[b"SELECT", db.to_string().as_bytes()]);
    let Value::Array(listed) = client.call(&[b"KEYS", b"*"]) else {
        return Err("KEYS did not answer an array".into());
    };
    let mut keys = std::collections::BTreeSet::new();
    for key in listed {
        let Value::Bulk(key) = key else {
            return Err(format!("KEYS listed {key:?}"));
        };
        if client.call(&[b"GET", &key]) != Value::Bulk(key.clone()) {
            return Err(format!(
                "{} does not hold its name",
                String::from_utf8_lossy(&key)
            ));
        }
        keys.insert(String::from_utf8_lossy(&key).into_owned());
    }
    match client.call(&[b"DBSIZE"]) {
        Value::Int(n) if n == keys.len() as i64 => Ok(keys),
        other => Err(format!(
            "database {db}: DBSIZE {other:?}, {} keys listed",
            keys.len()
        )),
    }
}

/// The state found after a kill must be what the acknowledged operations left, followed by
/// a prefix of those sent without a reply (one connection's commits are durable in order).
fn check_flushed(
    found: &std::collections::BTreeSet<String>,
    before: &std::collections::BTreeSet<String>,
    ops: &OpsOf,
) -> Result<(), String> {
    let mut state = before.clone();
    ops.acked.iter().for_each(|op| op.apply(&mut state));
    let in_flight = std::iter::once(None).chain(ops.unacked.iter().map(Some));
    for op in in_flight {
        if let Some(op) = op {
            op.apply(&mut state);
        }
        if &state == found {
            return Ok(());
        }
    }
    Err(format!(
        "found {} keys, {:?}…; acknowledged operations leave {} keys (last acknowledged: \
         {:?}; sent without a reply: {:?})",
        found.len(),
        found.iter().take(5).collect::<Vec<_>>(),
        {
            let mut acked = before.clone();
            ops.acked.iter().for_each(|op| op.apply(&mut acked));
            acked.len()
        },
        ops.acked.last(),
        ops.unacked
    ))
}

/// Databases the flush workload writes, a connection each.
const FLUSHED_DBS: usize = 3;

/// Kills the server `kills` times while each of three connections writes its own database
/// and flushes it (FLUSHDB every 8th operation, a MULTI block with FLUSHDB between two SETs
/// every 16th); the first violation found, if any. After each restart every database holds
/// exactly what its acknowledged operations left, followed by some of those in flight, no
/// key flushed by an acknowledged FLUSHDB comes back, and DBSIZE agrees with KEYS (the kill
/// may have stopped the background free of flushed keys halfway). After the last restart
/// the free finishes (INFO's `lazyfree_pending_objects` reaches 0).
fn flush_crash_loop(mode: &str, kills: usize, plant: Option<Plant>) -> Result<(), String> {
    let place = Place::planted(plant);
    let mut states = vec![std::collections::BTreeSet::new(); FLUSHED_DBS];
    let mut runs: Vec<OpsOf> = (0..FLUSHED_DBS).map(|_| OpsOf::default()).collect();
    let mut seed = 0x2545_f491_4f6c_dd1du64 ^ mode.len() as u64;
    let mut acknowledged = 0;
    for kill in 0..=kills {
        let mut server = place.start(mode);
        let mut client = Client::connect(server.address).map_err(|e| e.to_string())?;
        for (db, (state, ops)) in states.iter_mut().zip(&runs).enumerate() {
            let found = keys_of(&mut client, db)?;
            check_flushed(&found, state, ops)
                .map_err(|what| format!("{mode}, after kill {kill}, database {db}: {what}"))?;
            *state = found;
        }
        if kill == kills {
            return freed_while_progressing(&mut client)
                .map(|took| {
                    eprintln!(
                        "{mode}: {kills} kills, {acknowledged} acknowledged operations; the \
                         flushed keys freed {took:?} after the last restart"
                    );
                })
                .map_err(|what| format!("{mode}: {what}"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let loads: Vec<_> = (0..FLUSHED_DBS)
            .map(|db| {
                let (stop, address) = (stop.clone(), server.address);
                thread::spawn(move || flush_load(address, kill, db, stop))
            })
            .collect();
        thread::sleep(Duration::from_millis(20 + next_random(&mut seed) % 130));
        server.child.kill().expect("SIGKILL the server");
        let _ = server.child.wait();
        stop.store(true, Ordering::Relaxed);
        runs = loads
            .into_iter()
            .map(|load| load.join().expect("load"))
            .collect();
        acknowledged += runs.iter().map(|ops| ops.acked.len()).sum::<usize>();
    }
    unreachable!("the loop returns after its last restart")
}

/// Waits until the background free has freed every flushed key (INFO's
/// `lazyfree_pending_objects` reaches 0); an error if it stops getting anywhere — no fewer
/// keys pending for 30 s — not merely if it is slow (with a flush every 8th operation over
/// many kills in `fsync` mode, a loaded machine took more than 30 s in all, 2026-12-05).
fn freed_while_progressing(client: &mut Client) -> Result<Duration, String> {
    const STALL: Duration = Duration::from_secs(30);
    let pending = |client: &mut Client| -> Option<u64> {
        let Value::Bulk(info) = client.call(&[b"INFO", b"memory"]) else {
            return None;
        };
        let info = String::from_utf8_lossy(&info).into_owned();
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix("lazyfree_pending_objects:"))?;
        line.trim().parse().ok()
    };
    let began = std::time::Instant::now();
    let (mut fewest, mut since) = (u64::MAX, began);
    loop {
        match pending(client) {
            Some(0) => return Ok(began.elapsed()),
            Some(left) if left < fewest => (fewest, since) = (left, std::time::Instant::now()),
            _ => {}
        }
        if since.elapsed() > STALL {
            return Err(format!(
                "the background free stopped at {fewest} flushed keys left (none freed for {STALL:?})"
            ));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Flushes, at the top level and in MULTI blocks, under SIGKILL (see `flush_crash_loop`).
#[test]
fn flushed_databases_survive_sigkills() {
    in_durable_modes(4, flush_crash_loop);
}

#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
fn planted_early_reply_is_caught_by_the_flushes() {
    catches_the_early_reply("the flushes", flush_crash_loop);
}
