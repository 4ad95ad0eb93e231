//! `cuda::barrier` / PTX `mbarrier` on atomics: the reference implementation the model is
//! cross-examined against.
//!
//! # The state word
//! As in the hardware's 64-bit mbarrier object and libcu++'s software barrier, the state a phase
//! change must see consistently lives in ONE atomic word, so that an arrival, its tx update and
//! the decision "this arrival completes the phase" are a single read-modify-write:
//!
//! | bits    | field                                                               |
//! |---------|---------------------------------------------------------------------|
//! | 0..21   | pending arrivals of the current phase (0 ..= 2^20-1)                |
//! | 21..42  | tx-count, biased by 2^20 (so the signed range ±(2^20-1) fits)       |
//! | 42..63  | phase counter modulo 2^21 (its low bit is the parity waits test)    |
//! | 63      | COMPLETING: the phase's last arrival is running the completion step |
//!
//! The expected count of later phases (lowered by `arrive_and_drop`) is a separate atomic: only
//! the completing thread reads it, after it has acquired every arrival of the phase.
//!
//! # Completion, and why there is a COMPLETING state
//! SEMANTICS.md: the phase completes atomically when pending and tx both reach zero; the completion
//! function runs first, in the completing thread, and only then does the phase advance and
//! waiters go. The arrival that takes the counts to zero therefore does not advance the phase: it
//! sets COMPLETING, runs the completion step, and then publishes the next phase with a release
//! store. While COMPLETING is set no other operation may change the word (in the model nothing can
//! happen between the last arrival and the phase change), so they spin until it clears.
//!
//! # Orderings
//! * An arrival (and `complete_tx`, and a landing copy) is a release: the writes its thread made
//!   before it must be visible to whoever waits on the phase. The RMWs on the word form a release
//!   sequence, so the completing arrival's acquire sees every earlier arrival of the phase.
//! * The completing RMW is also an acquire: the completion function reads what the arrivals
//!   published (SEMANTICS.md: it runs "having seen every arrival").
//! * The store that advances the phase is a release, and waits load with acquire: a successful
//!   wait sees the arrivals' writes (transitively through the completing thread) and the
//!   completion function's.
//! * `expect_tx` is an acquire only: it publishes nothing (PTX `expect_tx` has no release
//!   semantics); when it completes a phase (tx back to zero from below) it acquires the arrivals
//!   like any completing step.
//!
//! # Blocking waits
//! A wait first tests the word (acquire). If the phase is not complete it sleeps on a condition
//! variable; the thread that advances the phase takes the same mutex after its store and
//! notifies. Because the waiter re-tests the word while holding the mutex, a notification cannot
//! fall between its test and its sleep: loom checks that no wake-up is lost (a lost one is a
//! deadlock it reports). Every wait outside loom is bounded by a deadline and can be cancelled.
//!
//! # Undefined behaviour
//! Detected before the word changes and returned as an [`Ub`] carrying the model's kind name:
//! over-arrival, count-range (init count, arrival count, drop to zero), tx-range (each expect and
//! the running tx-count), uninitialized (use before init, after inval, re-init of a live barrier).
//!
//! # Deliberate faults
//! [`Fault`] switches in one of two known-wrong implementations, so that a test can show that the
//! loom suite notices when the barrier is wrong.

use crate::sync::{lock, spin_hint, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Condvar, Mutex};
use phasecheck_model::program::ir::MAX_COUNT;
use phasecheck_model::ViolationKind;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::time::Instant;

const PENDING_MASK: u64 = (1 << 21) - 1;
const TX_SHIFT: u32 = 21;
const TX_MASK: u64 = (1 << 21) - 1;
const TX_BIAS: i64 = 1 << 20;
const PHASE_SHIFT: u32 = 42;
const PHASE_MASK: u64 = (1 << 21) - 1;
const COMPLETING: u64 = 1 << 63;

const UNINIT: u8 = 0;
const LIVE: u8 = 1;
const INVALID: u8 = 2;

