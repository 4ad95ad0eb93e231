//! Causes read from the protocol's structure rather than from one step: a barrier's declared
//! count against the arrivals its users make, and a violation of the initial state against
//! the declaration it comes from.
//!
//! A deadlock on a barrier whose phase 0 never completes, although every thread that arrives
//! on it in any explored execution has arrived, is a count the protocol cannot reach: the
//! declaration is the line to change (an elected lane per warp on a count of four lanes, a
//! cp.async arrive-on counted as an arrival). Where an earlier phase did complete, the count is
//! reachable and the missing arrival is the mistake, so the declaration is not blamed; nor in a
//! cluster, where a remote arrival that is missing looks the same.
//!
//! A phase whose bytes never land in full, when a copy on it moved fewer bytes than its buffer
//! holds and the missing bytes are exactly that difference: the copy's size is the mistake, not
//! the announcement (which counted the whole buffer).

use super::{Divergence, Mismatch, Rule};
use crate::trace::Replayed;
use crate::tracefile::statement_text;
use phasecheck_model::lang::diag::line_col;
use phasecheck_model::program::ir::{IOp, InstrKind};
use phasecheck_model::rt::mbarrier::{BarrierState, MbarOp};
use phasecheck_model::rt::{Action, Model, Obs};
use std::collections::{BTreeMap, BTreeSet};

/// Per barrier: the threads that arrive on it anywhere in `traces`, and the most lanes any one
/// of them contributes in a phase (a uniform agent's arrival counts its warp's lanes).
pub(super) type Arrivals = BTreeMap<u16, BTreeMap<usize, i64>>;

pub(super) fn arrivals_of(traces: &[Replayed]) -> Arrivals {
    let mut m: Arrivals = BTreeMap::new();
    for r in traces {
        // (thread, barrier, phase) -> lanes arrived.
        let mut per_phase: BTreeMap<(usize, u16, i64), i64> = BTreeMap::new();
        for s in &r.steps {
            let Action::Thread(t) = s.action else { continue };
            for o in &s.obs {
                if let Obs::Arrived { bar, phase, count } = o {
                    *per_phase.entry((t as usize, *bar, *phase)).or_insert(0) += count;
                }
            }
        }
        for ((t, b, _), n) in per_phase {
            let e = m.entry(b).or_default().entry(t).or_insert(0);
            *e = (*e).max(n);
        }
    }
    m
}

/// The barrier `b` of a deadlock, in state `st` at the end (stuck in phase 0, short of arrivals):
/// a count mismatch at its declaration when every thread that ever arrives on it arrived in
/// that phase and some did (a barrier nobody arrives on lacks an arrival, not a count).
pub(super) fn unreachable_count(
    model: &Model,
    source: &str,
    r: &Replayed,
    all: &Arrivals,
    b: u16,
    st: &BarrierState,
) -> Option<Divergence> {
    let p = &model.proto;
    let (phase, expected, arrived) = (st.phase, st.expected, st.expected - st.pending);
    // In a cluster another CTA's threads may be meant to arrive remotely: the local arrivals do
    // not bound what the count means there.
    if p.cluster > 1 || phase != 0 || arrived <= 0 || arrived >= expected {
        return None;
    }
    let users = all.get(&b)?;
    let here: BTreeSet<usize> = r
        .steps
        .iter()
        .filter_map(|s| match s.action {
            Action::Thread(t) if s.obs.iter().any(|o| matches!(o, Obs::Arrived { bar, phase: 0, .. } if *bar == b)) => Some(t as usize),
            _ => None,
        })
        .collect();
    if !users.keys().all(|t| here.contains(t)) {
        return None;
    }
    let possible: i64 = users.values().sum();
    if possible >= expected {
        return None;
    }
    let info = &p.barriers[b as usize];
    let line = line_col(source, info.span.start as usize).0;
    let mut roles: Vec<String> = Vec::new();
    for t in users.keys() {
        let r = &p.roles[p.threads[*t].role as usize].name;
        if !roles.contains(r) {
            roles.push(r.clone());
        }
    }
    Some(Divergence {
        raised: None,
        rule: Rule::CountMismatch,
        step: r.steps.len(),
        span: Some(info.span),
        bar: Some(b),
        phase: Some(0),
        mismatch: Some(Mismatch {
            what: "arrivals per phase (count) vs arrivals per round".into(),
            expected: info.count,
            actual: possible,
        }),
        what: format!(
            "{} is declared at line {line} `{}` with count {}, but the arrivals on it ({} of role {}) make {possible} per phase: phase 0 never completes",
            info.name,
            statement_text(source, info.span),
            info.count,
            users.len(),
            roles.join(", "),
        ),
    })
}

