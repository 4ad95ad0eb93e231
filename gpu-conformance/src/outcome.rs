//! The model side of GPU outcome comparison: which outcomes a spec allows, and which outcome a
//! trace forces.
//!
//! An [`Outcome`] is what one GPU run of a generated kernel records: per thread (global index
//! order) whether it finished or hung, the versions its `read`s returned, the results of its
//! `try_wait`s and the parities of the tokens its `arrive`s returned; per flattened barrier the
//! number of completion-function runs; and whether the launch faulted. Which statements are
//! recorded is decided by [`recorded`], which the code generator should use too so that both sides
//! count the same things.
//!
//! [`allowed_outcomes`] enumerates every execution of the model (every interleaving of thread steps
//! and copy landings) and collects their outcomes in an [`AllowedSet`]. The model describes a
//! sequentially consistent, perfectly synchronised machine; the GPU is not one, so three rules widen
//! what the model says into what the hardware may legitimately show:
//!
//! 1. **Undefined behaviour** (a step after which the model stops the execution: over-arrival,
//!    count-range, tx-range, uninitialized, lifetime, a failed `assert`/out-of-range index, a
//!    completion function that misbehaves; and every thread exiting with a copy in flight): the
//!    hardware may do anything from there on. The set records an [`Undefined`] pattern whose
//!    `prefix` holds the observations made *before* the undefined step; it admits every outcome
//!    whose per-thread vectors extend that prefix (anything may follow, `finished` is free), whose
//!    completion counts are at least the prefix's, with or without `fault`. A faulted run whose
//!    per-thread data could not be read back (`fault: true`, `threads` empty) is admitted by any
//!    pattern. An observed fault is never admitted unless some execution reaches undefined
//!    behaviour.
//! 2. **Data races on buffers**: once a step of the execution is flagged `data-race` (or
//!    `completion-misuse`, the completion function's flavour of a race) and touches a buffer (a
//!    read, a write or a copy issue of it), that buffer is *racy* for the rest of the execution. A
//!    read of a racy buffer, including the racing read itself, may return `-1` (torn: a mix of
//!    versions) or any version written into the buffer so far in that execution (0, the initial
//!    contents, every `write` and every copy issued, landed or not). The model's own value is one of
//!    them. Should a read ever yield a value the program keeps (the language does not allow it today:
//!    `read` is a statement), a different value could change its control flow, which the model
//!    cannot follow: every value other than the model's then ends in an [`Undefined`] pattern
//!    (cause `data-race`) after that read. A buffer stays racy
//!    once it has been: a later synchronised write is not enough to trust it again (a racing write
//!    may still land after it). Races on shared `var`s are not widened: vars are not part of the
//!    outcome, and a racy var read is taken to return one of the values the interleavings give.
//!    A read that races with a *later* write (the write is flagged) is not widened itself; the
//!    interleaving that runs the write first flags the read and covers the torn value.
//! 3. **Hangs**: every GPU wait is bounded (20 ms). A thread blocked at a wait forever times out,
//!    records that it hung, and exits without arriving anywhere, so its timing out can rescue no
//!    waiter; but its exit can release a `syncthreads`/`syncwarp` that was waiting for it (exited
//!    threads do not take part, as in the model), and the released threads run on. This is a
//!    *timeout* move: when no model action is enabled and some thread is unfinished, every thread
//!    then blocked at a wait is *armed*; from then on an armed thread that is still blocked may time
//!    out at any point (the timers run concurrently with whatever the released threads do),
//!    becoming `finished: false`. A thread that is armed and then steps (its wait returned) is
//!    disarmed. Timeouts never fire before the whole CTA has gone quiet: the generated waits are
//!    bounded by 20 ms while correct protocols progress in microseconds. Threads left waiting at a
//!    `syncthreads`/`syncwarp` with nothing able to release them are `finished: false` too (on the
//!    GPU such a kernel cannot return; the runner's watchdog decides what it records).
//!
//! Executions are explored by the engine's fold (`phasecheck_verifier::engine::futures`): what
//! happens next depends only on the model state and the racy/hung/armed bookkeeping, never on the
//! observations made so far, so the set of futures of each such state is computed once and each
//! step's observations are prepended to its successors' futures. This module only says what a
//! step of the widened machine is ([`Machine::apply`], through `Model::step`); it has no search.
//! The language has no unbounded loops, so every execution is finite and so is the exploration;
//! `limit` bounds the number of distinct states and the set says `complete: false` when it was
//! reached (its `contains` can then reject an outcome the model allows: treat a rejection as
//! inconclusive).
//!
//! [`forced_outcome`] replays a trace (the verifier's `Vec<Action>`) and returns the outcome it
//! forces; [`forced`] also says how each thread ended. Reads there take the model's value (no
//! widening: a trace is one execution).

use phasecheck_model::ir::{Code, IOp, Instr, InstrKind};
use phasecheck_model::lang::ast::Span;
use phasecheck_model::state::{Life, State, Status};
use phasecheck_model::step::{Action, Model, Obs, Violation};
use phasecheck_model::ViolationKind;
use phasecheck_verifier::engine::futures::{fold, Edge as FoldEdge, FoldLimits, FoldStop, Futures};
use std::collections::BTreeSet;
use std::fmt;
use std::time::Instant;

/// What one thread recorded in one GPU run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct ThreadOutcome {
    /// False: the thread hung (a bounded wait timed out, or it never left an execution barrier).
    pub finished: bool,
    /// Versions returned by its `read` statements, in program order; `-1` is a torn read.
    pub reads: Vec<i64>,
    /// Results of its `try_wait` / `try_wait_parity` statements, in order.
    pub try_waits: Vec<bool>,
    /// `phase % 2` of each token returned by its `arrive` / `arrive_expect_tx` statements, in order
    /// (not `arrive_and_wait`, `arrive_and_drop` or `commit`: see [`recorded`]).
    pub token_parities: Vec<u8>,
}

/// What one GPU run recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    /// Per thread, in global index (gtid) order.
    pub threads: Vec<ThreadOutcome>,
    /// Per flattened barrier: completion-function runs (0 for barriers without one).
    pub completions: Vec<u32>,
    /// The launch faulted (a sticky CUDA error such as `CUDA_ERROR_LAUNCH_FAILED`).
    pub fault: bool,
}

