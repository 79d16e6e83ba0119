//! The one narrow interface through which tailstore touches persistent media.
//!
//! Everything the log manager (and, later, the storage engine) stores goes through three traits:
//!
//! * [`Storage`] — a tiny file system: open a file, map a PMEM region, sync a directory;
//! * [`File`] — positioned reads and writes plus `fdatasync`;
//! * [`Region`] — a byte-addressable persistent region: stores, cache-line write-back and fences.
//!
//! Two backends implement them: [`real`] (Linux files, `mmap` with CLWB/CLFLUSHOPT/SFENCE) and
//! [`sim`] (in-memory, with fault injection and simulated power cuts that keep or drop every
//! unpersisted 8-byte piece). Code above this crate never knows which one it runs on.
//!
//! All `unsafe` code of the project lives in [`pmem`], the mapped-memory backend.

#![deny(unsafe_code)]

use std::fmt;
use std::path::Path;
use std::sync::Arc;

pub mod direct_io;
#[allow(unsafe_code)] // the one module that may (see above)
pub mod pmem;
pub mod real;
pub mod scaled_growth;
pub mod sim;

/// Cache-line size assumed by every flush computation (all x86-64 parts with CLWB use 64).
pub const CACHE_LINE: usize = 64;

/// Size of the unit that PMEM writes atomically: an aligned 8-byte store is failure-atomic.
pub const ATOMIC_UNIT: usize = 8;

/// Errors from the media layer. They carry the path so that a user sees *which* file failed.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("directory does not exist: {0}")]
    MissingDirectory(String),
    #[error("file does not exist: {0}")]
    MissingFile(String),
    #[error("{path} is {actual} bytes, need at least {needed}")]
    TooSmall {
        path: String,
        actual: u64,
        needed: u64,
    },
    #[error("persist of {path} failed: {reason}")]
    Persist { path: String, reason: String },
    #[error("{0} is in use by another process (it holds the file's lock)")]
    Locked(String),
    #[error(
        "cannot create {path} of {needed} bytes: its file system has {free} bytes free, and a \
         mapped file whose pages cannot be allocated crashes the process at its first write \
         there (SIGBUS)"
    )]
    NoSpace {
        path: String,
        needed: u64,
        free: u64,
    },
    #[error(
        "direct write to {path} is not aligned to {align} bytes (offset {offset}, {len} bytes, \
         buffer at {address:#x})",
        align = direct_io::DIRECT_ALIGN
    )]
    Misaligned {
        path: String,
        offset: u64,
        len: usize,
        address: usize,
    },
    #[error(
        "{path}: an earlier fdatasync of it failed, so no later one can vouch for the writes \
         that one covered (Linux reports a lost write-back once)"
    )]
    SyncFailedBefore { path: String },
    #[error("simulated power cut: the medium is gone")]
    PowerCut,
    #[error("injected fault: {0}")]
    Injected(&'static str),
}

pub type Result<T> = std::result::Result<T, MediaError>;

/// Whether an open may create the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Open an existing file; fail with [`MediaError::MissingFile`] if it is absent.
    Existing,
    /// Open the file, creating it (empty, or zero-filled for regions) if it is absent.
    CreateIfMissing,
}

/// How the bytes of a [`Region`] are made persistent; printed in every report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Medium {
    /// A DAX mapping (MAP_SYNC accepted): CPU cache write-back makes data persistent.
    DaxPmem,
    /// A shared mapping of a file on tmpfs or another non-DAX file system, flushed with CPU
    /// instructions: survives a process crash, not a power cut.
    EmulatedPmem,
    /// A mapping that is made persistent with `msync` (CPUs without CLWB/CLFLUSHOPT/CLFLUSH).
    MsyncMapped,
    /// Ordinary process memory: nothing survives.
    Volatile,
    /// The simulated backend used by tests.
    Simulated,
}

impl fmt::Display for Medium {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Medium::DaxPmem => "PMEM (DAX, MAP_SYNC)",
            Medium::EmulatedPmem => "emulated PMEM (survives a process crash, not a power cut)",
            Medium::MsyncMapped => "mapped file persisted with msync",
            Medium::Volatile => "volatile memory (nothing survives)",
            Medium::Simulated => "simulated media (tests)",
        })
    }
}

