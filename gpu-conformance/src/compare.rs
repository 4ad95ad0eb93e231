//! The comparison policy: how the outcomes a GPU run recorded are judged against the model.
//!
//! Every case gets one of three verdicts ([`Verdict`]):
//!
//! - **within**: every observed outcome is admitted by the model, and the model *constrained* it:
//!   a concrete allowed outcome matched, or an undefined-behaviour pattern whose prefix holds at
//!   least one observation did ([`Judged::Constrained`]).
//! - **unchecked**: every outcome is admitted, but some only by undefined behaviour reached before
//!   any observation (the model allows anything from the start, so agreement means nothing). The
//!   case says why (`why`); it never counts as agreement.
//! - **OUTSIDE**: some outcome is not admitted.
//!
//! Stress blocks are judged against the spec's whole allowed set. A replay block that follows its
//! forced schedule must show exactly the trace's outcome ([`as_forced`]; for a trace ending in
//! undefined behaviour: the observations before it, then anything); a block that left the trace is
//! counted apart and judged against the outcomes allowed from the point it left: the model state
//! the trace reaches after k steps, each outcome prefixed by the trace's observations before it
//! ([`phasecheck_verifier::outcomes::allowed_after`]). Where it left is not recorded by the kernel, so the
//! judgement takes the latest step k whose observations the block's extend and whose set admits
//! it (k = 0 is the whole allowed set).

use crate::codegen::{status, Kernel};
use phasecheck_model::rt::path::{Refusal, Replay};
use phasecheck_model::rt::{Action, Model};
use phasecheck_verifier::outcomes::{
    allowed_after, prefix_observations, AllowedSet, End, Forced, Judged, Outcome, ThreadOutcome, Undefined,
};
use phasecheck_verifier::trace::why_not;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

/// The verdict of one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub enum Verdict {
    #[serde(rename = "within")]
    Within,
    #[serde(rename = "unchecked")]
    Unchecked,
    #[serde(rename = "OUTSIDE")]
    Outside,
    /// A replay whose forcing itself produced what no execution has: never agreement, never
    /// OUTSIDE, counted apart with its reason.
    #[serde(rename = "not forced")]
    NotForced,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Within => "within",
            Verdict::Unchecked => "unchecked",
            Verdict::Outside => "OUTSIDE",
            Verdict::NotForced => "not forced",
        }
    }
}

/// Blocks by how they were judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    /// Admitted, and the model constrained what they could show.
    pub constrained: usize,
    /// Admitted only by undefined behaviour reached before any observation.
    pub vacuous: usize,
    /// Not admitted.
    pub outside: usize,
    /// Replay blocks not admitted only because the forcing held a thread past a wait's bound
    /// ([`stopped_by_forcing`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_forced: usize,
    /// Not admitted by an allowed set that a budget left incomplete ([`Judged::Undecided`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub undecided: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Tally {
    pub fn add(&mut self, j: Judged, n: usize) {
        match j {
            Judged::Constrained => self.constrained += n,
            Judged::Vacuous => self.vacuous += n,
            Judged::Rejected => self.outside += n,
            Judged::Undecided => self.undecided += n,
        }
    }

    pub fn merge(&mut self, o: Tally) {
        self.constrained += o.constrained;
        self.vacuous += o.vacuous;
        self.outside += o.outside;
        self.not_forced += o.not_forced;
        self.undecided += o.undecided;
    }

    /// OUTSIDE if any block is outside, `not forced` if any block showed only the forcing's own
    /// hang, unchecked if any was admitted only vacuously or left undecided by an incomplete
    /// allowed set, else within.
    pub fn verdict(&self) -> Verdict {
        if self.outside > 0 {
            Verdict::Outside
        } else if self.not_forced > 0 {
            Verdict::NotForced
        } else if self.vacuous > 0 || self.undecided > 0 {
            Verdict::Unchecked
        } else {
            Verdict::Within
        }
    }
}

/// A judged case: its verdict, why (for unchecked), and the block counts.
#[derive(Clone, Debug)]
pub struct Judgement {
    pub verdict: Verdict,
    pub why: String,
    pub tally: Tally,
}

