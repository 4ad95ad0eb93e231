//! The counting laws as existential queries: each `Query` is the negation of one law (a
//! violation) over the parameters, one barrier element `k`, and the loop variables of the events
//! it mentions. A satisfiable query is a counterexample; unsatisfiable queries, all of them, are
//! the proof.
//!
//! The round discipline: the j-th arrival event of a thread on a barrier element belongs to
//! phase j (an event of `arrive(B, n)` brings n arrivals). Counting events is exact for the
//! encoded fragment (see `sym::count`); that the discipline matches the hardware's phase
//! assignment is what the explicit search checks on instances, and what `prove` re-checks on
//! every counterexample before it calls it refuted.

use crate::summary::{Class, GroupInfo, Share, Site, SiteKind, Summary, Unsupported};
use crate::sym::{count, int, var, Cmp, B, T};
use phasecheck_model::lang::ast::Span;
use phasecheck_model::program::ir::MAX_COUNT;
use std::collections::BTreeMap;

mod stale;
mod tx;

/// The laws, by stable name (CLI, JSON, docs/smt.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Law {
    /// The declared count is within 1..=2^20-1 and drops never take it to zero.
    CountRange,
    /// Every phase a wait names receives exactly the expected arrivals; no phase receives more.
    Arrivals,
    /// In every phase, the bytes expected equal the bytes that land.
    TxBalance,
    /// No phase expects (or lands) more than 2^20-1 bytes; no single expect is negative or larger.
    TxRange,
    /// Each wait names the phase it needs: parities follow the thread's phases, tokens their own.
    Parity,
    /// No wait names a phase whose arrivals come after the waiter's own later steps (directly, or
    /// through one other role).
    WaitOrder,
}

impl Law {
    pub fn name(self) -> &'static str {
        match self {
            Law::CountRange => "count-range",
            Law::Arrivals => "arrivals",
            Law::TxBalance => "tx-balance",
            Law::TxRange => "tx-range",
            Law::Parity => "parity",
            Law::WaitOrder => "wait-order",
        }
    }
    pub fn all() -> [Law; 6] {
        [
            Law::CountRange,
            Law::Arrivals,
            Law::TxBalance,
            Law::TxRange,
            Law::Parity,
            Law::WaitOrder,
        ]
    }
    /// The sentence a report prints for a proven law.
    pub fn statement(self) -> &'static str {
        match self {
            Law::CountRange => "the count is within 1..=2^20-1 in every phase, drops included",
            Law::Arrivals => "every phase a wait names gets exactly the expected arrivals (count minus drops); no phase gets more",
            Law::TxBalance => "in every phase the bytes expected equal the bytes landed",
            Law::TxRange => "no phase expects or lands more than 2^20-1 bytes; each expect is within 0..=2^20-1",
            Law::Parity => "each wait names the phase it needs (parities advance with the thread's phases)",
            Law::WaitOrder => "no wait needs an arrival that comes after the waiter's own later steps (alone or via one other role)",
        }
    }
    /// The explicit checker's kinds that a violation of this law shows up as.
    pub fn explicit_kinds(self) -> &'static [&'static str] {
        match self {
            Law::CountRange => &["count-range"],
            // More arrivals than a phase expects complete it early and spill into the next
            // phase; PTX sees those as arrivals on phase k+1 before any wait on phase k.
            Law::Arrivals => &["deadlock", "over-arrival", "count-range", "missing-wait"],
            // A phase nobody waits on with bytes still expected is pending when the CTA exits.
            Law::TxBalance => &["deadlock", "over-arrival", "tx-range", "lifetime"],
            Law::TxRange => &["tx-range"],
            // A wait that names an older phase passes at once: the thread's next arrival comes
            // before any wait observed the phase it belongs after (missing-wait).
            Law::Parity => &["stale-wait", "deadlock", "missing-wait"],
            Law::WaitOrder => &["deadlock"],
        }
    }
}

#[derive(Clone, Debug)]
pub enum Goal {
    /// Satisfiable: the law is violated.
    Violation(Law),
    /// Satisfiable: the encoding does not apply (the reason names the site).
    Obligation(Unsupported),
    /// An obligation whose model is also a run the law may fail in (an arrival that may fall
    /// into the thread's previous phase, its bytes in flight): when no law is refuted, it is
    /// handed to the explicit search as a counterexample of the law, and only its confirmation
    /// makes it a refutation.
    Suspect(Law, Unsupported),
}

#[derive(Clone, Debug)]
pub struct Query {
    pub goal: Goal,
    pub group: String,
    pub what: String,
    pub formula: B,
    /// Integer variables other than the symbols, with their domains already inside `formula`.
    pub spans: Vec<Span>,
    /// Values to print from a model: label and term.
    pub show: Vec<(String, T)>,
}

/// One occurrence of a site: its loop variable renamed for this query.
#[derive(Clone)]
struct Ev {
    /// The loop variable's value in this query (`L*Q + R`), when in a loop.
    iv: Option<T>,
    dom: B,
    idx: T,
    sub: BTreeMap<String, T>,
}

pub struct Encoder<'a> {
    pub s: &'a Summary,
    out: Vec<Query>,
    fresh: usize,
    /// The element variables and loop occurrences of the query being built, and of each query.
    cur: Ctx,
    ctxs: Vec<Ctx>,
    /// `fresh` when the stale query being built began (its chains have a budget).
    stale_from: usize,
    /// Whether the stale query being built credits waits of the previous iteration.
    stale_prev: bool,
}