/// The shared vars some completion function writes, in declaration order: their final values
/// are part of the outcome ([`Outcome::end_vars`]).
pub fn completion_vars(p: &phasecheck_model::ir::Protocol) -> Vec<u16> {
    let mut v: Vec<u16> = p
        .completions
        .iter()
        .flat_map(|c| c.instrs.iter())
        .filter_map(|i| match i.kind {
            InstrKind::SetVar { var, .. } => Some(var),
            _ => None,
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// What a run leaves behind once every thread has exited, read by the kernel's last thread out
/// and predicted by the model from each execution's final state. Kept apart from [`Outcome`] (whose
/// shape other crates build) and judged together with it ([`AllowedSet::judge_end`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct End {
    /// Per flattened barrier, its phase parity as non-destructive probes read it
    /// (`mbarrier.test_wait.parity` with both parities): [`PROBE_PARITY_0`] or [`PROBE_PARITY_1`]
    /// (the parity of the phase in progress), [`PROBE_NONE`] (not live: never initialised or
    /// invalidated, so not probed; from the GPU also "not probed by this backend", a wildcard),
    /// [`PROBE_BOTH`] / [`PROBE_NEITHER`] (both probes true / false: an anomaly). Empty: not
    /// recorded (reports before the probes existed); judging then ignores it.
    pub parity: Vec<u8>,
    /// What completion functions computed: the final value of every shared var a completion
    /// function writes ([`completion_vars`], in that order). Empty: none, or not recorded.
    pub vars: Vec<i64>,
}

/// Codes of [`End::parity`].
pub const PROBE_PARITY_0: u8 = 0;
pub const PROBE_PARITY_1: u8 = 1;
pub const PROBE_NONE: u8 = 2;
pub const PROBE_BOTH: u8 = 3;
pub const PROBE_NEITHER: u8 = 4;

impl End {
    pub fn is_empty(&self) -> bool {
        self.parity.is_empty() && self.vars.is_empty()
    }

    /// Does an observed end agree with this predicted one? Parts not recorded are ignored; a
    /// barrier the GPU did not probe matches any parity.
    pub fn admits(&self, o: &End) -> bool {
        (o.parity.is_empty()
            || o.parity.len() == self.parity.len() && o.parity.iter().zip(&self.parity).all(|(g, m)| *g == PROBE_NONE || g == m))
            && (o.vars.is_empty() || o.vars == self.vars)
    }

    /// ` | phases=[0,1,-] | vars=[3]` (empty when nothing is recorded): appended to an outcome's
    /// one-line form.
    pub fn suffix(&self) -> String {
        let mut s = String::new();
        if !self.parity.is_empty() {
            let c: Vec<&str> = self
                .parity
                .iter()
                .map(|p| match *p {
                    PROBE_PARITY_0 => "0",
                    PROBE_PARITY_1 => "1",
                    PROBE_NONE => "-",
                    PROBE_BOTH => "both",
                    _ => "neither",
                })
                .collect();
            s.push_str(&format!(" | phases=[{}]", c.join(",")));
        }
        if !self.vars.is_empty() {
            let c: Vec<String> = self.vars.iter().map(|v| v.to_string()).collect();
            s.push_str(&format!(" | vars=[{}]", c.join(",")));
        }
        s
    }
}

impl Outcome {
    /// The outcome of a run that observed nothing yet: every thread unfinished, no completions.
    pub fn empty(model: &Model) -> Outcome {
        Outcome {
            threads: vec![ThreadOutcome::default(); model.proto.threads.len()],
            completions: vec![0; model.proto.barriers.len()],
            fault: false,
        }
    }

    /// One line per thread with its role label, then completions and fault, for reports.
    pub fn describe(&self, model: &Model) -> String {
        let mut out = String::new();
        for (t, th) in self.threads.iter().enumerate() {
            let label = if t < model.proto.threads.len() {
                model.proto.thread_label(t)
            } else {
                format!("thread {t}")
            };
            out.push_str(&format!("{label}: {th}\n"));
        }
        let named: Vec<String> = self
            .completions
            .iter()
            .enumerate()
            .filter(|(b, _)| model.proto.barriers.get(*b).is_some_and(|i| i.completion.is_some()))
            .map(|(b, n)| format!("{}={n}", model.proto.barriers[b].name))
            .collect();
        if !named.is_empty() {
            out.push_str(&format!("completions: {}\n", named.join(" ")));
        }
        if self.fault {
            out.push_str("fault\n");
        }
        out
    }
}

impl fmt::Display for ThreadOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.finished { "done" } else { "HUNG" })?;
        if !self.reads.is_empty() {
            let r: Vec<String> = self
                .reads
                .iter()
                .map(|v| if *v == -1 { "torn".into() } else { v.to_string() })
                .collect();
            write!(f, " reads=[{}]", r.join(","))?;
        }
        if !self.try_waits.is_empty() {
            let r: Vec<&str> = self.try_waits.iter().map(|b| if *b { "1" } else { "0" }).collect();
            write!(f, " try=[{}]", r.join(","))?;
        }
        if !self.token_parities.is_empty() {
            let r: Vec<String> = self.token_parities.iter().map(|p| p.to_string()).collect();
            write!(f, " parity=[{}]", r.join(","))?;
        }
        Ok(())
    }
}

/// Compact one-line form: `t0 done reads=[0,1] | t1 HUNG parity=[0] | completions=[0,3] | fault`.
impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self.threads.iter().enumerate().map(|(t, th)| format!("t{t} {th}")).collect();
        if self.completions.iter().any(|c| *c != 0) {
            let c: Vec<String> = self.completions.iter().map(|c| c.to_string()).collect();
            parts.push(format!("completions=[{}]", c.join(",")));
        }
        if self.fault {
            parts.push("fault".into());
        }
        f.write_str(&parts.join(" | "))
    }
}

impl Outcome {
    /// Parse the one-line form written by `Display` (the keys of a report's `observed`), e.g.
    /// `t0 done reads=[0,torn] | t1 HUNG parity=[0] | completions=[0,3] | fault`. `barriers` is
    /// the spec's flattened barrier count: the line omits completions when all are zero. A lone
    /// `fault` is a faulted launch whose per-thread data could not be read back.
    pub fn parse(line: &str, barriers: usize) -> Result<Outcome, String> {
        Outcome::parse_observed(line, barriers).map(|(o, _)| o)
    }

    /// [`Outcome::parse`] of an observation line that may end with the end facts
    /// (`| phases=[...] | vars=[...]`, see [`End::suffix`]).
    pub fn parse_observed(line: &str, barriers: usize) -> Result<(Outcome, End), String> {
        let mut end = End::default();
        let mut o = Outcome {
            threads: Vec::new(),
            completions: vec![0; barriers],
            fault: false,
        };
        let list = |v: &str, what: &str| -> Result<Vec<String>, String> {
            let inner = v
                .strip_prefix('[')
                .and_then(|v| v.strip_suffix(']'))
                .ok_or_else(|| format!("`{what}` is not a [list]: {v}"))?;
            Ok(if inner.is_empty() {
                Vec::new()
            } else {
                inner.split(',').map(str::to_string).collect()
            })
        };
        let num = |x: &str| x.parse::<i64>().map_err(|e| format!("bad number `{x}`: {e}"));
        for part in line.split(" | ").map(str::trim).filter(|p| !p.is_empty()) {
            if part == "fault" {
                o.fault = true;
            } else if let Some(v) = part.strip_prefix("phases=") {
                end.parity = list(v, "phases")?
                    .iter()
                    .map(|x| match x.as_str() {
                        "0" => Ok(PROBE_PARITY_0),
                        "1" => Ok(PROBE_PARITY_1),
                        "-" => Ok(PROBE_NONE),
                        "both" => Ok(PROBE_BOTH),
                        "neither" => Ok(PROBE_NEITHER),
                        _ => Err(format!("bad phase probe `{x}`")),
                    })
                    .collect::<Result<_, _>>()?;
            } else if let Some(v) = part.strip_prefix("vars=") {
                end.vars = list(v, "vars")?.iter().map(|x| num(x)).collect::<Result<_, _>>()?;
            } else if let Some(v) = part.strip_prefix("completions=") {
                let c = list(v, "completions")?
                    .iter()
                    .map(|x| x.parse::<u32>().map_err(|e| format!("bad count `{x}`: {e}")))
                    .collect::<Result<Vec<_>, _>>()?;
                if c.len() != barriers {
                    return Err(format!("{} completion counts, the spec has {barriers} barriers", c.len()));
                }
                o.completions = c;
            } else if let Some(rest) = part.strip_prefix('t') {
                let mut words = rest.split(' ');
                let t: usize = words
                    .next()
                    .and_then(|w| w.parse().ok())
                    .ok_or_else(|| format!("bad thread `{part}`"))?;
                if t != o.threads.len() {
                    return Err(format!("thread t{t} out of order in `{line}`"));
                }
                let mut th = ThreadOutcome::default();
                match words.next() {
                    Some("done") => th.finished = true,
                    Some("HUNG") => th.finished = false,
                    w => return Err(format!("thread t{t}: expected done or HUNG, found {w:?}")),
                }
                for w in words {
                    if let Some(v) = w.strip_prefix("reads=") {
                        th.reads = list(v, "reads")?
                            .iter()
                            .map(|x| if x == "torn" { Ok(-1) } else { num(x) })
                            .collect::<Result<_, _>>()?;
                    } else if let Some(v) = w.strip_prefix("try=") {
                        th.try_waits = list(v, "try")?.iter().map(|x| x == "1").collect();
                    } else if let Some(v) = w.strip_prefix("parity=") {
                        th.token_parities = list(v, "parity")?
                            .iter()
                            .map(|x| num(x).map(|n| n as u8))
                            .collect::<Result<_, _>>()?;
                    } else {
                        return Err(format!("thread t{t}: unknown field `{w}`"));
                    }
                }
                o.threads.push(th);
            } else {
                return Err(format!("unknown part `{part}` in `{line}`"));
            }
        }
        Ok((o, end))
    }

    /// No observation at all: every per-thread vector empty and no completion-function run.
    pub fn observes_nothing(&self) -> bool {
        self.threads
            .iter()
            .all(|t| t.reads.is_empty() && t.try_waits.is_empty() && t.token_parities.is_empty())
            && self.completions.iter().all(|c| *c == 0)
    }
}

/// How an allowed set judges one observed outcome (see [`AllowedSet::judge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Judged {
    /// Admitted by a concrete outcome, or by an undefined-behaviour pattern whose prefix holds
    /// at least one observation: the model constrained what could be seen, and the GPU agreed.
    Constrained,
    /// Admitted only by undefined-behaviour patterns reached before any observation: the model
    /// allows anything, so the observation is no evidence either way.
    Vacuous,
    /// Not admitted: outside the model.
    Rejected,
}

/// Which observation a thread statement contributes to its [`ThreadOutcome`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// `read(B)` / `read(B, expect = V)`: one entry of `reads`.
    Read,
    /// `try_wait` / `try_wait_parity`: one entry of `try_waits`.
    TryWait,
    /// `arrive(B)` / `arrive(B, n)` / `arrive_expect_tx(B, bytes)` (bound to a name or not): one
    /// entry of `token_parities`.
    Token,
}

