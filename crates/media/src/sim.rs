//! The simulated backend: every file and region lives in memory, with a precise model of what
//! is persistent, so that tests can cut the power (or crash the process) at any instant and
//! look at what a restart would find.
//!
//! # Persistence model
//!
//! A **region** keeps what the CPU sees (`current`), what is certainly persistent (`media`),
//! the set of *dirty* 8-byte words (stored, never flushed since) and, per thread, the *in-flight*
//! words (flushed by that thread — with the value the word had at flush time — but not yet
//! fenced by it). [`Region::fence`] persists the in-flight words of the calling thread only, as
//! SFENCE orders only the write-backs of the core that issues it.
//!
//! A flush covers whole cache lines, whoever stored to them: it takes the line's dirty words and
//! also the words another thread flushed but has not fenced yet. A cache line is one object for
//! the coherence protocol, so a CLWB by this thread, once its SFENCE completes, guarantees the
//! line's contents as of the CLWB are persistent even if another core's write-back of the same
//! line was already on its way. Without this, thread B's record sharing a line with thread A's
//! next record stayed non-persistent after B's own flush and fence whenever A flushed the line
//! first (B's flush found nothing dirty), until A's fence — an unsound model of the hardware.
//!
//! A **file** keeps the page-cache view (`current`) and what is on disk (`durable`);
//! [`File::sync_data`] and [`File::set_len`] make `current` durable.
//!
//! A **name** (the directory entry of a file or region) created by `open_file` or
//! `map_region` is durable only once [`Storage::sync_dir`] syncs its directory, as POSIX
//! has it (ext4 happens to commit it with the file's own fsync; XFS and others need not).
//! Syncing the file's data does not make its name durable.
//!
//! # Crashes and faults
//!
//! * [`SimStorage::process_crash`] keeps every completed store and write;
//! * [`SimStorage::power_cut`] keeps what was persisted plus a seeded random subset of the rest:
//!   each pending 8-byte word of a region independently, and of each file's differing
//!   512-byte sectors a random half (writes tear), or all (written back), or none; a name
//!   whose directory was not synced since its creation is kept or lost, at random;
//! * [`SimStorage::crash_after`] kills the medium at a chosen mutating operation;
//! * [`SimStorage::set_sync_latency`] makes syncs slow, so that a log lags its commits as on a
//!   disk and a crash can find them applied and not yet durable;
//! * [`SimStorage::fail_nth_write`], [`SimStorage::fail_nth_sync`] and
//!   [`SimStorage::fail_region_fences_after`] inject fail-stop errors; a failed sync fails
//!   as Linux's does: the file's unsynced writes are lost from the disk and yet read back.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::direct_io::check_direct_aligned;
use crate::{
    cache_lines, File, FlushKind, MediaError, Medium, OpenMode, Region, Result, Storage, SyncGuard,
};

/// Size of the unit a file survives a power cut in: a whole sector or nothing of it.
const SECTOR: usize = 512;

/// Size of the unit a region survives a power cut in (aligned, failure-atomic stores).
const WORD: usize = crate::ATOMIC_UNIT;

/// A simulated storage: files and PMEM regions in memory, with crash and fault injection.
///
/// Cloning is cheap and every clone (and every file or region handle it returned) refers to
/// the same state. All state sits behind one mutex, so that runs are deterministic.
#[derive(Clone)]
pub struct SimStorage {
    shared: Arc<Mutex<State>>,
}

/// A word flushed by a thread and not yet fenced by it.
#[derive(Clone, Copy, Debug)]
struct Snapshot {
    /// Order of the flush among all flushes of the region (newer is larger).
    seq: u64,
    /// The word's value when it was flushed.
    bytes: [u8; WORD],
}

struct RegionState {
    /// Length in bytes; `current` and `media` are padded with zeros to whole words.
    len: usize,
    current: Vec<u8>,
    media: Vec<u8>,
    /// Word indices stored to since their last flush.
    dirty: WordSet,
    /// Per thread: word index → value at flush time, for flushes not yet fenced.
    in_flight: HashMap<ThreadId, BTreeMap<usize, Snapshot>>,
    next_seq: u64,
}

impl RegionState {
    fn zeroed(len: usize) -> Self {
        Self::from_image(vec![0; len])
    }

    /// A region whose visible and persistent contents are both `image`, with nothing pending.
    fn from_image(mut image: Vec<u8>) -> Self {
        let len = image.len();
        image.resize(len.div_ceil(WORD) * WORD, 0);
        RegionState {
            len,
            media: image.clone(),
            dirty: WordSet::new(image.len() / WORD),
            current: image,
            in_flight: HashMap::new(),
            next_seq: 0,
        }
    }

    fn word(bytes: &[u8], index: usize) -> [u8; WORD] {
        let mut word = [0; WORD];
        word.copy_from_slice(&bytes[index * WORD..(index + 1) * WORD]);
        word
    }

    fn check_range(&self, offset: usize, len: usize, what: &str) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "{what} of [{offset}, +{len}) outside a region of {} bytes",
            self.len
        );
    }

    fn mark_dirty(&mut self, offset: usize, len: usize) {
        if len == 0 {
            return;
        }
        self.dirty
            .insert_range(offset / WORD..(offset + len).div_ceil(WORD));
    }

    fn write(&mut self, offset: usize, data: &[u8]) {
        self.check_range(offset, data.len(), "write");
        self.current[offset..offset + data.len()].copy_from_slice(data);
        self.mark_dirty(offset, data.len());
    }

    fn zero(&mut self, offset: usize, len: usize) {
        self.check_range(offset, len, "zero");
        self.current[offset..offset + len].fill(0);
        self.mark_dirty(offset, len);
    }

    fn flush(&mut self, offset: usize, len: usize, thread: ThreadId) {
        self.check_range(offset, len, "flush");
        let lines = cache_lines(offset, len);
        let words = lines.start / WORD..lines.end / WORD;
        let mut flushed: Vec<usize> = self.dirty.iter_range(words.clone()).collect();
        // Words another thread flushed but has not fenced: their write-back may still be in
        // flight, and this thread's fence must cover them too (see the module documentation).
        // They are not dirty, so their current value is the one that thread flushed.
        let dirty_words = flushed.len();
        for (other, theirs) in &self.in_flight {
            if *other != thread {
                flushed.extend(theirs.range(words.clone()).map(|(&index, _)| index));
            }
        }
        if flushed.len() > dirty_words {
            flushed.sort_unstable();
            flushed.dedup();
        }
        if flushed.is_empty() {
            return;
        }
        for &index in &flushed {
            self.dirty.remove(index);
        }
        // In ascending word order, as the flush's words were always numbered.
        let first_seq = self.next_seq;
        self.next_seq += flushed.len() as u64;
        let current = &self.current;
        let snapshots = flushed.iter().enumerate().map(|(n, &index)| {
            let snapshot = Snapshot {
                seq: first_seq + n as u64,
                bytes: Self::word(current, index),
            };
            (index, snapshot)
        });
        let mine = self.in_flight.entry(thread).or_default();
        // A ring's zeroing flushes a hundred thousand words at once: built in one pass from
        // sorted words and merged (newer snapshots replace older), not searched for one by
        // one. A flush small beside what is already in flight is inserted, so that many small
        // flushes before a fence do not each rebuild the whole map.
        if flushed.len() >= mine.len() / 8 {
            let mut flushed_now: BTreeMap<usize, Snapshot> = snapshots.collect();
            mine.append(&mut flushed_now);
        } else {
            mine.extend(snapshots);
        }
    }

    fn fence(&mut self, thread: ThreadId) {
        let Some(mine) = self.in_flight.remove(&thread) else {
            return;
        };
        for (&index, snapshot) in &mine {
            self.media[index * WORD..(index + 1) * WORD].copy_from_slice(&snapshot.bytes);
        }
        // Older write-backs of the same words by other threads are superseded: once a newer
        // value of a line is persistent, an older one can no longer land on top of it.
        for theirs in self.in_flight.values_mut() {
            theirs.retain(
                |index, snapshot| !matches!(mine.get(index), Some(m) if snapshot.seq < m.seq),
            );
        }
        self.in_flight.retain(|_, words| !words.is_empty());
    }

    /// What survives a power cut: `media`, and for every pending word one of its possible
    /// values chosen at random (the persisted one, any in-flight snapshot, the current one if
    /// the word is dirty).
    fn power_cut_image(&self, rng: &mut StdRng) -> Vec<u8> {
        let mut pending: BTreeMap<usize, Vec<Snapshot>> = BTreeMap::new();
        for words in self.in_flight.values() {
            for (&index, &snapshot) in words {
                pending.entry(index).or_default().push(snapshot);
            }
        }
        for index in self.dirty.iter() {
            pending.entry(index).or_default();
        }
        let mut image = self.media.clone();
        for (index, mut snapshots) in pending {
            // Sorting by flush order makes the choice independent of hash-map order.
            snapshots.sort_by_key(|s| s.seq);
            let mut candidates = Vec::with_capacity(snapshots.len() + 2);
            candidates.push(Self::word(&self.media, index));
            candidates.extend(snapshots.iter().map(|s| s.bytes));
            if self.dirty.contains(index) {
                candidates.push(Self::word(&self.current, index));
            }
            let pick = candidates[rng.gen_range(0..candidates.len())];
            image[index * WORD..(index + 1) * WORD].copy_from_slice(&pick);
        }
        image.truncate(self.len);
        image
    }

    /// The same region after a process crash: the stores are all there, and whatever was not
    /// yet persistent stays pending (the threads that flushed it are gone, so it counts as
    /// dirty again).
    fn after_process_crash(&self) -> Self {
        let mut dirty = self.dirty.clone();
        for words in self.in_flight.values() {
            words.keys().for_each(|&index| dirty.insert(index));
        }
        RegionState {
            len: self.len,
            current: self.current.clone(),
            media: self.media.clone(),
            dirty,
            in_flight: HashMap::new(),
            next_seq: 0,
        }
    }
}

