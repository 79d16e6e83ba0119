//! Redo records of B+tree page changes (physiological logging).
//!
//! Every change a logged B+tree operation makes to a page is described by one [`PageOp`]:
//!
//! * `Put` and `Delete` name a leaf and a key; they are *logical within the page* (redo
//!   searches the leaf for the key), so they do not depend on slot positions;
//! * `Link` names an inner node, a child of it that split, the new right sibling and the
//!   separator between them: redo finds the child by the separator, as the split did;
//! * `Image` carries the used bytes of a whole node after any other structure modification
//!   (a split node's halves, merge, root change, a page created or freed); its redo
//!   overwrites the page without reading it, which also rebuilds a page whose last write was
//!   torn.
//!
//! # Encoding (little-endian)
//!
//! ```text
//! Put     1u8  page u64  key_len u16  value_len u16  key  value
//! Delete  2u8  page u64  key_len u16  key
//! Image   3u8  page u64  kind u8  front_len u16  back_len u16  front  back
//! Link    4u8  page u64  left u64  right u64  key_len u16  separator
//! ```
//!
//! An image's `front` is the start of the payload (node header and slot array) and `back` its
//! end (the cell area); the free space between them is zero after redo.

use std::ops::Range;

use crate::error::{Result, StorageError};
use crate::page::{Lsn, Page, PageId, PageIdMap, PageKind};

use super::node;

const PUT: u8 = 1;
const DELETE: u8 = 2;
const IMAGE: u8 = 3;
const LINK: u8 = 4;

/// One page change, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageOp<'a> {
    /// Insert or replace `key` in leaf `page`.
    Put {
        page: PageId,
        key: &'a [u8],
        value: &'a [u8],
    },
    /// Remove `key` from leaf `page`.
    Delete { page: PageId, key: &'a [u8] },
    /// In inner node `page`, child `left` split at `separator`, `right` taking the keys
    /// from there on (see `node::link_split`).
    Link {
        page: PageId,
        left: PageId,
        right: PageId,
        separator: &'a [u8],
    },
    /// Replace `page` with a node of `kind` whose payload starts with `front` and ends with
    /// `back`.
    Image {
        page: PageId,
        kind: PageKind,
        front: &'a [u8],
        back: &'a [u8],
    },
}

impl PageOp<'_> {
    /// The page the op changes.
    pub fn page(&self) -> PageId {
        match self {
            PageOp::Put { page, .. }
            | PageOp::Delete { page, .. }
            | PageOp::Link { page, .. }
            | PageOp::Image { page, .. } => *page,
        }
    }

    /// Whether the op rewrites the whole page (so its old contents need not be read).
    pub fn is_image(&self) -> bool {
        matches!(self, PageOp::Image { .. })
    }

    /// Applies the op to `page` (already known to need it). A `Put` that does not fit or a
    /// `Delete` of an absent key means the page is not in the state the log expects.
    pub fn apply(&self, page: &mut Page) -> Result<()> {
        let mismatch = |id: PageId, what: &str| StorageError::Corrupt {
            page_id: id,
            reason: format!("redo: {what}"),
        };
        match *self {
            PageOp::Put {
                page: id,
                key,
                value,
            } => {
                if page.kind() != Some(PageKind::BTreeLeaf) {
                    return Err(mismatch(id, "put into a page that is not a leaf"));
                }
                if key.len() + value.len() > super::MAX_ENTRY {
                    return Err(mismatch(id, "put of an entry larger than a node allows"));
                }
                if !node::upsert(page.payload_mut(), key, value) {
                    return Err(mismatch(id, "put does not fit in the leaf"));
                }
            }
            PageOp::Delete { page: id, key } => {
                if page.kind() != Some(PageKind::BTreeLeaf) {
                    return Err(mismatch(id, "delete from a page that is not a leaf"));
                }
                let p = page.payload_mut();
                match node::search(p, key) {
                    Ok(at) => node::remove_at(p, at),
                    Err(_) => return Err(mismatch(id, "delete of a key the leaf lacks")),
                }
            }
            PageOp::Link {
                page: id,
                left,
                right,
                separator,
            } => {
                if page.kind() != Some(PageKind::BTreeInner) {
                    return Err(mismatch(id, "link in a page that is not an inner node"));
                }
                if separator.len() > super::MAX_ENTRY {
                    return Err(mismatch(
                        id,
                        "link of a separator larger than a node allows",
                    ));
                }
                let p = page.payload_mut();
                if !node::fits(p, separator.len(), node::CHILD) {
                    return Err(mismatch(id, "link does not fit in the inner node"));
                }
                if !node::link_split(p, separator, left, right) {
                    return Err(mismatch(
                        id,
                        "link of a child the inner node does not hold there",
                    ));
                }
            }
            PageOp::Image {
                page: id,
                kind,
                front,
                back,
            } => {
                let lsn = page.lsn();
                page.format(id, kind);
                page.set_lsn(lsn);
                let p = page.payload_mut();
                let n = p.len();
                if front.len() + back.len() > n {
                    return Err(mismatch(id, "image larger than a page"));
                }
                p[..front.len()].copy_from_slice(front);
                p[n - back.len()..].copy_from_slice(back);
                super::check_node_structure(page)
                    .map_err(|what| mismatch(id, &format!("image of a malformed node: {what}")))?;
            }
        }
        Ok(())
    }
}

