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
//! Warp-uniform roles (`role R warps N uniform`, docs/model.md): one model thread (agent) stands
//! for its warp's lanes, and the kernel runs it as those lanes, so the silicon makes every per-lane
//! contribution the model counts. The choices (`UNIFORM_HELPERS`, docs/hardware-notes.md):
//! - *Mapping.* Agent t's lanes are hardware lanes 0..warp_size of its model warp's hardware warp
//!   (the agent owns that warp); `blockDim.x` counts every lane, `model_thread[]` maps each lane to
//!   t, and `who[t]` stays the agent's identity (lane 0), which every lane evaluates expressions
//!   with. Records stay one per agent (`Kernel::threads`; `Kernel::lanes` says how many lanes
//!   each runs as); the block's results gain one word per model thread: the agent's lanes that
//!   observed something else than lane 0 (the model's lockstep assumption failing).
//! - *Lockstep.* Every model step of the agent is: the lanes meet (bounded), lane 0 (the leader)
//!   holds the turn in replay, every lane does its part, the lanes meet, the leader ends the
//!   turn. So no lane starts a step before every lane finished the previous one; within a step
//!   the lanes run concurrently, each after its own pause when running free. Exited lanes are not
//!   waited for. What the model does once for the warp (bulk and wgmma groups, TMA stores) the
//!   leader does; arrivals are the leader's first, then the others', so all keep the first
//!   arrival's token; try_wait answers, visible branch decisions and visible var reads are the
//!   leader's for every lane (each lane's own goes into its observation hash); a shared-var
//!   assignment is computed by every lane before any of them writes it.
//! - *Records.* Outside elected blocks the leader writes the record and every lane counts and
//!   hashes the observations; the last lane out writes the header and compares the hashes.
//! - *Elected blocks.* `elect()` is a real `elect.sync` over the live lanes between meets; the
//!   elected lane takes the release turn and runs the block with ordinary single-thread code and
//!   its own turns, the others wait at the block's end (bounded by the elected lane's progress),
//!   then take over its record counters, replay position and status (a hang in the block stops
//!   the whole agent, as the model's timeout move has it).
//! - *End probes* run once every hardware thread has exited (`NL` of them).
//!
//! The helpers sit in each such kernel's body behind an include guard, so the shared prelude and
//! the kernels of specs without uniform roles are unchanged. A uniform role with a warp-batched
//! `commit` is not expressible.
//!
//! Layout of one block's results (32-bit words), written by the kernel and parsed by
//! [`Kernel::parse_block`]:
//! ```text
//! per model thread t (THREAD_WORDS = 5 + 3 * CAP):
//!   [status, nreads, ntry, ntok, nbad_expect, reads[CAP], try_waits[CAP], token_parities[CAP]]
//! then per flattened barrier: completion-function runs
//! then per flattened barrier: the end probe (0: not probed; else 4 | test_wait.parity(0) |
//!   test_wait.parity(1) << 1, read by the last model thread to exit, non-destructively)
//! then, when completion functions write shared vars: a marker (1: written) and per such var
//!   (`outcome::completion_vars`) its final value, low and high 32 bits
//! then, when a role is warp-uniform: per model thread, the lanes of the agent that observed
//!   something else than its leader lane (0: they agreed, or not an agent)
//! ```

use phasecheck_model::ir::*;
use phasecheck_model::lang::ast::{BinOp, UnOp};

/// Observations recorded per list and thread; more are counted but dropped (status `OVERFLOW`).
pub const CAP: usize = 32;
pub const HEADER_WORDS: usize = 6;
pub const THREAD_WORDS: usize = HEADER_WORDS + 3 * CAP;
/// Versions a copy source holds (0..SRC_VERSIONS); the row after them is stamped -2.
pub const SRC_VERSIONS: usize = 64;
/// Static shared memory the buffers of one spec may take.
pub const MAX_BUFFER_BYTES: usize = 40 * 1024;

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

/// Status word of a thread record.
pub mod status {
    pub const RUNNING: i32 = 0;
    pub const FINISHED: i32 = 1;
    /// A bounded wait timed out: the thread stopped there.
    pub const HUNG: i32 = 2;
    pub const ASSERT_FAILED: i32 = 3;
    /// An index or size the kernel cannot execute (out of range, unaligned copy).
    pub const UNSUPPORTED: i32 = 4;
    /// More observations than `CAP`.
    pub const OVERFLOW: i32 = 6;
}

/// A spec one backend cannot express, with the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotExpressible(pub String);

impl std::fmt::Display for NotExpressible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not expressible: {}", self.0)
    }
}

/// Words of one block's results for protocol `p` (see the module docs for the layout).
pub fn block_words_of(p: &Protocol) -> usize {
    let ncv = crate::outcome::completion_vars(p).len();
    p.threads.len() * THREAD_WORDS
        + 2 * p.barriers.len()
        + if ncv > 0 { 1 + 2 * ncv } else { 0 }
        + if has_uniform(p) { p.threads.len() } else { 0 }
}

/// Per model thread, the hardware threads it runs as (`Kernel::lanes`).
pub fn thread_lanes(p: &Protocol) -> Vec<u32> {
    p.threads
        .iter()
        .map(|t| if p.roles[t.role as usize].uniform { p.warp_size } else { 1 })
        .collect()
}

/// The protocol has a warp-uniform role: its kernel runs agents as warps (`UNIFORM_HELPERS`).
pub fn has_uniform(p: &Protocol) -> bool {
    p.roles.iter().any(|r| r.uniform)
}

/// Shared memory of one agent's lane bookkeeping (`PcUAgent`), rounded up.
const UNIFORM_AGENT_BYTES: usize = 1280;

/// An agent's lanes are the hardware lanes 0..warp_size of its model warp's hardware warp, so that
/// warp must hold nothing else (the language makes uniform roles whole warps; this guards it).
fn uniform_layout(p: &Protocol) -> Result<(), NotExpressible> {
    for (t, ti) in p.threads.iter().enumerate() {
        let role = &p.roles[ti.role as usize];
        if role.uniform && (ti.lane != 0 || p.warp_members(ti.warp as usize).any(|m| m != t)) {
            return Err(NotExpressible(format!(
                "an agent of uniform role {} does not own its warp: its lanes must be a whole hardware warp's first lanes",
                role.name
            )));
        }
    }
    Ok(())
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

fn ident(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect();
    if out.is_empty() || out.as_bytes()[0].is_ascii_digit() {
        out.insert(0, '_');
    }
    out
}

/// Longest spec text quoted in one generated comment (in characters, before escaping).
const COMMENT_CHARS: usize = 120;

/// Spec text made safe to sit inside a generated `//` comment: the result is printable ASCII with
/// no backslash (no line continuation), no `??` (no trigraph), no `*/` and no `/*`. Every other
/// character, control characters (CR, VT, FF, NEL, LS, ...) included, is written `<U+XXXX>`.
/// Long text is cut with `...`.
pub fn comment_text(s: &str) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n == COMMENT_CHARS {
            out.push_str("...");
            break;
        }
        let prev = out.as_bytes().last().copied();
        let safe = matches!(c, ' '..='~')
            && c != '\\'
            && !(c == '?' && prev == Some(b'?'))
            && !(c == '/' && prev == Some(b'*'))
            && !(c == '*' && prev == Some(b'/'));
        if safe {
            out.push(c);
        } else {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        }
    }
    out
}

/// 1-based line of a byte offset, and the text of that line (trimmed), made comment-safe. Lines
/// end at `\n` as the spec's lexer counts them; any other line break in the text is escaped.
fn line_of(source: &str, offset: u32) -> (usize, String) {
    let mut off = (offset as usize).min(source.len());
    while !source.is_char_boundary(off) {
        off -= 1;
    }
    let line = source[..off].matches('\n').count() + 1;
    let start = source[..off].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = source[off..].find('\n').map(|i| off + i).unwrap_or(source.len());
    (line, comment_text(source[start..end].trim()))
}

const PRELUDE_COMMON: &str = r#"
typedef long long i64;
typedef unsigned long long u64;

// ---- Results and the bounded, recorded execution of one model thread -------------------------
#define PC_CAP 32
#define PC_HEADER 6
#define PC_THREAD_WORDS (PC_HEADER + 3 * PC_CAP)
enum { PC_RUNNING = 0, PC_FINISHED = 1, PC_HUNG = 2, PC_ASSERT = 3, PC_UNSUPPORTED = 4, PC_OVERFLOW = 6 };

struct PcThread {
  int* rec;               // this thread's record in global memory
  int* completions;       // this block's completion-function counters (one per barrier)
  const int* src;         // copy source: row v holds version v in every word
  int src_words;
  const int* sched;       // replay schedule (sched[0] == 0: free running)
  u64 timeout_ns;         // bound of every wait
  unsigned rng;           // per-thread pseudo-random delays (stress)
  unsigned max_delay;     // clock cycles
  int t, tid, gtid, lane, warp;
  int nreads, ntry, ntok, nbad;
  int step;               // visible steps executed (replay)
  int turn;               // turn number of the step in progress, -1 if none
  int lost;               // replay: the turnstile stalled (a scheduled step blocked); now running free
  int status;
  unsigned role_mask;     // lanes of my model warp with my role (commit: who can be converged with me)
  int commit_seq;         // commits executed since the last syncwarp
  int gen;                // syncwarps passed
  u64 t0;                 // start: bounds `while` loops (a spin that never ends)
  int wsyncs;             // syncwarp(mask) passed
  volatile int* turnp;    // the replay turnstile (a cluster's lives in CTA 0)
  int cluster;            // CTAs in the cluster (1: none)
  int cta;                // this CTA's rank in the cluster
};

// Cluster scope: ordering across the CTAs of a cluster (the turnstile, the cluster barrier).
__device__ __forceinline__ void pc_fence_cluster() { asm volatile("fence.acq_rel.cluster;" ::: "memory"); }

__device__ __forceinline__ u64 pc_now() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void pc_record(PcThread& th, int list, int& n, int v) {
  if (n < PC_CAP) th.rec[PC_HEADER + list * PC_CAP + n] = v; else th.status = PC_OVERFLOW;
  n++;
}
__device__ __forceinline__ void pc_record_read(PcThread& th, int v) { pc_record(th, 0, th.nreads, v); }
__device__ __forceinline__ void pc_record_try(PcThread& th, bool v) { pc_record(th, 1, th.ntry, v ? 1 : 0); }
__device__ __forceinline__ void pc_record_token(PcThread& th, int parity) { pc_record(th, 2, th.ntok, parity); }

// Free-running (stress) mode: a pseudo-random pause before each step.
__device__ __forceinline__ void pc_delay(PcThread& th) {
  th.rng ^= th.rng << 13; th.rng ^= th.rng >> 17; th.rng ^= th.rng << 5;
  if (th.max_delay == 0 || (th.rng & 3) == 0) return;
  long long until = clock64() + (long long)(th.rng % th.max_delay);
  while (clock64() < until) { }
}

// Replay turnstile: the k-th visible step of thread t runs when the block's turn counter equals
// sched[off(t) + k]; afterwards it bumps the counter. Past the end of the trace, threads run free.
// sched layout: [mode, total_turns, off[NT], cnt[NT], turns...]
__device__ bool pc_turn_begin(PcThread& th, volatile int* turn, int nt) {
  if (th.sched[0] == 0 || th.lost) { pc_delay(th); th.turn = -1; return true; }
  int k = th.step++;
  int off = th.sched[2 + th.t], cnt = th.sched[2 + nt + th.t];
  int want = k < cnt ? th.sched[off + k] : th.sched[1];
  u64 start = pc_now();
  while (*turn < want) {
    // The hardware left the trace (a copy landed earlier than the trace has it, and a scheduled
    // step now blocks): the turn never comes. Go on as a free-running execution; it is judged
    // against every outcome the model allows, and the block no longer counts as forced.
    if (pc_now() - start > th.timeout_ns) { th.lost = 1; th.turn = -1; return true; }
  }
  if (th.cluster > 1) pc_fence_cluster();  // the earlier steps, in any CTA, happen before mine
  th.turn = k < cnt ? want : -1;
  return true;
}
__device__ __forceinline__ void pc_turn_end(PcThread& th, volatile int* turn) {
  if (th.turn >= 0) { if (th.cluster > 1) pc_fence_cluster(); else __threadfence_block(); *turn = th.turn + 1; th.turn = -1; }
}

