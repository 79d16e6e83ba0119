//! The log manager: concurrent appends into the ring, the commit protocol of each mode, group
//! commit, the background writer, and fail-stop.
//!
//! Three watermarks, all LSNs, only ever growing (docs/design/log.md has the argument):
//!
//! * `reserved` — the next LSN to hand out. An appender claims `[start, end)` with one
//!   `fetch_add`; no lock is held while it copies its record.
//! * `filled`   — every byte below it has been copied into the ring (and, when the ring is in
//!   PMEM, flushed and fenced). It advances over finished records in LSN order (see
//!   `completion.rs`), so it is always a record boundary and everything below it is complete.
//! * `hardened` — every byte below it is in the log file and covered by an `fdatasync`.
//!
//! A ring slot holding LSN `l` may be overwritten only once `l < floor()`, where the floor is
//! `hardened` (or, for `pmem-log`, the prefix the user released); appends write at most the
//! append window past the floor (in `buffer` mode at most 64 MiB of a larger ring, whose
//! other slots keep the last lap below the floor for a restart to read: decision 109).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use tailstore_media::direct_io::{AlignedBuffer, DIRECT_ALIGN};
use tailstore_media::{File, MediaError, Medium};

use crate::completion::{Completions, LsnWaiters, FILL_SPINS};
use crate::config::{CommitMode, ThreadSetup};
use crate::counters::{Counters, LogCounters};
use crate::error::{LogError, Result};
use crate::format::{persist_start_word, LogFileHeader, HEADER_BYTES};

use crate::record::{parse_header, record_size, MAX_PAYLOAD, RECORD_ALIGN, RECORD_HEADER};
use crate::ring::Ring;
use crate::scan::{FileReader, Lap, Records, Scanner, Source};

/// The durable, concurrent log. Cheap to share: wrap it in an `Arc`.
pub struct LogManager {
    pub(crate) shared: Arc<Shared>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

pub(crate) struct Shared {
    pub mode: CommitMode,
    pub db_id: u64,
    pub salt: u32,
    pub ring: Ring,
    /// The log file (all modes but `pmem-log`).
    pub file: Option<Arc<dyn File>>,
    pub block_bytes: u64,
    /// How far past the floor appends may write into the ring (`format::append_window`).
    window: u64,
    /// Largest record an append accepts: half the window, so two records always fit.
    pub max_record: u64,
    pub async_interval: Duration,
    pub harden_age: Duration,
    /// `buffer`: bytes pending before the writer hardens without waiting for `harden_age`.
    pub harden_batch: u64,
    /// The log file's head is discarded in steps of this many bytes (see `release_file`).
    release_step: u64,
    /// Run by the background writer when it starts.
    writer_setup: Option<ThreadSetup>,
    /// [`crate::Plant::MissingFence`] planted: appends skip the fence.
    missing_fence: bool,
    /// `filled` when the log was opened, for the bytes counter.
    pub opened_at: u64,

    reserved: CachePadded<AtomicU64>,
    filled: CachePadded<AtomicU64>,
    hardened: CachePadded<AtomicU64>,
    released: CachePadded<AtomicU64>,

    /// Finished appends waiting for their predecessors before `filled` can pass them.
    completions: Completions,
    /// Committers waiting for `filled` (PMEM modes; fsync before it hardens).
    filled_waiters: LsnWaiters,
    /// `fsync` mode: commits that found their record not yet hardened and waited for a
    /// round, ever (see [`Shared::gather_committers`]).
    round_joins: AtomicU64,
    /// The round a leader gathers committers for, which the committer that completes its
    /// cohort starts (see [`Shared::gather_committers`]).
    gathering: Gathering,
    /// The last group-commit round's view of the committers (only its leader locks it).
    cohort: Mutex<Cohort>,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    /// Whether a hardening round has a leader; its end wakes `hardened_waiters`.
    leading: CachePadded<AtomicBool>,
    /// Threads waiting for `hardened`, or for the lead of the next round.
    hardened_waiters: LsnWaiters,
    /// The hardening leader's state (only the leader of a round locks it).
    harden: Mutex<HardenState>,
    space: Mutex<()>,
    space_freed: Condvar,
    space_waiters: AtomicUsize,
    release_lock: Mutex<()>,
    writer: OnceLock<Thread>,
    stopping: AtomicBool,
    pub counters: Counters,
}

/// What a group-commit leader knows of the committers from the rounds before it, counted in
/// [`Shared::round_joins`].
struct Cohort {
    /// Joins counted when the last round chose its target: the later ones are the next
    /// round's.
    joins_at_target: u64,
    /// Committers seen by the last round: those it covered and those that joined while it
    /// ran. The ones it covered are about to commit again under a closed loop.
    active: u64,
    /// How long the next leader may wait for them: [`GATHER_LIMIT`] while waiting pays,
    /// halved after each wait that no committer joined during, down to none (see
    /// [`Shared::gather_committers`]).
    limit: Duration,
    /// The gathering in progress, if any: when it began and `round_joins` then.
    waiting_since: Option<(Instant, u64)>,
}

impl Default for Cohort {
    fn default() -> Self {
        Self {
            joins_at_target: 0,
            active: 0,
            limit: GATHER_LIMIT,
            waiting_since: None,
        }
    }
}

/// A round whose leader waits for committers to join it, published so that whoever finds it
/// due starts it: the committer whose join completes the cohort, one that joins after the
/// deadline, or the leader when its wait ends (decision 250).
struct Gathering {
    /// The `round_joins` count that completes the cohort; [`NO_GATHERING`] when no round is
    /// being gathered. Taking the round (starting it) swaps it for [`NO_GATHERING`].
    target: AtomicU64,
    /// When the leader stops waiting, in nanoseconds since `clock`.
    deadline_ns: AtomicU64,
    clock: Instant,
    /// Gatherings left whose leader sleeps instead of yielding (only leaders use it, one at
    /// a time).
    sleeping_leaders: AtomicU32,
}

const NO_GATHERING: u64 = u64::MAX;

/// A yield that kept the gathering leader off its processor longer than this shows a
/// saturated machine (see [`Shared::wait_for_cohort`]).
const YIELD_OVERSHOOT: Duration = Duration::from_micros(100);

/// Gatherings whose leader sleeps once a yield overshot, before yielding is tried again.
const SLEEPING_GATHERINGS: u32 = 64;

impl Gathering {
    fn new() -> Self {
        Self {
            target: AtomicU64::new(NO_GATHERING),
            deadline_ns: AtomicU64::new(0),
            clock: Instant::now(),
            sleeping_leaders: AtomicU32::new(0),
        }
    }

