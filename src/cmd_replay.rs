//! `phasecheck replay TRACE.json`, and the trace outputs of `phasecheck check` (`--trace-dir`,
//! `--html`, `--swimlanes`).
//!
//! Replay exit codes: 1 the trace reproduces its violation, 4 it diverges (the first step whose
//! action, thread, observations or barrier changes differ is named), 2 unreadable or mismatched
//! files (another schema version, a spec whose text changed, parameters that differ).

use crate::load::{self, Spec};
use phasecheck_model::step::{Action, Model};
use phasecheck_verifier::minimize::minimize;
use phasecheck_verifier::render;
use phasecheck_verifier::trace::{replay, thread_ref, CopyRef, TraceStep};
use phasecheck_verifier::tracefile::{self, actor, obs_text, RaisedBy, StepRec, TraceFile};
use phasecheck_verifier::Report;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ReplayArgs {
    /// A trace file written by `phasecheck check --trace-dir`.
    pub trace: PathBuf,
    /// The spec to replay against, instead of the path recorded in the trace.
    #[arg(long, value_name = "PATH")]
    pub spec: Option<PathBuf>,
    /// Also write the counterexample as a self-contained HTML timeline.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
}

/// Trace outputs of `phasecheck check`.
#[derive(clap::Args, Clone, Default)]
pub struct TraceOutputs {
    /// Write one minimized trace file per violation found: DIR/<protocol>.<kind>.json.
    #[arg(long, value_name = "DIR")]
    pub trace_dir: Option<PathBuf>,
    /// Write every violation found as a self-contained HTML timeline (one file).
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// Print each (minimized) counterexample as text swimlanes.
    #[arg(long)]
    pub swimlanes: bool,
}

impl TraceOutputs {
    pub fn any(&self) -> bool {
        self.trace_dir.is_some() || self.html.is_some() || self.swimlanes
    }
}

/// Collected across the specs of one `check` run, for the HTML page.
#[derive(Default)]
pub struct Collected {
    traces: Vec<(TraceFile, Option<String>)>,
}

/// Lexical relative path from folder `from` to `to` (both made absolute first).
fn relative_to(from: &Path, to: &Path) -> PathBuf {
    let abs = |p: &Path| -> PathBuf { std::fs::canonicalize(p).unwrap_or_else(|_| std::env::current_dir().unwrap_or_default().join(p)) };
    let (f, t) = (abs(from), abs(to));
    let fc: Vec<Component> = f.components().collect();
    let tc: Vec<Component> = t.components().collect();
    let common = fc.iter().zip(&tc).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..fc.len() {
        out.push("..");
    }
    for c in &tc[common..] {
        out.push(c.as_os_str());
    }
    out
}

/// `a/b/../c` -> `a/c` (lexically), for display.
fn normalize(p: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.last(), Some(Component::Normal(_))) => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out.iter().map(|c| c.as_os_str()).collect()
}

fn path_string(p: &Path) -> String {
    p.to_string_lossy().replace('\\', "/")
}

/// Minimize and write/print/collect the traces of one checked spec.
pub fn after_check(spec: &Spec, model: &Model, report: &Report, o: &TraceOutputs, acc: &mut Collected) -> Result<(), String> {
    if !o.any() {
        return Ok(());
    }
    for v in &report.violations {
        let actions = minimize(model, &v.actions, v.kind);
        let stored_path = match &o.trace_dir {
            Some(dir) => path_string(&relative_to(dir, &spec.path)),
            None => path_string(&spec.path),
        };
        let t = tracefile::build(model, &spec.source, &stored_path, v.kind, &actions)
            .map_err(|e| format!("error: {}: cannot write the {} trace: {e}", spec.display, v.kind))?;
        if let Some(dir) = &o.trace_dir {
            std::fs::create_dir_all(dir).map_err(|e| format!("error: cannot create {}: {e}", dir.display()))?;
            let f = dir.join(format!("{}.{}.json", spec.proto.name, v.kind.name()));
            std::fs::write(&f, t.to_json()).map_err(|e| format!("error: cannot write {}: {e}", f.display()))?;
        }
        if o.swimlanes {
            let mut shown = t.clone();
            shown.spec.path = spec.display.clone();
            println!("{}", render::swimlanes(&shown, Some(&spec.source)));
        }
        if o.html.is_some() {
            let mut shown = t;
            shown.spec.path = spec.display.clone();
            acc.traces.push((shown, Some(spec.source.clone())));
        }
    }
    Ok(())
}

