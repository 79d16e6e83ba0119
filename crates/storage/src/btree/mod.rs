//! A B+tree over the buffer pool: byte-string keys and values, keys in memcmp order.
//!
//! * **Semantics:** [`BTree::insert`] fails with [`StorageError::DuplicateKey`] if the key is
//!   present (a primary key), [`BTree::update`] fails with [`StorageError::KeyNotFound`] if it
//!   is absent, [`BTree::delete`] says whether it removed something. Key + value may take at
//!   most [`MAX_ENTRY`] bytes, so that any node holds at least three entries and every split
//!   produces two non-empty halves that fit (see [`BTree::split`]).
//! * **Pages:** slotted leaf and inner nodes (layout in `btree/node.rs`). Leaves have no sibling
//!   links: scans walk down from the root, holding only the current page, which keeps merges
//!   simple (no links to repair) and is cheap under the tree-level lock.
//! * **The root page never moves** (as in SQLite): a full root moves both halves of its
//!   split to two new pages and becomes their parent; when the root is an inner node with a
//!   single child, the child's contents move up. A tree is therefore named by its root page.
//! * **Deletes** merge an underfull node (less than a quarter full) with a sibling when the
//!   two fit in one page, and free the emptied page; an empty leaf always merges. Underfull
//!   nodes whose sibling is too full to merge are left as they are (no redistribution yet).
//! * **Concurrency:** one tree-level `parking_lot::RwLock`: a writer excludes everyone who
//!   takes it. Page latches are still taken through the pool, in root-to-leaf and
//!   left-to-right order. **Point reads** ([`BTree::get`], [`BTree::get_with`]) and
//!   **scans** ([`BTree::scan`], one leaf at a time) do not take the tree latch: they
//!   validate against the tree's *version*, see "Optimistic point reads" and "Scans, leaf by
//!   leaf" below, and take its read latch only after three failed tries.
//!
//! # Optimistic point reads
//!
//! A read lock on the tree latch is an atomic read-modify-write of one word that every reader
//! of the tree shares: two threads doing lookups bounce that cache line on every lookup, and
//! lookups did not scale beyond one core. Point reads therefore use the tree latch the way a
//! seqlock is used, but without ever reading memory that is being written (no `unsafe`):
//!
//! * A writer ([`TreeWriter`]) takes the write latch and then increments `version` (now odd);
//!   when it is done (changes applied, logged and stamped), it increments it again (even)
//!   before releasing the latch. Every change to a page of the tree is made by a writer.
//! * A reader loads `version` (`v1`); if it is odd a writer is active and the reader takes
//!   the read latch instead. Otherwise it descends from the root as before, each page read
//!   under that page's shared frame latch (so every page it reads is a whole image some
//!   writer left, never one being changed), holding one page at a time. Holding the leaf, it
//!   loads `version` again: if it is still `v1`, no writer held the latch at any time between
//!   the two loads, and the leaf is searched (still latched). Otherwise, or if anything failed
//!   on the way, it retries (a few times, then takes the read latch).
//!
//! *Why the result is what a read under the latch would give.* All version accesses are
//!   `SeqCst`. If the reader saw any page in a state written by a writer `W` whose first
//!   increment comes after `v1`, it acquired that page's frame latch after `W` released it,
//!   so `W`'s first increment happens-before the second load, which then cannot return `v1`.
//!   If `v1` already counts `W`'s second increment, the load of `v1` synchronizes with it and
//!   every change of `W` is visible. `v1` even rules out a writer between its two increments.
//!   So a validated descent saw, on every page, exactly the state of the tree at `v1`: the
//!   state of the last release of the write latch, as a read under the read latch would. (A
//!   descent that does not validate may have followed a stale child id into a page freed or
//!   reused meanwhile; each such page is still a whole image, read under its latch, so the
//!   worst outcomes are an error, a miss, or a walk longer than any tree, which is cut at
//!   `MAX_HEIGHT`: all discarded by the failed validation.) Commit-time reasoning in the
//!   engine (txn.rs) relies on exactly this: a point read sees only writes whose
//!   transaction had finished its step 3 (applied, appended and stamped) before the read.
//!
//! *Inner nodes, from per-thread copies.* Even without the tree latch, every lookup still
//! latched each inner node's frame and locked its page-table shard: cache lines written by
//! every thread, and the top levels are read by all of them. Each thread therefore keeps
//! copies of the payloads of the inner nodes it reads (`COPY_SETS` sets of `COPY_WAYS` slots,
//! the set chosen by tree and page, least recently used first out), each tagged with the
//! frame it came from and that frame's version (see the buffer pool's "Frame versions"):
//! the number of times the frame's write latch had been taken, read under the read latch
//! the copy was made under. An optimistic descent routes through a copy whose frame version
//! is unchanged instead of reading the page. That is the
//! same as reading the page under its latch at the moment of the version load: the frame
//! still holds that page with that content, since every change of a frame's content or
//! mapping is made under its write latch and counted before it is made. So the argument
//! above holds unchanged, the version load standing for the latch acquisition: a writer that
//! finished before `v1` counted its write latches before its last increment of `version`,
//! which `v1` saw, so the load sees them and the stale copy is not used; a writer that
//! starts after `v1` is caught by the second load of `version`. A copy made during a
//! descent that then fails validation is still a whole image of its frame, so it is kept.
//! Writers route through copies too (see `BTree::route`): holding the tree latch, a copy
//! whose frame is unchanged is the page as it is. Scans read the pages themselves.
//!
//! # Reads beside a writer
//!
//! Validated against the tree's version alone, a point read fails whenever any writer of the
//! tree is active, however far from its key: with a `kv` SET in every few commands, 12–42%
//! of the server's commands retried a descent and 4–14% waited on the tree latch (two event
//! loops; `INFO stats`, `tailstore_read_retries` / `tailstore_read_latched`), and on 16 cores
//! reads fell to a third once a fifth of the commands were SETs. So a descent that does not
//! validate by the version gets a second chance: it keeps the leaf if, holding the leaf's
//! read latch,
//!
//! 1. the leaf holds no unfinished change (`PageReadGuard::has_unlogged_change`: a logged
//!    writer marks every page before it changes it and clears the mark when it stamps the
//!    page, after its record is appended and after all of its changes to every page),
//! 2. no inner node on the path held an unfinished change when it was read (such a node
//!    routes as the writer left it so far, and is never kept as a copy), and every inner
//!    node's frame is unchanged since it was read, and
//! 3. no change to the tree was ever made without a log record (those leave no mark).
//!
//! *Why the leaf is the one that holds the key.* At the moment of the last version check,
//! every inner node on the path is as it was read (3 of the argument above: a frame version
//! stands for the latch), so the tree routes the key from the root, whose page never moves,
//! to this leaf. A node routes a key to a leaf that lacks its range only in the middle of a
//! writer's structure change: a leaf split before the parent takes the new sibling, a merge
//! before the parent forgets the freed page, a split of an inner node before its own parent
//! links the new half. In each, the writer has already changed (and marked) the leaf or the
//! inner node below the stale parent, and a mark stays until every change of that writer is
//! made: so 1 or 2 rejects the path. A node freed and reused is reached only through a
//! parent changed since (its version moved), or through one read in mid-change (2).
//!
//! *Why its content is what a read may see.* The leaf holds only stamped changes (1): their
//! records were appended before the stamps, so a transaction that reads them waits for them
//! to be durable (txn.rs, "Early lock release is safe"), and each key's value is the one the
//! last writer of that key left; a change to the key in progress marks the leaf. The leaf's
//! LSN is a stamped one, so a transaction's later validation by the leaf's LSN stands as
//! before. What is lost is only the snapshot of the whole tree at one version, which no
//! caller relied on: a transaction's reads of several keys are checked at its validation.
//!
//! # Scans, leaf by leaf
//!
//! A scan used to hold the tree's read latch from its first leaf to its last: every writer
//! of the tree waited for it, and it for every writer. It now reads one leaf at a time, each
//! found from the root as a point read finds its leaf (the same descent and the same
//! validation: by the version, or beside a writer by the rules above), and takes the range
//! `[lower, upper)` of keys that the leaf's path routes to it (the separators either side of
//! the child taken at each inner node, the deepest being the tightest: `LeafRange`). The leaf
//! gives the pairs of that range that the scan still wants, and the next descent goes to the
//! leaf holding the keys from `upper` on (ascending; `Probe::At`) or just below `lower`
//! (descending; `Probe::Below`), cut at that fence: each key is visited at most once, in
//! order, even when the tree changed between two leaves.
//!
//! *The next leaf through the parent.* A descent per leaf made a scan's leaf cost mostly
//! binary searches of inner nodes (a rank in a sorted set of 600,000 members passes over
//! hundreds of leaves). So a scan remembers the inner node above the leaf it read (`ScanParent`:
//! its page, the frame version it was read at, the range its path routes to it, the
//! tree's version before the descent and the versions of every inner node on the path) and
//! reads the next leaf as that node's next child, from the thread's copy of the node if it
//! is still that version. The leaf is then validated as the descent's own leaf is, by the
//! same path with its last step moved by one child: by the tree's version unchanged since
//! before the descent, or, beside a writer, by every inner node of the path unchanged and
//! the leaf holding no unfinished change. So the argument below holds for it as it stands.
//! Past the node's last child, or when anything fails, the scan descends from the root.
//!
//! *Why each leaf's part is exact.* The argument of "Reads beside a writer" for one key holds
//! for every key of the range at once: at the moment of validation the inner nodes on the
//! path are as read, so the tree routes every key of `[lower, upper)` to this leaf, which
//! holds no unfinished change, so its pairs in that range are the tree's pairs in that range
//! then, each the value the last finished change of its key left. A scan is therefore a
//! sequence of exact parts taken at increasing moments, not a snapshot of the whole range at
//! one moment. No caller needs one: a transaction validates its scans by checking the
//! range's key locks and then scanning again (engine `txn.rs`; storage.md §2), and that
//! argument uses only that each key of the second scan is read after the lock check.
//!
//! [`BTree::keys_at`] is such a scan that passes over pairs instead of visiting them: each
//! leaf's part is cut to the keys at the positions asked for, and the count of pairs passed
//! over carries into the next leaf. The keys it returns are exact in the same sense; which
//! key held which position is not validated by anyone (engine `Transaction::rows_at`).
//!
//! Tests (`storage/tests/btree.rs`): a read of a leaf that an unfinished writer changed waits
//! for it, and one of another leaf does not; reads caught while a writer is stopped between a
//! split and its link into the root (a leaf split; an inner node's) are exact; reads beside a
//! leaf split below the root or a merge, made and not yet stamped, see the tree before it.
//! In `readers_beside_writers.rs`: point reads and scans beside writers (logged or not) that
//! split and merge always find the keys that never leave (scans: in order, each once, with
//! their values), with every thread pausing at random at the points of `crate::interleave`;
//! it catches each of the rules above broken alone, and a scan that does not cut a leaf at
//! the fence it resumed from.
//! Deep trees (more inner levels than `PATH_DEPTH`) keep to the version.
//!
//! **Failures.** Every page an operation needs is latched, and every page it allocates is
//! allocated, before it changes anything, so a failed get, delete, merge or single split
//! leaves the tree as it was (a failed delete may already have removed its key when a merge
//! after it fails). The one exception is a split that propagates: once a child has split, a
//! failure to link the new page into its parent would orphan it. Then the tree becomes
//! fail-stop ([`StorageError::TreeInconsistent`] from every call), in the spirit of the log
//! manager's fail-stop rule; the half-made change was never logged, so recovery after a
//! restart rebuilds the tree without it.
//!
//! **Malformed nodes.** A node read from disk is checked whole before it is used (its slots
//! and cells within the page, keys in order and sharing the node's prefix, heads matching,
//! entries no larger than a node allows, the space accounted for: `node::check`, from
//! `Page::verify`), and so is a node redo rebuilds from a logged image, so a page that
//! passes its checksum and is still malformed is a corrupt-page error, never a panic on a
//! bad offset.
//!
//! **Damage behind valid checksums.** A node can pass every check of its own and still say
//! something wrong about the tree: a child id that leads back up (a cycle), two parents of
//! one page, an inner node where the leaves are, an id past the file's end. The walk that
//! every open makes of each tree's inner nodes ([`BTree::page_ids`], for the free list)
//! reports a page reached twice and a leaf on a level of inner nodes, so a cycle never
//! reaches the recursive walks; those (`modify_in`, `delete_from`, `check_node`) also stop
//! at [`MAX_HEIGHT`] levels, for a page damaged on disk while the database runs, and a merge
//! refuses a pair that is one page (it would latch it twice and wait for itself). Checked by
//! `storage/tests/btree.rs` (a root that is its own child; a merge of a page with itself)
//! and `engine/tests/damaged_pages.rs` (thousands of damaged databases opened and used).
//!
//! Not done yet: separators are full keys (no suffix truncation or prefix compression);
//! underfull nodes are not redistributed.

