//! A [`SimStorage`] whose files are preallocated in small steps (a copy of the log crate's
//! `tests/support/scaled_growth.rs`).
//!
//! The log manager grows its file ahead of the log in steps of 64 MiB, and the simulated
//! backend copies a whole file on every `sync_data`, power cut and process crash: with 64 MiB
//! files every simulated commit would cost milliseconds. This wrapper forwards everything to
//! the simulated storage except a `set_len` that grows a file by more than [`SCALE_ABOVE`],
//! which grows it only to the next multiple of [`STEP`] instead.

use std::path::Path;
use std::sync::Arc;

use tailstore_media::sim::SimStorage;
use tailstore_media::{File, OpenMode, Region, Result, Storage};

/// Growth beyond this many bytes is scaled down.
pub const SCALE_ABOVE: u64 = 1 << 20;
/// The preallocation step used instead.
pub const STEP: u64 = 64 << 10;

/// A [`SimStorage`] (sharing its state) with scaled-down file preallocation.
pub struct ScaledGrowth(pub SimStorage);

struct ScaledFile(Arc<dyn File>);

impl File for ScaledFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        self.0.read_at(offset, buf)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.0.write_at(offset, data)
    }

    fn sync_data(&self) -> Result<()> {
        self.0.sync_data()
    }

    fn len(&self) -> Result<u64> {
        self.0.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let current = self.0.len()?;
        let len = if len > current + SCALE_ABOVE {
            (current + 1).div_ceil(STEP) * STEP
        } else {
            len
        };
        self.0.set_len(len)
    }

    fn path(&self) -> &str {
        self.0.path()
    }
}

impl Storage for ScaledGrowth {
    fn open_file(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        Ok(Arc::new(ScaledFile(self.0.open_file(path, mode)?)))
    }

    fn map_region(&self, path: &Path, len: usize, mode: OpenMode) -> Result<Arc<dyn Region>> {
        self.0.map_region(path, len, mode)
    }

    fn volatile_region(&self, len: usize) -> Result<Arc<dyn Region>> {
        self.0.volatile_region(len)
    }

    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.0.is_dir(path)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.0.sync_dir(dir)
    }
}
