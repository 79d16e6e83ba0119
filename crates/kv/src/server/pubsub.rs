//! Publish/subscribe: SUBSCRIBE, PSUBSCRIBE, their UNSUBSCRIBEs (their confirmations, and
//! RESP2's subscribed context, are here), PUBLISH and PUBSUB (in `admin.rs`); and Redis 7's
//! sharded pub/sub, SSUBSCRIBE, SUNSUBSCRIBE and SPUBLISH, which outside a cluster are the
//! same with channels of their own (a SPUBLISH reaches SSUBSCRIBErs only, as `smessage`).
//!
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
//!
//! # Why messages are counted before they reach the subscriber
//!
//! A message waits in its publisher's outbox (for the pass) and in the subscriber's loop's
//! queue (until that loop's next pass) before the subscriber's output, where the limit used
//! to be checked. Meanwhile one pipelined batch of PUBLISHes, each matching thousands of a
//! subscriber's patterns, could queue gigabytes. So each subscriber has a [`Backlog`]: the
//! bytes addressed to it and not yet in its output. A message that would take it past the
//! limit is not addressed, the backlog is marked overflowed, and the subscriber's loop
//! disconnects it, as it disconnects one whose output passed the limit. A message's share
//! is released when the message is dropped, wherever that happens.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use mio::Token;
use parking_lot::RwLock;
use tailstore_resp::{Protocol, Reply};

use super::connection::Connection;
use super::tracking;
use super::Shared;
use crate::command::{lookup, matches, Command};

/// Unsent output above which a subscriber is disconnected (Redis's default hard limit).
pub const PUBSUB_OUTPUT_LIMIT: usize = 32 * 1024 * 1024;

/// The bytes of the messages addressed to one connection and not yet in its output.
#[derive(Debug, Default)]
pub struct Backlog {
    bytes: AtomicUsize,
    overflowed: AtomicBool,
}

impl Backlog {
    /// Counts `bytes` more, if that keeps the backlog within the limit; otherwise marks it
    /// overflowed. The result is the count's share, released when dropped, and whether
    /// this call is the one that marked the backlog overflowed.
    fn reserve(self: &Arc<Self>, bytes: usize) -> (Option<Share>, bool) {
        let before = self.bytes.fetch_add(bytes, Ordering::AcqRel);
        if before + bytes <= PUBSUB_OUTPUT_LIMIT && !self.overflowed() {
            let share = Share {
                backlog: Arc::clone(self),
                bytes,
            };
            return (Some(share), false);
        }
        self.bytes.fetch_sub(bytes, Ordering::AcqRel);
        (None, !self.overflowed.swap(true, Ordering::AcqRel))
    }

    /// Whether a message was refused for taking it past the limit: the connection is to be
    /// disconnected.
    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }
}

/// A message's share of its subscriber's [`Backlog`], released when the message is dropped.
#[derive(Debug)]
pub struct Share {
    backlog: Arc<Backlog>,
    bytes: usize,
}

impl Drop for Share {
    fn drop(&mut self) {
        self.backlog.bytes.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

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
    /// A shard channel (SSUBSCRIBE).
    Shard,
}

impl Target {
    /// The words of the confirmations.
    pub fn subscribe_word(self) -> &'static str {
        match self {
            Target::Channel => "subscribe",
            Target::Pattern => "psubscribe",
            Target::Shard => "ssubscribe",
        }
    }

    pub fn unsubscribe_word(self) -> &'static str {
        match self {
            Target::Channel => "unsubscribe",
            Target::Pattern => "punsubscribe",
            Target::Shard => "sunsubscribe",
        }
    }
}

/// What one connection is sent outside its replies: a published message as one subscriber
/// gets it, or a MONITOR line (`server/monitor.rs`), which travels the same way.
pub enum Message {
    Published {
        /// What the subscription named: a channel (a `message`), a shard channel (an
        /// `smessage`), or the pattern that matched (a `pmessage`, with the pattern).
        via: Target,
        pattern: Option<Arc<[u8]>>,
        channel: Arc<[u8]>,
        payload: Arc<[u8]>,
        /// Its share of the subscriber's backlog (`None` where none is counted).
        share: Option<Share>,
    },
    /// To a subscriber whose backlog overflowed: it is to be disconnected.
    Overflowed,
    Monitored(Arc<str>),
    /// Client-side caching's invalidation of `keys` (`None`: every key), to the tracking
    /// client or to the client it redirects to (`server/tracking.rs`).
    Invalidated {
        keys: Option<Arc<[Vec<u8>]>>,
        redirected: bool,
    },
    /// To a tracking client: the client it redirects its invalidations to is gone.
    RedirectBroken(u64),
}

