//! The pieces every RESP encoding is made of: a type byte with a number, a bulk, a line.

use crate::number::{write_signed, write_unsigned};

pub(crate) const CRLF: &[u8] = b"\r\n";

/// Appends `<kind><count>\r\n`, the header of an aggregate or a bulk.
pub(crate) fn write_header(out: &mut Vec<u8>, kind: u8, count: usize) {
    out.push(kind);
    write_unsigned(out, count as u64);
    out.extend_from_slice(CRLF);
}

/// Appends `:<value>\r\n`.
pub(crate) fn write_integer(out: &mut Vec<u8>, value: i64) {
    out.push(b':');
    write_signed(out, value);
    out.extend_from_slice(CRLF);
}

/// Appends `<kind><len>\r\n<payload>\r\n`, a bulk string (`$`) or verbatim string (`=`).
pub(crate) fn write_bulk(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    out.reserve(payload.len() + 16);
    write_header(out, kind, payload.len());
    out.extend_from_slice(payload);
    out.extend_from_slice(CRLF);
}

/// Appends `<kind><text>\r\n` with any CR or LF in `text` turned into a space: a line type
/// cannot carry them, and one left in would let the text forge further replies.
pub(crate) fn write_line(out: &mut Vec<u8>, kind: u8, text: &[u8]) {
    out.push(kind);
    if memchr::memchr2(b'\r', b'\n', text).is_none() {
        out.extend_from_slice(text);
    } else {
        out.extend(text.iter().map(|&byte| match byte {
            b'\r' | b'\n' => b' ',
            other => other,
        }));
    }
    out.extend_from_slice(CRLF);
}
