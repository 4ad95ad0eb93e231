//! Issue 13 ("The protocols of real Hopper kernels"): the semantics of named barriers
//! (`bar_sync`/`bar_arrive`), of `cp_async` with an mbarrier arrive-on
//! (`cp_async_arrive`/`cp_async_arrive_noinc`), and of copies and reads of part of a buffer
//! (byte ranges). docs/model.md, "Named barriers, cp.async and byte ranges", says why each rule is
//! the one chosen.

use super::*;
use crate::rt::state::{CopyKind, RangeRec, NO_BAR};

/// Hardware named barriers per CTA (PTX: "Each CTA instance has sixteen barriers numbered 0..15").
pub const NAMED_BARRIERS: usize = 16;

/// The named barriers of a fresh state: sixteen idle ones when the protocol uses any, else none.
pub(super) fn initial_named(p: &Protocol, agents: usize) -> Box<[NamedBarState]> {
    (0..named_len(p)).map(|_| idle_named(agents, p.barriers.len())).collect()
}

/// Entries of `State::named`: the sixteen named barriers when the protocol uses any, then the
/// cluster barrier's two when it uses that (step/cluster.rs).
pub fn named_len(p: &Protocol) -> usize {
    let uses = p
        .roles
        .iter()
        .any(|r| r.code.instrs.iter().any(|i| matches!(i.kind, InstrKind::NamedBar { .. })));
    let cluster = p.roles.iter().any(|r| r.code.cluster_slot.is_some());
    (if uses { NAMED_BARRIERS } else { 0 }) + if cluster { 2 } else { 0 }
}

