//! CUDA generation: one kernel per protocol, from the lowered program (`ir::Protocol`).
//!
//! The generator walks the same instruction list the model executes, so every *visible*
//! instruction (one model step, `Action::Thread`) is one turnstile step in the kernel: a replay can
//! force exactly the order of a trace. Each instruction is preceded by a comment quoting the spec
//! line it came from, so the kernel reads like a listing of the spec.
//!
//! Warp-batched `commit` has two forms, each its own kernel. [`generate_hw_commit`] batches as the
//! hardware does: the lanes of the warp executing the commit together (`__activemask()`, split by
//! barrier with `__match_any_sync`) make one arrival, from the lowest of them; it runs free (stress)
//! and tests the model's convergence rule against the silicon. [`generate`] (every stress and replay
//! case: a turnstile serializes lanes, so the hardware form cannot be forced) emulates the model's
//! rule, and the runner labels those cases "emulated". The hardware form is a separate kernel so that
//! the emulated kernels stay exactly as they were (convergence-sensitive intrinsics in a branch not
//! taken still change how the compiler lays out reconvergence). The emulation: in a role
//! with a commit every Branch appends `pc << 1 | taken` (IR pc) to the thread's path, published in
//! shared memory as prefix hashes (`PcLane`, cleared at syncwarp); a commit waits (bounded) until
//! every unfinished lane of its warp and role whose path is compatible with its own stands at the
//! same commit on the same path, then the group meets in `__syncwarp(group)` and its lowest lane
//! arrives once. In replay every lane of the group holds the commit's turn; the leader ends it.
//!
//! Execution barriers have two forms too. [`generate`] runs `syncthreads` and named barriers as
//! bounded software barriers (a hang is recorded per thread, and a replay can force them);
//! [`generate_hw_barrier`] runs them on the hardware (`barrier.sync 0`, `barrier.sync id, count`,
//! `barrier.arrive id, count`), which nothing inside the kernel can bound: the runner launches it
//! free (`stress-hw-barrier`) and under the turnstile (`replay-hw-barrier`, every replay whose
//! trace returns), and the host ends a launch that does not return (see `child`).
//!
//! The generator is laid out by hardware object, as the model is: one module per object emits
//! what the spec does with it (`mbarrier`, `copies`, `memory`, `warp`, `named`,
//! `cluster`, `proxy`; `thread`: a thread's own flow and the turnstile; `uniform`: a
//! uniform agent's lanes, see there), and `prelude/*.cuh` holds the C++ support library split the
//! same way (`prelude`). This module holds the entry points and the emitter's skeleton: the
//! walk over a role's instructions and the dispatch of each to its object; `frame` emits the
//! kernel around the roles, `check` rejects what a backend cannot express, `expr` prints
//! expressions and places, and `results` defines the results the host reads back.
//!
//! `plain` stands apart: the protocol alone, without any of this instrumentation, for reading and
//! for the import round trip (`phasecheck emit-cuda --plain`).

mod blackwell;
mod check;
mod cluster;
mod copies;
mod expr;
mod frame;
mod mbarrier;
mod memory;
mod named;
mod plain;
mod prelude;
mod proxy;
mod results;
mod tensormap;
mod thread;
mod uniform;
mod warp;

pub use expr::comment_text;
pub use frame::smem_symbol;
pub use plain::generate_plain;
pub use prelude::prelude_text;
pub use proxy::{has_warpgroup_wgmma, has_wgmma, wgmma_agents, wgmma_helpers, wgmma_hw_form};
pub use results::{block_words_of, status, BlockRecord, ThreadRecord, CAP, HEADER_WORDS, SRC_VERSIONS, THREAD_WORDS};
pub use tensormap::tmap_symbol;
pub use uniform::{has_uniform, thread_lanes};
pub use warp::{has_commit, PATH_CAP};

use expr::{ident, line_of};
use memory::words_of;
use phasecheck_model::program::ir::*;
use phasecheck_verifier::outcomes::Recorded;
use std::collections::HashSet;
use uniform::{uniform_layout, UNIFORM_AGENT_BYTES};
use warp::LANE_BYTES;

