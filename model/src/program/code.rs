//! Lowering one role's or completion function's body: statements to instructions (structured
//! control flow to jumps and branches, inline functions expanded), operations to `IOp`s with
//! their barrier and buffer references resolved, expressions to folded `IExpr`s.

use super::ir::*;
use crate::lang::ast::{self, BinOp, ExprKind, OpKind, StmtKind};
use crate::lang::Diagnostic;
use std::collections::HashMap;

/// Tables are addressed with 16-bit indices in the state (barriers, buffers, vars, locals, roles,
/// completions): a program that needs more is rejected here, so no index can wrap and alias another
/// entry (which would turn into a wrong verdict, not an error).
pub const MAX_TABLE: usize = u16::MAX as usize;

pub(super) fn index16(n: usize, what: &str, span: ast::Span) -> Result<u16, Diagnostic> {
    if n < MAX_TABLE {
        Ok(n as u16)
    } else {
        Err(Diagnostic::new(
            "E108",
            span,
            format!("this needs more than {MAX_TABLE} {what}; the model addresses at most {MAX_TABLE} (make the program smaller)"),
        ))
    }
}

pub(super) struct Env<'a> {
    /// The CTAs of the cluster (1 without cluster scope).
    pub(super) cluster: u32,
    pub(super) fns: HashMap<String, &'a ast::FnDecl>,
    pub(super) consts: &'a HashMap<String, i64>,
    pub(super) roles: &'a HashMap<String, i64>,
    pub(super) barrier_groups: &'a [Group],
    pub(super) buffer_groups: &'a [Group],
    pub(super) vars: &'a [VarInfo],
    pub(super) buffers: &'a [BufferInfo],
}

/// Cluster scope: the CTA whose copy of a role or completion is being lowered. Its code names its
/// own CTA's objects (groups and vars offset by `rank` tables), `cta` is `rank`, and `gtid`/`warp`
/// are CTA-local (the model numbers threads and warps across the cluster).
#[derive(Clone, Copy)]
pub(super) struct Cta {
    pub(super) rank: u32,
    pub(super) gtid_base: u32,
    pub(super) warp_base: u32,
}

pub(super) struct CodeBuilder<'a> {
    pub(super) env: &'a Env<'a>,
    pub(super) in_role: bool,
    pub(super) cta: Cta,
    /// The hidden local of the cluster barrier, once the code uses it.
    pub(super) cluster_slot: Option<u16>,
    /// The hidden local of `fence_mbarrier_init` under cluster scope, once the code uses it.
    pub(super) init_fence_slot: Option<u16>,
    pub(super) instrs: Vec<Instr>,
    pub(super) local_names: Vec<String>,
    pub(super) scopes: Vec<Vec<(String, u16)>>,
    /// Scopes below this index are the caller's while an inline function body is expanded: the
    /// body sees only its parameters and its own locals.
    pub(super) floor: usize,
    /// Per enclosing loop (innermost last): the `break` jumps to patch with its exit.
    pub(super) loops: Vec<Vec<usize>>,
    /// Slots of loop variables (passed to a function by value, never by reference).
    pub(super) loop_vars: Vec<u16>,
    /// Inline functions being expanded (a guard; `check` rejects recursion).
    pub(super) inlining: usize,
    pub(super) has_while: bool,
    /// Per local holding a token of an element of a barrier array, the hidden local
    /// holding that element's index + 1 (0: not known), checked by `TokenCheck` at its waits.
    pub(super) token_origin: HashMap<u16, u16>,
}

impl<'a> CodeBuilder<'a> {
    pub(super) fn build(env: &'a Env<'a>, name: &str, body: &ast::Block, in_role: bool, cta: Cta) -> Result<Code, Diagnostic> {
        let mut b = CodeBuilder {
            env,
            in_role,
            cta,
            cluster_slot: None,
            init_fence_slot: None,
            instrs: Vec::new(),
            local_names: Vec::new(),
            scopes: vec![Vec::new()],
            floor: 0,
            loops: Vec::new(),
            loop_vars: Vec::new(),
            inlining: 0,
            has_while: false,
            token_origin: HashMap::new(),
        };
        b.block(body)?;
        Ok(Code {
            name: name.to_string(),
            instrs: b.instrs,
            local_names: b.local_names,
            has_while: b.has_while,
            elected: Vec::new(),
            cluster_slot: b.cluster_slot,
            init_fence_slot: b.init_fence_slot,
        })
    }

