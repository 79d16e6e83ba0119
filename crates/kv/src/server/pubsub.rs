//! Publish/subscribe: SUBSCRIBE, PSUBSCRIBE, their UNSUBSCRIBEs (their confirmations, and
//! RESP2's subscribed context, are here), PUBLISH and PUBSUB (in `admin.rs`).
//!
//! Messages are not data: they are not logged, not durable and not part of any
//! transaction, as in Redis (a subscriber that is not connected when a message is
//! published never sees it). The registry maps channels and patterns to their subscribers,
//! each named by its event loop and its connection's token there. PUBLISH, on whichever
//! loop runs it, addresses a copy of the message to each subscriber (PUBLISH's reply counts
//! them); after the pass's durability wait, the publisher's loop hands each copy to its
//! subscriber's loop and wakes it, which appends it to the connection's output and writes it
//! out with its pass's replies. A subscriber's messages therefore arrive in the order they
//! were published by any one publisher (one queue per loop, drained in order).
//!
//! # Why a message waits for the publisher's pass
//!
//! A client that writes and then publishes ("SET k v", "PUBLISH ch k-changed") must not have
//! its message seen while its write can still be lost: a message is a reply to other
//! clients. So a message leaves, like a reply, only after its pass waited for every commit
//! the pass made or saw; if that wait fails (the engine stops), the messages are dropped
//! with the replies (`fail_stop.rs`, `a_message_is_not_published_before_the_write_before_it`).
//! Redis with `appendfsync always` behaves the same: it writes every client's output,
//! subscribers' included, only after the AOF's fsync. A subscriber that does not read its
//! messages is disconnected once `PUBSUB_OUTPUT_LIMIT` of them wait unsent (Redis's
//! `client-output-buffer-limit pubsub` hard limit, 32 MiB).

use std::collections::HashMap;
use std::sync::Arc;

use mio::Token;
use parking_lot::RwLock;
use tailstore_resp::Reply;

use super::connection::Connection;
use super::Shared;
use crate::command::{matches, Command};

/// Unsent output above which a subscriber is disconnected (Redis's default hard limit).
pub const PUBSUB_OUTPUT_LIMIT: usize = 32 * 1024 * 1024;

/// A subscribed connection: its event loop and its token there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subscriber {
    pub at: usize,
    pub token: Token,
}

/// What a subscription names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Channel,
    Pattern,
}

impl Target {
    /// The words of the confirmations.
    pub fn subscribe_word(self) -> &'static str {
        match self {
            Target::Channel => "subscribe",
            Target::Pattern => "psubscribe",
        }
    }

    pub fn unsubscribe_word(self) -> &'static str {
        match self {
            Target::Channel => "unsubscribe",
            Target::Pattern => "punsubscribe",
        }
    }
}

/// What one connection is sent outside its replies: a published message as one subscriber
/// gets it, or a MONITOR line (`server/monitor.rs`), which travels the same way.
pub enum Message {
    Published {
        /// The pattern that matched (a `pmessage`), or `None` (a `message`).
        pattern: Option<Vec<u8>>,
        channel: Arc<[u8]>,
        payload: Arc<[u8]>,
    },
    Monitored(Arc<str>),
}

impl Message {
    /// The frame the connection is sent: a push, or a MONITOR line as a simple string.
    pub fn frame(&self) -> Reply {
        let bulk = |bytes: &[u8]| Reply::Bulk(bytes.to_vec());
        match self {
            Message::Monitored(line) => Reply::Status(line.to_string()),
            Message::Published {
                pattern,
                channel,
                payload,
            } => {
                let mut items = Vec::with_capacity(4);
                match pattern {
                    Some(pattern) => items.extend([bulk(b"pmessage"), bulk(pattern)]),
                    None => items.push(bulk(b"message")),
                }
                items.extend([bulk(channel), bulk(payload)]);
                Reply::Push(items)
            }
        }
    }
}

/// Every subscription of every connection.
#[derive(Default)]
pub struct PubSub {
    channels: RwLock<HashMap<Vec<u8>, Vec<Subscriber>>>,
    patterns: RwLock<HashMap<Vec<u8>, Vec<Subscriber>>>,
}

impl PubSub {
    /// Adds a subscription (the connection keeps its own set, so it never asks twice).
    pub fn subscribe(&self, target: Target, name: &[u8], who: Subscriber) {
        let mut map = match target {
            Target::Channel => self.channels.write(),
            Target::Pattern => self.patterns.write(),
        };
        map.entry(name.to_vec()).or_default().push(who);
    }

