//! `phasecheck test`: check each file and compare what is found with its `expect` line, as a
//! table (within 100 columns, or `--verbose`), as JSON lines (`--format json`) and as a JUnit
//! file (`--junit FILE`) for CI dashboards.
//!
//! A row is one of four results: `ok`, `MISMATCH` (the search finished and found other kinds),
//! `incomplete` (a bound stopped the search first: nothing was decided, so it is neither a pass
//! nor a mismatch) and `INTERNAL` (the model broke an invariant).

use crate::{bad_input, limits, load, model_for, options, Format, SearchArgs};
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{check, Verdict};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Result {
    Ok,
    Mismatch,
    Incomplete,
    Internal,
}

impl Result {
    fn word(self) -> &'static str {
        match self {
            Result::Ok => "ok",
            Result::Mismatch => "MISMATCH",
            Result::Incomplete => "incomplete",
            Result::Internal => "INTERNAL",
        }
    }
    fn json(self) -> &'static str {
        match self {
            Result::Ok => "ok",
            Result::Mismatch => "mismatch",
            Result::Incomplete => "incomplete",
            Result::Internal => "internal-error",
        }
    }
}

/// One file's row.
struct Row {
    file: String,
    protocol: String,
    /// The `expect` line: `None` when the file has none, `Some([])` for `expect holds`.
    expect: Option<Vec<ViolationKind>>,
    found: BTreeSet<ViolationKind>,
    verdict: Verdict,
    bound: Option<&'static str>,
    internal: Option<String>,
    result: Result,
    states: usize,
    seconds: f64,
}

impl Row {
    fn expected_text(&self) -> String {
        match &self.expect {
            None => "(none)".to_string(),
            Some(ks) if ks.is_empty() => "holds".to_string(),
            Some(ks) => ks.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
        }
    }

    fn found_text(&self) -> String {
        match self.verdict {
            Verdict::Holds => "holds".to_string(),
            Verdict::Incomplete => format!("incomplete ({})", self.bound.unwrap_or("?")),
            Verdict::Violated => {
                let kinds = self.found.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ");
                match self.bound {
                    // Kinds found before a bound stopped the search: what else lies past it is open.
                    Some(b) => format!("{kinds}, then incomplete ({b})"),
                    None => kinds,
                }
            }
            Verdict::InternalError => format!("INTERNAL ERROR [{}]", self.internal.as_deref().unwrap_or("?")),
        }
    }

    fn json(&self) -> serde_json::Value {
        let names = |ks: &mut dyn Iterator<Item = &ViolationKind>| ks.map(|k| k.name()).collect::<Vec<_>>();
        serde_json::json!({
            "file": self.file,
            "protocol": self.protocol,
            "expect": match &self.expect {
                None => serde_json::Value::Null,
                Some(ks) if ks.is_empty() => serde_json::json!("holds"),
                Some(ks) => serde_json::json!(names(&mut ks.iter())),
            },
            "found": names(&mut self.found.iter()),
            "verdict": crate::report::verdict_name(self.verdict),
            "bound": self.bound,
            "result": self.result.json(),
            "states": self.states,
            "seconds": self.seconds,
        })
    }
}

