//! The real backend: Linux files with positioned I/O, and mapped PMEM from [`crate::pmem`].

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::direct_io::check_direct_aligned;
use crate::pmem::MappedRegion;
use crate::{File, MediaError, OpenMode, Region, Result, Storage, SyncGuard};

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealStorage;

struct RealFile {
    file: std::fs::File,
    path: String,
    /// A second descriptor opened with `O_DIRECT` on the first direct write; `None` where
    /// the file system refuses it (direct writes then go through the page cache, which is
    /// just as correct).
    direct: OnceLock<Option<std::fs::File>>,
    location: PathBuf,
    syncs: SyncGuard,
}

impl RealFile {
    fn direct_handle(&self) -> Option<&std::fs::File> {
        self.direct
            .get_or_init(|| {
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(libc::O_DIRECT)
                    .open(&self.location)
                    .ok()
            })
            .as_ref()
    }

    fn err(&self, op: &'static str) -> impl FnOnce(std::io::Error) -> MediaError + '_ {
        move |source| MediaError::Io {
            op,
            path: self.path.clone(),
            source,
        }
    }
}

impl File for RealFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => return other.map_err(self.err("read")),
            }
        }
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.file
            .write_all_at(data, offset)
            .map_err(self.err("write"))
    }

    fn write_direct_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        check_direct_aligned(&self.path, offset, data)?;
        match self.direct_handle() {
            Some(direct) => direct
                .write_all_at(data, offset)
                .map_err(self.err("write (O_DIRECT)")),
            None => self.write_at(offset, data),
        }
    }

    fn sync_data(&self) -> Result<()> {
        self.syncs.run(&self.path, || {
            self.file.sync_data().map_err(self.err("fdatasync"))
        })
    }

    fn len(&self) -> Result<u64> {
        Ok(self.file.metadata().map_err(self.err("stat"))?.len())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.file.set_len(len).map_err(self.err("truncate"))?;
        self.syncs.run(&self.path, || {
            self.file.sync_all().map_err(self.err("fsync"))
        })
    }

    fn path(&self) -> &str {
        &self.path
    }

    fn lock_exclusive(&self) -> Result<()> {
        lock_exclusive(&self.file, &self.path)
    }

    fn unlock(&self) -> Result<()> {
        unlock(&self.file, &self.path)
    }

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        use rustix::fs::{fallocate, FallocateFlags};
        let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        match fallocate(&self.file, flags, offset, len) {
            Ok(()) => Ok(()),
            // A file system without holes keeps the bytes: only space is lost, not data.
            Err(rustix::io::Errno::OPNOTSUPP) => Ok(()),
            Err(errno) => Err(self.err("fallocate (punch hole)")(errno.into())),
        }
    }
}

fn check_dir(path: &Path) -> Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => {
            Err(MediaError::MissingDirectory(dir.display().to_string()))
        }
        _ => Ok(()),
    }
}

impl Storage for RealStorage {
    fn open_file(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        check_dir(path)?;
        let name = path.display().to_string();
        if mode == OpenMode::Existing && !path.exists() {
            return Err(MediaError::MissingFile(name));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(mode == OpenMode::CreateIfMissing)
            .truncate(false)
            .open(path)
            .map_err(|source| MediaError::Io {
                op: "open",
                path: name.clone(),
                source,
            })?;
        Ok(Arc::new(RealFile {
            file,
            path: name,
            direct: OnceLock::new(),
            location: path.to_path_buf(),
            syncs: SyncGuard::default(),
        }))
    }

    fn map_region(&self, path: &Path, len: usize, mode: OpenMode) -> Result<Arc<dyn Region>> {
        let region = MappedRegion::map_file(path, len, mode == OpenMode::CreateIfMissing)?;
        Ok(Arc::new(region))
    }

    fn volatile_region(&self, len: usize) -> Result<Arc<dyn Region>> {
        Ok(Arc::new(MappedRegion::anonymous(len)?))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let name = dir.display().to_string();
        if !dir.is_dir() {
            return Err(MediaError::MissingDirectory(name));
        }
        let handle = std::fs::File::open(dir).map_err(|source| MediaError::Io {
            op: "open directory",
            path: name.clone(),
            source,
        })?;
        handle.sync_all().map_err(|source| MediaError::Io {
            op: "fsync directory",
            path: name,
            source,
        })
    }
}

/// Takes `file`'s exclusive advisory lock without waiting: [`MediaError::Locked`] if another
/// open file (another process) holds it. Closing the file releases it.
pub(crate) fn lock_exclusive(file: &std::fs::File, path: &str) -> Result<()> {
    use rustix::fs::{flock, FlockOperation};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(MediaError::Locked(path.to_string())),
        Err(errno) => Err(flock_error(path, errno)),
    }
}

