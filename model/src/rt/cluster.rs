//! Cluster scope: the semantics of sm_90 thread-block clusters. Remote
//! arrives and DSMEM reads (`cta = R`), multicast copies (`multicast = MASK`), the cluster
//! barrier (`cluster_arrive`/`cluster_wait`/`cluster_sync`), and the lifetime rule for a CTA
//! that exits while a peer may still reach its shared memory. docs/model.md, "Clusters", says
//! why each rule is the one chosen.
//!
//! The lowering gives every CTA its own copy of each object, so most of the model needs no
//! change: a remote operation is the same operation run with its references redirected to the
//! target CTA's copies (`Exec::remote`, read by `group_index`).

use super::named::idle_named;
use super::*;

impl Model {
    /// The CTAs whose threads have all exited.
    fn exited_ctas(&self, s: &State) -> Vec<bool> {
        let p = &self.proto;
        let mut exited = vec![true; p.cluster as usize];
        for (t, th) in s.threads.iter().enumerate() {
            if th.status != Status::Done {
                exited[p.threads[t].cta as usize] = false;
            }
        }
        exited
    }

    /// A CTA of a cluster has exited while an async copy (a multicast landing, or a copy its
    /// peer issued) is still in flight into its shared memory: the hardware may already have
    /// given that shared memory to another CTA. The single-CTA form of this rule (every thread
    /// has exited) is `state_violations`' own.
    pub(super) fn cluster_lifetime(&self, s: &State) -> Option<Violation> {
        let p = &self.proto;
        if p.cluster == 1 || s.copies.is_empty() {
            return None;
        }
        let exited = self.exited_ctas(s);
        // A copy from shared memory still reads its source in the issuing CTA.
        if let Some(r) = s
            .copies
            .iter()
            .find(|c| c.kind == CopyKind::SrcRead && exited[p.cta_of_buffer(c.buf as usize)])
        {
            return Some(Violation {
                kind: K::Lifetime,
                message: format!(
                    "CTA {} has exited while the copy_async from its {} issued by {} still reads it; the CTA's shared memory may already belong to another CTA (end the kernel with cluster_sync(), or wait until the copy's landing is known)",
                    p.cta_of_buffer(r.buf as usize),
                    p.buffers[r.buf as usize].name,
                    p.thread_label(r.issuer as usize)
                ),
            });
        }
        let c = s.copies.iter().find(|c| {
            c.is_copy() && (exited[p.cta_of_buffer(c.buf as usize)] || (c.bar != NO_BAR && exited[p.cta_of_barrier(c.bar as usize)]))
        })?;
        let cta = p.cta_of_buffer(c.buf as usize);
        Some(Violation {
            kind: K::Lifetime,
            message: format!(
                "CTA {cta} has exited while the async copy into {} issued by {} is still in flight; the CTA's shared memory may already belong to another CTA (end the kernel with cluster_sync())",
                p.buffers[c.buf as usize].name,
                p.thread_label(c.issuer as usize)
            ),
        })
    }
}

/// The mark of the cluster barrier's phase after the one marked `completed` (0: none has
/// completed yet). Marks alternate 1, 2, 1, ...: a thread cannot arrive on a phase until it has
/// waited for the previous one, so no two live marks are more than one phase apart, and the
/// state stays finite however many phases a loop completes.
fn next_phase_mark(completed: i64) -> i64 {
    completed % 2 + 1
}

