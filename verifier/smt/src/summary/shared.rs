//! Shared `var`s whose value does not depend on the interleaving. A var nobody writes holds its
//! initial value everywhere. A var written only by one thread, in the straight-line code before
//! that thread's first `syncthreads`, holds the last of those values for every other thread once
//! that thread has passed its own first, unconditional `syncthreads`: every thread's first
//! `syncthreads` is its first arrival on the CTA barrier, so the arrivals law (which counts it)
//! makes all of them one use, completed only after the writer arrived, that is after its writes
//! (docs/semantics.md: `syncthreads` joins the histories of its participants). The writer itself
//! reads its own latest value (program order). A read that no `syncthreads` orders after the
//! writes is given the initial value, and the answer is at best a refutation (the explicit
//! search confirms it or `prove` says `unknown`); so is a read of a var its one writer writes in
//! straight-line code after its first `syncthreads` (or with none). Any other var depends on the
//! interleaving: refused.

use super::*;

/// What the summary knows of a shared var.
#[derive(Clone, Debug)]
pub(super) enum Shared {
    /// Never written: the initial value.
    Constant(T),
    /// Written by the thread of role `writer` before its first `syncthreads`.
    Published { writer: String, init: T, value: T },
    /// Written by the thread of role `writer` in its straight-line code, but not all before
    /// its first `syncthreads`: another thread may read the initial value (refutable only).
    Late { writer: String, init: T },
    /// Its value depends on the interleaving (the reason says why).
    Racy(String),
}

/// How many times the block assigns `name`, nested blocks included.
fn writes(b: &ast::Block, name: &str) -> usize {
    b.stmts
        .iter()
        .map(|s| match &s.kind {
            StmtKind::Assign { name: n, .. } => usize::from(n.name == name),
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => writes(body, name),
            StmtKind::If { then, els, .. } => writes(then, name) + els.as_ref().map_or(0, |e| writes(e, name)),
            _ => 0,
        })
        .sum()
}

impl Builder {
    /// Classify every var of the program (called once the roles' sizes are known).
    pub(super) fn classify_vars(&self, program: &ast::Program) -> R<HashMap<String, Shared>> {
        let mut out = HashMap::new();
        for v in program.vars() {
            let name = &v.name.name;
            let init = self.decl_expr(&v.init)?;
            out.insert(name.clone(), self.classify_var(program, name, init));
        }
        Ok(out)
    }