fn judgement(tally: Tally, why: BTreeSet<String>) -> Judgement {
    let verdict = tally.verdict();
    let why = if verdict == Verdict::NotForced {
        NOT_FORCED_WHY.to_string()
    } else if verdict == Verdict::Unchecked {
        why.into_iter().collect::<Vec<_>>().join("; ")
    } else {
        String::new()
    };
    Judgement { verdict, why, tally }
}

/// Why an observation an incomplete allowed set does not hold is no evidence.
fn undecided_reason(allowed: &AllowedSet) -> String {
    format!(
        "the model's enumeration stopped at its budget ({} after {} states), and the part it explored does not hold this outcome: the rest may",
        allowed.stopped_by().unwrap_or("a bound"),
        allowed.explored()
    )
}

fn vacuous_reason(allowed: &AllowedSet) -> String {
    let kinds: Vec<&str> = allowed.vacuous_causes().iter().map(|k| k.name()).collect();
    format!(
        "the model reaches undefined behaviour ({}) before any observation, so it allows every outcome",
        kinds.join(", ")
    )
}

/// Two-directional evidence for a stress case, litmus style: what the model allows, what was
/// seen, and what it allows that was never seen (with a reason where one can be computed).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Litmus {
    /// How many concrete outcomes the model allows (`allowed` lists at most [`LITMUS_LIST_MAX`]).
    pub allowed_count: usize,
    /// The concrete outcomes the model allows.
    pub allowed: Vec<String>,
    /// Undefined-behaviour patterns: `after CAUSE: PREFIX (then anything)`.
    pub allowed_undefined: Vec<String>,
    /// Distinct outcomes observed.
    pub observed: Vec<String>,
    /// Allowed concrete outcomes no block showed.
    pub never_seen_count: usize,
    pub never_seen: Vec<NeverSeen>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct NeverSeen {
    pub outcome: String,
    /// What the outcome needs that no observed block did (a placeholder when none is found).
    pub reason: String,
}

/// At most this many outcomes are listed per litmus list (the counts are always exact).
pub const LITMUS_LIST_MAX: usize = 200;

/// Why an allowed outcome may not have been seen: what it has that no observed outcome has at the
/// same place, grouped (threads that must time out or finish, torn reads, values at positions the
/// observed blocks reached but never with that value); for a new combination of observed values,
/// which threads never came together ([`combination_reason`]).
pub fn never_seen_reason(o: &Outcome, seen: &[&Outcome]) -> String {
    let mut why: Vec<String> = Vec::new();
    let th = |s: &Outcome, t: usize| s.threads.get(t).cloned().unwrap_or_default();
    let list = |v: &[String]| v.join(", ");
    let hang: Vec<String> = (0..o.threads.len())
        .filter(|&t| !o.threads[t].finished && seen.iter().all(|s| th(s, t).finished))
        .map(|t| format!("t{t}"))
        .collect();
    if !hang.is_empty() {
        why.push(format!("requires a timeout/hang interleaving ({} hung in no block)", list(&hang)));
    }
    let finish: Vec<String> = (0..o.threads.len())
        .filter(|&t| o.threads[t].finished && seen.iter().all(|s| !th(s, t).finished))
        .map(|t| format!("t{t}"))
        .collect();
    if !finish.is_empty() {
        why.push(format!(
            "requires {} to finish (hung in every block: the interleaving that releases it never happened)",
            list(&finish)
        ));
    }
    if o.threads.iter().any(|t| t.reads.contains(&-1)) {
        why.push("requires a torn read (a read overlapping a copy or write)".into());
    }
    type Field = fn(&ThreadOutcome) -> Vec<i64>;
    let fields: [(Field, &str); 3] = [
        (|t| t.reads.clone(), "reads racing with a copy or write to return other versions"),
        (|t| t.try_waits.iter().map(|b| *b as i64).collect(), "try_waits to go the other way"),
        (
            |t| t.token_parities.iter().map(|p| *p as i64).collect(),
            "arrivals in the other phase parity",
        ),
    ];
    for (f, what) in fields {
        let mut at = Vec::new();
        for (t, x) in o.threads.iter().enumerate() {
            for (i, v) in f(x).iter().enumerate() {
                let reached: Vec<i64> = seen.iter().filter_map(|s| f(&th(s, t)).get(i).copied()).collect();
                if *v != -1 && !reached.is_empty() && !reached.contains(v) {
                    at.push(format!("t{t} #{}: {v}", i + 1));
                }
            }
        }
        if !at.is_empty() {
            why.push(format!("requires {what} ({})", list(&at)));
        }
    }
    if !seen.iter().any(|s| s.completions == o.completions) && o.completions.iter().any(|c| *c > 0) {
        why.push("requires a different number of completion-function runs".into());
    }
    if why.is_empty() {
        why.push(combination_reason(o, seen));
    }
    why.join("; ")
}

