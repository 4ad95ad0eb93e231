//! Lowering of the Blackwell statements (lang::blackwell) and the checks that need the lowered
//! program: which buffers are tensor memory (E118).

use super::code::CodeBuilder;
use super::ir::*;
use crate::lang::ast;
use crate::lang::blackwell::{TcStmt, CLC_RESPONSE_BYTES};
use crate::lang::Diagnostic;

/// The hidden local holding a thread's tcgen05 loads not yet waited for (a bit per buffer).
const LD_SLOT: &str = "$tcgen05_ld";

/// Buffers a `tcgen05_ld` can track (a bit each in one local).
const LD_BUFFERS: usize = 63;

impl CodeBuilder<'_> {
    pub(super) fn tc_op(&mut self, t: &TcStmt, span: ast::Span) -> Result<TcOp, Diagnostic> {
        let oe = |b: &mut Self, e: &Option<ast::Expr>| e.as_ref().map(|e| b.expr(e)).transpose();
        Ok(match t {
            TcStmt::Mma {
                acc,
                bufs,
                expect,
                version,
            } => TcOp::Mma {
                acc: self.buf(acc)?,
                bufs: bufs.iter().map(|b| self.buf(b)).collect::<Result<_, _>>()?,
                expect: oe(self, expect)?,
                version: oe(self, version)?,
            },
            TcStmt::Commit { bar, multicast } => TcOp::Commit {
                bar: self.bar(bar)?,
                multicast: oe(self, multicast)?,
            },
            TcStmt::Alloc { tmem, cols } => TcOp::Alloc {
                tmem: self.buf(tmem)?,
                cols: self.expr(cols)?,
            },
            TcStmt::Dealloc { tmem } => TcOp::Dealloc { tmem: self.buf(tmem)? },
            TcStmt::Relinquish => TcOp::Relinquish,
            TcStmt::Ld { tmem, expect } => TcOp::Ld {
                tmem: self.buf(tmem)?,
                expect: oe(self, expect)?,
                slot: self.ld_slot(span)?,
            },
            TcStmt::WaitLd => TcOp::WaitLd { slot: self.ld_slot(span)? },
            TcStmt::ClcTryCancel { resp, bar } => TcOp::ClcTryCancel {
                resp: self.buf(resp)?,
                bar: self.bar(bar)?,
            },
        })
    }

    fn ld_slot(&mut self, span: ast::Span) -> Result<u16, Diagnostic> {
        match self.local_names.iter().position(|n| n == LD_SLOT) {
            Some(s) => Ok(s as u16),
            None => self.new_local(LD_SLOT, span),
        }
    }
}

/// The buffer groups (of one CTA) an operation names as shared memory, and as tensor memory.
fn uses(op: &IOp, smem: &mut Vec<u16>, tmem: &mut Vec<u16>) {
    match op {
        IOp::Mem(m) => smem.push(m.buf().group),
        IOp::Copy(CopyOp::Copy { buf, .. } | CopyOp::CopyPart { buf, .. } | CopyOp::CpAsync { buf, .. } | CopyOp::StAsync { buf, .. }) => {
            smem.push(buf.group)
        }
        IOp::Copy(CopyOp::CopyFrom { buf, src, .. }) => smem.extend([buf.group, src.group]),
        IOp::Copy(_) => {}
        IOp::Proxy(ProxyOp::StoreAsync { buf }) => smem.push(buf.group),
        IOp::Proxy(ProxyOp::Wgmma { bufs, .. }) => smem.extend(bufs.iter().map(|b| b.group)),
        IOp::Proxy(_) | IOp::Mbar(_) | IOp::Warp(_) => {}
        IOp::Tc(TcOp::Mma { acc, bufs, .. }) => {
            tmem.push(acc.group);
            smem.extend(bufs.iter().map(|b| b.group));
        }
        IOp::Tc(TcOp::Alloc { tmem: t, .. } | TcOp::Dealloc { tmem: t } | TcOp::Ld { tmem: t, .. }) => tmem.push(t.group),
        IOp::Tc(TcOp::ClcTryCancel { resp, .. }) => smem.push(resp.group),
        IOp::Tc(_) => {}
        IOp::Remote { op, .. } => uses(op, smem, tmem),
    }
}

/// E118: a buffer named by a tensor-memory statement (the accumulator of `tcgen05_mma`,
/// `tmem_alloc`, `tmem_dealloc`, `tcgen05_ld`) is tensor memory, which no shared-memory
/// statement may touch, and the other way round; a `clc_try_cancel` response buffer holds the
/// 16-byte response; a `tcgen05_ld` tracks at most 63 buffers.
pub fn check(p: &Protocol) -> Result<(), Diagnostic> {
    let per = (p.buffer_groups.len() / p.cluster.max(1) as usize).max(1);
    let every = || {
        p.roles
            .iter()
            .flat_map(|r| r.code.instrs.iter())
            .chain(p.completions.iter().flat_map(|c| c.instrs.iter()))
    };
    let mut tmem_groups: Vec<u16> = Vec::new();
    for i in every() {
        if let InstrKind::Op { op, .. } = &i.kind {
            let (mut s, mut t) = (Vec::new(), Vec::new());
            uses(op, &mut s, &mut t);
            tmem_groups.extend(t.iter().map(|g| g % per as u16));
        }
    }
    if tmem_groups.is_empty() && !every().any(|i| matches!(&i.kind, InstrKind::Op { op: IOp::Tc(_), .. })) {
        return Ok(());
    }
    for i in every() {
        let InstrKind::Op { op, .. } = &i.kind else { continue };
        let (mut s, mut t) = (Vec::new(), Vec::new());
        uses(op, &mut s, &mut t);
        if let Some(g) = s.iter().find(|g| tmem_groups.contains(&(**g % per as u16))) {
            let name = &p.buffer_groups[*g as usize % per].name;
            return Err(Diagnostic::new(
                "E118",
                i.span,
                format!(
                    "`{}` accesses `{name}` as shared memory, but `{name}` is tensor memory (a tcgen05_mma accumulator, or named by tmem_alloc, tmem_dealloc or tcgen05_ld); declare a separate buffer for the shared-memory data",
                    op.name()
                ),
            ));
        }
        if let IOp::Tc(TcOp::ClcTryCancel { resp, .. }) = op {
            let g = &p.buffer_groups[resp.group as usize];
            let bytes = p.buffers[g.base as usize].bytes;
            if bytes != CLC_RESPONSE_BYTES {
                return Err(Diagnostic::new(
                    "E118",
                    i.span,
                    format!(
                        "clc_try_cancel writes a {CLC_RESPONSE_BYTES}-byte response, but `{}` has {bytes} bytes; declare it `buffer {} bytes {CLC_RESPONSE_BYTES}`",
                        g.name, g.name
                    ),
                ));
            }
        }
        if matches!(op, IOp::Tc(TcOp::Ld { .. })) && p.buffers.len() > LD_BUFFERS {
            return Err(Diagnostic::new(
                "E118",
                i.span,
                format!(
                    "tcgen05_ld is modelled for protocols of at most {LD_BUFFERS} buffers, and this one has {}; make the program smaller",
                    p.buffers.len()
                ),
            ));
        }
    }
    Ok(())
}
