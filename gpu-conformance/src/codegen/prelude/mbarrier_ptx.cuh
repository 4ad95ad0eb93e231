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
