//! Client-side caching (Redis 6's "server-assisted client-side caching"): CLIENT TRACKING,
//! CACHING, GETREDIR and TRACKINGINFO, and the invalidation messages that tell a client
//! its cached copy of a key is stale.
//!
//! A tracking client is sent `invalidate` with a key when the key is written after the
//! client read it (default mode: the keys it read with read-only commands are remembered,
//! each until its first write after the read; OPTIN: only reads after CLIENT CACHING yes;
//! OPTOUT: all but those after CLIENT CACHING no), or whenever a key under one of its
//! prefixes is written (BCAST). NOLOOP leaves out the client's own writes. The messages go
//! to the client itself as RESP3 pushes, or to another client (REDIRECT), which on RESP2
//! gets them as pub/sub messages of `__redis__:invalidate` if it subscribes to anything.
//! FLUSHDB and FLUSHALL send every tracking client a null invalidation (everything). As in
//! Redis, keys are remembered by name alone, whatever their database.
//!
//! # Why no stale copy survives
//!
//! Each loop runs its connections' commands one at a time, and writes happen on every
//! loop. A client's read remembers its keys *before* it reads them; a write signals its
//! keys *after* it is applied. So either the read saw the write (its copy is fresh), or the
//! write's signal finds the read's registration and addresses it an invalidation. That
//! message reaches the reader's loop through its message queue (`worker.rs`), which the
//! loop drains in each pass after reading its connections and before running their
//! commands: the reply to the read, appended to the reader's output in its pass, is always
//! ahead of it, and the reply to any command the reader sends once the writer is answered
//! is always behind it (`worker.rs`, "Messages ahead of the commands sent after them"). A registration after the read could miss a write
//! applied in between and leave the client a stale copy with no message to come.
//!
//! Messages leave like replies, after the writer's pass waited for durability (see
//! `pubsub.rs`); an invalidation is sent for a write that then proves to change nothing
//! (SET … NX on an existing key), which Redis does not: a client drops a copy it could
//! have kept, never keeps one it should drop.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tailstore_resp::{Protocol, Reply};

use super::clients::Clients;
use super::connection::Connection;
use super::pubsub::{Message, Subscriber};
use crate::command::is;

/// Keys remembered for default-mode tracking clients at most, Redis's default
/// `tracking-table-max-keys`: a client reading ever new keys cannot grow the table without
/// bound.
pub const MAX_TRACKED_KEYS: usize = 1_000_000;

/// Keys a read forgets at most, beyond as many as it added, while the table is brought back
/// under [`MAX_TRACKED_KEYS`]: a tenth of the limit at once held one read (and every
/// tracking client's, on the table's lock) for 66 ms in a release build; a thousand keys
/// take well under a millisecond, and the table shrinks with every read until it is done.
const EVICTION_STEP: usize = 1_000;

/// The pub/sub channel a RESP2 client receives redirected invalidations on.
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// One connection's CLIENT TRACKING settings (`None` on the connection: tracking off).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mode {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// The client the messages go to instead (REDIRECT).
    pub redirect: Option<u64>,
    /// BCAST's prefixes ("" when none was given: every key).
    pub prefixes: Vec<Vec<u8>>,
    /// CLIENT CACHING's word for the next command (or the next MULTI block).
    pub caching: Option<bool>,
    /// The redirect's client was gone when a message was due (flag `R`).
    pub broken_redirect: bool,
}

impl Mode {
    /// Whether this client's reads now register their keys.
    pub fn remembers_reads(&self) -> bool {
        !self.bcast
            && match (self.optin, self.optout) {
                (true, _) => self.caching == Some(true),
                (_, true) => self.caching != Some(false),
                _ => true,
            }
    }

    /// CLIENT TRACKINGINFO's flags.
    fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec!["on"];
        let named = [
            (self.bcast, "bcast"),
            (self.optin, "optin"),
            (self.optout, "optout"),
            (self.caching == Some(true), "caching-yes"),
            (self.caching == Some(false), "caching-no"),
            (self.noloop, "noloop"),
            (self.broken_redirect, "broken_redirect"),
        ];
        flags.extend(named.iter().filter(|(on, _)| *on).map(|(_, name)| *name));
        flags
    }
}