    fn classify_var(&self, program: &ast::Program, name: &str, init: T) -> Shared {
        let racy = |why: &str| {
            Shared::Racy(format!(
                "`{name}` is a shared variable {why}; its value depends on the interleaving"
            ))
        };
        if program.functions().any(|f| writes(&f.body, name) > 0) {
            return racy("written in a function");
        }
        let writers: Vec<&ast::RoleDecl> = program.roles().filter(|r| writes(&r.body, name) > 0).collect();
        let r = match writers.as_slice() {
            [] => return Shared::Constant(init),
            [r] => *r,
            _ => return racy("written by several roles"),
        };
        if self.ctas > 1 {
            return racy("written in a cluster");
        }
        if r.unit != ast::RoleUnit::Threads || self.roles.get(&r.name.name).and_then(|t| t.as_int()) != Some(1) {
            return racy("written by a role of several threads");
        }
        let stmts = &r.body.stmts;
        // every write a top-level statement of constant value: the writer knows its own value,
        // and another thread may see the initial one (or, if ordered, the written one)
        let straight = stmts
            .iter()
            .filter(|s| matches!(&s.kind, StmtKind::Assign { name: n, value: ast::Value::Expr(e) } if n.name == name && self.decl_expr(e).is_ok()))
            .count()
            == writes(&r.body, name);
        let late = |why: &str| {
            if straight {
                Shared::Late {
                    writer: r.name.name.clone(),
                    init: init.clone(),
                }
            } else {
                racy(why)
            }
        };
        let Some(sync) = stmts.iter().position(|s| matches!(s.kind, StmtKind::SyncThreads)) else {
            return late("whose writer never passes a `syncthreads`");
        };
        let before = ast::Block {
            stmts: stmts[..sync].to_vec(),
            span: r.body.span,
        };
        let fn_syncs = program.functions().any(|f| block_syncs_cta(&f.body));
        if block_syncs_cta(&before) || block_returns(&before) || walk::block_breaks(&before) || (fn_syncs && block_calls(&before)) {
            return late("whose writer may not reach its first `syncthreads`");
        }
        let top: Vec<&ast::Expr> = stmts[..sync]
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::Assign {
                    name: n,
                    value: ast::Value::Expr(e),
                } if n.name == name => Some(e),
                _ => None,
            })
            .collect();
        if top.len() != writes(&r.body, name) {
            return late("written after its writer's first `syncthreads`, under a condition or in a loop");
        }
        let mut value = init.clone();
        for e in top {
            match self.decl_expr(e) {
                Ok(t) => value = t,
                Err(_) => return racy("assigned a value other than of parameters and literals"),
            }
        }
        Shared::Published {
            writer: r.name.name.clone(),
            init,
            value,
        }
    }

    /// The value a thread reads from the var `n` here.
    pub(super) fn shared_read(&self, n: &str, span: Span, cx: &Ctx) -> R<T> {
        match self.shared.get(n) {
            Some(Shared::Constant(t)) => Ok(t.clone()),
            Some(Shared::Published { writer, init, value }) => {
                if *writer == cx.role {
                    Ok(cx.var_now.get(n).cloned().unwrap_or_else(|| init.clone()))
                } else if cx.published {
                    Ok(value.clone())
                } else {
                    // Before the write is ordered, the read may see the initial value (or the
                    // written one): the laws are checked with the initial value, so a
                    // refutation stands once the explicit search confirms it, never a proof.
                    self.refute_only.borrow_mut().get_or_insert(Unsupported {
                        span,
                        why: format!("`{n}` is a shared variable read before this thread's first unconditional `syncthreads`, which orders it after the write; its value depends on the interleaving"),
                    });
                    Ok(init.clone())
                }
            }
            Some(Shared::Late { writer, init }) => {
                if *writer == cx.role {
                    return Ok(cx.var_now.get(n).cloned().unwrap_or_else(|| init.clone()));
                }
                self.refute_only.borrow_mut().get_or_insert(Unsupported {
                    span,
                    why: format!("`{n}` is a shared variable written after its writer's first `syncthreads` (or with no `syncthreads` ordering the write before this read); its value depends on the interleaving"),
                });
                Ok(init.clone())
            }
            Some(Shared::Racy(why)) => unsupported(span, why.clone())?,
            None => unsupported(span, format!("`{n}` is a shared variable; its value depends on the interleaving"))?,
        }
    }

    /// The writer's own assignment of a published var (checked where the var was classified).
    pub(super) fn shared_write(&self, n: &str, value: &ast::Value, span: Span, cx: &mut Ctx) -> R<()> {
        match (self.shared.get(n), value) {
            (Some(Shared::Published { writer, .. }), ast::Value::Expr(e))
                if *writer == cx.role && !cx.synced && cx.guard.is_empty() && cx.in_loop.is_none() && cx.share == Share::All =>
            {
                let t = self.decl_expr(e)?;
                cx.var_now.insert(n.to_string(), t);
                Ok(())
            }
            (Some(Shared::Late { writer, .. }), ast::Value::Expr(e))
                if *writer == cx.role && cx.guard.is_empty() && cx.in_loop.is_none() && cx.share == Share::All =>
            {
                let t = self.decl_expr(e)?;
                cx.var_now.insert(n.to_string(), t);
                Ok(())
            }
            (Some(Shared::Racy(why)), _) => unsupported(span, why.clone())?,
            _ => unsupported(span, format!("`{n}` is a shared variable; its values depend on the interleaving"))?,
        }
    }
}
