//! Test support: a [`SimStorage`] whose files are preallocated in small steps (used by the
//! log's and the engine's simulated crash tests).
//!
//! The log manager grows its file ahead of the log in steps of 64 MiB (so that an `fdatasync`
//! never has to persist a new file size). The simulated backend copies a whole file on every
//! `sync_data`, `set_len`, power cut and process crash, so with 64 MiB files a simulated run
//! costs seconds instead of milliseconds. This wrapper forwards everything to the simulated
//! storage except a `set_len` that grows a file by more than [`SCALE_ABOVE`]: that one grows it
//! only to the next multiple of [`STEP`] instead. The file still ends in a preallocated,
//! zero-filled tail (what recovery has to cope with), just a shorter one; writes beyond it
//! extend the file, and the simulated `sync_data` makes the new length durable with the data.
//! Crash points (`crash_after`) count exactly the same operations.

use std::path::Path;
use std::sync::Arc;

use crate::sim::SimStorage;
use crate::{File, OpenMode, Region, Result, Storage};

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

    fn write_direct_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.0.write_direct_at(offset, data)
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

    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        self.0.discard(offset, len)
    }

    fn lock_exclusive(&self) -> Result<()> {
        self.0.lock_exclusive()
    }

    fn unlock(&self) -> Result<()> {
        self.0.unlock()
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
