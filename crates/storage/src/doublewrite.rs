//! The double-write area: a copy of every page in PMEM before the page is written in place,
//! so that a torn write of the data file can be undone at restart without a full-page image
//! in the log.
//!
//! # Why
//!
//! A page write to the data file is not atomic: a power cut in the middle of one leaves a
//! page that is half old, half new (torn), which redo cannot start from. Without this area the
//! engine logs a full image of every page the first time it changes after a checkpoint
//! (PostgreSQL's `full_page_writes`), so redo rebuilds a torn page from the log. Under 4 KiB
//! Redis SETs those images were more than half of the log (5.3 of 9.6 KB per SET), and the
//! log goes to the disk in `buffer` mode. InnoDB's answer is a double-write buffer on disk,
//! which writes every page twice. Where the commit mode already has PMEM, the copy can live
//! there: a page is copied into a slot of this area and persisted with CLWB/SFENCE (a few
//! microseconds, no disk I/O), and only then written in place. The disk sees each page once
//! and the log holds only what changed.
//!
//! # Layout (little-endian)
//!
//! ```text
//! 0      header: magic "TSDBLWR1", slot count u64, page size u64, database id u64,
//!        crc32c of those 32 bytes u32
//! 64     a synced mark: synced-through seq u64, crc32c(database id ‖ that seq) u32
//!        (zero in an area of the builds before it: no mark)
//! 128    the other synced mark, the same (zero in areas of the builds before it)
//! 4096   slot 0, then slot 1, … each SLOT_BYTES (64 + PAGE_SIZE) long:
//!          seq u64 (0: never used)  page id u64  crc32c(seq ‖ page id ‖ the page's checksum) u32
//!          (pad to 64)
//!          the sealed page image (PAGE_SIZE bytes)
//! ```
//!
//! The `seq`-th write (from 1, increasing for the life of the area, across restarts) uses slot
//! `seq % slots`.
//!
//! # Protocol and why it is enough
//!
//! *Write.* Under one mutex, take the next `seq` and its slot `seq % slots` and note the write
//! as in flight; if the slot still holds a copy whose in-place write may not be durable
//! (`seq >= synced_through + slots`), first wait until that write has finished and sync the
//! data file. Then, without the mutex (writes of different pages go on side by side): copy the
//! page and the slot's header into the slot, fence (both persistent), write the page in
//! place; under the mutex again, note the write finished. So the copy of every in-place write
//! that a power cut can tear is whole in the area: it was persisted before the write began,
//! and its slot is reused only after a sync that began once that write had finished. Two
//! writes of one page never overlap (the pool writes a page under its frame's latch), so a
//! page's later write has the higher `seq`.
//!
//! *Restore* (at open, before anything reads a page): for every page id with a valid slot
//! numbered at or past the synced mark (see *Sync*; its crc matches and the image verifies),
//! take the valid copy with the highest `seq` and read the page in place; if it does not
//! verify (torn, or past the end of the file), write the copy there.
//! Then sync the data file. A valid copy of a page the caller says no copy can be of (the
//! engine's meta pages, or pages further past the file's end than its writes can reach) is
//! damage behind valid checksums and stops the restore before it writes anything. A torn page was torn by its last write, whose copy is the latest
//! one of that page in the area; a page that verifies is left alone, whatever the area holds
//! (an older or newer copy than a page that is whole is harmless: redo brings the page up to
//! date from its LSN, and the in-place page is never older than the last checkpoint, which
//! synced it). A slot torn by the crash fails its checks: the header's crc covers the
//! image's checksum and the image must verify against that checksum, so a torn image fails,
//! and so does an old image under a new header (it has another checksum, but for a 2^-32
//! chance); its in-place write had not begun, so that page is whole. The final sync also makes durable what the previous process wrote but did not sync, so
//! every slot may be reused at once.
//!
//! *Syncing ahead.* Once half the slots hold copies not yet known durable in place, the
//! writer that notices syncs the data file without holding the mutex, noting first the `seq`
//! below which every write has finished (the lowest in flight); when the sync returns, every
//! slot below that `seq` is free. Writers go on meanwhile in the other half and wait for a
//! sync under the mutex only if they fill it too.
//!
//! *Sync.* The checkpoint's sync of the data file goes through [`DoubleWrite::sync`], under the
//! same mutex, and frees every slot below the lowest write still in flight.
//!
//! *The synced mark.* After each sync (ahead, the checkpoint's, or a restore's) the area
//! persists, in a cache line of its header, the `seq` below which every in-place write is
//! durable, as that sync established it; a restore checks only the slots numbered from the
//! mark on. Two records hold the mark, and each new mark is written over the one that does
//! not hold the highest: a power cut while one is written (its words persisted or not, each
//! on its own) leaves the other whole, and the restore takes the highest mark that passes
//! its checks. With one record a torn write left none, so every slot counted, and since a
//! restore writes each page's latest copy past the mark again, whole in place or not, a
//! copy older than a page's durable version (the newer copy's slot reused since) was written
//! over it (`writes_from_several_threads_at_once_survive_a_power_cut`, 1 run in ~30 under
//! load; decision 234). Sound because a torn page was torn by an in-place write that no completed sync
//! covered, whose copy is numbered at or past every mark persisted (the mark is written only
//! after its sync returned, and only grows). A write that *failed* in place may have torn
//! its page without finishing, so the mark stops below the lowest failed write for the
//! life of the process (its slot is not reused by then: the pool stops writing after a
//! failure). A *sync* that failed may have lost every in-place write it covered (Linux
//! drops their write-back and reports it to that one `fdatasync`, whichever thread's, and
//! a later one succeeds), so after one no sync frees a slot or moves the mark: the file
//! handle refuses every later sync ([`tailstore_media::SyncGuard`], which also runs them
//! one at a time, so that none that overlapped the failing one returns success first). A mark that fails its crc (torn, or of another database) or claims writes the
//! area never made counts as none: every slot is checked, as before the mark. Why: a
//! restart after SIGKILL used to read and check all 4,096 copies (64 MiB) and the pages
//! they name, about a fifth of a restart that replayed 250 MB; a sync every 2,048 writes
//! leaves at most half of them past the mark.
//!
//! The area protects against power cuts only as far as its medium does: on emulated PMEM in
//! /dev/shm, a power cut loses the area along with the log's PMEM buffer.

use std::ops::Range;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, MutexGuard};
use tailstore_media::{File, Region};

use tailstore_media::Result as MediaResult;

use crate::error::{Result, StorageError};
use crate::page::{Page, PageId, PAGE_SIZE};