/// Write the HTML page of a `check` run, if asked for.
pub fn finish_check(o: &TraceOutputs, acc: Collected) -> Result<(), String> {
    if let Some(out) = &o.html {
        let page = render::html(&acc.traces, "phasecheck counterexamples");
        std::fs::write(out, page).map_err(|e| format!("error: cannot write {}: {e}", out.display()))?;
        eprintln!("wrote {} ({} counterexample(s))", out.display(), acc.traces.len());
    }
    Ok(())
}

fn fail2(msg: String) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

/// Where the spec of a trace is: `--spec`, else the recorded path relative to the trace file's
/// folder, else relative to the current folder.
fn locate(trace_path: &Path, t: &TraceFile, over: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = over {
        return if p.exists() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("--spec {}: no such file", p.display()))
        };
    }
    let rec = Path::new(&t.spec.path);
    let mut tried = Vec::new();
    let dir = trace_path.parent().unwrap_or(Path::new(""));
    for c in [dir.join(rec), rec.to_path_buf()] {
        if c.is_file() {
            return Ok(c);
        }
        tried.push(c.display().to_string());
    }
    Err(format!(
        "cannot find the spec of trace {} ({}); tried {}; pass --spec PATH",
        trace_path.display(),
        t.spec.name,
        tried.join(", ")
    ))
}

/// How a recorded step and the re-executed one differ, if they do.
fn step_diff(t: &TraceFile, rec: &StepRec, got: &TraceStep, model: &Model) -> Option<String> {
    if rec.action != got.action {
        return Some(format!("the trace recorded action {:?}, replay took {:?}", rec.action, got.action));
    }
    if let Action::Thread(th) = got.action {
        let now = thread_ref(model, th as usize);
        if rec.thread.as_ref() != Some(&now) {
            return Some(format!(
                "the trace recorded thread {:?}, but thread {th} is now {}#{}",
                rec.thread.as_ref().map(|r| format!("{}#{}", r.role, r.tid)),
                now.role,
                now.tid
            ));
        }
    }
    if rec.copy != got.copy {
        let d = |c: &Option<CopyRef>| match c {
            Some(c) => format!(
                "{} B (v{}) into {} on {} from {}",
                c.bytes, c.version, c.buffer, c.barrier, c.issuer
            ),
            None => "none".into(),
        };
        return Some(format!(
            "the landing copy differs: the trace recorded {}, replay has {}",
            d(&rec.copy),
            d(&got.copy)
        ));
    }
    if rec.span.start != got.span.start || rec.span.end != got.span.end {
        return Some(format!(
            "the statement differs: the trace recorded bytes {}..{}, replay ran bytes {}..{}",
            rec.span.start, rec.span.end, got.span.start, got.span.end
        ));
    }
    let n = rec.observed.len().max(got.obs.len());
    for i in 0..n {
        match (rec.observed.get(i), got.obs.get(i)) {
            (Some(a), Some(b)) if a == b => {}
            (a, b) => {
                let show = |o: Option<&phasecheck_model::step::Obs>| match o {
                    Some(o) => format!("`{}`", obs_text(t, o)),
                    None => "nothing".into(),
                };
                return Some(format!(
                    "observation {}: replay observed {}, the trace recorded {}",
                    i + 1,
                    show(b),
                    show(a)
                ));
            }
        }
    }
    if rec.changes != got.changes {
        let show = |c: &[phasecheck_verifier::trace::BarrierChange]| {
            let s: Vec<String> = c.iter().map(tracefile::changes_text).collect();
            if s.is_empty() {
                "no change".to_string()
            } else {
                s.join("; ")
            }
        };
        return Some(format!(
            "barrier changes: replay made {}, the trace recorded {}",
            show(&got.changes),
            show(&rec.changes)
        ));
    }
    let raised: Vec<_> = got.violations.iter().map(|v| v.kind).collect();
    if rec.raised != raised {
        let names = |k: &[phasecheck_model::ViolationKind]| {
            if k.is_empty() {
                "none".to_string()
            } else {
                k.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
            }
        };
        return Some(format!(
            "violations raised: replay raised {}, the trace recorded {}",
            names(&raised),
            names(&rec.raised)
        ));
    }
    None
}

