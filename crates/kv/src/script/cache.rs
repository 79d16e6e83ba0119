//! The script cache as EVAL, EVALSHA and SCRIPT see it: the server's own ([`Scripts`]),
//! or an EXEC block's view of it ([`BlockScripts`]). A block's scripts are found and its
//! SCRIPT commands run before the block runs, in its order; what they load or flush is
//! kept in the view, so that an EVALSHA after a SCRIPT LOAD in the same block finds its
//! script, and reaches the server's cache only if the block runs: a block that a changed
//! watched key aborts changes nothing, as in Redis.

use std::collections::HashMap;
use std::sync::Arc;

use super::{sha1_hex, Scripts};

/// Where scripts are found and loaded.
pub trait ScriptCache {
    /// The server's cache (its limits, SCRIPT KILL, the loops' compiled functions).
    fn scripts(&self) -> &Scripts;
    /// The body whose SHA1 is `sha` (any case).
    fn get(&self, sha: &[u8]) -> Option<Arc<[u8]>>;
    /// `body`, just compiled (`anew`: not before on this event loop), is loaded.
    fn remember(&mut self, sha: &str, body: &[u8], anew: bool);
    /// SCRIPT FLUSH.
    fn flush(&mut self);
    /// SCRIPT KILL: whether a script was running, now told to stop.
    fn kill(&self) -> bool;

    fn contains(&self, sha: &[u8]) -> bool {
        self.get(sha).is_some()
    }
}

impl ScriptCache for &Scripts {
    fn scripts(&self) -> &Scripts {
        self
    }

    fn kill(&self) -> bool {
        Scripts::kill(self)
    }

    fn get(&self, sha: &[u8]) -> Option<Arc<[u8]>> {
        Scripts::get(self, sha)
    }

    /// Only a body new to this loop is stored: one it compiled before is in the cache
    /// already (a SCRIPT FLUSH makes every loop compile again), which spares each EVAL
    /// the cache's lock.
    fn remember(&mut self, sha: &str, body: &[u8], anew: bool) {
        if anew {
            self.insert(sha, body);
        }
    }

    fn flush(&mut self) {
        Scripts::flush(self);
    }
}

/// What a block did to the cache, in its order.
enum Change {
    Load(String, Arc<[u8]>),
    Flush,
}

/// An EXEC block's view of the server's cache: the server's, under the block's loads and
/// flushes, which [`BlockScripts::apply`] hands on once the block has run.
pub struct BlockScripts<'a> {
    server: &'a Scripts,
    /// A SCRIPT FLUSH in the block hides the server's bodies.
    flushed: bool,
    loaded: HashMap<String, Arc<[u8]>>,
    changes: Vec<Change>,
}

impl<'a> BlockScripts<'a> {
    pub fn new(server: &'a Scripts) -> BlockScripts<'a> {
        BlockScripts {
            server,
            flushed: false,
            loaded: HashMap::new(),
            changes: Vec::new(),
        }
    }

    /// The block ran: its loads and flushes, in order, to the server's cache.
    pub fn apply(self) {
        for change in self.changes {
            match change {
                Change::Load(sha, body) => self.server.insert(&sha, &body),
                Change::Flush => self.server.flush(),
            }
        }
    }
}

impl ScriptCache for BlockScripts<'_> {
    fn scripts(&self) -> &Scripts {
        self.server
    }

    fn get(&self, sha: &[u8]) -> Option<Arc<[u8]>> {
        let lowercase = std::str::from_utf8(sha).ok()?.to_ascii_lowercase();
        if let Some(body) = self.loaded.get(&lowercase) {
            return Some(body.clone());
        }
        if self.flushed {
            return None;
        }
        self.server.get(sha)
    }

    /// Every load is kept, compiled before on this loop or not: the server's cache may
    /// not hold it once the block flushed.
    fn remember(&mut self, sha: &str, body: &[u8], _anew: bool) {
        debug_assert_eq!(sha, sha1_hex(body));
        let body: Arc<[u8]> = body.into();
        self.loaded.insert(sha.to_string(), body.clone());
        self.changes.push(Change::Load(sha.to_string(), body));
    }

    fn flush(&mut self) {
        self.flushed = true;
        self.loaded.clear();
        self.changes.push(Change::Flush);
    }

    /// None: Redis runs a block only while no script runs, so a KILL in it finds none.
    /// Another event loop's script runs beside the block here, and is not the block's to
    /// kill.
    fn kill(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocks_loads_and_flushes_show_in_its_view_and_reach_the_server_only_when_applied() {
        let server = Scripts::default();
        let kept = server.load(b"return 1");
        let mut view = BlockScripts::new(&server);
        assert!(
            view.contains(kept.as_bytes()),
            "the server's bodies show through"
        );
        let new = sha1_hex(b"return 2");
        view.remember(&new, b"return 2", false);
        assert!(view.contains(new.to_uppercase().as_bytes()));
        assert!(
            !server.contains(new.as_bytes()),
            "not before the block has run"
        );
        view.flush();
        assert!(!view.contains(kept.as_bytes()) && !view.contains(new.as_bytes()));
        let last = sha1_hex(b"return 3");
        view.remember(&last, b"return 3", false);
        // An aborted block: dropped, nothing changes.
        drop(view);
        assert!(server.contains(kept.as_bytes()) && !server.contains(last.as_bytes()));

        let mut view = BlockScripts::new(&server);
        view.remember(&new, b"return 2", false);
        view.flush();
        view.remember(&last, b"return 3", false);
        view.apply();
        assert!(!server.contains(kept.as_bytes()), "flushed");
        assert!(!server.contains(new.as_bytes()), "loaded, then flushed");
        assert!(server.contains(last.as_bytes()), "loaded after the flush");
    }
}
