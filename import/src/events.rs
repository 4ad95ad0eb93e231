//! What a thread's run records: the values registers hold, and the barrier operations and
//! shared-memory accesses it performed, in order.

use crate::ptx::{Function, Pos, SrcLoc};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Int(i64),
    /// An address in shared memory: symbol + byte offset.
    Sh(String, i64),
    /// The address of a kernel param (a `__grid_constant__` tensor map), or of a field of a
    /// struct param: `NAME` or `NAME+OFF` (see [`param_key`]).
    Param(String),
    /// The state an `mbarrier.arrive` returned: the thread's token number.
    Token(usize),
    Unknown,
}

/// A barrier: shared symbol + byte offset.
pub type Bar = (String, i64);

#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Init {
        bar: Bar,
        count: i64,
    },
    Arrive {
        bar: Bar,
        count: i64,
        token: Option<usize>,
    },
    ArriveExpectTx {
        bar: Bar,
        bytes: i64,
    },
    ExpectTx {
        bar: Bar,
        bytes: i64,
    },
    CompleteTx {
        bar: Bar,
        bytes: i64,
    },
    ArriveDrop {
        bar: Bar,
    },
    WaitParity {
        bar: Bar,
        parity: i64,
    },
    WaitToken {
        bar: Bar,
        token: usize,
    },
    Inval {
        bar: Bar,
    },
    Copy {
        buf: String,
        off: i64,
        bytes: i64,
        bar: Bar,
    },
    CpAsync {
        buf: String,
        off: i64,
        bytes: i64,
    },
    CpAsyncArrive {
        bar: Bar,
        noinc: bool,
    },
    /// `cp.async.commit_group`: the thread's uncommitted `cp.async`s form a group.
    CpAsyncCommit,
    /// `cp.async.wait_group N` (`None`: `cp.async.wait_all`).
    CpAsyncWait {
        n: Option<i64>,
    },
    /// A bulk store reading `bytes` from `off` (`bytes` is 0 when the size is not a constant:
    /// the whole buffer is taken as read).
    Store {
        buf: String,
        off: i64,
        bytes: i64,
    },
    CommitGroup,
    WaitGroup {
        n: i64,
        read: bool,
    },
    FenceProxy,
    FenceInit,
    SyncThreads,
    BarSync {
        id: i64,
        count: i64,
    },
    BarArrive {
        id: i64,
        count: i64,
    },
    SyncWarp {
        mask: i64,
    },
    /// `barrier.cluster.arrive[.relaxed]` (a cluster of one CTA: every thread of the block).
    ClusterArrive,
    /// `barrier.cluster.wait`.
    ClusterWait,
    /// One wgmma group: the shared-memory operand buffers its `wgmma.mma_async`s read through
    /// their descriptors, closed by `wgmma.commit_group`.
    Wgmma {
        bufs: Vec<(String, i64)>,
    },
    /// `wgmma.wait_group N`.
    WgmmaWait {
        n: i64,
    },
    Read {
        buf: String,
        off: i64,
        bytes: i64,
    },
    Write {
        buf: String,
        off: i64,
        bytes: i64,
    },
    /// A warp-collective store (`stmatrix`): every lane of the warp runs it, each writing its
    /// own rows (`bytes` 0: a lane that gives no address); a warp's lanes are one write of
    /// their union.
    WarpWrite {
        buf: String,
        off: i64,
        bytes: i64,
    },
}

#[derive(Clone, Debug)]
pub struct Event {
    pub op: Op,
    pub pos: Pos,
    pub src: SrcLoc,
}

/// What one thread did.
#[derive(Clone, Debug, Default)]
pub struct ThreadRun {
    pub events: Vec<Event>,
    /// The thread's `elect.sync` returned true at least once.
    pub elected: bool,
}

pub struct Launch<'a> {
    pub block: [u32; 3],
    pub params: &'a HashMap<String, i64>,
    pub tma_bytes: &'a HashMap<String, i64>,
}

/// The bytes the thread announced on `bar` most recently (for a tensor copy without
/// `--tma-bytes`).
pub fn expected_tx(run: &ThreadRun, bar: &Bar) -> i64 {
    run.events
        .iter()
        .rev()
        .find_map(|e| match &e.op {
            Op::ArriveExpectTx { bar: b, bytes } | Op::ExpectTx { bar: b, bytes } if b == bar => Some(*bytes),
            _ => None,
        })
        .unwrap_or(0)
}

/// The bytes `--tma-bytes` gives a tensor copy or store: by its tensor-map param (PTX name or
/// index), else by its shared buffer.
/// The key of the param `name` at byte offset `off`: `name`, or `name+off` for a field of a
/// struct param (`__grid_constant__` globals, as ThunderKittens passes them).
pub fn param_key(name: &str, off: i64) -> String {
    if off == 0 {
        name.to_string()
    } else {
        format!("{name}+{off}")
    }
}

/// A `--param`/`--tma-bytes` key (`NAME`, `K`, `NAME+OFF` or `K+OFF`) as the entry's
/// [`param_key`], when it names one of the entry's params.
pub fn entry_param_key(entry: &Function, key: &str) -> Option<String> {
    let (base, off) = match key.rsplit_once('+') {
        Some((b, o)) => (b, o.trim().parse::<i64>().ok()?),
        None => (key, 0),
    };
    let base = base.trim();
    let name = if entry.params.iter().any(|p| p == base) {
        base.to_string()
    } else {
        entry.params.get(base.parse::<usize>().ok()?)?.clone()
    };
    Some(param_key(&name, off))
}

pub fn given_bytes(launch: &Launch, entry: &Function, tmap: Option<&String>, buf: &str) -> Option<i64> {
    let by_param = tmap.and_then(|t| {
        launch
            .tma_bytes
            .iter()
            .find(|(k, _)| entry_param_key(entry, k).as_ref() == Some(t))
            .map(|(_, v)| v)
    });
    let index = tmap.and_then(|t| entry.params.iter().position(|p| p == t)).map(|k| k.to_string());
    by_param
        .or_else(|| tmap.and_then(|t| launch.tma_bytes.get(t)))
        .or_else(|| index.as_ref().and_then(|k| launch.tma_bytes.get(k)))
        .or_else(|| launch.tma_bytes.get(&crate::names::demangle(buf)))
        .or_else(|| launch.tma_bytes.get(buf))
        .copied()
}
