//! The warp and the CTA as execution barriers: `syncthreads`, `syncwarp` (with a mask), `elect()`,
//! and the warp-batched `commit` of converged lanes.

use super::*;
use crate::rt::footprint::Touch;

/// The operations whose effect depends on which lanes of the warp are converged.
#[derive(Clone, Debug)]
pub enum WarpOp {
    /// `commit(bar)`: one arrival on `bar` per group of lanes converged at it (warp-batched).
    Commit { bar: Ref },
}

impl WarpOp {
    /// For the partial-order reduction: a warp-batched arrival writes its barrier, and reads and
    /// moves its warp-mates (which lanes stand ready with it decides its arrivals; the lanes it
    /// joins run on): the footprint resolves it into the warp's record (`Footprints::for_thread`),
    /// which every step of a lane of a committing warp reads. Counted as one arrival per lane in
    /// the cut at waits (a group of converged lanes arrives once, never more than its lanes).
    pub fn touch(&self) -> Touch<'_> {
        use crate::rt::footprint::{PhaseEffect as P, ONE_ARRIVAL};
        match self {
            WarpOp::Commit { bar } => Touch::objects(Some((bar, true)), None, P::Arrives(&ONE_ARRIVAL)),
        }
    }

    /// Every expression the operation evaluates, outermost ones.
    pub fn exprs(&self, f: &mut dyn FnMut(&IExpr)) {
        match self {
            WarpOp::Commit { bar } => bar.exprs(f),
        }
    }

    /// The statement's name in the language.
    pub fn name(&self) -> &'static str {
        match self {
            WarpOp::Commit { .. } => "commit",
        }
    }
}
/// Neither path has left the other: one is a prefix of the other.
pub fn paths_compatible(a: &[u32], b: &[u32]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

impl Exec<'_> {
    /// Execute one operation whose effect depends on the warp's converged lanes.
    pub(super) fn warp_op(&mut self, op: &WarpOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        match op {
            WarpOp::Commit { bar } => self.op_commit(bar, locals),
        }
    }

    pub(super) fn op_commit(&mut self, bar: &Ref, locals: Option<&[i64]>) -> R<Option<i64>> {
        let b = self.resolve_bar(bar, locals)?;
        self.live_barrier(b, "commit")?;
        let Some(t) = self.thread.filter(|_| !self.in_completion) else {
            self.broken("R-COMMIT", "a commit executed outside a thread's own code".to_string());
            return Err(());
        };
        let w = self.p().threads[t].warp as usize;
        let seq = self.s.threads[t].commit_seq;
        // The converged lanes execute the commit as one instruction (the step is enabled
        // only once they have all reached it). Diverged groups that stand ready at the
        // same commit at the same moment may be re-converged by the hardware and issue it
        // together: the H200 then applies all their arrivals at once (synccheck: "barrier
        // overflow" on a count-1 barrier). Groups that get there at different times
        // arrive separately.
        let groups = self.m.commit_groups_at(&self.s, t, b);
        let lanes: Vec<usize> = groups.iter().flatten().copied().collect();
        let mut diverged = groups.len() > 1;
        for g in &groups {
            let sig = self.s.threads[g[0]].path_sig(self.p().threads[g[0]].role);
            diverged |= self.s.commit_logs[w]
                .iter()
                .any(|&(s2, b2, g2)| s2 == seq && b2 as usize == b && g2 != sig);
            self.s.commit_logs[w].push((seq, b as u16, sig));
        }
        self.s.commit_logs[w].sort_unstable();
        if diverged {
            self.fail(
                K::Entanglement,
                format!(
                    "{} commits to {} from a diverged warp: its lanes are split into {}, so the commit makes one arrival per group instead of one for the warp (add syncwarp before the commit)",
                    self.label(),
                    self.p().barriers[b].name,
                    if groups.len() > 1 { format!("{} groups committing together", groups.len()) } else { "several groups".to_string() }
                ),
            );
        }
        for &m in lanes.iter().filter(|&&m| m != t) {
            let c = self.s.threads[m].clock.clone();
            join_into(&mut self.s.barriers[b].clock, &c);
            self.s.threads[m].clock[m] += 1;
        }
        self.s.threads[t].commit_seq += 1;
        let arrivals = if self.m.mutant == Some(Mutant::CommitPerLane) {
            lanes.len()
        } else {
            groups.len()
        };
        self.arrive(b, arrivals as i64, false, None)?;
        for &m in lanes.iter().filter(|&&m| m != t) {
            self.obs.push(Obs::CommitJoined {
                bar: b as u16,
                lane: m as u16,
            });
            self.s.threads[m].commit_seq += 1;
            self.s.threads[m].pc += 1;
            if self.ended {
                break;
            }
            self.run_released([m]);
        }
        Ok(None)
    }

    /// A warp-level execution barrier (`syncwarp`, `syncwarp(mask)`, `elect()`): the lanes
    /// reconverge (their branch paths start afresh), and the elected lane, if any, gets 1 from its
    /// `elect()`, the others 0.
    pub(super) fn release_elect(&mut self, lanes: &[usize], what: &str, elected: Option<usize>) {
        let w = self.p().threads[lanes[0]].warp as usize;
        for &t in lanes {
            if let Some(slot) = self.m.at_elect(&self.s, t) {
                self.s.threads[t].locals[slot as usize] = (Some(t) == elected) as i64;
            }
            self.s.threads[t].path.clear();
            self.s.threads[t].commit_seq = 0;
        }
        if lanes.len()
            == self.m.warps[w]
                .iter()
                .filter(|&&m| self.s.threads[m].status != Status::Done)
                .count()
        {
            self.s.commit_logs[w].clear();
        }
        self.release(lanes, what);
    }

    /// An execution barrier: every participant acquires every other's history, then runs on.
    pub(super) fn release(&mut self, group: &[usize], what: &str) {
        let mut joined = self.s.threads[group[0]].clock.clone();
        let mut known = self.s.threads[group[0]].known.clone();
        for &t in group {
            join_into(&mut joined, &self.s.threads[t].clock);
            join_known(&mut known, &self.s.threads[t].known);
        }
        for &t in group {
            let th = &mut self.s.threads[t];
            th.clock = joined.clone();
            th.known = known.clone();
            th.clock[t] += 1;
            th.status = Status::Running;
            th.pc += 1;
        }
        self.obs.push(Obs::Released { what: what.to_string() });
        self.run_released(group.iter().copied());
    }

    /// Release one CTA whose unfinished threads all wait at `syncthreads` (per CTA: a cluster's
    /// CTAs pass theirs independently). Returns whether one was released.
    pub(super) fn settle_syncthreads(&mut self) -> bool {
        let n = self.s.threads.len();
        for cta in 0..self.p().cluster as u16 {
            let p = self.p();
            let live: Vec<usize> = (0..n)
                .filter(|&t| p.threads[t].cta == cta && self.s.threads[t].status != Status::Done)
                .collect();
            if !live.is_empty() && live.iter().all(|&t| self.s.threads[t].status == Status::AtSyncThreads) {
                self.release(&live, "syncthreads");
                return true;
            }
        }
        false
    }

    /// Release one warp group whose lanes all wait at the same `syncwarp`. An election is not
    /// released here but by an action (the choice of the elected lane). Returns whether one was.
    pub(super) fn settle_syncwarp(&mut self) -> bool {
        for t in 0..self.s.threads.len() {
            let Some(lanes) = self.m.warp_sync_group(&self.s, t) else {
                continue;
            };
            if lanes.iter().any(|&m| self.m.at_elect(&self.s, m).is_some()) {
                continue;
            }
            self.release_elect(&lanes, "syncwarp", None);
            return true;
        }
        false
    }
}