// Execution barriers in software so that they are bounded too. `live` counts threads not exited;
// exited threads count as arrived (as in the model and on hardware).
struct PcSync { int arrived; int gen; int live; int lock; };
__device__ bool pc_sync_within(PcThread& th, PcSync* b, u64 bound) {
  int g = *(volatile int*)&b->gen;
  atomicAdd(&b->arrived, 1);
  u64 start = pc_now();
  while (*(volatile int*)&b->gen == g) {
    if (*(volatile int*)&b->arrived >= *(volatile int*)&b->live && atomicCAS(&b->lock, 0, 1) == 0) {
      if (*(volatile int*)&b->gen == g) { atomicExch(&b->arrived, 0); __threadfence_block(); atomicAdd(&b->gen, 1); }
      atomicExch(&b->lock, 0);
    }
    if (pc_now() - start > bound) { th.status = PC_HUNG; return false; }
  }
  return true;
}
__device__ __forceinline__ bool pc_sync(PcThread& th, PcSync* b) { return pc_sync_within(th, b, th.timeout_ns); }
__device__ __forceinline__ void pc_leave(PcSync* b) { atomicSub(&b->live, 1); }
// syncwarp(mask) in software, bounded: every lane counts the masked syncs it passed; a lane waits
// until each lane of the mask (hardware lane l of my warp = model thread first + l) has passed as
// many, or has exited. `done[t]` marks exited threads.
__device__ bool pc_sync_mask(PcThread& th, volatile int* count, volatile int* done, int first, int n, unsigned mask) {
  int mine = ++th.wsyncs;
  __threadfence_block();
  count[th.t] = mine;
  u64 start = pc_now();
  for (int l = 0; l < n; l++) {
    if (!((mask >> l) & 1u)) continue;
    while (count[first + l] < mine && !done[first + l]) {
      if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
    }
  }
  return true;
}
// Named barriers (bar.sync / bar.arrive) in software, so that they are bounded too. The hardware
// counts whole warps: a warp arrives once every unfinished lane executed the instruction (they meet
// at the warp's software sync), adding the warp size; bar.sync then waits for the barrier's phase
// to complete. One lane per meeting (the first to claim the warp sync's generation) arrives for the
// warp and publishes the phase it arrived on (-1: thread counts mixed on one barrier).
struct PcNamed { int arrived; int count; int gen; int lock; };
__device__ bool pc_named(PcThread& th, PcNamed* nb, PcSync* warp, int* lead, volatile int* at_gen, i64 id, i64 count, int ws, bool sync) {
  if (id < 0 || id >= 16 || count <= 0 || count % ws != 0) { th.status = PC_ASSERT; return false; }
  __threadfence_block();  // my writes before the arrival
  int g = *(volatile int*)&warp->gen;
  if (!pc_sync(th, warp)) return false;
  if (atomicMax(lead, g + 1) < g + 1) {
    u64 start = pc_now();
    while (atomicCAS(&nb->lock, 0, 1) != 0) {
      if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; *at_gen = -2; break; }
    }
    if (th.status == PC_RUNNING) {
      __threadfence_block();
      volatile PcNamed* v = nb;
      if (v->count != 0 && v->count != (int)count) {
        *at_gen = -1;
      } else {
        v->count = (int)count;
        *at_gen = v->gen;
        v->arrived += ws;
        if (v->arrived >= (int)count) { v->arrived = 0; v->count = 0; __threadfence_block(); atomicAdd(&nb->gen, 1); }
      }
      __threadfence_block();
      atomicExch(&nb->lock, 0);
    }
  }
  if (!pc_sync(th, warp)) return false;  // every lane sees what its warp's arrival was
  int mine = *at_gen;
  if (mine == -1) { th.status = PC_ASSERT; return false; }  // mixed thread counts: undefined
  if (mine == -2) { th.status = PC_HUNG; return false; }
  if (!sync) return true;
  u64 start = pc_now();
  while (*(volatile int*)&nb->gen == mine) {
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  __threadfence_block();
  return true;
}
// A `while` loop's back edge: a spin that outlasts every wait bound is a hang.
__device__ __forceinline__ bool pc_loop_ok(PcThread& th) {
  if (pc_now() - th.t0 > 8 * th.timeout_ns) { th.status = PC_HUNG; return false; }
  return true;
}
// elect.sync over `mask` (sm_90): the hardware's deterministic choice of one lane.
__device__ __forceinline__ bool pc_elect(unsigned mask) {
  unsigned ok;
  asm volatile("{ .reg .pred p; elect.sync _|p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(ok) : "r"(mask) : "memory");
  return ok != 0;
}

// Buffers hold version stamps: a write fills every word; a read sees one version or a torn mix (-1).
__device__ void pc_write(int* buf, int words, int v) {
  volatile int* b = buf;
  for (int i = 0; i < words; i++) b[i] = v;
}
__device__ int pc_read(int* buf, int words) {
  volatile int* b = buf;
  int v = b[0];
  for (int i = 1; i < words; i++) if (b[i] != v) return -1;
  return v;
}
__device__ __forceinline__ const int* pc_src_row(PcThread& th, i64 version) {
  int row = (version >= 0 && version < 64) ? (int)version : 64;
  return th.src + (i64)row * th.src_words;
}
// Division by 0 and INT64_MIN / -1 are undefined in C++: the model reports them, the kernel
// must not execute them.
__device__ __forceinline__ i64 pc_div(i64 a, i64 b) { return b == 0 || (b == -1 && a == (i64)(1ULL << 63)) ? 0 : a / b; }
__device__ __forceinline__ i64 pc_rem(i64 a, i64 b) { return b == 0 || b == -1 ? 0 : a % b; }
// NVRTC 13.0 crashes when it can prove an mbarrier count is 0 at compile time (count-range specs do
// exactly that), so barrier operands go through a value it cannot see: always 0 at run time.
__device__ volatile int pc_zero_g = 0;
__device__ __forceinline__ int pc_zero() { return pc_zero_g; }
__device__ __forceinline__ unsigned pc_smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

// ---- mbarrier primitives in PTX (used by both backends where libcu++ has no API) --------------
__device__ __forceinline__ void pc_mbar_init(u64* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(pc_smem(bar)), "r"(count + pc_zero()) : "memory");
}
__device__ __forceinline__ void pc_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void pc_mbar_inval(u64* bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(pc_smem(bar)) : "memory");
}
__device__ __forceinline__ u64 pc_mbar_arrive(u64* bar, int n) {
  u64 state;
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 %0, [%1], %2;" : "=l"(state) : "r"(pc_smem(bar)), "r"(n + pc_zero()) : "memory");
  return state;
}
__device__ __forceinline__ u64 pc_mbar_arrive_drop(u64* bar, int n) {
  u64 state;
  asm volatile("mbarrier.arrive_drop.release.cta.shared::cta.b64 %0, [%1], %2;" : "=l"(state) : "r"(pc_smem(bar)), "r"(n + pc_zero()) : "memory");
  return state;
}
__device__ __forceinline__ u64 pc_mbar_arrive_expect_tx(u64* bar, int tx) {
  u64 state;
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %0, [%1], %2;" : "=l"(state) : "r"(pc_smem(bar)), "r"(tx + pc_zero()) : "memory");
  return state;
}
__device__ __forceinline__ void pc_mbar_expect_tx(u64* bar, int tx) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(pc_smem(bar)), "r"(tx + pc_zero()) : "memory");
}
__device__ __forceinline__ void pc_mbar_complete_tx(u64* bar, int tx) {
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(pc_smem(bar)), "r"(tx + pc_zero()) : "memory");
}
// Non-blocking probes (try_wait in the spec): test_wait never suspends. Blocking waits, bounded
// by %globaltimer: try_wait suspends for at most ~1 us per call. One set per scope of the
// acquire: `.cta`, and `_cl` (`.cluster`) for the kernels of a cluster, where a peer's remote
// arrive (release.cluster) may complete the phase and what the peer wrote before it must be
// visible after the wait.
#define PC_MBAR_WAITS(SUFFIX, SCOPE) \
__device__ __forceinline__ bool pc_mbar_test_token##SUFFIX(u64* bar, u64 state) { \
  unsigned ok; \
  asm volatile("{ .reg .pred p; mbarrier.test_wait.acquire." SCOPE ".shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }" \
               : "=r"(ok) : "r"(pc_smem(bar)), "l"(state) : "memory"); \
  return ok != 0; \
} \
__device__ __forceinline__ bool pc_mbar_test_parity##SUFFIX(u64* bar, int parity) { \
  unsigned ok; \
  asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.acquire." SCOPE ".shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }" \
               : "=r"(ok) : "r"(pc_smem(bar)), "r"(parity & 1) : "memory"); \
  return ok != 0; \
} \
__device__ bool pc_mbar_wait_token##SUFFIX(PcThread& th, u64* bar, u64 state) { \
  u64 start = pc_now(); \
  for (;;) { \
    unsigned ok; \
    asm volatile("{ .reg .pred p; mbarrier.try_wait.acquire." SCOPE ".shared::cta.b64 p, [%1], %2, 1000; selp.u32 %0, 1, 0, p; }" \
                 : "=r"(ok) : "r"(pc_smem(bar)), "l"(state) : "memory"); \
    if (ok) return true; \
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; } \
  } \
} \
__device__ bool pc_mbar_wait_parity##SUFFIX(PcThread& th, u64* bar, int parity) { \
  u64 start = pc_now(); \
  for (;;) { \
    unsigned ok; \
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.acquire." SCOPE ".shared::cta.b64 p, [%1], %2, 1000; selp.u32 %0, 1, 0, p; }" \
                 : "=r"(ok) : "r"(pc_smem(bar)), "r"(parity & 1) : "memory"); \
    if (ok) return true; \
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; } \
  } \
}
PC_MBAR_WAITS(, "cta")
PC_MBAR_WAITS(_cl, "cluster")
// TMA-style bulk copy global -> shared; completes `bytes` transactions on the barrier.
__device__ __forceinline__ void pc_bulk_copy(int* dst, const int* src, int bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(pc_smem(dst)), "l"(src), "r"(bytes), "r"(pc_smem(bar)) : "memory");
}
__device__ __forceinline__ int pc_state_parity(u64 state) { return (int)(state >> 63); }
// sm_80 cp.async (4, 8 or 16 bytes, global -> shared) and its mbarrier arrive-on: without .noinc
// the pending count is raised now and lowered when the thread's prior cp.async copies land.
__device__ __forceinline__ void pc_cp_async(int* dst, const int* src, int bytes) {
  if (bytes == 16) asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" :: "r"(pc_smem(dst)), "l"(src) : "memory");
  else if (bytes == 8) asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" :: "r"(pc_smem(dst)), "l"(src) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(pc_smem(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void pc_cp_async_arrive(u64* bar, bool noinc) {
  if (noinc) asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" :: "r"(pc_smem(bar)) : "memory");
  else asm volatile("cp.async.mbarrier.arrive.shared.b64 [%0];" :: "r"(pc_smem(bar)) : "memory");
}

// ---- Warp convergence as the model defines it (warp-batched `commit`) --------------------------
// Lanes of one warp and role are converged while their branch paths since the last syncwarp have
// not parted: one path is a prefix of the other. A path is the list of `pc << 1 | taken` of every
// Branch executed (pc: the IR instruction index, as in the model). Each lane publishes its path in
// shared memory as prefix hashes, hist[k] = FNV-1a of its first k decisions (the model's path_sig),
// so "one is a prefix of the other" is one comparison: hist_a[n] == hist_b[n], n = min of lengths.
#define PC_PATH_CAP 32
struct PcLane {
  volatile int gen;                    // syncwarps passed
  volatile int len;                    // branch decisions since the last syncwarp
  volatile int at;                     // the commit it stands at: pc << 16 | commit_seq; -1: none
  volatile int done;                   // finished or stopped: holds nobody back
  volatile u64 hist[PC_PATH_CAP + 1];  // prefix hashes; hist[0] = the FNV offset basis
};
__device__ void pc_lane_init(PcLane* l) {
  l->gen = 0; l->len = 0; l->at = -1; l->done = 0; l->hist[0] = 0xcbf29ce484222325ull;
}
// A Branch ran: append its decision. Past PC_PATH_CAP decisions without a syncwarp the kernel can
// no longer follow convergence: the thread stops with status "unsupported".
__device__ bool pc_path_push(PcThread& th, PcLane* me, int pc, bool taken) {
  int n = me->len;
  if (n >= PC_PATH_CAP) { th.status = PC_UNSUPPORTED; return false; }
  me->hist[n + 1] = (me->hist[n] ^ (u64)((pc << 1) | (taken ? 1 : 0))) * 0x100000001b3ull;
  __threadfence_block();  // the hash is published before the length that covers it
  me->len = n + 1;
  return true;
}
// Released from syncwarp: the path and the commit count start afresh (the model clears them there).
__device__ void pc_path_reset(PcThread& th, PcLane* me) {
  me->len = 0; th.commit_seq = 0;
  __threadfence_block();
  me->gen = ++th.gen;
}
// commit, part 1 (model: commit_ready). Stand at this commit (pc, commit_seq) and wait, bounded,
// until every unfinished lane of my warp and role whose path is compatible with mine stands at the
// same commit with the same path. A converged lane still behind on the path holds me back; a lane
// whose path parted from mine is another group and commits on its own. Returns the group (a lane
// mask, me included), or 0 when the wait timed out (status hung). While a lane stands here its path
// cannot change, so the group every member computes is the same.
__device__ unsigned pc_commit_group(PcThread& th, PcLane* warp_lanes, int pc) {
  PcLane* me = &warp_lanes[th.lane];
  const int key = (pc << 16) | th.commit_seq;
  const int n = me->len;
  me->at = key;
  __threadfence_block();
  u64 start = pc_now();
  for (;;) {
    unsigned group = 0;
    bool ready = true;
    for (int l = 0; l < 32; l++) {
      if (!((th.role_mask >> l) & 1u)) continue;
      PcLane* o = &warp_lanes[l];
      if (o->done) continue;                               // finished: takes no part
      if (o->gen != th.gen) { ready = false; continue; }   // still leaving the last syncwarp: converged, behind
      int at = o->at;                                      // read first: while it is `key`, the path is frozen
      __threadfence_block();
      int on = o->len;
      int m = on < n ? on : n;
      if (o->hist[m] != me->hist[m]) continue;             // paths parted: diverged, commits separately
      if (at == key && on == n) group |= 1u << l;          // here, on my path
      else ready = false;                                  // converged but not here yet
    }
    if (ready) return group;
    if (pc_now() - start > th.timeout_ns) { me->at = -1; th.status = PC_HUNG; return 0u; }
  }
}
// commit, part 3: leave together. One turn for the whole group in replay: the leader ends it
// (after the arrival); a mate only drops it (bumping the counter itself could move it backwards
// after later steps had run).
__device__ void pc_commit_leave(PcThread& th, PcLane* me, bool leader, volatile int* turn) {
  me->at = -1;
  th.commit_seq++;
  if (leader) pc_turn_end(th, turn); else th.turn = -1;
}
"#;

fn prelude(backend: Backend) -> &'static str {
    match backend {
        Backend::Ptx => concat!(
            "// Generated by phasecheck (backend ptx): inline-PTX mbarriers and cp.async.bulk, sm_90.\n",
            "// Every wait is bounded by %globaltimer; a timed-out wait records \"hung\" and the thread stops.\n",
            "#pragma nv_diag_suppress static_var_with_dynamic_init\n",
        ),
        Backend::Libcu => concat!(
            "// Generated by phasecheck (backend libcu): libcu++ cuda::barrier, sm_90.\n",
            "// Every wait is bounded by %globaltimer; a timed-out wait records \"hung\" and the thread stops.\n",
            "#include <cuda/barrier>\n",
            "#pragma nv_diag_suppress static_var_with_dynamic_init\n",
        ),
    }
}

/// The prelude text (shared helpers) of a backend: the header plus the common helpers.
pub fn prelude_text(backend: Backend) -> String {
    let extra = if backend == Backend::Libcu { PRELUDE_LIBCU } else { "" };
    // The async proxy (issue 13): TMA stores, bulk groups and proxy fences, per backend.
    let proxy = if backend == Backend::Libcu {
        PRELUDE_PROXY_LIBCU
    } else {
        PRELUDE_PROXY_PTX
    };
    format!("{}{}{}{}{}", prelude(backend), PRELUDE_COMMON, extra, proxy, PRELUDE_CLUSTER)
}

