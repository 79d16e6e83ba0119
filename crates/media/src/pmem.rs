//! Mapped persistent memory: the only module of tailstore with `unsafe` code.
//!
//! A [`MappedRegion`] is a shared mapping of a file. On a DAX file system the mapping is made
//! with `MAP_SHARED_VALIDATE | MAP_SYNC`, so that the CPU's cache write-back instructions alone
//! make data persistent (no `msync` for metadata). Elsewhere (tmpfs at /dev/shm in the normal
//! case) the same instructions are used and the region is reported as *emulated* PMEM: the bytes
//! live in the page cache, so they survive a process crash but not a power cut.
//!
//! Flush instruction, chosen once per process from CPUID: CLWB (keeps the line cached), else
//! CLFLUSHOPT, else CLFLUSH (serialising, no fence needed), else — on other CPUs — `msync`.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::direct_io::{offset_in_block, AlignedBuffer, DIRECT_ALIGN};
use crate::{cache_lines, copy_placed, FlushKind, MediaError, Medium, Region, Result, CACHE_LINE};

/// The flush instruction this CPU supports best, detected once.
pub fn detected_flush_kind() -> FlushKind {
    static KIND: OnceLock<FlushKind> = OnceLock::new();
    *KIND.get_or_init(detect_flush_kind)
}

