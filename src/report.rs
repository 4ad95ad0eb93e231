//! Text and JSON renderings of a check: header (what ran), violations with traces, stats.

use crate::load::Spec;
use phasecheck_model::lang::diag::line_col;
use phasecheck_model::rt::footprint::PorOff;
use phasecheck_model::rt::Model;
use phasecheck_model::ViolationKind;
use phasecheck_verifier::cause::{root_causes, Cause};
use phasecheck_verifier::trace::{describe_obs, replay, TraceStep};
use phasecheck_verifier::tracefile;
use phasecheck_verifier::{Report, Verdict};
use serde_json::{json, Value};
use std::fmt::Write as _;

pub fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Holds => "holds",
        Verdict::Violated => "violated",
        Verdict::Incomplete => "incomplete",
        Verdict::InternalError => "internal-error",
    }
}

fn params_line(spec: &Spec) -> String {
    if spec.proto.params.is_empty() {
        "(none)".into()
    } else {
        spec.proto
            .params
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The source line of a span, trimmed, and its 1-based line number.
fn source_at(spec: &Spec, span: phasecheck_model::lang::ast::Span) -> (usize, usize, String) {
    let (line, col) = line_col(&spec.source, span.start as usize);
    let text = spec.source.lines().nth(line - 1).unwrap_or("").trim().to_string();
    (line, col, text)
}

fn actor(step: &TraceStep) -> String {
    match (&step.thread, &step.copy) {
        (Some(t), _) => format!("{}#{}", t.role, t.tid),
        (None, Some(c)) => format!("copy->{}", c.buffer),
        _ => "?".into(),
    }
}

fn changes_text(step: &TraceStep) -> String {
    step.changes.iter().map(tracefile::changes_text).collect::<Vec<_>>().join("; ")
}

pub fn render_text(spec: &Spec, model: &Model, report: &Report) -> String {
    let p = &spec.proto;
    let mut out = String::new();
    let _ = writeln!(out, "== {} ({})", p.name, spec.display);
    let _ = writeln!(out, "params:  {}", params_line(spec));
    let roles = p
        .roles
        .iter()
        .map(|r| {
            if r.uniform {
                // One agent per warp: say how many the search interleaves.
                let agents = r.count / p.warp_size;
                format!(
                    "{}[{} uniform: {agents} agent{}]",
                    r.name,
                    r.count,
                    if agents == 1 { "" } else { "s" }
                )
            } else {
                format!("{}[{}]", r.name, r.count)
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    let _ = writeln!(out, "threads: {roles} (warp_size {})", p.warp_size);
    let _ = writeln!(
        out,
        "checks:  {}",
        ViolationKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(" ")
    );
    let st = &report.stats;
    let _ = writeln!(
        out,
        "search:  breadth-first, exact state storage; reductions: {}",
        if st.reductions.is_empty() {
            "none".to_string()
        } else {
            st.reductions.join(", ")
        }
    );
    if let Some(off) = &st.por_off {
        let _ = writeln!(
            out,
            "         partial-order: off, turned off by {}",
            por_off_text(&spec.source, off)
        );
    }
    if st.reduced_states > 0 {
        let _ = writeln!(
            out,
            "         partial-order: {} states expanded by a persistent subset ({} enabled steps left out; --no-por expands all)",
            st.reduced_states, st.pruned_steps
        );
    }
    if st.past_violation_skipped > 0 {
        let _ = writeln!(
            out,
            "         {} states past a violation were set aside when their allowance ran out (without --past-violation-factor every one is explored)",
            st.past_violation_skipped
        );
    }
    let _ = writeln!(out);
    for v in &report.violations {
        let _ = writeln!(out, "violation[{}] {}: {}", v.kind.code(), v.kind, v.message);
        match replay(model, &v.actions) {
            Ok(r) => {
                if r.steps.is_empty() {
                    let _ = writeln!(out, "  in the initial state");
                } else {
                    let _ = writeln!(out, "  trace ({} steps):", r.steps.len());
                }
                let w = r.steps.iter().map(|s| actor(s).len()).max().unwrap_or(0);
                for (i, s) in r.steps.iter().enumerate() {
                    let (line, _, text) = source_at(spec, s.span);
                    let mark = if i + 1 == r.steps.len() && !s.violations.is_empty() {
                        ">"
                    } else {
                        " "
                    };
                    let what = if s.copy.is_some() { "(copy lands)".to_string() } else { text };
                    let _ = writeln!(out, "  {mark}{:>3}  {:<w$}  {:>4} | {}", i + 1, actor(s), line, what);
                    let mut notes: Vec<String> = s.obs.iter().map(|o| describe_obs(o, &model.proto)).collect();
                    let ch = changes_text(s);
                    if !ch.is_empty() {
                        notes.push(ch);
                    }
                    if !notes.is_empty() {
                        let _ = writeln!(out, "        {:<w$}       = {}", "", notes.join("; "));
                    }
                }
            }
            Err(e) => {
                let _ = writeln!(out, "  (trace could not be replayed at step {}: {})", e.step + 1, e.reason);
            }
        }
        let _ = writeln!(out);
    }
    if !report.violations.is_empty() {
        let (causes, _) = root_causes(model, &spec.source, &report.violations);
        out.push_str(&causes_text(&causes, &spec.source));
        let _ = writeln!(out);
    }
    let verdict = match report.verdict {
        Verdict::Holds => "holds".to_string(),
        Verdict::Violated => format!(
            "violated ({})",
            report.violations.iter().map(|v| v.kind.name()).collect::<Vec<_>>().join(", ")
        ),
        Verdict::Incomplete => format!("incomplete (bound {} reached)", report.bound.map(|b| b.describe()).unwrap_or("?")),
        Verdict::InternalError => report.internal.as_ref().map(|i| i.describe()).unwrap_or_default(),
    };
    let _ = writeln!(out, "verdict: {verdict}");
    if report.verdict == Verdict::Violated {
        if let Some(b) = report.bound {
            let _ = writeln!(
                out,
                "         (search stopped early at {}: other kinds may be reachable)",
                b.describe()
            );
        }
    }
    let s = &report.stats;
    let _ = writeln!(
        out,
        "stats:   {} states, {} transitions, depth {}, {:.0} B/state, {:.2} s",
        s.states, s.transitions, s.depth, s.bytes_per_state, s.seconds
    );
    out
}

fn step_json(spec: &Spec, model: &Model, i: usize, s: &TraceStep) -> Value {
    let (line, col, text) = source_at(spec, s.span);
    json!({
        "step": i + 1,
        "thread": s.thread,
        "copy": s.copy,
        "line": line,
        "col": col,
        "source": if s.copy.is_some() { Value::Null } else { Value::String(text) },
        "observed": s.obs.iter().map(|o| describe_obs(o, &model.proto)).collect::<Vec<_>>(),
        "changes": s.changes,
        "violations": s.violations.iter().map(|v| json!({"kind": v.kind.name(), "message": v.message})).collect::<Vec<_>>(),
    })
}

/// The root causes of a violated check, numbered, each with its barrier facts and the kinds it
/// explains ("root cause:" alone when there is one).
pub fn causes_text(causes: &[Cause], source: &str) -> String {
    let mut out = String::new();
    for c in causes {
        let head = if causes.len() == 1 {
            "root cause: ".to_string()
        } else {
            format!("root cause {}/{}: ", c.id, causes.len())
        };
        let _ = writeln!(out, "{head}{}", c.summary);
        // an imported spec cites the kernel's line on the statement
        if let Some(cited) = phasecheck_verifier::trace::render::cited_source(Some(source), c.line) {
            let _ = writeln!(out, "  from: {cited}");
        }
        let facts = c.facts();
        if !facts.is_empty() {
            let _ = writeln!(out, "  {facts}");
        }
        let _ = writeln!(
            out,
            "  explains: {}",
            c.violations.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
        );
    }
    out
}

pub fn cause_json(c: &Cause) -> Value {
    json!({
        "id": c.id,
        "rule": c.rule,
        "summary": c.summary,
        "barrier": c.barrier,
        "phase": c.phase,
        "init_count": c.init_count,
        "arrived": c.arrived,
        "mismatch": c.mismatch,
        "step": c.step,
        "line": c.line,
        "statement": c.statement,
        "explains": c.violations.iter().map(|k| k.name()).collect::<Vec<_>>(),
    })
}

/// The construct that turned the partial-order reduction off, with its line where a statement is
/// to blame.
fn por_off_text(source: &str, off: &PorOff) -> String {
    match por_off_line(source, off) {
        Some(line) => {
            // The statement as written (a lowered one, `cluster_sync` say, has another name).
            let text = off
                .span
                .and_then(|sp| source.get(sp.start as usize..sp.end as usize))
                .and_then(|t| t.lines().next())
                .map(|t| {
                    // A long statement is cut, and says so.
                    let t = t.trim();
                    if t.chars().count() > 60 {
                        format!("{} ...", t.chars().take(56).collect::<String>().trim_end())
                    } else {
                        t.to_string()
                    }
                })
                .unwrap_or_default();
            format!("{} at line {line}: {text}", off.construct)
        }
        None => off.construct.clone(),
    }
}

fn por_off_line(source: &str, off: &PorOff) -> Option<usize> {
    off.span.map(|sp| line_col(source, sp.start as usize).0)
}

fn por_off_json(source: &str, off: &PorOff) -> Value {
    json!({"construct": off.construct, "line": por_off_line(source, off)})
}

pub fn render_json(spec: &Spec, model: &Model, report: &Report) -> Value {
    let (causes, of) = root_causes(model, &spec.source, &report.violations);
    let violations: Vec<Value> = report
        .violations
        .iter()
        .zip(&of)
        .map(|(v, &c)| {
            let trace: Vec<Value> = match replay(model, &v.actions) {
                Ok(r) => r.steps.iter().enumerate().map(|(i, s)| step_json(spec, model, i, s)).collect(),
                Err(_) => Vec::new(),
            };
            json!({"kind": v.kind.name(), "code": v.kind.code(), "message": v.message, "cause": cause_json(&causes[c]), "trace": trace})
        })
        .collect();
    let params: serde_json::Map<String, Value> = spec.proto.params.iter().map(|(n, v)| (n.clone(), json!(v))).collect();
    let s = &report.stats;
    json!({
        "file": spec.display,
        "protocol": spec.proto.name,
        "params": params,
        "verdict": verdict_name(report.verdict),
        "bound": report.bound.map(|b| b.describe()),
        "violations": violations,
        "causes": causes.iter().map(cause_json).collect::<Vec<_>>(),
        "internal": report.internal.as_ref().map(|i| json!({"rule": i.rule, "message": i.message, "steps": i.actions.len()})),
        "stats": {
            "states": s.states,
            "transitions": s.transitions,
            "matched": s.matched,
            "depth": s.depth,
            "seconds": s.seconds,
            "bytes_per_state": s.bytes_per_state,
            "peak_memory_bytes": s.peak_memory_bytes,
            "reductions": s.reductions,
            "past_violation_skipped": s.past_violation_skipped,
            "reduced_states": s.reduced_states,
            "pruned_steps": s.pruned_steps,
            "partial_order_off": s.por_off.as_ref().map(|o| por_off_json(&spec.source, o)),
        },
    })
}
