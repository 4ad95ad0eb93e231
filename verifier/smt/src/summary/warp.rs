//! The warp as the counting laws see it: `elect()` (one lane per warp), `syncwarp` as a barrier
//! of the lanes it names, and named barriers (`bar_sync`/`bar_arrive`) with their own counts.

use super::*;

impl Builder {
    /// `syncwarp` / `syncwarp(mask)` of a thread that is its own class: an arrival and a wait
    /// on the barrier of its warp (and mask) whose count is the modelled lanes it names. False
    /// when the warp's lanes are not known (a role of symbolic size before it).
    pub(super) fn warp_sync(&self, span: Span, mask: Option<i64>, cx: &mut Ctx) -> R<bool> {
        let (_, gtid, ws) = cx.me.expect("a thread of its own class");
        let Some(lanes) = self.warp_lanes.get(&(gtid / ws)) else {
            return Ok(false);
        };
        let lane = gtid % ws;
        let named: Vec<i64> = lanes
            .iter()
            .copied()
            .filter(|l| mask.is_none_or(|m| *l < 63 && (m >> l) & 1 == 1))
            .collect();
        if !named.contains(&lane) {
            return unsupported(
                span,
                "a lane runs syncwarp(mask) without its own bit: undefined behaviour, which only the explicit search reports",
            )?;
        }
        let name = match mask {
            None => format!("syncwarp w{}{}", gtid / ws, cta_suffix(self.ctas, cx.cta)),
            Some(m) => format!("syncwarp w{} {m:#x}{}", gtid / ws, cta_suffix(self.ctas, cx.cta)),
        };
        {
            let mut named_groups = self.named.borrow_mut();
            if !named_groups.iter().any(|g| g.name == name) {
                named_groups.push(GroupInfo {
                    name: name.clone(),
                    len: 1,
                    count: int(named.len() as i64),
                    span,
                });
            }
        }
        let a = self.push(cx, span, name.clone(), int(0), SiteKind::Arrive { n: int(1), drop: false });
        self.push(cx, span, name, int(0), SiteKind::WaitToken { arrive: a });
        Ok(true)
    }

    /// The lanes (within its warp) of the per-thread class's role in its warp.
    pub(super) fn role_lanes(&self, cx: &Ctx) -> Vec<i64> {
        let (Some((_, gtid, ws)), Some((first, n))) = (cx.me, cx.role_threads) else {
            return Vec::new();
        };
        let w = gtid / ws;
        (first.max(w * ws)..(first + n).min((w + 1) * ws)).map(|t| t % ws).collect()
    }

