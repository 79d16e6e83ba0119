//! Opening a log: create it, or validate what is on the media, find the longest valid prefix,
//! and repair the media so that nothing beyond that prefix can ever be mistaken for a record.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tailstore_media::{File, MediaError, OpenMode, Region, Storage};

use crate::config::{CommitMode, LogConfig};
use crate::error::{LogError, Result};
use crate::format::{
    persist_start_word, read_start_word, LogFileHeader, PmemHeader, HEADER_BYTES, LOG_START_LSN,
};
use crate::manager::{LogManager, Shared, Start};
use crate::record::salt;
use crate::ring::Ring;
use crate::scan::{FileReader, Lap, Records, Scanner, Source};

/// Whether `config` plants an open that relies on what a crashed process left without
/// making it durable first ([`make_found_durable`], [`Scanner::persisting`]).
fn trusts_the_crash(config: &LogConfig) -> bool {
    crate::plant::planted(&config.plants, crate::Plant::RecoveryTrustsTheCrash)
}

/// What opening the log found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// Whether the log was created by this open.
    pub created: bool,
    /// First LSN of the live log and the end of its valid prefix.
    pub start_lsn: u64,
    pub end_lsn: u64,
    /// Records in the valid prefix.
    pub records: u64,
    /// Bytes of the valid prefix that were still only in the PMEM ring.
    pub pmem_bytes: u64,
    pub elapsed: Duration,
}

impl Recovery {
    pub fn bytes(&self) -> u64 {
        self.end_lsn - self.start_lsn
    }
}

/// The pieces found (or made) on the media before scanning.
struct Layout {
    db_id: u64,
    block_bytes: usize,
    file: Option<Arc<dyn File>>,
    file_start: u64,
    pmem: Option<Arc<dyn Region>>,
    pmem_name: String,
    ring_bytes: usize,
}

impl LogManager {
    /// Opens the log described by `config`, creating it if neither its file nor its PMEM region
    /// exists, and recovers the longest valid prefix of what was there: [`LogReplay`] walked
    /// from the log's first record.
    pub fn open(storage: Arc<dyn Storage>, config: &LogConfig) -> Result<(Self, Recovery)> {
        let replay = LogReplay::open(storage, config)?;
        let mut records = replay.records_from(replay.start_lsn())?;
        while let Some(record) = records.next_in_place() {
            record?;
        }
        let walked = records.walked().ok_or_else(|| {
            corrupt(
                "log",
                "the walk over the log ended before its valid prefix did",
            )
        })?;
        drop(records);
        replay.finish(walked)
    }
}

/// A log found (or created) on the media whose valid prefix is not known yet.
///
/// A restart reads the log once: the database's redo walks the records from its checkpoint
/// with [`LogReplay::records_from`], and the end of that walk, where the first record does
/// not verify, is the end of the valid prefix, which [`LogReplay::finish`] repairs the media
/// around before appends continue there. A separate scan for the end first read and checksummed
/// every byte that redo then read again (130 ms, before anything else could start, after a
/// 4 KiB-SET load; decision 76).
///
/// Where the walk may start: at any record boundary at or below the `buffer` mode's hardened
/// LSN, because the walk must still cross that LSN (a valid prefix ending below it is
/// corrupt, [`LogReplay::finish`]); elsewhere at the log's first record, as a whole scan did,
/// with the records before the requested start verified but not yielded.
pub struct LogReplay {
    config: LogConfig,
    layout: Layout,
    ring: Ring,
    pmem_start: Option<u64>,
    /// `buffer`: the hardened LSN, as the floor of the ring's last lap ([`Lap`]).
    lap_floor: AtomicU64,
    salt: u32,
    start_lsn: u64,
    created: bool,
    began: Instant,
}

/// A walk that reached the end of the valid prefix ([`Records::walked`]): what
/// [`LogReplay::finish`] needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walked {
    pub(crate) end: u64,
    pub(crate) records: u64,
    pub(crate) reached_from: bool,
}

impl Walked {
    /// The end of the valid prefix.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Records the walk verified, those before its requested start included.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Whether the LSN the walk was asked to start from is a record boundary of the valid
    /// prefix (where a record starts, or the prefix's end).
    pub fn reached_from(&self) -> bool {
        self.reached_from
    }
}

