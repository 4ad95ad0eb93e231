//! Pictures of a counterexample: text swimlanes for the terminal and a self-contained HTML page
//! with an SVG timeline. Both draw from the trace file alone (plus the spec's text, when at hand,
//! for the source excerpt), so `check` and `replay` show the same thing.

use crate::tracefile::{actor, changes_text, RaisedBy, SpanRec, StepRec, TraceFile};
use phasecheck_model::rt::{Action, Obs};
use phasecheck_model::ViolationKind;
use std::fmt::Write as _;

pub use super::html::{cited_source, html, html_with, Extras};

const MAX_CELL: usize = 34;

/// Lanes of a CTA this small show every thread, even those that never step.
const ALL_THREADS_UP_TO: usize = 12;

/// The lanes of a trace: threads by global index (all of them in a small CTA, else those that
/// act or are blocked), then `copies` if a copy lands.
pub(super) fn lanes(t: &TraceFile) -> (Vec<String>, bool) {
    let mut threads: Vec<(u32, String)> = Vec::new();
    let mut add = |g: u32, l: String| {
        if !threads.iter().any(|(x, _)| *x == g) {
            threads.push((g, l));
        }
    };
    if t.threads.len() <= ALL_THREADS_UP_TO {
        for th in &t.threads {
            add(th.gtid, format!("{}#{}", th.role, th.tid));
        }
    }
    for s in &t.steps {
        if let Some(th) = &s.thread {
            add(th.gtid, format!("{}#{}", th.role, th.tid));
        }
    }
    for st in &t.violation.stuck {
        add(st.thread.gtid, format!("{}#{}", st.thread.role, st.thread.tid));
    }
    threads.sort_by_key(|(g, _)| *g);
    let copies = t.steps.iter().any(|s| s.copy.is_some());
    (threads.into_iter().map(|(_, l)| l).collect(), copies)
}

/// The HTML timeline's lanes: `lanes`, with each run of threads that never step (and are not
/// blocked at the end) folded into one lane named `idle: ...`, so that the threads that matter
/// stay on screen in a wide CTA.
pub(super) fn fold_idle(t: &TraceFile, names: Vec<String>) -> Vec<String> {
    let active = |n: &str| {
        t.steps.iter().any(|s| s.thread.is_some() && actor(s) == n)
            || t.violation
                .stuck
                .iter()
                .any(|st| format!("{}#{}", st.thread.role, st.thread.tid) == n)
    };
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<String> = Vec::new();
    let flush = |run: &mut Vec<String>, out: &mut Vec<String>| {
        match run.len() {
            0 => {}
            1..=3 => out.push(format!("idle: {}", run.join(", "))),
            n => out.push(format!("idle: {} … {} ({n})", run[0], run[n - 1])),
        }
        run.clear();
    };
    for n in names {
        if active(&n) {
            flush(&mut run, &mut out);
            out.push(n);
        } else {
            run.push(n);
        }
    }
    flush(&mut run, &mut out);
    out
}

fn lane_of(s: &StepRec, names: &[String]) -> usize {
    match &s.thread {
        Some(_) => names.iter().position(|n| *n == actor(s)).unwrap_or(0),
        None => names.len(),
    }
}

