//! Canonical formatting of a program: two-space indent, one statement per line, the fewest
//! parentheses that keep the tree. `parse(&pretty(p))` gives back `p` (modulo spans) for every
//! tree the parser can produce.

use super::ast::*;
use std::fmt::Write as _;

/// Formats `p` canonically.
pub fn pretty(p: &Program) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "protocol {}", p.name.name);
    match &p.expect {
        None => {}
        Some(Expect::Holds(_)) => out.push_str("expect holds\n"),
        Some(Expect::Kinds(ks)) => {
            let names: Vec<&str> = ks.iter().map(|(k, _)| k.name()).collect();
            let _ = writeln!(out, "expect {}", names.join(", "));
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
        item_to(&mut out, item);
        prev = Some(item);
    }
    out
}

fn has_body(i: &Item) -> bool {
    matches!(i, Item::Completion(_) | Item::Role(_))
}

fn len_suffix(len: &Option<Expr>) -> String {
    match len {
        Some(e) => format!("[{}]", expr(e)),
        None => String::new(),
    }
}

fn item_to(out: &mut String, item: &Item) {
    match item {
        Item::Param(d) => {
            let _ = writeln!(out, "param {} = {}", d.name.name, expr(&d.value));
        }
        Item::WarpSize(e) => {
            let _ = writeln!(out, "warp_size {}", expr(e));
        }
        Item::Barrier(d) => {
            let _ = write!(out, "barrier {}{} count {}", d.name.name, len_suffix(&d.len), expr(&d.count));
            if let Some(c) = &d.completion {
                let _ = write!(out, " completion {}", c.name);
            }
            if d.manual_init {
                out.push_str(" manual_init");
            }
            out.push('\n');
        }
        Item::Buffer(d) => {
            let _ = writeln!(out, "buffer {}{} bytes {}", d.name.name, len_suffix(&d.len), expr(&d.bytes));
        }
        Item::Var(d) => {
            let _ = writeln!(out, "var {} = {}", d.name.name, expr(&d.init));
        }
        Item::Completion(d) => {
            let _ = write!(out, "completion {} ", d.name.name);
            block_to(out, &d.body, 0);
            out.push('\n');
        }
        Item::Role(d) => {
            let _ = write!(out, "role {}[{}] ", d.name.name, expr(&d.count));
            block_to(out, &d.body, 0);
            out.push('\n');
        }
    }
}

/// Writes `{ ... }` whose statements sit at `indent + 1`; the closing brace at `indent`, with no
/// newline after it.
fn block_to(out: &mut String, b: &Block, indent: usize) {
    if b.stmts.is_empty() {
        out.push_str("{}");
        return;
    }
    out.push_str("{\n");
    for s in &b.stmts {
        out.push_str(&"  ".repeat(indent + 1));
        stmt_to(out, s, indent + 1);
        out.push('\n');
    }
    out.push_str(&"  ".repeat(indent));
    out.push('}');
}

fn stmt_to(out: &mut String, s: &Stmt, indent: usize) {
    match &s.kind {
        StmtKind::Let { name, value } => {
            let _ = write!(out, "let {} = {}", name.name, value_str(value));
        }
        StmtKind::Assign { name, value } => {
            let _ = write!(out, "{} = {}", name.name, value_str(value));
        }
        StmtKind::For { var, lo, hi, body } => {
            let _ = write!(out, "for {} in {}..{} ", var.name, expr(lo), expr(hi));
            block_to(out, body, indent);
        }
        StmtKind::If { .. } => if_to(out, s, indent),
        StmtKind::Op(op) => out.push_str(&op_str(op)),
        StmtKind::Assert(e) => {
            let _ = write!(out, "assert {}", expr(e));
        }
        StmtKind::Return => out.push_str("return"),
        StmtKind::Work => out.push_str("work"),
        StmtKind::SyncWarp => out.push_str("syncwarp"),
        StmtKind::SyncThreads => out.push_str("syncthreads"),
    }
}

fn if_to(out: &mut String, s: &Stmt, indent: usize) {
    let StmtKind::If { cond, then, els } = &s.kind else {
        unreachable!("if_to on an if")
    };
    let _ = write!(out, "if {} ", expr(cond));
    block_to(out, then, indent);
    if let Some(e) = els {
        out.push_str(" else ");
        match e.stmts.as_slice() {
            [inner] if matches!(inner.kind, StmtKind::If { .. }) => if_to(out, inner, indent),
            _ => block_to(out, e, indent),
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
        OpKind::Init { bar, count } => {
            args.push(place(bar));
            args.extend(count.iter().map(expr));
        }
    }
    format!("{}({})", op.kind.keyword(), args.join(", "))
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
                Item::Role(d) => Item::Role(RoleDecl {
                    name: id(&d.name),
                    count: se(&d.count),
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
        OpKind::Init { bar, count } => OpKind::Init {
            bar: sp(bar),
            count: oe(count),
        },
        OpKind::Inval { bar } => OpKind::Inval { bar: sp(bar) },
        OpKind::Commit { bar } => OpKind::Commit { bar: sp(bar) },
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
    };
    Stmt {
        kind,
        span: Span::default(),
    }
}