    pub(super) fn new_local(&mut self, name: &str, span: ast::Span) -> Result<u16, Diagnostic> {
        let slot = index16(self.local_names.len(), "locals in one role or completion", span)?;
        self.local_names.push(name.to_string());
        if !name.starts_with('$') {
            if let Some(scope) = self.scopes.last_mut() {
                scope.push((name.to_string(), slot));
            }
        }
        Ok(slot)
    }

    fn lookup_local(&self, name: &str) -> Option<u16> {
        self.scopes[self.floor..]
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .find(|(n, _)| n == name)
            .map(|(_, s)| *s)
    }

    pub(super) fn emit(&mut self, kind: InstrKind, span: ast::Span) -> usize {
        let visible = match &kind {
            InstrKind::SetLocal { expr, .. } | InstrKind::Branch { cond: expr, .. } | InstrKind::Assert(expr) => expr.reads_var(),
            InstrKind::TokenCheck { index, .. } => index.reads_var(),
            InstrKind::Jump { .. } => false,
            InstrKind::Return => false,
            _ => true,
        };
        self.instrs.push(Instr { kind, span, visible });
        self.instrs.len() - 1
    }

    fn block(&mut self, block: &ast::Block) -> Result<(), Diagnostic> {
        self.scopes.push(Vec::new());
        for s in &block.stmts {
            self.stmt(s)?;
        }
        self.scopes.pop();
        Ok(())
    }

