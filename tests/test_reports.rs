//! `phasecheck test` for CI: `--format json` is one object per file with exactly the documented
//! keys, and `--junit FILE` is JUnit XML that a dashboard accepts (checked against the rules of
//! the JUnit schema: element nesting, required attributes, counts that add up, one outcome per
//! test case), with the same rows as the table. `replay` takes the bounds of the search it runs.

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

/// How an attribute's value must look in the JUnit XML schema.
#[derive(Clone, Copy)]
enum Ty {
    /// `xs:string`: any text, possibly empty.
    Text,
    /// A name: non-empty (`xs:token` with a minimum length of one).
    Name,
    /// `xs:int`, not negative (the counts).
    Count,
    /// `xs:decimal`, not negative (seconds).
    Seconds,
    /// `xs:dateTime` without a zone, as the schema's `timestamp` is (`2026-12-01T15:52:44`).
    Timestamp,
}

/// One element of the schema: its attributes (name, type, required) and the children it may
/// hold, in the order of the schema's `xs:sequence` (name, at most one or any number).
struct Element {
    name: &'static str,
    attributes: &'static [(&'static str, Ty, bool)],
    children: &'static [(&'static str, bool)],
    /// Character content allowed (`mixed`), beside whitespace.
    text: bool,
}

const OUTCOME: &[(&str, Ty, bool)] = &[("message", Ty::Text, false), ("type", Ty::Text, false)];

/// The JUnit XML schema that CI dashboards read (the Jenkins/Ant `testsuites` form, with the
/// `skipped` counts and the `file`/`line` of a test case that GitLab and pytest add), as rules.
const SCHEMA: &[Element] = &[
    Element {
        name: "testsuites",
        attributes: &[
            ("name", Ty::Text, false),
            ("tests", Ty::Count, false),
            ("failures", Ty::Count, false),
            ("errors", Ty::Count, false),
            ("skipped", Ty::Count, false),
            ("disabled", Ty::Count, false),
            ("time", Ty::Seconds, false),
            ("timestamp", Ty::Timestamp, false),
        ],
        children: &[("testsuite", true)],
        text: false,
    },
    Element {
        name: "testsuite",
        attributes: &[
            ("name", Ty::Name, true),
            ("tests", Ty::Count, true),
            ("failures", Ty::Count, false),
            ("errors", Ty::Count, false),
            ("skipped", Ty::Count, false),
            ("disabled", Ty::Count, false),
            ("time", Ty::Seconds, false),
            ("timestamp", Ty::Timestamp, false),
            ("hostname", Ty::Name, false),
            ("id", Ty::Text, false),
            ("package", Ty::Text, false),
            ("file", Ty::Text, false),
        ],
        children: &[
            ("properties", false),
            ("testcase", true),
            ("system-out", false),
            ("system-err", false),
        ],
        text: false,
    },
    Element {
        name: "properties",
        attributes: &[],
        children: &[("property", true)],
        text: false,
    },
    Element {
        name: "property",
        attributes: &[("name", Ty::Name, true), ("value", Ty::Text, true)],
        children: &[],
        text: false,
    },
    Element {
        name: "testcase",
        attributes: &[
            ("name", Ty::Name, true),
            ("classname", Ty::Name, false),
            ("time", Ty::Seconds, false),
            ("assertions", Ty::Count, false),
            ("status", Ty::Text, false),
            ("file", Ty::Text, false),
            ("line", Ty::Count, false),
        ],
        children: &[
            ("skipped", false),
            ("error", true),
            ("failure", true),
            ("system-out", true),
            ("system-err", true),
        ],
        text: false,
    },
    Element {
        name: "skipped",
        attributes: &[("message", Ty::Text, false)],
        children: &[],
        text: true,
    },
    Element {
        name: "failure",
        attributes: OUTCOME,
        children: &[],
        text: true,
    },
    Element {
        name: "error",
        attributes: OUTCOME,
        children: &[],
        text: true,
    },
    Element {
        name: "system-out",
        attributes: &[],
        children: &[],
        text: true,
    },
    Element {
        name: "system-err",
        attributes: &[],
        children: &[],
        text: true,
    },
];