/// What a role statement records. The code generator records exactly these: reads and try_waits
/// of the role body, and the tokens of `arrive`/`arrive_expect_tx`. Not recorded: the arrive half
/// of `arrive_and_wait` (lowered to an arrive into the hidden local `$token`), `arrive_and_drop`,
/// `commit`, and anything a completion function does.
pub fn recorded(code: &Code, instr: &Instr) -> Option<Recorded> {
    match &instr.kind {
        InstrKind::Op { op: IOp::Read { .. }, .. } => Some(Recorded::Read),
        // A DSMEM read of a peer CTA's buffer (cluster scope) is a read like any other.
        InstrKind::Op {
            op: IOp::Remote { multicast: false, op, .. },
            ..
        } if matches!(**op, IOp::Read { .. }) => Some(Recorded::Read),
        // A try_wait polled in a `while` loop answers as often as the hardware spins: its
        // answers are not an outcome (the model bounds the loop by revisiting states, not by count).
        InstrKind::Op {
            op: IOp::Wait { try_: true, .. },
            ..
        } if !code.has_while => Some(Recorded::TryWait),
        InstrKind::Op {
            op: IOp::Arrive { drop: false, .. },
            result,
        } => {
            let hidden = result.is_some_and(|r| code.local_names.get(r as usize).is_some_and(|n| n == "$token"));
            (!hidden).then_some(Recorded::Token)
        }
        _ => None,
    }
}

/// A step's arrivals reach one barrier on two different phases (a uniform agent's lanes arriving
/// past the pending count: the model merges the lanes' arrivals per phase).
fn arrivals_span_phases(obs: &[Obs]) -> bool {
    let mut first: Option<(u16, i64)> = None;
    obs.iter().any(|o| match (o, first) {
        (Obs::Arrived { bar, phase, .. }, None) => {
            first = Some((*bar, *phase));
            false
        }
        (Obs::Arrived { bar, phase, .. }, Some((b, p))) => *bar == b && *phase != p,
        _ => false,
    })
}

/// No async copy is in flight and (the async proxy, issue 13) no asynchronous read of shared memory
/// is either: a CTA whose threads have all exited with one outstanding is the model's `lifetime`.
fn nothing_in_flight(s: &State) -> bool {
    s.copies.is_empty() && s.proxy.reads.is_empty()
}

/// Undefined behaviour reached after `prefix`: every outcome extending it is allowed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Undefined {
    /// The observations made before the undefined step. `finished` is meaningless here (false).
    pub prefix: Outcome,
    /// The violation that made the rest undefined.
    pub cause: ViolationKind,
}

impl Undefined {
    /// Does an observed outcome agree with the prefix? Per thread the recorded vectors must start
    /// with the prefix's, completion counts must be at least the prefix's; `finished` and `fault`
    /// are free. A faulted run with no per-thread data read back is admitted.
    pub fn admits(&self, o: &Outcome) -> bool {
        if o.fault && o.threads.is_empty() {
            return true;
        }
        let p = &self.prefix;
        o.threads.len() == p.threads.len()
            && o.threads.iter().zip(&p.threads).all(|(a, b)| {
                a.reads.starts_with(&b.reads) && a.try_waits.starts_with(&b.try_waits) && a.token_parities.starts_with(&b.token_parities)
            })
            && o.completions.len() == p.completions.len()
            && o.completions.iter().zip(&p.completions).all(|(a, b)| a >= b)
    }

    /// Reached before any observation: the pattern admits every outcome, so it checks nothing.
    pub fn is_vacuous(&self) -> bool {
        self.prefix.observes_nothing()
    }
}

/// Every outcome the model allows for a spec, with the hardware widenings of the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AllowedSet {
    /// Outcomes of executions that ended without undefined behaviour (`fault` is false in all).
    outcomes: BTreeSet<Outcome>,
    /// Executions that reached undefined behaviour: anything extending the prefix may follow.
    undefined: BTreeSet<Undefined>,
    /// False when the `limit` was reached before every execution was explored.
    complete: bool,
    /// Distinct (state, partial outcome) pairs explored.
    explored: usize,
    /// Which bound stopped the exploration when `complete` is false (`states` or `seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stopped_by: Option<String>,
    /// Per concrete outcome, the ends ([`End`]) of the executions that give it.
    #[serde(default)]
    ends: BTreeSet<(Outcome, End)>,
}

impl AllowedSet {
    /// Number of concrete outcomes (not counting [`Undefined`] patterns).
    pub fn len(&self) -> usize {
        self.outcomes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.outcomes.is_empty() && self.undefined.is_empty()
    }

    /// Whether every execution was explored. If not, `contains` may reject an allowed outcome.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Distinct (state, partial outcome) pairs the exploration visited.
    pub fn explored(&self) -> usize {
        self.explored
    }

    /// Is this GPU-observed outcome one the model (widened for hardware) allows?
    pub fn contains(&self, o: &Outcome) -> bool {
        (!o.fault && self.outcomes.contains(o)) || self.undefined.iter().any(|u| u.admits(o))
    }

    /// Judge one observed outcome: [`Judged::Constrained`] when a concrete outcome or an
    /// undefined-behaviour pattern with a non-empty prefix admits it (a faulted run with no data
    /// read back needs such a pattern to exist), [`Judged::Vacuous`] when only patterns reached
    /// before any observation do, [`Judged::Rejected`] otherwise.
    pub fn judge(&self, o: &Outcome) -> Judged {
        if !o.fault && self.outcomes.contains(o) {
            return Judged::Constrained;
        }
        let mut vacuous = false;
        for u in self.undefined.iter().filter(|u| u.admits(o)) {
            if !u.is_vacuous() {
                return Judged::Constrained;
            }
            vacuous = true;
        }
        if vacuous {
            Judged::Vacuous
        } else {
            Judged::Rejected
        }
    }

    /// [`AllowedSet::judge`] with what the run left behind: an outcome admitted through a concrete
    /// allowed outcome must also end as one of the executions giving that outcome ended (undefined
    /// behaviour leaves the end free).
    pub fn judge_end(&self, o: &Outcome, end: &End) -> Judged {
        let j = self.judge(o);
        if j != Judged::Constrained || end.is_empty() || !self.outcomes.contains(o) || o.fault {
            return j;
        }
        let known = self.ends_of(o);
        let fits = known.is_empty() || known.iter().any(|e| e.admits(end));
        if fits {
            return j;
        }
        // The observations fit but the end does not: only an undefined-behaviour pattern can
        // still admit it.
        let mut vacuous = false;
        for u in self.undefined.iter().filter(|u| u.admits(o)) {
            if !u.is_vacuous() {
                return Judged::Constrained;
            }
            vacuous = true;
        }
        if vacuous {
            Judged::Vacuous
        } else {
            Judged::Rejected
        }
    }

    /// The ends the executions giving outcome `o` reach (empty when none is known).
    pub fn ends_of(&self, o: &Outcome) -> Vec<&End> {
        self.ends
            .range((o.clone(), End::default())..)
            .take_while(|(k, _)| k == o)
            .map(|(_, e)| e)
            .collect()
    }

    /// The undefined-behaviour causes reached before any observation (each makes the set admit
    /// every outcome); empty when the set constrains what can be seen.
    pub fn vacuous_causes(&self) -> Vec<ViolationKind> {
        let k: BTreeSet<ViolationKind> = self.undefined.iter().filter(|u| u.is_vacuous()).map(|u| u.cause).collect();
        k.into_iter().collect()
    }

    /// The bound that stopped an incomplete exploration (`states`, `seconds`, `outcomes` or
    /// `step budget`).
    pub fn stopped_by(&self) -> Option<&str> {
        self.stopped_by.as_deref()
    }

    /// The concrete outcomes, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Outcome> + '_ {
        self.outcomes.iter()
    }

    /// The undefined-behaviour patterns, in order.
    pub fn undefined(&self) -> impl Iterator<Item = &Undefined> + '_ {
        self.undefined.iter()
    }

    /// Whether a launch fault is allowed (some execution reaches undefined behaviour).
    pub fn fault_allowed(&self) -> bool {
        !self.undefined.is_empty()
    }

    /// `"12 outcomes"`, `"1 outcome + 2 undefined-behaviour prefixes (lifetime), fault allowed"`,
    /// with `", incomplete"` when the limit was reached.
    pub fn summary(&self) -> String {
        let n = self.outcomes.len();
        let mut s = format!("{n} outcome{}", if n == 1 { "" } else { "s" });
        if !self.undefined.is_empty() {
            let u = self.undefined.len();
            let kinds: BTreeSet<ViolationKind> = self.undefined.iter().map(|u| u.cause).collect();
            let kinds: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
            s.push_str(&format!(
                " + {u} undefined-behaviour prefix{} ({}), fault allowed",
                if u == 1 { "" } else { "es" },
                kinds.join(", ")
            ));
        }
        if !self.complete {
            let by = self.stopped_by.as_deref().unwrap_or("states");
            s.push_str(&format!(", incomplete ({by} limit reached after {} states)", self.explored));
        }
        s
    }
}

