//! Listening to a server's keyspace notifications: one connection subscribed to the key
//! events (and whatever else a test names), and one that publishes a marker after each
//! command, so that the messages before the marker are the command's (a server publishes
//! a command's events before it answers it).

use std::io::Write;
use std::net::{SocketAddr, TcpStream};

use redis::Value;

use super::{client_at, q, REPLY_TIMEOUT};

/// The channel of the markers.
const MARKER: &str = "key-events-marker";

pub struct KeyEvents {
    subscriber: TcpStream,
    parser: redis::Parser,
    marker: redis::Connection,
    markers: u64,
}

#[allow(dead_code)] // not every test binary that has the support module listens
impl KeyEvents {
    /// Every class of key event on both kinds of channel, new keys and key misses too
    /// (`notify-keyspace-events KEAnm`).
    pub fn every(address: SocketAddr) -> KeyEvents {
        KeyEvents::listen(address, "KEAnm", &["__key*__:*"])
    }

    /// Sets `notify-keyspace-events` to `setting` and subscribes to the channels matching
    /// `patterns`.
    pub fn listen(address: SocketAddr, setting: &str, patterns: &[&str]) -> KeyEvents {
        let mut marker = client_at(address);
        let _: () = q(
            &mut marker,
            &["CONFIG", "SET", "notify-keyspace-events", setting],
        );
        let mut subscriber = TcpStream::connect(address).expect("connect");
        subscriber
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .expect("timeout");
        let mut commands = format!("SUBSCRIBE {MARKER}\r\n");
        for pattern in patterns {
            commands.push_str(&format!("PSUBSCRIBE {pattern}\r\n"));
        }
        subscriber
            .write_all(commands.as_bytes())
            .expect("subscribe");
        let mut events = KeyEvents {
            subscriber,
            parser: redis::Parser::new(),
            marker,
            markers: 0,
        };
        for _ in 0..=patterns.len() {
            events.next_message(); // the subscriptions' confirmations
        }
        events
    }

    fn next_message(&mut self) -> Vec<String> {
        match self.parser.parse_value(&mut self.subscriber) {
            Ok(Value::Array(items)) => items
                .into_iter()
                .map(|item| match item {
                    Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    other => format!("{other:?}"),
                })
                .collect(),
            other => panic!("the key events' subscriber read {other:?}"),
        }
    }

    /// The next message a pattern matched, as `channel message` (waiting for it; markers
    /// are skipped).
    pub fn next_event(&mut self) -> String {
        loop {
            let message = self.next_message();
            match message.as_slice() {
                [kind, _, channel, text] if kind == "pmessage" && channel != MARKER => {
                    return format!("{channel} {text}");
                }
                [kind, ..] if kind == "message" || kind == "pmessage" => {}
                other => panic!("the key events' subscriber read {other:?}"),
            }
        }
    }

    /// The messages the patterns matched since the last call, as `channel message` lines.
    pub fn since_last(&mut self) -> Vec<String> {
        self.markers += 1;
        let mark = self.markers.to_string();
        let heard: i64 = q(&mut self.marker, &["PUBLISH", MARKER, &mark]);
        assert!(heard >= 1, "the key events' subscriber is gone");
        let mut events = Vec::new();
        loop {
            let message = self.next_message();
            match message.as_slice() {
                [kind, channel, text] if kind == "message" && channel == MARKER => {
                    if *text == mark {
                        return events;
                    }
                }
                [kind, _, channel, _] if kind == "pmessage" && channel == MARKER => {}
                [kind, _, channel, text] if kind == "pmessage" => {
                    events.push(format!("{channel} {text}"));
                }
                other => panic!("the key events' subscriber read {other:?}"),
            }
        }
    }
}

/// `events` without the `expired` ones: when a server finds a key expired depends on its own
/// clock and on when its active expiry runs (10 times a second, sampling in Redis), so two
/// servers compared command by command may tell one in different commands' windows.
#[allow(dead_code)] // not every test binary that has the support module compares servers
pub fn without_expired(events: Vec<String>) -> Vec<String> {
    let expired = |e: &String| e.ends_with(":expired") || e.ends_with(" expired");
    events.into_iter().filter(|e| !expired(e)).collect()
}