/// Shared memory the buffers of one spec may take. The kernel's state is dynamic shared memory,
/// opted in up to the device's limit at launch (227 KB on the H200); the rest of that limit is
/// left to barriers, branch paths and bookkeeping.
pub const MAX_BUFFER_BYTES: usize = 216 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// libcu++: `cuda::barrier<cuda::thread_scope_block>`, `cuda::memcpy_async`, ...
    Libcu,
    /// Inline PTX: `mbarrier.*`, `cp.async.bulk`.
    Ptx,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Libcu => "libcu",
            Backend::Ptx => "ptx",
        }
    }
    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "libcu" => Some(Backend::Libcu),
            "ptx" => Some(Backend::Ptx),
            _ => None,
        }
    }
}

/// A spec one backend cannot express, with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotExpressible(pub String);

impl NotExpressible {
    /// Whether this is one of the statements the GPU stage leaves to the model by design
    /// (docs/known-debts.md, "The GPU stage"): the Blackwell statements and the warpgroup-scoped
    /// wgmma where wgmma is emulated (TMA descriptors run on real tensor maps, `tensormap.rs`). The library coverage tests accept
    /// these refusals and no other.
    pub fn model_only(&self) -> bool {
        const MODEL_ONLY: &[&str] = &[
            "a warpgroup-scoped wgmma (warpgroup_mma / warpgroup_wait) is not expressible in this kernel",
            "is not expressible on sm_90",
        ];
        MODEL_ONLY.iter().any(|m| self.0.contains(m))
    }
}

impl std::fmt::Display for NotExpressible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not expressible: {}", self.0)
    }
}

/// One generated kernel and the launch facts the runner needs.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub backend: Backend,
    pub protocol: String,
    /// `extern "C"` symbol.
    pub symbol: String,
    /// The kernel's own code (namespace + `__global__`), without the shared prelude.
    pub body: String,
    pub threads: usize,
    pub block_dim: u32,
    /// Per model thread, the hardware threads it runs as: a uniform role's agent runs as its
    /// warp's `warp_size` lanes, every other model thread as one.
    pub lanes: Vec<u32>,
    pub barriers: usize,
    /// Words of one block's results.
    pub block_words: usize,
    /// Words per version row of the copy source (the largest buffer, in 32-bit words).
    pub src_words: usize,
    /// CTAs per execution: the kernel is compiled with this cluster dimension and launched with
    /// `cluster` blocks per execution, which share one result record.
    pub cluster: u32,
    /// Why its wgmma reads are emulated (bulk stores), or None: no wgmma, or they run on the
    /// hardware's `wgmma.mma_async` by helper warpgroups.
    pub wgmma_emulated: Option<String>,
}

impl Kernel {
    /// A self-contained translation unit with this one kernel.
    pub fn source(&self) -> String {
        module_source(std::slice::from_ref(self))
    }
}

/// One translation unit holding several kernels of the same backend (compiled once).
pub fn module_source(kernels: &[Kernel]) -> String {
    let mut s = String::new();
    let backend = kernels.first().map(|k| k.backend).unwrap_or(Backend::Ptx);
    s.push_str(&prelude_text(backend));
    for k in kernels {
        s.push('\n');
        s.push_str(&k.body);
    }
    s
}

struct Gen<'a> {
    p: &'a Protocol,
    src: &'a str,
    backend: Backend,
    out: String,
    /// Completion-function index per barrier group (libcu software barriers).
    group_completion: Vec<Option<u16>>,
    /// The code being generated tracks its branch path (a role with a `commit`).
    track: bool,
    /// IR pc of the instruction being generated.
    pc: usize,
    /// Warp-batched commits as the hardware batches them ([`generate_hw_commit`]).
    hw_commit: bool,
    /// `syncthreads` and named barriers on the hardware's own instructions ([`generate_hw_barrier`],
    /// one CTA).
    hw_barrier: bool,
    /// Named barriers on the hardware in a cluster kernel without a cluster barrier: the model's
    /// threads exit when they finish and a keeper warp per CTA keeps its shared memory alive
    /// until the whole cluster finished ([`hw_barrier_form`]).
    keeper: bool,
    /// The spec's cluster barrier on `barrier.cluster` ([`generate_hw_barrier`], a cluster).
    hw_cluster_barrier: bool,
    /// wgmma reads on the hardware's `wgmma.mma_async`, by helper warpgroups (`proxy`).
    wgmma_hw: bool,
    /// CTAs in the cluster (1: none). A CTA's shared memory holds one copy of each object (the
    /// lowered program's CTA-major tables are folded onto it, see `local_group`).
    cluster: usize,
    /// While generating a remote operation: the C++ variable holding the target CTA's rank
    /// (flat indices then name the target's copies).
    remote: Option<&'static str>,
    /// The instruction being generated runs on every lane of a uniform agent (a uniform role,
    /// outside its elected blocks): steps meet the lanes, observations are hashed, see
    /// `UNIFORM_HELPERS`.
    lanes: bool,
    /// The code being generated is a uniform role's.
    uni: bool,
    /// The expression being printed is a per-lane offset of a uniform agent
    /// (`program::uniform::per_lane_offset`): `lane`, `tid` and `gtid` are this lane's own (the
    /// agent's plus `u.lane`), as the model evaluates each lane's fragment.
    lane_identity: bool,
}