/// A known-wrong variant of the barrier, for tests that show the loom suite can fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fault {
    /// The correct barrier.
    #[default]
    None,
    /// The phase advances (and waiters are woken) before the completion function runs.
    FlipBeforeCompletion,
    /// Arrivals that do not complete the phase are relaxed instead of release: what the arriving
    /// thread wrote before arriving is not published to the waiters.
    RelaxedArrive,
    /// Operations do not wait out the completion step: an arrival may change the word while the
    /// phase's last arrival is still running its completion step.
    NoCompletingGuard,
    /// The store that advances the phase is relaxed instead of release.
    RelaxedAdvance,
    /// Waits and `try_wait` test the phase with a relaxed load instead of an acquire.
    RelaxedWait,
    /// `try_wait` never reports a completed phase.
    TryWaitNeverSucceeds,
    /// The phase change notifies sleeping waiters without taking their mutex (a wake-up can fall
    /// between a waiter's test and its sleep).
    LostWakeup,
    /// `arrive_and_drop` arrives but does not lower the count of later phases.
    DropIgnored,
    /// The completion step advances the phase without running the completion function.
    CompletionSkipped,
    /// A warp-batched `commit` makes one arrival per converged lane instead of one per group.
    CommitPerLane,
    /// A warp's arrival at a named barrier counts one thread instead of `warp_size`.
    NamedCountsOneThread,
    /// A `cp_async_arrive` fires its arrive-on at once instead of after the thread's copies land.
    ArriveOnBeforeCopies,
    /// `wait_group` returns without waiting for the async proxy's read: the proxy reads later.
    ProxyRetiresEarly,
}

impl Fault {
    /// Every planted bug (every variant but `None`), for the mutation table.
    pub const PLANTED: [Fault; 13] = [
        Fault::FlipBeforeCompletion,
        Fault::RelaxedArrive,
        Fault::NoCompletingGuard,
        Fault::RelaxedAdvance,
        Fault::RelaxedWait,
        Fault::TryWaitNeverSucceeds,
        Fault::LostWakeup,
        Fault::DropIgnored,
        Fault::CompletionSkipped,
        Fault::CommitPerLane,
        Fault::NamedCountsOneThread,
        Fault::ArriveOnBeforeCopies,
        Fault::ProxyRetiresEarly,
    ];
}

/// Undefined behaviour detected by the runtime, named with the model's violation kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ub {
    pub kind: ViolationKind,
    pub message: String,
}

impl Ub {
    pub fn new(kind: ViolationKind, message: impl Into<String>) -> Ub {
        Ub {
            kind,
            message: message.into(),
        }
    }
}

/// Why a blocking wait returned without its phase completing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitError {
    Ub(Ub),
    /// The deadline passed: the thread hangs (the GPU's bounded wait timing out).
    TimedOut,
    /// The run was cancelled (another thread hit undefined behaviour).
    Cancelled,
}

impl From<Ub> for WaitError {
    fn from(u: Ub) -> WaitError {
        WaitError::Ub(u)
    }
}

/// Bounds a blocking operation: a deadline (none under loom, where a wait that can never return
/// is a deadlock loom reports) and a cancellation test.
pub struct Bound<'a> {
    pub deadline: Option<Instant>,
    pub cancelled: &'a dyn Fn() -> bool,
}

impl Bound<'_> {
    fn check(&self) -> Result<(), WaitError> {
        if (self.cancelled)() {
            return Err(WaitError::Cancelled);
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(WaitError::TimedOut);
        }
        Ok(())
    }
}

