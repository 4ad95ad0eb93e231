//! Footprints and persistent sets: the partial-order reduction (docs/model.md, "Partial-order
//! reduction").
//!
//! A *footprint* is what a step may read or write of the shared state: which barriers, buffers
//! and shared vars, whether it may end its thread (an exit), whether it is a landing (which an
//! exit is dependent on: the CTA exiting under a copy is a state property), or "everything"
//! (`global`). Two steps of different agents whose footprints do not conflict are *independent*:
//! both orders are possible, reach the same state, and each raises the same violations in either
//! order (a step's violations are decided by its own thread's record and the objects in its
//! footprint).
//!
//! Conflicts, per object:
//! - barrier: a wait (`wait`, `try_wait`) *reads* it: it reads the phase and the completed phase's
//!   clock and knowledge, and sets `observed_prev`, which every successful wait sets to the same
//!   value, so two waits commute. Everything else (arrivals, expect_tx/complete_tx, a copy's landing,
//!   inval) *writes* it. A write conflicts with a read or a write.
//! - buffer, var: reads (each agent replaces only its own entry of the read set) commute; a write
//!   (a copy issue, a landing, a var assignment) conflicts with any access.
//! - an exit conflicts with a landing (so a reduced set never lets the CTA exit under a copy
//!   unnoticed); `global` conflicts with everything (init, which resets everyone's phase knowledge).
//!
//! Static footprints of code are computed once per model: for each role and pc, the footprint of
//! every instruction reachable from that pc (the thread's *future*). An arrival, expect_tx,
//! complete_tx or copy on a barrier with a completion function also carries the footprint of that
//! function (closed over the barriers it arrives on), since the completing agent runs it. A copy
//! issue carries the footprint of its future landing.
//!
//! The reduction applies to protocols without warp- or CTA-wide collectives (`syncthreads`,
//! `syncwarp`, `elect`, `commit`, whose steps change other threads' records) and without `while`
//! loops (a spinning thread is a deadlock judged over a set of states); other protocols are
//! always expanded in full.

use crate::ir::*;
use crate::state::{State, Status};
use crate::step::{Action, Model};

/// Shared objects a footprint can name: barriers, then buffers, then vars. A protocol with more
/// is expanded in full.
pub const MAX_OBJECTS: usize = 256;
const WORDS: usize = MAX_OBJECTS / 64;

/// A set of shared objects: barriers, then buffers, then vars.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Conflicts with everything.
    pub global: bool,
    /// The step may end its thread.
    pub exit: bool,
    /// A copy's landing (or, in a thread's future, the landing of a copy it issues).
    pub lands: bool,
    pub read: [u64; WORDS],
    pub write: [u64; WORDS],
}

fn intersects(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).any(|(x, y)| x & y != 0)
}

impl Footprint {
    fn empty(_objects: usize) -> Footprint {
        Footprint::default()
    }

    fn set(bits: &mut [u64], i: usize) {
        if i < MAX_OBJECTS {
            bits[i / 64] |= 1 << (i % 64);
        }
    }

    pub fn union(&mut self, o: &Footprint) {
        self.global |= o.global;
        self.exit |= o.exit;
        self.lands |= o.lands;
        for (a, b) in self.read.iter_mut().zip(&o.read) {
            *a |= b;
        }
        for (a, b) in self.write.iter_mut().zip(&o.write) {
            *a |= b;
        }
    }

    /// The two may not commute (steps of different agents).
    pub fn conflicts(&self, o: &Footprint) -> bool {
        self.global
            || o.global
            || (self.exit && o.lands)
            || (self.lands && o.exit)
            || intersects(&self.write, &o.write)
            || intersects(&self.write, &o.read)
            || intersects(&self.read, &o.write)
    }
}

