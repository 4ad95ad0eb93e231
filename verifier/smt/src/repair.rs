//! `repair`: the smallest change to one constant or affine term that makes the counting laws hold.
//!
//! Candidates are edits of one term of the spec: an integer literal moved by a small amount, a
//! parameter or role count offset by one, a parity expression shifted by one phase. They are tried
//! nearest first (the statements the counterexample names before the rest, smaller changes before
//! larger). A candidate is kept only when Z3 proves the laws over the same ranges AND the explicit
//! search finds no counting violation at the declared instance; the survivors are ranked (those
//! after which the explicit search finds nothing at all come first) and printed as unified diffs.

use crate::{explicit, prove, Options, Outcome, Range};
use phasecheck_model::lang::ast::{self, BinOp, Expr, ExprKind, OpKind, Span, StmtKind};
use phasecheck_model::spec::Spec;
use phasecheck_verifier::Verdict;
use std::fmt::Write as _;

#[derive(Clone, Debug)]
pub struct Fix {
    /// One line: what changed.
    pub summary: String,
    pub diff: String,
    /// Ranking key: smaller is better.
    pub cost: (u8, i64, u32),
    /// Whether the explicit search finds no violation of any kind after the change.
    pub clean: bool,
}

#[derive(Clone, Debug)]
struct Edit {
    span: Span,
    text: String,
    /// How far the new term is from the old one.
    size: i64,
    what: String,
}

/// Ranked confirmed repairs, or why none can be searched for.
pub fn repair(spec: &Spec, ranges: &[Range]) -> Result<Vec<Fix>, String> {
    let opts = Options {
        ranges: ranges.to_vec(),
        timeout_ms: 10_000,
        ..Options::default()
    };
    let before = prove(&spec.ast, &opts);
    let cx = match &before.outcome {
        Outcome::Proved => return Err("the counting laws already hold for these ranges".into()),
        Outcome::Unknown { reason, .. } => return Err(format!("prove cannot decide the laws for this spec: {reason}")),
        Outcome::Refuted(cx) => cx.clone(),
    };
    let focus = cx.spans.clone();
    let mut edits = candidates(spec);
    // Z3's own answer for a count mismatch: the arrivals the phase actually gets
    if cx.law == crate::Law::Arrivals {
        let get = |n: &str| cx.details.iter().find(|(l, _)| l == n).map(|(_, v)| *v);
        if let (Some(got), Some(exp)) = (get("arrivals"), get("expected")) {
            let declared = cx.group.split("@cta").next().unwrap_or(&cx.group);
            if let Some(b) = spec.ast.barriers().find(|b| b.name.name == declared) {
                if got >= 1 {
                    let old = text(&spec.source, b.count.span).to_string();
                    edits.push(Edit {
                        span: b.count.span,
                        text: got.to_string(),
                        size: (got - exp).abs(),
                        what: format!("count of barrier {}: {old} -> {got} (the arrivals each phase gets)", b.name.name),
                    });
                }
            }
        }
    }
    // nearest first: edits inside the statements the counterexample names
    let near = |e: &Edit| {
        focus.iter().any(|f| {
            f.start <= e.span.start && e.span.end <= f.end.max(f.start + 1)
                || line_of(&spec.source, f.start) == line_of(&spec.source, e.span.start)
        })
    };
    edits.sort_by_key(|e| (!near(e), e.size, e.span.start));
    edits.truncate(120);
    let mut fixes = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for e in edits {
        let mut src = spec.source.clone();
        src.replace_range(e.span.start as usize..e.span.end as usize, &e.text);
        let Ok(ast) = phasecheck_model::lang::parse(&src) else { continue };
        if phasecheck_model::lang::check(&ast).is_err() {
            continue;
        }
        if seen.contains(&src) {
            continue;
        }
        seen.push(src.clone());
        let r = prove(&ast, &opts);
        if !matches!(r.outcome, Outcome::Proved) {
            continue;
        }
        let Ok(proto) = phasecheck_model::program::lower::lower(&ast, &[]) else {
            continue;
        };
        let fixed = Spec {
            path: spec.path.clone(),
            display: spec.display.clone(),
            source: src.clone(),
            ast,
            proto,
        };
        // confirmed: the explicit search finds nothing at all at the declared instance (a change
        // that only trades a counting violation for a race is no repair)
        let (_, rep) = explicit(&fixed);
        if rep.verdict != Verdict::Holds {
            continue;
        }
        let clean = true;
        fixes.push(Fix {
            summary: format!(
                "{} (Z3: counting laws proved; explicit search at the declared instance: holds)",
                e.what
            ),
            diff: unified_diff(&spec.display, &spec.source, &src),
            cost: (if clean { 0 } else { 1 }, e.size, e.span.start),
            clean,
        });
        if fixes.len() >= 5 {
            break;
        }
    }
    fixes.sort_by_key(|f| f.cost);
    Ok(fixes)
}