impl LogReplay {
    /// Reads and checks the headers of the log described by `config`, creating the log if
    /// neither its file nor its PMEM region exists. Nothing is appended before
    /// [`LogReplay::finish`].
    pub fn open(storage: Arc<dyn Storage>, config: &LogConfig) -> Result<LogReplay> {
        let began = Instant::now();
        config.validate().map_err(LogError::Config)?;
        let (layout, created) = match probe(storage.as_ref(), config)? {
            Some(layout) => (layout, false),
            None => (create(storage.as_ref(), config)?, true),
        };
        let ring = match &layout.pmem {
            Some(region) => Ring::new(region.clone(), HEADER_BYTES, layout.ring_bytes),
            None => Ring::new(
                storage.volatile_region(layout.ring_bytes)?,
                0,
                layout.ring_bytes,
            ),
        };
        if !created && !trusts_the_crash(config) {
            make_found_durable(storage.as_ref(), config, &layout)?;
        }
        let pmem_start = pmem_start(&layout)?;
        let start_lsn = match (config.mode, pmem_start) {
            (CommitMode::PmemLog, Some(start)) => start,
            _ => layout.file_start,
        };
        let replay = LogReplay {
            config: config.clone(),
            salt: salt(layout.db_id),
            layout,
            ring,
            pmem_start,
            lap_floor: AtomicU64::new(pmem_start.unwrap_or(0)),
            start_lsn,
            created,
            began,
        };
        replay.source()?; // refuses a layout it cannot read before anyone walks it
        Ok(replay)
    }

    /// The database's identity, chosen at random when the log was created.
    pub fn db_id(&self) -> u64 {
        self.layout.db_id
    }

    /// The first LSN of the live log.
    pub fn start_lsn(&self) -> u64 {
        self.start_lsn
    }

    /// The records of the valid prefix from `from` (a record boundary) to its end; once the
    /// walk has returned `None`, [`Records::walked`] gives what [`LogReplay::finish`] takes.
    /// The walk itself may start earlier (see [`LogReplay`]). Each record is durable by the
    /// time it is returned (the file was synced at open, ring records are flushed as they
    /// are read): the caller may write pages that carry it at once.
    pub fn records_from(&self, from: u64) -> Result<Records<'_>> {
        let buffer_hardened = match self.config.mode {
            CommitMode::Buffer => self.pmem_start,
            _ => None,
        };
        let walk_from = match buffer_hardened {
            Some(hardened) if (self.start_lsn..=hardened).contains(&from) => from,
            _ => self.start_lsn,
        };
        let scanner = Scanner::new(self.source()?, self.salt, walk_from);
        let scanner = if trusts_the_crash(&self.config) {
            scanner
        } else {
            scanner.persisting()
        };
        Ok(Records::walk(scanner, from))
    }

    /// Repairs the media around the valid prefix that `walked` found (a walk of this log)
    /// and starts the log manager, which appends from its end.
    pub fn finish(self, walked: Walked) -> Result<(LogManager, Recovery)> {
        let mut recovery = Recovery {
            created: self.created,
            start_lsn: self.start_lsn,
            end_lsn: walked.end,
            records: walked.records,
            pmem_bytes: 0,
            elapsed: Duration::ZERO,
        };
        let mode = self.config.mode;
        let window = self.config.append_window(self.ring.capacity());
        repair(
            mode,
            &self.layout,
            &self.ring,
            window,
            walked.end,
            self.pmem_start,
            &mut recovery,
        )?;
        let start = Start {
            db_id: self.layout.db_id,
            salt: self.salt,
            block_bytes: self.layout.block_bytes as u64,
            end: walked.end,
            released: self.start_lsn,
        };
        let shared = Shared::new(&self.config, self.ring, self.layout.file, start);
        let manager = LogManager::start(shared)?;
        recovery.elapsed = self.began.elapsed();
        Ok((manager, recovery))
    }

    /// The byte stream of the log, as its mode lays it out.
    fn source(&self) -> Result<Source<'_>> {
        let layout = &self.layout;
        match (self.config.mode, &layout.file, self.pmem_start) {
            (CommitMode::PmemLog, _, Some(start)) => Ok(Source::Ring {
                ring: &self.ring,
                floor: start,
            }),
            (CommitMode::Buffer, Some(file), Some(hardened)) => {
                let file_end = file.len()?;
                if file_end < hardened {
                    return Err(LogError::LogFileTruncated {
                        path: file.path().to_string(),
                        file_end,
                        hardened,
                    });
                }
                Ok(Source::Stitched {
                    file: FileReader::new(file.as_ref()),
                    ring: &self.ring,
                    boundary: hardened,
                    lap: Lap {
                        floor: &self.lap_floor,
                        window: self.config.append_window(self.ring.capacity()),
                    },
                })
            }
            (_, Some(file), _) => Ok(Source::File(FileReader::new(file.as_ref()))),
            _ => Err(corrupt(
                "log",
                "neither a log file nor a PMEM buffer to recover from",
            )),
        }
    }
}