mod node;
pub mod redo;

use std::cell::RefCell;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockWriteGuard};

use crate::buffer_pool::{BufferPool, FrameVersion, PageReadGuard, PageWriteGuard};
use crate::error::{Result, StorageError};
use crate::interleave::{self, Point};
use crate::page::{Page, PageId, PageIdSet, PageKind};
use node::{CHILD, NODE_HEADER, PAYLOAD};
pub use redo::{PageOp, Redo};

/// What is wrong with the structure of node page `page`, if anything (see `node::check`).
pub(crate) fn check_node_structure(page: &Page) -> std::result::Result<(), String> {
    match page.kind() {
        Some(PageKind::BTreeInner) => node::check(page.payload(), true),
        Some(PageKind::BTreeLeaf) => node::check(page.payload(), false),
        _ => Ok(()),
    }
}

/// A (key, value) pair copied out of the tree.
pub type Entry = (Vec<u8>, Vec<u8>);

/// Largest key + value, in bytes: the most that lets three of the largest inner-node entries
/// (slot + key + child id) fit in one node, about a third of a page (5,427 bytes), so that a
/// 4 KiB value and its key are one entry.
pub const MAX_ENTRY: usize = (PAYLOAD - NODE_HEADER) / 3 - node::SLOT - CHILD;

const _: () = assert!(NODE_HEADER + 3 * (node::SLOT + MAX_ENTRY + CHILD) <= PAYLOAD);

/// Where a change to a key would fall ([`BTree::leaf_room`]): what an estimate of a
/// commit's splits and merges needs.
#[derive(Clone, Copy, Debug)]
pub struct LeafRoom {
    pub leaf: PageId,
    /// The inner node above the leaf (`None` where the root is the leaf).
    pub parent: Option<PageId>,
    /// Bytes free in the leaf: more put into it splits it.
    pub free: usize,
    /// Bytes that may leave the leaf before it is underfull (and may merge).
    pub spare: usize,
    /// Bytes the key's entry takes in the leaf now (0 if it is absent).
    pub entry: usize,
}

/// A node below this many used bytes is underfull and is merged with a sibling if they fit.
const UNDERFULL: usize = PAYLOAD / 4;

/// Optimistic descents a point read tries before it takes the tree's read latch.
const OPTIMISTIC_TRIES: usize = 3;

/// More levels than any tree can have (every node holds at least three entries): an
/// optimistic descent that walks further has followed stale child ids in a loop.
const MAX_HEIGHT: usize = 64;

/// Inner-node copies kept per thread: `COPY_SETS` sets of `COPY_WAYS` slots, the set chosen
/// by tree and page, each set in order of last use. At most 512 page payloads (16 KiB each,
/// 8 MiB in all) per thread that reads trees. A `kv` table of 100,000 4 KiB values has about
/// 170 inner nodes: direct-mapped in 256 slots, pairs of them shared a slot, and about one
/// descent in eight copied a whole page again (ARCHITECTURE decision 105).
const COPY_SETS: usize = 64;
const COPY_WAYS: usize = 8;

/// Ids of B+tree instances, unique within the process (keys of the inner-node copies).
static NEXT_TREE: AtomicU64 = AtomicU64::new(1);

/// A thread's copy of the payload of an inner node (see "Optimistic point reads").
struct InnerCopy {
    tree: u64,
    page: PageId,
    /// The frame the page was copied from, and its version then.
    version: FrameVersion,
    payload: Box<[u8]>,
}

thread_local! {
    static INNER_COPY: RefCell<Vec<Option<InnerCopy>>> = const { RefCell::new(Vec::new()) };
}

/// The slots of the set that may hold a copy of `page` of `tree`, most recently used first.
fn copy_set(copies: &mut [Option<InnerCopy>], tree: u64, page: PageId) -> &mut [Option<InnerCopy>] {
    let mixed = (tree ^ page.0.rotate_left(20)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let set = (mixed >> 32) as usize % COPY_SETS;
    &mut copies[set * COPY_WAYS..(set + 1) * COPY_WAYS]
}

/// Whether `slot` holds a copy of `page` of `tree`.
fn holds(slot: &Option<InnerCopy>, tree: u64, page: PageId) -> bool {
    slot.as_ref()
        .is_some_and(|copy| copy.tree == tree && copy.page == page)
}

/// `f` of the payload of the current thread's copy of inner node `page` of `tree` and the
/// frame version it was copied at, if the thread has a copy and the frame it came from is
/// unchanged since. A copy used moves to the front of its set.
fn with_copy<R>(
    pool: &BufferPool,
    tree: u64,
    page: PageId,
    f: impl FnOnce(&[u8], FrameVersion) -> R,
) -> Option<R> {
    INNER_COPY.with(|copies| {
        let mut copies = copies.borrow_mut();
        if copies.is_empty() {
            return None;
        }
        let set = copy_set(&mut copies, tree, page);
        let way = set.iter().position(|slot| holds(slot, tree, page))?;
        set[..=way].rotate_right(1);
        let copy = set[0].as_ref()?;
        pool.is_unchanged_for_use(copy.version)
            .then(|| f(&copy.payload[..], copy.version))
    })
}

/// Keeps a copy of inner node `id` of `tree`, read-latched in `page`, at the front of its
/// set: in the slot of an older copy of the same page, else in an empty one, else in the
/// least recently used (reusing the slot's buffer).
fn keep_copy(tree: u64, id: PageId, page: &PageReadGuard<'_>) {
    if page.has_unlogged_change() {
        // A writer's unfinished change: never routes a read (see "Reads beside a writer").
        return;
    }
    INNER_COPY.with(|copies| {
        let mut copies = copies.borrow_mut();
        if copies.is_empty() {
            copies.resize_with(COPY_SETS * COPY_WAYS, || None);
        }
        let set = copy_set(&mut copies, tree, id);
        let way = set
            .iter()
            .position(|slot| holds(slot, tree, id))
            .or_else(|| set.iter().position(Option::is_none))
            .unwrap_or(COPY_WAYS - 1);
        set[..=way].rotate_right(1);
        let version = page.frame_version();
        let payload = page.payload();
        match &mut set[0] {
            Some(copy) if copy.payload.len() == payload.len() => {
                copy.payload.copy_from_slice(payload);
                copy.tree = tree;
                copy.page = id;
                copy.version = version;
            }
            slot => {
                *slot = Some(InnerCopy {
                    tree,
                    page: id,
                    version,
                    payload: payload.into(),
                })
            }
        }
    });
}

/// The order of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanDirection {
    Ascending,
    Descending,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Insert,
    Update,
    /// Insert or replace.
    Put,
}

/// One insert or update on its way down the tree.
#[derive(Clone, Copy)]
struct Change<'k> {
    key: &'k [u8],
    value: &'k [u8],
    mode: Mode,
}

/// Where a key leads in a node.
enum Route {
    /// An inner node: follow the child at position `at`; `right` is the child after it,
    /// if it is not the node's last.
    Inner {
        at: usize,
        child: PageId,
        right: Option<PageId>,
    },
    /// A leaf: the slot holding the key, or where it would go.
    Leaf {
        slot: std::result::Result<usize, usize>,
    },
}

/// The leaf a [`TreeWriter`]'s last insert or update reached, and the range of keys its
/// ancestors route to it: `[lower, upper)`, a missing bound meaning none on that side.
///
/// A transaction's writes reach a tree sorted by key, and neighbours often share a leaf (the
/// parts of one Redis value, the lines of one TPC-C order): the next change whose key lies in
/// the range starts at that leaf instead of descending from the root again. Valid while the
/// writer holds the tree's latch, because only the writer changes the tree, and only a split
/// of the leaf or a delete can shrink the range or free the leaf: a leaf that split is not
/// recorded, and a delete forgets the leaf. A change that does not fit the leaf goes through
/// the root (and may split there).
#[derive(Default)]
struct LeafRange {
    leaf: Option<PageId>,
    lower: Fence,
    upper: Fence,
}

/// One bound of a [`LeafRange`]; the key buffer is reused from descent to descent.
#[derive(Default)]
struct Fence {
    set: bool,
    key: Vec<u8>,
}

impl Fence {
    fn set_to(&mut self, key: &[u8]) {
        self.set = true;
        self.key.clear();
        self.key.extend_from_slice(key);
    }

    fn copy_from(&mut self, other: &Fence) {
        self.set = other.set;
        self.key.clear();
        self.key.extend_from_slice(&other.key);
    }
}

impl LeafRange {
    /// The recorded leaf, if `key` lies in its range.
    fn leaf_for(&self, key: &[u8]) -> Option<PageId> {
        let above_lower = !self.lower.set || self.lower.key.as_slice() <= key;
        let below_upper = !self.upper.set || key < self.upper.key.as_slice();
        self.leaf.filter(|_| above_lower && below_upper)
    }

    /// Starts a descent from the root: no leaf, no bounds.
    fn forget(&mut self) {
        self.leaf = None;
        self.lower.set = false;
        self.upper.set = false;
    }

    /// The descent goes to child `at` of inner node `p`: the child holds `[key[at-1],
    /// key[at])`. Separators deeper down lie inside their ancestors' ranges, so the last
    /// bound set on each side is the tightest.
    fn narrow(&mut self, p: &[u8], at: usize) {
        if at > 0 {
            self.lower.set_to(node::key(p, at - 1));
        }
        if at < node::count(p) {
            self.upper.set_to(node::key(p, at));
        }
    }

