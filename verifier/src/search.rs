//! The checker: every interleaving of thread steps and copy landings, explored by the engine
//! (crate::engine), told as a verdict with shortest traces.
//!
//! Breadth-first order makes the first trace found for each violation kind a shortest one (among
//! the executions the partial-order reduction keeps; `por: false` for the shortest of all). States
//! are stored exactly, in canonical form (symmetry of interchangeable threads, normalised clock
//! epochs); `--no-symmetry` stores them as they are, `--no-por` expands every enabled step, and
//! tests compare them all.

use crate::engine::{self, Limits, Tally};
use phasecheck_model::rt::path::Replay;
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::ViolationKind;
use std::time::Instant;

pub use crate::bounds::Bound;

#[derive(Clone, Debug)]
pub struct CheckOptions {
    pub max_states: Option<usize>,
    pub max_seconds: Option<f64>,
    /// Resident memory of the process (bytes, as the OS counts it: `bounds::resident_bytes`)
    /// at which the search stops (incomplete) instead of exhausting the machine.
    pub max_memory_bytes: usize,
    /// Polled between chunks of expanded states: `Some(bound)` stops the search (incomplete).
    /// The CLI's watchdog (`bounds::requested`) asks through it.
    pub stop: Option<fn() -> Option<Bound>>,
    pub stop_at_first: bool,
    /// States past the first violation of their execution are expanded up to about `factor` x
    /// the states stored when the first violation was found (at least 2,000), then set aside.
    /// `None` (the default of the API and of every command) explores them all, so every
    /// reachable kind is reported. Executions without a violation are always explored in full,
    /// so the verdict never depends on it; a search that set states aside ends with the bound
    /// `Bound::PastViolation` (kinds reachable only through them are open, and `test` says
    /// `incomplete` rather than a mismatch).
    pub past_violation_factor: Option<f64>,
    /// Called about every two seconds with progress; the CLI prints it to stderr.
    pub progress: Option<fn(&Progress)>,
    /// After every transition, re-derive the invariants of SEMANTICS.md from the two states and
    /// the step's observations (phasecheck_model::rt::selfcheck); a broken one is an internal error.
    pub self_check: bool,
    /// Threads of a role and warp that never read their identity are interchangeable: store one
    /// ordering of them (`--no-symmetry` turns it off).
    pub symmetry: bool,
    /// Partial-order reduction: expand a persistent subset of a state's enabled steps where
    /// static footprints show the others cannot interfere (`--no-por` turns it off;
    /// docs/model.md).
    pub por: bool,
    /// Worker threads that expand states (`--threads`); results do not depend on it.
    pub threads: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            max_states: None,
            max_seconds: None,
            max_memory_bytes: 8 << 30,
            stop: None,
            stop_at_first: false,
            past_violation_factor: None,
            progress: None,
            self_check: false,
            symmetry: true,
            por: true,
            threads: 1,
        }
    }
}

/// What the progress line shows.
pub type Progress = Tally;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Holds,
    Violated,
    Incomplete,
    /// The model broke one of its own invariants (or panicked): no verdict can be trusted. The CLI
    /// exits 5.
    InternalError,
}

