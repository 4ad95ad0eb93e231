//! The mbarrier: init and inval, arrivals and drops, the tx-count, phase completion and the
//! completion function, and waits (blocking and `try_wait`) with parity aliasing.

use super::memory::Clock;
use super::*;
use crate::rt::footprint::Touch;

/// The operations on an mbarrier (an element of a barrier array when `bar` is indexed).
#[derive(Clone, Debug)]
pub enum MbarOp {
    /// arrive / arrive_expect_tx / arrive_and_drop; yields the token.
    Arrive {
        bar: Ref,
        n: IExpr,
        drop: bool,
        expect_tx: Option<IExpr>,
    },
    /// wait / wait_parity (blocking) and try_wait / try_wait_parity (`try_ == true`, yields 0/1).
    Wait {
        bar: Ref,
        target: WaitTarget,
        try_: bool,
    },
    ExpectTx {
        bar: Ref,
        bytes: IExpr,
    },
    CompleteTx {
        bar: Ref,
        bytes: IExpr,
    },
    Init {
        bar: Ref,
        count: Option<IExpr>,
    },
    Inval {
        bar: Ref,
    },
}

impl MbarOp {
    /// Whether each lane of a uniform agent makes the operation's contribution on its own (an
    /// arrival per lane); a wait is answered once for the warp.
    pub fn per_lane(&self) -> bool {
        match self {
            MbarOp::Arrive { .. } | MbarOp::ExpectTx { .. } | MbarOp::CompleteTx { .. } | MbarOp::Init { .. } | MbarOp::Inval { .. } => {
                true
            }
            MbarOp::Wait { .. } => false,
        }
    }

    /// Its footprint for the partial-order reduction: a wait reads its barrier; every other
    /// operation writes it; `init` resets every thread's phase knowledge, so it conflicts with
    /// everything.
    pub fn touch(&self) -> Touch<'_> {
        use crate::rt::footprint::{PhaseEffect as P, Scope};
        match self {
            MbarOp::Wait { bar, target, try_ } => Touch::objects(Some((bar, false)), None, if *try_ { P::None } else { P::Waits(target) }),
            MbarOp::Arrive { bar, n, .. } => Touch::objects(Some((bar, true)), None, P::Arrives(n)),
            MbarOp::ExpectTx { bar, .. } | MbarOp::CompleteTx { bar, .. } => Touch::objects(Some((bar, true)), None, P::None),
            MbarOp::Inval { bar } => Touch::objects(Some((bar, true)), None, P::Moves),
            MbarOp::Init { .. } => Touch::whole(Scope::Global, P::Moves),
        }
    }

    /// The barrier the operation acts on.
    pub fn bar(&self) -> &Ref {
        match self {
            MbarOp::Arrive { bar, .. }
            | MbarOp::Wait { bar, .. }
            | MbarOp::ExpectTx { bar, .. }
            | MbarOp::CompleteTx { bar, .. }
            | MbarOp::Init { bar, .. }
            | MbarOp::Inval { bar } => bar,
        }
    }

    /// Every expression the operation evaluates, outermost ones.
    pub fn exprs(&self, f: &mut dyn FnMut(&IExpr)) {
        self.bar().exprs(f);
        match self {
            MbarOp::Arrive { n, expect_tx, .. } => {
                f(n);
                if let Some(e) = expect_tx {
                    f(e)
                }
            }
            MbarOp::Wait { target, .. } => f(target.expr()),
            MbarOp::ExpectTx { bytes, .. } | MbarOp::CompleteTx { bytes, .. } => f(bytes),
            MbarOp::Init { count, .. } => {
                if let Some(e) = count {
                    f(e)
                }
            }
            MbarOp::Inval { .. } => {}
        }
    }

    /// The statement's name in the language.
    pub fn name(&self) -> &'static str {
        match self {
            MbarOp::Arrive { drop: true, .. } => "arrive_and_drop",
            MbarOp::Arrive { expect_tx: Some(_), .. } => "arrive_expect_tx",
            MbarOp::Arrive { .. } => "arrive",
            MbarOp::Wait { try_: true, .. } => "try_wait",
            MbarOp::Wait { .. } => "wait",
            MbarOp::ExpectTx { .. } => "expect_tx",
            MbarOp::CompleteTx { .. } => "complete_tx",
            MbarOp::Init { .. } => "init",
            MbarOp::Inval { .. } => "inval",
        }
    }
}

