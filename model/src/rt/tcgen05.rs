//! Blackwell (sm100): the tensor-core MMA `tcgen05.mma` and its completion mechanism
//! `tcgen05.commit`, tensor memory (`tcgen05.alloc`/`dealloc`/`relinquish_alloc_permit`,
//! `tcgen05.ld`/`tcgen05.wait::ld`) and cluster launch control
//! (`clusterlaunchcontrol.try_cancel`). docs/semantics.md, "Blackwell", gives the rules and the
//! PTX ISA sections they come from.
//!
//! The model reuses the machinery of async copies (rt/copies.rs):
//!
//! - A `tcgen05_mma` is an entry of `State::copies` of kind `Mma` writing its tensor-memory region
//!   (a buffer the front end keeps for tensor memory, E118) through the region's engine, preceded
//!   by one `MmaRead` entry per shared-memory operand: the async proxy reads the operand from the
//!   issue until the MMA completes, so a write of the operand before then is a data race. The MMAs
//!   of one thread complete in issue order (PTX: tcgen05.mma instructions of a thread are
//!   pipelined, "Pipelined tcgen05 instructions"). At completion the operand reads end as reads by
//!   the region's engine.
//! - A `tcgen05_commit(B)` is an `MmaCommit` entry: one arrival on B (counted, like
//!   `cp.async.mbarrier.arrive.noinc`) once no MMA of its thread precedes it; each MMA's
//!   completion is released into the barrier of every later commit of its thread, so a waiter
//!   on B acquires the accumulator writes and the end of the operand reads.
//! - The allocation state of each region (columns, whether an MMA completed into it since, the
//!   thread of its last MMA) and each CTA's relinquished permit live in `ProxyState::tmem`.
//! - `clc_try_cancel(RESP, B)` is an async copy of 16 bytes into RESP completing on B.

use super::copies::NO_BAR;
use super::*;
use crate::rt::footprint::{PhaseEffect, Touch};

/// The operations of Blackwell's tensor cores, tensor memory and cluster launch control.
#[derive(Clone, Debug)]
pub enum TcOp {
    /// `tcgen05_mma(ACC, A, B, expect = V, version = W)`.
    Mma {
        acc: Ref,
        bufs: Vec<Ref>,
        expect: Option<IExpr>,
        version: Option<IExpr>,
    },
    /// `tcgen05_commit(B)`, `tcgen05_commit(B, multicast = M)`.
    Commit { bar: Ref, multicast: Option<IExpr> },
    /// `tmem_alloc(T, cols)`.
    Alloc { tmem: Ref, cols: IExpr },
    /// `tmem_dealloc(T)`.
    Dealloc { tmem: Ref },
    /// `tmem_relinquish()`.
    Relinquish,
    /// `tcgen05_ld(T, expect = V)`; `slot`: the hidden local holding the thread's loads not yet
    /// waited for (a bit per buffer).
    Ld { tmem: Ref, expect: Option<IExpr>, slot: u16 },
    /// `tcgen05_wait_ld()`.
    WaitLd { slot: u16 },
    /// `clc_try_cancel(RESP, B)`.
    ClcTryCancel { resp: Ref, bar: Ref },
}

/// Columns of tensor memory a CTA has (PTX: 512 columns of 128 lanes).
pub const TMEM_COLUMNS: i64 = 512;

/// `ProxyState::tmem` words: the columns allocated (0: not allocated), whether an MMA completed
/// into the region since its allocation, and the thread (+1) whose MMA wrote it last.
const COLS: u32 = 0x3ff;
const WRITTEN: u32 = 1 << 10;
const ISSUER_SHIFT: u32 = 16;

