//! Commands as a client sends them.

use crate::frame::{write_bulk, write_header};

/// Appends a command as a RESP array of bulk strings, the form every Redis client sends.
pub fn encode_command<A: AsRef<[u8]>>(args: &[A], out: &mut Vec<u8>) {
    let payload: usize = args.iter().map(|arg| arg.as_ref().len() + 16).sum();
    out.reserve(payload + 16);
    write_header(out, b'*', args.len());
    for arg in args {
        write_bulk(out, b'$', arg.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_an_array_of_bulks() {
        let mut out = Vec::new();
        encode_command(&["SET", "key", ""], &mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n");
        encode_command::<&[u8]>(&[], &mut out);
        assert!(out.ends_with(b"\r\n*0\r\n"));
    }
}
