//! Reading records back: the byte sources a log can be read from, and the scanner that finds the
//! longest valid prefix. Used by recovery and by replay.

use std::sync::atomic::{AtomicU64, Ordering};

use tailstore_media::File;

use crate::error::Result;
use crate::record::{parse_header, record_size, RECORD_HEADER};
use crate::recovery::Walked;
use crate::ring::Ring;

/// Where the bytes of the log stream come from.
pub(crate) enum Source<'a> {
    /// Only the log file (`fsync`, `async`).
    File(FileReader<'a>),
    /// Only the ring, which holds `[floor, floor + capacity)` (`pmem-log`).
    Ring { ring: &'a Ring, floor: u64 },
    /// The log file below `boundary` (hardened), the PMEM ring from there on (`buffer`); below
    /// `boundary` too, the records the ring's last lap still holds ([`Source::ring_lap`]).
    Stitched {
        file: FileReader<'a>,
        ring: &'a Ring,
        boundary: u64,
        lap: Lap<'a>,
    },
}

/// Which of the ring's slots below the hardened LSN a reader may read ([`Source::ring_lap`]).
/// Appends write slots up to `window` past the floor, the slots of LSNs below
/// `floor + window - capacity` again (their next lap), so only records above that bound, both
/// before and after they are copied, are read from the ring: the floor only grows, and an
/// append writes a slot only once it has read a floor that allows it, so a copy that the
/// later bound still covers raced with no append. A copy it no longer covers may have (the
/// mapped ring is plain memory to its readers), and is thrown away for the file's. The same
/// bound at recovery (the floor then the hardened LSN the crashed process left) keeps what a
/// restart reads from the ring readable there afterwards too: the log it opened is the log it
/// reads, whichever copy a read comes from.
#[derive(Clone, Copy)]
pub(crate) struct Lap<'a> {
    pub floor: &'a AtomicU64,
    pub window: u64,
}

impl Lap<'_> {
    /// The lowest LSN whose ring slot the reader may read now.
    fn lowest(&self, ring: &Ring) -> u64 {
        (self.floor.load(Ordering::Acquire) + self.window).saturating_sub(ring.capacity())
    }
}

impl Source<'_> {
    /// Makes the stream's bytes `[lsn, lsn + len)` persistent where they come from the ring
    /// (a PMEM region: stores a crashed process made may still sit unflushed in the CPU's
    /// caches). The file's bytes are the caller's: [`LogReplay::open`] syncs the file once.
    ///
    /// [`LogReplay::open`]: crate::LogReplay::open
    fn persist(&self, lsn: u64, len: u64) -> Result<()> {
        let (ring, from) = match self {
            Source::File(_) => return Ok(()),
            Source::Ring { ring, .. } => (ring, lsn),
            Source::Stitched { ring, boundary, .. } => (ring, lsn.max(*boundary)),
        };
        let end = lsn + len;
        if from < end {
            ring.persist(from, (end - from) as usize)?;
        }
        Ok(())
    }

    /// Makes the stream's `len` bytes at `lsn` readable with [`Source::placed`]: in place in
    /// the file reader's window where they lie in the file, else copied into `copy`.
    fn place(&mut self, lsn: u64, len: usize, copy: &mut Vec<u8>) -> Result<Option<Placed>> {
        let file = match self {
            Source::File(file) => Some(file),
            Source::Stitched { file, boundary, .. } if lsn + len as u64 <= *boundary => Some(file),
            _ => None,
        };
        if let Some(file) = file {
            return Ok(file
                .hold(lsn, len)?
                .then_some(Placed::InWindow { lsn, len }));
        }
        copy.resize(len, 0);
        Ok(self.read(lsn, copy)?.then_some(Placed::Copied))
    }

    /// The bytes [`Source::place`] placed, `copy` being the buffer it was given.
    fn placed<'s>(&'s self, placed: Placed, copy: &'s [u8]) -> &'s [u8] {
        match (placed, self) {
            (Placed::InWindow { lsn, len }, Source::File(file))
            | (Placed::InWindow { lsn, len }, Source::Stitched { file, .. }) => file.held(lsn, len),
            _ => copy,
        }
    }

    /// Fills `buf` with the stream's bytes at `lsn`; `false` if they are not (all) available.
    fn read(&mut self, lsn: u64, buf: &mut [u8]) -> Result<bool> {
        match self {
            Source::File(file) => file.read(lsn, buf),
            Source::Ring { ring, floor } => Ok(read_ring(ring, *floor, lsn, buf)),
            Source::Stitched {
                file,
                ring,
                boundary,
                ..
            } => {
                let below = (boundary.saturating_sub(lsn) as usize).min(buf.len());
                let (disk_part, ring_part) = buf.split_at_mut(below);
                if !disk_part.is_empty() && !file.read(lsn, disk_part)? {
                    return Ok(false);
                }
                Ok(ring_part.is_empty()
                    || read_ring(ring, *boundary, lsn + below as u64, ring_part))
            }
        }
    }
}

