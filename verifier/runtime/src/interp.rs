//! Runs a lowered protocol ([`Protocol`]) on threads over the reference [`Barrier`]: one thread
//! per protocol thread, async copies as helper threads that land later, `syncthreads`/`syncwarp`
//! as execution barriers. It records an [`Outcome`] in the GPU report's format, so that one run
//! can be checked against the set the model allows (`phasecheck_verifier::outcomes::allowed_outcomes`).
//!
//! Three ways to schedule ([`Schedule`]):
//! * `Free`: OS threads with random pauses and copy delays (`phasecheck run --cpu`); every
//!   blocking wait is bounded by a deadline and a thread whose wait times out hangs, like the
//!   GPU's bounded waits.
//! * under `cfg(loom)`, the same threads are loom's, and loom chooses the interleavings.
//! * `Directed`: a turnstile forces the order of a model trace (the verifier's `Vec<Action>`):
//!   each thread step and each landing happens only on its turn, so the runtime's observations can
//!   be compared with what the model says the trace observes.
//!
//! The interpreter does not know the model's rules: it only executes instructions against the
//! barrier runtime, the execution barriers of [`crate::sched`] and the copy engines of
//! [`crate::engines`]. What it shares with the model is what a program means: expressions are
//! evaluated by the model's own evaluator (`IExpr::eval`, short-circuit and faults included), and
//! the default copy version and which statements are recorded in an outcome are the model's.
//!
//! A uniform role runs as one thread per agent, as the model runs it: each of its steps does
//! what the warp's lanes would do one after the other (`Protocol::lanes_at`: every arrival, tx
//! update, copy and init once per lane, what the lanes share once).

use crate::barrier::{Barrier, Bound, Fault, Ub, WaitError};
use crate::engines::{next_rand, CpQueue, RangeMap};
use crate::proxy::ProxyQueue;
use crate::sched::{At, Gate};
use crate::sync::{spin_hint, thread, Arc, Condvar, Mutex, Slot};
use phasecheck_model::program::ir::{Code, EvalError, IExpr, IOp, InstrKind, MbarOp, Protocol, Ref, ThreadInfo};
use phasecheck_model::rt::Action;
use phasecheck_model::ViolationKind;
use phasecheck_verifier::outcomes::{recorded, Outcome, Recorded, ThreadOutcome};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::time::{Duration, Instant};

/// How the threads are scheduled.
#[derive(Clone, Debug, Default)]
pub enum Schedule {
    /// OS threads (or loom's), random pauses.
    #[default]
    Free,
    /// Follow these model actions in order; see the module docs.
    Directed(Vec<Action>),
}

#[derive(Clone, Debug)]
pub struct Options {
    pub fault: Fault,
    /// A blocked thread hangs (its bounded wait times out, as on the GPU) once the CTA has been
    /// quiet this long: every unfinished thread blocked, no copy in flight, no step taken. This is
    /// the model's timeout rule (a wait may time out only when nothing else can move), so a slow
    /// machine cannot make a progressing run hang. Ignored under loom.
    pub quiet: Duration,
    /// Hard bound on one blocking wait whatever happens (the suite never hangs).
    pub wait_timeout: Duration,
    /// Upper bound of the random delay before a copy lands, and of the random pause before a
    /// thread's visible steps (ignored under loom and in directed runs).
    pub max_delay: Duration,
    pub seed: u64,
    pub schedule: Schedule,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            fault: Fault::None,
            quiet: Duration::from_millis(50),
            wait_timeout: Duration::from_secs(10),
            max_delay: Duration::from_micros(200),
            seed: 1,
            schedule: Schedule::Free,
        }
    }
}

/// A protocol the runtime cannot run faithfully.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What one run did.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// In the GPU report's format; `fault` is set when undefined behaviour stopped the run.
    pub outcome: Outcome,
    /// The undefined behaviour that stopped it, with the model's kind.
    pub ub: Option<Ub>,
    /// Laws of SEMANTICS.md the barrier audits found broken (empty for a correct runtime).
    pub broken: Vec<String>,
    /// `read(B, expect = V)` that saw another version (stale-read: recorded, not fatal).
    pub stale_reads: Vec<String>,
    /// Directed runs: the schedule could not be followed (a step blocked or the thread was not
    /// where the trace says). Empty for free runs.
    pub diverged: Vec<String>,
}