impl TcOp {
    /// Every operation but `clc_try_cancel` reads or changes its CTA's tensor-memory record
    /// (`Touch::tensor`); an MMA writes its accumulator, reads its operands from the issue until it
    /// completes (its landing), and lands later; a commit arrives on its barrier (at once or when
    /// the thread's MMAs complete; on every CTA of a multicast mask); an allocation or a
    /// deallocation writes its region, a load reads it, and a wait for the loads reads every
    /// region the thread may have loaded (`Footprints::objects`). `clc_try_cancel` is the bulk
    /// copy it lowers to: its response buffer and barrier, landing later.
    pub fn touch(&self) -> Touch<'_> {
        fn tensor(write: bool, t: Touch<'_>) -> Touch<'_> {
            Touch { tensor: Some(write), ..t }
        }
        match self {
            TcOp::Mma { acc, bufs, .. } => tensor(
                true,
                Touch {
                    reads: bufs,
                    lands: true,
                    ..Touch::objects(None, Some((acc, true)), PhaseEffect::None)
                },
            ),
            TcOp::Commit { bar, multicast: None } => tensor(
                true,
                Touch::objects(Some((bar, true)), None, PhaseEffect::Arrives(&crate::rt::footprint::ONE_ARRIVAL)),
            ),
            // Aimed at every CTA of its mask by `Footprints::op_bits`.
            TcOp::Commit { bar, multicast: Some(_) } => tensor(true, Touch::objects(Some((bar, true)), None, PhaseEffect::Moves)),
            TcOp::Alloc { tmem, .. } | TcOp::Dealloc { tmem } => tensor(true, Touch::objects(None, Some((tmem, true)), PhaseEffect::None)),
            TcOp::Relinquish => tensor(true, Touch::objects(None, None, PhaseEffect::None)),
            TcOp::Ld { tmem, .. } => tensor(false, Touch::objects(None, Some((tmem, false)), PhaseEffect::None)),
            TcOp::WaitLd { .. } => tensor(false, Touch::objects(None, None, PhaseEffect::None)),
            // A 16-byte bulk copy of the response into RESP completing on B (`Exec::op_copy`).
            TcOp::ClcTryCancel { resp, bar } => Touch {
                lands: true,
                ..Touch::objects(Some((bar, true)), Some((resp, true)), PhaseEffect::None)
            },
        }
    }

    /// Whether each lane of a uniform agent issues it on its own: an MMA, a commit and a
    /// try_cancel are issued per thread; the tensor-memory allocation and loads are warp-wide
    /// (`.sync.aligned`): once per warp.
    pub fn per_lane(&self) -> bool {
        matches!(self, TcOp::Mma { .. } | TcOp::Commit { .. } | TcOp::ClcTryCancel { .. })
    }

