//! Properties: what one side encodes the other parses back, however the bytes are split, and no
//! input makes a parser panic or claim more bytes than it was given.

use proptest::prelude::*;
use tailstore_resp::{
    encode_command, format_double, format_human_exact, parse_reply, Limits, Protocol,
    ProtocolError, Reply, RequestParser, Value,
};

type Command = Vec<Vec<u8>>;

fn command() -> impl Strategy<Value = Command> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 0..6)
}

/// The command as an inline line: every argument double-quoted, bytes other than letters and
/// digits written as `\xHH` so any byte survives.
fn inline_line(command: &Command) -> Vec<u8> {
    let mut line = Vec::new();
    for (index, arg) in command.iter().enumerate() {
        if index > 0 {
            line.push(b' ');
        }
        line.push(b'"');
        for &byte in arg {
            if byte.is_ascii_alphanumeric() {
                line.push(byte);
            } else {
                line.extend_from_slice(format!("\\x{byte:02x}").as_bytes());
            }
        }
        line.push(b'"');
    }
    line.extend_from_slice(b"\r\n");
    line
}

/// Commands, each encoded as multibulk or inline, concatenated.
fn pipeline() -> impl Strategy<Value = (Vec<Command>, Vec<u8>)> {
    prop::collection::vec((command(), any::<bool>()), 0..8).prop_map(|commands| {
        let mut stream = Vec::new();
        for (command, inline) in &commands {
            if *inline {
                stream.extend(inline_line(command));
            } else {
                encode_command(command, &mut stream);
            }
        }
        (
            commands.into_iter().map(|(command, _)| command).collect(),
            stream,
        )
    })
}

/// What a connection makes of `stream` read in pieces of the given sizes (cycled): the commands,
/// then the error or the count of bytes left unparsed.
fn feed(
    stream: &[u8],
    chunks: &[usize],
    limits: Limits,
) -> (Vec<Command>, Result<usize, ProtocolError>) {
    let mut parser = RequestParser::new(limits);
    let mut commands = Vec::new();
    let mut buffer = Vec::new();
    let mut sent = 0;
    for &chunk in chunks.iter().cycle() {
        let end = (sent + chunk.max(1)).min(stream.len());
        buffer.extend_from_slice(&stream[sent..end]);
        sent = end;
        loop {
            match parser.parse(&buffer) {
                Ok(Some((command, consumed))) => {
                    assert!(
                        consumed <= buffer.len(),
                        "consumed {consumed} of {}",
                        buffer.len()
                    );
                    commands.push(command);
                    buffer.drain(..consumed);
                }
                Ok(None) => break,
                Err(error) => return (commands, Err(error)),
            }
        }
        if sent == stream.len() {
            break;
        }
    }
    (commands, Ok(buffer.len()))
}

/// The value a client parses from `reply` encoded in `protocol`.
fn expected(reply: &Reply, protocol: Protocol) -> Value {
    let resp3 = protocol == Protocol::Resp3;
    let all = |items: &[Reply]| items.iter().map(|item| expected(item, protocol)).collect();
    match reply {
        Reply::Status(text) => Value::Simple(text.as_bytes().to_vec()),
        Reply::Error(text) => Value::Error(text.as_bytes().to_vec()),
        Reply::Int(value) => Value::Int(*value),
        Reply::Bulk(bytes) => Value::Bulk(bytes.clone()),
        Reply::Null | Reply::NullArray => Value::Null,
        Reply::Array(items) => Value::Array(all(items)),
        Reply::Set(items) if resp3 => Value::Set(all(items)),
        Reply::Set(items) => Value::Array(all(items)),
        Reply::Push(items) if resp3 => Value::Push(all(items)),
        Reply::Push(items) => Value::Array(all(items)),
        Reply::Map(pairs) if resp3 => Value::Map(
            pairs
                .iter()
                .map(|(key, value)| (expected(key, protocol), expected(value, protocol)))
                .collect(),
        ),
        Reply::Map(pairs) => Value::Array(
            pairs
                .iter()
                .flat_map(|(key, value)| [expected(key, protocol), expected(value, protocol)])
                .collect(),
        ),
        Reply::Keyed(pairs) if resp3 => Value::Map(
            pairs
                .iter()
                .map(|(key, value)| (expected(key, protocol), expected(value, protocol)))
                .collect(),
        ),
        Reply::Keyed(pairs) => Value::Array(
            pairs
                .iter()
                .map(|(a, b)| Value::Array(vec![expected(a, protocol), expected(b, protocol)]))
                .collect(),
        ),
        Reply::Pairs(pairs) if resp3 => Value::Array(
            pairs
                .iter()
                .map(|(a, b)| Value::Array(vec![expected(a, protocol), expected(b, protocol)]))
                .collect(),
        ),
        Reply::Pairs(pairs) => Value::Array(
            pairs
                .iter()
                .flat_map(|(a, b)| [expected(a, protocol), expected(b, protocol)])
                .collect(),
        ),
        Reply::Double(value) if resp3 => Value::Double(*value),
        Reply::Double(value) => Value::Bulk(format_double(*value).into_bytes()),
        // The text has 17 decimals, which a small value's double may need more of.
        Reply::HumanDouble(value) if resp3 => Value::Double(
            format_human_exact(*value)
                .parse()
                .expect("a decimal reads back"),
        ),
        Reply::HumanDouble(value) => Value::Bulk(format_human_exact(*value).into_bytes()),
        Reply::Bool(value) if resp3 => Value::Bool(*value),
        Reply::Bool(value) => Value::Int(i64::from(*value)),
        Reply::Verbatim { format, text } if resp3 => Value::Verbatim {
            format: *format,
            text: text.clone(),
        },
        Reply::Verbatim { text, .. } => Value::Bulk(text.clone()),
    }
}

