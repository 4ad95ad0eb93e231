//! What one trace forces: the outcome a replay of the trace records on the widened machine
//! (reads take the model's value), continued as the hardware does when the trace ends quiet.

use super::format::{End, Outcome};
use super::machine::{cause_of, cut_error, nothing_in_flight, Machine, Move, Partial, Situation};
use phasecheck_model::rt::path::Replay;
use phasecheck_model::rt::state::{State, Status};
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::ViolationKind;

/// How a thread ended in a replayed trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadEnd {
    /// Ran to its end.
    Finished,
    /// Blocked forever: timed out at a wait, or stuck at an execution barrier.
    Hung,
    /// At the end of a trace that stops early: blocked at a wait or an execution barrier.
    Blocked,
    /// At the end of a trace that stops early: able to run on. Reported `finished: true` in the
    /// outcome (the trace does not force it to hang), its vectors are what it recorded so far.
    Running,
}

/// The outcome a trace forces, with the details a replay comparison needs.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Forced {
    pub outcome: Outcome,
    pub ends: Vec<ThreadEnd>,
    /// The trace reached undefined behaviour (its last step, or every thread exiting with a copy
    /// in flight): the outcome holds what was observed before it; the hardware may do anything after.
    pub undefined: Option<ViolationKind>,
    /// Threads that timed out after the trace, in order (the trace ended with the CTA quiet).
    pub timeouts: Vec<u16>,
    /// What the run leaves behind, when the trace fixes it (it runs until nothing can move).
    #[serde(default)]
    pub end: Option<End>,
}

/// Replay `actions` from the initial state and return what they force; see [`forced_outcome`].
pub fn forced(model: &Model, actions: &[Action]) -> Result<Forced, String> {
    let m = Machine::new(model);
    let n = model.proto.threads.len();
    let (mut r, init) = Replay::start(&m);
    if init.cut {
        return Err(cut_error(0));
    }
    if r.state().is_none() {
        return Ok(Forced {
            outcome: Outcome::empty(model),
            ends: vec![ThreadEnd::Blocked; n],
            undefined: Some(cause_of(&init.violations)),
            timeouts: Vec::new(),
            end: None,
        });
    }
    let undefined_end = |m: &Machine, (s, p): &(State, Partial), cause: ViolationKind, timeouts: Vec<u16>| {
        let (outcome, ends, _) = ends_of(m, s, p, false);
        Forced {
            outcome,
            ends,
            undefined: Some(cause),
            timeouts,
            end: None,
        }
    };
    for &a in actions {
        let before = r.state().cloned();
        let step = r.take(Move::Model(a)).map_err(|e| m.refusal(&e, before.as_ref()))?;
        if step.outcome.cut {
            return Err(cut_error(r.steps()));
        }
        if step.outcome.next.is_none() {
            return Ok(undefined_end(&m, &step.before, cause_of(&step.outcome.violations), Vec::new()));
        }
    }
    // A trace that ends with the CTA quiet (deadlock) goes on as the hardware does: blocked
    // waits time out, lowest thread first, and whatever their exits release runs on in the
    // canonical order (lowest thread, then landings) until nothing can move.
    let mut timeouts = Vec::new();
    let here = r.state().expect("the trace did not end the execution");
    let quiet = !here.0.all_done() && m.enabled(&here.0).is_empty();
    if quiet {
        loop {
            let (s, p) = r.state().expect("the continuation did not end the execution");
            match m.situation(s, &mut p.clone()) {
                Situation::Done | Situation::Stuck => break,
                Situation::ExitInFlight => return Ok(undefined_end(&m, &(s.clone(), p.clone()), ViolationKind::Lifetime, timeouts)),
                Situation::WarpCollective => return Ok(undefined_end(&m, &(s.clone(), p.clone()), ViolationKind::Assertion, timeouts)),
                Situation::Moves(moves) => {
                    let mv = moves[0];
                    if let Move::Timeout(t) = mv {
                        timeouts.push(t);
                    }
                    let step = r.take(mv).map_err(|e| m.refusal(&e, None))?;
                    if step.outcome.cut {
                        return Err(cut_error(r.steps()));
                    }
                    if step.outcome.next.is_none() {
                        return Ok(undefined_end(&m, &step.before, cause_of(&step.outcome.violations), timeouts));
                    }
                }
            }
        }
    }
    let (s, p) = r.state().expect("the execution did not end");
    if !quiet && s.all_done() && !nothing_in_flight(s) {
        return Ok(undefined_end(&m, &(s.clone(), p.clone()), ViolationKind::Lifetime, timeouts));
    }
    let terminal = s.all_done() || m.enabled(s).is_empty();
    let (outcome, ends, end) = ends_of(&m, s, p, terminal);
    Ok(Forced {
        outcome,
        ends,
        undefined: None,
        timeouts,
        end,
    })
}

