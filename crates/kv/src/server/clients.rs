//! The connected clients as the whole server sees them: CLIENT LIST's lines, and what CLIENT
//! KILL picks clients by (id, address, local address, type) with the event loop and token
//! each is served at, so that the loop which runs CLIENT KILL can ask another to close one.
//!
//! A loop asked to close a client (`LoopState::kill`) checks the id as well as the token: a
//! token freed by a closed connection may serve a new one by then, which is not killed.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use tailstore_resp::Reply;

use super::connection::{Connection, Listing};
use super::pubsub::Subscriber;
use crate::command::is;

/// What CLIENT LIST and CLIENT KILL know of one client.
struct Listed {
    home: Subscriber,
    peer: String,
    local: String,
    pubsub: bool,
    /// The user it logged in as.
    user: Vec<u8>,
    line: Listing,
    /// Waiting in a blocking command (what CLIENT UNBLOCK looks for).
    blocked: bool,
}

#[derive(Default)]
pub struct Clients {
    listed: Mutex<BTreeMap<u64, Listed>>,
}

/// A client to close: its id, and where it is served.
pub struct Doomed {
    pub id: u64,
    pub home: Subscriber,
}

impl Clients {
    /// Adds or refreshes `conn`'s entry (its line, whether it is subscribed).
    pub fn update(&self, conn: &Connection) {
        let mut all = self.listed.lock();
        let blocked = all.get(&conn.id).is_some_and(|l| l.blocked);
        let listed = Listed {
            home: conn.home,
            peer: conn.peer.clone(),
            local: conn.local.clone(),
            pubsub: conn.subscriptions() > 0,
            user: conn.user_name().as_bytes().to_vec(),
            line: conn.listing(),
            blocked,
        };
        all.insert(conn.id, listed);
    }

    /// Records whether client `id` waits in a blocking command (its event loop says).
    pub fn set_blocked(&self, id: u64, blocked: bool) {
        if let Some(listed) = self.listed.lock().get_mut(&id) {
            listed.blocked = blocked;
        }
    }

    /// Where client `id` is served, if it is listed and blocked now.
    pub fn blocked_at(&self, id: u64) -> Option<Subscriber> {
        let listed = self.listed.lock();
        listed.get(&id).filter(|l| l.blocked).map(|l| l.home)
    }

    /// Where client `id` is served, if it is connected.
    pub fn home_of(&self, id: u64) -> Option<Subscriber> {
        self.listed.lock().get(&id).map(|l| l.home)
    }

    pub fn remove(&self, id: u64) {
        self.listed.lock().remove(&id);
    }

    /// CLIENT LIST's lines of the clients `filter` picks, by id.
    pub fn lines(&self, filter: &ClientFilter) -> String {
        let listed = self.listed.lock();
        listed
            .iter()
            .filter(|(id, l)| filter.picks(**id, l, 0))
            .map(|(_, l)| format!("{}\n", l.line.line()))
            .collect()
    }

    /// The clients `filter` picks.
    pub fn matching(&self, filter: &ClientFilter, me: u64) -> Vec<Doomed> {
        let listed = self.listed.lock();
        listed
            .iter()
            .filter(|(id, l)| filter.picks(**id, l, me))
            .map(|(id, l)| Doomed {
                id: *id,
                home: l.home,
            })
            .collect()
    }
}

/// Which clients CLIENT KILL closes, or CLIENT LIST lists.
#[derive(Default)]
pub struct ClientFilter {
    /// Any of these ids (CLIENT KILL gives one, CLIENT LIST any number); empty: any id.
    ids: Vec<u64>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    user: Option<Vec<u8>>,
    /// `Some(true)`: only subscribed clients; `Some(false)`: only the others.
    pubsub: Option<bool>,
    /// No client is of a type this server does not have (master, replica).
    none: bool,
    skip_me: bool,
    /// The old form, `CLIENT KILL addr:port`: answered OK or "No such client".
    old_form: bool,
}

impl ClientFilter {
    /// CLIENT LIST's arguments after LIST, as Redis 7.0 reads them: none, TYPE type, or
    /// ID id….
    pub fn parse_list(args: &[Vec<u8>]) -> Result<ClientFilter, Reply> {
        let mut filter = ClientFilter::default();
        match args {
            [] => {}
            [name, kind] if is(name, "type") => filter.set_type(kind)?,
            [name, ids @ ..] if is(name, "id") && !ids.is_empty() => {
                for id in ids {
                    // Any integer is an id to look for (0 and below match none).
                    let id = crate::command::parse_int(id)
                        .ok()
                        .ok_or_else(|| Reply::error("ERR Invalid client ID"))?;
                    filter.ids.push(u64::try_from(id).unwrap_or(0));
                }
            }
            _ => return Err(Reply::error("ERR syntax error")),
        }
        Ok(filter)
    }

    /// The clients logged in as `user` (ACL DELUSER closes them).
    pub fn of_user(user: &[u8]) -> ClientFilter {
        ClientFilter {
            user: Some(user.to_vec()),
            ..ClientFilter::default()
        }
    }

    /// The subscribed clients logged in as `user` (its channels changed).
    pub fn subscribed_of_user(user: &[u8]) -> ClientFilter {
        ClientFilter {
            pubsub: Some(true),
            ..ClientFilter::of_user(user)
        }
    }