/// Element variables (with the array length) and event occurrences (remainder variable, period,
/// the element variable the event's index must equal) of one query: enough to split the query
/// into cases where every division folds to a constant.
#[derive(Clone, Default)]
struct Ctx {
    ks: Vec<(String, i64)>,
    evs: Vec<(String, i64, Option<String>, T)>,
}

type R<X> = Result<X, Unsupported>;

fn un<X>(span: Span, why: impl Into<String>) -> R<X> {
    Err(Unsupported { span, why: why.into() })
}

fn ind(b: B) -> T {
    T::ite(b, int(1), int(0))
}

impl<'a> Encoder<'a> {
    /// The queries of every law, and the first law that could not be encoded (its reason):
    /// then the queries may refute the protocol, but it is not proved.
    pub fn queries(s: &'a Summary) -> R<(Vec<Query>, Option<Unsupported>)> {
        let mut e = Encoder {
            s,
            out: Vec::new(),
            fresh: 0,
            cur: Ctx::default(),
            ctxs: Vec::new(),
            stale_from: 0,
            stale_prev: true,
        };
        for g in &s.groups {
            e.obligations(g);
        }
        // The obligations show every truncating division's dividend non-negative; under them the
        // laws may read `/` and `%` as floor operators, which the counting formulas need.
        let fs = floorified(s);
        let mut l = Encoder {
            s: &fs,
            out: Vec::new(),
            fresh: e.fresh,
            cur: Ctx::default(),
            ctxs: Vec::new(),
            stale_from: 0,
            stale_prev: true,
        };
        let mut partial = None;
        for g in &fs.groups {
            if let Err(u) = l.group(g) {
                partial.get_or_insert(u);
            }
        }
        if let Err(u) = l.wait_order() {
            partial.get_or_insert(u);
        }
        let mut out = Vec::new();
        for (mut q, cx) in e.out.into_iter().zip(e.ctxs).chain(l.out.into_iter().zip(l.ctxs)) {
            q.formula = split_cases(&q.formula, &cx, s.symbols.is_empty());
            out.push(q);
        }
        Ok((out, partial))
    }

    /// The period of a loop segment: every division of the loop variable in it is exact
    /// in the quotient by this number.
    fn seg_period(c: &Class, seg: usize, var: &str) -> i64 {
        let mut p = 1;
        for s in c.sites.iter().filter(|s| s.seg == seg) {
            p = crate::sym::lcm(p, s.guard.period(var));
            p = crate::sym::lcm(p, s.index.period(var));
            let extra = match &s.kind {
                SiteKind::WaitParity { parity } => parity.period(var),
                SiteKind::Expect { bytes } | SiteKind::Land { bytes } => bytes.period(var),
                SiteKind::Arrive { n, .. } => n.period(var),
                SiteKind::WaitToken { .. } => 1,
            };
            p = crate::sym::lcm(p, extra);
        }
        p
    }

    /// A fresh occurrence of `site`. Its loop variable is written `L*Q + R` (0 <= R < L, L the
    /// segment's period), so that divisions by divisors of L reduce to divisions of the small R.
    fn ev(&mut self, c: &Class, site: &Site) -> Ev {
        self.fresh += 1;
        let mut sub = BTreeMap::new();
        let (iv, bounds) = match &c.segs[site.seg] {
            Some(l) => {
                let per = Self::seg_period(c, site.seg, &l.var).clamp(1, 4096);
                let qn = var(&format!("Q{}#{}", l.var, self.fresh));
                let rn = var(&format!("R{}#{}", l.var, self.fresh));
                let i = qn.mul(int(per)).add(rn.clone());
                sub.insert(l.var.clone(), i.clone());
                let b = B::and(vec![
                    rn.clone().cmp(Cmp::Ge, int(0)),
                    rn.cmp(Cmp::Lt, int(per)),
                    i.clone().cmp(Cmp::Ge, l.lo.clone()),
                    i.clone().cmp(Cmp::Lt, l.hi.clone()),
                ]);
                (Some(i), b)
            }
            None => (None, B::Const(true)),
        };
        let ev = Ev {
            iv,
            dom: B::and(vec![bounds, site.guard.subst(&sub)]),
            idx: site.index.subst(&sub),
            sub,
        };
        if let Some(l) = &c.segs[site.seg] {
            let per = Self::seg_period(c, site.seg, &l.var).clamp(1, 4096);
            self.cur.evs.push((format!("R{}#{}", l.var, self.fresh), per, None, ev.idx.clone()));
        }
        ev
    }

    /// An occurrence of `site` on element `k` (the caller states `idx == k` in the formula).
    fn ev_k(&mut self, c: &Class, site: &Site, k: &T) -> Ev {
        let ev = self.ev(c, site);
        if c.segs[site.seg].is_some() {
            if let (Some(last), T::Var(kn)) = (self.cur.evs.last_mut(), k) {
                last.2 = Some(kn.clone());
            }
        }
        ev
    }

    fn push_q(&mut self, q: Query) {
        self.out.push(q);
        self.ctxs.push(self.cur.clone());
    }

    fn reset(&mut self) {
        self.cur = Ctx::default();
    }

