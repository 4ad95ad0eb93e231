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
    // A byte count does not change the interleavings: never a candidate.
    let hints: String = out.lines().skip_while(|l| !l.starts_with("hint:")).collect();
    assert!(!hints.contains("BYTES"), "{out}");
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

/// A role whose members are told apart by their index (ping-pong partners) is never offered for
/// shrinking, nor is a byte count; and the hints share the time bound, so `--max-seconds 2`
/// ends the whole command within the bound and a second.
#[test]
fn shrink_hints_keep_the_protocol_and_the_time_bound() {
    let d = std::env::temp_dir().join(format!("phasecheck-shrink-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("pingpong.phase");
    std::fs::write(
        &f,
        "protocol pingpong\nparam ROUNDS = 64\nparam BYTES = 1024\nbarrier turn[2] count 1\n\
         buffer tile bytes BYTES\nrole wg[2] {\n  for i in 0..ROUNDS {\n    wait_parity(turn[tid], i % 2)\n    \
         arrive(turn[1 - tid])\n  }\n}\nrole starter[1] {\n  arrive(turn[0])\n}\n",
    )
    .unwrap();
    let o = run(&["check", f.to_str().unwrap(), "--max-states", "40"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("param ROUNDS 64 -> 32"), "{out}");
    let hints: String = out.lines().skip_while(|l| !l.starts_with("hint:")).collect();
    assert!(!hints.contains("role wg") && !hints.contains("BYTES"), "{out}");

    let deep = d.join("deep.phase");
    let lib = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("specs/guide/double_buffer.phase")).unwrap();
    std::fs::write(&deep, lib.replace("param ITERS = 4", "param ITERS = 400000")).unwrap();
    let t0 = std::time::Instant::now();
    let o = run(&["check", deep.to_str().unwrap(), "--max-seconds", "2"]);
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(o.status.code(), Some(3));
    assert!(secs < 3.0, "{secs:.1} s for a 2 s bound");
}
