//! Named barriers (`bar_sync`/`bar_arrive`, PTX `bar.sync`/`bar.arrive`): sixteen per CTA (in a
//! cluster each CTA has its own sixteen, which order only that CTA's warps), counted in whole
//! warps. docs/model.md, "Named barriers, cp.async and byte ranges", says why
//! each rule is the one chosen; cp.async lives in copies.rs, byte ranges in memory.rs.

use super::*;

/// One hardware named barrier. Idle (`count == 0`) between uses: a use starts when the
/// first warp arrives, fixing the thread count, and ends when `count` threads have arrived.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NamedBarState {
    /// The thread count of the current use; 0 when idle.
    pub count: i64,
    /// Threads arrived so far (whole warps: `warp_size` each).
    pub arrived: i64,
    /// Join of the arrivers' histories (bar.sync and bar.arrive order memory among participants).
    pub clock: Clock,
    /// Join of the arrivers' phase knowledge of the mbarriers.
    pub known: Box<[i64]>,
}

/// Hardware named barriers per CTA (PTX: "Each CTA instance has sixteen barriers numbered 0..15").
pub const NAMED_BARRIERS: usize = 16;

/// The named barriers of a fresh state: sixteen idle ones when the protocol uses any, else none.
pub(super) fn initial_named(p: &Protocol, agents: usize) -> Box<[NamedBarState]> {
    (0..named_len(p)).map(|_| idle_named(agents, p.barriers.len())).collect()
}

/// Entries of `State::named`: sixteen named barriers per CTA when the protocol uses any (CTA c's
/// barrier i at `c * 16 + i`: each CTA of a cluster has its own), then the cluster barrier's two
/// when it uses that (rt/cluster.rs).
pub fn named_len(p: &Protocol) -> usize {
    let uses = p
        .roles
        .iter()
        .any(|r| r.code.instrs.iter().any(|i| matches!(i.kind, InstrKind::NamedBar { .. })));
    let cluster = p.roles.iter().any(|r| r.code.cluster_slot.is_some());
    let ctas = p.cluster.max(1) as usize;
    (if uses { NAMED_BARRIERS * ctas } else { 0 }) + if cluster { 2 } else { 0 }
}

pub(super) fn idle_named(agents: usize, barriers: usize) -> NamedBarState {
    NamedBarState {
        count: 0,
        arrived: 0,
        clock: vec![0; agents].into_boxed_slice(),
        known: vec![0; barriers].into_boxed_slice(),
    }
}

impl Model {
    /// The (id, count, sync) of the `bar_sync`/`bar_arrive` a thread stands at, its operands read
    /// as they stand (a peek: the step that executed it recorded the reads).
    pub fn named_bar_at(&self, s: &State, t: usize) -> Option<(i64, i64, bool)> {
        let InstrKind::NamedBar { id, count, sync } = &self.proto.code_of(t).instrs.get(s.threads[t].pc as usize)?.kind else {
            return None;
        };
        let me = &self.proto.threads[t];
        let mut peek = |v: u16| Ok(s.vars[v as usize].value);
        let id = id.eval(&s.threads[t].locals, Some(me), &mut peek).ok()?;
        let count = count.eval(&s.threads[t].locals, Some(me), &mut peek).ok()?;
        Some((id, count, *sync))
    }
}

