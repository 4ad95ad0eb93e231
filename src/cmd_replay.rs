//! `phasecheck replay TRACE.json`, and the trace outputs of `phasecheck check` (`--trace-dir`,
//! `--html`, `--swimlanes`).
//!
//! Replay exit codes: 1 the trace reproduces its violation, 4 it diverges (the first step whose
//! action, thread, observations or barrier changes differ is named), 2 unreadable or mismatched
//! files (another schema version, parameters that differ).
//!
//! When the spec's text is not the one the trace was recorded against, the replay is the fix
//! loop (`verifier::fixloop`): the schedule is replayed against the edited spec as far as it
//! applies, and the answer is "violation gone" (exit 0), "same violation" (exit 1) or "schedule
//! no longer possible from step N" (exit 3: a bound stopped the exploration). `check --against`
//! runs the same loop over a folder of traces.

use crate::load::{self, Spec};
use phasecheck_model::rt::{Action, Model};
use phasecheck_verifier::cause::{root_causes, Cause};
use phasecheck_verifier::fixloop::{replay_edited, FixReport, FixVerdict};
use phasecheck_verifier::minimize::minimize;
use phasecheck_verifier::render;
use phasecheck_verifier::trace::{replay, thread_ref, CopyRef, TraceStep};
use phasecheck_verifier::tracefile::{self, actor, obs_text, RaisedBy, StepRec, TraceFile};
use phasecheck_verifier::{CheckOptions, Found, Report};
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
    /// Bounds and options of the search the fix loop runs from where an edited spec's schedule
    /// stops (as `check` takes them; `--param` sets the edited spec's values). Defaults: 2,000,000
    /// states, 120 s.
    #[command(flatten)]
    pub search: crate::SearchArgs,
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
    extras: Vec<render::Extras>,
}

/// What the HTML page shows beside a trace that only the model knows: the barriers' init
/// counts (an array as `name[*]` when its elements agree) and the root cause.
fn html_extras(model: &Model, cause: Option<&Cause>) -> render::Extras {
    let mut counts: Vec<(String, i64)> = Vec::new();
    let bars = &model.proto.barriers;
    let mut i = 0;
    while i < bars.len() {
        let base = bars[i].name.split('[').next().unwrap_or("").to_string();
        let mut j = i;
        while j < bars.len() && bars[j].name.split('[').next() == Some(base.as_str()) && bars[j].name.contains('[') {
            j += 1;
        }
        if j > i && bars[i..j].iter().all(|b| b.count == bars[i].count) {
            counts.push((format!("{base}[*]"), bars[i].count));
            i = j;
        } else {
            counts.push((bars[i].name.clone(), bars[i].count));
            i += 1;
        }
    }
    render::Extras {
        init_counts: counts,
        cause: cause.map(|c| (c.summary.clone(), c.facts())),
        cause_line: cause.map(|c| c.line),
    }
}

/// The root cause of one trace on its own (a replayed trace file has no run to group with).
fn cause_of(model: &Model, source: &str, kind: phasecheck_model::ViolationKind, message: &str, actions: &[Action]) -> Option<Cause> {
    let f = Found {
        kind,
        message: message.to_string(),
        actions: actions.to_vec(),
    };
    root_causes(model, source, &[f]).0.into_iter().next()
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
    let (causes, of) = if o.html.is_some() {
        root_causes(model, &spec.source, &report.violations)
    } else {
        (Vec::new(), Vec::new())
    };
    for (vi, v) in report.violations.iter().enumerate() {
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
            phasecheck_model::io::write_atomic(&f, t.to_json().as_bytes())
                .map_err(|e| format!("error: cannot write {}: {e}", f.display()))?;
        }
        if o.swimlanes {
            let mut shown = t.clone();
            shown.spec.path = spec.display.clone();
            sayln!("{}", render::swimlanes(&shown, Some(&spec.source)));
        }
        if o.html.is_some() {
            let mut shown = t;
            shown.spec.path = spec.display.clone();
            acc.traces.push((shown, Some(spec.source.clone())));
            acc.extras.push(html_extras(model, of.get(vi).map(|&c| &causes[c])));
        }
    }
    Ok(())
}

/// Write the HTML page of a `check` run, if asked for.
pub fn finish_check(o: &TraceOutputs, acc: Collected) -> Result<(), String> {
    if let Some(out) = &o.html {
        let page = render::html_with(&acc.traces, "phasecheck counterexamples", &acc.extras);
        phasecheck_model::io::write_atomic(out, page.as_bytes()).map_err(|e| format!("error: cannot write {}: {e}", out.display()))?;
        noteln!("wrote {} ({} counterexample(s))", out.display(), acc.traces.len());
    }
    Ok(())
}

