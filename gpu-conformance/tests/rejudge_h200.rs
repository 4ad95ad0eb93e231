//! CI re-judges the committed H200 results under the current model. Every case
//! must keep its verdict: a case judged within (old `observed_within_model: true`) stays within,
//! or becomes `unchecked` only if results/unchecked.txt lists it with its reason; nothing may
//! become OUTSIDE, nothing judged may stop being judged unless the allowlist's `budget` lines say
//! so (those run with PHASECHECK_REJUDGE_FULL=1), and every allowlist line must still apply.

use phasecheck_gpu::compare::Verdict;
use phasecheck_gpu::plan::Budget;
use phasecheck_gpu::rejudge::{rejudge_file, Options};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

const REPORT: &str = "gpu-conformance/results/2026-12-01-h200.json";
const ALLOW: &str = "gpu-conformance/results/unchecked.txt";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `unchecked SPEC BACKEND MODE [TRACE]: reason` and `budget SPEC: reason` lines.
fn allowlist() -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let text = std::fs::read_to_string(root().join(ALLOW)).expect("the allowlist exists");
    let (mut unchecked, mut budget) = (BTreeMap::new(), BTreeMap::new());
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (key, why) = line.split_once(": ").unwrap_or_else(|| panic!("no `: reason` in `{line}`"));
        assert!(!why.trim().is_empty(), "no reason in `{line}`");
        if let Some(k) = key.strip_prefix("unchecked ") {
            unchecked.insert(k.to_string(), why.to_string());
        } else if let Some(k) = key.strip_prefix("budget ") {
            budget.insert(k.to_string(), why.to_string());
        } else {
            panic!("a line is `unchecked ...` or `budget ...`: `{line}`");
        }
    }
    (unchecked, budget)
}

#[test]
fn the_committed_h200_results_keep_their_verdicts() {
    let full = std::env::var("PHASECHECK_REJUDGE_FULL").is_ok_and(|v| v == "1");
    let (allowed_unchecked, budget_skips) = allowlist();
    let o = Options {
        root: root(),
        traces: Some(root().join("counterexamples")),
        budget: Budget {
            outcome_seconds: if full { 600.0 } else { 4.0 },
            outcome_states: 1_000_000,
            check_seconds: 10.0,
            ..Budget::default()
        },
    };
    let t = Instant::now();
    let (cases, report) = rejudge_file(&root().join(REPORT), &o).unwrap();
    eprintln!("re-judged {} cases in {:.1} s", cases.len(), t.elapsed().as_secs_f64());
    assert_eq!(cases.len(), 776);
    let mut problems = Vec::new();
    let mut used_unchecked = Vec::new();
    let mut used_budget = Vec::new();
    for r in &cases {
        let c = &r.case;
        let trace = c.replay.as_ref().map(|i| format!(" {}", i.trace)).unwrap_or_default();
        let key = format!("{} {} {}{trace}", c.spec, c.backend, c.mode);
        match (r.old(), c.verdict) {
            (None, None) => {}
            (None, Some(v)) => problems.push(format!("{key}: was not judged, now {}", v.name())),
            (Some(old), None) => {
                if budget_skips.contains_key(&c.spec) && !full && c.why.starts_with("not run (budget") {
                    used_budget.push(c.spec.clone());
                } else {
                    problems.push(format!("{key}: was {}, now not judged: {}", old.name(), c.why));
                }
            }
            (Some(old), Some(new)) if old == new => {}
            (Some(Verdict::Within), Some(Verdict::Unchecked)) => {
                if allowed_unchecked.contains_key(&key) {
                    used_unchecked.push(key.clone());
                } else {
                    problems.push(format!(
                        "{key}: within before, unchecked now ({}); list it in {ALLOW} with its reason",
                        c.why
                    ));
                }
            }
            (Some(old), Some(new)) => problems.push(format!("{key}: was {}, now {}: {}", old.name(), new.name(), c.note)),
        }
    }
    for k in allowed_unchecked.keys() {
        if !used_unchecked.contains(k) {
            problems.push(format!("{ALLOW} lists `{k}`, which is no longer unchecked: remove it"));
        }
    }
    // A `budget` line may go unused: whether an enumeration fits a few seconds depends on the
    // machine's load, and the full run judges those specs either way.
    for k in budget_skips.keys() {
        if !full && !used_budget.contains(k) {
            eprintln!("{ALLOW}: `budget {k}` fitted the budget on this run");
        }
    }
    assert_eq!(report.count(Verdict::Outside), 0);
    assert!(problems.is_empty(), "{} verdicts changed:\n{}", problems.len(), problems.join("\n"));
}