/// The CPU instruction (or system call) that writes a cache line back to the medium.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushKind {
    Clwb,
    Clflushopt,
    Clflush,
    Msync,
    /// Volatile and simulated regions need no instruction.
    None,
}

impl fmt::Display for FlushKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FlushKind::Clwb => "CLWB+SFENCE",
            FlushKind::Clflushopt => "CLFLUSHOPT+SFENCE",
            FlushKind::Clflush => "CLFLUSH",
            FlushKind::Msync => "msync",
            FlushKind::None => "none",
        })
    }
}

/// The syncs of one file handle, one at a time, and the first failure kept: Linux reports a
/// lost write-back to one `fdatasync` only, marks the pages clean, and lets a later one
/// return success with them still lost. Run one at a time, a sync that overlapped the
/// failing one cannot return its success before the failure is noted; kept, the failure
/// answers every later sync, whoever calls it (the double-write area, a checkpoint's meta
/// page, the log). A new process's handle starts afresh, as Linux's descriptors do: what
/// it reads and relies on it writes again (ARCHITECTURE.md, decision 197).
#[derive(Debug, Default)]
pub struct SyncGuard {
    failed: parking_lot::Mutex<bool>,
}

impl SyncGuard {
    /// Runs `sync` for the file named `path`, unless an earlier one failed.
    pub fn run(&self, path: &str, sync: impl FnOnce() -> Result<()>) -> Result<()> {
        let mut failed = self.failed.lock();
        if *failed {
            return Err(MediaError::SyncFailedBefore {
                path: path.to_string(),
            });
        }
        let result = sync();
        *failed = result.is_err();
        result
    }
}

/// A file on a block device (or tmpfs), accessed with positioned I/O.
///
/// Durability contract: bytes written with [`File::write_at`] are durable once a later
/// [`File::sync_data`] returns `Ok`. A process crash keeps every completed write; a power cut
/// keeps only what was synced (plus an arbitrary subset of the rest, in sectors).
#[allow(clippy::len_without_is_empty)] // `len` is fallible; emptiness is never asked
pub trait File: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (short at EOF).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize>;
    /// Writes all of `data` at `offset`, extending the file if needed.
    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// [`File::write_at`], bypassing the operating system's page cache where the file system
    /// allows it (`O_DIRECT`; see [`direct_io`]). `offset`, `data.len()` and `data`'s address
    /// must be multiples of [`direct_io::DIRECT_ALIGN`] ([`MediaError::Misaligned`]
    /// otherwise). Same durability contract: durable once a later `sync_data` returns.
    fn write_direct_at(&self, offset: u64, data: &[u8]) -> Result<()>;
    /// `fdatasync`: makes every completed write durable. Once one has failed, every later
    /// one on this handle fails with [`MediaError::SyncFailedBefore`] (see [`SyncGuard`]).
    fn sync_data(&self) -> Result<()>;
    /// Current length in bytes.
    fn len(&self) -> Result<u64>;
    /// Truncates or extends the file, then makes the new length durable.
    fn set_len(&self, len: u64) -> Result<()>;
    /// The path, for messages.
    fn path(&self) -> &str;
    /// The bytes of `[offset, offset + len)` are no longer needed: the file system may free
    /// their space (a hole punched in place; the file keeps its length and offsets). What a
    /// later read of the range returns is unspecified, so nothing may read it again.
    fn discard(&self, offset: u64, len: u64) -> Result<()>;
    /// Takes an exclusive lock on the file for as long as this handle lives, or fails with
    /// [`MediaError::Locked`] at once if another process holds it: two processes must never
    /// open one database.
    fn lock_exclusive(&self) -> Result<()>;
    /// Gives the lock of [`File::lock_exclusive`] back (at close: handles to the file may
    /// outlive the database that used it).
    fn unlock(&self) -> Result<()>;

    /// Reads exactly `buf.len()` bytes or reports how many were missing.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<bool> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_at(offset + done as u64, &mut buf[done..])?;
            if n == 0 {
                return Ok(false);
            }
            done += n;
        }
        Ok(true)
    }
}