impl<'a> IntoIterator for &'a AllowedSet {
    type Item = &'a Outcome;
    type IntoIter = std::collections::btree_set::Iter<'a, Outcome>;
    fn into_iter(self) -> Self::IntoIter {
        self.outcomes.iter()
    }
}

impl fmt::Display for AllowedSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.summary())?;
        for o in &self.outcomes {
            writeln!(f, "  {o}")?;
        }
        for u in &self.undefined {
            writeln!(f, "  after {} (then anything): {}", u.cause, u.prefix)?;
        }
        Ok(())
    }
}

// ---- exploration ------------------------------------------------------------------------------

/// A move of the widened machine: a model action, or a blocked thread's bounded wait timing out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Move {
    Model(Action),
    Timeout(u16),
}

/// What the execution carries besides the model state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Partial {
    /// Observations so far (`finished` is filled in at the end).
    obs: Outcome,
    /// Threads that timed out.
    hung: Vec<bool>,
    /// Threads whose wait was blocked when the CTA went quiet: they may time out.
    armed: Vec<bool>,
    /// Buffers touched by a racing step.
    racy: Vec<bool>,
    /// Per buffer: versions written into it so far (sorted, with the initial 0).
    versions: Vec<Vec<i64>>,
}

enum Situation {
    /// Every thread exited and nothing is in flight.
    Done,
    /// Every thread exited with an async copy still in flight: undefined behaviour (lifetime).
    ExitInFlight,
    /// Nothing can move and a lane waits at a warp collective for a lane of its mask that never
    /// executes a matching one: undefined behaviour (`Model::warp_collective_ub`).
    WarpCollective,
    /// Nothing can move: the unfinished threads wait at execution barriers forever.
    Stuck,
    Moves(Vec<Move>),
}

#[allow(clippy::large_enum_variant)]
enum Next {
    Continue(State, Partial),
    Undefined(Undefined),
    /// The step ran past the model's step budget (`Outcome::cut`): no successor is known, and
    /// the enumeration is incomplete, never an end of the execution.
    Cut,
}

/// What a caller replaying one path says when a step is cut by the step budget.
fn cut_error(i: usize) -> String {
    format!("step {i} ran past the step budget (16,777,216 local instructions in one step)")
}

/// The model with a way to make a thread time out. Each role's code gets three instructions
/// appended past its end: `return` (where a thread that runs off the end lands, so nothing changes
/// for it), then `work; return`. A timed-out thread is moved onto that `work` and stepped: it exits
/// without touching any barrier, and the model's own settling releases the execution barriers its
/// exit completes, exactly as for a thread that returns.
struct Machine {
    model: Model,
    timeout_pc: Vec<u32>,
    has_completion: Vec<bool>,
    /// [`completion_vars`]: their final values are part of the outcome.
    end_vars: Vec<u16>,
}

impl Machine {
    fn new(model: &Model) -> Machine {
        let mut proto = model.proto.clone();
        let mut timeout_pc = Vec::new();
        let span = Span::default();
        for role in &mut proto.roles {
            let n = role.code.instrs.len() as u32;
            for (kind, visible) in [(InstrKind::Return, false), (InstrKind::Work, true), (InstrKind::Return, false)] {
                role.code.instrs.push(Instr { kind, span, visible });
            }
            timeout_pc.push(n + 1);
        }
        let has_completion = proto.barriers.iter().map(|b| b.completion.is_some()).collect();
        // The caller's model settings carry over (a planted mutant must reach the enumeration too).
        let mut widened = Model::new(proto);
        widened.mutant = model.mutant;
        widened.fine_grained = model.fine_grained;
        Machine {
            end_vars: completion_vars(&model.proto),
            model: widened,
            timeout_pc,
            has_completion,
        }
    }

    /// The initial state, or why there is none: undefined behaviour, or (None) initialisation
    /// ran past the step budget.
    fn start(&self) -> Result<(State, Partial), Option<Undefined>> {
        let empty = Outcome::empty(&self.model);
        let init = self.model.init();
        if init.cut {
            return Err(None);
        }
        let Some(s) = init.next else {
            return Err(Some(Undefined {
                prefix: empty,
                cause: cause_of(&init.violations),
            }));
        };
        let p = &self.model.proto;
        let n = p.threads.len();
        let partial = Partial {
            obs: empty,
            hung: vec![false; n],
            armed: vec![false; n],
            racy: vec![false; p.buffers.len()],
            versions: vec![vec![0]; p.buffers.len()],
        };
        Ok((s, partial))
    }

    fn enabled(&self, s: &State) -> Vec<Action> {
        let mut v = Vec::new();
        self.model.actions(s, &mut v);
        v
    }

    /// What can happen next; arms the blocked threads when the CTA is quiet.
    fn situation(&self, s: &State, p: &mut Partial) -> Situation {
        if s.all_done() {
            return if nothing_in_flight(s) {
                Situation::Done
            } else {
                Situation::ExitInFlight
            };
        }
        let enabled = self.enabled(s);
        let blocked: Vec<usize> = (0..s.threads.len())
            .filter(|&t| s.threads[t].status == Status::Running && !enabled.contains(&Action::Thread(t as u16)))
            .collect();
        if enabled.is_empty() {
            if self.model.warp_collective_ub(s).is_some() {
                return Situation::WarpCollective;
            }
            for &t in &blocked {
                p.armed[t] = true;
            }
        }
        // Threads that can only spin (a `while` polling what no one can change any more) are
        // blocked as surely as a wait: the kernel bounds their loop in time too.
        let spinning: Vec<usize> = if !enabled.is_empty()
            && enabled
                .iter()
                .all(|a| matches!(a, Action::Thread(t) if self.model.spins(s, *t as usize)))
        {
            enabled
                .iter()
                .filter_map(|a| if let Action::Thread(t) = a { Some(*t as usize) } else { None })
                .collect()
        } else {
            Vec::new()
        };
        for &t in blocked.iter().chain(&spinning) {
            if !spinning.is_empty() {
                p.armed[t] = true;
            }
        }
        let mut moves: Vec<Move> = enabled.into_iter().map(Move::Model).collect();
        moves.extend(
            blocked
                .into_iter()
                .chain(spinning)
                .filter(|&t| p.armed[t])
                .map(|t| Move::Timeout(t as u16)),
        );
        if moves.is_empty() {
            Situation::Stuck
        } else {
            Situation::Moves(moves)
        }
    }

    /// The outcome of an execution that ends in `s`.
    fn finish(&self, s: &State, p: &Partial) -> Outcome {
        let mut o = p.obs.clone();
        for (t, th) in o.threads.iter_mut().enumerate() {
            th.finished = s.threads[t].status == Status::Done && !p.hung[t];
        }
        o.fault = false;
        o
    }

    /// What the end probes and var reads see in state `s` (every thread exited or stuck).
    fn end_of(&self, s: &State) -> End {
        End {
            parity: end_parity(s),
            vars: self.end_vars.iter().map(|&v| s.vars[v as usize].value).collect(),
        }
    }

    fn undefined(&self, p: &Partial, cause: ViolationKind) -> Undefined {
        let mut prefix = p.obs.clone();
        for th in &mut prefix.threads {
            th.finished = false;
        }
        prefix.fault = true;
        Undefined { prefix, cause }
    }

