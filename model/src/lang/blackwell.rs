//! The Blackwell (sm100) statements: `tcgen05_mma`, `tcgen05_commit`, tensor memory
//! (`tmem_alloc`, `tmem_dealloc`, `tmem_relinquish`, `tcgen05_ld`, `tcgen05_wait_ld`) and cluster
//! launch control (`clc_try_cancel`). Their syntax tree, argument parsing and printing live here so
//! that the rest of the front end sees one `OpKind::Tc` (docs/language.md, "Blackwell").
//!
//! A tensor-memory region is declared as a `buffer`: the front end (lang::check, E118) keeps the
//! buffers named by a tensor-memory statement out of every shared-memory statement and back.

use super::ast::{Expr, Place};

/// One Blackwell statement.
#[derive(Clone, Debug)]
pub enum TcStmt {
    /// `tcgen05_mma(ACC, A, B, expect = V, version = W)`: an MMA issued by one thread, reading
    /// the shared-memory operand buffers `bufs` through the async proxy until it completes and
    /// writing the tensor-memory region `acc` (version `version`, by default the count of writes
    /// so far); `expect`: the version the operands must hold.
    Mma {
        acc: Place,
        bufs: Vec<Place>,
        expect: Option<Expr>,
        version: Option<Expr>,
    },
    /// `tcgen05_commit(B)`: one arrival on B once every tcgen05_mma the thread issued before has
    /// completed; `multicast = M`: on B in every CTA of mask M (2-CTA MMA).
    Commit { bar: Place, multicast: Option<Expr> },
    /// `tmem_alloc(T, cols)`.
    Alloc { tmem: Place, cols: Expr },
    /// `tmem_dealloc(T)`.
    Dealloc { tmem: Place },
    /// `tmem_relinquish()`: `tcgen05.relinquish_alloc_permit`.
    Relinquish,
    /// `tcgen05_ld(T, expect = V)`: an asynchronous load of T into registers, complete at the
    /// thread's next `tcgen05_wait_ld()`.
    Ld { tmem: Place, expect: Option<Expr> },
    /// `tcgen05_wait_ld()`: `tcgen05.wait::ld`.
    WaitLd,
    /// `clc_try_cancel(RESP, B)`: `clusterlaunchcontrol.try_cancel.async...mbarrier::complete_tx
    /// ::bytes`: the 16-byte response is written into RESP and completes 16 bytes on B.
    ClcTryCancel { resp: Place, bar: Place },
}

/// The statement words, for the parser's list of operations.
pub const WORDS: &[&str] = &[
    "tcgen05_mma",
    "tcgen05_commit",
    "tmem_alloc",
    "tmem_dealloc",
    "tmem_relinquish",
    "tcgen05_ld",
    "tcgen05_wait_ld",
    "clc_try_cancel",
];

/// The bytes of a cluster-launch-control response (PTX: a 16-byte opaque response).
pub const CLC_RESPONSE_BYTES: i64 = 16;