    /// Whether this gathering's leader sleeps (see [`Shared::wait_for_cohort`]).
    fn leader_sleeps(&self) -> bool {
        let left = self.sleeping_leaders.load(Ordering::Relaxed);
        if left > 0 {
            self.sleeping_leaders.store(left - 1, Ordering::Relaxed);
        }
        left > 0
    }

    /// Makes the next [`SLEEPING_GATHERINGS`] leaders sleep.
    fn leaders_sleep(&self) {
        self.sleeping_leaders
            .store(SLEEPING_GATHERINGS, Ordering::Relaxed);
    }

    /// Whether the round published with `target` is still waiting to be taken.
    fn is_published(&self, target: u64) -> bool {
        self.target.load(Ordering::SeqCst) == target
    }

    fn nanos(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.clock).as_nanos() as u64
    }

    /// Publishes a round to be started once `round_joins` reaches `target` or at `deadline`.
    fn publish(&self, target: u64, deadline: Instant) {
        debug_assert_ne!(target, NO_GATHERING);
        self.deadline_ns
            .store(self.nanos(deadline), Ordering::Relaxed);
        // SeqCst, against the joiners' increment of `round_joins` (Dekker, as in
        // `completion.rs`): the leader re-reads the count after this store, a joiner reads
        // the target after its increment, so at least one of them sees the cohort complete.
        self.target.store(target, Ordering::SeqCst);
    }

    /// Whether the caller, who has seen `joins` joins, takes the published round: it is due
    /// (its cohort is complete or its deadline has passed) and no one took it first.
    fn take_if_due(&self, joins: u64) -> bool {
        let target = self.target.load(Ordering::SeqCst);
        if target == NO_GATHERING {
            return false;
        }
        let due = joins >= target
            || self.nanos(Instant::now()) >= self.deadline_ns.load(Ordering::Relaxed);
        due && self.take(target)
    }

    /// Takes the round published with `target`; false if someone else took it.
    fn take(&self, target: u64) -> bool {
        self.target
            .compare_exchange(target, NO_GATHERING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

#[derive(Default)]
struct HardenState {
    /// Bytes copied out of the ring for one write, aligned for direct I/O, when the ring
    /// cannot hand over its own memory (see `Ring::write_out`).
    scratch: AlignedBuffer,
    /// The log file's length as last set: the file is extended ahead of the log in large
    /// steps, so that an `fdatasync` flushes data only, never a new file size.
    file_len: u64,
}

/// Writes log bytes for the background writer (`buffer`, `async`): the whole aligned blocks
/// in the middle bypass the page cache, a partial block at either end (where the previous
/// round stopped or this one stops) goes through it. Nothing waits for these writes, and the
/// log is read back only by recovery and scans, so caching them buys little and costs the
/// kernel a copy into the page cache and a writeback walk (decision 55). A block is only ever
/// written one way or the other within a round, and the kernel keeps the two coherent.
///
/// `fsync` leaders write through the cache: a direct write is synchronous, and a commit
/// would then wait for two device round trips (the write, then `fdatasync`'s) instead of one.
fn write_around_cache(file: &dyn File, offset: u64, bytes: &[u8]) -> tailstore_media::Result<()> {
    let align = DIRECT_ALIGN as u64;
    let end = offset + bytes.len() as u64;
    let middle_start = offset.next_multiple_of(align).min(end);
    let middle_end = (end / align * align).max(middle_start);
    let at = |lsn: u64| (lsn - offset) as usize;
    let (head, rest) = bytes.split_at(at(middle_start));
    let (middle, tail) = rest.split_at(at(middle_end) - head.len());
    if !head.is_empty() {
        file.write_at(offset, head)?;
    }
    if !middle.is_empty() {
        // Aligned in memory because the caller placed the bytes at their offset within a
        // block; were it not, the file refuses the write (`Misaligned`) and the log stops.
        file.write_direct_at(middle_start, middle)?;
    }
    if !tail.is_empty() {
        file.write_at(middle_end, tail)?;
    }
    Ok(())
}

/// The longest a group-commit leader waits for committers that are about to append.
const GATHER_LIMIT: Duration = Duration::from_micros(50);

/// The shortest wait for committers a leader tries once its waits have stopped paying.
const GATHER_PROBE: Duration = Duration::from_micros(6);

/// The log file grows in steps of this many bytes.
const FILE_GROWTH: u64 = 64 << 20;

/// How far past the appends the log's background thread readies the ring's slots, during the
/// ring's first lap in this process (see `Shared::prepare_ring_ahead`): a few hardening batches, so
/// that appends keep finding slots ready between the writer's wake-ups.
const RING_PREPARE_AHEAD: u64 = 32 << 20;
/// The most the writer readies in one call.
const RING_PREPARE_STEP: u64 = 4 << 20;
/// `pmem-log`'s preparer is woken each time this much has been appended (well within what
/// it readies ahead), and by the log's close; this timeout is only a safety net.
const PREPARER_WAKE_BYTES: u64 = 2 * RING_PREPARE_STEP;
const PREPARER_PARK: Duration = Duration::from_secs(1);

/// What recovery (or creation) established about the log.
pub(crate) struct Start {
    /// The database's identity (in every header) and the checksum seed derived from it.
    pub db_id: u64,
    pub salt: u32,
    /// Block size recorded at creation.
    pub block_bytes: u64,
    /// End of the valid prefix: where appends continue.
    pub end: u64,
    /// The released prefix: `pmem-log`'s ring space, the log file's discarded head.
    pub released: u64,
}

/// Spin briefly, then give the core away: with more threads than cores, the thread we wait
/// for may need our core to finish.
fn backoff(spins: &mut u32) {
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        thread::yield_now();
    }
    *spins += 1;
}

impl Shared {
    pub fn new(
        config: &crate::LogConfig,
        ring: Ring,
        file: Option<Arc<dyn File>>,
        start: Start,
    ) -> Self {
        let block_bytes = start.block_bytes;
        // Half the window, so that an append can always find room once the writer catches
        // up; and nothing recovery would not read back (a serve ring of 64 MiB once let a record
        // of 16.6 MB be acknowledged and then lost at the restart, the commits after it too).
        let window = config.append_window(ring.capacity());
        let max_record = (window / 2).min(record_size(MAX_PAYLOAD));
        let harden_batch = config
            .harden_batch_bytes
            .map_or(window / 8, |b| b as u64)
            .max(block_bytes);
        Self {
            mode: config.mode,
            db_id: start.db_id,
            salt: start.salt,
            ring,
            file,
            block_bytes,
            window,
            max_record,
            async_interval: config.async_interval,
            harden_age: config.harden_age,
            harden_batch,
            release_step: config.release_step_bytes,
            writer_setup: config.writer_setup.clone(),
            missing_fence: crate::plant::planted(&config.plants, crate::Plant::MissingFence),
            opened_at: start.end,
            reserved: CachePadded::new(AtomicU64::new(start.end)),
            filled: CachePadded::new(AtomicU64::new(start.end)),
            hardened: CachePadded::new(AtomicU64::new(start.end)),
            released: CachePadded::new(AtomicU64::new(start.released)),
            completions: Completions::new(),
            filled_waiters: LsnWaiters::new(FILL_SPINS),
            round_joins: AtomicU64::new(0),
            gathering: Gathering::new(),
            cohort: Mutex::new(Cohort::default()),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            leading: CachePadded::new(AtomicBool::new(false)),
            hardened_waiters: LsnWaiters::new(0),
            harden: Mutex::new(HardenState::default()),
            space: Mutex::new(()),
            space_freed: Condvar::new(),
            space_waiters: AtomicUsize::new(0),
            release_lock: Mutex::new(()),
            writer: OnceLock::new(),
            stopping: AtomicBool::new(false),
            counters: Counters::default(),
        }
    }

    fn check(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            let cause = self.failure.lock().clone().unwrap_or_default();
            return Err(LogError::Stopped { cause });
        }
        Ok(())
    }

    /// Enters the fail-stop state: the medium's state is unknown, so nothing more is accepted.
    fn fail_stop(&self, err: MediaError) -> LogError {
        self.stop(err.to_string())
    }

    /// Enters the fail-stop state for `cause` (the first cause is the one reported).
    fn stop(&self, cause: String) -> LogError {
        self.failure.lock().get_or_insert(cause.clone());
        self.failed.store(true, Ordering::Release);
        self.hardened_waiters.wake(None);
        self.wake_space_waiters();
        self.filled_waiters.wake(None);
        LogError::Stopped { cause }
    }

    /// Below this LSN ring slots may be reused.
    fn floor(&self) -> u64 {
        match self.mode {
            CommitMode::PmemLog => self.released.load(Ordering::Acquire),
            _ => self.hardened.load(Ordering::Acquire),
        }
    }

    fn persistent_ring(&self) -> bool {
        self.mode.uses_pmem()
    }

    fn append(&self, payload: &[u8]) -> Result<u64> {
        let place = self.reserve(payload.len())?;
        self.fill(place, payload)
    }

    /// Hands out the log's next `payload_len`-byte record slot, once the ring has room for it.
    fn reserve(&self, payload_len: usize) -> Result<Reservation<'_>> {
        self.check()?;
        let size = record_size(payload_len);
        if size > self.max_record {
            return Err(LogError::RecordTooLarge {
                len: payload_len,
                max: (self.max_record as usize).saturating_sub(RECORD_HEADER),
            });
        }
        let start = self.reserved.fetch_add(size, Ordering::Relaxed);
        let end = start + size;
        #[cfg(feature = "append-pauses")]
        crate::append_pauses::after_reserving();
        self.wait_for_space(end)?;
        Ok(Reservation {
            log: self,
            start,
            end,
            payload_len,
            filled: false,
        })
    }

