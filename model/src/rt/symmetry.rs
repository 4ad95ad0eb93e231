//! Canonical states: the renamings factored out before a state is stored.
//!
//! Two renamings carry no meaning and are factored out before a state is stored:
//! - **Clock epochs.** Happens-before only ever compares an agent's epochs with each other (an
//!   access `(a, e)` is ordered before a clock `c` when `c[a] >= e`), joins them by maximum and
//!   starts a new one above all others. Replacing each agent's epochs by their rank keeps every
//!   comparison, and keeps states of a long loop from differing only in how many releases came
//!   before: a state's size no longer grows with depth.
//! - **Interchangeable threads (symmetry).** Threads of one role and one warp whose identity
//!   (`tid`, `gtid`, `lane`, `warp`) decides the same values in their code (`identity_signature`)
//!   behave alike: permuting them (and
//!   everything that names them: clock columns, access records, copy issuers, init records) maps
//!   executions to executions with the same violations. Sorting each such class by the threads'
//!   own records picks one representative; ties keep their order, so two equivalent states may
//!   still be stored twice (less reduction, never a lost state).

use super::thread::status_word;
use crate::program::ir::{IExpr, IOp, InstrKind, Protocol, ProxyOp, ThreadInfo, WarpOp};
use crate::rt::state::{Access, State, ThreadState};
use crate::rt::{Action, Model};

/// The classes of interchangeable threads (each sorted, two or more members).
pub fn symmetry_classes(p: &Protocol) -> Vec<Vec<usize>> {
    let mut classes: Vec<((u16, u16, u32, Vec<Option<i64>>), Vec<usize>)> = Vec::new();
    for (t, info) in p.threads.iter().enumerate() {
        let role = &p.roles[info.role as usize];
        // Which lane of a warp `elect()` picks, or a mask names, tells a warp's lanes apart.
        let lanes_named = !role.uniform
            && role
                .code
                .instrs
                .iter()
                .any(|i| matches!(i.kind, InstrKind::Elect { .. } | InstrKind::SyncWarpMask { .. }));
        if lanes_named {
            continue;
        }
        let signature = identity_signature(p, info.role as usize, info);
        // The agents of a uniform role are whole warps, each alone in its warp: its election
        // always picks it and nothing warp-level tells the warps apart unless the role commits
        // (the per-warp commit logs), so they are interchangeable across warps, as whole warps
        // of lanes running identity-free code are in the expanded model.
        let whole_warps = role.uniform
            && !role.code.instrs.iter().any(|i| {
                matches!(
                    i.kind,
                    InstrKind::Op {
                        op: IOp::Warp(WarpOp::Commit { .. }),
                        ..
                    }
                )
            });
        // A warpgroup-scoped wgmma ties an agent to its warpgroup's: only the agents of one
        // warpgroup are interchangeable then.
        let warpgroups = role.code.instrs.iter().any(|i| {
            matches!(
                i.kind,
                InstrKind::Op {
                    op: IOp::Proxy(ProxyOp::Wgmma { warpgroup: true, .. } | ProxyOp::WgmmaWait { warpgroup: true, .. }),
                    ..
                }
            )
        });
        // (the waits of a warpgroup are recorded by member position): none are, for now.
        if warpgroups {
            continue;
        }
        // A tensor-memory region records the thread of its last MMA (rt/tcgen05.rs), which a
        // permutation of the threads would not rename: such roles' agents are kept apart.
        let tcgen05 = role
            .code
            .instrs
            .iter()
            .any(|i| matches!(i.kind, InstrKind::Op { op: IOp::Tc(_), .. }));
        if tcgen05 {
            continue;
        }
        let key = (info.role, info.cta, if whole_warps { u32::MAX } else { info.warp }, signature);
        match classes.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(t),
            None => classes.push((key, vec![t])),
        }
    }
    classes.into_iter().map(|(_, m)| m).filter(|m| m.len() > 1).collect()
}