fn double() -> impl Strategy<Value = f64> {
    // NaN never equals itself; it has its own exact-bytes test.
    prop_oneof![
        any::<f64>().prop_filter("not NaN", |value| !value.is_nan()),
        (-1_000_000i64..1_000_000).prop_map(|value| value as f64 / 64.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
    ]
}

fn reply() -> impl Strategy<Value = Reply> {
    let line = "[^\r\n]{0,12}";
    let leaf = prop_oneof![
        line.prop_map(Reply::Status),
        line.prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Int),
        prop::collection::vec(any::<u8>(), 0..16).prop_map(Reply::Bulk),
        Just(Reply::Null),
        Just(Reply::NullArray),
        double().prop_map(Reply::Double),
        double().prop_map(Reply::HumanDouble),
        any::<bool>().prop_map(Reply::Bool),
        ("[a-z]{3}", prop::collection::vec(any::<u8>(), 0..16)).prop_map(|(format, text)| {
            let mut bytes = [0u8; 3];
            bytes.copy_from_slice(format.as_bytes());
            Reply::Verbatim {
                format: bytes,
                text,
            }
        }),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Reply::Array),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Reply::Set),
            prop::collection::vec(inner.clone(), 0..6).prop_map(Reply::Push),
            prop::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Reply::Map),
            prop::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Reply::Pairs),
            prop::collection::vec((inner.clone(), inner), 0..4).prop_map(Reply::Keyed),
        ]
    })
}

fn protocol() -> impl Strategy<Value = Protocol> {
    prop_oneof![Just(Protocol::Resp2), Just(Protocol::Resp3)]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn encoded_command_parses_back(command in command()) {
        let mut stream = Vec::new();
        encode_command(&command, &mut stream);
        let parsed = RequestParser::new(Limits::default()).parse(&stream);
        prop_assert_eq!(parsed, Ok(Some((command, stream.len()))));
    }

    #[test]
    fn any_split_yields_the_same_commands(
        (commands, stream) in pipeline(),
        chunks in prop::collection::vec(1usize..40, 1..8),
    ) {
        prop_assert_eq!(feed(&stream, &chunks, Limits::default()), (commands.clone(), Ok(0)));
        prop_assert_eq!(feed(&stream, &[1], Limits::default()), (commands, Ok(0)));
    }

    #[test]
    fn a_damaged_stream_fails_the_same_way_however_split(
        (_, stream) in pipeline(),
        damage in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        chunks in prop::collection::vec(1usize..40, 1..8),
    ) {
        let mut stream = stream;
        if !stream.is_empty() {
            for (index, byte) in damage {
                let at = index.index(stream.len());
                stream[at] = byte;
            }
        }
        let limits = Limits { max_bulk: 64, max_multibulk: 16, max_inline: 32, unauthenticated: false };
        let whole = feed(&stream, &[stream.len().max(1)], limits);
        prop_assert_eq!(feed(&stream, &chunks, limits), whole.clone());
        prop_assert_eq!(feed(&stream, &[1], limits), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let limits = Limits { max_bulk: 64, max_multibulk: 16, max_inline: 32, unauthenticated: false };
        if let Ok(Some((_, consumed))) = RequestParser::new(limits).parse(&bytes) {
            prop_assert!(consumed <= bytes.len());
        }
        if let Ok(Some((_, consumed))) = parse_reply(&bytes, &limits) {
            prop_assert!(consumed <= bytes.len());
        }
    }

    #[test]
    fn encoded_reply_parses_back(reply in reply(), protocol in protocol()) {
        let mut stream = Vec::new();
        reply.encode(protocol, &mut stream);
        let expected = expected(&reply, protocol);
        prop_assert_eq!(parse_reply(&stream, &Limits::default()), Ok(Some((expected, stream.len()))));
        for end in 0..stream.len() {
            prop_assert_eq!(parse_reply(&stream[..end], &Limits::default()), Ok(None));
        }
    }

    #[test]
    fn pipelined_replies_parse_in_order(replies in prop::collection::vec(reply(), 1..5), protocol in protocol()) {
        let mut stream = Vec::new();
        for reply in &replies {
            reply.encode(protocol, &mut stream);
        }
        let mut rest = &stream[..];
        for reply in &replies {
            let (value, consumed) = parse_reply(rest, &Limits::default())
                .expect("valid")
                .expect("complete");
            prop_assert_eq!(value, expected(reply, protocol));
            rest = &rest[consumed..];
        }
        prop_assert!(rest.is_empty());
    }

    #[test]
    fn formatted_doubles_read_back_exactly(value in double()) {
        prop_assert_eq!(format_double(value).parse::<f64>().ok(), Some(value));
    }
}
