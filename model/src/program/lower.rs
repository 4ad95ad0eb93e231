//! Lowering a checked syntax tree to the executable `ir::Protocol` for given parameter values.
//!
//! Errors here are bad input that only shows once parameters have values (an array of length 0, an
//! unknown `--param`), reported like parse errors.

use super::eval::{self, Logic, Node};
use super::ir::*;
use crate::lang::ast::{self, BinOp, ExprKind, OpKind, StmtKind};
use crate::lang::Diagnostic;
use std::collections::HashMap;

/// Lower `program` with `overrides` (`--param NAME=VALUE`) applied over the declared defaults.
pub fn lower(program: &ast::Program, overrides: &[(String, i64)]) -> Result<Protocol, Diagnostic> {
    let mut params: Vec<(String, i64)> = Vec::new();
    let mut consts: HashMap<String, i64> = HashMap::new();
    for (name, _) in overrides {
        if !program.params().any(|p| &p.name.name == name) {
            let known: Vec<_> = program.params().map(|p| p.name.name.clone()).collect();
            return Err(Diagnostic::new(
                "E100",
                program.name.span,
                format!(
                    "`--param {name}` names no parameter of protocol `{}`; its parameters are: {}",
                    program.name.name,
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ),
            ));
        }
    }
    // Role sizes may be written in terms of params, and params in terms of `ROLE.count`; roles
    // are evaluated lazily through `const_eval`'s role table after params.
    for p in program.params() {
        let v = match overrides.iter().rev().find(|(n, _)| n == &p.name.name) {
            Some((_, v)) => *v,
            None => const_eval(&p.value, &consts, &HashMap::new())?,
        };
        consts.insert(p.name.name.clone(), v);
        params.push((p.name.name.clone(), v));
    }
    // The warp size comes first: a role laid out by whole warps counts its threads with it.
    let warp_size = match program.warp_size() {
        Some(e) => {
            let w = const_eval(e, &consts, &HashMap::new())?;
            if !(1..=32).contains(&w) {
                return Err(Diagnostic::new(
                    "E102",
                    e.span,
                    format!("warp_size is {w}; it must be between 1 and 32"),
                ));
            }
            w as u32
        }
        None => 32,
    };
    // Cluster scope: the CTAs of one cluster (PTX: at most 8 is portable; sm_90 allows 16 with
    // an opt-in, which the model does not need to explore a protocol).
    let cluster = match program.cluster() {
        Some(e) => {
            let n = const_eval(e, &consts, &HashMap::new())?;
            if !(1..=8).contains(&n) {
                return Err(Diagnostic::new(
                    "E114",
                    e.span,
                    format!("cluster is {n}; a cluster has 1 to 8 CTAs (the portable cluster size of sm_90)"),
                ));
            }
            n as u32
        }
        None => 1,
    };
    let mut role_counts: HashMap<String, i64> = HashMap::new();
    for r in program.roles() {
        let n = const_eval(&r.count, &consts, &role_counts)?;
        let per = match r.unit {
            ast::RoleUnit::Threads => 1,
            ast::RoleUnit::Warps => warp_size as i64,
            ast::RoleUnit::Warpgroups => 4 * warp_size as i64,
        };
        let threads = n.checked_mul(per).unwrap_or(i64::MAX);
        if !(1..=4096).contains(&threads) || n < 1 {
            return Err(Diagnostic::new(
                "E101",
                r.count.span,
                format!("role `{}` has {threads} threads; a role needs 1 to 4096 threads", r.name.name),
            ));
        }
        role_counts.insert(r.name.name.clone(), threads);
    }

    let mut completion_index: HashMap<&str, u16> = HashMap::new();
    for (i, c) in program.completions().enumerate() {
        completion_index.insert(c.name.name.as_str(), index16(i, "completion functions", c.name.span)?);
    }

    let mut barriers = Vec::new();
    let mut barrier_groups = Vec::new();
    for b in program.barriers() {
        let len = array_len(b.len.as_ref(), &consts, &role_counts)?;
        let count = const_eval(&b.count, &consts, &role_counts)?;
        let completion = match &b.completion {
            Some(c) => Some(*completion_index.get(c.name.as_str()).ok_or_else(|| {
                Diagnostic::new(
                    "E103",
                    c.span,
                    format!(
                        "barrier `{}` names completion `{}`, which is not declared; declare `completion {} {{ ... }}`",
                        b.name.name, c.name, c.name
                    ),
                )
            })?),
            None => None,
        };
        index16(barriers.len() + len as usize, "barriers", b.span)?;
        barrier_groups.push(Group {
            name: b.name.name.clone(),
            base: barriers.len() as u16,
            len: len as u16,
            is_array: b.len.is_some(),
        });
        for i in 0..len {
            barriers.push(BarrierInfo {
                name: element_name(&b.name.name, b.len.is_some(), i),
                count,
                completion,
                manual_init: b.manual_init,
                span: b.span,
            });
        }
    }
    let mut buffers = Vec::new();
    let mut buffer_groups = Vec::new();
    for b in program.buffers() {
        let len = array_len(b.len.as_ref(), &consts, &role_counts)?;
        let bytes = const_eval(&b.bytes, &consts, &role_counts)?;
        index16(buffers.len() + len as usize, "buffers", b.span)?;
        buffer_groups.push(Group {
            name: b.name.name.clone(),
            base: buffers.len() as u16,
            len: len as u16,
            is_array: b.len.is_some(),
        });
        for i in 0..len {
            buffers.push(BufferInfo {
                name: element_name(&b.name.name, b.len.is_some(), i),
                bytes,
            });
        }
    }
    let mut vars = Vec::new();
    for v in program.vars() {
        index16(vars.len(), "shared vars", v.name.span)?;
        vars.push(VarInfo {
            name: v.name.name.clone(),
            init: const_eval(&v.init, &consts, &role_counts)?,
        });
    }

    let env = Env {
        consts: &consts,
        roles: &role_counts,
        barrier_groups: &barrier_groups,
        buffer_groups: &buffer_groups,
        vars: &vars,
        buffers: &buffers,
        fns: program.functions().map(|f| (f.name.name.clone(), f)).collect(),
        cluster,
    };

    // The layout of one CTA: each role's first thread in it. Every CTA of a cluster has the
    // same one; CTA c's threads start `stride` model threads after CTA c - 1's.
    let mut layout = Vec::new();
    let mut gtid = 0u32;
    for r in program.roles() {
        if r.unit != ast::RoleUnit::Threads {
            // Whole warps: the role starts at a warp boundary (the lanes skipped are not modelled).
            gtid = gtid.div_ceil(warp_size) * warp_size;
        }
        layout.push(gtid);
        gtid += role_counts[&r.name.name] as u32;
    }
    let stride = gtid.div_ceil(warp_size) * warp_size;
    let role_decls = program.roles().count();
    let mut completions = Vec::new();
    let mut roles = Vec::new();
    let mut threads = Vec::new();
    for cta in 0..cluster {
        let at = Cta {
            rank: cta,
            gtid_base: cta * stride,
            warp_base: cta * stride / warp_size,
        };
        for c in program.completions() {
            completions.push(CodeBuilder::build(&env, &cta_name(cluster, cta, &c.name.name), &c.body, false, at)?);
        }
        for (ri, r) in program.roles().enumerate() {
            let count = role_counts[&r.name.name] as u32;
            let mut code = CodeBuilder::build(&env, &cta_name(cluster, cta, &r.name.name), &r.body, true, at)?;
            let remote = code.instrs.iter().any(|i| {
                matches!(
                    i.kind,
                    InstrKind::Op {
                        op: IOp::Remote { .. },
                        ..
                    }
                )
            });
            if r.uniform && (cluster > 1 || remote || code.cluster_slot.is_some()) {
                // The two were built apart: a uniform agent's multiplicity is not yet applied to
                // remote operations or to the cluster barrier's count.
                return Err(Diagnostic::new(
                    "E116",
                    r.name.span,
                    format!(
                        "role `{}` is declared uniform in a protocol with cluster scope; uniform roles are modelled only within one CTA without remote or cluster-barrier operations (drop `uniform`, or model one CTA)",
                        r.name.name
                    ),
                ));
            }
            if r.uniform {
                crate::program::uniform::analyse(&r.name.name, &mut code, warp_size)?;
            }
            roles.push(RoleInfo {
                name: cta_name(cluster, cta, &r.name.name),
                count,
                uniform: r.uniform,
                first_gtid: at.gtid_base + layout[ri],
                code,
            });
            // A uniform role's agents are its warps' first lanes; the others are what the agent's
            // multiplicity stands for (they still count in `gtid` and `ROLE.count`).
            let lanes = if r.uniform { warp_size } else { 1 };
            for tid in (0..count).step_by(lanes as usize) {
                let gtid = at.gtid_base + layout[ri] + tid;
                threads.push(ThreadInfo {
                    role: index16(cta as usize * role_decls + ri, "roles", r.name.span)?,
                    tid,
                    gtid,
                    lane: gtid % warp_size,
                    warp: gtid / warp_size,
                    cta: cta as u16,
                });
            }
        }
    }
    let (barriers, barrier_groups, buffers, buffer_groups, vars) = if cluster == 1 {
        (barriers, barrier_groups, buffers, buffer_groups, vars)
    } else {
        per_cta_tables(
            cluster,
            program,
            &barriers,
            &barrier_groups,
            &buffers,
            &buffer_groups,
            &vars,
            program.completions().count(),
        )?
    };
    if threads.len() > 512 {
        return Err(Diagnostic::new(
            "E104",
            program.name.span,
            format!(
                "the protocol has {} threads; the model handles at most 512 (lower the role sizes)",
                threads.len()
            ),
        ));
    }

    let (expect, expect_given) = match &program.expect {
        None => (None, false),
        Some(ast::Expect::Holds(_)) => (None, true),
        Some(ast::Expect::Kinds(ks)) => (Some(ks.iter().map(|(k, _)| *k).collect()), true),
    };
    Ok(Protocol {
        name: program.name.name.clone(),
        params,
        expect,
        expect_given,
        warp_size,
        cluster,
        barriers,
        barrier_groups,
        buffers,
        buffer_groups,
        vars,
        completions,
        roles,
        threads,
    })
}

