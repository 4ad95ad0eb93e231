//! The async proxy: TMA stores, bulk async-groups, wgmma's operand reads, and the proxy fences.
//!
//! A TMA store (`copy_store_async`) is a cp.async.bulk shared::cta -> global in a bulk group, into a
//! sink nobody reads back: what matters is its asynchronous read of shared memory. `wait_group(N)`
//! needs an immediate N: 0..7 are generated, a larger N stops the thread as unsupported.
//!
//! `wgmma_async` runs on the hardware's `wgmma.mma_async` ([`wgmma_hw_form`]): each issuing agent
//! has a warpgroup of helper threads placed after the model's threads, which issue its wgmmas with
//! matrix descriptors over the spec's own buffers and retire them with `wgmma.wait_group N`
//! (`prelude/wgmma.cuh` says how, and how a group that read bytes the buffer did not hold when it
//! was issued is counted). Where that cannot be done (an operand under 128 bytes, the smallest
//! read a descriptor makes; more threads than a block holds; a cluster) the kernel
//! emulates it as before: bulk stores of its operands (one bulk group per statement) and
//! `cp.async.bulk.wait_group.read N`, the same asynchronous reads retired by the same kind of wait,
//! and the cases say `emulated`.
//!
//! `warpgroup_mma`/`warpgroup_wait` (the warpgroup-scoped form) get one helper warpgroup per
//! warpgroup of the spec ([`wgmma_helpers`]), whose groups its agents share: group k is issued
//! when the last agent issues it, a wait returns once every agent issued what it covers
//! (`prelude/wgmma.cuh`, `PcWgScope`). Where wgmma is emulated the form is refused.
//!
//! What the lanes of a warp share (bulk and wgmma groups) a uniform agent does once, by its
//! leader ([`shared_by_the_warp`]).

use super::Gen;
use phasecheck_model::program::ir::*;

/// The code issues TMA stores or manages bulk groups itself.
pub(super) fn code_bulk_groups(code: &Code) -> bool {
    code.instrs.iter().any(|i| {
        matches!(
            i.kind,
            InstrKind::Op {
                op: IOp::Proxy(ProxyOp::StoreAsync { .. })
                    | IOp::Proxy(ProxyOp::StorePartAsync { .. })
                    | IOp::Proxy(ProxyOp::CommitGroup)
                    | IOp::Proxy(ProxyOp::WaitGroup { .. }),
                ..
            }
        )
    })
}

/// The code issues wgmma reads.
pub(super) fn code_wgmma(code: &Code) -> bool {
    code.instrs.iter().any(|i| {
        matches!(
            i.kind,
            InstrKind::Op {
                op: IOp::Proxy(ProxyOp::Wgmma { .. }) | IOp::Proxy(ProxyOp::WgmmaWait { .. }),
                ..
            }
        )
    })
}

/// Some role issues wgmma reads.
pub fn has_wgmma(p: &Protocol) -> bool {
    p.roles.iter().any(|r| code_wgmma(&r.code))
}

/// Threads per helper warpgroup (a hardware warpgroup).
pub(super) const WARPGROUP: usize = 128;

/// The smallest operand a descriptor read covers exactly (one m64n8k32 u8 B operand).
const WGMMA_CHUNK: i64 = 256;

/// The model threads that issue wgmma reads, in order.
pub fn wgmma_agents(p: &Protocol) -> Vec<usize> {
    (0..p.threads.len())
        .filter(|&t| code_wgmma(&p.roles[p.threads[t].role as usize].code))
        .collect()
}

/// The code issues warpgroup-scoped wgmma (`warpgroup_mma` / `warpgroup_wait`).
pub(super) fn code_warpgroup_wgmma(code: &Code) -> bool {
    code.instrs.iter().any(|i| {
        matches!(
            i.kind,
            InstrKind::Op {
                op: IOp::Proxy(ProxyOp::Wgmma { warpgroup: true, .. }) | IOp::Proxy(ProxyOp::WgmmaWait { warpgroup: true, .. }),
                ..
            }
        )
    })
}

/// Some role issues warpgroup-scoped wgmma.
pub fn has_warpgroup_wgmma(p: &Protocol) -> bool {
    p.roles.iter().any(|r| code_warpgroup_wgmma(&r.code))
}

/// The helper warpgroups, in order, each with the model threads it serves: one per agent that
/// issues `wgmma_async`, and one per warpgroup of the spec (`Protocol::warpgroup_of`, its agents
/// in that order) that issues `warpgroup_mma`, whose groups are the warpgroup's.
pub fn wgmma_helpers(p: &Protocol) -> Vec<Vec<usize>> {
    let mut v: Vec<Vec<usize>> = Vec::new();
    for t in wgmma_agents(p) {
        if code_warpgroup_wgmma(&p.roles[p.threads[t].role as usize].code) {
            if !v.iter().any(|h| h.contains(&t)) {
                v.push(p.warpgroup_of(t));
            }
        } else {
            v.push(vec![t]);
        }
    }
    v
}

