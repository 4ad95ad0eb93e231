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
//!   unnoticed), except an outside thread's future exit against the set: while the seed stands
//!   still it is never the last; `global` conflicts with everything (init, which resets everyone's
//!   phase knowledge).
//!
//! Static footprints of code are computed once per model: for each role and pc, the footprint of
//! every instruction reachable from that pc (the thread's *future*). An arrival, expect_tx,
//! complete_tx or copy on a barrier with a completion function also carries the footprint of that
//! function (closed over the barriers it arrives on), since the completing agent runs it. A copy
//! issue carries the footprint of its future landing.
//!
//! A warp's lanes meet (`elect`, `syncwarp`, named barriers) through the warp's record, an
//! object of its own; a named barrier is an object its arrivals write. No thread passes a
//! `syncthreads` while the seed stands still (the seed is unfinished and not waiting there), so
//! the cut at waits stops there; its arrivals and the CTA's exits write the CTA's record, a
//! margin. A cp.async landing writes the barriers of the arrive-ons it may fire, or its issuer's
//! record when none tracks it yet. A warp-batched `commit` writes its warp's record, which every
//! step of a committing warp's lanes reads. The reduction does not apply to partial TMA copies,
//! copies from shared memory, tensor copies through a descriptor, `st_async`, tensor memory and
//! cluster scope (`why_off`): those protocols are expanded in full.

use crate::program::ir::*;
use crate::rt::copies::CopyKind;
use crate::rt::state::{Life, State, Status};
use crate::rt::{Action, Model};

mod lookahead;

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
    /// More buffers the step reads (a wgmma's operands after the first).
    pub reads: &'a [Ref],
    /// The step retires the thread's own asynchronous reads (`wait_group`, `wgmma_wait`): it
    /// reads the buffers they read, which only the thread's record in `State::proxy` names.
    pub retires: bool,
    /// A proxy fence: it covers the generic writes of every buffer a thread writes and the inits
    /// of every barrier a thread initialises (`Footprints::fence`).
    pub fence: bool,
    /// The step lands the thread's own cp.async copies (`cp_async_wait_group`): it writes their
    /// buffers and fires their arrive-ons, which only the copies in flight in `State::copies`
    /// name (resolved per thread, like `retires`).
    pub cp_lands: bool,
    /// A warpgroup-scoped wgmma (`warpgroup_mma`, `warpgroup_wait`): it reads or changes the
    /// group record the agents of its warpgroup share (resolved per thread into the records of
    /// the warpgroup's warps by `Footprints::for_thread`), and a wait retires the other agents'
    /// reads too.
    pub warpgroup: bool,
    /// What the step does to phases, for the look-ahead that cuts a thread's future at waits.
    pub phase: PhaseEffect<'a>,
    pub scope: Scope,
}

