//! RESP2/RESP3, the Redis serialization protocol, for tailstore's Redis-compatible server and
//! its load generator.
//!
//! ```text
//! server side                               client side
//! RequestParser   bytes -> command args     encode_command   args -> bytes
//!   ├ multibulk   *2\r\n$4\r\nECHO\r\n...   parse_reply      bytes -> Value (every RESP2/RESP3 type)
//!   └ inline      ECHO "hi\x21" 'x'\r\n
//! Reply::encode   Reply -> bytes, per connection Protocol (HELLO 2 / HELLO 3)
//! format_double   Redis's text for a double (ZSCORE, RESP2 doubles)
//! ```
//!
//! # Limits
//! A server reads from clients it does not trust, so every length a peer claims is checked
//! against [`Limits`] before anything is done with it: a bulk longer than `max_bulk`, a command
//! with more than `max_multibulk` arguments, a length line or inline command longer than
//! `max_inline` are refused with Redis's own error text ([`ProtocolError`]'s `Display`), after
//! which the server replies with that text and closes the connection, as Redis does. A claimed
//! length under the limit is never allocated up front: memory grows only with bytes that have
//! actually arrived, so a client announcing a 500 MiB bulk and sending nothing costs nothing.
//!
//! # Why the request parser keeps state
//! A request may arrive in many reads. [`RequestParser`] remembers how far it got in the command
//! being assembled (arguments already read, the length of the bulk being awaited, how much of a
//! line has been searched for its terminator), so each call only looks at new bytes: a 512 MiB
//! bulk arriving in 16 KiB reads costs a constant amount of work per read instead of a rescan of
//! everything received so far. Redis keeps the same state on its client structure.
//! [`parse_reply`] is stateless: replies are parsed by the load generator, where simplicity
//! beats the rare rescan of a large, partially received aggregate.

#![forbid(unsafe_code)]

mod command;
mod double;
mod error;
mod frame;
mod inline;
mod line;
mod number;
mod reply;
mod request;
mod value;

pub use command::encode_command;
pub use double::{format_double, format_human, format_human_exact};
pub use error::ProtocolError;
pub use inline::{split_words, UnbalancedQuotes};
pub use reply::Reply;
pub use request::RequestParser;
pub use value::{parse_reply, Value};

/// Which protocol a connection speaks (HELLO 2 / HELLO 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2, what every connection speaks until it says HELLO 3.
    #[default]
    Resp2,
    /// RESP3: maps, sets, doubles, booleans and a null of its own.
    Resp3,
}

/// Limits that keep one client from exhausting memory.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longest bulk string accepted (Redis's `proto-max-bulk-len`, 512 MiB by default).
    pub max_bulk: usize,
    /// Most elements in one command or aggregate reply (Redis 7 refuses counts over `INT_MAX`).
    pub max_multibulk: usize,
    /// Longest inline command or length line (Redis's `PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub max_inline: usize,
    /// A request from a client that has not yet given the password a server asks for: at
    /// most [`UNAUTHENTICATED_ARGS`] arguments of at most [`UNAUTHENTICATED_BULK`] bytes, as
    /// Redis allows one, so that a stranger cannot make the server hold large requests.
    pub unauthenticated: bool,
}

/// Most arguments of an unauthenticated request (Redis's, since CVE-2021-32675).
pub const UNAUTHENTICATED_ARGS: usize = 10;
/// Longest bulk of an unauthenticated request.
pub const UNAUTHENTICATED_BULK: usize = 16 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk: 512 * 1024 * 1024,
            max_multibulk: i32::MAX as usize,
            max_inline: 64 * 1024,
            unauthenticated: false,
        }
    }
}
