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

use crate::{cache_lines, FlushKind, MediaError, Medium, Region, Result, CACHE_LINE};

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
        let actual = file.metadata().map_err(io("stat"))?.len();
        let len = if len == 0 { actual as usize } else { len };
        if actual == 0 && create {
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

    fn msync(&self, offset: usize, len: usize) -> Result<()> {
        let page = page_size();
        let start = offset / page * page;
        let end = (offset + len).min(self.len);
        // SAFETY: [start, end) lies within the mapping; msync only reads the range.
        let rc = unsafe { libc::msync(self.base.add(start).cast(), end - start, libc::MS_SYNC) };
        if rc != 0 {
            return Err(MediaError::Persist {
                path: self.path.clone(),
                reason: std::io::Error::last_os_error().to_string(),
            });
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

    fn load_u64(&self, offset: usize) -> u64 {
        self.atomic_u64(offset).load(Ordering::Acquire)
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
        for (i, word) in middle.chunks_exact(8).enumerate() {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            // SAFETY: `base + 8 i` is 8-aligned (page-aligned mapping, aligned offset) and
            // inside the mapping (range checked above).
            unsafe { stream_u64(self.base.add(base + 8 * i), u64::from_ne_bytes(bytes)) };
        }
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
            for len in 0..40usize {
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