/// The C++ the kernels evaluate for one expression of `code` (locals are `NAME_SLOT`, shared vars
/// `s.var_NAME`, identities `th.tid` ...), for the test that checks it computes what the model's
/// evaluator does (gpu-conformance/tests/expr_eval.rs).
pub fn expression_cpp(p: &Protocol, code: &Code, e: &IExpr) -> String {
    let g = Gen {
        p,
        src: "",
        backend: Backend::Ptx,
        out: String::new(),
        group_completion: Vec::new(),
        track: false,
        pc: 0,
        hw_commit: false,
        hw_barrier: false,
        keeper: false,
        hw_cluster_barrier: false,
        wgmma_hw: false,
        cluster: p.cluster.max(1) as usize,
        remote: None,
        lanes: false,
        uni: false,
        lane_identity: false,
    };
    g.expr(code, e)
}

/// The name a local of `code` has in the generated C++.
pub fn local_cpp(code: &Code, slot: u16) -> String {
    Gen::local_name(code, slot)
}

/// Generate the kernel of one protocol. `index` makes its symbol unique within a module.
pub fn generate(p: &Protocol, source: &str, backend: Backend, index: usize) -> Result<Kernel, NotExpressible> {
    generate_form(p, source, backend, index, Form::Software)
}

/// The kernel with every warp-batched `commit` batched by the hardware (module docs), for
/// free-running launches only; its symbol ends in `_hwc`.
pub fn generate_hw_commit(p: &Protocol, source: &str, backend: Backend, index: usize) -> Result<Kernel, NotExpressible> {
    generate_form(p, source, backend, index, Form::HwCommit)
}

/// The kernel with `syncthreads` and named barriers on the hardware's barriers (module docs), for
/// free-running launches whose hang the host detects; its symbol ends in `_hwb`. Err names why a
/// spec keeps the software form only ([`hw_barrier_form`]).
pub fn generate_hw_barrier(p: &Protocol, source: &str, backend: Backend, index: usize) -> Result<Kernel, NotExpressible> {
    hw_barrier_form(p).map_err(NotExpressible)?;
    generate_form(p, source, backend, index, Form::HwBarrier)
}

/// A cluster spec without a cluster barrier whose named barriers run on the hardware: its model
/// threads exit when they finish (a lane parked at the end would hold back its warp's
/// `barrier.sync`, which waits for every lane not exited), and one keeper warp per CTA, which
/// takes part in no named barrier, holds the CTA's shared memory until every thread of the
/// cluster finished. Not with uniform roles (their lanes' exit bookkeeping counts hardware
/// threads at the end) nor a cluster barrier (`barrier.cluster` would count the keeper).
pub fn keeper_form(p: &Protocol) -> bool {
    p.cluster > 1 && !cluster::uses_cluster_barrier(p) && named::has_named(p) && !p.roles.iter().any(|r| r.uniform)
}

