//! Re-judging a committed report: the observations a GPU run recorded (the `observed` keys are
//! outcomes in their one-line form) judged again under the current model with the current policy
//! ([`crate::compare`]). CI runs it on the committed H200 results, so a model change that would
//! turn an observed outcome OUTSIDE (or make a case vacuous) shows up without a GPU.

use crate::compare::{judge_launch_hung, judge_replay, judge_stress, Verdict, LAUNCH_HUNG};
use crate::plan::{panic_text, Budget, Trace, TraceIndex};
use crate::report::{Case, Report};
use phasecheck_model::rt::Model;
use phasecheck_model::spec::load as load_spec;
use phasecheck_verifier::outcomes::{allowed_outcomes_within, forced, AllowedSet, Outcome};
use phasecheck_verifier::outcomes::{one_execution, one_execution_landings_first};
use phasecheck_verifier::{check, CheckOptions};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where to find what a report names.
#[derive(Clone, Debug)]
pub struct Options {
    /// Spec paths in the report are relative to this folder (the repository root).
    pub root: PathBuf,
    /// Counterexample trace files (replay traces are taken from here first).
    pub traces: Option<PathBuf>,
    pub budget: Budget,
}

/// One case of the old report and its new judgement.
#[derive(Clone, Debug)]
pub struct Rejudged {
    /// The old report's `observed_within_model` (null: nothing was judged).
    pub old_within: Option<bool>,
    /// The old report's `verdict`, for reports that have one.
    pub old_verdict: Option<Verdict>,
    pub case: Case,
}

impl Rejudged {
    /// The verdict the old report implies: its `verdict`, else `within`/`OUTSIDE` from
    /// `observed_within_model`.
    pub fn old(&self) -> Option<Verdict> {
        self.old_verdict
            .or(self.old_within.map(|w| if w { Verdict::Within } else { Verdict::Outside }))
    }
}

struct SpecCache {
    model: Model,
    source: phasecheck_model::spec::Spec,
    allowed: Result<AllowedSet, String>,
    traces: Option<Vec<Trace>>,
}

/// Parse `trace: LABEL (N steps)` from an old note.
fn trace_of_note(note: &str) -> Option<(String, usize)> {
    let at = note.find("trace: ")? + "trace: ".len();
    let rest = &note[at..];
    let open = rest.find(" (")?;
    let label = rest[..open].to_string();
    let steps = rest[open + 2..].split(' ').next()?.parse().ok()?;
    Some((label, steps))
}

/// Re-judge every case of `report` (a parsed results file).
pub fn rejudge(report: &serde_json::Value, o: &Options) -> Result<Vec<Rejudged>, String> {
    let cases = report["cases"].as_array().ok_or("the report has no `cases` array")?;
    let index = o.traces.as_deref().map(TraceIndex::load).unwrap_or_default();
    // A spec's model enumeration is the expensive part and is shared by its cases only: the
    // cases are grouped by spec and the groups judged on every core, each with its own cache.
    // The answer is the same as judging them in order: the cases come back in their order, and
    // the first error in that order is the one returned.
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (number, c) in cases.iter().enumerate() {
        let spec = c.get("spec").and_then(|s| s.as_str()).unwrap_or_default().to_string();
        match groups.iter_mut().find(|(s, _)| *s == spec) {
            Some((_, v)) => v.push(number),
            None => groups.push((spec, vec![number])),
        }
    }
    // Largest groups first, so that no long one starts last.
    groups.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let judged = std::sync::Mutex::new(Vec::with_capacity(cases.len()));
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(groups.len().max(1));
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| {
                let mut specs: HashMap<String, SpecCache> = HashMap::new();
                loop {
                    let g = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((_, numbers)) = groups.get(g) else { break };
                    for &number in numbers {
                        let r = rejudge_case(number, &cases[number], &mut specs, &index, o);
                        let stop = r.is_err();
                        judged.lock().unwrap_or_else(|e| e.into_inner()).push((number, r));
                        if stop {
                            break;
                        }
                    }
                    specs.clear();
                }
            });
        }
    });
    let mut judged = judged.into_inner().unwrap_or_else(|e| e.into_inner());
    judged.sort_by_key(|(n, _)| *n);
    judged.into_iter().map(|(_, r)| r).collect()
}