    fn stmt(&mut self, s: &ast::Stmt) -> Result<(), Diagnostic> {
        match &s.kind {
            StmtKind::Let { name, value } => {
                // Evaluate before the name comes into scope: `let x = x + 1` reads the outer x.
                match value {
                    ast::Value::Expr(e) => {
                        let expr = self.expr(e)?;
                        let slot = self.new_local(&name.name, name.span)?;
                        self.emit(InstrKind::SetLocal { slot, expr }, s.span);
                    }
                    ast::Value::Op(op) => {
                        // The result slot is allocated before the operation's own temporaries and
                        // named after it, so `let t = arrive(b)` cannot read `t` while computing.
                        let slot = index16(self.local_names.len(), "locals in one role or completion", s.span)?;
                        self.local_names.push(format!("$pending {}", name.name));
                        self.op(op, Some(slot), s.span)?;
                        self.local_names[slot as usize] = name.name.clone();
                        if let Some(scope) = self.scopes.last_mut() {
                            scope.push((name.name.clone(), slot));
                        }
                    }
                }
            }
            StmtKind::Assign { name, value } => {
                if let Some(slot) = self.lookup_local(&name.name) {
                    match value {
                        ast::Value::Expr(e) => {
                            let expr = self.expr(e)?;
                            self.forget_or_copy_origin(slot, &expr, s.span);
                            self.emit(InstrKind::SetLocal { slot, expr }, s.span);
                        }
                        ast::Value::Op(op) => self.op(op, Some(slot), s.span)?,
                    }
                } else if let Some(var) = self.env.vars.iter().position(|v| v.name == name.name) {
                    match value {
                        ast::Value::Expr(e) => {
                            let expr = self.expr(e)?;
                            let var = self.own_var(var);
                            self.emit(InstrKind::SetVar { var, expr }, s.span);
                        }
                        ast::Value::Op(op) => {
                            let tmp = self.new_local("$result", s.span)?;
                            self.op(op, Some(tmp), s.span)?;
                            let var = self.own_var(var);
                            self.emit(
                                InstrKind::SetVar {
                                    var,
                                    expr: IExpr::Local(tmp),
                                },
                                s.span,
                            );
                        }
                    }
                } else {
                    return Err(Diagnostic::new(
                        "E107",
                        name.span,
                        format!(
                            "`{}` is neither a local nor a shared var; declare it with `let {} = ...` or `var {} = ...`",
                            name.name, name.name, name.name
                        ),
                    ));
                }
            }
            StmtKind::For { var, lo, hi, body } => {
                let lo = self.expr(lo)?;
                let hi = self.expr(hi)?;
                self.scopes.push(Vec::new());
                let end = self.new_local("$end", s.span)?;
                self.emit(InstrKind::SetLocal { slot: end, expr: hi }, s.span);
                let i = self.new_local(&var.name, var.span)?;
                self.loop_vars.push(i);
                self.emit(InstrKind::SetLocal { slot: i, expr: lo }, s.span);
                let head = self.instrs.len();
                let cond = IExpr::Binary(BinOp::Lt, Box::new(IExpr::Local(i)), Box::new(IExpr::Local(end)));
                let branch = self.emit(InstrKind::Branch { cond, else_to: 0 }, var.span);
                self.loops.push(Vec::new());
                self.block(body)?;
                let inc = IExpr::Binary(BinOp::Add, Box::new(IExpr::Local(i)), Box::new(IExpr::Const(1)));
                self.emit(InstrKind::SetLocal { slot: i, expr: inc }, var.span);
                self.emit(InstrKind::Jump { to: head as u32 }, var.span);
                let exit = self.instrs.len() as u32;
                if let InstrKind::Branch { else_to, .. } = &mut self.instrs[branch].kind {
                    *else_to = exit;
                }
                self.patch_breaks(exit);
                self.scopes.pop();
            }
            StmtKind::While { cond, body } => {
                self.has_while = true;
                let head = self.instrs.len();
                let cond = self.expr(cond)?;
                let branch = self.emit(InstrKind::Branch { cond, else_to: 0 }, s.span);
                self.loops.push(Vec::new());
                self.block(body)?;
                self.emit(InstrKind::Jump { to: head as u32 }, s.span);
                let exit = self.instrs.len() as u32;
                if let InstrKind::Branch { else_to, .. } = &mut self.instrs[branch].kind {
                    *else_to = exit;
                }
                self.patch_breaks(exit);
            }
            StmtKind::Break => {
                let j = self.emit(InstrKind::Jump { to: 0 }, s.span);
                match self.loops.last_mut() {
                    Some(l) => l.push(j),
                    None => return Err(Diagnostic::new("E035", s.span, "`break` outside a loop")),
                }
            }
            StmtKind::SyncWarpMask(m) => {
                let mask = self.expr(m)?;
                self.emit(InstrKind::SyncWarpMask { mask }, s.span);
            }
            StmtKind::Call { name, args } => self.call(name, args, s.span)?,
            StmtKind::If { cond, then, els } => {
                let cond = self.expr(cond)?;
                let branch = self.emit(InstrKind::Branch { cond, else_to: 0 }, s.span);
                self.block(then)?;
                let jump = els.as_ref().map(|_| self.emit(InstrKind::Jump { to: 0 }, s.span));
                let else_start = self.instrs.len() as u32;
                if let InstrKind::Branch { else_to, .. } = &mut self.instrs[branch].kind {
                    *else_to = else_start;
                }
                if let Some(els) = els {
                    self.block(els)?;
                    let end = self.instrs.len() as u32;
                    if let Some(j) = jump {
                        self.instrs[j].kind = InstrKind::Jump { to: end };
                    }
                }
            }
            StmtKind::Op(op) => self.op(op, None, s.span)?,
            StmtKind::Assert(e) => {
                let e = self.expr(e)?;
                self.emit(InstrKind::Assert(e), s.span);
            }
            StmtKind::Return => {
                self.emit(InstrKind::Return, s.span);
            }
            StmtKind::Work => {
                self.emit(InstrKind::Work, s.span);
            }
            StmtKind::SyncWarp => {
                self.emit(InstrKind::SyncWarp, s.span);
            }
            StmtKind::SyncThreads => {
                self.emit(InstrKind::SyncThreads, s.span);
            }
        }
        Ok(())
    }

    fn patch_breaks(&mut self, exit: u32) {
        for j in self.loops.pop().unwrap_or_default() {
            self.instrs[j].kind = InstrKind::Jump { to: exit };
        }
    }