const MAGIC: [u8; 8] = *b"TSDBLWR1";
const HEADER_BYTES: usize = 36;
/// Where the synced marks lie: each in a cache line of its own, after the header.
const MARK_AT: usize = 64;
const SECOND_MARK_AT: usize = 128;
const MARKS: [usize; 2] = [MARK_AT, SECOND_MARK_AT];
const MARK_BYTES: usize = 12;
/// Slots start one 4 KiB block in, so that every page image is cache-line aligned.
const SLOTS_START: usize = 4096;
const SLOT_HEADER: usize = 64;
/// Threads that check (and restore) the pages in place at open.
const RESTORE_THREADS: usize = 16;
/// The highest write number a slot may hold: 2^62 page writes, 146 years at a billion a
/// second. Far from overflowing when the slot count and a sync's margin are added to it.
const MAX_SEQ: u64 = 1 << 62;
/// Bytes of one slot: its header, then a page.
pub const SLOT_BYTES: usize = SLOT_HEADER + PAGE_SIZE;

const _: () = assert!(SLOT_HEADER.is_multiple_of(tailstore_media::CACHE_LINE));
const _: () = assert!(SLOTS_START.is_multiple_of(tailstore_media::CACHE_LINE));
const _: () = assert!(HEADER_BYTES <= MARK_AT);
const _: () = assert!(MARK_AT.is_multiple_of(tailstore_media::CACHE_LINE));
const _: () = assert!(MARK_BYTES <= tailstore_media::CACHE_LINE);
const _: () = assert!(MARK_AT + MARK_BYTES <= SECOND_MARK_AT);
const _: () = assert!(SECOND_MARK_AT.is_multiple_of(tailstore_media::CACHE_LINE));
const _: () = assert!(SECOND_MARK_AT + MARK_BYTES <= SLOTS_START);

/// Bytes of an area with `slots` slots.
pub fn area_bytes(slots: usize) -> usize {
    SLOTS_START + slots * SLOT_BYTES
}

/// Slots of an area of about `bytes` bytes (at least two).
pub fn slots_in(bytes: usize) -> usize {
    (bytes / SLOT_BYTES).max(2)
}

/// The double-write area over a persistent region (see the module documentation).
pub struct DoubleWrite {
    region: Arc<dyn Region>,
    slots: u64,
    /// The database the area belongs to, which its synced mark's crc covers.
    db_id: u64,
    ring: Mutex<Ring>,
    /// Signalled when a write finishes (for a writer waiting to reuse its slot).
    finished: Condvar,
}

struct Ring {
    /// The `seq` of the next write.
    next: u64,
    /// Every write with a lower `seq` is durable in place.
    synced_through: u64,
    /// A sync that frees slots ahead of need is running (see [`DoubleWrite::sync_ahead`]).
    syncing_ahead: bool,
    /// Writes that hold a slot but have not finished (as many as threads writing pages).
    in_flight: Vec<u64>,
    /// The lowest write that failed in place: the synced mark stays below it.
    failed: Option<u64>,
}

impl Ring {
    /// Every write with a lower `seq` has finished, its in-place write included: what a
    /// sync that begins now makes durable.
    fn finished_below(&self) -> u64 {
        self.in_flight.iter().copied().min().unwrap_or(self.next)
    }

    /// The synced mark to persist: below it every in-place write finished, whole, and was
    /// synced.
    fn mark(&self) -> u64 {
        self.failed.map_or(self.synced_through, |failed| {
            failed.min(self.synced_through)
        })
    }
}

/// What [`DoubleWrite::restore`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Valid copies found in the area (the latest of each page), each written in place
    /// again.
    pub copies: usize,
    /// Of those pages, the ones that were torn (or missing) in place.
    pub pages: usize,
}

