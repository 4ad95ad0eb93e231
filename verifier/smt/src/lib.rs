//! Z3 proofs of a protocol's counting laws for every parameter value in given ranges, an
//! independent check of the explicit model, and one-constant repairs.
//!
//! The explicit search (`phasecheck check`) proves one instance, every interleaving. The counting
//! laws — arrivals per phase against the expected count (drops included), bytes expected against
//! bytes landed per phase, the phase each wait names against the phase it needs — are arithmetic
//! in the parameters and loop variables, so they can be proved for all values at once. This crate
//! encodes them (`summary` → `encode`), asks Z3 (`solver`, the only module that sees Z3 types),
//! and re-checks every counterexample with the explicit search on that instance before calling
//! the protocol refuted. docs/smt.md is the reviewer's page.

pub mod encode;
pub mod repair;
mod solver;
pub mod summary;
pub mod sym;

pub use encode::Law;

use encode::{Encoder, Goal};
use phasecheck_model::lang::ast::{self, ExprKind, Span};
use phasecheck_model::rt::Model;
use phasecheck_model::spec::Spec;
use phasecheck_verifier::{check, CheckOptions, Report, Verdict};
use std::collections::BTreeMap;
use summary::{Binding, BuildError, Builder};

/// `NAME=LO..=HI`: a parameter, or a role (its thread count).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    pub name: String,
    pub lo: i64,
    pub hi: i64,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub ranges: Vec<Range>,
    /// Per Z3 query.
    pub timeout_ms: u32,
    /// A ranged parameter that must be enumerated (it divides, sizes an array, ...) may take at
    /// most this many values over all such parameters together.
    pub max_cases: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            ranges: Vec::new(),
            timeout_ms: 30_000,
            max_cases: 4096,
        }
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Counterexample {
    pub law: Law,
    pub group: String,
    pub what: String,
    /// Values of the ranged parameters and role counts (role counts as `ROLE.count`).
    pub assignment: Vec<(String, i64)>,
    /// What the law compared, at the counterexample.
    pub details: Vec<(String, i64)>,
    #[serde(skip)]
    pub spans: Vec<Span>,
    /// Set when no law is refuted and this is the model of an obligation the encoding could not
    /// meet (`Goal::Suspect`): its reason, for the answer when the explicit search does not
    /// confirm it (then `unknown`, never `refuted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspect: Option<String>,
}

#[derive(Clone, Debug, serde::Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Outcome {
    Proved,
    Refuted(Counterexample),
    Unknown {
        reason: String,
        #[serde(skip)]
        span: Option<Span>,
    },
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ProveReport {
    pub outcome: Outcome,
    /// Laws proven, each with the barriers it was proven for (all, when proved).
    pub laws: Vec<(Law, Vec<String>)>,
    /// The ranges used (ranged parameters and role counts).
    pub ranges: Vec<Range>,
    /// Ranged parameters given each value of their range in turn (they divide, size arrays, ...).
    pub enumerated: Vec<String>,
    pub cases: usize,
    pub queries: usize,
    pub seconds: f64,
}

impl serde::Serialize for Range {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}={}..={}", self.name, self.lo, self.hi))
    }
}

/// The kinds of the explicit checker that come from counting: the ones `prove` speaks about.
pub const COUNTING_KINDS: [&str; 5] = ["deadlock", "over-arrival", "count-range", "tx-range", "stale-wait"];

/// Prove the counting laws of `program` for every value of the ranges.
pub fn prove(program: &ast::Program, opts: &Options) -> ProveReport {
    solver::with_session(opts.timeout_ms, |session| prove_in(program, opts, session))
}

