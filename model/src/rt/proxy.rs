//! The async proxy: TMA stores and their bulk async-groups, wgmma operand reads, and
//! the proxy fences (`fence_proxy_async`, `fence_mbarrier_init`).
//!
//! Shared memory is reached through two proxies. Threads read and write it through the *generic*
//! proxy; TMA copies, TMA stores and wgmma operand fetches go through the *async* proxy. PTX
//! orders the two only through a proxy fence: a generic write is seen by a later async-proxy
//! operation when a `fence.proxy.async` lies between them in happens-before, and an mbarrier
//! `init` is seen by the async proxy (a TMA copy's complete_tx) after a `fence.mbarrier_init`.
//!
//! An asynchronous read (a store's or a wgmma's) is in flight from its issue until its issuer
//! retires it with a wait on its group (`wait_group`/`wait_group_read` for bulk groups,
//! `wgmma_wait` for wgmma groups). Nothing else promises the read is over, so the model keeps it
//! in flight until then instead of letting it end at an arbitrary moment: any write of the buffer
//! before the retiring wait races with it, whenever the hardware actually finished. When the wait
//! retires it, the read is recorded as a read of the buffer by the waiting thread at that point,
//! so a later write races with it unless it is ordered after that wait (the usual
//! release/acquire chains carry it to other threads).

use super::*;
use crate::rt::footprint::Touch;

/// The operations of the async proxy: its asynchronous reads of shared memory and the fences that
/// order the generic proxy with it.
#[derive(Clone, Debug)]
pub enum ProxyOp {
    /// `copy_store_async(BUF)`: a TMA store; the async proxy reads `buf` until the bulk group
    /// holding it is waited for.
    StoreAsync { buf: Ref },
    /// `copy_store_async(BUF, offset = O, bytes = N)`: a TMA store of bytes `O .. O + N` of
    /// `buf`; the async proxy reads that range only (races and the proxy fence are judged on it).
    StorePartAsync { buf: Ref, offset: IExpr, bytes: IExpr },
    /// `commit_group()`: the thread's uncommitted bulk operations form its newest bulk group.
    CommitGroup,
    /// `wait_group(N)` / `wait_group_read(N)`: every bulk group of the thread but the `N` newest
    /// is complete (the model retires their reads here).
    WaitGroup { n: IExpr, read: bool },
    /// `wgmma_async(BUF...)`: one wgmma group reading these operand buffers; with `expect`, the
    /// version they must hold. `warpgroup` (`warpgroup_mma`): the group is the warpgroup's.
    Wgmma {
        bufs: Vec<Ref>,
        expect: Option<IExpr>,
        warpgroup: bool,
    },
    /// `wgmma_wait(N)`: every wgmma group of the thread but the `N` newest is complete;
    /// `warpgroup_wait(N)`: of the thread's warpgroup (see `warpgroup_wait_ready`).
    WgmmaWait { n: IExpr, warpgroup: bool },
    /// `fence_proxy_async()`.
    FenceProxyAsync,
    /// `fence_mbarrier_init()`.
    FenceMbarrierInit,
    /// `fence_proxy_tensormap(MAP)`: the edits of the descriptor `map` ordered before the fence
    /// become visible to the tensor copies the thread issues after it.
    FenceProxyTensormap { map: Ref },
}

