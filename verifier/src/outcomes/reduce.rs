//! The enumeration through the engine's partial-order reduction: a state of the widened machine
//! is expanded by the model's persistent set (`Footprints::persistent`, docs/model.md) when that
//! set passes the checks below, else by every move.
//!
//! # Why the outcomes are kept
//!
//! Take the widened machine with the observations made so far as part of its state (the fold
//! keeps them out of its memo key, but they ride along every path). An allowed outcome is a
//! function of an execution's *end*: a terminal state (every thread exited or stuck, with the
//! observations and the end probes), or an undefined-behaviour step `u` with the observations
//! made before it (its pattern). Neither records the global order of the steps. So it is enough
//! that from every state the reduced search keeps, for every path `π` of the full machine from it
//! to an end, some reduced path reaches an end with the same outcome. The model's footprints
//! make two steps of different agents whose footprints do not conflict *independent*: both orders
//! are possible and reach the same model state with the same violations. A set `P(s)` is
//! expanded alone only when
//!
//! - **C1** it is persistent for the model (`Footprints::persistent`): no execution from `s` made
//!   of steps outside `P(s)` has a step dependent on one in it;
//! - **no timeout**: no blocked thread's wait may time out in `s` (no `Move::Timeout` is offered).
//!   Timeouts are offered only once the CTA has been quiet (nothing enabled), and stay offered
//!   until the armed thread moves: those states are expanded in full. Since a step of `P(s)`
//!   stays enabled along any path of steps independent of it, such a path never makes the CTA
//!   quiet, so it arms nobody: the bookkeeping `armed`/`hung` is per thread and changed by that
//!   thread's own moves only;
//! - **clean**: every step of `P(s)` reaches a state (no undefined behaviour, not cut by the step
//!   budget) and observes nothing (no recorded read, try_wait or token, no completion run);
//! - **co-issued lanes together**: a thread in `P(s)` whose role arrives on mbarriers has every
//!   running lane of its warp, role and CTA in `P(s)` too. The widened machine makes a lane's
//!   arrival undefined when the lanes of its warp standing at the same instruction would overflow
//!   the phase as one batched update (`Machine::co_issued_past_pending`): whether it does depends
//!   on where the warp's other lanes stand, which their own steps change without any footprint
//!   conflict. Those lanes are thus dependent on each other's arrivals, and are kept together;
//! - **no `while`**: the fold's graph is then acyclic (every execution is finite), which the
//!   argument for undefined behaviour below needs (a persistent set can postpone a step around a
//!   cycle forever: the "ignoring" problem). A protocol with a loop is expanded in full even if the
//!   model's reduction applies to it.
//!
//! The widened machine's own bookkeeping commutes with independent steps: `versions` (per buffer)
//! changes at writes and copy issues, which conflict with every access of the buffer; `racy`
//! (per buffer) is set by a racing step on the buffer, whose racing is decided by its footprint,
//! and only widens: a racy buffer's read returns the model's value or others, so a step that
//! sets it, moved earlier past an independent read, only adds values the read may return (two
//! reads of one buffer are independent, and a racing one makes the other's values wider; every
//! rearrangement below only moves steps earlier). Completion runs are counted per barrier,
//! an addition.
//!
//! *Terminal ends.* Let `π` lead from `s` (expanded by a proper `P(s)`) to a terminal state `d`.
//! If some step of `π` is in `P(s)`, the first such one, `t`, is independent of the steps before
//! it and commutes to the front: the reduced search takes `t`, and `π` minus `t` leads from
//! there to `d`, one step shorter. Otherwise a step `q` of `P(s)` is independent of every step
//! of `π`, so it is still enabled in `d`: `d` is not terminal. By induction on `π`'s length
//! the reduced search reaches `d` itself, observations included.
//!
//! *Undefined behaviour.* Let `π = w·u` lead from `s` to an undefined step `u` (pattern: the
//! observations before `u`). If `s` is expanded in full, the search takes `π`'s first step. If
//! the first step of `π` in `P(s)` is in `w`, it commutes to the front as above, and the
//! observations before `u` are the same steps' (each thread's in the same order). It is never
//! `u` itself: `u` is independent of the steps of `w`, so it is undefined in `s` too, and a
//! set with an undefined step is not clean. If no step of `π` is in `P(s)`, the search takes a
//! step `q` of `P(s)`, independent of all of `π`: `q·π` is a path that reaches `u` with the
//! same observations before it, because `q` observes nothing (clean). This is where the
//! argument needs `P(s)` to observe nothing: `u` may come before `q` in the full machine, and a
//! pattern with `q`'s observation in its prefix admits fewer outcomes. Each case moves to a
//! successor of `s`, and the graph is finite and acyclic: the reduced search reaches `u` with
//! `π`'s pattern. `Lifetime` when every thread has exited under a copy in flight, and the warp
//! collective's `assertion`, are properties of a state, as terminal states are: a step of
//! `P(s)` keeps a thread running (or is a landing, dependent on the exit that ends the last
//! thread), or stays enabled, respectively.
//!
//! So the reduced set of outcomes, undefined-behaviour patterns and end probes equals the
//! unreduced one exactly; `tests.rs` checks it on the library and on generated protocols, and a
//! planted footprint that forgets conflicts (`Mutant::PorIgnoresConflicts`) changes it.
//!
//! *Where it does not apply* (full expansion, and why): every protocol the model's reduction does
//! not apply to (docs/model.md, "Where it applies": `syncthreads`, the warp-batched `commit`,
//! `cp_async`, byte ranges, clusters, more than 256 objects); a protocol with a `while` loop
//! ([`Reduction::new`]); a state where a timeout is offered, where the model's set has a step that
//! observes something or ends the execution, or where a lane that arrives on mbarriers is in the
//! set without the other running lanes of its warp ([`Reduction::persistent`]).

