//! The server's request parser: commands, pipelines, inline commands, partial reads, and each
//! malformed or oversized input answered with Redis's error.

use tailstore_resp::{Limits, ProtocolError, RequestParser};

type Command = Vec<Vec<u8>>;

fn args(words: &[&str]) -> Command {
    words.iter().map(|word| word.as_bytes().to_vec()).collect()
}

/// Parses every command of `stream` as a connection would; the error, if any, ends the list.
fn parse_all(stream: &[u8], limits: Limits) -> (Vec<Command>, Result<usize, ProtocolError>) {
    let mut parser = RequestParser::new(limits);
    let mut commands = Vec::new();
    let mut rest = stream;
    loop {
        match parser.parse(rest) {
            Ok(Some((command, consumed))) => {
                assert!(consumed > 0 && consumed <= rest.len());
                commands.push(command);
                rest = &rest[consumed..];
            }
            Ok(None) => return (commands, Ok(rest.len())),
            Err(error) => return (commands, Err(error)),
        }
    }
}

fn one(stream: &[u8]) -> Result<Option<(Command, usize)>, ProtocolError> {
    RequestParser::new(Limits::default()).parse(stream)
}

fn error_of(stream: &[u8]) -> ProtocolError {
    parse_all(stream, Limits::default())
        .1
        .expect_err("a protocol error")
}

#[test]
fn multibulk_command() {
    let stream = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
    assert_eq!(
        one(stream),
        Ok(Some((args(&["SET", "key", "value"]), stream.len())))
    );
}

#[test]
fn bulks_are_binary_safe() {
    let stream = b"*2\r\n$4\r\na\r\nb\r\n$3\r\n\0\xff*\r\n";
    assert_eq!(
        one(stream),
        Ok(Some((
            vec![b"a\r\nb".to_vec(), b"\0\xff*".to_vec()],
            stream.len()
        )))
    );
}

#[test]
fn empty_bulk_argument() {
    let stream = b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n";
    assert_eq!(one(stream), Ok(Some((args(&["ECHO", ""]), stream.len()))));
}

#[test]
fn zero_and_negative_counts_are_empty_commands() {
    for stream in [&b"*0\r\n"[..], b"*-1\r\n", b"*-5\r\n"] {
        assert_eq!(
            one(stream),
            Ok(Some((Vec::new(), stream.len()))),
            "{stream:?}"
        );
    }
}

#[test]
fn pipeline_yields_each_command_then_waits_for_the_rest() {
    let stream =
        b"*1\r\n$4\r\nPING\r\nECHO hi\r\n*0\r\n\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPI";
    let (commands, rest) = parse_all(stream, Limits::default());
    assert_eq!(
        commands,
        [
            args(&["PING"]),
            args(&["ECHO", "hi"]),
            vec![],
            vec![],
            args(&["GET", "k"])
        ]
    );
    assert_eq!(rest, Ok(b"*1\r\n$4\r\nPI".len()));
}

#[test]
fn inline_commands() {
    assert_eq!(one(b"PING\r\n"), Ok(Some((args(&["PING"]), 6))));
    assert_eq!(one(b"PING\n"), Ok(Some((args(&["PING"]), 5))));
    assert_eq!(
        one(b" set k \t v \r\n"),
        Ok(Some((args(&["set", "k", "v"]), 13)))
    );
    assert_eq!(one(b"PING"), Ok(None));
    assert_eq!(one(b"PING\r"), Ok(None));
}

#[test]
fn inline_quotes_and_escapes() {
    let stream = b"SET \"a b\\n\\x41\" 'it\\'s' \"\"\r\n";
    assert_eq!(
        one(stream),
        Ok(Some((args(&["SET", "a b\nA", "it's", ""]), stream.len())))
    );
}

#[test]
fn empty_inline_lines_are_empty_commands() {
    for stream in [&b"\r\n"[..], b"\n", b" \t \r\n"] {
        assert_eq!(
            one(stream),
            Ok(Some((Vec::new(), stream.len()))),
            "{stream:?}"
        );
    }
}

#[test]
fn unbalanced_quotes_are_refused() {
    for stream in [
        &b"SET \"a\r\n"[..],
        b"SET 'a\n",
        b"SET \"a\"b\r\n",
        b"SET 'a'b\n",
    ] {
        assert_eq!(
            error_of(stream),
            ProtocolError::UnbalancedQuotes,
            "{stream:?}"
        );
    }
    assert_eq!(
        ProtocolError::UnbalancedQuotes.to_string(),
        "ERR Protocol error: unbalanced quotes in request"
    );
}

