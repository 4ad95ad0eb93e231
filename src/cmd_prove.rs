//! `phasecheck prove` and `phasecheck repair`: the Z3 side of the project (crate
//! `phasecheck-smt`), printed. Exit codes: 0 proved (repair: a fix found and confirmed), 1
//! refuted and confirmed by the explicit search, 2 bad input, 3 unknown.

use crate::load;
use crate::report;
use phasecheck_model::lang::ast::Span;
use phasecheck_model::lang::diag::line_col;
use phasecheck_smt::{self as smt, Outcome, ProveReport, Range};
use phasecheck_verifier::Verdict;
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ProveArgs {
    /// The `.phase` file.
    path: PathBuf,
    /// A parameter's range, or a role's thread count: NAME=LO..=HI (repeatable). Parameters
    /// without a range keep their value (default or --param).
    #[arg(long = "range", value_name = "NAME=LO..=HI", value_parser = smt::parse_range)]
    ranges: Vec<Range>,
    /// Fix a parameter: NAME=VALUE (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = load::parse_override)]
    params: Vec<(String, i64)>,
    /// Also run the explicit search on the instance the file declares (defaults and --param)
    /// and combine: interleavings and races there, counting laws for the whole range.
    #[arg(long)]
    with_instance: bool,
    /// Per-query Z3 time limit in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    timeout_ms: u32,
    #[arg(long, value_enum, default_value_t = crate::Format::Text)]
    format: crate::Format,
    #[command(flatten)]
    bounds: crate::limits::ProcessBounds,
}

#[derive(clap::Args)]
pub struct RepairArgs {
    /// The `.phase` file.
    path: PathBuf,
    /// Ranges the repaired protocol must satisfy the counting laws for (as for `prove`).
    #[arg(long = "range", value_name = "NAME=LO..=HI", value_parser = smt::parse_range)]
    ranges: Vec<Range>,
    /// How many ranked repairs to print at most.
    #[arg(long, default_value_t = 3)]
    max: usize,
    #[command(flatten)]
    bounds: crate::limits::ProcessBounds,
}

fn at(spec: &load::Spec, span: Span) -> String {
    let (line, col) = line_col(&spec.source, span.start as usize);
    let text = spec.source.lines().nth(line - 1).unwrap_or("").trim();
    format!("{}:{line}:{col} | {text}", spec.display)
}

/// The program with `--param` values written into the declarations, so that the prover and the
/// instance agree on the fixed parameters.
fn with_params(spec: &load::Spec, params: &[(String, i64)]) -> phasecheck_model::lang::ast::Program {
    let mut ast = spec.ast.clone();
    for item in ast.items.iter_mut() {
        if let phasecheck_model::lang::ast::Item::Param(p) = item {
            if let Some((_, v)) = params.iter().rev().find(|(n, _)| *n == p.name.name) {
                p.value.kind = phasecheck_model::lang::ast::ExprKind::Int(*v);
            }
        }
    }
    ast
}

const COVERS: &str = "the counting laws above, for every value in range (round discipline: a thread's j-th arrival on a barrier belongs to phase j; docs/smt.md)";
const NOT_COVERED: &str = "interleavings, data races, stale reads, missing waits, lifetimes, completion functions: only the explicit search covers those, at one instance (`phasecheck check`, or `prove --with-instance`)";

