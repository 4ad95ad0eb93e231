//! Statements: blocks, `let`/assignment, `if`/`else if`, `for` and `while`, `break`, `return`,
//! calls, and the values an assignment takes (an expression or an operation).

use super::expressions::binop;
use super::ops::{nested_op, unknown_op};
use super::*;

impl Parser {
    pub(super) fn block(&mut self) -> PResult<Block> {
        let open = self.span();
        if *self.peek() != Tok::LBrace {
            return Err(err(
                "E005",
                open,
                format!("expected `{{` to open a block, but found {}", self.peek().describe()),
            ));
        }
        self.bump();
        self.enter(open)?;
        let mut stmts = Vec::new();
        loop {
            self.skip_terms();
            match self.peek() {
                Tok::RBrace => break,
                Tok::Eof => {
                    return Err(err("E005", open, "this block is never closed; add a matching `}`"));
                }
                _ => {}
            }
            let (at, depth) = (self.pos, self.depth);
            match self.stmt().and_then(|st| self.end_of_statement(true).map(|_| st)) {
                Ok(st) => stmts.push(st),
                Err(d) if self.errors.len() < MAX_SYNTAX_ERRORS => {
                    self.errors.push(d);
                    self.depth = depth;
                    self.skip_statement(at);
                }
                Err(d) => return Err(d),
            }
        }
        self.bump();
        self.leave();
        Ok(Block {
            stmts,
            span: self.since(open),
        })
    }

    pub(super) fn stmt(&mut self) -> PResult<Stmt> {
        let start = self.span();
        let word = match self.peek().clone() {
            Tok::Ident(w) => w,
            other => {
                return Err(err("E005", start, format!("expected a statement, but found {}", other.describe())));
            }
        };
        let kind = match word.as_str() {
            "let" => {
                self.bump();
                let name = self.name("the new local's name")?;
                self.expect_tok(Tok::Assign, "after the name in `let x = ...`")?;
                let value = self.value()?;
                StmtKind::Let { name, value }
            }
            "for" => {
                self.bump();
                let var = self.name("the loop variable")?;
                self.expect_word("in", "after the loop variable, as in `for i in 0..N { }`")?;
                let lo = self.expr()?;
                self.expect_tok(Tok::DotDot, "between the loop bounds, as in `for i in 0..N { }`")?;
                let hi = self.expr()?;
                let body = self.block()?;
                StmtKind::For { var, lo, hi, body }
            }
            "if" => return self.if_stmt(),
            "while" => {
                self.bump();
                self.enter(start)?;
                let cond = self.expr()?;
                let body = self.block()?;
                self.leave();
                StmtKind::While { cond, body }
            }
            "syncwarp" if *self.peek_at(1) == Tok::LParen => {
                self.bump();
                if *self.peek_at(1) == Tok::RParen {
                    return Err(err(
                        "E007",
                        self.span(),
                        "`syncwarp` takes no arguments and is written without parentheses: `syncwarp` (or `syncwarp(MASK)` for the lanes of a mask)",
                    ));
                }
                self.bump();
                let mask = self.expr()?;
                self.expect_tok(Tok::RParen, "to close `syncwarp(MASK)`")?;
                StmtKind::SyncWarpMask(mask)
            }
            w if self.fns.iter().any(|f| f == w) && !is_reserved(w) && *self.peek_at(1) == Tok::LParen => {
                let name = self.name("a function name")?;
                self.bump();
                let mut args = Vec::new();
                while *self.peek() != Tok::RParen {
                    args.push(self.expr()?);
                    self.list_separator(&format!("the arguments of `{}`", name.name))?;
                }
                self.bump();
                StmtKind::Call { name, args }
            }
            "assert" => {
                self.bump();
                StmtKind::Assert(self.expr()?)
            }
            "return" | "work" | "syncwarp" | "syncthreads" | "break" => {
                self.bump();
                if *self.peek() == Tok::LParen {
                    return Err(err(
                        "E007",
                        self.span(),
                        format!("`{word}` takes no arguments and is written without parentheses: `{word}`"),
                    ));
                }
                match word.as_str() {
                    "return" => StmtKind::Return,
                    "work" => StmtKind::Work,
                    "syncwarp" => StmtKind::SyncWarp,
                    "break" => StmtKind::Break,
                    _ => StmtKind::SyncThreads,
                }
            }
            "else" => {
                return Err(err("E005", start, "`else` must follow the `}` of an `if` block"));
            }
            w if OPS.contains(&w) && *self.peek_at(1) == Tok::LParen => StmtKind::Op(self.op()?),
            _ => match self.peek_at(1) {
                Tok::Assign => {
                    let name = self.name("the assigned variable")?;
                    self.bump();
                    let value = self.value()?;
                    StmtKind::Assign { name, value }
                }
                Tok::LParen => return Err(unknown_op(&word, start)),
                _ => {
                    if is_reserved(&word) {
                        return Err(reserved(&word, start, "a statement"));
                    }
                    let hint = match closest(&word, KEYWORDS.iter().chain(OPS).copied()) {
                        Some(k) => format!("; did you mean `{k}`?"),
                        None => "; an assignment is written `x = EXPR`".to_string(),
                    };
                    return Err(err("E005", start, format!("`{word}` does not start a statement{hint}")));
                }
            },
        };
        Ok(Stmt {
            kind,
            span: self.since(start),
        })
    }

    /// `if C { } else if C { } ... else { }`: the arms of a chain are read in a loop (a flat
    /// chain is not nesting) and nested in the tree afterwards, as `else { if ... }`.
    pub(super) fn if_stmt(&mut self) -> PResult<Stmt> {
        let first = self.span();
        let mut arms = Vec::new();
        let els = loop {
            let start = self.bump().span;
            if arms.len() == MAX_ELSE_IF {
                return Err(err(
                    "E005",
                    start,
                    format!("this `else if` chain has more than {MAX_ELSE_IF} arms; split it, or index a table with `let`"),
                ));
            }
            self.enter(start)?;
            let cond = self.expr()?;
            let then = self.block()?;
            self.leave();
            arms.push((start, cond, then));
            // `}` newline `else` still continues the `if`.
            let mut k = self.pos;
            while self.toks[k].tok == Tok::Newline {
                k += 1;
            }
            if !matches!(&self.toks[k].tok, Tok::Ident(s) if s == "else") {
                break None;
            }
            self.pos = k;
            self.bump();
            if !self.is_word("if") {
                self.enter(first)?;
                let b = self.block()?;
                self.leave();
                break Some(b);
            }
        };
        // Every `if` of the chain ends where the chain ends.
        let end = self.since(first).end;
        let mut els = els;
        let mut stmt = None;
        while let Some((start, cond, then)) = arms.pop() {
            let s = Stmt {
                kind: StmtKind::If { cond, then, els },
                span: Span::new(start.start as usize, end as usize),
            };
            if arms.is_empty() {
                stmt = Some(s);
                break;
            }
            els = Some(Block {
                span: s.span,
                stmts: vec![s],
            });
        }
        Ok(stmt.expect("an if has one arm at least"))
    }

    /// Right side of `let`/assignment: an operation or an expression.
    pub(super) fn value(&mut self) -> PResult<Value> {
        if let Tok::Ident(w) = self.peek() {
            if OPS.contains(&w.as_str()) && *self.peek_at(1) == Tok::LParen {
                let op = self.op()?;
                if binop(self.peek()).is_some() || *self.peek() == Tok::Dot {
                    return Err(nested_op(op.kind.keyword(), op.span));
                }
                return Ok(Value::Op(op));
            }
        }
        Ok(Value::Expr(self.expr()?))
    }
}
