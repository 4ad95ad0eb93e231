//! One operation of the program as the sites of the counting laws: arrivals, waits, expected
//! and landed bytes, on the barrier (and CTA) it names; what touches no count is no site.

use super::*;

impl Builder {
    /// Record the sites of one operation; the arrival site's index when it yields a token.
    pub(super) fn op(&self, op: &ast::Op, cx: &mut Ctx) -> R<Option<usize>> {
        let sp = op.span;
        Ok(match &op.kind {
            OpKind::Arrive { bar, n } => {
                let (g, i) = self.place(bar, cx)?;
                let n = match n {
                    Some(e) => self.expr(e, cx)?,
                    None => int(1),
                };
                Some(self.push(cx, sp, g, i, SiteKind::Arrive { n, drop: false }))
            }
            OpKind::ArriveExpectTx { bar, bytes } => {
                let (g, i) = self.place(bar, cx)?;
                let b = self.expr(bytes, cx)?;
                self.push(cx, sp, g.clone(), i.clone(), SiteKind::Expect { bytes: b });
                Some(self.push(cx, sp, g, i, SiteKind::Arrive { n: int(1), drop: false }))
            }
            OpKind::Wait { bar, token } => {
                let (g, i) = self.place(bar, cx)?;
                let arrive = match &token.kind {
                    ExprKind::Name(n) => match self.lookup(n, cx) {
                        Some(Local::Token(a)) => a,
                        _ => return unsupported(token.span, "a token wait on a value that is not a token of this iteration")?,
                    },
                    _ => return unsupported(token.span, "a token wait on a computed value")?,
                };
                let a = &cx.sites[arrive];
                if a.group != g || a.seg != cx.seg {
                    return unsupported(sp, "a token from another barrier or another loop iteration")?;
                }
                self.push(cx, sp, g, i, SiteKind::WaitToken { arrive });
                None
            }
            OpKind::WaitParity { bar, parity } => {
                let (g, i) = self.place(bar, cx)?;
                let p = self.expr(parity, cx)?;
                self.push(cx, sp, g, i, SiteKind::WaitParity { parity: p });
                None
            }
            OpKind::TryWait { .. } | OpKind::TryWaitParity { .. } => {
                return unsupported(
                    sp,
                    "try_wait returns 0 or 1 depending on the interleaving; only the explicit search models it",
                )?
            }
            OpKind::ArriveAndWait { bar } => {
                let (g, i) = self.place(bar, cx)?;
                let a = self.push(cx, sp, g.clone(), i.clone(), SiteKind::Arrive { n: int(1), drop: false });
                self.push(cx, sp, g, i, SiteKind::WaitToken { arrive: a });
                None
            }
            OpKind::ArriveAndDrop { bar } => {
                if cx.in_loop.is_some() {
                    return unsupported(sp, "arrive_and_drop inside a loop: prove handles a drop at the top level of a role")?;
                }
                let (g, i) = self.place(bar, cx)?;
                self.push(cx, sp, g, i, SiteKind::Arrive { n: int(1), drop: true });
                None
            }
            OpKind::ExpectTx { bar, bytes } => {
                let (g, i) = self.place(bar, cx)?;
                let b = self.expr(bytes, cx)?;
                self.push(cx, sp, g, i, SiteKind::Expect { bytes: b });
                None
            }
            OpKind::CompleteTx { bar, bytes } => {
                let (g, i) = self.place(bar, cx)?;
                let b = self.expr(bytes, cx)?;
                self.push(cx, sp, g, i, SiteKind::Land { bytes: b });
                None
            }
            OpKind::CopyAsync { buf, bar, bytes, .. } => {
                let b = self.buffer_bytes(buf, bytes, cx)?;
                let (g, i) = self.place(bar, cx)?;
                self.push(cx, sp, g, i, SiteKind::Land { bytes: b });
                None
            }
            OpKind::MemcpyAsync { buf, bar, bytes, .. } => {
                let b = self.buffer_bytes(buf, bytes, cx)?;
                let (g, i) = self.place(bar, cx)?;
                self.push(cx, sp, g.clone(), i.clone(), SiteKind::Land { bytes: b.clone() });
                self.push(cx, sp, g, i, SiteKind::Expect { bytes: b });
                None
            }
            // The threads' own accesses of shared memory never touch a barrier's counts.
            k if k.object() == ast::Object::Memory => None,
            // A part of a buffer: its bytes land on the barrier like a whole copy's.
            OpKind::CopyAsyncPart {
                buf,
                bar,
                offset,
                bytes,
                libcu,
                ..
            } => {
                let b = match bytes {
                    Some(e) => self.expr(e, cx)?,
                    None => self.buffer_bytes(buf, &None, cx)?.sub(self.expr(offset, cx)?),
                };
                let (g, i) = self.place(bar, cx)?;
                self.push(cx, sp, g.clone(), i.clone(), SiteKind::Land { bytes: b.clone() });
                if *libcu {
                    self.push(cx, sp, g, i, SiteKind::Expect { bytes: b });
                }
                None
            }
            // A copy from the own CTA's shared memory lands its bytes (the whole source by
            // default) on the barrier of the CTA it names, as a copy from global memory does.
            OpKind::CopyAsyncFrom { bar, src, bytes, .. } => {
                let b = self.buffer_bytes(src, bytes, cx)?;
                let (g, i) = self.place(bar, cx)?;
                self.push(cx, sp, g, i, SiteKind::Land { bytes: b });
                None
            }
            // `st.async` with complete_tx: an asynchronous store that lands its bytes on the
            // barrier (of the CTA it names, through `Remote`) as a copy does.
            OpKind::StAsync { bar, bytes, .. } => {
                let b = self.expr(bytes, cx)?;
                let (g, i) = self.place(bar, cx)?;
                self.push(cx, sp, g, i, SiteKind::Land { bytes: b });
                None
            }
            // cp.async copies land on their own and touch no barrier; a group wait waits only
            // for the thread's own copies, which land whatever the other threads do.
            OpKind::CpAsync { .. } | OpKind::CpAsyncCommitGroup | OpKind::CpAsyncWait { .. } => None,
            // The arrive-on. Without `.noinc` it raises the pending count of the phase it runs in
            // and lowers it again once the thread's copies land: no arrival of the phase's count
            // (only a delay until copies that land on their own have landed). With `.noinc` it
            // is one arrival of that thread.
            OpKind::CpAsyncArrive { bar, noinc } => {
                if *noinc {
                    let (g, i) = self.place(bar, cx)?;
                    let a = self.push(cx, sp, g, i, SiteKind::Arrive { n: int(1), drop: false });
                    cx.async_arrivals.push(a);
                }
                None
            }
            // The async proxy: TMA stores, bulk groups, wgmma and proxy fences touch no
            // mbarrier count and no tx-count, and their waits wait only for the thread's own
            // asynchronous reads, which finish whatever the other threads do. Outside the
            // counting laws (data races, lifetimes: the explicit search).
            OpKind::CopyStoreAsync { .. }
            | OpKind::CommitGroup
            | OpKind::WaitGroup { .. }
            | OpKind::WgmmaAsync { .. }
            | OpKind::WgmmaWait { .. }
            | OpKind::FenceProxyAsync
            | OpKind::FenceMbarrierInit => {
                if matches!(op.kind, OpKind::FenceProxyAsync | OpKind::FenceMbarrierInit) {
                    cx.unfenced = None;
                }
                None
            }
            // A TMA descriptor's edits and fence touch no count; a tensor copy counts as the
            // copy it wraps (its bytes land on its barrier). Whether the copy sees the edit is
            // no counting law (the explicit search).
            OpKind::TensormapWrite { .. } | OpKind::FenceProxyTensormap { .. } => None,
            OpKind::CopyAsyncTensor { op: inner, .. } => self.op(inner, cx)?,
            // An init in the straight-line code before the thread's first `syncthreads`, which
            // every thread passes before it touches the barrier: the barrier then is what a
            // declared one is (count and phase 0), and each element must be initialised once.
            OpKind::Init { bar, count } => {
                let (g, i) = self.place(bar, cx)?;
                let declared = self.groups.iter().find(|x| x.name == bar.name.name).map(|x| x.count.clone());
                let same_count = match count {
                    None => true,
                    Some(e) => Some(self.expr(e, cx)?) == declared,
                };
                // one thread: an init by several would re-initialise a live barrier
                let single = cx.me.is_some() || self.roles.get(&cx.role).and_then(|t| t.as_int()) == Some(1);
                if !single || cx.synced || cx.in_loop.is_some() || !cx.guard.is_empty() || cx.share != Share::All || !same_count {
                    return unsupported(
                        sp,
                        "an init that is not unconditional straight-line code before the thread's first `syncthreads`, or that sets another count than the declaration: init order and re-initialisation are modelled only by the explicit search",
                    )?;
                }
                self.inits.borrow_mut().push((g, i, sp));
                cx.unfenced = Some(sp);
                None
            }
            OpKind::Inval { .. } => return unsupported(sp, "inval ends a barrier's life: modelled only by the explicit search")?,
            OpKind::Elect => {
                // its value unused: only the warp-wide wait, which reconverges the lanes
                self.elect(sp, cx)?;
                cx.converged = true;
                None
            }
            // Named barriers: a barrier of its own per id, counted per lane (a warp arrives as
            // warp_size threads, and every lane of a warp of one role runs it).
            OpKind::BarSync { id, count } | OpKind::BarArrive { id, count } => {
                let g = self.named_barrier(sp, id, count, cx)?;
                let a = self.push(cx, sp, g.clone(), int(0), SiteKind::Arrive { n: int(1), drop: false });
                if matches!(op.kind, OpKind::BarSync { .. }) {
                    self.push(cx, sp, g, int(0), SiteKind::WaitToken { arrive: a });
                }
                None
            }
            OpKind::Commit { bar } => {
                self.commit(sp, bar, cx)?;
                None
            }
            // Remote arrives, expects and accesses count on the target CTA's objects; a multicast
            // copy lands its bytes on the barrier of every CTA of the mask.
            OpKind::Remote { target, op: inner } => {
                let targets = match target {
                    ast::ClusterTarget::Cta(e) => vec![self.target_cta(e, cx)?],
                    ast::ClusterTarget::Multicast(e) => {
                        let m = self.expr(e, cx)?.as_int();
                        match m {
                            Some(m) if m > 0 && m < (1 << self.ctas) => (0..self.ctas).filter(|c| (m >> c) & 1 == 1).collect(),
                            _ => return unsupported(e.span, "a multicast mask that is not a constant naming CTAs of the cluster")?,
                        }
                    }
                };
                let mut last = None;
                for t in targets {
                    cx.target = Some(t);
                    let r = self.op(inner, cx);
                    cx.target = None;
                    last = r?;
                }
                last
            }
            // The cluster barrier: an arrival (and a wait on it) on one barrier of every thread
            // of the cluster.
            // A relaxed arrival counts as any other: the counting laws do not see ordering.
            OpKind::ClusterArrive | OpKind::ClusterArriveRelaxed | OpKind::ClusterWait | OpKind::ClusterSync => {
                self.cluster_barrier.set(true);
                if !matches!(op.kind, OpKind::ClusterWait) {
                    let a = self.push(cx, sp, CLUSTER_BARRIER.into(), int(0), SiteKind::Arrive { n: int(1), drop: false });
                    cx.cluster_arrive = Some(a);
                }
                if !matches!(op.kind, OpKind::ClusterArrive | OpKind::ClusterArriveRelaxed) {
                    match cx.cluster_arrive.take() {
                        Some(a) if cx.sites[a].seg == cx.seg => {
                            self.push(cx, sp, CLUSTER_BARRIER.into(), int(0), SiteKind::WaitToken { arrive: a });
                        }
                        _ => {
                            return unsupported(
                                sp,
                                "a cluster_wait without a cluster_arrive before it in the same loop iteration: prove pairs each wait with its arrive",
                            )?
                        }
                    }
                }
                None
            }
            // Anything the summary was not taught is a statement it does not understand: the proof
            // is `unknown` there, never a guess.
            #[allow(unreachable_patterns)]
            other => return unsupported(sp, &format!("`{}` is modelled only by the explicit search", other.keyword()))?,
        })
    }

