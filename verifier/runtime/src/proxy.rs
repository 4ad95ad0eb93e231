//! The async proxy as an engine of its own: a TMA store (`copy_store_async`) or a `wgmma_async`
//! makes the proxy read shared memory at some later moment, on a helper thread, until the
//! issuing thread's `wait_group`/`wgmma_wait` retires the read (model/src/rt/proxy.rs: bulk
//! groups form at `commit_group`, each `wgmma_async` is a group; a wait keeps the N newest).
//!
//! The engine may be late: its read happens after a random delay, or, if the wait comes first,
//! at the wait (the wait is where the read ends). The read is of the buffer's modelled memory, so
//! under loom a write that is not ordered after it (a buffer reused before its store retired) is
//! a causality violation. Reads not retired when every thread has exited are `lifetime`, as in
//! the model. Proxy fences order nothing the runtime tracks (it keeps no per-proxy visibility).

use crate::barrier::{Fault, Ub};
use crate::interp::{Ctx, World};
use crate::sync::lock;
use phasecheck_model::ViolationKind;
use std::sync::atomic::Ordering::SeqCst;

/// One thread's async-proxy reads in flight.
#[derive(Default)]
pub(crate) struct ProxyQueue {
    next_id: u64,
    reads: Vec<ProxyRead>,
}

struct ProxyRead {
    id: u64,
    buf: usize,
    wgmma: bool,
    /// 0 while not in a group (bulk operations before `commit_group`), then 1 for the newest.
    age: u16,
    /// The engine has read the buffer.
    done: bool,
}

impl World {
    fn proxy_issuer(&self, ctx: &Ctx) -> Result<usize, Ub> {
        ctx.t
            .filter(|_| ctx.completing.is_none())
            .ok_or_else(|| Ub::new(ViolationKind::CompletionMisuse, "an async-proxy operation in a completion function"))
    }

    /// `copy_store_async(buf)` (`wgmma == false`) or one operand of `wgmma_async`: the proxy
    /// starts reading buffer `d` for the thread.
    pub(crate) fn proxy_read_issue(&self, ctx: &mut Ctx, d: usize, wgmma: bool) -> Result<(), Ub> {
        let t = self.proxy_issuer(ctx)?;
        let id = {
            let mut q = lock(&self.proxy[t]);
            let id = q.next_id;
            q.next_id += 1;
            q.reads.push(ProxyRead {
                id,
                buf: d,
                wgmma,
                age: wgmma as u16,
                done: false,
            });
            id
        };
        self.proxy_pending.fetch_add(1, SeqCst);
        let delay = self.copy_delay(ctx);
        self.spawn_helper(delay, move |w| w.proxy_engine_read(t, id, d));
        Ok(())
    }

    /// `commit_group()` (bulk) or the group a `wgmma_async` opens: the thread's reads of that
    /// kind age by one group.
    pub(crate) fn proxy_age(&self, ctx: &mut Ctx, wgmma: bool) -> Result<(), Ub> {
        let t = self.proxy_issuer(ctx)?;
        if self.proxy.is_empty() {
            // The protocol issues no async-proxy read: nothing to age.
            return Ok(());
        }
        for r in lock(&self.proxy[t]).reads.iter_mut().filter(|r| r.wgmma == wgmma) {
            r.age = r.age.saturating_add(1);
        }
        Ok(())
    }

    /// `wait_group(keep)` / `wgmma_wait(keep)`: every read of the thread's groups older than the
    /// `keep` newest ends; the proxy reads now any it has not read yet.
    pub(crate) fn proxy_retire(&self, ctx: &mut Ctx, wgmma: bool, keep: i64) -> Result<(), Ub> {
        let t = self.proxy_issuer(ctx)?;
        if self.proxy.is_empty() {
            // The protocol issues no async-proxy read: nothing to retire.
            return Ok(());
        }
        let mut q = lock(&self.proxy[t]);
        let early = self.opts.fault == Fault::ProxyRetiresEarly;
        let mut i = 0;
        while i < q.reads.len() {
            let r = &q.reads[i];
            if r.wgmma == wgmma && r.age >= 1 && r.age as i64 > keep {
                if !r.done && !early {
                    let _ = self.buf_get(r.buf);
                }
                q.reads.remove(i);
                self.proxy_pending.fetch_sub(1, SeqCst);
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// The engine's read of buffer `d` for read `id` of thread `t`, unless a wait ended it first.
    fn proxy_engine_read(&self, t: usize, id: u64, d: usize) {
        if self.opts.fault == Fault::ProxyRetiresEarly {
            // The planted bug: the engine reads whether or not the wait already returned.
            let _ = self.buf_get(d);
            return;
        }
        let mut q = lock(&self.proxy[t]);
        if let Some(r) = q.reads.iter_mut().find(|r| r.id == id && !r.done) {
            let _ = self.buf_get(d);
            r.done = true;
        }
    }
}
