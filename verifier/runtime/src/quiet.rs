//! When a blocked or spinning thread hangs: the model's timeout rule on OS threads. A thread
//! blocked at a barrier wait (or a commit) times out only once the CTA is quiet for
//! `Options::quiet`: every unfinished thread blocked or spinning, no copy in flight, no step that
//! changed anything. Threads at execution barriers never time out; they give up only when every
//! unfinished thread is at one. Under loom and in directed runs nothing times out (a wait that
//! can never return is a deadlock loom reports, or a divergence of the directed schedule).

use crate::barrier::{Bound, WaitError};
use crate::interp::{Ctx, Stop, World};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::Instant;

impl World {
    /// A fresh bound for one operation that does not block a thread for long (the COMPLETING
    /// spin): cancellation and the hard deadline only.
    pub(crate) fn with_bound<R>(&self, f: impl FnOnce(&Bound) -> R) -> R {
        let cancelled = || self.cancelled();
        let deadline = if cfg!(loom) {
            None
        } else {
            Some(Instant::now() + self.opts.wait_timeout)
        };
        f(&Bound {
            deadline,
            cancelled: &cancelled,
        })
    }

    /// A bound for a blocking wait of a protocol thread. It also gives up once the CTA has been
    /// quiet for `Options::quiet`, following the model's timeout rule (gpu-conformance's
    /// outcome module): a thread blocked at a barrier wait times out (hangs) when every unfinished
    /// thread is blocked and no copy is in flight; a thread at `syncthreads`/`syncwarp` never
    /// times out (the hardware's execution barriers have no timeout), it gives up only when
    /// nothing is left that could release it: every unfinished thread is at an execution barrier.
    pub(crate) fn blocking<R>(&self, exec: bool, f: impl FnOnce(&Bound) -> Result<R, WaitError>) -> Result<R, WaitError> {
        if cfg!(loom) || self.directed().is_some() {
            return self.with_bound(f);
        }
        self.blocked.fetch_add(1, SeqCst);
        if exec {
            self.blocked_exec.fetch_add(1, SeqCst);
        }
        let last = std::cell::Cell::new((u64::MAX, Instant::now()));
        let hung = std::cell::Cell::new(false);
        let give_up = || {
            if self.cancelled() {
                return true;
            }
            let alive = self.alive.load(SeqCst);
            let quiet = if exec {
                self.blocked_exec.load(SeqCst) >= alive
            } else {
                self.blocked.load(SeqCst) + self.spinning.load(SeqCst) >= alive
            } && self.inflight.load(SeqCst) == 0;
            let p = self.progress.load(SeqCst);
            let (seen, since) = last.get();
            if !quiet || p != seen {
                last.set((p, Instant::now()));
                return false;
            }
            if since.elapsed() >= self.opts.quiet {
                hung.set(true);
                return true;
            }
            false
        };
        let deadline = Some(Instant::now() + self.opts.wait_timeout);
        let r = f(&Bound {
            deadline,
            cancelled: &give_up,
        });
        self.blocked.fetch_sub(1, SeqCst);
        if exec {
            self.blocked_exec.fetch_sub(1, SeqCst);
        }
        match r {
            Err(WaitError::Cancelled) if hung.get() => Err(WaitError::TimedOut),
            r => r,
        }
    }

    pub(crate) fn stepped(&self) {
        self.progress.fetch_add(1, Relaxed);
    }

    /// A visible step that changed nothing (a failed poll, a read of a var): a thread that takes
    /// only such steps spins, and once every unfinished thread is blocked or spinning, nothing is
    /// in flight and nothing has changed for `Options::quiet`, it hangs, as the model's timeout
    /// rule lets a thread spinning in a loop nothing can end time out.
    pub(crate) fn idle_step(&self, ctx: &mut Ctx) -> Result<(), Stop> {
        if cfg!(loom) || self.directed().is_some() {
            return Ok(());
        }
        let p = self.progress.load(SeqCst);
        match ctx.idle_since {
            None => {
                self.spinning.fetch_add(1, SeqCst);
                ctx.idle_since = Some((p, Instant::now()));
            }
            Some((seen, since)) => {
                let quiet =
                    self.blocked.load(SeqCst) + self.spinning.load(SeqCst) >= self.alive.load(SeqCst) && self.inflight.load(SeqCst) == 0;
                if !quiet || seen != p {
                    ctx.idle_since = Some((p, Instant::now()));
                } else if since.elapsed() >= self.opts.quiet {
                    return Err(Stop::Hung);
                }
            }
        }
        if self.opts.wait_timeout.is_zero() {
            return Err(Stop::Hung);
        }
        Ok(())
    }

    /// A visible step that changed something: the thread is no longer spinning.
    pub(crate) fn busy_step(&self, ctx: &mut Ctx) {
        if ctx.idle_since.take().is_some() {
            self.spinning.fetch_sub(1, SeqCst);
        }
        self.stepped();
    }
}
