//! Breadth-first search over a packed transition system.
//!
//! Level by level: the states of a level are expanded in chunks; a chunk's states are stepped in
//! parallel (each worker reads the store, none writes it), then the chunk's successors are
//! interned and deduplicated in frontier order by one thread. The first state reached at each
//! depth and the first violation of each kind are therefore the same whatever the thread count,
//! and every trace is a shortest one.
//!
//! States are stored in canonical form (`Packed::canonicalize`). A path through stored states is
//! a path of canonical states; [`explore`] turns it back into the concrete actions from the
//! initial state by re-running each stored step and composing the renamings the canonical form
//! applied.

use super::pool::Pool;
use super::segments::Segmented;
use super::store::{hash_words, vec_growth, Components, ShardMut, StateSet, SHARDS};
use phasecheck_model::rt::path::Replay;
use phasecheck_model::rt::{InternalError, Outcome, Violation};
use phasecheck_model::ts::Packed;
use phasecheck_model::ViolationKind;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use crate::bounds::Bound as Stop;

/// Pieces of a chunk per expansion thread (see the parallel expansion in `explore`).
const PIECES_PER_THREAD: usize = 4;

/// `PIECES_PER_THREAD`, or the experiment's `PHASECHECK_ENGINE_PIECES` (a diagnostic knob).
fn pieces_per_thread() -> usize {
    static P: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *P.get_or_init(|| {
        std::env::var("PHASECHECK_ENGINE_PIECES")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(PIECES_PER_THREAD)
    })
}

/// States past a violation that may always be expanded: enough for every kind of the library's
/// protocols to be found (tests/reductions.rs), a few milliseconds of search.
pub const PAST_VIOLATION_FLOOR: usize = 2_000;

/// A transition's extra check (the model's self-check): an internal error, or none.
pub type TransitionCheck<'a, M> = &'a (dyn Fn(
    &<M as phasecheck_model::ts::TransitionSystem>::State,
    <M as phasecheck_model::ts::TransitionSystem>::Action,
    &Outcome<<M as phasecheck_model::ts::TransitionSystem>::State>,
) -> Option<InternalError>
         + Sync);

pub struct Limits<'a, M: Packed> {
    pub max_states: Option<usize>,
    pub max_seconds: Option<f64>,
    /// Resident memory of the process at which the search stops.
    pub max_memory_bytes: usize,
    /// Polled between chunks: `Some` stops the search.
    pub stop: Option<fn() -> Option<Stop>>,
    pub stop_at_first: bool,
    /// States reached through a violation (past the first bug of their execution) are expanded
    /// while an allowance lasts: `Some(f)` allows `max((f - 1) x the states stored when the first
    /// violation was found, PAST_VIOLATION_FLOOR)` of them, so that the whole search stores about
    /// f times what `--stop-at-first` stores. `None` explores them all (every kind reachable,
    /// the default). States reached without a violation are always all explored.
    pub past_violation_factor: Option<f64>,
    /// Worker threads for expansion (1: expand on the calling thread).
    pub threads: usize,
    pub symmetry: bool,
    /// Partial-order reduction: expand a persistent subset of the enabled actions where the
    /// model offers one (`TransitionSystem::persistent`), with the cycle proviso (below).
    pub por: bool,
    pub progress: Option<&'a (dyn Fn(&Tally) + Sync)>,
    pub check: Option<TransitionCheck<'a, M>>,
}

/// Figures of a search, final or in progress.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Tally {
    /// Distinct (canonical) states stored.
    pub states: usize,
    pub transitions: u64,
    /// Transitions that reached a state already stored.
    pub matched: u64,
    pub depth: usize,
    /// States waiting to be expanded (this level's rest and the next level so far).
    pub queue: usize,
    pub seconds: f64,
    /// Bytes held by the state store (components, rows, tables, parent links).
    pub store_bytes: usize,
    /// Distinct components interned.
    pub components: usize,
    /// Resident memory of the process when the tally was taken.
    pub memory_bytes: usize,
    /// States past a violation left unexpanded when the allowance ran out (`past_violation_factor`).
    pub past_violation_skipped: usize,
    /// States expanded with a proper persistent subset of their enabled actions (`por`).
    pub reduced_states: usize,
    /// Enabled actions those expansions left out.
    pub pruned_actions: u64,
}

/// Where a parallel search spends its wall time, phase by phase: what stays serial is what caps
/// the speedup (BENCHMARKS.md). Printed to stderr at the end of a search when the environment
/// variable `PHASECHECK_ENGINE_PHASES` is set; a diagnostic, not an interface.
#[derive(Default)]
struct PhaseClock {
    expand: Duration,
    /// The time the workers spent expanding, summed over them: against `expand` times the
    /// threads, what they spent waiting for a piece, for the others or to be woken.
    busy: AtomicU64,
    intern: Duration,
    collect: Duration,
    bookkeeping: Duration,
    file: Duration,
    between: Duration,
    chunks: usize,
}

