//! Warp-uniform roles (`role R warps N uniform`, docs/model.md): one model thread (agent) stands
//! for its warp's lanes, and the kernel runs it as those lanes, so the silicon makes every per-lane
//! contribution the model counts. The choices (`prelude/uniform.cuh`, docs/hardware-notes.md):
//! - *Mapping.* Agent t's lanes are hardware lanes 0..warp_size of its model warp's hardware warp
//!   (the agent owns that warp); `blockDim.x` counts every lane, `model_thread[]` maps each lane to
//!   t, and `who[t]` stays the agent's identity (lane 0), which every lane evaluates expressions
//!   with. Records stay one per agent (`Kernel::threads`; `Kernel::lanes` says how many lanes
//!   each runs as); the block's results gain one word per model thread: the agent's lanes that
//!   observed something else than lane 0 (the model's lockstep assumption failing).
//! - *Lockstep.* Every model step of the agent is: the lanes meet (bounded), lane 0 (the leader)
//!   holds the turn in replay, every lane does its part, the lanes meet, the leader ends the
//!   turn. So no lane starts a step before every lane finished the previous one; within a step
//!   the lanes run concurrently, each after its own pause when running free. Exited lanes are not
//!   waited for. What the model does once for the warp (bulk and wgmma groups, TMA stores) the
//!   leader does; arrivals are the leader's first, then the others', so all keep the first
//!   arrival's token; try_wait answers, visible branch decisions and visible var reads are the
//!   leader's for every lane (each lane's own goes into its observation hash); a shared-var
//!   assignment is computed by every lane before any of them writes it.
//! - *Records.* Outside elected blocks the leader writes the record and every lane counts and
//!   hashes the observations; the last lane out writes the header and compares the hashes.
//! - *Elected blocks.* `elect()` is a real `elect.sync` over the live lanes between meets; the
//!   elected lane takes the release turn and runs the block with ordinary single-thread code and
//!   its own turns, the others wait at the block's end (bounded by the elected lane's progress),
//!   then take over its record counters, replay position and status (a hang in the block stops
//!   the whole agent, as the model's timeout move has it).
//! - *End probes* run once every hardware thread has exited (`NL` of them).
//!
//! The helpers sit in each such kernel's body behind an include guard, so the shared prelude and
//! the kernels of specs without uniform roles are unchanged. A uniform role with a warp-batched
//! `commit` is not expressible.

use super::{Backend, Gen, NotExpressible};
use phasecheck_model::program::ir::*;
use phasecheck_verifier::outcomes::Recorded;
use std::collections::HashSet;

/// Per model thread, the hardware threads it runs as (`Kernel::lanes`).
pub fn thread_lanes(p: &Protocol) -> Vec<u32> {
    p.threads
        .iter()
        .map(|t| if p.roles[t.role as usize].uniform { p.warp_size } else { 1 })
        .collect()
}

/// The protocol has a warp-uniform role: its kernel runs agents as warps (`prelude/uniform.cuh`).
pub fn has_uniform(p: &Protocol) -> bool {
    p.roles.iter().any(|r| r.uniform)
}

/// Shared memory of one agent's lane bookkeeping (`PcUAgent`), rounded up.
pub(super) const UNIFORM_AGENT_BYTES: usize = 1280;

/// An agent's lanes are the hardware lanes 0..warp_size of its model warp's hardware warp, so that
/// warp must hold nothing else (the language makes uniform roles whole warps; this guards it).
pub(super) fn uniform_layout(p: &Protocol) -> Result<(), NotExpressible> {
    for (t, ti) in p.threads.iter().enumerate() {
        let role = &p.roles[ti.role as usize];
        if role.uniform && (ti.lane != 0 || p.warp_members(ti.warp as usize).any(|m| m != t)) {
            return Err(NotExpressible(format!(
                "an agent of uniform role {} does not own its warp: its lanes must be a whole hardware warp's first lanes",
                role.name
            )));
        }
    }
    Ok(())
}

