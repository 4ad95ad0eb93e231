//! The future cut at waits (docs/model.md, "The future, cut at waits"): each other thread's code
//! run ahead from its pc while the seed stands still, to the first wait that cannot return, with
//! the arrivals the walks make counted so that a barrier they complete stops nobody.

use super::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Walks remembered per expansion thread, across states: at most this many, then forgotten.
const WALK_CACHE_ENTRIES: usize = 1 << 17;

/// A word-at-a-time hash for the walk keys (they are words already; SipHash would cost more than
/// many of the walks it saves).
#[derive(Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // A slice of words arrives here as its bytes: take them eight at a time.
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().unwrap()));
        }
        for b in chunks.remainder() {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, w: usize) {
        self.write_u64(w as u64);
    }
}

/// A remembered walk: its footprint and the counters it changed (index, value) from
/// `Footprints::fresh`.
struct Walked {
    fp: Footprint,
    cut: Option<u16>,
    counts: Box<[(u32, u64)]>,
    reads: PassReads,
}

/// The entries of `passes` a walk read, by the value it found: the walk is the same under any
/// `passes` that has those values there (it reads nothing else of `passes`), which lets a
/// later round of one state keep the walks that the barriers it newly passes do not concern.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PassReads {
    set: [u64; WORDS],
    clear: [u64; WORDS],
}

impl PassReads {
    /// `passes[i]`, recorded.
    #[inline]
    fn read(&mut self, passes: &[bool], i: usize) -> bool {
        let v = passes[i];
        let bits = if v { &mut self.set } else { &mut self.clear };
        bits[i / 64] |= 1 << (i % 64);
        v
    }

    /// The walk that made these reads is the walk under `passes` (as bits) too.
    fn hold(&self, passes: &[u64; WORDS]) -> bool {
        (0..WORDS).all(|w| self.set[w] & !passes[w] == 0 && self.clear[w] & passes[w] == 0)
    }
}

/// `passes` as bits (it has at most `MAX_OBJECTS` entries: barriers and named barriers are
/// objects).
fn pass_bits(passes: &[bool]) -> [u64; WORDS] {
    let mut bits = [0u64; WORDS];
    for (i, _) in passes.iter().enumerate().filter(|(_, &p)| p) {
        bits[i / 64] |= 1 << (i % 64);
    }
    bits
}

/// A thread's walk reads only the thread's own record (pc, status, locals), what `passes` says,
/// and of each barrier whether it is live and its phase's parity (`hardware_complete`): with the
/// model, the thread and whether it is blocked, that is the key, and a state whose other threads
/// did not move since the last state expanded finds their walks here. Exact (whole keys are
/// compared), so the reduction is the same with or without it.
#[derive(Default)]
struct WalkCache {
    map: HashMap<Box<[u64]>, Walked, BuildHasherDefault<WordHasher>>,
    key: Vec<u64>,
}

thread_local! {
    static WALKS: RefCell<WalkCache> = RefCell::new(WalkCache::default());
}

/// One round of the fixpoint: with `passes` (what nobody stops at), each thread's walk (`None`:
/// exited), with what it touches through the thread itself (`Footprints::for_thread`: it
/// depends on the state, not on the seed), and the arrivals it makes: the counters it changed
/// from `Footprints::fresh`, thread t's at `counts[ends[t - 1]..ends[t]]`. A walk changes a few
/// counters of many, and every seed sums all walks but its own.
pub(super) struct Round {
    passes: Vec<bool>,
    walks: Vec<Option<Footprint>>,
    /// Per thread: the barrier of the wait its walk stops at, when that wait's read is kept
    /// out of its footprint (`lookahead`).
    cuts: Vec<Option<u16>>,
    counts: Vec<(u32, u64)>,
    ends: Vec<u32>,
    reads: Vec<PassReads>,
}

/// The rounds of one state's look-ahead, shared by its seeds (`Footprints::prefixes`).
#[derive(Default)]
pub(super) struct Walks {
    rounds: Vec<Round>,
    passes: Vec<bool>,
    scratch: Scratch,
}