impl PhaseClock {
    fn report(&self, total: Duration, threads: usize) {
        if std::env::var_os("PHASECHECK_ENGINE_PHASES").is_none() {
            return;
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        eprintln!(
            "engine phases ({threads} threads, {} chunks): expand {:.0} ms (busy {:.0} ms over the workers), \
             intern {:.0} ms, collect {:.0} ms, bookkeeping {:.0} ms, file {:.0} ms, between chunks {:.0} ms, total {:.0} ms",
            self.chunks,
            ms(self.expand),
            self.busy.load(Ordering::Relaxed) as f64 / 1e6,
            ms(self.intern),
            ms(self.collect),
            ms(self.bookkeeping),
            ms(self.file),
            ms(self.between),
            ms(total)
        );
    }
}

/// The first violation of a kind, with the concrete actions from the initial state.
#[derive(Clone, Debug)]
pub struct Hit<A> {
    pub kind: ViolationKind,
    pub message: String,
    pub actions: Vec<A>,
}

pub struct Explored<A> {
    /// The first of each kind found, in kind order.
    pub hits: Vec<Hit<A>>,
    pub internal: Option<(InternalError, Vec<A>)>,
    pub stopped: Option<Stop>,
    pub tally: Tally,
}

/// Where a violation was met: after the state stored at `at`, by `last` (None: a property of
/// that state), or along the concrete prefix.
enum Place<A> {
    Stored { at: u32, last: Option<A> },
    Prefix(Vec<A>),
}

struct Succ<A> {
    action: A,
    /// The step was abandoned at its budget of local instructions.
    cut: bool,
    violations: Vec<Violation>,
    internal: Option<InternalError>,
    /// Ordinal of the packed successor in the batch.
    packed: Option<u32>,
}

struct Expansion<A> {
    at: u32,
    state_violations: Vec<Violation>,
    succs: Vec<Succ<A>>,
    /// Enabled actions left out by the partial-order reduction (0: expanded in full).
    pruned: usize,
}

/// What one piece of a chunk expanded. Aligned to its own cache lines: the batches of a chunk lie
/// side by side and are filled by different workers at once, and every push writes a length in
/// the batch itself, which unpadded neighbours would share.
#[repr(align(128))]
struct Batch<A> {
    expansions: Vec<Expansion<A>>,
    packed: PackedSuccs,
}

impl<A> Default for Batch<A> {
    fn default() -> Self {
        Batch {
            expansions: Vec::new(),
            packed: PackedSuccs::default(),
        }
    }
}

/// The successors a batch packed, and what their worker found of them in the store.
#[derive(Default)]
struct PackedSuccs {
    /// Per packed successor, one entry per component: the parent's id when the component did
    /// not change (most do not), else `FRESH`: its words are the next range of `words`.
    parts: Vec<u32>,
    words: Vec<u32>,
    /// The end (in `words`) of each fresh component, in order.
    ends: Vec<u32>,
    /// Per fresh component (as `ends`).
    fresh: Vec<FreshPart>,
    /// Per packed successor.
    looked: Vec<Looked>,
}

/// A fresh component as its worker found it: looked up by the workers, so that the one thread
/// that enters successors into the store only adds what is new.
struct FreshPart {
    hash: u64,
    /// Its id, if the store already held it when the batch was expanded.
    id: Option<u32>,
}

/// A packed successor as its worker found it.
struct Looked {
    /// The stored state it is, if the store held it when the batch was expanded.
    state: Option<u32>,
    /// The hash of its row, when every component was already interned.
    row_hash: Option<u64>,
    /// Its first fresh component (an index into `fresh` and `ends`).
    fresh_from: u32,
    /// Its index among the chunk's candidates (`Candidates`), or `NO_CANDIDATE`.
    cand: u32,
}

const NO_CANDIDATE: u32 = u32::MAX;

/// The successors of a chunk that no worker found in the store, with workers beside the one thread
/// that enters them. Such a successor has a component the store did not hold when the chunk was
/// expanded, so it is no state stored before the chunk: it is a new state, or another copy of one
/// that is new in this chunk. The workers build the rows, hash them and find the copies, each in
/// the shards it owns; the one thread then only numbers the new states in frontier order.
#[derive(Default)]
struct Candidates {
    /// (batch, packed successor) of each, in frontier order.
    at: Vec<(u32, u32)>,
    hash: Vec<u64>,
    /// The first candidate of the chunk with the same row (itself when it is the first).
    first: Vec<u32>,
    /// The state each first candidate became.
    id: Vec<u32>,
    rows: Vec<u32>,
    /// New states numbered and not yet filed in the store's tables: (hash, state).
    filed: Vec<(u64, u32)>,
}

impl Candidates {
    /// Collect, build and deduplicate the candidates of `batches` (after `intern_fresh`).
    fn collect<A: Sync>(&mut self, batches: &mut [Batch<A>], width: usize, pool: &Pool) {
        self.at.clear();
        for (b, batch) in batches.iter_mut().enumerate() {
            for (k, l) in batch.packed.looked.iter_mut().enumerate() {
                if l.state.is_none() {
                    l.cand = self.at.len() as u32;
                    self.at.push((b as u32, k as u32));
                }
            }
        }
        let n = self.at.len();
        self.hash.clear();
        self.hash.resize(n, 0);
        self.rows.clear();
        self.rows.resize(n * width, 0);
        self.first.clear();
        self.first.extend(0..n as u32);
        self.id.clear();
        self.id.resize(n, u32::MAX);
        if n == 0 {
            return;
        }
        let threads = pool.threads();
        // Rows and hashes, a piece per worker.
        let per = n.div_ceil(threads);
        let batches = &*batches;
        let pieces: Vec<Mutex<_>> = self
            .at
            .chunks(per)
            .zip(self.hash.chunks_mut(per))
            .zip(self.rows.chunks_mut(per * width.max(1)))
            .map(Mutex::new)
            .collect();
        pool.run(&|w| {
            let Some(piece) = pieces.get(w) else { return };
            let mut piece = piece.lock().unwrap_or_else(|e| e.into_inner());
            let ((at, hash), rows) = &mut *piece;
            for ((&(b, k), h), row) in at.iter().zip(hash.iter_mut()).zip(rows.chunks_mut(width.max(1))) {
                batches[b as usize].packed.row_into(k as usize, width, row);
                *h = hash_words(row.iter().copied());
            }
        });
        drop(pieces);
        // Copies, shard by shard: the first of each row in frontier order stays first.
        let (hash, rows) = (&self.hash, &self.rows);
        let copies: Vec<Mutex<Vec<(u32, u32)>>> = (0..threads).map(|_| Mutex::new(Vec::new())).collect();
        pool.run(&|w| {
            let mut seen: hashbrown::HashTable<u32> = hashbrown::HashTable::new();
            let mut mine = Vec::new();
            let row = |c: u32| &rows[c as usize * width..(c as usize + 1) * width];
            for (c, &h) in hash.iter().enumerate() {
                if Components::shard_of(h) % threads != w {
                    continue;
                }
                let c = c as u32;
                match seen.find(h, |&o| row(o) == row(c)) {
                    Some(&o) => mine.push((c, o)),
                    None => {
                        seen.insert_unique(h, c, |&o| hash[o as usize]);
                    }
                }
            }
            *copies[w].lock().unwrap_or_else(|e| e.into_inner()) = mine;
        });
        for (c, o) in copies.into_iter().flat_map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner())) {
            self.first[c as usize] = o;
        }
    }

    /// Candidate `c` entered in frontier order: the state it is, and whether it is new.
    fn enter(&mut self, c: usize, width: usize, states: &mut StateSet) -> (u32, bool) {
        let first = self.first[c] as usize;
        if first != c {
            return (self.id[first], false);
        }
        let id = states.append(&self.rows[c * width..(c + 1) * width]);
        self.id[c] = id;
        self.filed.push((self.hash[c], id));
        (id, true)
    }
}