/// Can the runtime run this protocol? Free runs take every statement of the language. Directed
/// runs follow a model trace one thread step at a time, which the execution barriers (a model
/// step there releases a group), uniform roles, cp.async, partial copies and cluster scope do not
/// map onto: those are refused there.
pub fn supported(proto: &Protocol, directed: bool) -> Result<(), Unsupported> {
    // The warpgroup's collective MMA and the operand versions an MMA checks have no engine here.
    for code in proto.roles.iter().map(|r| &r.code) {
        for i in &code.instrs {
            let what = match &i.kind {
                InstrKind::Op {
                    op: IOp::Proxy(phasecheck_model::program::ir::ProxyOp::Wgmma { warpgroup: true, .. } | phasecheck_model::program::ir::ProxyOp::WgmmaWait { warpgroup: true, .. }),
                    ..
                } => "warpgroup-scoped wgmma (warpgroup_mma / warpgroup_wait)",
                InstrKind::Op {
                    op: IOp::Proxy(phasecheck_model::program::ir::ProxyOp::Wgmma { expect: Some(_), .. }),
                    ..
                } => "operand versions of a wgmma (`wgmma_async(..., expect = V)`)",
                InstrKind::Op { op: IOp::Tc(tc), .. } => {
                    return Err(Unsupported(format!(
                        "the runtime does not model Blackwell's `{}` (tcgen05 MMA and commit, tensor memory, cluster launch control: the model alone checks them)",
                        tc.name()
                    )))
                }
                InstrKind::Op {
                    op: IOp::Remote { op, .. },
                    ..
                } if matches!(**op, IOp::Tc(_)) => {
                    return Err(Unsupported(format!(
                        "the runtime does not model Blackwell's `{}` (the model alone checks it)",
                        op.name()
                    )))
                }
                InstrKind::Op {
                    op: IOp::Proxy(phasecheck_model::program::ir::ProxyOp::StorePartAsync { .. }),
                    ..
                } => "a TMA store of part of a buffer (`copy_store_async(BUF, offset = O, bytes = N)`)",
                // Its engine here has no source buffer whose read could end at the landing.
                InstrKind::Op {
                    op: IOp::Remote { op, .. },
                    ..
                } if matches!(**op, IOp::Copy(phasecheck_model::program::ir::CopyOp::CopyFrom { .. })) => {
                    "a CTA-to-CTA bulk copy (`copy_async(DST, B, cta = R, from = SRC)`)"
                }
                // Its engine reads no descriptor, and its proxy fence covers every buffer.
                InstrKind::Op {
                    op:
                        IOp::Copy(phasecheck_model::program::ir::CopyOp::Tensor { .. })
                        | IOp::Proxy(phasecheck_model::program::ir::ProxyOp::FenceProxyTensormap { .. }),
                    ..
                } => "TMA descriptors in shared memory (`copy_async(..., tensormap = MAP)`, `fence_proxy_tensormap(MAP)`)",
                // Its buffers hold versions a write replaces; a counter's value is a sum of adds
                // whose race rule (atomics never race each other) it does not follow.
                InstrKind::Op { op, .. } if is_counter_op(op) => "counters (`atomic_add(C, V)`, `read_counter(C)`)",
                _ => continue,
            };
            return Err(Unsupported(format!("the runtime does not model {what}")));
        }
    }
    // A uniform agent evaluates with its leader's identity, as the model's agent does outside a
    // per-lane offset; the model's per-CTA agents and per-lane offsets have no engine here.
    if proto.cluster > 1 && proto.roles.iter().any(|r| r.uniform) {
        return Err(Unsupported(
            "the runtime does not model uniform roles under cluster scope".to_string(),
        ));
    }
    for r in proto.roles.iter().filter(|r| r.uniform) {
        let lane_offset = r.code.instrs.iter().any(|i| match &i.kind {
            InstrKind::Op { op, .. } => phasecheck_model::program::uniform::per_lane_offset(op).is_some_and(|o| o.reads_identity()),
            _ => false,
        });
        if lane_offset {
            return Err(Unsupported(format!(
                "the runtime does not model per-lane offsets (`offset = lane * N`) in uniform role {}",
                r.name
            )));
        }
    }
    if !directed {
        return Ok(());
    }
    let refuse = |what: &str| Err(Unsupported(format!("directed runs do not follow {what}")));
    if proto.roles.iter().any(|r| r.uniform) {
        return refuse("uniform roles");
    }
    if proto.cluster > 1 {
        return refuse("cluster scope");
    }
    if crate::sched::uses_gate(proto) {
        return refuse("execution barriers (syncthreads, syncwarp, elect, named barriers, commit)");
    }
    for code in proto.roles.iter().map(|r| &r.code).chain(proto.completions.iter()) {
        for i in &code.instrs {
            let ranged = match &i.kind {
                InstrKind::Op { op: IOp::Copy(op), .. } => !crate::op::copy_directed(op),
                InstrKind::Op { op: IOp::Mem(op), .. } => !crate::op::mem_directed(op),
                InstrKind::Op {
                    op: IOp::Remote { .. }, ..
                } => true,
                _ => false,
            };
            if ranged {
                return refuse("cp.async or partial-buffer copies");
            }
        }
    }
    Ok(())
}