/// Buffers a walk runs in: its locals, which of them are unknown, its counters, and the part of
/// the cache key its round shares.
#[derive(Default)]
struct Scratch {
    locals: Vec<i64>,
    unknown: Vec<bool>,
    counts: Vec<u64>,
    shared: Vec<u64>,
}

impl Footprints {
    /// What thread `t` may still do in an execution from `s` in which the seed does not move: its
    /// code run ahead from its pc on its own locals, cut at the first wait that cannot return
    /// (one not yet returned on a barrier that `passes` does not name). The wait it stops at is included (it is read while the thread blocks there, so a
    /// step that writes its barrier stays dependent: a stale wait is judged there). Where the walk
    /// cannot follow the code (a branch or index on a value read from shared state, a collective,
    /// past its budget), the rest of the thread's static future is taken. Arrivals the walk makes
    /// are added to `arrivals` (per barrier; `UNBOUNDED` when not counted).
    #[allow(clippy::too_many_arguments)]
    fn lookahead(
        &self,
        m: &Model,
        s: &State,
        t: usize,
        blocked: bool,
        passes: &[bool],
        reads: &mut PassReads,
        arrivals: &mut [u64],
        locals: &mut Vec<i64>,
        unknown: &mut Vec<bool>,
        cut: &mut Option<u16>,
    ) -> Footprint {
        let p = &m.proto;
        *cut = None;
        let code = p.code_of(t);
        let me = &p.threads[t];
        let role = me.role as usize;
        let cta = me.cta as usize;
        let th = &s.threads[t];
        locals.clear();
        locals.extend_from_slice(&th.locals);
        unknown.clear();
        unknown.resize(locals.len(), false);
        let mut fp = Footprint::empty(self.objects);
        let mut pc = th.pc as usize;
        let mut first = true;
        let value = |e: &IExpr, locals: &[i64], unknown: &[bool]| walk_value(e, locals, unknown, me);
        let element = |r: &Ref, g: &Group, locals: &[i64], unknown: &[bool]| element(r, g, |e| value(e, locals, unknown));
        // An agent of a uniform role arrives once per lane (outside an elected block).
        let lanes = |pc: usize| {
            if m.mutant == Some(crate::rt::Mutant::PorCountsOneLanePerAgent) {
                1
            } else {
                p.lanes_at(t, pc as u32).max(1) as u64
            }
        };
        // The cluster barrier's phase the thread's next `cluster_wait` is on: 0 the phase that
        // completed last (it arrived there and has not waited yet: the wait returns), 1 the
        // phase in progress (it returns only if `passes` says the phase may complete while the
        // seed stands still), 2 a later one (it needs the seed to arrive again: it never does).
        let mut cluster_phase = match (self.cluster_rec, code.cluster_slot) {
            (Some(_), Some(slot)) => {
                let mark = th.locals[slot as usize];
                usize::from(!(mark != 0 && mark == s.named[s.named.len() - 1].count))
            }
            _ => 1,
        };
        for _ in 0..LOOKAHEAD_BUDGET {
            let Some(i) = code.instrs.get(pc) else {
                fp.exit = true;
                return fp;
            };
            match &i.kind {
                InstrKind::Return => {
                    fp.exit = true;
                    return fp;
                }
                InstrKind::Jump { .. } if m.mutant == Some(crate::rt::Mutant::PorWhileRunsOnce) && is_while_back_edge(code, pc) => {
                    fp.exit = true;
                    return fp;
                }
                InstrKind::Jump { to } => pc = *to as usize,
                InstrKind::Branch { cond, else_to } => {
                    fp.union(&self.own[role][pc]);
                    match value(cond, locals, unknown) {
                        Some(v) => pc = if v != 0 { pc + 1 } else { *else_to as usize },
                        None => return self.rest(p, t, pc, fp, arrivals),
                    }
                }
                InstrKind::SetLocal { slot, expr } => {
                    fp.union(&self.own[role][pc]);
                    let v = value(expr, locals, unknown);
                    set_walk_local(locals, unknown, *slot, v);
                    pc += 1;
                }
                InstrKind::SetVar { .. } | InstrKind::Assert(_) | InstrKind::TokenCheck { .. } | InstrKind::Work => {
                    fp.union(&self.own[role][pc]);
                    pc += 1;
                }
                InstrKind::Elect { slot } => {
                    // An agent of a uniform role is alone in its warp: its election elects it.
                    // A lane of a wider warp may or may not be the one.
                    fp.union(&self.own[role][pc]);
                    let l = *slot as usize;
                    if l < locals.len() {
                        locals[l] = 1;
                        unknown[l] = !p.roles[role].uniform;
                    }
                    pc += 1;
                }
                InstrKind::SyncThreads => {
                    // The CTA's barrier returns once every unfinished thread of the CTA waits
                    // there; the seed is unfinished and does not (it has a step), so while it
                    // stands still nobody of its CTA passes a `syncthreads`. The arrival is
                    // included: the seed's exit or arrival may be the one that releases it. A
                    // thread of another CTA of a cluster may pass its own (`passes`).
                    fp.union(&self.own[role][pc]);
                    let passes_own = match self.sync_pass(cta) {
                        Some(k) if m.mutant != Some(crate::rt::Mutant::PorSyncThreadsHoldsEveryCta) => reads.read(passes, k),
                        _ => false,
                    };
                    if !passes_own {
                        return fp;
                    }
                    pc += 1;
                }
                InstrKind::SyncWarp | InstrKind::SyncWarpMask { .. } => {
                    // Walking past a meeting of the warp's lanes only adds to the future.
                    fp.union(&self.own[role][pc]);
                    pc += 1;
                }
                InstrKind::NamedBar { id, count, sync } => {
                    let own = self.objects(p, i, &|e: &IExpr| value(e, locals, unknown), cta, self.own_vars[role][pc]);
                    fp.union(&own);
                    let Some(id) = value(id, locals, unknown).filter(|k| (0..NAMED_BARRIERS as i64).contains(k)) else {
                        return self.rest(p, t, pc, fp, arrivals);
                    };
                    let k = counted_named_index(m, cta, id as usize);
                    // A thread waiting at its bar_sync has arrived: its warp's arrival is in
                    // the barrier's count already.
                    if !(first && th.status == Status::AtNamedWait) {
                        let slot = self.barriers + k;
                        // The hardware counts the warp's threads, exited lanes included.
                        arrivals[slot] = arrivals[slot].saturating_add(p.warp_size as u64);
                        let c = value(count, locals, unknown).map_or(UNBOUNDED, |c| c.max(0) as u64);
                        let least = &mut arrivals[self.barriers + self.named + k];
                        *least = (*least).min(if c == UNBOUNDED { 0 } else { c });
                        let most = &mut arrivals[self.barriers + 2 * self.named + k];
                        *most = (*most).max(c);
                    }
                    if *sync && !reads.read(passes, self.barriers + k) {
                        return fp;
                    }
                    pc += 1;
                }
                InstrKind::ClusterArrive { .. } => {
                    fp.union(&self.own[role][pc]);
                    pc += 1;
                }
                InstrKind::ClusterWait { .. } => {
                    // The cluster barrier's phase completes once every unfinished thread of the
                    // cluster has arrived: one that needs the seed's arrival stops the walk (its
                    // record is included: the seed's arrival or exit may be what releases it).
                    fp.union(&self.own[role][pc]);
                    let returns = match (cluster_phase, self.cluster_pass()) {
                        (0, _) => true,
                        (1, Some(k)) => reads.read(passes, k),
                        _ => false,
                    };
                    if !returns {
                        return fp;
                    }
                    cluster_phase += 1;
                    pc += 1;
                }
                InstrKind::Op {
                    op:
                        IOp::Remote {
                            target,
                            multicast,
                            op: inner,
                        },
                    result,
                } if !without_footprint(i) => {
                    // Its operation on the target CTA's objects: an arrival is counted on the
                    // target's copy of its barrier when the target is known.
                    let own = self.objects(p, i, &|e: &IExpr| value(e, locals, unknown), cta, self.own_vars[role][pc]);
                    fp.union(&own);
                    self.moves_tx(&own, arrivals);
                    let touch = inner.touch();
                    match touch.phase {
                        PhaseEffect::None => {}
                        PhaseEffect::Arrives(count) if !*multicast => {
                            let cta = value(target, locals, unknown).filter(|c| (0..self.ctas as i64).contains(c));
                            let bar = cta.and_then(|c| {
                                let (r, _) = touch.bar?;
                                element(r, self.aimed(&p.barrier_groups, r, Some(c as usize)), locals, unknown)
                            });
                            match (bar, value(count, locals, unknown)) {
                                (Some(b), Some(k)) => arrivals[b] = arrivals[b].saturating_add((k.max(0) as u64).saturating_mul(lanes(pc))),
                                _ => self.unbounded(&own, arrivals),
                            }
                        }
                        _ => self.unbounded(&own, arrivals),
                    }
                    if let Some(u) = result.and_then(|r| unknown.get_mut(r as usize)) {
                        *u = true;
                    }
                    pc += 1;
                }
                InstrKind::Op { op, result } if !without_footprint(i) => {
                    let touch = op.touch();
                    let bar = (touch.scope == Scope::Objects)
                        .then(|| {
                            touch
                                .bar
                                .and_then(|(r, _)| element(r, &p.barrier_groups[r.group as usize], locals, unknown))
                        })
                        .flatten();
                    let own = self.objects(p, i, &|e: &IExpr| value(e, locals, unknown), cta, self.own_vars[role][pc]);
                    self.moves_tx(&own, arrivals);
                    match touch.phase {
                        PhaseEffect::Waits(target) => {
                            // A wait that has not returned by now returns only once its barrier's
                            // phase in progress completes: parity (or a token's parity) against
                            // the phase, as the hardware answers (`hardware_complete`).
                            let waits = match bar {
                                Some(b) if !reads.read(passes, b) && s.barriers[b].life == Life::Live => {
                                    if first {
                                        blocked
                                    } else {
                                        value(target.expr(), locals, unknown)
                                            .is_some_and(|v| !crate::rt::hardware_complete(s.barriers[b].phase, v))
                                    }
                                }
                                _ => false,
                            };
                            if waits {
                                // The wait the walk stops at reads its barrier only for whether
                                // it returns and for a stale wait, both of which change only when
                                // the phase in progress completes: that read is kept apart
                                // (`cut`), for the steps that may complete it (`persistent`).
                                let b = bar.expect("a wait that stops the walk has its barrier");
                                let before = fp.read[b / 64] >> (b % 64) & 1 != 0;
                                fp.union(&own);
                                if !before {
                                    fp.read[b / 64] &= !(1 << (b % 64));
                                    *cut = Some(b as u16);
                                }
                                return fp;
                            }
                            fp.union(&own);
                        }
                        PhaseEffect::Arrives(count) => {
                            fp.union(&own);
                            let lanes = lanes(pc);
                            let k = value(count, locals, unknown);
                            match (bar, k) {
                                (Some(b), Some(k)) => arrivals[b] = arrivals[b].saturating_add((k.max(0) as u64).saturating_mul(lanes)),
                                _ => self.unbounded(&own, arrivals),
                            }
                        }
                        PhaseEffect::None => fp.union(&own),
                        PhaseEffect::Moves => {
                            fp.union(&own);
                            self.unbounded(&own, arrivals);
                        }
                    }
                    if let Some(r) = result {
                        if let Some(u) = unknown.get_mut(*r as usize) {
                            *u = true;
                        }
                    }
                    pc += 1;
                }
                _ => return self.rest(p, t, pc, fp, arrivals),
            }
            first = false;
        }
        self.rest(p, t, pc, fp, arrivals)
    }