    pub fn exprs(&self, f: &mut dyn FnMut(&IExpr)) {
        match self {
            TcOp::Mma {
                acc,
                bufs,
                expect,
                version,
            } => {
                acc.exprs(f);
                bufs.iter().for_each(|b| b.exprs(f));
                for e in [expect, version].into_iter().flatten() {
                    f(e)
                }
            }
            TcOp::Commit { bar, multicast } => {
                bar.exprs(f);
                if let Some(m) = multicast {
                    f(m)
                }
            }
            TcOp::Alloc { tmem, cols } => {
                tmem.exprs(f);
                f(cols)
            }
            TcOp::Dealloc { tmem } => tmem.exprs(f),
            TcOp::Ld { tmem, expect, .. } => {
                tmem.exprs(f);
                if let Some(e) = expect {
                    f(e)
                }
            }
            TcOp::Relinquish | TcOp::WaitLd { .. } => {}
            TcOp::ClcTryCancel { resp, bar } => {
                resp.exprs(f);
                bar.exprs(f)
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            TcOp::Mma { .. } => "tcgen05_mma",
            TcOp::Commit { .. } => "tcgen05_commit",
            TcOp::Alloc { .. } => "tmem_alloc",
            TcOp::Dealloc { .. } => "tmem_dealloc",
            TcOp::Relinquish => "tmem_relinquish",
            TcOp::Ld { .. } => "tcgen05_ld",
            TcOp::WaitLd { .. } => "tcgen05_wait_ld",
            TcOp::ClcTryCancel { .. } => "clc_try_cancel",
        }
    }
}

/// Whether the protocol has a Blackwell statement (then `ProxyState::tmem` is kept and packed).
pub fn uses_tcgen05(p: &Protocol) -> bool {
    p.roles
        .iter()
        .flat_map(|r| r.code.instrs.iter())
        .any(|i| matches!(&i.kind, InstrKind::Op { op: IOp::Tc(_), .. }))
}

/// Per buffer: it is tensor memory (named by a tensor-memory statement; E118 keeps it apart).
pub fn tmem_buffers(p: &Protocol) -> Vec<bool> {
    let mut out = vec![false; p.buffers.len()];
    let per = (p.buffer_groups.len() / p.cluster.max(1) as usize).max(1);
    for i in p.roles.iter().flat_map(|r| r.code.instrs.iter()) {
        let InstrKind::Op { op: IOp::Tc(op), .. } = &i.kind else { continue };
        let r = match op {
            TcOp::Mma { acc, .. } => acc,
            TcOp::Alloc { tmem, .. } | TcOp::Dealloc { tmem } | TcOp::Ld { tmem, .. } => tmem,
            _ => continue,
        };
        // every CTA's copy of the group
        for (gi, g) in p.buffer_groups.iter().enumerate() {
            if gi % per == r.group as usize % per {
                for d in g.base..g.base + g.len {
                    out[d as usize] = true;
                }
            }
        }
    }
    out
}

/// The engine agent of buffer `d`, by what writes it: a tcgen05_mma for tensor memory.
pub fn engine_label(p: &Protocol, d: usize) -> String {
    if tmem_buffers(p).get(d).copied().unwrap_or(false) {
        format!("the tcgen05_mma into {}", p.buffers[d].name)
    } else {
        format!("the async copy into {}", p.buffers[d].name)
    }
}

/// The length of `ProxyState::tmem`: a word per buffer, then a relinquished flag per CTA.
pub fn tmem_len(p: &Protocol) -> usize {
    if uses_tcgen05(p) {
        p.buffers.len() + p.cluster.max(1) as usize
    } else {
        0
    }
}

impl Model {
    /// Whether thread `t` may take its next step as far as tensor memory says: a `tmem_alloc`
    /// blocks until its CTA has the columns free (PTX: "tcgen05.alloc ... blocks until the
    /// requested columns are available"). True for every other instruction.
    pub fn tmem_alloc_ready(&self, s: &State, t: usize) -> bool {
        if s.proxy.tmem.is_empty() {
            return true;
        }
        let th = &s.threads[t];
        let Some(Instr {
            kind: InstrKind::Op {
                op: IOp::Tc(TcOp::Alloc { tmem, cols }),
                ..
            },
            ..
        }) = self.proto.code_of(t).instrs.get(th.pc as usize)
        else {
            return true;
        };
        let me = &self.proto.threads[t];
        let var = |v: u16| Ok(s.vars[v as usize].value);
        let Ok(want) = cols.eval(&th.locals, Some(me), &mut { var }) else {
            return true;
        };
        let g = &self.proto.buffer_groups[tmem.group as usize];
        let d = match &tmem.index {
            None => g.base as usize,
            Some(e) => match e.eval(&th.locals, Some(me), &mut { var }) {
                Ok(i) if (0..g.len as i64).contains(&i) => g.base as usize + i as usize,
                _ => return true,
            },
        };
        if s.proxy.tmem[d] & COLS != 0 {
            return true; // a double allocation: the step reports it
        }
        let cta = self.proto.threads[t].cta as usize;
        let used: i64 = (0..self.proto.buffers.len())
            .filter(|&b| self.proto.cta_of_buffer(b) == cta)
            .map(|b| (s.proxy.tmem[b] & COLS) as i64)
            .sum();
        used + want <= TMEM_COLUMNS || !(32..=TMEM_COLUMNS).contains(&want)
    }

