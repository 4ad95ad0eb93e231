//! The fix loop: a counterexample replayed against an edited spec says whether the edit closes
//! it ("violation gone"), leaves it ("same violation"), and `check --against` does that for every
//! stored trace of a protocol.

use std::path::PathBuf;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_phasecheck");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).current_dir(root()).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("phasecheck-fixloop-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The guide's double buffer is the fixed twin of `consumer_wrong_parity` (same params, the
/// consumer's parity flips each round): every one of the wrong-parity traces is closed by it.
#[test]
fn wrong_parity_traces_are_gone_against_the_fixed_twin() {
    for kind in ["stale-read", "data-race", "deadlock", "lifetime", "missing-wait", "stale-wait"] {
        let trace = format!("counterexamples/consumer_wrong_parity.{kind}.json");
        let o = run(&["replay", &trace, "--spec", "specs/guide/double_buffer.phase"]);
        let t = text(&o);
        assert!(
            t.contains(&format!(
                "violation gone: no execution following the recorded schedule reaches {kind}"
            )),
            "{t}"
        );
        assert_eq!(o.status.code(), Some(0), "{t}");
    }
    // The stale read: the consumer's wait on the round-1 parity blocks where the buggy one
    // returned, so the schedule stops at that very wait.
    let t = text(&run(&[
        "replay",
        "counterexamples/consumer_wrong_parity.stale-read.json",
        "--spec",
        "specs/guide/double_buffer.phase",
    ]));
    assert!(t.contains("step 13 is no longer possible: consumer#0 is blocked"), "{t}");
}

/// The bug edited in place: `check --against` re-checks the spec against every stored trace of
/// its protocol. With the parity fixed, all six are gone; with a harmless edit, all six remain.
#[test]
fn check_against_the_corpus() {
    let src = std::fs::read_to_string(root().join("specs/mistakes/consumer_wrong_parity.phase")).unwrap();
    let buggy = "wait_parity(full[s], 0)";
    assert!(src.contains(buggy));
    let d = scratch("against");
    let fixed = d.join("fixed.phase");
    std::fs::write(&fixed, src.replace(buggy, "wait_parity(full[s], (i / STAGES) % 2)")).unwrap();
    let o = run(&["check", fixed.to_str().unwrap(), "--against", "counterexamples"]);
    let t = text(&o);
    assert_eq!(t.matches("violation gone").count(), 6, "{t}");
    assert_eq!(o.status.code(), Some(0), "{t}");

    let same = d.join("same.phase");
    std::fs::write(&same, format!("{src}// a comment\n")).unwrap();
    let o = run(&["check", same.to_str().unwrap(), "--against", "counterexamples"]);
    let t = text(&o);
    assert_eq!(t.matches("same violation").count(), 6, "{t}");
    assert_eq!(o.status.code(), Some(1), "{t}");

    // A protocol with no stored trace has nothing to re-check: bad input, not a pass.
    let o = run(&["check", "specs/guide/double_buffer.phase", "--against", "counterexamples"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// The double buffer whose consumer names parity 0 only in round 3: `check` finds the stale read
/// at the spec's own ITERS = 4. Replaying the wrong-parity trace (recorded at ITERS = 3, where
/// round 3 never comes) against it must not say "gone": the edit is judged at its own values.
/// With ITERS = 2^62 the answer comes within the bound given, and is still not "gone".
#[test]
fn an_edit_that_keeps_the_bug_in_a_later_round_is_never_gone() {
    let fixed = std::fs::read_to_string(root().join("specs/guide/double_buffer.phase")).unwrap();
    let edited = fixed
        .replace("protocol double_buffer", "protocol consumer_wrong_parity")
        .replace("expect holds", "expect stale-read")
        .replace("role consumer[2]", "role consumer[1]")
        .replace(
            "wait_parity(full[s], (i / STAGES) % 2)",
            "if i == 3 { wait_parity(full[s], 0) } else { wait_parity(full[s], (i / STAGES) % 2) }",
        );
    assert!(edited.contains("i == 3"));
    let d = scratch("later-round");
    let spec = d.join("edited.phase");
    std::fs::write(&spec, &edited).unwrap();
    let found = text(&run(&["check", spec.to_str().unwrap()]));
    assert!(found.contains("stale-read"), "{found}");
    let trace = "counterexamples/consumer_wrong_parity.stale-read.json";
    let o = run(&["replay", trace, "--spec", spec.to_str().unwrap()]);
    let t = text(&o);
    assert!(!t.contains("violation gone"), "{t}");
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("ITERS=4 (recorded 3)"), "{t}");

    let huge = d.join("huge.phase");
    std::fs::write(&huge, edited.replace("param ITERS = 4", "param ITERS = 4611686018427387904")).unwrap();
    let t0 = std::time::Instant::now();
    let o = run(&["replay", trace, "--spec", huge.to_str().unwrap(), "--max-seconds", "5"]);
    let t = text(&o);
    assert!(t0.elapsed().as_secs_f64() < 6.0, "{t}");
    assert!(!t.contains("violation gone"), "{t}");
    assert!(matches!(o.status.code(), Some(1) | Some(3)), "{t}");
}

/// The fix loop's two searches (the schedule's continuations, then the whole edited spec) share
/// one `--max-seconds`: on a fixed twin too large to finish, it ends within the bound and a
/// second, undecided rather than "gone".
#[test]
fn both_searches_of_the_fix_loop_share_one_time_bound() {
    let fixed = std::fs::read_to_string(root().join("specs/guide/double_buffer.phase")).unwrap();
    let d = scratch("shared-bound");
    let spec = d.join("huge.phase");
    std::fs::write(&spec, fixed.replace("param ITERS = 4", "param ITERS = 4611686018427387904")).unwrap();
    let t0 = std::time::Instant::now();
    let o = run(&[
        "replay",
        "counterexamples/consumer_wrong_parity.stale-read.json",
        "--spec",
        spec.to_str().unwrap(),
        "--max-seconds",
        "2",
    ]);
    let t = text(&o);
    assert!(t0.elapsed().as_secs_f64() < 3.5, "{:.1} s\n{t}", t0.elapsed().as_secs_f64());
    assert!(!t.contains("violation gone"), "{t}");
    assert_eq!(o.status.code(), Some(3), "{t}");
}

/// The fix loop over the whole library and every stored trace: each trace is judged against its
/// protocol (no error, no panic, no undecided answer at the default bounds), and since the
/// library keeps its buggy specs the loop reports violations that remain (exit 1).
#[test]
fn the_whole_library_against_every_stored_trace() {
    let o = run(&["check", "specs", "--against", "counterexamples"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(!t.contains("error") && !t.contains("panicked") && !t.contains("undecided"), "{t}");
    let stored = std::fs::read_dir(root().join("counterexamples"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .count();
    let judged = t
        .lines()
        .filter(|l| l.starts_with("counterexamples/") && l.contains(".json: "))
        .count();
    assert_eq!(judged, stored, "{t}");
}
