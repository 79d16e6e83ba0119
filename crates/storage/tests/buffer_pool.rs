//! Buffer pool: eviction, the write-ahead hook, corruption, concurrency, pinning.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use tailstore_media::sim::SimStorage;
use tailstore_media::{File, OpenMode, Storage};
use tailstore_storage::{BufferPool, Lsn, PageId, StorageError, WriteAheadHook, PAGE_SIZE};

const DATA: &str = "/db/data";

fn data_file(storage: &SimStorage) -> Arc<dyn File> {
    storage
        .open_file(Path::new(DATA), OpenMode::CreateIfMissing)
        .expect("open data file")
}

fn no_hook() -> WriteAheadHook {
    Box::new(|_| Ok(()))
}

fn pool(storage: &SimStorage, capacity: usize) -> BufferPool {
    BufferPool::new(data_file(storage), capacity, no_hook()).expect("pool")
}

/// Fills the payload of a page with a pattern derived from `seed`.
fn pattern(seed: u64) -> Vec<u8> {
    (0..64).map(|i| (seed.wrapping_mul(31) + i) as u8).collect()
}

fn allocate_with_pattern(pool: &BufferPool, count: u64) -> Vec<PageId> {
    (0..count)
        .map(|i| {
            let (id, mut page) = pool.allocate().expect("allocate");
            page.payload_mut()[..64].copy_from_slice(&pattern(id.0));
            page.set_lsn(1000 + i);
            id
        })
        .collect()
}

#[test]
fn pages_read_back_after_eviction_from_a_pool_8x_smaller() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 8);
    let ids = allocate_with_pattern(&pool, 64);
    assert!(pool.stats().evictions >= 56, "{:?}", pool.stats());
    // Scattered order, twice, so that pages go out and come back repeatedly.
    for round in 0..2u64 {
        for k in 0..64u64 {
            let id = ids[((k * 37 + round * 11) % 64) as usize];
            let page = pool.read(id).expect("read");
            assert_eq!(page.page_id(), id);
            assert_eq!(&page.payload()[..64], &pattern(id.0)[..]);
        }
    }
    // Modify through write guards, then read back through a fresh pool after flush_all.
    for &id in &ids {
        let mut page = pool.write(id).expect("write");
        page.payload_mut()[100] = id.0 as u8 ^ 0x5a;
    }
    pool.flush_all().expect("flush");
    let stats = pool.stats();
    assert!(stats.pages_read > 0 && stats.pages_written >= 64 && stats.misses > 64);
    let fresh = BufferPool::new(data_file(&storage), 8, no_hook()).expect("pool");
    for &id in &ids {
        let page = fresh.read(id).expect("read");
        assert_eq!(page.payload()[100], id.0 as u8 ^ 0x5a);
        assert_eq!(&page.payload()[..64], &pattern(id.0)[..]);
    }
    assert_eq!(
        storage.file_bytes(DATA).expect("file").len(),
        64 * PAGE_SIZE
    );
}

/// Memory made ready for frames that have never held a page goes to the next frames that
/// get one, never more of it than such frames remain, and the pages in it keep what they
/// were given.
#[test]
fn fresh_frames_take_the_memory_made_ready_for_them() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 40);
    let fresh = |pool: &BufferPool| {
        let stats = pool.stats();
        (stats.frames_without_memory, stats.fresh_pages_ready)
    };
    assert_eq!(fresh(&pool), (40, 0));
    pool.prepare_fresh_frames();
    assert_eq!(
        fresh(&pool),
        (40, 40),
        "as many ready as frames need, no more"
    );
    let mut ids = allocate_with_pattern(&pool, 30);
    assert_eq!(fresh(&pool), (10, 10), "the new pages took ready memory");
    pool.prepare_fresh_frames();
    assert_eq!(fresh(&pool), (10, 10), "enough ready for the frames left");
    ids.extend(allocate_with_pattern(&pool, 10));
    pool.prepare_fresh_frames();
    assert_eq!(fresh(&pool), (0, 0));
    for id in ids {
        assert_eq!(
            &pool.read(id).expect("read").payload()[..64],
            &pattern(id.0)[..]
        );
    }
}

