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
