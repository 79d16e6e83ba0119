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
//! * a **page table** (`HashMap<PageId, frame>`) behind one `parking_lot::Mutex`, held only
//!   for lookups and frame (re)assignment, never across I/O;
//! * per-frame **pin counts** (atomics, incremented only under the table mutex) and
//!   **`parking_lot::RwLock` latches** over the frame contents; a guard holds both a pin and
//!   a latch and drops the latch first;
//! * **CLOCK** (second chance) eviction over unpinned frames: a frame with pin count 0 is, by
//!   the rule above, unlatched, and no one can pin it while we hold the table mutex, so the
//!   evicting thread can take its latch without waiting;
//! * a dirty victim is written back (after the **write-ahead hook** and [`Page::seal`]) while
//!   its old page id is *still mapped* to the frame, so a concurrent reader of that page waits
//!   on the latch and then retries instead of reading a stale image from disk.
//!
//! Swizzling and optimistic latching can come later behind the same guard API.
//!
//! # Rules for callers
//!
//! A thread must not ask for a page it already holds a write guard on (self-deadlock), must
//! acquire latches of several pages in a consistent order, and must hold no guard while
//! calling [`BufferPool::flush_all`]. When every frame is pinned, requests fail with
//! [`StorageError::PoolExhausted`] instead of waiting.
//!
//! # Fail-stop
//!
//! After a failed write or sync of the data file the pool refuses every later `write`,
//! `allocate` and `flush_all` with [`StorageError::Stopped`]: after a failed `fsync` Linux may
//! have dropped the dirty pages, so the file's state is unknown and only recovery from the
//! log can say what it should be. Reads keep working.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tailstore_media::File;

use crate::error::{HookError, Result, StorageError};
use crate::page::{Lsn, Page, PageId, PageKind};

/// Called with a dirty page's LSN before the page is written; must return only once the log
/// is durable up to that LSN (the write-ahead rule). An error prevents the write.
pub type WriteAheadHook = Box<dyn Fn(Lsn) -> std::result::Result<(), HookError> + Send + Sync>;

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
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    pages_read: AtomicU64,
    pages_written: AtomicU64,
    evictions: AtomicU64,
}

/// What a frame holds, behind its latch.
struct FrameData {
    /// The page in the frame; `None` while empty or after a failed read.
    page_id: Option<PageId>,
    /// Changed since it was last written.
    dirty: bool,
    /// Changed by a transaction whose log record is not appended yet, so the page LSN does
    /// not cover the change: the frame must not be written until [`BufferPool::stamp`].
    unlogged: bool,
    page: Page,
}

struct Frame {
    latch: RwLock<FrameData>,
    /// Guards alive (or being created) on this frame. Incremented only under the table mutex.
    pins: AtomicU32,
    /// CLOCK's reference bit.
    referenced: AtomicBool,
}

struct Table {
    map: HashMap<PageId, usize>,
    /// CLOCK hand: the next frame to consider.
    hand: usize,
}

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
    table: Mutex<Table>,
    allocation: Mutex<Allocation>,
    write_ahead: WriteAheadHook,
    counters: Counters,
    /// Set once a data-file write or sync failed (fail-stop); holds the cause.
    failure: Mutex<Option<String>>,
}

/// How to fill a frame that does not hold the requested page.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// Read the page from the data file and verify it.
    Read,
    /// A newly allocated page: format it, no read.
    Fresh,
}

impl BufferPool {
    /// A pool of `capacity` frames (at least one) over `file`. Pages are numbered from 0 at the start of the
    /// file; new pages are appended after the last whole page of the file.
    pub fn new(file: Arc<dyn File>, capacity: usize, write_ahead: WriteAheadHook) -> Result<Self> {
        let len = file.len()?;
        let frames = (0..capacity.max(1))
            .map(|_| Frame {
                latch: RwLock::new(FrameData {
                    page_id: None,
                    dirty: false,
                    unlogged: false,
                    page: Page::zeroed(),
                }),
                pins: AtomicU32::new(0),
                referenced: AtomicBool::new(false),
            })
            .collect();
        Ok(BufferPool {
            file,
            frames,
            table: Mutex::new(Table {
                map: HashMap::new(),
                hand: 0,
            }),
            allocation: Mutex::new(Allocation {
                free: Vec::new(),
                next: len.div_ceil(crate::PAGE_SIZE as u64),
            }),
            write_ahead,
            counters: Counters::default(),
            failure: Mutex::new(None),
        })
    }

    /// Number of frames.
    pub fn capacity(&self) -> usize {
        self.frames.len()
    }