    /// An arrive-on happens when the copies land, possibly after the thread's later
    /// arrivals: the j-th arrival of the thread is the j-th phase's only if all its arrivals
    /// on that barrier are arrive-ons (then which is j-th does not matter). A `.noinc` arrive-on
    /// followed, with no wait on the barrier between, by an arrival of the thread under the
    /// same guard is counted with that arrival, in its round: the phase then needs both, so a
    /// count that leaves the arrive-on out is refuted. The arrive-on may also come a phase
    /// later, which the explicit search models: such a protocol is refuted (once the search
    /// confirms it), never proved. Any other mix is refused.
    pub(super) fn fold_arrive_ons(&self, cx: &mut Ctx) -> R<()> {
        let is_wait = |k: &SiteKind| matches!(k, SiteKind::WaitParity { .. } | SiteKind::WaitToken { .. });
        let mut folds: Vec<(usize, usize)> = Vec::new();
        for &a in &cx.async_arrivals {
            let g = &cx.sites[a].group;
            let own = |x: &Site| &x.group == g && matches!(x.kind, SiteKind::Arrive { .. }) && !cx.async_arrivals.contains(&x.pos);
            let Some(x) = cx.sites.iter().find(|x| own(x)) else { continue };
            let (sa, next) = (&cx.sites[a], cx.sites[a + 1..].iter().find(|y| &y.group == g));
            match next {
                Some(y) if own(y) && y.seg == sa.seg && y.share == sa.share && y.guard == sa.guard && !is_wait(&y.kind) => {
                    folds.push((a, y.pos))
                }
                _ => {
                    return unsupported(
                        x.span,
                        format!("an arrival on `{g}` by a thread that also arrives on it through cp_async_arrive_noinc, whose arrive-on may come later: the order of its arrivals is modelled only by the explicit search"),
                    )?
                }
            }
        }
        for &(a, into) in &folds {
            let SiteKind::Arrive { n: extra, .. } = cx.sites[a].kind.clone() else {
                unreachable!()
            };
            if let SiteKind::Arrive { n, .. } = &mut cx.sites[into].kind {
                *n = n.clone().add(extra);
            }
        }
        // the folded arrive-ons leave the site list, the positions after them move down
        for &(a, _) in folds.iter().rev() {
            self.refute_only.borrow_mut().get_or_insert(Unsupported {
                span: cx.sites[a].span,
                why: format!("a cp_async_arrive_noinc on `{}` beside the thread's own arrival: its arrive-on may land in the next phase, which only the explicit search models (the laws can be refuted here, not proved)", cx.sites[a].group),
            });
            cx.sites.remove(a);
            for x in cx.sites.iter_mut().skip(a) {
                x.pos -= 1;
            }
            for x in cx.sites.iter_mut() {
                if let SiteKind::WaitToken { arrive } = &mut x.kind {
                    if *arrive > a {
                        *arrive -= 1;
                    }
                }
            }
            for c in cx.group_commits.iter_mut().chain(cx.async_arrivals.iter_mut()) {
                if *c > a {
                    *c -= 1;
                }
            }
            cx.async_arrivals.retain(|&x| x != a);
            if let Some(c) = cx.cluster_arrive.as_mut().filter(|c| **c > a) {
                *c -= 1;
            }
        }
        Ok(())
    }
}