#[derive(Clone, Debug)]
pub struct Found {
    pub kind: ViolationKind,
    pub message: String,
    /// Actions from the initial state; the violation happens in the last one, or (for state
    /// violations such as deadlock) in the state it reaches.
    pub actions: Vec<Action>,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Stats {
    /// Distinct states stored (canonical ones when symmetry is on).
    pub states: usize,
    pub transitions: u64,
    /// Transitions that reached a state already stored.
    pub matched: u64,
    pub depth: usize,
    pub seconds: f64,
    /// Bytes the state store holds per stored state (interned components, rows, tables, parent
    /// links): what a state costs, whatever else the process holds.
    pub bytes_per_state: f64,
    /// Peak resident memory of the process when the search ended.
    pub peak_memory_bytes: usize,
    /// The reductions that ran, as the report header lists them.
    pub reductions: Vec<String>,
    /// States past a violation left unexpanded (`CheckOptions::past_violation_factor`).
    pub past_violation_skipped: usize,
    /// States expanded with a proper persistent subset of their enabled steps (`CheckOptions::por`).
    pub reduced_states: usize,
    /// Enabled steps those expansions left out.
    pub pruned_steps: u64,
    /// The partial-order reduction was asked for but a construct of the protocol turns it off:
    /// which, and where (the report header names it).
    #[serde(skip)]
    pub por_off: Option<phasecheck_model::rt::footprint::PorOff>,
}

#[derive(Clone, Debug)]
pub struct Report {
    pub verdict: Verdict,
    pub violations: Vec<Found>,
    pub bound: Option<Bound>,
    pub stats: Stats,
    /// Set with `Verdict::InternalError`.
    pub internal: Option<Internal>,
}

/// A model bug met during the search: the rule it broke and the path that reached it.
#[derive(Clone, Debug)]
pub struct Internal {
    pub rule: String,
    pub message: String,
    pub actions: Vec<Action>,
}

impl Internal {
    pub fn describe(&self) -> String {
        format!(
            "internal error [{}]: {} (after {} steps)",
            self.rule,
            self.message,
            self.actions.len()
        )
    }
}

/// Check a model. A panic anywhere in the model or the search is caught and reported as an
/// internal error of this one protocol, so a folder's other protocols keep their verdicts.
pub fn check(model: &Model, opts: &CheckOptions) -> Report {
    check_from(model, &[], opts)
}

/// The search restricted to the executions that begin with `prefix`: what the fix loop asks
/// when a recorded schedule stops applying to an edited spec ("from where the schedule got to,
/// can the violation still happen?"). Violations raised along the prefix are recorded too, and
/// every trace returned starts with the prefix. A prefix action that is not enabled ends the
/// search there (the caller replays the prefix first and knows it applies).
pub fn check_from(model: &Model, prefix: &[Action], opts: &CheckOptions) -> Report {
    let start = Instant::now();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_from_unguarded(model, prefix, opts))) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".to_string());
            Report {
                verdict: Verdict::InternalError,
                violations: Vec::new(),
                bound: None,
                stats: Stats {
                    seconds: start.elapsed().as_secs_f64(),
                    ..Stats::default()
                },
                internal: Some(Internal {
                    rule: "panic".to_string(),
                    message: what,
                    actions: Vec::new(),
                }),
            }
        }
    }
}

fn check_from_unguarded(model: &Model, prefix: &[Action], opts: &CheckOptions) -> Report {
    let start = Instant::now();
    let self_check = |s: &phasecheck_model::rt::state::State, a: Action, out: &phasecheck_model::rt::Outcome| {
        phasecheck_model::rt::selfcheck::transition(model, s, a, out).err()
    };
    let progress = opts.progress.map(|f| move |t: &Tally| f(t));
    let limits = Limits::<Model> {
        max_states: opts.max_states,
        max_seconds: opts.max_seconds,
        max_memory_bytes: opts.max_memory_bytes,
        stop: opts.stop,
        stop_at_first: opts.stop_at_first,
        past_violation_factor: opts.past_violation_factor,
        threads: opts.threads,
        symmetry: opts.symmetry,
        por: opts.por,
        progress: progress.as_ref().map(|p| p as &(dyn Fn(&Tally) + Sync)),
        check: if opts.self_check { Some(&self_check) } else { None },
    };
    let explored = engine::explore(model, prefix, &limits);
    let t = &explored.tally;
    let mut reductions = vec!["local steps merged".to_string(), "epochs normalised".to_string()];
    if opts.symmetry && phasecheck_model::ts::Packed::has_symmetry(model) {
        reductions.push(format!("symmetry ({} classes)", model.symmetry_class_count()));
    }
    if opts.por && model.por.applicable {
        reductions.push("partial-order".to_string());
    }
    let stats = Stats {
        states: t.states,
        transitions: t.transitions,
        matched: t.matched,
        depth: t.depth,
        seconds: 0.0,
        bytes_per_state: if t.states == 0 {
            0.0
        } else {
            t.store_bytes as f64 / t.states as f64
        },
        peak_memory_bytes: crate::bounds::peak_resident_bytes().unwrap_or(t.memory_bytes),
        reductions,
        past_violation_skipped: t.past_violation_skipped,
        reduced_states: t.reduced_states,
        pruned_steps: t.pruned_actions,
        por_off: if opts.por { model.por.off.clone() } else { None },
    };
    let mut internal = explored.internal.map(|(e, actions)| Internal {
        rule: e.rule.to_string(),
        message: e.message,
        actions,
    });
    let mut found: Vec<Found> = explored
        .hits
        .into_iter()
        .map(|h| Found {
            kind: h.kind,
            message: h.message,
            actions: h.actions,
        })
        .collect();
    // The messages were told of canonical states, whose threads may be renamed: tell them again
    // from the concrete trace. A trace that does not show its kind would mean the reduction lost
    // the execution it stands for: an internal error, never a verdict.
    if opts.symmetry && internal.is_none() {
        for f in found.iter_mut() {
            match retell(model, f) {
                Ok(m) => f.message = m,
                Err(why) => {
                    internal = Some(Internal {
                        rule: "R-SYMMETRY".to_string(),
                        message: format!(
                            "the {} trace found on canonical states does not reproduce concretely: {why}",
                            f.kind
                        ),
                        actions: f.actions.clone(),
                    });
                    break;
                }
            }
        }
    }
    // States set aside past a violation are a bound like any other: the kinds behind them
    // were not looked for.
    let bound = explored
        .stopped
        .or((t.past_violation_skipped > 0).then_some(crate::bounds::Bound::PastViolation));
    finish(model, found, bound, stats, start, internal)
}

