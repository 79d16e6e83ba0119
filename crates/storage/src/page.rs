//! The fixed-size page: the unit of I/O, caching and checksumming.
//!
//! # On-disk layout
//!
//! A page is [`PAGE_SIZE`] (16 KiB) bytes; page `n` of the data file lives at byte offset
//! `n * PAGE_SIZE`. It starts with a 32-byte header, all integers little-endian:
//!
//! ```text
//! offset  size field
//!      0     4 checksum  CRC32C of bytes 4..16384 (everything but this field)
//!      4     1 kind      PageKind (0 is invalid, so a zeroed page never verifies)
//!      5     3 reserved  zero
//!      8     8 page_id   the page's own number: a page written to or read from the wrong
//!                        offset fails verification
//!     16     8 lsn       log position of the last change to the page; the write-ahead rule
//!                        requires the log to be durable up to here before the page is written
//!     24     8 reserved  zero
//!     32 16352 payload   owned by the page's user (B+tree node, meta page, ...)
//! ```
//!
//! [`Page::seal`] stores the checksum just before a write; [`Page::verify`] checks checksum,
//! page id and kind just after a read and returns [`StorageError::Corrupt`] on any mismatch.
//! The checksum covers the page id and LSN, so stale or misdirected writes are caught too.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::mem::{offset_of, size_of};

use crate::error::{Result, StorageError};

/// Size of every page, in bytes.
pub const PAGE_SIZE: usize = 16384;

/// Size of the page header; the payload starts here.
pub const HEADER_SIZE: usize = 32;

/// A log sequence number: a byte position in the log.
pub type Lsn = u64;

/// The number of a page in the data file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageId(pub u64);

impl PageId {
    /// Byte offset of this page in the data file. Saturates: an id too large to have an
    /// offset (a damaged child id) lies past the end of any file, and reading it says so.
    pub fn offset(self) -> u64 {
        self.0.saturating_mul(PAGE_SIZE as u64)
    }
}

impl fmt::Display for PageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a page holds. Stored in the header so that a page of the wrong kind is detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    /// Allocated (or freed) but holding nothing yet.
    Free = 1,
    /// A database meta page: the checkpoint record (see `db/meta.rs`).
    Meta = 2,
    /// A B+tree inner node.
    BTreeInner = 3,
    /// A B+tree leaf.
    BTreeLeaf = 4,
}

impl PageKind {
    /// The kind stored as `value`, if valid.
    pub fn from_byte(value: u8) -> Option<PageKind> {
        Some(match value {
            1 => PageKind::Free,
            2 => PageKind::Meta,
            3 => PageKind::BTreeInner,
            4 => PageKind::BTreeLeaf,
            _ => return None,
        })
    }
}

/// The header as a struct: documents the layout above and fixes the field offsets (the page
/// bytes are always encoded explicitly, little-endian; this struct is never transmuted).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    pub checksum: u32,
    pub kind: u8,
    pub reserved: [u8; 3],
    pub page_id: u64,
    pub lsn: u64,
    pub reserved2: u64,
}

const _: () = assert!(size_of::<PageHeader>() == HEADER_SIZE);
const _: () = assert!(PAGE_SIZE <= u16::MAX as usize + 1, "slot offsets are u16");

const CHECKSUM_AT: usize = offset_of!(PageHeader, checksum);
const KIND_AT: usize = offset_of!(PageHeader, kind);
const PAGE_ID_AT: usize = offset_of!(PageHeader, page_id);
const LSN_AT: usize = offset_of!(PageHeader, lsn);
const _: () = assert!(CHECKSUM_AT == 0 && KIND_AT == 4 && PAGE_ID_AT == 8 && LSN_AT == 16);

/// One page image in memory (always exactly [`PAGE_SIZE`] bytes).
#[derive(Clone)]
pub struct Page {
    bytes: Box<[u8]>,
}

impl fmt::Debug for Page {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Page")
            .field("header", &self.header())
            .finish()
    }
}

impl Page {
    /// An all-zero image (invalid until [`Page::format`]ted or filled by a read).
    pub fn zeroed() -> Page {
        Page {
            bytes: vec![0; PAGE_SIZE].into_boxed_slice(),
        }
    }