/// The reason for an outcome made only of parts the stress blocks showed: which threads' results
/// never came together in one block. Each of them was seen, so the hardware can produce it; the
/// outcome needs those threads to interleave in a way no block did (timing, not the model).
fn combination_reason(o: &Outcome, seen: &[&Outcome]) -> String {
    let th = |s: &Outcome, t: usize| s.threads.get(t).cloned().unwrap_or_default();
    let n = o.threads.len();
    let mut apart = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            if !seen.iter().any(|s| th(s, a) == o.threads[a] && th(s, b) == o.threads[b]) {
                apart.push(format!("t{a} with t{b}"));
            }
        }
    }
    let parts_seen = (0..n).all(|t| seen.iter().any(|s| th(s, t) == o.threads[t]));
    let completions_seen = o.completions.iter().all(|c| *c == 0) || seen.iter().any(|s| s.completions == o.completions);
    match (parts_seen && completions_seen, apart.is_empty()) {
        (true, false) => format!(
            "timing: every thread's part of it was seen, but never {} in one block (an interleaving the stress runs did not hit)",
            apart.join(", ")
        ),
        (true, true) => "timing: every pair of threads' parts was seen together, never all of them in one block".into(),
        (false, _) => {
            let mut why = Vec::new();
            for t in (0..n).filter(|&t| !seen.iter().any(|s| th(s, t) == o.threads[t])) {
                let mine = &o.threads[t];
                let lens = |x: &ThreadOutcome| [x.reads.len(), x.try_waits.len(), x.token_parities.len()];
                let longer: Vec<&str> = ["reads", "try_waits", "token parities"]
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| seen.iter().all(|s| lens(&th(s, t))[*i] < lens(mine)[*i]))
                    .map(|(_, w)| *w)
                    .collect();
                if !longer.is_empty() {
                    why.push(format!(
                        "t{t} records more {} than in any block (it gets further, or takes a path that another lane or thread took in every block)",
                        longer.join(" and ")
                    ));
                } else if !mine.finished {
                    why.push(format!("t{t} hangs after these records, where no block's t{t} hung (timing)"));
                } else {
                    why.push(format!("t{t} finishes with these records, which no block's t{t} did (timing)"));
                }
            }
            if why.is_empty() {
                why.push("the completion counts differ from every block's (timing)".into());
            }
            why.join("; ")
        }
    }
}

/// What run `i` of `observed` left behind (nothing recorded when `ends` is shorter).
fn end_at(ends: &[End], i: usize) -> End {
    ends.get(i).cloned().unwrap_or_default()
}

/// Judge a stress case: each distinct observed outcome against the whole allowed set, with what
/// the run left behind (`ends[i]` belongs to `observed[i]`; empty: not recorded).
pub fn judge_stress(allowed: &AllowedSet, observed: &[(Outcome, usize)], ends: &[End]) -> (Judgement, Litmus) {
    let mut tally = Tally::default();
    let mut why = BTreeSet::new();
    for (i, (o, n)) in observed.iter().enumerate() {
        let j = allowed.judge_end(o, &end_at(ends, i));
        match j {
            Judged::Vacuous => {
                why.insert(vacuous_reason(allowed));
            }
            Judged::Undecided => {
                why.insert(undecided_reason(allowed));
            }
            _ => {}
        }
        tally.add(j, *n);
    }
    let seen: Vec<&Outcome> = observed.iter().map(|(o, _)| o).collect();
    let never: Vec<&Outcome> = allowed.iter().filter(|a| !seen.contains(a)).collect();
    let litmus = Litmus {
        allowed_count: allowed.len(),
        allowed: allowed.iter().take(LITMUS_LIST_MAX).map(|o| o.to_string()).collect(),
        allowed_undefined: allowed
            .undefined()
            .take(LITMUS_LIST_MAX)
            .map(|u| format!("after {}: {} (then anything)", u.cause, u.prefix))
            .collect(),
        observed: observed
            .iter()
            .enumerate()
            .take(LITMUS_LIST_MAX)
            .map(|(i, (o, _))| format!("{o}{}", end_at(ends, i).suffix()))
            .collect(),
        never_seen_count: never.len(),
        never_seen: never
            .iter()
            .take(LITMUS_LIST_MAX)
            .map(|o| NeverSeen {
                outcome: o.to_string(),
                reason: never_seen_reason(o, &seen),
            })
            .collect(),
    };
    (judgement(tally, why), litmus)
}