/// Whether a spec has a hardware-barrier form: it uses `syncthreads` or named barriers (one CTA),
/// or the cluster barrier (a cluster), and nothing whose software form the hardware barrier would
/// meet: a warp-batched `commit` waits in software for its converged lanes, so those specs keep
/// the software barriers. A uniform agent's lanes meet (bounded) before and after each step, so
/// every lane reaches the hardware barrier in the same step and each warp arrives whole.
///
/// In a cluster the form runs the spec's cluster barrier on `barrier.cluster` and keeps
/// `syncthreads` and named barriers in software: a finished thread cannot exit there (its CTA's
/// shared memory must outlive every peer's access), so it stays in the harness's exit loop, which
/// arrives on every later phase of the cluster barrier as an exited thread would not hold it back,
/// but would hold back a `barrier.sync` of its CTA ([`cluster_hw_exit`] in `frame`). A cluster
/// spec without a cluster barrier runs its named barriers on the hardware instead, with a keeper
/// warp per CTA ([`keeper_form`]); its `syncthreads` stay in software.
pub fn hw_barrier_form(p: &Protocol) -> Result<(), String> {
    let any = |f: &dyn Fn(&InstrKind) -> bool| p.roles.iter().any(|r| r.code.instrs.iter().any(|i| f(&i.kind)));
    let cluster = p.cluster > 1;
    if cluster && !cluster::uses_cluster_barrier(p) && !keeper_form(p) {
        return Err("no cluster barrier and no named barrier (a cluster kernel keeps syncthreads in software)".into());
    }
    if !cluster && !any(&|k| matches!(k, InstrKind::SyncThreads | InstrKind::NamedBar { .. })) {
        return Err("no syncthreads or named barrier".into());
    }
    if has_commit(p) {
        return Err("a warp-batched commit waits in software for its converged lanes".into());
    }
    if has_wgmma(p) && any(&|k| matches!(k, InstrKind::SyncThreads)) {
        return Err("the wgmma helper warpgroups never reach the hardware's barrier 0, which counts every thread of the block".into());
    }
    Ok(())
}

/// The execution barriers a kernel of this form runs in software (bounded), by name: what its
/// cases emulate rather than run on the hardware's own barrier.
pub fn software_barriers(p: &Protocol, hw_form: bool) -> Vec<&'static str> {
    let any = |f: &dyn Fn(&InstrKind) -> bool| p.roles.iter().any(|r| r.code.instrs.iter().any(|i| f(&i.kind)));
    let cta_hw = hw_form && p.cluster <= 1;
    let cluster_hw = hw_form && p.cluster > 1;
    let mut v = Vec::new();
    if !cta_hw && any(&|k| matches!(k, InstrKind::SyncThreads)) {
        v.push("syncthreads");
    }
    if !(cta_hw || hw_form && keeper_form(p)) && any(&|k| matches!(k, InstrKind::NamedBar { .. })) {
        v.push("named barriers");
    }
    if !cluster_hw && any(&|k| matches!(k, InstrKind::ClusterArrive { .. } | InstrKind::ClusterWait { .. })) {
        v.push("cluster barrier");
    }
    v
}

/// Which kernel of a spec is generated: the software form every case can force, or one with a
/// rule on the hardware's own instruction for free-running launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Software,
    HwCommit,
    HwBarrier,
}

