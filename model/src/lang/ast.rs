//! Syntax tree of a `.phase` file, exactly as written (parameters unevaluated).
//!
//! The tree keeps declarations in source order so that the pretty-printer can give back the same
//! program, and every node carries its byte span so that diagnostics and traces can point at it.
//! Names are not resolved here: `lower` turns a checked tree into the executable `ir`.

use crate::kind::ViolationKind;

/// Byte offsets `[start, end)` into the source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// What `phasecheck check` should find: `expect holds`, or a list of violation kinds of which at
/// least one must be found and none outside it.
#[derive(Clone, Debug)]
pub enum Expect {
    Holds(Span),
    Kinds(Vec<(ViolationKind, Span)>),
}

#[derive(Clone, Debug)]
pub struct Program {
    pub name: Ident,
    pub expect: Option<Expect>,
    pub items: Vec<Item>,
}

#[derive(Clone, Debug)]
pub enum Item {
    Param(ParamDecl),
    WarpSize(Expr),
    /// `cluster N`: the protocol runs on a thread-block cluster of N CTAs (1..=8), each with its
    /// own copy of every role, barrier, buffer and var (docs/language.md, "Clusters").
    Cluster(Expr),
    Barrier(BarrierDecl),
    Buffer(BufferDecl),
    Var(VarDecl),
    Completion(CompletionDecl),
    Role(RoleDecl),
    /// `fn advance(s, p) { ... }`: an inline function, expanded at each call.
    Function(FnDecl),
}