/// The static footprints of one model.
#[derive(Clone, Debug)]
pub struct Footprints {
    /// The reduction applies (no collectives, no `while`).
    pub applicable: bool,
    barriers: usize,
    buffers: usize,
    objects: usize,
    /// Per barrier: the footprint of its completion function, closed over the barriers it
    /// arrives on (empty without one).
    completion: Vec<Footprint>,
    /// Per role, per pc (and one past the end): the union of every instruction reachable from it.
    future: Vec<Vec<Footprint>>,
    /// Per role, per pc: the footprint of the step that starts there, with its barrier and buffer
    /// references taken as their whole group (`step` narrows an indexed one to its element).
    steps: Vec<Vec<Footprint>>,
}

fn is_collective(i: &Instr) -> bool {
    matches!(
        i.kind,
        InstrKind::SyncWarp
            | InstrKind::SyncThreads
            | InstrKind::SyncWarpMask { .. }
            | InstrKind::Elect { .. }
            | InstrKind::Op {
                op: IOp::Commit { .. },
                ..
            }
    )
}

/// Issue 13's named barriers, cp.async arrive-ons, partial copies and reads, the async proxy
/// and cluster scope have no footprints here yet: a protocol with any of them is expanded in full (their
/// steps count as touching everything, should one reach `instr`).
fn without_footprint(i: &Instr) -> bool {
    match &i.kind {
        // Cluster scope: the cluster barrier is a collective like syncthreads, across CTAs.
        InstrKind::NamedBar { .. } | InstrKind::ClusterArrive { .. } | InstrKind::ClusterWait { .. } => true,
        InstrKind::Op { op, .. } => matches!(
            op,
            IOp::CpAsync { .. }
                | IOp::CpAsyncArrive { .. }
                | IOp::CopyPart { .. }
                | IOp::ReadPart { .. }
                | IOp::StoreAsync { .. }
                | IOp::CommitGroup
                | IOp::WaitGroup { .. }
                | IOp::Wgmma { .. }
                | IOp::WgmmaWait { .. }
                | IOp::FenceProxyAsync
                | IOp::FenceMbarrierInit
                | IOp::Remote { .. }
        ),
        _ => false,
    }
}

/// The pcs an instruction may continue at (in its own code).
fn successors(code: &Code, pc: usize) -> Vec<usize> {
    match &code.instrs[pc].kind {
        InstrKind::Jump { to } => vec![*to as usize],
        InstrKind::Branch { else_to, .. } => vec![pc + 1, *else_to as usize],
        InstrKind::Return => vec![code.instrs.len()],
        _ => vec![pc + 1],
    }
}