    fn reached(&mut self, leaf: PageId) {
        self.leaf = Some(leaf);
    }

    fn copy_from(&mut self, other: &LeafRange) {
        self.leaf = other.leaf;
        self.lower.copy_from(&other.lower);
        self.upper.copy_from(&other.upper);
    }
}

/// The inner node just above the leaf a scan read last, for reaching the next leaf through
/// it rather than from the root (see "Scans, leaf by leaf"): the node is read from the
/// thread's copy, which must still be the version the descent routed through.
struct ScanParent {
    direction: ScanDirection,
    /// Whether the fields below are those of a validated descent or sibling step.
    usable: bool,
    node: PageId,
    node_version: FrameVersion,
    /// The range of keys the path routes to the node.
    node_range: LeafRange,
    /// The position in the node of the leaf read last.
    at: usize,
    /// The tree's version before the descent, and the frame versions of its inner nodes:
    /// what a leaf reached through the node is validated by, as the descent's leaf was.
    tree_version: u64,
    inners: InnerVersions,
    /// The range of the leaf read last (reused from leaf to leaf).
    leaf_range: LeafRange,
}

impl ScanParent {
    fn new(direction: ScanDirection) -> ScanParent {
        ScanParent {
            direction,
            usable: false,
            node: PageId(0),
            node_version: FrameVersion::NEVER_CURRENT,
            node_range: LeafRange::default(),
            at: 0,
            tree_version: 1,
            inners: InnerVersions::new(),
            leaf_range: LeafRange::default(),
        }
    }
}

/// Inner nodes a writer's descent before the latch records ([`BTree::writer_for`]); a
/// deeper tree goes without it.
const PATH_DEPTH: usize = 8;

/// A leaf found without the tree latch, and the frame versions of the inner nodes on the
/// way to it, root first ([`BTree::writer_for`]).
struct LeafPath {
    range: LeafRange,
    inners: InnerVersions,
}

/// The frame versions of the inner nodes a walk from the root went through, root first, as
/// far as [`PATH_DEPTH`] (a deeper walk is only counted).
#[derive(Clone, Copy)]
struct InnerVersions {
    versions: [Option<FrameVersion>; PATH_DEPTH],
    depth: usize,
}

impl InnerVersions {
    fn new() -> InnerVersions {
        InnerVersions {
            versions: [None; PATH_DEPTH],
            depth: 0,
        }
    }

    /// Notes the next inner node's version; whether it was within [`PATH_DEPTH`].
    fn record(&mut self, version: FrameVersion) -> bool {
        let kept = self
            .versions
            .get_mut(self.depth)
            .map(|slot| *slot = Some(version));
        self.depth += 1;
        kept.is_some()
    }

    fn too_deep(&self) -> bool {
        self.depth > PATH_DEPTH
    }

    /// Whether every inner node on the walk is still as it was read (and the walk was not
    /// too deep to say).
    fn unchanged(&self, pool: &BufferPool) -> bool {
        !self.too_deep()
            && self
                .versions
                .iter()
                .flatten()
                .all(|version| pool.is_unchanged(*version))
    }
}

/// Which leaf a descent goes to: the position it takes in each inner node.
#[derive(Clone, Copy, Debug)]
enum Probe<'k> {
    /// The leaf whose range holds `key`.
    At(&'k [u8]),
    /// The leaf whose range holds the keys just below `key` (a descending scan's next leaf).
    Below(&'k [u8]),
    /// The last leaf.
    Last,
}

impl Probe<'_> {
    /// The child position this probe takes in inner node `p`.
    fn position(self, p: &[u8]) -> usize {
        match self {
            Probe::At(key) => node::child_index(p, key),
            // Children before the first separator `>= key` hold keys `< key`.
            Probe::Below(key) => node::lower_bound(p, key, false),
            Probe::Last => node::count(p),
        }
    }
}

/// The position and id of the child of inner node `p` that holds `key`, narrowing `range`
/// (when given) to that child's keys.
fn route_inner(p: &[u8], key: &[u8], range: Option<&mut LeafRange>) -> Route {
    let at = node::child_index(p, key);
    if let Some(range) = range {
        range.narrow(p, at);
    }
    Route::Inner {
        at,
        child: node::child(p, at),
        right: (at < node::count(p)).then(|| node::child(p, at + 1)),
    }
}

/// The slot a change of `key` takes in its leaf, given where a search found or would put it,
/// and whether it replaces an entry; the errors of an insert of a present key and of an
/// update of an absent one.
fn leaf_position(slot: std::result::Result<usize, usize>, mode: Mode) -> Result<(usize, bool)> {
    match (slot, mode) {
        (Ok(_), Mode::Insert) => Err(StorageError::DuplicateKey),
        (Err(_), Mode::Update) => Err(StorageError::KeyNotFound),
        (Ok(at), Mode::Update | Mode::Put) => Ok((at, true)),
        (Err(at), Mode::Insert | Mode::Put) => Ok((at, false)),
    }
}

/// Shape of a tree, as found by [`BTree::check`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeShape {
    /// Levels, the root's included (a lone leaf root has height 1).
    pub height: usize,
    pub inner_nodes: usize,
    pub leaves: usize,
    pub entries: usize,
}

/// [`BTree::check`]'s walk so far: the shape counted, the pages met, the depth reached.
struct CheckWalk<'s> {
    shape: &'s mut TreeShape,
    seen: PageIdSet,
    depth: usize,
}

/// What [`BTree::walk_stamped`] did: pairs passed over, then pairs visited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walked {
    pub passed: usize,
    pub visited: usize,
}

/// Where a scan that passes over pairs ended: pairs visited, and pairs it was still to pass
/// over when the range ran out.
struct Passing {
    visited: usize,
    skip_left: usize,
}

/// Where a point read found its key: the leaf and the leaf's page LSN at that moment, and
/// the version of the frame that held it (see [`BTree::leaf_unchanged`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafStamp {
    pub leaf: PageId,
    pub lsn: crate::page::Lsn,
    pub frame: FrameVersion,
}

impl LeafStamp {
    /// The stamp of leaf `leaf`, read-latched in `page`.
    fn of(leaf: PageId, page: &PageReadGuard<'_>) -> LeafStamp {
        LeafStamp {
            leaf,
            lsn: page.lsn(),
            frame: page.frame_version(),
        }
    }
}

/// How often point reads and scans' leaves found a writer in their way (see "Optimistic
/// point reads" and "Scans, leaf by leaf"), since the tree was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadContention {
    /// Optimistic descents that did not validate: a writer was active at the start, or was
    /// (or had been) active by the end.
    pub retries: u64,
    /// Point reads (and scans' leaves) that gave up after a few such descents
    /// (`OPTIMISTIC_TRIES`) and read under the tree's read latch, waiting for the writer first.
    pub latched: u64,
}

impl ReadContention {
    pub fn add(&mut self, other: ReadContention) {
        self.retries += other.retries;
        self.latched += other.latched;
    }
}

/// The counters behind [`ReadContention`], on cache lines of their own: only a read that
/// fails writes them, and the tree's `version`, which every read loads, must not share a line
/// with them.
#[derive(Default)]
#[repr(align(128))]
struct ContentionCounters {
    retries: AtomicU64,
    latched: AtomicU64,
}

/// A B+tree rooted at a fixed page. See the module documentation.
pub struct BTree {
    pool: Arc<BufferPool>,
    root: PageId,
    /// The tree-level latch (see "Concurrency" above).
    latch: RwLock<()>,
    /// Odd while a [`TreeWriter`] is active; incremented twice by each (see "Optimistic
    /// point reads").
    version: AtomicU64,
    /// Unique in the process: names the tree's inner-node copies.
    uid: u64,
    /// Set when an insert failed after a split had changed pages but before the new page was
    /// linked into its parent. The tree is then fail-stop: every operation returns
    /// [`StorageError::TreeInconsistent`] until recovery (a later issue) repairs it.
    broken: AtomicBool,
    /// Set for good once a change is made without a log record ([`Redo::disabled`]): such a
    /// change leaves no mark on its pages, so point reads then accept a leaf only by the
    /// tree's version (see "Reads beside a writer").
    unlogged_changes: AtomicBool,
    contention: ContentionCounters,
}

fn kind_of(page: &Page, id: PageId) -> Result<PageKind> {
    match page.kind() {
        Some(kind @ (PageKind::BTreeLeaf | PageKind::BTreeInner)) => Ok(kind),
        other => Err(StorageError::Corrupt {
            page_id: id,
            reason: format!("expected a B+tree node, found {other:?}"),
        }),
    }
}

/// Searches leaf `leaf` (latched in `page`) for `key` and calls `read` with its value.
fn read_leaf<R>(
    leaf: PageId,
    page: &PageReadGuard<'_>,
    key: &[u8],
    read: impl FnOnce(Option<&[u8]>) -> R,
) -> (R, LeafStamp) {
    let p = page.payload();
    let value = node::find(p, key).map(|i| node::value(p, i));
    (read(value), LeafStamp::of(leaf, page))
}

fn check_entry(key: &[u8], value: &[u8]) -> Result<()> {
    let size = key.len() + value.len();
    if size > MAX_ENTRY {
        return Err(StorageError::EntryTooLarge {
            size,
            max: MAX_ENTRY,
        });
    }
    Ok(())
}

fn child_value(id: PageId) -> Vec<u8> {
    id.0.to_le_bytes().to_vec()
}

fn in_upper_bound(key: &[u8], upper: Bound<&[u8]>) -> bool {
    match upper {
        Bound::Unbounded => true,
        Bound::Included(bound) => key <= bound,
        Bound::Excluded(bound) => key < bound,
    }
}

impl BTree {
    fn new(pool: Arc<BufferPool>, root: PageId) -> BTree {
        BTree {
            pool,
            root,
            latch: RwLock::new(()),
            version: AtomicU64::new(0),
            uid: NEXT_TREE.fetch_add(1, Ordering::Relaxed),
            broken: AtomicBool::new(false),
            unlogged_changes: AtomicBool::new(false),
            contention: ContentionCounters::default(),
        }
    }

    /// Creates an empty tree (a root leaf) in a newly allocated page.
    pub fn create(pool: Arc<BufferPool>) -> Result<BTree> {
        Self::create_logged(pool, &mut Redo::disabled())
    }

    /// [`BTree::create`], recording the new root's image in `redo` (see [`TreeWriter`]).
    pub fn create_logged(pool: Arc<BufferPool>, redo: &mut Redo) -> Result<BTree> {
        let (root, mut page) = pool.allocate()?;
        mark(&mut page, root, redo);
        page.set_kind(PageKind::BTreeLeaf);
        node::init(page.payload_mut(), PageId(0));
        redo.image(&page);
        drop(page);
        Ok(BTree::new(pool, root))
    }

    /// Opens the tree rooted at `root` (as returned by [`BTree::root`]).
    pub fn open(pool: Arc<BufferPool>, root: PageId) -> Result<BTree> {
        kind_of(&*pool.read(root)?, root)?;
        Ok(BTree::new(pool, root))
    }

    /// The root page, which names the tree.
    pub fn root(&self) -> PageId {
        self.root
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_with(key, |value| value.map(<[u8]>::to_vec))
            .map(|(value, _)| value)
    }