#[test]
fn malformed_counts_are_invalid_multibulk_length() {
    for stream in [
        &b"*abc\r\n"[..],
        b"*\r\n",
        b"* 1\r\n",
        b"*01\r\n",
        b"*+1\r\n",
        b"*-0\r\n",
        b"*1x\r\n",
        b"*1\rX",
        b"*2147483648\r\n",
        b"*99999999999999999999999\r\n",
    ] {
        assert_eq!(
            error_of(stream),
            ProtocolError::InvalidMultibulkLength,
            "{stream:?}"
        );
    }
    assert_eq!(
        ProtocolError::InvalidMultibulkLength.to_string(),
        "ERR Protocol error: invalid multibulk length"
    );
}

#[test]
fn malformed_lengths_are_invalid_bulk_length() {
    for stream in [
        &b"*1\r\n$abc\r\n"[..],
        b"*1\r\n$\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$-5\r\n",
        b"*1\r\n$03\r\n",
        b"*1\r\n$3 \r\n",
        b"*1\r\n$3\rX",
        b"*1\r\n$536870913\r\n",
        b"*1\r\n$9223372036854775808\r\n",
    ] {
        assert_eq!(
            error_of(stream),
            ProtocolError::InvalidBulkLength,
            "{stream:?}"
        );
    }
    assert_eq!(
        ProtocolError::InvalidBulkLength.to_string(),
        "ERR Protocol error: invalid bulk length"
    );
}

#[test]
fn two_gib_bulk_header_is_refused_before_any_payload() {
    assert_eq!(
        one(b"*1\r\n$2147483648\r\n"),
        Err(ProtocolError::InvalidBulkLength)
    );
    // The largest bulk allowed is merely awaited.
    assert_eq!(one(b"*1\r\n$536870912\r\n"), Ok(None));
}

#[test]
fn missing_bulk_terminator_is_refused() {
    assert_eq!(
        error_of(b"*1\r\n$3\r\nfooXY"),
        ProtocolError::UnterminatedBulk
    );
    assert_eq!(
        error_of(b"*1\r\n$3\r\nfoo\rX"),
        ProtocolError::UnterminatedBulk
    );
    assert_eq!(
        error_of(b"*1\r\n$3\r\nfoobar\r\n"),
        ProtocolError::UnterminatedBulk
    );
    assert_eq!(one(b"*1\r\n$3\r\nfoo\r"), Ok(None));
    assert_eq!(one(b"*1\r\n$3\r\nfoo"), Ok(None));
    assert_eq!(
        ProtocolError::UnterminatedBulk.to_string(),
        "ERR Protocol error: invalid bulk length"
    );
}

#[test]
fn argument_without_dollar_is_refused_with_the_byte() {
    assert_eq!(
        error_of(b"*1\r\nfoo\r\n"),
        ProtocolError::ExpectedDollar { got: b'f' }
    );
    assert_eq!(
        error_of(b"*2\r\n$1\r\na\r\n:1\r\n"),
        ProtocolError::ExpectedDollar { got: b':' }
    );
    assert_eq!(
        ProtocolError::ExpectedDollar { got: b'f' }.to_string(),
        "ERR Protocol error: expected '$', got 'f'"
    );
    // An error line cannot carry CR or LF: Redis shows them as spaces.
    let got_cr = error_of(b"*1\r\n\r\n");
    assert_eq!(got_cr, ProtocolError::ExpectedDollar { got: b'\r' });
    assert_eq!(
        got_cr.to_string(),
        "ERR Protocol error: expected '$', got ' '"
    );
}

#[test]
fn too_long_count_line() {
    let mut stream = b"*".to_vec();
    stream.extend(std::iter::repeat_n(b'1', 65535));
    assert_eq!(one(&stream), Ok(None));
    stream.push(b'1');
    assert_eq!(one(&stream), Err(ProtocolError::TooBigMultibulkCount));
    assert_eq!(
        ProtocolError::TooBigMultibulkCount.to_string(),
        "ERR Protocol error: too big mbulk count string"
    );
}

#[test]
fn too_long_length_line() {
    let mut stream = b"*1\r\n$".to_vec();
    stream.extend(std::iter::repeat_n(b'1', 65535));
    assert_eq!(one(&stream), Ok(None));
    stream.push(b'1');
    assert_eq!(one(&stream), Err(ProtocolError::TooBigBulkCount));
    assert_eq!(
        ProtocolError::TooBigBulkCount.to_string(),
        "ERR Protocol error: too big bulk count string"
    );
}

