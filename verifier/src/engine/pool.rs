//! The search's worker threads, started once per search and woken for each round of a chunk
//! (expansion, interning, row building, deduplication, filing).
//!
//! A chunk of a parallel search takes five such rounds. Starting threads for each (as
//! `std::thread::scope` does) costs the one thread that drives the search a few microseconds per
//! worker per round, which at 16 workers and a level of a few thousand states is a large share
//! of the level; waking parked workers costs one notification.
//!
//! A round runs a closure that borrows the caller's data for the round only. [`Pool::run`]
//! returns only once every worker has finished the closure (or panicked: the panic is passed on
//! after all have stopped), so the borrow outlives every use; that is what makes handing the
//! workers a pointer to it sound.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

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
    /// Bumped for each round: a worker runs a round once.
    number: u64,
    /// Workers still running the round.
    running: usize,
    panicked: bool,
    quit: bool,
}

struct Shared {
    round: Mutex<Round>,
    start: Condvar,
    done: Condvar,
}

pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    /// `threads` parked workers.
    pub fn new(threads: usize) -> Pool {
        let shared = Arc::new(Shared {
            round: Mutex::new(Round {
                job: None,
                number: 0,
                running: 0,
                panicked: false,
                quit: false,
            }),
            start: Condvar::new(),
            done: Condvar::new(),
        });
        let workers = (0..threads)
            .map(|w| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || work(&shared, w))
            })
            .collect();
        Pool { shared, workers }
    }

    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// Run `job(w)` on every worker `w` and wait for all of them.
    pub fn run(&self, job: &(dyn Fn(usize) + Sync + '_)) {
        let mut r = lock(&self.shared.round);
        // SAFETY (of the lifetime erased here): this function does not return before `running`
        // is back to zero, i.e. before every worker has stopped using the job.
        let erased: *const Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync + '_), &'static Job>(job) };
        r.job = Some(JobRef(erased));
        r.number += 1;
        r.running = self.workers.len();
        r.panicked = false;
        self.shared.start.notify_all();
        while r.running > 0 {
            r = self.shared.done.wait(r).unwrap_or_else(|e| e.into_inner());
        }
        r.job = None;
        if r.panicked {
            drop(r);
            panic!("a search worker panicked");
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        lock(&self.shared.round).quit = true;
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
        let job = {
            let mut r = lock(&shared.round);
            while r.number == seen && !r.quit {
                r = shared.start.wait(r).unwrap_or_else(|e| e.into_inner());
            }
            if r.quit {
                return;
            }
            seen = r.number;
            r.job.expect("a round has its job")
        };
        // SAFETY: `Pool::run` waits for this worker before the job's borrow ends.
        let f: &Job = unsafe { &*job.0 };
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(w))).is_ok();
        let mut r = lock(&shared.round);
        r.panicked |= !ok;
        r.running -= 1;
        if r.running == 0 {
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
}