    /// Caller holds the tree's write latch.
    fn get_unlatched(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (leaf, page) = self.descend(key)?;
        Ok(read_leaf(leaf, &page, key, |value| value.map(<[u8]>::to_vec)).0)
    }

    /// Calls `read` with the value of `key` (or `None`) in place, and returns its result with
    /// the leaf that holds (or would hold) the key and the leaf's LSN. While the leaf keeps
    /// that LSN, no logged change has touched it: a transaction validates a read with this
    /// instead of searching the tree again.
    ///
    /// The value is the one a read under the tree's read latch would have found at some
    /// moment during the call (see "Optimistic point reads").
    pub fn get_with<R>(
        &self,
        key: &[u8],
        read: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<(R, LeafStamp)> {
        self.with_leaf(key, |leaf, page| read_leaf(leaf, page, key, read))
    }

    /// [`BTree::get_with`] for several keys, in as few descents as the leaves allow: after a
    /// descent, the keys that follow are looked for in the same leaf first (so keys in
    /// ascending order, as the parts of one value are, take the fewest). Calls
    /// `read(i, value)` for each key in order and returns each key's stamp.
    ///
    /// A key found in that leaf has the value a read under the tree's read latch would find
    /// at the same moment: the leaf was reached by a validated descent (or under the latch),
    /// so it is the tree's leaf at that moment, and a key lies in one leaf only. A key not
    /// found there may lie in another leaf (there are no fence keys to say), so it gets a
    /// descent of its own, and so do the keys after it.
    pub fn get_many_with(
        &self,
        keys: &[&[u8]],
        mut read: impl FnMut(usize, Option<&[u8]>),
    ) -> Result<Vec<LeafStamp>> {
        let mut stamps = Vec::with_capacity(keys.len());
        while let Some(&first) = keys.get(stamps.len()) {
            let at = stamps.len();
            self.with_leaf(first, |leaf, page| {
                let ((), stamp) = read_leaf(leaf, page, first, |value| read(at, value));
                stamps.push(stamp);
                let p = page.payload();
                for (i, key) in keys.iter().enumerate().skip(at + 1) {
                    let Some(slot) = node::find(p, key) else {
                        break;
                    };
                    read(i, Some(node::value(p, slot)));
                    stamps.push(stamp);
                }
            })?;
        }
        Ok(stamps)
    }

    /// Calls `f` with the leaf for `key`, read-latched, as a point read reaches it: by an
    /// optimistic descent (see "Optimistic point reads"), or after a few failed tries, by a
    /// descent under the tree's read latch.
    fn with_leaf<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(PageId, &PageReadGuard<'_>) -> R,
    ) -> Result<R> {
        self.usable()?;
        for _ in 0..OPTIMISTIC_TRIES {
            if let Some(found) = self.descend_optimistic(Probe::At(key), None, None) {
                let (leaf, page) = found?;
                return Ok(f(leaf, &page));
            }
            self.contention.retries.fetch_add(1, Ordering::Relaxed);
        }
        self.contention.latched.fetch_add(1, Ordering::Relaxed);
        let _tree = self.latch.read();
        self.usable()?;
        let (leaf, page) = self.descend(key)?;
        Ok(f(leaf, &page))
    }

    /// The leaf for `key`, read-latched. The caller holds the tree latch (either mode).
    fn descend(&self, key: &[u8]) -> Result<(PageId, PageReadGuard<'_>)> {
        let mut id = self.root;
        // Bounded, as every walk is: a page damaged on disk may lead back up the tree.
        for _ in 0..MAX_HEIGHT {
            let page = self.pool.read(id)?;
            match kind_of(&page, id)? {
                PageKind::BTreeInner => {
                    let p = page.payload();
                    id = node::child(p, node::child_index(p, key));
                }
                _ => return Ok((id, page)),
            }
        }
        Err(self.corrupt(id, "deeper than any B+tree"))
    }

    /// One optimistic descent without the tree latch (see "Optimistic point reads"): the
    /// leaf `probe` leads to, read-latched, validated against the tree's version or, beside
    /// a writer, by its path (see "Reads beside a writer"); `None` if that failed (the
    /// caller tries again). An error is returned only if it validated too. `range`, if
    /// given, receives the range of keys the path routes to the leaf.
    fn descend_optimistic(
        &self,
        probe: Probe<'_>,
        mut range: Option<&mut LeafRange>,
        mut parent: Option<&mut ScanParent>,
    ) -> Option<Result<(PageId, PageReadGuard<'_>)>> {
        let v1 = self.version.load(Ordering::SeqCst);
        let mut inners = InnerVersions::new();
        let mut node = self.root;
        let mut has_parent = false;
        let found = self.walk_to_leaf(probe, |p, at, version| {
            inners.record(version);
            if let Some(parent) = parent.as_deref_mut() {
                parent.node = node;
                parent.node_version = version;
                parent.at = at;
                if let Some(range) = range.as_deref() {
                    parent.node_range.copy_from(range);
                }
                has_parent = true;
            }
            if let Some(range) = range.as_deref_mut() {
                range.narrow(p, at);
            }
            node = node::child(p, at);
        });
        interleave::reached(Point::LeafBeforeValidation);
        let page = found.as_ref().ok().map(|(_, page)| page);
        if !self.leaf_still_routed(v1, &inners, page) {
            return None;
        }
        if let Some(parent) = parent {
            parent.usable = has_parent && range.is_some();
            parent.tree_version = v1;
            parent.inners = inners;
        }
        Some(found)
    }

    /// Whether a leaf read without the tree latch (`None`: the read failed) is the one the
    /// path read since the tree's version `v1`, through inner nodes of `inners`' versions,
    /// routes to, and holds only finished changes (see "Reads beside a writer"). The caller
    /// holds the leaf's read latch.
    fn leaf_still_routed(
        &self,
        v1: u64,
        inners: &InnerVersions,
        leaf: Option<&PageReadGuard<'_>>,
    ) -> bool {
        // No writer may have been active since `v1`: whatever was read stands, even a
        // failure.
        if v1 & 1 == 0 && self.version.load(Ordering::SeqCst) == v1 {
            return true;
        }
        // A writer was: the leaf still serves if nothing on its path is changing.
        leaf.is_some_and(|page| {
            !page.has_unlogged_change()
                && !self.unlogged_changes.load(Ordering::SeqCst)
                && inners.unchanged(&self.pool)
        })
    }

    /// The leaf beside the one a scan read last, in the scan's direction, reached through
    /// their parent's copy instead of from the root, its range in `parent.leaf_range`.
    /// `None` when the parent has no child there, its copy is gone or changed, or the leaf
    /// does not validate as [`BTree::descend_optimistic`]'s leaf would, by the same path
    /// (see "Scans, leaf by leaf"): the caller then descends from the root.
    fn sibling_leaf(&self, parent: &mut ScanParent) -> Option<Result<PageReadGuard<'_>>> {
        if !parent.usable {
            return None;
        }
        parent.usable = false; // until this step validates
        let (at, child) = with_copy(&self.pool, self.uid, parent.node, |p, version| {
            if version != parent.node_version {
                return None;
            }
            let at = match parent.direction {
                ScanDirection::Ascending => Some(parent.at + 1).filter(|&at| at <= node::count(p)),
                ScanDirection::Descending => parent.at.checked_sub(1),
            }?;
            parent.leaf_range.copy_from(&parent.node_range);
            parent.leaf_range.narrow(p, at);
            Some((at, node::child(p, at)))
        })
        .flatten()?;
        let page = match self.pool.read(child) {
            Ok(page) => page,
            // Reported only if the path stands, as a descent's failure is.
            Err(err) => {
                let routed = self.leaf_still_routed(parent.tree_version, &parent.inners, None);
                return routed.then_some(Err(err));
            }
        };
        interleave::reached(Point::LeafBeforeValidation);
        if !self.leaf_still_routed(parent.tree_version, &parent.inners, Some(&page)) {
            return None;
        }
        if page.kind() != Some(PageKind::BTreeLeaf) {
            // Validated: the tree itself routes a leaf's range to a page that is not one.
            return Some(Err(self.corrupt(child, "an inner node among leaves")));
        }
        parent.at = at;
        parent.usable = true;
        Some(Ok(page))
    }

    /// The leaf `probe` leads to, read-latched, reached from the root without the tree latch: each
    /// inner node through the thread's copy if its frame is unchanged, else read (and a copy
    /// kept: a whole image whatever the caller's validation says). `visit` sees each inner
    /// node on the way, root first: its payload, the position of the child taken, and the
    /// frame version the payload was read at. Nothing here is validated against writers:
    /// the callers do that ([`BTree::descend_optimistic`], [`BTree::leaf_path`]).
    fn walk_to_leaf(
        &self,
        probe: Probe<'_>,
        mut visit: impl FnMut(&[u8], usize, FrameVersion),
    ) -> Result<(PageId, PageReadGuard<'_>)> {
        let mut id = self.root;
        let mut step = |p: &[u8], version| {
            let at = probe.position(p);
            visit(p, at, version);
            interleave::reached(Point::WalkBetweenNodes);
            node::child(p, at)
        };
        for _ in 0..MAX_HEIGHT {
            if let Some(child) = with_copy(&self.pool, self.uid, id, &mut step) {
                id = child;
                continue;
            }
            let page = self.pool.read(id)?;
            match kind_of(&page, id)? {
                PageKind::BTreeInner if page.has_unlogged_change() => {
                    // A writer's unfinished change: routes as the writer left it so far, so
                    // the walk goes on, but the path is not one a reader may trust beside a
                    // writer (a version that can never be current says so).
                    id = step(page.payload(), FrameVersion::NEVER_CURRENT);
                }
                PageKind::BTreeInner => {
                    keep_copy(self.uid, id, &page);
                    id = step(page.payload(), page.frame_version());
                }
                _ => return Ok((id, page)),
            }
        }
        Err(self.corrupt(id, "deeper than any B+tree"))
    }

    /// Roughly what share of the tree's keys sort before `key`, from 0 to 1: the child
    /// positions a descent to it takes, as if every child of a node held as many keys, and
    /// the slot it would take in its leaf. For choosing the shorter of two ways to count
    /// (a rank from the nearer end, decision 243), never for an answer: read without the
    /// tree latch and not validated, as [`BTree::leaf_room`] is.
    pub fn position_estimate(&self, key: &[u8]) -> Result<f64> {
        self.usable()?;
        let (mut before, mut share) = (0.0, 1.0);
        let (_, leaf) = self.walk_to_leaf(Probe::At(key), |p, at, _| {
            share /= (node::count(p) + 1) as f64;
            before += share * at as f64;
        })?;
        let p = leaf.payload();
        if leaf.kind() == Some(PageKind::BTreeLeaf) && node::count(p) > 0 {
            let slot = node::lower_bound(p, key, false);
            before += share * slot as f64 / node::count(p) as f64;
        }
        Ok(before.clamp(0.0, 1.0))
    }