impl Message {
    /// The frame `conn` is sent, if any: a push, a MONITOR line as a simple string, or an
    /// invalidation as `conn` can take it.
    pub fn frame_for(&self, conn: &mut Connection) -> Option<Reply> {
        match self {
            Message::Invalidated { keys, redirected } => {
                tracking::invalidation_frame(conn, keys.as_ref(), *redirected)
            }
            Message::RedirectBroken(id) => tracking::redirect_broken_frame(conn, *id),
            Message::Published { .. } if !self.still_subscribed(conn) => None,
            _ => self.frame(),
        }
    }

    /// Whether `conn` still holds the subscription a published message was addressed by.
    /// A message is addressed when PUBLISH runs and reaches the subscriber's output later:
    /// one that unsubscribed meanwhile has had its confirmation, and after it (in RESP2,
    /// where it may now send any command) a message would be read as a reply.
    fn still_subscribed(&self, conn: &Connection) -> bool {
        let Message::Published {
            via,
            pattern,
            channel,
            ..
        } = self
        else {
            return true;
        };
        match (via, pattern) {
            (Target::Pattern, Some(pattern)) => conn.patterns.contains(&pattern[..]),
            (Target::Shard, _) => conn.shard_channels.contains(&channel[..]),
            _ => conn.channels.contains(&channel[..]),
        }
    }

    /// The frame of a published message or a MONITOR line, which is the same for every
    /// connection; `None` for the invalidations, which are not.
    pub fn frame(&self) -> Option<Reply> {
        let bulk = |bytes: &[u8]| Reply::Bulk(bytes.to_vec());
        Some(match self {
            Message::Monitored(line) => Reply::Status(line.to_string()),
            Message::Invalidated { .. } | Message::RedirectBroken(_) | Message::Overflowed => {
                return None
            }
            Message::Published {
                via,
                pattern,
                channel,
                payload,
                ..
            } => {
                let mut items = Vec::with_capacity(4);
                match (via, pattern) {
                    (_, Some(pattern)) => items.extend([bulk(b"pmessage"), bulk(&pattern[..])]),
                    (Target::Shard, None) => items.push(bulk(b"smessage")),
                    _ => items.push(bulk(b"message")),
                }
                items.extend([bulk(channel), bulk(payload)]);
                Reply::Push(items)
            }
        })
    }
}

/// Every subscription of every connection.
#[derive(Default)]
pub struct PubSub {
    channels: RwLock<Subscriptions>,
    patterns: RwLock<Subscriptions>,
    shards: RwLock<Subscriptions>,
}

/// By name: each subscriber, with the backlog its messages are counted in.
type Subscriptions = HashMap<Arc<[u8]>, Vec<(Subscriber, Arc<Backlog>)>>;

impl PubSub {
    fn of(&self, target: Target) -> &RwLock<Subscriptions> {
        match target {
            Target::Channel => &self.channels,
            Target::Pattern => &self.patterns,
            Target::Shard => &self.shards,
        }
    }

    /// Adds a subscription (the connection keeps its own set, so it never asks twice).
    pub fn subscribe(&self, target: Target, name: &[u8], who: Subscriber, backlog: &Arc<Backlog>) {
        let mut map = self.of(target).write();
        let entry = map.entry(Arc::from(name)).or_default();
        entry.push((who, Arc::clone(backlog)));
    }