    /// CLIENT KILL's arguments after KILL, as Redis 7.0 reads them; `user_exists` says
    /// whether USER names a user.
    pub fn parse_kill(
        args: &[Vec<u8>],
        user_exists: impl Fn(&[u8]) -> bool,
    ) -> Result<ClientFilter, Reply> {
        if let [addr] = args {
            return Ok(ClientFilter {
                addr: Some(addr.clone()),
                old_form: true,
                ..ClientFilter::default()
            });
        }
        let mut filter = ClientFilter {
            skip_me: true,
            ..ClientFilter::default()
        };
        let syntax = || Reply::error("ERR syntax error");
        for pair in args.chunks(2) {
            let [name, value] = pair else {
                return Err(syntax());
            };
            if is(name, "id") {
                let id = crate::command::parse_int(value).ok();
                match id {
                    Some(id) if id >= 1 => filter.ids = vec![id as u64],
                    _ => return Err(Reply::error("ERR client-id should be greater than 0")),
                }
            } else if is(name, "type") {
                filter.set_type(value)?;
            } else if is(name, "addr") {
                filter.addr = Some(value.clone());
            } else if is(name, "laddr") {
                filter.laddr = Some(value.clone());
            } else if is(name, "user") {
                if !user_exists(value) {
                    return Err(Reply::error(format!(
                        "ERR No such user '{}'",
                        String::from_utf8_lossy(value)
                    )));
                }
                filter.user = Some(value.clone());
            } else if is(name, "skipme") && (is(value, "yes") || is(value, "no")) {
                filter.skip_me = is(value, "yes");
            } else {
                return Err(syntax());
            }
        }
        Ok(filter)
    }

    fn set_type(&mut self, name: &[u8]) -> Result<(), Reply> {
        if is(name, "normal") {
            self.pubsub = Some(false);
        } else if is(name, "pubsub") {
            self.pubsub = Some(true);
        } else if ["master", "slave", "replica"].iter().any(|t| is(name, t)) {
            self.none = true;
        } else {
            return Err(Reply::error(format!(
                "ERR Unknown client type '{}'",
                String::from_utf8_lossy(name)
            )));
        }
        Ok(())
    }

    fn picks(&self, id: u64, listed: &Listed, me: u64) -> bool {
        !self.none
            && (self.ids.is_empty() || self.ids.contains(&id))
            && self
                .addr
                .as_deref()
                .is_none_or(|a| a == listed.peer.as_bytes())
            && self
                .laddr
                .as_deref()
                .is_none_or(|a| a == listed.local.as_bytes())
            && self.pubsub.is_none_or(|p| p == listed.pubsub)
            && self.user.as_deref().is_none_or(|u| u == listed.user)
            && !(self.skip_me && id == me)
    }

    /// The reply once `killed` clients were closed.
    pub fn reply(&self, killed: usize) -> Reply {
        match (self.old_form, killed) {
            (false, _) => Reply::Int(killed as i64),
            (true, 0) => Reply::error("ERR No such client"),
            (true, _) => Reply::ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: &[&str]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    fn refusal(args: &[&str]) -> String {
        match ClientFilter::parse_kill(&words(args), |user| user == b"default") {
            Err(Reply::Error(text)) => text,
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("{args:?} accepted"),
        }
    }

    #[test]
    fn filters_are_read_and_refused_as_redis_reads_them() {
        assert_eq!(
            refusal(&["ID", "0"]),
            "ERR client-id should be greater than 0"
        );
        assert_eq!(
            refusal(&["ID", "x"]),
            "ERR client-id should be greater than 0"
        );
        assert_eq!(refusal(&["TYPE", "odd"]), "ERR Unknown client type 'odd'");
        assert_eq!(refusal(&["USER", "bob"]), "ERR No such user 'bob'");
        assert_eq!(refusal(&["SKIPME", "maybe"]), "ERR syntax error");
        assert_eq!(refusal(&["ID", "1", "ADDR"]), "ERR syntax error");
        assert_eq!(refusal(&["BOGUS", "1"]), "ERR syntax error");
        let filter = ClientFilter::parse_kill(
            &words(&["ID", "7", "TYPE", "pubsub", "SKIPME", "no"]),
            |user| user == b"default",
        )
        .unwrap_or_default();
        assert_eq!(
            (filter.ids, filter.pubsub, filter.skip_me),
            (vec![7], Some(true), false)
        );
        let old_form = ClientFilter::parse_kill(&words(&["127.0.0.1:5"]), |_| false);
        assert!(old_form.is_ok_and(|f| f.old_form));
    }

    #[test]
    fn list_filters_are_read_as_redis_reads_them() {
        let list = |args: &[&str]| ClientFilter::parse_list(&words(args));
        assert!(list(&[]).is_ok_and(|f| f.ids.is_empty() && f.pubsub.is_none()));
        assert!(list(&["ID", "3", "0", "-2"]).is_ok_and(|f| f.ids == [3, 0, 0]));
        assert!(list(&["type", "PUBSUB"]).is_ok_and(|f| f.pubsub == Some(true)));
        assert!(list(&["TYPE", "replica"]).is_ok_and(|f| f.none));
        for (args, refusal) in [
            (&["ID"][..], "ERR syntax error"),
            (&["ID", "x"], "ERR Invalid client ID"),
            (&["TYPE"], "ERR syntax error"),
            (&["TYPE", "odd"], "ERR Unknown client type 'odd'"),
            (&["TYPE", "normal", "ID", "1"], "ERR syntax error"),
        ] {
            assert_eq!(list(args).err(), Some(Reply::error(refusal)), "{args:?}");
        }
    }
}