/// An inline function. Its parameters are the caller's locals, passed by reference: a call
/// `advance(s, p)` runs the body with `s` and `p` naming the caller's `s` and `p` (an argument
/// that is not a plain `let` local is evaluated into a fresh copy). No recursion.
#[derive(Clone, Debug)]
pub struct FnDecl {
    pub name: Ident,
    pub params: Vec<Ident>,
    pub body: Block,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct ParamDecl {
    pub name: Ident,
    pub value: Expr,
}

#[derive(Clone, Debug)]
pub struct BarrierDecl {
    pub name: Ident,
    /// `barrier full[STAGES] ...`: an array of that many barriers.
    pub len: Option<Expr>,
    pub count: Expr,
    pub completion: Option<Ident>,
    pub manual_init: bool,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct BufferDecl {
    pub name: Ident,
    pub len: Option<Expr>,
    pub bytes: Expr,
    /// Declared `tensormap NAME`: a TMA descriptor (`CUtensorMap`, 128 bytes) kept in shared
    /// memory. It is a buffer to the model (its edits are versioned generic writes), but only the
    /// tensormap statements may name it, and only `fence_proxy_tensormap` makes its edits
    /// visible to the async proxy (`fence.proxy.async` does not cover the tensormap proxy).
    pub tensormap: bool,
    /// Declared `counter NAME`: a 32-bit cell of shared memory that holds a value (initially 0)
    /// rather than a version, changed only by atomic adds (`atomic_add`) and read by
    /// `read_counter`. Atomics on it never race each other; a plain read races every atomic it is
    /// not ordered after (docs/semantics.md, "DSMEM atomics").
    pub counter: bool,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct VarDecl {
    pub name: Ident,
    pub init: Expr,
}

#[derive(Clone, Debug)]
pub struct CompletionDecl {
    pub name: Ident,
    pub body: Block,
}

/// How a role's size is written: `role r[N]` (threads, packed after the previous role),
/// `role r warps N` or `role r warpgroups N` (whole warps, starting at a warp boundary).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RoleUnit {
    #[default]
    Threads,
    Warps,
    Warpgroups,
}

#[derive(Clone, Debug)]
pub struct RoleDecl {
    pub name: Ident,
    /// In units of `unit`.
    pub count: Expr,
    pub unit: RoleUnit,
    /// `role r warps N uniform { ... }`: every warp of the role runs as one agent whose steps
    /// count for all its lanes (docs/model.md, "Warp-uniform roles"). Only whole-warp roles.
    pub uniform: bool,
    pub body: Block,
    pub span: Span,
}

#[derive(Clone, Debug, Default)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum StmtKind {
    /// `let x = EXPR` or `let t = arrive(B)`.
    Let {
        name: Ident,
        value: Value,
    },
    /// `x = EXPR` (a local) or `ctrl = EXPR` (a shared var); `x = try_wait(B, t)` too.
    Assign {
        name: Ident,
        value: Value,
    },
    For {
        var: Ident,
        lo: Expr,
        hi: Expr,
        body: Block,
    },
    /// `else if` is an `else` block holding one `If`.
    If {
        cond: Expr,
        then: Block,
        els: Option<Block>,
    },
    /// A barrier/buffer operation used as a statement; its result, if any, is dropped.
    Op(Op),
    Assert(Expr),
    Return,
    Work,
    SyncWarp,
    SyncThreads,
    /// `while C { }`: C is evaluated before every iteration.
    While {
        cond: Expr,
        body: Block,
    },
    /// `break`: leaves the innermost `for` or `while`.
    Break,
    /// `syncwarp(MASK)`: `__syncwarp(mask)` over the lanes of the warp named by the mask.
    SyncWarpMask(Expr),
    /// `NAME(ARGS)`: a call of an inline function.
    Call {
        name: Ident,
        args: Vec<Expr>,
    },
}

/// Right-hand side of `let`/assignment.
#[derive(Clone, Debug)]
pub enum Value {
    Expr(Expr),
    Op(Op),
}

/// A barrier or buffer named in an operation: `full[s]` or `done`.
#[derive(Clone, Debug)]
pub struct Place {
    pub name: Ident,
    pub index: Option<Box<Expr>>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Op {
    pub kind: OpKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum OpKind {
    /// `arrive(B)` / `arrive(B, n)`; yields the token (the phase arrived on).
    Arrive {
        bar: Place,
        n: Option<Expr>,
    },
    /// `arrive_expect_tx(B, BYTES)`: expect_tx then one arrival, atomically; yields a token.
    ArriveExpectTx {
        bar: Place,
        bytes: Expr,
    },
    Wait {
        bar: Place,
        token: Expr,
    },
    WaitParity {
        bar: Place,
        parity: Expr,
    },
    /// Yields 1 or 0; never blocks.
    TryWait {
        bar: Place,
        token: Expr,
    },
    TryWaitParity {
        bar: Place,
        parity: Expr,
    },
    ArriveAndWait {
        bar: Place,
    },
    ArriveAndDrop {
        bar: Place,
    },
    ExpectTx {
        bar: Place,
        bytes: Expr,
    },
    CompleteTx {
        bar: Place,
        bytes: Expr,
    },
    /// TMA-style: the copy does complete_tx(bytes) on `bar` when it lands.
    CopyAsync {
        buf: Place,
        bar: Place,
        bytes: Option<Expr>,
        version: Option<Expr>,
    },
    /// libcu++ form: issue the copy, then expect_tx(bytes) on `bar`.
    MemcpyAsync {
        buf: Place,
        bar: Place,
        bytes: Option<Expr>,
        version: Option<Expr>,
    },
    Read {
        buf: Place,
        expect: Option<Expr>,
    },
    Write {
        buf: Place,
        version: Expr,
    },
    Init {
        bar: Place,
        count: Option<Expr>,
    },
    Inval {
        bar: Place,
    },
    /// Warp-batched arrive: one arrival per converged group of lanes.
    Commit {
        bar: Place,
    },
    /// `elect()`: `elect.sync` over the whole warp; 1 in the lowest unfinished lane, 0 elsewhere.
    Elect,

    // ---- Named barriers (PTX `bar.sync` / `bar.arrive`, ids 0..=15) ----
    /// `bar_sync(ID, COUNT)`: the warp arrives at hardware barrier `ID` and waits until `COUNT`
    /// threads (whole warps) have arrived.
    BarSync {
        id: Expr,
        count: Expr,
    },
    /// `bar_arrive(ID, COUNT)`: the warp arrives at hardware barrier `ID` without waiting.
    BarArrive {
        id: Expr,
        count: Expr,
    },

    // ---- cp.async with an mbarrier arrive-on (sm_80 `cp.async` + `cp.async.mbarrier.arrive`) ----
    /// `cp_async(BUF)`, optionally `offset = O`, `bytes = N`, `version = V`: a per-thread
    /// asynchronous copy into (part of) BUF that no barrier tracks until `cp_async_arrive`.
    CpAsync {
        buf: Place,
        offset: Option<Expr>,
        bytes: Option<Expr>,
        version: Option<Expr>,
    },
    /// `cp_async_arrive(B)` (`cp.async.mbarrier.arrive.shared.b64`: pending += 1 now, an arrival
    /// once the thread's prior cp.async copies have landed: net zero) and
    /// `cp_async_arrive_noinc(B)` (`.noinc`: only the arrival, which B's count must include).
    /// `cp_async_commit_group()`: `cp.async.commit_group`: the thread's `cp_async` copies not
    /// yet in a group form its newest group.
    CpAsyncCommitGroup,
    /// `cp_async_wait_group(N)`: `cp.async.wait_group N`: waits until at most the `N` newest
    /// committed groups of the thread have copies in flight. `n: None` is `cp_async_wait_all()`
    /// (`cp.async.wait_all`: commit, then wait for every group).
    CpAsyncWait {
        n: Option<Expr>,
    },
    CpAsyncArrive {
        bar: Place,
        noinc: bool,
    },

    // ---- Partial-buffer copies and reads (byte ranges) ----
    /// `copy_async(BUF, B, offset = O, bytes = N, version = V)` (and `memcpy_async` with
    /// `libcu`): a copy into bytes `O .. O + N` of BUF (N defaults to the rest of the buffer).
    CopyAsyncPart {
        buf: Place,
        bar: Place,
        offset: Expr,
        bytes: Option<Expr>,
        version: Option<Expr>,
        libcu: bool,
    },
    /// `st_async(BUF, B, offset = O, bytes = N, version = V)`: PTX `st.async` with
    /// `.mbarrier::complete_tx::bytes`: an asynchronous store of N (4, 8 or 16) bytes from the
    /// thread's registers into bytes `O .. O + N` of BUF that completes N bytes on B (with
    /// `cta = R`, CTA R's BUF and B: the DSMEM hand-off of a cluster pipeline).
    StAsync {
        buf: Place,
        bar: Place,
        offset: Expr,
        bytes: Expr,
        version: Expr,
    },
    /// `copy_async(DST, B, cta = R, from = SRC)` (with `offset = O`, `bytes = N`): PTX
    /// `cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes`, a bulk copy of
    /// bytes `0 .. N` of the issuer's own SRC into bytes `O .. O + N` of CTA R's DST, completing
    /// on CTA R's B. Only ever inside a `Remote` (the parser asks for `cta = R`); unlike a copy
    /// from global memory, the async proxy reads a shared buffer of the issuer's CTA, whose
    /// writes need ordering and a proxy fence, and whose reuse must wait for the copy.
    CopyAsyncFrom {
        buf: Place,
        bar: Place,
        src: Place,
        offset: Option<Expr>,
        bytes: Option<Expr>,
    },
    /// `read(BUF, offset = O, bytes = N, expect = V)`: a read of bytes `O .. O + N` of BUF.
    ReadPart {
        buf: Place,
        offset: Expr,
        bytes: Option<Expr>,
        expect: Option<Expr>,
    },
    /// `write(BUF, V, offset = O, bytes = N)`: the thread writes version V into bytes `O .. O + N`
    /// of BUF (a warp's fragment of a staging tile).
    WritePart {
        buf: Place,
        version: Expr,
        offset: Expr,
        bytes: Option<Expr>,
    },
    // ---- The async proxy: TMA stores, bulk async-groups, wgmma operand reads and
    // proxy fences. See docs/semantics.md, "The async proxy".
    /// `copy_store_async(BUF)`: a TMA store (`cp.async.bulk` shared -> global, bulk_group
    /// completion); the async proxy reads `BUF` until a `wait_group`/`wait_group_read` retires it.
    CopyStoreAsync {
        buf: Place,
    },
    /// `copy_store_async(BUF, offset = O, bytes = N)`: a TMA store of bytes `O .. O + N` of BUF
    /// (`bytes` defaults to the rest of the buffer); the async proxy reads that range only.
    CopyStoreAsyncPart {
        buf: Place,
        offset: Expr,
        bytes: Option<Expr>,
    },
    /// `commit_group()`: `cp.async.bulk.commit_group`: the thread's uncommitted stores form a group.
    CommitGroup,
    /// `wait_group(N)` / `wait_group_read(N)`: `cp.async.bulk.wait_group[.read] N`: all but the
    /// `N` most recent bulk groups of the thread are complete (their reads of shared memory done).
    WaitGroup {
        n: Expr,
        read: bool,
    },
    /// `wgmma_async(A, B)`: `wgmma.fence; wgmma.mma_async ...; wgmma.commit_group` folded into
    /// one statement: the async proxy reads the operand buffers until `wgmma_wait` retires them.
    /// `warpgroup_mma(A, B)` is the same instruction executed by every warp of a warpgroup
    /// (`.sync.aligned`): its group belongs to the warpgroup, not to the issuing agent.
    /// `expect = V`: the operands must hold version V when the MMA reads them.
    WgmmaAsync {
        bufs: Vec<Place>,
        expect: Option<Expr>,
        warpgroup: bool,
    },
    /// `wgmma_wait(N)`: `wgmma.wait_group N`: all but the `N` most recent wgmma groups are done;
    /// `warpgroup_wait(N)` (CUTLASS's `warpgroup_wait<N>()`) counts the warpgroup's groups.
    WgmmaWait {
        n: Expr,
        warpgroup: bool,
    },
    /// `fence_proxy_async()`: `fence.proxy.async.shared::cta`: the thread's (and what it has
    /// acquired) generic-proxy writes are ordered before its later async-proxy operations.
    FenceProxyAsync,
    /// `fence_mbarrier_init()`: `fence.mbarrier_init.release.cluster`: the thread's earlier
    /// `init`s are visible to the async proxy (a TMA copy's complete_tx).
    FenceMbarrierInit,

    // ---- TMA descriptors in shared memory (`tensormap NAME`) ----
    /// `tensormap_write(MAP, V)`: a thread edits the descriptor (`tensormap.replace`, or plain
    /// stores), leaving version V in it through the generic proxy.
    TensormapWrite {
        map: Place,
        version: Expr,
    },
    /// `fence_proxy_tensormap(MAP)`: `fence.proxy.tensormap::generic` (release by the editor,
    /// acquire by the issuer, folded into one fence here): the edits of MAP ordered before it
    /// are visible to the TMA unit's reads of the descriptor after it.
    FenceProxyTensormap {
        map: Place,
    },
    /// `copy_async(BUF, B, ..., tensormap = MAP)`: `op` (a `CopyAsync` or `CopyAsyncPart` of the
    /// own CTA) issued as a tensor copy through the descriptor MAP, which the TMA unit reads from
    /// the issue until the copy lands. `expect = V`: the descriptor version the copy means to use.
    CopyAsyncTensor {
        map: Place,
        expect: Option<Expr>,
        op: Box<Op>,
    },

    // ---- Counters (`counter NAME`) ----
    /// `atomic_add(C, V)`: `red.relaxed.cluster.shared::cluster.add.u32` (CUDA's `atomicAdd`):
    /// an atomic read-modify-write of the counter that orders nothing; with `cta = R` (a
    /// `Remote`) on the peer's counter through `mapa`.
    AtomicAdd {
        counter: Place,
        value: Expr,
    },
    /// `read_counter(C)`, `read_counter(C, expect = V)`: a plain (non-atomic) load of the
    /// counter's value; another value than `expect` is a stale read.
    ReadCounter {
        counter: Place,
        expect: Option<Expr>,
    },

    // ---- Cluster scope: sm_90 thread-block clusters ----
    /// `arrive(B, cta = R)`, `read(BUF, cta = R, ...)`, `copy_async(BUF, B, multicast = MASK)`:
    /// `op` on the objects of another CTA of the cluster (DSMEM through `mapa`), or a multicast
    /// copy that lands in every CTA of the mask. `op` is never a `Remote` itself.
    Remote {
        target: ClusterTarget,
        op: Box<Op>,
    },
    /// `cluster_arrive()`: `barrier.cluster.arrive.release`.
    ClusterArrive,
    /// `cluster_arrive_relaxed()`: `barrier.cluster.arrive.relaxed`: an arrival that releases
    /// nothing (the thread's earlier writes are not made visible to the cluster by it).
    ClusterArriveRelaxed,
    /// `cluster_wait()`: `barrier.cluster.wait.acquire`.
    ClusterWait,
    /// `cluster_sync()`: both, as `cute::cluster_sync()` does.
    ClusterSync,
    /// A Blackwell statement (lang::blackwell): tcgen05 MMA and commit, tensor memory, cluster
    /// launch control.
    Tc(super::blackwell::TcStmt),
}

/// Which CTAs a cluster-scope operation reaches.
#[derive(Clone, Debug)]
pub enum ClusterTarget {
    /// `cta = R`: the CTA of rank R.
    Cta(Expr),
    /// `multicast = MASK`: every CTA whose bit is set in MASK.
    Multicast(Expr),
}

impl ClusterTarget {
    pub fn expr(&self) -> &Expr {
        match self {
            ClusterTarget::Cta(e) | ClusterTarget::Multicast(e) => e,
        }
    }

    /// The named argument as written.
    pub fn arg_name(&self) -> &'static str {
        match self {
            ClusterTarget::Cta(_) => "cta",
            ClusterTarget::Multicast(_) => "multicast",
        }
    }
}

/// The hardware objects, each with one home in `rt/` (its semantics) and `codegen/` (its CUDA).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Object {
    Mbarrier,
    Copies,
    /// The threads' own accesses of shared memory.
    Memory,
    Warp,
    NamedBarrier,
    AsyncProxy,
    Cluster,
    /// Blackwell's tensor cores, tensor memory and cluster launch control (rt/tcgen05.rs).
    Tcgen05,
}

impl OpKind {
    /// The name as written in the language.
    pub fn keyword(&self) -> &'static str {
        match self {
            OpKind::Arrive { .. } => "arrive",
            OpKind::ArriveExpectTx { .. } => "arrive_expect_tx",
            OpKind::Wait { .. } => "wait",
            OpKind::WaitParity { .. } => "wait_parity",
            OpKind::TryWait { .. } => "try_wait",
            OpKind::TryWaitParity { .. } => "try_wait_parity",
            OpKind::ArriveAndWait { .. } => "arrive_and_wait",
            OpKind::ArriveAndDrop { .. } => "arrive_and_drop",
            OpKind::ExpectTx { .. } => "expect_tx",
            OpKind::CompleteTx { .. } => "complete_tx",
            OpKind::CopyAsync { .. } => "copy_async",
            OpKind::MemcpyAsync { .. } => "memcpy_async",
            OpKind::Read { .. } => "read",
            OpKind::Write { .. } => "write",
            OpKind::Init { .. } => "init",
            OpKind::Inval { .. } => "inval",
            OpKind::Commit { .. } => "commit",
            OpKind::Elect => "elect",
            OpKind::BarSync { .. } => "bar_sync",
            OpKind::BarArrive { .. } => "bar_arrive",
            OpKind::CpAsync { .. } => "cp_async",
            OpKind::CpAsyncCommitGroup => "cp_async_commit_group",
            OpKind::CpAsyncWait { n: Some(_) } => "cp_async_wait_group",
            OpKind::CpAsyncWait { n: None } => "cp_async_wait_all",
            OpKind::CpAsyncArrive { noinc: false, .. } => "cp_async_arrive",
            OpKind::CpAsyncArrive { noinc: true, .. } => "cp_async_arrive_noinc",
            OpKind::CopyAsyncPart { libcu: false, .. } => "copy_async",
            OpKind::CopyAsyncPart { libcu: true, .. } => "memcpy_async",
            OpKind::StAsync { .. } => "st_async",
            OpKind::CopyAsyncFrom { .. } => "copy_async",
            OpKind::ReadPart { .. } => "read",
            OpKind::WritePart { .. } => "write",
            // The async proxy.
            OpKind::CopyStoreAsync { .. } | OpKind::CopyStoreAsyncPart { .. } => "copy_store_async",
            OpKind::CommitGroup => "commit_group",
            OpKind::WaitGroup { read: false, .. } => "wait_group",
            OpKind::WaitGroup { read: true, .. } => "wait_group_read",
            OpKind::WgmmaAsync { warpgroup: false, .. } => "wgmma_async",
            OpKind::WgmmaAsync { warpgroup: true, .. } => "warpgroup_mma",
            OpKind::WgmmaWait { warpgroup: false, .. } => "wgmma_wait",
            OpKind::WgmmaWait { warpgroup: true, .. } => "warpgroup_wait",
            OpKind::FenceProxyAsync => "fence_proxy_async",
            OpKind::FenceMbarrierInit => "fence_mbarrier_init",
            OpKind::TensormapWrite { .. } => "tensormap_write",
            OpKind::FenceProxyTensormap { .. } => "fence_proxy_tensormap",
            OpKind::CopyAsyncTensor { op, .. } => op.kind.keyword(),
            OpKind::AtomicAdd { .. } => "atomic_add",
            OpKind::ReadCounter { .. } => "read_counter",
            OpKind::Remote { op, .. } => op.kind.keyword(),
            OpKind::ClusterArrive => "cluster_arrive",
            OpKind::ClusterArriveRelaxed => "cluster_arrive_relaxed",
            OpKind::ClusterWait => "cluster_wait",
            OpKind::ClusterSync => "cluster_sync",
            OpKind::Tc(t) => t.keyword(),
        }
    }