    /// The walk gives up at `pc`: the thread's whole static future from there, whose arrivals are
    /// not counted.
    fn rest(&self, p: &Protocol, t: usize, pc: usize, mut fp: Footprint, arrivals: &mut [u64]) -> Footprint {
        let fut = &self.future[p.threads[t].role as usize][pc.min(p.code_of(t).instrs.len())];
        fp.union(fut);
        self.unbounded(fut, arrivals);
        fp
    }

    /// Every barrier `fp` writes (every one if it is global) may get any number of arrivals, and
    /// so may every named barrier it writes (whose least count is then unknown).
    fn unbounded(&self, fp: &Footprint, arrivals: &mut [u64]) {
        let writes = |i: usize| fp.global || (i < MAX_OBJECTS && (fp.write[i / 64] | fp.arrive[i / 64]) & (1 << (i % 64)) != 0);
        for b in 0..self.barriers {
            if writes(b) {
                arrivals[b] = UNBOUNDED;
            }
        }
        self.moves_tx(fp, arrivals);
        for k in 0..self.named {
            if writes(self.named_base + k) {
                arrivals[self.barriers + k] = UNBOUNDED;
                arrivals[self.barriers + self.named + k] = 0;
                arrivals[self.barriers + 2 * self.named + k] = UNBOUNDED;
            }
        }
    }