/// The count of an arrival made once per lane (an arrive-on, a commit's share of its group's).
pub static ONE_ARRIVAL: IExpr = IExpr::Const(1);

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
            reads: &[],
            retires: false,
            fence: false,
            cp_lands: false,
            warpgroup: false,
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
            reads: &[],
            retires: false,
            fence: false,
            cp_lands: false,
            warpgroup: false,
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
            IOp::Tc(op) => op.touch(),
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
    /// The step synchronises with the other lanes of its warp (`elect`, `syncwarp`, a named
    /// barrier: the warp's last lane to reach it moves the others). Resolved per thread into its
    /// warp's object by `Footprints::for_thread`.
    pub warp_sync: bool,
    /// The step arrives at `syncthreads` (the CTA's last thread to reach it, or to exit while
    /// the others wait there, moves them all). Resolved per thread into the CTA's object by
    /// `Footprints::for_thread`, with the exits that may release it.
    pub cta_sync: bool,
    /// The step retires the thread's asynchronous reads (resolved per thread, like `warp_sync`).
    pub retires: bool,
    /// The step lands the thread's cp.async copies (resolved per thread, like `retires`).
    pub cp_lands: bool,
    /// The step touches its warpgroup's wgmma groups (resolved per thread, like `warp_sync`).
    pub warpgroup: bool,
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
        self.warp_sync |= o.warp_sync;
        self.cta_sync |= o.cta_sync;
        self.retires |= o.retires;
        self.cp_lands |= o.cp_lands;
        self.warpgroup |= o.warpgroup;
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
    /// Names this model's footprints in the look-ahead's walk cache (`lookahead.rs`), which
    /// outlives a model.
    id: u64,
    /// The reduction applies (no CTA-wide or warp-batched collectives, no `while`).
    pub applicable: bool,
    /// When it does not: the first construct that forbids it, for the report's header.
    pub off: Option<PorOff>,
    barriers: usize,
    buffers: usize,
    objects: usize,
    /// The object index of named barrier 0 (after the vars) and how many there are (16 when the
    /// protocol uses any). A named barrier is an object of its own: an arrival writes it.
    named_base: usize,
    named: usize,
    /// The object index of warp 0's record (after the named barriers): written by the steps that
    /// synchronise a warp's lanes, and by a lane's exit (exited lanes leave the warp's
    /// collectives, which may release the others). Only warps of more than one agent get one
    /// bit set (`lanes_shared`): an agent alone in its warp (a uniform role's, or a lone thread)
    /// synchronises with nobody.
    warp_base: usize,
    /// The object index of the CTA's `syncthreads` record, when a thread calls it: written by
    /// every arrival at it and by every exit (exited threads leave it, which may release the
    /// others, as the last arrival does).
    cta_base: Option<usize>,
    /// The object index of thread 0's record, when a thread issues `cp_async`: a cp.async
    /// landing that no arrive-on of its issuer tracks yet carries the engine's knowledge into
    /// the issuer's clock (`carry_to_issuer`), which every later step of the issuer may release,
    /// so such a landing writes the issuer's record and every step of a thread reads its own.
    rec_base: Option<usize>,
    /// The object index of buffer 0's fence flag (`ProxyState::unfenced_write`), when a thread
    /// fences (`fence_proxy_async`); none otherwise. A fence writes the flags it may clear, a
    /// generic write sets its buffer's, an async read's issue reads its buffer's.
    flag_base: Option<usize>,
    lanes_shared: Vec<bool>,
    /// Per warp: a lane of it runs the warp-batched `commit`, whose arrivals depend on which of
    /// its warp-mates stand ready at it: every step of such a warp's lanes reads the warp's
    /// record, which a commit writes (it moves the lanes it joins).
    commit_warps: Vec<bool>,
    /// Whether any role synchronises lanes (`elect`, `syncwarp`, named barriers): only then do
    /// a lane's exits touch its warp's record.
    warp_collectives: bool,
    /// What a proxy fence writes: every buffer that a thread writes through the generic proxy
    /// (the fence may clear its unfenced flag) and, when a thread initialises barriers, every
    /// barrier (it may clear an init's unfenced flag, which a copy issue reads).
    fence: Footprint,
    /// Per barrier: the footprint of its completion function, closed over the barriers it
    /// arrives on (empty without one).
    completion: Vec<Footprint>,
    /// Per role, per pc (and one past the end): the union of every instruction reachable from it.
    future: Vec<Vec<Footprint>>,
    /// Per role, per pc: the footprint of the step that starts there, with its barrier and buffer
    /// references taken as their whole group (`step` narrows an indexed one to its element).
    steps: Vec<Vec<Footprint>>,
    /// Per role, per pc: whether the local code after the instruction may end the thread
    /// (`exits_after`; a step narrowed to the state takes it from here).
    exits: Vec<Vec<bool>>,
    /// A thread's future may be cut at a wait that cannot return while the seed stands still
    /// (`lookahead`): arrivals are counted exactly, which completion functions (they arrive when
    /// a phase completes) and uniform roles (one step arrives for a warp) would not allow.
    counts_arrivals: bool,
    /// Per role, per pc: the instruction's footprint with whole groups, and its var reads alone
    /// (what `lookahead` narrows to an element without walking the expressions again).
    own: Vec<Vec<Footprint>>,
    own_vars: Vec<Vec<Footprint>>,
    /// The counters a look-ahead starts from (`fresh_counts`), made once: every walk and every
    /// seed starts from a copy.
    fresh: Box<[u64]>,
}

/// Why the partial-order reduction is off for a protocol: the construct, and the statement it
/// came from where one statement is to blame (`None`: a property of the whole protocol), so a
/// user sees which line costs the reduction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PorOff {
    pub construct: String,
    pub span: Option<crate::lang::ast::Span>,
}

