//! What to shrink when a search hits its bound (verdict `incomplete`).
//!
//! The state space grows with every parameter and role size, but not equally, and which one
//! dominates depends on the protocol. Rather than guess, each candidate (a parameter, or a role
//! whose size is a literal) is tried one step smaller with a small budget, and the candidates
//! are ranked by what that bought: finishing at all (fewest states first), else how deep the
//! search got within the same budget (a smaller branching factor reaches deeper).

use crate::load::Spec;
use phasecheck_model::lang::ast::{ExprKind, Item};
use phasecheck_model::lower::lower;
use phasecheck_model::step::Model;
use phasecheck_verifier::{check, CheckOptions, Verdict};

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

/// Try each candidate of `spec` one step smaller within `budget_states` states (and two
/// seconds) each; the best first.
pub fn suggest(spec: &Spec, overrides: &[(String, i64)], budget_states: usize) -> Vec<Shrink> {
    let opts = CheckOptions {
        max_states: Some(budget_states),
        max_seconds: Some(2.0),
        ..Default::default()
    };
    let mut out = Vec::new();
    let mut run = |what: String, from: i64, to: i64, ast: &phasecheck_model::lang::ast::Program, ov: &[(String, i64)]| {
        let Ok(proto) = lower(ast, ov) else { return };
        let r = check(&Model::new(proto), &opts);
        let done = r.bound.is_none();
        out.push(Shrink {
            what,
            from,
            to,
            finished_in: done.then_some(r.stats.states),
            depth: r.stats.depth,
            verdict: done.then_some(r.verdict),
        });
    };
    let current: Vec<(String, i64)> = spec.proto.params.clone();
    for (name, v) in &current {
        let Some(to) = smaller(*v) else { continue };
        let mut ov: Vec<(String, i64)> = overrides.iter().filter(|(n, _)| n != name).cloned().collect();
        ov.push((name.clone(), to));
        run(format!("param {name}"), *v, to, &spec.ast, &ov);
    }
    for (i, item) in spec.ast.items.iter().enumerate() {
        let Item::Role(r) = item else { continue };
        let ExprKind::Int(v) = r.count.kind else { continue };
        let Some(to) = smaller(v) else { continue };
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
    out
}

/// The suggestion in words, at most three candidates. `step_budget`: the search stopped because
/// one step ran past the step budget, which no flag raises.
pub fn describe(s: &[Shrink], step_budget: bool) -> String {
    if s.is_empty() {
        return if step_budget {
            "hint: no parameter or literal role size can be shrunk, and the step budget cannot be raised: give the long local loop a smaller bound or a visible statement".into()
        } else {
            "hint: no parameter or literal role size can be shrunk; raise the bound instead".into()
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
    format!(
        "hint: shrink first what helps most (each tried one step smaller):\n  {}",
        items.join("\n  ")
    )
}