/// A set of the word indices of one region, a bit each. A region marks every word it
/// stores to, and zeroing a log's ring stores to hundreds of thousands of them at once:
/// a `BTreeSet` took a node search for each, half the time of some power-cut tests.
#[derive(Clone)]
struct WordSet {
    bits: Vec<u64>,
}

impl WordSet {
    /// An empty set of indices below `words`.
    fn new(words: usize) -> Self {
        WordSet {
            bits: vec![0; words.div_ceil(64)],
        }
    }

    fn insert(&mut self, index: usize) {
        self.bits[index / 64] |= 1 << (index % 64);
    }

    fn insert_range(&mut self, words: Range<usize>) {
        for chunk in Self::chunks(&words) {
            self.bits[chunk] |= Self::mask(chunk, &words);
        }
    }

    fn remove(&mut self, index: usize) {
        self.bits[index / 64] &= !(1 << (index % 64));
    }

    fn contains(&self, index: usize) -> bool {
        self.bits[index / 64] & (1 << (index % 64)) != 0
    }

    /// The indices in `words`, ascending.
    fn iter_range(&self, words: Range<usize>) -> impl Iterator<Item = usize> + '_ {
        let words = words.start..words.end.min(self.bits.len() * 64);
        Self::chunks(&words).flat_map(move |chunk| {
            let mut bits = self.bits[chunk] & Self::mask(chunk, &words);
            std::iter::from_fn(move || {
                let bit = bits.trailing_zeros() as usize;
                bits &= bits.wrapping_sub(1);
                (bit < 64).then_some(chunk * 64 + bit)
            })
        })
    }

    /// Every index, ascending.
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.iter_range(0..self.bits.len() * 64)
    }

    /// The chunks (`u64`s) holding the bits of `words`.
    fn chunks(words: &Range<usize>) -> Range<usize> {
        if words.is_empty() {
            return 0..0;
        }
        words.start / 64..words.end.div_ceil(64)
    }

    /// The bits of `chunk` that stand for indices in `words`.
    fn mask(chunk: usize, words: &Range<usize>) -> u64 {
        let low = words.start.saturating_sub(chunk * 64).min(64);
        let high = (words.end - chunk * 64).min(64);
        match high.saturating_sub(low) {
            0 => 0,
            64 => u64::MAX,
            n => ((1u64 << n) - 1) << low,
        }
    }
}

#[derive(Clone)]
struct FileState {
    /// The page-cache view, which defines the length.
    current: Vec<u8>,
    /// What is on disk.
    durable: Vec<u8>,
    /// The byte ranges written since `durable` was last made equal to `current`: every byte
    /// where the two differ lies in one. A sync copies these alone: a log file grows 64 MiB
    /// at a time, and copying all of it at every sync made a simulated `fsync` log commit
    /// a few hundred times a second.
    unsynced: Vec<Range<usize>>,
}

impl FileState {
    fn from_image(image: Vec<u8>) -> Self {
        FileState {
            durable: image.clone(),
            current: image,
            unsynced: Vec::new(),
        }
    }

    fn write(&mut self, start: usize, data: &[u8]) {
        let end = start + data.len();
        if self.current.len() < end {
            self.current.resize(end, 0);
        }
        self.current[start..end].copy_from_slice(data);
        self.unsynced.push(start..end);
    }

    /// `durable` becomes `current`, but for writes a failed sync lost
    /// ([`FileState::lose_unsynced`]). Only writes make them differ otherwise, so copying the
    /// ranges written is enough.
    fn sync(&mut self) {
        self.durable.resize(self.current.len(), 0);
        for range in self.unsynced.drain(..) {
            self.durable[range.clone()].copy_from_slice(&self.current[range]);
        }
    }

    /// `ftruncate` then `fsync`, as the real backend's `set_len`: a sync like any other,
    /// which does not bring back lost writes.
    fn set_len(&mut self, len: usize) {
        self.current.resize(len, 0);
        for range in &mut self.unsynced {
            *range = range.start.min(len)..range.end.min(len);
        }
        self.sync();
    }

    /// A failed write-back, as Linux leaves it: the pages are marked clean, so a later sync
    /// finds nothing to write, while reads still see the bytes in the page cache. The
    /// writes are lost from the disk (`durable` keeps what it had) until written again.
    fn lose_unsynced(&mut self) {
        self.unsynced.clear();
    }

    /// The sectors where `current` may differ from `durable`, in order.
    fn unsynced_sectors(&self) -> BTreeSet<usize> {
        let mut sectors = BTreeSet::new();
        for range in self.unsynced.iter().filter(|r| !r.is_empty()) {
            sectors.extend(range.start / SECTOR..=(range.end - 1) / SECTOR);
        }
        sectors
    }