/// Where a tracking client's messages go, as the table keeps it.
#[derive(Clone, Copy)]
struct Listener {
    home: Subscriber,
    bcast: bool,
    noloop: bool,
    redirect: Option<u64>,
}

/// Every tracking client, the keys they read and the prefixes they watch.
#[derive(Default)]
pub struct Tracking {
    /// Clients with tracking on: a write looks at the table only while there are some.
    active: AtomicUsize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    /// Default mode: each key read, with the clients that read it. Entries of clients
    /// that have since turned tracking off or to BCAST are skipped when the key is written.
    keys: HashMap<Vec<u8>, BTreeSet<u64>>,
    /// Keys went past the limit, and reads are forgetting some until a tenth below it.
    evicting: bool,
    /// BCAST: each prefix, with its clients.
    prefixes: BTreeMap<Vec<u8>, BTreeSet<u64>>,
    clients: HashMap<u64, Listener>,
}

/// A message due to a tracking client: `keys`, or `None` for everything (a flush).
struct Due {
    to: Listener,
    keys: Option<Arc<[Vec<u8>]>>,
}

/// (tracking_total_keys, tracking_total_items, tracking_total_prefixes) for INFO.
pub struct Totals {
    pub keys: usize,
    pub items: usize,
    pub prefixes: usize,
}

impl Tracking {
    /// Clients with tracking on (INFO's `tracking_clients`).
    pub fn clients(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    pub fn totals(&self) -> Totals {
        let table = self.table.lock();
        Totals {
            keys: table.keys.len(),
            items: table.keys.values().map(BTreeSet::len).sum(),
            prefixes: table.prefixes.len(),
        }
    }

    /// Turns tracking on for `conn` in `mode` (its prefixes added to any it had; BCAST
    /// without a prefix adds the empty one, every key, as in Redis).
    fn enable(&self, conn: &mut Connection, mut mode: Mode) {
        let mut table = self.table.lock();
        if mode.bcast && mode.prefixes.is_empty() {
            mode.prefixes.push(Vec::new());
        }
        if let Some(old) = conn.tracking.take() {
            let added = std::mem::replace(&mut mode.prefixes, old.prefixes);
            for prefix in added {
                if !mode.prefixes.contains(&prefix) {
                    mode.prefixes.push(prefix);
                }
            }
        } else {
            self.active.fetch_add(1, Ordering::SeqCst);
        }
        for prefix in &mode.prefixes {
            table
                .prefixes
                .entry(prefix.clone())
                .or_default()
                .insert(conn.id);
        }
        let listener = Listener {
            home: conn.home,
            bcast: mode.bcast,
            noloop: mode.noloop,
            redirect: mode.redirect,
        };
        table.clients.insert(conn.id, listener);
        conn.tracking = Some(mode);
    }

    /// Turns tracking off for `conn` (CLIENT TRACKING off, RESET, a closed connection).
    pub fn disable(&self, conn: &mut Connection) {
        let Some(mode) = conn.tracking.take() else {
            return;
        };
        let mut table = self.table.lock();
        for prefix in &mode.prefixes {
            if let Some(ids) = table.prefixes.get_mut(prefix) {
                ids.remove(&conn.id);
                if ids.is_empty() {
                    table.prefixes.remove(prefix);
                }
            }
        }
        table.clients.remove(&conn.id);
        self.active.fetch_sub(1, Ordering::SeqCst);
    }

    /// Before a read-only command of `conn` reads `keys`: remembers them for it, if its
    /// mode says so (see "Why no stale copy survives"). Past [`MAX_TRACKED_KEYS`] keys,
    /// some are forgotten, their clients told to drop them (into `conn`'s outbox).
    pub fn remember<'k>(
        &self,
        clients: &Clients,
        conn: &mut Connection,
        keys: impl IntoIterator<Item = &'k [u8]>,
    ) {
        if !conn.tracking.as_ref().is_some_and(Mode::remembers_reads) {
            return;
        }
        let mut table = self.table.lock();
        let before = table.keys.len();
        for key in keys {
            table.keys.entry(key.to_vec()).or_default().insert(conn.id);
        }
        let added = table.keys.len() - before;
        let evicted = table.evict(MAX_TRACKED_KEYS, EVICTION_STEP + added);
        drop(table);
        route(clients, evicted, &mut conn.published);
    }