/// Run the protocol once.
pub fn run(proto: &Protocol, opts: &Options) -> Result<RunResult, Unsupported> {
    let directed = matches!(opts.schedule, Schedule::Directed(_));
    supported(proto, directed)?;
    let world = match World::new(proto.clone(), opts.clone()) {
        Ok(w) => Arc::new(w),
        Err(u) => {
            let n = proto.threads.len();
            return Ok(RunResult {
                outcome: Outcome {
                    threads: vec![ThreadOutcome::default(); n],
                    completions: vec![0; proto.barriers.len()],
                    fault: true,
                },
                ub: Some(u),
                broken: vec![],
                stale_reads: vec![],
                diverged: vec![],
            });
        }
    };
    let n = proto.threads.len();
    let mut joined = Vec::with_capacity(n);
    if directed {
        let handles: Vec<_> = (0..n)
            .map(|t| {
                let w = world.clone();
                thread::spawn(move || w.thread_main(t))
            })
            .collect();
        world.direct();
        joined = handles.into_iter().map(|h| h.join()).collect();
    } else {
        // Thread 0 runs here: loom models at most 5 threads, the copies need some of them.
        let handles: Vec<_> = (1..n)
            .map(|t| {
                let w = world.clone();
                thread::spawn(move || w.thread_main(t))
            })
            .collect();
        if n > 0 {
            // A panic here must not skip the joins below: copy helpers hold a pointer to the world.
            joined.push(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.thread_main(0))));
        }
        joined.extend(handles.into_iter().map(|h| h.join()));
    }
    // Copy threads hold a pointer to the world: join them all before anything may unwind.
    let copies: Vec<_> = std::mem::take(&mut *world.copy_threads.lock().unwrap_or_else(|p| p.into_inner()));
    let copies_ok = copies.into_iter().map(|h| h.join().is_ok()).all(|ok| ok);
    // A copy whose last bytes started landing after every thread had exited lands in released
    // shared memory. (Sequence numbers, not a count of copies in flight read at the end: the
    // copy's bookkeeping after its landing may lag behind the threads its landing released.)
    let exit = world.exit_seq.load(SeqCst);
    let late = world
        .landed_seqs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|l| *l > exit);
    if !directed && (late || world.unlanded.load(SeqCst) > 0) {
        world.fail(Ub::new(
            ViolationKind::Lifetime,
            "every thread exited with an async copy still in flight",
        ));
    }
    if !directed && world.proxy_pending.load(SeqCst) > 0 {
        world.fail(Ub::new(
            ViolationKind::Lifetime,
            "every thread exited while the async proxy still reads shared memory",
        ));
    }
    world.abort.store(true, SeqCst);
    let outs: Vec<ThreadOutcome> = joined.into_iter().map(|r| r.expect("protocol thread panicked")).collect();
    assert!(copies_ok, "copy thread panicked");
    let ub = world.ub.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let completions = world.completion_runs.iter().map(|c| c.load(Relaxed) as u32).collect();
    // The laws are about defined executions: after undefined behaviour anything may follow (and
    // threads still running when it was detected may have left the barriers half-way).
    let mut broken = Vec::new();
    if ub.is_none() {
        for b in &world.barriers {
            broken.extend(b.audit().laws(b.name()));
        }
    }
    let stale_reads = std::mem::take(&mut *world.stale_reads.lock().unwrap_or_else(|p| p.into_inner()));
    let diverged = std::mem::take(&mut *world.diverged.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(RunResult {
        outcome: Outcome {
            threads: outs,
            completions,
            fault: ub.is_some(),
        },
        ub,
        broken,
        stale_reads,
        diverged,
    })
}

/// An async copy issued and not yet landed (directed runs keep them in issue order, as the
/// model's `State::copies`).
#[derive(Clone, Debug)]
pub(crate) struct Copy {
    pub(crate) buf: usize,
    pub(crate) bar: usize,
    pub(crate) remaining: i64,
    pub(crate) version: i64,
    /// Bytes `lo .. hi` of the buffer, for a copy into part of it.
    pub(crate) range: Option<(i64, i64)>,
}

pub(crate) fn bound_check(b: &Bound) -> Result<(), WaitError> {
    if (b.cancelled)() {
        return Err(WaitError::Cancelled);
    }
    if b.deadline.is_some_and(|d| Instant::now() >= d) {
        return Err(WaitError::TimedOut);
    }
    Ok(())
}

pub(crate) fn cv_wait<'a, T>(cv: &Condvar, g: crate::sync::MutexGuardOf<'a, T>) -> crate::sync::MutexGuardOf<'a, T> {
    #[cfg(loom)]
    return cv.wait(g).unwrap_or_else(|e| e.into_inner());
    #[cfg(not(loom))]
    return cv
        .wait_timeout(g, Duration::from_millis(2))
        .map(|r| r.0)
        .unwrap_or_else(|e| e.into_inner().0);
}