fn fail2(msg: String) -> ExitCode {
    noteln!("error: {msg}");
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
    // The recorded path is the trace's own claim, so it is followed only inside what a trace may
    // name: a `.phase` file relative to the trace's folder. An absolute path or another kind of
    // file (a crafted trace naming /etc/passwd) is refused before anything is opened.
    let rec = Path::new(&t.spec.path);
    let refuse = |why: &str| {
        Err(format!(
            "trace {} names its spec as {:?}, {why}; pass --spec PATH",
            trace_path.display(),
            phasecheck_model::io::escape_for_terminal(&t.spec.path)
        ))
    };
    if rec.is_absolute() {
        return refuse("an absolute path (a trace names its spec relative to its own folder)");
    }
    if rec.extension().is_none_or(|e| e != "phase") {
        return refuse("which is not a `.phase` file");
    }
    let dir = trace_path.parent().unwrap_or(Path::new(""));
    let c = dir.join(rec);
    if c.is_file() {
        return Ok(c);
    }
    Err(format!(
        "cannot find the spec of trace {} ({}); tried {}; pass --spec PATH",
        trace_path.display(),
        t.spec.name,
        c.display()
    ))
}

/// A trace or results file: regular, at most [`phasecheck_model::io::MAX_DATA_BYTES`].
fn read_data(path: &Path) -> Result<String, String> {
    phasecheck_model::io::read_text(path, phasecheck_model::io::MAX_DATA_BYTES, &path.display().to_string())
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
                let show = |o: Option<&phasecheck_model::rt::Obs>| match o {
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
    crate::limits::start(&a.search, false);
    crate::limits::loaded(Some(&a.trace.display().to_string()));
    let text = match read_data(&a.trace) {
        Ok(t) => t,
        Err(e) => return fail2(e),
    };
    let t = match TraceFile::from_json(&text) {
        Ok(t) => t,
        Err(e) => return fail2(format!("{}: {e}", a.trace.display())),
    };
    let spec_path = match locate(&a.trace, &t, a.spec.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail2(e),
    };
    let source = match phasecheck_model::spec::read_source(&spec_path, &spec_path.display().to_string()) {
        Ok(s) => s,
        Err(e) => {
            note!("{e}");
            return ExitCode::from(2);
        }
    };
    // `--param` asks for other values than the recorded ones: that is an edit too.
    if tracefile::source_hash(&source) != t.spec.hash || !a.search.params.is_empty() {
        return run_edited(&a, &t, &spec_path, &source);
    }
    let params: Vec<(String, i64)> = t.params.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let spec = match load::load(&spec_path, &params) {
        Ok(s) => s,
        Err(e) => {
            note!("{e}");
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
        noteln!(
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
    say!("{}", render::swimlanes(&shown, Some(&source)));
    sayln!(
        "\nreplay: reproduced {} in {} step(s); every recorded observation matched",
        kind,
        t.steps.len()
    );
    if let Some(out) = &a.html {
        let cause = cause_of(&model, &source, kind, &t.violation.message, &actions);
        let page = render::html_with(
            &[(shown, Some(source))],
            &format!("phasecheck counterexample: {} {}", t.spec.name, kind),
            &[html_extras(&model, cause.as_ref())],
        );
        if let Err(e) = phasecheck_model::io::write_atomic(out, page.as_bytes()) {
            return fail2(format!("cannot write {}: {e}", out.display()));
        }
    }
    ExitCode::from(1)
}

/// Bounds of the exploration that decides whether a stopped schedule can still reach its
/// violation: generous for the specs of a design review, finite so that `check --against` over a
/// folder of traces cannot run away.
/// The fix loop's search: `check`'s options, with its own default bounds (a fix loop is asked
/// a yes/no question and must answer it in bounded time, also with no bound given).
fn fix_options(a: &crate::SearchArgs) -> CheckOptions {
    let mut o = crate::options(a);
    o.max_states = Some(a.max_states.unwrap_or(2_000_000));
    o.max_seconds = Some(a.max_seconds.unwrap_or(120.0));
    o.progress = None;
    o
}

/// The fix loop for one trace and a loaded (edited) spec. The exit code: 0 gone, 1 same, 3
/// undecided.
fn fix_exit(r: &FixReport) -> u8 {
    match r.verdict {
        FixVerdict::Gone => 0,
        FixVerdict::Same { .. } | FixVerdict::Elsewhere { .. } => 1,
        FixVerdict::Undecided => 3,
    }
}

/// Notes on what the edited spec no longer shares with the trace: another protocol name,
/// recorded parameters it does not declare.
fn edit_notes(t: &TraceFile, spec: &Spec) -> Vec<String> {
    let mut notes = Vec::new();
    if spec.proto.name != t.spec.name {
        notes.push(format!(
            "the trace is of protocol {}; the edited spec is protocol {}",
            t.spec.name, spec.proto.name
        ));
    }
    let differ: Vec<String> = spec
        .proto
        .params
        .iter()
        .filter_map(|(n, v)| match t.params.get(n) {
            Some(r) if r != v => Some(format!("{n}={v} (recorded {r})")),
            _ => None,
        })
        .collect();
    if !differ.is_empty() {
        notes.push(format!(
            "replayed at the edited spec's own values {}, the ones `check` on it explores",
            differ.join(" ")
        ));
    }
    let lacks: Vec<&str> = t
        .params
        .keys()
        .filter(|k| !spec.proto.params.iter().any(|(n, _)| n == *k))
        .map(|k| k.as_str())
        .collect();
    if !lacks.is_empty() {
        notes.push(format!("the edited spec declares no {} (recorded in the trace)", lacks.join(", ")));
    }
    notes
}

/// `replay TRACE --spec EDITED` when EDITED is not the text the trace was recorded against.
///
/// The edit is replayed at its own parameter values, the ones `check EDITED` explores: "gone" is a
/// claim about the protocol as it now stands, so it must never hide a violation that `check`
/// on the same file finds (the recorded values only say where the trace came from).
fn run_edited(a: &ReplayArgs, t: &TraceFile, spec_path: &Path, source: &str) -> ExitCode {
    let spec = match load::load(spec_path, &a.search.params) {
        Ok(s) => s,
        Err(e) => {
            note!("{e}");
            return ExitCode::from(2);
        }
    };
    sayln!(
        "{} is not the text {} was recorded against ({} in the trace, {} now):\nreplaying the recorded schedule ({} of {}) against it as an edited spec",
        spec_path.display(),
        a.trace.display(),
        t.spec.hash,
        tracefile::source_hash(source),
        t.violation.kind,
        t.spec.name
    );
    for n in edit_notes(t, &spec) {
        sayln!("note: {n}");
    }
    let model = Model::new(spec.proto.clone());
    let r = replay_edited(&model, t, &fix_options(&a.search));
    sayln!("{}", r.describe(t.steps.len()));
    if let (Some(out), FixVerdict::Same { trace, .. } | FixVerdict::Elsewhere { trace, .. }) = (&a.html, &r.verdict) {
        match tracefile::build(&model, source, &path_string(spec_path), r.kind, trace) {
            Ok(tf) => {
                let cause = cause_of(&model, source, r.kind, &tf.violation.message, trace);
                let page = render::html_with(
                    &[(tf, Some(source.to_string()))],
                    &format!("phasecheck counterexample: {} {} (edited spec)", spec.proto.name, r.kind),
                    &[html_extras(&model, cause.as_ref())],
                );
                if let Err(e) = phasecheck_model::io::write_atomic(out, page.as_bytes()) {
                    return fail2(format!("cannot write {}: {e}", out.display()));
                }
            }
            Err(e) => return fail2(format!("cannot render the edited spec's trace: {e}")),
        }
    }
    ExitCode::from(fix_exit(&r))
}

/// The trace files `dir` names: the file itself, or every `*.json` directly inside the folder.
fn trace_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    if dir.is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    Ok(v)
}

/// `check SPEC... --against TRACE_DIR`: every stored counterexample of each spec's protocol
/// (matched by protocol name), replayed against the spec as it is now. Exit 1 when any trace
/// still reaches its violation, 3 when one could not be decided, 2 when no trace matches.
pub fn check_against(specs: &[Spec], dir: &Path, search: &crate::SearchArgs) -> ExitCode {
    let files = match trace_files(dir) {
        Ok(f) => f,
        Err(e) => return fail2(e),
    };
    let mut traces = Vec::new();
    for f in files {
        let text = match read_data(&f) {
            Ok(t) => t,
            Err(e) => return fail2(e),
        };
        match TraceFile::from_json(&text) {
            Ok(t) => traces.push((f, t)),
            Err(e) => return fail2(format!("{}: {e}", f.display())),
        }
    }
    let (mut worst, mut matched) = (0u8, 0usize);
    for spec in specs {
        let mine: Vec<&(PathBuf, TraceFile)> = traces.iter().filter(|(_, t)| t.spec.name == spec.proto.name).collect();
        sayln!(
            "== {} ({}): {} stored counterexample(s) in {}",
            spec.proto.name,
            spec.display,
            mine.len(),
            dir.display()
        );
        // At the values this `check` runs the spec with (declared, or `--param`), as above.
        let model = Model::new(spec.proto.clone());
        for (f, t) in mine {
            matched += 1;
            let this = spec;
            let r = replay_edited(&model, t, &fix_options(search));
            let text = r.describe(t.steps.len());
            let mut lines = text.lines();
            sayln!("{}: {}", f.display(), lines.next().unwrap_or(""));
            for l in lines.chain(edit_notes(t, &this).iter().map(|n| n.as_str())) {
                sayln!("  {}", l.trim_start());
            }
            worst = match (worst, fix_exit(&r)) {
                (1, _) | (_, 1) => 1,
                (3, _) | (_, 3) => 3,
                _ => 0,
            };
        }
    }
    if matched == 0 {
        return fail2(format!(
            "no trace in {} is of protocol {}; nothing to re-check",
            dir.display(),
            specs.iter().map(|s| s.proto.name.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    ExitCode::from(worst)
}
