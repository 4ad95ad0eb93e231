//! The model side of a GPU run, spec by spec, each stage within its budget: the outcomes the
//! model allows (enumeration: states and seconds), the traces to replay (the committed
//! counterexample files first, else the verifier's search: seconds and states), and the kernels
//! (code generation). A stage over budget makes the spec `not run (budget: ...)`; a model that
//! fails (an internal error, a panic) makes it `model error: ...`; either way the other specs go
//! on and the report lists every spec.

use crate::codegen::{generate, generate_hw_barrier, generate_hw_commit, has_commit, hw_barrier_form, Backend, Kernel};
use phasecheck_model::rt::{Action, Model, Mutant};
use phasecheck_model::spec::Spec;
use phasecheck_model::ViolationKind as K;
use phasecheck_verifier::outcomes::{allowed_outcomes_within, forced, AllowedSet};
use phasecheck_verifier::outcomes::{one_execution, one_execution_landings_first};
use phasecheck_verifier::tracefile::TraceFile;
use phasecheck_verifier::{check, CheckOptions, Verdict as CheckVerdict};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Per-spec budgets of each stage.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Outcome enumeration: distinct states.
    pub outcome_states: usize,
    /// Outcome enumeration: seconds (each replay enumeration from a prefix point gets as many).
    pub outcome_seconds: f64,
    /// Trace search (the verifier): seconds and states.
    pub check_seconds: f64,
    pub check_states: Option<usize>,
    /// Kernel run: wall-clock seconds for one spec's launch jobs together, children included.
    pub kernel_seconds: f64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            outcome_states: 200_000,
            outcome_seconds: 30.0,
            check_seconds: 10.0,
            check_states: None,
            kernel_seconds: 60.0,
        }
    }
}

/// Everything `gpu run` needs (the CLI's arguments, without clap).
#[derive(Clone, Debug)]
pub struct Settings {
    pub paths: Vec<PathBuf>,
    pub backends: Vec<Backend>,
    pub replay: bool,
    pub stress: bool,
    /// Stress: blocks per spec; replay: min(runs, 32) blocks per trace.
    pub runs: u32,
    pub out: Option<PathBuf>,
    /// Bound of every wait in the kernels.
    pub timeout_ms: u64,
    pub budget: Budget,
    /// Folder of committed counterexample trace files (`<protocol>.<kind>.json`), used for replay
    /// when one exists for the (spec, kind); `None`: always the verifier's traces.
    pub traces: Option<PathBuf>,
    /// Run the model stages only (no NVRTC, no GPU) and write the report.
    pub plan_only: bool,
    /// A planted model defect (tests: a model that fails must not stop the suite).
    pub mutant: Option<Mutant>,
    /// Parameter overrides (`--param NAME=VALUE`), applied to every spec as `check` applies them.
    pub params: Vec<(String, i64)>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            paths: Vec::new(),
            backends: vec![Backend::Ptx, Backend::Libcu],
            replay: true,
            stress: true,
            runs: 4096,
            out: None,
            timeout_ms: 20,
            budget: Budget::default(),
            traces: Some(PathBuf::from("counterexamples")),
            plan_only: false,
            mutant: None,
            params: Vec::new(),
        }
    }
}

/// A trace to replay.
#[derive(Clone, Debug)]
pub struct Trace {
    /// The violation kind's name, or `complete execution`.
    pub label: String,
    pub actions: Vec<Action>,
    pub is_violation: bool,
    /// `counterexamples/NAME.json`, `verifier`, or `model (first enabled action each step)`.
    pub source: String,
}

/// Committed counterexample files, by (canonical spec path, kind).
#[derive(Default)]
pub struct TraceIndex {
    files: Vec<(PathBuf, K, PathBuf, TraceFile)>,
}

