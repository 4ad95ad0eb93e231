typedef long long i64;
typedef unsigned long long u64;

// ---- Results and the bounded, recorded execution of one model thread -------------------------
#define PC_CAP 32
#define PC_HEADER 6
#define PC_THREAD_WORDS (PC_HEADER + 3 * PC_CAP)
enum { PC_RUNNING = 0, PC_FINISHED = 1, PC_HUNG = 2, PC_ASSERT = 3, PC_UNSUPPORTED = 4, PC_OVERFLOW = 6 };

struct PcThread {
  int* rec;               // this thread's record in global memory
  int* completions;       // this block's completion-function counters (one per barrier)
  const int* src;         // copy source: row v holds version v in every word
  int src_words;
  const int* sched;       // replay schedule (sched[0] == 0: free running)
  u64 timeout_ns;         // bound of every wait
  unsigned rng;           // per-thread pseudo-random delays (stress)
  unsigned max_delay;     // clock cycles
  int t, tid, gtid, lane, warp;
  int nreads, ntry, ntok, nbad;
  int step;               // visible steps executed (replay)
  int turn;               // turn number of the step in progress, -1 if none
  int lost;               // replay: the turnstile stalled (a scheduled step blocked); now running free
  int status;
  unsigned role_mask;     // lanes of my model warp with my role (commit: who can be converged with me)
  int commit_seq;         // commits executed since the last syncwarp
  int gen;                // syncwarps passed
  u64 t0;                 // start: bounds `while` loops (a spin that never ends)
  int wsyncs;             // syncwarp(mask) passed
  volatile int* turnp;    // the replay turnstile (a cluster's lives in CTA 0)
  int cluster;            // CTAs in the cluster (1: none)
  int cta;                // this CTA's rank in the cluster
};

// Cluster scope: ordering across the CTAs of a cluster (the turnstile, the cluster barrier).
__device__ __forceinline__ void pc_fence_cluster() { asm volatile("fence.acq_rel.cluster;" ::: "memory"); }

__device__ __forceinline__ u64 pc_now() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void pc_record(PcThread& th, int list, int& n, int v) {
  if (n < PC_CAP) th.rec[PC_HEADER + list * PC_CAP + n] = v; else th.status = PC_OVERFLOW;
  n++;
}
__device__ __forceinline__ void pc_record_read(PcThread& th, int v) { pc_record(th, 0, th.nreads, v); }
__device__ __forceinline__ void pc_record_try(PcThread& th, bool v) { pc_record(th, 1, th.ntry, v ? 1 : 0); }
__device__ __forceinline__ void pc_record_token(PcThread& th, int parity) { pc_record(th, 2, th.ntok, parity); }
