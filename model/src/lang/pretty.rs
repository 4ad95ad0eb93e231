//! Canonical formatting of a program: two-space indent, one statement per line, the fewest
//! parentheses that keep the tree. `parse(&pretty(p))` gives back `p` (modulo spans) for every
//! tree the parser can produce.

use super::ast::*;
use std::fmt::Write as _;

/// Formats `p` canonically.
pub fn pretty(p: &Program) -> String {
    print_program(p, &mut Comments::none())
}

/// Formats `p` canonically and keeps the comments of `source` (the text `p` was parsed from),
/// each next to the declaration or statement it was written beside: a comment on its own line
/// goes before the next one, a comment after code on the same line stays after that code, and a
/// comment before a closing brace stays at the end of its block. `phasecheck fmt` uses this, so
/// that a spec can be reformatted in place; the output is a fixed point (formatting it again
/// gives it back).
pub fn pretty_with_comments(p: &Program, source: &str) -> String {
    let mut c = Comments {
        list: super::comments::comments(source),
        next: 0,
        src: source,
        after_open: None,
    };
    print_program(p, &mut c)
}

/// The comments not yet printed, in source order.
struct Comments<'a> {
    list: Vec<super::comments::Comment>,
    next: usize,
    src: &'a str,
    /// A comment that trailed a one-line `for`/`if`, to be printed after the opening brace of
    /// the statement's first block (the line it describes) rather than after the closing one.
    after_open: Option<usize>,
}

impl Comments<'_> {
    fn none() -> Comments<'static> {
        Comments {
            list: Vec::new(),
            next: 0,
            src: "",
            after_open: None,
        }
    }

    /// Prints, each on its own line at `indent`, every comment that starts before byte `pos`.
    /// `out` is at the start of a line.
    fn leading(&mut self, out: &mut String, pos: u32, indent: usize) {
        while let Some(c) = self.list.get(self.next) {
            if c.span.start >= pos {
                break;
            }
            let fresh_block = out.is_empty() || out.ends_with("{\n") || out.ends_with("\n\n");
            if c.blank_before && !fresh_block {
                out.push('\n');
            }
            out.push_str(&"  ".repeat(indent));
            out.push_str(&c.text);
            out.push('\n');
            self.next += 1;
        }
    }

    /// Prints the comments that follow byte `end` on the same source line with only whitespace
    /// in between, after what was just printed, keeping the whitespace that separated them.
    fn trailing(&mut self, out: &mut String, end: u32) {
        while let Some(c) = self.list.get(self.next) {
            let Some(gap) = self.src.get(end as usize..c.span.start as usize) else {
                break;
            };
            if c.span.start < end || !gap.chars().all(|ch| ch == ' ' || ch == '\t') {
                break;
            }
            out.push_str(if gap.is_empty() { " " } else { gap });
            out.push_str(&c.text);
            self.next += 1;
            return;
        }
    }

    /// For a `for`/`if` written on one line followed by a comment, remembers that comment for
    /// the statement's opening brace.
    fn hoist_one_line_trailer(&mut self, s: &Stmt) {
        if !matches!(s.kind, StmtKind::For { .. } | StmtKind::If { .. } | StmtKind::While { .. }) {
            return;
        }
        let (Some(c), Some(text)) = (self.list.get(self.next), self.src.get(s.span.start as usize..s.span.end as usize)) else {
            return;
        };
        let gap = self.src.get(s.span.end as usize..c.span.start as usize).unwrap_or("\n");
        if !text.contains('\n') && !gap.is_empty() && gap.chars().all(|ch| ch == ' ' || ch == '\t') {
            self.after_open = Some(self.next);
        }
    }

    /// Whether a comment not yet printed starts before byte `pos`.
    fn any_before(&self, pos: u32) -> bool {
        self.list.get(self.next).is_some_and(|c| c.span.start < pos)
    }
}