/// Makes what a crashed process left, and this open is about to rely on, durable: the log
/// file (its header, and in `fsync` and `async` the records of the valid prefix: a group
/// commit written and not yet synced, which redo is about to apply and write the pages they
/// change), and the PMEM region's header with its start word (the creation's header stored
/// and not flushed, which a power cut would turn into "header missing"; a release or a
/// hardening stored and not flushed: recovery reads the new start, and `pmem-log`'s repair
/// then zeroes the slots of the records below it, which the old one, back after a power cut,
/// would point to). The ring's records are made durable as they are read
/// ([`Scanner::persisting`]). Their names too: a process that crashed while creating the log
/// may have left a name its directory's sync had not yet made durable, which a power cut
/// would take away under every commit made since. Cheap after a power cut: nothing is left
/// unsynced then.
fn make_found_durable(storage: &dyn Storage, config: &LogConfig, layout: &Layout) -> Result<()> {
    if let Some(region) = &layout.pmem {
        region.persist(0, HEADER_BYTES)?;
        if let Some(path) = config.pmem_path.as_deref() {
            storage.sync_name(path)?;
        }
    }
    if let Some(file) = &layout.file {
        file.sync_data()?;
        storage.sync_name(&config.log_file())?;
    }
    Ok(())
}

/// The PMEM region's start word: the hardened LSN (`buffer`) or the ring's first LSN
/// (`pmem-log`).
fn pmem_start(layout: &Layout) -> Result<Option<u64>> {
    let Some(region) = &layout.pmem else {
        return Ok(None);
    };
    let (word, start) = read_start_word(region.as_ref());
    start.map(Some).ok_or_else(|| {
        corrupt(
            &layout.pmem_name,
            format!("the start LSN word ({word:#018x}) is damaged; refusing to guess where the log starts"),
        )
    })
}

fn corrupt(path: &str, detail: impl Into<String>) -> LogError {
    LogError::Corrupt {
        path: path.to_string(),
        detail: detail.into(),
    }
}

/// Reads the log file's header. `None` for a file whose creation never finished: creation
/// writes the header region (zero-padded) before any record, so such a file is no longer than
/// the header region and its header is absent or all zero. A longer file without a header is
/// corrupt, never silently re-created.
fn read_log_header(file: &dyn File) -> Result<Option<LogFileHeader>> {
    let mut bytes = [0u8; 48];
    let complete = file.read_exact_at(0, &mut bytes)?;
    let unfinished = file.len()? <= HEADER_BYTES as u64 && bytes.iter().all(|b| *b == 0);
    if unfinished {
        return Ok(None);
    }
    if !complete {
        return Err(corrupt(file.path(), "log file is shorter than its header"));
    }
    if bytes.iter().all(|b| *b == 0) {
        return Err(corrupt(
            file.path(),
            "log file header is zeroed, but the file holds data",
        ));
    }
    LogFileHeader::decode(&bytes)
        .map(Some)
        .map_err(|problem| corrupt(file.path(), problem.to_string()))
}