/// How a replay case went against its trace.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ReplayInfo {
    /// The violation kind the trace shows, or `complete execution`.
    pub trace: String,
    /// Where the trace came from: a counterexample file, or `verifier` / `model` (first enabled
    /// action each step) when none exists for this (spec, kind).
    pub trace_source: String,
    pub steps: usize,
    /// The outcome the trace forces (`after CAUSE: PREFIX (then anything)` for a trace ending in
    /// undefined behaviour).
    pub forced: String,
    pub blocks: usize,
    /// Blocks that showed exactly the forced outcome.
    pub reproduced: usize,
    /// Blocks that left the trace, judged from where they left.
    pub left: usize,
    /// Per step k: left blocks judged against the set allowed after the trace's first k steps
    /// (the latest step whose set admits them); `none` holds those no step admits.
    pub left_at: BTreeMap<String, usize>,
    /// How the left blocks were judged.
    pub left_judged: Tally,
    /// Why blocks left the trace, read off the trace at the step where they left
    /// ([`left_reason`]); empty when none left.
    #[serde(default)]
    pub left_why: String,
}

/// Why a replay case is `not forced`.
pub const NOT_FORCED_WHY: &str = "a thread timed out at a wait and recorded a hang that no execution has, where an \
     allowed outcome has it go on: the turnstile held the thread it waited for past the wait's bound (the \
     forced order could not be kept, e.g. a copy landed before its turn, and the held thread ran free only \
     later); the hang is the forcing's, so the case says nothing either way";

/// A replay block that no point of the trace admits, which an allowed outcome explains if the
/// block's hung threads were only stopped early: every thread is as in that outcome, or hung
/// having recorded a prefix of what it records there. Forcing holds threads at the turnstile (up
/// to a quarter of a wait's bound before they give up their turn and run free); a thread waiting
/// for a held one can time out meanwhile, which no execution does: the timeout rule fires only
/// once nothing can move. Such a block is `not forced`, never OUTSIDE nor agreement.
pub fn stopped_by_forcing(allowed: &AllowedSet, o: &Outcome) -> bool {
    fn prefix<T: PartialEq>(a: &[T], b: &[T]) -> bool {
        a.len() <= b.len() && b[..a.len()] == *a
    }
    if o.fault || o.threads.iter().all(|t| t.finished) {
        return false;
    }
    allowed.iter().any(|a| {
        a.threads.len() == o.threads.len()
            && !a.fault
            && a.completions.len() == o.completions.len()
            && o.completions.iter().zip(&a.completions).all(|(x, y)| x <= y)
            && o.threads.iter().zip(&a.threads).all(|(t, u)| {
                t == u
                    || (!t.finished
                        && prefix(&t.reads, &u.reads)
                        && prefix(&t.try_waits, &u.try_waits)
                        && prefix(&t.token_parities, &u.token_parities))
            })
    })
}

/// At most this many prefix points are enumerated per case before falling back to step 0.
const MAX_PREFIX_SETS: usize = 12;

