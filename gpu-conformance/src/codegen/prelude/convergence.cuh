// ---- Warp convergence as the model defines it (warp-batched `commit`) --------------------------
// Lanes of one warp and role are converged while their branch paths since the last syncwarp have
// not parted: one path is a prefix of the other. A path is the list of `pc << 1 | taken` of every
// Branch executed (pc: the IR instruction index, as in the model). Each lane publishes its path in
// shared memory as prefix hashes, hist[k] = FNV-1a of its first k decisions (the model's path_sig),
// so "one is a prefix of the other" is one comparison: hist_a[n] == hist_b[n], n = min of lengths.
#define PC_PATH_CAP 32
struct PcLane {
  volatile int gen;                    // syncwarps passed
  volatile int len;                    // branch decisions since the last syncwarp
  volatile int at;                     // the commit it stands at: pc << 16 | commit_seq; -1: none
  volatile int done;                   // finished or stopped: holds nobody back
  volatile u64 hist[PC_PATH_CAP + 1];  // prefix hashes; hist[0] = the FNV offset basis
};
__device__ void pc_lane_init(PcLane* l) {
  l->gen = 0; l->len = 0; l->at = -1; l->done = 0; l->hist[0] = 0xcbf29ce484222325ull;
}
// A Branch ran: append its decision. Past PC_PATH_CAP decisions without a syncwarp the kernel can
// no longer follow convergence: the thread stops with status "unsupported".
__device__ bool pc_path_push(PcThread& th, PcLane* me, int pc, bool taken) {
  int n = me->len;
  if (n >= PC_PATH_CAP) { th.status = PC_UNSUPPORTED; return false; }
  me->hist[n + 1] = (me->hist[n] ^ (u64)((pc << 1) | (taken ? 1 : 0))) * 0x100000001b3ull;
  __threadfence_block();  // the hash is published before the length that covers it
  me->len = n + 1;
  return true;
}
// Released from syncwarp: the path and the commit count start afresh (the model clears them there).
__device__ void pc_path_reset(PcThread& th, PcLane* me) {
  me->len = 0; th.commit_seq = 0;
  __threadfence_block();
  me->gen = ++th.gen;
}
// commit, part 1 (model: commit_ready). Stand at this commit (pc, commit_seq) and wait, bounded,
// until every unfinished lane of my warp and role whose path is compatible with mine stands at the
// same commit with the same path. A converged lane still behind on the path holds me back; a lane
// whose path parted from mine is another group and commits on its own. Returns the group (a lane
// mask, me included), or 0 when the wait timed out (status hung). While a lane stands here its path
// cannot change, so the group every member computes is the same.
__device__ unsigned pc_commit_group(PcThread& th, PcLane* warp_lanes, int pc) {
  PcLane* me = &warp_lanes[th.lane];
  const int key = (pc << 16) | th.commit_seq;
  const int n = me->len;
  me->at = key;
  __threadfence_block();
  u64 start = pc_now();
  for (;;) {
    unsigned group = 0;
    bool ready = true;
    for (int l = 0; l < 32; l++) {
      if (!((th.role_mask >> l) & 1u)) continue;
      PcLane* o = &warp_lanes[l];
      if (o->done) continue;                               // finished: takes no part
      if (o->gen != th.gen) { ready = false; continue; }   // still leaving the last syncwarp: converged, behind
      int at = o->at;                                      // read first: while it is `key`, the path is frozen
      __threadfence_block();
      int on = o->len;
      int m = on < n ? on : n;
      if (o->hist[m] != me->hist[m]) continue;             // paths parted: diverged, commits separately
      if (at == key && on == n) group |= 1u << l;          // here, on my path
      else ready = false;                                  // converged but not here yet
    }
    if (ready) return group;
    if (pc_now() - start > th.timeout_ns) { me->at = -1; th.status = PC_HUNG; return 0u; }
  }
}
// commit, part 3: leave together. One turn for the whole group in replay: the leader ends it
// (after the arrival); a mate only drops it (bumping the counter itself could move it backwards
// after later steps had run).
__device__ void pc_commit_leave(PcThread& th, PcLane* me, bool leader, volatile int* turn) {
  me->at = -1;
  th.commit_seq++;
  if (leader) pc_turn_end(th, turn); else th.turn = -1;
}
