//! Where a violation raised at a step is to be fixed, when that is another statement than the
//! step's own: the rule that raised it names what broke, and the user changes what made it break.
//!
//! - a second arrival of one thread in one phase, after an `arrive_expect_tx` of its own in that
//!   phase: the announcement's arrival is the extra one (a plain `expect_tx` was meant);
//! - a stale read the synchronisation delivered whole: the write or copy that produced the
//!   version read put the wrong one there;
//! - a race with an access into another CTA's memory (DSMEM, a copy aimed at the peer): that
//!   access's target, or what orders it across CTAs, is the mistake, not the local access (the
//!   writer's relaxed cluster arrival after it, when it made one: it released nothing);
//! - an async-proxy read racing with a generic write: the fence belongs after that write;
//! - a barrier init the async proxy cannot see: the fence belongs after the init;
//! - a peer's barrier whose init is not visible: the peer's relaxed cluster arrival with no
//!   `fence_mbarrier_init()` before it (the fence belongs before it);
//! - a use before a barrier's init that the program does run: the order (a syncthreads) belongs
//!   after the init;
//! - a wait with a token of another barrier: the wait (its token check runs after the step's
//!   visible instruction);
//! - a completion function that waits or arrives on its own barrier: that statement in its body;
//! - a tx-count out of range with bytes from a declaration (a param, a buffer's size): the
//!   declaration is the line a user changes.

use super::decls::Decls;
use crate::trace::{Replayed, TraceStep};
use crate::tracefile::statement_text;
use phasecheck_model::lang::ast::Span;
use phasecheck_model::lang::diag::line_col;
use phasecheck_model::program::ir::{IOp, Instr, InstrKind};
use phasecheck_model::rt::copies::CopyOp;
use phasecheck_model::rt::mbarrier::MbarOp;
use phasecheck_model::rt::proxy::ProxyOp;
use phasecheck_model::rt::{Action, Model, Obs, Violation};
use phasecheck_model::ViolationKind;

/// The statement to name for violation `v` raised at step `i`, and the clause that says why,
/// when it is not the step's own.
pub(super) fn relocate(model: &Model, source: &str, decls: &Decls, r: &Replayed, i: usize, v: &Violation) -> Option<(Span, String)> {
    let s = &r.steps[i];
    let at = |span: Span, why: &str| {
        (
            span,
            format!(
                "; {why} at line {} `{}`",
                line_col(source, span.start as usize).0,
                statement_text(source, span)
            ),
        )
    };
    match v.kind {
        ViolationKind::OverArrival => announcing_arrival(model, r, i).map(|j| {
            // The same statement again (a loop): nothing between the two arrivals waited for
            // the phase, and the wait belongs after the thread's last statement before it.
            match (r.steps[j].span == s.span).then(|| last_step_before(r, j, i)).flatten() {
                Some(k) => at(
                    r.steps[k].span,
                    "the same arrival arrived on this phase one iteration earlier, and nothing between waited for it; the wait belongs after",
                ),
                None => at(
                    r.steps[j].span,
                    "the phase's other arrival by the same thread is the arrive_expect_tx",
                ),
            }
        }),
        ViolationKind::StaleRead if !v.message.contains("in flight") => {
            // A counter's value is left by the last add before the read, not written as a version.
            let counter = r.steps[i].obs.iter().any(|o| matches!(o, Obs::Read { buf, .. } if model.proto.buffers[*buf as usize].counter));
            let why = if counter {
                "the value read was left by the add"
            } else {
                "the version read was written"
            };
            version_writer(r, i).map(|j| at(r.steps[j].span, why))
        }
        ViolationKind::DataRace => {
            if let Some(j) = remote_access(model, r, i) {
                if let Some(k) = relaxed_arrive_after(model, r, j, i) {
                    return Some(at(
                        r.steps[k].span,
                        "the writer's cluster arrival after its access into another CTA's memory is relaxed and releases nothing (a releasing cluster_arrive() publishes it)",
                    ));
                }
                return Some(at(r.steps[j].span, "the access into another CTA's memory is"));
            }
            if issues_async_read(model, s) {
                return generic_write(r, i).map(|j| at(r.steps[j].span, "no fence_proxy_async follows the generic write"));
            }
            None
        }
        ViolationKind::Uninitialized if v.message.contains("async proxy") => {
            barrier_init(model, r, i).map(|j| at(r.steps[j].span, "the fence belongs after the init"))
        }
        ViolationKind::Uninitialized if v.message.contains("reaches a barrier of CTA") => {
            unfenced_relaxed_arrive(model, r, i, &v.message).map(|k| {
                at(
                    r.steps[k].span,
                    "the cluster arrival that would carry the peer's inits is relaxed with no fence_mbarrier_init() before it (the fence belongs before it)",
                )
            })
        }
        ViolationKind::Uninitialized if v.message.contains("before it is initialised") => {
            init_statement(model, &r.steps[i]).map(|sp| at(sp, "nothing orders the barrier's init before this use: a syncthreads belongs after the init"))
        }
        ViolationKind::Assertion => local_check(model, s).map(|sp| at(sp, "the failing check is")),
        ViolationKind::MissingWait => {
            uncounted_arrive_ons(model, r, i).map(|sp| at(sp, "the count leaves out the .noinc arrive-ons: declared"))
        }
        ViolationKind::CompletionMisuse => completion_statement(model, s).map(|sp| at(sp, "the completion function's statement is")),
        ViolationKind::Entanglement if warp_shared_by_roles(model, s) => decls
            .warp_size_declaration()
            .map(|sp| at(sp, "the roles share the committing warp: its width is declared")),
        ViolationKind::TxRange => decls
            .bytes_declaration(s.span)
            .map(|sp| at(sp, "the bytes come from the declaration")),
        _ => None,
    }
}

