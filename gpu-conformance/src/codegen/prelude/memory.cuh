// Buffers hold version stamps: a write fills every word; a read sees one version or a torn mix (-1).
__device__ void pc_write(int* buf, int words, int v) {
  volatile int* b = buf;
  for (int i = 0; i < words; i++) b[i] = v;
}
__device__ int pc_read(int* buf, int words) {
  volatile int* b = buf;
  int v = b[0];
  for (int i = 1; i < words; i++) if (b[i] != v) return -1;
  return v;
}
// The copy source holds rows 0..PC_SRC_VERSIONS-1 (row v stamped v); a copy of any other version
// is refused where it is issued (`pc_version_ok`), since no row could bring it.
#define PC_SRC_VERSIONS 256
__device__ __forceinline__ bool pc_version_ok(PcThread& th, i64 version) {
  if (version >= 0 && version < PC_SRC_VERSIONS) return true;
  th.status = PC_UNSUPPORTED;
  return false;
}
__device__ __forceinline__ const int* pc_src_row(PcThread& th, i64 version) {
  int row = (version >= 0 && version < 256) ? (int)version : 256;
  return th.src + (i64)row * th.src_words;
}
// Division by 0 and INT64_MIN / -1 are undefined in C++: the model reports them, the kernel
// must not execute them.
__device__ __forceinline__ i64 pc_div(i64 a, i64 b) { return b == 0 || (b == -1 && a == (i64)(1ULL << 63)) ? 0 : a / b; }
__device__ __forceinline__ i64 pc_rem(i64 a, i64 b) { return b == 0 || b == -1 ? 0 : a % b; }
// NVRTC 13.0 crashes when it can prove an mbarrier count is 0 at compile time (count-range specs do
// exactly that), so barrier operands go through a value it cannot see: always 0 at run time.
__device__ volatile int pc_zero_g = 0;
__device__ __forceinline__ int pc_zero() { return pc_zero_g; }
__device__ __forceinline__ unsigned pc_smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