    /// Every barrier `fp` writes other than by plain arrivals may have its tx-count moved.
    fn moves_tx(&self, fp: &Footprint, arrivals: &mut [u64]) {
        let base = self.barriers + 3 * self.named;
        for b in 0..self.barriers.min(MAX_OBJECTS) {
            if fp.global || fp.write[b / 64] >> (b % 64) & 1 != 0 {
                arrivals[base + b] = arrivals[base + b].max(1);
            }
        }
    }

    /// Counters of one look-ahead: arrivals per barrier, then threads arrived per named
    /// barrier, then the least and the greatest thread count those named arrivals name (a use
    /// of a named barrier completes at its first arriver's count; `UNBOUNDED` as the greatest:
    /// unknown), then per barrier whether a walk may move its tx-count (nonzero: a copy issue,
    /// an expect_tx or complete_tx; combined by the greatest, as a flag).
    pub(super) fn fresh_counts(barriers: usize, named: usize) -> Vec<u64> {
        let mut c = vec![0u64; barriers + 3 * named + barriers];
        c[barriers + named..barriers + 2 * named].fill(UNBOUNDED);
        c
    }

    /// `sum` with counter `i` of another walk, `x`: arrivals add up, least counts take the least,
    /// greatest the greatest (a fresh counter is the identity of each).
    #[inline]
    fn add_count(&self, sum: &mut [u64], i: usize, x: u64) {
        let (least, most) = (self.barriers + self.named, self.barriers + 2 * self.named);
        let a = &mut sum[i];
        *a = if i < least {
            a.saturating_add(x)
        } else if i < most {
            (*a).min(x)
        } else {
            (*a).max(x)
        };
    }