    /// The hardware object whose rules the operation follows (its home in `rt/` and
    /// `codegen/`). Engines that model only some objects dispatch on this, so a new statement of
    /// an object they already leave alone needs no change there.
    pub fn object(&self) -> Object {
        match self {
            OpKind::Arrive { .. }
            | OpKind::ArriveExpectTx { .. }
            | OpKind::Wait { .. }
            | OpKind::WaitParity { .. }
            | OpKind::TryWait { .. }
            | OpKind::TryWaitParity { .. }
            | OpKind::ArriveAndWait { .. }
            | OpKind::ArriveAndDrop { .. }
            | OpKind::ExpectTx { .. }
            | OpKind::CompleteTx { .. }
            | OpKind::Init { .. }
            | OpKind::Inval { .. } => Object::Mbarrier,
            OpKind::CopyAsync { .. }
            | OpKind::MemcpyAsync { .. }
            | OpKind::CopyAsyncPart { .. }
            | OpKind::StAsync { .. }
            | OpKind::CopyAsyncFrom { .. }
            | OpKind::CpAsync { .. }
            | OpKind::CpAsyncCommitGroup
            | OpKind::CpAsyncWait { .. }
            | OpKind::CpAsyncArrive { .. } => Object::Copies,
            OpKind::Read { .. }
            | OpKind::Write { .. }
            | OpKind::ReadPart { .. }
            | OpKind::WritePart { .. }
            | OpKind::AtomicAdd { .. }
            | OpKind::ReadCounter { .. } => Object::Memory,
            OpKind::Commit { .. } | OpKind::Elect => Object::Warp,
            OpKind::BarSync { .. } | OpKind::BarArrive { .. } => Object::NamedBarrier,
            OpKind::CopyStoreAsync { .. }
            | OpKind::CopyStoreAsyncPart { .. }
            | OpKind::CommitGroup
            | OpKind::WaitGroup { .. }
            | OpKind::WgmmaAsync { .. }
            | OpKind::WgmmaWait { .. }
            | OpKind::FenceProxyAsync
            | OpKind::FenceMbarrierInit
            | OpKind::TensormapWrite { .. }
            | OpKind::FenceProxyTensormap { .. } => Object::AsyncProxy,
            OpKind::CopyAsyncTensor { .. } => Object::Copies,
            OpKind::Remote { .. } | OpKind::ClusterArrive | OpKind::ClusterArriveRelaxed | OpKind::ClusterWait | OpKind::ClusterSync => {
                Object::Cluster
            }
            OpKind::Tc(_) => Object::Tcgen05,
        }
    }