    /// A state property: every thread has exited while tensor memory is still allocated, or an
    /// MMA still runs.
    pub(super) fn tmem_at_exit(&self, s: &State) -> Option<Violation> {
        if !s.all_done() {
            return None;
        }
        let p = &self.proto;
        if let Some(c) = s
            .copies
            .iter()
            .find(|c| matches!(c.kind, CopyKind::Mma | CopyKind::MmaRead | CopyKind::MmaCommit))
        {
            let what = match c.kind {
                CopyKind::MmaCommit => format!(
                    "the arrive of a tcgen05_commit on {} has not fired",
                    p.barriers[c.bar as usize].name
                ),
                _ => format!("a tcgen05_mma issued by {} is still running", p.thread_label(c.issuer as usize)),
            };
            return Some(Violation {
                kind: K::Lifetime,
                message: format!("every thread has exited while {what}; the CTA's shared and tensor memory are released under it"),
            });
        }
        let d = (0..p.buffers.len().min(s.proxy.tmem.len())).find(|&d| s.proxy.tmem[d] & COLS != 0)?;
        Some(Violation {
            kind: K::Lifetime,
            message: format!(
                "every thread has exited while {} still holds {} columns of tensor memory: no tmem_dealloc freed them (PTX: all tensor memory a CTA allocated must be deallocated before it exits)",
                p.buffers[d].name,
                s.proxy.tmem[d] & COLS
            ),
        })
    }
}

impl Exec<'_> {
    /// Execute one Blackwell operation of the current thread.
    pub(super) fn tc_op(&mut self, op: &TcOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        let Some(t) = self.thread.filter(|_| !self.in_completion) else {
            self.broken("R-EVAL", format!("a {} outside a thread's own code", op.name()));
            return Err(());
        };
        match op {
            TcOp::Mma {
                acc,
                bufs,
                expect,
                version,
            } => self.tc_mma(t, acc, bufs, expect, version, locals),
            TcOp::Commit { bar, multicast } => self.tc_commit(t, bar, multicast, locals),
            TcOp::Alloc { tmem, cols } => self.tmem_alloc(t, tmem, cols, locals),
            TcOp::Dealloc { tmem } => self.tmem_dealloc(tmem, locals),
            TcOp::Relinquish => {
                let cta = self.p().threads[t].cta as usize;
                let at = self.p().buffers.len() + cta;
                self.s.proxy.tmem[at] = 1;
                Ok(None)
            }
            TcOp::Ld { tmem, expect, slot } => self.tc_ld(t, tmem, expect, *slot, locals),
            TcOp::WaitLd { slot } => self.tc_wait_ld(t, *slot),
            TcOp::ClcTryCancel { resp, bar } => {
                let bytes = Some(IExpr::Const(crate::lang::blackwell::CLC_RESPONSE_BYTES));
                self.op_copy(resp, bar, &bytes, &None, locals)
            }
        }
    }

    /// Region `d` must be allocated for `what`; a lifetime violation otherwise.
    fn tmem_live(&mut self, d: usize, what: &str) -> R<()> {
        if self.s.proxy.tmem[d] & COLS != 0 {
            return Ok(());
        }
        let msg = format!(
            "{} {what} {}, which holds no tensor memory (no tmem_alloc before it, or tmem_dealloc freed it)",
            self.label(),
            self.p().buffers[d].name
        );
        self.fail(K::Lifetime, msg);
        Err(())
    }

