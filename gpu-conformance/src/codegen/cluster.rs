//! Cluster scope: remote arrives, multicast copies, DSMEM reads and writes, and the spec's
//! cluster barrier.
//!
//! One cluster runs one execution: the kernel is compiled with `__cluster_dims__(N, 1, 1)` and CTA r
//! of the cluster runs the model's CTA r. Remote arrives and multicast copies are the hardware's own
//! (`mapa` + `mbarrier.arrive.release.cluster.shared::cluster`, `cp.async.bulk ... .multicast::cluster`);
//! DSMEM reads and writes go through `mapa` generic pointers. The spec's cluster barrier
//! (`cluster_arrive`/`cluster_wait`) is a software barrier in CTA 0's shared memory: the hardware's
//! `barrier.cluster.wait` cannot be bounded in time. Its semantics are the hardware's: a phase
//! completes once every thread of the cluster that has not exited arrived. The harness itself uses
//! the hardware cluster barrier twice, where no spec code runs between (after every CTA initialised
//! its barriers, and before any CTA exits, so that no peer's late access finds its shared memory
//! gone); both are reached by every thread because every wait in between is bounded.

use super::expr::line_of;
use super::{Gen, NotExpressible};
use phasecheck_model::program::ir::*;
use phasecheck_verifier::outcomes::Recorded;
use std::collections::HashSet;

/// The code uses the cluster barrier (`cluster_arrive`/`cluster_wait`/`cluster_sync`).
pub(super) fn uses_cluster_barrier(p: &Protocol) -> bool {
    p.roles.iter().any(|r| r.code.cluster_slot.is_some())
}