/// The message of `f`'s kind as the concrete trace tells it: raised by its last step, or by the
/// state it reaches. Err says why the trace does not show it: a step it cannot take, or no
/// violation of its kind where it ends.
fn retell(model: &Model, f: &Found) -> Result<String, String> {
    let (mut r, init) = Replay::start(model);
    let mut last = init.violations;
    for &a in &f.actions {
        let step = r.take(a).map_err(|e| {
            let why = crate::trace::why_not(model, e.refusal, e.step, r.state(), a);
            format!("step {} cannot be taken: {why}", e.step + 1)
        })?;
        last = step.outcome.violations;
    }
    if let Some(v) = last.into_iter().find(|v| v.kind == f.kind) {
        return Ok(v.message);
    }
    let nowhere = || format!("neither its last step nor the state it reaches raises {}", f.kind);
    let s = r.state().ok_or_else(nowhere)?;
    model
        .state_violations(s, r.enabled())
        .into_iter()
        .find(|v| v.kind == f.kind)
        .map(|v| v.message)
        .ok_or_else(nowhere)
}

/// A deadlock's cause, told from its trace (crate::explain).
fn explain_deadlock(model: &Model, f: &mut Found) {
    let Ok(r) = crate::trace::replay(model, &f.actions) else { return };
    if let Some(v) = crate::explain::state_violations(model, &r)
        .into_iter()
        .find(|v| v.kind == ViolationKind::Deadlock)
    {
        f.message = v.message;
    }
}

fn finish(
    model: &Model,
    mut found: Vec<Found>,
    bound: Option<Bound>,
    mut stats: Stats,
    start: Instant,
    internal: Option<Internal>,
) -> Report {
    if let Some(f) = found.iter_mut().find(|f| f.kind == ViolationKind::Deadlock) {
        explain_deadlock(model, f);
    }
    stats.seconds = start.elapsed().as_secs_f64();
    let violations = found;
    let verdict = if internal.is_some() {
        Verdict::InternalError
    } else if !violations.is_empty() {
        Verdict::Violated
    } else if bound.is_some() {
        Verdict::Incomplete
    } else {
        Verdict::Holds
    };
    Report {
        verdict,
        violations,
        bound,
        stats,
        internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn double_buffer() -> phasecheck_model::rt::Model {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/guide/double_buffer.phase");
        phasecheck_model::rt::Model::new(phasecheck_model::spec::load(&path, &[]).unwrap().proto)
    }

    #[test]
    fn a_process_already_over_the_memory_bound_stops_at_the_first_state() {
        let opts = CheckOptions {
            max_memory_bytes: 1,
            ..Default::default()
        };
        let r = check(&double_buffer(), &opts);
        assert_eq!(
            (r.verdict, r.bound, r.stats.states),
            (Verdict::Incomplete, Some(Bound::MaxMemory), 1)
        );
    }

    #[test]
    fn the_search_answers_a_stop_request_at_once() {
        let opts = CheckOptions {
            stop: Some(|| Some(Bound::MaxSeconds)),
            ..Default::default()
        };
        let r = check(&double_buffer(), &opts);
        assert_eq!((r.verdict, r.bound), (Verdict::Incomplete, Some(Bound::MaxSeconds)));
        assert_eq!(
            r.stats.transitions,
            check(
                &double_buffer(),
                &CheckOptions {
                    max_states: Some(1),
                    ..Default::default()
                }
            )
            .stats
            .transitions
        );
        let free = check(
            &double_buffer(),
            &CheckOptions {
                stop: Some(|| None),
                ..Default::default()
            },
        );
        assert_eq!((free.verdict, free.bound), (Verdict::Holds, None));
    }
}
