//! Replies as command code builds them, encoded for the connection's protocol.

use crate::double::{format_double, format_human_exact};
use crate::frame::{write_bulk, write_header, write_integer, write_line, CRLF};
use crate::Protocol;

/// A reply, built by command code and encoded for the connection's protocol.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`: a simple string; CR and LF are sent as spaces.
    Status(String),
    /// `-ERR ...`: the text without '-'; CR and LF are sent as spaces.
    Error(String),
    /// `:1`
    Int(i64),
    /// `$3\r\nfoo`
    Bulk(Vec<u8>),
    /// The missing value: RESP2 `$-1`, RESP3 `_`.
    Null,
    /// The missing array: RESP2 `*-1`, RESP3 `_`.
    NullArray,
    /// `*n`
    Array(Vec<Reply>),
    /// RESP2: a flat array of 2n; RESP3: `%n`.
    Map(Vec<(Reply, Reply)>),
    /// RESP2: a flat array of 2n; RESP3: an array of n two-element arrays. Redis's shape for
    /// members with their scores (ZRANGE … WITHSCORES, ZPOPMIN with a count): ordered, and
    /// a member may repeat across calls, so not a map.
    Pairs(Vec<(Reply, Reply)>),
    /// RESP2: an array of two-element arrays; RESP3: `%n`. XREAD's streams and their
    /// entries: a map in RESP3, but each pair kept together in RESP2.
    Keyed(Vec<(Reply, Reply)>),
    /// RESP2: an array; RESP3: `~n`.
    Set(Vec<Reply>),
    /// Out-of-band data (pub/sub messages and their confirmations): RESP2: an array;
    /// RESP3: `>n`.
    Push(Vec<Reply>),
    /// RESP2: a bulk string as [`format_double`] writes it; RESP3: `,1.5`, `,inf`, `,-inf`, `,nan`.
    Double(f64),
    /// RESP2: a bulk string as [`format_human_exact`] writes it; RESP3: `,` and the same text.
    /// Redis's `addReplyHumanLongDouble` (GEOPOS's coordinates): 17 decimals where
    /// [`Reply::Double`] has the shortest digits.
    HumanDouble(f64),
    /// RESP2: `:1`/`:0`; RESP3: `#t`/`#f`.
    Bool(bool),
    /// RESP2: a bulk of `text`; RESP3: `=len\r\nfmt:text`.
    Verbatim {
        /// The format, e.g. `txt` or `mkd`.
        format: [u8; 3],
        /// The text itself.
        text: Vec<u8>,
    },
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Status("OK".to_owned())
    }

    /// An error reply with `msg` as its whole text, e.g. "WRONGTYPE Operation against ...".
    pub fn error(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }

    /// Appends the header of an array of `len` replies (the same in both protocols), for a
    /// reply whose elements are encoded one by one: EXEC's, whose commands may change the
    /// protocol (HELLO) or the connection's replies (CLIENT REPLY) for the elements after them.
    pub fn encode_array_header(len: usize, out: &mut Vec<u8>) {
        write_header(out, b'*', len);
    }

    /// Appends this reply as `protocol` encodes it.
    pub fn encode(&self, protocol: Protocol, out: &mut Vec<u8>) {
        let resp3 = protocol == Protocol::Resp3;
        match self {
            Reply::Status(text) => write_line(out, b'+', text.as_bytes()),
            Reply::Error(text) => write_line(out, b'-', text.as_bytes()),
            Reply::Int(value) => write_integer(out, *value),
            Reply::Bulk(bytes) => write_bulk(out, b'$', bytes),
            Reply::Null if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Null => out.extend_from_slice(b"$-1\r\n"),
            Reply::NullArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::NullArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => encode_items(out, b'*', items, protocol),
            Reply::Set(items) => {
                encode_items(out, if resp3 { b'~' } else { b'*' }, items, protocol)
            }
            Reply::Push(items) => {
                encode_items(out, if resp3 { b'>' } else { b'*' }, items, protocol)
            }
            Reply::Map(pairs) => encode_map(out, pairs, protocol),
            Reply::Keyed(pairs) if resp3 => encode_map(out, pairs, protocol),
            Reply::Keyed(pairs) => encode_pairs(out, pairs, Protocol::Resp3, protocol),
            Reply::Pairs(pairs) => encode_pairs(out, pairs, protocol, protocol),
            Reply::Double(value) => encode_double(out, &format_double(*value), protocol),
            Reply::HumanDouble(value) => encode_double(out, &format_human_exact(*value), protocol),
            Reply::Bool(value) if resp3 => {
                out.extend_from_slice(if *value { b"#t\r\n" } else { b"#f\r\n" })
            }
            Reply::Bool(value) => write_integer(out, i64::from(*value)),
            Reply::Verbatim { format, text } => encode_verbatim(out, format, text, protocol),
        }
    }
}