impl PackedSuccs {
    /// Back to `parts`, `words`, `fresh` fresh components and `packed` successors.
    fn truncate(&mut self, parts: usize, words: usize, fresh: usize, packed: usize) {
        self.parts.truncate(parts);
        self.words.truncate(words);
        self.ends.truncate(fresh);
        self.fresh.truncate(fresh);
        self.looked.truncate(packed);
    }

    /// The words of fresh component `f`.
    fn words_of(&self, f: usize) -> &[u32] {
        let from = if f == 0 { 0 } else { self.ends[f - 1] as usize };
        &self.words[from..self.ends[f] as usize]
    }

    /// Look up the successor just packed (its components from `parts_from`, its fresh ones from
    /// `fresh_from`) in the store as it stands: which components and which state it already
    /// holds. Returns the stored state, if any. With `resolve` false only the hashes are taken
    /// (one thread: the store is searched once, when the successor is entered).
    fn look_up(&mut self, store: &Store, parts_from: usize, fresh_from: usize, row: &mut Vec<u32>, resolve: bool) -> Option<u32> {
        row.clear();
        let mut f = fresh_from;
        let mut all = resolve;
        for k in parts_from..self.parts.len() {
            let id = self.parts[k];
            if id == FRESH {
                let w = self.words_of(f);
                let hash = hash_words(w.iter().copied());
                let id = if all { store.parts.find_hashed(w, hash) } else { None };
                match id {
                    Some(x) => row.push(x),
                    None => all = false,
                }
                self.fresh.push(FreshPart { hash, id });
                f += 1;
            } else {
                row.push(id);
            }
        }
        let (state, row_hash) = if all {
            let h = hash_words(row.iter().copied());
            (store.states.find_hashed(row, h), Some(h))
        } else {
            (None, None)
        };
        self.looked.push(Looked {
            state,
            row_hash,
            fresh_from: fresh_from as u32,
            cand: NO_CANDIDATE,
        });
        state
    }

    /// The end (in `fresh`) of successor `k`'s fresh components.
    fn fresh_end(&self, k: usize) -> usize {
        self.looked.get(k + 1).map_or(self.fresh.len(), |l| l.fresh_from as usize)
    }

    /// The row of successor `k`, every component interned (`intern_fresh` has run).
    fn row_into(&self, k: usize, width: usize, row: &mut [u32]) {
        let mut f = self.looked[k].fresh_from as usize;
        for (slot, &id) in row.iter_mut().zip(&self.parts[k * width..(k + 1) * width]) {
            *slot = if id == FRESH {
                f += 1;
                self.fresh[f - 1].id.expect("interned before the rows are built")
            } else {
                id
            };
        }
    }

