//! The statement to blame once a rule has found where an execution went wrong: the `let` or
//! assignment that produced a wrong parity, the `arrive_expect_tx`/`expect_tx` that announced
//! the bytes of a phase, the `wait_group_read`/`wgmma_wait` that left an async read in flight,
//! and the arrival that released a buffer while its reader still used it. Each looks only at
//! what the trace shows; where it finds nothing, the rule's own statement stays the cause.

use super::writers::{locals_read, writers_before};
use crate::trace::Replayed;
use crate::tracefile::statement_text;
use phasecheck_model::lang::ast::BinOp;
use phasecheck_model::lang::ast::Span;
use phasecheck_model::program::ir::{Code, IExpr, IOp, InstrKind, TcOp};
use phasecheck_model::rt::copies::CopyOp;
use phasecheck_model::rt::mbarrier::MbarOp;
use phasecheck_model::rt::proxy::ProxyOp;
use phasecheck_model::rt::{Action, Model, Obs};

/// The statement that last assigned a local the wait at step `i` computes its parity (or token)
/// from, as it stood when the wait ran (`i` past the trace: a wait the thread is blocked at).
/// Only a `let` or an assignment is a writer to blame; a parity computed from a loop counter
/// alone is the round's own, so when it names a wrong phase the stage index (the barrier
/// element the wait picks) is what went wrong, and its writer is blamed instead.
pub(super) fn parity_writer(model: &Model, source: &str, r: &Replayed, actions: &[Action], i: usize) -> Option<(Span, Operand)> {
    let (t, pc) = match r.steps.get(i) {
        Some(step) => match step.action {
            Action::Thread(t) => (t as usize, step.pc),
            _ => return None,
        },
        None => return None,
    };
    wait_writer(model, source, actions, i, t, pc)
}

/// `parity_writer` for thread `t` standing at the wait at `pc` before step `i`.
pub(super) fn wait_writer(model: &Model, source: &str, actions: &[Action], i: usize, t: usize, pc: u32) -> Option<(Span, Operand)> {
    let instr = model.proto.code_of(t).instrs.get(pc as usize)?;
    let (target, index) = match &instr.kind {
        InstrKind::Op {
            op: IOp::Mbar(MbarOp::Wait { target, bar, .. }),
            ..
        } => (target.expr(), bar.index.as_ref()),
        _ => return None,
    };
    let reads = locals_read(target);
    if reads.is_empty() {
        return None;
    }
    let table = writers_before(model, actions, i);
    let assigned = |slot: u16| {
        let span = table.get(t)?.get(slot as usize).copied().flatten()?;
        let text = statement_text(source, span);
        let text = text.trim_start();
        let assignment = text.starts_with("let ")
            || text
                .split_once('=')
                .is_some_and(|(lhs, rhs)| !rhs.starts_with('=') && lhs.trim().chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        (assignment && span != instr.span).then_some(span)
    };
    let index_slots = index.map(locals_read).unwrap_or_default();
    reads
        .iter()
        .find_map(|&s| {
            assigned(s).map(|d| match unflipped_wrap(model.proto.code_of(t), pc, s, d, &index_slots) {
                Some(wrap) => (d, Operand::Unflipped(wrap)),
                None => (d, Operand::Parity),
            })
        })
        .or_else(|| index_slots.iter().find_map(|&s| assigned(s).map(|d| (d, Operand::StageIndex))))
}

/// A parity that no statement of the thread's code flips, in a loop around the wait whose stage
/// index wraps: the wrap (an assignment of a constant, or a `%`, to the index) is where the
/// flip belongs, as in a pipeline-state advance that forgets `phase ^= 1`. The parity's one
/// writer `def` (its `let`) is then right for the first round only.
fn unflipped_wrap(code: &Code, wait: u32, parity: u16, def: Span, index: &[u16]) -> Option<Span> {
    // The innermost loop around the wait: a jump back over it.
    let (head, back) = code
        .instrs
        .iter()
        .enumerate()
        .filter_map(|(k, x)| match x.kind {
            InstrKind::Jump { to } if k as u32 > wait && to <= wait => Some((to as usize, k)),
            _ => None,
        })
        .min_by_key(|(to, k)| k - to)?;
    let flipped = code
        .instrs
        .iter()
        .any(|x| matches!(x.kind, InstrKind::SetLocal { slot, .. } if slot == parity) && x.span != def);
    if flipped {
        return None;
    }
    code.instrs[head..=back].iter().find_map(|x| match &x.kind {
        InstrKind::SetLocal { slot, expr } if index.contains(slot) && matches!(expr, IExpr::Const(_) | IExpr::Binary(BinOp::Rem, ..)) => {
            Some(x.span)
        }
        _ => None,
    })
}

/// Which operand of a wait a blamed writer produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operand {
    Parity,
    StageIndex,
    /// The parity, from a writer right for the first round only: nothing flips it where the
    /// stage index wraps (the span of that wrap).
    Unflipped(Span),
}