fn encode_items(out: &mut Vec<u8>, kind: u8, items: &[Reply], protocol: Protocol) {
    write_header(out, kind, items.len());
    for item in items {
        item.encode(protocol, out);
    }
}

fn encode_map(out: &mut Vec<u8>, pairs: &[(Reply, Reply)], protocol: Protocol) {
    match protocol {
        Protocol::Resp3 => write_header(out, b'%', pairs.len()),
        // RESP2 has no map: key, value, key, value... in one array, as Redis sends HGETALL.
        Protocol::Resp2 => write_header(out, b'*', pairs.len() * 2),
    }
    for (key, value) in pairs {
        key.encode(protocol, out);
        value.encode(protocol, out);
    }
}

/// Pairs in one array: nested (an array of two-element arrays) in `shape` RESP3, flat in
/// RESP2; their elements encoded in `protocol`.
fn encode_pairs(out: &mut Vec<u8>, pairs: &[(Reply, Reply)], shape: Protocol, protocol: Protocol) {
    let nested = shape == Protocol::Resp3;
    let count = if nested { pairs.len() } else { pairs.len() * 2 };
    write_header(out, b'*', count);
    for (first, second) in pairs {
        if nested {
            write_header(out, b'*', 2);
        }
        first.encode(protocol, out);
        second.encode(protocol, out);
    }
}

/// A double already written as text: a bulk string in RESP2, `,text` in RESP3.
fn encode_double(out: &mut Vec<u8>, text: &str, protocol: Protocol) {
    match protocol {
        Protocol::Resp3 => {
            out.push(b',');
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(CRLF);
        }
        Protocol::Resp2 => write_bulk(out, b'$', text.as_bytes()),
    }
}

