//! Control flow the summary expands rather than encodes: `while` loops whose trip count the
//! values fix (and `try_wait` spins, which are waits), inline-function calls, and loops without
//! barrier operations summarised by their effect on the locals that outlive them.

use super::*;

impl Builder {
    /// A `while` loop, where its trip count does not depend on the interleaving: a spin on
    /// `try_wait`/`try_wait_parity` (`let ok = 0; while ok == 0 { ok = try_wait_parity(B, P) }`)
    /// ends exactly when `wait_parity(B, P)` would pass, so it is that wait; a loop whose
    /// condition is a constant at every test (locals and parameters of known value, as a
    /// persistent kernel's `while blk < BLOCKS { ...; blk = blk + 1 }`) is run as often as it
    /// runs, at most `UNROLL` times, and a `break` whose condition is a constant there ends it
    /// (a persistent consumer's `while 1 { ...; if tile == TILES { break } }`). Anything else (a
    /// shared var, a symbolic bound, a `break` under a condition prove does not know, a
    /// `return`) depends on the interleaving or on values prove does not enumerate: refused.
    pub(super) fn while_loop(&self, span: Span, cond: &ast::Expr, body: &ast::Block, cx: &mut Ctx) -> R<()> {
        let refuse = || -> R<()> {
            unsupported(
                span,
                "a `while` loop that holds a `return`: its trip count depends on the interleaving; only the explicit search models it",
            )?
        };
        if let Some(r) = self.spin_wait(cond, body, cx) {
            return r;
        }
        if block_returns(body) {
            return refuse();
        }
        if cx.in_loop.is_some() && block_has_barrier_ops(body) {
            return unsupported(
                span,
                "a nested loop with barrier operations or a return: prove handles one loop level",
            )?;
        }
        let outer = cx.break_at.replace((cx.guard.len(), cx.share));
        let run = self.while_trips(span, cond, body, cx);
        cx.break_at = outer;
        run
    }

    /// The iterations of a `while` whose tests are constants, until one is false or a `break`
    /// that the iteration's every path reaches.
    fn while_trips(&self, span: Span, cond: &ast::Expr, body: &ast::Block, cx: &mut Ctx) -> R<()> {
        let refuse = || -> R<()> {
            unsupported(
                span,
                "a `while` loop whose condition is not a constant at each test, or that holds a `break` under a condition not known here: its trip count depends on the interleaving or on values prove does not enumerate; only the explicit search models it",
            )?
        };
        let mut trips = 0;
        loop {
            match self.cond(cond, cx) {
                Ok(B::Const(false)) => return Ok(()),
                Ok(B::Const(true)) if trips < UNROLL => {}
                Ok(B::Const(true)) => {
                    return unsupported(
                        span,
                        format!("a `while` loop that runs more than {UNROLL} times: prove unrolls at most {UNROLL}"),
                    )?
                }
                // a ranged parameter in the condition: the caller gives it each value in turn
                Ok(c) => match cond_vars(&c).into_iter().find(|v| !v.contains('@') && !v.contains('#')) {
                    Some(v) => return Err(need_concrete_of(&var(&v), cond.span)),
                    None => return refuse(),
                },
                Err(e) => return Err(e),
            }
            self.block(body, cx)?;
            if std::mem::take(&mut cx.broke) || cx.dead {
                return Ok(());
            }
            trips += 1;
        }
    }

