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
//! barrier runtime. What it must share with the model is what a program means (expression
//! evaluation, the default copy version, which statements are recorded in an outcome).

use crate::barrier::{Barrier, Bound, Fault, Ub, WaitError};
use crate::sync::{lock, spin_hint, thread, Arc, Condvar, Mutex, Slot};
use phasecheck_model::program::eval::{apply_binary, apply_unary};
use phasecheck_model::program::ir::{
    Code, CopyOp, IExpr, IOp, InstrKind, MbarOp, MemOp, Protocol, ProxyOp, Ref, ThreadInfo, WaitTarget, WarpOp, MAX_COUNT,
};
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

/// Can the runtime run this protocol? `commit` needs warp convergence, which OS threads do not
/// have; directed runs also leave out `syncthreads`/`syncwarp` (a model step there is not one
/// thread's step).
pub fn supported(proto: &Protocol, directed: bool) -> Result<(), Unsupported> {
    if let Some(r) = proto.roles.iter().find(|r| r.uniform) {
        // One model thread stands for a warp's lanes there; this runtime runs one OS thread
        // per model thread and would make one arrival where the lanes make warp_size.
        return Err(Unsupported(format!(
            "role {} is uniform (one thread per warp), which the reference runtime does not run",
            r.name
        )));
    }
    if proto.cluster > 1 {
        return Err(Unsupported("cluster scope (`cluster N`) is not in the reference runtime".into()));
    }
    let codes = proto.roles.iter().map(|r| &r.code).chain(proto.completions.iter());
    for code in codes {
        for i in &code.instrs {
            match &i.kind {
                InstrKind::Op {
                    op: IOp::Warp(WarpOp::Commit { .. }),
                    ..
                } => return Err(Unsupported("commit (warp-batched arrival) needs warp convergence".into())),
                InstrKind::SyncThreads | InstrKind::SyncWarp if directed => {
                    return Err(Unsupported("directed runs do not follow syncthreads/syncwarp".into()))
                }
                InstrKind::SyncWarpMask { .. } | InstrKind::Elect { .. } => {
                    return Err(Unsupported("syncwarp(mask) and elect() are not in the reference runtime".into()))
                }
                // Named barriers (`bar_sync` / `bar_arrive`).
                InstrKind::NamedBar { .. } => return Err(Unsupported("named barriers are not in the reference runtime".into())),
                InstrKind::ClusterArrive { .. }
                | InstrKind::ClusterWait { .. }
                | InstrKind::Op {
                    op: IOp::Remote { .. }, ..
                } => {
                    return Err(Unsupported(
                        "cluster scope (the cluster barrier, remote and multicast operations) is not in the reference runtime".into(),
                    ))
                }
                InstrKind::TokenCheck { .. } => {
                    return Err(Unsupported(
                        "token checks of barrier-array elements are not in the reference runtime".into(),
                    ))
                }
                InstrKind::Op { op, .. } if !implemented(op) => {
                    return Err(Unsupported(format!(
                    "`{}` is not in the reference runtime (cp.async, its arrive-on and groups, and partial-buffer accesses are not yet)",
                    op.name()
                )))
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The operations this runtime implements; `supported` refuses a protocol with any other, by name.
fn implemented(op: &IOp) -> bool {
    matches!(
        op,
        IOp::Mbar(_) | IOp::Copy(CopyOp::Copy { .. }) | IOp::Mem(MemOp::Read { .. } | MemOp::Write { .. }) | IOp::Warp(_) | IOp::Proxy(_)
    )
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
            joined.push(Ok(world.thread_main(0)));
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
struct Copy {
    buf: usize,
    bar: usize,
    remaining: i64,
    version: i64,
}

/// `syncthreads` / `syncwarp`: waits for every unfinished participant.
struct ExecBarrier {
    /// (arrived, live participants, generation)
    state: Mutex<(usize, usize, u64)>,
    cv: Condvar,
}

impl ExecBarrier {
    fn new(live: usize) -> ExecBarrier {
        ExecBarrier {
            state: Mutex::new((0, live, 0)),
            cv: Condvar::new(),
        }
    }

    fn arrive_and_wait(&self, bound: &Bound) -> Result<(), WaitError> {
        let mut g = lock(&self.state);
        g.0 += 1;
        if g.0 == g.1 {
            g.0 = 0;
            g.2 += 1;
            self.cv.notify_all();
            return Ok(());
        }
        let gen = g.2;
        while g.2 == gen {
            if let Err(e) = bound_check(bound) {
                g.0 -= 1;
                return Err(e);
            }
            g = cv_wait(&self.cv, g);
        }
        Ok(())
    }

    /// A participant exited: it no longer holds the others back.
    fn leave(&self) {
        let mut g = lock(&self.state);
        g.1 -= 1;
        if g.0 > 0 && g.0 == g.1 {
            g.0 = 0;
            g.2 += 1;
            self.cv.notify_all();
        }
    }
}

fn bound_check(b: &Bound) -> Result<(), WaitError> {
    if (b.cancelled)() {
        return Err(WaitError::Cancelled);
    }
    if b.deadline.is_some_and(|d| Instant::now() >= d) {
        return Err(WaitError::TimedOut);
    }
    Ok(())
}

fn cv_wait<'a, T>(cv: &Condvar, g: crate::sync::MutexGuardOf<'a, T>) -> crate::sync::MutexGuardOf<'a, T> {
    #[cfg(loom)]
    return cv.wait(g).unwrap_or_else(|e| e.into_inner());
    #[cfg(not(loom))]
    return cv
        .wait_timeout(g, Duration::from_millis(2))
        .map(|r| r.0)
        .unwrap_or_else(|e| e.into_inner().0);
}

/// Why a thread's interpretation stopped early.
enum Stop {
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

struct World {
    proto: Protocol,
    opts: Options,
    barriers: Vec<Barrier>,
    buffers: Vec<Slot>,
    /// Writes and copy issues per buffer: the default version of the next copy (bookkeeping, as
    /// `inflight`).
    writes: Vec<std::sync::atomic::AtomicI64>,
    vars: Vec<Slot>,
    /// Copies issued and not landed. This and the other plain `std` atomics and mutexes of the
    /// world are bookkeeping outside the protocol's memory: under loom they are not modelled
    /// (loom runs one thread at a time, so they read as sequentially consistent), which keeps
    /// them from multiplying the interleavings loom explores.
    inflight: std::sync::atomic::AtomicUsize,
    /// Unfinished protocol threads, threads blocked in a wait, and a counter of every step taken
    /// (the quiescence test of `Options::quiet`). Bookkeeping outside the modelled memory.
    alive: std::sync::atomic::AtomicUsize,
    blocked: std::sync::atomic::AtomicUsize,
    progress: std::sync::atomic::AtomicU64,
    /// Lifetime bookkeeping: a global sequence, the number the last exiting thread took, the
    /// numbers copies took just before their last bytes landed, and copies never landed.
    seq: std::sync::atomic::AtomicU64,
    exit_seq: std::sync::atomic::AtomicU64,
    landed_seqs: std::sync::Mutex<Vec<u64>>,
    unlanded: std::sync::atomic::AtomicUsize,
    abort: std::sync::atomic::AtomicBool,
    ub: std::sync::Mutex<Option<Ub>>,
    completion_runs: Vec<std::sync::atomic::AtomicU64>,
    stale_reads: std::sync::Mutex<Vec<String>>,
    diverged: std::sync::Mutex<Vec<String>>,
    /// `syncthreads` / `syncwarp` (absent when the protocol has none: their bookkeeping at thread
    /// exit would only add interleavings).
    cta: Option<ExecBarrier>,
    warps: Vec<ExecBarrier>,
    /// Threads blocked at an execution barrier (they never time out; see `blocking`).
    blocked_exec: std::sync::atomic::AtomicUsize,
    copy_threads: std::sync::Mutex<Vec<thread::JoinHandle<()>>>,
    /// Directed runs: index of the action whose turn it is, and the copies in flight.
    turn: Mutex<(usize, Vec<Copy>)>,
    turn_cv: Condvar,
}

/// Evaluation context: a protocol thread or a completion function.
struct Ctx<'a> {
    me: Option<ThreadInfo>,
    locals: Vec<i64>,
    /// The barrier whose completion function this is.
    completing: Option<usize>,
    out: Option<&'a mut ThreadOutcome>,
    rng: u64,
}

impl World {
    fn new(proto: Protocol, opts: Options) -> Result<World, Ub> {
        let mut barriers = Vec::new();
        for b in &proto.barriers {
            barriers.push(Barrier::new(b.name.clone(), (!b.manual_init).then_some(b.count), opts.fault)?);
        }
        let nwarps = proto.threads.iter().map(|t| t.warp as usize + 1).max().unwrap_or(0);
        let uses_sync = proto.roles.iter().any(|r| {
            r.code
                .instrs
                .iter()
                .any(|i| matches!(i.kind, InstrKind::SyncThreads | InstrKind::SyncWarp))
        });
        let warps = if uses_sync {
            (0..nwarps)
                .map(|w| ExecBarrier::new(proto.threads.iter().filter(|t| t.warp as usize == w).count()))
                .collect()
        } else {
            Vec::new()
        };
        Ok(World {
            buffers: proto.buffers.iter().map(|_| Slot::new(0)).collect(),
            writes: proto.buffers.iter().map(|_| std::sync::atomic::AtomicI64::new(0)).collect(),
            vars: proto.vars.iter().map(|v| Slot::new(v.init)).collect(),
            inflight: std::sync::atomic::AtomicUsize::new(0),
            alive: std::sync::atomic::AtomicUsize::new(proto.threads.len()),
            blocked: std::sync::atomic::AtomicUsize::new(0),
            progress: std::sync::atomic::AtomicU64::new(0),
            seq: std::sync::atomic::AtomicU64::new(0),
            exit_seq: std::sync::atomic::AtomicU64::new(u64::MAX),
            landed_seqs: std::sync::Mutex::new(vec![]),
            unlanded: std::sync::atomic::AtomicUsize::new(0),
            abort: std::sync::atomic::AtomicBool::new(false),
            ub: std::sync::Mutex::new(None),
            completion_runs: proto.barriers.iter().map(|_| std::sync::atomic::AtomicU64::new(0)).collect(),
            stale_reads: std::sync::Mutex::new(vec![]),
            diverged: std::sync::Mutex::new(vec![]),
            cta: uses_sync.then(|| ExecBarrier::new(proto.threads.len())),
            blocked_exec: std::sync::atomic::AtomicUsize::new(0),
            warps,
            copy_threads: std::sync::Mutex::new(vec![]),
            turn: Mutex::new((0, vec![])),
            turn_cv: Condvar::new(),
            barriers,
            proto,
            opts,
        })
    }

    fn fail(&self, u: Ub) {
        let mut g = self.ub.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(u);
        }
        drop(g);
        self.abort.store(true, SeqCst);
    }

    fn cancelled(&self) -> bool {
        self.abort.load(Relaxed)
    }

    fn directed(&self) -> Option<&[Action]> {
        match &self.opts.schedule {
            Schedule::Directed(a) => Some(a),
            Schedule::Free => None,
        }
    }

    /// A fresh bound for one operation that does not block a thread for long (the COMPLETING
    /// spin): cancellation and the hard deadline only.
    fn with_bound<R>(&self, f: impl FnOnce(&Bound) -> R) -> R {
        let cancelled = || self.cancelled();
        let deadline = if cfg!(loom) {
            None
        } else {
            Some(Instant::now() + self.opts.wait_timeout)
        };
        f(&Bound {
            deadline,
            cancelled: &cancelled,
        })
    }

    /// A bound for a blocking wait of a protocol thread. It also gives up once the CTA has been
    /// quiet for `Options::quiet`, following the model's timeout rule (gpu-conformance's
    /// outcome module): a thread blocked at a barrier wait times out (hangs) when every unfinished
    /// thread is blocked and no copy is in flight; a thread at `syncthreads`/`syncwarp` never
    /// times out (the hardware's execution barriers have no timeout), it gives up only when
    /// nothing is left that could release it: every unfinished thread is at an execution barrier.
    fn blocking<R>(&self, exec: bool, f: impl FnOnce(&Bound) -> Result<R, WaitError>) -> Result<R, WaitError> {
        if cfg!(loom) || self.directed().is_some() {
            return self.with_bound(f);
        }
        self.blocked.fetch_add(1, SeqCst);
        if exec {
            self.blocked_exec.fetch_add(1, SeqCst);
        }
        let last = std::cell::Cell::new((u64::MAX, Instant::now()));
        let hung = std::cell::Cell::new(false);
        let give_up = || {
            if self.cancelled() {
                return true;
            }
            let alive = self.alive.load(SeqCst);
            let quiet = if exec {
                self.blocked_exec.load(SeqCst) >= alive
            } else {
                self.blocked.load(SeqCst) >= alive
            } && self.inflight.load(SeqCst) == 0;
            let p = self.progress.load(SeqCst);
            let (seen, since) = last.get();
            if !quiet || p != seen {
                last.set((p, Instant::now()));
                return false;
            }
            if since.elapsed() >= self.opts.quiet {
                hung.set(true);
                return true;
            }
            false
        };
        let deadline = Some(Instant::now() + self.opts.wait_timeout);
        let r = f(&Bound {
            deadline,
            cancelled: &give_up,
        });
        self.blocked.fetch_sub(1, SeqCst);
        if exec {
            self.blocked_exec.fetch_sub(1, SeqCst);
        }
        match r {
            Err(WaitError::Cancelled) if hung.get() => Err(WaitError::TimedOut),
            r => r,
        }
    }

    fn stepped(&self) {
        self.progress.fetch_add(1, Relaxed);
    }

    fn note(&self, list: &std::sync::Mutex<Vec<String>>, s: String) {
        list.lock().unwrap_or_else(|p| p.into_inner()).push(s);
    }

    // ---- directed runs --------------------------------------------------------------------

    /// Wait for `Thread(t)`'s turn; false when the schedule ended (or was abandoned) first.
    fn take_turn(&self, t: usize) -> bool {
        let Some(actions) = self.directed() else { return true };
        let deadline = Instant::now() + self.opts.wait_timeout;
        let mut g = lock(&self.turn);
        loop {
            if g.0 >= actions.len() || self.cancelled() {
                return false;
            }
            if actions[g.0] == Action::Thread(t as u16) {
                return true;
            }
            if Instant::now() >= deadline {
                self.note(&self.diverged, format!("thread {t} never got its turn (stuck at action {})", g.0));
                return false;
            }
            g = cv_wait(&self.turn_cv, g);
        }
    }

    fn pass_turn(&self) {
        if self.directed().is_none() {
            return;
        }
        let mut g = lock(&self.turn);
        g.0 += 1;
        self.turn_cv.notify_all();
    }

    /// The director: performs the landings of a directed schedule on their turns.
    fn direct(&self) {
        let actions = self.directed().expect("directed").to_vec();
        let deadline = Instant::now() + self.opts.wait_timeout;
        loop {
            let g = lock(&self.turn);
            if g.0 >= actions.len() || self.cancelled() {
                break;
            }
            let (i, part) = match actions[g.0] {
                Action::Land(i) => (i as usize, false),
                Action::LandPart(i) => (i as usize, true),
                Action::Thread(_) => {
                    if Instant::now() >= deadline {
                        let at = g.0;
                        drop(g);
                        self.note(&self.diverged, format!("action {at} ({:?}) did not finish", actions[at]));
                        self.abort.store(true, SeqCst);
                        break;
                    }
                    drop(cv_wait(&self.turn_cv, g));
                    continue;
                }
            };
            let Some(c) = g.1.get(i).cloned() else {
                let at = g.0;
                drop(g);
                self.note(&self.diverged, format!("action {at}: no copy {i} in flight"));
                self.abort.store(true, SeqCst);
                break;
            };
            drop(g);
            let landed = self.land_some(&c, if part { Landing::Part } else { Landing::All });
            let mut g = lock(&self.turn);
            match landed {
                Ok(bytes) if bytes < c.remaining => g.1[i].remaining -= bytes,
                Ok(_) => {
                    g.1.remove(i);
                }
                Err(Stop::Ub(u)) => self.fail(u),
                Err(_) => {}
            }
            g.0 += 1;
            self.turn_cv.notify_all();
        }
        // Release threads still waiting for a turn.
        let mut g = lock(&self.turn);
        g.0 = g.0.max(actions.len());
        self.turn_cv.notify_all();
    }

    // ---- threads ---------------------------------------------------------------------------

    fn thread_main(&self, t: usize) -> ThreadOutcome {
        let me = self.proto.threads[t];
        let code = self.proto.code_of(t);
        let mut out = ThreadOutcome::default();
        let mut ctx = Ctx {
            me: Some(me),
            locals: vec![0; code.local_names.len()],
            completing: None,
            out: Some(&mut out),
            rng: self.opts.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (t as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9),
        };
        let r = self.exec(code, &mut ctx, true);
        drop(ctx);
        match r {
            Ok(()) => out.finished = true,
            Err(Stop::Ub(u)) => self.fail(u),
            Err(Stop::Hung) | Err(Stop::Cancelled) => {}
        }
        if let Some(cta) = &self.cta {
            cta.leave();
            self.warps[me.warp as usize].leave();
        }
        if self.alive.fetch_sub(1, SeqCst) == 1 {
            self.exit_seq.store(self.seq.fetch_add(1, SeqCst), SeqCst);
        }
        self.stepped();
        out
    }

    /// Interpret `code` from its first instruction. `turns`: a protocol thread (takes turns in
    /// directed runs, pauses at random in free runs); false for completion functions, which run
    /// inside the completing step.
    fn exec(&self, code: &Code, ctx: &mut Ctx, turns: bool) -> Result<(), Stop> {
        let mut pc = 0usize;
        let mut have_turn = false;
        let mut fuel: u64 = 10_000_000;
        let result = loop {
            let Some(instr) = code.instrs.get(pc) else { break Ok(()) };
            fuel -= 1;
            if fuel == 0 {
                break Err(Stop::Ub(Ub::new(
                    ViolationKind::CompletionMisuse,
                    "a completion function does not finish",
                )));
            }
            if turns && instr.visible {
                if have_turn {
                    self.pass_turn();
                    have_turn = false;
                }
                if self.directed().is_some() {
                    if !self.take_turn(ctx.me.map(|m| m.gtid as usize).unwrap_or(0)) {
                        break Err(Stop::Cancelled);
                    }
                    have_turn = true;
                } else {
                    self.pause(ctx);
                }
                if self.cancelled() {
                    break Err(Stop::Cancelled);
                }
                self.stepped();
            }
            match &instr.kind {
                InstrKind::SetLocal { slot, expr } => ctx.locals[*slot as usize] = self.eval(expr, ctx)?,
                InstrKind::SetVar { var, expr } => {
                    let v = self.eval(expr, ctx)?;
                    self.vars[*var as usize].set(v);
                }
                InstrKind::Jump { to } => {
                    pc = *to as usize;
                    continue;
                }
                InstrKind::Branch { cond, else_to } => {
                    if self.eval(cond, ctx)? == 0 {
                        pc = *else_to as usize;
                        continue;
                    }
                }
                InstrKind::Assert(e) => {
                    if self.eval(e, ctx)? == 0 {
                        break Err(Stop::Ub(Ub::new(ViolationKind::Assertion, "assertion failed")));
                    }
                }
                InstrKind::Return => break Ok(()),
                InstrKind::Work => spin_hint(),
                InstrKind::SyncWarpMask { .. }
                | InstrKind::Elect { .. }
                | InstrKind::NamedBar { .. }
                | InstrKind::TokenCheck { .. }
                | InstrKind::ClusterArrive { .. }
                | InstrKind::ClusterWait { .. } => break Err(Stop::Ub(Ub::new(ViolationKind::Assertion, "refused by `supported`"))),
                InstrKind::SyncWarp | InstrKind::SyncThreads => {
                    let Some(me) = ctx.me else {
                        break Err(Stop::Ub(Ub::new(
                            ViolationKind::CompletionMisuse,
                            "a completion function blocks at an execution barrier",
                        )));
                    };
                    let eb = if matches!(instr.kind, InstrKind::SyncThreads) {
                        self.cta.as_ref().expect("created when the protocol syncs")
                    } else {
                        &self.warps[me.warp as usize]
                    };
                    if let Err(e) = self.blocking(true, |b| eb.arrive_and_wait(b)) {
                        break Err(e.into());
                    }
                }
                InstrKind::Op { op, result } => {
                    let rec = recorded(code, instr);
                    match self.op(op, ctx, rec) {
                        Ok(v) => {
                            if let (Some(slot), Some(v)) = (result, v) {
                                ctx.locals[*slot as usize] = v;
                            }
                        }
                        Err(e) => break Err(e),
                    }
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
    fn pause(&self, ctx: &mut Ctx) {
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

    fn eval(&self, e: &IExpr, ctx: &Ctx) -> Result<i64, Ub> {
        let who = || ctx.me.expect("identity expressions are only lowered in role bodies");
        Ok(match e {
            IExpr::Const(v) => *v,
            IExpr::Local(i) => ctx.locals[*i as usize],
            IExpr::Var(v) => self.vars[*v as usize].get(),
            IExpr::Tid => who().tid as i64,
            IExpr::Gtid => who().gtid as i64,
            IExpr::Lane => who().lane as i64,
            IExpr::Warp => who().warp as i64,
            IExpr::Unary(op, a) => {
                apply_unary(*op, self.eval(a, ctx)?).ok_or_else(|| Ub::new(ViolationKind::Assertion, "arithmetic overflow"))?
            }
            IExpr::Binary(op, a, b) => {
                let (a, b) = (self.eval(a, ctx)?, self.eval(b, ctx)?);
                apply_binary(*op, a, b).map_err(|m| Ub::new(ViolationKind::Assertion, m))?
            }
        })
    }

    fn index(&self, r: &Ref, groups: &[phasecheck_model::program::ir::Group], ctx: &Ctx) -> Result<usize, Ub> {
        let g = &groups[r.group as usize];
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

    fn bar(&self, r: &Ref, ctx: &Ctx) -> Result<usize, Ub> {
        self.index(r, &self.proto.barrier_groups, ctx)
    }

    fn buf(&self, r: &Ref, ctx: &Ctx) -> Result<usize, Ub> {
        self.index(r, &self.proto.buffer_groups, ctx)
    }

    /// The completion step of barrier `b`: its completion function, if any, interpreted in the
    /// completing thread.
    fn completion(&self, b: usize) -> impl FnMut(u64) -> Result<(), Ub> + '_ {
        move |_phase| {
            let Some(ci) = self.proto.barriers[b].completion else {
                return Ok(());
            };
            let code = &self.proto.completions[ci as usize];
            let mut ctx = Ctx {
                me: None,
                locals: vec![0; code.local_names.len()],
                completing: Some(b),
                out: None,
                rng: 0,
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

    fn own_barrier(&self, ctx: &Ctx, b: usize, what: &str) -> Result<(), Ub> {
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

    fn op(&self, op: &IOp, ctx: &mut Ctx, rec: Option<Recorded>) -> Result<Option<i64>, Stop> {
        match op {
            IOp::Mbar(MbarOp::Arrive { bar, n, drop, expect_tx }) => {
                let b = self.bar(bar, ctx)?;
                self.own_barrier(ctx, b, "arrive")?;
                let n = self.eval(n, ctx)?;
                let tx = match expect_tx {
                    Some(e) => Some(self.eval(e, ctx)?),
                    None => None,
                };
                let mut done = self.completion(b);
                let token = self.with_bound(|bd| self.barriers[b].arrive(n, tx, *drop, &mut done, bd))?;
                if rec == Some(Recorded::Token) {
                    if let Some(o) = ctx.out.as_deref_mut() {
                        o.token_parities.push((token % 2) as u8);
                    }
                }
                Ok(Some(token as i64))
            }
            IOp::Mbar(MbarOp::Wait { bar, target, try_ }) => {
                let b = self.bar(bar, ctx)?;
                let v = self.eval(target.expr(), ctx)?;
                // A token is the phase it was returned for; the hardware compares its parity.
                let parity = match target {
                    WaitTarget::Token(_) | WaitTarget::Parity(_) => v.rem_euclid(2) as u64,
                };
                if *try_ {
                    let r = self.barriers[b].try_wait_parity(parity)?;
                    if rec == Some(Recorded::TryWait) {
                        if let Some(o) = ctx.out.as_deref_mut() {
                            o.try_waits.push(r);
                        }
                    }
                    Ok(Some(r as i64))
                } else {
                    if ctx.completing.is_some() {
                        return Err(Stop::Ub(Ub::new(ViolationKind::CompletionMisuse, "a completion function waits")));
                    }
                    self.blocking(false, |bd| self.barriers[b].wait_parity(parity, bd))?;
                    Ok(None)
                }
            }
            IOp::Mbar(MbarOp::ExpectTx { bar, bytes }) => {
                let b = self.bar(bar, ctx)?;
                self.own_barrier(ctx, b, "expect_tx")?;
                let bytes = self.eval(bytes, ctx)?;
                let mut done = self.completion(b);
                self.with_bound(|bd| self.barriers[b].expect_tx(bytes, &mut done, bd))?;
                Ok(None)
            }
            IOp::Mbar(MbarOp::CompleteTx { bar, bytes }) => {
                let b = self.bar(bar, ctx)?;
                self.own_barrier(ctx, b, "complete_tx")?;
                let bytes = self.eval(bytes, ctx)?;
                let mut done = self.completion(b);
                self.with_bound(|bd| self.barriers[b].complete_tx(bytes, &mut done, bd))?;
                Ok(None)
            }
            IOp::Copy(CopyOp::Copy { buf, bar, bytes, version }) => {
                let d = self.buf(buf, ctx)?;
                let b = self.bar(bar, ctx)?;
                let bytes = match bytes {
                    Some(e) => self.eval(e, ctx)?,
                    None => self.proto.buffers[d].bytes,
                };
                let version = match version {
                    Some(e) => self.eval(e, ctx)?,
                    None => self.writes[d].load(Relaxed),
                };
                self.barriers[b].live("copy_async")?;
                if !(0..=MAX_COUNT).contains(&bytes) {
                    return Err(Stop::Ub(Ub::new(
                        ViolationKind::TxRange,
                        format!("the byte count of the copy into {} is {bytes}", self.proto.buffers[d].name),
                    )));
                }
                self.writes[d].fetch_add(1, Relaxed);
                self.inflight.fetch_add(1, SeqCst);
                let c = Copy {
                    buf: d,
                    bar: b,
                    remaining: bytes,
                    version,
                };
                if self.directed().is_some() {
                    lock(&self.turn).1.push(c);
                } else {
                    self.spawn_copy(c, ctx);
                }
                Ok(None)
            }
            IOp::Mem(MemOp::Read { buf, expect }) => {
                let d = self.buf(buf, ctx)?;
                let want = match expect {
                    Some(e) => Some(self.eval(e, ctx)?),
                    None => None,
                };
                let got = self.buffers[d].get();
                if let Some(w) = want.filter(|w| *w != got) {
                    self.note(
                        &self.stale_reads,
                        format!("a read of {} saw version {got}, the protocol means {w}", self.proto.buffers[d].name),
                    );
                }
                if let Some(o) = ctx.out.as_deref_mut() {
                    if rec == Some(Recorded::Read) {
                        o.reads.push(got);
                    }
                }
                Ok(Some(got))
            }
            IOp::Mem(MemOp::Write { buf, version }) => {
                let d = self.buf(buf, ctx)?;
                let v = self.eval(version, ctx)?;
                self.buffers[d].set(v);
                self.writes[d].fetch_add(1, Relaxed);
                Ok(None)
            }
            IOp::Mbar(MbarOp::Init { bar, count }) => {
                let b = self.bar(bar, ctx)?;
                let c = match count {
                    Some(e) => self.eval(e, ctx)?,
                    None => self.proto.barriers[b].count,
                };
                self.barriers[b].init(c)?;
                Ok(None)
            }
            IOp::Mbar(MbarOp::Inval { bar }) => {
                let b = self.bar(bar, ctx)?;
                self.barriers[b].inval()?;
                Ok(None)
            }
            IOp::Warp(WarpOp::Commit { .. }) => unreachable!("rejected by `supported`"),
            // The async proxy (TMA stores, wgmma): asynchronous reads of shared memory and proxy fences
            // change nothing the runtime observes (it judges no races); a negative group count is
            // the model's assertion.
            IOp::Proxy(ProxyOp::WaitGroup { n, .. }) | IOp::Proxy(ProxyOp::WgmmaWait { n }) => {
                if self.eval(n, ctx)? < 0 {
                    return Err(Stop::Ub(Ub::new(ViolationKind::Assertion, "a negative group count")));
                }
                Ok(None)
            }
            IOp::Proxy(ProxyOp::StoreAsync { buf }) => {
                self.buf(buf, ctx)?;
                Ok(None)
            }
            IOp::Proxy(ProxyOp::Wgmma { bufs }) => {
                for b in bufs {
                    self.buf(b, ctx)?;
                }
                Ok(None)
            }
            IOp::Proxy(ProxyOp::CommitGroup) | IOp::Proxy(ProxyOp::FenceProxyAsync) | IOp::Proxy(ProxyOp::FenceMbarrierInit) => Ok(None),
            // Refused before the run by `supported` (see `implemented`).
            _ => Err(Stop::Ub(Ub::new(ViolationKind::Assertion, "refused by `supported`"))),
        }
    }

    fn spawn_copy(&self, c: Copy, ctx: &mut Ctx) {
        let delay = if cfg!(loom) || self.opts.max_delay.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_nanos(next_rand(&mut ctx.rng) % (self.opts.max_delay.as_nanos() as u64 + 1))
        };
        // The helper needs the world for as long as it runs; the world outlives every thread
        // because `run` joins them all before returning, but loom and std want 'static closures,
        // so it goes through a raw pointer wrapped to be sent.
        let me = SendPtr(self as *const World);
        let h = thread::spawn(move || {
            let me = me;
            // SAFETY: `run` joins every copy thread (the `copy_threads` list) before the World is
            // dropped, so the pointer stays valid for this thread's whole life.
            let w: &World = unsafe { &*me.0 };
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            w.land_copy(c);
        });
        self.copy_threads.lock().unwrap_or_else(|p| p.into_inner()).push(h);
    }

    /// A free-running copy lands: the data first, then its bytes on the barrier (a release).
    fn land_copy(&self, mut c: Copy) {
        // `loop` rather than `while`: a zero-byte copy still lands (its data, a complete_tx(0)).
        loop {
            let seq = self.seq.fetch_add(1, SeqCst);
            match self.land_some(&c, Landing::Auto) {
                Ok(n) if n < c.remaining => c.remaining -= n,
                Ok(_) => {
                    self.landed_seqs.lock().unwrap_or_else(|p| p.into_inner()).push(seq);
                    return;
                }
                Err(Stop::Ub(u)) => {
                    self.unlanded.fetch_add(1, SeqCst);
                    self.fail(u);
                    return;
                }
                Err(_) => {
                    self.unlanded.fetch_add(1, SeqCst);
                    return;
                }
            }
        }
    }

    fn land_some(&self, c: &Copy, how: Landing) -> Result<i64, Stop> {
        self.buffers[c.buf].set(c.version);
        let mut done = self.completion(c.bar);
        let bar = &self.barriers[c.bar];
        let n = self.with_bound(|bd| match how {
            Landing::Auto => bar.land(c.remaining, false, &mut done, bd),
            Landing::All => bar.complete_tx(c.remaining, &mut done, bd).map(|()| c.remaining),
            Landing::Part => bar.land(c.remaining, true, &mut done, bd),
        })?;
        if n == c.remaining {
            self.inflight.fetch_sub(1, SeqCst);
        }
        self.stepped();
        Ok(n)
    }
}

#[derive(Clone, Copy)]
enum Landing {
    Auto,
    All,
    Part,
}

struct SendPtr(*const World);
// SAFETY: World is Sync (atomics, mutexes, slots); the pointer is only dereferenced while the
// World is alive (see `spawn_copy`).
unsafe impl Send for SendPtr {}

fn next_rand(s: &mut u64) -> u64 {
    // xorshift64*: enough to vary schedules; not for anything else.
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_f491_4f6c_dd1d)
}