impl TcStmt {
    pub fn keyword(&self) -> &'static str {
        match self {
            TcStmt::Mma { .. } => "tcgen05_mma",
            TcStmt::Commit { .. } => "tcgen05_commit",
            TcStmt::Alloc { .. } => "tmem_alloc",
            TcStmt::Dealloc { .. } => "tmem_dealloc",
            TcStmt::Relinquish => "tmem_relinquish",
            TcStmt::Ld { .. } => "tcgen05_ld",
            TcStmt::WaitLd => "tcgen05_wait_ld",
            TcStmt::ClcTryCancel { .. } => "clc_try_cancel",
        }
    }

    /// The tensor-memory places it names.
    pub fn tmem_places(&self) -> Vec<&Place> {
        match self {
            TcStmt::Mma { acc, .. } => vec![acc],
            TcStmt::Alloc { tmem, .. } | TcStmt::Dealloc { tmem } | TcStmt::Ld { tmem, .. } => vec![tmem],
            _ => vec![],
        }
    }

    /// The shared-memory buffer places it names.
    pub fn smem_places(&self) -> Vec<&Place> {
        match self {
            TcStmt::Mma { bufs, .. } => bufs.iter().collect(),
            TcStmt::ClcTryCancel { resp, .. } => vec![resp],
            _ => vec![],
        }
    }

    /// The barrier places it names.
    pub fn bar_places(&self) -> Vec<&Place> {
        match self {
            TcStmt::Commit { bar, .. } | TcStmt::ClcTryCancel { bar, .. } => vec![bar],
            _ => vec![],
        }
    }

    /// Every place, tensor memory first, then buffers, then barriers (the order of the syntax).
    pub fn places(&self) -> Vec<&Place> {
        let mut v = self.tmem_places();
        v.extend(self.smem_places());
        v.extend(self.bar_places());
        v
    }

    /// Every expression outside the places' indices: counts, versions, masks.
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            TcStmt::Mma { expect, version, .. } => [expect, version].into_iter().flatten().collect(),
            TcStmt::Commit { multicast, .. } => multicast.iter().collect(),
            TcStmt::Alloc { cols, .. } => vec![cols],
            TcStmt::Ld { expect, .. } => expect.iter().collect(),
            TcStmt::Dealloc { .. } | TcStmt::Relinquish | TcStmt::WaitLd | TcStmt::ClcTryCancel { .. } => vec![],
        }
    }

    /// The arguments as written: positional ones, then `name = EXPR` for the named ones.
    pub fn args(&self, place: &dyn Fn(&Place) -> String, expr: &dyn Fn(&Expr) -> String) -> Vec<String> {
        let named = |n: &str, e: &Option<Expr>| e.as_ref().map(|e| format!("{n} = {}", expr(e)));
        match self {
            TcStmt::Mma {
                acc,
                bufs,
                expect,
                version,
            } => std::iter::once(place(acc))
                .chain(bufs.iter().map(place))
                .chain(named("expect", expect))
                .chain(named("version", version))
                .collect(),
            TcStmt::Commit { bar, multicast } => std::iter::once(place(bar)).chain(named("multicast", multicast)).collect(),
            TcStmt::Alloc { tmem, cols } => vec![place(tmem), expr(cols)],
            TcStmt::Dealloc { tmem } => vec![place(tmem)],
            TcStmt::Ld { tmem, expect } => std::iter::once(place(tmem)).chain(named("expect", expect)).collect(),
            TcStmt::Relinquish | TcStmt::WaitLd => vec![],
            TcStmt::ClcTryCancel { resp, bar } => vec![place(resp), place(bar)],
        }
    }

    /// The same statement with every place and expression mapped (the pretty-printer's
    /// span-free copy).
    pub fn map(&self, p: &dyn Fn(&Place) -> Place, e: &dyn Fn(&Expr) -> Expr) -> TcStmt {
        let oe = |x: &Option<Expr>| x.as_ref().map(e);
        match self {
            TcStmt::Mma {
                acc,
                bufs,
                expect,
                version,
            } => TcStmt::Mma {
                acc: p(acc),
                bufs: bufs.iter().map(p).collect(),
                expect: oe(expect),
                version: oe(version),
            },
            TcStmt::Commit { bar, multicast } => TcStmt::Commit {
                bar: p(bar),
                multicast: oe(multicast),
            },
            TcStmt::Alloc { tmem, cols } => TcStmt::Alloc {
                tmem: p(tmem),
                cols: e(cols),
            },
            TcStmt::Dealloc { tmem } => TcStmt::Dealloc { tmem: p(tmem) },
            TcStmt::Relinquish => TcStmt::Relinquish,
            TcStmt::Ld { tmem, expect } => TcStmt::Ld {
                tmem: p(tmem),
                expect: oe(expect),
            },
            TcStmt::WaitLd => TcStmt::WaitLd,
            TcStmt::ClcTryCancel { resp, bar } => TcStmt::ClcTryCancel {
                resp: p(resp),
                bar: p(bar),
            },
        }
    }
}