/// One case judged under the current model; `specs` caches each spec's model and enumeration.
fn rejudge_case(
    number: usize,
    c: &serde_json::Value,
    specs: &mut HashMap<String, SpecCache>,
    index: &TraceIndex,
    o: &Options,
) -> Result<Rejudged, String> {
    let old: Case = serde_json::from_value(c.clone()).map_err(|e| format!("a case does not parse: {e}"))?;
    let named = |e: String| format!("case {} ({}, {}, {}): {e}", number + 1, old.spec, old.backend, old.mode);
    validate_names(&old).map_err(named)?;
    let old_verdict = c.get("verdict").and_then(|v| serde_json::from_value(v.clone()).ok());
    let mut case = Case {
        spec: old.spec.clone(),
        backend: old.backend.clone(),
        mode: old.mode.clone(),
        runs: old.runs,
        observed: old.observed.clone(),
        bug_manifested: old.bug_manifested,
        ..Case::default()
    };
    if old.observed_within_model.is_none() {
        case.why = if old.why.is_empty() { old.note.clone() } else { old.why.clone() };
        case.note = old.note.clone();
        return Ok(Rejudged {
            old_within: None,
            old_verdict,
            case,
        });
    }
    if !specs.contains_key(&old.spec) {
        let spec = load_spec(&o.root.join(&old.spec), &[])?;
        let model = Model::new(spec.proto.clone());
        let deadline = Instant::now() + Duration::from_secs_f64(o.budget.outcome_seconds);
        let allowed = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            allowed_outcomes_within(&model, o.budget.outcome_states, Some(deadline))
        })) {
            // An incomplete set judges what it holds; the rest is undecided (compare.rs).
            Ok(s) if s.stopped_by() != Some("step budget") => Ok(s),
            Ok(s) => Err(format!("not run (budget: model enumeration: {})", s.summary())),
            Err(p) => Err(format!("model error: outcome enumeration: {}", panic_text(&*p))),
        };
        specs.insert(
            old.spec.clone(),
            SpecCache {
                model,
                source: spec,
                allowed,
                traces: None,
            },
        );
    }
    let sc = specs.get_mut(&old.spec).unwrap();
    validate_observations(&old, &sc.model).map_err(named)?;
    let allowed = match &sc.allowed {
        Ok(a) => a,
        Err(e) => {
            case.why = e.clone();
            return Ok(Rejudged {
                old_within: old.observed_within_model,
                old_verdict,
                case,
            });
        }
    };
    if old.observed.contains_key(LAUNCH_HUNG) {
        // A launch on the hardware's barriers that never returned: no outcome to parse.
        let j = judge_launch_hung(allowed);
        case.allowed = serde_json::json!(allowed.summary());
        case.verdict = Some(j.verdict);
        case.why = j.why;
        case.blocks = Some(j.tally);
        case.note = old.note.clone();
        case.observed_within_model = case.verdict.map(|v| v != Verdict::Outside);
        return Ok(Rejudged {
            old_within: old.observed_within_model,
            old_verdict,
            case,
        });
    }
    let nb = sc.model.proto.barriers.len();
    let mut obs: Vec<(Outcome, usize)> = Vec::new();
    let mut ends = Vec::new();
    for (line, n) in &old.observed {
        let (o, e) = Outcome::parse_observed(line, nb).map_err(|e| format!("{}: {e}", old.spec))?;
        obs.push((o, *n));
        ends.push(e);
    }
    // A faulted launch was counted once per block in the old reports.
    if case.mode.starts_with("stress") {
        let (j, litmus) = judge_stress(allowed, &obs, &ends);
        case.allowed = serde_json::json!(allowed.summary());
        case.verdict = Some(j.verdict);
        case.why = j.why;
        case.blocks = Some(j.tally);
        case.litmus = Some(litmus);
        case.note = old.note.clone();
    } else {
        let (label, steps) = trace_of_note(&old.note).ok_or_else(|| format!("{}: no trace in the note `{}`", old.spec, old.note))?;
        if sc.traces.is_none() {
            sc.traces = Some(traces_for(&sc.source, &sc.model, index, o));
        }
        let traces = sc.traces.as_ref().unwrap();
        let t = traces
            .iter()
            .find(|t| t.label == label && t.actions.len() == steps)
            .or_else(|| traces.iter().find(|t| t.label == label));
        let Some(t) = t else {
            case.why = format!("no trace of kind {label} found now");
            return Ok(Rejudged {
                old_within: old.observed_within_model,
                old_verdict,
                case,
            });
        };
        let fc = forced(&sc.model, &t.actions).map_err(|e| format!("{}: trace does not replay: {e}", old.spec))?;
        let deadline = Instant::now() + Duration::from_secs_f64(o.budget.outcome_seconds);
        let (j, mut info) = judge_replay(
            &sc.model,
            &t.actions,
            &fc,
            allowed,
            &obs,
            &ends,
            o.budget.outcome_states,
            Some(deadline),
        );
        info.trace = t.label.clone();
        info.trace_source = t.source.clone();
        let mut note = format!(
            "trace: {} ({} steps) from {}; reproduced as forced: {}/{}; {} left the trace",
            t.label,
            t.actions.len(),
            t.source,
            info.reproduced,
            info.blocks,
            info.left
        );
        if t.actions.len() != steps {
            note.push_str(&format!("; the recorded run replayed a trace of {steps} steps"));
        }
        case.allowed = serde_json::json!(info.forced);
        case.verdict = Some(j.verdict);
        case.why = j.why;
        case.blocks = Some(j.tally);
        case.replay = Some(info);
        case.note = note;
    }
    case.observed_within_model = case.verdict.map(|v| v != Verdict::Outside);
    Ok(Rejudged {
        old_within: old.observed_within_model,
        old_verdict,
        case,
    })
}