/// What a thread's identity (`tid`, `gtid`, `lane`, `warp`) decides in its role's code: the value,
/// for this thread, of every largest subexpression that reads its identity and no local or var
/// (`(warp - 1) / WARPS`, `warp % 4 == 0`), in code order. Two threads of a role with the same
/// signature run the same code as a function of their locals and the shared state, so swapping
/// them (locals included) maps executions to executions: the warps of a warpgroup other than its
/// signalling warp are interchangeable, while the signalling warp is not. An identity read mixed
/// with a local (`warp + i`) records the identity itself, which keeps those threads apart.
fn identity_signature(p: &Protocol, role: usize, me: &ThreadInfo) -> Vec<Option<i64>> {
    fn walk(e: &IExpr, me: &ThreadInfo, out: &mut Vec<Option<i64>>) {
        if !e.reads_identity() {
            return;
        }
        let mut state = false;
        e.each(&mut |x| state |= matches!(x, IExpr::Local(_) | IExpr::Var(_)));
        if !state {
            out.push(e.eval_pure(&[], me));
            return;
        }
        match e {
            IExpr::Unary(_, x) => walk(x, me, out),
            IExpr::Binary(_, a, b) => {
                walk(a, me, out);
                walk(b, me, out);
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for i in p.roles[role].code.instrs.iter() {
        i.exprs(&mut |e| walk(e, me, &mut out));
    }
    out
}

/// The order in which a class's members are sorted: everything a thread holds that does not
/// name other agents.
fn thread_key(t: &ThreadState) -> (u32, u32, &[i64], &[i64], &[u32], u16) {
    (t.pc, status_word(t.status), &t.locals, &t.known, &t.path, t.commit_seq)
}

impl Model {
    /// Apply the symmetry permutation (when `symmetry`) and normalise epochs. `perm` receives, for
    /// every thread position of the result, the position it had in `s` (identity when nothing
    /// moved).
    pub fn canonical_form(&self, s: &mut State, symmetry: bool, perm: &mut Vec<u32>) {
        let n = s.threads.len();
        perm.clear();
        perm.extend(0..n as u32);
        // Epochs first: ranks are the same for every renaming of them, so the order below is too.
        normalise_epochs(s);
        canonical_reads(s);
        if !symmetry {
            return;
        }
        let mut moved = false;
        let mut order: Vec<usize> = Vec::new();
        for class in &self.symmetry {
            order.clear();
            order.extend_from_slice(class);
            let th = &s.threads;
            // Ties on the thread's own record are broken by what it knows of agents outside
            // the class (their columns do not move) and of its own epoch.
            let outside = |t: usize| {
                th[t]
                    .clock
                    .iter()
                    .enumerate()
                    .filter(|(a, _)| class.binary_search(a).is_err())
                    .map(|(_, v)| *v)
            };
            order.sort_by(|&a, &b| {
                thread_key(&th[a])
                    .cmp(&thread_key(&th[b]))
                    .then_with(|| th[a].clock[a].cmp(&th[b].clock[b]))
                    .then_with(|| outside(a).cmp(outside(b)))
            });
            for (slot, &old) in class.iter().zip(&order) {
                perm[*slot] = old as u32;
                moved |= *slot != old;
            }
        }
        if moved {
            permute(s, perm);
            // The renaming moved issuers: the sorted reads (if sorted) follow the new names.
            canonical_reads(s);
        }
    }
}

/// Rename threads: position `new` of the result holds what position `perm[new]` held.
fn permute(s: &mut State, perm: &[u32]) {
    let n = perm.len();
    let agents = s.threads.first().map_or(n, |t| t.clock.len());
    // old agent -> new agent (engines keep their positions).
    let mut to_new: Vec<u32> = (0..agents as u32).collect();
    for (new, &old) in perm.iter().enumerate() {
        to_new[old as usize] = new as u32;
    }
    let old_threads = std::mem::take(&mut s.threads).into_vec();
    let mut slots: Vec<Option<ThreadState>> = old_threads.into_iter().map(Some).collect();
    s.threads = perm.iter().map(|&old| slots[old as usize].take().expect("a permutation")).collect();
    let mut old: Vec<u32> = Vec::with_capacity(agents);
    let mut remap_clock = |c: &mut Box<[u32]>| {
        old.clear();
        old.extend_from_slice(c);
        for (a, v) in old.iter().enumerate() {
            c[to_new[a] as usize] = *v;
        }
    };
    for t in s.threads.iter_mut() {
        remap_clock(&mut t.clock);
    }
    for e in s.engines.iter_mut() {
        remap_clock(e);
    }
    for b in s.barriers.iter_mut() {
        remap_clock(&mut b.clock);
        remap_clock(&mut b.prev_clock);
        if let Some((a, _)) = &mut b.init_by {
            *a = to_new[*a as usize] as u16;
        }
    }
    let remap_access = |a: &mut Access| a.agent = to_new[a.agent as usize] as u16;
    for c in s.buffers.iter_mut().chain(s.vars.iter_mut()) {
        for a in c.accesses_mut() {
            remap_access(a);
        }
        // A counter keeps an agent's plain read and its atomic side by side (rt/memory.rs).
        c.reads.sort_by_key(|r| (r.agent, r.atomic));
        for r in c.parts.iter_mut() {
            r.reads.sort_by_key(|r| r.agent);
        }
    }
    for nb in s.named.iter_mut() {
        remap_clock(&mut nb.clock);
    }
    for c in s.copies.iter_mut() {
        c.issuer = to_new[c.issuer as usize] as u16;
        if let Some(r) = &mut c.release {
            remap_clock(&mut r.clock);
        }
    }
    // The async proxy: reads name their issuer. Their order is the issue order, which a
    // renaming of threads does not change (while a warpgroup read is in flight they are kept
    // sorted instead, and `canonical_form` sorts them again after the renaming).
    for r in s.proxy.reads.iter_mut() {
        r.issuer = to_new[r.issuer as usize] as u16;
    }
}

/// Every clock of the state (threads, engines, barriers' current and previous phases, named
/// barriers, the releases of deferred arrive-ons).
fn clocks_mut(s: &mut State) -> impl Iterator<Item = &mut Box<[u32]>> {
    s.threads
        .iter_mut()
        .map(|t| &mut t.clock)
        .chain(s.engines.iter_mut())
        .chain(s.barriers.iter_mut().flat_map(|b| [&mut b.clock, &mut b.prev_clock]))
        .chain(s.named.iter_mut().map(|n| &mut n.clock))
        .chain(s.copies.iter_mut().filter_map(|c| c.release.as_mut().map(|r| &mut r.clock)))
}

/// Epochs at or above this are renumbered (`normalise_sorted`).
const EPOCH_LIMIT: u32 = 64;

/// Keep epochs small: once one reaches `EPOCH_LIMIT`, replace each agent's epochs by their rank
/// among the values of that agent's column. Below the limit a state is stored as it is: two
/// states that differ only in how their epochs are numbered may both be stored (the search is as
/// exact, only larger), but no state's epochs grow without bound, so a loop that releases forever
/// still revisits states. Measured on the ring benchmarks, renumbering every state merged none
/// and cost a fifth of the search.
fn normalise_epochs(s: &mut State) {
    let Some(agents) = s
        .threads
        .first()
        .map(|t| t.clock.len())
        .or_else(|| s.engines.first().map(|e| e.len()))
    else {
        return;
    };
    let large = s.threads.iter().any(|t| t.clock.iter().any(|&v| v >= EPOCH_LIMIT))
        || s.engines.iter().any(|e| e.iter().any(|&v| v >= EPOCH_LIMIT));
    // Thread and engine clocks hold each agent's latest epoch: nothing else can be larger.
    if large {
        normalise_sorted(s, agents);
    }
}

/// Renumber every agent's epochs by rank (0 kept as 0: it means "nothing of this agent").
fn normalise_sorted(s: &mut State, agents: usize) {
    let mut cols: Vec<Vec<u32>> = vec![vec![0]; agents];
    for c in clocks_mut(s) {
        for (a, &v) in c.iter().enumerate() {
            cols[a].push(v);
        }
    }
    for c in s.buffers.iter().chain(s.vars.iter()) {
        for acc in c.accesses() {
            cols[acc.agent as usize].push(acc.epoch);
        }
    }
    for b in s.barriers.iter() {
        if let Some((a, e)) = b.init_by {
            cols[a as usize].push(e);
        }
    }
    // A completed warpgroup MMA read: an epoch of its buffer's engine (proxy.rs).
    let n = s.threads.len();
    for r in s.proxy.reads.iter().filter(|r| r.done != 0) {
        cols[n + r.buf as usize].push(r.done);
    }
    for c in cols.iter_mut() {
        c.sort_unstable();
        c.dedup();
    }
    // Init agents (cluster scope) keep their epochs: barriers' `init_pub` and the hidden
    // `$init_fence` locals hold them too, and they only grow with fences that publish a new init.
    let fixed = n + s.engines.len();
    let rank = |a: usize, v: u32| {
        if a >= fixed {
            v
        } else {
            cols[a].binary_search(&v).expect("collected") as u32
        }
    };
    rename_epochs(s, &rank);
}

fn rename_epochs(s: &mut State, rank: &dyn Fn(usize, u32) -> u32) {
    for c in clocks_mut(s) {
        for (a, v) in c.iter_mut().enumerate() {
            *v = rank(a, *v);
        }
    }
    for b in s.barriers.iter_mut() {
        if let Some((a, e)) = &mut b.init_by {
            *e = rank(*a as usize, *e);
        }
    }
    let n = s.threads.len();
    for r in s.proxy.reads.iter_mut().filter(|r| r.done != 0) {
        r.done = rank(n + r.buf as usize, r.done);
    }
    for c in s.buffers.iter_mut().chain(s.vars.iter_mut()) {
        for acc in c.accesses_mut() {
            acc.epoch = rank(acc.agent as usize, acc.epoch);
        }
    }
}

/// Rename a thread action by a permutation from `canonical_form` composed along a path.
pub fn rename(a: Action, sigma: &[u32]) -> Action {
    match a {
        Action::Thread(t) => Action::Thread(sigma.get(t as usize).map_or(t, |&o| o as u16)),
        other => other,
    }
}

impl Model {
    /// How many classes of interchangeable threads the protocol has (for the report header).
    pub fn symmetry_class_count(&self) -> usize {
        self.symmetry.len()
    }
}

/// The async reads in flight in one order (issuer, kind, group, range) while a `warpgroup_mma`
/// read is among them. The agents of a warpgroup issue their part of each MMA independently
/// (docs/model.md, "The constructs of warp-specialized kernels"), and each issue appends its
/// reads, so four warps' issues in their 24 orders would store 24 states that nothing but
/// messages tells apart. Other protocols keep the issue order: sorting there merges little and
/// would move which of two reads in flight a message names.
fn canonical_reads(s: &mut State) {
    if s.proxy.reads.iter().any(|r| r.warpgroup) {
        s.proxy.reads.sort_by_key(|r| (r.issuer, r.wgmma, r.age, r.buf, r.lo, r.hi));
    }
}