/// A violation of the initial state names the declaration it comes from: the barrier (the
/// longest declared name) its message is about.
pub(super) fn initial(model: &Model, source: &str, kind: phasecheck_model::ViolationKind, message: &str) -> Divergence {
    let p = &model.proto;
    let b = (0..p.barriers.len())
        .filter(|&b| {
            let n = &p.barriers[b].name;
            message.split(|c: char| c.is_whitespace() || c == ':' || c == ',').any(|w| w == n) || message.contains(&format!("{n} "))
        })
        .max_by_key(|&b| p.barriers[b].name.len());
    let what = match b {
        Some(b) => format!(
            "{kind} in the initial state, from the declaration at line {} `{}`: {message}",
            line_col(source, p.barriers[b].span.start as usize).0,
            statement_text(source, p.barriers[b].span)
        ),
        None => format!("{kind} in the initial state: {message}"),
    };
    Divergence {
        raised: Some(kind),
        rule: Rule::FirstViolation,
        step: 0,
        span: b.map(|b| p.barriers[b].span),
        bar: b.map(|b| b as u16),
        phase: None,
        mismatch: None,
        what,
    }
}

/// Step `i` of thread `t` arrives more times at once (the lanes of a uniform warp, or an arrival
/// count) than the barrier counts: the phase completes part-way through the warp's arrival.
pub(super) fn warp_over_count(model: &Model, source: &str, s: &crate::trace::TraceStep, i: usize, t: usize) -> Option<Divergence> {
    let p = &model.proto;
    // Per barrier: the arrivals of this one step and the phase of the first.
    let mut at_once: BTreeMap<u16, (i64, i64)> = BTreeMap::new();
    for o in &s.obs {
        if let Obs::Arrived { bar, phase, count } = o {
            at_once.entry(*bar).or_insert((*phase, 0)).1 += count;
        }
    }
    let (bar, (phase, lanes)) = at_once
        .into_iter()
        .find(|(b, (_, n))| *n > 1 && *n > p.barriers[*b as usize].count)?;
    let info = &p.barriers[bar as usize];
    Some(Divergence {
        raised: None,
        rule: Rule::CountMismatch,
        step: i,
        span: Some(s.span),
        bar: Some(bar),
        phase: Some(phase),
        mismatch: Some(Mismatch {
            what: "arrivals per phase (count) vs arrivals per round".into(),
            expected: info.count,
            actual: lanes,
        }),
        what: format!(
            "{} at line {} `{}` on {}, a count-{} barrier: its phase {phase} completes part-way through one step's arrivals{}",
            if p.roles[p.threads[t].role as usize].uniform {
                format!(
                    "the {lanes} lanes of {} arrive together",
                    p.thread_label(t).split(" (").next().unwrap_or_default()
                )
            } else {
                format!("{} arrives {lanes} times at once", p.thread_label(t))
            },
            line_col(source, s.span.start as usize).0,
            statement_text(source, s.span),
            info.name,
            info.count,
            if p.roles[p.threads[t].role as usize].uniform {
                " (elect one lane to arrive, or count the lanes)"
            } else {
                ""
            }
        ),
    })
}

/// The deadlocked barrier `b`, in phase `ph` and `missing` bytes short: the step of the copy
/// on it, in that phase, that moved fewer bytes than its buffer holds, when the bytes the
/// short copies leave out are exactly the missing ones.
pub(super) fn short_copy(model: &Model, r: &Replayed, b: u16, ph: i64, missing: i64) -> Option<usize> {
    let p = &model.proto;
    let mut now = 0;
    let mut short = Vec::new();
    let mut left_out = 0;
    for (j, s) in r.steps.iter().enumerate() {
        for o in &s.obs {
            match o {
                Obs::CopyIssued { buf, bar, bytes, .. } if *bar == b && now == ph => {
                    let whole = p.buffers[*buf as usize].bytes;
                    if *bytes < whole {
                        short.push(j);
                        left_out += whole - bytes;
                    }
                }
                Obs::PhaseCompleted { bar, phase, .. } if *bar == b => now = phase + 1,
                _ => {}
            }
        }
    }
    (left_out == missing && !short.is_empty()).then(|| short[0])
}