fn line_of(src: &str, off: u32) -> usize {
    src[..(off as usize).min(src.len())].matches('\n').count()
}

fn text(src: &str, sp: Span) -> &str {
    &src[sp.start as usize..sp.end as usize]
}

/// Every one-term edit worth trying.
fn candidates(spec: &Spec) -> Vec<Edit> {
    let src = &spec.source;
    let mut out = Vec::new();
    let mut lit = |e: &Expr, role: &str, out: &mut Vec<Edit>| {
        if let ExprKind::Int(v) = e.kind {
            for d in [-1i64, 1, -2, 2] {
                let n = v + d;
                if n < 0 {
                    continue;
                }
                out.push(Edit {
                    span: e.span,
                    text: n.to_string(),
                    size: d.abs(),
                    what: format!("{role}: {v} -> {n}"),
                });
            }
            if v > 2 {
                for n in [v * 2, v / 2] {
                    out.push(Edit {
                        span: e.span,
                        text: n.to_string(),
                        size: (n - v).abs().min(1 << 20),
                        what: format!("{role}: {v} -> {n}"),
                    });
                }
            }
        } else if let Some(inner) = first_literal(e) {
            let t = text(src, e.span).to_string();
            if let ExprKind::Int(v) = inner.kind {
                for d in [-1i64, 1] {
                    if v + d < 0 {
                        continue;
                    }
                    let mut new = t.clone();
                    let a = (inner.span.start - e.span.start) as usize;
                    let b = (inner.span.end - e.span.start) as usize;
                    new.replace_range(a..b, &(v + d).to_string());
                    out.push(Edit {
                        span: inner.span,
                        text: (v + d).to_string(),
                        size: 1,
                        what: format!("{role}: {t} -> {new}"),
                    });
                }
            }
        } else {
            let t = text(src, e.span).to_string();
            for d in [1i64, -1] {
                out.push(Edit {
                    span: e.span,
                    text: format!("{t} {} {}", if d > 0 { "+" } else { "-" }, d.abs()),
                    size: d.abs(),
                    what: format!("{role}: {t} -> {t} {} 1", if d > 0 { "+" } else { "-" }),
                });
            }
        }
    };
    for item in &spec.ast.items {
        match item {
            // a parameter that sizes loops or arrays is the problem instance, not a fix
            ast::Item::Param(p) if !sizes_problem(&spec.ast, &p.name.name) => {
                lit(&p.value, &format!("parameter {}", p.name.name), &mut out)
            }
            ast::Item::Barrier(b) => lit(&b.count, &format!("count of barrier {}", b.name.name), &mut out),
            ast::Item::Buffer(b) => lit(&b.bytes, &format!("bytes of buffer {}", b.name.name), &mut out),
            ast::Item::Role(r) => {
                // a role's size is the instance too: shrinking it hides bugs, it fixes none
                stmts(&r.body, src, &mut out, &mut lit, &spec.ast, None);
            }
            // an inline function's body is every caller's code (the pipeline state's advance)
            ast::Item::Function(f) => stmts(&f.body, src, &mut out, &mut lit, &spec.ast, None),
            _ => {}
        }
    }
    out
}

type Lit<'a> = dyn FnMut(&Expr, &str, &mut Vec<Edit>) + 'a;

