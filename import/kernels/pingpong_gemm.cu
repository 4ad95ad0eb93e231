// A CUTLASS sm90 ping-pong GEMM mainloop: one producer warp fills a two-stage ring with bulk
// copies (expect_tx on `full`), two consumer warps (the two math warpgroups, one warp each
// here) take whole output tiles in turn: consumer g owns tile g, runs its K blocks through the
// ring, and the order between them (mainloop of one, then of the other; the epilogues the
// same) is kept by named barriers, CUTLASS's OrderedSequenceBarrier: bar.sync on your own id,
// bar.arrive on the other's.
// Planted-bug twin: -DPLANT_START_PARITY starts the consumers' wait on `full` with parity 1,
// the producer's start state, so the first wait passes before the copy has landed.
#include "mbarrier.cuh"

#define STAGES 2
#define K_BLOCKS 2
#define TILE_BYTES 128

extern "C" __global__ void __launch_bounds__(96) pingpong_gemm(const char *a, int *out) {
  __shared__ alignas(128) char ring[STAGES][TILE_BYTES];
  __shared__ alignas(128) int epi[2][32];
  __shared__ alignas(8) unsigned long long full[STAGES];
  __shared__ alignas(8) unsigned long long empty[STAGES];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 32);
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  if (warp == 0) {
    // two tiles of K_BLOCKS blocks each, one ring
    int phase = 1;
    for (int i = 0; i < 2 * K_BLOCKS; ++i) {
      const int s = i % STAGES;
      mbar_wait_parity(&empty[s], phase);
      if (elect_one()) {
        mbar_arrive_expect_tx(&full[s], TILE_BYTES);
        bulk_copy_g2s(ring[s], a + i * TILE_BYTES, TILE_BYTES, &full[s]);
      }
      if (s == STAGES - 1) phase ^= 1;
    }
  } else {
    const int g = warp - 1;  // math warpgroup 0 or 1, owning tile g
    int acc = 0;
    // the mainloop, in order: warpgroup 0 first
    if (g == 1) named_bar_sync(2, 64);
    for (int k = 0; k < K_BLOCKS; ++k) {
      const int i = g * K_BLOCKS + k;
      const int s = i % STAGES;
#ifdef PLANT_START_PARITY
      mbar_wait_parity(&full[s], ((i / STAGES) & 1) ^ 1);
#else
      mbar_wait_parity(&full[s], (i / STAGES) & 1);
#endif
      acc += ((volatile int *)ring[s])[threadIdx.x % 32];
      mbar_arrive(&empty[s]);
    }
    if (g == 0) named_bar_arrive(2, 64);
    // the epilogue, in the same order
    if (g == 1) named_bar_sync(3, 64);
    // one lane writes the warpgroup's partial sum, the warp reads it back
    if (elect_one()) epi[g][0] = acc;
    __syncwarp();
    out[threadIdx.x] = ((volatile int *)epi[g])[0];
    if (g == 0) named_bar_arrive(3, 64);
  }
}
