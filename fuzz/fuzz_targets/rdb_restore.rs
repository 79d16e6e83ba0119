//! RESTORE's and FUNCTION RESTORE's payload readers on arbitrary bytes: they must never
//! panic. The bytes are tried as a whole payload and, since a checksum that does not fit
//! stops almost every input at the footer, also as a payload's body given a footer that
//! fits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tailstore_rdb::{frame, restore, restore_libraries, DUMP_VERSION, LIBRARIES_VERSION};

fuzz_target!(|data: &[u8]| {
    let _ = restore(data);
    let _ = restore(&frame(data.to_vec(), DUMP_VERSION));
    let _ = restore_libraries(&frame(data.to_vec(), LIBRARIES_VERSION));
});
