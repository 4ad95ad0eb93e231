//! CI re-judges the newest committed H200 results under the current model. Every case must keep
//! its verdict: a case judged within (old `observed_within_model: true`) stays within, or becomes
//! `unchecked` only if results/unchecked.txt lists it with its reason; nothing may become
//! OUTSIDE, and every allowlist line must still apply. The model's enumeration of a spec gets a
//! generous budget, once per spec (the cache in `rejudge`); a spec that still does not fit it on
//! a loaded machine is a skip, counted and printed, never a failure and never agreement
//! (PHASECHECK_REJUDGE_FULL=1 gives every spec ten minutes and fails on any skip).

/// The allocator the `phasecheck` binary searches with (src/main.rs), so that the searches of
/// this test cost what they cost users (the system allocator made them slower).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use phasecheck_gpu::compare::Verdict;
use phasecheck_gpu::plan::Budget;
use phasecheck_gpu::rejudge::{rejudge_file, Options};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// The newest committed H200 reports (the run of the final code: the library, the repros and the
/// real tiles in one command, timed; the real shapes in another) and their numbers of cases.
const REPORTS: &[(&str, usize)] = &[
    ("gpu-conformance/results/2026-12-03-h200-final4.json", 1234),
    ("gpu-conformance/results/2026-12-03-h200-final4-realshape.json", 46),
    ("gpu-conformance/results/2026-12-03-h200-cluster-named-1.json", 12),
];
const ALLOW: &str = "gpu-conformance/results/unchecked.txt";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `unchecked SPEC BACKEND MODE [TRACE]: reason` lines (and `budget SPEC: reason` lines, which
/// name specs known to need more than a few seconds: informative only).
fn allowlist() -> (BTreeMap<String, String>, BTreeMap<String, String>, BTreeMap<String, String>) {
    let text = std::fs::read_to_string(root().join(ALLOW)).expect("the allowlist exists");
    let (mut unchecked, mut budget, mut outside) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (key, why) = line.split_once(": ").unwrap_or_else(|| panic!("no `: reason` in `{line}`"));
        assert!(!why.trim().is_empty(), "no reason in `{line}`");
        if let Some(k) = key.strip_prefix("unchecked ") {
            unchecked.insert(k.to_string(), why.to_string());
        } else if let Some(k) = key.strip_prefix("budget ") {
            budget.insert(k.to_string(), why.to_string());
        } else if let Some(k) = key.strip_prefix("outside ") {
            outside.insert(k.to_string(), why.to_string());
        } else {
            panic!("a line is `unchecked ...`, `budget ...` or `outside ...`: `{line}`");
        }
    }
    (unchecked, budget, outside)
}

#[test]
fn the_committed_h200_results_keep_their_verdicts() {
    let full = std::env::var("PHASECHECK_REJUDGE_FULL").is_ok_and(|v| v == "1");
    let (allowed_unchecked, known_slow, known_outside) = allowlist();
    let o = Options {
        root: root(),
        traces: Some(root().join("counterexamples")),
        budget: Budget {
            outcome_seconds: if full { 600.0 } else { 30.0 },
            outcome_states: 1_000_000,
            check_seconds: 10.0,
            ..Budget::default()
        },
    };
    let t = Instant::now();
    let mut cases = Vec::new();
    let mut outside_counted = 0;
    for &(path, count) in REPORTS {
        let (c, report) = rejudge_file(&root().join(path), &o).unwrap();
        assert_eq!(c.len(), count, "{path}");
        outside_counted += report.count(Verdict::Outside);
        cases.extend(c);
    }
    eprintln!("re-judged {} cases in {:.1} s", cases.len(), t.elapsed().as_secs_f64());
    let mut problems = Vec::new();
    let mut used_unchecked = Vec::new();
    let mut skipped = Vec::new();
    for r in &cases {
        let c = &r.case;
        let trace = c.replay.as_ref().map(|i| format!(" {}", i.trace)).unwrap_or_default();
        let key = format!("{} {} {}{trace}", c.spec, c.backend, c.mode);
        match (r.old(), c.verdict) {
            (None, None) => {}
            (None, Some(v)) => problems.push(format!("{key}: was not judged, now {}", v.name())),
            (Some(old), None) => {
                if !full && c.why.starts_with("not run (budget") {
                    skipped.push(format!("{key} (was {}): {}", old.name(), c.why));
                } else {
                    problems.push(format!("{key}: was {}, now not judged: {}", old.name(), c.why));
                }
            }
            (Some(old), Some(new)) if old == new => {}
            // An enumeration the budget stopped judges only what it explored: the rest is
            // undecided (unchecked), which is the machine's load, as a skip is.
            (Some(old), Some(_)) if !full && c.why.contains("enumeration stopped at its budget") => {
                skipped.push(format!("{key} (was {}): {}", old.name(), c.why));
            }
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
        // A line whose case was skipped for the budget has not been tried, not failed.
        if !used_unchecked.contains(k) && !skipped.iter().any(|s| s.starts_with(&format!("{k} (was"))) {
            problems.push(format!("{ALLOW} lists `{k}`, which is no longer unchecked: remove it"));
        }
    }
    // A skip is the machine's load, not the model's: said, not failed (the full run judges them).
    if !skipped.is_empty() {
        eprintln!(
            "{} cases not re-judged within the budget ({} of them on specs {ALLOW} names as slow):\n{}",
            skipped.len(),
            skipped
                .iter()
                .filter(|k| known_slow.keys().any(|s| k.starts_with(s.as_str())))
                .count(),
            skipped.join("\n")
        );
    }
    // The report's OUTSIDE cases are the ones the allowlist names, with the finding behind each
    // (docs/hardware-notes.md); any other is a disagreement nobody has explained.
    let outside: Vec<String> = cases
        .iter()
        .filter(|r| r.case.verdict == Some(Verdict::Outside))
        .map(|r| format!("{} {} {}", r.case.spec, r.case.backend, r.case.mode))
        .collect();
    assert_eq!(outside_counted, outside.len());
    for k in &outside {
        assert!(known_outside.contains_key(k), "OUTSIDE and not explained in {ALLOW}: {k}");
    }
    for k in known_outside.keys() {
        // A case skipped for the budget has not been re-judged (the full run judges it).
        let was_skipped = skipped.iter().any(|s| s.starts_with(&format!("{k} (was")));
        assert!(
            outside.contains(k) || was_skipped,
            "{ALLOW} lists `outside {k}`, which is no longer OUTSIDE: remove it"
        );
    }
    assert!(problems.is_empty(), "{} verdicts changed:\n{}", problems.len(), problems.join("\n"));
}
