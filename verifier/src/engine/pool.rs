//! The search's worker threads, started once per search and woken for each round of a chunk
//! (expansion, interning, row building, deduplication, filing).
//!
//! A chunk of a parallel search takes five such rounds. Starting threads for each (as
//! `std::thread::scope` does) costs the one thread that drives the search a few microseconds per
//! worker per round, which at 16 workers and a level of a few thousand states is a large share
//! of the level; waking parked workers costs one notification, and a worker that polls for a
//! short while before it parks (the next round of a chunk is usually microseconds away) costs
//! none. The thread that drives the search is worker 0 of each round rather than a bystander.
//!
//! A round runs a closure that borrows the caller's data for the round only. [`Pool::run`]
//! returns only once every worker has finished the closure (or panicked: the panic is passed on
//! after all have stopped), so the borrow outlives every use; that is what makes handing the
//! workers a pointer to it sound.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A job for one round: called once per worker with the worker's index.
type Job = dyn Fn(usize) + Sync;

/// The job's address, sent to the workers of the round (see the module docs for why it stays
/// valid while they use it).
#[derive(Clone, Copy)]
struct JobRef(*const Job);

// SAFETY: the pointee is `Sync`, and `Pool::run` keeps it alive until every worker is done.
unsafe impl Send for JobRef {}

struct Round {
    job: Option<JobRef>,
    quit: bool,
}

struct Shared {
    round: Mutex<Round>,
    /// Bumped (under `round`'s lock) for each round: a worker runs a round once. Read without the
    /// lock by a spinning worker.
    number: AtomicU64,
    /// Workers still running the round.
    running: AtomicUsize,
    panicked: AtomicBool,
    /// How long a worker, or the thread that drives the search, keeps polling for the next round
    /// or the end of this one before it sleeps on a condition variable. The rounds of a chunk
    /// follow one another within microseconds, and a sleep and wake-up of 16 threads costs tens
    /// of them; zero when there are more threads than cores, where a spinning thread would take
    /// the core of one with work.
    spin: Duration,
    start: Condvar,
    done: Condvar,
}

/// The workers of a search. The thread that calls [`Pool::run`] is worker 0 itself, so a pool of
/// `n` threads starts `n - 1`: while the others expand, it does its share instead of waiting.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    /// A pool of `threads` workers: the caller and `threads - 1` parked threads.
    pub fn new(threads: usize) -> Pool {
        let threads = threads.max(1);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let shared = Arc::new(Shared {
            round: Mutex::new(Round { job: None, quit: false }),
            number: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            // 50 us, or the diagnostic `PHASECHECK_ENGINE_SPIN_US` (BENCHMARKS.md: no setting
            // from 50 us to 5 ms moved a 16-thread run beyond the spread between repeats).
            spin: if threads <= cores {
                Duration::from_micros(
                    std::env::var("PHASECHECK_ENGINE_SPIN_US")
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(50),
                )
            } else {
                Duration::ZERO
            },
            start: Condvar::new(),
            done: Condvar::new(),
        });
        let workers = (1..threads)
            .map(|w| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || work(&shared, w))
            })
            .collect();
        Pool { shared, workers }
    }

    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Run `job(w)` on every worker `w` (`job(0)` on the calling thread) and wait for all.
    pub fn run(&self, job: &(dyn Fn(usize) + Sync + '_)) {
        let shared = &*self.shared;
        {
            let mut r = lock(&shared.round);
            // SAFETY (of the lifetime erased here): this function does not return before
            // `running` is back to zero, i.e. before every worker has stopped using the job.
            let erased: *const Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), &'static Job>(job) };
            r.job = Some(JobRef(erased));
            shared.panicked.store(false, Ordering::Relaxed);
            shared.running.store(self.workers.len(), Ordering::Release);
            shared.number.fetch_add(1, Ordering::Release);
        }
        shared.start.notify_all();
        let own = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(0)));
        if !poll(shared.spin, || shared.running.load(Ordering::Acquire) == 0) {
            let mut r = lock(&shared.round);
            while shared.running.load(Ordering::Acquire) > 0 {
                r = shared.done.wait(r).unwrap_or_else(|e| e.into_inner());
            }
        }
        lock(&shared.round).job = None;
        if let Err(p) = own {
            std::panic::resume_unwind(p);
        }
        if shared.panicked.load(Ordering::Acquire) {
            panic!("a search worker panicked");
        }
    }
}

/// Poll `ready` for up to `spin`; whether it became true.
fn poll(spin: Duration, ready: impl Fn() -> bool) -> bool {
    if spin.is_zero() {
        return ready();
    }
    let t0 = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if t0.elapsed() >= spin {
            return ready();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.shared.round).quit = true;
        self.shared.number.fetch_add(1, Ordering::Release);
        self.shared.start.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn lock(m: &Mutex<Round>) -> std::sync::MutexGuard<'_, Round> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn work(shared: &Shared, w: usize) {
    let mut seen = 0u64;
    loop {
        poll(shared.spin, || shared.number.load(Ordering::Acquire) != seen);
        let job = {
            let mut r = lock(&shared.round);
            while shared.number.load(Ordering::Acquire) == seen && !r.quit {
                r = shared.start.wait(r).unwrap_or_else(|e| e.into_inner());
            }
            if r.quit {
                return;
            }
            seen = shared.number.load(Ordering::Acquire);
            r.job.expect("a round has its job")
        };
        // SAFETY: `Pool::run` waits for this worker before the job's borrow ends.
        let f: &Job = unsafe { &*job.0 };
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(w))).is_ok();
        if !ok {
            shared.panicked.store(true, Ordering::Release);
        }
        if shared.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Under the lock, so that a driver that saw `running > 0` is already waiting.
            let _r = lock(&shared.round);
            shared.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pool;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_worker_runs_every_round_once_on_borrowed_data() {
        let pool = Pool::new(4);
        for round in 0..200 {
            let hits: Vec<AtomicUsize> = (0..4).map(|_| AtomicUsize::new(0)).collect();
            pool.run(&|w| {
                hits[w].fetch_add(round + 1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == round + 1));
        }
    }

    #[test]
    fn a_worker_panic_reaches_the_caller_and_the_pool_still_works() {
        let pool = Pool::new(3);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(&|w| assert!(w != 1, "worker 1 fails"));
        }));
        assert!(r.is_err());
        let n = AtomicUsize::new(0);
        pool.run(&|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 3);
    }

    /// The calling thread is worker 0: its panic also reaches the caller, only after every other
    /// worker has finished the round (their borrows end before `run` unwinds), and the pool runs
    /// the next round in full.
    #[test]
    fn the_callers_own_share_panics_after_the_others_finish() {
        let pool = Pool::new(3);
        let caller = std::thread::current().id();
        let finished = AtomicUsize::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(&|w| {
                if w == 0 {
                    assert_eq!(std::thread::current().id(), caller);
                    panic!("the caller's share fails");
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
                finished.fetch_add(1, Ordering::Relaxed);
            });
        }));
        assert!(r.is_err());
        assert_eq!(finished.load(Ordering::Relaxed), 2);
        let n = AtomicUsize::new(0);
        pool.run(&|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 3);
    }
}
