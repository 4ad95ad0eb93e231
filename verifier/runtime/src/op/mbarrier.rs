//! The mbarrier statements on the runtime's barriers (`arrive`, waits, tx updates, `init`,
//! `inval`), the runtime's side of model/src/rt/mbarrier.rs.

use crate::barrier::Ub;
use crate::interp::{Ctx, Stop, World};
use phasecheck_model::program::ir::{MbarOp, WaitTarget};
use phasecheck_model::ViolationKind;
use phasecheck_verifier::outcomes::Recorded;

impl World {
    pub(crate) fn mbar_op(&self, op: &MbarOp, ctx: &mut Ctx, rec: Option<Recorded>) -> Result<Option<i64>, Stop> {
        match op {
            MbarOp::Arrive { bar, n, drop, expect_tx } => {
                let b = self.bar(bar, ctx)?;
                self.own_barrier(ctx, b, "arrive")?;
                let n = self.eval(n, ctx)?;
                let tx = match expect_tx {
                    Some(e) => Some(self.eval(e, ctx)?),
                    None => None,
                };
                let mut done = self.completion(b);
                let token = self.with_bound(|bd| self.barriers[b].arrive(n, tx, *drop, &mut done, bd))?;
                if rec == Some(Recorded::Token) {
                    if let Some(o) = ctx.out.as_deref_mut() {
                        o.token_parities.push((token % 2) as u8);
                    }
                }
                Ok(Some(token as i64))
            }
            MbarOp::Wait { bar, target, try_ } => {
                let b = self.bar(bar, ctx)?;
                let v = self.eval(target.expr(), ctx)?;
                // A token is the phase it was returned for; the hardware compares its parity.
                let parity = match target {
                    WaitTarget::Token(_) | WaitTarget::Parity(_) => v.rem_euclid(2) as u64,
                };
                if *try_ {
                    let r = self.barriers[b].try_wait_parity(parity)?;
                    if rec == Some(Recorded::TryWait) {
                        if let Some(o) = ctx.out.as_deref_mut() {
                            o.try_waits.push(r);
                        }
                    }
                    Ok(Some(r as i64))
                } else {
                    if ctx.completing.is_some() {
                        return Err(Stop::Ub(Ub::new(ViolationKind::CompletionMisuse, "a completion function waits")));
                    }
                    self.blocking(false, |bd| self.barriers[b].wait_parity(parity, bd))?;
                    Ok(None)
                }
            }
            MbarOp::ExpectTx { bar, bytes } => {
                let b = self.bar(bar, ctx)?;
                self.own_barrier(ctx, b, "expect_tx")?;
                let bytes = self.eval(bytes, ctx)?;
                let mut done = self.completion(b);
                self.with_bound(|bd| self.barriers[b].expect_tx(bytes, &mut done, bd))?;
                Ok(None)
            }
            MbarOp::CompleteTx { bar, bytes } => {
                let b = self.bar(bar, ctx)?;
                self.own_barrier(ctx, b, "complete_tx")?;
                let bytes = self.eval(bytes, ctx)?;
                let mut done = self.completion(b);
                self.with_bound(|bd| self.barriers[b].complete_tx(bytes, &mut done, bd))?;
                Ok(None)
            }
            MbarOp::Init { bar, count } => {
                let b = self.bar(bar, ctx)?;
                let c = match count {
                    Some(e) => self.eval(e, ctx)?,
                    None => self.proto.barriers[b].count,
                };
                self.barriers[b].init(c)?;
                Ok(None)
            }
            MbarOp::Inval { bar } => {
                let b = self.bar(bar, ctx)?;
                self.barriers[b].inval()?;
                Ok(None)
            }
        }
    }
}
