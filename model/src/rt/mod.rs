//! The transition relation: which actions a state enables and what each one does.
//!
//! The shape follows stateright's `Model`: `init`, `actions`, `step`, and state properties
//! (`state_violations`). An action is one visible instruction of one thread (with the local
//! instructions that follow it), or the landing of one async copy. Violations found on the way are
//! returned with the successor; kinds that are undefined behaviour end the execution.

use crate::ir::*;
use crate::lang::ast::Span;
use crate::ViolationKind as K;
use state::*;

mod named;
pub use named::{named_len, NAMED_BARRIERS};
/// Cluster scope (issue 13 item 9): remote and multicast operations, the cluster barrier, CTAs
/// exiting under their peers.
mod cluster;
pub mod copies;
pub mod mbarrier;
pub mod memory;
pub mod path;
/// The async proxy (issue 13).
mod proxy;
pub mod state;
pub mod thread;
mod uniform_agent;
pub mod warp;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Thread (global index) runs its next visible instruction.
    Thread(u16),
    /// The async copy at this index of `State::copies` lands.
    Land(u16),
    /// Part of that copy lands ([`land_part_bytes`]): exactly the bytes that bring its barrier's
    /// tx-count to zero when the copy alone crosses zero (an expect_tx that under-counts it: the
    /// phase can then complete mid-copy, as the hardware's byte-granular complete_tx allows), or
    /// all but its last [`LAND_CHUNK`] bytes when only the copies in flight together under-count
    /// (another copy may then land across zero).
    LandPart(u16),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub kind: K,
    pub message: String,
}

/// What a step observed: the values a replay must see again.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "obs", rename_all = "snake_case")]
pub enum Obs {
    /// An arrival; `phase` is the token it returned.
    Arrived {
        bar: u16,
        phase: i64,
        count: i64,
    },
    /// A blocking wait returned; `phase` is the phase it named.
    Waited {
        bar: u16,
        phase: i64,
    },
    TryWait {
        bar: u16,
        phase: i64,
        result: bool,
    },
    Read {
        buf: u16,
        version: i64,
    },
    Wrote {
        buf: u16,
        version: i64,
    },
    CopyIssued {
        buf: u16,
        bar: u16,
        bytes: i64,
        version: i64,
    },
    Landed {
        buf: u16,
        bar: u16,
        bytes: i64,
        version: i64,
    },
    /// Part of a copy landed (the rest is still in flight).
    LandedPart {
        buf: u16,
        bar: u16,
        bytes: i64,
    },
    /// A phase completed (the completion function, if any, ran first). `pending` and `tx` are
    /// the counts at that moment, kept so tests can check the completion rule on every path.
    PhaseCompleted {
        bar: u16,
        phase: i64,
        pending: i64,
        tx: i64,
    },
    /// A converged lane (`lane` is its thread index) whose commit was part of another lane's
    /// group arrival.
    CommitJoined {
        bar: u16,
        lane: u16,
    },
    Released {
        what: String,
    },
    /// The thread (global index) finished: it returned or ran off the end of its role.
    Exited {
        thread: u16,
    },
    /// An `elect()` released its warp with this thread (global index) elected.
    Elected {
        thread: u16,
    },
    /// Issue 13: a warp arrived at named barrier `id` (`arrived` of `count` threads so far).
    NamedArrived {
        id: u16,
        warp: u16,
        arrived: i64,
        count: i64,
    },
    /// Issue 13: named barrier `id` completed and released its waiting threads.
    NamedCompleted {
        id: u16,
    },
    /// Issue 13: `cp_async_arrive` (without `.noinc`) raised the pending count of `bar` by
    /// `delta` (1); its arrive-on is an ordinary arrival (`Arrived`) when the copies land.
    CpAsyncPending {
        bar: u16,
        delta: i64,
    },
    // The async proxy (issue 13).
    /// The async proxy started reading this buffer (a TMA store, or a wgmma operand).
    AsyncReadIssued {
        buf: u16,
        wgmma: bool,
    },
    /// A wait of the issuer retired that asynchronous read.
    AsyncReadDone {
        buf: u16,
        wgmma: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub action: Action,
    /// The thread that stepped, or for a landing the thread that issued the copy.
    pub thread: u16,
    /// The instruction executed (thread steps) or the copy's issuing statement (landings).
    pub pc: u32,
    pub span: Span,
    pub obs: Vec<Obs>,
}

#[derive(Clone, Debug)]
pub struct Outcome<S = State> {
    /// `None` when a violation ended the execution (undefined behaviour).
    pub next: Option<S>,
    pub violations: Vec<Violation>,
    pub event: Option<Event>,
    /// An invariant the semantics rely on did not hold: a bug in the model, never a verdict. The
    /// search stops and the CLI exits 5 naming the rule.
    pub internal: Option<InternalError>,
    /// The step ran more than `STEP_BUDGET` local instructions without reaching a visible one
    /// and was abandoned: the search stops `incomplete` (a long loop is not a verdict).
    pub cut: bool,
}

/// Local instructions one step may run (a loop of 2^62 empty iterations is not a hang, but
/// running it is not a search either).
pub const STEP_BUDGET: u64 = 1 << 24;

/// A broken model invariant, named by its rule (docs/model.md, "Invariants").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InternalError {
    pub rule: &'static str,
    pub message: String,
}

pub struct Model {
    pub proto: Protocol,
    /// Every instruction is its own step, local ones included. Only for tests: they compare its
    /// verdicts with the default, where local instructions run inside the preceding visible step.
    pub fine_grained: bool,
    /// A deliberate defect, for the tests that show a broken model is caught (by the model's own
    /// release-mode rules, by the self-check, or by the library's expect lines). `None` in use.
    pub mutant: Option<Mutant>,
    /// Per role: its code has a warp-batched `commit`. Only such roles need their branch path
    /// (convergence decides their commits); elsewhere it would only keep states of different loop
    /// iterations apart and grow with depth.
    tracks_path: Vec<bool>,
    /// The protocol uses the async proxy (issue 13): only then is `State::proxy` kept (and
    /// packed); elsewhere it stays empty and costs nothing.
    pub(crate) tracks_proxy: bool,
    /// The protocol uses named barriers (issue 13): only then is `State::named` packed.
    pub(crate) tracks_named: bool,
    /// Classes of interchangeable threads (crate::canon).
    pub(crate) symmetry: Vec<Vec<usize>>,
    /// The threads of each model warp, in lane order.
    warps: Vec<Vec<usize>>,
    /// Static footprints for the partial-order reduction (crate::footprint).
    pub por: crate::footprint::Footprints,
}

fn roles_with_commit(proto: &Protocol) -> Vec<bool> {
    proto
        .roles
        .iter()
        .map(|r| {
            r.code.instrs.iter().any(|i| {
                matches!(
                    i.kind,
                    InstrKind::Op {
                        op: IOp::Commit { .. },
                        ..
                    }
                )
            })
        })
        .collect()
}

/// Planted defects of the semantics. Each names the rule it breaks; tests assert that something
/// catches each one, so the checks that guard the model can fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutant {
    /// Every blocking wait is treated as ready (caught by rule R-WAIT in the step).
    WaitAlwaysReady,
    /// Arrivals are not counted in the phase's `arrived` (caught by the self-check, I-ARRIVALS).
    ArrivalsUncounted,
    /// A wait is complete when its phase is older than the current one: no parity aliasing.
    NoParityAliasing,
    /// Completion functions never run.
    CompletionNeverRuns,
    /// arrive_and_drop arrives but leaves the expected count of later phases alone.
    DropIgnored,
    /// expect_tx is ignored (the tx-count only ever goes down).
    ExpectTxIgnored,
    /// A successful wait acquires no phase knowledge.
    NoKnowledgeTransfer,
    /// A successful wait acquires no history (no happens-before from the phase).
    WaitDoesNotAcquire,
    /// Copies land whole only: no partial landing when expect_tx under-counts.
    NoPartialLanding,
    /// PTX's missing-wait rule is not checked.
    MissingWaitUnchecked,
    /// A warp-batched commit arrives once per lane instead of once per converged group.
    CommitPerLane,
    /// A wait that has fallen two phases behind is not reported.
    StaleWaitUnchecked,
    /// The partial-order reduction expands only the first enabled thread step whenever two or
    /// more steps are enabled, ignoring every conflict (an unsound reduction: the library's
    /// expect lines and `tests/reductions.rs` must catch it).
    PorIgnoresConflicts,
}