/// `lv`: the innermost loop variable around the block.
fn stmts(b: &ast::Block, src: &str, out: &mut Vec<Edit>, lit: &mut Lit, prog: &ast::Program, lv: Option<&str>) {
    moves(b, src, out, prog, lv);
    for s in &b.stmts {
        match &s.kind {
            StmtKind::For { var, hi, body, .. } => {
                let before = out.len();
                lit(hi, "loop bound", out);
                // A loop bound changes only to agree with another loop's bound (a consumer that
                // runs one round short of its producer); moving it anywhere else just shrinks
                // the instance until the bug no longer shows.
                let bounds = loop_bounds(src);
                let here = text(src, hi.span).to_string();
                let mut kept: Vec<Edit> = out
                    .drain(before..)
                    .filter(|e| {
                        let mut t = here.clone();
                        let a = (e.span.start - hi.span.start) as usize;
                        let b = (e.span.end - hi.span.start) as usize;
                        if b > t.len() {
                            return false;
                        }
                        t.replace_range(a..b, &e.text);
                        bounds.iter().any(|x| norm(x) == norm(&t))
                    })
                    .collect();
                out.append(&mut kept);
                stmts(body, src, out, lit, prog, Some(&var.name));
            }
            StmtKind::If { cond, then, els } => {
                if let ExprKind::Binary(op, l, r) = &cond.kind {
                    if matches!(op, BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne) {
                        lit(r, "condition bound", out);
                    }
                    // the thread a role's one signalling thread is: the first of another role
                    if let (BinOp::Eq, ExprKind::Name(n), ExprKind::Int(v)) = (op, &l.kind, &r.kind) {
                        if n == "gtid" {
                            for (role, first) in first_threads(prog).into_iter().filter(|(_, f)| f != v) {
                                out.push(Edit {
                                    span: r.span,
                                    text: first.to_string(),
                                    size: 2,
                                    what: format!("condition: gtid == {v} -> gtid == {first} (the first thread of {role})"),
                                });
                            }
                        }
                    }
                }
                stmts(then, src, out, lit, prog, lv);
                if let Some(e) = els {
                    stmts(e, src, out, lit, prog, lv);
                }
            }
            StmtKind::While { body, .. } => stmts(body, src, out, lit, prog, lv),
            // the lanes a `syncwarp(mask)` names
            StmtKind::SyncWarpMask(m) => lit(m, "syncwarp mask", out),
            StmtKind::Op(op) => opk(op, src, out, lit, prog, lv),
            StmtKind::Let {
                value: ast::Value::Op(op), ..
            }
            | StmtKind::Assign {
                value: ast::Value::Op(op), ..
            } => opk(op, src, out, lit, prog, lv),
            _ => {}
        }
    }
}

