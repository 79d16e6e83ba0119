//! Where a RESP server listens, as `bench kv --server` and `kv migrate --from/--to` take
//! it: `HOST:PORT`, or the path of a Unix domain socket (Redis's `unixsocket`, tailstore's
//! `serve --unixsocket`), told apart by a `/` (`./redis.sock` for one in the current
//! directory), which no host name or port has.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use tailstore_kv::server::Socket;

use crate::CliResult;

/// A server's address, resolved.
#[derive(Clone, Debug)]
pub enum ServerAddress {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// A blocking connection to a server, either kind.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream, PathBuf),
}

impl ServerAddress {
    /// `text` as an address: a path if it holds a `/`, else the first address `HOST:PORT`
    /// resolves to. `option` names where it was given, in the error.
    pub fn parse(text: &str, option: &str) -> CliResult<ServerAddress> {
        if names_a_path(text) {
            return Ok(ServerAddress::Unix(PathBuf::from(text)));
        }
        let mut resolved = text.to_socket_addrs().map_err(|e| {
            format!(
                "{option} '{text}' is not an address (HOST:PORT, e.g. 127.0.0.1:6379, or a Unix socket's path, e.g. /run/redis.sock): {e}"
            )
        })?;
        let first = resolved
            .next()
            .ok_or_else(|| format!("{option} '{text}' resolves to no address"))?;
        Ok(ServerAddress::Tcp(first))
    }

    /// A blocking connection, given up after `timeout` (TCP; a Unix socket's connect does
    /// not wait); requests leave at once (TCP_NODELAY).
    pub fn connect(&self, timeout: Duration) -> io::Result<Stream> {
        match self {
            ServerAddress::Tcp(address) => {
                let stream = TcpStream::connect_timeout(address, timeout)?;
                stream.set_nodelay(true)?;
                Ok(Stream::Tcp(stream))
            }
            ServerAddress::Unix(path) => Ok(Stream::Unix(UnixStream::connect(path)?, path.clone())),
        }
    }
}

/// Whether an address as given names a Unix socket's path.
pub fn names_a_path(text: &str) -> bool {
    text.contains('/')
}

impl std::fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerAddress::Tcp(address) => address.fmt(f),
            ServerAddress::Unix(path) => path.display().fmt(f),
        }
    }
}

impl Stream {
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.set_read_timeout(timeout),
            Stream::Unix(stream, _) => stream.set_read_timeout(timeout),
        }
    }

    /// The same connection, non-blocking, for a poller.
    pub fn into_polled(self) -> io::Result<Socket> {
        Ok(match self {
            Stream::Tcp(stream) => {
                stream.set_nonblocking(true)?;
                Socket::Tcp(mio::net::TcpStream::from_std(stream))
            }
            Stream::Unix(stream, path) => {
                stream.set_nonblocking(true)?;
                Socket::Unix(mio::net::UnixStream::from_std(stream), path)
            }
        })
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.read(buf),
            Stream::Unix(stream, _) => stream.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.write(buf),
            Stream::Unix(stream, _) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.flush(),
            Stream::Unix(stream, _) => stream.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slash_makes_a_path_and_anything_else_must_resolve() {
        let unix = |text| {
            matches!(
                ServerAddress::parse(text, "--server"),
                Ok(ServerAddress::Unix(_))
            )
        };
        assert!(unix("/run/redis.sock") && unix("./redis.sock"));
        assert!(matches!(
            ServerAddress::parse("127.0.0.1:6379", "--server"),
            Ok(ServerAddress::Tcp(_))
        ));
        let refusal = ServerAddress::parse("redis.sock", "--from")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            refusal.starts_with("--from 'redis.sock' is not an address"),
            "{refusal}"
        );
    }
}
