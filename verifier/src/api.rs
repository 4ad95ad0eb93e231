//! The library API for users' own tests: build or parse a spec (`phasecheck_model::api`,
//! re-exported here), check it exhaustively, read the verdict, the violations and their traces.
//!
//! This facade lives in the verifier crate because checking is the search, which depends on the
//! model crate (the model cannot call it). With the model's `proptest` feature,
//! `phasecheck_model::strategies` generates protocol parameters or whole protocols.
//!
//! The example below is the README's (`docs/api-example.md`, kept identical to the README by a
//! test): a user's proptest that checks a pipeline spec for random STAGES/ITERS/consumers.
#![doc = include_str!("../../docs/api-example.md")]

pub use crate::search::{Bound, CheckOptions, Found, Verdict};
pub use phasecheck_model::api::{parse_spec, Loaded, SpecBuilder};
pub use phasecheck_model::ViolationKind;

use crate::search::Report;
use phasecheck_model::rt::Model;

/// The result of checking one spec.
#[derive(Clone, Debug)]
pub struct Checked {
    pub report: Report,
}

impl Checked {
    /// Every interleaving was explored and nothing was found.
    pub fn holds(&self) -> bool {
        self.report.verdict == Verdict::Holds
    }

    pub fn verdict(&self) -> Verdict {
        self.report.verdict
    }

    /// The violation kinds found (their stable names: `deadlock`, `stale-read`, ...).
    pub fn kinds(&self) -> Vec<&'static str> {
        self.report.violations.iter().map(|v| v.kind.name()).collect()
    }

    /// Each violation found, with its shortest trace as model actions.
    pub fn violations(&self) -> &[Found] {
        &self.report.violations
    }

    /// One line: verdict, kinds and messages, states explored.
    pub fn summary(&self) -> String {
        let v: Vec<String> = self
            .report
            .violations
            .iter()
            .map(|f| format!("{}: {}", f.kind.name(), f.message))
            .collect();
        format!(
            "{:?} after {} states{}{}",
            self.report.verdict,
            self.report.stats.states,
            if v.is_empty() { "" } else { "; " },
            v.join("; ")
        )
    }

    /// The trace of violation `i`, one step a line: who, which statement, what it observed.
    pub fn trace_text(&self, spec: &Loaded, i: usize) -> String {
        let f = &self.report.violations[i];
        let model = Model::new(spec.proto.clone());
        match crate::tracefile::build(&model, &spec.source, "<api>", f.kind, &f.actions) {
            Ok(t) => t
                .steps
                .iter()
                .map(|s| {
                    let obs: Vec<String> = s.observed.iter().map(|o| crate::tracefile::obs_text(&t, o)).collect();
                    format!(
                        "{:>3} {:<16} {}  = {}\n",
                        s.step,
                        crate::tracefile::actor(s),
                        s.statement,
                        obs.join("; ")
                    )
                })
                .collect(),
            Err(e) => format!("(the trace could not be rebuilt: {e})\n"),
        }
    }
}

/// Check a spec exhaustively with default options (no bounds).
pub fn check(spec: &Loaded) -> Checked {
    check_with(spec, &CheckOptions::default())
}

/// Check a spec with bounds (`max_states`, `max_seconds`, `stop_at_first`, ...).
pub fn check_with(spec: &Loaded, opts: &CheckOptions) -> Checked {
    let model = Model::new(spec.proto.clone());
    Checked {
        report: crate::search::check(&model, opts),
    }
}

#[cfg(test)]
mod tests {
    /// The README shows the same example that runs here as a doc-test.
    #[test]
    fn the_readme_example_is_the_doc_tested_one() {
        let example = include_str!("../../docs/api-example.md");
        let readme = include_str!("../../README.md");
        assert!(readme.contains(example), "README.md must contain docs/api-example.md verbatim");
    }
}
