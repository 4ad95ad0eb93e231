//! The model side of GPU outcome comparison: which outcomes a spec allows, and which outcome a
//! trace forces.
//!
//! An [`Outcome`] is what one GPU run of a generated kernel records: per thread (global index
//! order) whether it finished or hung, the versions its `read`s returned, the results of its
//! `try_wait`s and the parities of the tokens its `arrive`s returned; per flattened barrier the
//! number of completion-function runs; and whether the launch faulted. Which statements are
//! recorded is decided by [`recorded`], which the code generator should use too so that both sides
//! count the same things.
//!
//! [`allowed_outcomes`] enumerates every execution of the model (every interleaving of thread steps
//! and copy landings) and collects their outcomes in an [`AllowedSet`]. The model describes a
//! sequentially consistent, perfectly synchronised machine; the GPU is not one, so three rules widen
//! what the model says into what the hardware may legitimately show:
//!
//! 1. **Undefined behaviour** (a step after which the model stops the execution: over-arrival,
//!    count-range, tx-range, uninitialized, lifetime, a failed `assert`/out-of-range index, a
//!    completion function that misbehaves; and every thread exiting with a copy in flight): the
//!    hardware may do anything from there on. The set records an [`Undefined`] pattern whose
//!    `prefix` holds the observations made *before* the undefined step; it admits every outcome
//!    whose per-thread vectors extend that prefix (anything may follow, `finished` is free), whose
//!    completion counts are at least the prefix's, with or without `fault`. A faulted run whose
//!    per-thread data could not be read back (`fault: true`, `threads` empty) is admitted by any
//!    pattern. An observed fault is never admitted unless some execution reaches undefined
//!    behaviour.
//! 2. **Data races on buffers**: once a step of the execution is flagged `data-race` (or
//!    `completion-misuse`, the completion function's flavour of a race) and touches a buffer (a
//!    read, a write or a copy issue of it), that buffer is *racy* for the rest of the execution. A
//!    read of a racy buffer, including the racing read itself, may return `-1` (torn: a mix of
//!    versions) or any version written into the buffer so far in that execution (0, the initial
//!    contents, every `write` and every copy issued, landed or not). The model's own value is one of
//!    them. Should a read ever yield a value the program keeps (the language does not allow it today:
//!    `read` is a statement), a different value could change its control flow, which the model
//!    cannot follow: every value other than the model's then ends in an [`Undefined`] pattern
//!    (cause `data-race`) after that read. A buffer stays racy
//!    once it has been: a later synchronised write is not enough to trust it again (a racing write
//!    may still land after it). Races on shared `var`s are not widened: vars are not part of the
//!    outcome, and a racy var read is taken to return one of the values the interleavings give.
//!    A read that races with a *later* write (the write is flagged) is not widened itself; the
//!    interleaving that runs the write first flags the read and covers the torn value.
//! 3. **Hangs**: every GPU wait is bounded (20 ms). A thread blocked at a wait forever times out,
//!    records that it hung, and exits without arriving anywhere, so its timing out can rescue no
//!    waiter; but its exit can release a `syncthreads`/`syncwarp` that was waiting for it (exited
//!    threads do not take part, as in the model), and the released threads run on. This is a
//!    *timeout* move: when no model action is enabled and some thread is unfinished, every thread
//!    then blocked at a wait is *armed*; from then on an armed thread that is still blocked may time
//!    out at any point (the timers run concurrently with whatever the released threads do),
//!    becoming `finished: false`. A thread that is armed and then steps (its wait returned) is
//!    disarmed. Timeouts never fire before the whole CTA has gone quiet: the generated waits are
//!    bounded by 20 ms while correct protocols progress in microseconds. Threads left waiting at a
//!    `syncthreads`/`syncwarp` with nothing able to release them are `finished: false` too (on the
//!    GPU such a kernel cannot return; the runner's watchdog decides what it records).
//!
//! Executions are explored by the engine's fold (`crate::engine::futures`): what
//! happens next depends only on the model state and the racy/hung/armed bookkeeping, never on the
//! observations made so far, so the set of futures of each such state is computed once and each
//! step's observations are prepended to its successors' futures. `machine` only says what a
//! step of the widened machine is (`Machine::apply`, through `Model::step`); it has no search.
//! The language has no unbounded loops, so every execution is finite and so is the exploration;
//! `limit` bounds the number of distinct states and the set says `complete: false` when it was
//! reached (its `contains` can then reject an outcome the model allows: treat a rejection as
//! inconclusive).
//!
//! [`forced_outcome`] replays a trace (the verifier's `Vec<Action>`) and returns the outcome it
//! forces; [`forced`] also says how each thread ended. Reads there take the model's value (no
//! widening: a trace is one execution). Every such replay walks the widened machine as a
//! transition system through the one replay cursor (`phasecheck_model::rt::path::Replay`), so an
//! action that is not enabled is refused in the same words as a trace file's.
//!
//! The files: `format` (the outcome, its text form, allowed sets and judging), `machine` (the
//! widened machine), `allowed` (the enumeration of allowed outcomes), `forced` (what one trace
//! forces) and `schedule` (the turnstile schedules the GPU replays a trace with).

mod allowed;
mod forced;
mod format;
mod machine;
mod reduce;
pub mod schedule;
#[cfg(test)]
mod tests;

pub use allowed::{
    allowed_after, allowed_outcomes, allowed_outcomes_capped, allowed_outcomes_unreduced, allowed_outcomes_within, MAX_HELD_FUTURES,
};
pub use forced::{forced, forced_outcome, prefix_observations, Forced, ThreadEnd};
pub use format::{
    completion_vars, recorded, AllowedSet, End, Judged, Outcome, Recorded, ThreadOutcome, Undefined, PROBE_BOTH, PROBE_NEITHER, PROBE_NONE,
    PROBE_PARITY_0, PROBE_PARITY_1,
};
pub use schedule::{commit_mates, one_execution, one_execution_landings_first, replay_schedule, schedule};