    /// `commit(B)`: one arrival per converged group of lanes (docs/semantics.md, "Warps").
    /// Converged lanes of a class of whole warps of one code reach it together (as they reach
    /// `elect()`), so it is one arrival per warp, counted as an elected site. For a thread of
    /// its own class, the group is its role's lanes in its warp: a barrier of the group
    /// (the commit is one instruction, issued once all of them stand at it), then one arrival,
    /// made by the group's first lane. Lanes that may have diverged since the last `syncwarp`
    /// make a number of arrivals the interleaving decides: counted as one per lane, which can
    /// refute the laws (the explicit search confirms it) but never prove them.
    pub(super) fn commit(&self, span: Span, bar: &ast::Place, cx: &mut Ctx) -> R<()> {
        if cx.share != Share::All {
            return unsupported(span, "commit inside an elected block: the other lanes of the warp do not reach it")?;
        }
        let (g, i) = self.place(bar, cx)?;
        let one = SiteKind::Arrive { n: int(1), drop: false };
        if !cx.converged {
            self.refute_only.borrow_mut().get_or_insert(Unsupported {
                span,
                why: "commit from a warp whose lanes may have diverged since the last syncwarp: it makes one arrival per converged group, a number the interleaving decides (counted here as one per lane: the laws can be refuted, not proved)".into(),
            });
            self.push(cx, span, g, i, one);
            return Ok(());
        }
        if cx.whole_warps.is_some() {
            let outer = cx.share;
            cx.share = Share::Elected;
            self.push(cx, span, g, i, one);
            cx.share = outer;
            return Ok(());
        }
        let Some((_, gtid, ws)) = cx.me else {
            return unsupported(span, "commit in a class of threads whose warps are not known")?;
        };
        let lanes = self.role_lanes(cx);
        let w = gtid / ws;
        let name = format!("commit w{w} @{}{}", span.start, cta_suffix(self.ctas, cx.cta));
        {
            let mut named_groups = self.named.borrow_mut();
            if !named_groups.iter().any(|x| x.name == name) {
                named_groups.push(GroupInfo {
                    name: name.clone(),
                    len: 1,
                    count: int(lanes.len() as i64),
                    span,
                });
            }
        }
        let a = self.push(cx, span, name.clone(), int(0), SiteKind::Arrive { n: int(1), drop: false });
        self.push(cx, span, name, int(0), SiteKind::WaitToken { arrive: a });
        // The other lanes' commit is an event of the same round that brings no arrival: the
        // group's arrival comes after it, so a phase that needs that arrival is held back by
        // whatever holds these lanes back (the stale part of the parity law credits it).
        let n = int((lanes.first() == Some(&(gtid % ws))) as i64);
        let c = self.push(cx, span, g, i, SiteKind::Arrive { n, drop: false });
        if lanes.len() > 1 {
            cx.group_commits.push(c);
        }
        Ok(())
    }

    /// `elect()`: a warp-wide wait and a choice of one lane. Exact only where every lane of the
    /// warp runs the class's code (whole warps of one role that read no identity): then its
    /// lanes reach it together unless one blocks earlier on a wait the laws account for, and the
    /// elected block runs on one lane per warp, whichever it is.
    pub(super) fn elect(&self, span: Span, cx: &Ctx) -> R<()> {
        if cx.whole_warps.is_none() {
            return unsupported(
                span,
                "elect() in a role sized in threads, or whose lanes read their identity: which lanes of the warp take part (and which one is elected) is modelled only by the explicit search",
            )?;
        }
        if cx.share != Share::All {
            return unsupported(span, "elect() inside an elected block: only one lane of the warp reaches it")?;
        }
        if cx.whole_warps.is_some_and(|ws| ws < 2) {
            return unsupported(span, "elect() with warp_size 1: prove counts the elected lane against the others")?;
        }
        Ok(())
    }

    /// `Some(true)` for a test that holds in the elected lane (`e == 1`, `e != 0`, `e`),
    /// `Some(false)` for one that holds in the others (`e == 0`, `e != 1`), on an `elect()` result.
    pub(super) fn elect_test(&self, c: &ast::Expr, cx: &Ctx) -> Option<bool> {
        let is_elect = |e: &ast::Expr| matches!(&e.kind, ExprKind::Name(n) if matches!(self.lookup(n, cx), Some(Local::Elect)));
        match &c.kind {
            ExprKind::Name(_) if is_elect(c) => Some(true),
            ExprKind::Unary(UnOp::Not, a) if is_elect(a) => Some(false),
            ExprKind::Binary(op @ (BinOp::Eq | BinOp::Ne), a, b) => {
                let (e, v) = match (&a.kind, &b.kind) {
                    (_, ExprKind::Int(v)) if is_elect(a) => (true, *v),
                    (ExprKind::Int(v), _) if is_elect(b) => (true, *v),
                    _ => (false, 0),
                };
                if !e || !(v == 0 || v == 1) {
                    return None;
                }
                Some((v == 1) == (*op == BinOp::Eq))
            }
            _ => None,
        }
    }

