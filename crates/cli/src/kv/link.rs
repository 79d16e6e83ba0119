//! A blocking connection to a RESP server that can pipeline: commands are written together,
//! their replies read back in order (RESP answers in the order it was asked).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use tailstore_resp::{encode_command, parse_reply, Limits, Value};

use crate::CliResult;

pub struct Link {
    stream: TcpStream,
    /// Bytes read and not yet parsed into replies.
    input: Vec<u8>,
    limits: Limits,
}

impl Link {
    pub fn new(stream: TcpStream) -> Link {
        Link {
            stream,
            input: Vec::new(),
            limits: Limits::default(),
        }
    }

    /// Connects to `address` (`host:port`); a reply that takes longer than `patience`
    /// is an error.
    pub fn connect(address: &str, patience: Duration) -> CliResult<Link> {
        let resolved = address
            .to_socket_addrs()
            .map_err(|e| format!("{address}: {e}"))?
            .next()
            .ok_or_else(|| format!("{address}: no address"))?;
        let stream = TcpStream::connect_timeout(&resolved, Duration::from_secs(5))
            .map_err(|e| format!("cannot connect to {address}: {e}"))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(patience))?;
        Ok(Link::new(stream))
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
                .map_err(|e| format!("the server's reply does not parse: {e}"))?
            {
                self.input.drain(..used);
                return Ok(value);
            }
            let n = self.stream.read(&mut chunk)?;
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
