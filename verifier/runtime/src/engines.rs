//! The copy engines of the runtime: TMA-style copies that land on a barrier after a random
//! delay (in chunks when an `expect_tx` under-counts, as the model's partial landing), cp.async
//! copies with their arrive-ons and groups, the byte ranges partial copies and reads address, and
//! the turnstile of directed runs that lands copies on their turns.
//!
//! cp.async follows model/src/rt/copies.rs: a thread's cp.async copies and arrive-ons form one
//! queue in issue order; a landing writes its bytes and fires every arrive-on no copy still in
//! flight precedes (`.noinc` or not: without it the pending count was raised when the arrive-on
//! was issued); `cp_async_commit_group` ages the thread's copies by one group, and
//! `cp_async_wait_group(N)` returns once every copy older than the N newest groups has landed
//! (the waiter lands any its engine has not landed yet itself: the wait is where the model lands
//! them).

use crate::barrier::Ub;
use crate::interp::{cv_wait, Copy, Ctx, Stop, World};
use crate::sync::{lock, thread};
use phasecheck_model::program::ir::{CopyOp, IOp, InstrKind, MemOp, Protocol, ProxyOp};
use phasecheck_model::rt::Action;
use phasecheck_model::ViolationKind;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

/// Group ages past this are all older than any `cp_async_wait_group` names.
const MAX_GROUP_AGE: u16 = (1 << 13) - 1;

/// Versions per byte range of a buffer that partial accesses touch.
pub(crate) struct RangeMap {
    size: i64,
    /// Sorted, disjoint `(lo, hi, version)` covering `0 .. size`.
    parts: std::sync::Mutex<Vec<(i64, i64, i64)>>,
}

impl RangeMap {
    pub(crate) fn new(size: i64) -> RangeMap {
        RangeMap {
            size,
            parts: std::sync::Mutex::new(vec![(0, size.max(0), 0)]),
        }
    }

    fn set(&self, lo: i64, hi: i64, v: i64) {
        let (lo, hi) = (lo.clamp(0, self.size), hi.clamp(0, self.size));
        let mut p = self.parts.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<(i64, i64, i64)> = Vec::with_capacity(p.len() + 2);
        for &(a, b, x) in p.iter() {
            if b <= lo || a >= hi || lo >= hi {
                out.push((a, b, x));
                continue;
            }
            if a < lo {
                out.push((a, lo, x));
            }
            if b > hi {
                out.push((hi, b, x));
            }
        }
        if lo < hi {
            out.push((lo, hi, v));
        }
        out.sort_unstable();
        // Neighbours of one version merge, so a buffer written whole has one range again.
        let mut merged: Vec<(i64, i64, i64)> = Vec::with_capacity(out.len());
        for r in out {
            match merged.last_mut() {
                Some(l) if l.2 == r.2 && l.1 == r.0 => l.1 = r.1,
                _ => merged.push(r),
            }
        }
        *p = merged;
    }

    /// The version every byte of `lo .. hi` has, or -1 for a mix (the model's `version_in`).
    fn version_in(&self, lo: i64, hi: i64) -> i64 {
        let p = self.parts.lock().unwrap_or_else(|e| e.into_inner());
        if p.len() == 1 {
            return p[0].2;
        }
        let mut inside = p.iter().filter(|r| r.0 < hi && lo < r.1 && r.0 < r.1 && lo < hi).map(|r| r.2);
        let first = inside.next().unwrap_or(0);
        if inside.all(|v| v == first) {
            first
        } else {
            phasecheck_model::rt::memory::MIXED_VERSIONS
        }
    }
}

/// The operations a protocol's codes run (through remote operations too).
fn each_op(p: &Protocol, f: &mut dyn FnMut(&IOp)) {
    fn walk(op: &IOp, f: &mut dyn FnMut(&IOp)) {
        f(op);
        if let IOp::Remote { op, .. } = op {
            walk(op, f);
        }
    }
    for code in p.roles.iter().map(|r| &r.code).chain(p.completions.iter()) {
        for i in &code.instrs {
            if let InstrKind::Op { op, .. } = &i.kind {
                walk(op, f);
            }
        }
    }
}