/// The page changes of one operation (or transaction), encoded, and the pages they touched.
/// A disabled `Redo` records nothing (unlogged use of a tree, e.g. in tests and benchmarks).
#[derive(Debug, Default)]
pub struct Redo {
    enabled: bool,
    bytes: Vec<u8>,
    touched: Vec<PageId>,
    /// For `touched[i]`: its page LSN when first touched, and whether its last op so far is
    /// an image (so that the engine can add full-page images without decoding `bytes`).
    touch_state: Vec<(Lsn, bool)>,
    /// Where each page is in `touched`, kept once more than [`Redo::SCANNED_PAGES`] are
    /// touched: a commit of thousands of pages would otherwise scan `touched` per op
    /// (quadratic); the few pages of a common commit are found faster by a scan.
    positions: PageIdMap<usize>,
    freed: Vec<PageId>,
}

impl Redo {
    /// A recording redo buffer.
    pub fn new() -> Redo {
        Redo {
            enabled: true,
            ..Redo::default()
        }
    }

    /// A recording redo buffer whose bytes start with `header` (a log record's tag, so
    /// that [`Redo::bytes`] is the record's payload without a copy).
    pub fn with_header(header: &[u8]) -> Redo {
        Redo {
            enabled: true,
            bytes: header.to_vec(),
            ..Redo::default()
        }
    }

    /// Makes room for `additional` more bytes of ops at once, so that a large record is not
    /// built by repeated reallocation (and copying) of the buffer.
    pub fn reserve(&mut self, additional: usize) {
        if self.enabled {
            self.bytes.reserve(additional);
        }
    }