    /// Successor `k` entered into the store (its new components, then its row): its index, and
    /// whether it was new.
    fn enter(&self, k: usize, width: usize, store: &mut Store, row: &mut Vec<u32>) -> (u32, bool) {
        let looked = &self.looked[k];
        if let Some(j) = looked.state {
            return (j, false);
        }
        row.clear();
        let mut f = looked.fresh_from as usize;
        for &id in &self.parts[k * width..(k + 1) * width] {
            if id == FRESH {
                let part = &self.fresh[f];
                row.push(part.id.unwrap_or_else(|| store.parts.intern_hashed(self.words_of(f), part.hash)));
                f += 1;
            } else {
                row.push(id);
            }
        }
        // A row hash was taken only when every component was already interned, so it still holds.
        match looked.row_hash {
            Some(h) => store.states.insert_hashed(row, h),
            None => store.states.insert(row),
        }
    }
}

const FRESH: u32 = u32::MAX;

fn resident() -> usize {
    crate::bounds::resident_bytes().unwrap_or(0)
}

struct Store {
    parts: Components,
    states: StateSet,
    /// For every state but the root: its parent and (in `actions`) the action from it.
    parents: Segmented<u32>,
}

impl Store {
    fn unpack<M: Packed>(&self, model: &M, i: u32) -> M::State {
        let mut scratch = Unpacking::default();
        self.parts_of(i, &mut scratch);
        model.unpack(&scratch.parts())
    }

    /// The stored state `i` written into `s` (`Packed::unpack_into`), through `scratch`.
    fn unpack_into<M: Packed>(&self, model: &M, i: u32, scratch: &mut Unpacking, s: &mut Option<M::State>) {
        self.parts_of(i, scratch);
        match s {
            Some(s) => model.unpack_into(&scratch.parts(), s),
            None => *s = Some(model.unpack(&scratch.parts())),
        }
    }

    /// The words of every component of state `i`, into `scratch`.
    fn parts_of(&self, i: u32, scratch: &mut Unpacking) {
        scratch.words.clear();
        scratch.ends.clear();
        for &id in self.states.row(i) {
            self.parts.get_into(id, &mut scratch.words);
            scratch.ends.push(scratch.words.len());
        }
    }
}

/// Buffers for unpacking, kept from state to state.
#[derive(Default)]
struct Unpacking {
    words: Vec<u32>,
    ends: Vec<usize>,
}

impl Unpacking {
    fn parts(&self) -> Vec<&[u32]> {
        let mut from = 0;
        self.ends
            .iter()
            .map(|&to| {
                let part = &self.words[from..to];
                from = to;
                part
            })
            .collect()
    }
}

impl Store {
    fn bytes<A: Copy>(&self, actions: &Segmented<A>) -> usize {
        self.parts.bytes() + self.states.bytes() + self.parents.bytes() + actions.bytes()
    }

    /// Bytes newly allocated if `states` more states with `parts` new components were stored:
    /// every per-state vector and table that would have to grow for them.
    fn growth<A: Copy>(&self, actions: &Segmented<A>, taint: &Segmented<u8>, next: &Vec<u32>, states: usize, parts: usize) -> usize {
        self.parts.growth(parts)
            + self.states.growth(states)
            + self.parents.growth(states)
            + actions.growth(states)
            + taint.growth(states)
            + vec_growth(next, states)
    }
}

/// Expand the states `at` into `batch` (its buffers are reused from chunk to chunk).
///
/// With `por`, a state is expanded by the persistent subset the model offers, unless one of its
/// steps ends the execution (a violation that is undefined behaviour: the other actions' futures
/// must still be explored) or one of its successors was already stored before this level began
/// (`old`: the cycle proviso). On a cycle of stored states, the state first stored is reached by
/// an edge from a state expanded later, at a later level or the same one, so that edge meets an
/// old state and its source is expanded in full: every cycle has a fully expanded state, and an
/// action cannot be postponed forever. Only states stored before the level began count (not
/// those added by earlier chunks of it), so the choice does not depend on chunking or threads.
fn expand<M: Packed>(model: &M, store: &Store, limits: &Limits<M>, at: &[u32], old: u32, batch: &mut Batch<M::Action>) {
    batch.expansions.clear();
    batch.packed.truncate(0, 0, 0, 0);
    let width = model.components();
    let mut enabled = Vec::new();
    let mut subset = Vec::new();
    let mut perm = Vec::new();
    let mut row = Vec::with_capacity(width);
    let mut packed = 0u32;
    // The last successor packed: the next step writes into it (`step_reusing`), or, once
    // restored to equal the state being expanded (`copy`), steps on it (`step_on_copy`).
    let mut spare = None;
    let mut copy;
    let mut changed = Vec::new();
    // The state being expanded, unpacked into the previous one's storage.
    let (mut scratch, mut current) = (Unpacking::default(), None);
    for &i in at {
        store.unpack_into(model, i, &mut scratch, &mut current);
        let s = current.as_ref().expect("just unpacked");
        copy = false;
        enabled.clear();
        model.actions(s, &mut enabled);
        let state_violations = model.state_violations(s, &enabled);
        let mut succs = Vec::new();
        let mut pruned = 0;
        if !model.is_final(s) {
            subset.clear();
            let reduce = limits.por && model.persistent(s, &enabled, &mut subset);
            let mark = (batch.packed.parts.len(), batch.packed.words.len(), batch.packed.ends.len(), packed);
            for pass in [reduce, false] {
                if pass != reduce {
                    // The reduced pass was rolled back: expand every action.
                    batch.packed.truncate(mark.0, mark.1, mark.2, mark.3 as usize);
                    packed = mark.3;
                    succs.clear();
                }
                let take: &[M::Action] = if pass { &subset } else { &enabled };
                let mut full = false;
                for &a in take {
                    let mut out = match spare.take() {
                        Some(c) if copy => model.step_on_copy(s, a, c),
                        other => model.step_reusing(s, a, other),
                    };
                    copy = false;
                    let internal = out.internal.take().or_else(|| limits.check.and_then(|c| c(s, a, &out)));
                    let mut slot = None;
                    if internal.is_none() {
                        if let Some(mut n) = out.next.take() {
                            model.canonicalize(&mut n, limits.symmetry, &mut perm);
                            let parent = store.states.row(i);
                            let (parts_from, fresh_from) = (batch.packed.parts.len(), batch.packed.ends.len());
                            changed.clear();
                            for (part, &id) in parent.iter().enumerate().take(width) {
                                if model.same_part(s, &n, part) {
                                    batch.packed.parts.push(id);
                                } else {
                                    model.pack_part(&n, part, &mut batch.packed.words);
                                    batch.packed.ends.push(batch.packed.words.len() as u32);
                                    batch.packed.parts.push(FRESH);
                                    changed.push(part);
                                }
                            }
                            // The proviso needs the lookup; with workers beside, it also takes
                            // the search of the store off the one thread that enters successors.
                            let resolve = limits.threads > 1 || (pass && !full);
                            let stored = batch.packed.look_up(store, parts_from, fresh_from, &mut row, resolve);
                            if pass && !full {
                                full = stored.is_some_and(|j| j < old);
                            }
                            slot = Some(packed);
                            packed += 1;
                            copy = model.restore(&mut n, s, &changed);
                            spare = Some(n);
                        } else if pass {
                            full = true;
                        }
                    } else if pass {
                        full = true;
                    }
                    succs.push(Succ {
                        action: a,
                        cut: out.cut,
                        violations: std::mem::take(&mut out.violations),
                        internal,
                        packed: slot,
                    });
                    if full {
                        break;
                    }
                }
                if pass && !full {
                    pruned = enabled.len() - subset.len();
                    break;
                }
                if !pass {
                    break;
                }
            }
        }
        batch.expansions.push(Expansion {
            at: i,
            state_violations,
            succs,
            pruned,
        });
    }
}