/// Why a thread's interpretation stopped early.
pub(crate) enum Stop {
    Ub(Ub),
    Hung,
    Cancelled,
}

impl From<Ub> for Stop {
    fn from(u: Ub) -> Stop {
        Stop::Ub(u)
    }
}

impl From<WaitError> for Stop {
    fn from(e: WaitError) -> Stop {
        match e {
            WaitError::Ub(u) => Stop::Ub(u),
            WaitError::TimedOut => Stop::Hung,
            WaitError::Cancelled => Stop::Cancelled,
        }
    }
}

pub(crate) struct World {
    pub(crate) proto: Protocol,
    pub(crate) opts: Options,
    pub(crate) barriers: Vec<Barrier>,
    pub(crate) buffers: Vec<Slot>,
    /// Buffers that partial copies, partial reads or cp.async touch: their versions per byte
    /// range (`None`: one version for the whole buffer, in `buffers`).
    pub(crate) ranges: Vec<Option<RangeMap>>,
    /// Writes and copy issues per buffer: the default version of the next copy (bookkeeping, as
    /// `inflight`).
    pub(crate) writes: Vec<std::sync::atomic::AtomicI64>,
    pub(crate) vars: Vec<Slot>,
    /// Copies issued and not landed. This and the other plain `std` atomics and mutexes of the
    /// world are bookkeeping outside the protocol's memory: under loom they are not modelled
    /// (loom runs one thread at a time, so they read as sequentially consistent), which keeps
    /// them from multiplying the interleavings loom explores.
    pub(crate) inflight: std::sync::atomic::AtomicUsize,
    /// Unfinished protocol threads, threads blocked in a wait, threads spinning in a loop that
    /// changes nothing, and a counter of every step that changed something (the quiescence test
    /// of `Options::quiet`). Bookkeeping outside the modelled memory.
    pub(crate) alive: std::sync::atomic::AtomicUsize,
    pub(crate) blocked: std::sync::atomic::AtomicUsize,
    pub(crate) spinning: std::sync::atomic::AtomicUsize,
    pub(crate) progress: std::sync::atomic::AtomicU64,
    /// Unfinished threads per CTA (cluster scope: a CTA whose threads all exited has released
    /// its shared memory).
    pub(crate) cta_alive: Vec<std::sync::atomic::AtomicUsize>,
    /// Lifetime bookkeeping: a global sequence, the number the last exiting thread took, the
    /// numbers copies took just before their last bytes landed, and copies never landed.
    pub(crate) seq: std::sync::atomic::AtomicU64,
    pub(crate) exit_seq: std::sync::atomic::AtomicU64,
    pub(crate) landed_seqs: std::sync::Mutex<Vec<u64>>,
    pub(crate) unlanded: std::sync::atomic::AtomicUsize,
    pub(crate) abort: std::sync::atomic::AtomicBool,
    pub(crate) ub: std::sync::Mutex<Option<Ub>>,
    pub(crate) completion_runs: Vec<std::sync::atomic::AtomicU64>,
    pub(crate) stale_reads: std::sync::Mutex<Vec<String>>,
    pub(crate) diverged: std::sync::Mutex<Vec<String>>,
    /// The execution barriers (absent when the protocol has none: their bookkeeping at thread
    /// exit would only add interleavings).
    pub(crate) gate: Option<Gate>,
    /// Per thread, its cp.async copies and arrive-ons in issue order (empty without cp.async).
    pub(crate) cp: Vec<Mutex<CpQueue>>,
    /// Per thread, its async-proxy reads in flight, and how many there are in all.
    pub(crate) proxy: Vec<Mutex<ProxyQueue>>,
    pub(crate) proxy_pending: std::sync::atomic::AtomicUsize,
    /// Threads blocked at an execution barrier (they never time out; see `blocking`).
    pub(crate) blocked_exec: std::sync::atomic::AtomicUsize,
    pub(crate) copy_threads: std::sync::Mutex<Vec<thread::JoinHandle<()>>>,
    /// Directed runs: index of the action whose turn it is, and the copies in flight.
    pub(crate) turn: Mutex<(usize, Vec<Copy>)>,
    pub(crate) turn_cv: Condvar,
}

/// Evaluation context: a protocol thread or a completion function.
pub(crate) struct Ctx<'a> {
    /// The protocol thread's index in `Protocol::threads` (None in a completion function).
    pub(crate) t: Option<usize>,
    pub(crate) me: Option<ThreadInfo>,
    pub(crate) locals: Vec<i64>,
    /// The barrier whose completion function this is.
    pub(crate) completing: Option<usize>,
    pub(crate) out: Option<&'a mut ThreadOutcome>,
    pub(crate) rng: u64,
    /// Cluster scope: while a remote operation runs, the CTA whose objects it names.
    pub(crate) remote: Option<usize>,
    /// Spinning: since when (progress counter, time) the thread's steps changed nothing.
    pub(crate) idle_since: Option<(u64, Instant)>,
}