use super::machine::{Machine, Move};
use phasecheck_model::program::ir::InstrKind;
use phasecheck_model::rt::footprint::PhaseEffect;
use phasecheck_model::rt::state::{State, Status};
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::ts::TransitionSystem;

/// Whether, and how, the enumeration reduces.
pub(super) struct Reduction {
    on: bool,
    /// Per role: its lanes share a warp with lanes of the same role and it arrives on mbarriers,
    /// so its lanes' arrivals may be co-issued (see the module docs).
    co_issuing: Vec<bool>,
}

impl Reduction {
    pub(super) fn new(m: &Machine, on: bool) -> Reduction {
        let p = &m.model.proto;
        let looping = p.roles.iter().any(|r| r.code.has_while) || p.completions.iter().any(|c| c.has_while);
        let co_issuing = p
            .roles
            .iter()
            .enumerate()
            .map(|(ri, r)| {
                let arrives = r.code.instrs.iter().any(|i| match &i.kind {
                    InstrKind::Op { op, .. } => matches!(op.touch().phase, PhaseEffect::Arrives(_)),
                    _ => false,
                });
                let shares_warp = p.threads.iter().enumerate().any(|(t, me)| {
                    me.role as usize == ri
                        && p.threads[t + 1..]
                            .iter()
                            .any(|o| o.role == me.role && o.warp == me.warp && o.cta == me.cta)
                });
                arrives && shares_warp
            })
            .collect();
        Reduction {
            on: on && !looping,
            co_issuing,
        }
    }

    /// The model's persistent subset of `moves` in `s` and the moves left out, when the set
    /// passes the checks of the module docs that can be made before stepping (no timeout offered,
    /// co-issued lanes together); the caller still checks that the set is clean.
    pub(super) fn persistent(&self, m: &Machine, s: &State, moves: &[Move]) -> Option<(Vec<Move>, Vec<Move>)> {
        if !self.on || moves.len() < 2 {
            return None;
        }
        let mut actions = Vec::with_capacity(moves.len());
        for mv in moves {
            match mv {
                Move::Model(a) => actions.push(*a),
                Move::Timeout(_) => return None,
            }
        }
        let mut set = Vec::new();
        if !<Model as TransitionSystem>::persistent(&m.model, s, &actions, &mut set) || set.len() >= actions.len() {
            return None;
        }
        let p = &m.model.proto;
        for a in &set {
            let Action::Thread(t) = *a else { continue };
            let me = &p.threads[t as usize];
            if !self.co_issuing[me.role as usize] {
                continue;
            }
            let apart = p.threads.iter().enumerate().any(|(v, o)| {
                v != t as usize
                    && o.role == me.role
                    && o.warp == me.warp
                    && o.cta == me.cta
                    && s.threads[v].status == Status::Running
                    && !set.contains(&Action::Thread(v as u16))
            });
            if apart {
                return None;
            }
        }
        let (inside, outside): (Vec<Move>, Vec<Move>) = moves.iter().partition(|mv| match mv {
            Move::Model(a) => set.contains(a),
            Move::Timeout(_) => false,
        });
        Some((inside, outside))
    }
}