    /// A redo buffer that records nothing.
    pub fn disabled() -> Redo {
        Redo::default()
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The header (see [`Redo::with_header`]) and the encoded ops so far.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The pages changed so far, each once, in first-touch order.
    pub fn touched(&self) -> &[PageId] {
        &self.touched
    }

    /// The touched pages whose LSN, when first touched, was at or below `lsn` and whose last
    /// op is not an image: those a full-page image must be added for, if `lsn` is where redo
    /// would start (see the engine's `full_page_images`).
    pub fn needing_image(&self, lsn: Lsn) -> Vec<PageId> {
        self.touched
            .iter()
            .zip(&self.touch_state)
            .filter(|(_, &(first_lsn, imaged))| first_lsn <= lsn && !imaged)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Pages the recorded operations emptied. They are not yet back in the pool's free list:
    /// the caller must [`BufferPool::free`](crate::BufferPool::free) each of them once the
    /// log record holding these ops is appended (and the pages stamped), so that no other
    /// tree reuses a page before the record that frees it.
    pub fn freed(&self) -> &[PageId] {
        &self.freed
    }

    /// Forgets everything recorded and starts over with `header`, keeping the buffers'
    /// memory (see [`Redo::with_header`]).
    pub fn restart(&mut self, header: &[u8]) {
        self.clear();
        if self.enabled {
            self.bytes.extend_from_slice(header);
        }
    }

    /// Bytes the op buffer can hold without growing.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Forgets everything recorded (the buffer is reused by the next transaction).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.touched.clear();
        self.touch_state.clear();
        self.positions.clear();
        self.freed.clear();
    }

    pub(crate) fn free_later(&mut self, id: PageId) {
        self.freed.push(id);
    }

    /// Touched pages up to which [`Redo::position`] scans `touched` instead of looking up
    /// `positions`.
    const SCANNED_PAGES: usize = 16;

    /// Notes that page `id`, whose LSN is `lsn`, is about to change.
    pub(crate) fn touch(&mut self, id: PageId, lsn: Lsn) {
        if !self.enabled || self.position(id).is_some() {
            return;
        }
        self.touched.push(id);
        self.touch_state.push((lsn, false));
        match self.touched.len() {
            n if n > Self::SCANNED_PAGES + 1 => {
                self.positions.insert(id, n - 1);
            }
            n if n == Self::SCANNED_PAGES + 1 => {
                let indexed = self.touched.iter().enumerate().map(|(i, &t)| (t, i));
                self.positions.extend(indexed);
            }
            _ => {}
        }
        debug_assert!(self.positions.is_empty() || self.positions.len() == self.touched.len());
    }

    /// Where page `id` is in `touched`, if it was touched.
    fn position(&self, id: PageId) -> Option<usize> {
        if self.touched.len() <= Self::SCANNED_PAGES {
            self.touched.iter().position(|&t| t == id)
        } else {
            self.positions.get(&id).copied()
        }
    }

    /// Records whether the last op on page `id` is an image.
    fn note_op(&mut self, id: PageId, image: bool) {
        if let Some(i) = self.position(id) {
            self.touch_state[i].1 = image;
        }
    }

    pub(crate) fn put(&mut self, id: PageId, key: &[u8], value: &[u8]) {
        if !self.enabled {
            return;
        }
        self.note_op(id, false);
        self.bytes.push(PUT);
        self.bytes.extend_from_slice(&id.0.to_le_bytes());
        self.push_len(key.len());
        self.push_len(value.len());
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
    }

    pub(crate) fn delete(&mut self, id: PageId, key: &[u8]) {
        if !self.enabled {
            return;
        }
        self.note_op(id, false);
        self.bytes.push(DELETE);
        self.bytes.extend_from_slice(&id.0.to_le_bytes());
        self.push_len(key.len());
        self.bytes.extend_from_slice(key);
    }

    /// Records [`node::link_split`]`(separator, left, right)` in inner node `id`.
    pub(crate) fn link(&mut self, id: PageId, separator: &[u8], left: PageId, right: PageId) {
        if !self.enabled {
            return;
        }
        self.note_op(id, false);
        self.bytes.push(LINK);
        self.bytes.extend_from_slice(&id.0.to_le_bytes());
        self.bytes.extend_from_slice(&left.0.to_le_bytes());
        self.bytes.extend_from_slice(&right.0.to_le_bytes());
        self.push_len(separator.len());
        self.bytes.extend_from_slice(separator);
    }

    /// Records the current contents of `page` (a node or a freed page). Also used by the
    /// engine for full-page images: the first change of a page after a checkpoint ends with
    /// an image of the page, so that redo never has to read a page torn since then.
    pub fn image(&mut self, page: &Page) {
        if !self.enabled {
            return;
        }
        self.note_op(page.page_id(), true);
        let kind = page.kind().unwrap_or(PageKind::Free);
        let p = page.payload();
        let (front, back) = match kind {
            PageKind::BTreeLeaf | PageKind::BTreeInner => node::used_ranges(p),
            _ => (0, p.len()),
        };
        self.bytes.push(IMAGE);
        self.bytes
            .extend_from_slice(&page.page_id().0.to_le_bytes());
        self.bytes.push(kind as u8);
        self.push_len(front);
        self.push_len(p.len() - back);
        self.bytes.extend_from_slice(&p[..front]);
        self.bytes.extend_from_slice(&p[back..]);
    }

    fn push_len(&mut self, len: usize) {
        debug_assert!(len <= usize::from(u16::MAX));
        self.bytes.extend_from_slice(&(len as u16).to_le_bytes());
    }
}

/// Decodes the ops in `bytes` (as written by [`Redo`]); an error names what is malformed.
pub fn decode(bytes: &[u8]) -> std::result::Result<Vec<PageOp<'_>>, String> {
    let mut ops = Vec::new();
    let mut cursor = Cursor { bytes, at: 0 };
    while cursor.at < bytes.len() {
        ops.push(decode_one(&mut cursor)?);
    }
    Ok(ops)
}

/// [`decode`], with the bytes each op was decoded from: any of them, concatenated in their
/// order, decode to those ops again.
pub fn decode_spans(bytes: &[u8]) -> std::result::Result<Vec<(PageOp<'_>, Range<usize>)>, String> {
    let mut ops = Vec::new();
    let mut cursor = Cursor { bytes, at: 0 };
    while cursor.at < bytes.len() {
        let start = cursor.at;
        let op = decode_one(&mut cursor)?;
        ops.push((op, start..cursor.at));
    }
    Ok(ops)
}