/// The last step of step `i`'s thread after step `j` and before `i`, at another statement.
fn last_step_before(r: &Replayed, j: usize, i: usize) -> Option<usize> {
    let actor = r.steps[i].action;
    (j + 1..i)
        .rev()
        .find(|&k| r.steps[k].action == actor && r.steps[k].span != r.steps[i].span)
}

/// The warp of step `s`'s thread holds lanes of more than one role: a commit there is diverged
/// by the layout itself (roles branch apart), not by an `if` a `syncwarp` would rejoin, so the
/// line to change is the warp width (or the role sizes), not the commit.
fn warp_shared_by_roles(model: &Model, s: &TraceStep) -> bool {
    let Action::Thread(t) = s.action else { return false };
    let threads = &model.proto.threads;
    let Some(me) = threads.get(t as usize) else { return false };
    threads.iter().any(|o| o.cta == me.cta && o.warp == me.warp && o.role != me.role)
}

fn instr_of<'m>(model: &'m Model, s: &TraceStep) -> Option<&'m Instr> {
    let Action::Thread(t) = s.action else { return None };
    model.proto.code_of(t as usize).instrs.get(s.pc as usize)
}

fn raises_tx(s: &TraceStep) -> bool {
    s.changes.iter().any(|c| {
        c.fields
            .iter()
            .any(|f| f.field == "tx" && matches!((f.before.parse::<i64>(), f.after.parse::<i64>()), (Ok(a), Ok(b)) if b > a))
    })
}

/// An earlier step of the same thread that arrived in the phase step `i` over-arrives on and
/// announced bytes there (an `arrive_expect_tx`), with no completion of that barrier between.
fn announcing_arrival(model: &Model, r: &Replayed, i: usize) -> Option<usize> {
    let actor = r.steps[i].action;
    let group = match instr_of(model, &r.steps[i]).map(|x| &x.kind) {
        Some(InstrKind::Op { op: IOp::Mbar(m), .. }) => m.bar().group,
        _ => return None,
    };
    let g = &model.proto.barrier_groups[group as usize];
    let of_group = |b: u16| (g.base..g.base + g.len).contains(&b);
    let mut completed: Vec<u16> = Vec::new();
    for j in (0..i).rev() {
        let e = &r.steps[j];
        for o in &e.obs {
            if let Obs::PhaseCompleted { bar, .. } = o {
                completed.push(*bar);
            }
        }
        if e.action != actor {
            continue;
        }
        let arrived = e
            .obs
            .iter()
            .any(|o| matches!(o, Obs::Arrived { bar, .. } if of_group(*bar) && !completed.contains(bar)));
        if arrived {
            return raises_tx(e).then_some(j);
        }
    }
    None
}