/// The first construct, in role and statement order, that turns the reduction off, or `None`
/// when it applies. `Footprints::applicable` is exactly `why_off(..).is_none()`.
pub fn why_off(p: &Protocol, fine_grained: bool, objects: usize) -> Option<PorOff> {
    let whole = |construct: String| Some(PorOff { construct, span: None });
    if fine_grained {
        return whole("fine-grained steps (one instruction a step)".to_string());
    }
    let at = |construct: String, i: &Instr| {
        Some(PorOff {
            construct,
            span: Some(i.span),
        })
    };
    let every = || p.roles.iter().flat_map(|r| r.code.instrs.iter());
    if p.cluster != 1 {
        // Blame the first statement that acts across CTAs; a cluster that never does still
        // has its CTAs' exits unordered with nothing recorded.
        let cross = every().find(|i| {
            matches!(
                i.kind,
                InstrKind::ClusterArrive { .. }
                    | InstrKind::ClusterWait { .. }
                    | InstrKind::Op {
                        op: IOp::Remote { .. },
                        ..
                    }
            )
        });
        return match cross {
            Some(i) => at("cluster scope".to_string(), i),
            None => whole(format!("cluster scope (a cluster of {} CTAs)", p.cluster)),
        };
    }
    if objects > MAX_OBJECTS {
        return whole(format!(
            "more than {MAX_OBJECTS} shared objects (barriers, buffers, vars, named barriers, warps)"
        ));
    }
    for r in &p.roles {
        for i in &r.code.instrs {
            if without_footprint(i) {
                return at(off_name(i), i);
            }
        }
    }
    None
}

/// What turns the reduction off at an instruction, as a user would look for it: the copies that
/// share the name `copy_async` (and `memcpy_async`, which lowers to them) say which form it is.
fn off_name(i: &Instr) -> String {
    use crate::rt::copies::CopyOp;
    match &i.kind {
        InstrKind::Op {
            op: IOp::Copy(CopyOp::CopyPart { .. }),
            ..
        } => "a partial copy (`copy_async`/`memcpy_async` with `offset =` or `bytes =`)".to_string(),
        InstrKind::Op {
            op: IOp::Copy(CopyOp::CopyFrom { .. }),
            ..
        } => "a copy from shared memory (`copy_async(..., from =)`)".to_string(),
        InstrKind::Op {
            op: IOp::Copy(CopyOp::Tensor { .. }),
            ..
        } => "a tensor copy (`copy_async(..., tensormap =)`)".to_string(),
        _ => format!("`{}`", instr_name(i)),
    }
}

/// The statement an instruction stands for, by its name in the language.
fn instr_name(i: &Instr) -> &'static str {
    match &i.kind {
        InstrKind::SyncThreads => "syncthreads",
        InstrKind::ClusterArrive { .. } => "cluster_arrive",
        InstrKind::ClusterWait { .. } => "cluster_wait",
        InstrKind::Op { op, .. } => op.name(),
        _ => "statement",
    }
}

/// The jump back to a `while` loop's head. A `for` loop's jump back carries its variable's span,
/// which holds none of the body's statements (the increment before the jump shares it); a
/// `while` loop's carries the whole statement's, which holds every statement of its body.
fn is_while_back_edge(code: &Code, pc: usize) -> bool {
    let InstrKind::Jump { to } = code.instrs[pc].kind else {
        return false;
    };
    let (head, own) = (to as usize, code.instrs[pc].span);
    if head > pc {
        return false;
    }
    let inside = |x: crate::lang::ast::Span| x != own && own.start <= x.start && x.end <= own.end;
    let body = &code.instrs[head + 1..pc];
    body.is_empty() && code.instrs[head].span == own || body.iter().any(|i| inside(i.span))
}

/// The cluster barrier and the operations whose object declares no footprint
/// (`Scope::Unreduced`: cp.async, partial copies and reads, cluster scope): a protocol with any of
/// them is expanded in full (their steps count as touching everything, should one reach `instr`).
fn without_footprint(i: &Instr) -> bool {
    match &i.kind {
        // Cluster scope: the cluster barrier is a collective like syncthreads, across CTAs.
        InstrKind::ClusterArrive { .. } | InstrKind::ClusterWait { .. } => true,
        InstrKind::Op { op, .. } => op.touch().scope == Scope::Unreduced,
        _ => false,
    }
}

fn syncs_lanes(i: &Instr) -> bool {
    matches!(
        i.kind,
        InstrKind::SyncWarp | InstrKind::SyncWarpMask { .. } | InstrKind::Elect { .. } | InstrKind::NamedBar { .. }
    ) || is_commit(i)
}

/// The warp-batched `commit`.
fn is_commit(i: &Instr) -> bool {
    matches!(
        i.kind,
        InstrKind::Op {
            op: IOp::Warp(crate::rt::warp::WarpOp::Commit { .. }),
            ..
        }
    )
}

/// The value of an index expression that names no local, var or identity (`None` otherwise).
fn constant(e: &IExpr) -> Option<i64> {
    let mut plain = !e.reads_var() && !e.reads_identity();
    e.each(&mut |x| plain &= !matches!(x, IExpr::Local(_)));
    if !plain {
        return None;
    }
    e.eval(&[], None, &mut |_| Err(EvalError::NoVar)).ok()
}