    /// After client `writer` (0: the server itself, expiring keys) wrote `keys`: the
    /// invalidations due, added to `outbox`.
    pub fn invalidate<'k>(
        &self,
        clients: &Clients,
        writer: u64,
        keys: impl IntoIterator<Item = &'k [u8]>,
        outbox: &mut Vec<(Subscriber, Message)>,
    ) {
        if self.clients() == 0 {
            return;
        }
        let due = self.table.lock().written(writer, keys);
        route(clients, due, outbox);
    }

    /// After FLUSHDB or FLUSHALL: every tracking client is told to drop everything, and the
    /// keys read are forgotten (Redis does both for either command: keys are tracked by
    /// name alone).
    pub fn flushed(&self, clients: &Clients, outbox: &mut Vec<(Subscriber, Message)>) {
        if self.clients() == 0 {
            return;
        }
        let due = {
            let mut table = self.table.lock();
            table.keys.clear();
            let listeners = table.clients.values();
            listeners
                .map(|to| Due {
                    to: *to,
                    keys: None,
                })
                .collect()
        };
        route(clients, due, outbox);
    }
}

impl Table {
    /// Past `most` remembered keys, forgets up to `step` of them (whichever the map yields
    /// first: about a random choice, as Redis's), and so at each call until a tenth of
    /// `most` below it; answers the invalidations that tell their clients, as Redis's
    /// `tracking-table-max-keys` does: a client's copy is dropped, never left unwatched.
    fn evict(&mut self, most: usize, step: usize) -> Vec<Due> {
        self.evicting |= self.keys.len() > most;
        if !self.evicting {
            return Vec::new();
        }
        let excess = self.keys.len().saturating_sub(most - most / 10);
        let count = excess.min(step);
        self.evicting = count < excess;
        let victims: Vec<Vec<u8>> = self.keys.keys().take(count).cloned().collect();
        let keys: Vec<&[u8]> = victims.iter().map(Vec::as_slice).collect();
        // Not written (BCAST clients hear nothing), and by no client: NOLOOP spares nobody.
        self.forget_reads(0, &keys)
    }

    /// The invalidations `keys` written by `writer` make due, and the default mode's
    /// registrations they end.
    fn written<'k>(&mut self, writer: u64, keys: impl IntoIterator<Item = &'k [u8]>) -> Vec<Due> {
        let keys: Vec<&[u8]> = keys.into_iter().collect();
        let mut due = self.forget_reads(writer, &keys);
        due.extend(self.broadcast(writer, &keys));
        due
    }

    /// Default mode: each client that read one of `keys` is told, once per key, and the
    /// registrations end; but `writer`, if it asked for NOLOOP, is not told and stays
    /// registered. A MULTI block's or a script's reads are registered before the block
    /// runs and its writes invalidated after, so a read after a write of the same key in
    /// one block (whose value the client caches) would otherwise be forgotten, and a later
    /// write by another client would leave that copy stale. Redis registers such a read
    /// after the write; keeping the registration costs at most one message more.
    fn forget_reads(&mut self, writer: u64, keys: &[&[u8]]) -> Vec<Due> {
        let mut due = Vec::new();
        for key in keys {
            let mut writer_stays = false;
            for id in self.keys.remove(*key).unwrap_or_default() {
                let Some(to) = self.clients.get(&id).filter(|l| !l.bcast) else {
                    continue;
                };
                if to.noloop && id == writer {
                    writer_stays = true;
                } else {
                    let keys = Some(Arc::from(vec![key.to_vec()]));
                    due.push(Due { to: *to, keys });
                }
            }
            if writer_stays {
                self.keys.entry(key.to_vec()).or_default().insert(writer);
            }
        }
        due
    }

    /// BCAST: per client and prefix, the keys written under it, as one message.
    fn broadcast(&self, writer: u64, keys: &[&[u8]]) -> Vec<Due> {
        let mut broadcast: BTreeMap<(u64, &[u8]), Vec<Vec<u8>>> = BTreeMap::new();
        for key in keys {
            for (prefix, ids) in &self.prefixes {
                if !key.starts_with(prefix) {
                    continue;
                }
                for id in ids {
                    let loops_back = self.clients.get(id).is_some_and(|l| l.noloop);
                    if !(loops_back && *id == writer) {
                        let keys = broadcast.entry((*id, prefix.as_slice())).or_default();
                        keys.push(key.to_vec());
                    }
                }
            }
        }
        let to = |id: &u64| self.clients.get(id).copied();
        broadcast
            .into_iter()
            .filter_map(|((id, _), keys)| {
                to(&id).map(|to| Due {
                    to,
                    keys: Some(Arc::from(keys)),
                })
            })
            .collect()
    }
}

