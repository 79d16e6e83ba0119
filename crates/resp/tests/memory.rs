//! Claimed lengths cost no memory until their bytes arrive. The process's virtual size is read
//! around each parse: reserving a claimed 512 MiB bulk or a 2^31-slot vector would grow it by
//! that much (or abort the process) even before the memory is touched. One test in this binary,
//! so no other test thread allocates meanwhile.
#![cfg(target_os = "linux")]

use tailstore_resp::{parse_reply, Limits, ProtocolError, RequestParser};

/// The process's virtual size in bytes.
fn virtual_size() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm
        .split_whitespace()
        .next()
        .and_then(|field| field.parse().ok())
        .expect("size field");
    pages * 4096
}

/// Runs `parse`, returning its result with how much the virtual size grew meanwhile.
fn growth<T>(parse: impl FnOnce() -> T) -> (T, u64) {
    let before = virtual_size();
    let result = parse();
    (result, virtual_size().saturating_sub(before))
}

const ALLOWED_GROWTH: u64 = 128 << 20;

#[test]
fn claimed_lengths_are_not_allocated() {
    // The first allocations of a thread create its malloc arena; get that out of the way.
    let warm = vec![0u8; 1 << 20];
    drop(warm);

    let mut parser = RequestParser::new(Limits::default());
    let mut stream = b"*2\r\n$536870912\r\n".to_vec();
    stream.extend(std::iter::repeat_n(b'x', 1 << 20));
    let (result, grew) = growth(|| parser.parse(&stream));
    assert_eq!(result, Ok(None));
    assert!(
        grew < ALLOWED_GROWTH,
        "a claimed bulk grew the process by {grew} bytes"
    );

    let mut parser = RequestParser::new(Limits::default());
    let (result, grew) = growth(|| parser.parse(b"*2147483647\r\n$1\r\na\r\n"));
    assert_eq!(result, Ok(None));
    assert!(
        grew < ALLOWED_GROWTH,
        "a claimed count grew the process by {grew} bytes"
    );

    let mut parser = RequestParser::new(Limits::default());
    let (result, grew) = growth(|| parser.parse(b"*1\r\n$2147483648\r\n"));
    assert_eq!(result, Err(ProtocolError::InvalidBulkLength));
    assert!(
        grew < ALLOWED_GROWTH,
        "a refused bulk grew the process by {grew} bytes"
    );

    let (result, grew) = growth(|| parse_reply(b"*2147483647\r\n:1\r\n", &Limits::default()));
    assert_eq!(result, Ok(None));
    assert!(
        grew < ALLOWED_GROWTH,
        "a claimed reply count grew the process by {grew} bytes"
    );

    let (result, grew) = growth(|| parse_reply(&stream[4..], &Limits::default()));
    assert_eq!(result, Ok(None));
    assert!(
        grew < ALLOWED_GROWTH,
        "a claimed reply bulk grew the process by {grew} bytes"
    );
}