/// The observations a trace has made after each of its first k steps, k = 0..=len (no widening,
/// no continuation): what a replayed block that followed the trace that far has recorded at least.
/// Stops early (shorter result) where the trace reaches undefined behaviour.
pub fn prefix_observations(model: &Model, actions: &[Action]) -> Result<Vec<Outcome>, String> {
    let m = Machine::new(model);
    let (mut r, _) = Replay::start(&m);
    let Some((_, p)) = r.state() else {
        return Ok(vec![Outcome::empty(model)]);
    };
    let mut out = vec![p.obs.clone()];
    for &a in actions {
        let before = r.state().cloned();
        let step = r.take(Move::Model(a)).map_err(|e| m.refusal(&e, before.as_ref()))?;
        if step.outcome.cut {
            return Err(cut_error(r.steps()));
        }
        let Some((_, p)) = r.state() else { break };
        out.push(p.obs.clone());
    }
    Ok(out)
}

/// Per-thread ends and the outcome in state `s`. `terminal`: nothing can move any more, so an
/// unfinished thread is hung rather than blocked.
fn ends_of(m: &Machine, s: &State, p: &Partial, terminal: bool) -> (Outcome, Vec<ThreadEnd>, Option<End>) {
    let enabled = m.enabled(s);
    let mut o = p.obs.clone();
    o.fault = false;
    let mut ends = Vec::with_capacity(s.threads.len());
    for (t, th) in s.threads.iter().enumerate() {
        let end = if th.status == Status::Done {
            if p.hung[t] {
                ThreadEnd::Hung
            } else {
                ThreadEnd::Finished
            }
        } else if terminal {
            ThreadEnd::Hung
        } else if th.status == Status::Running && enabled.contains(&Action::Thread(t as u16)) {
            ThreadEnd::Running
        } else {
            ThreadEnd::Blocked
        };
        o.threads[t].finished = matches!(end, ThreadEnd::Finished | ThreadEnd::Running);
        ends.push(end);
    }
    // Only an execution that cannot go on fixes the barriers' final phases.
    let end = (terminal && !s.all_done() || s.all_done() && nothing_in_flight(s)).then(|| m.end_of(s));
    (o, ends, end)
}

/// The outcome a trace forces on the threads' observations. Reads take the model's value.
///
/// - A thread that finished in the trace: `finished: true`.
/// - A trace ending in a deadlock (no action enabled, some thread unfinished) continues as the
///   hardware does (module docs, rule 3): blocked waits time out, lowest thread first, and what
///   their exits release runs on canonically; timed-out threads and threads left at an execution
///   barrier are `finished: false`.
/// - A trace that stops early (actions still enabled): a thread blocked at its end is
///   `finished: false`; a thread that could still run is `finished: true` with the observations it
///   made so far (a prefix of what the GPU run records). [`forced`] tells the two apart.
/// - A trace that reaches undefined behaviour: the observations before the undefined step, with
///   `fault: false`; [`forced`] reports the cause.
///
/// Panics if an action of the trace is not enabled where it is taken (use [`forced`] to get an
/// error instead).
pub fn forced_outcome(model: &Model, actions: &[Action]) -> Outcome {
    match forced(model, actions) {
        Ok(f) => f.outcome,
        Err(e) => panic!("forced_outcome: the trace does not replay: {e}"),
    }
}