fn value_fits(ty: Ty, v: &str) -> bool {
    match ty {
        Ty::Text => true,
        Ty::Name => !v.trim().is_empty() && v.trim() == v && !v.contains("  "),
        Ty::Count => v.parse::<i32>().is_ok_and(|n| n >= 0),
        Ty::Seconds => {
            let (int, frac) = v.split_once('.').unwrap_or((v, "0"));
            !int.is_empty() && int.bytes().all(|b| b.is_ascii_digit()) && !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit())
        }
        Ty::Timestamp => {
            let b = v.as_bytes();
            b.len() >= 19
                && b.iter().enumerate().all(|(i, c)| match i {
                    4 | 7 => *c == b'-',
                    10 => *c == b'T',
                    13 | 16 => *c == b':',
                    _ if i < 19 => c.is_ascii_digit(),
                    _ => c.is_ascii_digit() || *c == b'.',
                })
        }
    }
}

/// Every rule of `SCHEMA` on one element and, recursively, its children: the element is
/// declared, each attribute is one it declares and of its type, the required ones are there,
/// the children come in the declared order and number, no stray text.
fn validate(n: roxmltree::Node, path: &str) -> Result<(), String> {
    let name = n.tag_name().name();
    let here = format!("{path}/{name}");
    let el = SCHEMA.iter().find(|e| e.name == name).ok_or(format!("{here}: no such element"))?;
    for a in n.attributes() {
        let (_, ty, _) = el
            .attributes
            .iter()
            .find(|(k, _, _)| *k == a.name())
            .ok_or(format!("{here}: attribute {} is not in the schema", a.name()))?;
        if !value_fits(*ty, a.value()) {
            return Err(format!("{here}: {}=\"{}\" is not a valid value", a.name(), a.value()));
        }
    }
    for (k, _, required) in el.attributes {
        if *required && n.attribute(*k).is_none() {
            return Err(format!("{here}: lacks the required attribute {k}"));
        }
    }
    // The children against the sequence: each child matches the current or a later item.
    let mut at = 0;
    let mut seen_here = 0;
    for c in n.children() {
        if c.is_text() {
            if !el.text && !c.text().unwrap_or("").trim().is_empty() {
                return Err(format!("{here}: text where the schema allows none"));
            }
            continue;
        }
        if !c.is_element() {
            continue;
        }
        let cn = c.tag_name().name();
        let Some(k) = (at..el.children.len()).find(|&k| el.children[k].0 == cn) else {
            return Err(format!(
                "{here}: <{cn}> is not allowed here (after {:?})",
                el.children.get(at).map(|c| c.0)
            ));
        };
        if k != at {
            seen_here = 0;
        }
        at = k;
        seen_here += 1;
        if !el.children[k].1 && seen_here > 1 {
            return Err(format!("{here}: more than one <{cn}>"));
        }
        validate(c, &here)?;
    }
    Ok(())
}

