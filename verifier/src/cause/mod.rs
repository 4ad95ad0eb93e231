//! Root causes: the violations of one run grouped by where their executions first went wrong.
//!
//! One bug usually shows as several kinds — an empty barrier with count 1 and two consumers
//! gives a missing wait, a data race, a stale read, a stale wait and a deadlock — and a kernel
//! engineer wants the one mistake, with the numbers that disagree, and the kinds as its
//! consequences. Each violation's trace is replayed and scanned for its *first divergence*: the
//! earliest step where a barrier does something a correct run of the same code would not.
//!
//! - **count mismatch**: more threads of one role arrive at one statement than the barrier's
//!   count, so a phase completes before the rest of the round has arrived (seen at that
//!   completion), or two threads' arrivals of the same round (their k-th execution of the
//!   statement) fall in different phases;
//! - **wrong parity**: a wait returns for a phase its thread had already waited for (the parity it
//!   names is that of a consumed phase, not of the next one);
//! - **tx mismatch**: a copy lands only in part because the phase announced fewer bytes than
//!   the copy brings, so the phase completes mid-copy; or a thread announces bytes after its own
//!   arrival's phase already completed and then waits on that phase as if they were in it;
//! - otherwise the first violation the trace raises (the step and its message), or, for a
//!   violation of the final state such as a deadlock, the model's explanation of that state.
//!
//! Violations whose divergence is the same rule at the same statement on the same declared
//! barrier are one finding. Each finding names the barrier's init count, who arrived in the
//! phase that went wrong, and the two numbers that disagree.

mod blame;
mod decls;
mod final_state;
mod sites;
mod structure;
mod writers;

use crate::search::Found;
use crate::trace::{replay, Replayed};
use crate::tracefile::statement_text;
use phasecheck_model::lang::ast::Span;
use phasecheck_model::lang::diag::line_col;
use phasecheck_model::program::ir::Protocol;
use phasecheck_model::rt::{Action, Model, Obs};
use phasecheck_model::ViolationKind;
use std::collections::BTreeMap;

/// Which rule found the divergence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    CountMismatch,
    WrongParity,
    TxMismatch,
    /// A buffer released (an arrival on the phase its next writer waits for) while its user
    /// still read it, or an async read left in flight by a group wait whose N is too large.
    EarlyRelease,
    /// The first violation raised along the trace is its own root cause.
    FirstViolation,
    /// A violation of the final state (deadlock, a blocked stale wait, exit under a copy).
    FinalState,
}

impl Rule {
    pub fn name(self) -> &'static str {
        match self {
            Rule::CountMismatch => "count mismatch",
            Rule::WrongParity => "wrong parity",
            Rule::TxMismatch => "tx mismatch",
            Rule::EarlyRelease => "early release",
            Rule::FirstViolation => "first violation",
            Rule::FinalState => "final state",
        }
    }
}

/// Two numbers that should agree and do not.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Mismatch {
    /// What the numbers count, e.g. "arrivals per phase vs arrivals per round".
    pub what: String,
    pub expected: i64,
    pub actual: i64,
}

/// One root cause and the violations it explains.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Cause {
    /// 1-based, in the order of the report's violations.
    pub id: usize,
    pub rule: Rule,
    /// One line, naming the mistake and the numbers.
    pub summary: String,
    /// The barrier (element) and phase that went wrong, when the divergence is on a barrier.
    pub barrier: Option<String>,
    pub phase: Option<i64>,
    /// The barrier's count from its declaration (`init(B)` uses it too).
    pub init_count: Option<i64>,
    /// Who arrived in that phase along the first member's trace (`role#tid`, in step order).
    pub arrived: Vec<String>,
    pub mismatch: Option<Mismatch>,
    /// Where: the 1-based step of the first member's trace, and the statement.
    pub step: usize,
    pub line: usize,
    pub statement: String,
    /// The violation kinds this cause explains, in report order.
    pub violations: Vec<ViolationKind>,
    /// How specific the rule is (lower: more); the most specific member describes a group.
    #[serde(skip)]
    rank: u8,
}

/// A primary violation (a mistake in itself: entanglement, uninitialized, ...) is the most
/// specific; then the patterns; then a consequence raised at a step; then a final state.
fn rank(d: &Divergence, first: Option<ViolationKind>) -> u8 {
    match d.rule {
        Rule::FirstViolation if first.is_some_and(|k| PRIMARY.contains(&k)) => 0,
        Rule::CountMismatch => 1,
        Rule::WrongParity => 2,
        Rule::TxMismatch => 3,
        Rule::EarlyRelease => 3,
        Rule::FirstViolation => 4,
        Rule::FinalState => 5,
    }
}