    fn tc_mma(
        &mut self,
        t: usize,
        acc: &Ref,
        bufs: &[Ref],
        expect: &Option<IExpr>,
        version: &Option<IExpr>,
        locals: Option<&[i64]>,
    ) -> R<Option<i64>> {
        let a = self.resolve_buf(acc, locals)?;
        let (ds, want) = self.mma_operands(bufs, expect, locals)?;
        let version = match version {
            Some(e) => self.ev(e, locals)?,
            None => self.s.buffers[a].writes as i64,
        };
        self.tmem_live(a, "issues tcgen05_mma writing")?;
        for &d in &ds {
            let whole = (0, self.p().buffers[d].bytes);
            self.async_read_checks(t, d, whole, "tcgen05_mma");
            if let Some(w) = want {
                self.operand_version(d, w, "tcgen05_mma");
            }
        }
        // The accumulator: ordered after the last MMA into it when that MMA is the same thread's
        // (its MMAs run in issue order); otherwise after every write and read of it, as a write.
        let n = self.p().threads.len();
        let word = self.s.proxy.tmem[a];
        let own_pipeline = (word >> ISSUER_SHIFT) as usize == t + 1;
        let cell = &self.s.buffers[a];
        let me = self.agent as u16;
        let flying_other = self
            .s
            .copies
            .iter()
            .find(|c| c.is_copy() && c.buf as usize == a && !(c.kind == CopyKind::Mma && c.issuer as usize == t))
            .cloned();
        if let Some(c) = flying_other {
            let msg = format!(
                "{} issues tcgen05_mma into {} while a tcgen05_mma issued by {} still writes it, with nothing ordering the two",
                self.label(),
                self.p().buffers[a].name,
                self.p().thread_label(c.issuer as usize)
            );
            self.fail(K::DataRace, msg);
        } else if let Some(w) = cell
            .last_write
            .filter(|w| w.agent != me && !(own_pipeline && w.agent as usize == n + a) && !ordered_before(w, self.clock()))
        {
            self.race(true, a, "issues tcgen05_mma overwriting", Some(&w), "last write");
        } else if let Some(r) = cell
            .reads
            .iter()
            .find(|r| r.agent != me && !ordered_before(r, self.clock()))
            .copied()
        {
            self.race(
                true,
                a,
                "issues tcgen05_mma overwriting",
                Some(&r),
                "tcgen05_ld (the accumulator was not released after the load was waited for)",
            );
        }
        if self.ended {
            return Err(());
        }
        for &d in &ds {
            self.s.copies.push(CopyInFlight {
                buf: d as u16,
                bar: NO_BAR,
                bytes: 0,
                version: 0,
                issuer: t as u16,
                stmt: self.stmt,
                kind: CopyKind::MmaRead,
                offset: 0,
                len: 0,
                release: None,
            });
            self.obs.push(Obs::AsyncReadIssued {
                buf: d as u16,
                wgmma: true,
            });
        }
        let acc_bytes = self.p().buffers[a].bytes;
        let access = self.access();
        let cell = &mut self.s.buffers[a];
        cell.value = version;
        cell.writes += 1;
        cell.last_write = Some(access);
        cell.reads.clear();
        cell.in_flight = true;
        let issuer_clock = self.clock().to_vec();
        join_into(&mut self.s.engines[a], &issuer_clock);
        let issuer_known = self.known_of_agent().to_vec();
        join_known(&mut self.s.engines_known[a], &issuer_known);
        self.clock_mut()[t] += 1;
        self.s.proxy.tmem[a] = (word & (COLS | WRITTEN)) | ((t as u32 + 1) << ISSUER_SHIFT);
        self.s.copies.push(CopyInFlight {
            buf: a as u16,
            bar: NO_BAR,
            bytes: acc_bytes,
            version,
            issuer: t as u16,
            stmt: self.stmt,
            kind: CopyKind::Mma,
            offset: 0,
            len: acc_bytes,
            release: None,
        });
        self.obs.push(Obs::CopyIssued {
            buf: a as u16,
            bar: NO_BAR,
            bytes: acc_bytes,
            version,
        });
        Ok(None)
    }