    pub(super) fn elected_block(&self, span: Span, elected: bool, then: &ast::Block, els: Option<&ast::Block>, cx: &mut Ctx) -> R<()> {
        if block_returns(then) || els.is_some_and(block_returns) {
            return unsupported(span, "a `return` inside an elected block: the lanes then end at different points")?;
        }
        let (outer, scope) = (cx.share, cx.share_scope);
        for (blk, share) in [(Some(then), elected), (els, !elected)] {
            let Some(blk) = blk else { continue };
            cx.share = if share { Share::Elected } else { Share::Others };
            // `block` pushes the block's scope at this index
            cx.share_scope = cx.locals.len();
            self.block(blk, cx)?;
        }
        cx.share = outer;
        cx.share_scope = scope;
        Ok(())
    }

    /// The barrier a `bar_sync`/`bar_arrive` names, registered with its thread count. The id
    /// and count must be constants and the count a positive multiple of the warp size (else the
    /// model reports undefined behaviour, outside the laws); one id, one count.
    pub(super) fn named_barrier(&self, span: Span, id: &ast::Expr, count: &ast::Expr, cx: &mut Ctx) -> R<String> {
        let Some(ws) = cx.whole_warps.or(cx.me.map(|m| m.2)) else {
            return unsupported(
                span,
                "a named barrier in a role sized in threads: its warps may hold other roles' lanes, and a warp arrives as warp_size threads; prove counts named barriers in roles of whole warps",
            )?;
        };
        if cx.share != Share::All {
            return unsupported(
                span,
                "a named barrier inside an elected block: the other lanes of the warp do not reach it",
            )?;
        }
        let (id, count) = (self.expr(id, cx)?.as_int(), self.expr(count, cx)?.as_int());
        let (Some(id), Some(count)) = (id, count) else {
            return unsupported(span, "a named barrier whose id or count is not a constant")?;
        };
        if !(0..=15).contains(&id) || count <= 0 || count % ws != 0 {
            return unsupported(
                span,
                format!("named barrier {id} with count {count}: an id outside 0..=15 or a count that is not a positive multiple of the warp size is undefined behaviour, which only the explicit search reports"),
            )?;
        }
        let name = format!("{NAMED_PREFIX}{id}{}", cta_suffix(self.ctas, cx.cta));
        let mut named = self.named.borrow_mut();
        match named.iter().find(|g| g.name == name) {
            Some(g) if g.count != int(count) => {
                return unsupported(
                    span,
                    format!("named barrier {id} is used with different counts: a warp arriving with another count than the use in progress is undefined behaviour"),
                )?
            }
            Some(_) => {}
            None => named.push(GroupInfo {
                name: name.clone(),
                len: 1,
                count: int(count),
                span,
            }),
        }
        Ok(name)
    }
}

/// Named barriers in a role whose threads read their identity: counted per lane only when every
/// warp of the role is whole and its lanes run the same named-barrier statements with the same
/// ids, conditions and loops (`bar.sync` is `.aligned`; anything else is undefined behaviour the
/// explicit search reports).
pub(super) fn aligned_named_barriers(r: &ast::RoleDecl, classes: &[Class], first: i64, ws: i64) -> R<()> {
    let named = |c: &Class| -> Vec<(Span, String, B, usize)> {
        c.sites
            .iter()
            .filter(|x| x.group.starts_with(NAMED_PREFIX))
            .map(|x| (x.span, x.group.clone(), x.guard.clone(), x.seg))
            .collect()
    };
    let Some(c0) = classes.iter().find(|c| !named(c).is_empty()) else {
        return Ok(());
    };
    let span = named(c0)[0].0;
    if r.unit == ast::RoleUnit::Threads || first % ws != 0 {
        return unsupported(
            span,
            "a named barrier in a role sized in threads: its warps may hold other roles' lanes, and a warp arrives as warp_size threads; prove counts named barriers in roles of whole warps",
        )?;
    }
    for w in classes.chunks(ws as usize) {
        let seq = named(&w[0]);
        if w.iter().any(|c| named(c) != seq || c.segs.len() != w[0].segs.len()) {
            return unsupported(
                span,
                "the lanes of a warp run different named-barrier statements (or under different conditions): undefined behaviour, which only the explicit search reports",
            )?;
        }
    }
    Ok(())
}