/// A bound that never expires and is never cancelled (loom models, direct use in tests).
pub fn unbounded() -> Bound<'static> {
    Bound {
        deadline: None,
        cancelled: &|| false,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fields {
    pending: i64,
    tx: i64,
    phase: u64,
    completing: bool,
}

impl Fields {
    fn unpack(w: u64) -> Fields {
        Fields {
            pending: (w & PENDING_MASK) as i64,
            tx: ((w >> TX_SHIFT) & TX_MASK) as i64 - TX_BIAS,
            phase: (w >> PHASE_SHIFT) & PHASE_MASK,
            completing: w & COMPLETING != 0,
        }
    }

    fn pack(self) -> u64 {
        debug_assert!((0..=MAX_COUNT).contains(&self.pending));
        debug_assert!((-MAX_COUNT..=MAX_COUNT).contains(&self.tx));
        (self.pending as u64)
            | (((self.tx + TX_BIAS) as u64) << TX_SHIFT)
            | ((self.phase & PHASE_MASK) << PHASE_SHIFT)
            | if self.completing { COMPLETING } else { 0 }
    }
}

/// What the barrier itself did, kept outside the modelled memory (a plain std mutex loom does not
/// see) so that tests can check the laws of SEMANTICS.md on every execution loom explores.
#[derive(Clone, Debug, Default)]
pub struct Audit {
    /// Per phase: the pending count it started with (the expected count then).
    pub started_with: Vec<i64>,
    /// Per phase: arrivals counted (the `n` of each arrive on it).
    pub arrivals: Vec<i64>,
    /// Per phase: pending arrivals added during it (`cp_async_arrive` without `.noinc`).
    pub raised: Vec<i64>,
    /// Per phase: how many times the completion step ran for it.
    pub completion_runs: Vec<u32>,
    /// Phases completed so far (logged before the phase change is published).
    pub completed: u64,
    /// `(phase arrived on, n)` of every `arrive_and_drop`.
    pub drops: Vec<(u64, i64)>,
    /// Per completed phase: completion steps run before the phase advanced.
    pub runs_before_advance: Vec<u32>,
    /// Laws broken as they happened (a wait that returned early), in words.
    pub broken: Vec<String>,
}

impl Audit {
    /// Every law of SEMANTICS.md the log shows broken, once the run is over (arrivals are logged
    /// just after their atomic step, so only a finished run's log is complete):
    /// * each completed phase had exactly the arrivals it started with, and its completion step
    ///   ran exactly once, before the phase advanced;
    /// * a drop lowers later phases only: phase q starts with the initial count minus the drops
    ///   made on phases before q;
    /// * no wait returned before its phase completed (logged when it returned).
    pub fn laws(&self, name: &str) -> Vec<String> {
        let mut out = self.broken.clone();
        for p in 0..self.completed as usize {
            let started = self.started_with.get(p).copied().unwrap_or(-1);
            let arrived = self.arrivals.get(p).copied().unwrap_or(0);
            let started = started + self.raised.get(p).copied().unwrap_or(0);
            if arrived != started {
                out.push(format!("{name} phase {p} completed with {arrived} arrival(s), expected {started}"));
            }
            let runs = self.runs_before_advance.get(p).copied().unwrap_or(0);
            if runs != 1 {
                out.push(format!("{name} phase {p} advanced after {runs} completion step(s), not 1"));
            }
            let total = self.completion_runs.get(p).copied().unwrap_or(0);
            if total != 1 {
                out.push(format!("{name} phase {p} ran its completion step {total} time(s)"));
            }
        }
        for (q, started) in self.started_with.iter().enumerate() {
            let initial = self.started_with.first().copied().unwrap_or(0);
            let dropped: i64 = self.drops.iter().filter(|(p, _)| (*p as usize) < q).map(|(_, n)| n).sum();
            if *started != initial - dropped {
                out.push(format!(
                    "{name} phase {q} started with {started} expected arrivals; the drops before it leave {}",
                    initial - dropped
                ));
            }
        }
        for (p, arrived) in self.arrivals.iter().enumerate() {
            if p > self.completed as usize && *arrived != 0 {
                out.push(format!("{name}: {arrived} arrival(s) on phase {p}, which never began"));
            }
        }
        out
    }

    fn phase_mut<T: Default + Clone>(v: &mut Vec<T>, phase: u64) -> &mut T {
        let i = phase as usize;
        if v.len() <= i {
            v.resize(i + 1, T::default());
        }
        &mut v[i]
    }
}

/// One barrier.
pub struct Barrier {
    name: String,
    word: AtomicU64,
    expected: AtomicU32,
    life: AtomicU8,
    /// Set when a completion step failed (undefined behaviour): the COMPLETING state will never
    /// clear, so operations spinning on it give up.
    abandoned: AtomicBool,
    /// Sleeping waiters; the counter is the number of phase changes announced (it only matters
    /// that the notifier takes the mutex).
    sleep: Mutex<u64>,
    wake: Condvar,
    fault: Fault,
    audit: std::sync::Mutex<Audit>,
}

impl std::fmt::Debug for Barrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Barrier({})", self.name)
    }
}

