//! Issue 7's misjudgments, each pinned: the verdict a kernel engineer relies on, and the sentence
//! that explains it. The spec files in specs/soundness/ carry the verdicts (checked by `test specs/`
//! in tests/cli.rs); this file holds what an `expect` line cannot say.

mod common;
use common::{code, phasecheck, text};

/// The message of the first violation of `kind` in a JSON check of one file.
fn message(file: &str, kind: &str) -> String {
    let o = phasecheck(&["check", file, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["kind"] == kind)
        .unwrap_or_else(|| panic!("{file}: no {kind} in {v}"))["message"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_wait_over_a_shared_var_that_never_completes_is_a_deadlock_not_holds() {
    for f in ["specs/soundness/var_parity_wait.phase", "specs/soundness/var_indexed_wait.phase"] {
        let o = phasecheck(&["check", f, "--self-check"]);
        let out = text(&o.stdout);
        assert_eq!(code(&o), 1, "{f}:\n{out}");
        assert!(out.contains("verdict: violated (deadlock)"), "{f}:\n{out}");
        assert!(
            !out.contains("complete\n"),
            "{f}: a wait must not claim its phase completed:\n{out}"
        );
    }
}

#[test]
fn a_completion_that_waits_on_a_landing_completed_phase_is_misuse_not_a_crash() {
    let o = phasecheck(&["check", "specs/soundness/completion_try_wait_on_landing.phase"]);
    assert_eq!(code(&o), 1, "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("panicked"));
    assert!(text(&o.stdout).contains("completion-misuse"));
}

#[test]
fn two_roles_in_one_warp_and_one_role_split_by_if_get_the_same_verdict() {
    let kinds = |f: &str| {
        let o = phasecheck(&["check", f, "--format", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut k: Vec<String> = v["violations"].as_array().unwrap().iter().map(|x| x["kind"].to_string()).collect();
        k.sort();
        k
    };
    let roles = kinds("specs/soundness/roles_share_warp_commit.phase");
    assert!(roles.iter().any(|k| k.contains("entanglement")), "{roles:?}");
    assert_eq!(roles, kinds("specs/soundness/roles_share_warp_commit_if.phase"));
}

#[test]
fn phase_knowledge_acquired_through_a_copy_is_not_a_stale_wait() {
    let o = phasecheck(&["check", "specs/soundness/knowledge_through_copy.phase"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    let m = message("specs/soundness/knowledge_through_copy_stale.phase", "stale-wait");
    assert!(m.contains("knows of is 0"), "the message says what the thread knew: {m}");
    assert!(m.contains("blocks until phase 1 completes"), "{m}");
}

#[test]
fn inval_after_a_lone_drop_is_a_lifetime_violation_counting_the_drop() {
    let m = message("specs/soundness/inval_after_drop.phase", "lifetime");
    assert!(m.contains("1 of 2 arrivals made"), "{m}");
}

#[test]
fn a_trip_count_mismatch_names_the_arrivals_and_never_advises_an_illegal_drop() {
    let m = message("specs/soundness/trip_count_mismatch.phase", "deadlock");
    assert!(m.contains("loader#0 exited after 2 arrivals on full"), "{m}");
    assert!(m.contains("trip counts"), "{m}");
    // full counts only the loader: dropping would take the count to zero (count-range).
    assert!(!m.contains("must arrive_and_drop"), "{m}");
}

#[test]
fn a_deadlock_blames_the_thread_that_left_without_dropping_not_the_one_that_dropped() {
    let m = message("specs/soundness/drop_too_early.phase", "deadlock");
    assert!(m.contains("worker#1 exited after 1 arrival on bar"), "{m}");
    assert!(!m.contains("worker#2"), "worker#2 dropped: {m}");
}

#[test]
fn over_arrival_reports_the_tx_outstanding_before_the_failing_instruction() {
    let m = message("specs/soundness/over_arrival_own_tx.phase", "over-arrival");
    assert!(m.contains("tx 256 outstanding"), "its own expect_tx of 256 must not be added: {m}");
}

#[test]
fn tables_past_16_bits_are_rejected_at_lowering_instead_of_wrapping() {
    let dir = std::env::temp_dir().join(format!("phasecheck-wide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("many_vars.phase");
    let mut src = String::from("protocol many_vars\n");
    // Compact, to stay under the 1 MiB file limit: 65,537 vars still fit in about 800 KB.
    for i in 0..65_537 {
        src.push_str(&format!("var v{i}=0;"));
    }
    src.push_str("\nrole t[1] { assert v65536 == 0 }\n");
    std::fs::write(&f, src).unwrap();
    let o = phasecheck(&["check", f.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(code(&o), 2, "{err}{}", text(&o.stdout));
    assert!(err.contains("E108") && err.contains("shared vars"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_broken_model_rule_is_an_internal_error_exit_5_and_test_goes_on_with_the_other_files() {
    let o = phasecheck(&["test", "specs/soundness/", "--verbose", "--mutant", "wait-always-ready"]);
    let out = text(&o.stdout);
    assert_eq!(code(&o), 5, "{out}");
    assert!(out.contains("INTERNAL ERROR [R-WAIT]"), "{out}");
    // The files whose search never reaches a wait still get their verdicts.
    assert!(
        out.lines().any(|l| l.contains("inval_after_drop.phase") && l.ends_with("ok")),
        "{out}"
    );
    assert!(text(&o.stderr).contains("R-WAIT"));
    let o = phasecheck(&["check", "specs/soundness/var_parity_wait.phase", "--mutant", "wait-always-ready"]);
    assert_eq!(code(&o), 5);
    assert!(text(&o.stdout).contains("internal error [R-WAIT]"), "{}", text(&o.stdout));
}

#[test]
fn the_self_check_catches_a_defect_the_verdicts_alone_would_hide() {
    // Uncounted arrivals change no verdict but inval_after_drop's; the self-check sees them at once.
    let o = phasecheck(&["test", "specs/guide/", "--mutant", "arrivals-uncounted"]);
    assert_eq!(code(&o), 0, "the guide's verdicts do not notice:\n{}", text(&o.stdout));
    let o = phasecheck(&["test", "specs/guide/", "--mutant", "arrivals-uncounted", "--self-check"]);
    assert_eq!(code(&o), 5, "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("I-ARRIVALS"));
}

#[test]
fn the_whole_library_passes_the_self_check_with_exact_expect_lines() {
    let o = phasecheck(&["test", "specs/", "--self-check"]);
    assert_eq!(code(&o), 0, "{}\n{}", text(&o.stdout), text(&o.stderr));
}

#[test]
fn expect_lines_are_exact_unless_subset_is_asked_for() {
    let dir = std::env::temp_dir().join(format!("phasecheck-exact-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/mistakes/consumer_wrong_parity.phase")).unwrap();
    let line = src.lines().find(|l| l.starts_with("expect ")).unwrap();
    // Drop `deadlock` from the listed kinds: the checker still finds it.
    let fewer = line.replace("deadlock, ", "").replace(", deadlock", "");
    assert_ne!(fewer, line);
    let f = dir.join("fewer.phase");
    std::fs::write(&f, src.replace(line, &fewer)).unwrap();
    let o = phasecheck(&["test", f.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "a kind found but not listed is a mismatch:\n{}", text(&o.stdout));
    // Listing a kind that is not found: exact fails, --subset (any non-empty subset) passes.
    let more = format!("{line}, over-arrival");
    let g = dir.join("more.phase");
    std::fs::write(&g, src.replace(line, &more)).unwrap();
    let o = phasecheck(&["test", g.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", text(&o.stdout));
    let o = phasecheck(&["test", g.to_str().unwrap(), "--subset"]);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    std::fs::remove_dir_all(&dir).ok();
}
