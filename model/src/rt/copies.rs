//! Async copies in flight: issue, whole and partial landing (complete_tx on their barrier), and
//! cp.async with its mbarrier arrive-on.

use super::memory::{coalesce, overlaps, split_parts};
use super::*;
use crate::rt::footprint::Touch;

/// The operations that start or track async copies.
#[derive(Clone, Debug)]
pub enum CopyOp {
    /// Issues an async copy; `bytes: None` means the buffer's size. memcpy_async lowers to this
    /// followed by an `ExpectTx`.
    Copy {
        buf: Ref,
        bar: Ref,
        bytes: Option<IExpr>,
        version: Option<IExpr>,
    },
    /// A TMA-style copy into bytes `offset .. offset + bytes` of BUF (complete_tx(bytes) on `bar`).
    CopyPart {
        buf: Ref,
        bar: Ref,
        offset: IExpr,
        bytes: IExpr,
        version: Option<IExpr>,
    },
    /// `cp_async(BUF, offset, bytes)`: a per-thread async copy into bytes `offset .. offset +
    /// bytes` of BUF, not tracked by any barrier until a `CpAsyncArrive`.
    CpAsync {
        buf: Ref,
        offset: IExpr,
        bytes: IExpr,
        version: Option<IExpr>,
    },
    /// `cp.async.mbarrier.arrive(.noinc)`: an arrival on `bar` once every cp.async copy this
    /// thread issued before has landed; without `noinc` the pending count is raised by one now.
    CpAsyncArrive { bar: Ref, noinc: bool },
    /// `st_async(BUF, B, offset, bytes, version)`: PTX `st.async.shared::cluster.mbarrier::
    /// complete_tx::bytes`: the thread's registers (4, 8 or 16 bytes, holding `version`) stored
    /// asynchronously into bytes `offset .. offset + bytes` of BUF, completing `bytes` on `bar`.
    /// Unlike a copy it runs in the generic proxy (PTX: "st.async is performed in the generic
    /// proxy"), so a barrier initialised by a thread needs no proxy fence for it.
    StAsync {
        buf: Ref,
        bar: Ref,
        offset: IExpr,
        bytes: IExpr,
        version: IExpr,
    },
    /// `copy_async(DST, B, cta = R, from = SRC)`: `cp.async.bulk.shared::cluster.shared::cta`,
    /// a bulk copy of bytes `0 .. bytes` of the issuer's own SRC into bytes `offset .. offset +
    /// bytes` of DST (of the CTA its `Remote` names), completing on that CTA's B. It lands as a
    /// partial copy; the async proxy reads SRC from the issue until the landing.
    CopyFrom {
        buf: Ref,
        bar: Ref,
        src: Ref,
        offset: IExpr,
        bytes: IExpr,
    },
    /// `copy_async(BUF, B, ..., tensormap = MAP)`: `copy` (a `Copy` or `CopyPart`) issued as a
    /// tensor copy through the descriptor `map` in shared memory, which the TMA unit reads from
    /// the issue until the copy lands; `expect`: the descriptor version the copy means to use.
    Tensor {
        map: Ref,
        expect: Option<IExpr>,
        copy: Box<CopyOp>,
    },
    /// `cp.async.commit_group`: this thread's cp.async copies not yet in a group become its
    /// newest group.
    CpAsyncCommitGroup,
    /// `cp.async.wait_group N` (`None`: `cp.async.wait_all`, which commits first): every
    /// committed group of this thread but the `N` newest has landed when it returns.
    CpAsyncWait { n: Option<IExpr> },
}

impl CopyOp {
    /// Whether each lane of a uniform agent issues the operation on its own (a copy per lane); the
    /// cp.async groups are the warp's.
    pub fn per_lane(&self) -> bool {
        match self {
            CopyOp::Copy { .. }
            | CopyOp::CopyPart { .. }
            | CopyOp::CopyFrom { .. }
            | CopyOp::StAsync { .. }
            | CopyOp::CpAsync { .. }
            | CopyOp::CpAsyncArrive { .. } => true,
            CopyOp::CpAsyncCommitGroup | CopyOp::CpAsyncWait { .. } => false,
            CopyOp::Tensor { copy, .. } => copy.per_lane(),
        }
    }