/// A case's backend and mode are ones `gpu run` writes: a results file naming another is not one
/// of ours (or was edited), and judging it would report a hardware disagreement that never ran.
pub fn validate_names(case: &Case) -> Result<(), String> {
    if crate::codegen::Backend::parse(&case.backend).is_none() {
        return Err(format!(
            "unknown backend `{}` (gpu run writes ptx or libcu)",
            case.backend.escape_debug()
        ));
    }
    if !matches!(
        case.mode.as_str(),
        "stress" | "stress-hw-commit" | "stress-hw-barrier" | "replay" | "replay-hw-barrier"
    ) {
        return Err(format!(
            "unknown mode `{}` (gpu run writes stress, stress-hw-commit, stress-hw-barrier, replay or replay-hw-barrier)",
            case.mode.escape_debug()
        ));
    }
    Ok(())
}

/// Every observed outcome of a case is one the spec's kernel could have printed: in the outcome
/// grammar, not empty, and with one entry per thread of the spec (a faulted launch may print
/// none). A malformed line would otherwise be judged, and an outcome no kernel can print is
/// OUTSIDE every allowed set: a false disagreement with the hardware.
pub fn validate_observations(case: &Case, model: &Model) -> Result<(), String> {
    let threads = model.proto.threads.len();
    let barriers = model.proto.barriers.len();
    for line in case.observed.keys() {
        let shown = line.escape_debug();
        if line.trim().is_empty() {
            return Err("an empty outcome string among the observations".to_string());
        }
        // A launch on the hardware's barriers that the host ended is judged as a whole: no
        // thread's record came back, so it names none.
        if line == LAUNCH_HUNG {
            continue;
        }
        let (o, _) = Outcome::parse_observed(line, barriers).map_err(|e| format!("outcome `{shown}`: {e}"))?;
        let n = o.threads.len();
        if n != threads && !(o.fault && n == 0) {
            return Err(format!(
                "outcome `{shown}` names {n} thread(s), the spec has {threads} (t0 to t{})",
                threads.saturating_sub(1)
            ));
        }
    }
    Ok(())
}

/// The traces a replay of this spec uses now: counterexample files first, then the verifier's
/// (one per kind), then the complete executions.
fn traces_for(spec: &phasecheck_model::spec::Spec, model: &Model, index: &TraceIndex, o: &Options) -> Vec<Trace> {
    let mut notes = Vec::new();
    let mut found = index.for_spec(spec, model, &mut notes);
    let opts = CheckOptions {
        max_seconds: Some(o.budget.check_seconds),
        max_states: o.budget.check_states,
        ..Default::default()
    };
    let rep = check(model, &opts);
    for v in &rep.violations {
        if !found.iter().any(|t| t.label == v.kind.name() && t.actions.len() == v.actions.len()) {
            found.push(Trace {
                label: v.kind.name().to_string(),
                actions: v.actions.clone(),
                is_violation: true,
                source: "verifier".into(),
            });
        }
    }
    // Both complete executions the runner has replayed (older reports used the plain one).
    if let Some(ex) = one_execution_landings_first(model) {
        found.push(Trace {
            label: "complete execution, landings first".into(),
            actions: ex,
            is_violation: false,
            source: "model (copies land as soon as they can, else the first thread steps)".into(),
        });
    }
    if let Some(ex) = one_execution(model) {
        found.push(Trace {
            label: "complete execution".into(),
            actions: ex,
            is_violation: false,
            source: "model (first enabled action each step)".into(),
        });
    }
    found
}

/// Re-judge a results file into a new report (device, driver and date kept).
pub fn rejudge_file(path: &Path, o: &Options) -> Result<(Vec<Rejudged>, Report), String> {
    // Regular and bounded (a FIFO or an endless device is bad input, not a hang).
    let text = phasecheck_model::io::read_text(path, phasecheck_model::io::MAX_DATA_BYTES, &path.display().to_string())?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let t0 = Instant::now();
    let r = rejudge(&v, o)?;
    let s = |k: &str| v[k].as_str().unwrap_or("unknown").to_string();
    let report = Report {
        device: s("device"),
        driver: s("driver"),
        date: format!("{} (re-judged {})", s("date"), crate::report::today()),
        wall_seconds: t0.elapsed().as_secs_f64(),
        specs: Vec::new(),
        cases: r.iter().map(|x| x.case.clone()).collect(),
    };
    Ok((r, report))
}
