//! The command line as a user meets it: exit codes, bad input, JSON shape, the bundled library,
//! and reviewed text reports.

use std::path::{Path, PathBuf};

mod common;
use common::{code, phasecheck, text};

fn files_under(dir: &str, ext: &str) -> Vec<PathBuf> {
    fn walk(d: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, ext, out);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), ext, &mut out);
    out.sort();
    out
}

#[test]
fn every_malformed_file_is_rejected_with_exit_2_a_position_and_a_caret() {
    let files = files_under("tests/malformed", "phase");
    assert!(files.len() >= 10, "expected at least 10 malformed files, found {}", files.len());
    for f in files {
        let path = f.to_str().unwrap();
        let o = phasecheck(&["check", path]);
        let err = text(&o.stderr);
        assert_eq!(code(&o), 2, "{path}: exit {} with stderr:\n{err}", code(&o));
        assert!(!err.contains("panicked"), "{path} panicked:\n{err}");
        let name = f.file_name().unwrap().to_str().unwrap();
        let located = err
            .lines()
            .any(|l| l.contains(name) && l.split(':').filter(|p| p.trim().parse::<usize>().is_ok()).count() >= 2);
        assert!(located, "{path}: no file:line:col in\n{err}");
        assert!(
            err.lines().any(|l| l.trim_start().starts_with('|') && l.contains('^')),
            "{path}: no caret in\n{err}"
        );
        assert!(err.starts_with("error[E"), "{path}: no error code in\n{err}");
        assert!(
            o.stdout.is_empty(),
            "{path}: nothing may be checked, yet stdout has:\n{}",
            text(&o.stdout)
        );
    }
}

const DOUBLE_BUFFER: &str = "specs/guide/double_buffer.phase";

