//! Counterexample minimization.
//!
//! Breadth-first search already yields a trace with the fewest steps for each kind. What it does
//! not minimise is how often control hops between threads, and a trace found another way (a
//! random walk, a bounded search) may also carry steps of threads that do not matter. This pass
//! works on a trace as a list of *moves* that name copies by who issued them (`Land(i)` indices
//! shift when steps are reordered), and greedily keeps any edit after which the trace still
//! reaches the same violation kind with no more steps and fewer context switches:
//!
//! 1. cut the trace at the first point the kind is reached;
//! 2. drop all steps of one actor, the last steps of one actor, or one step;
//! 3. move one step next to the previous (or next) step of the same actor.
//!
//! The cost is (steps, context switches), compared lexicographically, so the result is never
//! longer than the input.

use phasecheck_model::rt::path::Replay;
use phasecheck_model::rt::state::State;
use phasecheck_model::rt::{Action, Model};
use phasecheck_model::ViolationKind;

/// A scheduling choice that survives reordering: a thread step, or the landing of the `nth` copy
/// issued by thread `issuer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Move {
    Thread(u16),
    Land {
        issuer: u16,
        nth: u32,
    },
    /// Part of the copy lands (the model's `LandPart`): it stays in flight.
    LandPart {
        issuer: u16,
        nth: u32,
    },
}

impl Move {
    /// Who acts: thread `t` is `t`, a landing is the copy engine `n + issuer`.
    fn actor(self, n: usize) -> usize {
        match self {
            Move::Thread(t) => t as usize,
            Move::Land { issuer, .. } | Move::LandPart { issuer, .. } => n + issuer as usize,
        }
    }
}

/// Copy identities parallel to `State::copies`: (issuer, nth copy of that issuer).
struct CopyIds {
    ids: Vec<(u16, u32)>,
    issued: Vec<u32>,
}

impl CopyIds {
    fn new(n: usize) -> CopyIds {
        CopyIds {
            ids: Vec::new(),
            issued: vec![0; n],
        }
    }

    /// Track the copies across one step from `before` to `after`.
    fn step(&mut self, a: Action, before: &State, after: Option<&State>) {
        if let Action::Land(i) = a {
            self.ids.remove(i as usize);
        }
        let Some(after) = after else { return };
        let kept = before.copies.len() - matches!(a, Action::Land(_)) as usize;
        for c in &after.copies[kept.min(after.copies.len())..] {
            let k = &mut self.issued[c.issuer as usize];
            self.ids.push((c.issuer, *k));
            *k += 1;
        }
    }
}

/// Replay `actions` and name every landing by its copy's identity. `None` if an action does not
/// replay.
pub fn to_moves(model: &Model, actions: &[Action]) -> Option<Vec<Move>> {
    let (mut r, _) = Replay::start(model);
    r.state()?;
    let mut ids = CopyIds::new(model.proto.threads.len());
    let mut out = Vec::new();
    for &a in actions {
        out.push(match a {
            Action::Thread(t) => Move::Thread(t),
            Action::Land(i) => {
                let (issuer, nth) = *ids.ids.get(i as usize)?;
                Move::Land { issuer, nth }
            }
            Action::LandPart(i) => {
                let (issuer, nth) = *ids.ids.get(i as usize)?;
                Move::LandPart { issuer, nth }
            }
        });
        let step = r.take(a).ok()?;
        ids.step(a, &step.before, step.outcome.next.as_ref());
    }
    Some(out)
}

/// Turn moves back into actions, checking each is enabled. `None` if one is not.
pub fn to_actions(model: &Model, moves: &[Move]) -> Option<Vec<Action>> {
    let (mut r, _) = Replay::start(model);
    r.state()?;
    let mut ids = CopyIds::new(model.proto.threads.len());
    let mut out = Vec::new();
    for &m in moves {
        let a = match m {
            Move::Thread(t) => Action::Thread(t),
            Move::Land { issuer, nth } => Action::Land(ids.ids.iter().position(|&x| x == (issuer, nth))? as u16),
            Move::LandPart { issuer, nth } => Action::LandPart(ids.ids.iter().position(|&x| x == (issuer, nth))? as u16),
        };
        let step = r.take(a).ok()?;
        out.push(a);
        ids.step(a, &step.before, step.outcome.next.as_ref());
    }
    Some(out)
}