/// Addresses each due message: to its client, or to the client it redirects to; a
/// redirect whose client is gone gets its tracking client `tracking-redir-broken` instead.
fn route(clients: &Clients, due: Vec<Due>, outbox: &mut Vec<(Subscriber, Message)>) {
    for Due { to, keys } in due {
        let message = match to.redirect {
            None => (
                to.home,
                Message::Invalidated {
                    keys,
                    redirected: false,
                },
            ),
            Some(id) => match clients.home_of(id) {
                Some(home) => (
                    home,
                    Message::Invalidated {
                        keys,
                        redirected: true,
                    },
                ),
                None => (to.home, Message::RedirectBroken(id)),
            },
        };
        outbox.push(message);
    }
}

/// The frame of an invalidation for `conn`, if it can take one: a RESP3 push, or on RESP2
/// a pub/sub message if it is redirected to and subscribes to anything (Redis's rules);
/// `None` otherwise.
pub fn invalidation_frame(
    conn: &Connection,
    keys: Option<&Arc<[Vec<u8>]>>,
    redirected: bool,
) -> Option<Reply> {
    let keys = keys.map_or(Reply::Null, |keys| {
        Reply::Array(keys.iter().map(|k| Reply::Bulk(k.clone())).collect())
    });
    if conn.protocol == Protocol::Resp3 {
        return Some(Reply::Push(vec![Reply::Bulk(b"invalidate".to_vec()), keys]));
    }
    (redirected && conn.subscriptions() > 0).then(|| {
        Reply::Push(vec![
            Reply::Bulk(b"message".to_vec()),
            Reply::Bulk(INVALIDATE_CHANNEL.to_vec()),
            keys,
        ])
    })
}

/// The frame telling `conn` that its redirect's client is gone (RESP3 only), which also
/// sets its flag.
pub fn redirect_broken_frame(conn: &mut Connection, redirect: u64) -> Option<Reply> {
    if let Some(mode) = conn
        .tracking
        .as_mut()
        .filter(|m| m.redirect == Some(redirect))
    {
        mode.broken_redirect = true;
    }
    (conn.protocol == Protocol::Resp3).then(|| {
        Reply::Push(vec![
            Reply::Bulk(b"tracking-redir-broken".to_vec()),
            Reply::Int(redirect as i64),
        ])
    })
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX prefix …] [BCAST] [OPTIN] [OPTOUT]
/// [NOLOOP], checked as Redis 7.0 checks it.
pub fn client_tracking(
    tracking: &Tracking,
    clients: &Clients,
    conn: &mut Connection,
    args: &[Vec<u8>],
) -> Reply {
    let mode = match parse_options(clients, args) {
        Ok(mode) => mode,
        Err(refusal) => return refusal,
    };
    if is(&args[0], "off") {
        tracking.disable(conn);
        return Reply::ok();
    }
    if !is(&args[0], "on") {
        return Reply::error("ERR syntax error");
    }
    if let Err(refusal) = check_mode(conn.tracking.as_ref(), &mode) {
        return refusal;
    }
    tracking.enable(conn, mode);
    Reply::ok()
}

