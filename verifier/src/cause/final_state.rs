//! The cause of a violation of the final state (a deadlock, a blocked stale wait, an exit
//! under a copy): where the thread the explanation is about stands, refined to the statement
//! the state's facts lead back to (the announcement of bytes that never land, the part of an
//! exited thread cut short, an arrival aimed elsewhere or never reached, a copy nobody waited for).

use super::{blame, decls, structure, Divergence, Mismatch, Rule};
use crate::trace::Replayed;
use crate::tracefile::statement_text;
use phasecheck_model::lang::ast::Span;
use phasecheck_model::lang::diag::line_col;
use phasecheck_model::rt::state::Status;
use phasecheck_model::rt::{Action, Model, Obs};
use phasecheck_model::ViolationKind;

/// A violation of the final state: where the first blocked thread stands, and the model's
/// explanation cut to that thread (the others are counted, not listed, to keep one line).
pub(super) fn final_state(
    model: &Model,
    source: &str,
    r: &Replayed,
    actions: &[Action],
    all: &structure::Arrivals,
    executed: &[std::collections::BTreeSet<u32>],
    decls: &decls::Decls,
    kind: ViolationKind,
    message: &str,
) -> Divergence {
    let p = &model.proto;
    let mut span = None;
    // The bytes a phase waits for that never land (for a declaration they come from).
    let mut missing_bytes = 0;
    let mut bar = None;
    let mut phase = None;
    let mut mismatch = None;
    // For a phase whose bytes never add up: the step that announced them.
    let mut announced: Option<usize> = None;
    // ... or the copy that moved less than its buffer, when that is what the phase lacks.
    let mut short: Option<usize> = None;
    // For a phase short of arrivals: the last step of a thread that exited without its arrival
    // (and the `return` it exited by, when it took one).
    let mut cut_short: Option<(usize, Option<Span>)> = None;
    // ... or an arrival aimed at another CTA's copy of the barrier, or one no execution reaches.
    let mut misdirected: Option<usize> = None;
    let mut unreached: Option<Span> = None;
    // A deadlock's explanation is one clause per blocked thread.
    let clauses: Vec<&str> = if kind == ViolationKind::Deadlock {
        top_level_clauses(message)
    } else {
        vec![message]
    };
    let first = clauses[0];
    if let Some(last) = &r.last {
        let mut en = Vec::new();
        model.actions(last, &mut en);
        let stuck = |t: usize| last.threads[t].status != Status::Done && !en.contains(&Action::Thread(t as u16));
        // The thread the explanation is about (its first clause starts with its label), else
        // the first blocked one.
        let subject = (0..last.threads.len())
            .filter(|_| kind != ViolationKind::Deadlock)
            .filter(|&t| {
                let l = p.thread_label(t);
                first.starts_with(&l) && !first[l.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())
            })
            .max_by_key(|&t| p.thread_label(t).len())
            .filter(|&t| last.threads[t].status != Status::Done);
        span = subject
            .or_else(|| (0..last.threads.len()).find(|&t| stuck(t)))
            .and_then(|t| p.code_of(t).instrs.get(last.threads[t].pc as usize))
            .map(|i| i.span);
    }
    // A count no execution can reach, on any barrier the deadlock leaves short of arrivals (the
    // first clause may be about a barrier whose arrivers wait on that one).
    if let (Some(last), true) = (&r.last, kind == ViolationKind::Deadlock) {
        for (b, st) in last.barriers.iter().enumerate() {
            if st.pending > 0 {
                if let Some(d) = structure::unreachable_count(model, source, r, all, b as u16, st) {
                    return d;
                }
            }
        }
    }
    // The barrier the first clause is about: the longest declared name it mentions as
    // "... of NAME".
    if let Some(b) = (0..p.barriers.len())
        .filter(|&b| {
            let n = &p.barriers[b].name;
            first.contains(&format!(" of {n} ")) || first.ends_with(&format!(" of {n}"))
        })
        .max_by_key(|&b| p.barriers[b].name.len())
    {
        bar = Some(b as u16);
        if let Some(last) = &r.last {
            let st = &last.barriers[b];
            phase = Some(st.phase);
            if st.pending > 0 && kind == ViolationKind::Deadlock {
                misdirected = structure::misdirected_arrival(model, r, b as u16);
                unreached = structure::unreached_arrival(model, all, executed, b as u16);
                cut_short = structure::exited_arriver(model, r, b as u16, st).map(|j| {
                    (
                        j,
                        match r.steps[j].action {
                            Action::Thread(t) => structure::return_of(model, r, t as usize),
                            _ => None,
                        },
                    )
                });
                mismatch = Some(Mismatch {
                    what: format!("arrivals phase {} expects vs arrivals made", st.phase),
                    expected: st.expected,
                    actual: st.expected - st.pending,
                });
            }
            // The barrier whose bytes never land: the clause's own, or, when its arrivals are
            // short for no reason found above, one whose waiters are the threads that would
            // make them (the chain of waits ends at bytes no copy brings).
            let found = misdirected.is_some() || unreached.is_some() || cut_short.is_some();
            let starved = if st.tx != 0 {
                Some(b)
            } else if st.pending > 0 && !found {
                (0..last.barriers.len()).find(|&x| last.barriers[x].tx > 0)
            } else {
                None
            };
            if let (Some(b), ViolationKind::Deadlock) = (starved, kind) {
                let st = &last.barriers[b];
                bar = Some(b as u16);
                phase = Some(st.phase);
                missing_bytes = st.tx;
                short = structure::short_copy(model, r, b as u16, st.phase, st.tx);
                announced = blame::tx_announcer(r, r.steps.len(), &p.barriers[b].name).filter(|_| short.is_none());
                mismatch = Some(Mismatch {
                    what: format!("bytes phase {} expects vs bytes landed", st.phase),
                    expected: st.tx.max(0) + landed_in(r, b as u16, st.phase),
                    actual: landed_in(r, b as u16, st.phase),
                });
            }
        }
    }
    let more = clauses.len() - 1;
    let head = match span {
        Some(sp) => format!(
            "{kind} at line {} `{}`",
            line_col(source, sp.start as usize).0,
            statement_text(source, sp)
        ),
        None => kind.to_string(),
    };
    let what = if more == 0 {
        format!("{head}: {first}")
    } else {
        // Who each other clause is about: the labels before its verb.
        let others: Vec<&str> = clauses[1..].iter().map(|c| c.split(" wait").next().unwrap_or(c).trim()).collect();
        format!("{head}: {first} (and {more} more: {})", others.join(", "))
    };
    // A thread blocked at a wait whose parity now names a later phase than the program meant
    // (parity aliasing): the parity is wrong, and the statement that produced it is the cause.
    let mut aliased = None;
    if let (Some(last), true) = (&r.last, kind == ViolationKind::Deadlock) {
        for c in &clauses {
            if !c.contains("though the program meant") {
                continue;
            }
            let Some(t) = (0..last.threads.len()).find(|&t| c.starts_with(&p.thread_label(t))) else {
                continue;
            };
            if let Some(d) = blame::wait_writer(model, source, actions, actions.len(), t, last.threads[t].pc) {
                aliased = Some(d);
                break;
            }
        }
    }
    let was_aliased = aliased.is_some();
    let (span, what) = match aliased {
        Some((d, operand)) => {
            let mut what = format!(
                "{what}; the {} comes from `{}` at line {}",
                operand.name(),
                statement_text(source, d),
                line_col(source, d.start as usize).0
            );
            // A loop of local assignments around the writer: its trip count decides the value.
            let n = decls.trip_count_declaration(d);
            if let Some(n) = n {
                what.push_str(&format!(
                    ", in a loop run `{}` times (line {})",
                    statement_text(source, n),
                    line_col(source, n.start as usize).0
                ));
            }
            (Some(n.unwrap_or(d)), what)
        }
        None => (span, what),
    };
    // Each later finding moves the cause to the statement of its step and adds its clause.
    let (mut span, mut what) = (span, what);
    let step_at = |j: usize| {
        let a = r.steps[j].span;
        (a, line_col(source, a.start as usize).0, statement_text(source, a))
    };
    if let Some(j) = announced {
        let (a, line, text) = step_at(j);
        span = Some(a);
        what = format!("{what}; the phase's bytes were announced at line {line} `{text}`");
        if let Some(d) = decls.excess_declaration(a, missing_bytes) {
            span = Some(d);
            what = format!(
                "{what}, whose {missing_bytes} bytes no copy brings come from `{}` at line {}",
                statement_text(source, d),
                line_col(source, d.start as usize).0
            );
        }
    }
    if let Some((j, ret)) = cut_short.filter(|_| !was_aliased && misdirected.is_none()) {
        let (a, line, text) = step_at(j);
        let who = match r.steps[j].action {
            Action::Thread(t) => p.thread_label(t as usize),
            _ => String::new(),
        };
        span = Some(a);
        what = format!("{what}; {who} exits without its arrival on that phase: its part ends after line {line} `{text}`");
        if let Some(ret) = ret {
            span = Some(ret);
            what = format!(
                "{what}, at the return at line {} (arrive_and_drop there releases the barrier)",
                line_col(source, ret.start as usize).0
            );
        }
    }
    if let Some(j) = misdirected.filter(|_| !was_aliased) {
        let (a, line, text) = step_at(j);
        span = Some(a);
        what = format!("{what}; the arrival at line {line} `{text}` lands on another CTA's copy of the barrier, and no thread of its CTA arrives on this one");
    }
    if let Some(u) = unreached.filter(|_| !was_aliased) {
        span = Some(u);
        what = format!(
            "{what}; no execution reaches the arrival at line {} `{}` (its guard admits no thread that runs it)",
            line_col(source, u.start as usize).0,
            statement_text(source, u)
        );
    }
    if kind == ViolationKind::Deadlock && !was_aliased {
        if let Some(w) = structure::wait_before_cta_barrier(model, r) {
            span = Some(w);
            what = format!(
                "{what}; the wait at line {} `{}` comes before the CTA barrier whose other side makes its arrival",
                line_col(source, w.start as usize).0,
                statement_text(source, w)
            );
        }
    }
    if kind == ViolationKind::Lifetime && span.is_none() {
        if let Some(j) = structure::copy_in_flight(r) {
            let (a, line, text) = step_at(j);
            span = Some(a);
            what = format!("{what}; nothing waits for the copy issued at line {line} `{text}` before the exit");
        }
    }
    if let Some(j) = short {
        let (a, line, text) = step_at(j);
        span = Some(a);
        what = format!("{what}; the copy at line {line} `{text}` moves fewer bytes than its buffer holds, the bytes the phase lacks");
    }
    Divergence {
        raised: None,
        rule: Rule::FinalState,
        step: r.steps.len(),
        span,
        bar,
        phase,
        mismatch,
        what,
    }
}

/// Bytes that landed on barrier `b` while it was in phase `ph`, along the trace.
fn landed_in(r: &Replayed, b: u16, ph: i64) -> i64 {
    let mut now = 0;
    let mut sum = 0;
    for s in &r.steps {
        for o in &s.obs {
            match o {
                Obs::Landed { bar, bytes, .. } | Obs::LandedPart { bar, bytes, .. } if *bar == b && now == ph => sum += bytes,
                Obs::PhaseCompleted { bar, phase, .. } if *bar == b => now = phase + 1,
                _ => {}
            }
        }
    }
    sum
}

/// The clauses of a deadlock explanation: split at `; ` outside parentheses (a clause's own
/// advice may hold `; ` inside its parentheses).
fn top_level_clauses(m: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    let bytes = m.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b';' if depth == 0 && bytes.get(i + 1) == Some(&b' ') => {
                out.push(&m[start..i]);
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&m[start..]);
    out
}
