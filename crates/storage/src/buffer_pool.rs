//! A bounded buffer pool over the data file.
//!
//! # Design note
//!
//! LeanStore (Leis et al., ICDE 2018) avoids a page table with *pointer swizzling*: a parent
//! node holds either a page id or a direct pointer to the cached child, so a hit costs no hash
//! lookup; vmcache (Leis et al., SIGMOD 2023) instead maps the whole data file into virtual
//! memory and keeps a per-page state word, again with no hash table. Both pair this with
//! *optimistic latches* (version counters validated after reading) so that readers never
//! write shared cache lines. Both need `unsafe` (raw pointers into frames, or `mmap` and
//! `madvise`) and a careful epoch or version protocol.
//!
//! This pool takes the classic, simple route, which is enough until the B+tree itself stops
//! taking a tree-level lock:
//!
//! * a **page table** split into `SHARDS` (64) shards, each a `HashMap<PageId, frame>` behind its
//!   own `parking_lot::Mutex` on its own cache lines; page `id` lives in the shard picked by
//!   the top bits of a multiplicative (Fibonacci) hash of `id`. A **hit** locks only that
//!   shard, for a hash lookup and a pin increment, and takes **no global lock**. (The first
//!   version had one mutex over the whole table, taken on every request: two threads doing
//!   B+tree lookups, about three hits each, ran slower than one.) Shards are mutexes, not
//!   `RwLock`s: the critical section is a few tens of nanoseconds, and a shared `RwLock` read
//!   still writes the lock word, so it bounces the same cache line and costs more;
//! * a separate **clock mutex** over CLOCK's hand, taken only on a **miss**, for the victim
//!   search; it is never held across I/O, nor while waiting for a latch;
//! * per-frame **pin counts** (atomics, incremented only under the shard lock of a page mapped
//!   to the frame) and **`parking_lot::RwLock` latches** over the frame contents; a guard holds
//!   both a pin and a latch and drops the latch first, so a frame with pin count 0 is
//!   unlatched (except by `flush_all`, which latches without pinning);
//! * **CLOCK** (second chance) eviction over unpinned frames, whose latch the evicting thread
//!   takes with `try_write` (no waiting while it holds the clock mutex);
//! * a dirty victim is written back (after the **write-ahead hook** and [`Page::seal`]) while
//!   its old page id is *still mapped* to the frame, so a concurrent reader of that page waits
//!   on the latch and then retries instead of reading a stale image from disk; a failed read
//!   unmaps the page, so the next request reads it again.
//!
//! **Mapping invariant.** Only the thread holding a frame's write latch maps a page to the
//! frame or unmaps one from it, so while the latch is free the pages mapped to a frame are
//! exactly its `page_id` (or none). During a load the loader holds the latch and the frame is
//! mapped from the new page and, for a dirty victim until its write-back is done, the old one.
//!
//! **Why an evictor cannot race a pinner.** The evictor holds the victim's latch (so, by the
//! invariant, the old page X is the only page mapped to it) and then, under X's shard lock,
//! checks that the pin count is 0, pins the frame itself and, for a clean victim, unmaps X; a
//! hit on X pins under that same shard lock, so it comes either before (the evictor sees the
//! pin and skips the frame) or after (X is unmapped and the request misses, or X is still
//! mapped because the victim is dirty and the request waits on the latch, then sees another
//! page id and retries). The new page Y is then mapped under Y's shard lock, after checking
//! that no other thread brought Y in meanwhile (if one did, the evictor gives its frame back,
//! emptied if it was clean, and uses that one). Lock order is clock → frame latch (`try_write`
//! only) → one shard; a shard lock is never held while waiting for another lock (a pinless
//! hit, below, only *tries* a frame's read latch under it), so nothing can deadlock on the
//! page table.
//!
//! **Pinless hits.** A read that finds its page mapped tries the frame's read latch *under the
//! shard lock* (`try_read`, never waiting). If it gets it, it needs no pin: an evictor must
//! hold the write latch to take the frame, so it cannot while the read latch is held, and the
//! mapping invariant says the frame holds exactly the page (checked by an assertion). Only if
//! a writer holds the latch does the read pin the frame and wait for the latch, as before.
//! That saves an atomic read-modify-write of the frame's pin count and its undo per hit.
//!
//! **Frame hints.** Even a pinless hit locked the page's shard: a line that every thread
//! writes, so two threads reading random leaves bounced it between their cores on about every
//! other hit. A hit therefore first looks in a lock-free, direct-mapped table of hints
//! (`HINTS_PER_FRAME` slots per frame, each an atomic word packing a page id and a frame,
//! written when a page is mapped or found through its shard, and never cleared), tries the
//! hinted frame's read latch and, holding it, checks that the frame holds the page. A hint
//! may be stale or overwritten by another page's; it is only ever a guess, and the check
//! under the latch is what makes the hit safe: while a frame's latch is free, the frame holds
//! page `p` exactly when `p` is mapped to it (the mapping invariant), and holding the read
//! latch keeps any loader or evictor out. A wrong guess falls back to the shard. Such hits are
//! counted per frame, on the line the latch has just written.
//!
//! **Frame versions.** Every time a frame's write latch is taken (to change the page, load
//! another page into the frame, or write it back when it is evicted; a checkpoint writes
//! under the upgradable read latch, upgraded only to store the page's checksum, which is not
//! counted) its version, a counter in an array apart from the frames, is incremented before
//! anything changes. The version is therefore stable while a read latch is held, and a copy
//! of a page made under the read latch, tagged with the frame and version
//! ([`FrameVersion`]), is still the frame's exact content but for the checksum field for as
//! long as the version is unchanged ([`BufferPool::is_unchanged`]): that is all the B+tree
//! needs to route point reads through per-thread copies of inner nodes without touching the
//! shared latch, pin or shard of those pages (`btree/mod.rs`, "Optimistic point reads").
//!
//! What is left shared: a hit on a page that is not routed through a copy (leaves, scans,
//! writers) latches its frame, a line written by every thread that reads the page; a miss, a
//! write and a hit whose hint is wrong also lock the page's shard. Frames and shards are
//! padded to 128 bytes so that a hot frame or shard does not share a cache line with its
//! neighbours.
//!
//! # Redo at first load
//!
//! After a crash, recovery does not redo the log into every page before the database opens:
//! it hands the pool a [`PendingRedo`] that knows which pages the log changed since the
//! checkpoint, and the pool asks it to bring each such page up to date when the page is
//! first loaded, under the frame's write latch and before anyone sees the frame (the
//! loader is the only thread that can, by the mapping invariant). A redone page is dirty
//! since epoch 0, the recovery's epoch: the changes it got are logged from the checkpoint
//! on. A page allocated afresh tells the hook to forget it. Once every pending page is
//! redone (the first checkpoint sees to it), the hook is removed and a miss costs one
//! atomic load more than before.
//!
//! # Rules for callers
//!
//! A thread must not ask for a page it already holds a write guard on (self-deadlock), must
//! acquire latches of several pages in a consistent order, and must hold no guard while
//! calling [`BufferPool::flush_all`]. When no frame can be reused (pinned, latched, or
//! holding a change whose log record is not appended yet), a request waits up to 100 ms
//! for one, then fails with [`StorageError::PoolExhausted`].
//!
//! # Fail-stop
//!
//! After a failed write or sync of the data file the pool refuses every later `write`,
//! `allocate` and `flush_all` with [`StorageError::Stopped`]: after a failed `fsync` Linux may
//! have dropped the dirty pages, so the file's state is unknown and only recovery from the
//! log can say what it should be. Reads keep working.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tailstore_media::File;