/// A divergence found in one trace, before grouping.
struct Divergence {
    rule: Rule,
    /// 0-based step index (the trace length for a final-state cause).
    step: usize,
    span: Option<Span>,
    bar: Option<u16>,
    phase: Option<i64>,
    mismatch: Option<Mismatch>,
    /// The summary without the barrier facts.
    what: String,
    /// For `Rule::FirstViolation`: the kind raised.
    raised: Option<ViolationKind>,
}

/// Kinds that are the mistake itself rather than a consequence of an earlier one.
const PRIMARY: [ViolationKind; 7] = [
    ViolationKind::Entanglement,
    ViolationKind::Uninitialized,
    ViolationKind::CountRange,
    ViolationKind::TxRange,
    ViolationKind::OverArrival,
    ViolationKind::CompletionMisuse,
    ViolationKind::Assertion,
];

fn bar_of(o: &Obs) -> Option<(u16, i64)> {
    match o {
        Obs::Arrived { bar, phase, .. } | Obs::Waited { bar, phase } | Obs::TryWait { bar, phase, .. } => Some((*bar, *phase)),
        Obs::PhaseCompleted { bar, phase, .. } => Some((*bar, *phase)),
        // A cp.async copy (completing through `cp_async_arrive`, not a tx count) has no barrier (`NO_BAR`).
        Obs::CopyIssued { bar, .. } | Obs::Landed { bar, .. } | Obs::LandedPart { bar, .. } | Obs::CommitJoined { bar, .. }
            if *bar != phasecheck_model::rt::state::NO_BAR =>
        {
            Some((*bar, -1))
        }
        _ => None,
    }
}

/// Which round of the protocol an arrival belongs to: the phase its thread last waited for (the
/// acquire that let it in: two consumers of one stage arrive after waiting for the same phase,
/// the two warpgroups of a ping-pong after waiting for different ones), or, for a thread that
/// has not waited yet, its k-th execution of the statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Round {
    AfterWait(u16, i64),
    Execution(usize),
}

/// Per arrival statement, barrier and round: the threads that arrive there in any of `traces`
/// (every violation trace of the run, so that a trace cut short before a peer's arrival still
/// knows the peer arrives there too).
type Arrivers = BTreeMap<(u32, u16, Round), Vec<usize>>;

/// Under cluster scope every CTA has its own copy of each barrier and role: a round is named by
/// the barrier waited on as its CTA declares it (`Protocol::barrier_in_cta`), so the threads of
/// one role in every CTA that waited for the same stage are in the same round (a stage released
/// on every CTA's barrier by each CTA's consumers, as CUTLASS's multicast pipelines do).
fn same_role(p: &Protocol, a: u16, b: u16) -> bool {
    p.role_in_cta(a as usize) == p.role_in_cta(b as usize)
}

/// Tracks each thread's latest wait and its executions of each arrival statement.
#[derive(Default)]
struct Rounds {
    last_wait: BTreeMap<usize, (u16, i64)>,
    executions: BTreeMap<(usize, u32, u16), usize>,
}

impl Rounds {
    fn waited(&mut self, t: usize, bar: u16, phase: i64) {
        self.last_wait.insert(t, (bar, phase));
    }
    /// The round of `t`'s arrival at statement `at` on `bar` (counting the execution).
    fn arrival(&mut self, t: usize, at: u32, bar: u16) -> Round {
        let k = self.executions.entry((t, at, bar)).or_insert(0);
        let n = *k;
        *k += 1;
        match self.last_wait.get(&t) {
            Some(&(b, ph)) => Round::AfterWait(b, ph),
            None => Round::Execution(n),
        }
    }
}