impl TraceIndex {
    /// Read every `*.json` trace file of `dir` (files that do not parse are skipped).
    pub fn load(dir: &Path) -> TraceIndex {
        let mut files = Vec::new();
        let Ok(rd) = std::fs::read_dir(dir) else {
            return TraceIndex::default();
        };
        let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths.into_iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
            let Ok(text) = std::fs::read_to_string(&p) else { continue };
            let Ok(tf) = TraceFile::from_json(&text) else { continue };
            let Ok(spec) = dir.join(&tf.spec.path).canonicalize() else {
                continue;
            };
            files.push((spec, tf.violation.kind, p, tf));
        }
        TraceIndex { files }
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The files for this spec whose text and parameters are the spec's, and whose schedule
    /// replays in `model`; notes for those that do not apply.
    pub fn for_spec(&self, spec: &Spec, model: &Model, notes: &mut Vec<String>) -> Vec<Trace> {
        let Ok(me) = spec.path.canonicalize() else { return Vec::new() };
        let params: BTreeMap<String, i64> = spec.proto.params.iter().cloned().collect();
        let mut out = Vec::new();
        for (p, kind, file, tf) in self.files.iter().filter(|f| f.0 == me) {
            let name = display_path(file);
            let stale = if tf.check_source(&spec.source).is_err() {
                Some("the spec changed since it was written")
            } else if tf.params != params {
                Some("its parameters are not the spec's")
            } else {
                None
            };
            let actions: Vec<Action> = tf.steps.iter().map(|s| s.action).collect();
            if let Some(why) = stale {
                notes.push(format!("{name} not used: {why}"));
                continue;
            }
            if let Err(e) = forced(model, &actions) {
                notes.push(format!("{name} not used: it does not replay ({e})"));
                continue;
            }
            let _ = p;
            out.push(Trace {
                label: kind.name().to_string(),
                actions,
                is_violation: true,
                source: name,
            });
        }
        out
    }
}

fn display_path(p: &Path) -> String {
    let s = p.display().to_string();
    match s.find("counterexamples/") {
        Some(i) => s[i..].to_string(),
        None => s,
    }
}

/// What the model stages produced for one spec.
pub struct SpecPlan {
    pub display: String,
    pub model: Model,
    pub traces: Vec<Trace>,
    /// Whether the spec has any violation (the verifier's verdict, or a counterexample file).
    pub has_bug: bool,
    /// The spec races (data-race, completion-misuse): shared vars may end with values no
    /// interleaving gives (vars are not widened), so the end values of completion vars are not
    /// judged.
    pub vars_racy: bool,
    /// Per backend its kernel, or why the generator refused it (the reason alone, without the
    /// `not expressible: ` that [`refusal`] puts before it in a case).
    pub kernels: BTreeMap<Backend, Result<Kernel, String>>,
    /// For a spec with a warp-batched `commit`: its kernels with the hardware's batching
    /// ([`crate::codegen::generate_hw_commit`]), run free as `stress-hw-commit`.
    pub hw_commit_kernels: BTreeMap<Backend, Kernel>,
    /// For a spec with `syncthreads` or named barriers: its kernels on the hardware's barriers
    /// ([`crate::codegen::generate_hw_barrier`]), run free as `stress-hw-barrier` in place of
    /// the software form's stress case.
    pub hw_barrier_kernels: BTreeMap<Backend, Kernel>,
    pub allowed: Option<AllowedSet>,
    /// `ran` once judged; `planned`; `not run (budget: ...)`; `model error: ...`.
    pub status: String,
    /// Notes every case of this spec carries (trace sources that did not apply, search bounds).
    pub notes: Vec<String>,
    pub seconds: BTreeMap<String, f64>,
}

impl SpecPlan {
    /// Ready for the GPU: every model stage finished within budget.
    pub fn ready(&self) -> bool {
        self.allowed.is_some() && !self.status.starts_with("not run") && !self.status.starts_with("model error")
    }

    /// Why a case of this spec on `backend` does not run, for a spec that is not ready: the
    /// backend's own refusal when no backend could generate a kernel, else the spec's status.
    pub fn why_not_run(&self, backend: Backend) -> String {
        match self.kernels.get(&backend) {
            Some(Err(e)) if self.status == NOT_EXPRESSIBLE => refusal(e),
            _ => self.status.clone(),
        }
    }
}

/// A case's text for a backend's refusal to generate a kernel (`SpecPlan::kernels` holds the
/// generator's reason alone).
pub fn refusal(e: &str) -> String {
    format!("not expressible: {e}")
}

/// The status of a spec that no backend can generate (its model stages are skipped).
pub const NOT_EXPRESSIBLE: &str = "not expressible in any backend";

/// The text of a caught panic.
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

/// A spec's kernels in every backend, with its hardware forms: generated before the model's
/// stages, since they need no outcome, so that NVRTC compiles them while the slowest outcome
/// enumerations still run (on the H200 host the planning and the compile took 36 s and 21 s one
/// after the other, 2026-12-02).
pub struct Generated {
    attempts: Vec<(Backend, Result<Kernel, String>)>,
    hw_commit: BTreeMap<Backend, Kernel>,
    hw_barrier: BTreeMap<Backend, Kernel>,
    seconds: f64,
}

