//! The client's reply parser: every RESP2/RESP3 type, incomplete input, and malformed replies.

use tailstore_resp::{parse_reply, Limits, ProtocolError, Value};

fn parse(stream: &[u8]) -> Result<Option<(Value, usize)>, ProtocolError> {
    parse_reply(stream, &Limits::default())
}

/// Parses a complete reply that must take the whole stream, and checks every strict prefix of
/// it is reported incomplete.
fn whole(stream: &[u8]) -> Value {
    for end in 0..stream.len() {
        assert_eq!(
            parse(&stream[..end]),
            Ok(None),
            "prefix {:?}",
            &stream[..end]
        );
    }
    let (value, consumed) = parse(stream).expect("valid").expect("complete");
    assert_eq!(consumed, stream.len());
    value
}

fn bulk(text: &str) -> Value {
    Value::Bulk(text.as_bytes().to_vec())
}

#[test]
fn resp2_types() {
    assert_eq!(whole(b"+OK\r\n"), Value::Simple(b"OK".to_vec()));
    assert_eq!(
        whole(b"-ERR unknown\r\n"),
        Value::Error(b"ERR unknown".to_vec())
    );
    assert_eq!(whole(b":-42\r\n"), Value::Int(-42));
    assert_eq!(whole(b"$5\r\nhe\r\no\r\n"), bulk("he\r\no"));
    assert_eq!(whole(b"$0\r\n\r\n"), bulk(""));
    assert_eq!(whole(b"$-1\r\n"), Value::Null);
    assert_eq!(whole(b"*-1\r\n"), Value::Null);
    assert_eq!(whole(b"*0\r\n"), Value::Array(vec![]));
    assert_eq!(
        whole(b"*3\r\n:1\r\n$1\r\na\r\n*1\r\n+x\r\n"),
        Value::Array(vec![
            Value::Int(1),
            bulk("a"),
            Value::Array(vec![Value::Simple(b"x".to_vec())])
        ])
    );
}

#[test]
fn resp3_types() {
    assert_eq!(whole(b"_\r\n"), Value::Null);
    assert_eq!(whole(b",1.5\r\n"), Value::Double(1.5));
    assert_eq!(whole(b",-2e-3\r\n"), Value::Double(-0.002));
    assert_eq!(whole(b",inf\r\n"), Value::Double(f64::INFINITY));
    assert_eq!(whole(b",-inf\r\n"), Value::Double(f64::NEG_INFINITY));
    assert!(matches!(whole(b",nan\r\n"), Value::Double(value) if value.is_nan()));
    assert_eq!(whole(b"#t\r\n"), Value::Bool(true));
    assert_eq!(whole(b"#f\r\n"), Value::Bool(false));
    assert_eq!(
        whole(b"(3492890328409238509324850943850943825024385\r\n"),
        Value::BigNumber(b"3492890328409238509324850943850943825024385".to_vec())
    );
    assert_eq!(whole(b"(-12\r\n"), Value::BigNumber(b"-12".to_vec()));
    assert_eq!(
        whole(b"!21\r\nSYNTAX invalid syntax\r\n"),
        Value::Error(b"SYNTAX invalid syntax".to_vec())
    );
    assert_eq!(
        whole(b"=15\r\ntxt:Some string\r\n"),
        Value::Verbatim {
            format: *b"txt",
            text: b"Some string".to_vec()
        }
    );
    assert_eq!(
        whole(b"%2\r\n+a\r\n:1\r\n+b\r\n_\r\n"),
        Value::Map(vec![
            (Value::Simple(b"a".to_vec()), Value::Int(1)),
            (Value::Simple(b"b".to_vec()), Value::Null),
        ])
    );
    assert_eq!(
        whole(b"~2\r\n:1\r\n:2\r\n"),
        Value::Set(vec![Value::Int(1), Value::Int(2)])
    );
    assert_eq!(
        whole(b">2\r\n+message\r\n$2\r\nhi\r\n"),
        Value::Push(vec![Value::Simple(b"message".to_vec()), bulk("hi")])
    );
    assert_eq!(whole(b"%0\r\n"), Value::Map(vec![]));
}

#[test]
fn attributes_are_dropped_for_the_value_they_annotate() {
    assert_eq!(whole(b"|1\r\n+ttl\r\n:3600\r\n$1\r\nv\r\n"), bulk("v"));
    assert_eq!(
        whole(b"*2\r\n:1\r\n|1\r\n+k\r\n+v\r\n:2\r\n"),
        Value::Array(vec![Value::Int(1), Value::Int(2)])
    );
    assert_eq!(whole(b"|0\r\n#t\r\n"), Value::Bool(true));
}

