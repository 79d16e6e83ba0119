//! The real backend: Linux files with positioned I/O, and mapped PMEM from [`crate::pmem`].

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::pmem::MappedRegion;
use crate::{File, MediaError, OpenMode, Region, Result, Storage};

/// The operating system's file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealStorage;

struct RealFile {
    file: std::fs::File,
    path: String,
}

impl RealFile {
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

    fn sync_data(&self) -> Result<()> {
        self.file.sync_data().map_err(self.err("fdatasync"))
    }

    fn len(&self) -> Result<u64> {
        Ok(self.file.metadata().map_err(self.err("stat"))?.len())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.file.set_len(len).map_err(self.err("truncate"))?;
        self.file.sync_all().map_err(self.err("fsync"))
    }

    fn path(&self) -> &str {
        &self.path
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
        Ok(Arc::new(RealFile { file, path: name }))
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(matches!(
            storage
                .open_file(Path::new("/no/such/dir/log"), OpenMode::CreateIfMissing)
                .err(),
            Some(MediaError::MissingDirectory(_))
        ));
    }
}
