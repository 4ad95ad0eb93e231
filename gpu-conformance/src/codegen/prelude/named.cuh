// Named barriers (bar.sync / bar.arrive) in software, so that they are bounded too. The hardware
// counts whole warps: a warp arrives once every unfinished lane executed the instruction (they meet
// at the warp's software sync), adding the warp size; bar.sync then waits for the barrier's phase
// to complete. One lane per meeting (the first to claim the warp sync's generation) arrives for the
// warp and publishes the phase it arrived on (-1: thread counts mixed on one barrier).
struct PcNamed { int arrived; int count; int gen; int lock; };
__device__ bool pc_named(PcThread& th, PcNamed* nb, PcSync* warp, int* lead, volatile int* at_gen, i64 id, i64 count, int ws, bool sync) {
  if (id < 0 || id >= 16 || count <= 0 || count % ws != 0) { th.status = PC_ASSERT; return false; }
  __threadfence_block();  // my writes before the arrival
  int g = *(volatile int*)&warp->gen;
  if (!pc_sync(th, warp)) return false;
  if (atomicMax(lead, g + 1) < g + 1) {
    u64 start = pc_now();
    while (atomicCAS(&nb->lock, 0, 1) != 0) {
      if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; *at_gen = -2; break; }
    }
    if (th.status == PC_RUNNING) {
      __threadfence_block();
      volatile PcNamed* v = nb;
      if (v->count != 0 && v->count != (int)count) {
        *at_gen = -1;
      } else {
        v->count = (int)count;
        *at_gen = v->gen;
        v->arrived += ws;
        if (v->arrived >= (int)count) { v->arrived = 0; v->count = 0; __threadfence_block(); atomicAdd(&nb->gen, 1); }
      }
      __threadfence_block();
      atomicExch(&nb->lock, 0);
    }
  }
  if (!pc_sync(th, warp)) return false;  // every lane sees what its warp's arrival was
  int mine = *at_gen;
  if (mine == -1) { th.status = PC_ASSERT; return false; }  // mixed thread counts: undefined
  if (mine == -2) { th.status = PC_HUNG; return false; }
  if (!sync) return true;
  // The wait for the phase outlasts an mbarrier wait, as the software syncthreads does: the model
  // never times a thread out at a named barrier, and a peer's timeout exit may still complete a
  // lagging warp's arrival (its warp sync counts exited lanes) and with it this phase.
  u64 start = pc_now();
  while (*(volatile int*)&nb->gen == mine) {
    if (pc_now() - start > 2 * th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  __threadfence_block();
  return true;
}