    /// Its footprint for the partial-order reduction: a TMA-style copy writes its buffer and its
    /// barrier and lands later. A cp.async writes its buffer (the whole of it) and lands later;
    /// its arrive-on is an arrival on its barrier (made later, by a landing, or at once); a
    /// commit changes only the thread's own copies; a wait lands them (`cp_lands`, resolved from
    /// the state). Partial TMA copies and `st_async` write their whole buffer; a copy from shared
    /// memory and a tensor copy also read their source or descriptor.
    pub fn touch(&self) -> Touch<'_> {
        use crate::rt::footprint::{PhaseEffect as P, ONE_ARRIVAL};
        match self {
            // A partial copy (and `st_async`, which lands like one) writes its range of the
            // buffer: the whole buffer is its object, a conservative footprint.
            CopyOp::Copy { buf, bar, .. } | CopyOp::CopyPart { buf, bar, .. } | CopyOp::StAsync { buf, bar, .. } => Touch {
                lands: true,
                ..Touch::objects(Some((bar, true)), Some((buf, true)), P::None)
            },
            CopyOp::CpAsync { buf, .. } => Touch {
                lands: true,
                ..Touch::objects(None, Some((buf, true)), P::None)
            },
            CopyOp::CpAsyncArrive { bar, .. } => Touch::objects(Some((bar, true)), None, P::Arrives(&ONE_ARRIVAL)),
            CopyOp::CpAsyncCommitGroup => Touch::objects(None, None, P::None),
            CopyOp::CpAsyncWait { .. } => Touch {
                cp_lands: true,
                ..Touch::objects(None, None, P::None)
            },
            // A copy from shared memory reads its source in the issuer's own CTA (not aimed at the
            // target: `Footprints::op_bits`) from the issue until its landing, which ends the read
            // (`Footprints::landing`).
            CopyOp::CopyFrom { buf, bar, src, .. } => Touch {
                lands: true,
                reads: std::slice::from_ref(src),
                ..Touch::objects(Some((bar, true)), Some((buf, true)), P::None)
            },
            // A tensor copy is its copy, reading its descriptor until the landing as well.
            CopyOp::Tensor { map, copy, .. } => Touch {
                reads: std::slice::from_ref(map),
                ..copy.touch()
            },
        }
    }

    /// Every expression the operation evaluates, outermost ones.
    pub fn exprs(&self, f: &mut dyn FnMut(&IExpr)) {
        match self {
            CopyOp::Copy { buf, bar, bytes, version } => {
                buf.exprs(f);
                bar.exprs(f);
                for e in [bytes, version].into_iter().flatten() {
                    f(e)
                }
            }
            CopyOp::CopyPart {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => {
                buf.exprs(f);
                bar.exprs(f);
                f(offset);
                f(bytes);
                if let Some(e) = version {
                    f(e)
                }
            }
            CopyOp::StAsync {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => {
                buf.exprs(f);
                bar.exprs(f);
                f(offset);
                f(bytes);
                f(version)
            }
            CopyOp::CopyFrom {
                buf,
                bar,
                src,
                offset,
                bytes,
            } => {
                buf.exprs(f);
                bar.exprs(f);
                src.exprs(f);
                f(offset);
                f(bytes)
            }
            CopyOp::Tensor { map, expect, copy } => {
                map.exprs(f);
                if let Some(e) = expect {
                    f(e)
                }
                copy.exprs(f)
            }
            CopyOp::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => {
                buf.exprs(f);
                f(offset);
                f(bytes);
                if let Some(e) = version {
                    f(e)
                }
            }
            CopyOp::CpAsyncArrive { bar, .. } => bar.exprs(f),
            CopyOp::CpAsyncCommitGroup | CopyOp::CpAsyncWait { n: None } => {}
            CopyOp::CpAsyncWait { n: Some(n) } => f(n),
        }
    }

    /// The statement's name in the language.
    pub fn name(&self) -> &'static str {
        match self {
            CopyOp::Copy { .. } | CopyOp::CopyPart { .. } | CopyOp::CopyFrom { .. } | CopyOp::Tensor { .. } => "copy_async",
            CopyOp::StAsync { .. } => "st_async",
            CopyOp::CpAsync { .. } => "cp_async",
            CopyOp::CpAsyncArrive { .. } => "cp_async_arrive",
            CopyOp::CpAsyncCommitGroup => "cp_async_commit_group",
            CopyOp::CpAsyncWait { n: Some(_) } => "cp_async_wait_group",
            CopyOp::CpAsyncWait { n: None } => "cp_async_wait_all",
        }
    }
}
/// What an entry of `State::copies` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyKind {
    /// A TMA-style bulk copy: its landing does complete_tx on `bar`.
    Tma,
    /// A `cp_async`: its landing writes the buffer only; `bar` is `NO_BAR`. `group_age` is 0
    /// until its issuer's next `cp_async_commit_group`, then k for the issuer's k-th most recent
    /// committed group (`cp_async_wait_group(N)` waits for every group older than N).
    CpAsync { group_age: u16 },
    /// Not a copy: the arrive-on of a `cp_async_arrive(_noinc)` on `bar`, which fires once no
    /// cp.async copy of the same issuer precedes it in `State::copies` (`buf` is 0, unused).
    ArriveOn { noinc: bool },
    /// A `tcgen05_mma` writing its tensor-memory region `buf` (rt/tcgen05.rs); `bar` is `NO_BAR`.
    /// It completes after every earlier MMA of its issuer.
    Mma,
    /// Not a copy: the async read of operand `buf` by the issuer's next `Mma` entry, which ends
    /// when that MMA completes.
    MmaRead,
    /// Not a copy: the arrive of a `tcgen05_commit` on `bar`, which fires once no MMA of the
    /// same issuer precedes it.
    MmaCommit,
    /// Not a copy: the async proxy's read of bytes `offset .. offset + len` of the issuer's own
    /// buffer `buf` by the `copy_async(..., from = buf)` entry right after it (nothing is ever
    /// inserted between the two), which ends when that copy lands; `bar` is `NO_BAR`.
    SrcRead,
}

/// The barrier of a copy no barrier tracks (a cp.async before its arrive-on).
pub const NO_BAR: u16 = u16::MAX;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CopyInFlight {
    pub buf: u16,
    pub bar: u16,
    pub bytes: i64,
    pub version: i64,
    pub issuer: u16,
    /// The statement that issued it: a landing is shown at its own copy's line.
    pub stmt: crate::lang::ast::Span,
    /// What it is, and the byte range it writes (`0 .. buffer bytes` for whole copies).
    pub kind: CopyKind,
    pub offset: i64,
    pub len: i64,
    /// An `ArriveOn` entry's release: its issuer's clock and phase knowledge as its
    /// `cp_async_arrive` ran (`Exec::op_cp_async_arrive` says why that much). `None` for every
    /// other kind, so that their entries stay as small as before.
    pub release: Option<Box<ArriveOnRelease>>,
}

