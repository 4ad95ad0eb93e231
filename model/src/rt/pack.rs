//! Canonical states and their packing into interned components (the `Packed` side of the
//! transition system).
//!
//! A state is packed component by component (each thread, barrier, buffer and var, then the
//! copies, engines, commit logs, named barriers and async proxy), so that the search interns
//! each component once; `unpack_state` reads back exactly what `pack_part` wrote, which is why
//! the wire format lives in this one file rather than beside each object's record. The canonical
//! form applied before packing is symmetry.rs.

use super::thread::status_word;
use crate::lang::ast::Span;
use crate::rt::state::Refill;
use crate::rt::state::{
    Access, AsyncRead, BarrierState, Cell, CopyInFlight, Life, NamedBarState, ProxyState, RangeRec, State, Status, ThreadState,
};
use crate::rt::Model;

/// The records a state is packed into, in order.
enum Part {
    Thread(usize),
    Barrier(usize),
    Buffer(usize),
    Var(usize),
    Copies,
    Engines,
    EngineKnowledge,
    CommitLogs,
    /// The named barriers (present only when the protocol uses them).
    Named,
    /// The async proxy: reads in flight, unfenced writes and inits.
    Proxy,
}

// ---- packing ----------------------------------------------------------------------------------

/// Words of an i64: one word for small magnitudes (zigzag below 2^31), else a marker and two.
pub(super) fn put_i64(out: &mut Vec<u32>, v: i64) {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    if z < 0x8000_0000 {
        out.push(z as u32);
    } else {
        out.push(u32::MAX);
        out.push(z as u32);
        out.push((z >> 32) as u32);
    }
}

pub(super) struct Words<'a> {
    w: &'a [u32],
    at: usize,
}

impl Words<'_> {
    pub(super) fn u(&mut self) -> u32 {
        let v = self.w[self.at];
        self.at += 1;
        v
    }

    pub(super) fn i(&mut self) -> i64 {
        let first = self.u();
        let z = if first == u32::MAX {
            let lo = self.u() as u64;
            let hi = self.u() as u64;
            lo | hi << 32
        } else {
            first as u64
        };
        ((z >> 1) as i64) ^ -((z & 1) as i64)
    }

    pub(super) fn rest(&self) -> bool {
        self.at < self.w.len()
    }
}

fn put_access(out: &mut Vec<u32>, a: &Access) {
    out.push(a.agent as u32 | (a.in_completion as u32) << 16 | (a.atomic as u32) << 17);
    out.push(a.epoch);
}

fn get_access(r: &mut Words) -> Access {
    let w = r.u();
    Access {
        agent: w as u16,
        in_completion: (w >> 16) & 1 != 0,
        atomic: (w >> 17) & 1 != 0,
        epoch: r.u(),
    }
}

fn put_cell(out: &mut Vec<u32>, c: &Cell) {
    put_i64(out, c.value);
    out.push(c.writes);
    let parts = !c.parts.is_empty();
    out.push(c.in_flight as u32 | (c.last_write.is_some() as u32) << 1 | (parts as u32) << 2 | (c.unfenced as u32) << 3);
    if let Some(w) = &c.last_write {
        put_access(out, w);
    }
    if parts {
        // Per range records follow the whole-buffer reads, so they need a count.
        out.push(c.reads.len() as u32);
    }
    for r in &c.reads {
        put_access(out, r);
    }
    for r in &c.parts {
        put_i64(out, r.lo);
        put_i64(out, r.hi);
        put_i64(out, r.value);
        out.push(r.last_write.is_some() as u32 | (r.unfenced as u32) << 1 | (r.reads.len() as u32) << 2);
        if let Some(w) = &r.last_write {
            put_access(out, w);
        }
        for a in &r.reads {
            put_access(out, a);
        }
    }
}

