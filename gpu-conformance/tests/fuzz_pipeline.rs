//! The stable fuzz that CI runs (docs/fuzzing.md has the long runs): mutated library specs,
//! malformed inputs and dictionary words through parse -> check -> pretty -> lower -> bounded
//! search -> replay -> CUDA for both backends, with no panic. Inputs a fuzz run once broke are
//! kept in tests/fuzz-regressions/ and run every time.

use phasecheck_gpu::fuzz::{dictionary, mutate, pipeline, seeds, Reached, Rng};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::OnceLock;

fn corpus() -> &'static Vec<Vec<u8>> {
    static C: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    C.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let c = seeds(&[root.join("../specs"), root.join("../tests/malformed"), root.join("tests/fixtures")]);
        assert!(c.len() >= 50, "seed corpus: {} files", c.len());
        c
    })
}

#[test]
fn every_seed_goes_through_the_pipeline() {
    let mut searched = 0;
    for s in corpus() {
        if pipeline(s) == Reached::Searched {
            searched += 1;
        }
    }
    // The library lowers; the malformed files do not.
    assert!(searched >= 50, "{searched}");
}

#[test]
fn fuzz_regressions_stay_fixed() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let inputs = seeds(&[dir]);
    assert!(!inputs.is_empty());
    for i in &inputs {
        pipeline(i);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn mutated_specs_never_crash_the_pipeline(which in any::<prop::sample::Index>(), seed in any::<u64>(), edits in 1usize..8) {
        let c = corpus();
        let base = &c[which.index(c.len())];
        let input = mutate(base, &mut Rng::new(seed), &dictionary(), c, edits);
        pipeline(&input);
    }
}