/// What the arrive-on of a deferred `cp_async_arrive(_noinc)` releases into its barrier when it
/// fires, besides the clock of the copy engine whose landing fires it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArriveOnRelease {
    /// The issuer's clock as the instruction ran (before its own epoch ticked).
    pub clock: Clock,
    /// The issuer's knowledge of every barrier's phase then.
    pub known: Box<[i64]>,
}

impl CopyInFlight {
    /// The async proxy's read of the first `len` bytes of buffer `buf`, held by the copy issued
    /// right after it (a CTA-to-CTA copy's source, a tensor copy's descriptor) until it lands.
    pub(super) fn source_read(buf: usize, issuer: usize, stmt: crate::lang::ast::Span, len: i64) -> CopyInFlight {
        CopyInFlight {
            buf: buf as u16,
            bar: NO_BAR,
            bytes: 0,
            version: 0,
            issuer: issuer as u16,
            stmt,
            kind: CopyKind::SrcRead,
            offset: 0,
            len,
            release: None,
        }
    }

    /// A copy (not an arrive-on entry).
    pub fn is_copy(&self) -> bool {
        !matches!(
            self.kind,
            CopyKind::ArriveOn { .. } | CopyKind::MmaRead | CopyKind::MmaCommit | CopyKind::SrcRead
        )
    }

    /// Its words in a packed state (rt/pack.rs): the byte range only when it is not the whole
    /// buffer of a TMA copy, so that states of protocols without partial copies stay small.
    pub(super) fn pack(&self, buffer_bytes: i64, w: &mut Vec<u32>) {
        let (kind, age) = match self.kind {
            CopyKind::Tma => (0, 0),
            CopyKind::CpAsync { group_age } => (1, group_age.min(MAX_GROUP_AGE) as u32),
            CopyKind::ArriveOn { noinc: false } => (2, 0),
            CopyKind::ArriveOn { noinc: true } => (3, 0),
            CopyKind::Mma => (4, 0),
            CopyKind::MmaRead => (5, 0),
            CopyKind::MmaCommit => (6, 0),
            CopyKind::SrcRead => (7, 0),
        };
        let whole = self.kind == CopyKind::Tma && self.offset == 0 && self.len == buffer_bytes;
        w.extend_from_slice(&[
            self.buf as u32 | (self.bar as u32) << 16,
            self.issuer as u32 | kind << 16 | (!whole as u32) << 19 | age << 20,
            self.stmt.start,
            self.stmt.end,
        ]);
        super::pack::put_i64(w, self.bytes);
        super::pack::put_i64(w, self.version);
        if !whole {
            super::pack::put_i64(w, self.offset);
            super::pack::put_i64(w, self.len);
        }
        // Only an arrive-on carries a release (its kind says so, and the protocol its length).
        if let Some(r) = &self.release {
            w.extend_from_slice(&r.clock);
            for &k in r.known.iter() {
                super::pack::put_i64(w, k);
            }
        }
    }

    /// The inverse of [`CopyInFlight::pack`].
    pub(super) fn unpack(r: &mut super::pack::Words, p: &Protocol) -> CopyInFlight {
        let bb = r.u();
        let ik = r.u();
        let stmt = crate::lang::ast::Span { start: r.u(), end: r.u() };
        let mut c = CopyInFlight {
            buf: bb as u16,
            bar: (bb >> 16) as u16,
            issuer: ik as u16,
            stmt,
            bytes: r.i(),
            version: r.i(),
            kind: match (ik >> 16) & 7 {
                0 => CopyKind::Tma,
                1 => CopyKind::CpAsync {
                    group_age: (ik >> 20) as u16,
                },
                2 => CopyKind::ArriveOn { noinc: false },
                3 => CopyKind::ArriveOn { noinc: true },
                4 => CopyKind::Mma,
                5 => CopyKind::MmaRead,
                6 => CopyKind::MmaCommit,
                _ => CopyKind::SrcRead,
            },
            offset: 0,
            len: 0,
            release: None,
        };
        if ik >> 19 & 1 != 0 {
            c.offset = r.i();
            c.len = r.i();
        } else {
            c.len = p.buffers[c.buf as usize].bytes;
        }
        if matches!(c.kind, CopyKind::ArriveOn { .. }) {
            let clock = (0..p.agent_count()).map(|_| r.u()).collect();
            let known = (0..p.barriers.len()).map(|_| r.i()).collect();
            c.release = Some(Box::new(ArriveOnRelease { clock, known }));
        }
        c
    }
}

/// Group ages past this are all "older than any `cp_async_wait_group` can name" (PTX takes
/// 0..=7; the 12 bits the packing gives are plenty).
const MAX_GROUP_AGE: u16 = (1 << 12) - 1;

