//! The server when the media fail under it: faults injected into the simulated storage
//! (`SimStorage`) while a client writes. From the failure on, the server refuses commands on
//! data with an error that says why and keeps answering the rest. In the durable modes, a
//! write whose durability failed is never acknowledged, and every write that was is there
//! after a process crash and after a power cut.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::{error_text, read_exactly, Options, TestServer};
use tailstore_log::CommitMode;
use tailstore_media::sim::SimStorage;

/// Writes acknowledged before the fault is armed.
const BEFORE_FAULT: usize = 40;
/// How long writes may go on being acknowledged after a fault in work no commit waits for
/// (the log writer's copy of the PMEM buffer to the log file).
const STOP_WITHIN: Duration = Duration::from_secs(20);

fn key(i: usize) -> String {
    format!("key:{i}")
}

fn value(i: usize) -> String {
    format!("value {i} {}", "x".repeat(i % 300))
}

/// How the server answered one SET.
#[derive(Debug, PartialEq)]
enum Answer {
    Ok,
    Error(String),
    /// The connection closed with no reply.
    Closed,
}

/// One SET on a raw connection, read back byte by byte: an early reply or a close must be
/// seen as such, not hidden behind a client library's retry.
fn set(stream: &mut TcpStream, i: usize) -> Answer {
    let (key, value) = (key(i), value(i));
    let request = format!(
        "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
        key.len(),
        value.len()
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return Answer::Closed;
    }
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        match read_exactly(stream, 1).as_slice() {
            [] => return Answer::Closed,
            [byte] => line.push(*byte),
            _ => unreachable!("one byte was asked for"),
        }
    }
    match line.as_slice() {
        b"+OK\r\n" => Answer::Ok,
        [b'-', text @ ..] => Answer::Error(String::from_utf8_lossy(text).trim_end().to_string()),
        other => panic!(
            "unexpected reply to SET: {:?}",
            String::from_utf8_lossy(other)
        ),
    }
}

/// Writes keys from `*next` on until the server stops acknowledging them; the keys it did
/// acknowledge are pushed to `acked`. Returns how the first unacknowledged write was answered.
fn write_until_refused(
    server: &TestServer,
    next: &mut usize,
    acked: &mut Vec<usize>,
    within: Duration,
) -> Answer {
    let mut stream = server.raw();
    let began = Instant::now();
    loop {
        let answer = set(&mut stream, *next);
        *next += 1;
        if answer != Answer::Ok {
            return answer;
        }
        acked.push(*next - 1);
        assert!(
            began.elapsed() < within,
            "writes still acknowledged {within:?} after the fault ({} of them)",
            acked.len() - BEFORE_FAULT
        );
    }
}

/// The whole scenario for one commit mode and one fault. `synchronous`: the fault strikes the
/// commit of the next write itself, which must then not be acknowledged.
fn fault_stops_the_writes(mode: CommitMode, arm: fn(&SimStorage), fault: &str, synchronous: bool) {
    let what = format!("{mode}, {fault}");
    let storage = SimStorage::new();
    let (server, mut acked) = serving_acknowledged_writes(mode, &storage, &what);
    arm(&storage);
    let mut next = acked.len();
    let refusal = write_until_refused(&server, &mut next, &mut acked, STOP_WITHIN);
    if synchronous {
        assert_eq!(
            acked.len(),
            BEFORE_FAULT,
            "{what}: the write whose commit failed was acknowledged"
        );
    }
    if let Answer::Error(text) = &refusal {
        assert!(
            text.contains(fault),
            "{what}: the error names the fault: {text}"
        );
    }
    refuses_data_commands_and_answers_the_rest(&server, &what, fault);
    drop(server);
    // `async` acknowledges before anything is durable: it promises nothing to check.
    if mode.is_durable() {
        acknowledged_writes_survive(&storage, mode, &acked, &what);
    }
}