fn read_pmem_header(region: &dyn Region, path: &str) -> Result<Option<PmemHeader>> {
    if region.len() < HEADER_BYTES {
        return Err(LogError::Media(MediaError::TooSmall {
            path: path.to_string(),
            actual: region.len() as u64,
            needed: HEADER_BYTES as u64,
        }));
    }
    let mut bytes = [0u8; 56];
    region.read(0, &mut bytes);
    if bytes[..8].iter().all(|b| *b == 0) {
        // Creation writes the magic last, before any record: a region without one is either
        // an unfinished creation (ring still all zero) or damaged.
        return if ring_area_is_zero(region) {
            Ok(None)
        } else {
            Err(corrupt(
                path,
                "PMEM header is missing (zeroed?), but the ring holds data",
            ))
        };
    }
    let header =
        PmemHeader::decode(&bytes).map_err(|problem| corrupt(path, problem.to_string()))?;
    if (region.len() as u64) < header.region_bytes() {
        return Err(LogError::Media(MediaError::TooSmall {
            path: path.to_string(),
            actual: region.len() as u64,
            needed: header.region_bytes(),
        }));
    }
    Ok(Some(header))
}

/// Bytes of the ring read at a time by recovery ([`copy_ring_to_file`], [`ring_area_is_zero`]).
const RING_CHUNK: usize = 1 << 20;

/// Writes the ring's `[from, to)` to the log file at the same offsets, through one small
/// buffer: a buffer for the whole unhardened tail (up to the ring's size) was fresh memory,
/// and faulting it in was half of this repair's time on the restart's critical path
/// (docs/benchmarks.md, "Where a restart's time goes: fresh memory").
fn copy_ring_to_file(ring: &Ring, file: &dyn File, from: u64, to: u64) -> Result<()> {
    copy_to_file(file, from, to, &mut |at, chunk| {
        ring.read(at, chunk);
        Ok(())
    })
}

/// Writes the log file's `[from, to)` again with the bytes it reads back.
fn rewrite_file_range(file: &dyn File, from: u64, to: u64) -> Result<()> {
    copy_to_file(file, from, to, &mut |at, chunk| {
        if file.read_exact_at(at, chunk)? {
            Ok(())
        } else {
            Err(corrupt(
                file.path(),
                format!(
                    "the log file ends before LSN {}, which recovery read",
                    at + chunk.len() as u64
                ),
            ))
        }
    })
}