/// Intern the new components of a chunk's successors in parallel, before the one thread enters
/// the successors: each worker owns every n-th shard (n workers) of the store and interns, in
/// frontier order, the components its workers did not find that fall in its shards. Each shard
/// so meets its components in the order one thread would, and hands out the same ids. The ids
/// go to `out` as (batch, fresh component, id).
fn intern_fresh<A: Sync>(parts: &mut Components, batches: &[Batch<A>], pool: &Pool, out: &mut Vec<(u32, u32, u32)>) {
    let threads = pool.threads();
    let mut owned: Vec<Vec<ShardMut>> = (0..threads).map(|_| Vec::new()).collect();
    for shard in parts.shards_mut() {
        owned[shard.index % threads].push(shard);
    }
    let owned: Vec<Mutex<Vec<ShardMut>>> = owned.into_iter().map(Mutex::new).collect();
    let found: Vec<Mutex<Vec<(u32, u32, u32)>>> = (0..threads).map(|_| Mutex::new(Vec::new())).collect();
    pool.run(&|w| {
        let mut mine = owned[w].lock().unwrap_or_else(|e| e.into_inner());
        let mut slot = [usize::MAX; SHARDS];
        for (k, shard) in mine.iter().enumerate() {
            slot[shard.index] = k;
        }
        let mut ids = Vec::new();
        for (b, batch) in batches.iter().enumerate() {
            for (f, part) in batch.packed.fresh.iter().enumerate() {
                let k = slot[Components::shard_of(part.hash)];
                if part.id.is_none() && k != usize::MAX {
                    let id = mine[k].intern_hashed(batch.packed.words_of(f), part.hash);
                    ids.push((b as u32, f as u32, id));
                }
            }
        }
        *found[w].lock().unwrap_or_else(|e| e.into_inner()) = ids;
    });
    out.clear();
    for f in found {
        out.extend(f.into_inner().unwrap_or_else(|e| e.into_inner()));
    }
}