// ---- Cluster scope (issue 13 item 9) -------------------------------------------------------------
// One cluster runs one execution: the kernel is compiled with `__cluster_dims__(N, 1, 1)` and CTA r
// of the cluster runs the model's CTA r. Remote arrives and multicast copies are the hardware's own
// (`mapa` + `mbarrier.arrive.release.cluster.shared::cluster`, `cp.async.bulk ... .multicast::cluster`);
// DSMEM reads and writes go through `mapa` generic pointers. The spec's cluster barrier
// (`cluster_arrive`/`cluster_wait`) is a software barrier in CTA 0's shared memory: the hardware's
// `barrier.cluster.wait` cannot be bounded in time. Its semantics are the hardware's: a phase
// completes once every thread of the cluster that has not exited arrived. The harness itself uses
// the hardware cluster barrier twice, where no spec code runs between (after every CTA initialised
// its barriers, and before any CTA exits, so that no peer's late access finds its shared memory
// gone); both are reached by every thread because every wait in between is bounded.
const PRELUDE_CLUSTER: &str = r#"
// ---- Cluster scope: remote arrives, multicast copies, DSMEM, the cluster barrier ----------------
__device__ __forceinline__ void* pc_mapa(const void* p, int rank) {
  void* r;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"(p), "r"(rank));
  return r;
}
__device__ __forceinline__ unsigned pc_mapa_smem(const void* p, int rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(pc_smem(p)), "r"(rank));
  return r;
}
// The harness's own hardware cluster barrier (see the generator's notes: never inside spec code).
__device__ __forceinline__ void pc_cluster_barrier_hw() {
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ int pc_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return (int)r;
}
// An arrive on CTA `rank`'s copy of `bar` (the same offset in its shared memory).
__device__ __forceinline__ void pc_mbar_arrive_remote(u64* bar, int rank, int n, bool drop) {
  if (drop) asm volatile("mbarrier.arrive_drop.release.cluster.shared::cluster.b64 _, [%0], %1;" :: "r"(pc_mapa_smem(bar, rank)), "r"(n + pc_zero()) : "memory");
  else asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0], %1;" :: "r"(pc_mapa_smem(bar, rank)), "r"(n + pc_zero()) : "memory");
}
__device__ __forceinline__ void pc_mbar_arrive_expect_tx_remote(u64* bar, int rank, int tx) {
  asm volatile("mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%0], %1;" :: "r"(pc_mapa_smem(bar, rank)), "r"(tx + pc_zero()) : "memory");
}
// A bulk copy that lands at the same offset in every CTA of `mask`, completing tx on each one's `bar`.
__device__ __forceinline__ void pc_bulk_copy_multicast(int* dst, const int* src, int bytes, u64* bar, int mask) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;"
               :: "r"(pc_smem(dst)), "l"(src), "r"(bytes), "r"(pc_smem(bar)), "h"((unsigned short)mask) : "memory");
}
// The spec's cluster barrier, in software (bounded), in CTA 0's shared memory. `slot` is the
// thread's hidden cluster local: 0, or 1 + the phase it arrived on and has not waited for yet.
struct PcClusterBar { int arrived; int gen; int live; int lock; };
__device__ bool pc_cbar_lock(PcThread& th, PcClusterBar* b) {
  u64 start = pc_now();
  while (atomicCAS(&b->lock, 0, 1) != 0) {
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  pc_fence_cluster();
  return true;
}
__device__ void pc_cbar_unlock(PcClusterBar* b) { pc_fence_cluster(); atomicExch(&b->lock, 0); }
// Under the lock: the phase completes once every live thread arrived.
__device__ void pc_cbar_settle(volatile PcClusterBar* b) {
  if (b->arrived > 0 && b->arrived >= b->live) { b->arrived = 0; b->gen = b->gen + 1; }
}
__device__ bool pc_cluster_arrive(PcThread& th, PcClusterBar* b, i64& slot) {
  if (slot != 0) { th.status = PC_ASSERT; return false; }  // arrived again before waiting: undefined
  if (!pc_cbar_lock(th, b)) return false;
  volatile PcClusterBar* v = b;
  slot = 1 + (i64)v->gen;
  v->arrived = v->arrived + 1;
  pc_cbar_settle(v);
  pc_cbar_unlock(b);
  return true;
}
__device__ bool pc_cluster_wait(PcThread& th, PcClusterBar* b, i64& slot) {
  if (slot == 0) { th.status = PC_ASSERT; return false; }  // a wait with no arrival: undefined
  volatile PcClusterBar* v = b;
  u64 start = pc_now();
  while ((i64)v->gen == slot - 1) {
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  pc_fence_cluster();
  slot = 0;
  return true;
}
// An exiting thread no longer holds the cluster barrier back.
__device__ void pc_cluster_leave(PcThread& th, PcClusterBar* b) {
  u64 start = pc_now();
  while (atomicCAS(&b->lock, 0, 1) != 0) {
    if (pc_now() - start > th.timeout_ns) return;
  }
  pc_fence_cluster();
  volatile PcClusterBar* v = b;
  v->live = v->live - 1;
  pc_cbar_settle(v);
  pc_cbar_unlock(b);
}
"#;

// ---- The async proxy (issue 13) ------------------------------------------------------------------
// A TMA store (`copy_store_async`) is a cp.async.bulk shared::cta -> global in a bulk group, into a
// sink nobody reads back: what matters is its asynchronous read of shared memory. `wait_group(N)`
// needs an immediate N: 0..7 are generated, a larger N stops the thread as unsupported. A wgmma
// needs sm_90a and matrix descriptors, so `wgmma_async` is emulated by bulk stores of its operands
// (one bulk group per statement) and `wgmma_wait(N)` by `cp.async.bulk.wait_group.read N`: the same
// asynchronous reads of shared memory, retired by the same kind of wait.
const PRELUDE_PROXY_PTX: &str = r#"
// ---- The async proxy: TMA stores, bulk async-groups, proxy fences (inline PTX) ---------------------
__device__ __align__(16) int pc_store_sink[10240];
__device__ __forceinline__ void pc_store_async(const int* src, int bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
               :: "l"(pc_store_sink), "r"(pc_smem(src)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void pc_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
#define PC_BULK_WAIT(k) case k: \
  if (read) asm volatile("cp.async.bulk.wait_group.read " #k ";" ::: "memory"); \
  else asm volatile("cp.async.bulk.wait_group " #k ";" ::: "memory"); \
  return true;
__device__ bool pc_bulk_wait(PcThread& th, i64 n, bool read) {
  switch (n) {
    PC_BULK_WAIT(0) PC_BULK_WAIT(1) PC_BULK_WAIT(2) PC_BULK_WAIT(3)
    PC_BULK_WAIT(4) PC_BULK_WAIT(5) PC_BULK_WAIT(6) PC_BULK_WAIT(7)
    default: th.status = n < 0 ? PC_ASSERT : PC_UNSUPPORTED; return false;
  }
}
__device__ __forceinline__ void pc_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void pc_fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
"#;

const PRELUDE_PROXY_LIBCU: &str = r#"
// ---- The async proxy: TMA stores, bulk async-groups, proxy fences (libcu++ cuda::ptx) ---------------
#include <cuda/ptx>
__device__ __align__(16) int pc_store_sink[10240];
__device__ __forceinline__ void pc_store_async(const int* src, int bytes) {
  cuda::ptx::cp_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, pc_store_sink, src, (unsigned)bytes);
}
__device__ __forceinline__ void pc_bulk_commit() { cuda::ptx::cp_async_bulk_commit_group(); }
#define PC_BULK_WAIT(k) case k: \
  if (read) cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<k>{}); \
  else cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<k>{}); \
  return true;
__device__ bool pc_bulk_wait(PcThread& th, i64 n, bool read) {
  switch (n) {
    PC_BULK_WAIT(0) PC_BULK_WAIT(1) PC_BULK_WAIT(2) PC_BULK_WAIT(3)
    PC_BULK_WAIT(4) PC_BULK_WAIT(5) PC_BULK_WAIT(6) PC_BULK_WAIT(7)
    default: th.status = n < 0 ? PC_ASSERT : PC_UNSUPPORTED; return false;
  }
}
__device__ __forceinline__ void pc_fence_proxy_async() { cuda::ptx::fence_proxy_async(cuda::ptx::space_shared); }
__device__ __forceinline__ void pc_fence_mbarrier_init() { cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster); }
"#;

/// The code issues TMA stores or manages bulk groups itself (issue 13).
fn code_bulk_groups(code: &Code) -> bool {
    code.instrs.iter().any(|i| {
        matches!(
            i.kind,
            InstrKind::Op {
                op: IOp::StoreAsync { .. } | IOp::CommitGroup | IOp::WaitGroup { .. },
                ..
            }
        )
    })
}

/// The code issues wgmma reads (issue 13).
fn code_wgmma(code: &Code) -> bool {
    code.instrs.iter().any(|i| {
        matches!(
            i.kind,
            InstrKind::Op {
                op: IOp::Wgmma { .. } | IOp::WgmmaWait { .. },
                ..
            }
        )
    })
}

/// Helpers of the kernels that run warp-uniform roles (`role R warps N uniform`): one model thread
/// (agent) runs as its warp's hardware lanes. Emitted in the kernel body, once per translation unit
/// (an include guard), so that kernels of other specs and the shared prelude stay as they were.
const UNIFORM_HELPERS: &str = r#"#ifndef PC_UNIFORM_HELPERS
#define PC_UNIFORM_HELPERS
// ---- Warp-uniform roles: one model thread (agent) runs as its warp's hardware lanes -------------
// The lanes meet (a bounded software warp barrier) before and after every model step of the agent;
// lane 0 (the leader) takes the agent's turn in replay and writes its record. An elected block runs
// on the lane elect.sync picked while the others wait at its end; that lane then hands the record
// counters, the replay position and the status back to the others.
struct PcUAgent {
  PcSync meet;                 // the lanes' warp barrier (live: lanes not exited)
  volatile unsigned alive;     // lanes not exited: elect.sync's member mask
  volatile int elected;        // the lane the last elect() picked
  volatile int progress;       // steps the elected lane took in its block (the others' wait bound)
  volatile int blocks;         // elected blocks finished (or left by a stopped elected lane)
  volatile int stopped;        // the status of a lane that stopped (hung, assert, unsupported): the agent stops
  volatile int step, lost;     // the replay position, handed from the lane that took the turns
  volatile int cnt[5];         // nreads, ntry, ntok, nbad, status, handed back after an elected block
  volatile i64 tok;            // the leader's arrival token: the agent's (the first lane's, as modelled)
  volatile i64 val;            // the leader's try_wait answer, branch decision or var read: the agent's
  volatile int fin[32][6];     // per lane at exit: status, nreads, ntry, ntok, nbad, lost
  volatile u64 hash[32];       // per lane at exit: hash of its observations outside elected blocks
  volatile int nobs[32];
  int out;                     // lanes exited
};
static_assert(sizeof(PcUAgent) <= 1280, "UNIFORM_AGENT_BYTES in codegen.rs bounds it");
struct PcU {
  PcUAgent* a;                 // null: an ordinary model thread
  int lane, lanes;             // my lane in the agent's warp; the warp's lanes
  int in_block;                // I am the elected lane, inside an elected block
  int blocks;                  // elected blocks passed
  u64 hash; int nobs;          // my observations outside elected blocks
};
__device__ void pc_u_agent_init(PcUAgent* a, int lanes) {
  a->meet = PcSync{0, 0, lanes, 0};
  a->alive = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1u;
  a->elected = -1; a->progress = 0; a->blocks = 0; a->stopped = 0; a->step = 0; a->lost = 0; a->tok = 0; a->out = 0;
}
// An observation of one lane, into its hash (list 5: it stopped because another lane did).
__device__ __forceinline__ void pc_u_observe(PcU& u, int list, int v) {
  u.hash = (u.hash ^ (((u64)(unsigned)list << 32) | (u64)(unsigned)v)) * 0x100000001b3ull;
  u.nobs++;
}
// The lanes meet. Between two meets a lane waits at most one bounded wait and one turn of the
// turnstile, so four wait bounds is generous; a lane that exits is no longer waited for.
__device__ bool pc_u_meet(PcThread& th, PcU& u) {
  __threadfence_block();
  if (!pc_sync_within(th, &u.a->meet, 4 * th.timeout_ns)) return false;
  __threadfence_block();
  // A lane stopped (its wait timed out while mine returned, say): the agent stops where it did,
  // as the model's agent would; the lanes that only follow hash it, so they count as apart.
  int stop = u.a->stopped;
  if (stop != 0) { th.status = stop; pc_u_observe(u, 5, stop); return false; }
  return true;
}
// A model step of the agent begins: the leader takes the turn, the lanes meet, every lane learns
// the replay position. Free running, each lane pauses on its own inside the step.
__device__ bool pc_u_begin(PcThread& th, PcU& u, volatile int* turn, int nt) {
  if (u.lane == 0) {
    if (th.sched[0] != 0 && !th.lost) pc_turn_begin(th, turn, nt);
    u.a->step = th.step; u.a->lost = th.lost;
  }
  if (!pc_u_meet(th, u)) return false;
  if (u.lane != 0) { th.step = u.a->step; th.lost = u.a->lost; th.turn = -1; }
  if (th.sched[0] == 0 || th.lost) pc_delay(th);
  return true;
}
// ... and ends once every lane did its part.
__device__ bool pc_u_end(PcThread& th, PcU& u, volatile int* turn) {
  if (!pc_u_meet(th, u)) return false;
  if (u.lane == 0) pc_turn_end(th, turn);
  return true;
}
// An observation outside elected blocks: every lane makes it and counts it, the leader records
// it, and every lane hashes it (compared at exit: do the lanes see the same?).
__device__ void pc_u_record(PcThread& th, PcU& u, int list, int& n, int v) {
  if (n < PC_CAP) { if (u.lane == 0) th.rec[PC_HEADER + list * PC_CAP + n] = v; } else th.status = PC_OVERFLOW;
  n++;
  pc_u_observe(u, list, v);
}
__device__ __forceinline__ void pc_u_tick(PcU& u) { u.a->progress = u.a->progress + 1; }
// The elected lane leaves its block (at its end, or stopped inside it): it hands its record
// counters, replay position and status to the lanes waiting at the block's end.
__device__ void pc_u_block_done(PcThread& th, PcU& u) {
  PcUAgent* a = u.a;
  a->cnt[0] = th.nreads; a->cnt[1] = th.ntry; a->cnt[2] = th.ntok; a->cnt[3] = th.nbad; a->cnt[4] = th.status;
  a->step = th.step; a->lost = th.lost;
  __threadfence_block();
  a->blocks = ++u.blocks;
  u.in_block = 0;
}
// A lane the election passed over waits at the block's end for the elected lane, bounded by its
// progress: it stops (hung) only when the elected lane took no step for three wait bounds.
__device__ bool pc_u_block_wait(PcThread& th, PcU& u, int elected) {
  PcUAgent* a = u.a;
  u64 start = pc_now();
  int seen = a->progress;
  while (a->blocks == u.blocks) {
    if (elected < 0 || !((a->alive >> elected) & 1u)) {
      __threadfence_block();
      if (a->blocks != u.blocks) break;
      th.status = PC_HUNG; return false;   // the elected lane stopped outside the block
    }
    int p = a->progress;
    if (p != seen) { seen = p; start = pc_now(); }
    if (pc_now() - start > 3 * th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  __threadfence_block();
  u.blocks++;
  th.nreads = a->cnt[0]; th.ntry = a->cnt[1]; th.ntok = a->cnt[2]; th.nbad = a->cnt[3];
  th.step = a->step; th.lost = a->lost;
  int st = a->cnt[4];
  if (st != PC_RUNNING) th.status = st;
  return st == PC_RUNNING || st == PC_OVERFLOW;   // the elected lane stopped in the block: so does the agent
}
// A lane exits. The last lane out writes the agent's record header from the leader's counters and,
// in `apart`, the lanes whose observations or end differ from the leader's.
__device__ void pc_u_exit(PcThread& th, PcU& u, int* apart) {
  PcUAgent* a = u.a;
  if (u.in_block) pc_u_block_done(th, u);
  a->fin[u.lane][0] = th.status; a->fin[u.lane][1] = th.nreads; a->fin[u.lane][2] = th.ntry;
  a->fin[u.lane][3] = th.ntok; a->fin[u.lane][4] = th.nbad; a->fin[u.lane][5] = th.lost;
  a->hash[u.lane] = u.hash; a->nobs[u.lane] = u.nobs;
  if (th.status != PC_FINISHED && th.status != PC_OVERFLOW) a->stopped = th.status;
  __threadfence_block();
  atomicAnd((unsigned*)&a->alive, ~(1u << u.lane));
  pc_leave(&a->meet);
  if (atomicAdd(&a->out, 1) == u.lanes - 1) {
    __threadfence_block();
    for (int k = 0; k < 6; k++) th.rec[k] = a->fin[0][k];
    unsigned m = 0;
    for (int l = 1; l < u.lanes; l++)
      if (a->fin[l][0] != a->fin[0][0] || a->hash[l] != a->hash[0] || a->nobs[l] != a->nobs[0]) m |= 1u << l;
    *apart = (int)m;
  }
}
#endif
"#;

const PRELUDE_LIBCU: &str = r#"
// ---- libcu++ software barriers (a barrier with a completion function) --------------------------
// cuda::barrier<thread_scope_block, F> keeps its phase as a bool; its only public waits block
// without bound, so poll the probe libcu++'s own wait uses, bounded by %globaltimer.
template <class B> __device__ bool pc_soft_wait_token(PcThread& th, B& b, bool token) {
  u64 start = pc_now();
  while (!cuda::std::__call_try_wait(b, (bool)token)) {
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  return true;
}
template <class B> __device__ bool pc_soft_wait_parity(PcThread& th, B& b, bool parity) {
  u64 start = pc_now();
  while (!cuda::std::__call_try_wait_parity(b, parity)) {
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  return true;
}
// The mbarrier behind a libcu++ block-scope barrier, for operations libcu++ has no API for.
__device__ __forceinline__ u64* pc_native(cuda::barrier<cuda::thread_scope_block>& b) {
  return (u64*)cuda::device::barrier_native_handle(b);
}
"#;

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
}

/// Generate the kernel of one protocol. `index` makes its symbol unique within a module.
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
        cluster: p.cluster.max(1) as usize,
        remote: None,
        lanes: false,
        uni: false,
    };
    g.expr(code, e)
}

/// The name a local of `code` has in the generated C++.
pub fn local_cpp(code: &Code, slot: u16) -> String {
    Gen::local_name(code, slot)
}

/// The code uses the cluster barrier (`cluster_arrive`/`cluster_wait`/`cluster_sync`).
fn uses_cluster_barrier(p: &Protocol) -> bool {
    p.roles.iter().any(|r| r.code.cluster_slot.is_some())
}

pub fn generate(p: &Protocol, source: &str, backend: Backend, index: usize) -> Result<Kernel, NotExpressible> {
    generate_form(p, source, backend, index, false)
}

/// The kernel with every warp-batched `commit` batched by the hardware (module docs), for
/// free-running launches only; its symbol ends in `_hwc`.
pub fn generate_hw_commit(p: &Protocol, source: &str, backend: Backend, index: usize) -> Result<Kernel, NotExpressible> {
    generate_form(p, source, backend, index, true)
}

fn generate_form(p: &Protocol, source: &str, backend: Backend, index: usize, hw_commit: bool) -> Result<Kernel, NotExpressible> {
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
    if block_dim > 1024 {
        return Err(NotExpressible(format!("{block_dim} threads per block: at most 1024")));
    }
    let buffer_bytes: usize = p.buffers.iter().map(|b| words_of(b.bytes) * 4).sum();
    if buffer_bytes > MAX_BUFFER_BYTES {
        return Err(NotExpressible(format!(
            "buffers take {buffer_bytes} bytes of shared memory; the generated kernel uses static shared memory (at most {MAX_BUFFER_BYTES})"
        )));
    }
    let lane_bytes = if has_commit(p) { p.threads.len() * LANE_BYTES } else { 0 }
        + if has_uniform(p) { p.threads.len() * UNIFORM_AGENT_BYTES } else { 0 };
    if buffer_bytes + lane_bytes > MAX_SHARED_BYTES {
        return Err(NotExpressible(format!(
            "buffers ({buffer_bytes} bytes) and the branch paths of {} threads ({lane_bytes} bytes) exceed {MAX_SHARED_BYTES} bytes of static shared memory",
            p.threads.len()
        )));
    }
    if let Some(b) = p.buffers.iter().find(|b| b.bytes <= 0) {
        return Err(NotExpressible(format!("buffer {} has {} bytes", b.name, b.bytes)));
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
        hw_commit,
        cluster: p.cluster.max(1) as usize,
        remote: None,
        lanes: false,
        uni: false,
    };
    g.check_expressible()?;
    let symbol = format!("pc_{}_{}{}", ident(&p.name), index, if hw_commit { "_hwc" } else { "" });
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
    })
}

/// Branch decisions a thread may take between two syncwarps in a role with a `commit` (the kernel
/// publishes its path so that lanes can tell whether they are converged).
pub const PATH_CAP: usize = 32;
/// Shared memory of one thread's published path (`PcLane`).
const LANE_BYTES: usize = 16 + 8 * (PATH_CAP + 1);
/// Static shared memory all of the kernel's per-spec state may take (buffers + paths); the rest of
/// the 48 KiB static limit is left to barriers and bookkeeping.
const MAX_SHARED_BYTES: usize = 46 * 1024;

/// The code contains a warp-batched `commit`.
fn code_commits(code: &Code) -> bool {
    code.instrs.iter().any(|i| {
        matches!(
            i.kind,
            InstrKind::Op {
                op: IOp::Commit { .. },
                ..
            }
        )
    })
}

pub fn has_commit(p: &Protocol) -> bool {
    p.roles.iter().any(|r| code_commits(&r.code))
}

/// The code has `syncwarp(mask)` or `elect()`.
fn code_warp_ops(code: &Code) -> bool {
    code.instrs
        .iter()
        .any(|i| matches!(i.kind, InstrKind::SyncWarpMask { .. } | InstrKind::Elect { .. }))
}

/// The protocol uses named barriers (`bar_sync`/`bar_arrive`).
fn has_named(p: &Protocol) -> bool {
    p.roles
        .iter()
        .any(|r| r.code.instrs.iter().any(|i| matches!(i.kind, InstrKind::NamedBar { .. })))
}

fn has_warp_ops(p: &Protocol) -> bool {
    p.roles.iter().any(|r| code_warp_ops(&r.code))
}

/// 32-bit words of a buffer, rounded up to 16 bytes (bulk copies move multiples of 16 bytes).
fn words_of(bytes: i64) -> usize {
    (bytes.max(0) as usize).div_ceil(16) * 4
}

impl<'a> Gen<'a> {
    /// Records observation `v` in list 0 (reads), 1 (try_waits) or 2 (token parities). On an
    /// agent's lanes every lane counts and hashes it, and the leader writes it.
    fn record(&self, list: usize, v: &str) -> String {
        match (self.lanes, list) {
            (false, 0) => format!("pc_record_read(th, {v});"),
            (false, 1) => format!("pc_record_try(th, {v});"),
            (false, _) => format!("pc_record_token(th, {v});"),
            (true, 0) => format!("pc_u_record(th, u, 0, th.nreads, {v});"),
            (true, 1) => format!("pc_u_record(th, u, 1, th.ntry, {v} ? 1 : 0);"),
            (true, _) => format!("pc_u_record(th, u, 2, th.ntok, {v});"),
        }
    }

    /// `i64 version = ...;` and the count of writes issued to buffer `flat`, which goes up
    /// atomically: an agent's lanes each write once (the model copies once per lane, each with the
    /// next default version), threads that race on a buffer write it together, and a remote write
    /// bumps the peer CTA's count while the peer's own threads may bump it too.
    fn version_stmt(&self, flat: &str, v: &str, explicit: bool) -> String {
        if explicit {
            format!("i64 version = {v}; atomicAdd(&s.writes[{flat}], 1);")
        } else {
            format!("i64 version = (i64)atomicAdd(&s.writes[{flat}], 1);")
        }
    }

    /// The start of a model step: a turn of the thread, or of an agent's lanes together.
    fn turn_begin(&self) -> &'static str {
        if self.lanes {
            "if (!pc_u_begin(th, u, th.turnp, NT)) return;"
        } else if self.uni {
            "if (!pc_turn_begin(th, th.turnp, NT)) return; pc_u_tick(u);"
        } else {
            "if (!pc_turn_begin(th, th.turnp, NT)) return;"
        }
    }

    /// The end of a model step.
    fn turn_end(&self) -> &'static str {
        if self.lanes {
            "if (!pc_u_end(th, u, th.turnp)) return;"
        } else {
            "pc_turn_end(th, th.turnp);"
        }
    }

    /// Hardware threads model thread `t` runs as.
    fn lanes_of(&self, t: usize) -> usize {
        if self.p.roles[self.p.threads[t].role as usize].uniform {
            self.p.warp_size as usize
        } else {
            1
        }
    }

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

    /// A copy into part of a buffer (`cp_async`, `copy_async` with a range): the C++ of its
    /// offset and bytes, the buffer's flat index, and the version it writes (the buffer's write
    /// count when the spec names none).
    fn part_of(&self, code: &Code, buf: &Ref, offset: &IExpr, bytes: &IExpr, version: Option<&IExpr>) -> (String, String, String, String) {
        let (off, n) = (self.expr(code, offset), self.expr(code, bytes));
        let flat = self.flat_buf(code, buf);
        let v = match version {
            Some(e) => self.expr(code, e),
            None => format!("(i64)s.writes[{flat}]"),
        };
        (off, n, flat, v)
    }

    /// Reject what this backend cannot express, with the reason.
    fn check_expressible(&self) -> Result<(), NotExpressible> {
        let p = self.p;
        if let Some(r) = p.roles.iter().find(|r| r.uniform && code_commits(&r.code)) {
            return Err(NotExpressible(format!(
                "role {} is uniform and has a warp-batched commit: the kernel emulates commit convergence per hardware thread, not for the lanes of an agent",
                r.name
            )));
        }
        if p.cluster > 1 {
            if !p.completions.is_empty() {
                return Err(NotExpressible(
                    "completion functions in a cluster: libcu++ runs them in software barriers, which remote arrives and multicast copies cannot reach".into(),
                ));
            }
            for (code, _) in self.all_code() {
                for ins in &code.instrs {
                    let InstrKind::Op {
                        op: IOp::Remote { multicast, op, .. },
                        ..
                    } = &ins.kind
                    else {
                        continue;
                    };
                    let (line, text) = line_of(self.src, ins.span.start);
                    let bad = |why: &str| Err(NotExpressible(format!("line {line} `{text}`: {why}")));
                    let mut reads_var = false;
                    ins.exprs(&mut |e| reads_var |= e.reads_var());
                    if reads_var {
                        return bad("an operand of a remote operation reads a shared var; the kernel evaluates it in the target CTA's shared memory");
                    }
                    match (&**op, multicast) {
                        (IOp::Copy { version: None, .. } | IOp::CopyPart { version: None, .. }, true) => {
                            return bad("a multicast copy without `version =`: the default version is each target CTA's own write count");
                        }
                        (IOp::Copy { .. } | IOp::CopyPart { .. }, true) => {}
                        (IOp::Arrive { .. } | IOp::Read { .. } | IOp::Write { .. } | IOp::ReadPart { .. }, false) => {}
                        _ => return bad("this remote operation has no sm_90 form in the generated kernel (remote: arrive, arrive_expect_tx, read, write; multicast: copy_async)"),
                    }
                }
            }
        }
        if let Some(r) = p.roles.iter().find(|r| code_commits(&r.code) && code_warp_ops(&r.code)) {
            return Err(NotExpressible(format!(
                "role {} has a warp-batched commit and syncwarp(mask) or elect(): the kernel follows commit convergence only across full-warp syncwarps",
                r.name
            )));
        }
        if let Some(r) = p.roles.iter().find(|r| code_bulk_groups(&r.code) && code_wgmma(&r.code)) {
            return Err(NotExpressible(format!(
                "role {} uses both wgmma groups and bulk groups: a real wgmma needs sm_90a and matrix descriptors, so the kernel emulates its operand reads with bulk stores, whose groups would mix with the role's own TMA store groups",
                r.name
            )));
        }
        if self.backend == Backend::Ptx {
            if let Some(b) = p.barriers.iter().find(|b| b.completion.is_some()) {
                return Err(NotExpressible(format!(
                    "barrier {} has a completion function; hardware mbarriers have none (libcu++ runs it in software)",
                    b.name
                )));
            }
        }
        for (code, _) in self.all_code() {
            for ins in &code.instrs {
                let InstrKind::Op { op, .. } = &ins.kind else { continue };
                let (line, text) = line_of(self.src, ins.span.start);
                let software = |r: &Ref| self.group_completion[r.group as usize].is_some();
                let bad = |why: String| Err(NotExpressible(format!("line {line} `{text}`: {why}")));
                match op {
                    IOp::Arrive { bar, n, drop, expect_tx } => {
                        if *drop && !matches!(n, IExpr::Const(1)) && self.backend == Backend::Libcu {
                            return bad("libcu++ arrive_and_drop drops exactly one arrival".into());
                        }
                        if expect_tx.is_some() && software(bar) {
                            return bad("arrive_expect_tx needs a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++".into());
                        }
                    }
                    IOp::ExpectTx { bar, .. } | IOp::CompleteTx { bar, .. } if software(bar) => {
                        return bad(
                            "tx-counts need a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++"
                                .into(),
                        );
                    }
                    IOp::Copy { buf, bar, bytes, .. } => {
                        if software(bar) {
                            return bad("async copies complete on a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++".into());
                        }
                        let size = p.buffers[p.buffer_groups[buf.group as usize].base as usize].bytes;
                        let n = match bytes {
                            None => Some(size),
                            Some(IExpr::Const(n)) => Some(*n),
                            Some(_) => None,
                        };
                        if let Some(n) = n {
                            if n % 16 != 0 || n <= 0 {
                                return bad(format!(
                                    "a bulk copy of {n} bytes: cp.async.bulk moves a positive multiple of 16 bytes"
                                ));
                            }
                        }
                    }
                    IOp::Commit { bar } if software(bar) && self.backend == Backend::Libcu => {}
                    // Issue 13: cp.async moves 4, 8 or 16 bytes; bulk copies into part of a
                    // buffer need 16-byte aligned offsets and sizes.
                    IOp::CpAsyncArrive { bar, .. } if software(bar) => {
                        return bad("cp.async.mbarrier.arrive needs a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++".into());
                    }
                    IOp::CpAsync {
                        bytes: IExpr::Const(n), ..
                    } if ![4, 8, 16].contains(n) => {
                        return bad(format!("a cp.async of {n} bytes: cp.async moves 4, 8 or 16 bytes"));
                    }
                    IOp::CopyPart { bar, offset, bytes, .. } => {
                        if software(bar) {
                            return bad("async copies complete on a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++".into());
                        }
                        for e in [offset, bytes] {
                            if let IExpr::Const(n) = e {
                                if n % 16 != 0 || *n < 0 {
                                    return bad(format!(
                                        "a bulk copy at offset/size {n}: cp.async.bulk needs 16-byte aligned offsets and sizes"
                                    ));
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn local_name(code: &Code, slot: u16) -> String {
        let n = &code.local_names[slot as usize];
        let n = n.trim_start_matches('$');
        format!("{}_{}", ident(n), slot)
    }

    fn expr(&self, code: &Code, e: &IExpr) -> String {
        match e {
            // -9223372036854775808LL is `-` applied to a literal no type holds.
            IExpr::Const(v) if *v == i64::MIN => "(-9223372036854775807LL - 1)".into(),
            IExpr::Const(v) => format!("{v}LL"),
            IExpr::Local(s) => Self::local_name(code, *s),
            IExpr::Var(v) => format!("s.{}", self.var_name(*v)),
            IExpr::Tid => "(i64)th.tid".into(),
            IExpr::Gtid => "(i64)th.gtid".into(),
            IExpr::Lane => "(i64)th.lane".into(),
            IExpr::Warp => "(i64)th.warp".into(),
            IExpr::Unary(UnOp::Neg, a) => format!("(i64)(0ULL - (u64)({}))", self.expr(code, a)),
            IExpr::Unary(UnOp::Not, a) => format!("(i64)!{}", self.expr(code, a)),
            IExpr::Binary(op, a, b) => {
                let (a, b) = (self.expr(code, a), self.expr(code, b));
                match op {
                    BinOp::Div => format!("pc_div({a}, {b})"),
                    BinOp::Rem => format!("pc_rem({a}, {b})"),
                    _ => {
                        // The language's operators are C's, with the same precedence once
                        // parenthesised: `BinOp::symbol` spells them.
                        let o = op.symbol();
                        if matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul) {
                            // In unsigned arithmetic: signed overflow would be undefined
                            // behaviour, which lets the compiler drop the index checks after it
                            // (the model reports the overflow; the kernel must stay in bounds).
                            format!("(i64)((u64)({a}) {o} (u64)({b}))")
                        } else {
                            format!("(i64)({a} {o} {b})")
                        }
                    }
                }
            }
        }
    }

    fn var_name(&self, v: u16) -> String {
        let per = self.p.vars.len() / self.cluster;
        format!("var_{}", ident(self.declared(&self.p.vars[v as usize % per.max(1)].name)))
    }

    /// A lowered object's name as declared: without the `ctaN.` the lowering gives each CTA's copy.
    fn declared<'n>(&self, name: &'n str) -> &'n str {
        if self.cluster > 1 {
            name.split_once('.').map_or(name, |(_, rest)| rest)
        } else {
            name
        }
    }

    /// The group of this CTA's shared memory that holds lowered group `g` (every CTA's copy of a
    /// declared object sits at the same place in its own CTA).
    fn local_group(&self, g: u16, barrier: bool) -> usize {
        let n = if barrier {
            self.p.barrier_groups.len()
        } else {
            self.p.buffer_groups.len()
        };
        g as usize % (n / self.cluster).max(1)
    }

    /// `s.full[idx]` for a barrier reference, with a bounds check statement when indexed.
    fn place(&self, code: &Code, r: &Ref, barrier: bool) -> (String, Option<String>) {
        let lg = self.local_group(r.group, barrier);
        let (gname, len, is_array) = if barrier {
            let g = &self.p.barrier_groups[lg];
            (format!("bar_{}", ident(self.declared(&g.name))), g.len, g.is_array)
        } else {
            let g = &self.p.buffer_groups[lg];
            (format!("buf_{}", ident(self.declared(&g.name))), g.len, g.is_array)
        };
        match &r.index {
            None if !is_array => (format!("s.{gname}"), None),
            None => (format!("s.{gname}[0]"), None),
            Some(IExpr::Const(i)) if (0..len as i64).contains(i) => (format!("s.{gname}[{i}]"), None),
            Some(e) => {
                let ix = self.expr(code, e);
                (
                    format!("s.{gname}[{ix}]"),
                    Some(format!(
                        "if ({ix} < 0 || {ix} >= {len}) {{ th.status = PC_UNSUPPORTED; return; }}  // index out of range"
                    )),
                )
            }
        }
    }

    /// Flat barrier index expression (for completion counters).
    fn flat_bar(&self, code: &Code, r: &Ref) -> String {
        self.flat(code, r, true)
    }

    fn flat_buf(&self, code: &Code, r: &Ref) -> String {
        self.flat(code, r, false)
    }

    /// The flat index of a reference; in a remote operation, of the target CTA's copy.
    fn flat(&self, code: &Code, r: &Ref, barrier: bool) -> String {
        let (groups, objects) = if barrier {
            (&self.p.barrier_groups, self.p.barriers.len())
        } else {
            (&self.p.buffer_groups, self.p.buffers.len())
        };
        let base = match self.remote {
            Some(rank) => format!(
                "{rank} * {} + {}",
                objects / self.cluster,
                groups[self.local_group(r.group, barrier)].base
            ),
            None => groups[r.group as usize].base.to_string(),
        };
        match &r.index {
            None if self.remote.is_none() => base,
            None => format!("({base})"),
            Some(e) => format!("({base} + {})", self.expr(code, e)),
        }
    }

    /// The suffix of the mbarrier wait and probe helpers: a cluster kernel's acquire at cluster
    /// scope (`_cl`), since a peer's remote arrive may be what completes the phase.
    fn wait_scope(&self) -> &'static str {
        if self.cluster > 1 {
            "_cl"
        } else {
            ""
        }
    }

    /// The cluster barrier: CTA 0's, reached through DSMEM from the others.
    fn cluster_bar(&self) -> &'static str {
        if self.cluster > 1 {
            "(PcClusterBar*)pc_mapa((const void*)&s.cbar, 0)"
        } else {
            "&s.cbar"
        }
    }

    fn is_software(&self, r: &Ref) -> bool {
        self.group_completion[r.group as usize].is_some()
    }

    /// The native mbarrier (u64*) behind a barrier expression.
    fn native(&self, bar: &str) -> String {
        match self.backend {
            Backend::Ptx => format!("&{bar}"),
            Backend::Libcu => format!("pc_native({bar})"),
        }
    }

    fn kernel(&mut self, symbol: &str, block_dim: usize, hw_index: &dyn Fn(&ThreadInfo) -> usize) -> Result<(), NotExpressible> {
        let p = self.p;
        let ns = format!("{symbol}_ns");
        let nt = p.threads.len();
        let nwarps = p.warp_count();
        self.w(format!(
            "// ======== protocol {} ({} threads, {} barriers, {} buffers) ========",
            comment_text(&p.name),
            nt,
            p.barriers.len(),
            p.buffers.len()
        ));
        if !p.params.is_empty() {
            let ps: Vec<String> = p.params.iter().map(|(n, v)| format!("{} = {v}", comment_text(n))).collect();
            self.w(format!("// params: {}", ps.join(", ")));
        }
        let uni = has_uniform(p);
        if uni {
            self.w(UNIFORM_HELPERS);
        }
        self.w(format!("namespace {ns} {{"));
        self.w(format!("constexpr int NT = {nt};        // model threads"));
        if uni {
            let nl: u32 = thread_lanes(p).iter().sum();
            self.w(format!(
                "constexpr int NL = {nl};        // hardware threads running them (an agent of a uniform role: its warp's lanes)"
            ));
        }
        self.w(format!("constexpr int NB = {};        // barriers (flattened)", p.barriers.len()));
        self.w(format!("constexpr int NW = {nwarps};        // model warps"));
        if has_commit(p) {
            self.w(format!(
                "constexpr int WS = {};        // model warp size (lane l of warp w runs as hardware lane l)",
                p.warp_size
            ));
        }
        // Per model warp: its first model thread and how many it has (warp-aligned roles leave
        // the lanes they skip out of the model).
        let firsts: Vec<String> = (0..nwarps).map(|w| p.warp_members(w).next().unwrap_or(0).to_string()).collect();
        let counts: Vec<String> = (0..nwarps).map(|w| p.warp_members(w).count().to_string()).collect();
        self.w(format!("__device__ const int warp_first[NW] = {{{}}};", firsts.join(", ")));
        self.w(format!("__device__ const int warp_n[NW] = {{{}}};", counts.join(", ")));
        // Shared state.
        let libcu = self.backend == Backend::Libcu;
        if libcu {
            self.w("struct Shared;");
            for (i, c) in p.completions.iter().enumerate() {
                self.w(format!(
                    "// completion function `{}`: runs once per phase, in the arriving thread that completes it",
                    comment_text(&c.name)
                ));
                self.w(format!("struct Completion_{} {{", ident(&c.name)));
                self.w("  Shared* s; int* runs;");
                self.w("  __device__ void operator()() noexcept;");
                self.w("};");
                let _ = i;
            }
        }
        self.w("struct Shared {");
        let nc = self.cluster;
        let local_bar_groups = &p.barrier_groups[..p.barrier_groups.len() / nc];
        let local_buf_groups = &p.buffer_groups[..p.buffer_groups.len() / nc];
        for g in local_bar_groups {
            let b = &p.barriers[g.base as usize];
            let ty = match (self.backend, b.completion) {
                (Backend::Ptx, _) => "u64".to_string(),
                (Backend::Libcu, None) => "cuda::barrier<cuda::thread_scope_block>".to_string(),
                (Backend::Libcu, Some(c)) => format!(
                    "cuda::barrier<cuda::thread_scope_block, Completion_{}>",
                    ident(&p.completions[c as usize].name)
                ),
            };
            let arr = if g.is_array { format!("[{}]", g.len) } else { String::new() };
            let (line, text) = line_of(self.src, b.span.start);
            self.w(format!(
                "  {ty} bar_{}{arr};  // spec {line}: {text}",
                ident(self.declared(&g.name))
            ));
        }
        for g in local_buf_groups {
            let b = &p.buffers[g.base as usize];
            let arr = if g.is_array { format!("[{}]", g.len) } else { String::new() };
            self.w(format!(
                "  alignas(128) int buf_{}{arr}[{}];  // {} bytes of version stamps",
                ident(self.declared(&g.name)),
                words_of(b.bytes),
                b.bytes
            ));
        }
        for v in &p.vars[..p.vars.len() / nc] {
            self.w(format!("  volatile i64 var_{};", ident(self.declared(&v.name))));
        }
        self.w(format!(
            "  int writes[{}];  // writes issued per buffer: the default version of the next copy",
            p.buffers.len().max(1)
        ));
        if has_commit(p) {
            self.w("  PcLane lanes[NT];       // published branch paths: which lanes a commit is converged with");
        }
        if has_named(p) {
            self.w("  PcNamed named[16];       // bar.sync / bar.arrive, in software (bounded)");
            self.w("  int named_lead[NW];      // per warp: the last warp-sync generation that arrived at a named barrier");
            self.w("  volatile int named_at[NW];  // per warp: the phase its last arrival was on");
        }
        if has_warp_ops(p) {
            self.w("  volatile int wcount[NT];     // syncwarp(mask): masked syncs passed, per thread");
            self.w("  volatile int wdone[NT];      // exited threads (they hold no syncwarp(mask) back)");
            self.w("  volatile unsigned walive[NW];  // elect(): lanes of each warp not exited");
        }
        self.w(format!(
            "  int bar_live[{}];        // per barrier: initialised and not invalidated (the end probes read only these)",
            p.barriers.len().max(1)
        ));
        self.w("  int exited;             // model threads that have exited: the last one probes the barriers");
        self.w("  volatile int turn;      // replay turnstile");
        if uses_cluster_barrier(p) {
            self.w("  PcClusterBar cbar;      // the cluster barrier (CTA 0's is the cluster's)");
        }
        self.w("  PcSync block_sync;      // syncthreads");
        self.w("  PcSync warp_sync[NW];   // syncwarp, per model warp");
        if uni {
            self.w("  PcUAgent uagent[NT];    // per agent of a uniform role: its lanes' bookkeeping");
        }
        self.w("};");
        // Buffer word counts per group.
        self.w("");
        // Completion bodies.
        if libcu {
            for (i, c) in p.completions.iter().enumerate() {
                self.w(format!("__device__ void Completion_{}::operator()() noexcept {{", ident(&c.name)));
                self.w("  atomicAdd(runs, 1);  // counted for the outcome: completion-function runs per barrier");
                self.w("  Shared& s = *this->s;");
                self.w("  PcThread th = {};  // a completion function records nothing of its own");
                self.w("  th.sched = nullptr; th.timeout_ns = 20000000ull;");
                self.code_body(&p.completions[i], true)?;
                self.w("}");
            }
        }
        // Role functions.
        for (ri, r) in p.roles.iter().enumerate() {
            self.w("");
            self.w(format!("// role {}[{}]", comment_text(&r.name), r.count));
            if r.uniform {
                self.w(format!(
                    "// uniform: each agent runs as its warp's {} lanes, u.lane being mine",
                    p.warp_size
                ));
                self.w(format!(
                    "__device__ void role_{}(Shared& s, PcThread& th, PcU& u) {{",
                    ident(&r.name)
                ));
            } else {
                self.w(format!("__device__ void role_{}(Shared& s, PcThread& th) {{", ident(&r.name)));
            }
            self.track = code_commits(&r.code);
            self.uni = r.uniform;
            self.code_body(&r.code, false)?;
            self.uni = false;
            self.track = false;
            self.w("}");
            let _ = ri;
        }
        // Kernel.
        self.w("}  // namespace");
        self.w("");
        // Per CTA of the cluster (one row without a cluster): hardware thread -> model thread (every
        // lane of a uniform agent maps to the agent).
        let maps: Vec<String> = (0..nc)
            .map(|c| {
                let mut m = vec!["-1".to_string(); block_dim];
                for (t, ti) in p.threads.iter().enumerate().filter(|(_, ti)| ti.cta as usize == c) {
                    for l in 0..self.lanes_of(t) {
                        m[hw_index(ti) + l] = t.to_string();
                    }
                }
                format!("{{{}}}", m.join(", "))
            })
            .collect();
        let ntc = nt / nc;
        if nc == 1 {
            self.w(format!(
                "// One block runs one execution of the protocol; blockDim.x = {block_dim}."
            ));
            self.w(format!("extern \"C\" __global__ void __launch_bounds__({block_dim}) {symbol}(int* out, const int* src, int src_words, const int* sched, u64 timeout_ns, unsigned seed, unsigned max_delay) {{"));
            self.w(format!("  using namespace {ns};"));
            self.w("  __shared__ Shared s;");
            self.w("  // hardware thread -> model thread (-1: padding that exits after setup)");
            self.w(format!("  const int model_thread[{block_dim}] = {};", maps[0]));
            self.w("  const int me = model_thread[threadIdx.x];");
            self.w(format!(
                "  int* block_out = out + (i64)blockIdx.x * {};  // this block's results",
                block_words_of(p)
            ));
        } else {
            self.w(format!(
                "// A cluster of {nc} CTAs runs one execution; CTA r of the cluster is the model's CTA r."
            ));
            self.w(format!("extern \"C\" __global__ void __cluster_dims__({nc}, 1, 1) __launch_bounds__({block_dim}) {symbol}(int* out, const int* src, int src_words, const int* sched, u64 timeout_ns, unsigned seed, unsigned max_delay) {{"));
            self.w(format!("  using namespace {ns};"));
            self.w("  __shared__ Shared s;");
            self.w("  const int rank = pc_cluster_rank();");
            self.w("  // per CTA: hardware thread -> model thread (-1: padding that exits after setup)");
            self.w(format!("  const int model_thread[{nc}][{block_dim}] = {{{}}};", maps.join(", ")));
            self.w("  const int me = model_thread[rank][threadIdx.x];");
            self.w(format!(
                "  int* block_out = out + (i64)(blockIdx.x / {nc}) * {};  // this cluster's results",
                block_words_of(p)
            ));
        }
        self.w("  if (threadIdx.x == 0) {");
        self.w("    // Initialise every barrier not declared manual_init, before any thread runs.");
        let local_barriers = p.barriers.len() / nc;
        for (bi, b) in p.barriers.iter().enumerate().take(local_barriers) {
            if b.manual_init {
                continue;
            }
            let g = p
                .barrier_groups
                .iter()
                .find(|g| (g.base as usize..(g.base + g.len) as usize).contains(&bi))
                .unwrap();
            let idx = if g.is_array {
                format!("[{}]", bi - g.base as usize)
            } else {
                String::new()
            };
            let bar = format!("s.bar_{}{idx}", ident(self.declared(&g.name)));
            let count = b.count.clamp(i32::MIN as i64, i32::MAX as i64);
            match (self.backend, b.completion) {
                (Backend::Ptx, _) => self.w(format!("    pc_mbar_init(&{bar}, {count});")),
                (Backend::Libcu, None) => self.w(format!("    init(&{bar}, {count} + pc_zero());")),
                (Backend::Libcu, Some(c)) => self.w(format!(
                    "    init(&{bar}, {count} + pc_zero(), Completion_{}{{&s, &block_out[NT * PC_THREAD_WORDS + {bi}]}});",
                    ident(&p.completions[c as usize].name)
                )),
            }
        }
        for g in local_buf_groups {
            let words = words_of(p.buffers[g.base as usize].bytes);
            let name = ident(self.declared(&g.name));
            if g.is_array {
                self.w(format!(
                    "    for (int i = 0; i < {}; i++) pc_write(s.buf_{name}[i], {words}, 0);",
                    g.len
                ));
            } else {
                self.w(format!("    pc_write(s.buf_{name}, {words}, 0);"));
            }
        }
        for v in &p.vars[..p.vars.len() / nc] {
            self.w(format!("    s.var_{} = {};", ident(self.declared(&v.name)), v.init));
        }
        self.w("    for (int i = 0; i < (int)(sizeof(s.writes) / sizeof(int)); i++) s.writes[i] = 0;");
        let live: Vec<&str> = p.barriers.iter().map(|b| if b.manual_init { "0" } else { "1" }).collect();
        if !live.is_empty() {
            self.w(format!(
                "    {{ const int live[NB] = {{{}}}; for (int i = 0; i < NB; i++) s.bar_live[i] = live[i]; }}",
                live.join(", ")
            ));
        }
        self.w("    s.exited = 0;");
        if has_commit(p) {
            self.w("    for (int i = 0; i < NT; i++) pc_lane_init(&s.lanes[i]);");
        }
        self.w("    s.turn = 0;");
        if uni {
            self.w("    s.block_sync = PcSync{0, 0, NL, 0};  // every lane of an agent takes part");
            for t in 0..nt {
                if self.lanes_of(t) > 1 {
                    self.w(format!("    pc_u_agent_init(&s.uagent[{t}], {});", self.lanes_of(t)));
                }
            }
        } else {
            self.w(format!("    s.block_sync = PcSync{{0, 0, {ntc}, 0}};"));
        }
        if uses_cluster_barrier(p) {
            self.w("    s.cbar = PcClusterBar{0, 0, NT, 0};  // every model thread of the cluster");
        }
        self.w("    for (int w = 0; w < NW; w++) s.warp_sync[w] = PcSync{0, 0, warp_n[w], 0};");
        if has_named(p) {
            self.w("    for (int i = 0; i < 16; i++) s.named[i] = PcNamed{0, 0, 0, 0};");
            self.w("    for (int w = 0; w < NW; w++) { s.named_lead[w] = 0; s.named_at[w] = 0; }");
        }
        if has_warp_ops(p) {
            self.w("    for (int i = 0; i < NT; i++) { s.wcount[i] = 0; s.wdone[i] = 0; }");
            self.w("    for (int w = 0; w < NW; w++) s.walive[w] = warp_n[w] >= 32 ? 0xffffffffu : (1u << warp_n[w]) - 1u;");
        }
        if self.backend == Backend::Ptx || nc > 1 {
            self.w("    pc_fence_init();  // make the inits visible to the async proxy");
        }
        self.w("  }");
        self.w("  __syncthreads();");
        if nc > 1 {
            self.w("  pc_cluster_barrier_hw();  // every CTA's barriers are initialised before any thread of the cluster runs");
        }
        self.w("  if (me < 0) return;");
        self.w("  PcThread th = {};");
        self.w("  th.rec = block_out + me * PC_THREAD_WORDS;");
        self.w("  th.completions = block_out + NT * PC_THREAD_WORDS;");
        self.w("  th.src = src; th.src_words = src_words; th.sched = sched; th.timeout_ns = timeout_ns;");
        if nc > 1 {
            self.w(format!(
                "  th.cluster = {nc}; th.cta = rank; th.turnp = (volatile int*)pc_mapa((const void*)&s.turn, 0);  // the cluster's turnstile is CTA 0's"
            ));
        } else {
            self.w("  th.cluster = 1; th.turnp = &s.turn;");
        }
        if uni {
            // Lanes of one agent pause differently.
            self.w("  th.rng = seed ^ (blockIdx.x * 0x9E3779B9u) ^ ((me + 64 * (threadIdx.x & 31)) * 0x85EBCA6Bu) | 1u; th.max_delay = max_delay;");
        } else {
            self.w("  th.rng = seed ^ (blockIdx.x * 0x9E3779B9u) ^ (me * 0x85EBCA6Bu) | 1u; th.max_delay = max_delay;");
        }
        let roles_of: Vec<String> = p
            .threads
            .iter()
            .map(|t| format!("{{{}, {}, {}, {}, {}}}", t.role, t.tid, t.gtid, t.lane, t.warp))
            .collect();
        self.w(format!(
            "  const int who[NT][5] = {{{}}};  // role, tid, gtid, lane, warp",
            roles_of.join(", ")
        ));
        self.w("  th.t = me; th.tid = who[me][1]; th.gtid = who[me][2]; th.lane = who[me][3]; th.warp = who[me][4];");
        self.w("  th.turn = -1; th.status = PC_RUNNING; th.t0 = pc_now();");
        if has_commit(p) {
            self.w("  // Lanes of my model warp with my role: the lanes a commit may be converged with.");
            self.w(
                "  for (int l = 0; l < warp_n[th.warp]; l++) if (who[warp_first[th.warp] + l][0] == who[me][0]) th.role_mask |= 1u << l;",
            );
        }
        if uni {
            self.w("  PcU u = {};  // an agent's lane: the agent's warp is hardware lanes 0.. of its own warp");
            let agents: Vec<&str> = (0..nt).map(|t| if self.lanes_of(t) > 1 { "1" } else { "0" }).collect();
            self.w(format!("  const int uniform_agent[NT] = {{{}}};", agents.join(", ")));
            self.w(format!(
                "  if (uniform_agent[me]) {{ u.a = &s.uagent[me]; u.lane = threadIdx.x & 31; u.lanes = {}; u.hash = 0xcbf29ce484222325ull; }}",
                p.warp_size
            ));
        }
        self.w("  switch (who[me][0]) {");
        for (ri, r) in p.roles.iter().enumerate() {
            if r.uniform {
                self.w(format!("    case {ri}: role_{}(s, th, u); break;", ident(&r.name)));
            } else {
                self.w(format!("    case {ri}: role_{}(s, th); break;", ident(&r.name)));
            }
        }
        self.w("  }");
        self.w("  if (th.status == PC_RUNNING) th.status = PC_FINISHED;");
        self.w("  // An exited thread no longer holds back syncthreads / syncwarp.");
        if uni {
            self.w("  pc_leave(&s.block_sync);");
            self.w("  if (u.a) {  // a lane of an agent: the last lane out writes the agent's record");
            self.w(format!(
                "    pc_u_exit(th, u, block_out + {} + me);  // the agent's lanes-apart word",
                block_words_of(p) - nt
            ));
            self.w("  } else {");
            self.w("  pc_leave(&s.warp_sync[th.warp]);");
        } else {
            self.w("  pc_leave(&s.block_sync); pc_leave(&s.warp_sync[th.warp]);");
        }
        if has_commit(p) {
            self.w("  __threadfence_block(); s.lanes[me].done = 1;  // nor a commit of its converged lanes");
        }
        if has_warp_ops(p) {
            self.w("  __threadfence_block(); s.wdone[me] = 1; atomicAnd((unsigned*)&s.walive[th.warp], ~(1u << th.lane));  // nor a syncwarp(mask) or elect()");
        }
        if uses_cluster_barrier(p) {
            self.w(format!(
                "  pc_cluster_leave(th, {});  // nor the cluster barrier",
                self.cluster_bar()
            ));
        }
        self.w("  th.rec[0] = th.status; th.rec[1] = th.nreads; th.rec[2] = th.ntry; th.rec[3] = th.ntok; th.rec[4] = th.nbad; th.rec[5] = th.lost;");
        if uni {
            self.w("  }");
        }
        self.end_probes();
        if nc > 1 {
            self.w("  pc_cluster_barrier_hw();  // no CTA exits while a peer may still reach its shared memory");
        }
        self.w("}");
        Ok(())
    }

    /// The last model thread to exit reads every live barrier's phase parity with both
    /// non-destructive probes (`mbarrier.test_wait.parity` 0 and 1); the model predicts it
    /// (`Outcome::end_parity`). Software barriers (libcu++ with a completion function) have no
    /// mbarrier to probe: their word stays 0, "not probed".
    fn end_probes(&mut self) {
        let p = self.p;
        let probed = (0..p.barrier_groups.len()).any(|gi| self.backend == Backend::Ptx || self.group_completion[gi].is_none());
        let cvars = crate::outcome::completion_vars(p);
        if !probed && cvars.is_empty() {
            return;
        }
        self.w("  // The last model thread out probes every live barrier's phase (both parities).");
        self.w("  __threadfence_block();");
        let nc = self.cluster;
        if has_uniform(p) {
            self.w("  if (atomicAdd(&s.exited, 1) == NL - 1) {  // counted in hardware threads: every lane of an agent");
        } else {
            self.w(format!(
                "  if (atomicAdd(&s.exited, 1) == {} - 1) {{",
                if nc > 1 { format!("{}", p.threads.len() / nc) } else { "NT".into() }
            ));
        }
        self.w("    __threadfence_block();");
        self.w("    int* probes = block_out + NT * PC_THREAD_WORDS + NB;");
        for (gi, g) in p.barrier_groups.iter().enumerate().take(p.barrier_groups.len() / nc) {
            if self.backend == Backend::Libcu && self.group_completion[gi].is_some() {
                continue;
            }
            for i in 0..g.len as usize {
                // In a cluster each CTA probes its own copies.
                let flat = if nc > 1 {
                    format!("th.cta * {} + {}", p.barriers.len() / nc, g.base as usize + i)
                } else {
                    (g.base as usize + i).to_string()
                };
                let idx = if g.is_array { format!("[{i}]") } else { String::new() };
                let bar = self.native(&format!("s.bar_{}{idx}", ident(self.declared(&g.name))));
                self.w(format!(
                    "    if (s.bar_live[{flat}]) probes[{flat}] = 4 | (pc_mbar_test_parity({bar}, 0) ? 1 : 0) | (pc_mbar_test_parity({bar}, 1) ? 2 : 0);"
                ));
            }
        }
        if !cvars.is_empty() {
            self.w("    // What the completion functions computed: the final value of each var they write.");
            self.w("    int* vars = probes + NB;");
            self.w("    vars[0] = 1;");
            for (i, v) in cvars.iter().enumerate() {
                let name = self.var_name(*v);
                self.w(format!(
                    "    vars[{}] = (int)(u64)s.{name}; vars[{}] = (int)((u64)s.{name} >> 32);",
                    1 + 2 * i,
                    2 + 2 * i
                ));
            }
        }
        self.w("  }");
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
        let mut token_slots = std::collections::HashSet::new();
        for ins in &code.instrs {
            if let InstrKind::Op {
                op: IOp::Arrive { .. },
                result: Some(r),
            } = &ins.kind
            {
                token_slots.insert(*r);
            }
        }
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
                && matches!(&ins.kind, InstrKind::Op { op: IOp::Copy { .. }, .. })
                && matches!(code.instrs.get(i + 1), Some(Instr { kind: InstrKind::Op { op: IOp::ExpectTx { .. }, .. }, span, .. }) if *span == ins.span)
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
                InstrKind::SetLocal { slot, expr } => {
                    let e = self.expr(code, expr);
                    self.w(format!("  {} = {e};", Self::local_name(code, *slot)));
                }
                InstrKind::SetVar { var, expr } => {
                    let e = self.expr(code, expr);
                    self.w(format!("  s.{} = {e};", self.var_name(*var)));
                }
                InstrKind::Jump { to } if code.has_while && (*to as usize) <= i => self.w(format!(
                    "  if (!pc_loop_ok(th)) return;  // a loop that spins past every bound: hung\n  goto L{to};"
                )),
                InstrKind::Jump { to } => self.w(format!("  goto L{to};")),
                InstrKind::Branch { cond, else_to } => {
                    let c = self.expr(code, cond);
                    // In a role with a commit, every decision goes onto the thread's branch path.
                    let push = if self.track {
                        format!(" if (!pc_path_push(th, &s.lanes[th.t], {i}, taken)) return;")
                    } else {
                        String::new()
                    };
                    if step {
                        self.w(format!(
                            "  {{ bool taken = {c}; pc_turn_end(th, th.turnp);{push} if (!taken) goto L{else_to}; }}"
                        ));
                    } else if self.track {
                        self.w(format!("  {{ bool taken = {c};{push} if (!taken) goto L{else_to}; }}"));
                    } else {
                        self.w(format!("  if (!{c}) goto L{else_to};"));
                    }
                }
                InstrKind::Assert(e) => {
                    let c = self.expr(code, e);
                    self.w(format!("  if (!{c}) {{ th.status = PC_ASSERT; return; }}"));
                }
                InstrKind::Return => self.w("  return;"),
                InstrKind::Work => self.w("  // independent local work: nothing shared"),
                InstrKind::SyncWarp => {
                    self.w("  pc_turn_end(th, th.turnp);  // the arrival is the step; the release follows it");
                    self.w("  if (!pc_sync(th, &s.warp_sync[th.warp])) return;");
                    self.w("  __syncwarp(__activemask());  // reconverge the lanes that got here");
                    if self.track {
                        self.w("  pc_path_reset(th, &s.lanes[th.t]);  // converged again: paths start afresh");
                    }
                }
                InstrKind::SyncThreads => {
                    self.w("  pc_turn_end(th, th.turnp);  // the arrival is the step; the release follows it");
                    self.w("  if (!pc_sync(th, &s.block_sync)) return;");
                }
                InstrKind::SyncWarpMask { mask } => {
                    let m = self.expr(code, mask);
                    self.w(format!("  {{ i64 mask = {m};"));
                    self.w("    if (th.lane >= 32 || !((mask >> th.lane) & 1)) { th.status = PC_ASSERT; return; }  // not in its own mask: undefined");
                    self.w("    pc_turn_end(th, th.turnp);  // the arrival is the step; the release follows it");
                    self.w("    // __syncwarp(mask), in software so that it is bounded (exited lanes take no part)");
                    self.w("    if (!pc_sync_mask(th, s.wcount, s.wdone, warp_first[th.warp], warp_n[th.warp], (unsigned)mask)) return;");
                    self.w("    __threadfence_block(); }");
                }
                InstrKind::Elect { slot } => {
                    self.w("  pc_turn_end(th, th.turnp);  // the arrival is the step");
                    self.w("  if (!pc_sync(th, &s.warp_sync[th.warp])) return;  // every unfinished lane of the warp is here");
                    self.w("  { unsigned alive = s.walive[th.warp];");
                    self.w("    if (!pc_sync(th, &s.warp_sync[th.warp])) return;  // nobody exits before all have read `alive`");
                    self.w("    bool elected = pc_elect(alive);  // elect.sync: the hardware picks one lane");
                    self.w("    if (elected) { if (!pc_turn_begin(th, th.turnp, NT)) return; pc_turn_end(th, th.turnp); }  // the release: a step of the elected lane");
                    self.w(format!("    {} = elected ? 1 : 0; }}", Self::local_name(code, *slot)));
                }
                InstrKind::NamedBar { id, count, sync } => {
                    let (id, count) = (self.expr(code, id), self.expr(code, count));
                    let ws = p.warp_size;
                    let what = if *sync { "bar.sync" } else { "bar.arrive" };
                    self.w("  pc_turn_end(th, th.turnp);  // the arrival is the step; the release follows it");
                    self.w(format!(
                        "  {{ i64 id = {id}; // {what}, in software (bar.sync cannot be bounded in time)"
                    ));
                    self.w(format!(
                        "    if (!pc_named(th, &s.named[id < 0 || id >= 16 ? 0 : id], &s.warp_sync[th.warp], &s.named_lead[th.warp], &s.named_at[th.warp], id, {count}, {ws}, {sync})) return; }}"
                    ));
                }
                InstrKind::ClusterArrive { slot } => {
                    let (b, l) = (self.cluster_bar(), Self::local_name(code, *slot));
                    self.w(format!(
                        "  if (!pc_cluster_arrive(th, {b}, {l})) return;  // barrier.cluster.arrive.release, in software"
                    ));
                }
                InstrKind::ClusterWait { slot } => {
                    let (b, l) = (self.cluster_bar(), Self::local_name(code, *slot));
                    self.w("  pc_turn_end(th, th.turnp);  // the wait is the step; the release follows the last arrival");
                    self.w(format!(
                        "  if (!pc_cluster_wait(th, {b}, {l})) return;  // barrier.cluster.wait.acquire, in software (bounded)"
                    ));
                }
                InstrKind::TokenCheck { origin, index, .. } => {
                    // Issue 13: the model's check that a token is waited on at the array element
                    // it came from (an assertion there).
                    let o = Self::local_name(code, *origin);
                    let ix = self.expr(code, index);
                    self.w(format!(
                        "  if ({o} != 0 && {o} != {ix} + 1) {{ th.status = PC_ASSERT; return; }}  // token of another element"
                    ));
                }
                InstrKind::Op { op, result } => {
                    if memcpy_pair {
                        self.memcpy_async(code, op, &code.instrs[i + 1], step);
                        i += 2;
                        continue;
                    }
                    let rec = if in_completion { None } else { crate::outcome::recorded(code, ins) };
                    self.pc = i;
                    self.op(code, op, *result, &token_slots, rec)?;
                }
            }
            // A commit ends its turn itself (once for the group).
            let commit = matches!(
                ins.kind,
                InstrKind::Op {
                    op: IOp::Commit { .. },
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

    /// An arrival (with or without expect_tx) on every lane of an agent: each lane arrives, as the
    /// model applies it once per lane. The leader arrives first and the others after a meet, so
    /// the token every lane keeps (the leader's) is the first arrival's, as the model keeps the
    /// first lane's: when the lanes' arrivals span phases, later lanes' tokens name later ones.
    fn arrive_lanes(
        &mut self,
        code: &Code,
        op: &IOp,
        result: Option<u16>,
        rec: Option<crate::outcome::Recorded>,
    ) -> Result<(), NotExpressible> {
        let IOp::Arrive { bar, n, expect_tx, .. } = op else {
            unreachable!("only arrivals come here")
        };
        let libcu = self.backend == Backend::Libcu;
        let (b, chk) = self.place(code, bar, true);
        if let Some(c) = chk {
            self.w(format!("  {c}"));
        }
        let n = self.expr(code, n);
        let call = match (libcu, expect_tx) {
            (false, Some(tx)) => format!("pc_mbar_arrive_expect_tx(&{b}, (int){})", self.expr(code, tx)),
            (false, None) => format!("pc_mbar_arrive(&{b}, (int){n})"),
            (true, Some(tx)) => format!(
                "cuda::device::barrier_arrive_tx({b}, (ptrdiff_t){n}, (ptrdiff_t){})",
                self.expr(code, tx)
            ),
            (true, None) => format!("{b}.arrive((ptrdiff_t){n})"),
        };
        let parity = if libcu && self.is_software(bar) {
            "(int)(bool)tok".to_string()
        } else {
            "pc_state_parity((u64)tok)".to_string()
        };
        self.w("  { // every lane arrives, the leader first: the agent keeps the first arrival's token");
        self.w(format!("    if (u.lane == 0) u.a->tok = (i64)({call});"));
        self.w("    if (!pc_u_meet(th, u)) return;");
        self.w(format!("    if (u.lane != 0) (void)({call});"));
        self.w("    i64 tok = u.a->tok;");
        if rec == Some(crate::outcome::Recorded::Token) {
            self.w(format!("    {}", self.record(2, &parity)));
        }
        if let Some(r) = result {
            self.w(format!("    {} = tok;  // the token", Self::local_name(code, r)));
        }
        self.w("  }");
        Ok(())
    }

    /// At pc `i` of a uniform role: where an elected block ends, the elected lane hands over to
    /// the lanes waiting there (the others pass here with `u.in_block` clear).
    fn block_end(&mut self, code: &Code, i: usize) {
        if self.uni && code.elected.iter().any(|&(_, hi)| hi as usize == i) {
            self.w("  if (u.in_block) pc_u_block_done(th, u);  // the elected lane at its block's end: the lanes are together again");
        }
    }

    /// The instructions whose step on an agent's lanes is not "meet, every lane does it, meet":
    /// branches, warp and block synchronisation, `elect()` and the elected block's `if`. Returns
    /// false for the others.
    fn instr_lanes(&mut self, code: &Code, i: usize, step: bool) -> Result<bool, NotExpressible> {
        let ins = &code.instrs[i];
        let begin = "  if (!pc_u_begin(th, u, th.turnp, NT)) return;";
        let end = "if (!pc_u_end(th, u, th.turnp)) return;";
        match &ins.kind {
            InstrKind::Branch { cond, else_to } if code.elected.contains(&(i as u32 + 1, *else_to)) => {
                let mut slot = None;
                cond.each(&mut |e| {
                    if let IExpr::Local(s) = e {
                        if code
                            .instrs
                            .iter()
                            .any(|x| matches!(x.kind, InstrKind::Elect { slot } if slot == *s))
                        {
                            slot = Some(*s);
                        }
                    }
                });
                let Some(slot) = slot else {
                    return Err(NotExpressible("an elected block whose condition names no elect() result".into()));
                };
                let c = self.expr(code, cond);
                let el = format!("elected_{}", Self::local_name(code, slot));
                self.w(format!(
                    "  {{ bool taken = {c};  // the elected block: the elected lane runs it alone"
                ));
                self.w(format!(
                    "    if ({el} < 0) {{  // no election reached: the agent skips it (as modelled)"
                ));
                if step {
                    self.w(format!("  {begin} {end}"));
                }
                self.w(format!("      goto L{else_to}; }}"));
                self.w(format!(
                    "    if (!taken) {{ if (!pc_u_block_wait(th, u, {el})) return; goto L{else_to}; }}  // passed over: wait at its end"
                ));
                if step {
                    self.w("    if (!pc_turn_begin(th, th.turnp, NT)) return; pc_u_tick(u); pc_turn_end(th, th.turnp);  // the branch: the elected lane's step");
                }
                self.w("    u.in_block = 1; }");
            }
            InstrKind::Branch { cond, else_to } if step => {
                // A condition on shared state may change between the lanes' evaluations: the
                // agent follows the leader's, every lane's own is compared at exit.
                let c = self.expr(code, cond);
                self.w(begin);
                self.w(format!(
                    "  {{ bool mine = {c}; pc_u_observe(u, 3, mine ? 1 : 0); if (u.lane == 0) u.a->val = mine ? 1 : 0;"
                ));
                self.w(format!("    {end} if (!u.a->val) goto L{else_to}; }}"));
            }
            InstrKind::SetVar { var, expr } => {
                // Every lane writes (the model reports the race and writes once): the lanes read
                // the old value before any of them writes, so all write the same one.
                let e = self.expr(code, expr);
                if step {
                    self.w(begin);
                }
                self.w(format!(
                    "  {{ i64 mine = {e}; if (!pc_u_meet(th, u)) return; s.{} = mine; }}",
                    self.var_name(*var)
                ));
                if step {
                    self.w(format!("  {end}"));
                }
            }
            InstrKind::SetLocal { slot, expr } if step && expr.reads_var() => {
                // A shared var read by every lane: the agent keeps the leader's value.
                let e = self.expr(code, expr);
                self.w(begin);
                self.w(format!(
                    "  {{ i64 mine = {e}; pc_u_observe(u, 4, (int)mine); if (u.lane == 0) u.a->val = mine;"
                ));
                self.w(format!("    {end} {} = u.a->val; }}", Self::local_name(code, *slot)));
            }
            InstrKind::SyncWarp | InstrKind::SyncWarpMask { .. } => {
                // The agent is alone in its warp (a full mask, crate::uniform): syncwarp is its
                // lanes meeting, which every step of the agent does.
                if step {
                    self.w(begin);
                    self.w(format!("  {end}  // syncwarp: the lanes met"));
                } else {
                    self.w("  if (!pc_u_meet(th, u)) return;  // syncwarp: the lanes meet");
                }
            }
            InstrKind::SyncThreads => {
                if step {
                    self.w(begin);
                    self.w(format!("  {end}  // the arrival is the step; the release follows it"));
                }
                self.w("  if (!pc_sync(th, &s.block_sync)) return;  // every lane takes part");
            }
            InstrKind::Elect { slot } => {
                if step {
                    self.w(begin);
                    self.w(format!("  {end}  // the arrival is the step"));
                }
                let e = Self::local_name(code, *slot);
                self.w("  { if (!pc_u_meet(th, u)) return;  // every lane not exited is here");
                self.w("    unsigned alive = u.a->alive;");
                self.w("    if (!pc_u_meet(th, u)) return;  // nobody exits before all have read `alive`");
                self.w("    bool elected = pc_elect(alive);  // elect.sync over the agent's lanes: the hardware picks one");
                self.w("    if (elected) { u.a->elected = u.lane; if (!pc_turn_begin(th, th.turnp, NT)) return; pc_turn_end(th, th.turnp); u.a->step = th.step; u.a->lost = th.lost; }  // the release: a step of the elected lane");
                self.w("    if (!pc_u_meet(th, u)) return;");
                self.w(format!("    th.step = u.a->step; th.lost = u.a->lost; elected_{e} = u.a->elected;"));
                self.w(format!("    {e} = elected ? 1 : 0; }}"));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Issue 13: cp.async, its mbarrier arrive-on, and copies and reads of part of a buffer.
    fn op_issue13(&mut self, code: &Code, op: &IOp) {
        let libcu = self.backend == Backend::Libcu;
        match op {
            IOp::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => {
                let (d, chk) = self.place(code, buf, false);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let (off, n, flat, v) = self.part_of(code, buf, offset, bytes, version.as_ref());
                self.w(format!(
                    "  if (({n} != 4 && {n} != 8 && {n} != 16) || {off} < 0 || {off} % {n} != 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
                ));
                self.w(format!("  {{ {}", self.version_stmt(&flat, &v, version.is_some())));
                self.w(format!(
                    "  pc_cp_async((int*)((char*){d} + {off}), (const int*)((const char*)pc_src_row(th, version) + {off}), (int){n});  // lands asynchronously; no barrier tracks it yet"
                ));
                self.w("  }");
            }
            IOp::CpAsyncArrive { bar, noinc } => {
                let (b, chk) = self.place(code, bar, true);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let native = if libcu { self.native(&b) } else { format!("&{b}") };
                self.w(format!(
                    "  pc_cp_async_arrive({native}, {noinc});  // arrive-on once this thread's prior cp.async copies land"
                ));
            }
            IOp::CopyPart {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => {
                let (b, chk1) = self.place(code, bar, true);
                let (d, chk2) = self.place(code, buf, false);
                for c in [chk1, chk2].into_iter().flatten() {
                    self.w(format!("  {c}"));
                }
                let (off, n, flat, v) = self.part_of(code, buf, offset, bytes, version.as_ref());
                self.w(format!(
                    "  if ({n} % 16 != 0 || {n} <= 0 || {off} % 16 != 0 || {off} < 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
                ));
                self.w(format!("  {{ {}", self.version_stmt(&flat, &v, version.is_some())));
                let dst = format!("(int*)((char*){d} + {off})");
                let src = format!("(const int*)((const char*)pc_src_row(th, version) + {off})");
                if libcu {
                    self.w(format!(
                        "  cuda::device::memcpy_async_tx({dst}, {src}, cuda::aligned_size_t<16>((size_t){n}), {b});  // complete_tx({n}) on landing"
                    ));
                } else {
                    self.w(format!(
                        "  pc_bulk_copy({dst}, {src}, (int){n}, &{b});  // complete_tx({n}) on landing"
                    ));
                }
                self.w("  }");
            }
            IOp::ReadPart { buf, offset, bytes, .. } => {
                let (d, chk) = self.place(code, buf, false);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let (off, n) = (self.expr(code, offset), self.expr(code, bytes));
                self.w(format!(
                    "  if ({n} % 4 != 0 || {n} <= 0 || {off} % 4 != 0 || {off} < 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
                ));
                self.w(format!(
                    "  (void)pc_read((int*)((char*){d} + {off}), (int)({n} / 4));  // part of the buffer (not recorded)"
                ));
            }
            _ => unreachable!("only issue 13 operations come here"),
        }
    }

    /// Cluster scope: an operation on a peer CTA's objects (`cta = R`), or a copy multicast into
    /// several CTAs (`multicast = MASK`). Remote arrives and multicast copies are the hardware's;
    /// DSMEM reads and writes run the local operation on the peer's shared memory through a `mapa`
    /// pointer (`s` is rebound to it; `check_expressible` keeps shared vars out of the operands).
    fn remote_op(
        &mut self,
        code: &Code,
        target: &IExpr,
        multicast: bool,
        op: &IOp,
        token_slots: &std::collections::HashSet<u16>,
        rec: Option<crate::outcome::Recorded>,
    ) -> Result<(), NotExpressible> {
        let nc = self.cluster;
        let t = self.expr(code, target);
        if multicast {
            let (bar, buf, version) = match op {
                IOp::Copy { buf, bar, version, .. } | IOp::CopyPart { buf, bar, version, .. } => (bar, buf, version),
                _ => unreachable!("check_expressible admits multicast copies only"),
            };
            let version = self.expr(
                code,
                version.as_ref().expect("check_expressible asks multicast copies for a version"),
            );
            let (b, chk1) = self.place(code, bar, true);
            let (d, chk2) = self.place(code, buf, false);
            self.w(format!("  {{ i64 mask = {t};"));
            self.w(format!(
                "    if (mask < 1 || mask >= {}) {{ th.status = PC_ASSERT; return; }}  // a CTA outside the cluster: undefined",
                1u32 << nc
            ));
            for c in [chk1, chk2].into_iter().flatten() {
                self.w(format!("    {c}"));
            }
            let (off, n) = match op {
                IOp::CopyPart { offset, bytes, .. } => (self.expr(code, offset), self.expr(code, bytes)),
                IOp::Copy { bytes: Some(e), .. } => ("0LL".to_string(), self.expr(code, e)),
                _ => ("0LL".to_string(), format!("(i64)sizeof({d})")),
            };
            self.w(format!(
                "    if ({n} % 16 != 0 || {n} <= 0 || {off} % 16 != 0 || {off} < 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
            ));
            self.remote = Some("c");
            let flat = self.flat_buf(code, buf);
            self.remote = None;
            self.w(format!(
                "    for (int c = 0; c < {nc}; c++) if ((mask >> c) & 1) atomicAdd(&((Shared*)pc_mapa((const void*)&s, c))->writes[{flat}], 1);"
            ));
            self.w(format!(
                "    pc_bulk_copy_multicast((int*)((char*){d} + {off}), (const int*)((const char*)pc_src_row(th, {version}) + {off}), (int){n}, {}, (int)mask);  // lands in every CTA of the mask, complete_tx({n}) on each one's barrier",
                self.native(&b)
            ));
            self.w("  }");
            return Ok(());
        }
        self.w(format!("  {{ i64 peer = {t};"));
        self.w(format!(
            "    if (peer < 0 || peer >= {nc}) {{ th.status = PC_ASSERT; return; }}  // mapa of a rank outside the cluster: undefined"
        ));
        match op {
            IOp::Arrive { bar, n, drop, expect_tx } => {
                let (b, chk) = self.place(code, bar, true);
                if let Some(c) = chk {
                    self.w(format!("    {c}"));
                }
                let native = self.native(&b);
                match expect_tx {
                    Some(tx) => {
                        let tx = self.expr(code, tx);
                        self.w(format!("    pc_mbar_arrive_expect_tx_remote({native}, (int)peer, (int){tx});  // mbarrier.arrive.expect_tx.release.cluster.shared::cluster"));
                    }
                    None => {
                        let n = self.expr(code, n);
                        self.w(format!("    pc_mbar_arrive_remote({native}, (int)peer, (int){n}, {drop});  // mbarrier.arrive.release.cluster.shared::cluster"));
                    }
                }
            }
            _ => {
                self.w("    Shared& peer_s = *(Shared*)pc_mapa((const void*)&s, (int)peer);  // the peer's shared memory (DSMEM)");
                self.w("    { Shared& s = peer_s;");
                self.remote = Some("peer");
                let r = self.op(code, op, None, token_slots, rec);
                self.remote = None;
                r?;
                self.w("    }");
            }
        }
        self.w("  }");
        Ok(())
    }

    fn memcpy_async(&mut self, code: &Code, copy: &IOp, _expect: &Instr, step: bool) {
        let IOp::Copy { buf, bar, bytes, version } = copy else {
            unreachable!()
        };
        let (b, chk1) = self.place(code, bar, true);
        let (d, chk2) = self.place(code, buf, false);
        for c in [chk1, chk2].into_iter().flatten() {
            self.w(format!("  {c}"));
        }
        let n = bytes.as_ref().map(|e| self.expr(code, e)).unwrap_or_else(|| "0".into());
        let flat = self.flat_buf(code, buf);
        let v = version
            .as_ref()
            .map(|e| self.expr(code, e))
            .unwrap_or_else(|| format!("(i64)s.writes[{flat}]"));
        self.w(format!(
            "  if ({n} % 16 != 0 || {n} <= 0 || {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
        ));
        let every_lane = if self.lanes { ": on every lane" } else { "" };
        self.w(format!(
            "  {{ {} const int* from = pc_src_row(th, version);\n    cuda::memcpy_async({d}, from, cuda::aligned_size_t<16>((size_t){n}), {b});  // issues the bulk copy, then expect_tx({n}){every_lane}\n  }}",
            self.version_stmt(&flat, &v, version.is_some())
        ));
        if step {
            // Two model steps (copy, expect_tx) done by one call: take both turns.
            self.w(format!("  {}", self.turn_end()));
            self.w(format!(
                "  {}  // the expect_tx step (already done inside memcpy_async)",
                self.turn_begin()
            ));
            self.w(format!("  {}", self.turn_end()));
        }
    }

    fn op(
        &mut self,
        code: &Code,
        op: &IOp,
        result: Option<u16>,
        token_slots: &std::collections::HashSet<u16>,
        rec: Option<crate::outcome::Recorded>,
    ) -> Result<(), NotExpressible> {
        use crate::outcome::Recorded;
        let libcu = self.backend == Backend::Libcu;
        let set = |v: String| match result {
            Some(r) => format!("{} = (i64)({v});", Self::local_name(code, r)),
            None => format!("(void)({v});"),
        };
        if self.lanes {
            match op {
                IOp::Arrive { drop: false, .. } => return self.arrive_lanes(code, op, result, rec),
                IOp::StoreAsync { .. } | IOp::CommitGroup | IOp::WaitGroup { .. } | IOp::Wgmma { .. } | IOp::WgmmaWait { .. } => {
                    // What the warp's lanes share is done once (docs/model.md): by the leader, while
                    // the others wait at the step's end.
                    self.w("  if (u.lane == 0) {  // once for the warp");
                    self.lanes = false;
                    let r = self.op(code, op, result, token_slots, rec);
                    self.lanes = true;
                    self.w("  }");
                    return r;
                }
                _ => {}
            }
        }
        match op {
            IOp::Remote { target, multicast, op } => return self.remote_op(code, target, *multicast, op, token_slots, rec),
            IOp::Arrive { bar, n, drop, expect_tx } => {
                let (b, chk) = self.place(code, bar, true);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let n = self.expr(code, n);
                let tok_var = "tok";
                let soft = self.is_software(bar);
                let call = match (libcu, drop, expect_tx) {
                    (false, true, _) => format!("pc_mbar_arrive_drop(&{b}, (int){n})"),
                    (false, false, Some(tx)) => format!("pc_mbar_arrive_expect_tx(&{b}, (int){})", self.expr(code, tx)),
                    (false, false, None) => format!("pc_mbar_arrive(&{b}, (int){n})"),
                    (true, true, _) => {
                        self.w(format!("  {b}.arrive_and_drop();"));
                        return Ok(());
                    }
                    (true, false, Some(tx)) => {
                        format!(
                            "cuda::device::barrier_arrive_tx({b}, (ptrdiff_t){n}, (ptrdiff_t){})",
                            self.expr(code, tx)
                        )
                    }
                    (true, false, None) => format!("{b}.arrive((ptrdiff_t){n})"),
                };
                if *drop {
                    self.w(format!("  (void){call};"));
                    return Ok(());
                }
                let parity = if libcu && soft {
                    // Software barrier (completion function): the token is the phase parity.
                    format!("(int)(bool){tok_var}")
                } else {
                    format!("pc_state_parity((u64){tok_var})")
                };
                self.w(format!("  {{ auto {tok_var} = {call};"));
                if rec == Some(Recorded::Token) {
                    self.w(format!("    {}", self.record(2, &parity)));
                }
                if let Some(r) = result {
                    self.w(format!("    {} = (i64){tok_var};  // the token", Self::local_name(code, r)));
                }
                self.w("  }");
            }
            IOp::Wait { bar, target, try_ } => {
                let (b, chk) = self.place(code, bar, true);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let soft = self.is_software(bar);
                // A token held in a local written by an arrive is the raw barrier token; anything
                // else (a literal phase, an expression) names a phase by its parity.
                let (is_token, arg) = match target {
                    WaitTarget::Token(IExpr::Local(s)) if token_slots.contains(s) => (true, self.expr(code, &IExpr::Local(*s))),
                    WaitTarget::Token(e) | WaitTarget::Parity(e) => (false, format!("(int)pc_rem({}, 2)", self.expr(code, e))),
                };
                let sc = self.wait_scope();
                let test = match (libcu, soft, is_token) {
                    (true, true, true) => format!("cuda::std::__call_try_wait({b}, (bool){arg})"),
                    (true, true, false) => format!("cuda::std::__call_try_wait_parity({b}, (bool){arg})"),
                    (_, _, true) => format!("pc_mbar_test_token{sc}({}, (u64){arg})", self.native(&b)),
                    (_, _, false) => format!("pc_mbar_test_parity{sc}({}, {arg})", self.native(&b)),
                };
                if *try_ {
                    self.w(format!("  {{ bool ok = {test};  // never blocks"));
                    if rec == Some(Recorded::TryWait) {
                        self.w(format!("    {}", self.record(1, "ok")));
                    } else if self.lanes {
                        self.w("    pc_u_observe(u, 1, ok ? 1 : 0);");
                    }
                    if self.lanes {
                        // The lanes may see the phase complete at different moments; the agent
                        // goes on with the leader's answer, so that its lanes stay on one path.
                        self.w("    if (u.lane == 0) u.a->val = ok ? 1 : 0;");
                        self.w("    if (!pc_u_meet(th, u)) return;");
                        self.w("    ok = u.a->val != 0;  // the agent's answer: the leader's");
                    }
                    self.w(format!("    {} }}", set("ok ? 1 : 0".into())));
                } else {
                    let wait = match (libcu, soft, is_token) {
                        (true, true, true) => format!("pc_soft_wait_token(th, {b}, (bool){arg})"),
                        (true, true, false) => format!("pc_soft_wait_parity(th, {b}, (bool){arg})"),
                        (true, false, true) => format!(
                            "pc_mbar_wait_token{sc}(th, {}, (u64){arg})  /* = libcu++ wait(token), bounded */",
                            self.native(&b)
                        ),
                        (true, false, false) => format!(
                            "pc_mbar_wait_parity{sc}(th, {}, {arg})  /* = libcu++ wait_parity(p), bounded */",
                            self.native(&b)
                        ),
                        (false, _, true) => format!("pc_mbar_wait_token{sc}(th, &{b}, (u64){arg})"),
                        (false, _, false) => format!("pc_mbar_wait_parity{sc}(th, &{b}, {arg})"),
                    };
                    self.w(format!("  if (!{wait}) return;  // timed out: hung"));
                }
            }
            IOp::ExpectTx { bar, bytes } => {
                let (b, chk) = self.place(code, bar, true);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let n = self.expr(code, bytes);
                if libcu {
                    self.w(format!("  cuda::device::barrier_expect_tx({b}, (ptrdiff_t){n});"));
                } else {
                    self.w(format!("  pc_mbar_expect_tx(&{b}, (int){n});"));
                }
            }
            IOp::CompleteTx { bar, bytes } => {
                let (b, chk) = self.place(code, bar, true);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let n = self.expr(code, bytes);
                self.w(format!("  pc_mbar_complete_tx({}, (int){n});", self.native(&b)));
            }
            IOp::Copy { buf, bar, bytes, version } => {
                let (b, chk1) = self.place(code, bar, true);
                let (d, chk2) = self.place(code, buf, false);
                for c in [chk1, chk2].into_iter().flatten() {
                    self.w(format!("  {c}"));
                }
                let n = bytes
                    .as_ref()
                    .map(|e| self.expr(code, e))
                    .unwrap_or_else(|| format!("(i64)sizeof({d})"));
                let bytes_decl = bytes.is_some();
                let flat = self.flat_buf(code, buf);
                let v = match version {
                    Some(e) => self.expr(code, e),
                    // The default version: the number of earlier writes (copies count when issued).
                    None => format!("(i64)s.writes[{flat}]"),
                };
                if bytes_decl {
                    self.w(format!(
                        "  if ({n} % 16 != 0 || {n} <= 0 || {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
                    ));
                }
                self.w(format!("  {{ {}", self.version_stmt(&flat, &v, version.is_some())));
                let v = "version";
                if libcu {
                    self.w(format!(
                        "  cuda::device::memcpy_async_tx({d}, pc_src_row(th, {v}), cuda::aligned_size_t<16>((size_t){n}), {b});  // complete_tx({n}) on landing"
                    ));
                } else {
                    self.w(format!(
                        "  pc_bulk_copy({d}, pc_src_row(th, {v}), (int){n}, &{b});  // complete_tx({n}) on landing"
                    ));
                }
                self.w("  }");
            }
            IOp::Read { buf, expect } => {
                let (d, chk) = self.place(code, buf, false);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                self.w(format!("  {{ int v = pc_read({d}, (int)(sizeof({d}) / 4));"));
                if rec == Some(Recorded::Read) {
                    self.w(format!("    {}", self.record(0, "v")));
                    if let Some(e) = expect {
                        let e = self.expr(code, e);
                        self.w(format!("    if ((i64)v != {e}) th.nbad++;  // not the expected version"));
                    }
                }
                self.w("  }");
            }
            IOp::Write { buf, version } => {
                let (d, chk) = self.place(code, buf, false);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let v = self.expr(code, version);
                let flat = self.flat_buf(code, buf);
                // On an agent's lanes every lane writes (the model reports the race) and the write
                // counts once. The count is atomic: a remote write bumps the peer CTA's count, which
                // its own threads may be bumping too (see `version_stmt`).
                let once = if self.lanes { "if (u.lane == 0) " } else { "" };
                self.w(format!(
                    "  pc_write({d}, (int)(sizeof({d}) / 4), (int){v}); {once}atomicAdd(&s.writes[{flat}], 1);"
                ));
            }
            IOp::CpAsync { .. } | IOp::CpAsyncArrive { .. } | IOp::CopyPart { .. } | IOp::ReadPart { .. } => self.op_issue13(code, op),
            IOp::Init { bar, count } => {
                let (b, chk) = self.place(code, bar, true);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let live_flat = self.flat_bar(code, bar);
                let g = &self.p.barrier_groups[bar.group as usize];
                let decl = self.p.barriers[g.base as usize].count;
                let count = count.as_ref().map(|e| self.expr(code, e)).unwrap_or_else(|| format!("{decl}LL"));
                match (libcu, self.group_completion[bar.group as usize]) {
                    (false, _) => {
                        self.w(format!("  pc_mbar_init(&{b}, (int){count});"));
                        self.w("  pc_fence_init();");
                    }
                    (true, None) => self.w(format!("  init(&{b}, (ptrdiff_t){count} + pc_zero());")),
                    (true, Some(c)) => {
                        let flat = self.flat_bar(code, bar);
                        self.w(format!(
                            "  init(&{b}, (ptrdiff_t){count} + pc_zero(), Completion_{}{{&s, &th.completions[{flat}]}});",
                            ident(&self.p.completions[c as usize].name)
                        ))
                    }
                }
                self.w(format!("  s.bar_live[{live_flat}] = 1;"));
            }
            IOp::Inval { bar } => {
                let (b, chk) = self.place(code, bar, true);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let live_flat = self.flat_bar(code, bar);
                self.w(format!("  s.bar_live[{live_flat}] = 0;"));
                if libcu && self.is_software(bar) {
                    self.w(format!("  {b}.~barrier();  // software barrier: its life ends"));
                } else {
                    self.w(format!("  pc_mbar_inval({});", self.native(&b)));
                }
            }
            // The async proxy (issue 13).
            IOp::StoreAsync { buf } => {
                let (d, chk) = self.place(code, buf, false);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                self.w(format!(
                    "  pc_store_async({d}, (int)sizeof({d}));  // TMA store: the async proxy reads it until its group is waited for"
                ));
            }
            IOp::CommitGroup => self.w("  pc_bulk_commit();"),
            IOp::WaitGroup { n, read } => {
                let n = self.expr(code, n);
                self.w(format!("  if (!pc_bulk_wait(th, {n}, {read})) return;"));
            }
            IOp::Wgmma { bufs } => {
                self.w("  // wgmma_async, emulated: a bulk store of each operand, one bulk group (the same async reads)");
                for b in bufs {
                    let (d, chk) = self.place(code, b, false);
                    if let Some(c) = chk {
                        self.w(format!("  {c}"));
                    }
                    self.w(format!("  pc_store_async({d}, (int)sizeof({d}));"));
                }
                self.w("  pc_bulk_commit();");
            }
            IOp::WgmmaWait { n } => {
                let n = self.expr(code, n);
                self.w(format!("  if (!pc_bulk_wait(th, {n}, true)) return;  // wgmma_wait, emulated"));
            }
            IOp::FenceProxyAsync => self.w("  pc_fence_proxy_async();"),
            IOp::FenceMbarrierInit => self.w("  pc_fence_mbarrier_init();"),
            IOp::Commit { bar } => {
                let (b, chk) = self.place(code, bar, true);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                let arrive = if libcu {
                    format!("(void){b}.arrive()")
                } else {
                    format!("(void)pc_mbar_arrive(&{b}, 1)")
                };
                let pc = self.pc;
                if self.hw_commit {
                    self.w("  { // warp-batched arrive as the hardware batches it: the lanes executing this commit together, per barrier");
                    self.w(format!(
                        "    unsigned group = __match_any_sync(__activemask(), (unsigned)(unsigned long long)&{b});"
                    ));
                    self.w(format!("    if (th.lane == __ffs(group) - 1) {arrive};"));
                    self.w("    pc_turn_end(th, th.turnp);");
                    self.w("  }");
                    return Ok(());
                }
                self.w("  { // warp-batched arrive: ONE arrival per converged group of lanes (the model's rule)");
                self.w(format!(
                    "    unsigned group = pc_commit_group(th, &s.lanes[warp_first[th.warp]], {pc});"
                ));
                self.w("    if (group == 0) return;  // timed out: hung");
                self.w("    __syncwarp(group);  // the group meets: its lanes' earlier writes are ordered before the arrival");
                self.w("    bool leader = th.lane == __ffs(group) - 1;");
                self.w(format!("    if (leader) {arrive};  // the lowest lane arrives for the group"));
                self.w("    __syncwarp(group);  // no lane moves on before the arrival is made");
                self.w("    pc_commit_leave(th, &s.lanes[th.t], leader, th.turnp);");
                self.w("  }");
            }
        }
        Ok(())
    }
}

/// Parse a block of results (as written by the kernel) into per-thread raw records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadRecord {
    pub status: i32,
    pub reads: Vec<i64>,
    pub try_waits: Vec<bool>,
    pub token_parities: Vec<u8>,
    /// Reads that differed from their `expect`.
    pub bad_expect: u32,
    /// Replay only: the turnstile stalled and the thread ran free from then on.
    pub turn_lost: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRecord {
    pub threads: Vec<ThreadRecord>,
    pub completions: Vec<u32>,
    /// Per barrier, the end probe word (0: not probed; else `4 | p0 | p1 << 1`).
    pub probes: Vec<i32>,
    /// The final values of the vars completion functions write; empty when not recorded.
    pub end_vars: Vec<i64>,
    /// Per model thread, the lanes of a uniform agent whose observations (outside elected blocks)
    /// or end differed from its leader lane's (bit l: lane l); empty without uniform roles.
    pub lanes_apart: Vec<u32>,
}

impl Kernel {
    pub fn parse_block(&self, words: &[i32]) -> BlockRecord {
        let mut threads = Vec::with_capacity(self.threads);
        for t in 0..self.threads {
            let r = &words[t * THREAD_WORDS..(t + 1) * THREAD_WORDS];
            let n = |k: usize| (r[k].max(0) as usize).min(CAP);
            let list = |l: usize, k: usize| &r[HEADER_WORDS + l * CAP..HEADER_WORDS + l * CAP + n(k)];
            threads.push(ThreadRecord {
                status: r[0],
                reads: list(0, 1).iter().map(|&v| v as i64).collect(),
                try_waits: list(1, 2).iter().map(|&v| v != 0).collect(),
                token_parities: list(2, 3).iter().map(|&v| v as u8).collect(),
                bad_expect: r[4].max(0) as u32,
                turn_lost: r[5] != 0,
            });
        }
        let completions = words[self.threads * THREAD_WORDS..self.threads * THREAD_WORDS + self.barriers]
            .iter()
            .map(|&v| v.max(0) as u32)
            .collect();
        let at = self.threads * THREAD_WORDS + self.barriers;
        let probes = words.get(at..at + self.barriers).map(|w| w.to_vec()).unwrap_or_default();
        let at = at + self.barriers;
        let uniform = self.lanes.iter().any(|&l| l > 1);
        let vars_end = if uniform {
            self.block_words - self.threads
        } else {
            self.block_words
        };
        let lanes_apart = if uniform {
            words
                .get(vars_end..self.block_words)
                .map(|w| w.iter().map(|&v| v as u32).collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let end_vars = match words.get(at..vars_end) {
            Some(v) if v.len() > 1 && v[0] == 1 => v[1..]
                .chunks_exact(2)
                .map(|c| ((c[1] as u32 as u64) << 32 | c[0] as u32 as u64) as i64)
                .collect(),
            _ => Vec::new(),
        };
        BlockRecord {
            threads,
            completions,
            probes,
            end_vars,
            lanes_apart,
        }
    }
}
