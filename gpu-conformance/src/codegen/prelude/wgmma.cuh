#ifndef PC_WGMMA_HELPERS
#define PC_WGMMA_HELPERS
// ---- wgmma on the hardware: a helper warpgroup per issuing agent ---------------------------------
// wgmma.mma_async is executed by a whole warpgroup (128 threads, .sync.aligned), and a spec's
// issuing agent is one thread (or a warp's leader). So each such agent has a warpgroup of helper
// threads that issue its wgmmas: the agent posts a request and waits (bounded) until the group is
// issued; its wgmma_wait(N) posts a wait, which the warpgroup performs with wgmma.wait_group N.
// The tensor cores read the spec's own buffers through matrix descriptors (B operand, u8, K-major,
// no swizzle: 256 bytes per m64n8k32, or 128 read twice), against a matrix of ones (A), so
// accumulator column n sums the bytes of rows n of the read's two core matrices. The agent computes those sums from the
// buffer when it issues; a group whose accumulators differ read bytes the buffer did not hold at
// issue: its operand changed under the asynchronous read (counted as a wrong version).
#define PC_WG_SLOTS 8
#define PC_WG_MAX_CHUNKS 64
// An operand's reads: chunk c at addr + 256c, then a last 256-byte window at addr + last (-1:
// none). An operand under 256 bytes is read in 128-byte windows at addr + half[i] (-1: none) whose
// two core matrices are the same bytes (leading byte offset 0), so its columns count each twice.
struct PcWgOp { unsigned addr; int chunks; int last; int half[2]; };
struct PcWg {
  volatile int req, done;      // requests posted by the agent / finished by the warpgroup
  volatile int op, n;          // 1: mma (ops), 2: wait_group n, 3: wait_group 0 and leave
  volatile int arrived;        // helper threads through the current request
  volatile int closing;        // the agent left: the request that sends the warpgroup away is posted
  int nops; PcWgOp ops[4];
  volatile int issued, retired;          // groups
  volatile int expect[PC_WG_SLOTS][8];   // per group slot: the column sums the buffer held at issue
  volatile int bad[PC_WG_SLOTS];         // per group slot: accumulators that differ from them
};
__device__ __forceinline__ u64 pc_wg_desc(unsigned addr, unsigned lbo) {
  // start address >> 4; leading byte offset (the K-next core matrix); stride 256; no swizzle
  return (u64)((addr & 0x3FFFF) >> 4) | ((u64)(lbo >> 4) << 16) | ((u64)(256 >> 4) << 32);
}
// The column sums of one 256-byte chunk as the descriptor lays it out: row n of core matrix 0 is
// bytes 16n..16n+15, of core matrix 1 bytes 128+16n..128+16n+15.
__device__ void pc_wg_sums(const unsigned char* chunk, int* sums) {
  const volatile unsigned char* b = chunk;
  for (int n = 0; n < 8; n++) {
    int v = 0;
    for (int k = 0; k < 16; k++) v += b[16 * n + k] + b[128 + 16 * n + k];
    sums[n] += v;
  }
}
// The column sums of a 128-byte window read with leading byte offset 0: each row twice.
__device__ void pc_wg_half_sums(const unsigned char* half, int* sums) {
  const volatile unsigned char* b = half;
  for (int n = 0; n < 8; n++) {
    int v = 0;
    for (int k = 0; k < 16; k++) v += b[16 * n + k];
    sums[n] += 2 * v;
  }
}
__device__ bool pc_wg_post(PcThread& th, PcWg* w, int op, int n) {
  w->op = op; w->n = n;
  __threadfence_block();
  int r = w->req + 1;
  w->req = r;
  u64 start = pc_now();
  while (w->done != r) {
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  __threadfence_block();
  return true;
}
// wgmma_async(bufs): one group of the agent's, issued by its warpgroup.
__device__ bool pc_wg_mma(PcThread& th, PcWg* w, int nops, const int* const* bufs, const int* bytes, i64 expect) {
  if (w->issued - w->retired >= PC_WG_SLOTS) { th.status = PC_UNSUPPORTED; return false; }
  int slot = w->issued % PC_WG_SLOTS;
  int sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int o = 0; o < nops; o++) {
    const unsigned char* p = (const unsigned char*)bufs[o];
    int full = bytes[o] / 256;
    int rest = bytes[o] % 256;
    if (full + (rest ? 1 : 0) > PC_WG_MAX_CHUNKS || bytes[o] < 128) { th.status = PC_UNSUPPORTED; return false; }
    PcWgOp& op = w->ops[o];
    op.addr = pc_smem(p); op.chunks = full; op.last = full > 0 && rest ? bytes[o] - 256 : -1;
    op.half[0] = full == 0 ? 0 : -1; op.half[1] = full == 0 && bytes[o] > 128 ? bytes[o] - 128 : -1;
    for (int c = 0; c < full; c++) pc_wg_sums(p + 256 * c, sums);
    if (op.last >= 0) pc_wg_sums(p + op.last, sums);
    for (int h = 0; h < 2; h++) if (op.half[h] >= 0) pc_wg_half_sums(p + op.half[h], sums);
  }
  if (expect >= 0) {  // `expect = V`: every word of every operand holds V when the MMA is issued
    bool stale = false;
    for (int o = 0; o < nops; o++) {
      const volatile int* b = bufs[o];
      for (int i = 0; i < bytes[o] / 4; i++) stale |= (i64)b[i] != expect;
    }
    if (stale) th.nbad++;
  }
  for (int n = 0; n < 8; n++) w->expect[slot][n] = sums[n];
  w->bad[slot] = 0;
  w->nops = nops;
  return pc_wg_post(th, w, 1, 0);
}
// wgmma_wait(N): the groups older than the N newest are retired; each that read other bytes
// than the buffer held at issue counts as a wrong version.
__device__ bool pc_wg_wait(PcThread& th, PcWg* w, i64 n) {
  if (n < 0) { th.status = PC_ASSERT; return false; }
  int from = w->retired;
  // wait_group takes N as an immediate, 0..7; a larger N waits as 7 (longer, never shorter)
  if (!pc_wg_post(th, w, 2, n > 7 ? 7 : (int)n)) return false;
  for (int g = from; g < w->retired; g++) if (w->bad[g % PC_WG_SLOTS]) th.nbad++;
  return true;
}
// The agent is done: its warpgroup waits for every group and leaves (once, whichever lane asks).
__device__ void pc_wg_leave(PcThread& th, PcWg* w) {
  if (atomicExch((int*)&w->closing, 1) != 0) return;
  int from = w->retired;
  if (pc_wg_post(th, w, 3, 0)) {
    for (int g = from; g < w->retired; g++) if (w->bad[g % PC_WG_SLOTS]) th.nbad++;
  }
}
// One group's wgmma instructions into the accumulators of its slot. The slot is chosen by a
// `switch` at the call, so each slot's accumulators are a register array of their own (wgmma
// writes registers; an indexed array would go to local memory). No macro continuation lines: the
// generated CUDA must stay free of them (fuzz::assert_inert).
__device__ __forceinline__ void pc_wg_issue(PcWg* w, int nops, u64 da, int (&d)[4]) {
  bool first = true;  // the group's first wgmma overwrites its accumulators (scale-d false)
  for (int o = 0; o < nops; o++) {
    const PcWgOp& wo = w->ops[o];
    for (int c = 0; c < wo.chunks + 3; c++) {
      unsigned a, lbo = 128;
      if (c < wo.chunks) a = wo.addr + 256u * c;
      else if (c == wo.chunks) { if (wo.last < 0) continue; a = wo.addr + (unsigned)wo.last; }
      else { int h = wo.half[c - wo.chunks - 1]; if (h < 0) continue; a = wo.addr + (unsigned)h; lbo = 0; }
      u64 db = pc_wg_desc(a, lbo);
      int acc = first ? 0 : 1; first = false;
      asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %6, 0;\n\t"
                   "wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.u8 {%0, %1, %2, %3}, %4, %5, p;\n\t}"
                   : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]) : "l"(da), "l"(db), "r"(acc) : "memory");
    }
  }
}
// Whether a retired group's column sums differ from the sums its operands held at issue.
__device__ __forceinline__ bool pc_wg_differs(const PcWg* w, int slot, int c0, int (&d)[4]) {
  asm volatile("" : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]) :: "memory");
  return d[0] != w->expect[slot][c0] || d[1] != w->expect[slot][c0 + 1] || d[2] != w->expect[slot][c0] || d[3] != w->expect[slot][c0 + 1];
}
#define PC_WG_ISSUE(S) case S: pc_wg_issue(w, nops, da, d##S); break;
#define PC_WG_CHECK(S) case S: bad = pc_wg_differs(w, S, c0, d##S); break;
#define PC_WG_WAIT(k) case k: asm volatile("wgmma.wait_group.sync.aligned " #k ";" ::: "memory"); break;
// The helper warpgroup's loop: every one of its 128 threads runs it, so each wgmma instruction is
// executed by the whole warpgroup together. `ones` is the A operand: 64 x 32 bytes of 1.
__device__ void pc_wg_serve(PcWg* w, const unsigned char* ones, u64 timeout_ns) {
  int d0[4] = {0, 0, 0, 0}, d1[4] = {0, 0, 0, 0}, d2[4] = {0, 0, 0, 0}, d3[4] = {0, 0, 0, 0};
  int d4[4] = {0, 0, 0, 0}, d5[4] = {0, 0, 0, 0}, d6[4] = {0, 0, 0, 0}, d7[4] = {0, 0, 0, 0};
  const u64 da = pc_wg_desc(pc_smem(ones), 128);
  const int lane = threadIdx.x & 31;
  const int c0 = (lane & 3) * 2;  // my accumulator columns: c0 and c0 + 1 (rows lane/4 and +8)
  int seen = 0;
  u64 start = pc_now();
  for (;;) {
    int r;
    while ((r = w->req) == seen) {
      // The agent always sends the warpgroup away when it ends (every wait of the agent is
      // bounded); this bound only keeps a kernel ended some other way from spinning forever.
      if (pc_now() - start > 256 * timeout_ns) return;
    }
    __threadfence_block();
    __syncwarp();
    seen = r;
    int op = w->op, n = w->n, nops = w->nops;
    if (op == 1) {
      int slot = w->issued % PC_WG_SLOTS;
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
      switch (slot) { PC_WG_ISSUE(0) PC_WG_ISSUE(1) PC_WG_ISSUE(2) PC_WG_ISSUE(3) PC_WG_ISSUE(4) PC_WG_ISSUE(5) PC_WG_ISSUE(6) PC_WG_ISSUE(7) }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    } else {
      if (op == 3) n = 0;
      switch (n) { PC_WG_WAIT(0) PC_WG_WAIT(1) PC_WG_WAIT(2) PC_WG_WAIT(3) PC_WG_WAIT(4) PC_WG_WAIT(5) PC_WG_WAIT(6) PC_WG_WAIT(7) }
      int upto = w->issued - n;
      for (int g = w->retired; g < upto; g++) {
        bool bad = false;
        switch (g % PC_WG_SLOTS) { PC_WG_CHECK(0) PC_WG_CHECK(1) PC_WG_CHECK(2) PC_WG_CHECK(3) PC_WG_CHECK(4) PC_WG_CHECK(5) PC_WG_CHECK(6) PC_WG_CHECK(7) }
        if (bad) atomicAdd((int*)&w->bad[g % PC_WG_SLOTS], 1);
      }
    }
    __syncwarp();
    if (atomicAdd((int*)&w->arrived, 1) == 127) {
      // the last helper thread through: the request's effect on the bookkeeping, then done
      if (op == 1) w->issued = w->issued + 1;
      else if (w->issued - n > w->retired) w->retired = w->issued - n;
      w->arrived = 0;
      __threadfence_block();
      w->done = r;
    }
    if (op == 3) return;
    start = pc_now();
  }
}
// ---- warpgroup_mma / warpgroup_wait: one helper warpgroup per warpgroup of the spec ----------
// The agents of one warpgroup of the spec (its four warps, or their lanes) share one sequence of
// wgmma groups, as the warps of a hardware warpgroup do. Group k is issued (wgmma.mma_async by
// the helpers, `pc_wg_mma`) once every agent has issued its k-th warpgroup_mma, by the agent whose
// issue completes it, and in group order; warpgroup_wait(N) of an agent waits (bounded) until
// every agent has issued the groups older than its own N newest, then has the helpers retire them
// with wgmma.wait_group, unless another agent's wait already did. One agent posts at a time.
struct PcWgScope {
  volatile int lock;              // an agent posting to the helpers
  volatile int left;              // agents that exited
  int members;                    // agents of the warpgroup
  volatile int mine[64];          // per agent of the warpgroup: the groups it issued
  volatile int cnt[PC_WG_SLOTS];  // per group slot: the agents that issued that group so far
};
static_assert(sizeof(PcWgScope) <= 320, "WGMMA_SCOPE_BYTES in codegen/mod.rs bounds it");
__device__ bool pc_wgs_lock(PcThread& th, PcWgScope* g) {
  u64 start = pc_now();
  while (atomicCAS((int*)&g->lock, 0, 1) != 0) {
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  __threadfence_block();
  return true;
}
__device__ void pc_wgs_unlock(PcWgScope* g) { __threadfence_block(); atomicExch((int*)&g->lock, 0); }
// warpgroup_mma(bufs) by agent `m` of the warpgroup.
__device__ bool pc_wgs_mma(PcThread& th, PcWg* w, PcWgScope* g, int m, int nops, const int* const* bufs, const int* bytes, i64 expect) {
  int k = g->mine[m];
  if (k - w->retired >= PC_WG_SLOTS) { th.status = PC_UNSUPPORTED; return false; }  // more groups in flight than slots
  g->mine[m] = k + 1;
  __threadfence_block();
  if (atomicAdd((int*)&g->cnt[k % PC_WG_SLOTS], 1) != g->members - 1) {
    if (expect >= 0) {  // `expect = V`, checked at each agent's issue
      bool stale = false;
      for (int o = 0; o < nops; o++) {
        const volatile int* b = bufs[o];
        for (int i = 0; i < bytes[o] / 4; i++) stale |= (i64)b[i] != expect;
      }
      if (stale) th.nbad++;
    }
    return true;  // the others have not all issued group k yet: the last of them posts it
  }
  g->cnt[k % PC_WG_SLOTS] = 0;
  // The last agent to issue group k posts it, once the helpers issued every earlier group.
  u64 start = pc_now();
  for (;;) {
    if (!pc_wgs_lock(th, g)) return false;
    if (w->issued == k) break;
    pc_wgs_unlock(g);
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  bool ok = pc_wg_mma(th, w, nops, bufs, bytes, expect);
  pc_wgs_unlock(g);
  return ok;
}
// warpgroup_wait(N) by agent `m`: the groups older than its N newest are complete once every
// agent issued them (the MMA runs only then: a missing issue keeps it waiting, bounded).
__device__ bool pc_wgs_wait(PcThread& th, PcWg* w, PcWgScope* g, int m, i64 n) {
  if (n < 0) { th.status = PC_ASSERT; return false; }
  i64 target = (i64)g->mine[m] - n;
  if (target <= 0) return true;
  u64 start = pc_now();
  while ((i64)w->issued < target) {
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  bool ok = true;
  if ((i64)w->retired < target) {
    if (!pc_wgs_lock(th, g)) return false;
    if ((i64)w->retired < target) ok = pc_wg_wait(th, w, (i64)w->issued - target);
    pc_wgs_unlock(g);
  }
  __threadfence_block();  // the reads are over: what follows is ordered after them
  return ok;
}
// An agent of the warpgroup is done; the last one sends the helpers away.
__device__ void pc_wgs_leave(PcThread& th, PcWg* w, PcWgScope* g) {
  if (atomicAdd((int*)&g->left, 1) == g->members - 1) pc_wg_leave(th, w);
}
#endif