/// Explore every execution that begins with `prefix` (concrete actions from the initial state).
pub fn explore<M: Packed>(model: &M, prefix: &[M::Action], limits: &Limits<M>) -> Explored<M::Action> {
    let start = Instant::now();
    let mut found: BTreeMap<ViolationKind, (usize, String, Place<M::Action>)> = BTreeMap::new();
    let mut order = 0usize;
    let mut record = |found: &mut BTreeMap<_, _>, v: Vec<Violation>, place: &dyn Fn() -> Place<M::Action>| {
        for v in v {
            found.entry(v.kind).or_insert_with(|| {
                order += 1;
                (order, v.message, place())
            });
        }
    };
    let mut tally = Tally::default();
    let mut out = Explored {
        hits: Vec::new(),
        internal: None,
        stopped: None,
        tally: Tally::default(),
    };

    // The initial state and the prefix, concretely.
    let init = model.init();
    if let Some(e) = init.internal {
        out.internal = Some((e, Vec::new()));
        return finish(model, out, found, None, tally, start);
    }
    record(&mut found, init.violations, &|| Place::Prefix(Vec::new()));
    if init.cut {
        return finish(model, out, found, Some(Stop::StepBudget), tally, start);
    }
    let Some(s0) = init.next else {
        return finish(model, out, found, None, tally, start);
    };
    let mut r = Replay::from_state(model, Some(s0));
    for (k, &a) in prefix.iter().enumerate() {
        let s = r.state().expect("the prefix has not ended the execution");
        record(&mut found, model.state_violations(s, r.enabled()), &|| {
            Place::Prefix(prefix[..k].to_vec())
        });
        let Ok(step) = r.take(a) else {
            return finish(model, out, found, None, tally, start);
        };
        let o = step.outcome;
        tally.transitions += 1;
        if let Some(e) = o.internal {
            out.internal = Some((e, prefix[..=k].to_vec()));
            return finish(model, out, found, None, tally, start);
        }
        record(&mut found, o.violations, &|| Place::Prefix(prefix[..=k].to_vec()));
        if o.cut {
            return finish(model, out, found, Some(Stop::StepBudget), tally, start);
        }
        if o.next.is_none() {
            return finish(model, out, found, None, tally, start);
        }
    }

    let mut root = r.into_state().expect("the prefix has not ended the execution");
    let mut root_perm = Vec::new();
    model.canonicalize(&mut root, limits.symmetry, &mut root_perm);
    let width = model.components();
    let mut store = Store {
        parts: Components::default(),
        states: StateSet::new(width),
        parents: Segmented::plain(),
    };
    let mut actions: Segmented<M::Action> = Segmented::plain();
    let mut row: Vec<u32> = Vec::with_capacity(width);
    {
        let (mut words, mut ends) = (Vec::new(), Vec::new());
        model.pack(&root, &mut words, &mut ends);
        let mut from = 0;
        for &to in &ends {
            row.push(store.parts.intern(&words[from..to as usize]));
            from = to as usize;
        }
    }
    store.states.insert(&row);
    drop(root);

    let threads = limits.threads.max(1);
    let mut pool: Vec<Batch<M::Action>> = vec![Batch::default()];
    // The ids `intern_fresh` gave a chunk's new components: (batch, fresh component, id).
    let mut interned: Vec<(u32, u32, u32)> = Vec::new();
    let mut cands = Candidates::default();
    // The bookkeeping of a chunk whose components the workers interned is under way (a stop then
    // leaves some unused: see the end); the shards' lengths before that chunk; and the first
    // (batch, fresh component) past the successors entered so far.
    let mut in_bookkeeping = false;
    let mut chunk_shards: Vec<usize> = Vec::new();
    let mut entered: (usize, usize) = (0, 0);
    let workers = (threads > 1).then(|| Pool::new(threads));
    let mut frontier: Vec<u32> = vec![0];
    let mut depth = 0usize;
    let mut stopped = None;
    let mut chunk = 16usize;
    // The most states and components one chunk has added so far.
    let mut peak_chunk = (0usize, 0usize);
    // The resident memory after the last chunk, and the most it rose over one chunk.
    let (mut last_mem, mut peak_rise) = (resident(), 0usize);
    let mut last_progress = Instant::now();
    let mut clock = PhaseClock::default();
    // Per state: reached only through a violation so far; left unexpanded for it; expanded.
    const TAINTED: u8 = 1;
    const SKIPPED: u8 = 2;
    const EXPANDED: u8 = 4;
    let mut taint: Segmented<u8> = Segmented::plain();
    taint.push(0);
    // How many states past a violation may still be expanded, once the first is found.
    let mut taint_allowance: Option<usize> = None;
    if resident() >= limits.max_memory_bytes {
        stopped = Some(Stop::MaxMemory);
        frontier.clear();
    }
    'search: while !frontier.is_empty() {
        tally.depth = depth;
        // States stored before this level began: the cycle proviso's "old" states (`expand`).
        let level_start = store.states.len() as u32;
        let mut next: Vec<u32> = Vec::new();
        let mut done = 0usize;
        while done < frontier.len() {
            let t0 = Instant::now();
            let (states_before, parts_before) = (store.states.len(), store.parts.len());
            let mut take = chunk.min(frontier.len() - done);
            if let Some(allowance) = taint_allowance.as_mut() {
                // States past a violation are expanded while the allowance lasts, in frontier
                // order (so the result does not depend on timing or chunking); the rest are set
                // aside (a clean path to one later brings it back).
                let mut kept = done;
                for k in done..done + take {
                    let i = frontier[k];
                    if taint[i as usize] & TAINTED != 0 {
                        if *allowance == 0 {
                            taint[i as usize] |= SKIPPED;
                            tally.past_violation_skipped += 1;
                            continue;
                        }
                        *allowance -= 1;
                    }
                    frontier[kept] = i;
                    kept += 1;
                }
                frontier.drain(kept..done + take);
                take = kept - done;
                if take == 0 {
                    continue;
                }
            }
            let part = &frontier[done..done + take];
            clock.chunks += 1;
            let t_expand = Instant::now();
            let used = if threads == 1 || take < 2 * threads {
                expand(model, &store, limits, part, level_start, &mut pool[0]);
                clock.busy.fetch_add(t_expand.elapsed().as_nanos() as u64, Ordering::Relaxed);
                1
            } else {
                // More pieces than workers, taken as workers come free: states differ in cost
                // (one enables a dozen actions, another none), and equal shares left most
                // workers waiting for the slowest.
                let per = take.div_ceil(pieces_per_thread() * threads).max(1);
                let pieces = take.div_ceil(per);
                if pool.len() < pieces {
                    pool.resize_with(pieces, Batch::default);
                }
                let queue = Mutex::new(part.chunks(per).zip(pool.iter_mut()));
                let (store, busy) = (&store, &clock.busy);
                workers.as_ref().expect("a pool when threads > 1").run(&|_| loop {
                    let Some((p, batch)) = queue.lock().unwrap_or_else(|e| e.into_inner()).next() else {
                        break;
                    };
                    let t = Instant::now();
                    expand(model, store, limits, p, level_start, batch);
                    busy.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                });
                pieces
            };
            done += take;
            clock.expand += t_expand.elapsed();
            if let (true, Some(workers)) = (used > 1, &workers) {
                let t = Instant::now();
                chunk_shards = store.parts.shard_lens();
                intern_fresh(&mut store.parts, &pool[..used], workers, &mut interned);
                for &(b, f, id) in &interned {
                    pool[b as usize].packed.fresh[f as usize].id = Some(id);
                }
                clock.intern += t.elapsed();
                let t = Instant::now();
                cands.collect(&mut pool[..used], width, workers);
                clock.collect += t.elapsed();
            }
            let t_book = Instant::now();
            // Bookkeeping, in frontier order.
            entered = (0, 0);
            in_bookkeeping = used > 1;
            for (b, batch) in pool[..used].iter_mut().enumerate() {
                for e in batch.expansions.drain(..) {
                    taint[e.at as usize] |= EXPANDED;
                    if e.pruned > 0 {
                        tally.reduced_states += 1;
                        tally.pruned_actions += e.pruned as u64;
                    }
                    if !e.state_violations.is_empty() {
                        record(&mut found, e.state_violations, &|| Place::Stored { at: e.at, last: None });
                    }
                    for s in e.succs {
                        tally.transitions += 1;
                        if s.cut {
                            stopped = Some(Stop::StepBudget);
                            break 'search;
                        }
                        if let Some(err) = s.internal {
                            let path = concrete_path(model, &store, &actions, &root_perm, prefix, e.at, Some(s.action), limits.symmetry);
                            out.internal = Some((err, path));
                            break 'search;
                        }
                        let tainted = taint[e.at as usize] & TAINTED != 0 || !s.violations.is_empty();
                        if !s.violations.is_empty() {
                            record(&mut found, s.violations, &|| Place::Stored {
                                at: e.at,
                                last: Some(s.action),
                            });
                            if taint_allowance.is_none() {
                                if let Some(f) = limits.past_violation_factor {
                                    let n1 = store.states.len() as f64;
                                    taint_allowance = Some(((f - 1.0) * n1).max(PAST_VIOLATION_FLOOR as f64) as usize);
                                }
                            }
                        }
                        if limits.stop_at_first && !found.is_empty() {
                            break 'search;
                        }
                        if let Some(k) = s.packed {
                            let (j, new) = match batch.packed.looked[k as usize].cand {
                                NO_CANDIDATE => batch.packed.enter(k as usize, width, &mut store, &mut row),
                                c => cands.enter(c as usize, width, &mut store.states),
                            };
                            entered = (b, batch.packed.fresh_end(k as usize));
                            if new {
                                store.parents.push(e.at);
                                actions.push(s.action);
                                taint.push(if tainted { TAINTED } else { 0 });
                                next.push(j);
                                if store.states.len() >= limits.max_states.unwrap_or(usize::MAX) {
                                    stopped = Some(Stop::MaxStates);
                                    break 'search;
                                }
                            } else {
                                tally.matched += 1;
                                let t = &mut taint[j as usize];
                                if !tainted && *t & TAINTED != 0 {
                                    // A clean path reaches it after all: it and what follows it
                                    // are explored in full (again, if it was expanded as tainted:
                                    // its successors then arrive clean too).
                                    if *t & SKIPPED != 0 {
                                        tally.past_violation_skipped -= 1;
                                    }
                                    if *t & (SKIPPED | EXPANDED) != 0 {
                                        next.push(j);
                                    }
                                    *t = 0;
                                }
                            }
                        }
                    }
                    if limits.stop_at_first && !found.is_empty() {
                        break 'search;
                    }
                }
            }
            in_bookkeeping = false;
            clock.bookkeeping += t_book.elapsed();
            let t_file = Instant::now();
            if let Some(workers) = &workers {
                store.states.file(&cands.filed, workers);
                cands.filed.clear();
            }
            clock.file += t_file.elapsed();
            let t_between = Instant::now();
            // Chunks of about 50 ms: bounds and progress stay responsive, workers stay busy.
            let took = t0.elapsed();
            if took < Duration::from_millis(25) && chunk < (1024 * threads).max(8192) {
                chunk *= 2;
            } else if took > Duration::from_millis(100) && chunk > 1 {
                chunk /= 2;
            }
            if let Some(b) = limits.stop.and_then(|f| f()) {
                stopped = Some(b);
                break 'search;
            }
            let mem = resident();
            if mem >= limits.max_memory_bytes {
                stopped = Some(Stop::MaxMemory);
                break 'search;
            }
            // Stop before a growth the bound cannot hold, instead of meeting the bound halfway
            // through one: the tables that double (about twice the next chunk's additions), and
            // twice the most the resident memory rose over one chunk (memory is touched in huge
            // pages, so it rises in steps the store's own count does not see).
            peak_rise = peak_rise.max(mem.saturating_sub(last_mem));
            last_mem = mem;
            let (new_states, new_parts) = (store.states.len() - states_before, store.parts.len() - parts_before);
            peak_chunk = (peak_chunk.0.max(new_states), peak_chunk.1.max(new_parts));
            let ahead = store.growth(&actions, &taint, &next, 2 * peak_chunk.0 + 1024, 2 * peak_chunk.1 + 1024);
            if mem + ahead + 2 * peak_rise >= limits.max_memory_bytes {
                stopped = Some(Stop::MaxMemory);
                break 'search;
            }
            let secs = start.elapsed().as_secs_f64();
            if limits.max_seconds.is_some_and(|m| secs >= m) {
                stopped = Some(Stop::MaxSeconds);
                break 'search;
            }
            if let Some(cb) = limits.progress {
                if last_progress.elapsed() >= Duration::from_secs(2) {
                    last_progress = Instant::now();
                    tally.states = store.states.len();
                    tally.queue = frontier.len() - done + next.len();
                    tally.seconds = secs;
                    tally.store_bytes = store.bytes(&actions);
                    tally.components = store.parts.len();
                    tally.memory_bytes = mem;
                    cb(&tally);
                }
            }
            clock.between += t_between.elapsed();
        }
        frontier = next;
        if !frontier.is_empty() {
            depth += 1;
        }
    }
    // A search that stopped inside a chunk files what it numbered, so the store stays whole, and
    // drops the components the workers interned for successors it never entered: what the store
    // holds (bytes per state) is then what one thread's search would hold. Within a shard the
    // chunk's components are numbered in frontier order, so those of the entered successors are
    // a prefix of each shard's new ones.
    if let Some(workers) = &workers {
        store.states.file(&cands.filed, workers);
    }
    if in_bookkeeping {
        let mut keep = chunk_shards.clone();
        for &(b, f, id) in &interned {
            if ((b as usize), f as usize) < entered {
                let (shard, local) = Components::split(id);
                keep[shard] = keep[shard].max(local as usize + 1);
            }
        }
        store.parts.truncate_shards(&keep);
    }
    clock.report(start.elapsed(), threads);
    tally.depth = tally.depth.max(depth);
    tally.states = store.states.len();
    tally.store_bytes = store.bytes(&actions);
    tally.components = store.parts.len();
    tally.memory_bytes = resident();
    let paths = found
        .into_iter()
        .map(|(k, (o, m, place))| {
            let p = match place {
                Place::Prefix(p) => Place::Prefix(p),
                Place::Stored { at, last } => Place::Prefix(concrete_path(
                    model,
                    &store,
                    &actions,
                    &root_perm,
                    prefix,
                    at,
                    last,
                    limits.symmetry,
                )),
            };
            (k, (o, m, p))
        })
        .collect();
    finish(model, out, paths, stopped, tally, start)
}

