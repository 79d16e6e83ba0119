//! A blocking connection to a RESP server that can pipeline: commands are written together,
//! their replies read back in order (RESP answers in the order it was asked).

use std::io::{Read, Write};
use std::time::Duration;

use tailstore_kv::server::Secret;
use tailstore_resp::{encode_command, parse_reply, Limits, Value};

use super::address::{ServerAddress, Stream};
use super::tls::{Secure, TlsClient};
use crate::CliResult;

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

    /// Writes `commands` in one go, without waiting for their replies.
    pub fn send<A: AsRef<[u8]>>(&mut self, commands: &[Vec<A>]) -> CliResult<()> {
        let mut out = Vec::new();
        for args in commands {
            encode_command(args, &mut out);
        }
        self.stream.write_all(&out)?;
        Ok(())
    }

    /// The next reply.
    pub fn receive(&mut self) -> CliResult<Value> {
        let mut chunk = [0u8; 64 << 10];
        loop {
            if let Some((value, used)) = parse_reply(&self.input, &self.limits)
                .map_err(|e| unparsed(&self.input, e, self.tls_option))?
            {
                self.input.drain(..used);
                return Ok(value);
            }
            let n = self.stream.read(&mut chunk).map_err(|e| match e.kind() {
                // The socket's read timeout (set by whoever connected it) ran out.
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    format!("the server did not answer in time ({e}): is it a RESP server?")
                }
                _ => e.to_string(),
            })?;
            if n == 0 {
                return Err("the server closed the connection".into());
            }
            self.input.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends one command and returns its reply.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> CliResult<Value> {
        let mut out = Vec::new();
        encode_command(args, &mut out);
        self.stream.write_all(&out)?;
        self.receive()
    }
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
