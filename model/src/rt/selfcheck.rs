//! The semantic self-check: after a step, re-derive the invariants of SEMANTICS.md from the two
//! states and the step's observations, independently of how `step` computed them.
//!
//! The search runs it when asked (`--self-check`, and always in the test suite). A failure is a
//! bug in the model, reported as an internal error naming the rule (docs/model.md, "Invariants"),
//! never a verdict. Each rule reads only plain facts (counts, phases, observation order), so a
//! step that passes an impossible wait or loses an arrival cannot also fool the check.

use crate::program::ir::{IOp, InstrKind, MbarOp, MAX_COUNT};
use crate::rt::state::{CopyKind, Life, State, Status};
use crate::rt::{Action, InternalError, Model, Obs, Outcome};

fn broken(rule: &'static str, message: String) -> Result<(), InternalError> {
    Err(InternalError { rule, message })
}

/// Invariants of one state.
pub fn state(model: &Model, s: &State) -> Result<(), InternalError> {
    let p = &model.proto;
    for (b, bs) in s.barriers.iter().enumerate() {
        let name = &p.barriers[b].name;
        if bs.life == Life::Live {
            // A `cp_async_arrive` without `.noinc` holds one extra pending arrival until
            // its arrive-on fires.
            let held = s
                .copies
                .iter()
                .filter(|c| c.kind == CopyKind::ArriveOn { noinc: false } && c.bar as usize == b)
                .count() as i64;
            if !(0 <= bs.pending && bs.pending <= bs.expected + held && (1..=MAX_COUNT).contains(&bs.expected)) {
                return broken(
                    "I-COUNTS",
                    format!(
                        "{name}: pending {} and expected {} break 0 <= pending <= expected, 1 <= expected",
                        bs.pending, bs.expected
                    ),
                );
            }
            if bs.arrived < 0 || bs.pending + bs.arrived < bs.expected {
                return broken(
                    "I-ARRIVED",
                    format!(
                        "{name}: pending {} + arrivals made {} is less than expected {} (drops only lower expected)",
                        bs.pending, bs.arrived, bs.expected
                    ),
                );
            }
            if bs.tx.abs() > MAX_COUNT {
                return broken("I-TX", format!("{name}: tx {} outside the PTX range", bs.tx));
            }
            if bs.pending == 0 && bs.tx == 0 {
                return broken(
                    "I-ATOMIC-COMPLETION",
                    format!(
                        "{name}: phase {} has every arrival and no tx outstanding, yet has not completed",
                        bs.phase
                    ),
                );
            }
        }
    }
    let phase_of = |b: usize| s.barriers[b].phase;
    let over = |known: &[i64]| known.iter().enumerate().find(|&(b, &k)| k > phase_of(b)).map(|(b, &k)| (b, k));
    for (t, th) in s.threads.iter().enumerate() {
        if let Some((b, k)) = over(&th.known) {
            return broken(
                "I-KNOWLEDGE",
                format!(
                    "{} knows phase {k} of {}, which is only in phase {}",
                    p.thread_label(t),
                    p.barriers[b].name,
                    phase_of(b)
                ),
            );
        }
    }
    for (holder, known) in s
        .barriers
        .iter()
        .flat_map(|x| [&x.known, &x.prev_known])
        .chain(s.engines_known.iter())
        .enumerate()
    {
        if let Some((b, k)) = over(known) {
            return broken(
                "I-KNOWLEDGE",
                format!(
                    "released knowledge #{holder} says phase {k} of {}, which is only in phase {}",
                    p.barriers[b].name,
                    phase_of(b)
                ),
            );
        }
    }
    for (d, cell) in s.buffers.iter().enumerate() {
        let flying = s.copies.iter().any(|c| c.is_copy() && c.buf as usize == d);
        if cell.in_flight != flying {
            return broken(
                "I-IN-FLIGHT",
                format!(
                    "{}: in_flight is {} but {} copy into it is in flight",
                    p.buffers[d].name,
                    cell.in_flight,
                    if flying { "a" } else { "no" }
                ),
            );
        }
    }
    Ok(())
}

