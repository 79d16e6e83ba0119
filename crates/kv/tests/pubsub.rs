//! Publish/subscribe through the server: a conversation of three raw connections (spread
//! over the event loops) compared byte for byte with a real `redis-server`'s, messages
//! through the `redis` crate's pub/sub API, a message's place among a subscriber's replies,
//! a subscriber's close, and the disconnection of a subscriber that does not read.

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use support::conversation::{compare, Step};
use support::{
    eventually, expect_bytes, peak_resident_bytes, q, read_exactly, Options, TestServer,
};
use tailstore_kv::server::Plant;

/// Subscriptions, messages by channel and by pattern, the RESP2 subscribed context (only
/// pub/sub commands, PING as a message), unsubscribing from everything, RESP3's push
/// frames, PUBSUB's answers and errors, RESET, CLIENT REPLY SKIP before SUBSCRIBE (used up
/// by it, its confirmations sent), refusals in the subscribed context (PING's arity, a
/// subcommand by its full name).
const CONVERSATION: &[Step] = &[
    (0, b"SUBSCRIBE ch1 ch2\r\n"),
    (1, b"PUBLISH ch1 hello\r\nPUBSUB NUMSUB ch1 ch3\r\nPUBSUB CHANNELS *2\r\nPUBSUB CHANNELS c*1\r\nPUBSUB NUMPAT\r\n"),
    (0, b"GET x\r\nPING\r\nPING hi\r\nPSUBSCRIBE c*\r\n"),
    (1, b"PUBLISH ch2 two\r\nPUBSUB NUMPAT\r\nPUBSUB FOO\r\nPUBSUB CHANNELS a b\r\nPUBSUB NUMPAT x\r\n"),
    (0, b"UNSUBSCRIBE ch1\r\nUNSUBSCRIBE\r\nPUNSUBSCRIBE\r\nUNSUBSCRIBE\r\nPING\r\nSUBSCRIBE\r\n"),
    (2, b"HELLO 3\r\nCLIENT SETNAME x\r\n"),
    (2, b"SUBSCRIBE z\r\nGET x\r\nPING\r\nPUBSUB NUMSUB z\r\n"),
    (1, b"PUBLISH z msg\r\nPUBLISH nobody m\r\n"),
    (2, b"RESET\r\n"),
    (1, b"PUBLISH z m3\r\n"),
    (0, b"CLIENT REPLY SKIP\r\nSUBSCRIBE c d\r\nPING\r\nPING a b\r\nCLIENT ID\r\nCONFIG GET x\r\n"),
    (1, b"PUBLISH d m4\r\n"),
];

/// Sharded pub/sub (Redis 7): shard channels apart from channels of the same name, their
/// own counts in the confirmations, `smessage`, the RESP2 subscribed context, PUBSUB
/// SHARDCHANNELS and SHARDNUMSUB, RESP3.
const SHARDED: &[Step] = &[
    (0, b"SSUBSCRIBE s1 s2\r\n"),
    (1, b"SPUBLISH s1 hello\r\nPUBLISH s1 not-sharded\r\nPUBSUB SHARDNUMSUB s1 s3\r\nPUBSUB SHARDCHANNELS *1\r\nPUBSUB SHARDCHANNELS *2\r\nPUBSUB NUMSUB s1\r\nPUBSUB CHANNELS\r\n"),
    (0, b"GET x\r\nPING\r\nSUBSCRIBE s1\r\nPSUBSCRIBE s*\r\n"),
    (1, b"SPUBLISH s2 two\r\nPUBLISH s1 three\r\nPUBSUB SHARDCHANNELS a b\r\n"),
    (0, b"SUNSUBSCRIBE s1\r\nUNSUBSCRIBE\r\nPUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\nSUNSUBSCRIBE\r\nPING\r\nSSUBSCRIBE\r\n"),
    (2, b"HELLO 3\r\nCLIENT SETNAME x\r\n"),
    (2, b"SSUBSCRIBE z\r\nGET x\r\nSUBSCRIBE z\r\n"),
    (1, b"SPUBLISH z msg\r\nPUBLISH z plain\r\nSPUBLISH nobody m\r\nSPUBLISH z\r\n"),
    (2, b"SUNSUBSCRIBE z\r\nRESET\r\n"),
    (1, b"SPUBLISH z m3\r\nEVAL \"return redis.call('spublish', 'z', 'from a script')\" 0\r\n"),
];