    /// Whether the operation produces a value usable in `let x = OP`.
    pub fn yields_value(&self) -> bool {
        matches!(
            self,
            OpKind::Arrive { .. } | OpKind::ArriveExpectTx { .. } | OpKind::TryWait { .. } | OpKind::TryWaitParity { .. } | OpKind::Elect
        )
    }
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Int(i64),
    /// A param, local, shared var, or one of `tid gtid lane warp`.
    Name(String),
    /// `consumer.count`.
    RoleCount(String),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    /// Every operator, for tests that must cover each (a new one joins them here).
    pub const ALL: [BinOp; 13] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Rem,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::And,
        BinOp::Or,
    ];

    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
    /// Binding strength: higher binds tighter. `||` < `&&` < comparisons < `+ -` < `* / %`.
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 3,
            BinOp::Add | BinOp::Sub => 4,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 5,
        }
    }
}

impl Program {
    pub fn params(&self) -> impl Iterator<Item = &ParamDecl> {
        self.items
            .iter()
            .filter_map(|i| if let Item::Param(p) = i { Some(p) } else { None })
    }
    pub fn barriers(&self) -> impl Iterator<Item = &BarrierDecl> {
        self.items
            .iter()
            .filter_map(|i| if let Item::Barrier(b) = i { Some(b) } else { None })
    }
    pub fn buffers(&self) -> impl Iterator<Item = &BufferDecl> {
        self.items
            .iter()
            .filter_map(|i| if let Item::Buffer(b) = i { Some(b) } else { None })
    }
    pub fn vars(&self) -> impl Iterator<Item = &VarDecl> {
        self.items.iter().filter_map(|i| if let Item::Var(v) = i { Some(v) } else { None })
    }
    pub fn completions(&self) -> impl Iterator<Item = &CompletionDecl> {
        self.items
            .iter()
            .filter_map(|i| if let Item::Completion(c) = i { Some(c) } else { None })
    }
    pub fn roles(&self) -> impl Iterator<Item = &RoleDecl> {
        self.items.iter().filter_map(|i| if let Item::Role(r) = i { Some(r) } else { None })
    }
    pub fn functions(&self) -> impl Iterator<Item = &FnDecl> {
        self.items
            .iter()
            .filter_map(|i| if let Item::Function(f) = i { Some(f) } else { None })
    }
    pub fn cluster(&self) -> Option<&Expr> {
        self.items
            .iter()
            .find_map(|i| if let Item::Cluster(e) = i { Some(e) } else { None })
    }