/// A byte-addressable region that lives in persistent memory (or emulates it).
///
/// Stores become visible to other threads at once but persistent only after [`Region::flush`]
/// of their cache lines *and* a later [`Region::fence`] by the same thread. Aligned 8-byte
/// stores ([`Region::store_u64`]) are failure-atomic; nothing larger is.
///
/// Callers must not write one byte range from two threads at once (the log manager hands out
/// disjoint ranges); concurrent reads of a range being written see unspecified bytes.
pub trait Region: Send + Sync {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `data` into the region at `offset`.
    fn write(&self, offset: usize, data: &[u8]);
    /// Copies bytes out of the region.
    fn read(&self, offset: usize, buf: &mut [u8]);
    /// Sets a range to zero (used to wipe stale log bytes after recovery).
    fn zero(&self, offset: usize, len: usize);
    /// Atomic, failure-atomic 8-byte store at an 8-aligned offset.
    fn store_u64(&self, offset: usize, value: u64);
    /// Atomic 8-byte load at an 8-aligned offset.
    fn load_u64(&self, offset: usize) -> u64;
    /// Starts write-back of every cache line that overlaps `[offset, offset + len)`.
    fn flush(&self, offset: usize, len: usize) -> Result<()>;
    /// Waits until every flush issued by *this thread* has reached the persistence domain.
    fn fence(&self) -> Result<()>;
    /// How persistence is achieved, for reports.
    fn medium(&self) -> Medium;
    /// Which instruction [`Region::flush`] uses.
    fn flush_kind(&self) -> FlushKind;

    /// Copies `data` into the region so that a later [`Region::fence`] by the same thread
    /// makes it persistent, with no separate flush: what `write` + `flush` achieve, but a
    /// backend may use non-temporal stores that bypass the cache.
    fn write_streaming(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.write(offset, data);
        self.flush(offset, data.len())
    }

    /// `flush` then `fence`: after `Ok`, the range is persistent.
    fn persist(&self, offset: usize, len: usize) -> Result<()> {
        self.flush(offset, len)?;
        self.fence()
    }

    /// Sets a range to zero and makes the zeros persistent: after `Ok`, the range reads as
    /// zero now and after whatever the region's medium survives. A backend may release the
    /// memory behind the range instead of writing it (a file-backed mapping punches a hole).
    fn zero_persistent(&self, offset: usize, len: usize) -> Result<()> {
        self.zero(offset, len);
        self.persist(offset, len)
    }

    /// Calls `f` with the bytes `[offset, offset + len)`, placed in memory at the offset
    /// that `file_offset` has within a [`direct_io::DIRECT_ALIGN`] block, so that `f` may
    /// write the whole blocks among them to `file_offset` with [`File::write_direct_at`].
    /// A backend whose own memory is placed so hands it over, and the device then reads the
    /// region itself; otherwise the bytes are copied into `scratch` first. Nobody may write
    /// the range until `f` returns.
    fn with_bytes_placed(
        &self,
        offset: usize,
        len: usize,
        file_offset: u64,
        scratch: &mut direct_io::AlignedBuffer,
        f: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        f(copy_placed(self, offset, len, file_offset, scratch))
    }

    /// Readies the memory behind `[offset, offset + len)` for writes, so that the writes do
    /// not stop to have it allocated and mapped: a file-backed mapping has its pages
    /// allocated and mapped writable now (`MADV_POPULATE_WRITE`), which on tmpfs means
    /// cleared too, the cost of a first write to each page. Changes no byte the region
    /// holds and makes nothing persistent. Best effort: a backend that cannot (an older
    /// kernel, a full file system) leaves the range as it was, and a later write pays as
    /// before (or fails as it would have).
    fn prepare(&self, _offset: usize, _len: usize) {}

    /// Gives up the claim on the region's file: a mapped file is locked from its mapping
    /// (another process mapping it is refused with [`MediaError::Locked`]) until the file is
    /// closed or this is called. Called by its owner's close, as handles may keep the mapping
    /// alive past it. Nothing to give up for memory that is not a file's.
    fn unlock(&self) -> Result<()> {
        Ok(())
    }
}

/// The bytes `[offset, offset + len)` of `region` copied into `scratch` at the offset that
/// `file_offset` has within a [`direct_io::DIRECT_ALIGN`] block (see
/// [`Region::with_bytes_placed`]).
pub fn copy_placed<'a, R: Region + ?Sized>(
    region: &R,
    offset: usize,
    len: usize,
    file_offset: u64,
    scratch: &'a mut direct_io::AlignedBuffer,
) -> &'a [u8] {
    let lead = direct_io::offset_in_block(file_offset);
    scratch.resize(lead + len);
    region.read(offset, &mut scratch.as_mut_slice()[lead..]);
    &scratch.as_slice()[lead..]
}