pub fn run(a: ReplayArgs) -> ExitCode {
    let text = match std::fs::read_to_string(&a.trace) {
        Ok(t) => t,
        Err(e) => return fail2(format!("cannot read {}: {e}", a.trace.display())),
    };
    let t = match TraceFile::from_json(&text) {
        Ok(t) => t,
        Err(e) => return fail2(format!("{}: {e}", a.trace.display())),
    };
    let spec_path = match locate(&a.trace, &t, a.spec.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail2(e),
    };
    let source = match std::fs::read_to_string(&spec_path) {
        Ok(s) => s,
        Err(e) => return fail2(format!("cannot read {}: {e}", spec_path.display())),
    };
    if let Err(e) = t.check_source(&source) {
        return fail2(format!("{}: {e}", a.trace.display()));
    }
    let params: Vec<(String, i64)> = t.params.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let spec = match load::load(&spec_path, &params) {
        Ok(s) => s,
        Err(e) => {
            eprint!("{e}");
            return ExitCode::from(2);
        }
    };
    let now: std::collections::BTreeMap<String, i64> = spec.proto.params.iter().cloned().collect();
    if now != t.params || spec.proto.name != t.spec.name {
        return fail2(format!(
            "{}: the trace is for protocol {} with params {:?}, but {} declares protocol {} with params {:?}",
            a.trace.display(),
            t.spec.name,
            t.params,
            spec_path.display(),
            spec.proto.name,
            now
        ));
    }
    let model = Model::new(spec.proto.clone());
    if let Err(e) = t.check_against(&model, &spec.source) {
        return fail2(format!("{}: {e}", a.trace.display()));
    }
    let actions: Vec<Action> = t.steps.iter().map(|s| s.action).collect();
    let diverge = |step: usize, why: String| -> ExitCode {
        let what = t
            .steps
            .get(step.saturating_sub(1))
            .map(|s| format!(" ({}, line {}: `{}`)", actor(s), s.span.line, s.statement))
            .unwrap_or_default();
        eprintln!(
            "replay diverged at step {step}{what}: {why}\n{} does not reproduce {} in {}",
            a.trace.display(),
            t.violation.kind,
            spec_path.display()
        );
        ExitCode::from(4)
    };
    let got = match replay(&model, &actions) {
        Ok(r) => r,
        Err(e) => return diverge(e.step + 1, format!("the action cannot be taken: {}", e.reason)),
    };
    for (i, (rec, g)) in t.steps.iter().zip(&got.steps).enumerate() {
        if rec.step != i + 1 {
            return fail2(format!("{}: step numbers are not 1, 2, 3, ...", a.trace.display()));
        }
        if let Some(why) = step_diff(&t, rec, g, &model) {
            return diverge(rec.step, why);
        }
    }
    let kind = t.violation.kind;
    match tracefile::raised_by(&model, &actions, kind) {
        Some((how, _)) if how == t.violation.raised_by => {}
        Some((how, _)) => {
            return diverge(
                t.steps.len(),
                format!(
                    "{kind} is raised by the {how:?} rather than the {:?} as recorded",
                    t.violation.raised_by
                ),
            )
        }
        None => {
            let why = match t.violation.raised_by {
                RaisedBy::InitialState => format!("the initial state no longer has a {kind} violation"),
                RaisedBy::Step => format!("the last step does not raise {kind}"),
                RaisedBy::State => format!("the state after the last step has no {kind} violation"),
            };
            return diverge(t.steps.len(), why);
        }
    }
    let mut shown = t.clone();
    shown.spec.path = path_string(&normalize(&spec_path));
    print!("{}", render::swimlanes(&shown, Some(&source)));
    println!(
        "\nreplay: reproduced {} in {} step(s); every recorded observation matched",
        kind,
        t.steps.len()
    );
    if let Some(out) = &a.html {
        let page = render::html(
            &[(shown, Some(source))],
            &format!("phasecheck counterexample: {} {}", t.spec.name, kind),
        );
        if let Err(e) = std::fs::write(out, page) {
            return fail2(format!("cannot write {}: {e}", out.display()));
        }
    }
    ExitCode::from(1)
}