use crate::doublewrite::DoubleWrite;
use crate::error::{HookError, Result, StorageError};
use crate::interleave::{self, Point};
use crate::page::{Lsn, Page, PageId, PageIdMap, PageKind};

/// Called with a dirty page's LSN before the page is written; must return only once the log
/// is durable up to that LSN (the write-ahead rule). An error prevents the write.
pub type WriteAheadHook = Box<dyn Fn(Lsn) -> std::result::Result<(), HookError> + Send + Sync>;

/// The log's changes to pages that recovery has not redone yet (see "Redo at first load").
/// Called with the frame's write latch held: it must not ask the pool for any page.
pub trait PendingRedo: Send + Sync {
    /// Fills `page` with page `id` up to date: `read` reads it from the data file, if the
    /// redo needs what is there. Returns whether it redid anything (the page is then dirty);
    /// with nothing pending for `id` it only reads.
    fn load(
        &self,
        id: PageId,
        page: &mut Page,
        read: &mut dyn FnMut(&mut Page) -> Result<()>,
    ) -> Result<bool>;
    /// Page `id` is being allocated afresh (it was free): what the log held for it is moot.
    fn forget(&self, id: PageId);
}

/// log2 of the number of page-table shards.
/// How long a request waits for a frame to become usable before the pool is exhausted.
const VICTIM_PATIENCE: Duration = Duration::from_millis(100);

const SHARD_BITS: u32 = 6;
/// Number of page-table shards (a power of two).
const SHARDS: usize = 1 << SHARD_BITS;

/// Hint slots per frame (rounded up to a power of two in all): few enough pages share a
/// slot that most hits find theirs.
const HINTS_PER_FRAME: usize = 4;
const _: () = assert!(HINTS_PER_FRAME >= 2, "a one-slot table would shift by 64");
/// Bits of a hint that hold the frame index; the page id takes the rest.
const HINT_FRAME_BITS: u32 = 24;
/// The largest page id a hint can hold: the packed hint of any page stays below `NO_HINT`.
const MAX_HINTED_PAGE: u64 = (u64::MAX >> HINT_FRAME_BITS) - 1;
/// An empty hint slot.
const NO_HINT: u64 = u64::MAX;

/// A snapshot of the pool's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Requests served from a frame.
    pub hits: u64,
    /// Requests that needed a frame (a read from disk, or a newly allocated page).
    pub misses: u64,
    /// Pages read from the data file.
    pub pages_read: u64,
    /// Pages written to the data file.
    pub pages_written: u64,
    /// Frames taken from another page.
    pub evictions: u64,
    /// Frames that have never held a page, and so have no memory yet.
    pub frames_without_memory: usize,
    /// Pages of memory made ready for them ([`BufferPool::prepare_fresh_frames`]).
    pub fresh_pages_ready: usize,
}

/// Counters of the miss path (hits are counted per shard).
#[derive(Default)]
struct Counters {
    misses: AtomicU64,
    pages_read: AtomicU64,
    pages_written: AtomicU64,
    evictions: AtomicU64,
}

/// What a frame holds, behind its latch.
struct FrameData {
    /// The page in the frame; `None` while empty or after a failed read.
    page_id: Option<PageId>,
    /// Changed since it was last written. Set only under the write latch; cleared under
    /// the write latch (eviction) or by the checkpoint under the upgradable read latch,
    /// which excludes every writer, hence an atomic (see [`BufferPool::flush_all`]).
    dirty: AtomicBool,
    /// The pool's epoch (see [`BufferPool::begin_epoch`]) when the page last went from clean
    /// to dirty: every change the frame holds that is not in the data file was made in this
    /// epoch or a later one. Meaningful only while `dirty`; set under the write latch.
    dirty_since: u64,
    /// Changed by a transaction whose log record is not appended yet, so the page LSN does
    /// not cover the change: the frame must not be written until [`BufferPool::stamp`].
    unlogged: bool,
    page: Page,
}

impl FrameData {
    /// Notes a change under the write latch: a clean page becomes dirty since `epoch`.
    fn mark_dirty(&mut self, epoch: u64) {
        let dirty = self.dirty.get_mut();
        if !*dirty {
            *dirty = true;
            self.dirty_since = epoch;
        }
    }
}

/// A frame's metadata (the page image itself is boxed). Aligned to 128 bytes so that the
/// latch and pin count of a hot frame do not share a cache line (or the pair of lines the
/// adjacent-line prefetcher fetches together) with another frame's.
#[repr(align(128))]
struct Frame {
    latch: RwLock<FrameData>,
    /// Guards alive (or being created) on this frame. Incremented only under the shard lock
    /// of a page mapped to this frame (see the module documentation).
    pins: AtomicU32,
    /// CLOCK's reference bit.
    referenced: AtomicBool,
    /// Hits served from this frame through its hint (see "Frame hints"): counted here, on
    /// the line the read latch has just written, instead of in a shared counter.
    hinted_hits: AtomicU64,
}

/// One shard of the page table.
struct ShardMap {
    frames: PageIdMap<usize>,
    /// Hits served through this shard.
    hits: u64,
}

/// A shard on its own cache lines.
#[repr(align(128))]
struct Shard(Mutex<ShardMap>);

