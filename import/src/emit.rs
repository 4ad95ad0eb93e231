//! From per-thread event lists to a `.phase` spec: threads with the same path are grouped
//! into roles (a whole warp whose lanes do the same thing becomes a `warps N uniform` role, the
//! statements that one lane alone runs an `elect()` block), barriers are named by their shared
//! symbol (arrays by stride) and every statement says where it came from.

use crate::exec::{Bar, Event, Op, ThreadRun};
use crate::facts::Facts;
use crate::names::demangle;
use crate::ptx::{Module, SrcLoc};
use crate::reroll::Item;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// One role of the imported spec, for the report.
#[derive(Clone, Debug)]
pub struct RoleSummary {
    pub name: String,
    /// First thread and number of threads.
    pub first: u32,
    pub threads: u32,
    pub uniform: bool,
    pub statements: usize,
}

/// Where a unit's statements come from.
enum Unit {
    /// One whole warp, its lanes alike; `extra[i]` marks statements only the elected lane runs.
    Warp { warp: u32, events: Vec<Event>, extra: Vec<bool> },
    /// Consecutive threads with the same events.
    Threads { first: u32, count: u32, events: Vec<Event> },
}

pub struct Names {
    bars: BTreeMap<Bar, String>,
    bar_decls: Vec<(String, String, SrcLoc, crate::ptx::Pos)>,
    pub buffers: BTreeMap<String, (String, i64)>,
    /// Buffers split into equal elements (`slot[STAGES][BYTES]`): symbol -> element bytes.
    pub strides: BTreeMap<String, i64>,
    /// Carved shared memory split into the byte ranges its accesses cover: symbol -> (first
    /// byte, end, name) of each range.
    pub regions: BTreeMap<String, Vec<(i64, i64, String)>>,
}

/// The data of a symbol that also holds barriers, when it is not an array of equal elements:
/// the disjoint byte ranges its accesses cover (overlapping accesses are one range), each a
/// buffer of its own, as a kernel carving its dynamic shared memory into tiles declares them.
/// An access of unknown extent (a wgmma operand, a tensor store without `--tma-bytes`) belongs
/// to the range it starts in; `None` when one starts in none.
fn regions(runs: &[ThreadRun], sym: &str, name: &str) -> Option<Vec<(i64, i64, String)>> {
    let mut ranges: Vec<(i64, i64)> = Vec::new();
    let mut points: Vec<i64> = Vec::new();
    for e in runs.iter().flat_map(|r| r.events.iter()) {
        for (b, start, end) in buffers_of(&e.op) {
            if b == sym {
                if end > start {
                    ranges.push((start, end));
                } else {
                    points.push(start);
                }
            }
        }
    }
    ranges.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::new();
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a < last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    if merged.len() < 2 || !points.iter().all(|p| merged.iter().any(|r| r.0 <= *p && *p < r.1)) {
        return None;
    }
    Some(merged.into_iter().map(|(a, b)| (a, b, format!("{name}_{a}"))).collect())
}

/// A statement's origin: `tma_ring.cu:33`, and the helper's line when it was inlined.
pub fn origin(src: &SrcLoc, pos: crate::ptx::Pos, m: &Module, ptx_name: &str) -> String {
    let file = |f: u32| {
        m.files
            .get(&f)
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
            .unwrap_or_else(|| format!("file{f}"))
    };
    match (src.outer, src.inner) {
        (Some(o), Some(i)) if o != i => format!("{}:{} (inlined from {}:{})", file(o.file), o.line, file(i.file), i.line),
        (Some(o), _) => format!("{}:{}", file(o.file), o.line),
        _ => format!("{ptx_name}:{}", pos.line),
    }
}

fn sig(op: &Op) -> String {
    match op {
        Op::Read { buf, .. } => format!("read {buf}"),
        Op::WarpWrite { buf, .. } => format!("warp write {buf}"),
        o => format!("{o:?}"),
    }
}