impl Generated {
    /// The kernels NVRTC compiles for backend `b`: the spec's kernel and its hardware forms.
    pub fn kernels(&self, b: Backend) -> impl Iterator<Item = &Kernel> {
        let main = self
            .attempts
            .iter()
            .filter(move |(be, _)| *be == b)
            .filter_map(|(_, k)| k.as_ref().ok());
        main.chain(self.hw_commit.get(&b)).chain(self.hw_barrier.get(&b))
    }
}

/// Generate a spec's kernels (a generator that panics is that backend's refusal).
pub fn generate_kernels(spec: &Spec, index: usize, backends: &[Backend]) -> Generated {
    let t = Instant::now();
    let attempt =
        |f: &dyn Fn() -> Result<Kernel, crate::codegen::NotExpressible>| match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(r) => r.map_err(|e| e.0),
            Err(p) => Err(format!("code generation panicked: {}", panic_text(&*p))),
        };
    let mut g = Generated {
        attempts: Vec::new(),
        hw_commit: BTreeMap::new(),
        hw_barrier: BTreeMap::new(),
        seconds: 0.0,
    };
    for &be in backends {
        let k = attempt(&|| generate(&spec.proto, &spec.source, be, index));
        if k.is_ok() && has_commit(&spec.proto) {
            if let Ok(h) = attempt(&|| generate_hw_commit(&spec.proto, &spec.source, be, index)) {
                g.hw_commit.insert(be, h);
            }
        }
        if k.is_ok() && hw_barrier_form(&spec.proto).is_ok() {
            if let Ok(h) = attempt(&|| generate_hw_barrier(&spec.proto, &spec.source, be, index)) {
                g.hw_barrier.insert(be, h);
            }
        }
        g.attempts.push((be, k));
    }
    g.seconds = t.elapsed().as_secs_f64();
    g
}

