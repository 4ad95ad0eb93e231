//! The copy statements (TMA-style copies whole or in part, `st_async`, sm_80 `cp.async` with
//! its arrive-ons and groups) issued to the copy engines of `engines.rs`; the runtime's side of
//! model/src/rt/copies.rs.

use crate::barrier::Ub;
use crate::interp::{Ctx, Stop, World};
use phasecheck_model::program::ir::{CopyOp, IExpr, Ref, MAX_COUNT};
use phasecheck_model::ViolationKind;
use std::sync::atomic::Ordering::Relaxed;

/// Whether a directed run can follow the copy: the whole-buffer TMA copy lands in one turn;
/// cp.async queues and byte ranges land in pieces the turnstile does not schedule.
pub(crate) fn directed(op: &CopyOp) -> bool {
    matches!(op, CopyOp::Copy { .. })
}

impl World {
    pub(crate) fn copy_op(&self, op: &CopyOp, ctx: &mut Ctx) -> Result<Option<i64>, Stop> {
        match op {
            CopyOp::CopyFrom { .. } => unreachable!("supported() refuses copies from shared memory by name"),
            // Refused by `supported` (the runtime's copy engines read no descriptor).
            CopyOp::Tensor { .. } => Err(Stop::Ub(Ub::new(
                ViolationKind::Assertion,
                "the runtime does not model TMA descriptors in shared memory",
            ))),
            CopyOp::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => {
                let d = self.buf(buf, ctx)?;
                let (off, n) = (self.eval(offset, ctx)?, self.eval(bytes, ctx)?);
                let version = match version {
                    Some(e) => self.eval(e, ctx)?,
                    None => self.writes[d].load(Relaxed),
                };
                self.cp_async(ctx, d, off, n, version)?;
                Ok(None)
            }
            CopyOp::CpAsyncArrive { bar, noinc } => {
                let b = self.bar(bar, ctx)?;
                self.cp_async_arrive(ctx, b, *noinc)?;
                Ok(None)
            }
            CopyOp::CpAsyncCommitGroup => {
                self.cp_async_commit(ctx)?;
                Ok(None)
            }
            CopyOp::CpAsyncWait { n } => {
                let keep = match n {
                    None => {
                        self.cp_async_commit(ctx)?;
                        0
                    }
                    Some(e) => {
                        let k = self.eval(e, ctx)?;
                        if !(0..=7).contains(&k) {
                            return Err(Stop::Ub(Ub::new(
                                ViolationKind::Assertion,
                                format!("cp_async_wait_group({k}): PTX takes 0 to 7 groups"),
                            )));
                        }
                        k
                    }
                };
                self.cp_async_wait(ctx, keep)?;
                Ok(None)
            }
            CopyOp::CopyPart {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => self.part_copy(ctx, buf, bar, offset, bytes, version, false),
            CopyOp::StAsync {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => self.part_copy(ctx, buf, bar, offset, bytes, &Some(version.clone()), true),
            CopyOp::Copy { buf, bar, bytes, version } => {
                let d = self.buf(buf, ctx)?;
                let b = self.bar(bar, ctx)?;
                let bytes = match bytes {
                    Some(e) => self.eval(e, ctx)?,
                    None => self.proto.buffers[d].bytes,
                };
                let version = self.copy_checks(d, b, bytes, version, ctx)?;
                self.issue_copy(ctx, d, b, bytes, version, None);
                Ok(None)
            }
        }
    }

    /// A copy into bytes `offset .. offset + bytes` of a buffer: a TMA-style partial copy, or an
    /// `st_async` (`registers`: 4, 8 or 16 bytes from registers, at an offset aligned to them).
    #[allow(clippy::too_many_arguments)]
    fn part_copy(
        &self,
        ctx: &mut Ctx,
        buf: &Ref,
        bar: &Ref,
        offset: &IExpr,
        bytes: &IExpr,
        version: &Option<IExpr>,
        registers: bool,
    ) -> Result<Option<i64>, Stop> {
        let d = self.buf(buf, ctx)?;
        let b = self.bar(bar, ctx)?;
        let (off, n) = (self.eval(offset, ctx)?, self.eval(bytes, ctx)?);
        if registers && (![4, 8, 16].contains(&n) || off % n != 0) {
            return Err(Stop::Ub(Ub::new(
                ViolationKind::Assertion,
                format!("st_async of {n} bytes at offset {off}: st.async stores 4, 8 or 16 bytes at an address aligned to its size"),
            )));
        }
        let version = self.copy_checks(d, b, n, version, ctx)?;
        self.range_ok(d, off, off + n)?;
        self.issue_copy(ctx, d, b, n, version, Some((off, off + n)));
        Ok(None)
    }

    /// What a TMA-style copy checks before it is issued (its barrier alive, its byte count within
    /// the tx range), and its version (the buffer's next write unless named).
    fn copy_checks(&self, d: usize, b: usize, bytes: i64, version: &Option<IExpr>, ctx: &mut Ctx) -> Result<i64, Stop> {
        let version = match version {
            Some(e) => self.eval(e, ctx)?,
            None => self.writes[d].load(Relaxed),
        };
        self.barriers[b].live("copy_async")?;
        if !(0..=MAX_COUNT).contains(&bytes) {
            return Err(Stop::Ub(Ub::new(
                ViolationKind::TxRange,
                format!("the byte count of the copy into {} is {bytes}", self.proto.buffers[d].name),
            )));
        }
        Ok(version)
    }
}
