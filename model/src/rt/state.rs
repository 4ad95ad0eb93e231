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

/// Overwrite a value with a copy of another, keeping the heap blocks it already holds where the
/// shapes agree. The search steps every enabled action of a state from a copy of it; successors
/// of one state have the same shape, so a successor already packed can take the next copy
/// without allocating (cloning and dropping a state was about a quarter of the engine's time).
/// The struct impls destructure exhaustively: a field added to a record stops the build here
/// instead of being left stale in a reused state.
pub trait Refill: Clone {
    fn refill(&mut self, src: &Self);
}

macro_rules! refill_by_copy {
    ($($t:ty),*) => {$(
        impl Refill for $t {
            #[inline]
            fn refill(&mut self, src: &Self) {
                *self = *src;
            }
        }
    )*};
}

refill_by_copy!(i64, u32, bool, (u16, u16, u64), Access, AsyncRead);

impl Refill for CopyInFlight {
    #[inline]
    fn refill(&mut self, src: &Self) {
        // Every field but the deferred arrive-on's release is `Copy`; the release keeps its
        // allocation when both have one.
        let mut release = self.release.take();
        match (&mut release, &src.release) {
            (Some(d), Some(s)) => {
                d.clock.refill(&s.clock);
                d.known.refill(&s.known);
            }
            (d, s) => *d = s.clone(),
        }
        *self = CopyInFlight { release, ..*src };
    }
}

impl<T: Refill> Refill for Box<[T]> {
    #[inline]
    fn refill(&mut self, src: &Self) {
        if self.len() == src.len() {
            for (d, s) in self.iter_mut().zip(src.iter()) {
                d.refill(s);
            }
        } else {
            *self = src.clone();
        }
    }
}

impl<T: Refill> Refill for Vec<T> {
    #[inline]
    fn refill(&mut self, src: &Self) {
        self.truncate(src.len());
        let kept = self.len();
        for (d, s) in self.iter_mut().zip(src.iter()) {
            d.refill(s);
        }
        self.extend_from_slice(&src[kept..]);
    }
}

impl Refill for ThreadState {
    fn refill(&mut self, src: &Self) {
        let ThreadState {
            pc,
            status,
            locals,
            clock,
            known,
            path,
            commit_seq,
        } = self;
        *pc = src.pc;
        *status = src.status;
        locals.refill(&src.locals);
        clock.refill(&src.clock);
        known.refill(&src.known);
        path.refill(&src.path);
        *commit_seq = src.commit_seq;
    }
}

impl Refill for BarrierState {
    fn refill(&mut self, src: &Self) {
        let BarrierState {
            life,
            phase,
            pending,
            expected,
            arrived,
            tx,
            init_by,
            init_pub,
            observed_prev,
            clock,
            prev_clock,
            known,
            prev_known,
        } = self;
        *life = src.life;
        *phase = src.phase;
        *pending = src.pending;
        *expected = src.expected;
        *arrived = src.arrived;
        *tx = src.tx;
        *init_by = src.init_by;
        *init_pub = src.init_pub;
        *observed_prev = src.observed_prev;
        clock.refill(&src.clock);
        prev_clock.refill(&src.prev_clock);
        known.refill(&src.known);
        prev_known.refill(&src.prev_known);
    }
}

impl Refill for RangeRec {
    fn refill(&mut self, src: &Self) {
        let RangeRec {
            lo,
            hi,
            value,
            last_write,
            reads,
            unfenced,
        } = self;
        *lo = src.lo;
        *hi = src.hi;
        *value = src.value;
        *last_write = src.last_write;
        reads.refill(&src.reads);
        *unfenced = src.unfenced;
    }
}

impl Refill for Cell {
    fn refill(&mut self, src: &Self) {
        let Cell {
            value,
            writes,
            last_write,
            reads,
            in_flight,
            parts,
            unfenced,
        } = self;
        *value = src.value;
        *writes = src.writes;
        *last_write = src.last_write;
        reads.refill(&src.reads);
        *in_flight = src.in_flight;
        parts.refill(&src.parts);
        *unfenced = src.unfenced;
    }
}

impl Refill for NamedBarState {
    fn refill(&mut self, src: &Self) {
        let NamedBarState {
            count,
            arrived,
            clock,
            known,
        } = self;
        *count = src.count;
        *arrived = src.arrived;
        clock.refill(&src.clock);
        known.refill(&src.known);
    }
}

impl Refill for ProxyState {
    fn refill(&mut self, src: &Self) {
        let ProxyState {
            reads,
            unfenced_init,
            tmem,
        } = self;
        reads.refill(&src.reads);
        unfenced_init.refill(&src.unfenced_init);
        tmem.refill(&src.tmem);
    }
}

impl Refill for State {
    fn refill(&mut self, src: &Self) {
        let State {
            threads,
            barriers,
            buffers,
            vars,
            copies,
            engines,
            engines_known,
            commit_logs,
            named,
            proxy,
        } = self;
        threads.refill(&src.threads);
        barriers.refill(&src.barriers);
        buffers.refill(&src.buffers);
        vars.refill(&src.vars);
        copies.refill(&src.copies);
        engines.refill(&src.engines);
        engines_known.refill(&src.engines_known);
        commit_logs.refill(&src.commit_logs);
        named.refill(&src.named);
        proxy.refill(&src.proxy);
    }
}
