//! The async proxy: TMA stores, bulk async-groups, wgmma's operand reads, and the proxy fences.
//!
//! A TMA store (`copy_store_async`) is a cp.async.bulk shared::cta -> global in a bulk group, into a
//! sink nobody reads back: what matters is its asynchronous read of shared memory. `wait_group(N)`
//! needs an immediate N: 0..7 are generated, a larger N stops the thread as unsupported. A wgmma
//! needs sm_90a and matrix descriptors, so `wgmma_async` is emulated by bulk stores of its operands
//! (one bulk group per statement) and `wgmma_wait(N)` by `cp.async.bulk.wait_group.read N`: the same
//! asynchronous reads of shared memory, retired by the same kind of wait.
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
                op: IOp::Proxy(ProxyOp::StoreAsync { .. }) | IOp::Proxy(ProxyOp::CommitGroup) | IOp::Proxy(ProxyOp::WaitGroup { .. }),
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

/// Some role issues wgmma reads: its kernels emulate them (module docs), and the cases say so.
pub fn has_wgmma(p: &Protocol) -> bool {
    p.roles.iter().any(|r| code_wgmma(&r.code))
}

/// The operation acts on state the warp's lanes share (its bulk and wgmma groups): an agent of a
/// uniform role issues it once (docs/model.md).
pub(super) fn shared_by_the_warp(op: &IOp) -> bool {
    matches!(
        op,
        IOp::Proxy(ProxyOp::StoreAsync { .. })
            | IOp::Proxy(ProxyOp::CommitGroup)
            | IOp::Proxy(ProxyOp::WaitGroup { .. })
            | IOp::Proxy(ProxyOp::Wgmma { .. })
            | IOp::Proxy(ProxyOp::WgmmaWait { .. })
    )
}

/// Why the kernel cannot emit this async-proxy operation, if it cannot: the emulation of wgmma
/// (bulk stores of its operands in the issuing thread's bulk groups) has no group shared by the
/// four warps of a warpgroup, and a bulk store records no version of what it read.
pub(super) fn proxy_inexpressible(op: &IOp) -> Option<String> {
    match op {
        IOp::Proxy(ProxyOp::Wgmma { warpgroup: true, .. }) | IOp::Proxy(ProxyOp::WgmmaWait { warpgroup: true, .. }) => Some(
            "a warpgroup-scoped wgmma (warpgroup_mma / warpgroup_wait) is not expressible: a real wgmma needs sm_90a and matrix descriptors, and its emulation by bulk stores keeps groups per thread, not one group for the four warps of a warpgroup".to_string(),
        ),
        IOp::Proxy(ProxyOp::Wgmma { expect: Some(_), .. }) => Some(
            "a wgmma_async with `expect = V` is not expressible: its emulation by bulk stores records no version of the operands it reads".to_string(),
        ),
        _ => None,
    }
}

impl Gen<'_> {
    /// An operation of the async proxy (`ProxyOp::StoreAsync`, `CommitGroup`, `WaitGroup`, `Wgmma`,
    /// `WgmmaWait`, `FenceProxyAsync`, `FenceMbarrierInit`).
    pub(super) fn proxy_op(&mut self, code: &Code, op: &ProxyOp) {
        match op {
            ProxyOp::StoreAsync { buf } => {
                let (d, chk) = self.place(code, buf, false);
                if let Some(c) = chk {
                    self.w(format!("  {c}"));
                }
                self.w(format!(
                    "  pc_store_async({d}, (int)sizeof({d}));  // TMA store: the async proxy reads it until its group is waited for"
                ));
            }
            ProxyOp::CommitGroup => self.w("  pc_bulk_commit();"),
            ProxyOp::WaitGroup { n, read } => {
                let n = self.expr(code, n);
                self.w(format!("  if (!pc_bulk_wait(th, {n}, {read})) return;"));
            }
            ProxyOp::Wgmma { bufs, .. } => {
                self.w("  // wgmma_async, emulated: a bulk store of each operand, one bulk group (the same async reads)");
                for b in bufs {
                    let (d, chk) = self.place(code, b, false);
                    if let Some(c) = chk {
                        self.w(format!("  {c}"));
                    }
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