/// Whether the protocol's wgmma reads run on the hardware's `wgmma.mma_async` (module docs), or
/// why they are emulated. `model_threads` is the block's hardware threads before the helpers.
pub fn wgmma_hw_form(p: &Protocol, model_threads: usize) -> Result<(), String> {
    if !has_wgmma(p) {
        return Err("no wgmma".into());
    }
    if p.cluster > 1 {
        return Err("a cluster kernel keeps its wgmma reads emulated".into());
    }
    for r in &p.roles {
        for i in &r.code.instrs {
            if let InstrKind::Op {
                op: IOp::Proxy(ProxyOp::Wgmma { bufs, .. }),
                ..
            } = &i.kind
            {
                if bufs.len() > 4 {
                    return Err("a wgmma of more than four operands".into());
                }
                for b in bufs {
                    let g = &p.buffer_groups[b.group as usize];
                    let bytes = p.buffers[g.base as usize].bytes;
                    if bytes < WGMMA_CHUNK / 2 || bytes % 16 != 0 {
                        return Err(format!(
                            "operand {} has {bytes} bytes: a descriptor reads 128 or 256 bytes at 16-byte offsets, so an operand under 128 bytes (or not a multiple of 16) cannot be read exactly",
                            g.name
                        ));
                    }
                    if (bytes + WGMMA_CHUNK - 1) / WGMMA_CHUNK > 64 {
                        return Err(format!("operand {} has {bytes} bytes: more than 64 chunks of 256", g.name));
                    }
                }
            }
        }
    }
    if wgmma_helpers(p).iter().any(|h| h.len() > 64) {
        return Err("a warpgroup of more than 64 agents".into());
    }
    let total = helper_base(model_threads) + WARPGROUP * wgmma_helpers(p).len();
    if total > 1024 {
        return Err(format!(
            "{model_threads} threads and a helper warpgroup per issuing agent (or warpgroup) make {total} threads per block: at most 1024"
        ));
    }
    Ok(())
}

/// The first helper thread: the model's threads rounded up to a whole warpgroup.
pub(super) fn helper_base(model_threads: usize) -> usize {
    model_threads.div_ceil(WARPGROUP) * WARPGROUP
}

/// The operation acts on state the warp's lanes share (its bulk and wgmma groups): an agent of a
/// uniform role issues it once (docs/model.md).
pub(super) fn shared_by_the_warp(op: &IOp) -> bool {
    matches!(
        op,
        IOp::Proxy(ProxyOp::StoreAsync { .. })
            | IOp::Proxy(ProxyOp::StorePartAsync { .. })
            | IOp::Proxy(ProxyOp::CommitGroup)
            | IOp::Proxy(ProxyOp::WaitGroup { .. })
            | IOp::Proxy(ProxyOp::Wgmma { .. })
            | IOp::Proxy(ProxyOp::WgmmaWait { .. })
    )
}

/// Why the kernel cannot emit this async-proxy operation, if it cannot: the emulation of wgmma
/// (bulk stores of its operands in the issuing thread's bulk groups) has no group shared by the
/// four warps of a warpgroup, and a bulk store records no version of what it read.
pub(super) fn proxy_inexpressible(op: &IOp, wgmma_hw: bool) -> Option<String> {
    match op {
        IOp::Proxy(ProxyOp::Wgmma { warpgroup: true, .. }) | IOp::Proxy(ProxyOp::WgmmaWait { warpgroup: true, .. }) if !wgmma_hw => Some(
            "a warpgroup-scoped wgmma (warpgroup_mma / warpgroup_wait) is not expressible in this kernel: its wgmma reads are emulated (see `wgmma_hw_form`: a cluster, an operand under 128 bytes, more than 1024 threads), and that emulation by bulk stores keeps groups per thread, not one group for the four warps of a warpgroup".to_string(),
        ),
        IOp::Proxy(ProxyOp::Wgmma { expect: Some(_), .. }) if !wgmma_hw => Some(
            "a wgmma_async with `expect = V` is not expressible: its emulation by bulk stores records no version of the operands it reads".to_string(),
        ),
        _ => None,
    }
}

