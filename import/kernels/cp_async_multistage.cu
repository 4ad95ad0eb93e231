// An sm_80 multistage pipeline (the CUDA guide's cuda::pipeline / memcpy_async with a
// barrier, spelled in PTX): every thread copies its 16 bytes of the stage with cp.async and
// arrives on the stage's `full` barrier with cp.async.mbarrier.arrive.noinc (the arrival
// fires when the thread's copies have landed; .noinc: the init count already counts it).
// The next stages are prefetched while the current one is consumed; a thread reads the words
// another thread copied, so a stage is reused only when `empty` says every thread is done.
// A block of 2 threads: every thread copies its own words, so no two run the same statements
// and each is a role of its own (a larger block is the same protocol with more states).
// Planted-bug twin: -DPLANT_WRONG_COUNT initialises `full` for half the threads' arrivals, so the
// stage is taken as landed before the other half's copies are.
#include "mbarrier.cuh"

#ifndef STAGES
#define STAGES 2
#endif
#ifndef ITERS
#define ITERS 3
#endif
#define THREADS 2
#define CHUNK 16

__device__ __forceinline__ void load_stage(char *stage, const char *src, unsigned long long *full) {
  cp_async_16(stage + threadIdx.x * CHUNK, src + threadIdx.x * CHUNK);
  cp_async_mbar_arrive_noinc(full);
}

extern "C" __global__ void __launch_bounds__(THREADS) cp_async_multistage(const char *src, int *out) {
  __shared__ alignas(128) char stage[STAGES][THREADS * CHUNK];
  __shared__ alignas(8) unsigned long long full[STAGES];
  __shared__ alignas(8) unsigned long long empty[STAGES];
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
#ifdef PLANT_WRONG_COUNT
      mbar_init(&full[s], THREADS / 2);
#else
      mbar_init(&full[s], THREADS);
#endif
      mbar_init(&empty[s], THREADS);
    }
  }
  __syncthreads();
  // the prologue: the first STAGES stages in flight
  for (int s = 0; s < STAGES; ++s) load_stage(stage[s], src + s * THREADS * CHUNK, &full[s]);
  int acc = 0;
  for (int i = 0; i < ITERS; ++i) {
    const int s = i % STAGES;
    const int phase = (i / STAGES) & 1;
    mbar_wait_parity(&full[s], phase);
    // the first word another thread copied
    acc += ((volatile int *)stage[s])[((threadIdx.x + THREADS / 2) % THREADS) * (CHUNK / 4)];
    mbar_arrive(&empty[s]);
    if (i + STAGES < ITERS) {
      mbar_wait_parity(&empty[s], phase);
      load_stage(stage[s], src + (i + STAGES) * THREADS * CHUNK, &full[s]);
    }
  }
  out[threadIdx.x] = acc;
}
