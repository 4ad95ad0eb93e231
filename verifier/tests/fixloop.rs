//! The fix loop's three answers on the wrong-parity counterexample: the buggy spec itself
//! ("same violation"), its fixed twin ("violation gone"), and the fixed twin with a budget too
//! small to explore what follows the point where the schedule stops ("schedule no longer
//! possible from step N").

use phasecheck_model::rt::Model;
use phasecheck_model::spec::load;
use phasecheck_verifier::fixloop::{replay_edited, FixVerdict};
use phasecheck_verifier::tracefile::TraceFile;
use phasecheck_verifier::CheckOptions;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn trace() -> TraceFile {
    let text = std::fs::read_to_string(root().join("counterexamples/consumer_wrong_parity.stale-read.json")).unwrap();
    TraceFile::from_json(&text).unwrap()
}

fn model(spec: &str, t: &TraceFile) -> Model {
    let params: Vec<(String, i64)> = t.params.iter().map(|(k, v)| (k.clone(), *v)).collect();
    Model::new(load(&root().join(spec), &params).unwrap().proto)
}

#[test]
fn same_gone_and_undecided() {
    let t = trace();
    let n = t.steps.len();

    let buggy = replay_edited(
        &model("specs/mistakes/consumer_wrong_parity.phase", &t),
        &t,
        &CheckOptions::default(),
    );
    assert!(
        matches!(buggy.verdict, FixVerdict::Same { step, continuation: 0, .. } if step == n),
        "{buggy:?}"
    );
    assert_eq!(buggy.applied.stopped, None);
    assert!(buggy.describe(n).starts_with(&format!("same violation: stale-read at step {n}")));

    let fixed = model("specs/guide/double_buffer.phase", &t);
    let gone = replay_edited(&fixed, &t, &CheckOptions::default());
    assert_eq!(gone.verdict, FixVerdict::Gone);
    assert_eq!(gone.applied.steps, 12);
    assert_eq!(gone.applied.stopped.as_ref().map(|s| s.0), Some(13));
    assert!(gone.describe(n).starts_with("violation gone"), "{}", gone.describe(n));
    assert!(gone.others.is_empty(), "the fixed twin holds: {:?}", gone.others);

    let tight = CheckOptions {
        max_states: Some(2),
        ..Default::default()
    };
    let open = replay_edited(&fixed, &t, &tight);
    assert_eq!(open.verdict, FixVerdict::Undecided);
    assert!(
        open.describe(n).starts_with("schedule no longer possible from step 13"),
        "{}",
        open.describe(n)
    );
}