#[test]
fn write_ahead_hook_runs_with_the_page_lsn_before_every_write() {
    let storage = SimStorage::new();
    let seen: Arc<Mutex<Vec<Lsn>>> = Arc::default();
    let hook: WriteAheadHook = {
        let seen = Arc::clone(&seen);
        let storage = storage.clone();
        Box::new(move |lsn| {
            // Page i carries LSN 1000 + i: when asked, its image must not be on file yet.
            let page = (lsn - 1000) as usize;
            let file = storage.file_bytes(DATA).unwrap_or_default();
            let on_file = file.get(page * PAGE_SIZE + 16..page * PAGE_SIZE + 24);
            assert_ne!(
                on_file,
                Some(&lsn.to_le_bytes()[..]),
                "written before the hook"
            );
            seen.lock().push(lsn);
            Ok(())
        })
    };
    let pool = BufferPool::new(data_file(&storage), 2, hook).expect("pool");
    let ids = allocate_with_pattern(&pool, 10); // evictions write pages 0..8
    pool.flush_all().expect("flush"); // writes the last two
    let mut lsns = seen.lock().clone();
    assert_eq!(lsns.len() as u64, pool.stats().pages_written);
    lsns.sort_unstable();
    let expected: Vec<Lsn> = ids.iter().map(|id| 1000 + id.0).collect();
    assert_eq!(lsns, expected);
    // A clean page is not written again, so the hook is not called again.
    pool.flush_all().expect("flush");
    assert_eq!(seen.lock().len(), 10);
}

#[test]
fn failing_write_ahead_hook_prevents_the_write_and_propagates() {
    let storage = SimStorage::new();
    let durable = Arc::new(AtomicU64::new(0));
    let hook: WriteAheadHook = {
        let durable = Arc::clone(&durable);
        Box::new(move |lsn| {
            if lsn > durable.load(Ordering::SeqCst) {
                return Err(
                    format!("log durable only to {}", durable.load(Ordering::SeqCst)).into(),
                );
            }
            Ok(())
        })
    };
    let pool = BufferPool::new(data_file(&storage), 1, hook).expect("pool");
    let (a, mut page) = pool.allocate().expect("allocate");
    page.payload_mut()[0] = 42;
    page.set_lsn(60);
    drop(page);

    // Eviction needs to write page a: the hook refuses, nothing is written, a stays cached.
    let err = pool.allocate().err().expect("eviction must fail");
    assert!(
        matches!(err, StorageError::WriteAhead { page_id, lsn: 60, .. } if page_id == a),
        "{err}"
    );
    let err = pool.flush_all().expect_err("flush must fail");
    assert!(
        matches!(err, StorageError::WriteAhead { lsn: 60, .. }),
        "{err}"
    );
    assert_eq!(pool.stats().pages_written, 0);
    assert!(storage.file_bytes(DATA).expect("file").is_empty());
    assert_eq!(pool.read(a).expect("still cached").payload()[0], 42);

    // Once the log catches up, the same page goes out.
    durable.store(60, Ordering::SeqCst);
    pool.flush_all().expect("flush");
    assert_eq!(pool.stats().pages_written, 1);
}