/// In-memory page allocation state.
///
/// A later checkpoint must persist both fields (e.g. in a header page): the free list, or
/// freed pages leak after a restart, and the high-water mark, which today is recomputed from
/// the file length and so misses pages allocated but not yet written.
struct Allocation {
    free: Vec<PageId>,
    next: u64,
}

/// A bounded cache of data-file pages. See the module documentation.
pub struct BufferPool {
    file: Arc<dyn File>,
    frames: Box<[Frame]>,
    /// Per frame, the number of times its write latch was taken (see [`FrameVersion`]). Apart
    /// from the frames so that validating a copy reads a line that only writers write.
    versions: Box<[AtomicU64]>,
    /// Where pages probably are: see "Frame hints". `hints.len()` is a power of two.
    hints: Box<[AtomicU64]>,
    /// The page table, `SHARDS` shards.
    shards: Box<[Shard]>,
    /// CLOCK hand: the next frame to consider. Held for the victim search of a miss only.
    clock: Mutex<usize>,
    allocation: Mutex<Allocation>,
    write_ahead: WriteAheadHook,
    /// Where each page is copied before it is written in place, if anywhere (PMEM modes).
    doublewrite: Option<Arc<DoubleWrite>>,
    counters: Counters,
    /// Numbers the stretches between checkpoints' starts (see [`BufferPool::begin_epoch`]).
    epoch: AtomicU64,
    /// Set once `failure` is (so that `write` need not lock it while the pool runs).
    stopped: AtomicBool,
    /// Set once a data-file write or sync failed (fail-stop); holds the cause.
    failure: Mutex<Option<String>>,
    /// Whether `pending_redo` is set, so that a miss need not lock it once recovery is done.
    redo_pending: AtomicBool,
    pending_redo: RwLock<Option<Arc<dyn PendingRedo>>>,
    /// No page read from the data file may carry an LSN past this: the log's end at open,
    /// raised by every page written since (see [`BufferPool::bound_page_lsns`]).
    lsn_ceiling: AtomicU64,
    fresh: FreshFrames,
    /// [`crate::Plant::PageBeforeItsLog`] planted: pages are written without the log.
    page_before_its_log: bool,
}

/// Memory for the frames that have never held a page, made ready ahead of them (see
/// [`BufferPool::prepare_fresh_frames`]).
struct FreshFrames {
    /// Frames still without memory.
    without_memory: AtomicUsize,
    /// Pages whose memory is written and mapped, for such frames.
    ready: Mutex<Vec<Page>>,
    /// `ready`'s length, read without its lock.
    ready_count: AtomicUsize,
}

/// [`BufferPool::prepare_fresh_frames`] tops the ready pages up to this many (1 MiB)...
const FRESH_READY_TARGET: usize = 64;
/// ...once fewer than this many are left.
const FRESH_READY_LOW: usize = 16;

/// How to fill a frame that does not hold the requested page.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// Read the page from the data file and verify it.
    Read,
    /// A newly allocated page: format it, no read.
    Fresh,
}

/// A frame taken for a new page by [`BufferPool::claim_victim`]: pinned and write-latched.
struct Victim<'a> {
    frame: usize,
    data: RwLockWriteGuard<'a, FrameData>,
    pin: Pin<'a>,
    /// The page it held, if that page is still mapped to it (a dirty page, unmapped only
    /// once written back).
    still_mapped: Option<PageId>,
}

impl BufferPool {
    /// A pool of `capacity` frames (at least one) over `file`. Pages are numbered from 0 at the start of the
    /// file; new pages are appended after the last whole page of the file.
    pub fn new(file: Arc<dyn File>, capacity: usize, write_ahead: WriteAheadHook) -> Result<Self> {
        let len = file.len()?;
        let capacity = capacity.max(1);
        let frames = (0..capacity)
            .map(|_| Frame {
                latch: RwLock::new(FrameData {
                    page_id: None,
                    dirty: AtomicBool::new(false),
                    dirty_since: 0,
                    unlogged: false,
                    // Allocated when the frame first gets a page: zeroing every frame up
                    // front would make opening a large pool (a restart) cost a pass over
                    // all of its memory.
                    page: Page::unallocated(),
                }),
                pins: AtomicU32::new(0),
                referenced: AtomicBool::new(false),
                hinted_hits: AtomicU64::new(0),
            })
            .collect();
        // Room for an even share of the frames plus some skew, so that shards rarely grow.
        let per_shard = capacity.div_ceil(SHARDS) + capacity.div_ceil(SHARDS * 4) + 4;
        let shards = (0..SHARDS)
            .map(|_| {
                Shard(Mutex::new(ShardMap {
                    frames: HashMap::with_capacity_and_hasher(per_shard, Default::default()),
                    hits: 0,
                }))
            })
            .collect();
        Ok(BufferPool {
            file,
            frames,
            versions: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            hints: (0..(capacity * HINTS_PER_FRAME).next_power_of_two())
                .map(|_| AtomicU64::new(NO_HINT))
                .collect(),
            shards,
            clock: Mutex::new(0),
            allocation: Mutex::new(Allocation {
                free: Vec::new(),
                next: len.div_ceil(crate::PAGE_SIZE as u64),
            }),
            write_ahead,
            doublewrite: None,
            counters: Counters::default(),
            epoch: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            failure: Mutex::new(None),
            redo_pending: AtomicBool::new(false),
            pending_redo: RwLock::new(None),
            lsn_ceiling: AtomicU64::new(Lsn::MAX),
            fresh: FreshFrames {
                without_memory: AtomicUsize::new(capacity),
                ready: Mutex::new(Vec::new()),
                ready_count: AtomicUsize::new(0),
            },
            page_before_its_log: false,
        })
    }

