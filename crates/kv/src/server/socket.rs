//! The sockets the event loops serve: TCP (plain or TLS, `server/tls.rs`) and Unix domain
//! sockets (`serve --unixsocket`, Redis's `unixsocket`), one type for listening and one for
//! connections, so that the loop and its connections do not care which.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

use mio::event::Source;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};

/// A connection's socket.
#[derive(Debug)]
pub enum Socket {
    Tcp(TcpStream),
    /// With the path of the socket it came through, which Redis shows as its address.
    Unix(UnixStream, PathBuf),
}

/// How long a TCP connection may stay silent before the kernel asks whether its peer is
/// still there (Redis's `tcp-keepalive` default).
pub const KEEPALIVE: Duration = Duration::from_secs(300);

impl Socket {
    /// Sets a new connection up as Redis does: replies leave at once (TCP_NODELAY), and a
    /// peer gone without closing (a machine that crashed, a network cut) is found by
    /// keepalive probes after [`KEEPALIVE`] of silence, three of them a third of that
    /// apart; its connection would otherwise hold a client's place for good. A Unix socket
    /// has neither to set. A failure leaves the connection as the kernel made it.
    pub fn set_up(&self) {
        if let Socket::Tcp(stream) = self {
            let _ = stream.set_nodelay(true);
            let _ = keep_alive(stream);
        }
    }

    /// The server's end, as CLIENT LIST's `laddr` shows it.
    pub fn local_name(&self) -> String {
        match self {
            Socket::Tcp(stream) => stream
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default(),
            Socket::Unix(_, path) => unix_name(path),
        }
    }

    /// Whether it is a Unix socket (CLIENT LIST's flag `U`).
    pub fn is_unix(&self) -> bool {
        matches!(self, Socket::Unix(..))
    }
}

fn keep_alive(stream: &TcpStream) -> io::Result<()> {
    use rustix::net::sockopt;
    sockopt::set_socket_keepalive(stream, true)?;
    sockopt::set_tcp_keepidle(stream, KEEPALIVE)?;
    sockopt::set_tcp_keepintvl(stream, KEEPALIVE / 3)?;
    sockopt::set_tcp_keepcnt(stream, 3)?;
    Ok(())
}

/// A Unix socket's address as Redis writes it: the path, then `:0`.
fn unix_name(path: &std::path::Path) -> String {
    format!("{}:0", path.display())
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(stream) => stream.read(buf),
            Socket::Unix(stream, _) => stream.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(stream) => stream.write(buf),
            Socket::Unix(stream, _) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Socket::Tcp(stream) => stream.flush(),
            Socket::Unix(stream, _) => stream.flush(),
        }
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Socket::Tcp(stream) => stream.as_raw_fd(),
            Socket::Unix(stream, _) => stream.as_raw_fd(),
        }
    }
}

impl Socket {
    /// The mio socket inside, for polling.
    fn source(&mut self) -> &mut dyn Source {
        match self {
            Socket::Tcp(stream) => stream,
            Socket::Unix(stream, _) => stream,
        }
    }
}

/// mio's `Source` for a kind of socket: each call passed to the mio socket inside (its
/// `source`).
macro_rules! polled_through_source {
    ($kind:ty) => {
        impl Source for $kind {
            fn register(
                &mut self,
                registry: &Registry,
                token: Token,
                interests: Interest,
            ) -> io::Result<()> {
                self.source().register(registry, token, interests)
            }

            fn reregister(
                &mut self,
                registry: &Registry,
                token: Token,
                interests: Interest,
            ) -> io::Result<()> {
                self.source().reregister(registry, token, interests)
            }

            fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
                self.source().deregister(registry)
            }
        }
    };
}

polled_through_source!(Socket);

/// A listening socket.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// The mio listener inside, for polling.
    fn source(&mut self) -> &mut dyn Source {
        match self {
            Listener::Tcp(listener) => listener,
            Listener::Unix(listener, _) => listener,
        }
    }

    /// A connection waiting, with its peer's address as CLIENT LIST shows it.
    pub fn accept(&self) -> io::Result<(Socket, String)> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, peer) = listener.accept()?;
                Ok((Socket::Tcp(stream), peer.to_string()))
            }
            Listener::Unix(listener, path) => {
                let (stream, _) = listener.accept()?;
                Ok((Socket::Unix(stream, path.clone()), unix_name(path)))
            }
        }
    }
}

polled_through_source!(Listener);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_connection_is_kept_alive_as_redis_keeps_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let _client =
            std::net::TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
        let (accepted, _) = listener.accept().expect("accept");
        let socket = Socket::Tcp(TcpStream::from_std(accepted));
        socket.set_up();
        let Socket::Tcp(stream) = &socket else {
            unreachable!("made as TCP above")
        };
        use rustix::net::sockopt;
        assert!(sockopt::socket_keepalive(stream).expect("SO_KEEPALIVE"));
        assert_eq!(
            sockopt::tcp_keepidle(stream).expect("TCP_KEEPIDLE"),
            KEEPALIVE
        );
        assert!(stream.nodelay().expect("TCP_NODELAY"));
    }
}