/// `c` as the words `w` describe it (`put_cell`'s inverse), reusing its vectors.
fn get_cell_into(w: &[u32], c: &mut Cell) {
    let Cell {
        value,
        writes,
        last_write,
        reads,
        in_flight,
        parts,
        unfenced,
    } = c;
    let mut r = Words { w, at: 0 };
    *value = r.i();
    *writes = r.u();
    let flags = r.u();
    *last_write = (flags & 2 != 0).then(|| get_access(&mut r));
    reads.clear();
    parts.clear();
    if flags & 4 != 0 {
        let n = r.u();
        for _ in 0..n {
            reads.push(get_access(&mut r));
        }
        while r.rest() {
            let (lo, hi, value) = (r.i(), r.i(), r.i());
            let f = r.u();
            let last_write = (f & 1 != 0).then(|| get_access(&mut r));
            let reads = (0..f >> 2).map(|_| get_access(&mut r)).collect();
            parts.push(RangeRec {
                lo,
                hi,
                value,
                last_write,
                reads,
                unfenced: f & 2 != 0,
            });
        }
    } else {
        while r.rest() {
            reads.push(get_access(&mut r));
        }
    }
    *in_flight = flags & 1 != 0;
    *unfenced = flags & 8 != 0;
}

/// Overwrite `b` with `n` values of `next`, keeping its block when the length agrees.
#[inline]
fn fill<T>(b: &mut Box<[T]>, n: usize, mut next: impl FnMut() -> T) {
    if b.len() == n {
        for x in b.iter_mut() {
            *x = next();
        }
    } else {
        *b = (0..n).map(|_| next()).collect();
    }
}

/// Give `b` exactly `n` records, keeping the ones it has when the length agrees (their contents
/// are overwritten after).
fn resize<T>(b: &mut Box<[T]>, n: usize, blank: impl FnMut() -> T) {
    if b.len() != n {
        *b = std::iter::repeat_with(blank).take(n).collect();
    }
}

/// Records whose every field `unpack_into` sets. Written out in full so that a field added to a
/// record must be given a value here (and read back there).
fn blank_thread() -> ThreadState {
    ThreadState {
        pc: 0,
        status: Status::Running,
        locals: Box::new([]),
        clock: Box::new([]),
        known: Box::new([]),
        path: Vec::new(),
        commit_seq: 0,
    }
}

fn blank_barrier() -> BarrierState {
    BarrierState {
        life: Life::Uninit,
        phase: 0,
        pending: 0,
        expected: 0,
        arrived: 0,
        tx: 0,
        init_by: None,
        init_pub: 0,
        observed_prev: false,
        clock: Box::new([]),
        prev_clock: Box::new([]),
        known: Box::new([]),
        prev_known: Box::new([]),
    }
}

fn blank_cell() -> Cell {
    Cell {
        value: 0,
        writes: 0,
        last_write: None,
        reads: Vec::new(),
        in_flight: false,
        parts: Vec::new(),
        unfenced: false,
    }
}

fn blank_state() -> State {
    State {
        threads: Box::new([]),
        barriers: Box::new([]),
        buffers: Box::new([]),
        vars: Box::new([]),
        copies: Vec::new(),
        engines: Box::new([]),
        engines_known: Box::new([]),
        commit_logs: Box::new([]),
        named: Box::new([]),
        proxy: ProxyState::default(),
    }
}

/// Slice equality without a `memcmp` call (the slices are a few words long). No early exit:
/// most compared slices are equal, and a loop without one is vectorised.
#[inline]
fn same<T: Copy + Eq>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(true, |ok, (x, y)| ok & (x == y))
}

/// `a == b` for thread records (`Model::same_part`). Destructured so that a field added to the
/// record stops the build here rather than going uncompared.
#[inline]
fn same_thread(a: &ThreadState, b: &ThreadState) -> bool {
    let ThreadState {
        pc,
        status,
        locals,
        clock,
        known,
        path,
        commit_seq,
    } = a;
    *pc == b.pc
        && *status == b.status
        && *commit_seq == b.commit_seq
        && same(locals, &b.locals)
        && same(clock, &b.clock)
        && same(known, &b.known)
        && same(path, &b.path)
}