/// Whether the blocked wait at a thread's pc could return now (`None` if it is not at a wait).
pub enum WaitCheck {
    NotAWait,
    Ready,
    Blocked { bar: usize, named: i64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Life {
    Uninit,
    Live,
    Invalidated,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BarrierState {
    pub life: Life,
    pub phase: i64,
    pub pending: i64,
    pub expected: i64,
    /// Arrivals made in the current phase, drops included: `pending + arrived` is what the phase
    /// needed when it began, which `pending` alone cannot show once a drop lowered both.
    pub arrived: i64,
    pub tx: i64,
    /// Who initialised it and at which epoch: a use must be ordered after the init.
    pub init_by: Option<(u16, u32)>,
    /// Cluster scope: a `fence_mbarrier_init()` after the init published it at this epoch of its
    /// CTA's init agent (0: not published), so a thread whose clock of that agent reaches it
    /// sees the init although it never synchronised with the initialising thread (rt/cluster.rs).
    pub init_pub: u32,
    /// A wait that returned true has observed the preceding phase (PTX's missing-wait rule).
    pub observed_prev: bool,
    /// Join of the releases into the current phase.
    pub clock: Clock,
    /// Clock of the last completed phase: what a successful wait acquires.
    pub prev_clock: Clock,
    /// Join of the releasers' phase knowledge (`ThreadState::known`) in the current phase, and
    /// that of the last completed phase: knowledge of phases travels with happens-before.
    pub known: Box<[i64]>,
    pub prev_known: Box<[i64]>,
}

impl Exec<'_> {
    /// Execute one mbarrier operation. expect_tx raises the tx-count; complete_tx lowers it and,
    /// like a landing copy, releases into the phase. Either may complete it.
    pub(super) fn mbar_op(&mut self, op: &MbarOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        match op {
            MbarOp::Init { bar, count } => self.op_init(bar, count, locals),
            MbarOp::Inval { bar } => self.op_inval(bar, locals),
            MbarOp::Arrive { bar, n, drop, expect_tx } => self.op_arrive(bar, n, *drop, expect_tx, locals),
            MbarOp::ExpectTx { bar, bytes } => self.op_tx(false, bar, bytes, locals),
            MbarOp::CompleteTx { bar, bytes } => self.op_tx(true, bar, bytes, locals),
            MbarOp::Wait { bar, target, try_ } => self.op_wait(bar, target, *try_, locals),
        }
    }

    pub(super) fn op_arrive(
        &mut self,
        bar: &Ref,
        n: &IExpr,
        drop: bool,
        expect_tx: &Option<IExpr>,
        locals: Option<&[i64]>,
    ) -> R<Option<i64>> {
        let b = self.resolve_bar(bar, locals)?;
        let n = self.ev(n, locals)?;
        let bytes = match expect_tx {
            Some(e) => Some(self.ev(e, locals)?),
            None => None,
        };
        self.live_barrier(b, if drop { "arrive_and_drop" } else { "arrive" })?;
        let token = self.arrive(b, n, drop, bytes)?;
        Ok(Some(token))
    }

    pub(super) fn op_wait(&mut self, bar: &Ref, target: &WaitTarget, try_: bool, locals: Option<&[i64]>) -> R<Option<i64>> {
        // A completion function may run with no thread at all (a copy's landing completed
        // the phase): the misuse is reported before anything asks for the thread.
        if self.in_completion {
            self.fail(
                K::CompletionMisuse,
                format!("{} waits on a barrier; a completion function must not wait or block", self.label()),
            );
            return Err(());
        }
        let Some(t) = self.thread else {
            self.broken("R-WAIT", "a wait executed outside a thread".to_string());
            return Err(());
        };
        let b = self.resolve_bar(bar, locals)?;
        self.live_barrier(b, if try_ { "try_wait" } else { "wait" })?;
        let value = self.ev(target.expr(), locals)?;
        let named = target.named_phase(value, self.s.threads[t].known[b]);
        let c = self.s.barriers[b].phase;
        if c >= named + 2 && self.m.mutant != Some(Mutant::StaleWaitUnchecked) {
            self.fail(
                K::StaleWait,
                format!(
                    "{} waits on phase {named} of {}, which is older than the phase before the current one ({c}); the hardware answers about phase {} instead",
                    self.label(),
                    self.p().barriers[b].name,
                    if self.m.complete_for(c, named) { c - 1 } else { c }
                ),
            );
        }
        let done = self.m.complete_for(c, named);
        if done {
            let prev = self.s.barriers[b].prev_clock.clone();
            if self.m.mutant != Some(Mutant::WaitDoesNotAcquire) {
                join_into(self.clock_mut(), &prev);
            }
            let prev_known = self.s.barriers[b].prev_known.clone();
            if self.m.mutant != Some(Mutant::NoKnowledgeTransfer) {
                join_known(&mut self.s.threads[t].known, &prev_known);
            }
            // For the hardware a wait that returns true has observed the preceding phase,
            // whatever phase the program meant (PTX's missing-wait rule is about that).
            self.s.barriers[b].observed_prev = true;
            let k = &mut self.s.threads[t].known[b];
            *k = (*k).max(named + 1);
        }
        if try_ {
            self.obs.push(Obs::TryWait {
                bar: b as u16,
                phase: named,
                result: done,
            });
            Ok(Some(done as i64))
        } else {
            if !done {
                self.broken(
                    "R-WAIT",
                    format!(
                        "{} passed a blocking wait on phase {named} of {}, which is not complete (the barrier is in phase {c})",
                        self.label(),
                        self.p().barriers[b].name
                    ),
                );
                return Err(());
            }
            self.obs.push(Obs::Waited {
                bar: b as u16,
                phase: named,
            });
            Ok(None)
        }
    }

    fn op_tx(&mut self, complete: bool, bar: &Ref, bytes: &IExpr, locals: Option<&[i64]>) -> R<Option<i64>> {
        let what = if complete { "complete_tx" } else { "expect_tx" };
        let b = self.resolve_bar(bar, locals)?;
        let bytes = self.ev(bytes, locals)?;
        self.live_barrier(b, what)?;
        self.check_range(K::TxRange, bytes, 0, format!("{what} on {}", self.p().barriers[b].name))?;
        self.add_tx(b, if complete { -bytes } else { bytes })?;
        // complete_tx releases; an expect_tx that completes the phase (its bytes landed first)
        // is the phase's last event, and the phase carries its history as it does an arrival's.
        if complete || self.phase_ready(b) {
            self.release_into(b);
        }
        self.maybe_complete(b)?;
        Ok(None)
    }

    pub(super) fn op_init(&mut self, bar: &Ref, count: &Option<IExpr>, locals: Option<&[i64]>) -> R<Option<i64>> {
        let b = self.resolve_bar(bar, locals)?;
        let count = match count {
            Some(e) => self.ev(e, locals)?,
            None => self.p().barriers[b].count,
        };
        if self.s.barriers[b].life == Life::Live {
            self.fail(
                K::Uninitialized,
                format!(
                    "{} initialises {}, which is already live; invalidate it first",
                    self.label(),
                    self.p().barriers[b].name
                ),
            );
            return Err(());
        }
        self.check_range(K::CountRange, count, 1, format!("the init count of {}", self.p().barriers[b].name))?;
        let init_by = Some((self.agent as u16, self.clock()[self.agent]));
        let bs = &mut self.s.barriers[b];
        bs.life = Life::Live;
        bs.phase = 0;
        bs.pending = count;
        bs.expected = count;
        bs.arrived = 0;
        bs.tx = 0;
        bs.init_by = init_by;
        bs.init_pub = 0;
        bs.observed_prev = false;
        // Visible to the async proxy only after a fence.
        if self.m.tracks_proxy {
            self.s.proxy.unfenced_init[b] = true;
        }
        let bs = &mut self.s.barriers[b];
        bs.clock.iter_mut().for_each(|c| *c = 0);
        bs.prev_clock.iter_mut().for_each(|c| *c = 0);
        // A new life: what anyone knew of the old phases no longer names anything.
        for th in self.s.threads.iter_mut() {
            th.known[b] = 0;
        }
        for x in self.s.barriers.iter_mut() {
            x.known[b] = 0;
            x.prev_known[b] = 0;
        }
        for e in self.s.engines_known.iter_mut() {
            e[b] = 0;
        }
        let bs = &mut self.s.barriers[b];
        bs.known.iter_mut().for_each(|k| *k = 0);
        bs.prev_known.iter_mut().for_each(|k| *k = 0);
        Ok(None)
    }

    pub(super) fn op_inval(&mut self, bar: &Ref, locals: Option<&[i64]>) -> R<Option<i64>> {
        let b = self.resolve_bar(bar, locals)?;
        self.live_barrier(b, "inval")?;
        let name = self.p().barriers[b].name.clone();
        if self.s.copies.iter().any(|c| c.bar as usize == b) {
            self.fail(
                K::Lifetime,
                format!(
                    "{} invalidates {name} while an async copy will still complete_tx on it",
                    self.label()
                ),
            );
            return Err(());
        }
        let bs = &self.s.barriers[b];
        // `arrived` counts drops too: a drop lowers pending and expected alike.
        if bs.arrived != 0 || bs.tx != 0 {
            self.fail(
                K::Lifetime,
                format!(
                    "{} invalidates {name} in the middle of phase {} ({} of {} arrivals made, tx {})",
                    self.label(),
                    bs.phase,
                    bs.arrived,
                    bs.arrived + bs.pending,
                    bs.tx
                ),
            );
            return Err(());
        }
        self.s.barriers[b].life = Life::Invalidated;
        Ok(None)
    }

    /// Barrier usable by this agent: initialised, not invalidated, and the init is visible.
    pub(super) fn live_barrier(&mut self, b: usize, what: &str) -> R<()> {
        let bs = &self.s.barriers[b];
        let name = &self.p().barriers[b].name;
        let problem = match bs.life {
            Life::Uninit => Some(format!("{} uses {name} ({what}) before it is initialised", self.label())),
            Life::Invalidated => Some(format!("{} uses {name} ({what}) after it was invalidated", self.label())),
            Life::Live => match bs.init_by {
                Some((agent, epoch))
                    if agent as usize != self.agent
                        && self.clock()[agent as usize] < epoch
                        && !self.init_published(agent as usize, bs.init_pub) =>
                {
                    Some(format!(
                        "{} uses {name} ({what}) before the init by {} is visible to it (no syncthreads or other ordering in between)",
                        self.label(),
                        self.agent_label(&Access {
                            agent,
                            epoch,
                            in_completion: false,
                            atomic: false
                        })
                    ))
                }
                _ => None,
            },
        };
        match problem {
            Some(m) => {
                self.fail(K::Uninitialized, m);
                Err(())
            }
            None => Ok(()),
        }
    }

    pub(super) fn resolve_bar(&mut self, r: &Ref, locals: Option<&[i64]>) -> R<usize> {
        let groups = &self.m.proto.barrier_groups;
        self.group_index(r, groups, locals)
    }

    pub(super) fn add_tx(&mut self, b: usize, delta: i64) -> R<()> {
        if delta > 0 && self.m.mutant == Some(Mutant::ExpectTxIgnored) {
            return Ok(());
        }
        let tx = self.s.barriers[b].tx + delta;
        if tx.abs() > MAX_COUNT {
            self.fail(
                K::TxRange,
                format!(
                    "{}: the tx-count of {} would become {tx}, outside -1048575..=1048575",
                    self.label(),
                    self.p().barriers[b].name
                ),
            );
            return Err(());
        }
        self.s.barriers[b].tx = tx;
        Ok(())
    }

    /// Publish this agent's history and phase knowledge to the barrier's current phase, then
    /// start a new epoch. Knowledge travels along every happens-before edge, the copy engine's
    /// included.
    pub(super) fn release_into(&mut self, b: usize) {
        let c = self.clock().to_vec();
        join_into(&mut self.s.barriers[b].clock, &c);
        let k = self.known_of_agent().to_vec();
        join_known(&mut self.s.barriers[b].known, &k);
        let me = self.agent;
        self.clock_mut()[me] += 1;
    }

    pub(super) fn arrive(&mut self, b: usize, n: i64, drop: bool, expect_tx: Option<i64>) -> R<i64> {
        let name = self.p().barriers[b].name.clone();
        if self.in_completion && self.completing == Some(b) {
            self.fail(K::CompletionMisuse, format!("{} arrives on its own barrier {name}", self.label()));
            return Err(());
        }
        self.check_range(K::CountRange, n, 1, format!("the arrival count on {name}"))?;
        // The order in which undefined behaviour is judged follows the instruction (and the
        // reference runtime): the expect_tx's bytes, the drop, then the arrival itself. Nothing is
        // applied before all are judged, so over-arrival reports the tx the instruction found.
        if let Some(bytes) = expect_tx {
            self.check_range(K::TxRange, bytes, 0, format!("expect_tx on {name}"))?;
            let tx = self.s.barriers[b].tx + bytes;
            if tx.abs() > MAX_COUNT {
                self.fail(
                    K::TxRange,
                    format!(
                        "{}: the tx-count of {name} would become {tx}, outside -1048575..=1048575",
                        self.label()
                    ),
                );
                return Err(());
            }
        }
        let dropped_to = self.s.barriers[b].expected - n;
        if drop && dropped_to < 1 {
            self.fail(
                K::CountRange,
                format!(
                    "{} drops from {name}, taking its expected count to {dropped_to}; the count must stay within 1..=1048575",
                    self.label()
                ),
            );
            return Err(());
        }
        // Over-arrival is judged on the barrier as the instruction found it: the tx it reports
        // does not include this instruction's own expect_tx.
        let bs = &self.s.barriers[b];
        if n > bs.pending {
            let msg = format!(
                "{} makes {n} arrival(s) on phase {} of {name}, which has only {} pending (expected {}{})",
                self.label(),
                bs.phase,
                bs.pending,
                bs.expected,
                if bs.tx != 0 {
                    format!(", tx {} outstanding", bs.tx)
                } else {
                    String::new()
                }
            );
            self.fail(K::OverArrival, msg);
            return Err(());
        }
        if let Some(bytes) = expect_tx {
            self.add_tx(b, bytes)?;
        }
        if drop && self.m.mutant != Some(Mutant::DropIgnored) {
            self.s.barriers[b].expected = dropped_to;
        }
        let bs = &self.s.barriers[b];
        let hardware = self.p().barriers[b].completion.is_none();
        if hardware && bs.phase >= 1 && !bs.observed_prev && self.m.mutant != Some(Mutant::MissingWaitUnchecked) {
            let msg = format!(
                "{} arrives on phase {} of {name} before any wait has observed the completion of phase {}",
                self.label(),
                bs.phase,
                bs.phase - 1
            );
            self.fail(K::MissingWait, msg);
        }
        let phase = self.s.barriers[b].phase;
        self.s.barriers[b].pending -= n;
        if self.m.mutant != Some(Mutant::ArrivalsUncounted) {
            self.s.barriers[b].arrived += n;
        }
        if let Some(t) = self.thread {
            if !self.in_completion {
                let k = &mut self.s.threads[t].known[b];
                *k = (*k).max(phase);
            }
        }
        self.obs.push(Obs::Arrived {
            bar: b as u16,
            phase,
            count: n,
        });
        self.maybe_complete_after_arrival(b)?;
        Ok(phase)
    }

    pub(super) fn maybe_complete_after_arrival(&mut self, b: usize) -> R<()> {
        // An arrival that completes a phase with a completion function is released by
        // `complete`, after the function ran (one release, one epoch, whichever arrival is last).
        if !(self.phase_ready(b) && self.p().barriers[b].completion.is_some()) {
            self.release_into(b);
        }
        self.maybe_complete(b)
    }

    /// Nothing more is owed to the current phase: no pending arrival, no outstanding byte.
    fn phase_ready(&self, b: usize) -> bool {
        let bs = &self.s.barriers[b];
        bs.pending == 0 && bs.tx == 0
    }

    pub(super) fn maybe_complete(&mut self, b: usize) -> R<()> {
        if self.phase_ready(b) {
            self.complete(b)
        } else {
            Ok(())
        }
    }

    /// Phase completion: the completion function runs first, in the completing agent, having
    /// seen every arrival of the phase; then the phase advances and waiters may acquire it.
    pub(super) fn complete(&mut self, b: usize) -> R<()> {
        if let Some(ci) = self.p().barriers[b].completion {
            let phase_clock = self.s.barriers[b].clock.clone();
            join_into(self.clock_mut(), &phase_clock);
            if self.m.mutant != Some(Mutant::CompletionNeverRuns) {
                self.run_completion(ci as usize, b)?;
            }
            // What the completion function did is released into the phase with it.
            self.release_into(b);
        }
        // Without one, the completing step (an arrival, a landing, a complete_tx) has just
        // released into this phase, and nothing since: a second release would only tick its
        // agent's epoch, and by one more when its step happens to be the last of the phase, so
        // the same history would be stored under as many numberings as there are orders of the
        // phase's last two events (a copy issued before its arrive_expect_tx: 20x the states).
        let bs = &mut self.s.barriers[b];
        let (done, pending, tx) = (bs.phase, bs.pending, bs.tx);
        bs.prev_clock = std::mem::replace(&mut bs.clock, vec![0; bs.prev_clock.len()].into_boxed_slice());
        bs.prev_known = std::mem::replace(&mut bs.known, vec![0; bs.prev_known.len()].into_boxed_slice());
        bs.phase += 1;
        bs.pending = bs.expected;
        bs.arrived = 0;
        bs.observed_prev = false;
        self.obs.push(Obs::PhaseCompleted {
            bar: b as u16,
            phase: done,
            pending,
            tx,
        });
        Ok(())
    }

    pub(super) fn run_completion(&mut self, ci: usize, b: usize) -> R<()> {
        let code = &self.m.proto.completions[ci];
        let mut locals = vec![0i64; code.local_names.len()];
        let (was_in, was_completing, was_thread) = (self.in_completion, self.completing, self.thread);
        self.in_completion = true;
        self.completing = Some(b);
        let mut pc = 0usize;
        let mut fuel = 1_000_000u32;
        let was_stmt = self.stmt;
        let result = loop {
            let Some(instr) = code.instrs.get(pc) else {
                break Ok(());
            };
            self.stmt = instr.span;
            fuel -= 1;
            if fuel == 0 {
                self.fail(
                    K::CompletionMisuse,
                    format!("{} does not finish; a completion function must not block", self.label()),
                );
                break Err(());
            }
            match &instr.kind {
                InstrKind::SetLocal { slot, expr } => match self.eval_with(expr, &locals) {
                    Ok(v) => {
                        locals[*slot as usize] = v;
                        pc += 1;
                    }
                    Err(()) => break Err(()),
                },
                InstrKind::SetVar { var, expr } => {
                    let Ok(v) = self.eval_with(expr, &locals) else {
                        break Err(());
                    };
                    if self.write_var(*var as usize, v).is_err() {
                        break Err(());
                    }
                    pc += 1;
                }
                InstrKind::Jump { to } => pc = *to as usize,
                InstrKind::Branch { cond, else_to } => match self.eval_with(cond, &locals) {
                    Ok(c) => pc = if c != 0 { pc + 1 } else { *else_to as usize },
                    Err(()) => break Err(()),
                },
                InstrKind::Assert(e) => match self.eval_with(e, &locals) {
                    Ok(0) => {
                        self.fail(K::Assertion, format!("{}: assertion failed", self.label()));
                        break Err(());
                    }
                    Ok(_) => pc += 1,
                    Err(()) => break Err(()),
                },
                InstrKind::Op { op, result } => {
                    if let IOp::Mbar(MbarOp::Wait { try_: false, .. }) = op {
                        self.fail(
                            K::CompletionMisuse,
                            format!("{} waits on a barrier; a completion function must not wait or block", self.label()),
                        );
                        break Err(());
                    }
                    match self.op_with(op, Some(&locals)) {
                        Ok(v) => {
                            if let (Some(slot), Some(v)) = (result, v) {
                                locals[*slot as usize] = v;
                            }
                            pc += 1;
                        }
                        Err(()) => break Err(()),
                    }
                }
                InstrKind::Return => break Ok(()),
                InstrKind::Work => pc += 1,
                InstrKind::SyncWarp
                | InstrKind::SyncThreads
                | InstrKind::SyncWarpMask { .. }
                | InstrKind::Elect { .. }
                | InstrKind::NamedBar { .. }
                | InstrKind::ClusterArrive { .. }
                | InstrKind::ClusterWait { .. }
                | InstrKind::TokenCheck { .. } => {
                    self.fail(
                        K::CompletionMisuse,
                        format!(
                            "{} reaches an execution barrier; a completion function must not block",
                            self.label()
                        ),
                    );
                    break Err(());
                }
            }
        };
        self.in_completion = was_in;
        self.completing = was_completing;
        self.thread = was_thread;
        self.stmt = was_stmt;
        if result.is_err() && !self.ended {
            // A misuse that is not undefined behaviour still stops the completion function.
            self.ended = true;
        }
        result
    }

    /// The token about to be waited on came from the element it is waited on (when known).
    pub(super) fn token_check(&mut self, t: usize, origin: u16, index: &IExpr, group: u16) -> R<()> {
        let from = self.s.threads[t].locals[origin as usize];
        let at = self.eval(index)?;
        if from != 0 && from != at + 1 {
            let g = &self.p().barrier_groups[group as usize];
            let name = g.name.clone();
            self.fail(
                K::Assertion,
                format!(
                    "{} waits on {name}[{at}] with a token of {name}[{}]: a token names a phase of the barrier it came from only (undefined: the wait answers about another barrier's phase)",
                    self.label(),
                    from - 1
                ),
            );
            return Err(());
        }
        Ok(())
    }
}

impl Model {
    /// Is the thread blocked at a wait, and on what.
    /// The hardware's answer for a wait on `named` in phase `current` (see `hardware_complete`).
    pub(super) fn complete_for(&self, current: i64, named: i64) -> bool {
        if self.mutant == Some(Mutant::NoParityAliasing) {
            named < current
        } else {
            hardware_complete(current, named)
        }
    }

    pub fn wait_check(&self, s: &State, t: usize) -> WaitCheck {
        self.wait_check_of(s, t, false)
    }

    /// `wait_check`, also for a `try_wait` (polled in a loop): whether it would succeed now.
    pub fn poll_check(&self, s: &State, t: usize) -> WaitCheck {
        self.wait_check_of(s, t, true)
    }

    pub(super) fn wait_check_of(&self, s: &State, t: usize, polls: bool) -> WaitCheck {
        let th = &s.threads[t];
        let code = self.proto.code_of(t);
        let Some(instr) = code.instrs.get(th.pc as usize) else {
            return WaitCheck::NotAWait;
        };
        let InstrKind::Op {
            op: IOp::Mbar(MbarOp::Wait { bar, target, try_ }),
            ..
        } = &instr.kind
        else {
            return WaitCheck::NotAWait;
        };
        if *try_ && !polls {
            return WaitCheck::NotAWait;
        }
        // Shared vars are read as they stand (a peek: the step records the read). A fault or an
        // index out of range is left to the step, which reports it: treat it as ready.
        let me = &self.proto.threads[t];
        let peek = |e: &IExpr| e.eval(&th.locals, Some(me), &mut |v| Ok(s.vars[v as usize].value));
        let g = &self.proto.barrier_groups[bar.group as usize];
        let index = match &bar.index {
            None => 0,
            Some(e) => match peek(e) {
                Ok(i) if (0..g.len as i64).contains(&i) => i,
                _ => return WaitCheck::Ready,
            },
        };
        let b = g.base as usize + index as usize;
        let bs = &s.barriers[b];
        if bs.life != Life::Live {
            return WaitCheck::Ready;
        }
        let Ok(value) = peek(target.expr()) else {
            return WaitCheck::Ready;
        };
        let named = target.named_phase(value, th.known[b]);
        if self.complete_for(bs.phase, named) || self.mutant == Some(Mutant::WaitAlwaysReady) {
            WaitCheck::Ready
        } else {
            WaitCheck::Blocked { bar: b, named }
        }
    }
}

/// PTX's answer for a wait on `named` when the barrier is in phase `current`: complete exactly when
/// the parities differ (a phase two back looks like the current one: aliasing).
pub fn hardware_complete(current: i64, named: i64) -> bool {
    current.rem_euclid(2) != named.rem_euclid(2)
}