/// The options after ON or OFF.
fn parse_options(clients: &Clients, options: &[Vec<u8>]) -> Result<Mode, Reply> {
    let mut mode = Mode::default();
    let mut i = 1;
    while i < options.len() {
        let option = &options[i];
        let value = options.get(i + 1);
        match value {
            Some(id) if is(option, "redirect") => {
                if mode.redirect.is_some() {
                    return Err(Reply::error(
                        "ERR A client can only redirect to a single other client",
                    ));
                }
                let id = crate::command::parse_int(id)
                    .ok()
                    .ok_or_else(|| Reply::error("ERR value is not an integer or out of range"))?;
                let id = u64::try_from(id)
                    .ok()
                    .filter(|id| clients.home_of(*id).is_some())
                    .ok_or_else(|| {
                        Reply::error("ERR The client ID you want redirect to does not exist")
                    })?;
                mode.redirect = Some(id);
                i += 1;
            }
            Some(prefix) if is(option, "prefix") => {
                mode.prefixes.push(prefix.clone());
                i += 1;
            }
            _ if is(option, "bcast") => mode.bcast = true,
            _ if is(option, "optin") => mode.optin = true,
            _ if is(option, "optout") => mode.optout = true,
            _ if is(option, "noloop") => mode.noloop = true,
            _ => return Err(Reply::error("ERR syntax error")),
        }
        i += 1;
    }
    Ok(mode)
}

