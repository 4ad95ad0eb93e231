//! Expressions: precedence climbing over the binary operators, unary operators, and primaries
//! (literals, names, `ROLE.count`, identities, parentheses).

use super::ops::{nested_op, unknown_op};
use super::*;

impl Parser {
    pub(super) fn expr(&mut self) -> PResult<Expr> {
        self.binary(1)
    }

    /// Precedence climbing: the loop builds left-associative chains, recursion only goes one
    /// precedence level up (or into parentheses, counted by `enter`). The operator tree's depth is
    /// tracked so that no walk over it can overflow the stack.
    pub(super) fn binary(&mut self, min_prec: u8) -> PResult<Expr> {
        let (mut lhs, mut d) = (self.unary()?, self.tree_depth);
        while let Some(op) = binop(self.peek()) {
            if op.precedence() < min_prec {
                break;
            }
            self.bump();
            let rhs = self.binary(op.precedence() + 1)?;
            d = d.max(self.tree_depth) + 1;
            let span = lhs.span.to(rhs.span);
            if self.depth + d > MAX_DEPTH {
                return Err(err(
                    "E005",
                    span,
                    format!("this expression nests more than {MAX_DEPTH} operators deep; split it with `let`"),
                ));
            }
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        self.tree_depth = d;
        Ok(lhs)
    }

    pub(super) fn unary(&mut self) -> PResult<Expr> {
        let start = self.span();
        let op = match self.peek() {
            Tok::Minus => UnOp::Neg,
            Tok::Bang => UnOp::Not,
            _ => return self.primary(),
        };
        self.bump();
        self.enter(start)?;
        let inner = self.unary()?;
        self.leave();
        self.tree_depth += 1;
        let span = start.to(inner.span);
        Ok(Expr {
            kind: ExprKind::Unary(op, Box::new(inner)),
            span,
        })
    }

    /// A primary expression; `tree_depth` is left at its operator depth.
    pub(super) fn primary(&mut self) -> PResult<Expr> {
        let start = self.span();
        self.tree_depth = 0;
        match self.peek().clone() {
            Tok::Int(v) => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Int(v),
                    span: start,
                })
            }
            Tok::LParen => {
                self.bump();
                self.enter(start)?;
                let mut e = self.expr()?;
                self.expect_tok(Tok::RParen, "to close the parenthesis")?;
                self.leave();
                e.span = self.since(start);
                Ok(e)
            }
            Tok::Ident(w) => {
                if *self.peek_at(1) == Tok::LParen {
                    if OPS.contains(&w.as_str()) {
                        // Parse it to find its extent, so the caret covers the whole operation.
                        let op = self.op()?;
                        return Err(nested_op(&w, op.span));
                    }
                    return Err(unknown_op(&w, start));
                }
                if *self.peek_at(1) == Tok::Dot {
                    if is_reserved(&w) {
                        return Err(reserved(&w, start, "a role"));
                    }
                    self.bump();
                    self.bump();
                    if !self.is_word("count") {
                        return Err(err(
                            "E005",
                            self.span(),
                            format!(
                                "only `.count` can follow a role name, as in `{w}.count`, but found {}",
                                self.peek().describe()
                            ),
                        ));
                    }
                    self.bump();
                    return Ok(Expr {
                        kind: ExprKind::RoleCount(w),
                        span: self.since(start),
                    });
                }
                if is_reserved(&w) {
                    return Err(reserved(&w, start, "a value"));
                }
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Name(w),
                    span: start,
                })
            }
            other => Err(err(
                "E005",
                start,
                format!("expected an expression, but found {}", other.describe()),
            )),
        }
    }
}

pub(super) fn binop(t: &Tok) -> Option<BinOp> {
    Some(match t {
        Tok::Plus => BinOp::Add,
        Tok::Minus => BinOp::Sub,
        Tok::Star => BinOp::Mul,
        Tok::Slash => BinOp::Div,
        Tok::Percent => BinOp::Rem,
        Tok::EqEq => BinOp::Eq,
        Tok::Ne => BinOp::Ne,
        Tok::Lt => BinOp::Lt,
        Tok::Le => BinOp::Le,
        Tok::Gt => BinOp::Gt,
        Tok::Ge => BinOp::Ge,
        Tok::AndAnd => BinOp::And,
        Tok::OrOr => BinOp::Or,
        _ => return None,
    })
}