/// A copy landing's arrive-on (step `i`) that runs ahead of the round: its barrier is arrived
/// on by `.noinc` arrive-ons, which count among a phase's arrivals, and its declared count is
/// below the threads that arrive on it plus the threads that run those arrive-ons: the
/// declaration counts only the threads. Returns the declaration's span.
fn uncounted_arrive_ons(model: &Model, r: &Replayed, i: usize) -> Option<Span> {
    let p = &model.proto;
    let s = &r.steps[i];
    if matches!(s.action, Action::Thread(_)) {
        return None;
    }
    let b = s.obs.iter().find_map(|o| match o {
        Obs::Arrived { bar, .. } => Some(*bar),
        _ => None,
    })?;
    let group = p.barrier_groups.iter().position(|g| (g.base..g.base + g.len).contains(&b))? as u16;
    let noinc = |t: usize| {
        p.code_of(t).instrs.iter().any(
            |x| matches!(&x.kind, InstrKind::Op { op: IOp::Copy(CopyOp::CpAsyncArrive { bar, noinc: true }), .. } if bar.group == group),
        )
    };
    let runs_noinc = (0..p.threads.len()).filter(|&t| noinc(t)).count() as i64;
    let mut arrivers: Vec<u16> = Vec::new();
    for e in &r.steps {
        if let Action::Thread(t) = e.action {
            if e.obs.iter().any(|o| matches!(o, Obs::Arrived { bar, .. } if *bar == b)) && !arrivers.contains(&t) {
                arrivers.push(t);
            }
        }
    }
    let info = &p.barriers[b as usize];
    (runs_noinc > 0 && info.count < arrivers.len() as i64 + runs_noinc).then_some(info.span)
}

/// The latest write, or copy landing, before step `i` of the version that step `i` reads.
fn version_writer(r: &Replayed, i: usize) -> Option<usize> {
    let (buf, version) = r.steps[i].obs.iter().find_map(|o| match o {
        Obs::Read { buf, version } => Some((*buf, *version)),
        _ => None,
    })?;
    (0..i).rev().find(|&j| {
        r.steps[j]
            .obs
            .iter()
            .any(|o| matches!(o, Obs::Wrote { buf: b, version: v } | Obs::Landed { buf: b, version: v, .. } if *b == buf && *v == version))
    })
}

/// The buffers step `s` accesses, its async-proxy reads included.
fn buffers(s: &TraceStep) -> Vec<u16> {
    s.obs
        .iter()
        .filter_map(|o| match o {
            Obs::Read { buf, .. } | Obs::Wrote { buf, .. } | Obs::CopyIssued { buf, .. } | Obs::AsyncReadIssued { buf, .. } => Some(*buf),
            _ => None,
        })
        .collect()
}

/// The latest write or copy issue before step `i`, by a thread of another CTA than the
/// buffer's, into a buffer step `i` accesses in its own CTA: a store into the peer's memory
/// that nothing orders (DSMEM), or, when step `i` writes too, a remote copy onto the same bytes
/// (its target is wrong). A read that only came before a remote copy landed is a missing wait,
/// not a wrong target.
fn remote_access(model: &Model, r: &Replayed, i: usize) -> Option<usize> {
    let p = &model.proto;
    if p.cluster <= 1 {
        return None;
    }
    let Action::Thread(actor) = r.steps[i].action else { return None };
    let mine = p.threads[actor as usize].cta as usize;
    let bufs: Vec<u16> = buffers(&r.steps[i])
        .into_iter()
        .filter(|&b| p.cta_of_buffer(b as usize) == mine)
        .collect();
    let writes = r.steps[i]
        .obs
        .iter()
        .any(|o| matches!(o, Obs::Wrote { .. } | Obs::CopyIssued { .. }));
    let remote = |t: u16, buf: u16| bufs.contains(&buf) && p.cta_of_buffer(buf as usize) != p.threads[t as usize].cta as usize;
    (0..i).rev().find(|&j| {
        let Action::Thread(t) = r.steps[j].action else { return false };
        t != actor
            && r.steps[j].obs.iter().any(|o| match o {
                Obs::Wrote { buf, .. } => remote(t, *buf),
                Obs::CopyIssued { buf, .. } => writes && remote(t, *buf),
                _ => false,
            })
    })
}

/// The first `cluster_arrive_relaxed()` of the thread of step `j` after it and before step `i`:
/// the arrival that would have ordered its access for the cluster barrier's waiters, had it
/// released.
fn relaxed_arrive_after(model: &Model, r: &Replayed, j: usize, i: usize) -> Option<usize> {
    let Action::Thread(t) = r.steps[j].action else { return None };
    (j + 1..i).find(|&k| {
        r.steps[k].action == Action::Thread(t)
            && matches!(
                instr_of(model, &r.steps[k]).map(|x| &x.kind),
                Some(InstrKind::ClusterArrive { relaxed: true, .. })
            )
    })
}

