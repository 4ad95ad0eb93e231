//! `phasecheck prove` and `phasecheck repair` from the command line: verdicts and exit codes
//! (0 proved, 1 refuted and confirmed, 2 bad input, 3 unknown), the report's coverage lines, and
//! the acceptance benchmark's ranges on the guide's double buffer.

use std::process::{Command, Output};

/// Runs the binary. `prove` and `repair` get a memory bound of their own unless the test gives
/// one: the default is half of the memory available when the process starts, which a machine
/// busy with builds can make too small for Z3 (an `incomplete` that says nothing about prove).
fn run(args: &[&str]) -> Output {
    let mut args: Vec<&str> = args.to_vec();
    if matches!(args.first(), Some(&"prove") | Some(&"repair")) && !args.contains(&"--max-memory") {
        args.extend(["--max-memory", "4096"]);
    }
    Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn double_buffer_proved_for_every_value_in_range() {
    let o = run(&[
        "prove",
        "specs/guide/double_buffer.phase",
        "--range",
        "ITERS=0..=1000000",
        "--range",
        "STAGES=1..=8",
        "--range",
        "consumer=1..=1024",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("verdict:  proved (8 cases"), "{t}");
    for law in ["count-range", "arrivals", "tx-balance", "tx-range", "parity", "wait-order"] {
        assert!(t.contains(&format!("  {law}")), "law {law} not listed:\n{t}");
    }
    assert!(t.contains("covers:") && t.contains("only the explicit search covers"), "{t}");
}

#[test]
fn wrong_producer_start_phase_refuted_and_confirmed() {
    let o = run(&["prove", "specs/field/fa_1317_barrier_O_parity_starts_at_0.phase"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("violated: law"), "{t}");
    assert!(t.contains("verdict:  refuted; the explicit search confirms it"), "{t}");
    assert!(t.contains("violation[PC001] deadlock"), "the explicit report is shown:\n{t}");
}

#[test]
fn refutation_picks_a_small_instance_from_the_range() {
    let o = run(&[
        "prove",
        "specs/mistakes/consumer_wrong_parity.phase",
        "--range",
        "ITERS=1..=100000",
        "--format",
        "json",
    ]);
    let t = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(1), "{t}");
    let v: serde_json::Value = serde_json::from_str(t.trim()).unwrap();
    assert_eq!(v["verdict"], "refuted");
    assert_eq!(v["law"], "parity");
    let iters = v["assignment"].as_array().unwrap().iter().find(|a| a["name"] == "ITERS").unwrap()["value"]
        .as_i64()
        .unwrap();
    assert!(iters <= 4, "Z3 minimizes the counterexample: ITERS={iters}");
    assert!(v["explicit"]["kinds"].as_array().unwrap().iter().any(|k| k == "stale-wait"), "{t}");
}

#[test]
fn outside_the_fragment_is_unknown_naming_the_line() {
    let o = run(&["prove", "specs/guide/manual_init_inval.phase"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("verdict:  unknown: inval"), "{t}");
    assert!(t.contains("specs/guide/manual_init_inval.phase:"), "{t}");
}

#[test]
fn a_commit_of_converged_lanes_is_one_arrival_per_warp() {
    let (code, t) = prove_soundness("prove_commit_per_warp", &[]);
    assert_eq!(code, Some(1), "refuted and confirmed:\n{t}");
    let (code, t) = prove_soundness("prove_commit_per_warp_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
    // reconverged by syncwarp: proved; diverged: refuted, never proved
    let o = run(&["prove", "specs/guide/commit_after_syncwarp.phase"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["prove", "specs/kinds/entanglement.phase"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn a_phase_needs_its_bytes_as_it_needs_its_arrivals() {
    // a copy issued after a wait that needs the waiter's own later arrival used to be proved
    let (code, t) = prove_soundness("prove_bytes_after_wait", &[]);
    assert_eq!(code, Some(1), "refuted and confirmed:\n{t}");
    // the wait-order law through the landing, or the bytes of phase 0, which the wait on
    // `ready` orders after it (the tx rule's rounds), never land
    assert!(t.contains("wait-order") || t.contains("law tx-balance"), "{t}");
    let (code, t) = prove_soundness("prove_bytes_after_wait_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
}

#[test]
fn an_arrival_that_may_fall_into_its_previous_open_phase_is_not_proved() {
    // a producer that arrives with expect_tx in every iteration and never waits over-arrives;
    // the per-iteration byte rule used to prove it
    // (the obligation's model, handed to the explicit search as a suspect, is confirmed)
    let (code, t) = prove_soundness("prove_loop_over_arrival", &[]);
    assert_eq!(code, Some(1), "refuted and confirmed, not proved:\n{t}");
    assert!(t.contains("suspect:") && t.contains("since its last arrival"), "{t}");
    assert!(t.contains("over-arrival"), "{t}");
    let (code, t) = prove_soundness("prove_loop_over_arrival_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
}

#[test]
fn bytes_of_several_classes_balance_per_class_and_sum_per_phase() {
    let (code, t) = prove_soundness("prove_memcpy_bytes_sum", &[]);
    assert_eq!(code, Some(1), "refuted and confirmed:\n{t}");
    assert!(t.contains("tx-range"), "{t}");
    let (code, t) = prove_soundness("prove_memcpy_bytes_sum_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
}

#[test]
fn bad_input_exits_2() {
    let o = run(&["prove", "specs/guide/double_buffer.phase", "--range", "NOPE=1..=2"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("names no parameter or role"));
    let o = run(&["prove", "tests/malformed/duplicate_barrier.phase"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("tests/malformed/duplicate_barrier.phase:") && text(&o).contains('^'),
        "{}",
        text(&o)
    );
}

#[test]
fn with_instance_runs_both_checkers() {
    let o = run(&[
        "prove",
        "specs/guide/ring_k_stage.phase",
        "--range",
        "ITERS=0..=1000",
        "--with-instance",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("explicit search at the declared instance"), "{t}");
    assert!(t.contains("combined: holds"), "{t}");
}

#[test]
fn repair_prints_a_confirmed_diff() {
    let o = run(&["repair", "specs/kinds/deadlock.phase"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("repair 1 of"), "{t}");
    assert!(t.contains("-  arrive_expect_tx(full, 256)\n+  arrive_expect_tx(full, 128)"), "{t}");
}

/// `prove` on a soundness spec: its exit status and text.
fn prove_soundness(file: &str, extra: &[&str]) -> (Option<i32>, String) {
    let path = format!("specs/soundness/{file}.phase");
    let mut args = vec!["prove", path.as_str()];
    args.extend_from_slice(extra);
    let o = run(&args);
    (o.status.code(), text(&o))
}

#[test]
fn a_loop_without_barrier_operations_is_not_skipped() {
    // its assignments to the parity used to be dropped, and the broken double buffer proved
    let (code, t) = prove_soundness("prove_flip_loop_parity", &[]);
    assert_ne!(code, Some(0), "{t}");
    assert_eq!(code, Some(1), "refuted and confirmed:\n{t}");
    // the same loop over a range: the odd trip counts are found
    let (code, t) = prove_soundness("prove_flip_loop_parity_fixed", &["--range", "FLIP=0..=1", "--with-instance"]);
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("FLIP=1") && !t.contains("combined: holds"), "{t}");
    let (code, t) = prove_soundness("prove_flip_loop_parity_fixed", &[]);
    assert_eq!(code, Some(0), "an even number of flips is the guide's parity:\n{t}");
}

#[test]
fn a_nested_index_computation_is_not_skipped() {
    let (code, t) = prove_soundness("prove_nested_stage_index", &[]);
    assert_ne!(code, Some(0), "{t}");
    assert_eq!(code, Some(1), "refuted and confirmed:\n{t}");
    let (code, t) = prove_soundness("prove_nested_stage_index_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
}

#[test]
fn syncthreads_blocks_and_counts() {
    let (code, t) = prove_soundness("prove_syncthreads_cycle", &[]);
    assert_ne!(code, Some(0), "{t}");
    assert_eq!(code, Some(1), "the cycle through syncthreads is refuted and confirmed:\n{t}");
    assert!(t.contains("syncthreads"), "{t}");
    let (code, t) = prove_soundness("prove_syncthreads_cycle_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
}

#[test]
fn syncwarp_blocks_and_counts_per_warp() {
    // a thread of its own class: an arrival and a wait on a barrier of its warp's lanes
    let o = run(&["prove", "specs/guide/leader_arrives_for_warp.phase"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["prove", "specs/hopper/syncwarp_mask_half_warp_fixed.phase"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // a counting mistake beside it is still refuted, and confirmed by the explicit search
    let o = run(&["prove", "specs/field/cutlass_2404_producer_group_count_32.phase"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn manual_init_before_the_first_syncthreads_is_a_declared_barrier() {
    let o = run(&["prove", "specs/kinds/uninitialized_fixed.phase"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // no syncthreads orders the init before the use: init order is the explicit search's
    let o = run(&["prove", "specs/kinds/uninitialized.phase"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("manual_init"), "{t}");
    // copies complete on it, and the init is not fenced for the async proxy
    let o = run(&["prove", "specs/hopper/mbarrier_init_without_async_fence.phase"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let o = run(&["prove", "specs/hopper/mbarrier_init_without_async_fence_fixed.phase"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn a_counterexample_is_confirmed_at_the_param_values() {
    let (code, t) = prove_soundness("prove_param_counterexample_fixed", &["--param", "EXTRA=1"]);
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("verdict:  refuted; the explicit search confirms it"), "{t}");
    let (code, t) = prove_soundness("prove_param_counterexample_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
}

#[test]
fn the_expected_kinds_outside_the_laws_are_named() {
    let (_, t) = prove_soundness("prove_flip_loop_parity", &[]);
    assert!(
        t.contains("expect:   the file expects missing-wait, data-race, stale-read, lifetime: outside the counting laws"),
        "{t}"
    );
}

#[test]
fn a_whole_warp_role_counts_its_lanes() {
    let (code, t) = prove_soundness("prove_whole_warp_role", &[]);
    assert_ne!(code, Some(0), "{t}");
    assert_eq!(code, Some(1), "refuted and confirmed:\n{t}");
    let (code, t) = prove_soundness("prove_whole_warp_role_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
}

#[test]
fn an_elected_block_counts_one_lane_per_warp() {
    let (code, t) = prove_soundness("prove_elect_one_lane_per_warp", &[]);
    assert_eq!(code, Some(1), "refuted (arrivals) and confirmed:\n{t}");
    assert!(t.contains("law arrivals on `full`"), "{t}");
    let (code, t) = prove_soundness("prove_elect_one_lane_per_warp_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
    // a role of threads may share its warp with other roles: which lanes elect is not counted
    let o = run(&["prove", "specs/hopper/elect_under_lane_condition.phase"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(3), "{t}");
    assert!(t.contains("verdict:  unknown: elect()"), "{t}");
}

#[test]
fn named_barriers_block_and_count() {
    let (code, t) = prove_soundness("prove_named_barrier_cycle", &[]);
    assert_eq!(code, Some(1), "the cycle through the named barrier is refuted and confirmed:\n{t}");
    assert!(t.contains("law wait-order") && t.contains("`bar 1`"), "{t}");
    let (code, t) = prove_soundness("prove_named_barrier_cycle_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
    // a count that is not a multiple of the warp size is undefined behaviour: not counted
    let o = run(&["prove", "specs/hopper/named_barrier_count_not_warp_multiple.phase"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
}

#[test]
fn a_cp_async_arrive_on_counts_only_with_noinc() {
    let (code, t) = prove_soundness("prove_cp_async_arrive_noinc", &[]);
    assert_eq!(code, Some(1), "{t}");
    let (code, t) = prove_soundness("prove_cp_async_arrive_noinc_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
}

#[test]
fn remote_arrivals_count_on_the_target_cta() {
    let o = run(&["prove", "specs/hopper/cluster_remote_arrive_wrong_cta.phase"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("@cta"), "the barrier is named with its CTA:\n{t}");
    let o = run(&["prove", "specs/hopper/cluster_remote_arrive_wrong_cta_fixed.phase"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn inline_functions_are_expanded_by_reference() {
    // `advance(s, phase)` changes the caller's locals: without the flip the wait is refuted
    let o = run(&["prove", "specs/hopper/pipeline_state_no_phase_flip.phase"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn a_shared_var_is_the_value_published_before_the_first_syncthreads() {
    // a read after the reader's first syncthreads sees the writer's value: proved
    let (code, t) = prove_soundness("prove_var_written_after_sync_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
    let (code, t) = prove_soundness("var_indexed_wait_fixed", &[]);
    assert_eq!(code, Some(0), "{t}");
    // a write after the writer's syncthreads (or a read before the reader's) may leave the
    // initial value to see: refuted with it, confirmed, never proved
    let (code, t) = prove_soundness("prove_var_written_after_sync", &[]);
    assert_eq!(code, Some(1), "refuted and confirmed:\n{t}");
    let (code, t) = prove_soundness("var_indexed_wait", &[]);
    assert_eq!(code, Some(1), "refuted and confirmed:\n{t}");
    // a var nobody writes is its initial value
    let (code, t) = prove_soundness("var_parity_wait", &[]);
    assert_eq!(code, Some(1), "refuted and confirmed:\n{t}");
}

#[test]
fn a_break_under_a_known_condition_ends_the_loop() {
    let o = run(&["prove", "specs/hopper/break_skips_release.phase", "--range", "TILES=1..=4"]);
    assert_eq!(o.status.code(), Some(1), "refuted and confirmed:\n{}", text(&o));
    let o = run(&["prove", "specs/hopper/break_skips_release_fixed.phase", "--range", "TILES=1..=4"]);
    assert_eq!(o.status.code(), Some(0), "each value of the range, unrolled:\n{}", text(&o));
}

#[test]
fn a_noinc_arrive_on_beside_an_own_arrival_is_refutable_only() {
    let o = run(&["prove", "specs/hopper/cp_async_noinc_uncounted.phase"]);
    assert_eq!(o.status.code(), Some(1), "refuted and confirmed:\n{}", text(&o));
    let o = run(&["prove", "specs/hopper/cp_async_noinc_uncounted_fixed.phase"]);
    assert_eq!(o.status.code(), Some(3), "never proved:\n{}", text(&o));
    assert!(text(&o).contains("can be refuted here, not proved"), "{}", text(&o));
}