    /// The named barriers whose arrivals all commute in the executions from `s` in which the
    /// seed does not move (`others`: the arrivals the other threads' walks make, `seed`: the
    /// seed's own arrival, id and thread count, if its step is one): every one of them lands in
    /// the use in progress (or, from an idle barrier, in a use whose count they all name), and
    /// together with the seed's they reach at most its count, so no use completes before the
    /// last of them and none starts after it. Two such arrivals reach one state in either order
    /// (arrived counts add, clocks join, and the release at the count is the same release), so
    /// the reduction treats them as independent (docs/model.md, "Named barriers").
    pub(super) fn quiet_named(&self, s: &State, others: &[u64], seed: Option<(usize, u64)>, ws: u64) -> u64 {
        let mut quiet = 0u64;
        for k in 0..self.named.min(64) {
            let arrived = others[self.barriers + k];
            let (least, most) = (others[self.barriers + self.named + k], others[self.barriers + 2 * self.named + k]);
            let (seed_ws, seed_count) = match seed {
                Some((id, c)) if id == k => (ws, Some(c)),
                _ => (0, None),
            };
            let nb = &s.named[k];
            let count = if nb.count > 0 {
                Some(nb.count as u64)
            } else {
                // Idle: the first arriver fixes the count; every arrival must name the same.
                let mut c = seed_count;
                if arrived > 0 {
                    c = match c {
                        Some(c) if least == c && most == c => Some(c),
                        None if least == most => Some(least),
                        _ => None,
                    };
                }
                c
            };
            let Some(count) = count else { continue };
            if arrived != UNBOUNDED
                && (nb.arrived.max(0) as u64).saturating_add(arrived).saturating_add(seed_ws) <= count
                && (nb.count == 0 || seed_count.is_none_or(|c| c == count))
            {
                quiet |= 1 << k;
            }
        }
        quiet
    }