impl DoubleWrite {
    /// The area over `region` (named `name` in messages) of the database `db_id` (its log's
    /// id). A region whose slots were never used (new, or one whose creation a crash cut
    /// short), or any region when `new_database`, is formatted with as many slots as it
    /// holds; an existing one keeps its slot count. An area of another database is refused:
    /// its copies must never be written into this one's pages.
    pub fn open(
        region: Arc<dyn Region>,
        name: &str,
        db_id: u64,
        new_database: bool,
    ) -> Result<DoubleWrite> {
        let broken = |reason: String| StorageError::DoubleWriteArea {
            name: name.to_string(),
            reason,
        };
        let mut header = [0u8; HEADER_BYTES];
        if region.len() >= HEADER_BYTES {
            region.read(0, &mut header);
        }
        let slots = match read_header(&header, region.len()) {
            Ok((slots, owner)) if owner == db_id && !new_database => {
                // A crash during the area's creation may have left its header stored and not
                // flushed: valid now, gone after a power cut, with slots used meanwhile.
                region.persist(0, HEADER_BYTES)?;
                slots
            }
            Ok((_, owner)) if !new_database => {
                return Err(broken(format!(
                    "it belongs to another database (id {owner:#x}, this one is {db_id:#x}); \
                     move it away if that database is gone"
                )))
            }
            // A new database, or a crash tore the header while the area was being created
            // (no slot was ever used): nothing to keep.
            Err(_) if !new_database && !never_used(region.as_ref()) => {
                let reason = read_header(&header, region.len()).err().unwrap_or_default();
                return Err(broken(reason));
            }
            _ => {
                let slots = region.len().saturating_sub(SLOTS_START) / SLOT_BYTES;
                if slots < 2 {
                    return Err(broken(format!(
                        "{} bytes hold fewer than two slots of {SLOT_BYTES} bytes",
                        region.len()
                    )));
                }
                format(region.as_ref(), slots as u64, db_id)?;
                slots as u64
            }
        };
        let area = DoubleWrite {
            region,
            slots,
            db_id,
            ring: Mutex::new(Ring {
                next: 1,
                synced_through: 1,
                syncing_ahead: false,
                in_flight: Vec::new(),
                failed: None,
            }),
            finished: Condvar::new(),
        };
        let mut last = 0;
        for slot in 0..slots {
            let Some((seq, _)) = area.slot_header(slot) else {
                continue;
            };
            // Writes are numbered on from the highest number found, and slots and syncs are
            // counted by adding to it: a number near 2^64 (written by no area, its slot's
            // CRC computed again) made the next write overflow (a panic) or wrap to 0, which
            // marks a slot as never used.
            if seq > MAX_SEQ {
                return Err(broken(format!(
                    "slot {slot} holds write number {seq}, more writes than any area makes \
                     (at most {MAX_SEQ})"
                )));
            }
            last = last.max(seq);
        }
        let mut ring = area.ring.lock();
        ring.next = last + 1;
        ring.synced_through = last + 1;
        drop(ring);
        Ok(area)
    }

    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.slots as usize
    }

    /// Releases the lock on the area's file (`Region::unlock`), at the database's close.
    pub fn unlock(&self) -> Result<()> {
        Ok(self.region.unlock()?)
    }

    /// Restores every page of `file` that a crash tore from its latest copy in the area, then
    /// syncs `file`. Must run before anything reads a page of `file`.
    ///
    /// `pages` are the pages a copy may be restored to (the caller's data pages, up to as far
    /// past the file's end as its writes can have reached): a whole, valid copy of a page
    /// outside them was never written by this area, and is reported as
    /// [`StorageError::Corrupt`] before anything is written (a copy of page 2^40 would
    /// otherwise be written 8 PiB into the file).
    pub fn restore(&self, file: &dyn File, pages: Range<u64>) -> Result<Restored> {
        // Latest first: the first valid copy of a page is its latest one. A slot torn by the
        // crash may claim a higher `seq` than the page's latest whole copy, so validity is
        // checked before a copy is chosen.
        let mark = self.read_mark();
        let mut used: Vec<(u64, PageId, u64)> = (0..self.slots)
            .filter_map(|slot| self.slot_header(slot).map(|(seq, id)| (seq, id, slot)))
            .filter(|&(seq, _, _)| seq >= mark)
            .collect();
        used.sort_unstable_by_key(|&(seq, _, _)| std::cmp::Reverse(seq));
        let mut done = std::collections::HashSet::new();
        let mut latest = Vec::new();
        let mut copy = Page::zeroed();
        for (_, id, slot) in used {
            if !done.contains(&id) && self.read_valid_copy(slot, id, &mut copy) {
                if !pages.contains(&id.0) {
                    return Err(StorageError::Corrupt {
                        page_id: id,
                        reason: format!(
                            "the double-write area's slot {slot} holds a copy of it, outside \
                             the pages {}..{} it may restore",
                            pages.start, pages.end
                        ),
                    });
                }
                done.insert(id);
                latest.push((id, slot));
            }
        }
        // The pages in place are read on several threads: after a power cut none is cached,
        // and 4,096 reads one at a time took 100 ms of a restart.
        let chunk = latest.len().div_ceil(RESTORE_THREADS).max(1);
        let pages = std::thread::scope(|scope| {
            let workers: Vec<_> = latest
                .chunks(chunk)
                .map(|pages| scope.spawn(move || self.restore_torn(file, pages)))
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .sum::<Result<usize>>()
        })?;
        let restored = Restored {
            copies: latest.len(),
            pages,
        };
        file.sync_data()?;
        let mut ring = self.ring.lock();
        let next = ring.next;
        self.note_synced(&mut ring, next)?;
        Ok(restored)
    }

    /// Writes each of `pages` in place again from its copy in `slot`, whole in place or not;
    /// returns how many were not (torn or missing). A page whose write-back a failed sync
    /// lost reads back whole from the page cache and is not on the disk; only a new write
    /// makes the sync that ends the restore put it there (ARCHITECTURE.md, decision 198).
    fn restore_torn(&self, file: &dyn File, pages: &[(PageId, u64)]) -> Result<usize> {
        let mut torn = 0;
        let mut copy = Page::zeroed();
        let mut in_place = Page::zeroed();
        for &(id, slot) in pages {
            let whole = file.read_exact_at(id.offset(), in_place.bytes_mut_for_read())?
                && in_place.verify(id).is_ok();
            torn += usize::from(!whole);
            // Checked when it was chosen; nothing writes the area before restore ends.
            assert!(self.read_valid_copy(slot, id, &mut copy));
            file.write_at(id.offset(), copy.bytes())?;
        }
        Ok(torn)
    }

    /// Writes the sealed `page` (page `id`) in place in `file`, after its copy is persistent
    /// in the area. Writes of different pages run side by side (see the module
    /// documentation).
    pub(crate) fn write(&self, file: &dyn File, id: PageId, page: &Page) -> MediaResult<()> {
        debug_assert_eq!(page.page_id(), id);
        let seq = self.take_slot(file)?;
        let written = self.copy_then_write(file, seq, id, page);
        let mut ring = self.ring.lock();
        ring.in_flight.retain(|&s| s != seq);
        if written.is_err() {
            ring.failed = Some(ring.failed.map_or(seq, |failed| failed.min(seq)));
        }
        self.finished.notify_all();
        written?;
        self.sync_ahead(ring, file)
    }

    /// The `seq` of a new write, whose slot is free, noted as in flight.
    fn take_slot(&self, file: &dyn File) -> MediaResult<u64> {
        let mut ring = self.ring.lock();
        self.free_next_slot(&mut ring, file)?;
        let seq = ring.next;
        ring.next = seq + 1;
        ring.in_flight.push(seq);
        // The invariant the writes in flight rely on: no slot is two writes ahead of a sync.
        assert!(ring.next <= ring.synced_through + self.slots);
        Ok(seq)
    }

    /// Persists the copy of `page` in the slot of write `seq`, then writes the page in place.
    fn copy_then_write(
        &self,
        file: &dyn File,
        seq: u64,
        id: PageId,
        page: &Page,
    ) -> MediaResult<()> {
        let at = self.slot_offset(seq % self.slots);
        let header = slot_header_bytes(seq, id, page.header().checksum);
        self.region
            .write_streaming(at + SLOT_HEADER, page.bytes())?;
        self.region.write_streaming(at, &header)?;
        self.region.fence()?;
        file.write_at(id.offset(), page.bytes())
    }

    /// Syncs `file` now if the next write would have to, and ahead of need (see
    /// [`DoubleWrite::sync_ahead`]): a caller about to write while it holds a page latch
    /// calls this first, so that the sync (tens of milliseconds under a checkpoint's
    /// writes) does not keep the page's writers waiting.
    pub(crate) fn make_room(&self, file: &dyn File) -> MediaResult<()> {
        let mut ring = self.ring.lock();
        self.free_next_slot(&mut ring, file)?;
        self.sync_ahead(ring, file)
    }

    /// Once half the slots hold copies whose in-place writes may not be durable, syncs
    /// `file` *without* holding the ring's lock (one thread at a time), freeing those slots
    /// while the other half takes the writes that come meanwhile. Without it every 4,096th
    /// write synced under the lock, and every thread evicting a dirty page waited for it:
    /// TPC-C with a pool an eighth of its data lost a third of its throughput.
    fn sync_ahead(&self, mut ring: MutexGuard<'_, Ring>, file: &dyn File) -> MediaResult<()> {
        if ring.syncing_ahead || ring.next - ring.synced_through < self.slots / 2 {
            return Ok(());
        }
        ring.syncing_ahead = true;
        let target = ring.finished_below();
        drop(ring);
        let synced = file.sync_data();
        let mut ring = self.ring.lock();
        ring.syncing_ahead = false;
        synced?;
        self.note_synced(&mut ring, target)
    }

    /// Makes slot `ring.next % slots` free to reuse: if the in-place write of the copy it
    /// holds (write `next - slots`) may not be durable yet, waits for that write to finish
    /// and syncs `file`.
    fn free_next_slot(&self, ring: &mut MutexGuard<'_, Ring>, file: &dyn File) -> MediaResult<()> {
        while ring.next >= ring.synced_through + self.slots {
            if ring.finished_below() + self.slots > ring.next {
                self.sync_finished(ring, file)?;
            } else {
                self.finished.wait(ring);
            }
        }
        Ok(())
    }

    /// Syncs `file`: every page whose write through the area has finished is durable in
    /// place, and its slot may be reused.
    pub(crate) fn sync(&self, file: &dyn File) -> MediaResult<()> {
        self.sync_finished(&mut self.ring.lock(), file)
    }

    /// Syncs `file` with the ring locked: every slot below the lowest write in flight when
    /// the sync began is free afterwards.
    fn sync_finished(&self, ring: &mut Ring, file: &dyn File) -> MediaResult<()> {
        let target = ring.finished_below();
        file.sync_data()?;
        self.note_synced(ring, target)
    }

    /// Notes that a sync made every in-place write below `target` durable: frees their slots
    /// and persists the synced mark if it moved.
    fn note_synced(&self, ring: &mut Ring, target: u64) -> MediaResult<()> {
        let before = ring.mark();
        ring.synced_through = ring.synced_through.max(target);
        let mark = ring.mark();
        if mark > before {
            // Over the record that does not hold the highest mark: see the module docs.
            let at = self.older_mark_record(ring.next);
            self.region.write(at, &mark_bytes(self.db_id, mark));
            self.region.persist(at, MARK_BYTES)?;
        }
        Ok(())
    }

    /// The synced mark the area holds (the highest of its two records that passes its
    /// checks), or 0 (every slot to check) if it holds none this process can trust: see the
    /// module documentation.
    fn read_mark(&self) -> u64 {
        let next = self.ring.lock().next;
        MARKS
            .iter()
            .filter_map(|&at| self.mark_in(at, next))
            .max()
            .unwrap_or(0)
    }

    /// The mark in the record at `at`, if it passes its checks: its crc (of this database)
    /// and no later than `next`, the next write's number.
    fn mark_in(&self, at: usize, next: u64) -> Option<u64> {
        let mut bytes = [0u8; MARK_BYTES];
        self.region.read(at, &mut bytes);
        let mark = u64::from_le_bytes(bytes[..8].try_into().unwrap_or_default());
        (bytes == mark_bytes(self.db_id, mark) && mark <= next).then_some(mark)
    }

    /// Where the next mark is written: the record that does not hold the highest valid mark.
    fn older_mark_record(&self, next: u64) -> usize {
        let [first, second] = MARKS.map(|at| self.mark_in(at, next));
        if first >= second {
            SECOND_MARK_AT
        } else {
            MARK_AT
        }
    }

    fn slot_offset(&self, slot: u64) -> usize {
        SLOTS_START + slot as usize * SLOT_BYTES
    }

    /// `(seq, page id)` of a slot that was ever used (its crc is checked with the image by
    /// [`DoubleWrite::read_valid_copy`]).
    fn slot_header(&self, slot: u64) -> Option<(u64, PageId)> {
        let at = self.slot_offset(slot);
        let seq = self.region.load_u64(at);
        (seq != 0).then(|| (seq, PageId(self.region.load_u64(at + 8))))
    }

    /// Reads slot `slot` into `page`; whether it holds a whole, valid image of page `id`.
    fn read_valid_copy(&self, slot: u64, id: PageId, page: &mut Page) -> bool {
        let at = self.slot_offset(slot);
        let mut header = [0u8; 24];
        self.region.read(at, &mut header);
        self.region
            .read(at + SLOT_HEADER, page.bytes_mut_for_read());
        let seq = u64::from_le_bytes(header[..8].try_into().unwrap_or_default());
        let expected = slot_header_bytes(seq, id, page.header().checksum);
        header[..] == expected[..24] && page.verify(id).is_ok()
    }
}