#[test]
fn pipelined_replies_are_taken_one_at_a_time() {
    let stream = b"+OK\r\n:1\r\n$1\r\nx\r\n";
    assert_eq!(parse(stream), Ok(Some((Value::Simple(b"OK".to_vec()), 5))));
    assert_eq!(parse(&stream[5..]), Ok(Some((Value::Int(1), 4))));
    assert_eq!(parse(&stream[9..]), Ok(Some((bulk("x"), 7))));
}

#[test]
fn nesting_is_bounded() {
    let nested = |depth: usize| {
        let mut stream = b"*1\r\n".repeat(depth);
        stream.extend_from_slice(b":7\r\n");
        stream
    };
    let (mut value, consumed) = parse(&nested(128)).expect("valid").expect("complete");
    assert_eq!(consumed, nested(128).len());
    let mut levels = 0;
    while let Value::Array(mut items) = value {
        value = items.pop().expect("one element");
        levels += 1;
    }
    assert_eq!((levels, value), (128, Value::Int(7)));
    // Deeper would make dropping the value recurse without bound.
    assert_eq!(parse(&nested(129)), Err(ProtocolError::TooDeeplyNested));
    assert_eq!(
        parse(&b"%1\r\n".repeat(1000)),
        Err(ProtocolError::TooDeeplyNested)
    );
}

#[test]
fn malformed_replies_are_refused() {
    let cases: &[(&[u8], ProtocolError)] = &[
        (b"?\r\n", ProtocolError::UnknownReplyType { got: b'?' }),
        (b"$?\r\n", ProtocolError::InvalidBulkLength),
        (b"*?\r\n", ProtocolError::InvalidMultibulkLength),
        (b":12a\r\n", ProtocolError::InvalidInteger),
        (b":\r\n", ProtocolError::InvalidInteger),
        (b":99999999999999999999\r\n", ProtocolError::InvalidInteger),
        (b"$-2\r\n", ProtocolError::InvalidBulkLength),
        (b"!-1\r\n", ProtocolError::InvalidBulkLength),
        (b"$x\r\n", ProtocolError::InvalidBulkLength),
        (b"$3\r\nabcd\r\n", ProtocolError::UnterminatedBulk),
        (b"*-2\r\n", ProtocolError::InvalidMultibulkLength),
        (b"%-1\r\n", ProtocolError::InvalidMultibulkLength),
        (b"+OK\rX", ProtocolError::BadLineTerminator),
        (b"_x\r\n", ProtocolError::InvalidNull),
        (b",\r\n", ProtocolError::InvalidDouble),
        (b",1.5x\r\n", ProtocolError::InvalidDouble),
        (b"#x\r\n", ProtocolError::InvalidBoolean),
        (b"#\r\n", ProtocolError::InvalidBoolean),
        (b"(\r\n", ProtocolError::InvalidBigNumber),
        (b"(12a\r\n", ProtocolError::InvalidBigNumber),
        (b"=3\r\ntxt\r\n", ProtocolError::InvalidVerbatim),
        (b"=5\r\ntxt-a\r\n", ProtocolError::InvalidVerbatim),
        (
            b"*2\r\n:1\r\n@\r\n",
            ProtocolError::UnknownReplyType { got: b'@' },
        ),
    ];
    for (stream, error) in cases {
        assert_eq!(
            parse(stream),
            Err(*error),
            "{:?}",
            String::from_utf8_lossy(stream)
        );
    }
}

#[test]
fn limits_are_enforced() {
    let limits = Limits {
        max_bulk: 4,
        max_multibulk: 2,
        max_inline: 8,
        unauthenticated: false,
    };
    assert_eq!(
        parse_reply(b"$5\r\n", &limits),
        Err(ProtocolError::InvalidBulkLength)
    );
    assert_eq!(
        parse_reply(b"*3\r\n", &limits),
        Err(ProtocolError::InvalidMultibulkLength)
    );
    assert_eq!(
        parse_reply(b"%2\r\n", &limits).map(|v| v.is_none()),
        Ok(true)
    );
    assert_eq!(
        parse_reply(b"+123456789", &limits),
        Err(ProtocolError::TooBigReplyLine)
    );
    assert_eq!(
        parse(b"$2147483648\r\n"),
        Err(ProtocolError::InvalidBulkLength)
    );
    assert_eq!(
        parse(b"$536870913\r\n"),
        Err(ProtocolError::InvalidBulkLength)
    );
    assert_eq!(parse(b"$536870912\r\n"), Ok(None));
}

#[test]
fn client_error_texts_follow_redis_style() {
    assert_eq!(
        ProtocolError::UnknownReplyType { got: b'\n' }.to_string(),
        "ERR Protocol error: got ' ' as reply type byte"
    );
    assert_eq!(
        ProtocolError::InvalidInteger.to_string(),
        "ERR Protocol error: invalid integer reply"
    );
}