    /// The page `id` for reading (shared latch).
    pub fn read(&self, id: PageId) -> Result<PageReadGuard<'_>> {
        loop {
            let (frame, pin) = self.pin_or_load(id, Fill::Read)?;
            let guard = self.frames[frame].latch.read();
            if guard.page_id == Some(id) {
                return Ok(PageReadGuard { guard, _pin: pin });
            }
            // The frame was repurposed or its load failed while we waited: try again.
        }
    }

    /// The page `id` for writing (exclusive latch); the frame is marked dirty.
    pub fn write(&self, id: PageId) -> Result<PageWriteGuard<'_>> {
        self.check_running()?;
        self.write_with(id, Fill::Read)
    }

    /// `Err(Stopped)` once a data-file write or sync has failed.
    fn check_running(&self) -> Result<()> {
        match self.failure.lock().as_ref() {
            Some(cause) => Err(StorageError::Stopped {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Records the first I/O failure (fail-stop) and returns it.
    fn fail_stop(&self, err: tailstore_media::MediaError) -> StorageError {
        self.failure.lock().get_or_insert_with(|| err.to_string());
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
    pub fn flush_all(&self) -> Result<()> {
        self.check_running()?;
        for frame in self.frames.iter() {
            loop {
                let mut data = frame.latch.write();
                if !data.unlogged {
                    self.write_back(&mut data)?;
                    break;
                }
                drop(data);
                self.check_running()?;
                std::thread::yield_now();
            }
        }
        self.file.sync_data().map_err(|e| self.fail_stop(e))
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
        self.failure.lock().get_or_insert(cause);
    }

    /// Page `id` for the redo pass of recovery: read and verified, or, when `overwrite` (the
    /// log holds a full image of it), an empty frame whose old contents are never read, so
    /// that a torn or missing page can be rebuilt.
    pub fn redo_page(&self, id: PageId, overwrite: bool) -> Result<PageWriteGuard<'_>> {
        self.check_running()?;
        {
            let mut allocation = self.allocation.lock();
            allocation.next = allocation.next.max(id.0 + 1);
        }
        self.write_with(id, if overwrite { Fill::Fresh } else { Fill::Read })
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
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            pages_read: c.pages_read.load(Ordering::Relaxed),
            pages_written: c.pages_written.load(Ordering::Relaxed),
            evictions: c.evictions.load(Ordering::Relaxed),
        }
    }

    fn write_with(&self, id: PageId, fill: Fill) -> Result<PageWriteGuard<'_>> {
        loop {
            let (frame, pin) = self.pin_or_load(id, fill)?;
            let mut guard = self.frames[frame].latch.write();
            if guard.page_id == Some(id) {
                if fill == Fill::Fresh {
                    // A freed page that was still cached: start from a clean image.
                    guard.page.format(id, PageKind::Free);
                }
                guard.dirty = true;
                return Ok(PageWriteGuard { guard, _pin: pin });
            }
        }
    }

    /// Pins the frame holding `id`, bringing the page in first if needed. On return the page
    /// is in the frame unless a concurrent load failed (the caller re-checks under the latch).
    fn pin_or_load(&self, id: PageId, fill: Fill) -> Result<(usize, Pin<'_>)> {
        let mut table = self.table.lock();
        if let Some(&frame) = table.map.get(&id) {
            let pin = self.pin(frame);
            self.frames[frame].referenced.store(true, Ordering::Relaxed);
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            return Ok((frame, pin));
        }
        self.counters.misses.fetch_add(1, Ordering::Relaxed);
        let (frame, mut data) = self.find_victim(&mut table)?;
        let pin = self.pin(frame);
        let old = data.page_id;
        // Map the new page now, so that concurrent requests for it wait on our latch instead
        // of loading it twice. The old page stays mapped until its image is on disk.
        table.map.insert(id, frame);
        let clean = !data.dirty;
        if clean {
            if let Some(old) = old {
                table.map.remove(&old);
                self.counters.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        drop(table);

        if !clean {
            if let Err(err) = self.write_back(&mut data) {
                // The frame still holds the old (dirty) page, still mapped; give up on `id`.
                self.table.lock().map.remove(&id);
                return Err(err);
            }
            if let Some(old) = old {
                self.table.lock().map.remove(&old);
                self.counters.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }

        let filled = match fill {
            Fill::Fresh => {
                data.page.format(id, PageKind::Free);
                Ok(())
            }
            Fill::Read => self.read_page(id, &mut data.page),
        };
        match filled {
            Ok(()) => {
                data.page_id = Some(id);
                data.dirty = fill == Fill::Fresh;
                Ok((frame, pin))
            }
            Err(err) => {
                data.page_id = None;
                data.dirty = false;
                self.table.lock().map.remove(&id);
                Err(err)
            }
        }
    }

    /// CLOCK: the first unpinned frame whose reference bit is clear, clearing bits on the way.
    /// Returns it write-latched. Called with the table mutex held. A page enters the pool with
    /// its bit clear and earns the second chance only when it is requested again, so a one-off
    /// scan does not push out the working set.
    fn find_victim(&self, table: &mut Table) -> Result<(usize, RwLockWriteGuard<'_, FrameData>)> {
        let n = self.frames.len();
        // Two sweeps: the first may only clear reference bits.
        for _ in 0..2 * n {
            let index = table.hand;
            table.hand = (table.hand + 1) % n;
            let frame = &self.frames[index];
            if frame.pins.load(Ordering::Acquire) != 0 {
                continue;
            }
            if frame.referenced.swap(false, Ordering::Relaxed) {
                continue;
            }
            // No one can pin it while we hold the table mutex, and guards drop their latch
            // before their pin; only `flush_all` (which latches without pinning) can hold it.
            if let Some(data) = frame.latch.try_write() {
                if data.unlogged {
                    continue; // its log record is not appended yet
                }
                return Ok((index, data));
            }
        }
        Err(StorageError::PoolExhausted { capacity: n })
    }

    fn pin(&self, frame: usize) -> Pin<'_> {
        let frame = &self.frames[frame];
        frame.pins.fetch_add(1, Ordering::Acquire);
        Pin { pins: &frame.pins }
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
        page.verify(id)
    }

    /// Writes the frame's page if it is dirty: write-ahead hook first, then seal and write.
    fn write_back(&self, data: &mut FrameData) -> Result<()> {
        let Some(id) = data.page_id.filter(|_| data.dirty) else {
            return Ok(());
        };
        let lsn = data.page.lsn();
        (self.write_ahead)(lsn).map_err(|source| StorageError::WriteAhead {
            page_id: id,
            lsn,
            source,
        })?;
        data.page.seal();
        self.file
            .write_at(id.offset(), data.page.bytes())
            .map_err(|e| self.fail_stop(e))?;
        self.counters.pages_written.fetch_add(1, Ordering::Relaxed);
        data.dirty = false;
        Ok(())
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
    _pin: Pin<'a>,
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