    /// Take one move. With `widen`, a read of a racy buffer branches over every value the
    /// hardware may return; without, it records the model's value.
    fn apply(&self, s: &State, p: &Partial, mv: Move, widen: bool) -> Vec<Next> {
        let proto = &self.model.proto;
        let (out, own) = match mv {
            Move::Model(a) => {
                let own = match a {
                    Action::Thread(t) => {
                        let code = proto.code_of(t as usize);
                        Some((t as usize, code, &code.instrs[s.threads[t as usize].pc as usize]))
                    }
                    Action::Land(_) | Action::LandPart(_) => None,
                };
                (self.model.step(s, a), own)
            }
            Move::Timeout(t) => {
                let mut s2 = s.clone();
                s2.threads[t as usize].pc = self.timeout_pc[proto.threads[t as usize].role as usize];
                (self.model.step(&s2, Action::Thread(t)), None)
            }
        };
        if let Some(e) = &out.internal {
            // A model bug, never undefined behaviour of the program: the caller (the runner's
            // stage guard) catches the panic and records the spec as failed.
            panic!("model internal error [{}]: {}", e.rule, e.message);
        }
        if out.cut {
            return vec![Next::Cut];
        }
        let Some(next) = out.next else {
            return vec![Next::Undefined(self.undefined(p, cause_of(&out.violations)))];
        };
        let mut q = p.clone();
        match mv {
            Move::Model(Action::Thread(t)) => q.armed[t as usize] = false,
            Move::Timeout(t) => {
                q.armed[t as usize] = false;
                q.hung[t as usize] = true;
            }
            Move::Model(Action::Land(_) | Action::LandPart(_)) => {}
        }
        let obs = out.event.map(|e| e.obs).unwrap_or_default();
        // A uniform agent's lanes arrive as one warp instruction. Where their arrivals run past
        // the phase's pending count, the model applies them lane by lane into the next phases
        // (and reports what follows), while the H200 applies them as one batched update and
        // faults (over-arrival, docs/hardware-notes.md): from there the hardware may do anything.
        let batched_over = own.is_some_and(|(t, _, _)| proto.lanes_at(t, s.threads[t].pc) > 1) && arrivals_span_phases(&obs);
        let over = batched_over.then(|| Next::Undefined(self.undefined(p, ViolationKind::OverArrival)));
        if out
            .violations
            .iter()
            .any(|v| matches!(v.kind, ViolationKind::DataRace | ViolationKind::CompletionMisuse))
        {
            for o in &obs {
                if let Obs::Read { buf, .. } | Obs::Wrote { buf, .. } | Obs::CopyIssued { buf, .. } = o {
                    q.racy[*buf as usize] = true;
                }
            }
        }
        for o in &obs {
            match o {
                Obs::Wrote { buf, version } | Obs::CopyIssued { buf, version, .. } => {
                    let v = &mut q.versions[*buf as usize];
                    if let Err(i) = v.binary_search(version) {
                        v.insert(i, *version);
                    }
                }
                Obs::PhaseCompleted { bar, .. } if self.has_completion[*bar as usize] => q.obs.completions[*bar as usize] += 1,
                _ => {}
            }
        }
        let Some((t, code, instr)) = own else {
            return vec![Next::Continue(next, q)];
        };
        let th = t;
        let mut res = match recorded(code, instr) {
            Some(Recorded::Read) => {
                let Some((buf, version)) = obs.iter().find_map(|o| match o {
                    Obs::Read { buf, version } => Some((*buf as usize, *version)),
                    _ => None,
                }) else {
                    return vec![Next::Continue(next, q)];
                };
                let mut values = vec![version];
                if widen && q.racy[buf] {
                    values.push(-1);
                    values.extend(q.versions[buf].iter().copied().filter(|v| *v != version && *v != -1));
                }
                let bound = matches!(instr.kind, InstrKind::Op { result: Some(_), .. });
                let mut res = Vec::with_capacity(values.len());
                for v in values {
                    let mut q2 = q.clone();
                    q2.obs.threads[th].reads.push(v);
                    if v != version && bound {
                        res.push(Next::Undefined(self.undefined(&q2, ViolationKind::DataRace)));
                    } else {
                        res.push(Next::Continue(next.clone(), q2));
                    }
                }
                res
            }
            Some(Recorded::TryWait) => {
                if let Some(r) = obs.iter().find_map(|o| match o {
                    Obs::TryWait { result, .. } => Some(*result),
                    _ => None,
                }) {
                    q.obs.threads[th].try_waits.push(r);
                }
                vec![Next::Continue(next, q)]
            }
            Some(Recorded::Token) => {
                if let Some(ph) = obs.iter().find_map(|o| match o {
                    Obs::Arrived { phase, .. } => Some(*phase),
                    _ => None,
                }) {
                    q.obs.threads[th].token_parities.push(ph.rem_euclid(2) as u8);
                }
                vec![Next::Continue(next, q)]
            }
            None => vec![Next::Continue(next, q)],
        };
        res.extend(over);
        res
    }
}

/// What the end probes read in state `s`: the parity of each live barrier's phase in progress;
/// [`PROBE_NONE`] for a barrier never initialised or invalidated (the kernel does not probe it).
fn end_parity(s: &State) -> Vec<u8> {
    s.barriers
        .iter()
        .map(|b| match b.life {
            Life::Live => b.phase.rem_euclid(2) as u8,
            Life::Uninit | Life::Invalidated => PROBE_NONE,
        })
        .collect()
}

/// The violation that ended an execution: the first undefined-behaviour kind, else the first.
fn cause_of(v: &[Violation]) -> ViolationKind {
    v.iter()
        .find(|v| v.kind.ends_execution())
        .or(v.first())
        .map(|v| v.kind)
        .unwrap_or(ViolationKind::Assertion)
}

/// The end of an execution seen from some state: the observations from there on (`completions`
/// as increments), and the undefined behaviour that ended it, if any.
/// The end facts ride along unchanged from the leaf (`End::default()` after undefined behaviour).
type Tail = (Option<ViolationKind>, Outcome, End);

/// `head` (one step's observations) followed by `tail`.
fn prepend(head: &Outcome, tail: &Outcome) -> Outcome {
    let threads = head
        .threads
        .iter()
        .zip(&tail.threads)
        .map(|(h, t)| ThreadOutcome {
            finished: t.finished,
            reads: h.reads.iter().chain(&t.reads).copied().collect(),
            try_waits: h.try_waits.iter().chain(&t.try_waits).copied().collect(),
            token_parities: h.token_parities.iter().chain(&t.token_parities).copied().collect(),
        })
        .collect();
    let completions = head.completions.iter().zip(&tail.completions).map(|(a, b)| a + b).collect();
    Outcome {
        threads,
        completions,
        fault: false,
    }
}

/// The futures (observation tails) the enumeration may hold in its memo, summed over states, by
/// default: about 700 bytes each (diverged_warp_commit holds 4.2 M, 2.9 GB peak), so ~6 GB at most.
pub const MAX_HELD_FUTURES: usize = 8_000_000;

/// Every outcome the spec allows on hardware (see the module docs for the widening rules).
/// `limit` bounds the distinct states explored (model state plus the racy/hung/armed
/// bookkeeping); past it the set holds what the explored part gives and `is_complete() == false`.
///
/// The exploration computes, for each such state, the set of its possible futures (observations
/// from there on) once, depth-first, and prepends each step's observations: the observations made
/// so far never decide what happens next, so they are kept out of the memo key.
pub fn allowed_outcomes(model: &Model, limit: usize) -> AllowedSet {
    allowed_outcomes_within(model, limit, None)
}

/// [`allowed_outcomes`] holding at most `futures` observation tails (instead of
/// [`MAX_HELD_FUTURES`]): past it the set is incomplete (`stopped_by() == Some("outcomes")`).
pub fn allowed_outcomes_capped(model: &Model, limit: usize, futures: usize) -> AllowedSet {
    let m = Machine::new(model);
    match m.start() {
        Ok((s0, p0)) => explore(&m, s0, p0, limit, None, futures),
        Err(_) => allowed_outcomes_within(model, limit, None),
    }
}

/// [`allowed_outcomes`] with a deadline as well: past it the set is incomplete
/// (`stopped_by() == Some("seconds")`).
pub fn allowed_outcomes_within(model: &Model, limit: usize, deadline: Option<Instant>) -> AllowedSet {
    let m = Machine::new(model);
    match m.start() {
        Ok((s0, p0)) => explore(&m, s0, p0, limit, deadline, MAX_HELD_FUTURES),
        Err(Some(u)) => {
            let mut set = AllowedSet {
                complete: true,
                ..AllowedSet::default()
            };
            set.undefined.insert(u);
            set
        }
        Err(None) => AllowedSet {
            complete: false,
            stopped_by: Some("step budget".into()),
            ..AllowedSet::default()
        },
    }
}

/// The outcomes allowed once the first `steps` actions of a trace have run: every execution from
/// the state the trace reaches there, each outcome starting with the observations the trace made
/// before it (what a replayed block that left the trace at that point may show). `steps == 0` is
/// [`allowed_outcomes`]. Err when the prefix does not replay.
pub fn allowed_after(
    model: &Model,
    actions: &[Action],
    steps: usize,
    limit: usize,
    deadline: Option<Instant>,
) -> Result<AllowedSet, String> {
    let m = Machine::new(model);
    let (mut s, mut p) = match m.start() {
        Ok(x) => x,
        Err(_) => return Ok(allowed_outcomes_within(model, limit, deadline)),
    };
    for (i, &a) in actions.iter().take(steps).enumerate() {
        if !m.enabled(&s).contains(&a) {
            return Err(format!("step {i}: {a:?} is not enabled"));
        }
        match m.apply(&s, &p, Move::Model(a), false).pop().expect("one successor") {
            Next::Continue(s2, p2) => (s, p) = (s2, p2),
            Next::Undefined(u) => {
                // The trace reached undefined behaviour within the prefix: anything after it.
                let mut set = AllowedSet {
                    complete: true,
                    ..AllowedSet::default()
                };
                set.undefined.insert(u);
                return Ok(set);
            }
            Next::Cut => return Err(cut_error(i)),
        }
    }
    Ok(explore(&m, s, p, limit, deadline, MAX_HELD_FUTURES))
}

