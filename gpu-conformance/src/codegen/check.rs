//! What a backend cannot express, rejected before any code is generated, with the reason and the
//! spec line it comes from.

use super::expr::line_of;
use super::proxy::{code_bulk_groups, code_wgmma, proxy_inexpressible};
use super::warp::{code_commits, code_warp_ops};
use super::{Backend, Gen, NotExpressible};
use phasecheck_model::program::ir::*;

impl Gen<'_> {
    /// Reject what this backend cannot express, with the reason.
    pub(super) fn check_expressible(&self) -> Result<(), NotExpressible> {
        let p = self.p;
        // Blackwell statements first: the H200 has none of them, whatever else the spec holds.
        for (code, _) in self.all_code() {
            for ins in &code.instrs {
                let InstrKind::Op { op, .. } = &ins.kind else { continue };
                if let Some(why) = super::blackwell::blackwell_inexpressible(op) {
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
        // TMA descriptors (`tensormap`): real tensor maps, within the limits of `tensormap.rs`.
        let uniform_code: Vec<(&Code, bool)> = p
            .roles
            .iter()
            .map(|r| (&r.code, r.uniform))
            .chain(p.completions.iter().map(|c| (c, false)))
            .collect();
        for (code, uniform) in uniform_code {
            for ins in &code.instrs {
                let InstrKind::Op { op, .. } = &ins.kind else { continue };
                if let Some(why) = self.tensormap_inexpressible(op, uniform) {
                    let (line, text) = line_of(self.src, ins.span.start);
                    return Err(NotExpressible(format!("line {line} `{text}`: {why}")));
                }
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
