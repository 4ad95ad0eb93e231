// TMA-style bulk copy global -> shared; completes `bytes` transactions on the barrier.
__device__ __forceinline__ void pc_bulk_copy(int* dst, const int* src, int bytes, u64* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(pc_smem(dst)), "l"(src), "r"(bytes), "r"(pc_smem(bar)) : "memory");
}
// st.async (generic proxy): 4, 8 or 16 bytes from registers into shared memory, complete_tx on
// `bar`; with rank >= 0 the buffer and barrier of that CTA of the cluster (the same offsets).
__device__ __forceinline__ void pc_st_async(int* dst, const int* src, int bytes, u64* bar, int rank) {
  unsigned d = pc_smem(dst), m = pc_smem(bar);
  if (rank >= 0) {
    asm volatile("mapa.shared::cluster.u32 %0, %0, %1;" : "+r"(d) : "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %0, %1;" : "+r"(m) : "r"(rank));
  }
  if (bytes == 16) {
    int4 v = *(const int4*)src;
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
                 :: "r"(d), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(m) : "memory");
  } else if (bytes == 8) {
    int2 v = *(const int2*)src;
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];"
                 :: "r"(d), "r"(v.x), "r"(v.y), "r"(m) : "memory");
  } else {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];"
                 :: "r"(d), "r"(*src), "r"(m) : "memory");
  }
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