    /// Events of `site` on element `k` in iterations before `upto` (all, when `None`).
    fn count_site(&self, c: &Class, site: &Site, k: &T, upto: Option<&T>) -> R<T> {
        match &c.segs[site.seg] {
            None => Ok(ind(B::and(vec![site.guard.clone(), site.index.clone().eq(k.clone())]))),
            Some(l) => {
                let body = B::and(vec![site.guard.clone(), site.index.clone().eq(k.clone())]);
                let period = crate::sym::lcm(body.period(&l.var), 1);
                if period == 0 || period > 512 {
                    return un(
                        site.span,
                        format!("the divisions of the loop variable repeat every {period} iterations; prove handles periods up to 512"),
                    );
                }
                let mut total = int(0);
                for rho in 0..period {
                    let mut m = BTreeMap::new();
                    let i = var("q").mul(int(period)).add(int(rho));
                    m.insert(l.var.clone(), i.clone());
                    let mut parts = vec![i.clone().cmp(Cmp::Ge, l.lo.clone()), body.subst(&m)];
                    // `upto` is an iteration of this loop, so below `hi` already: leaving the
                    // second upper bound out keeps the count free of a min the solver must split.
                    match upto {
                        Some(u) => parts.push(i.cmp(Cmp::Lt, u.clone())),
                        None => parts.push(i.cmp(Cmp::Lt, l.hi.clone())),
                    }
                    match count(&B::and(parts), "q") {
                        Some(t) => total = total.add(t),
                        None => {
                            return un(
                                site.span,
                                "this statement's condition or index is not affine in the loop variable (after removing divisions by constants)",
                            )
                        }
                    }
                }
                Ok(total)
            }
        }
    }

    /// How many events of the sites selected by `pick` (same group) precede event `ev` of `t`.
    fn visit(&self, c: &Class, t: &Site, ev: &Ev, k: &T, pick: &dyn Fn(&Site) -> bool) -> R<T> {
        let mut total = int(0);
        for s in c.sites.iter().filter(|s| s.group == t.group && pick(s)) {
            if s.seg < t.seg {
                total = total.add(self.count_site(c, s, k, None)?);
            } else if s.seg == t.seg {
                if let Some(iv) = &ev.iv {
                    total = total.add(self.count_site(c, s, k, Some(iv))?);
                }
                if s.pos < t.pos {
                    total = total.add(ind(B::and(vec![s.guard.subst(&ev.sub), s.index.subst(&ev.sub).eq(k.clone())])));
                }
            }
        }
        Ok(total)
    }