fn prove_in(program: &ast::Program, opts: &Options, session: &solver::Session) -> ProveReport {
    let start = std::time::Instant::now();
    let mut report = ProveReport {
        outcome: Outcome::Proved,
        laws: Vec::new(),
        ranges: opts.ranges.clone(),
        enumerated: Vec::new(),
        cases: 0,
        queries: 0,
        seconds: 0.0,
    };
    let finish = |mut r: ProveReport, o: Outcome| {
        r.outcome = o;
        r.seconds = start.elapsed().as_secs_f64();
        r
    };
    for r in &opts.ranges {
        let known = program.params().any(|p| p.name.name == r.name) || program.roles().any(|x| x.name.name == r.name);
        if !known {
            return finish(
                report,
                Outcome::Unknown {
                    reason: format!(
                        "`--range {}` names no parameter or role of protocol `{}`",
                        r.name, program.name.name
                    ),
                    span: None,
                },
            );
        }
        if r.lo > r.hi {
            return finish(
                report,
                Outcome::Unknown {
                    reason: format!("the range of `{}` is empty", r.name),
                    span: None,
                },
            );
        }
    }
    let mut enumerate: Vec<String> = Vec::new();
    'restart: loop {
        let sizes: Vec<(String, i64, i64)> = enumerate
            .iter()
            .map(|n| {
                let r = opts.ranges.iter().find(|r| &r.name == n).unwrap();
                (n.clone(), r.lo, r.hi)
            })
            .collect();
        let total: u128 = sizes.iter().map(|(_, lo, hi)| (hi - lo + 1) as u128).product();
        if total > opts.max_cases as u128 {
            return finish(
                report,
                Outcome::Unknown {
                    reason: format!(
                        "{} must take each value of its range in turn (it divides a loop variable, sizes an array or a role that reads its identity, or is the trip count of a loop that assigns locals) and that makes {total} cases; narrow the ranges to at most {} cases",
                        enumerate.join(", "),
                        opts.max_cases
                    ),
                    span: None,
                },
            );
        }
        report.enumerated = enumerate.clone();
        let mut proven: BTreeMap<Law, std::collections::BTreeSet<String>> = BTreeMap::new();
        let (mut cases, mut queries) = (0usize, 0usize);
        let mut combo: Vec<i64> = sizes.iter().map(|s| s.1).collect();
        let mut refute_only: Option<summary::Unsupported> = None;
        let mut suspect: Option<Counterexample> = None;
        loop {
            let mut bind: BTreeMap<String, Binding> = BTreeMap::new();
            for r in &opts.ranges {
                bind.insert(r.name.clone(), Binding::Range(r.lo, r.hi));
            }
            for (i, (n, _, _)) in sizes.iter().enumerate() {
                bind.insert(n.clone(), Binding::Fixed(combo[i]));
            }
            // Loops are encoded symbolically; what that cannot express (loop-carried locals, a
            // loop under a condition, a return inside a loop) is unrolled when the bounds are
            // known constants, and otherwise reported with the symbolic encoding's reason.
            let summary = match Builder::build(program, &bind, false) {
                Ok(s) => Ok(s),
                Err(BuildError::Unsupported(u)) => match Builder::build(program, &bind, true) {
                    Ok(s) => Ok(s),
                    Err(BuildError::NeedConcrete(n, sp)) => Err(BuildError::NeedConcrete(n, sp)),
                    Err(BuildError::Unsupported(v)) => {
                        if std::env::var_os("PHASECHECK_SMT_DUMP").is_some() {
                            eprintln!("unrolled, the summary also fails: {}", v.why);
                        }
                        Err(BuildError::Unsupported(u))
                    }
                },
                Err(e) => Err(e),
            };
            let summary = match summary {
                Ok(s) => s,
                Err(BuildError::NeedConcrete(n, span)) => {
                    if enumerate.contains(&n) || !opts.ranges.iter().any(|r| r.name == n) {
                        return finish(
                            report,
                            Outcome::Unknown {
                                reason: format!("`{n}` must be a constant here"),
                                span: Some(span),
                            },
                        );
                    }
                    enumerate.push(n);
                    continue 'restart;
                }
                Err(BuildError::Unsupported(u)) => {
                    return finish(
                        report,
                        Outcome::Unknown {
                            reason: u.why,
                            span: Some(u.span),
                        },
                    )
                }
            };
            if refute_only.is_none() {
                refute_only = summary.refute_only.clone();
            }
            let qs = match Encoder::queries(&summary) {
                Ok((q, partial)) => {
                    if refute_only.is_none() {
                        refute_only = partial;
                    }
                    q
                }
                Err(u) => {
                    return finish(
                        report,
                        Outcome::Unknown {
                            reason: u.why,
                            span: Some(u.span),
                        },
                    )
                }
            };
            cases += 1;
            // obligations first: they say whether the encoding applies at all
            let mut ordered: Vec<&encode::Query> = qs
                .iter()
                .filter(|q| matches!(q.goal, Goal::Obligation(_) | Goal::Suspect(..)))
                .collect();
            ordered.extend(qs.iter().filter(|q| matches!(q.goal, Goal::Violation(_))));
            for q in ordered {
                queries += 1;
                let show: Vec<sym::T> = q.show.iter().map(|(_, t)| t.clone()).collect();
                let t0 = std::time::Instant::now();
                let answer = session.solve(&q.formula, &summary.symbols, &show);
                if std::env::var_os("PHASECHECK_SMT_TIMES").is_some() {
                    eprintln!("{:>8.3} s  {} {} {}", t0.elapsed().as_secs_f64(), law_of(&q.goal), q.group, q.what);
                }
                match answer {
                    solver::Answer::Unsat => {
                        if let Goal::Violation(l) = q.goal {
                            proven.entry(l).or_default().insert(q.group.clone());
                        }
                    }
                    solver::Answer::Unknown(why) => {
                        return finish(
                            report,
                            Outcome::Unknown {
                                reason: format!("Z3 could not decide a query of law {} on `{}`: {why}", law_of(&q.goal), q.group),
                                span: q.spans.first().copied(),
                            },
                        )
                    }
                    solver::Answer::Sat { values, symbols } => {
                        let mut assignment: Vec<(String, i64)> = sizes.iter().zip(&combo).map(|((n, _, _), v)| (n.clone(), *v)).collect();
                        for (n, v) in symbols {
                            let n = n.clone();
                            if !assignment.iter().any(|(m, _)| *m == n) {
                                assignment.push((n, v));
                            }
                        }
                        for (n, _, _) in &sizes {
                            if let Some(a) = assignment.iter_mut().find(|(m, _)| m == n) {
                                if program.roles().any(|r| &r.name.name == n) {
                                    a.0 = format!("{n}.count");
                                }
                            }
                        }
                        match &q.goal {
                            // The encoding may not describe every run here: no proof, but a
                            // refutation still stands once the explicit search confirms it.
                            Goal::Obligation(u) => {
                                if refute_only.is_none() {
                                    refute_only = Some(u.clone());
                                }
                            }
                            Goal::Suspect(law, u) => {
                                if refute_only.is_none() {
                                    refute_only = Some(u.clone());
                                }
                                suspect.get_or_insert(Counterexample {
                                    law: *law,
                                    group: q.group.clone(),
                                    what: u.why.clone(),
                                    assignment,
                                    details: q.show.iter().map(|(l, _)| l.clone()).zip(values).collect(),
                                    spans: q.spans.clone(),
                                    suspect: Some(u.why.clone()),
                                });
                            }
                            Goal::Violation(law) => {
                                report.cases = cases;
                                report.queries = queries;
                                return finish(
                                    report,
                                    Outcome::Refuted(Counterexample {
                                        law: *law,
                                        group: q.group.clone(),
                                        what: q.what.clone(),
                                        assignment,
                                        details: q.show.iter().map(|(l, _)| l.clone()).zip(values).collect(),
                                        spans: q.spans.clone(),
                                        suspect: None,
                                    }),
                                );
                            }
                        }
                    }
                }
            }
            // next combination
            let mut i = 0;
            loop {
                if i == sizes.len() {
                    report.laws = proven.into_iter().map(|(l, g)| (l, g.into_iter().collect())).collect();
                    report.cases = cases;
                    report.queries = queries;
                    if let Some(cx) = suspect {
                        return finish(report, Outcome::Refuted(cx));
                    }
                    if let Some(u) = refute_only {
                        return finish(
                            report,
                            Outcome::Unknown {
                                reason: u.why,
                                span: Some(u.span),
                            },
                        );
                    }
                    return finish(report, Outcome::Proved);
                }
                if combo[i] < sizes[i].2 {
                    combo[i] += 1;
                    break;
                }
                combo[i] = sizes[i].1;
                i += 1;
            }
        }
    }
}