impl<'a> Source<'a> {
    /// `buffer` mode, below the hardened LSN: the ring, the lowest LSN of its last lap there
    /// that the reader may read, and the hardened LSN, where that lap ends (see [`Lap`]). The
    /// log writer copies the ring to the file without moving it, and a slot is written again
    /// only by the next lap, so the ring still holds the records below the hardened LSN that
    /// the next lap has not reached: a restart reads those from PMEM, at memory speed,
    /// instead of from the disk (decision 109). Whether a slot still holds *this* record is
    /// told, as for every record, by the LSN in its header and its checksum; where it does
    /// not, the file has the record.
    fn ring_lap(&self, lsn: u64) -> Option<RingLap<'a>> {
        match *self {
            Source::Stitched {
                ring,
                boundary,
                lap,
                ..
            } if lsn < boundary => {
                let lowest = lap.lowest(ring);
                (lsn >= lowest).then_some(RingLap {
                    ring,
                    lowest,
                    end: boundary,
                    lap,
                })
            }
            _ => None,
        }
    }
}

/// The part of a ring's last lap a reader may read ([`Source::ring_lap`]).
struct RingLap<'a> {
    ring: &'a Ring,
    lowest: u64,
    end: u64,
    lap: Lap<'a>,
}

impl RingLap<'_> {
    fn holds(&self, lsn: u64, len: usize) -> bool {
        within(self.lowest, self.end, lsn, len)
    }

    /// Copies `[lsn, lsn + buf.len())` out of the ring; `false` if this part of the lap
    /// does not hold it, or no longer did by the end of the copy.
    fn read(&self, lsn: u64, buf: &mut [u8]) -> bool {
        read_ring_within(self.ring, self.lowest, self.end, lsn, buf)
            && lsn >= self.lap.lowest(self.ring)
    }
}

/// Copies the ring's `[lsn, lsn + buf.len())` into `buf` if the lap that starts at `floor`
/// holds it.
fn read_ring(ring: &Ring, floor: u64, lsn: u64, buf: &mut [u8]) -> bool {
    read_ring_within(ring, floor, floor + ring.capacity(), lsn, buf)
}

/// Copies the ring's `[lsn, lsn + buf.len())` into `buf` if it lies within `[from, to)`.
fn read_ring_within(ring: &Ring, from: u64, to: u64, lsn: u64, buf: &mut [u8]) -> bool {
    let available = within(from, to, lsn, buf.len());
    if available {
        ring.read(lsn, buf);
    }
    available
}

fn within(from: u64, to: u64, lsn: u64, len: usize) -> bool {
    lsn >= from && lsn + len as u64 <= to
}

/// Where [`Source::place`] put a record's payload.
#[derive(Clone, Copy, Debug)]
enum Placed {
    /// In the file reader's window, as the file holds it.
    InWindow { lsn: u64, len: usize },
    /// In the scanner's copy.
    Copied,
}

/// Positioned reads of the log file through a read-ahead window, so that scanning a large log
/// costs one system call per window rather than two per record.
pub(crate) struct FileReader<'a> {
    file: &'a dyn File,
    window: Vec<u8>,
    window_start: u64,
    /// Bytes read at least per system call.
    read_ahead: usize,
}

const READ_AHEAD: usize = 1 << 20;

impl<'a> FileReader<'a> {
    pub fn new(file: &'a dyn File) -> Self {
        Self::with_read_ahead(file, READ_AHEAD)
    }

    /// A reader of exactly the bytes asked for: for one record, not a walk.
    pub fn exact(file: &'a dyn File) -> Self {
        Self::with_read_ahead(file, 0)
    }