    fn arrivals_of<'c>(c: &'c Class, g: &str) -> Vec<&'c Site> {
        c.sites
            .iter()
            .filter(|s| s.group == g && matches!(s.kind, SiteKind::Arrive { .. }))
            .collect()
    }

    /// Arrival events of the class on element k over the whole run.
    fn total_visits(&self, c: &Class, g: &str, k: &T) -> R<T> {
        let mut t = int(0);
        for s in Self::arrivals_of(c, g) {
            t = t.add(self.count_site(c, s, k, None)?);
        }
        Ok(t)
    }

    /// The arrivals phase `n` of element `k` receives, and the arrivals it expects.
    fn arrivals_expected(&self, g: &GroupInfo, k: &T, n: &T) -> R<(T, T)> {
        let mut got = int(0);
        let mut drops = int(0);
        for c in &self.s.classes {
            let arr = Self::arrivals_of(c, &g.name);
            if arr.is_empty() {
                continue;
            }
            let amount = match &arr[0].kind {
                SiteKind::Arrive { n, .. } => n.clone(),
                _ => unreachable!(),
            };
            let share = arr[0].share;
            if share != Share::All {
                // the elected lane's arrivals are its own rounds; the other lanes' waits would
                // name phases by another count
                if let Some(w) = c
                    .sites
                    .iter()
                    .find(|w| w.group == g.name && matches!(w.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. }))
                {
                    return un(
                        w.span,
                        format!(
                            "{} waits on `{}`, on which only some lanes of its warps (an elected block) arrive: prove names phases per thread",
                            c.label, g.name
                        ),
                    );
                }
            }
            for a in &arr {
                if a.share != share {
                    return un(
                        a.span,
                        format!(
                            "{} arrives on `{}` from all its lanes at one statement and from an elected block at another; prove needs one count per role",
                            c.label, g.name
                        ),
                    );
                }
                if let SiteKind::Arrive { n, .. } = &a.kind {
                    if *n != amount {
                        return un(
                            a.span,
                            format!(
                                "{} arrives on `{}` with different counts at different statements; prove needs one count per role",
                                c.label, g.name
                            ),
                        );
                    }
                    if c.segs[a.seg].as_ref().is_some_and(|l| n.mentions(&l.var)) {
                        return un(a.span, "an arrival count that changes with the loop variable");
                    }
                }
            }
            let v = self.total_visits(c, &g.name, k)?;
            got = got.add(T::ite(n.clone().cmp(Cmp::Lt, v.clone()), site_mult(c, arr[0]).mul(amount), int(0)));
            for d in arr.iter().filter(|s| matches!(s.kind, SiteKind::Arrive { drop: true, .. })) {
                if arr.iter().any(|a| a.pos > d.pos) {
                    return un(d.span, "an arrival after arrive_and_drop on the same barrier");
                }
                let happened = B::and(vec![d.guard.clone(), d.index.clone().eq(k.clone())]);
                drops = drops.add(T::ite(
                    B::and(vec![happened, v.clone().sub(int(1)).cmp(Cmp::Lt, n.clone())]),
                    site_mult(c, d),
                    int(0),
                ));
            }
        }
        Ok((got, g.count.clone().sub(drops)))
    }

    fn kvar(&mut self, g: &GroupInfo) -> (T, B) {
        self.fresh += 1;
        let k = var(&format!("k#{}", self.fresh));
        self.cur.ks.push((format!("k#{}", self.fresh), g.len));
        let dom = B::and(vec![k.clone().cmp(Cmp::Ge, int(0)), k.clone().cmp(Cmp::Lt, int(g.len))]);
        (k, dom)
    }

    /// The phase a wait event names, under the round discipline, once the parity law holds.
    fn named(&self, c: &Class, w: &Site, ev: &Ev, k: &T) -> R<T> {
        Ok(match &w.kind {
            SiteKind::WaitToken { arrive } => {
                let a = &c.sites[*arrive];
                self.visit(c, a, ev, k, &|s| matches!(s.kind, SiteKind::Arrive { .. }))?
            }
            SiteKind::WaitParity { parity } => {
                let p = parity.subst(&ev.sub);
                if Self::arrivals_of(c, &w.group).is_empty() {
                    let j = self.visit(c, w, ev, k, &|s| matches!(s.kind, SiteKind::WaitParity { .. }))?;
                    j.clone().sub(p.add(j).fmod(2))
                } else {
                    self.visit(c, w, ev, k, &|s| matches!(s.kind, SiteKind::Arrive { .. }))?.sub(int(1))
                }
            }
            _ => unreachable!(),
        })
    }

    fn group(&mut self, g: &GroupInfo) -> R<()> {
        let gname = g.name.clone();
        // count-range of the declaration
        self.reset();
        self.push_q(Query {
            goal: Goal::Violation(Law::CountRange),
            group: gname.clone(),
            what: format!("`{}` is declared with a count outside 1..=2^20-1", g.name),
            formula: B::or(vec![
                g.count.clone().cmp(Cmp::Lt, int(1)),
                g.count.clone().cmp(Cmp::Gt, int(MAX_COUNT)),
            ]),
            spans: vec![g.span],
            show: vec![("count".into(), g.count.clone())],
        });
        // each law on its own: one that cannot be encoded here leaves the others' queries,
        // which can still refute (the answer is then never `proved`)
        let mut first = None;
        if let Err(u) = self.arrival_laws(g) {
            first.get_or_insert(u);
        }
        if let Err(u) = self.parity(g) {
            first.get_or_insert(u);
        }
        if let Err(u) = self.tx(g) {
            first.get_or_insert(u);
        }
        first.map_or(Ok(()), Err)
    }

    /// Indices within the array, truncating divisions of non-negative values only.
    fn obligations(&mut self, g: &GroupInfo) {
        let s = self.s;
        let gname = g.name.clone();
        for c in &s.classes {
            for site in c.sites.iter().filter(|x| x.group == g.name) {
                self.reset();
                let ev = self.ev(c, site);
                self.push_q(Query {
                    goal: Goal::Obligation(Unsupported {
                        span: site.span,
                        why: format!(
                            "the index may fall outside `{}`'s {} elements; only the explicit search reports that",
                            g.name, g.len
                        ),
                    }),
                    group: gname.clone(),
                    what: String::new(),
                    formula: B::and(vec![
                        ev.dom.clone(),
                        B::or(vec![ev.idx.clone().cmp(Cmp::Lt, int(0)), ev.idx.clone().cmp(Cmp::Ge, int(g.len))]),
                    ]),
                    spans: vec![site.span],
                    show: vec![],
                });
                if let Some(l) = &c.segs[site.seg] {
                    let mut divs = Vec::new();
                    site.guard.trunc_dividends(&l.var, &mut divs);
                    site.index.trunc_dividends(&l.var, &mut divs);
                    match &site.kind {
                        SiteKind::WaitParity { parity: t }
                        | SiteKind::Expect { bytes: t }
                        | SiteKind::Land { bytes: t }
                        | SiteKind::Arrive { n: t, .. } => t.trunc_dividends(&l.var, &mut divs),
                        SiteKind::WaitToken { .. } => {}
                    }
                    for d in divs {
                        self.push_q(Query {
                            goal: Goal::Obligation(Unsupported {
                                span: site.span,
                                why: "a value divided here may be negative; prove reads `/` and `%` of non-negative values only".into(),
                            }),
                            group: gname.clone(),
                            what: String::new(),
                            formula: B::and(vec![ev.dom.clone(), d.subst(&ev.sub).cmp(Cmp::Lt, int(0))]),
                            spans: vec![site.span],
                            show: vec![],
                        });
                    }
                }
            }
        }
    }

    fn arrival_laws(&mut self, g: &GroupInfo) -> R<()> {
        let s = self.s;
        let gname = g.name.clone();
        for c in &s.classes {
            for w in c.sites.iter().filter(|x| x.group == g.name) {
                if !matches!(w.kind, SiteKind::WaitToken { .. } | SiteKind::WaitParity { .. }) {
                    continue;
                }
                self.reset();
                let (k, kd) = self.kvar(g);
                let ev = self.ev_k(c, w, &k);
                let n = self.named(c, w, &ev, &k)?;
                let (got, exp) = self.arrivals_expected(g, &k, &n)?;
                self.push_q(Query {
                    goal: Goal::Violation(Law::Arrivals),
                    group: gname.clone(),
                    what: format!(
                        "{} waits on a phase of `{}` that does not get the expected arrivals",
                        c.label, g.name
                    ),
                    formula: B::and(vec![
                        kd,
                        ev.dom.clone(),
                        ev.idx.clone().eq(k.clone()),
                        n.clone().cmp(Cmp::Ge, int(0)),
                        got.clone().cmp(Cmp::Ne, exp.clone()),
                    ]),
                    spans: vec![w.span],
                    show: vec![
                        ("element".into(), k),
                        ("phase".into(), n),
                        ("arrivals".into(), got),
                        ("expected".into(), exp),
                    ],
                });
            }
        }
        self.reset();
        let (k, kd) = self.kvar(g);
        self.fresh += 1;
        let n = var(&format!("n#{}", self.fresh));
        let (got, exp) = self.arrivals_expected(g, &k, &n)?;
        let arrive_spans: Vec<Span> = s
            .classes
            .iter()
            .flat_map(|c| Self::arrivals_of(c, &g.name).into_iter().map(|a| a.span))
            .collect();
        self.push_q(Query {
            goal: Goal::Violation(Law::Arrivals),
            group: gname.clone(),
            what: format!("a phase of `{}` gets more arrivals than it expects", g.name),
            formula: B::and(vec![
                kd.clone(),
                n.clone().cmp(Cmp::Ge, int(0)),
                got.clone().cmp(Cmp::Gt, int(0)),
                got.clone().cmp(Cmp::Gt, exp.clone()),
            ]),
            spans: arrive_spans.clone(),
            show: vec![
                ("element".into(), k.clone()),
                ("phase".into(), n.clone()),
                ("arrivals".into(), got.clone()),
                ("expected".into(), exp.clone()),
            ],
        });
        self.push_q(Query {
            goal: Goal::Violation(Law::CountRange),
            group: gname.clone(),
            what: format!("drops take the expected count of `{}` below 1", g.name),
            formula: B::and(vec![kd, n.clone().cmp(Cmp::Ge, int(0)), exp.clone().cmp(Cmp::Lt, int(1))]),
            spans: arrive_spans,
            show: vec![("element".into(), k), ("phase".into(), n), ("expected".into(), exp)],
        });
        Ok(())
    }

    fn parity(&mut self, g: &GroupInfo) -> R<()> {
        for c in &self.s.classes {
            let waits: Vec<&Site> = c
                .sites
                .iter()
                .filter(|x| x.group == g.name && matches!(x.kind, SiteKind::WaitParity { .. }))
                .collect();
            if waits.is_empty() {
                continue;
            }
            // Stale waits: the wait names phase n; if phase n+1 can complete while this thread
            // has not passed the wait, the barrier can be two phases ahead when it waits.
            if Self::arrivals_of(c, &g.name).is_empty() {
                for w in &waits {
                    self.stale(g, c, w)?;
                }
            }
            let arrives = !Self::arrivals_of(c, &g.name).is_empty();
            if arrives {
                for w in &waits {
                    self.reset();
                    let (k, kd) = self.kvar(g);
                    let ev = self.ev_k(c, w, &k);
                    let a = self.visit(c, w, &ev, &k, &|s| matches!(s.kind, SiteKind::Arrive { .. }))?;
                    let p = match &w.kind {
                        SiteKind::WaitParity { parity } => parity.subst(&ev.sub),
                        _ => unreachable!(),
                    };
                    let base = B::and(vec![kd, ev.dom.clone(), ev.idx.clone().eq(k.clone())]);
                    self.push_q(Query {
                        goal: Goal::Obligation(Unsupported {
                            span: w.span,
                            why: format!(
                                "{} waits on `{}` by parity before its first arrival there, and also arrives on it",
                                c.label, g.name
                            ),
                        }),
                        group: g.name.clone(),
                        what: String::new(),
                        formula: B::and(vec![base.clone(), a.clone().eq(int(0))]),
                        spans: vec![w.span],
                        show: vec![],
                    });
                    self.push_q(Query {
                        goal: Goal::Violation(Law::Parity),
                        group: g.name.clone(),
                        what: format!("{} waits with a parity other than that of the phase it arrived on", c.label),
                        formula: B::and(vec![
                            base,
                            a.clone().cmp(Cmp::Ge, int(1)),
                            p.clone().sub(a.clone()).add(int(1)).fmod(2).cmp(Cmp::Ne, int(0)),
                        ]),
                        spans: vec![w.span],
                        show: vec![
                            ("element".into(), k),
                            ("phase arrived on".into(), a.sub(int(1))),
                            ("parity".into(), p),
                        ],
                    });
                }
                continue;
            }
            for (x, w1) in waits.iter().enumerate() {
                for w2 in &waits[x..] {
                    if w1.pos == w2.pos && c.segs[w1.seg].is_none() {
                        continue;
                    }
                    self.reset();
                    let (k, kd) = self.kvar(g);
                    let e1 = self.ev_k(c, w1, &k);
                    let e2 = self.ev_k(c, w2, &k);
                    let j1 = self.visit(c, w1, &e1, &k, &|s| matches!(s.kind, SiteKind::WaitParity { .. }))?;
                    let j2 = self.visit(c, w2, &e2, &k, &|s| matches!(s.kind, SiteKind::WaitParity { .. }))?;
                    let p = |w: &Site, e: &Ev| match &w.kind {
                        SiteKind::WaitParity { parity } => parity.subst(&e.sub),
                        _ => unreachable!(),
                    };
                    let (p1, p2) = (p(w1, &e1), p(w2, &e2));
                    let drift = p1.clone().add(j1.clone()).sub(p2.clone()).sub(j2.clone()).fmod(2);
                    self.push_q(Query {
                        goal: Goal::Violation(Law::Parity),
                        group: g.name.clone(),
                        what: format!("{}'s parity waits on `{}` do not follow its phases: two of them name the same parity for different phases (or different parities for consecutive ones)", c.label, g.name),
                        formula: B::and(vec![
                            kd,
                            e1.dom.clone(),
                            e2.dom.clone(),
                            e1.idx.clone().eq(k.clone()),
                            e2.idx.clone().eq(k.clone()),
                            drift.cmp(Cmp::Ne, int(0)),
                        ]),
                        spans: vec![w1.span, w2.span],
                        show: vec![("element".into(), k), ("wait number".into(), j1), ("parity".into(), p1), ("other wait number".into(), j2), ("other parity".into(), p2)],
                    });
                }
            }
        }
        Ok(())
    }

    /// `e1` (of site s1) comes strictly before `e2` (of s2) in the class's program order.
    fn before(c: &Class, s1: &Site, e1: &Ev, s2: &Site, e2: &Ev) -> B {
        if s1.seg != s2.seg {
            return B::Const(s1.seg < s2.seg);
        }
        match (&c.segs[s1.seg], &e1.iv, &e2.iv) {
            (Some(_), Some(i1), Some(i2)) => B::or(vec![
                i1.clone().cmp(Cmp::Lt, i2.clone()),
                B::and(vec![i1.clone().eq(i2.clone()), B::Const(s1.pos < s2.pos)]),
            ]),
            _ => B::Const(s1.pos < s2.pos),
        }
    }

    fn wait_order(&mut self) -> R<()> {
        let s = self.s;
        let is_wait = |x: &Site| matches!(x.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. });
        let is_arr = |x: &Site| matches!(x.kind, SiteKind::Arrive { .. });
        let group = |n: &str| s.groups.iter().find(|g| g.name == n).unwrap();
        for c in &s.classes {
            for w1 in c.sites.iter().filter(|x| is_wait(x)) {
                // a wait on a phase this class arrives on only later
                for a1 in c.sites.iter().filter(|x| is_arr(x) && x.group == w1.group) {
                    if a1.seg < w1.seg || (a1.seg == w1.seg && c.segs[a1.seg].is_none() && a1.pos < w1.pos) {
                        continue;
                    }
                    self.reset();
                    let (k, kd) = self.kvar(group(&w1.group));
                    let ew = self.ev_k(c, w1, &k);
                    let ea = self.ev_k(c, a1, &k);
                    let n = self.named(c, w1, &ew, &k)?;
                    let va = self.visit(c, a1, &ea, &k, &|x| is_arr(x))?;
                    self.push_q(Query {
                        goal: Goal::Violation(Law::WaitOrder),
                        group: w1.group.clone(),
                        what: format!("{} waits on a phase of `{}` that needs its own later arrival", c.label, w1.group),
                        formula: B::and(vec![
                            kd,
                            ew.dom.clone(),
                            ea.dom.clone(),
                            ew.idx.clone().eq(k.clone()),
                            ea.idx.clone().eq(k.clone()),
                            n.clone().cmp(Cmp::Ge, int(0)),
                            va.eq(n.clone()),
                            Self::before(c, w1, &ew, a1, &ea),
                        ]),
                        spans: vec![w1.span, a1.span],
                        show: vec![("element".into(), k), ("phase".into(), n)],
                    });
                }
                // through one other class
                for c2 in s.classes.iter().filter(|c2| c2.label != c.label) {
                    for a2 in c2.sites.iter().filter(|x| is_arr(x) && x.group == w1.group) {
                        for w2 in c2.sites.iter().filter(|x| is_wait(x)) {
                            if w2.seg > a2.seg || (w2.seg == a2.seg && c2.segs[w2.seg].is_none() && w2.pos > a2.pos) {
                                continue;
                            }
                            for a1 in c.sites.iter().filter(|x| is_arr(x) && x.group == w2.group) {
                                if a1.seg < w1.seg || (a1.seg == w1.seg && c.segs[a1.seg].is_none() && a1.pos < w1.pos) {
                                    continue;
                                }
                                self.reset();
                                let (k1, kd1) = self.kvar(group(&w1.group));
                                let (k2, kd2) = self.kvar(group(&w2.group));
                                let ew1 = self.ev_k(c, w1, &k1);
                                let ea2 = self.ev_k(c2, a2, &k1);
                                let ew2 = self.ev_k(c2, w2, &k2);
                                let ea1 = self.ev_k(c, a1, &k2);
                                let n1 = self.named(c, w1, &ew1, &k1)?;
                                let v2 = self.visit(c2, a2, &ea2, &k1, &|x| is_arr(x))?;
                                let n2 = self.named(c2, w2, &ew2, &k2)?;
                                let v1 = self.visit(c, a1, &ea1, &k2, &|x| is_arr(x))?;
                                self.push_q(Query {
                                    goal: Goal::Violation(Law::WaitOrder),
                                    group: w1.group.clone(),
                                    what: format!(
                                        "{} waits on `{}` for an arrival of {} that comes after {}'s wait on `{}`, which needs a later arrival of {}",
                                        c.label, w1.group, c2.label, c2.label, w2.group, c.label
                                    ),
                                    formula: B::and(vec![
                                        kd1,
                                        kd2,
                                        ew1.dom.clone(),
                                        ea2.dom.clone(),
                                        ew2.dom.clone(),
                                        ea1.dom.clone(),
                                        ew1.idx.clone().eq(k1.clone()),
                                        ea2.idx.clone().eq(k1.clone()),
                                        ew2.idx.clone().eq(k2.clone()),
                                        ea1.idx.clone().eq(k2.clone()),
                                        n1.clone().cmp(Cmp::Ge, int(0)),
                                        v2.eq(n1.clone()),
                                        n2.clone().cmp(Cmp::Ge, int(0)),
                                        v1.eq(n2.clone()),
                                        Self::before(c2, w2, &ew2, a2, &ea2),
                                        Self::before(c, w1, &ew1, a1, &ea1),
                                    ]),
                                    spans: vec![w1.span, a2.span, w2.span, a1.span],
                                    show: vec![
                                        (format!("{} element", w1.group), k1),
                                        (format!("{} phase", w1.group), n1),
                                        (format!("{} element", w2.group), k2),
                                        (format!("{} phase", w2.group), n2),
                                    ],
                                });
                            }
                        }
                    }
                    self.wait_order_bytes(c, w1, c2)?;
                }
            }
        }
        Ok(())
    }

    /// A phase needs its bytes as it needs its arrivals: `w1` (of `c`) waits on a phase whose
    /// bytes `c2` lands after a wait that needs a later arrival of `c`. A landing in a loop
    /// iteration belongs to the round of `c2`'s arrival in that iteration; outside loops (where
    /// `c2` arrives only outside loops) to the round of the arrival before it or after it, as
    /// the tx rule attributes it; elsewhere every phase is taken as needing it (an
    /// over-approximation: a refutation the explicit search does not confirm reads `unknown`).
    fn wait_order_bytes(&mut self, c: &Class, w1: &Site, c2: &Class) -> R<()> {
        let s = self.s;
        let is_wait = |x: &Site| matches!(x.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. });
        let is_arr = |x: &Site| matches!(x.kind, SiteKind::Arrive { .. });
        let group = |n: &str| s.groups.iter().find(|g| g.name == n).unwrap();
        for l2 in c2
            .sites
            .iter()
            .filter(|x| matches!(x.kind, SiteKind::Land { .. }) && x.group == w1.group)
        {
            let round_arrival: Vec<&Site> = c2
                .sites
                .iter()
                .filter(|x| is_arr(x) && x.group == w1.group && x.seg == l2.seg)
                .collect();
            let paired = c2.segs[l2.seg].is_some() && round_arrival.len() == 1;
            let top_rounds = c2.segs[l2.seg].is_none()
                && c2.sites.iter().any(|x| is_arr(x) && x.group == w1.group)
                && c2
                    .sites
                    .iter()
                    .all(|x| !(is_arr(x) && x.group == w1.group) || c2.segs[x.seg].is_none());
            for w2 in c2.sites.iter().filter(|x| is_wait(x)) {
                if w2.seg > l2.seg || (w2.seg == l2.seg && c2.segs[w2.seg].is_none() && w2.pos > l2.pos) {
                    continue;
                }
                for a1 in c.sites.iter().filter(|x| is_arr(x) && x.group == w2.group) {
                    if a1.seg < w1.seg || (a1.seg == w1.seg && c.segs[a1.seg].is_none() && a1.pos < w1.pos) {
                        continue;
                    }
                    self.reset();
                    let (k1, kd1) = self.kvar(group(&w1.group));
                    let (k2, kd2) = self.kvar(group(&w2.group));
                    let ew1 = self.ev_k(c, w1, &k1);
                    let el2 = self.ev_k(c2, l2, &k1);
                    let ew2 = self.ev_k(c2, w2, &k2);
                    let ea1 = self.ev_k(c, a1, &k2);
                    let n1 = self.named(c, w1, &ew1, &k1)?;
                    let n2 = self.named(c2, w2, &ew2, &k2)?;
                    let v1 = self.visit(c, a1, &ea1, &k2, &|x| is_arr(x))?;
                    let mut parts = vec![
                        kd1,
                        kd2,
                        ew1.dom.clone(),
                        el2.dom.clone(),
                        ew2.dom.clone(),
                        ea1.dom.clone(),
                        ew1.idx.clone().eq(k1.clone()),
                        el2.idx.clone().eq(k1.clone()),
                        ew2.idx.clone().eq(k2.clone()),
                        ea1.idx.clone().eq(k2.clone()),
                        n1.clone().cmp(Cmp::Ge, int(0)),
                        n2.clone().cmp(Cmp::Ge, int(0)),
                        v1.eq(n2.clone()),
                        Self::before(c2, w2, &ew2, l2, &el2),
                        Self::before(c, w1, &ew1, a1, &ea1),
                    ];
                    if paired {
                        let a2 = round_arrival[0];
                        let ea2 = self.ev_k(c2, a2, &k1);
                        let v2 = self.visit(c2, a2, &ea2, &k1, &|x| is_arr(x))?;
                        parts.push(ea2.dom.clone());
                        if let (Some(x), Some(y)) = (&ea2.iv, &el2.iv) {
                            parts.push(x.clone().eq(y.clone()));
                        }
                        parts.push(v2.eq(n1.clone()));
                    } else if top_rounds {
                        // outside loops the tx rule gives the landing the round of the
                        // arrival before it, or of the next one (a wait in between): either
                        let r = self.visit(c2, l2, &el2, &k1, &|x| is_arr(x))?;
                        parts.push(B::or(vec![n1.clone().eq(r.clone().sub(int(1))), n1.clone().eq(r)]));
                    }
                    self.push_q(Query {
                        goal: Goal::Violation(Law::WaitOrder),
                        group: w1.group.clone(),
                        what: format!(
                            "{} waits on `{}` for bytes {} lands after its wait on `{}`, which needs a later arrival of {}",
                            c.label, w1.group, c2.label, w2.group, c.label
                        ),
                        formula: B::and(parts),
                        spans: vec![w1.span, l2.span, w2.span, a1.span],
                        show: vec![
                            (format!("{} element", w1.group), k1),
                            (format!("{} phase", w1.group), n1),
                            (format!("{} element", w2.group), k2),
                            (format!("{} phase", w2.group), n2),
                        ],
                    });
                }
            }
        }
        Ok(())
    }
}