fn generate_form(p: &Protocol, source: &str, backend: Backend, index: usize, form: Form) -> Result<Kernel, NotExpressible> {
    let ws = p.warp_size as usize;
    if ws > 32 || ws == 0 {
        return Err(NotExpressible(format!(
            "warp_size {ws}: model warps map onto hardware warps of 32 lanes"
        )));
    }
    if p.threads.is_empty() {
        return Err(NotExpressible("the protocol has no threads".into()));
    }
    // Model thread (warp w, lane l) -> threadIdx.x = 32 w + l: model warps are hardware warps. In
    // a cluster, numbered within the thread's CTA (the model numbers threads across the cluster).
    let stride = p.cta_stride() as usize;
    let hw_index = |t: &ThreadInfo| {
        let base = t.cta as usize * stride;
        if ws == 32 {
            t.gtid as usize - base
        } else {
            (t.warp as usize - base / ws) * 32 + t.lane as usize
        }
    };
    // An agent of a uniform role runs as its warp's lanes: hardware threads hw_index .. + lanes.
    let lanes = thread_lanes(p);
    let block_dim = p
        .threads
        .iter()
        .zip(&lanes)
        .map(|(t, &l)| hw_index(t) + l as usize)
        .max()
        .unwrap_or(1);
    uniform_layout(p)?;
    // The keeper warp follows the model's threads (module docs of `frame`, `keeper_exit`).
    let keeper = form == Form::HwBarrier && keeper_form(p);
    let block_dim = if keeper { block_dim.div_ceil(32) * 32 + 32 } else { block_dim };
    if block_dim > 1024 {
        return Err(NotExpressible(format!("{block_dim} threads per block: at most 1024")));
    }
    let buffer_bytes: usize = p.buffers.iter().map(|b| words_of(b.bytes) * 4).sum();
    if buffer_bytes > MAX_BUFFER_BYTES {
        return Err(NotExpressible(format!(
            "buffers take {buffer_bytes} bytes of shared memory; the kernel's dynamic shared memory holds at most {MAX_BUFFER_BYTES} of buffers (the device's opt-in limit, less the kernel's bookkeeping)"
        )));
    }
    let lane_bytes = if has_commit(p) { p.threads.len() * LANE_BYTES } else { 0 }
        + if has_uniform(p) { p.threads.len() * UNIFORM_AGENT_BYTES } else { 0 };
    if buffer_bytes + lane_bytes > MAX_SHARED_BYTES {
        return Err(NotExpressible(format!(
            "buffers ({buffer_bytes} bytes) and the branch paths of {} threads ({lane_bytes} bytes) exceed {MAX_SHARED_BYTES} bytes of dynamic shared memory",
            p.threads.len()
        )));
    }
    if let Some(b) = p.buffers.iter().find(|b| b.bytes <= 0) {
        return Err(NotExpressible(format!("buffer {} has {} bytes", b.name, b.bytes)));
    }
    // wgmma reads on the hardware need a helper warpgroup per issuing agent after the model's threads.
    let wgmma_form = proxy::wgmma_hw_form(p, block_dim);
    let wgmma_hw = wgmma_form.is_ok();
    let wgmma_emulated = match wgmma_form {
        Err(why) if has_wgmma(p) => Some(why),
        _ => None,
    };
    let block_dim = if wgmma_hw {
        proxy::helper_base(block_dim) + proxy::WARPGROUP * proxy::wgmma_helpers(p).len()
    } else {
        block_dim
    };
    if wgmma_hw
        && buffer_bytes + lane_bytes + (WGMMA_BYTES + WGMMA_SCOPE_BYTES) * proxy::wgmma_helpers(p).len() + WGMMA_ONES_BYTES
            > MAX_SHARED_BYTES
    {
        return Err(NotExpressible(format!(
            "buffers ({buffer_bytes} bytes) and the wgmma helpers' bookkeeping exceed {MAX_SHARED_BYTES} bytes of dynamic shared memory"
        )));
    }
    let group_completion: Vec<Option<u16>> = p.barrier_groups.iter().map(|g| p.barriers[g.base as usize].completion).collect();
    let mut g = Gen {
        p,
        src: source,
        backend,
        out: String::new(),
        group_completion,
        track: false,
        pc: 0,
        hw_commit: form == Form::HwCommit,
        hw_barrier: form == Form::HwBarrier && p.cluster <= 1,
        keeper,
        hw_cluster_barrier: form == Form::HwBarrier && p.cluster > 1 && !keeper,
        wgmma_hw,
        cluster: p.cluster.max(1) as usize,
        remote: None,
        lanes: false,
        uni: false,
        lane_identity: false,
    };
    g.check_expressible()?;
    let suffix = match form {
        Form::Software => "",
        Form::HwCommit => "_hwc",
        Form::HwBarrier => "_hwb",
    };
    let symbol = format!("pc_{}_{}{suffix}", ident(&p.name), index);
    let nb = p.barriers.len();
    let nt = p.threads.len();
    let block_words = block_words_of(p);
    let src_words = p.buffers.iter().map(|b| words_of(b.bytes)).max().unwrap_or(4).max(4);
    g.kernel(&symbol, block_dim, &hw_index)?;
    Ok(Kernel {
        backend,
        protocol: p.name.clone(),
        symbol,
        body: g.out,
        threads: nt,
        block_dim: block_dim as u32,
        lanes,
        barriers: nb,
        block_words,
        src_words,
        cluster: p.cluster.max(1),
        wgmma_emulated,
    })
}

/// Shared memory all of the kernel's per-spec state may take (buffers + paths); the rest of the
/// H200's opt-in limit of 227 KiB is left to barriers and bookkeeping (the launch checks the
/// kernel's exact size against the device's limit).
const MAX_SHARED_BYTES: usize = 222 * 1024;

