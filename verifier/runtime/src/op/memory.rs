//! Reads and writes of shared buffers, whole or in part; the runtime's side of
//! model/src/rt/memory.rs.

use crate::interp::{Ctx, Stop, World};
use phasecheck_model::program::ir::MemOp;
use phasecheck_verifier::outcomes::Recorded;
use std::sync::atomic::Ordering::Relaxed;

/// Whether a directed run can follow the access: byte ranges it does not.
pub(crate) fn directed(op: &MemOp) -> bool {
    matches!(op, MemOp::Read { .. } | MemOp::Write { .. })
}

impl World {
    pub(crate) fn mem_op(&self, op: &MemOp, ctx: &mut Ctx, rec: Option<Recorded>) -> Result<Option<i64>, Stop> {
        match op {
            MemOp::ReadPart {
                buf,
                offset,
                bytes,
                expect,
            } => {
                let d = self.buf(buf, ctx)?;
                let (off, n) = (self.eval(offset, ctx)?, self.eval(bytes, ctx)?);
                let want = match expect {
                    Some(e) => Some(self.eval(e, ctx)?),
                    None => None,
                };
                self.range_ok(d, off, off + n)?;
                let got = self.buf_get_range(d, off, off + n);
                self.observe_read(ctx, d, got, want, rec);
                Ok(Some(got))
            }
            MemOp::Read { buf, expect } => {
                let d = self.buf(buf, ctx)?;
                let want = match expect {
                    Some(e) => Some(self.eval(e, ctx)?),
                    None => None,
                };
                let got = self.buf_get(d);
                self.observe_read(ctx, d, got, want, rec);
                Ok(Some(got))
            }
            MemOp::Write { buf, version } => {
                let d = self.buf(buf, ctx)?;
                let v = self.eval(version, ctx)?;
                self.buf_set(d, v);
                self.writes[d].fetch_add(1, Relaxed);
                Ok(None)
            }
            MemOp::AtomicAdd { .. } | MemOp::ReadCounter { .. } => unreachable!("refused before the run: counters have no engine here"),
            MemOp::WritePart {
                buf,
                offset,
                bytes,
                version,
            } => {
                let d = self.buf(buf, ctx)?;
                let (off, n) = (self.eval(offset, ctx)?, self.eval(bytes, ctx)?);
                let v = self.eval(version, ctx)?;
                self.range_ok(d, off, off + n)?;
                self.buf_set_range(d, off, off + n, v);
                self.writes[d].fetch_add(1, Relaxed);
                Ok(None)
            }
        }
    }

    /// A read's observation: a stale version is noted, a recorded read joins the outcome.
    fn observe_read(&self, ctx: &mut Ctx, d: usize, got: i64, want: Option<i64>, rec: Option<Recorded>) {
        if let Some(w) = want.filter(|w| *w != got) {
            self.note(
                &self.stale_reads,
                format!("a read of {} saw version {got}, the protocol means {w}", self.proto.buffers[d].name),
            );
        }
        if let Some(o) = ctx.out.as_deref_mut() {
            if rec == Some(Recorded::Read) {
                o.reads.push(got);
            }
        }
    }
}