    pub fn unsubscribe(&self, target: Target, name: &[u8], who: Subscriber) {
        let mut map = self.of(target).write();
        if let Some(subscribers) = map.get_mut(name) {
            subscribers.retain(|(s, _)| *s != who);
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
        let mut delivered = self.publish_to(Target::Channel, &channel_name, &payload, &mut deliver);
        for (pattern, subscribers) in self.patterns.read().iter() {
            if !matches(pattern, channel) {
                continue;
            }
            for (who, backlog) in subscribers {
                let addressed = Addressed {
                    via: Target::Pattern,
                    pattern: Some(pattern),
                    channel: &channel_name,
                    payload: &payload,
                };
                addressed.deliver(*who, backlog, &mut deliver);
                delivered += 1;
            }
        }
        delivered
    }

    /// SPUBLISH: hands `payload` to every subscriber of the shard channel `channel`; how
    /// many that was.
    pub fn publish_shard(
        &self,
        channel: &[u8],
        payload: &[u8],
        mut deliver: impl FnMut(Subscriber, Message),
    ) -> usize {
        self.publish_to(
            Target::Shard,
            &channel.into(),
            &payload.into(),
            &mut deliver,
        )
    }

    /// Hands `payload` to the subscribers of `channel` as a channel of `target`'s kind.
    fn publish_to(
        &self,
        target: Target,
        channel: &Arc<[u8]>,
        payload: &Arc<[u8]>,
        deliver: &mut impl FnMut(Subscriber, Message),
    ) -> usize {
        let map = self.of(target).read();
        let subscribers = map.get(&channel[..]).map_or(&[][..], Vec::as_slice);
        for (who, backlog) in subscribers {
            let addressed = Addressed {
                via: target,
                pattern: None,
                channel,
                payload,
            };
            addressed.deliver(*who, backlog, deliver);
        }
        subscribers.len()
    }

    /// The channels of `target`'s kind (channels or shard channels) with at least one
    /// subscriber, matching `pattern` if given (PUBSUB CHANNELS, SHARDCHANNELS), sorted.
    pub fn channels(&self, target: Target, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut names: Vec<Vec<u8>> = self
            .of(target)
            .read()
            .keys()
            .filter(|name| pattern.is_none_or(|p| matches(p, name)))
            .map(|name| name.to_vec())
            .collect();
        names.sort_unstable();
        names
    }

    /// Subscribers of one channel or shard channel (PUBSUB NUMSUB, SHARDNUMSUB).
    pub fn subscribers_of(&self, target: Target, channel: &[u8]) -> usize {
        self.of(target).read().get(channel).map_or(0, Vec::len)
    }

    /// Patterns with at least one subscriber (PUBSUB NUMPAT, INFO's `pubsub_patterns`).
    pub fn patterns(&self) -> usize {
        self.patterns.read().len()
    }

    /// Channels (or shard channels) with at least one subscriber (INFO's
    /// `pubsub_channels`, `pubsubshard_channels`).
    pub fn channel_count(&self, target: Target) -> usize {
        self.of(target).read().len()
    }
}

/// RESP2 after a SUBSCRIBE: only the pub/sub commands, PING, QUIT and RESET are run (a
/// reply cannot be told from a message otherwise); PING answers as a message does. The
/// reply to any other command; `None` to run it.
pub fn in_subscribed_context(command: &Command, args: &[Vec<u8>]) -> Option<Reply> {
    match command.name {
        // PING's own check of its arguments, as its handler makes it.
        "ping" if args.len() > 2 => Some(Reply::error(
            "ERR wrong number of arguments for 'ping' command",
        )),
        "ping" => {
            let payload = args.get(1).cloned().unwrap_or_default();
            Some(Reply::Array(vec![Reply::Bulk(b"pong".to_vec()), Reply::Bulk(payload)]))
        }
        "subscribe" | "unsubscribe" | "psubscribe" | "punsubscribe" | "ssubscribe"
        | "sunsubscribe" | "quit" | "reset" => None,
        // A container's subcommand by its full name (`client|id`), as Redis names it.
        _ => Some(Reply::error(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            crate::command::key_specs::full_name(command, args)
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
            "ssubscribe" => (Target::Shard, true),
            "sunsubscribe" => (Target::Shard, false),
            _ => return None,
        };
        Some(Change { target, subscribe })
    }

    /// SSUBSCRIBE: refused in an EXEC block, as Redis refuses it to a client that may not
    /// block.
    pub fn is_shard_subscribe(self) -> bool {
        self.subscribe && self.target == Target::Shard
    }
}

/// A published message on its way to one subscriber.
struct Addressed<'a> {
    via: Target,
    pattern: Option<&'a Arc<[u8]>>,
    channel: &'a Arc<[u8]>,
    payload: &'a Arc<[u8]>,
}

impl Addressed<'_> {
    /// About the bytes of its frame in the subscriber's output.
    fn bytes(&self) -> usize {
        let pattern = self.pattern.map_or(0, |p| p.len());
        64 + pattern + self.channel.len() + self.payload.len()
    }