/// Whether no slot of the region (as far as it could hold slots) was ever written.
fn never_used(region: &dyn Region) -> bool {
    let slots = region.len().saturating_sub(SLOTS_START) / SLOT_BYTES;
    (0..slots).all(|slot| region.load_u64(SLOTS_START + slot * SLOT_BYTES) == 0)
}

/// Formats the region as an empty area of `slots` slots of database `db_id`: every slot
/// marked unused, then the header. The header is persisted before any slot is used; a crash
/// that tears it leaves every slot unused, and the next open formats the area again.
fn format(region: &dyn Region, slots: u64, db_id: u64) -> Result<()> {
    for slot in 0..slots as usize {
        let at = SLOTS_START + slot * SLOT_BYTES;
        if region.load_u64(at) != 0 {
            region.store_u64(at, 0);
            region.flush(at, 8)?;
        }
    }
    // An earlier database's mark would let a restore skip this one's copies.
    for at in MARKS {
        region.write(at, &[0; MARK_BYTES]);
        region.flush(at, MARK_BYTES)?;
    }
    region.fence()?;
    let mut header = [0u8; HEADER_BYTES];
    header[..8].copy_from_slice(&MAGIC);
    header[8..16].copy_from_slice(&slots.to_le_bytes());
    header[16..24].copy_from_slice(&(PAGE_SIZE as u64).to_le_bytes());
    header[24..32].copy_from_slice(&db_id.to_le_bytes());
    let crc = crc32c::crc32c(&header[..32]);
    header[32..36].copy_from_slice(&crc.to_le_bytes());
    region.write(0, &header);
    region.persist(0, HEADER_BYTES)?;
    Ok(())
}

