//! Walks over a role's syntax tree that the summary asks before it encodes a block: which
//! statements a block holds (barrier operations, returns, assignments, `syncthreads`) and
//! whether it reads a thread's identity.

use phasecheck_model::lang::ast::{self, ExprKind, OpKind, StmtKind};

fn expr_uses_identity(e: &ast::Expr) -> bool {
    match &e.kind {
        ExprKind::Name(n) => matches!(n.as_str(), "tid" | "gtid" | "lane" | "warp" | "cta"),
        ExprKind::Int(_) | ExprKind::RoleCount(_) => false,
        ExprKind::Unary(_, a) => expr_uses_identity(a),
        ExprKind::Binary(_, a, b) => expr_uses_identity(a) || expr_uses_identity(b),
    }
}

/// Whether any expression of the block names `tid`, `gtid`, `lane` or `warp` (then each thread
/// is its own class). A local that shadows one of those names counts too: conservative.
pub(super) fn uses_identity(b: &ast::Block) -> bool {
    let mut found = false;
    visit_exprs(b, &mut |e| found |= expr_uses_identity(e));
    found
}

fn visit_exprs(b: &ast::Block, f: &mut dyn FnMut(&ast::Expr)) {
    fn place(p: &ast::Place, f: &mut dyn FnMut(&ast::Expr)) {
        if let Some(i) = &p.index {
            f(i)
        }
    }
    fn op(o: &ast::Op, f: &mut dyn FnMut(&ast::Expr)) {
        match &o.kind {
            OpKind::Arrive { bar, n } => {
                place(bar, f);
                if let Some(n) = n {
                    f(n)
                }
            }
            OpKind::ArriveExpectTx { bar, bytes } | OpKind::ExpectTx { bar, bytes } | OpKind::CompleteTx { bar, bytes } => {
                place(bar, f);
                f(bytes)
            }
            OpKind::Wait { bar, token: e }
            | OpKind::WaitParity { bar, parity: e }
            | OpKind::TryWait { bar, token: e }
            | OpKind::TryWaitParity { bar, parity: e } => {
                place(bar, f);
                f(e)
            }
            OpKind::ArriveAndWait { bar } | OpKind::ArriveAndDrop { bar } | OpKind::Inval { bar } | OpKind::Commit { bar } => place(bar, f),
            OpKind::Elect => {}
            OpKind::CopyAsync { buf, bar, bytes, version } | OpKind::MemcpyAsync { buf, bar, bytes, version } => {
                place(buf, f);
                place(bar, f);
                if let Some(b) = bytes {
                    f(b)
                }
                if let Some(v) = version {
                    f(v)
                }
            }
            OpKind::Read { buf, expect } => {
                place(buf, f);
                if let Some(e) = expect {
                    f(e)
                }
            }
            OpKind::Write { buf, version } => {
                place(buf, f);
                f(version)
            }
            OpKind::Init { bar, count } => {
                place(bar, f);
                if let Some(c) = count {
                    f(c)
                }
            }
            // Named barriers.
            OpKind::BarSync { id, count } | OpKind::BarArrive { id, count } => {
                f(id);
                f(count)
            }
            OpKind::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => {
                place(buf, f);
                for e in [offset, bytes, version].into_iter().flatten() {
                    f(e)
                }
            }
            OpKind::CpAsyncArrive { bar, .. } => place(bar, f),
            OpKind::CopyAsyncPart {
                buf,
                bar,
                offset,
                bytes,
                version,
                ..
            } => {
                place(buf, f);
                place(bar, f);
                f(offset);
                for e in [bytes, version].into_iter().flatten() {
                    f(e)
                }
            }
            OpKind::ReadPart {
                buf,
                offset,
                bytes,
                expect,
            } => {
                place(buf, f);
                f(offset);
                for e in [bytes, expect].into_iter().flatten() {
                    f(e)
                }
            }
            // The async proxy.
            OpKind::CopyStoreAsync { buf } => place(buf, f),
            OpKind::WgmmaAsync { bufs } => bufs.iter().for_each(|b| place(b, f)),
            OpKind::WaitGroup { n, .. } | OpKind::WgmmaWait { n } => f(n),
            OpKind::CommitGroup | OpKind::FenceProxyAsync | OpKind::FenceMbarrierInit => {}
            OpKind::CpAsyncWait { n: Some(n) } => f(n),
            OpKind::CpAsyncCommitGroup | OpKind::CpAsyncWait { n: None } => {}
            OpKind::Remote { target, op: inner } => {
                f(target.expr());
                op(inner, f)
            }
            OpKind::ClusterArrive | OpKind::ClusterWait | OpKind::ClusterSync => {}
        }
    }
    for s in &b.stmts {
        match &s.kind {
            StmtKind::Let { value, .. } | StmtKind::Assign { value, .. } => match value {
                ast::Value::Expr(e) => f(e),
                ast::Value::Op(o) => op(o, f),
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
            StmtKind::Op(o) => op(o, f),
            StmtKind::Assert(e) => f(e),
            _ => {}
        }
    }
}

pub(super) fn block_has_barrier_ops(b: &ast::Block) -> bool {
    b.stmts.iter().any(|s| match &s.kind {
        StmtKind::Op(o) => !matches!(o.kind, OpKind::Read { .. } | OpKind::Write { .. }),
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
