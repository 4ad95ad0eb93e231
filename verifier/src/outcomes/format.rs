//! The outcome format: what one GPU run records ([`Outcome`], [`End`]), its one-line text form
//! (the keys of a report's `observed`), which statements are recorded ([`recorded`]), and the set
//! of outcomes the model allows with the judging of an observation against it ([`AllowedSet`]).

use phasecheck_model::program::ir::{Code, IOp, Instr, InstrKind, MbarOp, MemOp};
use phasecheck_model::rt::Model;
use phasecheck_model::ViolationKind;
use std::collections::BTreeSet;
use std::fmt;

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
pub fn completion_vars(p: &phasecheck_model::program::ir::Protocol) -> Vec<u16> {
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
    /// Not admitted by the part of the allowed set enumerated before a budget stopped it (the set
    /// is incomplete): the model may allow it in the part not explored, so it is evidence of
    /// nothing, never OUTSIDE.
    Undecided,
}

/// Which observation a thread statement contributes to its [`ThreadOutcome`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// `read(B)` / `read(B, expect = V)`, `read_counter(C)`: one entry of `reads`.
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
        InstrKind::Op {
            op: IOp::Mem(MemOp::Read { .. } | MemOp::ReadCounter { .. }),
            ..
        } => Some(Recorded::Read),
        // A DSMEM read of a peer CTA's buffer (cluster scope) is a read like any other, and so is
        // a plain read of a counter (its value is recorded where a buffer's version is).
        InstrKind::Op {
            op: IOp::Remote { multicast: false, op, .. },
            ..
        } if matches!(**op, IOp::Mem(MemOp::Read { .. } | MemOp::ReadCounter { .. })) => Some(Recorded::Read),
        // A try_wait polled in a `while` loop answers as often as the hardware spins: its
        // answers are not an outcome (the model bounds the loop by revisiting states, not by count).
        InstrKind::Op {
            op: IOp::Mbar(MbarOp::Wait { try_: true, .. }),
            ..
        } if !code.has_while => Some(Recorded::TryWait),
        InstrKind::Op {
            op: IOp::Mbar(MbarOp::Arrive { drop: false, .. }),
            result,
        } => {
            let hidden = result.is_some_and(|r| code.local_names.get(r as usize).is_some_and(|n| n == "$token"));
            (!hidden).then_some(Recorded::Token)
        }
        _ => None,
    }
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
    pub(super) outcomes: BTreeSet<Outcome>,
    /// Executions that reached undefined behaviour: anything extending the prefix may follow.
    pub(super) undefined: BTreeSet<Undefined>,
    /// False when the `limit` was reached before every execution was explored.
    pub(super) complete: bool,
    /// Distinct (state, partial outcome) pairs explored.
    pub(super) explored: usize,
    /// Which bound stopped the exploration when `complete` is false (`states` or `seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) stopped_by: Option<String>,
    /// Per concrete outcome, the ends ([`End`]) of the executions that give it.
    #[serde(default)]
    pub(super) ends: BTreeSet<(Outcome, End)>,
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
    /// before any observation do, [`Judged::Rejected`] otherwise ([`Judged::Undecided`] when the
    /// set is incomplete).
    pub fn judge(&self, o: &Outcome) -> Judged {
        self.undecided_if_incomplete(self.judge_explored(o))
    }

    /// A rejection by an incomplete set is [`Judged::Undecided`]: what it holds is a subset of
    /// what the model allows (the executions explored before the budget), so only admission
    /// is evidence.
    fn undecided_if_incomplete(&self, j: Judged) -> Judged {
        if j == Judged::Rejected && !self.complete {
            Judged::Undecided
        } else {
            j
        }
    }

    fn judge_explored(&self, o: &Outcome) -> Judged {
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
        self.undecided_if_incomplete(if vacuous { Judged::Vacuous } else { Judged::Rejected })
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
