//! The slotted page of a B+tree node, as functions over the page payload.
//!
//! # Payload layout (offsets from the end of the page header, integers little-endian)
//!
//! ```text
//!  0  u16  count       number of slots
//!  2  u16  cell_start  start of the cell area; cells fill [cell_start, PAYLOAD)
//!  4  u16  garbage     bytes of dead cells inside the cell area (reclaimed by compaction)
//!  6  u16  prefix_len  every key of the node starts with the same `prefix_len` bytes
//!  8  u64  upper       inner node: the rightmost child; leaf: 0
//! 16       slots       count × 10 bytes: (cell offset u16, key length u16, value length u16,
//!                      head u32 big-endian), sorted by key in memcmp order
//!          free space
//!          cells       key bytes followed by value bytes; grow down from the page end
//! ```
//!
//! A slot's *head* is the 4 bytes of its key after the common prefix, zero-padded, read as a
//! big-endian integer (LeanStore's technique). A binary search compares heads, which lie
//! together in the slot array, and reads a key's cell only when heads are equal: about one
//! cache miss per search in a leaf instead of one per step. Heads order like keys: where two
//! heads differ, so do the keys within those 4 bytes, in the same direction (zero padding
//! sorts a shorter key first, as memcmp order does). `prefix_len` only ever shrinks while
//! the node lives (an insert that does not share it recomputes every head); a removal keeps
//! it, since the remaining keys still share it.
//!
//! A leaf's value is the user's value. An inner node's value is a child page id (u64): the
//! child of slot `i` holds the keys `k` with `key[i-1] <= k < key[i]`, and `upper` holds the
//! keys `>= key[count-1]` (so an inner node with `count` slots has `count + 1` children).

use super::Entry;
use crate::page::{PageId, HEADER_SIZE, PAGE_SIZE};

/// Bytes available to a node.
pub const PAYLOAD: usize = PAGE_SIZE - HEADER_SIZE;
/// Size of the node header at the start of the payload.
pub const NODE_HEADER: usize = 16;
/// Size of one slot.
pub const SLOT: usize = 10;
/// Bytes of a key compared through its slot's head.
const HEAD: usize = 4;
/// Size of an inner node's value (a child page id).
pub const CHILD: usize = 8;

#[inline]
fn get_u16(p: &[u8], at: usize) -> usize {
    usize::from(u16::from_le_bytes([p[at], p[at + 1]]))
}

fn put_u16(p: &mut [u8], at: usize, value: usize) {
    debug_assert!(value <= usize::from(u16::MAX));
    p[at..at + 2].copy_from_slice(&(value as u16).to_le_bytes());
}

fn get_u64(p: &[u8], at: usize) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&p[at..at + 8]);
    u64::from_le_bytes(bytes)
}

/// Makes `p` an empty node.
pub fn init(p: &mut [u8], upper: PageId) {
    p.fill(0);
    put_u16(p, 2, PAYLOAD);
    set_upper(p, upper);
}

pub fn count(p: &[u8]) -> usize {
    get_u16(p, 0)
}

fn cell_start(p: &[u8]) -> usize {
    get_u16(p, 2)
}

fn garbage(p: &[u8]) -> usize {
    get_u16(p, 4)
}

pub fn upper(p: &[u8]) -> PageId {
    PageId(get_u64(p, 8))
}

fn set_upper(p: &mut [u8], upper: PageId) {
    p[8..16].copy_from_slice(&upper.0.to_le_bytes());
}

fn prefix_len(p: &[u8]) -> usize {
    get_u16(p, 6)
}

#[inline]
fn head_of(suffix: &[u8]) -> u32 {
    let mut bytes = [0u8; HEAD];
    let n = suffix.len().min(HEAD);
    bytes[..n].copy_from_slice(&suffix[..n]);
    u32::from_be_bytes(bytes)
}

#[inline]
fn slot_head(p: &[u8], i: usize) -> u32 {
    let at = NODE_HEADER + i * SLOT + 6;
    u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}

fn set_slot_head(p: &mut [u8], i: usize, head: u32) {
    let at = NODE_HEADER + i * SLOT + 6;
    p[at..at + HEAD].copy_from_slice(&head.to_be_bytes());
}

