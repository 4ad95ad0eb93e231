//! The executable form of a protocol: parameters evaluated, arrays flattened, names resolved to
//! slots, structured control flow turned into jumps.
//!
//! Each role's body becomes a flat list of instructions so that a thread's control state is just a
//! program counter plus its locals: small, hashable, and cheap to copy during the search.

use super::eval::{self, Logic, Node};
use crate::lang::ast::{BinOp, Span, UnOp};
pub use crate::rt::copies::CopyOp;
pub use crate::rt::mbarrier::MbarOp;
pub use crate::rt::memory::MemOp;
pub use crate::rt::proxy::ProxyOp;
pub use crate::rt::tcgen05::TcOp;
pub use crate::rt::warp::WarpOp;
use crate::ViolationKind;

/// The PTX limit on arrival counts and on the magnitude of the tx-count: 2^20 - 1.
pub const MAX_COUNT: i64 = (1 << 20) - 1;

#[derive(Clone, Debug)]
pub struct Protocol {
    pub name: String,
    /// Every parameter with its final value (defaults, then `--param` overrides), in order.
    pub params: Vec<(String, i64)>,
    /// `None`: `expect holds` or no expect line; see `expect_given`.
    pub expect: Option<Vec<ViolationKind>>,
    pub expect_given: bool,
    pub warp_size: u32,
    /// CTAs in the thread-block cluster (`cluster N`; 1 when not given). With N > 1 every table
    /// below holds N copies, CTA-major: CTA c's copy of barrier group g is group
    /// `c * barrier_groups.len() / N + g`, and likewise for barriers, buffers, vars, completions
    /// and roles; threads are numbered CTA by CTA.
    pub cluster: u32,
    pub barriers: Vec<BarrierInfo>,
    pub barrier_groups: Vec<Group>,
    pub buffers: Vec<BufferInfo>,
    pub buffer_groups: Vec<Group>,
    pub vars: Vec<VarInfo>,
    pub completions: Vec<Code>,
    pub roles: Vec<RoleInfo>,
    pub threads: Vec<ThreadInfo>,
}

/// A declared name that may be an array: elements `base .. base + len` of the flat list.
#[derive(Clone, Debug)]
pub struct Group {
    pub name: String,
    pub base: u16,
    pub len: u16,
    pub is_array: bool,
}