/// A RESP3 client that publishes to itself: a PUBLISH's, SPUBLISH's or script's messages
/// to it (by channel, pattern and shard channel, a script's key events among them) come
/// ahead of the command's reply, pipelined commands' each ahead of its own, as Redis sends
/// them; another client's publish reaches it too.
const OWN_MESSAGES: &[Step] = &[
    (
        0,
        b"HELLO 3\r\nSUBSCRIBE z __keyspace@0__:k\r\nPSUBSCRIBE z*\r\nSSUBSCRIBE sz\r\n",
    ),
    (0, b"PUBLISH z one\r\n"),
    (
        0,
        b"SPUBLISH sz two\r\nPUBLISH z three\r\nPUBLISH nobody four\r\n",
    ),
    (
        0,
        b"EVAL \"redis.call('publish', 'z', 'five') return 6\" 0\r\n",
    ),
    (
        1,
        b"CONFIG SET notify-keyspace-events KA\r\nPUBLISH z seven\r\n",
    ),
    (
        0,
        b"EVAL \"redis.call('set', 'k', 'v') return redis.call('publish', 'z', 'eight')\" 0\r\n",
    ),
    (0, b"PING\r\n"),
];

#[test]
fn a_client_reads_its_own_messages_before_the_reply_as_from_redis() {
    compare(
        OWN_MESSAGES,
        "a_client_reads_its_own_messages_before_the_reply_as_from_redis",
    );
}

#[test]
fn a_pubsub_conversation_gets_the_bytes_redis_sends() {
    compare(
        CONVERSATION,
        "a_pubsub_conversation_gets_the_bytes_redis_sends",
    );
}

#[test]
fn a_sharded_pubsub_conversation_gets_the_bytes_redis_sends() {
    compare(
        SHARDED,
        "a_sharded_pubsub_conversation_gets_the_bytes_redis_sends",
    );
}

#[test]
fn messages_reach_subscribers_on_every_loop_through_a_client_library() {
    let server = TestServer::start();
    let mut subscribers: Vec<redis::Connection> = (0..3).map(|_| server.client()).collect();
    let mut publisher = server.client();
    let mut pubsubs: Vec<redis::PubSub<'_>> =
        subscribers.iter_mut().map(|con| con.as_pubsub()).collect();
    pubsubs[0].subscribe("news").expect("subscribe");
    pubsubs[1].psubscribe("n*").expect("psubscribe");
    pubsubs[2].subscribe("other").expect("subscribe");
    for pubsub in &mut pubsubs {
        pubsub
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
    }
    for n in 0..100 {
        let delivered: i64 = q(&mut publisher, &["publish", "news", &format!("m{n}")]);
        assert_eq!(delivered, 2, "one channel and one pattern subscriber");
    }
    for n in 0..100 {
        for (who, pattern) in [(0, None), (1, Some("n*"))] {
            let message = pubsubs[who].get_message().expect("a message");
            assert_eq!(message.get_channel_name(), "news");
            assert_eq!(
                message.get_payload::<String>().expect("text"),
                format!("m{n}")
            );
            assert_eq!(
                message.get_pattern::<Option<String>>().expect("pattern"),
                pattern.map(String::from),
                "messages arrive in the order published"
            );
        }
    }
    let delivered: i64 = q(&mut publisher, &["publish", "other", "x"]);
    assert_eq!(delivered, 1);
    let message = pubsubs[2].get_message().expect("a message");
    assert_eq!(message.get_payload::<String>().expect("text"), "x");
    // A subscriber that closes its connection is forgotten.
    drop(pubsubs);
    drop(subscribers);
    assert!(
        eventually(Duration::from_secs(10), || {
            q::<i64>(&mut publisher, &["publish", "news", "gone"]) == 0
        }),
        "messages still delivered to closed connections"
    );
    let info: String = q(&mut publisher, &["info", "stats"]);
    assert!(info.contains("pubsub_channels:0\r\n"), "{info}");
    assert!(info.contains("pubsub_patterns:0\r\n"), "{info}");
}

/// A message reaches a subscriber before the reply to any command the subscriber sends once
/// the publisher is answered, even when the subscriber's loop is already busy with an earlier
/// command of the subscriber's (the twin of `tracking.rs`'s test of invalidations, which
/// travel the same way: the planted bug takes a loop's messages before reading its
/// connections and pauses in between, while this test's PUBLISH and PING arrive).
#[test]
fn a_message_comes_before_the_reply_to_a_later_command() {
    messages_come_before_later_replies(Vec::new(), 5);
}

