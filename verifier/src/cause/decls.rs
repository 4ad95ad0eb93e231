//! The declarations a statement's values come from, read from the spec's syntax tree: a cause
//! whose numbers are right for another value of a `param` or a buffer's size names that
//! declaration, the line a user changes, rather than the operation that only uses it.

use phasecheck_model::lang::ast::{BinOp, Block, Expr, ExprKind, Item, Op, OpKind, Span, Stmt, StmtKind, Value};

/// The params and buffers of one spec, and its operations by span.
pub(super) struct Decls {
    /// Name and the span of its declaration line.
    params: Vec<(String, Span)>,
    buffers: Vec<(String, Span)>,
    ops: Vec<Op>,
    /// The param values the model was built with (defaults and overrides).
    values: Vec<(String, i64)>,
    /// `for` loops by span: the bound, and whether the body holds only local statements.
    loops: Vec<(Span, Expr, bool)>,
    /// The `warp_size N` line, when the spec declares one.
    warp_size: Option<Span>,
}

impl Decls {
    /// Empty when the source does not parse (a report never fails for want of a better line).
    pub(super) fn of(source: &str, values: &[(String, i64)]) -> Decls {
        let mut d = Decls {
            params: Vec::new(),
            buffers: Vec::new(),
            ops: Vec::new(),
            values: values.to_vec(),
            loops: Vec::new(),
            warp_size: None,
        };
        let Ok(prog) = phasecheck_model::lang::parse(source) else {
            return d;
        };
        for item in &prog.items {
            match item {
                Item::Param(x) => d.params.push((x.name.name.clone(), line_of(source, x.name.span))),
                Item::Buffer(x) => d.buffers.push((x.name.name.clone(), x.span)),
                Item::WarpSize(e) => d.warp_size = Some(line_of(source, e.span)),
                Item::Completion(x) => collect(&x.body, &mut d.ops, &mut d.loops),
                Item::Role(x) => collect(&x.body, &mut d.ops, &mut d.loops),
                Item::Function(x) => collect(&x.body, &mut d.ops, &mut d.loops),
                _ => {}
            }
        }
        d
    }

    /// The `warp_size` declaration's line.
    pub(super) fn warp_size_declaration(&self) -> Option<Span> {
        self.warp_size
    }

    /// For the operation of the statement at `at`: the declaration its transaction bytes come
    /// from, when they are a param alone (`expect_tx(full, CHUNK)`) or, for a copy that gives no
    /// size, the destination buffer's size.
    pub(super) fn bytes_declaration(&self, at: Span) -> Option<Span> {
        let op = self.op_at(at)?;
        let (bytes, buf) = match &op.kind {
            OpKind::ArriveExpectTx { bytes, .. } | OpKind::ExpectTx { bytes, .. } | OpKind::CompleteTx { bytes, .. } => (Some(bytes), None),
            OpKind::CopyAsync { bytes, buf, .. } | OpKind::MemcpyAsync { bytes, buf, .. } => (bytes.as_ref(), Some(buf)),
            _ => return None,
        };
        match (bytes, buf) {
            (Some(e), _) => match &e.kind {
                ExprKind::Name(n) => self.params.iter().find(|(p, _)| p == n).map(|x| x.1),
                _ => None,
            },
            (None, Some(b)) => self.buffers.iter().find(|(n, _)| *n == b.name.name).map(|x| x.1),
            (None, None) => None,
        }
    }
}

impl Decls {
    fn op_at(&self, at: Span) -> Option<&Op> {
        self.ops.iter().find(|o| o.span.start >= at.start && o.span.end <= at.end)
    }

    fn param_line(&self, name: &str) -> Option<Span> {
        self.params.iter().find(|(p, _)| p == name).map(|x| x.1)
    }

