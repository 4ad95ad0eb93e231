//! Which statement last assigned each local of a thread, along a trace: the def-use walk that
//! takes a wrong parity or phase back to the `let` or assignment that produced it.
//!
//! The search and the trace keep only visible steps; the local instructions a step runs after
//! its visible one (assignments, branches, jumps) are re-run here on the thread's locals, from
//! the state before the step to the pc of the state after it. Where that cannot be followed (a
//! condition that reads a shared var, a result the model computed), the locals whose value
//! changed are marked as written by an unknown statement, so a cause never names a writer it
//! did not see.

use phasecheck_model::lang::ast::Span;
use phasecheck_model::program::ir::{Code, InstrKind, ThreadInfo};
use phasecheck_model::rt::path::Replay;
use phasecheck_model::rt::state::ThreadState;
use phasecheck_model::rt::{Action, Model};

/// Marks, in a set of reached pcs, a branch that was seen to skip its body (`pc | SKIPPED`).
pub const SKIPPED: u32 = 1 << 31;

/// How many local instructions one step may run before the walk gives up (the model's own
/// budget is larger; a trace's steps run few).
const WALK_BUDGET: usize = 1 << 16;

/// Per thread and local slot: the span of the statement that last assigned it (`None`: not
/// assigned yet, or by a statement the walk could not follow).
pub type Table = Vec<Vec<Option<Span>>>;

/// The writers of every thread's locals as they stand before step `upto` (0-based) of the trace
/// `actions` (all of it when `upto` is past the end).
pub fn writers_before(model: &Model, actions: &[Action], upto: usize) -> Table {
    let mut reached = Vec::new();
    walk_trace(model, actions, upto, &mut reached)
}

/// Per role: the instructions (pcs) some thread of it ran along `actions`, local ones included.
pub fn reached(model: &Model, actions: &[Action], into: &mut Vec<std::collections::BTreeSet<u32>>) {
    walk_trace(model, actions, actions.len(), into);
}

fn walk_trace(model: &Model, actions: &[Action], upto: usize, reached: &mut Vec<std::collections::BTreeSet<u32>>) -> Table {
    let p = &model.proto;
    reached.resize(p.roles.len(), Default::default());
    let (mut r, init) = Replay::start(model);
    let mut table: Table = (0..p.threads.len()).map(|t| vec![None; p.code_of(t).local_names.len()]).collect();
    if let Some(s) = &init.next {
        for t in 0..p.threads.len() {
            let zero = vec![0; s.threads[t].locals.len()];
            let seen = &mut reached[p.threads[t].role as usize];
            walk(p.code_of(t), &p.threads[t], &mut table[t], &zero, 0, None, &s.threads[t], seen);
        }
    }
    for &a in actions.iter().take(upto) {
        let Ok(stepped) = r.take(a) else { break };
        let Action::Thread(t) = a else { continue };
        let t = t as usize;
        let Some(after) = stepped.outcome.next.as_ref() else { break };
        let before = &stepped.before.threads[t];
        if before.pc == after.threads[t].pc && before.locals == after.threads[t].locals {
            continue; // a step that leaves the thread where it was (an arrival before a wait)
        }
        let code = p.code_of(t);
        walk(
            code,
            &p.threads[t],
            &mut table[t],
            &before.locals,
            before.pc,
            Some(before.pc),
            &after.threads[t],
            &mut reached[p.threads[t].role as usize],
        );
    }
    table
}

/// Re-run the instructions from `pc` (the visible one at `visible`, whose result the model
/// computed, then the local ones) until the thread stands where `after` does, recording writers.
#[allow(clippy::too_many_arguments)]
fn walk(
    code: &Code,
    me: &ThreadInfo,
    writers: &mut [Option<Span>],
    start: &[i64],
    mut pc: u32,
    visible: Option<u32>,
    after: &ThreadState,
    seen: &mut std::collections::BTreeSet<u32>,
) {
    let mut locals = start.to_vec();
    let mut followed = true;
    let mut first = true;
    for _ in 0..WALK_BUDGET {
        if !first && pc == after.pc {
            break;
        }
        let Some(instr) = code.instrs.get(pc as usize) else {
            break;
        };
        let is_visible_step = first && visible == Some(pc);
        first = false;
        if instr.visible && !is_visible_step {
            followed = pc == after.pc;
            break;
        }
        // A branch counts as run only where its outcome was followed.
        if !matches!(instr.kind, InstrKind::Branch { .. }) {
            seen.insert(pc);
        }
        match &instr.kind {
            InstrKind::SetLocal { slot, expr } => {
                let s = *slot as usize;
                match expr.eval_pure(&locals, me) {
                    Some(v) => locals[s] = v,
                    None => locals[s] = after.locals[s],
                }
                writers[s] = Some(instr.span);
                pc += 1;
            }
            InstrKind::Op { result: Some(slot), .. } | InstrKind::Elect { slot } => {
                let s = *slot as usize;
                locals[s] = after.locals[s];
                writers[s] = Some(instr.span);
                pc += 1;
            }
            InstrKind::Jump { to } => pc = *to,
            InstrKind::Branch { cond, else_to } => match cond.eval_pure(&locals, me) {
                Some(c) if c != 0 => {
                    seen.insert(pc);
                    pc += 1
                }
                Some(_) => {
                    seen.insert(pc);
                    seen.insert(pc | SKIPPED);
                    pc = *else_to
                }
                None => {
                    followed = false;
                    break;
                }
            },
            InstrKind::Return => break,
            _ => pc += 1,
        }
    }
    for (s, w) in writers.iter_mut().enumerate() {
        let unseen = locals.get(s) != after.locals.get(s);
        let lost = !followed && start.get(s) != after.locals.get(s);
        if unseen || lost {
            *w = None;
        }
    }
}

/// The locals an expression reads.
pub fn locals_read(e: &phasecheck_model::program::ir::IExpr) -> Vec<u16> {
    let mut out = Vec::new();
    e.each(&mut |x| {
        if let phasecheck_model::program::ir::IExpr::Local(s) = x {
            if !out.contains(s) {
                out.push(*s);
            }
        }
    });
    out
}