/// The same on a loop that takes its messages before it reads its connections, the bug it
/// exists to catch (`Plant::MessagesBeforeReads`).
#[test]
#[cfg_attr(
    not(debug_assertions),
    ignore = "only builds with debug assertions plant bugs"
)]
#[should_panic(expected = "came after the reply to the later PING")]
fn planted_messages_before_reads_is_caught_by_the_subscriber() {
    messages_come_before_later_replies(vec![Plant::MessagesBeforeReads], PLANTED_ROUNDS);
}

/// Rounds that a planted test may take to catch its bug (it stops at the first): a round
/// catches it only if the loop reads the first command within the 2 ms before the message,
/// which a loaded machine can miss several times in a row (CI once missed all of 5 rounds).
const PLANTED_ROUNDS: usize = 60;

/// `a_message_comes_before_the_reply_to_a_later_command`, on a server with `plants`, for
/// `rounds` rounds.
fn messages_come_before_later_replies(plants: Vec<Plant>, rounds: usize) {
    let server = TestServer::with(Options {
        plants,
        ..Options::default()
    });
    let (mut subscriber, mut publisher) = subscriber_of_ch_and_publisher(&server);
    for round in 0..rounds {
        subscriber.write_all(b"PING busy\r\n").expect("write");
        // The subscriber's loop is reading PING busy (a pause, with the plant).
        std::thread::sleep(Duration::from_millis(2));
        let message = format!("m{round}");
        let delivered: i64 = q(&mut publisher, &["PUBLISH", "ch", &message]);
        assert_eq!(delivered, 1, "round {round}: PUBLISH reached no subscriber");
        subscriber.write_all(b"PING\r\n").expect("write");
        let (busy, later) = (
            "*2\r\n$4\r\npong\r\n$4\r\nbusy\r\n",
            "*2\r\n$4\r\npong\r\n$0\r\n\r\n",
        );
        let sent = format!("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\n{message}\r\n");
        // On a loaded machine the loop may not have read PING busy within 2 ms: the message
        // may then come before its reply too. Never after the later PING's.
        let in_time = [
            format!("{busy}{sent}{later}"),
            format!("{sent}{busy}{later}"),
        ];
        let got = read_exactly(&mut subscriber, in_time[0].len());
        assert!(
            in_time.iter().any(|order| got == order.as_bytes()),
            "round {round}: {message} came after the reply to the later PING: {:?}",
            String::from_utf8_lossy(&got)
        );
    }
}

/// A subscriber of many patterns that all match one channel, which reads nothing: one
/// pipelined batch of PUBLISHes addresses it ten million messages (10 GiB of frames). They are
/// counted as they are addressed, so the server holds at most the limit's worth before it
/// disconnects the subscriber. Before, every copy was held (the publisher's outbox, then
/// the subscriber's loop's queue) before the limit was looked at: the process grew by
/// 294 MiB here (by gigabytes with longer patterns, each copied per message then).
#[test]
fn a_fan_out_to_a_subscriber_that_does_not_read_is_bounded() {
    let server = TestServer::start();
    let mut subscriber = server.raw();
    // 20,000 patterns, each matching the channel by its first letter.
    let mut psubscribe = vec!["PSUBSCRIBE".to_string()];
    psubscribe.extend((0..20_000).map(|i| format!("[c{i}]*")));
    let words: Vec<&str> = psubscribe.iter().map(String::as_str).collect();
    subscriber
        .write_all(&support::command(&words).get_packed_command())
        .expect("write");
    let mut publisher = server.raw();
    let subscribed = eventually(Duration::from_secs(30), || {
        publisher.write_all(b"PUBSUB NUMPAT\r\n").expect("write");
        read_line(&mut publisher) == b":20000\r\n"
    });
    assert!(subscribed, "the patterns were not subscribed");
    let peak_before = peak_resident_bytes();
    let payload = "p".repeat(1 << 10);
    let one = format!("*3\r\n$7\r\nPUBLISH\r\n$11\r\nc0123456789\r\n$1024\r\n{payload}\r\n");
    publisher
        .write_all(one.repeat(500).as_bytes())
        .expect("write");
    for _ in 0..500 {
        read_line(&mut publisher);
    }
    let grown = peak_resident_bytes().saturating_sub(peak_before);
    assert!(
        grown < 100 << 20,
        "the server grew by {} MiB for one subscriber",
        grown >> 20
    );
    let gone = eventually(Duration::from_secs(30), || {
        publisher
            .write_all(b"PUBLISH c0123456789 x\r\n")
            .expect("write");
        read_line(&mut publisher) == b":0\r\n"
    });
    assert!(gone, "the subscriber is still connected");
}

