//! The mbarrier: arrivals (with a drop or an expect_tx), waits and probes on a token or a
//! parity, the tx-count, init and inval, and the check that a token is waited on at the array
//! element it came from. The PTX forms are the prelude's `mbarrier_ptx.cuh`; the libcu++ backend
//! calls `cuda::barrier` where it has an API, and the same PTX through `pc_native` where it has
//! none. A barrier with a completion function is a libcu++ software barrier (`is_software`).

use super::expr::ident;
use super::{Backend, Gen, NotExpressible};
use phasecheck_model::program::ir::*;
use phasecheck_verifier::outcomes::Recorded;
use std::collections::HashSet;

impl Gen<'_> {
    /// An mbarrier operation of the spec (`MbarOp::Arrive`, `Wait`, `ExpectTx`, `CompleteTx`,
    /// `Init`, `Inval`); `rec` says what of it the outcome records.
    pub(super) fn mbarrier_op(
        &mut self,
        code: &Code,
        op: &MbarOp,
        result: Option<u16>,
        token_slots: &HashSet<u16>,
        rec: Option<Recorded>,
    ) -> Result<(), NotExpressible> {
        let libcu = self.backend == Backend::Libcu;
        let set = |v: String| match result {
            Some(r) => format!("{} = (i64)({v});", Self::local_name(code, r)),
            None => format!("(void)({v});"),
        };
        match op {
            MbarOp::Arrive { bar, n, drop, expect_tx } => {
                let b = self.placed(code, bar, true, "  ");
                let n = self.expr(code, n);
                let tok_var = "tok";
                let soft = self.is_software(bar);
                let call = match (libcu, drop, expect_tx) {
                    (false, true, _) => format!("pc_mbar_arrive_drop(&{b}, (int){n})"),
                    (false, false, Some(tx)) => format!("pc_mbar_arrive_expect_tx(&{b}, (int){})", self.expr(code, tx)),
                    (false, false, None) => format!("pc_mbar_arrive(&{b}, (int){n})"),
                    (true, true, _) => {
                        self.w(format!("  {b}.arrive_and_drop();"));
                        return Ok(());
                    }
                    (true, false, Some(tx)) => {
                        format!(
                            "cuda::device::barrier_arrive_tx({b}, (ptrdiff_t){n}, (ptrdiff_t){})",
                            self.expr(code, tx)
                        )
                    }
                    (true, false, None) => format!("{b}.arrive((ptrdiff_t){n})"),
                };
                if *drop {
                    self.w(format!("  (void){call};"));
                    return Ok(());
                }
                let parity = if libcu && soft {
                    // Software barrier (completion function): the token is the phase parity.
                    format!("(int)(bool){tok_var}")
                } else {
                    format!("pc_state_parity((u64){tok_var})")
                };
                self.w(format!("  {{ auto {tok_var} = {call};"));
                if rec == Some(Recorded::Token) {
                    self.w(format!("    {}", self.record(2, &parity)));
                }
                if let Some(r) = result {
                    self.w(format!("    {} = (i64){tok_var};  // the token", Self::local_name(code, r)));
                }
                self.w("  }");
            }
            MbarOp::Wait { bar, target, try_ } => {
                let b = self.placed(code, bar, true, "  ");
                let soft = self.is_software(bar);
                // A token held in a local written by an arrive is the raw barrier token; anything
                // else (a literal phase, an expression) names a phase by its parity.
                let (is_token, arg) = match target {
                    WaitTarget::Token(IExpr::Local(s)) if token_slots.contains(s) => (true, self.expr(code, &IExpr::Local(*s))),
                    WaitTarget::Token(e) | WaitTarget::Parity(e) => (false, format!("(int)pc_rem({}, 2)", self.expr(code, e))),
                };
                let sc = self.wait_scope();
                let test = match (libcu, soft, is_token) {
                    (true, true, true) => format!("cuda::std::__call_try_wait({b}, (bool){arg})"),
                    (true, true, false) => format!("cuda::std::__call_try_wait_parity({b}, (bool){arg})"),
                    (_, _, true) => format!("pc_mbar_test_token{sc}({}, (u64){arg})", self.native(&b)),
                    (_, _, false) => format!("pc_mbar_test_parity{sc}({}, {arg})", self.native(&b)),
                };
                if *try_ {
                    self.w(format!("  {{ bool ok = {test};  // never blocks"));
                    if rec == Some(Recorded::TryWait) {
                        self.w(format!("    {}", self.record(1, "ok")));
                    } else if self.lanes {
                        self.w("    pc_u_observe(u, 1, ok ? 1 : 0);");
                    }
                    if self.lanes {
                        // The lanes may see the phase complete at different moments; the agent
                        // goes on with the leader's answer, so that its lanes stay on one path.
                        self.w("    if (u.lane == 0) u.a->val = ok ? 1 : 0;");
                        self.w("    if (!pc_u_meet(th, u)) return;");
                        self.w("    ok = u.a->val != 0;  // the agent's answer: the leader's");
                    }
                    self.w(format!("    {} }}", set("ok ? 1 : 0".into())));
                } else {
                    let wait = match (libcu, soft, is_token) {
                        (true, true, true) => format!("pc_soft_wait_token(th, {b}, (bool){arg})"),
                        (true, true, false) => format!("pc_soft_wait_parity(th, {b}, (bool){arg})"),
                        (true, false, true) => format!(
                            "pc_mbar_wait_token{sc}(th, {}, (u64){arg})  /* = libcu++ wait(token), bounded */",
                            self.native(&b)
                        ),
                        (true, false, false) => format!(
                            "pc_mbar_wait_parity{sc}(th, {}, {arg})  /* = libcu++ wait_parity(p), bounded */",
                            self.native(&b)
                        ),
                        (false, _, true) => format!("pc_mbar_wait_token{sc}(th, &{b}, (u64){arg})"),
                        (false, _, false) => format!("pc_mbar_wait_parity{sc}(th, &{b}, {arg})"),
                    };
                    self.w(format!("  if (!{wait}) return;  // timed out: hung"));
                }
            }
            MbarOp::ExpectTx { bar, bytes } => {
                let b = self.placed(code, bar, true, "  ");
                let n = self.expr(code, bytes);
                if libcu {
                    self.w(format!("  cuda::device::barrier_expect_tx({b}, (ptrdiff_t){n});"));
                } else {
                    self.w(format!("  pc_mbar_expect_tx(&{b}, (int){n});"));
                }
            }
            MbarOp::CompleteTx { bar, bytes } => {
                let b = self.placed(code, bar, true, "  ");
                let n = self.expr(code, bytes);
                self.w(format!("  pc_mbar_complete_tx({}, (int){n});", self.native(&b)));
            }
            MbarOp::Init { bar, count } => {
                let b = self.placed(code, bar, true, "  ");
                let live_flat = self.flat_bar(code, bar);
                let g = &self.p.barrier_groups[bar.group as usize];
                let decl = self.p.barriers[g.base as usize].count;
                let count = count.as_ref().map(|e| self.expr(code, e)).unwrap_or_else(|| format!("{decl}LL"));
                match (libcu, self.group_completion[bar.group as usize]) {
                    (false, _) => {
                        self.w(format!("  pc_mbar_init(&{b}, (int){count});"));
                        self.w("  pc_fence_init();");
                    }
                    (true, None) => self.w(format!("  init(&{b}, (ptrdiff_t){count} + pc_zero());")),
                    (true, Some(c)) => {
                        let flat = self.flat_bar(code, bar);
                        self.w(format!(
                            "  init(&{b}, (ptrdiff_t){count} + pc_zero(), Completion_{}{{&s, &th.completions[{flat}]}});",
                            ident(&self.p.completions[c as usize].name)
                        ))
                    }
                }
                self.w(format!("  s.bar_live[{live_flat}] = 1;"));
            }
            MbarOp::Inval { bar } => {
                let b = self.placed(code, bar, true, "  ");
                let live_flat = self.flat_bar(code, bar);
                self.w(format!("  s.bar_live[{live_flat}] = 0;"));
                if libcu && self.is_software(bar) {
                    self.w(format!("  {b}.~barrier();  // software barrier: its life ends"));
                } else {
                    self.w(format!("  pc_mbar_inval({});", self.native(&b)));
                }
            }
        }
        Ok(())
    }

    /// Why this backend cannot express an mbarrier operation, if it cannot.
    pub(super) fn mbarrier_inexpressible(&self, op: &IOp) -> Option<String> {
        match op {
            IOp::Mbar(MbarOp::Arrive { bar, n, drop, expect_tx }) => {
                if *drop && !matches!(n, IExpr::Const(1)) && self.backend == Backend::Libcu {
                    return Some("libcu++ arrive_and_drop drops exactly one arrival".into());
                }
                if expect_tx.is_some() && self.is_software(bar) {
                    return Some(
                        "arrive_expect_tx needs a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++"
                            .into(),
                    );
                }
                None
            }
            IOp::Mbar(MbarOp::ExpectTx { bar, .. }) | IOp::Mbar(MbarOp::CompleteTx { bar, .. }) if self.is_software(bar) => {
                Some("tx-counts need a hardware mbarrier; a barrier with a completion function is a software barrier in libcu++".into())
            }
            _ => None,
        }
    }

    /// The model's check that a token is waited on at the array element it came from (an
    /// assertion there).
    pub(super) fn token_check(&mut self, code: &Code, origin: u16, index: &IExpr) {
        let o = Self::local_name(code, origin);
        let ix = self.expr(code, index);
        self.w(format!(
            "  if ({o} != 0 && {o} != {ix} + 1) {{ th.status = PC_ASSERT; return; }}  // token of another element"
        ));
    }

    /// The suffix of the mbarrier wait and probe helpers: a cluster kernel's acquire at cluster
    /// scope (`_cl`), since a peer's remote arrive may be what completes the phase.
    pub(super) fn wait_scope(&self) -> &'static str {
        if self.cluster > 1 {
            "_cl"
        } else {
            ""
        }
    }

    pub(super) fn is_software(&self, r: &Ref) -> bool {
        self.group_completion[r.group as usize].is_some()
    }

    /// The native mbarrier (u64*) behind a barrier expression.
    pub(super) fn native(&self, bar: &str) -> String {
        match self.backend {
            Backend::Ptx => format!("&{bar}"),
            Backend::Libcu => format!("pc_native({bar})"),
        }
    }
}