pub fn prove(a: ProveArgs) -> ExitCode {
    // Z3 does not poll the bounds: a passed one ends the process (incomplete, exit 3).
    crate::limits::start_unpolled(
        &a.bounds,
        a.format == crate::Format::Json,
        &a.path.display().to_string(),
        "while proving (a Z3 query or the instance's search)",
    );
    let spec = match load::load(&a.path, &a.params) {
        Ok(s) => s,
        Err(e) => return crate::bad_input(&e),
    };
    for r in &a.ranges {
        if !spec.ast.params().any(|p| p.name.name == r.name) && !spec.ast.roles().any(|x| x.name.name == r.name) {
            return crate::bad_input(&format!(
                "error[E100]: `--range {}` names no parameter or role of protocol `{}`\n",
                r.name, spec.ast.name.name
            ));
        }
        if r.lo > r.hi {
            return crate::bad_input(&format!("error[E100]: `--range {}={}..={}` is empty\n", r.name, r.lo, r.hi));
        }
    }
    let program = with_params(&spec, &a.params);
    let opts = smt::Options {
        ranges: a.ranges.clone(),
        timeout_ms: a.timeout_ms,
        ..smt::Options::default()
    };
    let rep = smt::prove(&program, &opts);
    let mut text = String::new();
    let mut js = json!({
        "file": spec.display,
        "protocol": spec.ast.name.name,
        "ranges": rep.ranges,
        "enumerated": rep.enumerated,
        "cases": rep.cases,
        "queries": rep.queries,
        "seconds": rep.seconds,
        "laws": rep.laws.iter().map(|(l, g)| json!({"law": l.name(), "barriers": g})).collect::<Vec<_>>(),
    });
    header(&mut text, &spec, &rep);
    let mut code = match &rep.outcome {
        Outcome::Proved => {
            let _ = writeln!(
                text,
                "verdict:  proved ({} case{}, {} Z3 queries, {:.2} s)",
                rep.cases,
                if rep.cases == 1 { "" } else { "s" },
                rep.queries,
                rep.seconds
            );
            js["verdict"] = json!("proved");
            0
        }
        Outcome::Unknown { reason, span } => {
            let _ = writeln!(text, "verdict:  unknown: {reason}");
            if let Some(sp) = span {
                let _ = writeln!(text, "  at {}", at(&spec, *sp));
                js["line"] = json!(line_col(&spec.source, sp.start as usize).0);
            }
            js["verdict"] = json!("unknown");
            js["reason"] = json!(reason);
            3
        }
        Outcome::Refuted(cx) => {
            let assignment = cx.assignment.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(" ");
            if cx.suspect.is_some() {
                // no law is refuted; the encoding's obligation gave a run that may violate one
                let _ = writeln!(text, "suspect:  law {} on `{}`: {}", cx.law.name(), cx.group, cx.what);
            } else {
                let _ = writeln!(text, "violated: law {} on `{}`: {}", cx.law.name(), cx.group, cx.what);
            }
            let _ = writeln!(
                text,
                "  at:     {}",
                if assignment.is_empty() {
                    "(the declared values)".to_string()
                } else {
                    assignment.clone()
                }
            );
            let _ = writeln!(
                text,
                "  values: {}",
                cx.details.iter().map(|(l, v)| format!("{l}={v}")).collect::<Vec<_>>().join(", ")
            );
            for sp in &cx.spans {
                let _ = writeln!(text, "  line    {}", at(&spec, *sp));
            }
            js["law"] = json!(cx.law.name());
            if cx.suspect.is_some() {
                js["suspect"] = json!(true);
            }
            js["barrier"] = json!(cx.group);
            js["what"] = json!(cx.what);
            js["assignment"] = json!(cx
                .assignment
                .iter()
                .map(|(n, v)| json!({"name": n, "value": v}))
                .collect::<Vec<_>>());
            js["details"] = json!(cx.details.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>());
            // The counterexample is an instance of the program Z3 saw: the `--param` values are
            // written into it, and the ranged values Z3 found replace those.
            let pinned = load::Spec {
                path: spec.path.clone(),
                display: spec.display.clone(),
                source: spec.source.clone(),
                ast: program.clone(),
                proto: spec.proto.clone(),
            };
            match smt::instance(&pinned, &cx.assignment) {
                Err(e) => {
                    let _ = writeln!(
                        text,
                        "verdict:  unknown: the counterexample is not an instance the explicit checker can run:\n{e}"
                    );
                    js["verdict"] = json!("unknown");
                    3
                }
                Ok(inst) => {
                    let (model, r) = smt::explicit(&inst);
                    let kinds = smt::confirming_kinds(cx, &r);
                    js["explicit"] = json!({"verdict": report::verdict_name(r.verdict), "kinds": r.violations.iter().map(|v| v.kind.name()).collect::<Vec<_>>()});
                    if !kinds.is_empty() {
                        let _ = writeln!(
                            text,
                            "verdict:  refuted; the explicit search confirms it on that instance ({})",
                            kinds.join(", ")
                        );
                        let _ = writeln!(text);
                        let _ = write!(text, "{}", report::render_text(&inst, &model, &r));
                        js["verdict"] = json!("refuted");
                        1
                    } else {
                        let why = match r.verdict {
                            Verdict::Incomplete => "the explicit search hit its bound on that instance before confirming it".to_string(),
                            // an obligation's model that the search does not confirm: the
                            // obligation is what stands in the way of a proof
                            _ if cx.suspect.is_some() => cx.suspect.clone().unwrap_or_default(),
                            _ => format!(
                                "the explicit search finds no counting violation on that instance (found: {}); the protocol is outside the round discipline the laws assume",
                                if r.violations.is_empty() { "nothing".to_string() } else { r.violations.iter().map(|v| v.kind.name()).collect::<Vec<_>>().join(", ") }
                            ),
                        };
                        let _ = writeln!(text, "verdict:  unknown: {why}");
                        js["verdict"] = json!("unknown");
                        js["reason"] = json!(why);
                        3
                    }
                }
            }
        }
    };
    let _ = writeln!(text, "covers:   {COVERS}");
    let _ = writeln!(text, "not:      {NOT_COVERED}");
    let outside = expected_outside_laws(&spec);
    if !outside.is_empty() {
        let _ = writeln!(
            text,
            "expect:   the file expects {}: outside the counting laws, so `prove` says nothing about {}",
            outside.join(", "),
            if outside.len() == 1 { "it" } else { "them" }
        );
    }
    js["expect_outside_laws"] = json!(outside);
    if a.with_instance {
        let (model, r) = smt::explicit(&spec);
        js["instance"] =
            json!({"verdict": report::verdict_name(r.verdict), "kinds": r.violations.iter().map(|v| v.kind.name()).collect::<Vec<_>>()});
        let _ = writeln!(text, "\nexplicit search at the declared instance (every interleaving):");
        let _ = write!(text, "{}", report::render_text(&spec, &model, &r));
        code = match (code, r.verdict) {
            (1, _) | (_, Verdict::Violated) => 1,
            (3, _) | (_, Verdict::Incomplete) => 3,
            _ => 0,
        };
        let _ = writeln!(
            text,
            "combined: {}",
            match code {
                0 => "holds (laws for the whole range, everything at the instance)",
                1 => "violated",
                _ => "unknown",
            }
        );
    }
    match a.format {
        crate::Format::Text => print!("{text}"),
        crate::Format::Json => println!("{js}"),
    }
    ExitCode::from(code)
}

