//! A blocking connection to a RESP server that can pipeline: commands are written together,
//! their replies read back in order (RESP answers in the order it was asked).
//!
//! Writes are bounded in time as reads are (`Link::connect` sets both timeouts): a client
//! that writes while the server has stopped reading (tailstore stops reading a connection
//! whose unsent replies pass 64 MiB) gets an error instead of waiting forever.

use std::io::{Read, Write};
use std::time::Duration;

use tailstore_kv::server::Secret;
use tailstore_resp::{encode_command, parse_reply, Limits, Value};

use super::address::{ServerAddress, Stream};
use super::tls::{Secure, TlsClient};
use crate::CliResult;

/// Arguments at least this long are written from the caller's buffer rather than copied into
/// the one that gathers a request's small pieces: a RESTORE's payload of many MB is not
/// copied once more on its way out.
const DIRECT_ARG: usize = 64 << 10;
/// Gathered small pieces are written once they pass this many bytes.
const GATHERED: usize = 1 << 20;
/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 64 << 10;

/// What [`Link::receive_or_skip`] got.
#[derive(Debug, PartialEq)]
pub enum Received {
    /// A reply.
    Reply(Value),
    /// A bulk reply longer than the parser takes (Redis's 512 MiB `proto-max-bulk-len`): its
    /// length; its bytes were read and dropped, so the next reply reads as usual.
    Oversized(u64),
}

/// Over a TCP stream or a Unix socket, or any other (a TLS session's, `StreamOwned`).
pub struct Link<S = Wire> {
    stream: S,
    /// Bytes read and not yet parsed into replies.
    input: Vec<u8>,
    limits: Limits,
    /// The option that makes this side speak TLS, named when the server answers in TLS.
    tls_option: &'static str,
}

/// A connection's bytes: plain (TCP or a Unix socket), or through a TLS session.
pub enum Wire {
    Plain(Stream),
    Tls(Box<Secure>),
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Wire::Plain(stream) => stream.read(buf),
            Wire::Tls(secure) => secure.read(buf),
        }
    }
}

impl Write for Wire {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Wire::Plain(stream) => stream.write(buf),
            Wire::Tls(secure) => secure.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Wire::Plain(stream) => stream.flush(),
            Wire::Tls(secure) => secure.flush(),
        }
    }
}

impl Link {
    /// Connects to `address`, which the user gave as `name`, through a TLS session if
    /// `tls` is given, whose option `tls_option` names; a reply that takes longer than
    /// `patience` is an error.
    pub fn connect(
        address: &ServerAddress,
        name: &str,
        patience: Duration,
        tls: Option<&TlsClient>,
        tls_option: &'static str,
    ) -> CliResult<Link> {
        let stream = address
            .connect(Duration::from_secs(5))
            .map_err(|e| format!("cannot connect to {name}: {e}"))?;
        stream.set_read_timeout(Some(patience))?;
        // A server that stops reading (its replies unread) must not hold a write forever.
        match &stream {
            Stream::Tcp(tcp) => tcp.set_write_timeout(Some(patience))?,
            Stream::Unix(unix, _) => unix.set_write_timeout(Some(patience))?,
        }
        let wire = match (tls, stream) {
            (Some(tls), Stream::Tcp(stream)) => Wire::Tls(Box::new(
                tls.secure(stream).map_err(|e| format!("{name}: {e}"))?,
            )),
            // `TlsClient::new` refused TLS over a Unix socket.
            (_, stream) => Wire::Plain(stream),
        };
        Ok(Link {
            tls_option,
            ..Link::new(wire)
        })
    }
}

impl<S: Read + Write> Link<S> {
    pub fn new(stream: S) -> Link<S> {
        Link {
            stream,
            input: Vec::new(),
            limits: Limits::default(),
            tls_option: "--tls",
        }
    }

