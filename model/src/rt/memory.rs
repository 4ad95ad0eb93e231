//! Shared memory: buffers and shared vars, their byte ranges, the vector clocks that order
//! accesses (happens-before), phase knowledge, and the data races between unordered accesses.

use super::*;
use crate::rt::footprint::Touch;

/// The thread's own (generic-proxy) accesses of a shared buffer.
#[derive(Clone, Debug)]
pub enum MemOp {
    Read {
        buf: Ref,
        expect: Option<IExpr>,
    },
    /// A read of bytes `offset .. offset + bytes` of BUF.
    ReadPart {
        buf: Ref,
        offset: IExpr,
        bytes: IExpr,
        expect: Option<IExpr>,
    },
    Write {
        buf: Ref,
        version: IExpr,
    },
    /// A write of version `version` into bytes `offset .. offset + bytes` of BUF.
    WritePart {
        buf: Ref,
        offset: IExpr,
        bytes: IExpr,
        version: IExpr,
    },
    /// `atomic_add(C, V)`: PTX `red.relaxed.cluster.shared::cluster.add.u32` (CUDA's
    /// `atomicAdd` on shared memory): an indivisible read-modify-write of counter C that orders
    /// nothing (it is relaxed: it neither releases nor acquires). Atomics on one counter never
    /// race each other; each races the plain reads of the counter it is not ordered after.
    AtomicAdd {
        buf: Ref,
        value: IExpr,
    },
    /// `read_counter(C, expect = V)`: a plain (weak, non-atomic) load of counter C's value. It
    /// races every atomic on C it is not ordered after (a `data-race`), since a weak load may
    /// see any of the values the counter passes through; another value than V is a `stale-read`.
    ReadCounter {
        buf: Ref,
        expect: Option<IExpr>,
    },
}

impl MemOp {
    /// Its footprint for the partial-order reduction: its buffer, read or written. An access of
    /// part of a buffer is given the whole buffer's footprint: the reduction's objects are whole
    /// buffers, and a footprint larger than the step's effect only makes more steps dependent
    /// (disjoint ranges, which commute, are treated as conflicting), so it keeps every verdict.
    pub fn touch(&self) -> Touch<'_> {
        use crate::rt::footprint::PhaseEffect as P;
        match self {
            MemOp::Read { buf, .. } | MemOp::ReadPart { buf, .. } | MemOp::ReadCounter { buf, .. } => {
                Touch::objects(None, Some((buf, false)), P::None)
            }
            MemOp::Write { buf, .. } | MemOp::WritePart { buf, .. } => Touch::objects(None, Some((buf, true)), P::None),
            // Two atomics on one counter leave the same state in either order, but the value a
            // step observes (`Obs::Wrote`) differs, and the reduction's independence is judged
            // on steps, not on what the searches report; counting an atomic as a write keeps
            // it dependent on every access of the counter, which is always sound.
            MemOp::AtomicAdd { buf, .. } => Touch::objects(None, Some((buf, true)), P::None),
        }
    }

    /// The buffer accessed.
    pub fn buf(&self) -> &Ref {
        match self {
            MemOp::Read { buf, .. }
            | MemOp::ReadPart { buf, .. }
            | MemOp::Write { buf, .. }
            | MemOp::WritePart { buf, .. }
            | MemOp::AtomicAdd { buf, .. }
            | MemOp::ReadCounter { buf, .. } => buf,
        }
    }

    /// Whether the access is a plain write of the buffer: the lanes of a uniform agent that
    /// make it race each other. An atomic add is not one (atomics never race each other).
    pub fn writes(&self) -> bool {
        match self {
            MemOp::Read { .. } | MemOp::ReadPart { .. } | MemOp::ReadCounter { .. } | MemOp::AtomicAdd { .. } => false,
            MemOp::Write { .. } | MemOp::WritePart { .. } => true,
        }
    }

    /// Whether each lane of a uniform agent makes the access on its own: an atomic add is one
    /// add per lane (a warp's `atomicAdd` adds once for every lane that runs it).
    pub fn per_lane(&self) -> bool {
        matches!(self, MemOp::AtomicAdd { .. })
    }

    /// Every expression the operation evaluates, outermost ones.
    pub fn exprs(&self, f: &mut dyn FnMut(&IExpr)) {
        self.buf().exprs(f);
        match self {
            MemOp::Read { expect, .. } => {
                if let Some(e) = expect {
                    f(e)
                }
            }
            MemOp::ReadPart { offset, bytes, expect, .. } => {
                f(offset);
                f(bytes);
                if let Some(e) = expect {
                    f(e)
                }
            }
            MemOp::Write { version, .. } => f(version),
            MemOp::AtomicAdd { value, .. } => f(value),
            MemOp::ReadCounter { expect, .. } => {
                if let Some(e) = expect {
                    f(e)
                }
            }
            MemOp::WritePart {
                offset, bytes, version, ..
            } => {
                f(offset);
                f(bytes);
                f(version)
            }
        }
    }

    /// The statement's name in the language.
    pub fn name(&self) -> &'static str {
        match self {
            MemOp::Read { .. } | MemOp::ReadPart { .. } => "read",
            MemOp::Write { .. } | MemOp::WritePart { .. } => "write",
            MemOp::AtomicAdd { .. } => "atomic_add",
            MemOp::ReadCounter { .. } => "read_counter",
        }
    }
}
/// A vector clock over agents: threads, then one async-copy engine per buffer.
pub type Clock = Box<[u32]>;

