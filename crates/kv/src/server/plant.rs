//! Bugs a test plants in one server, to see that its checks catch them.
//!
//! Each is a known way to break a guarantee the server's tests check (durability before the
//! reply, WATCH, the order of messages and replies). A test that exists to catch one starts
//! a server with it planted (`ServerConfig::plants`, or `tailstore serve` with
//! [`PLANT_VAR`]) and must fail. A switch per server rather than a cargo feature, so that
//! those tests run in the ordinary test build, beside servers without plants in the same
//! process, without compiling the server again.
//!
//! Only builds with debug assertions (the test and dev profiles) act on them: every site
//! asks [`super::ServerConfig::planted`] (or the keyspace's flag, set from it), which is
//! `false` without debug assertions, so release builds carry no trace of the bugs, and
//! `tailstore serve` reads [`PLANT_VAR`] only with debug assertions.

use std::fmt;
use std::str::FromStr;

/// The environment variable `tailstore serve` reads its plants from, in builds with debug
/// assertions: their names, separated by commas.
pub const PLANT_VAR: &str = "TAILSTORE_PLANT";

/// A bug a test plants in one server to see its checks catch it; only builds with debug
/// assertions act on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plant {
    /// The event loop replies without waiting for the pass's commits to be durable (the
    /// SIGKILL test of `tailstore serve` and the concurrent power cuts must catch it).
    EarlyReply,
    /// A write that left its key's row alone releases its WATCH gate before its changes are
    /// applied, with time for a WATCH to begin and read in between
    /// (`exec_sees_the_watched_key_as_read_after_watch` must catch it).
    EarlyGateRelease,
    /// An event loop takes the messages for its connections before it reads them, and
    /// pauses in between (the tests of invalidations and of published messages ahead of a
    /// later command's reply must catch it).
    MessagesBeforeReads,
}

impl Plant {
    /// Every plant (their names are the ones [`PlantError`] lists).
    pub const ALL: [Plant; 3] = [
        Plant::EarlyReply,
        Plant::EarlyGateRelease,
        Plant::MessagesBeforeReads,
    ];

    /// The name [`PLANT_VAR`] gives it by.
    pub fn name(self) -> &'static str {
        match self {
            Plant::EarlyReply => "early-reply",
            Plant::EarlyGateRelease => "early-gate-release",
            Plant::MessagesBeforeReads => "messages-before-reads",
        }
    }

    /// The plants a comma-separated list names (as [`PLANT_VAR`] holds them); blanks
    /// around a name and empty entries are passed over.
    pub fn parse_list(list: &str) -> Result<Vec<Plant>, PlantError> {
        list.split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(Plant::from_str)
            .collect()
    }
}

impl fmt::Display for Plant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no plant's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no planted bug is called {0:?} (there are early-reply, early-gate-release and \
     messages-before-reads)"
)]
pub struct PlantError(pub String);

impl FromStr for Plant {
    type Err = PlantError;

    fn from_str(name: &str) -> Result<Plant, PlantError> {
        Plant::ALL
            .into_iter()
            .find(|plant| plant.name() == name)
            .ok_or_else(|| PlantError(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plant_reads_back_from_its_name() {
        for plant in Plant::ALL {
            assert_eq!(plant.name().parse::<Plant>(), Ok(plant));
        }
    }

    #[test]
    fn a_list_reads_its_names_and_refuses_an_unknown_one() {
        assert_eq!(
            Plant::parse_list(" early-reply,,messages-before-reads "),
            Ok(vec![Plant::EarlyReply, Plant::MessagesBeforeReads])
        );
        assert_eq!(Plant::parse_list(""), Ok(Vec::new()));
        let err = Plant::parse_list("early-reply,late-reply").unwrap_err();
        assert_eq!(err, PlantError("late-reply".to_string()));
        assert!(err.to_string().contains("early-gate-release"), "{err}");
    }
}