fn opk(op: &ast::Op, src: &str, out: &mut Vec<Edit>, lit: &mut Lit, prog: &ast::Program, lv: Option<&str>) {
    match &op.kind {
        OpKind::WaitParity { parity, bar } => {
            // a constant parity inside a loop: the round's parity, the visit number of the
            // element (`(i / LEN) % 2` for an array of LEN elements visited in turn), or the
            // other one ("buffers start empty")
            if let (ExprKind::Int(_), Some(v)) = (&parity.kind, lv) {
                let len = prog
                    .barriers()
                    .find(|b| b.name.name == bar.name.name)
                    .and_then(|b| b.len.as_ref())
                    .map(|e| text(src, e.span).to_string());
                let visit = match (&bar.index, len) {
                    (Some(_), Some(l)) => format!("{v} / {l}"),
                    _ => v.to_string(),
                };
                for (t, what) in [
                    (format!("({visit}) % 2"), "this round"),
                    (format!("({visit} + 1) % 2"), "the round before"),
                ] {
                    out.push(Edit {
                        span: parity.span,
                        text: t.clone(),
                        size: 1,
                        what: format!(
                            "wait parity: {} -> {t} (the parity of {what}, flipping every visit)",
                            text(src, parity.span)
                        ),
                    });
                }
            }
            // a parity expression in a loop that names the wrong rounds: the loop variable's
            // parity, the element's visit number's, or a constant
            if let (false, Some(v)) = (matches!(parity.kind, ExprKind::Int(_)), lv) {
                let len = prog
                    .barriers()
                    .find(|b| b.name.name == bar.name.name)
                    .and_then(|b| b.len.as_ref())
                    .map(|e| text(src, e.span).to_string());
                let mut alts = vec![format!("{v} % 2"), format!("({v} + 1) % 2"), "0".to_string(), "1".to_string()];
                if let Some(l) = len {
                    alts.push(format!("({v} / {l}) % 2"));
                    alts.push(format!("({v} / {l} + 1) % 2"));
                }
                let old = text(src, parity.span).to_string();
                for t in alts.into_iter().filter(|t| norm(t) != norm(&old)) {
                    out.push(Edit {
                        span: parity.span,
                        text: t.clone(),
                        size: 2,
                        what: format!("wait parity: {old} -> {t} (the rounds the wait names)"),
                    });
                }
            }
            // one phase later or earlier: the parity flips
            let t = text(src, parity.span).to_string();
            let (span, text) = match &parity.kind {
                ExprKind::Binary(BinOp::Rem, x, m) if matches!(m.kind, ExprKind::Int(2)) => {
                    let inner = &src[x.span.start as usize..x.span.end as usize];
                    let inner = inner.strip_prefix('(').and_then(|t| t.strip_suffix(')')).unwrap_or(inner);
                    (x.span, format!("({inner} + 1)"))
                }
                ExprKind::Int(v) => (parity.span, ((v + 1).rem_euclid(2)).to_string()),
                _ => (parity.span, format!("({t} + 1) % 2")),
            };
            let new = {
                let mut s = src[parity.span.start as usize..parity.span.end as usize].to_string();
                let a = (span.start - parity.span.start) as usize;
                let b = (span.end - parity.span.start) as usize;
                s.replace_range(a..b, &text);
                s
            };
            out.push(Edit {
                span,
                text,
                size: 1,
                what: format!("wait parity: {t} -> {new} (the other phase)"),
            });
        }
        OpKind::Arrive { n: Some(n), .. } => lit(n, "arrival count", out),
        OpKind::ArriveExpectTx { bytes, .. } | OpKind::ExpectTx { bytes, .. } | OpKind::CompleteTx { bytes, .. } => {
            lit(bytes, "bytes", out);
            // bytes of a parameter that count one of two tiles, or both of one
            if !matches!(bytes.kind, ExprKind::Int(_)) {
                let t = text(src, bytes.span).to_string();
                for (new, what) in [(format!("2 * {t}"), "twice"), (format!("{t} / 2"), "half")] {
                    out.push(Edit {
                        span: bytes.span,
                        text: new.clone(),
                        size: 2,
                        what: format!("bytes: {t} -> {new} ({what} the bytes)"),
                    });
                }
            }
            // an expect that should also arrive, or an arrival too many
            let name = text(src, op.span);
            let swap = match op.kind {
                OpKind::ExpectTx { .. } if name.starts_with("expect_tx") => Some(("expect_tx", "arrive_expect_tx")),
                OpKind::ArriveExpectTx { .. } if name.starts_with("arrive_expect_tx") => Some(("arrive_expect_tx", "expect_tx")),
                _ => None,
            };
            if let Some((old, new)) = swap {
                out.push(Edit {
                    span: Span {
                        start: op.span.start,
                        end: op.span.start + old.len() as u32,
                    },
                    text: new.to_string(),
                    size: 1,
                    what: format!(
                        "{old} -> {new} (the expect {} its arrival)",
                        if new == "expect_tx" { "without" } else { "with" }
                    ),
                });
            }
        }
        OpKind::CopyAsync { bytes: Some(b), .. } | OpKind::MemcpyAsync { bytes: Some(b), .. } => lit(b, "copy bytes", out),
        // the CTA a remote operation names, and the operation itself
        OpKind::Remote { target, op: inner } => {
            if let ast::ClusterTarget::Cta(e) = target {
                lit(e, "target CTA", out);
            }
            opk(inner, src, out, lit, prog, lv);
        }
        _ => {}
    }
}