#[test]
fn corrupt_and_misdirected_pages_are_reported_not_returned() {
    let storage = SimStorage::new();
    {
        let pool = pool(&storage, 4);
        allocate_with_pattern(&pool, 3);
        pool.flush_all().expect("flush");
    }
    let good = storage.file_bytes(DATA).expect("file");

    let mut flipped = good.clone();
    flipped[PAGE_SIZE + 500] ^= 0x01; // page 1, inside the payload
    storage.set_file_bytes(DATA, flipped);
    let pool1 = pool(&storage, 4);
    pool1.read(PageId(0)).expect("page 0 is intact");
    let err = pool1.read(PageId(1)).err().expect("page 1 is corrupt");
    assert!(
        matches!(&err, StorageError::Corrupt { page_id: PageId(1), reason } if reason.contains("checksum")),
        "{err}"
    );
    // Not cached: asking again reads (and rejects) it again.
    assert!(pool1.write(PageId(1)).is_err());

    let mut misplaced = good.clone();
    misplaced.copy_within(0..PAGE_SIZE, 2 * PAGE_SIZE); // page 0's image in page 2's slot
    storage.set_file_bytes(DATA, misplaced);
    let err = pool(&storage, 4)
        .read(PageId(2))
        .err()
        .expect("misdirected");
    assert!(err.to_string().contains("holds page 0"), "{err}");

    let err = pool(&storage, 4)
        .read(PageId(7))
        .err()
        .expect("past the end");
    assert!(
        matches!(
            err,
            StorageError::Corrupt {
                page_id: PageId(7),
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn concurrent_readers_and_writers_on_different_pages() {
    const THREADS: u64 = 4;
    const PAGES: u64 = 48;
    const ROUNDS: u64 = 3000;
    let storage = SimStorage::new();
    let pool = pool(&storage, 12);
    let ids = allocate_with_pattern(&pool, PAGES);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (pool, ids) = (&pool, &ids);
            s.spawn(move || {
                for round in 0..ROUNDS {
                    // Write a page owned by this thread: a counter in bytes 200..208.
                    let own = ids[((round * THREADS + t) % PAGES) as usize];
                    {
                        let mut page = pool.write(own).expect("write");
                        let p = page.payload_mut();
                        let n = u64::from_le_bytes(p[200..208].try_into().expect("8 bytes"));
                        p[200..208].copy_from_slice(&(n + 1).to_le_bytes());
                    }
                    // Read any page: its pattern must be intact.
                    let any = ids[((round * 7 + t * 13) % PAGES) as usize];
                    let page = pool.read(any).expect("read");
                    assert_eq!(&page.payload()[..64], &pattern(any.0)[..]);
                }
            });
        }
    });
    let total: u64 = ids
        .iter()
        .map(|&id| {
            let page = pool.read(id).expect("read");
            u64::from_le_bytes(page.payload()[200..208].try_into().expect("8 bytes"))
        })
        .sum();
    assert_eq!(total, THREADS * ROUNDS);
    assert!(pool.stats().evictions > 0);
}

#[test]
fn pinned_pages_stay_and_a_fully_pinned_pool_fails_cleanly() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 4);
    let ids = allocate_with_pattern(&pool, 24);
    pool.flush_all().expect("flush");

    let pinned: Vec<_> = ids[..3]
        .iter()
        .map(|&id| pool.read(id).expect("pin"))
        .collect();
    // Cycle many other pages through the one free frame.
    for &id in &ids[3..] {
        assert_eq!(pool.read(id).expect("read").page_id(), id);
    }
    let before = pool.stats();
    for &id in &ids[..3] {
        assert_eq!(
            &pool.read(id).expect("read").payload()[..64],
            &pattern(id.0)[..]
        );
    }
    let after = pool.stats();
    assert_eq!(
        after.hits - before.hits,
        3,
        "pinned pages must still be cached"
    );
    assert_eq!(after.misses, before.misses);

    // Pin the fourth frame too: the pool is full of pinned pages.
    let last = pool.read(ids[3]).expect("pin");
    let err = pool.read(ids[10]).err().expect("exhausted");
    assert!(
        matches!(err, StorageError::PoolExhausted { capacity: 4 }),
        "{err}"
    );
    assert!(matches!(
        pool.allocate().err(),
        Some(StorageError::PoolExhausted { .. })
    ));
    drop(last);
    assert_eq!(
        pool.read(ids[10]).expect("a frame is free").page_id(),
        ids[10]
    );
    drop(pinned);
}

/// A request that finds every frame pinned waits a little for one (a reader's pin, a
/// checkpoint's write), rather than failing at once: inside a commit, a failure stops the
/// database.
#[test]
fn a_request_waits_for_a_frame_released_soon() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 4);
    let ids = allocate_with_pattern(&pool, 8);
    pool.flush_all().expect("flush");
    let mut pinned: Vec<_> = ids[..4]
        .iter()
        .map(|&id| pool.read(id).expect("pin"))
        .collect();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| pool.read(ids[6]).map(|page| page.page_id()));
        std::thread::sleep(std::time::Duration::from_millis(20));
        pinned.pop();
        assert_eq!(
            waiter.join().expect("no panic").expect("a frame came free"),
            ids[6]
        );
    });
}

#[test]
fn real_file_round_trip_and_bit_flip_detection() {
    use tailstore_media::real::RealStorage;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("data");
    let open = || {
        RealStorage
            .open_file(&path, OpenMode::CreateIfMissing)
            .expect("open")
    };
    {
        let pool = BufferPool::new(open(), 2, no_hook()).expect("pool");
        allocate_with_pattern(&pool, 6);
        pool.flush_all().expect("flush");
    }
    let pool = BufferPool::new(open(), 2, no_hook()).expect("pool");
    for id in 0..6 {
        let page = pool.read(PageId(id)).expect("read");
        assert_eq!(&page.payload()[..64], &pattern(id)[..]);
    }
    let file = open();
    let mut byte = [0u8; 1];
    let at = 4 * PAGE_SIZE as u64 + 4321;
    assert!(file.read_exact_at(at, &mut byte).expect("read byte"));
    file.write_at(at, &[byte[0] ^ 0x10]).expect("flip");
    let err = BufferPool::new(open(), 2, no_hook())
        .expect("pool")
        .read(PageId(4))
        .err()
        .expect("corrupt");
    assert!(
        matches!(
            err,
            StorageError::Corrupt {
                page_id: PageId(4),
                ..
            }
        ),
        "{err}"
    );
}