    /// Writes the record into its reserved slot and publishes it.
    fn fill(&self, mut place: Reservation<'_>, payload: &[u8]) -> Result<u64> {
        assert!(
            std::ptr::eq(place.log, self),
            "a reservation is filled in its own log"
        );
        assert_eq!(
            payload.len(),
            place.payload_len,
            "a record fills the slot reserved for its length"
        );
        // Written or failed from here: either way the slot is no longer a hole anyone waits
        // behind silently (a failed write stops the log; a panic above drops it unfilled).
        place.filled = true;
        if self.persistent_ring() {
            self.persist_record(place.start, payload)?;
        } else {
            self.ring.write_record(self.salt, place.start, payload);
        }
        self.publish(place.start, place.end);
        Ok(place.end)
    }

    /// Writes the record into the PMEM ring and makes it persistent before it is published.
    fn persist_record(&self, lsn: u64, payload: &[u8]) -> Result<()> {
        self.ring
            .write_record_streaming(self.salt, lsn, payload)
            .map_err(|e| self.fail_stop(e))?;
        // A plant takes effect only with debug assertions: a release build's test is constant.
        if !(cfg!(debug_assertions) && self.missing_fence) {
            self.ring.fence().map_err(|e| self.fail_stop(e))?;
        }
        Ok(())
    }

    /// Makes `[start, end)` part of the filled prefix once every earlier reservation is.
    fn publish(&self, start: u64, end: u64) {
        assert!(end > start);
        // `start` came from `reserved.fetch_add`; re-reading that contended line on every
        // append is not worth it outside debug builds.
        debug_assert!(end <= self.reserved.load(Ordering::Relaxed));
        let (from, to) = self.completions.publish(&self.filled, start, end);
        if to > from {
            self.filled_waiters.wake(Some(to));
            // Besides its timer (`harden_age` for `buffer`, the interval for `async`), the writer
            // is woken when an eighth of the ring (`buffer`, at least a block) or a quarter
            // (`async`) has filled: soon enough that committers do not find the ring full, late
            // enough that each `fdatasync` covers many blocks — the disk's bandwidth, not its
            // flush latency, then bounds the log rate.
            let unit = match self.mode {
                CommitMode::Buffer => self.harden_batch,
                CommitMode::Async => self.ring.capacity() / 4,
                // The preparer, which has ended once the region's first lap is ready.
                CommitMode::PmemLog if to < self.first_lap_end() => PREPARER_WAKE_BYTES,
                CommitMode::Fsync | CommitMode::PmemLog => 0,
            };
            if unit > 0 && from / unit != to / unit {
                self.wake_writer();
            }
        }
    }