impl Mutant {
    pub const ALL: [Mutant; 13] = [
        Mutant::WaitAlwaysReady,
        Mutant::ArrivalsUncounted,
        Mutant::NoParityAliasing,
        Mutant::CompletionNeverRuns,
        Mutant::DropIgnored,
        Mutant::ExpectTxIgnored,
        Mutant::NoKnowledgeTransfer,
        Mutant::WaitDoesNotAcquire,
        Mutant::NoPartialLanding,
        Mutant::MissingWaitUnchecked,
        Mutant::CommitPerLane,
        Mutant::StaleWaitUnchecked,
        Mutant::PorIgnoresConflicts,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutant::WaitAlwaysReady => "wait-always-ready",
            Mutant::ArrivalsUncounted => "arrivals-uncounted",
            Mutant::NoParityAliasing => "no-parity-aliasing",
            Mutant::CompletionNeverRuns => "completion-never-runs",
            Mutant::DropIgnored => "drop-ignored",
            Mutant::ExpectTxIgnored => "expect-tx-ignored",
            Mutant::NoKnowledgeTransfer => "no-knowledge-transfer",
            Mutant::WaitDoesNotAcquire => "wait-does-not-acquire",
            Mutant::NoPartialLanding => "no-partial-landing",
            Mutant::MissingWaitUnchecked => "missing-wait-unchecked",
            Mutant::CommitPerLane => "commit-per-lane",
            Mutant::StaleWaitUnchecked => "stale-wait-unchecked",
            Mutant::PorIgnoresConflicts => "por-ignores-conflicts",
        }
    }
}

/// Whether the blocked wait at a thread's pc could return now (`None` if it is not at a wait).
pub enum WaitCheck {
    NotAWait,
    Ready,
    Blocked { bar: usize, named: i64 },
}

impl Model {
    pub fn new(proto: Protocol) -> Model {
        let por = crate::footprint::Footprints::new(&proto, false);
        let mut m = Model {
            tracks_path: roles_with_commit(&proto),
            tracks_proxy: proxy::uses_async_proxy(&proto),
            // The named barriers, or the cluster barrier, which shares their state component.
            tracks_named: named::named_len(&proto) > 0,
            proto,
            fine_grained: false,
            mutant: None,
            symmetry: Vec::new(),
            warps: Vec::new(),
            por,
        };
        m.warps = (0..m.proto.warp_count()).map(|w| m.proto.warp_members(w).collect()).collect();
        m.symmetry = crate::canon::symmetry_classes(&m);
        m
    }

    pub fn fine_grained(proto: Protocol) -> Model {
        let por = crate::footprint::Footprints::new(&proto, true);
        Model {
            fine_grained: true,
            por,
            ..Model::new(proto)
        }
    }

    /// The state before any thread runs: declared barriers initialised (and visible to all), then
    /// every thread's leading local code.
    pub fn init(&self) -> Outcome {
        let p = &self.proto;
        let agents = p.agent_count();
        let fresh_clock = |owner: Option<usize>| -> Clock {
            let mut c = vec![0u32; agents];
            if let Some(o) = owner {
                c[o] = 1;
            }
            c.into_boxed_slice()
        };
        let threads: Vec<ThreadState> = (0..p.threads.len())
            .map(|t| ThreadState {
                pc: 0,
                status: Status::Running,
                locals: vec![0; p.code_of(t).local_names.len()].into_boxed_slice(),
                clock: fresh_clock(Some(t)),
                known: vec![0; p.barriers.len()].into_boxed_slice(),
                path: Vec::new(),
                commit_seq: 0,
            })
            .collect();
        let mut violations = Vec::new();
        let barriers: Vec<BarrierState> = p
            .barriers
            .iter()
            .map(|b| {
                let live = !b.manual_init;
                if live && !(1..=MAX_COUNT).contains(&b.count) {
                    violations.push(Violation {
                        kind: K::CountRange,
                        message: format!(
                            "barrier {} is initialised with count {}; mbarrier counts must be 1..=1048575",
                            b.name, b.count
                        ),
                    });
                }
                BarrierState {
                    life: if live { Life::Live } else { Life::Uninit },
                    phase: 0,
                    pending: b.count,
                    expected: b.count,
                    arrived: 0,
                    tx: 0,
                    init_by: None,
                    observed_prev: false,
                    clock: fresh_clock(None),
                    prev_clock: fresh_clock(None),
                    known: vec![0; p.barriers.len()].into_boxed_slice(),
                    prev_known: vec![0; p.barriers.len()].into_boxed_slice(),
                }
            })
            .collect();
        let cell = |value: i64| Cell {
            value,
            writes: 0,
            last_write: None,
            reads: Vec::new(),
            in_flight: false,
            parts: Vec::new(),
        };
        let s = State {
            threads: threads.into_boxed_slice(),
            barriers: barriers.into_boxed_slice(),
            buffers: p.buffers.iter().map(|_| cell(0)).collect(),
            vars: p.vars.iter().map(|v| cell(v.init)).collect(),
            copies: Vec::new(),
            engines: (0..p.buffers.len()).map(|b| fresh_clock(Some(p.threads.len() + b))).collect(),
            engines_known: (0..p.buffers.len()).map(|_| vec![0; p.barriers.len()].into_boxed_slice()).collect(),
            commit_logs: vec![Vec::new(); p.warp_count()].into_boxed_slice(),
            named: named::initial_named(p, agents),
            proxy: ProxyState {
                reads: Vec::new(),
                unfenced_write: vec![false; p.buffers.len()].into_boxed_slice(),
                unfenced_init: vec![false; p.barriers.len()].into_boxed_slice(),
            },
        };
        if !violations.is_empty() {
            return Outcome {
                next: None,
                violations,
                event: None,
                internal: None,
                cut: false,
            };
        }
        let mut x = Exec::new(self, s);
        for t in 0..p.threads.len() {
            if !x.ended {
                x.run_local(t);
            }
        }
        if !x.ended {
            x.settle();
        }
        Outcome {
            next: if x.ended { None } else { Some(x.s) },
            violations: x.v,
            event: None,
            internal: x.internal,
            cut: x.cut,
        }
    }

    /// Enabled actions, threads first (in index order), then landings.
    pub fn actions(&self, s: &State, out: &mut Vec<Action>) {
        for (t, th) in s.threads.iter().enumerate() {
            if th.status == Status::Running
                && matches!(self.wait_check(s, t), WaitCheck::NotAWait | WaitCheck::Ready)
                && self.commit_ready(s, t)
            {
                out.push(Action::Thread(t as u16));
            } else if th.status == Status::AtSyncWarp && self.at_elect(s, t).is_some() {
                // Every lane of a ready election may be the one elected: one action each.
                if let Some(group) = self.warp_sync_group(s, t) {
                    if group.iter().any(|&m| self.at_elect(s, m).is_some()) {
                        out.push(Action::Thread(t as u16));
                    }
                }
            }
        }
        for i in 0..s.copies.len() {
            // A copy's complete_tx may be applied in chunks or at once: when the tx-count would
            // pass through zero mid-copy (an expect_tx that under-counts), the phase may complete
            // there (a chunk) or never (the whole count at once, which the H200 did for a 256-byte
            // copy: docs/hardware-notes.md). Both are allowed.
            let c = &s.copies[i];
            // Issue 13: an arrive-on fires with the landing that completes its copies; a
            // cp.async copy has no tx-count to land in part against.
            match c.kind {
                CopyKind::ArriveOn { .. } => continue,
                CopyKind::CpAsync => {
                    out.push(Action::Land(i as u16));
                    continue;
                }
                CopyKind::Tma => {}
            }
            let b = &s.barriers[c.bar as usize];
            // Copies land in chunks that interleave with the other copies on the barrier: when
            // they together under-count it (a multicast stage whose expect_tx counts only the
            // bytes its own producer issued), one copy landing in part lets another land across
            // zero, and the phase never completes. The H200 did exactly that
            // (docs/hardware-notes.md, "Copies that land together across zero"). Only once every
            // arrival is in: before that no landing can complete the phase, and a split then is
            // a split made after the last arrival.
            let crossing = b.tx > 0 && b.tx < c.bytes;
            let together = || {
                let in_flight: i64 = s
                    .copies
                    .iter()
                    .filter(|o| o.bar == c.bar && o.kind == CopyKind::Tma && o.is_copy())
                    .map(|o| o.bytes)
                    .sum();
                b.pending == 0 && b.tx > 0 && c.bytes > LAND_CHUNK && in_flight > b.tx
            };
            let partial = b.life == Life::Live && (crossing || together()) && self.mutant != Some(Mutant::NoPartialLanding);
            out.push(Action::Land(i as u16));
            if partial {
                out.push(Action::LandPart(i as u16));
            }
        }
    }