/// Per buffer: does a partial copy, a partial read or write, or a cp.async address part of it? (Every
/// CTA's copy of the group, as a remote operation may name any.)
pub(crate) fn ranged_buffers(p: &Protocol) -> Vec<bool> {
    let per = p.buffer_groups.len() / p.cluster.max(1) as usize;
    let mut groups = vec![false; per.max(1)];
    each_op(p, &mut |op| {
        if let IOp::Copy(CopyOp::CopyPart { buf, .. })
        | IOp::Mem(MemOp::ReadPart { buf, .. } | MemOp::WritePart { buf, .. })
        | IOp::Copy(CopyOp::CpAsync { buf, .. }) = op
        {
            groups[buf.group as usize % per.max(1)] = true;
        }
    });
    let mut out = vec![false; p.buffers.len()];
    for (gi, g) in p.buffer_groups.iter().enumerate() {
        if groups[gi % per.max(1)] {
            for b in g.base..g.base + g.len {
                out[b as usize] = true;
            }
        }
    }
    out
}

pub(crate) fn uses_cp_async(p: &Protocol) -> bool {
    let mut uses = false;
    each_op(p, &mut |op| {
        // The commit and wait of a thread that issued no copy still reach its (empty) queue.
        uses |= matches!(
            op,
            IOp::Copy(CopyOp::CpAsync { .. } | CopyOp::CpAsyncArrive { .. } | CopyOp::CpAsyncCommitGroup | CopyOp::CpAsyncWait { .. })
        )
    });
    uses
}

pub(crate) fn uses_proxy_reads(p: &Protocol) -> bool {
    let mut uses = false;
    each_op(p, &mut |op| {
        uses |= matches!(
            op,
            IOp::Proxy(ProxyOp::StoreAsync { .. }) | IOp::Proxy(ProxyOp::StorePartAsync { .. }) | IOp::Proxy(ProxyOp::Wgmma { .. })
        )
    });
    uses
}

/// One thread's cp.async copies and arrive-ons, in issue order.
#[derive(Default)]
pub(crate) struct CpQueue {
    next_id: u64,
    entries: Vec<CpEntry>,
}

enum CpEntry {
    /// `age`: 0 while not in a committed group, then 1 for the newest group, 2 the one before...
    Copy {
        id: u64,
        buf: usize,
        lo: i64,
        hi: i64,
        version: i64,
        age: u16,
    },
    ArriveOn {
        bar: usize,
    },
}

impl World {
    pub(crate) fn buf_get(&self, d: usize) -> i64 {
        match &self.ranges[d] {
            Some(r) => r.version_in(0, r.size),
            None => self.buffers[d].get(),
        }
    }

    pub(crate) fn buf_set(&self, d: usize, v: i64) {
        match &self.ranges[d] {
            Some(r) => r.set(0, r.size, v),
            None => self.buffers[d].set(v),
        }
    }

    pub(crate) fn buf_get_range(&self, d: usize, lo: i64, hi: i64) -> i64 {
        match &self.ranges[d] {
            Some(r) => r.version_in(lo, hi),
            None => self.buffers[d].get(),
        }
    }

    pub(crate) fn buf_set_range(&self, d: usize, lo: i64, hi: i64, v: i64) {
        match &self.ranges[d] {
            Some(r) => r.set(lo, hi, v),
            None => self.buffers[d].set(v),
        }
    }

    /// Bytes `lo .. hi` must lie inside the buffer (the model's `range_ok`).
    pub(crate) fn range_ok(&self, d: usize, lo: i64, hi: i64) -> Result<(), Ub> {
        let size = self.proto.buffers[d].bytes;
        if lo < 0 || hi > size || lo > hi {
            return Err(Ub::new(
                ViolationKind::Assertion,
                format!("bytes {lo}..{hi} are outside {} ({size} bytes)", self.proto.buffers[d].name),
            ));
        }
        Ok(())
    }

    /// Issue a copy of `bytes` into buffer `d` (bytes `range` of it, or all) tracked by barrier `b`.
    pub(crate) fn issue_copy(&self, ctx: &mut Ctx, d: usize, b: usize, bytes: i64, version: i64, range: Option<(i64, i64)>) {
        self.writes[d].fetch_add(1, Relaxed);
        self.inflight.fetch_add(1, SeqCst);
        let c = Copy {
            buf: d,
            bar: b,
            remaining: bytes,
            version,
            range,
        };
        if self.directed().is_some() {
            lock(&self.turn).1.push(c);
        } else {
            self.spawn_copy(c, ctx);
        }
    }