impl Model {
    /// The lanes converged with `t`: unfinished lanes of its warp and role whose branch path has not
    /// parted from `t`'s since the last `syncwarp` (`t` included). Some may still be behind it.
    pub fn converged_with(&self, s: &State, t: usize) -> Vec<usize> {
        let w = self.proto.threads[t].warp as usize;
        let role = self.proto.threads[t].role;
        self.warps[w]
            .iter()
            .copied()
            .filter(|&m| {
                let o = &s.threads[m];
                o.status != Status::Done && self.proto.threads[m].role == role && paths_compatible(&o.path, &s.threads[t].path)
            })
            .collect()
    }

    /// The groups that issue `t`'s commit (to barrier `b`) as one instruction: `t`'s converged
    /// lanes first, then every diverged group of the same warp and role standing ready at the same
    /// commit, with the same commit count, naming the same barrier.
    pub fn commit_groups_at(&self, s: &State, t: usize, b: usize) -> Vec<Vec<usize>> {
        let th = &s.threads[t];
        let mine = self.converged_with(s, t);
        let mut groups = vec![mine.clone()];
        let w = self.proto.threads[t].warp as usize;
        let role = self.proto.threads[t].role;
        let code = self.proto.code_of(t);
        let Some(Instr {
            kind: InstrKind::Op {
                op: IOp::Warp(WarpOp::Commit { bar }),
                ..
            },
            ..
        }) = code.instrs.get(th.pc as usize)
        else {
            return groups;
        };
        let g = &self.proto.barrier_groups[bar.group as usize];
        let mut taken: Vec<usize> = mine;
        for &m in &self.warps[w] {
            let o = &s.threads[m];
            if taken.contains(&m)
                || self.proto.threads[m].role != role
                || o.status != Status::Running
                || o.pc != th.pc
                || o.commit_seq != th.commit_seq
            {
                continue;
            }
            let index = match &bar.index {
                None => Some(0),
                Some(e) => e
                    .eval(&o.locals, Some(&self.proto.threads[m]), &mut |v| Ok(s.vars[v as usize].value))
                    .ok(),
            };
            if index.map(|i| g.base as i64 + i) != Some(b as i64) || !self.commit_ready(s, m) {
                continue;
            }
            let group = self.converged_with(s, m);
            taken.extend(&group);
            groups.push(group);
        }
        groups
    }

