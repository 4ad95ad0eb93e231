//! The transition relation: which actions a state enables and what each one does.
//!
//! The shape follows stateright's `Model`: `init`, `actions`, `step`, and state properties
//! (`state_violations`). An action is one visible instruction of one thread (with the local
//! instructions that follow it), or the landing of one async copy. Violations found on the way are
//! returned with the successor; kinds that are undefined behaviour end the execution.
//!
//! This file holds what every object shares: the action and its outcome, the executor `Exec`,
//! the one loop over local instructions (`run_local`), and the one instruction dispatch
//! (`exec_visible`, and `op_with` for operations), which calls into one file per hardware object:
//! each owns its state record and its step rules (`impl Exec` blocks live in several files).
//!
//! - `thread.rs`: a thread's record, branches, a thread that can only spin;
//! - `mbarrier.rs`: init/inval, arrive/drop, the tx-count, phase completion, completion functions,
//!   waits and parity;
//! - `copies.rs`: async copies in flight, whole and partial landing, cp.async and its arrive-on;
//! - `memory.rs`: buffers, shared vars, byte ranges, happens-before, phase knowledge, races;
//! - `warp.rs`: `syncthreads`, `syncwarp`, `elect()`, the warp-batched `commit`;
//! - `named.rs`: named barriers (`bar_sync`/`bar_arrive`);
//! - `cluster.rs`: cluster scope (remote and multicast operations, the cluster barrier);
//! - `proxy.rs`: the async proxy (TMA stores, wgmma operand reads, proxy fences);
//! - `tcgen05.rs`: Blackwell's tcgen05 MMA and commit, tensor memory, cluster launch control;
//! - `uniform_agent.rs`: one agent standing for the lanes of a warp-uniform role.
//!
//! Engine-facing parts that span objects: `state.rs` (the whole state, assembled from the
//! records), `symmetry.rs` and `pack.rs` (the canonical form and the wire format of a stored
//! state), `footprint.rs` (the partial-order reduction), `selfcheck.rs` (the invariants
//! re-derived after a step, with `--self-check` and in tests), `mutant.rs` (planted defects), `path.rs` (the one replay).
//!
//! A new statement of the language: its node in `lang::ast`, its syntax in `lang::parser`, its
//! printing in `lang::pretty`, its static checks in `lang::check`, its instruction in
//! `program::ir` lowered in `program::lower`/`program::code`, and its semantics here: one arm of
//! the dispatch calling a method in the `rt/<object>.rs` whose state it changes (then its
//! packing in `pack.rs` if it adds state, and its footprint in `footprint.rs`).

use crate::lang::ast::Span;
use crate::program::ir::*;
use crate::ViolationKind as K;
use state::*;

mod cluster;
pub mod copies;
pub mod footprint;
pub mod mbarrier;
pub mod memory;
pub mod mutant;
mod named;
pub mod pack;
pub mod path;
pub mod proxy;
pub mod selfcheck;
pub mod state;
pub mod symmetry;
pub mod tcgen05;
pub mod thread;
mod uniform_agent;
pub mod warp;

pub use copies::{land_part_bytes, LAND_CHUNK};
pub use mbarrier::{hardware_complete, WaitCheck};
pub use mutant::Mutant;
pub use named::{named_len, NAMED_BARRIERS};
use warp::roles_with_commit;

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
    /// A warp arrived at named barrier `id` (`arrived` of `count` threads so far).
    NamedArrived {
        id: u16,
        warp: u16,
        arrived: i64,
        count: i64,
    },
    /// Named barrier `id` completed and released its waiting threads.
    NamedCompleted {
        id: u16,
    },
    /// `cp_async_arrive` (without `.noinc`) raised the pending count of `bar` by
    /// `delta` (1); its arrive-on is an ordinary arrival (`Arrived`) when the copies land.
    CpAsyncPending {
        bar: u16,
        delta: i64,
    },
    // The async proxy.
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
    /// The protocol uses the async proxy: only then is `State::proxy` kept (and
    /// packed); elsewhere it stays empty and costs nothing.
    pub(crate) tracks_proxy: bool,
    /// The protocol uses named barriers: only then is `State::named` packed.
    pub(crate) tracks_named: bool,
    /// The length of `ProxyState::tmem` (0 without a Blackwell statement; rt/tcgen05.rs).
    pub(crate) tmem_len: usize,
    /// Classes of interchangeable threads (symmetry.rs).
    pub(crate) symmetry: Vec<Vec<usize>>,
    /// The threads of each model warp, in lane order.
    warps: Vec<Vec<usize>>,
    /// Static footprints for the partial-order reduction (footprint.rs).
    pub por: footprint::Footprints,
}