/// The widened machine seen by the engine's fold: a key is the model state with the racy, hung
/// and armed bookkeeping (never the observations made so far, which do not decide what happens
/// next); a step's label is its observations; a tail is how the execution ends.
struct Widened<'a> {
    m: &'a Machine,
    empty: Outcome,
    /// Some step ran past the model's step budget: the enumeration is incomplete.
    cut: std::cell::Cell<bool>,
}

impl Futures for Widened<'_> {
    type Key = (State, Partial);
    type Label = Outcome;
    type Tail = Tail;

    fn edges(&self, (s, p): &(State, Partial)) -> Vec<FoldEdge<(State, Partial), Outcome, Tail>> {
        let m = self.m;
        let mut p = p.clone();
        match m.situation(s, &mut p) {
            Situation::Done | Situation::Stuck => vec![FoldEdge::Leaf((None, m.finish(s, &p), m.end_of(s)))],
            Situation::ExitInFlight => vec![FoldEdge::Leaf((Some(ViolationKind::Lifetime), p.obs.clone(), End::default()))],
            Situation::WarpCollective => vec![FoldEdge::Leaf((Some(ViolationKind::Assertion), p.obs.clone(), End::default()))],
            Situation::Moves(moves) => {
                let mut edges = Vec::new();
                for mv in moves {
                    for n in m.apply(s, &p, mv, true) {
                        edges.push(match n {
                            Next::Cut => {
                                self.cut.set(true);
                                continue;
                            }
                            Next::Undefined(u) => {
                                let mut head = u.prefix;
                                head.fault = false;
                                FoldEdge::Leaf((Some(u.cause), head, End::default()))
                            }
                            Next::Continue(s2, mut p2) => {
                                let head = std::mem::replace(&mut p2.obs, self.empty.clone());
                                FoldEdge::Step(head, (s2, p2))
                            }
                        });
                    }
                }
                edges
            }
        }
    }

    fn prepend(&self, head: &Outcome, (u, t, e): &Tail) -> Tail {
        (*u, prepend(head, t), e.clone())
    }
}

/// Every future of `(s0, p0)`, through the engine's fold; `p0.obs` (the observations made before)
/// prefixes every outcome.
fn explore(m: &Machine, s0: State, p0: Partial, limit: usize, deadline: Option<Instant>, futures: usize) -> AllowedSet {
    let w = Widened {
        m,
        empty: Outcome::empty(&m.model),
        cut: std::cell::Cell::new(false),
    };
    let limits = FoldLimits {
        states: limit,
        deadline,
        tails: futures,
    };
    let folded = fold(&w, (s0, p0), limits);
    let mut set = AllowedSet {
        complete: folded.stopped.is_none(),
        explored: folded.explored,
        stopped_by: folded.stopped.map(|s| {
            match s {
                FoldStop::States => "states",
                FoldStop::Seconds => "seconds",
                FoldStop::Tails => "outcomes",
            }
            .into()
        }),
        ..AllowedSet::default()
    };
    if matches!(folded.stopped, Some(FoldStop::Seconds | FoldStop::Tails)) {
        return set;
    }
    if w.cut.get() {
        set.complete = false;
        set.stopped_by = Some("step budget".into());
    }
    for (u, o, e) in folded.tails {
        match u {
            None => {
                set.ends.insert((o.clone(), e));
                set.outcomes.insert(o);
            }
            Some(cause) => {
                let mut prefix = o;
                prefix.threads.iter_mut().for_each(|t| t.finished = false);
                prefix.fault = true;
                set.undefined.insert(Undefined { prefix, cause });
            }
        }
    }
    set
}

/// How a thread ended in a replayed trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadEnd {
    /// Ran to its end.
    Finished,
    /// Blocked forever: timed out at a wait, or stuck at an execution barrier.
    Hung,
    /// At the end of a trace that stops early: blocked at a wait or an execution barrier.
    Blocked,
    /// At the end of a trace that stops early: able to run on. Reported `finished: true` in the
    /// outcome (the trace does not force it to hang), its vectors are what it recorded so far.
    Running,
}

/// The outcome a trace forces, with the details a replay comparison needs.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Forced {
    pub outcome: Outcome,
    pub ends: Vec<ThreadEnd>,
    /// The trace reached undefined behaviour (its last step, or every thread exiting with a copy
    /// in flight): the outcome holds what was observed before it; the hardware may do anything after.
    pub undefined: Option<ViolationKind>,
    /// Threads that timed out after the trace, in order (the trace ended with the CTA quiet).
    pub timeouts: Vec<u16>,
    /// What the run leaves behind, when the trace fixes it (it runs until nothing can move).
    #[serde(default)]
    pub end: Option<End>,
}

/// Replay `actions` from the initial state and return what they force; see [`forced_outcome`].
pub fn forced(model: &Model, actions: &[Action]) -> Result<Forced, String> {
    let m = Machine::new(model);
    let n = model.proto.threads.len();
    let (mut s, mut p) = match m.start() {
        Ok(x) => x,
        Err(None) => return Err(cut_error(0)),
        Err(Some(u)) => {
            return Ok(Forced {
                outcome: Outcome::empty(model),
                ends: vec![ThreadEnd::Blocked; n],
                undefined: Some(u.cause),
                timeouts: Vec::new(),
                end: None,
            })
        }
    };
    let undefined_end = |m: &Machine, s: &State, p: &Partial, cause: ViolationKind, timeouts: Vec<u16>| {
        let (outcome, ends, _) = ends_of(m, s, p, false);
        Forced {
            outcome,
            ends,
            undefined: Some(cause),
            timeouts,
            end: None,
        }
    };
    for (i, &a) in actions.iter().enumerate() {
        if !m.enabled(&s).contains(&a) {
            return Err(format!("step {i}: {a:?} is not enabled"));
        }
        match m.apply(&s, &p, Move::Model(a), false).pop().expect("one successor") {
            Next::Continue(s2, p2) => (s, p) = (s2, p2),
            Next::Undefined(u) => return Ok(undefined_end(&m, &s, &p, u.cause, Vec::new())),
            Next::Cut => return Err(cut_error(i)),
        }
    }
    // A trace that ends with the CTA quiet (deadlock) goes on as the hardware does: blocked
    // waits time out, lowest thread first, and whatever their exits release runs on in the
    // canonical order (lowest thread, then landings) until nothing can move.
    let mut timeouts = Vec::new();
    let quiet = !s.all_done() && m.enabled(&s).is_empty();
    if quiet {
        loop {
            match m.situation(&s, &mut p) {
                Situation::Done | Situation::Stuck => break,
                Situation::ExitInFlight => return Ok(undefined_end(&m, &s, &p, ViolationKind::Lifetime, timeouts)),
                Situation::WarpCollective => return Ok(undefined_end(&m, &s, &p, ViolationKind::Assertion, timeouts)),
                Situation::Moves(moves) => {
                    let mv = moves[0];
                    if let Move::Timeout(t) = mv {
                        timeouts.push(t);
                    }
                    match m.apply(&s, &p, mv, false).pop().expect("one successor") {
                        Next::Continue(s2, p2) => (s, p) = (s2, p2),
                        Next::Undefined(u) => return Ok(undefined_end(&m, &s, &p, u.cause, timeouts)),
                        Next::Cut => return Err(cut_error(actions.len())),
                    }
                }
            }
        }
    } else if s.all_done() && !nothing_in_flight(&s) {
        return Ok(undefined_end(&m, &s, &p, ViolationKind::Lifetime, timeouts));
    }
    let terminal = s.all_done() || m.enabled(&s).is_empty();
    let (outcome, ends, end) = ends_of(&m, &s, &p, terminal);
    Ok(Forced {
        outcome,
        ends,
        undefined: None,
        timeouts,
        end,
    })
}

/// The observations a trace has made after each of its first k steps, k = 0..=len (no widening,
/// no continuation): what a replayed block that followed the trace that far has recorded at least.
/// Stops early (shorter result) where the trace reaches undefined behaviour.
pub fn prefix_observations(model: &Model, actions: &[Action]) -> Result<Vec<Outcome>, String> {
    let m = Machine::new(model);
    let Ok((mut s, mut p)) = m.start() else {
        return Ok(vec![Outcome::empty(model)]);
    };
    let mut out = vec![p.obs.clone()];
    for (i, &a) in actions.iter().enumerate() {
        if !m.enabled(&s).contains(&a) {
            return Err(format!("step {i}: {a:?} is not enabled"));
        }
        match m.apply(&s, &p, Move::Model(a), false).pop().expect("one successor") {
            Next::Continue(s2, p2) => (s, p) = (s2, p2),
            Next::Undefined(_) => break,
            Next::Cut => return Err(cut_error(i)),
        }
        out.push(p.obs.clone());
    }
    Ok(out)
}