/// The deadlocked barrier `b` (in state `st` at the end of `r`), short of arrivals: the
/// statement of a thread that has exited without arriving in the stuck phase, though it
/// arrived on `b` (or another element of its array) before, or announced bytes on `b`: its last
/// such step (a thread that dropped out with `arrive_and_drop` owes nothing). That is where its part of the protocol was cut short (a loop one round short, an
/// arrival moved past a `break`, a fixed element where the stage's was meant, an `expect_tx`
/// with no arrival), while the wait that starves only shows it.
pub(super) fn exited_arriver(model: &Model, r: &Replayed, b: u16, st: &BarrierState) -> Option<usize> {
    let p = &model.proto;
    let last = r.last.as_ref()?;
    let group = p
        .barrier_groups
        .iter()
        .find(|g| (g.base..g.base + g.len).contains(&b))
        .map(|g| g.base..g.base + g.len)
        .unwrap_or(b..b + 1);
    let name = &p.barriers[b as usize].name;
    let done = |t: usize| last.threads[t].status == phasecheck_model::rt::state::Status::Done;
    // Per exited thread: its last arrival on the group, its last byte announcement on `b`, and
    // whether it arrived in the stuck phase.
    let mut arrival: BTreeMap<usize, usize> = BTreeMap::new();
    let mut announced: BTreeMap<usize, usize> = BTreeMap::new();
    let mut in_phase: BTreeSet<usize> = BTreeSet::new();
    let mut dropped: BTreeSet<usize> = BTreeSet::new();
    for (j, s) in r.steps.iter().enumerate() {
        let Action::Thread(t) = s.action else { continue };
        let t = t as usize;
        if !done(t) {
            continue;
        }
        for o in &s.obs {
            if let Obs::Arrived { bar, phase, .. } = o {
                if group.contains(bar) {
                    arrival.insert(t, j);
                }
                if *bar == b && *phase == st.phase {
                    in_phase.insert(t);
                }
            }
        }
        // A thread that dropped out of the barrier (its count lowered: arrive_and_drop) owes
        // it nothing more.
        let names: Vec<&str> = group.clone().map(|g| p.barriers[g as usize].name.as_str()).collect();
        let drops = s.changes.iter().any(|c| {
            names.contains(&c.barrier.as_str())
                && c.fields
                    .iter()
                    .any(|f| f.field == "expected" && matches!((f.before.parse::<i64>(), f.after.parse::<i64>()), (Ok(x), Ok(y)) if y < x))
        });
        if drops {
            dropped.insert(t);
        }
        let raises_tx = s.changes.iter().any(|c| {
            &c.barrier == name
                && c.fields
                    .iter()
                    .any(|f| f.field == "tx" && matches!((f.before.parse::<i64>(), f.after.parse::<i64>()), (Ok(x), Ok(y)) if y > x))
        });
        if raises_tx {
            announced.insert(t, j);
        }
    }
    let cut = |m: &BTreeMap<usize, usize>| {
        m.iter()
            .filter(|(t, _)| !in_phase.contains(t) && !dropped.contains(t))
            .map(|(_, j)| *j)
            .max()
    };
    cut(&arrival).or_else(|| cut(&announced))
}

/// The thread `t` exited through a `return` (its pc rests on it): that statement, where a
/// thread that still owes arrivals should have dropped out of the barrier.
pub(super) fn return_of(model: &Model, r: &Replayed, t: usize) -> Option<phasecheck_model::lang::ast::Span> {
    let last = r.last.as_ref()?;
    let th = last.threads.get(t)?;
    if th.status != phasecheck_model::rt::state::Status::Done {
        return None;
    }
    let x = model.proto.code_of(t).instrs.get(th.pc as usize)?;
    matches!(x.kind, InstrKind::Return).then_some(x.span)
}

/// In a cluster, the deadlocked barrier `b` of CTA c, short of arrivals: the latest arrival, by
/// a thread of another CTA, on the same declared barrier in a CTA other than c, when that CTA's
/// threads never arrive on `b` itself: the arrival whose target is wrong (its own CTA's copy, or
/// the wrong rank), or that lacks its remote twin.
pub(super) fn misdirected_arrival(model: &Model, r: &Replayed, b: u16) -> Option<usize> {
    let p = &model.proto;
    if p.cluster <= 1 {
        return None;
    }
    let c = p.cta_of_barrier(b as usize);
    let local = p.barrier_in_cta(b as usize);
    let arrives = |s: &crate::trace::TraceStep, pred: &dyn Fn(usize) -> bool| {
        s.obs.iter().any(|o| matches!(o, Obs::Arrived { bar, .. } if pred(*bar as usize)))
    };
    let thread_cta = |s: &crate::trace::TraceStep| match s.action {
        Action::Thread(t) => Some(p.threads[t as usize].cta as usize),
        _ => None,
    };
    let reached: BTreeSet<usize> = r
        .steps
        .iter()
        .filter(|s| arrives(s, &|x| x == b as usize))
        .filter_map(thread_cta)
        .collect();
    (0..r.steps.len()).rev().find(|&j| {
        let s = &r.steps[j];
        let Some(from) = thread_cta(s) else { return false };
        from != c && !reached.contains(&from) && arrives(s, &|x| p.barrier_in_cta(x) == local && p.cta_of_barrier(x) != c)
    })
}