/// A server on `storage` that acknowledged the writes of keys `0..BEFORE_FAULT`, and says
/// that its writes succeed.
fn serving_acknowledged_writes(
    mode: CommitMode,
    storage: &SimStorage,
    what: &str,
) -> (TestServer, Vec<usize>) {
    let server = on_sim(mode, storage);
    let mut stream = server.raw();
    for i in 0..BEFORE_FAULT {
        assert_eq!(set(&mut stream, i), Answer::Ok, "{what}: before the fault");
    }
    assert_eq!(write_status(&server), "ok", "{what}: before the fault");
    (server, (0..BEFORE_FAULT).collect())
}

/// Every acknowledged write is there after a process crash and after a power cut.
fn acknowledged_writes_survive(
    storage: &SimStorage,
    mode: CommitMode,
    acked: &[usize],
    what: &str,
) {
    for (image, how) in [
        (storage.process_crash(), "process crash"),
        (storage.power_cut(7), "power cut"),
    ] {
        every_acknowledged_write_is_there(&image, mode, acked, &format!("{what}, {how}"));
    }
}

/// After the fault: a new client's commands on data are refused with the reason (reads too:
/// the pages in memory may hold a change that never became durable), while the server
/// itself still answers.
fn refuses_data_commands_and_answers_the_rest(server: &TestServer, what: &str, fault: &str) {
    let mut client = server.client();
    let pong: String = support::q(&mut client, &["PING"]);
    assert_eq!(pong, "PONG", "{what}");
    assert_eq!(
        write_status(server),
        "err",
        "{what}: INFO says the writes fail"
    );
    for args in [
        &["SET", "after", "the fault"][..],
        &["GET", &key(0)],
        &["DBSIZE"],
    ] {
        let err = support::command(args)
            .query::<redis::Value>(&mut client)
            .expect_err("a command on data after the fault must be refused");
        let text = error_text(&err);
        assert!(
            text.contains("stopped accepting writes") && text.contains(fault),
            "{what}: {args:?} is refused with the reason: {text}"
        );
    }
}

/// A server in `mode`, otherwise as the other tests', on the simulated `storage`.
fn on_sim(mode: CommitMode, storage: &SimStorage) -> TestServer {
    let options = Options {
        mode,
        ..Options::default()
    };
    TestServer::on_sim(options, storage)
}

/// `aof_last_write_status` of `INFO persistence`.
fn write_status(server: &TestServer) -> String {
    let info: String = support::q(&mut server.client(), &["INFO", "persistence"]);
    info.lines()
        .find_map(|line| line.strip_prefix("aof_last_write_status:"))
        .unwrap_or_else(|| panic!("no aof_last_write_status in INFO persistence: {info}"))
        .to_string()
}

/// Recovers the database from `image` and reads back every acknowledged write.
fn every_acknowledged_write_is_there(
    image: &SimStorage,
    mode: CommitMode,
    acked: &[usize],
    what: &str,
) {
    let server = on_sim(mode, image);
    let mut client = server.client();
    for &i in acked {
        let got: Option<String> = support::q(&mut client, &["GET", &key(i)]);
        assert_eq!(
            got,
            Some(value(i)),
            "{what}: acknowledged {} is lost",
            key(i)
        );
    }
    // And it accepts writes again.
    let _: () = support::q(&mut client, &["SET", "after", "recovery"]);
}

#[test]
fn a_failed_log_sync_is_never_acknowledged() {
    fault_stops_the_writes(
        CommitMode::Fsync,
        |storage| storage.fail_nth_sync(1),
        "injected fault: sync",
        true,
    );
}

#[test]
fn a_failed_log_write_is_never_acknowledged() {
    fault_stops_the_writes(
        CommitMode::Fsync,
        |storage| storage.fail_nth_write(1),
        "injected fault: write",
        true,
    );
}

#[test]
fn a_failed_pmem_fence_is_never_acknowledged() {
    for mode in [CommitMode::Buffer, CommitMode::PmemLog] {
        fault_stops_the_writes(
            mode,
            |storage| storage.fail_region_fences_after(1),
            "injected fault: fence",
            true,
        );
    }
}

#[test]
fn a_failed_copy_of_the_pmem_buffer_to_the_log_file_stops_the_writes() {
    // In `buffer` mode a commit is durable once in PMEM; the log writer copies the buffer to
    // the log file behind the commits, so the writes it fails under were acknowledged
    // rightly, and the ones after it are refused.
    fault_stops_the_writes(
        CommitMode::Buffer,
        |storage| storage.fail_nth_write(1),
        "injected fault: write",
        false,
    );
}

