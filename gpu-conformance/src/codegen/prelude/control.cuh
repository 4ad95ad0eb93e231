// A `while` loop's back edge: a spin that outlasts every wait bound is a hang.
__device__ __forceinline__ bool pc_loop_ok(PcThread& th) {
  if (pc_now() - th.t0 > 8 * th.timeout_ns) { th.status = PC_HUNG; return false; }
  return true;
}
// elect.sync over `mask` (sm_90): the hardware's deterministic choice of one lane.
__device__ __forceinline__ bool pc_elect(unsigned mask) {
  unsigned ok;
  asm volatile("{ .reg .pred p; elect.sync _|p, %1; selp.u32 %0, 1, 0, p; }" : "=r"(ok) : "r"(mask) : "memory");
  return ok != 0;
}