#[derive(Clone, Debug)]
pub struct BarrierInfo {
    /// Display name: `full[1]` or `done`.
    pub name: String,
    /// Count given at declaration (what `init(B)` uses too). May be out of range: that is a
    /// count-range verdict, not an input error.
    pub count: i64,
    pub completion: Option<u16>,
    pub manual_init: bool,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct BufferInfo {
    pub name: String,
    pub bytes: i64,
    /// A TMA descriptor (`tensormap NAME`): its generic writes are made visible to the async
    /// proxy by `fence_proxy_tensormap` only.
    pub tensormap: bool,
    /// A counter (`counter NAME`): its cell holds a value (initially 0) that atomic adds
    /// change, and its race records tell atomics from plain reads (rt/memory.rs).
    pub counter: bool,
}

#[derive(Clone, Debug)]
pub struct VarInfo {
    pub name: String,
    pub init: i64,
}

#[derive(Clone, Debug)]
pub struct RoleInfo {
    pub name: String,
    /// Threads (lanes) of the role, as `ROLE.count` says; a uniform role has fewer agents.
    pub count: u32,
    /// Declared `uniform`: one agent per warp, each step counting for the warp's lanes
    /// (program::uniform).
    pub uniform: bool,
    /// The `gtid` of its first thread, in the model's numbering (`ThreadInfo::gtid`).
    pub first_gtid: u32,
    pub code: Code,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadInfo {
    pub role: u16,
    pub tid: u32,
    /// In a cluster, `gtid` and `warp` number the threads and warps of the whole cluster (CTA c
    /// starts at `c * Protocol::cta_stride()`), so that no warp spans two CTAs; the language's
    /// `gtid` and `warp` are lowered to the CTA-local values.
    pub gtid: u32,
    pub lane: u32,
    pub warp: u32,
    /// The CTA's rank in the cluster (0 without `cluster`).
    pub cta: u16,
}

#[derive(Clone, Debug, Default)]
pub struct Code {
    pub name: String,
    pub instrs: Vec<Instr>,
    pub local_names: Vec<String>,
    /// The code has a `while` loop: a thread may spin in it (docs/model.md, "Loops").
    pub has_while: bool,
    /// A uniform role's elected blocks (`if e == 1 { ... }` after `let e = elect()`), as pc
    /// ranges `start..end`: only the elected lane runs them, so their steps count once.
    pub elected: Vec<(u32, u32)>,
    /// Cluster scope: the hidden local that holds the thread's state at the cluster barrier (0:
    /// not arrived; 1 or 2: arrived on the phase of that mark and not yet waited, rt/cluster.rs),
    /// when the code
    /// uses `cluster_arrive`/`cluster_wait`/`cluster_sync`.
    pub cluster_slot: Option<u16>,
    /// Cluster scope: the hidden local that holds the epoch of the CTA's init agent the thread's
    /// `fence_mbarrier_init()` covered (0: no fence yet), when the code uses the fence. A later
    /// `cluster_arrive_relaxed()` publishes those inits and nothing else: the fence is
    /// `fence.mbarrier_init.release.cluster`, a release fence for inits only, and a fence before a
    /// relaxed arrival releases what the fence covered (rt/cluster.rs).
    pub init_fence_slot: Option<u16>,
}

#[derive(Clone, Debug)]
pub struct Instr {
    pub kind: InstrKind,
    /// The statement this instruction came from.
    pub span: Span,
    /// Touches shared state (barriers, buffers, vars, other threads): a scheduling point. Local
    /// instructions run as part of the preceding visible step, which does not change which states
    /// are reachable but keeps interleavings of purely local work out of the search.
    pub visible: bool,
}

#[derive(Clone, Debug)]
pub enum InstrKind {
    SetLocal {
        slot: u16,
        expr: IExpr,
    },
    SetVar {
        var: u16,
        expr: IExpr,
    },
    Jump {
        to: u32,
    },
    /// `if !cond goto else_to`. The outcome feeds the thread's divergence signature.
    Branch {
        cond: IExpr,
        else_to: u32,
    },
    Op {
        op: IOp,
        result: Option<u16>,
    },
    Assert(IExpr),
    Return,
    Work,
    SyncWarp,
    SyncThreads,
    /// `syncwarp(mask)`: waits for the unfinished lanes of the warp whose bit is set in `mask`.
    SyncWarpMask {
        mask: IExpr,
    },
    /// `elect()`: a warp-synchronous election over the unfinished lanes of the warp; the elected
    /// lane gets 1 in `slot`, the others 0. Which lane is a choice the search explores.
    Elect {
        slot: u16,
    },
    /// `bar_sync(ID, COUNT)` (`sync`) / `bar_arrive(ID, COUNT)`: PTX `bar.sync` /
    /// `bar.arrive` on hardware barrier `ID` (0..=15). The warp arrives once all its unfinished
    /// lanes executed it, counting `warp_size` threads towards `COUNT` (docs/model.md).
    NamedBar {
        id: IExpr,
        count: IExpr,
        sync: bool,
    },
    /// Before a wait on element `index` of barrier array `group` with a token from
    /// local slot `origin`'s arrival: the token must come from the same element (`origin` holds
    /// its index + 1, or 0 when not known). A local instruction.
    TokenCheck {
        origin: u16,
        index: IExpr,
        group: u16,
    },
    /// Cluster scope: `barrier.cluster.arrive.release` (`slot` is the code's `cluster_slot`).
    ClusterArrive {
        slot: u16,
        /// `cluster_arrive_relaxed()`: `barrier.cluster.arrive.relaxed`, which releases nothing.
        relaxed: bool,
    },
    /// Cluster scope: `barrier.cluster.wait.acquire`: blocks until the phase the thread arrived
    /// on completes (every unfinished thread of the cluster arrived).
    ClusterWait {
        slot: u16,
    },
}

#[derive(Clone, Debug)]
pub enum IExpr {
    Const(i64),
    Local(u16),
    Var(u16),
    Tid,
    Gtid,
    Lane,
    Warp,
    Unary(UnOp, Box<IExpr>),
    Binary(BinOp, Box<IExpr>, Box<IExpr>),
}

/// Why an expression has no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// Arithmetic that has no value (overflow, division by zero, an identity outside a thread):
    /// the step that evaluates it reports an `assertion` violation.
    Fault(&'static str),
    /// A shared var the caller cannot read here.
    NoVar,
}

impl IExpr {
    /// The one evaluator of the language's expressions. `var` reads a shared var (the step records
    /// the read for race detection; a readiness check only peeks). `&&` and `||` short-circuit, so a
    /// guard protects its right side everywhere an expression is evaluated.
    pub fn eval<'a>(
        &'a self,
        locals: &[i64],
        me: Option<&ThreadInfo>,
        var: &mut dyn FnMut(u16) -> Result<i64, EvalError>,
    ) -> Result<i64, EvalError> {
        let node = &mut |x: &'a IExpr| {
            Ok(match x {
                IExpr::Const(v) => Node::Value(*v),
                IExpr::Local(i) => Node::Value(locals[*i as usize]),
                IExpr::Var(v) => Node::Value(var(*v)?),
                IExpr::Tid | IExpr::Gtid | IExpr::Lane | IExpr::Warp => {
                    let me = me.ok_or(EvalError::Fault("thread identity outside a thread"))?;
                    Node::Value(
                        (match x {
                            IExpr::Tid => me.tid,
                            IExpr::Gtid => me.gtid,
                            IExpr::Lane => me.lane,
                            _ => me.warp,
                        }) as i64,
                    )
                }
                IExpr::Unary(op, a) => Node::Unary(*op, &**a),
                IExpr::Binary(op, a, b) => Node::Binary(*op, &**a, &**b),
            })
        };
        eval::eval(self, Logic::ShortCircuit, node, &|_, m| EvalError::Fault(m))
    }