#[derive(clap::Args)]
pub struct TestArgs {
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub search: SearchArgs,
    /// Pass a file when the kinds found are a non-empty subset of its `expect` line (the
    /// default asks for exactly the listed kinds).
    #[arg(long)]
    pub subset: bool,
    /// The full table: every kind expected and found, in columns as wide as they need.
    #[arg(long)]
    pub verbose: bool,
    /// `json`: one object per file per line instead of the table (docs/interfaces.md).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Also write the results as a JUnit XML file (one test case per spec file).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

pub fn run(t: &TestArgs) -> ExitCode {
    let a = &t.search;
    limits::start(a, t.format == Format::Json);
    let specs = match load::load_all(&t.paths, &a.params) {
        Ok(s) => s,
        Err(e) => return bad_input(&e),
    };
    // The same exploration as `check` for the same options (expect lines are written from
    // either): every kind unless a bound is given, and a bound makes a row `incomplete`.
    let opts = options(a);
    let mut rows = Vec::new();
    for spec in &specs {
        let model = model_for(&spec.proto, a);
        let r = limits::search(a, &spec.display, || check(&model, &opts));
        let found: BTreeSet<ViolationKind> = r.violations.iter().map(|v| v.kind).collect();
        let expect = match &spec.proto.expect {
            None if !spec.proto.expect_given => None,
            None => Some(Vec::new()),
            Some(ks) => Some(ks.clone()),
        };
        let decided = match &expect {
            None | Some(_) if r.verdict == Verdict::InternalError => Result::Internal,
            None => ok_if(r.verdict == Verdict::Holds),
            Some(ks) if ks.is_empty() => ok_if(r.verdict == Verdict::Holds),
            Some(ks) => {
                let allowed: BTreeSet<ViolationKind> = ks.iter().copied().collect();
                // Exactly the listed kinds, from a search that finished; `--subset` (and
                // `--stop-at-first`, which finds one kind) accept any non-empty subset.
                if t.subset || opts.stop_at_first {
                    ok_if(!found.is_empty() && found.is_subset(&allowed))
                } else {
                    ok_if(found == allowed)
                }
            }
        };
        // A search stopped by a bound decided nothing beyond what it found: a row that would
        // pass only if the search had finished, or whose kinds so far still fit, is incomplete
        // rather than a mismatch. Kinds outside the expect line are a mismatch either way.
        let result = match decided {
            Result::Internal => Result::Internal,
            _ if r.bound.is_some() && !(opts.stop_at_first && decided == Result::Ok) => {
                let outside = expect.as_ref().is_some_and(|ks| found.iter().any(|k| !ks.contains(k)));
                if outside || (expect.is_none() && !found.is_empty()) {
                    Result::Mismatch
                } else {
                    Result::Incomplete
                }
            }
            d => d,
        };
        if result == Result::Internal {
            let i = r.internal.as_ref();
            noteln!("{}: {}", spec.display, i.map(|i| i.describe()).unwrap_or_default());
        }
        rows.push(Row {
            file: spec.display.clone(),
            protocol: spec.proto.name.clone(),
            expect,
            found,
            verdict: r.verdict,
            bound: r.bound.map(|b| b.describe()),
            internal: r.internal.as_ref().map(|i| i.rule.to_string()),
            result,
            states: r.stats.states,
            seconds: r.stats.seconds,
        });
    }
    let count = |x: Result| rows.iter().filter(|r| r.result == x).count();
    let (failed, incomplete, internal) = (count(Result::Mismatch), count(Result::Incomplete), count(Result::Internal));
    if t.format == Format::Json {
        for r in &rows {
            crate::out::stdout_raw(&format!("{}\n", r.json()));
        }
    } else {
        if t.verbose {
            print_wide(&rows);
        } else {
            print_table(&rows);
        }
        let total: f64 = rows.iter().map(|r| r.seconds).sum();
        let open = if incomplete > 0 {
            format!(", {incomplete} incomplete")
        } else {
            String::new()
        };
        sayln!(
            "{} passed, {} failed{open} ({} specs, {:.1} s of search)",
            count(Result::Ok),
            failed + internal,
            rows.len(),
            total
        );
    }
    if let Some(path) = &t.junit {
        if let Err(e) = phasecheck_model::io::write_atomic(path, junit(&rows).as_bytes()) {
            noteln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    ExitCode::from(if internal > 0 {
        5
    } else if failed > 0 {
        1
    } else if incomplete > 0 {
        3
    } else {
        0
    })
}

fn ok_if(b: bool) -> Result {
    if b {
        Result::Ok
    } else {
        Result::Mismatch
    }
}

fn print_wide(rows: &[Row]) {
    let cells: Vec<(String, String, String)> = rows.iter().map(|r| (r.file.clone(), r.expected_text(), r.found_text())).collect();
    let w0 = cells.iter().map(|c| c.0.chars().count()).max().unwrap_or(4).max(4);
    let w1 = cells.iter().map(|c| c.1.chars().count()).max().unwrap_or(6).max(6);
    let w2 = cells.iter().map(|c| c.2.chars().count()).max().unwrap_or(5).max(5);
    sayln!("{:<w0$}  {:<w1$}  {:<w2$}  {:>9}  result", "spec", "expect", "found", "states");
    for (r, (f, e, g)) in rows.iter().zip(&cells) {
        sayln!("{f:<w0$}  {e:<w1$}  {g:<w2$}  {:>9}  {}", r.states, r.result.word());
    }
}

/// The width `phasecheck test` keeps to without `--verbose`.
const TEST_WIDTH: usize = 100;

/// `s` cut to its last `w` characters, with `…` where it was cut, so a path keeps its file name.
fn clip_left(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    format!("…{}", s.chars().skip(n - w.saturating_sub(1)).collect::<String>())
}

/// `text` broken at `, ` into lines of at most `w` characters (a word longer than `w` stands
/// alone on its line): nothing is cut, a long list of kinds wraps.
fn wrap(text: &str, w: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for (i, word) in text.split(", ").enumerate() {
        let piece = if i == 0 { word.to_string() } else { format!(", {word}") };
        let cur = lines.last_mut().expect("one line at least");
        if !cur.is_empty() && cur.chars().count() + piece.chars().count() > w {
            // The comma stays at the end of the line it closes.
            cur.push(',');
            lines.push(word.to_string());
        } else {
            cur.push_str(&piece);
        }
    }
    lines
}

/// The `test` table within `TEST_WIDTH` columns: result, states, spec and, per row, what was
/// found in a few words — a matching row says how many kinds, any other row says what differs,
/// wrapped onto continuation lines rather than cut. `--verbose` prints every kind in one line.
fn print_table(rows: &[Row]) {
    let spec_w = rows.iter().map(|r| r.file.chars().count()).max().unwrap_or(4).clamp(4, 52);
    sayln!("{:<10}  {:>8}  {:<spec_w$}  found", "result", "states", "spec");
    let indent = 10 + 2 + 8 + 2 + spec_w + 2;
    for r in rows {
        let (e, g) = (r.expected_text(), r.found_text());
        let found = match r.result {
            Result::Ok => match r.found.len() {
                _ if g == "holds" => "holds".to_string(),
                1 => g.clone(),
                n if r.expect.as_ref().is_some_and(|ks| ks.len() == n) => format!("{n} kinds, as expected"),
                n => format!("{n} of the {} expected kinds", r.expect.as_ref().map_or(0, |ks| ks.len())),
            },
            _ => format!("{g} (expected {e})"),
        };
        let lines = wrap(&found, TEST_WIDTH.saturating_sub(indent).max(20));
        sayln!(
            "{:<10}  {:>8}  {:<spec_w$}  {}",
            r.result.word(),
            r.states,
            clip_left(&r.file, spec_w),
            lines[0]
        );
        for l in &lines[1..] {
            sayln!("{:indent$}{l}", "");
        }
    }
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no way to carry other control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The results as JUnit XML: one `testsuite` per folder of spec files, one `testcase` per file
/// (`classname` the folder, `name` the file); a mismatch is a `failure`, an internal error an
/// `error`, an incomplete search `skipped` with its bound (not decided, so neither).
fn junit(rows: &[Row]) -> String {
    let folder = |f: &str| {
        Path::new(f)
            .parent()
            .map(|p| p.display().to_string())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| ".".to_string())
    };
    let mut suites: Vec<(String, Vec<&Row>)> = Vec::new();
    for r in rows {
        let d = folder(&r.file);
        match suites.iter_mut().find(|(n, _)| *n == d) {
            Some((_, v)) => v.push(r),
            None => suites.push((d, vec![r])),
        }
    }
    let n = |rs: &[&Row], x: Result| rs.iter().filter(|r| r.result == x).count();
    let secs = |rs: &[&Row]| rs.iter().map(|r| r.seconds).sum::<f64>();
    let all: Vec<&Row> = rows.iter().collect();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites name=\"phasecheck test\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\">\n",
        all.len(),
        n(&all, Result::Mismatch),
        n(&all, Result::Internal),
        n(&all, Result::Incomplete),
        secs(&all)
    ));
    for (name, rs) in &suites {
        x.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.3}\">\n",
            xml_escape(name),
            rs.len(),
            n(rs, Result::Mismatch),
            n(rs, Result::Internal),
            n(rs, Result::Incomplete),
            secs(rs)
        ));
        for r in rs {
            let file = Path::new(&r.file)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            x.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" file=\"{}\" time=\"{:.3}\"",
                xml_escape(name),
                xml_escape(&file),
                xml_escape(&r.file),
                r.seconds
            ));
            let body = format!(
                "protocol {}: expect {}; found {} ({} states)",
                r.protocol,
                r.expected_text(),
                r.found_text(),
                r.states
            );
            match r.result {
                Result::Ok => x.push_str("/>\n"),
                Result::Mismatch => x.push_str(&format!(
                    ">\n      <failure message=\"found {} (expected {})\" type=\"mismatch\">{}</failure>\n    </testcase>\n",
                    xml_escape(&r.found_text()),
                    xml_escape(&r.expected_text()),
                    xml_escape(&body)
                )),
                Result::Internal => x.push_str(&format!(
                    ">\n      <error message=\"{}\" type=\"internal-error\">{}</error>\n    </testcase>\n",
                    xml_escape(&r.found_text()),
                    xml_escape(&body)
                )),
                Result::Incomplete => x.push_str(&format!(
                    ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    xml_escape(&r.found_text())
                )),
            }
        }
        x.push_str("  </testsuite>\n");
    }
    x.push_str("</testsuites>\n");
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_kind_and_stays_within_the_width() {
        let text = "data-race, stale-read, missing-wait, stale-wait, deadlock, lifetime, over-arrival (expected holds)";
        let lines = wrap(text, 30);
        assert!(lines.iter().all(|l| l.chars().count() <= 31), "{lines:?}");
        assert_eq!(lines.join(" "), text);
    }

    #[test]
    fn xml_text_is_escaped() {
        assert_eq!(xml_escape("a<b & \"c\"\u{1b}"), "a&lt;b &amp; &quot;c&quot;\\u{1b}");
    }
}
