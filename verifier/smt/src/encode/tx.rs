//! The tx laws: bytes expected against bytes landed per phase, and the tx-count's range. Bytes
//! are attributed to phases within the one role that expects and lands them.

use super::*;

/// The bytes one class expects and lands in one top-level round of one element, all its
/// threads together, and whether the round is the only one the class makes there.
pub(super) struct Round {
    class: String,
    element: i64,
    round: usize,
    exp: T,
    land: T,
    spans: Vec<Span>,
    one_arrival: bool,
    expects_before_arrival: bool,
}

impl<'a> Encoder<'a> {
    pub(super) fn tx(&mut self, g: &GroupInfo) -> R<()> {
        let is_tx = |s: &Site| s.group == g.name && matches!(s.kind, SiteKind::Expect { .. } | SiteKind::Land { .. });
        let with_tx: Vec<&Class> = self.s.classes.iter().filter(|c| c.sites.iter().any(is_tx)).collect();
        if with_tx.len() > 1 {
            return self.tx_per_class(g, &with_tx);
        }
        let Some(c) = with_tx.first().copied() else { return Ok(()) };
        self.tx_class(g, c, None)
    }

    /// Bytes of one barrier from several classes (threads of a role that reads its identity,
    /// each issuing its own `memcpy_async`, or several roles): each class must balance its own
    /// bytes in each of its rounds, which makes every phase balance (a class of several
    /// identical threads is the same case, its threads interleaving as classes do). Bytes one
    /// class expects and another lands (a multicast landing in a peer CTA) fail that test: a
    /// refutation the explicit search then confirms or not, never a proof. Only top-level
    /// rounds on constant elements; the outstanding bytes of a phase are summed over classes.
    fn tx_per_class(&mut self, g: &GroupInfo, classes: &[&Class]) -> R<()> {
        let mut rounds: Vec<Round> = Vec::new();
        for c in classes {
            self.tx_class(g, c, Some(&mut rounds))?;
        }
        // One round everywhere (each class arrives at most once on the element, every expect
        // comes before its thread's arrival): the phase completes only once every arrival, so
        // every expect, is in and the tx-count is 0, so all bytes land in that phase whoever
        // lands them, and the sum over classes is the law. Otherwise each class balances alone.
        let single = rounds.iter().all(|x| x.round == 0 && x.one_arrival && x.expects_before_arrival);
        let mut keys: Vec<(i64, usize)> = rounds.iter().map(|x| (x.element, x.round)).collect();
        keys.sort();
        keys.dedup();
        let max = int(MAX_COUNT);
        for (k, r) in keys {
            let on: Vec<&Round> = rounds.iter().filter(|x| x.element == k && x.round == r).collect();
            let exp = T::sum(on.iter().map(|x| x.exp.clone()));
            let land = T::sum(on.iter().map(|x| x.land.clone()));
            let spans: Vec<Span> = on.iter().flat_map(|x| x.spans.clone()).collect();
            let show = vec![
                ("element".into(), int(k)),
                ("phase".into(), int(r as i64)),
                ("bytes expected".into(), exp.clone()),
                ("bytes landed".into(), land.clone()),
            ];
            self.reset();
            if single {
                self.push_q(Query {
                    goal: Goal::Violation(Law::TxBalance),
                    group: g.name.clone(),
                    what: format!(
                        "a phase of `{}` expects a different number of bytes than land in it (over the roles that expect or land them)",
                        g.name
                    ),
                    formula: exp.clone().cmp(Cmp::Ne, land.clone()),
                    spans: spans.clone(),
                    show: show.clone(),
                });
            } else {
                for x in &on {
                    self.push_q(Query {
                        goal: Goal::Violation(Law::TxBalance),
                        group: g.name.clone(),
                        what: format!("{} expects a different number of bytes in a phase of `{}` than it lands there (bytes of several roles must balance per role)", x.class, g.name),
                        formula: x.exp.clone().cmp(Cmp::Ne, x.land.clone()),
                        spans: x.spans.clone(),
                        show: show.clone(),
                    });
                }
            }
            self.push_q(Query {
                goal: Goal::Violation(Law::TxRange),
                group: g.name.clone(),
                what: format!(
                    "a phase of `{}` has more than 2^20-1 bytes outstanding (over the roles that expect or land them)",
                    g.name
                ),
                formula: B::or(vec![exp.clone().cmp(Cmp::Gt, max.clone()), land.clone().cmp(Cmp::Gt, max.clone())]),
                spans,
                show,
            });
        }
        Ok(())
    }

