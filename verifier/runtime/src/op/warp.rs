//! The warp's own statement, the warp-batched `commit` (one arrival per converged group of lanes,
//! decided at the gate of `sched.rs`); the runtime's side of model/src/rt/warp.rs.

use crate::barrier::Ub;
use crate::interp::{Ctx, Stop, World};
use crate::sched::At;
use phasecheck_model::program::ir::WarpOp;
use phasecheck_model::ViolationKind;

impl World {
    pub(crate) fn warp_op(&self, op: &WarpOp, ctx: &mut Ctx, pc: u32) -> Result<Option<i64>, Stop> {
        match op {
            WarpOp::Commit { bar } => {
                let b = self.bar(bar, ctx)?;
                self.barriers[b].live("commit")?;
                if ctx.completing.is_some() {
                    return Err(Stop::Ub(Ub::new(ViolationKind::CompletionMisuse, "a completion function commits")));
                }
                // The converged lanes issue it as one instruction: one of them makes the arrival.
                if let Some((lead_bar, n)) = self.at_gate(ctx, At::Commit { pc, bar: b }, false)? {
                    let mut done = self.completion(lead_bar);
                    let r = self.with_bound(|bd| self.barriers[lead_bar].arrive(n, None, false, &mut done, bd));
                    if let (Some(g), Some(t)) = (&self.gate, ctx.t) {
                        g.committed(t);
                    }
                    r?;
                }
                Ok(None)
            }
        }
    }
}