    /// What survives a power cut: `durable`, each 512-byte sector that differs from `current`
    /// replaced by the current one, cut to either length. Each file draws how much of what
    /// it had not synced survives: a random half of the sectors (so most multi-sector writes
    /// tear), or all of them (the kernel had written the file back, as it may at any time),
    /// or none. The extremes matter because with independent sectors a page write survives
    /// whole almost never, and a page that reached the disk whole ahead of the log record
    /// that changed it is exactly what the write-ahead rule must prevent.
    fn power_cut_image(&self, rng: &mut StdRng) -> Vec<u8> {
        let survival = match rng.gen_range(0..4) {
            0 => 0.0,
            1 => 1.0,
            _ => 0.5,
        };
        let max = self.current.len().max(self.durable.len());
        let mut image = self.durable.clone();
        image.resize(max, 0);
        let mut current = self.current.clone();
        current.resize(max, 0);
        // Sectors outside the unsynced ranges are equal in both, so no draw is made for them.
        for sector in self.unsynced_sectors() {
            let start = sector * SECTOR;
            let end = (start + SECTOR).min(max);
            if current[start..end] != image[start..end] && rng.gen_bool(survival) {
                image[start..end].copy_from_slice(&current[start..end]);
            }
        }
        let len = if self.current.len() == self.durable.len() || rng.gen_bool(0.5) {
            self.durable.len()
        } else {
            self.current.len()
        };
        image.truncate(len);
        image
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum RegionKey {
    /// A region kept across crashes, identified by its path.
    Path(usize),
    /// A volatile region, dropped by every crash.
    Volatile(u64),
}

#[derive(Default)]
struct State {
    files: BTreeMap<PathBuf, FileState>,
    /// Persistent regions by path; the value is the index into `regions`.
    region_paths: BTreeMap<PathBuf, usize>,
    regions: Vec<RegionState>,
    volatile: HashMap<u64, RegionState>,
    next_volatile: u64,
    /// Files and regions created since their directory was last synced: a power cut may
    /// lose them whole.
    unsynced_names: BTreeSet<PathBuf>,

    /// Mutating operations that took effect.
    ops_done: u64,
    /// The ordinal (counting from the storage's creation, 1-based) of the op that dies.
    crash_at: Option<u64>,
    dead: bool,

    writes_seen: u64,
    /// Writes through [`File::write_direct_at`].
    direct_writes: u64,
    fail_write_at: Option<u64>,
    syncs_seen: u64,
    fail_sync_at: Option<u64>,
    /// How long each [`File::sync_data`] takes before it takes effect.
    sync_latency: Duration,
    fences_seen: u64,
    fail_fences_from: Option<u64>,
}

impl State {
    /// Accounts one mutating operation. Returns `false` when the medium is (or just became)
    /// dead, in which case the operation must change nothing.
    fn tick(&mut self) -> bool {
        if self.dead {
            return false;
        }
        let ordinal = self.ops_done + 1;
        if self.crash_at.is_some_and(|limit| ordinal >= limit) {
            self.dead = true;
            return false;
        }
        self.ops_done = ordinal;
        true
    }

    fn region(&self, key: RegionKey) -> &RegionState {
        match key {
            RegionKey::Path(index) => &self.regions[index],
            RegionKey::Volatile(id) => self
                .volatile
                .get(&id)
                .expect("volatile regions are never removed from a live storage"),
        }
    }

    fn region_mut(&mut self, key: RegionKey) -> &mut RegionState {
        match key {
            RegionKey::Path(index) => &mut self.regions[index],
            RegionKey::Volatile(id) => self
                .volatile
                .get_mut(&id)
                .expect("volatile regions are never removed from a live storage"),
        }
    }

    fn file_mut(&mut self, path: &Path) -> Result<&mut FileState> {
        self.files
            .get_mut(path)
            .ok_or_else(|| MediaError::MissingFile(path.display().to_string()))
    }

    /// A fresh storage holding the given images, with nothing pending and no fault armed.
    fn from_images(
        files: impl IntoIterator<Item = (PathBuf, FileState)>,
        regions: impl IntoIterator<Item = (PathBuf, RegionState)>,
    ) -> State {
        let mut state = State {
            files: files.into_iter().collect(),
            ..State::default()
        };
        for (path, region) in regions {
            state.region_paths.insert(path, state.regions.len());
            state.regions.push(region);
        }
        state
    }
}

impl SimStorage {
    /// An empty storage. Every directory exists; no fault is armed.
    pub fn new() -> Self {
        SimStorage {
            shared: Arc::new(Mutex::new(State::default())),
        }
    }

    fn from_state(state: State) -> Self {
        SimStorage {
            shared: Arc::new(Mutex::new(state)),
        }
    }

    /// What a restart after a process crash finds: every completed store and write (a process
    /// crash loses nothing the kernel or the CPU caches hold). What was not persistent stays
    /// pending — a later [`SimStorage::power_cut`] of the new storage may still drop it.
    /// Volatile regions are gone; no fault or crash point is armed in the new storage.
    pub fn process_crash(&self) -> SimStorage {
        let state = self.shared.lock();
        let files = state
            .files
            .iter()
            .map(|(path, file)| (path.clone(), file.clone()));
        let regions = state
            .region_paths
            .iter()
            .map(|(path, &index)| (path.clone(), state.regions[index].after_process_crash()));
        let mut after = State::from_images(files, regions);
        after.unsynced_names = state.unsynced_names.clone();
        SimStorage::from_state(after)
    }

    /// What a restart after a power cut finds, chosen at random (deterministically for a given
    /// `seed` and history): every persisted byte, plus each pending region word independently
    /// with probability 1/2, and of each file's unsynced sectors a random half, or all, or
    /// none (drawn per file). A file or region whose name was created and its directory not
    /// synced since is lost whole with probability 1/2. Volatile regions are gone.
    /// In the new storage nothing is pending and no fault or crash point is armed.
    pub fn power_cut(&self, seed: u64) -> SimStorage {
        let state = self.shared.lock();
        let mut rng = StdRng::seed_from_u64(seed);
        let lost: BTreeSet<&PathBuf> = state
            .unsynced_names
            .iter()
            .filter(|_| rng.gen_bool(0.5))
            .collect();
        let regions: Vec<(PathBuf, RegionState)> = state
            .region_paths
            .iter()
            .filter(|(path, _)| !lost.contains(path))
            .map(|(path, &index)| {
                let image = state.regions[index].power_cut_image(&mut rng);
                (path.clone(), RegionState::from_image(image))
            })
            .collect();
        let files: Vec<(PathBuf, FileState)> = state
            .files
            .iter()
            .filter(|(path, _)| !lost.contains(path))
            .map(|(path, file)| {
                let image = file.power_cut_image(&mut rng);
                (path.clone(), FileState::from_image(image))
            })
            .collect();
        SimStorage::from_state(State::from_images(files, regions))
    }

    /// Arms a crash point: counting from now, the `ops`-th mutating operation (region
    /// `write`, `zero`, `store_u64`, `flush`, `fence`, and the sizing of a new region's file;
    /// file `write_at`, `sync_data`, `set_len`; `sync_dir`) finds the medium dead and changes
    /// nothing, and so does every later one. Fallible operations (and `open_file`,
    /// `map_region`) then return [`MediaError::PowerCut`]; infallible ones are ignored.
    /// `crash_after(0)` kills the medium at once. On a fresh storage, `crash_after(k)` for `k`
    /// in `1..=n` visits every crash point of a run that does `n` operations
    /// ([`SimStorage::ops_done`] after a clean run).
    pub fn crash_after(&self, ops: u64) {
        let mut state = self.shared.lock();
        if ops == 0 {
            state.dead = true;
        } else {
            state.crash_at = Some(state.ops_done + ops);
        }
    }

    /// Whether the medium is dead (a crash point armed by [`SimStorage::crash_after`] was hit).
    pub fn is_dead(&self) -> bool {
        self.shared.lock().dead
    }

    /// How many mutating operations took effect since the storage was created (the one that
    /// hit a crash point and those after it are not counted).
    pub fn ops_done(&self) -> u64 {
        self.shared.lock().ops_done
    }

    /// How many writes went through [`File::write_direct_at`] (tests check that a writer
    /// that should bypass the page cache does).
    pub fn direct_writes(&self) -> u64 {
        self.shared.lock().direct_writes
    }

    /// Makes the `n`-th [`File::write_at`] call from now (1-based) fail with
    /// `MediaError::Injected("write")`, changing nothing. `n = 0` disarms.
    pub fn fail_nth_write(&self, n: u64) {
        let mut state = self.shared.lock();
        state.fail_write_at = (n > 0).then(|| state.writes_seen + n);
    }

    /// Makes every later [`File::sync_data`] take `latency` (a slow disk) before it takes
    /// effect, without holding the storage's lock meanwhile: a log then lags its commits,
    /// and the windows in which a change is applied and not yet durable stay open long
    /// enough for other threads (and a test's crash) to act in them.
    pub fn set_sync_latency(&self, latency: Duration) {
        self.shared.lock().sync_latency = latency;
    }

    /// Makes the `n`-th [`File::sync_data`] call from now (1-based) fail with
    /// `MediaError::Injected("sync")` the way a failed write-back fails on Linux: what the
    /// file had not synced is lost from the disk and yet still read back, and no later sync
    /// writes it (PostgreSQL's "fsyncgate"). `n = 0` disarms.
    pub fn fail_nth_sync(&self, n: u64) {
        let mut state = self.shared.lock();
        state.fail_sync_at = (n > 0).then(|| state.syncs_seen + n);
    }

    /// Makes the `n`-th [`Region::fence`] call from now (1-based, any region) and every later
    /// one fail with `MediaError::Injected("fence")`, changing nothing. `n = 0` disarms.
    pub fn fail_region_fences_after(&self, n: u64) {
        let mut state = self.shared.lock();
        state.fail_fences_from = (n > 0).then(|| state.fences_seen + n);
    }

    /// The current (CPU-visible) bytes of the persistent region at `path`.
    pub fn region_bytes(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        let state = self.shared.lock();
        let &index = state.region_paths.get(path.as_ref())?;
        let region = &state.regions[index];
        Some(region.current[..region.len].to_vec())
    }

    /// The current (page-cache) bytes of the file at `path`.
    pub fn file_bytes(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        let state = self.shared.lock();
        state.files.get(path.as_ref()).map(|f| f.current.clone())
    }

    /// Replaces the file at `path` (creating it if absent): both the current and the durable
    /// contents become `bytes`. For corruption tests.
    pub fn set_file_bytes(&self, path: impl AsRef<Path>, bytes: Vec<u8>) {
        let mut state = self.shared.lock();
        state
            .files
            .insert(path.as_ref().to_path_buf(), FileState::from_image(bytes));
    }

    /// Replaces the persistent region at `path` (creating it if absent): both the current and
    /// the persistent contents become `bytes`, nothing is pending, and the region's length
    /// becomes `bytes.len()` (also for handles already mapped). For corruption tests.
    pub fn set_region_bytes(&self, path: impl AsRef<Path>, bytes: Vec<u8>) {
        let mut state = self.shared.lock();
        let region = RegionState::from_image(bytes);
        match state.region_paths.get(path.as_ref()) {
            Some(&index) => state.regions[index] = region,
            None => {
                let index = state.regions.len();
                state.regions.push(region);
                state
                    .region_paths
                    .insert(path.as_ref().to_path_buf(), index);
            }
        }
    }
}

impl Default for SimStorage {
    fn default() -> Self {
        SimStorage::new()
    }
}

impl fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("SimStorage")
            .field("files", &state.files.keys().collect::<Vec<_>>())
            .field("regions", &state.region_paths.keys().collect::<Vec<_>>())
            .field("volatile_regions", &state.volatile.len())
            .field("ops_done", &state.ops_done)
            .field("dead", &state.dead)
            .finish()
    }
}