/// Adjacent reads of one buffer are one read of the bytes they span, and adjacent writes of
/// one buffer that continue each other are one write: a thread storing a slot word by word (the
/// only way plain C++ writes 16 bytes) is one statement, not one step per word, whose
/// interleavings the search would otherwise take apart (each another agent can race with just
/// as well as with the whole). Writes with a gap between them stay apart, so no byte the
/// kernel leaves alone is written in the spec.
pub fn merge_accesses(events: Vec<Event>) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for e in events {
        match (out.last_mut().map(|l| &mut l.op), &e.op) {
            (Some(Op::Read { buf: b, off: o, bytes: n }), Op::Read { buf, off, bytes }) if b == buf => {
                let end = (*o + *n).max(off + bytes);
                *o = (*o).min(*off);
                *n = end - *o;
            }
            (Some(Op::Write { buf: b, off: o, bytes: n }), Op::Write { buf, off, bytes }) if b == buf && *o + *n == *off => {
                *n += bytes;
            }
            _ => out.push(e),
        }
    }
    out
}

fn barrier_like(op: &Op) -> Option<&Bar> {
    match op {
        Op::Init { bar, .. }
        | Op::Arrive { bar, .. }
        | Op::ArriveExpectTx { bar, .. }
        | Op::ExpectTx { bar, .. }
        | Op::CompleteTx { bar, .. }
        | Op::ArriveDrop { bar }
        | Op::WaitParity { bar, .. }
        | Op::WaitToken { bar, .. }
        | Op::Inval { bar }
        | Op::Copy { bar, .. }
        | Op::CpAsyncArrive { bar, .. } => Some(bar),
        _ => None,
    }
}

/// The buffers an operation touches, each with the first byte and the end of the bytes it
/// touches (end 0: unknown).
fn buffers_of(op: &Op) -> Vec<(&String, i64, i64)> {
    match op {
        Op::Copy { buf, off, bytes, .. }
        | Op::CpAsync { buf, off, bytes }
        | Op::Read { buf, off, bytes }
        | Op::Write { buf, off, bytes }
        | Op::WarpWrite { buf, off, bytes } => vec![(buf, *off, off + bytes)],
        Op::Store { buf, off, bytes } => vec![(buf, *off, if *bytes > 0 { off + bytes } else { 0 })],
        // a descriptor gives where an operand starts, not its extent
        Op::Wgmma { bufs } => bufs.iter().map(|(b, o)| (b, *o, 0)).collect(),
        _ => Vec::new(),
    }
}