    fn with_read_ahead(file: &'a dyn File, read_ahead: usize) -> Self {
        Self {
            file,
            window: Vec::new(),
            window_start: 0,
            read_ahead,
        }
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<bool> {
        if !self.hold(offset, buf.len())? {
            return Ok(false);
        }
        buf.copy_from_slice(self.held(offset, buf.len()));
        Ok(true)
    }

    /// Makes the window hold the `len` bytes at `offset` (see [`FileReader::held`]); `false`
    /// if the file ends first.
    fn hold(&mut self, offset: u64, len: usize) -> Result<bool> {
        if offset < self.window_start || offset + len as u64 > self.window_end() {
            self.refill(offset, len)?;
        }
        Ok(offset + len as u64 <= self.window_end())
    }

    /// The `len` bytes at `offset`, which [`FileReader::hold`] said the window holds.
    fn held(&self, offset: u64, len: usize) -> &[u8] {
        let at = (offset - self.window_start) as usize;
        &self.window[at..at + len]
    }

    fn window_end(&self) -> u64 {
        self.window_start + self.window.len() as u64
    }

    fn refill(&mut self, offset: u64, at_least: usize) -> Result<()> {
        self.window.resize(self.read_ahead.max(at_least), 0);
        let mut filled = 0;
        while filled < self.window.len() {
            let n = self
                .file
                .read_at(offset + filled as u64, &mut self.window[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        self.window.truncate(filled);
        self.window_start = offset;
        Ok(())
    }
}

/// Walks records from a starting LSN until the first one that does not verify.
pub(crate) struct Scanner<'a> {
    source: Source<'a>,
    salt: u32,
    next: u64,
    /// Whether each record is made persistent before it is returned ([`Scanner::persisting`]).
    persist: bool,
    /// Where the last record returned has its payload ([`Scanner::payload`]).
    last: Option<Placed>,
    /// Payloads that do not lie whole in the file: copied here.
    copy: Vec<u8>,
}

impl<'a> Scanner<'a> {
    pub fn new(source: Source<'a>, salt: u32, start: u64) -> Self {
        Self {
            source,
            salt,
            next: start,
            persist: false,
            last: None,
            copy: Vec::new(),
        }
    }

    /// A scanner that makes each record persistent before returning it: recovery's. What a
    /// crashed process left in the log's valid prefix may not be durable yet (a commit in
    /// flight: written and not synced, stored and not flushed), yet redo applies it, may write
    /// the pages it changed, and appends follow it; a power cut that then dropped it would
    /// leave pages holding parts of a transaction the log no longer has, and cut the log
    /// short before commits acknowledged after the restart.
    pub fn persisting(mut self) -> Self {
        self.persist = true;
        self
    }

    /// The LSN just past the last record returned: the end of the valid prefix once
    /// [`Scanner::next_record`] has returned `None`.
    pub fn position(&self) -> u64 {
        self.next
    }

    /// Reads and verifies the next record and returns its LSN (its payload is then
    /// [`Scanner::payload`]), or `None` at the end of the valid prefix (missing bytes, wrong
    /// LSN, implausible length or bad checksum). A payload that lies whole in the log file is
    /// checked where the file reader's window holds it, not copied: a restart's walk reads
    /// hundreds of MB, and that copy was 5% of it. In `buffer` mode a record the PMEM ring
    /// still holds is read from there first, the file only where it does not (decision 109).
    pub fn next_record(&mut self) -> Result<Option<u64>> {
        self.last = None;
        let lsn = self.next;
        let found = match self.in_ring_lap(lsn) {
            Some(found) => Some(found),
            None => self.in_stream(lsn)?,
        };
        let Some((placed, size)) = found else {
            return Ok(None);
        };
        if self.persist {
            self.source.persist(lsn, size)?;
        }
        self.next = lsn + size;
        self.last = Some(placed);
        Ok(Some(lsn))
    }

    /// The verified record at `lsn` where the stream lays it out (its payload placed) and its
    /// size in the log; `None` where no valid record starts.
    fn in_stream(&mut self, lsn: u64) -> Result<Option<(Placed, u64)>> {
        let mut header = [0u8; RECORD_HEADER];
        if !self.source.read(lsn, &mut header)? {
            return Ok(None);
        }
        let Some(candidate) = parse_header(&header, lsn) else {
            return Ok(None);
        };
        let at = lsn + RECORD_HEADER as u64;
        let Some(placed) = self.source.place(at, candidate.len, &mut self.copy)? else {
            return Ok(None);
        };
        Ok(candidate
            .verifies(self.salt, self.source.placed(placed, &self.copy))
            .then_some((placed, record_size(candidate.len))))
    }

    /// The verified record at `lsn` as the PMEM ring's last lap still holds it (see
    /// [`Source::ring_lap`]), its payload copied; `None` where the ring does not hold it
    /// (the stream then has it, or no record starts there).
    fn in_ring_lap(&mut self, lsn: u64) -> Option<(Placed, u64)> {
        let lap = self.source.ring_lap(lsn)?;
        let mut header = [0u8; RECORD_HEADER];
        if !lap.read(lsn, &mut header) {
            return None;
        }
        let candidate = parse_header(&header, lsn)?;
        let at = lsn + RECORD_HEADER as u64;
        if !lap.holds(at, candidate.len) {
            return None;
        }
        self.copy.resize(candidate.len, 0);
        let verified = lap.read(at, &mut self.copy) && candidate.verifies(self.salt, &self.copy);
        verified.then_some((Placed::Copied, record_size(candidate.len)))
    }

    /// The payload of the record [`Scanner::next_record`] last returned (empty if it
    /// returned none).
    pub fn payload(&self) -> &[u8] {
        match self.last {
            Some(placed) => self.source.placed(placed, &self.copy),
            None => &[],
        }
    }
}

/// A record read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// LSN of the record's first byte.
    pub lsn: u64,
    /// LSN just past the record: what `append` returned for it.
    pub end: u64,
    pub payload: Vec<u8>,
}

/// A record read back from the log into a buffer that [`Records::next_in_place`] reuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub lsn: u64,
    pub end: u64,
    pub payload: &'a [u8],
}

/// Iterator over the records of a log, from its start to the durable end at the time it was made.
pub struct Records<'a> {
    scanner: Scanner<'a>,
    limit: u64,
    /// Records below this LSN are read and verified but not yielded ([`LogReplay`]'s walks).
    ///
    /// [`LogReplay`]: crate::LogReplay
    from: u64,
    done: bool,
    failed: bool,
    /// Records verified so far, and whether the walk passed a record boundary at `from`.
    records: u64,
    reached_from: bool,
}

