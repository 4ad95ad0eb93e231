// An early-exit role (the CUDA guide's arrive_and_drop): a producer warp fills a two-stage
// ring; consumer warp 1 takes every round, consumer warp 2 only the first two and then
// leaves the `empty` barriers with mbarrier.arrive_drop, which counts as its arrival in the
// current phase and lowers the count the later phases wait for, so the producer is not left
// waiting for a warp that has gone. It leaves each barrier at the round it would next have
// arrived in (after waiting for that round's `full`), so the drop lands in that phase.
// Planted-bug twin: -DPLANT_EARLY_RELEASE leaves both barriers right after the last round it
// reads: a drop can land in a phase whose slot the other consumer is still reading.
#include "mbarrier.cuh"

#define STAGES 2
#define ITERS 6
#define SHORT_ITERS 2
#define SLOT_BYTES 128

extern "C" __global__ void __launch_bounds__(96) early_exit_drop(const char *src, int *out) {
  __shared__ alignas(128) char slot[STAGES][SLOT_BYTES];
  __shared__ alignas(8) unsigned long long full[STAGES];
  __shared__ alignas(8) unsigned long long empty[STAGES];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 64);
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  int acc = 0;
  if (warp == 0) {
    for (int i = 0; i < ITERS; ++i) {
      const int s = i % STAGES;
      if (i >= STAGES) mbar_wait_parity(&empty[s], ((i / STAGES) - 1) & 1);
      if (elect_one()) {
        mbar_arrive_expect_tx(&full[s], SLOT_BYTES);
        bulk_copy_g2s(slot[s], src + i * SLOT_BYTES, SLOT_BYTES, &full[s]);
      }
    }
  } else if (warp == 1) {
    for (int i = 0; i < ITERS; ++i) {
      const int s = i % STAGES;
      mbar_wait_parity(&full[s], (i / STAGES) & 1);
      acc += ((volatile int *)slot[s])[threadIdx.x % 32];
      mbar_arrive(&empty[s]);
    }
  } else {
#ifdef PLANT_EARLY_RELEASE
    for (int i = 0; i < SHORT_ITERS; ++i) {
      const int s = i % STAGES;
      mbar_wait_parity(&full[s], (i / STAGES) & 1);
      acc += ((volatile int *)slot[s])[threadIdx.x % 32];
      mbar_arrive(&empty[s]);
    }
    // leaves both barriers at once: the drops land in whatever phase is current
    for (int s = 0; s < STAGES; ++s) mbar_arrive_drop(&empty[s]);
#else
    for (int i = 0; i < SHORT_ITERS + STAGES; ++i) {
      const int s = i % STAGES;
      // the drop must land in the phase this warp would have arrived in: wait for the round
      mbar_wait_parity(&full[s], (i / STAGES) & 1);
      if (i < SHORT_ITERS) {
        acc += ((volatile int *)slot[s])[threadIdx.x % 32];
        mbar_arrive(&empty[s]);
      } else {
        mbar_arrive_drop(&empty[s]);
      }
    }
#endif
  }
  out[threadIdx.x] = acc;
}
