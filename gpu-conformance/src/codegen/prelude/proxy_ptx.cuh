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