/// While a dirty victim is being written back (the write-ahead hook is blocked), a reader of
/// that page must wait and then see the new image, never the stale one on disk.
#[test]
fn reader_of_a_page_being_written_back_sees_the_new_image() {
    use std::sync::mpsc;
    use std::time::Duration;
    const WAIT: Duration = Duration::from_secs(10);

    let storage = SimStorage::new();
    {
        let pool = pool(&storage, 4);
        for n in 0..3u8 {
            let (_, mut page) = pool.allocate().expect("allocate");
            page.payload_mut()[0] = n; // "old" images of pages 0 (A), 1 (B), 2 (C)
        }
        pool.flush_all().expect("flush");
    }
    let (in_hook_tx, in_hook_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (in_hook_tx, go_rx) = (Mutex::new(in_hook_tx), Mutex::new(go_rx));
    let hook: WriteAheadHook = Box::new(move |lsn| {
        if lsn == 5 {
            in_hook_tx.lock().send(()).expect("main is waiting");
            go_rx.lock().recv_timeout(WAIT).expect("main says go");
        }
        Ok(())
    });
    let pool = BufferPool::new(data_file(&storage), 2, hook).expect("pool");
    let (a, b, c) = (PageId(0), PageId(1), PageId(2));
    drop(pool.read(a).expect("read"));
    drop(pool.read(b).expect("read"));
    {
        let mut page = pool.write(a).expect("write"); // sets A's reference bit
        page.payload_mut()[0] = 99;
        page.set_lsn(5);
    }
    drop(pool.read(b).expect("read")); // sets B's reference bit: CLOCK will pick A's frame
    std::thread::scope(|s| {
        let pool = &pool;
        s.spawn(move || drop(pool.read(c).expect("read C (evicts A)")));
        in_hook_rx
            .recv_timeout(WAIT)
            .expect("A's write-back reached the hook");
        let reader = s.spawn(move || pool.read(a).expect("read A").payload()[0]);
        std::thread::sleep(Duration::from_millis(50)); // let the reader block on A's frame
        go_tx.send(()).expect("hook is waiting");
        assert_eq!(reader.join().expect("reader"), 99, "stale image of A");
    });
}

/// A failed data-file write makes the pool fail-stop: every later change is refused with a
/// message naming the cause, even once the fault is gone; reads of cached and on-disk pages
/// still work.
#[test]
fn a_failed_page_write_stops_all_later_changes() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 4);
    let ids = allocate_with_pattern(&pool, 4);
    pool.flush_all().expect("flush");
    storage.fail_nth_write(1);
    let err = allocate_with_pattern_result(&pool, 8).expect_err("eviction must hit the fault");
    assert!(matches!(err, StorageError::Media(_)), "{err}");
    for attempt in [
        pool.write(ids[0]).map(drop),
        pool.allocate().map(drop),
        pool.flush_all(),
    ] {
        match attempt {
            Err(StorageError::Stopped { cause }) => assert!(cause.contains("injected"), "{cause}"),
            other => panic!(
                "a change was accepted after a failed write: {:?}",
                other.err()
            ),
        }
    }
    let page = pool.read(ids[1]).expect("reads still work");
    assert_eq!(&page.payload()[..64], &pattern(ids[1].0)[..]);
}