/// The concrete actions from the initial state to the stored state `at` (then `last`).
#[allow(clippy::too_many_arguments)]
fn concrete_path<M: Packed>(
    model: &M,
    store: &Store,
    actions: &Segmented<M::Action>,
    root_perm: &[u32],
    prefix: &[M::Action],
    at: u32,
    last: Option<M::Action>,
    symmetry: bool,
) -> Vec<M::Action> {
    let mut chain = Vec::new();
    let mut i = at;
    while i != 0 {
        chain.push(i);
        i = store.parents[i as usize - 1];
    }
    chain.reverse();
    let mut sigma: Vec<u32> = root_perm.to_vec();
    let mut path: Vec<M::Action> = prefix.to_vec();
    let mut from = 0u32;
    let mut perm = Vec::new();
    for (k, &j) in chain.iter().enumerate() {
        let a = actions[j as usize - 1];
        path.push(model.rename(a, &sigma));
        // The stored step, replayed from its stored state: a step the state does not enable would
        // mean the store lost what the search saw (a bug, caught as an internal error).
        let mut r = Replay::from_state(model, Some(store.unpack(model, from)));
        let step = r.take(a).unwrap_or_else(|e| {
            panic!(
                "the stored path does not replay: its step {} ({a:?}) is refused ({:?})",
                k + 1,
                e.refusal
            )
        });
        if let Some(mut n) = step.outcome.next {
            model.canonicalize(&mut n, symmetry, &mut perm);
            sigma = perm.iter().map(|&p| sigma.get(p as usize).copied().unwrap_or(p)).collect();
        }
        from = j;
    }
    if let Some(a) = last {
        path.push(model.rename(a, &sigma));
    }
    path
}

fn finish<M: Packed>(
    _model: &M,
    mut out: Explored<M::Action>,
    found: BTreeMap<ViolationKind, (usize, String, Place<M::Action>)>,
    stopped: Option<Stop>,
    mut tally: Tally,
    start: Instant,
) -> Explored<M::Action> {
    // In kind order, as reports list them.
    out.hits = found
        .into_iter()
        .map(|(kind, (_, message, place))| {
            let actions = match place {
                Place::Prefix(p) => p,
                Place::Stored { .. } => Vec::new(),
            };
            Hit { kind, message, actions }
        })
        .collect();
    out.stopped = stopped;
    tally.seconds = start.elapsed().as_secs_f64();
    out.tally = tally;
    out
}