#[test]
fn too_long_inline_line() {
    let mut stream = vec![b'x'; 65536];
    assert_eq!(one(&stream), Ok(None));
    stream.push(b'x');
    assert_eq!(one(&stream), Err(ProtocolError::TooBigInlineRequest));
    assert_eq!(
        ProtocolError::TooBigInlineRequest.to_string(),
        "ERR Protocol error: too big inline request"
    );
    // A line that fits is accepted whole.
    let mut fits = vec![b'x'; 65535];
    fits.push(b'\n');
    assert_eq!(one(&fits), Ok(Some((vec![vec![b'x'; 65535]], 65536))));
}

#[test]
fn custom_limits_are_enforced() {
    let limits = Limits {
        max_bulk: 10,
        max_multibulk: 2,
        max_inline: 8,
        unauthenticated: false,
    };
    let parse = |stream: &[u8]| RequestParser::new(limits).parse(stream);
    assert_eq!(
        parse(b"*1\r\n$11\r\n"),
        Err(ProtocolError::InvalidBulkLength)
    );
    assert_eq!(
        parse(b"*1\r\n$10\r\n0123456789\r\n").map(|c| c.is_some()),
        Ok(true)
    );
    assert_eq!(parse(b"*3\r\n"), Err(ProtocolError::InvalidMultibulkLength));
    assert_eq!(parse(b"123456789"), Err(ProtocolError::TooBigInlineRequest));
    assert_eq!(parse(b"12345678\n").map(|c| c.is_some()), Ok(true));
}

/// A client that has not given the password: ten arguments of 16 KiB at most, refused
/// with Redis's texts after the ordinary checks, and the limits lifted once it has.
#[test]
fn unauthenticated_requests_are_small() {
    let unauthenticated = Limits {
        unauthenticated: true,
        ..Limits::default()
    };
    let parse = |stream: &[u8]| RequestParser::new(unauthenticated).parse(stream);
    assert_eq!(
        parse(b"*11\r\n"),
        Err(ProtocolError::UnauthenticatedMultibulkLength)
    );
    assert_eq!(parse(b"*10\r\n"), Ok(None));
    assert_eq!(
        parse(b"*2\r\n$16385\r\n"),
        Err(ProtocolError::UnauthenticatedBulkLength)
    );
    assert_eq!(parse(b"*2\r\n$16384\r\n"), Ok(None));
    assert_eq!(
        parse(b"*2\r\n$-5\r\n"),
        Err(ProtocolError::InvalidBulkLength)
    );
    assert_eq!(
        ProtocolError::UnauthenticatedBulkLength.to_string(),
        "ERR Protocol error: unauthenticated bulk length"
    );

    let mut parser = RequestParser::new(unauthenticated);
    parser.set_unauthenticated(false);
    assert_eq!(parser.parse(b"*11\r\n"), Ok(None));
}

#[test]
fn enormous_limit_does_not_overflow() {
    let limits = Limits {
        max_bulk: usize::MAX,
        ..Limits::default()
    };
    let mut parser = RequestParser::new(limits);
    assert_eq!(parser.parse(b"*1\r\n$9223372036854775807\r\nabc"), Ok(None));
}

#[test]
fn byte_by_byte_gives_the_same_commands() {
    let stream = b"*2\r\n$4\r\nECHO\r\n$3\r\na\r\n\r\nSET k \"v\\x21\"\r\n*0\r\n";
    let mut parser = RequestParser::new(Limits::default());
    let mut commands = Vec::new();
    let mut buffer = Vec::new();
    for &byte in stream {
        buffer.push(byte);
        while let Some((command, consumed)) = parser.parse(&buffer).expect("valid") {
            commands.push(command);
            buffer.drain(..consumed);
        }
    }
    assert!(buffer.is_empty());
    assert_eq!(
        commands,
        [
            vec![b"ECHO".to_vec(), b"a\r\n".to_vec()],
            args(&["SET", "k", "v!"]),
            vec![]
        ]
    );
}

#[test]
fn parser_is_reusable_after_each_command() {
    let mut parser = RequestParser::new(Limits::default());
    assert_eq!(
        parser.parse(b"*1\r\n$1\r\na\r\n"),
        Ok(Some((args(&["a"]), 11)))
    );
    assert_eq!(parser.parse(b"b\r\n"), Ok(Some((args(&["b"]), 3))));
    assert_eq!(parser.parse(b""), Ok(None));
}