impl Operand {
    pub(super) fn name(self) -> &'static str {
        match self {
            Operand::Parity | Operand::Unflipped(_) => "parity",
            Operand::StageIndex => "stage index",
        }
    }
}

/// The latest step before `i` where a thread raised the tx-count of barrier `bar` (by name, as
/// the trace's field changes name it): the `arrive_expect_tx` or `expect_tx` that announced the
/// bytes of the phase that then went wrong.
pub(super) fn tx_announcer(r: &Replayed, i: usize, bar: &str) -> Option<usize> {
    (0..i.min(r.steps.len())).rev().find(|&j| {
        let s = &r.steps[j];
        matches!(s.action, Action::Thread(_))
            && s.changes.iter().any(|c| {
                c.barrier == bar
                    && c.fields
                        .iter()
                        .any(|f| f.field == "tx" && matches!((f.before.parse::<i64>(), f.after.parse::<i64>()), (Ok(a), Ok(b)) if b > a))
            })
    })
}

/// The latest `wait_group`/`wait_group_read`/`wgmma_wait`/`cp_async_wait_*` of thread `t`
/// before step `i`, after its latest TMA store, wgmma or cp.async issue: the wait that should
/// have retired the async access a later access of the same thread races with (its N leaves
/// that group in flight, or the copy was never committed to a group it covers).
pub(super) fn group_wait_before(model: &Model, r: &Replayed, i: usize, t: usize) -> Option<usize> {
    let code = model.proto.code_of(t);
    let kind_at = |j: usize| code.instrs.get(r.steps[j].pc as usize).map(|x| &x.kind);
    for j in (0..i.min(r.steps.len())).rev() {
        if r.steps[j].action != Action::Thread(t as u16) {
            continue;
        }
        match kind_at(j) {
            Some(InstrKind::Op {
                op: IOp::Proxy(ProxyOp::WaitGroup { .. } | ProxyOp::WgmmaWait { .. }) | IOp::Copy(CopyOp::CpAsyncWait { .. }),
                ..
            }) => return Some(j),
            Some(InstrKind::Op {
                op:
                    IOp::Proxy(ProxyOp::StoreAsync { .. } | ProxyOp::StorePartAsync { .. } | ProxyOp::Wgmma { .. })
                    | IOp::Copy(CopyOp::CpAsync { .. }),
                ..
            }) => return None,
            _ => {}
        }
    }
    None
}

/// The buffers step `s` accesses (reads, writes, copy issues).
fn buffers_of(s: &crate::trace::TraceStep) -> Vec<u16> {
    s.obs
        .iter()
        .filter_map(|o| match o {
            Obs::Read { buf, .. } | Obs::Wrote { buf, .. } | Obs::CopyIssued { buf, .. } => Some(*buf),
            _ => None,
        })
        .collect()
}

