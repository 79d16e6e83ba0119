//! The client's reply parser on arbitrary bytes: it must never panic, never claim more bytes
//! than it was given, and must call every strict prefix of a reply it accepts incomplete.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tailstore_resp::{parse_reply, Limits};

fuzz_target!(|data: &[u8]| {
    for limits in [Limits { max_bulk: 512, max_multibulk: 32, max_inline: 128, unauthenticated: false }, Limits::default()] {
        let mut rest = data;
        while let Ok(Some((_, consumed))) = parse_reply(rest, &limits) {
            assert!(consumed > 0 && consumed <= rest.len());
            assert_eq!(parse_reply(&rest[..consumed - 1], &limits), Ok(None));
            rest = &rest[consumed..];
        }
    }
});
