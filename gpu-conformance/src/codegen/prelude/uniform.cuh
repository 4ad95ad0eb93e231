#ifndef PC_UNIFORM_HELPERS
#define PC_UNIFORM_HELPERS
// ---- Warp-uniform roles: one model thread (agent) runs as its warp's hardware lanes -------------
// The lanes meet (a bounded software warp barrier) before and after every model step of the agent;
// lane 0 (the leader) takes the agent's turn in replay and writes its record. An elected block runs
// on the lane elect.sync picked while the others wait at its end; that lane then hands the record
// counters, the replay position and the status back to the others.
struct PcUAgent {
  PcSync meet;                 // the lanes' warp barrier (live: lanes not exited)
  volatile unsigned alive;     // lanes not exited: elect.sync's member mask
  volatile int elected;        // the lane the last elect() picked
  volatile int progress;       // steps the elected lane took in its block (the others' wait bound)
  volatile int blocks;         // elected blocks finished (or left by a stopped elected lane)
  volatile int stopped;        // the status of a lane that stopped (hung, assert, unsupported): the agent stops
  volatile int step, lost;     // the replay position, handed from the lane that took the turns
  volatile int cnt[5];         // nreads, ntry, ntok, nbad, status, handed back after an elected block
  volatile i64 tok;            // the leader's arrival token: the agent's (the first lane's, as modelled)
  volatile i64 val;            // the leader's try_wait answer, branch decision or var read: the agent's
  volatile int fin[32][6];     // per lane at exit: status, nreads, ntry, ntok, nbad, lost
  volatile u64 hash[32];       // per lane at exit: hash of its observations outside elected blocks
  volatile int nobs[32];
  int out;                     // lanes exited
};
static_assert(sizeof(PcUAgent) <= 1280, "UNIFORM_AGENT_BYTES in codegen.rs bounds it");
struct PcU {
  PcUAgent* a;                 // null: an ordinary model thread
  int lane, lanes;             // my lane in the agent's warp; the warp's lanes
  int in_block;                // I am the elected lane, inside an elected block
  int blocks;                  // elected blocks passed
  u64 hash; int nobs;          // my observations outside elected blocks
};
__device__ void pc_u_agent_init(PcUAgent* a, int lanes) {
  a->meet = PcSync{0, 0, lanes, 0};
  a->alive = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1u;
  a->elected = -1; a->progress = 0; a->blocks = 0; a->stopped = 0; a->step = 0; a->lost = 0; a->tok = 0; a->out = 0;
}
// An observation of one lane, into its hash (list 5: it stopped because another lane did).
__device__ __forceinline__ void pc_u_observe(PcU& u, int list, int v) {
  u.hash = (u.hash ^ (((u64)(unsigned)list << 32) | (u64)(unsigned)v)) * 0x100000001b3ull;
  u.nobs++;
}
// The lanes meet. Between two meets a lane waits at most one bounded wait and one turn of the
// turnstile, so four wait bounds is generous; a lane that exits is no longer waited for.
__device__ bool pc_u_meet(PcThread& th, PcU& u) {
  __threadfence_block();
  if (!pc_sync_within(th, &u.a->meet, 4 * th.timeout_ns)) return false;
  __threadfence_block();
  // A lane stopped (its wait timed out while mine returned, say): the agent stops where it did,
  // as the model's agent would; the lanes that only follow hash it, so they count as apart.
  int stop = u.a->stopped;
  if (stop != 0) { th.status = stop; pc_u_observe(u, 5, stop); return false; }
  return true;
}
// A model step of the agent begins: the leader takes the turn, the lanes meet, every lane learns
// the replay position. Free running, each lane pauses on its own inside the step.
__device__ bool pc_u_begin(PcThread& th, PcU& u, volatile int* turn, int nt) {
  if (u.lane == 0) {
    if (th.sched[0] != 0 && !th.lost) pc_turn_begin(th, turn, nt);
    u.a->step = th.step; u.a->lost = th.lost;
  }
  if (!pc_u_meet(th, u)) return false;
  if (u.lane != 0) { th.step = u.a->step; th.lost = u.a->lost; th.turn = -1; }
  if (th.sched[0] == 0 || th.lost) pc_delay(th);
  return true;
}
// ... and ends once every lane did its part.
__device__ bool pc_u_end(PcThread& th, PcU& u, volatile int* turn) {
  if (!pc_u_meet(th, u)) return false;
  if (u.lane == 0) pc_turn_end(th, turn);
  return true;
}
// An observation outside elected blocks: every lane makes it and counts it, the leader records
// it, and every lane hashes it (compared at exit: do the lanes see the same?).
__device__ void pc_u_record(PcThread& th, PcU& u, int list, int& n, int v) {
  if (n < PC_CAP) { if (u.lane == 0) th.rec[PC_HEADER + list * PC_CAP + n] = v; } else th.status = PC_OVERFLOW;
  n++;
  pc_u_observe(u, list, v);
}
__device__ __forceinline__ void pc_u_tick(PcU& u) { u.a->progress = u.a->progress + 1; }
// The elected lane leaves its block (at its end, or stopped inside it): it hands its record
// counters, replay position and status to the lanes waiting at the block's end.
__device__ void pc_u_block_done(PcThread& th, PcU& u) {
  PcUAgent* a = u.a;
  a->cnt[0] = th.nreads; a->cnt[1] = th.ntry; a->cnt[2] = th.ntok; a->cnt[3] = th.nbad; a->cnt[4] = th.status;
  a->step = th.step; a->lost = th.lost;
  __threadfence_block();
  a->blocks = ++u.blocks;
  u.in_block = 0;
}
// A lane the election passed over waits at the block's end for the elected lane, bounded by its
// progress: it stops (hung) only when the elected lane took no step for three wait bounds.
__device__ bool pc_u_block_wait(PcThread& th, PcU& u, int elected) {
  PcUAgent* a = u.a;
  u64 start = pc_now();
  int seen = a->progress;
  while (a->blocks == u.blocks) {
    if (elected < 0 || !((a->alive >> elected) & 1u)) {
      __threadfence_block();
      if (a->blocks != u.blocks) break;
      th.status = PC_HUNG; return false;   // the elected lane stopped outside the block
    }
    int p = a->progress;
    if (p != seen) { seen = p; start = pc_now(); }
    if (pc_now() - start > 3 * th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  __threadfence_block();
  u.blocks++;
  th.nreads = a->cnt[0]; th.ntry = a->cnt[1]; th.ntok = a->cnt[2]; th.nbad = a->cnt[3];
  th.step = a->step; th.lost = a->lost;
  int st = a->cnt[4];
  if (st != PC_RUNNING) th.status = st;
  return st == PC_RUNNING || st == PC_OVERFLOW;   // the elected lane stopped in the block: so does the agent
}
// A lane exits. The last lane out writes the agent's record header from the leader's counters and,
// in `apart`, the lanes whose observations or end differ from the leader's; it returns true (the
// agent has exited: in a cluster it then leaves the cluster barrier, which counts agents).
__device__ bool pc_u_exit(PcThread& th, PcU& u, int* apart) {
  PcUAgent* a = u.a;
  if (u.in_block) pc_u_block_done(th, u);
  a->fin[u.lane][0] = th.status; a->fin[u.lane][1] = th.nreads; a->fin[u.lane][2] = th.ntry;
  a->fin[u.lane][3] = th.ntok; a->fin[u.lane][4] = th.nbad; a->fin[u.lane][5] = th.lost;
  a->hash[u.lane] = u.hash; a->nobs[u.lane] = u.nobs;
  if (th.status != PC_FINISHED && th.status != PC_OVERFLOW) a->stopped = th.status;
  __threadfence_block();
  atomicAnd((unsigned*)&a->alive, ~(1u << u.lane));
  pc_leave(&a->meet);
  if (atomicAdd(&a->out, 1) == u.lanes - 1) {
    __threadfence_block();
    for (int k = 0; k < 6; k++) th.rec[k] = a->fin[0][k];
    unsigned m = 0;
    for (int l = 1; l < u.lanes; l++)
      if (a->fin[l][0] != a->fin[0][0] || a->hash[l] != a->hash[0] || a->nobs[l] != a->nobs[0]) m |= 1u << l;
    *apart = (int)m;
    return true;
  }
  return false;
}
#endif