    fn wait_filled(&self, lsn: u64) -> Result<()> {
        if self.filled.load(Ordering::Acquire) < lsn {
            // Else the wait never ends: no append is coming that would fill it.
            let end = self.reserved.load(Ordering::Acquire);
            if lsn > end {
                return Err(LogError::PastTheEnd { lsn, end });
            }
            self.filled_waiters
                .wait(&self.filled, lsn, || self.failed.load(Ordering::Acquire));
        }
        self.check()
    }

    fn wait_for_space(&self, end: u64) -> Result<()> {
        let window = self.window;
        if end <= self.floor() + window {
            return Ok(());
        }
        let began = Instant::now();
        let mut spins = 0;
        loop {
            self.check()?;
            let floor = self.floor();
            if end <= floor + window {
                break;
            }
            match self.mode {
                CommitMode::Fsync | CommitMode::Async => {
                    let filled = self.filled.load(Ordering::Acquire);
                    if filled > floor {
                        self.harden_to((end - window).min(filled), false)?;
                    } else {
                        backoff(&mut spins);
                    }
                }
                CommitMode::Buffer | CommitMode::PmemLog => {
                    self.wake_writer();
                    self.sleep_until_space_freed(end);
                }
            }
        }
        self.counters
            .ring_full_wait(began.elapsed().as_nanos() as u64);
        Ok(())
    }

    fn sleep_until_space_freed(&self, end: u64) {
        self.space_waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.space.lock();
        if end > self.floor() + self.window && !self.failed.load(Ordering::Acquire) {
            // The timeout only bounds a missed wake-up; the floor moves on its own schedule.
            self.space_freed
                .wait_for(&mut guard, Duration::from_millis(1));
        }
        drop(guard);
        self.space_waiters.fetch_sub(1, Ordering::SeqCst);
    }

