//! The widened machine: the model with a way for a blocked thread's bounded wait to time out,
//! and the bookkeeping (racy buffers, versions written, hung and armed threads) that turns a
//! model execution into what a GPU run may record. [`Machine::apply`] is one step of it; the
//! enumeration (`allowed`) folds over its branching steps, and as a [`TransitionSystem`] it takes
//! one execution's steps for the replays of `forced` and `allowed_after`.

use super::format::{completion_vars, recorded, End, Outcome, Recorded, Undefined, PROBE_NONE};
use phasecheck_model::lang::ast::Span;
use phasecheck_model::program::ir::{Instr, InstrKind};
use phasecheck_model::rt::path::{NotReplayed, Refusal};
use phasecheck_model::rt::state::{Life, State, Status};
use phasecheck_model::rt::{Action, Model, Obs, Outcome as StepOutcome, Violation};
use phasecheck_model::ts::TransitionSystem;
use phasecheck_model::ViolationKind;

/// A step's arrivals reach one barrier on two different phases (a uniform agent's lanes arriving
/// past the pending count: the model merges the lanes' arrivals per phase).
pub(super) fn arrivals_span_phases(obs: &[Obs]) -> bool {
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

/// No async copy is in flight and (of the async proxy: a TMA store or wgmma) no asynchronous read of shared memory
/// is either: a CTA whose threads have all exited with one outstanding is the model's `lifetime`.
pub(super) fn nothing_in_flight(s: &State) -> bool {
    s.copies.is_empty() && s.proxy.reads.is_empty()
}

/// A move of the widened machine: a model action, or a blocked thread's bounded wait timing out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Move {
    Model(Action),
    Timeout(u16),
}

/// What the execution carries besides the model state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Partial {
    /// Observations so far (`finished` is filled in at the end).
    pub(super) obs: Outcome,
    /// Threads that timed out.
    pub(super) hung: Vec<bool>,
    /// Threads whose wait was blocked when the CTA went quiet: they may time out.
    pub(super) armed: Vec<bool>,
    /// Buffers touched by a racing step.
    pub(super) racy: Vec<bool>,
    /// Per buffer: versions written into it so far (sorted, with the initial 0).
    pub(super) versions: Vec<Vec<i64>>,
}

pub(super) enum Situation {
    /// Every thread exited and nothing is in flight.
    Done,
    /// Every thread exited, or every thread of one CTA of a cluster, with an async copy still in
    /// flight into its shared memory: undefined behaviour (lifetime).
    ExitInFlight,
    /// Nothing can move and a lane waits at a warp collective for a lane of its mask that never
    /// executes a matching one: undefined behaviour (`Model::warp_collective_ub`).
    WarpCollective,
    /// Nothing can move: the unfinished threads wait at execution barriers forever.
    Stuck,
    Moves(Vec<Move>),
}

#[allow(clippy::large_enum_variant)]
pub(super) enum Next {
    Continue(State, Partial),
    Undefined(Undefined),
    /// The step ran past the model's step budget (`Outcome::cut`): no successor is known, and
    /// the enumeration is incomplete, never an end of the execution.
    Cut,
}

/// What a caller replaying one path says when a step is cut by the step budget.
/// What a caller replaying one path says when step `n` (1-based; 0: initialisation) is cut by the
/// step budget.
pub(super) fn cut_error(n: usize) -> String {
    let what = if n == 0 {
        "initialisation".to_string()
    } else {
        format!("step {n}")
    };
    format!("{what} ran past the step budget (16,777,216 local instructions in one step)")
}

/// The model with a way to make a thread time out. Each role's code gets three instructions
/// appended past its end: `return` (where a thread that runs off the end lands, so nothing changes
/// for it), then `work; return`. A timed-out thread is moved onto that `work` and stepped: it exits
/// without touching any barrier, and the model's own settling releases the execution barriers its
/// exit completes, exactly as for a thread that returns.
pub(super) struct Machine {
    pub(super) model: Model,
    timeout_pc: Vec<u32>,
    has_completion: Vec<bool>,
    /// [`completion_vars`]: their final values are part of the outcome.
    end_vars: Vec<u16>,
}