impl ProxyOp {
    /// For the partial-order reduction (docs/model.md, "The async proxy"). An asynchronous read's
    /// issue reads its buffer (its checks look at the buffer's writes and fence flag; writers of
    /// the buffer look at the read in flight); the issuer's group operations change only its own
    /// entries of `State::proxy`; a wait that retires reads reads their buffers; a fence writes
    /// the fence flags it may clear.
    pub fn touch(&self) -> Touch<'_> {
        use crate::rt::footprint::PhaseEffect as P;
        match self {
            // A store of part of a buffer is given the whole buffer's footprint (larger than its
            // effect: only more steps are dependent).
            ProxyOp::StoreAsync { buf } | ProxyOp::StorePartAsync { buf, .. } => Touch::objects(None, Some((buf, false)), P::None),
            ProxyOp::Wgmma { bufs, warpgroup, .. } => match bufs.split_first() {
                Some((first, rest)) => Touch {
                    reads: rest,
                    warpgroup: *warpgroup,
                    ..Touch::objects(None, Some((first, false)), P::None)
                },
                None => Touch::objects(None, None, P::None),
            },
            ProxyOp::CommitGroup => Touch::objects(None, None, P::None),
            ProxyOp::WaitGroup { .. } => Touch {
                retires: true,
                ..Touch::objects(None, None, P::None)
            },
            ProxyOp::WgmmaWait { warpgroup, .. } => Touch {
                retires: true,
                warpgroup: *warpgroup,
                ..Touch::objects(None, None, P::None)
            },
            ProxyOp::FenceProxyAsync | ProxyOp::FenceMbarrierInit => Touch {
                fence: true,
                ..Touch::objects(None, None, P::None)
            },
            // It clears the descriptor's unfenced edits, kept in the descriptor's own record.
            ProxyOp::FenceProxyTensormap { map } => Touch {
                fence: true,
                ..Touch::objects(None, Some((map, true)), P::None)
            },
        }
    }

    /// Every expression the operation evaluates, outermost ones.
    pub fn exprs(&self, f: &mut dyn FnMut(&IExpr)) {
        match self {
            ProxyOp::StoreAsync { buf } => buf.exprs(f),
            ProxyOp::StorePartAsync { buf, offset, bytes } => {
                buf.exprs(f);
                f(offset);
                f(bytes)
            }
            ProxyOp::Wgmma { bufs, expect, .. } => {
                for b in bufs {
                    b.exprs(f)
                }
                if let Some(e) = expect {
                    f(e)
                }
            }
            ProxyOp::WaitGroup { n, .. } | ProxyOp::WgmmaWait { n, .. } => f(n),
            ProxyOp::CommitGroup | ProxyOp::FenceProxyAsync | ProxyOp::FenceMbarrierInit => {}
            ProxyOp::FenceProxyTensormap { map } => map.exprs(f),
        }
    }

    /// The statement's name in the language.
    pub fn name(&self) -> &'static str {
        match self {
            ProxyOp::StoreAsync { .. } | ProxyOp::StorePartAsync { .. } => "copy_store_async",
            ProxyOp::CommitGroup => "commit_group",
            ProxyOp::WaitGroup { .. } => "wait_group",
            ProxyOp::Wgmma { warpgroup: false, .. } => "wgmma_async",
            ProxyOp::Wgmma { warpgroup: true, .. } => "warpgroup_mma",
            ProxyOp::WgmmaWait { warpgroup: false, .. } => "wgmma_wait",
            ProxyOp::WgmmaWait { warpgroup: true, .. } => "warpgroup_wait",
            ProxyOp::FenceProxyAsync => "fence_proxy_async",
            ProxyOp::FenceMbarrierInit => "fence_mbarrier_init",
            ProxyOp::FenceProxyTensormap { .. } => "fence_proxy_tensormap",
        }
    }
}

/// What the async proxy is doing to shared memory, and what the generic proxy has not yet fenced
/// for it (docs/semantics.md, "The async proxy").
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProxyState {
    /// Asynchronous reads of shared memory (TMA stores, wgmma operands) issued and not yet
    /// retired by a wait of their issuer, in issue order.
    pub reads: Vec<AsyncRead>,
    /// Per barrier: initialised by a thread's `init` that the thread has not yet followed with a
    /// `fence_mbarrier_init` (or `fence_proxy_async`).
    pub unfenced_init: Box<[bool]>,
    /// Blackwell's tensor memory (rt/tcgen05.rs): a word per buffer (the columns a region
    /// holds, whether an MMA completed into it, the thread of its last MMA), then a flag per CTA
    /// (it relinquished the allocation permit); empty when the protocol has no tcgen05 statement.
    pub tmem: Box<[u32]>,
}