    fn wake_space_waiters(&self) {
        if self.space_waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.space.lock();
            self.space_freed.notify_all();
        }
    }

    fn wake_writer(&self) {
        if let Some(writer) = self.writer.get() {
            writer.unpark();
        }
    }

    /// Returns once `hardened >= lsn`. Group commit: whoever finds no round in progress leads
    /// one that covers everything filled so far; the others wait for it and share its fsync.
    /// `whole_blocks` makes the leader stop at a block boundary (the `buffer` writer).
    ///
    /// A round's end wakes only the waiters it covered and the first one it did not, who
    /// leads the next round: waking them all made each pass through a lock in turn before
    /// the next round could start (decision 249).
    fn harden_to(&self, lsn: u64, whole_blocks: bool) -> Result<()> {
        loop {
            self.check()?;
            if self.hardened.load(Ordering::Acquire) >= lsn {
                return Ok(());
            }
            let free = self
                .leading
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
            if !free {
                self.hardened_waiters.wait(&self.hardened, lsn, || {
                    self.failed.load(Ordering::Acquire) || !self.leading.load(Ordering::SeqCst)
                });
                continue;
            }
            // A round handed to a committer is ended by it.
            if let Some(round) = self.lead_round(lsn, whole_blocks) {
                self.end_round();
                round?;
            }
        }
    }

    /// Lets the next round have a leader, and wakes the committers this one covered.
    fn end_round(&self) {
        self.leading.store(false, Ordering::SeqCst);
        self.hardened_waiters
            .wake_reached_and_next(self.hardened.load(Ordering::Acquire));
    }

    /// One round, led by the caller: everything filled (`whole_blocks`: up to a block
    /// boundary, at least `lsn`), after gathering the committers about to join. `None`: a
    /// committer took the round while the caller waited, and runs and ends it.
    fn lead_round(&self, lsn: u64, whole_blocks: bool) -> Option<Result<()>> {
        if whole_blocks {
            let filled = self.filled.load(Ordering::Acquire);
            let target = (filled / self.block_bytes * self.block_bytes).max(lsn);
            return Some(self.harden_round(target.min(filled)));
        }
        self.gather_committers(lsn)
            .then(|| self.run_gathered_round())
    }

    /// [`Shared::wait_durable`] for a commit: in `fsync` mode, one that finds its record not
    /// yet hardened joins the next round, is counted for the leaders' gathering, and starts
    /// the round being gathered if its join completes the cohort or comes after the deadline.
    fn wait_commit(&self, lsn: u64) -> Result<()> {
        if self.mode != CommitMode::Fsync || self.hardened.load(Ordering::Acquire) >= lsn {
            return self.wait_durable(lsn);
        }
        let joins = self.round_joins.fetch_add(1, Ordering::SeqCst) + 1;
        self.check()?;
        self.wait_hardened(lsn, Some(joins))
    }

    /// Before a group-commit round starts, lets committers join it, for at most
    /// [`GATHER_LIMIT`]: as many as the last round saw (`cohort.active`: those it covered and
    /// those that joined while it ran). Under a closed loop the ones it covered commit again
    /// at once, but they have to be woken and run first; a leader that started its round
    /// without them split the committers into two cohorts that took turns, each round
    /// covering half of them (decision 249). A lone committer never waits: the last round
    /// saw only itself, and it has joined again. Committers that pause between commits (a
    /// client's think time) do not come back within the limit; a wait that no one joined
    /// during halves the next one's limit, down to none, and a round that covers more than
    /// one commit sets it back to [`GATHER_PROBE`] at least, from where each wait that
    /// someone joined during doubles it.
    ///
    /// The leader does not wait to be woken when the cohort is complete: the committer
    /// whose join completes it starts the round itself, as does one that joins after the
    /// deadline. A leader that slept (or yielded) until then needed its processor back
    /// first, and on a saturated machine a busy thread kept it for a time slice (decision
    /// 250). Returns whether the caller runs the round: false when a committer took it.
    fn gather_committers(&self, lsn: u64) -> bool {
        let mut cohort = self.cohort.lock();
        let joins_before = self.round_joins.load(Ordering::SeqCst);
        if joins_before - cohort.joins_at_target >= cohort.active || cohort.limit.is_zero() {
            return true;
        }
        let began = Instant::now();
        let (target, deadline) = (cohort.joins_at_target + cohort.active, began + cohort.limit);
        cohort.waiting_since = Some((began, joins_before));
        drop(cohort);
        self.gathering.publish(target, deadline);
        self.wait_for_cohort(target, lsn, deadline);
        self.gathering.take(target)
    }

    /// The leader's wait for the round it published to be taken, complete or due. It yields
    /// its processor to the committers it waits for: a futex sleep and wake-up each round
    /// cost `bench log` at 8 threads 5–10% of its commits (decision 250). On a saturated
    /// machine a yield can lose the processor to a busy thread for a whole time slice; once
    /// one has lasted longer than [`YIELD_OVERSHOOT`], the next [`SLEEPING_GATHERINGS`]
    /// leaders sleep until their deadline instead (a sleeper's timer takes the processor
    /// back at once), woken early by the end of the round if a committer takes it.
    fn wait_for_cohort(&self, target: u64, lsn: u64, deadline: Instant) {
        if self.gathering.leader_sleeps() {
            if self.round_joins.load(Ordering::SeqCst) < target {
                self.hardened_waiters
                    .wait_until(&self.hardened, lsn, deadline);
            }
            return;
        }
        let mut now = Instant::now();
        while now < deadline
            && self.round_joins.load(Ordering::SeqCst) < target
            && self.gathering.is_published(target)
        {
            thread::yield_now();
            let before = now;
            now = Instant::now();
            if now - before > YIELD_OVERSHOOT {
                self.gathering.leaders_sleep();
            }
        }
    }

    /// Runs the round a committer's join made due (see [`Shared::gather_committers`]), if
    /// the caller is the one that takes it.
    fn take_gathered_round(&self, joins: u64) -> Result<()> {
        if !self.gathering.take_if_due(joins) {
            return Ok(());
        }
        let round = self.run_gathered_round();
        self.end_round();
        round
    }

    /// A group-commit round once its committers are gathered: hardens everything filled and
    /// notes, for the next leader, whom it saw and whether the gathering paid.
    fn run_gathered_round(&self) -> Result<()> {
        let mut cohort = self.cohort.lock();
        if let Some((began, joins_before)) = cohort.waiting_since.take() {
            self.counters.gather_wait(began.elapsed().as_nanos() as u64);
            let someone_joined = self.round_joins.load(Ordering::Acquire) > joins_before;
            cohort.limit = if someone_joined {
                (cohort.limit * 2).clamp(GATHER_PROBE, GATHER_LIMIT)
            } else if cohort.limit / 2 >= GATHER_PROBE {
                cohort.limit / 2
            } else {
                Duration::ZERO
            };
        }
        let since = cohort.joins_at_target;
        cohort.joins_at_target = self.round_joins.load(Ordering::Acquire);
        if cohort.joins_at_target - since > 1 && cohort.limit < GATHER_PROBE {
            // Committers share rounds again: worth finding out whether waiting gathers more.
            cohort.limit = GATHER_PROBE;
        }
        let round = self.harden_round(self.filled.load(Ordering::Acquire));
        cohort.active = self.round_joins.load(Ordering::Acquire) - since;
        round
    }

    /// One hardening round: write `[hardened, target)` to the log file, `fdatasync`, then (PMEM
    /// ring) persist the new hardened LSN before any slot below it can be reused.
    fn harden_round(&self, target: u64) -> Result<()> {
        let from = self.hardened.load(Ordering::Acquire);
        if target <= from {
            return Ok(());
        }
        let Some(file) = &self.file else {
            return Ok(());
        };
        let len = (target - from) as usize;
        let mut state = self.harden.lock();
        if target > state.file_len {
            let grown = target.div_ceil(FILE_GROWTH) * FILE_GROWTH;
            file.set_len(grown).map_err(|e| self.fail_stop(e))?;
            state.file_len = grown;
        }
        // The bytes are handed over at the offset they have within an aligned block of the
        // file, so that whole blocks in the middle are aligned in memory too: the ring's
        // own memory when it is mapped (the device reads the ring), else a copy in scratch.
        let fsync = self.mode == CommitMode::Fsync;
        self.ring
            .write_out(from, len, &mut state.scratch, &mut |at, bytes| {
                if fsync {
                    file.write_at(at, bytes)
                } else {
                    write_around_cache(file.as_ref(), at, bytes)
                }
            })
            .map_err(|e| self.fail_stop(e))?;
        self.counters.disk_write(len);
        file.sync_data().map_err(|e| self.fail_stop(e))?;
        self.counters.flush();
        if self.persistent_ring() {
            persist_start_word(self.ring.region().as_ref(), target)
                .map_err(|e| self.fail_stop(e))?;
        }
        self.hardened.store(target, Ordering::Release);
        self.wake_space_waiters();
        Ok(())
    }

    fn wait_durable(&self, lsn: u64) -> Result<()> {
        self.check()?;
        match self.mode {
            CommitMode::Async => Ok(()),
            CommitMode::Buffer | CommitMode::PmemLog => self.wait_filled(lsn),
            CommitMode::Fsync => self.wait_hardened(lsn, None),
        }
    }

    /// Waits until `lsn` is hardened, leading rounds as needed; `joined`: the caller's join
    /// of the next round (see [`Shared::wait_commit`]), which may make the round being
    /// gathered due.
    fn wait_hardened(&self, lsn: u64, joined: Option<u64>) -> Result<()> {
        if self.hardened.load(Ordering::Acquire) >= lsn {
            // A round that covered the record since it joined: the join still counts
            // towards the cohort being gathered, and may complete it.
            return joined.map_or(Ok(()), |joins| self.take_gathered_round(joins));
        }
        let began = Instant::now();
        let result = self.wait_filled(lsn).and_then(|()| {
            if let Some(joins) = joined {
                self.take_gathered_round(joins)?;
            }
            self.harden_to(lsn, false)
        });
        self.counters.flush_wait(began.elapsed().as_nanos() as u64);
        result
    }

    /// The background writer of `buffer` (whole blocks, or a block older than the age limit)
    /// and `async` (everything, every interval).
    fn run_writer(&self) {
        let mut pending_since: Option<Instant> = None;
        let mut prepared = self.opened_at;
        loop {
            if self.mode == CommitMode::Buffer {
                prepared = self.prepare_ring_ahead(prepared);
            }
            let stopping = self.stopping.load(Ordering::Acquire);
            let hardened = self.hardened.load(Ordering::Acquire);
            let filled = self.filled.load(Ordering::Acquire);
            let round = match self.mode {
                CommitMode::Buffer => {
                    self.buffer_writer_target(hardened, filled, stopping, &mut pending_since)
                }
                _ => (filled > hardened).then_some((filled, false)),
            };
            if let Some((target, whole_blocks)) = round {
                if self.harden_to(target, whole_blocks).is_err() {
                    return; // fail-stop already recorded; committers see it
                }
                if self.mode == CommitMode::Buffer {
                    continue;
                }
            }
            if stopping {
                return;
            }
            thread::park_timeout(match self.mode {
                CommitMode::Buffer => self.harden_age,
                _ => self.async_interval,
            });
        }
    }

    /// The LSN at which the ring has gone round once since the open: past it, every slot has
    /// been written in this process.
    fn first_lap_end(&self) -> u64 {
        self.opened_at + self.ring.capacity()
    }

    /// `pmem-log`'s background thread: it only readies the log's region ahead of the
    /// appends (the region is the log; nothing is hardened), and ends once the region's first
    /// lap is ready or the log closes.
    fn run_preparer(&self) {
        let mut prepared = self.opened_at;
        while prepared < self.first_lap_end() && !self.stopping.load(Ordering::Acquire) {
            prepared = self.prepare_ring_ahead(prepared);
            thread::park_timeout(PREPARER_PARK);
        }
    }

    /// Readies the ring's slots from `prepared` to [`RING_PREPARE_AHEAD`] past the appends,
    /// within the first lap since the open, and returns how far they are ready. An append's
    /// first write to a slot of a PMEM file the process has not touched yet would otherwise
    /// stop to have its page allocated and mapped (on tmpfs: cleared too): for a new 1 GiB
    /// ring, one stop per 4 KiB of the log's first GiB, on the appender's thread, inside a
    /// commit. Past the first lap every slot has been written in this process.
    fn prepare_ring_ahead(&self, prepared: u64) -> u64 {
        let goal =
            (self.reserved.load(Ordering::Relaxed) + RING_PREPARE_AHEAD).min(self.first_lap_end());
        let mut at = prepared;
        while at < goal {
            let step = (goal - at).min(RING_PREPARE_STEP);
            self.ring.prepare(at, step as usize);
            at += step;
        }
        at
    }

    /// What the `buffer` writer should harden now: whole blocks once a batch is pending or
    /// the pending bytes have aged; a partly filled block only when it has aged (or on
    /// shutdown). `None`: sleep.
    fn buffer_writer_target(
        &self,
        hardened: u64,
        filled: u64,
        stopping: bool,
        pending_since: &mut Option<Instant>,
    ) -> Option<(u64, bool)> {
        if filled <= hardened {
            *pending_since = None;
            return None;
        }
        let since = *pending_since.get_or_insert_with(Instant::now);
        let aged = stopping || since.elapsed() >= self.harden_age;
        let block_start = |lsn: u64| lsn / self.block_bytes * self.block_bytes;
        let whole = block_start(filled);
        // Pending full blocks, counted from the start of the block `hardened` is in.
        let batch_ready = whole - block_start(hardened) >= self.harden_batch;
        if whole > hardened && (aged || batch_ready) {
            *pending_since = None;
            return Some((whole, true));
        }
        if aged {
            *pending_since = None;
            return Some((filled, false));
        }
        None
    }

    fn durable_lsn(&self) -> u64 {
        match self.mode {
            CommitMode::Buffer | CommitMode::PmemLog => self.filled.load(Ordering::Acquire),
            CommitMode::Fsync | CommitMode::Async => self.hardened.load(Ordering::Acquire),
        }
    }

    fn release(&self, lsn: u64) -> Result<()> {
        self.check()?;
        if self.mode != CommitMode::PmemLog {
            return self.release_file(lsn);
        }
        let _serial = self.release_lock.lock();
        let current = self.released.load(Ordering::Acquire);
        if lsn <= current {
            return Ok(());
        }
        let filled = self.filled.load(Ordering::Acquire);
        if lsn > filled || !(lsn == filled || self.record_starts_at(lsn)) {
            return Err(LogError::NotARecordBoundary {
                lsn,
                start: current,
                end: filled,
            });
        }
        persist_start_word(self.ring.region().as_ref(), lsn).map_err(|e| self.fail_stop(e))?;
        self.released.store(lsn, Ordering::Release);
        self.wake_space_waiters();
        Ok(())
    }

    /// Discards the log file's head below `lsn` (a record boundary): first the header is
    /// rewritten to start there and synced, so that no later open scans the discarded part,
    /// then the space is given back. Only a prefix already hardened to the file moves the
    /// start (open scans from the file's start), and only in steps of the release step
    /// (`LogConfig::release_step_bytes`): each costs a sync.
    fn release_file(&self, lsn: u64) -> Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let _serial = self.release_lock.lock();
        let current = self.released.load(Ordering::Acquire);
        if lsn > self.hardened.load(Ordering::Acquire) || lsn < current + self.release_step {
            return Ok(());
        }
        let header =
            LogFileHeader::starting_at(self.mode, self.db_id, self.block_bytes as usize, lsn);
        file.write_at(0, &header.encode())
            .and_then(|()| file.sync_data())
            .map_err(|e| self.fail_stop(e))?;
        self.released.store(lsn, Ordering::Release);
        let first = HEADER_BYTES as u64;
        let end = lsn / self.release_step * self.release_step;
        if end > first {
            // Losing the space is not losing data: a failed discard leaves the log correct.
            let _ = file.discard(first, end - first);
        }
        Ok(())
    }

    fn record_starts_at(&self, lsn: u64) -> bool {
        let mut header = [0u8; RECORD_HEADER];
        self.ring.read(lsn, &mut header);
        parse_header(&header, lsn).is_some()
    }
}