impl Model {
    pub fn new(proto: Protocol) -> Model {
        let por = footprint::Footprints::new(&proto, false);
        let mut m = Model {
            tracks_path: roles_with_commit(&proto),
            tracks_proxy: proxy::uses_async_proxy(&proto),
            // The named barriers, or the cluster barrier, which shares their state component.
            tracks_named: named::named_len(&proto) > 0,
            tmem_len: tcgen05::tmem_len(&proto),
            proto,
            fine_grained: false,
            mutant: None,
            symmetry: Vec::new(),
            warps: Vec::new(),
            por,
        };
        m.warps = (0..m.proto.warp_count()).map(|w| m.proto.warp_members(w).collect()).collect();
        m.symmetry = symmetry::symmetry_classes(&m.proto);
        m
    }

    pub fn fine_grained(proto: Protocol) -> Model {
        let por = footprint::Footprints::new(&proto, true);
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
                clock: {
                    // A CTA's threads start after its barrier inits (cluster scope: its init agent).
                    let mut c = fresh_clock(Some(t));
                    if let Some(i) = p.init_agent(p.threads[t].cta as usize) {
                        c[i] = 1;
                    }
                    c
                },
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
                    init_pub: 0,
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
            unfenced: false,
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
                unfenced_init: vec![false; p.barriers.len()].into_boxed_slice(),
                tmem: vec![0; self.tmem_len].into_boxed_slice(),
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

    /// Whether a running thread `t` can take its next step in `s` (nothing it stands at
    /// blocks it).
    pub(crate) fn runs(&self, s: &State, t: usize) -> bool {
        matches!(self.wait_check(s, t), WaitCheck::NotAWait | WaitCheck::Ready)
            && self.commit_ready(s, t)
            && self.warpgroup_wait_ready(s, t)
            && self.tmem_alloc_ready(s, t)
    }

    /// Enabled actions, threads first (in index order), then landings.
    pub fn actions(&self, s: &State, out: &mut Vec<Action>) {
        for (t, th) in s.threads.iter().enumerate() {
            if th.status == Status::Running && self.runs(s, t) {
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
            // An arrive-on fires with the landing that completes its copies; a
            // cp.async copy has no tx-count to land in part against.
            match c.kind {
                CopyKind::ArriveOn { .. } | CopyKind::MmaRead | CopyKind::MmaCommit | CopyKind::SrcRead => continue,
                // A thread's MMAs complete in issue order.
                CopyKind::Mma => {
                    if !s.copies[..i].iter().any(|o| o.kind == CopyKind::Mma && o.issuer == c.issuer) {
                        out.push(Action::Land(i as u16));
                    }
                    continue;
                }
                CopyKind::CpAsync { .. } => {
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

    /// A CTA of a cluster has exited while an async copy is still in flight into its shared
    /// memory or reads from it: the `lifetime` of `state_violations`, for the outcome enumeration,
    /// which must end an execution there (a runtime or the hardware may fault at that exit,
    /// before any later step of the peers).
    pub fn cluster_exit_in_flight(&self, s: &State) -> bool {
        self.cluster_lifetime(s).is_some()
    }

    /// Violations that belong to a state rather than a step: a deadlock, the CTA exiting with
    /// copies still in flight, a blocked wait whose token or parity has gone stale.
    pub fn state_violations(&self, s: &State, enabled: &[Action]) -> Vec<Violation> {
        let p = &self.proto;
        let mut out = Vec::new();
        if let Some(v) = self.tmem_at_exit(s) {
            out.push(v);
            return out;
        }
        if s.all_done() && !s.copies.is_empty() {
            // A source read is always followed by its copy: name the copy.
            let c = s.copies.iter().find(|c| c.kind != CopyKind::SrcRead).unwrap_or(&s.copies[0]);
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
        // The async proxy: shared memory released under a read still in flight.
        if let Some(r) = s.proxy.reads.iter().find(|r| r.done == 0).filter(|_| s.all_done()) {
            out.push(Violation {
                kind: K::Lifetime,
                message: format!(
                    "every thread has exited while {} issued by {} still reads {} (no {} retired it); the CTA's shared memory is released under it",
                    if r.warpgroup { "a warpgroup_mma" } else if r.wgmma { "a wgmma_async" } else { "a TMA store" },
                    p.thread_label(r.issuer as usize),
                    p.buffers[r.buf as usize].name,
                    if r.warpgroup { "warpgroup_wait" } else if r.wgmma { "wgmma_wait" } else { "wait_group / wait_group_read" }
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
            // The cheap half first: a landing or a thread without a `while` loop ends it.
            && enabled.iter().all(|a| matches!(a, Action::Thread(t) if self.proto.code_of(*t as usize).has_while))
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

    pub fn step(&self, s: &State, a: Action) -> Outcome {
        self.step_on(s, a, s.clone())
    }

    /// `step`, writing the successor into `spare` (a state no longer needed, typically an
    /// earlier successor) instead of a fresh copy, so that its heap blocks are reused.
    pub fn step_reusing(&self, s: &State, a: Action, spare: Option<State>) -> Outcome {
        match spare {
            Some(mut n) => {
                state::Refill::refill(&mut n, s);
                self.step_on(s, a, n)
            }
            None => self.step(s, a),
        }
    }

    /// The step of `a` from `s`, applied to `copy` (equal to `s`, which only a debug build
    /// checks: the engine makes copies by `restore`).
    pub fn step_on_copy(&self, s: &State, a: Action, copy: State) -> Outcome {
        debug_assert!(copy == *s, "a copy to step on equals the state");
        self.step_on(s, a, copy)
    }

    /// The step of `a` from `s`, applied to `copy` (equal to `s`).
    fn step_on(&self, s: &State, a: Action, copy: State) -> Outcome {
        let mut x = Exec::new(self, copy);
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
                let c = x.s.copies[i as usize].clone();
                let part = land_part_bytes(x.s.barriers[c.bar as usize].tx, c.bytes);
                x.s.copies[i as usize].bytes -= part;
                let (span, issuer) = (c.stmt, c.issuer);
                x.land_part(c, part);
                x.event(a, issuer, u32::MAX, span)
            }
            Action::Land(i) => {
                let c = x.s.copies.remove(i as usize);
                x.land_index = i as usize;
                let (span, issuer) = (c.stmt, c.issuer);
                x.land(c);
                x.event(a, issuer, u32::MAX, span)
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
    /// The index in `State::copies` of the copy landing in this step.
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
            tcgen05::engine_label(p, self.agent - p.threads.len())
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
        self.eval_as(e, locals, me)
    }

    /// `e` evaluated with the identity `me` (a uniform agent evaluates a per-lane offset once
    /// for each of its lanes, each with its own `lane`, `tid` and `gtid`).
    fn eval_as(&mut self, e: &IExpr, locals: &[i64], me: Option<ThreadInfo>) -> R<i64> {
        let r = e.eval(locals, me.as_ref(), &mut |v| {
            let v = v as usize;
            let _ = self.read_cell(false, v);
            Ok(self.s.vars[v].value)
        });
        self.evaluated(r)
    }

    /// An evaluation's value, or its fault reported.
    fn evaluated(&mut self, r: Result<i64, EvalError>) -> R<i64> {
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
        if !e.reads_var() {
            // Nothing is recorded on the state: the thread's locals are read where they are
            // (a var read records itself, hence the copy below; most expressions read none).
            let me = self.p().threads[t];
            let r = e.eval(&self.s.threads[t].locals, Some(&me), &mut |_| Err(EvalError::NoVar));
            return self.evaluated(r);
        }
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
            InstrKind::ClusterArrive { slot, relaxed } => self.cluster_arrive(t, *slot as usize, *relaxed),
            InstrKind::ClusterWait { slot } => self.cluster_wait(t, *slot as usize),
            // Steps of their own only in the fine-grained model.
            InstrKind::Jump { to } => self.s.threads[t].pc = to.wrapping_sub(1),
            InstrKind::Return => self.s.threads[t].status = Status::Done,
        }
    }

    /// Release execution barriers whose participants have all arrived. Exited threads do not
    /// participate, so a thread exiting can release the others.
    fn settle(&mut self) {
        // One release at a time, in this order, until nothing moves: a release runs the released
        // threads' local code, which may bring them to another barrier.
        while !self.ended {
            let moved = self.settle_syncthreads() || self.settle_cluster() || self.settle_named() || self.settle_syncwarp();
            if !moved {
                return;
            }
        }
    }

    // ---- operations ---------------------------------------------------------------------

    fn check_range(&mut self, kind: K, value: i64, lo: i64, what: String) -> R<()> {
        if value < lo || value > MAX_COUNT {
            self.fail(kind, format!("{}: {what} is {value}, outside {lo}..={MAX_COUNT}", self.label()));
            return Err(());
        }
        Ok(())
    }

    /// Evaluate an operand: in a completion function over its `locals`, else over the thread's.
    fn ev(&mut self, e: &IExpr, locals: Option<&[i64]>) -> R<i64> {
        match locals {
            Some(l) => self.eval_with(e, l),
            None => self.eval(e),
        }
    }

    fn op(&mut self, op: &IOp) -> R<Option<i64>> {
        self.op_with(op, None)
    }

    /// Execute one operation: the one dispatch, to the object whose state the operation changes.
    /// `locals` is given when running a completion function.
    fn op_with(&mut self, op: &IOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        match op {
            IOp::Mbar(op) => self.mbar_op(op, locals),
            IOp::Copy(op) => self.copy_op(op, locals),
            IOp::Mem(op) => self.mem_op(op, locals),
            IOp::Warp(op) => self.warp_op(op, locals),
            IOp::Proxy(op) => self.proxy_op(op, locals),
            IOp::Tc(op) => self.tc_op(op, locals),
            IOp::Remote { target, multicast, op } => self.remote(target, *multicast, op, locals),
        }
    }

    fn agent_label(&self, a: &Access) -> String {
        let p = self.p();
        let n = p.threads.len();
        let who = if (a.agent as usize) < n {
            p.thread_label(a.agent as usize)
        } else {
            tcgen05::engine_label(p, a.agent as usize - n)
        };
        if a.in_completion {
            format!("the completion function run by {who}")
        } else {
            who
        }
    }
}
