//! `phasecheck test` for CI: `--format json` is one object per file with exactly the documented
//! keys, and `--junit FILE` is JUnit XML that a dashboard accepts (checked against the rules of
//! the JUnit schema: element nesting, required attributes, counts that add up, one outcome per
//! test case), with the same rows as the table.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_phasecheck");

fn phasecheck(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn documented_test_keys() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/interfaces.md")).unwrap();
    let open = "<!-- keys:test -->`";
    let at = doc.find(open).expect("keys:test documented") + open.len();
    let end = doc[at..].find('`').unwrap();
    doc[at..at + end].split_whitespace().map(str::to_string).collect()
}

#[test]
fn test_json_has_one_object_per_file_with_the_documented_keys() {
    let o = phasecheck(&[
        "test",
        "specs/guide",
        "specs/mistakes/consumer_wrong_parity.phase",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/guide"))
        .unwrap()
        .count()
        + 1;
    assert_eq!(rows.len(), files);
    for r in &rows {
        let keys: BTreeSet<String> = r.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, documented_test_keys());
        assert_eq!(r["result"], "ok");
    }
    let bug = rows.iter().find(|r| r["protocol"] == "consumer_wrong_parity").unwrap();
    assert_eq!(bug["found"].as_array().unwrap().len(), 6);
    assert_eq!(bug["verdict"], "violated");
}

#[test]
fn a_bound_makes_a_row_incomplete_not_a_mismatch() {
    let o = phasecheck(&["test", "specs/guide/double_buffer.phase", "--max-states", "20", "--format", "json"]);
    assert_eq!(o.status.code(), Some(3));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["result"], "incomplete");
    assert_eq!(r["bound"], "--max-states");
    let table =
        String::from_utf8_lossy(&phasecheck(&["test", "specs/guide/double_buffer.phase", "--max-states", "20"]).stdout).into_owned();
    assert!(table.contains("incomplete") && !table.contains("MISMATCH"), "{table}");
}

/// The structural rules of the JUnit XML schema (the one CI dashboards validate against).
fn check_junit(xml: &str) -> (usize, usize, usize) {
    let doc = roxmltree::Document::parse(xml).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let num = |n: roxmltree::Node, a: &str| -> usize {
        n.attribute(a)
            .unwrap_or_else(|| panic!("<{}> lacks {a}", n.tag_name().name()))
            .parse()
            .unwrap()
    };
    let (mut tests, mut failures, mut skipped) = (0, 0, 0);
    for suite in root.children().filter(|n| n.is_element()) {
        assert_eq!(suite.tag_name().name(), "testsuite");
        assert!(suite.attribute("name").is_some_and(|n| !n.is_empty()));
        let time: f64 = suite.attribute("time").expect("time").parse().expect("a decimal time");
        assert!(time >= 0.0);
        let cases: Vec<_> = suite.children().filter(|n| n.is_element()).collect();
        let mut f = 0;
        let mut e = 0;
        let mut s = 0;
        for c in &cases {
            assert_eq!(c.tag_name().name(), "testcase");
            assert!(c.attribute("name").is_some() && c.attribute("classname").is_some());
            let outcomes: Vec<_> = c.children().filter(|n| n.is_element()).collect();
            assert!(outcomes.len() <= 1, "one outcome per test case");
            if let Some(o) = outcomes.first() {
                match o.tag_name().name() {
                    "failure" => f += 1,
                    "error" => e += 1,
                    "skipped" => s += 1,
                    other => panic!("<{other}> is not a JUnit test outcome"),
                }
                if o.tag_name().name() != "skipped" {
                    assert!(o.attribute("message").is_some() && o.attribute("type").is_some());
                }
            }
        }
        assert_eq!(num(suite, "tests"), cases.len());
        assert_eq!(num(suite, "failures"), f);
        assert_eq!(num(suite, "errors"), e);
        assert_eq!(num(suite, "skipped"), s);
        tests += cases.len();
        failures += f;
        skipped += s;
    }
    assert_eq!(num(root, "tests"), tests);
    assert_eq!(num(root, "failures"), failures);
    assert_eq!(num(root, "skipped"), skipped);
    (tests, failures, skipped)
}

#[test]
fn junit_output_follows_the_schema_and_counts_every_row() {
    let d = std::env::temp_dir().join(format!("phasecheck-junit-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let ok = d.join("ok.xml");
    let o = phasecheck(&["test", "specs/guide", "specs/kinds", "--junit", ok.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0));
    let (tests, failures, skipped) = check_junit(&std::fs::read_to_string(&ok).unwrap());
    let n = |dir: &str| {
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir))
            .unwrap()
            .count()
    };
    assert_eq!((tests, failures, skipped), (n("specs/guide") + n("specs/kinds"), 0, 0));

    // A mismatch (the fixed double buffer told to expect a deadlock) and an incomplete row (a
    // billion rounds under a 2,000-state bound).
    let spec = d.join("wrong_expect.phase");
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/guide/double_buffer.phase")).unwrap();
    std::fs::write(&spec, text.replace("expect holds", "expect deadlock")).unwrap();
    let deep = d.join("deep.phase");
    std::fs::write(&deep, text.replace("param ITERS = 4", "param ITERS = 1000000000")).unwrap();
    let bad = d.join("bad.xml");
    let o = phasecheck(&[
        "test",
        spec.to_str().unwrap(),
        deep.to_str().unwrap(),
        "--junit",
        bad.to_str().unwrap(),
        "--max-states",
        "2000",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let xml = std::fs::read_to_string(&bad).unwrap();
    assert_eq!(check_junit(&xml), (2, 1, 1), "{xml}");
    assert!(xml.contains("type=\"mismatch\""), "{xml}");
}