/// Whether `new` may be turned on over `old`, in Redis's order of checks.
fn check_mode(old: Option<&Mode>, new: &Mode) -> Result<(), Reply> {
    if !new.bcast && !new.prefixes.is_empty() {
        return Err(Reply::error(
            "ERR PREFIX option requires BCAST mode to be enabled",
        ));
    }
    if old.is_some_and(|old| old.bcast != new.bcast) {
        return Err(Reply::error(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, \
             and then re-enabling it with a different mode.",
        ));
    }
    if new.bcast && (new.optin || new.optout) {
        return Err(Reply::error(
            "ERR OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if new.optin && new.optout {
        return Err(Reply::error(
            "ERR You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if old.is_some_and(|old| (new.optin && old.optout) || (new.optout && old.optin)) {
        return Err(Reply::error(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this \
             client, and then re-enabling it with a different mode.",
        ));
    }
    if new.bcast {
        overlapping_prefixes(old.map_or(&[][..], |old| &old.prefixes), &new.prefixes)?;
    }
    Ok(())
}

/// A client's prefixes may not overlap (one a prefix of another): a key under both
/// would be invalidated twice.
fn overlapping_prefixes(existing: &[Vec<u8>], new: &[Vec<u8>]) -> Result<(), Reply> {
    let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    for (i, prefix) in new.iter().enumerate() {
        if let Some(old) = existing.iter().find(|old| overlap(prefix, old)) {
            return Err(Reply::error(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single \
                 client must not overlap.",
                text(prefix),
                text(old)
            )));
        }
        if let Some(other) = new[i + 1..].iter().find(|other| overlap(prefix, other)) {
            return Err(Reply::error(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a \
                 single client must not overlap.",
                text(prefix),
                text(other)
            )));
        }
    }
    Ok(())
}

/// CLIENT CACHING YES|NO: whether the next command's reads are remembered (OPTIN, OPTOUT).
pub fn client_caching(conn: &mut Connection, word: &[u8]) -> Reply {
    // Any tracking mode passes this check (Redis's text names OPTIN and OPTOUT, but checks
    // only that tracking is on); the word then needs its mode.
    let Some(mode) = conn.tracking.as_mut() else {
        return Reply::error(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with \
             OPTIN or OPTOUT mode enabled",
        );
    };
    if is(word, "yes") {
        if !mode.optin {
            return Reply::error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
        mode.caching = Some(true);
    } else if is(word, "no") {
        if !mode.optout {
            return Reply::error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
        mode.caching = Some(false);
    } else {
        return Reply::error("ERR syntax error");
    }
    Reply::ok()
}

/// CLIENT GETREDIR: the redirect's id, 0 when tracking without one, -1 when not tracking.
pub fn client_getredir(conn: &Connection) -> Reply {
    Reply::Int(match &conn.tracking {
        None => -1,
        Some(mode) => mode.redirect.map_or(0, |id| id as i64),
    })
}

/// CLIENT TRACKINGINFO: flags, redirect and prefixes, as a map.
pub fn client_trackinginfo(conn: &Connection) -> Reply {
    let text = |word: &str| Reply::Bulk(word.as_bytes().to_vec());
    let (flags, redirect, prefixes) = match &conn.tracking {
        None => (vec!["off"], -1, Vec::new()),
        Some(mode) => (
            mode.flags(),
            mode.redirect.map_or(0, |id| id as i64),
            mode.prefixes.clone(),
        ),
    };
    Reply::Map(vec![
        (
            text("flags"),
            Reply::Set(flags.into_iter().map(text).collect()),
        ),
        (text("redirect"), Reply::Int(redirect)),
        (
            text("prefixes"),
            Reply::Array(prefixes.into_iter().map(Reply::Bulk).collect()),
        ),
    ])
}

/// After a command of `conn` ran: CLIENT CACHING's word lasts until a command other than
/// CLIENT runs, or for a whole MULTI block (it is kept while commands are queued), as in
/// Redis.
pub fn command_done(conn: &mut Connection, was_client_command: bool) {
    if was_client_command || conn.multi.is_some() {
        return;
    }
    if let Some(mode) = conn.tracking.as_mut() {
        mode.caching = None;
    }
}

/// Whether `args` is a CLIENT command: CLIENT CACHING's word outlasts it.
pub fn is_client_command(args: &[Vec<u8>]) -> bool {
    !args.is_empty() && is(&args[0], "client")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<u8>> {
        line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    fn refusal(old: Option<&Mode>, line: &str) -> String {
        let mode = parse_options(&Clients::default(), &words(line)).unwrap_or_default();
        match check_mode(old, &mode) {
            Err(Reply::Error(text)) => text,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn modes_are_refused_as_redis_refuses_them() {
        assert!(refusal(None, "on PREFIX a").contains("requires BCAST"));
        assert!(refusal(None, "on BCAST OPTIN").contains("not compatible with BCAST"));
        assert!(refusal(None, "on OPTIN OPTOUT").contains("both OPTIN mode and OPTOUT"));
        assert!(refusal(None, "on BCAST PREFIX ab PREFIX abc").contains("another provided"));
        let bcast = Mode {
            bcast: true,
            prefixes: vec![b"ab".to_vec()],
            ..Mode::default()
        };
        assert!(refusal(Some(&bcast), "on").contains("switch BCAST"));
        assert!(refusal(Some(&bcast), "on BCAST PREFIX a").contains("an existing prefix 'ab'"));
        let optin = Mode {
            optin: true,
            ..Mode::default()
        };
        assert!(refusal(Some(&optin), "on OPTOUT").contains("switch OPTIN/OPTOUT"));
        let parsed = parse_options(&Clients::default(), &words("on REDIRECT 5"));
        assert!(matches!(parsed, Err(Reply::Error(text)) if text.contains("does not exist")));
        let parsed = parse_options(&Clients::default(), &words("on NOPE"));
        assert!(matches!(parsed, Err(Reply::Error(text)) if text == "ERR syntax error"));
    }

    #[test]
    fn reads_are_remembered_as_the_mode_and_caching_say() {
        let mut mode = Mode::default();
        assert!(mode.remembers_reads());
        mode.optin = true;
        assert!(!mode.remembers_reads());
        mode.caching = Some(true);
        assert!(mode.remembers_reads());
        mode = Mode {
            optout: true,
            caching: Some(false),
            ..Mode::default()
        };
        assert!(!mode.remembers_reads());
        mode.caching = None;
        assert!(mode.remembers_reads());
        mode = Mode {
            bcast: true,
            ..Mode::default()
        };
        assert!(!mode.remembers_reads());
    }

    fn listener(at: usize, bcast: bool, noloop: bool) -> Listener {
        Listener {
            home: Subscriber {
                at,
                token: mio::Token(at),
            },
            bcast,
            noloop,
            redirect: None,
        }
    }

    fn due_keys(due: &[Due]) -> Vec<(usize, Vec<String>)> {
        let mut found: Vec<(usize, Vec<String>)> = due
            .iter()
            .map(|d| {
                let keys = d.keys.as_deref().unwrap_or_default();
                let keys = keys.iter().map(|k| String::from_utf8_lossy(k).into());
                (d.to.home.at, keys.collect())
            })
            .collect();
        found.sort();
        found
    }

    #[test]
    fn past_the_most_keys_a_tenth_are_forgotten_and_their_readers_told() {
        let mut table = Table::default();
        table.clients.insert(1, listener(1, false, true));
        // A BCAST client under every key's prefix: an eviction is no write, it hears nothing.
        table.clients.insert(2, listener(2, true, false));
        table.prefixes.entry(b"k".to_vec()).or_default().insert(2);
        for n in 0..25 {
            table
                .keys
                .entry(format!("k{n}").into_bytes())
                .or_default()
                .insert(1);
        }
        assert!(table.evict(25, 10).is_empty(), "at the limit, nothing goes");
        table.keys.entry(b"k25".to_vec()).or_default().insert(1);
        let due = table.evict(25, 10);
        // 26 keys against 25: one over, and a tenth of the limit more (2).
        assert_eq!(table.keys.len(), 23);
        let told = due_keys(&due);
        assert_eq!(
            told.len(),
            3,
            "one message per key, NOLOOP or not: {told:?}"
        );
        assert!(told.iter().all(|(at, keys)| *at == 1 && keys.len() == 1));
    }

    #[test]
    fn keys_past_the_limit_are_forgotten_a_step_at_a_time_down_to_a_tenth_below() {
        let mut table = Table::default();
        table.clients.insert(1, listener(1, false, false));
        let add = |table: &mut Table, from: usize, to: usize| {
            for n in from..to {
                let key = format!("k{n}").into_bytes();
                table.keys.entry(key).or_default().insert(1);
            }
        };
        add(&mut table, 0, 101);
        // 101 against 100: down to 90, five keys a call.
        let mut lengths = Vec::new();
        for _ in 0..4 {
            let due = table.evict(100, 5);
            assert_eq!(
                due.len() + table.keys.len(),
                lengths.last().copied().unwrap_or(101)
            );
            lengths.push(table.keys.len());
        }
        assert_eq!(lengths, [96, 91, 90, 90]);
        // Under the limit again, new keys are kept until it is passed.
        add(&mut table, 101, 111);
        assert!(table.evict(100, 5).is_empty());
        add(&mut table, 111, 112);
        assert_eq!(table.evict(100, 5).len(), 5);
    }

    #[test]
    fn a_write_invalidates_each_read_once_and_every_prefix_it_falls_under() {
        let mut table = Table::default();
        table.clients.insert(1, listener(1, false, false));
        table.clients.insert(2, listener(2, false, true));
        table.clients.insert(3, listener(3, true, true));
        for id in [1, 2] {
            table.keys.entry(b"k".to_vec()).or_default().insert(id);
        }
        table.prefixes.entry(b"k".to_vec()).or_default().insert(3);
        // Client 2 wrote: it does not hear of its own write (NOLOOP) and stays registered
        // (its block may have read the key after writing it); 1 and 3 hear of it.
        let due = table.written(2, [&b"k"[..], b"x"]);
        let k = vec!["k".to_string()];
        assert_eq!(due_keys(&due), vec![(1, k.clone()), (3, k.clone())]);
        let registered: Vec<u64> = table.keys[&b"k"[..]].iter().copied().collect();
        assert_eq!(
            registered,
            [2],
            "1's registration ends at the write, 2's stays"
        );
        let due = table.written(1, [&b"k"[..]]);
        assert_eq!(due_keys(&due), vec![(2, k.clone()), (3, k.clone())]);
        assert!(
            table.keys.is_empty(),
            "a registration ends at another's write"
        );
        assert!(table.written(2, [&b"k"[..]]).len() == 1, "the prefix stays");
        // Client 3's own write under its prefix is left out (NOLOOP); two keys are one message.
        assert!(table.written(3, [&b"k1"[..]]).is_empty());
        let due = table.written(1, [&b"k1"[..], b"k2"]);
        assert_eq!(due_keys(&due), vec![(3, vec!["k1".into(), "k2".into()])]);
    }
}