/// The slot count and database id of a valid header, or why it is not one.
fn read_header(
    header: &[u8; HEADER_BYTES],
    region_len: usize,
) -> std::result::Result<(u64, u64), String> {
    let word = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().unwrap_or_default());
    if header[..8] != MAGIC {
        return Err("not a double-write area (bad magic)".into());
    }
    let crc = u32::from_le_bytes(header[32..36].try_into().unwrap_or_default());
    if crc != crc32c::crc32c(&header[..32]) {
        return Err("header checksum mismatch".into());
    }
    if word(16) != PAGE_SIZE as u64 {
        return Err(format!("made for {}-byte pages, not {PAGE_SIZE}", word(16)));
    }
    let slots = word(8);
    // Checked: a count near 2^64 (its CRC computed again) overflowed the multiplication.
    let fits = usize::try_from(slots)
        .ok()
        .and_then(|slots| slots.checked_mul(SLOT_BYTES))
        .and_then(|bytes| bytes.checked_add(SLOTS_START))
        .is_some_and(|bytes| bytes <= region_len);
    if slots < 2 || !fits {
        return Err(format!(
            "header says {slots} slots, the region holds {region_len} bytes"
        ));
    }
    Ok((slots, word(24)))
}

/// The synced mark `mark` of database `db_id`'s area, as it lies at [`MARK_AT`].
fn mark_bytes(db_id: u64, mark: u64) -> [u8; MARK_BYTES] {
    let mut covered = [0u8; 16];
    covered[..8].copy_from_slice(&db_id.to_le_bytes());
    covered[8..].copy_from_slice(&mark.to_le_bytes());
    let mut bytes = [0u8; MARK_BYTES];
    bytes[..8].copy_from_slice(&mark.to_le_bytes());
    bytes[8..].copy_from_slice(&crc32c::crc32c(&covered).to_le_bytes());
    bytes
}