/// Starts the log's background thread, `run` (the writer, or `pmem-log`'s preparer), with
/// the configured thread setup; `wake_writer` wakes it.
fn spawn_background(
    shared: &Arc<Shared>,
    name: String,
    run: fn(&Shared),
) -> Result<JoinHandle<()>> {
    let worker = Arc::clone(shared);
    let handle = thread::Builder::new()
        .name(name)
        .spawn(move || {
            if let Some(setup) = &worker.writer_setup {
                (setup.0)();
            }
            run(&worker)
        })
        .map_err(|source| {
            LogError::Media(MediaError::Io {
                op: "spawn log writer",
                path: String::new(),
                source,
            })
        })?;
    let _ = shared.writer.set(handle.thread().clone());
    Ok(handle)
}

impl LogManager {
    pub(crate) fn start(shared: Shared) -> Result<Self> {
        let shared = Arc::new(shared);
        let writer = match shared.mode {
            CommitMode::Buffer | CommitMode::Async => Some(spawn_background(
                &shared,
                format!("log-writer-{}", shared.mode),
                Shared::run_writer,
            )?),
            CommitMode::PmemLog => Some(spawn_background(
                &shared,
                "log-preparer".into(),
                Shared::run_preparer,
            )?),
            CommitMode::Fsync => None,
        };
        Ok(Self {
            shared,
            writer: Mutex::new(writer),
        })
    }

