// The CUDA guide's double buffer, with raw mbarriers: warp 0 fills two slots with bulk copies
// (one elected lane), warps 1 and 2 consume them. Consumers release a slot with a split
// arrive/wait on `empty` (the token the arrive returns is what they wait on, through a
// test_wait loop), as cuda::barrier's arrive()/wait(token) do.
// Planted-bug twin: -DPLANT_WRONG_COUNT initialises `empty` for one warp instead of two.
#include "mbarrier.cuh"

#define ITERS 4
#define BYTES 128

extern "C" __global__ void __launch_bounds__(96) double_buffer(const char *src, int *out) {
  __shared__ alignas(128) char buf[2][BYTES];
  __shared__ alignas(8) unsigned long long full[2];
  __shared__ alignas(8) unsigned long long empty[2];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      mbar_init(&full[s], 1);
#ifdef PLANT_WRONG_COUNT
      mbar_init(&empty[s], 32);
#else
      mbar_init(&empty[s], 64);
#endif
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  if (warp == 0) {
    for (int i = 0; i < ITERS; ++i) {
      const int s = i & 1;
      if (i >= 2) mbar_wait_parity(&empty[s], ((i / 2) - 1) & 1);
      if (elect_one()) {
        mbar_arrive_expect_tx(&full[s], BYTES);
        bulk_copy_g2s(buf[s], src + i * BYTES, BYTES, &full[s]);
      }
    }
  } else {
    int acc = 0;
    for (int i = 0; i < ITERS; ++i) {
      const int s = i & 1;
      mbar_wait_parity(&full[s], (i / 2) & 1);
      acc += ((volatile int *)buf[s])[threadIdx.x % 32];
      unsigned long long token = mbar_arrive(&empty[s]);
      if (i + 2 >= ITERS) mbar_wait(&empty[s], token);  // the last round: wait for the release
    }
    out[threadIdx.x] = acc;
  }
}
