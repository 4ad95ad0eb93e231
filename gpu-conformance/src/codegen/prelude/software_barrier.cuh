// Execution barriers in software so that they are bounded too. `live` counts threads not exited;
// exited threads count as arrived (as in the model and on hardware: PTX `exit` releases a barrier
// that only the exiting threads held up). A wait that times out makes its thread exit, and that
// exit may release a barrier (the model's timeout rule), so an execution barrier outlasts a wait:
// it gives up only after twice the wait bound with no thread of the barrier exiting.
struct PcSync { int arrived; int gen; int live; int lock; };
__device__ bool pc_sync_within(PcThread& th, PcSync* b, u64 bound) {
  int g = *(volatile int*)&b->gen;
  atomicAdd(&b->arrived, 1);
  u64 start = pc_now();
  int live = *(volatile int*)&b->live;
  while (*(volatile int*)&b->gen == g) {
    int now_live = *(volatile int*)&b->live;
    if (now_live != live) { live = now_live; start = pc_now(); }  // an exit: the bound starts afresh
    if (*(volatile int*)&b->arrived >= now_live && atomicCAS(&b->lock, 0, 1) == 0) {
      if (*(volatile int*)&b->gen == g) { atomicExch(&b->arrived, 0); __threadfence_block(); atomicAdd(&b->gen, 1); }
      atomicExch(&b->lock, 0);
    }
    if (pc_now() - start > bound) { th.status = PC_HUNG; return false; }
  }
  return true;
}
__device__ __forceinline__ bool pc_sync(PcThread& th, PcSync* b) { return pc_sync_within(th, b, 2 * th.timeout_ns); }
__device__ __forceinline__ void pc_leave(PcSync* b) { atomicSub(&b->live, 1); }
// syncwarp(mask) in software, bounded: every lane counts the masked syncs it passed; a lane waits
// until each lane of the mask (hardware lane l of my warp = model thread first + l) has passed as
// many, or has exited. `done[t]` marks exited threads.
__device__ bool pc_sync_mask(PcThread& th, volatile int* count, volatile int* done, int first, int n, unsigned mask) {
  int mine = ++th.wsyncs;
  __threadfence_block();
  count[th.t] = mine;
  u64 start = pc_now();
  for (int l = 0; l < n; l++) {
    if (!((mask >> l) & 1u)) continue;
    while (count[first + l] < mine && !done[first + l]) {
      if (pc_now() - start > 2 * th.timeout_ns) { th.status = PC_HUNG; return false; }  // outlasts a wait, as pc_sync
    }
  }
  return true;
}