    /// A page with no memory yet; [`Page::allocate`] gives it its bytes. Only the buffer pool
    /// holds such pages, in frames that have never held a page.
    pub fn unallocated() -> Page {
        Page {
            bytes: Box::default(),
        }
    }

    /// A zeroed page whose memory has been written, so that the process has it mapped: a
    /// later first write to it does not stop to have the memory allocated and cleared, as a
    /// first write to [`Page::zeroed`]'s fresh memory does (see
    /// `BufferPool::prepare_fresh_frames`).
    pub fn zeroed_and_mapped() -> Page {
        let mut bytes = vec![0u8; PAGE_SIZE];
        // A fill with a value the compiler cannot see: fresh memory from the allocator is
        // known to be zero, and a plain zero fill of it would be optimized away.
        bytes.fill(std::hint::black_box(0));
        Page {
            bytes: bytes.into_boxed_slice(),
        }
    }

    /// Whether the page has no memory yet ([`Page::unallocated`]).
    pub fn is_unallocated(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Gives an [`Page::unallocated`] page its (zeroed) bytes; no-op on any other page.
    pub fn allocate(&mut self) {
        if self.is_unallocated() {
            *self = Page::zeroed();
        }
    }

    /// Resets the page to an empty page `id` of `kind` with LSN 0.
    pub fn format(&mut self, id: PageId, kind: PageKind) {
        self.bytes.fill(0);
        self.bytes[KIND_AT] = kind as u8;
        self.put_u64(PAGE_ID_AT, id.0);
    }

    /// The decoded header.
    pub fn header(&self) -> PageHeader {
        PageHeader {
            checksum: u32::from_le_bytes(self.array(CHECKSUM_AT)),
            kind: self.bytes[KIND_AT],
            reserved: self.array(KIND_AT + 1),
            page_id: self.get_u64(PAGE_ID_AT),
            lsn: self.get_u64(LSN_AT),
            reserved2: self.get_u64(LSN_AT + 8),
        }
    }

    /// The page id recorded in the header.
    pub fn page_id(&self) -> PageId {
        PageId(self.get_u64(PAGE_ID_AT))
    }

    /// The page LSN: the log position of the last change.
    pub fn lsn(&self) -> Lsn {
        self.get_u64(LSN_AT)
    }

    /// Records that the change logged at `lsn` was applied. The page LSN never moves back.
    pub fn set_lsn(&mut self, lsn: Lsn) {
        let lsn = lsn.max(self.lsn());
        self.put_u64(LSN_AT, lsn);
    }

    /// Sets the page LSN to exactly `lsn`, even backwards: only for recovery, which rebuilds a
    /// page from an older full image in the log and then replays the changes after it.
    pub fn reset_lsn(&mut self, lsn: Lsn) {
        self.put_u64(LSN_AT, lsn);
    }

    /// The page kind, or `None` if the kind byte is invalid.
    pub fn kind(&self) -> Option<PageKind> {
        PageKind::from_byte(self.bytes[KIND_AT])
    }

    /// Changes the kind (e.g. a freed B+tree node becomes [`PageKind::Free`]).
    pub fn set_kind(&mut self, kind: PageKind) {
        self.bytes[KIND_AT] = kind as u8;
    }

    /// The whole page image, header included (what is written to disk after [`Page::seal`]).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.bytes[HEADER_SIZE..]
    }

