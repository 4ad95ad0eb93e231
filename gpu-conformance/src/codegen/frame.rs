//! The kernel's frame: the per-spec constants, the shared state (one field per object the spec
//! declares, plus the bookkeeping of each kind of synchronisation it uses), completion
//! functions, one device function per role, and the `__global__` entry: setup by thread 0, the
//! hardware thread -> model thread map, the dispatch to the roles, the exit that releases every
//! barrier the thread held back, and the end probes of the last thread out.

use super::cluster::uses_cluster_barrier;
use super::expr::{comment_text, ident, line_of};
use super::memory::words_of;
use super::named::has_named;
use super::prelude::{TENSORMAP_HELPERS, UNIFORM_HELPERS, WGMMA_HELPERS};
use super::proxy::{has_warpgroup_wgmma, wgmma_helpers, WARPGROUP};
use super::results::{block_words_of, Layout, COMPLETIONS_CPP, END_VARS_FROM_PROBES_CPP, HEADER_CPP, PROBES_CPP};
use super::tensormap::has_tensormap;
use super::warp::{code_commits, has_commit, has_warp_ops};
use super::{has_uniform, thread_lanes, Backend, Gen, NotExpressible};
use phasecheck_model::program::ir::*;

/// The kernel's state lives in dynamic shared memory, so that real tile sizes fit (up to the
/// device's opt-in limit, 227 KB on the H200, where static shared memory stops at 48 KB).
const DYNAMIC_SHARED: &str = "  extern __shared__ __align__(1024) unsigned char pc_dyn_smem[];  // sizeof(Shared) bytes, given at launch\n  Shared& s = *reinterpret_cast<Shared*>(pc_dyn_smem);";

/// The name of the `__device__` constant that holds a kernel's shared-state size in bytes.
pub fn smem_symbol(kernel: &str) -> String {
    format!("{kernel}_smem")
}

