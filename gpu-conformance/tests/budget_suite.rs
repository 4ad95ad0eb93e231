//! A suite always finishes and reports. `gpu run --plan-only` (the library
//! entry point behind it) on a folder with a spec of ~10^6 model states and a spec whose model
//! fails (a planted mutant makes it break an internal rule) plans the first with the part of its
//! allowed outcomes enumerated within the budget (what that part does not hold is judged
//! unchecked, never OUTSIDE), records the second with its error, and writes a full report for the
//! others, within its budgets. No GPU, no NVRTC.

use phasecheck_gpu::plan::{Budget, Settings};
use phasecheck_gpu::report::Report;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// benches/double_buffer_scaling.phase with CONSUMERS = 6, ITERS = 8 baked in: 909,589 states
/// for the verifier.
fn big_spec() -> String {
    let src = std::fs::read_to_string(root().join("benches/double_buffer_scaling.phase")).unwrap();
    let src = src
        .replace("param ITERS = 8", "param ITERS = 8")
        .replace("param CONSUMERS = 2", "param CONSUMERS = 6");
    assert!(src.contains("param CONSUMERS = 6"));
    src
}

const NO_WAITS: &str = "protocol no_waits\nbarrier b count 1\nbuffer x bytes 16\nrole w[1] {\n  write(x, 1)\n  arrive(b)\n  read(x)\n}\n";

fn folder(name: &str, files: &[(&str, String)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pc-budget-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (f, text) in files {
        std::fs::write(dir.join(f), text).unwrap();
    }
    dir
}

fn run(dir: &Path, budget: Budget, mutant: Option<phasecheck_model::rt::Mutant>) -> (u8, Report, Duration) {
    let out = dir.join("report/plan.json");
    let s = Settings {
        paths: vec![dir.to_path_buf()],
        out: Some(out.clone()),
        budget,
        plan_only: true,
        mutant,
        traces: Some(root().join("counterexamples")),
        ..Default::default()
    };
    let t = Instant::now();
    let rc = phasecheck_gpu::runner::run(&s);
    let took = t.elapsed();
    let report: Report = serde_json::from_str(&std::fs::read_to_string(&out).expect("the report is written")).unwrap();
    assert!(out.with_extension("md").exists(), "the Markdown report is written too");
    (rc, report, took)
}

fn status<'a>(r: &'a Report, file: &str) -> &'a str {
    &r.specs
        .iter()
        .find(|s| s.spec.ends_with(file))
        .unwrap_or_else(|| panic!("no row for {file}"))
        .status
}

#[test]
fn a_spec_over_its_outcome_budget_is_planned_on_what_was_enumerated_and_a_failing_model_leaves_a_report() {
    let double_buffer = std::fs::read_to_string(root().join("specs/guide/double_buffer.phase")).unwrap();
    let dir = folder(
        "mixed",
        &[
            ("big.phase", big_spec()),
            ("double_buffer.phase", double_buffer.clone()),
            ("no_waits.phase", NO_WAITS.to_string()),
        ],
    );
    let budget = Budget {
        outcome_states: 50_000,
        outcome_seconds: 5.0,
        check_seconds: 5.0,
        ..Budget::default()
    };
    let (rc, r, took) = run(&dir, budget.clone(), None);
    assert_eq!(rc, 0);
    assert!(took < Duration::from_secs(40), "took {took:?}");
    assert_eq!(r.specs.len(), 3);
    assert_eq!(status(&r, "big.phase"), "planned");
    let big = r.specs.iter().find(|s| s.spec.ends_with("big.phase")).unwrap();
    assert!(big.allowed.contains("incomplete"), "{}", big.allowed);
    assert_eq!(status(&r, "double_buffer.phase"), "planned");
    let db = r.specs.iter().find(|s| s.spec.ends_with("double_buffer.phase")).unwrap();
    assert_eq!(db.allowed, "1 outcome");
    assert_eq!(db.traces.len(), 1, "{:?}", db.traces);
    // Every (spec, backend, mode) has a case, with why nothing was judged.
    assert_eq!(r.cases.len(), 3 * 2 * 2);
    for c in &r.cases {
        assert!(c.verdict.is_none());
        assert!(!c.why.is_empty(), "{c:?}");
    }
    let big: Vec<_> = r.cases.iter().filter(|c| c.spec.ends_with("big.phase")).collect();
    assert!(
        big.iter().all(|c| c.note.contains("allowed outcomes incomplete: the enumeration")),
        "{big:?}"
    );
    let md = std::fs::read_to_string(dir.join("report/plan.md")).unwrap();
    assert!(!md.contains("not run (budget"), "{md}");

    // The same folder with a model that breaks its own wait rule: the specs that wait fail with the
    // model's error; the one without waits is still planned.
    let (rc, r, took) = run(&dir, budget, Some(phasecheck_model::rt::Mutant::WaitAlwaysReady));
    assert_eq!(rc, 0);
    assert!(took < Duration::from_secs(40), "took {took:?}");
    for f in ["big.phase", "double_buffer.phase"] {
        let st = status(&r, f);
        assert!(st.starts_with("model error:") && st.contains("R-WAIT"), "{f}: {st}");
    }
    assert_eq!(status(&r, "no_waits.phase"), "planned");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_exit_2_before_anything_runs() {
    let dir = folder("bad", &[("bad.phase", "protocol x\nrole r[1] { frobnicate(b) }\n".to_string())]);
    let s = Settings {
        paths: vec![dir.clone()],
        out: Some(dir.join("r.json")),
        plan_only: true,
        ..Default::default()
    };
    assert_eq!(phasecheck_gpu::runner::run(&s), 2);
    assert!(!dir.join("r.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_step_past_the_step_budget_is_a_budget_not_the_end_of_an_execution() {
    // A local loop of 2^62 rounds with no visible statement: the model cuts the step. The suite
    // records the spec as over budget instead of taking the cut step for the end of an execution
    // (which would make up an outcome: the thread's `arrive` never ran).
    let spin = "protocol spin\nbarrier b count 1\nrole w[1] {\n  for i in 0..4611686018427387904 { }\n  arrive(b)\n}\n";
    let dir = folder("cut", &[("spin.phase", spin.to_string())]);
    let (rc, r, _) = run(&dir, Budget::default(), None);
    assert_eq!(rc, 0);
    let st = status(&r, "spin.phase");
    assert!(st.starts_with("not run (budget: a model step ran past the step budget"), "{st}");
    let _ = std::fs::remove_dir_all(&dir);
}