    /// Expand an inline function: its parameters name the caller's `let` locals given as
    /// arguments (by reference); any other argument is evaluated into a fresh local (by value).
    fn call(&mut self, name: &ast::Ident, args: &[ast::Expr], span: ast::Span) -> Result<(), Diagnostic> {
        let Some(f) = self.env.fns.get(&name.name).copied() else {
            return Err(Diagnostic::new(
                "E037",
                name.span,
                format!(
                    "`{}` is not a function; declare it with `fn {}(...) {{ ... }}`",
                    name.name, name.name
                ),
            ));
        };
        if f.params.len() != args.len() || self.inlining >= 64 {
            return Err(Diagnostic::new(
                if self.inlining >= 64 { "E038" } else { "E037" },
                span,
                format!("`{}` cannot be expanded here (wrong arity or recursion)", name.name),
            ));
        }
        let mut binds = Vec::new();
        for (prm, a) in f.params.iter().zip(args) {
            let by_ref = match &a.kind {
                ExprKind::Name(n) => self.lookup_local(n).filter(|s| !self.loop_vars.contains(s)),
                _ => None,
            };
            let slot = match by_ref {
                Some(slot) => slot,
                None => {
                    let e = self.expr(a)?;
                    let slot = self.new_local(&format!("${}", prm.name), a.span)?;
                    self.emit(InstrKind::SetLocal { slot, expr: e }, span);
                    slot
                }
            };
            binds.push((prm.name.clone(), slot));
        }
        let floor = std::mem::replace(&mut self.floor, self.scopes.len());
        let loops = std::mem::take(&mut self.loops);
        self.scopes.push(binds);
        self.inlining += 1;
        let r = self.block(&f.body);
        self.inlining -= 1;
        self.scopes.pop();
        self.loops = loops;
        self.floor = floor;
        r
    }

    /// Cluster scope: the lowered index of declared var `v` in this code's CTA.
    fn own_var(&self, v: usize) -> u16 {
        (self.cta.rank as usize * self.env.vars.len() + v) as u16
    }

