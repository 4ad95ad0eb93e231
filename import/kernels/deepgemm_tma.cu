// A DeepGEMM-style TMA loop: tensor-map copies of A and B tiles (cp.async.bulk.tensor.2d)
// into a K-stage ring, the producer starting on the empty barriers with parity 1 (CUTLASS's
// producer start state: the phase "before" the first has completed), one math warp that
// waits on full, reads the tiles and releases the stage; the epilogue stores the result tile
// with a bulk store after a proxy fence.
// Planted-bug twins: -DPLANT_NO_INIT_FENCE drops fence.mbarrier_init;
// -DPLANT_START_PARITY starts the producer on parity 0.
#include "mbarrier.cuh"

#define STAGES 2
#define K_ITERS 4
#define A_BYTES 256
#define B_BYTES 128

struct alignas(64) TmaDesc {
  unsigned long long opaque[16];
};

__device__ __forceinline__ void tma_load_2d(void *dst, const TmaDesc *map, int c0, int c1, unsigned long long *bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      ::"r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}
__device__ __forceinline__ void bulk_store_s2g(void *gdst, const void *ssrc, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gdst), "r"(smem_addr(ssrc)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_read0() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(64)
    deepgemm_tma(const __grid_constant__ TmaDesc tmap_a, const __grid_constant__ TmaDesc tmap_b, int *d) {
  __shared__ alignas(128) char a_tile[STAGES][A_BYTES];
  __shared__ alignas(128) char b_tile[STAGES][B_BYTES];
  __shared__ alignas(128) int d_tile[32];
  __shared__ alignas(8) unsigned long long full[STAGES];
  __shared__ alignas(8) unsigned long long empty[STAGES];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 1);
    }
#ifndef PLANT_NO_INIT_FENCE
    fence_mbarrier_init();
#endif
  }
  __syncthreads();
  if (warp == 0) {
    if (elect_one()) {
#ifdef PLANT_START_PARITY
      int phase = 0;
#else
      int phase = 1;
#endif
      for (int k = 0; k < K_ITERS; ++k) {
        const int s = k % STAGES;
        mbar_wait_parity(&empty[s], phase);
        mbar_arrive_expect_tx(&full[s], A_BYTES + B_BYTES);
        tma_load_2d(a_tile[s], &tmap_a, k * 64, blockIdx.x * 16, &full[s]);
        tma_load_2d(b_tile[s], &tmap_b, k * 64, blockIdx.y * 8, &full[s]);
        if (s == STAGES - 1) phase ^= 1;
      }
    }
  } else {
    int phase = 0, acc = 0;
    for (int k = 0; k < K_ITERS; ++k) {
      const int s = k % STAGES;
      mbar_wait_parity(&full[s], phase);
      acc += ((volatile int *)a_tile[s])[threadIdx.x % 32] * ((volatile int *)b_tile[s])[threadIdx.x % 32];
      if (elect_one()) mbar_arrive(&empty[s]);
      if (s == STAGES - 1) phase ^= 1;
    }
    if (elect_one()) {
      d_tile[0] = acc;
      fence_proxy_async();
      bulk_store_s2g(d, d_tile, sizeof(d_tile));
      bulk_wait_read0();
    }
  }
}
