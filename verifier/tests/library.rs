//! The library as a reviewed record: every spec in `specs/` gets the verdict its `expect` line
//! states, and its exact state and transition counts, shortest trace lengths and violation
//! messages are those of `library.golden` (reviewed when they change).
//!
//! Why a golden file and not only the verdicts: a change to the semantics that keeps every
//! verdict still moves state counts or messages somewhere in 143 specs. This test is what a
//! mutant of the model must get past (docs/fuzzing.md, "Mutation testing"), and it runs with the
//! model's self-check on, so a step that breaks an invariant of SEMANTICS.md fails it too.
//!
//! After an intended change: `PHASECHECK_UPDATE_GOLDEN=1 cargo test --release -p
//! phasecheck-verifier --test library`, then read the diff of `library.golden`.

/// The allocator the `phasecheck` binary searches with (src/main.rs), so that the searches of
/// this test cost what they cost users (the system allocator made them slower).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use phasecheck_model::rt::Model;
use phasecheck_model::spec::{expand, load};
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{check, CheckOptions, Verdict};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// One spec's record: verdict, counts, and per violation its kind, trace length and message.
fn record(path: &Path, out: &mut String) -> Result<(), String> {
    let spec = load(path, &[]).map_err(|e| format!("{}: {e}", path.display()))?;
    let model = Model::new(spec.proto.clone());
    let opts = CheckOptions {
        past_violation_factor: None,
        self_check: true,
        threads: 2,
        max_states: Some(3_000_000),
        ..CheckOptions::default()
    };
    let r = check(&model, &opts);
    let rel = path.strip_prefix(root()).unwrap_or(path).display().to_string();
    if r.verdict == Verdict::InternalError {
        return Err(format!("{rel}: {:?}", r.internal));
    }
    let found: BTreeSet<ViolationKind> = r.violations.iter().map(|v| v.kind).collect();
    let expected: BTreeSet<ViolationKind> = spec.proto.expect.iter().flatten().copied().collect();
    if r.bound.is_some() || found != expected {
        return Err(format!(
            "{rel}: expected {expected:?}, found {found:?} ({:?}, bound {:?})",
            r.verdict, r.bound
        ));
    }
    let _ = writeln!(
        out,
        "{rel}: {:?}, {} states, {} transitions, {} matched, depth {}",
        r.verdict, r.stats.states, r.stats.transitions, r.stats.matched, r.stats.depth
    );
    for v in &r.violations {
        let _ = writeln!(
            out,
            "  {} after {} steps: {}",
            v.kind.name(),
            v.actions.len(),
            v.message.replace('\n', " / ")
        );
    }
    Ok(())
}

#[test]
fn the_library_keeps_its_verdicts_counts_and_messages() {
    let files = expand(&[root().join("specs")]).unwrap();
    assert!(files.len() >= 100, "the library is {} specs", files.len());
    let mut got = String::new();
    let mut errors = Vec::new();
    for f in &files {
        if let Err(e) = record(f, &mut got) {
            errors.push(e);
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/library.golden");
    if std::env::var_os("PHASECHECK_UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    if want != got {
        let diff: Vec<String> = want
            .lines()
            .zip(got.lines())
            .filter(|(a, b)| a != b)
            .take(8)
            .map(|(a, b)| format!("- {a}\n+ {b}"))
            .collect();
        panic!(
            "the library's record changed ({} lines reviewed, {} now); first differences:\n{}\n(after an intended change: PHASECHECK_UPDATE_GOLDEN=1)",
            want.lines().count(),
            got.lines().count(),
            diff.join("\n")
        );
    }
}
