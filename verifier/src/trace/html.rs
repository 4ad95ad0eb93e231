//! The HTML page of counterexamples: one self-contained file (inline CSS and JS, no network)
//! with, per trace, the root cause, an SVG timeline that opens at the violation, and the step
//! table. It draws from the trace file alone, as the text swimlanes do.

use super::render::{esc, fold_idle, lanes, obs_short, swimlanes};
use super::tracefile::{actor, changes_text, obs_text, RaisedBy, StepRec, TraceFile};
use phasecheck_model::rt::{Action, Obs};
use std::fmt::Write as _;

const CSS: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:20px;margin:0 0 8px} h2{font-size:17px;margin:28px 0 4px}
.meta{color:#556;font-size:13px;margin-bottom:8px}
.msg{background:#fff1f0;border-left:4px solid #d9363e;padding:8px 12px;font-size:14px;margin:8px 0 12px}
.msg code{font-size:13px}
svg{background:#fff;border:1px solid #d8dde6;border-radius:6px}
svg text{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px}
.lane-label{font-weight:600;fill:#1d2330}
.band-label{fill:#334;font-size:11px}
.mark{cursor:pointer} .mark:hover{stroke:#000;stroke-width:2.5}
table{border-collapse:collapse;font-size:13px;margin-top:12px;background:#fff}
td,th{border:1px solid #d8dde6;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f6} td.mono{font-family:ui-monospace,"DejaVu Sans Mono",monospace}
tr.viol td{background:#ffe3e1} tr.hl td{background:#fff7c2}
.timeline-box{display:flex;align-items:flex-start;max-width:100%}
.labels{flex:none;border-right:none;border-radius:6px 0 0 6px;position:sticky;left:0}
.scroll{overflow-x:auto;flex:1 1 auto;min-width:0}
.scroll svg{border-radius:0 6px 6px 0}
.legend{font-size:12px;color:#445;margin:6px 0}
.legend span{margin-right:14px}
.cause{background:#eef5ff;border-left:4px solid #2f6fdf;padding:8px 12px;font-size:14px;margin:8px 0}
.jump{display:inline-block;font-size:13px;margin:4px 0 6px;padding:3px 10px;border:1px solid #d9363e;border-radius:4px;color:#d9363e;text-decoration:none}
.index{font-size:13px;margin:6px 0} .index a{margin-left:10px}
.row.idle .lane-label{fill:#8a93a3;font-weight:400;font-style:italic}
#tip{position:fixed;display:none;background:#1d2330;color:#fff;font-size:12px;padding:6px 8px;border-radius:4px;pointer-events:none;max-width:520px;white-space:pre-wrap;font-family:ui-monospace,monospace}
"#;

const JS: &str = r#"
(function(){
  var tip=document.getElementById('tip');
  document.querySelectorAll('.mark').forEach(function(m){
    m.addEventListener('mouseenter',function(e){
      var d=m.getAttribute('data-tip');tip.textContent=d;tip.style.display='block';
      var row=document.getElementById(m.getAttribute('data-row'));if(row)row.classList.add('hl');
    });
    m.addEventListener('mousemove',function(e){tip.style.left=(e.clientX+14)+'px';tip.style.top=(e.clientY+14)+'px';});
    m.addEventListener('mouseleave',function(){
      tip.style.display='none';
      var row=document.getElementById(m.getAttribute('data-row'));if(row)row.classList.remove('hl');
    });
  });
  // Open each timeline at its violation (a long trace puts it far off to the right), and let
  // the jump link do the same after the reader has scrolled away.
  // The page as a whole opens at the first timeline's violation: scrolled down only as far as
  // it takes to bring the mark into the window, so that the cause above it stays when it fits.
  function reveal(idx,page){
    var box=document.getElementById('scroll-'+idx);if(!box)return;
    var step=box.getAttribute('data-violation');
    var svg=document.getElementById('timeline-'+idx);
    var mark=svg&&(svg.querySelector('.mark[data-step="'+step+'"]')||svg.querySelector('.mark.stuck'));
    if(!mark)return;
    var r=mark.getBoundingClientRect(),b=box.getBoundingClientRect();
    box.scrollLeft+=r.left-b.left-box.clientWidth/2;
    if(page){
      r=mark.getBoundingClientRect();
      var h=window.innerHeight;
      if(r.bottom>h-24||r.top<0)window.scrollBy(0,r.top-Math.max(h/2,h-r.height-48));
    }
    box.setAttribute('data-jumped','1');
  }
  document.querySelectorAll('.scroll[data-violation]').forEach(function(b,k){reveal(b.id.slice(7),k==0);});
  document.querySelectorAll('a.jump').forEach(function(a){
    a.addEventListener('click',function(e){e.preventDefault();reveal(a.getAttribute('data-idx'),true);});
  });
  document.body.setAttribute('data-ready', String(document.querySelectorAll('svg.timeline').length));
})();
"#;

/// The kernel source an imported spec cites for the statement on its line `line` (1-based):
/// what follows `// from ` there (`tma_ring.cu:33 (inlined from mbarrier.cuh:22)`), as
/// `phasecheck import` writes it on every statement. `None` for a spec written by hand.
pub fn cited_source(source: Option<&str>, line: usize) -> Option<String> {
    let l = source?.lines().nth(line.checked_sub(1)?)?;
    let (_, cited) = l.split_once("// from ")?;
    let cited = cited.trim();
    (!cited.is_empty()).then(|| cited.to_string())
}

fn step_tip(t: &TraceFile, s: &StepRec, source: Option<&str>) -> String {
    let mut lines = vec![format!("step {} · {}", s.step, actor(s))];
    lines.push(format!("line {}: {}", s.span.line, s.statement));
    if let Some(c) = cited_source(source, s.span.line) {
        lines.push(format!("from {c}"));
    }
    for o in &s.observed {
        lines.push(format!("observed: {}", obs_text(t, o)));
    }
    for c in &s.changes {
        lines.push(changes_text(c));
    }
    for k in &s.raised {
        lines.push(format!("raises {k}"));
    }
    lines.join("\n")
}

fn mark_color(o: Option<&Obs>) -> &'static str {
    match o {
        Some(Obs::Arrived { .. }) | Some(Obs::CommitJoined { .. }) => "#2f6fdf",
        Some(Obs::Waited { .. }) | Some(Obs::TryWait { .. }) => "#1f9d55",
        Some(Obs::CopyIssued { .. }) | Some(Obs::Landed { .. }) | Some(Obs::LandedPart { .. }) => "#c26a00",
        Some(Obs::Read { .. }) | Some(Obs::Wrote { .. }) => "#7a4fd0",
        _ => "#7b8494",
    }
}

/// Runs of at least this many consecutive lanes that do the same thing share one lane.
const SAME_RUN: usize = 3;

/// Monospace advance of the 12 px label font and the 10 px mark font (DejaVu Sans Mono is 0.60
/// em; a little more so that a wider fallback font still fits).
const LABEL_CHAR: f64 = 7.6;
const MARK_CHAR: f64 = 6.4;

/// One row of the timeline: its label and the threads (`role#tid`) whose steps it shows.
struct Lane {
    label: String,
    members: Vec<String>,
}

/// The HTML lanes: `fold_idle`'s, with each run of `SAME_RUN` or more threads of one role that
/// execute the same statements in the same order (and stop at the same one) folded into one
/// lane `role#a … role#b (×n)`: a warp whose 32 lanes each arrive is one row, not 32, so the
/// rows that differ stay on screen.
fn lanes_of(t: &TraceFile) -> Vec<Lane> {
    let (names, copies) = lanes(t);
    let names = fold_idle(t, names);
    let signature = |n: &str| -> Vec<(usize, String)> {
        let mut v: Vec<(usize, String)> = t
            .steps
            .iter()
            .filter(|s| s.thread.is_some() && actor(s) == n)
            .map(|s| (s.span.line, s.statement.clone()))
            .collect();
        for st in t
            .violation
            .stuck
            .iter()
            .filter(|st| format!("{}#{}", st.thread.role, st.thread.tid) == n)
        {
            v.push((st.span.line, format!("stuck: {}", st.statement)));
        }
        v
    };
    let role = |n: &str| n.split('#').next().unwrap_or(n).to_string();
    let mut out: Vec<Lane> = Vec::new();
    let mut run: Vec<String> = Vec::new();
    let flush = |run: &mut Vec<String>, out: &mut Vec<Lane>| {
        if run.len() >= SAME_RUN {
            out.push(Lane {
                label: format!("{} … {} (×{})", run[0], run[run.len() - 1], run.len()),
                members: std::mem::take(run),
            });
        } else {
            for n in run.drain(..) {
                out.push(Lane {
                    label: n.clone(),
                    members: vec![n],
                });
            }
        }
    };
    let mut last: Option<(String, Vec<(usize, String)>)> = None;
    for n in names {
        if n.starts_with("idle: ") {
            flush(&mut run, &mut out);
            last = None;
            out.push(Lane {
                label: n,
                members: Vec::new(),
            });
            continue;
        }
        let key = (role(&n), signature(&n));
        if last.as_ref() != Some(&key) {
            flush(&mut run, &mut out);
            last = Some(key);
        }
        run.push(n);
    }
    flush(&mut run, &mut out);
    if copies {
        out.push(Lane {
            label: "copies".into(),
            members: Vec::new(),
        });
    }
    out
}

/// The lane a step is drawn in: its thread's, or the copies' lane (the last) for a landing.
fn lane_index(s: &StepRec, lanes: &[Lane]) -> usize {
    match &s.thread {
        Some(_) => {
            let who = actor(s);
            lanes.iter().position(|l| l.members.contains(&who)).unwrap_or(0)
        }
        None => lanes.len() - 1,
    }
}

/// The words under a step's mark, whole (the step's tooltip holds the rest).
fn mark_label(t: &TraceFile, s: &StepRec) -> String {
    let first = s.observed.iter().find(|o| !matches!(o, Obs::PhaseCompleted { .. }));
    match (&s.copy, first) {
        (Some(c), _) => format!("{} lands", c.buffer),
        (None, Some(o)) => obs_short(t, o).unwrap_or_default(),
        (None, None) => s.statement.split('(').next().unwrap_or("").trim().to_string(),
    }
}

/// One trace as a timeline: a column of row labels (lanes, then barrier bands) that stays put,
/// and beside it the steps, which scroll sideways. The label column is as wide as its longest
/// label and a step as wide as its words need, so that nothing is cut.
fn section(out: &mut String, idx: usize, t: &TraceFile, at_step: usize, source: Option<&str>) {
    let v = &t.violation;
    let lanes = lanes_of(t);
    // Barriers whose state changes along the trace get a band each.
    let mut bars: Vec<String> = Vec::new();
    for s in &t.steps {
        for c in &s.changes {
            if !bars.contains(&c.barrier) {
                bars.push(c.barrier.clone());
            }
        }
    }
    let labels: Vec<String> = t.steps.iter().map(|s| mark_label(t, s)).collect();
    let n = t.steps.len().max(1);
    // Two labels of one lane at one height are two steps apart (they alternate above and below).
    let widest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64;
    let sw = (82.0f64).max((MARK_CHAR * widest + 10.0) / 2.0).ceil();
    let longest = lanes
        .iter()
        .map(|l| l.label.chars().count())
        .chain(bars.iter().map(|b| b.chars().count()))
        .max()
        .unwrap_or(0) as f64;
    let lw = (110.0f64).max(LABEL_CHAR * longest + 24.0).ceil();
    let (pad, top, lh, bh) = (16.0, 34.0, 50.0f64, 26.0f64);
    let extra = if v.raised_by == RaisedBy::State { 1 } else { 0 };
    let width = pad + sw * (n + extra) as f64 + sw.max(30.0);
    let lanes_h = lh * lanes.len() as f64;
    let height = top + lanes_h + 14.0 + bh * bars.len() as f64 + 20.0;
    let x_of = |k: usize| pad + sw * (k as f64 - 0.5); // k: 1-based step
    let fill = |i: usize| if i % 2 == 0 { "#f6f8fb" } else { "#ffffff" };
    let by = top + lanes_h + 14.0;
    // The label column.
    let _ = writeln!(
        out,
        r#"<div class="timeline-box"><svg id="labels-{idx}" class="labels" xmlns="http://www.w3.org/2000/svg" width="{lw:.0}" height="{height:.0}" viewBox="0 0 {lw:.0} {height:.0}">"#
    );
    for (i, l) in lanes.iter().enumerate() {
        let y = top + lh * i as f64;
        let cls = if l.label.starts_with("idle: ") { "row idle" } else { "row" };
        let title = if l.members.len() >= SAME_RUN {
            format!("<title>{}</title>", esc(&l.members.join(", ")))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            r#"<g class="{cls}"><rect x="0" y="{y:.1}" width="{lw:.0}" height="{lh:.1}" fill="{}"/><text class="lane-label" data-label="{}" x="10" y="{:.1}">{title}{}</text></g>"#,
            fill(i),
            esc(&l.label),
            y + lh / 2.0 + 4.0,
            esc(&l.label)
        );
    }
    for (bi, b) in bars.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<text class="band-label" data-label="{}" x="10" y="{:.1}">{}</text>"#,
            esc(b),
            by + bh * bi as f64 + bh / 2.0 + 4.0,
            esc(b)
        );
    }
    let _ = writeln!(out, "</svg>");
    let _ = write!(out, r#"<div class="scroll" id="scroll-{idx}" data-violation="{at_step}">"#);
    let _ = writeln!(
        out,
        r#"<svg id="timeline-{idx}" class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="timeline of {}">"#,
        esc(&t.spec.name)
    );
    // Lanes.
    for (i, l) in lanes.iter().enumerate() {
        let y = top + lh * i as f64 + lh / 2.0;
        let cls = if l.label.starts_with("idle: ") { "lane idle" } else { "lane" };
        let _ = writeln!(
            out,
            r##"<g class="{cls}" data-lane="{}"><rect x="0" y="{:.1}" width="{width:.0}" height="{lh:.1}" fill="{}"/><line x1="0" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#c9d0db" stroke-dasharray="4 3"/></g>"##,
            esc(&l.label),
            y - lh / 2.0,
            fill(i),
            width - 10.0
        );
    }
    // Step grid.
    for k in 1..=n + extra {
        let x = x_of(k);
        let label = if k <= t.steps.len() { k.to_string() } else { "end".into() };
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#eef0f4"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#667">{label}</text>"##,
            top - 6.0,
            height - 8.0,
            top - 14.0
        );
    }
    // Barrier phase bands.
    for (bi, b) in bars.iter().enumerate() {
        let y = by + bh * bi as f64;
        // Phase at each step boundary: segments [from, to) in step units.
        let mut phase: i64 = 0;
        let mut from = 0usize; // boundary index: 0 = before step 1
        let mut segs: Vec<(usize, usize, i64)> = Vec::new();
        for s in &t.steps {
            for c in s.changes.iter().filter(|c| &c.barrier == b) {
                for f in c.fields.iter().filter(|f| f.field == "phase") {
                    if let (Ok(bef), Ok(aft)) = (f.before.parse::<i64>(), f.after.parse::<i64>()) {
                        segs.push((from, s.step, bef));
                        phase = aft;
                        from = s.step;
                    }
                }
            }
        }
        segs.push((from, n + extra, phase));
        for (a, z, ph) in segs {
            let x0 = (pad + sw * a as f64 - sw / 2.0 + 2.0).max(2.0);
            let x1 = pad + sw * z as f64 - sw / 2.0 - 2.0;
            let w = (x1 - x0).max(4.0);
            let color = if ph.rem_euclid(2) == 0 { "#dbe8ff" } else { "#ffe7c7" };
            let _ = writeln!(
                out,
                r##"<g class="band"><title>{} phase {ph} (parity {})</title><rect x="{x0:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" rx="4" fill="{color}" stroke="#b8c3d6"/><text class="band-label" x="{:.1}" y="{:.1}">phase {ph}</text></g>"##,
                esc(b),
                ph.rem_euclid(2),
                y + 3.0,
                bh - 6.0,
                x0 + 6.0,
                y + bh / 2.0 + 4.0
            );
        }
    }
    // Marks.
    let marked = t.violating_step();
    for (i, s) in t.steps.iter().enumerate() {
        let lane = lane_index(s, &lanes);
        let cx = x_of(i + 1);
        let cy = top + lh * lane as f64 + lh / 2.0;
        let first = s.observed.iter().find(|o| !matches!(o, Obs::PhaseCompleted { .. }));
        let color = mark_color(first);
        let tip = esc(&step_tip(t, s, source));
        let row = format!("t{idx}-s{}", s.step);
        let shape = match first {
            Some(Obs::Arrived { .. }) | Some(Obs::CommitJoined { .. }) => {
                format!(r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="8" fill="{color}"/>"#)
            }
            Some(Obs::Waited { .. }) | Some(Obs::TryWait { .. }) => {
                format!(
                    r#"<rect x="{:.1}" y="{:.1}" width="16" height="16" fill="{color}"/>"#,
                    cx - 8.0,
                    cy - 8.0
                )
            }
            Some(Obs::CopyIssued { .. }) | Some(Obs::Landed { .. }) | Some(Obs::LandedPart { .. }) => format!(
                r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{color}"/>"#,
                cx,
                cy - 9.0,
                cx + 9.0,
                cy + 7.0,
                cx - 9.0,
                cy + 7.0
            ),
            Some(Obs::Read { .. }) | Some(Obs::Wrote { .. }) => format!(
                r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{color}"/>"#,
                cx,
                cy - 9.0,
                cx + 9.0,
                cy,
                cx,
                cy + 9.0,
                cx - 9.0,
                cy
            ),
            _ => format!(r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{color}"/>"#),
        };
        let ring = if marked == Some(i + 1) || !s.raised.is_empty() {
            format!(r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="14" fill="none" stroke="#d9363e" stroke-width="2.5"/>"##)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            r##"<g class="mark" data-step="{}" data-row="{row}" data-tip="{tip}"><title>{tip}</title>{ring}{shape}<text class="mark-label" x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#445">{}</text></g>"##,
            s.step,
            cy + if i % 2 == 0 { 22.0 } else { -13.0 },
            esc(&labels[i])
        );
    }
    if v.raised_by == RaisedBy::State {
        let x = x_of(n + 1);
        for st in &v.stuck {
            let label = format!("{}#{}", st.thread.role, st.thread.tid);
            if let Some(lane) = lanes.iter().position(|l| l.members.contains(&label)) {
                let cy = top + lh * lane as f64 + lh / 2.0;
                let tip = esc(&format!(
                    "{label} is blocked at line {}: {}\n{}",
                    st.span.line, st.statement, v.kind
                ));
                let _ = writeln!(
                    out,
                    r##"<g class="mark stuck" data-row="t{idx}-end" data-tip="{tip}"><title>{tip}</title><circle cx="{x:.1}" cy="{cy:.1}" r="10" fill="#fff" stroke="#d9363e" stroke-width="2.5"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#d9363e" font-weight="700">✕</text></g>"##,
                    cy + 4.5
                );
            }
        }
    }
    let _ = writeln!(out, "</svg></div></div>");
}

/// What the trace file does not hold but the model knows, for the HTML page: the barriers'
/// init counts (for the legend) and the trace's root cause.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// `(barrier, count)` in declaration order; arrays as `name[*]` when every element has the
    /// same count.
    pub init_counts: Vec<(String, i64)>,
    /// The root cause, one line, and its barrier facts.
    pub cause: Option<(String, String)>,
    /// The spec line the root cause names (its kernel source is shown when the spec cites one).
    pub cause_line: Option<usize>,
}

/// A self-contained HTML page (inline CSS and JS, no network) with one timeline per trace.
pub fn html(traces: &[(TraceFile, Option<String>)], title: &str) -> String {
    html_with(traces, title, &[])
}

/// `html` with, per trace, what only the model knows (`extras[i]` for `traces[i]`; missing
/// entries show nothing): a legend of the barriers' init counts and the root cause. Every
/// timeline opens scrolled to its violation, and a link jumps back to it.
pub fn html_with(traces: &[(TraceFile, Option<String>)], title: &str, extras: &[Extras]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body>",
        esc(title)
    );
    let _ = writeln!(out, "<h1>{}</h1>", esc(title));
    let _ = writeln!(
        out,
        r##"<div class="legend"><span style="color:#2f6fdf">● arrive</span><span style="color:#1f9d55">■ wait</span><span style="color:#c26a00">▲ copy issue / landing</span><span style="color:#7a4fd0">◆ read / write</span><span style="color:#d9363e">◯ violation</span><span>bands: barrier phases (blue even, orange odd parity)</span></div>"##
    );
    if traces.len() > 1 {
        out.push_str("<nav class=\"index\">counterexamples:");
        for (idx, (t, _)) in traces.iter().enumerate() {
            let _ = write!(
                out,
                r##" <a href="#trace-{idx}">{} {}</a>"##,
                esc(&t.spec.name),
                esc(t.violation.kind.name())
            );
        }
        out.push_str("</nav>\n");
    }
    for (idx, (t, source)) in traces.iter().enumerate() {
        let v = &t.violation;
        let ex = extras.get(idx).cloned().unwrap_or_default();
        let _ = writeln!(
            out,
            r#"<section class="trace" id="trace-{idx}"><h2>{} — {} [{}]</h2>"#,
            esc(&t.spec.name),
            esc(v.kind.name()),
            esc(&v.code)
        );
        if !ex.init_counts.is_empty() {
            let items: Vec<String> = ex
                .init_counts
                .iter()
                .map(|(b, c)| format!("<span><b>{}</b> count {c}</span>", esc(b)))
                .collect();
            let _ = writeln!(out, r#"<div class="legend counts">barriers (init count): {}</div>"#, items.join(""));
        }
        if let Some((summary, facts)) = &ex.cause {
            let _ = writeln!(
                out,
                r#"<div class="cause"><b>root cause</b>: {}{}{}</div>"#,
                esc(summary),
                match ex.cause_line.and_then(|l| cited_source(source.as_deref(), l)) {
                    Some(c) => format!(r#"<br><span class="cited">from {}</span>"#, esc(&c)),
                    None => String::new(),
                },
                if facts.is_empty() {
                    String::new()
                } else {
                    format!("<br><small>{}</small>", esc(facts))
                }
            );
        }
        let _ = writeln!(
            out,
            r#"<div class="meta">{} · {} step(s) · params {}</div>"#,
            esc(&t.spec.path),
            t.steps.len(),
            esc(&t.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "))
        );
        let at = match v.raised_by {
            RaisedBy::Step => format!(" (step {})", t.steps.len()),
            RaisedBy::State => format!(" (the state after step {})", t.steps.len()),
            RaisedBy::InitialState => " (initial state)".into(),
        };
        let _ = writeln!(
            out,
            r#"<div class="msg"><b>{}</b>{}: {}</div>"#,
            esc(v.kind.name()),
            esc(&at),
            esc(&v.message)
        );
        let (target, at_step) = match t.violating_step() {
            Some(n) => (format!("t{idx}-s{n}"), n),
            None => (format!("t{idx}-end"), t.steps.len() + 1),
        };
        let _ = writeln!(
            out,
            r##"<a class="jump" href="#{target}" data-idx="{idx}" data-step="{at_step}">jump to the violation ({})</a>"##,
            if at_step > t.steps.len() {
                "after the last step".to_string()
            } else {
                format!("step {at_step}")
            }
        );
        section(&mut out, idx, t, at_step, source.as_deref());
        // an imported spec cites the kernel's source line on every statement: a column of its own
        let cited: Vec<Option<String>> = t.steps.iter().map(|s| cited_source(source.as_deref(), s.span.line)).collect();
        let with_cited = cited.iter().any(Option::is_some);
        let _ = writeln!(
            out,
            "<table><tr><th>step</th><th>who</th><th>line</th><th>statement</th>{}<th>observed</th><th>barriers</th></tr>",
            if with_cited { "<th>kernel source</th>" } else { "" }
        );
        let marked = t.violating_step();
        for (s, cited) in t.steps.iter().zip(&cited) {
            let cls = if marked == Some(s.step) { " class=\"viol\"" } else { "" };
            let who = match s.action {
                Action::Thread(_) => actor(s),
                Action::Land(_) | Action::LandPart(_) => format!(
                    "{} (issued by {})",
                    actor(s),
                    s.copy.as_ref().map(|c| c.issuer.as_str()).unwrap_or("?")
                ),
            };
            let _ = writeln!(
                out,
                r#"<tr id="t{idx}-s{}"{cls}><td>{}</td><td>{}</td><td>{}</td><td class="mono">{}</td>{}<td>{}</td><td>{}</td></tr>"#,
                s.step,
                s.step,
                esc(&who),
                s.span.line,
                esc(&s.statement),
                if with_cited {
                    format!(r#"<td class="mono cited">{}</td>"#, esc(cited.as_deref().unwrap_or("")))
                } else {
                    String::new()
                },
                esc(&s.observed.iter().map(|o| obs_text(t, o)).collect::<Vec<_>>().join("; ")),
                esc(&s.changes.iter().map(changes_text).collect::<Vec<_>>().join("; "))
            );
        }
        if v.raised_by == RaisedBy::State {
            let _ = writeln!(
                out,
                r#"<tr id="t{idx}-end" class="viol"><td>end</td><td colspan="{}">{}</td></tr>"#,
                if with_cited { 6 } else { 5 },
                esc(&v.message)
            );
        }
        let _ = writeln!(out, "</table>");
        if let Some(_src) = source {
            // The source excerpt in rustc style.
            let text = swimlanes(t, source.as_deref());
            if let Some(pos) = text.find("error[") {
                let _ = writeln!(out, "<pre>{}</pre>", esc(&text[pos..]));
            }
        }
        let _ = writeln!(out, "</section>");
    }
    let _ = writeln!(out, "<div id=\"tip\"></div><script>{JS}</script></body></html>");
    out
}
