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
    /// Issue 13: the CTA's hardware named barriers (`bar_sync`/`bar_arrive`), ids 0..=15; empty
    /// when the protocol uses none. Cluster scope: when the protocol uses the cluster barrier,
    /// two more entries follow them, the cluster barrier's current phase and its last completed
    /// one (`count` = its phase mark, 0 before the first; step/cluster.rs).
    pub named: Box<[NamedBarState]>,
    /// The async proxy (issue 13): asynchronous reads in flight and proxy-fence bookkeeping.
    pub proxy: ProxyState,
}

/// Issue 13: one hardware named barrier. Idle (`count == 0`) between uses: a use starts when the
/// first warp arrives, fixing the thread count, and ends when `count` threads have arrived.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NamedBarState {
    /// The thread count of the current use; 0 when idle.
    pub count: i64,
    /// Threads arrived so far (whole warps: `warp_size` each).
    pub arrived: i64,
    /// Join of the arrivers' histories (bar.sync and bar.arrive order memory among participants).
    pub clock: Clock,
    /// Join of the arrivers' phase knowledge of the mbarriers.
    pub known: Box<[i64]>,
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
    /// Issue 13: executed `bar_sync`/`bar_arrive`, waiting for the other lanes of its warp (the
    /// warp arrives as one).
    AtNamedBar,
    /// Issue 13: its warp arrived at a `bar_sync`; waiting for the named barrier to complete.
    AtNamedWait,
    /// Cluster scope: at `cluster_wait`, until the phase it arrived on completes.
    AtClusterWait,
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
    /// Issue 13: per byte range records, once a partial access (an `offset = ...` copy or read)
    /// touched the buffer; sorted, disjoint, covering the buffer. While non-empty they replace
    /// `value`, `last_write` and `reads`; empty whenever every range has the same record.
    pub parts: Vec<RangeRec>,
}

/// Issue 13: the race record and version of bytes `lo .. hi` of a buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RangeRec {
    pub lo: i64,
    pub hi: i64,
    pub value: i64,
    pub last_write: Option<Access>,
    pub reads: Vec<Access>,
}

impl Cell {
    /// Every access record of the cell (whole-buffer and per range), for renamings.
    pub fn accesses_mut(&mut self) -> impl Iterator<Item = &mut Access> {
        self.last_write.iter_mut().chain(self.reads.iter_mut()).chain(
            self.parts
                .iter_mut()
                .flat_map(|r| r.last_write.iter_mut().chain(r.reads.iter_mut())),
        )
    }

    pub fn accesses(&self) -> impl Iterator<Item = &Access> {
        self.last_write
            .iter()
            .chain(self.reads.iter())
            .chain(self.parts.iter().flat_map(|r| r.last_write.iter().chain(r.reads.iter())))
    }

    /// The version of the byte at `at` (the whole buffer's while it has no per range records).
    pub fn value_at(&self, at: i64) -> i64 {
        self.parts.iter().find(|r| r.lo <= at && at < r.hi).map_or(self.value, |r| r.value)
    }
}

/// Issue 13: what an entry of `State::copies` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyKind {
    /// A TMA-style bulk copy: its landing does complete_tx on `bar`.
    Tma,
    /// A `cp_async`: its landing writes the buffer only; `bar` is `NO_BAR`.
    CpAsync,
    /// Not a copy: the arrive-on of a `cp_async_arrive(_noinc)` on `bar`, which fires once no
    /// cp.async copy of the same issuer precedes it in `State::copies` (`buf` is 0, unused).
    ArriveOn { noinc: bool },
}

/// The barrier of a copy no barrier tracks (a cp.async before its arrive-on).
pub const NO_BAR: u16 = u16::MAX;

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
    /// Issue 13: what it is, and the byte range it writes (`0 .. buffer bytes` for whole copies).
    pub kind: CopyKind,
    pub offset: i64,
    pub len: i64,
}

impl CopyInFlight {
    /// A copy (not an arrive-on entry).
    pub fn is_copy(&self) -> bool {
        !matches!(self.kind, CopyKind::ArriveOn { .. })
    }
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
