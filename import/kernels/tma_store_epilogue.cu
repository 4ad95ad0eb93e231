// A TMA-store epilogue behind a load ring: the producer announces each stage's bytes with
// mbarrier.expect_tx and arrives separately (PipelineTmaAsync's producer_expect_transaction
// then producer_commit), bulk-copying an A and a B tile onto one `full` barrier; the consumer
// warp reads both, releases the stage, and its elected lane writes the result into a
// double-buffered output tile, fences the async proxy, bulk-stores it in a group of its own,
// and before writing a buffer again waits until at most one store group is still reading
// (CUTLASS's tma_store_wait<1>).
// Planted-bug twin: -DPLANT_WRONG_TX announces only A's bytes.
#include "mbarrier.cuh"

#define STAGES 2
#define ITERS 4
#define A_BYTES 128
#define B_BYTES 64

extern "C" __global__ void __launch_bounds__(64) tma_store_epilogue(const char *a, const char *b, int *d) {
  __shared__ alignas(128) char a_tile[STAGES][A_BYTES];
  __shared__ alignas(128) char b_tile[STAGES][B_BYTES];
  __shared__ alignas(128) int out_tile[2][16];
  __shared__ alignas(8) unsigned long long full[STAGES];
  __shared__ alignas(8) unsigned long long empty[STAGES];
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], 1);
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  if (warp == 0) {
    if (elect_one()) {
      int phase = 1;
      for (int i = 0; i < ITERS; ++i) {
        const int s = i % STAGES;
        mbar_wait_parity(&empty[s], phase);
#ifdef PLANT_WRONG_TX
        mbar_expect_tx(&full[s], A_BYTES);
#else
        mbar_expect_tx(&full[s], A_BYTES + B_BYTES);
#endif
        bulk_copy_g2s(a_tile[s], a + i * A_BYTES, A_BYTES, &full[s]);
        bulk_copy_g2s(b_tile[s], b + i * B_BYTES, B_BYTES, &full[s]);
        mbar_arrive(&full[s]);
        if (s == STAGES - 1) phase ^= 1;
      }
    }
  } else {
    int phase = 0;
    for (int i = 0; i < ITERS; ++i) {
      const int s = i % STAGES;
      mbar_wait_parity(&full[s], phase);
      const int acc = ((volatile int *)a_tile[s])[threadIdx.x % 32] + ((volatile int *)b_tile[s])[threadIdx.x % 16];
      if (elect_one()) {
        mbar_arrive(&empty[s]);
        if (i >= 2) bulk_wait_group_read<1>();
        out_tile[i % 2][0] = acc;
        fence_proxy_async();
        bulk_store_group(d + i * 16, out_tile[i % 2], sizeof(out_tile[0]));
        bulk_commit_group();
      }
      if (s == STAGES - 1) phase ^= 1;
    }
    if (elect_one()) bulk_wait_group_read<0>();
  }
}