    pub fn unsubscribe(&self, target: Target, name: &[u8], who: Subscriber) {
        let mut map = match target {
            Target::Channel => self.channels.write(),
            Target::Pattern => self.patterns.write(),
        };
        if let Some(subscribers) = map.get_mut(name) {
            subscribers.retain(|s| *s != who);
            if subscribers.is_empty() {
                map.remove(name);
            }
        }
    }

    /// Hands `payload` to every subscriber of `channel` and of each pattern it matches
    /// (`deliver`); how many deliveries that was (PUBLISH's reply: a client subscribed to
    /// the channel and to a matching pattern counts twice, as in Redis).
    pub fn publish(
        &self,
        channel: &[u8],
        payload: &[u8],
        mut deliver: impl FnMut(Subscriber, Message),
    ) -> usize {
        let (channel_name, payload): (Arc<[u8]>, Arc<[u8]>) = (channel.into(), payload.into());
        let mut delivered = 0;
        if let Some(subscribers) = self.channels.read().get(channel) {
            for who in subscribers {
                let message = Message::Published {
                    pattern: None,
                    channel: channel_name.clone(),
                    payload: payload.clone(),
                };
                deliver(*who, message);
                delivered += 1;
            }
        }
        for (pattern, subscribers) in self.patterns.read().iter() {
            if !matches(pattern, channel) {
                continue;
            }
            for who in subscribers {
                let message = Message::Published {
                    pattern: Some(pattern.clone()),
                    channel: channel_name.clone(),
                    payload: payload.clone(),
                };
                deliver(*who, message);
                delivered += 1;
            }
        }
        delivered
    }

    /// The channels with at least one subscriber, matching `pattern` if given (PUBSUB
    /// CHANNELS), sorted.
    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut names: Vec<Vec<u8>> = self
            .channels
            .read()
            .keys()
            .filter(|name| pattern.is_none_or(|p| matches(p, name)))
            .cloned()
            .collect();
        names.sort_unstable();
        names
    }

    /// Subscribers of one channel (PUBSUB NUMSUB).
    pub fn subscribers_of(&self, channel: &[u8]) -> usize {
        self.channels.read().get(channel).map_or(0, Vec::len)
    }

    /// Patterns with at least one subscriber (PUBSUB NUMPAT, INFO's `pubsub_patterns`).
    pub fn patterns(&self) -> usize {
        self.patterns.read().len()
    }

    /// Channels with at least one subscriber (INFO's `pubsub_channels`).
    pub fn channel_count(&self) -> usize {
        self.channels.read().len()
    }
}