pub(crate) fn unlock(file: &std::fs::File, path: &str) -> Result<()> {
    use rustix::fs::{flock, FlockOperation};
    flock(file, FlockOperation::Unlock).map_err(|errno| flock_error(path, errno))
}

fn flock_error(path: &str, errno: rustix::io::Errno) -> MediaError {
    MediaError::Io {
        op: "flock",
        path: path.to_string(),
        source: errno.into(),
    }
}

/// The type of the file system holding `path` ("ext4", "tmpfs", …), from /proc/self/mounts:
/// the mount point that is the longest prefix of the canonical path.
pub fn filesystem_type(path: &Path) -> Option<String> {
    let path = std::fs::canonicalize(path).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let _device = fields.next()?;
            let mount_point = unescape_mount_path(fields.next()?);
            let fs_type = fields.next()?;
            path.starts_with(&mount_point)
                .then(|| (mount_point.as_os_str().len(), fs_type.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fs_type)| fs_type)
}

/// /proc/self/mounts writes spaces and a few other bytes as octal escapes (`\040`).
fn unescape_mount_path(field: &str) -> std::path::PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let bytes = field.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok());
        match (bytes[i], octal.and_then(|d| u8::from_str_radix(d, 8).ok())) {
            (b'\\', Some(value)) => {
                out.push(value);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    std::path::PathBuf::from(std::ffi::OsString::from(
        String::from_utf8_lossy(&out).into_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shm_is_tmpfs_and_mount_escapes_decode() {
        if Path::new("/dev/shm").is_dir() {
            assert_eq!(
                filesystem_type(Path::new("/dev/shm")).as_deref(),
                Some("tmpfs")
            );
        }
        assert_eq!(unescape_mount_path("/mnt/a\\040b"), Path::new("/mnt/a b"));
    }

    /// Direct and buffered writes to one file read back coherently (a direct write over
    /// cached bytes replaces them; a buffered write over direct bytes too), and a misaligned
    /// direct write is refused before it reaches the kernel.
    #[test]
    fn direct_writes_mix_with_buffered_ones() {
        use crate::direct_io::{AlignedBuffer, DIRECT_ALIGN};
        let dir = tempfile::tempdir().expect("tempdir");
        let f = RealStorage
            .open_file(&dir.path().join("log"), OpenMode::CreateIfMissing)
            .expect("create");
        f.write_at(0, &vec![7u8; 3 * DIRECT_ALIGN])
            .expect("buffered write");
        let mut block = AlignedBuffer::new();
        block.resize(2 * DIRECT_ALIGN);
        block.as_mut_slice().fill(9);
        f.write_direct_at(DIRECT_ALIGN as u64, block.as_slice())
            .expect("direct write");
        f.write_at(2 * DIRECT_ALIGN as u64 + 1, b"xy")
            .expect("buffered over direct");
        f.sync_data().expect("sync");
        let mut back = vec![0u8; 3 * DIRECT_ALIGN];
        assert!(f.read_exact_at(0, &mut back).expect("read"));
        assert!(back[..DIRECT_ALIGN].iter().all(|&b| b == 7));
        assert!(back[DIRECT_ALIGN..2 * DIRECT_ALIGN + 1]
            .iter()
            .all(|&b| b == 9));
        assert_eq!(&back[2 * DIRECT_ALIGN + 1..2 * DIRECT_ALIGN + 3], b"xy");
        assert!(back[2 * DIRECT_ALIGN + 3..].iter().all(|&b| b == 9));
        let err = f
            .write_direct_at(100, block.as_slice())
            .expect_err("misaligned offset");
        assert!(matches!(err, MediaError::Misaligned { .. }), "{err}");
    }

    #[test]
    fn file_round_trip_and_missing_paths() {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage = RealStorage;
        let path = dir.path().join("log");
        assert!(matches!(
            storage.open_file(&path, OpenMode::Existing).err(),
            Some(MediaError::MissingFile(_))
        ));
        let f = storage
            .open_file(&path, OpenMode::CreateIfMissing)
            .expect("create");
        f.write_at(10, b"abc").expect("write");
        f.sync_data().expect("sync");
        assert_eq!(f.len().expect("len"), 13);
        let mut buf = [0u8; 3];
        assert!(f.read_exact_at(10, &mut buf).expect("read"));
        assert_eq!(&buf, b"abc");
        assert!(!f.read_exact_at(12, &mut buf).expect("short read"));
        f.set_len(5).expect("truncate");
        assert_eq!(f.len().expect("len"), 5);
        storage.sync_dir(dir.path()).expect("sync dir");
        assert!(filesystem_type(dir.path()).is_some());
        assert!(matches!(
            storage
                .open_file(Path::new("/no/such/dir/log"), OpenMode::CreateIfMissing)
                .err(),
            Some(MediaError::MissingDirectory(_))
        ));
    }
}