/// Names for every barrier and buffer the threads touched.
pub fn names(m: &Module, runs: &[ThreadRun], facts: &mut Facts, ptx_name: &str) -> Names {
    let mut slots: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    let mut inits: BTreeMap<Bar, (i64, SrcLoc, crate::ptx::Pos)> = BTreeMap::new();
    let mut first_use: BTreeMap<Bar, (SrcLoc, crate::ptx::Pos)> = BTreeMap::new();
    for r in runs {
        for e in &r.events {
            if let Some(b) = barrier_like(&e.op) {
                slots.entry(b.0.clone()).or_default().insert(b.1);
                first_use.entry(b.clone()).or_insert((e.src, e.pos));
            }
            if let Op::Init { bar, count } = &e.op {
                inits.entry(bar.clone()).or_insert((*count, e.src, e.pos));
            }
        }
    }
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut unique = |base: String| {
        let mut n = base.clone();
        let mut k = 1;
        while !used.insert(n.clone()) {
            n = format!("{base}_{k}");
            k += 1;
        }
        n
    };
    let data: BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.events.iter())
        .flat_map(|e| buffers_of(&e.op))
        .map(|(b, _, _)| b.as_str())
        .collect();
    let mut bars = BTreeMap::new();
    let mut bar_decls = Vec::new();
    for (sym, offs) in &slots {
        let base = demangle(sym);
        let counts: BTreeSet<Option<i64>> = offs.iter().map(|o| inits.get(&(sym.clone(), *o)).map(|c| c.0)).collect();
        // barriers carved out of dynamic shared memory or out of a symbol that holds data too
        // start where the first of them lies; a symbol of barriers alone is an array as declared
        let carved = m.shared_var(sym).and_then(|v| v.bytes).is_none() || data.contains(sym.as_str());
        let first = if carved { offs.iter().min().copied().unwrap_or(0) } else { 0 };
        let strided = offs.iter().all(|o| (o - first) % 8 == 0);
        let decl_len = m.shared_var(sym).and_then(|v| v.bytes).map(|b| (b / 8) as i64).filter(|_| !carved);
        let max_slot = (offs.iter().max().copied().unwrap_or(0) - first) / 8 + 1;
        let len = decl_len.unwrap_or(max_slot).max(max_slot);
        let name = unique(base.clone());
        let where_ = |o: i64| {
            inits
                .get(&(sym.clone(), o))
                .map(|c| (c.1, c.2))
                .or_else(|| first_use.get(&(sym.clone(), o)).copied())
                .unwrap_or_default()
        };
        for o in offs {
            if !inits.contains_key(&(sym.clone(), *o)) {
                let (src, pos) = where_(*o);
                facts.assumed(
                    format!("barrier {base} at byte {o} is never initialised by the kernel"),
                    "declared manual_init with count 1: a use before init is reported",
                    pos,
                    src,
                );
            }
        }
        if strided && counts.len() == 1 && len > 1 {
            let count = counts.iter().next().copied().flatten().unwrap_or(1);
            for o in offs {
                bars.insert((sym.clone(), *o), format!("{name}[{}]", (o - first) / 8));
            }
            let (src, pos) = where_(*offs.iter().next().unwrap_or(&0));
            bar_decls.push((name.clone(), format!("barrier {name}[{len}] count {count} manual_init"), src, pos));
        } else {
            for o in offs {
                let n = if offs.len() == 1 && *o == first {
                    name.clone()
                } else {
                    format!("{name}_{}", (o - first) / 8)
                };
                let count = inits.get(&(sym.clone(), *o)).map_or(1, |c| c.0);
                bars.insert((sym.clone(), *o), n.clone());
                let (src, pos) = where_(*o);
                bar_decls.push((n.clone(), format!("barrier {n} count {count} manual_init"), src, pos));
            }
        }
    }
    let mut buffers = BTreeMap::new();
    for r in runs {
        for e in &r.events {
            for (buf, start, end) in buffers_of(&e.op) {
                // one symbol carved into data and barriers (a kernel's dynamic shared memory):
                // the data is a buffer of its own, as long as no access reaches a barrier
                if let Some(offs) = slots.get(buf) {
                    // (an access of unknown extent reads the spec's buffer, which is the data alone)
                    if end != 0 && offs.iter().any(|&o| start < o + 8 && o < end) {
                        facts.unresolved(
                            format!("data access to `{}`", demangle(buf)),
                            "the bytes it touches hold barriers too",
                            e.pos,
                            e.src,
                        );
                        continue;
                    }
                    facts.assumed(
                        format!("the data of `{}` -> a buffer apart from its barriers", demangle(buf)),
                        "one symbol holds barriers and data; no access of the data reaches a barrier's 8 bytes",
                        e.pos,
                        e.src,
                    );
                }
                let entry = buffers.entry(buf.clone()).or_insert_with(|| {
                    let n = unique(if slots.contains_key(buf) {
                        format!("{}_data", demangle(buf))
                    } else {
                        demangle(buf)
                    });
                    let size = m.shared_var(buf).and_then(|v| v.bytes).map_or(0, |b| b as i64);
                    if size == 0 {
                        facts.assumed(
                            format!("buffer {n}"),
                            "its size is not declared (extern shared): taken as the bytes the kernel touches",
                            e.pos,
                            e.src,
                        );
                    }
                    (n, size)
                });
                let declared = m.shared_var(buf).and_then(|v| v.bytes).is_some_and(|b| b > 0);
                if !declared {
                    entry.1 = entry.1.max(end);
                }
            }
        }
    }
    let _ = ptx_name;
    let strides = strides(runs, &buffers);
    let regions = buffers
        .iter()
        .filter(|(sym, _)| slots.contains_key(*sym) && !strides.contains_key(*sym))
        .filter_map(|(sym, (name, _))| regions(runs, sym, name).map(|r| (sym.clone(), r)))
        .collect();
    Names {
        bars,
        bar_decls,
        buffers,
        strides,
        regions,
    }
}

