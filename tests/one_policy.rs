//! One exploration policy: `check`, `test` and the library API explore the same way for the same
//! options, so an `expect` line written from what one of them reports holds in the others. Each
//! runs on its own (two processes and the API in this one) over every library spec and the
//! real-shape GEMM's planted bugs; they must agree on the verdict, the kinds, the bound and the
//! states stored. A bound given to all three stops all three at the same place, and `test` then
//! calls the row `incomplete` (never a mismatch) while the kinds found so far fit its expect line.

mod common;

use common::{code, phasecheck, text};
use phasecheck_verifier::api::{check_with, parse_spec, CheckOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What each entry point says of one file.
#[derive(Debug, PartialEq, Eq)]
struct Said {
    verdict: String,
    kinds: BTreeSet<String>,
    bound: Option<String>,
    states: u64,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    text(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn names(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect()
}

/// `COMMAND FILES --format json EXTRA`: one JSON object a file; exit 0, 1 or 3 (a bound).
fn json_of(command: &str, files: &[String], extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args: Vec<&str> = vec![command];
    args.extend(files.iter().map(|f| f.as_str()));
    args.extend(["--format", "json"]);
    args.extend(extra);
    let o = phasecheck(&args);
    assert!(matches!(code(&o), 0 | 1 | 3), "{}", text(&o.stderr));
    json_lines(&o.stdout)
}

/// `check FILES --format json EXTRA`, by file.
fn by_check(files: &[String], extra: &[&str]) -> BTreeMap<String, Said> {
    json_of("check", files, extra)
        .into_iter()
        .map(|v| {
            let kinds = v["violations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["kind"].as_str().unwrap().to_string())
                .collect();
            let said = Said {
                verdict: v["verdict"].as_str().unwrap().to_string(),
                kinds,
                bound: v["bound"].as_str().map(str::to_string),
                states: v["stats"]["states"].as_u64().unwrap(),
            };
            (v["file"].as_str().unwrap().to_string(), said)
        })
        .collect()
}

/// `test FILES --format json EXTRA`, by file, with each row's result.
fn by_test(files: &[String], extra: &[&str]) -> BTreeMap<String, (Said, String)> {
    json_of("test", files, extra)
        .into_iter()
        .map(|v| {
            let said = Said {
                verdict: v["verdict"].as_str().unwrap().to_string(),
                kinds: names(&v["found"]),
                bound: v["bound"].as_str().map(str::to_string),
                states: v["states"].as_u64().unwrap(),
            };
            (
                v["file"].as_str().unwrap().to_string(),
                (said, v["result"].as_str().unwrap().to_string()),
            )
        })
        .collect()
}

/// The API with its defaults (and the same bound, where the CLI got one).
fn by_api(file: &str, max_states: Option<usize>) -> Said {
    let source = std::fs::read_to_string(root().join(file)).unwrap();
    let spec = parse_spec(file, &source, &[]).unwrap_or_else(|e| panic!("{e}"));
    let c = check_with(
        &spec,
        &CheckOptions {
            max_states,
            threads: 2,
            ..CheckOptions::default()
        },
    );
    let verdict = match c.verdict() {
        phasecheck_verifier::api::Verdict::Holds => "holds",
        phasecheck_verifier::api::Verdict::Violated => "violated",
        phasecheck_verifier::api::Verdict::Incomplete => "incomplete",
        phasecheck_verifier::api::Verdict::InternalError => "internal-error",
    };
    Said {
        verdict: verdict.to_string(),
        kinds: c.kinds().into_iter().map(str::to_string).collect(),
        bound: c.report.bound.map(|b| b.describe().to_string()),
        states: c.report.stats.states as u64,
    }
}

fn relative(p: &Path) -> String {
    p.strip_prefix(root()).unwrap().display().to_string()
}

fn agree(files: &[String], extra: &[&str], max_states: Option<usize>) -> BTreeMap<String, (Said, String)> {
    let checked = by_check(files, extra);
    let tested = by_test(files, extra);
    assert_eq!(checked.len(), files.len());
    assert_eq!(tested.len(), files.len());
    for f in files {
        let c = &checked[f];
        let (t, _) = &tested[f];
        assert_eq!(c, t, "{f}: check and test differ");
        assert_eq!(c, &by_api(f, max_states), "{f}: check and the API differ");
    }
    tested
}

#[test]
fn check_test_and_the_api_report_the_same_on_the_library() {
    let files: Vec<String> = phasecheck_model::spec::expand(&[root().join("specs")])
        .unwrap()
        .iter()
        .map(|p| relative(p))
        .collect();
    assert!(files.len() > 150, "{} specs", files.len());
    let rows = agree(&files, &["--threads", "2"], None);
    // Every library spec matches its expect line: the kinds `check` reports are those `test` wants.
    let off: Vec<&String> = rows.iter().filter(|(_, (_, r))| r != "ok").map(|(f, _)| f).collect();
    assert!(off.is_empty(), "not ok under `test`: {off:?}");
}

/// The GEMM's bugs at the shape of their files, bounded so that CI can afford them: the three
/// stop at the same state with the same kinds, and a row whose kinds so far fit its expect line
/// is `incomplete`, not a mismatch.
#[test]
fn check_test_and_the_api_report_the_same_on_the_gemm_bugs() {
    let mut files: Vec<String> = std::fs::read_dir(root().join("benches/realshape"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("pingpong_gemm_bug_"))
        .map(|p| relative(&p))
        .collect();
    files.sort();
    assert_eq!(files.len(), 6);
    const BOUND: usize = 20_000;
    let rows = agree(&files, &["--threads", "2", "--max-states", "20000"], Some(BOUND));
    for (f, (said, result)) in &rows {
        match said.bound.as_deref() {
            None => assert_eq!(result, "ok", "{f}: {said:?}"),
            Some(b) => {
                assert_eq!(b, "--max-states", "{f}");
                assert_eq!(result, "incomplete", "{f}: {said:?}");
            }
        }
    }
}

/// The one way to trade kinds for time: `--past-violation-factor` sets aside states past a
/// violation, and then every entry point says so with the bound, `test` calls the row
/// incomplete, and the kinds it found are among those of the full search.
#[test]
fn a_past_violation_allowance_is_a_bound() {
    let f = "specs/mistakes/diverged_warp_commit.phase".to_string();
    let full = &by_check(std::slice::from_ref(&f), &[])[&f];
    assert_eq!(full.bound, None, "{full:?}");
    let cut = &by_check(std::slice::from_ref(&f), &["--past-violation-factor", "2"])[&f];
    assert_eq!(cut.bound.as_deref(), Some("--past-violation-factor"), "{cut:?}");
    assert_eq!(cut.verdict, "violated");
    assert!(
        cut.kinds.is_subset(&full.kinds) && cut.states < full.states,
        "{cut:?} against {full:?}"
    );
    let (t, result) = &by_test(std::slice::from_ref(&f), &["--past-violation-factor", "2"])[&f];
    assert_eq!((t, result.as_str()), (cut, "incomplete"));
    let o = phasecheck(&["check", &f, "--past-violation-factor", "2"]);
    assert!(
        text(&o.stdout).contains("search stopped early at --past-violation-factor"),
        "{}",
        text(&o.stdout)
    );
}
