//! One state of the whole CTA: threads, barriers, buffers, shared vars, async copies in flight.
//!
//! Everything is plain data with structural equality and hashing so the search can deduplicate
//! states exactly. Happens-before is tracked with vector clocks over *agents* (threads, then one
//! async-copy engine per buffer); an agent's own entry counts its releases, so an access recorded
//! as (agent, epoch) is ordered before another agent exactly when that agent's clock has caught up.

pub type Clock = Box<[u32]>;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub threads: Box<[ThreadState]>,
    pub barriers: Box<[BarrierState]>,
    pub buffers: Box<[Cell]>,
    pub vars: Box<[Cell]>,
    /// Async copies issued and not yet landed, in issue order.
    pub copies: Vec<CopyInFlight>,
    /// Clocks of the async-copy engines, one per buffer.
    pub engines: Box<[Clock]>,
    /// Phase knowledge of the async-copy engines, one per buffer: what the issuers knew when they
    /// issued, which a landing releases into the barrier it completes on (a waiter on that barrier
    /// acquires it, as it acquires the issuer's writes).
    pub engines_known: Box<[Box<[i64]>]>,
    /// Per warp: the warp-batched commits made since the last `syncwarp`, as (sequence number,
    /// barrier, divergence signature of the group that made it).
    pub commit_logs: Box<[Vec<(u16, u16, u64)>]>,
    /// The async proxy (issue 13): asynchronous reads in flight and proxy-fence bookkeeping.
    pub proxy: ProxyState,
}

// ---- The async proxy (issue 13) -----------------------------------------------------------------

/// What the async proxy is doing to shared memory, and what the generic proxy has not yet fenced
/// for it (docs/semantics.md, "The async proxy").
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProxyState {
    /// Asynchronous reads of shared memory (TMA stores, wgmma operands) issued and not yet
    /// retired by a wait of their issuer, in issue order.
    pub reads: Vec<AsyncRead>,
    /// Per buffer: its last write is a generic-proxy write (a thread's `write`) that no
    /// `fence_proxy_async` ordered after it has covered yet.
    pub unfenced_write: Box<[bool]>,
    /// Per barrier: initialised by a thread's `init` that the thread has not yet followed with a
    /// `fence_mbarrier_init` (or `fence_proxy_async`).
    pub unfenced_init: Box<[bool]>,
}

/// An asynchronous read of a buffer by the async proxy, issued by a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AsyncRead {
    pub buf: u16,
    pub issuer: u16,
    /// A wgmma operand (its group is a wgmma group); else a TMA store (a bulk group).
    pub wgmma: bool,
    /// 0: not yet in a committed group (bulk only); k >= 1: its group is the issuer's k-th newest.
    pub age: u16,
    /// The statement that issued it.
    pub stmt: crate::lang::ast::Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Running,
    /// Arrived at `syncwarp`, waiting for the rest of the warp.
    AtSyncWarp,
    /// Arrived at `syncthreads`, waiting for the rest of the CTA.
    AtSyncThreads,
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ThreadState {
    /// Always at a visible instruction (or past the end when done).
    pub pc: u32,
    pub status: Status,
    pub locals: Box<[i64]>,
    pub clock: Clock,
    /// Per barrier: the latest phase this thread knows the barrier reached (SEMANTICS.md's K),
    /// which decides the phase a parity wait names. It grows with the thread's own arrivals and
    /// successful waits, and with what it acquires from others (docs/model.md).
    pub known: Box<[i64]>,
    /// Branch outcomes since the last `syncwarp`, as `pc << 1 | taken`, kept only in roles that
    /// `commit` (nothing else reads it). Lanes of one role are converged while one's path is a
    /// prefix of the other's (the one behind has not yet reached a branch where they could part);
    /// they diverged once their paths differ.
    pub path: Vec<u32>,
    /// Commits executed since the last `syncwarp`.
    pub commit_seq: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Life {
    Uninit,
    Live,
    Invalidated,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BarrierState {
    pub life: Life,
    pub phase: i64,
    pub pending: i64,
    pub expected: i64,
    /// Arrivals made in the current phase, drops included: `pending + arrived` is what the phase
    /// needed when it began, which `pending` alone cannot show once a drop lowered both.
    pub arrived: i64,
    pub tx: i64,
    /// Who initialised it and at which epoch: a use must be ordered after the init.
    pub init_by: Option<(u16, u32)>,
    /// A wait that returned true has observed the preceding phase (PTX's missing-wait rule).
    pub observed_prev: bool,
    /// Join of the releases into the current phase.
    pub clock: Clock,
    /// Clock of the last completed phase: what a successful wait acquires.
    pub prev_clock: Clock,
    /// Join of the releasers' phase knowledge (`ThreadState::known`) in the current phase, and
    /// that of the last completed phase: knowledge of phases travels with happens-before.
    pub known: Box<[i64]>,
    pub prev_known: Box<[i64]>,
}

/// Race-tracking record for a buffer (value = version) or a shared var (value = its value).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cell {
    pub value: i64,
    /// Writes issued so far (a copy counts when issued): the default version of the next copy.
    pub writes: u32,
    pub last_write: Option<Access>,
    /// Reads since the last write, at most one per agent, sorted by agent.
    pub reads: Vec<Access>,
    /// An async copy into it is in flight.
    pub in_flight: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    pub agent: u16,
    pub epoch: u32,
    /// Made by a completion function (a race with it is completion-misuse).
    pub in_completion: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CopyInFlight {
    pub buf: u16,
    pub bar: u16,
    pub bytes: i64,
    pub version: i64,
    pub issuer: u16,
    /// The statement that issued it: a landing is shown at its own copy's line.
    pub stmt: crate::lang::ast::Span,
}

impl ThreadState {
    /// A hash of the role and the path, naming the converged group in commit logs. Two roles
    /// that share a warp are diverged from the start (docs/model.md): their lanes never form one
    /// group, exactly as if one role had split them with `if`.
    pub fn path_sig(&self, role: u16) -> u64 {
        std::iter::once(0x8000_0000 | role as u32)
            .chain(self.path.iter().copied())
            .fold(0xcbf2_9ce4_8422_2325u64, |h, d| (h ^ d as u64).wrapping_mul(0x100_0000_01b3))
    }
}

/// Neither path has left the other: one is a prefix of the other.
pub fn paths_compatible(a: &[u32], b: &[u32]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

impl State {
    pub fn all_done(&self) -> bool {
        self.threads.iter().all(|t| t.status == Status::Done)
    }
}

/// Pointwise maximum, for phase knowledge.
pub fn join_known(dst: &mut [i64], src: &[i64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        if *s > *d {
            *d = *s;
        }
    }
}

pub fn join_into(dst: &mut [u32], src: &[u32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        if *s > *d {
            *d = *s;
        }
    }
}

/// Whether an access is ordered before the point in time described by `clock`.
pub fn ordered_before(a: &Access, clock: &[u32]) -> bool {
    clock[a.agent as usize] >= a.epoch
}