fn print_program(p: &Program, c: &mut Comments) -> String {
    let mut out = String::new();
    c.leading(&mut out, p.name.span.start, 0);
    let _ = write!(out, "protocol {}", p.name.name);
    c.trailing(&mut out, p.name.span.end);
    out.push('\n');
    match &p.expect {
        None => {}
        Some(e) => {
            let (start, end) = match e {
                Expect::Holds(sp) => (sp.start, sp.end),
                Expect::Kinds(ks) => (ks.first().map(|k| k.1.start).unwrap_or(0), ks.last().map(|k| k.1.end).unwrap_or(0)),
            };
            c.leading(&mut out, start, 0);
            match e {
                Expect::Holds(_) => out.push_str("expect holds"),
                Expect::Kinds(ks) => {
                    let names: Vec<&str> = ks.iter().map(|(k, _)| k.name()).collect();
                    let _ = write!(out, "expect {}", names.join(", "));
                }
            }
            c.trailing(&mut out, end);
            out.push('\n');
        }
    }
    let mut prev: Option<&Item> = None;
    for item in &p.items {
        // A blank line between groups: after the header, around bodies, between kinds.
        let blank = match prev {
            None => true,
            Some(q) => has_body(q) || has_body(item) || std::mem::discriminant(q) != std::mem::discriminant(item),
        };
        if blank {
            out.push('\n');
        }
        let (start, end) = item_span(item);
        c.leading(&mut out, start, 0);
        item_to(&mut out, item, c);
        c.trailing(&mut out, end);
        out.push('\n');
        prev = Some(item);
    }
    c.leading(&mut out, u32::MAX, 0);
    out
}

/// Where an item starts (its name: the keyword before it carries no comment) and ends.
fn item_span(item: &Item) -> (u32, u32) {
    match item {
        Item::Param(d) => (d.name.span.start, d.value.span.end),
        Item::WarpSize(e) | Item::Cluster(e) => (e.span.start, e.span.end),
        Item::Barrier(d) => (d.name.span.start, d.span.end),
        Item::Buffer(d) => (d.name.span.start, d.span.end),
        Item::Var(d) => (d.name.span.start, d.init.span.end),
        Item::Completion(d) => (d.name.span.start, d.body.span.end),
        Item::Role(d) => (d.name.span.start, d.body.span.end),
        Item::Function(d) => (d.name.span.start, d.body.span.end),
    }
}

fn has_body(i: &Item) -> bool {
    matches!(i, Item::Completion(_) | Item::Role(_) | Item::Function(_))
}

fn len_suffix(len: &Option<Expr>) -> String {
    match len {
        Some(e) => format!("[{}]", expr(e)),
        None => String::new(),
    }
}

/// Writes one declaration, without the newline after it.
fn item_to(out: &mut String, item: &Item, c: &mut Comments) {
    match item {
        Item::Param(d) => {
            let _ = write!(out, "param {} = {}", d.name.name, expr(&d.value));
        }
        Item::WarpSize(e) => {
            let _ = write!(out, "warp_size {}", expr(e));
        }
        Item::Cluster(e) => {
            let _ = write!(out, "cluster {}", expr(e));
        }
        Item::Barrier(d) => {
            let _ = write!(out, "barrier {}{} count {}", d.name.name, len_suffix(&d.len), expr(&d.count));
            if let Some(c) = &d.completion {
                let _ = write!(out, " completion {}", c.name);
            }
            if d.manual_init {
                out.push_str(" manual_init");
            }
        }
        Item::Buffer(d) if d.tensormap => {
            let _ = write!(out, "tensormap {}{}", d.name.name, len_suffix(&d.len));
        }
        Item::Buffer(d) if d.counter => {
            let _ = write!(out, "counter {}{}", d.name.name, len_suffix(&d.len));
        }
        Item::Buffer(d) => {
            let _ = write!(out, "buffer {}{} bytes {}", d.name.name, len_suffix(&d.len), expr(&d.bytes));
        }
        Item::Var(d) => {
            let _ = write!(out, "var {} = {}", d.name.name, expr(&d.init));
        }
        Item::Completion(d) => {
            let _ = write!(out, "completion {} ", d.name.name);
            block_to(out, &d.body, 0, c);
        }
        Item::Role(d) => {
            let _ = match d.unit {
                RoleUnit::Threads => write!(out, "role {}[{}] ", d.name.name, expr(&d.count)),
                RoleUnit::Warps => write!(out, "role {} warps {} ", d.name.name, expr(&d.count)),
                RoleUnit::Warpgroups => write!(out, "role {} warpgroups {} ", d.name.name, expr(&d.count)),
            };
            if d.uniform {
                out.push_str("uniform ");
            }
            block_to(out, &d.body, 0, c);
        }
        Item::Function(d) => {
            let ps: Vec<&str> = d.params.iter().map(|p| p.name.as_str()).collect();
            let _ = write!(out, "fn {}({}) ", d.name.name, ps.join(", "));
            block_to(out, &d.body, 0, c);
        }
    }
}

