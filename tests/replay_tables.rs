//! `phasecheck replay` checks what a replay of observations does not re-derive (issue 10): a
//! trace whose positions, thread table or barrier table were edited is bad input (exit 2), not
//! "every recorded observation matched".

use std::path::PathBuf;
use std::process::Command;

const TRACE: &str = "counterexamples/consumer_wrong_parity.stale-read.json";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Replay a copy of the trace, edited by `edit`, next to the original (so its spec path holds).
fn replay_edited(name: &str, edit: impl Fn(&mut serde_json::Value)) -> (i32, String) {
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(root().join(TRACE)).unwrap()).unwrap();
    edit(&mut v);
    let dir = std::env::temp_dir().join(format!("phasecheck-tables-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("t.json");
    std::fs::write(&f, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let spec = root().join("specs/mistakes/consumer_wrong_parity.phase");
    let o = Command::new(env!("CARGO_BIN_EXE_phasecheck"))
        .args(["replay", f.to_str().unwrap(), "--spec", spec.to_str().unwrap()])
        .current_dir(root())
        .output()
        .unwrap();
    (o.status.code().unwrap(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn the_untouched_trace_still_reproduces() {
    assert_eq!(replay_edited("none", |_| {}).0, 1);
}

#[test]
fn an_edited_position_is_bad_input() {
    let (code, err) = replay_edited("line", |v| {
        let l = v["steps"][0]["span"]["line"].as_u64().unwrap();
        v["steps"][0]["span"]["line"] = (l + 1).into();
    });
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("step 1: the recorded statement"), "{err}");
    let (code, err) = replay_edited("col", |v| v["steps"][1]["span"]["col"] = 99.into());
    assert_eq!((code, err.contains("step 2")), (2, true), "{err}");
}

#[test]
fn edited_thread_and_barrier_tables_are_bad_input() {
    let (code, err) = replay_edited("threads", |v| v["threads"][0]["role"] = "someone_else".into());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("thread table"), "{err}");
    let (code, err) = replay_edited("barriers", |v| {
        let b = v["barriers"].as_array_mut().unwrap();
        b[0] = "renamed".into();
    });
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("barrier table"), "{err}");
    let (code, err) = replay_edited("step-thread", |v| {
        let s = v["steps"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|s| s.get("thread").is_some())
            .unwrap();
        s["thread"]["tid"] = 77.into();
    });
    assert_eq!(code, 2, "{err}");
}
