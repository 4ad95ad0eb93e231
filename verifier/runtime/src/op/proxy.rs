//! The async proxy's statements (TMA stores, bulk groups, wgmma reads, proxy fences) on the
//! proxy engine of `proxy.rs`; the runtime's side of model/src/rt/proxy.rs.

use crate::barrier::Ub;
use crate::interp::{Ctx, Stop, World};
use phasecheck_model::program::ir::ProxyOp;
use phasecheck_model::ViolationKind;

impl World {
    pub(crate) fn proxy_op(&self, op: &ProxyOp, ctx: &mut Ctx) -> Result<Option<i64>, Stop> {
        match op {
            // The async proxy (proxy.rs); a negative group count is the model's assertion.
            ProxyOp::WaitGroup { n, .. } | ProxyOp::WgmmaWait { n, .. } => {
                let keep = self.eval(n, ctx)?;
                if keep < 0 {
                    return Err(Stop::Ub(Ub::new(ViolationKind::Assertion, "a negative group count")));
                }
                self.proxy_retire(ctx, matches!(op, ProxyOp::WgmmaWait { .. }), keep)?;
                Ok(None)
            }
            // Refused by `supported` (the runtime's proxy engine reads no descriptor).
            ProxyOp::FenceProxyTensormap { .. } => Err(Stop::Ub(Ub::new(
                ViolationKind::Assertion,
                "the runtime does not model TMA descriptors in shared memory",
            ))),
            // Refused by `supported` (the runtime's proxy engine reads whole buffers).
            ProxyOp::StorePartAsync { .. } => Err(Stop::Ub(Ub::new(
                ViolationKind::Assertion,
                "the runtime does not model a TMA store of part of a buffer",
            ))),
            ProxyOp::StoreAsync { buf } => {
                let d = self.buf(buf, ctx)?;
                self.proxy_read_issue(ctx, d, false)?;
                Ok(None)
            }
            ProxyOp::Wgmma { bufs, .. } => {
                let ds = bufs.iter().map(|b| self.buf(b, ctx)).collect::<Result<Vec<_>, _>>()?;
                self.proxy_age(ctx, true)?;
                for d in ds {
                    self.proxy_read_issue(ctx, d, true)?;
                }
                Ok(None)
            }
            ProxyOp::CommitGroup => {
                self.proxy_age(ctx, false)?;
                Ok(None)
            }
            ProxyOp::FenceProxyAsync | ProxyOp::FenceMbarrierInit => Ok(None),
        }
    }
}
