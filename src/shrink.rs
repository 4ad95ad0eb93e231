//! What to shrink when a search hits its bound (verdict `incomplete`).
//!
//! The state space grows with every parameter and role size, but not equally, and which one
//! dominates depends on the protocol. Rather than guess, each candidate is tried one step smaller
//! with a small budget, and the candidates are ranked by what that bought: finishing at all
//! (fewest states first), else how deep the search got within the same budget (a smaller
//! branching factor reaches deeper).
//!
//! A hint must keep the protocol: shrinking it is only useful if the smaller one means the same.
//! So the candidates are the parameters that bound repetition (a `for` range, a `while`
//! condition, the length of a barrier or buffer array: rounds, tiles, stages), directly or
//! through another parameter's value, and role sizes only where the role's members are copies of
//! one another (its code never names a thread index); never a byte count or a partner role
//! (members told apart by their index, as ping-pong warpgroups are). A trial that finishes with a verdict other than the spec's `expect` line is
//! not offered: it changed the meaning. Trials share what is left of `--max-seconds`.

use crate::load::Spec;
use phasecheck_model::lang::ast::{Block, Expr, ExprKind, Item, Program, StmtKind};
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::Model;
use phasecheck_verifier::{check, CheckOptions, Verdict};
use std::collections::BTreeSet;
use std::time::Instant;

/// One candidate tried smaller.
#[derive(Clone, Debug)]
pub struct Shrink {
    /// `param ITERS` or `role consumer`.
    pub what: String,
    pub from: i64,
    pub to: i64,
    /// Stored states when the smaller search finished, None when it hit the budget too.
    pub finished_in: Option<usize>,
    /// BFS depth reached within the budget.
    pub depth: usize,
    /// The smaller protocol's verdict when it finished.
    pub verdict: Option<Verdict>,
}

fn smaller(v: i64) -> Option<i64> {
    match v {
        i64::MIN..=1 => None,
        2..=4 => Some(v - 1),
        _ => Some(v / 2),
    }
}

fn names_in(e: &Expr, out: &mut BTreeSet<String>) {
    match &e.kind {
        ExprKind::Int(_) | ExprKind::RoleCount(_) => {}
        ExprKind::Name(n) => {
            out.insert(n.clone());
        }
        ExprKind::Unary(_, a) => names_in(a, out),
        ExprKind::Binary(_, a, b) => {
            names_in(a, out);
            names_in(b, out);
        }
    }
}

/// Names in loop ranges and `while` conditions of `b`; `thread_index` is set when the block
/// names one of `tid gtid lane warp` anywhere in a condition, range or assignment.
fn repetition_names(b: &Block, out: &mut BTreeSet<String>, thread_index: &mut bool) {
    let mut seen = BTreeSet::new();
    for st in &b.stmts {
        match &st.kind {
            StmtKind::For { lo, hi, body, .. } => {
                names_in(lo, out);
                names_in(hi, out);
                repetition_names(body, out, thread_index);
            }
            StmtKind::While { cond, body } => {
                names_in(cond, out);
                names_in(cond, &mut seen);
                repetition_names(body, out, thread_index);
            }
            StmtKind::If { cond, then, els } => {
                names_in(cond, &mut seen);
                repetition_names(then, out, thread_index);
                if let Some(e) = els {
                    repetition_names(e, out, thread_index);
                }
            }
            StmtKind::Let {
                value: phasecheck_model::lang::ast::Value::Expr(e),
                ..
            }
            | StmtKind::Assign {
                value: phasecheck_model::lang::ast::Value::Expr(e),
                ..
            } => names_in(e, &mut seen),
            StmtKind::SyncWarpMask(_) => *thread_index = true,
            _ => {}
        }
    }
    if ["tid", "gtid", "lane", "warp"].iter().any(|n| seen.contains(*n)) {
        *thread_index = true;
    }
}

/// The parameters that bound repetition in `ast`, closed over parameter definitions (shrinking
/// `K` shrinks `KT = K / 64`).
fn shape_params(ast: &Program) -> BTreeSet<String> {
    let mut shape = BTreeSet::new();
    let mut ignored = false;
    for item in &ast.items {
        match item {
            Item::Barrier(b) => b.len.iter().for_each(|e| names_in(e, &mut shape)),
            Item::Buffer(b) => b.len.iter().for_each(|e| names_in(e, &mut shape)),
            Item::Role(r) => repetition_names(&r.body, &mut shape, &mut ignored),
            Item::Function(f) => repetition_names(&f.body, &mut shape, &mut ignored),
            Item::Completion(c) => repetition_names(&c.body, &mut shape, &mut ignored),
            _ => {}
        }
    }
    loop {
        let before = shape.len();
        for p in ast.params() {
            if shape.contains(&p.name.name) {
                names_in(&p.value, &mut shape);
            }
        }
        if shape.len() == before {
            return shape;
        }
    }
}

/// Whether a finished trial kept the meaning the spec's `expect` line gives it (no line: the
/// spec is meant to hold).
fn keeps_meaning(spec: &Spec, r: &phasecheck_verifier::Report) -> bool {
    let found: BTreeSet<_> = r.violations.iter().map(|v| v.kind).collect();
    match &spec.proto.expect {
        Some(ks) => found == ks.iter().copied().collect(),
        None => r.verdict == Verdict::Holds,
    }
}