/// Context switches: adjacent steps taken by different actors (a landing counts as its own actor).
pub fn context_switches(model: &Model, actions: &[Action]) -> usize {
    match to_moves(model, actions) {
        Some(m) => switches(&m, model.proto.threads.len()),
        None => 0,
    }
}

fn switches(m: &[Move], n: usize) -> usize {
    m.windows(2).filter(|w| w[0].actor(n) != w[1].actor(n)).count()
}

/// The shortest prefix of `actions` that reaches `kind` (at its last step or in its final state),
/// in one pass. `None` when no prefix does or an action is not enabled.
pub fn first_reach(model: &Model, actions: &[Action], kind: ViolationKind) -> Option<usize> {
    let (mut r, init) = Replay::start(model);
    if init.violations.iter().any(|v| v.kind == kind) {
        return Some(0);
    }
    let state_has = |r: &Replay<Model>| {
        r.state()
            .is_some_and(|s| model.state_violations(s, r.enabled()).iter().any(|v| v.kind == kind))
    };
    r.state()?;
    if state_has(&r) {
        return Some(0);
    }
    for (k, &a) in actions.iter().enumerate() {
        let step = r.take(a).ok()?;
        if step.outcome.violations.iter().any(|v| v.kind == kind) {
            return Some(k + 1);
        }
        r.state()?;
        if state_has(&r) {
            return Some(k + 1);
        }
    }
    None
}

/// Minimise `actions`, which must reach `kind`. Returns it unchanged if it does not.
pub fn minimize(model: &Model, actions: &[Action], kind: ViolationKind) -> Vec<Action> {
    let n = model.proto.threads.len();
    let Some(cut) = first_reach(model, actions, kind) else {
        return actions.to_vec();
    };
    let Some(mut best) = to_moves(model, &actions[..cut]) else {
        return actions.to_vec();
    };
    let cost = |m: &[Move]| (m.len(), switches(m, n));
    // Accept a candidate when it reaches the kind; cut it at the first point it does.
    let accept = |cand: &[Move]| -> Option<Vec<Move>> {
        let acts = to_actions(model, cand)?;
        let k = first_reach(model, &acts, kind)?;
        Some(cand[..k].to_vec())
    };
    let mut budget = 20_000usize;
    let mut improved = true;
    while improved && budget > 0 {
        improved = false;
        let mut candidates: Vec<Vec<Move>> = Vec::new();
        // Drop every step of one actor, the last steps of one actor, or a single step.
        let mut actors: Vec<usize> = best.iter().map(|m| m.actor(n)).collect();
        actors.sort_unstable();
        actors.dedup();
        for &a in &actors {
            candidates.push(best.iter().copied().filter(|m| m.actor(n) != a).collect());
            let pos: Vec<usize> = (0..best.len()).filter(|&i| best[i].actor(n) == a).collect();
            for keep in 1..pos.len() {
                let drop: Vec<usize> = pos[keep..].to_vec();
                candidates.push(
                    best.iter()
                        .enumerate()
                        .filter(|(i, _)| !drop.contains(i))
                        .map(|(_, m)| *m)
                        .collect(),
                );
            }
        }
        for i in 0..best.len() {
            let mut c = best.clone();
            c.remove(i);
            candidates.push(c);
        }
        // Move one step next to the previous / next step of the same actor.
        for i in 0..best.len() {
            let a = best[i].actor(n);
            if let Some(j) = (0..i).rev().find(|&j| best[j].actor(n) == a) {
                if j + 1 < i {
                    let mut c = best.clone();
                    let m = c.remove(i);
                    c.insert(j + 1, m);
                    candidates.push(c);
                }
            }
            if let Some(j) = (i + 1..best.len()).find(|&j| best[j].actor(n) == a) {
                if j > i + 1 {
                    let mut c = best.clone();
                    let m = c.remove(i);
                    c.insert(j - 1, m);
                    candidates.push(c);
                }
            }
            // Swap with the neighbour.
            if i + 1 < best.len() {
                let mut c = best.clone();
                c.swap(i, i + 1);
                candidates.push(c);
            }
        }
        let here = cost(&best);
        for c in candidates {
            if budget == 0 {
                break;
            }
            budget -= 1;
            if c.len() >= best.len() && switches(&c, n) >= here.1 {
                continue;
            }
            if let Some(got) = accept(&c) {
                if cost(&got) < here {
                    best = got;
                    improved = true;
                    break;
                }
            }
        }
    }
    to_actions(model, &best).unwrap_or_else(|| actions[..cut].to_vec())
}