/// Per-thread ends and the outcome in state `s`. `terminal`: nothing can move any more, so an
/// unfinished thread is hung rather than blocked.
fn ends_of(m: &Machine, s: &State, p: &Partial, terminal: bool) -> (Outcome, Vec<ThreadEnd>, Option<End>) {
    let enabled = m.enabled(s);
    let mut o = p.obs.clone();
    o.fault = false;
    let mut ends = Vec::with_capacity(s.threads.len());
    for (t, th) in s.threads.iter().enumerate() {
        let end = if th.status == Status::Done {
            if p.hung[t] {
                ThreadEnd::Hung
            } else {
                ThreadEnd::Finished
            }
        } else if terminal {
            ThreadEnd::Hung
        } else if th.status == Status::Running && enabled.contains(&Action::Thread(t as u16)) {
            ThreadEnd::Running
        } else {
            ThreadEnd::Blocked
        };
        o.threads[t].finished = matches!(end, ThreadEnd::Finished | ThreadEnd::Running);
        ends.push(end);
    }
    // Only an execution that cannot go on fixes the barriers' final phases.
    let end = (terminal && !s.all_done() || s.all_done() && nothing_in_flight(s)).then(|| m.end_of(s));
    (o, ends, end)
}

/// The outcome a trace forces on the threads' observations. Reads take the model's value.
///
/// - A thread that finished in the trace: `finished: true`.
/// - A trace ending in a deadlock (no action enabled, some thread unfinished) continues as the
///   hardware does (module docs, rule 3): blocked waits time out, lowest thread first, and what
///   their exits release runs on canonically; timed-out threads and threads left at an execution
///   barrier are `finished: false`.
/// - A trace that stops early (actions still enabled): a thread blocked at its end is
///   `finished: false`; a thread that could still run is `finished: true` with the observations it
///   made so far (a prefix of what the GPU run records). [`forced`] tells the two apart.
/// - A trace that reaches undefined behaviour: the observations before the undefined step, with
///   `fault: false`; [`forced`] reports the cause.
///
/// Panics if an action of the trace is not enabled where it is taken (use [`forced`] to get an
/// error instead).
pub fn forced_outcome(model: &Model, actions: &[Action]) -> Outcome {
    match forced(model, actions) {
        Ok(f) => f.outcome,
        Err(e) => panic!("forced_outcome: the trace does not replay: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phasecheck_model::lang;
    use phasecheck_model::lower::lower;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    fn model(src: &str) -> Model {
        let ast = lang::parse(src).unwrap_or_else(|d| panic!("parse: {}", d.render("t.phase", src)));
        lang::check(&ast).unwrap_or_else(|d| panic!("check: {}", d.render("t.phase", src)));
        Model::new(lower(&ast, &[]).unwrap_or_else(|d| panic!("lower: {}", d.render("t.phase", src))))
    }

    fn th(finished: bool, reads: &[i64], try_waits: &[bool], token_parities: &[u8]) -> ThreadOutcome {
        ThreadOutcome {
            finished,
            reads: reads.to_vec(),
            try_waits: try_waits.to_vec(),
            token_parities: token_parities.to_vec(),
        }
    }

    fn oc(threads: Vec<ThreadOutcome>, completions: &[u32]) -> Outcome {
        Outcome {
            threads,
            completions: completions.to_vec(),
            fault: false,
        }
    }

    /// The set's outcomes without their end probes (most tests are about the observations).
    fn plain(set: &AllowedSet) -> Vec<Outcome> {
        set.iter().map(strip).collect()
    }

    fn strip(o: &Outcome) -> Outcome {
        o.clone()
    }

    const LIMIT: usize = 2_000_000;

    /// The LANGUAGE.md example, as the library holds it.
    const DOUBLE_BUFFER: &str = include_str!("../../specs/guide/double_buffer.phase");

    const POLL: &str = r#"
protocol poll
barrier b count 1
role producer[1] { arrive(b) }
role consumer[1] {
  let ok = try_wait_parity(b, 0)
  if ok == 0 { wait_parity(b, 0) }
}
"#;

    const DEADLOCK: &str = r#"
protocol stuck
barrier b count 2
role waiter[1] {
  arrive(b)
  wait_parity(b, 0)
}
"#;

    /// The waiter hangs; its timeout releases the syncthreads, and the late arrival comes too late.
    const CASCADE: &str = r#"
protocol cascade
barrier b count 1
role waiter[1] { wait_parity(b, 0) }
role late[1] {
  syncthreads
  arrive(b)
}
"#;

    const WRONG_PARITY: &str = r#"
protocol wrong_parity
barrier full count 1
buffer slot bytes 256
role producer[1] {
  arrive_expect_tx(full, 256)
  copy_async(slot, full, version = 7)
  wait_parity(full, 0)
}
role consumer[1] {
  wait_parity(full, 1)
  read(slot, expect = 7)
}
"#;

    const COMPLETION: &str = r#"
protocol counting
var n = 0
barrier b count 2 completion tick
barrier plain count 2
completion tick { n = n + 1 }
role w[2] {
  for i in 0..3 { arrive_and_wait(b) }
  arrive_and_wait(plain)
}
"#;

    const OVER_ARRIVAL: &str = r#"
protocol over
barrier b count 1
role w[1] {
  let t = arrive(b)
  wait(b, t)
  arrive(b, 2)
}
"#;

    const EXIT_IN_FLIGHT: &str = r#"
protocol exit_in_flight
barrier full count 1
buffer slot bytes 64
role producer[1] {
  arrive_expect_tx(full, 64)
  copy_async(slot, full, version = 3)
}
"#;

    #[test]
    fn double_buffer_has_exactly_one_outcome() {
        let m = model(DOUBLE_BUFFER);
        let set = allowed_outcomes(&m, LIMIT);
        assert!(set.is_complete());
        let consumer = th(true, &[0, 1, 2, 3], &[], &[0, 0, 1, 1]);
        let want = oc(vec![th(true, &[], &[], &[0, 0, 1, 1]), consumer.clone(), consumer], &[0, 0, 0, 0]);
        assert_eq!(plain(&set), vec![want.clone()], "{set}");
        assert!(!set.fault_allowed());
        assert!(set.contains(&want));
        let mut stale = want.clone();
        stale.threads[1].reads[2] = 0;
        assert!(!set.contains(&stale));
        let mut hung = want.clone();
        hung.threads[2].finished = false;
        assert!(!set.contains(&hung));
        let mut faulted = want;
        faulted.fault = true;
        assert!(!set.contains(&faulted));
        assert_eq!(set.summary(), "1 outcome");
    }

    #[test]
    fn the_end_probes_are_predicted_and_judged() {
        let m = model(DOUBLE_BUFFER);
        let set = allowed_outcomes(&m, LIMIT);
        let o = set.iter().next().unwrap().clone();
        // Every barrier of the double buffer completes two phases: phase 2 is in progress.
        let ends = set.ends_of(&o);
        assert_eq!(ends.len(), 1);
        let end = ends[0].clone();
        assert_eq!(end.parity, vec![PROBE_PARITY_0; 4]);
        let line = format!("{o}{}", end.suffix());
        assert!(line.ends_with("phases=[0,0,0,0]"), "{line}");
        assert_eq!(Outcome::parse_observed(&line, 4).unwrap(), (o.clone(), end.clone()));
        assert_eq!(set.judge_end(&o, &end), Judged::Constrained);
        let mut wrong = end.clone();
        wrong.parity[2] = PROBE_PARITY_1;
        assert_eq!(set.judge_end(&o, &wrong), Judged::Rejected);
        wrong.parity[2] = PROBE_BOTH;
        assert_eq!(set.judge_end(&o, &wrong), Judged::Rejected);
        // Not probed by the backend: a wildcard; not recorded at all: ignored.
        wrong.parity[2] = PROBE_NONE;
        assert_eq!(set.judge_end(&o, &wrong), Judged::Constrained);
        assert_eq!(set.judge_end(&o, &End::default()), Judged::Constrained);
        // A trace that runs to the end forces the same end.
        let f = forced(&m, &one_run(&m)).unwrap();
        assert_eq!(f.end, Some(end));
    }

    fn one_run(m: &Model) -> Vec<Action> {
        let mut s = m.init().next.unwrap();
        let mut acts = Vec::new();
        let mut en = Vec::new();
        while !s.all_done() {
            en.clear();
            m.actions(&s, &mut en);
            acts.push(en[0]);
            s = m.step(&s, en[0]).next.unwrap();
        }
        acts
    }

    #[test]
    fn try_wait_may_see_either_result() {
        let set = allowed_outcomes(&model(POLL), LIMIT);
        let got: Vec<Outcome> = plain(&set);
        let want: Vec<Outcome> = [false, true]
            .into_iter()
            .map(|r| oc(vec![th(true, &[], &[], &[0]), th(true, &[], &[r], &[])], &[0]))
            .collect();
        assert_eq!(got, want, "{set}");
        assert_eq!(set.summary(), "2 outcomes");
    }

    #[test]
    fn a_deadlocked_thread_hangs() {
        let m = model(DEADLOCK);
        let set = allowed_outcomes(&m, LIMIT);
        let want = oc(vec![th(false, &[], &[], &[0])], &[0]);
        assert_eq!(plain(&set), vec![want.clone()], "{set}");
        let f = forced(&m, &[Action::Thread(0)]).unwrap();
        assert_eq!(strip(&f.outcome), want);
        assert_eq!(f.ends, vec![ThreadEnd::Hung]);
        assert_eq!(f.timeouts, vec![0]);
    }

    #[test]
    fn a_timeout_releases_syncthreads_but_rescues_no_waiter() {
        let m = model(CASCADE);
        let set = allowed_outcomes(&m, LIMIT);
        let want = oc(vec![th(false, &[], &[], &[]), th(true, &[], &[], &[0])], &[0]);
        assert_eq!(plain(&set), vec![want.clone()], "{set}");
        // Once the late thread is at syncthreads, the CTA is quiet.
        let f = forced(&m, &[Action::Thread(1)]).unwrap();
        assert_eq!(strip(&f.outcome), want);
        assert_eq!(f.ends, vec![ThreadEnd::Hung, ThreadEnd::Finished]);
    }

    #[test]
    fn wrong_parity_consumer_may_read_stale_torn_or_new_or_hang() {
        let m = model(WRONG_PARITY);
        let set = allowed_outcomes(&m, LIMIT);
        assert!(set.is_complete());
        // Either the wait returns at once (parity 1 names the phase before phase 0) and the read
        // races with the copy, or phase 0 has already completed and parity 1 now names phase 1,
        // which never completes: the consumer hangs (GPU.md saw both).
        let producer = th(true, &[], &[], &[0]);
        let want: Vec<Outcome> = [
            th(false, &[], &[], &[]),
            th(true, &[-1], &[], &[]),
            th(true, &[0], &[], &[]),
            th(true, &[7], &[], &[]),
        ]
        .into_iter()
        .map(|c| oc(vec![producer.clone(), c], &[0]))
        .collect();
        assert_eq!(plain(&set), want, "{set}");
        assert!(!set.fault_allowed());
        let bad = oc(vec![th(true, &[], &[], &[0]), th(true, &[3], &[], &[])], &[0]);
        assert!(!set.contains(&bad));
    }

    #[test]
    fn what_completion_functions_compute_is_part_of_the_outcome() {
        let m = model(COMPLETION);
        assert_eq!(completion_vars(&m.proto), vec![0]);
        let set = allowed_outcomes(&m, LIMIT);
        let o = set.iter().next().unwrap();
        let end = set.ends_of(o)[0].clone();
        assert_eq!(end.vars, vec![3]);
        assert!(end.suffix().contains("vars=[3]"));
        let lost = End {
            vars: vec![2],
            ..end.clone()
        };
        assert_eq!(set.judge_end(o, &lost), Judged::Rejected);
        assert_eq!(set.judge_end(o, &end), Judged::Constrained);
    }

    #[test]
    fn completion_runs_are_counted_per_barrier() {
        let set = allowed_outcomes(&model(COMPLETION), LIMIT);
        let want = oc(vec![th(true, &[], &[], &[]), th(true, &[], &[], &[])], &[3, 0]);
        assert_eq!(plain(&set), vec![want], "{set}");
    }

    #[test]
    fn undefined_behaviour_admits_anything_after_the_prefix() {
        let m = model(OVER_ARRIVAL);
        let set = allowed_outcomes(&m, LIMIT);
        assert_eq!(set.len(), 0, "{set}");
        let u: Vec<&Undefined> = set.undefined().collect();
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].cause, ViolationKind::OverArrival);
        assert_eq!(u[0].prefix.threads[0].token_parities, vec![0]);
        assert!(set.fault_allowed());
        // Anything after the first token, finished or not, faulted or not.
        assert!(set.contains(&oc(vec![th(true, &[], &[], &[0, 1])], &[0])));
        assert!(set.contains(&oc(vec![th(false, &[], &[], &[0])], &[0])));
        assert!(set.contains(&Outcome {
            fault: true,
            ..Outcome::default()
        }));
        // ... but not a first token of the wrong parity.
        assert!(!set.contains(&oc(vec![th(true, &[], &[], &[1])], &[0])));
        assert!(set.summary().contains("over-arrival"), "{}", set.summary());
        let f = forced(&m, &[Action::Thread(0), Action::Thread(0), Action::Thread(0)]).unwrap();
        assert_eq!(f.undefined, Some(ViolationKind::OverArrival));
        assert!(set.contains(&f.outcome));
    }

    #[test]
    fn exiting_with_a_copy_in_flight_allows_a_fault() {
        let set = allowed_outcomes(&model(EXIT_IN_FLIGHT), LIMIT);
        assert!(set.undefined().any(|u| u.cause == ViolationKind::Lifetime), "{set}");
        let faulted = Outcome {
            threads: vec![th(false, &[], &[], &[0])],
            completions: vec![0],
            fault: true,
        };
        assert!(set.contains(&faulted));
    }

    #[test]
    fn a_trace_that_stops_early_marks_runnable_threads_finished() {
        let m = model(POLL);
        let f = forced(&m, &[Action::Thread(1)]).unwrap();
        assert_eq!(f.ends, vec![ThreadEnd::Running, ThreadEnd::Blocked]);
        assert_eq!(f.outcome.threads[1].try_waits, vec![false]);
        assert!(f.outcome.threads[0].finished && !f.outcome.threads[1].finished);
        assert!(forced(&m, &[Action::Land(0)]).is_err());
    }

    #[test]
    fn the_limit_makes_the_set_incomplete() {
        let set = allowed_outcomes(&model(DOUBLE_BUFFER), 10);
        assert!(!set.is_complete());
        assert!(set.summary().contains("incomplete"));
    }

    #[test]
    fn outcomes_round_trip_through_json() {
        let set = allowed_outcomes(&model(WRONG_PARITY), LIMIT);
        let json = serde_json::to_string(&set).unwrap();
        let back: AllowedSet = serde_json::from_str(&json).unwrap();
        assert_eq!(back, set);
    }

    const SPECS: [&str; 9] = [
        DOUBLE_BUFFER,
        POLL,
        DEADLOCK,
        CASCADE,
        WRONG_PARITY,
        COMPLETION,
        OVER_ARRIVAL,
        EXIT_IN_FLIGHT,
        r#"
protocol mixed
barrier b count 2
barrier c count 1
buffer x bytes 16
role a[1] {
  write(x, 1)
  let t = arrive(b)
  let ok = try_wait(b, t)
  syncthreads
  read(x)
}
role z[1] {
  read(x)
  syncthreads
  let u = arrive(c)
  arrive(b)
  wait(c, u)
}
"#,
    ];

    fn models() -> &'static Vec<(Model, AllowedSet)> {
        static M: OnceLock<Vec<(Model, AllowedSet)>> = OnceLock::new();
        M.get_or_init(|| {
            SPECS
                .iter()
                .map(|src| {
                    let m = model(src);
                    let set = allowed_outcomes(&m, LIMIT);
                    assert!(set.is_complete());
                    (m, set)
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn every_random_execution_outcome_is_allowed(spec in 0..SPECS.len(), choices in prop::collection::vec(any::<u32>(), 64)) {
            let (m, set) = &models()[spec];
            let mut trace = Vec::new();
            if let Some(mut s) = m.init().next {
                let mut enabled = Vec::new();
                for k in 0.. {
                    if s.all_done() {
                        break;
                    }
                    enabled.clear();
                    m.actions(&s, &mut enabled);
                    if enabled.is_empty() {
                        break;
                    }
                    let a = enabled[choices[k % choices.len()] as usize % enabled.len()];
                    trace.push(a);
                    match m.step(&s, a).next {
                        Some(n) => s = n,
                        None => break,
                    }
                }
            }
            let o = forced_outcome(m, &trace);
            prop_assert!(set.contains(&o), "{o}\nnot in\n{set}\ntrace {trace:?}");
        }
    }
}