/// Run the model stages for one spec within `s.budget`; never panics.
pub fn plan_spec(spec: &Spec, s: &Settings, traces: &TraceIndex, generated: &Generated) -> SpecPlan {
    let mut model = Model::new(spec.proto.clone());
    model.mutant = s.mutant;
    let mut plan = SpecPlan {
        display: spec.display.clone(),
        model,
        traces: Vec::new(),
        has_bug: false,
        vars_racy: false,
        kernels: BTreeMap::new(),
        hw_commit_kernels: BTreeMap::new(),
        hw_barrier_kernels: BTreeMap::new(),
        allowed: None,
        status: "planned".into(),
        notes: Vec::new(),
        seconds: BTreeMap::new(),
    };
    let b = &s.budget;
    // 0. A spec no backend can generate (model-only statements: Blackwell, the warpgroup-scoped
    // wgmma, ...) costs no enumeration: its cases say why per backend, at once, instead of a budget
    // its outcomes would never be compared against (a Blackwell GEMM spent the whole outcome budget
    // to end `not run (budget)` on the final H200 run of 2026-12-02).
    let attempts = &generated.attempts;
    let generate_seconds = generated.seconds;
    if !attempts.is_empty() && attempts.iter().all(|(_, k)| k.is_err()) {
        plan.seconds.insert("codegen".into(), generate_seconds);
        plan.kernels = attempts.iter().cloned().collect();
        plan.status = NOT_EXPRESSIBLE.into();
        return plan;
    }
    // 1. The allowed outcomes.
    let t = Instant::now();
    let deadline = Instant::now() + Duration::from_secs_f64(b.outcome_seconds);
    let m = &plan.model;
    let set = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        allowed_outcomes_within(m, b.outcome_states, Some(deadline))
    }));
    plan.seconds.insert("model".into(), t.elapsed().as_secs_f64());
    match set {
        Err(p) => {
            plan.status = format!("model error: outcome enumeration: {}", panic_text(&*p));
            return plan;
        }
        Ok(set) if set.stopped_by() == Some("step budget") => {
            plan.status = "not run (budget: a model step ran past the step budget of 16,777,216 local instructions)".into();
            return plan;
        }
        Ok(set) => {
            // A budget that stops the enumeration does not stop the cases: what the explored part
            // holds is allowed (within), and what it does not hold is undecided (unchecked, never
            // OUTSIDE; compare.rs). The replays still show the bugs their traces reach.
            if !set.is_complete() {
                plan.notes.push(match set.stopped_by() {
                    Some("seconds") => format!(
                        "allowed outcomes incomplete: the enumeration stopped at {:.0} s after {} states, before it held any; every outcome is judged unchecked",
                        b.outcome_seconds,
                        set.explored()
                    ),
                    Some("outcomes") => format!(
                        "allowed outcomes incomplete: the enumeration held more than {} futures after {} states, and kept none; every outcome is judged unchecked",
                        phasecheck_verifier::outcomes::MAX_HELD_FUTURES,
                        set.explored()
                    ),
                    _ => format!(
                        "allowed outcomes incomplete: the enumeration reached {} states; {} outcomes of the part explored are judged, any other outcome is unchecked",
                        b.outcome_states,
                        set.len()
                    ),
                });
            }
            plan.allowed = Some(set);
        }
    }
    // 2. Traces: the committed files first, the verifier for the kinds they do not cover.
    let t = Instant::now();
    let mut found = traces.for_spec(spec, &plan.model, &mut plan.notes);
    let opts = CheckOptions {
        max_seconds: Some(b.check_seconds),
        max_states: b.check_states,
        ..Default::default()
    };
    let m = &plan.model;
    let rep = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(m, &opts)));
    plan.seconds.insert("traces".into(), t.elapsed().as_secs_f64());
    let rep = match rep {
        Ok(r) => r,
        Err(p) => {
            plan.status = format!("model error: trace search: {}", panic_text(&*p));
            return plan;
        }
    };
    if rep.verdict == CheckVerdict::InternalError {
        plan.status = format!(
            "model error: trace search: {}",
            rep.internal
                .as_ref()
                .map(|i| i.describe())
                .unwrap_or_else(|| "internal error".into())
        );
        return plan;
    }
    if let Some(bound) = &rep.bound {
        plan.notes.push(format!(
            "trace search stopped by its budget ({}): replaying the traces found so far",
            bound.describe()
        ));
    }
    for v in &rep.violations {
        if !found.iter().any(|t| t.label == v.kind.name()) {
            found.push(Trace {
                label: v.kind.name().to_string(),
                actions: v.actions.clone(),
                is_violation: true,
                source: "verifier".into(),
            });
        }
    }
    if found.is_empty() && rep.violations.is_empty() {
        if let Some(ex) = one_execution_landings_first(&plan.model) {
            found.push(Trace {
                label: "complete execution, landings first".into(),
                actions: ex,
                is_violation: false,
                source: "model (copies land as soon as they can, else the first thread steps)".into(),
            });
        } else if let Some(ex) = one_execution(&plan.model) {
            found.push(Trace {
                label: "complete execution".into(),
                actions: ex,
                is_violation: false,
                source: "model (first enabled action each step)".into(),
            });
        }
    }
    plan.has_bug = found.iter().any(|t| t.is_violation) || !rep.violations.is_empty();
    let racy = [K::DataRace, K::CompletionMisuse];
    plan.vars_racy =
        rep.violations.iter().any(|v| racy.contains(&v.kind)) || found.iter().any(|t| racy.iter().any(|k| k.name() == t.label));
    plan.traces = found;
    // 3. Kernels (generated before the model's stages).
    plan.kernels = attempts.iter().cloned().collect();
    plan.hw_commit_kernels = generated.hw_commit.clone();
    plan.hw_barrier_kernels = generated.hw_barrier.clone();
    plan.seconds.insert("codegen".into(), generate_seconds);
    plan
}

/// The progress line for a planned spec (stderr).
pub fn progress_line(i: usize, n: usize, p: &SpecPlan) -> String {
    let secs = |k: &str| p.seconds.get(k).copied().unwrap_or(0.0);
    let mut parts = vec![format!("model {:.1} s", secs("model"))];
    if let Some(a) = &p.allowed {
        parts.push(a.summary());
    }
    if p.seconds.contains_key("traces") {
        let files = p.traces.iter().filter(|t| t.source.starts_with("counterexamples")).count();
        parts.push(format!(
            "{} trace{} ({files} from counterexamples/) in {:.1} s",
            p.traces.len(),
            if p.traces.len() == 1 { "" } else { "s" },
            secs("traces")
        ));
    }
    for (b, k) in &p.kernels {
        parts.push(format!("{}: {}", b.name(), if k.is_ok() { "kernel" } else { "not expressible" }));
    }
    if !p.ready() {
        parts.push(p.status.clone());
    }
    format!("gpu run: [{}/{n}] {}: {}", i + 1, p.display, parts.join("; "))
}
