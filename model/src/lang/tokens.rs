//! Tokens remember the barrier they came from.
//!
//! A token is the phase an `arrive` returned; it means something only for that barrier. A
//! `wait(B2, t)` or `try_wait(B2, t)` whose `t` can only hold a token of another declared barrier
//! (`let t = arrive(B1)`) is rejected before anything runs (E040). The check is a small forward
//! data-flow over each body: a local is known to hold a token of barrier `B` when every path to
//! the wait assigned it from an arrival on `B`; any other assignment, a join of different
//! barriers, a loop with a `break` or a function call that takes it by reference forget it. It
//! compares declared names: two elements of one barrier array (`full[0]`, `full[1]`) are not told
//! apart here (the model checks those when it runs: docs/model.md).

use std::collections::HashMap;

use super::ast::*;
use super::diag::Diagnostic;

/// What a local is known to hold: a token of this barrier (its declared name), or `None`
/// (anything else, or not known).
type Env = HashMap<String, Option<String>>;

pub fn check_token_barriers(p: &Program) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for r in p.roles() {
        let mut env = Env::new();
        block(&r.body, &mut env, &mut out);
    }
    for f in p.functions() {
        let mut env = Env::new();
        block(&f.body, &mut env, &mut out);
    }
    for c in p.completions() {
        let mut env = Env::new();
        block(&c.body, &mut env, &mut out);
    }
    out
}

fn origin(v: &Value) -> Option<String> {
    match v {
        Value::Op(Op {
            kind: OpKind::Arrive { bar, .. } | OpKind::ArriveExpectTx { bar, .. },
            ..
        }) => Some(bar.name.name.clone()),
        Value::Expr(Expr {
            kind: ExprKind::Name(_), ..
        }) => None, // resolved by the caller (a copy of another local)
        _ => None,
    }
}

fn value_origin(v: &Value, env: &Env) -> Option<String> {
    match v {
        Value::Expr(Expr {
            kind: ExprKind::Name(n), ..
        }) => env.get(n).cloned().flatten(),
        _ => origin(v),
    }
}

/// Pointwise: equal facts stay, different ones are forgotten.
fn join(a: &Env, b: &Env) -> Env {
    let mut out = Env::new();
    for (k, v) in a {
        let w = b.get(k).cloned().flatten();
        out.insert(k.clone(), if *v == w { v.clone() } else { None });
    }
    for k in b.keys() {
        out.entry(k.clone()).or_insert(None);
    }
    out
}

fn has_break(b: &Block) -> bool {
    b.stmts.iter().any(|s| match &s.kind {
        StmtKind::Break => true,
        StmtKind::If { then, els, .. } => has_break(then) || els.as_ref().is_some_and(has_break),
        // A break inside a nested loop leaves that loop only.
        _ => false,
    })
}

fn block(b: &Block, env: &mut Env, out: &mut Vec<Diagnostic>) {
    let before = env.clone();
    let mut declared: Vec<String> = Vec::new();
    for s in &b.stmts {
        if let StmtKind::Let { name, .. } = &s.kind {
            declared.push(name.name.clone());
        }
        stmt(s, env, out);
    }
    // Locals declared in the block go out of scope with it.
    for n in declared {
        match before.get(&n) {
            Some(v) => {
                env.insert(n, v.clone());
            }
            None => {
                env.remove(&n);
            }
        }
    }
}

fn stmt(s: &Stmt, env: &mut Env, out: &mut Vec<Diagnostic>) {
    match &s.kind {
        StmtKind::Let { name, value } | StmtKind::Assign { name, value } => {
            if let Value::Op(op) = value {
                check_op(op, env, out);
            }
            let o = value_origin(value, env);
            env.insert(name.name.clone(), o);
        }
        StmtKind::Op(op) => check_op(op, env, out),
        StmtKind::If { then, els, .. } => {
            let mut a = env.clone();
            block(then, &mut a, out);
            let mut b = env.clone();
            if let Some(e) = els {
                block(e, &mut b, out);
            }
            *env = join(&a, &b);
        }
        StmtKind::For { body, .. } | StmtKind::While { body, .. } => {
            // Zero or more iterations: iterate to the fixed point (facts only get forgotten).
            let mut first = true;
            loop {
                let mut inner = env.clone();
                let mut sink = Vec::new();
                block(body, &mut inner, if first { &mut *out } else { &mut sink });
                first = false;
                let joined = join(env, &inner);
                if joined == *env {
                    break;
                }
                *env = joined;
            }
            if has_break(body) {
                forget_assigned(body, env);
            }
        }
        StmtKind::Call { args, .. } => {
            for a in args {
                if let ExprKind::Name(n) = &a.kind {
                    if env.contains_key(n) {
                        env.insert(n.clone(), None);
                    }
                }
            }
        }
        _ => {}
    }
}

fn forget_assigned(b: &Block, env: &mut Env) {
    for s in &b.stmts {
        match &s.kind {
            StmtKind::Assign { name, .. } => {
                if env.contains_key(&name.name) {
                    env.insert(name.name.clone(), None);
                }
            }
            StmtKind::If { then, els, .. } => {
                forget_assigned(then, env);
                if let Some(e) = els {
                    forget_assigned(e, env);
                }
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => forget_assigned(body, env),
            _ => {}
        }
    }
}

fn check_op(op: &Op, env: &Env, out: &mut Vec<Diagnostic>) {
    let (bar, token) = match &op.kind {
        OpKind::Wait { bar, token } | OpKind::TryWait { bar, token } => (bar, token),
        _ => return,
    };
    let ExprKind::Name(n) = &token.kind else { return };
    let Some(Some(from)) = env.get(n) else { return };
    if *from != bar.name.name {
        out.push(Diagnostic::new(
            "E040",
            token.span,
            format!(
                "`{n}` holds a token of barrier `{from}`, but this `{}` is on `{}`; a token names a phase of the barrier it came from only, so wait with it on `{from}` (or use `wait_parity`)",
                op.kind.keyword(),
                bar.name.name
            ),
        ));
    }
}