    /// The tx laws of one class; with `rounds`, also the bytes of each of its top-level rounds
    /// (element, round, bytes expected and landed by all its threads) for the sum over classes.
    fn tx_class(&mut self, g: &GroupInfo, c: &Class, mut rounds_out: Option<&mut Vec<Round>>) -> R<()> {
        let is_tx = |s: &Site| s.group == g.name && matches!(s.kind, SiteKind::Expect { .. } | SiteKind::Land { .. });
        // bytes are compared per thread: every tx statement and arrival of the role on the
        // barrier must run on the same lanes (all, or the elected one of each warp)
        let on_g: Vec<&Site> = c
            .sites
            .iter()
            .filter(|s| is_tx(s) || (s.group == g.name && matches!(s.kind, SiteKind::Arrive { .. })))
            .collect();
        let share = on_g[0].share;
        if let Some(x) = on_g.iter().find(|x| x.share != share) {
            return un(
                x.span,
                format!(
                    "{} expects, lands or arrives on `{}` from an elected block at one statement and from all its lanes at another: prove compares bytes per thread",
                    c.label, g.name
                ),
            );
        }
        let mult = site_mult(c, on_g[0]);
        let max = int(MAX_COUNT);
        let signed = |s: &Site, sub: &BTreeMap<String, T>| match &s.kind {
            SiteKind::Expect { bytes } => (bytes.subst(sub), true),
            SiteKind::Land { bytes } => (bytes.subst(sub), false),
            _ => unreachable!(),
        };
        // every single expect within 0..=MAX
        for x in c.sites.iter().filter(|s| is_tx(s) && matches!(s.kind, SiteKind::Expect { .. })) {
            self.reset();
            let ev = self.ev(c, x);
            let (b, _) = signed(x, &ev.sub);
            self.push_q(Query {
                goal: Goal::Violation(Law::TxRange),
                group: g.name.clone(),
                what: format!("{} expects a byte count outside 0..=2^20-1 on `{}`", c.label, g.name),
                formula: B::and(vec![
                    ev.dom.clone(),
                    B::or(vec![b.clone().cmp(Cmp::Lt, int(0)), b.clone().cmp(Cmp::Gt, max.clone())]),
                ]),
                spans: vec![x.span],
                show: vec![("bytes".into(), b)],
            });
        }
        let arr = Self::arrivals_of(c, &g.name);
        let loop_arrivals = arr.iter().any(|a| c.segs[a.seg].is_some());
        if loop_arrivals && rounds_out.is_some() {
            let sp = c.sites.iter().find(|s| is_tx(s)).unwrap().span;
            return un(
                sp,
                format!("bytes of `{}` are expected or landed by more than one role, one of which arrives in a loop; prove attributes such bytes to phases only outside loops", g.name),
            );
        }
        if loop_arrivals {
            // every tx statement lives in a loop iteration together with exactly one arrival
            let segs: Vec<usize> = {
                let mut v: Vec<usize> = c.sites.iter().filter(|s| is_tx(s)).map(|s| s.seg).collect();
                v.dedup();
                v
            };
            for seg in segs {
                let xs: Vec<&Site> = c.sites.iter().filter(|s| is_tx(s) && s.seg == seg).collect();
                let arrs: Vec<&&Site> = arr.iter().filter(|a| a.seg == seg).collect();
                if arrs.len() != 1 {
                    return un(
                        xs[0].span,
                        format!(
                            "bytes of `{}` outside a loop iteration with exactly one arrival on it, while the role arrives in a loop",
                            g.name
                        ),
                    );
                }
                let a = *arrs[0];
                self.arrival_after_phase(g, c, a)?;
                self.reset();
                let (k, kd) = self.kvar(g);
                let ev = self.ev_k(c, a, &k);
                let arrive_here = B::and(vec![ev.dom.clone(), ev.idx.clone().eq(k.clone())]);
                let mut exp = int(0);
                let mut land = int(0);
                for x in &xs {
                    let here = B::and(vec![x.guard.subst(&ev.sub), x.index.subst(&ev.sub).eq(k.clone())]);
                    self.push_q(Query {
                        goal: Goal::Obligation(Unsupported {
                            span: x.span,
                            why: format!(
                                "bytes of `{}` in an iteration where the role does not arrive on the same element",
                                g.name
                            ),
                        }),
                        group: g.name.clone(),
                        what: String::new(),
                        formula: B::and(vec![kd.clone(), ev.dom.clone(), here.clone(), arrive_here.clone().not()]),
                        spans: vec![x.span],
                        show: vec![],
                    });
                    let (b, is_exp) = signed(x, &ev.sub);
                    let v = T::ite(here, b, int(0));
                    if is_exp {
                        exp = exp.add(v);
                    } else {
                        land = land.add(v);
                    }
                }
                let phase = self.visit(c, a, &ev, &k, &|s| matches!(s.kind, SiteKind::Arrive { .. }))?;
                let spans: Vec<Span> = xs.iter().map(|x| x.span).collect();
                self.push_tx(g, &mult, vec![kd, arrive_here], k, phase, exp, land, spans);
            }
            return Ok(());
        }
        // top level: rounds are separated by the role's arrivals on the element, in program
        // order; elements are told apart by their (equal or constant) index terms
        let mut idxs: Vec<T> = Vec::new();
        for s in c.sites.iter().filter(|s| s.group == g.name) {
            if !(matches!(s.kind, SiteKind::Arrive { .. }) || is_tx(s)) {
                continue;
            }
            if let Some(l) = &c.segs[s.seg] {
                if s.index.mentions(&l.var) {
                    return un(
                        s.span,
                        "bytes on an element that changes with the loop variable, with no arrival in the loop",
                    );
                }
            }
            if matches!(s.kind, SiteKind::Arrive { .. }) && s.guard != B::Const(true) {
                return un(s.span, "a conditional arrival on a barrier whose bytes are counted by phase");
            }
            if !idxs.contains(&s.index) {
                idxs.push(s.index.clone());
            }
        }
        if idxs.len() > 1 && idxs.iter().any(|i| i.as_int().is_none()) {
            let sp = c.sites.iter().find(|s| is_tx(s)).unwrap().span;
            return un(
                sp,
                format!(
                    "arrivals and bytes on elements of `{}` that cannot be told apart outside loops",
                    g.name
                ),
            );
        }
        for idx in idxs {
            let k = idx.clone();
            let on = |s: &Site| s.index == idx;
            let mut rounds: BTreeMap<usize, (T, T, Vec<Span>)> = BTreeMap::new();
            for x in c.sites.iter().filter(|s| is_tx(s) && on(s)) {
                let before: Vec<&&Site> = arr.iter().filter(|a| a.pos < x.pos && on(a)).collect();
                let mut r = before.len();
                // bytes after an arrival with no wait on the element between belong to that
                // arrival's phase, an arrive_expect_tx's own bytes too: a thread that arrives
                // again before its phase completed may arrive into the same phase (its copies
                // are still in flight), so its two rounds are one, and their bytes must balance
                // together (specs/soundness/over_arrival_own_tx)
                if r >= 1 {
                    let last = before[r - 1].pos;
                    let waited = c.sites.iter().any(|w| {
                        w.group == g.name
                            && on(w)
                            && w.pos > last
                            && w.pos < x.pos
                            && matches!(w.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. })
                    });
                    // a wait on another barrier in between may order the arrival after that
                    // phase (the producer's wait on `empty` needs the consumer's release, made
                    // after its wait on this element): the rounds stay apart, under an
                    // obligation that every run of the waits between orders them so
                    let between: Vec<&Site> = c
                        .sites
                        .iter()
                        .filter(|w| {
                            w.pos > last
                                && w.pos < x.pos
                                && c.segs[w.seg].is_none()
                                && matches!(w.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. })
                        })
                        .collect();
                    if !waited && (between.is_empty() || rounds_out.is_some()) {
                        r -= 1;
                    } else if !waited {
                        self.reset();
                        let mut unordered = Vec::new();
                        for w in between {
                            let g2 = self.s.groups.iter().find(|x| x.name == w.group).unwrap();
                            let (k2, kd2) = self.kvar(g2);
                            let ew = self.ev_k(c, w, &k2);
                            let m = self.named(c, w, &ew, &k2)?;
                            let early = self.completes_before(c, g2, &k2, &m, &g.name, &k, &int(r as i64 - 1))?;
                            unordered.push(B::and(vec![
                                kd2,
                                ew.idx.clone().eq(k2),
                                B::or(vec![ew.dom.clone().not(), m.cmp(Cmp::Lt, int(0)), early]),
                            ]));
                        }
                        self.push_q(Query {
                            goal: Goal::Obligation(Unsupported {
                                span: x.span,
                                why: format!(
                                    "{} arrives on `{}` again before waiting on it; prove could not show that its waits in between order the arrival after the earlier phase, so the bytes may belong to either",
                                    c.label, g.name
                                ),
                            }),
                            group: g.name.clone(),
                            what: String::new(),
                            formula: B::and(unordered),
                            spans: vec![x.span],
                            show: vec![],
                        });
                    }
                }
                let amount = match &c.segs[x.seg] {
                    None => T::ite(x.guard.clone(), signed(x, &BTreeMap::new()).0, int(0)),
                    Some(l) => {
                        let (b, _) = signed(x, &BTreeMap::new());
                        if b.mentions(&l.var) {
                            return un(
                                x.span,
                                "a byte count that changes with the loop variable outside the arrival's iteration",
                            );
                        }
                        self.count_site(c, x, &k, None)?.mul(b)
                    }
                };
                let e = rounds.entry(r).or_insert((int(0), int(0), vec![]));
                if matches!(x.kind, SiteKind::Expect { .. }) {
                    e.0 = e.0.clone().add(amount);
                } else {
                    e.1 = e.1.clone().add(amount);
                }
                e.2.push(x.span);
            }
            self.reset();
            if let Some(out) = rounds_out.as_deref_mut() {
                let Some(ki) = idx.as_int() else {
                    let sp = c.sites.iter().find(|s| is_tx(s)).unwrap().span;
                    return un(
                        sp,
                        format!("bytes of `{}` from more than one role on an element that is not a constant", g.name),
                    );
                };
                let arrivals: Vec<&&Site> = arr.iter().filter(|a| on(a)).collect();
                let expects_before_arrival = c
                    .sites
                    .iter()
                    .filter(|x| is_tx(x) && on(x) && matches!(x.kind, SiteKind::Expect { .. }))
                    .all(|x| arrivals.iter().any(|a| a.pos > x.pos));
                for (r, (exp, land, spans)) in &rounds {
                    out.push(Round {
                        class: c.label.clone(),
                        element: ki,
                        round: *r,
                        exp: mult.clone().mul(exp.clone()),
                        land: mult.clone().mul(land.clone()),
                        spans: spans.clone(),
                        one_arrival: arrivals.len() <= 1,
                        expects_before_arrival,
                    });
                }
                continue;
            }
            for (r, (exp, land, spans)) in rounds {
                let dom = vec![idx.clone().cmp(Cmp::Ge, int(0))];
                self.push_tx(g, &mult, dom, k.clone(), int(r as i64), exp, land, spans);
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn push_tx(&mut self, g: &GroupInfo, mult: &T, dom: Vec<B>, k: T, phase: T, exp: T, land: T, spans: Vec<Span>) {
        let max = int(MAX_COUNT);
        let show = vec![
            ("element".to_string(), k.clone()),
            ("phase".to_string(), phase.clone()),
            ("bytes expected per thread".to_string(), exp.clone()),
            ("bytes landed per thread".to_string(), land.clone()),
        ];
        let mut f = dom.clone();
        f.push(exp.clone().cmp(Cmp::Ne, land.clone()));
        self.push_q(Query {
            goal: Goal::Violation(Law::TxBalance),
            group: g.name.clone(),
            what: format!("a phase of `{}` expects a different number of bytes than land in it", g.name),
            formula: B::and(f),
            spans: spans.clone(),
            show: show.clone(),
        });
        let mut f = dom;
        f.push(B::or(vec![
            mult.clone().mul(exp).cmp(Cmp::Gt, max.clone()),
            mult.clone().mul(land).cmp(Cmp::Gt, max),
        ]));
        self.push_q(Query {
            goal: Goal::Violation(Law::TxRange),
            group: g.name.clone(),
            what: format!("a phase of `{}` has more than 2^20-1 bytes outstanding", g.name),
            formula: B::and(f),
            spans,
            show,
        });
    }

    /// Bytes go to the round of the arrival in their iteration only if that arrival cannot
    /// fall into the thread's previous phase on the element, still open for its bytes (it would
    /// over-arrive there): an obligation that a wait of the thread since its last arrival (in
    /// this iteration before it, or in the previous one after it) orders the arrival after that phase, by waiting on it or on a barrier whose
    /// phase needs an arrival made after a wait on it (the producer's `empty`).
    fn arrival_after_phase(&mut self, g: &GroupInfo, c: &Class, a: &Site) -> R<()> {
        let s = self.s;
        let is_arr = |s: &Site| matches!(s.kind, SiteKind::Arrive { .. });
        let is_wait = |s: &Site| matches!(s.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. });
        self.reset();
        let (k, kd) = self.kvar(g);
        let ea = self.ev_k(c, a, &k);
        let r = self.visit(c, a, &ea, &k, &|s| is_arr(s))?;
        let prev = r.clone().sub(int(1));
        let mut parts = vec![kd, ea.dom.clone(), ea.idx.clone().eq(k.clone()), r.cmp(Cmp::Ge, int(1))];
        // the waits after the previous arrival: earlier in the iteration (or segment), or later
        // in the previous iteration
        let looped = c.segs[a.seg].is_some();
        let between = c
            .sites
            .iter()
            .filter(|w| is_wait(w) && w.seg == a.seg && !disjoint(w.share, a.share))
            .flat_map(|w| {
                let mut v = Vec::new();
                if w.pos < a.pos {
                    v.push((w, 0));
                }
                if looped && w.pos > a.pos {
                    v.push((w, -1));
                }
                v
            });
        for (w, d) in between.collect::<Vec<_>>() {
            let g2 = s.groups.iter().find(|x| x.name == w.group).unwrap();
            let (k2, kd2) = self.kvar(g2);
            let ew = self.ev_k(c, w, &k2);
            let tie = match (&ew.iv, &ea.iv) {
                (Some(x), Some(y)) => x.clone().eq(y.clone().add(int(d))),
                _ => B::Const(true),
            };
            let m = self.named(c, w, &ew, &k2)?;
            let unordered = if w.group == g.name {
                B::or(vec![k2.clone().cmp(Cmp::Ne, k.clone()), m.clone().cmp(Cmp::Lt, prev.clone())])
            } else {
                self.completes_before(c, g2, &k2, &m, &g.name, &k, &prev)?
            };
            parts.push(B::and(vec![kd2, tie, ew.idx.clone().eq(k2.clone())]));
            parts.push(B::or(vec![ew.dom.clone().not(), m.cmp(Cmp::Lt, int(0)), unordered]));
        }
        self.push_q(Query {
            goal: Goal::Suspect(Law::TxBalance, Unsupported {
                span: a.span,
                why: format!(
                    "{} arrives on `{}` again with nothing since its last arrival there that waits for that phase; the arrival may fall into that phase while its bytes are in flight (over-arrival), which only the explicit search models",
                    c.label, g.name
                ),
            }),
            group: g.name.clone(),
            what: String::new(),
            formula: B::and(parts),
            spans: vec![a.span],
            show: vec![],
        });
        Ok(())
    }
}