fn law_of(g: &Goal) -> &'static str {
    match g {
        Goal::Violation(l) => l.name(),
        Goal::Obligation(_) | Goal::Suspect(..) => "(encoding check)",
    }
}

/// The spec at one assignment: ranged params become `--param` overrides, `ROLE.count` values
/// replace the role's declared size.
pub fn instance(spec: &Spec, assignment: &[(String, i64)]) -> Result<Spec, String> {
    let mut ast = spec.ast.clone();
    let mut overrides = Vec::new();
    for (n, v) in assignment {
        if let Some(role) = n.strip_suffix(".count") {
            for item in ast.items.iter_mut() {
                if let ast::Item::Role(r) = item {
                    if r.name.name == role {
                        r.count.kind = ExprKind::Int(*v);
                    }
                }
            }
        } else {
            overrides.push((n.clone(), *v));
        }
    }
    let proto = phasecheck_model::program::lower::lower(&ast, &overrides).map_err(|d| d.render(&spec.display, &spec.source))?;
    Ok(Spec {
        path: spec.path.clone(),
        display: spec.display.clone(),
        source: spec.source.clone(),
        ast,
        proto,
    })
}

/// The explicit search on an instance, bounded so that a large counterexample cannot hang `prove`.
pub fn explicit(spec: &Spec) -> (Model, Report) {
    let model = Model::new(spec.proto.clone());
    let opts = CheckOptions {
        max_states: Some(3_000_000),
        max_seconds: Some(60.0),
        ..CheckOptions::default()
    };
    let r = check(&model, &opts);
    (model, r)
}

