//! The server's request parser on arbitrary bytes: it must never panic, never claim more bytes
//! than it was given, and must reach the same commands and the same error however the bytes are
//! split into reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tailstore_resp::{Limits, ProtocolError, RequestParser};

type Outcome = (Vec<Vec<Vec<u8>>>, Result<usize, ProtocolError>);

/// Feeds `data` in reads of `chunk` bytes, as a connection would.
fn feed(data: &[u8], chunk: usize, limits: Limits) -> Outcome {
    let mut parser = RequestParser::new(limits);
    let mut commands = Vec::new();
    let mut buffer = Vec::new();
    for piece in data.chunks(chunk.max(1)) {
        buffer.extend_from_slice(piece);
        loop {
            match parser.parse(&buffer) {
                Ok(Some((command, consumed))) => {
                    assert!(consumed > 0 && consumed <= buffer.len());
                    commands.push(command);
                    buffer.drain(..consumed);
                }
                Ok(None) => break,
                Err(error) => return (commands, Err(error)),
            }
        }
    }
    (commands, Ok(buffer.len()))
}

fuzz_target!(|data: &[u8]| {
    // Small limits so the fuzzer reaches every refusal; the first byte picks the read size
    // and, with its top bit, an unauthenticated client's limits.
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let unauthenticated = first & 0x80 != 0;
    let limits = Limits { max_bulk: 512, max_multibulk: 32, max_inline: 128, unauthenticated };
    let whole = feed(stream, stream.len(), limits);
    assert_eq!(feed(stream, usize::from(first % 16) + 1, limits), whole);
    // With the real limits only the assertions inside matter.
    let _ = feed(stream, stream.len(), Limits::default());
});