    /// Appends one record without waiting for durability. Returns the LSN just past it, which
    /// [`LogManager::wait_durable`] takes. Records become durable in LSN order.
    pub fn append(&self, payload: &[u8]) -> Result<u64> {
        self.shared.append(payload)
    }

    /// The first half of [`LogManager::append`]: fixes the position of a `payload_len`-byte
    /// record (waiting for room in the ring) without writing it. A caller that must order
    /// its record under a latch reserves under the latch and fills after releasing it
    /// (the engine's commit; `docs/design/log.md`, "Reserve, then fill").
    ///
    /// Every reservation must be filled, by [`LogManager::fill`], or the log stopped: no
    /// record after an unfilled slot becomes durable, and waits for one never end.
    /// Between the two, the caller must not reserve again or wait for anything the log's
    /// progress frees (ring room, a checkpoint): its own hole would block it.
    pub fn reserve(&self, payload_len: usize) -> Result<Reservation<'_>> {
        self.shared.reserve(payload_len)
    }

    /// Writes `payload` into the slot `place` reserved for it (the same length) and
    /// publishes it. Returns the LSN just past the record, as [`LogManager::append`] does.
    pub fn fill(&self, place: Reservation<'_>, payload: &[u8]) -> Result<u64> {
        self.shared.fill(place, payload)
    }

    /// Appends a commit record and returns once it is durable in this log's commit mode
    /// (`async`: at once, not durable).
    pub fn commit(&self, payload: &[u8]) -> Result<u64> {
        let s = &self.shared;
        let result = s
            .append(payload)
            .and_then(|end| s.wait_commit(end).map(|()| end));
        if result.is_ok() {
            s.counters.commit();
        }
        result
    }

    /// For a caller that appends its commit record with [`LogManager::append`] and waits for
    /// it later (a storage engine that must stamp pages in between): the commit's wait,
    /// [`CommitIntent::wait`], counts it and joins `fsync` group commit as
    /// [`LogManager::commit`] does; dropping the intent without waiting withdraws it.
    pub fn intend_commit(&self) -> CommitIntent<'_> {
        CommitIntent { log: self }
    }

    /// `Err(Stopped)` once the log stopped after an I/O failure, also one that struck its
    /// writer thread while no commit was waiting.
    pub fn check(&self) -> Result<()> {
        self.shared.check()
    }

    /// Waits until every record below `lsn` is durable (in `async` mode: returns at once).
    pub fn wait_durable(&self, lsn: u64) -> Result<()> {
        self.shared.wait_durable(lsn)
    }

    /// Like [`LogManager::wait_durable`], but in `async` mode too: hardens the log up to
    /// `lsn` itself instead of leaving it to the background flush. The write-ahead rule needs
    /// this: a data page may reach disk only after the log records that changed it, in every
    /// commit mode, or a crash could expose half of a transaction.
    pub fn force_durable(&self, lsn: u64) -> Result<()> {
        let s = &self.shared;
        if s.mode != CommitMode::Async {
            return s.wait_durable(lsn);
        }
        s.check()?;
        if s.hardened.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        s.wait_filled(lsn).and_then(|()| s.harden_to(lsn, false))
    }

    /// The end of the contiguous prefix of appended records: every record that starts below
    /// it has been completely written into the log (not necessarily made durable). A record
    /// boundary.
    pub fn appended_lsn(&self) -> u64 {
        self.shared.filled.load(Ordering::Acquire)
    }

    /// The end of every record handed out so far, written or not. Records finish out of
    /// order (a later one is parked behind an earlier one still being written, and the
    /// caller of the later one may already show its changes), so a reader that must wait
    /// for whatever it could have seen waits for this, not for [`LogManager::appended_lsn`].
    pub fn reserved_lsn(&self) -> u64 {
        self.shared.reserved.load(Ordering::Acquire)
    }

    /// Everything below this LSN survives a crash the medium survives.
    pub fn durable_lsn(&self) -> u64 {
        self.shared.durable_lsn()
    }

    /// The end of what the log file holds written and synced (`fsync`, `async`, `buffer`;
    /// `pmem-log` has no file). In `buffer` mode the background writer's rounds move it, each
    /// ending with a fence on the PMEM ring's start word; once it reaches
    /// [`LogManager::appended_lsn`], the writer has nothing left to do until the next append.
    pub fn hardened_lsn(&self) -> u64 {
        self.shared.hardened.load(Ordering::Acquire)
    }

    /// Bytes of records that appends can take now without waiting for room (in `pmem-log`,
    /// for a checkpoint to release the region's head). Other appends may take them first.
    pub fn room_bytes(&self) -> u64 {
        let s = &self.shared;
        (s.floor() + s.window).saturating_sub(s.reserved.load(Ordering::Acquire))
    }

    /// The prefix of the log below `lsn` (a record boundary) is no longer needed. `pmem-log`
    /// reuses its space; the file-backed modes move their file's start there (once it is
    /// hardened) and punch out the file's head, in steps of 64 MiB.
    pub fn release(&self, lsn: u64) -> Result<()> {
        self.shared.release(lsn)
    }

    /// The database's identity, chosen at random when the log was created.
    pub fn db_id(&self) -> u64 {
        self.shared.db_id
    }

    pub fn mode(&self) -> CommitMode {
        self.shared.mode
    }

    /// The largest record an append accepts (payload and header).
    pub fn max_record_bytes(&self) -> u64 {
        self.shared.max_record
    }

    /// The longest payload an append accepts: its record, header and padding, fits
    /// [`LogManager::max_record_bytes`].
    pub fn max_payload_bytes(&self) -> usize {
        let aligned = self.shared.max_record / RECORD_ALIGN * RECORD_ALIGN;
        (aligned as usize).saturating_sub(RECORD_HEADER)
    }

    /// Bytes of the ring (in `buffer` mode the PMEM log buffer, as its file was made).
    pub fn ring_bytes(&self) -> u64 {
        self.shared.ring.capacity()
    }

    /// The medium of the ring for the PMEM modes; `None` when the ring is in DRAM.
    pub fn pmem_medium(&self) -> Option<Medium> {
        self.shared
            .persistent_ring()
            .then(|| self.shared.ring.medium())
    }

    /// The flush instruction used on the PMEM ring.
    pub fn pmem_flush_kind(&self) -> Option<tailstore_media::FlushKind> {
        self.shared
            .persistent_ring()
            .then(|| self.shared.ring.region().flush_kind())
    }

    pub fn counters(&self) -> LogCounters {
        let filled = self.shared.filled.load(Ordering::Acquire);
        self.shared
            .counters
            .snapshot(filled - self.shared.opened_at)
    }

    /// The records of the log from its start up to the durable end. Meant for replay after
    /// opening, before new appends (concurrent appends may end the walk early).
    pub fn records(&self) -> Records<'_> {
        self.records_from(0)
    }

    /// [`LogManager::records`], starting at the record boundary `from` (or at the log's
    /// start, if that is later): the redo pass of a checkpointed database starts here.
    pub fn records_from(&self, from: u64) -> Records<'_> {
        let s = &self.shared;
        let limit = s.durable_lsn();
        let start = s.released.load(Ordering::Acquire).max(from);
        Records::new(
            Scanner::new(self.source(FileReader::new), s.salt, start),
            limit,
        )
    }

    /// The record at `lsn`, read into `payload` (only its own bytes, unlike a walk), while
    /// appends go on: its end, or `None` if no durable record that verifies starts there
    /// (released, past the durable end, not a record boundary, or damaged). Redo at a page's
    /// first load reads the records it needs so, once recovery's walk has verified them.
    pub fn read_record(&self, lsn: u64, payload: &mut Vec<u8>) -> Result<Option<u64>> {
        let s = &self.shared;
        if lsn < s.released.load(Ordering::Acquire) || lsn >= s.durable_lsn() {
            return Ok(None);
        }
        let mut scanner = Scanner::new(self.source(FileReader::exact), s.salt, lsn);
        if scanner.next_record()?.is_none() || scanner.position() > s.durable_lsn() {
            return Ok(None);
        }
        payload.clear();
        payload.extend_from_slice(scanner.payload());
        Ok(Some(scanner.position()))
    }

    /// Where the log's bytes are read from in this mode; `reader` reads the file's part.
    fn source<'a>(&'a self, reader: fn(&'a dyn File) -> FileReader<'a>) -> Source<'a> {
        let s = &self.shared;
        match (&s.file, s.mode) {
            (_, CommitMode::PmemLog) | (None, _) => Source::Ring {
                ring: &s.ring,
                floor: s.released.load(Ordering::Acquire),
            },
            (Some(file), CommitMode::Buffer) => Source::Stitched {
                file: reader(file.as_ref()),
                ring: &s.ring,
                boundary: s.hardened.load(Ordering::Acquire),
                lap: Lap {
                    floor: &s.hardened,
                    window: s.window,
                },
            },
            (Some(file), _) => Source::File(reader(file.as_ref())),
        }
    }

    /// Stops the background writer and hardens everything appended (a clean shutdown).
    /// Appends racing with `close` are the caller's bug.
    pub fn close(&self) -> Result<()> {
        let s = &self.shared;
        s.stopping.store(true, Ordering::Release);
        s.wake_writer();
        if let Some(handle) = self.writer.lock().take() {
            let _ = handle.join();
        }
        let hardened = match s.file {
            Some(_) => s.harden_to(s.filled.load(Ordering::Acquire), false),
            None => Ok(()),
        };
        // Handles may keep the ring's region mapped past this; its file's lock goes now, so
        // that the database can be opened again (`Region::unlock`).
        let unlocked = s.ring.region().unlock();
        hardened?;
        s.check()?;
        Ok(unlocked?)
    }
}

