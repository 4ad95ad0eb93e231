//! The concurrency primitives the runtime is written against: `std`'s in normal builds, loom's
//! under `--cfg loom`, so that one source is both the runtime users run and the one loom explores.
//!
//! [`Slot`] is the one place where the two differ in kind, not just in name: shared memory that
//! the protocol orders with barriers (buffers and vars). Under loom it is a `loom::cell::UnsafeCell`,
//! so that loom reports every access that is not ordered by happens-before (a barrier that fails
//! to publish data is then caught as a causality violation, not by luck). In normal builds it is a
//! relaxed atomic: a racy spec run on OS threads must stay defined behaviour in Rust, and relaxed
//! loads return one of the values written, which is what the GPU comparison's widening admits.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
#[cfg(loom)]
pub use loom::sync::{Arc, Condvar, Mutex};
#[cfg(loom)]
pub use loom::thread;

#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};
#[cfg(not(loom))]
pub use std::sync::{Arc, Condvar, Mutex};
#[cfg(not(loom))]
pub use std::thread;

#[cfg(not(loom))]
use std::sync::atomic::Ordering;

/// A shared integer the protocol must order by itself (a buffer's version, a `var`).
#[derive(Debug)]
pub struct Slot {
    #[cfg(loom)]
    cell: loom::cell::UnsafeCell<i64>,
    #[cfg(not(loom))]
    cell: AtomicI64,
}

impl Slot {
    pub fn new(v: i64) -> Slot {
        Slot {
            #[cfg(loom)]
            cell: loom::cell::UnsafeCell::new(v),
            #[cfg(not(loom))]
            cell: AtomicI64::new(v),
        }
    }

    pub fn get(&self) -> i64 {
        #[cfg(loom)]
        // SAFETY: loom checks that no write to this cell is concurrent with this read and panics
        // otherwise; the value is a plain i64 copied out.
        return self.cell.with(|p| unsafe { *p });
        #[cfg(not(loom))]
        return self.cell.load(Ordering::Relaxed);
    }

    pub fn set(&self, v: i64) {
        #[cfg(loom)]
        // SAFETY: as in `get`, loom checks exclusivity of this write.
        self.cell.with_mut(|p| unsafe { *p = v });
        #[cfg(not(loom))]
        self.cell.store(v, Ordering::Relaxed);
    }
}

/// Lets other threads run: loom needs it in every spin loop so that it explores the spinning
/// thread's progress depending on others instead of running it forever.
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Lock a mutex, ignoring poisoning: a panicking thread already failed the run, and the state
/// behind these mutexes (wake-up tokens, counters) stays consistent under a panic.
pub fn lock<T>(m: &Mutex<T>) -> crate::sync::MutexGuardOf<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

#[cfg(loom)]
pub type MutexGuardOf<'a, T> = loom::sync::MutexGuard<'a, T>;
#[cfg(not(loom))]
pub type MutexGuardOf<'a, T> = std::sync::MutexGuard<'a, T>;