impl Exec<'_> {
    /// `arrive(B, cta = R)`, `read(BUF, cta = R)`: `op` on CTA R's objects; `copy_async(BUF, B,
    /// multicast = MASK)`: one copy into each CTA of the mask, each landing on its own barrier
    /// as its own event (the hardware writes each destination CTA and signals its mbarrier
    /// independently; nothing orders one CTA's landing before another's).
    pub(super) fn remote(&mut self, target: &IExpr, multicast: bool, op: &IOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        let value = match locals {
            Some(l) => self.eval_with(target, l)?,
            None => self.eval(target)?,
        };
        let n = self.p().cluster as i64;
        let ctas: Vec<usize> = if multicast {
            if !(1..(1 << n)).contains(&value) {
                self.fail(
                    K::Assertion,
                    format!(
                        "{}: multicast mask {value:#x} names no CTA or a CTA outside the cluster of {n} (undefined behaviour)",
                        self.label()
                    ),
                );
                return Err(());
            }
            (0..n as usize).filter(|c| (value >> c) & 1 != 0).collect()
        } else {
            if !(0..n).contains(&value) {
                self.fail(
                    K::Assertion,
                    format!(
                        "{}: CTA rank {value} is outside the cluster of {n} CTAs (mapa of a rank outside the cluster is undefined behaviour)",
                        self.label()
                    ),
                );
                return Err(());
            }
            vec![value as usize]
        };
        let exited = self.m.exited_ctas(&self.s);
        for cta in ctas {
            if exited[cta] {
                let what = match op {
                    IOp::Mbar(MbarOp::Arrive { .. }) => "arrives on a barrier of",
                    IOp::Mem(MemOp::Read { .. }) | IOp::Mem(MemOp::ReadPart { .. }) => "reads the shared memory of",
                    IOp::Mem(MemOp::Write { .. }) => "writes the shared memory of",
                    IOp::Mem(MemOp::AtomicAdd { .. }) => "adds atomically to a counter in the shared memory of",
                    IOp::Mem(MemOp::ReadCounter { .. }) => "reads a counter in the shared memory of",
                    _ => "copies into the shared memory of",
                };
                self.fail(
                    K::Lifetime,
                    format!(
                        "{} {what} CTA {cta}, whose threads have all exited: its shared memory may already belong to another CTA (CTA {cta} must not exit before its peers are done with it: cluster_sync() before exit)",
                        self.label()
                    ),
                );
                return Err(());
            }
            self.peer_barriers_initialised(cta, op)?;
            self.remote = Some(cta);
            let r = self.op_with(op, locals);
            self.remote = None;
            r?;
        }
        Ok(None)
    }

    /// A peer's declared barriers are initialised by that CTA (its first thread, before any of
    /// its threads runs): a thread of another CTA may arrive on them, or aim a multicast's
    /// complete_tx at them, only once that init happens-before it: a releasing cluster barrier
    /// after the init, or `fence.mbarrier_init.release.cluster` and then a relaxed one, as every
    /// CUTLASS cluster kernel starts. The model asks for the happens-before edge, kept in the
    /// column of the CTA's init agent (`Protocol::init_agent`).
    fn peer_barriers_initialised(&mut self, cta: usize, op: &IOp) -> R<()> {
        let p = self.p();
        let Some(t) = self.thread else { return Ok(()) };
        let reaches_barrier = matches!(
            op,
            IOp::Mbar(MbarOp::Arrive { .. })
                | IOp::Copy(CopyOp::Copy { .. })
                | IOp::Copy(CopyOp::CopyPart { .. })
                | IOp::Copy(CopyOp::CopyFrom { .. })
        );
        if !reaches_barrier || p.threads[t].cta as usize == cta {
            return Ok(());
        }
        let init = p.init_agent(cta).expect("cluster scope has init agents");
        if self.s.threads[t].clock[init] == 0 {
            self.fail(
                K::Uninitialized,
                format!(
                    "{} reaches a barrier of CTA {cta} before that CTA's barrier init is visible to it (after the init, cluster_sync(), or fence_mbarrier_init() then cluster_arrive_relaxed() and cluster_wait(), before any peer uses the barriers)",
                    self.label()
                ),
            );
            return Err(());
        }
        Ok(())
    }

    /// `fence_mbarrier_init()` under cluster scope: a release fence for barrier inits. It covers
    /// the thread's CTA's declared barriers (a CTA's threads start after their inits: epoch 1 of
    /// the CTA's init agent) and every manual `init` of a barrier by a thread of its CTA that
    /// happened before it; the latter are published at a fresh epoch of the init agent. The
    /// epoch the fence covers is kept in the code's `init_fence_slot` for the thread's later
    /// relaxed cluster arrivals (`cluster_arrive`).
    ///
    /// An epoch of the init agent stands for every publication up to it, so a fence takes a
    /// fresh one only when its thread knows every earlier publication (it then covers them too:
    /// they happened before it); otherwise its inits stay ordered by their `init_by` alone, which
    /// may report an `uninitialized` the hardware would not show, never miss one.
    pub(super) fn fence_cta_inits(&mut self, t: usize) {
        let p = self.p();
        let Some(slot) = p.code_of(t).init_fence_slot else { return };
        let cta = p.threads[t].cta;
        let ia = p.init_agent(cta as usize).expect("cluster scope has init agents");
        let clock = &self.s.threads[t].clock;
        let covered: Vec<usize> = (0..self.s.barriers.len())
            .filter(|&b| {
                let bs = &self.s.barriers[b];
                bs.life == Life::Live
                    && bs.init_pub == 0
                    && bs.init_by.is_some_and(|(a, e)| {
                        let a = a as usize;
                        a < p.threads.len() && p.threads[a].cta == cta && clock[a] >= e
                    })
            })
            .collect();
        let latest = self.s.threads.iter().map(|th| th.clock[ia]).max().unwrap_or(0);
        if !covered.is_empty() && clock[ia] == latest {
            let v = latest + 1;
            for b in covered {
                self.s.barriers[b].init_pub = v;
            }
            self.s.threads[t].clock[ia] = v;
        }
        let v = self.s.threads[t].clock[ia] as i64;
        let l = &mut self.s.threads[t].locals[slot as usize];
        *l = (*l).max(v);
    }

    /// Whether barrier inits published at epoch `init_pub` of the init agent of `initialiser`'s
    /// CTA are visible to the current agent.
    pub(super) fn init_published(&self, initialiser: usize, init_pub: u32) -> bool {
        let p = self.p();
        init_pub > 0
            && initialiser < p.threads.len()
            && p.init_agent(p.threads[initialiser].cta as usize)
                .is_some_and(|ia| self.clock()[ia] >= init_pub)
    }

    /// The cluster barrier's current phase and its last completed one (`State::named`).
    fn cluster_entries(&self) -> (usize, usize) {
        let n = self.s.named.len();
        (n - 2, n - 1)
    }

    /// `barrier.cluster.arrive.release`: the thread's history is released into the current phase.
    /// Arriving again before `cluster_wait` is undefined behaviour (PTX: each thread arrives once
    /// per phase and must wait before it arrives again).
    /// `relaxed` (`barrier.cluster.arrive.relaxed`): the arrival counts, but releases nothing, so
    /// the waiters of the phase do not acquire the thread's history through it.
    pub(super) fn cluster_arrive(&mut self, t: usize, slot: usize, relaxed: bool) {
        if self.s.threads[t].locals[slot] != 0 {
            self.fail(
                K::Assertion,
                format!(
                    "{}: cluster_arrive while its previous cluster_arrive has not been waited for (undefined behaviour: each thread arrives once per phase of the cluster barrier and waits before it arrives again)",
                    self.label()
                ),
            );
            return;
        }
        let (cur, done) = self.cluster_entries();
        self.s.threads[t].locals[slot] = next_phase_mark(self.s.named[done].count);
        let clock = self.s.threads[t].clock.clone();
        let known = self.s.threads[t].known.clone();
        let p = self.p();
        let fenced = p.code_of(t).init_fence_slot.map_or(0, |f| self.s.threads[t].locals[f as usize]) as u32;
        let nb = &mut self.s.named[cur];
        if !relaxed {
            join_into(&mut nb.clock, &clock);
            join_known(&mut nb.known, &known);
        } else if fenced > 0 {
            // A release fence before a relaxed arrival releases what the fence covered:
            // `fence_mbarrier_init()` covers its CTA's barrier inits up to this epoch.
            let ia = p.init_agent(p.threads[t].cta as usize).expect("cluster scope has init agents");
            nb.clock[ia] = nb.clock[ia].max(fenced);
        }
        nb.arrived += 1;
        self.s.threads[t].clock[t] += 1;
    }

    /// `barrier.cluster.wait.acquire`: blocks until the phase the thread arrived on completes.
    /// A wait with no arrival before it is undefined behaviour.
    pub(super) fn cluster_wait(&mut self, t: usize, slot: usize) {
        if self.s.threads[t].locals[slot] == 0 {
            self.fail(
                K::Assertion,
                format!(
                    "{}: cluster_wait without a cluster_arrive before it (undefined behaviour: the wait names the phase of the thread's own arrival)",
                    self.label()
                ),
            );
            return;
        }
        self.s.threads[t].status = Status::AtClusterWait;
    }

    /// The cluster barrier's phase completes once every unfinished thread of the cluster has
    /// arrived on it (threads that exited count as arrived, as for `barrier.cluster`); then its
    /// waiters acquire every arrival's history and run on. True if something changed.
    pub(super) fn settle_cluster(&mut self) -> bool {
        let p = self.p();
        if !p.roles.iter().any(|r| r.code.cluster_slot.is_some()) {
            return false;
        }
        let (cur, done) = self.cluster_entries();
        let phase = next_phase_mark(self.s.named[done].count);
        let arrived = |t: usize| {
            p.code_of(t)
                .cluster_slot
                .is_some_and(|slot| self.s.threads[t].locals[slot as usize] == phase)
        };
        let n = self.s.threads.len();
        let live: Vec<usize> = (0..n).filter(|&t| self.s.threads[t].status != Status::Done).collect();
        if self.s.named[cur].arrived > 0 && !live.is_empty() && live.iter().all(|&t| arrived(t)) {
            let idle = idle_named(p.agent_count(), p.barriers.len());
            let mut completed = std::mem::replace(&mut self.s.named[cur], idle);
            completed.count = phase;
            self.s.named[done] = completed;
            self.obs.push(Obs::Released {
                what: "cluster barrier phase".to_string(),
            });
        }
        let completed = self.s.named[done].count;
        let waiters: Vec<usize> = (0..n)
            .filter(|&t| {
                self.s.threads[t].status == Status::AtClusterWait
                    && p.code_of(t)
                        .cluster_slot
                        .is_some_and(|slot| self.s.threads[t].locals[slot as usize] == completed)
            })
            .collect();
        if waiters.is_empty() {
            return false;
        }
        let (clock, known) = (self.s.named[done].clock.clone(), self.s.named[done].known.clone());
        for &t in &waiters {
            let slot = p.code_of(t).cluster_slot.expect("a waiter has the slot") as usize;
            let th = &mut self.s.threads[t];
            join_into(&mut th.clock, &clock);
            join_known(&mut th.known, &known);
            th.clock[t] += 1;
            th.locals[slot] = 0;
            th.status = Status::Running;
            th.pc += 1;
        }
        self.obs.push(Obs::Released {
            what: "cluster_wait".to_string(),
        });
        self.run_released(waiters);
        true
    }
}