    /// The spin `while X == 0 { X = try_wait_parity(B, P) }` (or `try_wait(B, T)`) on a local
    /// that is 0 here: the wait it stands for, and X becomes 1. `None` when it is not that shape.
    pub(super) fn spin_wait(&self, cond: &ast::Expr, body: &ast::Block, cx: &mut Ctx) -> Option<R<()>> {
        let x = match &cond.kind {
            ExprKind::Binary(BinOp::Eq, a, b) => match (&a.kind, &b.kind) {
                (ExprKind::Name(n), ExprKind::Int(0)) | (ExprKind::Int(0), ExprKind::Name(n)) => n,
                _ => return None,
            },
            ExprKind::Unary(UnOp::Not, a) => match &a.kind {
                ExprKind::Name(n) => n,
                _ => return None,
            },
            _ => return None,
        };
        let [stmt] = body.stmts.as_slice() else { return None };
        let StmtKind::Assign {
            name,
            value: ast::Value::Op(op),
        } = &stmt.kind
        else {
            return None;
        };
        if &name.name != x || !matches!(self.lookup(x, cx), Some(Local::Term(T::Int(0)))) {
            return None;
        }
        let scope = cx.locals.iter().rposition(|m| m.contains_key(x))?;
        if (cx.in_loop.is_some() && scope < cx.loop_scope) || (cx.share != Share::All && scope < cx.share_scope) {
            return None;
        }
        let wait = match &op.kind {
            OpKind::TryWaitParity { bar, parity } => ast::Op {
                kind: OpKind::WaitParity {
                    bar: bar.clone(),
                    parity: parity.clone(),
                },
                span: op.span,
            },
            OpKind::TryWait { bar, token } => ast::Op {
                kind: OpKind::Wait {
                    bar: bar.clone(),
                    token: token.clone(),
                },
                span: op.span,
            },
            _ => return None,
        };
        Some(self.op(&wait, cx).map(|_| {
            set_local(cx, x, Local::Term(int(1)));
        }))
    }

    /// A call of an inline function, expanded here as the lowering expands it: a parameter
    /// bound to a plain `let` local of the caller names that local (copied in, and copied out
    /// after the body, which sees nothing else of the caller's, so the two agree); any other
    /// argument is a fresh copy. A caller's local that a symbolic loop carries from one
    /// iteration to the next (or that lives outside an elected block) stays below the
    /// iteration's scope, so assigning it in the body is refused as it is in the caller.
    pub(super) fn call(&self, span: Span, name: &ast::Ident, args: &[ast::Expr], cx: &mut Ctx) -> R<()> {
        let Some(f) = self.fns.get(&name.name) else {
            return unsupported(span, format!("`{}` is not a function", name.name))?;
        };
        if f.params.len() != args.len() || cx.inlining >= 64 {
            return unsupported(span, format!("`{}` cannot be expanded here (wrong arity or recursion)", name.name))?;
        }
        let mut outer: HashMap<String, Local> = HashMap::new();
        let mut carried_here: HashMap<String, Local> = HashMap::new();
        let mut inner: HashMap<String, Local> = HashMap::new();
        let mut by_ref: Vec<(String, String)> = Vec::new();
        for (prm, a) in f.params.iter().zip(args) {
            let caller = match &a.kind {
                ExprKind::Name(n) if !cx.loop_vars.contains(n) => {
                    cx.locals.iter().rposition(|m| m.contains_key(n)).map(|ix| (n.clone(), ix))
                }
                _ => None,
            };
            match caller {
                Some((n, ix)) => {
                    if by_ref.iter().any(|(_, m)| *m == n) {
                        return unsupported(span, format!("`{n}` is passed twice to `{}`: two names for one local", name.name))?;
                    }
                    let v = cx.locals[ix][&n].clone();
                    let outside_elected = cx.share != Share::All && ix < cx.share_scope;
                    let carried = cx.in_loop.is_some() && ix < cx.loop_scope;
                    if outside_elected {
                        &mut outer
                    } else if carried {
                        &mut carried_here
                    } else {
                        &mut inner
                    }
                    .insert(prm.name.clone(), v);
                    by_ref.push((prm.name.clone(), n));
                }
                None => {
                    let v = Local::Term(self.expr(a, cx)?);
                    inner.insert(prm.name.clone(), v);
                }
            }
        }
        // scope 0: outside the elected block; 1: carried by the symbolic loop; 2: free to assign
        let saved = std::mem::replace(&mut cx.locals, vec![outer, carried_here, inner]);
        let saved_loop_vars = std::mem::take(&mut cx.loop_vars);
        let (loop_scope, share_scope) = (cx.loop_scope, cx.share_scope);
        cx.loop_scope = 2;
        cx.share_scope = 1;
        cx.inlining += 1;
        let breaks = cx.break_at.take();
        let run = self.block(&f.body, cx);
        cx.break_at = breaks;
        cx.inlining -= 1;
        let after = std::mem::replace(&mut cx.locals, saved);
        cx.loop_vars = saved_loop_vars;
        cx.loop_scope = loop_scope;
        cx.share_scope = share_scope;
        run?;
        for (prm, n) in by_ref {
            if let Some(v) = after.iter().rev().find_map(|m| m.get(&prm).cloned()) {
                set_local(cx, &n, v);
            }
        }
        Ok(())
    }