    /// A commit is one instruction for its converged lanes: it runs once every one of them stands
    /// at the same commit on the same path. A lane still behind on the path holds the others back
    /// (on hardware it could not lag: converged lanes execute together).
    pub fn commit_ready(&self, s: &State, t: usize) -> bool {
        let th = &s.threads[t];
        let code = self.proto.code_of(t);
        let Some(Instr {
            kind: InstrKind::Op {
                op: IOp::Warp(WarpOp::Commit { .. }),
                ..
            },
            ..
        }) = code.instrs.get(th.pc as usize)
        else {
            return true;
        };
        self.converged_with(s, t).into_iter().all(|m| {
            let o = &s.threads[m];
            o.status == Status::Running && o.pc == th.pc && o.commit_seq == th.commit_seq && o.path == th.path
        })
    }

    /// The result slot of the `elect()` a thread stands at, if it stands at one.
    pub fn at_elect(&self, s: &State, t: usize) -> Option<u16> {
        match self.proto.code_of(t).instrs.get(s.threads[t].pc as usize)?.kind {
            InstrKind::Elect { slot } => Some(slot),
            _ => None,
        }
    }

    /// The lanes a thread waiting at `syncwarp`, `syncwarp(mask)` or `elect()` waits for: the
    /// unfinished lanes of its warp (those in the mask for `syncwarp(mask)`; a mask that cannot
    /// be evaluated names the whole warp, and the step that ran it reported the fault).
    pub fn warp_sync_participants(&self, s: &State, t: usize) -> Vec<usize> {
        let w = self.proto.threads[t].warp as usize;
        let mask = match self.proto.code_of(t).instrs.get(s.threads[t].pc as usize).map(|i| &i.kind) {
            Some(InstrKind::SyncWarpMask { mask }) => mask
                .eval(&s.threads[t].locals, Some(&self.proto.threads[t]), &mut |v| {
                    Ok(s.vars[v as usize].value)
                })
                .ok(),
            _ => None,
        };
        self.warps[w]
            .iter()
            .copied()
            .filter(|&m| {
                s.threads[m].status != Status::Done
                    && mask.is_none_or(|k| self.proto.threads[m].lane < 64 && (k >> self.proto.threads[m].lane) & 1 != 0)
            })
            .collect()
    }

    /// In a state where nothing can move, a lane that waits at a warp collective (`syncwarp`,
    /// `syncwarp(mask)`, `elect()`) for a lane of its mask that will never execute a matching one.
    /// CUDA makes that undefined behaviour, not a hang ("all non-exited threads named in mask must
    /// execute a corresponding __syncwarp() with the same mask, or the result is undefined"; the
    /// same for elect.sync's membermask): the H200 let such lanes through (docs/hardware-notes.md).
    pub fn warp_collective_ub(&self, s: &State) -> Option<String> {
        let p = &self.proto;
        (0..s.threads.len()).find_map(|t| {
            if s.threads[t].status != Status::AtSyncWarp || self.warp_sync_group(s, t).is_some() {
                return None;
            }
            let what = if self.at_elect(s, t).is_some() { "elect()" } else { "syncwarp" };
            let group = self.warp_sync_participants(s, t);
            let missing = group.iter().copied().find(|&m| {
                s.threads[m].status != Status::AtSyncWarp
                    || (self.at_elect(s, m).is_some() != self.at_elect(s, t).is_some())
                    || self.warp_sync_participants(s, m) != group
            })?;
            Some(format!(
                "{} waits at {what} for {}, which its mask names but which never executes a matching one (undefined behaviour in CUDA: every non-exited lane named in the mask must execute it with the same mask)",
                p.thread_label(t),
                p.thread_label(missing)
            ))
        })
    }

    /// The group a waiting lane would be released with, once every participant waits for the
    /// same lanes; `None` while someone is still missing.
    pub fn warp_sync_group(&self, s: &State, t: usize) -> Option<Vec<usize>> {
        if s.threads[t].status != Status::AtSyncWarp {
            return None;
        }
        let group = self.warp_sync_participants(s, t);
        // `elect()` (elect.sync) and `syncwarp` (bar.warp.sync) are different instructions: lanes
        // waiting at one do not release lanes waiting at the other.
        let electing = self.at_elect(s, t).is_some();
        let ready = group.iter().all(|&m| {
            s.threads[m].status == Status::AtSyncWarp
                && self.at_elect(s, m).is_some() == electing
                && (m == t || self.warp_sync_participants(s, m) == group)
        });
        ready.then_some(group)
    }
}

pub(super) fn roles_with_commit(proto: &Protocol) -> Vec<bool> {
    proto
        .roles
        .iter()
        .map(|r| {
            r.code.instrs.iter().any(|i| {
                matches!(
                    i.kind,
                    InstrKind::Op {
                        op: IOp::Warp(WarpOp::Commit { .. }),
                        ..
                    }
                )
            })
        })
        .collect()
}
