//! A read never returns a value older than a write that had committed before the read
//! began: not one whose commit had returned (its changes applied, not yet durable), at the
//! keyspace, nor one whose reply a client had received, through the server. Client-side
//! caching relies on the first (`server/tracking.rs`, "Why no stale copy survives": a write
//! signals its keys after it is applied, so a read registered before it sees it or is
//! told); every Redis client relies on the second.
//!
//! Two writers write their own round number to every key, each round one transaction (a
//! MULTI block, an MSET, a script) or one command per key; each publishes the round it
//! finished. A reader notes the rounds finished, reads every key, and checks that no value
//! it read is from an earlier round of its writer than the one noted.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use support::{TestServer, WritesOfEveryKey};
use tailstore_kv::command::lookup;
use tailstore_kv::{BlockStep, Keyspace};
use tailstore_resp::Reply;

const KEYS: usize = 8;
const WRITERS: usize = 2;
const READERS: usize = 2;
const RUN_FOR: Duration = Duration::from_secs(2);

/// What the writers have finished: the last round of each.
struct Finished([AtomicU64; WRITERS]);

impl Finished {
    fn new() -> Finished {
        Finished([AtomicU64::new(0), AtomicU64::new(0)])
    }

    fn now(&self) -> [u64; WRITERS] {
        [0, 1].map(|w| self.0[w].load(Ordering::SeqCst))
    }

    fn done(&self, writer: usize, round: u64) {
        self.0[writer].store(round, Ordering::SeqCst);
    }
}

fn keys() -> Vec<Vec<u8>> {
    (0..KEYS).map(|k| format!("key{k}").into_bytes()).collect()
}

/// `w{writer}-{round}`.
fn written_by(value: &[u8]) -> Option<(usize, u64)> {
    let text = std::str::from_utf8(value).ok()?;
    let (writer, round) = text.strip_prefix('w')?.split_once('-')?;
    Some((writer.parse().ok()?, round.parse().ok()?))
}

/// The values read that are older than `before` allows, described.
fn stale(values: &[Option<Vec<u8>>], before: [u64; WRITERS]) -> Vec<String> {
    let mut found = Vec::new();
    for (key, value) in values.iter().enumerate() {
        let Some((writer, round)) = value.as_deref().and_then(written_by) else {
            continue;
        };
        if round < before[writer] {
            let finished = before[writer];
            found.push(format!(
                "key{key} read w{writer}-{round} after w{writer}-{finished} had committed"
            ));
        }
    }
    found
}

/// Runs `write(writer, round)` on each writer's thread and `read(reader)` on each reader's until
/// `RUN_FOR` has passed; answers the stale values read and how many reads there were.
fn race(
    write: impl Fn(usize, u64) + Sync,
    read: impl Fn(usize) -> Vec<Option<Vec<u8>>> + Sync,
    finished: &Finished,
) -> (Vec<String>, u64) {
    let stop = AtomicBool::new(false);
    let (write, read, stop) = (&write, &read, &stop);
    std::thread::scope(|scope| {
        for writer in 0..WRITERS {
            scope.spawn(move || {
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    write(writer, round);
                }
            });
        }
        let readers: Vec<_> = (0..READERS)
            .map(|reader| {
                scope.spawn(move || {
                    let (mut found, mut reads) = (Vec::new(), 0);
                    while !stop.load(Ordering::Relaxed) {
                        let before = finished.now();
                        found.extend(stale(&read(reader), before));
                        reads += 1;
                    }
                    (found, reads)
                })
            })
            .collect();
        std::thread::sleep(RUN_FOR);
        stop.store(true, Ordering::Relaxed);
        readers
            .into_iter()
            .map(|r| r.join().expect("a reader"))
            .fold((Vec::new(), 0), |(mut all, n), (found, reads)| {
                all.extend(found);
                (all, n + reads)
            })
    })
}

/// One round of `writer` on the keyspace: every key set in one EXEC block (even rounds) or
/// by a SET each; the round is published once committed, before it is durable.
fn write_round(ks: &Keyspace, keys: &[Vec<u8>], finished: &Finished, writer: usize, round: u64) {
    let set = lookup(b"SET").expect("SET");
    let value = format!("w{writer}-{round}").into_bytes();
    let sets: Vec<Vec<Vec<u8>>> = keys
        .iter()
        .map(|key| vec![b"SET".to_vec(), key.clone(), value.clone()])
        .collect();
    let pending = if round.is_multiple_of(2) {
        let mut steps: Vec<BlockStep<'_>> = sets
            .iter()
            .map(|args| BlockStep::Data(0, set, args))
            .collect();
        let executed = ks.execute_block(&mut steps, &[]);
        assert!(executed.committed, "the block committed");
        executed.pending.into_iter().collect::<Vec<_>>()
    } else {
        let executed = sets.iter().map(|args| ks.execute(0, set, args));
        executed.filter_map(|e| e.pending).collect()
    };
    finished.done(writer, round);
    for commit in pending {
        commit.wait().expect("durable");
    }
}

#[test]
fn a_read_sees_every_write_committed_before_it() {
    let server = TestServer::start();
    let (ks, keys, finished) = (&server.ks, keys(), Finished::new());
    let mget: Vec<Vec<u8>> = std::iter::once(b"MGET".to_vec())
        .chain(keys.clone())
        .collect();
    let mget_command = lookup(b"MGET").expect("MGET");
    let read = |_| match ks.execute(0, mget_command, &mget).reply {
        Reply::Array(values) => values
            .into_iter()
            .map(|v| match v {
                Reply::Bulk(bytes) => Some(bytes),
                _ => None,
            })
            .collect(),
        other => panic!("MGET answered {other:?}"),
    };
    let write = |writer, round| write_round(ks, &keys, &finished, writer, round);
    let (found, reads) = race(write, read, &finished);
    println!("{reads} reads, writers' rounds {:?}", finished.now());
    assert!(found.is_empty(), "stale reads: {found:#?}");
    assert!(finished.now().iter().all(|&r| r > 10), "the writers wrote");
}

#[test]
fn a_read_through_the_server_sees_every_write_acknowledged_before_it() {
    let server = TestServer::start();
    let (keys, finished) = (keys(), Finished::new());
    let key_names: Vec<String> = keys
        .iter()
        .map(|k| String::from_utf8_lossy(k).into())
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| parking_lot::Mutex::new(server.raw()))
        .collect();
    let readers: Vec<_> = (0..READERS)
        .map(|_| parking_lot::Mutex::new(server.client()))
        .collect();
    let write = |writer: usize, round: u64| {
        let value = format!("w{writer}-{round}");
        // (Each writer's own connection: the lock is never contended.)
        WritesOfEveryKey::new(&key_names, &value, round as usize).send(&mut writers[writer].lock());
        finished.done(writer, round);
    };
    let read = |reader: usize| {
        // (Each reader's own connection: the lock is never contended.)
        let mut con = readers[reader].lock();
        let values: Vec<Option<Vec<u8>>> = redis::cmd("MGET")
            .arg(&keys)
            .query(&mut *con)
            .expect("MGET");
        values
    };
    let (found, reads) = race(write, read, &finished);
    println!("{reads} reads, writers' rounds {:?}", finished.now());
    assert!(found.is_empty(), "stale reads: {found:#?}");
    assert!(finished.now().iter().all(|&r| r > 10), "the writers wrote");
}