/// `a == b` for barrier records (see `same_thread`).
#[inline]
fn same_barrier(a: &BarrierState, b: &BarrierState) -> bool {
    let BarrierState {
        life,
        phase,
        pending,
        expected,
        arrived,
        tx,
        init_by,
        init_pub,
        observed_prev,
        clock,
        prev_clock,
        known,
        prev_known,
    } = a;
    *pending == b.pending
        && *phase == b.phase
        && *arrived == b.arrived
        && *tx == b.tx
        && *expected == b.expected
        && *life == b.life
        && *init_by == b.init_by
        && *init_pub == b.init_pub
        && *observed_prev == b.observed_prev
        && same(clock, &b.clock)
        && same(known, &b.known)
        && same(prev_clock, &b.prev_clock)
        && same(prev_known, &b.prev_known)
}

impl Model {
    /// Components: every thread, every barrier, every buffer, every var, then the copies in
    /// flight, the engines' clocks, the engines' knowledge and the warps' commit logs.
    pub fn component_count(&self) -> usize {
        let p = &self.proto;
        p.threads.len() + p.barriers.len() + p.buffers.len() + p.vars.len() + 4 + self.named_part() as usize + self.tracks_proxy as usize
    }

    /// Whether states have the named-barrier component (the protocol uses them).
    fn named_part(&self) -> bool {
        self.tracks_named
    }

    /// Append the words of every component to `w`, and after each component its end in `w`.
    pub fn pack_state(&self, s: &State, w: &mut Vec<u32>, ends: &mut Vec<u32>) {
        for part in 0..self.component_count() {
            self.pack_part(s, part, w);
            ends.push(w.len() as u32);
        }
    }

    /// Which record a component index names.
    fn part_of(&self, part: usize) -> Part {
        let p = &self.proto;
        let (nt, nb, nd, nv) = (p.threads.len(), p.barriers.len(), p.buffers.len(), p.vars.len());
        if part < nt {
            Part::Thread(part)
        } else if part < nt + nb {
            Part::Barrier(part - nt)
        } else if part < nt + nb + nd {
            Part::Buffer(part - nt - nb)
        } else if part < nt + nb + nd + nv {
            Part::Var(part - nt - nb - nd)
        } else {
            match part - nt - nb - nd - nv {
                0 => Part::Copies,
                1 => Part::Engines,
                2 => Part::EngineKnowledge,
                3 => Part::CommitLogs,
                4 if self.named_part() => Part::Named,
                _ => Part::Proxy,
            }
        }
    }

    /// Whether component `part` is the same in both states (then it packs the same).
    ///
    /// The engine asks this of every component of every successor, and most are equal, so each
    /// comparison runs to the end. The derived `==` of the thread and barrier records calls
    /// `memcmp` once per slice (a few words each): that was 10 % of the search. These compare
    /// short slices inline and the scalars that change most first.
    pub fn same_part(&self, a: &State, b: &State, part: usize) -> bool {
        match self.part_of(part) {
            Part::Thread(t) => same_thread(&a.threads[t], &b.threads[t]),
            Part::Barrier(i) => same_barrier(&a.barriers[i], &b.barriers[i]),
            Part::Buffer(i) => a.buffers[i] == b.buffers[i],
            Part::Var(i) => a.vars[i] == b.vars[i],
            Part::Copies => a.copies == b.copies,
            Part::Engines => a.engines.len() == b.engines.len() && a.engines.iter().zip(b.engines.iter()).all(|(x, y)| same(x, y)),
            Part::EngineKnowledge => {
                a.engines_known.len() == b.engines_known.len()
                    && a.engines_known.iter().zip(b.engines_known.iter()).all(|(x, y)| same(x, y))
            }
            Part::CommitLogs => a.commit_logs == b.commit_logs,
            Part::Named => a.named == b.named,
            Part::Proxy => a.proxy == b.proxy,
        }
    }

