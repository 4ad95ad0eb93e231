//! Pictures of a counterexample: text swimlanes for the terminal and a self-contained HTML page
//! with an SVG timeline. Both draw from the trace file alone (plus the spec's text, when at hand,
//! for the source excerpt), so `check` and `replay` show the same thing.

use crate::tracefile::{actor, changes_text, obs_text, RaisedBy, SpanRec, StepRec, TraceFile};
use phasecheck_model::rt::{Action, Obs};
use std::fmt::Write as _;

const MAX_CELL: usize = 34;

/// Lanes of a CTA this small show every thread, even those that never step.
const ALL_THREADS_UP_TO: usize = 12;

/// The lanes of a trace: threads by global index (all of them in a small CTA, else those that
/// act or are blocked), then `copies` if a copy lands.
fn lanes(t: &TraceFile) -> (Vec<String>, bool) {
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
fn fold_idle(t: &TraceFile, names: Vec<String>) -> Vec<String> {
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
fn obs_short(t: &TraceFile, o: &Obs) -> Option<String> {
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
        let others: Vec<String> = s
            .raised
            .iter()
            .filter(|k| !(marked == Some(i + 1) && **k == v.kind))
            .map(|k| format!("! also {k}"))
            .collect();
        margin.extend(others);
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
.scroll{overflow-x:auto;max-width:100%}
.legend{font-size:12px;color:#445;margin:6px 0}
.legend span{margin-right:14px}
.cause{background:#eef5ff;border-left:4px solid #2f6fdf;padding:8px 12px;font-size:14px;margin:8px 0}
.jump{display:inline-block;font-size:13px;margin:4px 0 6px;padding:3px 10px;border:1px solid #d9363e;border-radius:4px;color:#d9363e;text-decoration:none}
.index{font-size:13px;margin:6px 0} .index a{margin-left:10px}
.lane.idle .lane-label{fill:#8a93a3;font-weight:400;font-style:italic}
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
  function reveal(idx){
    var box=document.getElementById('scroll-'+idx);if(!box)return;
    var step=box.getAttribute('data-violation');
    var svg=document.getElementById('timeline-'+idx);
    var mark=svg&&(svg.querySelector('.mark[data-step="'+step+'"]')||svg.querySelector('.mark.stuck'));
    if(!mark)return;
    var r=mark.getBoundingClientRect(),b=box.getBoundingClientRect();
    box.scrollLeft+=r.left-b.left-box.clientWidth/2;
    box.setAttribute('data-jumped','1');
  }
  document.querySelectorAll('.scroll[data-violation]').forEach(function(b){reveal(b.id.slice(7));});
  document.querySelectorAll('a.jump').forEach(function(a){
    a.addEventListener('click',function(){reveal(a.getAttribute('data-idx'));});
  });
  document.body.setAttribute('data-ready', String(document.querySelectorAll('svg.timeline').length));
})();
"#;

fn step_tip(t: &TraceFile, s: &StepRec) -> String {
    let mut lines = vec![format!("step {} · {}", s.step, actor(s))];
    lines.push(format!("line {}: {}", s.span.line, s.statement));
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

/// One trace as an SVG timeline plus a step table.
fn section(out: &mut String, idx: usize, t: &TraceFile) {
    let v = &t.violation;
    let (names, copies) = lanes(t);
    let names = fold_idle(t, names);
    let mut lane_names = names.clone();
    if copies {
        lane_names.push("copies".into());
    }
    // Barriers whose state changes along the trace get a band each.
    let mut bars: Vec<String> = Vec::new();
    for s in &t.steps {
        for c in &s.changes {
            if !bars.contains(&c.barrier) {
                bars.push(c.barrier.clone());
            }
        }
    }
    let n = t.steps.len().max(1);
    let (left, top, sw, lh, bh) = (130.0, 34.0, 82.0f64, 50.0f64, 26.0f64);
    let extra = if v.raised_by == RaisedBy::State { 1 } else { 0 };
    let width = left + sw * (n + extra) as f64 + 30.0;
    let lanes_h = lh * lane_names.len() as f64;
    let height = top + lanes_h + 14.0 + bh * bars.len() as f64 + 20.0;
    let x_of = |k: usize| left + sw * (k as f64 - 0.5); // k: 1-based step
    let _ = writeln!(
        out,
        r#"<svg id="timeline-{idx}" class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="timeline of {}">"#,
        esc(&t.spec.name)
    );
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
    // Lanes.
    for (i, name) in lane_names.iter().enumerate() {
        let y = top + lh * i as f64 + lh / 2.0;
        let fill = if i % 2 == 0 { "#f6f8fb" } else { "#ffffff" };
        let cls = if name.starts_with("idle: ") { "lane idle" } else { "lane" };
        let _ = writeln!(
            out,
            r##"<g class="{cls}" data-lane="{}"><rect x="0" y="{:.1}" width="{width:.0}" height="{lh:.1}" fill="{fill}"/><text class="lane-label" x="10" y="{:.1}">{}</text><line x1="{left:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#c9d0db" stroke-dasharray="4 3"/></g>"##,
            esc(name),
            y - lh / 2.0,
            y + 4.0,
            esc(name),
            width - 20.0
        );
    }
    // Barrier phase bands.
    let by = top + lanes_h + 14.0;
    for (bi, b) in bars.iter().enumerate() {
        let y = by + bh * bi as f64;
        let _ = writeln!(
            out,
            r#"<text class="band-label" x="10" y="{:.1}">{}</text>"#,
            y + bh / 2.0 + 4.0,
            esc(b)
        );
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
            let x0 = left + sw * a as f64 - sw / 2.0 + 2.0;
            let x1 = left + sw * z as f64 - sw / 2.0 - 2.0;
            let x0 = x0.max(left - sw / 2.0 + 2.0);
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
        let lane = lane_of(s, &names);
        let cx = x_of(i + 1);
        let cy = top + lh * lane as f64 + lh / 2.0;
        let first = s.observed.iter().find(|o| !matches!(o, Obs::PhaseCompleted { .. }));
        let color = mark_color(first);
        let tip = esc(&step_tip(t, s));
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
        let short = match (&s.copy, first) {
            (Some(c), _) => format!("{} lands", c.buffer),
            (None, Some(o)) => obs_short(t, o).unwrap_or_default(),
            (None, None) => clip(&s.statement, 12),
        };
        let ring = if marked == Some(i + 1) || !s.raised.is_empty() {
            format!(r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="14" fill="none" stroke="#d9363e" stroke-width="2.5"/>"##)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            r##"<g class="mark" data-step="{}" data-row="{row}" data-tip="{tip}"><title>{tip}</title>{ring}{shape}<text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#445">{}</text></g>"##,
            s.step,
            cy + if i % 2 == 0 { 22.0 } else { -13.0 },
            esc(&clip(&short, 12))
        );
    }
    if v.raised_by == RaisedBy::State {
        let x = x_of(n + 1);
        for st in &v.stuck {
            let label = format!("{}#{}", st.thread.role, st.thread.tid);
            if let Some(lane) = names.iter().position(|x| *x == label) {
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
    let _ = writeln!(out, "</svg>");
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
                r#"<div class="cause"><b>root cause</b>: {}{}</div>"#,
                esc(summary),
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
        let _ = write!(out, r#"<div class="scroll" id="scroll-{idx}" data-violation="{at_step}">"#);
        section(&mut out, idx, t);
        out.push_str("</div>");
        let _ = writeln!(
            out,
            "<table><tr><th>step</th><th>who</th><th>line</th><th>statement</th><th>observed</th><th>barriers</th></tr>"
        );
        let marked = t.violating_step();
        for s in &t.steps {
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
                r#"<tr id="t{idx}-s{}"{cls}><td>{}</td><td>{}</td><td>{}</td><td class="mono">{}</td><td>{}</td><td>{}</td></tr>"#,
                s.step,
                s.step,
                esc(&who),
                s.span.line,
                esc(&s.statement),
                esc(&s.observed.iter().map(|o| obs_text(t, o)).collect::<Vec<_>>().join("; ")),
                esc(&s.changes.iter().map(changes_text).collect::<Vec<_>>().join("; "))
            );
        }
        if v.raised_by == RaisedBy::State {
            let _ = writeln!(
                out,
                r#"<tr id="t{idx}-end" class="viol"><td>end</td><td colspan="5">{}</td></tr>"#,
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
