// ---- libcu++ software barriers (a barrier with a completion function) --------------------------
// cuda::barrier<thread_scope_block, F> keeps its phase as a bool; its only public waits block
// without bound, so poll the probe libcu++'s own wait uses, bounded by %globaltimer.
template <class B> __device__ bool pc_soft_wait_token(PcThread& th, B& b, bool token) {
  u64 start = pc_now();
  while (!cuda::std::__call_try_wait(b, (bool)token)) {
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  return true;
}
template <class B> __device__ bool pc_soft_wait_parity(PcThread& th, B& b, bool parity) {
  u64 start = pc_now();
  while (!cuda::std::__call_try_wait_parity(b, parity)) {
    if (pc_now() - start > th.timeout_ns) { th.status = PC_HUNG; return false; }
  }
  return true;
}
// The mbarrier behind a libcu++ block-scope barrier, for operations libcu++ has no API for.
__device__ __forceinline__ u64* pc_native(cuda::barrier<cuda::thread_scope_block>& b) {
  return (u64*)cuda::device::barrier_native_handle(b);
}
