//! The only file that speaks Z3: terms and formulas of `sym` become Z3 integer terms, and a
//! query's answer comes back as plain data (sat with values, unsat, or unknown with Z3's reason).

use crate::sym::{Cmp, B, T};
use std::collections::BTreeMap;
use z3::ast::{Ast, Bool, Int};
use z3::{Config, Context, Optimize, Params, SatResult, Solver};

pub enum Answer {
    Unsat,
    /// Values of the requested terms, and of every symbol.
    Sat {
        values: Vec<i64>,
        symbols: BTreeMap<String, i64>,
    },
    Unknown(String),
}

struct Tr<'c> {
    ctx: &'c Context,
    vars: BTreeMap<String, Int<'c>>,
}

impl<'c> Tr<'c> {
    fn v(&mut self, n: &str) -> Int<'c> {
        if let Some(x) = self.vars.get(n) {
            return x.clone();
        }
        let x = Int::new_const(self.ctx, n);
        self.vars.insert(n.to_string(), x.clone());
        x
    }
    fn t(&mut self, t: &T) -> Int<'c> {
        let c = self.ctx;
        match t {
            T::Int(v) => Int::from_i64(c, *v),
            T::Var(n) => self.v(n),
            T::Add(v) => {
                let xs: Vec<Int> = v.iter().map(|x| self.t(x)).collect();
                let refs: Vec<&Int> = xs.iter().collect();
                Int::add(c, &refs)
            }
            T::Mul(a, b) => {
                let (a, b) = (self.t(a), self.t(b));
                Int::mul(c, &[&a, &b])
            }
            // C-style truncation from Z3's floor division (divisor > 0).
            T::Div(a, m) => {
                let a = self.t(a);
                let m = Int::from_i64(c, *m);
                let zero = Int::from_i64(c, 0);
                a.ge(&zero).ite(&a.div(&m), &a.unary_minus().div(&m).unary_minus())
            }
            T::Mod(a, m) => {
                let a = self.t(a);
                let mm = Int::from_i64(c, *m);
                let zero = Int::from_i64(c, 0);
                a.ge(&zero).ite(&a.modulo(&mm), &a.unary_minus().modulo(&mm).unary_minus())
            }
            T::FDiv(a, m) => self.t(a).div(&Int::from_i64(c, *m)),
            T::FMod(a, m) => self.t(a).modulo(&Int::from_i64(c, *m)),
            T::Ite(b, x, y) => {
                let b = self.b(b);
                let (x, y) = (self.t(x), self.t(y));
                b.ite(&x, &y)
            }
        }
    }
    fn b(&mut self, b: &B) -> Bool<'c> {
        let c = self.ctx;
        match b {
            B::Const(v) => Bool::from_bool(c, *v),
            B::Cmp(op, x, y) => {
                let (x, y) = (self.t(x), self.t(y));
                match op {
                    Cmp::Eq => x._eq(&y),
                    Cmp::Ne => x._eq(&y).not(),
                    Cmp::Lt => x.lt(&y),
                    Cmp::Le => x.le(&y),
                    Cmp::Gt => x.gt(&y),
                    Cmp::Ge => x.ge(&y),
                }
            }
            B::And(v) => {
                let xs: Vec<Bool> = v.iter().map(|x| self.b(x)).collect();
                let refs: Vec<&Bool> = xs.iter().collect();
                Bool::and(c, &refs)
            }
            B::Or(v) => {
                let xs: Vec<Bool> = v.iter().map(|x| self.b(x)).collect();
                let refs: Vec<&Bool> = xs.iter().collect();
                Bool::or(c, &refs)
            }
            B::Not(x) => self.b(x).not(),
        }
    }
}

/// Is `formula` satisfiable with every symbol within its inclusive range? On sat, the model
/// minimizes the symbols (smallest instance first, so the explicit re-check stays small) and
/// returns the values of `show`.
/// One Z3 context and one incremental solver for many queries: creating either costs more than
/// most of our queries (each query runs between a push and a pop).
pub struct Session<'c> {
    ctx: &'c Context,
    solver: Solver<'c>,
}

/// Run `f` with a session whose queries time out after `timeout_ms` each.
pub fn with_session<X>(timeout_ms: u32, f: impl FnOnce(&Session) -> X) -> X {
    let mut cfg = Config::new();
    cfg.set_timeout_msec(timeout_ms as u64);
    let ctx = Context::new(&cfg);
    let solver = Solver::new(&ctx);
    let mut p = Params::new(&ctx);
    p.set_u32("timeout", timeout_ms);
    solver.set_params(&p);
    let s = Session { ctx: &ctx, solver };
    f(&s)
}

impl<'c> Session<'c> {
    pub fn solve(&self, formula: &B, symbols: &[(String, i64, i64)], show: &[T]) -> Answer {
        self.solver.push();
        let a = solve_in(self.ctx, &self.solver, formula, symbols, show);
        self.solver.pop(1);
        a
    }
}

fn solve_in<'c>(ctx: &'c Context, solver: &Solver<'c>, formula: &B, symbols: &[(String, i64, i64)], show: &[T]) -> Answer {
    let mut tr = Tr {
        ctx,
        vars: BTreeMap::new(),
    };
    let mut ranges = Vec::new();
    for (n, lo, hi) in symbols {
        let v = tr.v(n);
        ranges.push(v.ge(&Int::from_i64(ctx, *lo)));
        ranges.push(v.le(&Int::from_i64(ctx, *hi)));
    }
    let f = tr.b(formula);
    for r in &ranges {
        solver.assert(r);
    }
    solver.assert(&f);
    match solver.check() {
        SatResult::Unsat => Answer::Unsat,
        SatResult::Unknown if std::env::var_os("PHASECHECK_SMT_DUMP").is_some() => {
            eprintln!("{solver}");
            Answer::Unknown(solver.get_reason_unknown().unwrap_or_else(|| "unknown".into()))
        }
        SatResult::Unknown => Answer::Unknown(solver.get_reason_unknown().unwrap_or_else(|| "unknown".into())),
        SatResult::Sat => {
            let opt = Optimize::new(ctx);
            for r in &ranges {
                opt.assert(r);
            }
            opt.assert(&f);
            let syms: Vec<Int> = symbols.iter().map(|(n, _, _)| tr.v(n)).collect();
            for s in &syms {
                opt.minimize(s);
            }
            let model = match opt.check(&[]) {
                SatResult::Sat => opt.get_model(),
                _ => None,
            }
            .or_else(|| solver.get_model());
            let Some(model) = model else {
                return Answer::Unknown("Z3 reported sat without a model".into());
            };
            let mut symbols_out = BTreeMap::new();
            for ((n, _, _), v) in symbols.iter().zip(&syms) {
                if let Some(x) = model.eval(v).and_then(|x| x.as_i64()) {
                    symbols_out.insert(n.clone(), x);
                }
            }
            let values = show
                .iter()
                .map(|t| {
                    let z = tr.t(t);
                    model.eval(&z).and_then(|x| x.as_i64()).unwrap_or(i64::MIN)
                })
                .collect();
            Answer::Sat {
                values,
                symbols: symbols_out,
            }
        }
    }
}
