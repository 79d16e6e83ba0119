//! The server's request parser: RESP arrays of bulk strings, or inline commands.

use crate::error::ProtocolError;
use crate::inline::split_words;
use crate::line::{Line, LineScanner};
use crate::number::parse_integer;
use crate::{Limits, UNAUTHENTICATED_ARGS, UNAUTHENTICATED_BULK};

/// What a parse yields: a command's arguments and the bytes it took.
type Parsed = Option<(Vec<Vec<u8>>, usize)>;

/// Argument slots reserved up front; a larger count grows the vector only as arguments arrive,
/// so a claimed count costs nothing until its arguments are sent (Redis caps this at 1024 too).
const MAX_PRESIZED_ARGS: usize = 1024;

/// Incremental request parser (server side): requests are RESP arrays of bulk strings, or inline
/// commands (a line of space-separated words with Redis's quoting rules: "..." with \n \t \xHH
/// escapes, '...').
///
/// Between a call that returned `Ok(None)` and the next, the caller keeps the unconsumed bytes
/// and appends what it reads, so the next `buf` starts with the same bytes; the parser uses that
/// to resume where it stopped. Meanwhile it may drop the [`RequestParser::consumed`] front
/// bytes, the ones the command being assembled has already taken, and say so with
/// [`RequestParser::discard`], so that an argument is not held both in its input and as an
/// argument. After `Ok(Some((_, consumed)))` the caller drops `consumed` bytes from the front.
/// After an error the connection is unusable (reply with the error and close).
#[derive(Debug)]
pub struct RequestParser {
    limits: Limits,
    /// How far the open line (length line or inline command) has been searched.
    scanner: LineScanner,
    /// The multibulk command being assembled, if its count line has been read.
    command: Option<Multibulk>,
    /// Length of the previous call's buffer, to notice a caller that broke the contract above.
    seen: usize,
}

impl RequestParser {
    /// A parser that enforces `limits`.
    pub fn new(limits: Limits) -> Self {
        RequestParser {
            limits,
            scanner: LineScanner::default(),
            command: None,
            seen: 0,
        }
    }

    /// The bytes of the arguments read so far of a command whose arguments have not all
    /// arrived (Redis's `argv-mem` of such a client); 0 between commands.
    pub fn partial_arg_bytes(&self) -> usize {
        self.command.as_ref().map_or(0, |command| command.arg_bytes)
    }

    /// The memory those arguments hold: their bytes and the slot of each in the argument
    /// list, so that a command of many tiny arguments counts for more than its bytes.
    pub fn partial_arg_memory(&self) -> usize {
        self.command.as_ref().map_or(0, |command| {
            let slots = command.args.capacity() * std::mem::size_of::<Vec<u8>>();
            command.arg_bytes.saturating_add(slots)
        })
    }

    /// How many bytes at the front of the buffer the command being assembled has taken
    /// (its count line, and its arguments and length lines read so far): the caller may
    /// drop them before the next call (see [`RequestParser::discard`]). 0 between commands.
    pub fn consumed(&self) -> usize {
        self.command.as_ref().map_or(0, |command| command.pos)
    }

    /// The caller dropped the first `dropped` bytes of the buffer (at most
    /// [`RequestParser::consumed`]): the offsets kept to resume are moved back by as much,
    /// so that the next call, with the shorter buffer, resumes where this one stopped.
    pub fn discard(&mut self, dropped: usize) {
        if dropped == 0 {
            return;
        }
        match self.command.as_mut() {
            Some(command) if dropped <= command.pos => command.pos -= dropped,
            _ => {
                // Bytes not yet taken are gone: nothing kept can be trusted any more.
                self.reset();
                return;
            }
        }
        self.scanner.rebase(dropped);
        self.seen = self.seen.saturating_sub(dropped);
    }