impl Storage for SimStorage {
    fn open_file(&self, path: &Path, mode: OpenMode) -> Result<Arc<dyn File>> {
        let mut state = self.shared.lock();
        if state.dead {
            return Err(MediaError::PowerCut);
        }
        if !state.files.contains_key(path) {
            match mode {
                OpenMode::Existing => {
                    return Err(MediaError::MissingFile(path.display().to_string()))
                }
                OpenMode::CreateIfMissing => {
                    state
                        .files
                        .insert(path.to_path_buf(), FileState::from_image(Vec::new()));
                    state.unsynced_names.insert(path.to_path_buf());
                }
            }
        }
        Ok(Arc::new(SimFile {
            shared: Arc::clone(&self.shared),
            path: path.to_path_buf(),
            display: path.display().to_string(),
            syncs: SyncGuard::default(),
        }))
    }

    fn map_region(&self, path: &Path, len: usize, mode: OpenMode) -> Result<Arc<dyn Region>> {
        let mut state = self.shared.lock();
        if state.dead {
            return Err(MediaError::PowerCut);
        }
        let display = path.display().to_string();
        let index = match state.region_paths.get(path) {
            Some(&index) => index,
            None if mode == OpenMode::Existing || len == 0 => {
                return Err(MediaError::MissingFile(display));
            }
            None => {
                // As the real backend does: the file is made empty (an entry, like a new
                // file of `open_file`), then sized by an operation of its own, which a
                // crash may cut off, leaving the empty file behind.
                let index = state.regions.len();
                state.regions.push(RegionState::zeroed(0));
                state.region_paths.insert(path.to_path_buf(), index);
                state.unsynced_names.insert(path.to_path_buf());
                index
            }
        };
        let actual = state.regions[index].len;
        if actual == 0 && len > 0 && mode == OpenMode::CreateIfMissing {
            if !state.tick() {
                return Err(MediaError::PowerCut);
            }
            state.regions[index] = RegionState::zeroed(len);
        } else if actual < len.max(1) {
            return Err(MediaError::TooSmall {
                path: display,
                actual: actual as u64,
                needed: len.max(1) as u64,
            });
        }
        Ok(Arc::new(SimRegion {
            shared: Arc::clone(&self.shared),
            key: RegionKey::Path(index),
            medium: Medium::Simulated,
        }))
    }