    fn cp_issuer(&self, ctx: &Ctx, what: &str) -> Result<usize, Ub> {
        match ctx.t.filter(|_| ctx.completing.is_none()) {
            Some(t) => Ok(t),
            None => Err(Ub::new(
                ViolationKind::CompletionMisuse,
                format!("a {what} in a completion function"),
            )),
        }
    }

    /// `cp_async(BUF, offset, bytes)`.
    pub(crate) fn cp_async(&self, ctx: &mut Ctx, d: usize, off: i64, n: i64, version: i64) -> Result<(), Ub> {
        let t = self.cp_issuer(ctx, "cp_async")?;
        self.range_ok(d, off, off + n)?;
        self.writes[d].fetch_add(1, Relaxed);
        self.inflight.fetch_add(1, SeqCst);
        let id = {
            let mut q = lock(&self.cp[t]);
            let id = q.next_id;
            q.next_id += 1;
            q.entries.push(CpEntry::Copy {
                id,
                buf: d,
                lo: off,
                hi: off + n,
                version,
                age: 0,
            });
            id
        };
        let delay = self.copy_delay(ctx);
        self.spawn_helper(delay, move |w| {
            if let Err(u) = w.land_cp(t, id) {
                w.fail(u);
            }
        });
        Ok(())
    }

    /// `cp_async_arrive(B)` / `cp_async_arrive_noinc(B)`.
    pub(crate) fn cp_async_arrive(&self, ctx: &mut Ctx, b: usize, noinc: bool) -> Result<(), Stop> {
        let t = self.cp_issuer(ctx, "cp_async_arrive")?;
        self.barriers[b].live(if noinc { "cp_async_arrive_noinc" } else { "cp_async_arrive" })?;
        let mut q = lock(&self.cp[t]);
        let early = self.opts.fault == crate::barrier::Fault::ArriveOnBeforeCopies;
        if early || !q.entries.iter().any(|e| matches!(e, CpEntry::Copy { .. })) {
            drop(q);
            // Nothing to track: the arrive-on happens at once (without `.noinc` the increment
            // and the arrival cancel out).
            if noinc {
                let mut done = self.completion(b);
                self.with_bound(|bd| self.barriers[b].arrive(1, None, false, &mut done, bd))?;
            }
            return Ok(());
        }
        if !noinc {
            self.with_bound(|bd| self.barriers[b].raise_pending(bd))?;
        }
        q.entries.push(CpEntry::ArriveOn { bar: b });
        Ok(())
    }

    /// `cp_async_commit_group()`.
    pub(crate) fn cp_async_commit(&self, ctx: &mut Ctx) -> Result<(), Ub> {
        let t = self.cp_issuer(ctx, "cp_async_commit_group")?;
        for e in lock(&self.cp[t]).entries.iter_mut() {
            if let CpEntry::Copy { age, .. } = e {
                *age = (*age + 1).min(MAX_GROUP_AGE);
            }
        }
        Ok(())
    }

    /// `cp_async_wait_group(keep)`: every copy older than the `keep` newest groups has landed.
    pub(crate) fn cp_async_wait(&self, ctx: &mut Ctx, keep: i64) -> Result<(), Ub> {
        let t = self.cp_issuer(ctx, "cp_async_wait_group")?;
        let ids: Vec<u64> = lock(&self.cp[t])
            .entries
            .iter()
            .filter_map(|e| match e {
                CpEntry::Copy { id, age, .. } if *age as i64 > keep => Some(*id),
                _ => None,
            })
            .collect();
        for id in ids {
            self.land_cp(t, id)?;
        }
        Ok(())
    }