    /// Parses one complete command from the front of `buf`. `Ok(None)`: more bytes are needed.
    /// `Ok(Some((args, consumed)))`: a command, taking the first `consumed` bytes; `args` is empty
    /// for an empty inline line or a `*0`/`*-1` array, which the caller skips.
    ///
    /// Memory grows only with bytes received: a bulk or argument count over the limits is
    /// refused as soon as its length line arrives, and one under them is not allocated before
    /// its bytes are there.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        if buf.len() < self.seen {
            // Not the buffer we were resuming: start over rather than index past its end.
            self.reset();
        }
        self.seen = buf.len();
        let result = self.step(buf);
        if !matches!(result, Ok(None)) {
            self.reset();
        }
        result
    }

    /// Whether the requests to come are from a client that has not authenticated (see
    /// [`Limits::unauthenticated`]); set between commands, as a login happens at one.
    pub fn set_unauthenticated(&mut self, unauthenticated: bool) {
        self.limits.unauthenticated = unauthenticated;
    }

    /// Forgets any partly parsed command, e.g. before parsing a buffer unrelated to the last.
    pub fn reset(&mut self) {
        self.scanner.reset();
        self.command = None;
        self.seen = 0;
    }

    fn step(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        if self.command.is_none() {
            match buf.first() {
                None => return Ok(None),
                Some(b'*') => match self.count_line(buf)? {
                    Count::Incomplete => return Ok(None),
                    Count::Empty(consumed) => return Ok(Some((Vec::new(), consumed))),
                    Count::Args(command) => self.command = Some(command),
                },
                Some(_) => return self.inline(buf),
            }
        }
        match &mut self.command {
            Some(command) => command.read_args(buf, &mut self.scanner, &self.limits),
            None => Ok(None),
        }
    }

    /// Reads `*<count>\r\n` at the start of `buf`.
    fn count_line(&mut self, buf: &[u8]) -> Result<Count, ProtocolError> {
        let end = match self.scanner.find(buf, 0, b'\r', self.limits.max_inline) {
            Line::Found(end) => end,
            Line::Incomplete => return Ok(Count::Incomplete),
            Line::TooLong => return Err(ProtocolError::TooBigMultibulkCount),
        };
        let Some(&after_cr) = buf.get(end + 1) else {
            return Ok(Count::Incomplete);
        };
        let count = buf
            .get(1..end)
            .and_then(parse_integer)
            .filter(|_| after_cr == b'\n')
            .ok_or(ProtocolError::InvalidMultibulkLength)?;
        // Redis takes any count <= 0 as an empty command.
        if count <= 0 {
            return Ok(Count::Empty(end + 2));
        }
        match usize::try_from(count) {
            Ok(count) if count > self.limits.max_multibulk => {
                Err(ProtocolError::InvalidMultibulkLength)
            }
            Ok(count) if self.limits.unauthenticated && count > UNAUTHENTICATED_ARGS => {
                Err(ProtocolError::UnauthenticatedMultibulkLength)
            }
            Ok(count) => Ok(Count::Args(Multibulk::new(count, end + 2))),
            Err(_) => Err(ProtocolError::InvalidMultibulkLength),
        }
    }

    /// Reads an inline command line at the start of `buf`.
    fn inline(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        let newline = match self.scanner.find(buf, 0, b'\n', self.limits.max_inline) {
            Line::Found(newline) => newline,
            Line::Incomplete => return Ok(None),
            Line::TooLong => return Err(ProtocolError::TooBigInlineRequest),
        };
        let line = buf.get(..newline).unwrap_or_default();
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let args = split_words(line).map_err(|_| ProtocolError::UnbalancedQuotes)?;
        Ok(Some((args, newline + 1)))
    }
}

/// What a `*<count>` line announced.
enum Count {
    /// The line has not fully arrived.
    Incomplete,
    /// A count <= 0: an empty command, `consumed` bytes long.
    Empty(usize),
    /// Arguments to read.
    Args(Multibulk),
}

/// A multibulk command whose count line has been read.
#[derive(Debug)]
struct Multibulk {
    /// Arguments still to read.
    remaining: usize,
    args: Vec<Vec<u8>>,
    /// The sum of `args`' lengths, kept as they are read: CLIENT LIST and the query limit
    /// ask for it at every pass, and a command may have millions of arguments.
    arg_bytes: usize,
    /// Length of the bulk whose length line has been read but whose payload has not all arrived.
    bulk: Option<usize>,
    /// Offset in the buffer of the next unread byte.
    pos: usize,
}

impl Multibulk {
    fn new(count: usize, pos: usize) -> Self {
        Multibulk {
            remaining: count,
            args: Vec::with_capacity(count.min(MAX_PRESIZED_ARGS)),
            arg_bytes: 0,
            bulk: None,
            pos,
        }
    }

