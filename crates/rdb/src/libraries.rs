//! FUNCTION DUMP's and FUNCTION RESTORE's payload: a server's function libraries, each
//! as Redis 7 writes one into an RDB file.
//!
//! ```text
//! payload  = library*  version:u16le  crc:u64le      (the footer as in a key's payload)
//! library  = 245 code:string                         RDB_OPCODE_FUNCTION2: the library's
//!                                                    code, its `#!lua name=…` line first
//! ```
//!
//! Opcode 246 (RDB_OPCODE_FUNCTION_PRE_GA) is the format of Redis 7.0's release
//! candidates, which Redis itself no longer reads; it is refused by name. Strings may be
//! LZF-compressed, as Redis compresses code longer than 20 bytes.

use super::{frame, put_string, verified_body, Budget, RdbError, Reader};

/// The version FUNCTION DUMP writes: Redis 7.0's RDB version, the first that has
/// opcode 245.
pub const LIBRARIES_VERSION: u16 = 10;

const FUNCTION_PRE_GA: u8 = 246;
const FUNCTION_2: u8 = 245;

/// The libraries whose code is `codes`, as a FUNCTION DUMP payload.
pub fn dump_libraries<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(FUNCTION_2);
        put_string(&mut out, code);
    }
    frame(out, LIBRARIES_VERSION)
}

/// The code of each library a FUNCTION DUMP payload (of this server or of Redis) holds,
/// in its order.
pub fn restore_libraries(payload: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    let body = verified_body(payload)?;
    let mut reader = Reader::new(body, Budget::for_payload(payload.len()));
    let mut codes = Vec::new();
    while reader.at < body.len() {
        match reader.byte()? {
            FUNCTION_2 => {}
            FUNCTION_PRE_GA => return Err(RdbError::PreGaLibrary),
            _ => return Err(RdbError::NotALibrary),
        }
        codes.push(reader.string().map_err(|_| RdbError::LibraryPayload)?);
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `FUNCTION DUMP` of redis-server 7.0.15 holding one library, `#!lua name=t` and a
    /// `redis.register_function('f', …)`: its code LZF-compressed.
    const REDIS_DUMP: &[u8] = b"\xf5\xc3@P@W\x1f#!lua name=t\nlocal x = redis.log\x00;\xa0\n\x16register_function('f', \xe0\x00\r\x00) '\x03turn =\x03end)\n\x00\x04\x02i\xe8\x0f\xcf\xb9\x03";

    #[test]
    fn redis_s_payload_gives_its_library_s_code() {
        let codes = restore_libraries(REDIS_DUMP).expect("restores");
        assert_eq!(codes.len(), 1);
        let code = String::from_utf8(codes[0].clone()).expect("text");
        assert!(
            code.starts_with("#!lua name=t\nlocal x = redis.log"),
            "{code}"
        );
        assert!(code.contains("register_function('f', "), "{code}");
    }

    #[test]
    fn libraries_survive_a_dump_and_a_restore_in_order() {
        let codes: [&[u8]; 3] = [b"#!lua name=a\n", &[7u8; 300], b""];
        let payload = dump_libraries(codes);
        let restored = restore_libraries(&payload).expect("restores");
        assert_eq!(restored, codes.map(<[u8]>::to_vec));
        assert_eq!(restore_libraries(&dump_libraries([])), Ok(vec![]));
    }

    #[test]
    fn damaged_payloads_are_refused_with_redis_s_reasons() {
        let payload = dump_libraries([&b"#!lua name=a\n"[..]]);
        let mut flipped = payload.clone();
        flipped[3] ^= 1;
        assert_eq!(
            restore_libraries(&flipped),
            Err(RdbError::VersionOrChecksum)
        );
        assert_eq!(
            restore_libraries(&frame(vec![0, 1, b'x'], LIBRARIES_VERSION)),
            Err(RdbError::NotALibrary)
        );
        assert_eq!(
            restore_libraries(&frame(vec![FUNCTION_PRE_GA, 1, b'x'], LIBRARIES_VERSION)),
            Err(RdbError::PreGaLibrary)
        );
        assert_eq!(
            restore_libraries(&frame(vec![FUNCTION_2, 9, b'x'], LIBRARIES_VERSION)),
            Err(RdbError::LibraryPayload)
        );
    }
}
