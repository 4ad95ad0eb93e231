//! The fix loop: "does my edit close this counterexample?"
//!
//! A trace file records a schedule — which thread stepped, which copy landed — against the spec
//! it was found in. After an edit, thread indices and copy indices may mean something else, so
//! each recorded action is mapped by *name* (role and tid; the copy's buffer, barrier and issuer)
//! onto the edited spec and replayed as far as it still applies. Observations are not compared:
//! an edit is expected to change them. Then, from the last state the schedule reached, every
//! continuation is explored for the recorded violation kind, so that a fix which makes the
//! faulty step impossible (a wait that now blocks) is told apart from one that merely shifts the
//! violation by a step.

use super::why_not;
use crate::search::{check_from, CheckOptions, Verdict};
use crate::tracefile::TraceFile;
use phasecheck_model::rt::path::Replay;
use phasecheck_model::rt::state::State;
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::ViolationKind;

/// How far the recorded schedule applied to the edited spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Recorded steps that were replayed (all of them when `stopped` is None).
    pub steps: usize,
    /// The 1-based step that could no longer be taken, and why.
    pub stopped: Option<(usize, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FixVerdict {
    /// The recorded kind is still reached: along the schedule (`continuation == 0`) or by an
    /// execution that continues it for that many more steps.
    Same {
        step: usize,
        continuation: usize,
        message: String,
        /// The edited spec's actions that reach it.
        trace: Vec<Action>,
    },
    /// The schedule no longer reaches the recorded kind, but another execution of the edited
    /// spec still does: the edit moved the bug, it did not remove it.
    Elsewhere {
        message: String,
        /// The edited spec's actions that reach it.
        trace: Vec<Action>,
    },
    /// No execution that follows the schedule as far as it applies reaches the recorded kind,
    /// and no execution of the edited spec at all does (a search that finished).
    Gone,
    /// The schedule stopped applying and the exploration of its continuations hit a bound.
    Undecided,
}

#[derive(Clone, Debug)]
pub struct FixReport {
    pub kind: ViolationKind,
    pub applied: Applied,
    pub verdict: FixVerdict,
    /// Other violation kinds the same executions reach in the edited spec.
    pub others: Vec<ViolationKind>,
    /// The actions of the edited spec the schedule mapped to (as far as it applied).
    pub actions: Vec<Action>,
    /// States of the search over the whole edited spec, when one ran (to confirm "gone").
    pub searched: Option<usize>,
}

/// The edited spec's action for recorded step `i` in state `s`, if the recorded actor exists.
fn map_action(model: &Model, t: &TraceFile, i: usize, s: &State) -> Result<Action, String> {
    let rec = &t.steps[i];
    let p = &model.proto;
    match rec.action {
        Action::Thread(g) => {
            let who = rec
                .thread
                .clone()
                .or_else(|| t.threads.get(g as usize).cloned())
                .ok_or_else(|| format!("the trace names no thread {g}"))?;
            (0..p.threads.len())
                .find(|&k| {
                    let info = p.threads[k];
                    p.roles[info.role as usize].name == who.role && info.tid == who.tid
                })
                .map(|k| Action::Thread(k as u16))
                .ok_or_else(|| format!("the edited spec has no thread {}#{}", who.role, who.tid))
        }
        Action::Land(_) | Action::LandPart(_) => {
            let c = rec.copy.as_ref().ok_or("the trace's landing names no copy")?;
            let same = |x: &phasecheck_model::rt::state::CopyInFlight| {
                p.buffers[x.buf as usize].name == c.buffer
                    && crate::trace::copy_barrier(p, x) == c.barrier
                    && p.thread_label(x.issuer as usize) == c.issuer
            };
            // The same copy by version when the edit kept it, else the oldest of that kind.
            let k = s
                .copies
                .iter()
                .position(|x| same(x) && x.version == c.version)
                .or_else(|| s.copies.iter().position(same))
                .ok_or_else(|| format!("no copy into {} on {} from {} is in flight", c.buffer, c.barrier, c.issuer))?;
            Ok(match rec.action {
                Action::Land(_) => Action::Land(k as u16),
                _ => Action::LandPart(k as u16),
            })
        }
    }
}

/// Replay `t`'s schedule against `model` (an edited spec) and decide whether its violation is
/// gone. `opts` bounds the exploration of continuations.
pub fn replay_edited(model: &Model, t: &TraceFile, opts: &CheckOptions) -> FixReport {
    let kind = t.violation.kind;
    let (mut r, _) = Replay::start(model);
    let mut actions = Vec::new();
    let mut stopped = None;
    if r.state().is_none() {
        stopped = Some((1, "the initial state already ends the execution".to_string()));
    }
    for i in 0..t.steps.len() {
        // The recorded actor is mapped from the state the edited spec is in now (a copy's index
        // depends on the copies in flight), then taken if the state enables it.
        let Some(s) = r.state() else {
            if i > 0 {
                stopped = Some((i + 1, format!("the execution ended at step {i}")));
            }
            break;
        };
        let a = match map_action(model, t, i, s) {
            Ok(a) => a,
            Err(why) => {
                stopped = Some((i + 1, why));
                break;
            }
        };
        if let Err(e) = r.take(a) {
            stopped = Some((i + 1, why_not(model, e.refusal, e.step, r.state(), a)));
            break;
        }
        actions.push(a);
    }
    let applied = Applied {
        steps: actions.len(),
        stopped,
    };
    let r = check_from(model, &actions, opts);
    let others = r.violations.iter().map(|v| v.kind).filter(|k| *k != kind).collect();
    let verdict = match r.violations.iter().find(|v| v.kind == kind) {
        Some(v) => FixVerdict::Same {
            step: v.actions.len(),
            continuation: v.actions.len().saturating_sub(actions.len()),
            message: v.message.clone(),
            trace: v.actions.clone(),
        },
        // A search stopped by a bound says nothing of what lies past it, whatever else it found
        // (its verdict is `violated` when it found other kinds before the bound).
        None if r.verdict == Verdict::Incomplete || r.bound.is_some() => FixVerdict::Undecided,
        None => FixVerdict::Gone,
    };
    // "Gone" is a claim about the edited protocol, not only about one schedule: it must never
    // hide the same kind reached another way (what `check EDITED` would report). So it stands
    // only when a search of the whole edited spec finds no execution reaching the kind.
    let mut searched = None;
    let verdict = match verdict {
        FixVerdict::Gone => {
            // One time bound for both searches: the whole spec gets what the continuations left.
            let mut rest = opts.clone();
            rest.max_seconds = opts.max_seconds.map(|m| (m - r.stats.seconds).max(0.0));
            // Every execution to its end, past other violations too: a kind reached only after
            // another violation is still reached (`check` reports it), and a
            // search that stops exploring past violations early could not rule it out.
            rest.past_violation_factor = None;
            rest.stop_at_first = false;
            let whole = crate::check(model, &rest);
            searched = Some(whole.stats.states);
            match whole.violations.iter().find(|v| v.kind == kind) {
                Some(v) => FixVerdict::Elsewhere {
                    message: v.message.clone(),
                    trace: v.actions.clone(),
                },
                None if whole.verdict == Verdict::Incomplete || whole.bound.is_some() || whole.verdict == Verdict::InternalError => {
                    FixVerdict::Undecided
                }
                None => FixVerdict::Gone,
            }
        }
        v => v,
    };
    FixReport {
        kind,
        applied,
        verdict,
        others,
        actions,
        searched,
    }
}

impl FixReport {
    /// The answer in words: the first line is one of "violation gone", "same violation" or
    /// "schedule no longer possible from step N", the lines after it say why.
    pub fn describe(&self, total_steps: usize) -> String {
        let kind = self.kind;
        let how_far = match &self.applied.stopped {
            None => format!("the recorded schedule applies in full ({total_steps} steps)"),
            Some((n, why)) => format!(
                "the recorded schedule applies up to step {} of {total_steps}; step {n} is no longer possible: {why}",
                n - 1
            ),
        };
        let mut out = match &self.verdict {
            FixVerdict::Same {
                step,
                continuation: 0,
                message,
                ..
            } => format!("same violation: {kind} at step {step}\n  {message}\n  {how_far}"),
            FixVerdict::Same {
                step,
                continuation,
                message,
                ..
            } => format!(
                "same violation: {kind}, reached {continuation} step(s) after the schedule stops (step {step})\n  {message}\n  {how_far}"
            ),
            FixVerdict::Gone => {
                let from = match &self.applied.stopped {
                    None => "after it",
                    Some(_) => "from there",
                };
                let whole = match self.searched {
                    Some(n) => format!("\n  and no execution of the edited spec reaches {kind} ({n} states searched to the end)"),
                    None => String::new(),
                };
                format!("violation gone: no execution following the recorded schedule reaches {kind}\n  {how_far}, and no continuation {from} reaches {kind}{whole}")
            }
            FixVerdict::Elsewhere { message, trace } => format!(
                "same violation, another way: the recorded schedule no longer reaches {kind}, but an execution of the edited spec does ({} steps)\n  {message}\n  {how_far}",
                trace.len()
            ),
            FixVerdict::Undecided if self.searched.is_some() => format!(
                "undecided: no continuation of the recorded schedule reaches {kind}, but a search bound stopped the search of the whole edited spec, so whether another execution does is unknown\n  {how_far}"
            ),
            FixVerdict::Undecided => {
                let n = self.applied.stopped.as_ref().map(|s| s.0).unwrap_or(total_steps + 1);
                format!("schedule no longer possible from step {n}: whether {kind} is still reachable from there is unknown (a search bound was hit)\n  {how_far}")
            }
        };
        if !self.others.is_empty() {
            let names: Vec<&str> = self.others.iter().map(|k| k.name()).collect();
            out.push_str(&format!("\n  note: the same executions still reach {}", names.join(", ")));
        }
        out
    }
}