/// Writes `{ ... }` whose statements sit at `indent + 1`; the closing brace at `indent`, with no
/// newline after it. Comments inside the braces stay inside.
fn block_to(out: &mut String, b: &Block, indent: usize, c: &mut Comments) {
    let close = b.span.end.saturating_sub(1);
    if b.stmts.is_empty() && !c.any_before(close) && c.after_open.is_none() {
        out.push_str("{}");
        return;
    }
    out.push('{');
    match c.after_open.take() {
        Some(k) => {
            out.push(' ');
            out.push_str(&c.list[k].text);
            c.next = k + 1;
        }
        // A comment right after the opening brace stays on its line.
        None => c.trailing(out, b.span.start + 1),
    }
    out.push('\n');
    for s in &b.stmts {
        c.leading(out, s.span.start, indent + 1);
        out.push_str(&"  ".repeat(indent + 1));
        c.hoist_one_line_trailer(s);
        stmt_to(out, s, indent + 1, c);
        c.trailing(out, s.span.end);
        out.push('\n');
    }
    c.leading(out, close, indent + 1);
    out.push_str(&"  ".repeat(indent));
    out.push('}');
}

fn stmt_to(out: &mut String, s: &Stmt, indent: usize, c: &mut Comments) {
    match &s.kind {
        StmtKind::Let { name, value } => {
            let _ = write!(out, "let {} = {}", name.name, value_str(value));
        }
        StmtKind::Assign { name, value } => {
            let _ = write!(out, "{} = {}", name.name, value_str(value));
        }
        StmtKind::For { var, lo, hi, body } => {
            let _ = write!(out, "for {} in {}..{} ", var.name, expr(lo), expr(hi));
            block_to(out, body, indent, c);
        }
        StmtKind::If { .. } => if_to(out, s, indent, c),
        StmtKind::Op(op) => out.push_str(&op_str(op)),
        StmtKind::Assert(e) => {
            let _ = write!(out, "assert {}", expr(e));
        }
        StmtKind::Return => out.push_str("return"),
        StmtKind::Work => out.push_str("work"),
        StmtKind::SyncWarp => out.push_str("syncwarp"),
        StmtKind::SyncThreads => out.push_str("syncthreads"),
        StmtKind::While { cond, body } => {
            let _ = write!(out, "while {} ", expr(cond));
            block_to(out, body, indent, c);
        }
        StmtKind::Break => out.push_str("break"),
        StmtKind::SyncWarpMask(m) => {
            let _ = write!(out, "syncwarp({})", expr(m));
        }
        StmtKind::Call { name, args } => {
            let a: Vec<String> = args.iter().map(expr).collect();
            let _ = write!(out, "{}({})", name.name, a.join(", "));
        }
    }
}

fn if_to(out: &mut String, s: &Stmt, indent: usize, c: &mut Comments) {
    let StmtKind::If { cond, then, els } = &s.kind else {
        unreachable!("if_to on an if")
    };
    let _ = write!(out, "if {} ", expr(cond));
    block_to(out, then, indent, c);
    if let Some(e) = els {
        out.push_str(" else ");
        match e.stmts.as_slice() {
            [inner] if matches!(inner.kind, StmtKind::If { .. }) && !c.any_before(inner.span.start) => if_to(out, inner, indent, c),
            _ => block_to(out, e, indent, c),
        }
    }
}

fn value_str(v: &Value) -> String {
    match v {
        Value::Expr(e) => expr(e),
        Value::Op(op) => op_str(op),
    }
}

fn place(p: &Place) -> String {
    match &p.index {
        Some(ix) => format!("{}[{}]", p.name.name, expr(ix)),
        None => p.name.name.clone(),
    }
}