    /// Hands the message to `deliver` with its share of `backlog`; if the backlog has no
    /// room for it, only the news of that, once.
    fn deliver(
        self,
        who: Subscriber,
        backlog: &Arc<Backlog>,
        deliver: &mut impl FnMut(Subscriber, Message),
    ) {
        match backlog.reserve(self.bytes()) {
            (Some(share), _) => deliver(
                who,
                Message::Published {
                    via: self.via,
                    pattern: self.pattern.cloned(),
                    channel: Arc::clone(self.channel),
                    payload: Arc::clone(self.payload),
                    share: Some(share),
                },
            ),
            (None, true) => deliver(who, Message::Overflowed),
            (None, false) => {}
        }
    }
}

/// Whether the messages that the command `args` publishes to its own RESP3 connection go
/// ahead of its reply: a PUBLISH's or SPUBLISH's, and a script's (its PUBLISHes and its
/// writes' key events), run outside MULTI. Redis writes a subscriber's message into its
/// output as the command publishes it, so a client that publishes to itself reads the
/// message before the reply; an EXEC block's and other commands' own messages come after
/// the pass's replies, as every other client's do.
pub fn own_messages_go_first(conn: &Connection, args: &[Vec<u8>]) -> bool {
    if conn.protocol != Protocol::Resp3 || conn.multi.is_some() || conn.subscriptions() == 0 {
        return false;
    }
    let Some(command) = lookup(&args[0]) else {
        return false;
    };
    matches!(command.name, "publish" | "spublish") || super::eval::is_eval(command)
}

/// Sends `conn` the published messages addressed to it from `published[from..]` now, in
/// their order, ahead of the reply about to be sent; the other messages stay for the
/// pass's end. (The output goes out after the pass's durability wait all the same.)
pub fn send_own_messages(conn: &mut Connection, from: usize) {
    let later = conn.published.split_off(from.min(conn.published.len()));
    for (who, message) in later {
        let own = who == conn.home && matches!(message, Message::Published { .. });
        if !own {
            conn.published.push((who, message));
        } else if let Some(frame) = message.frame_for(conn) {
            frame.encode(conn.protocol, &mut conn.output);
        }
    }
}

/// SUBSCRIBE / PSUBSCRIBE names…, UNSUBSCRIBE / PUNSUBSCRIBE [names…] (none: every one):
/// one confirmation per name, with the connection's subscriptions after it, as Redis does.
pub fn change(shared: &Shared, conn: &mut Connection, change: Change, names: &[Vec<u8>]) {
    let target = change.target;
    if change.subscribe {
        for channel in names {
            if conn.subscribed(target).insert(channel.clone()) {
                shared
                    .pubsub
                    .subscribe(target, channel, conn.home, &conn.backlog);
            }
            confirm(conn, target, target.subscribe_word(), Some(channel));
        }
        return;
    }
    let names: Vec<Vec<u8>> = if names.is_empty() {
        conn.subscribed(target).iter().cloned().collect()
    } else {
        names.to_vec()
    };
    if names.is_empty() {
        confirm(conn, target, target.unsubscribe_word(), None);
    }
    for channel in &names {
        if conn.subscribed(target).remove(channel) {
            shared.pubsub.unsubscribe(target, channel, conn.home);
        }
        confirm(conn, target, target.unsubscribe_word(), Some(channel));
    }
}

/// A confirmation, with the count Redis 7.0 gives: a shard channel's counts the
/// connection's shard channels, the others its channels and patterns.
fn confirm(conn: &mut Connection, target: Target, word: &str, name: Option<&Vec<u8>>) {
    let count = match target {
        Target::Shard => conn.shard_channels.len(),
        _ => conn.channels.len() + conn.patterns.len(),
    };
    let frame = Reply::Push(vec![
        Reply::Bulk(word.as_bytes().to_vec()),
        name.map_or(Reply::Null, |n| Reply::Bulk(n.clone())),
        Reply::Int(count as i64),
    ]);
    frame.encode(conn.protocol, &mut conn.output);
}

