//! Protocol errors, worded as Redis words them.

/// A protocol error; `Display` gives Redis's exact error text without the leading '-' and CRLF,
/// e.g. "ERR Protocol error: invalid bulk length". After one, the server replies with it and
/// closes the connection: the stream can no longer be framed.
///
/// The first group is what a server meets in requests (texts from Redis 7's networking.c); the
/// second is what a client meets in replies, which Redis never has to word, so those texts only
/// follow Redis's style.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum ProtocolError {
    /// An aggregate count that is not a number, is too large, or (in a request) whose line is
    /// not terminated by CRLF.
    #[error("ERR Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// A bulk length that is not a number, is negative (other than a reply's `$-1`), exceeds
    /// `max_bulk`, or whose line is not terminated by CRLF.
    #[error("ERR Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// A bulk whose payload is not followed by CRLF. Redis skips those two bytes unchecked; a
    /// stream where they are not CRLF has a length that does not match its payload, so it is
    /// refused with the same text as a bad length.
    #[error("ERR Protocol error: invalid bulk length")]
    UnterminatedBulk,
    /// An unauthenticated request of more than `UNAUTHENTICATED_ARGS` arguments.
    #[error("ERR Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// An unauthenticated request's bulk longer than `UNAUTHENTICATED_BULK`.
    #[error("ERR Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    /// A request argument that does not start with '$'.
    #[error("ERR Protocol error: expected '$', got '{}'", printable(*.got))]
    ExpectedDollar {
        /// The byte found instead.
        got: u8,
    },
    /// An inline command longer than `max_inline` with no newline yet.
    #[error("ERR Protocol error: too big inline request")]
    TooBigInlineRequest,
    /// A request's `*<count>` line longer than `max_inline` with no CR yet.
    #[error("ERR Protocol error: too big mbulk count string")]
    TooBigMultibulkCount,
    /// A request's `$<length>` line longer than `max_inline` with no CR yet.
    #[error("ERR Protocol error: too big bulk count string")]
    TooBigBulkCount,
    /// An inline command with an unterminated quote, or a closing quote followed by a non-space.
    #[error("ERR Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// A reply starting with a byte that is no RESP2/RESP3 type (streamed types included).
    #[error("ERR Protocol error: got '{}' as reply type byte", printable(*.got))]
    UnknownReplyType {
        /// The byte found.
        got: u8,
    },
    /// A reply line (simple string, error, number) longer than `max_inline`.
    #[error("ERR Protocol error: too big reply line")]
    TooBigReplyLine,
    /// A reply line whose CR is not followed by LF.
    #[error("ERR Protocol error: reply line not terminated by CRLF")]
    BadLineTerminator,
    /// A reply with aggregates nested more than 128 deep (Redis's deepest, COMMAND DOCS, nests
    /// a handful).
    #[error("ERR Protocol error: reply nested too deeply")]
    TooDeeplyNested,
    /// A `:` reply that is not a 64-bit integer.
    #[error("ERR Protocol error: invalid integer reply")]
    InvalidInteger,
    /// A `,` reply that is not a double.
    #[error("ERR Protocol error: invalid double reply")]
    InvalidDouble,
    /// A `#` reply other than `#t` or `#f`.
    #[error("ERR Protocol error: invalid boolean reply")]
    InvalidBoolean,
    /// A `_` reply with something on its line.
    #[error("ERR Protocol error: invalid null reply")]
    InvalidNull,
    /// A `(` reply that is not a decimal integer.
    #[error("ERR Protocol error: invalid big number reply")]
    InvalidBigNumber,
    /// A `=` reply without its three-byte format and ':'.
    #[error("ERR Protocol error: invalid verbatim string reply")]
    InvalidVerbatim,
}

/// The byte as Redis shows it in an error: an error line must not contain CR or LF, so Redis
/// turns them into spaces before replying. (A byte above 0x7f, which Redis sends raw, becomes the
/// Latin-1 character of that value, since the text is a `String`.)
fn printable(byte: u8) -> char {
    match byte {
        b'\r' | b'\n' => ' ',
        other => char::from(other),
    }
}