/// Makes `prefix_len` a prefix `key` shares with every key of the node (recomputing every
/// head if it has to shrink). Returns the prefix length.
fn adopt_prefix(p: &mut [u8], key: &[u8]) -> usize {
    let n = count(p);
    let old = prefix_len(p);
    let shared = if n == 0 {
        key.len().min(usize::from(u16::MAX))
    } else {
        let first = self::key(p, 0);
        old.min(common_prefix(&first[..old], key))
    };
    if shared != old {
        put_u16(p, 6, shared);
        for i in 0..n {
            let head = head_of(&self::key(p, i)[shared..]);
            set_slot_head(p, i, head);
        }
    }
    shared
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[inline]
fn slot(p: &[u8], i: usize) -> (usize, usize, usize) {
    let at = NODE_HEADER + i * SLOT;
    (get_u16(p, at), get_u16(p, at + 2), get_u16(p, at + 4))
}

fn set_slot(p: &mut [u8], i: usize, (offset, key_len, value_len): (usize, usize, usize)) {
    let at = NODE_HEADER + i * SLOT;
    put_u16(p, at, offset);
    put_u16(p, at + 2, key_len);
    put_u16(p, at + 4, value_len);
}

pub fn key(p: &[u8], i: usize) -> &[u8] {
    let (offset, key_len, _) = slot(p, i);
    &p[offset..offset + key_len]
}

pub fn value(p: &[u8], i: usize) -> &[u8] {
    let (offset, key_len, value_len) = slot(p, i);
    &p[offset + key_len..offset + key_len + value_len]
}

/// Inner node: the child at position `i` (`i == count` is `upper`).
pub fn child(p: &[u8], i: usize) -> PageId {
    if i == count(p) {
        upper(p)
    } else {
        PageId(get_u64(value(p, i), 0))
    }
}

/// Inner node: makes position `i` (`i == count` is `upper`) point to `child`.
pub fn set_child(p: &mut [u8], i: usize, child: PageId) {
    if i == count(p) {
        set_upper(p, child);
    } else {
        let (offset, key_len, _) = slot(p, i);
        let at = offset + key_len;
        p[at..at + CHILD].copy_from_slice(&child.0.to_le_bytes());
    }
}

/// `Ok(i)` if slot `i` holds `key`, else `Err(i)` with the slot `key` would be inserted at.
pub fn search(p: &[u8], key: &[u8]) -> Result<usize, usize> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let n = count(p);
    if n == 0 {
        return Err(0);
    }
    let plen = prefix_len(p);
    if plen > 0 {
        // Outside the common prefix, `key` sorts before or after every key of the node.
        let prefix = &self::key(p, 0)[..plen];
        match key[..plen.min(key.len())].cmp(prefix) {
            Less => return Err(0),
            Greater => return Err(n),
            Equal if key.len() < plen => return Err(0),
            Equal => {}
        }
    }
    let head = head_of(&key[plen..]);
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let order = match slot_head(p, mid).cmp(&head) {
            Equal => self::key(p, mid)[plen..].cmp(&key[plen..]),
            unequal => unequal,
        };
        match order {
            Less => lo = mid + 1,
            Greater => hi = mid,
            Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// The slot holding exactly `key`, if any: [`search`] for a point read. It needs no
/// insertion position, so it skips the check of `key` against the common prefix (which reads
/// the first key's cell, a cache miss of its own) and compares the prefix only with the key
/// whose suffix matched, in the cell it reads anyway. Among keys that share the prefix,
/// suffix order is key order, so a key of the node is found.
pub fn find(p: &[u8], key: &[u8]) -> Option<usize> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let plen = prefix_len(p);
    let suffix = key.get(plen..)?;
    let head = head_of(suffix);
    let (mut lo, mut hi) = (0, count(p));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let order = match slot_head(p, mid).cmp(&head) {
            Equal => self::key(p, mid)[plen..].cmp(suffix),
            unequal => unequal,
        };
        match order {
            Less => lo = mid + 1,
            Greater => hi = mid,
            Equal => return (self::key(p, mid)[..plen] == key[..plen]).then_some(mid),
        }
    }
    None
}

/// The first slot whose key is `>= key` (`strict`: `> key`).
pub fn lower_bound(p: &[u8], key: &[u8], strict: bool) -> usize {
    match search(p, key) {
        Ok(i) if strict => i + 1,
        Ok(i) | Err(i) => i,
    }
}