/// The deadlocked barrier `b`, on whose declared group no thread arrives in any explored
/// execution: the first arrival statement on that group whose guard (the innermost branch over
/// it) some thread of its role saw skip the body while no execution ran the arrival: the guard admits
/// no thread that runs it (an index of another role, a lane that is not there). An arrival
/// never reached because its thread blocked before it is not this.
pub(super) fn unreached_arrival(
    model: &Model,
    all: &Arrivals,
    reached: &[BTreeSet<u32>],
    b: u16,
) -> Option<phasecheck_model::lang::ast::Span> {
    let p = &model.proto;
    let g = p.barrier_groups.iter().position(|g| (g.base..g.base + g.len).contains(&b))?;
    let grp = &p.barrier_groups[g];
    if (grp.base..grp.base + grp.len).any(|x| all.get(&x).is_some_and(|m| !m.is_empty())) {
        return None;
    }
    let mut spans: Vec<phasecheck_model::lang::ast::Span> = Vec::new();
    for (ri, role) in p.roles.iter().enumerate() {
        let seen = reached.get(ri)?;
        for (k, x) in role.code.instrs.iter().enumerate() {
            let arrival = matches!(&x.kind, InstrKind::Op { op: IOp::Mbar(m @ MbarOp::Arrive { .. }), .. } if m.bar().group as usize == g);
            if !arrival || seen.contains(&(k as u32)) {
                continue;
            }
            let guard = (0..k)
                .rev()
                .find(|&q| matches!(role.code.instrs[q].kind, InstrKind::Branch { else_to, .. } if else_to as usize > k));
            if guard.is_some_and(|q| seen.contains(&(q as u32 | super::writers::SKIPPED))) {
                spans.push(x.span);
            }
        }
    }
    spans.sort_by_key(|s| s.start);
    spans.first().copied()
}

/// A deadlock where a thread waits at a CTA-wide barrier (`syncthreads`) for threads that
/// themselves wait on barrier `b`, whose arrival that thread makes only after the CTA barrier:
/// the wait on `b` comes before the CTA barrier it should follow. Returns the wait's statement.
pub(super) fn wait_before_cta_barrier(model: &Model, r: &Replayed) -> Option<phasecheck_model::lang::ast::Span> {
    let p = &model.proto;
    let last = r.last.as_ref()?;
    let at = |t: usize| p.code_of(t).instrs.get(last.threads[t].pc as usize);
    let blocked = |t: usize| last.threads[t].status != phasecheck_model::rt::state::Status::Done;
    let at_cta: Vec<usize> = (0..p.threads.len())
        .filter(|&t| blocked(t) && matches!(at(t).map(|x| &x.kind), Some(InstrKind::SyncThreads)))
        .collect();
    if at_cta.is_empty() {
        return None;
    }
    (0..p.threads.len()).filter(|&t| blocked(t)).find_map(|t| {
        let x = at(t)?;
        let InstrKind::Op {
            op: IOp::Mbar(MbarOp::Wait { bar, .. }),
            ..
        } = &x.kind
        else {
            return None;
        };
        let later_arrival = at_cta.iter().any(|&u| {
            let code = p.code_of(u);
            code.instrs[last.threads[u].pc as usize..]
                .iter()
                .any(|y| matches!(&y.kind, InstrKind::Op { op: IOp::Mbar(m @ MbarOp::Arrive { .. }), .. } if m.bar().group == bar.group))
        });
        later_arrival.then_some(x.span)
    })
}

/// Every async copy issued along `r` that has not landed at its end: the step of the earliest.
pub(super) fn copy_in_flight(r: &Replayed) -> Option<usize> {
    let mut open: Vec<(usize, u16, i64)> = Vec::new();
    for (j, s) in r.steps.iter().enumerate() {
        for o in &s.obs {
            match o {
                Obs::CopyIssued { buf, version, .. } => open.push((j, *buf, *version)),
                Obs::Landed { buf, version, .. } => {
                    if let Some(k) = open.iter().position(|x| x.1 == *buf && x.2 == *version) {
                        open.remove(k);
                    }
                }
                _ => {}
            }
        }
    }
    open.first().map(|x| x.0)
}