/// Short form of what a step observed, for the cell under its statement.
pub(super) fn obs_short(t: &TraceFile, o: &Obs) -> Option<String> {
    let buf = |b: &u16| t.buffers.get(*b as usize).cloned().unwrap_or_default();
    Some(match o {
        Obs::Arrived { phase, count, .. } if *count == 1 => format!("token {phase}"),
        Obs::Arrived { phase, count, .. } => format!("x{count} token {phase}"),
        Obs::Waited { phase, .. } => format!("phase {phase} done"),
        Obs::TryWait { phase, result, .. } => format!("try phase {phase}: {}", *result as i32),
        Obs::Read { buf: d, version } => format!("read {} v{version}", buf(d)),
        Obs::Wrote { buf: d, version } => format!("wrote {} v{version}", buf(d)),
        Obs::CopyIssued { buf: d, version, .. } => format!("issue {} v{version}", buf(d)),
        Obs::Landed { buf: d, version, .. } => format!("{} v{version} lands", buf(d)),
        Obs::LandedPart { buf: d, bytes, .. } => format!("{bytes} B of {} land", buf(d)),
        Obs::PhaseCompleted { .. } => return None,
        Obs::CommitJoined { .. } => "joined".into(),
        Obs::Released { what } => format!("{what} released"),
        Obs::Exited { .. } => "exits".into(),
        Obs::Elected { .. } => "elected".into(),
        Obs::NamedArrived { id, arrived, count, .. } => format!("bar {id}: {arrived}/{count}"),
        Obs::NamedCompleted { id } => format!("bar {id} done"),
        Obs::CpAsyncPending { delta, .. } => format!("pending {delta:+}"),
        // The async proxy: TMA stores and wgmma read shared memory asynchronously.
        Obs::AsyncReadIssued { buf: d, .. } => format!("async read {}", buf(d)),
        Obs::AsyncReadDone { buf: d, .. } => format!("{} read done", buf(d)),
    })
}

fn clip(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else {
        let mut o: String = s.chars().take(w.saturating_sub(1)).collect();
        o.push('~');
        o
    }
}