/// Tables are addressed with 16-bit indices in the state (barriers, buffers, vars, locals, roles,
/// completions): a program that needs more is rejected here, so no index can wrap and alias another
/// entry (which would turn into a wrong verdict, not an error).
pub const MAX_TABLE: usize = u16::MAX as usize;

fn index16(n: usize, what: &str, span: ast::Span) -> Result<u16, Diagnostic> {
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

/// A role's or completion's name in the lowered program: `cta1.producer` in a cluster, the
/// declared name otherwise.
fn cta_name(cluster: u32, cta: u32, name: &str) -> String {
    if cluster == 1 {
        name.to_string()
    } else {
        format!("cta{cta}.{name}")
    }
}

/// Cluster scope: CTA 0's tables repeated once per CTA (CTA-major), each copy's names prefixed
/// with its CTA (`cta1.full[0]`) and its barriers' completions pointing at its own CTA's copy of
/// the completion function.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn per_cta_tables(
    cluster: u32,
    program: &ast::Program,
    barriers: &[BarrierInfo],
    barrier_groups: &[Group],
    buffers: &[BufferInfo],
    buffer_groups: &[Group],
    vars: &[VarInfo],
    completions: usize,
) -> Result<(Vec<BarrierInfo>, Vec<Group>, Vec<BufferInfo>, Vec<Group>, Vec<VarInfo>), Diagnostic> {
    let n = cluster as usize;
    let span = program.name.span;
    index16(barriers.len() * n, "barriers", span)?;
    index16(buffers.len() * n, "buffers", span)?;
    index16(vars.len() * n, "shared vars", span)?;
    index16(completions * n, "completion functions", span)?;
    let groups = |gs: &[Group], per: usize| -> Vec<Group> {
        (0..n)
            .flat_map(|c| {
                gs.iter().map(move |g| Group {
                    name: format!("cta{c}.{}", g.name),
                    base: (c * per) as u16 + g.base,
                    len: g.len,
                    is_array: g.is_array,
                })
            })
            .collect()
    };
    let bars = (0..n)
        .flat_map(|c| {
            barriers.iter().map(move |b| BarrierInfo {
                name: format!("cta{c}.{}", b.name),
                completion: b.completion.map(|k| (c * completions) as u16 + k),
                ..b.clone()
            })
        })
        .collect();
    let bufs = (0..n)
        .flat_map(|c| {
            buffers.iter().map(move |b| BufferInfo {
                name: format!("cta{c}.{}", b.name),
                bytes: b.bytes,
            })
        })
        .collect();
    let vs = (0..n)
        .flat_map(|c| {
            vars.iter().map(move |v| VarInfo {
                name: format!("cta{c}.{}", v.name),
                init: v.init,
            })
        })
        .collect();
    Ok((
        bars,
        groups(barrier_groups, barriers.len()),
        bufs,
        groups(buffer_groups, buffers.len()),
        vs,
    ))
}