pub(super) fn idle_named(agents: usize, barriers: usize) -> NamedBarState {
    NamedBarState {
        count: 0,
        arrived: 0,
        clock: vec![0; agents].into_boxed_slice(),
        known: vec![0; barriers].into_boxed_slice(),
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

fn overlaps(a: (i64, i64), b: (i64, i64)) -> bool {
    a.0 < b.1 && b.0 < a.1 && a.0 < a.1 && b.0 < b.1
}

impl Model {
    /// The (id, count, sync) of the `bar_sync`/`bar_arrive` a thread stands at, its operands read
    /// as they stand (a peek: the step that executed it recorded the reads).
    pub fn named_bar_at(&self, s: &State, t: usize) -> Option<(i64, i64, bool)> {
        let InstrKind::NamedBar { id, count, sync } = &self.proto.code_of(t).instrs.get(s.threads[t].pc as usize)?.kind else {
            return None;
        };
        let me = &self.proto.threads[t];
        let mut peek = |v: u16| Ok(s.vars[v as usize].value);
        let id = id.eval(&s.threads[t].locals, Some(me), &mut peek).ok()?;
        let count = count.eval(&s.threads[t].locals, Some(me), &mut peek).ok()?;
        Some((id, count, *sync))
    }
}

impl Exec<'_> {
    // ---- named barriers ----------------------------------------------------------------------

    /// A warp whose unfinished lanes have all executed a `bar_sync`/`bar_arrive` arrives at the
    /// named barrier (warp_size threads); a completed barrier releases its `bar_sync` waiters.
    /// Returns whether anything moved (the caller settles again).
    pub(super) fn settle_named(&mut self) -> bool {
        if self.s.named.is_empty() {
            return false;
        }
        let ws = self.p().warp_size as i64;
        for w in 0..self.m.warps.len() {
            let lanes: Vec<usize> = self.m.warps[w]
                .iter()
                .copied()
                .filter(|&t| self.s.threads[t].status != Status::Done)
                .collect();
            if lanes.is_empty() || !lanes.iter().all(|&t| self.s.threads[t].status == Status::AtNamedBar) {
                continue;
            }
            let targets: Vec<Option<(i64, i64, bool)>> = lanes.iter().map(|&t| self.m.named_bar_at(&self.s, t)).collect();
            let first = targets[0];
            let label = self.p().thread_label(lanes[0]);
            let Some((id, count, sync)) = first.filter(|_| targets.iter().all(|x| *x == first)) else {
                self.fail(
                    K::Assertion,
                    format!(
                        "the lanes of warp {w} ({label} and others) execute different bar_sync/bar_arrive instructions or operands; bar.sync and bar.arrive are .aligned: every lane of the warp must execute the same one (undefined behaviour)"
                    ),
                );
                return true;
            };
            let what = if sync { "bar_sync" } else { "bar_arrive" };
            if !(0..NAMED_BARRIERS as i64).contains(&id) {
                self.fail(
                    K::Assertion,
                    format!("{label}: {what}({id}, {count}) names a hardware barrier outside 0..=15"),
                );
                return true;
            }
            if count <= 0 || count % ws != 0 {
                self.fail(
                    K::Assertion,
                    format!(
                        "{label}: {what}({id}, {count}): the thread count must be a positive multiple of the warp size ({ws}); the hardware counts whole warps (undefined behaviour)"
                    ),
                );
                return true;
            }
            let nb = &self.s.named[id as usize];
            if nb.count != 0 && nb.count != count {
                let had = nb.count;
                self.fail(
                    K::Assertion,
                    format!(
                        "{label}: {what}({id}, {count}) while named barrier {id} is in use with thread count {had}: mixing thread counts on one barrier is undefined behaviour"
                    ),
                );
                return true;
            }
            // The warp arrives: every lane releases its history into the barrier.
            for &t in &lanes {
                let c = self.s.threads[t].clock.clone();
                let k = self.s.threads[t].known.clone();
                let nb = &mut self.s.named[id as usize];
                join_into(&mut nb.clock, &c);
                join_known(&mut nb.known, &k);
                self.s.threads[t].clock[t] += 1;
            }
            let nb = &mut self.s.named[id as usize];
            nb.count = count;
            nb.arrived += ws;
            let arrived = nb.arrived;
            self.obs.push(Obs::NamedArrived {
                id: id as u16,
                warp: w as u16,
                arrived,
                count,
            });
            let mut go: Vec<usize> = Vec::new();
            for &t in &lanes {
                if sync {
                    self.s.threads[t].status = Status::AtNamedWait;
                } else {
                    go.push(t);
                }
            }
            if arrived >= count {
                let idle = idle_named(self.p().agent_count(), self.p().barriers.len());
                let nb = std::mem::replace(&mut self.s.named[id as usize], idle);
                self.obs.push(Obs::NamedCompleted { id: id as u16 });
                for t in 0..self.s.threads.len() {
                    if self.s.threads[t].status == Status::AtNamedWait && self.m.named_bar_at(&self.s, t).map(|x| x.0) == Some(id) {
                        let th = &mut self.s.threads[t];
                        join_into(&mut th.clock, &nb.clock);
                        join_known(&mut th.known, &nb.known);
                        th.clock[t] += 1;
                        go.push(t);
                    }
                }
            }
            for &t in &go {
                let th = &mut self.s.threads[t];
                th.status = Status::Running;
                th.pc += 1;
            }
            self.run_released(go);
            return true;
        }
        false
    }

    // ---- tokens of barrier-array elements ----------------------------------------------------

    /// The token about to be waited on came from the element it is waited on (when known).
    pub(super) fn token_check(&mut self, t: usize, origin: u16, index: &IExpr, group: u16) -> R<()> {
        let from = self.s.threads[t].locals[origin as usize];
        let at = self.eval(index)?;
        if from != 0 && from != at + 1 {
            let g = &self.p().barrier_groups[group as usize];
            let name = g.name.clone();
            self.fail(
                K::Assertion,
                format!(
                    "{} waits on {name}[{at}] with a token of {name}[{}]: a token names a phase of the barrier it came from only (undefined: the wait answers about another barrier's phase)",
                    self.label(),
                    from - 1
                ),
            );
            return Err(());
        }
        Ok(())
    }

    // ---- operations --------------------------------------------------------------------------

    pub(super) fn op_issue13(&mut self, op: &IOp, locals: Option<&[i64]>) -> R<Option<i64>> {
        let ev = |x: &mut Exec, e: &IExpr| match locals {
            Some(l) => x.eval_with(e, l),
            None => x.eval(e),
        };
        match op {
            IOp::CopyPart {
                buf,
                bar,
                offset,
                bytes,
                version,
            } => {
                let d = self.resolve_buf(buf, locals)?;
                let b = self.resolve_bar(bar, locals)?;
                let off = ev(self, offset)?;
                let n = ev(self, bytes)?;
                let version = match version {
                    Some(e) => ev(self, e)?,
                    None => self.s.buffers[d].writes as i64,
                };
                self.live_barrier(b, "copy_async")?;
                self.check_range(
                    K::TxRange,
                    n,
                    0,
                    format!("the byte count of the copy into {}", self.p().buffers[d].name),
                )?;
                self.issue_range_copy(d, b as u16, n, version, off, CopyKind::Tma)?;
                Ok(None)
            }
            IOp::CpAsync {
                buf,
                offset,
                bytes,
                version,
            } => {
                let d = self.resolve_buf(buf, locals)?;
                let off = ev(self, offset)?;
                let n = ev(self, bytes)?;
                let version = match version {
                    Some(e) => ev(self, e)?,
                    None => self.s.buffers[d].writes as i64,
                };
                self.issue_range_copy(d, NO_BAR, n, version, off, CopyKind::CpAsync)?;
                Ok(None)
            }
            IOp::CpAsyncArrive { bar, noinc } => {
                let what = if *noinc { "cp_async_arrive_noinc" } else { "cp_async_arrive" };
                let b = self.resolve_bar(bar, locals)?;
                self.live_barrier(b, what)?;
                let Some(t) = self.thread else {
                    self.broken("R-EVAL", "a cp_async_arrive outside a thread".to_string());
                    return Err(());
                };
                let waiting = self.s.copies.iter().any(|c| c.kind == CopyKind::CpAsync && c.issuer as usize == t);
                if !waiting {
                    // Nothing to track: the arrive-on happens at once (without `.noinc` the
                    // increment and the arrival cancel out).
                    if *noinc {
                        self.thread = None;
                        let r = self.arrive(b, 1, false, None);
                        self.thread = Some(t);
                        r?;
                    }
                    return Ok(None);
                }
                if !*noinc {
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
                self.s.copies.push(CopyInFlight {
                    buf: 0,
                    bar: b as u16,
                    bytes: 0,
                    version: 0,
                    issuer: t as u16,
                    stmt: self.stmt,
                    kind: CopyKind::ArriveOn { noinc: *noinc },
                    offset: 0,
                    len: 0,
                });
                Ok(None)
            }
            IOp::ReadPart {
                buf,
                offset,
                bytes,
                expect,
            } => {
                let d = self.resolve_buf(buf, locals)?;
                let off = ev(self, offset)?;
                let n = ev(self, bytes)?;
                let want = match expect {
                    Some(e) => Some(ev(self, e)?),
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
            _ => unreachable!("only issue 13 operations come here"),
        }
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

    /// Issue a copy of `n` bytes into `off .. off + n` of buffer `d`.
    fn issue_range_copy(&mut self, d: usize, bar: u16, n: i64, version: i64, off: i64, kind: CopyKind) -> R<()> {
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
    pub(super) fn land_issue13(&mut self, c: CopyInFlight) {
        let n = self.p().threads.len();
        let d = c.buf as usize;
        let still = self.s.copies.iter().any(|o| o.is_copy() && o.buf as usize == d);
        let engine = Access {
            agent: (n + d) as u16,
            epoch: self.s.engines[d][n + d],
            in_completion: false,
        };
        let size = self.p().buffers[d].bytes;
        let cell = &mut self.s.buffers[d];
        cell.in_flight = still;
        let (lo, hi) = (c.offset.clamp(0, size), (c.offset + c.len).clamp(0, size));
        split_parts(cell, size, lo, hi);
        for r in cell.parts.iter_mut().filter(|r| lo <= r.lo && r.hi <= hi) {
            r.value = c.version;
            r.reads.clear();
            r.last_write = Some(engine);
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
            CopyKind::CpAsync => self.cp_async_landed(&c),
            CopyKind::ArriveOn { .. } => {}
        }
    }

    /// A cp.async copy landed: its data is released into the barrier of the first arrive-on of
    /// its issuer issued after it (if any), and every arrive-on of the issuer that no cp.async copy
    /// of the issuer precedes any more fires.
    fn cp_async_landed(&mut self, c: &CopyInFlight) {
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
                let i = c.issuer as usize;
                let engine = self.clock().to_vec();
                let known = self.known_of_agent().to_vec();
                join_into(&mut self.s.threads[i].clock, &engine);
                join_known(&mut self.s.threads[i].known, &known);
                let me = self.agent;
                self.clock_mut()[me] += 1;
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
                    CopyKind::CpAsync => ahead = true,
                    CopyKind::ArriveOn { noinc } if !ahead => {
                        fire = Some((i, o.bar as usize, noinc));
                        break;
                    }
                    _ => {}
                }
            }
            let Some((i, b, noinc)) = fire else { break };
            self.s.copies.remove(i);
            if self.fire_arrive_on(b, noinc).is_err() || self.ended {
                return;
            }
        }
    }

    /// The arrive-on of a `cp_async_arrive(_noinc)`: an arrival on the barrier's current phase.
    /// Without `.noinc` the pending count was raised when the instruction ran, so in that phase
    /// the two cancel out; if other arrivals completed the phase meanwhile (more arrivals than the
    /// count), the arrive-on is an arrival on a later phase, as on hardware.
    fn fire_arrive_on(&mut self, b: usize, _noinc: bool) -> R<()> {
        if self.s.barriers[b].life != Life::Live {
            let name = self.p().barriers[b].name.clone();
            self.fail(
                K::Lifetime,
                format!("the arrive-on of a cp_async_arrive fires on {name}, which is no longer a live barrier"),
            );
            return Err(());
        }
        self.arrive(b, 1, false, None)?;
        Ok(())
    }

    // ---- byte ranges -------------------------------------------------------------------------

    fn range_ok(&mut self, d: usize, lo: i64, hi: i64) -> R<()> {
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

    /// A copy into the buffer still in flight over bytes `lo .. hi`.
    fn flying_over(&self, d: usize, lo: i64, hi: i64) -> Option<&CopyInFlight> {
        self.s
            .copies
            .iter()
            .find(|c| c.is_copy() && c.buf as usize == d && overlaps((c.offset, c.offset + c.len), (lo, hi)))
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
        });
        cell.value = 0;
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
        if a.value == b.value && a.last_write == b.last_write && a.reads == b.reads {
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
    }
}

/// Issue 13: one hardware named barrier. Idle (`count == 0`) between uses: a use starts when the
/// first warp arrives, fixing the thread count, and ends when `count` threads have arrived.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NamedBarState {
    /// The thread count of the current use; 0 when idle.
    pub count: i64,
    /// Threads arrived so far (whole warps: `warp_size` each).
    pub arrived: i64,
    /// Join of the arrivers' histories (bar.sync and bar.arrive order memory among participants).
    pub clock: Clock,
    /// Join of the arrivers' phase knowledge of the mbarriers.
    pub known: Box<[i64]>,
}