/// An operation as written: `copy_async(slot[s], full[s], version = i)`.
pub fn op_str(op: &Op) -> String {
    let mut args: Vec<String> = Vec::new();
    match &op.kind {
        OpKind::Arrive { bar, n } => {
            args.push(place(bar));
            args.extend(n.iter().map(expr));
        }
        OpKind::ArriveExpectTx { bar, bytes } | OpKind::ExpectTx { bar, bytes } | OpKind::CompleteTx { bar, bytes } => {
            args.push(place(bar));
            args.push(expr(bytes));
        }
        OpKind::Wait { bar, token } | OpKind::TryWait { bar, token } => {
            args.push(place(bar));
            args.push(expr(token));
        }
        OpKind::WaitParity { bar, parity } | OpKind::TryWaitParity { bar, parity } => {
            args.push(place(bar));
            args.push(expr(parity));
        }
        OpKind::ArriveAndWait { bar } | OpKind::ArriveAndDrop { bar } | OpKind::Inval { bar } | OpKind::Commit { bar } => {
            args.push(place(bar))
        }
        OpKind::CopyAsync { buf, bar, bytes, version } | OpKind::MemcpyAsync { buf, bar, bytes, version } => {
            args.push(place(buf));
            args.push(place(bar));
            if let Some(b) = bytes {
                args.push(format!("bytes = {}", expr(b)));
            }
            if let Some(v) = version {
                args.push(format!("version = {}", expr(v)));
            }
        }
        OpKind::Read { buf, expect } => {
            args.push(place(buf));
            if let Some(v) = expect {
                args.push(format!("expect = {}", expr(v)));
            }
        }
        OpKind::Write { buf, version } => {
            args.push(place(buf));
            args.push(expr(version));
        }
        OpKind::WritePart {
            buf,
            version,
            offset,
            bytes,
        } => {
            args.push(place(buf));
            args.push(expr(version));
            args.push(format!("offset = {}", expr(offset)));
            named_args(&mut args, &[("bytes", bytes)]);
        }
        OpKind::Init { bar, count } => {
            args.push(place(bar));
            args.extend(count.iter().map(expr));
        }
        OpKind::Elect => {}
        // Named barriers, cp.async, partial copies and reads
        OpKind::BarSync { id, count } | OpKind::BarArrive { id, count } => {
            args.push(expr(id));
            args.push(expr(count));
        }
        OpKind::CpAsync {
            buf,
            offset,
            bytes,
            version,
        } => {
            args.push(place(buf));
            named_args(&mut args, &[("offset", offset), ("bytes", bytes), ("version", version)]);
        }
        OpKind::CpAsyncArrive { bar, .. } => args.push(place(bar)),
        OpKind::CopyAsyncPart {
            buf,
            bar,
            offset,
            bytes,
            version,
            ..
        } => {
            args.push(place(buf));
            args.push(place(bar));
            args.push(format!("offset = {}", expr(offset)));
            named_args(&mut args, &[("bytes", bytes), ("version", version)]);
        }
        OpKind::StAsync {
            buf,
            bar,
            offset,
            bytes,
            version,
        } => {
            args.push(place(buf));
            args.push(place(bar));
            args.push(format!("offset = {}", expr(offset)));
            args.push(format!("bytes = {}", expr(bytes)));
            args.push(format!("version = {}", expr(version)));
        }
        OpKind::CopyAsyncFrom {
            buf,
            bar,
            src,
            offset,
            bytes,
        } => {
            args.push(place(buf));
            args.push(place(bar));
            named_args(&mut args, &[("offset", offset), ("bytes", bytes)]);
            args.push(format!("from = {}", place(src)));
        }
        OpKind::ReadPart {
            buf,
            offset,
            bytes,
            expect,
        } => {
            args.push(place(buf));
            args.push(format!("offset = {}", expr(offset)));
            named_args(&mut args, &[("bytes", bytes), ("expect", expect)]);
        }
        // The async proxy.
        OpKind::CopyStoreAsync { buf } => args.push(place(buf)),
        OpKind::CopyStoreAsyncPart { buf, offset, bytes } => {
            args.push(place(buf));
            args.push(format!("offset = {}", expr(offset)));
            named_args(&mut args, &[("bytes", bytes)]);
        }
        OpKind::WgmmaAsync { bufs, expect, .. } => {
            args.extend(bufs.iter().map(place));
            named_args(&mut args, &[("expect", expect)]);
        }
        OpKind::WaitGroup { n, .. } | OpKind::WgmmaWait { n, .. } => args.push(expr(n)),
        OpKind::CommitGroup | OpKind::FenceProxyAsync | OpKind::FenceMbarrierInit => {}
        OpKind::TensormapWrite { map, version } => {
            args.push(place(map));
            args.push(expr(version));
        }
        OpKind::FenceProxyTensormap { map } => args.push(place(map)),
        OpKind::AtomicAdd { counter, value } => {
            args.push(place(counter));
            args.push(expr(value));
        }
        OpKind::ReadCounter { counter, expect } => {
            args.push(place(counter));
            named_args(&mut args, &[("expect", expect)]);
        }
        // The copy as written without a descriptor, plus the descriptor it reads.
        OpKind::CopyAsyncTensor { map, expect, op } => {
            let inner = op_str(op);
            let open = inner.find('(').map_or(inner.len(), |i| i + 1);
            args.push(inner[open..inner.len().saturating_sub(1)].to_string());
            args.push(format!("tensormap = {}", place(map)));
            named_args(&mut args, &[("expect", expect)]);
        }
        OpKind::CpAsyncWait { n: Some(n) } => args.push(expr(n)),
        OpKind::CpAsyncCommitGroup | OpKind::CpAsyncWait { n: None } => {}
        // Cluster scope: the operation as written for the own CTA, plus its target.
        OpKind::Remote { target, op } => {
            let inner = op_str(op);
            let open = inner.find('(').map_or(inner.len(), |i| i + 1);
            let body = &inner[open..inner.len().saturating_sub(1)];
            args.extend((!body.is_empty()).then(|| body.to_string()));
            args.push(format!("{} = {}", target.arg_name(), expr(target.expr())));
        }
        OpKind::ClusterArrive | OpKind::ClusterArriveRelaxed | OpKind::ClusterWait | OpKind::ClusterSync => {}
        OpKind::Tc(t) => args.extend(t.args(&place, &expr)),
    }
    format!("{}({})", op.kind.keyword(), args.join(", "))
}