    /// Makes memory ready for the next frames that get their first page, if any frame is
    /// still without memory and few pages are ready. A frame's memory is allocated when it
    /// first gets a page, and the process's first write to fresh memory stops for the kernel
    /// to allocate and clear it (on this VM 1–17 ms per 2 MiB huge page, the most for memory
    /// the host had taken back): a new database growing, or a restarted one reading its
    /// pages in, paid that inside B+tree splits and loads, under the tree's latch, while
    /// every other writer of the tree waited. Writers call this before they take the latch
    /// (`BTree::writer`); the stop then happens there, holding nothing. Cheap when there is
    /// nothing to do: two atomic loads.
    pub fn prepare_fresh_frames(&self) {
        let fresh = &self.fresh;
        let ready = fresh.ready_count.load(Ordering::Relaxed);
        let without = fresh.without_memory.load(Ordering::Relaxed);
        if ready >= FRESH_READY_LOW || ready >= without {
            return;
        }
        let made: Vec<Page> = (ready..FRESH_READY_TARGET.min(without))
            .map(|_| Page::zeroed_and_mapped())
            .collect();
        let mut pages = fresh.ready.lock();
        pages.extend(made);
        // Two writers may have topped up at once: never more than the frames that need them.
        pages.truncate(fresh.without_memory.load(Ordering::Relaxed));
        fresh.ready_count.store(pages.len(), Ordering::Relaxed);
    }

    /// Gives a frame's page its memory when the frame never had any: a ready page if there
    /// is one (see [`BufferPool::prepare_fresh_frames`]), else newly allocated.
    fn give_memory(&self, page: &mut Page) {
        if !page.is_unallocated() {
            return;
        }
        let fresh = &self.fresh;
        let without = fresh.without_memory.fetch_sub(1, Ordering::Relaxed);
        assert!(
            without > 0,
            "more frames got their first page than the pool has"
        );
        let ready = if fresh.ready_count.load(Ordering::Relaxed) > 0 {
            let mut pages = fresh.ready.lock();
            let taken = pages.pop();
            fresh.ready_count.store(pages.len(), Ordering::Relaxed);
            taken
        } else {
            None
        };
        match ready {
            Some(ready) => *page = ready,
            None => page.allocate(),
        }
    }

    /// Makes every load of a page go through `pending` (see "Redo at first load"), until
    /// [`BufferPool::end_pending_redo`]. Set before any page is read.
    pub fn set_pending_redo(&self, pending: Arc<dyn PendingRedo>) {
        let loaded = self.counters.misses.load(Ordering::Relaxed);
        assert_eq!(
            loaded, 0,
            "pages were loaded before the pending redo was set"
        );
        *self.pending_redo.write() = Some(pending);
        self.redo_pending.store(true, Ordering::Release);
    }

    /// From now on a page read from the data file whose LSN is past `log_end` (the end of
    /// the log an open recovered), or past the LSN of every page written since, is corrupt.
    /// The write-ahead rule puts every page's changes in the log before the page, so such a
    /// page holds changes the log lost: a log copied back from an older state, or a tail the
    /// media dropped. Used anyway it would be worse than damaged: redo skips a record whose
    /// LSN is at or below the page's, so the commits logged next at those LSNs would be
    /// skipped for this page by the next recovery. Set before any page is read.
    pub fn bound_page_lsns(&self, log_end: Lsn) {
        self.lsn_ceiling.store(log_end, Ordering::SeqCst);
    }

    /// Loads no longer consult the pending redo: every page it held is redone.
    pub fn end_pending_redo(&self) {
        self.redo_pending.store(false, Ordering::Release);
        *self.pending_redo.write() = None;
    }

    /// The pending redo, while there is one.
    fn pending_redo(&self) -> Option<Arc<dyn PendingRedo>> {
        if !self.redo_pending.load(Ordering::Acquire) {
            return None;
        }
        self.pending_redo.read().clone()
    }

    /// Makes room for pages up to `id`: recovery found the log changing it, so it was
    /// allocated before the crash even if it never reached the data file.
    pub fn note_page_in_use(&self, id: PageId) {
        let mut allocation = self.allocation.lock();
        allocation.next = allocation.next.max(id.0 + 1);
    }

    /// Makes every write of a page go through `area` first (see `doublewrite.rs`), which must
    /// have restored the data file already.
    pub fn with_doublewrite(mut self, area: Arc<DoubleWrite>) -> Self {
        self.doublewrite = Some(area);
        self
    }

    /// Plants `plants` in the pool (`plant.rs`); without effect in a build without debug
    /// assertions.
    pub fn with_plants(mut self, plants: &[crate::Plant]) -> Self {
        self.page_before_its_log =
            cfg!(debug_assertions) && plants.contains(&crate::Plant::PageBeforeItsLog);
        self
    }

    /// Releases the double-write area's lock on its file, at the database's close (handles
    /// may keep the pool, and so the area's mapping, alive past it).
    pub fn unlock_doublewrite(&self) -> Result<()> {
        match &self.doublewrite {
            Some(area) => area.unlock(),
            None => Ok(()),
        }
    }

    /// Whether a page torn by a crash is restored at open (from the double-write area), so
    /// that the log need not hold full images of pages.
    pub fn restores_torn_pages(&self) -> bool {
        self.doublewrite.is_some()
    }

    /// Number of frames.
    pub fn capacity(&self) -> usize {
        self.frames.len()
    }