/// A flush (a checkpoint's) that another thread's failed page write or sync overlaps does
/// not succeed: that failure may have lost a page the flush counts on as durable, and the
/// flush's own sync, which Linux lets succeed after a lost write-back, does not vouch for it.
#[test]
fn a_flush_overlapped_by_another_threads_failure_fails() {
    let storage = SimStorage::new();
    let pool_of_hook: Arc<OnceLock<Weak<BufferPool>>> = Arc::default();
    let hook: WriteAheadHook = {
        let pool_of_hook = pool_of_hook.clone();
        let writes = AtomicU64::new(0);
        // Stands for an eviction failing on another thread while the flush writes its pages.
        Box::new(move |_| {
            if writes.fetch_add(1, Ordering::Relaxed) == 1 {
                if let Some(pool) = pool_of_hook.get().and_then(Weak::upgrade) {
                    pool.stop("an eviction's write failed".to_string());
                }
            }
            Ok(())
        })
    };
    let pool = Arc::new(BufferPool::new(data_file(&storage), 8, hook).expect("pool"));
    pool_of_hook.set(Arc::downgrade(&pool)).expect("set once");
    allocate_with_pattern(&pool, 4);
    match pool.flush_all() {
        Err(StorageError::Stopped { cause }) => assert!(cause.contains("eviction"), "{cause}"),
        other => panic!("the flush succeeded over another thread's failure: {other:?}"),
    }
}

fn allocate_with_pattern_result(pool: &BufferPool, count: u64) -> Result<(), StorageError> {
    for _ in 0..count {
        let (id, mut page) = pool.allocate()?;
        page.payload_mut()[..64].copy_from_slice(&pattern(id.0));
    }
    Ok(())
}

/// Stress: four threads read and write random pages of a pool 8x smaller than the page set,
/// so evictions (clean and dirty) race with hits on the same frames all the time. Each page
/// holds a counter that writers increment under the write guard; a thread never sees a
/// page's counter go back (no stale image read from disk), and at the end, read through a
/// fresh pool after `flush_all`, every counter equals the increments made to its page.
#[test]
fn a_checkpoint_writes_dirty_pages_without_moving_frame_versions() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 8);
    let ids = allocate_with_pattern(&pool, 4);
    let versions: Vec<_> = ids
        .iter()
        .map(|&id| pool.read(id).expect("read").frame_version())
        .collect();
    pool.flush_all().expect("flush");
    assert_eq!(pool.stats().pages_written, 4);
    for version in versions {
        // Readers' copies of these pages stay valid across the checkpoint.
        assert!(pool.is_unchanged(version));
    }
    pool.flush_all().expect("flush");
    assert_eq!(
        pool.stats().pages_written,
        4,
        "clean pages are not written again"
    );
    let fresh = BufferPool::new(data_file(&storage), 8, no_hook()).expect("pool");
    for &id in &ids {
        assert_eq!(
            &fresh.read(id).expect("read").payload()[..64],
            &pattern(id.0)[..]
        );
    }
}

#[test]
fn stress_random_reads_and_writes_race_evictions_and_lose_no_increment() {
    stress_random_reads_and_writes(false);
}

#[test]
fn stress_random_reads_and_writes_race_checkpoints_and_lose_no_increment() {
    stress_random_reads_and_writes(true);
}