    fn volatile_region(&self, len: usize) -> Result<Arc<dyn Region>> {
        let mut state = self.shared.lock();
        let id = state.next_volatile;
        state.next_volatile += 1;
        state.volatile.insert(id, RegionState::zeroed(len));
        Ok(Arc::new(SimRegion {
            shared: Arc::clone(&self.shared),
            key: RegionKey::Volatile(id),
            medium: Medium::Volatile,
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        let state = self.shared.lock();
        state.files.contains_key(path) || state.region_paths.contains_key(path)
    }

    fn is_dir(&self, _path: &Path) -> bool {
        // The simulated file system has every directory.
        true
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut state = self.shared.lock();
        if !state.tick() {
            return Err(MediaError::PowerCut);
        }
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        state
            .unsynced_names
            .retain(|name| crate::directory_of(name) != dir);
        Ok(())
    }
}

/// A file of a [`SimStorage`].
pub struct SimFile {
    shared: Arc<Mutex<State>>,
    path: PathBuf,
    display: String,
    syncs: SyncGuard,
}

impl SimFile {
    /// A sync as the medium takes it (see [`SimStorage::fail_nth_sync`]).
    fn sync_now(&self) -> Result<()> {
        let latency = self.shared.lock().sync_latency;
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        let mut state = self.shared.lock();
        if !state.tick() {
            return Err(MediaError::PowerCut);
        }
        state.syncs_seen += 1;
        if state.fail_sync_at == Some(state.syncs_seen) {
            state.fail_sync_at = None;
            state.file_mut(&self.path)?.lose_unsynced();
            return Err(MediaError::Injected("sync"));
        }
        state.file_mut(&self.path)?.sync();
        Ok(())
    }

    /// A write (direct or not: the simulated medium has no page cache; both keep the same
    /// durability contract).
    fn write(&self, offset: u64, data: &[u8], direct: bool) -> Result<()> {
        let mut state = self.shared.lock();
        if !state.tick() {
            return Err(MediaError::PowerCut);
        }
        state.writes_seen += 1;
        if state.fail_write_at == Some(state.writes_seen) {
            state.fail_write_at = None;
            return Err(MediaError::Injected("write"));
        }
        state.direct_writes += u64::from(direct);
        state.file_mut(&self.path)?.write(offset as usize, data);
        Ok(())
    }
}

impl File for SimFile {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let mut state = self.shared.lock();
        let file = state.file_mut(&self.path)?;
        let len = file.current.len() as u64;
        if offset >= len {
            return Ok(0);
        }
        let start = offset as usize;
        let n = buf.len().min(file.current.len() - start);
        buf[..n].copy_from_slice(&file.current[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.write(offset, data, false)
    }

    fn write_direct_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        check_direct_aligned(&self.display, offset, data)?;
        self.write(offset, data, true)
    }

    fn sync_data(&self) -> Result<()> {
        self.syncs.run(&self.display, || self.sync_now())
    }

    fn len(&self) -> Result<u64> {
        let mut state = self.shared.lock();
        Ok(state.file_mut(&self.path)?.current.len() as u64)
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.syncs.run(&self.display, || {
            let mut state = self.shared.lock();
            if !state.tick() {
                return Err(MediaError::PowerCut);
            }
            state.file_mut(&self.path)?.set_len(len as usize);
            Ok(())
        })
    }

    fn path(&self) -> &str {
        &self.display
    }

    /// The simulated machine runs one process at a time.
    fn lock_exclusive(&self) -> Result<()> {
        Ok(())
    }

    fn unlock(&self) -> Result<()> {
        Ok(())
    }

    /// Zeroes the range in both the current and the durable contents: whatever a crash
    /// leaves, a reader that wrongly relies on discarded bytes finds nothing valid.
    fn discard(&self, offset: u64, len: u64) -> Result<()> {
        let mut state = self.shared.lock();
        if !state.tick() {
            return Err(MediaError::PowerCut);
        }
        let file = state.file_mut(&self.path)?;
        for bytes in [&mut file.current, &mut file.durable] {
            let start = (offset as usize).min(bytes.len());
            let end = (offset.saturating_add(len) as usize).min(bytes.len());
            bytes[start..end].fill(0);
        }
        Ok(())
    }
}

/// A region of a [`SimStorage`]: persistent (kept by crashes) or volatile.
pub struct SimRegion {
    shared: Arc<Mutex<State>>,
    key: RegionKey,
    medium: Medium,
}

impl Region for SimRegion {
    fn len(&self) -> usize {
        self.shared.lock().region(self.key).len
    }

    fn write(&self, offset: usize, data: &[u8]) {
        let mut state = self.shared.lock();
        if state.tick() {
            state.region_mut(self.key).write(offset, data);
        }
    }

    fn read(&self, offset: usize, buf: &mut [u8]) {
        let state = self.shared.lock();
        let region = state.region(self.key);
        region.check_range(offset, buf.len(), "read");
        buf.copy_from_slice(&region.current[offset..offset + buf.len()]);
    }

    fn zero(&self, offset: usize, len: usize) {
        let mut state = self.shared.lock();
        if state.tick() {
            state.region_mut(self.key).zero(offset, len);
        }
    }

    fn store_u64(&self, offset: usize, value: u64) {
        assert_eq!(offset % WORD, 0, "store_u64 at unaligned offset {offset}");
        let mut state = self.shared.lock();
        if state.tick() {
            state
                .region_mut(self.key)
                .write(offset, &value.to_le_bytes());
        }
    }

    fn load_u64(&self, offset: usize) -> u64 {
        assert_eq!(offset % WORD, 0, "load_u64 at unaligned offset {offset}");
        let state = self.shared.lock();
        let region = state.region(self.key);
        region.check_range(offset, WORD, "load_u64");
        u64::from_le_bytes(RegionState::word(&region.current, offset / WORD))
    }

    fn flush(&self, offset: usize, len: usize) -> Result<()> {
        let mut state = self.shared.lock();
        if !state.tick() {
            return Err(MediaError::PowerCut);
        }
        let thread = std::thread::current().id();
        state.region_mut(self.key).flush(offset, len, thread);
        Ok(())
    }

    fn fence(&self) -> Result<()> {
        let mut state = self.shared.lock();
        if !state.tick() {
            return Err(MediaError::PowerCut);
        }
        state.fences_seen += 1;
        if state
            .fail_fences_from
            .is_some_and(|from| state.fences_seen >= from)
        {
            return Err(MediaError::Injected("fence"));
        }
        let thread = std::thread::current().id();
        state.region_mut(self.key).fence(thread);
        Ok(())
    }

    fn medium(&self) -> Medium {
        self.medium
    }

    fn flush_kind(&self) -> FlushKind {
        FlushKind::None
    }
}

#[cfg(test)]
mod word_set_tests {
    use super::WordSet;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(usize),
        InsertRange(usize, usize),
        Remove(usize),
    }

    fn op(words: usize) -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..words).prop_map(Op::Insert),
            (0..=words, 0..=words).prop_map(|(a, b)| Op::InsertRange(a.min(b), a.max(b))),
            (0..words).prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// The bit set answers as the `BTreeSet` it replaced, ranges cut anywhere in a chunk.
        #[test]
        fn answers_as_a_btree_set(
            words in 1usize..300,
            ops in proptest::collection::vec(op(300), 0..40),
            queries in proptest::collection::vec((0usize..320, 0usize..320), 1..8),
        ) {
            let (mut set, mut model) = (WordSet::new(words), BTreeSet::new());
            for op in ops {
                match op {
                    Op::Insert(i) if i < words => { set.insert(i); model.insert(i); }
                    Op::InsertRange(a, b) if b <= words => {
                        set.insert_range(a..b);
                        model.extend(a..b);
                    }
                    Op::Remove(i) if i < words => { set.remove(i); model.remove(&i); }
                    _ => {}
                }
            }
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            for i in 0..words {
                prop_assert_eq!(set.contains(i), model.contains(&i));
            }
            for (a, b) in queries {
                let got: Vec<usize> = set.iter_range(a..b).collect();
                let want: Vec<usize> = model.iter().copied().filter(|i| (a..b).contains(i)).collect();
                prop_assert_eq!(got, want, "range {}..{}", a, b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEEDS: u64 = 64;

    /// A new region whose name is durable.
    fn region(storage: &SimStorage, path: &str, len: usize) -> Arc<dyn Region> {
        let region = storage
            .map_region(Path::new(path), len, OpenMode::CreateIfMissing)
            .unwrap();
        storage.sync_name(Path::new(path)).unwrap();
        region
    }

    /// A new file whose name is durable.
    fn file(storage: &SimStorage, path: &str) -> Arc<dyn File> {
        let file = storage
            .open_file(Path::new(path), OpenMode::CreateIfMissing)
            .unwrap();
        storage.sync_name(Path::new(path)).unwrap();
        file
    }

    #[test]
    fn a_new_name_survives_a_power_cut_only_once_its_directory_is_synced() {
        let storage = SimStorage::new();
        let f = storage
            .open_file(Path::new("/data/f"), OpenMode::CreateIfMissing)
            .unwrap();
        f.write_at(0, b"synced data").unwrap();
        f.sync_data().unwrap();
        let _r = storage
            .map_region(Path::new("/pmem/r"), 64, OpenMode::CreateIfMissing)
            .unwrap();
        let survivors = |storage: &SimStorage, path: &str| -> BTreeSet<bool> {
            (0..SEEDS)
                .map(|seed| storage.power_cut(seed).exists(Path::new(path)))
                .collect()
        };
        // Neither name is durable yet, whatever was synced of the file's data; a process
        // crash keeps both and leaves them as undecided as before.
        for storage in [storage.clone(), storage.process_crash()] {
            assert_eq!(
                survivors(&storage, "/data/f"),
                BTreeSet::from([false, true])
            );
            assert_eq!(
                survivors(&storage, "/pmem/r"),
                BTreeSet::from([false, true])
            );
        }
        // Syncing one directory makes only the names in it durable.
        storage.sync_dir(Path::new("/data")).unwrap();
        assert_eq!(survivors(&storage, "/data/f"), BTreeSet::from([true]));
        assert_eq!(
            survivors(&storage, "/pmem/r"),
            BTreeSet::from([false, true])
        );
        storage.sync_name(Path::new("/pmem/r")).unwrap();
        assert_eq!(survivors(&storage, "/pmem/r"), BTreeSet::from([true]));
        // A bare name lives in the current directory.
        storage
            .open_file(Path::new("bare"), OpenMode::CreateIfMissing)
            .unwrap();
        storage.sync_dir(Path::new(".")).unwrap();
        assert_eq!(survivors(&storage, "bare"), BTreeSet::from([true]));
    }

    /// The value of the word at `offset` of region `path` after a power cut with each seed.
    fn outcomes_u64(storage: &SimStorage, path: &str, offset: usize) -> BTreeSet<u64> {
        (0..SEEDS)
            .map(|seed| {
                let bytes = storage.power_cut(seed).region_bytes(path).unwrap();
                u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap())
            })
            .collect()
    }

    #[test]
    fn unflushed_store_may_or_may_not_survive_a_power_cut() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 256);
        r.store_u64(64, 7);
        assert_eq!(r.load_u64(64), 7);
        assert_eq!(
            outcomes_u64(&storage, "/pmem/log", 64),
            BTreeSet::from([0, 7])
        );
        // Neighbouring untouched words never change.
        for seed in 0..SEEDS {
            let bytes = storage.power_cut(seed).region_bytes("/pmem/log").unwrap();
            assert!(bytes[..64].iter().chain(&bytes[72..]).all(|&b| b == 0));
        }
    }

    #[test]
    fn flushed_and_fenced_store_always_survives() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 256);
        r.write(100, b"hello, persistent world");
        r.persist(100, 23).unwrap();
        for seed in 0..SEEDS {
            let after = storage.power_cut(seed);
            let bytes = after.region_bytes("/pmem/log").unwrap();
            assert_eq!(&bytes[100..123], b"hello, persistent world");
            // The new storage has nothing pending: a second cut changes nothing.
            assert_eq!(
                after.power_cut(seed + 1).region_bytes("/pmem/log"),
                Some(bytes)
            );
        }
    }

    #[test]
    fn flush_covers_whole_cache_lines_only() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 256);
        r.store_u64(0, 1); // line 0
        r.store_u64(120, 2); // line 1
        r.store_u64(128, 3); // line 2
        r.persist(60, 8).unwrap(); // lines 0 and 1
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 0), BTreeSet::from([1]));
        assert_eq!(
            outcomes_u64(&storage, "/pmem/log", 120),
            BTreeSet::from([2])
        );
        assert_eq!(
            outcomes_u64(&storage, "/pmem/log", 128),
            BTreeSet::from([0, 3])
        );
    }

    #[test]
    fn flushed_but_unfenced_store_is_not_guaranteed() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 128);
        r.store_u64(8, 42);
        r.flush(8, 8).unwrap();
        assert_eq!(
            outcomes_u64(&storage, "/pmem/log", 8),
            BTreeSet::from([0, 42])
        );
        // Stored again after the flush: the old media, the flushed and the newest value.
        r.store_u64(8, 43);
        assert_eq!(
            outcomes_u64(&storage, "/pmem/log", 8),
            BTreeSet::from([0, 42, 43])
        );
        r.fence().unwrap();
        assert_eq!(
            outcomes_u64(&storage, "/pmem/log", 8),
            BTreeSet::from([42, 43])
        );
    }

    #[test]
    fn another_threads_fence_does_not_persist_my_flush() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 128);
        r.store_u64(0, 9);
        r.flush(0, 8).unwrap();
        let other = Arc::clone(&r);
        std::thread::spawn(move || other.fence().unwrap())
            .join()
            .unwrap();
        assert_eq!(
            outcomes_u64(&storage, "/pmem/log", 0),
            BTreeSet::from([0, 9])
        );
        r.fence().unwrap();
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 0), BTreeSet::from([9]));
    }

    #[test]
    fn my_flush_and_fence_persist_my_store_even_if_another_thread_flushed_the_line_first() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 128);
        r.store_u64(0, 5); // my record's last word
        let other = Arc::clone(&r);
        let (flushed, fence) = (
            Arc::new(std::sync::Barrier::new(2)),
            Arc::new(std::sync::Barrier::new(2)),
        );
        let (f, g) = (Arc::clone(&flushed), Arc::clone(&fence));
        // The next record's appender, in the same line: stores and flushes, fences later.
        let next = std::thread::spawn(move || {
            other.store_u64(8, 6);
            other.flush(8, 8).unwrap();
            f.wait();
            g.wait();
            other.fence().unwrap();
        });
        flushed.wait();
        r.persist(0, 8).unwrap();
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 0), BTreeSet::from([5]));
        // The other thread's word was written back by my flush too, and my fence ordered it.
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 8), BTreeSet::from([6]));
        fence.wait();
        next.join().unwrap();
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 0), BTreeSet::from([5]));
    }

    #[test]
    fn a_late_fence_of_an_older_flush_does_not_undo_a_newer_persist() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 64);
        r.store_u64(0, 1);
        r.flush(0, 8).unwrap(); // in flight for this thread, never fenced yet
        let other = Arc::clone(&r);
        std::thread::spawn(move || {
            other.store_u64(0, 2);
            other.persist(0, 8).unwrap();
        })
        .join()
        .unwrap();
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 0), BTreeSet::from([2]));
        r.fence().unwrap();
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 0), BTreeSet::from([2]));
    }

    #[test]
    fn power_cut_is_deterministic_per_seed() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 4096);
        let f = file(&storage, "/data/f");
        for i in 0..512 {
            r.store_u64(i * 8, i as u64 + 1);
        }
        f.write_at(0, &[7; 8192]).unwrap();
        let a = storage.power_cut(5);
        let b = storage.power_cut(5);
        assert_eq!(a.region_bytes("/pmem/log"), b.region_bytes("/pmem/log"));
        assert_eq!(a.file_bytes("/data/f"), b.file_bytes("/data/f"));
        assert_ne!(
            storage.power_cut(6).region_bytes("/pmem/log"),
            a.region_bytes("/pmem/log")
        );
    }

    #[test]
    fn process_crash_keeps_unflushed_stores_and_writes() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 128);
        let f = file(&storage, "/data/f");
        r.write(3, b"abc");
        f.write_at(0, b"unsynced").unwrap();
        let v = storage.volatile_region(64).unwrap();
        v.store_u64(0, 1);
        let after = storage.process_crash();
        assert_eq!(&after.region_bytes("/pmem/log").unwrap()[3..6], b"abc");
        assert_eq!(after.file_bytes("/data/f").unwrap(), b"unsynced");
        // Still not persistent: a power cut after the restart may drop them.
        let lost = (0..SEEDS).any(|seed| {
            let cut = after.power_cut(seed);
            cut.region_bytes("/pmem/log").unwrap()[3..6] != *b"abc"
                && cut.file_bytes("/data/f").unwrap().is_empty()
        });
        assert!(lost);
    }

    #[test]
    fn unsynced_file_write_may_be_lost_synced_one_survives() {
        let storage = SimStorage::new();
        let f = file(&storage, "/data/f");
        f.write_at(0, &[1; 512]).unwrap();
        f.sync_data().unwrap();
        f.write_at(512, &[2; 100]).unwrap();
        let mut seen = BTreeSet::new();
        for seed in 0..SEEDS {
            let bytes = storage.power_cut(seed).file_bytes("/data/f").unwrap();
            assert_eq!(&bytes[..512], &[1; 512]);
            // Length and sector contents are chosen independently.
            seen.insert((bytes.len(), bytes[512..].contains(&2)));
        }
        assert_eq!(
            seen,
            BTreeSet::from([(512, false), (612, false), (612, true)])
        );
        f.sync_data().unwrap();
        for seed in 0..SEEDS {
            let bytes = storage.power_cut(seed).file_bytes("/data/f").unwrap();
            assert_eq!(bytes.len(), 612);
            assert_eq!(&bytes[512..], &[2; 100]);
        }
    }

    /// A direct write keeps the durability contract of a buffered one (lost or kept by a
    /// power cut until synced, kept after), is counted, and is refused when misaligned, as
    /// the kernel refuses it, so that tests of a direct writer catch a misaligned write.
    #[test]
    fn direct_writes_are_checked_counted_and_synced_like_writes() {
        use crate::direct_io::{AlignedBuffer, DIRECT_ALIGN};
        let storage = SimStorage::new();
        let f = file(&storage, "/data/f");
        let mut block = AlignedBuffer::new();
        block.resize(DIRECT_ALIGN);
        block.as_mut_slice().fill(3);
        assert!(matches!(
            f.write_direct_at(8, block.as_slice()),
            Err(MediaError::Misaligned { .. })
        ));
        assert!(matches!(
            f.write_direct_at(0, &block.as_slice()[..512]),
            Err(MediaError::Misaligned { .. })
        ));
        assert_eq!(storage.direct_writes(), 0);
        f.write_direct_at(DIRECT_ALIGN as u64, block.as_slice())
            .unwrap();
        assert_eq!(storage.direct_writes(), 1);
        let lost = (0..SEEDS).any(|seed| {
            let bytes = storage.power_cut(seed).file_bytes("/data/f").unwrap();
            bytes.len() < 2 * DIRECT_ALIGN || bytes[DIRECT_ALIGN..] != *block.as_slice()
        });
        assert!(lost, "an unsynced direct write must be losable");
        f.sync_data().unwrap();
        for seed in 0..SEEDS {
            let bytes = storage.power_cut(seed).file_bytes("/data/f").unwrap();
            assert_eq!(&bytes[DIRECT_ALIGN..], block.as_slice());
        }
    }

    #[test]
    fn set_len_is_durable() {
        let storage = SimStorage::new();
        let f = file(&storage, "/data/f");
        f.write_at(0, b"0123456789").unwrap();
        f.set_len(4).unwrap();
        assert_eq!(f.len().unwrap(), 4);
        for seed in 0..SEEDS {
            assert_eq!(
                storage.power_cut(seed).file_bytes("/data/f").unwrap(),
                b"0123"
            );
        }
        let mut buf = [0; 8];
        assert_eq!(f.read_at(2, &mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"23");
        assert!(!f.read_exact_at(0, &mut buf).unwrap());
    }

    #[test]
    fn crash_after_kills_the_nth_op_and_ignores_later_stores() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 128); // sizing its file, syncing its name: ops 1, 2
        let f = file(&storage, "/data/f"); // syncing its name: op 3
                                           // A second handle: `f`'s failed sync fails its later ones without reaching the medium.
        let g = storage
            .open_file(Path::new("/data/f"), OpenMode::Existing)
            .unwrap();
        storage.crash_after(4);
        r.store_u64(0, 1); // op 1 (from now)
        r.persist(0, 8).unwrap(); // ops 2 (flush) and 3 (fence)
        assert_eq!(storage.ops_done(), 3 + 3);
        assert!(!storage.is_dead());
        assert!(matches!(f.write_at(0, b"x"), Err(MediaError::PowerCut))); // op 4 dies
        assert!(storage.is_dead());
        assert_eq!(storage.ops_done(), 3 + 3);
        r.store_u64(0, 2); // ignored
        r.write(8, b"late"); // ignored
        r.zero(0, 8); // ignored
        assert_eq!(r.load_u64(0), 1);
        assert!(matches!(r.flush(0, 8), Err(MediaError::PowerCut)));
        assert!(matches!(r.fence(), Err(MediaError::PowerCut)));
        assert!(matches!(f.sync_data(), Err(MediaError::PowerCut)));
        assert!(matches!(g.set_len(0), Err(MediaError::PowerCut)));
        assert!(matches!(
            storage.sync_dir(Path::new("/data")),
            Err(MediaError::PowerCut)
        ));
        assert!(matches!(
            storage.open_file(Path::new("/data/g"), OpenMode::CreateIfMissing),
            Err(MediaError::PowerCut)
        ));
        assert!(matches!(
            storage.map_region(Path::new("/pmem/log"), 0, OpenMode::Existing),
            Err(MediaError::PowerCut)
        ));
        assert_eq!(f.len().unwrap(), 0);
        assert_eq!(storage.ops_done(), 3 + 3);
        // The state as of the death: the persisted store always survives.
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 0), BTreeSet::from([1]));
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 8), BTreeSet::from([0]));
        // The restarted storage is alive.
        let after = storage.power_cut(0);
        assert!(!after.is_dead());
        assert_eq!(after.ops_done(), 0);
    }

    #[test]
    fn crash_after_counts_from_when_it_is_armed() {
        let storage = SimStorage::new();
        let f = file(&storage, "/data/f");
        f.write_at(0, b"a").unwrap();
        f.sync_data().unwrap();
        storage.crash_after(1);
        assert!(matches!(f.write_at(1, b"b"), Err(MediaError::PowerCut)));
        assert_eq!(storage.file_bytes("/data/f").unwrap(), b"a");

        let storage = SimStorage::new();
        storage.crash_after(0);
        assert!(storage.is_dead());
    }

    #[test]
    fn injected_write_and_sync_faults_fire_exactly_once() {
        let storage = SimStorage::new();
        let f = file(&storage, "/data/f");
        f.write_at(0, b"a").unwrap();
        storage.fail_nth_write(2);
        storage.fail_nth_sync(1);
        f.write_at(1, b"b").unwrap();
        assert!(matches!(
            f.write_at(2, b"c"),
            Err(MediaError::Injected("write"))
        ));
        assert_eq!(storage.file_bytes("/data/f").unwrap(), b"ab");
        f.write_at(2, b"d").unwrap();
        assert!(matches!(f.sync_data(), Err(MediaError::Injected("sync"))));
        // The failed sync made nothing durable, and nothing is pending any more: no power
        // cut leaves a byte of "abd" (the length may survive), while the page cache still
        // reads it.
        for seed in 0..SEEDS {
            let bytes = storage.power_cut(seed).file_bytes("/data/f").unwrap();
            assert!(bytes.iter().all(|&b| b == 0), "seed {seed}: {bytes:?}");
        }
        assert_eq!(storage.file_bytes("/data/f").unwrap(), b"abd");
        // This handle's later syncs fail; another's (a new process's) succeed but do not
        // write them back. Only writing them again does.
        assert!(matches!(
            f.sync_data(),
            Err(MediaError::SyncFailedBefore { .. })
        ));
        let f = file(&storage, "/data/f");
        f.write_at(3, b"e").unwrap();
        f.sync_data().unwrap();
        assert_eq!(
            storage.power_cut(0).file_bytes("/data/f").unwrap(),
            b"\0\0\0e"
        );
        f.write_at(0, b"abd").unwrap();
        f.sync_data().unwrap();
        assert_eq!(storage.power_cut(0).file_bytes("/data/f").unwrap(), b"abde");
        assert!(!storage.is_dead());
    }

    #[test]
    fn injected_fence_faults_persist_from_the_nth_on() {
        let storage = SimStorage::new();
        let r = region(&storage, "/pmem/log", 64);
        storage.fail_region_fences_after(2);
        r.store_u64(0, 1);
        r.persist(0, 8).unwrap();
        r.store_u64(8, 2);
        r.flush(8, 8).unwrap();
        assert!(matches!(r.fence(), Err(MediaError::Injected("fence"))));
        assert!(matches!(r.fence(), Err(MediaError::Injected("fence"))));
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 0), BTreeSet::from([1]));
        assert_eq!(
            outcomes_u64(&storage, "/pmem/log", 8),
            BTreeSet::from([0, 2])
        );
        storage.fail_region_fences_after(0);
        r.fence().unwrap();
        assert_eq!(outcomes_u64(&storage, "/pmem/log", 8), BTreeSet::from([2]));
    }

    #[test]
    fn a_crash_while_a_region_is_created_leaves_an_empty_file() {
        let storage = SimStorage::new();
        let path = Path::new("/pmem/area");
        storage.crash_after(1);
        assert!(matches!(
            storage.map_region(path, 64, OpenMode::CreateIfMissing),
            Err(MediaError::PowerCut)
        ));
        let after = storage.process_crash();
        assert_eq!(after.region_bytes(path), Some(Vec::new()));
        // As on a real file system: an empty file is too small for any mapping of its own
        // size, and creating over it sizes it.
        assert!(matches!(
            after.map_region(path, 0, OpenMode::Existing),
            Err(MediaError::TooSmall {
                actual: 0,
                needed: 1,
                ..
            })
        ));
        let region = after.map_or_create_region(path, 64).unwrap();
        assert_eq!(region.len(), 64);
        assert_eq!(
            after.ops_done(),
            2,
            "sizing the file and syncing its name: one operation each"
        );
        let again = after.map_or_create_region(path, 128).unwrap();
        assert_eq!(again.len(), 64, "an existing region keeps its size");
    }

    #[test]
    fn map_region_sizes_and_missing_files() {
        let storage = SimStorage::new();
        let path = Path::new("/pmem/log");
        assert!(matches!(
            storage.map_region(path, 64, OpenMode::Existing),
            Err(MediaError::MissingFile(_))
        ));
        assert!(matches!(
            storage.map_region(path, 0, OpenMode::CreateIfMissing),
            Err(MediaError::MissingFile(_))
        ));
        let r = storage
            .map_region(path, 100, OpenMode::CreateIfMissing)
            .unwrap();
        assert_eq!(r.len(), 100);
        assert_eq!(r.medium(), Medium::Simulated);
        assert_eq!(r.flush_kind(), FlushKind::None);
        assert!(storage.exists(path));
        assert!(matches!(
            storage.map_region(path, 101, OpenMode::Existing),
            Err(MediaError::TooSmall {
                actual: 100,
                needed: 101,
                ..
            })
        ));
        let again = storage.map_region(path, 0, OpenMode::Existing).unwrap();
        assert_eq!(again.len(), 100);
        // Both handles see the same bytes; the last word is partial.
        r.write(96, b"wxyz");
        r.persist(96, 4).unwrap();
        let mut buf = [0; 4];
        again.read(96, &mut buf);
        assert_eq!(&buf, b"wxyz");
        assert_eq!(
            &storage.power_cut(1).region_bytes(path).unwrap()[96..],
            b"wxyz"
        );
        assert!(matches!(
            storage.open_file(Path::new("/data/none"), OpenMode::Existing),
            Err(MediaError::MissingFile(_))
        ));
        assert!(!storage.exists(Path::new("/data/none")));
    }

    #[test]
    fn volatile_regions_do_not_survive_and_set_bytes_replaces() {
        let storage = SimStorage::new();
        let v = storage.volatile_region(64).unwrap();
        v.store_u64(0, 5);
        v.persist(0, 8).unwrap();
        assert_eq!(v.load_u64(0), 5);
        assert_eq!(v.medium(), Medium::Volatile);
        let r = region(&storage, "/pmem/log", 64);
        r.store_u64(0, 1);
        storage.set_region_bytes("/pmem/log", vec![0xff; 32]);
        assert_eq!(r.len(), 32);
        assert_eq!(r.load_u64(0), u64::MAX);
        storage.set_file_bytes("/data/f", b"corrupt".to_vec());
        for seed in 0..8 {
            let after = storage.power_cut(seed);
            assert_eq!(after.region_bytes("/pmem/log").unwrap(), vec![0xff; 32]);
            assert_eq!(after.file_bytes("/data/f").unwrap(), b"corrupt");
        }
        let after = storage.process_crash();
        assert_eq!(after.region_bytes("/pmem/log").unwrap(), vec![0xff; 32]);
    }

    #[derive(Clone, Debug)]
    enum FileOp {
        Write { offset: usize, len: usize, byte: u8 },
        Sync,
        SetLen(usize),
        Discard { offset: usize, len: usize },
    }

    fn file_op() -> impl proptest::strategy::Strategy<Value = FileOp> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..6_000usize, 0..2_000usize, any::<u8>())
                .prop_map(|(offset, len, byte)| FileOp::Write { offset, len, byte }),
            1 => Just(FileOp::Sync),
            1 => (0..8_000usize).prop_map(FileOp::SetLen),
            1 => (0..8_000usize, 0..3_000usize)
                .prop_map(|(offset, len)| FileOp::Discard { offset, len }),
        ]
    }

    proptest::proptest! {
        /// A sync copies only the ranges written since the last one: the files it leaves are
        /// those of copying everything, and a power cut keeps each sector from one or the
        /// other, at either length.
        #[test]
        fn syncing_the_written_ranges_equals_syncing_everything(
            ops in proptest::collection::vec(file_op(), 1..40)
        ) {
            let storage = SimStorage::new();
            let f = file(&storage, "/data/f");
            let (mut current, mut durable) = (Vec::new(), Vec::new());
            for op in &ops {
                match *op {
                    FileOp::Write { offset, len, byte } => {
                        f.write_at(offset as u64, &vec![byte; len]).unwrap();
                        current.resize(current.len().max(offset + len), 0);
                        current[offset..offset + len].fill(byte);
                    }
                    FileOp::Sync => {
                        f.sync_data().unwrap();
                        durable = current.clone();
                    }
                    FileOp::SetLen(len) => {
                        f.set_len(len as u64).unwrap();
                        current.resize(len, 0);
                        durable = current.clone();
                    }
                    FileOp::Discard { offset, len } => {
                        f.discard(offset as u64, len as u64).unwrap();
                        for bytes in [&mut current, &mut durable] {
                            let end = (offset + len).min(bytes.len());
                            bytes[offset.min(end)..end].fill(0);
                        }
                    }
                }
            }
            proptest::prop_assert_eq!(storage.file_bytes("/data/f").unwrap(), current.clone());
            for seed in 0..8 {
                let image = storage.power_cut(seed).file_bytes("/data/f").unwrap();
                proptest::prop_assert!(image.len() == durable.len() || image.len() == current.len());
                for (i, sector) in image.chunks(SECTOR).enumerate() {
                    let from = |bytes: &[u8]| {
                        let start = (i * SECTOR).min(bytes.len());
                        let mut padded = bytes[start..(start + sector.len()).min(bytes.len())].to_vec();
                        padded.resize(sector.len(), 0);
                        padded == sector
                    };
                    proptest::prop_assert!(from(&durable) || from(&current), "sector {}", i);
                }
            }
            f.sync_data().unwrap();
            for seed in 0..8 {
                let image = storage.power_cut(seed).file_bytes("/data/f").unwrap();
                proptest::prop_assert_eq!(&image, &current);
            }
        }
    }
}