    /// What nobody stops at before any arrival is counted: barriers not live (a wait on one
    /// returns, or is undefined behaviour); then one entry per named barrier, none passed; the
    /// cluster barrier's, not passed; under cluster scope with `syncthreads`, one per CTA: every
    /// CTA's but the seed's (CTA `seed_cta`) may pass its own.
    fn dead_barriers(&self, s: &State, seed_cta: usize) -> Vec<bool> {
        let mut v: Vec<bool> = s.barriers.iter().map(|b| b.life != Life::Live).collect();
        v.resize(self.barriers + self.named + self.cluster_pass().is_some() as usize, false);
        if self.sync_pass(0).is_some() {
            v.extend((0..self.ctas).map(|c| c != seed_cta));
        }
        v
    }

    /// The entry of `passes` that says CTA `cta`'s `syncthreads` may return while the seed
    /// stands still, under cluster scope when a thread calls it (without cluster scope the
    /// CTA is the seed's: it never does).
    fn sync_pass(&self, cta: usize) -> Option<usize> {
        (self.ctas > 1 && self.cta_base.is_some()).then(|| self.barriers + self.named + self.cluster_pass().is_some() as usize + cta)
    }

    /// The barriers whose phase in progress, and the named barriers whose use, the counted
    /// arrivals may complete: nobody stops at them any longer. Returns whether one was added.
    fn newly_passed(&self, s: &State, seed_arrived: bool, counts: &[u64], passes: &mut [bool]) -> bool {
        let mut changed = false;
        // The cluster barrier's phase in progress needs every unfinished thread's arrival: it
        // may complete while the seed stands still only if the seed has arrived on it.
        if let Some(k) = self.cluster_pass() {
            if seed_arrived && !passes[k] {
                passes[k] = true;
                changed = true;
            }
        }
        for b in 0..self.barriers {
            if passes[b] {
                continue;
            }
            let arrive_ons = self.arrive_ons_in_flight(s, b);
            // Bytes still owed are paid only by a copy in flight or a step that moves the count.
            let st = &s.barriers[b];
            let bytes = st.tx == 0
                || counts[self.barriers + 3 * self.named + b] > 0
                || s.copies.iter().any(|c| c.kind == CopyKind::Tma && c.bar as usize == b);
            if bytes && counts[b].saturating_add(arrive_ons) >= st.pending.max(0) as u64 {
                passes[b] = true;
                changed = true;
            }
        }
        for k in 0..self.named {
            let slot = self.barriers + k;
            if passes[slot] {
                continue;
            }
            let nb = &s.named[k];
            let mut least = counts[self.barriers + self.named + k];
            if nb.count > 0 {
                least = least.min(nb.count as u64);
            }
            if (nb.arrived.max(0) as u64).saturating_add(counts[slot]) >= least {
                passes[slot] = true;
                changed = true;
            }
        }
        changed
    }

