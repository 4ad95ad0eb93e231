//! The execution barriers of the runtime: `syncthreads` (per CTA), `syncwarp` and
//! `syncwarp(mask)`, `elect()`, named barriers (`bar_sync`/`bar_arrive`), the cluster barrier,
//! and the convergence that decides who issues a warp-batched `commit` together.
//!
//! They are the hardware's scheduler rather than memory objects, so they share one mutex (the
//! gate): a thread that reaches one records where it stands, the gate releases every group whose
//! members are all there (the model's `settle`, docs/semantics.md), and the thread sleeps until it
//! is released. Taking the mutex orders the participants' memory, as `bar.sync` and
//! `barrier.cluster.arrive.release`/`wait.acquire` do. The rules follow model/src/rt/warp.rs,
//! named.rs and cluster.rs: participants are the unfinished lanes (exited threads do not hold a
//! barrier back), a warp arrives at a named barrier once all its unfinished lanes stand at the
//! same `bar_sync`/`bar_arrive`, counting `warp_size` threads, and a commit is issued once every
//! lane converged with the committing one (same warp and role, branch path not parted since the
//! last warp collective) stands at the same commit.

use crate::barrier::{Bound, Ub, WaitError};
use crate::sync::{lock, Condvar, Mutex};
use phasecheck_model::program::ir::{IOp, InstrKind, Protocol, WarpOp};
use phasecheck_model::ViolationKind;

/// Hardware named barriers per CTA.
pub const NAMED_BARRIERS: usize = 16;

/// Where a thread stands, as the gate sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    Running,
    Done,
    SyncThreads,
    /// `syncwarp` (mask `None`: the whole warp) or `elect()`.
    Warp {
        elect: bool,
        mask: Option<i64>,
    },
    /// At a `bar_sync`/`bar_arrive` whose warp has not arrived yet.
    Named {
        id: i64,
        count: i64,
        sync: bool,
    },
    /// Its warp arrived at a `bar_sync`: waiting for the barrier to complete.
    NamedWait {
        id: usize,
    },
    /// `cluster_wait` on the phase of this mark.
    ClusterWait {
        mark: i64,
    },
    /// At a `commit` to barrier `bar` (a flattened index), instruction `pc`.
    Commit {
        pc: u32,
        bar: usize,
    },
    /// Issues the commit of its converged group: `lanes` converged (one arrival on `bar`).
    CommitLead {
        bar: usize,
        lanes: usize,
    },
    /// Converged with a lane issuing the commit: goes on once that arrival is made.
    CommitJoined,
}