/// A slot's header for the `seq`-th write, of page `id` whose sealed image has checksum
/// `checksum`. Covering the page's own checksum (which [`Page::verify`] checks against the
/// image) ties the header to that image without a second pass over its 8 KiB.
fn slot_header_bytes(seq: u64, id: PageId, checksum: u32) -> [u8; SLOT_HEADER] {
    let mut header = [0u8; SLOT_HEADER];
    header[..8].copy_from_slice(&seq.to_le_bytes());
    header[8..16].copy_from_slice(&id.0.to_le_bytes());
    header[16..20].copy_from_slice(&checksum.to_le_bytes());
    let crc = crc32c::crc32c(&header[..20]);
    header[20..24].copy_from_slice(&crc.to_le_bytes());
    header
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use tailstore_media::sim::SimStorage;
    use tailstore_media::{MediaError, OpenMode, Storage};

    use super::*;
    use crate::page::PageKind;

    const AREA: &str = "/pmem.pages";
    const DATA: &str = "/data";
    const DB: u64 = 0xdb;
    /// The pages a restore may write, for the tests that are not about that bound.
    const ANY_PAGE: Range<u64> = 0..1 << 20;

    fn open_area(storage: &SimStorage, slots: usize, new_database: bool) -> Result<DoubleWrite> {
        let region = storage.map_or_create_region(Path::new(AREA), area_bytes(slots))?;
        DoubleWrite::open(region, AREA, DB, new_database)
    }

    /// The data file, its name durable (as the engine makes it).
    fn data(storage: &SimStorage) -> Arc<dyn File> {
        let file = storage
            .open_file(Path::new(DATA), OpenMode::CreateIfMissing)
            .expect("data file");
        storage.sync_name(Path::new(DATA)).expect("sync name");
        file
    }

    /// Version `lsn` of page `id`: a page whose payload is derived from both (a free page's:
    /// a node's payload would be checked as one).
    fn version(id: u64, lsn: u64) -> Page {
        let mut page = Page::zeroed();
        page.format(PageId(id), PageKind::Free);
        page.set_lsn(lsn);
        for (i, b) in page.payload_mut().iter_mut().enumerate() {
            *b = (i as u64).wrapping_mul(31).wrapping_add(id * 7 + lsn) as u8;
        }
        page.seal();
        page
    }

    /// The page in place in `file`, if it is whole.
    fn in_place(file: &dyn File, id: u64) -> Option<Page> {
        let mut page = Page::zeroed();
        let complete = file
            .read_exact_at(PageId(id).offset(), page.bytes_mut_for_read())
            .ok()?;
        (complete && page.verify(PageId(id)).is_ok()).then_some(page)
    }

    fn tear(storage: &SimStorage, id: u64) {
        let mut bytes = storage.file_bytes(DATA).expect("data file");
        let at = PageId(id).offset() as usize + PAGE_SIZE / 2;
        bytes[at..at + PAGE_SIZE / 2].fill(0xee);
        storage.set_file_bytes(DATA, bytes);
    }

    #[test]
    fn a_torn_page_is_restored_from_its_latest_copy() {
        let storage = SimStorage::new();
        let area = open_area(&storage, 8, true).unwrap();
        let file = data(&storage);
        for lsn in [10, 20] {
            area.write(file.as_ref(), PageId(3), &version(3, lsn))
                .unwrap();
        }
        area.write(file.as_ref(), PageId(4), &version(4, 20))
            .unwrap();
        tear(&storage, 3);
        let restart = storage.process_crash();
        let area = open_area(&restart, 8, false).unwrap();
        let file = data(&restart);
        assert!(in_place(file.as_ref(), 3).is_none(), "the page is torn");
        let restored = area.restore(file.as_ref(), ANY_PAGE).unwrap();
        assert_eq!(
            restored,
            Restored {
                copies: 2,
                pages: 1
            }
        );
        let page = in_place(file.as_ref(), 3).expect("restored");
        assert_eq!(
            page.bytes(),
            version(3, 20).bytes(),
            "the latest copy, not the older one"
        );
    }

    /// A new area of `slots` slots and its data file, on fresh simulated storage.
    fn new_area(slots: usize) -> (SimStorage, DoubleWrite, Arc<dyn File>) {
        let storage = SimStorage::new();
        let area = open_area(&storage, slots, true).unwrap();
        let file = data(&storage);
        (storage, area, file)
    }

    /// The area of `slots` slots and the data file as a restart finds them on `storage`.
    fn reopen(storage: &SimStorage, slots: usize) -> (DoubleWrite, Arc<dyn File>) {
        (open_area(storage, slots, false).unwrap(), data(storage))
    }

    /// Writes version `lsn` of each of `pages` through `area`.
    fn write_all(area: &DoubleWrite, file: &dyn File, pages: Range<u64>, lsn: u64) {
        for id in pages {
            area.write(file, PageId(id), &version(id, lsn)).unwrap();
        }
    }

    /// The copies a sync covered are durable in place: a restore after a crash checks only
    /// the ones written since (the synced mark), and still restores a page torn after it.
    #[test]
    fn a_restore_checks_only_the_copies_written_since_the_last_sync() {
        let (storage, area, file) = new_area(16);
        write_all(&area, file.as_ref(), 1..5, 10);
        area.sync(file.as_ref()).unwrap();
        write_all(&area, file.as_ref(), 5..7, 20);
        tear(&storage, 6);
        let restart = storage.process_crash();
        let (area, file) = reopen(&restart, 16);
        let restored = area.restore(file.as_ref(), ANY_PAGE).unwrap();
        assert_eq!(
            restored,
            Restored {
                copies: 2,
                pages: 1
            },
            "only the two copies past the sync are checked"
        );
        assert_eq!(in_place(file.as_ref(), 6).expect("restored").lsn(), 20);
    }

    /// A mark that fails its checks (damaged, or naming writes the area never made) counts
    /// as none: every copy is checked.
    #[test]
    fn a_damaged_synced_mark_counts_as_none() {
        for damage in [Some(0x5a), None] {
            let (storage, area, file) = new_area(16);
            write_all(&area, file.as_ref(), 1..5, 10);
            area.sync(file.as_ref()).unwrap();
            let mut bytes = storage.region_bytes(AREA).unwrap();
            for at in MARKS {
                match damage {
                    Some(byte) => bytes[at + 9] ^= byte,
                    // A mark past every write, its crc valid.
                    None => bytes[at..at + MARK_BYTES].copy_from_slice(&mark_bytes(DB, 99)),
                }
            }
            storage.set_region_bytes(AREA, bytes);
            let restart = storage.process_crash();
            let (area, file) = reopen(&restart, 16);
            let restored = area.restore(file.as_ref(), ANY_PAGE).unwrap();
            assert_eq!(restored.copies, 4, "{damage:?}: every copy is checked");
        }
    }

    /// A new mark is written over the record that does not hold the highest one: a mark
    /// write torn by a power cut leaves the mark before it, not none (with none, every copy
    /// counts, and a copy older than a page's durable version is written over it).
    #[test]
    fn a_torn_mark_leaves_the_mark_before_it() {
        let (storage, area, file) = new_area(16);
        write_all(&area, file.as_ref(), 1..5, 10);
        area.sync(file.as_ref()).unwrap();
        let first = area.read_mark();
        write_all(&area, file.as_ref(), 5..9, 10);
        area.sync(file.as_ref()).unwrap();
        let second = area.read_mark();
        assert!(first > 0 && second > first, "marks {first} then {second}");
        let mut bytes = storage.region_bytes(AREA).unwrap();
        let newest = MARKS
            .into_iter()
            .find(|&at| bytes[at..at + MARK_BYTES] == mark_bytes(DB, second))
            .expect("a record holds the newest mark");
        // Its seq persisted, its crc not: what a power cut between the two words leaves.
        bytes[newest + 8..newest + MARK_BYTES].copy_from_slice(&[0; 4]);
        storage.set_region_bytes(AREA, bytes);
        let (area, _) = reopen(&storage.process_crash(), 16);
        assert_eq!(
            area.read_mark(),
            first,
            "the mark after a torn write of the next one"
        );
    }

    /// A sync covers only the writes that finished before it began: a write still in
    /// flight then (its copy taken, its in-place write to come) stays past the mark, and a
    /// page it tears after the sync is restored.
    #[test]
    fn a_write_in_flight_during_a_sync_stays_past_the_mark() {
        let (storage, area, file) = new_area(16);
        write_all(&area, file.as_ref(), 1..2, 10);
        let seq = area.take_slot(file.as_ref()).unwrap();
        write_all(&area, file.as_ref(), 2..3, 10);
        area.sync(file.as_ref()).unwrap();
        area.copy_then_write(file.as_ref(), seq, PageId(1), &version(1, 20))
            .unwrap();
        area.ring.lock().in_flight.retain(|&s| s != seq);
        tear(&storage, 1);
        let restart = storage.process_crash();
        let (area, file) = reopen(&restart, 16);
        assert_eq!(area.restore(file.as_ref(), ANY_PAGE).unwrap().pages, 1);
        assert_eq!(in_place(file.as_ref(), 1).expect("restored").lsn(), 20);
    }

    /// A write that failed in place may have torn its page; a later write's sync does not
    /// make that page durable, so a restore must still check (and restore) its copy.
    #[test]
    fn a_page_whose_write_failed_is_restored_after_a_later_sync() {
        let (storage, area, file) = new_area(16);
        write_all(&area, file.as_ref(), 5..6, 10);
        area.sync(file.as_ref()).unwrap();
        storage.fail_nth_write(1);
        assert!(area
            .write(file.as_ref(), PageId(5), &version(5, 20))
            .is_err());
        // As a write that failed half way could leave it.
        tear(&storage, 5);
        write_all(&area, file.as_ref(), 6..7, 20);
        area.sync(file.as_ref()).unwrap();
        let restart = storage.power_cut(7);
        let (area, file) = reopen(&restart, 16);
        let restored = area.restore(file.as_ref(), ANY_PAGE).unwrap();
        assert_eq!(restored.pages, 1, "the torn page is restored");
        assert_eq!(in_place(file.as_ref(), 5).expect("whole").lsn(), 20);
    }

    /// A sync that failed may have lost the in-place writes it covered (Linux drops their
    /// write-back and tells that one sync only): no later sync, on any thread, may free
    /// their slots or move the synced mark past them, or a restore would skip their copies.
    #[test]
    fn a_later_sync_does_not_vouch_for_writes_a_failed_one_lost() {
        let (storage, area, file) = new_area(16);
        write_all(&area, file.as_ref(), 5..6, 10);
        area.sync(file.as_ref()).unwrap();
        write_all(&area, file.as_ref(), 6..7, 20);
        storage.fail_nth_sync(1);
        assert!(area.sync(file.as_ref()).is_err());
        // What the lost write-back left: the page half written.
        tear(&storage, 6);
        let later = area.sync(file.as_ref());
        assert!(
            matches!(later, Err(MediaError::SyncFailedBefore { .. })),
            "{later:?}"
        );
        // A new process's handle would sync, and make the torn page durable, as Linux's.
        data(&storage).sync_data().unwrap();
        let restart = storage.power_cut(7);
        let (area, file) = reopen(&restart, 16);
        let restored = area.restore(file.as_ref(), ANY_PAGE).unwrap();
        assert_eq!(restored.pages, 1, "the torn page is restored");
        assert_eq!(in_place(file.as_ref(), 6).expect("whole").lsn(), 20);
    }

    /// A restart after a failed sync (the crashed process stopped on it): the page whose
    /// write-back it lost reads back whole from the page cache and is not on the disk. The
    /// restore, which moves the synced mark past its copy, must write it again first.
    #[test]
    fn a_restore_writes_again_what_a_failed_sync_lost() {
        let (storage, area, file) = new_area(16);
        write_all(&area, file.as_ref(), 5..7, 10);
        area.sync(file.as_ref()).unwrap();
        write_all(&area, file.as_ref(), 6..7, 20);
        storage.fail_nth_sync(1);
        assert!(area.sync(file.as_ref()).is_err());
        let restart = storage.process_crash();
        let (area, file) = reopen(&restart, 16);
        let restored = area.restore(file.as_ref(), ANY_PAGE).unwrap();
        assert_eq!(restored.pages, 0, "whole in the page cache");
        for seed in 0..8 {
            let file = data(&restart.power_cut(seed));
            let page = in_place(file.as_ref(), 6);
            assert_eq!(page.map(|p| p.lsn()), Some(20), "seed {seed}");
        }
    }

    /// A new area of 8 slots after one write (page 9 at LSN 10), and the slot that holds it:
    /// the starting point of the tests that damage a slot behind its checksums.
    fn area_with_one_write(storage: &SimStorage) -> (DoubleWrite, u64) {
        let area = open_area(storage, 8, true).unwrap();
        area.write(data(storage).as_ref(), PageId(9), &version(9, 10))
            .unwrap();
        let slot = (0..area.slots)
            .find(|&slot| area.slot_header(slot).is_some())
            .expect("a used slot");
        (area, slot)
    }

    /// A whole, valid copy of a page the caller says no copy can be of (a meta page of the
    /// engine's, one 2^40 pages into the file) was never written by the area: damage behind
    /// valid checksums, refused before anything is written in place.
    #[test]
    fn a_copy_of_a_page_outside_the_restorable_ones_is_refused() {
        for outside in [3, 1 << 40] {
            let storage = SimStorage::new();
            let (area, slot) = area_with_one_write(&storage);
            // The slot of that write now holds a copy of page `outside`, every check valid.
            let (seq, _) = area.slot_header(slot).expect("used");
            let copy = version(outside, 10);
            let at = area.slot_offset(slot);
            area.region.write(at + SLOT_HEADER, copy.bytes());
            let header = slot_header_bytes(seq, PageId(outside), copy.header().checksum);
            area.region.write(at, &header);
            let restart = storage.process_crash();
            let area = open_area(&restart, 8, false).unwrap();
            let file = data(&restart);
            let len = file.len().unwrap();
            match area.restore(file.as_ref(), 8..100) {
                Err(StorageError::Corrupt { page_id, reason }) => {
                    assert_eq!(page_id, PageId(outside));
                    assert!(reason.contains("double-write"), "{reason}");
                }
                other => panic!("a copy of page {outside} restored: {other:?}"),
            }
            assert_eq!(file.len().unwrap(), len, "nothing written");
            // Within the pages, the same copy is restored (page 3 is missing in place).
            if outside == 3 {
                let restored = area.restore(file.as_ref(), ANY_PAGE).unwrap();
                assert_eq!(restored.pages, 1);
            }
        }
    }

    /// A slot whose write number lies past any an area makes (its CRC computed again, so
    /// only the number tells) is refused when the area opens; counted on from, it overflowed
    /// at the next write.
    #[test]
    fn a_slot_numbered_past_any_write_the_area_makes_is_refused() {
        for seq in [MAX_SEQ + 1, u64::MAX - 1, u64::MAX] {
            let storage = SimStorage::new();
            let (area, slot) = area_with_one_write(&storage);
            let header = slot_header_bytes(seq, PageId(9), version(9, 10).header().checksum);
            area.region.write(area.slot_offset(slot), &header);
            let restart = storage.process_crash();
            match open_area(&restart, 8, false) {
                Err(StorageError::DoubleWriteArea { reason, .. }) => {
                    assert!(reason.contains("write number"), "{reason}")
                }
                Err(other) => panic!("write number {seq}: another error: {other}"),
                Ok(area) => {
                    let file = data(&restart);
                    area.restore(file.as_ref(), ANY_PAGE).unwrap();
                    let written = area.write(file.as_ref(), PageId(10), &version(10, 11));
                    panic!("write number {seq}: the area opened (and wrote: {written:?})");
                }
            }
        }
        // The bound itself is a number an area may have reached.
        let storage = SimStorage::new();
        let (area, slot) = area_with_one_write(&storage);
        let header = slot_header_bytes(MAX_SEQ, PageId(9), version(9, 10).header().checksum);
        area.region.write(area.slot_offset(slot), &header);
        let restart = storage.process_crash();
        let area = open_area(&restart, 8, false).unwrap();
        let file = data(&restart);
        for lsn in 11..30 {
            area.write(file.as_ref(), PageId(9), &version(9, lsn))
                .unwrap();
        }
    }

    /// Pages written (several versions each) through an area of a few slots, with syncs now
    /// and then, the medium dying at a random operation, then a power cut: after restore,
    /// every page is whole, is a version that was written (or attempted), and is no older
    /// than the last version a sync covered.
    #[test]
    fn after_a_power_cut_every_page_is_whole_and_no_older_than_its_last_sync() {
        let mut restored = 0;
        for seed in 0..300u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let storage = SimStorage::new();
            let area = open_area(&storage, 4, true).unwrap();
            let file = data(&storage);
            if seed % 3 != 0 {
                storage.crash_after(1 + rng.gen_range(0..400));
            }
            let written = write_versions(&area, file.as_ref(), &mut rng, 0..6, 60, 10);
            restored += restore_and_check(&storage, seed, &[written]);
        }
        // Half of the cuts tear a file's unsynced writes; the others keep all or none of them.
        assert!(
            restored > 50,
            "the power cuts should tear pages ({restored} restored)"
        );
    }

    /// Four threads write pages of their own (several versions each) at once through an
    /// area of four slots, so that a write often needs the slot of another thread's write
    /// still in flight; each syncs now and then; the medium dies at a random operation or
    /// not, then a power cut: after restore every page is whole, a version that was written
    /// (or attempted), and no older than the last version its thread's sync covered.
    #[test]
    fn writes_from_several_threads_at_once_survive_a_power_cut() {
        let mut restored = 0;
        for seed in 0..150u64 {
            let storage = SimStorage::new();
            let area = open_area(&storage, 4, true).unwrap();
            let file = data(&storage);
            if seed % 3 != 0 {
                storage.crash_after(1 + (seed * 37) % 600);
            }
            let (area, file) = (&area, &file);
            let written: Vec<Written> = std::thread::scope(|s| {
                let workers: Vec<_> = (0..4u64)
                    .map(|t| {
                        s.spawn(move || {
                            let mut rng = StdRng::seed_from_u64(seed * 16 + t);
                            let pages = 10 * t..10 * t + 3;
                            write_versions(area, file.as_ref(), &mut rng, pages, 40, 8)
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().unwrap()).collect()
            });
            restored += restore_and_check(&storage, seed, &written);
        }
        // Half of the cuts tear a file's unsynced writes (20 to 35 restored in five runs).
        assert!(
            restored > 10,
            "the power cuts should tear pages ({restored} restored)"
        );
    }

    /// Per page: the last version a sync covered, and the last version attempted.
    type Written = (HashMap<u64, u64>, HashMap<u64, u64>);

    /// Writes `versions` versions of pages drawn from `pages` through `area`, syncing after
    /// one write in `sync_one_in`, until the medium fails.
    fn write_versions(
        area: &DoubleWrite,
        file: &dyn File,
        rng: &mut StdRng,
        pages: std::ops::Range<u64>,
        versions: u64,
        sync_one_in: u32,
    ) -> Written {
        let mut floor = HashMap::new();
        let mut last = HashMap::new();
        for lsn in 1..=versions {
            let id = rng.gen_range(pages.clone());
            // Attempted: a write that fails after its copy is persistent may be restored.
            last.insert(id, lsn);
            if area.write(file, PageId(id), &version(id, lsn)).is_err() {
                break;
            }
            if rng.gen_ratio(1, sync_one_in) {
                if area.sync(file).is_err() {
                    break;
                }
                floor.clone_from(&last);
            }
        }
        (floor, last)
    }

    /// Cuts the power, restores the area and checks every page `written` names: whole, a
    /// version that was attempted, no older than its last sync. Returns the pages restored.
    fn restore_and_check(storage: &SimStorage, seed: u64, written: &[Written]) -> usize {
        let restart = storage.power_cut(seed);
        let area = open_area(&restart, 4, false).unwrap();
        let file = data(&restart);
        let restored = area.restore(file.as_ref(), ANY_PAGE).unwrap().pages;
        for (floor, last) in written {
            for (&id, &lsn) in last {
                let floor = floor.get(&id).copied().unwrap_or(0);
                match in_place(file.as_ref(), id) {
                    Some(page) => {
                        assert!(page.lsn() >= floor, "seed {seed}: page {id} went back");
                        assert_eq!(page.bytes(), version(id, page.lsn()).bytes());
                        assert!(page.lsn() <= lsn);
                    }
                    None => assert_eq!(floor, 0, "seed {seed}: page {id} is not whole"),
                }
            }
        }
        restored
    }

    #[test]
    fn a_page_is_not_written_in_place_when_its_copy_could_not_be_persisted() {
        let storage = SimStorage::new();
        let area = open_area(&storage, 4, true).unwrap();
        let file = data(&storage);
        area.write(file.as_ref(), PageId(1), &version(1, 1))
            .unwrap();
        storage.fail_region_fences_after(1);
        assert!(area
            .write(file.as_ref(), PageId(1), &version(1, 2))
            .is_err());
        let page = in_place(file.as_ref(), 1).expect("still whole");
        assert_eq!(
            page.lsn(),
            1,
            "the write whose copy failed must not reach the page"
        );
    }

    #[test]
    fn an_area_of_another_database_is_refused_and_a_new_database_wipes_it() {
        let storage = SimStorage::new();
        let area = open_area(&storage, 4, true).unwrap();
        let file = data(&storage);
        area.write(file.as_ref(), PageId(2), &version(2, 5))
            .unwrap();
        let region = storage
            .map_region(Path::new(AREA), 0, OpenMode::Existing)
            .unwrap();
        let err = DoubleWrite::open(region.clone(), AREA, DB + 1, false)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("another database"), "{err}");
        // A new database in the same place: the stale copy must not land in its pages.
        let fresh = SimStorage::new();
        let fresh_file = data(&fresh);
        let area = DoubleWrite::open(region, AREA, DB + 1, true).unwrap();
        assert_eq!(
            area.restore(fresh_file.as_ref(), ANY_PAGE).unwrap(),
            Restored::default()
        );
        assert!(in_place(fresh_file.as_ref(), 2).is_none());
    }

    /// A header whose slot count is more than the region holds, however large, with its
    /// CRC computed again, is refused (a count near 2^64 overflowed computing the area's size).
    #[test]
    fn a_header_claiming_more_slots_than_the_region_holds_is_refused() {
        for claimed in [5, 1 << 40, u64::MAX / 2, u64::MAX] {
            let storage = SimStorage::new();
            let area = open_area(&storage, 4, true).unwrap();
            area.write(data(&storage).as_ref(), PageId(1), &version(1, 1))
                .unwrap();
            let mut bytes = storage.region_bytes(AREA).unwrap();
            bytes[8..16].copy_from_slice(&claimed.to_le_bytes());
            let crc = crc32c::crc32c(&bytes[..32]);
            bytes[32..36].copy_from_slice(&crc.to_le_bytes());
            storage.set_region_bytes(AREA, bytes);
            let region = storage
                .map_region(Path::new(AREA), 0, OpenMode::Existing)
                .unwrap();
            let err = DoubleWrite::open(region, AREA, DB, false)
                .err()
                .expect("refused");
            assert!(err.to_string().contains("slots"), "{claimed}: {err}");
        }
    }

    #[test]
    fn a_damaged_header_of_a_used_area_is_an_error_and_of_an_unused_one_is_rewritten() {
        let storage = SimStorage::new();
        let area = open_area(&storage, 4, true).unwrap();
        let reopen = || {
            let region = storage
                .map_region(Path::new(AREA), 0, OpenMode::Existing)
                .unwrap();
            DoubleWrite::open(region, AREA, DB, false)
        };
        let mut bytes = storage.region_bytes(AREA).unwrap();
        bytes[9] ^= 1;
        storage.set_region_bytes(AREA, bytes);
        assert_eq!(
            reopen().unwrap().slots(),
            4,
            "no slot used: formatted again"
        );
        area.write(data(&storage).as_ref(), PageId(1), &version(1, 1))
            .unwrap();
        let mut bytes = storage.region_bytes(AREA).unwrap();
        bytes[9] ^= 1;
        storage.set_region_bytes(AREA, bytes);
        let err = reopen().err().expect("refused");
        assert!(err.to_string().contains("checksum"), "{err}");
    }
}