    /// The barriers a commit arrives on: B of the own CTA, or of every CTA in the mask.
    fn commit_targets(&mut self, bar: &Ref, multicast: &Option<IExpr>, locals: Option<&[i64]>) -> R<Vec<usize>> {
        let Some(m) = multicast else {
            return Ok(vec![self.resolve_bar(bar, locals)?]);
        };
        let mask = self.ev(m, locals)?;
        let n = self.p().cluster as i64;
        if !(1..(1 << n)).contains(&mask) {
            self.fail(
                K::Assertion,
                format!(
                    "{}: tcgen05_commit multicast mask {mask:#x} names no CTA or a CTA outside the cluster of {n} (undefined behaviour)",
                    self.label()
                ),
            );
            return Err(());
        }
        let mut out = Vec::new();
        for cta in (0..n as usize).filter(|c| (mask >> c) & 1 != 0) {
            self.remote = Some(cta);
            let b = self.resolve_bar(bar, locals);
            self.remote = None;
            out.push(b?);
        }
        Ok(out)
    }

    fn tc_commit(&mut self, t: usize, bar: &Ref, multicast: &Option<IExpr>, locals: Option<&[i64]>) -> R<Option<i64>> {
        let bars = self.commit_targets(bar, multicast, locals)?;
        for &b in &bars {
            self.live_barrier(b, "tcgen05_commit")?;
        }
        let running = self.s.copies.iter().any(|c| c.kind == CopyKind::Mma && c.issuer as usize == t);
        if !running {
            // Every MMA of the thread has completed (their completions were joined into its
            // clock): the arrive happens at once, releasing what the thread knows.
            for b in bars {
                self.release_into(b);
                self.thread = None;
                let r = self.arrive(b, 1, false, None);
                self.thread = Some(t);
                r?;
            }
            return Ok(None);
        }
        for b in bars {
            self.s.copies.push(CopyInFlight {
                buf: 0,
                bar: b as u16,
                bytes: 0,
                version: 0,
                issuer: t as u16,
                stmt: self.stmt,
                kind: CopyKind::MmaCommit,
                offset: 0,
                len: 0,
                release: None,
            });
        }
        Ok(None)
    }

    /// An MMA completed (`land_range` wrote its accumulator): its operand reads end as reads by
    /// the accumulator's engine, the region holds data, the completion is released into the
    /// barrier of every later commit of its thread (or into the thread, when none tracks it
    /// yet), and every commit that no MMA of the thread precedes any more fires.
    pub(super) fn mma_landed(&mut self, c: &CopyInFlight) {
        let a = c.buf as usize;
        let n = self.p().threads.len();
        let at = self.land_index.min(self.s.copies.len());
        // The operand reads of this MMA (and of none other: earlier MMAs of the thread have
        // completed, so their reads are gone) are the thread's MmaRead entries before it.
        let engine_acc = Access {
            agent: (n + a) as u16,
            epoch: self.s.engines[a][n + a],
            in_completion: false,
            atomic: false,
        };
        let mut i = 0;
        let mut end = at;
        while i < end {
            let o = self.s.copies[i].clone();
            if o.kind == CopyKind::MmaRead && o.issuer == c.issuer {
                self.s.copies.remove(i);
                end -= 1;
                let cell = &mut self.s.buffers[o.buf as usize];
                match cell.reads.binary_search_by_key(&engine_acc.agent, |x| x.agent) {
                    Ok(k) => cell.reads[k] = engine_acc,
                    Err(k) => cell.reads.insert(k, engine_acc),
                }
                self.obs.push(Obs::AsyncReadDone { buf: o.buf, wgmma: true });
            } else {
                i += 1;
            }
        }
        self.land_index = end;
        let word = self.s.proxy.tmem[a];
        self.s.proxy.tmem[a] = word | WRITTEN;
        let commits: Vec<usize> = self.s.copies[end..]
            .iter()
            .filter(|o| o.kind == CopyKind::MmaCommit && o.issuer == c.issuer)
            .map(|o| o.bar as usize)
            .collect();
        for &b in &commits {
            if self.s.barriers[b].life == Life::Live {
                self.release_into(b);
            }
        }
        // Every later commit of the thread tracks it, including one it issues once nothing runs
        // any more (which then arrives at once, with the thread's clock): the thread's later
        // releases carry the completion, as for cp.async (docs/model.md); a release that can run
        // before the completion is still a race in the interleaving where it does.
        self.carry_to_issuer(c.issuer as usize);
        loop {
            let mut ahead = false;
            let mut fire = None;
            for (i, o) in self.s.copies.iter().enumerate() {
                if o.issuer != c.issuer {
                    continue;
                }
                match o.kind {
                    CopyKind::Mma => ahead = true,
                    CopyKind::MmaCommit if !ahead => {
                        fire = Some((i, o.bar as usize));
                        break;
                    }
                    _ => {}
                }
            }
            let Some((i, b)) = fire else { break };
            self.s.copies.remove(i);
            if self.s.barriers[b].life != Life::Live {
                let name = self.p().barriers[b].name.clone();
                self.fail(
                    K::Lifetime,
                    format!("the arrive of a tcgen05_commit fires on {name}, which is no longer a live barrier"),
                );
                return;
            }
            if self.arrive(b, 1, false, None).is_err() || self.ended {
                return;
            }
        }
    }