impl Footprints {
    pub fn new(p: &Protocol, fine_grained: bool) -> Footprints {
        let barriers = p.barriers.len();
        let buffers = p.buffers.len();
        let objects = barriers + buffers + p.vars.len();
        // Cluster scope: a CTA's exit conflicts with every later remote access to it, which no
        // footprint here records: a cluster is expanded in full.
        let applicable = !fine_grained
            && p.cluster == 1
            && objects <= MAX_OBJECTS
            && p.roles
                .iter()
                .all(|r| !r.code.has_while && !r.code.instrs.iter().any(|i| is_collective(i) || without_footprint(i)));
        let mut f = Footprints {
            applicable,
            barriers,
            buffers,
            objects,
            completion: vec![Footprint::empty(objects); barriers],
            future: Vec::new(),
            steps: Vec::new(),
        };
        // Completion functions, closed over the barriers they touch (a fixpoint: footprints only
        // grow, and there are finitely many bits).
        loop {
            let mut changed = false;
            for b in 0..barriers {
                let Some(ci) = p.barriers[b].completion else { continue };
                let mut fp = Footprint::empty(objects);
                for i in &p.completions[ci as usize].instrs {
                    fp.union(&f.instr(p, i, None, None));
                }
                // A completion function's `return` ends the function, not a thread.
                fp.exit = false;
                if fp != f.completion[b] {
                    f.completion[b] = fp;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        f.future = p
            .roles
            .iter()
            .map(|r| {
                let code = &r.code;
                let n = code.instrs.len();
                let own: Vec<Footprint> = code.instrs.iter().map(|i| f.instr(p, i, None, None)).collect();
                // Reachability by iteration to a fixpoint (code is small).
                let mut fut: Vec<Footprint> = (0..=n).map(|_| Footprint::empty(objects)).collect();
                for pc in 0..=n {
                    fut[pc].exit = true;
                }
                loop {
                    let mut changed = false;
                    for pc in (0..n).rev() {
                        let mut acc = own[pc].clone();
                        acc.exit = true;
                        for s in successors(code, pc) {
                            acc.union(&fut[s.min(n)]);
                        }
                        if acc != fut[pc] {
                            fut[pc] = acc;
                            changed = true;
                        }
                    }
                    if !changed {
                        break;
                    }
                }
                fut
            })
            .collect();
        f.steps = p
            .roles
            .iter()
            .map(|r| (0..r.code.instrs.len()).map(|pc| f.step_at(p, &r.code, pc, None, None)).collect())
            .collect();
        f
    }

    /// The step that starts at `pc`: its instruction (a copy's landing is an action of its own),
    /// and an exit if the local code that runs after it in the same step may end the thread.
    fn step_at(&self, p: &Protocol, code: &Code, pc: usize, bar: Option<usize>, buf: Option<usize>) -> Footprint {
        let mut fp = self.instr(p, &code.instrs[pc], bar, buf);
        fp.lands = false;
        let mut seen = vec![false; code.instrs.len() + 1];
        let mut stack = successors(code, pc);
        while let Some(q) = stack.pop() {
            let q = q.min(code.instrs.len());
            if seen[q] {
                continue;
            }
            seen[q] = true;
            match code.instrs.get(q) {
                None => fp.exit = true,
                Some(x) if !x.visible => stack.extend(successors(code, q)),
                Some(_) => {}
            }
        }
        fp
    }

    fn bar_bits(&self, p: &Protocol, r: &Ref, at: Option<usize>, fp: &mut Footprint, write: bool) {
        let g = &p.barrier_groups[r.group as usize];
        let range = match at {
            Some(b) => b..b + 1,
            None => g.base as usize..g.base as usize + g.len as usize,
        };
        for b in range {
            if write {
                Footprint::set(&mut fp.write, b);
                fp.union(&self.completion[b]);
            } else {
                Footprint::set(&mut fp.read, b);
            }
        }
    }

    fn buf_bits(&self, p: &Protocol, r: &Ref, at: Option<usize>, fp: &mut Footprint, write: bool) {
        let g = &p.buffer_groups[r.group as usize];
        let range = match at {
            Some(d) => d..d + 1,
            None => g.base as usize..g.base as usize + g.len as usize,
        };
        for d in range {
            Footprint::set(if write { &mut fp.write } else { &mut fp.read }, self.barriers + d);
        }
    }

    /// One instruction's footprint. `bar`/`buf`: the element its barrier or buffer reference
    /// names, when known (else the whole group). Includes the landing of a copy it issues.
    fn instr(&self, p: &Protocol, i: &Instr, bar: Option<usize>, buf: Option<usize>) -> Footprint {
        let mut fp = Footprint::empty(self.objects);
        let base = self.barriers + self.buffers;
        i.exprs(&mut |e| {
            e.each(&mut |x| {
                if let IExpr::Var(v) = x {
                    Footprint::set(&mut fp.read, base + *v as usize);
                }
            })
        });
        match &i.kind {
            InstrKind::SetVar { var, .. } => Footprint::set(&mut fp.write, base + *var as usize),
            InstrKind::Return => fp.exit = true,
            InstrKind::SetLocal { .. }
            | InstrKind::Jump { .. }
            | InstrKind::Branch { .. }
            | InstrKind::Assert(_)
            | InstrKind::TokenCheck { .. }
            | InstrKind::Work => {}
            InstrKind::SyncWarp
            | InstrKind::SyncThreads
            | InstrKind::SyncWarpMask { .. }
            | InstrKind::Elect { .. }
            | InstrKind::NamedBar { .. }
            | InstrKind::ClusterArrive { .. }
            | InstrKind::ClusterWait { .. } => fp.global = true,
            InstrKind::Op { .. } if without_footprint(i) => fp.global = true,
            InstrKind::Op { op, .. } => match op {
                IOp::Commit { .. } | IOp::Init { .. } => fp.global = true,
                IOp::Wait { bar: r, .. } => self.bar_bits(p, r, bar, &mut fp, false),
                IOp::Arrive { bar: r, .. } | IOp::ExpectTx { bar: r, .. } | IOp::CompleteTx { bar: r, .. } | IOp::Inval { bar: r } => {
                    self.bar_bits(p, r, bar, &mut fp, true)
                }
                IOp::Copy { buf: d, bar: r, .. } => {
                    self.buf_bits(p, d, buf, &mut fp, true);
                    self.bar_bits(p, r, bar, &mut fp, true);
                    fp.lands = true;
                }
                IOp::Read { buf: d, .. } => self.buf_bits(p, d, buf, &mut fp, false),
                IOp::Write { buf: d, .. } => self.buf_bits(p, d, buf, &mut fp, true),
                _ => fp.global = true,
            },
        }
        fp
    }

    /// The footprint of thread `t`'s next step in `s` (it stands at a visible instruction): that
    /// instruction, with its barrier and buffer resolved from the thread's locals where they do
    /// not read shared vars, and an exit if the local code after it may end the thread.
    fn step(&self, m: &Model, s: &State, t: usize) -> Footprint {
        let p = &m.proto;
        let code = p.code_of(t);
        let th = &s.threads[t];
        let pc = th.pc as usize;
        let Some(i) = code.instrs.get(pc) else {
            let mut fp = Footprint::empty(self.objects);
            fp.exit = true;
            return fp;
        };
        let me = &p.threads[t];
        let indexed = |r: &Ref| r.index.is_some();
        let resolve = |r: &Ref, groups: &[Group]| -> Option<usize> {
            let g = &groups[r.group as usize];
            let k = match &r.index {
                None => 0,
                Some(e) => e.eval_pure(&th.locals, me)?,
            };
            (0..g.len as i64).contains(&k).then(|| g.base as usize + k as usize)
        };
        let (bar, buf) = match &i.kind {
            InstrKind::Op { op, .. } => match op {
                IOp::Arrive { bar, .. }
                | IOp::Wait { bar, .. }
                | IOp::ExpectTx { bar, .. }
                | IOp::CompleteTx { bar, .. }
                | IOp::Inval { bar }
                    if indexed(bar) =>
                {
                    (resolve(bar, &p.barrier_groups), None)
                }
                IOp::Copy { buf, bar, .. } if indexed(bar) || indexed(buf) => {
                    (resolve(bar, &p.barrier_groups), resolve(buf, &p.buffer_groups))
                }
                IOp::Read { buf, .. } | IOp::Write { buf, .. } if indexed(buf) => (None, resolve(buf, &p.buffer_groups)),
                _ => return self.steps[me.role as usize][pc],
            },
            _ => return self.steps[me.role as usize][pc],
        };
        if bar.is_none() && buf.is_none() {
            return self.steps[me.role as usize][pc];
        }
        self.step_at(p, code, pc, bar, buf)
    }

    fn landing(&self, s: &State, i: usize) -> Footprint {
        let c = &s.copies[i];
        let mut fp = Footprint::empty(self.objects);
        Footprint::set(&mut fp.write, self.barriers + c.buf as usize);
        Footprint::set(&mut fp.write, c.bar as usize);
        fp.union(&self.completion[c.bar as usize]);
        fp.lands = true;
        fp
    }

    /// A persistent subset of `enabled` in `s`, into `out`: `false` when none smaller than
    /// `enabled` was found (expand all). The set is the current steps of a set T of threads, with
    /// every landing whose footprint conflicts with one of them, closed so that every thread
    /// outside T can never (in its whole remaining code, copies it issues included) take a step
    /// that conflicts with a step in the set. A thread outside T that would have to join but has
    /// no enabled step (blocked) rules the candidate out. Candidates start from each enabled
    /// thread in index order; the smallest set wins (the first on ties), so the choice depends on
    /// the state alone.
    pub fn persistent(&self, m: &Model, s: &State, enabled: &[Action], out: &mut Vec<Action>) -> bool {
        if !self.applicable || enabled.len() < 2 {
            return false;
        }
        if m.mutant == Some(crate::step::Mutant::PorIgnoresConflicts) {
            if let Some(a) = enabled.iter().find(|a| matches!(a, Action::Thread(_))) {
                out.push(*a);
                return true;
            }
        }
        let n = s.threads.len();
        let mut thread_enabled = vec![false; n];
        for a in enabled {
            if let Action::Thread(t) = a {
                thread_enabled[*t as usize] = true;
            }
        }
        // Only running threads here (no collectives): a thread's step is Thread(t).
        let steps: Vec<Option<Footprint>> = (0..n).map(|t| thread_enabled[t].then(|| self.step(m, s, t))).collect();
        let futures: Vec<Option<Footprint>> = (0..n)
            .map(|t| {
                let th = &s.threads[t];
                (th.status != Status::Done).then(|| self.future[p_role(m, t)][(th.pc as usize).min(m.proto.code_of(t).instrs.len())])
            })
            .collect();
        let lands: Vec<Footprint> = (0..s.copies.len()).map(|i| self.landing(s, i)).collect();
        let mut best: Option<(Vec<bool>, Vec<bool>, usize)> = None;
        for seed in 0..n {
            if !thread_enabled[seed] {
                continue;
            }
            let mut in_t = vec![false; n];
            let mut in_l = vec![false; lands.len()];
            in_t[seed] = true;
            let mut chosen: Vec<&Footprint> = vec![steps[seed].as_ref().unwrap()];
            let mut ok = true;
            'closure: loop {
                let mut grew = false;
                for u in 0..n {
                    if in_t[u] {
                        continue;
                    }
                    let Some(fut) = &futures[u] else { continue };
                    if chosen.iter().any(|c| c.conflicts(fut)) {
                        match &steps[u] {
                            Some(fp) => {
                                in_t[u] = true;
                                chosen.push(fp);
                                grew = true;
                            }
                            None => {
                                ok = false;
                                break 'closure;
                            }
                        }
                    }
                }
                for (i, l) in lands.iter().enumerate() {
                    if !in_l[i] && chosen.iter().any(|c| c.conflicts(l)) {
                        in_l[i] = true;
                        chosen.push(l);
                        grew = true;
                    }
                }
                if !grew {
                    break;
                }
            }
            if !ok {
                continue;
            }
            let size = enabled
                .iter()
                .filter(|a| match a {
                    Action::Thread(t) => in_t[*t as usize],
                    Action::Land(i) | Action::LandPart(i) => in_l[*i as usize],
                })
                .count();
            if size < enabled.len() && best.as_ref().is_none_or(|b| size < b.2) {
                best = Some((in_t, in_l, size));
                if size == 1 {
                    break;
                }
            }
        }
        let Some((in_t, in_l, _)) = best else { return false };
        out.extend(enabled.iter().copied().filter(|a| match a {
            Action::Thread(t) => in_t[*t as usize],
            Action::Land(i) | Action::LandPart(i) => in_l[*i as usize],
        }));
        true
    }
}

fn p_role(m: &Model, t: usize) -> usize {
    m.proto.threads[t].role as usize
}