/// A buffer that async copies (or bulk stores) fill, whose accesses each stay inside one S-byte
/// element, and whose size is a multiple of S, is an array of S-byte elements: the
/// `[STAGES][BYTES]` declaration of a ring, read back from how it is used. S is the copies' size
/// when they have one and it fits; else the smallest size of an access (at least every copy's)
/// that fits: a slot filled by several copies of part of it and read whole is one element, not
/// a row of copy-sized ones a read would straddle. Elements matter beyond naming: each is a
/// buffer of its own in the spec, whose copies land independently of the other slots'.
fn strides(runs: &[ThreadRun], buffers: &BTreeMap<String, (String, i64)>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (sym, (_, size)) in buffers {
        // (kind, offset, bytes): kind 0 a copy, 1 a bulk store (a whole element), 2 any other
        let accesses: Vec<(u8, i64, i64)> = runs
            .iter()
            .flat_map(|r| r.events.iter())
            .filter_map(|e| match &e.op {
                Op::Copy { buf, off, bytes, .. } if buf == sym => Some((0, *off, *bytes)),
                Op::CpAsync { buf, off, bytes }
                | Op::Read { buf, off, bytes }
                | Op::Write { buf, off, bytes }
                | Op::WarpWrite { buf, off, bytes }
                    if buf == sym && *bytes > 0 =>
                {
                    Some((2, *off, *bytes))
                }
                // a store of one element is placed like a copy; one of unknown size reads it all
                Op::Store { buf, off, bytes } if buf == sym && *bytes > 0 => Some((1, *off, *bytes)),
                Op::Store { buf, .. } if buf == sym => Some((2, 0, *size)),
                _ => None,
            })
            .collect();
        let filled: BTreeSet<i64> = accesses.iter().filter(|a| a.0 < 2).map(|a| a.2).collect();
        let Some(&widest) = filled.iter().next_back() else {
            continue;
        };
        let fits = |s: i64| {
            s > 0
                && s < *size
                && size % s == 0
                && accesses.iter().all(|&(kind, off, bytes)| match kind {
                    1 => off % s == 0 && bytes == s,
                    _ => off >= 0 && bytes > 0 && off / s == (off + bytes - 1) / s,
                })
        };
        let mut candidates: Vec<i64> = Vec::new();
        if filled.len() == 1 {
            candidates.push(widest);
        }
        let mut wider: Vec<i64> = accesses.iter().map(|a| a.2).filter(|&b| b >= widest).collect();
        wider.sort_unstable();
        candidates.extend(wider);
        if let Some(s) = candidates.into_iter().find(|&s| fits(s)) {
            out.insert(sym.clone(), s);
        }
    }
    out
}

fn is_collective(op: &Op) -> bool {
    matches!(
        op,
        Op::SyncThreads
            | Op::SyncWarp { .. }
            | Op::BarSync { .. }
            | Op::BarArrive { .. }
            | Op::ClusterArrive
            | Op::ClusterWait
            | Op::Wgmma { .. }
            | Op::WgmmaWait { .. }
    )
}