    /// Makes the connection ready for commands: AUTH with `password` if one is given (as
    /// ACL user `user` if one is given too), then a PING. `server` names the server and
    /// `flag` the option that gives its password, in the error when the server refuses the
    /// password or asks for one.
    pub fn authenticate(
        &mut self,
        server: &str,
        user: Option<&str>,
        password: Option<&Secret>,
        flag: &str,
    ) -> CliResult<()> {
        if let Some(password) = password {
            let mut auth = vec![&b"AUTH"[..]];
            auth.extend(user.map(str::as_bytes));
            auth.push(&password.0);
            if let Value::Error(refusal) = self.call(&auth)? {
                let refusal = String::from_utf8_lossy(&refusal);
                return Err(format!("{server} refused the password ({flag}): {refusal}").into());
            }
        }
        match self.call(&["PING"])? {
            Value::Error(refusal) if refusal.starts_with(b"NOAUTH") => {
                Err(format!("{server} asks for a password: give it with {flag}").into())
            }
            Value::Error(refusal) => Err(format!(
                "{server} answered PING with {}",
                String::from_utf8_lossy(&refusal)
            )
            .into()),
            _ => Ok(()),
        }
    }

    /// The connection, for a caller that goes on without a `Link`: every reply asked for
    /// was received, so bytes left unread are a reply nobody asked for, and the replies
    /// that follow would answer the wrong requests.
    pub fn into_stream(self) -> CliResult<S> {
        if !self.input.is_empty() {
            return Err(format!(
                "the server sent {} bytes more than the replies asked for: {:?}",
                self.input.len(),
                String::from_utf8_lossy(&self.input[..self.input.len().min(64)])
            )
            .into());
        }
        Ok(self.stream)
    }

    /// Writes `commands`, without waiting for their replies. Small arguments are gathered
    /// into writes of up to about [`GATHERED`] bytes; large ones are written from `commands`
    /// itself (no copy of all of them is built).
    pub fn send<A: AsRef<[u8]>>(&mut self, commands: &[Vec<A>]) -> CliResult<()> {
        let mut out = Vec::new();
        for args in commands {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for arg in args {
                let arg = arg.as_ref();
                out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                if arg.len() >= DIRECT_ARG {
                    self.write(&out)?;
                    out.clear();
                    self.write(arg)?;
                } else {
                    out.extend_from_slice(arg);
                }
                out.extend_from_slice(b"\r\n");
            }
            if out.len() >= GATHERED {
                self.write(&out)?;
                out.clear();
            }
        }
        self.write(&out)?;
        self.stream.flush().map_err(write_failed)?;
        Ok(())
    }

    /// Writes all of `bytes`; a server that takes none of them for the write timeout is an
    /// error that says so.
    fn write(&mut self, bytes: &[u8]) -> CliResult<()> {
        self.stream.write_all(bytes).map_err(write_failed)?;
        Ok(())
    }

    /// The next reply.
    pub fn receive(&mut self) -> CliResult<Value> {
        loop {
            if let Some((value, used)) = parse_reply(&self.input, &self.limits)
                .map_err(|e| unparsed(&self.input, e, self.tls_option))?
            {
                self.input.drain(..used);
                return Ok(value);
            }
            self.fill()?;
        }
    }

    /// The next reply, as [`Link::receive`] gives it, except a bulk reply longer than the
    /// parser takes: its bytes are read and dropped, and its length is returned, so that the
    /// replies after it can still be read (a DUMP of a key too large to copy).
    pub fn receive_or_skip(&mut self) -> CliResult<Received> {
        loop {
            match parse_reply(&self.input, &self.limits) {
                Ok(Some((value, used))) => {
                    self.input.drain(..used);
                    return Ok(Received::Reply(value));
                }
                Ok(None) => self.fill()?,
                Err(error) => {
                    let Some((header, length)) = oversized_bulk(&self.input, &self.limits) else {
                        return Err(unparsed(&self.input, error, self.tls_option).into());
                    };
                    self.input.drain(..header);
                    // The payload and its CRLF.
                    self.skip(length.saturating_add(2))?;
                    return Ok(Received::Oversized(length));
                }
            }
        }
    }

    /// Drops the next `count` bytes of the stream, those already read first.
    fn skip(&mut self, mut count: u64) -> CliResult<()> {
        let buffered = usize::try_from(count)
            .unwrap_or(usize::MAX)
            .min(self.input.len());
        self.input.drain(..buffered);
        count -= buffered as u64;
        let mut chunk = vec![0u8; READ_CHUNK];
        while count > 0 {
            let n = self.read(&mut chunk)?;
            let dropped = usize::try_from(count).unwrap_or(usize::MAX).min(n);
            // What follows the skipped bytes is the next reply's beginning.
            self.input.extend_from_slice(&chunk[dropped..n]);
            count -= dropped as u64;
        }
        Ok(())
    }