/// Sites that no thread runs both of: the elected lane's block and the other lanes'.
fn disjoint(a: Share, b: Share) -> bool {
    matches!((a, b), (Share::Elected, Share::Others) | (Share::Others, Share::Elected))
}

/// How many threads of the class run the site: all, one lane per warp (an elected block), or
/// the others.
fn site_mult(c: &Class, s: &Site) -> T {
    let warps = || c.warps.clone().expect("elected sites exist only in classes of whole warps");
    match s.share {
        Share::All => c.mult.clone(),
        Share::Elected => warps(),
        Share::Others => c.mult.clone().sub(warps()),
    }
}

/// The summary with every truncating division of a loop variable read as floor division.
fn floorified(s: &Summary) -> Summary {
    let mut out = s.clone();
    for c in out.classes.iter_mut() {
        let vars: Vec<String> = c.segs.iter().flatten().map(|l| l.var.clone()).collect();
        for site in c.sites.iter_mut() {
            site.guard = site.guard.floorify(&vars);
            site.index = site.index.floorify(&vars);
            site.kind = match &site.kind {
                SiteKind::Arrive { n, drop } => SiteKind::Arrive {
                    n: n.floorify(&vars),
                    drop: *drop,
                },
                SiteKind::WaitParity { parity } => SiteKind::WaitParity {
                    parity: parity.floorify(&vars),
                },
                SiteKind::Expect { bytes } => SiteKind::Expect {
                    bytes: bytes.floorify(&vars),
                },
                SiteKind::Land { bytes } => SiteKind::Land {
                    bytes: bytes.floorify(&vars),
                },
                k => k.clone(),
            };
        }
    }
    out
}