#[test]
fn a_holding_protocol_exits_0_and_says_holds() {
    let o = phasecheck(&["check", DOUBLE_BUFFER]);
    assert_eq!(code(&o), 0, "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("verdict: holds"));
}

#[test]
fn a_violated_protocol_exits_1_with_a_trace() {
    let o = phasecheck(&["check", "specs/mistakes/consumer_wrong_parity.phase"]);
    assert_eq!(code(&o), 1);
    let out = text(&o.stdout);
    assert!(out.contains("violation[PC"), "{out}");
    assert!(out.contains("trace ("), "{out}");
}

#[test]
fn a_search_stopped_by_a_bound_is_incomplete_and_exits_3() {
    let o = phasecheck(&["check", DOUBLE_BUFFER, "--param", "ITERS=8", "--max-states", "20"]);
    assert_eq!(code(&o), 3, "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("incomplete (bound --max-states reached)"));
    let o = phasecheck(&["check", DOUBLE_BUFFER, "--param", "ITERS=8", "--max-seconds", "0"]);
    assert_eq!(code(&o), 3, "{}", text(&o.stdout));
}

#[test]
fn params_override_the_declared_defaults() {
    let o = phasecheck(&[
        "check",
        DOUBLE_BUFFER,
        "--param",
        "ITERS=6",
        "--param",
        "STAGES=3",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 0);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["params"]["ITERS"], 6);
    assert_eq!(v["params"]["STAGES"], 3);
    let o = phasecheck(&["check", DOUBLE_BUFFER, "--param", "NOPE=1"]);
    assert_eq!(code(&o), 2);
    assert!(text(&o.stderr).contains("NOPE"));
}

#[test]
fn json_output_is_one_object_per_file_with_the_documented_fields() {
    let o = phasecheck(&[
        "check",
        DOUBLE_BUFFER,
        "specs/mistakes/consumer_wrong_parity.phase",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 1);
    let lines: Vec<&str> = std::str::from_utf8(&o.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), 2);
    let holds: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(holds["verdict"], "holds");
    assert_eq!(holds["violations"].as_array().unwrap().len(), 0);
    for k in ["file", "protocol", "params", "verdict", "violations", "stats"] {
        assert!(holds.get(k).is_some(), "missing {k}");
    }
    for k in ["states", "transitions", "depth", "seconds"] {
        assert!(holds["stats"].get(k).is_some(), "missing stats.{k}");
    }
    let bad: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(bad["verdict"], "violated");
    let vs = bad["violations"].as_array().unwrap();
    assert!(!vs.is_empty());
    for v in vs {
        let kind = v["kind"].as_str().unwrap();
        assert!(phasecheck_model::ViolationKind::from_name(kind).is_some(), "unknown kind {kind}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(v["trace"].is_array());
    }
}

#[test]
fn stop_at_first_reports_exactly_one_violation() {
    let o = phasecheck(&[
        "check",
        "specs/mistakes/consumer_wrong_parity.phase",
        "--stop-at-first",
        "--format",
        "json",
    ]);
    assert_eq!(code(&o), 1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["violations"].as_array().unwrap().len(), 1);
}

#[test]
fn the_bundled_library_matches_every_expect_line() {
    let o = phasecheck(&["test", "specs/"]);
    let out = text(&o.stdout);
    assert_eq!(code(&o), 0, "phasecheck test specs/ failed:\n{out}\n{}", text(&o.stderr));
    let specs = files_under("specs", "phase");
    assert!(specs.len() >= 30, "the library has {} specs", specs.len());
}

#[test]
fn every_violation_kind_has_a_triggering_spec_and_a_holding_twin() {
    let o = phasecheck(&["check", "specs/", "--format", "json"]);
    let mut triggered = std::collections::BTreeSet::new();
    let mut holding_files = std::collections::BTreeSet::new();
    for line in std::str::from_utf8(&o.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let file = v["file"].as_str().unwrap().to_string();
        if v["verdict"] == "holds" {
            holding_files.insert(file);
        } else {
            for k in v["violations"].as_array().unwrap() {
                triggered.insert((k["kind"].as_str().unwrap().to_string(), file.clone()));
            }
        }
    }
    for kind in phasecheck_model::ViolationKind::ALL {
        let name = kind.name();
        let triggers: Vec<&String> = triggered.iter().filter(|(k, _)| k == name).map(|(_, f)| f).collect();
        assert!(!triggers.is_empty(), "no spec triggers {name}");
        // The twin: a holding spec named after a trigger with `_fixed`.
        let twin = triggers
            .iter()
            .any(|f| holding_files.contains(&f.replace(".phase", "_fixed.phase")));
        assert!(
            twin,
            "no holding `_fixed` twin for any spec that triggers {name} (triggers: {triggers:?})"
        );
    }
}

/// The text report with the timing figure replaced: everything else is deterministic.
fn report(spec: &str) -> String {
    let o = phasecheck(&["check", spec]);
    assert!(matches!(code(&o), 0 | 1), "{spec}: {}", text(&o.stderr));
    text(&o.stdout)
        .lines()
        .map(|l| match l.strip_prefix("stats:") {
            Some(rest) => format!(
                "stats:{}",
                rest.rsplit_once(", ").map(|(a, _)| format!("{a}, <seconds>")).unwrap_or_default()
            ),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn text_reports_of_reviewed_specs() {
    for spec in [
        DOUBLE_BUFFER,
        "specs/mistakes/consumer_wrong_parity.phase",
        "specs/mistakes/exit_without_drop.phase",
        "specs/mistakes/diverged_warp_commit.phase",
        "specs/mistakes/producer_overwrites_unreleased_slot.phase",
        "specs/kinds/over_arrival.phase",
    ] {
        let name = Path::new(spec).file_stem().unwrap().to_str().unwrap().to_string();
        insta::assert_snapshot!(format!("report_{name}"), report(spec));
    }
}

#[test]
fn the_readme_worked_example_is_what_the_tool_prints() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let open = "(exit status 1):\n\n```text\n";
    let start = readme.find(open).expect("README has the worked example") + open.len();
    let block = &readme[start..start + readme[start..].find("```").unwrap()];
    let o = phasecheck(&["check", "specs/mistakes/consumer_wrong_parity.phase", "--stop-at-first"]);
    assert_eq!(code(&o), 1);
    let strip_seconds = |s: &str| {
        s.lines()
            .map(|l| {
                if l.starts_with("stats:") {
                    l.rsplit_once(", ").unwrap().0.to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        strip_seconds(block),
        strip_seconds(text(&o.stdout).trim_end()),
        "README.md's worked example is out of date"
    );
}

/// Where the partial-order reduction cannot run, the header says why (text and JSON); where it
/// runs, or `--no-por` is given, nothing is blamed. Every statement of the language has a
/// footprint now, so the cause left is a protocol with more shared objects than a footprint holds.
#[test]
fn the_header_names_the_construct_that_turns_the_partial_order_reduction_off() {
    let file = common::spec_file(
        "por-off",
        "many_objects",
        "protocol many_objects\nexpect holds\n\nbuffer x[300] bytes 4\n\nrole w[2] {\n  write(x[tid], 1)\n}\n",
    );
    let spec = file.to_str().unwrap();
    let out = text(&phasecheck(&["check", spec]).stdout);
    assert!(
        out.contains("partial-order: off, turned off by more than 256 shared objects"),
        "{out}"
    );
    let o = phasecheck(&["check", spec, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).lines().next().unwrap()).unwrap();
    assert!(v["stats"]["partial_order_off"]["line"].is_null(), "{v}");
    assert!(
        v["stats"]["partial_order_off"]["construct"].to_string().contains("more than 256"),
        "{v}"
    );
    let out = text(&phasecheck(&["check", spec, "--no-por"]).stdout);
    assert!(!out.contains("turned off by"), "--no-por:\n{out}");
    std::fs::remove_dir_all(file.parent().unwrap()).ok();
    // A `while` loop (here a spin on try_wait_parity) no longer turns it off, nor named
    // barriers in a cluster (each CTA's own), tensor memory, cluster launch control, tensor
    // copies or copies from shared memory.
    for spec in [
        DOUBLE_BUFFER,
        "specs/hopper/spin_wait_missing_arrive_fixed.phase",
        "specs/hopper/cluster_named_barrier_orders_own_cta.phase",
        "specs/blackwell/cutlass_sm100_gemm_commit_before_mma.phase",
        "specs/blackwell/clc_response_read_before_wait.phase",
        "specs/hopper/tensormap_edit_under_copy.phase",
        "specs/hopper/cluster_copy_from_source_reused.phase",
    ] {
        let o = phasecheck(&["check", spec, "--format", "json"]);
        let v: serde_json::Value = serde_json::from_str(text(&o.stdout).lines().next().unwrap()).unwrap();
        assert!(v["stats"]["partial_order_off"].is_null(), "{spec}: {v}");
        assert!(v["stats"]["reductions"].to_string().contains("partial-order"), "{spec}: {v}");
    }
}