    /// Reads arguments until the command is complete or the buffer runs out.
    fn read_args(
        &mut self,
        buf: &[u8],
        scanner: &mut LineScanner,
        limits: &Limits,
    ) -> Result<Parsed, ProtocolError> {
        while self.remaining > 0 {
            let len = match self.bulk {
                Some(len) => len,
                None => match self.length_line(buf, scanner, limits)? {
                    Some(len) => len,
                    None => return Ok(None),
                },
            };
            self.bulk = Some(len);
            if !self.payload(buf, len)? {
                return Ok(None);
            }
        }
        Ok(Some((std::mem::take(&mut self.args), self.pos)))
    }

    /// Reads `$<len>\r\n` at `pos`; `None` when it has not fully arrived.
    fn length_line(
        &mut self,
        buf: &[u8],
        scanner: &mut LineScanner,
        limits: &Limits,
    ) -> Result<Option<usize>, ProtocolError> {
        let end = match scanner.find(buf, self.pos, b'\r', limits.max_inline) {
            Line::Found(end) => end,
            Line::Incomplete => return Ok(None),
            Line::TooLong => return Err(ProtocolError::TooBigBulkCount),
        };
        let Some(&after_cr) = buf.get(end + 1) else {
            return Ok(None);
        };
        match buf.get(self.pos) {
            Some(b'$') => {}
            Some(&got) => return Err(ProtocolError::ExpectedDollar { got }),
            None => return Ok(None),
        }
        let len = buf
            .get(self.pos + 1..end)
            .and_then(parse_integer)
            .filter(|_| after_cr == b'\n')
            .and_then(|len| usize::try_from(len).ok())
            .filter(|len| *len <= limits.max_bulk)
            .ok_or(ProtocolError::InvalidBulkLength)?;
        if limits.unauthenticated && len > UNAUTHENTICATED_BULK {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        self.pos = end + 2;
        Ok(Some(len))
    }

    /// Takes the `len`-byte payload at `pos` and its CRLF once they have all arrived; `false`
    /// until then, without copying anything, so a large bulk is copied once.
    fn payload(&mut self, buf: &[u8], len: usize) -> Result<bool, ProtocolError> {
        let end = self
            .pos
            .checked_add(len)
            .ok_or(ProtocolError::InvalidBulkLength)?;
        let Some(framed) = buf.get(self.pos..end.saturating_add(2)) else {
            return Ok(false);
        };
        let (payload, terminator) = framed.split_at(len);
        if terminator != b"\r\n" {
            return Err(ProtocolError::UnterminatedBulk);
        }
        self.args.push(payload.to_vec());
        self.arg_bytes += len;
        self.pos = end + 2;
        self.bulk = None;
        self.remaining -= 1;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `stream` in pieces of `chunk` bytes as a connection would, returning the bytes the
    /// line scanner looked at.
    fn feed_in_chunks(stream: &[u8], chunk: usize) -> (Vec<Vec<u8>>, usize) {
        let mut parser = RequestParser::new(Limits::default());
        let mut received = 0;
        loop {
            received = (received + chunk).min(stream.len());
            if let Some((args, consumed)) = parser.parse(&stream[..received]).expect("valid") {
                assert_eq!(consumed, stream.len());
                return (args, parser.scanner.examined);
            }
            assert!(received < stream.len(), "stream ended without a command");
        }
    }

    /// Feeds `stream` in pieces of `chunk` bytes as the connection does, dropping the bytes the
    /// parser has taken after each incomplete parse; returns the arguments, the bytes the line
    /// scanner looked at and the most bytes the buffer held.
    fn feed_dropping_consumed(stream: &[u8], chunk: usize) -> (Vec<Vec<u8>>, usize, usize) {
        let mut parser = RequestParser::new(Limits::default());
        let mut buffer = Vec::new();
        let mut most_held = 0;
        for piece in stream.chunks(chunk) {
            buffer.extend_from_slice(piece);
            most_held = most_held.max(buffer.len());
            if let Some((args, consumed)) = parser.parse(&buffer).expect("valid") {
                assert_eq!(consumed, buffer.len());
                return (args, parser.scanner.examined, most_held);
            }
            let taken = parser.consumed();
            buffer.drain(..taken);
            parser.discard(taken);
        }
        panic!("stream ended without a command");
    }

    /// A command's arguments come out the same when the bytes the parser has taken are
    /// dropped between reads, however the reads split it, and the buffer then holds only
    /// what has not been taken: about one argument and one read, not the whole command.
    #[test]
    fn dropping_taken_bytes_between_reads_gives_the_same_arguments() {
        let args: Vec<Vec<u8>> = (0..40u8)
            .map(|n| vec![b'a' + n % 26; usize::from(n) * 37])
            .collect();
        let mut stream = Vec::new();
        crate::encode_command(&args, &mut stream);
        let longest = args.iter().map(Vec::len).max().unwrap_or(0);
        for chunk in [1, 2, 5, 13, 64, 1000] {
            let (got, _, most_held) = feed_dropping_consumed(&stream, chunk);
            assert_eq!(got, args, "in reads of {chunk} bytes");
            let bound = longest + chunk + 16;
            assert!(
                most_held <= bound,
                "in reads of {chunk} bytes the buffer held {most_held} of {} bytes",
                stream.len()
            );
        }
    }

    /// The arguments read of a command not all arrived count, and nothing once it is whole.
    #[test]
    fn partial_arg_bytes_counts_the_arguments_read_so_far() {
        let stream = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$3\r\nabc\r\n";
        let mut parser = RequestParser::new(Limits::default());
        assert_eq!(parser.partial_arg_bytes(), 0);
        let read_two = stream.len() - b"$3\r\nabc\r\n".len() + 4;
        assert_eq!(parser.parse(&stream[..read_two]).expect("valid"), None);
        assert_eq!(parser.partial_arg_bytes(), 8);
        assert!(parser.parse(stream).expect("valid").is_some());
        assert_eq!(parser.partial_arg_bytes(), 0);
    }

    #[test]
    fn huge_bulk_arriving_in_small_reads_is_not_rescanned() {
        let mut stream = b"*2\r\n$3\r\nSET\r\n$4194304\r\n".to_vec();
        let header = stream.len();
        stream.extend(std::iter::repeat_n(b'v', 4 << 20));
        stream.extend_from_slice(b"\r\n");
        let (args, examined) = feed_in_chunks(&stream, 16 * 1024);
        assert_eq!(args[1].len(), 4 << 20);
        // Only the length lines are ever searched, never the payload.
        assert!(examined <= header, "examined {examined} bytes");
        // Nor when the bytes taken (the header) are dropped between reads.
        let (args, examined, _) = feed_dropping_consumed(&stream, 16 * 1024);
        assert_eq!(args[1].len(), 4 << 20);
        assert!(examined <= header, "examined {examined} bytes, dropping");
    }

    #[test]
    fn long_line_arriving_byte_by_byte_is_scanned_once() {
        let mut stream = vec![b'x'; 60 * 1024];
        stream.extend_from_slice(b"\r\n");
        let (args, examined) = feed_in_chunks(&stream, 1);
        assert_eq!(args, [vec![b'x'; 60 * 1024]]);
        assert!(examined <= stream.len(), "examined {examined} bytes");
    }

    #[test]
    fn state_is_kept_while_a_bulk_is_awaited() {
        let mut parser = RequestParser::new(Limits::default());
        let stream = b"*1\r\n$5\r\nhel";
        assert_eq!(parser.parse(stream), Ok(None));
        let command = parser.command.as_ref().expect("command open");
        assert_eq!((command.bulk, command.pos), (Some(5), 8));
        assert_eq!(
            parser.parse(b"*1\r\n$5\r\nhello\r\n"),
            Ok(Some((vec![b"hello".to_vec()], 15)))
        );
        assert!(parser.command.is_none());
    }

    #[test]
    fn a_shorter_buffer_restarts_instead_of_panicking() {
        let mut parser = RequestParser::new(Limits::default());
        assert_eq!(parser.parse(b"*1\r\n$5\r\nhel"), Ok(None));
        assert_eq!(
            parser.parse(b"PING\r\n"),
            Ok(Some((vec![b"PING".to_vec()], 6)))
        );
    }
}