/// Judge a replay case. `allowed` is the spec's whole allowed set (a budget may have left it
/// incomplete: then a block no set holds is undecided, never OUTSIDE); `limit` and
/// `deadline` bound each enumeration from a prefix point.
pub fn judge_replay(
    model: &Model,
    actions: &[Action],
    fc: &Forced,
    allowed: &AllowedSet,
    observed: &[(Outcome, usize)],
    ends: &[End],
    limit: usize,
    deadline: Option<Instant>,
) -> (Judgement, ReplayInfo) {
    let fo = &fc.outcome;
    let forced_pattern = fc.undefined.map(|cause| Undefined { prefix: fo.clone(), cause });
    let mut info = ReplayInfo {
        steps: actions.len(),
        forced: match &forced_pattern {
            Some(u) => format!("after {}: {} (then anything)", u.cause, u.prefix),
            None => format!("{fo}{}", fc.end.as_ref().map(|e| e.suffix()).unwrap_or_default()),
        },
        ..Default::default()
    };
    let prefixes = prefix_observations(model, actions).unwrap_or_default();
    let mut sets: HashMap<usize, Option<AllowedSet>> = HashMap::new();
    let mut tally = Tally::default();
    let mut why = BTreeSet::new();
    let mut left_faulted = true;
    for (i, (o, n)) in observed.iter().enumerate() {
        let end = end_at(ends, i);
        info.blocks += n;
        let reproduced = match &forced_pattern {
            Some(u) => u.admits(o),
            None => as_forced(fc, o) && fc.end.as_ref().is_none_or(|e| e.admits(&end)),
        };
        if reproduced {
            info.reproduced += n;
            if forced_pattern.as_ref().is_some_and(|u| u.is_vacuous()) {
                why.insert(format!(
                    "the trace reaches undefined behaviour ({}) before any observation: every outcome reproduces it",
                    fc.undefined.map(|k| k.name()).unwrap_or("?")
                ));
                tally.add(Judged::Vacuous, *n);
            } else {
                tally.add(Judged::Constrained, *n);
            }
            continue;
        }
        info.left += n;
        left_faulted &= o.fault;
        // The latest points whose observations the block extends, newest first; then step 0.
        let consistent: Vec<usize> = (0..prefixes.len())
            .rev()
            .filter(|&k| extends(o, &prefixes[k]))
            .filter(|&k| k > 0)
            .take(MAX_PREFIX_SETS)
            .chain(std::iter::once(0))
            .collect();
        let mut judged = (Judged::Rejected, None);
        // A set a budget left incomplete that does not hold the block leaves it undecided, unless
        // another set admits it.
        let mut undecided = None;
        for k in consistent {
            let set = if k == 0 {
                Some(allowed)
            } else {
                sets.entry(k)
                    .or_insert_with(|| allowed_after(model, actions, k, limit, deadline).ok())
                    .as_ref()
            };
            let Some(set) = set else { continue };
            let j = set.judge_end(o, &end);
            if j == Judged::Undecided {
                undecided.get_or_insert((k, undecided_reason(set)));
                continue;
            }
            if j != Judged::Rejected {
                if j == Judged::Vacuous {
                    why.insert(vacuous_reason(set));
                }
                judged = (j, Some(k));
                break;
            }
        }
        if let (Judged::Rejected, Some((k, reason))) = (judged.0, undecided) {
            why.insert(reason);
            judged = (Judged::Undecided, Some(k));
        }
        if judged.0 == Judged::Rejected && stopped_by_forcing(allowed, o) {
            tally.not_forced += n;
            info.left_judged.not_forced += n;
            *info.left_at.entry("not forced".into()).or_default() += n;
            continue;
        }
        tally.add(judged.0, *n);
        info.left_judged.add(judged.0, *n);
        let key = judged.1.map(|k| k.to_string()).unwrap_or_else(|| "none".into());
        *info.left_at.entry(key).or_default() += n;
    }
    if info.left > 0 {
        info.left_why = left_reason(model, actions, &info.left_at, left_faulted);
    }
    (judgement(tally, why), info)
}