fn element_name(name: &str, is_array: bool, i: i64) -> String {
    if is_array {
        format!("{name}[{i}]")
    } else {
        name.to_string()
    }
}

fn array_len(len: Option<&ast::Expr>, consts: &HashMap<String, i64>, roles: &HashMap<String, i64>) -> Result<i64, Diagnostic> {
    match len {
        None => Ok(1),
        Some(e) => {
            let n = const_eval(e, consts, roles)?;
            if !(1..=1024).contains(&n) {
                return Err(Diagnostic::new(
                    "E105",
                    e.span,
                    format!("array length is {n}; it must be between 1 and 1024"),
                ));
            }
            Ok(n)
        }
    }
}

/// Evaluate an expression made of literals, params and `ROLE.count`. Both operands of `&&` and
/// `||` are evaluated: a declaration's value must be defined whichever way the logic goes.
pub fn const_eval<'a>(e: &'a ast::Expr, consts: &HashMap<String, i64>, roles: &HashMap<String, i64>) -> Result<i64, Diagnostic> {
    let bad = |x: &ast::Expr, msg: String| Diagnostic::new("E106", x.span, msg);
    let node = &mut |x: &'a ast::Expr| match &x.kind {
        ExprKind::Int(v) => Ok(Node::Value(*v)),
        ExprKind::Name(n) => consts.get(n).copied().map(Node::Value).ok_or_else(|| {
            bad(
                x,
                format!("`{n}` is not a parameter declared above this point; a declaration needs a value known before any thread runs"),
            )
        }),
        ExprKind::RoleCount(r) => roles.get(r).copied().map(Node::Value).ok_or_else(|| {
            bad(
                x,
                format!("`{r}.count` is not known here; roles can be counted only after the role is declared (or in code)"),
            )
        }),
        ExprKind::Unary(op, a) => Ok(Node::Unary(*op, &**a)),
        ExprKind::Binary(op, a, b) => Ok(Node::Binary(*op, &**a, &**b)),
    };
    eval::eval(e, Logic::Strict, node, &|x, m| bad(x, format!("{m} in a constant expression")))
}