    pub fn warp_size(&self) -> Option<&Expr> {
        self.items
            .iter()
            .find_map(|i| if let Item::WarpSize(e) = i { Some(e) } else { None })
    }
}

fn place(p: &Place, f: &mut dyn FnMut(&Expr)) {
    if let Some(i) = &p.index {
        f(i)
    }
}

impl Op {
    /// Every expression the operation evaluates (operands, indices, targets), outermost ones:
    /// the one walk over an operation's expressions for every consumer of the syntax tree.
    pub fn each_expr(&self, f: &mut dyn FnMut(&Expr)) {
        let o = self;
        match &o.kind {
            OpKind::Arrive { bar, n } => {
                place(bar, f);
                if let Some(n) = n {
                    f(n)
                }
            }
            OpKind::ArriveExpectTx { bar, bytes } | OpKind::ExpectTx { bar, bytes } | OpKind::CompleteTx { bar, bytes } => {
                place(bar, f);
                f(bytes)
            }
            OpKind::Wait { bar, token: e }
            | OpKind::WaitParity { bar, parity: e }
            | OpKind::TryWait { bar, token: e }
            | OpKind::TryWaitParity { bar, parity: e } => {
                place(bar, f);
                f(e)
            }
            OpKind::ArriveAndWait { bar } | OpKind::ArriveAndDrop { bar } | OpKind::Inval { bar } | OpKind::Commit { bar } => place(bar, f),
            OpKind::Elect => {}
            OpKind::CopyAsync { buf, bar, bytes, version } | OpKind::MemcpyAsync { buf, bar, bytes, version } => {
                place(buf, f);
                place(bar, f);
                if let Some(b) = bytes {
                    f(b)
                }
                if let Some(v) = version {
                    f(v)
                }
            }
            OpKind::Read { buf, expect } => {
                place(buf, f);
                if let Some(e) = expect {
                    f(e)
                }
            }
            OpKind::Write { buf, version } => {
                place(buf, f);
                f(version)
            }
            OpKind::Init { bar, count } => {
                place(bar, f);
                if let Some(c) = count {
                    f(c)
                }
            }
            // Named barriers.
            OpKind::BarSync { id, count } | OpKind::BarArrive { id, count } => {
                f(id);
                f(count)
            }
            OpKind::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => {
                place(buf, f);
                for e in [offset, bytes, version].into_iter().flatten() {
                    f(e)
                }
            }
            OpKind::CpAsyncArrive { bar, .. } => place(bar, f),
            OpKind::CopyAsyncPart {
                buf,
                bar,
                offset,
                bytes,
                version,
                ..
            } => {
                place(buf, f);
                place(bar, f);
                f(offset);
                for e in [bytes, version].into_iter().flatten() {
                    f(e)
                }
            }
            OpKind::StAsync {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => {
                place(buf, f);
                place(bar, f);
                f(offset);
                f(bytes);
                f(version)
            }
            OpKind::CopyAsyncFrom {
                buf,
                bar,
                src,
                offset,
                bytes,
            } => {
                place(buf, f);
                place(bar, f);
                place(src, f);
                for e in [offset, bytes].into_iter().flatten() {
                    f(e)
                }
            }
            OpKind::WritePart {
                buf,
                version,
                offset,
                bytes,
            } => {
                place(buf, f);
                f(version);
                f(offset);
                if let Some(e) = bytes {
                    f(e)
                }
            }
            OpKind::ReadPart {
                buf,
                offset,
                bytes,
                expect,
            } => {
                place(buf, f);
                f(offset);
                for e in [bytes, expect].into_iter().flatten() {
                    f(e)
                }
            }
            // The async proxy.
            OpKind::CopyStoreAsync { buf } => place(buf, f),
            OpKind::CopyStoreAsyncPart { buf, offset, bytes } => {
                place(buf, f);
                f(offset);
                if let Some(e) = bytes {
                    f(e)
                }
            }
            OpKind::WgmmaAsync { bufs, expect, .. } => {
                bufs.iter().for_each(|b| place(b, f));
                if let Some(e) = expect {
                    f(e)
                }
            }
            OpKind::WaitGroup { n, .. } | OpKind::WgmmaWait { n, .. } => f(n),
            OpKind::CommitGroup | OpKind::FenceProxyAsync | OpKind::FenceMbarrierInit => {}
            OpKind::CpAsyncWait { n: Some(n) } => f(n),
            OpKind::CpAsyncCommitGroup | OpKind::CpAsyncWait { n: None } => {}
            OpKind::Remote { target, op: inner } => {
                f(target.expr());
                inner.each_expr(f)
            }
            OpKind::TensormapWrite { map, version } => {
                place(map, f);
                f(version)
            }
            OpKind::FenceProxyTensormap { map } => place(map, f),
            OpKind::AtomicAdd { counter, value } => {
                place(counter, f);
                f(value)
            }
            OpKind::ReadCounter { counter, expect } => {
                place(counter, f);
                if let Some(e) = expect {
                    f(e)
                }
            }
            OpKind::CopyAsyncTensor { map, expect, op: inner } => {
                place(map, f);
                if let Some(e) = expect {
                    f(e)
                }
                inner.each_expr(f)
            }
            OpKind::ClusterArrive | OpKind::ClusterArriveRelaxed | OpKind::ClusterWait | OpKind::ClusterSync => {}
            OpKind::Tc(t) => {
                t.places().into_iter().for_each(|p| place(p, f));
                t.exprs().into_iter().for_each(|e| f(e));
            }
        }
    }
}