/// Split a query into cases, one per value of each element variable and of each occurrence's
/// remainder `R` (pruned where the occurrence's index cannot equal its element). In each case
/// every division of a loop variable folds to a constant plus a multiple of `Q`, which leaves Z3
/// linear arithmetic without divisions. Left whole when the cases would be too many.
fn split_cases(f: &B, cx: &Ctx, concrete: bool) -> B {
    // A remainder is only a way of writing a loop variable: it lies in 0..L wherever it occurs,
    // also under a negation (where a free one could switch an occurrence off).
    let bounds: Vec<B> = cx
        .evs
        .iter()
        .flat_map(|(r, per, _, _)| [var(r).cmp(Cmp::Ge, int(0)), var(r).cmp(Cmp::Lt, int(*per))])
        .collect();
    let whole = || B::and(std::iter::once(f.clone()).chain(bounds.iter().cloned()).collect());
    // at declared values the cases together may hold about a million nodes (a stale query with
    // its chains is split less, left whole beyond); with ranged parameters as solver variables
    // a query left whole can defeat the solver's arithmetic, so those keep the full split
    let max: usize = if concrete {
        (1_000_000 / formula_size(f).max(1)).clamp(16, MAX_CASES)
    } else {
        MAX_CASES
    };
    let mut cases: Vec<(BTreeMap<String, T>, Vec<B>)> = vec![(BTreeMap::new(), vec![])];
    for (k, len) in &cx.ks {
        let mut next = Vec::new();
        for (m, eqs) in &cases {
            for v in 0..*len {
                let mut m2 = m.clone();
                m2.insert(k.clone(), int(v));
                let mut e2 = eqs.clone();
                e2.push(var(k).eq(int(v)));
                next.push((m2, e2));
            }
        }
        if next.len() > max {
            return whole();
        }
        cases = next;
    }
    for (r, per, tie, idx) in &cx.evs {
        let mut next = Vec::new();
        for (m, eqs) in &cases {
            for v in 0..*per {
                let mut m2 = m.clone();
                m2.insert(r.clone(), int(v));
                if let Some(k) = tie {
                    if let Some(kv) = m2.get(k).cloned() {
                        if idx.subst(&m2).eq(kv) == B::Const(false) {
                            continue;
                        }
                    }
                }
                let mut e2 = eqs.clone();
                e2.push(var(r).eq(int(v)));
                next.push((m2, e2));
            }
        }
        if next.len() > max {
            return whole();
        }
        cases = next;
    }
    if cases.len() <= 1 && cx.ks.is_empty() && cx.evs.is_empty() {
        return f.clone();
    }
    B::or(
        cases
            .into_iter()
            .filter_map(|(m, mut eqs)| {
                let g = f.subst(&m);
                if g == B::Const(false) {
                    return None;
                }
                eqs.push(g);
                Some(B::and(eqs))
            })
            .collect(),
    )
}

/// The most cases `split_cases` makes of one query; beyond, the query is left whole.
const MAX_CASES: usize = 20_000;

/// The nodes of a formula (terms included): what one case of `split_cases` costs.
fn formula_size(f: &B) -> usize {
    fn t(x: &T) -> usize {
        1 + match x {
            T::Int(_) | T::Var(_) => 0,
            T::Add(v) => v.iter().map(t).sum(),
            T::Mul(a, b) => t(a) + t(b),
            T::Div(a, _) | T::Mod(a, _) | T::FDiv(a, _) | T::FMod(a, _) => t(a),
            T::Ite(c, a, b) => formula_size(c) + t(a) + t(b),
        }
    }
    1 + match f {
        B::Const(_) => 0,
        B::Cmp(_, a, b) => t(a) + t(b),
        B::And(v) | B::Or(v) => v.iter().map(formula_size).sum(),
        B::Not(b) => formula_size(b),
    }
}