impl Gen<'_> {
    /// The operand pointers and sizes of a wgmma, with their index checks.
    fn wgmma_operands(&mut self, code: &Code, bufs: &[Ref]) -> (Vec<String>, Vec<String>) {
        let mut ptrs = Vec::new();
        let mut sizes = Vec::new();
        for b in bufs {
            let d = self.placed(code, b, false, "    ");
            ptrs.push(format!("(const int*){d}"));
            sizes.push(format!("(int)sizeof({d})"));
        }
        (ptrs, sizes)
    }

    /// An operation of the async proxy (`ProxyOp::StoreAsync`, `CommitGroup`, `WaitGroup`, `Wgmma`,
    /// `WgmmaWait`, `FenceProxyAsync`, `FenceMbarrierInit`).
    pub(super) fn proxy_op(&mut self, code: &Code, op: &ProxyOp) {
        match op {
            ProxyOp::FenceProxyTensormap { map } => self.tensormap_fence(code, map),
            ProxyOp::StoreAsync { buf } => {
                let d = self.placed(code, buf, false, "  ");
                self.w(format!(
                    "  pc_store_async({d}, (int)sizeof({d}));  // TMA store: the async proxy reads it until its group is waited for"
                ));
            }
            ProxyOp::StorePartAsync { buf, offset, bytes } => {
                let d = self.placed(code, buf, false, "  ");
                let (off, n) = (self.expr(code, offset), self.expr(code, bytes));
                // cp.async.bulk needs a 16-byte aligned address and size: anything else is a
                // store the hardware cannot make (the model still judges it).
                self.w(format!("  {{ const i64 off = {off}, n = {n};"));
                self.w(format!(
                    "    if (off < 0 || n <= 0 || off % 16 != 0 || n % 16 != 0 || off + n > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
                ));
                self.w(format!(
                    "    pc_store_async((const int*)((const char*){d} + off), (int)n); }}  // TMA store of a byte range"
                ));
            }
            ProxyOp::CommitGroup => self.w("  pc_bulk_commit();"),
            ProxyOp::WaitGroup { n, read } => {
                let n = self.expr(code, n);
                self.w(format!("  if (!pc_bulk_wait(th, {n}, {read})) return;"));
            }
            ProxyOp::Wgmma {
                bufs,
                expect,
                warpgroup: true,
            } => {
                self.w("  { // warpgroup_mma: this agent's issue of its warpgroup's next group; the helper warpgroup issues wgmma.mma_async once every agent of the warpgroup has");
                let (ptrs, sizes) = self.wgmma_operands(code, bufs);
                let v = expect.as_ref().map_or("-1LL".to_string(), |e| self.expr(code, e));
                self.w(format!("    const int* ops[] = {{{}}};", ptrs.join(", ")));
                self.w(format!("    const int bytes[] = {{{}}};", sizes.join(", ")));
                self.w(format!(
                    "    if (!pc_wgs_mma(th, &s.wg[wg_of[th.t]], &s.wgs[wg_of[th.t]], wg_member[th.t], {}, ops, bytes, {v})) return; }}",
                    bufs.len()
                ));
            }
            ProxyOp::WgmmaWait { n, warpgroup: true } => {
                let n = self.expr(code, n);
                self.w(format!(
                    "  if (!pc_wgs_wait(th, &s.wg[wg_of[th.t]], &s.wgs[wg_of[th.t]], wg_member[th.t], {n})) return;  // warpgroup_wait: wgmma.wait_group on the warpgroup's groups, once every agent issued them"
                ));
            }
            ProxyOp::Wgmma { bufs, expect, .. } if self.wgmma_hw => {
                self.w("  { // wgmma_async: wgmma.mma_async by this agent's helper warpgroup, over the operands' descriptors");
                let (ptrs, sizes) = self.wgmma_operands(code, bufs);
                self.w(format!("    const int* ops[] = {{{}}};", ptrs.join(", ")));
                self.w(format!("    const int bytes[] = {{{}}};", sizes.join(", ")));
                // `expect = V`: every operand must hold version V at the issue (a stale operand is
                // counted as a wrong version, as a read's is); -1: no expectation.
                let v = expect.as_ref().map_or("-1LL".to_string(), |e| self.expr(code, e));
                self.w(format!(
                    "    if (!pc_wg_mma(th, &s.wg[wg_of[th.t]], {}, ops, bytes, {v})) return; }}",
                    bufs.len()
                ));
            }
            ProxyOp::WgmmaWait { n, .. } if self.wgmma_hw => {
                let n = self.expr(code, n);
                self.w(format!(
                    "  if (!pc_wg_wait(th, &s.wg[wg_of[th.t]], {n})) return;  // wgmma.wait_group, by the helper warpgroup"
                ));
            }
            ProxyOp::Wgmma { bufs, .. } => {
                self.w("  // wgmma_async, emulated: a bulk store of each operand, one bulk group (the same async reads)");
                for b in bufs {
                    let d = self.placed(code, b, false, "  ");
                    self.w(format!("  pc_store_async({d}, (int)sizeof({d}));"));
                }
                self.w("  pc_bulk_commit();");
            }
            ProxyOp::WgmmaWait { n, .. } => {
                let n = self.expr(code, n);
                self.w(format!("  if (!pc_bulk_wait(th, {n}, true)) return;  // wgmma_wait, emulated"));
            }
            ProxyOp::FenceProxyAsync => self.w("  pc_fence_proxy_async();"),
            ProxyOp::FenceMbarrierInit => self.w("  pc_fence_mbarrier_init();"),
        }
    }
}