    /// The page `id` for reading (shared latch).
    pub fn read(&self, id: PageId) -> Result<PageReadGuard<'_>> {
        if let Some(hit) = self.read_hit(id) {
            return Ok(hit);
        }
        loop {
            let (frame, pin) = self.pin_or_load(id, Fill::Read)?;
            interleave::reached(Point::PinnedBeforeLatch);
            let guard = self.frames[frame].latch.read();
            if guard.page_id == Some(id) {
                return Ok(self.read_guard(frame, guard, Some(pin)));
            }
            // The frame was repurposed or its load failed while we waited: try again.
        }
    }

    /// A hit whose frame latch is free of writers, without a pin: through the page's hint and
    /// no lock at all, else with the read latch taken under the shard lock (see "Pinless
    /// hits" and "Frame hints" in the module documentation).
    fn read_hit(&self, id: PageId) -> Option<PageReadGuard<'_>> {
        if let Some(frame) = self.hinted_frame(id) {
            interleave::reached(Point::HintBeforeLatch);
            let meta = &self.frames[frame];
            if let Some(guard) = meta.latch.try_read() {
                if guard.page_id == Some(id) {
                    meta.hinted_hits.fetch_add(1, Ordering::Relaxed);
                    set_referenced(meta);
                    return Some(self.read_guard(frame, guard, None));
                }
            }
        }
        let mut shard = self.shard(id);
        let frame = *shard.frames.get(&id)?;
        let guard = self.frames[frame].latch.try_read()?;
        // The latch is free of writers, so `id` is the only page mapped to the frame.
        assert_eq!(
            guard.page_id,
            Some(id),
            "page table maps a page to another's frame"
        );
        self.note_hit(&mut shard, frame);
        self.set_hint(id, frame);
        Some(self.read_guard(frame, guard, None))
    }

    /// The hint slot of page `id`; `None` for a page id too large to hint.
    fn hint_slot(&self, id: PageId) -> Option<&AtomicU64> {
        if id.0 > MAX_HINTED_PAGE {
            return None;
        }
        // The top bits of a Fibonacci hash; at least `HINTS_PER_FRAME` slots, so the shift
        // is below 64.
        let shift = u64::BITS - self.hints.len().trailing_zeros();
        Some(&self.hints[(id.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize])
    }

    /// The frame page `id`'s hint slot names for it, if it names `id`.
    fn hinted_frame(&self, id: PageId) -> Option<usize> {
        let held = self.hint_slot(id)?.load(Ordering::Relaxed);
        let frame = (held & ((1 << HINT_FRAME_BITS) - 1)) as usize;
        (held != NO_HINT && held >> HINT_FRAME_BITS == id.0 && frame < self.frames.len())
            .then_some(frame)
    }

    /// Notes that page `id` is in `frame` (written only when it changes, so that hits on a
    /// hot page do not take the slot's line from other cores).
    fn set_hint(&self, id: PageId, frame: usize) {
        let Some(slot) = self.hint_slot(id) else {
            return;
        };
        if frame >= 1 << HINT_FRAME_BITS {
            return;
        }
        let packed = (id.0 << HINT_FRAME_BITS) | frame as u64;
        if slot.load(Ordering::Relaxed) != packed {
            slot.store(packed, Ordering::Relaxed);
        }
    }

    fn read_guard<'a>(
        &'a self,
        frame: usize,
        guard: RwLockReadGuard<'a, FrameData>,
        pin: Option<Pin<'a>>,
    ) -> PageReadGuard<'a> {
        PageReadGuard {
            guard,
            _pin: pin,
            frame,
            version: &self.versions[frame],
        }
    }

    /// Whether the frame of `version` has not been write-latched since `version` was taken:
    /// then it still holds the same page, unchanged.
    pub fn is_unchanged(&self, version: FrameVersion) -> bool {
        self.versions
            .get(version.frame)
            .is_some_and(|v| v.load(Ordering::SeqCst) == version.count)
    }

    /// [`BufferPool::is_unchanged`], for a copy about to be used in the page's place: the
    /// use counts as a request of the page for the eviction clock. Otherwise the inner nodes
    /// every descent routes through, read from copies and no longer from the pool, would
    /// look unused and be evicted first, each eviction a read (and the copies made again).
    pub fn is_unchanged_for_use(&self, version: FrameVersion) -> bool {
        let unchanged = self.is_unchanged(version);
        if unchanged {
            set_referenced(&self.frames[version.frame]);
        }
        unchanged
    }

    /// Frame `index`'s write latch, counted in its version before anything can change.
    fn write_latch(&self, index: usize) -> RwLockWriteGuard<'_, FrameData> {
        let guard = self.frames[index].latch.write();
        self.versions[index].fetch_add(1, Ordering::SeqCst);
        guard
    }

    /// [`BufferPool::write_latch`] if it is free.
    fn try_write_latch(&self, index: usize) -> Option<RwLockWriteGuard<'_, FrameData>> {
        let guard = self.frames[index].latch.try_write()?;
        self.versions[index].fetch_add(1, Ordering::SeqCst);
        Some(guard)
    }

    /// The page `id` for writing (exclusive latch); the frame is marked dirty.
    pub fn write(&self, id: PageId) -> Result<PageWriteGuard<'_>> {
        self.check_running()?;
        self.write_with(id, Fill::Read)
    }

    /// `Err(Stopped)` once a data-file write or sync has failed, on any thread.
    pub fn check_running(&self) -> Result<()> {
        if !self.stopped.load(Ordering::Acquire) {
            return Ok(());
        }
        match self.failure.lock().as_ref() {
            Some(cause) => Err(StorageError::Stopped {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Records the first failure cause (fail-stop).
    fn set_failure(&self, cause: impl FnOnce() -> String) {
        self.failure.lock().get_or_insert_with(cause);
        self.stopped.store(true, Ordering::Release);
    }

    /// Records the first I/O failure (fail-stop) and returns it.
    fn fail_stop(&self, err: tailstore_media::MediaError) -> StorageError {
        self.set_failure(|| err.to_string());
        StorageError::Media(err)
    }

    /// A new page, formatted as [`PageKind::Free`] with LSN 0, for writing. Reuses a freed
    /// page if there is one, else grows the file (the page reaches disk when it is flushed).
    pub fn allocate(&self) -> Result<(PageId, PageWriteGuard<'_>)> {
        self.check_running()?;
        let id = {
            let mut allocation = self.allocation.lock();
            match allocation.free.pop() {
                Some(id) => id,
                None => {
                    allocation.next += 1;
                    PageId(allocation.next - 1)
                }
            }
        };
        match self.write_with(id, Fill::Fresh) {
            Ok(guard) => Ok((id, guard)),
            Err(err) => {
                self.allocation.lock().free.push(id);
                Err(err)
            }
        }
    }

    /// Returns page `id` to the free list. The caller must hold no guard on it and no
    /// reference to it may remain; the page is reformatted when it is allocated again.
    pub fn free(&self, id: PageId) {
        self.allocation.lock().free.push(id);
    }

    /// Writes every dirty page (after the write-ahead hook), then syncs the data file. A page
    /// changed by a transaction that has not logged yet is waited for. The calling thread
    /// must hold no guard.
    ///
    /// Each page is written from its frame under the frame's *upgradable read* latch, which
    /// it keeps until the write is done: readers go on meanwhile, and the frame's version
    /// does not move, so the B+tree's per-thread copies of inner nodes stay valid across a
    /// checkpoint (taking the write latch of every frame made every reader copy its inner
    /// nodes again). Writers of the page wait for the write, as they did before; the latch
    /// keeps an evictor out, so no one reads the page from disk before it is written.
    pub fn flush_all(&self) -> Result<()> {
        self.flush_dirty_before(u64::MAX)
    }

    /// Like [`BufferPool::flush_all`], but writes only the pages dirty since an epoch before
    /// `epoch` (see [`BufferPool::begin_epoch`]); pages first changed in `epoch` or later
    /// stay dirty. The sync covers every write that finished before it, evictions' too.
    pub fn flush_dirty_before(&self, epoch: u64) -> Result<()> {
        self.check_running()?;
        for index in 0..self.frames.len() {
            if let Some(area) = &self.doublewrite {
                // Before the frame's latch is taken (see `DoubleWrite::make_room`).
                area.make_room(self.file.as_ref())
                    .map_err(|e| self.fail_stop(e))?;
            }
            self.flush_frame(index, epoch)?;
        }
        let synced = match &self.doublewrite {
            Some(area) => area.sync(self.file.as_ref()),
            None => self.file.sync_data(),
        };
        synced.map_err(|e| self.fail_stop(e))?;
        // A write or sync that failed on another thread (an eviction's) since this flush
        // began may have lost a page this flush counts on as durable, and this sync's
        // success does not vouch for it: Linux reports a lost write-back to one sync only.
        self.check_running()
    }

    /// Writes frame `index`'s page if it is dirty since before `epoch` (see
    /// [`BufferPool::flush_all`]).
    ///
    /// The page is sealed in its frame rather than in a copy (one copy and one scratch page
    /// fewer, ARCHITECTURE decision 101): the checksum is computed under the upgradable
    /// latch, which excludes writers but not readers, and stored under the latch upgraded for
    /// that moment only. The store changes only the checksum field, which no reader of a
    /// frame looks at (it is checked when a page is read from the file), so the frame's
    /// version does not move (see [`FrameVersion`]).
    fn flush_frame(&self, index: usize, epoch: u64) -> Result<()> {
        let mut data = loop {
            let data = self.frames[index].latch.upgradable_read();
            if !data.unlogged {
                break data;
            }
            drop(data);
            self.check_running()?;
            std::thread::yield_now();
        };
        let old_enough = data.dirty.load(Ordering::Relaxed) && data.dirty_since < epoch;
        let Some(id) = data.page_id.filter(|_| old_enough) else {
            return Ok(());
        };
        self.write_ahead_of(id, &data.page)?;
        let checksum = data.page.checksum();
        data.with_upgraded(|data| data.page.store_checksum(checksum));
        self.write_sealed(id, &data.page)?;
        // No writer can have changed the page since its checksum: they need the write latch.
        data.dirty.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// Starts a new epoch and returns its number (the pool opens in epoch 0). A checkpoint
    /// starts one at the log position it records, while no log append is in flight. Every
    /// change is made to its page (reading the epoch) before its log record is appended, so
    /// a change whose record begins before epoch `e`'s position was made in an earlier
    /// epoch: a page dirty since `e` or later holds no change logged before that position
    /// that the data file lacks. So once [`BufferPool::flush_dirty_before`]`(e)` returns,
    /// redo may start at epoch `e`'s position.
    pub fn begin_epoch(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The current epoch (see [`BufferPool::begin_epoch`]). Relaxed is enough: a change reads
    /// it before its record's append, which happens before the checkpoint's exclusive hold on
    /// appends in which the epoch moves on, so the change cannot see the later epoch.
    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Sets the LSN of page `id`, changed under [`PageWriteGuard::mark_unlogged`], to the end
    /// of the log record that describes the change, and lets the page be written again.
    pub fn stamp(&self, id: PageId, lsn: Lsn) -> Result<()> {
        let mut guard = self.write_with(id, Fill::Read)?;
        guard.guard.page.set_lsn(lsn);
        guard.guard.unlogged = false;
        Ok(())
    }

    /// Makes the pool fail-stop from outside: a caller that changed pages but could not log
    /// the change (their state is now unknown) stops every later change.
    pub fn stop(&self, cause: String) {
        self.set_failure(|| cause);
    }

    /// Replaces the allocation state (after recovery rebuilt it): pages `>= next` are
    /// unused, and `free` lists the unused ones below.
    pub fn set_allocation(&self, next: u64, free: Vec<PageId>) {
        let mut allocation = self.allocation.lock();
        allocation.next = next;
        allocation.free = free;
    }

    /// Pages of the data file in use or free below the high-water mark: the file's size in
    /// pages once everything is flushed.
    pub fn page_count(&self) -> u64 {
        self.allocation.lock().next
    }

    /// The counters so far.
    pub fn stats(&self) -> PoolStats {
        let c = &self.counters;
        PoolStats {
            hits: self
                .shards
                .iter()
                .map(|shard| shard.0.lock().hits)
                .sum::<u64>()
                + self
                    .frames
                    .iter()
                    .map(|f| f.hinted_hits.load(Ordering::Relaxed))
                    .sum::<u64>(),
            misses: c.misses.load(Ordering::Relaxed),
            pages_read: c.pages_read.load(Ordering::Relaxed),
            pages_written: c.pages_written.load(Ordering::Relaxed),
            evictions: c.evictions.load(Ordering::Relaxed),
            frames_without_memory: self.fresh.without_memory.load(Ordering::Relaxed),
            fresh_pages_ready: self.fresh.ready_count.load(Ordering::Relaxed),
        }
    }

    fn write_with(&self, id: PageId, fill: Fill) -> Result<PageWriteGuard<'_>> {
        loop {
            let (frame, pin) = self.pin_or_load(id, fill)?;
            let mut guard = self.write_latch(frame);
            if guard.page_id == Some(id) {
                if fill == Fill::Fresh {
                    // A freed page that was still cached: start from a clean image.
                    guard.page.format(id, PageKind::Free);
                }
                guard.mark_dirty(self.epoch());
                return Ok(PageWriteGuard { guard, _pin: pin });
            }
        }
    }

    /// The page-table shard of page `id`: the top bits of a Fibonacci hash of the id.
    fn shard(&self, id: PageId) -> MutexGuard<'_, ShardMap> {
        let index = id.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (u64::BITS - SHARD_BITS);
        self.shards[index as usize].0.lock()
    }

    /// A hit: pins the frame `id` is mapped to in `shard` (its locked shard), if any.
    fn pin_mapped(&self, shard: &mut ShardMap, id: PageId) -> Option<(usize, Pin<'_>)> {
        let frame = *shard.frames.get(&id)?;
        let pin = self.pin(frame);
        self.note_hit(shard, frame);
        Some((frame, pin))
    }

    /// Counts a hit in its (locked) shard and sets the frame's reference bit.
    fn note_hit(&self, shard: &mut ShardMap, frame: usize) {
        shard.hits += 1;
        set_referenced(&self.frames[frame]);
    }

    /// Pins the frame holding `id`, bringing the page in first if needed. On return the page
    /// is in the frame unless a concurrent load failed (the caller re-checks under the latch).
    fn pin_or_load(&self, id: PageId, fill: Fill) -> Result<(usize, Pin<'_>)> {
        // Hit: one shard lock, no global one.
        if let Some(hit) = self.pin_mapped(&mut self.shard(id), id) {
            return Ok(hit);
        }
        // Miss. The shard lock is not held across the victim search (lock order is clock →
        // shard), so another thread may bring `id` in meanwhile: checked again below.
        let Victim {
            frame,
            mut data,
            pin,
            still_mapped,
        } = self.claim_victim()?;
        interleave::reached(Point::VictimClaimed);
        {
            let mut shard = self.shard(id);
            if shard.frames.contains_key(&id) {
                // Give the victim back first (releasing a latch never waits), so that a
                // thread holds at most one pin at a time. A clean victim's page was unmapped:
                // empty the frame (the mapping invariant); a dirty one's is mapped and intact.
                if still_mapped.is_none() {
                    data.page_id = None;
                    *data.dirty.get_mut() = false;
                }
                drop(data); // latch before pin, as guards do
                drop(pin);
                return Ok(self
                    .pin_mapped(&mut shard, id)
                    .expect("mapped, under the lock"));
            }
            // Map the new page now, so that concurrent requests for it wait on our latch
            // instead of loading it twice.
            shard.frames.insert(id, frame);
        }
        self.set_hint(id, frame);
        self.counters.misses.fetch_add(1, Ordering::Relaxed);

        if let Some(old) = still_mapped {
            // A dirty victim: write it back while `old` is still mapped to this frame, so that
            // a reader of `old` waits on our latch instead of reading a stale image from disk.
            if let Err(err) = self.write_back(&mut data) {
                // The frame still holds the old (dirty) page, still mapped; give up on `id`.
                self.unmap(id, frame);
                drop(data);
                drop(pin);
                return Err(err);
            }
            self.unmap(old, frame);
            self.counters.evictions.fetch_add(1, Ordering::Relaxed);
        }

        self.give_memory(&mut data.page);
        let filled = match fill {
            Fill::Fresh => {
                if let Some(pending) = self.pending_redo() {
                    pending.forget(id);
                }
                data.page.format(id, PageKind::Free);
                Ok(false)
            }
            Fill::Read => self.fill(id, &mut data.page),
        };
        match filled {
            Ok(redone) => {
                data.page_id = Some(id);
                *data.dirty.get_mut() = false;
                if fill == Fill::Fresh {
                    data.mark_dirty(self.epoch());
                }
                if redone {
                    // The redone changes are logged from the checkpoint on: the recovery's
                    // epoch, whatever the epoch is now.
                    data.mark_dirty(0);
                }
                Ok((frame, pin))
            }
            Err(err) => {
                data.page_id = None;
                *data.dirty.get_mut() = false;
                // Still under the latch: no one sees the frame empty yet mapped.
                self.unmap(id, frame);
                drop(data);
                drop(pin);
                Err(err)
            }
        }
    }

    /// Removes the mapping of `id` to `frame`. The caller holds the frame's write latch.
    fn unmap(&self, id: PageId, frame: usize) {
        let mut shard = self.shard(id);
        if shard.frames.get(&id) == Some(&frame) {
            shard.frames.remove(&id);
        }
    }

    /// CLOCK: the first unpinned frame whose reference bit is clear, clearing bits on the way;
    /// returned pinned and write-latched, with its old page unmapped if it was clean. A page
    /// enters the pool with its bit clear and earns the second chance only when it is
    /// requested again, so a one-off scan does not push out the working set.
    fn claim_victim(&self) -> Result<Victim<'_>> {
        // A frame may be unusable for a moment only: latched by a reader's hit or by the
        // checkpointer's write, its transaction's record not appended yet. A failed claim
        // inside a commit stops the database, so a pool short of frames waits a little for
        // them before it says so.
        let mut wait = Duration::from_micros(50);
        let mut waited = Duration::ZERO;
        loop {
            match self.claim_victim_in_two_sweeps() {
                Err(StorageError::PoolExhausted { .. }) if waited < VICTIM_PATIENCE => {
                    std::thread::sleep(wait);
                    waited += wait;
                    wait = (wait * 2).min(Duration::from_millis(10));
                }
                claimed => return claimed,
            }
        }
    }

    fn claim_victim_in_two_sweeps(&self) -> Result<Victim<'_>> {
        let mut hand = self.clock.lock();
        let n = self.frames.len();
        // Two sweeps: the first may only clear reference bits.
        for _ in 0..2 * n {
            let index = *hand;
            *hand = if index + 1 == n { 0 } else { index + 1 };
            let frame = &self.frames[index];
            if frame.pins.load(Ordering::Acquire) != 0 {
                continue;
            }
            if frame.referenced.swap(false, Ordering::Relaxed) {
                continue;
            }
            // Guards drop their latch before their pin, so an unpinned frame is latched only
            // by `flush_all`, a pinless hit, or a request that pinned it since we looked:
            // never wait.
            let Some(data) = self.try_write_latch(index) else {
                continue;
            };
            if data.unlogged {
                continue; // its log record is not appended yet
            }
            // With the latch held, `data.page_id` is the only page mapped to this frame, and
            // pins are taken only under that page's shard lock: hold it while checking that
            // there are none and taking ours, so no one can pin the frame in between.
            let Some(old) = data.page_id else {
                // Mapped from no page: no one can pin it (any pin left is from a request that
                // found an earlier mapping, and it re-checks the page id under the latch).
                if frame.pins.load(Ordering::Acquire) != 0 {
                    continue;
                }
                let pin = self.pin(index);
                return Ok(Victim {
                    frame: index,
                    data,
                    pin,
                    still_mapped: None,
                });
            };
            let mut shard = self.shard(old);
            if frame.pins.load(Ordering::Acquire) != 0 {
                continue; // pinned since we looked: requested again
            }
            let pin = self.pin(index);
            let still_mapped = if data.dirty.load(Ordering::Relaxed) {
                Some(old)
            } else {
                shard.frames.remove(&old);
                self.counters.evictions.fetch_add(1, Ordering::Relaxed);
                None
            };
            return Ok(Victim {
                frame: index,
                data,
                pin,
                still_mapped,
            });
        }
        Err(StorageError::PoolExhausted { capacity: n })
    }

    fn pin(&self, frame: usize) -> Pin<'_> {
        let frame = &self.frames[frame];
        frame.pins.fetch_add(1, Ordering::Acquire);
        Pin { pins: &frame.pins }
    }

    /// Reads page `id` into `page`, redoing what the log holds for it if recovery left that
    /// to its first load; returns whether it did.
    fn fill(&self, id: PageId, page: &mut Page) -> Result<bool> {
        let Some(pending) = self.pending_redo() else {
            return self.read_page(id, page).map(|()| false);
        };
        let loaded = pending.load(id, page, &mut |page| self.read_page(id, page));
        if let Err(err @ StorageError::Redo { .. }) = &loaded {
            // The page cannot be what the log says it is: no change may build on it.
            self.set_failure(|| err.to_string());
        }
        loaded
    }

    fn read_page(&self, id: PageId, page: &mut Page) -> Result<()> {
        let complete = self
            .file
            .read_exact_at(id.offset(), page.bytes_mut_for_read())?;
        self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
        if !complete {
            return Err(StorageError::Corrupt {
                page_id: id,
                reason: format!("{} ends before the page", self.file.path()),
            });
        }
        page.verify(id)?;
        let ceiling = self.lsn_ceiling.load(Ordering::SeqCst);
        if page.lsn() > ceiling {
            return Err(StorageError::Corrupt {
                page_id: id,
                reason: format!(
                    "its LSN {} is past the log's end ({ceiling}): the data file holds \
                     changes the log does not (a log from an older copy of the database, \
                     or one that lost its tail)",
                    page.lsn()
                ),
            });
        }
        Ok(())
    }

    /// Writes the frame's page if it is dirty (under the write latch, for an eviction):
    /// write-ahead hook first, then seal and write.
    fn write_back(&self, data: &mut FrameData) -> Result<()> {
        let Some(id) = data.page_id.filter(|_| *data.dirty.get_mut()) else {
            return Ok(());
        };
        self.write_ahead_of(id, &data.page)?;
        data.page.seal();
        self.write_sealed(id, &data.page)?;
        *data.dirty.get_mut() = false;
        Ok(())
    }

    /// The write-ahead rule for page `id`: returns once the log is durable up to the page's
    /// LSN.
    fn write_ahead_of(&self, id: PageId, page: &Page) -> Result<()> {
        let lsn = page.lsn();
        if cfg!(debug_assertions) && self.page_before_its_log {
            return Ok(());
        }
        (self.write_ahead)(lsn).map_err(|source| StorageError::WriteAhead {
            page_id: id,
            lsn,
            source,
        })
    }

    /// Writes the sealed image of page `id` to its place in the data file.
    fn write_sealed(&self, id: PageId, page: &Page) -> Result<()> {
        // Before the write: a read of the page that follows it must find the ceiling raised.
        self.lsn_ceiling.fetch_max(page.lsn(), Ordering::SeqCst);
        let written = match &self.doublewrite {
            Some(area) => area.write(self.file.as_ref(), id, page),
            None => self.file.write_at(id.offset(), page.bytes()),
        };
        written.map_err(|e| self.fail_stop(e))?;
        self.counters.pages_written.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Sets CLOCK's reference bit of `frame`. Tested first: a hot frame's bit is nearly always
/// set, and a load does not take the cache line away from other cores.
fn set_referenced(frame: &Frame) {
    if !frame.referenced.load(Ordering::Relaxed) {
        frame.referenced.store(true, Ordering::Relaxed);
    }
}

/// A pin on a frame: while it lives, the frame is not evicted.
struct Pin<'a> {
    pins: &'a AtomicU32,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        self.pins.fetch_sub(1, Ordering::Release);
    }
}