impl Gen<'_> {
    /// An operation on an agent's lanes that is not "every lane does it": an arrival (every
    /// lane arrives, the agent keeps the first token) or what the warp's lanes share (the leader
    /// does it once, while the others wait at the step's end). `None` for the others.
    pub(super) fn op_lanes(
        &mut self,
        code: &Code,
        op: &IOp,
        result: Option<u16>,
        token_slots: &HashSet<u16>,
        rec: Option<Recorded>,
    ) -> Option<Result<(), NotExpressible>> {
        match op {
            IOp::Mbar(MbarOp::Arrive { drop: false, .. }) => Some(self.arrive_lanes(code, op, result, rec)),
            op if super::proxy::shared_by_the_warp(op) => {
                // What the warp's lanes share is done once (docs/model.md): by the leader, while
                // the others wait at the step's end.
                self.w("  if (u.lane == 0) {  // once for the warp");
                self.lanes = false;
                let r = self.op(code, op, result, token_slots, rec);
                self.lanes = true;
                self.w("  }");
                Some(r)
            }
            _ => None,
        }
    }

    /// Hardware threads model thread `t` runs as.
    pub(super) fn lanes_of(&self, t: usize) -> usize {
        if self.p.roles[self.p.threads[t].role as usize].uniform {
            self.p.warp_size as usize
        } else {
            1
        }
    }

    /// An arrival (with or without expect_tx) on every lane of an agent: each lane arrives, as the
    /// model applies it once per lane. The leader arrives first and the others after a meet, so
    /// the token every lane keeps (the leader's) is the first arrival's, as the model keeps the
    /// first lane's: when the lanes' arrivals span phases, later lanes' tokens name later ones.
    pub(super) fn arrive_lanes(&mut self, code: &Code, op: &IOp, result: Option<u16>, rec: Option<Recorded>) -> Result<(), NotExpressible> {
        let IOp::Mbar(MbarOp::Arrive { bar, n, expect_tx, .. }) = op else {
            unreachable!("only arrivals come here")
        };
        let libcu = self.backend == Backend::Libcu;
        let b = self.placed(code, bar, true, "  ");
        let n = self.expr(code, n);
        let call = match (libcu, expect_tx) {
            (false, Some(tx)) => format!("pc_mbar_arrive_expect_tx(&{b}, (int){})", self.expr(code, tx)),
            (false, None) => format!("pc_mbar_arrive(&{b}, (int){n})"),
            (true, Some(tx)) => format!(
                "cuda::device::barrier_arrive_tx({b}, (ptrdiff_t){n}, (ptrdiff_t){})",
                self.expr(code, tx)
            ),
            (true, None) => format!("{b}.arrive((ptrdiff_t){n})"),
        };
        let parity = if libcu && self.is_software(bar) {
            "(int)(bool)tok".to_string()
        } else {
            "pc_state_parity((u64)tok)".to_string()
        };
        self.w("  { // every lane arrives, the leader first: the agent keeps the first arrival's token");
        self.w(format!("    if (u.lane == 0) u.a->tok = (i64)({call});"));
        self.w("    if (!pc_u_meet(th, u)) return;");
        self.w(format!("    if (u.lane != 0) (void)({call});"));
        self.w("    i64 tok = u.a->tok;");
        if rec == Some(Recorded::Token) {
            self.w(format!("    {}", self.record(2, &parity)));
        }
        if let Some(r) = result {
            self.w(format!("    {} = tok;  // the token", Self::local_name(code, r)));
        }
        self.w("  }");
        Ok(())
    }

    /// At pc `i` of a uniform role: where an elected block ends, the elected lane hands over to
    /// the lanes waiting there (the others pass here with `u.in_block` clear).
    pub(super) fn block_end(&mut self, code: &Code, i: usize) {
        if self.uni && code.elected.iter().any(|&(_, hi)| hi as usize == i) {
            self.w("  if (u.in_block) pc_u_block_done(th, u);  // the elected lane at its block's end: the lanes are together again");
        }
    }

    /// The instructions whose step on an agent's lanes is not "meet, every lane does it, meet":
    /// branches, warp and block synchronisation, `elect()` and the elected block's `if`. Returns
    /// false for the others.
    pub(super) fn instr_lanes(&mut self, code: &Code, i: usize, step: bool) -> Result<bool, NotExpressible> {
        let ins = &code.instrs[i];
        let begin = "  if (!pc_u_begin(th, u, th.turnp, NT)) return;";
        let end = "if (!pc_u_end(th, u, th.turnp)) return;";
        match &ins.kind {
            InstrKind::Branch { cond, else_to } if code.elected.contains(&(i as u32 + 1, *else_to)) => {
                let mut slot = None;
                cond.each(&mut |e| {
                    if let IExpr::Local(s) = e {
                        if code
                            .instrs
                            .iter()
                            .any(|x| matches!(x.kind, InstrKind::Elect { slot } if slot == *s))
                        {
                            slot = Some(*s);
                        }
                    }
                });
                let Some(slot) = slot else {
                    return Err(NotExpressible("an elected block whose condition names no elect() result".into()));
                };
                let c = self.expr(code, cond);
                let el = format!("elected_{}", Self::local_name(code, slot));
                self.w(format!(
                    "  {{ bool taken = {c};  // the elected block: the elected lane runs it alone"
                ));
                self.w(format!(
                    "    if ({el} < 0) {{  // no election reached: the agent skips it (as modelled)"
                ));
                if step {
                    self.w(format!("  {begin} {end}"));
                }
                self.w(format!("      goto L{else_to}; }}"));
                self.w(format!(
                    "    if (!taken) {{ if (!pc_u_block_wait(th, u, {el})) return; goto L{else_to}; }}  // passed over: wait at its end"
                ));
                if step {
                    self.w("    if (!pc_turn_begin(th, th.turnp, NT)) return; pc_u_tick(u); pc_turn_end(th, th.turnp);  // the branch: the elected lane's step");
                }
                self.w("    u.in_block = 1; }");
            }
            InstrKind::Branch { cond, else_to } if step => {
                // A condition on shared state may change between the lanes' evaluations: the
                // agent follows the leader's, every lane's own is compared at exit.
                let c = self.expr(code, cond);
                self.w(begin);
                self.w(format!(
                    "  {{ bool mine = {c}; pc_u_observe(u, 3, mine ? 1 : 0); if (u.lane == 0) u.a->val = mine ? 1 : 0;"
                ));
                self.w(format!("    {end} if (!u.a->val) goto L{else_to}; }}"));
            }
            InstrKind::SetVar { var, expr } => {
                // Every lane writes (the model reports the race and writes once): the lanes read
                // the old value before any of them writes, so all write the same one.
                let e = self.expr(code, expr);
                if step {
                    self.w(begin);
                }
                self.w(format!(
                    "  {{ i64 mine = {e}; if (!pc_u_meet(th, u)) return; s.{} = mine; }}",
                    self.var_name(*var)
                ));
                if step {
                    self.w(format!("  {end}"));
                }
            }
            InstrKind::SetLocal { slot, expr } if step && expr.reads_var() => {
                // A shared var read by every lane: the agent keeps the leader's value.
                let e = self.expr(code, expr);
                self.w(begin);
                self.w(format!(
                    "  {{ i64 mine = {e}; pc_u_observe(u, 4, (int)mine); if (u.lane == 0) u.a->val = mine;"
                ));
                self.w(format!("    {end} {} = u.a->val; }}", Self::local_name(code, *slot)));
            }
            InstrKind::SyncWarp | InstrKind::SyncWarpMask { .. } => {
                // The agent is alone in its warp (a full mask, crate::uniform): syncwarp is its
                // lanes meeting, which every step of the agent does.
                if step {
                    self.w(begin);
                    self.w(format!("  {end}  // syncwarp: the lanes met"));
                } else {
                    self.w("  if (!pc_u_meet(th, u)) return;  // syncwarp: the lanes meet");
                }
            }
            InstrKind::SyncThreads => {
                if step {
                    self.w(begin);
                    self.w(format!("  {end}  // the arrival is the step; the release follows it"));
                }
                if self.hw_barrier {
                    // barrier 0 of the hardware: every lane of every agent takes part, as every
                    // thread of the block not exited does (an exit releases it); unbounded.
                    self.w("  asm volatile(\"barrier.sync 0;\" ::: \"memory\");  // every lane takes part");
                } else {
                    self.w("  if (!pc_sync(th, &s.block_sync)) return;  // every lane takes part");
                }
            }
            InstrKind::ClusterArrive { slot, .. } if !self.hw_cluster_barrier => {
                // A relaxed arrival runs as a releasing one, as for a thread (`cluster_instr`).
                self.cluster_arrive_lanes(code, *slot, step);
            }
            InstrKind::Elect { slot } => {
                if step {
                    self.w(begin);
                    self.w(format!("  {end}  // the arrival is the step"));
                }
                let e = Self::local_name(code, *slot);
                self.w("  { if (!pc_u_meet(th, u)) return;  // every lane not exited is here");
                self.w("    unsigned alive = u.a->alive;");
                self.w("    if (!pc_u_meet(th, u)) return;  // nobody exits before all have read `alive`");
                self.w("    bool elected = pc_elect(alive);  // elect.sync over the agent's lanes: the hardware picks one");
                self.w("    if (elected) { u.a->elected = u.lane; if (!pc_turn_begin(th, th.turnp, NT)) return; pc_turn_end(th, th.turnp); u.a->step = th.step; u.a->lost = th.lost; }  // the release: a step of the elected lane");
                self.w("    if (!pc_u_meet(th, u)) return;");
                self.w(format!("    th.step = u.a->step; th.lost = u.a->lost; elected_{e} = u.a->elected;"));
                self.w(format!("    {e} = elected ? 1 : 0; }}"));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    /// The C++ agent's bookkeeping fits the shared memory the generator reserves for it.
    #[test]
    fn the_agent_fits_its_reservation() {
        let bound = format!("static_assert(sizeof(PcUAgent) <= {}, ", super::UNIFORM_AGENT_BYTES);
        assert!(super::super::prelude::UNIFORM_HELPERS.contains(&bound));
    }
}