/// Shared memory of one helper warpgroup's bookkeeping (`PcWg`, prelude/wgmma.cuh), rounded up,
/// and of the wgmma A operand of ones (64 x 32 bytes) the helpers multiply the spec's buffers by.
const WGMMA_BYTES: usize = 512;
const WGMMA_ONES_BYTES: usize = 2048;
/// ... and of one helper's agents of a spec warpgroup (`PcWgScope`, for `warpgroup_mma`), rounded up.
const WGMMA_SCOPE_BYTES: usize = 320;

impl<'a> Gen<'a> {
    fn w(&mut self, s: impl AsRef<str>) {
        self.out.push_str(s.as_ref());
        self.out.push('\n');
    }

    fn all_code(&self) -> impl Iterator<Item = (&'a Code, bool)> {
        let p = self.p;
        p.roles
            .iter()
            .map(|r| (&r.code, false))
            .chain(p.completions.iter().map(|c| (c, true)))
    }

    fn code_body(&mut self, code: &Code, in_completion: bool) -> Result<(), NotExpressible> {
        let p = self.p;
        // Locals.
        if !code.local_names.is_empty() {
            let names: Vec<String> = (0..code.local_names.len())
                .map(|s| format!("{} = 0", Self::local_name(code, s as u16)))
                .collect();
            self.w(format!("  i64 {};", names.join(", ")));
        }
        // Jump targets.
        let mut targets = vec![false; code.instrs.len() + 1];
        for ins in &code.instrs {
            match &ins.kind {
                InstrKind::Jump { to } => targets[*to as usize] = true,
                InstrKind::Branch { else_to, .. } => targets[*else_to as usize] = true,
                _ => {}
            }
        }
        // Locals that hold tokens of hardware arrives (raw mbarrier state).
        let token_slots = token_slots_of(code);
        if self.uni {
            // Per elect() result slot: the lane the last election picked (-1: none yet).
            let slots: std::collections::BTreeSet<u16> = code
                .instrs
                .iter()
                .filter_map(|ins| match ins.kind {
                    InstrKind::Elect { slot } => Some(slot),
                    _ => None,
                })
                .collect();
            for slot in slots {
                self.w(format!("  int elected_{} = -1;", Self::local_name(code, slot)));
            }
        }
        let mut last_line = 0usize;
        let n = code.instrs.len();
        let mut i = 0;
        while i < n {
            let ins = &code.instrs[i];
            if targets[i] {
                self.w(format!(" L{i}:;"));
                self.block_end(code, i);
            }
            let in_block = self.uni && code.elected.iter().any(|&(lo, hi)| lo as usize <= i && i < hi as usize);
            self.lanes = self.uni && !in_block;
            let (line, text) = line_of(self.src, ins.span.start);
            if line != last_line {
                self.w(format!("  // spec {line}: {text}"));
                last_line = line;
            }
            let step = ins.visible && !in_completion;
            // libcu++ memcpy_async = copy then expect_tx, lowered as two steps of one statement.
            let memcpy_pair = self.backend == Backend::Libcu
                && matches!(
                    &ins.kind,
                    InstrKind::Op {
                        op: IOp::Copy(CopyOp::Copy { .. }),
                        ..
                    }
                )
                && matches!(code.instrs.get(i + 1), Some(Instr { kind: InstrKind::Op { op: IOp::Mbar(MbarOp::ExpectTx { .. }), .. }, span, .. }) if *span == ins.span)
                && !targets[i + 1];
            if self.lanes {
                if self.instr_lanes(code, i, step)? {
                    i += 1;
                    continue;
                }
            }
            if step {
                self.w(format!("  {}", self.turn_begin()));
            }
            match &ins.kind {
                InstrKind::SetLocal { .. }
                | InstrKind::SetVar { .. }
                | InstrKind::Jump { .. }
                | InstrKind::Branch { .. }
                | InstrKind::Assert(_)
                | InstrKind::Return
                | InstrKind::Work => self.thread_instr(code, i, step),
                InstrKind::SyncWarp | InstrKind::SyncThreads | InstrKind::SyncWarpMask { .. } | InstrKind::Elect { .. } => {
                    self.warp_instr(code, &ins.kind)
                }
                InstrKind::NamedBar { .. } => self.named_instr(code, &ins.kind),
                InstrKind::ClusterArrive { .. } | InstrKind::ClusterWait { .. } => self.cluster_instr(code, &ins.kind),
                InstrKind::TokenCheck { origin, index, .. } => self.token_check(code, *origin, index),
                InstrKind::Op { op, result } => {
                    if memcpy_pair {
                        self.memcpy_async(code, op, &code.instrs[i + 1], step);
                        i += 2;
                        continue;
                    }
                    let rec = if in_completion {
                        None
                    } else {
                        phasecheck_verifier::outcomes::recorded(code, ins)
                    };
                    self.pc = i;
                    self.op(code, op, *result, &token_slots, rec)?;
                }
            }
            // A commit ends its turn itself (once for the group).
            let commit = matches!(
                ins.kind,
                InstrKind::Op {
                    op: IOp::Warp(WarpOp::Commit { .. }),
                    ..
                }
            );
            if step
                && !commit
                && !matches!(
                    ins.kind,
                    InstrKind::Branch { .. }
                        | InstrKind::SyncWarp
                        | InstrKind::SyncThreads
                        | InstrKind::NamedBar { .. }
                        | InstrKind::ClusterWait { .. }
                        | InstrKind::SyncWarpMask { .. }
                        | InstrKind::Elect { .. }
                )
            {
                self.w(format!("  {}", self.turn_end()));
            }
            i += 1;
        }
        if targets[n] {
            self.w(format!(" L{n}:;"));
            self.block_end(code, n);
        }
        self.lanes = false;
        let _ = p;
        Ok(())
    }