/// Writes `[from, to)` of the log to the file at the same offsets, chunk by chunk as `read`
/// fills them.
fn copy_to_file(
    file: &dyn File,
    from: u64,
    to: u64,
    read: &mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<()> {
    let mut chunk = vec![0u8; RING_CHUNK.min(to.saturating_sub(from) as usize)];
    let mut at = from;
    while at < to {
        let n = chunk.len().min((to - at) as usize);
        read(at, &mut chunk[..n])?;
        file.write_at(at, &chunk[..n])?;
        at += n as u64;
    }
    Ok(())
}

fn ring_area_is_zero(region: &dyn Region) -> bool {
    let mut chunk = vec![0u8; RING_CHUNK];
    let mut at = HEADER_BYTES;
    while at < region.len() {
        let n = chunk.len().min(region.len() - at);
        region.read(at, &mut chunk[..n]);
        if chunk[..n].iter().any(|b| *b != 0) {
            return false;
        }
        at += n;
    }
    true
}

fn check_mode(path: &str, found: CommitMode, requested: CommitMode) -> Result<()> {
    if found != requested {
        return Err(LogError::ModeMismatch {
            path: path.to_string(),
            found: found.to_string(),
            requested: requested.to_string(),
        });
    }
    Ok(())
}

fn check_log_dir(storage: &dyn Storage, dir: &Path) -> Result<()> {
    if !storage.is_dir(dir) {
        return Err(LogError::Media(MediaError::MissingDirectory(
            dir.display().to_string(),
        )));
    }
    Ok(())
}

/// Finds an existing log; `None` when there is none (nothing, or a creation that never
/// finished) and a new one should be made.
fn probe(storage: &dyn Storage, config: &LogConfig) -> Result<Option<Layout>> {
    let mode = config.mode;
    if mode.uses_log_file() {
        check_log_dir(storage, &config.log_dir)?;
    }
    let file_name = || config.log_file().display().to_string();
    let pmem_name = || pmem_display(config);
    // Both files are read whatever the mode, so that a log of another mode is refused rather
    // than silently ignored next to a new one.
    let (file, file_header) = read_existing_log_file(storage, config)?;
    let (pmem, pmem_header) = read_existing_pmem(storage, config)?;
    if let Some(h) = &file_header {
        check_mode(&file_name(), h.commit_mode(), mode)?;
    }
    if let Some(p) = &pmem_header {
        check_mode(&pmem_name(), p.commit_mode(), mode)?;
    }
    match (mode, file_header, pmem_header) {
        (CommitMode::Fsync | CommitMode::Async, None, _) => Ok(None),
        (CommitMode::PmemLog, _, None) => Ok(None),
        (CommitMode::Buffer, None, None) => Ok(None),
        (CommitMode::Buffer, None, Some(p)) => {
            // A crash between initialising the PMEM region and writing the log file's header
            // leaves an empty ring behind; anything else means the log file was lost.
            match pmem.as_ref() {
                Some(region) if ring_is_empty(region, &p) => Ok(None),
                _ => Err(LogError::MissingCompanion {
                    present: pmem_name(),
                    missing: file_name(),
                    why: "the PMEM buffer holds log records whose earlier part was in the log file",
                }),
            }
        }
        (CommitMode::Buffer, Some(_), None) => Err(LogError::MissingCompanion {
            present: file_name(),
            missing: pmem_name(),
            why: "the PMEM buffer may hold acknowledged commits that are not in the log file yet \
                  (emulated PMEM in /dev/shm does not survive a reboot); restore it, or move the \
                  log away to start a new database",
        }),
        (_, Some(h), p) => {
            let mut layout = Layout {
                db_id: h.db_id,
                block_bytes: h.block_bytes as usize,
                file,
                file_start: h.start_lsn,
                pmem: None,
                pmem_name: pmem_name(),
                ring_bytes: config.ring_bytes,
            };
            if let Some(p) = p {
                if p.db_id != h.db_id {
                    return Err(LogError::ForeignDatabase {
                        path: pmem_name(),
                        found: p.db_id,
                        expected: h.db_id,
                    });
                }
                layout.pmem = pmem;
                layout.ring_bytes = p.ring_bytes as usize;
            }
            Ok(Some(layout))
        }
        (CommitMode::PmemLog, None, Some(p)) => Ok(Some(Layout {
            db_id: p.db_id,
            block_bytes: p.block_bytes as usize,
            file: None,
            file_start: LOG_START_LSN,
            pmem,
            pmem_name: pmem_name(),
            ring_bytes: p.ring_bytes as usize,
        })),
    }
}

fn pmem_display(config: &LogConfig) -> String {
    config
        .pmem_path
        .as_deref()
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

type Found<T, H> = (Option<T>, Option<H>);

fn read_existing_log_file(
    storage: &dyn Storage,
    config: &LogConfig,
) -> Result<Found<Arc<dyn File>, LogFileHeader>> {
    let path = config.log_file();
    if !storage.is_dir(&config.log_dir) || !storage.exists(&path) {
        return Ok((None, None));
    }
    let file = storage.open_file(&path, OpenMode::Existing)?;
    let header = read_log_header(file.as_ref())?;
    Ok((Some(file), header))
}

fn read_existing_pmem(
    storage: &dyn Storage,
    config: &LogConfig,
) -> Result<Found<Arc<dyn Region>, PmemHeader>> {
    let Some(path) = config.pmem_path.as_deref().filter(|p| storage.exists(p)) else {
        return Ok((None, None));
    };
    let region = match storage.map_region(path, 0, OpenMode::Existing) {
        // Creating a region makes the file, then sizes it: a crash in between leaves it empty.
        Err(MediaError::TooSmall { actual: 0, .. }) => return Ok((None, None)),
        other => other?,
    };
    let header = read_pmem_header(region.as_ref(), &path.display().to_string())?;
    Ok((Some(region), header))
}

fn ring_is_empty(region: &Arc<dyn Region>, header: &PmemHeader) -> bool {
    let (_, Some(start)) = read_start_word(region.as_ref()) else {
        return false;
    };
    let ring = Ring::new(region.clone(), HEADER_BYTES, header.ring_bytes as usize);
    let mut scanner = Scanner::new(
        Source::Ring {
            ring: &ring,
            floor: start,
        },
        salt(header.db_id),
        start,
    );
    start == LOG_START_LSN && matches!(scanner.next_record(), Ok(None))
}

/// Creates a new log: the PMEM region first (magic last), then the log file's header, made
/// durable before the log is used.
fn create(storage: &dyn Storage, config: &LogConfig) -> Result<Layout> {
    let db_id: u64 = rand::random();
    let ring_bytes = config.ring_capacity();
    let mut pmem = None;
    if let Some(path) = config
        .pmem_path
        .as_deref()
        .filter(|_| config.mode.uses_pmem())
    {
        let region =
            storage.map_region(path, HEADER_BYTES + ring_bytes, OpenMode::CreateIfMissing)?;
        let header = PmemHeader::new(config.mode, db_id, ring_bytes, config.block_bytes).encode();
        // Re-creation over a header that survived an unfinished creation: clear the magic
        // first, so a crash while the fields are rewritten leaves "no header", never a mix.
        region.write(0, &[0u8; 8]);
        region.persist(0, 8)?;
        region.write(8, &header[8..]);
        persist_start_word(region.as_ref(), LOG_START_LSN)?;
        region.persist(0, HEADER_BYTES)?;
        region.write(0, &header[..8]);
        region.persist(0, 8)?;
        storage.sync_name(path)?;
        pmem = Some(region);
    }
    let mut file = None;
    if config.mode.uses_log_file() {
        let f = storage.open_file(&config.log_file(), OpenMode::CreateIfMissing)?;
        let mut header = vec![0u8; HEADER_BYTES];
        header[..48]
            .copy_from_slice(&LogFileHeader::new(config.mode, db_id, config.block_bytes).encode());
        f.set_len(0)?;
        f.write_at(0, &header)?;
        f.sync_data()?;
        storage.sync_dir(&config.log_dir)?;
        file = Some(f);
    }
    Ok(Layout {
        db_id,
        block_bytes: config.block_bytes,
        file,
        file_start: LOG_START_LSN,
        pmem,
        pmem_name: pmem_display(config),
        ring_bytes,
    })
}

/// Makes the media hold exactly the valid prefix: bytes beyond it (a torn record, or complete
/// records that followed a hole and were never acknowledged) must not reappear when new records
/// of other sizes are written at the same positions. Each step is idempotent, and no new record
/// is appended before all are done, so a crash during repair is recovered the same way.
fn repair(
    mode: CommitMode,
    layout: &Layout,
    ring: &Ring,
    window: u64,
    end: u64,
    pmem_start: Option<u64>,
    recovery: &mut Recovery,
) -> Result<()> {
    let capacity = ring.capacity();
    match (mode, &layout.file, pmem_start) {
        (CommitMode::Buffer, Some(file), Some(hardened)) => {
            if end < hardened {
                return Err(corrupt(
                    file.path(),
                    format!("record at LSN {end} is damaged, but the log was hardened to {hardened}: the log file is corrupt"),
                ));
            }
            recovery.pmem_bytes = end - hardened;
            copy_ring_to_file(ring, file.as_ref(), hardened, end)?;
            file.sync_data()?;
            file.set_len(end)?;
            let region = ring.region();
            persist_start_word(region.as_ref(), end)?;
            // The crashed process wrote no further than the window past the hardened LSN:
            // records it left beyond the valid prefix lie in these slots, and the rest of the
            // ring holds records below `end` (the last lap, which the next restart may read).
            let stale = (hardened + window).saturating_sub(end);
            ring.zero_persistent(end, stale as usize)?;
        }
        (CommitMode::PmemLog, _, Some(start)) => {
            recovery.pmem_bytes = end - start;
            let stale = (start + capacity - end) as usize;
            ring.zero_persistent(end, stale)?;
        }
        (_, Some(file), _) => {
            // A failed `fdatasync` of the crashed process may have lost the write-back of its
            // last round, which the page cache still reads back, and which no sync from this
            // process would write (Linux marks such pages clean). Redo is about to rely on
            // those records and new ones to follow them, so they are written again. A round
            // writes at most the append window past the durable end.
            let from = end.saturating_sub(window).max(recovery.start_lsn);
            rewrite_file_range(file.as_ref(), from, end)?;
            file.sync_data()?;
            file.set_len(end)?;
        }
        _ => {}
    }
    Ok(())
}
