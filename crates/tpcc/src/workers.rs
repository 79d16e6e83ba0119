//! The kit's transaction monitor: at most N transactions execute at once, however many
//! terminals there are.
//!
//! A HammerDB virtual user is a client of a database server, and the server runs its
//! sessions' transactions on a bounded pool of worker threads (SQL Server's schedulers, one
//! per core), and published TPC-C results have long put a transaction monitor with a pool
//! of server processes between the terminals and the database. The kit embeds the engine, so
//! without a bound every terminal is a thread running transactions, and once there are more
//! terminals than cores the scheduler preempts transactions in the middle of their commit.
//! Under optimistic concurrency control that costs throughput twice over: a preempted
//! committer holds its key locks while others yield to it, and the longer a transaction
//! stays open the likelier a concurrent commit invalidates what it read, so it runs again.
//! On this 2-core machine, 1 warehouse, 256 terminals made a third less NOPM than 16, and
//! bounded to 4 workers a third more than unbounded (decision 92 in docs/ARCHITECTURE.md).
//!
//! A terminal holds a worker from the start of an attempt through its commit's apply and
//! log append, and gives it back before it waits for durability, before a retry's back-off
//! and before keying and think times: a worker is held only while its transaction executes.
//! Waiting terminals take free workers in the order they asked for them, so none starves.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::Thread;

use parking_lot::Mutex;

/// A pool of workers shared by the terminals of a run.
pub struct Workers {
    limit: usize,
    queue: Mutex<Queue>,
}

struct Queue {
    busy: usize,
    /// Terminals waiting for a worker, in arrival order.
    waiting: VecDeque<Arc<Waiter>>,
}

/// A terminal waiting for a worker: a worker given back is handed to the first one in line
/// directly (`busy` unchanged), so a terminal that just arrived cannot take it first.
struct Waiter {
    thread: Thread,
    granted: AtomicBool,
}

/// A worker, held until dropped.
pub struct Worker<'w> {
    workers: &'w Workers,
}

impl Workers {
    /// A pool of `limit` workers (at least one).
    pub fn new(limit: usize) -> Workers {
        Workers {
            limit: limit.max(1),
            queue: Mutex::new(Queue {
                busy: 0,
                waiting: VecDeque::new(),
            }),
        }
    }

    /// Waits for a free worker, in turn.
    pub fn take(&self) -> Worker<'_> {
        let mut queue = self.queue.lock();
        if queue.busy < self.limit && queue.waiting.is_empty() {
            queue.busy += 1;
            return Worker { workers: self };
        }
        let waiter = Arc::new(Waiter {
            thread: std::thread::current(),
            granted: AtomicBool::new(false),
        });
        queue.waiting.push_back(waiter.clone());
        drop(queue);
        // `park` may return spuriously: only the grant ends the wait.
        while !waiter.granted.load(Ordering::Acquire) {
            std::thread::park();
        }
        Worker { workers: self }
    }

    /// Workers taken and not given back.
    pub fn in_use(&self) -> usize {
        self.queue.lock().busy
    }

    fn give_back(&self) {
        let mut queue = self.queue.lock();
        assert!(queue.busy > 0, "a worker given back that was not taken");
        match queue.waiting.pop_front() {
            Some(next) => {
                drop(queue);
                next.granted.store(true, Ordering::Release);
                next.thread.unpark();
            }
            None => queue.busy -= 1,
        }
    }
}

impl Drop for Worker<'_> {
    fn drop(&mut self) {
        self.workers.give_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    #[test]
    fn never_more_than_the_limit_at_once() {
        let workers = Arc::new(Workers::new(3));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..12)
            .map(|_| {
                let (workers, running, most) = (workers.clone(), running.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        let _worker = workers.take();
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        // Held a while, so that the others fill every worker meanwhile.
                        std::thread::sleep(Duration::from_micros(100));
                        running.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("a terminal thread panicked");
        }
        assert_eq!(
            most.load(Ordering::SeqCst),
            3,
            "the pool's limit was not reached or passed"
        );
    }

    #[test]
    fn waiting_terminals_are_served_in_arrival_order() {
        let workers = Arc::new(Workers::new(1));
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = workers.take();
        let mut threads = Vec::new();
        for i in 0..5 {
            let (pool, order) = (workers.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let _worker = pool.take();
                order.lock().push(i);
            }));
            // Until terminal i waits in line, the next one is not started.
            let deadline = Instant::now() + Duration::from_secs(10);
            while workers.queue.lock().waiting.len() < i + 1 {
                assert!(
                    Instant::now() < deadline,
                    "terminal {i} never waited for the worker"
                );
                std::thread::yield_now();
            }
        }
        drop(held);
        for thread in threads {
            thread.join().expect("a terminal thread panicked");
        }
        assert_eq!(*order.lock(), vec![0, 1, 2, 3, 4]);
    }
}