/// Edits of a block's statements: two neighbours swapped (a wait, an arrival or a copy one step
/// too early or too late), a `syncwarp` before a warp-batched `commit` (the lanes reconverge), an
/// `arrive_and_drop` before a `return` (an exiting thread leaves the barrier's count).
fn moves(b: &ast::Block, src: &str, out: &mut Vec<Edit>, prog: &ast::Program, lv: Option<&str>) {
    let simple = |s: &ast::Stmt| {
        matches!(
            s.kind,
            StmtKind::Op(_) | StmtKind::Let { .. } | StmtKind::Assign { .. } | StmtKind::SyncThreads | StmtKind::SyncWarp
        ) && !text(src, s.span).contains('\n')
    };
    let barrier_op = |s: &ast::Stmt| {
        matches!(
            &s.kind,
            StmtKind::Op(o) | StmtKind::Let { value: ast::Value::Op(o), .. } | StmtKind::Assign { value: ast::Value::Op(o), .. }
                if o.kind.object() != ast::Object::Memory
        ) || matches!(s.kind, StmtKind::SyncThreads | StmtKind::SyncWarp)
    };
    let indent = |s: &ast::Stmt| {
        let line = src[..s.span.start as usize].rfind('\n').map_or(0, |i| i + 1);
        src[line..s.span.start as usize].to_string()
    };
    // an `if` that leaves the loop or the thread, moved past the barrier operation after it
    let exits = |s: &ast::Stmt| matches!(&s.kind, StmtKind::If { then, els: None, .. } if walk_exits(then));
    for w in b.stmts.windows(2) {
        let (x, y) = (&w[0], &w[1]);
        let pair = (simple(x) && simple(y) && (barrier_op(x) || barrier_op(y)))
            || (exits(x) && simple(y) && barrier_op(y))
            || (simple(x) && barrier_op(x) && exits(y));
        if pair {
            let mid = &src[x.span.end as usize..y.span.start as usize];
            out.push(Edit {
                span: Span {
                    start: x.span.start,
                    end: y.span.end,
                },
                text: format!("{}{mid}{}", text(src, y.span), text(src, x.span)),
                size: 1,
                what: format!("`{}` moved after `{}`", text(src, x.span), text(src, y.span)),
            });
        }
    }
    for (i, s) in b.stmts.iter().enumerate() {
        let at = Span {
            start: s.span.start,
            end: s.span.start,
        };
        // a barrier operation too many (a wait that names a phase the thread cannot know, a
        // drop that empties the barrier): removed with its line, tried after the other edits
        if simple(s) && barrier_op(s) && !matches!(s.kind, StmtKind::Let { .. }) {
            let end = match b.stmts.get(i + 1) {
                Some(n) => src[..n.span.start as usize].rfind('\n').map_or(0, |k| k + 1) as u32,
                // the last statement: its line, up to the newline
                None => src[s.span.end as usize..]
                    .find('\n')
                    .map_or(s.span.end, |k| s.span.end + k as u32 + 1),
            };
            let start = src[..s.span.start as usize].rfind('\n').map_or(0, |k| k + 1) as u32;
            if end > s.span.end {
                out.push(Edit {
                    span: Span { start, end },
                    text: String::new(),
                    size: 3,
                    what: format!("`{}` removed", text(src, s.span)),
                });
            }
        }
        // an exit from the count where the thread should only arrive
        if let StmtKind::Op(o) = &s.kind {
            if matches!(o.kind, OpKind::ArriveAndDrop { .. }) && text(src, o.span).starts_with("arrive_and_drop") {
                out.push(Edit {
                    span: Span {
                        start: o.span.start,
                        end: o.span.start + "arrive_and_drop".len() as u32,
                    },
                    text: "arrive".into(),
                    size: 2,
                    what: format!("`{}` -> an `arrive` (the thread stays in the count)", text(src, o.span)),
                });
            }
        }
        match &s.kind {
            StmtKind::Op(o) if matches!(o.kind, OpKind::Commit { .. }) => out.push(Edit {
                span: at,
                text: format!("syncwarp\n{}", indent(s)),
                size: 1,
                what: format!("`syncwarp` before `{}` (the lanes reconverge first)", text(src, s.span)),
            }),
            // a stage index wrapped to 0 with the phase left as it was
            StmtKind::Assign {
                name,
                value: ast::Value::Expr(e),
            } if matches!(e.kind, ExprKind::Int(0)) => {
                let end = Span {
                    start: s.span.end,
                    end: s.span.end,
                };
                for p in phase_names(prog).into_iter().filter(|p| *p != name.name) {
                    out.push(Edit {
                        span: end,
                        text: format!("\n{}{p} = 1 - {p}", indent(s)),
                        size: 2,
                        what: format!(
                            "`{p} = 1 - {p}` after `{}` (the phase flips when the index wraps)",
                            text(src, s.span)
                        ),
                    });
                }
            }
            // a wait for the bytes a copy lands before the thread arrives again
            StmtKind::Op(o) if matches!(o.kind, OpKind::CopyAsync { .. }) => {
                let OpKind::CopyAsync { bar, .. } = &o.kind else { unreachable!() };
                let end = Span {
                    start: s.span.end,
                    end: s.span.end,
                };
                let b = text(src, bar.span).to_string();
                let parities = match lv {
                    Some(v) => vec![format!("{v} % 2"), format!("({v} + 1) % 2")],
                    None => vec!["0".to_string(), "1".to_string()],
                };
                for p in parities {
                    out.push(Edit {
                        span: end,
                        text: format!("\n{}wait_parity({b}, {p})", indent(s)),
                        size: 2,
                        what: format!(
                            "`wait_parity({b}, {p})` after `{}` (the copy lands before the next arrival)",
                            text(src, s.span)
                        ),
                    });
                }
            }
            StmtKind::Return => {
                for bar in prog.barriers().filter(|b| b.len.is_none()) {
                    out.push(Edit {
                        span: at,
                        text: format!("arrive_and_drop({})\n{}", bar.name.name, indent(s)),
                        size: 1,
                        what: format!("`arrive_and_drop({})` before `return` (the thread leaves the count)", bar.name.name),
                    });
                }
            }
            _ => {}
        }
    }
}