    /// Reads what the server sent next into `input`.
    fn fill(&mut self) -> CliResult<()> {
        let mut chunk = [0u8; READ_CHUNK];
        let n = self.read(&mut chunk)?;
        self.input.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// One read of at least a byte; an error if the server closed the connection or sent
    /// nothing for the read timeout.
    fn read(&mut self, chunk: &mut [u8]) -> CliResult<usize> {
        let n = self.stream.read(chunk).map_err(|e| match e.kind() {
            // The socket's read timeout (set by whoever connected it) ran out.
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                format!("the server did not answer in time ({e}): is it a RESP server?")
            }
            _ => e.to_string(),
        })?;
        if n == 0 {
            return Err("the server closed the connection".into());
        }
        Ok(n)
    }

    /// Sends one command and returns its reply.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> CliResult<Value> {
        let mut out = Vec::new();
        encode_command(args, &mut out);
        self.write(&out)?;
        self.receive()
    }
}

/// A write error, worded: the write timeout (set by whoever connected the socket) means the
/// server stopped reading.
fn write_failed(e: std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("the server took no more of the requests in time ({e}): it stopped reading")
        }
        _ => e.to_string(),
    }
}

/// The header's length and the bulk's length, if `input` begins with a bulk reply's header
/// (`$<length>\r\n`) whose length is over `limits.max_bulk`.
fn oversized_bulk(input: &[u8], limits: &Limits) -> Option<(usize, u64)> {
    let rest = input.strip_prefix(b"$")?;
    let end = rest.windows(2).position(|pair| pair == b"\r\n")?;
    let length: u64 = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    (length > limits.max_bulk as u64).then_some((end + 3, length))
}

/// Why a reply does not parse, naming TLS when the server answered with a TLS record (an
/// alert, 0x15, or a handshake, 0x16): a plaintext client of a TLS-only server, whose
/// option to speak TLS is `tls_option`.
fn unparsed(input: &[u8], error: impl std::fmt::Display, tls_option: &str) -> String {
    match input.first() {
        Some(0x15 | 0x16) => {
            format!("the server answered with TLS records: it speaks TLS (give {tls_option})")
        }
        _ => format!("the server's reply does not parse: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server whose replies are `replies`, given out a few bytes per read (as a socket may
    /// give them); what is written to it is kept.
    struct Canned {
        replies: Vec<u8>,
        written: Vec<u8>,
    }

    impl Read for Canned {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.replies.len()).min(3);
            buf[..n].copy_from_slice(&self.replies[..n]);
            self.replies.drain(..n);
            Ok(n)
        }
    }

    impl Write for Canned {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.written.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn canned(replies: &[u8]) -> Link<Canned> {
        Link::new(Canned {
            replies: replies.to_vec(),
            written: Vec::new(),
        })
    }

    #[test]
    fn a_bulk_over_the_limit_is_skipped_and_the_next_reply_reads() {
        let mut link = canned(b"$10\r\n0123456789\r\n:7\r\n$2\r\nok\r\n");
        link.limits.max_bulk = 4;
        assert_eq!(link.receive_or_skip().unwrap(), Received::Oversized(10));
        assert_eq!(
            link.receive_or_skip().unwrap(),
            Received::Reply(Value::Int(7))
        );
        let err = canned(b"$10\r\n0123456789\r\n").receive().map(|_| ());
        assert!(err.is_ok(), "the default limit takes it: {err:?}");
        let mut link = canned(b"$10\r\n0123");
        link.limits.max_bulk = 4;
        let err = link.receive_or_skip().unwrap_err().to_string();
        assert_eq!(err, "the server closed the connection");
    }

    #[test]
    fn sends_what_encode_command_encodes_with_large_arguments_written_apart() {
        let large = vec![b'x'; DIRECT_ARG + 1];
        let commands = vec![
            vec![&b"RESTORE"[..], b"k", b"0", &large],
            vec![&b"PING"[..]],
        ];
        let mut link = canned(b"");
        link.send(&commands).unwrap();
        let mut expected = Vec::new();
        for command in &commands {
            encode_command(command, &mut expected);
        }
        assert!(link.stream.written == expected);
    }
}