#[cfg(target_arch = "x86_64")]
fn detect_flush_kind() -> FlushKind {
    // CPUID leaf 7, sub-leaf 0, EBX: bit 23 = CLFLUSHOPT, bit 24 = CLWB (Intel SDM vol. 2A).
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86-64 CPU and leaf 7 is valid when the max leaf is >= 7.
    let ebx = unsafe {
        if std::arch::x86_64::__cpuid(0).eax >= 7 {
            std::arch::x86_64::__cpuid_count(7, 0).ebx
        } else {
            0
        }
    };
    if ebx & (1 << 24) != 0 {
        FlushKind::Clwb
    } else if ebx & (1 << 23) != 0 {
        FlushKind::Clflushopt
    } else {
        // CLFLUSH is part of SSE2, which every x86-64 CPU has.
        FlushKind::Clflush
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_flush_kind() -> FlushKind {
    FlushKind::Msync
}

/// A shared, writable mapping of a file (or anonymous memory, for volatile regions).
pub struct MappedRegion {
    base: *mut u8,
    len: usize,
    medium: Medium,
    flush: FlushKind,
    path: String,
    /// The mapped file, kept open to punch holes in it ([`Region::zero_persistent`]);
    /// `None` for anonymous memory.
    file: Option<std::fs::File>,
}

// SAFETY: the mapping is plain shared memory that lives until `drop`; every access goes through
// raw-pointer copies or atomics, and the `Region` contract makes callers write disjoint ranges.
unsafe impl Send for MappedRegion {}
// SAFETY: as above; `&MappedRegion` only permits the same raw-pointer accesses from many threads.
unsafe impl Sync for MappedRegion {}

impl MappedRegion {
    /// Maps `path`, creating it with `len` zero bytes if absent and allowed. `len == 0` maps an
    /// existing file whatever its size.
    pub fn map_file(path: &Path, len: usize, create: bool) -> Result<Self> {
        let name = path.display().to_string();
        let io = |op: &'static str| {
            let path = name.clone();
            move |source| MediaError::Io { op, path, source }
        };
        check_parent_exists(path)?;
        if !create && !path.exists() {
            return Err(MediaError::MissingFile(name));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)
            .map_err(io("open"))?;
        // Two processes writing one PMEM log or double-write area would each overwrite what
        // the other made durable; the data file's lock does not cover them (a server given
        // another `--db` with the same `--pmem` never meets it). Held until `unlock` or close.
        crate::real::lock_exclusive(&file, &name)?;
        let actual = file.metadata().map_err(io("stat"))?.len();
        let len = if len == 0 { actual as usize } else { len };
        if actual == 0 && create {
            if let Err(e) = check_free_space(&file, &name, len as u64) {
                // Nothing was in it: a creation, or the remains of one.
                let _ = std::fs::remove_file(path);
                return Err(e);
            }
            file.set_len(len as u64).map_err(io("resize"))?;
        } else if actual < len as u64 {
            return Err(MediaError::TooSmall {
                path: name,
                actual,
                needed: len as u64,
            });
        }
        if len == 0 {
            return Err(MediaError::TooSmall {
                path: name,
                actual: 0,
                needed: 1,
            });
        }
        let (base, dax) = map_shared(file.as_raw_fd(), len).map_err(io("mmap"))?;
        let flush = detected_flush_kind();
        let medium = match (dax, flush) {
            (_, FlushKind::Msync) => Medium::MsyncMapped,
            (true, _) => Medium::DaxPmem,
            (false, _) => Medium::EmulatedPmem,
        };
        Ok(Self {
            base,
            len,
            medium,
            flush,
            path: name,
            file: Some(file),
        })
    }

    /// Anonymous memory with the same interface; flushes and fences are no-ops.
    pub fn anonymous(len: usize) -> Result<Self> {
        // SAFETY: an anonymous private mapping has no preconditions; we check the result.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(MediaError::Io {
                op: "mmap",
                path: "(anonymous)".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(Self {
            base: base.cast(),
            len,
            medium: Medium::Volatile,
            flush: FlushKind::None,
            path: "(volatile)".into(),
            file: None,
        })
    }

    fn check_range(&self, offset: usize, len: usize) {
        // Kept on in release: an out-of-range access would scribble over foreign memory.
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "region access [{offset}, +{len}) outside {} bytes of {}",
            self.len,
            self.path
        );
    }

    fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        self.check_range(offset, 8);
        assert!(
            offset.is_multiple_of(8),
            "unaligned 8-byte access at {offset}"
        );
        // SAFETY: in range (checked), 8-aligned (page-aligned base + aligned offset), and the
        // mapping outlives `&self`; AtomicU64 has the layout of u64.
        unsafe { &*self.base.add(offset).cast::<AtomicU64>() }
    }

    /// Streams `words` (a multiple of 8 bytes) to `at` (8-aligned, range checked by the
    /// caller) with non-temporal stores: 16 bytes at a time where `at` allows, which drains
    /// a 4 KiB record in ~0.41 µs against ~0.59 µs for 8-byte stores (ARCHITECTURE.md,
    /// decision 8).
    fn stream_words(&self, mut at: usize, mut words: &[u8]) {
        debug_assert!(words.len().is_multiple_of(8) && (words.is_empty() || at.is_multiple_of(8)));
        if at % 16 == 8 && !words.is_empty() {
            // SAFETY: `at` is 8-aligned and `at + 8` lies inside the mapping (checked range).
            unsafe { stream_u64(self.base.add(at), first_word(words)) };
            at += 8;
            words = &words[8..];
        }
        let pairs = words.chunks_exact(16);
        let rest = pairs.remainder();
        for (i, pair) in pairs.enumerate() {
            // SAFETY: `at + 16 i` is 16-aligned (page-aligned mapping) and its 16 bytes lie
            // inside the mapping (checked range); `pair` is 16 readable bytes.
            unsafe { stream_u128(self.base.add(at + 16 * i), pair) };
        }
        if !rest.is_empty() {
            let last = at + words.len() - 8;
            // SAFETY: `last` is 8-aligned and its 8 bytes lie inside the mapping.
            unsafe { stream_u64(self.base.add(last), first_word(rest)) };
        }
    }

    fn flush_lines(&self, offset: usize, len: usize) -> Result<()> {
        let lines = cache_lines(offset, len);
        match self.flush {
            FlushKind::None => Ok(()),
            FlushKind::Msync => self.msync(lines.start, lines.len()),
            kind => {
                for line in lines.step_by(CACHE_LINE) {
                    // SAFETY: `line` lies inside the mapping (the range was checked by the caller
                    // and rounding to lines stays within the page-granular mapping).
                    unsafe { write_back_line(kind, self.base.add(line)) };
                }
                Ok(())
            }
        }
    }

    /// Releases the file's blocks behind `[offset, offset + len)` (page-aligned), so that the
    /// range reads as zero, and makes that durable. `Ok(false)`: the file system cannot punch
    /// holes (device DAX, some older file systems), and nothing changed.
    fn punch_hole(&self, file: &std::fs::File, offset: usize, len: usize) -> Result<bool> {
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        let (Ok(at), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return Ok(false);
        };
        // SAFETY: fallocate only changes the file behind the descriptor, which stays open for
        // the call; the mapping stays valid (the kernel maps zero pages over the hole). No
        // other thread uses the range: the caller zeroes it, so it holds nothing anyone reads.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, at, n) };
        if rc != 0 {
            let error = std::io::Error::last_os_error();
            return match error.raw_os_error() {
                Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::ENODEV) => Ok(false),
                _ => Err(self.persist_error(error)),
            };
        }
        // The hole is file-system metadata: on a DAX file system it is durable only once the
        // file is synced (on tmpfs this returns at once).
        file.sync_data()
            .map_err(|error| self.persist_error(error))?;
        Ok(true)
    }

    fn persist_error(&self, error: std::io::Error) -> MediaError {
        MediaError::Persist {
            path: self.path.clone(),
            reason: error.to_string(),
        }
    }

    fn msync(&self, offset: usize, len: usize) -> Result<()> {
        let page = page_size();
        let start = offset / page * page;
        let end = (offset + len).min(self.len);
        // SAFETY: [start, end) lies within the mapping; msync only reads the range.
        let rc = unsafe { libc::msync(self.base.add(start).cast(), end - start, libc::MS_SYNC) };
        if rc != 0 {
            return Err(self.persist_error(std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

impl Region for MappedRegion {
    fn len(&self) -> usize {
        self.len
    }

    fn write(&self, offset: usize, data: &[u8]) {
        self.check_range(offset, data.len());
        // SAFETY: destination is inside the mapping (checked) and cannot overlap `data`, which
        // is ordinary Rust memory; callers write disjoint ranges (Region contract).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(offset), data.len()) }
    }

    fn read(&self, offset: usize, buf: &mut [u8]) {
        self.check_range(offset, buf.len());
        // SAFETY: source is inside the mapping (checked); `buf` is exclusive Rust memory.
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(offset), buf.as_mut_ptr(), buf.len()) }
    }

    fn zero(&self, offset: usize, len: usize) {
        self.check_range(offset, len);
        // SAFETY: the range is inside the mapping (checked).
        unsafe { std::ptr::write_bytes(self.base.add(offset), 0, len) }
    }

    fn store_u64(&self, offset: usize, value: u64) {
        self.atomic_u64(offset).store(value, Ordering::Release);
    }

    /// Punches a hole for the whole pages of the range, which costs neither writes nor
    /// write-backs (recovery clears a 64 MiB ring this way in a few milliseconds instead of
    /// tens), and writes zeros for the partial pages at its ends.
    fn zero_persistent(&self, offset: usize, len: usize) -> Result<()> {
        self.check_range(offset, len);
        let page = page_size();
        let end = offset + len;
        let inner_start = offset.next_multiple_of(page).min(end);
        let inner_end = (end / page * page).max(inner_start);
        let punched = match &self.file {
            Some(file) if inner_end > inner_start => {
                self.punch_hole(file, inner_start, inner_end - inner_start)?
            }
            _ => false,
        };
        if !punched {
            self.zero(offset, len);
            return self.persist(offset, len);
        }
        self.zero(offset, inner_start - offset);
        self.flush(offset, inner_start - offset)?;
        self.zero(inner_end, end - inner_end);
        self.flush(inner_end, end - inner_end)?;
        self.fence()
    }

    fn load_u64(&self, offset: usize) -> u64 {
        self.atomic_u64(offset).load(Ordering::Acquire)
    }

    /// One `madvise(MADV_POPULATE_WRITE)` over the whole pages of the range (Linux 5.14 and
    /// later): the kernel allocates and maps them as a write fault on each would, in one
    /// call (on this VM ~2.2 µs per 4 KiB page of tmpfs, against ~3.4 µs faulted one by one
    /// from the writes). Errors are ignored, as the trait allows: EINVAL from an older
    /// kernel, ENOMEM or EFAULT where the file system has no room (a write there would fail
    /// too, by SIGBUS, which `check_free_space` guards against at creation).
    fn prepare(&self, offset: usize, len: usize) {
        self.check_range(offset, len);
        let page = page_size();
        let start = offset / page * page;
        let end = (offset + len).next_multiple_of(page).min(self.len);
        if end <= start {
            return;
        }
        // SAFETY: [start, end) lies within the mapping (checked, rounded to whole pages of
        // a page-aligned mapping of `self.len` bytes, and `end` capped there). The advice
        // only faults pages in as writable; it changes no content, and concurrent accesses
        // to the range stay as defined as without it.
        let _ = unsafe {
            libc::madvise(
                self.base.add(start).cast(),
                end - start,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }

    fn with_bytes_placed(
        &self,
        offset: usize,
        len: usize,
        file_offset: u64,
        scratch: &mut AlignedBuffer,
        f: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        self.check_range(offset, len);
        let address = self.base as usize + offset;
        if address % DIRECT_ALIGN != offset_in_block(file_offset) {
            return f(copy_placed(self, offset, len, file_offset, scratch));
        }
        // SAFETY: the range is inside the mapping (checked), which stays mapped while `self`
        // lives, so for the whole call; the trait's contract keeps every writer out of the
        // range until `f` returns, so the shared slice's bytes do not change while it exists.
        let bytes = unsafe { std::slice::from_raw_parts(self.base.add(offset), len) };
        f(bytes)
    }

    fn unlock(&self) -> Result<()> {
        match &self.file {
            Some(file) => crate::real::unlock(file, &self.path),
            None => Ok(()),
        }
    }

    fn flush(&self, offset: usize, len: usize) -> Result<()> {
        self.check_range(offset, len);
        self.flush_lines(offset, len)
    }

    fn write_streaming(&self, offset: usize, data: &[u8]) -> Result<()> {
        if !matches!(
            self.flush,
            FlushKind::Clwb | FlushKind::Clflushopt | FlushKind::Clflush
        ) {
            self.write(offset, data);
            return self.flush(offset, data.len());
        }
        self.check_range(offset, data.len());
        // Unaligned head and tail go through the cache and are written back; the aligned
        // middle is streamed with MOVNTI, which needs no write-back (the fence orders it).
        let head = ((8 - offset % 8) % 8).min(data.len());
        let body = (data.len() - head) / 8 * 8;
        let (first, rest) = data.split_at(head);
        let (middle, last) = rest.split_at(body);
        if !first.is_empty() {
            self.write(offset, first);
            self.flush_lines(offset, first.len())?;
        }
        let base = offset + head;
        self.stream_words(base, middle);
        if !last.is_empty() {
            let at = base + body;
            self.write(at, last);
            self.flush_lines(at, last.len())?;
        }
        Ok(())
    }

    fn fence(&self) -> Result<()> {
        if matches!(
            self.flush,
            FlushKind::Clwb | FlushKind::Clflushopt | FlushKind::Clflush
        ) {
            store_fence();
        }
        Ok(())
    }

    fn medium(&self) -> Medium {
        self.medium
    }

    fn flush_kind(&self) -> FlushKind {
        self.flush
    }
}

impl Drop for MappedRegion {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned; no reference outlives `self`.
        unsafe { libc::munmap(self.base.cast(), self.len.max(1)) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// Refuses to create a mapped file of `len` bytes on a file system with less room: its pages
/// are allocated as they are first written (tmpfs allocates memory for them), and a write
/// through the mapping that finds no room is a SIGBUS, not an error a caller could report.
/// (`/dev/shm` is 64 MiB in a default container; `serve`'s PMEM log buffer alone is 1 GiB.)
fn check_free_space(file: &std::fs::File, name: &str, len: u64) -> Result<()> {
    // A file system that cannot say leaves the check to the writes.
    match free_bytes(file) {
        Some(free) if free < len => Err(MediaError::NoSpace {
            path: name.to_string(),
            needed: len,
            free,
        }),
        _ => Ok(()),
    }
}

/// The bytes an unprivileged writer may still allocate on the file system of `file` (a file
/// or a directory), if it says.
pub fn free_bytes(file: &std::fs::File) -> Option<u64> {
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: fstatvfs writes the struct behind the pointer, which is valid and large enough,
    // for the descriptor that `file` keeps open for the call.
    let rc = unsafe { libc::fstatvfs(file.as_raw_fd(), stats.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: fstatvfs returned 0, so it filled the struct.
    let stats = unsafe { stats.assume_init() };
    Some(stats.f_bavail.saturating_mul(stats.f_frsize))
}

/// Where scratch PMEM files of `needed` bytes in all go (tests, benchmarks): `/dev/shm`, which
/// emulates PMEM in memory, when it has the room, else the temporary directory (a mapped file
/// on disk: the same code paths, slower flushes).
pub fn scratch_dir(needed: u64) -> std::path::PathBuf {
    let shm = Path::new("/dev/shm");
    let room = std::fs::File::open(shm)
        .ok()
        .and_then(|dir| free_bytes(&dir))
        .is_some_and(|free| free >= needed);
    if room {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn check_parent_exists(path: &Path) -> Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => {
            Err(MediaError::MissingDirectory(dir.display().to_string()))
        }
        _ => Ok(()),
    }
}

/// Maps `fd` shared; tries MAP_SYNC first. Returns the base and whether MAP_SYNC was accepted.
fn map_shared(fd: i32, len: usize) -> std::io::Result<(*mut u8, bool)> {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: fd is an open file at least `len` bytes long; the kernel validates the flags and
    // refuses MAP_SYNC (EOPNOTSUPP/EINVAL) where the file system is not DAX.
    let sync = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
            fd,
            0,
        )
    };
    if sync != libc::MAP_FAILED {
        return Ok((sync.cast(), true));
    }
    // SAFETY: as above, without MAP_SYNC.
    let plain = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
    if plain == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok((plain.cast(), false))
}

#[cfg(target_arch = "x86_64")]
/// # Safety
/// `line` must point into mapped memory.
unsafe fn write_back_line(kind: FlushKind, line: *mut u8) {
    match kind {
        // SAFETY (all three): the caller guarantees `line` is mapped; the instructions only write
        // the cache line back and never fault on mapped memory. CPUID said they exist.
        FlushKind::Clwb => unsafe {
            std::arch::asm!("clwb [{0}]", in(reg) line, options(nostack, preserves_flags));
        },
        FlushKind::Clflushopt => unsafe {
            std::arch::asm!("clflushopt [{0}]", in(reg) line, options(nostack, preserves_flags));
        },
        _ => unsafe { std::arch::x86_64::_mm_clflush(line) },
    }
}

#[cfg(not(target_arch = "x86_64"))]
/// # Safety
/// Never called: other CPUs use msync.
unsafe fn write_back_line(_kind: FlushKind, _line: *mut u8) {}

#[cfg(target_arch = "x86_64")]
/// # Safety
/// `at` must be 8-aligned and point into mapped, writable memory.
unsafe fn stream_u64(at: *mut u8, value: u64) {
    // SAFETY: guaranteed by the caller; MOVNTI is SSE2, baseline on x86-64.
    unsafe { std::arch::x86_64::_mm_stream_si64(at.cast::<i64>(), value as i64) }
}

#[cfg(not(target_arch = "x86_64"))]
/// # Safety
/// Never called: other CPUs use msync.
unsafe fn stream_u64(_at: *mut u8, _value: u64) {}

#[cfg(target_arch = "x86_64")]
/// # Safety
/// `at` must be 16-aligned and point to 16 bytes of mapped, writable memory; `pair` must
/// hold at least 16 bytes.
unsafe fn stream_u128(at: *mut u8, pair: &[u8]) {
    use std::arch::x86_64::{_mm_loadu_si128, _mm_stream_si128};
    debug_assert!(pair.len() >= 16);
    // SAFETY: guaranteed by the caller; MOVDQU and MOVNTDQ are SSE2, baseline on x86-64
    // (the load has no alignment requirement, the store's is the caller's).
    unsafe { _mm_stream_si128(at.cast(), _mm_loadu_si128(pair.as_ptr().cast())) }
}

#[cfg(not(target_arch = "x86_64"))]
/// # Safety
/// Never called: other CPUs use msync.
unsafe fn stream_u128(_at: *mut u8, _pair: &[u8]) {}

/// The first 8 bytes of `bytes` as a native-endian word.
fn first_word(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    u64::from_ne_bytes(word)
}

fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE has no preconditions (SSE is baseline on x86-64).
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A region larger than its file system's free space is refused with the sizes, and the
    /// file it would have been is not left behind.
    #[test]
    fn a_region_the_file_system_has_no_room_for_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("huge.pmem");
        match MappedRegion::map_file(&path, 1 << 50, true) {
            Err(MediaError::NoSpace { needed, free, .. }) => {
                assert_eq!(needed, 1 << 50);
                assert!(free < needed);
            }
            Err(other) => panic!("expected NoSpace, got {other}"),
            Ok(_) => panic!("a 1 PiB region was mapped"),
        }
        assert!(!path.exists(), "the refused file was left behind");
        MappedRegion::map_file(&path, 1 << 20, true).expect("a region with room");
    }

    #[test]
    fn mapped_file_keeps_bytes_across_remap() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.pmem");
        {
            let r = MappedRegion::map_file(&path, 8192, true).expect("map");
            r.write(100, b"hello");
            r.store_u64(4096, 42);
            r.persist(100, 5).expect("persist");
            r.persist(4096, 8).expect("persist");
            assert_eq!(r.medium(), Medium::EmulatedPmem);
        }
        let r = MappedRegion::map_file(&path, 0, false).expect("remap");
        let mut buf = [0u8; 5];
        r.read(100, &mut buf);
        assert_eq!(&buf, b"hello");
        assert_eq!(r.load_u64(4096), 42);
        assert_eq!(r.len(), 8192);
    }

    /// Zeroing a range persistently clears exactly that range, releases the file's memory
    /// behind its whole pages (a hole, not written zeros: the file's block count falls), and
    /// the zeros are in the file after a remap. On tmpfs, as our emulated PMEM is.
    #[test]
    fn persistent_zeroing_punches_whole_pages_and_clears_exactly_its_range() {
        let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir in /dev/shm");
        let path = dir.path().join("z.pmem");
        let (len, from, to) = (65_536, 1_000, 41_000);
        let blocks = || std::os::unix::fs::MetadataExt::blocks(&path.metadata().expect("stat"));
        {
            let r = MappedRegion::map_file(&path, len, true).expect("map");
            r.write(0, &vec![0xAB; len]);
            r.persist(0, len).expect("persist");
            let before = blocks();
            r.zero_persistent(from, to - from).expect("zero");
            // Pages 1..=9 lie wholly inside the range: 9 × 4 KiB = 72 blocks of 512 bytes.
            assert!(
                blocks() + 72 <= before,
                "no hole punched: {before} blocks before, {} after",
                blocks()
            );
        }
        let r = MappedRegion::map_file(&path, 0, false).expect("remap");
        let mut all = vec![0u8; len];
        r.read(0, &mut all);
        for (at, byte) in all.iter().enumerate() {
            let expected = if (from..to).contains(&at) { 0 } else { 0xAB };
            assert_eq!(*byte, expected, "byte {at}");
        }
    }

    /// Preparing a range allocates the file's memory behind its pages (the file's block
    /// count grows by them, before any write) and changes no byte, neither the bytes already
    /// written nor the zeros of the pages it allocates. On tmpfs, as our emulated PMEM is.
    #[test]
    fn preparing_allocates_the_pages_of_its_range_and_changes_no_byte() {
        let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir in /dev/shm");
        let path = dir.path().join("p.pmem");
        let len = 256 * 1024;
        let blocks = || std::os::unix::fs::MetadataExt::blocks(&path.metadata().expect("stat"));
        let r = MappedRegion::map_file(&path, len, true).expect("map");
        r.write(5_000, b"kept");
        let before = blocks();
        r.prepare(4_000, 100_000);
        // Pages 0..=25 hold bytes of [4,000, 104,000): 26 × 4 KiB, 208 blocks of 512 bytes,
        // one of which the write had allocated.
        assert!(
            blocks() >= before + 200,
            "nothing allocated: {before} blocks before, {} after",
            blocks()
        );
        let mut all = vec![0u8; len];
        r.read(0, &mut all);
        assert_eq!(&all[5_000..5_004], b"kept");
        all[5_000..5_004].fill(0);
        assert!(all.iter().all(|b| *b == 0), "preparing wrote bytes");
    }

    /// A range whose place in memory matches its file offset's place in a block is handed
    /// over as the mapping itself (the device reads it, no copy); any other range arrives
    /// copied into the scratch buffer, placed so. Either way the bytes are the region's.
    #[test]
    fn bytes_are_handed_over_in_place_only_when_placed_for_a_direct_write() {
        let r = MappedRegion::anonymous(4 * DIRECT_ALIGN).expect("map");
        let data: Vec<u8> = (0..r.len()).map(|i| (i * 7 + i / 4096) as u8).collect();
        r.write(0, &data);
        let mut scratch = AlignedBuffer::new();
        for (offset, len, file_offset, in_place) in [
            (4096, 8192, 4096 * 9, true),
            (4100, 5000, 4096 + 4, true),
            (4100, 5000, 4096, false),
            (0, 100, 17, false),
            (8191, 1, 4095, true),
        ] {
            let mut seen = None;
            r.with_bytes_placed(offset, len, file_offset, &mut scratch, &mut |bytes| {
                seen = Some((bytes.to_vec(), bytes.as_ptr() as usize));
                Ok(())
            })
            .expect("hand over");
            let (bytes, address) = seen.expect("f was called");
            assert_eq!(bytes, data[offset..offset + len], "bytes at {offset}");
            assert_eq!(address % DIRECT_ALIGN, offset_in_block(file_offset));
            let region_memory = r.base as usize + offset;
            assert_eq!(
                address == region_memory,
                in_place,
                "offset {offset} file {file_offset}"
            );
        }
    }

    /// Streaming writes at every alignment and length land exactly where they should, leave
    /// their neighbours alone, and are in the file after a fence and a remap.
    #[test]
    fn streaming_writes_are_exact_and_survive_remap() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.pmem");
        let mut expected = vec![0u8; 4096];
        {
            let r = MappedRegion::map_file(&path, 4096, true).expect("map");
            let mut at = 0;
            // Short writes at every offset in a word, and longer ones that start on either
            // half of a 16-byte pair (the body is streamed a pair at a time).
            for len in (0..40usize).chain([63, 64, 65, 127, 128, 129, 200, 201]) {
                let offset = at + len % 8;
                let data: Vec<u8> = (0..len).map(|i| (len * 31 + i) as u8 | 1).collect();
                r.write_streaming(offset, &data).expect("stream");
                expected[offset..offset + len].copy_from_slice(&data);
                at = offset + len + 3;
            }
            r.fence().expect("fence");
        }
        let r = MappedRegion::map_file(&path, 0, false).expect("remap");
        let mut back = vec![0u8; 4096];
        r.read(0, &mut back);
        assert_eq!(back, expected);
    }

    #[test]
    fn too_small_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("small.pmem");
        std::fs::write(&path, [0u8; 100]).expect("write");
        let err = MappedRegion::map_file(&path, 4096, false)
            .err()
            .expect("must fail");
        assert!(
            matches!(err, MediaError::TooSmall { actual: 100, .. }),
            "{err}"
        );
    }

    /// A mapped file is locked until its region unlocks it (or is dropped): a second mapping
    /// (another open file, as another process would have) is refused by name.
    #[test]
    fn a_mapped_file_cannot_be_mapped_again_until_unlocked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.pmem");
        let refused = || {
            let err = MappedRegion::map_file(&path, 0, false)
                .err()
                .expect("a second mapping must be refused");
            assert!(matches!(err, MediaError::Locked(_)), "{err}");
            assert!(err.to_string().contains("r.pmem is in use"), "{err}");
        };
        let first = MappedRegion::map_file(&path, 8192, true).expect("map");
        refused();
        first.unlock().expect("unlock");
        let second = MappedRegion::map_file(&path, 0, false).expect("mapped once unlocked");
        refused();
        drop(second);
        MappedRegion::map_file(&path, 0, false).expect("mapped once the other is dropped");
    }

    #[test]
    fn missing_directory_is_named() {
        let err = MappedRegion::map_file(Path::new("/nonexistent-dir/x.pmem"), 4096, true)
            .err()
            .expect("must fail");
        assert!(matches!(err, MediaError::MissingDirectory(_)), "{err}");
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn out_of_range_write_is_stopped() {
        let r = MappedRegion::anonymous(64).expect("anon");
        r.write(60, &[0u8; 8]);
    }
}