impl At {
    fn waiting(&self) -> bool {
        !matches!(self, At::Running | At::Done | At::CommitLead { .. })
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct NamedBar {
    /// Thread count of the current use; 0 when idle.
    count: i64,
    arrived: i64,
}

struct State {
    at: Vec<At>,
    /// The result of each thread's last election.
    elected: Vec<bool>,
    /// Branch outcomes since the last warp collective (roles that commit only).
    path: Vec<Vec<u32>>,
    commit_seq: Vec<u32>,
    named: Vec<[NamedBar; NAMED_BARRIERS]>,
    /// The cluster barrier: each thread's mark (0: not arrived; else the phase mark it arrived
    /// on), arrivals on the current phase, and the mark of the last completed phase (0: none).
    cluster_mark: Vec<i64>,
    cluster_arrived: i64,
    cluster_done: i64,
    /// Undefined behaviour a release found (operands that differ between a warp's lanes...).
    ub: Option<Ub>,
    /// Elections held so far.
    elections: u64,
}

/// The gate: one per run of a protocol that uses any execution barrier.
pub struct Gate {
    fault: crate::barrier::Fault,
    /// Varies which lane an election picks from run to run (any lane is one the model allows).
    seed: u64,
    state: Mutex<State>,
    cv: Condvar,
    warp: Vec<usize>,
    role: Vec<u16>,
    cta: Vec<u16>,
    lane: Vec<u32>,
    warps: Vec<Vec<usize>>,
    ctas: usize,
    warp_size: i64,
    /// Roles whose branch paths decide commit convergence.
    tracks_path: Vec<bool>,
}

/// Does the protocol need the gate?
pub fn uses_gate(p: &Protocol) -> bool {
    p.roles.iter().any(|r| {
        r.code.instrs.iter().any(|i| {
            matches!(
                i.kind,
                InstrKind::SyncThreads
                    | InstrKind::SyncWarp
                    | InstrKind::SyncWarpMask { .. }
                    | InstrKind::Elect { .. }
                    | InstrKind::NamedBar { .. }
                    | InstrKind::ClusterArrive { .. }
                    | InstrKind::ClusterWait { .. }
                    | InstrKind::Op {
                        op: IOp::Warp(WarpOp::Commit { .. }),
                        ..
                    }
            )
        })
    })
}

fn ub(m: String) -> Ub {
    Ub::new(ViolationKind::Assertion, m)
}

impl Gate {
    pub fn new(p: &Protocol, fault: crate::barrier::Fault, seed: u64) -> Gate {
        let n = p.threads.len();
        let nwarps = p.threads.iter().map(|t| t.warp as usize + 1).max().unwrap_or(0);
        let mut warps = vec![Vec::new(); nwarps];
        for (i, t) in p.threads.iter().enumerate() {
            warps[t.warp as usize].push(i);
        }
        let tracks_path = p
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
            .collect();
        let ctas = p.cluster.max(1) as usize;
        Gate {
            fault,
            seed,
            state: Mutex::new(State {
                at: vec![At::Running; n],
                elected: vec![false; n],
                path: vec![Vec::new(); n],
                commit_seq: vec![0; n],
                named: vec![[NamedBar::default(); NAMED_BARRIERS]; ctas],
                cluster_mark: vec![0; n],
                cluster_arrived: 0,
                cluster_done: 0,
                ub: None,
                elections: 0,
            }),
            cv: Condvar::new(),
            warp: p.threads.iter().map(|t| t.warp as usize).collect(),
            role: p.threads.iter().map(|t| t.role).collect(),
            cta: p.threads.iter().map(|t| t.cta).collect(),
            lane: p.threads.iter().map(|t| t.lane).collect(),
            warps,
            ctas,
            warp_size: p.warp_size as i64,
            tracks_path,
        }
    }

    /// Thread `t` stands at `at`; returns once the gate released it (`Ok(true)` for a lane that
    /// leads a commit: the barrier and the arrivals it makes for the group, then it calls
    /// [`Gate::committed`]). `bound`
    /// decides when a thread that is never released gives up.
    pub fn enter(&self, t: usize, at: At, bound: &Bound) -> Result<Option<(usize, i64)>, WaitError> {
        let mut g = lock(&self.state);
        g.at[t] = at;
        self.settle(&mut g);
        if let Some(u) = g.ub.take() {
            g.at[t] = At::Running;
            self.cv.notify_all();
            return Err(WaitError::Ub(u));
        }
        self.cv.notify_all();
        while g.at[t].waiting() {
            if let Err(e) = crate::interp::bound_check(bound) {
                // Giving up: the thread leaves the barrier (and exits as hung).
                g.at[t] = At::Running;
                return Err(e);
            }
            g = crate::interp::cv_wait(&self.cv, g);
        }
        Ok(match g.at[t] {
            // The group's arrivals: one (a planted bug makes one per lane).
            At::CommitLead { bar, lanes } if self.fault == crate::barrier::Fault::CommitPerLane => Some((bar, lanes as i64)),
            At::CommitLead { bar, .. } => Some((bar, 1)),
            _ => None,
        })
    }

    /// The commit's arrival has been made: its converged lanes go on.
    pub fn committed(&self, t: usize) {
        let mut g = lock(&self.state);
        let w = self.warp[t];
        for &m in &self.warps[w] {
            if g.at[m] == At::CommitJoined {
                g.at[m] = At::Running;
            }
        }
        g.at[t] = At::Running;
        self.cv.notify_all();
    }

    /// The result of `t`'s last `elect()`.
    pub fn elected(&self, t: usize) -> bool {
        lock(&self.state).elected[t]
    }

    /// `t` exited: it no longer holds anyone back.
    pub fn exit(&self, t: usize) -> Option<Ub> {
        let mut g = lock(&self.state);
        g.at[t] = At::Done;
        self.settle(&mut g);
        self.cv.notify_all();
        g.ub.take()
    }

    /// A branch of a thread whose role commits: its path may part from its lanes'.
    pub fn branch(&self, t: usize, pc: u32, taken: bool) {
        if !self.tracks_path[self.role[t] as usize] {
            return;
        }
        let mut g = lock(&self.state);
        g.path[t].push((pc << 1) | taken as u32);
        self.settle(&mut g);
        self.cv.notify_all();
    }

    /// `cluster_arrive`: undefined behaviour when the previous arrival was not waited for.
    pub fn cluster_arrive(&self, t: usize) -> Result<(), Ub> {
        let mut g = lock(&self.state);
        if g.cluster_mark[t] != 0 {
            return Err(ub(
                "cluster_arrive while its previous cluster_arrive has not been waited for (undefined behaviour)".into(),
            ));
        }
        g.cluster_mark[t] = g.cluster_done % 2 + 1;
        g.cluster_arrived += 1;
        self.settle(&mut g);
        self.cv.notify_all();
        Ok(())
    }

    /// `cluster_wait`'s phase mark, or undefined behaviour without an arrival before it.
    pub fn cluster_mark(&self, t: usize) -> Result<i64, Ub> {
        match lock(&self.state).cluster_mark[t] {
            0 => Err(ub("cluster_wait without a cluster_arrive before it (undefined behaviour)".into())),
            m => Ok(m),
        }
    }

    fn live(&self, g: &State, t: usize) -> bool {
        g.at[t] != At::Done
    }

    /// Release every group that can go, until nothing moves.
    fn settle(&self, g: &mut State) {
        while g.ub.is_none()
            && (self.settle_syncthreads(g)
                || self.settle_cluster(g)
                || self.settle_named(g)
                || self.settle_warp(g)
                || self.settle_commit(g))
        {}
    }

    fn settle_syncthreads(&self, g: &mut State) -> bool {
        for cta in 0..self.ctas as u16 {
            let live: Vec<usize> = (0..g.at.len()).filter(|&t| self.cta[t] == cta && self.live(g, t)).collect();
            if !live.is_empty() && live.iter().all(|&t| g.at[t] == At::SyncThreads) {
                for t in live {
                    g.at[t] = At::Running;
                }
                return true;
            }
        }
        false
    }

    fn settle_cluster(&self, g: &mut State) -> bool {
        let phase = g.cluster_done % 2 + 1;
        let n = g.at.len();
        let live: Vec<usize> = (0..n).filter(|&t| self.live(g, t)).collect();
        let mut moved = false;
        if g.cluster_arrived > 0 && !live.is_empty() && live.iter().all(|&t| g.cluster_mark[t] == phase) {
            g.cluster_arrived = 0;
            g.cluster_done = phase;
            moved = true;
        }
        let done = g.cluster_done;
        for t in 0..n {
            if g.at[t] == (At::ClusterWait { mark: done }) && g.cluster_mark[t] == done {
                g.cluster_mark[t] = 0;
                g.at[t] = At::Running;
                moved = true;
            }
        }
        moved
    }

    fn settle_named(&self, g: &mut State) -> bool {
        let ws = self.warp_size;
        for (w, members) in self.warps.iter().enumerate() {
            let lanes: Vec<usize> = members.iter().copied().filter(|&t| self.live(g, t)).collect();
            if lanes.is_empty() || !lanes.iter().all(|&t| matches!(g.at[t], At::Named { .. })) {
                continue;
            }
            let first = g.at[lanes[0]].clone();
            let At::Named { id, count, sync } = first else { unreachable!() };
            if lanes.iter().any(|&t| g.at[t] != first) {
                g.ub = Some(ub(format!(
                    "the lanes of warp {w} execute different bar_sync/bar_arrive instructions or operands (undefined behaviour)"
                )));
                return true;
            }
            if !(0..NAMED_BARRIERS as i64).contains(&id) {
                g.ub = Some(ub(format!("bar_sync/bar_arrive({id}, {count}) names a barrier outside 0..=15")));
                return true;
            }
            if count <= 0 || count % ws != 0 {
                g.ub = Some(ub(format!(
                    "bar_sync/bar_arrive({id}, {count}): the count is not a positive multiple of the warp size"
                )));
                return true;
            }
            let cta = self.cta[lanes[0]] as usize;
            let nb = &mut g.named[cta][id as usize];
            if nb.count != 0 && nb.count != count {
                g.ub = Some(ub(format!(
                    "bar_sync/bar_arrive({id}, {count}) while the barrier is in use with count {}",
                    nb.count
                )));
                return true;
            }
            nb.count = count;
            nb.arrived += if self.fault == crate::barrier::Fault::NamedCountsOneThread {
                1
            } else {
                ws
            };
            let complete = nb.arrived >= count;
            for &t in &lanes {
                g.at[t] = if sync { At::NamedWait { id: id as usize } } else { At::Running };
            }
            if complete {
                g.named[cta][id as usize] = NamedBar::default();
                for t in 0..g.at.len() {
                    if self.cta[t] as usize == cta && g.at[t] == (At::NamedWait { id: id as usize }) {
                        g.at[t] = At::Running;
                    }
                }
            }
            return true;
        }
        false
    }

    /// The lanes a thread at `syncwarp`/`elect()` waits for.
    fn participants(&self, g: &State, t: usize) -> Vec<usize> {
        let mask = match &g.at[t] {
            At::Warp { mask, .. } => *mask,
            _ => None,
        };
        self.warps[self.warp[t]]
            .iter()
            .copied()
            .filter(|&m| self.live(g, m) && mask.is_none_or(|k| self.lane[m] < 64 && (k >> self.lane[m]) & 1 != 0))
            .collect()
    }

    fn settle_warp(&self, g: &mut State) -> bool {
        for t in 0..g.at.len() {
            let At::Warp { elect, .. } = g.at[t] else { continue };
            let group = self.participants(g, t);
            let ready = group
                .iter()
                .all(|&m| matches!(g.at[m], At::Warp { elect: e, .. } if e == elect) && (m == t || self.participants(g, m) == group));
            if !ready {
                continue;
            }
            // The election: any lane is a choice the model allows; the seed varies it.
            g.elections += 1;
            let pick = (self.seed ^ g.elections.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xbf58_476d_1ce4_e5b9) >> 33;
            let chosen = pick as usize % group.len();
            for (i, &m) in group.iter().enumerate() {
                g.elected[m] = elect && i == chosen;
                g.path[m].clear();
                g.commit_seq[m] = 0;
                g.at[m] = At::Running;
            }
            return true;
        }
        false
    }

    /// Unfinished lanes of `t`'s warp and role whose branch paths have not parted from `t`'s.
    fn converged(&self, g: &State, t: usize) -> Vec<usize> {
        let compatible = |a: &[u32], b: &[u32]| {
            let n = a.len().min(b.len());
            a[..n] == b[..n]
        };
        self.warps[self.warp[t]]
            .iter()
            .copied()
            .filter(|&m| self.live(g, m) && self.role[m] == self.role[t] && compatible(&g.path[m], &g.path[t]))
            .collect()
    }

    fn settle_commit(&self, g: &mut State) -> bool {
        for t in 0..g.at.len() {
            let At::Commit { pc, bar } = g.at[t] else { continue };
            let group = self.converged(g, t);
            let ready = group.iter().all(|&m| {
                matches!(g.at[m], At::Commit { pc: p2, .. } if p2 == pc) && g.commit_seq[m] == g.commit_seq[t] && g.path[m] == g.path[t]
            });
            if !ready {
                continue;
            }
            let lead = group[0];
            for &m in &group {
                g.commit_seq[m] += 1;
                g.at[m] = if m == lead {
                    At::CommitLead { bar, lanes: group.len() }
                } else {
                    At::CommitJoined
                };
            }
            return true;
        }
        false
    }
}