fn pad(s: &str, w: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

fn source_line(source: Option<&str>, sp: &SpanRec, fallback: &str) -> (String, usize, usize) {
    // (line text, caret start column 0-based in chars, caret width)
    if let Some(src) = source {
        if let Some(line) = src.lines().nth(sp.line.saturating_sub(1)) {
            let col0 = sp.col.saturating_sub(1);
            let stmt = src.get(sp.start as usize..sp.end as usize).unwrap_or("");
            let width = stmt.lines().next().unwrap_or("").trim_end().chars().count().max(1);
            let width = width.min(line.chars().count().saturating_sub(col0).max(1));
            return (line.trim_end().to_string(), col0, width);
        }
    }
    (fallback.to_string(), 0, fallback.chars().count().max(1))
}

fn snippet(out: &mut String, t: &TraceFile, source: Option<&str>, sp: &SpanRec, stmt: &str, label: &str) {
    let (line, col0, width) = source_line(source, sp, stmt);
    let g = sp.line.to_string().len();
    let _ = writeln!(out, "{:g$}--> {}:{}:{}", "", t.spec.path, sp.line, sp.col);
    let _ = writeln!(out, "{:g$} |", "");
    let _ = writeln!(out, "{} | {}", sp.line, line);
    let _ = writeln!(out, "{:g$} | {}{} {}", "", " ".repeat(col0), "^".repeat(width), label);
}

/// The text swimlanes: one column per thread (plus copy landings), barrier changes in the right
/// margin, the violating step marked `>`, then the violation with its source line.
pub fn swimlanes(t: &TraceFile, source: Option<&str>) -> String {
    let mut out = String::new();
    let v = &t.violation;
    let _ = writeln!(
        out,
        "{}: {} [{}] in {} step(s) ({})",
        t.spec.name,
        v.kind,
        v.code,
        t.steps.len(),
        t.spec.path
    );
    if !t.params.is_empty() {
        let _ = writeln!(
            out,
            "params: {}",
            t.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
        );
    }
    let _ = writeln!(out);
    let (names, copies) = lanes(t);
    let ncols = names.len() + copies as usize;
    // Cell contents: (row, col) -> lines.
    let mut cells: Vec<Vec<Vec<String>>> = Vec::new();
    for s in &t.steps {
        let mut row = vec![Vec::new(); ncols];
        let lane = lane_of(s, &names);
        let mut lines = vec![match &s.copy {
            Some(c) if matches!(s.action, Action::LandPart(_)) => format!("part of {} v{} lands", c.buffer, c.version),
            Some(c) => format!("{} v{} lands", c.buffer, c.version),
            None => s.statement.clone(),
        }];
        let obs: Vec<String> = s
            .observed
            .iter()
            .filter(|o| !matches!(o, Obs::Landed { .. } | Obs::LandedPart { .. }))
            .filter_map(|o| obs_short(t, o))
            .collect();
        if !obs.is_empty() {
            lines.push(format!("= {}", obs.join(", ")));
        }
        if lane < ncols {
            row[lane] = lines;
        }
        cells.push(row);
    }
    let mut headers: Vec<String> = names.clone();
    if copies {
        headers.push("copies".into());
    }
    let widths: Vec<usize> = (0..ncols)
        .map(|c| {
            let content = cells.iter().flat_map(|r| r[c].iter()).map(|l| l.chars().count()).max().unwrap_or(0);
            content.min(MAX_CELL).max(headers[c].chars().count())
        })
        .collect();
    let mut head = format!("  {:>4} ", "step");
    let mut rule = format!("  {} ", "-".repeat(4));
    for (c, h) in headers.iter().enumerate() {
        head.push_str(&format!("| {} ", pad(h, widths[c])));
        rule.push_str(&format!("+-{}-", "-".repeat(widths[c])));
    }
    head.push_str("| barriers");
    rule.push_str(&format!("+-{}", "-".repeat(8)));
    let _ = writeln!(out, "{}", head.trim_end());
    let _ = writeln!(out, "{}", rule.trim_end());
    let marked = t.violating_step();
    for (i, s) in t.steps.iter().enumerate() {
        let row = &cells[i];
        let height = row.iter().map(|c| c.len()).max().unwrap_or(1).max(1);
        let mut margin: Vec<String> = s.changes.iter().map(changes_text).collect();
        // Each other kind the step raises once, with how often (32 lanes of a warp arriving
        // early raise one missing wait each).
        let mut others: Vec<(ViolationKind, usize)> = Vec::new();
        for k in s.raised.iter().filter(|k| !(marked == Some(i + 1) && **k == v.kind)) {
            match others.iter_mut().find(|(x, _)| x == k) {
                Some((_, n)) => *n += 1,
                None => others.push((*k, 1)),
            }
        }
        margin.extend(others.into_iter().map(|(k, n)| match n {
            1 => format!("! also {k}"),
            n => format!("! also {k} ×{n}"),
        }));
        let height = height.max(margin.len().min(1));
        for l in 0..height {
            let mark = if l == 0 && marked == Some(i + 1) { ">" } else { " " };
            let num = if l == 0 { (i + 1).to_string() } else { String::new() };
            let mut line = format!("{mark} {num:>4} ");
            for c in 0..ncols {
                let text = row[c].get(l).map(|x| clip(x, widths[c])).unwrap_or_default();
                line.push_str(&format!("| {} ", pad(&text, widths[c])));
            }
            line.push('|');
            if l == 0 && !margin.is_empty() {
                line.push(' ');
                line.push_str(&margin.join("; "));
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    if v.raised_by == RaisedBy::State {
        let _ = writeln!(out, "! {:>4}  (the state after step {}: {})", "", t.steps.len(), v.kind);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "error[{}] {}: {}", v.code, v.kind, v.message);
    match v.raised_by {
        RaisedBy::InitialState => {
            let _ = writeln!(out, "  (in the initial state, before any thread runs)");
        }
        RaisedBy::Step => {
            if let Some(s) = t.steps.last() {
                let label = format!("step {}, {}", s.step, actor(s));
                snippet(&mut out, t, source, &s.span, &s.statement, &label);
            }
        }
        RaisedBy::State => {
            for st in &v.stuck {
                let label = format!("{}#{} is blocked here", st.thread.role, st.thread.tid);
                snippet(&mut out, t, source, &st.span, &st.statement, &label);
            }
        }
    }
    out
}

// ---- HTML ----------------------------------------------------------------------------------

pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}