    /// The expression with a constant value where its operands are constants (the lowering folds
    /// bottom-up): a node stays as it is when an operand is not a constant or the operation
    /// faults, so the fault is reported when (and if) a thread evaluates it.
    pub fn folded(self) -> IExpr {
        fn constant(x: &IExpr) -> Result<Node<'_, IExpr>, ()> {
            match x {
                IExpr::Const(v) => Ok(Node::Value(*v)),
                IExpr::Unary(op, a) => Ok(Node::Unary(*op, &**a)),
                IExpr::Binary(op, a, b) => Ok(Node::Binary(*op, &**a, &**b)),
                _ => Err(()),
            }
        }
        match eval::eval(&self, Logic::Strict, &mut constant, &|_, _| ()) {
            Ok(v) if !matches!(self, IExpr::Const(_)) => IExpr::Const(v),
            _ => self,
        }
    }

    /// Value from locals and thread identity alone: `None` when the expression reads a shared var
    /// or faults.
    pub fn eval_pure(&self, locals: &[i64], me: &ThreadInfo) -> Option<i64> {
        self.eval(locals, Some(me), &mut |_| Err(EvalError::NoVar)).ok()
    }

    pub fn reads_var(&self) -> bool {
        match self {
            IExpr::Var(_) => true,
            IExpr::Unary(_, e) => e.reads_var(),
            IExpr::Binary(_, a, b) => a.reads_var() || b.reads_var(),
            _ => false,
        }
    }
}

/// A reference into a barrier or buffer group; the index is evaluated when the step runs.
#[derive(Clone, Debug)]
pub struct Ref {
    pub group: u16,
    pub index: Option<IExpr>,
}

impl Ref {
    /// The index expression of an array element, if any.
    pub fn exprs(&self, f: &mut dyn FnMut(&IExpr)) {
        if let Some(i) = &self.index {
            f(i)
        }
    }
}

#[derive(Clone, Debug)]
pub enum WaitTarget {
    Token(IExpr),
    Parity(IExpr),
}

impl WaitTarget {
    pub fn expr(&self) -> &IExpr {
        match self {
            WaitTarget::Token(e) | WaitTarget::Parity(e) => e,
        }
    }

    /// The phase a wait names, given the target's value: a token names its phase exactly; a
    /// parity names the phase of that parity among {K-1, K}, K being the latest phase the thread
    /// knows the barrier reached (SEMANTICS.md).
    pub fn named_phase(&self, value: i64, known: i64) -> i64 {
        match self {
            WaitTarget::Token(_) => value,
            WaitTarget::Parity(_) => {
                if known.rem_euclid(2) == value.rem_euclid(2) {
                    known
                } else {
                    known - 1
                }
            }
        }
    }
}