/// An asynchronous read of a buffer by the async proxy, issued by a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AsyncRead {
    pub buf: u16,
    /// The bytes `lo .. hi` of `buf` it reads (the whole buffer but for a partial store).
    pub lo: u32,
    pub hi: u32,
    pub issuer: u16,
    /// A wgmma operand (its group is a wgmma group); else a TMA store (a bulk group).
    pub wgmma: bool,
    /// A `warpgroup_mma` operand: its group is the issuer's warpgroup's (`age` still counts the
    /// issuer's own groups; `Protocol::warpgroup_of` says which agents share them).
    pub warpgroup: bool,
    /// A `warpgroup_mma` operand read that a wait of the warpgroup saw complete: the epoch of
    /// the buffer's async engine its read is recorded at (0: still in flight).
    pub done: u32,
    /// The agents of the warpgroup (bits in `Protocol::warpgroup_of` order) whose wait covered
    /// it; the entry is dropped once all have.
    pub waited: u64,
    /// 0: not yet in a committed group (bulk only); k >= 1: its group is the issuer's k-th newest.
    pub age: u16,
    /// The statement that issued it.
    pub stmt: crate::lang::ast::Span,
}

impl Protocol {
    /// The agents of thread `t`'s warpgroup: the agents of its role whose warps lie in the same
    /// four consecutive warps, counted from the role's first warp (a role declared `warpgroups
    /// N` holds N of them; `warpgroup_mma` is refused elsewhere, E117).
    pub fn warpgroup_of(&self, t: usize) -> Vec<usize> {
        let me = &self.threads[t];
        let first = self.roles[me.role as usize].first_gtid / self.warp_size;
        let group = |w: u32| (w - first) / 4;
        self.threads
            .iter()
            .enumerate()
            .filter(|(_, o)| o.role == me.role && group(o.warp) == group(me.warp))
            .map(|(a, _)| a)
            .collect()
    }
}

impl Model {
    /// Whether thread `t`, standing at a `warpgroup_wait(N)`, may pass it now: the groups it
    /// waits for are complete only once every agent of its warpgroup has issued them
    /// (`wgmma.mma_async` is `.sync.aligned`: the MMA runs once the whole warpgroup issued it).
    /// An agent that exited without issuing keeps the others waiting (a deadlock). True for
    /// every other instruction, and when N cannot be evaluated (the step reports the fault).
    pub fn warpgroup_wait_ready(&self, s: &State, t: usize) -> bool {
        let th = &s.threads[t];
        let Some(Instr {
            kind:
                InstrKind::Op {
                    op: IOp::Proxy(ProxyOp::WgmmaWait { n, warpgroup: true }),
                    ..
                },
            ..
        }) = self.proto.code_of(t).instrs.get(th.pc as usize)
        else {
            return true;
        };
        let me = &self.proto.threads[t];
        let Ok(keep) = n.eval(&th.locals, Some(me), &mut |v| Ok(s.vars[v as usize].value)) else {
            return true;
        };
        let issued = |a: usize| -> i64 {
            s.proxy
                .reads
                .iter()
                .filter(|r| r.issuer as usize == a && r.warpgroup)
                .map(|r| r.age as i64)
                .max()
                .unwrap_or(0)
        };
        let least = self.proto.warpgroup_of(t).into_iter().map(issued).min().unwrap_or(0);
        issued(t) - least <= keep
    }
}

