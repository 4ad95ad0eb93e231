//! docs/interfaces.md is what the tool does: every exit code it lists comes out of a run, and its
//! JSON key lists are exactly the keys written.

use std::collections::BTreeSet;

mod common;
use common::phasecheck;

/// The key list documented under `<!-- keys:NAME -->`.
fn documented(name: &str) -> BTreeSet<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/interfaces.md")).unwrap();
    let open = format!("<!-- keys:{name} -->`");
    let at = doc.find(&open).unwrap_or_else(|| panic!("docs/interfaces.md has no keys:{name}")) + open.len();
    let end = doc[at..].find('`').unwrap();
    doc[at..at + end].split_whitespace().map(str::to_string).collect()
}

fn keys(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_object().expect("an object").keys().cloned().collect()
}

#[test]
fn each_documented_exit_code_comes_out_of_a_run() {
    let code = |args: &[&str]| phasecheck(args).status.code().expect("no signal");
    assert_eq!(code(&["check", "specs/guide/double_buffer.phase"]), 0);
    assert_eq!(code(&["check", "specs/mistakes/consumer_wrong_parity.phase"]), 1);
    assert_eq!(code(&["check", "tests/malformed/unknown_operation.phase"]), 2);
    assert_eq!(code(&["check", "no/such.phase"]), 2);
    assert_eq!(code(&["check", "specs/guide/double_buffer.phase", "--max-states", "3"]), 3);
    assert_eq!(code(&["gpu", "run", "tests/malformed/unknown_operation.phase"]), 2);
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/interfaces.md")).unwrap();
    assert_eq!(
        code(&["check", "specs/soundness/var_parity_wait.phase", "--mutant", "wait-always-ready"]),
        5
    );
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let lost = std::process::Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .args(["check", "specs/guide/double_buffer.phase"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(lost.status.code(), Some(6), "output lost");
    for c in 0..=6 {
        assert!(doc.contains(&format!("\n| {c} |")), "exit code {c} is not documented");
    }
}

#[test]
fn check_json_has_exactly_the_documented_keys() {
    let o = phasecheck(&["check", "specs/mistakes/consumer_wrong_parity.phase", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(keys(&v), documented("check"));
    assert_eq!(keys(&v["stats"]), documented("stats"));
    assert_eq!(keys(&v["limits"]), documented("limits"));
    let viol = &v["violations"][0];
    assert_eq!(keys(viol), documented("violation"));
    assert_eq!(keys(&viol["trace"][0]), documented("step"));
    // The default memory bound says where it comes from.
    assert!(v["limits"]["memory_bound_from"]
        .as_str()
        .unwrap()
        .starts_with("default: half of the"));
    let o = phasecheck(&[
        "check",
        "specs/guide/double_buffer.phase",
        "--format",
        "json",
        "--max-memory",
        "512",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["limits"]["memory_bound_from"], "--max-memory");
    assert_eq!(v["limits"]["max_memory_mib"], 512);
}

#[test]
fn gpu_case_rows_have_exactly_the_documented_keys() {
    let case = phasecheck_gpu::report::Case {
        spec: "s".into(),
        backend: "ptx".into(),
        mode: "replay".into(),
        runs: 1,
        ..Default::default()
    };
    assert_eq!(keys(&serde_json::to_value(&case).unwrap()), documented("case"));
    // The top level of the results file, as report.rs writes it.
    let report = phasecheck_gpu::report::Report::default();
    assert_eq!(keys(&serde_json::to_value(&report).unwrap()), documented("gpu"));
    let row = phasecheck_gpu::report::SpecRow::default();
    assert_eq!(keys(&serde_json::to_value(&row).unwrap()), documented("gpu-spec"));
}
