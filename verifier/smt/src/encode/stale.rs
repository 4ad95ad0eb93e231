//! The stale part of the parity law: a wait that names phase n is stale when phase n+1 can
//! complete while the waiter has not passed it (the barrier is then two phases ahead). Phase
//! n+1 is held back by the wait when every class that arrives in it makes that arrival only
//! after a wait of its own that needs an arrival the waiter makes after the wait, directly or
//! through one more class (a chain: the producer's wait on `empty` needs the releasing lane's
//! arrival, which comes after its `syncwarp`, which needs the waiting lane). A hold the query
//! does not see makes a refutation the explicit search then does not confirm (`unknown`),
//! never a proof: every credited hold is a real one under the round discipline.

use super::*;

/// How many loop occurrences one stale query may hold before the chain through a third class
/// is left out (each occurrence multiplies the cases `split_cases` makes).
const CHAIN_BUDGET: usize = 400;

/// How many occurrences (loop or not) one stale query may name before chains through a third
/// class are no longer credited: unrolled code has one site per iteration, and the chains
/// multiply them.
const CHAIN_EVENTS: usize = 1500;

/// The waiter of a stale query: the class, its wait site and the wait's occurrence.
struct Waiter<'c> {
    c: &'c Class,
    w: &'c Site,
    ew: Ev,
}

impl<'a> Encoder<'a> {
    /// The query "phase n+1 completes without waiting for `w`", for a waiter that does not
    /// arrive on `g`.
    pub(super) fn stale(&mut self, g: &GroupInfo, c: &Class, w: &Site) -> R<()> {
        // With ranged parameters as solver variables the larger credit can defeat the solver's
        // arithmetic (the double buffer over ITERS <= 10^6): there holds are credited only
        // directly, from waits earlier in the arrival's own iteration (less credit: sound).
        self.stale_prev = self.s.symbols.is_empty();
        let f = self.stale_formula(g, c, w, usize::from(self.stale_prev))?;
        let f = if self.cur.evs.len() > CHAIN_BUDGET {
            self.stale_formula(g, c, w, 0)?
        } else {
            f
        };
        let (k, n) = f.1;
        self.push_q(Query {
            goal: Goal::Violation(Law::Parity),
            group: g.name.clone(),
            what: format!(
                "{} waits on a phase of `{}` that the barrier can leave two phases behind: the next phase completes without waiting for it",
                c.label, g.name
            ),
            formula: f.0,
            spans: vec![w.span],
            show: vec![("element".into(), k), ("phase named".into(), n)],
        });
        Ok(())
    }

    /// The stale query's formula (and the element and phase to show); `depth` 1 credits chains
    /// through one more class.
    fn stale_formula(&mut self, g: &GroupInfo, c: &Class, w: &Site, depth: usize) -> R<(B, (T, T))> {
        let s = self.s;
        self.reset();
        self.stale_from = self.fresh;
        let (k, kd) = self.kvar(g);
        let ew = self.ev_k(c, w, &k);
        let n = self.named(c, w, &ew, &k)?;
        let next = n.clone().add(int(1));
        let (got, exp) = self.arrivals_expected(g, &k, &next)?;
        // n may be -1 (a parity wait before phase 0, "already complete"): stale too once phase 0
        // can complete before the wait runs.
        let mut parts = vec![
            kd,
            ew.dom.clone(),
            ew.idx.clone().eq(k.clone()),
            n.clone().cmp(Cmp::Ge, int(-1)),
            got.clone().cmp(Cmp::Gt, int(0)),
            got.clone().eq(exp),
        ];
        let waiter = Waiter { c, w, ew };
        for c2 in s.classes.iter().filter(|c2| c2.label != c.label) {
            parts.push(self.round_free(&waiter, c2, &g.name, &k, &next, &[c.label.as_str()], depth)?);
        }
        Ok((B::and(parts), (k, n)))
    }