/// Why blocks left a forced trace, from the trace itself at the earliest step where some left
/// (`left_at`'s smallest step). The turnstile forces the order of thread steps, never the
/// moment a copy lands: a trace that keeps a copy in flight past that step needs a landing the
/// GPU makes within microseconds to wait, so the next step sees the copy landed. A block that
/// left with no copy in flight at that point is a thread step going another way than forced,
/// which nothing in the trace explains: the reason says so, for a reader to look into.
pub fn left_reason(model: &Model, actions: &[Action], left_at: &BTreeMap<String, usize>, faulted: bool) -> String {
    if faulted {
        return "every block that left faulted (a sticky launch error) before the trace's end: the hardware \
                stopped the kernel, so no observation past the fault exists"
            .into();
    }
    let k = left_at.keys().filter_map(|k| k.parse::<usize>().ok()).min().unwrap_or(0);
    let (mut r, _) = Replay::start(model);
    if let Err(e) = r.run(actions[..k.min(actions.len())].iter().copied(), |_| {}) {
        if e.refusal == Refusal::NotEnabled {
            let why = why_not(model, e.refusal, e.step, r.state(), e.action);
            return format!(
                "left after step {k}, but the trace does not replay that far: step {} cannot be taken: {why}",
                e.step + 1
            );
        }
    }
    let Some(s) = r.state() else {
        return format!("left after step {k}, past the trace's undefined behaviour (the model allows anything there)");
    };
    if s.copies.is_empty() {
        return format!(
            "left after step {k} with no copy in flight: a thread step the turnstile forces went another way \
             (not explained by the trace)"
        );
    }
    let lands = actions[k..]
        .iter()
        .position(|a| matches!(a, Action::Land(_) | Action::LandPart(_)))
        .map(|j| format!("lands at step {}", k + j + 1))
        .unwrap_or_else(|| "never lands before the trace ends".into());
    let bufs: Vec<String> = s.copies.iter().map(|c| model.proto.buffers[c.buf as usize].name.clone()).collect();
    format!(
        "after step {k} the trace keeps a copy into {} in flight (it {lands}); on the GPU a copy lands within \
         microseconds and the turnstile cannot hold it back, so the next forced step saw it landed",
        bufs.join(", ")
    )
}

/// Per thread, `o`'s recorded vectors start with `p`'s, and its completion counts are at least
/// `p`'s (a faulted run with no data read back extends everything).
fn extends(o: &Outcome, p: &Outcome) -> bool {
    Undefined {
        prefix: p.clone(),
        cause: phasecheck_model::ViolationKind::Assertion,
    }
    .admits(o)
}

/// The end-parity code ([`Outcome::end_parity`]) of a probe word written by the kernel.
pub fn probe_code(w: i32) -> u8 {
    use phasecheck_verifier::outcomes::{PROBE_BOTH, PROBE_NEITHER, PROBE_NONE, PROBE_PARITY_0, PROBE_PARITY_1};
    if w & 4 == 0 {
        return PROBE_NONE;
    }
    // test_wait.parity(P) is true when the phase of parity P has completed: the phase in progress
    // is the parity whose probe is false.
    match w & 3 {
        2 => PROBE_PARITY_0,
        1 => PROBE_PARITY_1,
        3 => PROBE_BOTH,
        _ => PROBE_NEITHER,
    }
}

pub fn outcome_of(k: &Kernel, words: &[i32], block: usize) -> (Outcome, End, Flags) {
    let rec = k.parse_block(&words[block * k.block_words..(block + 1) * k.block_words]);
    let mut flags = Flags::default();
    flags.lanes_apart = rec.lanes_apart.iter().any(|&m| m != 0);
    let threads = rec
        .threads
        .iter()
        .map(|t| {
            match t.status {
                status::HUNG => flags.hung = true,
                status::ASSERT_FAILED => flags.assert = true,
                status::UNSUPPORTED => flags.unsupported = true,
                status::OVERFLOW => flags.overflow = true,
                _ => {}
            }
            flags.turn_lost |= t.turn_lost;
            flags.torn |= t.reads.contains(&-1);
            flags.wrong_version |= t.bad_expect > 0;
            ThreadOutcome {
                finished: t.status == status::FINISHED,
                reads: t.reads.clone(),
                try_waits: t.try_waits.clone(),
                token_parities: t.token_parities.clone(),
            }
        })
        .collect();
    (
        Outcome {
            threads,
            completions: rec.completions,
            fault: false,
        },
        End {
            parity: rec.probes.iter().map(|w| probe_code(*w)).collect(),
            vars: rec.end_vars,
        },
        flags,
    )
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Flags {
    pub hung: bool,
    pub turn_lost: bool,
    pub assert: bool,
    pub unsupported: bool,
    pub overflow: bool,
    pub torn: bool,
    pub wrong_version: bool,
    pub fault: bool,
    /// The lanes of a uniform agent observed different things (the model's lockstep assumption
    /// failed on the hardware).
    pub lanes_apart: bool,
}

impl Flags {
    pub fn merge(&mut self, o: Flags) {
        self.hung |= o.hung;
        self.turn_lost |= o.turn_lost;
        self.assert |= o.assert;
        self.unsupported |= o.unsupported;
        self.overflow |= o.overflow;
        self.torn |= o.torn;
        self.wrong_version |= o.wrong_version;
        self.fault |= o.fault;
        self.lanes_apart |= o.lanes_apart;
    }
    pub fn bug_shows(&self) -> bool {
        self.hung || self.assert || self.torn || self.wrong_version || self.fault
    }
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        for (b, s) in [
            (self.hung, "hang"),
            (self.turn_lost, "left the trace, ran free"),
            (self.assert, "assert failed"),
            (self.torn, "torn read"),
            (self.wrong_version, "wrong version"),
            (self.fault, "fault"),
            (self.unsupported, "unsupported index/size"),
            (self.overflow, "record overflow"),
            (self.lanes_apart, "lanes of a uniform warp observed differently"),
        ] {
            if b {
                v.push(s);
            }
        }
        v.join(", ")
    }
}

