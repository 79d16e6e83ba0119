//! Direct I/O: writes that bypass the operating system's page cache.
//!
//! A background log writer that copies hundreds of MB/s into the page cache pays twice: the
//! kernel copies every byte into cached pages, then writeback walks and submits them (under a
//! 4 KiB SET load that was a sixth of the server's CPU). With `O_DIRECT` the device reads the
//! caller's buffer itself. The price is alignment: the file offset, the length and the
//! buffer's address must be multiples of the device's logical block size. [`DIRECT_ALIGN`]
//! (4 KiB) is a multiple of every logical block size Linux block devices use.
//!
//! Durability is unchanged: a direct write may sit in the device's volatile cache until the
//! next `fdatasync` (which flushes that cache), so [`crate::File::write_direct_at`] keeps
//! [`crate::File::write_at`]'s contract. Mixing direct and buffered writes on one file is
//! coherent: the kernel writes back and drops cached pages that a direct write overlaps.

use crate::{MediaError, Result};

/// Alignment of offset, length and buffer address for [`crate::File::write_direct_at`].
pub const DIRECT_ALIGN: usize = 4096;

/// Where `offset` lies within its [`DIRECT_ALIGN`] block: the offset in an aligned buffer
/// at which bytes bound for `offset` must sit for a direct write of their whole blocks.
pub fn offset_in_block(offset: u64) -> usize {
    (offset % DIRECT_ALIGN as u64) as usize
}

/// Whether a write of `data` at `offset` meets [`DIRECT_ALIGN`].
fn is_direct_aligned(offset: u64, data: &[u8]) -> bool {
    offset.is_multiple_of(DIRECT_ALIGN as u64)
        && data.len().is_multiple_of(DIRECT_ALIGN)
        && (data.as_ptr() as usize).is_multiple_of(DIRECT_ALIGN)
}

/// The error for a direct write that does not meet [`DIRECT_ALIGN`] (a caller's bug: the
/// kernel would answer `EINVAL`, the simulator answers the same so that tests catch it).
pub fn check_direct_aligned(path: &str, offset: u64, data: &[u8]) -> Result<()> {
    if is_direct_aligned(offset, data) {
        return Ok(());
    }
    Err(MediaError::Misaligned {
        path: path.to_string(),
        offset,
        len: data.len(),
        address: data.as_ptr() as usize,
    })
}

/// A growable byte buffer whose first byte is aligned to [`DIRECT_ALIGN`], for
/// [`crate::File::write_direct_at`]. Safe code: it over-allocates by one alignment unit and
/// uses the aligned window inside.
#[derive(Default)]
pub struct AlignedBuffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuffer {
    pub fn new() -> AlignedBuffer {
        AlignedBuffer::default()
    }

    /// Makes the buffer `len` bytes long. Bytes kept from before are unchanged; new ones are
    /// unspecified (the caller overwrites them).
    pub fn resize(&mut self, len: usize) {
        // A buffer that never held memory has a dangling, unaligned pointer, even for an
        // empty slice: it gets its aligned memory on its first resize, of any length.
        if self.storage.is_empty() || self.start + len > self.storage.len() {
            self.grow(len);
        }
        self.len = len;
        assert_eq!(self.as_slice().as_ptr() as usize % DIRECT_ALIGN, 0);
    }

    fn grow(&mut self, len: usize) {
        let capacity = len.next_power_of_two().max(DIRECT_ALIGN) + DIRECT_ALIGN;
        let mut storage = vec![0u8; capacity];
        let address = storage.as_ptr() as usize;
        let start = (DIRECT_ALIGN - address % DIRECT_ALIGN) % DIRECT_ALIGN;
        storage[start..start + self.len].copy_from_slice(self.as_slice());
        self.storage = storage;
        self.start = start;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_new_buffer_resized_to_nothing_is_aligned() {
        let mut buffer = AlignedBuffer::new();
        buffer.resize(0);
        assert!(buffer.is_empty());
        assert_eq!(buffer.as_slice().as_ptr() as usize % DIRECT_ALIGN, 0);
    }

    proptest! {
        /// Whatever sequence of sizes it is given, the buffer stays aligned and keeps the
        /// bytes it held up to the new length.
        #[test]
        fn stays_aligned_and_keeps_its_bytes(sizes in proptest::collection::vec(0usize..40_000, 1..12)) {
            let mut buffer = AlignedBuffer::new();
            let mut model: Vec<u8> = Vec::new();
            for (round, size) in sizes.into_iter().enumerate() {
                buffer.resize(size);
                prop_assert_eq!(buffer.as_slice().as_ptr() as usize % DIRECT_ALIGN, 0);
                prop_assert_eq!(buffer.len(), size);
                let kept = size.min(model.len());
                prop_assert_eq!(&buffer.as_slice()[..kept], &model[..kept]);
                model.resize(size, 0);
                for (i, byte) in buffer.as_mut_slice().iter_mut().enumerate() {
                    *byte = (i + round) as u8;
                }
                model.copy_from_slice(buffer.as_slice());
            }
        }
    }

    #[test]
    fn alignment_check_names_what_is_off() {
        let mut buffer = AlignedBuffer::new();
        buffer.resize(2 * DIRECT_ALIGN);
        let aligned = buffer.as_slice();
        assert!(check_direct_aligned("f", 4096, aligned).is_ok());
        for (offset, data) in [
            (512, aligned),
            (0, &aligned[..100]),
            (0, &aligned[1..DIRECT_ALIGN + 1]),
        ] {
            let err = check_direct_aligned("f", offset, data).unwrap_err();
            assert!(matches!(err, MediaError::Misaligned { .. }), "{err}");
            assert!(err.to_string().contains("f"), "{err}");
        }
    }
}