/// A record's slot in the log, handed out by [`LogManager::reserve`] and written by
/// [`LogManager::fill`].
/// Dropped unfilled (an error between the two calls), it stops the log: the slot would
/// be a hole that no record after it could become durable past, and every wait for one
/// would hang.
#[must_use = "an unfilled reservation stops the log"]
pub struct Reservation<'a> {
    log: &'a Shared,
    start: u64,
    end: u64,
    payload_len: usize,
    filled: bool,
}

impl Reservation<'_> {
    /// The LSN just past the record: what [`LogManager::fill`] will return.
    pub fn end(&self) -> u64 {
        self.end
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.filled {
            let _ = self.log.stop(format!(
                "the log record reserved at LSN {} was never written",
                self.start
            ));
        }
    }
}

/// A commit announced with [`LogManager::intend_commit`].
pub struct CommitIntent<'a> {
    log: &'a LogManager,
}

impl CommitIntent<'_> {
    /// Waits until the commit record ending at `lsn` is durable in this log's commit mode and
    /// counts the commit.
    pub fn wait(self, lsn: u64) -> Result<()> {
        let s = &self.log.shared;
        let result = s.wait_commit(lsn);
        if result.is_ok() {
            s.counters.commit();
        }
        result
    }
}

impl Drop for LogManager {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A published round is taken once its cohort is complete or its deadline has passed,
    /// and by one party only: whoever takes it runs and ends it.
    #[test]
    fn a_gathered_round_is_taken_once_when_due() {
        let gathering = Gathering::new();
        assert!(!gathering.take_if_due(u64::MAX - 1), "nothing published");
        let later = Instant::now() + Duration::from_secs(60);
        gathering.publish(10, later);
        assert!(
            !gathering.take_if_due(9),
            "the cohort is incomplete and time remains"
        );
        assert!(gathering.is_published(10));
        assert!(
            gathering.take_if_due(10),
            "the join that completes the cohort"
        );
        assert!(!gathering.take_if_due(11), "already taken");
        assert!(!gathering.take(10), "the leader finds it taken");

        gathering.publish(20, Instant::now());
        assert!(gathering.take_if_due(12), "a join after the deadline");
        assert!(!gathering.is_published(20));

        gathering.publish(30, later);
        assert!(gathering.take(30), "the leader whose wait ended");
        assert!(!gathering.take_if_due(30));
    }

    /// After a yield that overshot, the next leaders sleep, then yielding is tried again.
    #[test]
    fn leaders_sleep_for_a_while_after_an_overshot_yield() {
        let gathering = Gathering::new();
        assert!(!gathering.leader_sleeps());
        gathering.leaders_sleep();
        let sleeping = (0..2 * SLEEPING_GATHERINGS)
            .filter(|_| gathering.leader_sleeps())
            .count();
        assert_eq!(sleeping, SLEEPING_GATHERINGS as usize);
    }
}
