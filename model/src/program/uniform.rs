//! Warp-uniform roles: the check that a role declared `uniform` really is.
//!
//! A uniform role is modelled as one agent per warp whose steps count for all the warp's lanes
//! (`Protocol::lanes_at`). That is exact only when the lanes of a warp take the same path and
//! touch the same things, so the role's code may not let anything that differs between lanes
//! (`lane`, `tid`, `gtid`, or an `elect()` result) reach a branch, an index, an operand or a
//! shared var. The one exception is the elected block, `if e == 1 { ... }` right on an `elect()`
//! result: the elected lane runs it alone (its steps count once) while the others skip to its
//! end, where the lanes are in lockstep again (docs/model.md, "Warp-uniform roles").
//!
//! The analysis runs on the lowered code, after inlining and with loops as jumps, so every path
//! a value can take to a visible operation is an instruction here.

use crate::lang::ast::{BinOp, Span};
use crate::lang::Diagnostic;
use crate::program::ir::*;

/// The lane-varying source an expression depends on, if any.
fn source(e: &IExpr, taint: &[Option<&'static str>]) -> Option<&'static str> {
    let mut found = None;
    e.each(&mut |x| {
        if found.is_some() {
            return;
        }
        found = match x {
            IExpr::Lane => Some("lane"),
            IExpr::Tid => Some("tid"),
            IExpr::Gtid => Some("gtid"),
            IExpr::Local(s) => taint[*s as usize],
            _ => None,
        };
    });
    found
}

/// The offset of an access that a uniform agent may make once per lane, each lane at its own
/// offset (`write`/`read` of part of a buffer): its `offset =` expression.
pub fn per_lane_offset(op: &IOp) -> Option<&IExpr> {
    match op {
        IOp::Mem(MemOp::WritePart { offset, .. } | MemOp::ReadPart { offset, .. }) => Some(offset),
        _ => None,
    }
}

/// `e`, `e == 1`, `1 == e`, `e != 0` or `0 != e` on an `elect()` result `e`: the elected lane's
/// condition.
fn elected_condition(cond: &IExpr, elect_slots: &[u16]) -> bool {
    let is_elect = |e: &IExpr| matches!(e, IExpr::Local(s) if elect_slots.contains(s));
    match cond {
        IExpr::Binary(BinOp::Eq, a, b) => {
            (is_elect(a) && matches!(**b, IExpr::Const(1))) || (is_elect(b) && matches!(**a, IExpr::Const(1)))
        }
        IExpr::Binary(BinOp::Ne, a, b) => {
            (is_elect(a) && matches!(**b, IExpr::Const(0))) || (is_elect(b) && matches!(**a, IExpr::Const(0)))
        }
        e => is_elect(e),
    }
}

/// Checks that role `role`'s code is warp-uniform and records its elected blocks in
/// `code.elected`. The first problem is the diagnostic: E112 for a lane-varying value that
/// reaches something visible, E113 for an elected block the model cannot count once.
pub fn analyse(role: &str, code: &mut Code, warp_size: u32) -> Result<(), Diagnostic> {
    let n = code.local_names.len();
    let mut elect_slots: Vec<u16> = Vec::new();
    for i in &code.instrs {
        if let InstrKind::Elect { slot } = i.kind {
            elect_slots.push(slot);
        }
    }
    // An elect slot also assigned as a plain local is no longer known to hold the election.
    elect_slots.retain(|s| {
        !code
            .instrs
            .iter()
            .any(|i| matches!(i.kind, InstrKind::SetLocal { slot, .. } if slot == *s))
    });
    let mut taint: Vec<Option<&'static str>> = vec![None; n];
    for &s in &elect_slots {
        taint[s as usize] = Some("elect()");
    }
    // Flow-insensitive: a local is lane-varying if any assignment to it is.
    loop {
        let mut changed = false;
        for i in &code.instrs {
            if let InstrKind::SetLocal { slot, expr } = &i.kind {
                if taint[*slot as usize].is_none() {
                    if let Some(src) = source(expr, &taint) {
                        taint[*slot as usize] = Some(src);
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }

    let not_uniform = |span: Span, what: String, src: &str| {
        let why = if src == "elect()" {
            "the result of `elect()` may only be the condition of an `if` with no `else` (`if e == 1 { ... }`), where the elected lane runs the block alone".to_string()
        } else {
            "lanes of one warp would differ there, which one agent per warp cannot model; derive it from `warp` instead, or drop `uniform`"
                .to_string()
        };
        Diagnostic::new(
            "E112",
            span,
            format!("role `{role}` is declared uniform, but this statement {what} a value that depends on `{src}`: {why}"),
        )
    };

    let mut regions: Vec<(u32, u32)> = Vec::new();
    for (pc, i) in code.instrs.iter().enumerate() {
        let mut what = "";
        match &i.kind {
            InstrKind::Branch { cond, else_to } if elected_condition(cond, &elect_slots) => {
                regions.push((pc as u32 + 1, *else_to));
                continue;
            }
            InstrKind::SetLocal { .. } | InstrKind::Elect { .. } => continue,
            InstrKind::Branch { .. } => what = "branches on",
            InstrKind::Assert(_) => what = "asserts on",
            InstrKind::SetVar { .. } => what = "writes to a shared var",
            InstrKind::TokenCheck { .. } => what = "indexes a barrier with",
            InstrKind::NamedBar { .. } => what = "passes to a named barrier",
            InstrKind::Op { op, .. } => {
                let mut src = None;
                let in_elected = regions.iter().any(|&(lo, hi)| lo <= pc as u32 && (pc as u32) < hi);
                if let (Some(offset), false) = (per_lane_offset(op), in_elected) {
                    // Each lane's fragment: the offset may read `lane`, `tid` or `gtid` directly
                    // (the agent evaluates it once per lane); everything else must be uniform.
                    let mut local = None;
                    offset.each(&mut |x| {
                        if let IExpr::Local(s) = x {
                            local = local.or(taint[*s as usize]);
                        }
                    });
                    if let Some(src) = local {
                        return Err(Diagnostic::new(
                            "E112",
                            i.span,
                            format!(
                                "role `{role}` is declared uniform, and this `{}` takes its offset from a local that depends on `{src}`: a per-lane offset is evaluated once per lane only when it reads `lane`, `tid` or `gtid` itself; write the expression into `offset =` directly",
                                op.name()
                            ),
                        ));
                    }
                    let mut rest = None;
                    i.exprs(&mut |e| {
                        if !std::ptr::eq(e, offset) {
                            rest = rest.or(source(e, &taint));
                        }
                    });
                    if let Some(src) = rest {
                        return Err(not_uniform(i.span, format!("passes to `{}`", op.name()), src));
                    }
                    continue;
                }
                i.exprs(&mut |e| src = src.or(source(e, &taint)));
                if let Some(src) = src {
                    return Err(not_uniform(i.span, format!("passes to `{}`", op.name()), src));
                }
            }
            InstrKind::SyncWarpMask { mask } => {
                let full = if warp_size >= 64 { -1 } else { (1i64 << warp_size) - 1 };
                let constant = !mask.reads_var() && !mask.reads_identity() && {
                    let mut locals = false;
                    mask.each(&mut |e| locals |= matches!(e, IExpr::Local(_)));
                    !locals
                };
                let value = if constant {
                    mask.eval(&[], None, &mut |_| Err(EvalError::NoVar)).ok()
                } else {
                    None
                };
                if value.is_none_or(|m| m & full != full) {
                    let shown = value.map_or("a mask computed at run time".to_string(), |m| format!("{m:#x}"));
                    return Err(Diagnostic::new(
                        "E112",
                        i.span,
                        format!(
                            "role `{role}` is declared uniform, but this `syncwarp` names {shown}, not every lane of the warp ({full:#x}): the lanes outside it would run apart, which one agent per warp cannot model; use `syncwarp`, or drop `uniform`"
                        ),
                    ));
                }
                continue;
            }
            _ => continue,
        }
        let mut src = None;
        i.exprs(&mut |e| src = src.or(source(e, &taint)));
        if let Some(src) = src {
            return Err(not_uniform(i.span, what.to_string(), src));
        }
    }

    // Only the elected lane runs an elected block: nothing in it may wait for the warp's other
    // lanes or leave the block except at its end.
    for &(lo, hi) in &regions {
        for pc in lo..hi {
            let i = &code.instrs[pc as usize];
            let problem = match &i.kind {
                InstrKind::SyncWarp | InstrKind::SyncWarpMask { .. } | InstrKind::Elect { .. } => {
                    Some("a warp-collective operation, which the other lanes never reach")
                }
                InstrKind::NamedBar { .. } => Some("a named barrier, which counts the whole warp's lanes"),
                InstrKind::SyncThreads => Some("a `syncthreads`, which the other lanes reach elsewhere"),
                InstrKind::ClusterArrive { .. } | InstrKind::ClusterWait { .. } => {
                    Some("the cluster barrier, which every lane of the warp must arrive on (the other lanes never would)")
                }
                InstrKind::Op {
                    op: IOp::Warp(WarpOp::Commit { .. }),
                    ..
                } => Some("a warp-batched `commit`, whose arrivals depend on the warp's convergence"),
                InstrKind::Op {
                    op: IOp::Proxy(ProxyOp::Wgmma { warpgroup: true, .. } | ProxyOp::WgmmaWait { warpgroup: true, .. }),
                    ..
                } => Some("a warpgroup-scoped wgmma, which every lane of the warpgroup executes (`.sync.aligned`)"),
                InstrKind::Return => Some("a `return`: the elected lane would exit while the others run on"),
                InstrKind::Jump { to } if *to < lo || *to > hi => {
                    if pc + 1 == hi && *to > hi {
                        Some("an `else`: its block would run on all lanes but the elected one")
                    } else {
                        Some("a `break` out of the block: the elected lane would leave the others")
                    }
                }
                _ => None,
            };
            if let Some(p) = problem {
                return Err(Diagnostic::new(
                    "E113",
                    i.span,
                    format!(
                        "role `{role}` is declared uniform, and its elected block (run by the elected lane alone, the others waiting at its end) holds {p}; move it out of the `if e == 1` block, or drop `uniform`"
                    ),
                ));
            }
        }
    }
    code.elected = regions;
    Ok(())
}