fn encode_verbatim(out: &mut Vec<u8>, format: &[u8; 3], text: &[u8], protocol: Protocol) {
    match protocol {
        Protocol::Resp3 => {
            write_header(out, b'=', text.len() + 4);
            out.extend_from_slice(format);
            out.push(b':');
            out.extend_from_slice(text);
            out.extend_from_slice(CRLF);
        }
        Protocol::Resp2 => write_bulk(out, b'$', text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(reply: &Reply, protocol: Protocol) -> String {
        let mut out = Vec::new();
        reply.encode(protocol, &mut out);
        String::from_utf8(out).expect("utf-8")
    }

    /// Each reply with its RESP2 and RESP3 bytes.
    fn cases() -> Vec<(Reply, &'static str, &'static str)> {
        let verbatim = Reply::Verbatim {
            format: *b"txt",
            text: b"Some string".to_vec(),
        };
        vec![
            (Reply::ok(), "+OK\r\n", "+OK\r\n"),
            (
                Reply::error("ERR bad\r\nthing"),
                "-ERR bad  thing\r\n",
                "-ERR bad  thing\r\n",
            ),
            (Reply::Status("a\nb".into()), "+a b\r\n", "+a b\r\n"),
            (Reply::Int(-42), ":-42\r\n", ":-42\r\n"),
            (
                Reply::Bulk(b"foo".to_vec()),
                "$3\r\nfoo\r\n",
                "$3\r\nfoo\r\n",
            ),
            (Reply::Bulk(Vec::new()), "$0\r\n\r\n", "$0\r\n\r\n"),
            (
                Reply::Bulk(b"a\r\nb".to_vec()),
                "$4\r\na\r\nb\r\n",
                "$4\r\na\r\nb\r\n",
            ),
            (Reply::Null, "$-1\r\n", "_\r\n"),
            (Reply::NullArray, "*-1\r\n", "_\r\n"),
            (
                Reply::Array(vec![Reply::Int(1), Reply::Null]),
                "*2\r\n:1\r\n$-1\r\n",
                "*2\r\n:1\r\n_\r\n",
            ),
            (Reply::Array(Vec::new()), "*0\r\n", "*0\r\n"),
            (
                Reply::Push(vec![Reply::Bulk(b"message".to_vec()), Reply::Int(1)]),
                "*2\r\n$7\r\nmessage\r\n:1\r\n",
                ">2\r\n$7\r\nmessage\r\n:1\r\n",
            ),
            (
                Reply::Map(vec![(Reply::Bulk(b"k".to_vec()), Reply::Double(1.5))]),
                "*2\r\n$1\r\nk\r\n$3\r\n1.5\r\n",
                "%1\r\n$1\r\nk\r\n,1.5\r\n",
            ),
            (
                Reply::Pairs(vec![
                    (Reply::Bulk(b"a".to_vec()), Reply::Double(1.5)),
                    (Reply::Bulk(b"b".to_vec()), Reply::Double(2.0)),
                ]),
                "*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n",
                "*2\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,2\r\n",
            ),
            (Reply::Pairs(Vec::new()), "*0\r\n", "*0\r\n"),
            (
                Reply::Keyed(vec![(
                    Reply::Bulk(b"s".to_vec()),
                    Reply::Array(vec![Reply::Double(1.5)]),
                )]),
                "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n$3\r\n1.5\r\n",
                "%1\r\n$1\r\ns\r\n*1\r\n,1.5\r\n",
            ),
            (
                Reply::Set(vec![Reply::Bulk(b"m".to_vec())]),
                "*1\r\n$1\r\nm\r\n",
                "~1\r\n$1\r\nm\r\n",
            ),
            (Reply::Double(3.0), "$1\r\n3\r\n", ",3\r\n"),
            (Reply::Double(f64::INFINITY), "$3\r\ninf\r\n", ",inf\r\n"),
            (
                Reply::Double(f64::NEG_INFINITY),
                "$4\r\n-inf\r\n",
                ",-inf\r\n",
            ),
            (Reply::Double(f64::NAN), "$3\r\nnan\r\n", ",nan\r\n"),
            (Reply::Double(1e20), "$5\r\n1e+20\r\n", ",1e+20\r\n"),
            (
                Reply::HumanDouble(13.361389338970184),
                "$20\r\n13.36138933897018433\r\n",
                ",13.36138933897018433\r\n",
            ),
            (Reply::Bool(true), ":1\r\n", "#t\r\n"),
            (Reply::Bool(false), ":0\r\n", "#f\r\n"),
            (
                verbatim,
                "$11\r\nSome string\r\n",
                "=15\r\ntxt:Some string\r\n",
            ),
        ]
    }

    #[test]
    fn every_variant_in_both_protocols() {
        for (reply, resp2, resp3) in cases() {
            assert_eq!(
                encoded(&reply, Protocol::Resp2),
                resp2,
                "{reply:?} in RESP2"
            );
            assert_eq!(
                encoded(&reply, Protocol::Resp3),
                resp3,
                "{reply:?} in RESP3"
            );
        }
    }

    #[test]
    fn an_array_header_then_its_elements_encode_as_the_array() {
        let elements = vec![Reply::Int(1), Reply::Map(Vec::new()), Reply::Null];
        for protocol in [Protocol::Resp2, Protocol::Resp3] {
            let mut piecewise = Vec::new();
            Reply::encode_array_header(elements.len(), &mut piecewise);
            for element in &elements {
                element.encode(protocol, &mut piecewise);
            }
            let whole = encoded(&Reply::Array(elements.clone()), protocol);
            assert_eq!(String::from_utf8_lossy(&piecewise), whole, "{protocol:?}");
        }
    }

    #[test]
    fn nested_aggregates_encode_depth_first() {
        let reply = Reply::Array(vec![
            Reply::Map(vec![(
                Reply::Status("k".into()),
                Reply::Set(vec![Reply::Bool(true)]),
            )]),
            Reply::NullArray,
        ]);
        assert_eq!(
            encoded(&reply, Protocol::Resp2),
            "*2\r\n*2\r\n+k\r\n*1\r\n:1\r\n*-1\r\n"
        );
        assert_eq!(
            encoded(&reply, Protocol::Resp3),
            "*2\r\n%1\r\n+k\r\n~1\r\n#t\r\n_\r\n"
        );
    }

    #[test]
    fn encode_appends() {
        let mut out = b"+PONG\r\n".to_vec();
        Reply::Int(7).encode(Protocol::Resp2, &mut out);
        assert_eq!(out, b"+PONG\r\n:7\r\n");
    }
}
