//! Keyspace notifications (Redis's `notify-keyspace-events`): which classes of key events
//! are published, as the setting's letters say, and the events a command's transaction
//! collects.
//!
//! A command names its events as it runs (`Ctx::notify`), in Redis's order; they belong
//! to the transaction's attempt, so a retried or undone transaction publishes none of its
//! attempts' events, and a committed one publishes them after its durability wait, with
//! its reply (`Shared::publish_key_events`, `server/mod.rs`): a subscriber never hears of a
//! write a crash could take back.
//!
//! Each client's events come in the order of its commands, and before the reply to any
//! command a subscriber sends after the writer was answered. Events of two clients' commands
//! that finish in the same moment on two event loops come in the order their loops' passes
//! end, which may differ from the order they committed in (Redis runs one command at a
//! time): a pop that a push woke, on another loop, may be told before the push.
//!
//! Key-miss events (`m`) come from a command's read lookups and new-key events (`n`) from
//! the store of a key that was not there (`command::Ctx::meta`, `Ctx::store_meta`), as
//! Redis's `lookupKeyRead` and `dbAdd` send them. Evicted (`e`) and module (`d`) events are
//! accepted and have no cause here (no eviction, no modules). An expired key is told
//! when the active expiry removes it, or when a write finds it expired and replaces it; a
//! read (or a command that leaves the key alone, DEL among them) that finds a key expired
//! leaves it to the active expiry (Redis deletes it then and there, and tells it then), so
//! its `expired` event may come up to a tenth of a second later than Redis's.

use std::sync::atomic::{AtomicU32, Ordering};

/// One class of events, or the two kinds of channel, as a bit of the setting.
pub type Class = u32;

pub const GENERIC: Class = 1 << 0;
pub const STRING: Class = 1 << 1;
pub const LIST: Class = 1 << 2;
pub const SET: Class = 1 << 3;
pub const HASH: Class = 1 << 4;
pub const ZSET: Class = 1 << 5;
pub const EXPIRED: Class = 1 << 6;
pub const EVICTED: Class = 1 << 7;
pub const STREAM: Class = 1 << 8;
pub const MODULE: Class = 1 << 9;
/// A key created where there was none (`n`).
pub const NEW: Class = 1 << 12;
/// A read lookup that found no key (`m`).
pub const KEY_MISS: Class = 1 << 13;
/// `__keyspace@<db>__:<key>` channels, the event as the message.
pub const KEYSPACE: Class = 1 << 10;
/// `__keyevent@<db>__:<event>` channels, the key as the message.
pub const KEYEVENT: Class = 1 << 11;
/// Redis's `A`: every class but key-miss and new-key events.
pub const ALL: Class =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The classes by their letters, in the order Redis writes them back (`A`'s classes, then
/// `n`; `m` comes after `K` and `E`).
const LETTERS: [(u8, Class); 11] = [
    (b'g', GENERIC),
    (b'$', STRING),
    (b'l', LIST),
    (b's', SET),
    (b'h', HASH),
    (b'z', ZSET),
    (b'x', EXPIRED),
    (b'e', EVICTED),
    (b't', STREAM),
    (b'd', MODULE),
    (b'n', NEW),
];

/// Why a setting was refused: a letter no class has (the text after CONFIG SET's prefix).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
    }
}

/// The classes `setting` names (`"KEA"`, `"Ex"`, `""` for none), as Redis reads them.
pub fn parse(setting: &[u8]) -> Result<Class, Refused> {
    let mut flags = 0;
    for &letter in setting {
        flags |= match letter {
            b'A' => ALL,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b'm' => KEY_MISS,
            _ => LETTERS
                .iter()
                .find(|(known, _)| *known == letter)
                .map(|(_, class)| *class)
                .ok_or(Refused)?,
        };
    }
    Ok(flags)
}

/// The setting as CONFIG GET shows it: `A` for every class it stands for (and then no `n`,
/// as Redis writes it), else each class's letter, then `K`, `E` and `m`.
pub fn format(flags: Class) -> String {
    let mut text = String::new();
    if flags & ALL == ALL {
        text.push('A');
    } else {
        for (letter, class) in LETTERS {
            if flags & class != 0 {
                text.push(letter as char);
            }
        }
    }
    for (letter, class) in [('K', KEYSPACE), ('E', KEYEVENT), ('m', KEY_MISS)] {
        if flags & class != 0 {
            text.push(letter);
        }
    }
    text
}

/// The setting in effect, read by every command that may notify (one relaxed load: nothing
/// is collected while it is off, Redis's default).
#[derive(Default)]
pub struct Notifications(AtomicU32);

impl Notifications {
    pub fn get(&self) -> Class {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self, flags: Class) {
        self.0.store(flags, Ordering::Relaxed);
    }

    /// Whether an event of `class` is published on some channel.
    pub fn wants(&self, class: Class) -> bool {
        let flags = self.get();
        flags & class != 0 && flags & (KEYSPACE | KEYEVENT) != 0
    }
}

/// One event: what happened (Redis's event name) to `key` of database `db`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    pub db: u32,
    pub event: &'static str,
    pub key: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_and_write_back_as_redis_does() {
        for (setting, shown) in [
            ("", ""),
            ("KEA", "AKE"),
            ("AKE", "AKE"),
            ("Ex", "xE"),
            ("Kg$", "g$K"),
            ("zhsl$gK", "g$lshzK"),
            ("g$lshzxetdK", "AK"),
            ("E$$", "$E"),
            ("nmKE", "nKEm"),
            ("gn", "gn"),
            ("Em", "Em"),
        ] {
            let flags = parse(setting.as_bytes()).unwrap();
            assert_eq!(format(flags), shown, "{setting}");
            assert_eq!(parse(shown.as_bytes()), Ok(flags), "{setting}");
        }
    }

    #[test]
    fn new_key_events_hide_behind_a_as_redis_writes_them() {
        // Redis 7.0.15 answers CONFIG GET so after CONFIG SET "Anm".
        let flags = parse(b"Anm").unwrap();
        assert_eq!(format(flags), "Am");
        assert_eq!(flags & NEW, NEW, "still sent");
    }

    #[test]
    fn unknown_letters_are_refused() {
        assert_eq!(parse(b"KEq"), Err(Refused));
        assert_eq!(parse(b"a"), Err(Refused));
    }

    #[test]
    fn all_leaves_out_new_and_missed_keys() {
        let all = parse(b"A").unwrap();
        assert_eq!(all & (NEW | KEY_MISS), 0);
        assert_eq!(parse(b"Anm").unwrap(), all | NEW | KEY_MISS);
    }

    #[test]
    fn an_event_is_wanted_only_with_a_channel_and_its_class() {
        let notifications = Notifications::default();
        assert!(!notifications.wants(STRING));
        notifications.set(parse(b"$").unwrap());
        assert!(!notifications.wants(STRING), "no channel kind named");
        notifications.set(parse(b"K$").unwrap());
        assert!(notifications.wants(STRING));
        assert!(!notifications.wants(LIST));
        notifications.set(parse(b"EA").unwrap());
        assert!(notifications.wants(EXPIRED) && notifications.wants(GENERIC));
    }
}
