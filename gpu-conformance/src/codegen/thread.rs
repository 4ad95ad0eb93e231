//! A thread's own instructions: locals, shared vars, control flow and assertions, and the
//! replay turnstile every model step goes through (the prelude's `turnstile.cuh`).

use super::Gen;
use phasecheck_model::program::ir::*;

impl Gen<'_> {
    /// An instruction of the thread's control and data flow (`InstrKind::SetLocal`, `SetVar`,
    /// `Jump`, `Branch`, `Assert`, `Return`, `Work`) at pc `i`; `step`: it is a model step.
    pub(super) fn thread_instr(&mut self, code: &Code, i: usize, step: bool) {
        match &code.instrs[i].kind {
            InstrKind::SetLocal { slot, expr } => {
                let e = self.expr(code, expr);
                self.w(format!("  {} = {e};", Self::local_name(code, *slot)));
            }
            InstrKind::SetVar { var, expr } => {
                let e = self.expr(code, expr);
                self.w(format!("  s.{} = {e};", self.var_name(*var)));
            }
            InstrKind::Jump { to } if code.has_while && (*to as usize) <= i => self.w(format!(
                "  if (!pc_loop_ok(th)) return;  // a loop that spins past every bound: hung\n  goto L{to};"
            )),
            InstrKind::Jump { to } => self.w(format!("  goto L{to};")),
            InstrKind::Branch { cond, else_to } => {
                let c = self.expr(code, cond);
                // In a role with a commit, every decision goes onto the thread's branch path.
                let push = if self.track {
                    format!(" if (!pc_path_push(th, &s.lanes[th.t], {i}, taken)) return;")
                } else {
                    String::new()
                };
                if step {
                    self.w(format!(
                        "  {{ bool taken = {c}; pc_turn_end(th, th.turnp);{push} if (!taken) goto L{else_to}; }}"
                    ));
                } else if self.track {
                    self.w(format!("  {{ bool taken = {c};{push} if (!taken) goto L{else_to}; }}"));
                } else {
                    self.w(format!("  if (!{c}) goto L{else_to};"));
                }
            }
            InstrKind::Assert(e) => {
                let c = self.expr(code, e);
                self.w(format!("  if (!{c}) {{ th.status = PC_ASSERT; return; }}"));
            }
            InstrKind::Return => self.w("  return;"),
            InstrKind::Work => self.w("  // independent local work: nothing shared"),
            _ => unreachable!("not a thread instruction"),
        }
    }

    /// The start of a model step: a turn of the thread, or of an agent's lanes together.
    pub(super) fn turn_begin(&self) -> &'static str {
        if self.lanes {
            "if (!pc_u_begin(th, u, th.turnp, NT)) return;"
        } else if self.uni {
            "if (!pc_turn_begin(th, th.turnp, NT)) return; pc_u_tick(u);"
        } else {
            "if (!pc_turn_begin(th, th.turnp, NT)) return;"
        }
    }

    /// The end of a model step.
    pub(super) fn turn_end(&self) -> &'static str {
        if self.lanes {
            "if (!pc_u_end(th, u, th.turnp)) return;"
        } else {
            "pc_turn_end(th, th.turnp);"
        }
    }
}
