//! Every buggy spec of the library (an `expect` line naming kinds) gets root causes: each one
//! line, each naming where the execution first went wrong, and together explaining every kind
//! found. The snapshot holds the one-line causes of the whole library, reviewed by hand: a
//! change to the model or to the grouping shows up here as a diff to read.

use phasecheck_model::rt::Model;
use phasecheck_model::spec::{expand, load};
use phasecheck_verifier::cause::root_causes;
use phasecheck_verifier::{check, CheckOptions, Verdict};
use std::path::PathBuf;

#[test]
fn every_buggy_library_spec_names_its_root_cause() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let files = expand(&[root.join("specs")]).unwrap();
    let mut out = String::new();
    let mut buggy = 0;
    for f in files {
        let spec = load(&f, &[]).unwrap();
        if spec.proto.expect.is_none() {
            continue;
        }
        buggy += 1;
        let model = Model::new(spec.proto.clone());
        let r = check(&model, &CheckOptions::default());
        assert_eq!(r.verdict, Verdict::Violated, "{}", f.display());
        let (causes, of) = root_causes(&model, &spec.source, &r.violations);
        assert_eq!(of.len(), r.violations.len());
        let explained: usize = causes.iter().map(|c| c.violations.len()).sum();
        assert_eq!(
            explained,
            r.violations.len(),
            "{}: every violation belongs to one cause",
            f.display()
        );
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        out.push_str(&format!("{rel}\n"));
        for c in &causes {
            assert!(!c.summary.contains('\n'), "{rel}: a cause is one line: {}", c.summary);
            let kinds: Vec<&str> = c.violations.iter().map(|k| k.name()).collect();
            out.push_str(&format!("  [{}] {}\n", kinds.join(", "), c.summary));
            let facts = c.facts();
            if !facts.is_empty() {
                out.push_str(&format!("      {facts}\n"));
            }
        }
    }
    assert!(buggy >= 31, "only {buggy} buggy specs");
    insta::assert_snapshot!("library_root_causes", out);
}

/// The JSON report carries the finding: a `cause` object on each violation, and the `causes`
/// list with the barrier facts as fields.
#[test]
fn json_cause_objects() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .args(["check", "specs/mistakes/consumer_wrong_parity.phase", "--format", "json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let causes = v["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 1, "{v}");
    let c = &causes[0];
    assert_eq!(c["rule"], "wrong-parity");
    assert_eq!(c["barrier"], "full[0]");
    assert_eq!(c["init_count"], 1);
    assert_eq!(c["line"], 30);
    assert_eq!(c["mismatch"]["expected"], 1);
    assert_eq!(c["mismatch"]["actual"], 0);
    assert_eq!(c["explains"].as_array().unwrap().len(), 6);
    for viol in v["violations"].as_array().unwrap() {
        assert_eq!(viol["cause"]["id"], 1, "{viol}");
    }
}