/// How the footprint of an instruction values the index expressions of its references (and a
/// named barrier's id): `None` is no value, the whole group.
type Index<'x> = &'x dyn Fn(&IExpr) -> Option<i64>;

fn no_index(_: &IExpr) -> Option<i64> {
    None
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
        let named_base = barriers + buffers + p.vars.len();
        let named = if p
            .roles
            .iter()
            .any(|r| r.code.instrs.iter().any(|i| matches!(i.kind, InstrKind::NamedBar { .. })))
        {
            crate::rt::named::NAMED_BARRIERS
        } else {
            0
        };
        let warp_base = named_base + named;
        let warps = p.warp_count();
        let flag_base = warp_base + warps;
        let fences = p
            .roles
            .iter()
            .flat_map(|r| r.code.instrs.iter())
            .chain(p.completions.iter().flat_map(|c| c.instrs.iter()))
            .any(|i| {
                matches!(
                    i.kind,
                    InstrKind::Op {
                        op: IOp::Proxy(crate::rt::proxy::ProxyOp::FenceProxyAsync),
                        ..
                    }
                )
            });
        let code = || {
            p.roles
                .iter()
                .flat_map(|r| r.code.instrs.iter())
                .chain(p.completions.iter().flat_map(|c| c.instrs.iter()))
        };
        let syncs = code().any(|i| matches!(i.kind, InstrKind::SyncThreads));
        let cta_base = flag_base + if fences { buffers } else { 0 };
        let cp_async = code().any(|i| {
            matches!(
                i.kind,
                InstrKind::Op {
                    op: IOp::Copy(crate::rt::copies::CopyOp::CpAsync { .. }),
                    ..
                }
            )
        });
        let rec_base = cta_base + syncs as usize;
        let objects = rec_base + if cp_async { p.threads.len() } else { 0 };
        let lanes_shared: Vec<bool> = (0..warps).map(|w| p.warp_members(w).nth(1).is_some()).collect();
        let commits = |r: &RoleInfo| r.code.instrs.iter().any(is_commit);
        let commit_warps: Vec<bool> = (0..warps)
            .map(|w| p.warp_members(w).any(|t| commits(&p.roles[p.threads[t].role as usize])))
            .collect();
        // Cluster scope: a CTA's exit conflicts with every later remote access to it, which no
        // footprint here records: a cluster is expanded in full.
        let off = why_off(p, fine_grained, objects);
        let applicable = off.is_none();
        debug_assert_eq!(
            applicable,
            !fine_grained
                && p.cluster == 1
                && objects <= MAX_OBJECTS
                && p.roles.iter().all(|r| !r.code.instrs.iter().any(without_footprint))
        );
        let mut fence = Footprint::empty(objects);
        for i in code() {
            match &i.kind {
                InstrKind::Op { op: IOp::Mem(m), .. } if m.writes() => {
                    let g = &p.buffer_groups[m.buf().group as usize];
                    for d in g.base as usize..g.base as usize + g.len as usize {
                        if fences {
                            Footprint::set(&mut fence.write, flag_base + d);
                        }
                    }
                }
                InstrKind::Op {
                    op: IOp::Mbar(MbarOp::Init { .. }),
                    ..
                } => (0..barriers).for_each(|b| Footprint::set(&mut fence.write, b)),
                _ => {}
            }
        }
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut f = Footprints {
            id: IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            applicable,
            off,
            barriers,
            buffers,
            objects,
            named_base,
            named,
            warp_base,
            flag_base: fences.then_some(flag_base),
            cta_base: syncs.then_some(cta_base),
            rec_base: cp_async.then_some(rec_base),
            lanes_shared,
            commit_warps,
            warp_collectives: p.roles.iter().any(|r| r.code.instrs.iter().any(syncs_lanes)),
            fence,
            completion: vec![Footprint::empty(objects); barriers],
            future: Vec::new(),
            steps: Vec::new(),
            exits: Vec::new(),
            counts_arrivals: p.completions.is_empty(),
            own: Vec::new(),
            own_vars: Vec::new(),
            fresh: Footprints::fresh_counts(barriers, named).into(),
        };
        // Completion functions, closed over the barriers they touch (a fixpoint: footprints only
        // grow, and there are finitely many bits).
        loop {
            let mut changed = false;
            for b in 0..barriers {
                let Some(ci) = p.barriers[b].completion else { continue };
                let mut fp = Footprint::empty(objects);
                for i in &p.completions[ci as usize].instrs {
                    fp.union(&f.instr(p, i, &no_index));
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
                let own: Vec<Footprint> = code.instrs.iter().map(|i| f.instr(p, i, &no_index)).collect();
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
            .map(|r| r.code.instrs.iter().map(|i| f.instr(p, i, &no_index)).collect())
            .collect();
        f.exits = p
            .roles
            .iter()
            .map(|r| (0..r.code.instrs.len()).map(|pc| Footprints::exits_after(&r.code, pc)).collect())
            .collect();
        f.steps = p
            .roles
            .iter()
            .zip(&f.exits)
            .map(|(r, exits)| {
                (0..r.code.instrs.len())
                    .map(|pc| f.step_at(p, &r.code, pc, &no_index, exits[pc]))
                    .collect()
            })
            .collect();
        f
    }

    /// The step that starts at `pc`: its instruction (a copy's landing is an action of its own),
    /// and an exit if the local code that runs after it in the same step may end the thread
    /// (`exits`: `exits_after`, made once per pc).
    fn step_at(&self, p: &Protocol, code: &Code, pc: usize, at: Index, exits: bool) -> Footprint {
        let mut fp = self.instr(p, &code.instrs[pc], at);
        fp.lands = false;
        fp.exit |= exits;
        fp
    }

    /// Whether the local code that runs after the instruction at `pc`, in the same step, may
    /// end the thread.
    fn exits_after(code: &Code, pc: usize) -> bool {
        let mut exits = false;
        let mut seen = vec![false; code.instrs.len() + 1];
        let mut stack = successors(code, pc);
        while let Some(q) = stack.pop() {
            let q = q.min(code.instrs.len());
            if seen[q] {
                continue;
            }
            seen[q] = true;
            match code.instrs.get(q) {
                None => exits = true,
                Some(x) if !x.visible => stack.extend(successors(code, q)),
                Some(_) => {}
            }
        }
        exits
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

    /// One instruction's footprint, its references valued by `at` (an element when it has a
    /// value, else the whole group). Includes the landing of a copy it issues.
    fn instr(&self, p: &Protocol, i: &Instr, at: Index) -> Footprint {
        self.objects(p, i, at, self.var_reads(i))
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
    fn objects(&self, p: &Protocol, i: &Instr, at: Index, mut fp: Footprint) -> Footprint {
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
            // A local choice of lane, or a meeting of the warp's lanes: nothing shared beyond the
            // warp's own record.
            InstrKind::SyncWarp | InstrKind::SyncWarpMask { .. } | InstrKind::Elect { .. } => fp.warp_sync = true,
            InstrKind::NamedBar { id, .. } => {
                // The warp's arrival writes the barrier, and the arrival that completes it
                // releases its waiters (whose futures hold their own arrival on it).
                fp.warp_sync = true;
                let ids = match at(id).or_else(|| constant(id)) {
                    Some(k) if (0..self.named as i64).contains(&k) => k as usize..k as usize + 1,
                    _ => 0..self.named,
                };
                for k in ids {
                    Footprint::set(&mut fp.write, self.named_base + k);
                }
            }
            // An arrival at the CTA's barrier: its record, resolved per thread (`for_thread`).
            InstrKind::SyncThreads => fp.cta_sync = true,
            InstrKind::ClusterArrive { .. } | InstrKind::ClusterWait { .. } => fp.global = true,
            InstrKind::Op { .. } if without_footprint(i) => fp.global = true,
            InstrKind::Op { op, .. } => {
                let touch = op.touch();
                if touch.scope != Scope::Objects {
                    fp.global = true;
                } else {
                    if let Some((r, write)) = touch.bar {
                        self.bar_bits(p, r, element(r, &p.barrier_groups, at), &mut fp, write);
                    }
                    if let Some((d, write)) = touch.buf {
                        self.buf_bits(p, d, element(d, &p.buffer_groups, at), &mut fp, write);
                    }
                    for d in touch.reads {
                        self.buf_bits(p, d, element(d, &p.buffer_groups, at), &mut fp, false);
                    }
                    fp.lands |= touch.lands;
                    fp.retires |= touch.retires;
                    fp.cp_lands |= touch.cp_lands;
                    // A commit meets its warp-mates through the warp's record, as `syncwarp` does.
                    fp.warp_sync |= is_commit(i);
                    fp.warpgroup |= touch.warpgroup;
                    if touch.fence {
                        fp.union(&self.fence);
                    }
                    if let Some(base) = self.flag_base {
                        // The fence flag: set by a generic write, read by an async read's issue.
                        let flagged = match op {
                            IOp::Mem(m) if m.writes() => touch.buf.filter(|&(_, w)| w).into_iter().map(|(d, _)| (d, true)).collect(),
                            IOp::Proxy(_) => touch.buf.iter().map(|&(d, _)| d).chain(touch.reads).map(|d| (d, false)).collect(),
                            _ => Vec::new(),
                        };
                        for (d, write) in flagged {
                            if let Some(e) = element(d, &p.buffer_groups, at) {
                                Footprint::set(if write { &mut fp.write } else { &mut fp.read }, base + e);
                            } else {
                                let g = &p.buffer_groups[d.group as usize];
                                for e in g.base as usize..g.base as usize + g.len as usize {
                                    Footprint::set(if write { &mut fp.write } else { &mut fp.read }, base + e);
                                }
                            }
                        }
                    }
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
        let narrows = match &i.kind {
            InstrKind::Op { op, .. } => {
                let touch = op.touch();
                touch.scope == Scope::Objects
                    && (touch.bar.is_some_and(|(r, _)| indexed(r))
                        || touch.buf.is_some_and(|(r, _)| indexed(r))
                        || touch.reads.iter().any(indexed))
            }
            InstrKind::NamedBar { id, .. } => constant(id).is_none(),
            _ => false,
        };
        if !narrows {
            return self.steps[me.role as usize][pc];
        }
        self.step_at(
            p,
            code,
            pc,
            &|e: &IExpr| e.eval_pure(&th.locals, me),
            self.exits[me.role as usize][pc],
        )
    }

    /// `fp` (a step or a future of thread `t`) with what it touches through the thread itself:
    /// its warp's record when it synchronises with the warp's other lanes or may exit (an exited
    /// lane leaves the warp's collectives), and the buffers its asynchronous reads in flight
    /// read when it retires them (its future always may: the reads stay in flight until it
    /// does). Two planted defects of the reduction drop the warp's record or the named barriers.
    fn for_thread(&self, m: &Model, s: &State, t: usize, fp: &mut Footprint, future: bool) {
        use crate::rt::Mutant;
        let w = m.proto.threads[t].warp as usize;
        if self.warp_collectives
            && self.lanes_shared.get(w).copied().unwrap_or(true)
            && (fp.warp_sync || fp.exit)
            && m.mutant != Some(Mutant::PorForgetsWarpLanes)
        {
            Footprint::set(&mut fp.write, self.warp_base + w);
            // The release runs every released lane's local code, which may end it.
            fp.exit |= fp.warp_sync;
        }
        if let Some(c) = self.cta_base.filter(|_| m.mutant != Some(Mutant::PorForgetsSyncThreads)) {
            // The release runs every released thread's local code, which may end it (and with
            // the last of them the CTA, under a copy still in flight). The CTA's record is a
            // margin: no step passes a `syncthreads` while the seed stands still (`lookahead`),
            // so arrivals and exits commute among themselves.
            if fp.cta_sync || fp.exit {
                Footprint::set(&mut fp.write, c);
            }
            fp.exit |= fp.cta_sync;
        }
        fp.cta_sync = false;
        if let Some(base) = self.rec_base.filter(|_| m.mutant != Some(Mutant::PorForgetsCpAsyncLandings)) {
            Footprint::set(&mut fp.read, base + t);
            if fp.cp_lands || future {
                // The thread's cp.async copies in flight, which its wait lands: their buffers,
                // and the barriers of its arrive-ons, which those landings fire.
                for c in s.copies.iter().filter(|c| c.issuer as usize == t) {
                    match c.kind {
                        CopyKind::CpAsync { .. } => Footprint::set(&mut fp.write, self.barriers + c.buf as usize),
                        CopyKind::ArriveOn { .. } => self.arrive_on_bits(c.bar as usize, fp),
                        _ => {}
                    }
                }
            }
        }
        fp.cp_lands = false;
        if fp.retires || future {
            for r in s.proxy.reads.iter().filter(|r| r.issuer as usize == t) {
                Footprint::set(&mut fp.read, self.barriers + r.buf as usize);
            }
        }
        if fp.warpgroup {
            // The warpgroup's groups live in its warps' records (docs/model.md, "The warpgroup's
            // MMA"). An issue changes only its own agent's groups, so two agents' issues commute;
            // a wait may return only once every member issued its groups, so it reads every
            // member's record, and it marks what it retired in its own (and, through the marks,
            // keeps two members' waits dependent: the first to cover a read stamps it).
            let members = m.proto.warpgroup_of(t);
            if fp.retires || future {
                for &a in &members {
                    Footprint::set(&mut fp.read, self.warp_base + m.proto.threads[a].warp as usize);
                }
            }
            Footprint::set(&mut fp.write, self.warp_base + m.proto.threads[t].warp as usize);
            if fp.retires || future {
                for r in s
                    .proxy
                    .reads
                    .iter()
                    .filter(|r| r.warpgroup && members.contains(&(r.issuer as usize)))
                {
                    Footprint::set(&mut fp.read, self.barriers + r.buf as usize);
                }
            }
        }
        fp.warpgroup = false;
        if self.commit_warps.get(w).copied().unwrap_or(false)
            && self.lanes_shared.get(w).copied().unwrap_or(true)
            && m.mutant != Some(Mutant::PorForgetsCommitLanes)
        {
            // A commit reads its warp-mates' progress (pc, branch path, commit count, status).
            Footprint::set(&mut fp.read, self.warp_base + w);
        }
        if m.mutant == Some(Mutant::PorForgetsNamedBarriers) {
            for k in 0..self.named {
                let i = self.named_base + k;
                fp.write[i / 64] &= !(1 << (i % 64));
            }
        }
        fp.warp_sync = false;
        fp.retires = false;
    }

    /// A step's fence flags, narrowed to the state (docs/model.md, "The async proxy"): while a
    /// thread stands at a step, no write made by another agent is ordered before it (another
    /// agent's clock holds only what this one released, before its own count moved on), so
    /// - its generic write leaves a flag set in either order with a fence of another thread
    ///   (which cannot cover it): the write's step drops its flag;
    /// - its `fence_proxy_async` clears only flags it could clear now (set, on a buffer whose last
    ///   writes are its own or ordered before it): any other buffer's flag is set afterwards only
    ///   by a write it cannot cover, so the fence's step writes those flags alone.
    fn step_flags(&self, m: &Model, s: &State, t: usize, fp: &mut Footprint) {
        let Some(base) = self.flag_base else { return };
        if m.mutant == Some(crate::rt::Mutant::PorFenceForgetsFlags) {
            // The planted defect: every step keeps no flag at all, a fence's included.
            for d in 0..self.buffers {
                let i = base + d;
                fp.write[i / 64] &= !(1 << (i % 64));
            }
            return;
        }
        let at_fence = matches!(
            m.proto.code_of(t).instrs.get(s.threads[t].pc as usize).map(|i| &i.kind),
            Some(InstrKind::Op {
                op: IOp::Proxy(crate::rt::proxy::ProxyOp::FenceProxyAsync),
                ..
            })
        );
        let clock = &s.threads[t].clock;
        for d in 0..self.buffers {
            let i = base + d;
            let clears = at_fence && s.buffers.get(d).is_none_or(|c| c.fence_clears(t, clock));
            if clears {
                fp.write[i / 64] |= 1 << (i % 64);
            } else {
                fp.write[i / 64] &= !(1 << (i % 64));
            }
        }
    }

    fn landing(&self, m: &Model, s: &State, i: usize) -> Footprint {
        let c = &s.copies[i];
        let mut fp = Footprint::empty(self.objects);
        fp.lands = true;
        match c.kind {
            CopyKind::CpAsync { .. } => {
                // Its buffer; the arrive-ons of its issuer issued after it, into whose barriers it
                // releases and which it may fire; with none, the issuer's record it carries to.
                Footprint::set(&mut fp.write, self.barriers + c.buf as usize);
                if m.mutant == Some(crate::rt::Mutant::PorForgetsCpAsyncLandings) {
                    return fp;
                }
                let mut tracked = false;
                for o in s.copies[i + 1..].iter().filter(|o| o.issuer == c.issuer) {
                    if let CopyKind::ArriveOn { .. } = o.kind {
                        self.arrive_on_bits(o.bar as usize, &mut fp);
                        tracked = true;
                    }
                }
                if let (false, Some(base)) = (tracked, self.rec_base) {
                    Footprint::set(&mut fp.write, base + c.issuer as usize);
                }
            }
            // Fired by a landing of its issuer's copies (whose footprint holds its barrier), never
            // an action of its own.
            CopyKind::ArriveOn { .. } => self.arrive_on_bits(c.bar as usize, &mut fp),
            _ => {
                Footprint::set(&mut fp.write, self.barriers + c.buf as usize);
                Footprint::set(&mut fp.write, c.bar as usize);
                fp.union(&self.completion[c.bar as usize]);
            }
        }
        fp
    }

    /// An arrive-on's arrival writes its barrier (and runs the barrier's completion function).
    fn arrive_on_bits(&self, b: usize, fp: &mut Footprint) {
        if b < self.barriers {
            Footprint::set(&mut fp.write, b);
            fp.union(&self.completion[b]);
        }
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
        // A thread's step is Thread(t): its next instruction, or the election of it by its warp.
        let steps: Vec<Option<Footprint>> = (0..n)
            .map(|t| {
                thread_enabled[t].then(|| {
                    let mut fp = self.step(m, s, t);
                    self.for_thread(m, s, t, &mut fp, false);
                    self.step_flags(m, s, t, &mut fp);
                    fp
                })
            })
            .collect();
        let lands: Vec<Footprint> = (0..s.copies.len()).map(|i| self.landing(m, s, i)).collect();
        let mut best: Option<(Vec<bool>, Vec<bool>, usize)> = None;
        // The cut at waits counts arrivals exactly: semantic defects planted in the model
        // (a wait that returns early, say) would break that premise; the reduction's own do not.
        let ahead = self.counts_arrivals && m.mutant.is_none_or(|x| x.is_footprint_defect());
        let futures = if ahead {
            Vec::new()
        } else {
            // The static futures: every instruction reachable from each thread's pc.
            let futures: Vec<Option<Footprint>> = (0..n)
                .map(|t| {
                    let th = &s.threads[t];
                    (th.status != Status::Done).then(|| {
                        let mut fp = self.future[p_role(m, t)][(th.pc as usize).min(m.proto.code_of(t).instrs.len())];
                        self.for_thread(m, s, t, &mut fp, true);
                        fp
                    })
                })
                .collect();
            futures
        };
        let mut walks = lookahead::Walks::default();
        let mut quiet_prefixes: Vec<Option<Footprint>> = Vec::new();
        let mut counts: Vec<u64> = Vec::new();
        let mut quiet_steps: Vec<Option<Footprint>> = Vec::new();
        let mut in_t = vec![false; n];
        let mut in_l = vec![false; lands.len()];
        for seed in 0..n {
            if !thread_enabled[seed] {
                continue;
            }
            // What the others may do while the seed stands still: their code run ahead to the
            // waits that cannot return without it (or else their whole static future). The
            // seed's own entry is never read: it is in the set from the start.
            let mut steps = &steps;
            let futures: &[Option<Footprint>] = if ahead {
                let r = self.prefixes(m, s, seed, &thread_enabled, &mut walks, &mut counts);
                let mut prefixes = self.round_walks(&walks, r);
                // Arrivals on a named barrier that cannot reach past its count commute.
                if self.named > 0 {
                    let arrival = m
                        .named_bar_at(s, seed)
                        .filter(|&(id, c, _)| id >= 0 && c >= 0)
                        .map(|(id, c, _)| (id as usize, c as u64));
                    let quiet = self.quiet_named(s, &counts, arrival, m.proto.warp_size as u64);
                    if quiet != 0 {
                        quiet_prefixes.clear();
                        quiet_prefixes.extend_from_slice(prefixes);
                        for fp in quiet_prefixes.iter_mut().flatten() {
                            self.without_named(fp, quiet);
                        }
                        prefixes = &quiet_prefixes;
                        quiet_steps.clone_from(steps);
                        for fp in quiet_steps.iter_mut().flatten() {
                            self.without_named(fp, quiet);
                        }
                        steps = &quiet_steps;
                    }
                }
                prefixes
            } else {
                &futures
            };
            in_t.fill(false);
            in_l.fill(false);
            in_t[seed] = true;
            // The union of the set's footprints: a footprint conflicts with a union exactly when
            // it conflicts with one of its parts (every clause of `conflicts` is a disjunction
            // over bits and flags).
            let mut chosen = steps[seed].unwrap();
            let mut ok = true;
            'closure: loop {
                let mut grew = false;
                for u in 0..n {
                    if in_t[u] {
                        continue;
                    }
                    let Some(fut) = &futures[u] else { continue };
                    // An outside thread's exit is never the CTA's last while the seed stands
                    // still, so it commutes with the set's landings (docs/model.md, "Why
                    // every kind is still found", `lifetime`).
                    let outside = Footprint { exit: false, ..*fut };
                    if chosen.conflicts(&outside) {
                        match &steps[u] {
                            Some(fp) => {
                                in_t[u] = true;
                                chosen.union(fp);
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
                    if !in_l[i] && chosen.conflicts(l) {
                        in_l[i] = true;
                        chosen.union(l);
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
                best = Some((in_t.clone(), in_l.clone(), size));
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
