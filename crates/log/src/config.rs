//! What a user chooses: the commit mode and the sizes of the log's buffers.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// How a commit is made durable. See docs/design/log.md for each mode's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CommitMode {
    /// The log is a file; a commit returns after an `fdatasync` that covers it (group commit).
    Fsync,
    /// The persisted log buffer: a commit returns once its record is persistent in a PMEM ring;
    /// a background writer hardens whole blocks to the log file.
    Buffer,
    /// The whole log lives in PMEM; its space is reclaimed when the user releases a prefix.
    PmemLog,
    /// A commit returns at once; a background flush runs every interval. Not durable.
    Async,
}

impl CommitMode {
    pub const ALL: [CommitMode; 4] = [
        CommitMode::Fsync,
        CommitMode::Buffer,
        CommitMode::PmemLog,
        CommitMode::Async,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CommitMode::Fsync => "fsync",
            CommitMode::Buffer => "buffer",
            CommitMode::PmemLog => "pmem-log",
            CommitMode::Async => "async",
        }
    }

    /// Whether an acknowledged commit survives a crash (of the kind the medium survives).
    pub fn is_durable(self) -> bool {
        self != CommitMode::Async
    }

    /// Whether the mode keeps log bytes in a PMEM region (and so needs `--pmem`).
    pub fn uses_pmem(self) -> bool {
        matches!(self, CommitMode::Buffer | CommitMode::PmemLog)
    }

    /// Whether the mode writes a log file (and so needs `--log-dir`).
    pub fn uses_log_file(self) -> bool {
        self != CommitMode::PmemLog
    }

    pub(crate) fn code(self) -> u32 {
        match self {
            CommitMode::Fsync => 1,
            CommitMode::Buffer => 2,
            CommitMode::PmemLog => 3,
            CommitMode::Async => 4,
        }
    }

    pub(crate) fn from_code(code: u32) -> Option<Self> {
        CommitMode::ALL.into_iter().find(|m| m.code() == code)
    }
}

impl fmt::Display for CommitMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CommitMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CommitMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!("unknown commit mode '{s}' (expected fsync, buffer, pmem-log or async)")
            })
    }
}

/// What the log's background writer thread runs before its first round: the engine keeps it
/// on the database's background processors with it (`tailstore_engine::cpus`).
#[derive(Clone)]
pub struct ThreadSetup(pub Arc<dyn Fn() + Send + Sync>);

impl fmt::Debug for ThreadSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ThreadSetup(..)")
    }
}

/// Everything needed to open (or create) a log.
#[derive(Clone, Debug)]
pub struct LogConfig {
    pub mode: CommitMode,
    /// Directory of the log file (`tailstore.log`); must exist. Unused by `pmem-log`.
    pub log_dir: PathBuf,
    /// The PMEM file (`buffer`, `pmem-log`). Created if absent.
    pub pmem_path: Option<PathBuf>,
    /// Unit in which the `buffer` mode's writer hardens the ring to disk.
    pub block_bytes: usize,
    /// Size of the ring: in PMEM for `buffer`, in DRAM for `fsync` and `async`.
    pub ring_bytes: usize,
    /// Size of the whole log in PMEM for `pmem-log`.
    pub pmem_log_bytes: usize,
    /// `async` mode: how often the background flush runs.
    pub async_interval: Duration,
    /// `buffer` mode: pending bytes older than this are hardened anyway (whole blocks first,
    /// then a partly filled one).
    pub harden_age: Duration,
    /// `buffer` mode: the writer hardens once this many bytes are pending, so that one
    /// `fdatasync` covers many blocks. `None`: an eighth of the append window (the ring, at most
    /// 64 MiB of it; at least one block).
    pub harden_batch_bytes: Option<usize>,
    /// `fsync`, `buffer`, `async`: the log file's head is given back in steps of this many
    /// bytes; each release rewrites and syncs the file's header. Small only in tests, so that
    /// the simulator's short logs release (and crash while releasing) too.
    pub release_step_bytes: u64,
    /// Run by the background writer (`buffer`, `async`) when it starts; `None`: nothing.
    pub writer_setup: Option<ThreadSetup>,
    /// `buffer` mode: how far past the hardened LSN appends may write into the ring. `None`:
    /// the format's ([`crate::format::append_window`]: the ring, at most 64 MiB). Set by
    /// tests, which need a ring with a last lap that is small enough to crash thousands of
    /// times; the open that recovers a log must use the value of the process that wrote it
    /// (recovery clears that much past the end of the valid prefix).
    pub append_window_bytes: Option<usize>,
    /// Bugs a test plants in this log ([`crate::Plant`]); without effect in a release build.
    pub plants: Vec<crate::Plant>,
}

pub const KIB: usize = 1024;
pub const MIB: usize = 1024 * 1024;

impl LogConfig {
    /// The defaults of the issue: 64 KiB blocks in a 20 MiB ring, 10 ms async interval.
    pub fn new(mode: CommitMode, log_dir: impl Into<PathBuf>, pmem_path: Option<PathBuf>) -> Self {
        Self {
            mode,
            log_dir: log_dir.into(),
            pmem_path,
            block_bytes: 64 * KIB,
            ring_bytes: 20 * MIB,
            pmem_log_bytes: 256 * MIB,
            async_interval: Duration::from_millis(10),
            harden_age: Duration::from_millis(20),
            harden_batch_bytes: None,
            release_step_bytes: 64 * MIB as u64,
            writer_setup: None,
            append_window_bytes: None,
            plants: Vec::new(),
        }
    }

    /// The log file's path.
    pub fn log_file(&self) -> PathBuf {
        self.log_dir.join(crate::LOG_FILE_NAME)
    }

    /// Bytes of the ring this mode uses.
    pub(crate) fn ring_capacity(&self) -> usize {
        match self.mode {
            CommitMode::PmemLog => self.pmem_log_bytes,
            _ => self.ring_bytes,
        }
    }

    /// How far past its floor an append may write into a ring of `capacity` bytes.
    pub(crate) fn append_window(&self, capacity: u64) -> u64 {
        match (self.mode, self.append_window_bytes) {
            (CommitMode::Buffer, Some(window)) => (window as u64).min(capacity),
            _ => crate::format::append_window(self.mode, capacity),
        }
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        let ring = self.ring_capacity();
        if self.block_bytes < 4 * KIB || !self.block_bytes.is_power_of_two() {
            return Err(format!(
                "block size {} must be a power of two of at least 4 KiB",
                self.block_bytes
            ));
        }
        if ring < 2 * self.block_bytes || !ring.is_multiple_of(self.block_bytes) {
            return Err(format!(
                "ring size {ring} must be a multiple of the block size {} and hold at least two blocks",
                self.block_bytes
            ));
        }
        if let Some(window) = self.append_window_bytes {
            if window < 2 * self.block_bytes || !window.is_multiple_of(self.block_bytes) {
                return Err(format!(
                    "append window {window} must be a multiple of the block size {} and hold at least two blocks",
                    self.block_bytes
                ));
            }
        }
        if self.release_step_bytes == 0 {
            return Err("the release step must not be 0".into());
        }
        if self.mode.uses_pmem() && self.pmem_path.is_none() {
            return Err(format!(
                "commit mode {} needs a PMEM file (--pmem PATH)",
                self.mode
            ));
        }
        Ok(())
    }
}