/// Whether the protocol can observe the async proxy: it has an async-proxy statement, or it
/// initialises a barrier in a thread and issues async copies (a copy on a barrier whose init
/// is not fenced for the async proxy). Otherwise `State::proxy` never changes.
pub(super) fn uses_async_proxy(p: &Protocol) -> bool {
    let ops = || {
        p.roles
            .iter()
            .flat_map(|r| r.code.instrs.iter())
            .chain(p.completions.iter().flat_map(|c| c.instrs.iter()))
            .filter_map(|i| match &i.kind {
                InstrKind::Op { op, .. } => Some(op),
                _ => None,
            })
    };
    let proxy_op = ops().any(|op| {
        matches!(
            op,
            IOp::Proxy(ProxyOp::StoreAsync { .. })
                | IOp::Proxy(ProxyOp::StorePartAsync { .. })
                | IOp::Proxy(ProxyOp::CommitGroup)
                | IOp::Proxy(ProxyOp::WaitGroup { .. })
                | IOp::Proxy(ProxyOp::Wgmma { .. })
                | IOp::Proxy(ProxyOp::WgmmaWait { .. })
                | IOp::Proxy(ProxyOp::FenceProxyAsync)
                | IOp::Proxy(ProxyOp::FenceMbarrierInit)
                | IOp::Proxy(ProxyOp::FenceProxyTensormap { .. })
                | IOp::Copy(CopyOp::Tensor { .. })
        )
    });
    // A copy from shared memory reads its source through the async proxy (a remote op).
    let copy_from = ops().any(|op| matches!(op, IOp::Remote { op, .. } if matches!(**op, IOp::Copy(CopyOp::CopyFrom { .. }))));
    proxy_op
        || copy_from
        || ops().any(|op| matches!(op, IOp::Tc(_)))
        || (ops().any(|op| matches!(op, IOp::Mbar(MbarOp::Init { .. }))) && ops().any(|op| matches!(op, IOp::Copy(CopyOp::Copy { .. }))))
}