/// `name = EXPR` for each given named argument.
fn named_args(args: &mut Vec<String>, named: &[(&str, &Option<Expr>)]) {
    for (n, e) in named {
        if let Some(e) = e {
            args.push(format!("{n} = {}", expr(e)));
        }
    }
}

/// An expression with the fewest parentheses: a binary child is parenthesised when it binds less
/// tightly than its parent, or equally on the right (every binary operator is left-associative);
/// the operand of a unary operator is parenthesised when it is binary.
pub fn expr(e: &Expr) -> String {
    let mut s = String::new();
    expr_to(&mut s, e);
    s
}

fn expr_to(out: &mut String, e: &Expr) {
    match &e.kind {
        ExprKind::Int(v) => {
            let _ = write!(out, "{v}");
        }
        ExprKind::Name(n) => out.push_str(n),
        ExprKind::RoleCount(r) => {
            let _ = write!(out, "{r}.count");
        }
        ExprKind::Unary(op, x) => {
            out.push_str(match op {
                UnOp::Neg => "-",
                UnOp::Not => "!",
            });
            let paren = matches!(x.kind, ExprKind::Binary(..)) || matches!(x.kind, ExprKind::Int(v) if v < 0);
            child(out, x, paren);
        }
        ExprKind::Binary(op, a, b) => {
            let p = op.precedence();
            child(out, a, matches!(a.kind, ExprKind::Binary(o, ..) if o.precedence() < p));
            let _ = write!(out, " {} ", op.symbol());
            child(out, b, matches!(b.kind, ExprKind::Binary(o, ..) if o.precedence() <= p));
        }
    }
}

fn child(out: &mut String, e: &Expr, paren: bool) {
    if paren {
        out.push('(');
        expr_to(out, e);
        out.push(')');
    } else {
        expr_to(out, e);
    }
}