    fn tmem_alloc(&mut self, t: usize, tmem: &Ref, cols: &IExpr, locals: Option<&[i64]>) -> R<Option<i64>> {
        let d = self.resolve_buf(tmem, locals)?;
        let cols = self.ev(cols, locals)?;
        let name = self.p().buffers[d].name.clone();
        if !(32..=TMEM_COLUMNS).contains(&cols) || cols & (cols - 1) != 0 {
            self.fail(
                K::Assertion,
                format!(
                    "{}: tmem_alloc({name}, {cols}): tcgen05.alloc takes a power of 2 from 32 to 512 columns (undefined behaviour otherwise)",
                    self.label()
                ),
            );
            return Err(());
        }
        let cta = self.p().threads[t].cta as usize;
        if self.s.proxy.tmem[self.p().buffers.len() + cta] != 0 {
            self.fail(
                K::Lifetime,
                format!(
                    "{} allocates tensor memory for {name} after its CTA relinquished the allocation permit (tmem_relinquish): undefined behaviour",
                    self.label()
                ),
            );
            return Err(());
        }
        if self.s.proxy.tmem[d] & COLS != 0 {
            self.fail(
                K::Lifetime,
                format!(
                    "{} allocates {name} again while it still holds {} columns (no tmem_dealloc in between)",
                    self.label(),
                    self.s.proxy.tmem[d] & COLS
                ),
            );
            return Err(());
        }
        self.s.proxy.tmem[d] = cols as u32;
        Ok(None)
    }

    fn tmem_dealloc(&mut self, tmem: &Ref, locals: Option<&[i64]>) -> R<Option<i64>> {
        let d = self.resolve_buf(tmem, locals)?;
        let name = self.p().buffers[d].name.clone();
        if self.s.proxy.tmem[d] & COLS == 0 {
            self.fail(
                K::Lifetime,
                format!(
                    "{} deallocates {name}, which holds no tensor memory (a second tmem_dealloc, or no tmem_alloc)",
                    self.label()
                ),
            );
            return Err(());
        }
        if let Some(c) = self
            .s
            .copies
            .iter()
            .find(|c| c.kind == CopyKind::Mma && c.buf as usize == d)
            .cloned()
        {
            let msg = format!(
                "{} deallocates {name} while a tcgen05_mma issued by {} still writes it (its commit was not waited for)",
                self.label(),
                self.p().thread_label(c.issuer as usize)
            );
            self.fail(K::Lifetime, msg);
            return Err(());
        }
        // Freeing the columns is a write of them: every load and MMA of the region must be
        // ordered before it.
        let v = self.s.buffers[d].value;
        self.write_cell(true, d, v)?;
        self.s.proxy.tmem[d] = 0;
        Ok(None)
    }

