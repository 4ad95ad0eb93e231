//! `phasecheck run FILE --cpu`: the reference runtime on OS threads against the model's outcomes.

use std::process::Command;

fn phasecheck(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_cpu_prints_a_histogram_within_the_model() {
    let (code, out, err) = phasecheck(&["run", "specs/guide/double_buffer.phase", "--cpu", "--runs", "30"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("runs:    30 on OS threads"), "{out}");
    assert!(out.contains("[allowed]"), "{out}");
    assert!(out.contains("0 outside the model"), "{out}");
}

#[test]
fn run_cpu_shows_the_wrong_parity_bug_within_the_widened_set() {
    // The consumer waits on parity 0 every round: the model allows stale, torn and hung outcomes.
    let (code, out, err) = phasecheck(&["run", "specs/mistakes/consumer_wrong_parity.phase", "--cpu", "--runs", "20"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 outside the model"), "{out}");
}

#[test]
fn run_cpu_refuses_commit_which_needs_warp_convergence() {
    let dir = std::env::temp_dir().join(format!("phasecheck-run-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("commit.phase");
    std::fs::write(&f, "protocol c\nwarp_size 2\nbarrier b count 1\nrole w[2] { commit(b) }\n").unwrap();
    let (code, _out, err) = phasecheck(&["run", f.to_str().unwrap(), "--cpu"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("commit"), "{err}");
}
