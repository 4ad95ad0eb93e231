// Free-running (stress) mode: a pseudo-random pause before each step.
__device__ __forceinline__ void pc_delay(PcThread& th) {
  th.rng ^= th.rng << 13; th.rng ^= th.rng >> 17; th.rng ^= th.rng << 5;
  if (th.max_delay == 0 || (th.rng & 3) == 0) return;
  long long until = clock64() + (long long)(th.rng % th.max_delay);
  while (clock64() < until) { }
}

// Replay turnstile: the k-th visible step of thread t runs when the block's turn counter equals
// sched[off(t) + k]; afterwards it bumps the counter. Past the end of the trace, threads run free.
// sched layout: [mode, total_turns, off[NT], cnt[NT], turns...]
__device__ bool pc_turn_begin(PcThread& th, volatile int* turn, int nt) {
  if (th.sched[0] == 0 || th.lost) { pc_delay(th); th.turn = -1; return true; }
  int k = th.step++;
  int off = th.sched[2 + th.t], cnt = th.sched[2 + nt + th.t];
  int want = k < cnt ? th.sched[off + k] : th.sched[1];
  u64 start = pc_now();
  while (*turn < want) {
    // The hardware left the trace (a copy landed earlier than the trace has it, and a scheduled
    // step now blocks): the turn never comes. Go on as a free-running execution; it is judged
    // against every outcome the model allows, and the block no longer counts as forced. The turn
    // is given up after a quarter of a wait's bound: a thread blocked at a wait for a step of a
    // thread held here must not time out before the held thread runs free (it would record a
    // hang that no execution has, with the phase it waited for completed right after).
    if (pc_now() - start > th.timeout_ns / 4) { th.lost = 1; th.turn = -1; return true; }
  }
  if (th.cluster > 1) pc_fence_cluster();  // the earlier steps, in any CTA, happen before mine
  th.turn = k < cnt ? want : -1;
  return true;
}
__device__ __forceinline__ void pc_turn_end(PcThread& th, volatile int* turn) {
  if (th.turn >= 0) { if (th.cluster > 1) pc_fence_cluster(); else __threadfence_block(); *turn = th.turn + 1; th.turn = -1; }
}