/// Shared access to a cached page. Dereferences to the [`Page`].
pub struct PageReadGuard<'a> {
    // Field order matters: the latch is released before the pin.
    guard: RwLockReadGuard<'a, FrameData>,
    /// `None` for a pinless hit: the latch alone keeps the frame from being evicted.
    _pin: Option<Pin<'a>>,
    frame: usize,
    version: &'a AtomicU64,
}

impl PageReadGuard<'_> {
    /// The frame's version now: stable while the guard lives, since it changes only when the
    /// write latch is taken. A copy of the page made under this guard is the frame's content
    /// for as long as [`BufferPool::is_unchanged`] says so, but for the checksum field,
    /// which a checkpoint may fill in meanwhile (see [`FrameVersion`]).
    pub fn frame_version(&self) -> FrameVersion {
        FrameVersion {
            frame: self.frame,
            count: self.version.load(Ordering::SeqCst),
        }
    }

    /// Whether the page holds a change whose log record is not appended yet (see
    /// [`PageWriteGuard::mark_unlogged`]): the change of a writer that has not finished.
    pub fn has_unlogged_change(&self) -> bool {
        self.guard.unlogged
    }
}

/// A frame and the number of times its write latch had been taken at some moment; see
/// [`PageReadGuard::frame_version`]. A checkpoint's upgrade of the latch to store a page's
/// checksum is not counted: it changes nothing else (see `BufferPool::flush_frame`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameVersion {
    frame: usize,
    count: u64,
}

impl FrameVersion {
    /// A version that [`BufferPool::is_unchanged`] never accepts (no such frame).
    pub const NEVER_CURRENT: FrameVersion = FrameVersion {
        frame: usize::MAX,
        count: 0,
    };
}

impl Deref for PageReadGuard<'_> {
    type Target = Page;
    fn deref(&self) -> &Page {
        &self.guard.page
    }
}

/// Exclusive access to a cached page; the frame is dirty. Dereferences to the [`Page`]; set
/// the page LSN with [`Page::set_lsn`] after logging the change.
pub struct PageWriteGuard<'a> {
    // Field order matters: the latch is released before the pin.
    guard: RwLockWriteGuard<'a, FrameData>,
    _pin: Pin<'a>,
}

impl Deref for PageWriteGuard<'_> {
    type Target = Page;
    fn deref(&self) -> &Page {
        &self.guard.page
    }
}

impl PageWriteGuard<'_> {
    /// The change being made is not logged yet: the page must not be written until
    /// [`BufferPool::stamp`] sets its LSN.
    pub fn mark_unlogged(&mut self) {
        self.guard.unlogged = true;
    }
}

impl DerefMut for PageWriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut Page {
        &mut self.guard.page
    }
}