/// Whether two programs are the same tree, ignoring spans.
pub fn same_program(a: &Program, b: &Program) -> bool {
    format!("{:?}", strip_spans(a)) == format!("{:?}", strip_spans(b))
}

/// A copy of `p` with every span set to `Span::default()`, for comparing trees.
pub fn strip_spans(p: &Program) -> Program {
    let z = Span::default();
    let id = |i: &Ident| Ident {
        name: i.name.clone(),
        span: z,
    };
    Program {
        name: id(&p.name),
        expect: p.expect.as_ref().map(|e| match e {
            Expect::Holds(_) => Expect::Holds(z),
            Expect::Kinds(ks) => Expect::Kinds(ks.iter().map(|(k, _)| (*k, z)).collect()),
        }),
        items: p
            .items
            .iter()
            .map(|item| match item {
                Item::Param(d) => Item::Param(ParamDecl {
                    name: id(&d.name),
                    value: se(&d.value),
                }),
                Item::WarpSize(e) => Item::WarpSize(se(e)),
                Item::Cluster(e) => Item::Cluster(se(e)),
                Item::Barrier(d) => Item::Barrier(BarrierDecl {
                    name: id(&d.name),
                    len: d.len.as_ref().map(se),
                    count: se(&d.count),
                    completion: d.completion.as_ref().map(id),
                    manual_init: d.manual_init,
                    span: z,
                }),
                Item::Buffer(d) => Item::Buffer(BufferDecl {
                    name: id(&d.name),
                    len: d.len.as_ref().map(se),
                    bytes: se(&d.bytes),
                    tensormap: d.tensormap,
                    counter: d.counter,
                    span: z,
                }),
                Item::Var(d) => Item::Var(VarDecl {
                    name: id(&d.name),
                    init: se(&d.init),
                }),
                Item::Completion(d) => Item::Completion(CompletionDecl {
                    name: id(&d.name),
                    body: sb(&d.body),
                }),
                Item::Function(d) => Item::Function(FnDecl {
                    name: id(&d.name),
                    params: d.params.iter().map(id).collect(),
                    body: sb(&d.body),
                    span: z,
                }),
                Item::Role(d) => Item::Role(RoleDecl {
                    name: id(&d.name),
                    count: se(&d.count),
                    unit: d.unit,
                    uniform: d.uniform,
                    body: sb(&d.body),
                    span: z,
                }),
            })
            .collect(),
    }
}

fn si(i: &Ident) -> Ident {
    Ident {
        name: i.name.clone(),
        span: Span::default(),
    }
}

fn se(e: &Expr) -> Expr {
    let kind = match &e.kind {
        ExprKind::Int(v) => ExprKind::Int(*v),
        ExprKind::Name(n) => ExprKind::Name(n.clone()),
        ExprKind::RoleCount(r) => ExprKind::RoleCount(r.clone()),
        ExprKind::Unary(op, x) => ExprKind::Unary(*op, Box::new(se(x))),
        ExprKind::Binary(op, a, b) => ExprKind::Binary(*op, Box::new(se(a)), Box::new(se(b))),
    };
    Expr {
        kind,
        span: Span::default(),
    }
}

fn sb(b: &Block) -> Block {
    Block {
        stmts: b.stmts.iter().map(ss).collect(),
        span: Span::default(),
    }
}

fn sp(p: &Place) -> Place {
    Place {
        name: si(&p.name),
        index: p.index.as_ref().map(|x| Box::new(se(x))),
        span: Span::default(),
    }
}

fn sv(v: &Value) -> Value {
    match v {
        Value::Expr(e) => Value::Expr(se(e)),
        Value::Op(o) => Value::Op(so(o)),
    }
}