impl Gen<'_> {
    pub(super) fn kernel(&mut self, symbol: &str, block_dim: usize, hw_index: &dyn Fn(&ThreadInfo) -> usize) -> Result<(), NotExpressible> {
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
        if self.wgmma_hw {
            self.w(WGMMA_HELPERS);
        }
        let tmap = has_tensormap(p);
        if tmap {
            self.w(TENSORMAP_HELPERS);
            self.tensormap_host(symbol);
        }
        self.w(format!("namespace {ns} {{"));
        self.w(format!("constexpr int NT = {nt};        // model threads"));
        if tmap {
            self.tensormap_accessor(symbol);
        }
        if self.wgmma_hw {
            let helpers = wgmma_helpers(p);
            let base = block_dim - WARPGROUP * helpers.len();
            let of: Vec<String> = (0..nt)
                .map(|t| helpers.iter().position(|h| h.contains(&t)).map_or(-1, |i| i as i64).to_string())
                .collect();
            if has_warpgroup_wgmma(p) {
                self.w(format!(
                    "constexpr int NWG = {};        // helper warpgroups: one per agent that issues wgmma_async, one per warpgroup that issues warpgroup_mma",
                    helpers.len()
                ));
            } else {
                self.w(format!(
                    "constexpr int NWG = {};        // helper warpgroups: one per agent that issues wgmma",
                    helpers.len()
                ));
            }
            self.w(format!("constexpr int WG_BASE = {base};  // the first helper thread"));
            self.w(format!(
                "__device__ const int wg_of[NT] = {{{}}};  // per model thread: its helper warpgroup, or -1",
                of.join(", ")
            ));
            if has_warpgroup_wgmma(p) {
                let member: Vec<String> = (0..nt)
                    .map(|t| {
                        let scoped = code_warpgroup(p, t);
                        helpers
                            .iter()
                            .find_map(|h| h.iter().position(|&a| a == t))
                            .filter(|_| scoped)
                            .map_or(-1, |i| i as i64)
                            .to_string()
                    })
                    .collect();
                self.w(format!(
                    "__device__ const int wg_member[NT] = {{{}}};  // per agent of a warpgroup that issues warpgroup_mma: its index in the warpgroup, or -1",
                    member.join(", ")
                ));
            }
        }
        if uni {
            // Per CTA: every CTA of a cluster holds the same roles (the model's CTA-major threads).
            let nl = thread_lanes(p).iter().sum::<u32>() as usize / self.cluster;
            self.w(format!(
                "constexpr int NL = {nl};        // hardware threads running them (an agent of a uniform role: its warp's lanes), per CTA"
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
            let what = if b.counter {
                "a counter: its value in the first word".to_string()
            } else {
                format!("{} bytes of version stamps", b.bytes)
            };
            self.w(format!(
                "  alignas(128) int buf_{}{arr}[{}];  // {what}",
                ident(self.declared(&g.name)),
                words_of(b.bytes),
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
        if self.wgmma_hw {
            self.w("  PcWg wg[NWG];           // per helper warpgroup: its agent's requests and wgmma groups");
            if has_warpgroup_wgmma(p) {
                self.w(
                    "  PcWgScope wgs[NWG];     // per helper warpgroup of a spec warpgroup: its agents' issues of the warpgroup's groups",
                );
            }
            self.w("  alignas(128) unsigned char wg_ones[2048];  // the wgmma A operand: 64 x 32 bytes of 1");
        }
        if self.hw_cluster_barrier {
            self.w("  volatile int cbar_out[NT];  // barrier.cluster: arrived on a phase not yet waited for, per model thread");
            self.w("  int cfin;               // model threads of the cluster that finished (each CTA counts them all)");
        }
        if self.keeper {
            self.w("  int cfin;               // model threads of the cluster that finished (each CTA counts them all)");
        }
        if tmap {
            self.tensormap_shared();
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
        self.w("// The kernel's shared state in bytes: the host launches with this much dynamic shared memory.");
        self.w(format!(
            "extern \"C\" __device__ const unsigned int {} = sizeof({ns}::Shared);",
            smem_symbol(symbol)
        ));
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
            self.w(DYNAMIC_SHARED);
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
            self.w(DYNAMIC_SHARED);
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
                    "    init(&{bar}, {count} + pc_zero(), Completion_{}{{&s, &block_out[{COMPLETIONS_CPP} + {bi}]}});",
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
        if self.hw_cluster_barrier {
            self.w("    s.cfin = 0; for (int i = 0; i < NT; i++) s.cbar_out[i] = 0;");
        }
        if self.keeper {
            self.w("    s.cfin = 0;");
        }
        if self.wgmma_hw {
            self.w("    { int* z = (int*)&s.wg[0]; for (int i = 0; i < (int)(sizeof(s.wg) / sizeof(int)); i++) z[i] = 0; }");
            if has_warpgroup_wgmma(p) {
                self.w("    { int* z = (int*)&s.wgs[0]; for (int i = 0; i < (int)(sizeof(s.wgs) / sizeof(int)); i++) z[i] = 0; }");
                for (i, h) in wgmma_helpers(p).iter().enumerate() {
                    self.w(format!("    s.wgs[{i}].members = {};", h.len()));
                }
            }
            self.w("    for (int i = 0; i < 2048; i++) s.wg_ones[i] = 1;");
            self.w("    pc_fence_proxy_async();  // the ones and the buffers' first stamps, for the tensor cores' reads");
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
        if tmap {
            self.tensormap_init();
        }
        if self.backend == Backend::Ptx || nc > 1 || tmap {
            self.w("    pc_fence_init();  // make the inits visible to the async proxy");
        }
        self.w("  }");
        self.w("  __syncthreads();");
        if nc > 1 {
            self.w("  pc_cluster_barrier_hw();  // every CTA's barriers are initialised before any thread of the cluster runs");
        }
        if self.wgmma_hw {
            self.w(
                "  if ((int)threadIdx.x >= WG_BASE) { pc_wg_serve(&s.wg[(threadIdx.x - WG_BASE) / 128], s.wg_ones, timeout_ns); return; }",
            );
        }
        if self.keeper {
            self.w(format!(
                "  if (threadIdx.x >= {}) {{  // the keeper warp: this CTA's shared memory outlives every thread of the cluster",
                block_dim - 32
            ));
            self.w("    while (*(volatile int*)&s.cfin < NT) __nanosleep(1000);");
            self.w("    pc_cluster_barrier_hw();  // the keepers alone: every model thread has exited");
            self.w("    return;");
            self.w("  }");
        }
        self.w("  if (me < 0) return;");
        self.w("  PcThread th = {};");
        self.w("  th.rec = block_out + me * PC_THREAD_WORDS;");
        self.w(format!("  th.completions = block_out + {COMPLETIONS_CPP};"));
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
        if self.wgmma_hw && has_warpgroup_wgmma(p) {
            // Once per agent (a uniform agent's leader, which issued its wgmmas).
            let leader = if uni { "(!u.a || u.lane == 0)" } else { "true" };
            self.w(format!("  if (wg_of[me] >= 0 && {leader}) {{"));
            self.w("    if (wg_member[me] < 0) pc_wg_leave(th, &s.wg[wg_of[me]]);  // its helper warpgroup retires every group and leaves");
            self.w("    else pc_wgs_leave(th, &s.wg[wg_of[me]], &s.wgs[wg_of[me]]);  // ... once every agent of its warpgroup has left");
            self.w("  }");
        } else if self.wgmma_hw {
            self.w("  if (wg_of[me] >= 0) pc_wg_leave(th, &s.wg[wg_of[me]]);  // its helper warpgroup retires every group and leaves");
        }
        self.w("  // An exited thread no longer holds back syncthreads / syncwarp.");
        if uni {
            self.w("  pc_leave(&s.block_sync);");
            self.w("  if (u.a) {  // a lane of an agent: the last lane out writes the agent's record");
            let exit = format!("pc_u_exit(th, u, block_out + {} + me)", Layout::of(p).lanes_apart());
            if uses_cluster_barrier(p) && !self.hw_cluster_barrier {
                // The software cluster barrier counts agents: the agent leaves it once, with its last lane.
                self.w(format!(
                    "    if ({exit}) pc_cluster_leave(th, {});  // the agent's lanes-apart word; nor the cluster barrier",
                    self.cluster_bar()
                ));
            } else {
                self.w(format!("    {exit};  // the agent's lanes-apart word"));
            }
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
        if uses_cluster_barrier(p) && !self.hw_cluster_barrier {
            self.w(format!(
                "  pc_cluster_leave(th, {});  // nor the cluster barrier",
                self.cluster_bar()
            ));
        }
        self.w(format!("  {HEADER_CPP}"));
        if uni {
            self.w("  }");
        }
        self.end_probes();
        if self.hw_cluster_barrier {
            self.cluster_hw_exit();
        } else if self.keeper {
            // Counted finished in every CTA, then gone: an exited lane holds back no barrier.sync.
            self.w(format!(
                "  asm volatile(\"fence.acq_rel.cluster;\" ::: \"memory\"); for (int r = 0; r < {nc}; r++) atomicAdd((int*)pc_mapa((const void*)&s.cfin, r), 1);"
            ));
        } else if nc > 1 {
            self.w("  pc_cluster_barrier_hw();  // no CTA exits while a peer may still reach its shared memory");
        }
        self.w("}");
        Ok(())
    }

    /// The end of a model thread in the hardware cluster-barrier form. It cannot exit while a peer
    /// may still reach its CTA's shared memory, and a thread that has not exited holds back
    /// `barrier.cluster`, where the spec's exited threads must not. So it waits for the phase it
    /// arrived on (if any), counts itself finished in every CTA of the cluster, and arrives and
    /// waits on every phase until its own CTA's count says the whole cluster finished; then it
    /// exits, which releases a thread still in a phase (the hardware counts only threads not
    /// exited). The count is read in the thread's own CTA, which is alive while the thread is, and
    /// a CTA's count is full only after every increment aimed at it, so no increment reaches a CTA
    /// that is gone.
    fn cluster_hw_exit(&mut self) {
        let nc = self.cluster;
        self.w("  // barrier.cluster: a finished thread stands in for an exited one until the cluster is done");
        self.w("  if (s.cbar_out[th.t]) asm volatile(\"barrier.cluster.wait.acquire;\" ::: \"memory\");  // the phase it arrived on");
        self.w(format!(
            "  for (int r = 0; r < {nc}; r++) atomicAdd((int*)pc_mapa((const void*)&s.cfin, r), 1);"
        ));
        // Counted in hardware threads: every lane of a uniform agent stays in the loop, as each
        // one arrived on the hardware barrier.
        if has_uniform(self.p) {
            self.w(format!("  while (*(volatile int*)&s.cfin < NL * {nc})"));
        } else {
            self.w("  while (*(volatile int*)&s.cfin < NT)");
        }
        self.w("    asm volatile(\"barrier.cluster.arrive.release;\\n\\tbarrier.cluster.wait.acquire;\" ::: \"memory\");");
    }

    /// The last model thread to exit reads every live barrier's phase parity with both
    /// non-destructive probes (`mbarrier.test_wait.parity` 0 and 1); the model predicts it
    /// (`Outcome::end_parity`). Software barriers (libcu++ with a completion function) have no
    /// mbarrier to probe: their word stays 0, "not probed".
    pub(super) fn end_probes(&mut self) {
        let p = self.p;
        let probed = (0..p.barrier_groups.len()).any(|gi| self.backend == Backend::Ptx || self.group_completion[gi].is_none());
        let cvars = phasecheck_verifier::outcomes::completion_vars(p);
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
        self.w(format!("    int* probes = block_out + {PROBES_CPP};"));
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
            self.w(format!("    int* vars = {END_VARS_FROM_PROBES_CPP};"));
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
}

/// Model thread `t`'s role issues warpgroup-scoped wgmma.
fn code_warpgroup(p: &Protocol, t: usize) -> bool {
    super::proxy::code_warpgroup_wgmma(&p.roles[p.threads[t].role as usize].code)
}