impl Exec<'_> {
    /// Execute one copy operation of the current thread (or of a completion function).
    pub(super) fn copy_op(&mut self, op: &CopyOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        match op {
            CopyOp::Copy { buf, bar, bytes, version } => self.op_copy(buf, bar, bytes, version, locals),
            CopyOp::CopyPart {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => self.op_copy_part("copy_async", buf, bar, offset, bytes, version, locals),
            CopyOp::StAsync {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => self.op_st_async(buf, bar, offset, bytes, version, locals),
            CopyOp::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => self.op_cp_async(buf, offset, bytes, version, locals),
            CopyOp::CopyFrom {
                buf,
                bar,
                src,
                offset,
                bytes,
            } => self.op_copy_from(buf, bar, src, offset, bytes, locals),
            CopyOp::Tensor { map, expect, copy } => self.op_tensor_copy(map, expect, copy, locals),
            CopyOp::CpAsyncArrive { bar, noinc } => self.op_cp_async_arrive(bar, *noinc, locals),
            CopyOp::CpAsyncCommitGroup => self.op_cp_async_commit(),
            CopyOp::CpAsyncWait { n } => self.op_cp_async_wait(n, locals),
        }
    }

    pub(super) fn op_copy(
        &mut self,
        buf: &Ref,
        bar: &Ref,
        bytes: &Option<IExpr>,
        version: &Option<IExpr>,
        locals: Option<&[i64]>,
    ) -> R<Option<i64>> {
        let d = self.resolve_buf(buf, locals)?;
        let b = self.resolve_bar(bar, locals)?;
        let bytes = match bytes {
            Some(e) => self.ev(e, locals)?,
            None => self.p().buffers[d].bytes,
        };
        let version = match version {
            Some(e) => self.ev(e, locals)?,
            None => self.s.buffers[d].writes as i64,
        };
        self.live_barrier(b, "copy_async")?;
        self.check_init_fenced(b)?;
        self.check_range(
            K::TxRange,
            bytes,
            0,
            format!("the byte count of the copy into {}", self.p().buffers[d].name),
        )?;
        self.write_cell(true, d, version)?;
        let cell = &mut self.s.buffers[d];
        cell.in_flight = true;
        // The engine starts from everything the issuer did before the issue.
        let issuer_clock = self.clock().to_vec();
        let n = self.p().threads.len();
        join_into(&mut self.s.engines[d], &issuer_clock);
        let issuer_known = self.known_of_agent().to_vec();
        join_known(&mut self.s.engines_known[d], &issuer_known);
        let me = self.agent;
        self.clock_mut()[me] += 1;
        let c = CopyInFlight {
            buf: d as u16,
            bar: b as u16,
            bytes,
            version,
            issuer: self.agent.min(n - 1) as u16,
            stmt: self.stmt,
            kind: CopyKind::Tma,
            offset: 0,
            len: self.p().buffers[d].bytes,
            release: None,
        };
        self.s.copies.push(c);
        self.obs.push(Obs::CopyIssued {
            buf: d as u16,
            bar: b as u16,
            bytes,
            version,
        });
        Ok(None)
    }

    fn op_copy_part(
        &mut self,
        what: &str,
        buf: &Ref,
        bar: &Ref,
        offset: &IExpr,
        bytes: &IExpr,
        version: &Option<IExpr>,
        locals: Option<&[i64]>,
    ) -> R<Option<i64>> {
        let d = self.resolve_buf(buf, locals)?;
        let b = self.resolve_bar(bar, locals)?;
        let off = self.ev(offset, locals)?;
        let n = self.ev(bytes, locals)?;
        let version = match version {
            Some(e) => self.ev(e, locals)?,
            None => self.s.buffers[d].writes as i64,
        };
        self.live_barrier(b, what)?;
        self.check_range(
            K::TxRange,
            n,
            0,
            format!("the byte count of the copy into {}", self.p().buffers[d].name),
        )?;
        self.issue_range_copy(d, b as u16, n, version, off, CopyKind::Tma)?;
        Ok(None)
    }

    /// `st_async`: a store of the thread's registers that lands like a partial copy (its own
    /// event, complete_tx on the barrier), after the checks PTX puts on its operands.
    fn op_st_async(
        &mut self,
        buf: &Ref,
        bar: &Ref,
        offset: &IExpr,
        bytes: &IExpr,
        version: &IExpr,
        locals: Option<&[i64]>,
    ) -> R<Option<i64>> {
        let off = self.ev(offset, locals)?;
        let n = self.ev(bytes, locals)?;
        if ![4, 8, 16].contains(&n) || off % n != 0 {
            self.fail(
                K::Assertion,
                format!(
                    "{}: st_async of {n} bytes at offset {off}: st.async stores 4, 8 or 16 bytes (b32, b64/v2.b32, v4.b32) at an address aligned to its size (undefined behaviour otherwise)",
                    self.label()
                ),
            );
            return Err(());
        }
        self.op_copy_part("st_async", buf, bar, offset, bytes, &Some(version.clone()), locals)
    }

    /// `copy_async(DST, B, cta = R, from = SRC)`: the destination side is a partial copy into
    /// the peer's DST; the source side is an asynchronous read of the issuer's own SRC, checked at
    /// the issue as a TMA store's (its data ordered before the issue and fenced for the async
    /// proxy), which lasts until the copy lands: PTX gives the issuing thread no completion of
    /// its own, so SRC may be rewritten only once the landing reaches the writer through the
    /// destination barrier (a peer's release after its wait, as pipelines do). The copy carries
    /// the version SRC holds.
    fn op_copy_from(&mut self, buf: &Ref, bar: &Ref, src: &Ref, offset: &IExpr, bytes: &IExpr, locals: Option<&[i64]>) -> R<Option<i64>> {
        let Some(t) = self.thread.filter(|_| !self.in_completion) else {
            self.broken("R-EVAL", "a copy_async from shared memory outside a thread's own code".to_string());
            return Err(());
        };
        let d = self.resolve_buf(buf, locals)?;
        let b = self.resolve_bar(bar, locals)?;
        // The source is the issuer's own CTA's buffer (shared::cta), whatever CTA the copy lands in.
        let target = self.remote.take();
        let from = self.resolve_buf(src, locals);
        self.remote = target;
        let from = from?;
        let off = self.ev(offset, locals)?;
        let n = self.ev(bytes, locals)?;
        self.live_barrier(b, "copy_async")?;
        self.check_init_fenced(b)?;
        self.check_range(
            K::TxRange,
            n,
            0,
            format!("the byte count of the copy into {}", self.p().buffers[d].name),
        )?;
        self.range_ok(from, 0, n)?;
        self.async_read_checks(t, from, (0, n), "a bulk copy (copy_async from = ...)");
        if self.ended {
            return Err(());
        }
        let version = self.version_in(from, 0, n);
        self.s.copies.push(CopyInFlight::source_read(from, t, self.stmt, n));
        self.obs.push(Obs::AsyncReadIssued {
            buf: from as u16,
            wgmma: false,
        });
        self.issue_range_copy(d, b as u16, n, version, off, CopyKind::Tma)?;
        Ok(None)
    }

    /// `copy_async(..., tensormap = MAP)`: the TMA unit reads the descriptor MAP at the issue,
    /// so its last edit must be ordered before the issue and made visible to it by a
    /// `fence_proxy_tensormap` (else the copy may run with the descriptor as it was before the
    /// edit: a data race across proxies, as for any generic write an async-proxy read meets
    /// unfenced). With `expect = V`, a visible descriptor of another version is a stale read.
    /// The read lasts until the copy lands (an edit before that races with it), kept as the
    /// `SrcRead` entry right before the copy, as a copy from shared memory keeps its source's.
    fn op_tensor_copy(&mut self, map: &Ref, expect: &Option<IExpr>, copy: &CopyOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        let Some(t) = self.thread.filter(|_| !self.in_completion) else {
            self.broken("R-EVAL", "a tensor copy outside a thread's own code".to_string());
            return Err(());
        };
        let m = self.resolve_buf(map, locals)?;
        let want = match expect {
            Some(e) => Some(self.ev(e, locals)?),
            None => None,
        };
        let size = self.p().buffers[m].bytes;
        let name = self.p().buffers[m].name.clone();
        let unordered = self.s.buffers[m]
            .writes_over(0, size)
            .find(|w| w.agent as usize != t && !ordered_before(w, self.clock()))
            .copied();
        // As for any access, a violation is reported and the run goes on (the copy is issued).
        if let Some(w) = unordered {
            self.race(
                true,
                m,
                "issues a tensor copy (copy_async tensormap = ...) reading the descriptor",
                Some(&w),
                "last edit",
            );
        } else if let Some(w) = self.s.buffers[m].unfenced_over(0, size) {
            let msg = format!(
                "{} issues a tensor copy through descriptor {name}, but its last edit (by {}, through the generic proxy) is not followed by a fence_proxy_tensormap ordered before the issue: the TMA unit may still use the descriptor as it was before the edit (a data race across proxies)",
                self.label(),
                self.agent_label(&w)
            );
            self.fail(K::DataRace, msg);
        } else if let Some(w) = want {
            let got = self.version_in(m, 0, size);
            if got != w {
                let msg = format!(
                    "{} issues a tensor copy through descriptor {name} holding {}, but the protocol means version {w}: the copy uses a stale descriptor",
                    self.label(),
                    super::memory::version_text(got)
                );
                self.fail(K::StaleRead, msg);
            }
        }
        if self.ended {
            return Err(());
        }
        let issued = self.s.copies.len();
        let r = self.copy_op(copy, locals)?;
        if self.s.copies.len() != issued + 1 {
            self.broken("R-EVAL", "a tensor copy issued no copy".to_string());
            return Err(());
        }
        self.s.copies.insert(issued, CopyInFlight::source_read(m, t, self.stmt, size));
        self.obs.push(Obs::AsyncReadIssued {
            buf: m as u16,
            wgmma: false,
        });
        Ok(r)
    }

    /// A copy landed: if it is a copy from shared memory, the read of its source (the
    /// `SrcRead` entry right before it, now at `land_index - 1`) ends, recorded as a read by
    /// the destination's engine at the landing, so a later write of the source must be ordered
    /// after the landing.
    fn end_source_read(&mut self, c: &CopyInFlight) {
        let i = self.land_index;
        if i == 0 || i > self.s.copies.len() {
            return;
        }
        let r = self.s.copies[i - 1].clone();
        if r.kind != CopyKind::SrcRead || r.issuer != c.issuer {
            return;
        }
        self.s.copies.remove(i - 1);
        self.land_index = i - 1;
        let n = self.p().threads.len();
        let d = c.buf as usize;
        let engine = Access {
            agent: (n + d) as u16,
            epoch: self.s.engines[d][n + d],
            in_completion: false,
            atomic: false,
        };
        self.record_read(r.buf as usize, (r.offset, r.offset + r.len), engine);
        self.obs.push(Obs::AsyncReadDone { buf: r.buf, wgmma: false });
    }

    /// A write of bytes `lo .. hi` of buffer `d` while a copy from shared memory still reads
    /// them: a data race (the async proxy may copy the new bytes, or a mix).
    pub(super) fn check_source_reads(&mut self, d: usize, lo: i64, hi: i64) {
        let Some(r) = self
            .s
            .copies
            .iter()
            .find(|c| c.kind == CopyKind::SrcRead && c.buf as usize == d && overlaps((c.offset, c.offset + c.len), (lo, hi)))
            .cloned()
        else {
            return;
        };
        let msg = if self.p().buffers[d].tensormap {
            format!(
                "{} edits descriptor {} while a tensor copy issued with it by {} may still read it (nothing orders the copy's landing before this edit)",
                self.label(),
                self.p().buffers[d].name,
                self.p().thread_label(r.issuer as usize)
            )
        } else {
            format!(
                "{} overwrites {} while a copy_async from it issued by {} still reads it (nothing orders the copy's landing before this write)",
                self.label(),
                self.p().buffers[d].name,
                self.p().thread_label(r.issuer as usize)
            )
        };
        self.fail(if self.in_completion { K::CompletionMisuse } else { K::DataRace }, msg);
    }

    pub(super) fn op_cp_async(
        &mut self,
        buf: &Ref,
        offset: &IExpr,
        bytes: &IExpr,
        version: &Option<IExpr>,
        locals: Option<&[i64]>,
    ) -> R<Option<i64>> {
        let d = self.resolve_buf(buf, locals)?;
        let off = self.ev(offset, locals)?;
        let n = self.ev(bytes, locals)?;
        let version = match version {
            Some(e) => self.ev(e, locals)?,
            None => self.s.buffers[d].writes as i64,
        };
        self.issue_range_copy(d, NO_BAR, n, version, off, CopyKind::CpAsync { group_age: 0 })?;
        Ok(None)
    }

    /// The thread running a cp.async group operation (never a completion function).
    fn cp_async_issuer(&mut self, what: &str) -> R<usize> {
        match self.thread.filter(|_| !self.in_completion) {
            Some(t) => Ok(t),
            None => {
                self.broken("R-EVAL", format!("a {what} outside a thread's own code"));
                Err(())
            }
        }
    }

    /// `cp_async_commit_group()`: the thread's copies not yet in a group become its newest
    /// group, and every older group ages by one.
    pub(super) fn op_cp_async_commit(&mut self) -> R<Option<i64>> {
        let t = self.cp_async_issuer("cp_async_commit_group")?;
        for c in self.s.copies.iter_mut().filter(|c| c.issuer as usize == t) {
            if let CopyKind::CpAsync { group_age } = &mut c.kind {
                *group_age = (*group_age + 1).min(MAX_GROUP_AGE);
            }
        }
        Ok(None)
    }

    /// `cp_async_wait_group(N)` / `cp_async_wait_all()`: every copy of the thread in a committed
    /// group older than its `N` newest lands now, and the thread acquires what it wrote. Landing
    /// them here, as the wait returns, is the one order the wait forces; every earlier landing is
    /// another interleaving, which the copies' own landing steps give. Copies not committed are
    /// not waited for (PTX), so a read of them after the wait is still a race.
    pub(super) fn op_cp_async_wait(&mut self, n: &Option<IExpr>, locals: Option<&[i64]>) -> R<Option<i64>> {
        let what = if n.is_some() { "cp_async_wait_group" } else { "cp_async_wait_all" };
        let t = self.cp_async_issuer(what)?;
        let keep = match n {
            None => {
                self.op_cp_async_commit()?;
                0
            }
            Some(e) => {
                let k = self.ev(e, locals)?;
                if !(0..=7).contains(&k) {
                    self.fail(
                        K::Assertion,
                        format!(
                            "{}: cp_async_wait_group({k}): PTX's cp.async.wait_group takes 0 to 7 groups",
                            self.label()
                        ),
                    );
                    return Err(());
                }
                k
            }
        };
        while let Some(i) = self
            .s
            .copies
            .iter()
            .position(|c| c.issuer as usize == t && matches!(c.kind, CopyKind::CpAsync { group_age } if group_age as i64 > keep))
        {
            let c = self.s.copies.remove(i);
            let d = c.buf as usize;
            // The clock the landing writes with, before the engine moves past it.
            let engine = self.s.engines[d].clone();
            let known = self.s.engines_known[d].clone();
            let (agent, thread) = (self.agent, self.thread);
            self.land_index = i;
            self.land(c);
            self.agent = agent;
            self.thread = thread;
            if self.ended {
                return Err(());
            }
            join_into(&mut self.s.threads[t].clock, &engine);
            join_known(&mut self.s.threads[t].known, &known);
        }
        Ok(None)
    }

    pub(super) fn op_cp_async_arrive(&mut self, bar: &Ref, noinc: bool, locals: Option<&[i64]>) -> R<Option<i64>> {
        let what = if noinc { "cp_async_arrive_noinc" } else { "cp_async_arrive" };
        let b = self.resolve_bar(bar, locals)?;
        self.live_barrier(b, what)?;
        let Some(t) = self.thread else {
            self.broken("R-EVAL", "a cp_async_arrive outside a thread".to_string());
            return Err(());
        };
        let waiting = self
            .s
            .copies
            .iter()
            .any(|c| matches!(c.kind, CopyKind::CpAsync { .. }) && c.issuer as usize == t);
        if !waiting {
            // Nothing to track: the arrive-on happens at once (without `.noinc` the
            // increment and the arrival cancel out).
            if noinc {
                self.thread = None;
                let r = self.arrive(b, 1, false, None);
                self.thread = Some(t);
                r?;
            }
            return Ok(None);
        }
        if !noinc {
            let bs = &self.s.barriers[b];
            if bs.pending + 1 > MAX_COUNT {
                let name = self.p().barriers[b].name.clone();
                self.fail(
                    K::CountRange,
                    format!("{}: cp_async_arrive raises the pending count of {name} past 1048575", self.label()),
                );
                return Err(());
            }
            self.s.barriers[b].pending += 1;
            self.obs.push(Obs::CpAsyncPending { bar: b as u16, delta: 1 });
        }
        // What the arrive-on releases when it fires, besides the clock of the landing that fires
        // it: the issuer's clock and knowledge now, as the arrive-on above releases them when
        // nothing is in flight (`arrive` with `self.agent` the issuer). This holds the issuer's
        // history before the instruction, and with it every cp.async of the issuer that already
        // landed (`cp_async_landed` carries those into the issuer's clock): PTX's arrive-on
        // tracks every prior cp.async of the thread, so a waiter on the phase is ordered after
        // them. Nothing later in the issuer's history is in it: the issuer's epoch ticks now, as
        // a release ticks it, so its later accesses are not ordered by this arrive-on (and an
        // earlier arrive-on of the issuer, still in flight, keeps its own, older snapshot). The
        // firing landing's engine clock adds the copies that land after this instruction.
        // Released whether the copies land before or after, the verdict does not depend on which.
        let release = ArriveOnRelease {
            clock: self.clock().into(),
            known: self.known_of_agent().into(),
        };
        let me = self.agent;
        self.clock_mut()[me] += 1;
        self.s.copies.push(CopyInFlight {
            buf: 0,
            bar: b as u16,
            bytes: 0,
            version: 0,
            issuer: t as u16,
            stmt: self.stmt,
            kind: CopyKind::ArriveOn { noinc: noinc },
            offset: 0,
            len: 0,
            release: Some(Box::new(release)),
        });
        Ok(None)
    }

    /// `part` bytes of the copy land: its barrier's tx-count reaches zero while the rest of the
    /// copy is still in flight (the buffer stays under the copy).
    pub(super) fn land_part(&mut self, c: CopyInFlight, part: i64) {
        let n = self.p().threads.len();
        let (d, b) = (c.buf as usize, c.bar as usize);
        self.agent = n + d;
        self.thread = None;
        self.obs.push(Obs::LandedPart {
            buf: c.buf,
            bar: c.bar,
            bytes: part,
        });
        if self.add_tx(b, -part).is_err() {
            return;
        }
        self.release_into(b);
        let _ = self.maybe_complete(b);
    }

    pub(super) fn land(&mut self, c: CopyInFlight) {
        let n = self.p().threads.len();
        let (d, b) = (c.buf as usize, c.bar as usize);
        self.agent = n + d;
        self.thread = None;
        if c.kind == CopyKind::Tma {
            self.end_source_read(&c);
        }
        if c.kind != CopyKind::Tma || self.s.buffers[d].parts.len() > 0 || c.len != self.p().buffers[d].bytes {
            // A cp.async copy, or a copy into part of the buffer.
            self.land_range(c);
            return;
        }
        // Another copy into the same buffer may still be in flight (issuing it was already a
        // data race): the buffer stays under that one.
        let still = self.s.copies.iter().any(|o| o.is_copy() && o.buf as usize == d);
        let cell = &mut self.s.buffers[d];
        cell.value = c.version;
        cell.in_flight = still;
        let cell = &mut self.s.buffers[d];
        cell.unfenced = false;
        cell.reads.clear();
        cell.last_write = Some(Access {
            agent: (n + d) as u16,
            epoch: self.s.engines[d][n + d],
            in_completion: false,
            atomic: false,
        });
        self.obs.push(Obs::Landed {
            buf: c.buf,
            bar: c.bar,
            bytes: c.bytes,
            version: c.version,
        });
        self.land_on_barrier(b, d, c.bytes);
    }

    /// A copy into buffer `d` lands `bytes` on barrier `b`: complete_tx on a live barrier (a
    /// landing on one that is not is a lifetime violation), its issuer's writes released into
    /// the phase, which may complete.
    pub(crate) fn land_on_barrier(&mut self, b: usize, d: usize, bytes: i64) {
        if self.s.barriers[b].life != Life::Live {
            let name = self.p().barriers[b].name.clone();
            self.fail(
                K::Lifetime,
                format!(
                    "the async copy into {} lands on {name}, which is no longer a live barrier",
                    self.p().buffers[d].name
                ),
            );
            return;
        }
        if self.add_tx(b, -bytes).is_err() {
            return;
        }
        self.release_into(b);
        let _ = self.maybe_complete(b);
    }

    /// Issue a copy of `n` bytes into `off .. off + n` of buffer `d`.
    pub(super) fn issue_range_copy(&mut self, d: usize, bar: u16, n: i64, version: i64, off: i64, kind: CopyKind) -> R<()> {
        self.write_range(d, off, off + n, version)?;
        self.s.buffers[d].in_flight = true;
        let issuer_clock = self.clock().to_vec();
        let nt = self.p().threads.len();
        join_into(&mut self.s.engines[d], &issuer_clock);
        let issuer_known = self.known_of_agent().to_vec();
        join_known(&mut self.s.engines_known[d], &issuer_known);
        let me = self.agent;
        self.clock_mut()[me] += 1;
        self.s.copies.push(CopyInFlight {
            buf: d as u16,
            bar,
            bytes: n,
            version,
            issuer: self.agent.min(nt - 1) as u16,
            stmt: self.stmt,
            kind,
            offset: off,
            len: n,
            release: None,
        });
        self.obs.push(Obs::CopyIssued {
            buf: d as u16,
            bar,
            bytes: n,
            version,
        });
        Ok(())
    }

    /// The landing of a cp.async copy, or of a copy into part of a buffer (`land` does the rest).
    /// The copy was at `self.land_index` of `State::copies`.
    pub(super) fn land_range(&mut self, c: CopyInFlight) {
        let n = self.p().threads.len();
        let d = c.buf as usize;
        let still = self.s.copies.iter().any(|o| o.is_copy() && o.buf as usize == d);
        let engine = Access {
            agent: (n + d) as u16,
            epoch: self.s.engines[d][n + d],
            in_completion: false,
            atomic: false,
        };
        let size = self.p().buffers[d].bytes;
        let cell = &mut self.s.buffers[d];
        cell.in_flight = still;
        let (lo, hi) = (c.offset.clamp(0, size), (c.offset + c.len).clamp(0, size));
        split_parts(cell, size, lo, hi);
        let tma = c.kind == CopyKind::Tma;
        for r in cell.parts.iter_mut().filter(|r| lo <= r.lo && r.hi <= hi) {
            r.value = c.version;
            r.reads.clear();
            r.last_write = Some(engine);
            // Bytes a TMA copy wrote came through the async proxy: no fence is owed for them.
            if tma {
                r.unfenced = false;
            }
        }
        coalesce(cell);
        self.obs.push(Obs::Landed {
            buf: c.buf,
            bar: c.bar,
            bytes: c.bytes,
            version: c.version,
        });
        match c.kind {
            CopyKind::Tma => self.land_on_barrier(c.bar as usize, d, c.bytes),
            CopyKind::CpAsync { .. } => self.cp_async_landed(&c),
            CopyKind::Mma => self.mma_landed(&c),
            CopyKind::ArriveOn { .. } | CopyKind::MmaRead | CopyKind::MmaCommit | CopyKind::SrcRead => {}
        }
    }

    /// A cp.async copy landed: its data is released into the barrier of the first arrive-on of
    /// its issuer issued after it (if any), and every arrive-on of the issuer that no cp.async copy
    /// of the issuer precedes any more fires.
    pub(super) fn cp_async_landed(&mut self, c: &CopyInFlight) {
        let at = self.land_index.min(self.s.copies.len());
        let bound = self.s.copies[at..]
            .iter()
            .find(|o| matches!(o.kind, CopyKind::ArriveOn { .. }) && o.issuer == c.issuer)
            .map(|o| o.bar as usize);
        match bound {
            Some(b) => {
                if self.s.barriers[b].life == Life::Live {
                    self.release_into(b);
                }
            }
            None => {
                // No arrive-on tracks it yet: the issuer's next `cp_async_arrive` will, and it
                // can only fire after this landing. The model lets the issuer's later releases
                // carry the landing (docs/model.md); a read that can run before the landing is
                // still a race in the interleaving where it does.
                self.carry_to_issuer(c.issuer as usize);
            }
        }
        loop {
            let mut ahead = false;
            let mut fire = None;
            for (i, o) in self.s.copies.iter().enumerate() {
                if o.issuer != c.issuer {
                    continue;
                }
                match o.kind {
                    CopyKind::CpAsync { .. } => ahead = true,
                    CopyKind::ArriveOn { noinc } if !ahead => {
                        fire = Some((i, o.bar as usize, noinc));
                        break;
                    }
                    _ => {}
                }
            }
            let Some((i, b, noinc)) = fire else { break };
            let o = self.s.copies.remove(i);
            if self.fire_arrive_on(b, noinc, o.release.as_deref()).is_err() || self.ended {
                return;
            }
        }
    }

    /// The arrive-on of a `cp_async_arrive(_noinc)`: an arrival on the barrier's current phase,
    /// by the engine whose landing fires it, which releases its own clock and the issuer's
    /// `release` (its clock as the instruction ran, `op_cp_async_arrive`) into that phase.
    /// Without `.noinc` the pending count was raised when the instruction ran, so in that phase
    /// the two cancel out; if other arrivals completed the phase meanwhile (more arrivals than the
    /// count), the arrive-on is an arrival on a later phase, as on hardware.
    pub(super) fn fire_arrive_on(&mut self, b: usize, _noinc: bool, release: Option<&ArriveOnRelease>) -> R<()> {
        if self.s.barriers[b].life != Life::Live {
            let name = self.p().barriers[b].name.clone();
            self.fail(
                K::Lifetime,
                format!("the arrive-on of a cp_async_arrive fires on {name}, which is no longer a live barrier"),
            );
            return Err(());
        }
        // Into the phase the arrival lands in, not into the engine: the engine's later landings
        // (other copies into the same buffer) must not carry the issuer's history.
        if let Some(r) = release {
            join_into(&mut self.s.barriers[b].clock, &r.clock);
            join_known(&mut self.s.barriers[b].known, &r.known);
        }
        self.arrive(b, 1, false, None)?;
        Ok(())
    }

    /// A copy into the buffer still in flight over bytes `lo .. hi`.
    pub(super) fn flying_over(&self, d: usize, lo: i64, hi: i64) -> Option<&CopyInFlight> {
        self.s
            .copies
            .iter()
            .find(|c| c.is_copy() && c.buf as usize == d && overlaps((c.offset, c.offset + c.len), (lo, hi)))
    }
}

/// The smallest piece of a bulk copy's complete_tx the model splits off (the bulk-copy granule).
pub const LAND_CHUNK: i64 = 16;

/// The bytes a `LandPart` lands, from the barrier's tx-count and the copy's bytes still to land:
/// the bytes that bring the tx-count to zero when the copy alone crosses it, else all but the
/// copy's last chunk. The reference runtime lands the same (verifier/runtime barrier.rs).
pub fn land_part_bytes(tx: i64, remaining: i64) -> i64 {
    if tx < remaining {
        tx
    } else {
        remaining - LAND_CHUNK
    }
}

impl Exec<'_> {
    /// The issuer's later releases carry what the async engine knows now (a landing, an MMA's
    /// completion): the engine's clock and knowledge join the issuer's, and the engine ticks.
    pub(super) fn carry_to_issuer(&mut self, issuer: usize) {
        let engine = self.clock().to_vec();
        let known = self.known_of_agent().to_vec();
        join_into(&mut self.s.threads[issuer].clock, &engine);
        join_known(&mut self.s.threads[issuer].known, &known);
        let me = self.agent;
        self.clock_mut()[me] += 1;
    }
}