fn so(op: &Op) -> Op {
    let oe = |e: &Option<Expr>| e.as_ref().map(se);
    let kind = match &op.kind {
        OpKind::Arrive { bar, n } => OpKind::Arrive { bar: sp(bar), n: oe(n) },
        OpKind::ArriveExpectTx { bar, bytes } => OpKind::ArriveExpectTx {
            bar: sp(bar),
            bytes: se(bytes),
        },
        OpKind::Wait { bar, token } => OpKind::Wait {
            bar: sp(bar),
            token: se(token),
        },
        OpKind::WaitParity { bar, parity } => OpKind::WaitParity {
            bar: sp(bar),
            parity: se(parity),
        },
        OpKind::TryWait { bar, token } => OpKind::TryWait {
            bar: sp(bar),
            token: se(token),
        },
        OpKind::TryWaitParity { bar, parity } => OpKind::TryWaitParity {
            bar: sp(bar),
            parity: se(parity),
        },
        OpKind::ArriveAndWait { bar } => OpKind::ArriveAndWait { bar: sp(bar) },
        OpKind::ArriveAndDrop { bar } => OpKind::ArriveAndDrop { bar: sp(bar) },
        OpKind::ExpectTx { bar, bytes } => OpKind::ExpectTx {
            bar: sp(bar),
            bytes: se(bytes),
        },
        OpKind::CompleteTx { bar, bytes } => OpKind::CompleteTx {
            bar: sp(bar),
            bytes: se(bytes),
        },
        OpKind::CopyAsync { buf, bar, bytes, version } => OpKind::CopyAsync {
            buf: sp(buf),
            bar: sp(bar),
            bytes: oe(bytes),
            version: oe(version),
        },
        OpKind::MemcpyAsync { buf, bar, bytes, version } => OpKind::MemcpyAsync {
            buf: sp(buf),
            bar: sp(bar),
            bytes: oe(bytes),
            version: oe(version),
        },
        OpKind::Read { buf, expect } => OpKind::Read {
            buf: sp(buf),
            expect: oe(expect),
        },
        OpKind::Write { buf, version } => OpKind::Write {
            buf: sp(buf),
            version: se(version),
        },
        OpKind::WritePart {
            buf,
            version,
            offset,
            bytes,
        } => OpKind::WritePart {
            buf: sp(buf),
            version: se(version),
            offset: se(offset),
            bytes: oe(bytes),
        },
        OpKind::Init { bar, count } => OpKind::Init {
            bar: sp(bar),
            count: oe(count),
        },
        OpKind::Inval { bar } => OpKind::Inval { bar: sp(bar) },
        OpKind::Commit { bar } => OpKind::Commit { bar: sp(bar) },
        OpKind::Elect => OpKind::Elect,
        OpKind::BarSync { id, count } => OpKind::BarSync {
            id: se(id),
            count: se(count),
        },
        OpKind::BarArrive { id, count } => OpKind::BarArrive {
            id: se(id),
            count: se(count),
        },
        OpKind::CpAsync {
            buf,
            offset,
            bytes,
            version,
        } => OpKind::CpAsync {
            buf: sp(buf),
            offset: oe(offset),
            bytes: oe(bytes),
            version: oe(version),
        },
        OpKind::CpAsyncArrive { bar, noinc } => OpKind::CpAsyncArrive {
            bar: sp(bar),
            noinc: *noinc,
        },
        OpKind::CopyAsyncPart {
            buf,
            bar,
            offset,
            bytes,
            version,
            libcu,
        } => OpKind::CopyAsyncPart {
            buf: sp(buf),
            bar: sp(bar),
            offset: se(offset),
            bytes: oe(bytes),
            version: oe(version),
            libcu: *libcu,
        },
        OpKind::StAsync {
            buf,
            bar,
            offset,
            bytes,
            version,
        } => OpKind::StAsync {
            buf: sp(buf),
            bar: sp(bar),
            offset: se(offset),
            bytes: se(bytes),
            version: se(version),
        },
        OpKind::CopyAsyncFrom {
            buf,
            bar,
            src,
            offset,
            bytes,
        } => OpKind::CopyAsyncFrom {
            buf: sp(buf),
            bar: sp(bar),
            src: sp(src),
            offset: oe(offset),
            bytes: oe(bytes),
        },
        OpKind::ReadPart {
            buf,
            offset,
            bytes,
            expect,
        } => OpKind::ReadPart {
            buf: sp(buf),
            offset: se(offset),
            bytes: oe(bytes),
            expect: oe(expect),
        },
        // The async proxy.
        OpKind::CopyStoreAsync { buf } => OpKind::CopyStoreAsync { buf: sp(buf) },
        OpKind::CopyStoreAsyncPart { buf, offset, bytes } => OpKind::CopyStoreAsyncPart {
            buf: sp(buf),
            offset: se(offset),
            bytes: oe(bytes),
        },
        OpKind::WgmmaAsync { bufs, expect, warpgroup } => OpKind::WgmmaAsync {
            bufs: bufs.iter().map(sp).collect(),
            expect: oe(expect),
            warpgroup: *warpgroup,
        },
        OpKind::WaitGroup { n, read } => OpKind::WaitGroup { n: se(n), read: *read },
        OpKind::WgmmaWait { n, warpgroup } => OpKind::WgmmaWait {
            n: se(n),
            warpgroup: *warpgroup,
        },
        OpKind::CommitGroup => OpKind::CommitGroup,
        OpKind::CpAsyncCommitGroup => OpKind::CpAsyncCommitGroup,
        OpKind::CpAsyncWait { n } => OpKind::CpAsyncWait { n: n.as_ref().map(se) },
        OpKind::FenceProxyAsync => OpKind::FenceProxyAsync,
        OpKind::FenceMbarrierInit => OpKind::FenceMbarrierInit,
        OpKind::TensormapWrite { map, version } => OpKind::TensormapWrite {
            map: sp(map),
            version: se(version),
        },
        OpKind::FenceProxyTensormap { map } => OpKind::FenceProxyTensormap { map: sp(map) },
        OpKind::AtomicAdd { counter, value } => OpKind::AtomicAdd {
            counter: sp(counter),
            value: se(value),
        },
        OpKind::ReadCounter { counter, expect } => OpKind::ReadCounter {
            counter: sp(counter),
            expect: oe(expect),
        },
        OpKind::CopyAsyncTensor { map, expect, op } => OpKind::CopyAsyncTensor {
            map: sp(map),
            expect: expect.as_ref().map(se),
            op: Box::new(so(op)),
        },
        OpKind::Remote { target, op } => OpKind::Remote {
            target: match target {
                ClusterTarget::Cta(e) => ClusterTarget::Cta(se(e)),
                ClusterTarget::Multicast(e) => ClusterTarget::Multicast(se(e)),
            },
            op: Box::new(so(op)),
        },
        OpKind::ClusterArrive => OpKind::ClusterArrive,
        OpKind::ClusterArriveRelaxed => OpKind::ClusterArriveRelaxed,
        OpKind::ClusterWait => OpKind::ClusterWait,
        OpKind::ClusterSync => OpKind::ClusterSync,
        OpKind::Tc(t) => OpKind::Tc(t.map(&sp, &se)),
    };
    Op {
        kind,
        span: Span::default(),
    }
}

