//! The mbarrier: init and inval, arrivals and drops, the tx-count, phase completion and the
//! completion function, and waits (blocking and `try_wait`) with parity aliasing.

use super::memory::Clock;

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