/// Group the threads into units, warp by warp.
fn units(runs: &[ThreadRun], facts: &mut Facts) -> Vec<Unit> {
    let n = runs.len() as u32;
    let mut out = Vec::new();
    let mut w = 0;
    while w * 32 < n {
        let lanes: Vec<u32> = (w * 32..((w + 1) * 32).min(n)).collect();
        let sigs: Vec<Vec<String>> = lanes
            .iter()
            .map(|&t| runs[t as usize].events.iter().map(|e| sig(&e.op)).collect())
            .collect();
        let mut done = false;
        if lanes.len() == 32 {
            let mut by_sig: BTreeMap<&Vec<String>, Vec<usize>> = BTreeMap::new();
            for (k, s) in sigs.iter().enumerate() {
                by_sig.entry(s).or_default().push(k);
            }
            // a uniform role cannot hold its lanes' own writes (each lane writes its words) nor cluster barriers (the model refuses them there)
            let writes = |evs: &[Event], mask: &[bool]| {
                evs.iter()
                    .zip(mask)
                    .any(|(e, x)| !x && matches!(e.op, Op::Write { .. } | Op::CpAsync { .. } | Op::ClusterArrive | Op::ClusterWait))
            };
            // a warp-collective store is one write of the warp: in a uniform role, an elected
            // lane's (each lane of the role writing it would be a race of the lanes)
            let mut collective = |events: &[Event], extra: &mut Vec<bool>| {
                for (k, e) in events.iter().enumerate() {
                    if matches!(e.op, Op::WarpWrite { .. }) {
                        extra[k] = true;
                        facts.assumed(
                            format!("warp {w}: a warp-collective store -> a write in an elect() block"),
                            "the warp's lanes store their rows in one instruction: one write of their union, by one lane for the warp",
                            e.pos,
                            e.src,
                        );
                    }
                }
            };
            if by_sig.len() == 1 {
                let events = lane_union(runs, &lanes, None);
                let mut extra = vec![false; events.len()];
                collective(&events, &mut extra);
                let (events, extra) = merge_warp_writes(events, extra);
                if !writes(&events, &extra) {
                    out.push(Unit::Warp { warp: w, events, extra });
                    done = true;
                }
            } else if by_sig.len() == 2 {
                let (odd, base) = {
                    let mut v: Vec<_> = by_sig.values().collect();
                    v.sort_by_key(|l| l.len());
                    (v[0].clone(), v[1][0])
                };
                if odd.len() == 1 {
                    let e = odd[0];
                    if let Some(extra) = subsequence(&sigs[base], &sigs[e]) {
                        let ev = &runs[lanes[e] as usize].events;
                        let ok = !ev.iter().zip(&extra).any(|(x, m)| *m && is_collective(&x.op));
                        let events = lane_union(runs, &lanes, Some((e, &extra, &sigs[base])));
                        let mut extra = extra;
                        collective(&events, &mut extra);
                        let (events, extra) = merge_warp_writes(events, extra);
                        if ok && !writes(&events, &extra) {
                            let r = &runs[lanes[e] as usize];
                            let first = events.iter().zip(&extra).find(|(_, m)| **m).map(|(x, _)| (x.pos, x.src));
                            if let Some((pos, src)) = first {
                                if r.elected {
                                    facts.exact(format!("warp {w}: the elected lane's statements -> elect() blocks"), pos, src);
                                } else {
                                    facts.assumed(
                                        format!("warp {w}: lane {e} alone runs some statements -> elect() blocks"),
                                        "the lanes are otherwise alike, so which lane runs them does not change the protocol; the others wait at the block's end",
                                        pos,
                                        src,
                                    );
                                }
                            }
                            out.push(Unit::Warp { warp: w, events, extra });
                            done = true;
                        }
                    }
                }
            }
        }
        if !done {
            let mut k = 0;
            while k < lanes.len() {
                let mut j = k + 1;
                while j < lanes.len()
                    && runs[lanes[j] as usize]
                        .events
                        .iter()
                        .map(|e| &e.op)
                        .eq(runs[lanes[k] as usize].events.iter().map(|e| &e.op))
                {
                    j += 1;
                }
                out.push(Unit::Threads {
                    first: lanes[k],
                    count: (j - k) as u32,
                    events: runs[lanes[k] as usize].events.clone(),
                });
                k = j;
            }
        }
        w += 1;
    }
    out
}

/// `base` as a subsequence of `long`: which statements of `long` are extra.
fn subsequence(base: &[String], long: &[String]) -> Option<Vec<bool>> {
    let mut j = 0;
    let mut extra = Vec::with_capacity(long.len());
    for s in long {
        if j < base.len() && base[j] == *s {
            extra.push(false);
            j += 1;
        } else {
            extra.push(true);
        }
    }
    (j == base.len()).then_some(extra)
}

/// The events of a warp's representative lane, with each read widened to what all lanes read
/// at that point (lanes read their own words of one buffer; the warp reads their union).
fn lane_union(runs: &[ThreadRun], lanes: &[u32], odd: Option<(usize, &Vec<bool>, &Vec<String>)>) -> Vec<Event> {
    let rep = odd.map_or(0, |o| o.0);
    let mut events = runs[lanes[rep] as usize].events.clone();
    // index in the common (base) sequence of each representative event
    let mut common_idx = Vec::new();
    let mut c = 0;
    for k in 0..events.len() {
        let is_extra = odd.is_some_and(|o| o.1[k]);
        common_idx.push(if is_extra { None } else { Some(c) });
        if !is_extra {
            c += 1;
        }
    }
    for (li, &t) in lanes.iter().enumerate() {
        if li == rep {
            continue;
        }
        let other = &runs[t as usize].events;
        for (k, e) in events.iter_mut().enumerate() {
            let Some(ci) = common_idx[k] else { continue };
            match (&mut e.op, other.get(ci).map(|x| &x.op)) {
                (Op::Read { off, bytes, .. }, Some(Op::Read { off: o2, bytes: n2, .. }))
                | (Op::WarpWrite { off, bytes, .. }, Some(Op::WarpWrite { off: o2, bytes: n2, .. })) => {
                    if *n2 > 0 {
                        let end = if *bytes > 0 { (*off + *bytes).max(o2 + n2) } else { o2 + n2 };
                        *off = if *bytes > 0 { (*off).min(*o2) } else { *o2 };
                        *bytes = end - *off;
                    }
                }
                _ => {}
            }
        }
    }
    events
}

