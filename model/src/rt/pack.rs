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

    /// The next `n` words as a boxed slice (clocks).
    fn slice(&mut self, n: usize) -> Box<[u32]> {
        let v: Box<[u32]> = self.w[self.at..self.at + n].into();
        self.at += n;
        v
    }

    pub(super) fn rest(&self) -> bool {
        self.at < self.w.len()
    }
}

fn put_access(out: &mut Vec<u32>, a: &Access) {
    out.push(a.agent as u32 | (a.in_completion as u32) << 16);
    out.push(a.epoch);
}

fn get_access(r: &mut Words) -> Access {
    let w = r.u();
    Access {
        agent: w as u16,
        in_completion: w >> 16 != 0,
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

fn get_cell(w: &[u32]) -> Cell {
    let mut r = Words { w, at: 0 };
    let value = r.i();
    let writes = r.u();
    let flags = r.u();
    let last_write = (flags & 2 != 0).then(|| get_access(&mut r));
    let mut reads = Vec::new();
    let mut parts = Vec::new();
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
    Cell {
        value,
        writes,
        last_write,
        reads,
        in_flight: flags & 1 != 0,
        parts,
        unfenced: flags & 8 != 0,
    }
}

/// Slice equality without a `memcmp` call (the slices are a few words long).
#[inline]
fn same<T: Copy + Eq>(a: &[T], b: &[T]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
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
                w.push(life | (b.observed_prev as u32) << 2 | (b.init_by.is_some() as u32) << 3);
                if let Some((a, e)) = b.init_by {
                    w.push(a as u32);
                    w.push(e);
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
        let p = &self.proto;
        let (nt, nb, nd, nv) = (p.threads.len(), p.barriers.len(), p.buffers.len(), p.vars.len());
        let agents = p.agent_count();
        let mut it = parts.iter();
        let threads = (0..nt)
            .map(|t| {
                let mut r = Words {
                    w: it.next().expect("thread"),
                    at: 0,
                };
                let pc = r.u();
                let sw = r.u();
                let status = match sw & 0xff {
                    0 => Status::Running,
                    1 => Status::AtSyncWarp,
                    2 => Status::AtSyncThreads,
                    4 => Status::AtNamedBar,
                    5 => Status::AtNamedWait,
                    6 => Status::AtClusterWait,
                    _ => Status::Done,
                };
                let locals = (0..p.code_of(t).local_names.len()).map(|_| r.i()).collect();
                let known = (0..nb).map(|_| r.i()).collect();
                let clock = r.slice(agents);
                let path = r.w[r.at..].to_vec();
                ThreadState {
                    pc,
                    status,
                    locals,
                    clock,
                    known,
                    path,
                    commit_seq: (sw >> 8) as u16,
                }
            })
            .collect();
        let barriers = (0..nb)
            .map(|_| {
                let mut r = Words {
                    w: it.next().expect("barrier"),
                    at: 0,
                };
                let flags = r.u();
                let init_by = (flags & 8 != 0).then(|| {
                    let a = r.u() as u16;
                    (a, r.u())
                });
                let (phase, pending, expected, arrived, tx) = (r.i(), r.i(), r.i(), r.i(), r.i());
                let known = (0..nb).map(|_| r.i()).collect();
                let prev_known = (0..nb).map(|_| r.i()).collect();
                let clock = r.slice(agents);
                let prev_clock = r.slice(agents);
                BarrierState {
                    life: match flags & 3 {
                        0 => Life::Uninit,
                        1 => Life::Live,
                        _ => Life::Invalidated,
                    },
                    phase,
                    pending,
                    expected,
                    arrived,
                    tx,
                    init_by,
                    observed_prev: flags & 4 != 0,
                    clock,
                    prev_clock,
                    known,
                    prev_known,
                }
            })
            .collect();
        let buffers = (0..nd).map(|_| get_cell(it.next().expect("buffer"))).collect();
        let vars = (0..nv).map(|_| get_cell(it.next().expect("var"))).collect();
        let mut r = Words {
            w: it.next().expect("copies"),
            at: 0,
        };
        let mut copies = Vec::new();
        while r.rest() {
            copies.push(CopyInFlight::unpack(&mut r, &self.proto));
        }
        let mut r = Words {
            w: it.next().expect("engines"),
            at: 0,
        };
        let engines = (0..nd).map(|_| r.slice(agents)).collect();
        let mut r = Words {
            w: it.next().expect("engine knowledge"),
            at: 0,
        };
        let engines_known = (0..nd).map(|_| (0..nb).map(|_| r.i()).collect()).collect();
        let mut r = Words {
            w: it.next().expect("commit logs"),
            at: 0,
        };
        let warps = p.warp_count();
        let commit_logs = (0..warps)
            .map(|_| {
                let len = r.u();
                (0..len)
                    .map(|_| {
                        let sb = r.u();
                        let sig = r.u() as u64 | (r.u() as u64) << 32;
                        (sb as u16, (sb >> 16) as u16, sig)
                    })
                    .collect()
            })
            .collect();
        let named = if self.named_part() {
            let mut r = Words {
                w: it.next().expect("named barriers"),
                at: 0,
            };
            (0..crate::rt::named_len(&self.proto))
                .map(|_| {
                    let (count, arrived) = (r.i(), r.i());
                    let (clock, known) = if count != 0 || arrived != 0 {
                        (r.slice(agents), (0..nb).map(|_| r.i()).collect())
                    } else {
                        (vec![0; agents].into_boxed_slice(), vec![0; nb].into_boxed_slice())
                    };
                    NamedBarState {
                        count,
                        arrived,
                        clock,
                        known,
                    }
                })
                .collect()
        } else {
            Box::new([]) as Box<[NamedBarState]>
        };
        // The async proxy: packed only where the protocol uses it; elsewhere it keeps
        // the state `init` gave it.
        let none = vec![0u32; nb.div_ceil(32)];
        let proxy_words: &[u32] = if self.tracks_proxy {
            it.next().expect("async proxy")
        } else {
            &none
        };
        let mut r = Words { w: proxy_words, at: 0 };
        let mut flags = |n: usize| -> Box<[bool]> {
            let words: Vec<u32> = (0..n.div_ceil(32)).map(|_| r.u()).collect();
            (0..n).map(|i| words[i / 32] >> (i % 32) & 1 != 0).collect()
        };
        let unfenced_init = flags(nb);
        let tmem: Box<[u32]> = (0..self.tmem_len).map(|_| r.u()).collect();
        let mut reads = Vec::new();
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
        State {
            threads,
            barriers,
            buffers,
            vars,
            copies,
            engines,
            engines_known,
            commit_logs,
            named,
            proxy: ProxyState {
                reads,
                unfenced_init,
                tmem,
            },
        }
    }
}