impl Machine {
    pub(super) fn new(model: &Model) -> Machine {
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
    /// The initial state, or why there is none: undefined behaviour, or (None) initialisation
    /// ran past the step budget.
    pub(super) fn start(&self) -> Result<(State, Partial), Option<Undefined>> {
        let init = self.model.init();
        if init.cut {
            return Err(None);
        }
        let Some(s) = init.next else {
            return Err(Some(Undefined {
                prefix: Outcome::empty(&self.model),
                cause: cause_of(&init.violations),
            }));
        };
        Ok((s, self.blank()))
    }

    /// The bookkeeping of an execution that has not stepped yet.
    fn blank(&self) -> Partial {
        let p = &self.model.proto;
        let n = p.threads.len();
        Partial {
            obs: Outcome::empty(&self.model),
            hung: vec![false; n],
            armed: vec![false; n],
            racy: vec![false; p.buffers.len()],
            versions: vec![vec![0]; p.buffers.len()],
        }
    }

    /// Why a replay through the machine refused a move, in the words trace files use.
    pub(super) fn refusal(&self, r: &NotReplayed<Move>, at: Option<&(State, Partial)>) -> String {
        let state = at.map(|(s, _)| s);
        let why = match r.action {
            Move::Model(a) => crate::trace::why_not(&self.model, r.refusal, r.step, state, a),
            Move::Timeout(_) if r.refusal == Refusal::Ended => format!("the execution already ended at step {}", r.step),
            Move::Timeout(t) => format!(
                "{}'s wait cannot time out here (the CTA is not quiet)",
                self.model.proto.thread_label(t as usize)
            ),
        };
        format!("step {} cannot be taken: {why}", r.step + 1)
    }

    pub(super) fn enabled(&self, s: &State) -> Vec<Action> {
        let mut v = Vec::new();
        self.model.actions(s, &mut v);
        v
    }

    /// What can happen next; arms the blocked threads when the CTA is quiet.
    pub(super) fn situation(&self, s: &State, p: &mut Partial) -> Situation {
        if s.all_done() {
            return if nothing_in_flight(s) {
                Situation::Done
            } else {
                Situation::ExitInFlight
            };
        }
        // The same for one CTA of a cluster that has exited (or timed out) under a copy still in
        // flight into its shared memory: undefined from that exit on, as `check` reports it, not
        // only once a peer's later remote step meets the exited CTA (fuzz/findings/run-cpu-cluster-*).
        if self.model.cluster_exit_in_flight(s) {
            return Situation::ExitInFlight;
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
    pub(super) fn finish(&self, s: &State, p: &Partial) -> Outcome {
        let mut o = p.obs.clone();
        for (t, th) in o.threads.iter_mut().enumerate() {
            th.finished = s.threads[t].status == Status::Done && !p.hung[t];
        }
        o.fault = false;
        o
    }

    /// What the end probes and var reads see in state `s` (every thread exited or stuck).
    pub(super) fn end_of(&self, s: &State) -> End {
        End {
            parity: end_parity(s),
            vars: self.end_vars.iter().map(|&v| s.vars[v as usize].value).collect(),
        }
    }

    pub(super) fn undefined(&self, p: &Partial, cause: ViolationKind) -> Undefined {
        let mut prefix = p.obs.clone();
        for th in &mut prefix.threads {
            th.finished = false;
        }
        prefix.fault = true;
        Undefined { prefix, cause }
    }

    /// Take one move. With `widen`, a read of a racy buffer branches over every value the
    /// hardware may return; without, it records the model's value.
    pub(super) fn apply(&self, s: &State, p: &Partial, mv: Move, widen: bool) -> Vec<Next> {
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
        // Lanes of one warp standing at the same arrive are issued it together in the same way
        // (the scheduler runs lanes at one pc as one instruction, converged or re-converged):
        // where a co-issued lane's arrival lands on another phase, the batched update overflows.
        let batched_over = own.is_some_and(|(t, _, _)| {
            (proto.lanes_at(t, s.threads[t].pc) > 1 && arrivals_span_phases(&obs)) || self.co_issued_past_pending(s, &next, t, &obs)
        });
        let over = batched_over.then(|| Next::Undefined(self.undefined(p, ViolationKind::OverArrival)));
        if self.edits_descriptor_in_use(s, &out.violations, &obs) {
            return vec![Next::Undefined(self.undefined(p, ViolationKind::DataRace))];
        }
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

impl Machine {
    /// The step edits a TMA descriptor (`tensormap`) while a tensor copy issued through it is in
    /// flight (the model's data race of that edit). The TMA unit may read the descriptor at any
    /// time until the copy lands, and may see it half edited, so what the copy fetches, and what
    /// its destination then holds, is unconstrained: on the H200 (2026-12-03,
    /// specs/hopper/tensormap_edit_under_copy) 38 of 8,192 blocks read the tile that the edited
    /// descriptor points at, a version the model's issue-time read never lands. From here the
    /// outcome is anything, as after any undefined behaviour.
    fn edits_descriptor_in_use(&self, s: &State, violations: &[Violation], obs: &[Obs]) -> bool {
        use phasecheck_model::rt::copies::CopyKind;
        let p = &self.model.proto;
        violations.iter().any(|v| v.kind == ViolationKind::DataRace)
            && obs.iter().any(|o| match o {
                Obs::Wrote { buf, .. } => {
                    let b = *buf as usize;
                    p.buffers[b].tensormap && s.copies.iter().any(|c| c.kind == CopyKind::SrcRead && c.buf as usize == b)
                }
                _ => false,
            })
    }

    /// `t`'s arrive (its step from `s` to `next`, observing `obs`) and the arrivals of the other
    /// lanes of its warp and role standing at the same instruction in `s`, applied after it one by
    /// one: whether one of those lands on another phase of `t`'s barrier. On the H200 they are one
    /// warp instruction and one batched update, which runs past the phase's pending count and
    /// faults (the converged lanes of a `warps 1` role on a count-1 barrier; a dropped worker's
    /// peers arriving together on a phase the drop shortened: docs/hardware-notes.md).
    fn co_issued_past_pending(&self, s: &State, next: &State, t: usize, obs: &[Obs]) -> bool {
        let Some((bar, phase)) = obs.iter().find_map(|o| match o {
            Obs::Arrived { bar, phase, .. } => Some((*bar, *phase)),
            _ => None,
        }) else {
            return false;
        };
        let p = &self.model.proto;
        let me = &p.threads[t];
        let mut cur = next.clone();
        for m in 0..s.threads.len() {
            let o = &s.threads[m];
            if m == t
                || p.threads[m].warp != me.warp
                || p.threads[m].role != me.role
                || p.threads[m].cta != me.cta
                || o.status != Status::Running
                || o.pc != s.threads[t].pc
                || cur.threads[m].status != Status::Running
                || cur.threads[m].pc != o.pc
            {
                // Not at the instruction, or already part of `t`'s step (a commit's joined lanes).
                continue;
            }
            let out = self.model.step(&cur, Action::Thread(m as u16));
            let elsewhere = out.event.as_ref().is_some_and(|e| {
                e.obs
                    .iter()
                    .any(|o| matches!(o, Obs::Arrived { bar: b, phase: q, .. } if *b == bar && *q != phase))
            });
            if elsewhere {
                return true;
            }
            match out.next {
                Some(n) => cur = n,
                None => return false,
            }
        }
        false
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
pub(super) fn cause_of(v: &[Violation]) -> ViolationKind {
    v.iter()
        .find(|v| v.kind.ends_execution())
        .or(v.first())
        .map(|v| v.kind)
        .unwrap_or(ViolationKind::Assertion)
}

/// The machine as a transition system of one execution, for replays: its actions are the model's
/// enabled actions and, while the CTA is quiet, the timeouts of the threads blocked at a wait (in
/// the order of [`Machine::situation`]); a step reads the model's value (no widening). A step
/// that reaches undefined behaviour ends the execution with that violation, one cut by the step
/// budget ends it with `cut`. A replay arms no thread for later steps (the enumeration, which
/// does, steps through [`Machine::apply`]), so what a trace replays to is the state the trace
/// alone reaches.
impl TransitionSystem for Machine {
    type State = (State, Partial);
    type Action = Move;

    fn init(&self) -> StepOutcome<(State, Partial)> {
        let init = self.model.init();
        let next = if init.cut { None } else { init.next.map(|s| (s, self.blank())) };
        StepOutcome {
            next,
            violations: init.violations,
            event: init.event,
            internal: init.internal,
            cut: init.cut,
        }
    }

    fn actions(&self, (s, p): &(State, Partial), out: &mut Vec<Move>) {
        match self.situation(s, &mut p.clone()) {
            Situation::Moves(moves) => out.extend(moves),
            _ => out.extend(self.enabled(s).into_iter().map(Move::Model)),
        }
    }

    fn step(&self, (s, p): &(State, Partial), mv: Move) -> StepOutcome<(State, Partial)> {
        let ended = |violations, cut| StepOutcome {
            next: None,
            violations,
            event: None,
            internal: None,
            cut,
        };
        match self.apply(s, p, mv, false).pop().expect("one successor") {
            Next::Continue(s2, p2) => StepOutcome {
                next: Some((s2, p2)),
                violations: Vec::new(),
                event: None,
                internal: None,
                cut: false,
            },
            Next::Undefined(u) => ended(
                vec![Violation {
                    kind: u.cause,
                    message: format!("undefined behaviour ({})", u.cause),
                }],
                false,
            ),
            Next::Cut => ended(Vec::new(), true),
        }
    }

    fn state_violations(&self, (s, _): &(State, Partial), enabled: &[Move]) -> Vec<Violation> {
        let model: Vec<Action> = enabled
            .iter()
            .filter_map(|m| if let Move::Model(a) = m { Some(*a) } else { None })
            .collect();
        self.model.state_violations(s, &model)
    }

    fn is_final(&self, (s, _): &(State, Partial)) -> bool {
        self.model.is_final(s)
    }
}