    /// The value of a constant expression over the params (`None` if it reads anything else).
    fn eval(&self, e: &Expr) -> Option<i64> {
        Some(match &e.kind {
            ExprKind::Int(v) => *v,
            ExprKind::Name(n) => self.values.iter().find(|(p, _)| p == n)?.1,
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (self.eval(a)?, self.eval(b)?);
                match op {
                    BinOp::Add => a.checked_add(b)?,
                    BinOp::Sub => a.checked_sub(b)?,
                    BinOp::Mul => a.checked_mul(b)?,
                    BinOp::Div => a.checked_div(b)?,
                    BinOp::Rem => a.checked_rem(b)?,
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// For a byte announcement at `at` that exceeds what lands by `excess` bytes: the param of
    /// the term of its sum that is exactly the excess (`BYTES + EXTRA * 64`, 64 bytes short:
    /// `EXTRA`), when that term reads one param: the bytes no copy brings come from it.
    pub(super) fn excess_declaration(&self, at: Span, excess: i64) -> Option<Span> {
        let op = self.op_at(at)?;
        let bytes = match &op.kind {
            OpKind::ArriveExpectTx { bytes, .. } | OpKind::ExpectTx { bytes, .. } => bytes,
            _ => return None,
        };
        let mut terms = Vec::new();
        let mut stack = vec![bytes];
        while let Some(e) = stack.pop() {
            match &e.kind {
                ExprKind::Binary(BinOp::Add, a, b) => {
                    stack.push(a);
                    stack.push(b)
                }
                _ => terms.push(e),
            }
        }
        if terms.len() < 2 {
            return None;
        }
        let mut hits = terms.iter().filter(|t| self.eval(t) == Some(excess));
        let (term, None) = (hits.next()?, hits.next()) else { return None };
        let mut ps = Vec::new();
        params_in(term, &self.params, &mut ps);
        match ps.as_slice() {
            [one] => self.param_line(one),
            _ => None,
        }
    }

    /// For an assignment at `at` inside a `for` loop that only computes locals and runs a
    /// param's number of times (`for j in 0..FLIP { p = 1 - p }`): that param, since the value
    /// the loop leaves depends on how often it runs, not on the assignment.
    pub(super) fn trip_count_declaration(&self, at: Span) -> Option<Span> {
        self.loops
            .iter()
            .filter(|(sp, _, only_locals)| *only_locals && sp.start <= at.start && at.end <= sp.end)
            .min_by_key(|(sp, _, _)| sp.end - sp.start)
            .and_then(|(_, hi, _)| match &hi.kind {
                ExprKind::Name(n) => self.param_line(n),
                _ => None,
            })
    }
}

fn collect(b: &Block, out: &mut Vec<Op>, loops: &mut Vec<(Span, Expr, bool)>) {
    for s in &b.stmts {
        match &s.kind {
            StmtKind::Op(op) => out.push(op.clone()),
            StmtKind::Let { value: Value::Op(op), .. } | StmtKind::Assign { value: Value::Op(op), .. } => out.push(op.clone()),
            StmtKind::For { body, hi, .. } => {
                loops.push((s.span, hi.clone(), body.stmts.iter().all(local)));
                collect(body, out, loops)
            }
            StmtKind::While { body, .. } => collect(body, out, loops),
            StmtKind::If { then, els, .. } => {
                collect(then, out, loops);
                if let Some(e) = els {
                    collect(e, out, loops);
                }
            }
            _ => {}
        }
    }
}

/// A statement that only computes locals (no operation, call, wait or control transfer).
fn local(s: &Stmt) -> bool {
    matches!(
        &s.kind,
        StmtKind::Let { value: Value::Expr(_), .. } | StmtKind::Assign { value: Value::Expr(_), .. }
    )
}

/// The params an expression reads.
fn params_in<'a>(e: &'a Expr, params: &[(String, Span)], out: &mut Vec<&'a str>) {
    match &e.kind {
        ExprKind::Name(n) if params.iter().any(|(p, _)| p == n) => {
            if !out.contains(&n.as_str()) {
                out.push(n)
            }
        }
        ExprKind::Unary(_, x) => params_in(x, params, out),
        ExprKind::Binary(_, a, b) => {
            params_in(a, params, out);
            params_in(b, params, out)
        }
        _ => {}
    }
}

/// The span of the source line holding `at`, without its comment and surrounding blanks.
fn line_of(source: &str, at: Span) -> Span {
    let pos = (at.start as usize).min(source.len());
    let start = source[..pos].rfind('\n').map_or(0, |k| k + 1);
    let end = source[pos..].find('\n').map_or(source.len(), |k| pos + k);
    let code = source[start..end].split("//").next().unwrap_or("");
    let lead = code.len() - code.trim_start().len();
    Span::new(start + lead, start + code.trim_end().len())
}