/// Invariants of one transition `pre --a--> out`, then of the state it reaches.
pub fn transition(model: &Model, pre: &State, a: Action, out: &Outcome) -> Result<(), InternalError> {
    let p = &model.proto;
    let Some(ev) = &out.event else {
        return broken("I-EVENT", "a step without an event".to_string());
    };
    if let Action::Thread(t) = a {
        // A thread waiting in an `elect()` steps once more: the election that releases its warp.
        let electing = pre.threads[t as usize].status == Status::AtSyncWarp
            && matches!(
                p.code_of(t as usize)
                    .instrs
                    .get(pre.threads[t as usize].pc as usize)
                    .map(|i| &i.kind),
                Some(crate::program::ir::InstrKind::Elect { .. })
            )
            && ev.obs.iter().any(|o| matches!(o, Obs::Elected { thread } if *thread == t));
        if pre.threads[t as usize].status != Status::Running && !electing {
            return broken("I-SCHEDULE", format!("{} stepped while not running", p.thread_label(t as usize)));
        }
    }
    // Replay the observations on a shadow of each barrier's phase and counts.
    let n = pre.barriers.len();
    let mut phase: Vec<i64> = pre.barriers.iter().map(|b| b.phase).collect();
    let mut pending: Vec<Option<i64>> = pre.barriers.iter().map(|b| Some(b.pending)).collect();
    let mut arrived: Vec<Option<i64>> = pre.barriers.iter().map(|b| Some(b.arrived)).collect();
    let mut since_completion = vec![0i64; n];
    let mut completed = vec![false; n];
    let mut landed_bytes = vec![0i64; n];
    for o in &ev.obs {
        match *o {
            Obs::Arrived { bar, phase: token, count } => {
                let b = bar as usize;
                if token != phase[b] {
                    return broken(
                        "I-TOKEN",
                        format!("an arrival on {} returned token {token} in phase {}", p.barriers[b].name, phase[b]),
                    );
                }
                since_completion[b] += count;
                if let Some(x) = pending[b].as_mut() {
                    *x -= count;
                    if *x < 0 {
                        return broken(
                            "I-PENDING",
                            format!("an arrival took {} below zero pending without an over-arrival", p.barriers[b].name),
                        );
                    }
                }
                if let Some(x) = arrived[b].as_mut() {
                    *x += count;
                }
            }
            Obs::PhaseCompleted {
                bar,
                phase: done,
                pending: left,
                tx,
            } => {
                let b = bar as usize;
                if done != phase[b] || left != 0 || tx != 0 {
                    return broken(
                        "I-COMPLETION",
                        format!(
                            "{} completed phase {done} (current {}) with pending {left} and tx {tx}; a phase completes exactly when both are zero",
                            p.barriers[b].name, phase[b]
                        ),
                    );
                }
                if pending[b].is_some_and(|x| x != 0) {
                    return broken(
                        "I-COMPLETION",
                        format!(
                            "{} completed phase {done} with arrivals still missing by the count of arrivals made",
                            p.barriers[b].name
                        ),
                    );
                }
                phase[b] += 1;
                pending[b] = None;
                arrived[b] = None;
                since_completion[b] = 0;
                completed[b] = true;
            }
            Obs::Waited { bar, phase: named } => {
                let b = bar as usize;
                if !(named < phase[b] && (phase[b] - named) % 2 == 1) {
                    return broken(
                        "I-WAIT",
                        format!(
                            "a blocking wait on phase {named} of {} returned while the barrier is in phase {}: a wait returns only once the phase of its parity has completed",
                            p.barriers[b].name, phase[b]
                        ),
                    );
                }
            }
            Obs::TryWait { bar, phase: named, result } => {
                let b = bar as usize;
                let complete = (phase[b] - named).rem_euclid(2) == 1 && named < phase[b];
                if result != complete {
                    return broken(
                        "I-WAIT",
                        format!(
                            "try_wait on phase {named} of {} answered {result} in phase {}",
                            p.barriers[b].name, phase[b]
                        ),
                    );
                }
            }
            Obs::Landed { bar, bytes, .. } | Obs::LandedPart { bar, bytes, .. } if (bar as usize) < n => {
                landed_bytes[bar as usize] += bytes
            }
            Obs::CpAsyncPending { bar, delta } => {
                let b = bar as usize;
                since_completion[b] -= delta;
                if let Some(x) = pending[b].as_mut() {
                    *x += delta;
                }
            }
            _ => {}
        }
    }
    let Some(post) = &out.next else {
        // The execution ended: it must have said why.
        if out.violations.iter().all(|v| !v.kind.ends_execution()) && out.internal.is_none() {
            let why = out.violations.iter().map(|v| v.kind.name()).collect::<Vec<_>>().join(", ");
            if !out.violations.iter().any(|v| v.kind == crate::ViolationKind::CompletionMisuse) {
                return broken(
                    "I-ENDED",
                    format!("an execution ended with no undefined behaviour reported (found: {why})"),
                );
            }
        }
        return Ok(());
    };
    // Which instruction ran decides which barrier fields it may touch.
    let instr = match a {
        Action::Thread(t) => p.code_of(t as usize).instrs.get(pre.threads[t as usize].pc as usize),
        _ => None,
    };
    // A remote operation (`arrive_expect_tx(B, N, cta = R)`) touches the tx-count of the
    // peer's barrier as its own-CTA form does.
    let own_op = match instr.map(|i| &i.kind) {
        Some(InstrKind::Op {
            op: IOp::Remote { op, .. },
            ..
        }) => Some(&**op),
        Some(InstrKind::Op { op, .. }) => Some(op),
        _ => None,
    };
    let may_touch_tx = matches!(
        own_op,
        Some(
            IOp::Mbar(MbarOp::ExpectTx { .. })
                | IOp::Mbar(MbarOp::CompleteTx { .. })
                | IOp::Mbar(MbarOp::Arrive { expect_tx: Some(_), .. })
                | IOp::Mbar(MbarOp::Init { .. })
        )
    );
    let reinit_possible = matches!(
        instr.map(|i| &i.kind),
        Some(InstrKind::Op {
            op: IOp::Mbar(MbarOp::Init { .. }),
            ..
        })
    );
    for b in 0..n {
        let (x, y) = (&pre.barriers[b], &post.barriers[b]);
        let name = &p.barriers[b].name;
        // Completion functions may run any operation: their barriers' effects are not derived here.
        let completion_ran = ev
            .obs
            .iter()
            .any(|o| matches!(o, Obs::PhaseCompleted { bar, .. } if p.barriers[*bar as usize].completion.is_some()));
        if x.life != Life::Live || y.life != Life::Live || completion_ran || (reinit_possible && y.phase == 0) {
            if y.phase < x.phase && x.life == Life::Live && y.life == Life::Live {
                return broken("I-PHASE", format!("{name} went back from phase {} to {}", x.phase, y.phase));
            }
            continue;
        }
        if y.phase != phase[b] {
            return broken(
                "I-PHASE",
                format!("{name} is in phase {} but the observations complete it to {}", y.phase, phase[b]),
            );
        }
        let (want_pending, want_arrived) = if completed[b] {
            (y.expected - since_completion[b], since_completion[b])
        } else {
            (pending[b].unwrap_or(y.pending), arrived[b].unwrap_or(y.arrived))
        };
        if y.pending != want_pending || y.arrived != want_arrived {
            return broken(
                "I-ARRIVALS",
                format!(
                    "{name}: pending {} and arrivals made {} after the step, but the arrivals observed give {want_pending} and {want_arrived}",
                    y.pending, y.arrived
                ),
            );
        }
        if !may_touch_tx && !completed[b] && y.tx != x.tx - landed_bytes[b] {
            return broken(
                "I-TX",
                format!(
                    "{name}: tx went from {} to {} but only {} bytes landed and no expect_tx or complete_tx ran",
                    x.tx, y.tx, landed_bytes[b]
                ),
            );
        }
    }
    if let Action::Land(i) = a {
        let c = &pre.copies[i as usize];
        if c.len > 0 && post.buffers[c.buf as usize].value_at(c.offset) != c.version {
            return broken("I-LAND", format!("a landed copy did not deliver version {}", c.version));
        }
        if c.kind == CopyKind::Tma
            && pre.barriers[c.bar as usize].life != Life::Live
            && out.violations.iter().all(|v| v.kind != crate::ViolationKind::Lifetime)
        {
            return broken(
                "I-LAND",
                "a copy landed on a barrier that is not live with no lifetime violation".to_string(),
            );
        }
    }
    state(model, post)
}