/// A warp's successive matrix stores of one buffer are one write of their span (the extra
/// marks, which lane runs each event, follow).
fn merge_warp_writes(events: Vec<Event>, extra: Vec<bool>) -> (Vec<Event>, Vec<bool>) {
    let mut out: Vec<Event> = Vec::new();
    let mut marks: Vec<bool> = Vec::new();
    for (e, x) in events.into_iter().zip(extra) {
        if let (
            Some(Event {
                op: Op::WarpWrite { buf: b, off: o, bytes: n },
                ..
            }),
            Some(&px),
            Op::WarpWrite { buf, off, bytes },
        ) = (out.last_mut(), marks.last(), &e.op)
        {
            if b == buf && *n > 0 && *bytes > 0 && px == x {
                let end = (*o + *n).max(off + bytes);
                *o = (*o).min(*off);
                *n = end - *o;
                continue;
            }
        }
        out.push(e);
        marks.push(x);
    }
    (out, marks)
}

struct Ctx<'a> {
    names: &'a Names,
    m: &'a Module,
    ptx_name: &'a str,
}

impl Ctx<'_> {
    fn bar(&self, b: &Bar) -> String {
        self.names.bars.get(b).cloned().unwrap_or_else(|| demangle(&b.0))
    }
    fn buf(&self, b: &str) -> String {
        self.names.buffers.get(b).map_or_else(|| demangle(b), |x| x.0.clone())
    }
    /// `slot[1]` and the range relative to it, or `slot` and the range as it is; the range is
    /// `None` when the access covers the whole (element of the) buffer.
    fn place(&self, buf: &str, off: i64, bytes: i64) -> (String, Option<(i64, i64)>) {
        if let Some((a, b, n)) = self
            .names
            .regions
            .get(buf)
            .and_then(|rs| rs.iter().find(|r| r.0 <= off && off < r.1))
        {
            let rel = off - a;
            return (n.clone(), (rel != 0 || bytes != b - a).then_some((rel, bytes)));
        }
        let name = self.buf(buf);
        let size = self.names.buffers.get(buf).map_or(0, |b| b.1);
        match self.names.strides.get(buf) {
            Some(&s) => {
                let k = off / s;
                let rel = off - k * s;
                (format!("{name}[{k}]"), (rel != 0 || bytes != s).then_some((rel, bytes)))
            }
            None => (name, (off != 0 || bytes != size).then_some((off, bytes))),
        }
    }

    fn stmt(&self, op: &Op, tokens: &BTreeSet<usize>, writes: &mut i64) -> Option<String> {
        Some(match op {
            Op::Init { bar, count } => {
                let _ = count;
                format!("init({}, {count})", self.bar(bar))
            }
            Op::Arrive { bar, count, token } => {
                let call = if *count == 1 {
                    format!("arrive({})", self.bar(bar))
                } else {
                    format!("arrive({}, {count})", self.bar(bar))
                };
                match token {
                    Some(t) if tokens.contains(t) => format!("let tok{t} = {call}"),
                    _ => call,
                }
            }
            Op::ArriveExpectTx { bar, bytes } => format!("arrive_expect_tx({}, {bytes})", self.bar(bar)),
            Op::ExpectTx { bar, bytes } => format!("expect_tx({}, {bytes})", self.bar(bar)),
            Op::CompleteTx { bar, bytes } => format!("complete_tx({}, {bytes})", self.bar(bar)),
            Op::ArriveDrop { bar } => format!("arrive_and_drop({})", self.bar(bar)),
            Op::WaitParity { bar, parity } => format!("wait_parity({}, {parity})", self.bar(bar)),
            Op::WaitToken { bar, token } => format!("wait({}, tok{token})", self.bar(bar)),
            Op::Inval { bar } => format!("inval({})", self.bar(bar)),
            Op::Copy { buf, off, bytes, bar } => {
                if !self.names.buffers.contains_key(buf) {
                    return None;
                }
                match self.place(buf, *off, *bytes) {
                    (p, None) => format!("copy_async({p}, {})", self.bar(bar)),
                    (p, Some((o, n))) => format!("copy_async({p}, {}, offset = {o}, bytes = {n})", self.bar(bar)),
                }
            }
            Op::CpAsync { buf, off, bytes } => {
                self.names.buffers.get(buf)?;
                match self.place(buf, *off, *bytes) {
                    (p, None) => format!("cp_async({p})"),
                    (p, Some((o, n))) => format!("cp_async({p}, offset = {o}, bytes = {n})"),
                }
            }
            Op::CpAsyncArrive { bar, noinc } => {
                format!("cp_async_arrive{}({})", if *noinc { "_noinc" } else { "" }, self.bar(bar))
            }
            Op::Store { buf, off, bytes } => {
                self.names.buffers.get(buf)?;
                // with a stride every store of the buffer is one whole element (strides saw to
                // it); without one the statement stores the whole buffer, a wider read than
                // the kernel's (races are over-reported, never missed)
                match (self.names.strides.get(buf), self.names.regions.contains_key(buf)) {
                    (Some(_), _) | (None, true) => format!("copy_store_async({})", self.place(buf, *off, *bytes).0),
                    (None, false) => format!("copy_store_async({})", self.buf(buf)),
                }
            }
            Op::CpAsyncCommit => "cp_async_commit_group()".into(),
            Op::CpAsyncWait { n: Some(n) } => format!("cp_async_wait_group({n})"),
            Op::CpAsyncWait { n: None } => "cp_async_wait_all()".into(),
            Op::ClusterArrive => "cluster_arrive()".into(),
            Op::ClusterWait => "cluster_wait()".into(),
            Op::Wgmma { bufs } => {
                // an operand is the element its descriptor starts in, or the whole buffer (a
                // wider read than the kernel's: races are over-reported, never missed)
                let mut places: Vec<String> = Vec::new();
                for (buf, off) in bufs {
                    self.names.buffers.get(buf)?;
                    let p = match (self.names.strides.get(buf), self.names.regions.contains_key(buf)) {
                        (Some(_), _) | (None, true) => self.place(buf, *off, 1).0,
                        (None, false) => self.buf(buf),
                    };
                    if !places.contains(&p) {
                        places.push(p);
                    }
                }
                if places.len() > 4 {
                    // more operand elements than a statement names: the whole buffers
                    places = Vec::new();
                    for (buf, _) in bufs {
                        let b = self.buf(buf);
                        if !places.contains(&b) {
                            places.push(b);
                        }
                    }
                }
                format!("wgmma_async({})", places.join(", "))
            }
            Op::WgmmaWait { n } => format!("wgmma_wait({n})"),
            Op::CommitGroup => "commit_group()".into(),
            Op::WaitGroup { n, read } => format!("wait_group{}({n})", if *read { "_read" } else { "" }),
            Op::FenceProxy => "fence_proxy_async()".into(),
            Op::FenceInit => "fence_mbarrier_init()".into(),
            Op::SyncThreads => "syncthreads".into(),
            Op::BarSync { id, count } => format!("bar_sync({id}, {count})"),
            Op::BarArrive { id, count } => format!("bar_arrive({id}, {count})"),
            Op::SyncWarp { mask } => format!("syncwarp({mask:#x})"),
            Op::Read { buf, off, bytes } => {
                self.names.buffers.get(buf)?;
                match self.place(buf, *off, *bytes) {
                    (p, None) => format!("read({p})"),
                    (p, Some((o, n))) => format!("read({p}, offset = {o}, bytes = {n})"),
                }
            }
            Op::WarpWrite { bytes: 0, .. } => return None,
            Op::Write { buf, off, bytes } | Op::WarpWrite { buf, off, bytes } => {
                self.names.buffers.get(buf)?;
                *writes += 1;
                match self.place(buf, *off, *bytes) {
                    (p, None) => format!("write({p}, {})", *writes - 1),
                    (p, Some((o, n))) => format!("write({p}, {}, offset = {o}, bytes = {n})", *writes - 1),
                }
            }
        })
    }

    fn body(&self, events: &[Event], extra: &[bool]) -> (String, usize) {
        let tokens: BTreeSet<usize> = events
            .iter()
            .filter_map(|e| match e.op {
                Op::WaitToken { token, .. } => Some(token),
                _ => None,
            })
            .collect();
        let from = |e: &Event| Some(origin(&e.src, e.pos, self.m, self.ptx_name));
        let mut items: Vec<Item> = Vec::new();
        let mut writes = 0;
        let mut n = 0;
        let mut elect = 0;
        let mut k = 0;
        while k < events.len() {
            if extra.get(k) == Some(&true) {
                elect += 1;
                let mut lines = vec![
                    (0, format!("let e{elect} = elect()"), from(&events[k])),
                    (0, format!("if e{elect} == 1 {{"), None),
                ];
                while k < events.len() && extra[k] {
                    if let Some(s) = self.stmt(&events[k].op, &tokens, &mut writes) {
                        lines.push((1, s, from(&events[k])));
                        n += 1;
                    }
                    k += 1;
                }
                lines.push((0, "}".into(), None));
                items.push(Item { lines });
                continue;
            }
            if let Some(s) = self.stmt(&events[k].op, &tokens, &mut writes) {
                items.push(Item {
                    lines: vec![(0, s, from(&events[k]))],
                });
                n += 1;
            }
            k += 1;
        }
        (crate::reroll::render(&items), n)
    }
}