#[test]
fn a_failed_page_write_of_a_checkpoint_stops_the_writes() {
    // `pmem-log` has no log file: the first file write is a page of the checkpoint SAVE runs.
    let (mode, fault) = (CommitMode::PmemLog, "injected fault: write");
    let what = format!("{mode}, {fault} in SAVE");
    let storage = SimStorage::new();
    let (server, acked) = serving_acknowledged_writes(mode, &storage, &what);
    storage.fail_nth_write(1);
    let err = support::command(&["SAVE"])
        .query::<()>(&mut server.client())
        .expect_err("the checkpoint must fail");
    let text = error_text(&err);
    assert!(text.contains(fault), "{what}: SAVE says why: {text}");
    refuses_data_commands_and_answers_the_rest(&server, &what, fault);
    drop(server);
    acknowledged_writes_survive(&storage, mode, &acked, &what);
}

#[test]
fn a_failed_background_flush_in_async_mode_stops_the_writes() {
    fault_stops_the_writes(
        CommitMode::Async,
        |storage| storage.fail_nth_write(1),
        "injected fault: write",
        false,
    );
}

#[test]
fn a_message_is_not_published_before_the_write_before_it() {
    // A client writes, then publishes, in one pass; the write's sync fails. The message must
    // not reach the subscriber (as no reply of the pass reaches its client): it would report
    // a write that is lost.
    let storage = SimStorage::new();
    let server = on_sim(CommitMode::Fsync, &storage);
    let mut subscriber = server.raw();
    subscriber.write_all(b"SUBSCRIBE ch\r\n").expect("write");
    support::expect_bytes(
        &mut subscriber,
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    let mut publisher = server.raw();
    publisher
        .write_all(b"PUBLISH ch before\r\n")
        .expect("write");
    support::expect_bytes(&mut publisher, b":1\r\n");
    support::expect_bytes(
        &mut subscriber,
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$6\r\nbefore\r\n",
    );
    storage.fail_nth_sync(1);
    let pass = b"SET k v\r\nPUBLISH ch k-changed\r\n";
    unanswered_and_unheard(&mut publisher, pass, &mut subscriber);
}

/// Sends `pass` (whose sync fails) on `writer`: no reply comes back, and `subscriber` hears
/// nothing of it.
fn unanswered_and_unheard(writer: &mut TcpStream, pass: &[u8], subscriber: &mut TcpStream) {
    writer.write_all(pass).expect("write");
    assert!(
        read_exactly(writer, 1).is_empty(),
        "the pass whose sync failed answered its client"
    );
    subscriber
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    let got = std::io::Read::read(subscriber, &mut byte);
    assert!(
        got.is_err(),
        "the subscriber heard of a write whose sync failed: {got:?} {byte:?}"
    );
}

#[test]
fn a_key_event_is_not_published_for_a_write_whose_sync_failed() {
    // A keyspace notification tells of a write: published, like the reply, only once the
    // write is durable. The write's sync fails, so the subscriber must hear nothing.
    let storage = SimStorage::new();
    let server = on_sim(CommitMode::Fsync, &storage);
    let mut writer = server.raw();
    writer
        .write_all(b"CONFIG SET notify-keyspace-events E$\r\n")
        .expect("write");
    support::expect_bytes(&mut writer, b"+OK\r\n");
    let mut subscriber = server.raw();
    subscriber
        .write_all(b"SUBSCRIBE __keyevent@0__:set\r\n")
        .expect("write");
    support::expect_bytes(
        &mut subscriber,
        b"*3\r\n$9\r\nsubscribe\r\n$18\r\n__keyevent@0__:set\r\n:1\r\n",
    );
    writer.write_all(b"SET before v\r\n").expect("write");
    support::expect_bytes(&mut writer, b"+OK\r\n");
    support::expect_bytes(
        &mut subscriber,
        b"*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:set\r\n$6\r\nbefore\r\n",
    );
    storage.fail_nth_sync(1);
    unanswered_and_unheard(&mut writer, b"SET lost v\r\n", &mut subscriber);
}
