// A CUTLASS PipelineTmaAsync-style ring: one producer warp (an elected lane issues
// cp.async.bulk with expect_tx into STAGES slots), one consumer warp that waits on `full`,
// reads the slot and releases it on `empty`.
// Planted-bug twin: -DPLANT_WRONG_TX announces half the bytes the copy delivers.
#include "mbarrier.cuh"

#ifndef STAGES
#define STAGES 2
#endif
#ifndef ITERS
#define ITERS 4
#endif
#define SLOT_BYTES 256

extern "C" __global__ void __launch_bounds__(64) tma_ring(const char *src, int *out) {
  __shared__ alignas(128) char slot[STAGES][SLOT_BYTES];
  __shared__ alignas(8) unsigned long long full[STAGES];
  __shared__ alignas(8) unsigned long long empty[STAGES];
  int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 32);
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  if (warp == 0) {
    int phase = 0;
    for (int i = 0; i < ITERS; ++i) {
      int s = i % STAGES;
      if (i >= STAGES) mbar_wait_parity(&empty[s], phase ^ 1);
      if (elect_one()) {
#ifdef PLANT_WRONG_TX
        mbar_arrive_expect_tx(&full[s], SLOT_BYTES / 2);
#else
        mbar_arrive_expect_tx(&full[s], SLOT_BYTES);
#endif
        bulk_copy_g2s(slot[s], src + i * SLOT_BYTES, SLOT_BYTES, &full[s]);
      }
      if (s == STAGES - 1) phase ^= 1;
    }
  } else {
    int phase = 0;
    int acc = 0;
    for (int i = 0; i < ITERS; ++i) {
      int s = i % STAGES;
      mbar_wait_parity(&full[s], phase);
      acc += ((volatile int *)slot[s])[threadIdx.x % 32];
      mbar_arrive(&empty[s]);
      if (s == STAGES - 1) phase ^= 1;
    }
    out[threadIdx.x] = acc;
  }
}
