//! Walks over a role's syntax tree that the summary asks before it encodes a block: which
//! statements a block holds (barrier operations, returns, assignments, `syncthreads`) and
//! whether it reads a thread's identity.

use phasecheck_model::lang::ast::{self, ExprKind, OpKind, StmtKind};

fn expr_uses_identity(e: &ast::Expr) -> bool {
    match &e.kind {
        ExprKind::Name(n) => matches!(n.as_str(), "tid" | "gtid" | "lane" | "warp"),
        ExprKind::Int(_) | ExprKind::RoleCount(_) => false,
        ExprKind::Unary(_, a) => expr_uses_identity(a),
        ExprKind::Binary(_, a, b) => expr_uses_identity(a) || expr_uses_identity(b),
    }
}

/// Whether any expression of the block names `tid`, `gtid`, `lane` or `warp` (then each thread
/// is its own class; not `cta`: every CTA of a cluster has classes of its own). A local that
/// shadows one of those names counts too: conservative.
pub(super) fn uses_identity(b: &ast::Block) -> bool {
    let mut found = false;
    visit_exprs(b, &mut |e| found |= expr_uses_identity(e));
    found
}

fn visit_exprs(b: &ast::Block, f: &mut dyn FnMut(&ast::Expr)) {
    for s in &b.stmts {
        match &s.kind {
            StmtKind::Let { value, .. } | StmtKind::Assign { value, .. } => match value {
                ast::Value::Expr(e) => f(e),
                ast::Value::Op(o) => o.each_expr(f),
            },
            StmtKind::For { lo, hi, body, .. } => {
                f(lo);
                f(hi);
                visit_exprs(body, f)
            }
            StmtKind::If { cond, then, els } => {
                f(cond);
                visit_exprs(then, f);
                if let Some(e) = els {
                    visit_exprs(e, f)
                }
            }
            StmtKind::While { cond, body } => {
                f(cond);
                visit_exprs(body, f)
            }
            StmtKind::Op(o) => o.each_expr(f),
            StmtKind::Assert(e) | StmtKind::SyncWarpMask(e) => f(e),
            StmtKind::Call { args, .. } => args.iter().for_each(|a| f(a)),
            _ => {}
        }
    }
}

pub(super) fn block_has_barrier_ops(b: &ast::Block) -> bool {
    b.stmts.iter().any(|s| match &s.kind {
        StmtKind::Op(o) => o.kind.object() != ast::Object::Memory || matches!(o.kind, OpKind::ReadPart { .. }),
        StmtKind::Let {
            value: ast::Value::Op(_), ..
        }
        | StmtKind::Assign {
            value: ast::Value::Op(_), ..
        } => true,
        StmtKind::For { body, .. } => block_has_barrier_ops(body),
        StmtKind::If { then, els, .. } => block_has_barrier_ops(then) || els.as_ref().is_some_and(block_has_barrier_ops),
        // Not summarised: counted as barrier operations so that prove refuses them.
        StmtKind::While { .. }
        | StmtKind::Call { .. }
        | StmtKind::SyncWarpMask(_)
        | StmtKind::Break
        | StmtKind::SyncWarp
        | StmtKind::SyncThreads => true,
        _ => false,
    })
}

pub(super) fn block_returns(b: &ast::Block) -> bool {
    b.stmts.iter().any(|s| match &s.kind {
        StmtKind::Return => true,
        StmtKind::For { body, .. } => block_returns(body),
        StmtKind::If { then, els, .. } => block_returns(then) || els.as_ref().is_some_and(block_returns),
        _ => false,
    })
}

/// Every path through the block ends in `return`.
pub(super) fn block_returns_always(b: &ast::Block) -> bool {
    b.stmts.iter().any(|s| match &s.kind {
        StmtKind::Return => true,
        StmtKind::If { then, els: Some(e), .. } => block_returns_always(then) && block_returns_always(e),
        _ => false,
    })
}