    /// One operation of the spec, generated by its object's module.
    fn op(
        &mut self,
        code: &Code,
        op: &IOp,
        result: Option<u16>,
        token_slots: &HashSet<u16>,
        rec: Option<Recorded>,
    ) -> Result<(), NotExpressible> {
        if self.lanes {
            if let Some(r) = self.op_lanes(code, op, result, token_slots, rec) {
                return r;
            }
        }
        match op {
            IOp::Remote { target, multicast, op } => return self.remote_op(code, target, *multicast, op, token_slots, rec),
            IOp::Mbar(mbar) => return self.mbarrier_op(code, mbar, result, token_slots, rec),
            IOp::Copy(copy) => self.copy_op(code, copy),
            IOp::Mem(access) => self.memory_op(code, access, rec),
            IOp::Proxy(proxy) => self.proxy_op(code, proxy),
            IOp::Warp(warp) => self.warp_op(code, warp),
            IOp::Tc(_) => {
                let why = blackwell::blackwell_inexpressible(op).unwrap_or_default();
                return Err(NotExpressible(why));
            }
        }
        Ok(())
    }
}

/// Locals that hold tokens of hardware arrives (raw mbarrier state): an arrive's result, and a
/// local that takes its value from such a local (`prev = t` in a lagged split arrive/wait), when
/// every other value it takes is a constant. A wait on one of them waits on the token; a copy
/// read as a number would name a phase by the state's low bit, which is no phase at all.
fn token_slots_of(code: &Code) -> std::collections::HashSet<u16> {
    let mut slots = std::collections::HashSet::new();
    for ins in &code.instrs {
        if let InstrKind::Op {
            op: IOp::Mbar(MbarOp::Arrive { .. }),
            result: Some(r),
        } = &ins.kind
        {
            slots.insert(*r);
        }
    }
    loop {
        let before = slots.len();
        let copies: std::collections::BTreeSet<u16> = code
            .instrs
            .iter()
            .filter_map(|ins| match &ins.kind {
                InstrKind::SetLocal {
                    slot,
                    expr: IExpr::Local(from),
                } if slots.contains(from) => Some(*slot),
                _ => None,
            })
            .collect();
        for slot in copies {
            let only_tokens_or_constants = code.instrs.iter().all(|ins| match &ins.kind {
                InstrKind::SetLocal { slot: s, expr } if *s == slot => {
                    matches!(expr, IExpr::Const(_)) || matches!(expr, IExpr::Local(f) if slots.contains(f))
                }
                InstrKind::Op { result: Some(r), op } if *r == slot => matches!(op, IOp::Mbar(MbarOp::Arrive { .. })),
                _ => true,
            });
            if only_tokens_or_constants {
                slots.insert(slot);
            }
        }
        if slots.len() == before {
            return slots;
        }
    }
}