    /// Make `n` equal to `s`, given every component in which they differ (`same_part`): those
    /// are copied, and so are the records no component packs (the named barriers and the
    /// async proxy where the protocol has none), which `same_part` never compared.
    pub fn restore(&self, n: &mut State, s: &State, changed: &[usize]) {
        for &part in changed {
            match self.part_of(part) {
                Part::Thread(t) => n.threads[t].refill(&s.threads[t]),
                Part::Barrier(i) => n.barriers[i].refill(&s.barriers[i]),
                Part::Buffer(i) => n.buffers[i].refill(&s.buffers[i]),
                Part::Var(i) => n.vars[i].refill(&s.vars[i]),
                Part::Copies => n.copies.refill(&s.copies),
                Part::Engines => n.engines.refill(&s.engines),
                Part::EngineKnowledge => n.engines_known.refill(&s.engines_known),
                Part::CommitLogs => n.commit_logs.refill(&s.commit_logs),
                Part::Named => n.named.refill(&s.named),
                Part::Proxy => n.proxy.refill(&s.proxy),
            }
        }
        if !self.named_part() {
            n.named.refill(&s.named);
        }
        if !self.tracks_proxy {
            n.proxy.refill(&s.proxy);
        }
    }

    /// Append the words of component `part` to `w`.
    pub fn pack_part(&self, s: &State, part: usize, w: &mut Vec<u32>) {
        match self.part_of(part) {
            Part::Thread(t) => {
                let t = &s.threads[t];
                w.push(t.pc);
                w.push(status_word(t.status) | (t.commit_seq as u32) << 8);
                for &v in t.locals.iter().chain(t.known.iter()) {
                    put_i64(w, v);
                }
                w.extend_from_slice(&t.clock);
                w.extend_from_slice(&t.path);
            }
            Part::Barrier(i) => {
                let b = &s.barriers[i];
                let life = match b.life {
                    Life::Uninit => 0,
                    Life::Live => 1,
                    Life::Invalidated => 2,
                };
                w.push(life | (b.observed_prev as u32) << 2 | (b.init_by.is_some() as u32) << 3 | ((b.init_pub > 0) as u32) << 4);
                if let Some((a, e)) = b.init_by {
                    w.push(a as u32);
                    w.push(e);
                }
                if b.init_pub > 0 {
                    w.push(b.init_pub);
                }
                for v in [b.phase, b.pending, b.expected, b.arrived, b.tx] {
                    put_i64(w, v);
                }
                for &v in b.known.iter().chain(b.prev_known.iter()) {
                    put_i64(w, v);
                }
                w.extend_from_slice(&b.clock);
                w.extend_from_slice(&b.prev_clock);
            }
            Part::Buffer(i) => put_cell(w, &s.buffers[i]),
            Part::Var(i) => put_cell(w, &s.vars[i]),
            Part::Copies => {
                for c in &s.copies {
                    c.pack(self.proto.buffers[c.buf as usize].bytes, w);
                }
            }
            Part::Engines => {
                for e in s.engines.iter() {
                    w.extend_from_slice(e);
                }
            }
            Part::EngineKnowledge => {
                for k in s.engines_known.iter() {
                    for &v in k.iter() {
                        put_i64(w, v);
                    }
                }
            }
            Part::CommitLogs => {
                for log in s.commit_logs.iter() {
                    w.push(log.len() as u32);
                    for &(seq, bar, sig) in log {
                        w.extend_from_slice(&[seq as u32 | (bar as u32) << 16, sig as u32, (sig >> 32) as u32]);
                    }
                }
            }
            Part::Named => {
                for nb in s.named.iter() {
                    put_i64(w, nb.count);
                    put_i64(w, nb.arrived);
                    // An idle entry has no history (the cluster barrier's current phase has
                    // arrivals but no count).
                    if nb.count != 0 || nb.arrived != 0 {
                        w.extend_from_slice(&nb.clock);
                        for &k in nb.known.iter() {
                            put_i64(w, k);
                        }
                    }
                }
            }
            Part::Proxy => {
                let x = &s.proxy;
                for flags in [&x.unfenced_init] {
                    for chunk in flags.chunks(32) {
                        w.push(chunk.iter().enumerate().fold(0u32, |m, (i, &f)| m | (f as u32) << i));
                    }
                }
                w.extend_from_slice(&x.tmem);
                for r in &x.reads {
                    w.extend_from_slice(&[
                        r.buf as u32 | (r.issuer as u32) << 16,
                        r.lo,
                        r.hi,
                        r.age as u32 | (r.wgmma as u32) << 16 | (r.warpgroup as u32) << 17,
                        r.stmt.start,
                        r.stmt.end,
                        r.done,
                        r.waited as u32,
                        (r.waited >> 32) as u32,
                    ]);
                }
            }
        }
    }

