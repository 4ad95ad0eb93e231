//! The enumeration of every outcome the model allows on hardware: the engine's fold over the
//! widened machine, each state's futures computed once.

use super::format::{AllowedSet, End, Outcome, ThreadOutcome, Undefined};
use super::machine::{cause_of, cut_error, Machine, Move, Next, Partial, Situation};
use super::reduce::Reduction;
use crate::engine::futures::{fold, Edge as FoldEdge, FoldLimits, FoldStop, Futures};
use phasecheck_model::rt::path::Replay;
use phasecheck_model::rt::state::State;
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::ViolationKind;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

/// The end of an execution seen from some state: the observations from there on (`completions`
/// as increments), and the undefined behaviour that ended it, if any.
/// The end facts ride along unchanged from the leaf (`End::default()` after undefined behaviour).
type Tail = (Option<ViolationKind>, Outcome, End);

/// `head` (one step's observations) followed by `tail`.
fn prepend(head: &Outcome, tail: &Outcome) -> Outcome {
    let threads = head
        .threads
        .iter()
        .zip(&tail.threads)
        .map(|(h, t)| ThreadOutcome {
            finished: t.finished,
            reads: h.reads.iter().chain(&t.reads).copied().collect(),
            try_waits: h.try_waits.iter().chain(&t.try_waits).copied().collect(),
            token_parities: h.token_parities.iter().chain(&t.token_parities).copied().collect(),
        })
        .collect();
    let completions = head.completions.iter().zip(&tail.completions).map(|(a, b)| a + b).collect();
    Outcome {
        threads,
        completions,
        fault: false,
    }
}

/// The futures (observation tails) the enumeration may hold in its memo, summed over states, by
/// default. The memo holds numbers; each distinct tail is kept once (about 700 bytes) and there
/// are never more distinct tails than held ones, so ~6 GB at the very most (diverged_warp_commit
/// holds 4.2 M numbers and 173 MB resident in all).
pub const MAX_HELD_FUTURES: usize = 8_000_000;

/// Every outcome the spec allows on hardware (see the module docs for the widening rules).
/// `limit` bounds the distinct states explored (model state plus the racy/hung/armed
/// bookkeeping); past it the set holds what the explored part gives and `is_complete() == false`.
///
/// The exploration computes, for each such state, the set of its possible futures (observations
/// from there on) once, depth-first, and prepends each step's observations: the observations made
/// so far never decide what happens next, so they are kept out of the memo key.
pub fn allowed_outcomes(model: &Model, limit: usize) -> AllowedSet {
    allowed_outcomes_within(model, limit, None)
}

/// [`allowed_outcomes`] holding at most `futures` observation tails (instead of
/// [`MAX_HELD_FUTURES`]): past it the set is incomplete (`stopped_by() == Some("outcomes")`).
pub fn allowed_outcomes_capped(model: &Model, limit: usize, futures: usize) -> AllowedSet {
    let m = Machine::new(model);
    match m.start() {
        Ok((s0, p0)) => explore(&m, s0, p0, limit, None, futures, true),
        Err(_) => allowed_outcomes_within(model, limit, None),
    }
}

/// [`allowed_outcomes`] with a deadline as well: past it the set is incomplete
/// (`stopped_by() == Some("seconds")`).
pub fn allowed_outcomes_within(model: &Model, limit: usize, deadline: Option<Instant>) -> AllowedSet {
    enumerate(model, limit, deadline, true)
}

/// [`allowed_outcomes`] with every state expanded by all of its moves (no partial-order
/// reduction): the reference the reduced enumeration is checked against (`reduce.rs`).
pub fn allowed_outcomes_unreduced(model: &Model, limit: usize) -> AllowedSet {
    enumerate(model, limit, None, false)
}

fn enumerate(model: &Model, limit: usize, deadline: Option<Instant>, reduce: bool) -> AllowedSet {
    let m = Machine::new(model);
    match m.start() {
        Ok((s0, p0)) => explore(&m, s0, p0, limit, deadline, MAX_HELD_FUTURES, reduce),
        Err(Some(u)) => {
            let mut set = AllowedSet {
                complete: true,
                ..AllowedSet::default()
            };
            set.undefined.insert(u);
            set
        }
        Err(None) => AllowedSet {
            complete: false,
            stopped_by: Some("step budget".into()),
            ..AllowedSet::default()
        },
    }
}