    /// cp.async copy `id` of thread `t` lands (unless it already has): its bytes, then every
    /// arrive-on of the thread that no copy in flight precedes fires. All under the queue's
    /// mutex, so that whoever lands it next (the engine or the waiter) sees it done.
    fn land_cp(&self, t: usize, id: u64) -> Result<(), Ub> {
        let seq = self.seq.fetch_add(1, SeqCst);
        let mut q = lock(&self.cp[t]);
        let Some(i) = q.entries.iter().position(|e| matches!(e, CpEntry::Copy { id: x, .. } if *x == id)) else {
            return Ok(());
        };
        let CpEntry::Copy { buf, lo, hi, version, .. } = q.entries.remove(i) else {
            unreachable!("found as a copy")
        };
        if self.proto.cluster > 1 && self.cta_alive[self.proto.cta_of_buffer(buf)].load(SeqCst) == 0 {
            self.inflight.fetch_sub(1, SeqCst);
            return Err(Ub::new(
                ViolationKind::Lifetime,
                "a cp.async copy lands in a CTA whose threads have all exited",
            ));
        }
        self.buf_set_range(buf, lo, hi, version);
        self.landed_seqs.lock().unwrap_or_else(|p| p.into_inner()).push(seq);
        self.inflight.fetch_sub(1, SeqCst);
        self.stepped();
        loop {
            let first_copy = q
                .entries
                .iter()
                .position(|e| matches!(e, CpEntry::Copy { .. }))
                .unwrap_or(usize::MAX);
            let Some(k) = q
                .entries
                .iter()
                .position(|e| matches!(e, CpEntry::ArriveOn { .. }))
                .filter(|k| *k < first_copy)
            else {
                break;
            };
            let CpEntry::ArriveOn { bar } = q.entries.remove(k) else {
                unreachable!("found as an arrive-on")
            };
            let mut done = self.completion(bar);
            match self.with_bound(|bd| self.barriers[bar].arrive(1, None, false, &mut done, bd)) {
                Ok(_) => self.stepped(),
                Err(crate::barrier::WaitError::Ub(u)) => return Err(u),
                Err(_) => return Ok(()),
            }
        }
        Ok(())
    }

    fn spawn_copy(&self, c: Copy, ctx: &mut Ctx) {
        let delay = self.copy_delay(ctx);
        self.spawn_helper(delay, move |w| w.land_copy(c));
    }