/// The names a block assigns (`x = ...`), nested blocks included.
pub(super) fn block_assigns(b: &ast::Block) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(b: &ast::Block, out: &mut Vec<String>) {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Assign { name, .. } => {
                    if !out.contains(&name.name) {
                        out.push(name.name.clone())
                    }
                }
                StmtKind::For { body, .. } | StmtKind::While { body, .. } => walk(body, out),
                StmtKind::If { then, els, .. } => {
                    walk(then, out);
                    if let Some(e) = els {
                        walk(e, out)
                    }
                }
                _ => {}
            }
        }
    }
    walk(b, &mut out);
    out
}

/// Whether a block runs `syncthreads` anywhere.
pub(super) fn block_syncs_cta(b: &ast::Block) -> bool {
    b.stmts.iter().any(|s| match &s.kind {
        StmtKind::SyncThreads => true,
        StmtKind::For { body, .. } | StmtKind::While { body, .. } => block_syncs_cta(body),
        StmtKind::If { then, els, .. } => block_syncs_cta(then) || els.as_ref().is_some_and(block_syncs_cta),
        _ => false,
    })
}

/// Whether a block calls an inline function anywhere.
pub(super) fn block_calls(b: &ast::Block) -> bool {
    b.stmts.iter().any(|s| match &s.kind {
        StmtKind::Call { .. } => true,
        StmtKind::For { body, .. } | StmtKind::While { body, .. } => block_calls(body),
        StmtKind::If { then, els, .. } => block_calls(then) || els.as_ref().is_some_and(block_calls),
        _ => false,
    })
}

/// Whether a block holds a `break` that leaves it (not one inside a nested `for`/`while`).
pub(super) fn block_breaks(b: &ast::Block) -> bool {
    b.stmts.iter().any(|s| match &s.kind {
        StmtKind::Break => true,
        StmtKind::If { then, els, .. } => block_breaks(then) || els.as_ref().is_some_and(block_breaks),
        _ => false,
    })
}

fn op_is(s: &ast::Stmt, f: &dyn Fn(&OpKind) -> bool) -> bool {
    match &s.kind {
        StmtKind::Op(o) => f(&o.kind),
        StmtKind::Let {
            value: ast::Value::Op(o), ..
        }
        | StmtKind::Assign {
            value: ast::Value::Op(o), ..
        } => f(&o.kind),
        _ => false,
    }
}

fn any_stmt(b: &ast::Block, f: &dyn Fn(&ast::Stmt) -> bool) -> bool {
    b.stmts.iter().any(|s| {
        f(s) || match &s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => any_stmt(body, f),
            StmtKind::If { then, els, .. } => any_stmt(then, f) || els.as_ref().is_some_and(|e| any_stmt(e, f)),
            _ => false,
        }
    })
}

/// Whether a block runs a warp-batched `commit` anywhere.
pub(super) fn block_commits(b: &ast::Block) -> bool {
    any_stmt(b, &|s| op_is(s, &|k| matches!(k, OpKind::Commit { .. })))
}

/// Whether a block runs `elect()` anywhere.
pub(super) fn block_elects(b: &ast::Block) -> bool {
    any_stmt(b, &|s| op_is(s, &|k| matches!(k, OpKind::Elect)))
}

/// Whether a branch or loop may leave the lanes of a warp that run one code on different
/// paths: a spin (each lane polls its own number of times), an `elect()` inside it, or, in a
/// role that elects, any `if` (it may test an `elect()` result). Conservative.
pub(super) fn stmt_diverges(s: &ast::Stmt, elects: bool) -> bool {
    let blk = ast::Block {
        stmts: vec![s.clone()],
        span: s.span,
    };
    any_stmt(&blk, &|x| {
        matches!(x.kind, StmtKind::While { .. } | StmtKind::Call { .. } | StmtKind::Break)
            || (elects && matches!(x.kind, StmtKind::If { .. }))
            || op_is(x, &|k| matches!(k, OpKind::Elect))
    })
}