/// [`lower_bound`] for a key that mostly lies outside the node's keys, as a scan's bounds and
/// fences do for the leaves between its first and its last: the ends are compared first,
/// and the slots searched only when the key falls among them.
pub fn lower_bound_from_ends(p: &[u8], key: &[u8], strict: bool) -> usize {
    let n = count(p);
    let at_or_past = |i: usize| match self::key(p, i).cmp(key) {
        std::cmp::Ordering::Equal => !strict,
        order => order.is_gt(),
    };
    if n == 0 || at_or_past(0) {
        0
    } else if !at_or_past(n - 1) {
        n
    } else {
        lower_bound(p, key, strict)
    }
}

/// Inner node: the position of the child whose key range contains `key`.
pub fn child_index(p: &[u8], key: &[u8]) -> usize {
    lower_bound(p, key, true)
}

/// Inner node: child `left`, whose key range holds `separator`, has split, and `right` now
/// takes its keys from `separator` on. Points `left`'s position to `right` and inserts
/// `(separator, left)` before it. `false` (nothing changed) if the child there is not `left`.
/// The caller has checked [`fits`]. The change and its redo (`PageOp::Link`) are this one
/// function, so they cannot disagree.
pub fn link_split(p: &mut [u8], separator: &[u8], left: PageId, right: PageId) -> bool {
    let at = child_index(p, separator);
    if child(p, at) != left {
        return false;
    }
    set_child(p, at, right);
    insert_at(p, at, separator, &left.0.to_le_bytes());
    true
}

/// Bytes a (key, value) pair takes in a node, slot included.
pub fn entry_size(key_len: usize, value_len: usize) -> usize {
    SLOT + key_len + value_len
}

/// Bytes in use: header, slots and live cells.
pub fn used(p: &[u8]) -> usize {
    NODE_HEADER + count(p) * SLOT + (PAYLOAD - cell_start(p) - garbage(p))
}

/// Whether a pair of these sizes fits (possibly after compaction).
pub fn fits(p: &[u8], key_len: usize, value_len: usize) -> bool {
    used(p) + entry_size(key_len, value_len) <= PAYLOAD
}

/// Inserts a pair at slot `i`. The caller has checked [`fits`].
pub fn insert_at(p: &mut [u8], i: usize, key: &[u8], value: &[u8]) {
    let n = count(p);
    let need = key.len() + value.len();
    if cell_start(p) < NODE_HEADER + (n + 1) * SLOT + need {
        compact(p);
    }
    let plen = adopt_prefix(p, key);
    let offset = cell_start(p) - need;
    p[offset..offset + key.len()].copy_from_slice(key);
    p[offset + key.len()..offset + need].copy_from_slice(value);
    put_u16(p, 2, offset);
    let from = NODE_HEADER + i * SLOT;
    p.copy_within(from..NODE_HEADER + n * SLOT, from + SLOT);
    set_slot(p, i, (offset, key.len(), value.len()));
    set_slot_head(p, i, head_of(&key[plen..]));
    put_u16(p, 0, n + 1);
}

/// Removes slot `i`; its cell becomes garbage.
pub fn remove_at(p: &mut [u8], i: usize) {
    let n = count(p);
    let (_, key_len, value_len) = slot(p, i);
    let from = NODE_HEADER + (i + 1) * SLOT;
    p.copy_within(from..NODE_HEADER + n * SLOT, from - SLOT);
    put_u16(p, 0, n - 1);
    let garbage = garbage(p) + key_len + value_len;
    put_u16(p, 4, garbage);
    if n == 1 {
        put_u16(p, 2, PAYLOAD);
        put_u16(p, 4, 0);
    }
}

/// Every pair, in key order.
pub fn entries(p: &[u8]) -> Vec<Entry> {
    (0..count(p))
        .map(|i| (key(p, i).to_vec(), value(p, i).to_vec()))
        .collect()
}

/// Rewrites `p` to hold exactly `entries` (sorted, known to fit) and `upper`.
pub fn build(p: &mut [u8], upper: PageId, entries: &[Entry]) {
    init(p, upper);
    for (i, (key, value)) in entries.iter().enumerate() {
        insert_at(p, i, key, value);
    }
}