    /// The declared (CTA 0) group of a lowered buffer reference: the sizes are the same in every
    /// CTA.
    pub(super) fn buffer_group(&self, r: &Ref) -> &'a Group {
        let groups = self.env.buffer_groups;
        &groups[r.group as usize % groups.len()]
    }

    /// Tokens of barrier-array elements. An arrival into a local records the element's
    /// index + 1 in a hidden local; a wait or try_wait with that local as its token on the same
    /// array first checks the index (`TokenCheck`). Different declared barriers are E040 before
    /// lowering; an index that reads a shared var is not tracked.
    pub(super) fn token_origins(&mut self, op: &ast::Op, result: Option<u16>, span: ast::Span) -> Result<(), Diagnostic> {
        match &op.kind {
            OpKind::Arrive { bar, .. } | OpKind::ArriveExpectTx { bar, .. } => {
                let (Some(slot), Some(ix)) = (result, &bar.index) else {
                    return Ok(());
                };
                let index = self.expr(ix)?;
                let origin = match self.token_origin.get(&slot) {
                    Some(&o) => o,
                    None => {
                        let o = self.new_local(&format!("$origin {}", self.local_names[slot as usize]), span)?;
                        self.token_origin.insert(slot, o);
                        o
                    }
                };
                let expr = if index.reads_var() {
                    IExpr::Const(0)
                } else {
                    IExpr::Binary(BinOp::Add, Box::new(index), Box::new(IExpr::Const(1)))
                };
                self.emit(InstrKind::SetLocal { slot: origin, expr }, span);
            }
            OpKind::Wait { bar, token } | OpKind::TryWait { bar, token } => {
                let (ExprKind::Name(n), Some(ix)) = (&token.kind, &bar.index) else {
                    return Ok(());
                };
                let Some(t) = self.lookup_local(n) else { return Ok(()) };
                let Some(&origin) = self.token_origin.get(&t) else { return Ok(()) };
                let index = self.expr(ix)?;
                if index.reads_var() {
                    return Ok(());
                }
                let group = self.bar(bar)?.group;
                self.emit(InstrKind::TokenCheck { origin, index, group }, span);
            }
            _ => {}
        }
        Ok(())
    }

    /// `t = x`: a token's origin goes with it; any other value forgets it.
    fn forget_or_copy_origin(&mut self, slot: u16, value: &IExpr, span: ast::Span) {
        let Some(&o) = self.token_origin.get(&slot) else { return };
        let from = match value {
            IExpr::Local(x) => self.token_origin.get(x).map(|&xo| IExpr::Local(xo)),
            _ => None,
        };
        self.emit(
            InstrKind::SetLocal {
                slot: o,
                expr: from.unwrap_or(IExpr::Const(0)),
            },
            span,
        );
    }

    /// The byte range `offset .. offset + bytes` of a partial access; the offset
    /// defaults to 0 and the size to the rest of the buffer.
    pub(super) fn byte_range(
        &mut self,
        b: &Ref,
        offset: Option<&ast::Expr>,
        bytes: Option<&ast::Expr>,
    ) -> Result<(IExpr, IExpr), Diagnostic> {
        let size = buffer_bytes_of(self.env, self.buffer_group(b));
        let offset = match offset {
            Some(e) => self.expr(e)?,
            None => IExpr::Const(0),
        };
        let bytes = match (bytes, &offset) {
            (Some(e), _) => self.expr(e)?,
            (None, IExpr::Const(o)) => IExpr::Const(size - o),
            (None, o) => IExpr::Binary(BinOp::Sub, Box::new(IExpr::Const(size)), Box::new(o.clone())),
        };
        Ok((offset, bytes))
    }

    fn place(&mut self, p: &ast::Place, groups: &[Group], what: &str) -> Result<Ref, Diagnostic> {
        let g = groups.iter().position(|g| g.name == p.name.name).ok_or_else(|| {
            Diagnostic::new(
                "E108",
                p.name.span,
                format!(
                    "`{}` is not a declared {what}; declare it with `{what} {} ...`",
                    p.name.name, p.name.name
                ),
            )
        })?;
        let index = match &p.index {
            Some(e) => Some(self.expr(e)?),
            None => None,
        };
        if groups[g].is_array != index.is_some() {
            let msg = if groups[g].is_array {
                format!(
                    "`{}` is an array of {} {what}s; name one element, e.g. `{}[0]`",
                    p.name.name, groups[g].len, p.name.name
                )
            } else {
                format!("`{}` is a single {what}, not an array; drop the index", p.name.name)
            };
            return Err(Diagnostic::new("E109", p.span, msg));
        }
        // Cluster scope: this CTA's copy of the group.
        Ok(Ref {
            group: (self.cta.rank as usize * groups.len() + g) as u16,
            index,
        })
    }

    pub(super) fn bar(&mut self, p: &ast::Place) -> Result<Ref, Diagnostic> {
        let groups = self.env.barrier_groups;
        self.place(p, groups, "barrier")
    }

    pub(super) fn buf(&mut self, p: &ast::Place) -> Result<Ref, Diagnostic> {
        let groups = self.env.buffer_groups;
        self.place(p, groups, "buffer")
    }

    pub(super) fn expr(&mut self, e: &ast::Expr) -> Result<IExpr, Diagnostic> {
        Ok(match &e.kind {
            ExprKind::Int(v) => IExpr::Const(*v),
            ExprKind::Name(n) => {
                if let Some(slot) = self.lookup_local(n) {
                    IExpr::Local(slot)
                } else if let Some(v) = self.env.consts.get(n) {
                    IExpr::Const(*v)
                } else if let Some(v) = self.env.vars.iter().position(|v| &v.name == n) {
                    IExpr::Var(self.own_var(v))
                } else if self.in_role && n == "tid" {
                    IExpr::Tid
                } else if self.in_role && n == "gtid" {
                    cta_local(IExpr::Gtid, self.cta.gtid_base)
                } else if self.in_role && n == "lane" {
                    IExpr::Lane
                } else if self.in_role && n == "warp" {
                    cta_local(IExpr::Warp, self.cta.warp_base)
                } else if self.in_role && n == "cta" {
                    IExpr::Const(self.cta.rank as i64)
                } else {
                    return Err(Diagnostic::new(
                        "E110",
                        e.span,
                        format!("`{n}` is not a local, parameter or shared var in scope here; declare it first"),
                    ));
                }
            }
            ExprKind::RoleCount(r) => IExpr::Const(*self.env.roles.get(r).ok_or_else(|| {
                Diagnostic::new(
                    "E111",
                    e.span,
                    format!("`{r}` is not a declared role; `ROLE.count` needs a role name"),
                )
            })?),
            ExprKind::Unary(op, a) => IExpr::Unary(*op, Box::new(self.expr(a)?)).folded(),
            ExprKind::Binary(op, a, b) => {
                let a = self.expr(a)?;
                let b = self.expr(b)?;
                IExpr::Binary(*op, Box::new(a), Box::new(b)).folded()
            }
        })
    }
}

/// `gtid`/`warp` as the CTA sees them: the model's cluster-wide number less the CTA's first.
fn cta_local(e: IExpr, base: u32) -> IExpr {
    if base == 0 {
        e
    } else {
        IExpr::Binary(BinOp::Sub, Box::new(e), Box::new(IExpr::Const(base as i64)))
    }
}

pub(super) fn buffer_bytes_of(env: &Env, g: &Group) -> i64 {
    // Every element of a buffer array has the declared size.
    env.buffers[g.base as usize].bytes
}