    /// Is the thread blocked at a wait, and on what.
    /// The hardware's answer for a wait on `named` in phase `current` (see `hardware_complete`).
    fn complete_for(&self, current: i64, named: i64) -> bool {
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

    fn wait_check_of(&self, s: &State, t: usize, polls: bool) -> WaitCheck {
        let th = &s.threads[t];
        let code = self.proto.code_of(t);
        let Some(instr) = code.instrs.get(th.pc as usize) else {
            return WaitCheck::NotAWait;
        };
        let InstrKind::Op {
            op: IOp::Wait { bar, target, try_ },
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

    /// Violations that belong to a state rather than a step: a deadlock, the CTA exiting with
    /// copies still in flight, a blocked wait whose token or parity has gone stale.
    pub fn state_violations(&self, s: &State, enabled: &[Action]) -> Vec<Violation> {
        let p = &self.proto;
        let mut out = Vec::new();
        if s.all_done() && !s.copies.is_empty() {
            let c = &s.copies[0];
            out.push(Violation {
                kind: K::Lifetime,
                message: format!(
                    "every thread has exited while the async copy into {} (tracked by {}) is still in flight; the CTA's shared memory is released under it",
                    p.buffers[c.buf as usize].name,
                    p.barriers.get(c.bar as usize).map_or("no barrier", |b| b.name.as_str())
                ),
            });
            return out;
        }
        // The async proxy (issue 13): shared memory released under a read still in flight.
        if let Some(r) = s.proxy.reads.first().filter(|_| s.all_done()) {
            out.push(Violation {
                kind: K::Lifetime,
                message: format!(
                    "every thread has exited while {} issued by {} still reads {} (no {} retired it); the CTA's shared memory is released under it",
                    if r.wgmma { "a wgmma_async" } else { "a TMA store" },
                    p.thread_label(r.issuer as usize),
                    p.buffers[r.buf as usize].name,
                    if r.wgmma { "wgmma_wait" } else { "wait_group / wait_group_read" }
                ),
            });
            return out;
        }
        if let Some(v) = self.cluster_lifetime(s) {
            out.push(v);
            return out;
        }
        for t in 0..s.threads.len() {
            if let WaitCheck::Blocked { bar, named } = self.wait_check(s, t) {
                let c = s.barriers[bar].phase;
                if c >= named + 2 && self.mutant != Some(Mutant::StaleWaitUnchecked) {
                    out.push(Violation {
                        kind: K::StaleWait,
                        message: format!(
                            "{} waits on phase {named} of {} (the latest phase of it that the thread knows of is {}), but the barrier is already in phase {c}: the same parity now names phase {c}, so the wait blocks until phase {c} completes instead",
                            p.thread_label(t),
                            p.barriers[bar].name,
                            s.threads[t].known[bar]
                        ),
                    });
                }
            }
        }
        if enabled.is_empty() && !s.all_done() {
            if let Some(m) = self.warp_collective_ub(s) {
                out.push(Violation {
                    kind: K::Assertion,
                    message: m,
                });
                return out;
            }
            // The cause is explained by the verifier from the trace that led here
            // (verifier/src/explain/deadlock.rs): the state alone does not say who stopped arriving.
            out.push(Violation {
                kind: K::Deadlock,
                message: "every unfinished thread is blocked".to_string(),
            });
        } else if !enabled.is_empty()
            && !s.all_done()
            && enabled.iter().all(|a| matches!(a, Action::Thread(t) if self.spins(s, *t as usize)))
        {
            // Spinning is blocking: a `while` loop polling try_wait (or a shared var) that only
            // its own steps can still reach revisits this state forever.
            out.push(Violation {
                kind: K::Deadlock,
                message: "every unfinished thread is blocked or spins in a loop that nothing can end".to_string(),
            });
        }
        out
    }

    /// The lanes converged with `t`: unfinished lanes of its warp and role whose branch path has not
    /// parted from `t`'s since the last `syncwarp` (`t` included). Some may still be behind it.
    pub fn converged_with(&self, s: &State, t: usize) -> Vec<usize> {
        let w = self.proto.threads[t].warp as usize;
        let role = self.proto.threads[t].role;
        self.warps[w]
            .iter()
            .copied()
            .filter(|&m| {
                let o = &s.threads[m];
                o.status != Status::Done && self.proto.threads[m].role == role && paths_compatible(&o.path, &s.threads[t].path)
            })
            .collect()
    }

    /// The groups that issue `t`'s commit (to barrier `b`) as one instruction: `t`'s converged
    /// lanes first, then every diverged group of the same warp and role standing ready at the same
    /// commit, with the same commit count, naming the same barrier.
    pub fn commit_groups_at(&self, s: &State, t: usize, b: usize) -> Vec<Vec<usize>> {
        let th = &s.threads[t];
        let mine = self.converged_with(s, t);
        let mut groups = vec![mine.clone()];
        let w = self.proto.threads[t].warp as usize;
        let role = self.proto.threads[t].role;
        let code = self.proto.code_of(t);
        let Some(Instr {
            kind: InstrKind::Op {
                op: IOp::Commit { bar }, ..
            },
            ..
        }) = code.instrs.get(th.pc as usize)
        else {
            return groups;
        };
        let g = &self.proto.barrier_groups[bar.group as usize];
        let mut taken: Vec<usize> = mine;
        for &m in &self.warps[w] {
            let o = &s.threads[m];
            if taken.contains(&m)
                || self.proto.threads[m].role != role
                || o.status != Status::Running
                || o.pc != th.pc
                || o.commit_seq != th.commit_seq
            {
                continue;
            }
            let index = match &bar.index {
                None => Some(0),
                Some(e) => e
                    .eval(&o.locals, Some(&self.proto.threads[m]), &mut |v| Ok(s.vars[v as usize].value))
                    .ok(),
            };
            if index.map(|i| g.base as i64 + i) != Some(b as i64) || !self.commit_ready(s, m) {
                continue;
            }
            let group = self.converged_with(s, m);
            taken.extend(&group);
            groups.push(group);
        }
        groups
    }

    /// A commit is one instruction for its converged lanes: it runs once every one of them stands
    /// at the same commit on the same path. A lane still behind on the path holds the others back
    /// (on hardware it could not lag: converged lanes execute together).
    pub fn commit_ready(&self, s: &State, t: usize) -> bool {
        let th = &s.threads[t];
        let code = self.proto.code_of(t);
        let Some(Instr {
            kind: InstrKind::Op {
                op: IOp::Commit { .. }, ..
            },
            ..
        }) = code.instrs.get(th.pc as usize)
        else {
            return true;
        };
        self.converged_with(s, t).into_iter().all(|m| {
            let o = &s.threads[m];
            o.status == Status::Running && o.pc == th.pc && o.commit_seq == th.commit_seq && o.path == th.path
        })
    }

    /// The result slot of the `elect()` a thread stands at, if it stands at one.
    pub fn at_elect(&self, s: &State, t: usize) -> Option<u16> {
        match self.proto.code_of(t).instrs.get(s.threads[t].pc as usize)?.kind {
            InstrKind::Elect { slot } => Some(slot),
            _ => None,
        }
    }

    /// The lanes a thread waiting at `syncwarp`, `syncwarp(mask)` or `elect()` waits for: the
    /// unfinished lanes of its warp (those in the mask for `syncwarp(mask)`; a mask that cannot
    /// be evaluated names the whole warp, and the step that ran it reported the fault).
    pub fn warp_sync_participants(&self, s: &State, t: usize) -> Vec<usize> {
        let w = self.proto.threads[t].warp as usize;
        let mask = match self.proto.code_of(t).instrs.get(s.threads[t].pc as usize).map(|i| &i.kind) {
            Some(InstrKind::SyncWarpMask { mask }) => mask
                .eval(&s.threads[t].locals, Some(&self.proto.threads[t]), &mut |v| {
                    Ok(s.vars[v as usize].value)
                })
                .ok(),
            _ => None,
        };
        self.warps[w]
            .iter()
            .copied()
            .filter(|&m| {
                s.threads[m].status != Status::Done
                    && mask.is_none_or(|k| self.proto.threads[m].lane < 64 && (k >> self.proto.threads[m].lane) & 1 != 0)
            })
            .collect()
    }

    /// In a state where nothing can move, a lane that waits at a warp collective (`syncwarp`,
    /// `syncwarp(mask)`, `elect()`) for a lane of its mask that will never execute a matching one.
    /// CUDA makes that undefined behaviour, not a hang ("all non-exited threads named in mask must
    /// execute a corresponding __syncwarp() with the same mask, or the result is undefined"; the
    /// same for elect.sync's membermask): the H200 let such lanes through (docs/hardware-notes.md).
    pub fn warp_collective_ub(&self, s: &State) -> Option<String> {
        let p = &self.proto;
        (0..s.threads.len()).find_map(|t| {
            if s.threads[t].status != Status::AtSyncWarp || self.warp_sync_group(s, t).is_some() {
                return None;
            }
            let what = if self.at_elect(s, t).is_some() { "elect()" } else { "syncwarp" };
            let group = self.warp_sync_participants(s, t);
            let missing = group.iter().copied().find(|&m| {
                s.threads[m].status != Status::AtSyncWarp
                    || (self.at_elect(s, m).is_some() != self.at_elect(s, t).is_some())
                    || self.warp_sync_participants(s, m) != group
            })?;
            Some(format!(
                "{} waits at {what} for {}, which its mask names but which never executes a matching one (undefined behaviour in CUDA: every non-exited lane named in the mask must execute it with the same mask)",
                p.thread_label(t),
                p.thread_label(missing)
            ))
        })
    }

    /// The group a waiting lane would be released with, once every participant waits for the
    /// same lanes; `None` while someone is still missing.
    pub fn warp_sync_group(&self, s: &State, t: usize) -> Option<Vec<usize>> {
        if s.threads[t].status != Status::AtSyncWarp {
            return None;
        }
        let group = self.warp_sync_participants(s, t);
        // `elect()` (elect.sync) and `syncwarp` (bar.warp.sync) are different instructions: lanes
        // waiting at one do not release lanes waiting at the other.
        let electing = self.at_elect(s, t).is_some();
        let ready = group.iter().all(|&m| {
            s.threads[m].status == Status::AtSyncWarp
                && self.at_elect(s, m).is_some() == electing
                && (m == t || self.warp_sync_participants(s, m) == group)
        });
        ready.then_some(group)
    }

    /// A thread that can only spin: from `s`, running it alone returns to `s` within a few
    /// steps, changing nothing but its own pc and locals on the way (a `while` loop polling a
    /// `try_wait` or a shared var that no one else can change any more).
    pub fn spins(&self, s: &State, t: usize) -> bool {
        const MAX_STEPS: usize = 16;
        if !self.proto.code_of(t).has_while {
            return false;
        }
        let mut cur = s.clone();
        for _ in 0..MAX_STEPS {
            if cur.threads[t].status != Status::Running
                || !matches!(self.wait_check(&cur, t), WaitCheck::NotAWait | WaitCheck::Ready)
                || !self.commit_ready(&cur, t)
            {
                return false;
            }
            let o = self.step(&cur, Action::Thread(t as u16));
            if !o.violations.is_empty() || o.internal.is_some() {
                return false;
            }
            let Some(n) = o.next else { return false };
            if !same_but_locals(s, &n, t) {
                return false;
            }
            if n == *s {
                return true;
            }
            cur = n;
        }
        false
    }

    pub fn step(&self, s: &State, a: Action) -> Outcome {
        let mut x = Exec::new(self, s.clone());
        let event = match a {
            Action::Thread(t) if s.threads[t as usize].status == Status::AtSyncWarp => {
                // An election: the warp's lanes have all arrived and this one is elected.
                let t = t as usize;
                let pc = x.s.threads[t].pc;
                let instr = &self.proto.code_of(t).instrs[pc as usize];
                x.agent = t;
                x.thread = Some(t);
                let group = self.warp_sync_group(s, t).unwrap_or_else(|| vec![t]);
                x.obs.push(Obs::Elected { thread: t as u16 });
                x.release_elect(&group, "elect", Some(t));
                x.event(a, t as u16, pc, instr.span)
            }
            Action::Thread(t) => {
                let t = t as usize;
                let pc = x.s.threads[t].pc;
                let instr = &self.proto.code_of(t).instrs[pc as usize];
                x.agent = t;
                x.thread = Some(t);
                x.exec_visible(t, instr);
                if !x.ended && x.s.threads[t].status == Status::Running {
                    // Jumps and branches set pc one short of their target (see exec_visible).
                    x.s.threads[t].pc = x.s.threads[t].pc.wrapping_add(1);
                    x.run_local(t);
                }
                if !x.ended && x.s.threads[t].status == Status::Done {
                    x.obs.push(Obs::Exited { thread: t as u16 });
                }
                x.event(a, t as u16, pc, instr.span)
            }
            Action::LandPart(i) => {
                let c = x.s.copies[i as usize];
                let part = land_part_bytes(x.s.barriers[c.bar as usize].tx, c.bytes);
                x.s.copies[i as usize].bytes -= part;
                x.land_part(c, part);
                let span = c.stmt;
                x.event(a, c.issuer, u32::MAX, span)
            }
            Action::Land(i) => {
                let c = x.s.copies.remove(i as usize);
                x.land_index = i as usize;
                x.land(c);
                let span = c.stmt;
                x.event(a, c.issuer, u32::MAX, span)
            }
        };
        if !x.ended {
            x.settle();
        }
        Outcome {
            next: if x.ended { None } else { Some(x.s) },
            violations: x.v,
            event: Some(event),
            internal: x.internal,
            cut: x.cut,
        }
    }
}

/// The smallest piece of a bulk copy's complete_tx the model splits off (the bulk-copy granule).
pub const LAND_CHUNK: i64 = 16;

/// The bytes a `LandPart` lands, from the barrier's tx-count and the copy's bytes still to land:
/// the bytes that bring the tx-count to zero when the copy alone crosses it, else all but the
/// copy's last chunk. The reference runtime lands the same (verifier/runtime barrier.rs).
pub fn land_part_bytes(tx: i64, remaining: i64) -> i64 {
    if tx < remaining {
        tx
    } else {
        remaining - LAND_CHUNK
    }
}

/// Equal but for thread `t`'s pc and locals.
fn same_but_locals(a: &State, b: &State, t: usize) -> bool {
    a.threads.iter().zip(b.threads.iter()).enumerate().all(|(i, (x, y))| {
        if i == t {
            x.status == y.status && x.clock == y.clock && x.known == y.known && x.path == y.path && x.commit_seq == y.commit_seq
        } else {
            x == y
        }
    }) && a.barriers == b.barriers
        && a.buffers == b.buffers
        && a.vars == b.vars
        && a.copies == b.copies
        && a.engines == b.engines
        && a.engines_known == b.engines_known
        && a.commit_logs == b.commit_logs
        && a.named == b.named
        && a.proxy == b.proxy
}

/// PTX's answer for a wait on `named` when the barrier is in phase `current`: complete exactly when
/// the parities differ (a phase two back looks like the current one: aliasing).
pub fn hardware_complete(current: i64, named: i64) -> bool {
    current.rem_euclid(2) != named.rem_euclid(2)
}

struct Exec<'m> {
    m: &'m Model,
    s: State,
    v: Vec<Violation>,
    ended: bool,
    obs: Vec<Obs>,
    /// The agent whose clock orders the current accesses (a thread, or a copy engine).
    agent: usize,
    /// The thread whose locals and identity expressions see, if any.
    thread: Option<usize>,
    in_completion: bool,
    /// The barrier whose completion function is running.
    completing: Option<usize>,
    internal: Option<InternalError>,
    cut: bool,
    /// The statement being executed (what a copy records as its issue site).
    stmt: Span,
    /// Issue 13: the index in `State::copies` of the copy landing in this step.
    land_index: usize,
    /// Cluster scope: while a remote or multicast operation runs, the CTA whose objects its
    /// references name.
    remote: Option<usize>,
}

type R<T> = Result<T, ()>;

impl<'m> Exec<'m> {
    /// The step's event, taking the observations made so far.
    fn event(&mut self, action: Action, thread: u16, pc: u32, span: Span) -> Event {
        Event {
            action,
            thread,
            pc,
            span,
            obs: std::mem::take(&mut self.obs),
        }
    }

    fn new(m: &'m Model, s: State) -> Exec<'m> {
        Exec {
            m,
            s,
            v: Vec::new(),
            ended: false,
            obs: Vec::new(),
            agent: 0,
            thread: None,
            in_completion: false,
            completing: None,
            internal: None,
            cut: false,
            stmt: Span::default(),
            land_index: 0,
            remote: None,
        }
    }

    /// A throwaway evaluator over a copy of the state, for questions asked without stepping.
    fn p(&self) -> &'m Protocol {
        &self.m.proto
    }

    fn label(&self) -> String {
        let p = self.p();
        let base = if self.agent < p.threads.len() {
            p.thread_label(self.agent)
        } else {
            format!("the async copy into {}", p.buffers[self.agent - p.threads.len()].name)
        };
        if self.in_completion {
            format!("the completion function (run by {base})")
        } else {
            base
        }
    }

    /// A rule the semantics rely on does not hold: the execution ends and the search reports a
    /// model bug (exit 5) instead of a verdict built on a false premise.
    fn broken(&mut self, rule: &'static str, message: String) {
        self.ended = true;
        if self.internal.is_none() {
            self.internal = Some(InternalError { rule, message });
        }
    }

    fn fail(&mut self, kind: K, message: String) {
        if kind.ends_execution() {
            self.ended = true;
        }
        self.v.push(Violation { kind, message });
    }

    fn eval_with(&mut self, e: &IExpr, locals: &[i64]) -> R<i64> {
        let me = self.thread.map(|t| self.p().threads[t]);
        let r = e.eval(locals, me.as_ref(), &mut |v| {
            let v = v as usize;
            let _ = self.read_cell(false, v);
            Ok(self.s.vars[v].value)
        });
        match r {
            Ok(v) => Ok(v),
            Err(EvalError::Fault(m)) => {
                self.fail(K::Assertion, format!("{}: {m}", self.label()));
                Err(())
            }
            Err(EvalError::NoVar) => {
                self.broken("R-EVAL", "a shared var could not be read inside a step".to_string());
                Err(())
            }
        }
    }

    fn eval(&mut self, e: &IExpr) -> R<i64> {
        let Some(t) = self.thread else {
            self.broken("R-EVAL", "thread code evaluated outside a thread".to_string());
            return Err(());
        };
        let locals = self.s.threads[t].locals.clone();
        self.eval_with(e, &locals)
    }

    fn group_index(&mut self, r: &Ref, groups: &[Group], locals: Option<&[i64]>) -> R<usize> {
        // Cluster scope: a remote operation names the target CTA's copy of the group.
        let g = match self.remote {
            None => &groups[r.group as usize],
            Some(cta) => {
                let per = groups.len() / self.p().cluster as usize;
                &groups[cta * per + r.group as usize % per]
            }
        };
        let i = match &r.index {
            None => 0,
            Some(e) => match locals {
                Some(l) => self.eval_with(e, l)?,
                None => self.eval(e)?,
            },
        };
        if i < 0 || i >= g.len as i64 {
            self.fail(
                K::Assertion,
                format!("{}: index {i} is out of range for {}[{}]", self.label(), g.name, g.len),
            );
            return Err(());
        }
        Ok(g.base as usize + i as usize)
    }

    // ---- control flow -------------------------------------------------------------------

    /// Released threads (a barrier or collective let them go) run their local code as part of
    /// the releasing step; the step's own agent and thread are restored after each.
    pub(crate) fn run_released(&mut self, released: impl IntoIterator<Item = usize>) {
        for t in released {
            if self.ended {
                return;
            }
            let (agent, thread) = (self.agent, self.thread);
            self.run_local(t);
            self.agent = agent;
            self.thread = thread;
        }
    }

    /// Run local instructions from the thread's pc up to the next visible one (or the end).
    fn run_local(&mut self, t: usize) {
        let code = self.p().code_of(t);
        self.thread = Some(t);
        self.agent = t;
        // A loop of local instructions either reaches a visible one, or repeats a (pc, locals)
        // it had (nothing else can change during a local run): a hang, found by Brent's cycle
        // detection; or runs past the budget: the search stops incomplete.
        let mut ran: u64 = 0;
        let mut power: u64 = 1;
        let mut mark: (u32, Box<[i64]>) = (u32::MAX, Box::new([]));
        loop {
            ran += 1;
            let th = &self.s.threads[t];
            if ran == power {
                mark = (th.pc, th.locals.clone());
                power *= 2;
            } else if th.pc == mark.0 && th.locals == mark.1 {
                self.fail(
                    K::Deadlock,
                    format!(
                        "{} loops forever without a visible step: its local state repeats, so the loop's condition never changes",
                        self.label()
                    ),
                );
                return;
            }
            if ran > STEP_BUDGET {
                self.cut = true;
                self.ended = true;
                return;
            }
            let pc = self.s.threads[t].pc as usize;
            let Some(instr) = code.instrs.get(pc) else {
                self.s.threads[t].status = Status::Done;
                return;
            };
            if instr.visible || self.m.fine_grained {
                return;
            }
            match &instr.kind {
                InstrKind::SetLocal { slot, expr } => {
                    let Ok(v) = self.eval(expr) else { return };
                    self.s.threads[t].locals[*slot as usize] = v;
                    self.s.threads[t].pc += 1;
                }
                InstrKind::Jump { to } => self.s.threads[t].pc = *to,
                InstrKind::Branch { cond, else_to } => {
                    let Ok(c) = self.eval(cond) else { return };
                    self.branch(t, pc, c != 0, *else_to);
                }
                InstrKind::Assert(e) => {
                    let Ok(c) = self.eval(e) else { return };
                    if c == 0 {
                        self.fail(K::Assertion, format!("{}: assertion failed", self.label()));
                        return;
                    }
                    self.s.threads[t].pc += 1;
                }
                InstrKind::Return => {
                    self.s.threads[t].status = Status::Done;
                    return;
                }
                InstrKind::TokenCheck { origin, index, group } => {
                    if self.token_check(t, *origin, index, *group).is_err() {
                        return;
                    }
                    self.s.threads[t].pc += 1;
                }
                _ => unreachable!("only local instructions are invisible"),
            }
        }
    }

    fn branch(&mut self, t: usize, pc: usize, taken: bool, else_to: u32) {
        let role = self.p().threads[t].role as usize;
        let th = &mut self.s.threads[t];
        if self.m.tracks_path[role] {
            th.path.push(((pc as u32) << 1) | taken as u32);
        }
        th.pc = if taken { pc as u32 + 1 } else { else_to };
    }

    /// Execute the visible instruction at the thread's pc. Leaves pc on it; the caller advances.
    fn exec_visible(&mut self, t: usize, instr: &Instr) {
        self.stmt = instr.span;
        match &instr.kind {
            InstrKind::SetLocal { slot, expr } => {
                if let Ok(v) = self.eval(expr) {
                    self.s.threads[t].locals[*slot as usize] = v;
                }
            }
            InstrKind::SetVar { var, expr } => {
                if let Ok(v) = self.eval(expr) {
                    let lanes = self.p().lanes_at(t, self.s.threads[t].pc);
                    if lanes > 1 {
                        self.lanes_race(lanes, false, *var as usize);
                    }
                    let _ = self.write_var(*var as usize, v);
                }
            }
            InstrKind::Branch { cond, else_to } => {
                if let Ok(c) = self.eval(cond) {
                    let pc = self.s.threads[t].pc as usize;
                    self.branch(t, pc, c != 0, *else_to);
                    // The branch set pc itself; compensate for the caller's increment.
                    self.s.threads[t].pc = self.s.threads[t].pc.wrapping_sub(1);
                }
            }
            InstrKind::Assert(e) => {
                if let Ok(0) = self.eval(e) {
                    self.fail(K::Assertion, format!("{}: assertion failed", self.label()));
                }
            }
            InstrKind::Op { op, result } => {
                if let Ok(Some(v)) = self.op_lanes(t, op) {
                    if let Some(slot) = result {
                        self.s.threads[t].locals[*slot as usize] = v;
                    }
                }
            }
            InstrKind::Work => {}
            InstrKind::SyncWarp | InstrKind::Elect { .. } => self.s.threads[t].status = Status::AtSyncWarp,
            InstrKind::SyncWarpMask { mask } => {
                if let Ok(m) = self.eval(mask) {
                    let lane = self.p().threads[t].lane;
                    if lane >= 64 || (m >> lane) & 1 == 0 {
                        self.fail(
                            K::Assertion,
                            format!(
                                "{}: syncwarp({m:#x}) is executed by lane {lane}, which is not in the mask (undefined behaviour in CUDA)",
                                self.label()
                            ),
                        );
                    } else {
                        self.s.threads[t].status = Status::AtSyncWarp;
                    }
                }
            }
            InstrKind::SyncThreads => self.s.threads[t].status = Status::AtSyncThreads,
            InstrKind::TokenCheck { origin, index, group } => {
                let _ = self.token_check(t, *origin, index, *group);
            }
            InstrKind::NamedBar { id, count, .. } => {
                // Evaluated here for their faults and shared-var reads; the warp's arrival
                // (`settle`) reads them again.
                if self.eval(id).is_ok() && self.eval(count).is_ok() {
                    self.s.threads[t].status = Status::AtNamedBar;
                }
            }
            InstrKind::ClusterArrive { slot } => self.cluster_arrive(t, *slot as usize),
            InstrKind::ClusterWait { slot } => self.cluster_wait(t, *slot as usize),
            // Steps of their own only in the fine-grained model.
            InstrKind::Jump { to } => self.s.threads[t].pc = to.wrapping_sub(1),
            InstrKind::Return => self.s.threads[t].status = Status::Done,
        }
    }

    /// Release execution barriers whose participants have all arrived. Exited threads do not
    /// participate, so a thread exiting can release the others.
    fn settle(&mut self) {
        loop {
            if self.ended {
                return;
            }
            let n = self.s.threads.len();
            // `syncthreads` is per CTA (a cluster's CTAs pass theirs independently).
            let mut released_cta = false;
            for cta in 0..self.p().cluster as u16 {
                let p = self.p();
                let live: Vec<usize> = (0..n)
                    .filter(|&t| p.threads[t].cta == cta && self.s.threads[t].status != Status::Done)
                    .collect();
                if !live.is_empty() && live.iter().all(|&t| self.s.threads[t].status == Status::AtSyncThreads) {
                    self.release(&live, "syncthreads");
                    released_cta = true;
                    break;
                }
            }
            if released_cta {
                continue;
            }
            if self.settle_cluster() {
                continue;
            }
            if self.settle_named() {
                continue;
            }
            let mut released = false;
            for t in 0..n {
                // An election is released by an action (the choice of the elected lane).
                let Some(lanes) = self.m.warp_sync_group(&self.s, t) else {
                    continue;
                };
                if lanes.iter().any(|&m| self.m.at_elect(&self.s, m).is_some()) {
                    continue;
                }
                self.release_elect(&lanes, "syncwarp", None);
                released = true;
                break;
            }
            if !released {
                return;
            }
        }
    }

    /// A warp-level execution barrier (`syncwarp`, `syncwarp(mask)`, `elect()`): the lanes
    /// reconverge (their branch paths start afresh), and the elected lane, if any, gets 1 from its
    /// `elect()`, the others 0.
    fn release_elect(&mut self, lanes: &[usize], what: &str, elected: Option<usize>) {
        let w = self.p().threads[lanes[0]].warp as usize;
        for &t in lanes {
            if let Some(slot) = self.m.at_elect(&self.s, t) {
                self.s.threads[t].locals[slot as usize] = (Some(t) == elected) as i64;
            }
            self.s.threads[t].path.clear();
            self.s.threads[t].commit_seq = 0;
        }
        if lanes.len()
            == self.m.warps[w]
                .iter()
                .filter(|&&m| self.s.threads[m].status != Status::Done)
                .count()
        {
            self.s.commit_logs[w].clear();
        }
        self.release(lanes, what);
    }

    /// An execution barrier: every participant acquires every other's history, then runs on.
    fn release(&mut self, group: &[usize], what: &str) {
        let mut joined = self.s.threads[group[0]].clock.clone();
        let mut known = self.s.threads[group[0]].known.clone();
        for &t in group {
            join_into(&mut joined, &self.s.threads[t].clock);
            join_known(&mut known, &self.s.threads[t].known);
        }
        for &t in group {
            let th = &mut self.s.threads[t];
            th.clock = joined.clone();
            th.known = known.clone();
            th.clock[t] += 1;
            th.status = Status::Running;
            th.pc += 1;
        }
        self.obs.push(Obs::Released { what: what.to_string() });
        self.run_released(group.iter().copied());
    }

    // ---- operations ---------------------------------------------------------------------

    fn clock(&self) -> &[u32] {
        let n = self.p().threads.len();
        if self.agent < n {
            &self.s.threads[self.agent].clock
        } else {
            &self.s.engines[self.agent - n]
        }
    }

    fn clock_mut(&mut self) -> &mut Clock {
        let n = self.p().threads.len();
        if self.agent < n {
            &mut self.s.threads[self.agent].clock
        } else {
            &mut self.s.engines[self.agent - n]
        }
    }

    fn access(&self) -> Access {
        Access {
            agent: self.agent as u16,
            epoch: self.clock()[self.agent],
            in_completion: self.in_completion,
        }
    }

    /// Barrier usable by this agent: initialised, not invalidated, and the init is visible.
    fn live_barrier(&mut self, b: usize, what: &str) -> R<()> {
        let bs = &self.s.barriers[b];
        let name = &self.p().barriers[b].name;
        let problem = match bs.life {
            Life::Uninit => Some(format!("{} uses {name} ({what}) before it is initialised", self.label())),
            Life::Invalidated => Some(format!("{} uses {name} ({what}) after it was invalidated", self.label())),
            Life::Live => match bs.init_by {
                Some((agent, epoch)) if agent as usize != self.agent && self.clock()[agent as usize] < epoch => Some(format!(
                    "{} uses {name} ({what}) before the init by {} is visible to it (no syncthreads or other ordering in between)",
                    self.label(),
                    self.agent_label(&Access {
                        agent,
                        epoch,
                        in_completion: false
                    })
                )),
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

    fn resolve_bar(&mut self, r: &Ref, locals: Option<&[i64]>) -> R<usize> {
        let groups = &self.m.proto.barrier_groups;
        self.group_index(r, groups, locals)
    }

    fn resolve_buf(&mut self, r: &Ref, locals: Option<&[i64]>) -> R<usize> {
        let groups = &self.m.proto.buffer_groups;
        self.group_index(r, groups, locals)
    }

    fn check_range(&mut self, kind: K, value: i64, lo: i64, what: String) -> R<()> {
        if value < lo || value > MAX_COUNT {
            self.fail(kind, format!("{}: {what} is {value}, outside {lo}..={MAX_COUNT}", self.label()));
            return Err(());
        }
        Ok(())
    }

    fn op(&mut self, op: &IOp) -> R<Option<i64>> {
        self.op_with(op, None)
    }

    /// Execute one operation. `locals` is given when running a completion function.
    fn op_with(&mut self, op: &IOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        let ev = |x: &mut Exec, e: &IExpr| match locals {
            Some(l) => x.eval_with(e, l),
            None => x.eval(e),
        };
        match op {
            IOp::Arrive { bar, n, drop, expect_tx } => {
                let b = self.resolve_bar(bar, locals)?;
                let n = ev(self, n)?;
                let bytes = match expect_tx {
                    Some(e) => Some(ev(self, e)?),
                    None => None,
                };
                self.live_barrier(b, if *drop { "arrive_and_drop" } else { "arrive" })?;
                let token = self.arrive(b, n, *drop, bytes)?;
                Ok(Some(token))
            }
            IOp::Commit { bar } => {
                let b = self.resolve_bar(bar, locals)?;
                self.live_barrier(b, "commit")?;
                let Some(t) = self.thread.filter(|_| !self.in_completion) else {
                    self.broken("R-COMMIT", "a commit executed outside a thread's own code".to_string());
                    return Err(());
                };
                let w = self.p().threads[t].warp as usize;
                let seq = self.s.threads[t].commit_seq;
                // The converged lanes execute the commit as one instruction (the step is enabled
                // only once they have all reached it). Diverged groups that stand ready at the
                // same commit at the same moment may be re-converged by the hardware and issue it
                // together: the H200 then applies all their arrivals at once (synccheck: "barrier
                // overflow" on a count-1 barrier). Groups that get there at different times
                // arrive separately.
                let groups = self.m.commit_groups_at(&self.s, t, b);
                let lanes: Vec<usize> = groups.iter().flatten().copied().collect();
                let mut diverged = groups.len() > 1;
                for g in &groups {
                    let sig = self.s.threads[g[0]].path_sig(self.p().threads[g[0]].role);
                    diverged |= self.s.commit_logs[w]
                        .iter()
                        .any(|&(s2, b2, g2)| s2 == seq && b2 as usize == b && g2 != sig);
                    self.s.commit_logs[w].push((seq, b as u16, sig));
                }
                self.s.commit_logs[w].sort_unstable();
                if diverged {
                    self.fail(
                        K::Entanglement,
                        format!(
                            "{} commits to {} from a diverged warp: its lanes are split into {}, so the commit makes one arrival per group instead of one for the warp (add syncwarp before the commit)",
                            self.label(),
                            self.p().barriers[b].name,
                            if groups.len() > 1 { format!("{} groups committing together", groups.len()) } else { "several groups".to_string() }
                        ),
                    );
                }
                for &m in lanes.iter().filter(|&&m| m != t) {
                    let c = self.s.threads[m].clock.clone();
                    join_into(&mut self.s.barriers[b].clock, &c);
                    self.s.threads[m].clock[m] += 1;
                }
                self.s.threads[t].commit_seq += 1;
                let arrivals = if self.m.mutant == Some(Mutant::CommitPerLane) {
                    lanes.len()
                } else {
                    groups.len()
                };
                self.arrive(b, arrivals as i64, false, None)?;
                for &m in lanes.iter().filter(|&&m| m != t) {
                    self.obs.push(Obs::CommitJoined {
                        bar: b as u16,
                        lane: m as u16,
                    });
                    self.s.threads[m].commit_seq += 1;
                    self.s.threads[m].pc += 1;
                    if self.ended {
                        break;
                    }
                    self.run_released([m]);
                }
                Ok(None)
            }
            // The async proxy (issue 13).
            IOp::StoreAsync { .. }
            | IOp::CommitGroup
            | IOp::WaitGroup { .. }
            | IOp::Wgmma { .. }
            | IOp::WgmmaWait { .. }
            | IOp::FenceProxyAsync
            | IOp::FenceMbarrierInit => self.proxy_op(op, locals),
            IOp::Remote { target, multicast, op } => self.remote(target, *multicast, op, locals),
            IOp::Wait { bar, target, try_ } => {
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
                self.live_barrier(b, if *try_ { "try_wait" } else { "wait" })?;
                let value = ev(self, target.expr())?;
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
                if *try_ {
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
            // expect_tx raises the tx-count; complete_tx lowers it and, like a landing copy,
            // releases into the phase. Either may complete it.
            IOp::ExpectTx { bar, bytes } | IOp::CompleteTx { bar, bytes } => {
                let complete = matches!(op, IOp::CompleteTx { .. });
                let what = if complete { "complete_tx" } else { "expect_tx" };
                let b = self.resolve_bar(bar, locals)?;
                let bytes = ev(self, bytes)?;
                self.live_barrier(b, what)?;
                self.check_range(K::TxRange, bytes, 0, format!("{what} on {}", self.p().barriers[b].name))?;
                self.add_tx(b, if complete { -bytes } else { bytes })?;
                if complete {
                    self.release_into(b);
                }
                self.maybe_complete(b)?;
                Ok(None)
            }
            IOp::Copy { buf, bar, bytes, version } => {
                let d = self.resolve_buf(buf, locals)?;
                let b = self.resolve_bar(bar, locals)?;
                let bytes = match bytes {
                    Some(e) => ev(self, e)?,
                    None => self.p().buffers[d].bytes,
                };
                let version = match version {
                    Some(e) => ev(self, e)?,
                    None => self.s.buffers[d].writes as i64,
                };
                self.live_barrier(b, "copy_async")?;
                self.check_init_fenced(b)?;
                self.check_range(
                    K::TxRange,
                    bytes,
                    0,
                    format!("the byte count of the copy into {}", self.p().buffers[d].name),
                )?;
                self.write_cell(true, d, version)?;
                let cell = &mut self.s.buffers[d];
                cell.in_flight = true;
                // The engine starts from everything the issuer did before the issue.
                let issuer_clock = self.clock().to_vec();
                let n = self.p().threads.len();
                join_into(&mut self.s.engines[d], &issuer_clock);
                let issuer_known = self.known_of_agent().to_vec();
                join_known(&mut self.s.engines_known[d], &issuer_known);
                let me = self.agent;
                self.clock_mut()[me] += 1;
                let c = CopyInFlight {
                    buf: d as u16,
                    bar: b as u16,
                    bytes,
                    version,
                    issuer: self.agent.min(n - 1) as u16,
                    stmt: self.stmt,
                    kind: CopyKind::Tma,
                    offset: 0,
                    len: self.p().buffers[d].bytes,
                };
                self.s.copies.push(c);
                self.obs.push(Obs::CopyIssued {
                    buf: d as u16,
                    bar: b as u16,
                    bytes,
                    version,
                });
                Ok(None)
            }
            IOp::Read { buf, expect } => {
                let d = self.resolve_buf(buf, locals)?;
                let want = match expect {
                    Some(e) => Some(ev(self, e)?),
                    None => None,
                };
                self.read_cell(true, d)?;
                let size = self.p().buffers[d].bytes;
                let got = self.version_in(d, 0, size);
                self.obs.push(Obs::Read {
                    buf: d as u16,
                    version: got,
                });
                if let Some(w) = want {
                    if w != got {
                        let torn = if self.s.buffers[d].in_flight {
                            " (a copy into it is still in flight: torn on hardware)"
                        } else {
                            ""
                        };
                        self.fail(
                            K::StaleRead,
                            format!(
                                "{} reads {} of {} but the protocol means version {w}{torn}",
                                self.label(),
                                named::version_text(got),
                                self.p().buffers[d].name
                            ),
                        );
                    }
                }
                Ok(Some(got))
            }
            IOp::Write { buf, version } => {
                let d = self.resolve_buf(buf, locals)?;
                let v = ev(self, version)?;
                self.write_cell(true, d, v)?;
                // A generic-proxy write: the async proxy sees it only after a proxy fence.
                if self.m.tracks_proxy {
                    self.s.proxy.unfenced_write[d] = true;
                }
                self.obs.push(Obs::Wrote { buf: d as u16, version: v });
                Ok(None)
            }
            IOp::CpAsync { .. } | IOp::CpAsyncArrive { .. } | IOp::CopyPart { .. } | IOp::ReadPart { .. } => self.op_issue13(op, locals),
            IOp::Init { bar, count } => {
                let b = self.resolve_bar(bar, locals)?;
                let count = match count {
                    Some(e) => ev(self, e)?,
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
                bs.observed_prev = false;
                // Visible to the async proxy only after a fence (issue 13).
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
            IOp::Inval { bar } => {
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
        }
    }

    fn add_tx(&mut self, b: usize, delta: i64) -> R<()> {
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

    /// What the current agent knows of every barrier's phase.
    fn known_of_agent(&self) -> &[i64] {
        let n = self.p().threads.len();
        if self.agent < n {
            &self.s.threads[self.agent].known
        } else {
            &self.s.engines_known[self.agent - n]
        }
    }

    /// Publish this agent's history and phase knowledge to the barrier's current phase, then
    /// start a new epoch. Knowledge travels along every happens-before edge, the copy engine's
    /// included.
    fn release_into(&mut self, b: usize) {
        let c = self.clock().to_vec();
        join_into(&mut self.s.barriers[b].clock, &c);
        let k = self.known_of_agent().to_vec();
        join_known(&mut self.s.barriers[b].known, &k);
        let me = self.agent;
        self.clock_mut()[me] += 1;
    }

    fn arrive(&mut self, b: usize, n: i64, drop: bool, expect_tx: Option<i64>) -> R<i64> {
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

    fn maybe_complete_after_arrival(&mut self, b: usize) -> R<()> {
        let bs = &self.s.barriers[b];
        if bs.pending == 0 && bs.tx == 0 {
            self.complete(b)
        } else {
            self.release_into(b);
            Ok(())
        }
    }

    fn maybe_complete(&mut self, b: usize) -> R<()> {
        let bs = &self.s.barriers[b];
        if bs.pending == 0 && bs.tx == 0 {
            self.complete(b)
        } else {
            Ok(())
        }
    }

    /// Phase completion: the completion function runs first, in the completing agent, having
    /// seen every arrival of the phase; then the phase advances and waiters may acquire it.
    fn complete(&mut self, b: usize) -> R<()> {
        if let Some(ci) = self.p().barriers[b].completion {
            let phase_clock = self.s.barriers[b].clock.clone();
            join_into(self.clock_mut(), &phase_clock);
            if self.m.mutant != Some(Mutant::CompletionNeverRuns) {
                self.run_completion(ci as usize, b)?;
            }
        }
        self.release_into(b);
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

    fn run_completion(&mut self, ci: usize, b: usize) -> R<()> {
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
                    if let IOp::Wait { try_: false, .. } = op {
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

    /// `part` bytes of the copy land: its barrier's tx-count reaches zero while the rest of the
    /// copy is still in flight (the buffer stays under the copy).
    fn land_part(&mut self, c: CopyInFlight, part: i64) {
        let n = self.p().threads.len();
        let (d, b) = (c.buf as usize, c.bar as usize);
        self.agent = n + d;
        self.thread = None;
        self.obs.push(Obs::LandedPart {
            buf: c.buf,
            bar: c.bar,
            bytes: part,
        });
        if self.add_tx(b, -part).is_err() {
            return;
        }
        self.release_into(b);
        let _ = self.maybe_complete(b);
    }

    fn land(&mut self, c: CopyInFlight) {
        let n = self.p().threads.len();
        let (d, b) = (c.buf as usize, c.bar as usize);
        self.agent = n + d;
        self.thread = None;
        if c.kind != CopyKind::Tma || self.s.buffers[d].parts.len() > 0 || c.len != self.p().buffers[d].bytes {
            // Issue 13: a cp.async copy, or a copy into part of the buffer.
            self.land_issue13(c);
            return;
        }
        // Another copy into the same buffer may still be in flight (issuing it was already a
        // data race): the buffer stays under that one.
        let still = self.s.copies.iter().any(|o| o.is_copy() && o.buf as usize == d);
        let cell = &mut self.s.buffers[d];
        cell.value = c.version;
        cell.in_flight = still;
        self.s.proxy.unfenced_write[d] = false;
        let cell = &mut self.s.buffers[d];
        cell.reads.clear();
        cell.last_write = Some(Access {
            agent: (n + d) as u16,
            epoch: self.s.engines[d][n + d],
            in_completion: false,
        });
        self.obs.push(Obs::Landed {
            buf: c.buf,
            bar: c.bar,
            bytes: c.bytes,
            version: c.version,
        });
        self.land_on_barrier(b, d, c.bytes);
    }

    /// A copy into buffer `d` lands `bytes` on barrier `b`: complete_tx on a live barrier (a
    /// landing on one that is not is a lifetime violation), its issuer's writes released into
    /// the phase, which may complete.
    pub(crate) fn land_on_barrier(&mut self, b: usize, d: usize, bytes: i64) {
        if self.s.barriers[b].life != Life::Live {
            let name = self.p().barriers[b].name.clone();
            self.fail(
                K::Lifetime,
                format!(
                    "the async copy into {} lands on {name}, which is no longer a live barrier",
                    self.p().buffers[d].name
                ),
            );
            return;
        }
        if self.add_tx(b, -bytes).is_err() {
            return;
        }
        self.release_into(b);
        let _ = self.maybe_complete(b);
    }

    // ---- races --------------------------------------------------------------------------

    fn cell_name(&self, is_buf: bool, i: usize) -> String {
        if is_buf {
            self.p().buffers[i].name.clone()
        } else {
            self.p().vars[i].name.clone()
        }
    }

    fn agent_label(&self, a: &Access) -> String {
        let p = self.p();
        let n = p.threads.len();
        let who = if (a.agent as usize) < n {
            p.thread_label(a.agent as usize)
        } else {
            format!("the async copy into {}", p.buffers[a.agent as usize - n].name)
        };
        if a.in_completion {
            format!("the completion function run by {who}")
        } else {
            who
        }
    }

    fn race(&mut self, is_buf: bool, i: usize, mine: &str, other: Option<&Access>, other_what: &str) {
        let completion = self.in_completion || other.is_some_and(|a| a.in_completion);
        let who = match other {
            Some(a) => self.agent_label(a),
            None => "an async copy still in flight".to_string(),
        };
        let msg = format!(
            "{} {mine} {} with no happens-before to the {other_what} by {who}",
            self.label(),
            self.cell_name(is_buf, i)
        );
        self.fail(if completion { K::CompletionMisuse } else { K::DataRace }, msg);
    }

    /// A read of a buffer or var: must be ordered after the last write and not under a copy.
    fn read_cell(&mut self, is_buf: bool, i: usize) -> R<()> {
        if is_buf && !self.s.buffers[i].parts.is_empty() {
            // Issue 13: the buffer has per range records; a whole read reads every range.
            let size = self.p().buffers[i].bytes;
            return self.read_range(i, 0, size);
        }
        let cell = if is_buf { &self.s.buffers[i] } else { &self.s.vars[i] };
        let me = self.agent as u16;
        if cell.in_flight {
            let who = self
                .s
                .copies
                .iter()
                .find(|c| c.is_copy() && c.buf as usize == i)
                .map(|c| self.p().thread_label(c.issuer as usize))
                .unwrap_or_default();
            let msg = format!(
                "{} reads {} before the async copy into it (issued by {who}) has landed and been waited for",
                self.label(),
                self.cell_name(is_buf, i)
            );
            self.fail(if self.in_completion { K::CompletionMisuse } else { K::DataRace }, msg);
        } else if let Some(w) = cell.last_write.filter(|w| w.agent != me && !ordered_before(w, self.clock())) {
            self.race(is_buf, i, "reads", Some(&w), "last write");
        }
        let acc = self.access();
        let cell = if is_buf { &mut self.s.buffers[i] } else { &mut self.s.vars[i] };
        match cell.reads.binary_search_by_key(&acc.agent, |a| a.agent) {
            Ok(k) => cell.reads[k] = acc,
            Err(k) => cell.reads.insert(k, acc),
        }
        Ok(())
    }

    fn write_var(&mut self, v: usize, value: i64) -> R<()> {
        self.write_cell(false, v, value)
    }

    /// A write (or a copy issue): ordered after the last write and after every read since.
    fn write_cell(&mut self, is_buf: bool, i: usize, value: i64) -> R<()> {
        if is_buf {
            self.check_async_reads(i);
        }
        if is_buf && !self.s.buffers[i].parts.is_empty() {
            // Issue 13: a whole write (or copy issue) replaces every range's record.
            let size = self.p().buffers[i].bytes;
            return self.write_range(i, 0, size, value);
        }
        let cell = if is_buf { &self.s.buffers[i] } else { &self.s.vars[i] };
        let me = self.agent as u16;
        if cell.in_flight {
            let msg = format!(
                "{} overwrites {} while an async copy into it is still in flight",
                self.label(),
                self.cell_name(is_buf, i)
            );
            self.fail(if self.in_completion { K::CompletionMisuse } else { K::DataRace }, msg);
        } else if let Some(w) = cell.last_write.filter(|w| w.agent != me && !ordered_before(w, self.clock())) {
            self.race(is_buf, i, "overwrites", Some(&w), "last write");
        } else if let Some(r) = cell
            .reads
            .iter()
            .find(|r| r.agent != me && !ordered_before(r, self.clock()))
            .copied()
        {
            self.race(is_buf, i, "overwrites", Some(&r), "read (the slot was not released)");
        }
        let acc = self.access();
        let cell = if is_buf { &mut self.s.buffers[i] } else { &mut self.s.vars[i] };
        cell.value = value;
        cell.writes += 1;
        cell.last_write = Some(acc);
        cell.reads.clear();
        Ok(())
    }
}