/// Moves the live cells together at the end of the payload. Slots, heads and the prefix stay
/// as they are; only cell offsets change. Works on a copy on the stack rather than through
/// [`entries`], which would allocate two vectors per entry on every compaction (a hot path
/// when large rows are rewritten).
fn compact(p: &mut [u8]) {
    let mut old = [0u8; PAYLOAD];
    old.copy_from_slice(&p[..PAYLOAD]);
    let n = count(p);
    let mut start = PAYLOAD;
    for i in 0..n {
        let (offset, key_len, value_len) = slot(&old, i);
        let len = key_len + value_len;
        start -= len;
        p[start..start + len].copy_from_slice(&old[offset..offset + len]);
        put_u16(p, NODE_HEADER + i * SLOT, start);
    }
    // Free space is kept zeroed, so that dead cells do not linger on disk.
    p[NODE_HEADER + n * SLOT..start].fill(0);
    put_u16(p, 2, start);
    put_u16(p, 4, 0);
}

/// Replaces the value of slot `at` inside its own cell, if the new value is no longer than
/// the old one (the usual case for an updated row: a rewritten counter, a value of the same
/// size). The cell's unused tail becomes garbage. `false` (and `p` unchanged) otherwise.
fn overwrite_value(p: &mut [u8], at: usize, value: &[u8]) -> bool {
    let (offset, key_len, old_len) = slot(p, at);
    if value.len() > old_len {
        return false;
    }
    let start = offset + key_len;
    p[start..start + value.len()].copy_from_slice(value);
    p[start + value.len()..start + old_len].fill(0);
    set_slot(p, at, (offset, key_len, value.len()));
    put_u16(p, 4, garbage(p) + old_len - value.len());
    true
}

/// Leaf: inserts `key` or replaces its value; `false` (and `p` unchanged) if it does not fit.
pub fn upsert(p: &mut [u8], key: &[u8], value: &[u8]) -> bool {
    let slot = search(p, key);
    if let Ok(at) = slot {
        if overwrite_value(p, at, value) {
            return true;
        }
    }
    let freed = match slot {
        Ok(at) => entry_size(self::key(p, at).len(), self::value(p, at).len()),
        Err(_) => 0,
    };
    if used(p) - freed + entry_size(key.len(), value.len()) > PAYLOAD {
        return false;
    }
    let at = match slot {
        Ok(at) => {
            remove_at(p, at);
            at
        }
        Err(at) => at,
    };
    insert_at(p, at, key, value);
    true
}

/// What is wrong with node `p` (an inner node if `inner`), if anything: the structure every
/// function here trusts. A page read from disk passes its checksum before it is trusted, but
/// a page can be well checksummed and still malformed (a bug's write, a crafted file); this
/// check turns such a page into a corrupt-page error instead of a panic on a bad offset or a
/// wrong answer from a search. One pass over the slots, once per read from disk (~10 ns a
/// slot). Not checked: that cells do not overlap (a bitmap of the cell area cost half as
/// much again): overlapping cells are bytes a malformed page made up, as any of its values
/// could be, and no function here reads or writes outside a cell's own bounds.
pub fn check(p: &[u8], inner: bool) -> Result<(), String> {
    let (n, start, plen) = (count(p), cell_start(p), prefix_len(p));
    if NODE_HEADER + n * SLOT > start || start > PAYLOAD {
        return Err(format!(
            "{n} slots and a cell area from byte {start} do not fit the node"
        ));
    }
    let mut live = 0;
    let mut previous: &[u8] = &[];
    for i in 0..n {
        let (offset, key_len, value_len) = slot(p, i);
        let end = offset + key_len + value_len;
        if offset < start || end > PAYLOAD {
            return Err(format!(
                "slot {i}'s cell [{offset}, {end}) lies outside the cell area [{start}, {PAYLOAD})"
            ));
        }
        // A separator is a leaf's key, so an inner entry may take MAX_ENTRY plus its child.
        let oversized = if inner {
            key_len > super::MAX_ENTRY || value_len != CHILD
        } else {
            key_len + value_len > super::MAX_ENTRY
        };
        if oversized {
            return Err(format!(
                "slot {i} holds a {key_len}-byte key and a {value_len}-byte value"
            ));
        }
        let key = &p[offset..offset + key_len];
        if key.len() < plen || (i > 0 && plen > 0 && key[..plen] != previous[..plen]) {
            return Err(format!(
                "slot {i}'s key lacks the node's {plen}-byte prefix"
            ));
        }
        let head = slot_head(p, i);
        if head != head_of(&key[plen..]) {
            return Err(format!("slot {i}'s head does not match its key"));
        }
        // Heads order like keys, so only equal heads need the keys compared.
        let above = i == 0
            || match slot_head(p, i - 1).cmp(&head) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Equal => previous[plen..] < key[plen..],
                std::cmp::Ordering::Greater => false,
            };
        if !above {
            return Err(format!("slot {i}'s key is not above slot {}'s", i - 1));
        }
        live += key_len + value_len;
        previous = key;
    }
    if live + garbage(p) != PAYLOAD - start {
        return Err(format!(
            "live cells ({live} bytes) and garbage ({} bytes) do not fill the cell area ({} bytes)",
            garbage(p),
            PAYLOAD - start
        ));
    }
    Ok(())
}

