//! Async copies in flight: issue, whole and partial landing (complete_tx on their barrier), and
//! cp.async with its mbarrier arrive-on.

impl CopyInFlight {
    /// A copy (not an arrive-on entry).
    pub fn is_copy(&self) -> bool {
        !matches!(self.kind, CopyKind::ArriveOn { .. })
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
