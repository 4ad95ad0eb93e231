//! Expressions and conditions of a role's code as symbolic terms of the parameters, the loop
//! variables and the locals known in closed form.

use super::*;

impl Builder {
    pub(super) fn cond(&self, e: &ast::Expr, cx: &mut Ctx) -> R<B> {
        Ok(match &e.kind {
            ExprKind::Binary(op, a, b) => match op {
                BinOp::And => B::and(vec![self.cond(a, cx)?, self.cond(b, cx)?]),
                BinOp::Or => B::or(vec![self.cond(a, cx)?, self.cond(b, cx)?]),
                BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                    let c = match op {
                        BinOp::Eq => Cmp::Eq,
                        BinOp::Ne => Cmp::Ne,
                        BinOp::Lt => Cmp::Lt,
                        BinOp::Le => Cmp::Le,
                        BinOp::Gt => Cmp::Gt,
                        _ => Cmp::Ge,
                    };
                    self.expr(a, cx)?.cmp(c, self.expr(b, cx)?)
                }
                _ => self.expr(e, cx)?.cmp(Cmp::Ne, int(0)),
            },
            ExprKind::Unary(UnOp::Not, a) => self.cond(a, cx)?.not(),
            _ => self.expr(e, cx)?.cmp(Cmp::Ne, int(0)),
        })
    }

    pub(super) fn expr(&self, e: &ast::Expr, cx: &mut Ctx) -> R<T> {
        Ok(match &e.kind {
            ExprKind::Int(v) => int(*v),
            ExprKind::Name(n) => {
                if let Some(l) = self.lookup(n, cx) {
                    match l {
                        Local::Term(t) => t,
                        Local::Token(_) => return unsupported(e.span, "a token used as a number")?,
                        Local::Elect => return unsupported(
                            e.span,
                            "an elect() result used other than as the condition of an `if`: prove counts the elected block, not the values",
                        )?,
                    }
                } else if let Some(t) = self.params.get(n) {
                    t.clone()
                } else if self.vars.contains(n) {
                    return self.shared_read(n, e.span, cx);
                } else if n == "cta" {
                    int(cx.cta)
                } else {
                    let (tid, gtid, ws) = match cx.me {
                        Some(m) => m,
                        None => return unsupported(e.span, format!("`{n}` is not a parameter or a local known to prove"))?,
                    };
                    match n.as_str() {
                        "tid" => int(tid),
                        "gtid" => int(gtid),
                        "lane" => int(gtid % ws),
                        "warp" => int(gtid / ws),
                        _ => return unsupported(e.span, format!("`{n}` is not a parameter or a local known to prove"))?,
                    }
                }
            }
            ExprKind::RoleCount(r) => match self.roles.get(r) {
                Some(t) => t.clone(),
                None => return unsupported(e.span, format!("`{r}.count` is not known here"))?,
            },
            ExprKind::Unary(UnOp::Neg, a) => self.expr(a, cx)?.neg(),
            ExprKind::Unary(UnOp::Not, _) => T::ite(self.cond(e, cx)?, int(1), int(0)),
            ExprKind::Binary(op, a, b) => {
                let x = self.expr(a, cx)?;
                match op {
                    BinOp::Add => x.add(self.expr(b, cx)?),
                    BinOp::Sub => x.sub(self.expr(b, cx)?),
                    BinOp::Mul => x.mul(self.expr(b, cx)?),
                    BinOp::Div | BinOp::Rem => {
                        let y = self.expr(b, cx)?;
                        let m = match y.as_int() {
                            Some(m) => m,
                            None => return Err(need_concrete_of(&y, b.span)),
                        };
                        if m <= 0 {
                            return unsupported(b.span, format!("division by {m}: prove handles division by a positive constant"))?;
                        }
                        if let Some(v) = x.as_int() {
                            return Ok(int(if *op == BinOp::Div { v / m } else { v % m }));
                        }
                        if m == 1 {
                            return Ok(if *op == BinOp::Div { x } else { int(0) });
                        }
                        if *op == BinOp::Div {
                            T::Div(Box::new(x), m)
                        } else {
                            T::Mod(Box::new(x), m)
                        }
                    }
                    _ => T::ite(self.cond(e, cx)?, int(1), int(0)),
                }
            }
        })
    }
}