    /// The random delay before a free-running copy lands.
    pub(crate) fn copy_delay(&self, ctx: &mut Ctx) -> Duration {
        if cfg!(loom) || self.opts.max_delay.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_nanos(next_rand(&mut ctx.rng) % (self.opts.max_delay.as_nanos() as u64 + 1))
        }
    }

    /// Run `f` on a helper thread (a copy engine) after `delay`.
    pub(crate) fn spawn_helper(&self, delay: Duration, f: impl FnOnce(&World) + Send + 'static) {
        let _unused = ();
        {
            // The helper needs the world for as long as it runs; the world outlives every thread
            // because `run` joins them all before returning, but loom and std want 'static closures,
            // so it goes through a raw pointer wrapped to be sent.
            let me = SendPtr(self as *const World);
            let h = thread::spawn(move || {
                let me = me;
                // SAFETY: `run` joins every copy thread (the `copy_threads` list) before the World is
                // dropped, so the pointer stays valid for this thread's whole life.
                let w: &World = unsafe { &*me.0 };
                if !delay.is_zero() {
                    std::thread::sleep(delay);
                }
                f(w);
            });
            self.copy_threads.lock().unwrap_or_else(|p| p.into_inner()).push(h);
        }
    }

    /// A free-running copy lands: the data first, then its bytes on the barrier (a release).
    fn land_copy(&self, mut c: Copy) {
        // `loop` rather than `while`: a zero-byte copy still lands (its data, a complete_tx(0)).
        loop {
            let seq = self.seq.fetch_add(1, SeqCst);
            match self.land_some(&c, Landing::Auto) {
                Ok(n) if n < c.remaining => c.remaining -= n,
                Ok(_) => {
                    self.landed_seqs.lock().unwrap_or_else(|p| p.into_inner()).push(seq);
                    return;
                }
                Err(Stop::Ub(u)) => {
                    self.unlanded.fetch_add(1, SeqCst);
                    self.fail(u);
                    return;
                }
                Err(_) => {
                    self.unlanded.fetch_add(1, SeqCst);
                    return;
                }
            }
        }
    }

    pub(crate) fn land_some(&self, c: &Copy, how: Landing) -> Result<i64, Stop> {
        if self.proto.cluster > 1 {
            let (cb, cbar) = (self.proto.cta_of_buffer(c.buf), self.proto.cta_of_barrier(c.bar));
            if self.cta_alive[cb].load(SeqCst) == 0 || self.cta_alive[cbar].load(SeqCst) == 0 {
                return Err(Stop::Ub(Ub::new(
                    ViolationKind::Lifetime,
                    "an async copy lands in a CTA whose threads have all exited",
                )));
            }
        }
        match c.range {
            Some((lo, hi)) => self.buf_set_range(c.buf, lo, hi, c.version),
            None => self.buf_set(c.buf, c.version),
        }
        let mut done = self.completion(c.bar);
        let bar = &self.barriers[c.bar];
        let n = self.with_bound(|bd| match how {
            Landing::Auto => bar.land(c.remaining, false, &mut done, bd),
            Landing::All => bar.complete_tx(c.remaining, &mut done, bd).map(|()| c.remaining),
            Landing::Part => bar.land(c.remaining, true, &mut done, bd),
        })?;
        if n == c.remaining {
            self.inflight.fetch_sub(1, SeqCst);
        }
        self.stepped();
        Ok(n)
    }

    // ---- directed runs --------------------------------------------------------------------

    /// Wait for `Thread(t)`'s turn; false when the schedule ended (or was abandoned) first.
    pub(crate) fn take_turn(&self, t: usize) -> bool {
        let Some(actions) = self.directed() else { return true };
        let deadline = Instant::now() + self.opts.wait_timeout;
        let mut g = lock(&self.turn);
        loop {
            if g.0 >= actions.len() || self.cancelled() {
                return false;
            }
            if actions[g.0] == Action::Thread(t as u16) {
                return true;
            }
            if Instant::now() >= deadline {
                self.note(&self.diverged, format!("thread {t} never got its turn (stuck at action {})", g.0));
                return false;
            }
            g = cv_wait(&self.turn_cv, g);
        }
    }

    pub(crate) fn pass_turn(&self) {
        if self.directed().is_none() {
            return;
        }
        let mut g = lock(&self.turn);
        g.0 += 1;
        self.turn_cv.notify_all();
    }

    /// The director: performs the landings of a directed schedule on their turns.
    pub(crate) fn direct(&self) {
        let actions = self.directed().expect("directed").to_vec();
        let deadline = Instant::now() + self.opts.wait_timeout;
        loop {
            let g = lock(&self.turn);
            if g.0 >= actions.len() || self.cancelled() {
                break;
            }
            let (i, part) = match actions[g.0] {
                Action::Land(i) => (i as usize, false),
                Action::LandPart(i) => (i as usize, true),
                Action::Thread(_) => {
                    if Instant::now() >= deadline {
                        let at = g.0;
                        drop(g);
                        self.note(&self.diverged, format!("action {at} ({:?}) did not finish", actions[at]));
                        self.abort.store(true, SeqCst);
                        break;
                    }
                    drop(cv_wait(&self.turn_cv, g));
                    continue;
                }
            };
            let Some(c) = g.1.get(i).cloned() else {
                let at = g.0;
                drop(g);
                self.note(&self.diverged, format!("action {at}: no copy {i} in flight"));
                self.abort.store(true, SeqCst);
                break;
            };
            drop(g);
            let landed = self.land_some(&c, if part { Landing::Part } else { Landing::All });
            let mut g = lock(&self.turn);
            match landed {
                Ok(bytes) if bytes < c.remaining => g.1[i].remaining -= bytes,
                Ok(_) => {
                    g.1.remove(i);
                }
                Err(Stop::Ub(u)) => self.fail(u),
                Err(_) => {}
            }
            g.0 += 1;
            self.turn_cv.notify_all();
        }
        // Release threads still waiting for a turn.
        let mut g = lock(&self.turn);
        g.0 = g.0.max(actions.len());
        self.turn_cv.notify_all();
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Landing {
    Auto,
    All,
    Part,
}

struct SendPtr(*const World);
// SAFETY: World is Sync (atomics, mutexes, slots); the pointer is only dereferenced while the
// World is alive (see `spawn_copy`).
unsafe impl Send for SendPtr {}

pub(crate) fn next_rand(s: &mut u64) -> u64 {
    // xorshift64*: enough to vary schedules; not for anything else.
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_f491_4f6c_dd1d)
}