struct Env<'a> {
    fns: HashMap<String, &'a ast::FnDecl>,
    consts: &'a HashMap<String, i64>,
    roles: &'a HashMap<String, i64>,
    barrier_groups: &'a [Group],
    buffer_groups: &'a [Group],
    vars: &'a [VarInfo],
    buffers: &'a [BufferInfo],
    /// CTAs in the cluster. The tables above are one CTA's (CTA 0's, as declared).
    cluster: u32,
}

/// Cluster scope: the CTA whose copy of a role or completion is being lowered. Its code names its
/// own CTA's objects (groups and vars offset by `rank` tables), `cta` is `rank`, and `gtid`/`warp`
/// are CTA-local (the model numbers threads and warps across the cluster).
#[derive(Clone, Copy)]
struct Cta {
    rank: u32,
    gtid_base: u32,
    warp_base: u32,
}

struct CodeBuilder<'a> {
    env: &'a Env<'a>,
    in_role: bool,
    cta: Cta,
    /// The hidden local of the cluster barrier, once the code uses it.
    cluster_slot: Option<u16>,
    instrs: Vec<Instr>,
    local_names: Vec<String>,
    scopes: Vec<Vec<(String, u16)>>,
    /// Scopes below this index are the caller's while an inline function body is expanded: the
    /// body sees only its parameters and its own locals.
    floor: usize,
    /// Per enclosing loop (innermost last): the `break` jumps to patch with its exit.
    loops: Vec<Vec<usize>>,
    /// Slots of loop variables (passed to a function by value, never by reference).
    loop_vars: Vec<u16>,
    /// Inline functions being expanded (a guard; `check` rejects recursion).
    inlining: usize,
    has_while: bool,
    /// Per local holding a token of an element of a barrier array, the hidden local
    /// holding that element's index + 1 (0: not known), checked by `TokenCheck` at its waits.
    token_origin: HashMap<u16, u16>,
}