    fn tc_ld(&mut self, t: usize, tmem: &Ref, expect: &Option<IExpr>, slot: u16, locals: Option<&[i64]>) -> R<Option<i64>> {
        let d = self.resolve_buf(tmem, locals)?;
        let want = match expect {
            Some(e) => Some(self.ev(e, locals)?),
            None => None,
        };
        self.tmem_live(d, "loads (tcgen05_ld)")?;
        let name = self.p().buffers[d].name.clone();
        let running = self.s.buffers[d].in_flight;
        if !running && self.s.proxy.tmem[d] & WRITTEN == 0 {
            let msg = format!(
                "{} loads {name} (tcgen05_ld), which no tcgen05_mma has completed into since its tmem_alloc: the load reads undefined data",
                self.label()
            );
            self.fail(K::StaleRead, msg);
        }
        self.tmem_read(d, "loads")?;
        let got = self.s.buffers[d].value;
        self.obs.push(Obs::Read {
            buf: d as u16,
            version: got,
        });
        if let Some(w) = want {
            if w != got && (running || self.s.proxy.tmem[d] & WRITTEN != 0) {
                let msg = format!(
                    "{} loads {} of {name} (tcgen05_ld) but the protocol means version {w}",
                    self.label(),
                    super::memory::version_text(got)
                );
                self.fail(K::StaleRead, msg);
            }
        }
        if d < 63 {
            self.s.threads[t].locals[slot as usize] |= 1 << d;
        }
        Ok(None)
    }

    /// `tcgen05.wait::ld`: the thread's loads complete; each is a read of its region now, so a
    /// write of the region that is not ordered after this wait races with it.
    fn tc_wait_ld(&mut self, t: usize, slot: u16) -> R<Option<i64>> {
        let pending = self.s.threads[t].locals[slot as usize];
        self.s.threads[t].locals[slot as usize] = 0;
        for d in (0..63usize).filter(|d| pending >> d & 1 != 0) {
            self.tmem_live(d, "completes a tcgen05_ld (tcgen05_wait_ld) of")?;
            self.tmem_read(d, "completes its load (tcgen05_wait_ld) of")?;
        }
        Ok(None)
    }

    /// A read of region `d` by a load: an MMA still writing it races with it; otherwise the read
    /// of a buffer (ordered after the last write).
    fn tmem_read(&mut self, d: usize, what: &str) -> R<()> {
        let Some(c) = self
            .s
            .copies
            .iter()
            .find(|c| c.kind == CopyKind::Mma && c.buf as usize == d)
            .cloned()
        else {
            return self.read_cell(true, d);
        };
        let msg = format!(
            "{} {what} {} while a tcgen05_mma issued by {} still writes it (no wait on the barrier of a tcgen05_commit after the MMA)",
            self.label(),
            self.p().buffers[d].name,
            self.p().thread_label(c.issuer as usize)
        );
        self.fail(K::DataRace, msg);
        let acc = self.access();
        let cell = &mut self.s.buffers[d];
        match cell.reads.binary_search_by_key(&acc.agent, |a| a.agent) {
            Ok(k) => cell.reads[k] = acc,
            Err(k) => cell.reads.insert(k, acc),
        }
        Ok(())
    }

    /// A write of buffer `d` while a tcgen05_mma still reads it as an operand: a data race.
    pub(super) fn check_mma_reads(&mut self, d: usize) {
        let Some(r) = self
            .s
            .copies
            .iter()
            .find(|c| c.kind == CopyKind::MmaRead && c.buf as usize == d)
            .cloned()
        else {
            return;
        };
        let msg = format!(
            "{} overwrites {} while a tcgen05_mma issued by {} still reads it as an operand (no wait on the barrier of a tcgen05_commit after the MMA)",
            self.label(),
            self.p().buffers[d].name,
            self.p().thread_label(r.issuer as usize)
        );
        self.fail(if self.in_completion { K::CompletionMisuse } else { K::DataRace }, msg);
    }
}