/// Race-tracking record for a buffer (value = version) or a shared var (value = its value).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cell {
    pub value: i64,
    /// Writes issued so far (a copy counts when issued): the default version of the next copy.
    pub writes: u32,
    pub last_write: Option<Access>,
    /// Reads since the last write, at most one per agent, sorted by agent.
    pub reads: Vec<Access>,
    /// An async copy into it is in flight.
    pub in_flight: bool,
    /// Per byte range records, once a partial access (an `offset = ...` copy or read)
    /// touched the buffer; sorted, disjoint, covering the buffer. While non-empty they replace
    /// `value`, `last_write` and `reads`; empty whenever every range has the same record.
    pub parts: Vec<RangeRec>,
    /// The last write is a generic-proxy write (a thread's `write`) that no `fence_proxy_async`
    /// ordered after it has covered yet (buffers only; per range once `parts` is non-empty).
    pub unfenced: bool,
}

/// The race record and version of bytes `lo .. hi` of a buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RangeRec {
    pub lo: i64,
    pub hi: i64,
    pub value: i64,
    pub last_write: Option<Access>,
    pub reads: Vec<Access>,
    /// `Cell::unfenced` of these bytes.
    pub unfenced: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    pub agent: u16,
    pub epoch: u32,
    /// Made by a completion function (a race with it is completion-misuse).
    pub in_completion: bool,
    /// An atomic add of a counter. A counter's `reads` hold its plain reads and its atomics,
    /// at most one of each per agent, sorted by (agent, atomic): atomics do not race each
    /// other, so no atomic replaces another agent's record the way a write clears the reads.
    pub atomic: bool,
}

impl Cell {
    /// The last write of each byte range (the whole buffer's, or each part's once a partial
    /// access split it): the writes a reader of the whole buffer is ordered after.
    pub fn last_writes(&self) -> impl Iterator<Item = &Access> {
        self.last_write
            .iter()
            .chain(self.parts.iter().filter_map(|r| r.last_write.as_ref()))
    }

    /// Every access record of the cell (whole-buffer and per range), for renamings.
    pub fn accesses_mut(&mut self) -> impl Iterator<Item = &mut Access> {
        self.last_write.iter_mut().chain(self.reads.iter_mut()).chain(
            self.parts
                .iter_mut()
                .flat_map(|r| r.last_write.iter_mut().chain(r.reads.iter_mut())),
        )
    }

    pub fn accesses(&self) -> impl Iterator<Item = &Access> {
        self.last_write
            .iter()
            .chain(self.reads.iter())
            .chain(self.parts.iter().flat_map(|r| r.last_write.iter().chain(r.reads.iter())))
    }

    /// The last writes of the bytes `lo .. hi` (of every range overlapping them).
    pub fn writes_over(&self, lo: i64, hi: i64) -> impl Iterator<Item = &Access> {
        self.last_write.iter().chain(
            self.parts
                .iter()
                .filter(move |r| overlaps((r.lo, r.hi), (lo, hi)))
                .filter_map(|r| r.last_write.as_ref()),
        )
    }

