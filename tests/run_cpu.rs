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
fn run_cpu_runs_a_warp_batched_commit_within_the_model() {
    // Two converged lanes commit once on a count-1 barrier: one arrival, as the model decides.
    let dir = std::env::temp_dir().join(format!("phasecheck-run-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("commit.phase");
    std::fs::write(
        &f,
        "protocol c\nwarp_size 2\nbarrier b count 1\nrole w[2] {\n  commit(b)\n  wait_parity(b, 0)\n}\n",
    )
    .unwrap();
    let (code, out, err) = phasecheck(&["run", f.to_str().unwrap(), "--cpu", "--runs", "20"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("t0 done | t1 done   [allowed]"), "{out}");
    assert!(out.contains("0 outside the model"), "{out}");
}

#[test]
fn run_cpu_ends_a_spin_loop_nothing_can_end_as_a_hang_the_model_allows() {
    let (code, out, err) = phasecheck(&[
        "run",
        "specs/hopper/spin_wait_missing_arrive.phase",
        "--cpu",
        "--runs",
        "20",
        "--max-seconds",
        "20",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("HUNG"), "{out}");
    assert!(out.contains("0 outside the model"), "{out}");
}

#[test]
fn run_cpu_past_max_seconds_says_the_comparison_is_partial_and_judges_nothing_outside() {
    // The model's enumeration of this spec takes seconds; a tenth of a second stops it.
    let t = std::time::Instant::now();
    let (code, out, err) = phasecheck(&[
        "run",
        "specs/hopper/deepgemm_fp8_gemm_persistent.phase",
        "--cpu",
        "--runs",
        "100",
        "--max-seconds",
        "0.1",
    ]);
    assert!(code == 0 || code == 3, "{out}{err}");
    assert!(out.contains("comparison partial"), "{out}");
    assert!(!out.contains("OUTSIDE THE MODEL"), "{out}");
    assert!(t.elapsed().as_secs() < 60, "a hang guard, not a speed claim");
}

#[test]
fn run_cpu_takes_a_cp_async_wait_with_no_copy_issued() {
    // A commit and a wait of a thread that issued no cp.async: nothing to wait for (found by the
    // command fuzz campaign: the runtime had no copy queue for such a protocol and panicked).
    let dir = std::env::temp_dir().join(format!("phasecheck-run-cpu-nocopy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("nocopy.phase");
    std::fs::write(
        &f,
        "protocol c\nbarrier b count 1\nrole w[1] {\n  cp_async_commit_group()\n  cp_async_wait_group(0)\n  arrive(b)\n  wait_parity(b, 0)\n}\n",
    )
    .unwrap();
    let (code, out, err) = phasecheck(&["run", f.to_str().unwrap(), "--cpu", "--runs", "8"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 outside the model"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
