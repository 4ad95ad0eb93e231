//! Warp-uniform roles: one agent per warp stands for the warp's lanes, which
//! execute in lockstep (docs/model.md, "Warp-uniform roles"). A step of such an agent does what
//! its lanes would do one after the other: every contribution to shared state a lane makes on
//! its own (an arrival, tx bytes, a copy, an init) is made once per lane, in lane order, so a
//! count that assumes one arrival per warp overshoots exactly as the lanes would make it
//! overshoot. What the lanes share (a wait, a read, a warp-batched commit, the warp's bulk and
//! wgmma groups) is done once. Inside an elected block the multiplicity is 1
//! (`Protocol::lanes_at`).

use super::*;

/// Whether each lane of a warp makes the operation's contribution on its own (its object says).
/// Accesses of memory are made once: a write by the lanes is judged a race among them first.
fn per_lane(op: &IOp) -> bool {
    match op {
        IOp::Mbar(op) => op.per_lane(),
        IOp::Copy(op) => op.per_lane(),
        IOp::Tc(op) => op.per_lane(),
        IOp::Mem(_) | IOp::Warp(_) | IOp::Proxy(_) | IOp::Remote { .. } => false,
    }
}

impl Exec<'_> {
    /// Thread `t`'s operation, once per lane it stands for; yields the first lane's result (the
    /// token the warp's leader holds).
    pub(super) fn op_lanes(&mut self, t: usize, op: &IOp) -> R<Option<i64>> {
        let lanes = self.p().lanes_at(t, self.s.threads[t].pc);
        if lanes == 1 {
            return self.op(op);
        }
        if let IOp::Mem(access) = op {
            if access.writes() {
                let d = self.resolve_buf(access.buf(), None)?;
                self.lanes_race(lanes, true, d);
            }
            return self.op(op);
        }
        if !per_lane(op) {
            return self.op(op);
        }
        let first_obs = self.obs.len();
        let first = self.op(op)?;
        for _ in 1..lanes {
            if self.ended {
                break;
            }
            self.op(op)?;
        }
        self.merge_arrivals(first_obs);
        Ok(first)
    }

    /// A write by every lane of a uniform agent: the lanes write the same cell with nothing
    /// ordering them, as `lanes` threads would (the write itself is then made once).
    pub(super) fn lanes_race(&mut self, lanes: i64, is_buf: bool, i: usize) {
        let msg = format!(
            "{}: its {lanes} lanes all write {} with no happens-before between them (a uniform role's statement runs on every lane; write from an elected block)",
            self.label(),
            self.cell_name(is_buf, i)
        );
        self.fail(K::DataRace, msg);
    }

    /// The lanes' arrivals on one phase shown as one arrival of their summed count, so a trace
    /// line says `x32` instead of repeating itself.
    fn merge_arrivals(&mut self, from: usize) {
        let mut merged: Vec<Obs> = Vec::with_capacity(self.obs.len() - from);
        for o in self.obs.drain(from..) {
            if let (
                Some(Obs::Arrived { bar, phase, count }),
                Obs::Arrived {
                    bar: b2,
                    phase: p2,
                    count: c2,
                },
            ) = (merged.last_mut(), &o)
            {
                if *bar == *b2 && *phase == *p2 {
                    *count += c2;
                    continue;
                }
            }
            merged.push(o);
        }
        self.obs.extend(merged);
    }
}