/// Whether an explicit report shows a counting violation (what `prove` speaks about).
pub fn counting_kinds(r: &Report) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = r
        .violations
        .iter()
        .map(|f| f.kind.name())
        .filter(|k| COUNTING_KINDS.contains(k))
        .collect();
    v.dedup();
    v
}

/// A refutation is confirmed when the explicit search finds a counting violation on the instance.
pub fn confirmed(r: &Report) -> bool {
    r.verdict == Verdict::Violated && !counting_kinds(r).is_empty()
}

/// The kinds of the explicit report that confirm the counterexample `cx`: the counting kinds,
/// and the kinds its law shows up as (docs/smt.md: excess arrivals spill into the next phase
/// as missing-wait; unbalanced bytes nobody waits on are a lifetime). A `syncwarp` is modelled
/// as a barrier of the lanes its mask names; the explicit search reports lanes that never meet
/// there as the undefined behaviour it is (assertion), so that confirms an arrivals refutation
/// on it.
pub fn confirming_kinds(cx: &Counterexample, r: &Report) -> Vec<&'static str> {
    if r.verdict != Verdict::Violated {
        return Vec::new();
    }
    let syncwarp = cx.law == Law::Arrivals && cx.group.starts_with("syncwarp ");
    let mut v: Vec<&'static str> = r
        .violations
        .iter()
        .map(|f| f.kind.name())
        .filter(|k| COUNTING_KINDS.contains(k) || cx.law.explicit_kinds().contains(k) || (syncwarp && *k == "assertion"))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Parse `NAME=LO..=HI` (or `NAME=V` for a single value).
pub fn parse_range(s: &str) -> Result<Range, String> {
    let (name, rest) = s.split_once('=').ok_or_else(|| format!("`{s}` is not NAME=LO..=HI"))?;
    let num = |x: &str| -> Result<i64, String> {
        let t = x.trim().replace('_', "");
        let r = if let Some(h) = t.strip_prefix("0x") {
            i64::from_str_radix(h, 16)
        } else {
            t.parse::<i64>()
        };
        r.map_err(|_| format!("`{x}` is not an integer"))
    };
    let (lo, hi) = match rest.split_once("..=") {
        Some((a, b)) => (num(a)?, num(b)?),
        None => {
            let v = num(rest)?;
            (v, v)
        }
    };
    Ok(Range {
        name: name.trim().to_string(),
        lo,
        hi,
    })
}