    /// Where a change to `key` would fall, for an estimate of the pages a commit changes
    /// (see [`LeafRoom`]). Read without the tree latch and not validated, so a writer may
    /// change the tree meanwhile; an error may be such a writer's doing too.
    pub fn leaf_room(&self, key: &[u8]) -> Result<LeafRoom> {
        let (mut node, mut parent) = (self.root, None);
        let (leaf, page) = self.walk_to_leaf(Probe::At(key), |p, at, _| {
            parent = Some(node);
            node = node::child(p, at);
        })?;
        if kind_of(&page, leaf)? != PageKind::BTreeLeaf {
            return Err(self.corrupt(leaf, "a walk to a leaf ended elsewhere"));
        }
        let p = page.payload();
        let used = node::used(p);
        Ok(LeafRoom {
            leaf,
            parent,
            free: PAYLOAD.saturating_sub(used),
            spare: used.saturating_sub(UNDERFULL),
            entry: node::find(p, key).map_or(0, |at| {
                node::entry_size(node::key(p, at).len(), node::value(p, at).len())
            }),
        })
    }

    /// How often point reads and scans' leaves have found a writer in their way so far.
    pub fn read_contention(&self) -> ReadContention {
        ReadContention {
            retries: self.contention.retries.load(Ordering::Relaxed),
            latched: self.contention.latched.load(Ordering::Relaxed),
        }
    }

    /// Whether `stamp`'s leaf still has its LSN (see [`BTree::get_with`]). Takes no tree
    /// latch: a change being made right now is not seen, and the caller must exclude it
    /// otherwise (the engine's key locks do).
    pub fn leaf_unchanged(&self, stamp: LeafStamp) -> Result<bool> {
        // No write latch taken on the frame since the stamp: it holds the same page as it
        // was then (see "Frame versions" in `buffer_pool.rs`), without a latch or a lookup
        // (a walk's validation checks hundreds of leaves).
        if self.pool.is_unchanged(stamp.frame) {
            return Ok(true);
        }
        let page = self.pool.read(stamp.leaf)?;
        Ok(page.page_id() == stamp.leaf && page.lsn() == stamp.lsn)
    }