/// Whether a replayed block did what the trace forces. Threads that finished or hung in the trace
/// must match exactly. A trace that stops early (a state violation such as a stale wait, or a
/// step violation that does not end the execution) forces only a prefix: its threads still blocked
/// or able to run go on freely on the GPU after the last turn, so their recorded vectors must
/// start with the forced ones and their end is free; completion-function runs may only grow.
/// (Before this, such traces could never count as "exactly as forced": a thread blocked at the end
/// of kinds/stale_wait's trace is released on the GPU by the workers' last round.)
pub fn as_forced(fc: &phasecheck_verifier::outcomes::Forced, o: &Outcome) -> bool {
    use phasecheck_verifier::outcomes::ThreadEnd;
    let fo = &fc.outcome;
    fn prefix<T: PartialEq>(a: &[T], b: &[T]) -> bool {
        b.len() >= a.len() && b[..a.len()] == *a
    }
    if o == fo {
        return true;
    }
    if fc.undefined.is_some() || o.fault || o.threads.len() != fo.threads.len() || o.completions.len() != fo.completions.len() {
        return false;
    }
    fo.threads.iter().zip(&o.threads).zip(&fc.ends).all(|((f, g), end)| match end {
        ThreadEnd::Finished | ThreadEnd::Hung => f == g,
        ThreadEnd::Running | ThreadEnd::Blocked => {
            prefix(&f.reads, &g.reads) && prefix(&f.try_waits, &g.try_waits) && prefix(&f.token_parities, &g.token_parities)
        }
    }) && fo.completions.iter().zip(&o.completions).all(|(f, g)| g >= f)
}

/// The `observed` key of a launch on the hardware's barriers that never returned (its child was
/// ended, so no block's record came back).
pub const LAUNCH_HUNG: &str = "launch hung: the host ended it, no block's record came back";

/// Some allowed outcome leaves a thread unfinished.
pub fn allows_hang(allowed: &AllowedSet) -> bool {
    allowed.iter().any(|o| o.threads.iter().any(|t| !t.finished))
}

/// The model reaches undefined behaviour, after which it allows any outcome.
fn allows_anything(allowed: &AllowedSet) -> bool {
    allowed.undefined().next().is_some() || !allowed.vacuous_causes().is_empty()
}

/// Whether a launch that never returns may agree with the model (a hang it allows, anything
/// after undefined behaviour, or an allowed set a budget left incomplete, whose rest may hang):
/// the host's patience with a hardware-barrier launch depends on it.
pub fn hang_in_model(allowed: &AllowedSet) -> bool {
    allows_hang(allowed) || allows_anything(allowed) || !allowed.is_complete()
}

/// Judge a free-running launch on the hardware's barriers that never returned. Nothing says which
/// block hung or where, only that some thread never finished: within when the model allows an
/// outcome in which a thread never finishes, unchecked when it allows one only after undefined
/// behaviour (then anything may happen), else OUTSIDE. The blocks count as one.
pub fn judge_launch_hung(allowed: &AllowedSet) -> Judgement {
    let mut tally = Tally::default();
    let mut why = BTreeSet::new();
    if allows_hang(allowed) {
        tally.constrained = 1;
    } else if allows_anything(allowed) {
        tally.vacuous = 1;
        why.insert("no allowed outcome hangs, but the model reaches undefined behaviour, after which it allows any".to_string());
    } else if !allowed.is_complete() {
        tally.undecided = 1;
        why.insert(undecided_reason(allowed));
    } else {
        tally.outside = 1;
    }
    judgement(tally, why)
}
