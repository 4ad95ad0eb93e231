//! The warp and the block: syncthreads, syncwarp (full and masked), `elect()`, and the
//! warp-batched `commit` (one arrival per converged group of lanes, emulated as the model
//! defines convergence, or batched by the hardware in the `_hwc` form; see the crate's codegen
//! docs). Execution barriers are software barriers so that they are bounded (the prelude's
//! `software_barrier.cuh`, `convergence.cuh`).

use super::{Backend, Gen};
use phasecheck_model::program::ir::*;

/// Branch decisions a thread may take between two syncwarps in a role with a `commit` (the kernel
/// publishes its path so that lanes can tell whether they are converged).
pub const PATH_CAP: usize = 32;
/// Shared memory of one thread's published path (`PcLane`).
pub(super) const LANE_BYTES: usize = 16 + 8 * (PATH_CAP + 1);

/// The code contains a warp-batched `commit`.
pub(super) fn code_commits(code: &Code) -> bool {
    code.instrs.iter().any(|i| {
        matches!(
            i.kind,
            InstrKind::Op {
                op: IOp::Warp(WarpOp::Commit { .. }),
                ..
            }
        )
    })
}

/// The protocol has a warp-batched `commit`.
pub fn has_commit(p: &Protocol) -> bool {
    p.roles.iter().any(|r| code_commits(&r.code))
}

/// The code has `syncwarp(mask)` or `elect()`.
pub(super) fn code_warp_ops(code: &Code) -> bool {
    code.instrs
        .iter()
        .any(|i| matches!(i.kind, InstrKind::SyncWarpMask { .. } | InstrKind::Elect { .. }))
}

/// Some role has `syncwarp(mask)` or `elect()`.
pub(super) fn has_warp_ops(p: &Protocol) -> bool {
    p.roles.iter().any(|r| code_warp_ops(&r.code))
}

impl Gen<'_> {
    /// An execution barrier or election of the warp or block (`InstrKind::SyncWarp`,
    /// `SyncThreads`, `SyncWarpMask`, `Elect`).
    pub(super) fn warp_instr(&mut self, code: &Code, kind: &InstrKind) {
        match kind {
            InstrKind::SyncWarp => {
                self.w("  pc_turn_end(th, th.turnp);  // the arrival is the step; the release follows it");
                self.w("  if (!pc_sync(th, &s.warp_sync[th.warp])) return;");
                self.w("  __syncwarp(__activemask());  // reconverge the lanes that got here");
                if self.track {
                    self.w("  pc_path_reset(th, &s.lanes[th.t]);  // converged again: paths start afresh");
                }
            }
            InstrKind::SyncThreads if self.hw_barrier => {
                self.w("  pc_turn_end(th, th.turnp);  // the arrival is the step; the release follows it");
                self.w("  // barrier 0 of the hardware, for every thread of the block that has not exited (an exit");
                self.w("  // releases it), unbounded: the host ends a launch that does not return");
                self.w("  asm volatile(\"barrier.sync 0;\" ::: \"memory\");");
            }
            InstrKind::SyncThreads => {
                self.w("  pc_turn_end(th, th.turnp);  // the arrival is the step; the release follows it");
                self.w("  if (!pc_sync(th, &s.block_sync)) return;");
            }
            InstrKind::SyncWarpMask { mask } => {
                let m = self.expr(code, mask);
                self.w(format!("  {{ i64 mask = {m};"));
                self.w("    if (th.lane >= 32 || !((mask >> th.lane) & 1)) { th.status = PC_ASSERT; return; }  // not in its own mask: undefined");
                self.w("    pc_turn_end(th, th.turnp);  // the arrival is the step; the release follows it");
                self.w("    // __syncwarp(mask), in software so that it is bounded (exited lanes take no part)");
                self.w("    if (!pc_sync_mask(th, s.wcount, s.wdone, warp_first[th.warp], warp_n[th.warp], (unsigned)mask)) return;");
                self.w("    __threadfence_block(); }");
            }
            InstrKind::Elect { slot } => {
                self.w("  pc_turn_end(th, th.turnp);  // the arrival is the step");
                self.w("  if (!pc_sync(th, &s.warp_sync[th.warp])) return;  // every unfinished lane of the warp is here");
                self.w("  { unsigned alive = s.walive[th.warp];");
                self.w("    if (!pc_sync(th, &s.warp_sync[th.warp])) return;  // nobody exits before all have read `alive`");
                self.w("    bool elected = pc_elect(alive);  // elect.sync: the hardware picks one lane");
                self.w("    if (elected) { if (!pc_turn_begin(th, th.turnp, NT)) return; pc_turn_end(th, th.turnp); }  // the release: a step of the elected lane");
                self.w(format!("    {} = elected ? 1 : 0; }}", Self::local_name(code, *slot)));
            }
            _ => unreachable!("not a warp or block instruction"),
        }
    }

    /// An operation whose effect depends on the converged lanes.
    pub(super) fn warp_op(&mut self, code: &Code, op: &WarpOp) {
        match op {
            WarpOp::Commit { bar } => self.commit(code, bar),
        }
    }

    /// A warp-batched `commit`: it ends its turn itself, once for the group.
    fn commit(&mut self, code: &Code, bar: &Ref) {
        let libcu = self.backend == Backend::Libcu;
        let b = self.placed(code, bar, true, "  ");
        let arrive = if libcu {
            format!("(void){b}.arrive()")
        } else {
            format!("(void)pc_mbar_arrive(&{b}, 1)")
        };
        let pc = self.pc;
        if self.hw_commit {
            self.w("  { // warp-batched arrive as the hardware batches it: the lanes executing this commit together, per barrier");
            self.w(format!(
                "    unsigned group = __match_any_sync(__activemask(), (unsigned)(unsigned long long)&{b});"
            ));
            self.w(format!("    if (th.lane == __ffs(group) - 1) {arrive};"));
            self.w("    pc_turn_end(th, th.turnp);");
            self.w("  }");
            return;
        }
        self.w("  { // warp-batched arrive: ONE arrival per converged group of lanes (the model's rule)");
        self.w(format!(
            "    unsigned group = pc_commit_group(th, &s.lanes[warp_first[th.warp]], {pc});"
        ));
        self.w("    if (group == 0) return;  // timed out: hung");
        self.w("    __syncwarp(group);  // the group meets: its lanes' earlier writes are ordered before the arrival");
        self.w("    bool leader = th.lane == __ffs(group) - 1;");
        self.w(format!("    if (leader) {arrive};  // the lowest lane arrives for the group"));
        self.w("    __syncwarp(group);  // no lane moves on before the arrival is made");
        self.w("    pc_commit_leave(th, &s.lanes[th.t], leader, th.turnp);");
        self.w("  }");
    }
}