impl<'a> Records<'a> {
    pub(crate) fn new(scanner: Scanner<'a>, limit: u64) -> Self {
        let from = scanner.position();
        Self::with_bounds(scanner, from, limit)
    }

    /// A walk to the end of the valid prefix that yields the records from `from` on.
    pub(crate) fn walk(scanner: Scanner<'a>, from: u64) -> Self {
        Self::with_bounds(scanner, from, u64::MAX)
    }

    fn with_bounds(scanner: Scanner<'a>, from: u64, limit: u64) -> Self {
        Self {
            scanner,
            limit,
            from,
            done: false,
            failed: false,
            records: 0,
            reached_from: false,
        }
    }

    /// The next record, like [`Iterator::next`], but with its payload where the walk read
    /// it (the log file's window, or a buffer reused from record to record), valid until the
    /// next call. A restart's redo walks hundreds of MB of records: a fresh vector for each
    /// cost a third of the replay in page faults on memory the allocator had returned.
    pub fn next_in_place(&mut self) -> Option<Result<RecordRef<'_>>> {
        let next = self.advance();
        Some(next?.map(|(lsn, end)| RecordRef {
            lsn,
            end,
            payload: self.scanner.payload(),
        }))
    }

    /// Where the walk ended, once it has reached the end of the valid prefix without an
    /// error; `None` before, or after an error.
    pub fn walked(&self) -> Option<Walked> {
        (self.done && !self.failed).then(|| Walked {
            end: self.scanner.position(),
            records: self.records,
            reached_from: self.reached_from,
        })
    }

    /// Reads and verifies the next record (its payload is then the scanner's): its LSN and
    /// end, or `None` past the limit or the valid prefix.
    fn advance(&mut self) -> Option<Result<(u64, u64)>> {
        loop {
            if self.done || self.scanner.position() >= self.limit {
                return None;
            }
            self.reached_from |= self.scanner.position() == self.from;
            match self.scanner.next_record() {
                Ok(Some(lsn)) => {
                    self.records += 1;
                    if lsn >= self.from {
                        return Some(Ok((lsn, self.scanner.position())));
                    }
                }
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl Iterator for Records<'_> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self.advance()?;
        Some(next.map(|(lsn, end)| Record {
            lsn,
            end,
            payload: self.scanner.payload().to_vec(),
        }))
    }
}
