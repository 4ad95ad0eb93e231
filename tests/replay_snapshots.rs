//! Snapshots of the text swimlanes `phasecheck replay` prints, one counterexample per violation
//! kind found in the corpus (at least 8 kinds).

use std::path::PathBuf;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_phasecheck");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The corpus traces of specs/kinds, the one library folder with a trigger per kind.
const TRACES: &[&str] = &[
    "deadlock_tx_shortfall.deadlock",
    "over_arrival.over-arrival",
    "count_range_init_zero.count-range",
    "tx_range.tx-range",
    "stale_wait.stale-wait",
    "missing_wait.missing-wait",
    "uninitialized.uninitialized",
    "data_race.data-race",
    "stale_read.stale-read",
    "completion_misuse.completion-misuse",
    "entanglement.entanglement",
    "lifetime.lifetime",
    "assertion.assertion",
    "consumer_wrong_parity.stale-read",
];

#[test]
fn swimlanes_of_one_counterexample_per_kind() {
    let mut kinds = std::collections::BTreeSet::new();
    for name in TRACES {
        let f = format!("counterexamples/{name}.json");
        assert!(
            root().join(&f).exists(),
            "{f} is missing: every listed counterexample must be in the corpus (regenerate it, or drop it from TRACES)"
        );
        let out = Command::new(BIN).args(["replay", &f]).current_dir(root()).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{f}: {}", String::from_utf8_lossy(&out.stderr));
        kinds.insert(name.rsplit('.').next().unwrap().to_string());
        insta::assert_snapshot!(name.replace('.', "__"), String::from_utf8_lossy(&out.stdout));
    }
    assert!(kinds.len() >= 8, "only {} kinds snapshotted: {kinds:?}", kinds.len());
}
