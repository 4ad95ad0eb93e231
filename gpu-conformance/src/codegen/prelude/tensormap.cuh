#ifndef PC_TENSORMAP_HELPERS
#define PC_TENSORMAP_HELPERS
// TMA descriptors in shared memory (`tensormap`). The host encodes one real CUtensorMap per kernel
// (cuTensorMapEncodeTiled: a 1-D tiled tensor of int32 over its tensor source, box PcTmapHost::
// box_words) into the kernel's PcTmapHost; the kernel copies it into each `tensormap` buffer.
// Tensor source: row r (row_bytes apart) is stamped r - 256 in every word. Descriptor version D
// points at row D (tensormap.replace of the global address); a copy that means version E and
// lands version V reads tensor row V - E + 256, so that through version D it lands
// V + D - E: V when the descriptor is the one it means, another version when it is stale.
// PTX takes a tensor copy's descriptor in global memory only: each descriptor has a per-block
// slot (`slots`) that its edits store to with plain generic stores, which only
// fence.proxy.tensormap::generic makes visible to the TMA unit's reads.
struct alignas(64) PcTmapHost {
  unsigned char map[128];  // the host's CUtensorMap, version 0
  u64 rows;                // the tensor source's global address
  u64 slots;               // per block, per flat buffer: 128 bytes
  int row_bytes;
  int box_words;           // the box the host encoded (set by the kernel's initialiser)
  int nbuf;                // flat buffers per block (set by the kernel's initialiser)
  int ok;                  // 1: the host encoded the map and set rows/slots
};
static_assert(sizeof(PcTmapHost) == 192, "the host reads and writes PcTmapHost at fixed offsets");
__device__ __forceinline__ void* pc_tmap_slot(const PcTmapHost& h, int flat) {
  return (void*)(h.slots + ((u64)blockIdx.x * (u64)h.nbuf + (u64)flat) * 128ull);
}
// The edit: tensormap.replace of the shared descriptor's global address (a generic-proxy write),
// then its 128 bytes stored to the descriptor's global slot (plain generic stores).
__device__ __forceinline__ void pc_tmap_edit(const PcTmapHost& h, int* map, int flat, i64 version) {
  u64 addr = h.rows + (u64)version * (u64)h.row_bytes;
  asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;" :: "r"(pc_smem(map)), "l"(addr) : "memory");
  const volatile int* from = map;
  volatile int* to = (volatile int*)pc_tmap_slot(h, flat);
  for (int k = 0; k < 32; k++) to[k] = from[k];
}
// fence_proxy_tensormap: the release (the edits before it, for the tensormap proxy) and the
// acquire of the slot (the TMA unit's next read of it sees them).
__device__ __forceinline__ void pc_tmap_fence(const PcTmapHost& h, int flat) {
  asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"((u64)pc_tmap_slot(h, flat)) : "memory");
}
// One box of the tensor copy through the slot: lands h.box_words words at dst, complete_tx on bar.
__device__ __forceinline__ void pc_tmap_copy(const PcTmapHost& h, int flat, int* dst, int coord, u64* bar) {
  asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];"
               :: "r"(pc_smem(dst)), "l"((u64)pc_tmap_slot(h, flat)), "r"(coord), "r"(pc_smem(bar)) : "memory");
}
// The row of tensor copy (version v, meaning descriptor version e), in elements.
__device__ __forceinline__ int pc_tmap_row(const PcTmapHost& h, i64 v, i64 e) {
  return (int)(v - e + 256) * (h.row_bytes / 4);
}
// The descriptor version the TMA unit reads through the slot now: one box of tensor row 256
// (stamped D through version D) into the thread's probe area, on its own mbarrier, waited for
// within th.timeout_ns. -1: timed out (the thread is then hung).
__device__ i64 pc_tmap_probe(PcThread& th, const PcTmapHost& h, int flat, int* probe, u64* pbar, int* phase) {
  pc_mbar_arrive_expect_tx(pbar, h.box_words * 4);
  pc_tmap_copy(h, flat, probe, pc_tmap_row(h, 0, 0), pbar);
  if (!pc_mbar_wait_parity(th, pbar, *phase)) return -1;
  *phase ^= 1;
  return (i64)((volatile int*)probe)[0];
}
#endif