/// The completion step of a phase: runs the barrier's completion function (if any) in the
/// completing thread. Gets the phase number; an `Err` is undefined behaviour inside it.
pub type OnComplete<'a> = &'a mut dyn FnMut(u64) -> Result<(), Ub>;

impl Barrier {
    /// A barrier initialised with `count` (the declaration's implicit init), or not initialised
    /// (`None`: `manual_init`).
    pub fn new(name: impl Into<String>, count: Option<i64>, fault: Fault) -> Result<Barrier, Ub> {
        let b = Barrier {
            name: name.into(),
            word: AtomicU64::new(0),
            expected: AtomicU32::new(0),
            life: AtomicU8::new(UNINIT),
            abandoned: AtomicBool::new(false),
            sleep: Mutex::new(0),
            wake: Condvar::new(),
            fault,
            audit: std::sync::Mutex::new(Audit::default()),
        };
        if let Some(c) = count {
            b.init(c)?;
        }
        Ok(b)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A copy of the audit log.
    pub fn audit(&self) -> Audit {
        self.audit.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn log(&self, f: impl FnOnce(&mut Audit)) {
        f(&mut self.audit.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// `init(count)`: phase 0, pending = expected = count, tx 0. Initialising a live barrier is
    /// undefined behaviour (uninitialized, as the model names it).
    pub fn init(&self, count: i64) -> Result<(), Ub> {
        if self.life.load(Acquire) == LIVE {
            return Err(Ub::new(
                ViolationKind::Uninitialized,
                format!("init of {}, which is live", self.name),
            ));
        }
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(Ub::new(
                ViolationKind::CountRange,
                format!("init count of {} is {count}, outside 1..={MAX_COUNT}", self.name),
            ));
        }
        self.expected.store(count as u32, Relaxed);
        let f = Fields {
            pending: count,
            tx: 0,
            phase: 0,
            completing: false,
        };
        self.word.store(f.pack(), Relaxed);
        self.log(|a| {
            *a = Audit::default();
            a.started_with.push(count);
        });
        // Release: whoever sees LIVE sees the word and the expected count above.
        self.life.store(LIVE, Release);
        Ok(())
    }

    /// `inval()`: ends the barrier's life.
    pub fn inval(&self) -> Result<(), Ub> {
        self.live("inval")?;
        self.life.store(INVALID, Release);
        Ok(())
    }

    /// Undefined behaviour (uninitialized) unless the barrier is live: before `what` touches it.
    pub fn live(&self, what: &str) -> Result<(), Ub> {
        match self.life.load(Acquire) {
            LIVE => Ok(()),
            UNINIT => Err(Ub::new(
                ViolationKind::Uninitialized,
                format!("{what} on {} before it was initialised", self.name),
            )),
            _ => Err(Ub::new(
                ViolationKind::Uninitialized,
                format!("{what} on {} after inval", self.name),
            )),
        }
    }

    /// The current phase counter (modulo 2^21) as an acquire load. For tests and reports.
    pub fn phase(&self) -> u64 {
        Fields::unpack(self.word.load(Acquire)).phase
    }

    /// One read-modify-write of the word. `f` computes the new fields from the current ones (or
    /// refuses with undefined behaviour); it never sees the COMPLETING state, which it waits out.
    /// Returns the fields before and after.
    fn update(&self, publish: bool, bound: &Bound, mut f: impl FnMut(Fields) -> Result<Fields, Ub>) -> Result<(Fields, Fields), WaitError> {
        let success = if publish { AcqRel } else { Acquire };
        let mut cur = self.word.load(Relaxed);
        loop {
            let old = Fields::unpack(cur);
            if old.completing && self.fault != Fault::NoCompletingGuard {
                if self.abandoned.load(Relaxed) {
                    return Err(WaitError::Ub(Ub::new(
                        ViolationKind::CompletionMisuse,
                        format!("{}'s completion step did not finish", self.name),
                    )));
                }
                bound.check()?;
                spin_hint();
                cur = self.word.load(Relaxed);
                continue;
            }
            let new = f(old)?;
            match self.word.compare_exchange(cur, new.pack(), success, Relaxed) {
                Ok(_) => return Ok((old, new)),
                Err(now) => cur = now,
            }
        }
    }

    /// Moves the counts: `-arrivals` on pending, `tx_delta` on tx; sets COMPLETING when both reach
    /// zero. Checks the ranges first.
    fn counts(&self, old: Fields, arrivals: i64, tx_delta: i64, what: &str) -> Result<Fields, Ub> {
        let tx = old.tx + tx_delta;
        if !(-MAX_COUNT..=MAX_COUNT).contains(&tx) {
            return Err(Ub::new(
                ViolationKind::TxRange,
                format!("{what} takes the tx-count of {} to {tx}, outside ±{MAX_COUNT}", self.name),
            ));
        }
        let pending = old.pending - arrivals;
        if pending < 0 {
            return Err(Ub::new(
                ViolationKind::OverArrival,
                format!(
                    "{what}: {arrivals} arrival(s) on phase {} of {}, which has only {} pending",
                    old.phase, self.name, old.pending
                ),
            ));
        }
        Ok(Fields {
            pending,
            tx,
            phase: old.phase,
            completing: pending == 0 && tx == 0,
        })
    }

    /// `arrive(n)`, `arrive_expect_tx(bytes)` (the tx is added in the same atomic step, as PTX's
    /// single instruction does) and `arrive_and_drop(n)`. Returns the token: the phase arrived on.
    pub fn arrive(&self, n: i64, expect_tx: Option<i64>, drop: bool, on_complete: OnComplete, bound: &Bound) -> Result<u64, WaitError> {
        let what = if drop { "arrive_and_drop" } else { "arrive" };
        self.live(what)?;
        if !(1..=MAX_COUNT).contains(&n) {
            return Err(Ub::new(
                ViolationKind::CountRange,
                format!("the arrival count on {} is {n}, outside 1..={MAX_COUNT}", self.name),
            )
            .into());
        }
        if let Some(b) = expect_tx {
            check_bytes(b, "expect_tx", &self.name)?;
        }
        if drop {
            // Lower the count of every LATER phase before arriving: our arrival is what the
            // current phase waits for, so it cannot complete (and read `expected`) before this
            // store is ordered before it by our release RMW below.
            let e = self.expected.load(Relaxed) as i64 - n;
            if e < 1 {
                return Err(Ub::new(
                    ViolationKind::CountRange,
                    format!("arrive_and_drop takes the expected count of {} to {e}", self.name),
                )
                .into());
            }
            if self.fault != Fault::DropIgnored {
                self.expected.fetch_sub(n as u32, Relaxed);
            }
        }
        let publish = self.fault != Fault::RelaxedArrive;
        // The faulty variant does not publish; the phase change still releases what the
        // completing thread saw, so only the other arrivals' writes go missing.
        let updated = self.update(publish, bound, |old| self.counts(old, n, expect_tx.unwrap_or(0), what));
        let (old, new) = match updated {
            Ok(x) => x,
            Err(e) => {
                if drop {
                    // The arrival was refused (undefined behaviour, or the run was cancelled):
                    // take the drop back so the barrier stays as it was.
                    self.expected.fetch_add(n as u32, Relaxed);
                }
                return Err(e);
            }
        };
        self.log(|a| {
            *Audit::phase_mut(&mut a.arrivals, old.phase) += n;
            if drop {
                a.drops.push((old.phase, n));
            }
        });
        if new.completing {
            self.complete(new, on_complete)?;
        }
        Ok(old.phase)
    }

    /// `cp_async_arrive` without `.noinc`: the pending count of the current phase goes up by one
    /// now, for the arrive-on that fires once the thread's cp.async copies have landed. Never
    /// completes a phase; publishes nothing.
    pub fn raise_pending(&self, bound: &Bound) -> Result<(), WaitError> {
        self.live("cp_async_arrive")?;
        let (old, _) = self.update(false, bound, |old| {
            if old.pending + 1 > MAX_COUNT {
                return Err(Ub::new(
                    ViolationKind::CountRange,
                    format!("cp_async_arrive raises the pending count of {} past {MAX_COUNT}", self.name),
                ));
            }
            Ok(Fields {
                pending: old.pending + 1,
                ..old
            })
        })?;
        self.log(|a| *Audit::phase_mut(&mut a.raised, old.phase) += 1);
        Ok(())
    }

    /// `expect_tx(bytes)`: raises the tx-count of the current phase. It completes the phase when
    /// it brings a negative tx-count (copies that landed before their expect, libcu++'s
    /// memcpy_async order) back to zero with every arrival in. It publishes nothing of its own
    /// (acquire only); the phase change it may make is still a release.
    pub fn expect_tx(&self, bytes: i64, on_complete: OnComplete, bound: &Bound) -> Result<(), WaitError> {
        self.live("expect_tx")?;
        check_bytes(bytes, "expect_tx", &self.name)?;
        let (_, new) = self.update(false, bound, |old| self.counts(old, 0, bytes, "expect_tx"))?;
        if new.completing {
            self.complete(new, on_complete)?;
        }
        Ok(())
    }

    /// `complete_tx(bytes)`: lowers the tx-count (a release, like an arrival); may complete the
    /// phase.
    pub fn complete_tx(&self, bytes: i64, on_complete: OnComplete, bound: &Bound) -> Result<(), WaitError> {
        self.live("complete_tx")?;
        check_bytes(bytes, "complete_tx", &self.name)?;
        let (_, new) = self.update(true, bound, |old| self.counts(old, 0, -bytes, "complete_tx"))?;
        if new.completing {
            self.complete(new, on_complete)?;
        }
        Ok(())
    }

    /// An async copy with `remaining` bytes lands (some of them): the bytes complete on the
    /// barrier. When all arrivals are in and the tx-count is positive but smaller than what is
    /// left (an `expect_tx` that under-counts), only the bytes that bring it to zero land now,
    /// completing the phase mid-copy, as the hardware's byte-granular complete_tx does. Returns
    /// the bytes landed. `part` (directed runs replaying the model's `LandPart`): land just those
    /// bytes whenever the tx-count is positive and smaller than what is left, arrivals in or not,
    /// and otherwise all but the last chunk (`land_part_bytes`).
    pub fn land(&self, remaining: i64, part: bool, on_complete: OnComplete, bound: &Bound) -> Result<i64, WaitError> {
        self.live("the landing copy's complete_tx")?;
        let mut landed = 0;
        let (_, new) = self.update(true, bound, |old| {
            landed = if part && old.tx > 0 {
                phasecheck_model::rt::land_part_bytes(old.tx, remaining)
            } else if old.pending == 0 && old.tx > 0 && old.tx < remaining {
                old.tx
            } else {
                remaining
            };
            self.counts(old, 0, -landed, "a landing copy")
        })?;
        if new.completing {
            self.complete(new, on_complete)?;
        }
        Ok(landed)
    }

    /// The completion step: we hold the phase in COMPLETING, having acquired every arrival.
    fn complete(&self, at: Fields, on_complete: OnComplete) -> Result<(), Ub> {
        if self.fault == Fault::FlipBeforeCompletion {
            self.advance(at);
            return on_complete(at.phase).map(|()| self.log(|a| *Audit::phase_mut(&mut a.completion_runs, at.phase) += 1));
        }
        let ran = if self.fault == Fault::CompletionSkipped {
            Ok(())
        } else {
            on_complete(at.phase)
        };
        if let Err(u) = ran {
            self.abandoned.store(true, Relaxed);
            return Err(u);
        }
        self.log(|a| *Audit::phase_mut(&mut a.completion_runs, at.phase) += 1);
        self.advance(at);
        Ok(())
    }

    /// Publish the next phase and wake the sleepers.
    fn advance(&self, at: Fields) {
        // Acquired with the phase's arrivals (the completing RMW): every drop of this phase is
        // visible here.
        let expected = self.expected.load(Relaxed) as i64;
        self.log(|a| {
            let runs = a.completion_runs.get(at.phase as usize).copied().unwrap_or(0);
            *Audit::phase_mut(&mut a.runs_before_advance, at.phase) = runs;
            a.completed += 1;
            *Audit::phase_mut(&mut a.started_with, at.phase + 1) = expected;
        });
        let next = Fields {
            pending: expected,
            tx: 0,
            phase: at.phase + 1,
            completing: false,
        };
        let order = if self.fault == Fault::RelaxedAdvance { Relaxed } else { Release };
        self.word.store(next.pack(), order);
        if self.fault == Fault::LostWakeup {
            self.wake.notify_all();
            return;
        }
        let mut g = lock(&self.sleep);
        *g += 1;
        self.wake.notify_all();
        drop(g);
    }

    /// Is the phase of parity `p` that a wait names complete? (The hardware test: the current
    /// phase's parity differs from `p`.) An acquire; returns the phase seen when complete.
    fn test(&self, p: u64) -> Option<u64> {
        let order = if self.fault == Fault::RelaxedWait { Relaxed } else { Acquire };
        let f = Fields::unpack(self.word.load(order));
        (f.phase % 2 != p % 2).then_some(f.phase)
    }

    /// `try_wait_parity(p)` / `try_wait(token)`: never blocks.
    pub fn try_wait_parity(&self, p: u64) -> Result<bool, Ub> {
        self.live("try_wait")?;
        if self.fault == Fault::TryWaitNeverSucceeds {
            return Ok(false);
        }
        Ok(self.test(p).inspect(|&seen| self.check_returned(p, seen)).is_some())
    }

    /// `wait_parity(p)` / `wait(token)`: blocks until the phase of parity `p` has completed.
    pub fn wait_parity(&self, p: u64, bound: &Bound) -> Result<(), WaitError> {
        self.live("wait")?;
        let seen = loop {
            if let Some(seen) = self.test(p) {
                break seen;
            }
            let mut g = lock(&self.sleep);
            // Re-test under the mutex: the phase change stores before taking it, so either we
            // see the new phase here or the notifier finds us asleep.
            if let Some(seen) = self.test(p) {
                break seen;
            }
            bound.check()?;
            #[cfg(loom)]
            {
                g = self.wake.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            #[cfg(not(loom))]
            {
                // Sleep in short slices so that a cancellation is noticed.
                let slice = std::time::Duration::from_millis(2);
                g = self.wake.wait_timeout(g, slice).map(|r| r.0).unwrap_or_else(|e| e.into_inner().0);
            }
            drop(g);
        };
        self.check_returned(p, seen);
        Ok(())
    }

    /// Law: a wait returns only after its phase completed. The wait saw phase `seen` current, so
    /// it named phase `seen - 1` (or the phase "before" 0 on a fresh barrier): that one must be in
    /// the log of completed phases.
    fn check_returned(&self, p: u64, seen: u64) {
        self.log(|a| {
            if seen > a.completed {
                a.broken.push(format!(
                    "a wait on parity {p} of {} returned on seeing phase {seen} with only {} phase(s) completed",
                    self.name, a.completed
                ));
            }
        });
    }
}

fn check_bytes(b: i64, what: &str, name: &str) -> Result<(), Ub> {
    if !(0..=MAX_COUNT).contains(&b) {
        return Err(Ub::new(
            ViolationKind::TxRange,
            format!("{what} of {b} bytes on {name}, outside 0..={MAX_COUNT}"),
        ));
    }
    Ok(())
}