/// One operation of the protocol, grouped by the hardware object whose rules it follows. Each
/// object's operations are declared, stepped, packed and given their footprint in its own file of
/// `rt/` (the variants' documentation lives there): a new statement of an object touches that file,
/// not this one.
#[derive(Clone, Debug)]
pub enum IOp {
    /// An mbarrier: arrivals, waits, transaction bytes, init and inval (rt/mbarrier.rs).
    Mbar(MbarOp),
    /// Async copies: TMA-style copies that complete bytes on a barrier, and `cp.async` with its
    /// arrive-on and groups (rt/copies.rs).
    Copy(CopyOp),
    /// Generic-proxy accesses of shared memory by the thread itself (rt/memory.rs).
    Mem(MemOp),
    /// Warp convergence: the warp-batched arrival (rt/warp.rs).
    Warp(WarpOp),
    /// The async proxy: TMA stores, bulk groups, wgmma operand reads and the proxy fences
    /// (rt/proxy.rs).
    Proxy(ProxyOp),
    /// Blackwell: tcgen05 MMA and commit, tensor memory, cluster launch control (rt/tcgen05.rs).
    Tc(TcOp),
    /// Cluster scope (rt/cluster.rs): `op` on the objects of CTA `target` of the cluster
    /// (`multicast == false`: a remote arrive or a DSMEM read through `mapa`), or on those of every
    /// CTA whose bit is set in `target` (`multicast`: one copy landing in each, each its own async
    /// event).
    Remote { target: IExpr, multicast: bool, op: Box<IOp> },
}

impl IExpr {
    /// This expression and every subexpression, outermost first.
    pub fn each(&self, f: &mut dyn FnMut(&IExpr)) {
        f(self);
        match self {
            IExpr::Unary(_, e) => e.each(f),
            IExpr::Binary(_, a, b) => {
                a.each(f);
                b.each(f);
            }
            _ => {}
        }
    }

    /// Reads the thread's identity (`tid`, `gtid`, `lane`, `warp`): its value may differ from
    /// thread to thread (rt::symmetry records what it decides for each).
    pub fn reads_identity(&self) -> bool {
        let mut found = false;
        self.each(&mut |e| found |= matches!(e, IExpr::Tid | IExpr::Gtid | IExpr::Lane | IExpr::Warp));
        found
    }
}

impl Instr {
    /// Every expression the instruction evaluates (operands, indices, targets), outermost ones.
    pub fn exprs(&self, f: &mut dyn FnMut(&IExpr)) {
        match &self.kind {
            InstrKind::SetLocal { expr, .. } | InstrKind::SetVar { expr, .. } => f(expr),
            InstrKind::Branch { cond, .. } => f(cond),
            InstrKind::Assert(e) => f(e),
            InstrKind::SyncWarpMask { mask } => f(mask),
            InstrKind::NamedBar { id, count, .. } => {
                f(id);
                f(count)
            }
            InstrKind::TokenCheck { index, .. } => f(index),
            InstrKind::Jump { .. }
            | InstrKind::ClusterArrive { .. }
            | InstrKind::ClusterWait { .. }
            | InstrKind::Return
            | InstrKind::Work
            | InstrKind::SyncWarp
            | InstrKind::SyncThreads
            | InstrKind::Elect { .. } => {}
            InstrKind::Op { op, .. } => op.exprs(f),
        }
    }
}

impl IOp {
    /// Every expression the operation evaluates (operands, indices, targets), outermost ones.
    pub fn exprs(&self, f: &mut dyn FnMut(&IExpr)) {
        match self {
            IOp::Mbar(op) => op.exprs(f),
            IOp::Copy(op) => op.exprs(f),
            IOp::Mem(op) => op.exprs(f),
            IOp::Warp(op) => op.exprs(f),
            IOp::Proxy(op) => op.exprs(f),
            IOp::Tc(op) => op.exprs(f),
            IOp::Remote { target, op, .. } => {
                f(target);
                op.exprs(f)
            }
        }
    }

    /// The statement's name in the language (of the operation a remote one aims at another CTA).
    pub fn name(&self) -> &'static str {
        match self {
            IOp::Mbar(op) => op.name(),
            IOp::Copy(op) => op.name(),
            IOp::Mem(op) => op.name(),
            IOp::Warp(op) => op.name(),
            IOp::Proxy(op) => op.name(),
            IOp::Tc(op) => op.name(),
            IOp::Remote { op, .. } => op.name(),
        }
    }
}