    /// The bytes after the header, writable. The header is changed only through methods.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[HEADER_SIZE..]
    }

    /// Stores the checksum of the current contents; call just before writing the page.
    pub fn seal(&mut self) {
        self.store_checksum(self.checksum());
    }

    /// The checksum [`Page::seal`] would store: of every byte after the checksum field.
    pub fn checksum(&self) -> u32 {
        Self::checksum_of(&self.bytes)
    }

    /// Stores `checksum` (of these contents, from [`Page::checksum`]) in the checksum field,
    /// the one byte range the checksum does not cover: the rest of the page is unchanged.
    pub fn store_checksum(&mut self, checksum: u32) {
        self.bytes[CHECKSUM_AT..CHECKSUM_AT + 4].copy_from_slice(&checksum.to_le_bytes());
    }

    /// Checks a page image just read from the slot of page `expected`: checksum, page id,
    /// kind, and a B+tree node's structure. A page that fails is reported, never used.
    pub fn verify(&self, expected: PageId) -> Result<()> {
        let corrupt = |reason: String| StorageError::Corrupt {
            page_id: expected,
            reason,
        };
        let stored = u32::from_le_bytes(self.array(CHECKSUM_AT));
        let computed = Self::checksum_of(&self.bytes);
        if stored != computed {
            if self.bytes.iter().all(|&b| b == 0) {
                return Err(corrupt("all zero (never written)".into()));
            }
            return Err(corrupt(format!(
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            )));
        }
        if self.page_id() != expected {
            return Err(corrupt(format!(
                "holds page {} (misdirected write)",
                self.page_id()
            )));
        }
        if self.kind().is_none() {
            return Err(corrupt(format!("invalid kind {}", self.bytes[KIND_AT])));
        }
        crate::btree::check_node_structure(self)
            .map_err(|what| corrupt(format!("malformed node: {what}")))
    }

    /// The buffer a read fills; the caller must [`Page::verify`] afterwards.
    pub fn bytes_mut_for_read(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// Whether the checksum stored in `image`, a page of any size, covers it: how a file
    /// written with another page size is recognised (see the engine's meta pages).
    pub fn checksum_holds(image: &[u8]) -> bool {
        image.len() > CHECKSUM_AT + 4
            && u32::from_le_bytes([image[0], image[1], image[2], image[3]])
                == Self::checksum_of(image)
    }

    fn checksum_of(bytes: &[u8]) -> u32 {
        crc32c::crc32c(&bytes[CHECKSUM_AT + 4..])
    }

    fn array<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.bytes[at..at + N]);
        out
    }

    fn get_u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.array(at))
    }

    fn put_u64(&mut self, at: usize, value: u64) {
        self.bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }
}

/// Hashes a page id: the MurmurHash3 finalizer, so that every bit of the hash depends on
/// every bit of the id (the buffer pool's shard index comes from a different hash, so the ids
/// in one shard still spread over the map's buckets and control bytes). The standard
/// library's SipHash, made to resist collisions an attacker picks, costs several times as
/// much, and page ids are not chosen by clients.
#[derive(Default)]
pub struct PageIdHasher(u64);

impl Hasher for PageIdHasher {
    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.rotate_left(32) ^ n;
    }
}

/// A map keyed by page id, hashed with [`PageIdHasher`].
pub type PageIdMap<V> = HashMap<PageId, V, BuildHasherDefault<PageIdHasher>>;

/// A set of page ids, hashed with [`PageIdHasher`].
pub type PageIdSet = HashSet<PageId, BuildHasherDefault<PageIdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(id: u64) -> Page {
        let mut page = Page::zeroed();
        // Free: its payload is free-form (a node's would be checked as one).
        page.format(PageId(id), PageKind::Free);
        page.set_lsn(77);
        page.payload_mut()[..5].copy_from_slice(b"hello");
        page.seal();
        page
    }

    #[test]
    fn sealed_page_verifies_and_keeps_its_header() {
        let page = sealed(9);
        page.verify(PageId(9)).expect("verifies");
        assert_eq!(page.page_id(), PageId(9));
        assert_eq!(page.lsn(), 77);
        assert_eq!(page.kind(), Some(PageKind::Free));
        assert_eq!(&page.payload()[..5], b"hello");
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let page = sealed(3);
        for at in (0..PAGE_SIZE)
            .step_by(97)
            .chain([0, 4, 8, 16, PAGE_SIZE - 1])
        {
            let mut bad = page.clone();
            bad.bytes[at] ^= 0x40;
            let err = bad.verify(PageId(3)).expect_err("corruption detected");
            assert!(matches!(
                err,
                StorageError::Corrupt {
                    page_id: PageId(3),
                    ..
                }
            ));
        }
    }

    #[test]
    fn misdirected_and_zero_pages_are_rejected() {
        let err = sealed(3).verify(PageId(4)).expect_err("wrong place");
        assert!(err.to_string().contains("holds page 3"), "{err}");
        let err = Page::zeroed().verify(PageId(0)).expect_err("zero page");
        assert!(err.to_string().contains("never written"), "{err}");
    }

    #[test]
    fn lsn_never_moves_back() {
        let mut page = sealed(1);
        page.set_lsn(10);
        assert_eq!(page.lsn(), 77);
        page.set_lsn(100);
        assert_eq!(page.lsn(), 100);
    }
}