/// A raw connection subscribed to `ch`, and a client: connections are dealt to the two
/// event loops in turn, so the publisher is served by the other loop.
fn subscriber_of_ch_and_publisher(server: &TestServer) -> (TcpStream, redis::Connection) {
    let mut subscriber = server.raw();
    let publisher = server.client();
    subscriber.write_all(b"SUBSCRIBE ch\r\n").expect("write");
    expect_bytes(
        &mut subscriber,
        b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    (subscriber, publisher)
}

/// One line of a reply, with its CRLF.
fn read_line(stream: &mut TcpStream) -> Vec<u8> {
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        line.extend(read_exactly(stream, 1));
    }
    line
}

/// A message published while the subscriber was still subscribed, and not yet in its output
/// when it unsubscribed, is not sent: after the confirmation a RESP2 client may send any
/// command, and would read the message as its reply. Before, it came after the PONG.
#[test]
fn no_message_follows_the_confirmation_of_an_unsubscribe() {
    let server = TestServer::start();
    // The publisher's script holds only its own loop.
    let (mut subscriber, mut publisher) = subscriber_of_ch_and_publisher(&server);
    // Publishes, then holds its loop (and the message) for 300 ms.
    const SCRIPT: &str = "redis.call('publish', 'ch', 'late') \
        local s = redis.call('time') \
        repeat local n = redis.call('time') \
        until (n[1] - s[1]) * 1000000 + (n[2] - s[2]) > 300000 \
        return 1";
    let script = std::thread::spawn(move || {
        let done: i64 = q(&mut publisher, &["EVAL", SCRIPT, "0"]);
        done
    });
    std::thread::sleep(Duration::from_millis(100));
    subscriber.write_all(b"UNSUBSCRIBE ch\r\n").expect("write");
    expect_bytes(
        &mut subscriber,
        b"*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n",
    );
    assert_eq!(script.join().expect("the script's client"), 1);
    std::thread::sleep(Duration::from_millis(50));
    subscriber.write_all(b"PING\r\n").expect("write");
    expect_bytes(&mut subscriber, b"+PONG\r\n");
}

/// Its unread messages show in CLIENT LIST (`omem`, `events=rw`), as Redis shows them, to
/// whoever looks for the client that holds the server's memory.
#[test]
fn a_subscriber_that_does_not_read_shows_its_unsent_output_in_client_list() {
    let server = TestServer::start();
    let mut subscriber = server.raw();
    subscriber
        .write_all(b"SUBSCRIBE slow\r\nCLIENT ID\r\n")
        .expect("write");
    let confirmation = b"*3\r\n$9\r\nsubscribe\r\n$4\r\nslow\r\n:1\r\n";
    let confirmed = read_exactly(&mut subscriber, confirmation.len());
    assert_eq!(confirmed, confirmation);
    let mut publisher = server.client();
    let payload = "p".repeat(1 << 20);
    for _ in 0..8 {
        assert_eq!(q::<i64>(&mut publisher, &["publish", "slow", &payload]), 1);
    }
    let field = |line: &str, name: &str| -> u64 {
        line.split(' ')
            .find_map(|f| f.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    let mut last = String::new();
    let shown = eventually(Duration::from_secs(10), || {
        let list: String = q(&mut publisher, &["CLIENT", "LIST"]);
        last = list
            .lines()
            .find(|line| line.contains(" sub=1 "))
            .unwrap_or_default()
            .to_string();
        !last.is_empty() && field(&last, "omem=") > 1 << 20
    });
    assert!(shown, "the subscriber's line: {last}");
    assert!(last.contains(" events=rw "), "{last}");
    assert!(field(&last, "tot-mem=") >= field(&last, "omem="), "{last}");
    assert!(last.contains(" cmd=client|id "), "{last}");
}

#[test]
fn a_subscriber_that_does_not_read_is_disconnected() {
    // Over the limit of unread messages (32 MiB), as Redis's client-output-buffer-limit.
    let server = TestServer::with(Options {
        threads: 1,
        ..Options::default()
    });
    let mut subscriber = server.raw();
    subscriber.write_all(b"SUBSCRIBE flood\r\n").expect("write");
    expect_bytes(
        &mut subscriber,
        b"*3\r\n$9\r\nsubscribe\r\n$5\r\nflood\r\n:1\r\n",
    );
    let mut publisher = server.client();
    let payload = "p".repeat(1 << 20);
    let mut delivered = 0;
    for _ in 0..200 {
        delivered = q::<i64>(&mut publisher, &["publish", "flood", &payload]);
        if delivered == 0 {
            break;
        }
    }
    assert_eq!(
        delivered, 0,
        "200 MiB of unread messages and still subscribed"
    );
}