impl Protocol {
    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    /// Warps that hold at least one thread, and the empty ones between them (the lanes a
    /// warp-aligned role skips are not modelled): the last thread's warp + 1.
    pub fn warp_count(&self) -> usize {
        self.threads.last().map_or(0, |t| t.warp as usize + 1)
    }

    /// The threads of model warp `w`, in lane order.
    pub fn warp_members(&self, w: usize) -> impl Iterator<Item = usize> + '_ {
        self.threads
            .iter()
            .enumerate()
            .filter(move |(_, t)| t.warp as usize == w)
            .map(|(i, _)| i)
    }

    /// Agents are the threads followed by one async-copy engine per buffer: the parties whose
    /// accesses the happens-before clocks track.
    /// Under cluster scope one more per CTA: its barrier inits, an agent that never acts, whose
    /// epoch 1 is "CTA r's declared barriers are initialised" (rt/cluster.rs). Its own column lets
    /// an init be published without publishing anything the CTA's threads did.
    pub fn agent_count(&self) -> usize {
        self.threads.len() + self.buffers.len() + self.init_agents()
    }

    /// The init agents of cluster scope: one per CTA, none for a lone CTA.
    fn init_agents(&self) -> usize {
        if self.cluster > 1 {
            self.cluster as usize
        } else {
            0
        }
    }

    /// The agent standing for CTA `cta`'s barrier inits (cluster scope only).
    pub fn init_agent(&self, cta: usize) -> Option<usize> {
        (self.init_agents() > 0).then(|| self.threads.len() + self.buffers.len() + cta)
    }

    pub fn code_of(&self, thread: usize) -> &Code {
        &self.roles[self.threads[thread].role as usize].code
    }

    /// Cluster scope: threads per CTA in the model's numbering (`gtid` of CTA c's first thread is
    /// `c * cta_stride()`): the CTA's threads rounded up to whole warps.
    pub fn cta_stride(&self) -> u32 {
        let n = self.threads.len() / self.cluster.max(1) as usize;
        self.threads[..n]
            .last()
            .map_or(0, |t| (t.gtid + 1).div_ceil(self.warp_size) * self.warp_size)
    }

    /// The CTA that owns barrier `b` (tables are CTA-major).
    pub fn cta_of_barrier(&self, b: usize) -> usize {
        b / (self.barriers.len() / self.cluster.max(1) as usize).max(1)
    }

    /// Barrier `b`'s index within its CTA's table: the same for every CTA's copy of it.
    pub fn barrier_in_cta(&self, b: usize) -> usize {
        b % (self.barriers.len() / self.cluster.max(1) as usize).max(1)
    }

    /// Role `ri`'s index within its CTA's roles: the same for every CTA's copy of it.
    pub fn role_in_cta(&self, ri: usize) -> usize {
        ri % (self.roles.len() / self.cluster.max(1) as usize).max(1)
    }

    /// A name as declared, without the `ctaN.` of the CTA's copy that cluster scope gives it.
    pub fn declared_name<'a>(&self, name: &'a str) -> &'a str {
        if self.cluster > 1 {
            name.split_once('.').map_or(name, |(_, rest)| rest)
        } else {
            name
        }
    }

    /// The CTA that owns buffer `b`.
    pub fn cta_of_buffer(&self, b: usize) -> usize {
        b / (self.buffers.len() / self.cluster.max(1) as usize).max(1)
    }

    /// `producer#0` style label for a thread; `consumer.w1 (x32 lanes)` for an agent of a
    /// uniform role (its warp within the role, and how many lanes it stands for).
    pub fn thread_label(&self, thread: usize) -> String {
        let t = &self.threads[thread];
        let role = &self.roles[t.role as usize];
        if role.uniform {
            let ws = self.warp_size;
            return format!("{}.w{} (x{ws} lanes)", role.name, t.tid / ws);
        }
        format!("{}#{}", role.name, t.tid)
    }

    /// How many lanes take part when `thread` executes the instruction at `pc`: the warp's
    /// lanes for an agent of a uniform role outside its elected blocks, else 1.
    pub fn lanes_at(&self, thread: usize, pc: u32) -> i64 {
        let role = &self.roles[self.threads[thread].role as usize];
        if !role.uniform || role.code.elected.iter().any(|&(lo, hi)| lo <= pc && pc < hi) {
            return 1;
        }
        self.warp_size as i64
    }
}