impl<'a> CodeBuilder<'a> {
    fn build(env: &'a Env<'a>, name: &str, body: &ast::Block, in_role: bool, cta: Cta) -> Result<Code, Diagnostic> {
        let mut b = CodeBuilder {
            env,
            in_role,
            cta,
            cluster_slot: None,
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
        })
    }

    fn new_local(&mut self, name: &str, span: ast::Span) -> Result<u16, Diagnostic> {
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

    fn emit(&mut self, kind: InstrKind, span: ast::Span) -> usize {
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

    fn op(&mut self, op: &ast::Op, result: Option<u16>, span: ast::Span) -> Result<(), Diagnostic> {
        if let OpKind::Elect = op.kind {
            let slot = match result {
                Some(r) => r,
                None => self.new_local("$elected", span)?,
            };
            self.emit(InstrKind::Elect { slot }, span);
            return Ok(());
        }
        if self.cluster_op(op, span)? {
            return Ok(());
        }
        self.token_origins(op, result, span)?;
        let one = IExpr::Const(1);
        let iop = match &op.kind {
            OpKind::Arrive { bar, n } => IOp::Arrive {
                bar: self.bar(bar)?,
                n: match n {
                    Some(n) => self.expr(n)?,
                    None => one,
                },
                drop: false,
                expect_tx: None,
            },
            OpKind::ArriveExpectTx { bar, bytes } => IOp::Arrive {
                bar: self.bar(bar)?,
                n: one,
                drop: false,
                expect_tx: Some(self.expr(bytes)?),
            },
            OpKind::ArriveAndDrop { bar } => IOp::Arrive {
                bar: self.bar(bar)?,
                n: one,
                drop: true,
                expect_tx: None,
            },
            OpKind::Wait { bar, token } => IOp::Wait {
                bar: self.bar(bar)?,
                target: WaitTarget::Token(self.expr(token)?),
                try_: false,
            },
            OpKind::WaitParity { bar, parity } => IOp::Wait {
                bar: self.bar(bar)?,
                target: WaitTarget::Parity(self.expr(parity)?),
                try_: false,
            },
            OpKind::TryWait { bar, token } => IOp::Wait {
                bar: self.bar(bar)?,
                target: WaitTarget::Token(self.expr(token)?),
                try_: true,
            },
            OpKind::TryWaitParity { bar, parity } => IOp::Wait {
                bar: self.bar(bar)?,
                target: WaitTarget::Parity(self.expr(parity)?),
                try_: true,
            },
            OpKind::ArriveAndWait { bar } => {
                // libcu++: `wait(arrive())`. Two steps: other threads may act in between.
                let r = self.bar(bar)?;
                let tok = self.new_local("$token", span)?;
                self.emit(
                    InstrKind::Op {
                        op: IOp::Arrive {
                            bar: r.clone(),
                            n: one,
                            drop: false,
                            expect_tx: None,
                        },
                        result: Some(tok),
                    },
                    span,
                );
                IOp::Wait {
                    bar: r,
                    target: WaitTarget::Token(IExpr::Local(tok)),
                    try_: false,
                }
            }
            OpKind::ExpectTx { bar, bytes } => IOp::ExpectTx {
                bar: self.bar(bar)?,
                bytes: self.expr(bytes)?,
            },
            OpKind::CompleteTx { bar, bytes } => IOp::CompleteTx {
                bar: self.bar(bar)?,
                bytes: self.expr(bytes)?,
            },
            OpKind::CopyAsync { buf, bar, bytes, version } => IOp::Copy {
                buf: self.buf(buf)?,
                bar: self.bar(bar)?,
                bytes: bytes.as_ref().map(|e| self.expr(e)).transpose()?,
                version: version.as_ref().map(|e| self.expr(e)).transpose()?,
            },
            OpKind::MemcpyAsync { buf, bar, bytes, version } => {
                // libcu++ issues the copy first, THEN raises the tx-count: the copy may land in
                // between and drive the tx-count negative for a moment.
                let b = self.buf(buf)?;
                let r = self.bar(bar)?;
                let bytes_expr = match bytes {
                    Some(e) => self.expr(e)?,
                    None => {
                        let g = self.buffer_group(&b);
                        // The size is the same for every element of a buffer array.
                        IExpr::Const(buffer_bytes_of(self.env, g))
                    }
                };
                let version = version.as_ref().map(|e| self.expr(e)).transpose()?;
                self.emit(
                    InstrKind::Op {
                        op: IOp::Copy {
                            buf: b,
                            bar: r.clone(),
                            bytes: Some(bytes_expr.clone()),
                            version,
                        },
                        result: None,
                    },
                    span,
                );
                IOp::ExpectTx { bar: r, bytes: bytes_expr }
            }
            OpKind::Read { buf, expect } => IOp::Read {
                buf: self.buf(buf)?,
                expect: expect.as_ref().map(|e| self.expr(e)).transpose()?,
            },
            OpKind::Write { buf, version } => IOp::Write {
                buf: self.buf(buf)?,
                version: self.expr(version)?,
            },
            OpKind::Init { bar, count } => IOp::Init {
                bar: self.bar(bar)?,
                count: count.as_ref().map(|e| self.expr(e)).transpose()?,
            },
            OpKind::Inval { bar } => IOp::Inval { bar: self.bar(bar)? },
            OpKind::Commit { bar } => IOp::Commit { bar: self.bar(bar)? },
            OpKind::Elect => unreachable!("handled above"),
            // Named barriers.
            OpKind::BarSync { id, count } | OpKind::BarArrive { id, count } => {
                if self.env.cluster > 1 {
                    return Err(Diagnostic::new(
                        "E115",
                        span,
                        format!("`{}` in a cluster of {} CTAs: named barriers are per CTA and the model keeps them only without `cluster` (use mbarriers, or model one CTA)", op.kind.keyword(), self.env.cluster),
                    ));
                }
                let kind = InstrKind::NamedBar {
                    id: self.expr(id)?,
                    count: self.expr(count)?,
                    sync: matches!(op.kind, OpKind::BarSync { .. }),
                };
                self.emit(kind, span);
                return Ok(());
            }
            OpKind::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => {
                let b = self.buf(buf)?;
                let (offset, bytes) = self.byte_range(&b, offset.as_ref(), bytes.as_ref())?;
                IOp::CpAsync {
                    buf: b,
                    offset,
                    bytes,
                    version: version.as_ref().map(|e| self.expr(e)).transpose()?,
                }
            }
            OpKind::CpAsyncArrive { bar, noinc } => IOp::CpAsyncArrive {
                bar: self.bar(bar)?,
                noinc: *noinc,
            },
            OpKind::CopyAsyncPart {
                buf,
                bar,
                offset,
                bytes,
                version,
                libcu,
            } => {
                let b = self.buf(buf)?;
                let r = self.bar(bar)?;
                let (offset, bytes) = self.byte_range(&b, Some(offset), bytes.as_ref())?;
                let copy = IOp::CopyPart {
                    buf: b,
                    bar: r.clone(),
                    offset,
                    bytes: bytes.clone(),
                    version: version.as_ref().map(|e| self.expr(e)).transpose()?,
                };
                if !*libcu {
                    copy
                } else {
                    // memcpy_async: the copy, then expect_tx(bytes), as for a whole buffer.
                    self.emit(InstrKind::Op { op: copy, result: None }, span);
                    IOp::ExpectTx { bar: r, bytes }
                }
            }
            OpKind::ReadPart {
                buf,
                offset,
                bytes,
                expect,
            } => {
                let b = self.buf(buf)?;
                let (offset, bytes) = self.byte_range(&b, Some(offset), bytes.as_ref())?;
                IOp::ReadPart {
                    buf: b,
                    offset,
                    bytes,
                    expect: expect.as_ref().map(|e| self.expr(e)).transpose()?,
                }
            }
            // The async proxy.
            OpKind::CopyStoreAsync { buf } => IOp::StoreAsync { buf: self.buf(buf)? },
            OpKind::CommitGroup => IOp::CommitGroup,
            OpKind::WaitGroup { n, read } => IOp::WaitGroup {
                n: self.expr(n)?,
                read: *read,
            },
            OpKind::WgmmaAsync { bufs } => IOp::Wgmma {
                bufs: bufs.iter().map(|b| self.buf(b)).collect::<Result<_, _>>()?,
            },
            OpKind::WgmmaWait { n } => IOp::WgmmaWait { n: self.expr(n)? },
            OpKind::FenceProxyAsync => IOp::FenceProxyAsync,
            OpKind::FenceMbarrierInit => IOp::FenceMbarrierInit,
            OpKind::Remote { .. } | OpKind::ClusterArrive | OpKind::ClusterWait | OpKind::ClusterSync => {
                unreachable!("lowered by cluster_op")
            }
        };
        self.emit(InstrKind::Op { op: iop, result }, span);
        Ok(())
    }

    /// Cluster scope: lowers a remote or multicast operation, or a cluster barrier statement;
    /// false for every other operation.
    fn cluster_op(&mut self, op: &ast::Op, span: ast::Span) -> Result<bool, Diagnostic> {
        match &op.kind {
            OpKind::Remote { target, op: inner } => {
                let target_expr = self.expr(target.expr())?;
                // The operation is lowered as for the own CTA (one instruction: remote ops are
                // arrive, read and copy_async, none of which expands), then aimed at the target.
                let at = self.instrs.len();
                self.op(inner, None, span)?;
                let Some(InstrKind::Op { op: own, .. }) = self.instrs.get_mut(at).map(|i| &mut i.kind) else {
                    unreachable!("a remote operation lowers to one operation");
                };
                let own = std::mem::replace(own, IOp::FenceProxyAsync);
                self.instrs[at].kind = InstrKind::Op {
                    op: IOp::Remote {
                        target: target_expr,
                        multicast: matches!(target, ast::ClusterTarget::Multicast(_)),
                        op: Box::new(own),
                    },
                    result: None,
                };
                Ok(true)
            }
            OpKind::ClusterArrive | OpKind::ClusterWait | OpKind::ClusterSync => {
                let slot = match self.cluster_slot {
                    Some(s) => s,
                    None => {
                        let s = self.new_local("$cluster", span)?;
                        self.cluster_slot = Some(s);
                        s
                    }
                };
                if !matches!(op.kind, OpKind::ClusterWait) {
                    self.emit(InstrKind::ClusterArrive { slot }, span);
                }
                if !matches!(op.kind, OpKind::ClusterArrive) {
                    self.emit(InstrKind::ClusterWait { slot }, span);
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Cluster scope: the lowered index of declared var `v` in this code's CTA.
    fn own_var(&self, v: usize) -> u16 {
        (self.cta.rank as usize * self.env.vars.len() + v) as u16
    }

    /// The declared (CTA 0) group of a lowered buffer reference: the sizes are the same in every
    /// CTA.
    fn buffer_group(&self, r: &Ref) -> &'a Group {
        let groups = self.env.buffer_groups;
        &groups[r.group as usize % groups.len()]
    }

    /// Tokens of barrier-array elements. An arrival into a local records the element's
    /// index + 1 in a hidden local; a wait or try_wait with that local as its token on the same
    /// array first checks the index (`TokenCheck`). Different declared barriers are E040 before
    /// lowering; an index that reads a shared var is not tracked.
    fn token_origins(&mut self, op: &ast::Op, result: Option<u16>, span: ast::Span) -> Result<(), Diagnostic> {
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
    fn byte_range(&mut self, b: &Ref, offset: Option<&ast::Expr>, bytes: Option<&ast::Expr>) -> Result<(IExpr, IExpr), Diagnostic> {
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

    fn bar(&mut self, p: &ast::Place) -> Result<Ref, Diagnostic> {
        let groups = self.env.barrier_groups;
        self.place(p, groups, "barrier")
    }

    fn buf(&mut self, p: &ast::Place) -> Result<Ref, Diagnostic> {
        let groups = self.env.buffer_groups;
        self.place(p, groups, "buffer")
    }

    fn expr(&mut self, e: &ast::Expr) -> Result<IExpr, Diagnostic> {
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

fn buffer_bytes_of(env: &Env, g: &Group) -> i64 {
    // Every element of a buffer array has the declared size.
    env.buffers[g.base as usize].bytes
}