fn arrivers_of(p: &Protocol, traces: &[Replayed]) -> Arrivers {
    let mut m: Arrivers = BTreeMap::new();
    for r in traces {
        let mut rounds = Rounds::default();
        for s in &r.steps {
            if let Action::Thread(t) = s.action {
                let t = t as usize;
                for o in &s.obs {
                    match o {
                        Obs::Arrived { bar, .. } => {
                            let round = rounds.arrival(t, s.span.start, *bar);
                            let v = m.entry((s.span.start, *bar, round)).or_default();
                            if !v.contains(&t) {
                                v.push(t);
                            }
                        }
                        Obs::Waited { bar, phase } | Obs::TryWait { bar, phase, result: true } => {
                            rounds.waited(t, p.barrier_in_cta(*bar as usize) as u16, *phase)
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    m
}

/// The first divergence of one replayed trace that reaches `kind` with `message`.
fn divergence(
    model: &Model,
    source: &str,
    r: &Replayed,
    actions: &[Action],
    arrivers: &Arrivers,
    all: &structure::Arrivals,
    decls: &decls::Decls,
    executed: &[std::collections::BTreeSet<u32>],
    kind: ViolationKind,
    message: &str,
) -> Divergence {
    let p = &model.proto;
    let line = |span: Span| line_col(source, span.start as usize).0;
    // (statement, barrier, round) -> (thread, phase) of the first thread's arrival there.
    let mut round: BTreeMap<(u32, u16, Round), (usize, i64)> = BTreeMap::new();
    let mut rounds = Rounds::default();
    // How many threads of `t`'s role arrive at statement `at` on `bar` in one round: the
    // arrivals per phase the protocol's structure implies there.
    let per_round = |at: u32, bar: u16, rd: Round, t: usize| -> i64 {
        let role = p.threads[t].role;
        arrivers
            .get(&(at, bar, rd))
            .map(|v| v.iter().filter(|&&u| same_role(p, p.threads[u].role, role)).count())
            .unwrap_or(1) as i64
    };
    let round_name = |rd: Round| match rd {
        Round::AfterWait(b, ph) => format!("the round after phase {ph} of {}", p.declared_name(&p.barriers[b as usize].name)),
        Round::Execution(k) => format!("round {k}"),
    };
    // Per thread and barrier: the latest phase it saw complete, and the step where it did.
    let mut consumed: BTreeMap<(usize, u16), (i64, usize)> = BTreeMap::new();
    // Per barrier: the phase it is in (from the completions seen so far).
    let mut phase_now: BTreeMap<u16, i64> = BTreeMap::new();
    // Per thread and barrier: the phase of its latest arrival, and the step that made it.
    let mut arrived_on: BTreeMap<(usize, u16), (i64, usize)> = BTreeMap::new();
    // For a race: the latest earlier write or copy issue into the same buffer by someone else,
    // which is the other half of the race and often the actual mistake (an overwrite before
    // the slot was released).
    let other_access = |i: usize, s: &crate::trace::TraceStep| -> String {
        let bufs: Vec<u16> = s
            .obs
            .iter()
            .filter_map(|o| match o {
                Obs::Read { buf, .. } | Obs::Wrote { buf, .. } | Obs::CopyIssued { buf, .. } => Some(*buf),
                _ => None,
            })
            .collect();
        for (k, e) in r.steps[..i].iter().enumerate().rev() {
            if e.action == s.action {
                continue;
            }
            let hit = e.obs.iter().any(|o| match o {
                Obs::Wrote { buf, .. } | Obs::CopyIssued { buf, .. } => bufs.contains(buf),
                _ => false,
            });
            if let (true, Action::Thread(t)) = (hit, e.action) {
                return format!(
                    " (the other access: {}'s `{}` at line {}, step {})",
                    p.thread_label(t as usize),
                    statement_text(source, e.span),
                    line(e.span),
                    k + 1
                );
            }
        }
        String::new()
    };
    let first_violation = |i: usize, s: &crate::trace::TraceStep, v: &phasecheck_model::rt::Violation| {
        let (bar, phase) = s
            .obs
            .iter()
            .find_map(bar_of)
            .map(|(b, ph)| (Some(b), Some(ph).filter(|p| *p >= 0)))
            .unwrap_or((None, None));
        // The statement to change, when it is not the step's own (sites.rs).
        let (span, moved) = match sites::relocate(model, source, decls, r, i, v) {
            Some((sp, why)) => (sp, why),
            None => (s.span, String::new()),
        };
        Divergence {
            rule: Rule::FirstViolation,
            step: i,
            span: Some(span),
            bar,
            phase,
            mismatch: None,
            raised: Some(v.kind),
            what: format!(
                "{} at line {} `{}`: {}{}{moved}",
                v.kind,
                line(s.span),
                statement_text(source, s.span),
                v.message,
                if v.kind == ViolationKind::DataRace {
                    other_access(i, s)
                } else {
                    String::new()
                }
            ),
        }
    };
    // Per thread and barrier: bytes it announced after its latest arrival's phase had already
    // completed (step, bytes, that phase). Harmless when they are for its next arrival; the
    // mistake when it then waits on the completed phase as if they were in it.
    // The arrival it made too early is the statement to move: it belongs after the bytes.
    let mut late: BTreeMap<(usize, u16), (usize, i64, i64, usize)> = BTreeMap::new();
    // Per thread: its latest wait, when it passed on the phase before the barrier's first and
    // the thread has not written since (step, barrier).
    let mut before_first: BTreeMap<usize, Option<(usize, u16)>> = BTreeMap::new();
    let produced_by = |def: Option<(Span, blame::Operand)>| match def {
        Some((d, what)) => {
            let mut out = format!(
                "; the {} comes from `{}` at line {}",
                what.name(),
                statement_text(source, d),
                line(d)
            );
            if let blame::Operand::Unflipped(w) = what {
                out.push_str(&format!(
                    ", and nothing flips it: the stage index wraps at line {} `{}` with the parity unchanged, so from the second pass over the stages on it names a phase already completed",
                    line(w),
                    statement_text(source, w)
                ));
            } else if let Some(n) = decls.trip_count_declaration(d) {
                out.push_str(&format!(", in a loop run `{}` times (line {})", statement_text(source, n), line(n)));
            }
            out
        }
        None => String::new(),
    };
    // The statement a wrong parity's writer leads to: the writer, or the param that says how
    // often a loop of local assignments around it runs.
    let parity_site = |def: Option<(Span, blame::Operand)>, at: Span| match def {
        Some((_, blame::Operand::Unflipped(w))) => w,
        Some((d, _)) => decls.trip_count_declaration(d).unwrap_or(d),
        None => at,
    };
    for (i, s) in r.steps.iter().enumerate() {
        let thread = match s.action {
            Action::Thread(t) => Some(t as usize),
            _ => None,
        };
        if let Some(t) = thread {
            for c in &s.changes {
                let Some(b) = p.barriers.iter().position(|x| x.name == c.barrier) else {
                    continue;
                };
                let b = b as u16;
                for f in &c.fields {
                    let (Ok(before), Ok(after)) = (f.before.parse::<i64>(), f.after.parse::<i64>()) else {
                        continue;
                    };
                    if f.field != "tx" || after <= before {
                        continue;
                    }
                    if let Some(&(ph, arrival)) = arrived_on.get(&(t, b)) {
                        let waited = consumed.get(&(t, b)).map(|c| c.0);
                        if phase_now.get(&b).copied().unwrap_or(0) > ph && waited.is_none_or(|w| w < ph) {
                            late.entry((t, b)).or_insert((i, after - before, ph, arrival));
                        }
                    }
                }
            }
        }
        // A warp whose lanes arrive together (a uniform agent, one step) on a barrier that
        // counts fewer: the count and the arrivals cannot agree in any schedule.
        if let Some(d) = thread.and_then(|t| structure::warp_over_count(model, source, s, i, t)) {
            return d;
        }
        // Kinds that are mistakes in themselves explain their step better than any pattern.
        if let Some(v) = s.violations.iter().find(|v| PRIMARY.contains(&v.kind)) {
            return first_violation(i, s, v);
        }
        for o in &s.obs {
            match (o, thread) {
                (Obs::Arrived { bar, phase, .. }, Some(t)) => {
                    arrived_on.insert((t, *bar), (*phase, i));
                    late.remove(&(t, *bar));
                    let key = (s.span.start, *bar, rounds.arrival(t, s.span.start, *bar));
                    match round.get(&key) {
                        None => {
                            round.insert(key, (t, *phase));
                        }
                        Some(&(first, ph)) if ph != *phase && same_role(p, p.threads[first].role, p.threads[t].role) && first != t => {
                            let role = &p.roles[p.threads[t].role as usize];
                            let seen = per_round(s.span.start, *bar, key.2, t).max(2);
                            let name = p.declared_name(&role.name);
                            let per_round = if seen >= role.count as i64 {
                                format!("{} threads of role {name} arrive", role.count)
                            } else {
                                format!("at least {seen} threads of role {name} arrive")
                            };
                            let count = p.barriers[*bar as usize].count;
                            let n = seen;
                            return Divergence {
                                raised: None,
                                rule: Rule::CountMismatch,
                                step: i,
                                span: Some(s.span),
                                bar: Some(*bar),
                                phase: Some(ph),
                                mismatch: Some(Mismatch {
                                    what: "arrivals per phase (count) vs arrivals per round".into(),
                                    expected: count,
                                    actual: n,
                                }),
                                what: format!(
                                    "{per_round} per round at line {} `{}` on a count-{count} barrier: {}'s arrivals by {} and {} fall in phases {ph} and {phase} of {}",
                                    line(s.span),
                                    statement_text(source, s.span),
                                    round_name(key.2),
                                    p.thread_label(first),
                                    p.thread_label(t),
                                    p.barriers[*bar as usize].name
                                ),
                            };
                        }
                        Some(_) => {}
                    }
                    let n = per_round(s.span.start, *bar, key.2, t);
                    let count = p.barriers[*bar as usize].count;
                    let completes = s
                        .obs
                        .iter()
                        .any(|o| matches!(o, Obs::PhaseCompleted { bar: b, phase: ph, .. } if b == bar && ph == phase));
                    if completes && n > count {
                        let role = &p.roles[p.threads[t].role as usize];
                        return Divergence {
                            raised: None,
                            rule: Rule::CountMismatch,
                            step: i,
                            span: Some(s.span),
                            bar: Some(*bar),
                            phase: Some(*phase),
                            mismatch: Some(Mismatch {
                                what: "arrivals per phase (count) vs arrivals per round".into(),
                                expected: count,
                                actual: n,
                            }),
                            what: format!(
                                "{n} threads of role {} arrive per round at line {} `{}` on a count-{count} barrier: phase {phase} of {} completes at {}'s arrival, before the rest of {} has arrived",
                                p.declared_name(&role.name),
                                line(s.span),
                                statement_text(source, s.span),
                                p.barriers[*bar as usize].name,
                                p.thread_label(t),
                                round_name(key.2)
                            ),
                        };
                    }
                }
                (Obs::Waited { bar, phase } | Obs::TryWait { bar, phase, result: true }, Some(t)) => {
                    if let Some(&(at, bytes, ph, arrival)) = late.get(&(t, *bar)) {
                        if ph == *phase {
                            let st = &r.steps[at];
                            let early = r.steps[arrival].span;
                            return Divergence {
                                raised: None,
                                rule: Rule::TxMismatch,
                                step: arrival,
                                span: Some(early),
                                bar: Some(*bar),
                                phase: Some(ph),
                                mismatch: Some(Mismatch {
                                    what: format!("bytes phase {ph} expected vs bytes meant for it"),
                                    expected: 0,
                                    actual: bytes,
                                }),
                                what: format!(
                                    "{} announces {bytes} bytes on {} at line {} `{}` after its own arrival on phase {ph} at line {} `{}`, which completes without them; the bytes count toward phase {}, yet it waits on phase {ph} (step {}): the arrival belongs after the announcement",
                                    p.thread_label(t),
                                    p.barriers[*bar as usize].name,
                                    line(st.span),
                                    statement_text(source, st.span),
                                    line(early),
                                    statement_text(source, early),
                                    ph + 1,
                                    i + 1
                                ),
                            };
                        }
                    }
                    if let Some(&(last, at)) = consumed.get(&(t, *bar)) {
                        if *phase <= last {
                            let meant = last + 1;
                            let def = blame::parity_writer(model, source, r, actions, i);
                            return Divergence {
                                raised: None,
                                rule: Rule::WrongParity,
                                step: i,
                                span: Some(parity_site(def, s.span)),
                                bar: Some(*bar),
                                phase: Some(*phase),
                                mismatch: Some(Mismatch {
                                    what: "parity meant vs parity named".into(),
                                    expected: meant.rem_euclid(2),
                                    actual: phase.rem_euclid(2),
                                }),
                                what: format!(
                                    "{}'s wait at line {} `{}` names parity {}, i.e. phase {phase} of {}, which it already waited for at step {}; the next phase, {meant}, has parity {}{}",
                                    p.thread_label(t),
                                    line(s.span),
                                    statement_text(source, s.span),
                                    phase.rem_euclid(2),
                                    p.barriers[*bar as usize].name,
                                    at + 1,
                                    meant.rem_euclid(2),
                                    produced_by(def)
                                ),
                            };
                        }
                    }
                    let e = consumed.entry((t, *bar)).or_insert((*phase, i));
                    if *phase > e.0 {
                        *e = (*phase, i);
                    }
                    rounds.waited(t, p.barrier_in_cta(*bar as usize) as u16, *phase);
                    before_first.insert(t, (*phase < 0).then_some((i, *bar)));
                }
                (Obs::Wrote { .. } | Obs::CopyIssued { .. }, Some(t)) => {
                    before_first.insert(t, None);
                }
                (Obs::Read { .. }, Some(t)) => {
                    // A wait that passed on the phase before the barrier's first, then a read:
                    // the parity acquires a fresh slot (right for a producer that then writes),
                    // not data (a consumer's first wait must name phase 0).
                    if let Some(&Some((w, b))) = before_first.get(&t) {
                        let def = blame::parity_writer(model, source, r, actions, w);
                        let ws = r.steps[w].span;
                        return Divergence {
                            raised: None,
                            rule: Rule::WrongParity,
                            step: w,
                            span: Some(parity_site(def, ws)),
                            bar: Some(b),
                            phase: Some(-1),
                            mismatch: Some(Mismatch {
                                what: "parity meant vs parity named".into(),
                                expected: 0,
                                actual: 1,
                            }),
                            what: format!(
                                "{}'s wait at line {} `{}` names parity 1, i.e. phase -1 of {}, the phase before its first, and passes at once; it then reads at line {} `{}` data no phase of {} has brought (its first wait means phase 0, parity 0){}",
                                p.thread_label(t),
                                line(ws),
                                statement_text(source, ws),
                                p.barriers[b as usize].name,
                                line(s.span),
                                statement_text(source, s.span),
                                p.barriers[b as usize].name,
                                produced_by(def)
                            ),
                        };
                    }
                }
                (Obs::PhaseCompleted { bar, phase, .. }, _) => {
                    phase_now.insert(*bar, phase + 1);
                }
                (Obs::LandedPart { buf, bar, bytes }, None) => {
                    let full = s.copy.as_ref().map(|c| c.bytes).unwrap_or(*bytes);
                    let (bar_name, buf_name) = (&p.barriers[*bar as usize].name, &p.buffers[*buf as usize].name);
                    let copy = format!(
                        "the copy into {buf_name} (line {} `{}`)",
                        line(s.span),
                        statement_text(source, s.span)
                    );
                    let phase = s.obs.iter().find_map(|o| match o {
                        Obs::PhaseCompleted { phase, .. } => Some(*phase),
                        _ => None,
                    });
                    // The part either completes the phase mid-copy, or (step.rs, `LandPart`) is the
                    // split that lets another copy cross zero, so that the phase never completes.
                    let (what, mismatch) = match phase {
                        Some(_) => (
                            format!("the phase of {bar_name} announced {bytes} bytes but {copy} brings {full}: the phase completes mid-copy"),
                            Some(Mismatch {
                                what: "bytes expected by the phase vs bytes the copy brings".into(),
                                expected: *bytes,
                                actual: full,
                            }),
                        ),
                        None => (
                            format!("the copies in flight on {bar_name} bring more bytes than its phase still expects: {bytes} of the {full} bytes of {copy} land, and another copy can then cross zero whole, so the phase never completes"),
                            None,
                        ),
                    };
                    // The statement to blame is the one that announced the phase's bytes.
                    let (step, span, what) = match blame::tx_announcer(r, i, bar_name) {
                        Some(j) => (
                            j,
                            r.steps[j].span,
                            format!(
                                "{what}; the bytes were announced at line {} `{}`",
                                line(r.steps[j].span),
                                statement_text(source, r.steps[j].span)
                            ),
                        ),
                        None => (i, s.span, what),
                    };
                    return Divergence {
                        raised: None,
                        rule: Rule::TxMismatch,
                        step,
                        span: Some(span),
                        bar: Some(*bar),
                        phase,
                        mismatch,
                        what,
                    };
                }
                _ => {}
            }
        }
        if let Some(v) = s.violations.iter().find(|v| v.kind == kind).or(s.violations.first()) {
            if v.kind == ViolationKind::DataRace {
                if let Some(d) = race_blame(model, source, r, i, &v.message) {
                    return d;
                }
            }
            return first_violation(i, s, v);
        }
    }
    if let Some(v) = r.init_violations.first() {
        return structure::initial(model, source, v.kind, &v.message);
    }
    final_state::final_state(model, source, r, actions, all, executed, decls, kind, message)
}

/// A data race whose cause is an earlier statement: the group wait that left the actor's own
/// async read of the buffer in flight, or the arrival that released the buffer while its user
/// still read it.
fn race_blame(model: &Model, source: &str, r: &Replayed, i: usize, message: &str) -> Option<Divergence> {
    let p = &model.proto;
    let s = &r.steps[i];
    let Action::Thread(t) = s.action else { return None };
    let line = |span: Span| line_col(source, span.start as usize).0;
    let me = p.thread_label(t as usize);
    // The thread's own async access: a TMA store or wgmma still reading what it writes, or a
    // cp.async of its own still landing where it reads.
    let own_async = (message.contains("still reads it") && message.contains(&format!("issued by {me} ")))
        || message.contains(&format!("(issued by {me})"));
    let (j, what) = if own_async {
        let j = blame::group_wait_before(model, r, i, t as usize)?;
        let w = r.steps[j].span;
        (
            j,
            format!(
                "{me}'s group wait at line {} `{}` leaves its own async access to the buffer in flight, and its access at line {} `{}` (step {}) races with it: {message}",
                line(w),
                statement_text(source, w),
                line(s.span),
                statement_text(source, s.span),
                i + 1
            ),
        )
    } else {
        let j = blame::early_release(model, r, i)?;
        let a = &r.steps[j];
        let Action::Thread(u) = a.action else { return None };
        (
            j,
            format!(
                "{} releases the buffer at line {} `{}` (step {}) while it still reads it, and the next write comes before the read is over: at line {} `{}` (step {}), {message}",
                p.thread_label(u as usize),
                line(a.span),
                statement_text(source, a.span),
                j + 1,
                line(s.span),
                statement_text(source, s.span),
                i + 1
            ),
        )
    };
    let (bar, phase) = r.steps[j]
        .obs
        .iter()
        .find_map(bar_of)
        .map(|(b, ph)| (Some(b), Some(ph).filter(|p| *p >= 0)))
        .unwrap_or((None, None));
    Some(Divergence {
        raised: None,
        rule: Rule::EarlyRelease,
        step: j,
        span: Some(r.steps[j].span),
        bar,
        phase,
        mismatch: None,
        what,
    })
}

/// Group `violations` (a check's findings, with their traces) by first divergence. Returns the
/// causes and, for each violation, the index of its cause.
pub fn root_causes(model: &Model, source: &str, violations: &[Found]) -> (Vec<Cause>, Vec<usize>) {
    let p = &model.proto;
    let mut causes: Vec<Cause> = Vec::new();
    // The statement where the execution first went wrong (for a cause without one, such as a
    // violation of the initial state or an exit under a copy: the kind) -> cause index.
    let mut keys: Vec<(Option<u32>, Option<ViolationKind>)> = Vec::new();
    // Where the rule of a cause named elsewhere saw it, and that cause.
    let mut sites: Vec<((Option<u32>, Option<ViolationKind>), usize)> = Vec::new();
    let mut of = Vec::new();
    let replays: Vec<Option<Replayed>> = violations.iter().map(|f| replay(model, &f.actions).ok()).collect();
    let replayed: Vec<Replayed> = replays.iter().flatten().cloned().collect();
    let arrivers = arrivers_of(p, &replayed);
    let all = structure::arrivals_of(&replayed);
    let decls = decls::Decls::of(source, &p.params);
    // Per role, the instructions some explored execution ran (an arrival none reaches under a
    // guard they evaluated has a guard to fix).
    let mut executed = Vec::new();
    for f in violations {
        writers::reached(model, &f.actions, &mut executed);
    }
    for (f, r) in violations.iter().zip(replays) {
        let Some(r) = r else {
            // A trace that does not replay is its own cause (it cannot happen for traces the
            // search returned; kept total rather than panicking in a report).
            causes.push(Cause {
                id: causes.len() + 1,
                rule: Rule::FinalState,
                summary: format!("{}: {}", f.kind, f.message),
                barrier: None,
                phase: None,
                init_count: None,
                arrived: Vec::new(),
                mismatch: None,
                step: f.actions.len(),
                line: 0,
                statement: String::new(),
                violations: vec![f.kind],
                rank: 6,
            });
            keys.push((None, Some(f.kind)));
            of.push(causes.len() - 1);
            continue;
        };
        let d = divergence(
            model, source, &r, &f.actions, &arrivers, &all, &decls, &executed, f.kind, &f.message,
        );
        // Same instruction, same cause: whatever kind each trace ends in, and whichever rule
        // saw it (a wrong parity that returns early and the same wait blocking on an aliased
        // phase are one mistake).
        let key = match d.span {
            Some(sp) => (Some(sp.start), None),
            None => (None, Some(f.kind)),
        };
        // A cause named at an earlier statement (the writer of a parity, the announcer of
        // bytes, a release) still stands where the rule saw it: a violation at that site (a
        // stale wait on the same wait) is the same finding.
        let site = r.steps.get(d.step).map(|s| (Some(s.span.start), None)).filter(|s| *s != key);
        let found = keys
            .iter()
            .position(|x| *x == key || Some(*x) == site)
            .or_else(|| sites.iter().find(|(s, _)| Some(*s) == site || *s == key).map(|x| x.1));
        if let Some(k) = found {
            // Both names of the finding lead to it from now on.
            for x in [Some(key), site].into_iter().flatten() {
                if keys[k] != x && !sites.iter().any(|(s, c)| *s == x && *c == k) {
                    sites.push((x, k));
                }
            }
        }
        if let Some(k) = found {
            of.push(k);
            causes[k].violations.push(f.kind);
            // The most specific rule describes the group (a wrong parity explains the deadlock
            // on the same wait better than the deadlock's own message).
            if rank(&d, d.raised) >= causes[k].rank {
                continue;
            }
        }
        let arrived: Vec<String> = match (d.bar, d.phase) {
            (Some(b), Some(ph)) => {
                let mut v = Vec::new();
                for s in r.steps.iter().take(d.step + 1) {
                    if let Action::Thread(t) = s.action {
                        for o in &s.obs {
                            if matches!(o, Obs::Arrived { bar, phase, .. } if *bar == b && *phase == ph) {
                                let who = p.thread_label(t as usize);
                                if !v.contains(&who) {
                                    v.push(who);
                                }
                            }
                        }
                    }
                }
                v
            }
            _ => Vec::new(),
        };
        let init_count = d.bar.map(|b| p.barriers[b as usize].count);
        let mut summary = format!("{}: {}", d.rule.name(), d.what);
        if d.rule == Rule::FirstViolation || d.rule == Rule::FinalState {
            summary = d.what.clone();
        }
        let (line, statement) = match d.span {
            Some(s) => (line_col(source, s.start as usize).0, statement_text(source, s)),
            None => (0, String::new()),
        };
        let this_rank = rank(&d, d.raised);
        let cause = Cause {
            id: 0,
            rule: d.rule,
            summary,
            barrier: d.bar.map(|b| p.barriers[b as usize].name.clone()),
            phase: d.phase,
            init_count,
            arrived,
            mismatch: d.mismatch,
            step: (d.step + 1).min(r.steps.len().max(1)),
            line,
            statement,
            violations: vec![f.kind],
            rank: this_rank,
        };
        match found {
            Some(k) => {
                let kinds = std::mem::take(&mut causes[k].violations);
                causes[k] = Cause {
                    id: k + 1,
                    violations: kinds,
                    ..cause
                };
            }
            None => {
                causes.push(Cause {
                    id: causes.len() + 1,
                    ..cause
                });
                keys.push(key);
                of.push(causes.len() - 1);
                if let Some(site) = site {
                    sites.push((site, causes.len() - 1));
                }
            }
        }
    }
    (causes, of)
}

impl Cause {
    /// The barrier facts of the finding in one line: init count, who arrived in the phase that
    /// went wrong, the numbers that disagree. Empty when the divergence is not on a barrier.
    pub fn facts(&self) -> String {
        let mut parts = Vec::new();
        if let (Some(b), Some(c)) = (&self.barrier, self.init_count) {
            parts.push(format!("{b}: init count {c}"));
        }
        if let (Some(b), Some(ph)) = (&self.barrier, self.phase) {
            if self.arrived.is_empty() {
                parts.push(format!("nobody arrived in phase {ph} of {b}"));
            } else {
                parts.push(format!("arrived in phase {ph}: {}", self.arrived.join(", ")));
            }
        }
        if let Some(m) = &self.mismatch {
            parts.push(format!("{}: {} vs {}", m.what, m.expected, m.actual));
        }
        parts.join("; ")
    }
}