/// What the trials could not do within what was left of the time bound.
#[derive(Clone, Debug, Default)]
pub struct Skipped {
    pub candidates: usize,
}

/// Try each candidate of `spec` one step smaller within `budget_states` states (and two
/// seconds) each, within `seconds_left` in all; the best first, and how many candidates the
/// time bound left untried. The trials run under the search's own memory bound
/// (`max_memory_bytes`, on the resident memory of the process, which still holds what the search
/// left): a hint must not take a command past the bound its search kept.
pub fn suggest(
    spec: &Spec,
    overrides: &[(String, i64)],
    budget_states: usize,
    seconds_left: Option<f64>,
    max_memory_bytes: usize,
) -> (Vec<Shrink>, Skipped) {
    let start = Instant::now();
    let left = || seconds_left.map(|s| s - start.elapsed().as_secs_f64());
    let mut skipped = Skipped::default();
    let mut out = Vec::new();
    let mut run = |what: String, from: i64, to: i64, ast: &phasecheck_model::lang::ast::Program, ov: &[(String, i64)]| {
        let seconds = match left() {
            Some(l) if l < 0.05 => {
                skipped.candidates += 1;
                return;
            }
            Some(l) => l.min(2.0),
            None => 2.0,
        };
        let opts = CheckOptions {
            max_states: Some(budget_states),
            max_seconds: Some(seconds),
            max_memory_bytes,
            ..Default::default()
        };
        let Ok(proto) = lower(ast, ov) else { return };
        let r = check(&Model::new(proto), &opts);
        let done = r.bound.is_none();
        if done && !keeps_meaning(spec, &r) {
            return;
        }
        out.push(Shrink {
            what,
            from,
            to,
            finished_in: done.then_some(r.stats.states),
            depth: r.stats.depth,
            verdict: done.then_some(r.verdict),
        });
    };
    let shape = shape_params(&spec.ast);
    let current: Vec<(String, i64)> = spec.proto.params.clone();
    for (name, v) in &current {
        if !shape.contains(name) {
            continue;
        }
        let Some(to) = smaller(*v) else { continue };
        let mut ov: Vec<(String, i64)> = overrides.iter().filter(|(n, _)| n != name).cloned().collect();
        ov.push((name.clone(), to));
        run(format!("param {name}"), *v, to, &spec.ast, &ov);
    }
    for (i, item) in spec.ast.items.iter().enumerate() {
        let Item::Role(r) = item else { continue };
        let ExprKind::Int(v) = r.count.kind else { continue };
        let mut ignored = BTreeSet::new();
        let mut names_a_thread = false;
        repetition_names(&r.body, &mut ignored, &mut names_a_thread);
        let Some(to) = smaller(v).filter(|_| !names_a_thread) else {
            continue;
        };
        let mut ast = spec.ast.clone();
        if let Item::Role(rr) = &mut ast.items[i] {
            rr.count.kind = ExprKind::Int(to);
        }
        run(format!("role {}", r.name.name), v, to, &ast, overrides);
    }
    out.sort_by(|a, b| match (a.finished_in, b.finished_in) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => b.depth.cmp(&a.depth),
    });
    (out, skipped)
}

/// The suggestion in words, at most three candidates. `step_budget`: the search stopped because
/// one step ran past the step budget, which no flag raises.
pub fn describe(s: &[Shrink], skipped: &Skipped, step_budget: bool) -> String {
    if skipped.candidates > 0 && s.is_empty() {
        return format!(
            "hint: skipped ({} candidate(s) untried): the search used the whole --max-seconds bound; raise it, or shrink a loop bound or the stage count",
            skipped.candidates
        );
    }
    if s.is_empty() {
        return if step_budget {
            "hint: no loop bound, stage count or role of interchangeable threads can be shrunk, and the step budget cannot be raised: give the long local loop a smaller bound or a visible statement".into()
        } else {
            "hint: no loop bound, stage count or role of interchangeable threads can be shrunk without changing the protocol; raise the bound instead".into()
        };
    }
    let items: Vec<String> = s
        .iter()
        .take(3)
        .map(|c| {
            let how = match (c.finished_in, c.verdict) {
                (Some(n), Some(v)) => format!(
                    "finishes in {n} states ({})",
                    match v {
                        Verdict::Holds => "holds",
                        Verdict::Violated => "violated",
                        Verdict::Incomplete => "incomplete",
                        Verdict::InternalError => "internal error",
                    }
                ),
                _ => format!("depth {} within the trial budget", c.depth),
            };
            format!("{} {} -> {}: {how}", c.what, c.from, c.to)
        })
        .collect();
    let untried = if skipped.candidates > 0 {
        format!("\n  ({} more candidate(s) untried: the time bound ran out)", skipped.candidates)
    } else {
        String::new()
    };
    format!(
        "hint: shrink first what helps most (each tried one step smaller; a trial that changed the verdict is not shown):\n  {}{untried}",
        items.join("\n  ")
    )
}