/// The JUnit file is valid under the schema's rules, and its counts add up (what a dashboard
/// shows): per suite and in all, the tests, failures, errors and skipped are those of its
/// cases, each case with at most one outcome. Returns (tests, failures, skipped).
fn check_junit(xml: &str) -> (usize, usize, usize) {
    let doc = roxmltree::Document::parse(xml).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    if let Err(e) = validate(root, "") {
        panic!("not valid JUnit XML: {e}\n{xml}");
    }
    let num = |n: roxmltree::Node, a: &str| -> usize {
        n.attribute(a)
            .unwrap_or_else(|| panic!("<{}> lacks {a}", n.tag_name().name()))
            .parse()
            .unwrap()
    };
    let (mut tests, mut failures, mut skipped) = (0, 0, 0);
    for suite in root.children().filter(|n| n.is_element()) {
        let cases: Vec<_> = suite.children().filter(|n| n.tag_name().name() == "testcase").collect();
        let (mut f, mut e, mut s) = (0, 0, 0);
        for c in &cases {
            let outcomes: Vec<_> = c
                .children()
                .filter(|n| ["failure", "error", "skipped"].contains(&n.tag_name().name()))
                .collect();
            assert!(outcomes.len() <= 1, "one outcome per test case");
            if let Some(o) = outcomes.first() {
                match o.tag_name().name() {
                    "failure" => f += 1,
                    "error" => e += 1,
                    _ => s += 1,
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

/// The validator rejects what the schema rejects (so that its pass on our files means something).
#[test]
fn the_junit_rules_reject_what_the_schema_rejects() {
    let ok = r#"<testsuites tests="1"><testsuite name="s" tests="1" time="0.5"><testcase name="a" classname="s" time="1.250"/></testsuite></testsuites>"#;
    let parse = |x: &str| validate(roxmltree::Document::parse(x).unwrap().root_element(), "");
    assert_eq!(parse(ok), Ok(()));
    for (bad, why) in [
        (ok.replace(r#"time="1.250""#, r#"time="1,25""#), "a decimal time"),
        (ok.replace(r#"time="0.5""#, r#"time="-1.0""#), "a negative time"),
        (ok.replace(r#"tests="1" time"#, r#"tests="one" time"#), "an integer count"),
        (ok.replace(r#"name="s" tests"#, r#"tests"#), "a suite's name is required"),
        (ok.replace(r#"name="a" "#, ""), "a case's name is required"),
        (
            ok.replace("<testcase ", "<testcase flaky=\"1\" "),
            "an attribute outside the schema",
        ),
        (
            ok.replace("/></testsuite>", "><failure/><skipped/></testcase></testsuite>"),
            "skipped comes first",
        ),
        (
            ok.replace("/></testsuite>", "><skipped/><skipped/></testcase></testsuite>"),
            "one skipped",
        ),
        (
            ok.replace("</testsuite>", "<properties/></testsuite>"),
            "properties before the cases",
        ),
        (
            ok.replace("<testsuite ", "<testrun ").replace("</testsuite>", "</testrun>"),
            "an unknown element",
        ),
        (
            ok.replace("</testsuite></testsuites>", "</testsuite>stray</testsuites>"),
            "text in testsuites",
        ),
    ] {
        assert!(parse(&bad).is_err(), "accepted ({why}): {bad}");
    }
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

/// `replay` explores the continuations of a schedule (the fix loop), so it takes `check`'s
/// bounds: `--max-seconds` and `--max-memory` are accepted with and without an edited spec, and
/// a bound it hits stops the search in time, undecided, never "gone".
#[test]
fn replay_takes_the_search_bounds() {
    let trace = "counterexamples/consumer_wrong_parity.stale-read.json";
    let o = phasecheck(&["replay", trace, "--max-seconds", "5", "--max-memory", "512"]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("reproduced"));
    let d = std::env::temp_dir().join(format!("phasecheck-replay-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/specs/guide/double_buffer.phase")).unwrap();
    let huge = d.join("huge.phase");
    std::fs::write(&huge, text.replace("param ITERS = 4", "param ITERS = 4611686018427387904")).unwrap();
    let t0 = std::time::Instant::now();
    let o = phasecheck(&["replay", trace, "--spec", huge.to_str().unwrap(), "--max-seconds", "1"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(t0.elapsed().as_secs_f64() < 4.0, "{:.1} s: {out}", t0.elapsed().as_secs_f64());
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(!out.contains("violation gone"), "{out}");
}

/// The whole library in one CI run: `test specs/ --format json --junit FILE` writes one JSON
/// object per spec file and a JUnit file valid under the schema's rules, with the same files
/// and the same outcomes (a row `ok` is a test case without an outcome, a mismatch a failure,
/// an incomplete row skipped).
#[test]
fn the_library_in_json_and_junit_agree() {
    let d = std::env::temp_dir().join(format!("phasecheck-junit-all-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let xml = d.join("all.xml");
    let o = phasecheck(&["test", "specs/", "--format", "json", "--junit", xml.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    let specs = phasecheck_model::spec::expand(&[PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("specs")]).unwrap();
    assert_eq!(rows.len(), specs.len());
    for r in &rows {
        let keys: BTreeSet<String> = r.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, documented_test_keys());
    }
    let text = std::fs::read_to_string(&xml).unwrap();
    let (tests, failures, skipped) = check_junit(&text);
    assert_eq!(tests, rows.len());
    let count = |x: &str| rows.iter().filter(|r| r["result"] == x).count();
    assert_eq!((failures, skipped), (count("mismatch"), count("incomplete")));
    let doc = roxmltree::Document::parse(&text).unwrap();
    let cases: BTreeSet<String> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "testcase")
        .map(|n| n.attribute("file").unwrap().to_string())
        .collect();
    let files: BTreeSet<String> = rows.iter().map(|r| r["file"].as_str().unwrap().to_string()).collect();
    assert_eq!(cases, files);
}
