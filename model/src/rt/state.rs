//! One state of the whole CTA: threads, barriers, buffers, shared vars, async copies in flight.
//!
//! Everything is plain data with structural equality and hashing so the search can deduplicate
//! states exactly. Happens-before is tracked with vector clocks over *agents* (threads, then one
//! async-copy engine per buffer); an agent's own entry counts its releases, so an access recorded
//! as (agent, epoch) is ordered before another agent exactly when that agent's clock has caught up.

//!
//! Each object's record lives with its step rules (rt/<object>.rs); this file assembles them.

pub use super::copies::{CopyInFlight, CopyKind, NO_BAR};
pub use super::mbarrier::{BarrierState, Life};
pub use super::memory::{join_into, join_known, ordered_before, Access, Cell, Clock, RangeRec};
pub use super::named::NamedBarState;
pub use super::proxy::{AsyncRead, ProxyState};
pub use super::thread::{Status, ThreadState};
pub use super::warp::paths_compatible;

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
    /// The CTA's hardware named barriers (`bar_sync`/`bar_arrive`), ids 0..=15; empty
    /// when the protocol uses none. Cluster scope: when the protocol uses the cluster barrier,
    /// two more entries follow them, the cluster barrier's current phase and its last completed
    /// one (`count` = its phase mark, 0 before the first; rt/cluster.rs).
    pub named: Box<[NamedBarState]>,
    /// The async proxy: asynchronous reads in flight and proxy-fence bookkeeping.
    pub proxy: ProxyState,
}

impl State {
    pub fn all_done(&self) -> bool {
        self.threads.iter().all(|t| t.status == Status::Done)
    }
}