/// Whether each lane of a uniform agent makes the operation's contribution on its own: the
/// model's per-object rule (model/src/rt/uniform_agent.rs).
fn per_lane(op: &IOp) -> bool {
    match op {
        IOp::Mbar(op) => op.per_lane(),
        IOp::Copy(op) => op.per_lane(),
        _ => false,
    }
}

impl World {
    fn new(proto: Protocol, opts: Options) -> Result<World, Ub> {
        let mut barriers = Vec::new();
        for b in &proto.barriers {
            barriers.push(Barrier::new(b.name.clone(), (!b.manual_init).then_some(b.count), opts.fault)?);
        }
        let ranged = crate::engines::ranged_buffers(&proto);
        let uses_cp = crate::engines::uses_cp_async(&proto);
        let proxy: Vec<()> = if crate::engines::uses_proxy_reads(&proto) {
            vec![(); proto.threads.len()]
        } else {
            Vec::new()
        };
        let ctas = proto.cluster.max(1) as usize;
        Ok(World {
            buffers: proto.buffers.iter().map(|_| Slot::new(0)).collect(),
            ranges: proto
                .buffers
                .iter()
                .zip(&ranged)
                .map(|(b, r)| r.then(|| RangeMap::new(b.bytes)))
                .collect(),
            writes: proto.buffers.iter().map(|_| std::sync::atomic::AtomicI64::new(0)).collect(),
            vars: proto.vars.iter().map(|v| Slot::new(v.init)).collect(),
            inflight: std::sync::atomic::AtomicUsize::new(0),
            alive: std::sync::atomic::AtomicUsize::new(proto.threads.len()),
            blocked: std::sync::atomic::AtomicUsize::new(0),
            spinning: std::sync::atomic::AtomicUsize::new(0),
            progress: std::sync::atomic::AtomicU64::new(0),
            cta_alive: (0..ctas)
                .map(|c| std::sync::atomic::AtomicUsize::new(proto.threads.iter().filter(|t| t.cta as usize == c).count()))
                .collect(),
            seq: std::sync::atomic::AtomicU64::new(0),
            exit_seq: std::sync::atomic::AtomicU64::new(u64::MAX),
            landed_seqs: std::sync::Mutex::new(vec![]),
            unlanded: std::sync::atomic::AtomicUsize::new(0),
            abort: std::sync::atomic::AtomicBool::new(false),
            ub: std::sync::Mutex::new(None),
            completion_runs: proto.barriers.iter().map(|_| std::sync::atomic::AtomicU64::new(0)).collect(),
            stale_reads: std::sync::Mutex::new(vec![]),
            diverged: std::sync::Mutex::new(vec![]),
            gate: crate::sched::uses_gate(&proto).then(|| Gate::new(&proto, opts.fault, opts.seed)),
            cp: if uses_cp {
                proto.threads.iter().map(|_| Mutex::new(CpQueue::default())).collect()
            } else {
                Vec::new()
            },
            proxy: proxy.iter().map(|_| Mutex::new(ProxyQueue::default())).collect(),
            proxy_pending: std::sync::atomic::AtomicUsize::new(0),
            blocked_exec: std::sync::atomic::AtomicUsize::new(0),
            copy_threads: std::sync::Mutex::new(vec![]),
            turn: Mutex::new((0, vec![])),
            turn_cv: Condvar::new(),
            barriers,
            proto,
            opts,
        })
    }