/// The kinds of the file's `expect` line that no counting law speaks about (stale-read,
/// lifetime, data-race, ...): a proof of the laws neither confirms nor denies them.
fn expected_outside_laws(spec: &load::Spec) -> Vec<&'static str> {
    match &spec.ast.expect {
        Some(phasecheck_model::lang::ast::Expect::Kinds(ks)) => {
            let mut v: Vec<&'static str> = ks
                .iter()
                .map(|(k, _)| k.name())
                .filter(|k| !smt::COUNTING_KINDS.contains(k))
                .collect();
            v.dedup();
            v
        }
        _ => Vec::new(),
    }
}

fn header(out: &mut String, spec: &load::Spec, rep: &ProveReport) {
    let _ = writeln!(out, "== {} ({})", spec.ast.name.name, spec.display);
    let ranges = if rep.ranges.is_empty() {
        "(none: the declared values)".to_string()
    } else {
        rep.ranges
            .iter()
            .map(|r| format!("{}={}..={}", r.name, r.lo, r.hi))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let _ = writeln!(out, "ranges:   {ranges}; other parameters and roles at their declared values");
    if !rep.enumerated.is_empty() && rep.cases > 0 {
        let _ = writeln!(
            out,
            "cases:    {} take each value of their range in turn ({} cases)",
            rep.enumerated.join(", "),
            rep.cases
        );
    }
    if !rep.laws.is_empty() {
        let _ = writeln!(out, "laws proven:");
        for (l, groups) in &rep.laws {
            let _ = writeln!(out, "  {:<12} {:<16} {}", l.name(), groups.join(", "), l.statement());
        }
    }
}

pub fn repair(a: RepairArgs) -> ExitCode {
    crate::limits::start_unpolled(
        &a.bounds,
        false,
        &a.path.display().to_string(),
        "while searching for a repair (Z3 queries and confirming searches)",
    );
    let spec = match load::load(&a.path, &[]) {
        Ok(s) => s,
        Err(e) => return crate::bad_input(&e),
    };
    let res = smt::repair::repair(&spec, &a.ranges);
    match res {
        Err(why) => {
            println!("== {} ({})\nno repair: {why}", spec.ast.name.name, spec.display);
            ExitCode::from(3)
        }
        Ok(fixes) if fixes.is_empty() => {
            println!(
                "== {} ({})\nno repair: no single-constant change makes the counting laws hold and passes the explicit search",
                spec.ast.name.name, spec.display
            );
            ExitCode::from(3)
        }
        Ok(fixes) => {
            println!("== {} ({})", spec.ast.name.name, spec.display);
            for (i, f) in fixes.iter().take(a.max).enumerate() {
                println!("repair {} of {}: {}", i + 1, fixes.len().min(a.max), f.summary);
                print!("{}", f.diff);
            }
            ExitCode::SUCCESS
        }
    }
}