/// A minimal file system: everything the log manager needs and nothing more.
pub trait Storage: Send + Sync {
    /// Opens (or creates) a regular file. The parent directory must exist.
    fn open_file(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>>;
    /// Maps a persistent region backed by the file at `path`. A new file is created with
    /// `len` zero bytes; an existing file must be at least `len` bytes long (pass `len = 0` to
    /// map an existing file whatever its size).
    fn map_region(&self, path: &Path, len: usize, mode: OpenMode) -> Result<Arc<dyn Region>>;
    /// Maps the region at `path` whatever its size, or creates it with `len` zero bytes if it
    /// is missing or empty. Creating makes the file, then sizes it: a crash in between
    /// leaves an empty file, which holds nothing to keep. Found or created, the region's
    /// name is durable when this returns: one found may have been created by a process that
    /// crashed before it synced the name.
    fn map_or_create_region(&self, path: &Path, len: usize) -> Result<Arc<dyn Region>> {
        let region = match self.map_region(path, 0, OpenMode::Existing) {
            Err(MediaError::MissingFile(_) | MediaError::TooSmall { actual: 0, .. }) => {
                self.map_region(path, len, OpenMode::CreateIfMissing)?
            }
            mapped => mapped?,
        };
        self.sync_name(path)?;
        Ok(region)
    }
    /// A region in ordinary memory, for commit modes that keep the log buffer in DRAM.
    fn volatile_region(&self, len: usize) -> Result<Arc<dyn Region>>;
    /// Whether a file exists.
    fn exists(&self, path: &Path) -> bool;
    /// Whether a directory exists.
    fn is_dir(&self, path: &Path) -> bool;
    /// Makes a directory's entries (newly created files) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Makes the name of the file or region at `path` durable: syncs the directory that
    /// holds it. Syncing a file's data does not (POSIX; ext4 happens to, XFS need not).
    fn sync_name(&self, path: &Path) -> Result<()> {
        self.sync_dir(directory_of(path))
    }
}

/// The directory that holds `path`'s name: its parent, or `.` for a bare file name.
pub fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Rounds `[offset, offset + len)` out to whole cache lines.
pub fn cache_lines(offset: usize, len: usize) -> std::ops::Range<usize> {
    let start = offset / CACHE_LINE * CACHE_LINE;
    if len == 0 {
        return start..start;
    }
    let end = (offset + len).div_ceil(CACHE_LINE) * CACHE_LINE;
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_lines_round_out() {
        assert_eq!(cache_lines(0, 1), 0..64);
        assert_eq!(cache_lines(63, 2), 0..128);
        assert_eq!(cache_lines(64, 64), 64..128);
        assert_eq!(cache_lines(100, 0), 64..64);
    }

    /// A sync that starts while another runs waits for it, and after a failure none runs:
    /// the failure is never answered by a success that overlapped it or came after it.
    #[test]
    fn a_sync_guard_runs_one_sync_at_a_time_and_keeps_the_first_failure() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::Duration;
        let guard = SyncGuard::default();
        let running = AtomicBool::new(false);
        let second = std::thread::scope(|scope| {
            let failing = scope.spawn(|| {
                guard.run("f", || {
                    running.store(true, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(100));
                    Err(MediaError::Injected("sync"))
                })
            });
            while !running.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            let second = guard.run("f", || Ok(()));
            assert!(matches!(
                failing.join(),
                Ok(Err(MediaError::Injected("sync")))
            ));
            second
        });
        assert!(
            matches!(second, Err(MediaError::SyncFailedBefore { .. })),
            "{second:?}"
        );
        let ran = AtomicBool::new(false);
        let third = guard.run("f", || {
            ran.store(true, Ordering::SeqCst);
            Ok(())
        });
        assert!(matches!(third, Err(MediaError::SyncFailedBefore { .. })));
        assert!(!ran.load(Ordering::SeqCst), "no sync runs after a failure");
        assert!(SyncGuard::default().run("g", || Ok(())).is_ok());
    }
}
