//! The committed counterexample corpus (counterexamples/) stays in step with specs/: every
//! violating spec has a trace, no trace is stale, and every trace replays to its violation
//! through the real binary. Regenerate with `counterexamples/regenerate.sh`.

use phasecheck_model::lang;
use phasecheck_model::program::lower::lower;
use phasecheck_verifier::tracefile::TraceFile;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_phasecheck");
const REGEN: &str = "run counterexamples/regenerate.sh to regenerate the corpus";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, ext, out);
        } else if p.extension().is_some_and(|e| e == ext) {
            out.push(p);
        }
    }
    out.sort();
}

fn traces() -> Vec<(PathBuf, TraceFile)> {
    let mut files = Vec::new();
    let dir = root().join("counterexamples");
    for e in std::fs::read_dir(&dir).expect("counterexamples/ exists").flatten() {
        if e.path().extension().is_some_and(|x| x == "json") {
            files.push(e.path());
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let t = TraceFile::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}; {REGEN}", f.display()));
            (f, t)
        })
        .collect()
}

/// (protocol name, expected kinds or None for `expect holds` / no expect line).
fn spec_expect(path: &Path) -> (String, Option<Vec<String>>) {
    let src = std::fs::read_to_string(path).unwrap();
    let ast = lang::parse(&src).unwrap_or_else(|_| panic!("{} parses", path.display()));
    let p = lower(&ast, &[]).unwrap_or_else(|_| panic!("{} lowers", path.display()));
    (p.name.clone(), p.expect.map(|ks| ks.iter().map(|k| k.name().to_string()).collect()))
}

#[test]
fn every_violating_spec_has_a_trace_of_an_expected_kind() {
    let traces = traces();
    let mut specs = Vec::new();
    walk(&root().join("specs"), "phase", &mut specs);
    let mut missing = Vec::new();
    for s in &specs {
        let (name, expect) = spec_expect(s);
        let Some(kinds) = expect else { continue };
        let mine: Vec<&TraceFile> = traces.iter().map(|(_, t)| t).filter(|t| t.spec.name == name).collect();
        if mine.is_empty() {
            missing.push(format!("{} (protocol {name})", s.display()));
        }
        for t in mine {
            assert!(
                kinds.iter().any(|k| k == t.violation.kind.name()),
                "{}: trace of kind {} is not in its expect line {kinds:?}; {REGEN}",
                s.display(),
                t.violation.kind
            );
        }
    }
    assert!(
        missing.is_empty(),
        "violating specs without a committed trace: {missing:?}; {REGEN}"
    );
}

#[test]
fn no_trace_is_stale() {
    let dir = root().join("counterexamples");
    for (f, t) in traces() {
        let spec = dir.join(&t.spec.path);
        let src = std::fs::read_to_string(&spec)
            .unwrap_or_else(|e| panic!("{}: its spec {} is gone ({e}); {REGEN}", f.display(), spec.display()));
        if let Err(e) = t.check_source(&src) {
            panic!("{}: stale trace: {e}; {REGEN}", f.display());
        }
        let expected = format!("{}.{}.json", t.spec.name, t.violation.kind.name());
        assert_eq!(
            f.file_name().unwrap().to_str().unwrap(),
            expected,
            "trace file named after protocol and kind"
        );
    }
}

#[test]
fn every_trace_replays_to_its_violation() {
    let traces = traces();
    assert!(!traces.is_empty(), "the corpus is empty; {REGEN}");
    for (f, t) in traces {
        let out = Command::new(BIN).arg("replay").arg(&f).current_dir(root()).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: replay should reproduce {} (exit 1); stderr: {}",
            f.display(),
            t.violation.kind,
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(&format!("reproduced {}", t.violation.kind)), "{stdout}");
    }
}
