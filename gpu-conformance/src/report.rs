//! The report: one [`Case`] per (spec, backend, mode) and one [`SpecRow`] per spec, written as
//! JSON and as a Markdown table; and the section of docs/hardware-notes.md listing what the model
//! allows but the GPU never showed.

use crate::compare::{Litmus, ReplayInfo, Tally, Verdict};
use std::collections::BTreeMap;
use std::path::Path;

/// At most this many never-seen outcomes are listed per spec in the hardware-notes section.
pub const NOTES_LIST_MAX: usize = 12;

/// One row of the report.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Case {
    pub spec: String,
    pub backend: String,
    pub mode: String,
    pub runs: usize,
    pub allowed: serde_json::Value,
    pub observed: BTreeMap<String, usize>,
    /// `within`, `unchecked` or `OUTSIDE`; null when nothing was judged (not expressible, not
    /// run: budget, model error, no GPU, planned only).
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// For `unchecked`: why the model's answer constrains nothing. For a null verdict: why
    /// nothing was judged.
    #[serde(default)]
    pub why: String,
    /// `verdict != OUTSIDE` (null when nothing was judged): the field earlier reports had, kept
    /// so that they compare. An `unchecked` case is `true` here: read `verdict`.
    pub observed_within_model: Option<bool>,
    pub bug_manifested: Option<bool>,
    pub note: String,
    /// Blocks by judgement.
    #[serde(default)]
    pub blocks: Option<Tally>,
    /// Replay cases: how the blocks went against the trace.
    #[serde(default)]
    pub replay: Option<ReplayInfo>,
    /// Stress cases: allowed, observed and allowed-but-never-seen outcomes.
    #[serde(default)]
    pub litmus: Option<Litmus>,
}

impl Case {
    pub fn file_name(&self) -> String {
        Path::new(&self.spec)
            .file_name()
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or(self.spec.clone())
    }
}

/// What the model-side stages did for one spec.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct SpecRow {
    pub spec: String,
    /// `ran`, `planned` (`--plan-only`), `not run (budget: ...)`, or `model error: ...`.
    pub status: String,
    /// The allowed set's summary (empty when the enumeration did not finish).
    pub allowed: String,
    /// The traces replayed: `KIND (N steps) from SOURCE`.
    pub traces: Vec<String>,
    /// Seconds per stage: `model` (outcome enumeration), `traces` (search), `codegen`.
    pub seconds: BTreeMap<String, f64>,
}

/// The whole results file.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub device: String,
    pub driver: String,
    pub date: String,
    pub wall_seconds: f64,
    #[serde(default)]
    pub specs: Vec<SpecRow>,
    pub cases: Vec<Case>,
}

/// Today's date (UTC), `YYYY-MM-DD`.
pub fn today() -> String {
    let f = time::macros::format_description!("[year]-[month]-[day]");
    time::OffsetDateTime::now_utc()
        .date()
        .format(&f)
        .unwrap_or_else(|_| "unknown-date".into())
}

impl Report {
    pub fn count(&self, v: Verdict) -> usize {
        self.cases.iter().filter(|c| c.verdict == Some(v)).count()
    }

