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
    /// `commit_group()`: the thread's uncommitted bulk operations form its newest bulk group.
    CommitGroup,
    /// `wait_group(N)` / `wait_group_read(N)`: every bulk group of the thread but the `N` newest
    /// is complete (the model retires their reads here).
    WaitGroup { n: IExpr, read: bool },
    /// `wgmma_async(BUF...)`: one wgmma group reading these operand buffers.
    Wgmma { bufs: Vec<Ref> },
    /// `wgmma_wait(N)`: every wgmma group of the thread but the `N` newest is complete.
    WgmmaWait { n: IExpr },
    /// `fence_proxy_async()`.
    FenceProxyAsync,
    /// `fence_mbarrier_init()`.
    FenceMbarrierInit,
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
            ProxyOp::StoreAsync { buf } => Touch::objects(None, Some((buf, false)), P::None),
            ProxyOp::Wgmma { bufs } => match bufs.split_first() {
                Some((first, rest)) => Touch {
                    reads: rest,
                    ..Touch::objects(None, Some((first, false)), P::None)
                },
                None => Touch::objects(None, None, P::None),
            },
            ProxyOp::CommitGroup => Touch::objects(None, None, P::None),
            ProxyOp::WaitGroup { .. } | ProxyOp::WgmmaWait { .. } => Touch {
                retires: true,
                ..Touch::objects(None, None, P::None)
            },
            ProxyOp::FenceProxyAsync | ProxyOp::FenceMbarrierInit => Touch {
                fence: true,
                ..Touch::objects(None, None, P::None)
            },
        }
    }

    /// Every expression the operation evaluates, outermost ones.
    pub fn exprs(&self, f: &mut dyn FnMut(&IExpr)) {
        match self {
            ProxyOp::StoreAsync { buf } => buf.exprs(f),
            ProxyOp::Wgmma { bufs } => {
                for b in bufs {
                    b.exprs(f)
                }
            }
            ProxyOp::WaitGroup { n, .. } | ProxyOp::WgmmaWait { n } => f(n),
            ProxyOp::CommitGroup | ProxyOp::FenceProxyAsync | ProxyOp::FenceMbarrierInit => {}
        }
    }

    /// The statement's name in the language.
    pub fn name(&self) -> &'static str {
        match self {
            ProxyOp::StoreAsync { .. } => "copy_store_async",
            ProxyOp::CommitGroup => "commit_group",
            ProxyOp::WaitGroup { .. } => "wait_group",
            ProxyOp::Wgmma { .. } => "wgmma_async",
            ProxyOp::WgmmaWait { .. } => "wgmma_wait",
            ProxyOp::FenceProxyAsync => "fence_proxy_async",
            ProxyOp::FenceMbarrierInit => "fence_mbarrier_init",
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
    /// Per buffer: its last write is a generic-proxy write (a thread's `write`) that no
    /// `fence_proxy_async` ordered after it has covered yet.
    pub unfenced_write: Box<[bool]>,
    /// Per barrier: initialised by a thread's `init` that the thread has not yet followed with a
    /// `fence_mbarrier_init` (or `fence_proxy_async`).
    pub unfenced_init: Box<[bool]>,
}

