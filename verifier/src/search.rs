//! Exhaustive breadth-first search over every interleaving of thread steps and copy landings.
//!
//! Breadth-first order makes the first trace found for each violation kind a shortest one. States
//! are stored exactly (no fingerprints): the reductions issue adds them behind flags, each compared
//! against this search in tests.

use indexmap::IndexSet;
use phasecheck_model::state::State;
use phasecheck_model::step::{Action, Model, Violation};
use phasecheck_model::ViolationKind;
use rustc_hash::FxHasher;
use std::collections::BTreeMap;
use std::hash::BuildHasherDefault;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct CheckOptions {
    pub max_states: Option<usize>,
    pub max_seconds: Option<f64>,
    /// Resident memory of the process (bytes, as the OS counts it: `bounds::resident_bytes`)
    /// at which the search stops (incomplete) instead of exhausting the machine.
    pub max_memory_bytes: usize,
    /// Polled at every expanded state: `Some(bound)` stops the search (incomplete). The CLI's
    /// watchdog (`bounds::requested`) asks through it.
    pub stop: Option<fn() -> Option<Bound>>,
    pub stop_at_first: bool,
    /// Called about every two seconds with progress; the CLI prints it to stderr.
    pub progress: Option<fn(&Progress)>,
    /// After every transition, re-derive the invariants of SEMANTICS.md from the two states and
    /// the step's observations (phasecheck_model::selfcheck); a broken one is an internal error.
    pub self_check: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            max_states: None,
            max_seconds: None,
            max_memory_bytes: 8 << 30,
            stop: None,
            stop_at_first: false,
            progress: None,
            self_check: false,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Progress {
    pub states: usize,
    pub transitions: u64,
    pub depth: usize,
    pub seconds: f64,
    pub memory_bytes: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    MaxStates,
    MaxSeconds,
    MaxMemory,
}

impl Bound {
    pub fn describe(self) -> &'static str {
        match self {
            Bound::MaxStates => "--max-states",
            Bound::MaxSeconds => "--max-seconds",
            Bound::MaxMemory => "--max-memory",
        }
    }
}

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
    pub states: usize,
    pub transitions: u64,
    pub depth: usize,
    pub seconds: f64,
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
    let mut internal: Option<Internal> = None;
    let mut found: BTreeMap<ViolationKind, Found> = BTreeMap::new();
    let mut stats = Stats::default();
    let record = |found: &mut BTreeMap<ViolationKind, Found>, v: Vec<Violation>, path: &dyn Fn() -> Vec<Action>| {
        for v in v {
            found.entry(v.kind).or_insert_with(|| Found {
                kind: v.kind,
                message: v.message,
                actions: path(),
            });
        }
    };

    let init = model.init();
    if let Some(e) = init.internal {
        let i = Internal {
            rule: e.rule.to_string(),
            message: e.message,
            actions: Vec::new(),
        };
        return finish(model, found, None, stats, start, Some(i));
    }
    record(&mut found, init.violations, &Vec::new);
    let Some(mut s0) = init.next else {
        return finish(model, found, None, stats, start, None);
    };
    let mut en = Vec::new();
    for (k, &a) in prefix.iter().enumerate() {
        en.clear();
        model.actions(&s0, &mut en);
        record(&mut found, model.state_violations(&s0, &en), &|| prefix[..k].to_vec());
        if !en.contains(&a) {
            return finish(model, found, None, stats, start, None);
        }
        let out = model.step(&s0, a);
        stats.transitions += 1;
        if let Some(e) = out.internal {
            let i = Internal {
                rule: e.rule.to_string(),
                message: e.message,
                actions: prefix[..=k].to_vec(),
            };
            return finish(model, found, None, stats, start, Some(i));
        }
        record(&mut found, out.violations, &|| prefix[..=k].to_vec());
        match out.next {
            Some(n) => s0 = n,
            None => return finish(model, found, None, stats, start, None),
        }
    }

    // States are hashed whole at every insertion: a fast non-cryptographic hash pays.
    let mut seen: IndexSet<State, BuildHasherDefault<FxHasher>> = IndexSet::default();
    // parent[i] = (index of the predecessor, action taken); the root points at itself.
    let mut parent: Vec<(u32, Action)> = Vec::new();
    seen.insert(s0);
    parent.push((0, Action::Thread(0)));
    let path_to = |parent: &Vec<(u32, Action)>, mut i: usize, last: Option<Action>| -> Vec<Action> {
        let mut p: Vec<Action> = last.into_iter().collect();
        while i != 0 {
            let (pi, a) = parent[i];
            p.push(a);
            i = pi as usize;
        }
        p.extend(prefix.iter().rev());
        p.reverse();
        p
    };

    let mut frontier: Vec<usize> = vec![0];
    let mut depth = 0usize;
    let mut bound = None;
    let mut last_progress = Instant::now();
    let mut enabled = Vec::new();
    let mut expanded = 0u64;
    let resident = || crate::bounds::resident_bytes().unwrap_or(0);
    // A first state larger than the bound is an incomplete at once.
    if resident() >= opts.max_memory_bytes {
        bound = Some(Bound::MaxMemory);
        frontier.clear();
    }
    'search: while !frontier.is_empty() {
        stats.depth = depth;
        let mut next_frontier = Vec::new();
        for &i in &frontier {
            if opts.stop_at_first && !found.is_empty() {
                break 'search;
            }
            let s = seen.get_index(i).expect("stored").clone();
            enabled.clear();
            model.actions(&s, &mut enabled);
            let sv = model.state_violations(&s, &enabled);
            if !sv.is_empty() {
                record(&mut found, sv, &|| path_to(&parent, i, None));
            }
            if s.all_done() && !s.copies.is_empty() {
                // The CTA has exited: nothing after this is meaningful.
                continue;
            }
            for &a in &enabled {
                let out = model.step(&s, a);
                stats.transitions += 1;
                let broken = out.internal.clone().or_else(|| {
                    if opts.self_check {
                        phasecheck_model::selfcheck::transition(model, &s, a, &out).err()
                    } else {
                        None
                    }
                });
                if let Some(e) = broken {
                    internal = Some(Internal {
                        rule: e.rule.to_string(),
                        message: e.message,
                        actions: path_to(&parent, i, Some(a)),
                    });
                    break 'search;
                }
                if !out.violations.is_empty() {
                    record(&mut found, out.violations, &|| path_to(&parent, i, Some(a)));
                }
                if let Some(n) = out.next {
                    let (j, new) = seen.insert_full(n);
                    if new {
                        parent.push((i as u32, a));
                        next_frontier.push(j);
                    }
                }
            }
            if seen.len() >= opts.max_states.unwrap_or(usize::MAX) {
                bound = Some(Bound::MaxStates);
                break 'search;
            }
            expanded += 1;
            if let Some(b) = opts.stop.and_then(|f| f()) {
                bound = Some(b);
                break 'search;
            }
            if expanded % 256 == 0 && resident() >= opts.max_memory_bytes {
                bound = Some(Bound::MaxMemory);
                break 'search;
            }
            if expanded % 64 == 0 || last_progress.elapsed() >= Duration::from_secs(2) {
                let secs = start.elapsed().as_secs_f64();
                if opts.max_seconds.is_some_and(|m| secs >= m) {
                    bound = Some(Bound::MaxSeconds);
                    break 'search;
                }
                if let Some(cb) = opts.progress {
                    if last_progress.elapsed() >= Duration::from_secs(2) {
                        last_progress = Instant::now();
                        cb(&Progress {
                            states: seen.len(),
                            transitions: stats.transitions,
                            depth,
                            seconds: secs,
                            memory_bytes: resident(),
                        });
                    }
                }
            }
        }
        frontier = next_frontier;
        if !frontier.is_empty() {
            depth += 1;
        }
    }
    stats.states = seen.len();
    stats.depth = stats.depth.max(depth);
    finish(model, found, bound, stats, start, internal)
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
    mut found: BTreeMap<ViolationKind, Found>,
    bound: Option<Bound>,
    mut stats: Stats,
    start: Instant,
    internal: Option<Internal>,
) -> Report {
    if let Some(f) = found.get_mut(&ViolationKind::Deadlock) {
        explain_deadlock(model, f);
    }
    stats.seconds = start.elapsed().as_secs_f64();
    let violations: Vec<Found> = found.into_values().collect();
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
