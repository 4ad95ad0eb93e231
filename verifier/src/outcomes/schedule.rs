//! Replay schedules: which turn of the turnstile each thread step of a trace gets (see codegen),
//! group commits included, and the one complete execution replayed for specs without violations.
//!
//! Copy landings (`Land` actions) are asynchronous on the GPU and cannot be forced: they are
//! dropped from the schedule; a step that depends on a landing waits for it through its (bounded)
//! barrier wait, as the trace did. A warp-batched `commit` is one model step for all its converged
//! lanes (the mates observe `CommitJoined`): every lane of the group gets that step's turn
//! ([`commit_mates`], [`schedule`]), and the kernel lets the group commit on it once.

use phasecheck_model::rt::path::Replay;
use phasecheck_model::rt::{Action, Model, Obs};

/// The lanes that took part in each step of a trace without an action of their own: for a
/// warp-batched `commit`, the converged mates of the acting lane (`Obs::CommitJoined`), found by
/// replaying the trace through the model. One entry per action; empty past where the model stops
/// (a trace ending in undefined behaviour), past a step the trace cannot take, and for every
/// other kind of step.
pub fn commit_mates(model: &Model, actions: &[Action]) -> Vec<Vec<u16>> {
    let mut out = vec![Vec::new(); actions.len()];
    let (mut r, _) = Replay::start(model);
    for (k, &a) in actions.iter().enumerate() {
        let Ok(step) = r.take(a) else { break };
        if let Some(ev) = &step.outcome.event {
            out[k] = ev
                .obs
                .iter()
                .filter_map(|ob| match ob {
                    Obs::CommitJoined { lane, .. } => Some(*lane),
                    _ => None,
                })
                .collect();
        }
    }
    out
}

/// Schedule for the turnstile from a trace: thread steps numbered in order; landings dropped.
/// `mates[k]` (see [`commit_mates`]; may be shorter than `actions`) are lanes whose commit step is
/// part of action k: each gets the same turn as the acting lane, since on the GPU every lane of the
/// group executes the commit (and the kernel lets all of them in on that one turn).
pub fn schedule(nt: usize, actions: &[Action], mates: &[Vec<u16>]) -> Vec<i32> {
    let mut per: Vec<Vec<i32>> = vec![Vec::new(); nt];
    let mut turn = 0;
    for (k, a) in actions.iter().enumerate() {
        if let Action::Thread(t) = a {
            per[*t as usize].push(turn);
            for &m in mates.get(k).map(|v| v.as_slice()).unwrap_or(&[]) {
                per[m as usize].push(turn);
            }
            turn += 1;
        }
    }
    let mut s = vec![1, turn];
    let base = 2 + 2 * nt as i32;
    let mut off = base;
    let mut offs = Vec::new();
    for p in &per {
        offs.push(off);
        off += p.len() as i32;
    }
    s.extend(offs);
    s.extend(per.iter().map(|p| p.len() as i32));
    for p in per {
        s.extend(p);
    }
    s
}

/// The turnstile schedule of a trace of `model`, group commits included.
pub fn replay_schedule(model: &Model, actions: &[Action]) -> Vec<i32> {
    schedule(model.proto.threads.len(), actions, &commit_mates(model, actions))
}

/// One complete execution of the model (first enabled action each time), for holding specs.
pub fn one_execution(model: &Model) -> Option<Vec<Action>> {
    complete_run(model, |enabled| enabled.first().copied())
}

/// One complete execution in which every copy lands as soon as it can (a whole landing before a
/// partial one), else the first enabled thread steps. New replays of holding specs use it: on the
/// GPU a copy lands within microseconds and the turnstile cannot hold it back, so a trace that
/// lands late (as [`one_execution`] does) makes `try_wait`s that race with the landing go the
/// other way and the block leave the trace.
pub fn one_execution_landings_first(model: &Model) -> Option<Vec<Action>> {
    complete_run(model, |enabled| {
        enabled
            .iter()
            .find(|a| matches!(a, Action::Land(_)))
            .or_else(|| enabled.iter().find(|a| matches!(a, Action::LandPart(_))))
            .or(enabled.first())
            .copied()
    })
}

/// The execution that takes `pick`'s choice among the enabled actions each time (at most 100,000
/// steps), if it ends with every thread done; `None` when it reaches undefined behaviour or
/// stops with a thread unfinished.
fn complete_run(model: &Model, pick: impl Fn(&[Action]) -> Option<Action>) -> Option<Vec<Action>> {
    let (mut r, _) = Replay::start(model);
    r.state()?;
    let mut acts = Vec::new();
    for _ in 0..100_000 {
        let Some(a) = pick(r.enabled()) else { break };
        let step = r.take(a).expect("an enabled action replays");
        acts.push(a);
        step.outcome.next.as_ref()?;
    }
    r.state()?.all_done().then_some(acts)
}