/// The outcomes allowed once the first `steps` actions of a trace have run: every execution from
/// the state the trace reaches there, each outcome starting with the observations the trace made
/// before it (what a replayed block that left the trace at that point may show). `steps == 0` is
/// [`allowed_outcomes`]. Err when the prefix does not replay.
pub fn allowed_after(
    model: &Model,
    actions: &[Action],
    steps: usize,
    limit: usize,
    deadline: Option<Instant>,
) -> Result<AllowedSet, String> {
    let m = Machine::new(model);
    let (mut r, _) = Replay::start(&m);
    if r.state().is_none() {
        return Ok(allowed_outcomes_within(model, limit, deadline));
    }
    for &a in actions.iter().take(steps) {
        let before = r.state().cloned();
        let step = r.take(Move::Model(a)).map_err(|e| m.refusal(&e, before.as_ref()))?;
        if step.outcome.cut {
            return Err(cut_error(r.steps()));
        }
        if step.outcome.next.is_none() {
            // The trace reached undefined behaviour within the prefix: anything after it.
            let mut set = AllowedSet {
                complete: true,
                ..AllowedSet::default()
            };
            set.undefined
                .insert(m.undefined(&step.before.1, cause_of(&step.outcome.violations)));
            return Ok(set);
        }
    }
    let (s, p) = r.into_state().expect("the prefix did not end the execution");
    Ok(explore(&m, s, p, limit, deadline, MAX_HELD_FUTURES, true))
}

/// Tails and labels kept once each, named by number. Many states share the same tails and most
/// steps observe nothing, so the fold's memo holds numbers instead of copies of outcomes (~700
/// bytes each): on specs/mistakes/diverged_warp_commit.phase the fold held 4.2 M copies (2.9 GB,
/// 36 s, most of it comparing and hashing them); a label that observes nothing leaves a tail's
/// number as it is, and each (label, tail) pair is prepended once.
#[derive(Default)]
struct Interned {
    tails: Numbered<Tail>,
    labels: Numbered<Outcome>,
    prepended: FxHashMap<(u32, u32), u32>,
}

/// Values kept once each, numbered in the order they first came.
struct Numbered<T> {
    items: Vec<Rc<T>>,
    ids: FxHashMap<Rc<T>, u32>,
}

impl<T> Default for Numbered<T> {
    fn default() -> Self {
        Numbered {
            items: Vec::new(),
            ids: FxHashMap::default(),
        }
    }
}

impl<T: Eq + std::hash::Hash> Numbered<T> {
    fn id(&mut self, v: T) -> u32 {
        if let Some(&id) = self.ids.get(&v) {
            return id;
        }
        let id = self.items.len() as u32;
        let v = Rc::new(v);
        self.items.push(v.clone());
        self.ids.insert(v, id);
        id
    }
}

/// The label of a step that observes nothing (interned first).
const NOTHING: u32 = 0;

impl Interned {
    fn new(empty: Outcome) -> Interned {
        let mut i = Interned::default();
        i.labels.id(empty);
        i
    }

    fn prepend(&mut self, head: u32, tail: u32) -> u32 {
        if head == NOTHING {
            return tail;
        }
        if let Some(&id) = self.prepended.get(&(head, tail)) {
            return id;
        }
        let (u, t, e) = &*self.tails.items[tail as usize];
        let joined = (*u, prepend(&self.labels.items[head as usize], t), e.clone());
        let id = self.tails.id(joined);
        self.prepended.insert((head, tail), id);
        id
    }
}

/// The widened machine seen by the engine's fold: a key is the model state with the racy, hung
/// and armed bookkeeping (never the observations made so far, which do not decide what happens
/// next); a step's label is its observations; a tail is how the execution ends. Labels and tails
/// are numbers in [`Interned`].
struct Widened<'a> {
    m: &'a Machine,
    empty: Outcome,
    /// Some step ran past the model's step budget: the enumeration is incomplete.
    cut: std::cell::Cell<bool>,
    reduction: Reduction,
    interned: RefCell<Interned>,
}

impl Widened<'_> {
    fn leaf(&self, t: Tail) -> FoldEdge<(State, Partial), u32, u32> {
        FoldEdge::Leaf(self.interned.borrow_mut().tails.id(t))
    }
}