    /// Write `out` (JSON) and `out` with extension `.md`.
    pub fn write(&self, out: &Path) -> std::io::Result<()> {
        if let Some(dir) = out.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)?;
            }
        }
        // Atomically: a report kept current during a run is never seen half written.
        let json = serde_json::to_string_pretty(self).expect("reports serialize") + "\n";
        phasecheck_model::io::write_atomic(out, json.as_bytes())?;
        phasecheck_model::io::write_atomic(&out.with_extension("md"), self.markdown().as_bytes())
    }

    /// One row per spec, one cell per backend: the table a reviewer reads first.
    fn by_spec(&self) -> String {
        let mut specs: Vec<&str> = Vec::new();
        for c in &self.cases {
            if !specs.contains(&c.spec.as_str()) {
                specs.push(&c.spec);
            }
        }
        let cases = &self.cases;
        let cell = |spec: &str, backend: &str| -> String {
            let mine: Vec<&Case> = cases.iter().filter(|c| c.spec == spec && c.backend == backend).collect();
            if mine.is_empty() {
                return "-".into();
            }
            let ran: Vec<&&Case> = mine.iter().filter(|c| c.verdict.is_some()).collect();
            if ran.is_empty() {
                return mine[0].why.split(':').next().unwrap_or("not run").to_string();
            }
            let n = |v: Verdict| ran.iter().filter(|c| c.verdict == Some(v)).count();
            let shown = |mode: &str| {
                let m: Vec<&&&Case> = ran.iter().filter(|c| c.mode.starts_with(mode)).collect();
                if m.iter().all(|c| c.bug_manifested.is_none()) {
                    "-"
                } else if m.iter().any(|c| c.bug_manifested == Some(true)) {
                    "yes"
                } else {
                    "no"
                }
            };
            let mut verdict = Vec::new();
            if n(Verdict::Outside) > 0 {
                verdict.push(format!("**{} OUTSIDE**", n(Verdict::Outside)));
            }
            if n(Verdict::NotForced) > 0 {
                verdict.push(format!("{} not forced", n(Verdict::NotForced)));
            }
            if n(Verdict::Unchecked) > 0 {
                verdict.push(format!("{} unchecked", n(Verdict::Unchecked)));
            }
            if n(Verdict::Within) > 0 {
                verdict.push(format!("{} within", n(Verdict::Within)));
            }
            format!(
                "{} of {}; bug: replay {}, stress {}",
                verdict.join(", "),
                ran.len(),
                shown("replay"),
                shown("stress")
            )
        };
        let mut s = String::from("| spec | ptx | libcu |\n|---|---|---|\n");
        for spec in specs {
            s.push_str(&format!("| {spec} | {} | {} |\n", cell(spec, "ptx"), cell(spec, "libcu")));
        }
        s
    }

    pub fn markdown(&self) -> String {
        let cases = &self.cases;
        let mut s = format!("# GPU conformance: {}, driver {}, {}\n\n", self.device, self.driver, self.date);
        let not_judged = cases.iter().filter(|c| c.verdict.is_none()).count();
        let bugs = cases.iter().filter(|c| c.bug_manifested == Some(true)).count();
        let bug_cases = cases.iter().filter(|c| c.bug_manifested.is_some()).count();
        let emulated = cases.iter().filter(|c| c.note.contains("emulated")).count();
        s.push_str(&format!(
            "{} cases: {} within the model, {} unchecked (no evidence: the model allows anything there, or its enumeration stopped at a budget first), {} OUTSIDE, {} not forced (the replay's forcing made the hang it shows: counted apart), {not_judged} not judged; {emulated} cases emulate a rule in software; bug shown in {bugs}/{bug_cases} buggy cases; {:.1} s wall.\n\n",
            cases.len(),
            self.count(Verdict::Within),
            self.count(Verdict::Unchecked),
            self.count(Verdict::Outside),
            self.count(Verdict::NotForced),
            self.wall_seconds
        ));
        let (mut rep, mut blocks, mut left) = (0, 0, 0);
        for r in cases.iter().filter_map(|c| c.replay.as_ref()) {
            rep += r.reproduced;
            blocks += r.blocks;
            left += r.left;
        }
        let never: usize = cases.iter().filter_map(|c| c.litmus.as_ref()).map(|l| l.never_seen_count).sum();
        let never_cases = cases
            .iter()
            .filter(|c| c.litmus.as_ref().is_some_and(|l| l.never_seen_count > 0))
            .count();
        s.push_str(&format!(
            "Replay: {rep}/{blocks} blocks reproduced as forced, {left} left the trace (judged from where they left). Stress: {never} allowed outcomes never seen, in {never_cases} cases.\n\n"
        ));
        let odd: Vec<&SpecRow> = self.specs.iter().filter(|r| r.status != "ran" && r.status != "planned").collect();
        if !odd.is_empty() {
            s.push_str("## Specs not run\n\n| spec | status |\n|---|---|\n");
            for r in odd {
                s.push_str(&format!("| {} | {} |\n", r.spec, r.status.replace('|', "/")));
            }
            s.push('\n');
        }
        s.push_str(&self.by_spec());
        let unchecked: Vec<&Case> = cases.iter().filter(|c| c.verdict == Some(Verdict::Unchecked)).collect();
        if !unchecked.is_empty() {
            s.push_str("\n## Unchecked cases (never counted as agreement)\n\n| spec | backend | mode | why |\n|---|---|---|---|\n");
            for c in unchecked {
                s.push_str(&format!(
                    "| {} | {} | {} | {} |\n",
                    c.file_name(),
                    c.backend,
                    c.mode,
                    c.why.replace('|', "/")
                ));
            }
        }
        let left: Vec<&Case> = cases.iter().filter(|c| c.replay.as_ref().is_some_and(|r| r.left > 0)).collect();
        if !left.is_empty() {
            s.push_str("\n## Replays that left their trace\n\nBlocks that did not show the forced outcome, judged from where they left; the reason is read off the trace at that step.\n\n| spec | backend | trace | as forced | left after step (blocks) | why |\n|---|---|---|---|---|---|\n");
            for c in left {
                let r = c.replay.as_ref().unwrap();
                let at: Vec<String> = r.left_at.iter().map(|(k, n)| format!("{k} ({n})")).collect();
                let why = if r.left_why.is_empty() {
                    "not recorded (an older report)"
                } else {
                    &r.left_why
                };
                s.push_str(&format!(
                    "| {} | {} | {} | {}/{} | {} | {} |\n",
                    c.file_name(),
                    c.backend,
                    r.trace,
                    r.reproduced,
                    r.blocks,
                    at.join(", "),
                    why.replace('|', "/")
                ));
            }
        }
        s.push_str("\n## Every case\n\n");
        s.push_str("| spec | backend | mode | runs | outcomes seen | verdict | as forced | allowed never seen | bug shown | note |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for c in cases {
            let verdict = match c.verdict {
                Some(Verdict::Outside) => "**OUTSIDE**".to_string(),
                Some(v) => v.name().to_string(),
                None => "-".to_string(),
            };
            let forced = c
                .replay
                .as_ref()
                .map(|r| format!("{}/{}", r.reproduced, r.blocks))
                .unwrap_or_else(|| "-".into());
            let never = c
                .litmus
                .as_ref()
                .map(|l| format!("{}/{}", l.never_seen_count, l.allowed_count))
                .unwrap_or_else(|| "-".into());
            let note = if c.verdict.is_none() && !c.why.is_empty() && !c.note.contains(&c.why) {
                format!("{}; {}", c.why, c.note)
            } else {
                c.note.clone()
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {verdict} | {forced} | {never} | {} | {} |\n",
                c.file_name(),
                c.backend,
                c.mode,
                c.runs,
                c.observed.len(),
                match c.bug_manifested {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                },
                note.trim_end_matches("; ").replace('|', "/")
            ));
        }
        s
    }

    /// The section of docs/hardware-notes.md: per spec, the outcomes the model allows that no
    /// stress block showed on any backend, each with the reason computed for it.
    pub fn hardware_notes_section(&self) -> String {
        let mut s = format!(
            "## Allowed by the model, never seen ({}, {}, stress)\n\nGenerated by `phasecheck gpu notes REPORT.json` from the report's `litmus` fields: per spec, the\nconcrete outcomes the model allows that no stress block of any backend showed, with what each\nneeds that no observed block did (`timing:` where each part was seen, never together).\n\n",
            self.device, self.date
        );
        let mut specs: BTreeMap<&str, Vec<&Case>> = BTreeMap::new();
        for c in self
            .cases
            .iter()
            .filter(|c| c.mode.starts_with("stress") && c.litmus.is_some() && c.verdict.is_some())
        {
            specs.entry(&c.spec).or_default().push(c);
        }
        let mut any = false;
        for (spec, cs) in specs {
            // Never seen on any backend: in every backend's never-seen list.
            let lists: Vec<BTreeMap<&str, &str>> = cs
                .iter()
                .map(|c| {
                    c.litmus
                        .as_ref()
                        .unwrap()
                        .never_seen
                        .iter()
                        .map(|n| (n.outcome.as_str(), n.reason.as_str()))
                        .collect()
                })
                .collect();
            let common: Vec<(&str, &str)> = lists[0]
                .iter()
                .filter(|(o, _)| lists.iter().all(|l| l.contains_key(*o)))
                .map(|(o, r)| (*o, *r))
                .collect();
            if common.is_empty() {
                continue;
            }
            any = true;
            let allowed = cs.iter().map(|c| c.litmus.as_ref().unwrap().allowed_count).max().unwrap_or(0);
            let backends: Vec<&str> = cs.iter().map(|c| c.backend.as_str()).collect();
            s.push_str(&format!(
                "### {spec}\n\n{} of {} allowed outcomes never seen ({}):\n\n",
                common.len(),
                allowed,
                backends.join(", ")
            ));
            let truncated = cs.iter().any(|c| {
                let l = c.litmus.as_ref().unwrap();
                l.never_seen.len() < l.never_seen_count
            });
            let shown = common.len().min(NOTES_LIST_MAX);
            for (o, r) in &common[..shown] {
                s.push_str(&format!("- `{o}`: {r}\n"));
            }
            if shown < common.len() || truncated {
                s.push_str(&format!(
                    "- ... only {} listed here; the report's `litmus.never_seen` lists up to {} per backend (`never_seen_count` is exact)\n",
                    shown,
                    crate::compare::LITMUS_LIST_MAX
                ));
            }
            s.push('\n');
        }
        if !any {
            s.push_str("Every allowed outcome was seen.\n");
        }
        s
    }
}
