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
//!   inval) *writes* it. A write conflicts with a read or a write; a plain arrival on a quiet
//!   barrier is an update that commutes with another (`Footprint::conflicts_with`).
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
//! step of a committing warp's lanes reads. A remote operation's footprint is its operation's on
//! the target CTA's objects, with that CTA's liveness, which its threads' exits write; the cluster
//! barrier is a record like the CTA's. A plain arrival on a barrier whose phase cannot complete
//! while the seed stands still commutes with another (`Footprint::arrive`), and the wait a walk
//! stops at conflicts only with steps that may complete its phase (`lookahead`, `cut`). Named
//! barriers and the `syncthreads` record are objects per CTA (each CTA of a cluster has its own).
//! Each CTA's tensor memory is a record every tensor-memory operation touches, and an MMA's
//! landing writes what its completion changes; a copy from shared memory or a tensor copy reads
//! its source or descriptor until its landing ends the read. Only a protocol with more objects
//! than a footprint holds, or the fine-grained model, is expanded in full (`why_off`).

use crate::program::ir::*;
use crate::rt::copies::CopyKind;
use crate::rt::named::NAMED_BARRIERS;
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
    /// A tensor-memory operation (rt/tcgen05.rs): it reads (`Some(false)`) or changes
    /// (`Some(true)`) its CTA's tensor-memory record (allocations, the permit, the MMAs in flight),
    /// resolved per CTA by `Footprints::objects`.
    pub tensor: Option<bool>,
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
    /// A remote operation (`cta = R`, `multicast = MASK`): its `Touch` names the own CTA's
    /// groups; its footprint is its operation's aimed at each CTA it may reach
    /// (`Footprints::op_bits`), with that CTA's liveness.
    Remote,
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
            tensor: None,
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
            tensor: None,
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
            // Its operation's, on the target CTA's copies of the objects: `Scope::Remote`.
            IOp::Remote { op, .. } => {
                let touch = op.touch();
                Touch {
                    scope: if touch.scope == Scope::Unreduced {
                        Scope::Unreduced
                    } else {
                        Scope::Remote
                    },
                    ..touch
                }
            }
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
    /// The step arrives at or waits on the cluster barrier (resolved per thread into the
    /// cluster barrier's record, with the exits of the threads its release may run on).
    pub cluster_sync: bool,
    pub read: [u64; WORDS],
    pub write: [u64; WORDS],
    /// Barriers the step changes by plain arrivals alone (no tx, no other write): a write, except
    /// on a barrier whose phase in progress cannot complete while the seed stands still (`quiet`
    /// in `conflicts_with`), where two arrivals commute (counts add, clocks join) and conflict
    /// only with the barrier's readers and writers.
    pub arrive: [u64; WORDS],
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
        self.cluster_sync |= o.cluster_sync;
        for (a, b) in self.read.iter_mut().zip(&o.read) {
            *a |= b;
        }
        for (a, b) in self.write.iter_mut().zip(&o.write) {
            *a |= b;
        }
        for (a, b) in self.arrive.iter_mut().zip(&o.arrive) {
            *a |= b;
        }
    }

    /// The two may not commute (steps of different agents).
    pub fn conflicts(&self, o: &Footprint) -> bool {
        self.conflicts_with(o, &[0; WORDS])
    }

    /// The two may not commute, arrivals on the barriers of `quiet` counting as commutative
    /// updates (they conflict with reads and writes, not with each other).
    pub fn conflicts_with(&self, o: &Footprint, quiet: &[u64; WORDS]) -> bool {
        if self.global || o.global || (self.exit && o.lands) || (self.lands && o.exit) {
            return true;
        }
        (0..WORDS).any(|i| {
            let (w1, w2) = (self.write[i] | (self.arrive[i] & !quiet[i]), o.write[i] | (o.arrive[i] & !quiet[i]));
            let (a1, a2) = (self.arrive[i] & quiet[i], o.arrive[i] & quiet[i]);
            w1 & (w2 | o.read[i] | a2) != 0 || self.read[i] & (w2 | a2) != 0 || a1 & (w2 | o.read[i]) != 0
        })
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
    /// The barrier records whose updates always commute (the CTAs' `syncthreads` records and the
    /// cluster barrier's): in every seed's `quiet`.
    commuting_records: [u64; WORDS],
    /// The object index of thread 0's record, when a thread issues `cp_async` or `tcgen05_mma`: a
    /// cp.async landing that no arrive-on of its issuer tracks yet, and every MMA's completion,
    /// carries the engine's knowledge into the issuer's clock (`carry_to_issuer`), which every
    /// later step of the issuer may release, so such a landing writes the issuer's record and
    /// every step of a thread reads its own.
    rec_base: Option<usize>,
    /// The object index of CTA 0's tensor-memory record, when a thread uses tensor memory: its
    /// allocations and relinquished permit, and which regions an MMA has completed into, which
    /// every tensor-memory operation reads or writes (`Touch::tensor`) and every MMA's landing
    /// writes.
    tensor_base: Option<usize>,
    /// The buffers that are tensor-memory regions (`tcgen05_wait_ld` reads those its thread
    /// loaded, which only its hidden local names).
    tensor_regions: Vec<usize>,
    /// The CTAs of the cluster (1 without cluster scope).
    ctas: usize,
    /// The object index of the cluster barrier's record, when a thread uses it: written by every
    /// `cluster_arrive`/`cluster_wait` and by every exit (exited threads count as arrived, so an
    /// exit may complete a phase, as the last arrival does).
    cluster_rec: Option<usize>,
    /// Cluster scope: the object index of CTA 0's liveness, read by every remote operation on
    /// that CTA (on a CTA whose threads have all exited it is a lifetime violation) and written
    /// by its threads' exits.
    live_base: Option<usize>,
    /// The object index of buffer 0's fence flag (`ProxyState::unfenced_write`), when a thread
    /// fences (`fence_proxy_async`); none otherwise. A fence writes the flags it may clear, a
    /// generic write sets its buffer's, an async read's issue reads its buffer's.
    flag_base: Option<usize>,
    lanes_shared: Vec<bool>,
    /// Per warp: a lane of it runs the warp-batched `commit`, whose arrivals depend on which of
    /// its warp-mates stand ready at it: every step of such a warp's lanes reads the warp's
    /// record, which a commit writes (it moves the lanes it joins).
    commit_warps: Vec<bool>,
    /// Whether the local code after some thread's `cluster_wait` may end it.
    cluster_release_exits: bool,
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
    let op = match &i.kind {
        InstrKind::Op {
            op: IOp::Remote { op, .. },
            ..
        } => Some(&**op),
        InstrKind::Op { op, .. } => Some(op),
        _ => None,
    };
    match op {
        Some(IOp::Copy(CopyOp::CopyFrom { .. })) => "a copy from shared memory (`copy_async(..., from =)`)".to_string(),
        Some(IOp::Copy(CopyOp::Tensor { .. })) => "a tensor copy (`copy_async(..., tensormap =)`)".to_string(),
        _ => format!("`{}`", instr_name(i)),
    }
}

