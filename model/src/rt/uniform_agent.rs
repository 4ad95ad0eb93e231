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
/// Accesses of memory are made once (a write by the lanes is judged a race among them first),
/// except an atomic add, which every lane makes.
fn per_lane(op: &IOp) -> bool {
    match op {
        IOp::Mbar(op) => op.per_lane(),
        IOp::Copy(op) => op.per_lane(),
        IOp::Tc(op) => op.per_lane(),
        // A remote operation counts as its own-CTA form does (an arrive per lane on the peer).
        IOp::Remote { op, .. } => per_lane(op),
        IOp::Mem(op) => op.per_lane(),
        IOp::Warp(_) | IOp::Proxy(_) => false,
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
        if let (IOp::Mem(access), false) = (op, per_lane(op)) {
            if let Some(offset) = crate::program::uniform::per_lane_offset(op).filter(|o| o.reads_identity()) {
                return self.lanes_at_offsets(t, access, offset, lanes);
            }
            if access.writes() {
                let d = self.resolve_buf(access.buf(), None)?;
                self.lanes_race(lanes, true, d);
            }
            return self.op(op);
        }
        if let IOp::Remote { op: inner, .. } = op {
            if let IOp::Mem(access) = &**inner {
                if access.writes() {
                    // A DSMEM write by every lane: the lanes write the same bytes of the peer's
                    // buffer with nothing ordering them.
                    let g = access.buf().group as usize;
                    let name = self.p().buffer_groups[g].name.clone();
                    let msg = format!(
                        "{}: its {lanes} lanes all write the peer CTA's {name} with no happens-before between them (a uniform role's statement runs on every lane; write from an elected block)",
                        self.label()
                    );
                    self.fail(K::DataRace, msg);
                }
            }
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

    /// A partial read or write whose offset reads the lane's identity (`offset = lane * 16`):
    /// each lane accesses its own bytes, the offset evaluated with the lane's `lane`, `tid` and
    /// `gtid`. Lanes whose written bytes overlap race (nothing orders the lanes of a warp's one
    /// store instruction); otherwise each lane's access is judged against the other agents, as
    /// the agent's own.
    fn lanes_at_offsets(&mut self, t: usize, access: &MemOp, offset: &IExpr, lanes: i64) -> R<Option<i64>> {
        let me = self.p().threads[t];
        let locals = self.s.threads[t].locals.clone();
        let mut ranges: Vec<(i64, i64, i64)> = Vec::with_capacity(lanes as usize);
        let bytes = match access {
            MemOp::WritePart { bytes, .. } | MemOp::ReadPart { bytes, .. } => bytes,
            _ => return self.op(&IOp::Mem(access.clone())),
        };
        let n = self.ev(bytes, None)?;
        for k in 0..lanes {
            let k32 = k as u32;
            let info = ThreadInfo {
                tid: me.tid + k32,
                gtid: me.gtid + k32,
                lane: me.lane + k32,
                ..me
            };
            let off = self.eval_as(offset, &locals, Some(info))?;
            ranges.push((off, off + n, k));
        }
        if access.writes() {
            let mut sorted = ranges.clone();
            sorted.sort();
            let clash = sorted
                .windows(2)
                .find(|w| super::memory::overlaps((w[0].0, w[0].1), (w[1].0, w[1].1)));
            if let Some(w) = clash {
                let d = self.resolve_buf(access.buf(), None)?;
                let msg = format!(
                    "{}: its lanes {} and {} write overlapping bytes {}..{} and {}..{} of {} with no happens-before between them (each lane writes at its own offset)",
                    self.label(),
                    w[0].2,
                    w[1].2,
                    w[0].0,
                    w[0].1,
                    w[1].0,
                    w[1].1,
                    self.p().buffers[d].name
                );
                self.fail(K::DataRace, msg);
            }
        }
        let mut first = None;
        let before = self.v.len();
        let first_obs = self.obs.len();
        for &(off, _, _) in &ranges {
            let at = IExpr::Const(off);
            let one = match access {
                MemOp::WritePart { buf, bytes, version, .. } => MemOp::WritePart {
                    buf: buf.clone(),
                    offset: at,
                    bytes: bytes.clone(),
                    version: version.clone(),
                },
                MemOp::ReadPart { buf, bytes, expect, .. } => MemOp::ReadPart {
                    buf: buf.clone(),
                    offset: at,
                    bytes: bytes.clone(),
                    expect: expect.clone(),
                },
                _ => unreachable!("per-lane offsets are on partial accesses"),
            };
            let r = self.op(&IOp::Mem(one))?;
            first = first.or(r);
            // One report per statement: the other lanes would repeat it.
            if self.ended || self.v.len() > before {
                break;
            }
        }
        // The lanes' accesses of one version show as one line of the trace.
        let mut seen: Vec<Obs> = Vec::new();
        for o in self.obs.drain(first_obs..).collect::<Vec<_>>() {
            if !seen.contains(&o) {
                seen.push(o);
            }
        }
        self.obs.extend(seen);
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