fn ss(s: &Stmt) -> Stmt {
    let kind = match &s.kind {
        StmtKind::Let { name, value } => StmtKind::Let {
            name: si(name),
            value: sv(value),
        },
        StmtKind::Assign { name, value } => StmtKind::Assign {
            name: si(name),
            value: sv(value),
        },
        StmtKind::For { var, lo, hi, body } => StmtKind::For {
            var: si(var),
            lo: se(lo),
            hi: se(hi),
            body: sb(body),
        },
        StmtKind::If { cond, then, els } => StmtKind::If {
            cond: se(cond),
            then: sb(then),
            els: els.as_ref().map(sb),
        },
        StmtKind::Op(op) => StmtKind::Op(so(op)),
        StmtKind::Assert(e) => StmtKind::Assert(se(e)),
        StmtKind::Return => StmtKind::Return,
        StmtKind::Work => StmtKind::Work,
        StmtKind::SyncWarp => StmtKind::SyncWarp,
        StmtKind::SyncThreads => StmtKind::SyncThreads,
        StmtKind::While { cond, body } => StmtKind::While {
            cond: se(cond),
            body: sb(body),
        },
        StmtKind::Break => StmtKind::Break,
        StmtKind::SyncWarpMask(m) => StmtKind::SyncWarpMask(se(m)),
        StmtKind::Call { name, args } => StmtKind::Call {
            name: si(name),
            args: args.iter().map(se).collect(),
        },
    };
    Stmt {
        kind,
        span: Span::default(),
    }
}
