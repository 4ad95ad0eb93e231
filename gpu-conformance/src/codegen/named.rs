//! Named barriers (`bar_sync` / `bar_arrive`), in software so that they are bounded: the
//! hardware counts whole warps, so a warp arrives once every unfinished lane executed the
//! instruction (the prelude's `named.cuh`). The hardware-barrier form (`generate_hw_barrier`)
//! runs the hardware's own `barrier.sync` / `barrier.arrive` instead.

use super::Gen;
use phasecheck_model::program::ir::*;

/// The protocol uses named barriers (`bar_sync`/`bar_arrive`).
pub(super) fn has_named(p: &Protocol) -> bool {
    p.roles
        .iter()
        .any(|r| r.code.instrs.iter().any(|i| matches!(i.kind, InstrKind::NamedBar { .. })))
}

impl Gen<'_> {
    /// `bar_sync(id, count)` or `bar_arrive(id, count)` (`InstrKind::NamedBar`).
    pub(super) fn named_instr(&mut self, code: &Code, kind: &InstrKind) {
        let p = self.p;
        match kind {
            InstrKind::NamedBar { id, count, sync } if self.hw_barrier || self.keeper => {
                let (id, count) = (self.expr(code, id), self.expr(code, count));
                let ws = p.warp_size;
                let what = if *sync { "barrier.sync" } else { "barrier.arrive" };
                self.w("  pc_turn_end(th, th.turnp);  // the arrival is the step; the release follows it");
                self.w(format!(
                    "  {{ i64 id = {id}, count = {count};  // {what} of the hardware, unbounded"
                ));
                // The same undefined uses the software form reports (an id past the 16 barriers,
                // a count not in whole model warps) stop the thread as an assertion would.
                self.w(format!(
                    "    if (id < 0 || id >= 16 || count <= 0 || count % {ws} != 0) {{ th.status = PC_ASSERT; return; }}"
                ));
                self.w(format!(
                    "    unsigned hw = (unsigned)(count / {ws}) * 32u;  // a model warp of {ws} lanes is a hardware warp"
                ));
                self.w("    __threadfence_block();  // my writes before the arrival");
                self.w(format!(
                    "    asm volatile(\"{what} %0, %1;\" :: \"r\"((unsigned)id), \"r\"(hw) : \"memory\"); }}"
                ));
            }
            InstrKind::NamedBar { id, count, sync } => {
                let (id, count) = (self.expr(code, id), self.expr(code, count));
                let ws = p.warp_size;
                let what = if *sync { "bar.sync" } else { "bar.arrive" };
                self.w("  pc_turn_end(th, th.turnp);  // the arrival is the step; the release follows it");
                self.w(format!(
                    "  {{ i64 id = {id}; // {what}, in software (bar.sync cannot be bounded in time)"
                ));
                self.w(format!(
                        "    if (!pc_named(th, &s.named[id < 0 || id >= 16 ? 0 : id], &s.warp_sync[th.warp], &s.named_lead[th.warp], &s.named_at[th.warp], id, {count}, {ws}, {sync})) return; }}"
                    ));
            }
            _ => unreachable!("not a named barrier"),
        }
    }
}