/// The statement an instruction stands for, by its name in the language.
fn instr_name(i: &Instr) -> &'static str {
    match &i.kind {
        InstrKind::SyncThreads => "syncthreads",
        InstrKind::NamedBar { sync: true, .. } => "bar_sync",
        InstrKind::NamedBar { sync: false, .. } => "bar_arrive",
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

/// The operations whose object declares no footprint (`Scope::Unreduced`: copies from shared
/// memory, tensor copies, tensor memory): a protocol with any of them is expanded in full (their
/// steps count as touching everything, should one reach `instr`).
fn without_footprint(i: &Instr) -> bool {
    match &i.kind {
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

/// Where named barrier `id` of CTA `cta` sits among the named barriers (as in `State::named`).
pub(super) fn named_index(cta: usize, id: usize) -> usize {
    cta * NAMED_BARRIERS + id
}

/// `named_index` as the look-ahead counts it: CTA 0's for every CTA under the planted defect
/// `PorNamedBarriersOfCtaZero`.
pub(super) fn counted_named_index(m: &Model, cta: usize, id: usize) -> usize {
    let cta = if m.mutant == Some(crate::rt::Mutant::PorNamedBarriersOfCtaZero) {
        0
    } else {
        cta
    };
    named_index(cta, id)
}

/// The CTA of role `ri`: the lowering lays the roles out CTA-major, each CTA with every role.
pub(super) fn role_cta(p: &Protocol, ri: usize) -> usize {
    ri / (p.roles.len() / p.cluster.max(1) as usize).max(1)
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
        let ctas = p.cluster.max(1) as usize;
        // Sixteen per CTA, laid out as `State::named` lays them out (CTA c's barrier k at
        // `c * 16 + k`): each CTA of a cluster has its own.
        let named = if p
            .roles
            .iter()
            .any(|r| r.code.instrs.iter().any(|i| matches!(i.kind, InstrKind::NamedBar { .. })))
        {
            crate::rt::named::NAMED_BARRIERS * ctas
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
        // One `syncthreads` record per CTA: a cluster's CTAs pass theirs independently.
        let rec_base = cta_base + if syncs { ctas } else { 0 };
        // An MMA's landing, like a cp.async landing, carries its completion into its issuer.
        let tcgen05 = crate::rt::tcgen05::uses_tcgen05(p);
        let carries = cp_async || tcgen05;
        let cluster_rec = rec_base + if carries { p.threads.len() } else { 0 };
        let cluster_barrier = p.roles.iter().any(|r| r.code.cluster_slot.is_some());
        let live_base = cluster_rec + cluster_barrier as usize;
        let tensor_base = live_base + if ctas > 1 { ctas } else { 0 };
        let objects = tensor_base + if tcgen05 { ctas } else { 0 };
        let tensor_regions: Vec<usize> = crate::rt::tcgen05::tmem_buffers(p)
            .iter()
            .enumerate()
            .filter(|(_, &r)| r)
            .map(|(d, _)| d)
            .collect();
        let lanes_shared: Vec<bool> = (0..warps).map(|w| p.warp_members(w).nth(1).is_some()).collect();
        let commits = |r: &RoleInfo| r.code.instrs.iter().any(is_commit);
        let commit_warps: Vec<bool> = (0..warps)
            .map(|w| p.warp_members(w).any(|t| commits(&p.roles[p.threads[t].role as usize])))
            .collect();
        let off = why_off(p, fine_grained, objects);
        let applicable = off.is_none();
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
            commuting_records: {
                let mut bits = [0u64; WORDS];
                let ctas_records = if syncs { cta_base..cta_base + ctas } else { 0..0 };
                for c in ctas_records.chain(cluster_barrier.then_some(cluster_rec)) {
                    Footprint::set(&mut bits, c);
                }
                bits
            },
            rec_base: carries.then_some(rec_base),
            tensor_base: tcgen05.then_some(tensor_base),
            tensor_regions,
            ctas,
            cluster_rec: cluster_barrier.then_some(cluster_rec),
            live_base: (ctas > 1).then_some(live_base),
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
            cluster_release_exits: false,
        };
        // Completion functions, closed over the barriers they touch (a fixpoint: footprints only
        // grow, and there are finitely many bits).
        loop {
            let mut changed = false;
            for b in 0..barriers {
                let Some(ci) = p.barriers[b].completion else { continue };
                let mut fp = Footprint::empty(objects);
                // The lowering lays completions out CTA-major, as it does roles.
                let cta = ci as usize / (p.completions.len() / ctas).max(1);
                for i in &p.completions[ci as usize].instrs {
                    fp.union(&f.instr(p, i, &no_index, cta));
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
            .enumerate()
            .map(|(ri, r)| {
                let code = &r.code;
                let n = code.instrs.len();
                let own: Vec<Footprint> = code.instrs.iter().map(|i| f.instr(p, i, &no_index, role_cta(p, ri))).collect();
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
            .enumerate()
            .map(|(ri, r)| r.code.instrs.iter().map(|i| f.instr(p, i, &no_index, role_cta(p, ri))).collect())
            .collect();
        f.exits = p
            .roles
            .iter()
            .map(|r| (0..r.code.instrs.len()).map(|pc| Footprints::exits_after(&r.code, pc)).collect())
            .collect();
        f.cluster_release_exits = p.roles.iter().zip(&f.exits).any(|(r, exits)| {
            r.code
                .instrs
                .iter()
                .enumerate()
                .any(|(pc, i)| matches!(i.kind, InstrKind::ClusterWait { .. }) && exits[pc])
        });
        f.steps = p
            .roles
            .iter()
            .zip(&f.exits)
            .enumerate()
            .map(|(ri, (r, exits))| {
                (0..r.code.instrs.len())
                    .map(|pc| f.step_at(p, &r.code, pc, &no_index, role_cta(p, ri), exits[pc]))
                    .collect()
            })
            .collect();
        f
    }

    /// The step that starts at `pc`: its instruction (a copy's landing is an action of its own),
    /// and an exit if the local code that runs after it in the same step may end the thread
    /// (`exits`: `exits_after`, made once per pc).
    fn step_at(&self, p: &Protocol, code: &Code, pc: usize, at: Index, cta: usize, exits: bool) -> Footprint {
        let mut fp = self.instr(p, &code.instrs[pc], at, cta);
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

    fn bar_bits(&self, g: &Group, at: Option<usize>, fp: &mut Footprint, write: bool, plain_arrival: bool) {
        let range = match at {
            Some(b) => b..b + 1,
            None => g.base as usize..g.base as usize + g.len as usize,
        };
        for b in range {
            if write {
                Footprint::set(if plain_arrival { &mut fp.arrive } else { &mut fp.write }, b);
                fp.union(&self.completion[b]);
            } else {
                Footprint::set(&mut fp.read, b);
            }
        }
    }

    fn buf_bits(&self, g: &Group, at: Option<usize>, fp: &mut Footprint, write: bool) {
        let range = match at {
            Some(d) => d..d + 1,
            None => g.base as usize..g.base as usize + g.len as usize,
        };
        for d in range {
            Footprint::set(if write { &mut fp.write } else { &mut fp.read }, self.barriers + d);
        }
    }

    /// One instruction's footprint, its references valued by `at` (an element when it has a
    /// value, else the whole group), run by a thread of CTA `cta` (whose named barriers it
    /// meets). Includes the landing of a copy it issues.
    fn instr(&self, p: &Protocol, i: &Instr, at: Index, cta: usize) -> Footprint {
        self.objects(p, i, at, cta, self.var_reads(i))
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
    fn objects(&self, p: &Protocol, i: &Instr, at: Index, cta: usize, mut fp: Footprint) -> Footprint {
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
                if self.named > 0 {
                    let ids = match at(id).or_else(|| constant(id)) {
                        Some(k) if (0..NAMED_BARRIERS as i64).contains(&k) => k as usize..k as usize + 1,
                        _ => 0..NAMED_BARRIERS,
                    };
                    for k in ids {
                        Footprint::set(&mut fp.write, self.named_base + named_index(cta, k));
                    }
                }
            }
            // An arrival at the CTA's barrier: its record, resolved per thread (`for_thread`).
            InstrKind::SyncThreads => fp.cta_sync = true,
            // The cluster barrier: its record, which exits write too (`for_thread`); the release
            // runs every released thread's local code, which may end it.
            InstrKind::ClusterArrive { .. } | InstrKind::ClusterWait { .. } => match self.cluster_rec {
                Some(_) => fp.cluster_sync = true,
                None => fp.global = true,
            },
            InstrKind::Op { .. } if without_footprint(i) => fp.global = true,
            InstrKind::Op { op, .. } => {
                self.op_bits(p, i, op, at, None, &mut fp);
                self.tensor_bits(op, cta, &mut fp);
            }
        }
        fp
    }

    /// A tensor-memory operation's CTA record, and for `tcgen05_wait_ld` every region.
    fn tensor_bits(&self, op: &IOp, cta: usize, fp: &mut Footprint) {
        // Only a tensor-memory operation has a `tensor` touch: other operations skip `touch`.
        let (IOp::Tc(tc), Some(base)) = (op, self.tensor_base) else {
            return;
        };
        let Some(write) = tc.touch().tensor else { return };
        Footprint::set(if write { &mut fp.write } else { &mut fp.read }, base + cta);
        if let crate::rt::tcgen05::TcOp::WaitLd { .. } = tc {
            for &d in &self.tensor_regions {
                Footprint::set(&mut fp.read, self.barriers + d);
            }
        }
    }

    /// What operation `op` of instruction `i` touches, with its references aimed at CTA `cta`
    /// when a remote operation redirects them (`None`: the thread's own CTA).
    fn op_bits(&self, p: &Protocol, i: &Instr, op: &IOp, at: Index, cta: Option<usize>, fp: &mut Footprint) {
        if let IOp::Remote {
            target,
            multicast,
            op: inner,
        } = op
        {
            // Each target CTA's copies of the objects, and whether that CTA is still running
            // (an exit of its last thread turns the operation into a lifetime violation).
            let targets = self.remote_ctas(target, *multicast, at);
            for c in (0..self.ctas).filter(|c| targets >> c & 1 != 0) {
                if let Some(live) = self.live_base {
                    Footprint::set(&mut fp.read, live + c);
                }
                self.op_bits(p, i, inner, at, Some(c), fp);
            }
            return;
        }
        let touch = op.touch();
        if touch.scope != Scope::Objects {
            fp.global = true;
            return;
        }
        if let IOp::Tc(crate::rt::tcgen05::TcOp::Commit {
            bar,
            multicast: Some(mask),
        }) = op
        {
            // The arrive of a multicast commit reaches the barrier of every CTA of its mask.
            let targets = self.remote_ctas(mask, true, at);
            for c in (0..self.ctas).filter(|c| targets >> c & 1 != 0) {
                if let Some(live) = self.live_base {
                    Footprint::set(&mut fp.read, live + c);
                }
                let g = self.aimed(&p.barrier_groups, bar, Some(c));
                self.bar_bits(g, element(bar, g, at), fp, true, false);
            }
            return;
        }
        let bar_group = |r: &Ref| self.aimed(&p.barrier_groups, r, cta);
        let buf_group = |r: &Ref| self.aimed(&p.buffer_groups, r, cta);
        if let Some((r, write)) = touch.bar {
            let g = bar_group(r);
            // A plain arrival (no tx: tx changes are checked against the range in order; no drop:
            // a drop lowers the count of the phases to come).
            let plain = matches!(
                op,
                IOp::Mbar(MbarOp::Arrive {
                    expect_tx: None,
                    drop: false,
                    ..
                })
            );
            self.bar_bits(g, element(r, g, at), fp, write, plain);
        }
        if let Some((d, write)) = touch.buf {
            let g = buf_group(d);
            self.buf_bits(g, element(d, g, at), fp, write);
        }
        // A copy from shared memory reads its source in the issuer's own CTA.
        let own = |r: &Ref| self.aimed(&p.buffer_groups, r, None);
        let copy_from = matches!(op, IOp::Copy(crate::rt::copies::CopyOp::CopyFrom { .. }));
        let read_group = |r: &Ref| if copy_from { own(r) } else { buf_group(r) };
        for d in touch.reads {
            let g = read_group(d);
            self.buf_bits(g, element(d, g, at), fp, false);
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
            let flagged: Vec<(&Ref, bool)> = match op {
                IOp::Mem(m) if m.writes() => touch.buf.filter(|&(_, w)| w).into_iter().map(|(d, _)| (d, true)).collect(),
                // An async read's issue (an MMA's operands too) reads the flags of what it reads.
                IOp::Proxy(_) => touch.buf.iter().map(|&(d, _)| d).chain(touch.reads).map(|d| (d, false)).collect(),
                IOp::Tc(crate::rt::tcgen05::TcOp::Mma { .. }) | IOp::Copy(crate::rt::copies::CopyOp::CopyFrom { .. }) => {
                    touch.reads.iter().map(|d| (d, false)).collect()
                }
                _ => Vec::new(),
            };
            for (d, write) in flagged {
                let g = read_group(d);
                let range = match element(d, g, at) {
                    Some(e) => e..e + 1,
                    None => g.base as usize..g.base as usize + g.len as usize,
                };
                for e in range {
                    Footprint::set(if write { &mut fp.write } else { &mut fp.read }, base + e);
                }
            }
        }
    }

    /// The group reference `r` names, aimed at CTA `cta` when a remote operation redirects it
    /// (the lowering lays out every CTA's groups CTA-major, as `Exec::group_index` reads them).
    fn aimed<'g>(&self, groups: &'g [Group], r: &Ref, cta: Option<usize>) -> &'g Group {
        match cta {
            None => &groups[r.group as usize],
            Some(c) => {
                let per = groups.len() / self.ctas;
                &groups[c * per + r.group as usize % per]
            }
        }
    }

    /// The CTAs (bit c: CTA c) a remote operation reaches: its target's value where `at` or the
    /// code gives one, else every CTA of the cluster.
    fn remote_ctas(&self, target: &IExpr, multicast: bool, at: Index) -> u64 {
        let all = if self.ctas >= 64 { u64::MAX } else { (1u64 << self.ctas) - 1 };
        match at(target).or_else(|| constant(target)) {
            Some(v) if multicast && v > 0 && (v as u64) & !all == 0 => v as u64,
            Some(v) if !multicast && (0..self.ctas as i64).contains(&v) => 1 << v,
            _ => all,
        }
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
        } || matches!(
            &i.kind,
            InstrKind::Op {
                op: IOp::Remote { .. },
                ..
            }
        );
        // Whether the local code after the step may end the thread, run on its locals where the
        // code alone would say it may (a loop's last iteration is known from its counter).
        let plain = matches!(
            i.kind,
            InstrKind::Op { .. } | InstrKind::ClusterArrive { .. } | InstrKind::ClusterWait { .. }
        );
        let exits = self.exits[me.role as usize][pc] && (!plain || self.local_exit(m, s, t, Some(i)));
        if !narrows {
            let mut fp = self.steps[me.role as usize][pc];
            fp.exit &= exits || !plain;
            return fp;
        }
        if let (
            Some(crate::rt::Mutant::PorForgetsClusterPeers),
            InstrKind::Op {
                op: IOp::Remote { op, .. },
                ..
            },
        ) = (m.mutant, &i.kind)
        {
            // The planted defect: the remote step names its own CTA's objects, and no liveness.
            let mut fp = self.var_reads(i);
            self.op_bits(p, i, op, &|e: &IExpr| e.eval_pure(&th.locals, me), None, &mut fp);
            fp.lands = false;
            fp.exit |= exits;
            return fp;
        }
        self.step_at(p, code, pc, &|e: &IExpr| e.eval_pure(&th.locals, me), me.cta as usize, exits)
    }

    /// Whether the local code thread `t` runs after the instruction at its pc (`step`: the
    /// operation it executes, whose result is unknown; `None`: a release of the wait it stands at)
    /// may end it, run on the thread's locals; where a branch needs a value the locals do not
    /// give, whether the code alone may (`exits_after`).
    fn local_exit(&self, m: &Model, s: &State, t: usize, step: Option<&Instr>) -> bool {
        let p = &m.proto;
        let code = p.code_of(t);
        let (th, me) = (&s.threads[t], &p.threads[t]);
        let start = th.pc as usize;
        let fallback = || self.exits[me.role as usize].get(start).copied().unwrap_or(true);
        let mut locals = th.locals.clone();
        let mut unknown = vec![false; locals.len()];
        if let Some(InstrKind::Op { result: Some(r), .. }) = step.map(|i| &i.kind) {
            if let Some(u) = unknown.get_mut(*r as usize) {
                *u = true;
            }
        }
        let mut pc = start + 1;
        for _ in 0..LOOKAHEAD_BUDGET {
            let Some(i) = code.instrs.get(pc) else { return true };
            if i.visible {
                return false;
            }
            match &i.kind {
                InstrKind::Return => return true,
                InstrKind::Jump { to } => pc = *to as usize,
                InstrKind::Branch { cond, else_to } => match walk_value(cond, &locals, &unknown, me) {
                    Some(v) => pc = if v != 0 { pc + 1 } else { *else_to as usize },
                    None => return fallback(),
                },
                InstrKind::SetLocal { slot, expr } => {
                    let v = walk_value(expr, &locals, &unknown, me);
                    set_walk_local(&mut locals, &mut unknown, *slot, v);
                    pc += 1;
                }
                _ => return fallback(),
            }
        }
        fallback()
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
            // so arrivals and exits commute among themselves: a commutative update, which
            // `quiet` always holds, as the cluster barrier's record.
            if fp.cta_sync || fp.exit {
                Footprint::set(&mut fp.arrive, c + m.proto.threads[t].cta as usize);
            }
            fp.exit |= fp.cta_sync;
        }
        fp.cta_sync = false;
        if let (true, Some(c)) = (fp.cluster_sync, self.cluster_rec) {
            // An arrival at the cluster barrier (or a wait on it) is a commutative update of its
            // record (`quiet` always holds it): arrivals count and join clocks, in any order, and
            // the phase completes after the last of them in every order; the threads that
            // completion releases are the walks' `passes`, and what they may end, `exit`.
            Footprint::set(&mut fp.arrive, c);
            // The release runs the local code of every thread waiting on the phase, which may
            // end it: in a future, any thread's; in a step, that of the threads waiting now.
            fp.exit |= if future {
                self.cluster_release_exits
            } else {
                (0..s.threads.len()).any(|u| s.threads[u].status == Status::AtClusterWait && self.local_exit(m, s, u, None))
            };
        }
        fp.cluster_sync = false;
        if fp.exit {
            // An exited thread counts as arrived at the cluster barrier, and the last exit of a
            // CTA ends the CTA's shared memory under the remote operations aimed at it.
            if let Some(c) = self.cluster_rec {
                Footprint::set(&mut fp.arrive, c);
            }
            if let Some(live) = self.live_base {
                Footprint::set(&mut fp.write, live + m.proto.threads[t].cta as usize);
            }
        }
        if let Some(live) = self.live_base {
            // An operation on the thread's own CTA finds it running: the thread itself is.
            let i = live + m.proto.threads[t].cta as usize;
            fp.read[i / 64] &= !(1 << (i % 64));
        }
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
        if let (Some(base), Some(Mutant::PorForgetsTensorMemory)) = (self.tensor_base, m.mutant) {
            for i in base..base + self.ctas {
                fp.write[i / 64] &= !(1 << (i % 64));
                fp.read[i / 64] &= !(1 << (i % 64));
            }
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
            CopyKind::Mma => {
                // Its accumulator; its operands, whose reads it ends (its issuer's operand reads
                // before it); the barriers of its issuer's later commits, into which it releases
                // and which it may fire; its CTA's tensor-memory record (the region now holds
                // data); its issuer's record, into which it carries its completion.
                Footprint::set(&mut fp.write, self.barriers + c.buf as usize);
                if m.mutant == Some(crate::rt::Mutant::PorForgetsTensorMemory) {
                    return fp;
                }
                for o in s.copies[..i].iter().filter(|o| o.issuer == c.issuer && o.kind == CopyKind::MmaRead) {
                    Footprint::set(&mut fp.write, self.barriers + o.buf as usize);
                }
                for o in s.copies[i + 1..]
                    .iter()
                    .filter(|o| o.issuer == c.issuer && o.kind == CopyKind::MmaCommit)
                {
                    self.arrive_on_bits(o.bar as usize, &mut fp);
                }
                if let Some(base) = self.tensor_base {
                    Footprint::set(&mut fp.write, base + m.proto.threads[c.issuer as usize].cta as usize);
                }
                if let Some(base) = self.rec_base {
                    Footprint::set(&mut fp.write, base + c.issuer as usize);
                }
            }
            // Fired by its issuer's MMA landing (whose footprint holds its barrier).
            CopyKind::MmaCommit => self.arrive_on_bits(c.bar as usize, &mut fp),
            // An operand read in flight, which a landing ends (whose footprint holds the buffer).
            CopyKind::MmaRead | CopyKind::SrcRead => Footprint::set(&mut fp.read, self.barriers + c.buf as usize),
            CopyKind::Tma => {
                Footprint::set(&mut fp.write, self.barriers + c.buf as usize);
                self.arrive_on_bits(c.bar as usize, &mut fp);
                // A copy from shared memory or a tensor copy ends the read of its source or
                // descriptor (the entry right before it), recorded as a read by its engine.
                if let Some(r) = i.checked_sub(1).map(|k| &s.copies[k]) {
                    if r.kind == CopyKind::SrcRead && r.issuer == c.issuer && m.mutant != Some(crate::rt::Mutant::PorForgetsSourceReads) {
                        Footprint::set(&mut fp.write, self.barriers + r.buf as usize);
                    }
                }
            }
        }
        fp
    }

    /// The barriers whose phase in progress thread `t`'s step (footprint `fp`) may complete: every
    /// barrier it writes, but none for a copy's issue (it moves no count) or an arrival of fewer
    /// than the pending count on a live barrier (the phase still waits for others after it, and
    /// the barriers of the completion function run only at a completion).
    fn step_completes(&self, m: &Model, s: &State, t: usize, fp: &Footprint) -> [u64; WORDS] {
        use crate::rt::copies::CopyOp;
        let bits = barrier_writes(fp, self.barriers);
        if bits.iter().all(|&w| w == 0) || m.mutant == Some(crate::rt::Mutant::PorCutWaitNeverReleased) {
            return [0; WORDS];
        }
        match self.aimed_op(m, s, t) {
            Some((IOp::Copy(CopyOp::Copy { .. } | CopyOp::CopyPart { .. } | CopyOp::StAsync { .. }), _)) => [0; WORDS],
            Some((IOp::Mbar(MbarOp::Arrive { expect_tx, .. }), _)) => {
                let Some((b, k)) = self.step_arrival(m, s, t) else { return bits };
                let (th, me) = (&s.threads[t], &m.proto.threads[t]);
                let st = &s.barriers[b];
                // With its bytes, an arrival completes the phase only if they leave no byte owed.
                let owes = m.proto.lanes_at(t, th.pc) <= 1
                    && expect_tx
                        .as_ref()
                        .and_then(|e| e.eval_pure(&th.locals, me))
                        .is_some_and(|x| st.tx.saturating_add(x) != 0);
                if st.life == Life::Live && ((st.pending.max(0) as u64) > k || owes) {
                    [0; WORDS]
                } else {
                    bits
                }
            }
            _ => bits,
        }
    }

    /// The barriers on which arrivals commute in the executions from `s` in which the seed does
    /// not move: live, with more arrivals pending than the other threads' walks make on it
    /// (`counts`), the seed's step makes, and the arrive-ons in flight may fire. None of those
    /// arrivals completes the phase in any order, and two that complete nothing reach the same
    /// state in either order (docs/model.md, "Arrivals that complete nothing").
    fn quiet_arrivals(&self, m: &Model, s: &State, seed: usize, step: Option<&Footprint>, counts: &[u64]) -> [u64; WORDS] {
        let mut quiet = [0u64; WORDS];
        let Some(step) = step else { return quiet };
        let seed_arrival = self.step_arrival(m, s, seed);
        for b in 0..self.barriers.min(MAX_OBJECTS) {
            let st = &s.barriers[b];
            if st.life != Life::Live || counts[b] == UNBOUNDED {
                continue;
            }
            let touched = (step.write[b / 64] | step.arrive[b / 64]) >> (b % 64) & 1 != 0;
            let own = match seed_arrival {
                Some((x, k)) if x == b => k,
                _ if touched => continue,
                _ => 0,
            };
            let most = counts[b].saturating_add(own).saturating_add(self.arrive_ons_in_flight(s, b));
            if m.mutant == Some(crate::rt::Mutant::PorArrivalsAlwaysQuiet) || (st.pending.max(0) as u64) > most {
                quiet[b / 64] |= 1 << (b % 64);
            }
        }
        quiet
    }

    /// The barrier thread `t`'s step arrives on and how many arrivals it makes (lanes counted),
    /// when its instruction is an arrival whose barrier and count its locals give.
    fn step_arrival(&self, m: &Model, s: &State, t: usize) -> Option<(usize, u64)> {
        let p = &m.proto;
        let (th, me) = (&s.threads[t], &p.threads[t]);
        let (IOp::Mbar(MbarOp::Arrive { bar, n, .. }), cta) = self.aimed_op(m, s, t)? else {
            return None;
        };
        let value = |e: &IExpr| e.eval_pure(&th.locals, me);
        let b = element(bar, self.aimed(&p.barrier_groups, bar, cta), value)?;
        let k = value(n)?.max(0) as u64;
        Some((b, k.saturating_mul(p.lanes_at(t, th.pc).max(1) as u64)))
    }

    /// The operation thread `t`'s step executes and the CTA it is aimed at (`None`: its own): a
    /// remote operation's, at the target its locals give (none when they give none); a
    /// multicast's copy, whose aim no caller needs.
    fn aimed_op<'p>(&self, m: &'p Model, s: &State, t: usize) -> Option<(&'p IOp, Option<usize>)> {
        let p = &m.proto;
        let (th, me) = (&s.threads[t], &p.threads[t]);
        let InstrKind::Op { op, .. } = &p.code_of(t).instrs.get(th.pc as usize)?.kind else {
            return None;
        };
        match op {
            IOp::Remote {
                target,
                multicast: false,
                op,
            } => {
                let c = target.eval_pure(&th.locals, me).filter(|c| (0..self.ctas as i64).contains(c))?;
                Some((&**op, Some(c as usize)))
            }
            IOp::Remote { multicast: true, op, .. } if matches!(**op, IOp::Copy(_)) => Some((&**op, None)),
            IOp::Remote { .. } => None,
            op => Some((op, None)),
        }
    }

    /// The barriers whose phase in progress landing `i` (footprint `l`) may complete: none for a
    /// bulk copy's complete_tx while arrivals are still pending on its live barrier, or while it
    /// owes more bytes than the copy brings (a landing in part brings fewer still).
    fn landing_completes(&self, m: &Model, s: &State, i: usize, l: &Footprint) -> [u64; WORDS] {
        let c = &s.copies[i];
        let quiet = c.kind == CopyKind::Tma
            && (c.bar as usize) < self.barriers
            && s.barriers[c.bar as usize].life == Life::Live
            && (s.barriers[c.bar as usize].pending > 0 || s.barriers[c.bar as usize].tx > c.bytes);
        if quiet || m.mutant == Some(crate::rt::Mutant::PorCutWaitNeverReleased) {
            [0; WORDS]
        } else {
            barrier_writes(l, self.barriers)
        }
    }

    /// The arrive-ons in flight on barrier `b` (each arrives once its issuer's cp.async copies
    /// have landed, or a commit's once its issuer's MMAs have, which landings outside every walk
    /// may bring about); none without cp.async or tcgen05.
    fn arrive_ons_in_flight(&self, s: &State, b: usize) -> u64 {
        if self.rec_base.is_none() {
            return 0;
        }
        s.copies
            .iter()
            .filter(|c| matches!(c.kind, CopyKind::ArriveOn { .. } | CopyKind::MmaCommit) && c.bar as usize == b)
            .count() as u64
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
        let p = &m.proto;
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
        // The barriers whose phase in progress each step and landing may complete: a wait that
        // stops a walk conflicts with those alone (`lookahead`, `cut`).
        let step_completes: Vec<[u64; WORDS]> = (0..n)
            .map(|t| steps[t].as_ref().map_or([0; WORDS], |fp| self.step_completes(m, s, t, fp)))
            .collect();
        let land_completes: Vec<[u64; WORDS]> = lands.iter().enumerate().map(|(i, l)| self.landing_completes(m, s, i, l)).collect();
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
            let mut cuts: &[Option<u16>] = &[];
            let mut quiet = [0u64; WORDS];
            let futures: &[Option<Footprint>] = if ahead {
                let r = self.prefixes(m, s, seed, &thread_enabled, &mut walks, &mut counts);
                let mut prefixes = self.round_walks(&walks, r);
                cuts = self.round_cuts(&walks, r);
                quiet = self.quiet_arrivals(m, s, seed, steps[seed].as_ref(), &counts);
                for (q, r) in quiet.iter_mut().zip(&self.commuting_records) {
                    *q |= r;
                }
                // Arrivals on a named barrier that cannot reach past its count commute.
                if self.named > 0 {
                    let arrival = m
                        .named_bar_at(s, seed)
                        .filter(|&(id, c, _)| (0..NAMED_BARRIERS as i64).contains(&id) && c >= 0)
                        .map(|(id, c, _)| (counted_named_index(m, m.proto.threads[seed].cta as usize, id as usize), c as u64));
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
            let mut completing = step_completes[seed];
            let mut ok = true;
            'closure: loop {
                let mut grew = false;
                for u in 0..n {
                    if in_t[u] {
                        continue;
                    }
                    let Some(fut) = &futures[u] else { continue };
                    // An outside thread's exit is never the last of the seed's CTA while the
                    // seed stands still, so it commutes with the set's landings (docs/model.md,
                    // "Why every kind is still found", `lifetime`) and remote operations on
                    // that CTA; a thread of another CTA may end its own.
                    let mut outside = *fut;
                    if p.threads[u].cta == p.threads[seed].cta {
                        outside.exit = false;
                    }
                    if let Some(live) = self.live_base {
                        let i = live + p.threads[seed].cta as usize;
                        outside.write[i / 64] &= !(1 << (i % 64));
                    }
                    let released = cuts
                        .get(u)
                        .copied()
                        .flatten()
                        .is_some_and(|b| completing[b as usize / 64] >> (b % 64) & 1 != 0);
                    if released || chosen.conflicts_with(&outside, &quiet) {
                        match &steps[u] {
                            Some(fp) => {
                                in_t[u] = true;
                                chosen.union(fp);
                                or_into(&mut completing, &step_completes[u]);
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
                    if !in_l[i] && chosen.conflicts_with(l, &quiet) {
                        in_l[i] = true;
                        chosen.union(l);
                        or_into(&mut completing, &land_completes[i]);
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

/// The value of `e` on a walk's locals: none where it reads a local the walk does not know, or a
/// shared var (which `eval_pure` has no value for).
fn walk_value(e: &IExpr, locals: &[i64], unknown: &[bool], me: &ThreadInfo) -> Option<i64> {
    if unknown.contains(&true) {
        let mut known = true;
        e.each(&mut |x| {
            if let IExpr::Local(l) = x {
                known &= !unknown.get(*l as usize).copied().unwrap_or(true);
            }
        });
        if !known {
            return None;
        }
    }
    e.eval_pure(locals, me)
}

/// A walk's local `slot` set to `v` (`None`: a value the walk does not know).
fn set_walk_local(locals: &mut [i64], unknown: &mut [bool], slot: u16, v: Option<i64>) {
    let l = slot as usize;
    if l < locals.len() {
        locals[l] = v.unwrap_or(0);
        unknown[l] = v.is_none();
    }
}

fn or_into(a: &mut [u64; WORDS], b: &[u64; WORDS]) {
    for (x, y) in a.iter_mut().zip(b) {
        *x |= y;
    }
}

/// The barriers a footprint writes.
fn barrier_writes(fp: &Footprint, barriers: usize) -> [u64; WORDS] {
    let mut bits = [0u64; WORDS];
    for b in 0..barriers.min(MAX_OBJECTS) {
        bits[b / 64] |= (fp.write[b / 64] | fp.arrive[b / 64]) & (1 << (b % 64));
    }
    bits
}

/// The flat index of the element `r` names, with its index expression valued by `index` (`None`:
/// no value, or out of range).
fn element(r: &Ref, g: &Group, index: impl FnOnce(&IExpr) -> Option<i64>) -> Option<usize> {
    let k = match &r.index {
        None => 0,
        Some(e) => index(e)?,
    };
    (0..g.len as i64).contains(&k).then(|| g.base as usize + k as usize)
}

fn p_role(m: &Model, t: usize) -> usize {
    m.proto.threads[t].role as usize
}
