// An FA3-style warp-specialized pipeline: a producer warp loads K and V tiles for each step
// into a two-stage ring (separate full barriers for K and V, one empty barrier per stage),
// two consumer warps take turns on the "tensor cores" through named barriers (the ping-pong
// of FA3's two warpgroups: bar.sync on your own id, bar.arrive on the other's).
// Planted-bug twin: -DPLANT_EARLY_RELEASE releases the stage before reading V.
#include "mbarrier.cuh"

#define STAGES 2
#define STEPS 4
#define TILE 128

__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

extern "C" __global__ void __launch_bounds__(96) fa3_pipeline(const char *k, const char *v, int *out) {
  __shared__ alignas(128) char k_tile[STAGES][TILE];
  __shared__ alignas(128) char v_tile[STAGES][TILE];
  __shared__ alignas(8) unsigned long long k_full[STAGES];
  __shared__ alignas(8) unsigned long long v_full[STAGES];
  __shared__ alignas(8) unsigned long long empty[STAGES];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&k_full[s], 1);
      mbar_init(&v_full[s], 1);
      mbar_init(&empty[s], 64);
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  if (warp == 0) {
    int phase = 0;
    for (int i = 0; i < STEPS; ++i) {
      const int s = i % STAGES;
      mbar_wait_parity(&empty[s], phase ^ 1);
      if (elect_one()) {
        mbar_arrive_expect_tx(&k_full[s], TILE);
        bulk_copy_g2s(k_tile[s], k + i * TILE, TILE, &k_full[s]);
        mbar_arrive_expect_tx(&v_full[s], TILE);
        bulk_copy_g2s(v_tile[s], v + i * TILE, TILE, &v_full[s]);
      }
      if (s == STAGES - 1) phase ^= 1;
    }
  } else {
    const int g = warp - 1;            // consumer 0 or 1
    if (g == 1) named_arrive(1, 64);   // consumer 0 goes first
    int phase = 0, acc = 0;
    for (int i = 0; i < STEPS; ++i) {
      const int s = i % STAGES;
      mbar_wait_parity(&k_full[s], phase);
      named_sync(1 + g, 64);           // our turn on the tensor cores
      acc += ((volatile int *)k_tile[s])[threadIdx.x % 32];
      mbar_wait_parity(&v_full[s], phase);
#ifdef PLANT_EARLY_RELEASE
      mbar_arrive(&empty[s]);
      acc += ((volatile int *)v_tile[s])[threadIdx.x % 32];
#else
      acc += ((volatile int *)v_tile[s])[threadIdx.x % 32];
      mbar_arrive(&empty[s]);
#endif
      named_arrive(2 - g, 64);         // the other consumer's turn
      if (s == STAGES - 1) phase ^= 1;
    }
    out[threadIdx.x] = acc;
  }
}
