//! Turning a path of actions into a readable trace: who stepped, which statement, what it
//! observed, and which barrier fields changed.
//!
//! The search keeps only actions; the details are recomputed by replaying them through the model,
//! so a trace can never disagree with the semantics that found it.

use phasecheck_model::lang::ast::Span;
use phasecheck_model::rt::path::{Refusal, Replay};
use phasecheck_model::rt::state::{Life, State, Status};
use phasecheck_model::rt::{Action, Model, Obs, Violation};

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ThreadRef {
    pub role: String,
    pub tid: u32,
    pub gtid: u32,
    pub lane: u32,
    pub warp: u32,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct CopyRef {
    pub buffer: String,
    pub barrier: String,
    pub bytes: i64,
    pub version: i64,
    /// The thread that issued it (`role#tid`).
    pub issuer: String,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct FieldChange {
    pub field: String,
    pub before: String,
    pub after: String,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct BarrierChange {
    pub barrier: String,
    pub fields: Vec<FieldChange>,
}

#[derive(Clone, Debug)]
pub struct TraceStep {
    pub action: Action,
    /// The instruction the thread executed (`u32::MAX` for a copy landing).
    pub pc: u32,
    /// The thread that stepped (None for a copy landing).
    pub thread: Option<ThreadRef>,
    pub copy: Option<CopyRef>,
    pub span: Span,
    pub obs: Vec<Obs>,
    pub changes: Vec<BarrierChange>,
    pub violations: Vec<Violation>,
}

#[derive(Clone, Debug)]
pub struct Replayed {
    pub steps: Vec<TraceStep>,
    /// The state after the last step (None when the last step ended the execution).
    pub last: Option<State>,
    /// Violations raised by the initial state.
    pub init_violations: Vec<Violation>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayError {
    /// 0-based index of the step that could not be taken.
    pub step: usize,
    pub reason: String,
}

pub fn thread_ref(model: &Model, t: usize) -> ThreadRef {
    let p = &model.proto;
    let info = p.threads[t];
    ThreadRef {
        role: p.roles[info.role as usize].name.clone(),
        tid: info.tid,
        gtid: info.gtid,
        lane: info.lane,
        warp: info.warp,
    }
}

/// Why `a` cannot be taken as step `step + 1` (0-based `step`) in `s` (`None`: the execution
/// had ended), in words that name the thread or copy: which thread is blocked (and where) or has
/// finished, which copy cannot land, or that there is no such thread or copy.
pub fn why_not(model: &Model, refusal: Refusal, step: usize, s: Option<&State>, a: Action) -> String {
    let p = &model.proto;
    let Some(s) = s.filter(|_| refusal == Refusal::NotEnabled) else {
        return if step == 0 {
            "the initial state already ends the execution".to_string()
        } else {
            format!("the execution already ended at step {step}")
        };
    };
    match a {
        Action::Thread(t) if (t as usize) < p.threads.len() => {
            let label = p.thread_label(t as usize);
            match s.threads[t as usize].status {
                Status::Done => format!("{label} has finished"),
                Status::Running => format!("{label} is blocked"),
                Status::AtSyncWarp => format!("{label} is blocked at syncwarp"),
                Status::AtSyncThreads => format!("{label} is blocked at syncthreads"),
                Status::AtNamedBar | Status::AtNamedWait => format!("{label} is blocked at a named barrier"),
                Status::AtClusterWait => format!("{label} is blocked at cluster_wait"),
            }
        }
        Action::Thread(t) => format!("there is no thread {t} (the protocol has {})", p.threads.len()),
        Action::Land(i) | Action::LandPart(i) => match s.copies.get(i as usize) {
            None => format!("there is no async copy #{i} in flight ({} are)", s.copies.len()),
            Some(c) => format!(
                "async copy #{i} into {} cannot {} here",
                p.buffers[c.buf as usize].name,
                if matches!(a, Action::Land(_)) { "land" } else { "land in part" }
            ),
        },
    }
}

/// Replay `actions` from the initial state. Fails at the first action that is not enabled.
pub fn replay(model: &Model, actions: &[Action]) -> Result<Replayed, ReplayError> {
    let p = &model.proto;
    let (mut r, init) = Replay::start(model);
    let mut steps = Vec::new();
    for &a in actions {
        let stepped = r.take(a).map_err(|e| ReplayError {
            step: e.step,
            reason: why_not(model, e.refusal, e.step, r.state(), a),
        })?;
        let s = &stepped.before;
        let out = stepped.outcome;
        let copy = match a {
            Action::Land(i) | Action::LandPart(i) => {
                let c = &s.copies[i as usize];
                Some(CopyRef {
                    buffer: p.buffers[c.buf as usize].name.clone(),
                    barrier: copy_barrier(p, c),
                    bytes: c.bytes,
                    version: c.version,
                    issuer: p.thread_label(c.issuer as usize),
                })
            }
            Action::Thread(_) => None,
        };
        let ev = out.event.expect("steps carry events");
        let changes = match &out.next {
            Some(n) => barrier_changes(model, s, n),
            None => Vec::new(),
        };
        steps.push(TraceStep {
            action: a,
            pc: ev.pc,
            thread: match a {
                Action::Thread(t) => Some(thread_ref(model, t as usize)),
                Action::Land(_) | Action::LandPart(_) => None,
            },
            copy,
            span: ev.span,
            obs: ev.obs,
            changes,
            violations: out.violations,
        });
    }
    Ok(Replayed {
        steps,
        last: r.into_state(),
        init_violations: init.violations,
    })
}

fn life_name(l: Life) -> &'static str {
    match l {
        Life::Uninit => "uninitialized",
        Life::Live => "live",
        Life::Invalidated => "invalidated",
    }
}

/// The barrier fields that differ between two states, barrier by barrier.
pub fn barrier_changes(model: &Model, before: &State, after: &State) -> Vec<BarrierChange> {
    let mut out = Vec::new();
    for (i, (a, b)) in before.barriers.iter().zip(after.barriers.iter()).enumerate() {
        let mut fields = Vec::new();
        let mut num = |name: &str, x: i64, y: i64| {
            if x != y {
                fields.push(FieldChange {
                    field: name.into(),
                    before: x.to_string(),
                    after: y.to_string(),
                });
            }
        };
        num("phase", a.phase, b.phase);
        num("pending", a.pending, b.pending);
        num("expected", a.expected, b.expected);
        num("tx", a.tx, b.tx);
        if a.life != b.life {
            fields.push(FieldChange {
                field: "state".into(),
                before: life_name(a.life).into(),
                after: life_name(b.life).into(),
            });
        }
        if !fields.is_empty() {
            out.push(BarrierChange {
                barrier: model.proto.barriers[i].name.clone(),
                fields,
            });
        }
    }
    out
}

/// Where observation indices get their names: the protocol itself, or a trace file's tables.
pub trait Names {
    fn barrier(&self, i: u16) -> String;
    fn buffer(&self, i: u16) -> String;
    fn thread(&self, i: u16) -> String;
    /// Buffer `i` is a counter: its observations carry a value, not a version.
    fn is_counter(&self, _i: u16) -> bool {
        false
    }
}

impl Names for phasecheck_model::program::ir::Protocol {
    fn barrier(&self, i: u16) -> String {
        self.barriers[i as usize].name.clone()
    }
    fn buffer(&self, i: u16) -> String {
        self.buffers[i as usize].name.clone()
    }
    fn thread(&self, i: u16) -> String {
        self.thread_label(i as usize)
    }
    fn is_counter(&self, i: u16) -> bool {
        self.buffers[i as usize].counter
    }
}

/// One line saying what a step observed, the same in reports, trace files and replays.
pub fn describe_obs(o: &Obs, n: &dyn Names) -> String {
    match o {
        Obs::Arrived { bar, phase, count } if *count == 1 => format!("arrive on {} phase {phase}", n.barrier(*bar)),
        Obs::Arrived { bar, phase, count } => format!("arrive x{count} on {} phase {phase}", n.barrier(*bar)),
        Obs::Waited { bar, phase } => format!("wait: phase {phase} of {} complete", n.barrier(*bar)),
        Obs::TryWait { bar, phase, result } => format!("try_wait on phase {phase} of {} -> {}", n.barrier(*bar), *result as i32),
        Obs::Read { buf, version } if n.is_counter(*buf) => format!("reads {} = {version}", n.buffer(*buf)),
        Obs::Wrote { buf, version } if n.is_counter(*buf) => format!("adds to {}, which now holds {version}", n.buffer(*buf)),
        Obs::Read { buf, version } => format!("reads {} v{version}", n.buffer(*buf)),
        Obs::Wrote { buf, version } => format!("writes {} v{version}", n.buffer(*buf)),
        Obs::CopyIssued { buf, bytes, version, .. } => format!("copy of {bytes} B (v{version}) into {} issued", n.buffer(*buf)),
        Obs::Landed { buf, bytes, version, .. } => format!("{bytes} B (v{version}) land in {}", n.buffer(*buf)),
        Obs::LandedPart { buf, bytes, .. } => format!("{bytes} B of the copy land in {} (the rest is in flight)", n.buffer(*buf)),
        Obs::PhaseCompleted { bar, phase, .. } => format!("{} phase {phase} completes", n.barrier(*bar)),
        Obs::CommitJoined { bar, lane } => format!("{}'s commit joins this group arrival on {}", n.thread(*lane), n.barrier(*bar)),
        Obs::Released { what } => format!("{what} releases"),
        Obs::Exited { thread } => format!("{} exits", n.thread(*thread)),
        Obs::Elected { thread } => format!("elect releases the warp; {} is elected", n.thread(*thread)),
        Obs::NamedArrived { id, warp, arrived, count } => {
            format!("warp {warp} arrives at named barrier {id} ({arrived} of {count} threads)")
        }
        Obs::NamedCompleted { id } => format!("named barrier {id} completes and releases its waiters"),
        Obs::CpAsyncPending { bar, delta } if *delta > 0 => {
            format!("cp.async.mbarrier.arrive raises the pending count of {}", n.barrier(*bar))
        }
        Obs::CpAsyncPending { bar, .. } => format!("the cp.async arrive-on on {} fires (pending count back down)", n.barrier(*bar)),
        // The async proxy: TMA stores and wgmma read shared memory asynchronously.
        Obs::AsyncReadIssued { buf, wgmma: false } => format!("TMA store starts reading {}", n.buffer(*buf)),
        Obs::AsyncReadIssued { buf, wgmma: true } => format!("wgmma starts reading {}", n.buffer(*buf)),
        Obs::AsyncReadDone { buf, wgmma: false } => format!("the TMA store's read of {} is done", n.buffer(*buf)),
        Obs::AsyncReadDone { buf, wgmma: true } => format!("the wgmma's read of {} is done", n.buffer(*buf)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use phasecheck_model::api::SpecBuilder;

    /// One producer arrives on a count-1 barrier; one consumer waits for phase 0.
    fn handoff() -> Model {
        let spec = SpecBuilder::new("handoff")
            .barrier("ready count 1")
            .role("producer", 1, "arrive(ready)")
            .role("consumer", 1, "wait_parity(ready, 0)")
            .build()
            .expect("spec lowers");
        Model::new(spec.proto)
    }

    #[test]
    fn a_step_that_does_not_replay_is_named_with_its_thread_and_why() {
        let m = handoff();
        let blocked = replay(&m, &[Action::Thread(1)]).unwrap_err();
        assert_eq!((blocked.step, blocked.reason.as_str()), (0, "consumer#0 is blocked"));
        let finished = replay(&m, &[Action::Thread(0), Action::Thread(0)]).unwrap_err();
        assert_eq!((finished.step, finished.reason.as_str()), (1, "producer#0 has finished"));
        let nobody = replay(&m, &[Action::Thread(7)]).unwrap_err();
        assert_eq!(nobody.reason, "there is no thread 7 (the protocol has 2)");
        let no_copy = replay(&m, &[Action::Land(0)]).unwrap_err();
        assert_eq!(no_copy.reason, "there is no async copy #0 in flight (0 are)");
        let ok = replay(&m, &[Action::Thread(0), Action::Thread(1)]).unwrap();
        assert_eq!(ok.steps.len(), 2);
    }
}

/// The barrier a copy in flight completes on, as traces name it: a plain `cp.async` copy has
/// none.
pub fn copy_barrier(p: &phasecheck_model::program::ir::Protocol, c: &phasecheck_model::rt::state::CopyInFlight) -> String {
    p.barriers
        .get(c.bar as usize)
        .map_or_else(|| "(none: cp.async)".to_string(), |b| b.name.clone())
}