/// Whether a block always leaves by `break` or `return`.
fn walk_exits(b: &ast::Block) -> bool {
    b.stmts.iter().any(|s| matches!(s.kind, StmtKind::Break | StmtKind::Return))
}

/// The parameters of the inline functions that hold a phase, by the pipeline state's naming
/// (`phase`, `parity`): a state advance that wraps the index must flip them.
fn phase_names(p: &ast::Program) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in p.functions() {
        for prm in &f.params {
            if prm.name.contains("phase") || prm.name.contains("parity") {
                out.push(prm.name.clone());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The first thread (`gtid`) of each role, while the roles before it have literal sizes in
/// threads.
fn first_threads(p: &ast::Program) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    let mut g = 0;
    for r in p.roles() {
        let ExprKind::Int(n) = r.count.kind else { break };
        if r.unit != ast::RoleUnit::Threads {
            break;
        }
        out.push((r.name.name.clone(), g));
        g += n;
    }
    out
}

/// A unified diff (3 lines of context) between two versions of one file.
pub fn unified_diff(name: &str, old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut pre = 0;
    while pre < a.len() && pre < b.len() && a[pre] == b[pre] {
        pre += 1;
    }
    let mut suf = 0;
    while suf < a.len() - pre && suf < b.len() - pre && a[a.len() - 1 - suf] == b[b.len() - 1 - suf] {
        suf += 1;
    }
    let ctx = 3;
    let start = pre.saturating_sub(ctx);
    let a_end = (a.len() - suf + ctx).min(a.len());
    let b_end = (b.len() - suf + ctx).min(b.len());
    let mut out = String::new();
    let _ = writeln!(out, "--- a/{name}\n+++ b/{name}");
    let _ = writeln!(out, "@@ -{},{} +{},{} @@", start + 1, a_end - start, start + 1, b_end - start);
    for l in &a[start..pre] {
        let _ = writeln!(out, " {l}");
    }
    for l in &a[pre..a.len() - suf] {
        let _ = writeln!(out, "-{l}");
    }
    for l in &b[pre..b.len() - suf] {
        let _ = writeln!(out, "+{l}");
    }
    for l in &a[a.len() - suf..a_end] {
        let _ = writeln!(out, " {l}");
    }
    out
}

/// The first integer literal inside a compound expression (`consumer.count - 1`: the `1`).
fn first_literal(e: &Expr) -> Option<&Expr> {
    match &e.kind {
        ExprKind::Int(_) => Some(e),
        ExprKind::Unary(_, a) => first_literal(a),
        ExprKind::Binary(_, a, b) => first_literal(a).or_else(|| first_literal(b)),
        _ => None,
    }
}

/// Whether a parameter bounds a loop or sizes an array or role: then it is the instance.
fn sizes_problem(p: &ast::Program, name: &str) -> bool {
    fn mentions(e: &Expr, n: &str) -> bool {
        match &e.kind {
            ExprKind::Name(x) => x == n,
            ExprKind::Unary(_, a) => mentions(a, n),
            ExprKind::Binary(_, a, b) => mentions(a, n) || mentions(b, n),
            _ => false,
        }
    }
    fn block(b: &ast::Block, n: &str) -> bool {
        b.stmts.iter().any(|s| match &s.kind {
            StmtKind::For { lo, hi, body, .. } => mentions(lo, n) || mentions(hi, n) || block(body, n),
            StmtKind::If { then, els, .. } => block(then, n) || els.as_ref().is_some_and(|e| block(e, n)),
            _ => false,
        })
    }
    p.barriers().any(|b| b.len.as_ref().is_some_and(|l| mentions(l, name)))
        || p.buffers().any(|b| b.len.as_ref().is_some_and(|l| mentions(l, name)))
        || p.roles().any(|r| mentions(&r.count, name) || block(&r.body, name))
}

fn norm(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The text of every `for` loop's upper bound in the source.
fn loop_bounds(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in src.lines() {
        let code = line.split("//").next().unwrap_or("");
        if let Some(rest) = code.trim_start().strip_prefix("for ") {
            if let Some((_, r)) = rest.split_once("..") {
                let b = r.split('{').next().unwrap_or("").trim();
                out.push(b.to_string());
            }
        }
    }
    out
}
