//! Shared-memory buffers as the spec's threads read and write them: every word of a buffer holds
//! a version stamp, a write fills every word, a read sees one version or a torn mix (-1). The
//! helpers are the prelude's `memory.cuh`.

use super::Gen;
use phasecheck_model::program::ir::*;
use phasecheck_verifier::outcomes::Recorded;

/// 32-bit words of a buffer, rounded up to 16 bytes (bulk copies move multiples of 16 bytes).
pub(super) fn words_of(bytes: i64) -> usize {
    (bytes.max(0) as usize).div_ceil(16) * 4
}

impl Gen<'_> {
    /// 32-bit words of the bytes a buffer reference's group declares (at least one).
    fn declared_words(&self, buf: &Ref) -> usize {
        let g = &self.p.buffer_groups[self.local_group(buf.group, false)];
        (self.p.buffers[g.base as usize].bytes.max(1) as usize).div_ceil(4)
    }

    /// A read or write of a buffer by the thread (`MemOp::Read`, `Write`, `ReadPart`); `rec` says
    /// whether the read is recorded.
    pub(super) fn memory_op(&mut self, code: &Code, op: &MemOp, rec: Option<Recorded>) {
        match op {
            MemOp::Read { buf, expect } => {
                let d = self.placed(code, buf, false, "  ");
                // The words of the bytes the spec declares: a buffer is laid out rounded up to 16
                // bytes, but a 4- or 8-byte `cp_async` of the whole buffer fills only its own
                // words, so the padding would read as a torn mix.
                let words = self.declared_words(buf);
                self.w(format!("  {{ int v = pc_read({d}, {words});"));
                if rec == Some(Recorded::Read) {
                    self.w(format!("    {}", self.record(0, "v")));
                    if let Some(e) = expect {
                        let e = self.expr(code, e);
                        self.w(format!("    if ((i64)v != {e}) th.nbad++;  // not the expected version"));
                    }
                }
                self.w("  }");
            }
            MemOp::Write { buf, version } if self.is_tensormap(buf) => self.tensormap_write(code, buf, version),
            MemOp::Write { buf, version } => {
                let d = self.placed(code, buf, false, "  ");
                let v = self.expr(code, version);
                let flat = self.flat_buf(code, buf);
                // On an agent's lanes every lane writes (the model reports the race) and the write
                // counts once. The count is atomic: a remote write bumps the peer CTA's count, which
                // its own threads may be bumping too (see `version_stmt`).
                let once = if self.lanes { "if (u.lane == 0) " } else { "" };
                self.w(format!(
                    "  pc_write({d}, (int)(sizeof({d}) / 4), (int){v}); {once}atomicAdd(&s.writes[{flat}], 1);"
                ));
            }
            MemOp::WritePart {
                buf,
                offset,
                bytes,
                version,
            } => {
                let d = self.placed(code, buf, false, "  ");
                let (off, per_lane) = self.offset(code, offset);
                let n = self.expr(code, bytes);
                let v = self.expr(code, version);
                let flat = self.flat_buf(code, buf);
                // At a per-lane offset each lane writes its own part, a write of its own (the
                // model counts one per lane); otherwise the lanes' writes of one part count once.
                let once = if self.lanes && !per_lane { "if (u.lane == 0) " } else { "" };
                self.w(format!(
                    "  if ({n} % 4 != 0 || {n} <= 0 || {off} % 4 != 0 || {off} < 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
                ));
                self.w(format!(
                    "  pc_write((int*)((char*){d} + {off}), (int)({n} / 4), (int){v}); {once}atomicAdd(&s.writes[{flat}], 1);  // part of the buffer"
                ));
            }
            // A counter's value is the first word of its (16-byte) cell. The add is the
            // hardware's own relaxed cluster-scope reduction: `red.shared::cluster` on the own
            // CTA's address (a shared::cta address is one of the own CTA in the cluster window);
            // a peer's counter is added to in `remote_op`, through `mapa`.
            MemOp::AtomicAdd { buf, value } => {
                let d = self.placed(code, buf, false, "  ");
                let v = self.expr(code, value);
                self.w(format!(
                    "  pc_red_add_cluster(pc_smem({d}), (int){v});  // red.relaxed.cluster.shared::cluster.add.u32 (atomicAdd)"
                ));
            }
            MemOp::ReadCounter { buf, expect } => {
                let d = self.placed(code, buf, false, "  ");
                self.w(format!("  {{ int v = *(volatile int*){d};  // a plain load of the counter"));
                if rec == Some(Recorded::Read) {
                    self.w(format!("    {}", self.record(0, "v")));
                    if let Some(e) = expect {
                        let e = self.expr(code, e);
                        self.w(format!("    if ((i64)v != {e}) th.nbad++;  // not the expected value"));
                    }
                }
                self.w("  }");
            }
            MemOp::ReadPart { buf, offset, bytes, .. } => {
                let d = self.placed(code, buf, false, "  ");
                let (off, _) = self.offset(code, offset);
                let n = self.expr(code, bytes);
                self.w(format!(
                    "  if ({n} % 4 != 0 || {n} <= 0 || {off} % 4 != 0 || {off} < 0 || {off} + {n} > (i64)sizeof({d})) {{ th.status = PC_UNSUPPORTED; return; }}"
                ));
                self.w(format!(
                    "  (void)pc_read((int*)((char*){d} + {off}), (int)({n} / 4));  // part of the buffer (not recorded)"
                ));
            }
        }
    }

    /// The offset of a partial access, and whether it is a per-lane offset: on the lanes of a
    /// uniform agent an offset that reads `lane`, `tid` or `gtid` is evaluated by each lane with
    /// its own identity (docs/language.md, "Warp-uniform roles"), as the model evaluates it once
    /// per lane; any other is the agent's.
    fn offset(&mut self, code: &Code, offset: &IExpr) -> (String, bool) {
        let per_lane = self.lanes && self.remote.is_none() && offset.reads_identity();
        self.lane_identity = per_lane;
        let off = self.expr(code, offset);
        self.lane_identity = false;
        (off, per_lane)
    }
}
