//! What a backend cannot express, rejected before any code is generated, with the reason and the
//! spec line it comes from.

use super::expr::line_of;
use super::proxy::{code_bulk_groups, code_wgmma, proxy_inexpressible};
use super::warp::{code_commits, code_warp_ops};
use super::{Backend, Gen, NotExpressible};
use phasecheck_model::program::ir::*;

/// A TMA descriptor in shared memory: the generator's copies are bulk copies
/// (`cp.async.bulk`), which take no tensor map, and its kernels hold no `CUtensorMap` for a
/// thread to edit, so the descriptor's edits, fence and use are checked by the model alone.
fn tensormap_inexpressible(op: &IOp) -> Option<&'static str> {
    matches!(op, IOp::Copy(CopyOp::Tensor { .. }) | IOp::Proxy(ProxyOp::FenceProxyTensormap { .. })).then_some(
        "a TMA descriptor in shared memory (`tensormap`) is not expressible on sm_90 by this generator: its copies are bulk copies without tensor maps, and its kernels hold no CUtensorMap",
    )
}

impl Gen<'_> {
    /// Reject what this backend cannot express, with the reason.
    pub(super) fn check_expressible(&self) -> Result<(), NotExpressible> {
        let p = self.p;
        // Blackwell statements first: the H200 has none of them, whatever else the spec holds.
        for (code, _) in self.all_code() {
            for ins in &code.instrs {
                let InstrKind::Op { op, .. } = &ins.kind else { continue };
                if let Some(why) = super::blackwell::blackwell_inexpressible(op).or_else(|| tensormap_inexpressible(op).map(String::from)) {
                    let (line, text) = line_of(self.src, ins.span.start);
                    return Err(NotExpressible(format!("line {line} `{text}`: {why}")));
                }
            }
        }
        if let Some(r) = p.roles.iter().find(|r| r.uniform && code_commits(&r.code)) {
            return Err(NotExpressible(format!(
                "role {} is uniform and has a warp-batched commit: the kernel emulates commit convergence per hardware thread, not for the lanes of an agent",
                r.name
            )));
        }
        if p.cluster > 1 {
            self.cluster_expressible()?;
        }
        if let Some(r) = p.roles.iter().find(|r| code_commits(&r.code) && code_warp_ops(&r.code)) {
            return Err(NotExpressible(format!(
                "role {} has a warp-batched commit and syncwarp(mask) or elect(): the kernel follows commit convergence only across full-warp syncwarps",
                r.name
            )));
        }
        if let Some(r) = p
            .roles
            .iter()
            .find(|r| !self.wgmma_hw && code_bulk_groups(&r.code) && code_wgmma(&r.code))
        {
            return Err(NotExpressible(format!(
                "role {} uses both wgmma groups and bulk groups: its wgmma reads are emulated here (see the note on wgmma), by bulk stores whose groups would mix with the role's own TMA store groups",
                r.name
            )));
        }
        if self.backend == Backend::Ptx {
            if let Some(b) = p.barriers.iter().find(|b| b.completion.is_some()) {
                return Err(NotExpressible(format!(
                    "barrier {} has a completion function; hardware mbarriers have none (libcu++ runs it in software)",
                    b.name
                )));
            }
        }
        for (code, _) in self.all_code() {
            for ins in &code.instrs {
                let InstrKind::Op { op, .. } = &ins.kind else { continue };
                let why = match op {
                    IOp::Mbar(MbarOp::Arrive { .. }) | IOp::Mbar(MbarOp::ExpectTx { .. }) | IOp::Mbar(MbarOp::CompleteTx { .. }) => {
                        self.mbarrier_inexpressible(op)
                    }
                    IOp::Copy(CopyOp::Copy { .. })
                    | IOp::Copy(CopyOp::CopyPart { .. })
                    | IOp::Copy(CopyOp::CpAsync { .. })
                    | IOp::Copy(CopyOp::CpAsyncArrive { .. }) => self.copy_inexpressible(op),
                    IOp::Proxy(_) => proxy_inexpressible(op, self.wgmma_hw),
                    _ => None,
                };
                if let Some(why) = why {
                    let (line, text) = line_of(self.src, ins.span.start);
                    return Err(NotExpressible(format!("line {line} `{text}`: {why}")));
                }
            }
        }
        Ok(())
    }
}