/// The bytes of the payload that matter: `[0, front)` (header and slots) and `[back, end)`
/// (the cell area). Everything between them is free space.
pub fn used_ranges(p: &[u8]) -> (usize, usize) {
    (NODE_HEADER + count(p) * SLOT, cell_start(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Keys over a tiny alphabet with shared prefixes, zero bytes and prefixes of each other:
    /// the cases where heads tie, padding matters or the common prefix shrinks.
    fn keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
        let key = (
            prop::sample::select(vec![vec![], vec![7u8, 7, 7], vec![7u8, 7, 7, 7, 7, 7]]),
            prop::collection::vec(prop::sample::select(vec![0u8, 1, 7, 255]), 0..7),
        )
            .prop_map(|(mut prefix, tail)| {
                prefix.extend(tail);
                prefix
            });
        prop::collection::vec(key, 1..60)
    }

    proptest! {
        #[test]
        fn search_agrees_with_a_sorted_map(inserts in keys(), probes in keys(), removals in 0usize..20) {
            let mut page = vec![0u8; PAYLOAD];
            init(&mut page, PageId(0));
            let mut model = BTreeMap::new();
            for key in inserts {
                if let Err(at) = search(&page, &key) {
                    insert_at(&mut page, at, &key, b"v");
                    model.insert(key, ());
                }
            }
            for _ in 0..removals.min(model.len()) {
                let first = model.keys().next().cloned().unwrap_or_default();
                let at = search(&page, &first);
                prop_assert_eq!(at, Ok(0));
                remove_at(&mut page, 0);
                model.remove(&first);
            }
            let sorted: Vec<&Vec<u8>> = model.keys().collect();
            for (i, key) in sorted.iter().enumerate() {
                prop_assert_eq!(search(&page, key), Ok(i));
            }
            for probe in probes {
                prop_assert_eq!(search(&page, &probe), sorted.binary_search(&&probe));
                prop_assert_eq!(find(&page, &probe), sorted.binary_search(&&probe).ok());
                for strict in [false, true] {
                    prop_assert_eq!(
                        lower_bound_from_ends(&page, &probe, strict),
                        lower_bound(&page, &probe, strict)
                    );
                }
            }
            for (i, key) in sorted.iter().enumerate() {
                prop_assert_eq!(find(&page, key), Some(i));
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Upsert(u8, usize),
        Remove(u8),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            3 => (0u8..24, 0usize..700).prop_map(|(k, len)| Op::Upsert(k, len)),
            1 => (0u8..24).prop_map(Op::Remove),
        ];
        prop::collection::vec(op, 1..300)
    }

    /// Live bytes as `used` must count them: header, slots, and each entry's key and value.
    fn live_bytes(model: &BTreeMap<Vec<u8>, Vec<u8>>) -> usize {
        NODE_HEADER
            + model
                .iter()
                .map(|(k, v)| entry_size(k.len(), v.len()))
                .sum::<usize>()
    }

    proptest! {
        // Rewrites in place (shorter or equal values), removals, compactions and refusals
        // keep every entry readable and the space accounting exact.
        #[test]
        fn upserts_agree_with_a_map(ops in ops()) {
            let mut page = vec![0u8; PAYLOAD];
            init(&mut page, PageId(0));
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Upsert(k, len) => {
                        let key = vec![b'k', k];
                        let value = vec![(n % 251) as u8; len];
                        let before = page.clone();
                        if upsert(&mut page, &key, &value) {
                            model.insert(key, value);
                        } else {
                            prop_assert_eq!(&page, &before, "a refused upsert changed the page");
                            let mut grown = model.clone();
                            grown.insert(key, value);
                            prop_assert!(live_bytes(&grown) > PAYLOAD, "a fitting upsert was refused");
                        }
                    }
                    Op::Remove(k) => {
                        let key = vec![b'k', k];
                        if let Ok(at) = search(&page, &key) {
                            remove_at(&mut page, at);
                            model.remove(&key);
                        }
                    }
                }
                prop_assert_eq!(count(&page), model.len());
                prop_assert_eq!(used(&page), live_bytes(&model));
                prop_assert_eq!(check(&page, false), Ok(()));
                for (i, (key, value)) in model.iter().enumerate() {
                    prop_assert_eq!(find(&page, key), Some(i));
                    prop_assert_eq!(self::value(&page, i), value.as_slice());
                }
            }
        }
    }

    /// A leaf of `keys` (each with a value of its index's length, up to 40 bytes).
    fn leaf_of(keys: &[Vec<u8>]) -> Vec<u8> {
        let mut page = vec![0u8; PAYLOAD];
        init(&mut page, PageId(0));
        for (n, key) in keys.iter().enumerate() {
            if let Err(at) = search(&page, key) {
                insert_at(&mut page, at, key, &vec![n as u8; n % 40]);
            }
        }
        page
    }

    /// Every function a reader or a writer calls on a node, on `page`: none may panic.
    fn exercise(page: &mut [u8], probes: &[Vec<u8>]) {
        for i in 0..count(page) {
            let _ = (key(page, i), value(page, i));
        }
        let _ = entries(page);
        for probe in probes {
            let _ = (
                search(page, probe),
                find(page, probe),
                lower_bound(page, probe, true),
                lower_bound_from_ends(page, probe, false),
            );
        }
        for probe in probes {
            match search(page, probe) {
                Ok(at) if probe.len() % 2 == 0 => remove_at(page, at),
                _ => {
                    upsert(page, probe, b"value");
                }
            }
        }
    }

    proptest! {
        // Cheap cases, and only a few in a hundred pass the check: many of them.
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// A node whose header, slots or cells were overwritten at random either fails
        /// [`check`] or is one that every function can use: what `Page::verify` relies on to
        /// turn a malformed but well checksummed page into an error instead of a panic.
        #[test]
        fn a_node_that_passes_its_check_can_be_used(
            keys in keys(),
            probes in keys(),
            damage in prop::collection::vec((0usize..200, any::<u8>()), 1..6),
        ) {
            let mut page = leaf_of(&keys);
            let n = count(&page);
            let cells = cell_start(&page);
            for (at, byte) in damage {
                // Mostly the header and the slots; now and then a cell.
                let at = if at < 150 {
                    at % (NODE_HEADER + n * SLOT)
                } else {
                    cells + at % (PAYLOAD - cells).max(1)
                };
                page[at.min(PAYLOAD - 1)] = byte;
            }
            if check(&page, false).is_ok() {
                exercise(&mut page, &probes);
            }
        }
    }

    #[test]
    fn malformed_nodes_are_named() {
        let keys: Vec<Vec<u8>> = (0u8..10).map(|i| vec![b'k', i]).collect();
        let valid = leaf_of(&keys);
        assert_eq!(check(&valid, false), Ok(()));
        let broken = |at: usize, value: u16| {
            let mut page = valid.clone();
            page[at..at + 2].copy_from_slice(&value.to_le_bytes());
            check(&page, false).expect_err("malformed")
        };
        let slot = |i: usize| NODE_HEADER + i * SLOT;
        assert!(broken(slot(3), (PAYLOAD - 1) as u16).contains("outside the cell area"));
        assert!(broken(0, (PAYLOAD / SLOT) as u16).contains("do not fit the node"));
        assert!(broken(4, 7).contains("do not fill the cell area"));
        assert!(broken(slot(2) + 2, 3000).contains("outside the cell area"));
        let swapped = {
            let mut page = valid.clone();
            let (a, b) = (slot(1), slot(2));
            let first: Vec<u8> = page[a..a + SLOT].to_vec();
            page.copy_within(b..b + SLOT, a);
            page[b..b + SLOT].copy_from_slice(&first);
            check(&page, false).expect_err("keys out of order")
        };
        assert!(swapped.contains("is not above"), "{swapped}");
        assert!(check(&valid, true)
            .expect_err("a leaf's values are not child ids")
            .contains("holds a"));
    }
}
