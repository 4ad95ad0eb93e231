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
// atomicAdd on a counter of shared memory, the own CTA's or a peer's (`addr` in the
// shared::cluster window): relaxed, at cluster scope, so that the adds of the CTA's own threads
// and of its peers are morally strong with each other (atomic with respect to one another).
__device__ __forceinline__ void pc_red_add_cluster(unsigned addr, int v) {
  asm volatile("red.relaxed.cluster.shared::cluster.add.u32 [%0], %1;" :: "r"(addr), "r"(v) : "memory");
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
// A bulk copy that lands in CTA `rank`'s buffer at the same offset, completing tx on its `bar`.
__device__ __forceinline__ void pc_bulk_copy_peer(int* dst, const int* src, int bytes, u64* bar, int rank) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(pc_mapa_smem(dst, rank)), "l"(src), "r"(bytes), "r"(pc_mapa_smem(bar, rank)) : "memory");
}
// A bulk copy from this CTA's shared memory (`src`) into CTA `rank`'s `dst`, completing tx on
// its `bar`; the async proxy reads `src` until the copy completes.
__device__ __forceinline__ void pc_bulk_copy_cta(int* dst, const int* src, int bytes, u64* bar, int rank) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(pc_mapa_smem(dst, rank)), "r"(pc_smem(src)), "r"(bytes), "r"(pc_mapa_smem(bar, rank)) : "memory");
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
// The wait outlasts an mbarrier wait, as the software syncthreads does: the model never times a
// thread out at the cluster barrier, since a peer's timeout exit may still complete its phase
// (`live` drops). So it gives up only after twice the wait bound with no thread of the cluster
// leaving; a plain bound let a waiter that blocked first time out before the exit that would
// release it (fuzz/findings/run-cpu-cluster-hang-then-lifetime, H100 2026-12-07: every thread
// hung in 32 of 32 replays, outside the model).
__device__ bool pc_cluster_wait(PcThread& th, PcClusterBar* b, i64& slot) {
  if (slot == 0) { th.status = PC_ASSERT; return false; }  // a wait with no arrival: undefined
  volatile PcClusterBar* v = b;
  u64 start = pc_now();
  int live = v->live;
  while ((i64)v->gen == slot - 1) {
    int now_live = v->live;
    if (now_live != live) { live = now_live; start = pc_now(); }  // an exit: the bound starts afresh
    if (pc_now() - start > 2 * th.timeout_ns) { th.status = PC_HUNG; return false; }
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