    pub(crate) fn fail(&self, u: Ub) {
        let mut g = self.ub.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(u);
        }
        drop(g);
        self.abort.store(true, SeqCst);
    }

    pub(crate) fn cancelled(&self) -> bool {
        self.abort.load(Relaxed)
    }

    pub(crate) fn directed(&self) -> Option<&[Action]> {
        match &self.opts.schedule {
            Schedule::Directed(a) => Some(a),
            Schedule::Free => None,
        }
    }

    pub(crate) fn note(&self, list: &std::sync::Mutex<Vec<String>>, s: String) {
        list.lock().unwrap_or_else(|p| p.into_inner()).push(s);
    }

    // ---- threads ---------------------------------------------------------------------------

    fn thread_main(&self, t: usize) -> ThreadOutcome {
        let me = self.proto.threads[t];
        let code = self.proto.code_of(t);
        let mut out = ThreadOutcome::default();
        let mut ctx = Ctx {
            t: Some(t),
            me: Some(me),
            locals: vec![0; code.local_names.len()],
            completing: None,
            out: Some(&mut out),
            rng: self.opts.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (t as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9),
            remote: None,
            idle_since: None,
        };
        let r = self.exec(code, &mut ctx, true);
        if ctx.idle_since.is_some() {
            self.spinning.fetch_sub(1, SeqCst);
        }
        drop(ctx);
        match r {
            Ok(()) => out.finished = true,
            Err(Stop::Ub(u)) => self.fail(u),
            Err(Stop::Hung) | Err(Stop::Cancelled) => {}
        }
        if let Some(g) = &self.gate {
            if let Some(u) = g.exit(t) {
                self.fail(u);
            }
        }
        self.cta_alive[me.cta as usize].fetch_sub(1, SeqCst);
        if self.alive.fetch_sub(1, SeqCst) == 1 {
            self.exit_seq.store(self.seq.fetch_add(1, SeqCst), SeqCst);
        }
        // A thread that timed out changes nothing the others wait for (the model's timeouts of a
        // quiet CTA fire together): only a finished thread's exit is progress.
        if out.finished {
            self.stepped();
        }
        out
    }

    /// Stand at an execution barrier until the gate releases the thread.
    pub(crate) fn at_gate(&self, ctx: &Ctx, at: At, exec: bool) -> Result<Option<(usize, i64)>, Stop> {
        let (Some(t), Some(g)) = (ctx.t, self.gate.as_ref()) else {
            return Err(Stop::Ub(Ub::new(
                ViolationKind::CompletionMisuse,
                "a completion function blocks at an execution barrier",
            )));
        };
        Ok(self.blocking(exec, |b| g.enter(t, at, b))?)
    }

    /// Interpret `code` from its first instruction. `turns`: a protocol thread (takes turns in
    /// directed runs, pauses at random in free runs); false for completion functions, which run
    /// inside the completing step.
    pub(crate) fn exec(&self, code: &Code, ctx: &mut Ctx, turns: bool) -> Result<(), Stop> {
        let mut pc = 0usize;
        let mut have_turn = false;
        let mut fuel: u64 = 10_000_000;
        let result = loop {
            let Some(instr) = code.instrs.get(pc) else { break Ok(()) };
            fuel -= 1;
            if fuel == 0 {
                break Err(Stop::Ub(Ub::new(
                    if turns {
                        ViolationKind::Deadlock
                    } else {
                        ViolationKind::CompletionMisuse
                    },
                    "a loop does not finish",
                )));
            }
            let visible = turns && instr.visible;
            if visible {
                if have_turn {
                    self.pass_turn();
                    have_turn = false;
                }
                if self.directed().is_some() {
                    if !self.take_turn(ctx.t.unwrap_or(0)) {
                        break Err(Stop::Cancelled);
                    }
                    have_turn = true;
                } else {
                    self.pause(ctx);
                }
                if self.cancelled() {
                    break Err(Stop::Cancelled);
                }
            }
            // Whether this visible step changed anything (see `idle_step`).
            let mut idle = false;
            match &instr.kind {
                InstrKind::SetLocal { slot, expr } => {
                    ctx.locals[*slot as usize] = self.eval(expr, ctx)?;
                    idle = true;
                }
                InstrKind::SetVar { var, expr } => {
                    let v = self.eval(expr, ctx)?;
                    self.vars[*var as usize].set(v);
                }
                InstrKind::Jump { to } => {
                    pc = *to as usize;
                    continue;
                }
                InstrKind::Branch { cond, else_to } => {
                    let taken = self.eval(cond, ctx)? != 0;
                    if let (Some(g), Some(t)) = (&self.gate, ctx.t) {
                        g.branch(t, pc as u32, taken);
                    }
                    if visible {
                        if let Err(e) = self.idle_step(ctx) {
                            break Err(e);
                        }
                    }
                    if !taken {
                        pc = *else_to as usize;
                        continue;
                    }
                    pc += 1;
                    continue;
                }
                InstrKind::Assert(e) => {
                    if self.eval(e, ctx)? == 0 {
                        break Err(Stop::Ub(Ub::new(ViolationKind::Assertion, "assertion failed")));
                    }
                    idle = true;
                }
                InstrKind::Return => break Ok(()),
                InstrKind::Work => spin_hint(),
                InstrKind::TokenCheck { origin, index, group } => {
                    let from = ctx.locals[*origin as usize];
                    let at = self.eval(index, ctx)?;
                    if from != 0 && from != at + 1 {
                        let name = &self.proto.barrier_groups[*group as usize].name;
                        break Err(Stop::Ub(Ub::new(
                            ViolationKind::Assertion,
                            format!("a wait on {name}[{at}] with a token of {name}[{}]", from - 1),
                        )));
                    }
                    idle = true;
                }
                InstrKind::SyncThreads => {
                    if let Err(e) = self.at_gate(ctx, At::SyncThreads, true) {
                        break Err(e);
                    }
                }
                InstrKind::SyncWarp => {
                    if let Err(e) = self.at_gate(ctx, At::Warp { elect: false, mask: None }, true) {
                        break Err(e);
                    }
                }
                InstrKind::SyncWarpMask { mask } => {
                    let m = self.eval(mask, ctx)?;
                    let lane = ctx.me.map_or(0, |me| me.lane);
                    if lane >= 64 || (m >> lane) & 1 == 0 {
                        break Err(Stop::Ub(Ub::new(
                            ViolationKind::Assertion,
                            format!("syncwarp({m:#x}) is executed by lane {lane}, which is not in the mask"),
                        )));
                    }
                    if let Err(e) = self.at_gate(
                        ctx,
                        At::Warp {
                            elect: false,
                            mask: Some(m),
                        },
                        true,
                    ) {
                        break Err(e);
                    }
                }
                InstrKind::Elect { slot } => {
                    if let Err(e) = self.at_gate(ctx, At::Warp { elect: true, mask: None }, true) {
                        break Err(e);
                    }
                    let (Some(g), Some(t)) = (&self.gate, ctx.t) else {
                        unreachable!("at_gate checked both")
                    };
                    ctx.locals[*slot as usize] = g.elected(t) as i64;
                }
                InstrKind::NamedBar { id, count, sync } => {
                    let (id, count) = (self.eval(id, ctx)?, self.eval(count, ctx)?);
                    if let Err(e) = self.at_gate(ctx, At::Named { id, count, sync: *sync }, true) {
                        break Err(e);
                    }
                }
                InstrKind::ClusterArrive { .. } => {
                    let (Some(g), Some(t)) = (&self.gate, ctx.t) else {
                        unreachable!("cluster barriers are in role code")
                    };
                    g.cluster_arrive(t)?;
                }
                InstrKind::ClusterWait { .. } => {
                    let (Some(g), Some(t)) = (&self.gate, ctx.t) else {
                        unreachable!("cluster barriers are in role code")
                    };
                    let mark = g.cluster_mark(t)?;
                    if let Err(e) = self.at_gate(ctx, At::ClusterWait { mark }, true) {
                        break Err(e);
                    }
                }
                InstrKind::Op { op, result } => {
                    let rec = recorded(code, instr);
                    let lanes = match (turns, ctx.t) {
                        (true, Some(t)) if per_lane(op) => self.proto.lanes_at(t, pc as u32),
                        _ => 1,
                    };
                    let mut r = self.op(op, ctx, rec, pc as u32);
                    for _ in 1..lanes {
                        if r.is_err() {
                            break;
                        }
                        // The other lanes of a uniform agent: their tokens are not the outcome's.
                        if let Err(e) = self.op(op, ctx, None, pc as u32) {
                            r = Err(e);
                        }
                    }
                    match r {
                        Ok(v) => {
                            if let (Some(slot), Some(v)) = (result, v) {
                                ctx.locals[*slot as usize] = v;
                            }
                            idle = matches!(op, IOp::Mbar(MbarOp::Wait { try_: true, .. })) && v == Some(0);
                        }
                        Err(e) => break Err(e),
                    }
                }
            }
            if visible {
                if idle {
                    if let Err(e) = self.idle_step(ctx) {
                        break Err(e);
                    }
                } else {
                    self.busy_step(ctx);
                }
            }
            pc += 1;
        };
        if have_turn {
            self.pass_turn();
        }
        result
    }

    /// A random pause before a visible step of a free run, so that runs differ.
    pub(crate) fn pause(&self, ctx: &mut Ctx) {
        if cfg!(loom) || self.opts.max_delay.is_zero() {
            return;
        }
        let r = next_rand(&mut ctx.rng);
        match r % 4 {
            0 => {}
            1 => std::thread::yield_now(),
            2 => {
                for _ in 0..(r >> 8) % 2000 {
                    std::hint::spin_loop();
                }
            }
            _ => std::thread::sleep(Duration::from_nanos((r >> 8) % (self.opts.max_delay.as_nanos() as u64 + 1))),
        }
    }

    /// The model's evaluator (`IExpr::eval`: `&&`/`||` short-circuit, checked arithmetic) over
    /// the thread's locals and identity and the shared vars; a fault is the model's `assertion`.
    pub(crate) fn eval(&self, e: &IExpr, ctx: &Ctx) -> Result<i64, Ub> {
        e.eval(&ctx.locals, ctx.me.as_ref(), &mut |v| Ok(self.vars[v as usize].get()))
            .map_err(|err| match err {
                EvalError::Fault(m) => Ub::new(ViolationKind::Assertion, m),
                EvalError::NoVar => Ub::new(ViolationKind::Assertion, "a shared var that cannot be read here"),
            })
    }

    /// The flat index a reference names; during a remote operation, in the target CTA's copy of
    /// the group (the tables are CTA-major, model/src/program/ir.rs).
    pub(crate) fn index(&self, r: &Ref, groups: &[phasecheck_model::program::ir::Group], ctx: &Ctx) -> Result<usize, Ub> {
        let g = match ctx.remote {
            None => &groups[r.group as usize],
            Some(cta) => {
                let per = groups.len() / self.proto.cluster.max(1) as usize;
                &groups[cta * per + r.group as usize % per]
            }
        };
        let i = match &r.index {
            None => 0,
            Some(e) => self.eval(e, ctx)?,
        };
        if i < 0 || i >= g.len as i64 {
            return Err(Ub::new(
                ViolationKind::Assertion,
                format!("index {i} out of range for {}[{}]", g.name, g.len),
            ));
        }
        Ok(g.base as usize + i as usize)
    }

    pub(crate) fn bar(&self, r: &Ref, ctx: &Ctx) -> Result<usize, Ub> {
        self.index(r, &self.proto.barrier_groups, ctx)
    }

    pub(crate) fn buf(&self, r: &Ref, ctx: &Ctx) -> Result<usize, Ub> {
        self.index(r, &self.proto.buffer_groups, ctx)
    }

    /// The completion step of barrier `b`: its completion function, if any, interpreted in the
    /// completing thread.
    pub(crate) fn completion(&self, b: usize) -> impl FnMut(u64) -> Result<(), Ub> + '_ {
        move |_phase| {
            let Some(ci) = self.proto.barriers[b].completion else {
                return Ok(());
            };
            let code = &self.proto.completions[ci as usize];
            let mut ctx = Ctx {
                t: None,
                me: None,
                locals: vec![0; code.local_names.len()],
                completing: Some(b),
                out: None,
                rng: 0,
                remote: None,
                idle_since: None,
            };
            match self.exec(code, &mut ctx, false) {
                Ok(()) => {
                    self.completion_runs[b].fetch_add(1, Relaxed);
                    Ok(())
                }
                Err(Stop::Ub(u)) => Err(u),
                Err(_) => Err(Ub::new(ViolationKind::CompletionMisuse, "a completion function blocked")),
            }
        }
    }

    pub(crate) fn own_barrier(&self, ctx: &Ctx, b: usize, what: &str) -> Result<(), Ub> {
        if ctx.completing == Some(b) {
            return Err(Ub::new(
                ViolationKind::CompletionMisuse,
                format!(
                    "the completion function of {} {what}s on its own barrier",
                    self.proto.barriers[b].name
                ),
            ));
        }
        Ok(())
    }

    /// One operation of the instruction at `pc`.
    /// One operation of the instruction at `pc`: each object's statements run in its module of
    /// `op/` (as the model's in model/src/rt/<object>.rs); a remote one runs on the CTA it names.
    pub(crate) fn op(&self, op: &IOp, ctx: &mut Ctx, rec: Option<Recorded>, pc: u32) -> Result<Option<i64>, Stop> {
        match op {
            IOp::Mbar(op) => self.mbar_op(op, ctx, rec),
            IOp::Copy(op) => self.copy_op(op, ctx),
            IOp::Mem(op) => self.mem_op(op, ctx, rec),
            IOp::Warp(op) => self.warp_op(op, ctx, pc),
            IOp::Proxy(op) => self.proxy_op(op, ctx),
            IOp::Tc(_) => unreachable!("supported() refuses the Blackwell statements by name"),
            IOp::Remote { target, multicast, op } => {
                let value = self.eval(target, ctx)?;
                let n = self.proto.cluster.max(1) as i64;
                let ctas: Vec<usize> = if *multicast {
                    if !(1..(1 << n)).contains(&value) {
                        return Err(Stop::Ub(Ub::new(
                            ViolationKind::Assertion,
                            format!("multicast mask {value:#x} names no CTA or one outside the cluster"),
                        )));
                    }
                    (0..n as usize).filter(|c| (value >> c) & 1 != 0).collect()
                } else {
                    if !(0..n).contains(&value) {
                        return Err(Stop::Ub(Ub::new(
                            ViolationKind::Assertion,
                            format!("CTA rank {value} is outside the cluster of {n}"),
                        )));
                    }
                    vec![value as usize]
                };
                let mut last = None;
                for cta in ctas {
                    if self.cta_alive[cta].load(SeqCst) == 0 {
                        return Err(Stop::Ub(Ub::new(
                            ViolationKind::Lifetime,
                            format!("a remote operation on CTA {cta}, whose threads have all exited"),
                        )));
                    }
                    ctx.remote = Some(cta);
                    let r = self.op(op, ctx, rec, pc);
                    ctx.remote = None;
                    last = r?;
                }
                Ok(last)
            }
        }
    }
}

/// `atomic_add` or `read_counter`, on the own CTA's counter or a peer's.
fn is_counter_op(op: &IOp) -> bool {
    use phasecheck_model::program::ir::MemOp;
    match op {
        IOp::Mem(MemOp::AtomicAdd { .. } | MemOp::ReadCounter { .. }) => true,
        IOp::Remote { op, .. } => is_counter_op(op),
        _ => false,
    }
}