/// The op at the cursor.
fn decode_one<'a>(cursor: &mut Cursor<'a>) -> std::result::Result<PageOp<'a>, String> {
    let tag = cursor.u8()?;
    let page = PageId(cursor.u64()?);
    Ok(match tag {
        PUT => {
            let (klen, vlen) = (cursor.u16()?, cursor.u16()?);
            PageOp::Put {
                page,
                key: cursor.take(klen)?,
                value: cursor.take(vlen)?,
            }
        }
        DELETE => {
            let klen = cursor.u16()?;
            PageOp::Delete {
                page,
                key: cursor.take(klen)?,
            }
        }
        LINK => {
            let (left, right) = (PageId(cursor.u64()?), PageId(cursor.u64()?));
            let klen = cursor.u16()?;
            PageOp::Link {
                page,
                left,
                right,
                separator: cursor.take(klen)?,
            }
        }
        IMAGE => {
            let kind = cursor.u8()?;
            let kind = PageKind::from_byte(kind)
                .ok_or_else(|| format!("image of page {page} has bad kind {kind}"))?;
            let (flen, blen) = (cursor.u16()?, cursor.u16()?);
            PageOp::Image {
                page,
                kind,
                front: cursor.take(flen)?,
                back: cursor.take(blen)?,
            }
        }
        other => Err(format!("unknown page op {other} at byte {}", cursor.at - 9))?,
    })
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let slice = self
            .bytes
            .get(self.at..self.at + n)
            .ok_or_else(|| format!("page op truncated at byte {}", self.at))?;
        self.at += n;
        Ok(slice)
    }

    fn u8(&mut self) -> std::result::Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> std::result::Result<usize, String> {
        let b = self.take(2)?;
        Ok(usize::from(u16::from_le_bytes([b[0], b[1]])))
    }

    fn u64(&mut self) -> std::result::Result<u64, String> {
        let mut a = [0; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An inner node over children 10, 20, 30 (upper), split at "g" and "p".
    fn inner(id: PageId) -> Page {
        let mut page = Page::zeroed();
        page.format(id, PageKind::BTreeInner);
        let entries = vec![
            (b"g".to_vec(), 10u64.to_le_bytes().to_vec()),
            (b"p".to_vec(), 20u64.to_le_bytes().to_vec()),
        ];
        node::build(page.payload_mut(), PageId(30), &entries);
        page
    }

    /// Recovery copies one page's ops out of a record by their spans (the engine's
    /// `pending_redo.rs`): those bytes must decode to exactly those ops.
    #[test]
    fn the_spans_of_one_pages_ops_decode_to_those_ops() {
        let mut redo = Redo::new();
        let (a, b) = (PageId(7), PageId(9));
        redo.put(a, b"k1", b"value one");
        redo.link(b, b"sep", PageId(11), PageId(12));
        redo.delete(a, b"k0");
        redo.image(&inner(b));
        redo.put(a, b"k2", &[7; 300]);
        let spans = decode_spans(redo.bytes()).expect("decodes");
        assert_eq!(spans.len(), 5);
        assert_eq!(spans.last().map(|(_, s)| s.end), Some(redo.bytes().len()));
        for page in [a, b] {
            let mine: Vec<_> = spans.iter().filter(|(op, _)| op.page() == page).collect();
            let copied: Vec<u8> = mine
                .iter()
                .flat_map(|(_, span)| redo.bytes()[span.clone()].iter().copied())
                .collect();
            let again = decode(&copied).expect("the copy decodes");
            let expected: Vec<_> = mine.iter().map(|(op, _)| op.clone()).collect();
            assert_eq!(again, expected, "page {page}");
        }
    }

    /// Past [`Redo::SCANNED_PAGES`] pages are found through the map: each still once in
    /// `touched`, in first-touch order, with its first LSN and whether its last op is an image.
    #[test]
    fn many_touched_pages_are_each_kept_once_with_their_state() {
        let mut redo = Redo::new();
        let pages: Vec<PageId> = (0..3 * Redo::SCANNED_PAGES as u64)
            .map(|i| PageId(100 + i))
            .collect();
        for round in 0..3u64 {
            for (i, &id) in pages.iter().enumerate() {
                redo.touch(id, round * 1_000 + i as u64);
                if i % 2 == 1 && round == 2 {
                    redo.image(&inner(id));
                } else {
                    redo.put(id, b"k", b"v");
                }
            }
        }
        assert_eq!(redo.touched(), &pages[..]);
        let even: Vec<PageId> = pages.iter().copied().step_by(2).collect();
        assert_eq!(
            redo.needing_image(u64::MAX),
            even,
            "the odd pages' last op is an image"
        );
        let early: Vec<PageId> = even.iter().copied().take(5).collect();
        assert_eq!(
            redo.needing_image(9),
            early,
            "first LSNs are the first round's"
        );
        redo.clear();
        redo.touch(PageId(1), 0);
        assert_eq!(redo.touched(), &[PageId(1)]);
    }

    #[test]
    fn a_link_replayed_on_the_old_node_gives_the_node_the_split_left() {
        let id = PageId(5);
        for (separator, left) in [(&b"c"[..], 10), (b"k", 20), (b"z", 30)] {
            let (left, right) = (PageId(left), PageId(99));
            let mut forward = inner(id);
            assert!(node::link_split(
                forward.payload_mut(),
                separator,
                left,
                right
            ));
            let mut redo = Redo::new();
            redo.link(id, separator, left, right);

            let ops = decode(redo.bytes()).expect("decode");
            assert_eq!(
                ops,
                vec![PageOp::Link {
                    page: id,
                    left,
                    right,
                    separator
                }]
            );
            let mut replayed = inner(id);
            ops[0].apply(&mut replayed).expect("apply");
            assert_eq!(replayed.payload(), forward.payload());
            // The separator's range now leads to `right`, the keys below it to `left`.
            let p = replayed.payload();
            assert_eq!(node::child(p, node::child_index(p, separator)), right);
            let below = &separator[..0];
            assert_eq!(node::child(p, node::child_index(p, below)).0, 10);
        }
    }

    #[test]
    fn a_link_of_a_child_that_is_not_there_is_refused() {
        let id = PageId(5);
        let op = PageOp::Link {
            page: id,
            left: PageId(20),
            right: PageId(99),
            separator: b"c",
        };
        let mut page = inner(id);
        let before = page.payload().to_vec();
        assert!(op.apply(&mut page).is_err(), "child 10 holds \"c\", not 20");
        assert_eq!(page.payload(), &before[..]);
    }

    #[test]
    fn an_image_of_a_malformed_node_is_refused() {
        let id = PageId(5);
        let mut source = inner(id);
        let mut redo = Redo::new();
        redo.image(&source);
        let ops = decode(redo.bytes()).expect("decode");
        let mut page = Page::zeroed();
        ops[0]
            .apply(&mut page)
            .expect("a whole node's image applies");
        assert_eq!(page.payload(), source.payload());
        // Slot 0's key length (payload bytes 18..20) beyond the page: checksummed in the
        // log as any record is, but not a node.
        source.payload_mut()[18..20].copy_from_slice(&9000u16.to_le_bytes());
        let mut redo = Redo::new();
        redo.image(&source);
        let ops = decode(redo.bytes()).expect("decode");
        let err = ops[0].apply(&mut Page::zeroed()).expect_err("refused");
        assert!(err.to_string().contains("malformed node"), "{err}");
    }

    /// A leaf (page 5) of ten keys.
    fn leaf() -> Page {
        let mut page = Page::zeroed();
        page.format(PageId(5), PageKind::BTreeLeaf);
        let entries: Vec<(Vec<u8>, Vec<u8>)> =
            (0u8..10).map(|i| (vec![b'k', i], vec![i; 30])).collect();
        node::build(page.payload_mut(), PageId(0), &entries);
        page
    }

    proptest::proptest! {
        /// Redo of a damaged log record is refused or leaves a node: every op that applies
        /// leaves the page passing `check_node_structure`, and none panics. A record passes its own
        /// checksum before redo decodes it, so this is what a bug's record or a crafted log
        /// gets.
        #[test]
        fn redo_of_damaged_ops_leaves_a_node_or_refuses(
            keys in proptest::collection::vec((0u8..20, 0usize..60), 1..8),
            damage in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 0..4),
        ) {
            let mut redo = Redo::new();
            let mut source = leaf();
            for &(k, len) in &keys {
                let key = [b'k', k];
                if len % 5 == 0 {
                    redo.delete(PageId(5), &key);
                } else {
                    redo.put(PageId(5), &key, &vec![k; len]);
                    node::upsert(source.payload_mut(), &key, &vec![k; len]);
                }
            }
            redo.image(&source);
            let mut bytes = redo.bytes().to_vec();
            for (at, byte) in damage {
                let n = bytes.len();
                bytes[at % n] = byte;
            }
            let Ok(ops) = decode(&bytes) else { return Ok(()) };
            let mut page = leaf();
            for op in ops {
                if op.apply(&mut page).is_err() {
                    break;
                }
                proptest::prop_assert_eq!(super::super::check_node_structure(&page), Ok(()), "after {:?}", op);
            }
        }
    }
}