    /// One round of walks: every unfinished thread walked ahead with `passes`.
    /// A thread whose walk in an `earlier` round of the state read the same values of `passes`
    /// keeps it.
    fn round(&self, m: &Model, s: &State, enabled: &[bool], passes: Vec<bool>, earlier: &[Round], scratch: &mut Scratch) -> Round {
        let n = s.threads.len();
        let passed = pass_bits(&passes);
        // What every walk's key holds besides its thread's record: `passes`, and of each barrier
        // whether it is live and its phase's parity.
        let shared = &mut scratch.shared;
        shared.clear();
        let mut word = 0u64;
        let mut bits = 0;
        let mut bit = |b: bool, key: &mut Vec<u64>| {
            word = word << 1 | b as u64;
            bits += 1;
            if bits == 64 {
                key.push(word);
                (word, bits) = (0, 0);
            }
        };
        for &p in &passes {
            bit(p, shared);
        }
        for b in s.barriers.iter() {
            bit(b.life == Life::Live, shared);
            bit(b.phase.rem_euclid(2) == 1, shared);
        }
        shared.push(word);
        if self.cluster_pass().is_some() {
            // The cluster barrier's last completed phase (`cluster_phase` in `lookahead`).
            shared.push(s.named[s.named.len() - 1].count as u64);
        }
        let mut counts = Vec::new();
        let mut ends = Vec::with_capacity(n);
        let mut reads = vec![PassReads::default(); n];
        let mut cuts = vec![None; n];
        WALKS.with(|cache| {
            let mut cache = cache.borrow_mut();
            let walks = (0..n)
                .map(|t| {
                    let w = (s.threads[t].status != Status::Done).then(|| {
                        if let Some(r) = earlier.iter().find(|r| r.reads[t].hold(&passed)) {
                            let start = if t == 0 { 0 } else { r.ends[t - 1] as usize };
                            counts.extend_from_slice(&r.counts[start..r.ends[t] as usize]);
                            reads[t] = r.reads[t];
                            cuts[t] = r.cuts[t];
                            return r.walks[t].expect("an unfinished thread has a walk");
                        }
                        let mut fp = self.remembered_walk(
                            m,
                            s,
                            t,
                            !enabled[t],
                            &passes,
                            &mut cache,
                            &mut counts,
                            &mut reads[t],
                            &mut cuts[t],
                            scratch,
                        );
                        self.for_thread(m, s, t, &mut fp, true);
                        fp
                    });
                    ends.push(counts.len() as u32);
                    w
                })
                .collect();
            Round {
                passes,
                walks,
                cuts,
                counts,
                ends,
                reads,
            }
        })
    }

    /// `lookahead` through the walk cache, its changed counters appended to `counts`.
    #[allow(clippy::too_many_arguments)]
    fn remembered_walk(
        &self,
        m: &Model,
        s: &State,
        t: usize,
        blocked: bool,
        passes: &[bool],
        cache: &mut WalkCache,
        counts: &mut Vec<(u32, u64)>,
        reads: &mut PassReads,
        cut: &mut Option<u16>,
        scratch: &mut Scratch,
    ) -> Footprint {
        let th = &s.threads[t];
        let key = &mut cache.key;
        key.clear();
        key.push(self.id);
        key.push(m.mutant.map_or(0, |x| x as u64 + 1));
        key.push((t as u64) << 34 | (th.pc as u64) << 2 | ((th.status == Status::AtNamedWait) as u64) << 1 | blocked as u64);
        key.extend(th.locals.iter().map(|&l| l as u64));
        key.extend_from_slice(&scratch.shared);
        if let Some(w) = cache.map.get(&key[..]) {
            counts.extend_from_slice(&w.counts);
            *reads = w.reads;
            *cut = w.cut;
            return w.fp;
        }
        let c = &mut scratch.counts;
        c.clear();
        c.extend_from_slice(&self.fresh);
        let fp = self.lookahead(m, s, t, blocked, passes, reads, c, &mut scratch.locals, &mut scratch.unknown, cut);
        let start = counts.len();
        counts.extend(
            c.iter()
                .zip(self.fresh.iter())
                .enumerate()
                .filter(|(_, (a, b))| a != b)
                .map(|(i, (a, _))| (i as u32, *a)),
        );
        if cache.map.len() >= WALK_CACHE_ENTRIES {
            cache.map.clear();
        }
        cache.map.insert(
            key[..].into(),
            Walked {
                fp,
                cut: *cut,
                counts: counts[start..].into(),
                reads: *reads,
            },
        );
        fp
    }

