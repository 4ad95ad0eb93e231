//! What a backend cannot express, rejected before any code is generated, with the reason and the
//! spec line it comes from.

use super::expr::line_of;
use super::proxy::{code_bulk_groups, code_wgmma};
use super::warp::{code_commits, code_warp_ops};
use super::{Backend, Gen, NotExpressible};
use phasecheck_model::ir::*;

impl Gen<'_> {
    /// Reject what this backend cannot express, with the reason.
    pub(super) fn check_expressible(&self) -> Result<(), NotExpressible> {
        let p = self.p;
        if let Some(r) = p.roles.iter().find(|r| r.uniform && code_commits(&r.code)) {
            return Err(NotExpressible(format!(
                "role {} is uniform and has a warp-batched commit: the kernel emulates commit convergence per hardware thread, not for the lanes of an agent",
                r.name
            )));
        }
        if p.cluster > 1 {
            if !p.completions.is_empty() {
                return Err(NotExpressible(
                    "completion functions in a cluster: libcu++ runs them in software barriers, which remote arrives and multicast copies cannot reach".into(),
                ));
            }
            for (code, _) in self.all_code() {
                for ins in &code.instrs {
                    let InstrKind::Op {
                        op: IOp::Remote { multicast, op, .. },
                        ..
                    } = &ins.kind
                    else {
                        continue;
                    };
                    let (line, text) = line_of(self.src, ins.span.start);
                    let bad = |why: &str| Err(NotExpressible(format!("line {line} `{text}`: {why}")));
                    let mut reads_var = false;
                    ins.exprs(&mut |e| reads_var |= e.reads_var());
                    if reads_var {
                        return bad("an operand of a remote operation reads a shared var; the kernel evaluates it in the target CTA's shared memory");
                    }
                    match (&**op, multicast) {
                        (IOp::Copy { version: None, .. } | IOp::CopyPart { version: None, .. }, true) => {
                            return bad("a multicast copy without `version =`: the default version is each target CTA's own write count");
                        }
                        (IOp::Copy { .. } | IOp::CopyPart { .. }, true) => {}
                        (IOp::Arrive { .. } | IOp::Read { .. } | IOp::Write { .. } | IOp::ReadPart { .. }, false) => {}
                        _ => return bad("this remote operation has no sm_90 form in the generated kernel (remote: arrive, arrive_expect_tx, read, write; multicast: copy_async)"),
                    }
                }
            }
        }
        if let Some(r) = p.roles.iter().find(|r| code_commits(&r.code) && code_warp_ops(&r.code)) {
            return Err(NotExpressible(format!(
                "role {} has a warp-batched commit and syncwarp(mask) or elect(): the kernel follows commit convergence only across full-warp syncwarps",
                r.name
            )));
        }
        if let Some(r) = p.roles.iter().find(|r| code_bulk_groups(&r.code) && code_wgmma(&r.code)) {
            return Err(NotExpressible(format!(
                "role {} uses both wgmma groups and bulk groups: a real wgmma needs sm_90a and matrix descriptors, so the kernel emulates its operand reads with bulk stores, whose groups would mix with the role's own TMA store groups",
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
                let (line, text) = line_of(self.src, ins.span.start);
                let software = |r: &Ref| self.group_completion[r.group as usize].is_some();
                let bad = |why: String| Err(NotExpressible(format!("line {line} `{text}`: {why}")));
                match op {
                    IOp::Arrive { bar, n, drop, expect_tx } => {
                        if *drop && !matches!(n, IExpr::Const(1)) && self.backend == Backend::Libcu {
                            return bad("libcu++ arrive_and_drop drops exactly one arrival".into());
                        }
                        if expect_tx.is_some() && software(bar) {
                            return bad("arrive_expect_tx needs a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++".into());
                        }
                    }
                    IOp::ExpectTx { bar, .. } | IOp::CompleteTx { bar, .. } if software(bar) => {
                        return bad(
                            "tx-counts need a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++"
                                .into(),
                        );
                    }
                    IOp::Copy { buf, bar, bytes, .. } => {
                        if software(bar) {
                            return bad("async copies complete on a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++".into());
                        }
                        let size = p.buffers[p.buffer_groups[buf.group as usize].base as usize].bytes;
                        let n = match bytes {
                            None => Some(size),
                            Some(IExpr::Const(n)) => Some(*n),
                            Some(_) => None,
                        };
                        if let Some(n) = n {
                            if n % 16 != 0 || n <= 0 {
                                return bad(format!(
                                    "a bulk copy of {n} bytes: cp.async.bulk moves a positive multiple of 16 bytes"
                                ));
                            }
                        }
                    }
                    IOp::Commit { bar } if software(bar) && self.backend == Backend::Libcu => {}
                    // cp.async moves 4, 8 or 16 bytes; bulk copies into part of a
                    // buffer need 16-byte aligned offsets and sizes.
                    IOp::CpAsyncArrive { bar, .. } if software(bar) => {
                        return bad("cp.async.mbarrier.arrive needs a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++".into());
                    }
                    IOp::CpAsync {
                        bytes: IExpr::Const(n), ..
                    } if ![4, 8, 16].contains(n) => {
                        return bad(format!("a cp.async of {n} bytes: cp.async moves 4, 8 or 16 bytes"));
                    }
                    IOp::CopyPart { bar, offset, bytes, .. } => {
                        if software(bar) {
                            return bad("async copies complete on a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++".into());
                        }
                        for e in [offset, bytes] {
                            if let IExpr::Const(n) = e {
                                if n % 16 != 0 || *n < 0 {
                                    return bad(format!(
                                        "a bulk copy at offset/size {n}: cp.async.bulk needs 16-byte aligned offsets and sizes"
                                    ));
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}