    /// Adds `key`; fails with [`StorageError::DuplicateKey`] if it is present.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.writer()?.insert(key, value, &mut Redo::disabled())
    }

    /// Replaces the value of `key`; fails with [`StorageError::KeyNotFound`] if it is absent.
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.writer()?.update(key, value, &mut Redo::disabled())
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.writer()?.delete(key, &mut Redo::disabled())
    }

    /// Takes the tree's write latch for a series of logged changes. While the writer lives no
    /// one else reads or changes the tree, so a caller can append the log record of its
    /// changes and [`BufferPool::stamp`] the touched pages before anyone sees them: the pages'
    /// LSN order is then the order in which they were changed.
    pub fn writer(&self) -> Result<TreeWriter<'_>> {
        // Any fresh memory the writer's splits and loads need is allocated now, before the
        // latch that other writers wait for.
        self.pool.prepare_fresh_frames();
        let latch = self.latch.write();
        self.usable()?;
        // Odd until the writer is dropped: optimistic point reads do not validate meanwhile.
        self.version.fetch_add(1, Ordering::SeqCst);
        Ok(TreeWriter {
            tree: self,
            _latch: latch,
            last: RefCell::new(LeafRange::default()),
        })
    }

    /// [`BTree::writer`] for a series of changes that starts at `key`: finds `key`'s leaf
    /// before taking the latch, so that the first change spends less time holding it, the
    /// only time other writers wait for. Read without the latch, the path is used only if
    /// the frame of every inner node on it is unchanged once the latch is held: those nodes
    /// are then as they were read, and route `key` to the same leaf now (the root's page
    /// never moves, and a leaf that splits or goes away changes its parent). Otherwise the
    /// first change descends from the root as after [`BTree::writer`].
    pub fn writer_for(&self, key: &[u8]) -> Result<TreeWriter<'_>> {
        let path = self.leaf_path(key);
        interleave::reached(Point::WriterPathBeforeLatch);
        let writer = self.writer()?;
        if let Some(path) = path {
            if path.inners.unchanged(&self.pool) {
                *writer.last.borrow_mut() = path.range;
            }
        }
        Ok(writer)
    }

    /// Calls `visit(key, value)` for the keys within `(lower, upper)` in `direction`, at most
    /// `limit` times, stopping early when `visit` returns `false`. Returns how many pairs were
    /// visited. `visit` runs with a leaf read-latched (and at times the tree): it must not
    /// call back into the tree (a writer waiting for a latch would deadlock with it).
    ///
    /// The scan goes leaf by leaf (see "Scans, leaf by leaf"): each leaf is found from the
    /// root like a point read's, with the range of keys its path routes to it, and gives the
    /// pairs of that range the scan still wants; the next leaf is the one that holds the keys
    /// from the end of that range on. Each leaf's part is exact at the moment it was read,
    /// and the parts follow each other in key order, each key visited at most once; the
    /// whole is not one snapshot of the tree (a transaction validates its scans).
    pub fn scan(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: ScanDirection,
        limit: usize,
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<usize> {
        let walked = self.scan_passing(lower, upper, direction, limit, 0, None, &mut |k, v| {
            visit(k, v).then_some(0)
        })?;
        Ok(walked.visited)
    }

    /// A scan of `(lower, upper)` in `direction` that passes over its first `skip` pairs
    /// (a leaf at a time, without visiting them) and then visits up to `limit` pairs, and
    /// stamps every leaf it read, in order, into `stamps`. With `skip` of `usize::MAX` it
    /// counts the range's pairs: `passed` is their number (ZRANK, ZCOUNT).
    ///
    /// The stamps prove the walk: each leaf's part was exact at the moment it was read (see
    /// "Scans, leaf by leaf"), and a leaf whose LSN is unchanged later holds the same
    /// pairs. Every key of the range the walk covered was routed, when read, to one of
    /// these leaves, and the routing of a key changes only by a split, a merge or a root
    /// change, each of which rewrites (and stamps) the leaf that held its range. So if
    /// every leaf still has its stamp, the walk run again would pass and visit the same
    /// pairs; with no key of the range locked first, a transaction may rely on that (engine
    /// `txn.rs`), as it relies on one leaf's stamp for a point read.
    #[allow(clippy::too_many_arguments)]
    pub fn walk_stamped(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: ScanDirection,
        skip: usize,
        limit: usize,
        stamps: &mut Vec<LeafStamp>,
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<Walked> {
        let mut visit = |key: &[u8], value: &[u8]| visit(key, value).then_some(0);
        let walked = self.scan_passing(
            lower,
            upper,
            direction,
            limit,
            skip,
            Some(stamps),
            &mut visit,
        )?;
        Ok(Walked {
            passed: skip - walked.skip_left,
            visited: walked.visited,
        })
    }

    /// The keys at `positions` (strictly increasing) among the keys within `(lower,
    /// upper)` in ascending order: position 0 is the first key in the range. A position past
    /// the range's last key has none, so fewer keys may come back. The pairs between two
    /// positions are passed over a leaf at a time, without being copied: a key at a random
    /// position of a range of a million keys costs a visit of the leaves before it, not a
    /// copy of every pair (SPOP, SRANDMEMBER). The keys are exact at the moment each leaf
    /// was read, not one snapshot of the tree, as a scan's.
    pub fn keys_at(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        positions: &[usize],
    ) -> Result<Vec<Vec<u8>>> {
        assert!(
            positions.windows(2).all(|pair| pair[0] < pair[1]),
            "positions must be strictly increasing"
        );
        let Some(&first) = positions.first() else {
            return Ok(Vec::new());
        };
        let mut keys = Vec::with_capacity(positions.len());
        let mut next = positions[1..].iter();
        let mut at = first;
        self.scan_passing(
            lower,
            upper,
            ScanDirection::Ascending,
            usize::MAX,
            first,
            None,
            &mut |key, _| {
                keys.push(key.to_vec());
                let following = *next.next()?;
                let passed = following - at - 1;
                at = following;
                Some(passed)
            },
        )?;
        Ok(keys)
    }

    /// [`BTree::scan`] that passes over `skip` pairs before the first visit, and after each
    /// visit over as many as `visit` returns (`None`: the scan stops). `limit` counts visits.
    /// Each leaf read is stamped into `stamps` when given.
    #[allow(clippy::too_many_arguments)]
    fn scan_passing(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: ScanDirection,
        limit: usize,
        skip: usize,
        mut stamps: Option<&mut Vec<LeafStamp>>,
        visit: &mut PassingVisit<'_>,
    ) -> Result<Passing> {
        self.usable()?;
        let mut scan = Scan {
            lower,
            upper,
            direction,
            remaining: limit,
            visited: 0,
            skip,
            visit,
        };
        let mut resume: Option<Vec<u8>> = None;
        let mut parent = ScanParent::new(direction);
        while scan.remaining > 0 {
            let probe = scan.probe(resume.as_deref());
            let from = resume.as_deref();
            let next = self.with_scan_leaf(probe, &mut parent, |page, range| {
                if let Some(stamps) = stamps.as_deref_mut() {
                    stamps.push(LeafStamp::of(page.page_id(), page));
                }
                scan.leaf(page.payload(), range, from)
            })?;
            match next {
                Some(fence) => resume = Some(fence),
                None => break,
            }
        }
        Ok(Passing {
            visited: scan.visited,
            skip_left: scan.skip,
        })
    }

    /// `f` of the leaf `probe` leads to and the range of keys its path routes to it: found
    /// optimistically, or after [`OPTIMISTIC_TRIES`] failures under the tree's read latch
    /// (held while `f` runs).
    fn with_scan_leaf<R>(
        &self,
        probe: Probe<'_>,
        parent: &mut ScanParent,
        f: impl FnOnce(&PageReadGuard<'_>, &LeafRange) -> R,
    ) -> Result<R> {
        if let Some(sibling) = self.sibling_leaf(parent) {
            let page = sibling?;
            return Ok(f(&page, &parent.leaf_range));
        }
        let mut range = std::mem::take(&mut parent.leaf_range);
        let found = self.descend_for_scan(probe, parent, &mut range);
        parent.leaf_range = range;
        let page = found?;
        Ok(f(&page, &parent.leaf_range))
    }

    /// The leaf `probe` leads to and, in `range`, the range of keys its path routes to it:
    /// found optimistically (noting the parent in `parent`), or after [`OPTIMISTIC_TRIES`]
    /// failures under the tree's read latch (released before the caller reads the leaf,
    /// which stays read-latched).
    fn descend_for_scan(
        &self,
        probe: Probe<'_>,
        parent: &mut ScanParent,
        range: &mut LeafRange,
    ) -> Result<PageReadGuard<'_>> {
        for _ in 0..OPTIMISTIC_TRIES {
            range.forget();
            if let Some(found) = self.descend_optimistic(probe, Some(range), Some(parent)) {
                return found.map(|(_, page)| page);
            }
            self.contention.retries.fetch_add(1, Ordering::Relaxed);
        }
        parent.usable = false;
        self.contention.latched.fetch_add(1, Ordering::Relaxed);
        let _tree = self.latch.read();
        self.usable()?;
        range.forget();
        let (_, page) = self.walk_to_leaf(probe, |p, at, _| range.narrow(p, at))?;
        Ok(page)
    }

    /// [`BTree::scan`] collecting copies of the pairs.
    pub fn range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: ScanDirection,
        limit: usize,
    ) -> Result<Vec<Entry>> {
        let mut out = Vec::new();
        self.scan(lower, upper, direction, limit, |key, value| {
            out.push((key.to_vec(), value.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// Every page of the tree (inner nodes and leaves), found from the inner nodes alone.
    /// Recovery rebuilds the free-page list from this, at every open, so it is also where
    /// the shape of the tree is checked before anything walks it (see "Damage behind valid
    /// checksums"): a page reached twice (a cycle, or two parents) and an inner node beside
    /// a leaf on one level are reported as [`StorageError::Corrupt`].
    pub fn page_ids(&self) -> Result<Vec<PageId>> {
        let _tree = self.latch.read();
        self.usable()?;
        // Level by level: all leaves are at the same depth, so only inner nodes are read
        // (and the first page of the leaves' level, which says that it is one).
        let mut seen = PageIdSet::default();
        seen.insert(self.root);
        let mut out = vec![self.root];
        let mut level = vec![self.root];
        for _ in 0..MAX_HEIGHT {
            let mut next = Vec::new();
            for (i, &id) in level.iter().enumerate() {
                let page = self.pool.read(id)?;
                if kind_of(&page, id)? != PageKind::BTreeInner {
                    if i == 0 {
                        return Ok(out);
                    }
                    return Err(self.corrupt(id, "a leaf on a level of inner nodes"));
                }
                let p = page.payload();
                for child in (0..=node::count(p)).map(|at| node::child(p, at)) {
                    if !seen.insert(child) {
                        return Err(self.corrupt(child, "reached twice from the root"));
                    }
                    next.push(child);
                }
            }
            out.extend_from_slice(&next);
            level = next;
        }
        Err(self.corrupt(self.root, "deeper than any B+tree"))
    }

    /// Walks the whole tree and checks its invariants: node kinds, keys sorted within each
    /// node and inside the range its parent assigns, all leaves at the same depth. Returns the
    /// shape; a violation is reported as [`StorageError::Corrupt`].
    pub fn check(&self) -> Result<TreeShape> {
        let _tree = self.latch.read();
        self.usable()?;
        let mut shape = TreeShape::default();
        let mut walk = CheckWalk {
            shape: &mut shape,
            seen: PageIdSet::default(),
            depth: 0,
        };
        let height = self.check_node(self.root, None, None, &mut walk)?;
        shape.height = height;
        Ok(shape)
    }

    /// Caller holds the write latch.
    /// Inserts or updates `key`, starting at the leaf of `last` when `key` lies in its range
    /// (see [`LeafRange`]) and the change fits there; otherwise from the root, recording the
    /// leaf it reaches in `last`.
    fn modify(
        &self,
        key: &[u8],
        value: &[u8],
        mode: Mode,
        redo: &mut Redo,
        last: &mut LeafRange,
    ) -> Result<()> {
        check_entry(key, value)?;
        if let Some(leaf) = last.leaf_for(key) {
            if self.modify_leaf_without_split(leaf, key, value, mode, redo)? {
                return Ok(());
            }
        }
        last.forget();
        let change = Change { key, value, mode };
        // The root absorbs its own split (see `split`), so nothing comes back up.
        self.modify_in(self.root, None, 0, &change, redo, last)
            .map(|_| ())
    }

    /// Changes leaf `id`, which holds `key`'s range, if the change fits without a split;
    /// `false` (nothing changed) if it does not.
    fn modify_leaf_without_split(
        &self,
        id: PageId,
        key: &[u8],
        value: &[u8],
        mode: Mode,
        redo: &mut Redo,
    ) -> Result<bool> {
        let mut page = self.pool.write(id)?;
        // A writer's last leaf stays a leaf while the writer holds the tree: another kind
        // here was read back from a data file damaged since.
        if kind_of(&page, id)? != PageKind::BTreeLeaf {
            return Err(self.corrupt(id, "a writer's last leaf is no longer a leaf"));
        }
        // Refused before the page is marked, as `modify_leaf` refuses it.
        leaf_position(node::search(page.payload(), key), mode)?;
        self.mark(&mut page, id, redo);
        if !node::upsert(page.payload_mut(), key, value) {
            return Ok(false);
        }
        redo.put(id, key, value);
        Ok(true)
    }

    /// Page `id` for a change: write-latched, and with `redo` enabled marked unlogged (not
    /// to be written until stamped) and noted as touched.
    fn write_page(&self, id: PageId, redo: &mut Redo) -> Result<PageWriteGuard<'_>> {
        let mut page = self.pool.write(id)?;
        self.mark(&mut page, id, redo);
        Ok(page)
    }

    fn allocate_page(&self, redo: &mut Redo) -> Result<(PageId, PageWriteGuard<'_>)> {
        let (id, mut page) = self.pool.allocate()?;
        self.mark(&mut page, id, redo);
        Ok((id, page))
    }

    /// Inserts or updates below `id`, `depth` levels below the root; `right` is the next
    /// child of `id`'s parent, if `id` is not its last. If `id` had to split, it keeps the
    /// lower half and the result is the separator and the new page holding the upper half.
    fn modify_in(
        &self,
        id: PageId,
        right: Option<PageId>,
        depth: usize,
        change: &Change<'_>,
        redo: &mut Redo,
        last: &mut LeafRange,
    ) -> Result<Option<(Vec<u8>, PageId)>> {
        if depth >= MAX_HEIGHT {
            return Err(self.corrupt(id, "deeper than any B+tree"));
        }
        let (at, child, next) = match self.route(id, change.key, Some(last))? {
            Route::Inner { at, child, right } => (at, child, right),
            Route::Leaf { slot } => {
                let split = self.modify_leaf(id, right, slot, change, redo)?;
                // A leaf that split no longer holds all of the range its parent gave it, and
                // a root leaf that split became an inner node (returning no split: the root
                // absorbs its own), so neither is recorded.
                if split.is_none() && id != self.root {
                    last.reached(id);
                }
                return Ok(split);
            }
        };
        let Some((separator, right)) =
            self.modify_in(child, next, depth + 1, change, redo, last)?
        else {
            return Ok(None);
        };
        interleave::reached(Point::ChildSplitBeforeLink);
        // The child has split: failing now would orphan `right` (see `BTree::broken`).
        self.absorb_split(id, at, child, separator, right, redo)
            .inspect_err(|_| self.broken.store(true, Ordering::Release))
    }

    /// Child `child` at position `at` of inner node `id` has split off `right` at
    /// `separator`: links `right` in, splitting `id` in turn if it is full.
    fn absorb_split(
        &self,
        id: PageId,
        at: usize,
        child: PageId,
        separator: Vec<u8>,
        right: PageId,
        redo: &mut Redo,
    ) -> Result<Option<(Vec<u8>, PageId)>> {
        // `child` kept the keys below `separator`; `right` takes its place for the keys above.
        let mut page = self.write_page(id, redo)?;
        let p = page.payload_mut();
        if node::fits(p, separator.len(), CHILD) {
            // Logged as the link, not as an image of the node: on the right edge of a tree
            // that grows by appends (kv values, TPC-C orders), a leaf splits every few
            // inserts, and an image of its parent (kilobytes) doubled the log of each one.
            if !node::link_split(p, &separator, child, right) {
                return Err(self.corrupt(id, "a split child is not where its keys lead"));
            }
            redo.link(id, &separator, child, right);
            return Ok(None);
        }
        let upper = if at == node::count(p) {
            right
        } else {
            node::upper(p)
        };
        let mut entries = node::entries(p);
        if at < entries.len() {
            entries[at].1 = child_value(right);
        }
        entries.insert(at, (separator, child_value(child)));
        self.split(page, PageKind::BTreeInner, entries, upper, false, redo)
    }

    /// Makes `change` in leaf `id`, where `slot` is the result of searching for its key;
    /// `right` is the leaf's next sibling under the same parent, if it has one.
    fn modify_leaf(
        &self,
        id: PageId,
        right: Option<PageId>,
        slot: std::result::Result<usize, usize>,
        change: &Change<'_>,
        redo: &mut Redo,
    ) -> Result<Option<(Vec<u8>, PageId)>> {
        let Change { key, value, mode } = *change;
        let (at, replaced) = leaf_position(slot, mode)?;
        let mut page = self.write_page(id, redo)?;
        if node::upsert(page.payload_mut(), key, value) {
            redo.put(id, key, value);
            return Ok(None);
        }
        let mut entries = node::entries(page.payload());
        let entry = (key.to_vec(), value.to_vec());
        if replaced {
            entries[at] = entry;
        } else {
            entries.insert(at, entry);
        }
        let append = !replaced && at + 1 == entries.len() && self.may_split_off_the_last(right)?;
        self.split(page, PageKind::BTreeLeaf, entries, PageId(0), append, redo)
    }

    /// Whether a full leaf whose new key is above all of its keys may keep them all and give
    /// the new key a page of its own (see `split`): only if its next sibling under the same
    /// parent, if any, is at least half full. Otherwise descending inserts just below a full
    /// leaf (LPUSH: the new head below the old one) would each get a page of their own: the
    /// first one's page becomes the sibling, bounding the leaf's keys from above, and each
    /// next key is again above all of the full leaf's keys. With the rule, every quick split
    /// leaves its leaf a sibling with one entry, and that leaf splits in halves until the
    /// sibling fills to half: at most one leaf less than half full beside each full one.
    fn may_split_off_the_last(&self, right: Option<PageId>) -> Result<bool> {
        let Some(right) = right else {
            return Ok(true);
        };
        let page = self.pool.read(right)?;
        Ok(node::used(page.payload()) >= node::PAYLOAD / 2)
    }

    /// Splits the node in `page`, whose new contents would be `entries` (and `upper` for an
    /// inner node), into itself and a new right sibling; returns the separator and the
    /// sibling for the parent. The root instead moves both halves to two new pages and becomes
    /// their parent (it never moves), so nothing is returned.
    ///
    /// Every page is allocated before anything changes, so that a full pool (or a failed
    /// eviction) leaves the node as it was.
    ///
    /// *Why both halves fit and are not empty.* Let `C` be a node's room for entries
    /// (`PAYLOAD - NODE_HEADER`) and `E` the largest entry with its slot (an inner one:
    /// `SLOT + MAX_ENTRY + CHILD`, at most `C / 3` by `MAX_ENTRY`'s definition). The entries
    /// overflow (`T > C` bytes in all) and fitted before this change, which adds or grows one
    /// entry by at most `E`, so `T <= C + E`, and there are at least four of them (three
    /// always fit). The left half takes entries until it reaches `T / 2`, so it ends below
    /// `T / 2 + E <= C / 2 + 3E / 2 <= C`, and the right half gets at most `T / 2 + 1 <= C`.
    /// Clamping `mid` moves at most the last one or two entries right, which happens only
    /// when the left half without them is already below `T / 2`; it keeps `mid >= 1` and, as
    /// there are at least four entries, leaves an inner node's right half at least one entry
    /// after the one pushed up. An append split keeps the entries that fitted before and
    /// moves one entry. The separator the parent receives is a key of at most `MAX_ENTRY`
    /// bytes, so the parent's new entry is at most `E` too and the argument holds there.
    fn split(
        &self,
        mut page: PageWriteGuard<'_>,
        kind: PageKind,
        entries: Vec<Entry>,
        upper: PageId,
        append: bool,
        redo: &mut Redo,
    ) -> Result<Option<(Vec<u8>, PageId)>> {
        let is_root = page.page_id() == self.root;
        let (right_id, mut right) = self.allocate_page(redo)?;
        let mut new_left = None;
        if is_root {
            match self.allocate_page(redo) {
                Ok(allocated) => new_left = Some(allocated),
                Err(err) => {
                    drop(right);
                    self.pool.free(right_id);
                    return Err(err);
                }
            }
        }

        let total: usize = entries
            .iter()
            .map(|(k, v)| node::entry_size(k.len(), v.len()))
            .sum();
        let mut mid = 0;
        let mut left_bytes = 0;
        while mid < entries.len() && left_bytes < total / 2 {
            left_bytes += node::entry_size(entries[mid].0.len(), entries[mid].1.len());
            mid += 1;
        }
        // Both halves non-empty (MAX_ENTRY guarantees at least four entries here); an inner
        // split also pushes `entries[mid]` up, so its right half starts at `mid + 1`.
        let last = match kind {
            PageKind::BTreeInner => entries.len().saturating_sub(2),
            _ => entries.len().saturating_sub(1),
        };
        let mid = mid.min(last).max(1);
        // A leaf that overflows by a key above all of its keys (ascending inserts: a load, an
        // order id, a history row) keeps everything and gives the new key a page of its own,
        // as SQLite's "quick balance" does: appended leaves end up full, not half full, and the
        // split logs a small image for the new page.
        let mid = if append && kind == PageKind::BTreeLeaf {
            entries.len() - 1
        } else {
            mid
        };
        let separator = entries[mid].0.clone();
        let (left_upper, right_entries) = if kind == PageKind::BTreeInner {
            let child: [u8; CHILD] = entries[mid]
                .1
                .as_slice()
                .try_into()
                .map_err(|_| self.corrupt(page.page_id(), "inner value is not a page id"))?;
            (PageId(u64::from_le_bytes(child)), &entries[mid + 1..])
        } else {
            (PageId(0), &entries[mid..])
        };

        right.set_kind(kind);
        node::build(right.payload_mut(), upper, right_entries);
        redo.image(&right);
        match new_left {
            None if append && kind == PageKind::BTreeLeaf => {
                // The node already holds exactly `entries[..mid]`: nothing to change or log.
                Ok(Some((separator, right_id)))
            }
            None => {
                node::build(page.payload_mut(), left_upper, &entries[..mid]);
                redo.image(&page);
                Ok(Some((separator, right_id)))
            }
            Some((left_id, mut left)) => {
                left.set_kind(kind);
                node::build(left.payload_mut(), left_upper, &entries[..mid]);
                redo.image(&left);
                page.set_kind(PageKind::BTreeInner);
                node::build(
                    page.payload_mut(),
                    right_id,
                    &[(separator, child_value(left_id))],
                );
                redo.image(&page);
                Ok(None)
            }
        }
    }

    /// While the root is an inner node with a single child, moves the child's contents up.
    fn collapse_root(&self, redo: &mut Redo) -> Result<()> {
        loop {
            {
                let root = self.pool.read(self.root)?;
                if kind_of(&root, self.root)? != PageKind::BTreeInner
                    || node::count(root.payload()) > 0
                {
                    return Ok(());
                }
            }
            let mut root = self.write_page(self.root, redo)?;
            let child_id = node::upper(root.payload());
            let mut child = self.write_page(child_id, redo)?;
            let kind = kind_of(&child, child_id)?;
            root.set_kind(kind);
            root.payload_mut().copy_from_slice(child.payload());
            child.set_kind(PageKind::Free);
            redo.image(&root);
            redo.image(&child);
            drop(child);
            drop(root);
            self.release(child_id, redo);
        }
    }

    /// Where `key` leads in node `id`, found under a shared latch (so that an operation that
    /// turns out to change nothing does not dirty the page); at an inner node, narrows
    /// `range` (when given) to the chosen child's keys.
    ///
    /// An inner node is read from the thread's copy when its frame is unchanged since the copy
    /// was made (as optimistic reads do): the caller holds the tree latch, so that copy is the
    /// page as it is now, and the shared cache lines of the page's latch are left alone.
    fn route(&self, id: PageId, key: &[u8], mut range: Option<&mut LeafRange>) -> Result<Route> {
        let inner = |p: &[u8], range: Option<&mut LeafRange>| route_inner(p, key, range);
        let copied = with_copy(&self.pool, self.uid, id, |p, _| {
            inner(p, range.as_deref_mut())
        });
        if let Some(route) = copied {
            return Ok(route);
        }
        let page = self.pool.read(id)?;
        let p = page.payload();
        Ok(match kind_of(&page, id)? {
            PageKind::BTreeInner => {
                keep_copy(self.uid, id, &page);
                inner(p, range)
            }
            _ => Route::Leaf {
                slot: node::search(p, key),
            },
        })
    }

    /// `key`'s leaf, found without the tree latch, with the frame versions of the inner
    /// nodes that routed to it (see [`BTree::writer_for`]); `None` if the root is the leaf
    /// (a root leaf may have become an inner node by the time the latch is taken), the
    /// tree is deeper than [`PATH_DEPTH`], or a page on the way is not a node or fails to
    /// read (the writer then descends as usual, and meets any error there).
    fn leaf_path(&self, key: &[u8]) -> Option<LeafPath> {
        let mut path = LeafPath {
            range: LeafRange::default(),
            inners: InnerVersions::new(),
        };
        let walked = self.walk_to_leaf(Probe::At(key), |p, at, version| {
            if path.inners.record(version) {
                path.range.narrow(p, at);
            }
        });
        let (leaf, _) = walked.ok()?;
        if leaf == self.root || path.inners.too_deep() {
            return None;
        }
        path.range.reached(leaf);
        Some(path)
    }

    /// Removes `key` below `id`, `depth` levels below the root; returns whether it was
    /// present.
    fn delete_from(&self, id: PageId, depth: usize, key: &[u8], redo: &mut Redo) -> Result<bool> {
        if depth >= MAX_HEIGHT {
            return Err(self.corrupt(id, "deeper than any B+tree"));
        }
        let (at, child) = match self.route(id, key, None)? {
            Route::Inner { at, child, .. } => (at, child),
            Route::Leaf { slot: Err(_) } => return Ok(false),
            Route::Leaf { slot: Ok(at) } => {
                node::remove_at(self.write_page(id, redo)?.payload_mut(), at);
                redo.delete(id, key);
                return Ok(true);
            }
        };
        let found = self.delete_from(child, depth + 1, key, redo)?;
        if found {
            self.rebalance(id, at, redo)?;
        }
        Ok(found)
    }

    /// If the child at position `at` of inner node `parent` is underfull, merges it with a
    /// neighbour when both fit in one page, freeing the right one of the pair.
    fn rebalance(&self, parent_id: PageId, at: usize, redo: &mut Redo) -> Result<()> {
        // Decide under shared latches, so that the common case (nothing to merge) dirties
        // nothing; the tree lock keeps the decision valid until the exclusive latches below.
        let (l, left_id, right_id, separator) = {
            let parent = self.pool.read(parent_id)?;
            let p = parent.payload();
            let n = node::count(p);
            if n == 0 {
                return Ok(()); // a single child: no sibling to merge with
            }
            let child_id = node::child(p, at);
            if node::used(self.pool.read(child_id)?.payload()) >= UNDERFULL {
                return Ok(());
            }
            // The pair (left, right) at positions (l, l + 1), separated by key l.
            let l = if at < n { at } else { at - 1 };
            let (left, right) = (node::child(p, l), node::child(p, l + 1));
            // Latched one after the other below: one page twice would wait for itself.
            if left == right || left == parent_id || right == parent_id {
                return Err(self.corrupt(parent_id, "a child reached twice"));
            }
            (l, left, right, node::key(p, l).to_vec())
        };
        let (entries, upper) = {
            let left = self.pool.read(left_id)?;
            let right = self.pool.read(right_id)?;
            let kind = kind_of(&left, left_id)?;
            if kind_of(&right, right_id)? != kind {
                return Err(self.corrupt(right_id, "siblings of different kinds"));
            }
            let (lp, rp) = (left.payload(), right.payload());
            let mut merged_size = node::used(lp) + node::used(rp) - NODE_HEADER;
            if kind == PageKind::BTreeInner {
                merged_size += node::entry_size(separator.len(), CHILD);
            }
            if merged_size > PAYLOAD {
                return Ok(()); // no redistribution yet: the node stays underfull
            }
            let mut entries = node::entries(lp);
            if kind == PageKind::BTreeInner {
                // The separator comes down, pointing at left's old rightmost child.
                entries.push((separator, child_value(node::upper(lp))));
            }
            entries.extend(node::entries(rp));
            (entries, node::upper(rp))
        };
        interleave::reached(Point::MergeDecided);
        let mut parent = self.write_page(parent_id, redo)?;
        let mut left = self.write_page(left_id, redo)?;
        let mut right = self.write_page(right_id, redo)?;
        node::build(left.payload_mut(), upper, &entries);
        right.set_kind(PageKind::Free);
        // Key l and its pointer to `left` go; the pointer that named `right` now names `left`.
        let p = parent.payload_mut();
        node::remove_at(p, l);
        node::set_child(p, l, left_id);
        redo.image(&parent);
        redo.image(&left);
        redo.image(&right);
        drop((right, left, parent));
        self.release(right_id, redo);
        Ok(())
    }

    /// Gives a page this operation emptied back for reuse. With `redo` enabled it is only
    /// noted ([`Redo::freed`]): the caller frees it once the record holding `redo` is
    /// appended. Freed at once, another tree's writer could reuse the page and log its new
    /// contents *before* this record logs the page as free, and redo, replaying in LSN order,
    /// would then leave the page free under the other tree.
    fn release(&self, id: PageId, redo: &mut Redo) {
        if redo.is_enabled() {
            redo.free_later(id);
        } else {
            self.pool.free(id);
        }
    }

    /// Checks the subtree at `id`, whose keys must lie in `[low, high)`; returns its height.
    fn check_node(
        &self,
        id: PageId,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
        walk: &mut CheckWalk<'_>,
    ) -> Result<usize> {
        if !walk.seen.insert(id) {
            return Err(self.corrupt(id, "reached twice from the root"));
        }
        if walk.depth >= MAX_HEIGHT {
            return Err(self.corrupt(id, "deeper than any B+tree"));
        }
        let page = self.pool.read(id)?;
        let kind = kind_of(&page, id)?;
        let p = page.payload();
        let n = node::count(p);
        for i in 0..n {
            let key = node::key(p, i);
            if i > 0 && node::key(p, i - 1) >= key {
                return Err(self.corrupt(id, "keys out of order"));
            }
            if low.is_some_and(|low| key < low) || high.is_some_and(|high| key >= high) {
                return Err(self.corrupt(id, "key outside the range its parent assigns"));
            }
        }
        if kind == PageKind::BTreeLeaf {
            walk.shape.leaves += 1;
            walk.shape.entries += n;
            return Ok(1);
        }
        walk.shape.inner_nodes += 1;
        let keys: Vec<Vec<u8>> = (0..n).map(|i| node::key(p, i).to_vec()).collect();
        let children: Vec<PageId> = (0..=n).map(|i| node::child(p, i)).collect();
        drop(page);
        let mut height = None;
        for (i, child) in children.into_iter().enumerate() {
            let child_low = if i == 0 { low } else { Some(&keys[i - 1][..]) };
            let child_high = if i == n { high } else { Some(&keys[i][..]) };
            walk.depth += 1;
            let h = self.check_node(child, child_low, child_high, walk);
            walk.depth -= 1;
            let h = h?;
            if height.is_some_and(|height| height != h) {
                return Err(self.corrupt(id, "leaves at different depths"));
            }
            height = Some(h);
        }
        Ok(height.unwrap_or(0) + 1)
    }

    fn usable(&self) -> Result<()> {
        if self.broken.load(Ordering::Acquire) {
            return Err(StorageError::TreeInconsistent { root: self.root });
        }
        Ok(())
    }

    fn corrupt(&self, page_id: PageId, reason: &str) -> StorageError {
        StorageError::Corrupt {
            page_id,
            reason: reason.to_string(),
        }
    }
}

/// The state of a running scan.
struct Scan<'b, 'v> {
    lower: Bound<&'b [u8]>,
    upper: Bound<&'b [u8]>,
    direction: ScanDirection,
    remaining: usize,
    visited: usize,
    /// Pairs to pass over, in the scan's direction, before the next visit.
    skip: usize,
    visit: &'v mut PassingVisit<'v>,
}

/// Visits a scanned pair (key, value); returns how many pairs to pass over before the next,
/// or `None` to stop the scan.
type PassingVisit<'a> = dyn FnMut(&[u8], &[u8]) -> Option<usize> + 'a;

impl<'b> Scan<'b, '_> {
    /// The leaf to read next: the first, or the one past `resume`, the end of the last
    /// leaf's range in the scan's direction.
    fn probe<'k>(&self, resume: Option<&'k [u8]>) -> Probe<'k>
    where
        'b: 'k,
    {
        match (self.direction, resume) {
            (ScanDirection::Ascending, Some(fence)) => Probe::At(fence),
            (ScanDirection::Ascending, None) => match self.lower {
                Bound::Unbounded => Probe::At(&[]),
                Bound::Included(key) | Bound::Excluded(key) => Probe::At(key),
            },
            (ScanDirection::Descending, Some(fence)) => Probe::Below(fence),
            (ScanDirection::Descending, None) => match self.upper {
                Bound::Unbounded => Probe::Last,
                Bound::Included(key) => Probe::At(key),
                Bound::Excluded(key) => Probe::Below(key),
            },
        }
    }

    /// Visits the pairs of leaf `p` that the scan still wants: within the scan's bounds,
    /// within `range` (the keys the leaf's path routes to it, which it answers for), and
    /// past `resume`. Returns the fence to resume from if the scan goes on beyond this leaf.
    fn leaf(&mut self, p: &[u8], range: &LeafRange, resume: Option<&[u8]>) -> Option<Vec<u8>> {
        use std::cmp::Ordering::{Greater, Less};
        let (mut lower, mut upper) = (self.lower, self.upper);
        if range.lower.set {
            lower = tighter(lower, Bound::Included(&range.lower.key), Greater);
        }
        if range.upper.set {
            upper = tighter(upper, Bound::Excluded(&range.upper.key), Less);
        }
        match (self.direction, resume) {
            (ScanDirection::Ascending, Some(from)) => {
                lower = tighter(lower, Bound::Included(from), Greater);
            }
            (ScanDirection::Descending, Some(below)) => {
                upper = tighter(upper, Bound::Excluded(below), Less);
            }
            (_, None) => {}
        }
        let start = match lower {
            Bound::Unbounded => 0,
            Bound::Included(key) => node::lower_bound_from_ends(p, key, false),
            Bound::Excluded(key) => node::lower_bound_from_ends(p, key, true),
        };
        let end = match upper {
            Bound::Unbounded => node::count(p),
            Bound::Included(key) => node::lower_bound_from_ends(p, key, true),
            Bound::Excluded(key) => node::lower_bound_from_ends(p, key, false),
        };
        let wanted = start..end.max(start);
        // The pairs of `wanted` in the scan's direction, counted from 0.
        let mut step = self.skip;
        while step < wanted.len() {
            let i = match self.direction {
                ScanDirection::Ascending => wanted.start + step,
                ScanDirection::Descending => wanted.end - 1 - step,
            };
            let passed = (self.visit)(node::key(p, i), node::value(p, i));
            self.visited += 1;
            self.remaining -= 1;
            match passed {
                Some(passed) if self.remaining > 0 => step = step.saturating_add(1 + passed),
                _ => {
                    self.skip = 0; // what it was to pass over before this visit, it passed
                    return None;
                }
            }
        }
        // What is left to pass over goes on into the next leaf.
        self.skip = step - wanted.len();
        self.beyond(range).map(<[u8]>::to_vec)
    }

    /// The fence past `range` in the scan's direction, if there are keys beyond it and the
    /// scan's bounds reach them.
    fn beyond<'r>(&self, range: &'r LeafRange) -> Option<&'r [u8]> {
        let fence = match self.direction {
            ScanDirection::Ascending => &range.upper,
            ScanDirection::Descending => &range.lower,
        };
        if !fence.set {
            return None; // the last leaf in this direction
        }
        let reaches = match self.direction {
            // The keys from the fence on.
            ScanDirection::Ascending => in_upper_bound(&fence.key, self.upper),
            // The keys below the fence.
            ScanDirection::Descending => match self.lower {
                Bound::Unbounded => true,
                Bound::Included(key) | Bound::Excluded(key) => key < fence.key.as_slice(),
            },
        };
        reaches.then_some(fence.key.as_slice())
    }
}