    /// The last write of a byte in `lo .. hi` left unfenced for the async proxy, if any.
    pub fn unfenced_over(&self, lo: i64, hi: i64) -> Option<Access> {
        if self.parts.is_empty() {
            return self.last_write.filter(|_| self.unfenced);
        }
        self.parts
            .iter()
            .filter(|r| r.unfenced && overlaps((r.lo, r.hi), (lo, hi)))
            .find_map(|r| r.last_write)
    }

    /// Some byte of the buffer is left unfenced for the async proxy.
    pub fn any_unfenced(&self) -> bool {
        self.unfenced || self.parts.iter().any(|r| r.unfenced)
    }

    /// Whether a `fence_proxy_async` by agent `t` at `clock` covers some unfenced byte: the
    /// range's last write is `t`'s own or ordered before the fence.
    pub fn fence_clears(&self, t: usize, clock: &[u32]) -> bool {
        let covers = |w: &Option<Access>| w.is_none_or(|w| w.agent as usize == t || ordered_before(&w, clock));
        (self.unfenced && covers(&self.last_write)) || self.parts.iter().any(|r| r.unfenced && covers(&r.last_write))
    }

    /// A `fence_proxy_async` by agent `t` at `clock`: every range whose last write is `t`'s own
    /// or ordered before the fence is visible to the async proxy from now on.
    pub fn fence_covered(&mut self, t: usize, clock: &[u32]) {
        let covers = |w: &Option<Access>| w.is_none_or(|w| w.agent as usize == t || ordered_before(&w, clock));
        if self.unfenced && covers(&self.last_write) {
            self.unfenced = false;
        }
        let mut changed = false;
        for r in self.parts.iter_mut() {
            if r.unfenced && covers(&r.last_write) {
                r.unfenced = false;
                changed = true;
            }
        }
        if changed {
            coalesce(self);
        }
    }

    /// The version of the byte at `at` (the whole buffer's while it has no per range records).
    pub fn value_at(&self, at: i64) -> i64 {
        self.parts.iter().find(|r| r.lo <= at && at < r.hi).map_or(self.value, |r| r.value)
    }
}

/// Pointwise maximum, for phase knowledge.
pub fn join_known(dst: &mut [i64], src: &[i64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        if *s > *d {
            *d = *s;
        }
    }
}

pub fn join_into(dst: &mut [u32], src: &[u32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        if *s > *d {
            *d = *s;
        }
    }
}

/// Whether an access is ordered before the point in time described by `clock`.
pub fn ordered_before(a: &Access, clock: &[u32]) -> bool {
    clock[a.agent as usize] >= a.epoch
}