impl Exec<'_> {
    /// Execute one async-proxy operation of the current thread.
    pub(super) fn proxy_op(&mut self, op: &ProxyOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        let Some(t) = self.thread.filter(|_| !self.in_completion) else {
            self.broken(
                "R-PROXY",
                "an async-proxy operation executed outside a thread's own code".to_string(),
            );
            return Err(());
        };
        match op {
            ProxyOp::StoreAsync { buf } => {
                let d = self.resolve_buf(buf, locals)?;
                let size = self.p().buffers[d].bytes;
                self.async_read_issue(t, d, (0, size), false, false, "a TMA store (copy_store_async)");
                Ok(None)
            }
            ProxyOp::StorePartAsync { buf, offset, bytes } => {
                let d = self.resolve_buf(buf, locals)?;
                let off = self.ev(offset, locals)?;
                let n = self.ev(bytes, locals)?;
                self.range_ok(d, off, off + n)?;
                self.async_read_issue(t, d, (off, off + n), false, false, "a TMA store (copy_store_async)");
                Ok(None)
            }
            ProxyOp::Wgmma { bufs, expect, warpgroup } => {
                let (ds, want) = self.mma_operands(bufs, expect, locals)?;
                // wgmma.commit_group is folded in: the operands of this statement are one group,
                // the thread's newest (of its warpgroup's groups, for `warpgroup_mma`).
                let wg = *warpgroup;
                for r in self
                    .s
                    .proxy
                    .reads
                    .iter_mut()
                    .filter(|r| r.issuer as usize == t && r.wgmma && r.warpgroup == wg)
                {
                    r.age = r.age.saturating_add(1);
                }
                let what = if wg { "warpgroup_mma" } else { "wgmma_async" };
                for d in ds {
                    let size = self.p().buffers[d].bytes;
                    self.async_read_issue(t, d, (0, size), true, wg, what);
                    if let Some(w) = want {
                        self.operand_version(d, w, what);
                    }
                }
                Ok(None)
            }
            ProxyOp::CommitGroup => {
                for r in self.s.proxy.reads.iter_mut().filter(|r| r.issuer as usize == t && !r.wgmma) {
                    r.age = r.age.saturating_add(1);
                }
                Ok(None)
            }
            ProxyOp::WgmmaWait { n, warpgroup: true } => {
                let n = self.ev(n, locals)?;
                if n < 0 {
                    self.fail(
                        K::Assertion,
                        format!("{}: warpgroup_wait({n}) names a negative number of groups", self.label()),
                    );
                    return Err(());
                }
                self.retire_warpgroup(t, n);
                Ok(None)
            }
            ProxyOp::WaitGroup { n, .. } | ProxyOp::WgmmaWait { n, .. } => {
                let wgmma = matches!(op, ProxyOp::WgmmaWait { .. });
                let n = self.ev(n, locals)?;
                if n < 0 {
                    let what = if wgmma { "wgmma_wait" } else { "wait_group" };
                    self.fail(
                        K::Assertion,
                        format!("{}: {what}({n}) names a negative number of groups", self.label()),
                    );
                    return Err(());
                }
                self.retire(t, wgmma, n);
                Ok(None)
            }
            ProxyOp::FenceProxyAsync => {
                // Every generic write ordered before the fence is now visible to the async proxy,
                // and so is every init ordered before it (the programming guide fences TMA
                // barriers' inits with fence.proxy.async).
                let clock = self.s.threads[t].clock.clone();
                // A descriptor's edits go to the tensormap proxy, which this fence does not
                // cover (PTX orders them with fence.proxy.tensormap::generic only).
                let p = self.p();
                for d in (0..self.s.buffers.len()).filter(|&d| !p.buffers[d].tensormap) {
                    // Per byte range: the fence covers a range once the range's last write (the
                    // generic write that left it unfenced) is ordered before it, so warps that
                    // each fence their own fragment of a tile cover their fragments only.
                    self.s.buffers[d].fence_covered(t, &clock);
                }
                for b in 0..self.s.barriers.len() {
                    if self.s.proxy.unfenced_init[b]
                        && self.s.barriers[b]
                            .init_by
                            .is_some_and(|(a, e)| a as usize == t || clock[a as usize] >= e)
                    {
                        self.s.proxy.unfenced_init[b] = false;
                    }
                }
                Ok(None)
            }
            ProxyOp::FenceProxyTensormap { map } => {
                // As fence_proxy_async for the one descriptor: its edits ordered before the
                // fence (the thread's own, or another's it acquired) are visible to the TMA unit.
                let d = self.resolve_buf(map, locals)?;
                let clock = self.s.threads[t].clock.clone();
                self.s.buffers[d].fence_covered(t, &clock);
                Ok(None)
            }
            ProxyOp::FenceMbarrierInit => {
                // fence.mbarrier_init orders the executing thread's own earlier inits.
                for b in 0..self.s.barriers.len() {
                    if self.s.barriers[b].init_by.is_some_and(|(a, _)| a as usize == t) {
                        self.s.proxy.unfenced_init[b] = false;
                    }
                }
                self.fence_cta_inits(t);
                Ok(None)
            }
        }
    }

    /// An MMA's operand buffers (wgmma, tcgen05) and the version its `expect = V` names.
    pub(super) fn mma_operands(&mut self, bufs: &[Ref], expect: &Option<IExpr>, locals: Option<&[i64]>) -> R<(Vec<usize>, Option<i64>)> {
        let mut ds = Vec::with_capacity(bufs.len());
        for b in bufs {
            ds.push(self.resolve_buf(b, locals)?);
        }
        let want = match expect {
            Some(e) => Some(self.ev(e, locals)?),
            None => None,
        };
        Ok((ds, want))
    }

    /// The async proxy starts reading buffer `d` for thread `t`: the data it reads must be
    /// ordered before the issue (happens-before) and visible to the async proxy (fenced).
    fn async_read_issue(&mut self, t: usize, d: usize, (lo, hi): (i64, i64), wgmma: bool, warpgroup: bool, what: &str) {
        self.async_read_checks(t, d, (lo, hi), what);
        let age = if wgmma { 1 } else { 0 };
        self.s.proxy.reads.push(AsyncRead {
            buf: d as u16,
            lo: lo as u32,
            hi: hi as u32,
            issuer: t as u16,
            wgmma,
            warpgroup,
            done: 0,
            waited: 0,
            age,
            stmt: self.stmt,
        });
        self.obs.push(Obs::AsyncReadIssued { buf: d as u16, wgmma });
    }

    /// What an asynchronous read of bytes `lo .. hi` of buffer `d` issued by thread `t` requires:
    /// the data it reads ordered before the issue (happens-before) and visible to the async proxy
    /// (fenced).
    pub(super) fn async_read_checks(&mut self, t: usize, d: usize, (lo, hi): (i64, i64), what: &str) {
        let cell = &self.s.buffers[d];
        let name = self.p().buffers[d].name.clone();
        let size = self.p().buffers[d].bytes;
        let whole = lo <= 0 && hi >= size;
        let flying = if whole {
            cell.in_flight
        } else {
            self.flying_over(d, lo, hi).is_some()
        };
        if flying {
            let msg = format!(
                "{} issues {what} reading {name} before the async copy into it has landed and been waited for",
                self.label()
            );
            self.fail(K::DataRace, msg);
        } else if let Some(w) = {
            let unordered = cell
                .writes_over(lo, hi)
                .find(|w| w.agent as usize != t && !ordered_before(w, self.clock()))
                .copied();
            unordered
        } {
            self.race(true, d, &format!("issues {what} reading"), Some(&w), "last write");
        } else if let Some(w) = self.s.buffers[d].unfenced_over(lo, hi) {
            let msg = format!(
                "{} issues {what} reading {name} through the async proxy, but the last write to it (by {}, through the generic proxy) is not followed by a fence_proxy_async ordered before the issue: a data race across proxies",
                self.label(),
                self.agent_label(&w)
            );
            self.fail(K::DataRace, msg);
        }
    }

    /// Thread `t` waits until all but its `keep` newest groups (of wgmma or bulk operations) are
    /// complete: their reads end here, as reads by `t` at this point.
    fn retire(&mut self, t: usize, wgmma: bool, keep: i64) {
        let mut i = 0;
        while i < self.s.proxy.reads.len() {
            let r = self.s.proxy.reads[i];
            if r.issuer as usize == t && r.wgmma == wgmma && !r.warpgroup && r.age >= 1 && r.age as i64 > keep {
                self.s.proxy.reads.remove(i);
                let acc = self.access();
                self.record_read(r.buf as usize, (r.lo as i64, r.hi as i64), acc);
                self.obs.push(Obs::AsyncReadDone { buf: r.buf, wgmma });
            } else {
                i += 1;
            }
        }
    }

    /// The operand buffer `d` an MMA reads must hold version `want` in every byte: otherwise the
    /// MMA multiplies other data than the protocol means (a stale read, as for `read`).
    pub(super) fn operand_version(&mut self, d: usize, want: i64, what: &str) {
        let size = self.p().buffers[d].bytes;
        let got = self.version_in(d, 0, size);
        if got != want {
            let msg = format!(
                "{} issues {what} reading {} of {} as an operand, but the protocol means version {want}",
                self.label(),
                super::memory::version_text(got),
                self.p().buffers[d].name
            );
            self.fail(K::StaleRead, msg);
        }
    }

    /// `warpgroup_wait(keep)` by agent `t`: every group of its warpgroup but the `keep` newest of
    /// `t`'s is complete (the step is enabled only once every agent of the warpgroup has issued
    /// them: `Model::warpgroup_wait_ready`). The MMA is one operation of the warpgroup, so its
    /// operand reads end once, at the first wait that sees them complete: each is recorded as a
    /// read by the buffer's async engine at a fresh epoch (`AsyncRead::done`), and every agent of
    /// the warpgroup whose own wait covers the group acquires that epoch (it knows the read is
    /// over, and nothing else). One signalling thread of the warpgroup may then release the
    /// operands after its own wait, without a sync with the other warps. An entry is dropped
    /// once every agent of the warpgroup has waited for it.
    fn retire_warpgroup(&mut self, t: usize, keep: i64) {
        let members = self.p().warpgroup_of(t);
        let n = self.p().threads.len();
        let bit = |a: usize| members.iter().position(|&m| m == a).map_or(0u64, |i| 1u64 << (i % 64));
        let all = members.iter().fold(0u64, |m, &a| m | bit(a));
        let issued = |s: &ProxyState, a: usize| -> i64 {
            s.reads
                .iter()
                .filter(|r| r.issuer as usize == a && r.warpgroup)
                .map(|r| r.age as i64)
                .max()
                .unwrap_or(0)
        };
        let mine = issued(&self.s.proxy, t);
        let counts: Vec<(usize, i64)> = members.iter().map(|&a| (a, issued(&self.s.proxy, a))).collect();
        let mut ended: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < self.s.proxy.reads.len() {
            let r = self.s.proxy.reads[i];
            let own = counts.iter().find(|(a, _)| *a == r.issuer as usize).map(|&(_, c)| c);
            // Agent a's group of age k is the warpgroup's group `issued_a - k + 1` (counted from
            // the oldest not dropped); `t` waits for those up to `mine - keep`.
            let covered = r.warpgroup && own.is_some_and(|c| r.age as i64 >= c - mine + keep + 1);
            if !covered {
                i += 1;
                continue;
            }
            let d = r.buf as usize;
            let done = if r.done != 0 {
                r.done
            } else {
                let epoch = self.s.engines[d][n + d];
                if !ended.contains(&d) {
                    ended.push(d);
                    let acc = Access {
                        agent: (n + d) as u16,
                        epoch,
                        in_completion: false,
                        atomic: false,
                    };
                    self.record_read(d, (r.lo as i64, r.hi as i64), acc);
                    self.obs.push(Obs::AsyncReadDone { buf: r.buf, wgmma: true });
                }
                epoch
            };
            let clock = &mut self.s.threads[t].clock[n + d];
            *clock = (*clock).max(done);
            let e = &mut self.s.proxy.reads[i];
            e.done = done;
            e.waited |= bit(t);
            if e.waited == all {
                self.s.proxy.reads.remove(i);
            } else {
                i += 1;
            }
        }
        // Later events of the engines (landings, later MMAs' reads) are not known to the waiters.
        for d in ended {
            self.s.engines[d][n + d] += 1;
        }
    }

    /// A write (a thread's, or a copy's issue) into buffer `d` while the async proxy still reads
    /// it: a data race, whoever writes.
    pub(super) fn check_async_reads(&mut self, d: usize) {
        let size = self.p().buffers[d].bytes;
        self.check_async_reads_over(d, 0, size)
    }

    /// A write of bytes `lo .. hi` of buffer `d` while the async proxy still reads any of them (a
    /// tcgen05 MMA reads its operand buffers whole).
    pub(super) fn check_async_reads_over(&mut self, d: usize, lo: i64, hi: i64) {
        self.check_mma_reads(d);
        self.check_source_reads(d, lo, hi);
        let Some(r) = self
            .s
            .proxy
            .reads
            .iter()
            .find(|r| r.buf as usize == d && r.done == 0 && super::memory::overlaps((r.lo as i64, r.hi as i64), (lo, hi)))
            .copied()
        else {
            return;
        };
        let how = if r.warpgroup {
            "a warpgroup_mma issued by {} still reads it as an operand (no warpgroup_wait of its warpgroup saw it complete yet)"
        } else if r.wgmma {
            "a wgmma_async issued by {} still reads it as an operand (no wgmma_wait retired it yet)"
        } else {
            "a TMA store issued by {} still reads it (no wait_group_read retired its group yet)"
        }
        .replace("{}", &self.p().thread_label(r.issuer as usize));
        let msg = format!("{} overwrites {} while {how}", self.label(), self.p().buffers[d].name);
        self.fail(if self.in_completion { K::CompletionMisuse } else { K::DataRace }, msg);
    }

    /// Whether barrier `b` was initialised by a thread that has not made the init visible to the
    /// async proxy yet: a TMA copy completing on it is a use before the init is visible.
    pub(super) fn check_init_fenced(&mut self, b: usize) -> R<()> {
        if !self.s.proxy.unfenced_init[b] {
            return Ok(());
        }
        let who = self.s.barriers[b]
            .init_by
            .map(|(a, e)| {
                self.agent_label(&Access {
                    agent: a,
                    epoch: e,
                    in_completion: false,
                    atomic: false,
                })
            })
            .unwrap_or_default();
        self.fail(
            K::Uninitialized,
            format!(
                "{} issues an async copy that completes on {}, but the init by {who} is not visible to the async proxy (no fence_mbarrier_init or fence_proxy_async after it)",
                self.label(),
                self.p().barriers[b].name
            ),
        );
        Err(())
    }
}
