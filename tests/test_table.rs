//! `phasecheck test` fits 100 columns (the library's paths and long kind lists included), with
//! the full table behind `--verbose`; and an incomplete `check` says what to shrink.

use std::path::PathBuf;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_phasecheck");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .output()
        .unwrap()
}

#[test]
fn test_table_fits_100_columns_and_verbose_has_every_kind() {
    let o = run(&["test", "specs/"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    for l in out.lines() {
        assert!(l.chars().count() <= 100, "{} columns: {l}", l.chars().count());
    }
    assert!(out.contains("6 kinds, as expected"), "{out}");
    let v = String::from_utf8_lossy(&run(&["test", "specs/", "--verbose"]).stdout).to_string();
    assert!(v.lines().any(|l| l.chars().count() > 100), "--verbose is the wide table");
    assert!(
        v.contains("data-race, stale-read, missing-wait, stale-wait, deadlock, lifetime"),
        "{v}"
    );
}

#[test]
fn a_mismatch_says_what_was_found_and_expected() {
    let d = std::env::temp_dir().join(format!("phasecheck-table-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("m.phase");
    std::fs::write(&f, "protocol m\nexpect holds\nbarrier b count 1\nrole t[1] { wait_parity(b, 0) }\n").unwrap();
    let o = run(&["test", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("MISMATCH") && out.contains("deadlock (expected holds)"), "{out}");
}

#[test]
fn incomplete_check_suggests_what_to_shrink() {
    let o = run(&[
        "check",
        "specs/guide/double_buffer.phase",
        "--param",
        "ITERS=16",
        "--max-states",
        "300",
    ]);
    assert_eq!(o.status.code(), Some(3));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("verdict: incomplete"), "{out}");
    assert!(out.contains("hint: shrink first what helps most"), "{out}");
    // Every candidate is named with its values; those that finish give their state count.
    for c in ["param STAGES 2 -> 1", "role consumer 2 -> 1", "param ITERS 16 -> 8"] {
        assert!(out.contains(c), "{c}: {out}");
    }
    assert!(out.contains("finishes in"), "{out}");
    let j = run(&[
        "check",
        "specs/guide/double_buffer.phase",
        "--param",
        "ITERS=16",
        "--max-states",
        "300",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert!(v["shrink"].as_array().is_some_and(|a| a.len() >= 3), "{v}");
}