impl Exec<'_> {
    /// Execute one access of shared memory by the current thread (or a completion function).
    pub(super) fn mem_op(&mut self, op: &MemOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        match op {
            MemOp::Read { buf, expect } => self.op_read(buf, expect, locals),
            MemOp::ReadPart {
                buf,
                offset,
                bytes,
                expect,
            } => self.op_read_part(buf, offset, bytes, expect, locals),
            MemOp::Write { buf, version } => self.op_write(buf, version, locals),
            MemOp::WritePart {
                buf,
                offset,
                bytes,
                version,
            } => self.op_write_part(buf, offset, bytes, version, locals),
            MemOp::AtomicAdd { buf, value } => self.op_atomic_add(buf, value, locals),
            MemOp::ReadCounter { buf, expect } => self.op_read_counter(buf, expect, locals),
        }
    }

    /// The counter's record of `acc` (its plain read or its atomic, by `acc.atomic`) is now `acc`.
    fn put_counter_record(&mut self, d: usize, acc: Access) {
        let reads = &mut self.s.buffers[d].reads;
        match reads.binary_search_by_key(&(acc.agent, acc.atomic), |a| (a.agent, a.atomic)) {
            Ok(k) => reads[k] = acc,
            Err(k) => reads.insert(k, acc),
        }
    }

    /// `atomic_add(C, V)`: the add is indivisible, so atomics of any agents never race each
    /// other, whatever their order; it must be ordered after every plain read of the counter
    /// (a weak load racing an atomic store of the location is a data race in the PTX memory
    /// model). It is relaxed: the agent's clock is neither released nor acquired.
    fn op_atomic_add(&mut self, buf: &Ref, value: &IExpr, locals: Option<&[i64]>) -> R<Option<i64>> {
        let d = self.resolve_buf(buf, locals)?;
        let v = self.ev(value, locals)?;
        if let Some(r) = self.unordered_counter_access(d, false) {
            self.race(true, d, "atomically adds to", Some(&r), "plain read of the counter");
        }
        let acc = Access {
            atomic: true,
            ..self.access()
        };
        self.put_counter_record(d, acc);
        // The hardware adds 32-bit words: the value wraps as the word does (read back as the
        // signed `int` the generated kernel records), and V is taken modulo 2^32 as a register
        // of the add would hold it.
        let cell = &mut self.s.buffers[d];
        cell.value = (cell.value as i32).wrapping_add(v as i32) as i64;
        let now = cell.value;
        self.obs.push(Obs::Wrote {
            buf: d as u16,
            version: now,
        });
        Ok(None)
    }

    /// Another agent's access of counter `d` that the current agent is not ordered after: its
    /// last write, or one of the recorded accesses whose `atomic` flag is `atomic` (an atomic add
    /// races plain reads, a plain read races atomic adds; atomics never race each other).
    fn unordered_counter_access(&self, d: usize, atomic: bool) -> Option<Access> {
        let (me, clock, cell) = (self.agent as u16, self.clock(), &self.s.buffers[d]);
        cell.last_write
            .iter()
            .chain(cell.reads.iter().filter(|a| a.atomic == atomic))
            .find(|a| a.agent != me && !ordered_before(a, clock))
            .copied()
    }

    /// `read_counter(C, expect = V)`: a plain load, which must be ordered after every atomic of
    /// the counter by another agent (else `data-race`: it may see any value the counter passes
    /// through), and sees the sum of the atomics made so far; another value than V is a
    /// `stale-read`, as a `read` seeing another version is.
    fn op_read_counter(&mut self, buf: &Ref, expect: &Option<IExpr>, locals: Option<&[i64]>) -> R<Option<i64>> {
        let d = self.resolve_buf(buf, locals)?;
        let want = match expect {
            Some(e) => Some(self.ev(e, locals)?),
            None => None,
        };
        if let Some(a) = self.unordered_counter_access(d, true) {
            self.race(true, d, "reads", Some(&a), "atomic add");
        }
        self.put_counter_record(d, self.access());
        let got = self.s.buffers[d].value;
        self.obs.push(Obs::Read {
            buf: d as u16,
            version: got,
        });
        if let Some(w) = want.filter(|w| *w != got) {
            self.fail(
                K::StaleRead,
                format!(
                    "{} reads value {got} of the counter {} but the protocol means {w}",
                    self.label(),
                    self.p().buffers[d].name
                ),
            );
        }
        Ok(Some(got))
    }

    pub(super) fn op_read(&mut self, buf: &Ref, expect: &Option<IExpr>, locals: Option<&[i64]>) -> R<Option<i64>> {
        let d = self.resolve_buf(buf, locals)?;
        let want = match expect {
            Some(e) => Some(self.ev(e, locals)?),
            None => None,
        };
        self.read_cell(true, d)?;
        let size = self.p().buffers[d].bytes;
        let got = self.version_in(d, 0, size);
        self.obs.push(Obs::Read {
            buf: d as u16,
            version: got,
        });
        if let Some(w) = want {
            if w != got {
                let torn = if self.s.buffers[d].in_flight {
                    " (a copy into it is still in flight: torn on hardware)"
                } else {
                    ""
                };
                self.fail(
                    K::StaleRead,
                    format!(
                        "{} reads {} of {} but the protocol means version {w}{torn}",
                        self.label(),
                        version_text(got),
                        self.p().buffers[d].name
                    ),
                );
            }
        }
        Ok(Some(got))
    }

    pub(super) fn op_write(&mut self, buf: &Ref, version: &IExpr, locals: Option<&[i64]>) -> R<Option<i64>> {
        let d = self.resolve_buf(buf, locals)?;
        let v = self.ev(version, locals)?;
        self.write_cell(true, d, v)?;
        // A generic-proxy write: the async proxy sees it only after a proxy fence.
        if self.m.tracks_proxy {
            let size = self.p().buffers[d].bytes;
            self.set_unfenced(d, 0, size, true);
        }
        self.obs.push(Obs::Wrote { buf: d as u16, version: v });
        Ok(None)
    }

    /// A write of part of a buffer: races and versions are judged per byte range, as for the
    /// landing of a partial copy, so warps writing disjoint fragments of one tile do not conflict.
    fn op_write_part(&mut self, buf: &Ref, offset: &IExpr, bytes: &IExpr, version: &IExpr, locals: Option<&[i64]>) -> R<Option<i64>> {
        let d = self.resolve_buf(buf, locals)?;
        let off = self.ev(offset, locals)?;
        let n = self.ev(bytes, locals)?;
        let v = self.ev(version, locals)?;
        self.write_range(d, off, off + n, v)?;
        if self.m.tracks_proxy {
            self.set_unfenced(d, off, off + n, true);
        }
        self.obs.push(Obs::Wrote { buf: d as u16, version: v });
        Ok(None)
    }

    pub(super) fn op_read_part(
        &mut self,
        buf: &Ref,
        offset: &IExpr,
        bytes: &IExpr,
        expect: &Option<IExpr>,
        locals: Option<&[i64]>,
    ) -> R<Option<i64>> {
        let d = self.resolve_buf(buf, locals)?;
        let off = self.ev(offset, locals)?;
        let n = self.ev(bytes, locals)?;
        let want = match expect {
            Some(e) => Some(self.ev(e, locals)?),
            None => None,
        };
        self.read_range(d, off, off + n)?;
        let got = self.version_in(d, off, off + n);
        self.obs.push(Obs::Read {
            buf: d as u16,
            version: got,
        });
        if let Some(w) = want {
            if w != got {
                self.fail(
                    K::StaleRead,
                    format!(
                        "{} reads {} of bytes {off}..{} of {} but the protocol means version {w}",
                        self.label(),
                        version_text(got),
                        off + n,
                        self.p().buffers[d].name
                    ),
                );
            }
        }
        Ok(Some(got))
    }

    /// Mark bytes `lo .. hi` of buffer `d` as left unfenced (a generic write) or not (a write
    /// through the async proxy, a covering fence).
    pub(super) fn set_unfenced(&mut self, d: usize, lo: i64, hi: i64, flag: bool) {
        let size = self.p().buffers[d].bytes;
        let cell = &mut self.s.buffers[d];
        if cell.parts.is_empty() && lo <= 0 && hi >= size {
            cell.unfenced = flag;
            return;
        }
        let (lo, hi) = (lo.clamp(0, size), hi.clamp(0, size));
        split_parts(cell, size, lo, hi);
        for r in cell.parts.iter_mut().filter(|r| lo <= r.lo && r.hi <= hi) {
            r.unfenced = flag;
        }
        coalesce(cell);
    }

    /// Record a read of bytes `lo .. hi` of buffer `d` by `acc` (one record per agent), without
    /// judging it: an asynchronous read that a wait retired.
    pub(super) fn record_read(&mut self, d: usize, (lo, hi): (i64, i64), acc: Access) {
        let size = self.p().buffers[d].bytes;
        let cell = &mut self.s.buffers[d];
        let put = |reads: &mut Vec<Access>| match reads.binary_search_by_key(&acc.agent, |a| a.agent) {
            Ok(k) => reads[k] = acc,
            Err(k) => reads.insert(k, acc),
        };
        if cell.parts.is_empty() && lo <= 0 && hi >= size {
            put(&mut cell.reads);
            return;
        }
        let (lo, hi) = (lo.clamp(0, size), hi.clamp(0, size));
        split_parts(cell, size, lo, hi);
        for r in cell.parts.iter_mut().filter(|r| lo <= r.lo && r.hi <= hi) {
            put(&mut r.reads);
        }
        coalesce(cell);
    }

    pub(super) fn clock(&self) -> &[u32] {
        let n = self.p().threads.len();
        if self.agent < n {
            &self.s.threads[self.agent].clock
        } else {
            &self.s.engines[self.agent - n]
        }
    }

    pub(super) fn clock_mut(&mut self) -> &mut Clock {
        let n = self.p().threads.len();
        if self.agent < n {
            &mut self.s.threads[self.agent].clock
        } else {
            &mut self.s.engines[self.agent - n]
        }
    }

    pub(super) fn access(&self) -> Access {
        Access {
            agent: self.agent as u16,
            epoch: self.clock()[self.agent],
            in_completion: self.in_completion,
            atomic: false,
        }
    }

    pub(super) fn resolve_buf(&mut self, r: &Ref, locals: Option<&[i64]>) -> R<usize> {
        let groups = &self.m.proto.buffer_groups;
        self.group_index(r, groups, locals)
    }

    /// What the current agent knows of every barrier's phase.
    pub(super) fn known_of_agent(&self) -> &[i64] {
        let n = self.p().threads.len();
        if self.agent < n {
            &self.s.threads[self.agent].known
        } else {
            &self.s.engines_known[self.agent - n]
        }
    }

    pub(super) fn cell_name(&self, is_buf: bool, i: usize) -> String {
        if is_buf {
            self.p().buffers[i].name.clone()
        } else {
            self.p().vars[i].name.clone()
        }
    }

    pub(super) fn race(&mut self, is_buf: bool, i: usize, mine: &str, other: Option<&Access>, other_what: &str) {
        let completion = self.in_completion || other.is_some_and(|a| a.in_completion);
        let who = match other {
            Some(a) => self.agent_label(a),
            None => "an async copy still in flight".to_string(),
        };
        let msg = format!(
            "{} {mine} {} with no happens-before to the {other_what} by {who}",
            self.label(),
            self.cell_name(is_buf, i)
        );
        self.fail(if completion { K::CompletionMisuse } else { K::DataRace }, msg);
    }

    /// A read of a buffer or var: must be ordered after the last write and not under a copy.
    pub(super) fn read_cell(&mut self, is_buf: bool, i: usize) -> R<()> {
        if is_buf && !self.s.buffers[i].parts.is_empty() {
            // The buffer has per range records; a whole read reads every range.
            let size = self.p().buffers[i].bytes;
            return self.read_range(i, 0, size);
        }
        let cell = if is_buf { &self.s.buffers[i] } else { &self.s.vars[i] };
        let me = self.agent as u16;
        if cell.in_flight {
            let who = self
                .s
                .copies
                .iter()
                .find(|c| c.is_copy() && c.buf as usize == i)
                .map(|c| self.p().thread_label(c.issuer as usize))
                .unwrap_or_default();
            let msg = format!(
                "{} reads {} before the async copy into it (issued by {who}) has landed and been waited for",
                self.label(),
                self.cell_name(is_buf, i)
            );
            self.fail(if self.in_completion { K::CompletionMisuse } else { K::DataRace }, msg);
        } else if let Some(w) = cell.last_write.filter(|w| w.agent != me && !ordered_before(w, self.clock())) {
            self.race(is_buf, i, "reads", Some(&w), "last write");
        }
        let acc = self.access();
        let cell = if is_buf { &mut self.s.buffers[i] } else { &mut self.s.vars[i] };
        match cell.reads.binary_search_by_key(&acc.agent, |a| a.agent) {
            Ok(k) => cell.reads[k] = acc,
            Err(k) => cell.reads.insert(k, acc),
        }
        Ok(())
    }

    pub(super) fn write_var(&mut self, v: usize, value: i64) -> R<()> {
        self.write_cell(false, v, value)
    }

    /// A write (or a copy issue): ordered after the last write and after every read since.
    pub(super) fn write_cell(&mut self, is_buf: bool, i: usize, value: i64) -> R<()> {
        if is_buf && !self.s.buffers[i].parts.is_empty() {
            // A whole write (or copy issue) replaces every range's record.
            let size = self.p().buffers[i].bytes;
            return self.write_range(i, 0, size, value);
        }
        if is_buf {
            self.check_async_reads(i);
        }
        let cell = if is_buf { &self.s.buffers[i] } else { &self.s.vars[i] };
        let me = self.agent as u16;
        if cell.in_flight {
            let msg = format!(
                "{} overwrites {} while an async copy into it is still in flight",
                self.label(),
                self.cell_name(is_buf, i)
            );
            self.fail(if self.in_completion { K::CompletionMisuse } else { K::DataRace }, msg);
        } else if let Some(w) = cell.last_write.filter(|w| w.agent != me && !ordered_before(w, self.clock())) {
            self.race(is_buf, i, "overwrites", Some(&w), "last write");
        } else if let Some(r) = cell
            .reads
            .iter()
            .find(|r| r.agent != me && !ordered_before(r, self.clock()))
            .copied()
        {
            self.race(is_buf, i, "overwrites", Some(&r), "read (the slot was not released)");
        }
        let acc = self.access();
        let cell = if is_buf { &mut self.s.buffers[i] } else { &mut self.s.vars[i] };
        cell.value = value;
        cell.writes += 1;
        cell.last_write = Some(acc);
        cell.reads.clear();
        Ok(())
    }

    /// The version a read of `lo .. hi` sees: the one every byte has, or -1 for a mix of versions
    /// (what the generated kernel's `pc_read` returns for a torn buffer).
    pub(super) fn version_in(&self, d: usize, lo: i64, hi: i64) -> i64 {
        let cell = &self.s.buffers[d];
        if cell.parts.is_empty() {
            return cell.value;
        }
        let mut inside = cell.parts.iter().filter(|r| overlaps((r.lo, r.hi), (lo, hi))).map(|r| r.value);
        let first = inside.next().unwrap_or(cell.value);
        if inside.all(|v| v == first) {
            first
        } else {
            MIXED_VERSIONS
        }
    }

    pub(super) fn range_ok(&mut self, d: usize, lo: i64, hi: i64) -> R<()> {
        let size = self.p().buffers[d].bytes;
        if lo < 0 || hi > size || lo > hi {
            self.fail(
                K::Assertion,
                format!(
                    "{}: bytes {lo}..{hi} are outside {} ({size} bytes)",
                    self.label(),
                    self.p().buffers[d].name
                ),
            );
            return Err(());
        }
        Ok(())
    }

    /// A read of bytes `lo .. hi` of buffer `d`: ordered after the last write of each byte and
    /// not under a copy in flight over them.
    pub(super) fn read_range(&mut self, d: usize, lo: i64, hi: i64) -> R<()> {
        self.range_ok(d, lo, hi)?;
        let me = self.agent as u16;
        let kind = if self.in_completion { K::CompletionMisuse } else { K::DataRace };
        if let Some(c) = self.flying_over(d, lo, hi) {
            let who = self.p().thread_label(c.issuer as usize);
            let msg = format!(
                "{} reads bytes {lo}..{hi} of {} before the async copy into bytes {}..{} of it (issued by {who}) has landed and been waited for",
                self.label(),
                self.p().buffers[d].name,
                c.offset,
                c.offset + c.len
            );
            self.fail(kind, msg);
        } else {
            let size = self.p().buffers[d].bytes;
            let clock = self.clock().to_vec();
            let mut cell = self.s.buffers[d].clone();
            split_parts(&mut cell, size, lo, hi);
            let w = cell
                .parts
                .iter()
                .filter(|r| lo <= r.lo && r.hi <= hi && r.lo < r.hi)
                .find_map(|r| r.last_write.filter(|w| w.agent != me && !ordered_before(w, &clock)));
            if let Some(w) = w {
                self.race(true, d, "reads", Some(&w), "last write");
            }
        }
        let acc = self.access();
        let size = self.p().buffers[d].bytes;
        let cell = &mut self.s.buffers[d];
        split_parts(cell, size, lo, hi);
        for r in cell.parts.iter_mut().filter(|r| lo <= r.lo && r.hi <= hi) {
            match r.reads.binary_search_by_key(&acc.agent, |a| a.agent) {
                Ok(k) => r.reads[k] = acc,
                Err(k) => r.reads.insert(k, acc),
            }
        }
        coalesce(cell);
        Ok(())
    }

    /// A write (or a copy issue) of bytes `lo .. hi` of buffer `d`: ordered after the last write
    /// and every read since, of each byte.
    pub(super) fn write_range(&mut self, d: usize, lo: i64, hi: i64, value: i64) -> R<()> {
        self.range_ok(d, lo, hi)?;
        // The async proxy may still read these bytes (a TMA store's, an MMA's operand).
        self.check_async_reads_over(d, lo, hi);
        let me = self.agent as u16;
        let kind = if self.in_completion { K::CompletionMisuse } else { K::DataRace };
        let size = self.p().buffers[d].bytes;
        if self.flying_over(d, lo, hi).is_some() {
            let msg = format!(
                "{} overwrites bytes {lo}..{hi} of {} while an async copy into them is still in flight",
                self.label(),
                self.p().buffers[d].name
            );
            self.fail(kind, msg);
        } else {
            let clock = self.clock().to_vec();
            let mut cell = self.s.buffers[d].clone();
            split_parts(&mut cell, size, lo, hi);
            let inside = || cell.parts.iter().filter(|r| lo <= r.lo && r.hi <= hi && r.lo < r.hi);
            let unordered = |a: &Access| a.agent != me && !ordered_before(a, &clock);
            if let Some(w) = inside().find_map(|r| r.last_write.filter(|a| unordered(a))) {
                self.race(true, d, "overwrites", Some(&w), "last write");
            } else if let Some(r) = inside().find_map(|r| r.reads.iter().find(|a| unordered(a)).copied()) {
                self.race(true, d, "overwrites", Some(&r), "read (the slot was not released)");
            }
        }
        let acc = self.access();
        let cell = &mut self.s.buffers[d];
        split_parts(cell, size, lo, hi);
        for r in cell.parts.iter_mut().filter(|r| lo <= r.lo && r.hi <= hi) {
            r.value = value;
            r.last_write = Some(acc);
            r.reads.clear();
        }
        cell.writes += 1;
        coalesce(cell);
        Ok(())
    }
}

