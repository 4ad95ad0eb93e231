//! `phasecheck run FILE --cpu`: run a protocol many times on OS threads over the reference
//! runtime, and compare the histogram of outcomes with the set the model allows, in the GPU
//! report's outcome format (`t0 done reads=[0,1] | t1 done parity=[0] | completions=[2]`).

use crate::interp::{run, Options, Unsupported};
use phasecheck_model::program::ir::Protocol;
use phasecheck_model::rt::Model;
use phasecheck_verifier::outcomes::{allowed_outcomes_within, AllowedSet, Outcome};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// How many distinct states the model's outcome enumeration may visit before it gives up
/// (then the comparison is inconclusive for outcomes it rejects).
pub const OUTCOME_LIMIT: usize = 2_000_000;

/// Outcomes of many runs, with how often each was seen.
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    pub runs: usize,
    pub counts: BTreeMap<Outcome, usize>,
    /// Undefined behaviour the runtime stopped on, by kind name.
    pub undefined: BTreeMap<String, usize>,
    /// Laws the barrier audits found broken (always empty for the correct runtime).
    pub broken: Vec<String>,
    /// Reads that saw another version than their `expect` (recorded, not fatal).
    pub stale_reads: usize,
}

/// The histogram next to the model's allowed set.
pub struct CpuReport {
    pub histogram: Histogram,
    pub allowed: AllowedSet,
    /// Runs asked for (the histogram holds fewer when the time bound stopped them).
    pub asked: usize,
}

impl CpuReport {
    /// Observed outcomes the model does not allow: a disagreement. Empty when the model's set is
    /// incomplete: an outcome missing from a partial enumeration says nothing (see `unmatched`).
    pub fn outside(&self) -> Vec<&Outcome> {
        if !self.allowed.is_complete() {
            return Vec::new();
        }
        self.unmatched()
    }

    /// Observed outcomes not in the model's set as far as it was enumerated.
    pub fn unmatched(&self) -> Vec<&Outcome> {
        self.histogram.counts.keys().filter(|o| !self.allowed.contains(o)).collect()
    }

    /// The comparison is partial: the model's enumeration stopped at a bound, or fewer runs were
    /// made than asked for.
    pub fn partial(&self) -> bool {
        !self.allowed.is_complete() || self.histogram.runs < self.asked
    }

    /// Outcomes the model allows that no run produced (not an error: runs sample).
    pub fn unseen(&self) -> usize {
        self.allowed.iter().filter(|o| !self.histogram.counts.contains_key(o)).count()
    }

    pub fn render(&self, proto: &Protocol) -> String {
        let h = &self.histogram;
        let model = Model::new(proto.clone());
        let mut s = String::new();
        if h.runs < self.asked {
            let _ = writeln!(
                s,
                "runs:    {} of {} on OS threads (reference runtime; the time bound stopped the rest)",
                h.runs, self.asked
            );
        } else {
            let _ = writeln!(s, "runs:    {} on OS threads (reference runtime)", h.runs);
        }
        let _ = writeln!(s, "model:   {}", self.allowed.summary());
        let _ = writeln!(s, "outcomes:");
        let complete = self.allowed.is_complete();
        for (o, n) in &h.counts {
            let tag = if self.allowed.contains(o) {
                "allowed"
            } else if complete {
                "OUTSIDE THE MODEL"
            } else {
                "not in the part of the model enumerated"
            };
            let _ = writeln!(s, "  {n:>7}x  {o}   [{tag}]");
        }
        for (k, n) in &h.undefined {
            let _ = writeln!(s, "  undefined behaviour stopped {n} run(s): {k}");
        }
        if h.stale_reads > 0 {
            let _ = writeln!(s, "  stale reads seen: {}", h.stale_reads);
        }
        for b in &h.broken {
            let _ = writeln!(s, "  BROKEN LAW: {b}");
        }
        let outside = self.outside();
        if complete {
            let _ = writeln!(
                s,
                "verdict: {} distinct outcome(s), {} outside the model, {} allowed outcome(s) not seen",
                h.counts.len(),
                outside.len(),
                self.unseen()
            );
        } else {
            let _ = writeln!(
                s,
                "verdict: comparison partial: the model's outcomes are incomplete, so none is judged outside; {} distinct outcome(s), {} not in the part enumerated",
                h.counts.len(),
                self.unmatched().len()
            );
        }
        for o in outside {
            let _ = write!(s, "outside:\n{}", indent(&o.describe(&model)));
        }
        s
    }
}

fn indent(t: &str) -> String {
    t.lines().map(|l| format!("  {l}\n")).collect()
}

/// Run `runs` times with seeds `seed, seed + 1, ...`, stopping early at `deadline`.
pub fn histogram(proto: &Protocol, runs: usize, opts: &Options, deadline: Option<Instant>) -> Result<Histogram, Unsupported> {
    let mut h = Histogram::default();
    for i in 0..runs {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        // No single run waits past the bound (its waits give up, and the run is not counted).
        let wait_timeout = match deadline {
            Some(d) => opts.wait_timeout.min(d - now),
            None => opts.wait_timeout,
        };
        let o = Options {
            seed: opts.seed.wrapping_add(i as u64),
            wait_timeout,
            ..opts.clone()
        };
        let r = run(proto, &o)?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        h.runs += 1;
        *h.counts.entry(r.outcome).or_default() += 1;
        if let Some(u) = r.ub {
            *h.undefined.entry(u.kind.name().to_string()).or_default() += 1;
        }
        h.stale_reads += r.stale_reads.len();
        for b in r.broken {
            if !h.broken.contains(&b) {
                h.broken.push(b);
            }
        }
    }
    Ok(h)
}

/// The whole `run --cpu`: the model's allowed set, then the runs.
pub fn run_cpu(proto: &Protocol, runs: usize, seed: u64) -> Result<CpuReport, Unsupported> {
    run_cpu_within(proto, runs, seed, None)
}

/// [`run_cpu`] within `seconds`: the model's enumeration gets four fifths of them (past it the set
/// is incomplete and the comparison partial), the runs what is left.
pub fn run_cpu_within(proto: &Protocol, runs: usize, seed: u64, seconds: Option<f64>) -> Result<CpuReport, Unsupported> {
    crate::interp::supported(proto, false)?;
    let start = Instant::now();
    let bound = |share: f64| seconds.map(|s| start + Duration::from_secs_f64((s * share).max(0.0)));
    let allowed = allowed_outcomes_within(&Model::new(proto.clone()), OUTCOME_LIMIT, bound(0.8));
    let opts = Options {
        seed,
        ..Options::default()
    };
    let histogram = histogram(proto, runs, &opts, bound(0.97))?;
    Ok(CpuReport {
        histogram,
        allowed,
        asked: runs,
    })
}