    /// Per thread other than `seed`: what it may do in an execution from `s` in which `seed` does
    /// not move (`None`: exited; the seed's own entry is to be ignored), as the index of a round
    /// of `walks`, and the arrivals those walks make, into `arrivals`. A least fixpoint: every
    /// thread is walked ahead to the first wait whose barrier cannot complete its phase in
    /// progress; a barrier can when the arrivals the walks make on it reach its pending count,
    /// and then nobody stops at it and the walks are redone. Sound by induction on the order in
    /// which an execution's threads pass such waits: the first to pass one needs its barrier's
    /// phase to complete, which takes arrivals made before any wait was passed, all of which the
    /// first walks counted.
    ///
    /// A walk depends on the state, its thread and `passes` alone, not on the seed: the rounds
    /// are kept in `walks` and every seed whose fixpoint meets the same `passes` reuses them
    /// (most seeds of a state meet the same few), so a state costs a few rounds of walks rather
    /// than a few per seed.
    pub(super) fn prefixes(
        &self,
        m: &Model,
        s: &State,
        seed: usize,
        enabled: &[bool],
        walks: &mut Walks,
        arrivals: &mut Vec<u64>,
    ) -> usize {
        let seed_arrived = self.cluster_pass().is_some() && m.mutant != Some(crate::rt::Mutant::PorClusterWaitNeverPasses) && {
            let named = &s.named[..];
            let current = named[named.len() - 1].count % 2 + 1;
            m.proto
                .code_of(seed)
                .cluster_slot
                .is_some_and(|slot| s.threads[seed].locals[slot as usize] == current)
        };
        // The first round is the same for every seed unless CTAs pass their `syncthreads`
        // independently (`dead_barriers`): then it is one per CTA of a seed.
        let first = self.dead_barriers(s, m.proto.threads[seed].cta as usize);
        let mut r = match walks.rounds.iter().position(|x| x.passes == first) {
            Some(k) => k,
            None => {
                let next = self.round(m, s, enabled, first, &walks.rounds, &mut walks.scratch);
                walks.rounds.push(next);
                walks.rounds.len() - 1
            }
        };
        loop {
            let round = &walks.rounds[r];
            arrivals.clear();
            arrivals.extend_from_slice(&self.fresh);
            let mut start = 0;
            for (t, &end) in round.ends.iter().enumerate() {
                if t != seed {
                    for &(i, x) in &round.counts[start..end as usize] {
                        self.add_count(arrivals, i as usize, x);
                    }
                }
                start = end as usize;
            }
            walks.passes.clone_from(&round.passes);
            if !self.newly_passed(s, seed_arrived, arrivals, &mut walks.passes) {
                return r;
            }
            r = match walks.rounds.iter().position(|x| x.passes == walks.passes) {
                Some(k) => k,
                None => {
                    let passes = walks.passes.clone();
                    let next = self.round(m, s, enabled, passes, &walks.rounds, &mut walks.scratch);
                    walks.rounds.push(next);
                    walks.rounds.len() - 1
                }
            };
        }
    }

    /// The entry of `passes` that says the cluster barrier's phase in progress may complete, when
    /// a thread uses the cluster barrier.
    pub(super) fn cluster_pass(&self) -> Option<usize> {
        self.cluster_rec.map(|_| self.barriers + self.named)
    }

    /// The walks of round `r` (`prefixes`).
    pub(super) fn round_walks<'w>(&self, walks: &'w Walks, r: usize) -> &'w [Option<Footprint>] {
        &walks.rounds[r].walks
    }

    /// The waits the walks of round `r` stop at, kept out of their footprints (`lookahead`).
    pub(super) fn round_cuts<'w>(&self, walks: &'w Walks, r: usize) -> &'w [Option<u16>] {
        &walks.rounds[r].cuts
    }

    /// `fp` without the named barriers of `quiet` (bit k: named barrier k).
    pub(super) fn without_named(&self, fp: &mut Footprint, quiet: u64) {
        for k in 0..self.named.min(64) {
            if quiet & (1 << k) != 0 {
                let i = self.named_base + k;
                fp.write[i / 64] &= !(1 << (i % 64));
            }
        }
    }
}