impl Exec<'_> {
    // ---- named barriers ----------------------------------------------------------------------

    /// A warp whose unfinished lanes have all executed a `bar_sync`/`bar_arrive` arrives at the
    /// named barrier (warp_size threads); a completed barrier releases its `bar_sync` waiters.
    /// Returns whether anything moved (the caller settles again).
    pub(super) fn settle_named(&mut self) -> bool {
        if self.s.named.is_empty() {
            return false;
        }
        let ws = self.p().warp_size as i64;
        for w in 0..self.m.warps.len() {
            let lanes: Vec<usize> = self.m.warps[w]
                .iter()
                .copied()
                .filter(|&t| self.s.threads[t].status != Status::Done)
                .collect();
            if lanes.is_empty() || !lanes.iter().all(|&t| self.s.threads[t].status == Status::AtNamedBar) {
                continue;
            }
            let targets: Vec<Option<(i64, i64, bool)>> = lanes.iter().map(|&t| self.m.named_bar_at(&self.s, t)).collect();
            let first = targets[0];
            let label = self.p().thread_label(lanes[0]);
            let Some((id, count, sync)) = first.filter(|_| targets.iter().all(|x| *x == first)) else {
                self.fail(
                    K::Assertion,
                    format!(
                        "the lanes of warp {w} ({label} and others) execute different bar_sync/bar_arrive instructions or operands; bar.sync and bar.arrive are .aligned: every lane of the warp must execute the same one (undefined behaviour)"
                    ),
                );
                return true;
            };
            let what = if sync { "bar_sync" } else { "bar_arrive" };
            if !(0..NAMED_BARRIERS as i64).contains(&id) {
                self.fail(
                    K::Assertion,
                    format!("{label}: {what}({id}, {count}) names a hardware barrier outside 0..=15"),
                );
                return true;
            }
            if count <= 0 || count % ws != 0 {
                self.fail(
                    K::Assertion,
                    format!(
                        "{label}: {what}({id}, {count}): the thread count must be a positive multiple of the warp size ({ws}); the hardware counts whole warps (undefined behaviour)"
                    ),
                );
                return true;
            }
            // The warp's CTA's barrier `id` (a warp never spans two CTAs).
            let cta = self.p().threads[lanes[0]].cta as usize;
            let slot = cta * NAMED_BARRIERS + id as usize;
            let nb = &self.s.named[slot];
            if nb.count != 0 && nb.count != count {
                let had = nb.count;
                self.fail(
                    K::Assertion,
                    format!(
                        "{label}: {what}({id}, {count}) while named barrier {id} is in use with thread count {had}: mixing thread counts on one barrier is undefined behaviour"
                    ),
                );
                return true;
            }
            // The warp arrives: every lane releases its history into the barrier.
            for &t in &lanes {
                let c = self.s.threads[t].clock.clone();
                let k = self.s.threads[t].known.clone();
                let nb = &mut self.s.named[slot];
                join_into(&mut nb.clock, &c);
                join_known(&mut nb.known, &k);
                self.s.threads[t].clock[t] += 1;
            }
            let nb = &mut self.s.named[slot];
            nb.count = count;
            nb.arrived += ws;
            let arrived = nb.arrived;
            self.obs.push(Obs::NamedArrived {
                id: id as u16,
                warp: w as u16,
                arrived,
                count,
            });
            let mut go: Vec<usize> = Vec::new();
            for &t in &lanes {
                if sync {
                    self.s.threads[t].status = Status::AtNamedWait;
                } else {
                    go.push(t);
                }
            }
            if arrived >= count {
                let idle = idle_named(self.p().agent_count(), self.p().barriers.len());
                let nb = std::mem::replace(&mut self.s.named[slot], idle);
                self.obs.push(Obs::NamedCompleted { id: id as u16 });
                for t in 0..self.s.threads.len() {
                    if self.s.threads[t].status == Status::AtNamedWait
                        && self.p().threads[t].cta as usize == cta
                        && self.m.named_bar_at(&self.s, t).map(|x| x.0) == Some(id)
                    {
                        let th = &mut self.s.threads[t];
                        join_into(&mut th.clock, &nb.clock);
                        join_known(&mut th.known, &nb.known);
                        th.clock[t] += 1;
                        go.push(t);
                    }
                }
            }
            for &t in &go {
                let th = &mut self.s.threads[t];
                th.status = Status::Running;
                th.pc += 1;
            }
            self.run_released(go);
            return true;
        }
        false
    }
}
