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

use crate::program::ir::*;
use crate::rt::state::{Life, State, Status};
use crate::rt::{Action, Model};

/// Shared objects a footprint can name: barriers, then buffers, then vars. A protocol with more
/// is expanded in full.
pub const MAX_OBJECTS: usize = 256;
const WORDS: usize = MAX_OBJECTS / 64;
/// Instructions a thread's code is run ahead by `Footprints::lookahead` before it gives up.
const LOOKAHEAD_BUDGET: usize = 4096;
/// Arrivals not counted: any number.
const UNBOUNDED: u64 = u64::MAX;

/// What one operation touches, as its object declares it (`touch` in each `rt/<object>.rs`): the
/// reduction builds an operation's footprint and its look-ahead from this alone, so a new
/// operation states its conflicts where its rules are written.
#[derive(Clone, Copy, Debug)]
pub struct Touch<'a> {
    /// The barrier the step acts on, and whether it changes it (a write) or only reads it (a wait).
    pub bar: Option<(&'a Ref, bool)>,
    /// The buffer, and whether the step writes it.
    pub buf: Option<(&'a Ref, bool)>,
    /// The step starts an async event that lands later (a copy issue).
    pub lands: bool,
    /// What the step does to phases, for the look-ahead that cuts a thread's future at waits.
    pub phase: PhaseEffect<'a>,
    pub scope: Scope,
}

/// An operation's effect on barrier phases, as the look-ahead needs it.
#[derive(Clone, Copy, Debug)]
pub enum PhaseEffect<'a> {
    /// None beyond its footprint.
    None,
    /// A blocking wait on this target: the thread's future may be cut here.
    Waits(&'a WaitTarget),
    /// This many arrivals on the step's barrier.
    Arrives(&'a IExpr),
    /// It may move a phase or end a barrier's life other than by arrivals (init, inval).
    Moves,
}

/// How the reduction treats an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Its footprint is the barrier and buffer of its `Touch`.
    Objects,
    /// It conflicts with every step (init resets everyone's phase knowledge).
    Global,
    /// A step that changes other threads' records (warp-batched arrivals): the protocol is
    /// expanded in full.
    Collective,
    /// No footprint is known for it yet: the protocol is expanded in full.
    Unreduced,
}

impl<'a> Touch<'a> {
    /// A step on objects with the given barrier and buffer accesses.
    pub fn objects(bar: Option<(&'a Ref, bool)>, buf: Option<(&'a Ref, bool)>, phase: PhaseEffect<'a>) -> Touch<'a> {
        Touch {
            bar,
            buf,
            lands: false,
            phase,
            scope: Scope::Objects,
        }
    }

    /// A step with no footprint of its own: `scope` says why.
    pub fn whole(scope: Scope, phase: PhaseEffect<'a>) -> Touch<'a> {
        Touch {
            bar: None,
            buf: None,
            lands: false,
            phase,
            scope,
        }
    }
}

impl IOp {
    /// What the operation touches, from its object's declaration.
    pub fn touch(&self) -> Touch<'_> {
        match self {
            IOp::Mbar(op) => op.touch(),
            IOp::Copy(op) => op.touch(),
            IOp::Mem(op) => op.touch(),
            IOp::Warp(op) => op.touch(),
            IOp::Proxy(op) => op.touch(),
            // Cluster scope: remote objects are not in the footprint's object space yet.
            IOp::Remote { .. } => Touch::whole(Scope::Unreduced, PhaseEffect::Moves),
        }
    }
}

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
    /// A thread's future may be cut at a wait that cannot return while the seed stands still
    /// (`lookahead`): arrivals are counted exactly, which completion functions (they arrive when
    /// a phase completes) and uniform roles (one step arrives for a warp) would not allow.
    counts_arrivals: bool,
    /// Per role, per pc: the instruction's footprint with whole groups, and its var reads alone
    /// (what `lookahead` narrows to an element without walking the expressions again).
    own: Vec<Vec<Footprint>>,
    own_vars: Vec<Vec<Footprint>>,
}

fn is_collective(i: &Instr) -> bool {
    match &i.kind {
        InstrKind::SyncWarp | InstrKind::SyncThreads | InstrKind::SyncWarpMask { .. } | InstrKind::Elect { .. } => true,
        InstrKind::Op { op, .. } => op.touch().scope == Scope::Collective,
        _ => false,
    }
}

/// Named barriers, the cluster barrier and the operations whose object declares no footprint
/// (`Scope::Unreduced`: cp.async, partial copies and reads, the async proxy, cluster scope): a
/// protocol with any of them is expanded in full (their steps count as touching everything,
/// should one reach `instr`).
fn without_footprint(i: &Instr) -> bool {
    match &i.kind {
        // Cluster scope: the cluster barrier is a collective like syncthreads, across CTAs.
        InstrKind::NamedBar { .. } | InstrKind::ClusterArrive { .. } | InstrKind::ClusterWait { .. } => true,
        InstrKind::Op { op, .. } => op.touch().scope == Scope::Unreduced,
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
            counts_arrivals: p.completions.is_empty() && p.roles.iter().all(|r| !r.uniform),
            own: Vec::new(),
            own_vars: Vec::new(),
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
        f.own_vars = p
            .roles
            .iter()
            .map(|r| r.code.instrs.iter().map(|i| f.var_reads(i)).collect())
            .collect();
        f.own = p
            .roles
            .iter()
            .map(|r| r.code.instrs.iter().map(|i| f.instr(p, i, None, None)).collect())
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
        self.objects(p, i, bar, buf, self.var_reads(i))
    }

    /// The shared vars an instruction's expressions read.
    fn var_reads(&self, i: &Instr) -> Footprint {
        let mut fp = Footprint::empty(self.objects);
        let base = self.barriers + self.buffers;
        i.exprs(&mut |e| {
            e.each(&mut |x| {
                if let IExpr::Var(v) = x {
                    Footprint::set(&mut fp.read, base + *v as usize);
                }
            })
        });
        fp
    }

    /// `fp` (an instruction's var reads) with what the instruction itself touches.
    fn objects(&self, p: &Protocol, i: &Instr, bar: Option<usize>, buf: Option<usize>, mut fp: Footprint) -> Footprint {
        let base = self.barriers + self.buffers;
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
            InstrKind::Op { op, .. } => {
                let touch = op.touch();
                if touch.scope != Scope::Objects {
                    fp.global = true;
                } else {
                    if let Some((r, write)) = touch.bar {
                        self.bar_bits(p, r, bar, &mut fp, write);
                    }
                    if let Some((d, write)) = touch.buf {
                        self.buf_bits(p, d, buf, &mut fp, write);
                    }
                    fp.lands |= touch.lands;
                }
            }
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
        let resolve = |r: &Ref, groups: &[Group]| element(r, groups, |e| e.eval_pure(&th.locals, me));
        let (bar, buf) = match &i.kind {
            InstrKind::Op { op, .. } => {
                let touch = op.touch();
                let any_indexed = touch.bar.is_some_and(|(r, _)| indexed(r)) || touch.buf.is_some_and(|(r, _)| indexed(r));
                if touch.scope != Scope::Objects || !any_indexed {
                    return self.steps[me.role as usize][pc];
                }
                (
                    touch.bar.and_then(|(r, _)| resolve(r, &p.barrier_groups)),
                    touch.buf.and_then(|(r, _)| resolve(r, &p.buffer_groups)),
                )
            }
            _ => return self.steps[me.role as usize][pc],
        };
        if bar.is_none() && buf.is_none() {
            return self.steps[me.role as usize][pc];
        }
        self.step_at(p, code, pc, bar, buf)
    }

    /// What thread `t` may still do in an execution from `s` in which the seed does not move: its
    /// code run ahead from its pc on its own locals, cut at the first wait that cannot return
    /// (one not yet returned on a barrier that `passes` does not name). The wait it stops at is included (it is read while the thread blocks there, so a
    /// step that writes its barrier stays dependent: a stale wait is judged there). Where the walk
    /// cannot follow the code (a branch or index on a value read from shared state, a collective,
    /// past its budget), the rest of the thread's static future is taken. Arrivals the walk makes
    /// are added to `arrivals` (per barrier; `UNBOUNDED` when not counted).
    fn lookahead(
        &self,
        m: &Model,
        s: &State,
        t: usize,
        blocked: bool,
        passes: &[bool],
        arrivals: &mut [u64],
        locals: &mut Vec<i64>,
        unknown: &mut Vec<bool>,
    ) -> Footprint {
        let p = &m.proto;
        let code = p.code_of(t);
        let me = &p.threads[t];
        let role = me.role as usize;
        let th = &s.threads[t];
        locals.clear();
        locals.extend_from_slice(&th.locals);
        unknown.clear();
        unknown.resize(locals.len(), false);
        let mut fp = Footprint::empty(self.objects);
        let mut pc = th.pc as usize;
        let mut first = true;
        let known = |e: &IExpr, unknown: &[bool]| {
            // Shared vars need no check here: `eval_pure` has no value for them.
            if !unknown.contains(&true) {
                return true;
            }
            let mut ok = true;
            e.each(&mut |x| match x {
                IExpr::Local(l) => ok &= !unknown.get(*l as usize).copied().unwrap_or(true),
                IExpr::Var(_) => ok = false,
                _ => {}
            });
            ok
        };
        let value = |e: &IExpr, locals: &[i64], unknown: &[bool]| if known(e, unknown) { e.eval_pure(locals, me) } else { None };
        let element = |r: &Ref, groups: &[Group], locals: &[i64], unknown: &[bool]| element(r, groups, |e| value(e, locals, unknown));
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
                    let l = *slot as usize;
                    if l < locals.len() {
                        locals[l] = v.unwrap_or(0);
                        unknown[l] = v.is_none();
                    }
                    pc += 1;
                }
                InstrKind::SetVar { .. } | InstrKind::Assert(_) | InstrKind::TokenCheck { .. } | InstrKind::Work => {
                    fp.union(&self.own[role][pc]);
                    pc += 1;
                }
                InstrKind::Op { op, result } if !without_footprint(i) => {
                    let touch = op.touch();
                    let (bar, buf) = if touch.scope == Scope::Objects {
                        (
                            touch.bar.and_then(|(r, _)| element(r, &p.barrier_groups, locals, unknown)),
                            touch.buf.and_then(|(r, _)| element(r, &p.buffer_groups, locals, unknown)),
                        )
                    } else {
                        (None, None)
                    };
                    let own = if bar.is_none() && buf.is_none() {
                        self.own[role][pc]
                    } else {
                        self.objects(p, i, bar, buf, self.own_vars[role][pc])
                    };
                    match touch.phase {
                        PhaseEffect::Waits(target) => {
                            // A wait that has not returned by now returns only once its barrier's
                            // phase in progress completes: parity (or a token's parity) against
                            // the phase, as the hardware answers (`hardware_complete`).
                            let waits = match bar {
                                Some(b) if !passes[b] && s.barriers[b].life == Life::Live => {
                                    if first {
                                        blocked
                                    } else {
                                        value(target.expr(), locals, unknown)
                                            .is_some_and(|v| !crate::rt::hardware_complete(s.barriers[b].phase, v))
                                    }
                                }
                                _ => false,
                            };
                            fp.union(&own);
                            if waits {
                                return fp;
                            }
                        }
                        PhaseEffect::Arrives(count) => {
                            fp.union(&own);
                            let k = value(count, locals, unknown);
                            match (bar, k) {
                                (Some(b), Some(k)) => arrivals[b] = arrivals[b].saturating_add(k.max(0) as u64),
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

    /// Every barrier `fp` writes (every one if it is global) may get any number of arrivals.
    fn unbounded(&self, fp: &Footprint, arrivals: &mut [u64]) {
        for (b, a) in arrivals.iter_mut().enumerate() {
            if fp.global || (b < MAX_OBJECTS && fp.write[b / 64] & (1 << (b % 64)) != 0) {
                *a = UNBOUNDED;
            }
        }
    }

    /// Barriers nobody stops at before any arrival is counted: those not live (a wait on one
    /// returns, or is undefined behaviour).
    fn dead_barriers(s: &State) -> Vec<bool> {
        s.barriers.iter().map(|b| b.life != Life::Live).collect()
    }

    /// Every unfinished thread walked ahead with nobody past a live barrier's wait (the first round
    /// of `prefixes`, the same for every seed), and the arrivals each walk makes per barrier.
    fn first_walks(&self, m: &Model, s: &State, enabled: &[bool]) -> (Vec<Option<Footprint>>, Vec<Vec<u64>>) {
        let passes = Self::dead_barriers(s);
        let (mut locals, mut unknown) = (Vec::new(), Vec::new());
        let mut per = vec![vec![0u64; self.barriers]; s.threads.len()];
        let walks = (0..s.threads.len())
            .map(|t| {
                (s.threads[t].status != Status::Done)
                    .then(|| self.lookahead(m, s, t, !enabled[t], &passes, &mut per[t], &mut locals, &mut unknown))
            })
            .collect();
        (walks, per)
    }

    /// Per thread other than `seed`: what it may do in an execution from `s` in which `seed` does
    /// not move (`None`: exited). A least fixpoint: every thread is walked ahead to the first wait
    /// whose barrier cannot complete its phase in progress; a barrier can when the arrivals the
    /// walks make on it reach its pending count, and then nobody stops at it and the walks are
    /// redone. Sound by induction on the order in which an execution's threads pass such waits:
    /// the first to pass one needs its barrier's phase to complete, which takes arrivals made
    /// before any wait was passed, all of which the first walks counted. The first round is
    /// `first` ([`Self::first_walks`]) without the seed's walk.
    fn prefixes(
        &self,
        m: &Model,
        s: &State,
        seed: usize,
        enabled: &[bool],
        first: &(Vec<Option<Footprint>>, Vec<Vec<u64>>),
        out: &mut Vec<Option<Footprint>>,
    ) {
        let mut passes = Self::dead_barriers(s);
        let mut arrivals = vec![0u64; self.barriers];
        for (t, a) in first.1.iter().enumerate() {
            if t != seed {
                for (sum, x) in arrivals.iter_mut().zip(a) {
                    *sum = sum.saturating_add(*x);
                }
            }
        }
        out.clear();
        out.extend(first.0.iter().enumerate().map(|(t, w)| if t == seed { None } else { *w }));
        let (mut locals, mut unknown) = (Vec::new(), Vec::new());
        loop {
            let mut changed = false;
            for (b, pass) in passes.iter_mut().enumerate() {
                if !*pass && arrivals[b] >= s.barriers[b].pending.max(0) as u64 {
                    *pass = true;
                    changed = true;
                }
            }
            if !changed {
                return;
            }
            out.clear();
            arrivals.iter_mut().for_each(|a| *a = 0);
            for t in 0..s.threads.len() {
                let th = &s.threads[t];
                out.push(
                    (t != seed && th.status != Status::Done)
                        .then(|| self.lookahead(m, s, t, !enabled[t], &passes, &mut arrivals, &mut locals, &mut unknown)),
                );
            }
        }
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
        if m.mutant == Some(crate::rt::Mutant::PorIgnoresConflicts) {
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
        let lands: Vec<Footprint> = (0..s.copies.len()).map(|i| self.landing(s, i)).collect();
        let mut best: Option<(Vec<bool>, Vec<bool>, usize)> = None;
        let ahead = self.counts_arrivals && m.mutant.is_none();
        let (first, futures) = if ahead {
            (self.first_walks(m, s, &thread_enabled), Vec::new())
        } else {
            // The static futures: every instruction reachable from each thread's pc.
            let futures: Vec<Option<Footprint>> = (0..n)
                .map(|t| {
                    let th = &s.threads[t];
                    (th.status != Status::Done).then(|| self.future[p_role(m, t)][(th.pc as usize).min(m.proto.code_of(t).instrs.len())])
                })
                .collect();
            (Default::default(), futures)
        };
        let mut prefixes: Vec<Option<Footprint>> = Vec::new();
        for seed in 0..n {
            if !thread_enabled[seed] {
                continue;
            }
            // What the others may do while the seed stands still: their code run ahead to the
            // waits that cannot return without it (or else their whole static future).
            let futures = if ahead {
                self.prefixes(m, s, seed, &thread_enabled, &first, &mut prefixes);
                &prefixes
            } else {
                &futures
            };
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

/// The flat index of the element `r` names, with its index expression valued by `index` (`None`:
/// no value, or out of range).
fn element(r: &Ref, groups: &[Group], index: impl FnOnce(&IExpr) -> Option<i64>) -> Option<usize> {
    let g = &groups[r.group as usize];
    let k = match &r.index {
        None => 0,
        Some(e) => index(e)?,
    };
    (0..g.len as i64).contains(&k).then(|| g.base as usize + k as usize)
}

fn p_role(m: &Model, t: usize) -> usize {
    m.proto.threads[t].role as usize
}
