//! The cause of a deadlock, one sentence per blocked thread, from the trace that reached it.
//!
//! The state at a deadlock says who waits on what; only the trace says who stopped arriving, after
//! how many arrivals, and whether it dropped. So the explanation is computed here, after the search,
//! by replaying the shortest trace.

use crate::trace::Replayed;
use phasecheck_model::program::ir::{IOp, InstrKind, MbarOp, WarpOp};
use phasecheck_model::rt::state::{State, Status};
use phasecheck_model::rt::{Action, Model, Obs, WaitCheck};

/// What one thread did on one barrier along the trace.
#[derive(Clone, Debug, Default)]
struct Arrivals {
    /// Phases it arrived on, in order.
    phases: Vec<i64>,
    /// It left the barrier with `arrive_and_drop`.
    dropped: bool,
}

struct History {
    /// `[thread][barrier]`.
    by: Vec<Vec<Arrivals>>,
}

impl History {
    fn of(model: &Model, r: &Replayed) -> History {
        let p = &model.proto;
        let mut by = vec![vec![Arrivals::default(); p.barriers.len()]; p.threads.len()];
        for st in &r.steps {
            let Action::Thread(t) = st.action else { continue };
            let t = t as usize;
            let is_drop = matches!(
                p.code_of(t).instrs.get(st.pc as usize).map(|i| &i.kind),
                Some(InstrKind::Op {
                    op: IOp::Mbar(MbarOp::Arrive { drop: true, .. }),
                    ..
                })
            );
            let mut first = true;
            for o in &st.obs {
                if let Obs::Arrived { bar, phase, .. } = o {
                    let a = &mut by[t][*bar as usize];
                    a.phases.push(*phase);
                    // The instruction's own arrival comes first; later ones belong to a completion
                    // function it ran.
                    if first && is_drop {
                        a.dropped = true;
                    }
                    first = false;
                }
            }
        }
        History { by }
    }
}

