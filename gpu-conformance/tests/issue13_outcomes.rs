//! Issue 13: the GPU outcome sets of the cp.async and partial-copy specs are enumerated like any
//! other (no panic, complete), and a holding protocol's reads all see what they expect.

use phasecheck_gpu::outcome::allowed_outcomes;
use phasecheck_model::spec::load as load_spec;
use phasecheck_model::step::Model;
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