/// The tighter of two bounds on the same side of a range: the one whose key compares as
/// `inward` to the other's (`Greater` for lower bounds, `Less` for upper ones), or at equal
/// keys the one that excludes it.
fn tighter<'a>(
    a: Bound<&'a [u8]>,
    b: Bound<&'a [u8]>,
    inward: std::cmp::Ordering,
) -> Bound<&'a [u8]> {
    let (x, y) = match (a, b) {
        (Bound::Unbounded, other) | (other, Bound::Unbounded) => return other,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            (x, y)
        }
    };
    // One comparison: a scan compares its bounds with each leaf's fences.
    match x.cmp(y) {
        std::cmp::Ordering::Equal if matches!(a, Bound::Excluded(_)) => a,
        std::cmp::Ordering::Equal => b,
        order if order == inward => a,
        _ => b,
    }
}

/// Marks a page about to change for a logged operation (see [`BTree::writer`]).
fn mark(page: &mut PageWriteGuard<'_>, id: PageId, redo: &mut Redo) {
    if redo.is_enabled() {
        redo.touch(id, page.lsn());
        page.mark_unlogged();
    }
}

impl BTree {
    /// [`mark`] for a change to this tree; a change without a log record turns off the
    /// acceptance of leaves beside a writer for good (see "Reads beside a writer").
    fn mark(&self, page: &mut PageWriteGuard<'_>, id: PageId, redo: &mut Redo) {
        if !redo.is_enabled() && !self.unlogged_changes.load(Ordering::Relaxed) {
            self.unlogged_changes.store(true, Ordering::SeqCst);
        }
        mark(page, id, redo);
    }
}