/// A release that came too early, for the data race at step `i`: of the two threads of the
/// race, one (the user of the buffer) arrived on a barrier phase that the other (the next
/// writer) waited for before its write, while the user's access was not over: it still read
/// the buffer after the arrival, or had issued an async read of it (a wgmma or TMA store)
/// that was still in flight. Returns the step of that arrival.
pub(super) fn early_release(model: &Model, r: &Replayed, i: usize) -> Option<usize> {
    let s = r.steps.get(i)?;
    let Action::Thread(actor) = s.action else { return None };
    let bufs = buffers_of(s);
    if bufs.is_empty() {
        return None;
    }
    let by = |j: usize, t: u16| r.steps[j].action == Action::Thread(t);
    // The latest phase thread `t` waited for before step `k`: (step, barrier, phase).
    let last_wait = |t: u16, k: usize| {
        (0..k).rev().filter(|&j| by(j, t)).find_map(|j| {
            r.steps[j].obs.iter().find_map(|o| match o {
                Obs::Waited { bar, phase } | Obs::TryWait { bar, phase, result: true } => Some((j, *bar, *phase)),
                _ => None,
            })
        })
    };
    // `user`'s arrival on (bar, phase) before step `k`.
    let arrival = |user: u16, bar: u16, phase: i64, k: usize| {
        (0..k).rev().filter(|&j| by(j, user)).find(|&j| {
            r.steps[j]
                .obs
                .iter()
                .any(|o| matches!(o, Obs::Arrived { bar: b, phase: ph, .. } if *b == bar && *ph == phase))
        })
    };
    // The actor reads; the other access is a later write or copy issue by the thread it released.
    let writer = (0..i).rev().find(|&j| {
        !by(j, actor)
            && matches!(r.steps[j].action, Action::Thread(_))
            && r.steps[j]
                .obs
                .iter()
                .any(|o| matches!(o, Obs::Wrote { buf, .. } | Obs::CopyIssued { buf, .. } if bufs.contains(buf)))
    });
    if let Some(k) = writer {
        let Action::Thread(w) = r.steps[k].action else { return None };
        if let Some((wj, bar, phase)) = last_wait(w, k) {
            // The arrival and the read are of one round: the actor did not wait in between.
            let same_round = |j: usize| last_wait(actor, i).is_none_or(|(aw, _, _)| aw < j);
            if let Some(j) = arrival(actor, bar, phase, wj).filter(|&j| same_round(j)) {
                return Some(j);
            }
        }
    }
    // The actor writes; the user released the phase it waited for while its async read of the
    // buffer was still in flight.
    let (wj, bar, phase) = last_wait(actor, i)?;
    let users: Vec<u16> = (0..model.proto.threads.len() as u16).filter(|&u| u != actor).collect();
    users.into_iter().find_map(|u| {
        let j = arrival(u, bar, phase, wj)?;
        let used_before = (0..j).any(|k| by(k, u) && async_reads(model, r, k, &bufs));
        used_before.then_some(j)
    })
}

/// Step `k` issued an async read (wgmma or tcgen05_mma operand, TMA store) of one of `bufs`.
fn async_reads(model: &Model, r: &Replayed, k: usize, bufs: &[u16]) -> bool {
    let Action::Thread(t) = r.steps[k].action else { return false };
    let p = &model.proto;
    let Some(instr) = p.code_of(t as usize).instrs.get(r.steps[k].pc as usize) else {
        return false;
    };
    let refs: Vec<u16> = match &instr.kind {
        InstrKind::Op {
            op: IOp::Proxy(ProxyOp::Wgmma { bufs, .. }),
            ..
        } => bufs.iter().map(|b| b.group).collect(),
        InstrKind::Op {
            op: IOp::Proxy(ProxyOp::StoreAsync { buf } | ProxyOp::StorePartAsync { buf, .. }),
            ..
        } => vec![buf.group],
        InstrKind::Op {
            op: IOp::Tc(TcOp::Mma { bufs, .. }),
            ..
        } => bufs.iter().map(|b| b.group).collect(),
        _ => return false,
    };
    // A reference names a buffer group; the race names an element of it.
    refs.iter().any(|&g| {
        let grp = &p.buffer_groups[g as usize];
        bufs.iter().any(|&b| b >= grp.base && b < grp.base + grp.len)
    })
}
