//! The outcome sets of Hopper specs: those of the cp.async and partial-copy specs are enumerated
//! like any other (no panic, complete), and a holding protocol's reads all see what they expect;
//! a uniform warp, or lanes of one warp at one arrive, arriving past the pending count may fault
//! (the H200 batches their arrivals).

use phasecheck_model::rt::Model;
use phasecheck_model::spec::load as load_spec;
use phasecheck_verifier::outcomes::allowed_outcomes;
use std::path::PathBuf;

fn model(rel: &str) -> Model {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    Model::new(load_spec(&root.join(rel), &[]).unwrap().proto)
}

#[test]
fn outcome_sets_of_cp_async_and_partial_copy_specs_are_enumerated() {
    for (spec, holds) in [
        ("specs/hopper/cp_async_inc_counted_fixed.phase", true),
        ("specs/hopper/cp_async_noinc_uncounted_fixed.phase", true),
        ("specs/hopper/partial_copy_overlap_fixed.phase", true),
        ("specs/hopper/partial_read_under_copy_fixed.phase", true),
        ("specs/hopper/cp_async_inc_counted.phase", false),
        ("specs/hopper/cp_async_noinc_uncounted.phase", false),
        ("specs/hopper/partial_copy_overlap.phase", false),
    ] {
        let m = model(spec);
        let set = allowed_outcomes(&m, 1_000_000);
        assert!(set.is_complete(), "{spec}: {set}");
        assert!(!set.is_empty(), "{spec}: no outcome");
        if holds {
            assert!(set.vacuous_causes().is_empty(), "{spec}: {set}");
            // Every recorded read of a holding protocol sees version 0, 1 or 7 as its spec says:
            // one outcome per protocol (its reads are deterministic).
            assert_eq!(set.len(), 1, "{spec}: {set}");
        }
    }
}

/// A uniform warp whose lanes arrive past the pending count: the H200 applies the warp's arrivals
/// as one batched update and faults (over-arrival), so the outcome set admits a fault there; the
/// fixed twin (an elected lane arrives once) admits none.
#[test]
fn a_uniform_warp_arriving_past_the_pending_count_may_fault() {
    let over = allowed_outcomes(&model("specs/hopper/uniform_warp_arrival_count.phase"), 1_000_000);
    assert!(over.is_complete(), "{over}");
    assert!(over.fault_allowed(), "{over}");
    assert!(
        over.undefined().any(|u| u.cause == phasecheck_model::ViolationKind::OverArrival),
        "{over}"
    );
    let fixed = allowed_outcomes(&model("specs/hopper/uniform_warp_arrival_count_fixed.phase"), 1_000_000);
    assert!(fixed.is_complete(), "{fixed}");
    assert!(!fixed.fault_allowed(), "{fixed}");
}

/// Lanes of one warp standing at the same arrive are issued it as one warp instruction: where the
/// arrivals of a `warps 1` role's two lanes run past a count-1 barrier's pending count, the H200
/// faulted in every block (2026-12-01), so the set admits a fault; the fixed twin (the barrier
/// counts both lanes) admits none.
#[test]
fn converged_lanes_arriving_past_the_pending_count_may_fault() {
    let over = allowed_outcomes(&model("specs/soundness/prove_whole_warp_role.phase"), 1_000_000);
    assert!(over.is_complete(), "{over}");
    assert!(over.fault_allowed(), "{over}");
    assert!(
        over.undefined().any(|u| u.cause == phasecheck_model::ViolationKind::OverArrival),
        "{over}"
    );
    let fixed = allowed_outcomes(&model("specs/soundness/prove_whole_warp_role_fixed.phase"), 1_000_000);
    assert!(!fixed.fault_allowed(), "{fixed}");
}

/// A worker that drops to skip a round and then arrives again: its two peers, at one arrive,
/// arrive together on a phase the drop left one arrival short of them, which the H200 turned into
/// a launch fault in every block; the double buffer, whose consumers arrive together on a barrier
/// that counts them all, admits none.
#[test]
fn peers_arriving_together_on_a_phase_shortened_by_a_drop_may_fault() {
    let drop = allowed_outcomes(&model("gpu-conformance/tests/repros/g22_drop_for_temporary_skip.phase"), 1_000_000);
    assert!(drop.is_complete(), "{drop}");
    assert!(drop.fault_allowed(), "{drop}");
    let fine = allowed_outcomes(&model("specs/guide/double_buffer.phase"), 1_000_000);
    assert!(!fine.fault_allowed(), "{fine}");
}

/// Counters: a read of a counter is recorded with its value. The histogram ordered by the cluster
/// barrier has one outcome (every bin read as 2); the read not ordered after the peer's add
/// admits both totals (1 and 2) and the widened values of a racing read, so a GPU run that sees
/// the partial total is within the model.
#[test]
fn counter_reads_are_recorded_with_their_values() {
    let fixed = allowed_outcomes(&model("specs/hopper/cuda_guide_cluster_histogram_atomics.phase"), 1_000_000);
    assert!(fixed.is_complete(), "{fixed}");
    assert_eq!(fixed.len(), 1, "{fixed}");
    let o = fixed.iter().next().unwrap();
    assert!(o.threads.iter().all(|t| t.reads == [2]), "{fixed}");
    let racy = allowed_outcomes(&model("specs/hopper/cluster_counter_read_before_peer_atomics.phase"), 1_000_000);
    assert!(racy.is_complete(), "{racy}");
    let cta0_reads: std::collections::BTreeSet<Vec<i64>> = racy.iter().map(|o| o.threads[0].reads.clone()).collect();
    assert!(cta0_reads.contains(&vec![1]) && cta0_reads.contains(&vec![2]), "{racy}");
    let ordered = allowed_outcomes(
        &model("specs/hopper/cluster_counter_read_before_peer_atomics_fixed.phase"),
        1_000_000,
    );
    assert!(ordered.iter().all(|o| o.threads[0].reads == [2]), "{ordered}");
}
