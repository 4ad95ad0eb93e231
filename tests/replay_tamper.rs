//! `phasecheck replay` refuses what it cannot trust: a tampered observation diverges (exit 4,
//! naming the step), another schema version is bad input (exit 2). A spec whose text changed is
//! not refused: that is the fix loop (tests/fix_loop.rs), and the message must say the spec is
//! *another text* than the recorded one, not that something went wrong.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_phasecheck");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const TRACE: &str = "counterexamples/consumer_wrong_parity.stale-read.json";
const SPEC: &str = "specs/mistakes/consumer_wrong_parity.phase";

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("phasecheck-replay-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn replay(trace: &Path, spec: Option<&Path>) -> Output {
    let mut c = Command::new(BIN);
    c.arg("replay").arg(trace).current_dir(root());
    if let Some(s) = spec {
        c.arg("--spec").arg(s);
    }
    c.output().unwrap()
}

fn load() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(root().join(TRACE)).unwrap()).unwrap()
}

#[test]
fn untouched_trace_reproduces() {
    let out = replay(&root().join(TRACE), None);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn tampered_observation_diverges_naming_the_step() {
    let mut v = load();
    // The first read: claim it saw another version.
    let steps = v["steps"].as_array_mut().unwrap();
    let (k, obs) = steps
        .iter_mut()
        .enumerate()
        .find_map(|(k, s)| {
            s["observed"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .find(|o| o["obs"] == "read")
                .map(|o| (k + 1, o))
        })
        .expect("the trace has a read");
    let version = obs["version"].as_i64().unwrap();
    obs["version"] = serde_json::json!(version + 7);
    let d = scratch("tamper");
    let f = d.join("tampered.json");
    std::fs::write(&f, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let out = replay(&f, Some(&root().join(SPEC)));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains(&format!("diverged at step {k} ")), "names step {k}: {err}");
    assert!(
        err.contains(&format!("v{version}")) && err.contains(&format!("v{}", version + 7)),
        "says what differed: {err}"
    );
}

#[test]
fn tampered_action_diverges_naming_the_step() {
    let mut v = load();
    let n = v["steps"].as_array().unwrap().len();
    // Make the last step a landing of a copy that is not in flight.
    v["steps"][n - 1]["action"] = serde_json::json!({"land": 9});
    let d = scratch("action");
    let f = d.join("tampered.json");
    std::fs::write(&f, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let out = replay(&f, Some(&root().join(SPEC)));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains(&format!("diverged at step {n} ")), "{err}");
}

#[test]
fn other_schema_version_is_rejected() {
    let mut v = load();
    v["schema"] = serde_json::json!(99);
    let d = scratch("schema");
    let f = d.join("old.json");
    std::fs::write(&f, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let out = replay(&f, Some(&root().join(SPEC)));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("schema version 99"), "{err}");
}

#[test]
fn changed_spec_is_replayed_as_an_edit() {
    let d = scratch("changed");
    let spec = d.join("changed.phase");
    let src = std::fs::read_to_string(root().join(SPEC)).unwrap();
    std::fs::write(&spec, format!("{src}\n// an edit\n")).unwrap();
    let out = replay(&root().join(TRACE), Some(&spec));
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("has changed"), "{text}");
    assert!(
        text.contains("is not the text") && text.contains("as an edited spec"),
        "{text}{err}"
    );
    // A comment changes nothing: the recorded stale read is still there, at the same step.
    assert!(text.contains("same violation: stale-read at step 14"), "{text}{err}");
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
}