/// Everything after the header: declarations and roles. Returns the text and the roles.
pub fn spec_body(m: &Module, runs: &[ThreadRun], facts: &mut Facts, ptx_name: &str) -> (String, Vec<RoleSummary>, Vec<String>) {
    let names = names(m, runs, facts, ptx_name);
    let ctx = Ctx {
        names: &names,
        m,
        ptx_name,
    };
    let units = units(runs, facts);
    let mut out = String::new();
    let mut barriers = Vec::new();
    for (_, decl, src, pos) in &names.bar_decls {
        let _ = writeln!(out, "{decl:<54} // from {}", origin(src, *pos, m, ptx_name));
        barriers.push(decl.clone());
    }
    for (sym, (name, bytes)) in &names.buffers {
        if let Some(rs) = names.regions.get(sym) {
            for (a, b, n) in rs {
                let _ = writeln!(out, "buffer {n} bytes {}", b - a);
            }
            continue;
        }
        match names.strides.get(sym) {
            Some(s) => {
                let _ = writeln!(out, "buffer {name}[{}] bytes {s}", bytes / s);
            }
            None => {
                let _ = writeln!(out, "buffer {name} bytes {}", (*bytes).max(1));
            }
        }
    }
    // Render every unit, then merge neighbours with the same body.
    struct R {
        first: u32,
        threads: u32,
        warps: Option<(u32, u32)>,
        body: String,
        n: usize,
    }
    let mut rs: Vec<R> = Vec::new();
    let total = runs.len() as u32;
    for u in &units {
        let (first, threads, warps, (body, n)) = match u {
            Unit::Warp { warp, events, extra } => (warp * 32, 32, Some((*warp, 1)), ctx.body(events, extra)),
            Unit::Threads { first, count, events } => (*first, *count, None, ctx.body(events, &[])),
        };
        if let Some(last) = rs.last_mut() {
            let adjacent = last.first + last.threads == first;
            if adjacent && last.body == body && last.warps.is_some() == warps.is_some() {
                last.threads += threads;
                if let (Some(lw), Some(_)) = (&mut last.warps, warps) {
                    lw.1 += 1;
                }
                continue;
            }
        }
        rs.push(R {
            first,
            threads,
            warps,
            body,
            n,
        });
    }
    let mut roles = Vec::new();
    for r in &rs {
        if r.n == 0 {
            let whole = r.first % 32 == 0 && r.threads % 32 == 0;
            let last = r.first + r.threads == total;
            if whole || last || r.warps.is_some() {
                continue; // idle threads that shift nobody's warp
            }
        }
        let name = match r.warps {
            Some((w, 1)) => format!("warp{w}"),
            Some((w, k)) => format!("warps{w}_{}", w + k - 1),
            None if r.threads == 1 => format!("t{}", r.first),
            None => format!("t{}_{}", r.first, r.first + r.threads - 1),
        };
        let head = match r.warps {
            Some((_, k)) => format!("role {name} warps {k} uniform {{"),
            None => format!("role {name}[{}] {{", r.threads),
        };
        let _ = writeln!(out, "\n{head}");
        if r.n == 0 {
            let _ = writeln!(out, "  work");
        }
        out.push_str(&r.body);
        let _ = writeln!(out, "}}");
        roles.push(RoleSummary {
            name,
            first: r.first,
            threads: r.threads,
            uniform: r.warps.is_some(),
            statements: r.n,
        });
    }
    (out, roles, barriers)
}