/// Threads increment counters in random pages of a pool 8x too small and read them back;
/// with `checkpoints`, another thread runs `flush_all` all the while. The file must end
/// with every increment.
fn stress_random_reads_and_writes(checkpoints: bool) {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    const THREADS: u64 = 4;
    const PAGES: usize = 64;
    const FRAMES: usize = 8;
    const OPS: u64 = 100_000;
    fn counter(page: &[u8]) -> u64 {
        u64::from_le_bytes(page[200..208].try_into().expect("8 bytes"))
    }

    let storage = SimStorage::new();
    let pool = pool(&storage, FRAMES);
    let ids = allocate_with_pattern(&pool, PAGES as u64);
    pool.flush_all().expect("flush"); // from now on a stale image of every page is on disk
    let running = std::sync::atomic::AtomicBool::new(true);
    let increments: Vec<Vec<u64>> = std::thread::scope(|s| {
        let checkpointer = checkpoints.then(|| {
            s.spawn(|| {
                let mut rounds = 0u64;
                while running.load(Ordering::Relaxed) {
                    pool.flush_all().expect("checkpoint");
                    rounds += 1;
                }
                rounds
            })
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (pool, ids) = (&pool, &ids);
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(0x5eed + t);
                    let mut made = vec![0u64; PAGES];
                    let mut seen = vec![0u64; PAGES];
                    for _ in 0..OPS {
                        let i = rng.gen_range(0..PAGES);
                        let id = ids[i];
                        let value = if rng.gen_bool(0.5) {
                            let mut page = pool.write(id).expect("write");
                            assert_eq!(page.page_id(), id);
                            let n = counter(page.payload()) + 1;
                            page.payload_mut()[200..208].copy_from_slice(&n.to_le_bytes());
                            made[i] += 1;
                            n
                        } else {
                            let page = pool.read(id).expect("read");
                            assert_eq!(page.page_id(), id);
                            assert_eq!(&page.payload()[..64], &pattern(id.0)[..]);
                            counter(page.payload())
                        };
                        assert!(value >= seen[i], "page {i}: counter went back");
                        seen[i] = value;
                    }
                    made
                })
            })
            .collect();
        // Joined before any panic is raised, so that a failing worker stops the checkpointer
        // instead of leaving the scope waiting for it.
        let joined: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        running.store(false, Ordering::Relaxed);
        let made = joined.into_iter().map(|w| w.expect("worker")).collect();
        if let Some(checkpointer) = checkpointer {
            assert!(
                checkpointer.join().expect("checkpointer") > 10,
                "too few checkpoints"
            );
        }
        made
    });
    let stats = pool.stats();
    assert!(
        stats.evictions > 1000 && stats.hits > 1000,
        "evictions must race with hits: {stats:?}"
    );
    pool.flush_all().expect("flush");
    let fresh = BufferPool::new(data_file(&storage), FRAMES, no_hook()).expect("pool");
    for (i, &id) in ids.iter().enumerate() {
        let expected: u64 = increments.iter().map(|made| made[i]).sum();
        let page = fresh.read(id).expect("read");
        assert_eq!(counter(page.payload()), expected, "page {i}");
        assert_eq!(&page.payload()[..64], &pattern(id.0)[..]);
    }
    assert_eq!(
        increments.iter().flatten().sum::<u64>(),
        (0..PAGES)
            .map(|i| counter(fresh.read(ids[i]).expect("read").payload()))
            .sum::<u64>()
    );
}

/// The byte at offset 100 of page `id`'s payload as the data file holds it, if it holds the
/// page (read through a fresh pool, so nothing cached answers).
fn byte_in_file(storage: &SimStorage, id: PageId) -> Option<u8> {
    let fresh = BufferPool::new(data_file(storage), 4, no_hook()).expect("pool");
    fresh.read(id).ok().map(|page| page.payload()[100])
}

#[test]
fn flushing_by_epoch_writes_only_pages_dirty_since_an_earlier_epoch() {
    let storage = SimStorage::new();
    let pool = pool(&storage, 16);
    let ids = allocate_with_pattern(&pool, 6);
    pool.flush_all().expect("flush");
    let change = |id: PageId, byte: u8| pool.write(id).expect("write").payload_mut()[100] = byte;
    // Pages 0 and 1 become dirty in epoch 0, pages 2 and 3 in epoch 1; page 0 changes again
    // in epoch 1 and stays dirty since epoch 0.
    change(ids[0], 1);
    change(ids[1], 1);
    assert_eq!(pool.begin_epoch(), 1);
    change(ids[2], 2);
    change(ids[3], 2);
    change(ids[0], 3);
    assert_eq!(pool.begin_epoch(), 2);
    change(ids[4], 4);

    let written = pool.stats().pages_written;
    pool.flush_dirty_before(1).expect("flush epoch 0");
    assert_eq!(pool.stats().pages_written - written, 2);
    assert_eq!(
        byte_in_file(&storage, ids[0]),
        Some(3),
        "the page as it is now"
    );
    assert_eq!(byte_in_file(&storage, ids[1]), Some(1));
    assert_eq!(
        byte_in_file(&storage, ids[2]),
        Some(0),
        "dirty since epoch 1: not written"
    );

    // Page 1, clean now, is dirty since epoch 2 once it changes again.
    change(ids[1], 5);
    pool.flush_dirty_before(2).expect("flush epoch 1");
    assert_eq!(byte_in_file(&storage, ids[2]), Some(2));
    assert_eq!(byte_in_file(&storage, ids[3]), Some(2));
    assert_eq!(
        byte_in_file(&storage, ids[1]),
        Some(1),
        "dirty since epoch 2: not written"
    );
    assert_eq!(byte_in_file(&storage, ids[4]), Some(0));
    pool.flush_all().expect("flush all");
    assert_eq!(byte_in_file(&storage, ids[1]), Some(5));
    assert_eq!(byte_in_file(&storage, ids[4]), Some(4));
    assert_eq!(
        byte_in_file(&storage, ids[5]),
        Some(0),
        "never dirty since the first flush"
    );
}