/// A peer's barrier used before its init is visible (message "... a barrier of CTA r ..."): the
/// latest relaxed cluster arrival before step `i` by a thread of CTA r that ran no
/// `fence_mbarrier_init()` before it, the arrival that would have carried CTA r's inits.
fn unfenced_relaxed_arrive(model: &Model, r: &Replayed, i: usize, message: &str) -> Option<usize> {
    let cta: u16 = message.split("a barrier of CTA ").nth(1)?.split(' ').next()?.parse().ok()?;
    let of_cta =
        |k: usize| matches!(r.steps[k].action, Action::Thread(t) if model.proto.threads.get(t as usize).is_some_and(|x| x.cta == cta));
    let is = |k: usize, f: &dyn Fn(&InstrKind) -> bool| instr_of(model, &r.steps[k]).is_some_and(|x| f(&x.kind));
    (0..i).rev().find(|&k| {
        of_cta(k)
            && is(k, &|x| matches!(x, InstrKind::ClusterArrive { relaxed: true, .. }))
            && !(0..k).any(|j| {
                r.steps[j].action == r.steps[k].action
                    && is(j, &|x| {
                        matches!(
                            x,
                            InstrKind::Op {
                                op: IOp::Proxy(ProxyOp::FenceMbarrierInit),
                                ..
                            }
                        )
                    })
            })
    })
}

/// Step `s` issues an async-proxy read (a TMA store or a wgmma).
fn issues_async_read(model: &Model, s: &TraceStep) -> bool {
    matches!(
        instr_of(model, s).map(|x| &x.kind),
        Some(InstrKind::Op {
            op: IOp::Proxy(ProxyOp::StoreAsync { .. } | ProxyOp::StorePartAsync { .. } | ProxyOp::Wgmma { .. }),
            ..
        })
    )
}

/// The latest generic write, by any thread, into a buffer the async read at step `i` reads.
fn generic_write(r: &Replayed, i: usize) -> Option<usize> {
    let bufs = buffers(&r.steps[i]);
    (0..i).rev().find(|&j| {
        matches!(r.steps[j].action, Action::Thread(_))
            && r.steps[j]
                .obs
                .iter()
                .any(|o| matches!(o, Obs::Wrote { buf, .. } if bufs.contains(buf)))
    })
}

/// The latest `init` before step `i`.
fn barrier_init(model: &Model, r: &Replayed, i: usize) -> Option<usize> {
    (0..i).rev().find(|&j| {
        matches!(
            instr_of(model, &r.steps[j]).map(|x| &x.kind),
            Some(InstrKind::Op {
                op: IOp::Mbar(MbarOp::Init { .. }),
                ..
            })
        )
    })
}

/// The `init` of the barrier step `s` uses, in the code of any thread (the trace may not have
/// reached it yet): with it in the program, a use before it is a missing order, not a missing
/// init, and the order belongs right after the init.
fn init_statement(model: &Model, s: &TraceStep) -> Option<Span> {
    let group = match instr_of(model, s).map(|x| &x.kind) {
        Some(InstrKind::Op { op: IOp::Mbar(m), .. }) => m.bar().group,
        _ => return None,
    };
    let p = &model.proto;
    (0..p.threads.len()).find_map(|t| {
        p.code_of(t).instrs.iter().find_map(|x| match &x.kind {
            InstrKind::Op {
                op: IOp::Mbar(MbarOp::Init { bar, .. }),
                ..
            } if bar.group == group => Some(x.span),
            _ => None,
        })
    })
}

/// A check the thread ran after the visible instruction of step `s`, in the same step (a
/// token's barrier check before a wait, an `assert`): the local instructions that follow it
/// up to the next visible one or branch.
fn local_check(model: &Model, s: &TraceStep) -> Option<Span> {
    let Action::Thread(t) = s.action else { return None };
    let code = model.proto.code_of(t as usize);
    let mut pc = s.pc as usize + 1;
    for _ in 0..code.instrs.len() {
        let x = code.instrs.get(pc)?;
        if x.visible {
            return None;
        }
        match &x.kind {
            InstrKind::TokenCheck { .. } | InstrKind::Assert(_) => return Some(x.span),
            InstrKind::Jump { to } => pc = *to as usize,
            InstrKind::Branch { .. } | InstrKind::Return => return None,
            _ => pc += 1,
        }
    }
    None
}

/// In the completion function of a barrier step `s` touches: its first wait, or its first
/// operation on the barrier it completes.
fn completion_statement(model: &Model, s: &TraceStep) -> Option<Span> {
    let p = &model.proto;
    let mut bars: Vec<u16> = s.obs.iter().filter_map(super::bar_of).map(|(b, _)| b).collect();
    bars.extend(0..p.barriers.len() as u16);
    bars.into_iter().find_map(|b| {
        let c = p.barriers[b as usize].completion?;
        let group = p.barrier_groups.iter().position(|g| (g.base..g.base + g.len).contains(&b))? as u16;
        p.completions.get(c as usize)?.instrs.iter().find_map(|x| match &x.kind {
            InstrKind::Op { op: IOp::Mbar(m), .. } if matches!(m, MbarOp::Wait { .. }) || m.bar().group == group => Some(x.span),
            _ => None,
        })
    })
}
