//! Symbolic integer terms and formulas, independent of Z3.
//!
//! The encoding is built as plain Rust data first so that it can be inspected, simplified and
//! tested without a solver; `solver` is the only place that turns it into Z3 terms. Division and
//! remainder come in two flavours on purpose: `Div`/`Mod` are the language's C-style truncating
//! operators (what the explicit model evaluates), `FDiv`/`FMod` are floor operators used by the
//! counting formulas, whose correctness argument needs floor semantics.

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum T {
    Int(i64),
    Var(String),
    Add(Vec<T>),
    Mul(Box<T>, Box<T>),
    /// Truncating division by a positive constant (the language's `/`).
    Div(Box<T>, i64),
    /// Truncating remainder by a positive constant (the language's `%`).
    Mod(Box<T>, i64),
    /// Floor division by a positive constant.
    FDiv(Box<T>, i64),
    /// Non-negative remainder by a positive constant.
    FMod(Box<T>, i64),
    Ite(Box<B>, Box<T>, Box<T>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum B {
    Const(bool),
    Cmp(Cmp, T, T),
    And(Vec<B>),
    Or(Vec<B>),
    Not(Box<B>),
}

pub fn int(v: i64) -> T {
    T::Int(v)
}
pub fn var(n: &str) -> T {
    T::Var(n.to_string())
}

// Named like the std operators on purpose: these are simplifying constructors (they fold constants
// as they build), and operator syntax would hide that they normalise.
#[allow(clippy::should_implement_trait)]
impl T {
    pub fn add(self, o: T) -> T {
        let v = match (self, o) {
            (T::Int(a), T::Int(b)) => return T::Int(a + b),
            (T::Int(0), x) | (x, T::Int(0)) => return x,
            (T::Add(mut v), T::Add(w)) => {
                v.extend(w);
                v
            }
            (T::Add(mut v), x) | (x, T::Add(mut v)) => {
                v.push(x);
                v
            }
            (a, b) => vec![a, b],
        };
        // one constant per sum, so that sums of constants fold
        let mut c = 0i64;
        let mut rest: Vec<T> = Vec::with_capacity(v.len());
        for x in v {
            match x {
                T::Int(k) => c += k,
                x => rest.push(x),
            }
        }
        if c != 0 {
            rest.push(T::Int(c));
        }
        match rest.len() {
            0 => T::Int(0),
            1 => rest.pop().unwrap(),
            _ => T::Add(rest),
        }
    }
    pub fn neg(self) -> T {
        self.mul(T::Int(-1))
    }
    pub fn sub(self, o: T) -> T {
        self.add(o.neg())
    }
    pub fn mul(self, o: T) -> T {
        match (self, o) {
            (T::Int(a), T::Int(b)) => T::Int(a * b),
            (T::Int(0), _) | (_, T::Int(0)) => T::Int(0),
            (T::Int(1), x) | (x, T::Int(1)) => x,
            (T::Add(v), T::Int(c)) | (T::Int(c), T::Add(v)) => T::sum(v.into_iter().map(|x| x.mul(T::Int(c)))),
            (T::Mul(a, b), T::Int(c)) | (T::Int(c), T::Mul(a, b)) => match (*a, *b) {
                (T::Int(d), x) | (x, T::Int(d)) => x.mul(T::Int(c * d)),
                (a, b) => T::Mul(Box::new(T::Mul(Box::new(a), Box::new(b))), Box::new(T::Int(c))),
            },
            (a, b) => T::Mul(Box::new(a), Box::new(b)),
        }
    }
    /// Floor division; terms of the sum whose coefficient is a multiple of `m` come out of the
    /// division exactly (floor((m*x + r) / m) = x + floor(r / m)), which keeps the solver's
    /// divisions on small remainders.
    pub fn fdiv(self, m: i64) -> T {
        if m == 1 {
            return self;
        }
        let (out, rest) = self.split_multiples(m);
        let d = match rest {
            T::Int(a) => T::Int(a.div_euclid(m)),
            x => T::FDiv(Box::new(x), m),
        };
        out.add(d)
    }
    pub fn fmod(self, m: i64) -> T {
        if m == 1 {
            return T::Int(0);
        }
        let (_, rest) = self.split_multiples(m);
        match rest {
            T::Int(a) => T::Int(a.rem_euclid(m)),
            x => T::FMod(Box::new(x), m),
        }
    }
    /// `self = m * out + rest`, moving whole multiples of `m` into `out`.
    fn split_multiples(self, m: i64) -> (T, T) {
        let terms = match self {
            T::Add(v) => v,
            x => vec![x],
        };
        let mut out = T::Int(0);
        let mut rest = T::Int(0);
        for t in terms {
            match t {
                T::Int(c) => {
                    out = out.add(T::Int(c.div_euclid(m)));
                    rest = rest.add(T::Int(c.rem_euclid(m)));
                }
                T::Mul(a, b) => match (&*a, &*b) {
                    (T::Int(c), x) | (x, T::Int(c)) if c % m == 0 => out = out.add(x.clone().mul(T::Int(c / m))),
                    _ => rest = rest.add(T::Mul(a, b)),
                },
                x => rest = rest.add(x),
            }
        }
        (out, rest)
    }
    /// Truncating `/` and `%` of dividends that mention one of `vars` read as floor operators:
    /// valid once those dividends are shown non-negative (the encoder's obligations).
    pub fn floorify(&self, vars: &[String]) -> T {
        let f = |x: &T| x.floorify(vars);
        match self {
            T::Int(_) | T::Var(_) => self.clone(),
            T::Add(v) => T::sum(v.iter().map(f)),
            T::Mul(a, b) => f(a).mul(f(b)),
            T::Div(a, m) => {
                if vars.iter().any(|v| a.mentions(v)) {
                    f(a).fdiv(*m)
                } else {
                    T::Div(Box::new(f(a)), *m)
                }
            }
            T::Mod(a, m) => {
                if vars.iter().any(|v| a.mentions(v)) {
                    f(a).fmod(*m)
                } else {
                    T::Mod(Box::new(f(a)), *m)
                }
            }
            T::FDiv(a, m) => f(a).fdiv(*m),
            T::FMod(a, m) => f(a).fmod(*m),
            T::Ite(c, a, b) => T::ite(c.floorify(vars), f(a), f(b)),
        }
    }
    pub fn cmp(self, c: Cmp, o: T) -> B {
        if let (T::Int(a), T::Int(b)) = (&self, &o) {
            return B::Const(match c {
                Cmp::Eq => a == b,
                Cmp::Ne => a != b,
                Cmp::Lt => a < b,
                Cmp::Le => a <= b,
                Cmp::Gt => a > b,
                Cmp::Ge => a >= b,
            });
        }
        B::Cmp(c, self, o)
    }
    pub fn eq(self, o: T) -> B {
        self.cmp(Cmp::Eq, o)
    }
    pub fn ite(c: B, a: T, b: T) -> T {
        match c {
            B::Const(true) => a,
            B::Const(false) => b,
            c => {
                if a == b {
                    a
                } else {
                    T::Ite(Box::new(c), Box::new(a), Box::new(b))
                }
            }
        }
    }
    pub fn max(self, o: T) -> T {
        if self == o {
            return self;
        }
        T::ite(self.clone().cmp(Cmp::Ge, o.clone()), self, o)
    }
    pub fn min(self, o: T) -> T {
        if self == o {
            return self;
        }
        T::ite(self.clone().cmp(Cmp::Le, o.clone()), self, o)
    }
    pub fn sum(items: impl IntoIterator<Item = T>) -> T {
        items.into_iter().fold(T::Int(0), T::add)
    }

    /// Replace variables by terms.
    pub fn subst(&self, m: &BTreeMap<String, T>) -> T {
        match self {
            T::Int(v) => T::Int(*v),
            T::Var(n) => m.get(n).cloned().unwrap_or_else(|| self.clone()),
            T::Add(v) => T::sum(v.iter().map(|x| x.subst(m))),
            T::Mul(a, b) => a.subst(m).mul(b.subst(m)),
            T::Div(a, k) => match a.subst(m) {
                T::Int(v) => T::Int(v / k),
                x => T::Div(Box::new(x), *k),
            },
            T::Mod(a, k) => match a.subst(m) {
                T::Int(v) => T::Int(v % k),
                x => T::Mod(Box::new(x), *k),
            },
            T::FDiv(a, k) => a.subst(m).fdiv(*k),
            T::FMod(a, k) => a.subst(m).fmod(*k),
            T::Ite(c, a, b) => T::ite(c.subst(m), a.subst(m), b.subst(m)),
        }
    }

    pub fn mentions(&self, n: &str) -> bool {
        match self {
            T::Int(_) => false,
            T::Var(v) => v == n,
            T::Add(v) => v.iter().any(|x| x.mentions(n)),
            T::Mul(a, b) => a.mentions(n) || b.mentions(n),
            T::Div(a, _) | T::Mod(a, _) | T::FDiv(a, _) | T::FMod(a, _) => a.mentions(n),
            T::Ite(c, a, b) => c.mentions(n) || a.mentions(n) || b.mentions(n),
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        if let T::Int(v) = self {
            Some(*v)
        } else {
            None
        }
    }

    /// Every truncating `/` or `%` whose dividend mentions `n`: such a dividend must be shown
    /// non-negative before floor arithmetic may stand in for it.
    pub fn trunc_dividends(&self, n: &str, out: &mut Vec<T>) {
        match self {
            T::Int(_) | T::Var(_) => {}
            T::Add(v) => v.iter().for_each(|x| x.trunc_dividends(n, out)),
            T::Mul(a, b) => {
                a.trunc_dividends(n, out);
                b.trunc_dividends(n, out)
            }
            T::Div(a, _) | T::Mod(a, _) => {
                if a.mentions(n) {
                    out.push((**a).clone());
                }
                a.trunc_dividends(n, out)
            }
            T::FDiv(a, _) | T::FMod(a, _) => a.trunc_dividends(n, out),
            T::Ite(c, a, b) => {
                c.trunc_dividends(n, out);
                a.trunc_dividends(n, out);
                b.trunc_dividends(n, out)
            }
        }
    }

    /// The period after which every `/` and `%` of a term in `n` becomes affine in the quotient:
    /// the lcm, over each division, of its divisor times the divisors nested inside it.
    pub fn period(&self, n: &str) -> i64 {
        fn go(t: &T, n: &str) -> (i64, i64) {
            // (lcm needed, product of divisors along the chain that mentions n)
            match t {
                T::Int(_) | T::Var(_) => (1, 1),
                T::Add(v) => v.iter().fold((1, 1), |(l, c), x| {
                    let (l2, c2) = go(x, n);
                    (lcm(l, l2), lcm(c, c2))
                }),
                T::Mul(a, b) => {
                    let (l1, c1) = go(a, n);
                    let (l2, c2) = go(b, n);
                    (lcm(l1, l2), lcm(c1, c2))
                }
                T::Div(a, k) | T::Mod(a, k) | T::FDiv(a, k) | T::FMod(a, k) => {
                    let (l, c) = go(a, n);
                    if a.mentions(n) {
                        let chain = c.saturating_mul(*k);
                        (lcm(l, chain), chain)
                    } else {
                        (l, 1)
                    }
                }
                T::Ite(cnd, a, b) => {
                    let (l0, c0) = cnd.period_parts(n);
                    let (l1, c1) = go(a, n);
                    let (l2, c2) = go(b, n);
                    (lcm(lcm(l0, l1), l2), lcm(lcm(c0, c1), c2))
                }
            }
        }
        go(self, n).0
    }
}

#[allow(clippy::should_implement_trait)]
impl B {
    pub fn and(v: Vec<B>) -> B {
        let mut out = Vec::new();
        for b in v {
            match b {
                B::Const(true) => {}
                B::Const(false) => return B::Const(false),
                B::And(w) => out.extend(w),
                b => out.push(b),
            }
        }
        match out.len() {
            0 => B::Const(true),
            1 => out.pop().unwrap(),
            _ => B::And(out),
        }
    }
    pub fn or(v: Vec<B>) -> B {
        let mut out = Vec::new();
        for b in v {
            match b {
                B::Const(false) => {}
                B::Const(true) => return B::Const(true),
                B::Or(w) => out.extend(w),
                b => out.push(b),
            }
        }
        match out.len() {
            0 => B::Const(false),
            1 => out.pop().unwrap(),
            _ => B::Or(out),
        }
    }
    pub fn not(self) -> B {
        match self {
            B::Const(b) => B::Const(!b),
            B::Not(b) => *b,
            b => B::Not(Box::new(b)),
        }
    }
    pub fn subst(&self, m: &BTreeMap<String, T>) -> B {
        match self {
            B::Const(b) => B::Const(*b),
            B::Cmp(c, a, b) => a.subst(m).cmp(*c, b.subst(m)),
            B::And(v) => B::and(v.iter().map(|x| x.subst(m)).collect()),
            B::Or(v) => B::or(v.iter().map(|x| x.subst(m)).collect()),
            B::Not(b) => b.subst(m).not(),
        }
    }
    pub fn floorify(&self, vars: &[String]) -> B {
        match self {
            B::Const(b) => B::Const(*b),
            B::Cmp(c, a, b) => a.floorify(vars).cmp(*c, b.floorify(vars)),
            B::And(v) => B::and(v.iter().map(|x| x.floorify(vars)).collect()),
            B::Or(v) => B::or(v.iter().map(|x| x.floorify(vars)).collect()),
            B::Not(b) => b.floorify(vars).not(),
        }
    }
    pub fn mentions(&self, n: &str) -> bool {
        match self {
            B::Const(_) => false,
            B::Cmp(_, a, b) => a.mentions(n) || b.mentions(n),
            B::And(v) | B::Or(v) => v.iter().any(|x| x.mentions(n)),
            B::Not(b) => b.mentions(n),
        }
    }
    pub fn trunc_dividends(&self, n: &str, out: &mut Vec<T>) {
        match self {
            B::Const(_) => {}
            B::Cmp(_, a, b) => {
                a.trunc_dividends(n, out);
                b.trunc_dividends(n, out)
            }
            B::And(v) | B::Or(v) => v.iter().for_each(|x| x.trunc_dividends(n, out)),
            B::Not(b) => b.trunc_dividends(n, out),
        }
    }
    fn period_parts(&self, n: &str) -> (i64, i64) {
        (self.period(n), 1)
    }
    pub fn period(&self, n: &str) -> i64 {
        match self {
            B::Const(_) => 1,
            B::Cmp(_, a, b) => lcm(a.period(n), b.period(n)),
            B::And(v) | B::Or(v) => v.iter().fold(1, |l, x| lcm(l, x.period(n))),
            B::Not(b) => b.period(n),
        }
    }
}

pub fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}
pub fn lcm(a: i64, b: i64) -> i64 {
    if a == 0 || b == 0 {
        return 0;
    }
    (a / gcd(a, b)).saturating_mul(b).abs()
}

/// `a*q + rest`: a term affine in the variable `q` with a constant coefficient.
#[derive(Clone, Debug)]
pub struct Lin {
    pub a: i64,
    pub rest: T,
}

/// Express `t` as `a*q + rest` (rest free of `q`), reading truncating division as floor division
/// (the caller has shown every such dividend non-negative). `None`: not affine in `q`.
pub fn linearize(t: &T, q: &str) -> Option<Lin> {
    Some(match t {
        T::Int(v) => Lin { a: 0, rest: T::Int(*v) },
        T::Var(n) if n == q => Lin { a: 1, rest: T::Int(0) },
        T::Var(_) => Lin { a: 0, rest: t.clone() },
        T::Add(v) => {
            let mut a = 0i64;
            let mut rest = T::Int(0);
            for x in v {
                let l = linearize(x, q)?;
                a = a.checked_add(l.a)?;
                rest = rest.add(l.rest);
            }
            Lin { a, rest }
        }
        T::Mul(x, y) => {
            let lx = linearize(x, q)?;
            let ly = linearize(y, q)?;
            match (lx.a, ly.a) {
                (0, 0) => Lin {
                    a: 0,
                    rest: lx.rest.mul(ly.rest),
                },
                (0, _) => {
                    let c = lx.rest.as_int()?;
                    Lin {
                        a: ly.a.checked_mul(c)?,
                        rest: ly.rest.mul(T::Int(c)),
                    }
                }
                (_, 0) => {
                    let c = ly.rest.as_int()?;
                    Lin {
                        a: lx.a.checked_mul(c)?,
                        rest: lx.rest.mul(T::Int(c)),
                    }
                }
                _ => return None,
            }
        }
        T::Div(x, m) | T::FDiv(x, m) => {
            let l = linearize(x, q)?;
            if l.a == 0 {
                return Some(Lin {
                    a: 0,
                    rest: if matches!(t, T::Div(..)) { t.clone() } else { l.rest.fdiv(*m) },
                });
            }
            if l.a % m != 0 {
                return None;
            }
            Lin {
                a: l.a / m,
                rest: l.rest.fdiv(*m),
            }
        }
        T::Mod(x, m) | T::FMod(x, m) => {
            let l = linearize(x, q)?;
            if l.a == 0 {
                return Some(Lin {
                    a: 0,
                    rest: if matches!(t, T::Mod(..)) { t.clone() } else { l.rest.fmod(*m) },
                });
            }
            if l.a % m != 0 {
                return None;
            }
            Lin {
                a: 0,
                rest: l.rest.fmod(*m),
            }
        }
        T::Ite(c, x, y) => {
            if c.mentions(q) || x.mentions(q) || y.mentions(q) {
                return None;
            }
            Lin { a: 0, rest: t.clone() }
        }
    })
}

/// One atom of a cube: `a*q + rest >= 0` (or `== 0`), or a `q`-free condition.
#[derive(Clone, Debug)]
enum Atom {
    Ge(Lin),
    Eq(Lin),
    Free(B),
}

/// Disjoint cubes (conjunctions of atoms) whose union is `b`; `None` when an atom is not affine
/// in `q` or the formula would blow up.
fn cubes(b: &B, q: &str, positive: bool) -> Option<Vec<Vec<Atom>>> {
    if !b.mentions(q) {
        return Some(vec![vec![Atom::Free(if positive { b.clone() } else { b.clone().not() })]]);
    }
    match (b, positive) {
        (B::Const(v), p) => Some(if *v == p { vec![vec![]] } else { vec![] }),
        (B::Not(x), p) => cubes(x, q, !p),
        (B::And(v), true) | (B::Or(v), false) => {
            // conjunction of the parts (each under `positive` for And, negated for Or)
            let mut acc: Vec<Vec<Atom>> = vec![vec![]];
            for x in v {
                let cs = cubes(x, q, positive)?;
                let mut next = Vec::new();
                for a in &acc {
                    for c in &cs {
                        let mut n = a.clone();
                        n.extend(c.iter().cloned());
                        next.push(n);
                    }
                }
                if next.len() > 64 {
                    return None;
                }
                acc = next;
            }
            Some(acc)
        }
        (B::Or(v), true) | (B::And(v), false) => {
            // x1 ∨ x2 ∨ ... as x1 ∪ (¬x1 ∧ x2) ∪ ...: disjoint pieces, so counts add up.
            let mut out = Vec::new();
            let mut before: Vec<Vec<Atom>> = vec![vec![]];
            for x in v {
                let this = cubes(x, q, positive)?;
                let not_this = cubes(x, q, !positive)?;
                for a in &before {
                    for c in &this {
                        let mut n = a.clone();
                        n.extend(c.iter().cloned());
                        out.push(n);
                    }
                }
                let mut next = Vec::new();
                for a in &before {
                    for c in &not_this {
                        let mut n = a.clone();
                        n.extend(c.iter().cloned());
                        next.push(n);
                    }
                }
                before = next;
                if out.len() + before.len() > 64 {
                    return None;
                }
            }
            Some(out)
        }
        (B::Cmp(c, x, y), p) => {
            let l = linearize(&x.clone().sub(y.clone()), q)?; // d = x - y = a q + r
            let c = if p { *c } else { negate(*c) };
            let ge = |a: i64, r: T| Atom::Ge(Lin { a, rest: r });
            let (a, r) = (l.a, l.rest);
            Some(match c {
                Cmp::Ge => vec![vec![ge(a, r)]],
                Cmp::Gt => vec![vec![ge(a, r.add(T::Int(-1)))]],
                Cmp::Le => vec![vec![ge(-a, r.neg())]],
                Cmp::Lt => vec![vec![ge(-a, r.neg().add(T::Int(-1)))]],
                Cmp::Eq => vec![vec![Atom::Eq(Lin { a, rest: r })]],
                Cmp::Ne => vec![vec![ge(a, r.clone().add(T::Int(-1)))], vec![ge(-a, r.neg().add(T::Int(-1)))]],
            })
        }
    }
}

fn negate(c: Cmp) -> Cmp {
    match c {
        Cmp::Eq => Cmp::Ne,
        Cmp::Ne => Cmp::Eq,
        Cmp::Lt => Cmp::Ge,
        Cmp::Le => Cmp::Gt,
        Cmp::Gt => Cmp::Le,
        Cmp::Ge => Cmp::Lt,
    }
}

/// The number of integers `q` satisfying `b`, as a closed-form term (floor divisions, max/min as
/// if-then-else). `b` must bound `q` from both sides in every cube. `None`: not expressible.
pub fn count(b: &B, q: &str) -> Option<T> {
    let cs = cubes(b, q, true)?;
    let mut total = T::Int(0);
    for cube in cs {
        let mut lo: Option<T> = None;
        let mut hi: Option<T> = None;
        let mut side = Vec::new();
        for atom in cube {
            match atom {
                Atom::Free(f) => side.push(f),
                Atom::Ge(Lin { a: 0, rest }) => side.push(rest.cmp(Cmp::Ge, T::Int(0))),
                Atom::Eq(Lin { a: 0, rest }) => side.push(rest.eq(T::Int(0))),
                Atom::Ge(Lin { a, rest }) if a > 0 => {
                    // q >= ceil(-rest / a) = -floor(rest / a)
                    let b = rest.fdiv(a).neg();
                    lo = Some(match lo {
                        None => b,
                        Some(x) => x.max(b),
                    });
                }
                Atom::Ge(Lin { a, rest }) => {
                    // -|a| q + rest >= 0  =>  q <= floor(rest / |a|)
                    let b = rest.fdiv(-a);
                    hi = Some(match hi {
                        None => b,
                        Some(x) => x.min(b),
                    });
                }
                Atom::Eq(Lin { a, rest }) => {
                    // a q + rest == 0  =>  q = -rest / a, when a divides rest
                    let (a, rest) = if a < 0 { (-a, rest.neg()) } else { (a, rest) };
                    let num = rest.neg();
                    side.push(num.clone().fmod(a).eq(T::Int(0)));
                    let v = num.fdiv(a);
                    lo = Some(match lo {
                        None => v.clone(),
                        Some(x) => x.max(v.clone()),
                    });
                    hi = Some(match hi {
                        None => v,
                        Some(x) => x.min(v),
                    });
                }
            }
        }
        let (lo, hi) = (lo?, hi?);
        let n = hi.sub(lo).add(T::Int(1)).max(T::Int(0));
        total = total.add(T::ite(B::and(side), n, T::Int(0)));
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(t: &T, env: &BTreeMap<String, i64>) -> i64 {
        match t {
            T::Int(v) => *v,
            T::Var(n) => env[n],
            T::Add(v) => v.iter().map(|x| eval(x, env)).sum(),
            T::Mul(a, b) => eval(a, env) * eval(b, env),
            T::Div(a, k) => eval(a, env) / k,
            T::Mod(a, k) => eval(a, env) % k,
            T::FDiv(a, k) => eval(a, env).div_euclid(*k),
            T::FMod(a, k) => eval(a, env).rem_euclid(*k),
            T::Ite(c, a, b) => {
                if evalb(c, env) {
                    eval(a, env)
                } else {
                    eval(b, env)
                }
            }
        }
    }
    fn evalb(b: &B, env: &BTreeMap<String, i64>) -> bool {
        match b {
            B::Const(v) => *v,
            B::Cmp(c, x, y) => {
                let (x, y) = (eval(x, env), eval(y, env));
                match c {
                    Cmp::Eq => x == y,
                    Cmp::Ne => x != y,
                    Cmp::Lt => x < y,
                    Cmp::Le => x <= y,
                    Cmp::Gt => x > y,
                    Cmp::Ge => x >= y,
                }
            }
            B::And(v) => v.iter().all(|x| evalb(x, env)),
            B::Or(v) => v.iter().any(|x| evalb(x, env)),
            B::Not(x) => !evalb(x, env),
        }
    }

    /// The closed-form count agrees with brute force on the shapes the encoder produces: a
    /// residue class, an index equality through a division, a disequality and a disjunction.
    #[test]
    fn count_matches_brute_force() {
        let q = "q";
        let i = |l: i64, r: i64| var(q).mul(int(l)).add(int(r));
        for (l, r, s) in [(6, 0, 3), (6, 4, 3), (4, 3, 2), (1, 0, 1)] {
            for n in 0..20 {
                for k in 0..s {
                    let mut env = BTreeMap::new();
                    env.insert("N".to_string(), n);
                    env.insert("k".to_string(), k);
                    let dom = B::and(vec![
                        i(l, r).cmp(Cmp::Ge, int(0)),
                        i(l, r).cmp(Cmp::Lt, var("N")),
                        i(l, r).fmod(s).eq(var("k")),
                        i(l, r).fdiv(s).cmp(Cmp::Ne, int(2)),
                        B::or(vec![i(l, r).cmp(Cmp::Lt, int(3)), i(l, r).cmp(Cmp::Ge, int(7))]),
                    ]);
                    let c = count(&dom, q).expect("countable");
                    let brute = (-5..40)
                        .filter(|qq| {
                            let mut e = env.clone();
                            e.insert(q.to_string(), *qq);
                            evalb(&dom, &e)
                        })
                        .count() as i64;
                    assert_eq!(eval(&c, &env), brute, "l={l} r={r} s={s} n={n} k={k}");
                }
            }
        }
    }
}