impl Gen<'_> {
    /// What a cluster kernel cannot express: completion functions, and remote operations that
    /// have no sm_90 form or whose operands would be evaluated in the wrong CTA.
    pub(super) fn cluster_expressible(&self) -> Result<(), NotExpressible> {
        let p = self.p;
        if !p.completions.is_empty() {
            return Err(NotExpressible(
                    "completion functions in a cluster: libcu++ runs them in software barriers, which remote arrives and multicast copies cannot reach".into(),
                ));
        }
        for (code, _) in self.all_code() {
            for ins in &code.instrs {
                let InstrKind::Op {
                    op: IOp::Remote { multicast, op, .. },
                    ..
                } = &ins.kind
                else {
                    continue;
                };
                let (line, text) = line_of(self.src, ins.span.start);
                let bad = |why: &str| Err(NotExpressible(format!("line {line} `{text}`: {why}")));
                let mut reads_var = false;
                ins.exprs(&mut |e| reads_var |= e.reads_var());
                if reads_var {
                    return bad(
                        "an operand of a remote operation reads a shared var; the kernel evaluates it in the target CTA's shared memory",
                    );
                }
                match (&**op, multicast) {
                        (IOp::Copy(CopyOp::Copy { version: None, .. }) | IOp::Copy(CopyOp::CopyPart { version: None, .. }), true) => {
                            return bad("a multicast copy without `version =`: the default version is each target CTA's own write count");
                        }
                        (IOp::Copy(CopyOp::Copy { .. }) | IOp::Copy(CopyOp::CopyPart { .. }), true) => {}
                        (IOp::Copy(CopyOp::Copy { version: None, .. }) | IOp::Copy(CopyOp::CopyPart { version: None, .. }), false) => {
                            return bad("a copy into a peer CTA without `version =`: the default version is the target CTA's own write count");
                        }
                        (IOp::Mbar(MbarOp::Arrive { .. })
                        | IOp::Mem(MemOp::Read { .. })
                        | IOp::Mem(MemOp::Write { .. })
                        | IOp::Mem(MemOp::ReadPart { .. })
                        | IOp::Mem(MemOp::AtomicAdd { .. })
                        | IOp::Mem(MemOp::ReadCounter { .. })
                        | IOp::Copy(CopyOp::Copy { .. })
                        | IOp::Copy(CopyOp::CopyPart { .. })
                        | IOp::Copy(CopyOp::CopyFrom { .. })
                        | IOp::Copy(CopyOp::StAsync { .. }), false) => {}
                        _ => return bad("this remote operation has no sm_90 form in the generated kernel (remote: arrive, arrive_expect_tx, read, write, atomic_add, read_counter, copy_async, st_async; multicast: copy_async)"),
                    }
            }
        }
        Ok(())
    }

    /// The spec's cluster barrier (`InstrKind::ClusterArrive`, `ClusterWait`).
    pub(super) fn cluster_instr(&mut self, code: &Code, kind: &InstrKind) {
        match kind {
            InstrKind::ClusterArrive { slot, relaxed } if self.hw_cluster_barrier => {
                let l = Self::local_name(code, *slot);
                // The same undefined use the software form stops at: a second arrival before the
                // wait. On a uniform agent's lanes, every lane arrives (the hardware counts
                // threads) and each checks its own local: `cbar_out` is the agent's, set by the
                // lane that arrived first.
                if self.lanes {
                    self.w(format!("  if ({l} != 0) {{ th.status = PC_ASSERT; return; }}"));
                } else {
                    self.w(format!("  if ({l} != 0 || s.cbar_out[th.t]) {{ th.status = PC_ASSERT; return; }}"));
                }
                if *relaxed {
                    self.w("  asm volatile(\"barrier.cluster.arrive.relaxed;\" ::: \"memory\");  // the hardware's own: no release");
                } else {
                    self.w("  __threadfence_block();  // my writes before the arrival");
                    self.w("  asm volatile(\"barrier.cluster.arrive.release;\" ::: \"memory\");  // the hardware's own, unbounded");
                }
                self.w(format!("  {l} = 1; s.cbar_out[th.t] = 1;"));
            }
            InstrKind::ClusterWait { slot } if self.hw_cluster_barrier => {
                let l = Self::local_name(code, *slot);
                self.w(format!(
                    "  if ({l} == 0) {{ th.status = PC_ASSERT; return; }}  // a wait with no arrival: undefined"
                ));
                self.w("  pc_turn_end(th, th.turnp);  // the wait is the step; the release follows the last arrival");
                self.w("  asm volatile(\"barrier.cluster.wait.acquire;\" ::: \"memory\");  // unbounded: the host ends a launch that does not return");
                self.w(format!("  {l} = 0; s.cbar_out[th.t] = 0;"));
            }
            InstrKind::ClusterArrive { slot, .. } => {
                // A relaxed arrival runs as a releasing one here: stronger than the model's, so
                // every outcome it allows is one the model allows.
                let (b, l) = (self.cluster_bar(), Self::local_name(code, *slot));
                self.w(format!(
                    "  if (!pc_cluster_arrive(th, {b}, {l})) return;  // barrier.cluster.arrive.release, in software"
                ));
            }
            InstrKind::ClusterWait { slot } => {
                let (b, l) = (self.cluster_bar(), Self::local_name(code, *slot));
                self.w("  pc_turn_end(th, th.turnp);  // the wait is the step; the release follows the last arrival");
                self.w(format!(
                    "  if (!pc_cluster_wait(th, {b}, {l})) return;  // barrier.cluster.wait.acquire, in software (bounded)"
                ));
            }
            _ => unreachable!("not a cluster barrier instruction"),
        }
    }

    /// The spec's `cluster_arrive` on the lanes of a uniform agent, in software: the barrier
    /// counts agents (docs/semantics.md, "Uniform roles in a cluster"), so the leader arrives once
    /// for the agent and every lane keeps the phase it arrived on; each lane then waits on its
    /// own at `cluster_wait` (a wait only reads the barrier).
    pub(super) fn cluster_arrive_lanes(&mut self, code: &Code, slot: u16, step: bool) {
        let (b, l) = (self.cluster_bar(), Self::local_name(code, slot));
        if step {
            self.w("  if (!pc_u_begin(th, u, th.turnp, NT)) return;");
        }
        self.w(format!(
            "  {{ if (u.lane == 0) {{ if (!pc_cluster_arrive(th, {b}, {l})) return; u.a->val = {l}; }}  // barrier.cluster.arrive.release, in software: once for the agent"
        ));
        if step {
            self.w(format!("    if (!pc_u_end(th, u, th.turnp)) return; {l} = u.a->val; }}"));
        } else {
            self.w(format!("    if (!pc_u_meet(th, u)) return; {l} = u.a->val; }}"));
        }
    }

    /// The cluster barrier: CTA 0's, reached through DSMEM from the others.
    pub(super) fn cluster_bar(&self) -> &'static str {
        if self.cluster > 1 {
            "(PcClusterBar*)pc_mapa((const void*)&s.cbar, 0)"
        } else {
            "&s.cbar"
        }
    }

    /// A bulk copy into a peer CTA (`copy_async(BUF, B, cta = R)`): `cp.async.bulk.shared::cluster`
    /// aimed at the peer's buffer and barrier (`mapa` of the local offsets), inside `remote_op`'s
    /// block where `peer` is the rank.
    fn peer_copy(&mut self, code: &Code, buf: &Ref, bar: &Ref, offset: &IExpr, bytes: Option<&IExpr>, version: &Option<IExpr>) {
        let (b, chk1) = self.place(code, bar, true);
        let (d, chk2) = self.place(code, buf, false);
        for c in [chk1, chk2].into_iter().flatten() {
            self.w(format!("    {c}"));
        }
        let off = self.expr(code, offset);
        let n = bytes
            .map(|e| self.expr(code, e))
            .unwrap_or_else(|| format!("(i64)sizeof({d}) - {off}"));
        let v = self.expr(code, version.as_ref().expect("cluster_expressible asks peer copies for a version"));
        let flat = self.flat_buf(code, buf);
        self.w(format!(
            "    if ({n} % 16 != 0 || {n} <= 0 || {off} % 16 != 0 || {off} < 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
        ));
        self.w(format!(
            "    {{ i64 version = {v}; if (!pc_version_ok(th, version)) return; atomicAdd(&((Shared*)pc_mapa((const void*)&s, (int)peer))->writes[{flat}], 1);"
        ));
        self.w(format!(
            "    pc_bulk_copy_peer((int*)((char*){d} + {off}), (const int*)((const char*)pc_src_row(th, version) + {off}), (int){n}, {}, (int)peer);  // lands in the peer CTA, complete_tx({n}) on its barrier",
            self.native(&b)
        ));
        self.w("    }");
    }

    /// `copy_async(DST, B, cta = R, from = SRC)`: the hardware's own CTA-to-CTA bulk copy
    /// (`cp.async.bulk.shared::cluster.shared::cta`), from the issuer's SRC (its version stamps
    /// travel with it) into the peer's DST at the same offsets the model uses, completing on the
    /// peer's B; the peer's write count is raised as the model's is by every copy issue.
    fn peer_copy_from(&mut self, code: &Code, buf: &Ref, bar: &Ref, src: &Ref, offset: &IExpr, bytes: &IExpr) {
        let (b, chk1) = self.place(code, bar, true);
        let (d, chk2) = self.place(code, buf, false);
        let (from, chk3) = self.place(code, src, false);
        for c in [chk1, chk2, chk3].into_iter().flatten() {
            self.w(format!("    {c}"));
        }
        let off = self.expr(code, offset);
        let n = self.expr(code, bytes);
        let flat = self.flat_buf(code, buf);
        self.w(format!(
            "    if ({n} % 16 != 0 || {n} <= 0 || {off} % 16 != 0 || {off} < 0 || {off} + {n} > (i64)sizeof({d}) || {n} > (i64)sizeof({from})) {{ th.status = PC_UNSUPPORTED; return; }}"
        ));
        self.w(format!(
            "    atomicAdd(&((Shared*)pc_mapa((const void*)&s, (int)peer))->writes[{flat}], 1);"
        ));
        self.w(format!(
            "    pc_bulk_copy_cta((int*)((char*){d} + {off}), (const int*){from}, (int){n}, {}, (int)peer);  // reads my {from} through the async proxy, lands in the peer CTA, complete_tx({n}) on its barrier",
            self.native(&b)
        ));
    }

    /// Cluster scope: an operation on a peer CTA's objects (`cta = R`), or a copy multicast into
    /// several CTAs (`multicast = MASK`). Remote arrives and multicast copies are the hardware's;
    /// DSMEM reads and writes run the local operation on the peer's shared memory through a `mapa`
    /// pointer (`s` is rebound to it; `check_expressible` keeps shared vars out of the operands).
    pub(super) fn remote_op(
        &mut self,
        code: &Code,
        target: &IExpr,
        multicast: bool,
        op: &IOp,
        token_slots: &HashSet<u16>,
        rec: Option<Recorded>,
    ) -> Result<(), NotExpressible> {
        let nc = self.cluster;
        let t = self.expr(code, target);
        if multicast {
            let (bar, buf, version) = match op {
                IOp::Copy(CopyOp::Copy { buf, bar, version, .. }) | IOp::Copy(CopyOp::CopyPart { buf, bar, version, .. }) => {
                    (bar, buf, version)
                }
                _ => unreachable!("check_expressible admits multicast copies only"),
            };
            let version = self.expr(
                code,
                version.as_ref().expect("check_expressible asks multicast copies for a version"),
            );
            let (b, chk1) = self.place(code, bar, true);
            let (d, chk2) = self.place(code, buf, false);
            self.w(format!("  {{ i64 mask = {t};"));
            self.w(format!(
                "    if (!pc_version_ok(th, {version})) return;  // no row of the copy source holds it"
            ));
            self.w(format!(
                "    if (mask < 1 || mask >= {}) {{ th.status = PC_ASSERT; return; }}  // a CTA outside the cluster: undefined",
                1u32 << nc
            ));
            for c in [chk1, chk2].into_iter().flatten() {
                self.w(format!("    {c}"));
            }
            let (off, n) = match op {
                IOp::Copy(CopyOp::CopyPart { offset, bytes, .. }) => (self.expr(code, offset), self.expr(code, bytes)),
                IOp::Copy(CopyOp::Copy { bytes: Some(e), .. }) => ("0LL".to_string(), self.expr(code, e)),
                _ => ("0LL".to_string(), format!("(i64)sizeof({d})")),
            };
            self.w(format!(
                "    if ({n} % 16 != 0 || {n} <= 0 || {off} % 16 != 0 || {off} < 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
            ));
            self.remote = Some("c");
            let flat = self.flat_buf(code, buf);
            self.remote = None;
            self.w(format!(
                "    for (int c = 0; c < {nc}; c++) if ((mask >> c) & 1) atomicAdd(&((Shared*)pc_mapa((const void*)&s, c))->writes[{flat}], 1);"
            ));
            self.w(format!(
                "    pc_bulk_copy_multicast((int*)((char*){d} + {off}), (const int*)((const char*)pc_src_row(th, {version}) + {off}), (int){n}, {}, (int)mask);  // lands in every CTA of the mask, complete_tx({n}) on each one's barrier",
                self.native(&b)
            ));
            self.w("  }");
            return Ok(());
        }
        self.w(format!("  {{ i64 peer = {t};"));
        self.w(format!(
            "    if (peer < 0 || peer >= {nc}) {{ th.status = PC_ASSERT; return; }}  // mapa of a rank outside the cluster: undefined"
        ));
        match op {
            IOp::Mbar(MbarOp::Arrive { bar, n, drop, expect_tx }) => {
                let b = self.placed(code, bar, true, "    ");
                let native = self.native(&b);
                match expect_tx {
                    Some(tx) => {
                        let tx = self.expr(code, tx);
                        self.w(format!("    pc_mbar_arrive_expect_tx_remote({native}, (int)peer, (int){tx});  // mbarrier.arrive.expect_tx.release.cluster.shared::cluster"));
                    }
                    None => {
                        let n = self.expr(code, n);
                        self.w(format!("    pc_mbar_arrive_remote({native}, (int)peer, (int){n}, {drop});  // mbarrier.arrive.release.cluster.shared::cluster"));
                    }
                }
            }
            IOp::Copy(CopyOp::StAsync {
                buf,
                bar,
                offset,
                bytes,
                version,
            }) => self.st_async(code, buf, bar, offset, bytes, version, Some("peer")),
            IOp::Copy(CopyOp::Copy { buf, bar, bytes, version }) => {
                let whole = IExpr::Const(0);
                self.peer_copy(code, buf, bar, &whole, bytes.as_ref(), version);
            }
            IOp::Copy(CopyOp::CopyPart {
                buf,
                bar,
                offset,
                bytes,
                version,
            }) => self.peer_copy(code, buf, bar, offset, Some(bytes), version),
            IOp::Copy(CopyOp::CopyFrom {
                buf,
                bar,
                src,
                offset,
                bytes,
            }) => self.peer_copy_from(code, buf, bar, src, offset, bytes),
            // The hardware's DSMEM atomic: the own CTA's address of the counter mapped into the
            // peer's window (`mapa.shared::cluster`), then `red.shared::cluster`.
            IOp::Mem(MemOp::AtomicAdd { buf, value }) => {
                let d = self.placed(code, buf, false, "    ");
                let v = self.expr(code, value);
                self.w(format!(
                    "    pc_red_add_cluster(pc_mapa_smem({d}, (int)peer), (int){v});  // red.relaxed.cluster.shared::cluster.add.u32 on the peer's counter"
                ));
            }
            _ => {
                self.w("    Shared& peer_s = *(Shared*)pc_mapa((const void*)&s, (int)peer);  // the peer's shared memory (DSMEM)");
                self.w("    { Shared& s = peer_s;");
                self.remote = Some("peer");
                let r = self.op(code, op, None, token_slots, rec);
                self.remote = None;
                r?;
                self.w("    }");
            }
        }
        self.w("  }");
        Ok(())
    }
}