    /// A loop without barrier operations that assigns locals living after it: its effect on
    /// them, exactly. A constant trip count of at most `UNROLL` runs the body that many times; a
    /// longer one needs an effect that repeats with period 1 or 2 (`p = 1 - p`); a trip count of
    /// ranged parameters makes the caller give them each value in turn. Anything else is refused:
    /// skipping the loop would prove the protocol with the wrong values.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn effect_loop(
        &self,
        span: Span,
        v: &str,
        lo: &ast::Expr,
        hi: &ast::Expr,
        body: &ast::Block,
        outer: &[String],
        cx: &mut Ctx,
    ) -> R<()> {
        let l = self.expr(lo, cx)?;
        let trips = self.expr(hi, cx)?.sub(l.clone());
        let names = outer.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        let n = match trips.as_int() {
            Some(n) => n.max(0),
            None if term_vars(&trips).iter().any(|x| x.contains('@')) => {
                return unsupported(
                    span,
                    format!("a loop without barrier operations assigns {names}, and its trip count depends on an enclosing loop's variable: prove needs a constant trip count here"),
                )?
            }
            None => return Err(need_concrete_of(&trips, span)),
        };
        let n = if n <= UNROLL {
            n
        } else {
            match self.effect_period(v, body, outer, cx)? {
                Some(p) => n % p,
                None => {
                    return unsupported(
                        span,
                        format!("a loop without barrier operations assigns {names} over {n} iterations, and its effect does not repeat with period 1 or 2: prove can neither unroll nor summarise it"),
                    )?
                }
            }
        };
        for k in 0..n {
            cx.locals.push(HashMap::from([(v.to_string(), Local::Term(l.clone().add(int(k))))]));
            cx.loop_vars.push(v.to_string());
            self.block(body, cx)?;
            cx.loop_vars.pop();
            cx.locals.pop();
        }
        Ok(())
    }

    /// 1 or 2 when running the body that many times leaves every assigned local as it was, for
    /// any value of it and of the loop variable (terms compared after normalisation).
    pub(super) fn effect_period(&self, v: &str, body: &ast::Block, outer: &[String], cx: &mut Ctx) -> R<Option<i64>> {
        let saved: Vec<Option<Local>> = outer.iter().map(|n| self.lookup(n, cx)).collect();
        let fresh: Vec<T> = outer.iter().map(|n| var(&format!("{n}#effect"))).collect();
        for (n, t) in outer.iter().zip(&fresh) {
            set_local(cx, n, Local::Term(t.clone()));
        }
        let j = var(&format!("{v}#effect"));
        let mut period = None;
        for p in 1..=2 {
            cx.locals.push(HashMap::from([(v.to_string(), Local::Term(j.clone()))]));
            cx.loop_vars.push(v.to_string());
            let run = self.block(body, cx);
            cx.loop_vars.pop();
            cx.locals.pop();
            if run.is_err() {
                break;
            }
            let now: Vec<Option<Local>> = outer.iter().map(|n| self.lookup(n, cx)).collect();
            let back = now.iter().zip(&fresh).all(|(x, f)| matches!(x, Some(Local::Term(t)) if t == f));
            if back {
                period = Some(p);
                break;
            }
        }
        for (n, old) in outer.iter().zip(saved) {
            if let Some(old) = old {
                set_local(cx, n, old);
            }
        }
        Ok(period)
    }
}