/// Exclusive access to a tree for a series of changes, each recorded in a [`Redo`]. See
/// [`BTree::writer`]. With `redo` enabled, every touched page stays unwritable until the
/// caller stamps it ([`BufferPool::stamp`]) with the LSN of the log record holding `redo`.
pub struct TreeWriter<'t> {
    tree: &'t BTree,
    _latch: RwLockWriteGuard<'t, ()>,
    /// The leaf the last insert or update reached (see [`LeafRange`]).
    last: RefCell<LeafRange>,
}

impl Drop for TreeWriter<'_> {
    fn drop(&mut self) {
        // Even again, before the latch is released (the field is dropped after this).
        self.tree.version.fetch_add(1, Ordering::SeqCst);
    }
}

impl TreeWriter<'_> {
    /// Adds `key`; fails with [`StorageError::DuplicateKey`] if it is present.
    pub fn insert(&self, key: &[u8], value: &[u8], redo: &mut Redo) -> Result<()> {
        self.tree
            .modify(key, value, Mode::Insert, redo, &mut self.last.borrow_mut())
    }

    /// Replaces the value of `key`; fails with [`StorageError::KeyNotFound`] if it is absent.
    pub fn update(&self, key: &[u8], value: &[u8], redo: &mut Redo) -> Result<()> {
        self.tree
            .modify(key, value, Mode::Update, redo, &mut self.last.borrow_mut())
    }

    /// Inserts `key` or replaces its value.
    pub fn put(&self, key: &[u8], value: &[u8], redo: &mut Redo) -> Result<()> {
        self.tree
            .modify(key, value, Mode::Put, redo, &mut self.last.borrow_mut())
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: &[u8], redo: &mut Redo) -> Result<bool> {
        // A delete may empty and free a leaf, or collapse the root.
        self.last.borrow_mut().forget();
        let tree = self.tree;
        let found = tree.delete_from(tree.root, 0, key, redo)?;
        if found {
            tree.collapse_root(redo)?;
        }
        Ok(found)
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get_unlatched(key)
    }
}

#[cfg(test)]
mod readers_beside_writers;

#[cfg(test)]
mod bound_tests {
    use super::*;
    use std::cmp::Ordering::{Greater, Less};

    /// Whether `key` lies on the inner side of `bound`: above a lower bound (`inward` is
    /// `Greater`) or below an upper one (`Less`).
    fn admits(bound: Bound<&[u8]>, key: &[u8], inward: std::cmp::Ordering) -> bool {
        match bound {
            Bound::Unbounded => true,
            Bound::Included(b) => key == b || key.cmp(b) == inward,
            Bound::Excluded(b) => key.cmp(b) == inward,
        }
    }

    #[test]
    fn the_tighter_bound_admits_what_both_admit() {
        let keys: [&[u8]; 5] = [b"", b"a", b"aa", b"b", b"c"];
        let bounds: Vec<Bound<&[u8]>> = std::iter::once(Bound::Unbounded)
            .chain(keys.iter().map(|k| Bound::Included(*k)))
            .chain(keys.iter().map(|k| Bound::Excluded(*k)))
            .collect();
        for inward in [Greater, Less] {
            for &a in &bounds {
                for &b in &bounds {
                    let chosen = tighter(a, b, inward);
                    for key in keys.iter().chain([&&b"ab"[..], &&b"d"[..]]) {
                        assert_eq!(
                            admits(chosen, key, inward),
                            admits(a, key, inward) && admits(b, key, inward),
                            "tighter({a:?}, {b:?}, {inward:?}) = {chosen:?} at {key:?}"
                        );
                    }
                }
            }
        }
    }
}
