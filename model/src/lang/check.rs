//! Static checks that do not depend on parameter values: names, kinds of names, scoping,
//! indexing, and what a completion function may do. `check` returns the first problem;
//! `check_all` goes on after each one (at the next declaration, or the next statement of a
//! body) and returns up to `MAX_ERRORS`, so that a user fixes a file in one round.

use super::ast::*;
use super::diag::Diagnostic;
use std::collections::HashMap;

/// The per-thread names a role body can read.
pub const BUILTINS: &[&str] = &["tid", "gtid", "lane", "warp", "cta"];

/// The candidate closest to `name` by edit distance, if it is close enough to be a likely typo
/// (distance at most 2, and at most half the name's length). Ties go to the earliest candidate.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        let d = edit_distance(name, c);
        if d <= 2 && 2 * d <= name.chars().count().max(1) && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match closest(name, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Global {
    Param,
    Barrier {
        array: bool,
    },
    Buffer {
        array: bool,
    },
    /// `tensormap NAME`: a TMA descriptor, named only by the tensormap statements.
    Tensormap {
        array: bool,
    },
    /// `counter NAME`: a value cell, named only by `atomic_add` and `read_counter`.
    Counter {
        array: bool,
    },
    Var,
    Completion,
    Role,
    Function {
        arity: usize,
    },
}

impl Global {
    fn describe(self) -> &'static str {
        match self {
            Global::Param => "a param",
            Global::Barrier { .. } => "a barrier",
            Global::Buffer { .. } => "a buffer",
            Global::Tensormap { .. } => "a tensormap (a TMA descriptor)",
            Global::Counter { .. } => "a counter",
            Global::Var => "a shared var",
            Global::Completion => "a completion function",
            Global::Role => "a role",
            Global::Function { .. } => "a function",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Local {
    Let,
    Loop,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Role,
    Completion,
    /// The body of an inline function (expanded into role code at each call).
    Function,
}

fn err(code: &'static str, span: Span, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::new(code, span, msg)
}

/// Checks a parsed program; see docs/errors.md for the codes. The first problem, in source
/// order.
pub fn check(p: &Program) -> Result<(), Diagnostic> {
    match check_all(p).into_iter().next() {
        Some(d) => Err(d),
        None => Ok(()),
    }
}

/// How many problems `check_all` reports at most: past that, later ones are mostly echoes of
/// earlier ones.
pub const MAX_ERRORS: usize = 20;

/// Every problem of a parsed program (up to `MAX_ERRORS`), in source order. After a problem
/// the check resumes at the next declaration or statement; a `let` whose statement failed is
/// still declared, so that its uses do not add "not declared" echoes. Problems with the
/// declarations themselves (a name declared twice) stop the check: what follows would be
/// checked against the wrong names.
pub fn check_all(p: &Program) -> Vec<Diagnostic> {
    let mut c = Checker {
        globals: HashMap::new(),
        order: Vec::new(),
        scopes: Vec::new(),
        ctx: Ctx::Role,
        errors: Vec::new(),
        loops: 0,
        cluster: p.items.iter().any(|i| matches!(i, Item::Cluster(_))),
    };
    if let Err(d) = c.collect(p) {
        return vec![d];
    }
    for item in &p.items {
        let depth = c.scopes.len();
        if let Err(d) = c.item(item) {
            c.errors.push(d);
            c.scopes.truncate(depth);
        }
    }
    if let Err(d) = c.cycles(p) {
        c.errors.push(d);
    }
    if let Err(d) = c.recursion(p) {
        c.errors.push(d);
    }
    if let Err(d) = c.roles_present(p) {
        c.errors.push(d);
    }
    if c.errors.is_empty() {
        // A token waited on at another barrier than the one it came from (E040).
        c.errors.extend(super::tokens::check_token_barriers(p));
        c.errors.sort_by_key(|d| d.span.start);
    }
    c.errors.truncate(MAX_ERRORS);
    c.errors
}

struct Checker {
    globals: HashMap<String, Global>,
    /// Global names in declaration order, for deterministic suggestions.
    order: Vec<String>,
    scopes: Vec<Vec<(String, Local)>>,
    ctx: Ctx,
    /// Problems found so far (the check goes on after each).
    errors: Vec<Diagnostic>,
    /// Loops (`for`, `while`) around the statement being checked: `break` needs one.
    loops: usize,
    /// The protocol has a `cluster N` line: a counter statement may name a peer (`cta = R`).
    cluster: bool,
}

impl Checker {
    fn roles_present(&self, p: &Program) -> Result<(), Diagnostic> {
        if p.roles().next().is_none() {
            return Err(err(
                "E031",
                p.name.span,
                format!(
                    "`protocol {}` declares no role; add at least one, like `role worker[1] {{ work }}`",
                    p.name.name
                ),
            ));
        }
        Ok(())
    }

    fn collect(&mut self, p: &Program) -> Result<(), Diagnostic> {
        for item in &p.items {
            let (name, g) = match item {
                Item::Param(d) => (&d.name, Global::Param),
                Item::Barrier(d) => (&d.name, Global::Barrier { array: d.len.is_some() }),
                Item::Buffer(d) if d.tensormap => (&d.name, Global::Tensormap { array: d.len.is_some() }),
                Item::Buffer(d) if d.counter => (&d.name, Global::Counter { array: d.len.is_some() }),
                Item::Buffer(d) => (&d.name, Global::Buffer { array: d.len.is_some() }),
                Item::Var(d) => (&d.name, Global::Var),
                Item::Completion(d) => (&d.name, Global::Completion),
                Item::Role(d) => (&d.name, Global::Role),
                Item::Function(d) => (&d.name, Global::Function { arity: d.params.len() }),
                Item::WarpSize(_) | Item::Cluster(_) => continue,
            };
            if BUILTINS.contains(&name.name.as_str()) {
                return Err(builtin_redeclared(name));
            }
            if let Some(prev) = self.globals.get(&name.name) {
                return Err(err(
                    "E020",
                    name.span,
                    format!(
                        "`{}` is already declared as {}; give this {} another name",
                        name.name,
                        prev.describe(),
                        &g.describe()[2..]
                    ),
                ));
            }
            self.globals.insert(name.name.clone(), g);
            self.order.push(name.name.clone());
        }
        Ok(())
    }

    fn names_where(&self, f: impl Fn(Global) -> bool) -> Vec<&str> {
        self.order.iter().filter(|n| f(self.globals[*n])).map(|s| s.as_str()).collect()
    }

    fn local(&self, name: &str) -> Option<Local> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .find(|(n, _)| n == name)
            .map(|(_, l)| *l)
    }

    fn locals(&self) -> Vec<&str> {
        self.scopes.iter().flat_map(|s| s.iter()).map(|(n, _)| n.as_str()).collect()
    }

    fn item(&mut self, item: &Item) -> Result<(), Diagnostic> {
        match item {
            Item::Param(d) => self.const_expr(&d.value, "a param's value"),
            Item::WarpSize(e) => self.const_expr(e, "`warp_size`"),
            Item::Cluster(e) => self.const_expr(e, "`cluster`"),
            Item::Barrier(d) => {
                if let Some(len) = &d.len {
                    self.const_expr(len, "an array length")?;
                }
                self.const_expr(&d.count, "a barrier's count")?;
                if let Some(c) = &d.completion {
                    match self.globals.get(&c.name) {
                        Some(Global::Completion) => {}
                        Some(other) => {
                            return Err(err(
                                "E028",
                                c.span,
                                format!(
                                    "`{}` is {}, not a completion function; declare `completion {} {{ ... }}` or name an existing one",
                                    c.name,
                                    other.describe(),
                                    c.name
                                ),
                            ))
                        }
                        None => {
                            let hint = did_you_mean(&c.name, self.names_where(|g| g == Global::Completion));
                            let msg = if hint.is_empty() {
                                format!(
                                    "no completion function `{}` is declared; add `completion {} {{ ... }}`",
                                    c.name, c.name
                                )
                            } else {
                                format!("no completion function `{}` is declared{hint}", c.name)
                            };
                            return Err(err("E028", c.span, msg));
                        }
                    }
                }
                Ok(())
            }
            Item::Buffer(d) => {
                if let Some(len) = &d.len {
                    self.const_expr(len, "an array length")?;
                }
                self.const_expr(&d.bytes, "a buffer's size")
            }
            Item::Var(d) => self.const_expr(&d.init, "a var's initial value"),
            Item::Completion(d) => {
                self.ctx = Ctx::Completion;
                self.block(&d.body)
            }
            Item::Role(d) => {
                self.const_expr(&d.count, "a role's thread count")?;
                self.ctx = Ctx::Role;
                self.block(&d.body)
            }
            Item::Function(d) => {
                self.ctx = Ctx::Function;
                self.scopes.push(Vec::new());
                for prm in &d.params {
                    self.declare(prm, Local::Let)?;
                }
                let loops = std::mem::replace(&mut self.loops, 0);
                let r = self.block(&d.body);
                self.loops = loops;
                self.scopes.pop();
                r
            }
        }
    }

    /// Expressions of declarations: evaluated before any thread runs, from params, literals and
    /// role sizes only.
    fn const_expr(&self, e: &Expr, what: &str) -> Result<(), Diagnostic> {
        match &e.kind {
            ExprKind::Int(_) => Ok(()),
            ExprKind::Name(n) => match self.globals.get(n) {
                Some(Global::Param) => Ok(()),
                Some(Global::Var) => Err(err(
                    "E033",
                    e.span,
                    format!("{what} is fixed before any thread runs, so it cannot read the shared var `{n}`; use a param, a literal or `ROLE.count`"),
                )),
                Some(Global::Role) => Err(err(
                    "E032",
                    e.span,
                    format!("`{n}` is a role, not a number; did you mean `{n}.count`?"),
                )),
                Some(g) => Err(err(
                    "E032",
                    e.span,
                    format!("`{n}` is {}, not a number; {what} can use params, literals and `ROLE.count`", g.describe()),
                )),
                None if BUILTINS.contains(&n.as_str()) => Err(err(
                    "E033",
                    e.span,
                    format!("{what} is fixed before any thread runs, so it cannot use `{n}`; use a param, a literal or `ROLE.count`"),
                )),
                None => {
                    let hint = did_you_mean(n, self.names_where(|g| g == Global::Param));
                    let msg = if hint.is_empty() {
                        format!("no param `{n}` is declared; declare it with `param {n} = ...`")
                    } else {
                        format!("no param `{n}` is declared{hint}")
                    };
                    Err(err("E021", e.span, msg))
                }
            },
            ExprKind::RoleCount(r) => self.role_count(r, e.span),
            ExprKind::Unary(_, x) => self.const_expr(x, what),
            ExprKind::Binary(_, a, b) => {
                self.const_expr(a, what)?;
                self.const_expr(b, what)
            }
        }
    }

    fn role_count(&self, r: &str, span: Span) -> Result<(), Diagnostic> {
        match self.globals.get(r) {
            Some(Global::Role) => Ok(()),
            Some(g) => Err(err(
                "E026",
                span,
                format!(
                    "`{r}` is {}, not a role, so it has no `.count`; name a role, like `consumer.count`",
                    g.describe()
                ),
            )),
            None => {
                let hint = did_you_mean(r, self.names_where(|g| g == Global::Role));
                let msg = if hint.is_empty() {
                    format!("no role `{r}` is declared, so `{r}.count` has no value; name a declared role")
                } else {
                    format!("no role `{r}` is declared{hint}")
                };
                Err(err("E026", span, msg))
            }
        }
    }

    fn block(&mut self, b: &Block) -> Result<(), Diagnostic> {
        self.scopes.push(Vec::new());
        for s in &b.stmts {
            let depth = self.scopes.len();
            if let Err(d) = self.stmt(s) {
                self.errors.push(d);
                self.scopes.truncate(depth);
                if let StmtKind::Let { name, .. } = &s.kind {
                    let _ = self.declare(name, Local::Let);
                }
            }
        }
        self.scopes.pop();
        Ok(())
    }

    fn declare(&mut self, name: &Ident, kind: Local) -> Result<(), Diagnostic> {
        let n = &name.name;
        if BUILTINS.contains(&n.as_str()) {
            return Err(builtin_redeclared(name));
        }
        if let Some(g) = self.globals.get(n) {
            return Err(err(
                "E020",
                name.span,
                format!("`{n}` is already declared as {}; give this local another name", g.describe()),
            ));
        }
        if let Some(l) = self.local(n) {
            let msg = if l == Local::Loop {
                format!("`{n}` is already the loop variable here; choose another name")
            } else {
                format!("`{n}` is already declared as a local here; assign to it with `{n} = ...` or choose another name")
            };
            return Err(err("E020", name.span, msg));
        }
        self.scopes.last_mut().expect("a scope is open").push((n.clone(), kind));
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), Diagnostic> {
        match &s.kind {
            StmtKind::Let { name, value } => {
                self.value(value, &name.name)?;
                self.declare(name, Local::Let)
            }
            StmtKind::Assign { name, value } => {
                self.value(value, &name.name)?;
                self.assign_target(name)
            }
            StmtKind::For { var, lo, hi, body } => {
                self.expr(lo)?;
                self.expr(hi)?;
                self.scopes.push(Vec::new());
                self.declare(var, Local::Loop)?;
                self.loops += 1;
                let r = self.block(body);
                self.loops -= 1;
                r?;
                self.scopes.pop();
                Ok(())
            }
            StmtKind::While { cond, body } => {
                if self.ctx == Ctx::Completion {
                    return Err(err(
                        "E036",
                        s.span,
                        "a completion function must finish without blocking, so it cannot hold a `while` loop (it could spin forever); use a `for` loop with fixed bounds",
                    ));
                }
                self.expr(cond)?;
                self.loops += 1;
                let r = self.block(body);
                self.loops -= 1;
                r
            }
            StmtKind::Break => {
                if self.loops == 0 {
                    return Err(err(
                        "E035",
                        s.span,
                        "`break` leaves the innermost `for` or `while` loop, and there is none around it here; remove it, or use `return` to end the thread",
                    ));
                }
                Ok(())
            }
            StmtKind::Return if self.ctx == Ctx::Function => Err(err(
                "E039",
                s.span,
                "`return` inside an inline function would end the calling thread, not the function; restructure the body with `if`, or return from the role",
            )),
            StmtKind::SyncWarpMask(m) => {
                if self.ctx == Ctx::Completion {
                    return Err(err(
                        "E030",
                        s.span,
                        "a completion function runs in no particular thread, so a `syncwarp` there is a `syncwarp` outside any warp; move it into a role body",
                    ));
                }
                self.expr(m)
            }
            StmtKind::Call { name, args } => {
                if self.ctx == Ctx::Completion {
                    return Err(err(
                        "E037",
                        name.span,
                        format!("a completion function cannot call `{}`: inline functions are expanded into role code only", name.name),
                    ));
                }
                match self.globals.get(&name.name) {
                    Some(Global::Function { arity }) if *arity == args.len() => {}
                    Some(Global::Function { arity }) => {
                        return Err(err(
                            "E037",
                            s.span,
                            format!(
                                "`{}` takes {arity} argument{} but is given {}",
                                name.name,
                                if *arity == 1 { "" } else { "s" },
                                args.len()
                            ),
                        ))
                    }
                    _ => {
                        return Err(err(
                            "E037",
                            name.span,
                            format!("`{}` is not a function; declare it with `fn {}(...) {{ ... }}`", name.name, name.name),
                        ))
                    }
                }
                for a in args {
                    self.expr(a)?;
                }
                Ok(())
            }
            StmtKind::If { cond, then, els } => {
                self.expr(cond)?;
                self.block(then)?;
                if let Some(e) = els {
                    self.block(e)?;
                }
                Ok(())
            }
            StmtKind::Op(op) => self.op(op),
            StmtKind::Assert(e) => self.expr(e),
            StmtKind::SyncWarp if self.ctx == Ctx::Completion => Err(err(
                "E030",
                s.span,
                "a completion function runs in no particular thread, so a `syncwarp` there is a `syncwarp` outside any warp; move it into a role body",
            )),
            StmtKind::Return | StmtKind::Work | StmtKind::SyncWarp | StmtKind::SyncThreads => Ok(()),
        }
    }

    fn value(&mut self, v: &Value, target: &str) -> Result<(), Diagnostic> {
        match v {
            Value::Expr(e) => self.expr(e),
            Value::Op(op) => {
                self.op(op)?;
                if let OpKind::Remote { target: to, .. } = &op.kind {
                    return Err(err(
                        "E027",
                        op.span,
                        format!(
                            "`{}` with `{} = ...` yields no value to store in `{target}`: an operation on another CTA returns no token (PTX's `.shared::cluster` arrive has none); write it as a statement on its own",
                            op.kind.keyword(),
                            to.arg_name()
                        ),
                    ));
                }
                if !op.kind.yields_value() {
                    return Err(err(
                        "E027",
                        op.span,
                        format!(
                            "`{}` yields no value to store in `{target}`; write it as a statement on its own (only arrive, arrive_expect_tx, try_wait and try_wait_parity yield values)",
                            op.kind.keyword()
                        ),
                    ));
                }
                Ok(())
            }
        }
    }

    fn assign_target(&self, name: &Ident) -> Result<(), Diagnostic> {
        let n = &name.name;
        match self.local(n) {
            Some(Local::Let) => return Ok(()),
            Some(Local::Loop) => {
                return Err(err(
                    "E022",
                    name.span,
                    format!("the loop variable `{n}` cannot be assigned; copy it into a local with `let` and change that"),
                ))
            }
            None => {}
        }
        if BUILTINS.contains(&n.as_str()) {
            return Err(err(
                "E022",
                name.span,
                format!("`{n}` is a built-in thread index and is read-only; copy it into a local with `let` and change that"),
            ));
        }
        match self.globals.get(n) {
            Some(Global::Var) => Ok(()),
            Some(Global::Param) => Err(err(
                "E022",
                name.span,
                format!("the param `{n}` is read-only; assign to a `var` or a `let` local instead"),
            )),
            Some(g) => Err(err(
                "E022",
                name.span,
                format!("`{n}` is {} and cannot be assigned; only `let` locals and `var`s can", g.describe()),
            )),
            None => {
                let mut cands = self.locals();
                cands.extend(self.names_where(|g| g == Global::Var));
                let hint = did_you_mean(n, cands);
                let msg = if hint.is_empty() {
                    format!("`{n}` is not declared; declare a local with `let {n} = ...` or a shared `var {n} = ...` at top level")
                } else {
                    format!("`{n}` is not declared{hint}")
                };
                Err(err("E021", name.span, msg))
            }
        }
    }

    fn expr(&self, e: &Expr) -> Result<(), Diagnostic> {
        match &e.kind {
            ExprKind::Int(_) => Ok(()),
            ExprKind::Name(n) => self.name(n, e.span),
            ExprKind::RoleCount(r) => self.role_count(r, e.span),
            ExprKind::Unary(_, x) => self.expr(x),
            ExprKind::Binary(_, a, b) => {
                self.expr(a)?;
                self.expr(b)
            }
        }
    }

    fn name(&self, n: &str, span: Span) -> Result<(), Diagnostic> {
        if self.local(n).is_some() {
            return Ok(());
        }
        if BUILTINS.contains(&n) {
            return match self.ctx {
                Ctx::Role | Ctx::Function => Ok(()),
                Ctx::Completion => Err(err(
                    "E029",
                    span,
                    format!("a completion function runs in no particular thread, so `{n}` has no value there; pass what it needs through a `var`"),
                )),
            };
        }
        match self.globals.get(n) {
            Some(Global::Param | Global::Var) => Ok(()),
            Some(Global::Role) => Err(err(
                "E032",
                span,
                format!("`{n}` is a role, not a number; did you mean `{n}.count`?"),
            )),
            Some(Global::Barrier { .. }) | Some(Global::Buffer { .. }) | Some(Global::Tensormap { .. }) | Some(Global::Counter { .. }) => {
                Err(err(
                    "E032",
                    span,
                    format!(
                        "`{n}` is {}, not a number; pass it to an operation instead, like `arrive({n})`",
                        self.globals[n].describe()
                    ),
                ))
            }
            Some(Global::Completion) => Err(err(
                "E032",
                span,
                format!("`{n}` is a completion function, not a number; attach it to a barrier with `completion {n}`"),
            )),
            Some(Global::Function { .. }) => Err(err(
                "E032",
                span,
                format!("`{n}` is a function, not a number; call it as a statement, like `{n}(...)`"),
            )),
            None => {
                let mut cands = self.locals();
                cands.extend(self.names_where(|g| matches!(g, Global::Param | Global::Var)));
                if self.ctx != Ctx::Completion {
                    cands.extend(BUILTINS.iter().copied());
                }
                let hint = did_you_mean(n, cands);
                let msg = if hint.is_empty() {
                    format!("`{n}` is not declared; declare it with `let {n} = ...`, `param {n} = ...` or `var {n} = ...`")
                } else {
                    format!("`{n}` is not declared{hint}")
                };
                Err(err("E021", span, msg))
            }
        }
    }

    fn op(&self, op: &Op) -> Result<(), Diagnostic> {
        let kw = op.kind.keyword();
        let mut exprs: Vec<&Expr> = Vec::new();
        match &op.kind {
            OpKind::Arrive { bar, n } => {
                self.place(bar, true, kw)?;
                exprs.extend(n);
            }
            OpKind::ArriveExpectTx { bar, bytes } | OpKind::ExpectTx { bar, bytes } | OpKind::CompleteTx { bar, bytes } => {
                self.place(bar, true, kw)?;
                exprs.push(bytes);
            }
            OpKind::Wait { bar, token } | OpKind::TryWait { bar, token } => {
                self.place(bar, true, kw)?;
                exprs.push(token);
            }
            OpKind::WaitParity { bar, parity } | OpKind::TryWaitParity { bar, parity } => {
                self.place(bar, true, kw)?;
                exprs.push(parity);
            }
            OpKind::ArriveAndWait { bar } | OpKind::ArriveAndDrop { bar } | OpKind::Inval { bar } => {
                self.place(bar, true, kw)?;
            }
            OpKind::Commit { bar } => {
                if self.ctx == Ctx::Completion {
                    return Err(err(
                        "E030",
                        op.span,
                        "a completion function runs in no particular thread, so a `commit` there is a `commit` outside any warp; arrive with `arrive(B)` from a role instead",
                    ));
                }
                self.place(bar, true, kw)?;
            }
            OpKind::CopyAsync { buf, bar, bytes, version } | OpKind::MemcpyAsync { buf, bar, bytes, version } => {
                self.place(buf, false, kw)?;
                self.place(bar, true, kw)?;
                exprs.extend(bytes);
                exprs.extend(version);
            }
            OpKind::Read { buf, expect } => {
                self.place(buf, false, kw)?;
                exprs.extend(expect);
            }
            OpKind::Write { buf, version } => {
                self.place(buf, false, kw)?;
                exprs.push(version);
            }
            OpKind::WritePart {
                buf,
                version,
                offset,
                bytes,
            } => {
                self.place(buf, false, kw)?;
                exprs.push(version);
                exprs.push(offset);
                exprs.extend(bytes);
            }
            OpKind::Init { bar, count } => {
                self.place(bar, true, kw)?;
                exprs.extend(count);
            }
            OpKind::Elect => {
                if self.ctx == Ctx::Completion {
                    return Err(err(
                        "E030",
                        op.span,
                        "a completion function runs in no particular thread, so an `elect()` there has no warp to elect from; move it into a role body",
                    ));
                }
            }
            // Named barriers, cp.async, partial copies and reads
            OpKind::BarSync { id, count } | OpKind::BarArrive { id, count } => {
                if self.ctx == Ctx::Completion {
                    return Err(err(
                        "E030",
                        op.span,
                        format!("a completion function runs in no particular thread, so a `{kw}` there has no warp to arrive with; move it into a role body"),
                    ));
                }
                exprs.push(id);
                exprs.push(count);
            }
            OpKind::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => {
                if self.ctx == Ctx::Completion {
                    return Err(err(
                        "E030",
                        op.span,
                        "a completion function runs in no particular thread, so a `cp_async` there has no thread to track it; issue it from a role body",
                    ));
                }
                self.place(buf, false, kw)?;
                exprs.extend(offset);
                exprs.extend(bytes);
                exprs.extend(version);
            }
            OpKind::CpAsyncArrive { bar, .. } => {
                if self.ctx == Ctx::Completion {
                    return Err(err(
                        "E030",
                        op.span,
                        format!("a completion function runs in no particular thread, so a `{kw}` there has no cp.async copies of its own; issue it from a role body"),
                    ));
                }
                self.place(bar, true, kw)?;
            }
            OpKind::CopyAsyncPart {
                buf,
                bar,
                offset,
                bytes,
                version,
                ..
            } => {
                self.place(buf, false, kw)?;
                self.place(bar, true, kw)?;
                exprs.push(offset);
                exprs.extend(bytes);
                exprs.extend(version);
            }
            OpKind::StAsync {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => {
                self.place(buf, false, kw)?;
                self.place(bar, true, kw)?;
                exprs.extend([offset, bytes, version]);
            }
            OpKind::CopyAsyncFrom {
                buf,
                bar,
                src,
                offset,
                bytes,
            } => {
                self.place(buf, false, kw)?;
                self.place(bar, true, kw)?;
                self.place(src, false, kw)?;
                exprs.extend(offset);
                exprs.extend(bytes);
            }
            OpKind::ReadPart {
                buf,
                offset,
                bytes,
                expect,
            } => {
                self.place(buf, false, kw)?;
                exprs.push(offset);
                exprs.extend(bytes);
                exprs.extend(expect);
            }
            // The async proxy: operations of a thread's own bulk and wgmma groups.
            OpKind::CopyStoreAsync { .. }
            | OpKind::CopyStoreAsyncPart { .. }
            | OpKind::CommitGroup
            | OpKind::WaitGroup { .. }
            | OpKind::CpAsyncCommitGroup
            | OpKind::CpAsyncWait { .. }
            | OpKind::WgmmaAsync { .. }
            | OpKind::WgmmaWait { .. }
            | OpKind::FenceProxyAsync
            | OpKind::FenceMbarrierInit
            | OpKind::FenceProxyTensormap { .. }
            | OpKind::CopyAsyncTensor { .. }
                if self.ctx == Ctx::Completion =>
            {
                return Err(err(
                    "E030",
                    op.span,
                    format!("a completion function runs in no particular thread, so `{kw}` there has no thread whose async operations it would order; move it into a role body"),
                ));
            }
            OpKind::CopyStoreAsync { buf } => self.place(buf, false, kw)?,
            OpKind::CopyStoreAsyncPart { buf, offset, bytes } => {
                self.place(buf, false, kw)?;
                exprs.push(offset);
                exprs.extend(bytes);
            }
            OpKind::WgmmaAsync { bufs, expect, .. } => {
                for b in bufs {
                    self.place(b, false, kw)?;
                }
                exprs.extend(expect);
            }
            OpKind::WaitGroup { n, .. } | OpKind::WgmmaWait { n, .. } => exprs.push(n),
            OpKind::CommitGroup | OpKind::FenceProxyAsync | OpKind::FenceMbarrierInit => {}
            OpKind::TensormapWrite { map, version } => {
                self.tensormap_place(map, kw)?;
                exprs.push(version);
            }
            OpKind::FenceProxyTensormap { map } => self.tensormap_place(map, kw)?,
            OpKind::AtomicAdd { counter, value } => {
                self.counter_place(counter, kw)?;
                exprs.push(value);
            }
            OpKind::ReadCounter { counter, expect } => {
                self.counter_place(counter, kw)?;
                exprs.extend(expect);
            }
            OpKind::CopyAsyncTensor { map, expect, op } => {
                self.tensormap_place(map, kw)?;
                self.op(op)?;
                exprs.extend(expect);
            }
            OpKind::CpAsyncWait { n: Some(n) } => exprs.push(n),
            OpKind::CpAsyncCommitGroup | OpKind::CpAsyncWait { n: None } => {}
            // Cluster scope: a completion function runs on no thread of any particular CTA's
            // program order, so it takes part in no cluster barrier and reaches no peer.
            OpKind::Remote { .. } | OpKind::ClusterArrive | OpKind::ClusterArriveRelaxed | OpKind::ClusterWait | OpKind::ClusterSync
                if self.ctx == Ctx::Completion =>
            {
                return Err(err(
                    "E030",
                    op.span,
                    format!("a completion function runs in no particular thread, so a cluster-scope `{kw}` there has no thread of the cluster to run it; move it into a role body"),
                ));
            }
            OpKind::Remote { target, op: inner } => {
                if matches!(inner.kind, OpKind::AtomicAdd { .. } | OpKind::ReadCounter { .. }) && !self.cluster {
                    // Without a cluster the only rank is the own CTA's; a counter statement that
                    // names one means a peer that does not exist (read/write keep accepting
                    // `cta = 0` there, as they did before counters).
                    return Err(err(
                        "E041",
                        op.span,
                        format!("`{kw}` with `cta = R` reaches the counter of a peer CTA, but this protocol runs one CTA; add a `cluster N` line to the header, or drop `cta = R` for the own CTA's counter"),
                    ));
                }
                self.op(inner)?;
                exprs.push(target.expr());
            }
            OpKind::ClusterArrive | OpKind::ClusterArriveRelaxed | OpKind::ClusterWait | OpKind::ClusterSync => {}
            // Blackwell: statements of a thread (an MMA's issuer, a load into its registers).
            OpKind::Tc(_) if self.ctx == Ctx::Completion => {
                return Err(err(
                    "E030",
                    op.span,
                    format!("a completion function runs in no particular thread, so `{kw}` there has no thread to issue it; move it into a role body"),
                ));
            }
            OpKind::Tc(t) => {
                for p in t.tmem_places().into_iter().chain(t.smem_places()) {
                    self.place(p, false, kw)?;
                }
                for p in t.bar_places() {
                    self.place(p, true, kw)?;
                }
                exprs.extend(t.exprs());
            }
        }
        for e in exprs {
            self.expr(e)?;
        }
        Ok(())
    }

    /// A descriptor argument: a declared `tensormap` (E023 for anything else, E021 for an
    /// undeclared name), indexed exactly when it is an array.
    fn tensormap_place(&self, p: &Place, kw: &str) -> Result<(), Diagnostic> {
        self.special_place(
            p,
            kw,
            "tensormap",
            "declare the descriptor with `tensormap NAME` at top level",
            |g| match g {
                Global::Tensormap { array } => Some(array),
                _ => None,
            },
        )
    }

    /// A counter argument: a declared `counter` (E023 for a buffer or anything else: a buffer
    /// holds versions, not a value to add to), indexed exactly when it is an array.
    fn counter_place(&self, p: &Place, kw: &str) -> Result<(), Diagnostic> {
        self.special_place(
            p,
            kw,
            "counter",
            "declare the cell with `counter NAME` at top level (a buffer holds versions, not a value an atomic could add to)",
            |g| match g {
                Global::Counter { array } => Some(array),
                _ => None,
            },
        )
    }

    /// A place that must name a declared object of kind `what` (`is` says whether a global is
    /// one and whether it is an array): E023 for another kind, E021 for an undeclared name,
    /// E024/E025 for an index that does not match.
    fn special_place(&self, p: &Place, kw: &str, what: &str, how: &str, is: impl Fn(Global) -> Option<bool>) -> Result<(), Diagnostic> {
        let n = &p.name.name;
        let array = match self.globals.get(n) {
            Some(g) => match is(*g) {
                Some(array) => array,
                None => {
                    return Err(err(
                        "E023",
                        p.name.span,
                        format!("`{n}` is {}, but `{kw}` needs a {what} here; {how}", g.describe()),
                    ))
                }
            },
            None => {
                let hint = did_you_mean(n, self.names_where(|g| is(g).is_some()));
                let msg = if hint.is_empty() {
                    format!("no {what} `{n}` is declared; declare it with `{what} {n}` at top level")
                } else {
                    format!("no {what} `{n}` is declared{hint}")
                };
                return Err(err("E021", p.name.span, msg));
            }
        };
        match (&p.index, array) {
            (Some(ix), false) => Err(err(
                "E024",
                ix.span,
                format!("`{n}` is a single {what}, not an array; write `{n}` without an index"),
            )),
            (None, true) => Err(err(
                "E025",
                p.span,
                format!("`{n}` is an array of {what}s; pick one with an index, like `{n}[0]`"),
            )),
            (Some(ix), true) => self.expr(ix),
            (None, false) => Ok(()),
        }
    }

    fn place(&self, p: &Place, want_barrier: bool, kw: &str) -> Result<(), Diagnostic> {
        let n = &p.name.name;
        let want = if want_barrier { "barrier" } else { "buffer" };
        let array = match self.globals.get(n) {
            Some(Global::Barrier { array }) if want_barrier => *array,
            Some(Global::Buffer { array }) if !want_barrier => *array,
            found => {
                let what = match found {
                    Some(g) => g.describe(),
                    None if self.local(n).is_some() => "a local",
                    None if BUILTINS.contains(&n.as_str()) => "a built-in thread index",
                    None => {
                        let hint = did_you_mean(
                            n,
                            self.names_where(|g| {
                                if want_barrier {
                                    matches!(g, Global::Barrier { .. })
                                } else {
                                    matches!(g, Global::Buffer { .. })
                                }
                            }),
                        );
                        let msg = if hint.is_empty() {
                            format!("no {want} `{n}` is declared; declare it with `{want} {n} ...` at top level")
                        } else {
                            format!("no {want} `{n}` is declared{hint}")
                        };
                        return Err(err("E021", p.name.span, msg));
                    }
                };
                let pos = match kw {
                    "copy_async" | "memcpy_async" if want_barrier => "its second argument",
                    "copy_async" | "memcpy_async" => "its first argument",
                    _ => "here",
                };
                let hint = match found {
                    Some(Global::Counter { .. }) => "; a counter is changed only by `atomic_add` and read by `read_counter`",
                    _ => "",
                };
                return Err(err(
                    "E023",
                    p.name.span,
                    format!("`{n}` is {what}, but `{kw}` needs a {want} {pos}{hint}"),
                ));
            }
        };
        match (&p.index, array) {
            (Some(ix), false) => Err(err(
                "E024",
                ix.span,
                format!("`{n}` is a single {want}, not an array; write `{n}` without an index"),
            )),
            (None, true) => Err(err(
                "E025",
                p.span,
                format!("`{n}` is an array of {want}s; pick one with an index, like `{n}[0]`"),
            )),
            (Some(ix), true) => self.expr(ix),
            (None, false) => Ok(()),
        }
    }

    /// Inline functions are expanded at each call, so none may call itself, directly or not.
    fn recursion(&self, p: &Program) -> Result<(), Diagnostic> {
        let mut deps: HashMap<&str, (Span, Vec<String>)> = HashMap::new();
        let mut order = Vec::new();
        for f in p.functions() {
            let mut out = Vec::new();
            calls_in(&f.body, &mut out);
            out.retain(|n| matches!(self.globals.get(n), Some(Global::Function { .. })));
            deps.insert(&f.name.name, (f.name.span, out));
            order.push(f.name.name.as_str());
        }
        match first_cycle(&order, &deps) {
            Some((span, cycle)) => Err(err(
                "E038",
                span,
                format!(
                    "`{}` calls itself ({}); inline functions are expanded at each call, so they cannot be recursive: write the repetition as a loop",
                    cycle[0],
                    cycle.join(" -> ")
                ),
            )),
            None => Ok(()),
        }
    }

    /// Params and role sizes may refer to each other, but not in a circle.
    fn cycles(&self, p: &Program) -> Result<(), Diagnostic> {
        let mut deps: HashMap<&str, (Span, Vec<String>)> = HashMap::new();
        let mut order = Vec::new();
        for item in &p.items {
            let (name, e) = match item {
                Item::Param(d) => (&d.name, &d.value),
                Item::Role(d) => (&d.name, &d.count),
                _ => continue,
            };
            let mut out = Vec::new();
            mentions(e, &mut out);
            out.retain(|n| matches!(self.globals.get(n), Some(Global::Param | Global::Role)));
            deps.insert(&name.name, (name.span, out));
            order.push(name.name.as_str());
        }
        match first_cycle(&order, &deps) {
            Some((span, cycle)) => Err(err(
                "E034",
                span,
                format!(
                    "`{}` depends on itself ({}); define it from literals or other params",
                    cycle[0],
                    cycle.join(" -> ")
                ),
            )),
            None => Ok(()),
        }
    }
}

/// The first cycle of a dependency graph (names in `order`, edges in `deps`), as the span of its
/// first name and the names around it.
fn first_cycle<'a>(order: &[&'a str], deps: &'a HashMap<&'a str, (Span, Vec<String>)>) -> Option<(Span, Vec<String>)> {
    // 0 = unvisited, 1 = on the path, 2 = done.
    let mut state: HashMap<&str, u8> = HashMap::new();
    for start in order {
        let mut path: Vec<&str> = Vec::new();
        if let Some(cycle) = visit(start, deps, &mut state, &mut path) {
            return Some((deps[cycle[0].as_str()].0, cycle));
        }
    }
    None
}

fn visit<'a>(
    n: &'a str,
    deps: &'a HashMap<&'a str, (Span, Vec<String>)>,
    state: &mut HashMap<&'a str, u8>,
    path: &mut Vec<&'a str>,
) -> Option<Vec<String>> {
    match state.get(n).copied().unwrap_or(0) {
        2 => return None,
        1 => {
            let from = path.iter().position(|p| *p == n).expect("on the path");
            let mut cycle: Vec<String> = path[from..].iter().map(|s| s.to_string()).collect();
            cycle.push(n.to_string());
            return Some(cycle);
        }
        _ => {}
    }
    state.insert(n, 1);
    path.push(n);
    if let Some((_, next)) = deps.get(n) {
        for m in next {
            let (key, _) = deps.get_key_value(m.as_str()).expect("filtered to params and roles");
            if let Some(c) = visit(key, deps, state, path) {
                return Some(c);
            }
        }
    }
    path.pop();
    state.insert(n, 2);
    None
}

/// Names of the functions a block calls.
fn calls_in(b: &Block, out: &mut Vec<String>) {
    for s in &b.stmts {
        match &s.kind {
            StmtKind::Call { name, .. } => out.push(name.name.clone()),
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => calls_in(body, out),
            StmtKind::If { then, els, .. } => {
                calls_in(then, out);
                if let Some(e) = els {
                    calls_in(e, out);
                }
            }
            _ => {}
        }
    }
}

fn mentions(e: &Expr, out: &mut Vec<String>) {
    match &e.kind {
        ExprKind::Int(_) => {}
        ExprKind::Name(n) | ExprKind::RoleCount(n) => out.push(n.clone()),
        ExprKind::Unary(_, x) => mentions(x, out),
        ExprKind::Binary(_, a, b) => {
            mentions(a, out);
            mentions(b, out);
        }
    }
}

fn builtin_redeclared(name: &Ident) -> Diagnostic {
    err(
        "E020",
        name.span,
        format!(
            "`{}` is a built-in thread index (one of tid, gtid, lane, warp); choose another name",
            name.name
        ),
    )
}