/// Drops every subscription of a connection (closed, or RESET).
pub fn unsubscribe_all(shared: &Shared, conn: &mut Connection) {
    for target in [Target::Channel, Target::Pattern, Target::Shard] {
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
                ..
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
        pubsub.subscribe(Target::Channel, b"news", who(0, 5), &Arc::default());
        pubsub.subscribe(Target::Channel, b"news", who(1, 7), &Arc::default());
        pubsub.subscribe(Target::Pattern, b"n*", who(1, 7), &Arc::default());
        pubsub.subscribe(Target::Pattern, b"x*", who(0, 5), &Arc::default());
        assert_eq!(
            published(&pubsub, "news"),
            vec![(0, 5, None), (1, 7, None), (1, 7, Some("n*".into()))]
        );
        assert_eq!(published(&pubsub, "nope"), vec![(1, 7, Some("n*".into()))]);
        assert_eq!(
            pubsub.channels(Target::Channel, None),
            vec![b"news".to_vec()]
        );
        let none = Vec::<Vec<u8>>::new();
        assert_eq!(pubsub.channels(Target::Channel, Some(b"x*")), none);
        assert_eq!(pubsub.subscribers_of(Target::Channel, b"news"), 2);
        assert_eq!(pubsub.patterns(), 2);
        pubsub.unsubscribe(Target::Channel, b"news", who(0, 5));
        pubsub.unsubscribe(Target::Pattern, b"n*", who(1, 7));
        assert_eq!(published(&pubsub, "news"), vec![(1, 7, None)]);
        pubsub.unsubscribe(Target::Channel, b"news", who(1, 7));
        pubsub.unsubscribe(Target::Pattern, b"x*", who(0, 5));
        assert_eq!(pubsub.channel_count(Target::Channel) + pubsub.patterns(), 0);
    }

    #[test]
    fn shard_channels_are_apart_from_channels_of_the_same_name() {
        let pubsub = PubSub::default();
        pubsub.subscribe(Target::Shard, b"news", who(0, 5), &Arc::default());
        pubsub.subscribe(Target::Pattern, b"n*", who(1, 7), &Arc::default());
        assert!(published(&pubsub, "news")
            .iter()
            .all(|(_, _, p)| p.is_some()));
        let mut shard = Vec::new();
        let count = pubsub.publish_shard(b"news", b"hi", |s, m| {
            shard.push((s, m.frame().expect("a message")))
        });
        assert_eq!(count, 1);
        let smessage = Reply::Push(
            [&b"smessage"[..], b"news", b"hi"]
                .map(|b| Reply::Bulk(b.to_vec()))
                .to_vec(),
        );
        assert_eq!(shard, vec![(who(0, 5), smessage)]);
        assert_eq!(pubsub.subscribers_of(Target::Channel, b"news"), 0);
        assert_eq!(pubsub.channel_count(Target::Shard), 1);
    }

    /// Messages count in their subscriber's backlog until they are dropped; one past the
    /// limit is refused, and the subscriber hears of it once, to be disconnected.
    #[test]
    fn a_backlog_past_the_limit_refuses_messages_and_says_so_once() {
        let pubsub = PubSub::default();
        let backlog = Arc::new(Backlog::default());
        pubsub.subscribe(Target::Channel, b"c", who(0, 5), &backlog);
        let payload = vec![0u8; PUBSUB_OUTPUT_LIMIT / 4];
        let mut queued = Vec::new();
        for _ in 0..6 {
            let count = pubsub.publish(b"c", &payload, |_, m| queued.push(m));
            assert_eq!(count, 1, "a refused message still counts as received");
        }
        let published = |q: &[Message]| {
            q.iter()
                .filter(|m| matches!(m, Message::Published { .. }))
                .count()
        };
        assert_eq!(published(&queued), 3, "only what fits the limit is queued");
        assert_eq!(
            queued
                .iter()
                .filter(|m| matches!(m, Message::Overflowed))
                .count(),
            1
        );
        assert!(backlog.overflowed());
        assert!(backlog.bytes.load(Ordering::Acquire) > 0);
        queued.clear();
        assert_eq!(
            backlog.bytes.load(Ordering::Acquire),
            0,
            "dropped, released"
        );
    }

    #[test]
    fn frames_are_redis_push_arrays() {
        let message = Message::Published {
            via: Target::Pattern,
            pattern: Some(Arc::from(&b"n*"[..])),
            channel: Arc::from(&b"news"[..]),
            payload: Arc::from(&b"hi"[..]),
            share: None,
        };
        let mut out = Vec::new();
        message
            .frame()
            .expect("a message")
            .encode(Default::default(), &mut out);
        assert_eq!(
            out,
            b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
    }
}