/// The version a read reports for bytes of different versions.
pub const MIXED_VERSIONS: i64 = -1;

/// `version 3`, or `a mix of versions`.
pub(super) fn version_text(v: i64) -> String {
    if v == MIXED_VERSIONS {
        "a mix of versions".to_string()
    } else {
        format!("version {v}")
    }
}

pub(super) fn overlaps(a: (i64, i64), b: (i64, i64)) -> bool {
    a.0 < b.1 && b.0 < a.1 && a.0 < a.1 && b.0 < b.1
}

/// Give the cell per range records (if it has none yet) split at `lo` and `hi`. While it has
/// them, the whole-buffer fields hold nothing (so equal buffers stay equal states).
pub(crate) fn split_parts(cell: &mut Cell, size: i64, lo: i64, hi: i64) {
    if cell.parts.is_empty() {
        cell.parts.push(RangeRec {
            lo: 0,
            hi: size,
            value: cell.value,
            last_write: cell.last_write.take(),
            reads: std::mem::take(&mut cell.reads),
            unfenced: cell.unfenced,
        });
        cell.value = 0;
        cell.unfenced = false;
    }
    for at in [lo, hi] {
        if let Some(k) = cell.parts.iter().position(|r| r.lo < at && at < r.hi) {
            let mut right = cell.parts[k].clone();
            right.lo = at;
            cell.parts[k].hi = at;
            cell.parts.insert(k + 1, right);
        }
    }
}

/// Merge neighbouring ranges with the same record; one range left is the whole-buffer record.
pub(crate) fn coalesce(cell: &mut Cell) {
    let mut k = 1;
    while k < cell.parts.len() {
        let (a, b) = (&cell.parts[k - 1], &cell.parts[k]);
        if a.value == b.value && a.last_write == b.last_write && a.reads == b.reads && a.unfenced == b.unfenced {
            let hi = b.hi;
            cell.parts[k - 1].hi = hi;
            cell.parts.remove(k);
        } else {
            k += 1;
        }
    }
    if cell.parts.len() == 1 {
        let r = cell.parts.pop().expect("one range");
        cell.value = r.value;
        cell.last_write = r.last_write;
        cell.reads = r.reads;
        cell.unfenced = r.unfenced;
    }
}