impl Futures for Widened<'_> {
    type Key = (State, Partial);
    type Label = u32;
    type Tail = u32;

    fn edges(&self, (s, p): &(State, Partial)) -> Vec<FoldEdge<(State, Partial), u32, u32>> {
        let m = self.m;
        let mut p = p.clone();
        match m.situation(s, &mut p) {
            Situation::Done | Situation::Stuck => vec![self.leaf((None, m.finish(s, &p), m.end_of(s)))],
            Situation::ExitInFlight => vec![self.leaf((Some(ViolationKind::Lifetime), p.obs.clone(), End::default()))],
            Situation::WarpCollective => vec![self.leaf((Some(ViolationKind::Assertion), p.obs.clone(), End::default()))],
            Situation::Moves(moves) => {
                let Some((set, rest)) = self.reduction.persistent(m, s, &moves) else {
                    return self.expand(s, &p, &moves).0;
                };
                let (mut edges, clean) = self.expand(s, &p, &set);
                if !clean {
                    edges.extend(self.expand(s, &p, &rest).0);
                }
                edges
            }
        }
    }

    fn prepend(&self, head: &u32, tail: &u32) -> u32 {
        self.interned.borrow_mut().prepend(*head, *tail)
    }
}

impl Widened<'_> {
    /// The edges of `moves` from `(s, p)`, and whether every one of them is a plain step that
    /// observes nothing (no read, try_wait, token or completion run recorded: the head equals
    /// `p.obs`), reaches no undefined behaviour and is not cut by the step budget: a reduced
    /// set must be clean (`reduce.rs`, "why the outcomes are kept").
    fn expand(&self, s: &State, p: &Partial, moves: &[Move]) -> (Vec<FoldEdge<(State, Partial), u32, u32>>, bool) {
        let m = self.m;
        let mut edges = Vec::new();
        let mut clean = true;
        for &mv in moves {
            for n in m.apply(s, p, mv, true) {
                edges.push(match n {
                    Next::Cut => {
                        self.cut.set(true);
                        clean = false;
                        continue;
                    }
                    Next::Undefined(u) => {
                        clean = false;
                        let mut head = u.prefix;
                        head.fault = false;
                        self.leaf((Some(u.cause), head, End::default()))
                    }
                    Next::Continue(s2, mut p2) => {
                        let head = std::mem::replace(&mut p2.obs, self.empty.clone());
                        clean &= head == p.obs;
                        // The root's partial may carry the observations of a replayed prefix.
                        let label = if head == self.empty {
                            NOTHING
                        } else {
                            self.interned.borrow_mut().labels.id(head)
                        };
                        FoldEdge::Step(label, (s2, p2))
                    }
                });
            }
        }
        (edges, clean)
    }
}

/// Every future of `(s0, p0)`, through the engine's fold; `p0.obs` (the observations made before)
/// prefixes every outcome.
fn explore(m: &Machine, s0: State, p0: Partial, limit: usize, deadline: Option<Instant>, futures: usize, reduce: bool) -> AllowedSet {
    let empty = Outcome::empty(&m.model);
    let w = Widened {
        m,
        empty: empty.clone(),
        cut: std::cell::Cell::new(false),
        reduction: Reduction::new(m, reduce),
        interned: RefCell::new(Interned::new(empty)),
    };
    let limits = FoldLimits {
        states: limit,
        deadline,
        tails: futures,
    };
    let folded = fold(&w, (s0, p0), limits);
    let mut set = AllowedSet {
        complete: folded.stopped.is_none(),
        explored: folded.explored,
        stopped_by: folded.stopped.map(|s| {
            match s {
                FoldStop::States => "states",
                FoldStop::Seconds => "seconds",
                FoldStop::Tails => "outcomes",
            }
            .into()
        }),
        ..AllowedSet::default()
    };
    if matches!(folded.stopped, Some(FoldStop::Seconds | FoldStop::Tails)) {
        return set;
    }
    if w.cut.get() {
        set.complete = false;
        set.stopped_by = Some("step budget".into());
    }
    let interned = w.interned.into_inner();
    for id in folded.tails {
        let (u, o, e) = (*interned.tails.items[id as usize]).clone();
        match u {
            None => {
                set.ends.insert((o.clone(), e));
                set.outcomes.insert(o);
            }
            Some(cause) => {
                let mut prefix = o;
                prefix.threads.iter_mut().for_each(|t| t.finished = false);
                prefix.fault = true;
                set.undefined.insert(Undefined { prefix, cause });
            }
        }
    }
    set
}