/// Whether the thread's code arrives on the barrier's group anywhere: a thread of such a role is a
/// participant even if the trace never got it to arrive.
fn role_arrives_on(model: &Model, t: usize, bar: usize) -> bool {
    let p = &model.proto;
    let group = p
        .barrier_groups
        .iter()
        .position(|g| (g.base as usize..(g.base + g.len) as usize).contains(&bar));
    p.code_of(t).instrs.iter().any(|i| match &i.kind {
        InstrKind::Op {
            op: IOp::Mbar(MbarOp::Arrive { bar: r, .. }) | IOp::Warp(WarpOp::Commit { bar: r }),
            ..
        } => Some(r.group as usize) == group,
        _ => false,
    })
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The deadlock in the trace's last state, explained. `None` when the trace does not end in a
/// state (the execution ended on undefined behaviour).
pub fn explain(model: &Model, r: &Replayed) -> Option<String> {
    let s = r.last.as_ref()?;
    let h = History::of(model, r);
    let p = &model.proto;
    let mut parts: Vec<String> = Vec::new();
    // Waiters stuck for the same reason are told once: (their labels, the reason).
    let mut waits: Vec<(Vec<String>, String)> = Vec::new();
    for t in 0..s.threads.len() {
        let th = &s.threads[t];
        let me = p.thread_label(t);
        match th.status {
            Status::Done => {}
            Status::AtSyncWarp => parts.push(format!("{me} waits at syncwarp for lanes that never arrive")),
            Status::AtSyncThreads => parts.push(format!("{me} waits at syncthreads for threads that never arrive")),
            // Named barriers (`bar_sync` / `bar_arrive`).
            Status::AtNamedBar => parts.push(format!(
                "{me} waits at bar_sync/bar_arrive for lanes of its warp that never reach it (the warp arrives as one)"
            )),
            Status::AtNamedWait => {
                let what = match model.named_bar_at(s, t) {
                    Some((id, count, _)) => {
                        let arrived = s.named.get(id as usize).map_or(0, |n| n.arrived);
                        format!("named barrier {id}, which has {arrived} of its {count} threads (arrival shortfall)")
                    }
                    None => "a named barrier".to_string(),
                };
                parts.push(format!("{me} waits at bar_sync on {what}"))
            }
            // Cluster scope.
            Status::AtClusterWait => parts.push(format!(
                "{me} waits at cluster_wait for threads of the cluster that never cluster_arrive (nor exit)"
            )),
            Status::Running if !model.commit_ready(s, t) => parts.push(format!(
                "{me} waits at a commit for converged lanes of its warp that never reach it"
            )),
            Status::Running if !model.warpgroup_wait_ready(s, t) => parts.push(format!(
                "{me} waits at warpgroup_wait for an MMA that agents of its warpgroup never issue (the warpgroup issues it together)"
            )),
            Status::Running if !model.tmem_alloc_ready(s, t) => parts.push(format!(
                "{me} waits at tmem_alloc for tensor-memory columns that no tmem_dealloc frees (512 per CTA)"
            )),
            Status::Running if model.spins(s, t) => match model.poll_check(s, t) {
                WaitCheck::Blocked { bar, named } => {
                    let why = blocked_wait(model, s, &h, t, bar, named);
                    parts.push(format!("{me} spins in a loop polling try_wait {why}"));
                }
                _ => parts.push(format!(
                    "{me} spins in a `while` loop whose condition no other thread can change any more"
                )),
            },
            Status::Running => {
                if let WaitCheck::Blocked { bar, named } = model.wait_check(s, t) {
                    let why = blocked_wait(model, s, &h, t, bar, named);
                    match waits.iter_mut().find(|(_, w)| *w == why) {
                        Some((who, _)) => who.push(me),
                        None => waits.push((vec![me], why)),
                    }
                }
            }
        }
    }
    for (who, why) in waits {
        let verb = if who.len() == 1 { "waits" } else { "wait" };
        parts.push(format!("{} {verb} {why}", who.join(", ")));
    }
    Some(if parts.is_empty() {
        "every unfinished thread is blocked".to_string()
    } else {
        parts.join("; ")
    })
}

fn blocked_wait(model: &Model, s: &State, h: &History, t: usize, bar: usize, named: i64) -> String {
    let p = &model.proto;
    let b = &s.barriers[bar];
    let name = &p.barriers[bar].name;
    let meant = if named != b.phase {
        format!(", though the program meant phase {named}")
    } else {
        String::new()
    };
    let head = format!("for phase {} of {name}{meant}", b.phase);
    if named < b.phase {
        // The cause is the stale parity, not whatever keeps phase C open.
        return format!(
            "{head} (parity aliasing: phase {named} completed, and the same parity now names phase {}, which has {} of {} arrivals missing)",
            b.phase, b.pending, b.expected
        );
    }
    if b.pending <= 0 {
        return if b.tx > 0 {
            format!(
                "{head} (tx shortfall: all arrivals are in but {} expected transaction bytes never land)",
                b.tx
            )
        } else {
            format!(
                "{head} (tx mismatch: {} bytes more than expect_tx declared have landed, so the tx-count never returns to zero)",
                -b.tx
            )
        };
    }
    let shortfall = format!(
        "arrival shortfall: {} of the {} arrivals phase {} needs are missing",
        b.pending,
        b.pending + b.arrived,
        b.phase
    );
    let participants: Vec<usize> = (0..s.threads.len())
        .filter(|&u| u != t && (!h.by[u][bar].phases.is_empty() || role_arrives_on(model, u, bar)))
        .collect();
    // Participants that left without dropping: each still counts in every later phase.
    let exited: Vec<usize> = participants
        .iter()
        .copied()
        .filter(|&u| s.threads[u].status == Status::Done && !h.by[u][bar].dropped)
        .collect();
    if !exited.is_empty() {
        let who: Vec<String> = exited
            .iter()
            .map(|&u| {
                let a = &h.by[u][bar];
                match a.phases.last() {
                    None => format!("{} exited without arriving on {name}", p.thread_label(u)),
                    Some(k) => format!(
                        "{} exited after {} on {name} (the last on phase {k}) without arrive_and_drop",
                        p.thread_label(u),
                        plural(a.phases.len(), "arrival", "arrivals")
                    ),
                }
            })
            .collect();
        // Dropping is advice only where it is legal: the expected count must stay at least 1.
        let drop_ok = b.expected - exited.len() as i64 >= 1;
        // A thread that arrived in earlier phases and not this one ran out of rounds; one that
        // never arrived took a path past its arrival, and trip counts say nothing about it.
        let never = exited.iter().all(|&u| h.by[u][bar].phases.is_empty());
        let (they, them, their) = match (exited.len() == 1, never) {
            (true, false) => ("it", "it is", "its loop runs fewer rounds than the waits (compare the trip counts)"),
            (false, false) => (
                "they",
                "they are",
                "their loops run fewer rounds than the waits (compare the trip counts)",
            ),
            (true, true) => ("it", "it is", "the path it took skips its arrival (a branch or a return before it)"),
            (false, true) => (
                "they",
                "they are",
                "the paths they took skip their arrivals (a branch or a return before them)",
            ),
        };
        let advice = if drop_ok {
            format!(
                "if {them} finished with {name}, {they} must arrive_and_drop before exiting; if {they} should arrive in phase {}, {their}",
                b.phase
            )
        } else {
            format!(
                "{name} counts no one else, so a drop would take its count to zero: {they} must arrive in phase {}, and {their}",
                b.phase
            )
        };
        return format!("{head} ({shortfall}: {}; {advice})", who.join(", "));
    }
    let blocked: Vec<String> = participants
        .iter()
        .copied()
        .filter(|&u| s.threads[u].status != Status::Done)
        .filter_map(|u| match model.wait_check(s, u) {
            // Co-waiters on this very phase are not the missing arrivals.
            WaitCheck::Blocked { bar: ob, .. } if ob == bar && s.barriers[ob].phase == b.phase => None,
            WaitCheck::Blocked { bar: ob, .. } => Some(format!(
                "{} (waiting on {} phase {})",
                p.thread_label(u),
                p.barriers[ob].name,
                s.barriers[ob].phase
            )),
            _ => None,
        })
        .collect();
    let th = &s.threads[t];
    if th.known[bar] < b.phase && b.phase > 0 && h.by[t][bar].phases.last() != Some(&b.phase) && role_arrives_on(model, t, bar) {
        return format!(
            "{head} (wait on a future phase: it waits for phase {} before arriving on it; {} of {} arrivals missing)",
            b.phase, b.pending, b.expected
        );
    }
    if !blocked.is_empty() {
        return format!(
            "{head} ({shortfall}, and the threads that would make them are blocked themselves: {})",
            blocked.join(", ")
        );
    }
    let init = p.barriers[bar].count;
    let arrivers: Vec<String> = (0..s.threads.len())
        .filter(|&u| h.by[u][bar].phases.last() == Some(&b.phase))
        .map(|u| p.thread_label(u))
        .collect();
    let by = if arrivers.is_empty() {
        "no thread arrived in it".to_string()
    } else {
        format!("the arrivals came from {}", arrivers.join(", "))
    };
    format!(
        "{head} ({shortfall}; {by}, and every other participant has exited or waits on this phase: {name} was initialised with count {init}, more than arrive per phase)"
    )
}