    pub fn unpack_state(&self, parts: &[&[u32]]) -> State {
        let mut s = blank_state();
        self.unpack_into(parts, &mut s);
        s
    }

    /// `unpack_state` into `s`, reusing the blocks it holds (any state of this model, typically
    /// the one the engine expanded last): the engine unpacks every state it expands, and
    /// building each anew was about a tenth of the search.
    pub fn unpack_into(&self, parts: &[&[u32]], s: &mut State) {
        let p = &self.proto;
        let (nt, nb, nd, nv) = (p.threads.len(), p.barriers.len(), p.buffers.len(), p.vars.len());
        let agents = p.agent_count();
        let mut it = parts.iter();
        resize(&mut s.threads, nt, blank_thread);
        for (t, th) in s.threads.iter_mut().enumerate() {
            let mut r = Words {
                w: it.next().expect("thread"),
                at: 0,
            };
            let ThreadState {
                pc,
                status,
                locals,
                clock,
                known,
                path,
                commit_seq,
            } = th;
            *pc = r.u();
            let sw = r.u();
            *status = match sw & 0xff {
                0 => Status::Running,
                1 => Status::AtSyncWarp,
                2 => Status::AtSyncThreads,
                4 => Status::AtNamedBar,
                5 => Status::AtNamedWait,
                6 => Status::AtClusterWait,
                _ => Status::Done,
            };
            fill(locals, p.code_of(t).local_names.len(), || r.i());
            fill(known, nb, || r.i());
            fill(clock, agents, || r.u());
            path.clear();
            path.extend_from_slice(&r.w[r.at..]);
            *commit_seq = (sw >> 8) as u16;
        }
        resize(&mut s.barriers, nb, blank_barrier);
        for b in s.barriers.iter_mut() {
            let mut r = Words {
                w: it.next().expect("barrier"),
                at: 0,
            };
            let BarrierState {
                life,
                phase,
                pending,
                expected,
                arrived,
                tx,
                init_by,
                init_pub,
                observed_prev,
                clock,
                prev_clock,
                known,
                prev_known,
            } = b;
            let flags = r.u();
            *init_by = (flags & 8 != 0).then(|| {
                let a = r.u() as u16;
                (a, r.u())
            });
            *init_pub = if flags & 16 != 0 { r.u() } else { 0 };
            (*phase, *pending, *expected, *arrived, *tx) = (r.i(), r.i(), r.i(), r.i(), r.i());
            fill(known, nb, || r.i());
            fill(prev_known, nb, || r.i());
            fill(clock, agents, || r.u());
            fill(prev_clock, agents, || r.u());
            *life = match flags & 3 {
                0 => Life::Uninit,
                1 => Life::Live,
                _ => Life::Invalidated,
            };
            *observed_prev = flags & 4 != 0;
        }
        resize(&mut s.buffers, nd, blank_cell);
        for c in s.buffers.iter_mut() {
            get_cell_into(it.next().expect("buffer"), c);
        }
        resize(&mut s.vars, nv, blank_cell);
        for c in s.vars.iter_mut() {
            get_cell_into(it.next().expect("var"), c);
        }
        let mut r = Words {
            w: it.next().expect("copies"),
            at: 0,
        };
        s.copies.clear();
        while r.rest() {
            s.copies.push(CopyInFlight::unpack(&mut r, &self.proto));
        }
        let mut r = Words {
            w: it.next().expect("engines"),
            at: 0,
        };
        resize(&mut s.engines, nd, || Box::new([]));
        for e in s.engines.iter_mut() {
            fill(e, agents, || r.u());
        }
        let mut r = Words {
            w: it.next().expect("engine knowledge"),
            at: 0,
        };
        resize(&mut s.engines_known, nd, || Box::new([]));
        for k in s.engines_known.iter_mut() {
            fill(k, nb, || r.i());
        }
        let mut r = Words {
            w: it.next().expect("commit logs"),
            at: 0,
        };
        resize(&mut s.commit_logs, p.warp_count(), Vec::new);
        for log in s.commit_logs.iter_mut() {
            let len = r.u();
            log.clear();
            log.extend((0..len).map(|_| {
                let sb = r.u();
                let sig = r.u() as u64 | (r.u() as u64) << 32;
                (sb as u16, (sb >> 16) as u16, sig)
            }));
        }
        if self.named_part() {
            let mut r = Words {
                w: it.next().expect("named barriers"),
                at: 0,
            };
            resize(&mut s.named, crate::rt::named_len(&self.proto), || NamedBarState {
                count: 0,
                arrived: 0,
                clock: Box::new([]),
                known: Box::new([]),
            });
            for nbs in s.named.iter_mut() {
                let NamedBarState {
                    count,
                    arrived,
                    clock,
                    known,
                } = nbs;
                (*count, *arrived) = (r.i(), r.i());
                if *count != 0 || *arrived != 0 {
                    fill(clock, agents, || r.u());
                    fill(known, nb, || r.i());
                } else {
                    fill(clock, agents, || 0);
                    fill(known, nb, || 0);
                }
            }
        } else {
            resize(&mut s.named, 0, || unreachable!("no named barriers"));
        }
        // The async proxy: packed only where the protocol uses it; elsewhere it keeps
        // the state `init` gave it.
        static ZEROS: [u32; 8] = [0; 8];
        let spill;
        let proxy_words: &[u32] = if self.tracks_proxy {
            it.next().expect("async proxy")
        } else if nb.div_ceil(32) <= ZEROS.len() {
            &ZEROS[..nb.div_ceil(32)]
        } else {
            spill = vec![0u32; nb.div_ceil(32)];
            &spill
        };
        let mut r = Words { w: proxy_words, at: 0 };
        let ProxyState {
            reads,
            unfenced_init,
            tmem,
        } = &mut s.proxy;
        let words = nb.div_ceil(32);
        if unfenced_init.len() != nb {
            *unfenced_init = vec![false; nb].into_boxed_slice();
        }
        for k in 0..words {
            let w = r.u();
            for (i, f) in unfenced_init[k * 32..nb.min(k * 32 + 32)].iter_mut().enumerate() {
                *f = w >> i & 1 != 0;
            }
        }
        fill(tmem, self.tmem_len, || r.u());
        reads.clear();
        while r.rest() {
            let a = r.u();
            let (lo, hi) = (r.u(), r.u());
            let b = r.u();
            reads.push(AsyncRead {
                buf: a as u16,
                lo,
                hi,
                issuer: (a >> 16) as u16,
                age: b as u16,
                wgmma: b >> 16 & 1 != 0,
                warpgroup: b >> 17 & 1 != 0,
                stmt: Span { start: r.u(), end: r.u() },
                done: r.u(),
                waited: r.u() as u64 | (r.u() as u64) << 32,
            });
        }
    }
}