/// An asynchronous read of a buffer by the async proxy, issued by a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AsyncRead {
    pub buf: u16,
    pub issuer: u16,
    /// A wgmma operand (its group is a wgmma group); else a TMA store (a bulk group).
    pub wgmma: bool,
    /// 0: not yet in a committed group (bulk only); k >= 1: its group is the issuer's k-th newest.
    pub age: u16,
    /// The statement that issued it.
    pub stmt: crate::lang::ast::Span,
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
                | IOp::Proxy(ProxyOp::CommitGroup)
                | IOp::Proxy(ProxyOp::WaitGroup { .. })
                | IOp::Proxy(ProxyOp::Wgmma { .. })
                | IOp::Proxy(ProxyOp::WgmmaWait { .. })
                | IOp::Proxy(ProxyOp::FenceProxyAsync)
                | IOp::Proxy(ProxyOp::FenceMbarrierInit)
        )
    });
    proxy_op
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
                self.async_read_issue(t, d, false, "a TMA store (copy_store_async)");
                Ok(None)
            }
            ProxyOp::Wgmma { bufs } => {
                let mut ds = Vec::with_capacity(bufs.len());
                for b in bufs {
                    ds.push(self.resolve_buf(b, locals)?);
                }
                // wgmma.commit_group is folded in: the operands of this statement are one group,
                // the thread's newest.
                for r in self.s.proxy.reads.iter_mut().filter(|r| r.issuer as usize == t && r.wgmma) {
                    r.age = r.age.saturating_add(1);
                }
                for d in ds {
                    self.async_read_issue(t, d, true, "wgmma_async");
                }
                Ok(None)
            }
            ProxyOp::CommitGroup => {
                for r in self.s.proxy.reads.iter_mut().filter(|r| r.issuer as usize == t && !r.wgmma) {
                    r.age = r.age.saturating_add(1);
                }
                Ok(None)
            }
            ProxyOp::WaitGroup { n, .. } | ProxyOp::WgmmaWait { n } => {
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
                for d in 0..self.s.buffers.len() {
                    // Per buffer: the fence covers the buffer once every range's last write is
                    // ordered before it (docs/known-debts.md: a fence per writer of disjoint
                    // ranges, each before a barrier, is not tracked apart).
                    if self.s.proxy.unfenced_write[d]
                        && self.s.buffers[d]
                            .last_writes()
                            .all(|w| w.agent as usize == t || ordered_before(w, &clock))
                    {
                        self.s.proxy.unfenced_write[d] = false;
                    }
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
            ProxyOp::FenceMbarrierInit => {
                // fence.mbarrier_init orders the executing thread's own earlier inits.
                for b in 0..self.s.barriers.len() {
                    if self.s.barriers[b].init_by.is_some_and(|(a, _)| a as usize == t) {
                        self.s.proxy.unfenced_init[b] = false;
                    }
                }
                Ok(None)
            }
        }
    }

    /// The async proxy starts reading buffer `d` for thread `t`: the data it reads must be
    /// ordered before the issue (happens-before) and visible to the async proxy (fenced).
    fn async_read_issue(&mut self, t: usize, d: usize, wgmma: bool, what: &str) {
        let cell = &self.s.buffers[d];
        let name = self.p().buffers[d].name.clone();
        if cell.in_flight {
            let msg = format!(
                "{} issues {what} reading {name} before the async copy into it has landed and been waited for",
                self.label()
            );
            self.fail(K::DataRace, msg);
        } else if let Some(w) = {
            let unordered = cell
                .last_writes()
                .find(|w| w.agent as usize != t && !ordered_before(w, self.clock()))
                .copied();
            unordered
        } {
            self.race(true, d, &format!("issues {what} reading"), Some(&w), "last write");
        } else if let Some(w) = self.s.proxy.unfenced_write[d]
            .then(|| self.s.buffers[d].last_writes().last().copied())
            .flatten()
        {
            let msg = format!(
                "{} issues {what} reading {name} through the async proxy, but the last write to it (by {}, through the generic proxy) is not followed by a fence_proxy_async ordered before the issue: a data race across proxies",
                self.label(),
                self.agent_label(&w)
            );
            self.fail(K::DataRace, msg);
        }
        let age = if wgmma { 1 } else { 0 };
        self.s.proxy.reads.push(AsyncRead {
            buf: d as u16,
            issuer: t as u16,
            wgmma,
            age,
            stmt: self.stmt,
        });
        self.obs.push(Obs::AsyncReadIssued { buf: d as u16, wgmma });
    }

    /// Thread `t` waits until all but its `keep` newest groups (of wgmma or bulk operations) are
    /// complete: their reads end here, as reads by `t` at this point.
    fn retire(&mut self, t: usize, wgmma: bool, keep: i64) {
        let mut i = 0;
        while i < self.s.proxy.reads.len() {
            let r = self.s.proxy.reads[i];
            if r.issuer as usize == t && r.wgmma == wgmma && r.age >= 1 && r.age as i64 > keep {
                self.s.proxy.reads.remove(i);
                let acc = self.access();
                let cell = &mut self.s.buffers[r.buf as usize];
                match cell.reads.binary_search_by_key(&acc.agent, |a| a.agent) {
                    Ok(k) => cell.reads[k] = acc,
                    Err(k) => cell.reads.insert(k, acc),
                }
                self.obs.push(Obs::AsyncReadDone { buf: r.buf, wgmma });
            } else {
                i += 1;
            }
        }
    }

    /// A write (a thread's, or a copy's issue) into buffer `d` while the async proxy still reads
    /// it: a data race, whoever writes.
    pub(super) fn check_async_reads(&mut self, d: usize) {
        let Some(r) = self.s.proxy.reads.iter().find(|r| r.buf as usize == d).copied() else {
            return;
        };
        let how = if r.wgmma {
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