    /// "c2's arrival of round `round` on element `k` of `group` does not exist, or is not held
    /// back until the waiter passes its wait": the round-`round` arrival is made by exactly one
    /// occurrence of one of c2's arrival sites, so the query names it.
    #[allow(clippy::too_many_arguments)]
    fn round_free(&mut self, x: &Waiter, c2: &Class, group: &str, k: &T, round: &T, seen: &[&str], depth: usize) -> R<B> {
        let is_arr = |s: &Site| matches!(s.kind, SiteKind::Arrive { .. });
        let arr = Self::arrivals_of(c2, group);
        if arr.is_empty() {
            return Ok(B::Const(true));
        }
        let v = self.total_visits(c2, group, k)?;
        let mut free = vec![v.cmp(Cmp::Le, round.clone())];
        for a in arr {
            let ea = self.ev_k(c2, a, k);
            let va = self.visit(c2, a, &ea, k, &|s| is_arr(s))?;
            let mut witness = vec![ea.dom.clone(), ea.idx.clone().eq(k.clone()), va.eq(round.clone())];
            witness.push(self.arrival_free(x, c2, a, &ea, seen, depth)?);
            free.push(B::and(witness));
        }
        Ok(B::or(free))
    }

    /// "No wait of c2 before its arrival event `ea` (of site `a`) needs the waiter to have passed
    /// its wait". The waits credited: earlier in the same loop iteration, anywhere in the
    /// previous iteration, or earlier outside the loop; each at one occurrence the query names.
    fn arrival_free(&mut self, x: &Waiter, c2: &Class, a: &Site, ea: &Ev, seen: &[&str], depth: usize) -> R<B> {
        let s = self.s;
        let is_wait = |s: &Site| matches!(s.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. });
        let mut free = Vec::new();
        for w2 in c2.sites.iter().filter(|w2| is_wait(w2) && !disjoint(w2.share, a.share)) {
            let prev = self.stale_prev;
            for link in Self::links(c2, w2, a).into_iter().filter(|l| prev || *l != Some(-1)) {
                let g2 = s.groups.iter().find(|g| g.name == w2.group).unwrap();
                let (k2, kd2) = self.kvar(g2);
                let ew2 = self.ev_k(c2, w2, &k2);
                let tie = match (link, &ew2.iv, &ea.iv) {
                    (Some(d), Some(i2), Some(i)) => i2.clone().eq(i.clone().add(int(d))),
                    _ => B::Const(true),
                };
                let m = self.named(c2, w2, &ew2, &k2)?;
                let needs = self.needs(x, g2, &k2, &m, c2, seen, depth)?;
                // the occurrence is defined (its element, its iteration), then either does not
                // run, names no phase, or does not need the waiter
                free.push(B::and(vec![kd2, tie, ew2.idx.clone().eq(k2.clone())]));
                free.push(B::or(vec![ew2.dom.clone().not(), m.clone().cmp(Cmp::Lt, int(0)), needs.not()]));
            }
        }
        Ok(B::and(free))
    }

    /// "Phase `m` of element `k2` of `g2` cannot complete before the waiter passes its wait": it
    /// needs an arrival the waiter makes after the wait, or (with `depth` left) the arrival of a
    /// class that makes it only after a wait that needs one.
    #[allow(clippy::too_many_arguments)]
    fn needs(&mut self, x: &Waiter, g2: &GroupInfo, k2: &T, m: &T, c2: &Class, seen: &[&str], depth: usize) -> R<B> {
        let s = self.s;
        let is_arr = |s: &Site| matches!(s.kind, SiteKind::Arrive { .. });
        let c = x.c;
        let mut ways = Vec::new();
        // directly: the waiter's round-m arrival exists and is not before the wait (an elected
        // lane does not run the other lanes' block, and they do not run its)
        let a1s: Vec<&Site> = c
            .sites
            .iter()
            .filter(|s| is_arr(s) && s.group == g2.name && !disjoint(s.share, x.w.share))
            .collect();
        if !a1s.is_empty() {
            let v1 = self.total_visits(c, &g2.name, k2)?;
            let mut lost = Vec::new();
            for a1 in &a1s {
                let ea1 = self.ev_k(c, a1, k2);
                let va1 = self.visit(c, a1, &ea1, k2, &|s| is_arr(s))?;
                lost.push(B::and(vec![
                    ea1.dom.clone(),
                    ea1.idx.clone().eq(k2.clone()),
                    va1.eq(m.clone()),
                    Self::before(c, a1, &ea1, x.w, &x.ew),
                ]));
            }
            ways.push(B::and(vec![v1.cmp(Cmp::Gt, m.clone()), B::or(lost).not()]));
        }
        // through a third class whose round-m arrival on g2 is held back itself
        if depth > 0 && self.fresh - self.stale_from < CHAIN_EVENTS {
            let mut seen2: Vec<&str> = seen.to_vec();
            seen2.push(c2.label.as_str());
            for c3 in s.classes.iter().filter(|c3| !seen2.contains(&c3.label.as_str())) {
                if Self::arrivals_of(c3, &g2.name).is_empty() {
                    continue;
                }
                let free = self.round_free(x, c3, &g2.name, k2, m, &seen2, depth - 1)?;
                ways.push(free.not());
            }
        }
        Ok(B::or(ways))
    }

    /// "Phase `m` of element `k2` of `g2` can complete while phase `r` of element `k` of `g`
    /// has not": false when some class other than `c` makes its round-`m` arrival on `k2` only
    /// after a wait of its own on element `k` of `g` that names phase `r` or a later one.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn completes_before(&mut self, c: &Class, g2: &GroupInfo, k2: &T, m: &T, g: &str, k: &T, r: &T) -> R<B> {
        let s = self.s;
        let is_arr = |s: &Site| matches!(s.kind, SiteKind::Arrive { .. });
        let is_wait = |s: &Site| matches!(s.kind, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. });
        let mut free = Vec::new();
        for c3 in s.classes.iter().filter(|c3| c3.label != c.label) {
            let arr = Self::arrivals_of(c3, &g2.name);
            if arr.is_empty() {
                continue;
            }
            let v3 = self.total_visits(c3, &g2.name, k2)?;
            let mut one = vec![v3.cmp(Cmp::Le, m.clone())];
            for a3 in arr {
                let ea3 = self.ev_k(c3, a3, k2);
                let va3 = self.visit(c3, a3, &ea3, k2, &|s| is_arr(s))?;
                let mut wit = vec![ea3.dom.clone(), ea3.idx.clone().eq(k2.clone()), va3.eq(m.clone())];
                for w3 in c3
                    .sites
                    .iter()
                    .filter(|w3| is_wait(w3) && w3.group == g && !disjoint(w3.share, a3.share))
                {
                    for link in Self::links(c3, w3, a3) {
                        let ew3 = self.ev_k(c3, w3, k);
                        let tie = match (link, &ew3.iv, &ea3.iv) {
                            (Some(d), Some(i3), Some(i)) => i3.clone().eq(i.clone().add(int(d))),
                            _ => B::Const(true),
                        };
                        let n3 = self.named(c3, w3, &ew3, k)?;
                        wit.push(tie);
                        wit.push(B::or(vec![
                            ew3.dom.clone().not(),
                            ew3.idx.clone().cmp(Cmp::Ne, k.clone()),
                            n3.cmp(Cmp::Lt, r.clone()),
                        ]));
                    }
                }
                one.push(B::and(wit));
            }
            free.push(B::or(one));
        }
        Ok(B::and(free))
    }

    /// The occurrences of wait `w2` that come before an occurrence of `a` of the same class:
    /// relative iterations (0 the same, earlier in it; -1 the previous one), or `None` for the
    /// one occurrence of a wait outside `a`'s loop and before it.
    fn links(c2: &Class, w2: &Site, a: &Site) -> Vec<Option<i64>> {
        let mut links = Vec::new();
        if w2.seg == a.seg && c2.segs[a.seg].is_some() {
            if w2.pos < a.pos {
                links.push(Some(0));
            }
            links.push(Some(-1));
        } else if w2.pos < a.pos && w2.seg <= a.seg {
            links.push(None);
        }
        links
    }
}