/// RESP2 after a SUBSCRIBE: only the pub/sub commands, PING, QUIT and RESET are run (a
/// reply cannot be told from a message otherwise); PING answers as a message does. The
/// reply to any other command; `None` to run it.
pub fn in_subscribed_context(command: &Command, args: &[Vec<u8>]) -> Option<Reply> {
    match command.name {
        "ping" => {
            let payload = args.get(1).cloned().unwrap_or_default();
            Some(Reply::Array(vec![Reply::Bulk(b"pong".to_vec()), Reply::Bulk(payload)]))
        }
        "subscribe" | "unsubscribe" | "psubscribe" | "punsubscribe" | "quit" | "reset" => None,
        name => Some(Reply::error(format!(
            "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        ))),
    }
}

/// A (P)SUBSCRIBE or a (P)UNSUBSCRIBE: what it names, and whether it subscribes.
#[derive(Clone, Copy)]
pub struct Change {
    target: Target,
    subscribe: bool,
}

impl Change {
    /// The change a command named `name` makes, if it is one of the four.
    pub fn of(name: &str) -> Option<Change> {
        let (target, subscribe) = match name {
            "subscribe" => (Target::Channel, true),
            "unsubscribe" => (Target::Channel, false),
            "psubscribe" => (Target::Pattern, true),
            "punsubscribe" => (Target::Pattern, false),
            _ => return None,
        };
        Some(Change { target, subscribe })
    }
}

/// SUBSCRIBE / PSUBSCRIBE names…, UNSUBSCRIBE / PUNSUBSCRIBE [names…] (none: every one):
/// one confirmation per name, with the connection's subscriptions after it, as Redis does.
pub fn change(shared: &Shared, conn: &mut Connection, change: Change, names: &[Vec<u8>]) {
    let target = change.target;
    if change.subscribe {
        for channel in names {
            if conn.subscribed(target).insert(channel.clone()) {
                shared.pubsub.subscribe(target, channel, conn.home);
            }
            confirm(conn, target.subscribe_word(), Some(channel));
        }
        return;
    }
    let names: Vec<Vec<u8>> = if names.is_empty() {
        conn.subscribed(target).iter().cloned().collect()
    } else {
        names.to_vec()
    };
    if names.is_empty() {
        confirm(conn, target.unsubscribe_word(), None);
    }
    for channel in &names {
        if conn.subscribed(target).remove(channel) {
            shared.pubsub.unsubscribe(target, channel, conn.home);
        }
        confirm(conn, target.unsubscribe_word(), Some(channel));
    }
}

fn confirm(conn: &mut Connection, word: &str, name: Option<&Vec<u8>>) {
    let frame = Reply::Push(vec![
        Reply::Bulk(word.as_bytes().to_vec()),
        name.map_or(Reply::Null, |n| Reply::Bulk(n.clone())),
        Reply::Int(conn.subscriptions() as i64),
    ]);
    frame.encode(conn.protocol, &mut conn.output);
}

/// Drops every subscription of a connection (closed, or RESET).
pub fn unsubscribe_all(shared: &Shared, conn: &mut Connection) {
    for target in [Target::Channel, Target::Pattern] {
        for name in std::mem::take(conn.subscribed(target)) {
            shared.pubsub.unsubscribe(target, &name, conn.home);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(at: usize, token: usize) -> Subscriber {
        Subscriber {
            at,
            token: Token(token),
        }
    }

    fn published(pubsub: &PubSub, channel: &str) -> Vec<(usize, usize, Option<String>)> {
        let mut got = Vec::new();
        let count = pubsub.publish(channel.as_bytes(), b"payload", |s, m| {
            let Message::Published {
                pattern,
                channel: to,
                payload,
            } = m
            else {
                panic!("a MONITOR line from PUBLISH");
            };
            assert_eq!(&*to, channel.as_bytes());
            assert_eq!(&*payload, b"payload");
            let pattern = pattern.map(|p| String::from_utf8_lossy(&p).into_owned());
            got.push((s.at, s.token.0, pattern));
        });
        assert_eq!(count, got.len());
        got
    }

    #[test]
    fn a_message_reaches_channel_and_pattern_subscribers_until_they_leave() {
        let pubsub = PubSub::default();
        assert!(published(&pubsub, "news").is_empty());
        pubsub.subscribe(Target::Channel, b"news", who(0, 5));
        pubsub.subscribe(Target::Channel, b"news", who(1, 7));
        pubsub.subscribe(Target::Pattern, b"n*", who(1, 7));
        pubsub.subscribe(Target::Pattern, b"x*", who(0, 5));
        assert_eq!(
            published(&pubsub, "news"),
            vec![(0, 5, None), (1, 7, None), (1, 7, Some("n*".into()))]
        );
        assert_eq!(published(&pubsub, "nope"), vec![(1, 7, Some("n*".into()))]);
        assert_eq!(pubsub.channels(None), vec![b"news".to_vec()]);
        assert_eq!(pubsub.channels(Some(b"x*")), Vec::<Vec<u8>>::new());
        assert_eq!(pubsub.subscribers_of(b"news"), 2);
        assert_eq!(pubsub.patterns(), 2);
        pubsub.unsubscribe(Target::Channel, b"news", who(0, 5));
        pubsub.unsubscribe(Target::Pattern, b"n*", who(1, 7));
        assert_eq!(published(&pubsub, "news"), vec![(1, 7, None)]);
        pubsub.unsubscribe(Target::Channel, b"news", who(1, 7));
        pubsub.unsubscribe(Target::Pattern, b"x*", who(0, 5));
        assert_eq!(pubsub.channel_count() + pubsub.patterns(), 0);
    }

    #[test]
    fn frames_are_redis_push_arrays() {
        let message = Message::Published {
            pattern: Some(b"n*".to_vec()),
            channel: Arc::from(&b"news"[..]),
            payload: Arc::from(&b"hi"[..]),
        };
        let mut out = Vec::new();
        message.frame().encode(Default::default(), &mut out);
        assert_eq!(
            out,
            b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
    }
}
